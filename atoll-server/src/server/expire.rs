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
/// Volatile shards (those that may hold keys with a TTL; see `Db::mark_volatile`) a worker
/// visits per cycle at most. Visiting shards costs a lock and a cold cache line each, so a
/// cycle takes a slice (tens of µs) rather than stall its worker; each visited shard samples
/// 20 keys and repeats while more than a quarter had expired, as Redis does per DB.
const SHARDS_PER_CYCLE: usize = 256;

/// Runs one bounded expiry cycle. Returns the number of keys reclaimed.
pub fn cycle(srv: &Server, stats: &crate::services::stats::Counters) -> usize {
    // CLIENT PAUSE holds expiry's deletions back too, as Redis does.
    if !srv.active_expire.load(Ordering::Relaxed) || srv.writes_paused() {
        return 0;
    }
    // A replica leaves expiry to its master's DELs, but for keys its own clients wrote.
    if srv.repl.upstream.following() {
        return replica_cycle(srv, stats);
    }
    let hz = srv.config.hot.effective_hz.load(Ordering::Relaxed).max(1) as u64;
    let budget = Duration::from_micros(1_000_000 / hz / 4 / srv.threads.max(1) as u64);
    let start = Instant::now();
    let ndbs = srv.ks.num_dbs();
    let total = ndbs * SHARDS;
    let mut reclaimed = 0;
    let mut visited = 0;
    let mut total_sampled = 0;
    // The shared cursor walks (db, shard) positions; positions of shards without TTLs are
    // skipped a 64-shard word at a time. At most one lap per cycle.
    let mut steps = 0;
    while visited < SHARDS_PER_CYCLE && steps < total && start.elapsed() <= budget {
        let i = CURSOR.load(Ordering::Relaxed) % total;
        let (db, from) = (i / SHARDS, i % SHARDS);
        let next = srv.ks.db_if_exists(db).and_then(|d| d.next_volatile(from).map(|s| (d, s)));
        let Some((d, shard)) = next else {
            // Nothing (more) to expire in this database: on to the next one.
            let skip = SHARDS - from;
            CURSOR.fetch_add(skip, Ordering::Relaxed);
            steps += skip;
            continue;
        };
        CURSOR.fetch_add(shard - from + 1, Ordering::Relaxed);
        steps += shard - from + 1;
        visited += 1;
        let Some(mut s) = d.shards[shard].try_lock() else { continue };
        srv.ks.snapshots.before_use(db, shard, &mut s);
        if s.expires.is_empty() && s.field_ttls.is_none() {
            d.clear_volatile(shard);
            continue;
        }
        if s.field_ttls.is_some() {
            expire_fields(srv, stats, db, &mut s, start, budget);
        }
        while !s.expires.is_empty() {
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
            total_sampled += sampled;
            for k in &expired {
                s.remove(k);
                s.touch_watched(k);
                crate::services::notify::raise(&srv.reach(), crate::services::notify::EXPIRED, "expired", db, k);
            }
            if srv.tracking.on() && !expired.is_empty() {
                let touched: Vec<crate::services::tracking::Touched> =
                    expired.iter().map(|k| (k.clone(), true)).collect();
                srv.tracking.modified(&srv.reach(), &touched, 0, None);
            }
            stats.expired_keys.fetch_add(expired.len() as u64, Ordering::Relaxed);
            reclaimed += expired.len();
            if srv.effects_enabled() && !expired.is_empty() {
                let effects: Vec<Effect> =
                    expired.iter().map(|k| Effect::new(db, vec![b"DEL".to_vec(), k.to_vec()])).collect();
                srv.publish_effects(&effects, srv.ks.snapshots.seen(s.saved_epoch));
            }
            if expired.len() * 4 <= sampled || s.expires.is_empty() || start.elapsed() > budget {
                break;
            }
        }
    }
    let took = start.elapsed();
    if took > budget {
        stats.expire_cycle_capped.fetch_add(1, Ordering::Relaxed);
    }
    // The latency monitor's `expire-cycle` event, as Redis records it (a cycle that freed a
    // big value, for one).
    let ms = took.as_millis() as u64;
    let threshold = srv.config.hot.latency_monitor_ms.load(Ordering::Relaxed);
    if threshold > 0 && ms >= threshold {
        srv.latency.add("expire-cycle", srv.now_ms() / 1000, ms);
    }
    srv.stats.note_expiry_sample(total_sampled, reclaimed);
    reclaimed
}

/// A replica's expiry cycle (Redis's `expireSlaveKeys`): keys a client of a writable replica
/// gave a TTL (`Keyspace::replica_ttls`) are picked at random and deleted once due. The DEL goes
/// to the AOF only: a replica's own writes never reach replicas of it. Stops after more than
/// three keys not yet due, or after a millisecond, as Redis's does.
fn replica_cycle(srv: &Server, stats: &crate::services::stats::Counters) -> usize {
    let start = Instant::now();
    let mut rng = rand::thread_rng();
    let (mut reclaimed, mut not_due, mut picks) = (0, 0, 0u32);
    // The pick is copied out: the table's lock ranks after the shards'. A table in use (another
    // worker's cycle) is left to it.
    let pick = |rng: &mut rand::rngs::ThreadRng| {
        let t = srv.ks.replica_ttls.try_lock()?;
        t.random(rng).map(|(k, &bits)| (Box::<[u8]>::from(k), bits))
    };
    // Clears `db`'s bit for `key` (called with the key's shard in that database locked, so a
    // TTL set there meanwhile, which sets the bit under the same lock, is never lost).
    let forget = |key: &[u8], db: usize| {
        let mut t = srv.ks.replica_ttls.lock();
        if let Some(bits) = t.get_mut(key) {
            *bits &= !(1u64 << db);
            if *bits == 0 {
                drop(t.remove(key));
            }
        }
    };
    while let Some((key, dbs)) = pick(&mut rng) {
        for db in (0..srv.ks.num_dbs().min(64)).filter(|db| dbs & (1 << db) != 0) {
            let Some(d) = srv.ks.db_if_exists(db) else {
                forget(&key, db);
                continue;
            };
            let shard = crate::engine::key_shard(&key);
            // A shard busy with a command keeps its key for a later pick.
            let Some(mut s) = d.shards[shard].try_lock() else { continue };
            let Some(&when) = s.expires.get(&key) else {
                forget(&key, db);
                continue;
            };
            if when > srv.now_ms() {
                not_due += 1;
                continue;
            }
            srv.ks.snapshots.before_use(db, shard, &mut s);
            s.remove(&key);
            s.touch_watched(&key);
            forget(&key, db);
            crate::services::notify::raise(&srv.reach(), crate::services::notify::EXPIRED, "expired", db, &key);
            if srv.tracking.on() {
                srv.tracking.modified(&srv.reach(), &[(key.clone(), true)], 0, None);
            }
            stats.expired_keys.fetch_add(1, Ordering::Relaxed);
            reclaimed += 1;
            if srv.effects_enabled() {
                let mut del = Effect::new(db, vec![b"DEL".to_vec(), key.to_vec()]);
                del.to = crate::services::effects::Propagate::Aof;
                srv.publish_effects(&[del], srv.ks.snapshots.seen(s.saved_epoch));
            }
        }
        if srv.ks.replica_ttls.lock().is_empty() {
            break;
        }
        picks += 1;
        if not_due > 3 || (picks % 64 == 0 && start.elapsed() > Duration::from_millis(1)) {
            break;
        }
    }
    reclaimed
}

/// Hash fields removed from one hash per loop at most: a hash of a million due fields is
/// emptied over several cycles rather than in one stall.
const FIELDS_PER_KEY: usize = 1000;

/// Active field expiry for one shard (Valkey 9's hash-field expiry): samples up to 20 keys of
/// the shard's field-deadline index per loop, removes their due fields (HDEL to replicas and
/// the AOF, `hexpired`, `del` with the last field) and repeats while some were due, within the
/// cycle's time budget. Stale index entries (the key deleted, overwritten or persisted) are
/// dropped as met. Returns the fields removed.
fn expire_fields(
    srv: &Server,
    stats: &crate::services::stats::Counters,
    db: usize,
    s: &mut crate::engine::Shard,
    start: Instant,
    budget: Duration,
) -> usize {
    use crate::engine::Value;
    use crate::services::notify;
    let mut removed = 0;
    loop {
        let now = srv.now_ms();
        let Some(idx) = s.field_ttls.as_deref() else { break };
        let mut stale: Vec<Box<[u8]>> = Vec::new();
        let mut due: Vec<Box<[u8]>> = Vec::new();
        let mut sampled = 0;
        let mut cursor = s.field_cursor;
        while sampled < KEYS_PER_LOOP {
            cursor = idx.scan(cursor, |k, _| {
                sampled += 1;
                match s.keys.get(k).as_deref() {
                    Some(Value::Hash(h)) if h.has_ttls() => {
                        if h.has_due(now) {
                            due.push(k.into());
                        }
                    }
                    _ => stale.push(k.into()),
                }
            });
            if cursor == 0 {
                break;
            }
        }
        s.field_cursor = cursor;
        if let Some(idx) = s.field_ttls.as_deref_mut() {
            for k in &stale {
                idx.remove(k);
            }
            if idx.is_empty() {
                s.field_ttls = None;
            }
        }
        let mut effects = Vec::new();
        let mut touched = Vec::new();
        let mut more = false;
        for k in &due {
            let Some(mut o) = s.keys.get_mut(k) else { continue };
            let Value::Hash(h) = o.val_mut() else { continue };
            let gone = h.remove_due(now, FIELDS_PER_KEY);
            more |= h.has_due(now);
            let empty = h.is_empty();
            if empty {
                s.remove(k);
            }
            s.touch_watched(k);
            removed += gone.len();
            stats.expired_fields.fetch_add(gone.len() as u64, Ordering::Relaxed);
            let reach = srv.reach();
            notify::raise(&reach, notify::HASH, "hexpired", db, k);
            if empty {
                notify::raise(&reach, notify::GENERIC, "del", db, k);
            }
            touched.push((k.clone(), false));
            if srv.effects_enabled() {
                let mut argv = Vec::with_capacity(gone.len() + 2);
                argv.push(b"HDEL".to_vec());
                argv.push(k.to_vec());
                argv.extend(gone.into_iter().map(|f| f.into_vec()));
                effects.push(Effect::new(db, argv));
            }
        }
        if srv.tracking.on() && !touched.is_empty() {
            srv.tracking.modified(&srv.reach(), &touched, 0, None);
        }
        if !effects.is_empty() {
            srv.publish_effects(&effects, srv.ks.snapshots.seen(s.saved_epoch));
        }
        // Again while a loop found due fields (a quarter of the sample, or a hash with more
        // than one batch), as the key cycle repeats.
        let busy = more || due.len() * 4 > sampled;
        if !busy || s.field_ttls.is_none() || start.elapsed() > budget {
            break;
        }
    }
    removed
}
