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

use super::packed::{get_str, put_len, Packed, Slot, Walk, LEN_MAX};
use crate::engine::dict::Dict;
use rand::Rng;

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
    Table(Box<Dict<HVal>>),
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
            Repr::Table(d) => {
                let mut c = Dict::new();
                d.for_each(|f, v| c.insert_new_slice(f, v.clone()));
                Hash { repr: Repr::Table(Box::new(c)) }
            }
        }
    }
}

impl PartialEq for Hash {
    fn eq(&self, other: &Self) -> bool {
        if self.len() != other.len() {
            return false;
        }
        let mut same = true;
        self.for_each(|f, v| same &= other.get(f) == Some(v));
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
        match &self.repr {
            Repr::Table(t) => Some(t.stats()),
            _ => None,
        }
    }

    pub fn encoding(&self) -> &'static str {
        match self.repr {
            Repr::Listpack(_) => "listpack",
            Repr::Table(_) => "hashtable",
        }
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Listpack(p) => p.0.len(),
            Repr::Table(d) => d.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

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
        self.repr = Repr::Table(Box::new(d));
    }

    /// Sets `field` to `value`; true if the field is new. Converts as Redis's `hashTypeSet`
    /// does: before, for a long field or value; after, past the entry limit.
    pub fn set(&mut self, field: &[u8], value: &[u8], lim: Limits) -> bool {
        self.convert_for([field.len(), value.len()], lim);
        let new = match &mut self.repr {
            Repr::Listpack(p) => p.set(field, value),
            Repr::Table(d) => match d.get_mut(field) {
                Some(old) => {
                    *old = HVal::new(value);
                    false
                }
                None => {
                    d.insert_new_slice(field, HVal::new(value));
                    true
                }
            },
        };
        if self.len() > lim.max_entries {
            self.convert();
        }
        new
    }

    /// Removes `field`; true if it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Listpack(p) => p.remove(field),
            Repr::Table(d) => d.remove(field).is_some(),
        }
    }

    /// Visits every pair (listpack: insertion order; hashtable: table order).
    pub fn for_each(&self, mut f: impl FnMut(&[u8], &[u8])) {
        match &self.repr {
            Repr::Listpack(p) => p.iter().for_each(|e| f(e.item.field, e.item.value)),
            Repr::Table(d) => d.for_each(|k, val| f(k, val.bytes())),
        }
    }

    /// One SCAN step from `cursor`: visits some pairs and returns the next cursor (0 = done).
    /// A listpack is returned whole in one step, as Redis does.
    pub fn scan(&self, cursor: u64, mut f: impl FnMut(&[u8], &[u8])) -> u64 {
        match &self.repr {
            Repr::Listpack(_) => {
                self.for_each(f);
                0
            }
            Repr::Table(d) => d.scan(cursor, |k, v| f(k, v.bytes())),
        }
    }

    /// A random pair (the hash must not be empty).
    pub fn random<R: Rng>(&self, rng: &mut R) -> Option<(&[u8], &[u8])> {
        match &self.repr {
            Repr::Listpack(p) if p.0.len() == 0 => None,
            Repr::Listpack(p) => p.iter().nth(rng.gen_range(0..p.0.len())).map(|e| (e.item.field, e.item.value)),
            Repr::Table(d) => d.random(rng).map(|(k, v)| (k, v.bytes())),
        }
    }

    /// Random pairs for repeated picks (None if the hash is empty). A listpack has no index to
    /// jump into, so its pairs are listed once here instead of walked on every pick.
    pub fn sampler<'a, R: Rng>(&'a self) -> impl FnMut(&mut R) -> Option<(&'a [u8], &'a [u8])> + 'a {
        let pairs: Vec<(&'a [u8], &'a [u8])> = match &self.repr {
            Repr::Listpack(p) => p.iter().map(|e| (e.item.field, e.item.value)).collect(),
            Repr::Table(_) => Vec::new(),
        };
        move |rng| match &self.repr {
            Repr::Listpack(_) if pairs.is_empty() => None,
            Repr::Listpack(_) => Some(pairs[rng.gen_range(0..pairs.len())]),
            Repr::Table(d) => d.random(rng).map(|(k, v)| (k, v.bytes())),
        }
    }

    /// Approximate heap bytes, for memory accounting.
    pub fn heap_size(&self) -> usize {
        let mut n = 0;
        match &self.repr {
            Repr::Listpack(p) => n += p.0.bytes().len(),
            Repr::Table(d) => {
                n += std::mem::size_of::<Dict<HVal>>() + d.buckets() * 8;
                d.for_each(|f, v| {
                    n += 48 + f.len();
                    if let HVal::Heap(b) = v {
                        n += 16 + b.len();
                    }
                });
            }
        }
        n
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
            Repr::Table(_) => panic!("not packed"),
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
