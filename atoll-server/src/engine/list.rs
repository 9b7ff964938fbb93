//! The list value (Redis's `quicklist`/`listpack` as one type): its API, encoding hidden. The
//! list commands are in `types::list`.
//!
//! A list under `list-max-listpack-size` is one `VecDeque` of boxed elements: O(1) push and
//! pop at both ends, O(1) indexing, no capacity slack per element. What OBJECT ENCODING reports
//! follows Redis 7.2: a list is `listpack` while it would fit in one listpack, and `quicklist`
//! once it grew past that. To decide exactly when Redis would convert, the list keeps the byte
//! size its listpack would have (`lp_sum`), computed with listpack's own entry encoding.
//!
//! A quicklist keeps its ends plain and packs everything between them into chunks of one
//! node's worth each (a node being what `list-max-listpack-size` allows): each element as its
//! length and bytes, as a listpack holds it, so a long list costs no pointer and allocation per
//! element. The plain ends are one node's worth at each with `list-compress-depth` 0, and N to
//! N+1 nodes' worth with depth N (taken when the list becomes a quicklist, as Redis's
//! quicklist takes it when created); with N > 0 the chunks are LZF-compressed when that saves
//! at least 8 bytes (Redis's `MIN_COMPRESS_IMPROVE`; runs under 48 bytes are not tried), as a
//! compressed quicklist node is. Pushes and pops work on the plain ends; a chunk is unpacked
//! when an end reaches it, and reading or changing the middle unpacks the chunks it touches
//! (an iterator reads each chunk once, and borrows from one stored uncompressed).
use std::borrow::Cow;
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

/// `list-compress-depth` as configured (CONFIG SET stores it); a list takes it when it
/// becomes a quicklist.
pub static COMPRESS_DEPTH: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Redis's quicklist `MIN_COMPRESS_BYTES`: shorter runs are never compressed.
const MIN_COMPRESS_BYTES: usize = 48;
/// Redis's quicklist `MIN_COMPRESS_IMPROVE`: compressed only when that saves this much.
const MIN_COMPRESS_IMPROVE: usize = 8;

fn put_len(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn get_len(b: &[u8], at: &mut usize) -> usize {
    let (mut n, mut shift) = (0usize, 0);
    loop {
        let x = b[*at];
        *at += 1;
        n |= ((x & 0x7f) as usize) << shift;
        if x & 0x80 == 0 {
            return n;
        }
        shift += 7;
    }
}

/// Integers of at most this magnitude are packed as integers, as a listpack stores an element
/// that is an integer's canonical text: a 7-digit ID takes 4 bytes instead of 8.
const INT_LIMIT: i64 = 1 << 61;

/// Packs one element: a header (LEB128) holding either the length of the bytes that follow
/// (low bit 0) or the integer the element spells, zigzag-coded (low bit 1).
fn put_entry(out: &mut Vec<u8>, e: &[u8]) {
    match crate::protocol::parse_i64(e) {
        Some(i) if (-INT_LIMIT..INT_LIMIT).contains(&i) => {
            let zigzag = ((i << 1) ^ (i >> 63)) as usize;
            put_len(out, (zigzag << 1) | 1);
        }
        _ => {
            put_len(out, e.len() << 1);
            out.extend_from_slice(e);
        }
    }
}

/// The entry at `at` (moved past it): bytes borrowed from `raw`, or an integer spelled out.
/// `parse_i64` accepted only canonical text, so the spelling is the element's own.
fn read_entry<'b>(raw: &'b [u8], at: &mut usize) -> Cow<'b, [u8]> {
    let h = get_len(raw, at);
    if h & 1 == 1 {
        let zigzag = h >> 1;
        let i = (zigzag >> 1) as i64 ^ -((zigzag & 1) as i64);
        Cow::Owned(itoa::Buffer::new().format(i).as_bytes().to_vec())
    } else {
        let n = h >> 1;
        *at += n;
        Cow::Borrowed(&raw[*at - n..*at])
    }
}

fn skip_entry(raw: &[u8], at: &mut usize) {
    let h = get_len(raw, at);
    if h & 1 == 0 {
        *at += h >> 1;
    }
}

/// A run of middle elements stored together, as Redis stores a compressed quicklist node: each
/// element as its length (LEB128) and bytes, the whole LZF-compressed when that pays.
#[derive(Debug, Clone)]
struct Chunk {
    count: usize,
    /// Sum of the elements' `lp_entry_size` (the zones weigh chunks without unpacking them).
    lp_bytes: usize,
    /// Length of the run before compression.
    raw_len: usize,
    lzf: bool,
    data: Box<[u8]>,
    /// In an uncompressed chunk, the byte offset of every `MARK_EVERY`th element: a read in
    /// the middle of a chunk walks at most that many entries (about 1.5 % of the chunk).
    marks: Box<[u32]>,
}

const MARK_EVERY: usize = 128;

impl Chunk {
    /// `elems` as one run, LZF-compressed if `lzf` and that pays.
    fn pack(elems: &[Box<[u8]>], lp_bytes: usize, lzf: bool) -> Chunk {
        #[cfg(test)]
        tests::PACKS.with(|p| p.set(p.get() + 1));
        let mut raw = Vec::with_capacity(elems.iter().map(|e| e.len() + 2).sum());
        let mut marks = Vec::with_capacity(elems.len() / MARK_EVERY);
        for (k, e) in elems.iter().enumerate() {
            if k > 0 && k % MARK_EVERY == 0 {
                marks.push(raw.len() as u32);
            }
            put_entry(&mut raw, e);
        }
        let raw_len = raw.len();
        if lzf && raw_len >= MIN_COMPRESS_BYTES {
            if let Some(c) = crate::engine::rdb::lzf::compress(&raw, raw_len - MIN_COMPRESS_IMPROVE) {
                let data = c.into_boxed_slice();
                return Chunk { count: elems.len(), lp_bytes, raw_len, lzf: true, data, marks: Box::default() };
            }
        }
        let (data, marks) = (raw.into_boxed_slice(), marks.into_boxed_slice());
        Chunk { count: elems.len(), lp_bytes, raw_len, lzf: false, data, marks }
    }

    /// Where to start walking to element `off` of an uncompressed chunk: (element, byte).
    fn seek(&self, off: usize) -> (usize, usize) {
        match off / MARK_EVERY {
            0 => (0, 0),
            m => (m * MARK_EVERY, self.marks[m - 1] as usize),
        }
    }

    fn raw(&self) -> Cow<'_, [u8]> {
        if self.lzf {
            // Our own compressor's output of exactly `raw_len` bytes: it decompresses.
            Cow::Owned(::lzf::decompress(&self.data, self.raw_len).expect("a list chunk packed by `Chunk::pack`"))
        } else {
            Cow::Borrowed(&self.data)
        }
    }

    fn unpack(&self) -> Vec<Box<[u8]>> {
        let raw = self.raw();
        let (mut out, mut at) = (Vec::with_capacity(self.count), 0);
        while at < raw.len() {
            out.push(read_entry(&raw, &mut at).into_owned().into_boxed_slice());
        }
        out
    }

    /// The elements in order: borrowed from a chunk stored as it is, copied out of a
    /// compressed one.
    fn elems(&self) -> Vec<Cow<'_, [u8]>> {
        if self.lzf {
            return self.unpack().into_iter().map(|e| Cow::Owned(e.into_vec())).collect();
        }
        let (mut out, mut at) = (Vec::with_capacity(self.count), 0);
        while at < self.data.len() {
            out.push(read_entry(&self.data, &mut at));
        }
        out
    }

    /// Whether the element packed as `want` (by `put_entry`) is among the elements: an
    /// element's packing is unique, so packed bytes compare as the elements do.
    fn contains_packed(&self, want: &[u8]) -> bool {
        let raw = self.raw();
        let mut at = 0;
        while at < raw.len() {
            let start = at;
            skip_entry(&raw, &mut at);
            if raw[start..at] == want[..] {
                return true;
            }
        }
        false
    }

    /// The element at `off` alone.
    fn one(&self, off: usize) -> Cow<'_, [u8]> {
        let raw = self.raw();
        let (from, mut at) = if self.lzf { (0, 0) } else { self.seek(off) };
        for _ in from..off {
            skip_entry(&raw, &mut at);
        }
        match raw {
            Cow::Borrowed(b) => read_entry(b, &mut at),
            Cow::Owned(v) => Cow::Owned(read_entry(&v, &mut at).into_owned()),
        }
    }
}

/// A compressing list's middle and tail: the list is `items` (the head zone), then `chunks`,
/// then `tail`. Each zone holds at most `zone_bytes` of listpack entries and `zone_count`
/// elements (depth + 1 nodes) — more than that and its innermost node's worth is packed
/// into a chunk — and takes the nearest chunk back when it fits whole (or the zone is empty).
#[derive(Debug, Clone)]
struct Middle {
    depth: usize,
    /// Chunks are LZF-compressed (depth > 0); at depth 0 they are stored as they are, which
    /// is what packing a long list is for: no pointer and allocation per element.
    lzf: bool,
    zone_bytes: usize,
    zone_count: usize,
    node_bytes: usize,
    node_count: usize,
    head_bytes: usize,
    chunks: VecDeque<Chunk>,
    /// Elements in `chunks`.
    count: usize,
    tail: VecDeque<Box<[u8]>>,
    tail_bytes: usize,
}

impl Middle {
    fn over(&self, bytes: usize, count: usize) -> bool {
        bytes > self.zone_bytes || count > self.zone_count
    }

    /// `elems` packed into node-sized chunks, in order.
    fn chunks_of(&self, elems: Vec<Box<[u8]>>) -> Vec<Chunk> {
        let (mut out, mut run, mut b) = (Vec::new(), Vec::new(), 0);
        for e in elems {
            let s = lp_entry_size(&e);
            if !run.is_empty() && (b + s > self.node_bytes || run.len() + 1 > self.node_count) {
                out.push(Chunk::pack(&run, b, self.lzf));
                (run, b) = (Vec::new(), 0);
            }
            run.push(e);
            b += s;
        }
        if !run.is_empty() {
            out.push(Chunk::pack(&run, b, self.lzf));
        }
        out
    }

    /// Replaces chunk `c` with `elems` packed again (none when empty). What is left under
    /// half a node joins a neighbour it fits beside, as Redis merges small quicklist nodes, so
    /// edits in the middle do not leave a trail of tiny chunks.
    fn repack(&mut self, mut c: usize, mut elems: Vec<Box<[u8]>>) {
        let old = self.chunks.remove(c).expect("a chunk of the list");
        self.count = self.count - old.count + elems.len();
        let size = |e: &[Box<[u8]>]| e.iter().map(|x| lp_entry_size(x)).sum::<usize>();
        let small = |b: usize, n: usize| b <= self.node_bytes / 2 && n <= self.node_count / 2;
        let fits =
            |b: usize, n: usize, ch: &Chunk| b + ch.lp_bytes <= self.node_bytes && n + ch.count <= self.node_count;
        let b = size(&elems);
        if !elems.is_empty() && small(b, elems.len()) {
            if c > 0 && fits(b, elems.len(), &self.chunks[c - 1]) {
                let mut before = self.chunks.remove(c - 1).expect("the chunk before").unpack();
                before.append(&mut elems);
                elems = before;
                c -= 1;
            } else if c < self.chunks.len() && fits(b, elems.len(), &self.chunks[c]) {
                elems.append(&mut self.chunks.remove(c).expect("the chunk after").unpack());
            }
        }
        for (k, ch) in self.chunks_of(elems).into_iter().enumerate() {
            self.chunks.insert(c + k, ch);
        }
    }

    /// The chunk holding middle position `j`, and `j`'s offset in it.
    fn find(&self, j: usize) -> (usize, usize) {
        if j < self.count / 2 {
            let mut at = 0;
            for (c, ch) in self.chunks.iter().enumerate() {
                if j < at + ch.count {
                    return (c, j - at);
                }
                at += ch.count;
            }
        } else {
            let mut end = self.count;
            for (c, ch) in self.chunks.iter().enumerate().rev() {
                if j >= end - ch.count {
                    return (c, j - (end - ch.count));
                }
                end -= ch.count;
            }
        }
        unreachable!("middle position {j} past {} elements", self.count)
    }
}

/// A list value.
#[derive(Debug, Clone, Default)]
pub struct List {
    /// The elements — or, in a quicklist, the plain head zone.
    items: VecDeque<Box<[u8]>>,
    /// Sum of `lp_entry_size` over the elements: what the listpack would weigh, less its
    /// header. Decides the `listpack` ↔ `quicklist` conversions as Redis does.
    lp_sum: usize,
    /// True once converted to what Redis calls a quicklist.
    quick: bool,
    /// A quicklist's packed middle and tail zone.
    mid: Option<Box<Middle>>,
}

impl PartialEq for List {
    fn eq(&self, other: &List) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

/// Which end of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Head,
    Tail,
}

/// Where a position is: the head zone (or the whole list), a chunk and offset, the tail zone.
enum Loc {
    Head(usize),
    Mid(usize, usize),
    Tail(usize),
}

/// The elements of a list in order, each chunk unpacked once.
pub struct Iter<'a> {
    l: &'a List,
    front: usize,
    back: usize,
    /// The chunk each end last unpacked.
    fcache: Option<Unpacked<'a>>,
    bcache: Option<Unpacked<'a>>,
    /// A forward pass through uncompressed chunks reads each element where it lies.
    fcur: Option<Cursor>,
}

/// Where a forward pass stands in an uncompressed chunk: the chunk, the middle position of the
/// entry at byte `at`, and the middle position past the chunk.
struct Cursor {
    idx: usize,
    pos: usize,
    end: usize,
    at: usize,
}

/// A chunk an iterator unpacked: its index, the middle position of its first element, and
/// its elements (each taken out once yielded; borrowed from an uncompressed chunk).
struct Unpacked<'a> {
    idx: usize,
    start: usize,
    elems: Vec<Cow<'a, [u8]>>,
}

impl<'a> Iter<'a> {
    /// The element at position `i`, walking forward. In a list whose chunks are stored as
    /// they are, it is read in place from where the pass stands (no chunk is unpacked).
    fn yield_front(&mut self, i: usize) -> Cow<'a, [u8]> {
        let l = self.l;
        let h = l.items.len();
        let m = match &l.mid {
            _ if i < h => return Cow::Borrowed(&l.items[i]),
            None => return Cow::Borrowed(&l.items[i]),
            Some(m) if m.lzf => return Iter::yield_at(l, i, &mut self.fcache),
            Some(m) => m,
        };
        let j = i - h;
        if j >= m.count {
            return Cow::Borrowed(&m.tail[j - m.count]);
        }
        if !self.fcur.as_ref().is_some_and(|c| j >= c.pos && j < c.end) {
            let (idx, off) = match self.fcur.as_ref() {
                Some(c) if j == c.end => (c.idx + 1, 0),
                _ => m.find(j),
            };
            let ch = &m.chunks[idx];
            let (from, at) = ch.seek(off);
            self.fcur = Some(Cursor { idx, pos: j - off + from, end: j - off + ch.count, at });
        }
        let c = self.fcur.as_mut().expect("just set");
        let raw: &'a [u8] = &m.chunks[c.idx].data;
        while c.pos < j {
            skip_entry(raw, &mut c.at);
            c.pos += 1;
        }
        c.pos += 1;
        read_entry(raw, &mut c.at)
    }

    /// The element at position `i`. Walking on from the cached chunk, the next one is found
    /// by index, so a whole pass costs one unpacking per chunk and no search.
    fn yield_at(l: &'a List, i: usize, cache: &mut Option<Unpacked<'a>>) -> Cow<'a, [u8]> {
        let h = l.items.len();
        let m = match &l.mid {
            _ if i < h => return Cow::Borrowed(&l.items[i]),
            None => return Cow::Borrowed(&l.items[i]),
            Some(m) => m,
        };
        let j = i - h;
        if j >= m.count {
            return Cow::Borrowed(&m.tail[j - m.count]);
        }
        if !cache.as_ref().is_some_and(|c| j >= c.start && j < c.start + c.elems.len()) {
            let (idx, start) = match cache.as_ref() {
                Some(c) if j == c.start + c.elems.len() => (c.idx + 1, j),
                Some(c) if j + 1 == c.start => (c.idx - 1, c.start - m.chunks[c.idx - 1].count),
                _ => {
                    let (idx, off) = m.find(j);
                    (idx, j - off)
                }
            };
            *cache = Some(Unpacked { idx, start, elems: m.chunks[idx].elems() });
        }
        let c = cache.as_mut().expect("just filled");
        std::mem::take(&mut c.elems[j - c.start])
    }
}

impl<'a> Iterator for Iter<'a> {
    type Item = Cow<'a, [u8]>;

    #[inline]
    fn next(&mut self) -> Option<Cow<'a, [u8]>> {
        if self.front >= self.back {
            return None;
        }
        let i = self.front;
        self.front += 1;
        // The whole list, or its head zone: one check for both.
        if let Some(e) = self.l.items.get(i) {
            return Some(Cow::Borrowed(e));
        }
        Some(self.yield_front(i))
    }

    /// Skips without unpacking what it skips (a big value's save resumes with `skip`).
    fn nth(&mut self, n: usize) -> Option<Cow<'a, [u8]>> {
        self.front = self.front.saturating_add(n).min(self.back);
        self.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.back - self.front;
        (n, Some(n))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.front >= self.back {
            return None;
        }
        self.back -= 1;
        let i = self.back;
        if let Some(e) = self.l.items.get(i) {
            return Some(Cow::Borrowed(e));
        }
        Some(Iter::yield_at(self.l, i, &mut self.bcache))
    }

    fn nth_back(&mut self, n: usize) -> Option<Self::Item> {
        self.back = self.back.saturating_sub(n).max(self.front);
        self.next_back()
    }
}

impl ExactSizeIterator for Iter<'_> {}

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
        if l.quick {
            l.start_compressing(fill);
        }
        l
    }

    /// A list kept as a quicklist whatever its size (loading an RDB list Redis keeps so: an
    /// old ziplist list, or a quicklist of several nodes).
    pub fn quicklist_of<I: IntoIterator<Item = Box<[u8]>>>(elements: I, fill: i64) -> List {
        let mut l = List { quick: true, ..List::default() };
        for e in elements {
            l.push(&e, End::Tail);
        }
        l.start_compressing(fill);
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

    /// The `list-compress-depth` this list compresses with (0: it does not).
    pub fn compress_depth(&self) -> usize {
        self.mid.as_ref().map_or(0, |m| m.depth)
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.items.len() + self.mid.as_ref().map_or(0, |m| m.count + m.tail.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The heap the list holds (`engine::footprint`): the list, its rings of element
    /// pointers, each plain element's bytes, and the chunks as stored (compressed).
    pub fn footprint(&self, samples: usize) -> usize {
        use super::footprint::{array, cls, Sampler};
        let mut each = Sampler::new(samples);
        let tail = self.mid.as_ref().map(|m| &m.tail);
        for e in self.items.iter().chain(tail.into_iter().flatten()) {
            if !each.wants() {
                break;
            }
            each.add(cls(e.len()));
        }
        let plain = self.items.len() + tail.map_or(0, |t| t.len());
        let mid = self.mid.as_ref().map_or(0, |m| {
            cls(std::mem::size_of::<Middle>())
                + array::<Chunk>(m.chunks.capacity())
                + m.chunks
                    .iter()
                    .map(|c| cls(c.data.len()) + if c.marks.is_empty() { 0 } else { cls(c.marks.len() * 4) })
                    .sum::<usize>()
                + array::<Box<[u8]>>(m.tail.capacity())
        });
        cls(std::mem::size_of::<List>()) + array::<Box<[u8]>>(self.items.capacity()) + each.total(plain) + mid
    }

    /// Redis's `listTypeTryConversionAppend`: called before adding `count` elements of
    /// `raw_bytes` bytes in total; a listpack that would outgrow the limit becomes a quicklist.
    /// (Redis adds the raw lengths, not the encoded ones, and so do we.)
    pub fn before_append(&mut self, fill: i64, raw_bytes: usize, count: usize) {
        if !self.quick && exceeds_limit(fill, LP_OVERHEAD + self.lp_sum + raw_bytes, self.len() + count) {
            self.quick = true;
            self.start_compressing(fill);
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
        if t < DEFAULT_PACKED_THRESHOLD && self.iter().any(|e| e.len() >= t) {
            return;
        }
        let (mut sz, mut cnt) = node_limits(fill);
        if shrinking {
            sz /= 2;
            cnt /= 2;
        }
        // A quicklist node never exceeds the limit, so one whose contents exceed it has more
        // than one node and cannot convert.
        let (bytes, len) = (LP_OVERHEAD + self.lp_sum, self.len());
        if bytes <= sz && len <= cnt && !exceeds_limit(fill, bytes, len) {
            self.quick = false;
            self.stop_compressing();
        }
    }

    /// Starts packing the middle, compressed as the configured `list-compress-depth` says.
    fn start_compressing(&mut self, fill: i64) {
        self.compress_with(fill, COMPRESS_DEPTH.load(std::sync::atomic::Ordering::Relaxed));
    }

    fn compress_with(&mut self, fill: i64, depth: usize) {
        if self.mid.is_some() {
            return;
        }
        let (sz, cnt) = node_limits(fill);
        let (node_bytes, node_count) = if sz != usize::MAX { (sz, usize::MAX) } else { (SIZE_SAFETY_LIMIT, cnt) };
        let zones = depth.saturating_add(1);
        // A compressed chunk is one node, as Redis compresses node by node. Uncompressed, a
        // chunk is half a node, so that a zone of one node has room to pack one chunk and
        // still take it back only after a quarter node's worth of pops (`rebalance`).
        let (chunk_bytes, chunk_count) =
            if depth > 0 { (node_bytes, node_count) } else { (node_bytes / 2, (node_count / 2).max(1)) };
        // Everything starts in the head zone; `rebalance` packs the excess.
        self.mid = Some(Box::new(Middle {
            depth,
            lzf: depth > 0,
            zone_bytes: node_bytes.saturating_mul(zones),
            zone_count: node_count.saturating_mul(zones),
            node_bytes: chunk_bytes,
            node_count: chunk_count,
            head_bytes: self.lp_sum,
            chunks: VecDeque::new(),
            count: 0,
            tail: VecDeque::new(),
            tail_bytes: 0,
        }));
        self.rebalance();
        // A list loaded whole (RDB, SORT STORE) held everything here until now.
        self.items.shrink_to_fit();
    }

    /// Stores every element plain again, in `items` (the list is back to one listpack).
    fn stop_compressing(&mut self) {
        let Some(m) = self.mid.take() else { return };
        for c in &m.chunks {
            self.items.extend(c.unpack());
        }
        self.items.extend(m.tail);
    }

    /// Restores the zones' bounds after a change at their edges: a zone past its limit packs
    /// its innermost node's worth into a chunk, and a zone takes the nearest chunk back when
    /// it fits (at once when the zone is empty). A zone never packs its last element.
    fn rebalance(&mut self) {
        let Some(m) = self.mid.as_deref_mut() else { return };
        let items = &mut self.items;
        // One node's worth from an end of a zone: (elements, their listpack bytes).
        let take = |m: &Middle, zone: &VecDeque<Box<[u8]>>, from_back: bool| -> (usize, usize) {
            let (mut k, mut b) = (0, 0);
            while k + 1 < zone.len() {
                let e = if from_back { &zone[zone.len() - 1 - k] } else { &zone[k] };
                let s = lp_entry_size(e);
                if k > 0 && (b + s > m.node_bytes || k + 1 > m.node_count) {
                    break;
                }
                b += s;
                k += 1;
            }
            (k, b)
        };
        while items.len() > 1 && m.over(m.head_bytes, items.len()) {
            let (k, b) = take(m, items, true);
            let run: Vec<Box<[u8]>> = items.drain(items.len() - k..).collect();
            m.head_bytes -= b;
            m.count += k;
            m.chunks.push_front(Chunk::pack(&run, b, m.lzf));
        }
        while m.tail.len() > 1 && m.over(m.tail_bytes, m.tail.len()) {
            let (k, b) = take(m, &m.tail, false);
            let run: Vec<Box<[u8]>> = m.tail.drain(..k).collect();
            m.tail_bytes -= b;
            m.count += k;
            m.chunks.push_back(Chunk::pack(&run, b, m.lzf));
        }
        // A chunk comes back when its zone is empty, or fits it with half a chunk to spare:
        // after packing, the zone is about half a chunk below that, so pushes and pops
        // going back and forth at an edge do not pack and unpack a chunk each time.
        let (slack_b, slack_n) = (m.node_bytes / 2, m.node_count / 2);
        while let Some(c) = m.chunks.front() {
            if !items.is_empty() && m.over(m.head_bytes + c.lp_bytes + slack_b, items.len() + c.count + slack_n) {
                break;
            }
            let c = m.chunks.pop_front().expect("a front chunk");
            m.count -= c.count;
            m.head_bytes += c.lp_bytes;
            items.extend(c.unpack());
        }
        while let Some(c) = m.chunks.back() {
            if !m.tail.is_empty() && m.over(m.tail_bytes + c.lp_bytes + slack_b, m.tail.len() + c.count + slack_n) {
                break;
            }
            let c = m.chunks.pop_back().expect("a back chunk");
            m.count -= c.count;
            m.tail_bytes += c.lp_bytes;
            for e in c.unpack().into_iter().rev() {
                m.tail.push_front(e);
            }
        }
    }

    #[inline]
    fn locate(&self, i: usize) -> Loc {
        let h = self.items.len();
        match &self.mid {
            _ if i < h => Loc::Head(i),
            None => Loc::Head(i),
            Some(m) if i - h < m.count => {
                let (c, off) = m.find(i - h);
                Loc::Mid(c, off)
            }
            Some(m) => Loc::Tail(i - h - m.count),
        }
    }

    /// The element at position `i` (< len).
    fn at(&self, i: usize) -> Cow<'_, [u8]> {
        match self.locate(i) {
            Loc::Head(i) => Cow::Borrowed(&self.items[i]),
            Loc::Tail(j) => Cow::Borrowed(&self.mid.as_ref().expect("a tail").tail[j]),
            Loc::Mid(c, off) => self.mid.as_ref().expect("a middle").chunks[c].one(off),
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
        for e in self.iter() {
            let s = lp_entry_size(&e);
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
        let s = lp_entry_size(v);
        self.lp_sum += s;
        match (self.mid.as_deref_mut(), end) {
            (None, End::Head) => self.items.push_front(v.into()),
            (None, End::Tail) => self.items.push_back(v.into()),
            (Some(m), End::Head) => {
                self.items.push_front(v.into());
                m.head_bytes += s;
                self.rebalance();
            }
            (Some(m), End::Tail) => {
                m.tail.push_back(v.into());
                m.tail_bytes += s;
                self.rebalance();
            }
        }
    }

    pub fn pop(&mut self, end: End) -> Option<Box<[u8]>> {
        let Some(m) = self.mid.as_deref_mut() else {
            let v = match end {
                End::Head => self.items.pop_front()?,
                End::Tail => self.items.pop_back()?,
            };
            self.lp_sum -= lp_entry_size(&v);
            return Some(v);
        };
        // The end zone is empty only when the middle is too (the list is all in the other
        // zone): the end element is that zone's. Which zone's byte count it leaves is all that
        // differs between the cases.
        let (v, zone) = match end {
            End::Head => match self.items.pop_front() {
                Some(v) => (v, &mut m.head_bytes),
                None => (m.tail.pop_front()?, &mut m.tail_bytes),
            },
            End::Tail => match m.tail.pop_back() {
                Some(v) => (v, &mut m.tail_bytes),
                None => (self.items.pop_back()?, &mut m.head_bytes),
            },
        };
        let size = lp_entry_size(&v);
        *zone -= size;
        self.lp_sum -= size;
        self.rebalance();
        Some(v)
    }

    /// Element at a Redis index (negative counts from the tail).
    pub fn get(&self, index: i64) -> Option<Cow<'_, [u8]>> {
        let i = self.resolve(index)?;
        Some(self.at(i))
    }

    /// A Redis index resolved to a position, if it is in range.
    fn resolve(&self, index: i64) -> Option<usize> {
        let len = self.len() as i64;
        let i = if index < 0 { len.checked_add(index)? } else { index };
        (0..len).contains(&i).then_some(i as usize)
    }

    /// Replaces the element at `index`; false if out of range.
    pub fn set(&mut self, index: i64, v: &[u8]) -> bool {
        let Some(i) = self.resolve(index) else { return false };
        let new = lp_entry_size(v);
        let loc = self.locate(i);
        let Some(m) = self.mid.as_deref_mut() else {
            self.lp_sum = self.lp_sum - lp_entry_size(&self.items[i]) + new;
            self.items[i] = v.into();
            return true;
        };
        let old = match loc {
            Loc::Head(i) => {
                let old = lp_entry_size(&std::mem::replace(&mut self.items[i], v.into()));
                m.head_bytes = m.head_bytes - old + new;
                old
            }
            Loc::Tail(j) => {
                let old = lp_entry_size(&std::mem::replace(&mut m.tail[j], v.into()));
                m.tail_bytes = m.tail_bytes - old + new;
                old
            }
            Loc::Mid(c, off) => {
                let mut elems = m.chunks[c].unpack();
                let old = lp_entry_size(&std::mem::replace(&mut elems[off], v.into()));
                m.repack(c, elems);
                old
            }
        };
        self.lp_sum = self.lp_sum - old + new;
        self.rebalance();
        true
    }

    /// Inserts `v` at position `pos` (0 ..= len).
    pub fn insert(&mut self, pos: usize, v: &[u8]) {
        let s = lp_entry_size(v);
        self.lp_sum += s;
        let h = self.items.len();
        let Some(m) = self.mid.as_deref_mut() else {
            self.items.insert(pos, v.into());
            return;
        };
        // At a zone's inner edge the element joins the zone; inside the middle, its chunk.
        if pos <= h {
            self.items.insert(pos, v.into());
            m.head_bytes += s;
        } else if pos >= h + m.count {
            m.tail.insert(pos - h - m.count, v.into());
            m.tail_bytes += s;
        } else {
            let (c, off) = m.find(pos - h);
            let mut elems = m.chunks[c].unpack();
            elems.insert(off, v.into());
            m.repack(c, elems);
        }
        self.rebalance();
    }

    pub fn iter(&self) -> Iter<'_> {
        Iter { l: self, front: 0, back: self.len(), fcache: None, bcache: None, fcur: None }
    }

    /// Position of the first element equal to `v`.
    pub fn position(&self, v: &[u8]) -> Option<usize> {
        self.iter().position(|e| *e == *v)
    }

    /// Redis's LRANGE index normalisation: the positions `start..=end` to return, or None
    /// for an empty range.
    pub fn range_bounds(&self, start: i64, end: i64) -> Option<(usize, usize)> {
        let len = self.len() as i64;
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
    pub fn range(&self, start: usize, end: usize) -> Iter<'_> {
        Iter { l: self, front: start, back: end + 1, fcache: None, bcache: None, fcur: None }
    }

    /// Removes up to `count` occurrences of `v` (count > 0 from the head, < 0 from the tail,
    /// 0 all of them); returns how many were removed.
    pub fn remove_matching(&mut self, v: &[u8], count: i64) -> usize {
        let mut left = if count == 0 { usize::MAX } else { count.unsigned_abs().min(usize::MAX as u64) as usize };
        let from_tail = count < 0;
        let entry = lp_entry_size(v);
        // Removes matches from one run of elements in the search's direction: found first
        // (the search stops at the limit), then a few removed one by one, many by one pass
        // that closes the gaps (a shift of the list per match made LREM 0 quadratic).
        let sweep = |run: &mut VecDeque<Box<[u8]>>, left: &mut usize| -> usize {
            let mut idx = Vec::new();
            if from_tail {
                for i in (0..run.len()).rev() {
                    if idx.len() == *left {
                        break;
                    }
                    if *run[i] == *v {
                        idx.push(i);
                    }
                }
                idx.reverse();
            } else {
                for (i, e) in run.iter().enumerate() {
                    if idx.len() == *left {
                        break;
                    }
                    if **e == *v {
                        idx.push(i);
                    }
                }
            }
            if idx.len() <= 8 {
                for &i in idx.iter().rev() {
                    run.remove(i);
                }
            } else {
                let (mut w, mut k) = (idx[0], 0);
                for r in idx[0]..run.len() {
                    if k < idx.len() && idx[k] == r {
                        k += 1;
                        continue;
                    }
                    run.swap(w, r);
                    w += 1;
                }
                run.truncate(w);
            }
            *left -= idx.len();
            idx.len()
        };
        let Some(m) = self.mid.as_deref_mut() else {
            let n = sweep(&mut self.items, &mut left);
            self.lp_sum -= entry * n;
            return n;
        };
        let mut removed = 0;
        // `v` as the chunks hold it, packed once for all of them.
        let mut want = Vec::with_capacity(v.len() + 10);
        put_entry(&mut want, v);
        let mut part = |which: u8, left: &mut usize| match which {
            0 => {
                let n = sweep(&mut self.items, left);
                m.head_bytes -= entry * n;
                removed += n;
            }
            2 => {
                let n = sweep(&mut m.tail, left);
                m.tail_bytes -= entry * n;
                removed += n;
            }
            _ => {
                // Repacking a chunk may leave none (or, in general, several) in its place:
                // walking forwards, the next one is after what replaced it.
                let mut next = if from_tail { m.chunks.len() } else { 0 };
                while *left > 0 {
                    let c = if from_tail {
                        let Some(c) = next.checked_sub(1) else { break };
                        c
                    } else if next < m.chunks.len() {
                        next
                    } else {
                        break;
                    };
                    // Only a chunk holding a match is unpacked.
                    if !m.chunks[c].contains_packed(&want) {
                        next = if from_tail { c } else { c + 1 };
                        continue;
                    }
                    let mut run: VecDeque<Box<[u8]>> = m.chunks[c].unpack().into();
                    let n = sweep(&mut run, left);
                    let before = m.chunks.len();
                    if n > 0 {
                        m.repack(c, run.into());
                        removed += n;
                    }
                    next = if from_tail { c } else { c + 1 + m.chunks.len() - before };
                }
            }
        };
        let order: [u8; 3] = if from_tail { [2, 1, 0] } else { [0, 1, 2] };
        for w in order {
            if left > 0 {
                part(w, &mut left);
            }
        }
        self.lp_sum -= entry * removed;
        if removed > 0 {
            self.rebalance();
        }
        removed
    }

    /// Keeps only positions `start..=end` (normalised by the caller); None empties the list.
    pub fn trim(&mut self, keep: Option<(usize, usize)>) -> usize {
        let before = self.len();
        match keep {
            None => {
                self.items.clear();
                self.lp_sum = 0;
                if let Some(m) = self.mid.as_deref_mut() {
                    m.chunks.clear();
                    m.tail.clear();
                    (m.count, m.head_bytes, m.tail_bytes) = (0, 0, 0);
                }
            }
            Some((start, end)) => {
                self.remove_end(before - 1 - end, End::Tail);
                self.remove_end(start, End::Head);
                self.rebalance();
            }
        }
        before - self.len()
    }

    /// Removes `n` elements from `end`: whole chunks without unpacking them.
    fn remove_end(&mut self, mut n: usize, end: End) {
        let Some(m) = self.mid.as_deref_mut() else {
            self.lp_sum -= cut(&mut self.items, &mut n, end == End::Head);
            return;
        };
        // The end's own zone, the chunks, then the other zone.
        let mut dropped = match end {
            End::Head => cut(&mut self.items, &mut n, true),
            End::Tail => cut(&mut m.tail, &mut n, false),
        };
        match end {
            End::Head => m.head_bytes -= dropped,
            End::Tail => m.tail_bytes -= dropped,
        }
        while n > 0 {
            let c = match end {
                End::Head => m.chunks.front(),
                End::Tail => m.chunks.back(),
            };
            let Some(c) = c else { break };
            if c.count <= n {
                n -= c.count;
                m.count -= c.count;
                dropped += c.lp_bytes;
                match end {
                    End::Head => m.chunks.pop_front(),
                    End::Tail => m.chunks.pop_back(),
                };
            } else {
                let idx = if end == End::Head { 0 } else { m.chunks.len() - 1 };
                let mut elems = m.chunks[idx].unpack();
                let gone: Vec<_> = if end == End::Head {
                    elems.drain(..n).collect()
                } else {
                    elems.drain(elems.len() - n..).collect()
                };
                dropped += gone.iter().map(|e| lp_entry_size(e)).sum::<usize>();
                m.repack(idx, elems);
                n = 0;
            }
        }
        let far = match end {
            End::Head => cut(&mut m.tail, &mut n, true),
            End::Tail => cut(&mut self.items, &mut n, false),
        };
        match end {
            End::Head => m.tail_bytes -= far,
            End::Tail => m.head_bytes -= far,
        }
        self.lp_sum -= dropped + far;
    }
}

/// Removes up to `n` elements from one end of `zone` (taking them off `n`): their listpack bytes.
fn cut(zone: &mut VecDeque<Box<[u8]>>, n: &mut usize, from_front: bool) -> usize {
    let k = (*n).min(zone.len());
    *n -= k;
    let size = |e: Box<[u8]>| lp_entry_size(&e);
    if from_front {
        zone.drain(..k).map(size).sum()
    } else {
        zone.drain(zone.len() - k..).map(size).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// Chunks packed on this thread (each test runs on a thread of its own).
        pub(super) static PACKS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// Pushes and pops going back and forth at the edge of a zone do not pack and unpack a
    /// chunk each time: before the zones had slack, a stack whose length moved by one there
    /// repacked a whole node per command.
    #[test]
    fn back_and_forth_at_a_zone_edge_packs_no_more_than_pushing_does() {
        for depth in [0usize, 1] {
            for (pop_first, end) in [(false, End::Tail), (true, End::Tail), (false, End::Head), (true, End::Head)] {
                let mut l = List { quick: true, ..List::default() };
                l.compress_with(-2, depth);
                PACKS.with(|p| p.set(0));
                for i in 0..6000u64 {
                    let e = (1_000_000 + i).to_string().into_bytes();
                    l.push(&e, end);
                    for _ in 0..20 {
                        if pop_first {
                            let got = l.pop(end).expect("an element");
                            l.push(&got, end);
                        } else {
                            l.push(b"1234567", end);
                            assert_eq!(l.pop(end).as_deref(), Some(&b"1234567"[..]));
                        }
                    }
                }
                let packs = PACKS.with(|p| p.get());
                // 6,000 elements of 5 listpack bytes are 30,000 bytes: under 20 chunks of
                // 4 KB (depth 0) or 8 KB (depth 1) as they are pushed.
                assert!(packs <= 20, "depth {depth}, pop first {pop_first}, {end:?}: {packs} chunks packed");
                assert_eq!(l.len(), 6000);
            }
        }
    }

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
        assert_eq!(l.get(-1).as_deref(), Some(&b"a"[..]));
        assert_eq!(l.get(-6), None);
        assert_eq!(l.remove_matching(b"a", -2), 2);
        assert_eq!(l.iter().collect::<Vec<_>>(), vec![&b"a"[..], b"b", b"c"]);
        let sum: usize = l.iter().map(|e| lp_entry_size(&e)).sum();
        assert_eq!(sum, l.lp_sum);
        assert_eq!(l.trim(Some((1, 1))), 2);
        assert_eq!(l.iter().collect::<Vec<_>>(), vec![&b"b"[..]]);
        assert_eq!(l.lp_sum, lp_entry_size(b"b"));
    }

    /// The list's bookkeeping against what it holds: the zones' and chunks' byte counts add
    /// up, each zone within its bound, no chunk over a node.
    fn check(l: &List, model: &VecDeque<Vec<u8>>) {
        assert_eq!(l.len(), model.len());
        assert!(l.iter().eq(model.iter().map(|e| Cow::Borrowed(&e[..]))), "contents");
        assert!(l.iter().rev().eq(model.iter().rev().map(|e| Cow::Borrowed(&e[..]))), "contents backwards");
        let sum: usize = model.iter().map(|e| lp_entry_size(e)).sum();
        assert_eq!(l.lp_sum, sum);
        if let Some(m) = &l.mid {
            let hb: usize = l.items.iter().map(|e| lp_entry_size(e)).sum();
            let tb: usize = m.tail.iter().map(|e| lp_entry_size(e)).sum();
            assert_eq!((m.head_bytes, m.tail_bytes), (hb, tb));
            assert_eq!(m.count, m.chunks.iter().map(|c| c.count).sum::<usize>());
            assert_eq!(hb + tb + m.chunks.iter().map(|c| c.lp_bytes).sum::<usize>(), sum);
            assert!(l.items.len() <= 1 || !m.over(hb, l.items.len()), "head zone over its bound");
            assert!(m.tail.len() <= 1 || !m.over(tb, m.tail.len()), "tail zone over its bound");
            for c in &m.chunks {
                assert!(c.count == 1 || (c.lp_bytes <= m.node_bytes && c.count <= m.node_count));
                let all = c.unpack();
                assert_eq!(all.len(), c.count);
                for off in (0..c.count).step_by(13) {
                    assert_eq!(c.one(off), &all[off][..], "element {off} of a chunk of {}", c.count);
                }
            }
            if !m.chunks.is_empty() {
                assert!(!l.items.is_empty() && !m.tail.is_empty(), "a zone empty beside chunks");
            }
        }
        // Forward passes that start anywhere (the middle read in place from there).
        for s in (0..model.len()).step_by(model.len() / 5 + 1) {
            let e = (s + 150).min(model.len() - 1);
            assert!(l.range(s, e).eq(model.range(s..=e).map(|x| Cow::Borrowed(&x[..]))), "range {s}..={e}");
        }
        for (i, e) in model.iter().enumerate() {
            if i % 7 == 0 {
                assert_eq!(l.get(i as i64).as_deref(), Some(&e[..]), "element {i}");
            }
        }
    }

    #[test]
    fn a_compressed_middle_holds_what_was_put_in() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        // Depth 0: the middle packed as it is.
        for (fill, depth) in [(-2i64, 1usize), (-1, 2), (4, 1), (16, 3), (-2, 0), (8, 0)] {
            let mut l = List { quick: true, ..List::default() };
            l.compress_with(fill, depth);
            let mut model: VecDeque<Vec<u8>> = VecDeque::new();
            let mut packed_seen = false;
            for step in 0..4000 {
                // JSON, integers (packed as integers), and text an integer packing must not touch.
                let e = match rnd(6) {
                    0 => rnd(1 << 40).to_string().into_bytes(),
                    1 => {
                        let odd = [
                            "0".to_string(),
                            "-1".to_string(),
                            "007".to_string(),
                            "-0".to_string(),
                            "+5".to_string(),
                            i64::MIN.to_string(),
                            i64::MAX.to_string(),
                            (1i64 << 61).to_string(),
                            ((1i64 << 61) - 1).to_string(),
                            (-(1i64 << 61)).to_string(),
                            (-(1i64 << 61) - 1).to_string(),
                            "".to_string(),
                        ];
                        odd[rnd(odd.len() as u64) as usize].clone().into_bytes()
                    }
                    _ => format!("{{\"n\":{},\"pad\":\"{}\"}}", rnd(300), "z".repeat(rnd(90) as usize)).into_bytes(),
                };
                match rnd(12) {
                    0..=2 => {
                        l.push(&e, End::Tail);
                        model.push_back(e);
                    }
                    3..=4 => {
                        l.push(&e, End::Head);
                        model.push_front(e);
                    }
                    5 => assert_eq!(l.pop(End::Head).map(|b| b.into_vec()), model.pop_front()),
                    6 => assert_eq!(l.pop(End::Tail).map(|b| b.into_vec()), model.pop_back()),
                    7 if !model.is_empty() => {
                        let i = rnd(model.len() as u64) as usize;
                        assert!(l.set(i as i64, &e));
                        model[i] = e;
                    }
                    8 => {
                        let i = rnd(model.len() as u64 + 1) as usize;
                        l.insert(i, &e);
                        model.insert(i, e);
                    }
                    9 if !model.is_empty() => {
                        let probe = model[rnd(model.len() as u64) as usize].clone();
                        let count = rnd(5) as i64 - 2;
                        let want = model.iter().filter(|x| **x == probe).count();
                        let limit = if count == 0 { want } else { want.min(count.unsigned_abs() as usize) };
                        let mut left = limit;
                        if count < 0 {
                            let mut i = model.len();
                            while i > 0 && left > 0 {
                                i -= 1;
                                if model[i] == probe {
                                    model.remove(i);
                                    left -= 1;
                                }
                            }
                        } else {
                            model.retain(|x| {
                                if left > 0 && *x == probe {
                                    left -= 1;
                                    false
                                } else {
                                    true
                                }
                            });
                        }
                        assert_eq!(l.remove_matching(&probe, count), limit);
                    }
                    10 if step % 50 == 0 && model.len() > 20 => {
                        let (s, e) = (rnd(10) as usize, model.len() - 1 - rnd(10) as usize);
                        l.trim(Some((s, e)));
                        model = model.range(s..=e).cloned().collect();
                    }
                    _ => {}
                }
                packed_seen |= l.mid.as_ref().is_some_and(|m| m.chunks.iter().any(|c| c.lzf == (depth > 0)));
                if step % 97 == 0 {
                    check(&l, &model);
                }
            }
            check(&l, &model);
            assert!(packed_seen, "fill {fill} depth {depth}: nothing was ever packed");
            let mut back = l.clone();
            back.stop_compressing();
            check(&back, &model);
        }
    }

    #[test]
    fn edits_in_the_middle_leave_no_trail_of_small_chunks() {
        let mut l = List { quick: true, ..List::default() };
        l.compress_with(-2, 1);
        for i in 0..4000 {
            l.push(format!("element number {i:06} of a long list").as_bytes(), End::Tail);
        }
        let chunks = |l: &List| l.mid.as_ref().map_or(0, |m| m.chunks.len());
        let before = chunks(&l);
        assert!(before > 10, "{before} chunks");
        let mut model: Vec<Vec<u8>> = l.iter().map(|e| e.to_vec()).collect();
        for i in 0..600usize {
            let pos = 1000 + (i * 7919) % 2000;
            l.insert(pos, b"x");
            model.insert(pos, b"x".to_vec());
            if i % 3 == 0 {
                assert!(l.set(pos as i64 + 1, b"y"));
                model[pos + 1] = b"y".to_vec();
            }
        }
        let ys = model.iter().filter(|e| *e == b"y").count();
        assert_eq!(l.remove_matching(b"y", 0), ys);
        model.retain(|e| e != b"y");
        assert_eq!(l.remove_matching(b"x", -250), 250);
        let mut left = 250;
        for i in (0..model.len()).rev() {
            if left > 0 && model[i] == b"x" {
                model.remove(i);
                left -= 1;
            }
        }
        assert!(l.iter().eq(model.iter().map(|e| Cow::Borrowed(&e[..]))));
        let after = chunks(&l);
        assert!(after <= before + before / 2, "{before} chunks became {after}");
        // A big LREM on a plain list is one pass.
        let mut p = List::new();
        for i in 0..200_000 {
            p.push(if i % 2 == 0 { b"a" } else { b"b" }, End::Tail);
        }
        assert_eq!(p.remove_matching(b"a", 0), 100_000);
        assert_eq!(p.remove_matching(b"b", -3), 3);
        assert!(p.iter().all(|e| *e == b"b"[..]) && p.len() == 99_997);
    }
}
