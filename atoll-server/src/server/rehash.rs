//! Active rehashing (`activerehashing yes`, Redis's default): a table that grew or shrank moves
//! to its new bucket array a few buckets per write; one that stops being written to would stay
//! half-moved — two arrays held, lookups probing both. As Redis's `databasesCron`, worker 0's
//! cron moves such tables along for up to 1 ms per tick, never while a snapshot is being
//! written (Redis does not rehash while a child process shares its pages; here the snapshot
//! would have to copy each shard first), and never making a command wait (busy shards are
//! skipped).

use super::Server;
use crate::engine::SHARDS;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

static CURSOR: AtomicUsize = AtomicUsize::new(0);

/// Shards looked at per tick, at most (one lock and a cold line each).
const SHARDS_PER_TICK: usize = 128;
/// Buckets moved between two looks at the clock (Redis's `dictRehashMilliseconds` step).
const STEP: usize = 100;
const BUDGET: Duration = Duration::from_millis(1);

/// One tick's rehashing. Returns the shards that were found mid-move.
pub fn tick(srv: &Server) -> usize {
    if !srv.config.flag(crate::config::p::ACTIVEREHASHING) || srv.ks.snapshots.running() {
        return 0;
    }
    let start = Instant::now();
    let total = srv.ks.num_dbs() * SHARDS;
    let mut found = 0;
    for _ in 0..SHARDS_PER_TICK.min(total) {
        if start.elapsed() > BUDGET {
            break;
        }
        let i = CURSOR.fetch_add(1, Ordering::Relaxed) % total;
        let (db, shard) = (i / SHARDS, i % SHARDS);
        let Some(d) = srv.ks.db_if_exists(db) else {
            // A database never written to: on to the next one.
            CURSOR.fetch_add(SHARDS - shard - 1, Ordering::Relaxed);
            continue;
        };
        let Some(mut s) = d.shards[shard].try_lock() else { continue };
        if !s.keys.is_rehashing() && !s.expires.is_rehashing() {
            continue;
        }
        found += 1;
        while start.elapsed() <= BUDGET && (s.keys.rehash(STEP) | s.expires.rehash(STEP)) {}
    }
    found
}
