//! `maxmemory` and its eviction policies (Redis's `evict.c`), across shards and workers.
//!
//! Before a command runs, a worker compares the allocator's count (`alloc::used_memory`, one
//! atomic load) with `maxmemory`; over it, the worker evicts keys itself, as Redis's
//! `performEvictions`, until the memory it frees covers the excess, nothing is left to evict
//! (then `-OOM` for commands that may grow memory) or its time budget runs out
//! (`maxmemory-eviction-tenacity`; the next command goes on).
//!
//! Choosing keys is Redis's approximation: sample `maxmemory-samples` keys, keep the best
//! candidates in a small pool (by idle time, LFU counter or TTL), evict the best. Samples come
//! from a random shard of each database, taken with `try_lock` and one at a time, so eviction
//! never waits for a lock, never holds two, and costs nothing per write: the only per-key state
//! is the 32-bit `lru` field every key already has (seconds of the LRU clock, or under an LFU
//! policy Redis's 16-bit minutes + 8-bit logarithmic counter).

use crate::config::Hot;
use crate::engine::SHARDS;
use crate::engine::{Keyspace, Obj};
use rand::Rng;
use std::cell::RefCell;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

/// What eviction needs from around it: the keyspace it evicts from, the settings, the
/// clients it may close, and the consequences of an evicted key (the call path's).
pub trait Host {
    fn keyspace(&self) -> &Keyspace;
    fn hot(&self) -> &Hot;
    /// Eviction's own state and figures.
    fn state(&self) -> &Evict;
    fn clients(&self) -> &super::clients::Registry;
    fn now_ms(&self) -> i64;
    fn lru_clock(&self, now_ms: i64) -> u32;
    /// What the replicas have not been sent yet (not counted for `maxmemory`).
    fn not_counted(&self) -> u64;
    /// CLIENT PAUSE holds writes back: nothing is evicted meanwhile.
    fn writes_paused(&self) -> bool;
    /// A replica with `replica-ignore-maxmemory`: its master evicts for it.
    fn replica_ignores_maxmemory(&self) -> bool;
    /// A client's CLIENT LIST line (logged when it is evicted).
    fn client_line(&self, c: &super::clients::ClientHandle, now_ms: i64) -> String;
    /// Frees an evicted key's value, now or (`lazy`) in the background.
    fn free_value(&self, obj: Obj, lazy: bool);
    /// `key` of `db` was evicted: notify, invalidate, propagate. `saved_epoch`: its shard's
    /// snapshot epoch.
    fn evicted(&self, db: usize, key: &[u8], lazy: bool, saved_epoch: u64);
}

/// `maxmemory-policy`, numbered as `config::MAXMEMORY_POLICIES` lists them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub enum Policy {
    NoEviction = 0,
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
    AllkeysLru,
    AllkeysLfu,
    AllkeysRandom,
}

impl Policy {
    pub fn from_u32(v: u32) -> Policy {
        [
            Policy::NoEviction,
            Policy::VolatileLru,
            Policy::VolatileLfu,
            Policy::VolatileRandom,
            Policy::VolatileTtl,
            Policy::AllkeysLru,
            Policy::AllkeysLfu,
            Policy::AllkeysRandom,
        ]
        .get(v as usize)
        .copied()
        .unwrap_or(Policy::NoEviction)
    }

    pub fn is_lfu(self) -> bool {
        matches!(self, Policy::VolatileLfu | Policy::AllkeysLfu)
    }

    fn volatile(self) -> bool {
        matches!(self, Policy::VolatileLru | Policy::VolatileLfu | Policy::VolatileRandom | Policy::VolatileTtl)
    }

    fn random(self) -> bool {
        matches!(self, Policy::VolatileRandom | Policy::AllkeysRandom)
    }
}

/// Eviction statistics (INFO).
#[derive(Default)]
pub struct Evict {
    pub evicted_keys: AtomicU64,
    /// When the memory went over the limit without the evictions catching up (unix ms; 0:
    /// not over), and the total time it was so (INFO `*_eviction_exceeded_time`).
    pub exceeded_since: AtomicI64,
    pub exceeded_total_ms: AtomicU64,
    /// The database the random policies visit next.
    next_db: AtomicUsize,
    /// Client eviction (`maxmemory-clients`): clients closed for it (INFO `evicted_clients`),
    /// and from the last scan of the clients (at most one a millisecond), when it was (unix ms),
    /// the memory of live clients, and of those closed but not freed yet (`maxmemory` does not
    /// count it: it is on its way out).
    pub evicted_clients: AtomicU64,
    scanned_ms: AtomicI64,
    clients_mem: AtomicU64,
    dying_mem: AtomicU64,
    /// A client's buffer grew by a big step since the last scan (`client_grew`): the next
    /// check scans again even within the same millisecond, so a client that sends a big
    /// request is weighed before the next command anywhere runs (as Redis's beforeSleep).
    clients_dirty: std::sync::atomic::AtomicBool,
}

impl Evict {
    /// A client's input buffer reached a size worth weighing at once (called only while
    /// `maxmemory-clients` is set, for buffers of 32 KB and more).
    pub fn client_grew(&self) {
        self.clients_dirty.store(true, Ordering::Relaxed);
    }
}

impl Evict {
    pub fn reset_stats(&self) {
        self.evicted_keys.store(0, Ordering::Relaxed);
        self.evicted_clients.store(0, Ordering::Relaxed);
        self.exceeded_total_ms.store(0, Ordering::Relaxed);
    }

    /// INFO `current_eviction_exceeded_time` and `total_eviction_exceeded_time`, in ms.
    pub fn exceeded_ms(&self, now_ms: i64) -> (u64, u64) {
        let since = self.exceeded_since.load(Ordering::Relaxed);
        let cur = if since > 0 { (now_ms - since).max(0) as u64 } else { 0 };
        (cur, self.exceeded_total_ms.load(Ordering::Relaxed) + cur)
    }

    fn exceeded(&self, over: bool, now_ms: i64) {
        let since = self.exceeded_since.load(Ordering::Relaxed);
        if over && since == 0 {
            self.exceeded_since.store(now_ms, Ordering::Relaxed);
        } else if !over && since != 0 {
            self.exceeded_since.store(0, Ordering::Relaxed);
            self.exceeded_total_ms.fetch_add((now_ms - since).max(0) as u64, Ordering::Relaxed);
        }
    }
}

// ---- LFU (Redis's `evict.c`: the same arithmetic, so OBJECT FREQ reads the same) ---------

/// The counter a new key starts with, so it is not evicted before it had a chance.
pub const LFU_INIT_VAL: u32 = 5;

/// Minutes on a 16-bit clock.
pub fn lfu_minutes(now_ms: i64) -> u32 {
    ((now_ms / 60_000) & 0xffff) as u32
}

/// The `lru` field of a new key under an LFU policy.
pub fn lfu_initial(now_ms: i64) -> u32 {
    (lfu_minutes(now_ms) << 8) | LFU_INIT_VAL
}

/// The key's counter after the decay its idle minutes earn (`LFUDecrAndReturn`).
pub fn lfu_decayed(lru: u32, now_ms: i64, decay_time: u32) -> u32 {
    let last = lru >> 8;
    let counter = lru & 0xff;
    let now = lfu_minutes(now_ms);
    let elapsed = if now >= last { now - last } else { 65535 - last + now };
    let periods = elapsed.checked_div(decay_time).unwrap_or(0);
    counter.saturating_sub(periods)
}

/// An access: decay, then a logarithmic increment (`updateLFU`).
pub fn lfu_touch(lru: u32, now_ms: i64, log_factor: u32, decay_time: u32) -> u32 {
    let mut counter = lfu_decayed(lru, now_ms, decay_time);
    if counter < 255 {
        let r: f64 = rand::thread_rng().gen();
        let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
        if r < 1.0 / (base * log_factor as f64 + 1.0) {
            counter += 1;
        }
    }
    (lfu_minutes(now_ms) << 8) | counter
}

// ---- eviction ------------------------------------------------------------------------------

/// What `perform` achieved (Redis's EVICT_OK / EVICT_RUNNING / EVICT_FAIL).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Outcome {
    /// Under the limit.
    Ok,
    /// The time budget ran out while freeing: the command goes on, later ones evict more.
    Running,
    /// Over the limit with nothing left that the policy may evict.
    Fail,
}

/// A pooled candidate: higher `score` is evicted first.
struct Candidate {
    score: u64,
    db: usize,
    key: Box<[u8]>,
}

/// Redis's EVPOOL_SIZE.
const POOL: usize = 16;

thread_local! {
    /// What this worker's evictions freed in its current round (see `perform`).
    static FREED: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
    /// The worker's eviction pool: candidates kept between rounds, so a few samples per round
    /// still find keys idle for long.
    static POOL_ENTRIES: RefCell<Vec<Candidate>> = const { RefCell::new(Vec::new()) };
    /// Per database: until when (unix ms) it counts as having nothing to evict, and the shard
    /// where keys were last found. Finding a database empty takes a sweep of its 1024 shards;
    /// without this every eviction would sweep every empty database again.
    static DB_HINTS: RefCell<Vec<(i64, usize)>> = const { RefCell::new(Vec::new()) };
}

/// A cheap generator for sampling (a key choice needs no cryptographic randomness), seeded
/// from the thread's generator.
fn fast_rng() -> rand::rngs::SmallRng {
    use rand::SeedableRng;
    thread_local! {
        static SEED: std::cell::Cell<u64> = std::cell::Cell::new(rand::random());
    }
    let seed = SEED.with(|s| {
        let v = s.get().wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        s.set(v);
        v
    });
    rand::rngs::SmallRng::seed_from_u64(seed)
}

/// How long a database found empty is skipped (ms).
const EMPTY_FOR_MS: i64 = 100;

/// `some_shard`, skipping databases recently found empty and starting where keys were found.
fn shard_of_db<'a, H: Host>(
    host: &'a H,
    db: usize,
    volatile: bool,
    now_ms: i64,
    rng: &mut impl Rng,
) -> Option<(usize, parking_lot::MutexGuard<'a, crate::engine::Shard>)> {
    let d = host.keyspace().db_if_exists(db)?;
    let (empty_until, last) = DB_HINTS.with(|h| h.borrow().get(db).copied().unwrap_or((0, 0)));
    if now_ms < empty_until {
        return None;
    }
    let found = some_shard(d, volatile, last, rng);
    DB_HINTS.with(|h| {
        let mut h = h.borrow_mut();
        if h.len() <= db {
            h.resize(db + 1, (0, 0));
        }
        h[db] = match &found {
            Some((i, _)) => (0, *i),
            None => (now_ms + EMPTY_FOR_MS, 0),
        };
    });
    found
}

/// Microseconds one call may spend evicting (Redis's `evictionTimeLimitUs`).
fn time_limit_us(tenacity: u32) -> u64 {
    if tenacity <= 10 {
        50 * tenacity as u64
    } else if tenacity < 100 {
        (500.0 * 1.15f64.powi(tenacity as i32 - 10)) as u64
    } else {
        u64::MAX
    }
}

/// INFO `mem_not_counted_for_evict`: as Redis, what the replicas have not been sent yet (the
/// replication buffer beyond the backlog): a slow replica's growing buffer must not make the
/// master evict keys, whose deletions would only grow it more. Also messages on their way to
/// clients of other workers (`clients::in_transit`), which Redis would have written to their
/// sockets before its next command. (Atoll has no AOF buffer
/// between commands; its receive rings are outside the allocator altogether.)
pub fn not_counted<H: Host>(host: &H) -> u64 {
    host.not_counted()
}

/// Memory `maxmemory` is compared with: the allocator's count, less, with client eviction, the
/// buffers of clients it closed that their workers have not freed yet (Redis frees them at
/// once), and — only once that is over the limit, so the common case reads no replica — what
/// is not counted for eviction.
pub fn used_for_limit<H: Host>(host: &H) -> u64 {
    let used = crate::alloc::used_memory().saturating_sub(host.state().dying_mem.load(Ordering::Relaxed));
    let limit = host.hot().maxmemory.load(Ordering::Relaxed);
    if limit != 0 && used > limit {
        used.saturating_sub(not_counted(host))
    } else {
        used
    }
}

/// `maxmemory-clients` in bytes (0: off).
pub fn clients_limit<H: Host>(host: &H) -> u64 {
    let hot = host.hot();
    match hot.maxmemory_clients.load(Ordering::Relaxed) {
        v if v >= 0 => v as u64,
        pct => hot.maxmemory.load(Ordering::Relaxed).saturating_mul(pct.unsigned_abs()) / 100,
    }
}

/// Client eviction (Redis's `evictClients`): while the clients together hold more than
/// `maxmemory-clients`, the one holding most is closed (clients with CLIENT NO-EVICT on are
/// spared). Clients are scanned at most once a millisecond; between scans the figure is kept.
pub fn evict_clients<H: Host>(host: &H) {
    let limit = clients_limit(host);
    if limit == 0 {
        return;
    }
    let now = host.now_ms();
    let e = host.state();
    let stale = e.scanned_ms.swap(now, Ordering::Relaxed) != now;
    if stale | e.clients_dirty.swap(false, Ordering::Relaxed) {
        let (mut live, mut dying) = (0u64, 0u64);
        host.clients().for_each(|h| {
            if h.killed.load(Ordering::Relaxed) {
                dying += h.memory();
            } else {
                live += h.memory();
            }
        });
        e.clients_mem.store(live, Ordering::Relaxed);
        e.dying_mem.store(dying, Ordering::Relaxed);
    }
    if e.clients_mem.load(Ordering::Relaxed) <= limit {
        return;
    }
    let mut candidates: Vec<(u64, std::sync::Arc<super::clients::ClientHandle>)> = Vec::new();
    host.clients().for_each(|h| {
        // Clients under 32 KB are never evicted (Redis's smallest memory bucket), nor are
        // replicas or the master's link (only normal and Pub/Sub clients are, in Redis).
        let mem = h.memory();
        if mem >= 32 << 10
            && !h.killed.load(Ordering::Relaxed)
            && !h.no_evict.load(Ordering::Relaxed)
            && !h.replica.load(Ordering::Relaxed)
            && !h.master.load(Ordering::Relaxed)
        {
            candidates.push((mem, h.clone()));
        }
    });
    candidates.sort_by_key(|c| std::cmp::Reverse(c.0));
    let mut total = e.clients_mem.load(Ordering::Relaxed);
    for (mem, h) in candidates {
        if total <= limit {
            break;
        }
        let line = host.client_line(&h, now);
        total = total.saturating_sub(mem);
        // Another worker scanning at the same moment may have closed it already.
        if h.kill() {
            crate::log_verbose!("Evicting client: {line}");
            e.dying_mem.fetch_add(mem, Ordering::Relaxed);
            e.evicted_clients.fetch_add(1, Ordering::Relaxed);
        }
    }
    e.clients_mem.store(total, Ordering::Relaxed);
}

/// Frees memory until it is under `maxmemory`, as the policy allows. Called before commands
/// while over the limit; takes shard locks only with `try_lock`, one at a time.
pub fn perform<H: Host>(host: &H) -> Outcome {
    let hot = host.hot();
    let limit = hot.maxmemory.load(Ordering::Relaxed);
    if limit == 0 {
        return Outcome::Ok;
    }
    let now_ms = host.now_ms();
    let mut used = used_for_limit(host);
    if used > limit && hot.maxmemory_clients.load(Ordering::Relaxed) != 0 {
        // Fat clients go before keys do (Redis's processCommand: evictClients, then
        // performEvictions): the memory over the limit may be theirs.
        evict_clients(host);
        used = used_for_limit(host);
    }
    if used <= limit {
        host.state().exceeded(false, now_ms);
        return Outcome::Ok;
    }
    let policy = Policy::from_u32(hot.maxmemory_policy.load(Ordering::Relaxed));
    // A replica ignores maxmemory (`replica-ignore-maxmemory`): its master evicts for it.
    if policy == Policy::NoEviction || host.writes_paused() || host.replica_ignores_maxmemory() {
        host.state().exceeded(true, now_ms);
        return Outcome::Fail;
    }
    let start = Instant::now();
    let budget = time_limit_us(hot.maxmemory_tenacity.load(Ordering::Relaxed));
    let lazy = hot.lazy_eviction.load(Ordering::Relaxed);
    // As Redis's performEvictions: the goal is the excess measured now, and what counts
    // toward it is what the deletions themselves free — not the invalidation messages,
    // notifications and propagated DELs they cause, which would otherwise drive eviction on
    // until the keyspace is empty (a feedback loop with tracking clients; Redis #8069).
    let to_free = (used - limit) as i64;
    FREED.with(|f| f.set(0));
    let mut evicted = 0u64;
    let mut misses = 0u32;
    let outcome = loop {
        if FREED.with(|f| f.get()) >= to_free {
            break Outcome::Ok;
        }
        let picked = if policy.random() { pick_random(host, policy) } else { pick_pooled(host, policy, now_ms) };
        match picked {
            Some(true) => {
                evicted += 1;
                misses = 0;
                // Values freed in the background do not show in the deletions' own count:
                // the memory itself says when enough is gone (as Redis checks every 16 keys).
                if evicted.is_multiple_of(16) && lazy && used_for_limit(host) <= limit {
                    break Outcome::Ok;
                }
                if evicted.is_multiple_of(16) && start.elapsed().as_micros() as u64 > budget {
                    break if used_for_limit(host) <= limit { Outcome::Ok } else { Outcome::Running };
                }
            }
            // A candidate's shard was busy: try again, a bounded number of times.
            Some(false) => {
                misses += 1;
                if misses > 1000 {
                    break Outcome::Running;
                }
            }
            None => break if used_for_limit(host) <= limit { Outcome::Ok } else { Outcome::Fail },
        }
    };
    host.state().exceeded(outcome != Outcome::Ok, now_ms);
    outcome
}

/// The score of a sampled key for a pooled policy (idle seconds, 255 − LFU counter, or how
/// soon it expires).
fn score<H: Host>(host: &H, policy: Policy, lru: u32, expire_at: Option<i64>, now_ms: i64) -> u64 {
    match policy {
        Policy::VolatileTtl => u64::MAX - expire_at.unwrap_or(i64::MAX).max(0) as u64,
        Policy::VolatileLfu | Policy::AllkeysLfu => {
            let decay = host.hot().lfu_decay_time.load(Ordering::Relaxed);
            255 - lfu_decayed(lru, now_ms, decay) as u64
        }
        _ => host.lru_clock(now_ms).saturating_sub(lru) as u64,
    }
}

/// A random shard of `db` with keys the policy may evict, locked (tries a few at random, then
/// sweeps from `last`, where keys were found before).
fn some_shard<'a>(
    d: &'a crate::engine::Db,
    volatile: bool,
    last: usize,
    rng: &mut impl Rng,
) -> Option<(usize, parking_lot::MutexGuard<'a, crate::engine::Shard>)> {
    let usable = |s: &crate::engine::Shard| if volatile { !s.expires.is_empty() } else { !s.keys.is_empty() };
    for _ in 0..8 {
        let i = rng.gen_range(0..SHARDS);
        if let Some(s) = d.shards[i].try_lock() {
            if usable(&s) {
                return Some((i, s));
            }
        }
    }
    // Few shards hold keys: sweep from where keys were found last time.
    let from = last % SHARDS;
    for j in 0..SHARDS {
        let i = (from + j) % SHARDS;
        if volatile && d.next_volatile(i) != Some(i) {
            continue;
        }
        if let Some(s) = d.shards[i].try_lock() {
            if usable(&s) {
                return Some((i, s));
            }
        }
    }
    None
}

/// Samples every database into the pool, then evicts its best candidate. None: nothing to
/// evict; Some(false): the candidate could not be evicted now.
fn pick_pooled<H: Host>(host: &H, policy: Policy, now_ms: i64) -> Option<bool> {
    let samples = host.hot().maxmemory_samples.load(Ordering::Relaxed).max(1);
    let volatile = policy.volatile();
    let mut rng = fast_rng();
    POOL_ENTRIES.with(|pool| {
        let mut pool = pool.borrow_mut();
        for db in 0..host.keyspace().num_dbs() {
            let Some((_, s)) = shard_of_db(host, db, volatile, now_ms, &mut rng) else { continue };
            // Redis's dictGetSomeKeys: keys near a random place of the shard's table.
            let mut offer = |key: &[u8], lru: u32, expire_at: Option<i64>| {
                let sc = score(host, policy, lru, expire_at, now_ms);
                if pool.iter().any(|c| c.db == db && *c.key == *key) {
                    return;
                }
                if pool.len() < POOL {
                    pool.push(Candidate { score: sc, db, key: key.into() });
                } else if let Some((i, worst)) = pool.iter().enumerate().min_by_key(|(_, c)| c.score) {
                    if sc > worst.score {
                        pool[i] = Candidate { score: sc, db, key: key.into() };
                    }
                }
            };
            if volatile {
                s.expires.sample(&mut rng, samples, |key, &at| {
                    if let Some(lru) = s.keys.get(key).map(|e| e.lru()) {
                        offer(key, lru, Some(at));
                    }
                });
            } else {
                s.keys.sample(&mut rng, samples, |key, lru| offer(key, lru, None));
            }
        }
        // The best candidate; one that no longer exists is dropped and the next tried.
        while !pool.is_empty() {
            let best = pool.iter().enumerate().max_by_key(|(_, c)| c.score).map(|(i, _)| i)?;
            let c = pool.swap_remove(best);
            match evict_key(host, c.db, &c.key, volatile) {
                Some(done) => return Some(done),
                None => continue,
            }
        }
        None
    })
}

/// A random key of the next database that has one.
fn pick_random<H: Host>(host: &H, policy: Policy) -> Option<bool> {
    let volatile = policy.volatile();
    let mut rng = fast_rng();
    let n = host.keyspace().num_dbs();
    for _ in 0..n {
        let db = host.state().next_db.fetch_add(1, Ordering::Relaxed) % n;
        let Some((shard, mut s)) = shard_of_db(host, db, volatile, host.now_ms(), &mut rng) else { continue };
        let key: Option<Box<[u8]>> = if volatile {
            s.expires.random(&mut rng).map(|(k, _)| k.into())
        } else {
            s.keys.random(&mut rng).map(Into::into)
        };
        let Some(key) = key else { continue };
        delete(host, db, shard, &mut s, &key);
        return Some(true);
    }
    None
}

/// Evicts one pooled key if it still exists (and still has a TTL for a volatile policy). None:
/// it is gone; Some(false): its shard is busy.
fn evict_key<H: Host>(host: &H, db: usize, key: &[u8], volatile: bool) -> Option<bool> {
    let d = host.keyspace().db_if_exists(db)?;
    let shard = crate::engine::key_shard(key);
    let Some(mut s) = d.shards[shard].try_lock() else { return Some(false) };
    if s.keys.get(key).is_none() || (volatile && s.expires.get(key).is_none()) {
        return None;
    }
    delete(host, db, shard, &mut s, key);
    Some(true)
}

/// Deletes an evicted key as Redis does: WATCH dirtied here, then the host's consequences
/// (freed lazily with `lazyfree-lazy-eviction`, the `evicted` notification, invalidation for
/// tracking clients, DEL or UNLINK in the effects).
fn delete<H: Host>(host: &H, db: usize, shard: usize, s: &mut crate::engine::Shard, key: &[u8]) {
    host.keyspace().snapshots.before_use(db, shard, s);
    let lazy = host.hot().lazy_eviction.load(Ordering::Relaxed);
    let before = crate::alloc::used_memory() as i64;
    let Some(obj) = s.remove(key) else { return };
    host.free_value(obj, lazy);
    FREED.with(|f| f.set(f.get() + before - crate::alloc::used_memory() as i64));
    s.touch_watched(key);
    host.evicted(db, key, lazy, s.saved_epoch);
    host.state().evicted_keys.fetch_add(1, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lfu_counter_decays_by_idle_minutes_and_grows_logarithmically() {
        let t0 = 1_000 * 60_000;
        let v = lfu_initial(t0);
        assert_eq!(v & 0xff, LFU_INIT_VAL);
        assert_eq!(lfu_decayed(v, t0 + 3 * 60_000, 1), LFU_INIT_VAL - 3);
        assert_eq!(lfu_decayed(v, t0 + 3 * 60_000, 2), LFU_INIT_VAL - 1);
        assert_eq!(lfu_decayed(v, t0 + 60 * 60_000, 1), 0);
        assert_eq!(lfu_decayed(v, t0 + 60 * 60_000, 0), LFU_INIT_VAL);
        // With log factor 0 every access counts, up to 255.
        let mut x = v;
        for _ in 0..300 {
            x = lfu_touch(x, t0, 0, 1);
        }
        assert_eq!(x & 0xff, 255);
        // With the default factor, 1000 accesses land far below 255 (Redis's table: ~18).
        let mut y = v;
        for _ in 0..1000 {
            y = lfu_touch(y, t0, 10, 1);
        }
        assert!((10..40).contains(&(y & 0xff)), "{}", y & 0xff);
    }

    #[test]
    fn tenacity_budgets_match_redis() {
        assert_eq!(time_limit_us(0), 0);
        assert_eq!(time_limit_us(10), 500);
        assert_eq!(time_limit_us(11), 575);
        assert_eq!(time_limit_us(100), u64::MAX);
    }
}
