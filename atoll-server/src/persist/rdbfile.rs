//! Whole RDB files: writing a point-in-time snapshot of the keyspace (fork-less, see
//! `engine::Snapshots`) and reading a file into it. The layout is Redis 7.2's: `REDIS0011`,
//! aux fields, then per database SELECTDB and its keys (each with EXPIRETIME_MS when it has a
//! TTL), EOF and a CRC-64 of everything before it. Shards are emitted in whatever order
//! they were serialized, each chunk opening with its own SELECTDB — RDB allows repeating it.

use super::{bigvalue, PersistError};
use crate::engine::rdb::{self, load::LoadOpts, save::SaveOpts, Input};
use crate::engine::{key_shard, Keyspace, Shard, SnapshotSink, Value};
use crate::lockorder::{rank, Mutex};
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Appends one shard's keys as RDB records, after a SELECTDB; nothing for an empty shard.
/// Returns the number of keys written.
pub fn shard_records(db: usize, shard: &Shard, o: &SaveOpts, out: &mut Vec<u8>) -> u64 {
    shard_records_deferring(db, shard, o, out, None)
}

/// Called for each big value a snapshot writes piece by piece instead (see `bigvalue`).
type Defer<'a> = Option<&'a mut dyn FnMut(&[u8], &Value, Option<i64>)>;

fn shard_records_deferring(db: usize, shard: &Shard, o: &SaveOpts, out: &mut Vec<u8>, mut defer: Defer) -> u64 {
    if shard.keys.is_empty() {
        return 0;
    }
    out.push(rdb::OP_SELECTDB);
    rdb::put_len(out, db as u64);
    let mut n = 0;
    shard.keys.for_each(|k, v| {
        if let Some(d) = defer.as_mut().filter(|_| bigvalue::is_big(v)) {
            d(k, v, shard.expires.get(k).copied());
            return;
        }
        if let Some(t) = shard.expires.get(k) {
            out.push(rdb::OP_EXPIRETIME_MS);
            rdb::put_ms(out, *t);
        }
        out.push(rdb::save::type_byte(v));
        rdb::put_str(out, k, o.compress);
        rdb::save::value(out, v, o);
        n += 1;
    });
    n
}

/// Appends the commands that rebuild one shard's keys, after a SELECT; nothing for an empty
/// shard. Returns the number of keys written.
pub fn shard_commands(db: usize, shard: &Shard, out: &mut Vec<u8>) -> u64 {
    shard_commands_deferring(db, shard, out, None)
}

fn shard_commands_deferring(db: usize, shard: &Shard, out: &mut Vec<u8>, mut defer: Defer) -> u64 {
    if shard.keys.is_empty() {
        return 0;
    }
    super::aof::encode(out, &[b"SELECT".to_vec(), db.to_string().into_bytes()]);
    let mut n = 0;
    shard.keys.for_each(|k, v| {
        if let Some(d) = defer.as_mut().filter(|_| bigvalue::is_big(v)) {
            d(k, v, shard.expires.get(k).copied());
            return;
        }
        super::aof::value_commands(out, k, v, shard.expires.get(k).copied());
        n += 1;
    });
    n
}

/// The commands that rebuild the keys of `slots` (indexed by slot) held by one shard (cluster
/// mode, database 0 only), each slot's after a SELECT as Valkey's slot migration sends them.
/// Only the slot lists of the slots that map to this shard are walked.
fn shard_slot_commands(
    db: usize,
    idx: usize,
    shard: &Shard,
    slots: &[bool],
    out: &mut Vec<u8>,
    mut defer: Defer,
) -> u64 {
    use crate::engine::slot::SHARDS;
    let mut n = 0;
    for slot in (idx..slots.len()).step_by(SHARDS).filter(|&s| slots[s]) {
        let mut keys: Vec<Box<[u8]>> = Vec::new();
        shard.keys.slot_keys_while(slot, |k| {
            keys.push(k.into());
            true
        });
        if keys.is_empty() {
            continue;
        }
        super::aof::encode(out, &[b"SELECT".to_vec(), db.to_string().into_bytes()]);
        for k in keys {
            let Some(v) = shard.keys.get(&k) else { continue };
            let exp = shard.expires.get(&k[..]).copied();
            if let Some(d) = defer.as_mut().filter(|_| bigvalue::is_big(&v)) {
                d(&k, &v, exp);
                continue;
            }
            super::aof::value_commands(out, &k, &v, exp);
            n += 1;
        }
    }
    n
}

impl Form {
    /// What goes before the keys.
    fn head(self, h: &Header, opts: &SaveOpts) -> Vec<u8> {
        match self {
            Form::Rdb { .. } => header(h, opts),
            Form::Commands { timestamp } => {
                let mut buf = Vec::new();
                if timestamp {
                    let now =
                        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
                    super::aof::timestamp_annotation(&mut buf, now as i64);
                }
                // The libraries first, as Redis's rewrite writes them.
                for code in &h.functions {
                    super::aof::encode(&mut buf, &[b"FUNCTION".to_vec(), b"LOAD".to_vec(), code.clone()]);
                }
                buf
            }
        }
    }

    /// One shard's keys; returns how many (big values handed to `defer` not counted).
    fn shard(self, db: usize, shard: &Shard, opts: &SaveOpts, out: &mut Vec<u8>, defer: Defer) -> u64 {
        match self {
            Form::Rdb { .. } => shard_records_deferring(db, shard, opts, out, defer),
            Form::Commands { .. } => shard_commands_deferring(db, shard, out, defer),
        }
    }

    fn big(self) -> bigvalue::Form {
        match self {
            Form::Rdb { .. } => bigvalue::Form::Rdb,
            Form::Commands { .. } => bigvalue::Form::Commands,
        }
    }

    /// What ends the file; returns its size and the writer.
    fn end<W: Write>(self, out: Out<W>) -> std::io::Result<(u64, W)> {
        match self {
            Form::Rdb { checksum } => footer(out, checksum),
            Form::Commands { .. } => Ok((out.bytes, out.w)),
        }
    }
}

/// What a snapshot writes: an RDB file (its CRC-64 trailer computed or left 0), or — an AOF
/// base with `aof-use-rdb-preamble no` — the commands that rebuild the dataset, as Redis's
/// rewrite writes them (with `timestamp`, a `#TS:` annotation first).
#[derive(Clone, Copy, Debug)]
pub enum Form {
    Rdb { checksum: bool },
    Commands { timestamp: bool },
}

/// A running save's progress, for INFO (`current_save_keys_*`, `current_cow_size`,
/// `current_fork_perc`): keys written so far out of the total when it began, and the bytes
/// commands had to serialize ahead of the walk because they were about to change a shard —
/// the memory a fork-less snapshot spends where a forked child's copy-on-write would.
#[derive(Default, Debug)]
pub struct Progress {
    pub keys_total: AtomicU64,
    pub keys_processed: AtomicU64,
    pub cow_bytes: AtomicU64,
    /// Set to abandon the save (FLUSHALL does, as Redis kills its child): the writer stops at
    /// its next chunk and the temporary file is removed.
    pub cancel: std::sync::atomic::AtomicBool,
}

/// The error a cancelled save ends with.
pub const CANCELLED: &str = "snapshot cancelled";

/// The snapshot's sink: shards serialized by whichever thread got to them first, waiting for
/// the snapshot's own thread to write them out (with the number of keys in each).
struct Chunks {
    opts: SaveOpts,
    form: Form,
    queue: Mutex<Vec<(Vec<u8>, u64)>, { rank::SNAPSHOT_CHUNKS }>,
    keys: AtomicU64,
    progress: Arc<Progress>,
    /// Shards holding big values started and not finished (db, shard), for the walk.
    pending: Mutex<Vec<(usize, usize)>, { rank::SNAPSHOT_CHUNKS }>,
    /// Big values started and not finished.
    deferred: AtomicU64,
    /// Only the keys of these slots (indexed by slot; a slot migration's snapshot).
    slots: Option<Arc<Vec<bool>>>,
}

impl SnapshotSink for Chunks {
    fn shard(&self, db: usize, idx: usize, shard: &mut Shard, by_writer: bool) {
        let mut out = Vec::new();
        let mut big: Vec<(Box<[u8]>, crate::engine::DeferredState)> = Vec::new();
        let (form, opts) = (self.form, &self.opts);
        let mut defer = |k: &[u8], v: &Value, exp: Option<i64>| {
            big.push((k.into(), Box::new(bigvalue::BigValue::start(form.big(), db, k, v, exp, opts))));
        };
        let n = match &self.slots {
            Some(slots) if db == 0 => shard_slot_commands(db, idx, shard, slots, &mut out, Some(&mut defer)),
            Some(_) => 0,
            None => self.form.shard(db, shard, &self.opts, &mut out, Some(&mut defer)),
        };
        if n > 0 {
            if by_writer {
                self.progress.cow_bytes.fetch_add(out.len() as u64, Ordering::Relaxed);
            }
            self.keys.fetch_add(n, Ordering::Relaxed);
            self.queue.lock().push((out, n));
        }
        if !big.is_empty() {
            self.deferred.fetch_add(big.len() as u64, Ordering::Relaxed);
            shard.deferred = Some(Box::new(crate::engine::Deferred { keys: big }));
            self.pending.lock().push((db, idx));
        }
    }

    fn finish(&self, _db: usize, _idx: usize, shard: &mut Shard, key: Option<&[u8]>) {
        let Some(mut d) = shard.deferred.take() else { return };
        let mut keep = Vec::new();
        for (k, st) in d.keys.drain(..) {
            if key.is_some_and(|x| x != &*k) {
                keep.push((k, st));
                continue;
            }
            let Ok(mut bv) = st.downcast::<bigvalue::BigValue>() else { continue };
            while let Some(v) = shard.keys.get(&k) {
                if bv.piece(&k, &v, &self.opts) {
                    break;
                }
            }
            self.progress.cow_bytes.fetch_add(bv.bytes() as u64, Ordering::Relaxed);
            self.complete(*bv);
        }
        if !keep.is_empty() {
            shard.deferred = Some(Box::new(crate::engine::Deferred { keys: keep }));
        }
    }
}

impl Chunks {
    /// Queues a finished big value's record, its pieces together (one lock: nothing can
    /// come between them), counted as one key.
    fn complete(&self, bv: bigvalue::BigValue) {
        self.keys.fetch_add(1, Ordering::Relaxed);
        self.deferred.fetch_sub(1, Ordering::Relaxed);
        let pieces = bv.into_pieces();
        let last = pieces.len() - 1;
        self.queue.lock().extend(pieces.into_iter().enumerate().map(|(i, p)| (p, u64::from(i == last))));
    }

    /// Writes one piece of a big value of `shard` (locked); true while some remain there.
    fn step(&self, shard: &mut Shard) -> bool {
        let Some(d) = shard.deferred.as_mut() else { return false };
        let Some((k, st)) = d.keys.first_mut() else {
            shard.deferred = None;
            return false;
        };
        let done = match (st.downcast_mut::<bigvalue::BigValue>(), shard.keys.get(k)) {
            (Some(bv), Some(v)) => bv.piece(k, &v, &self.opts),
            _ => true,
        };
        if done {
            let (_, st) = d.keys.remove(0);
            if let Ok(bv) = st.downcast::<bigvalue::BigValue>() {
                self.complete(*bv);
            }
            if d.keys.is_empty() {
                shard.deferred = None;
            }
        }
        shard.deferred.is_some()
    }
}

/// Ends the snapshot however the save ends (error paths included).
struct Running<'a>(&'a Keyspace);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.snapshots.end();
    }
}

/// What a save wrote.
#[derive(Debug, Clone, Copy, Default)]
pub struct SaveInfo {
    pub keys: u64,
    pub bytes: u64,
}

/// Writes `out`, counting the checksum.
struct Out<W: Write> {
    w: W,
    crc: crc::Digest<'static, u64, crc::Table<16>>,
    bytes: u64,
}

impl<W: Write> Out<W> {
    fn put(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.crc.update(b);
        self.bytes += b.len() as u64;
        self.w.write_all(b)
    }
}

/// Why a snapshot could not start.
pub const ERR_IN_PROGRESS: &str = "Background save already in progress";

/// What an RDB file holds besides the keys: the aux fields and the FUNCTION libraries' code.
#[derive(Default)]
pub struct Header<'a> {
    pub aux: Vec<(&'a str, String)>,
    pub functions: Vec<Vec<u8>>,
}

/// The header: magic, aux fields, then each function library as a `FUNCTION2` record (where
/// Redis writes them, before the databases).
fn header(h: &Header, opts: &SaveOpts) -> Vec<u8> {
    // RDB 11, which Redis 7.2 reads, unless hash-field deadlines may be in the snapshot: they
    // need Valkey's format (see `rdb::RDB_VERSION_VALKEY`).
    let mut head = if crate::engine::hash::field_ttls_ever_set() {
        format!("VALKEY{:03}", rdb::RDB_VERSION_VALKEY).into_bytes()
    } else {
        format!("REDIS{:04}", rdb::RDB_VERSION).into_bytes()
    };
    for (k, v) in &h.aux {
        head.push(rdb::OP_AUX);
        rdb::put_str(&mut head, k.as_bytes(), false);
        rdb::put_str(&mut head, v.as_bytes(), false);
    }
    for code in &h.functions {
        head.push(rdb::OP_FUNCTION2);
        rdb::put_str(&mut head, code, opts.compress);
    }
    head
}

/// EOF and the checksum (0 without `rdbchecksum`, which loaders then skip).
fn footer<W: Write>(mut out: Out<W>, checksum: bool) -> std::io::Result<(u64, W)> {
    out.put(&[rdb::OP_EOF])?;
    let crc = if checksum { out.crc.clone().finalize() } else { 0 };
    out.w.write_all(&crc.to_le_bytes())?;
    Ok((out.bytes + 8, out.w))
}

/// What happens at a snapshot's instant besides the walk: its header is taken there, and an
/// AOF rewrite switches incremental files there (see `exec::aof`).
pub trait SnapshotHooks {
    /// Under the script gate, just before the snapshot begins: the file's header (aux
    /// fields, function libraries) as of the instant.
    fn header(&mut self, ks: &Keyspace) -> std::io::Result<Header<'static>>;
    /// The snapshot's instant is taken with every shard of every database locked, so no
    /// write is between its change and the publication of its effects there (a replica's
    /// stream must start exactly where the snapshot ends).
    fn quiesce(&self) -> bool {
        false
    }
    /// Still under the gate: the snapshot began (its epoch), or could not (None).
    fn begun(&mut self, _epoch: Option<u64>) {}
    /// Aux fields known only at the instant (a replica's sync: the replication ID and offset
    /// the snapshot stands at, and the database the stream has selected), taken right after
    /// `begun`; written before `aof-base`, where Redis writes them.
    fn instant_aux(&mut self) -> Vec<(&'static str, String)> {
        Vec::new()
    }
    /// Every shard has been serialized (every write the snapshot holds is done); the snapshot
    /// is about to end.
    fn walked(&mut self) {}
}

/// A snapshot whose header is fixed before it begins (BGSAVE, SAVE).
pub struct FixedHeader(pub Option<Header<'static>>);

impl SnapshotHooks for FixedHeader {
    fn header(&mut self, _: &Keyspace) -> std::io::Result<Header<'static>> {
        Ok(self.0.take().unwrap_or_default())
    }
}

/// Writes a point-in-time snapshot of the keyspace to `w`: the state at the instant this is
/// called, while other threads go on writing. `hooks`: the header, and what happens at the
/// instant and after the walk.
pub fn write_snapshot<W: Write>(
    ks: &Keyspace,
    w: W,
    hooks: &mut dyn SnapshotHooks,
    opts: SaveOpts,
    form: Form,
    progress: &Arc<Progress>,
) -> std::io::Result<(SaveInfo, W)> {
    snapshot(ks, w, hooks, opts, form, progress, None)
}

/// A point-in-time snapshot of the keys of `slots` (indexed by slot) only, as commands — a
/// slot migration's (cluster mode: database 0).
pub fn write_slots_snapshot<W: Write>(
    ks: &Keyspace,
    w: W,
    hooks: &mut dyn SnapshotHooks,
    opts: SaveOpts,
    slots: Arc<Vec<bool>>,
    progress: &Arc<Progress>,
) -> std::io::Result<(SaveInfo, W)> {
    snapshot(ks, w, hooks, opts, Form::Commands { timestamp: false }, progress, Some(slots))
}

fn snapshot<W: Write>(
    ks: &Keyspace,
    w: W,
    hooks: &mut dyn SnapshotHooks,
    opts: SaveOpts,
    form: Form,
    progress: &Arc<Progress>,
    slots: Option<Arc<Vec<bool>>>,
) -> std::io::Result<(SaveInfo, W)> {
    let sink = Arc::new(Chunks {
        slots,
        opts,
        form,
        queue: Mutex::new(Vec::new()),
        keys: AtomicU64::new(0),
        progress: progress.clone(),
        pending: Mutex::new(Vec::new()),
        deferred: AtomicU64::new(0),
    });
    progress.keys_processed.store(0, Ordering::Relaxed);
    progress.cow_bytes.store(0, Ordering::Relaxed);
    // `cancel` is not cleared here: a cancel may come between the save's request and this
    // start (FLUSHALL, AOF turned off), and must not be lost. It is cleared when a save is
    // asked for.
    progress.keys_total.store((0..ks.num_dbs()).map(|d| ks.dbsize(d) as u64).sum(), Ordering::Relaxed);
    // Not while a script runs: its instant is before or after the whole script.
    let gate = ks.enter_script_gate();
    if ks.snapshots.running() {
        return Err(std::io::Error::other(ERR_IN_PROGRESS));
    }
    let mut head = hooks.header(ks)?;
    let all = hooks.quiesce().then(|| {
        let mut plan = crate::engine::LockPlan::default();
        for db in 0..ks.num_dbs() {
            plan.whole_db(db);
        }
        crate::engine::Locks::acquire(ks, plan)
    });
    let epoch = ks.snapshots.begin(sink.clone());
    hooks.begun(epoch);
    let extra = hooks.instant_aux();
    drop(all);
    if !extra.is_empty() {
        let at = head.aux.iter().position(|(k, _)| *k == "aof-base").unwrap_or(head.aux.len());
        head.aux.splice(at..at, extra);
    }
    if epoch.is_none() {
        return Err(std::io::Error::other(ERR_IN_PROGRESS));
    }
    drop(gate);
    let running = Running(ks);
    let mut out = Out { w, crc: rdb::CRC64.digest(), bytes: 0 };
    out.put(&form.head(&head, &opts))?;
    let drain = |out: &mut Out<W>| -> std::io::Result<()> {
        if progress.cancel.load(Ordering::Relaxed) {
            return Err(std::io::Error::other(CANCELLED));
        }
        let chunks = std::mem::take(&mut *sink.queue.lock());
        for (c, n) in chunks {
            out.put(&c)?;
            progress.keys_processed.fetch_add(n, Ordering::Relaxed);
            save_key_delay(opts.key_delay_us, n, &progress.cancel);
        }
        Ok(())
    };
    // Big values started in a shard are written a piece per lock, before the walk goes on.
    let big = |out: &mut Out<W>| -> std::io::Result<()> {
        loop {
            let Some((db, i)) = sink.pending.lock().pop() else { return Ok(()) };
            let m = &ks.db(db).shards[i];
            loop {
                let mut g = m.lock();
                let more = sink.step(&mut g);
                // Handed to a command waiting for the shard, if any: taking it straight back
                // for the next piece would keep that command waiting for the whole value.
                parking_lot::MutexGuard::unlock_fair(g);
                drain(out)?;
                if !more {
                    break;
                }
            }
        }
    };
    let walked = (|| {
        for db in 0..ks.num_dbs() {
            let Some(d) = ks.db_if_exists(db) else { continue };
            for (i, m) in d.shards.iter().enumerate() {
                crate::lockorder::before_wait(crate::lockorder::Rank::Shard);
                ks.snapshots.visit(db, i, &mut m.lock());
                drain(&mut out)?;
                big(&mut out)?;
            }
        }
        big(&mut out)
    })();
    if walked.is_err() && sink.deferred.load(Ordering::Relaxed) > 0 {
        // Stopped half-way: no shard may keep a started value past the snapshot.
        for db in 0..ks.num_dbs() {
            let Some(d) = ks.db_if_exists(db) else { continue };
            for m in d.shards.iter() {
                m.lock().deferred = None;
            }
        }
    }
    walked?;
    hooks.walked();
    drop(running);
    drain(&mut out)?;
    let (bytes, w) = form.end(out)?;
    Ok((SaveInfo { keys: sink.keys.load(Ordering::Relaxed), bytes }, w))
}

/// `rdb-key-save-delay` (a testing knob of Redis's): microseconds per key written, or with a
/// negative -N one microsecond per N keys. Slept by the snapshot's writer, holding no lock.
fn key_delay(us: i64, keys: u64) {
    let total = if us > 0 {
        us as u64 * keys
    } else if us < 0 {
        keys / us.unsigned_abs()
    } else {
        0
    };
    if total > 0 {
        std::thread::sleep(std::time::Duration::from_micros(total));
    }
}

/// `rdb-key-save-delay` as it is now: CONFIG SET changes it for a save already running
/// (`set_save_delay`), as a test that turns it back to 0 expects the save to end soon.
static SAVE_DELAY_NOW: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(i64::MIN);

/// CONFIG SET rdb-key-save-delay: running saves follow the new value from their next key on.
pub fn set_save_delay(us: i64) {
    SAVE_DELAY_NOW.store(us, Ordering::Relaxed);
}

thread_local! {
    /// This thread writes a save through a background child, which keeps the delay of the
    /// moment it was started (the command that asked for the save), as Redis's forked child
    /// does: a test that resets the delay right after BGSAVE and then kills the child finds
    /// it still running.
    static DELAY_FROZEN: std::cell::Cell<Option<i64>> = const { std::cell::Cell::new(None) };
}

/// The snapshot writer's `key_delay`: slept in slices of at most 10 ms, each time with the
/// delay as it is now (a replica's full sync or a slot export slowed down for a test speeds
/// up once the knob is reset; a save through a background child keeps its own, see
/// `DELAY_FROZEN`) — and stops at once when the save is cancelled (a shutdown killing the
/// AOF rewrite, as Redis kills its child; a child that died).
fn save_key_delay(at_start: i64, keys: u64, cancel: &std::sync::atomic::AtomicBool) {
    let frozen = DELAY_FROZEN.with(|f| f.get());
    let at_start = frozen.unwrap_or(at_start);
    let now = || match SAVE_DELAY_NOW.load(Ordering::Relaxed) {
        _ if frozen.is_some() => at_start,
        i64::MIN => at_start,
        v => v,
    };
    let us = now();
    if us == 0 {
        return;
    }
    let total = if us > 0 { us as u64 * keys } else { keys / us.unsigned_abs() };
    let mut slept = 0u64;
    while slept < total {
        let step = (total - slept).min(10_000);
        std::thread::sleep(std::time::Duration::from_micros(step));
        slept += step;
        if now() == 0 || cancel.load(Ordering::Relaxed) {
            return;
        }
    }
}

/// Calls its argument on every (db, shard) to be written.
pub type ShardWalk<'a> = dyn FnMut(&mut dyn FnMut(usize, &Shard)) + 'a;

/// Writes the keyspace from shards the caller holds locked, all of them (DEBUG RELOAD):
/// nothing changes meanwhile, so no snapshot machinery is needed.
pub fn write_locked<W: Write>(
    shards: &mut ShardWalk<'_>,
    w: W,
    head: &Header,
    opts: SaveOpts,
    form: Form,
) -> std::io::Result<(SaveInfo, W)> {
    let mut out = Out { w, crc: rdb::CRC64.digest(), bytes: 0 };
    out.put(&form.head(head, &opts))?;
    let (mut keys, mut buf, mut err) = (0, Vec::new(), None);
    shards(&mut |db, sh| {
        if err.is_some() {
            return;
        }
        buf.clear();
        keys += form.shard(db, sh, &opts, &mut buf, None);
        if let Err(e) = out.put(&buf) {
            err = Some(e);
        }
    });
    if let Some(e) = err {
        return Err(e);
    }
    let (bytes, w) = form.end(out)?;
    Ok((SaveInfo { keys, bytes }, w))
}

/// Saves a snapshot to `path` as Redis does: into a temporary file in the same directory,
/// fsync'd, then renamed over `path`, and the directory fsync'd, so a crash leaves either
/// the old file or the new one whole.
pub fn save_file(
    ks: &Keyspace,
    path: &Path,
    hooks: &mut dyn SnapshotHooks,
    opts: SaveOpts,
    form: Form,
    progress: &Arc<Progress>,
    autosync: bool,
) -> std::io::Result<SaveInfo> {
    save_with(path, autosync, |w| write_snapshot(ks, w, hooks, opts, form, progress))
}

/// `save_file` through a background child (`persist::child`): the snapshot goes down its
/// pipe, and the child writes, fsyncs and renames the file. The child is finished here either
/// way — told the stream is complete, or killed (SIGUSR1) when the snapshot failed — and how
/// it ended is returned beside the snapshot's own outcome.
pub fn save_through_child(
    ks: &Keyspace,
    mut child: super::child::Child,
    hooks: &mut dyn SnapshotHooks,
    opts: SaveOpts,
    form: Form,
    progress: &Arc<Progress>,
) -> (std::io::Result<SaveInfo>, super::child::Ended) {
    DELAY_FROZEN.with(|f| f.set(Some(child.key_delay_us)));
    let r = write_snapshot(ks, BufWriter::with_capacity(1 << 16, &mut child), hooks, opts, form, progress)
        .and_then(|(info, w)| w.into_inner().map(|_| info).map_err(|e| e.into_error()));
    DELAY_FROZEN.with(|f| f.set(None));
    let ended = child.finish(r.is_ok());
    (r, ended)
}

/// `save_file` with the writing done by `write` (a snapshot, or `write_locked`). With
/// `autosync` (`rdb-save-incremental-fsync`, `aof-rewrite-incremental-fsync`) the file is
/// fsync'd every 4 MB as it is written.
pub fn save_with(
    path: &Path,
    autosync: bool,
    write: impl FnOnce(BufWriter<AutoSync>) -> std::io::Result<(SaveInfo, BufWriter<AutoSync>)>,
) -> std::io::Result<SaveInfo> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    // Redis's name, `temp-<pid>.rdb` (its tests look for it), truncated if a dead process
    // of the same pid left one; a save of this process already writing it (a DEBUG RELOAD
    // beside a BGSAVE) makes this one take a numbered name.
    let own_name = !TEMP_HELD.swap(true, Ordering::AcqRel);
    let tmp = if own_name {
        temp_path(&dir)
    } else {
        dir.join(format!("temp-{}-{}.rdb", std::process::id(), TMP_SEQ.fetch_add(1, Ordering::Relaxed)))
    };
    let created = std::fs::File::create(&tmp);
    let made = created.is_ok();
    let result = (|| {
        let f = AutoSync::new(created?, autosync);
        let (info, w) = write(BufWriter::with_capacity(1 << 20, f))?;
        let f = w.into_inner().map_err(|e| e.into_error())?.file;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)?;
        if let Ok(d) = std::fs::File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(info)
    })();
    if result.is_err() && made {
        let _ = std::fs::remove_file(&tmp);
    }
    if own_name {
        TEMP_HELD.store(false, Ordering::Release);
    }
    result
}

/// A save of this process is writing `temp-<pid>.rdb`.
static TEMP_HELD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A file being written that is fsync'd (data only) every [`AUTOSYNC_BYTES`] when asked to,
/// as Redis's `rioSetAutoSync`: the disk takes a large snapshot as it comes, instead of all at
/// the final fsync, which would stall other writers to the disk (the AOF's fsyncs) meanwhile.
pub struct AutoSync {
    pub file: std::fs::File,
    on: bool,
    unsynced: u64,
}

/// Redis's `REDIS_AUTOSYNC_BYTES`.
pub const AUTOSYNC_BYTES: u64 = 4 << 20;

impl AutoSync {
    pub fn new(file: std::fs::File, on: bool) -> AutoSync {
        AutoSync { file, on, unsynced: 0 }
    }
}

impl Write for AutoSync {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.unsynced += n as u64;
        if self.on && self.unsynced >= AUTOSYNC_BYTES {
            self.file.sync_data()?;
            self.unsynced = 0;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

static TMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// The file a save in `dir` writes before renaming it (Redis's `temp-<pid>.rdb`).
pub fn temp_path(dir: &Path) -> PathBuf {
    dir.join(format!("temp-{}.rdb", std::process::id()))
}

/// What a load reports as it goes, and Redis's `key-load-delay` testing knob.
#[derive(Default)]
pub struct LoadHooks {
    /// Bytes of the file read so far (INFO `loading_loaded_bytes`).
    pub loaded_bytes: AtomicU64,
    pub key_delay_us: std::sync::atomic::AtomicI64,
}

/// What a load found.
#[derive(Debug, Default, Clone)]
pub struct LoadInfo {
    pub version: u16,
    pub keys_loaded: u64,
    pub keys_expired: u64,
    /// (database, name) of the keys skipped as expired, with `LoadOpts::keep_expired`, and
    /// the bytes their DELs take (counted past the cap too: then `expired` is cleared).
    pub expired: Vec<(usize, Box<[u8]>)>,
    pub expired_bytes: usize,
    pub expired_overflow: bool,
    keep_expired: usize,
    /// Empty aggregates Redis would skip (written by old versions).
    pub empty_keys_skipped: u64,
    pub aux: Vec<(String, String)>,
    /// The code of each FUNCTION library (`FUNCTION2` records), for the caller to load.
    pub functions: Vec<Vec<u8>>,
}

/// Reads an RDB stream, handing each live key to `insert(db, key, value, expire_ms)`; keys
/// already past their expiry at `now_ms` are skipped (counted), as a Redis master does.
/// Errors name the offset and, inside a key, the key.
pub fn load<R: Read>(
    r: R,
    opts: &LoadOpts,
    num_dbs: usize,
    now_ms: i64,
    hooks: &LoadHooks,
    insert: impl FnMut(usize, Vec<u8>, Value, Option<i64>) -> Result<(), PersistError>,
) -> Result<LoadInfo, PersistError> {
    load_stream(r, num_dbs, hooks, (opts.any_version, opts.keep_expired), &mut Inline { opts, now_ms, insert })
}

/// What a load does with each key it reads.
trait OnKey<R: Read> {
    /// Reads the value (of type `t`) of `key` from `inp`, and stores it or has it stored.
    /// Err: the message, without the offset.
    fn key(
        &mut self,
        db: usize,
        key: Vec<u8>,
        t: u8,
        exp: Option<i64>,
        inp: &mut Input<R>,
        info: &mut LoadInfo,
    ) -> Result<(), PersistError>;

    /// The stream is read: waits for what is still being stored. Err: the whole message.
    fn finish(&mut self, _info: &mut LoadInfo) -> Result<(), PersistError> {
        Ok(())
    }
}

/// A value's error, naming its key (the caller adds where).
fn key_error(x: rdb::RdbError, key: &[u8]) -> PersistError {
    PersistError::Corrupt(format!("{} loading key '{}'", x.0, String::from_utf8_lossy(key)))
}

/// Where a decoded value goes, as Redis's loader decides: an empty aggregate (written by old
/// versions) is skipped with a warning, a key past its expiry is counted and dropped, any
/// other is stored by `insert`; `info` counts which.
fn place<K: AsRef<[u8]>>(
    db: usize,
    key: K,
    v: Option<Value>,
    exp: Option<i64>,
    now_ms: i64,
    info: &mut LoadInfo,
    insert: impl FnOnce(K, Value) -> Result<(), PersistError>,
) -> Result<(), PersistError> {
    match v {
        None => {
            // As Redis: the first ten are named.
            if info.empty_keys_skipped < 10 {
                if crate::log::shows_user_data() {
                    crate::log_notice!("rdbLoadObject skipping empty key: {}", String::from_utf8_lossy(key.as_ref()));
                } else {
                    // Valkey's words under `hide-user-data-from-log yes`.
                    crate::log_notice!("rdbLoadObject skipping empty key");
                }
            }
            info.empty_keys_skipped += 1
        }
        Some(_) if exp.is_some_and(|t| t < now_ms) => {
            info.keys_expired += 1;
            if info.keep_expired > 0 {
                // `*2 $3 DEL $<len> <key>` and its CRLFs, about.
                info.expired_bytes += key.as_ref().len() + 24;
                if info.expired_bytes > info.keep_expired {
                    info.expired_overflow = true;
                    info.expired = Vec::new();
                } else {
                    info.expired.push((db, key.as_ref().into()));
                }
            }
        }
        Some(v) => {
            insert(key, v)?;
            info.keys_loaded += 1;
        }
    }
    Ok(())
}

/// Decodes each value where it is read and hands it to `insert`.
struct Inline<'a, F> {
    opts: &'a LoadOpts,
    now_ms: i64,
    insert: F,
}

impl<R: Read, F: FnMut(usize, Vec<u8>, Value, Option<i64>) -> Result<(), PersistError>> OnKey<R> for Inline<'_, F> {
    fn key(
        &mut self,
        db: usize,
        key: Vec<u8>,
        t: u8,
        exp: Option<i64>,
        inp: &mut Input<R>,
        info: &mut LoadInfo,
    ) -> Result<(), PersistError> {
        let v = rdb::load::value(t, inp, self.opts).map_err(|x| key_error(x, &key))?;
        if !self.opts.deep {
            super::log_repairs(&key, "Loading");
        }
        place(db, key, v, exp, self.now_ms, info, |key, v| (self.insert)(db, key, v, exp))
    }
}

fn load_stream<R: Read, K: OnKey<R>>(
    r: R,
    num_dbs: usize,
    hooks: &LoadHooks,
    (any_version, keep_expired): (bool, usize),
    on: &mut K,
) -> Result<LoadInfo, PersistError> {
    let mut inp = Input::new(r, true);
    let magic: [u8; 9] = inp.array()?;
    // `rdb-version-check relaxed` (Valkey's) reads a newer file as far as it understands it:
    // an unknown type or opcode still stops the load.
    if magic.starts_with(b"VALKEY") {
        let number = String::from_utf8_lossy(&magic[6..]).to_string();
        if !any_version && magic[6..] != *format!("{:03}", rdb::RDB_VERSION_VALKEY).as_bytes() {
            return Err(PersistError::Unsupported(format!(
                "Can't handle RDB format version {number}: a Valkey file newer than the VALKEY080 Atoll reads"
            )));
        }
        if !magic[6..].iter().all(u8::is_ascii_digit) {
            return Err(PersistError::Corrupt("Wrong signature trying to load DB from file".into()));
        }
    } else if &magic[..5] != b"REDIS" {
        return Err(PersistError::Corrupt("Wrong signature trying to load DB from file".into()));
    }
    let digits = if magic.starts_with(b"VALKEY") { &magic[6..] } else { &magic[5..] };
    let version: u16 = std::str::from_utf8(digits).ok().and_then(|s| s.parse().ok()).unwrap_or(0);
    if version < 1 || (!rdb::version_known(version) && !any_version) {
        return Err(PersistError::Unsupported(format!("Can't handle RDB format version {version}")));
    }
    let mut info = LoadInfo { version, keep_expired, ..LoadInfo::default() };
    let mut db = 0usize;
    let mut expire: Option<i64> = None;
    let e = |inp: &Input<R>, m: PersistError| m.at(inp.pos);
    loop {
        let t = inp.u8()?;
        match t {
            rdb::OP_EXPIRETIME_MS => expire = Some(inp.ms()?),
            rdb::OP_EXPIRETIME => {
                let b: [u8; 4] = inp.array()?;
                expire = Some(i32::from_le_bytes(b) as i64 * 1000);
            }
            rdb::OP_FREQ => {
                inp.u8()?;
            }
            rdb::OP_IDLE => {
                inp.length()?;
            }
            rdb::OP_SELECTDB => {
                let d = inp.length()?;
                if d >= num_dbs as u64 {
                    return Err(PersistError::Refused(format!(
                        "FATAL: Data file was created with a Redis server configured to handle more than {num_dbs} databases. Exiting"
                    )));
                }
                db = d as usize;
            }
            rdb::OP_RESIZEDB => {
                inp.length()?;
                inp.length()?;
            }
            rdb::OP_AUX => {
                let k = inp.string()?;
                let v = inp.string()?;
                info.aux.push((String::from_utf8_lossy(&k).into(), String::from_utf8_lossy(&v).into()));
            }
            rdb::OP_MODULE_AUX => {
                return Err(e(
                    &inp,
                    PersistError::Unsupported("The RDB file contains module data; Atoll loads no modules".into()),
                ))
            }
            rdb::OP_FUNCTION2 => info.functions.push(inp.string().map_err(|x| e(&inp, x.into()))?),
            rdb::OP_FUNCTION_PRE_GA => {
                return Err(e(&inp, PersistError::Unsupported("Pre-GA function format not supported".into())))
            }
            rdb::OP_EOF => break,
            t if rdb::load::is_value_type(t) => {
                let key = inp.string().map_err(|x| e(&inp, x.into()))?;
                let exp = expire.take();
                on.key(db, key, t, exp, &mut inp, &mut info).map_err(|m| e(&inp, m))?;
                hooks.loaded_bytes.store(inp.pos, Ordering::Relaxed);
                let delay = hooks.key_delay_us.load(Ordering::Relaxed);
                if delay != 0 {
                    key_delay(delay, 1);
                }
            }
            t => return Err(e(&inp, PersistError::Corrupt(format!("Unknown RDB opcode or type {t}")))),
        }
    }
    if version >= 5 {
        let computed = inp.checksum();
        let stored = u64::from_le_bytes(inp.array()?);
        if stored != 0 && stored != computed {
            return Err(PersistError::Corrupt(format!(
                "Wrong RDB checksum expected: ({computed:x}) but got ({stored:x}). Aborting now. RDB CRC error"
            )));
        }
    }
    on.finish(&mut info)?;
    Ok(info)
}

/// Loads an RDB file into an empty keyspace at start-up (nothing else runs yet).
/// `lru`: the access clock loaded keys start with.
pub fn load_file(
    ks: &Keyspace,
    path: &Path,
    opts: &LoadOpts,
    now_ms: i64,
    lru: u32,
    hooks: &LoadHooks,
) -> Result<LoadInfo, PersistError> {
    let f = std::fs::File::open(path)?;
    let mut r = std::io::BufReader::with_capacity(1 << 20, f);
    load_into(ks, &mut r, opts, now_ms, lru, hooks)
}

/// Loads an RDB stream into a keyspace nobody else uses yet, leaving `r` just after the RDB
/// (an AOF base with an RDB preamble goes on with commands).
pub fn load_into<R: Read>(
    ks: &Keyspace,
    r: &mut R,
    opts: &LoadOpts,
    now_ms: i64,
    lru: u32,
    hooks: &LoadHooks,
) -> Result<LoadInfo, PersistError> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(MAX_LOADERS);
    let store = Store { ks, lru };
    if threads < 2 {
        return load(r, opts, ks.num_dbs(), now_ms, hooks, |db, key, val, exp| store.insert(db, &key, val, exp));
    }
    // The stream is read here; values are decoded and stored by `threads` threads, each owning
    // the shards `shard % threads == i` (no two threads meet on a shard lock).
    let shared = Decoders { opts: *opts, now_ms, store, error: Mutex::new(None), stop: AtomicBool::new(false) };
    std::thread::scope(|scope| {
        let mut senders = Vec::with_capacity(threads);
        let mut handles = Vec::with_capacity(threads);
        for _ in 0..threads {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(4);
            senders.push(tx);
            let shared = &shared;
            handles.push(scope.spawn(move || shared.run(rx)));
        }
        let mut on =
            Parallel { shared: &shared, senders, batches: (0..threads).map(|_| Batch::default()).collect(), handles };
        load_stream(r, ks.num_dbs(), hooks, (opts.any_version, opts.keep_expired), &mut on)
    })
}

/// Most threads a load decodes on.
const MAX_LOADERS: usize = 8;

/// Stores loaded keys in a keyspace nobody else uses yet.
#[derive(Clone, Copy)]
struct Store<'a> {
    ks: &'a Keyspace,
    lru: u32,
}

impl Store<'_> {
    fn insert(&self, db: usize, key: &[u8], val: Value, exp: Option<i64>) -> Result<(), PersistError> {
        let s = key_shard(key);
        let d = self.ks.db(db);
        crate::lockorder::before_wait(crate::lockorder::Rank::Shard);
        let mut g = d.shards[s].lock();
        if insert_into(&mut g, db, key, val, exp, self.lru)? {
            d.mark_volatile(s);
        }
        Ok(())
    }
}

/// A key read by the stream's reader, for a decoder thread: the key and its value's bytes as
/// read (from file offset `pos`) are ranges of the batch's arena; a type not read that way
/// comes decoded.
struct Record {
    db: usize,
    key: std::ops::Range<usize>,
    exp: Option<i64>,
    pos: u64,
    body: Body,
}

enum Body {
    Raw(u8, std::ops::Range<usize>),
    /// A string value, LZF-compressed: its plain length and compressed bytes.
    Lzf(u64, std::ops::Range<usize>),
    Value(Value),
}

/// Keys for one decoder thread. Their bytes share one arena: one allocation per batch, not
/// two per key (the reader is the pipeline's narrowest stage).
#[derive(Default)]
struct Batch {
    arena: Vec<u8>,
    recs: Vec<Record>,
}

/// What the decoder threads share: the first error any of them met (the load stops there)
/// and the counts.
struct Decoders<'a> {
    opts: LoadOpts,
    now_ms: i64,
    store: Store<'a>,
    error: Mutex<Option<PersistError>, { rank::LEAF }>,
    stop: AtomicBool,
}

impl Decoders<'_> {
    fn run(&self, rx: std::sync::mpsc::Receiver<Batch>) -> LoadInfo {
        let mut c = LoadInfo { keep_expired: self.opts.keep_expired, ..LoadInfo::default() };
        for batch in rx {
            if self.stop.load(Ordering::Relaxed) {
                continue;
            }
            for rec in batch.recs {
                if let Err(m) = self.one(&batch.arena, rec, &mut c) {
                    let mut e = self.error.lock();
                    e.get_or_insert(m);
                    self.stop.store(true, Ordering::Relaxed);
                    break;
                }
            }
        }
        c
    }

    fn one(&self, arena: &[u8], rec: Record, c: &mut LoadInfo) -> Result<(), PersistError> {
        let key = &arena[rec.key.clone()];
        let name = || String::from_utf8_lossy(key).into_owned();
        let v = match rec.body {
            Body::Value(v) => Some(v),
            Body::Lzf(len, range) => {
                Some(Value::from_bytes(&rdb::lzf_value(&arena[range], len).map_err(|x| key_error(x, key).at(rec.pos))?))
            }
            Body::Raw(t, range) => {
                let bytes = &arena[range];
                let mut inp = Input::at(bytes, rec.pos);
                let v = rdb::load::value(t, &mut inp, &self.opts).map_err(|x| key_error(x, key).at(inp.pos))?;
                if !self.opts.deep {
                    super::log_repairs(key, "Loading");
                }
                if inp.pos != rec.pos + bytes.len() as u64 {
                    return Err(PersistError::Corrupt(format!("Trailing bytes loading key '{}'", name())).at(inp.pos));
                }
                v
            }
        };
        place(rec.db, key, v, rec.exp, self.now_ms, c, |key, v| {
            self.store.insert(rec.db, key, v, rec.exp).map_err(|m| m.at(rec.pos))
        })
    }
}

/// Reads past each value (keeping its bytes) and sends it, in batches, to the decoder thread
/// that owns its shard.
struct Parallel<'a, 's> {
    shared: &'a Decoders<'a>,
    senders: Vec<std::sync::mpsc::SyncSender<Batch>>,
    batches: Vec<Batch>,
    handles: Vec<std::thread::ScopedJoinHandle<'s, LoadInfo>>,
}

/// A batch is sent once it holds this many keys or bytes.
const BATCH_KEYS: usize = 512;
const BATCH_BYTES: usize = 1 << 20;

impl<'a, 's> Parallel<'a, 's> {
    fn sent_if_full(&mut self, i: usize) -> Result<(), PersistError> {
        let b = &self.batches[i];
        if b.recs.len() >= BATCH_KEYS || b.arena.len() >= BATCH_BYTES {
            self.send(i)?;
        }
        Ok(())
    }

    fn send(&mut self, i: usize) -> Result<(), PersistError> {
        let b = std::mem::take(&mut self.batches[i]);
        if self.senders[i].send(b).is_err() || self.shared.stop.load(Ordering::Relaxed) {
            return Err(self
                .shared
                .error
                .lock()
                .clone()
                .unwrap_or_else(|| PersistError::Refused("A loader thread stopped".into())));
        }
        Ok(())
    }
}

impl<R: Read> OnKey<R> for Parallel<'_, '_> {
    fn key(
        &mut self,
        db: usize,
        key: Vec<u8>,
        t: u8,
        exp: Option<i64>,
        inp: &mut Input<R>,
        info: &mut LoadInfo,
    ) -> Result<(), PersistError> {
        let pos = inp.pos;
        let i = key_shard(&key) % self.senders.len();
        let b = &mut self.batches[i];
        let k = b.arena.len()..b.arena.len() + key.len();
        b.arena.extend_from_slice(&key);
        if t == rdb::TYPE_STRING {
            // A plain string costs a copy to decode, less than handing it over: stored from
            // here (the shard's lock keeps it apart from the decoders'); an LZF-compressed one
            // goes to a decoder still compressed.
            match inp.int_or_string_deferring_lzf(&mut b.arena).map_err(|x| key_error(x, &key))? {
                Ok(s) => {
                    b.arena.truncate(k.start);
                    let v = match s {
                        rdb::IntOrStr::Int(i) => Value::Int(i),
                        rdb::IntOrStr::Str(s) => Value::from_bytes(&s),
                    };
                    let store = &self.shared.store;
                    return place(db, &key[..], Some(v), exp, self.shared.now_ms, info, |key, v| {
                        store.insert(db, key, v, exp)
                    });
                }
                Err((len, range)) => {
                    b.recs.push(Record { db, key: k, exp, pos, body: Body::Lzf(len, range) });
                    return self.sent_if_full(i);
                }
            }
        }
        // The value's bytes are captured straight into the arena.
        inp.capture = Some(std::mem::take(&mut b.arena));
        let skipped = rdb::load::skip(t, inp);
        b.arena = inp.capture.take().unwrap_or_default();
        let body = match skipped {
            Ok(true) => Body::Raw(t, k.end..b.arena.len()),
            Ok(false) => {
                b.arena.truncate(k.end);
                let v = rdb::load::value(t, inp, &self.shared.opts).map_err(|x| key_error(x, &key))?;
                if !self.shared.opts.deep {
                    super::log_repairs(&key, "Loading");
                }
                match v {
                    Some(v) => Body::Value(v),
                    None => return place(db, &key[..], None, exp, 0, info, |_, _| Ok(())),
                }
            }
            Err(x) => return Err(key_error(x, &key)),
        };
        b.recs.push(Record { db, key: k, exp, pos, body });
        self.sent_if_full(i)
    }

    fn finish(&mut self, info: &mut LoadInfo) -> Result<(), PersistError> {
        for i in 0..self.senders.len() {
            if !self.batches[i].recs.is_empty() {
                let _ = self.send(i);
            }
        }
        self.senders.clear();
        for h in self.handles.drain(..) {
            let c = h.join().map_err(|_| PersistError::Refused("A loader thread panicked".into()))?;
            info.keys_loaded += c.keys_loaded;
            info.keys_expired += c.keys_expired;
            info.expired_bytes += c.expired_bytes;
            info.expired_overflow |= c.expired_overflow || info.expired_bytes > info.keep_expired;
            if info.expired_overflow {
                info.expired = Vec::new();
            } else {
                info.expired.extend(c.expired);
            }
            info.empty_keys_skipped += c.empty_keys_skipped;
        }
        match self.shared.error.lock().take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Adds a loaded key to its (locked) shard; a key already there is a corrupt file. True if
/// the key can expire (a TTL, or a hash with field deadlines): the caller marks the shard for
/// active expiry.
pub fn insert_into(
    sh: &mut Shard,
    db: usize,
    key: &[u8],
    val: Value,
    exp: Option<i64>,
    lru: u32,
) -> Result<bool, PersistError> {
    if sh.keys.contains_key(key) {
        return Err(PersistError::Corrupt(format!(
            "RDB has duplicated key '{}' in DB {db}",
            String::from_utf8_lossy(key)
        )));
    }
    let fields = matches!(&val, Value::Hash(h) if h.has_ttls());
    sh.keys.insert_new(key, crate::engine::Obj { val, lru });
    if let Some(t) = exp {
        sh.expires.insert(key, t);
    }
    if fields {
        sh.note_field_ttls(key);
    }
    Ok(exp.is_some() || fields)
}
