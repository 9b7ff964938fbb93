//! The per-shard hash table.
//!
//! Written by hand because the keyspace needs three things `std`/hashbrown maps do not expose
//! (DESIGN §1): Redis's reverse-binary SCAN cursor, which returns every element present for the
//! whole scan at least once even while the table grows or shrinks; random sampling (RANDOMKEY,
//! active expiry, eviction); and incremental growth, so a shard holding a huge hash-tagged key
//! set never stops the world to rehash. Like Redis's `dict.c`: chained buckets, two tables
//! while rehashing, and a few buckets moved on each write.
//!
//! The table algorithms (`RawDict`) are generic over the node they chain (`Chained`), because
//! the keyspace stores its nodes differently from every other dict: one variable-size
//! allocation holding key and small value together (`engine::keytable`), where hashes, sets
//! and sorted sets use the fixed `Node<V>` behind the `Dict<V>` map API.

use rand::Rng;
use std::ptr::NonNull;
use std::sync::LazyLock;

/// One seeded hasher for the process: keys hash differently on every start (no hash flooding
/// from precomputed collisions) but identically in all shards.
static HASHER: LazyLock<ahash::RandomState> = LazyLock::new(ahash::RandomState::new);

#[inline]
pub fn hash_key(key: &[u8]) -> u64 {
    HASHER.hash_one(key)
}

/// Key equality without a call into libc's `memcmp` for keys of 4 to 16 bytes (most keys):
/// after the lengths, two overlapping words from each end cover every byte.
#[inline]
pub fn key_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    match n {
        8..=16 => {
            let w = |s: &[u8], i: usize| u64::from_le_bytes(s[i..i + 8].try_into().expect("8 bytes"));
            w(a, 0) == w(b, 0) && w(a, n - 8) == w(b, n - 8)
        }
        4..=7 => {
            let w = |s: &[u8], i: usize| u32::from_le_bytes(s[i..i + 4].try_into().expect("4 bytes"));
            w(a, 0) == w(b, 0) && w(a, n - 4) == w(b, n - 4)
        }
        _ => a == b,
    }
}

/// A key stored in a dict node: up to 22 bytes live inside the node itself, longer keys in
/// their own allocation. The enum is 24 bytes (a boxed slice would be 16), and most keys cost
/// no allocation and no extra cache miss on lookup.
#[derive(Clone)]
pub enum KeyBytes {
    Inline { len: u8, buf: [u8; INLINE_KEY] },
    Heap(Box<[u8]>),
}

pub const INLINE_KEY: usize = 22;

impl KeyBytes {
    #[inline]
    pub fn from_slice(k: &[u8]) -> KeyBytes {
        if k.len() <= INLINE_KEY {
            let mut buf = [0u8; INLINE_KEY];
            buf[..k.len()].copy_from_slice(k);
            KeyBytes::Inline { len: k.len() as u8, buf }
        } else {
            KeyBytes::Heap(k.into())
        }
    }

    #[inline]
    pub fn from_box(k: Box<[u8]>) -> KeyBytes {
        if k.len() <= INLINE_KEY {
            Self::from_slice(&k)
        } else {
            KeyBytes::Heap(k)
        }
    }

    /// What the key allocates beside the node holding it.
    #[inline]
    pub fn heap_bytes(&self) -> usize {
        match self {
            KeyBytes::Inline { .. } => 0,
            KeyBytes::Heap(b) => super::footprint::cls(b.len()),
        }
    }

    pub fn into_box(self) -> Box<[u8]> {
        match self {
            KeyBytes::Heap(b) => b,
            KeyBytes::Inline { len, buf } => buf[..len as usize].into(),
        }
    }
}

impl std::ops::Deref for KeyBytes {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match self {
            KeyBytes::Inline { len, buf } => &buf[..*len as usize],
            KeyBytes::Heap(b) => b,
        }
    }
}

impl std::fmt::Debug for KeyBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self))
    }
}

/// Prefetch hints for every cache line of `len` bytes from `p`.
#[inline]
pub fn prefetch_range(p: *const u8, len: usize) {
    let end = p as usize + len;
    let mut line = p as usize & !63;
    while line < end {
        prefetch(line as *const u8);
        line += 64;
    }
}

/// A cache prefetch hint; never faults, whatever the address.
#[inline(always)]
pub fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 only hints the cache; it cannot fault or change memory.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Whether the CPU has PREFETCHW (CPUID 8000_0001h, ECX bit 8; std's feature detection does
/// not name it).
#[cfg(target_arch = "x86_64")]
static HAS_PREFETCHW: std::sync::LazyLock<bool> =
    std::sync::LazyLock::new(|| std::arch::x86_64::__cpuid(0x8000_0001).ecx & (1 << 8) != 0);

/// A prefetch with intent to write (PREFETCHW): the line arrives exclusive, so the locked
/// write that follows (a mutex acquisition) need not first ask another core to give up its
/// copy. Issued for a batch at once, those cross-core transfers overlap instead of each
/// stalling one locked instruction in turn. Falls back to a plain prefetch where the CPU lacks
/// the instruction.
#[inline(always)]
pub fn prefetch_write(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    if *HAS_PREFETCHW {
        // SAFETY: PREFETCHW only hints the cache; it cannot fault or change memory, and the
        // CPU was just checked to have it.
        unsafe { std::arch::asm!("prefetchw [{0}]", in(reg) p, options(nostack, preserves_flags, readonly)) };
        return;
    }
    prefetch(p);
}

/// An owning link to a chained node (a bucket slot or a node's successor).
pub type Link<N> = Option<NonNull<N>>;

/// A node that a `RawDict` chains. The dict owns its nodes through raw links, so that a node's
/// allocation may be larger than the Rust type that heads it.
///
/// # Safety
/// `key` and `next` must only read the node `p` (a live node made by the implementor), `next`
/// must point at the node's own successor link, and `free` must release exactly what the
/// implementor allocated, dropping the node's contents. The dict calls `free` once per node,
/// after unlinking it.
pub unsafe trait Chained: Sized {
    /// The node's key; valid while the node lives.
    ///
    /// # Safety
    /// `p` is a live node of this type.
    unsafe fn key<'a>(p: NonNull<Self>) -> &'a [u8];
    /// The node's successor link.
    ///
    /// # Safety
    /// `p` is a live node of this type.
    unsafe fn next(p: NonNull<Self>) -> *mut Link<Self>;
    /// Drops the node's contents and frees it.
    ///
    /// # Safety
    /// `p` is a live node no longer reachable from any dict.
    unsafe fn free(p: NonNull<Self>);
}

struct Table<N> {
    buckets: Vec<Link<N>>,
    used: usize,
}

impl<N> Table<N> {
    const fn empty() -> Self {
        Table { buckets: Vec::new(), used: 0 }
    }
    fn with_size(n: usize) -> Self {
        Table { buckets: vec![None; n], used: 0 }
    }
    #[inline]
    fn mask(&self) -> usize {
        self.buckets.len().wrapping_sub(1)
    }
}

/// Buckets moved per write while rehashing (and 10× that many empty buckets visited at most).
const REHASH_STEP: usize = 1;
const INITIAL_SIZE: usize = 4;

/// The table algorithms over any `Chained` node: lookup, incremental rehash, SCAN cursor,
/// random sampling. It hands out node pointers; the typed wrappers (`Dict<V>`,
/// `engine::keytable::KeyTable`) turn them into references with the right lifetimes.
pub struct RawDict<N: Chained> {
    t: [Table<N>; 2],
    /// Next bucket of `t[0]` to move to `t[1]`, or `None` when not rehashing.
    rehash_idx: Option<usize>,
}

// SAFETY: a RawDict owns its nodes exactly as a `Vec<Box<N>>` would.
unsafe impl<N: Chained + Send> Send for RawDict<N> {}
// SAFETY: shared access only reads nodes.
unsafe impl<N: Chained + Sync> Sync for RawDict<N> {}

impl<N: Chained> Drop for RawDict<N> {
    fn drop(&mut self) {
        self.clear();
    }
}

impl<N: Chained> Default for RawDict<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<N: Chained> RawDict<N> {
    pub const fn new() -> Self {
        RawDict { t: [Table::empty(), Table::empty()], rehash_idx: None }
    }

    pub fn len(&self) -> usize {
        self.t[0].used + self.t[1].used
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of buckets (both tables), for memory reporting.
    pub fn buckets(&self) -> usize {
        self.t[0].buckets.len() + self.t[1].buckets.len()
    }

    pub fn is_rehashing(&self) -> bool {
        self.rehash_idx.is_some()
    }

    /// Removes every element. Chains are freed iteratively: a recursive drop of a long chain
    /// could overflow the stack.
    pub fn clear(&mut self) {
        for t in self.t.iter_mut() {
            for b in t.buckets.iter_mut() {
                let mut cur = b.take();
                while let Some(p) = cur {
                    // SAFETY: every linked node is live and owned by this dict; it is unlinked
                    // (its successor taken) before being freed.
                    unsafe {
                        cur = (*N::next(p)).take();
                        N::free(p);
                    }
                }
            }
            *t = Table::empty();
        }
        self.rehash_idx = None;
    }

    /// Moves up to `n` buckets from the old table to the new one. Returns true while more
    /// rehashing remains.
    pub fn rehash(&mut self, n: usize) -> bool {
        let Some(mut idx) = self.rehash_idx else { return false };
        let mut empty_visits = n * 10;
        let mut moved = 0;
        while moved < n && self.t[0].used > 0 {
            while self.t[0].buckets[idx].is_none() {
                idx += 1;
                empty_visits -= 1;
                if empty_visits == 0 {
                    self.rehash_idx = Some(idx);
                    return true;
                }
            }
            let mut cur = self.t[0].buckets[idx].take();
            while let Some(p) = cur {
                // SAFETY: `p` is a live node of this dict, moved between its own chains.
                let h = unsafe { hash_key(N::key(p)) } as usize & self.t[1].mask();
                unsafe {
                    let next = N::next(p);
                    cur = (*next).take();
                    *next = self.t[1].buckets[h].take();
                }
                self.t[1].buckets[h] = Some(p);
                self.t[0].used -= 1;
                self.t[1].used += 1;
            }
            idx += 1;
            moved += 1;
        }
        if self.t[0].used == 0 {
            let t1 = std::mem::replace(&mut self.t[1], Table::empty());
            self.t[0] = t1;
            self.rehash_idx = None;
            // Deletions during the rehash may have left the new table mostly empty.
            self.shrink_if_needed();
            return self.rehash_idx.is_some();
        }
        self.rehash_idx = Some(idx);
        true
    }

    fn resize_to(&mut self, size: usize) {
        debug_assert!(self.rehash_idx.is_none());
        let size = size.max(INITIAL_SIZE).next_power_of_two();
        if size == self.t[0].buckets.len() {
            return;
        }
        if self.t[0].buckets.is_empty() {
            self.t[0] = Table::with_size(size);
            return;
        }
        self.t[1] = Table::with_size(size);
        self.rehash_idx = Some(0);
    }

    /// Grows when the load factor reaches 1 (Redis's rule); called before inserts.
    fn expand_if_needed(&mut self) {
        if self.rehash_idx.is_some() {
            return;
        }
        if self.t[0].buckets.is_empty() {
            self.resize_to(INITIAL_SIZE);
        } else if self.t[0].used >= self.t[0].buckets.len() {
            self.resize_to(self.t[0].used + 1);
        }
    }

    /// Shrinks when fill drops under 1/8, so deleted keys give their buckets back.
    fn shrink_if_needed(&mut self) {
        if self.rehash_idx.is_some() {
            return;
        }
        let size = self.t[0].buckets.len();
        if size > INITIAL_SIZE && self.t[0].used * 8 < size {
            self.resize_to(self.t[0].used);
        } else if self.t[0].used == 0 && size > 0 {
            self.t[0] = Table::empty();
        }
    }

    #[inline]
    fn step(&mut self) {
        if self.rehash_idx.is_some() {
            self.rehash(REHASH_STEP);
        }
    }

    fn tables_to_search(&self) -> usize {
        if self.rehash_idx.is_some() {
            2
        } else {
            1
        }
    }

    /// Asks the CPU to start loading the bucket slot(s) `hash` maps to, so that a lookup issued
    /// a little later does not wait for that cache miss (see `Keyspace::prefetch_spots`).
    #[inline]
    pub fn prefetch_bucket(&self, hash: u64) {
        for t in &self.t[..self.tables_to_search()] {
            if let Some(slot) = t.buckets.get(hash as usize & t.mask()) {
                prefetch(slot as *const _ as *const u8);
            }
        }
    }

    /// Same for the first node of `hash`'s chain (its bucket slot should be cached by now).
    #[inline]
    pub fn prefetch_node(&self, hash: u64) {
        for t in &self.t[..self.tables_to_search()] {
            if let Some(Some(n)) = t.buckets.get(hash as usize & t.mask()) {
                prefetch(n.as_ptr() as *const u8);
            }
        }
    }

    /// And the second node of the chain when the first does not hold `key` (at a load factor
    /// near 1 a third of the lookups go past the first node, and each step is a cache miss).
    #[inline]
    pub fn prefetch_second(&self, hash: u64, key: &[u8]) {
        for t in &self.t[..self.tables_to_search()] {
            if let Some(&Some(n)) = t.buckets.get(hash as usize & t.mask()) {
                // SAFETY: linked nodes are live while the dict is borrowed.
                unsafe {
                    if !key_eq(N::key(n), key) {
                        if let Some(next) = *N::next(n) {
                            prefetch(next.as_ptr() as *const u8);
                        }
                    }
                }
            }
        }
    }

    /// The node holding `key`, if any.
    pub fn find(&self, key: &[u8]) -> Option<NonNull<N>> {
        if self.is_empty() {
            return None;
        }
        self.find_hashed(key, hash_key(key))
    }

    /// `find` for a key whose `hash_key` the caller already has.
    pub fn find_hashed(&self, key: &[u8], hash: u64) -> Option<NonNull<N>> {
        debug_assert_eq!(hash, hash_key(key));
        let h = hash as usize;
        for t in &self.t[..self.tables_to_search()] {
            if t.buckets.is_empty() {
                continue;
            }
            let mut cur = t.buckets[h & t.mask()];
            while let Some(p) = cur {
                // SAFETY: linked nodes are live while the dict is borrowed.
                unsafe {
                    if key_eq(N::key(p), key) {
                        return Some(p);
                    }
                    cur = *N::next(p);
                }
            }
        }
        None
    }

    /// The link (bucket slot or predecessor's `next`) that holds `key`'s node, so the caller
    /// can read, replace or resize the node in place. Advances a pending rehash first, as
    /// every write does. The pointer is valid until the dict is next modified.
    pub fn find_link(&mut self, key: &[u8]) -> Option<NonNull<Link<N>>> {
        self.find_link_in(key, hash_key(key)).map(|(link, _)| link)
    }

    /// `find_link` for a key whose `hash_key` the caller already has.
    #[inline]
    pub fn find_link_hashed(&mut self, key: &[u8], hash: u64) -> Option<NonNull<Link<N>>> {
        debug_assert_eq!(hash, hash_key(key));
        self.find_link_in(key, hash).map(|(link, _)| link)
    }

    /// `find_link`, plus the index of the table holding the node.
    fn find_link_in(&mut self, key: &[u8], hash: u64) -> Option<(NonNull<Link<N>>, usize)> {
        if self.is_empty() {
            return None;
        }
        self.step();
        let h = hash as usize;
        let ntables = self.tables_to_search();
        for (ti, t) in self.t[..ntables].iter_mut().enumerate() {
            if t.buckets.is_empty() {
                continue;
            }
            let m = t.mask();
            let mut link: *mut Link<N> = &mut t.buckets[h & m];
            // SAFETY: `link` always points at a slot of this dict's chains, which live while
            // `self` is borrowed mutably.
            unsafe {
                while let Some(p) = *link {
                    if key_eq(N::key(p), key) {
                        return NonNull::new(link).map(|l| (l, ti));
                    }
                    link = N::next(p);
                }
            }
        }
        None
    }

    /// Links a node whose key is known to be absent.
    pub fn link_new(&mut self, node: NonNull<N>) {
        self.expand_if_needed();
        self.step();
        let ti = if self.rehash_idx.is_some() { 1 } else { 0 };
        let t = &mut self.t[ti];
        // SAFETY: the caller hands over a live, unlinked node.
        let h = unsafe { hash_key(N::key(node)) } as usize & t.mask();
        unsafe { *N::next(node) = t.buckets[h].take() };
        t.buckets[h] = Some(node);
        t.used += 1;
    }

    /// Unlinks `key`'s node and hands it to the caller, who must free it.
    pub fn unlink(&mut self, key: &[u8]) -> Option<NonNull<N>> {
        let (link, ti) = self.find_link_in(key, hash_key(key))?;
        // SAFETY: `find_link_in` returned a slot holding the node; the node is live.
        let p = unsafe {
            let p = (*link.as_ptr()).take().expect("find_link returns an occupied link");
            *link.as_ptr() = (*N::next(p)).take();
            p
        };
        self.t[ti].used -= 1;
        if self.is_empty() {
            // Give all buckets back at once.
            self.clear();
        } else {
            self.shrink_if_needed();
        }
        Some(p)
    }

    /// Table statistics for DEBUG HTSTATS: per table (main, then the rehash target while
    /// rehashing), its bucket count, its elements, and how many buckets hold chains of each
    /// length (index = length; lengths of 49 and more counted at 49, as Redis does).
    pub fn stats(&self) -> Vec<(usize, usize, Vec<usize>)> {
        let tables = if self.is_rehashing() { 2 } else { 1 };
        self.t[..tables]
            .iter()
            .map(|t| {
                let mut chains = vec![0usize; 50];
                for b in &t.buckets {
                    let (mut n, mut cur) = (0, *b);
                    while let Some(p) = cur {
                        // SAFETY: linked nodes are live while the dict is borrowed.
                        cur = unsafe { *N::next(p) };
                        n += 1;
                    }
                    chains[n.min(49)] += 1;
                }
                (t.buckets.len(), t.used, chains)
            })
            .collect()
    }

    /// Visits nodes (no particular order) while `f` says go on.
    pub fn visit(&self, mut f: impl FnMut(NonNull<N>) -> bool) {
        for t in &self.t {
            for b in &t.buckets {
                let mut cur = *b;
                while let Some(p) = cur {
                    // SAFETY: as in `for_each`.
                    cur = unsafe { *N::next(p) };
                    if !f(p) {
                        return;
                    }
                }
            }
        }
    }

    /// The heap the bucket arrays take (both while rehashing).
    pub fn table_bytes(&self) -> usize {
        self.t.iter().map(|t| super::footprint::array::<Link<N>>(t.buckets.capacity())).sum()
    }

    /// Visits every node (no particular order).
    pub fn for_each(&self, mut f: impl FnMut(NonNull<N>)) {
        self.for_each_while(|p| {
            f(p);
            true
        });
    }

    /// Visits nodes (no particular order) until `f` returns false.
    pub fn for_each_while(&self, mut f: impl FnMut(NonNull<N>) -> bool) {
        for t in &self.t {
            for b in &t.buckets {
                let mut cur = *b;
                while let Some(p) = cur {
                    // SAFETY: linked nodes are live while the dict is borrowed; `f` cannot
                    // modify the dict (it is borrowed shared).
                    cur = unsafe { *N::next(p) };
                    if !f(p) {
                        return;
                    }
                }
            }
        }
    }

    /// Reverse-binary cursor scan, Redis's `dictScan`: calls `f` for the elements of one
    /// bucket (and, while rehashing, of the buckets of the larger table that expand it) and
    /// returns the next cursor; 0 means the scan is complete. Elements present during the whole
    /// scan are returned at least once, however the table is resized between calls.
    pub fn scan(&self, cursor: u64, mut f: impl FnMut(NonNull<N>)) -> u64 {
        if self.is_empty() {
            return 0;
        }
        let mut v = cursor;
        let emit = |t: &Table<N>, idx: usize, f: &mut dyn FnMut(NonNull<N>)| {
            let mut cur = t.buckets[idx];
            while let Some(p) = cur {
                // SAFETY: as in `for_each`.
                cur = unsafe { *N::next(p) };
                f(p);
            }
        };
        if self.rehash_idx.is_none() {
            let t = &self.t[0];
            let m0 = t.mask() as u64;
            emit(t, (v & m0) as usize, &mut f);
            v |= !m0;
            v = v.reverse_bits().wrapping_add(1).reverse_bits();
        } else {
            // Small table first, then every bucket of the big table that expands it.
            let (small, big) = if self.t[0].buckets.len() <= self.t[1].buckets.len() {
                (&self.t[0], &self.t[1])
            } else {
                (&self.t[1], &self.t[0])
            };
            let m0 = small.mask() as u64;
            let m1 = big.mask() as u64;
            emit(small, (v & m0) as usize, &mut f);
            loop {
                emit(big, (v & m1) as usize, &mut f);
                v |= !m1;
                v = v.reverse_bits().wrapping_add(1).reverse_bits();
                if v & (m0 ^ m1) == 0 {
                    break;
                }
            }
        }
        v
    }

    /// Up to `max` elements near a random place (Redis's `dictGetSomeKeys`): the buckets after
    /// a random one, in both tables while rehashing, visiting at most `10 × max` buckets. Not
    /// fair, but one random draw: eviction samples with it.
    pub fn some<R: Rng>(&self, rng: &mut R, max: usize, mut f: impl FnMut(NonNull<N>)) {
        if self.is_empty() || max == 0 {
            return;
        }
        let mut found = 0;
        for t in self.t.iter().filter(|t| !t.buckets.is_empty()) {
            let n = t.buckets.len();
            let start = rng.gen_range(0..n);
            for step in 0..n.min(max * 10) {
                let mut link = t.buckets[(start + step) % n];
                while let Some(p) = link {
                    f(p);
                    found += 1;
                    if found >= max {
                        return;
                    }
                    // SAFETY: as in `for_each`.
                    link = unsafe { *N::next(p) };
                }
            }
        }
    }

    /// A uniformly chosen bucket's random element (Redis's `dictGetFairRandomKey` idea is not
    /// needed here: callers only need "some random element").
    pub fn random<R: Rng>(&self, rng: &mut R) -> Option<NonNull<N>> {
        if self.is_empty() {
            return None;
        }
        // A small table: an index drawn uniformly and walked to, exactly fair (HRANDFIELD and
        // SRANDMEMBER with a negative count draw from it over and over; Redis's test checks
        // the draws are uniform).
        if self.len() <= 128 {
            let mut n = rng.gen_range(0..self.len());
            let mut found = None;
            self.for_each(|p| {
                if n == 0 && found.is_none() {
                    found = Some(p);
                }
                n = n.wrapping_sub(1);
            });
            return found;
        }
        // Sample non-empty buckets; chains are short because the load factor stays ≤ 1. A
        // position in the chain is drawn below a common bound and redrawn past its end, so an
        // element in a longer chain is not less likely than one alone in its bucket.
        const CHAIN_BOUND: usize = 8;
        loop {
            let (t, idx) = if let Some(ri) = self.rehash_idx {
                // Buckets below rehash_idx in t[0] are empty.
                let s0 = self.t[0].buckets.len();
                let s1 = self.t[1].buckets.len();
                let i = rng.gen_range(ri..s0 + s1);
                if i < s0 {
                    (&self.t[0], i)
                } else {
                    (&self.t[1], i - s0)
                }
            } else {
                (&self.t[0], rng.gen_range(0..self.t[0].buckets.len()))
            };
            if let Some(head) = t.buckets[idx] {
                let chain = || {
                    std::iter::successors(Some(head), |&p| {
                        // SAFETY: as in `for_each`.
                        unsafe { *N::next(p) }
                    })
                };
                let len = chain().count();
                let j = rng.gen_range(0..len.max(CHAIN_BOUND));
                if j < len {
                    return chain().nth(j);
                }
            }
        }
    }

    /// Lengths of the non-empty chains of the main table (tests and diagnostics).
    #[cfg(test)]
    fn chain_lengths(&self) -> Vec<usize> {
        let mut out = Vec::new();
        for b in &self.t[0].buckets {
            let mut n = 0;
            let mut cur = *b;
            while let Some(p) = cur {
                n += 1;
                cur = unsafe { *N::next(p) };
            }
            if n > 0 {
                out.push(n);
            }
        }
        out
    }
}

/// The node of a `Dict<V>`: key and value in one fixed-size allocation.
pub struct Node<V> {
    next: Link<Node<V>>,
    key: KeyBytes,
    val: V,
}

// SAFETY: a node owns its key and value; its link is owned by the dict.
unsafe impl<V: Send> Send for Node<V> {}
// SAFETY: as above.
unsafe impl<V: Sync> Sync for Node<V> {}

// SAFETY: nodes are boxes made by `Dict::link`, freed once as boxes.
unsafe impl<V> Chained for Node<V> {
    #[inline]
    unsafe fn key<'a>(p: NonNull<Self>) -> &'a [u8] {
        &(*p.as_ptr()).key
    }
    #[inline]
    unsafe fn next(p: NonNull<Self>) -> *mut Link<Self> {
        std::ptr::addr_of_mut!((*p.as_ptr()).next)
    }
    unsafe fn free(p: NonNull<Self>) {
        drop(Box::from_raw(p.as_ptr()));
    }
}

/// A map from byte-string keys to `V` (the big encodings of hashes, sets and sorted sets, and
/// the keyspace's expiry times).
pub struct Dict<V>(RawDict<Node<V>>);

impl<V> Default for Dict<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V> Dict<V> {
    pub const fn new() -> Self {
        Dict(RawDict::new())
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Number of buckets (both tables), for memory reporting.
    pub fn buckets(&self) -> usize {
        self.0.buckets()
    }

    pub fn is_rehashing(&self) -> bool {
        self.0.is_rehashing()
    }

    /// See [`RawDict::stats`].
    pub fn stats(&self) -> Vec<(usize, usize, Vec<usize>)> {
        self.0.stats()
    }

    pub fn clear(&mut self) {
        self.0.clear()
    }

    /// Moves up to `n` buckets of a pending rehash; true while more remains.
    pub fn rehash(&mut self, n: usize) -> bool {
        self.0.rehash(n)
    }

    pub fn get(&self, key: &[u8]) -> Option<&V> {
        // SAFETY: the node lives as long as `self` is borrowed.
        self.0.find(key).map(|p| unsafe { &(*p.as_ptr()).val })
    }

    /// `get` for a key whose `hash_key` the caller already has.
    pub fn get_hashed(&self, key: &[u8], hash: u64) -> Option<&V> {
        if self.0.is_empty() {
            return None;
        }
        // SAFETY: the node lives as long as `self` is borrowed.
        self.0.find_hashed(key, hash).map(|p| unsafe { &(*p.as_ptr()).val })
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut V> {
        let link = self.0.find_link(key)?;
        // SAFETY: the link holds a live node, exclusively ours while `self` is borrowed.
        unsafe { (*link.as_ptr()).map(|p| &mut (*p.as_ptr()).val) }
    }

    pub fn contains_key(&self, key: &[u8]) -> bool {
        self.0.find(key).is_some()
    }

    /// Inserts or replaces; returns the previous value.
    pub fn insert(&mut self, key: &[u8], val: V) -> Option<V> {
        if let Some(v) = self.get_mut(key) {
            return Some(std::mem::replace(v, val));
        }
        self.link(KeyBytes::from_slice(key), val);
        None
    }

    /// Inserts a key known to be absent.
    pub fn insert_new(&mut self, key: Box<[u8]>, val: V) {
        self.link(KeyBytes::from_box(key), val);
    }

    /// Inserts a key known to be absent, from a borrowed slice (no intermediate allocation).
    pub fn insert_new_slice(&mut self, key: &[u8], val: V) {
        self.link(KeyBytes::from_slice(key), val);
    }

    fn link(&mut self, key: KeyBytes, val: V) {
        let node = Box::new(Node { next: None, key, val });
        self.0.link_new(NonNull::from(Box::leak(node)));
    }

    /// Removes a key, returning its owned key and value.
    pub fn remove(&mut self, key: &[u8]) -> Option<(Box<[u8]>, V)> {
        let p = self.0.unlink(key)?;
        // SAFETY: unlinked nodes are handed to us; this one was made by `link` as a box.
        let Node { key, val, .. } = *unsafe { Box::from_raw(p.as_ptr()) };
        Some((key.into_box(), val))
    }

    /// The heap one element with `key` takes (its node, and a long key's bytes).
    pub fn entry_bytes(key: &[u8]) -> usize {
        use super::footprint::cls;
        cls(std::mem::size_of::<Node<V>>()) + if key.len() > INLINE_KEY { cls(key.len()) } else { 0 }
    }

    /// The bucket arrays' heap.
    pub fn table_bytes(&self) -> usize {
        self.0.table_bytes()
    }

    /// The heap the map holds: its bucket arrays, and per element its node, a long key's
    /// bytes and what `val` says the value allocates — measured on the first `samples`
    /// elements (0: all) and extrapolated (`engine::footprint`).
    pub fn footprint(&self, samples: usize, val: impl Fn(&V) -> usize) -> usize {
        use super::footprint::{cls, Sampler};
        let node = cls(std::mem::size_of::<Node<V>>());
        let mut each = Sampler::new(samples);
        self.0.visit(|p| {
            // SAFETY: nodes live while `self` is borrowed.
            let n = unsafe { &*p.as_ptr() };
            each.add(node + n.key.heap_bytes() + val(&n.val));
            each.wants()
        });
        self.0.table_bytes() + each.total(self.len())
    }

    /// Visits every element (no particular order).
    pub fn for_each(&self, mut f: impl FnMut(&[u8], &V)) {
        // SAFETY: nodes live while `self` is borrowed.
        self.0.for_each(|p| unsafe { f(&(*p.as_ptr()).key, &(*p.as_ptr()).val) })
    }

    /// One step of a SCAN (see `RawDict::scan`).
    pub fn scan(&self, cursor: u64, mut f: impl FnMut(&[u8], &V)) -> u64 {
        // SAFETY: as in `for_each`.
        self.0.scan(cursor, |p| unsafe { f(&(*p.as_ptr()).key, &(*p.as_ptr()).val) })
    }

    /// Some random element.
    pub fn random<R: Rng>(&self, rng: &mut R) -> Option<(&[u8], &V)> {
        // SAFETY: as in `get`.
        self.0.random(rng).map(|p| unsafe { (&*(*p.as_ptr()).key, &(*p.as_ptr()).val) })
    }

    /// Up to `max` entries near a random place (see `RawDict::some`).
    pub fn sample<R: Rng>(&self, rng: &mut R, max: usize, mut f: impl FnMut(&[u8], &V)) {
        // SAFETY: as in `get`.
        self.0.some(rng, max, |p| unsafe { f(&(*p.as_ptr()).key, &(*p.as_ptr()).val) })
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn key_eq_is_slice_equality() {
        for n in 0..40usize {
            let a: Vec<u8> = (0..n as u8).map(|i| i.wrapping_mul(37)).collect();
            assert!(key_eq(&a, &a.clone()));
            assert!(!key_eq(&a, &a[..n.saturating_sub(1)]) || n == 0);
            for i in 0..n {
                let mut b = a.clone();
                b[i] ^= 0x40;
                assert!(!key_eq(&a, &b), "len {n}, byte {i}");
            }
        }
    }

    use super::*;

    /// Random draws from small and large tables are uniform (chi-square, as Redis's
    /// HRANDFIELD test checks them; 9 degrees of freedom, 40 is p = 0.00001).
    #[test]
    fn random_draws_are_uniform() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        for n in [10usize, 1000] {
            let mut d: Dict<usize> = Dict::new();
            for i in 0..n {
                d.insert(format!("k{i}").as_bytes(), i);
            }
            let draws = 20 * n.max(500);
            let mut seen = vec![0usize; n];
            for _ in 0..draws {
                seen[*d.random(&mut rng).unwrap().1] += 1;
            }
            let expect = draws as f64 / n as f64;
            let chi: f64 = seen.iter().map(|&o| (o as f64 - expect).powi(2) / expect).sum();
            // Degrees of freedom n - 1; the bound is far above their mean.
            assert!(chi < (n as f64 - 1.0) * 2.0 + 40.0, "n={n} chi={chi}");
        }
    }
    use std::collections::HashSet;

    #[test]
    fn insert_get_remove_grow_shrink() {
        let mut d: Dict<u32> = Dict::new();
        for i in 0..10_000u32 {
            assert!(d.insert(format!("k{i}").as_bytes(), i).is_none());
        }
        assert_eq!(d.len(), 10_000);
        for i in 0..10_000u32 {
            assert_eq!(d.get(format!("k{i}").as_bytes()), Some(&i));
        }
        assert_eq!(d.insert(b"k5", 99), Some(5));
        for i in 0..10_000u32 {
            assert!(d.remove(format!("k{i}").as_bytes()).is_some());
        }
        assert!(d.is_empty());
        while d.rehash(100) {}
        assert!(d.buckets() <= 8, "shrinks back: {}", d.buckets());
    }

    #[test]
    fn scan_survives_growth_and_shrink() {
        let mut d: Dict<()> = Dict::new();
        for i in 0..500 {
            d.insert(format!("stable{i}").as_bytes(), ());
        }
        let mut seen = HashSet::new();
        let mut cursor = 0;
        let mut round = 0;
        loop {
            cursor = d.scan(cursor, |k, _| {
                seen.insert(k.to_vec());
            });
            // Grow the table heavily mid-scan, then shrink it.
            round += 1;
            if round < 50 {
                for j in 0..100 {
                    d.insert(format!("extra{round}-{j}").as_bytes(), ());
                }
            } else if round < 100 {
                for j in 0..100 {
                    d.remove(format!("extra{}-{j}", round - 49).as_bytes());
                }
            }
            if cursor == 0 {
                break;
            }
        }
        for i in 0..500 {
            assert!(seen.contains(format!("stable{i}").as_bytes()), "missed stable{i}");
        }
    }

    #[test]
    fn short_keys_live_in_the_node() {
        assert_eq!(std::mem::size_of::<KeyBytes>(), 24);
        assert_eq!(std::mem::size_of::<Node<i64>>(), 40);
        let mut d: Dict<u8> = Dict::new();
        let long = vec![b'x'; 100];
        d.insert(b"", 1);
        d.insert(&[7u8; 22], 2);
        d.insert(&long, 3);
        assert_eq!(d.get(b""), Some(&1));
        assert_eq!(d.get(&[7u8; 22]), Some(&2));
        assert_eq!(d.get(&long), Some(&3));
        assert_eq!(&*d.remove(&long).unwrap().0, &long[..]);
        assert_eq!(&*d.remove(&[7u8; 22]).unwrap().0, &[7u8; 22][..]);
    }

    #[test]
    fn random_returns_members() {
        let mut d: Dict<u8> = Dict::new();
        let mut rng = rand::thread_rng();
        assert!(d.random(&mut rng).is_none());
        for i in 0..100u8 {
            d.insert(&[i], i);
        }
        let mut seen = HashSet::new();
        for _ in 0..5000 {
            let (k, v) = d.random(&mut rng).unwrap();
            assert_eq!(k[0], *v);
            seen.insert(*v);
        }
        assert!(seen.len() > 90);
    }
}
#[cfg(test)]
mod chain_probe {
    use super::*;
    #[test]
    fn chain_lengths_are_short() {
        let mut d: Dict<u64> = Dict::new();
        for i in 0..100_000u64 {
            let k = format!("key:{:012}", i);
            if crate::engine::slot::key_shard(k.as_bytes()) == 7 {
                d.insert(k.as_bytes(), i);
            }
        }
        while d.rehash(100) {}
        let chains = d.0.chain_lengths();
        let max = chains.iter().copied().max().unwrap_or(0);
        println!("len {} buckets {} nonempty {} max chain {}", d.len(), d.buckets(), chains.len(), max);
        assert!(max <= 8);
    }
}
