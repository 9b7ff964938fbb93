//! The compact encoding shared by small hashes, sets and sorted sets (Redis's listpack): every
//! entry of a value packed into one byte buffer, kept exactly as long as its contents.
//!
//! Each type decides what an entry is (a field and value, a member, a score and member); this
//! module has the pieces they share: LEB128 length prefixes, resizing the buffer in place
//! ([`splice`]), the buffer with its entry count ([`Packed`]) and a forward walk over its
//! entries ([`Walk`]). Entries have no back-pointers, so walks go forward only; the encoding is
//! only used while values are small (128 entries by default), where a walk is cheap.

/// Room for a LEB128 length prefix of any `usize`.
pub(crate) const LEN_MAX: usize = 10;

/// Writes `n` as a LEB128 varint (7 bits a byte, low first, high bit = more): one byte below
/// 128, two below 16384, so short strings pay a single byte of overhead.
pub(crate) fn put_len(n: usize, out: &mut [u8; LEN_MAX]) -> &[u8] {
    let mut n = n as u64;
    let mut i = 0;
    while n >= 0x80 {
        out[i] = (n as u8) | 0x80;
        n >>= 7;
        i += 1;
    }
    out[i] = n as u8;
    &out[..=i]
}

/// Reads a length written by [`put_len`] at `pos`; returns it and the offset after it. None on
/// a truncated or oversized prefix, which only a bug could produce (the buffer is ours).
pub(crate) fn get_len(buf: &[u8], mut pos: usize) -> Option<(usize, usize)> {
    let mut n = 0u64;
    let mut shift = 0;
    while shift < 64 {
        let b = *buf.get(pos)?;
        pos += 1;
        n |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some((usize::try_from(n).ok()?, pos));
        }
        shift += 7;
    }
    None
}

/// Reads a length-prefixed string at `pos`; returns it and the offset after it.
pub(crate) fn get_str(buf: &[u8], pos: usize) -> Option<(&[u8], usize)> {
    let (n, p) = get_len(buf, pos)?;
    let end = p.checked_add(n)?;
    Some((buf.get(p..end)?, end))
}

/// Appends `s` with its length prefix (for building a buffer in one go).
pub(crate) fn push_str(out: &mut Vec<u8>, s: &[u8]) {
    let mut l = [0u8; LEN_MAX];
    out.extend_from_slice(put_len(s.len(), &mut l));
    out.extend_from_slice(s);
}

/// Bytes `s` takes with its length prefix.
pub(crate) fn str_size(s: &[u8]) -> usize {
    let mut l = [0u8; LEN_MAX];
    put_len(s.len(), &mut l).len() + s.len()
}

/// Replaces `buf[at..at + old]` with the concatenation of `parts`, leaving the box exactly as
/// long as its contents. Resizing goes through `realloc` (Vec::reserve_exact, then
/// into_boxed_slice's shrink), which jemalloc does in place within a size class, so appending
/// an entry to a small value is usually no copy at all.
pub(crate) fn splice(buf: &mut Box<[u8]>, at: usize, old: usize, parts: &[&[u8]]) {
    let add: usize = parts.iter().map(|p| p.len()).sum();
    let end = at + old;
    if add != old {
        let mut v = std::mem::take(buf).into_vec();
        let len = v.len();
        if add > old {
            v.reserve_exact(add - old);
            v.resize(len + add - old, 0);
            v.copy_within(end..len, at + add);
        } else {
            v.copy_within(end..len, at + add);
            v.truncate(len - (old - add));
        }
        *buf = v.into_boxed_slice();
    }
    let mut p = at;
    for part in parts {
        buf[p..p + part.len()].copy_from_slice(part);
        p += part.len();
    }
}

/// A packed buffer and the number of entries in it, kept so lengths and threshold checks
/// need no walk. What an entry is belongs to the type using it.
#[derive(Clone, Default, PartialEq)]
pub(crate) struct Packed {
    buf: Box<[u8]>,
    len: usize,
}

impl std::fmt::Debug for Packed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Packed({} entries, {} bytes)", self.len, self.buf.len())
    }
}

/// One entry found by a [`Walk`] and the byte span it occupies.
pub(crate) struct Slot<T> {
    pub start: usize,
    pub item: T,
    pub end: usize,
}

/// Reads the entry at an offset: the entry and the offset after it (None: malformed).
pub(crate) type Decode<'a, T> = fn(&'a [u8], usize) -> Option<(T, usize)>;

/// Walks a [`Packed`] buffer from the start; stops early only on a malformed buffer.
pub(crate) struct Walk<'a, T> {
    buf: &'a [u8],
    pos: usize,
    decode: Decode<'a, T>,
}

impl<T> Iterator for Walk<'_, T> {
    type Item = Slot<T>;

    fn next(&mut self) -> Option<Slot<T>> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let start = self.pos;
        let (item, end) = (self.decode)(self.buf, start)?;
        self.pos = end;
        Some(Slot { start, item, end })
    }
}

impl Packed {
    /// A buffer built whole (`bytes` holds `len` encoded entries).
    pub fn from_vec(bytes: Vec<u8>, len: usize) -> Packed {
        Packed { buf: bytes.into_boxed_slice(), len }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The heap its buffer takes.
    pub fn footprint(&self) -> usize {
        super::footprint::cls(self.buf.len())
    }

    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    pub fn walk<'a, T>(&'a self, decode: Decode<'a, T>) -> Walk<'a, T> {
        Walk { buf: &self.buf, pos: 0, decode }
    }

    /// Inserts one new entry, made of `parts`, at byte offset `at`.
    pub fn insert(&mut self, at: usize, parts: &[&[u8]]) {
        splice(&mut self.buf, at, 0, parts);
        self.len += 1;
    }

    /// Appends one new entry.
    pub fn push(&mut self, parts: &[&[u8]]) {
        self.insert(self.buf.len(), parts);
    }

    /// Rewrites part of an entry (`old` bytes at `at`); the entry count stays.
    pub fn rewrite(&mut self, at: usize, old: usize, parts: &[&[u8]]) {
        splice(&mut self.buf, at, old, parts);
    }

    /// Removes `n` consecutive entries spanning bytes `start..end`.
    pub fn delete(&mut self, start: usize, end: usize, n: usize) {
        splice(&mut self.buf, start, end - start, &[]);
        self.len -= n;
    }

    /// Removes the one entry spanning `span` if a lookup found it; true if it did.
    pub fn delete_found(&mut self, span: Option<(usize, usize)>) -> bool {
        span.map(|(start, end)| self.delete(start, end, 1)).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_prefix_round_trips() {
        let mut b = [0u8; LEN_MAX];
        for (n, width) in [(0, 1), (1, 1), (127, 1), (128, 2), (300, 2), (16383, 2), (16384, 3), (70000, 3)] {
            let enc = put_len(n, &mut b).to_vec();
            assert_eq!(enc.len(), width, "{n}");
            assert_eq!(get_len(&enc, 0), Some((n, width)));
            assert_eq!(get_len(&enc[..width - 1], 0), None, "truncated {n}");
        }
        let enc = put_len(usize::MAX, &mut b).to_vec();
        assert_eq!(get_len(&enc, 0), Some((usize::MAX, enc.len())));
        assert_eq!(get_len(&[0x80; 11], 0), None);
        // A prefix claiming more bytes than there are.
        assert_eq!(get_str(&[5, b'a'], 0), None);
        assert_eq!(get_str(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01], 0), None);
    }

    #[test]
    fn walk_insert_delete() {
        let mut p = Packed::default();
        let mut v = Vec::new();
        for s in [&b""[..], b"a", &[7u8; 200]] {
            push_str(&mut v, s);
        }
        assert_eq!(v.len(), str_size(b"") + str_size(b"a") + str_size(&[7u8; 200]));
        p.push(&[&[1], b"x"]);
        p.insert(0, &[&[0]]);
        assert_eq!((p.len(), p.bytes()), (2, &[0, 1, b'x'][..]));
        p.rewrite(1, 2, &[&[2], b"yz"]);
        assert_eq!((p.len(), p.bytes()), (2, &[0, 2, b'y', b'z'][..]));
        p.delete(0, 4, 2);
        assert_eq!((p.len(), p.bytes().len()), (0, 0));
        let p = Packed::from_vec(v, 3);
        let got: Vec<(usize, &[u8], usize)> = p.walk(get_str).map(|s| (s.start, s.item, s.end)).collect();
        assert_eq!(got, vec![(0, &b""[..], 1), (1, &b"a"[..], 3), (3, &[7u8; 200][..], 205)]);
    }
}
