//! The hash value (Redis's `t_hash.c` type API): its encodings, hidden. The hash commands are in
//! `types::hash`.
//!
//! Two encodings, as OBJECT ENCODING reports them: `listpack`, the pairs packed into one byte
//! buffer searched linearly, and `hashtable`, our [`Dict`] (reverse-binary SCAN cursor, random
//! sampling, incremental rehash). A hash converts once it has more than `hash-max-listpack-entries`
//! fields or a field or value longer than `hash-max-listpack-value` bytes, and never converts
//! back, like Redis.
//!
//! Memory: a big hash costs one dict node per field (next pointer, boxed field, value), the
//! field's bytes and — only for values longer than [`INLINE`] bytes — one value allocation.
//! Short values (counters, ids, small strings) live inside the node.
//!
//! Field expiry (Valkey 9's and Redis 7.4's HEXPIRE family): a hash whose fields carry
//! deadlines is `hashtable`-encoded (as in Valkey) and its table carries a [`Deadlines`]
//! index. A hash without field TTLs costs what it did (a listpack nothing, a table one null
//! pointer in its one boxed header; `Hash` stays 24 bytes); when its last deadline goes, a
//! hash drops the index again. This layer stores deadlines
//! and answers "is it past?" for a time the caller gives; deciding when to reclaim (a command's
//! lookup, the active expiry cycle) and what to propagate is the execution layer's.

use super::packed::{get_str, put_len, Packed, Slot, Walk, LEN_MAX};
use crate::engine::dict::Dict;
use rand::Rng;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once any hash field gets a deadline in this process: from then on snapshots are written
/// in Valkey's format (`rdb::RDB_VERSION_VALKEY`), which can hold them. Checked when a
/// snapshot begins; a deadline set later belongs to a value the snapshot already took as it
/// was.
static FIELD_TTLS: AtomicBool = AtomicBool::new(false);

/// True if some hash field had a deadline at some point since the process started.
pub fn field_ttls_ever_set() -> bool {
    FIELD_TTLS.load(Ordering::Relaxed)
}

// ---------------------------------------------------------------------------------------------
// Hash API
// ---------------------------------------------------------------------------------------------

/// Values up to this many bytes are stored inside the dict node.
const INLINE: usize = 14;

/// A value in a `hashtable`-encoded hash: inline when short (no allocation of its own), else
/// behind one thin pointer, so the whole value slot stays 16 bytes.
#[derive(Clone)]
enum HVal {
    Inline(u8, [u8; INLINE]),
    Heap(Box<Box<[u8]>>),
}

impl HVal {
    fn new(v: &[u8]) -> HVal {
        if v.len() <= INLINE {
            let mut b = [0u8; INLINE];
            b[..v.len()].copy_from_slice(v);
            HVal::Inline(v.len() as u8, b)
        } else {
            HVal::Heap(Box::new(v.into()))
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            HVal::Inline(n, b) => &b[..*n as usize],
            HVal::Heap(b) => b,
        }
    }
}

/// The pairs of a `listpack`-encoded hash, like Redis's listpack: for each pair, in insertion
/// order, the field and then the value, each with its length prefix. Five 2-byte fields with
/// 8-byte values take 60 bytes in one block, where a vector of boxed pairs took a 256-byte
/// pair array plus ten small allocations.
#[derive(Clone, Default)]
struct Pairs(Packed);

/// One pair of a [`Pairs`] buffer.
struct Pair<'a> {
    field: &'a [u8],
    value: &'a [u8],
    /// Offset of the value's length prefix.
    vstart: usize,
}

fn pair(buf: &[u8], pos: usize) -> Option<(Pair<'_>, usize)> {
    let (field, vstart) = get_str(buf, pos)?;
    let (value, end) = get_str(buf, vstart)?;
    Some((Pair { field, value, vstart }, end))
}

impl Pairs {
    fn iter(&self) -> Walk<'_, Pair<'_>> {
        self.0.walk(pair)
    }

    fn find(&self, field: &[u8]) -> Option<Slot<Pair<'_>>> {
        self.iter().find(|e| e.item.field == field)
    }

    /// Sets `field`; true if it is new. A new field goes to the end (insertion order).
    fn set(&mut self, field: &[u8], value: &[u8]) -> bool {
        let mut vl = [0u8; LEN_MAX];
        let vhdr = put_len(value.len(), &mut vl);
        match self.find(field).map(|e| (e.item.vstart, e.end)) {
            Some((vstart, end)) => {
                self.0.rewrite(vstart, end - vstart, &[vhdr, value]);
                false
            }
            None => {
                let mut fl = [0u8; LEN_MAX];
                let fhdr = put_len(field.len(), &mut fl);
                self.0.push(&[fhdr, field, vhdr, value]);
                true
            }
        }
    }

    fn remove(&mut self, field: &[u8]) -> bool {
        let span = self.find(field).map(|e| (e.start, e.end));
        self.0.delete_found(span)
    }
}

enum Repr {
    /// Pairs in insertion order (Redis's listpack keeps that order too).
    Listpack(Pairs),
    /// Boxed so `Hash` stays small enough to sit inside `Value` unboxed.
    Table(Box<Table>),
}

/// A `hashtable`-encoded hash: the fields, and the deadlines of those that have one.
struct Table {
    dict: Dict<HVal>,
    ttl: Option<Box<Deadlines>>,
}

impl Table {
    fn plain(dict: Dict<HVal>) -> Table {
        Table { dict, ttl: None }
    }

    /// The field's deadline, if it is past at `now`.
    #[inline]
    fn due(&self, field: &[u8], now: i64) -> bool {
        self.ttl.as_ref().is_some_and(|d| d.at.get(field).is_some_and(|&t| t <= now))
    }
}

impl std::ops::Deref for Table {
    type Target = Dict<HVal>;
    fn deref(&self) -> &Dict<HVal> {
        &self.dict
    }
}

impl std::ops::DerefMut for Table {
    fn deref_mut(&mut self) -> &mut Dict<HVal> {
        &mut self.dict
    }
}

/// The deadlines (Unix ms) of a hash's volatile fields: by field, and in time order so the
/// earliest is found at once and expired fields are taken oldest first without a scan.
#[derive(Default)]
struct Deadlines {
    at: Dict<i64>,
    order: BTreeSet<(i64, Box<[u8]>)>,
}

impl Clone for Deadlines {
    fn clone(&self) -> Self {
        let mut at = Dict::new();
        self.at.for_each(|f, &t| at.insert_new_slice(f, t));
        Deadlines { at, order: self.order.clone() }
    }
}

impl Deadlines {
    fn set(&mut self, field: &[u8], when: i64) {
        match self.at.get_mut(field) {
            Some(t) => {
                self.order.remove(&(*t, Box::from(field)));
                *t = when;
            }
            None => self.at.insert_new_slice(field, when),
        }
        self.order.insert((when, field.into()));
    }

    fn remove(&mut self, field: &[u8]) -> bool {
        match self.at.remove(field) {
            Some((f, t)) => {
                self.order.remove(&(t, f));
                true
            }
            None => false,
        }
    }

    /// How many deadlines are at or before `now`.
    fn due(&self, now: i64) -> usize {
        self.order.iter().take_while(|(t, _)| *t <= now).count()
    }
}

/// Conversion thresholds, read from the configuration by each command.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_entries: usize,
    pub max_value: usize,
}

/// A hash value.
pub struct Hash {
    repr: Repr,
}

impl Default for Hash {
    fn default() -> Self {
        Hash { repr: Repr::Listpack(Pairs::default()) }
    }
}

impl Clone for Hash {
    fn clone(&self) -> Self {
        match &self.repr {
            Repr::Listpack(p) => Hash { repr: Repr::Listpack(p.clone()) },
            Repr::Table(t) => Hash { repr: Repr::Table(Box::new(Table { dict: copy_table(t), ttl: t.ttl.clone() })) },
        }
    }
}

/// Sets a field of a table; true if it is new.
fn table_set(d: &mut Dict<HVal>, field: &[u8], value: &[u8]) -> bool {
    match d.get_mut(field) {
        Some(old) => {
            *old = HVal::new(value);
            false
        }
        None => {
            d.insert_new_slice(field, HVal::new(value));
            true
        }
    }
}

fn copy_table(d: &Dict<HVal>) -> Dict<HVal> {
    let mut c = Dict::new();
    d.for_each(|f, v| c.insert_new_slice(f, v.clone()));
    c
}

impl PartialEq for Hash {
    fn eq(&self, other: &Self) -> bool {
        if self.len() != other.len() {
            return false;
        }
        let mut same = true;
        self.for_each(|f, v| same &= other.get(f) == Some(v) && self.ttl_of(f) == other.ttl_of(f));
        same
    }
}

impl std::fmt::Debug for Hash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut m = f.debug_map();
        self.for_each(|k, v| {
            m.entry(&String::from_utf8_lossy(k), &String::from_utf8_lossy(v));
        });
        m.finish()
    }
}

impl Hash {
    pub fn new() -> Hash {
        Hash::default()
    }

    /// The name OBJECT ENCODING reports.
    /// The field table's statistics when `hashtable`-encoded (DEBUG HTSTATS-KEY).
    pub fn dict_stats(&self) -> Option<Vec<(usize, usize, Vec<usize>)>> {
        self.table().map(|t| t.stats())
    }

    pub fn encoding(&self) -> &'static str {
        match self.repr {
            Repr::Listpack(_) => "listpack",
            Repr::Table(_) => "hashtable",
        }
    }

    /// The field table of a `hashtable`-encoded hash.
    fn table(&self) -> Option<&Dict<HVal>> {
        match &self.repr {
            Repr::Listpack(_) => None,
            Repr::Table(t) => Some(&t.dict),
        }
    }

    /// Every stored field, those past their deadline included (see [`Hash::live_len`]).
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Listpack(p) => p.0.len(),
            Repr::Table(d) => d.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The stored value of `field`, past its deadline or not.
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match &self.repr {
            Repr::Listpack(p) => p.find(field).map(|e| e.item.value),
            Repr::Table(d) => d.get(field).map(|v| v.bytes()),
        }
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Converts to `hashtable` if a listpack would get an element longer than the limit
    /// (Redis's `hashTypeTryConversion`, called before a write with its arguments).
    pub fn convert_for(&mut self, lens: impl IntoIterator<Item = usize>, lim: Limits) {
        if matches!(self.repr, Repr::Listpack(_)) && lens.into_iter().any(|l| l > lim.max_value) {
            self.convert();
        }
    }

    fn convert(&mut self) {
        let Repr::Listpack(p) = &self.repr else {
            return;
        };
        let mut d = Dict::new();
        for e in p.iter() {
            d.insert_new_slice(e.item.field, HVal::new(e.item.value));
        }
        self.repr = Repr::Table(Box::new(Table::plain(d)));
    }

    /// Sets `field` to `value`, dropping any deadline it had (HSET's rule); true if the field
    /// is new.
    pub fn set(&mut self, field: &[u8], value: &[u8], lim: Limits) -> bool {
        let new = self.set_keeping_ttl(field, value, lim);
        if !new {
            self.persist(field);
        }
        new
    }

    /// Sets `field` to `value`, keeping its deadline (HINCRBY's rule); true if the field is
    /// new. Converts as Redis's `hashTypeSet` does: before, for a long field or value; after,
    /// past the entry limit.
    pub fn set_keeping_ttl(&mut self, field: &[u8], value: &[u8], lim: Limits) -> bool {
        self.convert_for([field.len(), value.len()], lim);
        let new = match &mut self.repr {
            Repr::Listpack(p) => p.set(field, value),
            Repr::Table(t) => table_set(&mut t.dict, field, value),
        };
        if self.len() > lim.max_entries {
            self.convert();
        }
        new
    }

    /// Removes `field` and its deadline; true if it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Listpack(p) => p.remove(field),
            Repr::Table(t) => {
                let had = t.dict.remove(field).is_some();
                if had && t.ttl.as_mut().is_some_and(|d| d.remove(field)) {
                    self.drop_index_if_unused();
                }
                had
            }
        }
    }

    /// Visits every stored pair (listpack: insertion order; hashtable: table order).
    pub fn for_each(&self, mut f: impl FnMut(&[u8], &[u8])) {
        match &self.repr {
            Repr::Listpack(p) => p.iter().for_each(|e| f(e.item.field, e.item.value)),
            Repr::Table(d) => d.for_each(|k, val| f(k, val.bytes())),
        }
    }

    /// One SCAN step from `cursor`: visits some pairs and returns the next cursor (0 = done).
    /// A listpack is returned whole in one step, as Redis does.
    pub fn scan(&self, cursor: u64, mut f: impl FnMut(&[u8], &[u8])) -> u64 {
        match self.table() {
            None => {
                self.for_each(f);
                0
            }
            Some(d) => d.scan(cursor, |k, v| f(k, v.bytes())),
        }
    }

    /// A random pair (the hash must not be empty).
    pub fn random<R: Rng>(&self, rng: &mut R) -> Option<(&[u8], &[u8])> {
        match &self.repr {
            Repr::Listpack(p) if p.0.len() == 0 => None,
            Repr::Listpack(p) => p.iter().nth(rng.gen_range(0..p.0.len())).map(|e| (e.item.field, e.item.value)),
            _ => self.table()?.random(rng).map(|(k, v)| (k, v.bytes())),
        }
    }

    /// Random pairs for repeated picks (None if the hash is empty). A listpack has no index to
    /// jump into, so its pairs are listed once here instead of walked on every pick.
    pub fn sampler<'a, R: Rng>(&'a self) -> impl FnMut(&mut R) -> Option<(&'a [u8], &'a [u8])> + 'a {
        let pairs: Vec<(&'a [u8], &'a [u8])> = match &self.repr {
            Repr::Listpack(p) => p.iter().map(|e| (e.item.field, e.item.value)).collect(),
            _ => Vec::new(),
        };
        move |rng| match self.table() {
            None if pairs.is_empty() => None,
            None => Some(pairs[rng.gen_range(0..pairs.len())]),
            Some(d) => d.random(rng).map(|(k, v)| (k, v.bytes())),
        }
    }

    /// The heap the hash holds (`engine::footprint`): a listpack's buffer; or the table,
    /// its nodes, long fields and values, and the deadlines of volatile fields (by field, and
    /// in time order).
    pub fn footprint(&self, samples: usize) -> usize {
        use super::footprint::{btree, cls, Sampler};
        match &self.repr {
            Repr::Listpack(p) => p.0.footprint(),
            Repr::Table(t) => {
                let mut n = cls(std::mem::size_of::<Table>());
                n += t.dict.footprint(samples, |v| match v {
                    HVal::Inline(..) => 0,
                    HVal::Heap(b) => cls(std::mem::size_of::<Box<[u8]>>()) + cls(b.len()),
                });
                if let Some(d) = &t.ttl {
                    n += cls(std::mem::size_of::<Deadlines>()) + d.at.footprint(samples, |_| 0);
                    let mut fields = Sampler::new(samples);
                    for (_, f) in d.order.iter() {
                        if !fields.wants() {
                            break;
                        }
                        fields.add(cls(f.len()));
                    }
                    n += btree::<(i64, Box<[u8]>), ()>(d.order.len()) + fields.total(d.order.len());
                }
                n
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Field deadlines
    // -----------------------------------------------------------------------------------------

    /// True if some field has a deadline.
    #[inline]
    pub fn has_ttls(&self) -> bool {
        self.deadlines().is_some()
    }

    #[inline]
    fn deadlines(&self) -> Option<&Deadlines> {
        match &self.repr {
            Repr::Table(t) => t.ttl.as_deref(),
            Repr::Listpack(_) => None,
        }
    }

    /// The field's deadline (Unix ms), if it has one.
    pub fn ttl_of(&self, field: &[u8]) -> Option<i64> {
        self.deadlines().and_then(|d| d.at.get(field).copied())
    }

    /// The earliest deadline of any field.
    #[inline]
    pub fn next_deadline(&self) -> Option<i64> {
        self.deadlines().and_then(|d| d.order.first().map(|(t, _)| *t))
    }

    /// True if some field's deadline is at or before `now`.
    #[inline]
    pub fn has_due(&self, now: i64) -> bool {
        self.next_deadline().is_some_and(|t| t <= now)
    }

    /// True if `field` exists but its deadline is at or before `now`.
    #[inline]
    pub fn is_due(&self, field: &[u8], now: i64) -> bool {
        self.ttl_of(field).is_some_and(|t| t <= now)
    }

    /// Gives the existing `field` the deadline `when` (the hash becomes `hashtable`, as in
    /// Valkey). No-op for a missing field.
    pub fn set_ttl(&mut self, field: &[u8], when: i64) {
        if !self.contains(field) {
            return;
        }
        self.convert();
        if let Repr::Table(t) = &mut self.repr {
            if t.ttl.is_none() && !FIELD_TTLS.load(Ordering::Relaxed) {
                FIELD_TTLS.store(true, Ordering::Relaxed);
            }
            t.ttl.get_or_insert_with(Default::default).set(field, when);
        }
    }

    /// Removes the field's deadline; true if it had one.
    pub fn persist(&mut self, field: &[u8]) -> bool {
        let Repr::Table(t) = &mut self.repr else {
            return false;
        };
        let had = t.ttl.as_mut().is_some_and(|d| d.remove(field));
        if had {
            self.drop_index_if_unused();
        }
        had
    }

    /// A volatile hash whose last deadline went is a plain table again.
    fn drop_index_if_unused(&mut self) {
        if let Repr::Table(t) = &mut self.repr {
            if t.ttl.as_ref().is_some_and(|d| d.at.is_empty()) {
                t.ttl = None;
            }
        }
    }

    /// Removes up to `max` fields whose deadline is at or before `now`, earliest first, and
    /// returns them.
    pub fn remove_due(&mut self, now: i64, max: usize) -> Vec<Box<[u8]>> {
        let Repr::Table(t) = &mut self.repr else {
            return Vec::new();
        };
        let Some(d) = t.ttl.as_mut() else {
            return Vec::new();
        };
        let mut gone = Vec::new();
        while gone.len() < max {
            match d.order.first() {
                Some((at, _)) if *at <= now => {}
                _ => break,
            }
            let (_, f) = d.order.pop_first().expect("looked at");
            d.at.remove(&f);
            t.dict.remove(&f);
            gone.push(f);
        }
        self.drop_index_if_unused();
        gone
    }

    /// Fields whose deadline has not passed at `now` (HLEN's answer).
    pub fn live_len(&self, now: i64) -> usize {
        self.len() - self.deadlines().map_or(0, |d| d.due(now))
    }

    /// `get`, but a field past its deadline at `now` is missing.
    #[inline]
    pub fn get_live(&self, field: &[u8], now: i64) -> Option<&[u8]> {
        match &self.repr {
            Repr::Table(t) if t.due(field, now) => None,
            _ => self.get(field),
        }
    }

    /// `for_each` over the fields whose deadline has not passed at `now`.
    pub fn for_each_live(&self, now: i64, mut f: impl FnMut(&[u8], &[u8])) {
        match &self.repr {
            Repr::Table(t) if t.ttl.is_some() => t.dict.for_each(|k, val| {
                if !t.due(k, now) {
                    f(k, val.bytes())
                }
            }),
            _ => self.for_each(f),
        }
    }

    /// `scan` over the fields whose deadline has not passed at `now`.
    pub fn scan_live(&self, cursor: u64, now: i64, mut f: impl FnMut(&[u8], &[u8])) -> u64 {
        match &self.repr {
            Repr::Table(t) if t.ttl.is_some() => t.dict.scan(cursor, |k, val| {
                if !t.due(k, now) {
                    f(k, val.bytes())
                }
            }),
            _ => self.scan(cursor, f),
        }
    }

    /// Visits every stored pair with its deadline (persistence, DUMP, AOF rewrite).
    pub fn for_each_with_ttl(&self, mut f: impl FnMut(&[u8], &[u8], Option<i64>)) {
        match &self.repr {
            Repr::Table(t) if t.ttl.is_some() => {
                t.dict.for_each(|k, val| f(k, val.bytes(), t.ttl.as_ref().and_then(|d| d.at.get(k).copied())))
            }
            _ => self.for_each(|k, val| f(k, val, None)),
        }
    }
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Listpack(Pairs::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::packed::str_size;

    const LIM: Limits = Limits { max_entries: 4, max_value: 8 };

    #[test]
    fn value_slot_is_small() {
        assert_eq!(std::mem::size_of::<HVal>(), 16);
        assert_eq!(HVal::new(b"12345678901234").bytes(), b"12345678901234");
        assert_eq!(HVal::new(b"123456789012345").bytes(), b"123456789012345");
        assert_eq!(HVal::new(b"").bytes(), b"");
    }

    #[test]
    fn converts_past_thresholds_and_keeps_contents() {
        let mut h = Hash::new();
        for i in 0..4 {
            assert!(h.set(format!("f{i}").as_bytes(), b"v", LIM));
        }
        assert_eq!(h.encoding(), "listpack");
        assert!(!h.set(b"f0", b"w", LIM));
        assert!(h.set(b"f4", b"v", LIM));
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.get(b"f0"), Some(&b"w"[..]));
        assert_eq!(h.len(), 5);
        let mut h2 = Hash::new();
        h2.set(b"f", b"a-long-value", LIM);
        assert_eq!(h2.encoding(), "hashtable");
        let c = h.clone();
        assert_eq!(c, h);
        assert!(h.remove(b"f4"));
        assert_ne!(c, h);
        assert_eq!(h.encoding(), "hashtable");
    }

    /// Pairs in visiting order, as owned vectors.
    fn pairs(h: &Hash) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut v = Vec::new();
        h.for_each(|f, val| v.push((f.to_vec(), val.to_vec())));
        v
    }

    /// The exact packed size of these pairs: each field and value plus its length prefix.
    fn packed_size(p: &[(Vec<u8>, Vec<u8>)]) -> usize {
        p.iter().map(|(f, v)| str_size(f) + str_size(v)).sum()
    }

    fn packed(h: &Hash) -> &[u8] {
        match &h.repr {
            Repr::Listpack(p) => p.0.bytes(),
            _ => panic!("not packed"),
        }
    }

    #[test]
    fn hash_sits_inside_value() {
        assert!(std::mem::size_of::<Hash>() <= 24, "{}", std::mem::size_of::<Hash>());
        assert_eq!(std::mem::size_of::<crate::engine::Value>(), 40);
    }

    #[test]
    fn packed_round_trips_any_length() {
        let lim = Limits { max_entries: 128, max_value: 100_000 };
        let mut h = Hash::new();
        let mut want = Vec::new();
        for (i, n) in [0usize, 1, 127, 128, 300, 70000].into_iter().enumerate() {
            let v: Vec<u8> = (0..n).map(|j| (i * 31 + j) as u8).collect();
            assert!(h.set(&v, &v, lim)); // field of that length too
            want.push((v.clone(), v.clone()));
            let f = format!("f{i}").into_bytes();
            assert!(h.set(&f, b"", lim));
            want.push((f, Vec::new()));
        }
        assert_eq!(h.encoding(), "listpack");
        assert_eq!(h.len(), want.len());
        assert_eq!(pairs(&h), want);
        for (f, v) in &want {
            assert_eq!(h.get(f), Some(&v[..]));
        }
        assert_eq!(h.get(b"missing"), None);
        assert_eq!(packed(&h).len(), packed_size(&want));
        assert_eq!(h.clone(), h);
    }

    #[test]
    fn packed_keeps_order_through_edits() {
        let lim = Limits { max_entries: 128, max_value: 1000 };
        let mut h = Hash::new();
        for f in ["a", "b", "c", "d", "e"] {
            h.set(f.as_bytes(), format!("{f}-value").as_bytes(), lim);
        }
        let big = vec![b'x'; 200];
        assert!(!h.set(b"b", &big, lim)); // longer, and a wider length prefix
        assert!(!h.set(b"d", b"", lim)); // shorter
        assert!(!h.set(b"e", b"e-VALUE", lim)); // same length: in place
        assert!(h.remove(b"c")); // from the middle
        assert!(!h.remove(b"c"));
        assert!(h.set(b"c", b"again", lim)); // re-added at the end
        assert!(!h.set(b"b", b"short", lim));
        let want: Vec<(Vec<u8>, Vec<u8>)> =
            [("a", "a-value"), ("b", "short"), ("d", ""), ("e", "e-VALUE"), ("c", "again")]
                .iter()
                .map(|(f, v)| (f.as_bytes().to_vec(), v.as_bytes().to_vec()))
                .collect();
        assert_eq!(pairs(&h), want);
        assert_eq!(h.len(), 5);
        assert_eq!(packed(&h).len(), packed_size(&want));
        let mut rng = rand::thread_rng();
        let mut pick = h.sampler();
        for _ in 0..50 {
            let (f, v) = pick(&mut rng).unwrap();
            assert_eq!(h.get(f), Some(v));
            let (f, v) = h.random(&mut rng).unwrap();
            assert_eq!(h.get(f), Some(v));
        }
        drop(pick);
        for f in ["e", "a", "c", "d", "b"] {
            assert!(h.remove(f.as_bytes()));
        }
        assert!(h.is_empty());
        assert!(packed(&h).is_empty());
        assert_eq!(h.random(&mut rng), None);
        assert_eq!(h.sampler()(&mut rng), None);
    }

    #[test]
    fn deadlines_follow_fields_and_leave_no_index_behind() {
        let mut h = Hash::new();
        for f in ["a", "b", "c", "d"] {
            h.set(f.as_bytes(), b"v", LIM);
        }
        assert_eq!(h.encoding(), "listpack");
        h.set_ttl(b"zz", 5); // a missing field gets nothing
        assert!(!h.has_ttls());
        h.set_ttl(b"a", 30);
        h.set_ttl(b"b", 10);
        h.set_ttl(b"c", 20);
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!((h.next_deadline(), h.ttl_of(b"a"), h.ttl_of(b"d")), (Some(10), Some(30), None));
        h.set_ttl(b"b", 40); // moved, not duplicated
        assert_eq!(h.next_deadline(), Some(20));
        assert_eq!((h.live_len(19), h.live_len(20), h.live_len(100)), (4, 3, 1));
        assert_eq!(h.get_live(b"c", 19), Some(&b"v"[..]));
        assert_eq!(h.get_live(b"c", 20), None);
        let mut live = Vec::new();
        h.for_each_live(30, |f, _| live.push(f.to_vec()));
        live.sort();
        assert_eq!(live, vec![b"b".to_vec(), b"d".to_vec()]);
        // HINCRBY keeps a deadline, HSET drops it.
        h.set_keeping_ttl(b"a", b"1", LIM);
        assert_eq!(h.ttl_of(b"a"), Some(30));
        h.set(b"a", b"2", LIM);
        assert_eq!(h.ttl_of(b"a"), None);
        let c = h.clone();
        assert_eq!(c, h);
        assert_eq!(c.ttl_of(b"b"), Some(40));
        // Due fields go earliest first, a batch at a time.
        assert_eq!(h.remove_due(100, 1), vec![Box::<[u8]>::from(&b"c"[..])]);
        assert_eq!(h.remove_due(100, 10), vec![Box::<[u8]>::from(&b"b"[..])]);
        assert!(!h.has_ttls(), "the index goes with the last deadline");
        assert_eq!(h.len(), 2);
        h.set_ttl(b"d", 50);
        assert!(h.persist(b"d"));
        assert!(!h.persist(b"d"));
        assert!(!h.has_ttls());
        h.set_ttl(b"d", 50);
        assert!(h.remove(b"d"));
        assert!(!h.has_ttls());
        assert_ne!(c, h);
    }

    #[test]
    fn big_hash_scan_visits_everything() {
        let mut h = Hash::new();
        let lim = Limits { max_entries: 0, max_value: 0 };
        for i in 0..1000 {
            h.set(format!("field{i}").as_bytes(), format!("value-number-{i}").as_bytes(), lim);
        }
        let mut seen = std::collections::HashSet::new();
        let mut c = 0;
        loop {
            c = h.scan(c, |f, v| {
                assert_eq!(&f[5..], &v[13..]);
                seen.insert(f.to_vec());
            });
            if c == 0 {
                break;
            }
        }
        assert_eq!(seen.len(), 1000);
    }
}
