//! The list value (Redis's `quicklist`/`listpack` as one type): its API, encoding hidden. The
//! list commands are in `types::list`.
//!
//! Storage is one `VecDeque` of boxed elements: O(1) push and pop at both ends, O(1) indexing,
//! and no capacity slack per element. What OBJECT ENCODING reports follows Redis 7.2: a list is
//! `listpack` while it would fit in one listpack under `list-max-listpack-size`, and `quicklist`
//! once it grew past that. To decide exactly when Redis would convert, the list keeps the byte
//! size its listpack would have (`lp_bytes`), computed with listpack's own entry encoding.

use std::collections::VecDeque;

// ---------------------------------------------------------------------------------------------
// List API
// ---------------------------------------------------------------------------------------------

/// Listpack header (total bytes + element count) plus its end byte.
const LP_OVERHEAD: usize = 7;
/// Redis's `SIZE_SAFETY_LIMIT`: with a count-based fill, no listpack grows past 8 KB anyway.
const SIZE_SAFETY_LIMIT: usize = 8192;
/// Byte limits of the negative `list-max-listpack-size` classes −1 … −5.
const SIZE_CLASSES: [usize; 5] = [4096, 8192, 16384, 32768, 65536];

/// Redis's `quicklistNodeLimit`: (byte limit, count limit) of one node for a fill setting.
fn node_limits(fill: i64) -> (usize, usize) {
    if fill >= 0 {
        // A node holds at least one entry whatever the setting.
        (usize::MAX, if fill == 0 { 1 } else { fill as usize })
    } else {
        let class = ((-fill - 1) as usize).min(SIZE_CLASSES.len() - 1);
        (SIZE_CLASSES[class], usize::MAX)
    }
}

/// Redis's `quicklistNodeExceedsLimit`.
fn exceeds_limit(fill: i64, bytes: usize, count: usize) -> bool {
    let (sz, cnt) = node_limits(fill);
    if sz != usize::MAX {
        bytes > sz
    } else {
        bytes > SIZE_SAFETY_LIMIT || count > cnt
    }
}

/// Bytes one element takes in a listpack: its encoding (integers are stored as integers, like
/// `lpStringToInt64` decides) plus the back-length that lets listpacks be walked backwards.
pub(crate) fn lp_entry_size(v: &[u8]) -> usize {
    let enc = match crate::protocol::parse_i64(v) {
        Some(i) if (0..=127).contains(&i) => 1,
        Some(i) if (-4096..=4095).contains(&i) => 2,
        Some(i) if i16::try_from(i).is_ok() => 3,
        Some(i) if (-(1 << 23)..(1 << 23)).contains(&i) => 4,
        Some(i) if i32::try_from(i).is_ok() => 5,
        Some(_) => 9,
        None if v.len() < 64 => 1 + v.len(),
        None if v.len() < 4096 => 2 + v.len(),
        None => 5 + v.len(),
    };
    let backlen = match enc {
        0..=127 => 1,
        128..=16383 => 2,
        16384..=2097151 => 3,
        2097152..=268435455 => 4,
        _ => 5,
    };
    enc + backlen
}

/// Redis's `packed_threshold` (DEBUG QUICKLIST-PACKED-THRESHOLD, 1 GB by default): an element
/// at least this long is a plain quicklist node of its own, so a list holding one is never a
/// single listpack.
pub static PACKED_THRESHOLD: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(DEFAULT_PACKED_THRESHOLD);
pub const DEFAULT_PACKED_THRESHOLD: usize = 1 << 30;

fn packed_threshold() -> usize {
    PACKED_THRESHOLD.load(std::sync::atomic::Ordering::Relaxed)
}

/// A list value.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct List {
    items: VecDeque<Box<[u8]>>,
    /// Sum of `lp_entry_size` over the elements: what the listpack would weigh, less its
    /// header. Decides the `listpack` ↔ `quicklist` conversions as Redis does.
    lp_sum: usize,
    /// True once converted to what Redis calls a quicklist.
    quick: bool,
}

/// Which end of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Head,
    Tail,
}

impl List {
    pub fn new() -> List {
        List::default()
    }

    /// A list built from elements (SORT STORE), encoded as Redis would after building it.
    pub fn from_elements<I: IntoIterator<Item = Box<[u8]>>>(elements: I, fill: i64) -> List {
        let mut l = List { quick: true, ..List::default() };
        for e in elements {
            l.push(&e, End::Tail);
        }
        l.try_convert_quicklist(fill, false);
        l
    }

    /// A list kept as a quicklist whatever its size (loading an RDB list Redis keeps so: an
    /// old ziplist list, or a quicklist of several nodes).
    pub fn quicklist_of<I: IntoIterator<Item = Box<[u8]>>>(elements: I) -> List {
        let mut l = List { quick: true, ..List::default() };
        for e in elements {
            l.push(&e, End::Tail);
        }
        l
    }

    /// The name OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        if self.quick {
            "quicklist"
        } else {
            "listpack"
        }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The heap the list holds (`engine::footprint`): the list, its ring of element
    /// pointers, and each element's bytes.
    pub fn footprint(&self, samples: usize) -> usize {
        use super::footprint::{array, cls, Sampler};
        let mut each = Sampler::new(samples);
        for e in &self.items {
            if !each.wants() {
                break;
            }
            each.add(cls(e.len()));
        }
        cls(std::mem::size_of::<List>()) + array::<Box<[u8]>>(self.items.capacity()) + each.total(self.items.len())
    }

    /// Redis's `listTypeTryConversionAppend`: called before adding `count` elements of
    /// `raw_bytes` bytes in total; a listpack that would outgrow the limit becomes a quicklist.
    /// (Redis adds the raw lengths, not the encoded ones, and so do we.)
    pub fn before_append(&mut self, fill: i64, raw_bytes: usize, count: usize) {
        if !self.quick && exceeds_limit(fill, LP_OVERHEAD + self.lp_sum + raw_bytes, self.items.len() + count) {
            self.quick = true;
        }
    }

    /// Redis's `listTypeTryConvertQuicklist`: a quicklist small enough to be one listpack goes
    /// back to being one. After a removal (`shrinking`) the limits are halved, so a list that
    /// hovers around the threshold does not convert back and forth.
    pub fn try_convert_quicklist(&mut self, fill: i64, shrinking: bool) {
        if !self.quick {
            return;
        }
        // A plain node (an element past the packed threshold) keeps it a quicklist. Only a
        // lowered threshold (tests) can have any; the default is larger than any element.
        let t = packed_threshold();
        if t < DEFAULT_PACKED_THRESHOLD && self.items.iter().any(|e| e.len() >= t) {
            return;
        }
        let (mut sz, mut cnt) = node_limits(fill);
        if shrinking {
            sz /= 2;
            cnt /= 2;
        }
        // A quicklist node never exceeds the limit, so one whose contents exceed it has more
        // than one node and cannot convert.
        let bytes = LP_OVERHEAD + self.lp_sum;
        if bytes <= sz && self.items.len() <= cnt && !exceeds_limit(fill, bytes, self.items.len()) {
            self.quick = false;
        }
    }

    /// The quicklist Redis would build from these elements pushed one by one at the tail:
    /// (nodes, their listpacks' total bytes), for DEBUG OBJECT's `ql_nodes` and
    /// `ql_uncompressed_size`.
    pub fn quicklist_nodes(&self, fill: i64) -> (usize, usize) {
        let sizes = self.quicklist_node_bytes(fill);
        (sizes.len(), sizes.iter().sum())
    }

    /// Each node's listpack bytes in the quicklist Redis would build (MEMORY USAGE).
    pub fn quicklist_node_bytes(&self, fill: i64) -> Vec<usize> {
        self.quicklist_runs(fill).into_iter().map(|(_, bytes, _)| bytes).collect()
    }

    /// The nodes of the quicklist Redis would build from these elements pushed one by one at
    /// the tail: (element count, listpack bytes, plain) each — a plain node holds one element
    /// past the packed threshold as it is. RDB files store lists node by node.
    pub fn quicklist_runs(&self, fill: i64) -> Vec<(usize, usize, bool)> {
        let (mut out, mut cur_b, mut cur_n, mut cur_plain) = (Vec::new(), 0, 0, false);
        for e in &self.items {
            let s = lp_entry_size(e);
            let plain = e.len() >= packed_threshold();
            if cur_n > 0 && (plain || cur_plain || exceeds_limit(fill, LP_OVERHEAD + cur_b + s, cur_n + 1)) {
                out.push((cur_n, LP_OVERHEAD + cur_b, cur_plain));
                (cur_b, cur_n) = (0, 0);
            }
            cur_b += s;
            cur_n += 1;
            cur_plain = plain;
        }
        if cur_n > 0 {
            out.push((cur_n, LP_OVERHEAD + cur_b, cur_plain));
        }
        out
    }

    pub fn push(&mut self, v: &[u8], end: End) {
        if v.len() >= packed_threshold() {
            self.quick = true;
        }
        self.lp_sum += lp_entry_size(v);
        match end {
            End::Head => self.items.push_front(v.into()),
            End::Tail => self.items.push_back(v.into()),
        }
    }

    pub fn pop(&mut self, end: End) -> Option<Box<[u8]>> {
        let v = match end {
            End::Head => self.items.pop_front(),
            End::Tail => self.items.pop_back(),
        }?;
        self.lp_sum -= lp_entry_size(&v);
        Some(v)
    }

    /// Element at a Redis index (negative counts from the tail).
    pub fn get(&self, index: i64) -> Option<&[u8]> {
        let i = self.resolve(index)?;
        self.items.get(i).map(|b| &**b)
    }

    /// A Redis index resolved to a position, if it is in range.
    fn resolve(&self, index: i64) -> Option<usize> {
        let len = self.items.len() as i64;
        let i = if index < 0 { len.checked_add(index)? } else { index };
        (0..len).contains(&i).then_some(i as usize)
    }

    /// Replaces the element at `index`; false if out of range.
    pub fn set(&mut self, index: i64, v: &[u8]) -> bool {
        let Some(i) = self.resolve(index) else { return false };
        self.lp_sum = self.lp_sum - lp_entry_size(&self.items[i]) + lp_entry_size(v);
        self.items[i] = v.into();
        true
    }

    /// Inserts `v` at position `pos` (0 ..= len).
    pub fn insert(&mut self, pos: usize, v: &[u8]) {
        self.lp_sum += lp_entry_size(v);
        self.items.insert(pos, v.into());
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &[u8]> + ExactSizeIterator {
        self.items.iter().map(|b| &**b)
    }

    /// Position of the first element equal to `v`.
    pub fn position(&self, v: &[u8]) -> Option<usize> {
        self.items.iter().position(|e| &**e == v)
    }

    /// Redis's LRANGE index normalisation: the positions `start..=end` to return, or None
    /// for an empty range.
    pub fn range_bounds(&self, start: i64, end: i64) -> Option<(usize, usize)> {
        let len = self.items.len() as i64;
        let mut start = if start < 0 { len.saturating_add(start) } else { start };
        let mut end = if end < 0 { len.saturating_add(end) } else { end };
        if start < 0 {
            start = 0;
        }
        if start > end || start >= len {
            return None;
        }
        if end >= len {
            end = len - 1;
        }
        Some((start as usize, end as usize))
    }

    /// Elements in `start..=end` (positions already normalised).
    pub fn range(&self, start: usize, end: usize) -> impl DoubleEndedIterator<Item = &[u8]> {
        self.items.range(start..=end).map(|b| &**b)
    }

    /// Removes up to `count` occurrences of `v` (count > 0 from the head, < 0 from the tail,
    /// 0 all of them); returns how many were removed.
    pub fn remove_matching(&mut self, v: &[u8], count: i64) -> usize {
        let limit = if count == 0 { usize::MAX } else { count.unsigned_abs().min(usize::MAX as u64) as usize };
        let mut removed = 0;
        let entry = lp_entry_size(v);
        if count >= 0 {
            let mut i = 0;
            while i < self.items.len() && removed < limit {
                if &*self.items[i] == v {
                    self.items.remove(i);
                    removed += 1;
                } else {
                    i += 1;
                }
            }
        } else {
            let mut i = self.items.len();
            while i > 0 && removed < limit {
                i -= 1;
                if &*self.items[i] == v {
                    self.items.remove(i);
                    removed += 1;
                }
            }
        }
        self.lp_sum -= entry * removed;
        removed
    }

    /// Keeps only positions `start..=end` (normalised by the caller); None empties the list.
    pub fn trim(&mut self, keep: Option<(usize, usize)>) -> usize {
        let before = self.items.len();
        match keep {
            None => {
                self.items.clear();
                self.lp_sum = 0;
            }
            Some((start, end)) => {
                for e in self.items.drain(end + 1..) {
                    self.lp_sum -= lp_entry_size(&e);
                }
                for e in self.items.drain(..start) {
                    self.lp_sum -= lp_entry_size(&e);
                }
            }
        }
        before - self.items.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listpack_entry_sizes_match_redis_encoding() {
        assert_eq!(lp_entry_size(b"5"), 2); // 7-bit uint + backlen
        assert_eq!(lp_entry_size(b"-1"), 3); // 13-bit int
        assert_eq!(lp_entry_size(b"1000"), 3);
        assert_eq!(lp_entry_size(b"100000"), 5); // 24-bit
        assert_eq!(lp_entry_size(b"9223372036854775807"), 10);
        assert_eq!(lp_entry_size(b"abc"), 5); // 6-bit str: 1 + 3 + backlen
        assert_eq!(lp_entry_size(b"007"), 5); // not canonical: a string
        assert_eq!(lp_entry_size(&[b'x'; 100]), 2 + 100 + 1);
        assert_eq!(lp_entry_size(&[b'x'; 200]), 2 + 200 + 2);
        assert_eq!(lp_entry_size(&[b'x'; 5000]), 5 + 5000 + 2);
    }

    #[test]
    fn conversion_follows_fill() {
        // Count fill: 4 entries per node.
        let mut l = List::new();
        for i in 0..4 {
            l.before_append(4, 1, 1);
            l.push(format!("{i}").as_bytes(), End::Tail);
        }
        assert_eq!(l.encoding(), "listpack");
        l.before_append(4, 1, 1);
        l.push(b"x", End::Tail);
        assert_eq!(l.encoding(), "quicklist");
        // Shrinking converts back only at half the limit.
        l.pop(End::Head);
        l.pop(End::Head);
        l.try_convert_quicklist(4, true);
        assert_eq!(l.encoding(), "quicklist");
        l.pop(End::Head);
        l.try_convert_quicklist(4, true);
        assert_eq!(l.encoding(), "listpack");
        // Size fill −1: 4 KB.
        let mut l = List::new();
        l.before_append(-1, 4000, 1);
        l.push(&[b'a'; 4000], End::Tail);
        assert_eq!(l.encoding(), "listpack");
        l.before_append(-1, 100, 1);
        assert_eq!(l.encoding(), "quicklist");
    }

    #[test]
    fn ranges_and_removal() {
        let mut l = List::new();
        for v in ["a", "b", "a", "c", "a"] {
            l.push(v.as_bytes(), End::Tail);
        }
        assert_eq!(l.range_bounds(0, -1), Some((0, 4)));
        assert_eq!(l.range_bounds(-100, 1), Some((0, 1)));
        assert_eq!(l.range_bounds(3, 1), None);
        assert_eq!(l.range_bounds(5, 10), None);
        assert_eq!(l.get(-1), Some(&b"a"[..]));
        assert_eq!(l.get(-6), None);
        assert_eq!(l.remove_matching(b"a", -2), 2);
        assert_eq!(l.iter().collect::<Vec<_>>(), vec![&b"a"[..], b"b", b"c"]);
        let sum: usize = l.iter().map(lp_entry_size).sum();
        assert_eq!(sum, l.lp_sum);
        assert_eq!(l.trim(Some((1, 1))), 2);
        assert_eq!(l.iter().collect::<Vec<_>>(), vec![&b"b"[..]]);
        assert_eq!(l.lp_sum, lp_entry_size(b"b"));
    }
}
