//! Sorted sets (Redis's `t_zset.c`): the sorted-set type API; the commands are in
//! `types::zset`, the order-statistic structure in [`super::skiplist`].
//!
//! Two encodings, as OBJECT ENCODING reports them:
//! * `listpack`: (score, member) entries packed in order into one byte buffer ([`Sorted`])
//!   while there are at most `zset-max-listpack-entries` members of at most
//!   `zset-max-listpack-value` bytes; ranks and ranges walk it, as Redis walks its listpack;
//! * `skiplist`: the [`SkipList`] (rank and ranges in O(log n)) plus a member → score [`Dict`]
//!   (ZSCORE, membership in O(1)), like Redis's `zset` struct.
//!
//! Every range query is answered the same way: find the ranks where the range starts and ends
//! (one O(log n) descent each, [`ZSet::count_while`]), then walk the ranks in between.

use super::packed::{get_len, get_str, push_str, put_len, str_size, Packed, Slot, Walk, LEN_MAX};
use super::skiplist::SkipList;
use crate::engine::dict::Dict;

/// The encoding thresholds, read once per command from the hot config.
#[derive(Clone, Copy, Debug)]
pub struct ZLimits {
    pub entries: usize,
    pub value: usize,
}

/// The `skiplist` encoding: ordered structure plus member → score index.
struct Big {
    list: SkipList,
    scores: Dict<f64>,
}

/// The entries of a `listpack`-encoded sorted set, sorted by (score, member), in one
/// allocation like Redis's listpack: each entry is the score ([`put_score`]) then the member
/// with its length prefix. Five 9-byte members with scores 1 to 5 take 55 bytes, where a
/// vector of pairs took a 120-byte array plus five small allocations.
#[derive(Clone, Default)]
struct Sorted(Packed);

/// Integral scores up to this magnitude are stored as integers (every one is an exact f64).
const INT_SCORE_MAX: f64 = (1u64 << 53) as f64;

/// The marker of a score stored as its 8 raw bytes: the one-byte varint 1 (integers are
/// stored as even numbers).
const RAW_SCORE: u8 = 1;

/// Encodes a score: an integral score (ranks, counters, timestamps — the usual case) as the
/// length-prefix varint of twice its zigzag form (1 byte from -32 to 31, 7 for a millisecond
/// timestamp); anything else as [`RAW_SCORE`] then the f64's bits, little endian. Both are
/// exact: the integer form is only used when converting back gives the same bits, so -0
/// keeps its sign.
fn put_score(s: f64, out: &mut [u8; LEN_MAX]) -> &[u8] {
    let i = s as i64;
    if usize::BITS >= 64 && s.abs() <= INT_SCORE_MAX && (i as f64).to_bits() == s.to_bits() {
        let zigzag = ((i << 1) ^ (i >> 63)) as u64;
        put_len((zigzag << 1) as usize, out)
    } else {
        out[0] = RAW_SCORE;
        out[1..9].copy_from_slice(&s.to_le_bytes());
        &out[..9]
    }
}

/// Reads a score written by [`put_score`]; returns it and the offset after it.
fn get_score(buf: &[u8], pos: usize) -> Option<(f64, usize)> {
    let (v, p) = get_len(buf, pos)?;
    if v == usize::from(RAW_SCORE) {
        let end = p.checked_add(8)?;
        let bits: [u8; 8] = buf.get(p..end)?.try_into().ok()?;
        return Some((f64::from_le_bytes(bits), end));
    }
    if v & 1 != 0 {
        return None;
    }
    let zigzag = (v >> 1) as u64;
    let i = (zigzag >> 1) as i64 ^ -((zigzag & 1) as i64);
    Some((i as f64, p))
}

/// Bytes an entry takes.
fn entry_size(s: f64, m: &[u8]) -> usize {
    let mut b = [0u8; LEN_MAX];
    put_score(s, &mut b).len() + str_size(m)
}

fn entry(buf: &[u8], pos: usize) -> Option<((f64, &[u8]), usize)> {
    let (score, at) = get_score(buf, pos)?;
    let (m, end) = get_str(buf, at)?;
    Some(((score, m), end))
}

impl Sorted {
    /// Entries in ascending order, as (score, member).
    fn iter(&self) -> Walk<'_, (f64, &[u8])> {
        self.0.walk(entry)
    }

    fn find(&self, m: &[u8]) -> Option<Slot<(f64, &[u8])>> {
        self.iter().find(|e| e.item.1 == m)
    }

    /// Entries sorted by (score, member), distinct members, encoded in one pass.
    fn build(items: &[(f64, Box<[u8]>)]) -> Sorted {
        let mut bytes = Vec::with_capacity(items.iter().map(|(s, m)| entry_size(*s, m)).sum());
        let mut b = [0u8; LEN_MAX];
        for (s, m) in items {
            bytes.extend_from_slice(put_score(*s, &mut b));
            push_str(&mut bytes, m);
        }
        Sorted(Packed::from_vec(bytes, items.len()))
    }

    /// Inserts a member known to be absent at its place in the order.
    fn insert(&mut self, score: f64, m: &[u8]) {
        let at = match self.iter().find(|e| !before(e.item.0, e.item.1, score, m)) {
            Some(e) => e.start,
            None => self.0.bytes().len(),
        };
        let (mut b, mut l) = ([0u8; LEN_MAX], [0u8; LEN_MAX]);
        self.0.insert(at, &[put_score(score, &mut b), put_len(m.len(), &mut l), m]);
    }

    fn remove(&mut self, m: &[u8]) -> bool {
        let span = self.find(m).map(|e| (e.start, e.end));
        self.0.delete_found(span)
    }
}

enum Repr {
    Pack(Sorted),
    Skip(Box<Big>),
}

/// A sorted-set value.
pub struct ZSet {
    repr: Repr,
}

impl Clone for ZSet {
    fn clone(&self) -> Self {
        match &self.repr {
            Repr::Pack(p) => ZSet { repr: Repr::Pack(p.clone()) },
            Repr::Skip(_) => {
                let mut z = ZSet::new_skip();
                self.for_each(|m, s| z.insert_absent(s, m));
                z
            }
        }
    }
}

impl ZSet {
    /// The heap the sorted set holds (`engine::footprint`): a listpack's buffer; or the
    /// skip list's node array and spilled levels, and the member → score table.
    pub fn footprint(&self, samples: usize) -> usize {
        use super::footprint::cls;
        match &self.repr {
            Repr::Pack(p) => p.0.footprint(),
            Repr::Skip(b) => {
                cls(std::mem::size_of::<Big>()) + b.list.footprint(samples) + b.scores.footprint(samples, |_| 0)
            }
        }
    }
}

impl PartialEq for ZSet {
    fn eq(&self, other: &Self) -> bool {
        if self.len() != other.len() || self.encoding() != other.encoding() {
            return false;
        }
        let mut a = Vec::with_capacity(self.len());
        self.for_each(|m, s| a.push((s, m.to_vec())));
        let mut i = 0;
        let mut same = true;
        other.for_each(|m, s| {
            same = same && a[i].0 == s && a[i].1 == m;
            i += 1;
        });
        same
    }
}

impl std::fmt::Debug for ZSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ZSet({}, {} members)", self.encoding(), self.len())
    }
}

impl Default for ZSet {
    fn default() -> Self {
        ZSet::new_pack()
    }
}

#[inline]
fn before(s1: f64, e1: &[u8], s2: f64, e2: &[u8]) -> bool {
    s1 < s2 || (s1 == s2 && e1 < e2)
}

/// What [`ZSet::add`] did (Redis's `ZADD_OUT_*`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AddOutcome {
    Added(f64),
    Updated(f64),
    /// The score stayed as it was (same score, or INCR by 0): counted as processed.
    Unchanged(f64),
    /// Not done because of NX/XX/GT/LT.
    Nop,
}

/// ZADD's input flags.
#[derive(Clone, Copy, Debug, Default)]
pub struct AddFlags {
    pub nx: bool,
    pub xx: bool,
    pub gt: bool,
    pub lt: bool,
    pub incr: bool,
}

/// The score became NaN (INCR of inf by -inf).
#[derive(Debug, PartialEq)]
pub struct NanScore;

impl ZSet {
    pub fn new_pack() -> ZSet {
        ZSet { repr: Repr::Pack(Sorted::default()) }
    }

    pub fn new_skip() -> ZSet {
        ZSet { repr: Repr::Skip(Box::new(Big { list: SkipList::new(), scores: Dict::new() })) }
    }

    /// Redis's `zsetTypeCreate`: the encoding for `size_hint` members of at most `max_len`
    /// bytes.
    pub fn create(size_hint: usize, max_len: usize, lim: &ZLimits) -> ZSet {
        if size_hint <= lim.entries && max_len <= lim.value {
            ZSet::new_pack()
        } else {
            ZSet::new_skip()
        }
    }

    /// Builds a zset from distinct members the way the STORE commands do: `listpack` when
    /// it fits the thresholds, else `skiplist` (Redis's `zsetConvertToListpackIfNeeded`).
    pub fn build(mut items: Vec<(f64, Box<[u8]>)>, lim: &ZLimits) -> ZSet {
        let max_len = items.iter().map(|(_, m)| m.len()).max().unwrap_or(0);
        if items.len() <= lim.entries && max_len <= lim.value {
            // partial_cmp, not total_cmp: -0 and 0 are the same score, ordered by member.
            items.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap().then_with(|| a.1.cmp(&b.1)));
            ZSet { repr: Repr::Pack(Sorted::build(&items)) }
        } else {
            let mut z = ZSet::new_skip();
            for (s, m) in items {
                z.insert_absent(s, &m);
            }
            z
        }
    }

    /// The name OBJECT ENCODING reports.
    /// The member → score table's statistics when `skiplist`-encoded (DEBUG HTSTATS-KEY).
    pub fn dict_stats(&self) -> Option<Vec<(usize, usize, Vec<usize>)>> {
        match &self.repr {
            Repr::Skip(b) => Some(b.scores.stats()),
            _ => None,
        }
    }

    pub fn encoding(&self) -> &'static str {
        match self.repr {
            Repr::Pack(_) => "listpack",
            Repr::Skip(_) => "skiplist",
        }
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Pack(p) => p.0.len(),
            Repr::Skip(b) => b.list.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn score(&self, m: &[u8]) -> Option<f64> {
        match &self.repr {
            Repr::Pack(p) => p.find(m).map(|e| e.item.0),
            Repr::Skip(b) => b.scores.get(m).copied(),
        }
    }

    fn convert_to_skip(&mut self) {
        if let Repr::Pack(p) = &self.repr {
            let mut z = ZSet::new_skip();
            for e in p.iter() {
                z.insert_absent(e.item.0, e.item.1);
            }
            *self = z;
        }
    }

    /// Inserts a member known to be absent, keeping the current encoding.
    pub fn insert_absent(&mut self, score: f64, m: &[u8]) {
        match &mut self.repr {
            Repr::Pack(p) => p.insert(score, m),
            Repr::Skip(b) => {
                b.list.insert(score, m);
                b.scores.insert_new_slice(m, score);
            }
        }
    }

    /// Moves an existing member to a new score.
    fn rescore(&mut self, m: &[u8], old: f64, new: f64) {
        match &mut self.repr {
            Repr::Pack(p) => {
                p.remove(m);
                p.insert(new, m);
            }
            Repr::Skip(b) => {
                b.list.update_score(old, m, new);
                if let Some(s) = b.scores.get_mut(m) {
                    *s = new;
                }
            }
        }
    }

    /// Redis's `zsetAdd`: adds or updates `m` under ZADD's flags, converting to `skiplist`
    /// when a new member would cross a threshold.
    pub fn add(&mut self, score: f64, m: &[u8], f: AddFlags, lim: &ZLimits) -> Result<AddOutcome, NanScore> {
        if score.is_nan() {
            return Err(NanScore);
        }
        match self.score(m) {
            Some(cur) => {
                if f.nx {
                    return Ok(AddOutcome::Nop);
                }
                let mut score = score;
                if f.incr {
                    score += cur;
                    if score.is_nan() {
                        return Err(NanScore);
                    }
                }
                if (f.lt && score >= cur) || (f.gt && score <= cur) {
                    return Ok(AddOutcome::Nop);
                }
                if score != cur {
                    self.rescore(m, cur, score);
                    Ok(AddOutcome::Updated(score))
                } else {
                    Ok(AddOutcome::Unchanged(score))
                }
            }
            None if f.xx => Ok(AddOutcome::Nop),
            None => {
                if let Repr::Pack(p) = &self.repr {
                    if p.0.len() + 1 > lim.entries || m.len() > lim.value {
                        self.convert_to_skip();
                    }
                }
                self.insert_absent(score, m);
                Ok(AddOutcome::Added(score))
            }
        }
    }

    /// Removes `m`; returns true if it was there.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Pack(p) => p.remove(m),
            Repr::Skip(b) => match b.scores.remove(m) {
                Some((_, s)) => {
                    b.list.delete(s, m);
                    true
                }
                None => false,
            },
        }
    }

    /// Number of leading elements (in ascending order) for which `pred` holds; `pred` must
    /// hold for a prefix of the order. O(log n) in a skiplist, a walk in a listpack.
    pub fn count_while(&self, pred: impl Fn(f64, &[u8]) -> bool) -> usize {
        match &self.repr {
            Repr::Pack(p) => p.iter().take_while(|e| pred(e.item.0, e.item.1)).count(),
            Repr::Skip(b) => b.list.count_while(pred),
        }
    }

    /// 0-based ascending rank and score of `m`.
    pub fn rank(&self, m: &[u8]) -> Option<(usize, f64)> {
        let s = self.score(m)?;
        Some((self.count_while(|s2, e2| before(s2, e2, s, m)), s))
    }

    /// Element at 0-based ascending `rank`.
    pub fn get(&self, rank: usize) -> Option<(&[u8], f64)> {
        match &self.repr {
            Repr::Pack(p) => p.iter().nth(rank).map(|e| (e.item.1, e.item.0)),
            Repr::Skip(b) => b.list.get(rank),
        }
    }

    /// Visits ascending ranks `start..=end` (in range), or from `end` down to `start` if `rev`.
    pub fn for_range(&self, start: usize, end: usize, rev: bool, mut f: impl FnMut(&[u8], f64)) {
        if start > end || end >= self.len() {
            return;
        }
        match &self.repr {
            Repr::Pack(p) => {
                let range = p.iter().skip(start).take(end - start + 1);
                if rev {
                    // Entries can only be walked forwards: list the range, then go back.
                    let items: Vec<(f64, &[u8])> = range.map(|e| e.item).collect();
                    items.iter().rev().for_each(|&(s, m)| f(m, s));
                } else {
                    range.for_each(|e| f(e.item.1, e.item.0));
                }
            }
            Repr::Skip(b) => b.list.for_range(start, end, rev, f),
        }
    }

    /// Visits every element in ascending order.
    pub fn for_each(&self, f: impl FnMut(&[u8], f64)) {
        if !self.is_empty() {
            self.for_range(0, self.len() - 1, false, f);
        }
    }

    /// Removes ascending ranks `start..=end`, handing each removed element to `f` in order.
    pub fn remove_range(&mut self, start: usize, end: usize, mut f: impl FnMut(Box<[u8]>, f64)) {
        if start > end || end >= self.len() {
            return;
        }
        match &mut self.repr {
            Repr::Pack(p) => {
                let (mut from, mut to) = (0, 0);
                let mut out = Vec::with_capacity(end - start + 1);
                for e in p.iter().skip(start).take(end - start + 1) {
                    if out.is_empty() {
                        from = e.start;
                    }
                    to = e.end;
                    out.push((Box::<[u8]>::from(e.item.1), e.item.0));
                }
                p.0.delete(from, to, out.len());
                out.into_iter().for_each(|(m, s)| f(m, s));
            }
            Repr::Skip(b) => {
                let Big { list, scores } = &mut **b;
                list.remove_range(start, end, |e, s| {
                    scores.remove(&e);
                    f(e, s)
                })
            }
        }
    }

    /// One ZSCAN step: a listpack is returned whole (cursor 0); a skiplist scans its index.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8], f64)) -> u64 {
        match &self.repr {
            Repr::Pack(_) => {
                self.for_each(f);
                0
            }
            Repr::Skip(b) => {
                let mut cursor = cursor;
                let mut seen = 0usize;
                let mut maxiter = count * 10;
                loop {
                    cursor = b.scores.scan(cursor, |k, s| {
                        seen += 1;
                        f(k, *s)
                    });
                    maxiter -= 1;
                    if cursor == 0 || seen >= count || maxiter == 0 {
                        return cursor;
                    }
                }
            }
        }
    }

    /// Visits `n` uniformly random elements, repeats allowed, until `f` says stop (false). A
    /// listpack's entries are listed once (it has no index to jump into) rather than walked
    /// for every pick.
    pub fn sample<R: rand::Rng>(&self, n: u64, rng: &mut R, mut f: impl FnMut(&[u8], f64) -> bool) {
        use rand::seq::SliceRandom;
        if let Repr::Pack(p) = &self.repr {
            let all: Vec<(f64, &[u8])> = p.iter().map(|e| e.item).collect();
            for _ in 0..n {
                match all.choose(rng) {
                    Some(&(s, m)) if f(m, s) => {}
                    _ => return,
                }
            }
            return;
        }
        for _ in 0..n {
            match self.random(rng) {
                Some((m, s)) if f(&m, s) => {}
                _ => return,
            }
        }
    }

    /// A random element (uniform).
    pub fn random<R: rand::Rng>(&self, rng: &mut R) -> Option<(Vec<u8>, f64)> {
        match &self.repr {
            Repr::Pack(p) if p.0.len() > 0 => {
                let e = p.iter().nth(rng.gen_range(0..p.0.len()))?;
                Some((e.item.1.to_vec(), e.item.0))
            }
            Repr::Skip(b) => b.scores.random(rng).map(|(k, s)| (k.to_vec(), *s)),
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Score and range parsing
// ---------------------------------------------------------------------------------------------

/// C's `strtod` on a prefix of `b`: (value, bytes consumed, out of range). Leading whitespace
/// is skipped; accepts `inf`/`infinity`/`nan`, decimal and hexadecimal (`0x1p3`) forms.
/// Nothing parsed → (0, 0, false), as strtod.
pub fn strtod(b: &[u8]) -> (f64, usize, bool) {
    let mut i = 0;
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let neg = i < b.len() && b[i] == b'-';
    if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
        i += 1;
    }
    let sign = if neg { -1.0 } else { 1.0 };
    let rest = &b[i..];
    let starts = |kw: &[u8]| rest.len() >= kw.len() && rest[..kw.len()].eq_ignore_ascii_case(kw);
    if starts(b"infinity") {
        return (sign * f64::INFINITY, i + 8, false);
    }
    if starts(b"inf") {
        return (sign * f64::INFINITY, i + 3, false);
    }
    if starts(b"nan") {
        let mut j = i + 3;
        // nan(chars)
        if j < b.len() && b[j] == b'(' {
            let mut k = j + 1;
            while k < b.len() && (b[k].is_ascii_alphanumeric() || b[k] == b'_') {
                k += 1;
            }
            if k < b.len() && b[k] == b')' {
                j = k + 1;
            }
        }
        return (f64::NAN, j, false);
    }
    if rest.len() >= 2 && rest[0] == b'0' && (rest[1] | 0x20) == b'x' {
        if let Some((v, n)) = parse_hex(&rest[2..]) {
            let v = sign * v;
            return (v, i + 2 + n, v.is_infinite());
        }
        // "0x" with no hex digits: strtod parses the "0".
        return (0.0, i + 1, false);
    }
    let mut j = i;
    let mut digits = 0;
    let mut nonzero = false;
    while j < b.len() && b[j].is_ascii_digit() {
        nonzero |= b[j] != b'0';
        j += 1;
        digits += 1;
    }
    if j < b.len() && b[j] == b'.' {
        j += 1;
        while j < b.len() && b[j].is_ascii_digit() {
            nonzero |= b[j] != b'0';
            j += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return (0.0, 0, false);
    }
    if j < b.len() && (b[j] | 0x20) == b'e' {
        let mut k = j + 1;
        if k < b.len() && (b[k] == b'+' || b[k] == b'-') {
            k += 1;
        }
        let d0 = k;
        while k < b.len() && b[k].is_ascii_digit() {
            k += 1;
        }
        if k > d0 {
            j = k;
        }
    }
    let text = std::str::from_utf8(&b[i..j]).unwrap_or("0");
    let v: f64 = text.parse().unwrap_or(0.0);
    let erange = v.is_infinite() || (v == 0.0 && nonzero);
    (sign * v, j, erange)
}

/// Hexadecimal mantissa `h[.h]` and optional binary exponent `p[+-]d`: (value, consumed).
fn parse_hex(b: &[u8]) -> Option<(f64, usize)> {
    let mut j = 0;
    let mut mant = 0f64;
    let mut exp = 0i32;
    let mut any = false;
    while j < b.len() && b[j].is_ascii_hexdigit() {
        mant = mant * 16.0 + (b[j] as char).to_digit(16).unwrap() as f64;
        j += 1;
        any = true;
    }
    if j < b.len() && b[j] == b'.' {
        let mut k = j + 1;
        while k < b.len() && b[k].is_ascii_hexdigit() {
            mant = mant * 16.0 + (b[k] as char).to_digit(16).unwrap() as f64;
            exp -= 4;
            k += 1;
            any = true;
        }
        if any {
            j = k;
        }
    }
    if !any {
        return None;
    }
    if j < b.len() && (b[j] | 0x20) == b'p' {
        let mut k = j + 1;
        let neg = k < b.len() && b[k] == b'-';
        if k < b.len() && (b[k] == b'+' || b[k] == b'-') {
            k += 1;
        }
        let d0 = k;
        let mut e = 0i32;
        while k < b.len() && b[k].is_ascii_digit() {
            e = e.saturating_mul(10).saturating_add((b[k] - b'0') as i32);
            k += 1;
        }
        if k > d0 {
            exp = exp.saturating_add(if neg { -e } else { e });
            j = k;
        }
    }
    Some((mant * 2f64.powi(exp), j))
}

/// Redis's `getDoubleFromObject`: the whole argument must be a float, no leading space,
/// no overflow/underflow to zero, not NaN.
pub fn parse_score(b: &[u8]) -> Option<f64> {
    if b.is_empty() || b[0].is_ascii_whitespace() {
        return None;
    }
    let (v, n, erange) = strtod(b);
    if n != b.len() || v.is_nan() || (erange && (v.is_infinite() || v == 0.0)) {
        return None;
    }
    Some(v)
}

/// A score interval (Redis's `zrangespec`).
#[derive(Clone, Copy, Debug)]
pub struct ScoreRange {
    pub min: f64,
    pub max: f64,
    pub minex: bool,
    pub maxex: bool,
}

impl ScoreRange {
    /// Redis's `zslParseRange`: `(` makes a bound exclusive; the rest goes through strtod
    /// whole (an empty bound is 0).
    pub fn parse(min: &[u8], max: &[u8]) -> Option<ScoreRange> {
        let bound = |b: &[u8]| -> Option<(f64, bool)> {
            let (ex, t) = if b.first() == Some(&b'(') { (true, &b[1..]) } else { (false, b) };
            let (v, n, _) = strtod(t);
            if n != t.len() || v.is_nan() {
                return None;
            }
            Some((v, ex))
        };
        let (min, minex) = bound(min)?;
        let (max, maxex) = bound(max)?;
        Some(ScoreRange { min, max, minex, maxex })
    }

    pub fn gte_min(&self, v: f64) -> bool {
        if self.minex {
            v > self.min
        } else {
            v >= self.min
        }
    }

    pub fn lte_max(&self, v: f64) -> bool {
        if self.maxex {
            v < self.max
        } else {
            v <= self.max
        }
    }
}

/// One end of a lex range.
#[derive(Clone, Debug)]
pub enum LexBound {
    NegInf,
    PosInf,
    Incl(Vec<u8>),
    Excl(Vec<u8>),
}

/// A member interval (Redis's `zlexrangespec`).
#[derive(Clone, Debug)]
pub struct LexRange {
    pub min: LexBound,
    pub max: LexBound,
}

impl LexBound {
    fn parse(b: &[u8]) -> Option<LexBound> {
        match b.first() {
            Some(b'+') if b.len() == 1 => Some(LexBound::PosInf),
            Some(b'-') if b.len() == 1 => Some(LexBound::NegInf),
            Some(b'(') => Some(LexBound::Excl(b[1..].to_vec())),
            Some(b'[') => Some(LexBound::Incl(b[1..].to_vec())),
            _ => None,
        }
    }
}

impl LexRange {
    pub fn parse(min: &[u8], max: &[u8]) -> Option<LexRange> {
        Some(LexRange { min: LexBound::parse(min)?, max: LexBound::parse(max)? })
    }

    /// No member can be inside (Redis's check: min above max, or equal with either bound
    /// exclusive; `-` and `+` count as exclusive bounds below and above every member).
    pub fn is_empty(&self) -> bool {
        use std::cmp::Ordering::*;
        let (cmp, ex) = match (&self.min, &self.max) {
            (LexBound::NegInf, LexBound::NegInf) | (LexBound::PosInf, LexBound::PosInf) => (Equal, true),
            (LexBound::NegInf, _) | (_, LexBound::PosInf) => (Less, false),
            (LexBound::PosInf, _) | (_, LexBound::NegInf) => (Greater, false),
            (LexBound::Incl(a) | LexBound::Excl(a), LexBound::Incl(b) | LexBound::Excl(b)) => {
                (a.cmp(b), matches!(self.min, LexBound::Excl(_)) || matches!(self.max, LexBound::Excl(_)))
            }
        };
        cmp == Greater || (cmp == Equal && ex)
    }

    pub fn gte_min(&self, m: &[u8]) -> bool {
        match &self.min {
            LexBound::NegInf => true,
            LexBound::PosInf => false,
            LexBound::Incl(x) => m >= &x[..],
            LexBound::Excl(x) => m > &x[..],
        }
    }

    pub fn lte_max(&self, m: &[u8]) -> bool {
        match &self.max {
            LexBound::NegInf => false,
            LexBound::PosInf => true,
            LexBound::Incl(x) => m <= &x[..],
            LexBound::Excl(x) => m < &x[..],
        }
    }
}

impl ZSet {
    /// Ascending ranks `[first, end)` of the elements inside a score range.
    pub fn score_span(&self, r: &ScoreRange) -> (usize, usize) {
        let first = self.count_while(|s, _| !r.gte_min(s));
        let end = self.count_while(|s, _| r.lte_max(s));
        (first, end.max(first))
    }

    /// Ascending ranks `[first, end)` of the elements inside a lex range, walked forwards
    /// (ZRANGEBYLEX, ZLEXCOUNT, ZREMRANGEBYLEX); see [`ZSet::lex_span_dir`].
    pub fn lex_span(&self, r: &LexRange) -> (usize, usize) {
        self.lex_span_dir(r, false)
    }

    /// `lex_span_dir` after skipping `offset` elements from where the walk starts (LIMIT):
    /// Redis skips them without looking at them, then goes on while elements are in range, so
    /// in a set with mixed scores the result can resume past a gap.
    pub fn lex_span_from(&self, r: &LexRange, rev: bool, offset: usize) -> (usize, usize) {
        let (a, b) = self.lex_span_dir(r, rev);
        if a == b || offset == 0 {
            return (a, b);
        }
        match &self.repr {
            Repr::Pack(p) => {
                let m: Vec<&[u8]> = p.iter().map(|e| e.item.1).collect();
                if rev {
                    let Some(s) = (b - 1).checked_sub(offset) else { return (0, 0) };
                    let start = m[..s].iter().rposition(|x| !r.gte_min(x)).map_or(0, |i| i + 1);
                    if r.gte_min(m[s]) {
                        (start, s + 1)
                    } else {
                        (0, 0)
                    }
                } else {
                    let s = a + offset;
                    if s >= m.len() {
                        return (0, 0);
                    }
                    let end = m[s..].iter().position(|x| !r.lte_max(x)).map_or(m.len(), |e| s + e);
                    (s, end.max(s))
                }
            }
            Repr::Skip(_) if rev => (a, b.saturating_sub(offset).max(a)),
            Repr::Skip(_) => ((a + offset).min(b), b),
        }
    }

    /// The ranks a lex range covers, found the way Redis finds them. Lex ranges are meant for
    /// sets whose members all have one score; Redis documents the result for mixed scores as
    /// unspecified, but clients see it, so Atoll gives the same answer: the range is first
    /// checked against the first and last element (Redis's `zzlIsInLexRange`); then, walking
    /// in score order, the first element ≥ min starts it (the last element ≤ max, walking
    /// backwards, for `rev`) and it runs until an element falls outside the other bound.
    /// `listpack` sets are searched by that walk, as Redis walks its listpack; `skiplist` sets
    /// by a descent, which is the same walk when members ascend with their scores (the
    /// documented use) — for mixed scores Redis's own descent depends on its random levels.
    pub fn lex_span_dir(&self, r: &LexRange, rev: bool) -> (usize, usize) {
        let n = self.len();
        if n == 0 || r.is_empty() {
            return (0, 0);
        }
        let (Some((first, _)), Some((last, _))) = (self.get(0), self.get(n - 1)) else { return (0, 0) };
        if !r.gte_min(last) || !r.lte_max(first) {
            return (0, 0);
        }
        match &self.repr {
            Repr::Pack(p) => {
                let m: Vec<&[u8]> = p.iter().map(|e| e.item.1).collect();
                if rev {
                    match m.iter().rposition(|x| r.lte_max(x)) {
                        Some(j) if r.gte_min(m[j]) => {
                            let start = m[..j].iter().rposition(|x| !r.gte_min(x)).map_or(0, |i| i + 1);
                            (start, j + 1)
                        }
                        _ => (0, 0),
                    }
                } else {
                    match m.iter().position(|x| r.gte_min(x)) {
                        Some(i) if r.lte_max(m[i]) => {
                            let end = m[i..].iter().position(|x| !r.lte_max(x)).map_or(n, |e| i + e);
                            (i, end)
                        }
                        _ => (0, 0),
                    }
                }
            }
            Repr::Skip(_) => {
                let first = self.count_while(|_, m| !r.gte_min(m));
                let end = self.count_while(|_, m| r.lte_max(m));
                (first, end.max(first))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIM: ZLimits = ZLimits { entries: 3, value: 4 };

    #[test]
    fn strtod_like_c() {
        assert_eq!(strtod(b"1.5"), (1.5, 3, false));
        assert_eq!(strtod(b"  -2e3x"), (-2000.0, 6, false));
        assert_eq!(strtod(b""), (0.0, 0, false));
        assert_eq!(strtod(b"0x10"), (16.0, 4, false));
        assert_eq!(strtod(b"-Infinity"), (f64::NEG_INFINITY, 9, false));
        assert_eq!(strtod(b"1e"), (1.0, 1, false));
        assert!(strtod(b"1e400").2);
        assert!(strtod(b"1e-400").2);
        assert!(strtod(b"nan").0.is_nan());
        assert_eq!(parse_score(b"1e400"), None);
        assert_eq!(parse_score(b" 1"), None);
        assert_eq!(parse_score(b"+inf"), Some(f64::INFINITY));
        assert_eq!(parse_score(b".5"), Some(0.5));
    }

    #[test]
    fn add_flags_and_conversion() {
        let mut z = ZSet::create(1, 1, &LIM);
        let f = AddFlags::default();
        assert_eq!(z.add(1.0, b"a", f, &LIM), Ok(AddOutcome::Added(1.0)));
        assert_eq!(z.add(2.0, b"b", f, &LIM), Ok(AddOutcome::Added(2.0)));
        assert_eq!(z.add(3.0, b"a", AddFlags { gt: true, ..f }, &LIM), Ok(AddOutcome::Updated(3.0)));
        assert_eq!(z.add(1.0, b"a", AddFlags { gt: true, ..f }, &LIM), Ok(AddOutcome::Nop));
        assert_eq!(z.rank(b"a"), Some((1, 3.0)));
        assert_eq!(z.encoding(), "listpack");
        z.add(0.5, b"long!", f, &LIM).unwrap();
        assert_eq!(z.encoding(), "skiplist");
        assert_eq!(z.rank(b"long!"), Some((0, 0.5)));
        let mut inf = ZSet::new_skip();
        inf.add(f64::INFINITY, b"x", f, &LIM).unwrap();
        assert_eq!(inf.add(f64::NEG_INFINITY, b"x", AddFlags { incr: true, ..f }, &LIM), Err(NanScore));
    }

    /// Elements in ascending order, as (member, score bits) so -0 and 0 differ.
    fn items(z: &ZSet) -> Vec<(Vec<u8>, u64)> {
        let mut v = Vec::new();
        z.for_each(|m, s| v.push((m.to_vec(), s.to_bits())));
        v
    }

    fn packed(z: &ZSet) -> &[u8] {
        match &z.repr {
            Repr::Pack(p) => p.0.bytes(),
            Repr::Skip(_) => panic!("not a listpack"),
        }
    }

    #[test]
    fn zset_sits_inside_value() {
        assert!(std::mem::size_of::<ZSet>() <= 24, "{}", std::mem::size_of::<ZSet>());
        assert_eq!(std::mem::size_of::<crate::engine::Value>(), 40);
    }

    #[test]
    fn score_encoding_is_exact_and_compact() {
        let ms = 1_700_000_000_123.0;
        let cases = [
            (0.0, 1),
            (-0.0, 9),
            (1.0, 1),
            (-1.0, 1),
            (31.0, 1),
            (-32.0, 1),
            (32.0, 2),
            (ms, 7),
            (INT_SCORE_MAX, 8),
            (-INT_SCORE_MAX, 8),
            (INT_SCORE_MAX * 2.0, 9),
            (0.5, 9),
            (-1e300, 9),
            (f64::INFINITY, 9),
            (f64::NEG_INFINITY, 9),
            (f64::MIN_POSITIVE / 8.0, 9),
        ];
        let mut b = [0u8; LEN_MAX];
        for (sc, width) in cases {
            let enc = put_score(sc, &mut b).to_vec();
            assert_eq!(enc.len(), width, "{sc}");
            let (back, end) = get_score(&enc, 0).unwrap();
            assert_eq!((back.to_bits(), end), (sc.to_bits(), width), "{sc}");
            assert_eq!(get_score(&enc[..width - 1], 0), None, "truncated {sc}");
        }
        assert_eq!(get_score(&[3], 0), None);
    }

    #[test]
    fn packed_scores_round_trip_exactly() {
        let lim = ZLimits { entries: 128, value: 1000 };
        let scores = [
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            9007199254740993.0,
            -((1u64 << 62) as f64),
            0.1,
            -2.5e-300,
            f64::MIN_POSITIVE / 4.0,
            f64::MAX,
        ];
        let mut z = ZSet::new_pack();
        for (i, &sc) in scores.iter().enumerate() {
            let m = vec![b'a' + i as u8; if i == 0 { 0 } else { [300, 127, 128, 5][i % 4] }];
            assert_eq!(z.add(sc, &m, AddFlags::default(), &lim), Ok(AddOutcome::Added(sc)));
            assert_eq!(z.score(&m).map(f64::to_bits), Some(sc.to_bits()));
        }
        assert_eq!(z.encoding(), "listpack");
        let mut want: Vec<(f64, Vec<u8>)> = Vec::new();
        z.for_each(|m, s| want.push((s, m.to_vec())));
        for w in want.windows(2) {
            assert!(before(w[0].0, &w[0].1, w[1].0, &w[1].1), "{:?} {:?}", w[0].0, w[1].0);
        }
        let size: usize = want.iter().map(|(s, m)| entry_size(*s, m)).sum();
        assert_eq!(packed(&z).len(), size);
        // The same set built whole, and its clone, encode identically.
        let built = ZSet::build(want.iter().rev().map(|(s, m)| (*s, m.clone().into())).collect(), &lim);
        assert_eq!(packed(&built), packed(&z));
        assert_eq!(z.clone(), z);
        // -0 and 0 compare equal: ordered by member, each keeping its own bits.
        assert_eq!(items(&z)[3..5], [(vec![], 0.0f64.to_bits()), (vec![b'b'; 127], (-0.0f64).to_bits())]);
        // Converting keeps every bit too.
        let mut big = z.clone();
        big.convert_to_skip();
        assert_eq!(big.encoding(), "skiplist");
        assert_eq!(items(&big), items(&z));
    }

    #[test]
    fn packed_ranks_ranges_and_edits() {
        let lim = ZLimits { entries: 128, value: 64 };
        let mut z = ZSet::new_pack();
        for i in (0..10).rev() {
            z.add(i as f64 / 2.0, format!("m{i}").as_bytes(), AddFlags::default(), &lim).unwrap();
        }
        let name = |i: usize| format!("m{i}").into_bytes();
        for i in 0..10 {
            assert_eq!(z.rank(&name(i)), Some((i, i as f64 / 2.0)));
            assert_eq!(z.get(i), Some((&name(i)[..], i as f64 / 2.0)));
        }
        assert_eq!(z.get(10), None);
        let mut fwd = Vec::new();
        z.for_range(2, 5, false, |m, _| fwd.push(m.to_vec()));
        let mut rev = Vec::new();
        z.for_range(2, 5, true, |m, _| rev.push(m.to_vec()));
        assert_eq!(fwd, (2..=5).map(name).collect::<Vec<_>>());
        assert_eq!(rev, (2..=5).rev().map(name).collect::<Vec<_>>());
        // Delete from the middle; move one to the front, another to the end, one in place.
        assert!(z.remove(&name(4)));
        assert!(!z.remove(&name(4)));
        assert_eq!(z.add(-1.0, &name(7), AddFlags::default(), &lim), Ok(AddOutcome::Updated(-1.0)));
        assert_eq!(z.add(10.0, &name(0), AddFlags::default(), &lim), Ok(AddOutcome::Updated(10.0)));
        let incr = AddFlags { incr: true, ..AddFlags::default() };
        assert_eq!(z.add(0.25, &name(5), incr, &lim), Ok(AddOutcome::Updated(2.75)));
        let order: Vec<Vec<u8>> = items(&z).into_iter().map(|(m, _)| m).collect();
        assert_eq!(order, [7, 1, 2, 3, 5, 6, 8, 9, 0].map(name));
        assert_eq!(z.len(), 9);
        assert_eq!(z.rank(&name(0)), Some((8, 10.0)));
        let r = ScoreRange::parse(b"(1", b"3").unwrap();
        assert_eq!(z.score_span(&r), (3, 6));
        // Ranks 1..=3 out, handed over in order; the rest closes up.
        let mut gone = Vec::new();
        z.remove_range(1, 3, |m, s| gone.push((m.into_vec(), s)));
        assert_eq!(gone, vec![(name(1), 0.5), (name(2), 1.0), (name(3), 1.5)]);
        let order: Vec<Vec<u8>> = items(&z).into_iter().map(|(m, _)| m).collect();
        assert_eq!(order, [7, 5, 6, 8, 9, 0].map(name));
        let size: usize = items(&z).iter().map(|(m, s)| entry_size(f64::from_bits(*s), m)).sum();
        assert_eq!(packed(&z).len(), size);
        let mut rng = rand::thread_rng();
        for _ in 0..20 {
            let (m, s) = z.random(&mut rng).unwrap();
            assert_eq!(z.score(&m), Some(s));
        }
        let n = z.len();
        z.remove_range(0, n - 1, |_, _| ());
        assert!(z.is_empty() && packed(&z).is_empty());
        assert_eq!(z.random(&mut rng), None);
    }

    #[test]
    fn ranges_both_encodings() {
        for big in [false, true] {
            let mut z = if big { ZSet::new_skip() } else { ZSet::new_pack() };
            for i in 0..10 {
                z.insert_absent(i as f64, format!("m{i}").as_bytes());
            }
            let r = ScoreRange::parse(b"(2", b"5").unwrap();
            assert_eq!(z.score_span(&r), (3, 6));
            let r = ScoreRange::parse(b"5", b"2").unwrap();
            let (a, b) = z.score_span(&r);
            assert_eq!(a, b);
            let l = LexRange::parse(b"[m3", b"(m5").unwrap();
            assert_eq!(z.lex_span(&l), (3, 5));
            let mut got = Vec::new();
            z.remove_range(2, 4, |e, _| got.push(e));
            assert_eq!(got.len(), 3);
            assert_eq!(z.len(), 7);
            assert_eq!(z.get(2), Some((&b"m5"[..], 5.0)));
        }
    }
}
