//! The keyspace: databases × shards, each shard behind its own lock (DESIGN §1).
//!
//! A command locks the shards it needs in ascending `(db, shard)` order through [`Locks`], so
//! multi-key commands, MULTI/EXEC and whole-database commands are atomic with respect to each
//! other and can never deadlock. Whole-keyspace readers (KEYS, SCAN, DBSIZE …) walk shards one
//! at a time instead.
//!
//! The storage layer also holds the values the keyspace stores — one module per data type with
//! its API and encodings (`list`, `hash`, `set`, `zset`, `stream`) and the compact structures
//! they share (`packed`, `skiplist`, `dict`) — because `Value` must name them all. Their
//! commands are one layer up, in `types`. See docs/ARCHITECTURE.md.

pub mod dict;
pub mod footprint;
pub mod glob;
pub mod hash;
pub mod keytable;
pub mod ldouble;
pub mod list;
pub mod packed;
pub mod rdb;
pub mod set;
pub mod skiplist;
pub mod slot;
pub mod stream;
pub mod value;
pub mod zset;

use crate::lockorder::{self, Rank};
use dict::Dict;
use keytable::KeyTable;
use parking_lot::{Mutex, MutexGuard};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
pub use value::{Aggregate, Obj, Value};

pub use slot::{key_shard, SHARDS};

/// A client's WATCH state: set when any watched key is touched.
#[derive(Debug, Default)]
pub struct WatchFlag {
    pub dirty: AtomicBool,
}

/// Watched key → the flags of the clients watching it.
pub type WatchRegistry = HashMap<Box<[u8]>, Vec<Arc<WatchFlag>>>;

#[derive(Default)]
pub struct Shard {
    pub keys: KeyTable,
    /// Absolute expiry times in Unix milliseconds, for keys that have one. Kept apart from
    /// `keys` (as Redis does) so active expiry samples only keys that can expire.
    pub expires: Dict<i64>,
    /// WATCH registry for keys of this shard: key → the flags of the clients watching it.
    /// Boxed and lazily created: most shards are never watched.
    pub watched: Option<Box<WatchRegistry>>,
    /// Active expiry's scan cursor over `expires`.
    pub expire_cursor: u64,
    /// Keys whose hash may have fields with deadlines (HEXPIRE …), for active field expiry
    /// and the lookup that reclaims due fields. Added to whenever a hash gains a deadline or
    /// arrives with some; an entry whose key no longer holds such a hash is dropped by the next
    /// expiry cycle that meets it. None while the shard never had one: the only cost to every
    /// lookup is that test.
    pub field_ttls: Option<Box<Dict<()>>>,
    /// Active field expiry's scan cursor over `field_ttls`.
    pub field_cursor: u64,
    /// Clients blocked on keys of this shard, oldest first (see `exec::blocking`).
    pub blocked: Option<Box<BlockedRegistry>>,
    /// The last snapshot epoch this shard was serialized in (see [`Snapshots`]).
    pub saved_epoch: u64,
    /// Big values the running snapshot writes piece by piece, releasing this lock between
    /// pieces (see [`Snapshots`]); None almost always.
    pub deferred: Option<Box<Deferred>>,
}

/// The keys of a shard whose values a running snapshot is still writing, each with the
/// snapshot sink's state for it (opaque here). Whoever is about to use one of these keys
/// first finishes writing it ([`Snapshots::finish`]), so the snapshot still holds the value
/// as it was at its instant.
#[derive(Default)]
pub struct Deferred {
    pub keys: Vec<(Box<[u8]>, DeferredState)>,
}

/// A snapshot sink's state for one deferred value.
pub type DeferredState = Box<dyn std::any::Any + Send>;

/// Key → clients blocked on it, oldest first.
///
/// The waiters are the execution layer's (`exec::blocking::Waiter`): the keyspace only keeps
/// them in order under the shard lock, through the little it needs to know of them
/// ([`Blocked`]), and names nothing above it.
pub type BlockedRegistry = HashMap<Box<[u8]>, std::collections::VecDeque<Arc<dyn Blocked>>>;

/// What the keyspace and its readers (INFO) know of a blocked client. `Any` lets the layer that
/// made it get its own type back.
pub trait Blocked: std::any::Any + Send + Sync {
    /// The command it blocked in (`blpop`, `xreadgroup` …).
    fn command(&self) -> &[u8];
}

impl Shard {
    /// Marks every client watching `key` dirty (a write, an expiry or a flush touched it).
    #[inline]
    pub fn touch_watched(&self, key: &[u8]) {
        if let Some(w) = &self.watched {
            if let Some(list) = w.get(key) {
                for f in list {
                    f.dirty.store(true, Ordering::Release);
                }
            }
        }
    }

    /// Marks dirty the watchers of keys for which `pred` holds (FLUSHDB / SWAPDB).
    pub fn touch_watched_where(&self, mut pred: impl FnMut(&[u8]) -> bool) {
        if let Some(w) = &self.watched {
            for (k, list) in w.iter() {
                if pred(k) {
                    for f in list {
                        f.dirty.store(true, Ordering::Release);
                    }
                }
            }
        }
    }

    pub fn watch(&mut self, key: &[u8], flag: &Arc<WatchFlag>) {
        let w = self.watched.get_or_insert_with(Default::default);
        let list = w.entry(key.into()).or_default();
        if !list.iter().any(|f| Arc::ptr_eq(f, flag)) {
            list.push(flag.clone());
        }
    }

    pub fn unwatch(&mut self, key: &[u8], flag: &Arc<WatchFlag>) {
        if let Some(w) = &mut self.watched {
            if let Some(list) = w.get_mut(key) {
                list.retain(|f| !Arc::ptr_eq(f, flag));
                if list.is_empty() {
                    w.remove(key);
                }
            }
            if w.is_empty() {
                self.watched = None;
            }
        }
    }

    /// The key's expiry time, if it has one.
    #[inline]
    pub fn expire_of(&self, key: &[u8]) -> Option<i64> {
        if self.expires.is_empty() {
            None
        } else {
            self.expires.get(key).copied()
        }
    }

    /// `is_expired` for a key whose `dict::hash_key` the caller has. A shard with no TTLs (the
    /// common case) answers with one test.
    #[inline]
    pub fn expired_hashed(&self, key: &[u8], hash: u64, now: i64) -> bool {
        !self.expires.is_empty() && matches!(self.expires.get_hashed(key, hash), Some(&t) if t <= now)
    }

    /// True if the key exists but its time has passed.
    #[inline]
    pub fn is_expired(&self, key: &[u8], now: i64) -> bool {
        matches!(self.expire_of(key), Some(t) if t <= now)
    }

    /// Empties the shard — keys and TTLs — marking the watchers of its keys dirty (a dataset
    /// replaced by DEBUG RELOAD or DEBUG LOADAOF).
    pub fn empty(&mut self) {
        if self.keys.is_empty() {
            return;
        }
        let keys = &self.keys;
        self.touch_watched_where(|k| keys.contains_key(k));
        self.keys.clear();
        self.expires.clear();
        self.field_ttls = None;
    }

    /// Notes that `key` holds a hash with field deadlines (call `Db::mark_volatile` too).
    pub fn note_field_ttls(&mut self, key: &[u8]) {
        let idx = self.field_ttls.get_or_insert_with(Default::default);
        if !idx.contains_key(key) {
            idx.insert_new_slice(key, ());
        }
    }

    /// True if the value at `key` is a hash with a field due at `now`. A shard that never held
    /// field deadlines answers with one test.
    #[inline]
    pub fn fields_due(&self, key: &[u8], now: i64) -> bool {
        self.field_ttls.is_some() && self.keys.get(key).is_some_and(|o| matches!(&*o, Value::Hash(h) if h.has_due(now)))
    }

    /// Removes a key and its expiry; returns its value.
    pub fn remove(&mut self, key: &[u8]) -> Option<Obj> {
        let obj = self.keys.remove(key)?;
        if !self.expires.is_empty() {
            self.expires.remove(key);
        }
        Some(obj)
    }
}

/// One database: a fixed array of shards.
pub struct Db {
    pub shards: Box<[Mutex<Shard>]>,
    /// Shards that may hold keys with a TTL, a bit each, so active expiry visits only those
    /// (visiting all 1024 shards of 16 databases took seconds per sweep). A bit is set when a
    /// key gets a TTL and cleared by the expiry cycle when it finds the shard has none left,
    /// both under that shard's lock, so a set bit is never lost.
    volatile: Box<[AtomicU64]>,
}

impl Db {
    /// A new database: empty at the instant of any snapshot already running, so its shards
    /// count as serialized in `epoch`.
    fn new(epoch: u64) -> Db {
        Db {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard { saved_epoch: epoch, ..Shard::default() })).collect(),
            volatile: (0..SHARDS.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Notes that `shard` holds a key with a TTL (call with its lock held).
    #[inline]
    pub fn mark_volatile(&self, shard: usize) {
        let (w, bit) = (&self.volatile[shard / 64], 1u64 << (shard % 64));
        if w.load(Ordering::Relaxed) & bit == 0 {
            w.fetch_or(bit, Ordering::Relaxed);
        }
    }

    /// Notes that `shard` holds no key with a TTL any more (call with its lock held).
    pub fn clear_volatile(&self, shard: usize) {
        self.volatile[shard / 64].fetch_and(!(1u64 << (shard % 64)), Ordering::Relaxed);
    }

    /// The first shard at or after `from` that may hold keys with a TTL.
    pub fn next_volatile(&self, from: usize) -> Option<usize> {
        let mut i = from;
        while i < SHARDS {
            let w = self.volatile[i / 64].load(Ordering::Relaxed) >> (i % 64);
            if w != 0 {
                return Some(i + w.trailing_zeros() as usize);
            }
            i = (i / 64 + 1) * 64;
        }
        None
    }
}

pub struct Keyspace {
    dbs: Box<[OnceLock<Db>]>,
    pub snapshots: Snapshots,
    /// The script gate: held by a running script (or a transaction holding one) for its whole
    /// run, taken before any shard lock. Its holder is the only thread allowed to lock shards
    /// in any order and to wait for a shard while holding others ([`Locks::add`]): everyone
    /// else acquires in ascending order and never waits while holding (see
    /// [`Locks::acquire`]), so no cycle of waits can form. A snapshot begins only outside it, so
    /// a script is wholly before or wholly after a snapshot's instant. Reentrant: EXEC takes
    /// it for a queued EVAL, which takes it again.
    pub script_gate: parking_lot::ReentrantMutex<()>,
    /// Bookkeeping changes put off because the shard was taken while this thread served other
    /// clients during a busy script ([`Keyspace::change_shard`]), and whether there are any.
    later: lockorder::Mutex<Vec<Later>, { lockorder::rank::LEAF }>,
    later_pending: AtomicBool,
    /// Keys a client of a writable replica (`replica-read-only no`) gave a TTL, each with a bit
    /// per database (0 to 63) it may be in. A replica leaves expiry to its master's DELs, but
    /// no master will ever delete these: the replica's expiry cycle reclaims them (Redis's
    /// `slaveKeysWithExpire`, shown as INFO's `slave_expires_tracked_keys`).
    pub replica_ttls: lockorder::Mutex<Dict<u64>, { lockorder::rank::LEAF }>,
}

/// A change to one shard, run once the shard can be waited for.
type Later = (usize, usize, Box<dyn FnOnce(&mut Shard) + Send>);

thread_local! {
    /// Set while this thread serves other connections from inside a running script (the busy
    /// poll): the script holds shards this thread must then not wait for.
    static SERVING_WHILE_BUSY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks the start (`true`) and end of the busy poll on this thread (see `SERVING_WHILE_BUSY`).
pub fn serving_while_busy(on: bool) -> bool {
    SERVING_WHILE_BUSY.replace(on)
}

/// This thread is serving its other connections from inside a busy script's hook.
pub fn is_serving_while_busy() -> bool {
    SERVING_WHILE_BUSY.get()
}

/// A held script gate ([`Keyspace::enter_script_gate`]).
pub struct ScriptGate<'a>(#[allow(dead_code)] parking_lot::ReentrantMutexGuard<'a, ()>);

impl Drop for ScriptGate<'_> {
    fn drop(&mut self) {
        lockorder::released(Rank::ScriptGate, 1);
    }
}

/// Where a point-in-time snapshot sends each shard's contents (`persist` implements it).
pub trait SnapshotSink: Send + Sync {
    /// Serializes one shard as it is now. Called with the shard's lock held, exactly once per
    /// shard and snapshot, by whichever thread locks the shard first after the snapshot began:
    /// `by_writer` when that is a command about to change it (copy-before-write), not the
    /// snapshot's own walk.
    fn shard(&self, db: usize, idx: usize, shard: &mut Shard, by_writer: bool);

    /// Writes the rest of the deferred values of `shard` (locked) — all of them, or only
    /// `key`'s — before someone uses them.
    fn finish(&self, _db: usize, _idx: usize, _shard: &mut Shard, _key: Option<&[u8]>) {}
}

/// Fork-less point-in-time snapshots by shard-granular copy-before-write (DESIGN §1). A
/// snapshot is the state at the instant [`Snapshots::begin`] runs. From then on, whoever locks
/// a shard first — the snapshot's own walk, or a command about to change it — serializes it
/// before anything else happens under that lock, and stamps it with the snapshot's epoch so
/// it is serialized once. A command checks after taking all its locks, so its shards are
/// either all serialized before its writes or all after them (a shard serialized earlier was
/// reached through its lock, which the command then saw the snapshot through). Extra memory
/// is the serialized shards not yet written out, not a copy of the dataset.
#[derive(Default)]
pub struct Snapshots {
    active: AtomicBool,
    epoch: AtomicU64,
    sink: lockorder::RwLock<Option<Arc<dyn SnapshotSink>>, { lockorder::rank::SNAPSHOT_SINK }>,
}

impl Snapshots {
    /// Starts a snapshot; None if one is already running. Returns its epoch.
    pub fn begin(&self, sink: Arc<dyn SnapshotSink>) -> Option<u64> {
        let mut g = self.sink.write();
        if g.is_some() {
            return None;
        }
        *g = Some(sink);
        // Active before the new epoch: a command locking in between finds nothing to do (its
        // shard is not behind the old epoch) and the walk serializes its writes, as it would
        // for a command that locked before (see `seen`).
        self.active.store(true, Ordering::SeqCst);
        let e = self.epoch.fetch_add(1, Ordering::SeqCst) + 1;
        Some(e)
    }

    /// Ends the snapshot (after every shard was visited).
    pub fn end(&self) {
        self.active.store(false, Ordering::SeqCst);
        *self.sink.write() = None;
    }

    #[inline]
    pub fn running(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// The epoch the writes of a command holding a shard whose `saved_epoch` is `saved` come
    /// after. Normally `saved` itself: a running snapshot of epoch E holds the writes exactly
    /// when it is below E (the shard will be serialized after them). A shard of a database
    /// created while a snapshot ran may have been stamped with the epoch before (read just as
    /// the snapshot began) and missed by the walk; found so with no snapshot running, it was
    /// empty at the last snapshot's instant, so its writes come after that.
    pub fn seen(&self, saved: u64) -> u64 {
        let e = self.epoch.load(Ordering::SeqCst);
        if saved < e && !self.active.load(Ordering::SeqCst) {
            e
        } else {
            saved
        }
    }

    /// Copy-before-write: call with `shard` locked, before changing it. One relaxed load when
    /// no snapshot runs. Big values still being written are finished first, all of them: the
    /// caller may touch any key.
    #[inline]
    pub fn before_use(&self, db: usize, idx: usize, shard: &mut Shard) {
        if self.active.load(Ordering::Acquire) {
            self.serialize(db, idx, shard, true);
            if shard.deferred.is_some() {
                self.finish(db, idx, shard, None);
            }
        }
    }

    /// Finishes writing the deferred values of `shard` (locked): all, or only `key`'s.
    #[cold]
    pub fn finish(&self, db: usize, idx: usize, shard: &mut Shard, key: Option<&[u8]>) {
        if shard.deferred.is_none() {
            return;
        }
        if let Some(sink) = self.sink.read().clone() {
            sink.finish(db, idx, shard, key);
        }
    }

    /// The snapshot's own walk reaching a shard (locked): serializes it unless a writer did.
    pub fn visit(&self, db: usize, idx: usize, shard: &mut Shard) {
        self.serialize(db, idx, shard, false);
    }

    #[cold]
    fn serialize(&self, db: usize, idx: usize, shard: &mut Shard, by_writer: bool) {
        if !self.active.load(Ordering::Acquire) {
            return;
        }
        let e = self.epoch.load(Ordering::Acquire);
        if shard.saved_epoch >= e {
            return;
        }
        if let Some(sink) = self.sink.read().clone() {
            sink.shard(db, idx, shard, by_writer);
        }
        shard.saved_epoch = e;
    }
}

/// Where a key will be looked up, for `Keyspace::prefetch_spots`.
#[derive(Clone, Copy)]
pub struct Spot<'a> {
    pub db: usize,
    pub shard: usize,
    /// The key's cluster hash slot (the shard is its low bits; cluster mode routes by it).
    pub slot: usize,
    /// `dict::hash_key(key)`.
    pub hash: u64,
    pub key: &'a [u8],
}

impl<'a> Spot<'a> {
    #[inline]
    pub fn new(db: usize, key: &'a [u8]) -> Spot<'a> {
        let slot = slot::key_slot(key);
        Spot { db, shard: slot & (SHARDS - 1), slot, hash: dict::hash_key(key), key }
    }
}

/// Starts the cache misses of every line a shard spans (three): the lock word, for writing,
/// and the rest for reading — a lookup reads the keys' table header, and first of all the TTL
/// count that `Shard::expired_hashed` tests, which sits on the third line. Prefetching only
/// the first left `KsView::locate` waiting on that line: 90 % of its samples, unpipelined.
#[inline]
fn prefetch_shard(m: &Mutex<Shard>) {
    let p = m as *const Mutex<Shard> as *const u8;
    dict::prefetch_write(p);
    let next = (p as usize & !63) + 64;
    dict::prefetch_range(next as *const u8, (p as usize + std::mem::size_of::<Mutex<Shard>>()).saturating_sub(next));
}

/// Identifies a shard globally; the lock order is the numeric order of this value.
#[inline]
pub fn shard_id(db: usize, shard: usize) -> u32 {
    ((db as u32) << 16) | shard as u32
}

impl Keyspace {
    pub fn new(databases: usize) -> Keyspace {
        Keyspace {
            dbs: (0..databases).map(|_| OnceLock::new()).collect(),
            snapshots: Snapshots::default(),
            script_gate: parking_lot::ReentrantMutex::new(()),
            later: lockorder::Mutex::new(Vec::new()),
            later_pending: AtomicBool::new(false),
            replica_ttls: lockorder::Mutex::new(Dict::default()),
        }
    }

    /// Remembers that a client of a writable replica set a TTL on `key` in `db`.
    pub fn remember_replica_ttl(&self, db: usize, key: &[u8]) {
        if db > 63 {
            return; // as Redis: keys of databases past 63 are not tracked
        }
        let mut t = self.replica_ttls.lock();
        match t.get_mut(key) {
            Some(bits) => *bits |= 1 << db,
            None => t.insert_new_slice(key, 1 << db),
        }
    }

    /// Applies a bookkeeping change (a watch or a blocked client removed) to shard `shard` of
    /// `db`, for a caller that holds no shard. Served from inside a busy script (a connection
    /// that closes, UNWATCH, DISCARD or RESET while a script runs on this thread), the shard
    /// may be one the script holds, and waiting for it would wait for ourselves: then a shard
    /// that is taken gets the change once the script is over ([`Keyspace::run_later`]).
    pub fn change_shard(&self, db: usize, shard: usize, f: impl FnOnce(&mut Shard) + Send + 'static) {
        let Some(d) = self.db_if_exists(db) else { return };
        if SERVING_WHILE_BUSY.get() {
            match d.shards[shard].try_lock() {
                Some(mut g) => {
                    self.snapshots.before_use(db, shard, &mut g);
                    f(&mut g)
                }
                None => {
                    self.later.lock().push((db, shard, Box::new(f)));
                    self.later_pending.store(true, Ordering::Release);
                }
            }
            return;
        }
        lockorder::before_wait(Rank::Shard);
        let mut g = lockorder::lock(&d.shards[shard], Rank::Shard);
        lockorder::acquired(Rank::Shard, 1);
        self.snapshots.before_use(db, shard, &mut g);
        f(&mut g);
        drop(g);
        lockorder::released(Rank::Shard, 1);
    }

    /// Runs the changes `change_shard` put off, if any (one load when there are none). Called
    /// with no shard held, outside the busy poll.
    #[inline]
    pub fn run_later(&self) {
        if self.later_pending.load(Ordering::Relaxed) && !SERVING_WHILE_BUSY.get() {
            self.run_later_now();
        }
    }

    #[cold]
    fn run_later_now(&self) {
        let jobs = std::mem::take(&mut *self.later.lock());
        self.later_pending.store(false, Ordering::Release);
        for (db, shard, f) in jobs {
            self.change_shard(db, shard, f);
        }
    }

    pub fn num_dbs(&self) -> usize {
        self.dbs.len()
    }

    /// The database, created on first use.
    pub fn db(&self, i: usize) -> &Db {
        self.dbs[i].get_or_init(|| Db::new(self.snapshots.epoch()))
    }

    /// Batch prefetching: a lookup is two dependent cache misses (bucket slot, then node), and
    /// a batch of GETs over a large keyspace spends most of its time waiting on them one after
    /// another. Here the misses of the next commands' keys (`spots`: database, shard and hash,
    /// computed once by a look-ahead — over one connection's pipeline, or over the first
    /// requests of every connection a round delivered) are started together, in passes (shard
    /// header, bucket slot, first node, second node), so they overlap; the commands then find
    /// their data in cache. Each distinct shard is locked once for all the passes, only if it
    /// is free and only to read its table (a locked instruction costs as much as the prefetch
    /// it enables); a busy shard is simply not prefetched.
    pub fn prefetch_spots(&self, spots: &[Spot<'_>]) {
        // Each spot's shard (None if its database was never used); the spots of a batch are
        // almost always in one database, looked up once.
        let mut shards: SmallVec<[Option<&Mutex<Shard>>; 16]> = SmallVec::new();
        let mut db: Option<(usize, &Db)> = None;
        for (k, sp) in spots.iter().enumerate() {
            // A hot key repeats (many clients, or a pipeline, on one counter or collection):
            // its later spots would only repeat the same prefetches.
            if k > 0 && (spots[k - 1].hash, spots[k - 1].db) == (sp.hash, sp.db) && spots[k - 1].key == sp.key {
                shards.push(None);
                continue;
            }
            if db.is_none_or(|(i, _)| i != sp.db) {
                db = self.dbs.get(sp.db).and_then(|d| d.get()).map(|d| (sp.db, d));
            }
            let m = db.map(|(_, d)| &d.shards[sp.shard]);
            if let Some(m) = m {
                prefetch_shard(m);
            }
            shards.push(m);
        }
        // (shard, its guard) per distinct shard, and for each spot the index of its guard.
        let mut guards: SmallVec<[(*const Mutex<Shard>, MutexGuard<'_, Shard>); 16]> = SmallVec::new();
        let mut of_spot: SmallVec<[u8; 16]> = SmallVec::new();
        for m in shards {
            let Some(m) = m else {
                of_spot.push(u8::MAX);
                continue;
            };
            let i = match guards.iter().position(|(g, _)| std::ptr::eq(*g, m)) {
                Some(i) => i,
                None => match m.try_lock() {
                    Some(g) if guards.len() < u8::MAX as usize => {
                        guards.push((m, g));
                        guards.len() - 1
                    }
                    _ => u8::MAX as usize,
                },
            };
            of_spot.push(i as u8);
        }
        let locked = || spots.iter().zip(&of_spot).filter(|(_, &i)| i != u8::MAX);
        for (sp, &i) in locked() {
            guards[i as usize].1.keys.prefetch_bucket(sp.hash);
        }
        for (sp, &i) in locked() {
            guards[i as usize].1.keys.prefetch_node(sp.hash);
        }
        for (sp, &i) in locked() {
            guards[i as usize].1.keys.prefetch_second(sp.hash, sp.key);
        }
    }

    /// The database if it has ever been used (readers need not create it).
    pub fn db_if_exists(&self, i: usize) -> Option<&Db> {
        self.dbs[i].get()
    }

    /// Calls `f` on each shard of database `db`, one lock at a time.
    /// Never from a command handler, which may run inside a transaction or script holding
    /// these very shards: walk through its `Locks` (`Locks::with_shard`) instead.
    pub fn walk_shards(&self, db: usize, mut f: impl FnMut(usize, &mut Shard)) {
        if let Some(d) = self.db_if_exists(db) {
            for (i, s) in d.shards.iter().enumerate() {
                lockorder::before_wait(Rank::Shard);
                let mut g = lockorder::lock(s, Rank::Shard);
                lockorder::acquired(Rank::Shard, 1);
                f(i, &mut g);
                drop(g);
                lockorder::released(Rank::Shard, 1);
            }
        }
    }

    /// Enters the script gate (see `script_gate`), counted in the lock order: entering it
    /// again from inside is no wait; entering it while holding shards and not it would be.
    pub fn enter_script_gate(&self) -> ScriptGate<'_> {
        if !self.script_gate.is_owned_by_current_thread() {
            lockorder::before_wait(Rank::ScriptGate);
        }
        let g = match self.script_gate.try_lock() {
            Some(g) => g,
            None => {
                let _w = lockorder::waiting(Rank::ScriptGate);
                self.script_gate.lock()
            }
        };
        lockorder::acquired(Rank::ScriptGate, 1);
        ScriptGate(g)
    }

    /// Number of keys in `db` (expired-but-not-yet-reclaimed keys included, like Redis).
    pub fn dbsize(&self, db: usize) -> usize {
        let mut n = 0;
        self.walk_shards(db, |_, s| n += s.keys.len());
        n
    }

    /// (keys, keys with expiry) per database, for INFO keyspace.
    pub fn db_stats(&self, db: usize) -> (usize, usize) {
        let (mut k, mut e) = (0, 0);
        self.walk_shards(db, |_, s| {
            k += s.keys.len();
            e += s.expires.len();
        });
        (k, e)
    }
}

/// The shards a command will lock, collected before anything is locked.
#[derive(Default, Debug, Clone)]
pub struct LockPlan {
    pub ids: SmallVec<[u32; 4]>,
}

impl LockPlan {
    pub fn key(&mut self, db: usize, key: &[u8]) {
        self.ids.push(shard_id(db, key_shard(key)));
    }
    /// A plan for one shard already known (the key's shard computed earlier).
    pub fn one(db: usize, shard: usize) -> LockPlan {
        LockPlan { ids: smallvec::smallvec![shard_id(db, shard)] }
    }
    pub fn whole_db(&mut self, db: usize) {
        self.ids.extend((0..SHARDS).map(|s| shard_id(db, s)));
    }
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

/// Shard guards held by one command or transaction, sorted by shard id.
pub struct Locks<'k> {
    ks: &'k Keyspace,
    held: SmallVec<[(u32, MutexGuard<'k, Shard>); 2]>,
    /// Acquired by `acquire_keys` with a snapshot's big values still being written in some
    /// held shard: the caller finishes those of its keys (`finish_deferred`).
    pub deferred: bool,
}

impl<'k> Locks<'k> {
    pub fn none(ks: &'k Keyspace) -> Locks<'k> {
        Locks { ks, held: SmallVec::new(), deferred: false }
    }

    /// `acquire` for a command that touches only the keys it names: a big value a running
    /// snapshot is still writing in one of these shards is left for the caller to finish if
    /// it is one of those keys (`deferred` says when to look), so commands on the other keys
    /// of the shard do not wait for it.
    pub fn acquire_keys(ks: &'k Keyspace, plan: LockPlan) -> Locks<'k> {
        Self::acquire_with(ks, plan, false)
    }

    /// Finishes writing a deferred big value at `key` (see `acquire_keys`).
    #[cold]
    pub fn finish_deferred(&mut self, db: usize, key: &[u8]) {
        let idx = key_shard(key);
        if let Ok(i) = self.held.binary_search_by_key(&shard_id(db, idx), |(i, _)| *i) {
            self.ks.snapshots.finish(db, idx, &mut self.held[i].1, Some(key));
        }
    }

    /// Locks every shard of the plan. A single shard is simply locked. Several are taken in
    /// ascending order, but only the first is waited for: a later one that is busy makes the
    /// command let go of everything and wait for that one alone before trying again. A command
    /// therefore never waits while holding a shard, which is what lets a script (the holder of
    /// [`Keyspace::script_gate`]) lock shards in whatever order it touches them.
    pub fn acquire(ks: &'k Keyspace, plan: LockPlan) -> Locks<'k> {
        Self::acquire_with(ks, plan, true)
    }

    fn acquire_with(ks: &'k Keyspace, mut plan: LockPlan, finish_all: bool) -> Locks<'k> {
        if plan.ids.len() > 1 {
            plan.ids.sort_unstable();
            plan.ids.dedup();
        }
        // A plan may name a database that does not exist (SWAPDB 0 99): the command itself
        // reports the error, nothing is locked for it.
        let mutex = |id: u32| {
            ks.dbs
                .get((id >> 16) as usize)
                .map(|db| &db.get_or_init(|| Db::new(ks.snapshots.epoch())).shards[(id & 0xffff) as usize])
        };
        let mut held: SmallVec<[(u32, MutexGuard<'k, Shard>); 2]> = SmallVec::new();
        let ids = plan.ids.as_slice();
        // The shard to wait for on this attempt (its index in `ids`).
        let mut wait_for = 0;
        'attempt: loop {
            held.clear();
            if let Some(m) = ids.get(wait_for).and_then(|&id| mutex(id)) {
                lockorder::before_wait(Rank::Shard);
                held.push((ids[wait_for], lockorder::lock(m, Rank::Shard)));
            }
            for (i, &id) in ids.iter().enumerate() {
                if i == wait_for {
                    continue;
                }
                let Some(m) = mutex(id) else { continue };
                match m.try_lock() {
                    Some(g) => held.push((id, g)),
                    None => {
                        wait_for = i;
                        continue 'attempt;
                    }
                }
            }
            break;
        }
        if wait_for != 0 {
            held.sort_unstable_by_key(|(id, _)| *id);
        }
        // Copy-before-write, checked once all the locks are held (see `Snapshots`): one
        // relaxed load when no snapshot runs.
        let mut deferred = false;
        if ks.snapshots.running() {
            for (id, g) in held.iter_mut() {
                let (db, idx) = ((*id >> 16) as usize, (*id & 0xffff) as usize);
                if finish_all {
                    ks.snapshots.before_use(db, idx, &mut *g);
                } else {
                    ks.snapshots.serialize(db, idx, &mut *g, true);
                    deferred |= g.deferred.is_some();
                }
            }
        }
        lockorder::acquired(Rank::Shard, held.len());
        Locks { ks, held, deferred }
    }

    /// Adds the shards of `plan` not held yet, waiting for each in turn, in any order. Only
    /// the holder of [`Keyspace::script_gate`] may do this (a script touching keys as it
    /// goes): it keeps everything it locked until it ends, as Redis's single thread would
    /// have run it alone. No snapshot can begin while it runs, so one that began before
    /// serializes each shard before the script's first change to it.
    pub fn add(&mut self, plan: &LockPlan) {
        debug_assert!(self.ks.script_gate.is_owned_by_current_thread(), "Locks::add outside the script gate");
        let ks = self.ks;
        for &id in plan.ids.as_slice() {
            let Err(pos) = self.held.binary_search_by_key(&id, |(i, _)| *i) else { continue };
            let Some(db) = ks.dbs.get((id >> 16) as usize) else { continue };
            // The lock order's one sanctioned exception: the gate's holder waits while holding.
            let m = &db.get_or_init(|| Db::new(ks.snapshots.epoch())).shards[(id & 0xffff) as usize];
            let mut g = lockorder::lock(m, Rank::Shard);
            lockorder::acquired(Rank::Shard, 1);
            ks.snapshots.before_use((id >> 16) as usize, (id & 0xffff) as usize, &mut g);
            self.held.insert(pos, (id, g));
        }
    }

    pub fn keyspace(&self) -> &'k Keyspace {
        self.ks
    }

    /// The snapshot epoch this command's writes come after: the epoch its shards were last
    /// serialized in (all of them alike — see [`Snapshots`]), or, holding none, the current
    /// epoch. A running snapshot of epoch E holds this command's writes exactly when this is
    /// below E, which is how the AOF rewrite decides which incremental file an effect belongs
    /// to (`persist::aof::AofLog::append`).
    pub fn seen_epoch(&self) -> u64 {
        match self.held.first() {
            Some((_, g)) => self.ks.snapshots.seen(g.saved_epoch),
            None => self.ks.snapshots.epoch(),
        }
    }

    pub fn holds(&self, db: usize, shard: usize) -> bool {
        let id = shard_id(db, shard);
        self.held.binary_search_by_key(&id, |(i, _)| *i).is_ok()
    }

    /// The locked shard. Asking for a shard outside the plan is a bug in a command's key
    /// specification; it panics, and the dispatcher turns the panic into an error reply.
    #[inline]
    pub fn shard(&mut self, db: usize, shard: usize) -> &mut Shard {
        let id = shard_id(db, shard);
        if self.held.len() == 1 && self.held[0].0 == id {
            return &mut self.held[0].1;
        }
        match self.held.binary_search_by_key(&id, |(i, _)| *i) {
            Ok(i) => &mut self.held[i].1,
            Err(_) => panic!("shard {db}:{shard} used without being locked"),
        }
    }

    /// The locked shard of `key` in `db`. With a single shard locked, every key the command
    /// touches in this database is in it (the lock plan put it there), so the key is not hashed
    /// again on every access.
    #[inline]
    pub fn shard_of_key(&mut self, db: usize, key: &[u8]) -> &mut Shard {
        let held = self.held.as_slice();
        if held.len() == 1 && (held[0].0 >> 16) as usize == db {
            debug_assert!(self.holds(db, key_shard(key)), "key outside the lock plan");
            return &mut self.held.as_mut_slice()[0].1;
        }
        self.shard(db, key_shard(key))
    }

    /// Two distinct locked shards at once (SWAPDB, MOVE).
    pub fn pair(&mut self, db1: usize, s1: usize, db2: usize, s2: usize) -> (&mut Shard, &mut Shard) {
        let (a, b) = (shard_id(db1, s1), shard_id(db2, s2));
        assert!(a != b, "pair of the same shard");
        let ia = self.held.binary_search_by_key(&a, |(i, _)| *i).expect("first shard locked");
        let ib = self.held.binary_search_by_key(&b, |(i, _)| *i).expect("second shard locked");
        if ia < ib {
            let (x, y) = self.held.split_at_mut(ib);
            (&mut x[ia].1, &mut y[0].1)
        } else {
            let (x, y) = self.held.split_at_mut(ia);
            (&mut y[0].1, &mut x[ib].1)
        }
    }

    /// Runs `f` on shard `shard` of `db`, using the held lock or taking it briefly. Used by
    /// walkers (KEYS, SCAN …), which are whole-db locked inside a transaction and lock-free
    /// outside one.
    pub fn with_shard<R>(&mut self, db: usize, shard: usize, f: impl FnOnce(&mut Shard) -> R) -> R {
        if self.holds(db, shard) {
            f(self.shard(db, shard))
        } else {
            let d = self.ks.db(db);
            // Waiting while holding others is the script gate's holder's privilege alone.
            if !self.ks.script_gate.is_owned_by_current_thread() {
                lockorder::before_wait(Rank::Shard);
            }
            let mut g = lockorder::lock(&d.shards[shard], Rank::Shard);
            lockorder::acquired(Rank::Shard, 1);
            self.ks.snapshots.before_use(db, shard, &mut g);
            let r = f(&mut g);
            drop(g);
            lockorder::released(Rank::Shard, 1);
            r
        }
    }

    /// Number of keys in `db`, through the shards held or each taken briefly (a command's
    /// `Keyspace::dbsize`, safe inside a transaction or script).
    pub fn dbsize(&mut self, db: usize) -> usize {
        self.db_stats(db).0
    }

    /// The keys in `db` and the keyspace tables' own heap there (MEMORY STATS: `keys.count`
    /// and `overhead.hashtable.*`), in one pass: the key tables' bucket arrays, and the expiry
    /// tables' arrays and nodes (a key's own node is the key's, MEMORY USAGE's).
    pub fn db_overhead(&mut self, db: usize) -> (usize, usize, usize) {
        let (mut keys, mut main, mut expires) = (0, 0, 0);
        if self.ks.db_if_exists(db).is_some() {
            for s in 0..SHARDS {
                self.with_shard(db, s, |sh| {
                    keys += sh.keys.len();
                    main += sh.keys.table_bytes();
                    expires += sh.expires.table_bytes() + sh.expires.len() * dict::Dict::<i64>::entry_bytes(b"");
                });
            }
        }
        (keys, main, expires)
    }

    /// (keys, keys with expiry) in `db`, as `dbsize`.
    pub fn db_stats(&mut self, db: usize) -> (usize, usize) {
        let (mut k, mut e) = (0, 0);
        if self.ks.db_if_exists(db).is_some() {
            for s in 0..SHARDS {
                self.with_shard(db, s, |sh| {
                    k += sh.keys.len();
                    e += sh.expires.len();
                });
            }
        }
        (k, e)
    }
}

impl Drop for Locks<'_> {
    #[inline]
    fn drop(&mut self) {
        lockorder::released(Rank::Shard, self.held.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NullSink;
    impl SnapshotSink for NullSink {
        fn shard(&self, _: usize, _: usize, _: &mut Shard, _: bool) {}
    }

    /// What an AOF rewrite relies on to route effects: a command that locked before a
    /// snapshot began sees an epoch below it (its writes are in the snapshot), one that locks
    /// after sees the snapshot's epoch, and so does one touching a database created while the
    /// snapshot ran and never reached by its walk.
    #[test]
    fn locks_tell_whether_a_snapshot_holds_their_writes() {
        let ks = Keyspace::new(16);
        let mut plan = LockPlan::default();
        plan.key(0, b"a");
        let before = Locks::acquire(&ks, plan.clone());
        let e = ks.snapshots.begin(Arc::new(NullSink)).unwrap();
        assert!(before.seen_epoch() < e, "locked before the instant");
        drop(before);
        let after = Locks::acquire(&ks, plan.clone());
        assert_eq!(after.seen_epoch(), e, "locked after the instant");
        drop(after);
        // A database created with the epoch before (as if read just before `begin`), missed
        // by the walk, used once the snapshot is over.
        let stale = ks.dbs[5].get_or_init(|| Db::new(e - 1));
        assert_eq!(stale.shards[0].lock().saved_epoch, e - 1);
        for (i, m) in ks.db(0).shards.iter().enumerate() {
            ks.snapshots.visit(0, i, &mut m.lock());
        }
        ks.snapshots.end();
        let mut p5 = LockPlan::default();
        p5.key(5, b"k");
        assert_eq!(Locks::acquire(&ks, p5).seen_epoch(), e, "a database empty at the instant");
        assert_eq!(Locks::none(&ks).seen_epoch(), e);
    }

    #[test]
    fn locks_are_sorted_and_deduplicated() {
        let ks = Keyspace::new(16);
        let mut p = LockPlan::default();
        p.key(3, b"b");
        p.key(0, b"a");
        p.key(3, b"b");
        let mut l = Locks::acquire(&ks, p);
        assert_eq!(l.held.len(), 2);
        assert!(l.held[0].0 < l.held[1].0);
        l.shard(3, key_shard(b"b")).keys.insert(b"b", Obj { val: Value::Int(1), lru: 0 });
        drop(l);
        assert_eq!(ks.dbsize(3), 1);
        assert_eq!(ks.dbsize(0), 0);
    }

    #[test]
    fn watch_registry_marks_dirty() {
        let mut s = Shard::default();
        let f = Arc::new(WatchFlag::default());
        s.watch(b"k", &f);
        s.touch_watched(b"other");
        assert!(!f.dirty.load(Ordering::Acquire));
        s.touch_watched(b"k");
        assert!(f.dirty.load(Ordering::Acquire));
        s.unwatch(b"k", &f);
        assert!(s.watched.is_none());
    }
}
