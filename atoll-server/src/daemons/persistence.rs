//! RDB snapshots as operators drive them: SAVE, BGSAVE (and SCHEDULE), `save <seconds>
//! <changes>` points, the start-up load, SHUTDOWN's save, and INFO persistence's figures.
//!
//! Snapshots are fork-less and point-in-time (`engine::Snapshots`): BGSAVE runs on the
//! persistence thread (started with the server) while the workers go on serving, and a shard
//! about to change is serialized first. SAVE runs the same snapshot on the calling worker.

use crate::engine::{Locks, SHARDS};
use crate::exec::Server;
use crate::persist::child::Kind;
use crate::persist::{rdbfile, PersistError};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The RDB file's path: `dbfilename` in the working directory (`dir` changes it).
pub fn rdb_path(srv: &Server) -> PathBuf {
    PathBuf::from(srv.config.text(crate::config::p::DBFILENAME))
}

pub(crate) fn dirty(srv: &Server) -> u64 {
    srv.stats.sum(|c| &c.dirty)
}

/// The aux fields Redis 7.2 writes at the top of a file.
/// (`aof_base`: the file is an AOF's base.)
pub(super) fn header(srv: &Server, aof_base: bool) -> rdbfile::Header<'static> {
    header_with(srv, aof_base, &srv.scripts.functions.read())
}

/// `header`, with the function libraries as the caller holds them.
pub(super) fn header_with(
    srv: &Server,
    aof_base: bool,
    functions: &crate::services::scripts::FunctionsState,
) -> rdbfile::Header<'static> {
    let (allocated, _, _) = crate::services::stats::allocated_bytes();
    let aux = vec![
        ("redis-ver", crate::REDIS_VERSION.to_string()),
        ("redis-bits", "64".into()),
        ("ctime", (srv.now_ms() / 1000).to_string()),
        ("used-mem", allocated.to_string()),
        ("aof-base", (aof_base as u8).to_string()),
    ];
    let functions = functions.libraries.values().map(|l| l.code.to_vec()).collect();
    rdbfile::Header { aux, functions }
}

/// Where the replication history stands, for a file to record (Redis's rdbPopulateSaveInfo):
/// the database the stream has selected, the replication ID and the offset — for a master
/// with a backlog (replicas may continue from it) or a replica that has synced (it may
/// continue with its master after a restart). Read under the feed lock, so ID, offset and
/// database agree; with every shard locked (or a snapshot's instant) the data agrees too.
pub(crate) fn repl_aux(srv: &Server) -> Option<Vec<(&'static str, String)>> {
    let repl = &srv.repl;
    let proxying = repl.proxying.load(Ordering::Acquire);
    let f = repl.feed.lock();
    let db = if proxying {
        if !repl.upstream.synced.load(Ordering::Acquire) {
            return None;
        }
        f.stream_db
    } else {
        f.backlog.as_ref()?;
        f.db.unwrap_or(0)
    };
    let id = srv.replid.lock().clone();
    Some(vec![("repl-stream-db", db.to_string()), ("repl-id", id), ("repl-offset", repl.offset().to_string())])
}

/// A snapshot to the RDB file: its header, and where the replication history stands at its
/// instant (taken with every shard locked when there is a history to record).
struct SaveHooks<'a> {
    srv: &'a Server,
    head: Option<rdbfile::Header<'static>>,
    history: bool,
    at: Option<Vec<(&'static str, String)>>,
}

impl rdbfile::SnapshotHooks for SaveHooks<'_> {
    fn header(&mut self, _: &crate::engine::Keyspace) -> std::io::Result<rdbfile::Header<'static>> {
        Ok(self.head.take().unwrap_or_default())
    }

    fn quiesce(&self) -> bool {
        self.history
    }

    fn begun(&mut self, epoch: Option<u64>) {
        if epoch.is_some() && self.history {
            self.at = repl_aux(self.srv);
        }
    }

    fn instant_aux(&mut self) -> Vec<(&'static str, String)> {
        self.at.take().unwrap_or_default()
    }
}

/// Installs the FUNCTION libraries a load found (through the scripting layer's loader, which
/// the server registers at start). `replace`: a library of the same name is replaced (DEBUG
/// RELOAD MERGE); otherwise it is an error, as in Redis.
pub fn install_functions(srv: &Server, codes: &[Vec<u8>], replace: bool) -> Result<(), PersistError> {
    if codes.is_empty() {
        return Ok(());
    }
    match srv.functions_loader.get() {
        Some(load) => load(srv, codes, replace),
        None => Err(PersistError::Unsupported(
            "The RDB file contains function libraries and no scripting engine is installed".into(),
        )),
    }
}

/// Calls `f` on every shard of every database in use, all of them held in `locks` (writers
/// that need no snapshot because nothing can change: DEBUG RELOAD, FLUSHALL, AOF rewrite).
pub(super) fn each_locked_shard(srv: &Server, locks: &mut Locks, f: &mut dyn FnMut(usize, &crate::engine::Shard)) {
    for db in 0..srv.ks.num_dbs() {
        if srv.ks.db_if_exists(db).is_none() {
            continue;
        }
        for i in 0..SHARDS {
            f(db, locks.shard(db, i));
        }
    }
}

/// Why a snapshot could not be taken, as Redis replies it.
pub const ERR_BGSAVE_RUNNING: &str = crate::persist::ERR_SNAPSHOT_RUNNING;

/// Writes a snapshot to the RDB file now, on this thread (SAVE, SHUTDOWN, DEBUG RELOAD's
/// first half). Records the outcome as Redis does.
pub fn save(srv: &Server) -> Result<rdbfile::SaveInfo, PersistError> {
    let p = &srv.persistence;
    if p.in_progress.swap(true, Ordering::AcqRel) {
        return Err(PersistError::Running);
    }
    p.progress.cancel.store(false, Ordering::Relaxed);
    // Redis saves while its AOF child rewrites; here both are snapshots, one at a time, so
    // SAVE waits for the rewrite's to end.
    while srv.ks.snapshots.running() {
        std::thread::sleep(Duration::from_millis(5));
    }
    let r = write(srv, false);
    p.in_progress.store(false, Ordering::Release);
    r
}

/// Writes the RDB file. `background`: a BGSAVE (or save point), whose failure sets
/// `rdb_last_bgsave_status:err` (and with `stop-writes-on-bgsave-error`, MISCONF); a
/// foreground save (SAVE, the shutdown's) that fails leaves it as it was, as in Redis.
pub fn write(srv: &Server, background: bool) -> Result<rdbfile::SaveInfo, PersistError> {
    let p = &srv.persistence;
    let start_dirty = dirty(srv);
    let now = srv.now_ms();
    p.last_try_ms.store(now, Ordering::Relaxed);
    let path = rdb_path(srv);
    let opts = crate::persist::save_opts(&srv.config);
    let checksum = srv.config.flag(crate::config::p::RDBCHECKSUM);
    let history = srv.repl.proxying.load(Ordering::Acquire) || srv.repl.on();
    let mut head = SaveHooks { srv, head: Some(header(srv, false)), history, at: None };
    let autosync = srv.config.flag(crate::config::p::RDB_SAVE_INCREMENTAL_FSYNC);
    let form = rdbfile::Form::Rdb { checksum };
    let r = if background {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
        let child = take_child(srv, Kind::Rdb).map(Ok);
        match child.unwrap_or_else(|| start_child(srv, Kind::Rdb, dir, &path, autosync, &p.progress)) {
            Ok(child) => {
                let pid = child.pid;
                crate::log_notice!("Background saving started by pid {pid}");
                let (r, ended) = rdbfile::save_through_child(&srv.ks, child, &mut head, opts, form, &p.progress);
                p.child_pid.store(0, Ordering::Release);
                child_outcome(r, ended, "Background saving")
            }
            Err(e) => {
                crate::log_warning!("Can't save in background: fork: {e}");
                Err(e)
            }
        }
    } else {
        rdbfile::save_file(&srv.ks, &path, &mut head, opts, form, &p.progress, autosync)
    };
    p.last_cow_bytes.store(p.progress.cow_bytes.load(Ordering::Relaxed), Ordering::Relaxed);
    match r {
        Ok(info) => {
            saved(srv, start_dirty);
            Ok(info)
        }
        Err(e) if e.to_string() == rdbfile::CANCELLED => {
            crate::log_notice!("Background saving cancelled (FLUSHALL)");
            Err(PersistError::Io(e))
        }
        Err(e) => {
            if background {
                p.set_failed(true);
            }
            if e.to_string().starts_with(crate::persist::child::CHILD_ERROR) {
                return Err(PersistError::Io(e));
            }
            crate::log_warning!(
                "Failed opening the temp RDB file {} (in server root dir {}) for saving: {e}",
                path.display(),
                cwd()
            );
            Err(PersistError::Io(e))
        }
    }
}

/// The RDB file is written (by SAVE, BGSAVE or a replica's full sync on disk): the changes
/// it holds are no longer pending, as Redis's `backgroundSaveDoneHandler` records.
pub(crate) fn saved(srv: &Server, start_dirty: u64) {
    let p = &srv.persistence;
    p.dirty_at_save.store(start_dirty, Ordering::Relaxed);
    srv.lastsave.store(srv.now_ms() / 1000, Ordering::Relaxed);
    p.saves.fetch_add(1, Ordering::Relaxed);
    p.set_failed(false);
    crate::log_notice!("DB saved on disk");
}

/// Starts a background child writing `target` (see `persist::child`), counted and given
/// its OOM score as Redis's forked child; if it dies before the snapshot is complete (a
/// `kill -9`), `progress` is cancelled so the snapshot stops at once.
pub(crate) fn start_child(
    srv: &Server,
    kind: Kind,
    temp_dir: &std::path::Path,
    target: &std::path::Path,
    incremental_fsync: bool,
    progress: &std::sync::Arc<rdbfile::Progress>,
) -> std::io::Result<crate::persist::child::Child> {
    let p = &srv.persistence;
    let died = progress.clone();
    let mut child = crate::persist::child::spawn(kind, temp_dir, target, incremental_fsync, move || {
        died.cancel.store(true, Ordering::Relaxed);
    })?;
    child.key_delay_us = crate::persist::save_opts(&srv.config).key_delay_us;
    p.child_pid.store(child.pid, Ordering::Release);
    count_child(srv, child.pid, child.spawn_us);
    Ok(child)
}

/// A background child started (a file's, or a diskless transfer's): counted (INFO
/// `total_forks`, `latest_fork_usec`) and given the OOM score of Redis's children.
pub(crate) fn count_child(srv: &Server, pid: u32, spawn_us: u64) {
    let p = &srv.persistence;
    p.children_started.fetch_add(1, Ordering::Relaxed);
    p.last_spawn_us.store(spawn_us, Ordering::Relaxed);
    crate::config::process::set_child_oom_score(
        pid,
        &srv.config.text(crate::config::p::OOM_SCORE_ADJ),
        &srv.config.text(crate::config::p::OOM_SCORE_ADJ_VALUES),
    );
}

/// Starts the child of a save that was just asked for and will begin at once, before the
/// command replies, as Redis forks before it answers BGSAVE or BGREWRITEAOF: a client that
/// then looks for the child (`pgrep -P`) finds it. The persistence thread writes through it
/// (`take_child`); without one it starts its own. A failure to start is left for the thread,
/// which meets it again and reports it.
pub fn prespawn(srv: &Server, kind: Kind) {
    let (dir, target, autosync, progress) = match kind {
        Kind::Rdb => {
            let path = rdb_path(srv);
            let dir =
                path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new(".")).to_owned();
            (dir, path, srv.config.flag(crate::config::p::RDB_SAVE_INCREMENTAL_FSYNC), &srv.persistence.progress)
        }
        Kind::AofRewrite => (
            std::path::PathBuf::from("."),
            std::path::PathBuf::from("."),
            srv.config.flag(crate::config::p::AOF_REWRITE_INCREMENTAL_FSYNC),
            &srv.persistence.aof.progress,
        ),
    };
    if let Ok(child) = start_child(srv, kind, &dir, &target, autosync, progress) {
        if let Some(old) = srv.persistence.pending_child.lock().replace(child) {
            old.finish(false);
        }
    }
}

/// The child started for this save by its command, if any (one of another kind is ended).
pub(crate) fn take_child(srv: &Server, kind: Kind) -> Option<crate::persist::child::Child> {
    let c = srv.persistence.pending_child.lock().take()?;
    if c.kind == kind {
        return Some(c);
    }
    c.finish(false);
    None
}

/// A save asked for is called off before it began (AOF turned off, a shutdown): its child,
/// if it has one, is ended (SIGUSR1, no error).
pub fn drop_pending_child(srv: &Server) {
    let c = srv.persistence.pending_child.lock().take();
    if let Some(c) = c {
        c.finish(false);
        srv.persistence.child_pid.store(0, Ordering::Release);
    }
}

/// A save through a child, as one result: the snapshot's error if it failed, else the
/// child's (killed by a signal: Redis's "terminated by signal" line; SIGUSR1 is the server's
/// own doing, a cancel).
pub(crate) fn child_outcome(
    r: std::io::Result<rdbfile::SaveInfo>,
    ended: crate::persist::child::Ended,
    what: &str,
) -> std::io::Result<rdbfile::SaveInfo> {
    use crate::persist::child::Ended;
    match ended {
        Ended::Signal(libc::SIGUSR1) => {
            crate::log_warning!("{what} terminated by signal {}", libc::SIGUSR1);
            Err(std::io::Error::other(rdbfile::CANCELLED))
        }
        Ended::Signal(sig) => {
            crate::log_warning!("{what} terminated by signal {sig}");
            Err(std::io::Error::other(format!("{} was killed by signal {sig}", crate::persist::child::CHILD_ERROR)))
        }
        Ended::Failed(code) => Err(r.err().unwrap_or_else(|| {
            std::io::Error::other(format!("{} exited with {code}", crate::persist::child::CHILD_ERROR))
        })),
        Ended::Saved => r,
    }
}

fn cwd() -> String {
    std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default()
}

/// Starts a BGSAVE on the persistence thread. Err: a snapshot is already being written.
/// `rdb_bgsave_in_progress` is 1 from here on, so a client polling INFO never sees the
/// request as done before it ran.
pub fn bgsave(srv: &Server, schedule: bool, keys_total: u64, spawn_now: bool) -> Result<(), &'static str> {
    let p = &srv.persistence;
    if srv.persistence.aof.rewrite_in_progress.load(Ordering::Acquire) && !schedule {
        return Err("ERR Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.");
    }
    if p.in_progress.swap(true, Ordering::AcqRel) {
        return Err(ERR_BGSAVE_RUNNING);
    }
    // From here a FLUSHALL cancels this save, even before it begins.
    p.progress.cancel.store(false, Ordering::Relaxed);
    p.bgsave_started_ms.store(srv.now_ms(), Ordering::Relaxed);
    // Progress is visible from the reply on (the walk sets the same total when it starts).
    p.progress.keys_total.store(keys_total, Ordering::Relaxed);
    p.progress.keys_processed.store(0, Ordering::Relaxed);
    p.progress.cow_bytes.store(0, Ordering::Relaxed);
    if spawn_now {
        prespawn(srv, Kind::Rdb);
    }
    p.scheduled.store(true, Ordering::Release);
    wake_thread(srv);
    Ok(())
}

/// Wakes the persistence thread (a BGSAVE or rewrite was asked for).
pub fn wake_thread(srv: &Server) {
    srv.persistence.wake();
}

/// Changes since the last successful snapshot (`rdb_changes_since_last_save`).
pub fn changes_since_save(srv: &Server) -> u64 {
    dirty(srv).saturating_sub(srv.persistence.dirty_at_save.load(Ordering::Relaxed))
}

/// The instant a load judges keys expired by: a master's now (keys already expired are not
/// loaded), a replica's never — it keeps them until its master's DELs come, so the commands
/// its master sends find what the master had (Redis's rdbLoad skips expired keys only when
/// iAmMaster()). In cluster mode the node's role is nodes.conf's, loaded before the data.
pub fn expiry_clock(srv: &Server) -> i64 {
    let replica = srv.repl.upstream.following()
        || !srv.config.text(crate::config::p::REPLICAOF).is_empty()
        || srv.cluster.peek(|st| st.me().is_slave()).unwrap_or(false);
    if replica {
        i64::MIN
    } else {
        srv.now_ms()
    }
}

/// Loads the RDB file at start-up, if there is one. Err: the file exists but cannot be
/// loaded (the server must not start with a partial dataset).
pub fn load_at_startup(srv: &Server) -> Result<(), PersistError> {
    let path = rdb_path(srv);
    if !path.exists() {
        return Ok(());
    }
    let start = std::time::Instant::now();
    let mut opts = crate::persist::load_opts(&srv.config);
    // A master keeps the names of keys that expired in the file: with its replication
    // history restored, their DELs go to the replicas that continue it.
    let replica = expiry_clock(srv) == i64::MIN;
    opts.keep_expired = if replica { 0 } else { crate::daemons::replication::backlog_size(srv) };
    let now = srv.now_ms();
    let p = &srv.persistence;
    p.loading_total_bytes.store(std::fs::metadata(&path).map_or(0, |m| m.len()), Ordering::Relaxed);
    let mut info = rdbfile::load_file(&srv.ks, &path, &opts, expiry_clock(srv), srv.lru_clock(now), &p.loading)
        // Redis logs the corruption where it finds it, then why it stops.
        .inspect_err(|e| crate::log_warning!("Internal error in RDB reading -> {e}"))?;
    install_functions(srv, &info.functions, false)?;
    p.last_load_keys_loaded.store(info.keys_loaded, Ordering::Relaxed);
    p.last_load_keys_expired.store(info.keys_expired, Ordering::Relaxed);
    if let Some((_, v)) = info.aux.iter().find(|(k, _)| k == "redis-ver") {
        crate::log_notice!("Loading RDB produced by version {v}");
    }
    if info.empty_keys_skipped > 0 {
        crate::log_notice!(
            "Done loading RDB, keys loaded: {}, keys expired: {}, empty keys skipped: {}.",
            info.keys_loaded,
            info.keys_expired,
            info.empty_keys_skipped
        );
    } else {
        crate::log_notice!("Done loading RDB, keys loaded: {}, keys expired: {}.", info.keys_loaded, info.keys_expired);
    }
    crate::log_notice!("DB loaded from disk: {:.3} seconds", start.elapsed().as_secs_f64());
    let dels = if info.expired_overflow { Err(info.expired_bytes) } else { Ok(std::mem::take(&mut info.expired)) };
    restore_history(srv, &info.aux, replica, dels);
    Ok(())
}

/// The database a file says its replication stream had selected (`repl-stream-db`), if it
/// says one this server has.
pub(crate) fn stream_db_in(aux: &[(String, String)], ndbs: usize) -> Option<usize> {
    aux.iter().find(|(k, _)| k == "repl-stream-db").and_then(|(_, v)| v.parse::<usize>().ok()).filter(|d| *d < ndbs)
}

/// (database, name) of a key the load found expired.
type ExpiredKey = (usize, Box<[u8]>);

/// The replication history an RDB file recorded (`repl-id`, `repl-offset`, `repl-stream-db`),
/// restored at start as Redis restores it: a replica continues with its master from there (a
/// partial resync after a restart); a master keeps it as its second ID, so its replicas
/// continue with it, and feeds them the DELs of the keys that expired while it was down.
/// `expired`: the keys to DEL, or (Err) the bytes of more DELs than the backlog holds — the
/// replicas then need a full sync, as they would from Redis.
fn restore_history(srv: &Server, aux: &[(String, String)], replica: bool, expired: Result<Vec<ExpiredKey>, usize>) {
    let get = |name: &str| aux.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    let id = get("repl-id").filter(|id| id.len() == 40);
    let off = get("repl-offset").and_then(|o| o.parse::<i64>().ok()).filter(|o| *o >= 0);
    let db = stream_db_in(aux, srv.ks.num_dbs());
    let (Some(id), Some(off), Some(db)) = (id, off, db) else { return };
    let repl = &srv.repl;
    let cap = crate::daemons::replication::backlog_size(srv);
    if replica {
        *srv.replid.lock() = id.to_string();
        repl.restart_history(off, cap);
        repl.feed.lock().stream_db = db;
        // As REPLICAOF on a master would (`follow`), whichever of the two came first.
        let up = &repl.upstream;
        *up.master_replid.lock() = id.to_string();
        up.offset.store(off, Ordering::Release);
        up.read_offset.store(off, Ordering::Release);
        up.db.store(db, Ordering::Relaxed);
        up.synced.store(true, Ordering::Release);
    } else {
        *repl.replid2.lock() = Some((id.to_string(), off + 1));
        match expired {
            Ok(keys) => {
                repl.restart_history(off, cap);
                // In pieces, as the backlog trims as it goes.
                for chunk in keys.chunks(1024) {
                    let dels: Vec<crate::exec::Effect> = chunk
                        .iter()
                        .map(|(db, k)| crate::exec::Effect::new(*db, vec![b"DEL".to_vec(), k.to_vec()]))
                        .collect();
                    repl.feed(&srv.reach(), &dels);
                }
            }
            // Past the backlog: what replicas would need is gone, as it is from Redis's.
            Err(bytes) => repl.restart_history(off + bytes as i64, cap),
        }
        repl.alone_since.store(srv.now_ms(), Ordering::Relaxed);
    }
    srv.refresh_effects();
}

/// Saves the dataset from shards the caller holds locked, all of them (DEBUG RELOAD, and
/// FLUSHALL with save points): nothing changes meanwhile, so no snapshot is needed.
pub fn save_locked(srv: &Server, locks: &mut Locks) -> std::io::Result<rdbfile::SaveInfo> {
    save_locked_counting(srv, locks, 0)
}

/// [`save_locked`], the save also holding `pending_dirty` changes not counted yet.
fn save_locked_counting(srv: &Server, locks: &mut Locks, pending_dirty: u64) -> std::io::Result<rdbfile::SaveInfo> {
    let path = rdb_path(srv);
    let start_dirty = dirty(srv) + pending_dirty;
    let opts = crate::persist::save_opts(&srv.config);
    let checksum = srv.config.flag(crate::config::p::RDBCHECKSUM);
    let mut head = header(srv, false);
    if let Some(extra) = repl_aux(srv) {
        let at = head.aux.iter().position(|(k, _)| *k == "aof-base").unwrap_or(head.aux.len());
        head.aux.splice(at..at, extra);
    }
    let mut visit = |f: &mut dyn FnMut(usize, &crate::engine::Shard)| each_locked_shard(srv, locks, f);
    let autosync = srv.config.flag(crate::config::p::RDB_SAVE_INCREMENTAL_FSYNC);
    let info = rdbfile::save_with(&path, autosync, |w| {
        rdbfile::write_locked(&mut visit, w, &head, opts, rdbfile::Form::Rdb { checksum })
    })?;
    srv.persistence.dirty_at_save.store(start_dirty, Ordering::Relaxed);
    srv.lastsave.store(srv.now_ms() / 1000, Ordering::Relaxed);
    Ok(info)
}

/// FLUSHALL's part (Redis's `flushAllDataAndResetRDB`), with every shard locked and the
/// data already emptied: a running BGSAVE is abandoned, and with save points the now empty
/// dataset is saved at once.
/// `pending_dirty`: changes of the running command not counted yet (they are in the save).
pub fn after_flushall(srv: &Server, locks: &mut Locks, pending_dirty: u64) {
    if srv.persistence.in_progress.load(Ordering::Acquire) {
        srv.persistence.progress.cancel.store(true, Ordering::Relaxed);
    }
    // The replicas' snapshot too, as Redis kills whichever RDB child runs: they sync again.
    if let Some((_, progress)) = srv.repl.snapshot.lock().as_ref() {
        progress.cancel.store(true, Ordering::Relaxed);
    }
    if !srv.config.text(crate::config::p::SAVE).is_empty() {
        if let Err(e) = save_locked_counting(srv, locks, pending_dirty) {
            crate::log_warning!("Error saving the DB after FLUSHALL: {e}");
        }
    }
}

/// Empties the whole dataset, the function libraries too (FLUSHALL does not), with every shard
/// locked by the caller. `lazy` (a replica's full sync under `replica-lazy-flush`): the old
/// tables go to the lazyfree thread, counted in INFO's `lazyfreed_objects` as Redis counts
/// them (a key each), instead of being freed here.
pub fn empty_all(srv: &Server, locks: &mut Locks, lazy: bool) {
    srv.scripts.functions.update(|st| *st = Default::default());
    srv.ks.replica_ttls.lock().clear();
    for db in 0..srv.ks.num_dbs() {
        if srv.ks.db_if_exists(db).is_none() {
            continue;
        }
        for i in 0..SHARDS {
            let sh = locks.shard(db, i);
            if lazy && !sh.keys.is_empty() {
                let keys = &sh.keys;
                sh.touch_watched_where(|k| keys.contains_key(k));
                let n = sh.keys.len() as u64;
                srv.lazyfree.free_table((std::mem::take(&mut sh.keys), std::mem::take(&mut sh.expires)), n);
                sh.field_ttls = None;
            } else {
                sh.empty();
            }
        }
    }
}

/// DEBUG RELOAD, with every shard of every database locked by the caller: saves the dataset
/// (unless `save` is false), empties it (unless `flush` is false) and loads the file back.
/// With `merge`, a loaded key replaces one already there; without it that is an error.
/// Returns the file's aux fields.
pub fn reload(
    srv: &Server,
    locks: &mut Locks,
    save: bool,
    flush: bool,
    merge: bool,
) -> Result<Vec<(String, String)>, PersistError> {
    let path = rdb_path(srv);
    let ndbs = srv.ks.num_dbs();
    if save {
        save_locked(srv, locks)?;
    }
    if flush {
        empty_all(srv, locks, false);
    }
    let f = std::fs::File::open(&path)?;
    let opts = crate::persist::load_opts(&srv.config);
    let now = srv.now_ms();
    let clock = expiry_clock(srv);
    let lru = srv.lru_clock(now);
    // The server's hooks: INFO shows the progress, and `key-load-delay` slows this load too
    // (a replica's full sync, DEBUG RELOAD), as in Redis.
    let hooks = &srv.persistence.loading;
    hooks.loaded_bytes.store(0, Ordering::Relaxed);
    srv.persistence.loading_total_bytes.store(f.metadata().map_or(0, |m| m.len()), Ordering::Relaxed);
    let info = rdbfile::load(
        std::io::BufReader::with_capacity(1 << 20, f),
        &opts,
        ndbs,
        clock,
        hooks,
        |db, key, val, exp| {
            let s = crate::engine::key_shard(&key);
            let sh = locks.shard(db, s);
            if merge {
                sh.remove(&key);
            }
            if rdbfile::insert_into(sh, db, &key, val, exp, lru)? {
                srv.ks.db(db).mark_volatile(s);
            }
            Ok(())
        },
    )?;
    install_functions(srv, &info.functions, merge)?;
    srv.persistence.last_load_keys_loaded.store(info.keys_loaded, Ordering::Relaxed);
    srv.persistence.last_load_keys_expired.store(info.keys_expired, Ordering::Relaxed);
    Ok(info.aux)
}

/// The save SHUTDOWN (or SIGTERM/SIGINT) makes before exiting: with SAVE always, by default
/// when `save` points are configured, never with NOSAVE. A BGSAVE still running is waited
/// for first (Redis kills its child; here it is a thread of ours). Err after logging why.
pub fn shutdown_save(srv: &Server, mode: crate::exec::ShutdownMode) -> Result<(), PersistError> {
    let wanted = match mode {
        crate::exec::ShutdownMode::NoSave => false,
        crate::exec::ShutdownMode::Save => true,
        crate::exec::ShutdownMode::Default => !srv.config.text(crate::config::p::SAVE).is_empty(),
    };
    if !wanted {
        return Ok(());
    }
    crate::log_notice!("Saving the final RDB snapshot before exiting.");
    crate::config::supervise::notify("Saving the final RDB snapshot", false, false);
    loop {
        match save(srv) {
            Ok(_) => return Ok(()),
            Err(PersistError::Running) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => {
                crate::log_warning!("Error trying to save the DB, can't exit.");
                crate::config::supervise::notify("Error trying to save the DB, can't exit.", false, false);
                return Err(e);
            }
        }
    }
}
