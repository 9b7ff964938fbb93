//! The execution core: what runs a command, between the session that parsed it (`server`) and
//! the command functions (`commands`, `types`) that implement it.
//!
//! A command function gets a [`Ctx`]: its arguments, a reply builder, the client's state and a
//! [`KsView`] over the shards its lock plan holds. It returns `Ok(())` after adding its reply, or
//! a [`CmdError`] that the dispatcher turns into Redis's exact error text. [`call`] runs one
//! command: the generic gates, the lock plan, the write epilogue (dirty count, effects, blocked
//! clients served), statistics. The shared state every command sees is the [`Server`].
//!
//! Layering: `server` (I/O, workers, sessions) sits above this module; `commands` and `types`
//! use it; it uses only `engine`, `protocol`, `config` and `log` below it.

pub mod blocking;
pub mod call;
pub mod client;
pub mod multi;
/// Keyspace events' classes, for the commands that raise them (`ctx.ks.note(notify::…)`):
/// part of the prelude command modules take with `use crate::exec::*`.
pub use crate::services::notify;
pub mod state;
pub mod table;
#[cfg(test)]
pub mod testing;

use crate::engine::keytable::Entry;
use crate::engine::{Locks, Obj, Shard, Value};
use crate::protocol::Reply;
use client::Client;
use std::borrow::Cow;
use std::sync::atomic::Ordering;

pub use crate::services::clock::{unix_ms, unix_us, Clock};
use crate::services::{evict, stats, tracking};
pub use call::{call, dispatch, error_reply, lock_plan, resolve};
pub use state::{EffectSink, PauseBy, Server, ShutdownMode};
pub use table::{Command, CommandTable};

/// Errors are values (DESIGN habit 5); [`CmdError::text`] is the one place that words them.
#[derive(Debug, Clone, PartialEq)]
pub enum CmdError {
    WrongType,
    NotInteger,
    NotFloat,
    Syntax,
    Overflow,
    NoSuchKey,
    OutOfRange,
    /// Wrong number of arguments for the named command (`get`, `config|get`).
    Arity(String),
    // The gates' refusals, shared by the command path (`call::gated`) and scripts
    // (`redis.call`, a script's own start):
    /// A start-up load runs and the command may not run during it.
    Loading,
    /// A replica lost its master and `replica-serve-stale-data` is no.
    MasterDown,
    /// A write with fewer good replicas than `min-replicas-to-write`.
    NoReplicas,
    /// A write on a read-only replica.
    ReadOnly,
    /// A write while the last save failed (`stop-writes-on-bgsave-error`).
    Misconf,
    /// A command that may grow memory over `maxmemory`.
    Oom,
    /// A connection that has not authenticated.
    NoAuth,
    /// A script runs; `function`: it is a function (FUNCTION KILL stops it, not SCRIPT KILL).
    Busy {
        function: bool,
    },
    /// Any other error: the full text after `-`, starting with its code (`ERR ...`).
    Msg(Cow<'static, str>),
}

pub type CmdResult = Result<(), CmdError>;

impl CmdError {
    pub fn msg(s: impl Into<Cow<'static, str>>) -> CmdError {
        CmdError::Msg(s.into())
    }

    pub fn text(&self) -> Cow<'static, str> {
        match self {
            CmdError::WrongType => "WRONGTYPE Operation against a key holding the wrong kind of value".into(),
            CmdError::NotInteger => "ERR value is not an integer or out of range".into(),
            CmdError::NotFloat => "ERR value is not a valid float".into(),
            CmdError::Syntax => "ERR syntax error".into(),
            CmdError::Overflow => "ERR increment or decrement would overflow".into(),
            CmdError::NoSuchKey => "ERR no such key".into(),
            CmdError::OutOfRange => "ERR index out of range".into(),
            CmdError::Loading => "LOADING Redis is loading the dataset in memory".into(),
            CmdError::MasterDown => {
                "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.".into()
            }
            CmdError::NoReplicas => "NOREPLICAS Not enough good replicas to write.".into(),
            CmdError::ReadOnly => "READONLY You can't write against a read only replica.".into(),
            CmdError::Misconf => "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.".into(),
            CmdError::Oom => "OOM command not allowed when used memory > 'maxmemory'.".into(),
            CmdError::NoAuth => "NOAUTH Authentication required.".into(),
            CmdError::Busy { function: false } => {
                "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.".into()
            }
            CmdError::Busy { function: true } => {
                "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.".into()
            }
            CmdError::Arity(name) => format!("ERR wrong number of arguments for '{name}' command").into(),
            CmdError::Msg(m) => m.clone(),
        }
    }
}

pub use crate::services::effects::{Effect, Propagate};

/// Data access for one command: the locked shards of the current database, the command's
/// fixed time (7.2 keeps one time for a whole command), and the write epilogue.
pub struct KsView<'a, 'k> {
    pub locks: &'a mut Locks<'k>,
    pub db: usize,
    pub now: i64,
    pub lru_clock: u32,
    /// Under an LFU `maxmemory-policy`: (`lfu-log-factor`, `lfu-decay-time`); accesses then
    /// update the key's LFU counter instead of its access time, and `lru_clock` is the value a
    /// new key starts with.
    pub lfu: Option<(u32, u32)>,
    /// CLIENT NO-TOUCH: reads do not update the access clock.
    pub no_touch: bool,
    /// Keys written by this command (`dirty` in Redis).
    pub dirty: u64,
    /// Collected effects, when a consumer exists.
    pub emit: bool,
    pub effects: Vec<Effect>,
    pub stats: &'a stats::Counters,
    /// (db, key) signalled ready for blocked clients by this command (see `exec::blocking`).
    pub ready: Vec<(usize, Vec<u8>)>,
    /// The keyspace hash of one argument (address, length, hash), computed by the pipeline
    /// look-ahead: a lookup of that very slice need not hash it again.
    pub key_hint: Option<(usize, usize, u64)>,
    /// CLIENT PAUSE is holding writes back: a key past its time reads as missing but is not
    /// deleted (Redis keeps expiry's deletions for after the pause).
    pub hold_expired: bool,
    /// A writable replica's own client: a TTL it sets is remembered for the replica's expiry
    /// cycle (`Keyspace::replica_ttls`).
    pub replica_ttls: bool,
    /// Replaying a log at load time: nothing expires, and an expiry already past is set, not
    /// applied (as Redis loads: such keys go once loading ends).
    pub loading: bool,
    /// `notify-keyspace-events` flags when the command began (0: notifications off).
    pub notify: u32,
    /// Keyspace events raised, published by the epilogue.
    pub notes: Vec<notify::Note>,
    /// Some client tracks keys (CLIENT TRACKING): modified keys are collected in `touched`
    /// for the epilogue's invalidations.
    pub track: bool,
    pub touched: Vec<tracking::Touched>,
}

/// Lazy expiry's slow path: deletes a key whose time has passed, signals its watchers, counts
/// it and records the DEL effect (Redis's `deleteExpiredKeyAndPropagate`).
#[cold]
fn expire_now(
    shard: &mut Shard,
    key: &[u8],
    db: usize,
    stats: &stats::Counters,
    emit: bool,
    effects: &mut Vec<Effect>,
) {
    shard.remove(key);
    shard.touch_watched(key);
    stats.expired_keys.fetch_add(1, Ordering::Relaxed);
    if emit {
        effects.push(Effect::new(db, vec![b"DEL".to_vec(), key.to_vec()]));
    }
}

/// Lazy field expiry's slow path: the hash at `key` has fields past their deadline. On a
/// primary they are removed now — `hexpired` raised, HDEL recorded for replicas and the AOF,
/// the key deleted (`del`) with its last field — so every command, HLEN and EXISTS included,
/// sees the hash as it is at `now`. Under `hold` (a replica, CLIENT PAUSE) nothing is removed;
/// readers skip due fields. Returns true if the key is gone (or, held, has no live field).
#[cold]
#[allow(clippy::too_many_arguments)]
fn reclaim_fields(
    shard: &mut Shard,
    key: &[u8],
    db: usize,
    now: i64,
    hold: bool,
    stats: &stats::Counters,
    emit: bool,
    effects: &mut Vec<Effect>,
    notify_flags: u32,
    notes: &mut Vec<notify::Note>,
) -> bool {
    let Some(mut o) = shard.keys.get_mut(key) else { return false };
    let Value::Hash(h) = o.val_mut() else { return false };
    if hold {
        return h.live_len(now) == 0;
    }
    let gone = h.remove_due(now, usize::MAX);
    stats.expired_fields.fetch_add(gone.len() as u64, Ordering::Relaxed);
    let empty = h.is_empty();
    if empty {
        shard.remove(key);
    }
    shard.touch_watched(key);
    if emit {
        let mut argv = Vec::with_capacity(gone.len() + 2);
        argv.push(b"HDEL".to_vec());
        argv.push(key.to_vec());
        argv.extend(gone.iter().map(|f| f.to_vec()));
        effects.push(Effect::new(db, argv));
    }
    if notify_flags & notify::HASH != 0 {
        notes.push(notify::Note { class: notify::HASH, event: "hexpired", db, key: key.into() });
    }
    if empty && notify_flags & notify::GENERIC != 0 {
        notes.push(notify::Note { class: notify::GENERIC, event: "del", db, key: key.into() });
    }
    empty
}

impl<'a, 'k> KsView<'a, 'k> {
    #[inline]
    pub fn shard(&mut self, key: &[u8]) -> &mut Shard {
        self.locks.shard_of_key(self.db, key)
    }

    /// `dict::hash_key(key)`, from the look-ahead's hint when `key` is the slice it hashed.
    #[inline]
    fn hash_of(&self, key: &[u8]) -> u64 {
        match self.key_hint {
            Some((at, len, h)) if at == key.as_ptr() as usize && len == key.len() => h,
            _ => crate::engine::dict::hash_key(key),
        }
    }

    /// The key's locked shard and hash, with the key deleted first if its time has passed
    /// (lazy expiry; the flag says so). One hash and one shard lookup serve both the expiry
    /// check and whatever the caller does next.
    #[inline]
    fn locate(&mut self, key: &[u8]) -> (&mut Shard, u64, bool) {
        let h = self.hash_of(key);
        let (db, now) = (self.db, self.now);
        let shard = self.locks.shard_of_key(db, key);
        let mut expired = !self.loading && shard.expired_hashed(key, h, now);
        if expired && !self.hold_expired {
            expire_now(shard, key, db, self.stats, self.emit, &mut self.effects);
            if self.notify & notify::EXPIRED != 0 {
                self.notes.push(notify::Note { class: notify::EXPIRED, event: "expired", db, key: key.into() });
            }
            if self.track {
                self.touched.push((key.into(), true));
            }
        } else if !expired && shard.field_ttls.is_some() && !self.loading && shard.fields_due(key, now) {
            let (hold, emit, flags) = (self.hold_expired, self.emit, self.notify);
            expired =
                reclaim_fields(shard, key, db, now, hold, self.stats, emit, &mut self.effects, flags, &mut self.notes);
            if self.track && !hold {
                self.touched.push((key.into(), false));
            }
        }
        (shard, h, expired)
    }

    /// The key's entry, unless it is missing or its time has passed.
    #[inline]
    fn live_entry(&mut self, key: &[u8]) -> Option<Entry<'_>> {
        match self.locate(key) {
            (_, _, true) => None,
            (shard, h, false) => shard.keys.get_mut_hashed(key, h),
        }
    }

    /// Deletes `key` if its time has passed (lazy expiry). Returns true if it was deleted.
    fn expire_if_needed(&mut self, key: &[u8]) -> bool {
        self.locate(key).2
    }

    /// Lookup for reading: counts keyspace hits/misses and updates the access clock.
    #[inline]
    pub fn lookup_read(&mut self, key: &[u8]) -> Option<Entry<'_>> {
        if self.notify & notify::KEY_MISS != 0 {
            return self.lookup_read_noting_miss(key);
        }
        self.lookup_read_counted(key)
    }

    /// `lookup_read` while `keymiss` events are on: a miss raises one.
    #[cold]
    fn lookup_read_noting_miss(&mut self, key: &[u8]) -> Option<Entry<'_>> {
        if !self.exists(key) {
            stats::bump(&self.stats.keyspace_misses, 1);
            self.note(notify::KEY_MISS, "keymiss", key);
            return None;
        }
        self.lookup_read_counted(key)
    }

    #[inline]
    fn lookup_read_counted(&mut self, key: &[u8]) -> Option<Entry<'_>> {
        let (clock, touch, lfu, now) = (self.lru_clock, !self.no_touch, self.lfu, self.now);
        let stats = self.stats;
        match self.live_entry(key) {
            Some(mut o) => {
                stats::bump(&stats.keyspace_hits, 1);
                // Written only when it changes (once a second at most): an unconditional store
                // would make every read dirty the key's cache line, which then bounces between
                // the cores reading it.
                if touch {
                    match lfu {
                        None => {
                            if o.lru() != clock {
                                o.set_lru(clock);
                            }
                        }
                        Some((factor, decay)) => o.set_lru(evict::lfu_touch(o.lru(), now, factor, decay)),
                    }
                }
                Some(o)
            }
            None => {
                stats::bump(&stats.keyspace_misses, 1);
                None
            }
        }
    }

    /// The value of aggregate type `T` at `key`, looked up for reading (hits and misses
    /// counted, access time kept): Ok(None) when the key is missing, WRONGTYPE when it holds
    /// another type. Reads may still need `&mut` (a set's pending rehash step).
    pub fn read<T: crate::engine::Aggregate>(&mut self, key: &[u8]) -> Result<Option<&mut T>, CmdError> {
        match self.lookup_read(key) {
            None => Ok(None),
            Some(o) => o.into_obj().and_then(T::of_mut).map(Some).ok_or(CmdError::WrongType),
        }
    }

    /// `read`'s twin for a command about to change the value (`lookup_write`).
    pub fn write<T: crate::engine::Aggregate>(&mut self, key: &[u8]) -> Result<Option<&mut T>, CmdError> {
        match self.lookup_write(key) {
            None => Ok(None),
            Some(o) => o.into_obj().and_then(T::of_mut).map(Some).ok_or(CmdError::WrongType),
        }
    }

    /// Lookup for writing: no statistics, but the access clock is updated.
    pub fn lookup_write(&mut self, key: &[u8]) -> Option<Entry<'_>> {
        let (clock, lfu, now) = (self.lru_clock, self.lfu, self.now);
        let mut o = self.live_entry(key)?;
        match lfu {
            None => {
                if o.lru() != clock {
                    o.set_lru(clock);
                }
            }
            Some((factor, decay)) => o.set_lru(evict::lfu_touch(o.lru(), now, factor, decay)),
        }
        Some(o)
    }

    /// Lookup that changes nothing but lazily expires (TYPE, OBJECT, TTL …).
    pub fn peek(&mut self, key: &[u8]) -> Option<Entry<'_>> {
        self.live_entry(key)
    }

    pub fn exists(&mut self, key: &[u8]) -> bool {
        self.peek(key).is_some()
    }

    /// A string value for reading: Ok(None) if missing, WRONGTYPE for other types.
    pub fn get_string(&mut self, key: &[u8]) -> Result<Option<Entry<'_>>, CmdError> {
        match self.lookup_read(key) {
            None => Ok(None),
            Some(o) if o.is_string() => Ok(Some(o)),
            Some(_) => Err(CmdError::WrongType),
        }
    }

    /// Creates or overwrites `key` (Redis's `setKey`): the TTL is dropped unless `keep_ttl`,
    /// watchers are signalled and the change is counted.
    pub fn set(&mut self, key: &[u8], val: Value, keep_ttl: bool) {
        let blockable = is_blockable(&val);
        let fields = matches!(&val, Value::Hash(h) if h.has_ttls());
        let (lru, lfu) = (self.lru_clock, self.lfu.is_some());
        let (shard, h, _) = self.locate(key);
        let mut overwrote_stream = false;
        let mut created = false;
        match shard.keys.get_mut_hashed(key, h) {
            Some(mut o) => {
                // A blocked XREADGROUP learns its stream was replaced (7.2: WRONGTYPE at once).
                overwrote_stream = matches!(*o, Value::Stream(_));
                o.set(val);
                // An overwrite keeps the key's LFU counter, as Redis's dbSetValue.
                if !lfu {
                    o.set_lru(lru);
                }
                if !keep_ttl && !shard.expires.is_empty() {
                    shard.expires.remove(key);
                }
            }
            None => {
                shard.keys.insert_new(key, Obj { val, lru });
                created = true;
            }
        }
        // `modified`, with the shard at hand.
        shard.touch_watched(key);
        self.dirty += 1;
        if fields {
            self.note_field_ttls(key);
        }
        if self.track {
            self.touched.push((key.into(), false));
        }
        if created {
            self.note(notify::NEW, "new", key);
        }
        if blockable || overwrote_stream {
            self.signal_ready(key);
        }
    }

    /// A key that now holds a list, zset or stream (RENAME, MOVE, COPY, SORT STORE, SET of a
    /// whole value) may serve blocked clients, as in Redis's dbAdd.
    pub fn ready_if_aggregate(&mut self, key: &[u8]) {
        let blockable = self.shard(key).keys.get(key).is_some_and(|o| is_blockable(&o));
        if blockable {
            self.signal_ready(key);
        }
    }

    /// Adds a key known to be absent (after a lookup said so), without counting it dirty.
    pub fn insert_new(&mut self, key: &[u8], val: Value) {
        let blockable = is_blockable(&val);
        let fields = matches!(&val, Value::Hash(h) if h.has_ttls());
        let lru = self.lru_clock;
        self.shard(key).keys.insert_new(key, Obj { val, lru });
        if fields {
            self.note_field_ttls(key);
        }
        self.note(notify::NEW, "new", key);
        if blockable {
            self.signal_ready(key);
        }
    }

    /// Removes a key (and its TTL). Returns its value if it existed (and had not expired).
    pub fn delete(&mut self, key: &[u8]) -> Option<Obj> {
        if self.expire_if_needed(key) {
            return None;
        }
        self.delete_unlooked(key)
    }

    /// Redis's `dbDelete`: removes `key` with no lookup first, so a key past its time that
    /// nothing has expired yet is deleted like any other (the caller raises `del`, not
    /// `expired`): RESTORE … REPLACE, SORT … STORE, BITOP's empty result. Signals watchers and
    /// counts the change; returns the value if the key was there.
    pub fn delete_unlooked(&mut self, key: &[u8]) -> Option<Obj> {
        let o = self.shard(key).remove(key)?;
        self.modified(key);
        // Clients blocked on a deleted stream must learn it (7.2 replies them an error).
        if matches!(o.val, Value::Stream(_)) {
            self.signal_ready(key);
        }
        Some(o)
    }

    /// Write epilogue for one key: signal watchers, count the change.
    #[inline]
    pub fn modified(&mut self, key: &[u8]) {
        self.touch(key);
        self.dirty += 1;
    }

    /// Redis's `signalModifiedKey` without the dirty count: the key's watchers are marked and
    /// its trackers invalidated.
    #[inline]
    pub fn touch(&mut self, key: &[u8]) {
        self.shard(key).touch_watched(key);
        if self.track {
            self.touched.push((key.into(), false));
        }
    }

    pub fn get_expire(&mut self, key: &[u8]) -> Option<i64> {
        self.shard(key).expire_of(key)
    }

    /// Sets an absolute expiry (ms) on an existing key.
    pub fn set_expire(&mut self, key: &[u8], when: i64) {
        let shard = self.shard(key);
        match shard.expires.get_mut(key) {
            Some(t) => *t = when,
            None => {
                shard.expires.insert_new_slice(key, when);
                self.locks.keyspace().db(self.db).mark_volatile(crate::engine::key_shard(key));
            }
        }
        if self.replica_ttls {
            self.locks.keyspace().remember_replica_ttl(self.db, key);
        }
    }

    /// Notes that the hash at `key` has field deadlines: active expiry will visit it, and
    /// lookups reclaim its due fields.
    pub fn note_field_ttls(&mut self, key: &[u8]) {
        self.shard(key).note_field_ttls(key);
        self.locks.keyspace().db(self.db).mark_volatile(crate::engine::key_shard(key));
    }

    /// Removes the key's TTL; true if it had one.
    pub fn remove_expire(&mut self, key: &[u8]) -> bool {
        let shard = self.shard(key);
        !shard.expires.is_empty() && shard.expires.remove(key).is_some()
    }

    /// Signals that `key` may now satisfy clients blocked on it (a push to a list, an add to a
    /// sorted set, an XADD). Every write that can unblock a waiter must call it; the blocking
    /// machinery serves waiters from here.
    pub fn signal_ready(&mut self, key: &[u8]) {
        blocking::signal_ready(self, key);
    }

    /// Raises a keyspace event (`notify-keyspace-events`) of `class` for `key` in this
    /// command's database: nothing but a test of the flags when the class is off.
    #[inline]
    pub fn note(&mut self, class: u32, event: &'static str, key: &[u8]) {
        if self.notify & class != 0 {
            self.note_in(self.db, class, event, key);
        }
    }

    /// `note` for a key of another database (MOVE, COPY … DB).
    #[cold]
    pub fn note_in(&mut self, db: usize, class: u32, event: &'static str, key: &[u8]) {
        if self.notify & class != 0 {
            self.notes.push(notify::Note { class, event, db, key: key.into() });
        }
    }

    /// Records a rewritten effect for this command (instead of the command as sent).
    pub fn effect(&mut self, argv: Vec<Vec<u8>>) {
        if self.emit {
            self.effects.push(Effect::new(self.db, argv));
        }
    }
}

/// Lists, sorted sets and streams can serve blocked clients.
#[inline]
pub(crate) fn is_blockable(v: &Value) -> bool {
    matches!(v, Value::List(_) | Value::ZSet(_) | Value::Stream(_))
}

/// Everything a command function gets.
pub struct Ctx<'c, 'a, 'k> {
    pub srv: &'c Server,
    pub ws: &'c stats::WorkerStats,
    pub client: &'c mut Client,
    pub reply: &'c mut Reply,
    pub args: &'c [&'c [u8]],
    pub ks: KsView<'a, 'k>,
    pub cmd: &'c Command,
    /// Set when the command produced its own effects (rewritten), so the dispatcher does not
    /// also propagate the command as sent.
    pub rewrote: bool,
}

impl<'c, 'a, 'k> Ctx<'c, 'a, 'k> {
    /// `Server::settle_peers` for a command that answers about the clients, unless it runs
    /// inside a transaction or a script.
    pub fn settle_peers(&self) {
        if !self.client.in_exec && !self.client.in_script {
            self.srv.settle_peers(self.client.worker);
        }
    }

    #[inline]
    pub fn arg(&self, i: usize) -> &'c [u8] {
        self.args[i]
    }

    pub fn arg_i64(&self, i: usize) -> Result<i64, CmdError> {
        parse_int(self.args[i])
    }

    /// Replaces this command's effect with `argv` (`SET k v EX 10` → `SET k v PXAT t`).
    pub fn rewrite_effect(&mut self, argv: Vec<Vec<u8>>) {
        self.rewrote = true;
        self.ks.effect(argv);
    }

    /// Suspends this client until one of the request's keys is served or its deadline passes
    /// (see `exec::blocking`). The command must not reply itself.
    pub fn block(&mut self, req: blocking::BlockRequest) {
        self.client.blocked = Some(req);
    }

    /// Argv of this command as owned vectors (what a blocked waiter keeps).
    pub fn argv_owned(&self) -> Vec<Vec<u8>> {
        self.args.iter().map(|a| a.to_vec()).collect()
    }

    /// Declares that this command propagates nothing even though it changed keys.
    pub fn no_effect(&mut self) {
        self.rewrote = true;
    }
}

pub fn parse_int(b: &[u8]) -> Result<i64, CmdError> {
    crate::protocol::parse_i64(b).ok_or(CmdError::NotInteger)
}

/// Parses a float as Redis's `getDoubleFromObject`: strtod over the whole string, no spaces,
/// NaN rejected.
pub fn parse_float(b: &[u8]) -> Result<f64, CmdError> {
    let s = std::str::from_utf8(b).map_err(|_| CmdError::NotFloat)?;
    if s.is_empty()
        || s.starts_with(|c: char| c.is_ascii_whitespace())
        || s.ends_with(|c: char| c.is_ascii_whitespace())
    {
        return Err(CmdError::NotFloat);
    }
    let l = s.to_ascii_lowercase();
    let v = match l.as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => {
            if l.contains("inf") || l.contains("nan") || l.starts_with("0x") || l.starts_with("-0x") {
                return Err(CmdError::NotFloat);
            }
            l.parse::<f64>().map_err(|_| CmdError::NotFloat)?
        }
    };
    if v.is_nan() {
        return Err(CmdError::NotFloat);
    }
    Ok(v)
}

pub use crate::cmdspec::eq_ic;

/// Parses a SCAN cursor as Redis does with `strtoul`: an optional sign and decimal digits, no
/// leading space, nothing after; a negative number wraps around; the empty string is 0.
/// Shared by SCAN, HSCAN, SSCAN and ZSCAN.
pub fn parse_scan_cursor(arg: &[u8]) -> Result<u64, CmdError> {
    let invalid = || CmdError::msg("ERR invalid cursor");
    let (neg, digits) = match arg.first() {
        None => return Ok(0),
        Some(b'-') => (true, &arg[1..]),
        Some(b'+') => (false, &arg[1..]),
        Some(_) => (false, arg),
    };
    if digits.is_empty() {
        return Err(invalid());
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return Err(invalid());
        }
        v = v.checked_mul(10).and_then(|v| v.checked_add((c - b'0') as u64)).ok_or_else(invalid)?;
    }
    Ok(if neg { v.wrapping_neg() } else { v })
}

/// Replies with a HELP text: the command name line followed by the lines, like Redis's
/// `addReplyHelp`.
pub fn help_reply(ctx: &mut Ctx, name: &str, lines: &[&str]) {
    ctx.reply.array(lines.len() + 3);
    ctx.reply.simple(&format!("{name} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"));
    for l in lines {
        ctx.reply.simple(l);
    }
    ctx.reply.simple("HELP");
    ctx.reply.simple("    Print this help.");
}
