//! The keyspace's table: one allocation per key, holding the key and its value together.
//!
//! Why not `Dict<Obj>`: a fixed node (link, 24-byte key, 40-byte value, access clock) is 80
//! bytes whatever it holds, where a 16-byte key with a 32-byte string needs 48 bytes of payload.
//! Here a node is a 16-byte header followed by exactly what the key needs, in one of three
//! layouts, chosen from the value as Redis chooses an object encoding:
//!
//! - `STR`: the key's bytes, then the string's (strings up to `EMB_INLINE` bytes: embstr);
//! - `INT`: an `i64`, then the key (the int encoding);
//! - `OBJ`: a whole `Value` (40 bytes, aligned), then the key: everything else.
//!
//! A 16-byte key holding a 32-byte string is then exactly 64 bytes (a jemalloc size class)
//! instead of 80, a counter is 40, and a small hash 72 (80 with jemalloc) as before.
//!
//! Commands see values as `&Value` through the `ValRef` and `Entry` guards: `STR` and `INT`
//! nodes materialize a `Value::Emb` / `Value::Int` on the stack when read (no allocation), and
//! a command that wants `&mut Value` (APPEND, SETBIT, a list push on the wrong type …) turns the
//! node into the `OBJ` layout first (`Entry::val_mut`), much as Redis turns an embstr into a raw
//! string before modifying it. Replacing a value (`Entry::set`) picks the best layout again.

use super::dict::{Chained, Link, RawDict};
use super::slot::{key_slot, INDEXED, SHARDS, SLOTS};
use super::value::{Obj, Value, EMB_INLINE};
use rand::Rng;
use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::cell::OnceCell;
use std::marker::PhantomData;
use std::ptr::{self, NonNull};
use std::sync::atomic::Ordering;

/// A key's node header; the key and value bytes follow it in the same allocation.
#[repr(C)]
pub struct KNode {
    next: Link<KNode>,
    /// Access clock (seconds), for OBJECT IDLETIME and LRU eviction.
    lru: u32,
    /// The key's length, or `LONG_KEY`: the length is then a `u64` stored before the key.
    klen: u16,
    /// `STR`, `INT` or `OBJ`.
    kind: u8,
    /// `STR`: the string's length.
    vlen: u8,
}

const HDR: usize = std::mem::size_of::<KNode>();
const VAL: usize = std::mem::size_of::<Value>();
const STR: u8 = 0;
const INT: u8 = 1;
const OBJ: u8 = 2;
/// Keys this long or longer keep their length outside the header (`OBJ` layout only).
const LONG_KEY: u16 = u16::MAX;

const _: () = assert!(HDR == 16 && VAL.is_multiple_of(8) && std::mem::align_of::<Value>() <= 8);
const _: () = assert!(EMB_INLINE <= u8::MAX as usize);

// SAFETY: a node owns its key and value (`Value` is Send and Sync); its link is owned by the
// table that holds it.
unsafe impl Send for KNode {}
// SAFETY: as above.
unsafe impl Sync for KNode {}

/// The layout a key of `klen` bytes holding `v` is stored in.
fn kind_for(klen: usize, v: &Value) -> u8 {
    match v {
        _ if klen >= LONG_KEY as usize => OBJ,
        Value::Int(_) => INT,
        Value::Emb { .. } => STR,
        _ => OBJ,
    }
}

/// (allocation size, offset of the key) of a node.
fn layout_of(kind: u8, klen: usize, vlen: usize) -> (usize, usize) {
    match kind {
        STR => (HDR + klen + vlen, HDR),
        INT => (HDR + 8 + klen, HDR + 8),
        _ if klen >= LONG_KEY as usize => (HDR + VAL + 8 + klen, HDR + VAL + 8),
        _ => (HDR + VAL + klen, HDR + VAL),
    }
}

fn node_layout(size: usize) -> Layout {
    // Sizes are bounded by the protocol's key and argument limits, far below isize::MAX.
    Layout::from_size_align(size, 8).expect("node size is bounded by the request limits")
}

impl KNode {
    /// Allocates an unlinked node for `key` holding `v` in the layout `kind_for` picks, or in
    /// `OBJ` when `force_obj`, with `pre` bytes before its header (`LINKS` in a table indexed
    /// by slot, else 0).
    fn new_node(key: &[u8], lru: u32, v: Value, force_obj: bool, pre: usize) -> NonNull<KNode> {
        let kind = if force_obj { OBJ } else { kind_for(key.len(), &v) };
        let vlen = match (&v, kind) {
            (Value::Emb { len, .. }, STR) => *len as usize,
            _ => 0,
        };
        let (size, koff) = layout_of(kind, key.len(), vlen);
        let layout = node_layout(pre + size);
        // SAFETY: the allocation is `pre + size` bytes, aligned to 8 (`pre` is 0 or 16); every
        // write below stays inside the offsets `layout_of` accounted for, after the prefix, and
        // typed writes are at 8-aligned offsets.
        unsafe {
            let base = alloc(layout);
            if base.is_null() {
                handle_alloc_error(layout);
            }
            let p = base.add(pre);
            let klen = key.len().min(LONG_KEY as usize) as u16;
            ptr::write(p as *mut KNode, KNode { next: None, lru, klen, kind, vlen: vlen as u8 });
            if klen == LONG_KEY {
                ptr::write(p.add(HDR + VAL) as *mut u64, key.len() as u64);
            }
            ptr::copy_nonoverlapping(key.as_ptr(), p.add(koff), key.len());
            match v {
                Value::Emb { len, buf } if kind == STR => {
                    ptr::copy_nonoverlapping(buf.as_ptr(), p.add(koff + key.len()), len as usize)
                }
                Value::Int(i) if kind == INT => ptr::write(p.add(HDR) as *mut i64, i),
                v => ptr::write(p.add(HDR) as *mut Value, v),
            }
            NonNull::new_unchecked(p as *mut KNode)
        }
    }

    /// # Safety
    /// `p` is a live node.
    #[inline]
    unsafe fn hdr<'a>(p: NonNull<KNode>) -> &'a KNode {
        &*p.as_ptr()
    }

    /// (offset, length) of the key.
    ///
    /// # Safety
    /// `p` is a live node.
    #[inline]
    unsafe fn key_span(p: NonNull<KNode>) -> (usize, usize) {
        let h = Self::hdr(p);
        match h.kind {
            STR => (HDR, h.klen as usize),
            INT => (HDR + 8, h.klen as usize),
            _ if h.klen == LONG_KEY => (HDR + VAL + 8, *(Self::at(p, HDR + VAL) as *const u64) as usize),
            _ => (HDR + VAL, h.klen as usize),
        }
    }

    /// # Safety
    /// `p` is a live node and `off` inside it.
    #[inline]
    unsafe fn at(p: NonNull<KNode>, off: usize) -> *mut u8 {
        (p.as_ptr() as *mut u8).add(off)
    }

    /// The `Value` of an `OBJ` node.
    ///
    /// # Safety
    /// `p` is a live `OBJ` node.
    #[inline]
    unsafe fn value_ptr(p: NonNull<KNode>) -> *mut Value {
        Self::at(p, HDR) as *mut Value
    }

    /// The value of a `STR` or `INT` node, materialized (no allocation); None for `OBJ`.
    ///
    /// # Safety
    /// `p` is a live node.
    #[inline]
    unsafe fn inline_value(p: NonNull<KNode>) -> Option<Value> {
        let h = Self::hdr(p);
        match h.kind {
            STR => {
                let mut buf = [0u8; EMB_INLINE];
                let len = h.vlen as usize;
                ptr::copy_nonoverlapping(Self::at(p, HDR + h.klen as usize), buf.as_mut_ptr(), len);
                Some(Value::Emb { len: h.vlen, buf })
            }
            INT => Some(Value::Int(*(Self::at(p, HDR) as *const i64))),
            _ => None,
        }
    }

    /// Frees the node's memory without dropping its value.
    ///
    /// # Safety
    /// `p` is a live node, unlinked from its table and its slot's list, whose `OBJ` value (if
    /// any) was moved out or dropped, made with this `pre`.
    unsafe fn release(p: NonNull<KNode>, pre: usize) {
        let (koff, klen) = Self::key_span(p);
        let h = Self::hdr(p);
        let size = koff + klen + if h.kind == STR { h.vlen as usize } else { 0 };
        dealloc((p.as_ptr() as *mut u8).sub(pre), node_layout(pre + size));
    }

    /// Drops the node's value and frees it.
    ///
    /// # Safety
    /// As `release`, but the value is still in place.
    unsafe fn free_with(p: NonNull<KNode>, pre: usize) {
        if Self::hdr(p).kind == OBJ {
            ptr::drop_in_place(Self::value_ptr(p));
        }
        Self::release(p, pre);
    }

    /// The slot-list links in the prefix of a node of an indexed table.
    ///
    /// # Safety
    /// `p` is a live node made with `pre == LINKS`.
    #[inline]
    unsafe fn links(p: NonNull<KNode>) -> *mut SlotLinks {
        (p.as_ptr() as *mut u8).sub(LINKS) as *mut SlotLinks
    }

    /// Puts `p` first in the list that `head` starts (newest first, as Redis 7.2 lists a
    /// slot's keys).
    ///
    /// # Safety
    /// `p` is a live, unlisted node with links; `head` is a list head that outlives it.
    unsafe fn list_push(p: NonNull<KNode>, head: &mut Option<NonNull<KNode>>) {
        let l = Self::links(p);
        (*l).next = *head;
        (*l).pprev = NonNull::from(&mut *head);
        if let Some(n) = *head {
            (*Self::links(n)).pprev = NonNull::new_unchecked(ptr::addr_of_mut!((*l).next));
        }
        *head = Some(p);
    }

    /// Takes `p` out of its slot's list, in O(1): its predecessor's link is known.
    ///
    /// # Safety
    /// `p` is a live, listed node.
    unsafe fn list_unlink(p: NonNull<KNode>) {
        let l = Self::links(p);
        *(*l).pprev.as_ptr() = (*l).next;
        if let Some(n) = (*l).next {
            (*Self::links(n)).pprev = (*l).pprev;
        }
    }

    /// Puts `new` in `old`'s place in its slot's list (a key moved to a new node).
    ///
    /// # Safety
    /// `old` is a live, listed node; `new` a live, unlisted one with links.
    unsafe fn list_replace(old: NonNull<KNode>, new: NonNull<KNode>) {
        let (o, l) = (Self::links(old), Self::links(new));
        ptr::copy_nonoverlapping(o, l, 1);
        *(*l).pprev.as_ptr() = Some(new);
        if let Some(n) = (*l).next {
            (*Self::links(n)).pprev = NonNull::new_unchecked(ptr::addr_of_mut!((*l).next));
        }
    }

    /// Whether `p` holds a string, without materializing an inline value.
    ///
    /// # Safety
    /// `p` is a live node.
    #[inline]
    unsafe fn is_string(p: NonNull<KNode>) -> bool {
        match Self::hdr(p).kind {
            STR | INT => true,
            _ => (*Self::value_ptr(p)).is_string(),
        }
    }

    /// `p`'s string bytes read in place (integers rendered into `buf`); None if not a string.
    /// GET replies from here: materializing the inline value first would copy it twice.
    ///
    /// # Safety
    /// `p` is a live node that outlives the returned slice.
    #[inline]
    unsafe fn str_bytes(p: NonNull<KNode>, buf: &mut itoa::Buffer) -> Option<&[u8]> {
        let h = Self::hdr(p);
        match h.kind {
            STR => Some(std::slice::from_raw_parts(Self::at(p, HDR + h.klen as usize), h.vlen as usize)),
            INT => Some(buf.format(*(Self::at(p, HDR) as *const i64)).as_bytes()),
            _ => (*Self::value_ptr(p)).as_bytes(buf),
        }
    }

    /// `p`'s value as `&Value`: `OBJ` nodes lend theirs; `STR` and `INT` nodes materialize it
    /// into `cell` on first use.
    ///
    /// # Safety
    /// `p` is a live node that outlives the returned reference.
    #[inline]
    unsafe fn view(p: NonNull<KNode>, cell: &OnceCell<Value>) -> &Value {
        if Self::hdr(p).kind == OBJ {
            &*Self::value_ptr(p)
        } else {
            cell.get_or_init(|| Self::inline_value(p).expect("STR and INT nodes hold a value inline"))
        }
    }
}

// SAFETY: nodes are made by `KNode::new_node` and freed once by `free`, which drops the value of
// an `OBJ` node and releases exactly the size `new_node` requested.
unsafe impl Chained for KNode {
    #[inline]
    unsafe fn key<'a>(p: NonNull<Self>) -> &'a [u8] {
        let (off, len) = Self::key_span(p);
        std::slice::from_raw_parts(Self::at(p, off), len)
    }
    #[inline]
    unsafe fn next(p: NonNull<Self>) -> *mut Link<Self> {
        ptr::addr_of_mut!((*p.as_ptr()).next)
    }
    unsafe fn free(p: NonNull<Self>) {
        Self::free_with(p, KeyTable::pre())
    }
}

/// A shard's keys and their values.
pub struct KeyTable {
    dict: RawDict<KNode>,
    /// In cluster mode, the shard's keys by slot (see `SlotIndex`), made with the first key.
    /// Whether a table keeps one, and whether its nodes carry the links, is `slot::INDEXED`,
    /// set at start-up before any key exists and never cleared: one process-wide flag rather
    /// than one per table, so that the guards that replace a key's node (`Entry`, on GET's
    /// path) need not carry it.
    slots: Option<Box<SlotIndex>>,
}

const SLOTS_PER_SHARD: usize = SLOTS / SHARDS;

/// A shard's keys by slot (a shard holds the `SLOTS / SHARDS` slots whose low bits are its
/// index; entry `slot / SHARDS`), kept as keys come and go, as Redis 7.2's slot-to-keys index:
/// how many keys each slot holds (COUNTKEYSINSLOT in O(1)) and a list of them threaded
/// through the nodes, newest first (GETKEYSINSLOT and the deletion of a lost slot in
/// O(keys in the slot), in Redis's order). Like Redis's, it counts keys whose TTL passed but
/// that were not yet deleted. Boxed: the first node's `pprev` points into it, so it must not
/// move when the table does (SWAPDB, FLUSHALL ASYNC).
struct SlotIndex {
    count: [u32; SLOTS_PER_SHARD],
    head: [Option<NonNull<KNode>>; SLOTS_PER_SHARD],
}

/// The 16 bytes before a node's header in a table indexed by slot (Redis 7.2 gives each key's
/// dict entry the same two pointers in cluster mode).
#[repr(C)]
struct SlotLinks {
    next: Option<NonNull<KNode>>,
    /// The link that points at this node: the previous node's `next`, or the slot's head.
    pprev: NonNull<Option<NonNull<KNode>>>,
}

const LINKS: usize = std::mem::size_of::<SlotLinks>();
const _: () = assert!(LINKS == 16);

impl SlotIndex {
    fn empty() -> Self {
        SlotIndex { count: [0; SLOTS_PER_SHARD], head: [None; SLOTS_PER_SHARD] }
    }
}

// SAFETY: the index's pointers are to nodes the table owns (see KNode's Send and Sync).
unsafe impl Send for SlotIndex {}
// SAFETY: as above.
unsafe impl Sync for SlotIndex {}

impl Default for KeyTable {
    fn default() -> Self {
        Self::new()
    }
}

impl KeyTable {
    pub const fn new() -> Self {
        KeyTable { dict: RawDict::new(), slots: None }
    }

    /// The bytes before each node's header: the slot links in cluster mode.
    #[inline]
    fn pre() -> usize {
        if INDEXED.load(Ordering::Relaxed) {
            LINKS
        } else {
            0
        }
    }

    /// How many keys `slot` holds (cluster mode; `slot` must map to this shard).
    pub fn count_in_slot(&self, slot: usize) -> usize {
        self.slots.as_ref().map_or(0, |ix| ix.count[slot / SHARDS] as usize)
    }

    /// Visits the keys of `slot` (cluster mode; `slot` must map to this shard), newest first,
    /// until `f` returns false: O(keys visited).
    pub fn slot_keys_while(&self, slot: usize, mut f: impl FnMut(&[u8]) -> bool) {
        let Some(ix) = &self.slots else { return };
        let mut cur = ix.head[slot / SHARDS];
        while let Some(p) = cur {
            // SAFETY: listed nodes are live while the table is borrowed.
            unsafe {
                if !f(KNode::key(p)) {
                    return;
                }
                cur = (*KNode::links(p)).next;
            }
        }
    }

    pub fn len(&self) -> usize {
        self.dict.len()
    }

    pub fn is_empty(&self) -> bool {
        self.dict.is_empty()
    }

    pub fn clear(&mut self) {
        self.dict.clear();
        if let Some(ix) = &mut self.slots {
            **ix = SlotIndex::empty();
        }
    }

    /// See [`RawDict::stats`].
    pub fn stats(&self) -> Vec<(usize, usize, Vec<usize>)> {
        self.dict.stats()
    }

    /// See `RawDict::prefetch_bucket`.
    #[inline]
    pub fn prefetch_bucket(&self, hash: u64) {
        self.dict.prefetch_bucket(hash)
    }

    /// See `RawDict::prefetch_node`.
    #[inline]
    pub fn prefetch_node(&self, hash: u64) {
        self.dict.prefetch_node(hash)
    }

    /// See `RawDict::prefetch_second`.
    #[inline]
    pub fn prefetch_second(&self, hash: u64, key: &[u8]) {
        self.dict.prefetch_second(hash, key)
    }

    /// The key's value, for reading.
    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<ValRef<'_>> {
        self.dict.find(key).map(|node| ValRef { node, cell: OnceCell::new(), _t: PhantomData })
    }

    pub fn contains_key(&self, key: &[u8]) -> bool {
        self.dict.find(key).is_some()
    }

    /// The table is moving to a larger or smaller bucket array.
    pub fn is_rehashing(&self) -> bool {
        self.dict.is_rehashing()
    }

    /// Moves up to `n` buckets to the new array; true while more remain.
    pub fn rehash(&mut self, n: usize) -> bool {
        self.dict.rehash(n)
    }

    /// The heap the bucket arrays take.
    pub fn table_bytes(&self) -> usize {
        self.dict.table_bytes()
    }

    /// The key's entry, for reading and writing.
    #[inline]
    pub fn get_mut(&mut self, key: &[u8]) -> Option<Entry<'_>> {
        self.dict.find_link(key).map(|link| Entry { link, cell: OnceCell::new(), _t: PhantomData })
    }

    /// `get_mut` for a key whose `dict::hash_key` the caller already has.
    #[inline]
    pub fn get_mut_hashed(&mut self, key: &[u8], hash: u64) -> Option<Entry<'_>> {
        self.dict.find_link_hashed(key, hash).map(|link| Entry { link, cell: OnceCell::new(), _t: PhantomData })
    }

    /// Adds a key known to be absent. In cluster mode it is counted and listed in its slot (a
    /// key's slot is a CRC of it, paid here only when a key is created or deleted, never when
    /// one is read or replaced).
    pub fn insert_new(&mut self, key: &[u8], obj: Obj) {
        let pre = Self::pre();
        if pre != 0 && self.slots.is_none() {
            debug_assert!(self.dict.is_empty(), "slot::INDEXED was set after keys existed");
            self.slots = Some(Box::new(SlotIndex::empty()));
        }
        let node = KNode::new_node(key, obj.lru, obj.val, false, pre);
        if let Some(ix) = &mut self.slots {
            let i = key_slot(key) / SHARDS;
            ix.count[i] += 1;
            // SAFETY: the node is new and has links; the index outlives it (it is boxed and
            // dropped only after the nodes are freed).
            unsafe { KNode::list_push(node, &mut ix.head[i]) };
        }
        self.dict.link_new(node);
    }

    /// Adds or replaces a key.
    pub fn insert(&mut self, key: &[u8], obj: Obj) {
        match self.get_mut(key) {
            Some(mut e) => {
                e.set(obj.val);
                e.set_lru(obj.lru);
            }
            None => self.insert_new(key, obj),
        }
    }

    /// Removes a key, returning its value.
    pub fn remove(&mut self, key: &[u8]) -> Option<Obj> {
        let p = self.dict.unlink(key)?;
        let pre = Self::pre();
        if let Some(ix) = &mut self.slots {
            ix.count[key_slot(key) / SHARDS] -= 1;
            // SAFETY: the nodes of an indexed table are listed.
            unsafe { KNode::list_unlink(p) };
        }
        // SAFETY: the node was unlinked and is ours; an `OBJ` value is moved out before the
        // memory is released without dropping it.
        unsafe {
            let lru = KNode::hdr(p).lru;
            let val = match KNode::inline_value(p) {
                Some(v) => v,
                None => ptr::read(KNode::value_ptr(p)),
            };
            KNode::release(p, pre);
            Some(Obj { val, lru })
        }
    }

    /// Visits every key and its value (no particular order).
    pub fn for_each(&self, mut f: impl FnMut(&[u8], &Value)) {
        self.dict.for_each(|p| {
            let cell = OnceCell::new();
            // SAFETY: nodes live while `self` is borrowed.
            unsafe { f(KNode::key(p), KNode::view(p, &cell)) }
        })
    }

    /// One step of a SCAN (see `RawDict::scan`).
    pub fn scan(&self, cursor: u64, mut f: impl FnMut(&[u8], &Value)) -> u64 {
        self.dict.scan(cursor, |p| {
            let cell = OnceCell::new();
            // SAFETY: as in `for_each`.
            unsafe { f(KNode::key(p), KNode::view(p, &cell)) }
        })
    }

    /// Up to `max` keys near a random place, with their `lru` fields (eviction's sample).
    pub fn sample<R: Rng>(&self, rng: &mut R, max: usize, mut f: impl FnMut(&[u8], u32)) {
        // SAFETY: nodes live while `self` is borrowed.
        self.dict.some(rng, max, |p| unsafe { f(KNode::key(p), KNode::hdr(p).lru) })
    }

    /// Some random key.
    pub fn random<R: Rng>(&self, rng: &mut R) -> Option<&[u8]> {
        // SAFETY: the node lives while `self` is borrowed.
        self.dict.random(rng).map(|p| unsafe { KNode::key(p) })
    }
}

/// A key's value, borrowed for reading (derefs to `Value`).
pub struct ValRef<'a> {
    node: NonNull<KNode>,
    cell: OnceCell<Value>,
    _t: PhantomData<&'a KeyTable>,
}

impl std::ops::Deref for ValRef<'_> {
    type Target = Value;
    #[inline]
    fn deref(&self) -> &Value {
        // SAFETY: the table is borrowed for the guard's life, so the node lives.
        unsafe { KNode::view(self.node, &self.cell) }
    }
}

impl ValRef<'_> {
    /// `Value::is_string` without materializing an inline value.
    #[inline]
    pub fn is_string(&self) -> bool {
        // SAFETY: as in `deref`.
        unsafe { KNode::is_string(self.node) }
    }

    /// `Value::as_bytes`, read in place.
    #[inline]
    pub fn as_bytes<'b>(&'b self, buf: &'b mut itoa::Buffer) -> Option<&'b [u8]> {
        // SAFETY: as in `deref`.
        unsafe { KNode::str_bytes(self.node, buf) }
    }

    /// The heap the key's node takes: header, key bytes, and the value when it lives inside
    /// (a short string, an integer, or the `Value` of any other), plus the slot links in
    /// cluster mode, at the allocator's size class.
    pub fn node_bytes(&self) -> usize {
        // SAFETY: as in `deref`.
        let (h, (_, klen)) = unsafe { (KNode::hdr(self.node), KNode::key_span(self.node)) };
        super::footprint::cls(KeyTable::pre() + layout_of(h.kind, klen, h.vlen as usize).0)
    }

    /// The access clock.
    pub fn lru(&self) -> u32 {
        // SAFETY: as in `deref`.
        unsafe { KNode::hdr(self.node).lru }
    }
}

/// A key's value, borrowed for reading and writing (derefs to `Value`; `val_mut` and `set`
/// write).
pub struct Entry<'a> {
    /// The link that holds the node: replacing the node (a new layout) rewrites it.
    link: NonNull<Link<KNode>>,
    cell: OnceCell<Value>,
    _t: PhantomData<&'a mut KeyTable>,
}

impl std::ops::Deref for Entry<'_> {
    type Target = Value;
    #[inline]
    fn deref(&self) -> &Value {
        // SAFETY: the table is borrowed mutably for the guard's life; only the guard changes
        // the node.
        unsafe { KNode::view(self.node(), &self.cell) }
    }
}

impl<'a> Entry<'a> {
    #[inline]
    fn node(&self) -> NonNull<KNode> {
        // SAFETY: the link was found occupied, and only this guard can change it, always to
        // another node.
        unsafe { (*self.link.as_ptr()).unwrap_unchecked() }
    }

    /// `Value::is_string` without materializing an inline value.
    #[inline]
    pub fn is_string(&self) -> bool {
        // SAFETY: the node lives (see `deref`).
        unsafe { KNode::is_string(self.node()) }
    }

    /// `Value::as_bytes`, read in place.
    #[inline]
    pub fn as_bytes<'b>(&'b self, buf: &'b mut itoa::Buffer) -> Option<&'b [u8]> {
        // SAFETY: the node lives (see `deref`).
        unsafe { KNode::str_bytes(self.node(), buf) }
    }

    /// The access clock.
    #[inline]
    pub fn lru(&self) -> u32 {
        // SAFETY: the node lives (see `deref`).
        unsafe { KNode::hdr(self.node()).lru }
    }

    #[inline]
    pub fn set_lru(&mut self, lru: u32) {
        // SAFETY: the node lives and the table is borrowed mutably.
        unsafe { (*self.node().as_ptr()).lru = lru }
    }

    /// The value, for modification in place. A string or integer stored inline is first moved
    /// into the general layout.
    pub fn val_mut(&mut self) -> &mut Value {
        let p = self.node();
        // SAFETY: the node lives; `relayout` replaces it with an `OBJ` node.
        unsafe {
            if let Some(v) = KNode::inline_value(p) {
                self.relayout(v, true);
            }
            &mut *KNode::value_ptr(self.node())
        }
    }

    /// `val_mut` for the rest of the table's borrow.
    pub fn into_mut(mut self) -> &'a mut Value {
        self.val_mut();
        // SAFETY: the node is now `OBJ` and lives while the table is borrowed ('a); the guard
        // that could change it is consumed.
        unsafe { &mut *KNode::value_ptr(self.node()) }
    }

    /// The value of a key stored in the general layout, for the rest of the table's borrow;
    /// None for a short string or an integer stored inline. For commands on aggregates, which
    /// answer WRONGTYPE to any string without moving it.
    pub fn into_obj(self) -> Option<&'a mut Value> {
        let p = self.node();
        // SAFETY: as in `into_mut`.
        unsafe { (KNode::hdr(p).kind == OBJ).then(|| &mut *KNode::value_ptr(p)) }
    }

    /// Replaces the value (the old one is dropped), storing it in the layout that suits it.
    pub fn set(&mut self, v: Value) {
        let p = self.node();
        self.cell = OnceCell::new();
        // SAFETY: the node lives and the table is borrowed mutably; same-layout writes stay
        // inside the node's allocation.
        unsafe {
            let h = KNode::hdr(p);
            let (_, klen) = KNode::key_span(p);
            match (kind_for(klen, &v), h.kind, v) {
                (OBJ, OBJ, v) => *KNode::value_ptr(p) = v,
                (INT, INT, Value::Int(i)) => *(KNode::at(p, HDR) as *mut i64) = i,
                (STR, STR, Value::Emb { len, buf }) if len == h.vlen => {
                    ptr::copy_nonoverlapping(buf.as_ptr(), KNode::at(p, HDR + klen), len as usize)
                }
                (_, _, v) => self.relayout(v, false),
            }
        }
    }

    /// Moves the key into a new node holding `v` and frees the old one (dropping its value).
    ///
    /// # Safety
    /// The guard's node is live.
    unsafe fn relayout(&mut self, v: Value, force_obj: bool) {
        let old = self.node();
        let pre = KeyTable::pre();
        let new = KNode::new_node(KNode::key(old), KNode::hdr(old).lru, v, force_obj, pre);
        *KNode::next(new) = (*KNode::next(old)).take();
        *self.link.as_ptr() = Some(new);
        if pre != 0 {
            KNode::list_replace(old, new);
        }
        KNode::free_with(old, pre);
        self.cell = OnceCell::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Obj {
        Obj { val: v, lru: 7 }
    }

    fn node_size(t: &mut KeyTable, key: &[u8]) -> usize {
        let e = t.get_mut(key).unwrap();
        // SAFETY: the node lives while the entry does.
        unsafe {
            let p = e.node();
            let (off, len) = KNode::key_span(p);
            off + len + if KNode::hdr(p).kind == STR { KNode::hdr(p).vlen as usize } else { 0 }
        }
    }

    #[test]
    fn layouts_by_value() {
        let mut t = KeyTable::new();
        let k16 = b"key:000000000001";
        t.insert_new(k16, obj(Value::from_text(&[b'v'; 32])));
        assert_eq!(node_size(&mut t, k16), 64, "16-byte key + 32-byte string in one 64-byte node");
        t.insert_new(b"n", obj(Value::from_bytes(b"12345")));
        assert_eq!(node_size(&mut t, b"n"), 25);
        t.insert_new(b"l", obj(Value::from_text(&[b'x'; 100])));
        assert_eq!(node_size(&mut t, b"l"), 57);
        assert_eq!(t.get(k16).unwrap().text_bytes(), Some(&[b'v'; 32][..]));
        assert!(matches!(*t.get(b"n").unwrap(), Value::Int(12345)));
        assert_eq!(t.get(b"l").unwrap().text_bytes(), Some(&[b'x'; 100][..]));
        assert_eq!(t.get(b"n").unwrap().lru(), 7);
    }

    #[test]
    fn set_and_val_mut_change_layouts() {
        let mut t = KeyTable::new();
        t.insert_new(b"k", obj(Value::from_text(b"abc")));
        {
            let mut e = t.get_mut(b"k").unwrap();
            assert_eq!(e.text_bytes(), Some(&b"abc"[..]));
            e.set(Value::from_text(b"xyz"));
            assert_eq!(e.text_bytes(), Some(&b"xyz"[..]));
            e.set(Value::from_text(b"longer value"));
            assert_eq!(e.text_bytes(), Some(&b"longer value"[..]));
            e.set(Value::Int(-5));
            assert!(matches!(*e, Value::Int(-5)));
            e.set(Value::Int(6));
            e.set_lru(99);
            let v = e.val_mut();
            assert!(matches!(v, Value::Int(6)));
            v.make_raw().unwrap().extend_from_slice(b"!");
            assert_eq!(e.text_bytes(), Some(&b"6!"[..]));
            assert_eq!(e.lru(), 99);
            e.set(Value::from_text(b"back inline"));
        }
        assert_eq!(node_size(&mut t, b"k"), 16 + 1 + 11);
        let o = t.remove(b"k").unwrap();
        assert_eq!(o.val.text_bytes(), Some(&b"back inline"[..]));
        assert_eq!(o.lru, 99);
        assert!(t.is_empty());
    }

    #[test]
    fn long_keys_and_many_keys() {
        let mut t = KeyTable::new();
        let long = vec![b'k'; 70_000];
        t.insert_new(&long, obj(Value::from_text(b"v")));
        assert_eq!(t.get(&long).unwrap().text_bytes(), Some(&b"v"[..]));
        t.get_mut(&long).unwrap().set(Value::Int(3));
        assert!(matches!(*t.get(&long).unwrap(), Value::Int(3)));
        for i in 0..5000u32 {
            let k = format!("key{i}");
            let v = match i % 3 {
                0 => Value::Int(i as i64),
                1 => Value::from_text(format!("val{i}").as_bytes()),
                _ => Value::Raw(format!("raw{i}").into_bytes()),
            };
            t.insert(k.as_bytes(), obj(v));
        }
        assert_eq!(t.len(), 5001);
        let mut seen = 0;
        t.for_each(|k, v| {
            seen += 1;
            if k.len() < 100 {
                let i: i64 = std::str::from_utf8(&k[3..]).unwrap().parse().unwrap();
                let mut b = itoa::Buffer::new();
                let s = v.as_bytes(&mut b).unwrap().to_vec();
                assert!(s.ends_with(i.to_string().as_bytes()));
            }
        });
        assert_eq!(seen, 5001);
        for i in (0..5000u32).step_by(2) {
            assert!(t.remove(format!("key{i}").as_bytes()).is_some());
        }
        assert_eq!(t.len(), 2501);
        assert!(t.random(&mut rand::thread_rng()).is_some());
        t.clear();
        assert!(t.get(&long).is_none());
    }
}
