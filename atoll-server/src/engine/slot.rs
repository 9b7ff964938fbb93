//! Key → Redis Cluster hash slot → shard.
//!
//! The slot is CRC16 (XMODEM) of the key, or of the part between the first `{` and the next
//! `}` when that part is non-empty (a hash tag), modulo 16384 — exactly Redis Cluster's rule, so
//! keys sharing a tag share a shard, and the mapping is stable across restarts and thread counts.

use crc::{Crc, CRC_16_XMODEM};

/// The byte-wise table (512 bytes) stays in L1 even between unpipelined requests, when the
/// kernel's network path has evicted everything else. Slice-by-16 (8 KB of tables) was faster
/// in the hot-cache in-process benchmark but measured slower unpipelined over TCP
/// (docs/BENCHMARKS.md).
const CRC16: Crc<u16> = Crc::<u16>::new(&CRC_16_XMODEM);

pub const SLOTS: usize = 16384;
/// Shards per database (DESIGN §1): fixed, independent of the thread count.
pub const SHARDS: usize = 1024;

/// The part of the key that is hashed: the hash tag if there is a non-empty one.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&c| c == b'{') {
        if let Some(close) = key[open + 1..].iter().position(|&c| c == b'}') {
            if close > 0 {
                return &key[open + 1..open + 1 + close];
            }
        }
    }
    key
}

pub fn key_slot(key: &[u8]) -> usize {
    CRC16.checksum(hash_tag(key)) as usize & (SLOTS - 1)
}

#[inline]
pub fn key_shard(key: &[u8]) -> usize {
    key_slot(key) & (SHARDS - 1)
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
        assert_eq!(key_slot(b"123456789"), 0x31C3 & 16383);
    }
}
