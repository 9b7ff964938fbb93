//! Key → Redis Cluster hash slot → shard.
//!
//! The slot is CRC16 (XMODEM) of the key, or of the part between the first `{` and the next
//! `}` when that part is non-empty (a hash tag), modulo 16384 — exactly Redis Cluster's rule, so
//! keys sharing a tag share a shard, and the mapping is stable across restarts and thread counts.
//!
//! Every key-addressed command computes this once, so its cost is on the hot path of every GET.
//! On x86-64 with carry-less multiplication (PCLMULQDQ, detected at run time) the CRC takes
//! eight bytes per step with two multiplies and no table; elsewhere it is the `crc` crate's
//! byte-wise table. Written here rather than taken from a crate because the SIMD CRC crates
//! are built for long buffers. Per 16-byte key, in a chain of dependent lookups on the
//! development machine: the byte-wise table 42 ns, `crc-fast` 15–19 ns, slice-by-16 7 ns (but
//! 8 KB of tables to keep cached), this 10 ns with no table (docs/BENCHMARKS.md).

use crc::{Crc, CRC_16_XMODEM};

/// The fallback. The byte-wise table (512 bytes) stays in L1 even between unpipelined
/// requests, when the kernel's network path has evicted everything else. Slice-by-16 (8 KB of
/// tables) was faster in the hot-cache in-process benchmark but measured slower unpipelined
/// over TCP (docs/BENCHMARKS.md).
const CRC16: Crc<u16> = Crc::<u16>::new(&CRC_16_XMODEM);

pub const SLOTS: usize = 16384;
/// Shards per database (DESIGN §1): fixed, independent of the thread count.
pub const SHARDS: usize = 1024;

/// Set once, at start-up in cluster mode (before any key is loaded): the keyspace keeps a
/// count of keys per slot (see `KeyTable`).
pub static INDEXED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether `key` contains a `{`, eight bytes at a time (most keys have none; `memchr`'s setup
/// costs more than the whole scan of a short key).
#[inline]
fn has_open_brace(key: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        // A zero byte in x marks a '{': the classic "has zero byte" test.
        let x = u64::from_le_bytes(c.try_into().expect("8-byte chunk")) ^ (ONES * b'{' as u64);
        if x.wrapping_sub(ONES) & !x & (ONES << 7) != 0 {
            return true;
        }
    }
    chunks.remainder().contains(&b'{')
}

/// The part of the key that is hashed: the hash tag if there is a non-empty one.
#[inline]
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if !has_open_brace(key) {
        return key;
    }
    if let Some(open) = memchr::memchr(b'{', key) {
        if let Some(close) = memchr::memchr(b'}', &key[open + 1..]) {
            if close > 0 {
                return &key[open + 1..open + 1 + close];
            }
        }
    }
    key
}

#[inline]
pub fn key_slot(key: &[u8]) -> usize {
    crc16(hash_tag(key)) as usize & (SLOTS - 1)
}

#[inline]
pub fn key_shard(key: &[u8]) -> usize {
    key_slot(key) & (SHARDS - 1)
}

/// CRC-16/XMODEM of `data`, the fastest way this CPU offers.
#[inline]
pub fn crc16(data: &[u8]) -> u16 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("pclmulqdq") && std::arch::is_x86_feature_detected!("ssse3") {
        // SAFETY: the CPU supports the instructions `clmul::crc16` is compiled for.
        return unsafe { clmul::crc16(data) };
    }
    CRC16.checksum(data)
}

/// CRC-16/XMODEM by carry-less multiplication.
///
/// The CRC of a message M is M(x)·x¹⁶ mod P(x), P = x¹⁶ + x¹² + x⁵ + 1 (0x1021), with the first
/// byte's top bit as the highest power. Eight bytes at a time: the running CRC c is folded into
/// the top of the next big-endian chunk X (CRC with initial value c = CRC of X ⊕ c·x⁴⁸), and
/// (X ⊕ c·x⁴⁸)·x¹⁶ mod P is one Barrett reduction: q = ⌊A·μ / x⁶⁴⌋ with μ = ⌊x⁸⁰ / P⌋, then the
/// remainder is the low 16 bits of q·P. Barrett reduction is exact for polynomials over GF(2),
/// so there is no correction step (the tests check it against the table on many inputs).
#[cfg(target_arch = "x86_64")]
mod clmul {
    use std::arch::x86_64::*;

    /// P without its x¹⁶ term (which only touches bits the remainder does not keep).
    const POLY: u64 = 0x1021;
    /// μ = ⌊x⁸⁰ / P⌋ without its x⁶⁴ term (added back as `a ^ ...` below).
    const MU: u64 = barrett_mu();

    const fn barrett_mu() -> u64 {
        let p: u128 = 0x1_1021;
        let (mut r, mut q): (u128, u128) = (1 << 80, 0);
        let mut i = 80;
        while i >= 16 {
            if (r >> i) & 1 == 1 {
                r ^= p << (i - 16);
                q |= 1 << (i - 16);
            }
            i -= 1;
        }
        q as u64
    }

    /// One Barrett step in vector registers (moving values between vector and general
    /// registers costs more than the multiplies): `a`'s low 64 bits A → A(x)·x¹⁶ mod P in the
    /// low 16 bits of the result (the bits above are not cleared).
    #[inline]
    #[target_feature(enable = "pclmulqdq,ssse3")]
    fn reduce(a: __m128i) -> __m128i {
        let t = _mm_clmulepi64_si128(a, _mm_cvtsi64_si128(MU as i64), 0x00);
        let q = _mm_xor_si128(a, _mm_srli_si128(t, 8));
        _mm_clmulepi64_si128(q, _mm_cvtsi64_si128(POLY as i64), 0x00)
    }

    #[target_feature(enable = "pclmulqdq,ssse3")]
    pub fn crc16(data: &[u8]) -> u16 {
        // Byte order within the low 64 bits reversed: chunks are read big-endian.
        let swap = _mm_set_epi8(15, 14, 13, 12, 11, 10, 9, 8, 0, 1, 2, 3, 4, 5, 6, 7);
        // The short head first (with a zero CRC before it, its value needs no folding), then
        // whole chunks, each with the CRC so far folded into its top 16 bits.
        let head = data.len() % 8;
        let mut crc = _mm_setzero_si128();
        if head > 0 {
            let a = data[..head].iter().fold(0u64, |a, &b| (a << 8) | b as u64);
            crc = reduce(_mm_cvtsi64_si128(a as i64));
        }
        for chunk in data[head..].chunks_exact(8) {
            let x = u64::from_le_bytes(chunk.try_into().expect("8-byte chunk"));
            let x = _mm_shuffle_epi8(_mm_cvtsi64_si128(x as i64), swap);
            crc = reduce(_mm_xor_si128(x, _mm_slli_epi64(crc, 48)));
        }
        _mm_cvtsi128_si64(crc) as u16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_slots_match_redis() {
        // Values from CLUSTER KEYSLOT on a real Redis.
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hash_tag(b"{a}"), b"a");
        assert_eq!(hash_tag(b"a{b"), b"a{b");
        assert_eq!(hash_tag(b"0123456789abcdef{tag}"), b"tag");
        assert_eq!(hash_tag(b"01234567{t}"), b"t");
        for i in 0..24 {
            let mut k = vec![b'z'; 24];
            assert!(!has_open_brace(&k));
            k[i] = b'{';
            assert!(has_open_brace(&k), "brace at {i}");
            k[i] = b'{' ^ 0x80;
            assert!(!has_open_brace(&k), "byte {} at {i}", b'{' ^ 0x80);
        }
        assert_eq!(key_slot(b"123456789"), 0x31C3 & 16383);
    }

    /// The fast CRC agrees with the table on every length up to 300 and on varied bytes.
    #[test]
    fn crc16_matches_the_table() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut data = vec![0u8; 300];
        for round in 0..200 {
            for b in data.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = if round % 7 == 0 { 0xff } else { x as u8 };
            }
            for len in 0..=data.len() {
                assert_eq!(crc16(&data[..len]), CRC16.checksum(&data[..len]), "len {len} round {round}");
            }
        }
        assert_eq!(crc16(b""), 0);
        assert_eq!(crc16(b"123456789"), 0x31C3);
    }
}
