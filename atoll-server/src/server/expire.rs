//! Active expiry: keys that are never read again are still reclaimed (DESIGN §1 "Expiry").
//!
//! Every worker runs this cycle `hz` times a second. The workers share one cursor over all
//! shards, so together they sweep the keyspace once instead of once per thread. In each shard
//! the cycle samples up to 20 keys with a TTL (Redis's ACTIVE_EXPIRE_CYCLE_KEYS_PER_LOOP) and
//! repeats while more than a quarter of the sample had expired, within a time budget (25 % of
//! the cycle period, as Redis's slow cycle). Shards busy with a command are skipped (try-lock):
//! expiry never makes a worker wait.

use super::Server;
use crate::engine::SHARDS;
use crate::exec::Effect;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

static CURSOR: AtomicUsize = AtomicUsize::new(0);

const KEYS_PER_LOOP: usize = 20;
/// Shards a worker visits per cycle at most. Visiting every shard each cycle (1024 per
/// database, a lock and a cold cache line each even when the shard has no TTLs) stalled the
/// worker ~100 µs ten times a second and showed in its p99 latency; in slices, a sweep of a
/// database takes 4 cycles per worker and a cycle costs tens of µs. Each visited shard still
/// samples 20 keys and repeats while more than a quarter had expired, as Redis does per DB.
const SHARDS_PER_CYCLE: usize = 256;

/// Runs one bounded expiry cycle. Returns the number of keys reclaimed.
pub fn cycle(srv: &Server, stats: &crate::exec::stats::Counters) -> usize {
    if !srv.active_expire.load(Ordering::Relaxed) {
        return 0;
    }
    let hz = srv.config.hot.hz.load(Ordering::Relaxed).max(1) as u64;
    let budget = Duration::from_micros(1_000_000 / hz / 4 / srv.threads.max(1) as u64);
    let start = Instant::now();
    let total = srv.ks.num_dbs() * SHARDS;
    let mut reclaimed = 0;
    // Visit at most every shard once per cycle, and at most SHARDS_PER_CYCLE of them.
    for _ in 0..total.min(SHARDS_PER_CYCLE) {
        if start.elapsed() > budget {
            break;
        }
        let i = CURSOR.fetch_add(1, Ordering::Relaxed) % total;
        let (db, shard) = (i / SHARDS, i % SHARDS);
        let Some(d) = srv.ks.db_if_exists(db) else {
            // Skip the rest of a database that was never created.
            CURSOR.fetch_add(SHARDS - shard - 1, Ordering::Relaxed);
            continue;
        };
        let Some(mut s) = d.shards[shard].try_lock() else { continue };
        if s.expires.is_empty() {
            continue;
        }
        loop {
            let now = srv.now_ms();
            let mut expired: Vec<Box<[u8]>> = Vec::new();
            let mut sampled = 0;
            let mut cursor = s.expire_cursor;
            while sampled < KEYS_PER_LOOP {
                cursor = s.expires.scan(cursor, |k, &t| {
                    sampled += 1;
                    if t <= now {
                        expired.push(k.into());
                    }
                });
                if cursor == 0 {
                    break;
                }
            }
            s.expire_cursor = cursor;
            for k in &expired {
                s.remove(k);
                s.touch_watched(k);
            }
            stats.expired_keys.fetch_add(expired.len() as u64, Ordering::Relaxed);
            reclaimed += expired.len();
            if srv.effects_enabled() && !expired.is_empty() {
                let effects: Vec<Effect> =
                    expired.iter().map(|k| Effect { db, argv: vec![b"DEL".to_vec(), k.to_vec()] }).collect();
                srv.publish_effects(&effects);
            }
            if expired.len() * 4 <= sampled || s.expires.is_empty() || start.elapsed() > budget {
                break;
            }
        }
    }
    reclaimed
}
