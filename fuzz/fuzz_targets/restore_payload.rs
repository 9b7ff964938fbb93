//! RESTORE payloads: arbitrary bytes as the body of a DUMP payload (the footer is made valid,
//! with the checksum check skipped, so every input reaches the RDB value decoder). Must never
//! panic or allocate by an untrusted length; and what decodes must dump and load again to the
//! same content (DEBUG DIGEST-VALUE's digest: a hash table may iterate in another order) and
//! the same payload length — the payload Atoll writes is one it reads.
#![no_main]

use atoll::commands::debug::content_digest;
use atoll::engine::rdb::load::LoadOpts;
use atoll::engine::rdb::save::SaveOpts;
use atoll::persist::{dump, restore};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, body)) = data.split_first() else { return };
    let mut opts = LoadOpts::default();
    // Small encoding limits sometimes, so loading converts between encodings.
    if sel & 1 != 0 {
        opts.hash.max_entries = 2;
        opts.set.listpack_entries = 2;
        opts.set.intset_entries = 2;
        opts.zset.entries = 2;
        opts.list_fill = 2;
    }
    let mut payload = body.to_vec();
    payload.extend_from_slice(&11u16.to_le_bytes());
    payload.extend_from_slice(&[0u8; 8]);
    if let Ok(v) = restore(&payload, &opts, true) {
        let save = SaveOpts { compress: sel & 2 != 0, ..SaveOpts::default() };
        let d = dump(&v, &save);
        let again = restore(&d, &opts, false).expect("a payload Atoll dumped loads back");
        assert_eq!(content_digest(&again), content_digest(&v), "the same content after dump and restore");
        assert_eq!(dump(&again, &save).len(), d.len(), "the same payload size after dump and restore");
    }
});
