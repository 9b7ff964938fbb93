//! The set value (Redis's `t_set.c` type API): its encodings, hidden. The set commands are in
//! `types::set`.
//!
//! Three encodings, as Redis 7.2 reports them in OBJECT ENCODING:
//! * `intset`: a sorted `i64` array while every member is a canonical integer and there are at
//!   most `set-max-intset-entries` of them;
//! * `listpack`: the members packed into one byte buffer in insertion order (7.2), searched
//!   linearly, while there are at most `set-max-listpack-entries` members of at most
//!   `set-max-listpack-value` bytes;
//! * `hashtable`: our [`Dict`], with SCAN cursors and random sampling, beyond that.
//!
//! A set never converts back to a smaller encoding, like Redis.
//!
//! Commands reading several keys at once use [`Loaned`], which moves the values out of the
//! keyspace for the duration of the command (the command holds the shard locks, so nobody can
//! observe it) instead of copying them.

use super::packed::{get_str, push_str, put_len, Packed, Slot, Walk, LEN_MAX};
use crate::engine::dict::Dict;
use rand::seq::SliceRandom;
use rand::Rng;

// ---------------------------------------------------------------------------------------------
// Set type API
// ---------------------------------------------------------------------------------------------

/// The encoding thresholds, read once per command from the hot config.
#[derive(Clone, Copy, Debug)]
pub struct SetLimits {
    pub intset_entries: usize,
    pub listpack_entries: usize,
    pub listpack_value: usize,
}

/// A `Dict<()>` with the value semantics `Set` derives (Dict itself is not Clone/Eq).
pub struct Table(pub Dict<()>);

impl Clone for Table {
    fn clone(&self) -> Self {
        let mut d = Dict::new();
        self.0.for_each(|k, _| d.insert_new_slice(k, ()));
        Table(d)
    }
}

impl PartialEq for Table {
    fn eq(&self, other: &Self) -> bool {
        let mut same = self.0.len() == other.0.len();
        if same {
            self.0.for_each(|k, _| same = same && other.0.contains_key(k));
        }
        same
    }
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Table({} members)", self.0.len())
    }
}

/// The members of a `listpack`-encoded set, like Redis's listpack: each member with its length
/// prefix, in insertion order, in one allocation. Five 9-byte members take 50 bytes, where a
/// vector of boxed members took an 80-byte array plus five small allocations.
#[derive(Debug, Clone, Default, PartialEq)]
struct Members(Packed);

impl Members {
    fn iter(&self) -> Walk<'_, &[u8]> {
        self.0.walk(get_str)
    }

    fn find(&self, m: &[u8]) -> Option<Slot<&[u8]>> {
        self.iter().find(|e| e.item == m)
    }

    /// Appends a member known to be absent.
    fn push(&mut self, m: &[u8]) {
        let mut l = [0u8; LEN_MAX];
        self.0.push(&[put_len(m.len(), &mut l), m]);
    }

    fn remove(&mut self, m: &[u8]) -> bool {
        let span = self.find(m).map(|e| (e.start, e.end));
        self.0.delete_found(span)
    }

    /// Removes and returns the member at `index` (< len); later members keep their order.
    fn take(&mut self, index: usize) -> Option<Vec<u8>> {
        let (start, end, m) = self.iter().nth(index).map(|e| (e.start, e.end, e.item.to_vec()))?;
        self.0.delete(start, end, 1);
        Some(m)
    }

    /// Removes `count` (< len) distinct random members in one pass and returns them.
    fn take_random<R: Rng>(&mut self, count: usize, rng: &mut R) -> Vec<Vec<u8>> {
        let len = self.0.len();
        let mut picked = vec![false; len];
        for i in rand::seq::index::sample(rng, len, count) {
            picked[i] = true;
        }
        let mut out = Vec::with_capacity(count);
        let mut kept = Vec::with_capacity(self.0.bytes().len());
        for (e, pick) in self.iter().zip(picked) {
            if pick {
                out.push(e.item.to_vec());
            } else {
                kept.extend_from_slice(&self.0.bytes()[e.start..e.end]);
            }
        }
        *self = Members(Packed::from_vec(kept, len - out.len()));
        out.shuffle(rng);
        out
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Repr {
    /// Sorted, distinct integers, allocated to size (no growth slack: intsets are often many
    /// small values, and Redis's intset reallocates on every change too).
    Ints(Box<[i64]>),
    /// Distinct members in insertion order.
    Pack(Members),
    /// Boxed so `Set` stays small enough to sit inside `Value` unboxed.
    Table(Box<Table>),
}

/// A set value.
#[derive(Debug, Clone, PartialEq)]
pub struct Set {
    repr: Repr,
}

impl Set {
    /// The heap the set holds (`engine::footprint`).
    pub fn footprint(&self, samples: usize) -> usize {
        use super::footprint::{array, cls};
        match &self.repr {
            Repr::Ints(v) => array::<i64>(v.len()),
            Repr::Pack(m) => m.0.footprint(),
            Repr::Table(t) => cls(std::mem::size_of::<Table>()) + t.0.footprint(samples, |_| 0),
        }
    }
}

/// Inserts `i` at `pos` of a tight integer array (one realloc, in place when it can be).
fn ints_insert(v: &mut Box<[i64]>, pos: usize, i: i64) {
    let mut w = std::mem::take(v).into_vec();
    w.reserve_exact(1);
    w.insert(pos, i);
    *v = w.into_boxed_slice();
}

/// Removes and returns the integer at `pos`, shrinking the allocation to fit.
fn ints_remove(v: &mut Box<[i64]>, pos: usize) -> i64 {
    let mut w = std::mem::take(v).into_vec();
    let i = w.remove(pos);
    *v = w.into_boxed_slice();
    i
}

/// Number of characters of `v` in decimal, sign included (Redis's `sdigits10`).
fn digits10(v: i64) -> usize {
    itoa::Buffer::new().format(v).len()
}

impl Default for Set {
    fn default() -> Self {
        Set::new_intset()
    }
}

impl Set {
    /// An empty set in the `hashtable` encoding: set-algebra results are collected there
    /// (O(1) dedup), then re-encoded by the caller.
    pub fn new_table() -> Set {
        Set { repr: Repr::Table(Box::new(Table(Dict::new()))) }
    }

    /// Adds a member to a set made by [`Set::new_table`].
    pub fn table_add(&mut self, m: &[u8]) {
        if let Repr::Table(t) = &mut self.repr {
            if !t.0.contains_key(m) {
                t.0.insert_new_slice(m, ());
            }
        }
    }

    /// An empty `intset` (what Redis's SINTERSTORE/SUNIONSTORE start from).
    pub fn new_intset() -> Set {
        Set { repr: Repr::Ints(Box::default()) }
    }

    /// Redis's `setTypeCreate`: the encoding for a set about to receive `size_hint` members,
    /// the first of which is `first`.
    pub fn create(first: &[u8], size_hint: usize, lim: &SetLimits) -> Set {
        if crate::protocol::parse_i64(first).is_some() && size_hint <= lim.intset_entries {
            Set::new_intset()
        } else if size_hint <= lim.listpack_entries {
            Set { repr: Repr::Pack(Members::default()) }
        } else {
            Set { repr: Repr::Table(Box::new(Table(Dict::new()))) }
        }
    }

    /// The name OBJECT ENCODING reports.
    /// The bytes Redis's intset holding these members takes (an 8-byte header, then every
    /// member in the width the widest needs), or None unless `intset`-encoded.
    pub fn intset_bytes(&self) -> Option<usize> {
        let Repr::Ints(v) = &self.repr else { return None };
        let width = v.iter().fold(2, |w, &i| {
            w.max(if i16::try_from(i).is_ok() {
                2
            } else if i32::try_from(i).is_ok() {
                4
            } else {
                8
            })
        });
        Some(8 + width * v.len())
    }

    /// The member table's statistics when `hashtable`-encoded (DEBUG HTSTATS-KEY).
    pub fn dict_stats(&self) -> Option<Vec<(usize, usize, Vec<usize>)>> {
        match &self.repr {
            Repr::Table(t) => Some(t.0.stats()),
            _ => None,
        }
    }

    pub fn encoding(&self) -> &'static str {
        match self.repr {
            Repr::Ints(_) => "intset",
            Repr::Pack(_) => "listpack",
            Repr::Table(_) => "hashtable",
        }
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Ints(v) => v.len(),
            Repr::Pack(p) => p.0.len(),
            Repr::Table(t) => t.0.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains(&self, m: &[u8]) -> bool {
        match &self.repr {
            Repr::Ints(v) => crate::protocol::parse_i64(m).is_some_and(|i| v.binary_search(&i).is_ok()),
            Repr::Pack(p) => p.find(m).is_some(),
            Repr::Table(t) => t.0.contains_key(m),
        }
    }

    /// Converts to `hashtable`.
    fn convert_to_table(&mut self) {
        let mut d = Dict::new();
        self.for_each(|m| d.insert_new_slice(m, ()));
        self.repr = Repr::Table(Box::new(Table(d)));
    }

    /// Adds `m`; returns true if it was not there (Redis's `setTypeAdd`, conversions included).
    pub fn add(&mut self, m: &[u8], lim: &SetLimits) -> bool {
        match &mut self.repr {
            Repr::Ints(v) => {
                if let Some(i) = crate::protocol::parse_i64(m) {
                    match v.binary_search(&i) {
                        Ok(_) => return false,
                        Err(pos) => ints_insert(v, pos, i),
                    }
                    if v.len() > lim.intset_entries {
                        self.convert_to_table();
                    }
                    return true;
                }
                // A non-integer: listpack if everything fits, else hashtable.
                let maxlen = match (v.first(), v.last()) {
                    (Some(&a), Some(&b)) => digits10(a).max(digits10(b)),
                    _ => 0,
                };
                if v.len() < lim.listpack_entries && m.len() <= lim.listpack_value && maxlen <= lim.listpack_value {
                    let mut bytes = Vec::new();
                    let mut b = itoa::Buffer::new();
                    for i in v.iter() {
                        push_str(&mut bytes, b.format(*i).as_bytes());
                    }
                    push_str(&mut bytes, m);
                    self.repr = Repr::Pack(Members(Packed::from_vec(bytes, v.len() + 1)));
                } else {
                    self.convert_to_table();
                    self.add(m, lim);
                }
                true
            }
            Repr::Pack(p) => {
                if p.find(m).is_some() {
                    return false;
                }
                if p.0.len() < lim.listpack_entries && m.len() <= lim.listpack_value {
                    p.push(m);
                } else {
                    self.convert_to_table();
                    self.add(m, lim);
                }
                true
            }
            Repr::Table(t) => {
                if t.0.contains_key(m) {
                    return false;
                }
                t.0.insert_new_slice(m, ());
                true
            }
        }
    }

    /// Removes `m`; returns true if it was there.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Ints(v) => match crate::protocol::parse_i64(m).map(|i| v.binary_search(&i)) {
                Some(Ok(pos)) => {
                    ints_remove(v, pos);
                    true
                }
                _ => false,
            },
            Repr::Pack(p) => p.remove(m),
            Repr::Table(t) => t.0.remove(m).is_some(),
        }
    }

    /// The members of an `intset`-encoded set (sorted); None for the other encodings.
    pub fn ints(&self) -> Option<&[i64]> {
        match &self.repr {
            Repr::Ints(v) => Some(v),
            _ => None,
        }
    }

    /// Visits every member (integers rendered as text).
    pub fn for_each(&self, mut f: impl FnMut(&[u8])) {
        match &self.repr {
            Repr::Ints(v) => {
                let mut b = itoa::Buffer::new();
                for i in v.iter() {
                    f(b.format(*i).as_bytes());
                }
            }
            Repr::Pack(p) => p.iter().for_each(|e| f(e.item)),
            Repr::Table(t) => t.0.for_each(|k, _| f(k)),
        }
    }

    pub fn members(&self) -> Vec<Vec<u8>> {
        let mut out = Vec::with_capacity(self.len());
        self.for_each(|m| out.push(m.to_vec()));
        out
    }

    /// A random member (None when empty).
    /// Moves up to `n` buckets of the table's pending rehash, if any (random reads do, as in
    /// Redis: a table only read still finishes growing).
    pub fn rehash_step(&mut self, n: usize) {
        if let Repr::Table(t) = &mut self.repr {
            t.0.rehash(n);
        }
    }

    pub fn random<R: Rng>(&self, rng: &mut R) -> Option<Vec<u8>> {
        match &self.repr {
            Repr::Ints(v) => v.choose(rng).map(|i| itoa::Buffer::new().format(*i).as_bytes().to_vec()),
            Repr::Pack(p) if p.0.len() == 0 => None,
            Repr::Pack(p) => p.iter().nth(rng.gen_range(0..p.0.len())).map(|e| e.item.to_vec()),
            Repr::Table(t) => t.0.random(rng).map(|(k, _)| k.to_vec()),
        }
    }

    /// Visits `n` uniformly random members, repeats allowed, until `f` says stop (false). A
    /// listpack's members are listed once (it has no index to jump into) rather than walked
    /// for every pick.
    pub fn sample<R: Rng>(&self, n: u64, rng: &mut R, mut f: impl FnMut(&[u8]) -> bool) {
        if let Repr::Pack(p) = &self.repr {
            let all: Vec<&[u8]> = p.iter().map(|e| e.item).collect();
            for _ in 0..n {
                match all.choose(rng) {
                    Some(m) if f(m) => {}
                    _ => return,
                }
            }
            return;
        }
        for _ in 0..n {
            match self.random(rng) {
                Some(m) if f(&m) => {}
                _ => return,
            }
        }
    }

    /// Removes and returns a random member.
    pub fn pop_random<R: Rng>(&mut self, rng: &mut R) -> Option<Vec<u8>> {
        match &mut self.repr {
            Repr::Ints(v) if !v.is_empty() => {
                let i = ints_remove(v, rng.gen_range(0..v.len()));
                Some(itoa::Buffer::new().format(i).as_bytes().to_vec())
            }
            Repr::Pack(p) if p.0.len() > 0 => {
                let i = rng.gen_range(0..p.0.len());
                p.take(i)
            }
            Repr::Table(t) => {
                let k = t.0.random(rng)?.0.to_vec();
                t.0.remove(&k);
                Some(k)
            }
            _ => None,
        }
    }

    /// Removes and returns `count` distinct random members (`count` < len). A listpack is
    /// rewritten once rather than once per member.
    pub fn pop_many<R: Rng>(&mut self, count: usize, rng: &mut R) -> Vec<Vec<u8>> {
        match &mut self.repr {
            Repr::Pack(p) if count < p.0.len() => p.take_random(count, rng),
            _ => (0..count).map_while(|_| self.pop_random(rng)).collect(),
        }
    }

    /// One SSCAN step: small encodings are returned whole (cursor 0), like Redis; the
    /// hashtable uses the dict's reverse-binary cursor, visiting about `count` buckets.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8])) -> u64 {
        match &self.repr {
            Repr::Table(t) => {
                let mut cursor = cursor;
                let mut seen = 0usize;
                let mut maxiter = count * 10;
                loop {
                    cursor = t.0.scan(cursor, |k, _| {
                        seen += 1;
                        f(k)
                    });
                    maxiter -= 1;
                    if cursor == 0 || seen >= count || maxiter == 0 {
                        return cursor;
                    }
                }
            }
            _ => {
                self.for_each(f);
                0
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIM: SetLimits = SetLimits { intset_entries: 4, listpack_entries: 3, listpack_value: 5 };

    #[test]
    fn encodings_convert_like_redis() {
        let mut s = Set::create(b"1", 1, &LIM);
        assert_eq!(s.encoding(), "intset");
        for i in [3, 1, 2] {
            s.add(i.to_string().as_bytes(), &LIM);
        }
        assert_eq!(s.members(), vec![b"1".to_vec(), b"2".to_vec(), b"3".to_vec()]);
        // Intset of 3 < 3 entries fails: straight to hashtable.
        s.add(b"abc", &LIM);
        assert_eq!(s.encoding(), "hashtable");
        let mut p = Set::create(b"1", 1, &LIM);
        p.add(b"1", &LIM);
        p.add(b"x", &LIM);
        assert_eq!(p.encoding(), "listpack");
        assert!(p.contains(b"1") && p.contains(b"x") && !p.contains(b"01"));
        p.add(b"toolong", &LIM);
        assert_eq!(p.encoding(), "hashtable");
        assert_eq!(p.len(), 3);
        let mut i = Set::new_intset();
        for n in 0..5 {
            i.add(n.to_string().as_bytes(), &LIM);
        }
        assert_eq!(i.encoding(), "hashtable");
    }

    /// The listpack's bytes (panics for other encodings).
    fn packed(s: &Set) -> &[u8] {
        match &s.repr {
            Repr::Pack(p) => p.0.bytes(),
            _ => panic!("not a listpack"),
        }
    }

    #[test]
    fn set_sits_inside_value() {
        assert!(std::mem::size_of::<Set>() <= 32, "{}", std::mem::size_of::<Set>());
        assert_eq!(std::mem::size_of::<crate::engine::Value>(), 40);
    }

    #[test]
    fn packed_round_trips_order_and_deletes() {
        let lim = SetLimits { intset_entries: 512, listpack_entries: 128, listpack_value: 1000 };
        let lens = [0usize, 1, 127, 128, 300];
        let want: Vec<Vec<u8>> = lens.iter().enumerate().map(|(i, &n)| vec![b'a' + i as u8; n]).collect();
        let mut s = Set::create(&want[0], want.len(), &lim);
        for m in &want {
            assert!(s.add(m, &lim));
            assert!(!s.add(m, &lim));
        }
        assert_eq!(s.encoding(), "listpack");
        assert_eq!(s.len(), want.len());
        assert_eq!(s.members(), want);
        let size: usize = want.iter().map(|m| crate::engine::packed::str_size(m)).sum();
        assert_eq!(packed(&s).len(), size);
        assert!(want.iter().all(|m| s.contains(m)));
        assert!(!s.contains(b"bb") && !s.contains(&[b'c'; 126]));
        assert_eq!(s.clone(), s);
        // From the middle, then the ends; the rest keeps its order.
        assert!(s.remove(&want[2]));
        assert!(!s.remove(&want[2]));
        assert_eq!(s.members(), [&want[..2], &want[3..]].concat());
        assert!(s.remove(&want[0]) && s.remove(&want[4]));
        assert_eq!(s.members(), vec![want[1].clone(), want[3].clone()]);
        assert!(s.add(&want[0], &lim));
        assert_eq!(s.members(), vec![want[1].clone(), want[3].clone(), want[0].clone()]);
        let mut rng = rand::thread_rng();
        for _ in 0..20 {
            assert!(s.contains(&s.random(&mut rng).unwrap()));
        }
        let mut left = s.members();
        while let Some(m) = s.pop_random(&mut rng) {
            let at = left.iter().position(|x| *x == m).unwrap();
            left.remove(at);
            assert_eq!(s.members(), left);
        }
        assert!(s.is_empty() && packed(&s).is_empty());
        assert_eq!(s.random(&mut rng), None);
    }

    #[test]
    fn intset_to_listpack_keeps_members() {
        let lim = SetLimits { intset_entries: 512, listpack_entries: 128, listpack_value: 64 };
        let mut s = Set::create(b"5", 3, &lim);
        for m in ["5", "-3", "12"] {
            s.add(m.as_bytes(), &lim);
        }
        assert_eq!(s.encoding(), "intset");
        s.add(b"x", &lim);
        assert_eq!(s.encoding(), "listpack");
        assert_eq!(s.members(), vec![b"-3".to_vec(), b"5".to_vec(), b"12".to_vec(), b"x".to_vec()]);
        assert!(s.contains(b"12") && !s.contains(b"+12"));
    }

    #[test]
    fn pop_many_takes_distinct_members() {
        let lim = SetLimits { intset_entries: 0, listpack_entries: 128, listpack_value: 64 };
        let mut rng = rand::thread_rng();
        for count in [0, 1, 5, 9] {
            let mut s = Set::create(b"m", 10, &lim);
            for i in 0..10 {
                s.add(format!("m{i}").as_bytes(), &lim);
            }
            let before = s.members();
            let popped = s.pop_many(count, &mut rng);
            assert_eq!(popped.len(), count);
            assert_eq!(s.len(), 10 - count);
            let rest = s.members();
            assert_eq!(rest, before.iter().filter(|m| !popped.contains(m)).cloned().collect::<Vec<_>>());
            for m in &popped {
                assert!(before.contains(m) && !s.contains(m));
            }
        }
        let mut ints = Set::new_intset();
        for i in 0..10 {
            ints.add(i.to_string().as_bytes(), &lim);
        }
        assert_eq!(ints.pop_many(4, &mut rng).len(), 4);
        assert_eq!(ints.len(), 6);
    }

    #[test]
    fn scan_returns_everything() {
        let lim = SetLimits { intset_entries: 0, listpack_entries: 0, listpack_value: 0 };
        let mut s = Set::create(b"a", 1000, &lim);
        for n in 0..1000 {
            s.add(format!("m{n}").as_bytes(), &lim);
        }
        let mut seen = std::collections::HashSet::new();
        let mut c = 0;
        loop {
            c = s.scan(c, 10, |m| {
                seen.insert(m.to_vec());
            });
            if c == 0 {
                break;
            }
        }
        assert_eq!(seen.len(), 1000);
    }
}
