//! Redis's RDB serialization (version 11, as Redis 7.2 writes it; versions 1–11 read): the
//! primitives (lengths, strings with integer and LZF encodings, binary doubles), the compact
//! blobs Redis nests inside values (listpack, and for reading older files ziplist, intset and
//! zipmap), and each value's body in [`save`] and [`load`]. Whole files — header, aux fields,
//! databases, checksum — are one layer up (`persist`), which also frames DUMP payloads.
//!
//! Everything read here is untrusted (a file from anywhere, a RESTORE payload): every length
//! is checked against what is actually there before anything is allocated for it, every blob
//! is validated before use, and errors name what was wrong instead of panicking.

pub mod blobs;
pub mod load;
pub mod lzf;
pub mod save;

use std::io::Read;

pub const RDB_VERSION: u16 = 11;

/// Valkey 8.1+'s RDB version (files start `VALKEY080`). Atoll writes it only for what RDB 11
/// cannot hold — a hash with field deadlines, type [`TYPE_HASH_2`], which Valkey 9 defines and
/// Redis 7.4+ numbers differently (so a Redis file's `22` is never taken for Valkey's) — and
/// reads it always.
pub const RDB_VERSION_VALKEY: u16 = 80;

/// Whether files and DUMP payloads of this RDB version are read under `rdb-version-check
/// strict`: Redis's 1–11 and Valkey's 80, not Redis 7.4+'s 12 and later.
pub fn version_known(v: u16) -> bool {
    (1..=RDB_VERSION).contains(&v) || v == RDB_VERSION_VALKEY
}

pub const TYPE_STRING: u8 = 0;
pub const TYPE_LIST: u8 = 1;
pub const TYPE_SET: u8 = 2;
pub const TYPE_ZSET: u8 = 3;
pub const TYPE_HASH: u8 = 4;
pub const TYPE_ZSET_2: u8 = 5;
pub const TYPE_MODULE_PRE_GA: u8 = 6;
pub const TYPE_MODULE_2: u8 = 7;
pub const TYPE_HASH_ZIPMAP: u8 = 9;
pub const TYPE_LIST_ZIPLIST: u8 = 10;
pub const TYPE_SET_INTSET: u8 = 11;
pub const TYPE_ZSET_ZIPLIST: u8 = 12;
pub const TYPE_HASH_ZIPLIST: u8 = 13;
pub const TYPE_LIST_QUICKLIST: u8 = 14;
pub const TYPE_STREAM_LISTPACKS: u8 = 15;
pub const TYPE_HASH_LISTPACK: u8 = 16;
pub const TYPE_ZSET_LISTPACK: u8 = 17;
pub const TYPE_LIST_QUICKLIST_2: u8 = 18;
pub const TYPE_STREAM_LISTPACKS_2: u8 = 19;
pub const TYPE_SET_LISTPACK: u8 = 20;
pub const TYPE_STREAM_LISTPACKS_3: u8 = 21;
/// Valkey 9's hash with field deadlines: the field count, then per field its name, its value
/// and its deadline as 8 bytes little-endian Unix ms (-1: none).
pub const TYPE_HASH_2: u8 = 22;

pub const OP_FUNCTION2: u8 = 245;
pub const OP_FUNCTION_PRE_GA: u8 = 246;
pub const OP_MODULE_AUX: u8 = 247;
pub const OP_IDLE: u8 = 248;
pub const OP_FREQ: u8 = 249;
pub const OP_AUX: u8 = 250;
pub const OP_RESIZEDB: u8 = 251;
pub const OP_EXPIRETIME_MS: u8 = 252;
pub const OP_EXPIRETIME: u8 = 253;
pub const OP_SELECTDB: u8 = 254;
pub const OP_EOF: u8 = 255;

/// Quicklist node containers (RDB_TYPE_LIST_QUICKLIST_2).
pub const QL_PLAIN: u64 = 1;
pub const QL_PACKED: u64 = 2;

/// Redis's CRC-64 (Jones polynomial, reflected), which RDB files and DUMP payloads end with.
/// Sixteen-table slicing: the checksum runs over every byte saved or loaded.
pub static CRC64: crc::Crc<u64, crc::Table<16>> = crc::Crc::<u64, crc::Table<16>>::new(&crc::CRC_64_REDIS);

/// What went wrong reading RDB data.
#[derive(Debug, Clone, PartialEq)]
pub struct RdbError(pub String);

impl std::fmt::Display for RdbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub type Result<T> = std::result::Result<T, RdbError>;

pub fn err<T>(msg: impl Into<String>) -> Result<T> {
    Err(RdbError(msg.into()))
}

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------

/// Appends an RDB length: 6 bits in one byte, 14 bits in two, else a 32- or 64-bit
/// big-endian number after a marker byte.
pub fn put_len(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.extend_from_slice(&[0x40 | (n >> 8) as u8, n as u8]);
    } else if n <= u32::MAX as u64 {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Appends an integer as Redis's `rdbEncodeInteger` does (8, 16 or 32 bits, little-endian);
/// false if it does not fit in 32 bits.
fn put_int_encoded(out: &mut Vec<u8>, v: i64) -> bool {
    if let Ok(b) = i8::try_from(v) {
        out.extend_from_slice(&[0xC0, b as u8]);
    } else if let Ok(s) = i16::try_from(v) {
        out.push(0xC1);
        out.extend_from_slice(&s.to_le_bytes());
    } else if let Ok(i) = i32::try_from(v) {
        out.push(0xC2);
        out.extend_from_slice(&i.to_le_bytes());
    } else {
        return false;
    }
    true
}

/// Appends a string as Redis's `rdbSaveRawString`: up to 11 bytes that spell a canonical
/// integer fitting 32 bits are stored as that integer; past 20 bytes, with `compress`
/// (`rdbcompression`), LZF-compressed when that saves at least 4 bytes; else length + bytes.
pub fn put_str(out: &mut Vec<u8>, s: &[u8], compress: bool) {
    if s.len() <= 11 {
        if let Some(v) = crate::protocol::parse_i64(s) {
            if put_int_encoded(out, v) {
                return;
            }
        }
    }
    if compress && s.len() > 20 {
        // Redis gives LZF an output buffer of len - 4 bytes: a smaller saving is not worth
        // the decompression.
        if let Some(c) = self::lzf::compress(s, s.len() - 4) {
            out.push(0xC3);
            put_len(out, c.len() as u64);
            put_len(out, s.len() as u64);
            out.extend_from_slice(&c);
            return;
        }
    }
    put_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// Appends an integer value as a string (`rdbSaveLongLongAsStringObject`).
pub fn put_int_str(out: &mut Vec<u8>, v: i64) {
    if !put_int_encoded(out, v) {
        let mut b = itoa::Buffer::new();
        let s = b.format(v);
        put_len(out, s.len() as u64);
        out.extend_from_slice(s.as_bytes());
    }
}

pub fn put_double_bin(out: &mut Vec<u8>, v: f64) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub fn put_ms(out: &mut Vec<u8>, ms: i64) {
    out.extend_from_slice(&ms.to_le_bytes());
}

// ---------------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------------

/// Reads RDB data from any byte source, counting the offset and (for files) the checksum.
pub struct Input<R: Read> {
    r: R,
    pub pos: u64,
    crc: Option<crc::Digest<'static, u64, crc::Table<16>>>,
    /// While set, every byte read is also appended here (a value read past by `load::skip`
    /// is decoded later, on another thread).
    pub capture: Option<Vec<u8>>,
}

/// Largest single allocation made ahead of the data that fills it: a longer string grows as
/// its bytes actually arrive, so a forged length cannot reserve memory by itself.
const CHUNK: usize = 1 << 20;

impl<R: Read> Input<R> {
    pub fn new(r: R, checksum: bool) -> Input<R> {
        Input { r, pos: 0, crc: checksum.then(|| CRC64.digest()), capture: None }
    }

    /// Reads bytes that started at offset `pos` of a file (errors name file offsets).
    pub fn at(r: R, pos: u64) -> Input<R> {
        Input { r, pos, crc: None, capture: None }
    }

    /// The checksum of everything read so far (0 when not computed).
    pub fn checksum(&self) -> u64 {
        self.crc.as_ref().map_or(0, |d| d.clone().finalize())
    }

    pub fn fill(&mut self, buf: &mut [u8]) -> Result<()> {
        self.fill_uncaptured(buf)?;
        if let Some(c) = self.capture.as_mut() {
            c.extend_from_slice(buf);
        }
        Ok(())
    }

    fn fill_uncaptured(&mut self, buf: &mut [u8]) -> Result<()> {
        match self.r.read_exact(buf) {
            Ok(()) => {
                if let Some(d) = self.crc.as_mut() {
                    d.update(buf);
                }
                self.pos += buf.len() as u64;
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                err(format!("Unexpected EOF reading RDB file at offset {}", self.pos))
            }
            Err(e) => err(format!("Error reading RDB data at offset {}: {e}", self.pos)),
        }
    }

    pub fn u8(&mut self) -> Result<u8> {
        let mut b = [0u8; 1];
        self.fill(&mut b)?;
        Ok(b[0])
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut b = [0u8; N];
        self.fill(&mut b)?;
        Ok(b)
    }

    /// Exactly `n` bytes, allocated as they arrive.
    pub fn bytes(&mut self, n: u64) -> Result<Vec<u8>> {
        let n = usize::try_from(n).or_else(|_| err("length out of range"))?;
        let mut v = Vec::with_capacity(n.min(CHUNK));
        while v.len() < n {
            let take = (n - v.len()).min(CHUNK);
            let at = v.len();
            v.resize(at + take, 0);
            self.fill(&mut v[at..])?;
        }
        Ok(v)
    }

    /// An RDB length, or an encoded-value marker: (value, is_encoded).
    fn len_or_enc(&mut self) -> Result<(u64, bool)> {
        let b = self.u8()?;
        Ok(match b >> 6 {
            0 => ((b & 0x3f) as u64, false),
            1 => ((((b & 0x3f) as u64) << 8) | self.u8()? as u64, false),
            3 => ((b & 0x3f) as u64, true),
            _ => match b {
                0x80 => (u32::from_be_bytes(self.array()?) as u64, false),
                0x81 => (u64::from_be_bytes(self.array()?), false),
                _ => return err(format!("Unknown length encoding {b} in rdbLoadLen()")),
            },
        })
    }

    pub fn length(&mut self) -> Result<u64> {
        match self.len_or_enc()? {
            (n, false) => Ok(n),
            _ => err("Unexpected encoded length"),
        }
    }

    /// A length that counts items still to be read: bounded by `usize`.
    pub fn count(&mut self) -> Result<usize> {
        let n = self.length()?;
        usize::try_from(n).or_else(|_| err("count out of range"))
    }

    /// A string in any of its encodings, as bytes.
    pub fn string(&mut self) -> Result<Vec<u8>> {
        match self.len_or_enc()? {
            (n, false) => self.bytes(n),
            (0, true) => Ok(itoa::Buffer::new().format(self.u8()? as i8).as_bytes().to_vec()),
            (1, true) => Ok(itoa::Buffer::new().format(i16::from_le_bytes(self.array()?)).as_bytes().to_vec()),
            (2, true) => Ok(itoa::Buffer::new().format(i32::from_le_bytes(self.array()?)).as_bytes().to_vec()),
            (3, true) => self.lzf(),
            (e, true) => err(format!("Unknown RDB string encoding type {e}")),
        }
    }

    /// Reads past `n` bytes (into `capture` when capturing), as they arrive.
    fn skip(&mut self, n: u64) -> Result<()> {
        let mut left = n;
        match self.capture.take() {
            // Read straight into the capture, growing it as the bytes arrive.
            Some(mut c) => {
                let r = (|| {
                    while left > 0 {
                        let take = left.min(CHUNK as u64) as usize;
                        let at = c.len();
                        c.resize(at + take, 0);
                        self.fill_uncaptured(&mut c[at..])?;
                        left -= take as u64;
                    }
                    Ok(())
                })();
                self.capture = Some(c);
                r
            }
            None => {
                let mut buf = [0u8; 512];
                while left > 0 {
                    let take = left.min(buf.len() as u64) as usize;
                    self.fill_uncaptured(&mut buf[..take])?;
                    left -= take as u64;
                }
                Ok(())
            }
        }
    }

    /// Reads past a string in any of its encodings (see `string`), checking only its framing.
    pub fn skip_string(&mut self) -> Result<()> {
        match self.len_or_enc()? {
            (n, false) => self.skip(n),
            (0, true) => self.skip(1),
            (1, true) => self.skip(2),
            (2, true) => self.skip(4),
            (3, true) => {
                let clen = self.length()?;
                let len = self.length()?;
                if len == 0 || clen == 0 || len > clen.saturating_mul(128) {
                    return err(format!("Invalid LZF lengths (compressed {clen}, plain {len})"));
                }
                self.skip(clen)
            }
            (e, true) => err(format!("Unknown RDB string encoding type {e}")),
        }
    }

    /// Reads past an old text double (see `double_text`).
    pub fn skip_double_text(&mut self) -> Result<()> {
        match self.u8()? {
            253..=255 => Ok(()),
            n => self.skip(n as u64),
        }
    }

    /// An LZF-compressed string, after its marker.
    fn lzf(&mut self) -> Result<Vec<u8>> {
        let clen = self.length()?;
        let len = self.length()?;
        // LZF expands at most ~88× (a 3-byte back reference yields 264 bytes), so a declared
        // length beyond that is a lie; checked before allocating for it.
        if len == 0 || clen == 0 || len > clen.saturating_mul(128) {
            return err(format!("Invalid LZF lengths (compressed {clen}, plain {len})"));
        }
        let c = self.bytes(clen)?;
        match ::lzf::decompress(&c, len as usize) {
            Ok(v) if v.len() as u64 == len => Ok(v),
            _ => err("Invalid LZF compressed string"),
        }
    }

    /// A string value as `int_or_string` reads it, except that an LZF-compressed one is only
    /// read, its compressed bytes appended to `out`, not decompressed: `Err((len, range))`
    /// (its plain length, where its bytes are in `out`) for `lzf_value` to finish elsewhere.
    pub fn int_or_string_deferring_lzf(
        &mut self,
        out: &mut Vec<u8>,
    ) -> Result<std::result::Result<IntOrStr, (u64, std::ops::Range<usize>)>> {
        match self.len_or_enc()? {
            (3, true) => {
                let clen = self.length()?;
                let len = self.length()?;
                if len == 0 || clen == 0 || len > clen.saturating_mul(128) {
                    return err(format!("Invalid LZF lengths (compressed {clen}, plain {len})"));
                }
                let start = out.len();
                let saved = self.capture.replace(std::mem::take(out));
                let r = self.skip(clen);
                *out = std::mem::replace(&mut self.capture, saved).unwrap_or_default();
                r?;
                Ok(Err((len, start..out.len())))
            }
            (n, false) => Ok(Ok(IntOrStr::Str(self.bytes(n)?))),
            (0, true) => Ok(Ok(IntOrStr::Int(self.u8()? as i8 as i64))),
            (1, true) => Ok(Ok(IntOrStr::Int(i16::from_le_bytes(self.array()?) as i64))),
            (2, true) => Ok(Ok(IntOrStr::Int(i32::from_le_bytes(self.array()?) as i64))),
            (e, true) => err(format!("Unknown RDB string encoding type {e}")),
        }
    }

    /// A string value as Redis would hold it: int-encoded strings come back as integers.
    pub fn int_or_string(&mut self) -> Result<IntOrStr> {
        match self.len_or_enc()? {
            (n, false) => Ok(IntOrStr::Str(self.bytes(n)?)),
            (0, true) => Ok(IntOrStr::Int(self.u8()? as i8 as i64)),
            (1, true) => Ok(IntOrStr::Int(i16::from_le_bytes(self.array()?) as i64)),
            (2, true) => Ok(IntOrStr::Int(i32::from_le_bytes(self.array()?) as i64)),
            (3, true) => Ok(IntOrStr::Str(self.lzf()?)),
            (e, true) => err(format!("Unknown RDB string encoding type {e}")),
        }
    }

    pub fn double_bin(&mut self) -> Result<f64> {
        Ok(f64::from_le_bytes(self.array()?))
    }

    /// The old text double (RDB_TYPE_ZSET): a length byte, 253/254/255 for NaN/+inf/-inf.
    pub fn double_text(&mut self) -> Result<f64> {
        let n = self.u8()?;
        match n {
            255 => Ok(f64::NEG_INFINITY),
            254 => Ok(f64::INFINITY),
            253 => Ok(f64::NAN),
            _ => {
                let b = self.bytes(n as u64)?;
                std::str::from_utf8(&b)
                    .ok()
                    .and_then(|s| s.trim().parse::<f64>().ok())
                    .map_or_else(|| err("Invalid double value"), Ok)
            }
        }
    }

    pub fn ms(&mut self) -> Result<i64> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    pub fn into_inner(self) -> R {
        self.r
    }
}

/// Decompresses an LZF string of plain length `len` read by `int_or_string_deferring_lzf`.
pub fn lzf_value(c: &[u8], len: u64) -> Result<Vec<u8>> {
    match ::lzf::decompress(c, len as usize) {
        Ok(v) if v.len() as u64 == len => Ok(v),
        _ => err("Invalid LZF compressed string"),
    }
}

/// A string read from RDB: Redis keeps small integers int-encoded.
pub enum IntOrStr {
    Int(i64),
    Str(Vec<u8>),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(s: &[u8], compress: bool) -> (Vec<u8>, Vec<u8>) {
        let mut out = Vec::new();
        put_str(&mut out, s, compress);
        let mut inp = Input::new(&out[..], false);
        (out.clone(), inp.string().unwrap())
    }

    #[test]
    fn strings_round_trip_in_every_encoding() {
        assert_eq!(round(b"12", true).0, [0xC0, 12]);
        assert_eq!(round(b"-300", true).0, [0xC1, 0xD4, 0xFE]);
        assert_eq!(round(b"100000", true).0, [0xC2, 0xA0, 0x86, 1, 0]);
        // Not canonical, or too long for 32 bits: plain strings.
        assert_eq!(round(b"012", true).0, [3, b'0', b'1', b'2']);
        assert_eq!(round(b"4294967296", true).0[0], 10);
        let long = vec![b'a'; 100];
        let (enc, back) = round(&long, true);
        assert_eq!(enc[0], 0xC3);
        assert_eq!(back, long);
        let (enc, _) = round(&long, false);
        assert_eq!(enc[..2], [0x40, 100]);
        for n in [0u64, 63, 64, 16383, 16384, u32::MAX as u64, u32::MAX as u64 + 1] {
            let mut out = Vec::new();
            put_len(&mut out, n);
            assert_eq!(Input::new(&out[..], false).length().unwrap(), n);
        }
    }

    #[test]
    fn forged_lengths_fail_without_allocating() {
        // A 4 GB string with 3 bytes behind it; an LZF string claiming a 1 TB result.
        let mut out = vec![0x80, 0xFF, 0xFF, 0xFF, 0xF0, 1, 2, 3];
        assert!(Input::new(&out[..], false).string().is_err());
        out = vec![0xC3, 2];
        put_len(&mut out, 1 << 40);
        out.extend_from_slice(&[0, 0]);
        assert!(Input::new(&out[..], false).string().is_err());
    }

    #[test]
    fn crc64_is_redis_jones() {
        // Redis's crc64 test vector.
        assert_eq!(CRC64.checksum(b"123456789"), 0xe9c6d914c4b8d9ca);
    }
}
