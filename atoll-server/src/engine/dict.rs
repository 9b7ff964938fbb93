//! The per-shard hash table.
//!
//! Written by hand because the keyspace needs three things `std`/hashbrown maps do not expose
//! (DESIGN §1): Redis's reverse-binary SCAN cursor, which returns every element present for the
//! whole scan at least once even while the table grows or shrinks; random sampling (RANDOMKEY,
//! active expiry, eviction); and incremental growth, so a shard holding a huge hash-tagged key
//! set never stops the world to rehash. Like Redis's `dict.c`: chained buckets, two tables
//! while rehashing, and a few buckets moved on each write.

use rand::Rng;
use std::sync::LazyLock;

/// One seeded hasher for the process: keys hash differently on every start (no hash flooding
/// from precomputed collisions) but identically in all shards.
static HASHER: LazyLock<ahash::RandomState> = LazyLock::new(ahash::RandomState::new);

#[inline]
pub fn hash_key(key: &[u8]) -> u64 {
    HASHER.hash_one(key)
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

struct Node<V> {
    next: Option<Box<Node<V>>>,
    key: KeyBytes,
    val: V,
}

struct Table<V> {
    buckets: Vec<Option<Box<Node<V>>>>,
    used: usize,
}

impl<V> Table<V> {
    const fn empty() -> Self {
        Table { buckets: Vec::new(), used: 0 }
    }
    fn with_size(n: usize) -> Self {
        let mut buckets = Vec::with_capacity(n);
        buckets.resize_with(n, || None);
        Table { buckets, used: 0 }
    }
    #[inline]
    fn mask(&self) -> usize {
        self.buckets.len().wrapping_sub(1)
    }
}

/// Buckets moved per write while rehashing (and 10× that many empty buckets visited at most).
const REHASH_STEP: usize = 1;
const INITIAL_SIZE: usize = 4;

pub struct Dict<V> {
    t: [Table<V>; 2],
    /// Next bucket of `t[0]` to move to `t[1]`, or `None` when not rehashing.
    rehash_idx: Option<usize>,
}

impl<V> Default for Dict<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V> Drop for Dict<V> {
    fn drop(&mut self) {
        self.clear();
    }
}

impl<V> Dict<V> {
    pub const fn new() -> Self {
        Dict { t: [Table::empty(), Table::empty()], rehash_idx: None }
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
                while let Some(mut n) = cur {
                    cur = n.next.take();
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
            while let Some(mut node) = cur {
                cur = node.next.take();
                let h = hash_key(&node.key) as usize & self.t[1].mask();
                node.next = self.t[1].buckets[h].take();
                self.t[1].buckets[h] = Some(node);
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
    /// a little later does not wait for that cache miss (see `Keyspace::prefetch_keys`).
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
                prefetch(&**n as *const Node<V> as *const u8);
            }
        }
    }

    pub fn get(&self, key: &[u8]) -> Option<&V> {
        if self.is_empty() {
            return None;
        }
        let h = hash_key(key) as usize;
        for t in &self.t[..self.tables_to_search()] {
            if t.buckets.is_empty() {
                continue;
            }
            let mut cur = t.buckets[h & t.mask()].as_deref();
            while let Some(n) = cur {
                if &*n.key == key {
                    return Some(&n.val);
                }
                cur = n.next.as_deref();
            }
        }
        None
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut V> {
        if self.is_empty() {
            return None;
        }
        self.step();
        let h = hash_key(key) as usize;
        let ntables = self.tables_to_search();
        for t in &mut self.t[..ntables] {
            if t.buckets.is_empty() {
                continue;
            }
            let m = t.mask();
            let mut cur = t.buckets[h & m].as_deref_mut();
            while let Some(n) = cur {
                if &*n.key == key {
                    return Some(&mut n.val);
                }
                cur = n.next.as_deref_mut();
            }
        }
        None
    }

    pub fn contains_key(&self, key: &[u8]) -> bool {
        self.get(key).is_some()
    }

    /// Inserts or replaces; returns the previous value.
    pub fn insert(&mut self, key: &[u8], val: V) -> Option<V> {
        if let Some(v) = self.get_mut(key) {
            return Some(std::mem::replace(v, val));
        }
        self.insert_key(KeyBytes::from_slice(key), val);
        None
    }

    /// Inserts a key known to be absent.
    pub fn insert_new(&mut self, key: Box<[u8]>, val: V) {
        self.insert_key(KeyBytes::from_box(key), val);
    }

    /// Inserts a key known to be absent, from a borrowed slice (no intermediate allocation).
    pub fn insert_new_slice(&mut self, key: &[u8], val: V) {
        self.insert_key(KeyBytes::from_slice(key), val);
    }

    fn insert_key(&mut self, key: KeyBytes, val: V) {
        self.expand_if_needed();
        self.step();
        let ti = if self.rehash_idx.is_some() { 1 } else { 0 };
        let t = &mut self.t[ti];
        let h = hash_key(&key) as usize & t.mask();
        let node = Box::new(Node { next: t.buckets[h].take(), key, val });
        t.buckets[h] = Some(node);
        t.used += 1;
    }

    /// Removes a key, returning its owned key and value.
    pub fn remove(&mut self, key: &[u8]) -> Option<(Box<[u8]>, V)> {
        if self.is_empty() {
            return None;
        }
        self.step();
        let h = hash_key(key) as usize;
        let ntables = self.tables_to_search();
        for ti in 0..ntables {
            let t = &mut self.t[ti];
            if t.buckets.is_empty() {
                continue;
            }
            let m = t.mask();
            let mut link = &mut t.buckets[h & m];
            loop {
                match link {
                    None => break,
                    Some(n) if &*n.key == key => {
                        let mut node = link.take().unwrap();
                        *link = node.next.take();
                        t.used -= 1;
                        let Node { key, val, .. } = *node;
                        if self.is_empty() {
                            // Give all buckets back at once.
                            self.clear();
                        } else {
                            self.shrink_if_needed();
                        }
                        return Some((key.into_box(), val));
                    }
                    Some(n) => link = &mut n.next,
                }
            }
        }
        None
    }

    /// Visits every element (no particular order).
    pub fn for_each(&self, mut f: impl FnMut(&[u8], &V)) {
        for t in &self.t {
            for b in &t.buckets {
                let mut cur = b.as_deref();
                while let Some(n) = cur {
                    f(&n.key, &n.val);
                    cur = n.next.as_deref();
                }
            }
        }
    }

    /// Reverse-binary cursor scan, Redis's `dictScan`: calls `f` for the elements of one
    /// bucket (and, while rehashing, of the buckets of the larger table that expand it) and
    /// returns the next cursor; 0 means the scan is complete. Elements present during the whole
    /// scan are returned at least once, however the table is resized between calls.
    pub fn scan(&self, cursor: u64, mut f: impl FnMut(&[u8], &V)) -> u64 {
        if self.is_empty() {
            return 0;
        }
        let mut v = cursor;
        let emit = |t: &Table<V>, idx: usize, f: &mut dyn FnMut(&[u8], &V)| {
            let mut cur = t.buckets[idx].as_deref();
            while let Some(n) = cur {
                f(&n.key, &n.val);
                cur = n.next.as_deref();
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

    /// A uniformly chosen bucket's random element (Redis's `dictGetFairRandomKey` idea is not
    /// needed here: callers only need "some random element").
    pub fn random<R: Rng>(&self, rng: &mut R) -> Option<(&[u8], &V)> {
        if self.is_empty() {
            return None;
        }
        // Sample non-empty buckets; chains are short because the load factor stays ≤ 1.
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
            if let Some(head) = t.buckets[idx].as_deref() {
                let mut len = 0;
                let mut cur = Some(head);
                while let Some(n) = cur {
                    len += 1;
                    cur = n.next.as_deref();
                }
                let mut pick = rng.gen_range(0..len);
                let mut cur = head;
                while pick > 0 {
                    cur = cur.next.as_deref().unwrap();
                    pick -= 1;
                }
                return Some((&cur.key, &cur.val));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        assert_eq!(std::mem::size_of::<Node<crate::engine::Obj>>(), 80);
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
        let mut max = 0;
        let mut nonempty = 0;
        for b in &d.t[0].buckets {
            let mut n = 0;
            let mut cur = b.as_deref();
            while let Some(x) = cur {
                n += 1;
                cur = x.next.as_deref();
            }
            max = max.max(n);
            nonempty += (n > 0) as usize;
        }
        println!("len {} buckets {} nonempty {} max chain {}", d.len(), d.buckets(), nonempty, max);
        assert!(max <= 8);
    }
}
