//! The compact blobs Redis stores inside RDB values, byte for byte as Redis lays them out:
//! listpack (written and read), intset (written and read), and the encodings of older files
//! that are only read — ziplist (Redis ≤ 6.2) and zipmap (≤ 2.4). Atoll's own compact
//! encodings are laid out differently in memory (`engine::packed`), so values are converted
//! element by element on the way in and out. Each reader validates the whole blob (header
//! sizes, entry bounds, terminator) before its elements are used.

use super::{err, Result};

/// One element of a listpack or ziplist.
#[derive(Debug, Clone, PartialEq)]
pub enum Elem {
    Int(i64),
    Str(Vec<u8>),
}

impl Elem {
    /// The element as Redis would return it: integers as decimal text.
    pub fn into_bytes(self) -> Vec<u8> {
        match self {
            Elem::Int(i) => itoa::Buffer::new().format(i).as_bytes().to_vec(),
            Elem::Str(s) => s,
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            Elem::Int(i) => Some(*i),
            Elem::Str(s) => crate::protocol::parse_i64(s),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Listpack
// ---------------------------------------------------------------------------------------------

/// Builds a listpack (`lpNew` + `lpAppend`…): a 6-byte header (total bytes, element count),
/// the entries, and an end byte.
pub struct LpWriter {
    buf: Vec<u8>,
    count: usize,
}

impl Default for LpWriter {
    fn default() -> Self {
        LpWriter::new()
    }
}

impl LpWriter {
    pub fn new() -> LpWriter {
        LpWriter { buf: vec![0; 6], count: 0 }
    }

    /// Appends a string element; one that spells a canonical integer is stored as that
    /// integer, as `lpStringToInt64` decides.
    pub fn push(&mut self, s: &[u8]) {
        if s.len() <= 20 {
            if let Some(v) = crate::protocol::parse_i64(s) {
                return self.push_int(v);
            }
        }
        let start = self.buf.len();
        let n = s.len();
        if n < 64 {
            self.buf.push(0x80 | n as u8);
        } else if n < 4096 {
            self.buf.extend_from_slice(&[0xE0 | (n >> 8) as u8, n as u8]);
        } else {
            self.buf.push(0xF0);
            self.buf.extend_from_slice(&(n as u32).to_le_bytes());
        }
        self.buf.extend_from_slice(s);
        self.end_entry(start);
    }

    pub fn push_int(&mut self, v: i64) {
        let start = self.buf.len();
        if (0..=127).contains(&v) {
            self.buf.push(v as u8);
        } else if (-4096..=4095).contains(&v) {
            let u = (v as u64 & 0x1fff) as u16;
            self.buf.extend_from_slice(&[0xC0 | (u >> 8) as u8, u as u8]);
        } else if let Ok(x) = i16::try_from(v) {
            self.buf.push(0xF1);
            self.buf.extend_from_slice(&x.to_le_bytes());
        } else if (-(1 << 23)..(1 << 23)).contains(&v) {
            self.buf.push(0xF2);
            self.buf.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        } else if let Ok(x) = i32::try_from(v) {
            self.buf.push(0xF3);
            self.buf.extend_from_slice(&x.to_le_bytes());
        } else {
            self.buf.push(0xF4);
            self.buf.extend_from_slice(&v.to_le_bytes());
        }
        self.end_entry(start);
    }

    /// Appends the back-length of the entry that began at `start` (`lpEncodeBacklen`).
    fn end_entry(&mut self, start: usize) {
        let l = (self.buf.len() - start) as u64;
        match l {
            0..=127 => self.buf.push(l as u8),
            128..=16382 => self.buf.extend_from_slice(&[(l >> 7) as u8, (l & 127) as u8 | 128]),
            16383..=2097150 => {
                self.buf.extend_from_slice(&[(l >> 14) as u8, ((l >> 7) & 127) as u8 | 128, (l & 127) as u8 | 128])
            }
            2097151..=268435454 => self.buf.extend_from_slice(&[
                (l >> 21) as u8,
                ((l >> 14) & 127) as u8 | 128,
                ((l >> 7) & 127) as u8 | 128,
                (l & 127) as u8 | 128,
            ]),
            _ => self.buf.extend_from_slice(&[
                (l >> 28) as u8,
                ((l >> 21) & 127) as u8 | 128,
                ((l >> 14) & 127) as u8 | 128,
                ((l >> 7) & 127) as u8 | 128,
                (l & 127) as u8 | 128,
            ]),
        }
        self.count += 1;
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(0xFF);
        let total = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&total.to_le_bytes());
        // 65535 means "count unknown, walk to find out".
        let count = self.count.min(65535) as u16;
        self.buf[4..6].copy_from_slice(&count.to_le_bytes());
        self.buf
    }
}

/// Reads every element of a listpack, validating its structure (`lpValidateIntegrity` deep).
pub fn listpack(b: &[u8]) -> Result<Vec<Elem>> {
    if b.len() < 7 {
        return err("Listpack too short");
    }
    let total = u32::from_le_bytes(b[..4].try_into().unwrap()) as usize;
    let count = u16::from_le_bytes(b[4..6].try_into().unwrap()) as usize;
    if total != b.len() || b[total - 1] != 0xFF {
        return err("Listpack integrity check failed: bad header or terminator");
    }
    let mut out = Vec::with_capacity(count.min(b.len()));
    let mut p = 6;
    while p < total - 1 {
        let start = p;
        let t = b[p];
        let need = |p: usize, n: usize| -> Result<()> {
            if p.checked_add(n).is_some_and(|e| e < total) {
                Ok(())
            } else {
                err("Listpack integrity check failed: entry out of range")
            }
        };
        let elem = if t & 0x80 == 0 {
            p += 1;
            Elem::Int((t & 0x7f) as i64)
        } else if t & 0xC0 == 0x80 {
            let n = (t & 0x3f) as usize;
            need(p + 1, n)?;
            p += 1 + n;
            Elem::Str(b[start + 1..p].to_vec())
        } else if t & 0xE0 == 0xC0 {
            need(p, 2)?;
            let u = (((t & 0x1f) as u16) << 8) | b[p + 1] as u16;
            p += 2;
            // 13-bit two's complement.
            Elem::Int(if u >= 1 << 12 { u as i64 - (1 << 13) } else { u as i64 })
        } else if t & 0xF0 == 0xE0 {
            need(p, 2)?;
            let n = (((t & 0x0f) as usize) << 8) | b[p + 1] as usize;
            need(p + 2, n)?;
            p += 2 + n;
            Elem::Str(b[start + 2..p].to_vec())
        } else {
            let (hdr, val) = match t {
                0xF0 => {
                    need(p, 5)?;
                    let n = u32::from_le_bytes(b[p + 1..p + 5].try_into().unwrap()) as usize;
                    need(p + 5, n)?;
                    p += 5 + n;
                    (0, Elem::Str(b[start + 5..p].to_vec()))
                }
                0xF1 => (3, Elem::Int(0)),
                0xF2 => (4, Elem::Int(0)),
                0xF3 => (5, Elem::Int(0)),
                0xF4 => (9, Elem::Int(0)),
                _ => return err(format!("Listpack integrity check failed: bad entry type {t:#x}")),
            };
            if hdr > 0 {
                need(p, hdr)?;
                let d = &b[p + 1..p + hdr];
                let v = match hdr {
                    3 => i16::from_le_bytes(d.try_into().unwrap()) as i64,
                    4 => ((d[0] as i32 | (d[1] as i32) << 8 | (d[2] as i32) << 16) << 8 >> 8) as i64,
                    5 => i32::from_le_bytes(d.try_into().unwrap()) as i64,
                    _ => i64::from_le_bytes(d.try_into().unwrap()),
                };
                p += hdr;
                Elem::Int(v)
            } else {
                val
            }
        };
        // The back-length must encode this entry's length.
        let l = (p - start) as u64;
        let blen = match l {
            0..=127 => 1,
            128..=16382 => 2,
            16383..=2097150 => 3,
            2097151..=268435454 => 4,
            _ => 5,
        };
        need(p, blen)?;
        let mut v: u64 = 0;
        for (i, &c) in b[p..p + blen].iter().rev().enumerate() {
            v |= ((c & 127) as u64) << (7 * i);
        }
        if v != l {
            return err("Listpack integrity check failed: bad back-length");
        }
        p += blen;
        out.push(elem);
    }
    if count != 65535 && count != out.len() {
        return err("Listpack integrity check failed: element count mismatch");
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Intset
// ---------------------------------------------------------------------------------------------

/// An intset blob: encoding (2, 4 or 8 bytes per integer), count, then the sorted integers,
/// all little-endian.
pub fn intset_blob(mut values: Vec<i64>) -> Vec<u8> {
    values.sort_unstable();
    let width: usize = if values.iter().all(|&v| i16::try_from(v).is_ok()) {
        2
    } else if values.iter().all(|&v| i32::try_from(v).is_ok()) {
        4
    } else {
        8
    };
    let mut out = Vec::with_capacity(8 + width * values.len());
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&(values.len() as u32).to_le_bytes());
    for v in values {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    out
}

/// The integers of an intset blob (`intsetValidateIntegrity`): with `deep`, checked sorted and
/// unique; without, in the order found (the set built from them needs neither).
pub fn intset(b: &[u8], deep: bool) -> Result<Vec<i64>> {
    if b.len() < 8 {
        return err("Intset too short");
    }
    let width = u32::from_le_bytes(b[..4].try_into().unwrap()) as usize;
    let count = u32::from_le_bytes(b[4..8].try_into().unwrap()) as usize;
    if !matches!(width, 2 | 4 | 8) || count.checked_mul(width).and_then(|n| n.checked_add(8)) != Some(b.len()) {
        return err("Intset integrity check failed");
    }
    let mut out: Vec<i64> = Vec::with_capacity(count);
    for c in b[8..].chunks_exact(width) {
        let v = match width {
            2 => i16::from_le_bytes(c.try_into().unwrap()) as i64,
            4 => i32::from_le_bytes(c.try_into().unwrap()) as i64,
            _ => i64::from_le_bytes(c.try_into().unwrap()),
        };
        if deep && out.last().is_some_and(|&p| p >= v) {
            return err("Intset integrity check failed: not sorted");
        }
        out.push(v);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Ziplist (read only: Redis 7 converts them to listpacks on load, and so does Atoll)
// ---------------------------------------------------------------------------------------------

pub fn ziplist(b: &[u8]) -> Result<Vec<Elem>> {
    if b.len() < 11 {
        return err("Ziplist too short");
    }
    let total = u32::from_le_bytes(b[..4].try_into().unwrap()) as usize;
    let count = u16::from_le_bytes(b[8..10].try_into().unwrap()) as usize;
    if total != b.len() || b[total - 1] != 0xFF {
        return err("Ziplist integrity check failed: bad header or terminator");
    }
    let end = total - 1;
    let mut out = Vec::new();
    let mut p = 10;
    let need = |p: usize, n: usize| -> Result<()> {
        if p.checked_add(n).is_some_and(|e| e <= end) {
            Ok(())
        } else {
            err("Ziplist integrity check failed: entry out of range")
        }
    };
    let mut prev_len = 0usize;
    let mut last_start = 10;
    while p < end {
        let start = p;
        last_start = start;
        // prevlen: one byte, or 0xFE and four bytes.
        need(p, 1)?;
        let prevlen = if b[p] < 254 {
            p += 1;
            b[p - 1] as usize
        } else {
            need(p, 5)?;
            p += 5;
            u32::from_le_bytes(b[p - 4..p].try_into().unwrap()) as usize
        };
        if prevlen != prev_len {
            return err("Ziplist integrity check failed: bad prevlen");
        }
        need(p, 1)?;
        let e = b[p];
        let elem = match e >> 6 {
            0 => {
                let n = (e & 0x3f) as usize;
                need(p + 1, n)?;
                p += 1 + n;
                Elem::Str(b[p - n..p].to_vec())
            }
            1 => {
                need(p, 2)?;
                let n = (((e & 0x3f) as usize) << 8) | b[p + 1] as usize;
                need(p + 2, n)?;
                p += 2 + n;
                Elem::Str(b[p - n..p].to_vec())
            }
            2 => {
                need(p, 5)?;
                let n = u32::from_be_bytes(b[p + 1..p + 5].try_into().unwrap()) as usize;
                need(p + 5, n)?;
                p += 5 + n;
                Elem::Str(b[p - n..p].to_vec())
            }
            _ => {
                let (w, v): (usize, i64) = match e {
                    0xC0 => (2, 0),
                    0xD0 => (4, 0),
                    0xE0 => (8, 0),
                    0xF0 => (3, 0),
                    0xFE => (1, 0),
                    0xF1..=0xFD => (0, (e & 0x0f) as i64 - 1),
                    _ => return err(format!("Ziplist integrity check failed: bad encoding {e:#x}")),
                };
                need(p + 1, w)?;
                let d = &b[p + 1..p + 1 + w];
                let v = match w {
                    0 => v,
                    1 => d[0] as i8 as i64,
                    2 => i16::from_le_bytes(d.try_into().unwrap()) as i64,
                    3 => ((d[0] as i32 | (d[1] as i32) << 8 | (d[2] as i32) << 16) << 8 >> 8) as i64,
                    4 => i32::from_le_bytes(d.try_into().unwrap()) as i64,
                    _ => i64::from_le_bytes(d.try_into().unwrap()),
                };
                p += 1 + w;
                Elem::Int(v)
            }
        };
        prev_len = p - start;
        out.push(elem);
    }
    if count != 65535 && count != out.len() {
        return err("Ziplist integrity check failed: entry count mismatch");
    }
    // The header's tail offset must be the last entry's (the header's end when empty), as
    // Redis's integrity check requires: a reader going backwards starts there.
    if u32::from_le_bytes(b[4..8].try_into().unwrap()) as usize != last_start {
        return err("Ziplist integrity check failed: bad tail offset");
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Zipmap (read only: hashes of Redis ≤ 2.4)
// ---------------------------------------------------------------------------------------------

/// The field-value pairs of a zipmap.
pub fn zipmap(b: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let bad = || err("Zipmap integrity check failed");
    if b.len() < 2 {
        return bad();
    }
    let mut p = 1;
    let mut out = Vec::new();
    let len_at = |p: &mut usize| -> Result<Option<usize>> {
        match b.get(*p) {
            None => err("Zipmap integrity check failed"),
            Some(255) => Ok(None),
            Some(254) => {
                let v = b.get(*p + 1..*p + 5).ok_or_else(|| super::RdbError("Zipmap integrity check failed".into()))?;
                *p += 5;
                Ok(Some(u32::from_le_bytes(v.try_into().unwrap()) as usize))
            }
            Some(&n) => {
                *p += 1;
                Ok(Some(n as usize))
            }
        }
    };
    while let Some(klen) = len_at(&mut p)? {
        let Some(k) = b.get(p..p + klen) else { return bad() };
        p += klen;
        let Some(vlen) = len_at(&mut p)? else { return bad() };
        let Some(&free) = b.get(p) else { return bad() };
        p += 1;
        let Some(v) = b.get(p..p + vlen) else { return bad() };
        p += vlen + free as usize;
        out.push((k.to_vec(), v.to_vec()));
    }
    // An empty zipmap is corrupt to Redis too (no Redis wrote one).
    if p != b.len() - 1 || out.is_empty() {
        return bad();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listpack_round_trips_every_entry_kind() {
        let items: Vec<Vec<u8>> = vec![
            b"0".to_vec(),
            b"127".to_vec(),
            b"-1".to_vec(),
            b"4095".to_vec(),
            b"-4096".to_vec(),
            b"30000".to_vec(),
            b"-8000000".to_vec(),
            b"2000000000".to_vec(),
            b"-9223372036854775808".to_vec(),
            b"hello".to_vec(),
            vec![b'x'; 63],
            vec![b'y'; 64],
            vec![b'z'; 4095],
            vec![b'w'; 5000],
            b"007".to_vec(),
        ];
        let mut w = LpWriter::new();
        for i in &items {
            w.push(i);
        }
        let blob = w.finish();
        // Redis's layout for a small one: header 6, "a" = 0x81 'a' backlen 2, 5 backlen 1, end.
        let mut small = LpWriter::new();
        small.push(b"a");
        small.push(b"5");
        assert_eq!(small.finish(), [12, 0, 0, 0, 2, 0, 0x81, b'a', 2, 5, 1, 0xFF]);
        let back: Vec<Vec<u8>> = listpack(&blob).unwrap().into_iter().map(Elem::into_bytes).collect();
        assert_eq!(back, items);
        let mut bad = blob.clone();
        bad[7] ^= 0x40;
        assert!(listpack(&bad).is_err() || listpack(&bad).unwrap() != listpack(&blob).unwrap());
        assert!(listpack(&blob[..blob.len() - 1]).is_err());
    }

    #[test]
    fn intsets_round_trip() {
        for vals in [vec![3, 1, 2], vec![-70000, 5], vec![i64::MIN, 0, i64::MAX]] {
            let mut sorted = vals.clone();
            sorted.sort();
            assert_eq!(intset(&intset_blob(vals), true).unwrap(), sorted);
        }
        assert!(intset(&[2, 0, 0, 0, 5, 0, 0, 0, 1, 0], true).is_err());
    }
}
