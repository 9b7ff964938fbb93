//! The append-only file as operators drive it: `appendonly yes` at start-up (load the
//! directory, or create it), CONFIG SET appendonly, BGREWRITEAOF, the effect sink that
//! appends every write's effects, and `appendfsync always`'s wait before replies go out.
//!
//! BGREWRITEAOF and the automatic rewrite run on the persistence thread while the workers go
//! on serving, without a fork (`rewrite_concurrent`): the new base is a point-in-time snapshot
//! (`engine::Snapshots`), and at its instant the log starts a new incremental file that the
//! manifest already names. Each write's effects go to the file that completes the base they
//! belong with: writes the snapshot holds to the previous incremental file, later ones to the
//! new file (`AofLog::split`). Once the base is on disk the manifest names it and the new
//! file only. Turning AOF on at runtime runs the same rewrite (`enable`); creating the
//! directory at start-up writes the (empty) first base with every shard locked.

use crate::engine::{LockPlan, Locks};
use crate::exec::{Effect, Server};
use crate::lockorder::rank;
use crate::persist::aof::{self, AofFile, AofLog, CommandReader, Fsync, Manifest, Next};
use crate::persist::{rdbfile, PersistError};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

fn dir(srv: &Server) -> PathBuf {
    aof::dir_path(&srv.config.text(crate::config::p::APPENDDIRNAME))
}

fn fname(srv: &Server) -> String {
    srv.config.text(crate::config::p::APPENDFILENAME)
}

/// Installs `log` as where effects go.
fn install(srv: &Server, log: Option<Arc<AofLog>>) {
    *srv.persistence.aof.log.write() = log.clone();
    match log {
        Some(l) => srv.set_effect_sink(Some(Box::new(move |effects: &[Effect], epoch| {
            l.append(epoch, effects.iter().map(|e| (e.db, e.argv.as_slice())));
        }))),
        None => srv.set_effect_sink(None),
    }
}

/// After a round of commands, before its replies go out: what this thread appended is
/// handed to the kernel, and with `appendfsync always` waited for until it is on disk (every
/// worker's waiting appends share one fsync: group commit). Costs a thread-local read when
/// the round wrote nothing.
///
/// With `always` the round waits for everything appended so far by any worker, not only its
/// own: a reply may report another worker's write (a GET of a key just SET there), and must
/// not go out before that write is on disk either — as in Redis, whose fsync of an event-loop
/// iteration precedes every reply of it. With AOF off it costs the thread-local read and one
/// relaxed load.
///
/// Returns the nanoseconds it took (INFO debug `eventloop_duration_aof_sum`), 0 when there was
/// nothing to do.
pub fn before_replies(srv: &Server) -> u64 {
    let own = aof::take_thread_appended();
    if own == 0 && !srv.effects_enabled() {
        return 0;
    }
    let Some(log) = srv.persistence.aof.log() else { return 0 };
    let upto = if log.policy() == Fsync::Always { own.max(log.appended()) } else { own };
    if upto == 0 {
        return 0;
    }
    let t0 = srv.clock.instant();
    log.before_replies(upto);
    srv.clock.instant().saturating_duration_since(t0).as_nanos() as u64
}

/// AOF is on with `appendfsync always`: every round that writes waits for an fsync.
pub fn fsync_always(srv: &Server) -> bool {
    srv.effects_enabled() && srv.persistence.aof.log().is_some_and(|l| l.policy() == Fsync::Always)
}

/// This worker's round wrote to the AOF, and with `appendfsync always` its replies wait for
/// an fsync.
pub fn round_awaits_fsync(srv: &Server) -> bool {
    aof::thread_appended() && fsync_always(srv)
}

/// `appendfsync`, `aof-timestamp-enabled` or `aof-preallocate` changed.
pub fn set_policy(srv: &Server) {
    if let Some(log) = srv.persistence.aof.log() {
        apply_settings(srv, &log);
    }
}

fn apply_settings(srv: &Server, log: &AofLog) {
    log.policy.store(Fsync::parse(&srv.config.text(crate::config::p::APPENDFSYNC)) as u8, Ordering::Relaxed);
    log.timestamps.store(srv.config.flag(crate::config::p::AOF_TIMESTAMP_ENABLED), Ordering::Relaxed);
    log.preallocate.store(srv.config.flag(crate::config::p::AOF_PREALLOCATE), Ordering::Relaxed);
}

/// Opens an incremental file for appending, with the current settings.
fn open_log(srv: &Server, path: &Path) -> std::io::Result<Arc<AofLog>> {
    let log = AofLog::open(path, Fsync::parse(&srv.config.text(crate::config::p::APPENDFSYNC)))?;
    apply_settings(srv, &log);
    Ok(log)
}

/// Start-up with `appendonly yes`: loads the AOF directory named by the manifest, or creates
/// one from the (empty) dataset; then logs every write.
pub fn start(srv: &Server) -> Result<(), PersistError> {
    let d = dir(srv);
    let manifest_path = d.join(aof::manifest_name(&fname(srv)));
    let manifest = if manifest_path.exists() {
        let text = std::fs::read_to_string(&manifest_path)?;
        Some(Manifest::parse(&text)?)
    } else {
        None
    };
    // An AOF of Redis before 7.0 in `dir` is upgraded in Redis's three cases: no directory
    // or no manifest; a manifest naming nothing; or one naming only that file as the base
    // while the directory lacks it (an upgrade interrupted before the file was moved).
    if Path::new(&fname(srv)).is_file() {
        let upgrade_it = match &manifest {
            None => true,
            Some(m) => {
                m.incr.is_empty() && m.base.as_ref().is_none_or(|b| b.name == fname(srv) && !d.join(&b.name).exists())
            }
        };
        if upgrade_it {
            upgrade(srv, &d)?;
            return start(srv);
        }
    }
    if let Some(m) = manifest {
        load(srv, &d, &m, true)?;
        let last = match m.incr.last() {
            Some(f) => f.clone(),
            None => {
                // A base without incremental files: start one, numbered as Redis numbers
                // incremental files (apart from the base's).
                let seq = 1;
                let f = AofFile { name: aof::incr_name(&fname(srv), seq), seq };
                let mut m2 = m.clone();
                m2.incr.push(f.clone());
                aof::write_manifest(&d, &fname(srv), &m2)?;
                f
            }
        };
        let mut m = m;
        if !m.incr.contains(&last) {
            m.incr.push(last.clone());
        }
        // Sizes as Redis keeps them: the log counts every incremental file, the base apart.
        let size = |f: &AofFile| std::fs::metadata(d.join(&f.name)).map_or(0, |x| x.len());
        let base_size = m.base.as_ref().map_or(0, size);
        let earlier: u64 = m.incr.iter().filter(|f| **f != last).map(size).sum();
        *srv.persistence.aof.manifest.lock() = m;
        let log = open_log(srv, &d.join(&last.name))?;
        log.file_size.fetch_add(earlier, Ordering::Relaxed);
        let a = &srv.persistence.aof;
        a.base_size.store(base_size, Ordering::Relaxed);
        a.rewrite_base.store(base_size + log.file_size.load(Ordering::Relaxed), Ordering::Relaxed);
        install(srv, Some(log));
        Ok(())
    } else {
        let mut locks = lock_all(srv);
        rewrite_locked(srv, &mut locks).map_err(|e| {
            let text = format!("Can't create the AOF directory: {e}");
            PersistError::io(e, text)
        })
    }
}

/// An AOF of Redis before 7.0 — one file, `appendfilename` in `dir` — becomes the base of a
/// multi-part AOF, as Redis 7 upgrades it: moved into the directory under its name, with an
/// empty incremental file and a manifest naming both.
fn upgrade(srv: &Server, d: &Path) -> Result<(), PersistError> {
    let name = fname(srv);
    std::fs::create_dir_all(d)?;
    // The manifest first, as Redis: a crash before the move leaves a state the next start
    // recognises (the third case above) and completes; loading adds the incremental file.
    let m = Manifest { base: Some(AofFile { name: name.clone(), seq: 1 }), history: Vec::new(), incr: Vec::new() };
    aof::write_manifest(d, &name, &m)?;
    std::fs::rename(&name, d.join(&name)).map_err(|e| {
        let text = format!("Error trying to move the old AOF file {name} into dir {}: {}", d.display(), io_text(&e));
        PersistError::io(e, text)
    })?;
    crate::log_notice!(
        "Successfully migrated an old-style AOF file ({name}) into the AOF directory ({}).",
        d.display()
    );
    Ok(())
}

pub(super) fn lock_all(srv: &Server) -> Locks<'_> {
    let mut plan = LockPlan::default();
    for db in 0..srv.ks.num_dbs() {
        plan.whole_db(db);
    }
    Locks::acquire(&srv.ks, plan)
}

/// CONFIG SET appendonly yes|no at runtime.
///
/// Inside EXEC (`in_exec`) the transaction holds shards a running rewrite's walk may need, so
/// the switch is made only if no file replacer runs (`Err(BUSY_INSIDE_EXEC)` otherwise) —
/// the common case, in which nothing is waited for: the first base is written by the
/// persistence thread afterwards, as Redis schedules it.
pub fn set_enabled(srv: &Server, on: bool, in_exec: bool) -> Result<(), PersistError> {
    let running = srv.persistence.aof.log().is_some();
    let _files = if in_exec {
        let Some(g) = srv.persistence.aof.files_lock.try_lock() else {
            return Err(PersistError::Refused(BUSY_INSIDE_EXEC.into()));
        };
        if on && !running {
            crate::log_notice!(
                "AOF was enabled during a transaction. An AOF background was scheduled to start when possible."
            );
        }
        g
    } else {
        // A running rewrite is abandoned (Redis kills its child), and waited for.
        if srv.persistence.aof.rewrite_in_progress.load(Ordering::Acquire) {
            // The child's pid once it runs (a rewrite asked for and not started has none yet).
            let pid = match srv.persistence.child_pid.load(Ordering::Acquire) {
                0 => std::process::id(),
                pid => pid,
            };
            crate::log_notice!("Killing running AOF rewrite child: {pid}");
        }
        srv.persistence.aof.progress.cancel.store(true, Ordering::Relaxed);
        let g = srv.persistence.aof.files_lock.lock();
        srv.persistence.aof.progress.cancel.store(false, Ordering::Relaxed);
        // A rewrite asked for and not begun yet (the persistence thread had not taken the
        // files) is killed too: it must not start once AOF is off, as Redis's child is gone.
        let a = &srv.persistence.aof;
        if !on && running {
            // As Redis's stopAppendOnly, a rewrite scheduled behind a BGSAVE goes too.
            a.rewrite_scheduled.store(false, Ordering::Release);
            if a.rewrite_requested.swap(false, Ordering::AcqRel) {
                crate::daemons::persistence::drop_pending_child(srv);
                a.rewrite_in_progress.store(false, Ordering::Release);
            }
        }
        g
    };
    if on && !running {
        enable(srv)?;
    } else if !on && running {
        if let Some(l) = srv.persistence.aof.log.write().take() {
            srv.set_effect_sink(None);
            l.close();
        }
        let a = &srv.persistence.aof;
        if a.enabling.swap(false, Ordering::AcqRel) {
            // Its first base never came: what it logged meanwhile goes.
            a.rewrite_scheduled.store(false, Ordering::Release);
            a.rewrite_requested.store(false, Ordering::Release);
            crate::daemons::persistence::drop_pending_child(srv);
            a.rewrite_in_progress.store(false, Ordering::Release);
            let d = dir(srv);
            let _ = std::fs::remove_file(d.join(aof::temp_incr_name(&fname(srv))));
            for f in std::mem::take(&mut a.manifest.lock().history) {
                let _ = std::fs::remove_file(d.join(&f.name));
            }
        }
    }
    Ok(())
}

/// `set_enabled` inside EXEC while a rewrite or another switch holds the AOF's files.
pub const BUSY_INSIDE_EXEC: &str = "an AOF rewrite is running: switching AOF inside MULTI/EXEC would wait for it";

/// AOF was turned on and its first base is not written yet: a shutdown now would leave no
/// AOF holding the data (Redis refuses it without FORCE: "Writing initial AOF, can't exit").
pub fn writing_initial(srv: &Server) -> bool {
    let a = &srv.persistence.aof;
    a.enabling.load(Ordering::Acquire) && a.log().is_some()
}

/// SHUTDOWN FORCE while the first base is written: the exit goes ahead without it.
pub fn give_up_initial(srv: &Server) {
    srv.persistence.aof.enabling.store(false, Ordering::Release);
}

/// Turning AOF on at runtime, as Redis 7 does (AOF_WAIT_REWRITE), without holding the
/// dataset: writes are logged from now on to a temporary incremental file no manifest names,
/// and a rewrite — concurrent, as BGREWRITEAOF's — writes the first base. At its instant the
/// log moves on to the real incremental file; once the base is on disk the manifest names
/// the two, and the temporary file goes. A crash before that leaves the files as they were
/// (`appendonly` is still `no` in the config file); a failed rewrite is tried again.
fn enable(srv: &Server) -> std::io::Result<()> {
    let d = dir(srv);
    std::fs::create_dir_all(&d)?;
    let temp = d.join(aof::temp_incr_name(&fname(srv)));
    std::fs::File::create(&temp)?;
    let log = open_log(srv, &temp)?;
    // Before the log is installed: a rewrite that starts must see it.
    srv.persistence.aof.enabling.store(true, Ordering::Release);
    install(srv, Some(log));
    // As BGREWRITEAOF: after a running BGSAVE; one already asked for does it.
    let _ = request_rewrite(srv, false);
    Ok(())
}

/// The form of a base: an RDB (`aof-use-rdb-preamble yes`) or commands.
fn base_form(srv: &Server) -> rdbfile::Form {
    if srv.config.flag(crate::config::p::AOF_USE_RDB_PREAMBLE) {
        rdbfile::Form::Rdb { checksum: srv.config.flag(crate::config::p::RDBCHECKSUM) }
    } else {
        rdbfile::Form::Commands { timestamp: srv.config.flag(crate::config::p::AOF_TIMESTAMP_ENABLED) }
    }
}

/// The sequence numbers of the next base and the next incremental file: two counters, as
/// Redis keeps them (`curr_base_file_seq`, `curr_incr_file_seq`) — a rewrite that failed used
/// up an incremental number, not a base one, so after three failures Redis's next base is the
/// previous one plus one, and its tests look for that name. Past every file of its kind the
/// manifest names (its history too), so no name is taken twice.
fn next_seqs(m: &Manifest) -> (u64, u64) {
    let is_base = |f: &AofFile| f.name.contains(".base.");
    let base = m.base.iter().chain(m.history.iter().filter(|f| is_base(f))).map(|f| f.seq).max().unwrap_or(0);
    let incr = m.incr.iter().chain(m.history.iter().filter(|f| !is_base(f))).map(|f| f.seq).max().unwrap_or(0);
    (base + 1, incr + 1)
}

pub const ERR_REWRITE_RUNNING: &str = "ERR Background append only file rewriting already in progress";

/// BGREWRITEAOF: asks the persistence thread for a rewrite. Redis's replies: already running
/// is an error; while a BGSAVE runs (or inside EXEC) it is scheduled for after it.
pub fn request_rewrite(srv: &Server, in_exec: bool) -> Result<&'static str, &'static str> {
    let a = &srv.persistence.aof;
    if a.rewrite_in_progress.load(Ordering::Acquire) {
        return Err(ERR_REWRITE_RUNNING);
    }
    if in_exec || srv.persistence.in_progress.load(Ordering::Acquire) {
        a.rewrite_scheduled.store(true, Ordering::Release);
        crate::daemons::persistence::wake_thread(srv);
        return Ok("Background append only file rewriting scheduled");
    }
    a.rewrite_in_progress.store(true, Ordering::Release);
    // A cancel of an earlier rewrite must not end this one; one from now on does.
    a.progress.cancel.store(false, Ordering::Relaxed);
    crate::daemons::persistence::prespawn(srv, crate::persist::child::Kind::AofRewrite);
    a.rewrite_requested.store(true, Ordering::Release);
    crate::daemons::persistence::wake_thread(srv);
    Ok("Background append only file rewriting started")
}

/// On the persistence thread: runs a requested or scheduled rewrite (a scheduled one once no
/// BGSAVE runs). True if one ran.
pub fn run_requested(srv: &Server) -> bool {
    let a = &srv.persistence.aof;
    if a.rewrite_scheduled.load(Ordering::Acquire)
        && !srv.persistence.in_progress.load(Ordering::Acquire)
        && !a.rewrite_in_progress.load(Ordering::Acquire)
        && !rewrite_limited(srv)
    {
        // The child first, as Redis forks before anything shows the rewrite running: whoever
        // sees `aof_rewrite_in_progress:1` finds its child (and the child took the settings
        // of that moment, `rdb-key-save-delay` among them).
        crate::daemons::persistence::prespawn(srv, crate::persist::child::Kind::AofRewrite);
        if a.rewrite_in_progress.swap(true, Ordering::AcqRel) {
            crate::daemons::persistence::drop_pending_child(srv);
        } else {
            a.rewrite_scheduled.store(false, Ordering::Release);
            a.progress.cancel.store(false, Ordering::Relaxed);
            a.rewrite_requested.store(true, Ordering::Release);
        }
    }
    if !a.rewrite_requested.swap(false, Ordering::AcqRel) {
        return false;
    }
    rewrite_concurrent(srv);
    true
}

/// A rewrite while the workers go on serving (see the module's comment). Records the outcome
/// for INFO; a failure leaves the previous files and the new incremental file named by the
/// manifest, so nothing is lost.
fn rewrite_concurrent(srv: &Server) {
    let a = &srv.persistence.aof;
    let _files = a.files_lock.lock();
    a.rewrite_in_progress.store(true, Ordering::Release);
    let start = std::time::Instant::now();
    a.rewrite_started_ms.store(srv.now_ms(), Ordering::Relaxed);
    let r = rewrite_files(srv);
    a.last_rewrite_secs.store(start.elapsed().as_secs() as i64, Ordering::Relaxed);
    a.last_cow_bytes.store(a.progress.cow_bytes.load(Ordering::Relaxed), Ordering::Relaxed);
    a.rewrite_started_ms.store(0, Ordering::Relaxed);
    match r {
        Ok(()) => {
            a.last_rewrite_failed.store(false, Ordering::Relaxed);
            a.consecutive_failures.store(0, Ordering::Relaxed);
            crate::log_notice!("Background AOF rewrite terminated with success");
            crate::log_notice!("Background AOF rewrite finished successfully");
        }
        // Called off by the server (AOF turned off, a shutdown): no failure, as Redis's
        // SIGUSR1 to its child is none.
        Err(e) if e.to_string() == rdbfile::CANCELLED => {}
        Err(e) => {
            a.last_rewrite_failed.store(true, Ordering::Relaxed);
            a.consecutive_failures.fetch_add(1, Ordering::Relaxed);
            crate::log_warning!("Background AOF rewrite failed: {e}");
            // AOF turned on waits for its first base: tried again (as Redis's cron does).
            if writing_initial(srv) {
                a.rewrite_scheduled.store(true, Ordering::Release);
            }
        }
    }
    a.rewrite_in_progress.store(false, Ordering::Release);
}

/// What happens at the rewrite's instant: the libraries are copied and the log splits, both
/// under the libraries' lock, so a FUNCTION command is wholly before (in the base) or after
/// (in the new file); after the walk the log appends to the new file only.
struct RewriteHooks<'a> {
    srv: &'a Server,
    log: Option<Arc<AofLog>>,
    incr: PathBuf,
    /// `incr` is the temporary file of AOF turned on (made afresh at the split).
    fresh: bool,
    functions:
        Option<crate::lockorder::RwLockReadGuard<'a, crate::services::scripts::FunctionsState, { rank::FUNCTIONS }>>,
    split: bool,
    /// The log split to the new file (it appends there from now on).
    split_done: bool,
    unsplit: std::io::Result<()>,
}

impl RewriteHooks<'_> {
    fn unsplit(&mut self) {
        if std::mem::take(&mut self.split) {
            if let Some(log) = &self.log {
                self.unsplit = log.unsplit();
            }
        }
    }
}

impl rdbfile::SnapshotHooks for RewriteHooks<'_> {
    fn header(&mut self, ks: &crate::engine::Keyspace) -> std::io::Result<rdbfile::Header<'static>> {
        let f = self.srv.scripts.functions.read();
        let head = crate::daemons::persistence::header_with(self.srv, true, &f);
        if let Some(log) = &self.log {
            if self.fresh {
                // AOF turned on: the log may be appending to this very name (the file opened
                // when it was turned on, or a failed try's). What that file holds is before
                // this instant, in the base about to be written, and was never in effect: its
                // name goes (the log goes on writing to it until the split), and the writes
                // after the instant start a new file under it, as Redis opens a new temporary
                // INCR file for each try.
                let _ = std::fs::remove_file(&self.incr);
            }
            // Nothing can begin a snapshot meanwhile (the caller holds the script gate).
            log.split(&self.incr, ks.snapshots.epoch() + 1)?;
            self.split = true;
            self.split_done = true;
        }
        self.functions = Some(f);
        Ok(head)
    }

    fn begun(&mut self, epoch: Option<u64>) {
        self.functions = None;
        if epoch.is_none() {
            self.unsplit();
        }
    }

    fn walked(&mut self) {
        self.unsplit();
    }
}

fn rewrite_files(srv: &Server) -> std::io::Result<()> {
    let a = &srv.persistence.aof;
    let d = dir(srv);
    std::fs::create_dir_all(&d)?;
    let name = fname(srv);
    let old = a.manifest.lock().clone();
    let (base_seq, incr_seq) = next_seqs(&old);
    let form = base_form(srv);
    let base =
        AofFile { name: aof::base_name(&name, base_seq, matches!(form, rdbfile::Form::Rdb { .. })), seq: base_seq };
    let incr = AofFile { name: aof::incr_name(&name, incr_seq), seq: incr_seq };
    // With AOF off (BGREWRITEAOF anyway, as Redis allows) only a base is written.
    let log = a.log();
    // AOF turned on at runtime: no manifest is written before the first base is.
    let enabling = a.enabling.load(Ordering::Acquire);
    if log.is_some() && !enabling {
        // The new incremental file is named before anything is appended to it: a crash
        // during the rewrite loads the previous files, then this one.
        std::fs::File::create(d.join(&incr.name))?.sync_all()?;
        let mut m = old.clone();
        m.incr.push(incr.clone());
        aof::write_manifest(&d, &name, &m)?;
        *a.manifest.lock() = m;
    }
    // AOF turned on at runtime: until a try succeeds, the writes after its instant go to a
    // temporary file (Redis's `temp-<name>.incr`), renamed to the first incremental file when
    // the base is on disk, removed when the try fails — failed tries use up no file number.
    let temp = d.join(aof::temp_incr_name(&name));
    let fresh = enabling && log.is_some();
    let mut hooks = RewriteHooks {
        srv,
        log: log.clone(),
        incr: if fresh { temp.clone() } else { d.join(&incr.name) },
        fresh,
        functions: None,
        split: false,
        split_done: false,
        unsplit: Ok(()),
    };
    let opts = crate::persist::save_opts(&srv.config);
    let autosync = srv.config.flag(crate::config::p::AOF_REWRITE_INCREMENTAL_FSYNC);
    // Written by a background child, its temporary file in the working directory as Redis's
    // (`temp-rewriteaof-bg-<pid>.aof`), renamed by it into the AOF directory.
    let target = d.join(&base.name);
    let kind = crate::persist::child::Kind::AofRewrite;
    let child = crate::daemons::persistence::take_child(srv, kind).map(Ok).unwrap_or_else(|| {
        crate::daemons::persistence::start_child(srv, kind, std::path::Path::new("."), &target, autosync, &a.progress)
    });
    let r = match child {
        Ok(mut child) => {
            child.set_target(&target);
            crate::log_notice!("Background append only file rewriting started by pid {}", child.pid);
            let (r, ended) = rdbfile::save_through_child(&srv.ks, child, &mut hooks, opts, form, &a.progress);
            srv.persistence.child_pid.store(0, Ordering::Release);
            crate::daemons::persistence::child_outcome(r, ended, "Background AOF rewrite")
        }
        Err(e) => {
            crate::log_warning!("Can't rewrite append only file in background: fork: {e}");
            Err(e)
        }
    };
    hooks.unsplit();
    let r = r.and_then(|info| hooks.unsplit.map(|()| info)).and_then(|info| {
        if hooks.fresh {
            std::fs::rename(&temp, d.join(&incr.name))?;
        }
        let m = Manifest {
            base: Some(base.clone()),
            history: kept_history(srv, &old),
            incr: if log.is_some() { vec![incr.clone()] } else { Vec::new() },
        };
        aof::write_manifest(&d, &name, &m)?;
        Ok((m, info))
    });
    let (m, info) = match r {
        Ok(x) => x,
        Err(e) => {
            let _ = std::fs::remove_file(d.join(&base.name));
            if hooks.fresh && hooks.split_done {
                // What the temporary file holds is in memory and in no file that counts (AOF
                // is not on until a base is): it goes, as Redis's does after each failed try
                // (the log writes on to it, unnamed, until the next try's instant).
                if std::fs::remove_file(&temp).is_ok() {
                    crate::log_notice!(
                        "Removing the temp incr aof file {} in the background",
                        aof::temp_incr_name(&name)
                    );
                }
            }
            return Err(e);
        }
    };
    adopt(srv, &d, m, info.bytes);
    if enabling {
        let _ = std::fs::remove_file(d.join(aof::temp_incr_name(&name)));
        a.enabling.store(false, Ordering::Release);
    }
    Ok(())
}

/// `aof-disable-auto-gc yes` (Redis's, for its tests and for keeping old files): the files a
/// rewrite replaced stay on disk, named `type h` in the manifest, in Redis's order — this
/// rewrite's incremental files (newest first), its base, then the history before.
fn kept_history(srv: &Server, old: &Manifest) -> Vec<AofFile> {
    if !srv.config.flag(crate::config::p::AOF_DISABLE_AUTO_GC) {
        return Vec::new();
    }
    let mut h: Vec<AofFile> = old.incr.iter().rev().cloned().collect();
    h.extend(old.base.clone());
    h.extend(old.history.iter().cloned());
    h
}

/// `aof-disable-auto-gc no` again: the history files go, from the manifest first (written
/// before a file is removed, so it never names a missing one), then from the disk.
pub fn delete_history(srv: &Server) -> std::io::Result<()> {
    let a = &srv.persistence.aof;
    let _files = a.files_lock.lock();
    let mut m = a.manifest.lock().clone();
    if m.history.is_empty() {
        return Ok(());
    }
    let gone = std::mem::take(&mut m.history);
    let d = dir(srv);
    aof::write_manifest(&d, &fname(srv), &m)?;
    *a.manifest.lock() = m;
    for f in gone {
        let _ = std::fs::remove_file(d.join(&f.name));
    }
    Ok(())
}

/// Stops a running rewrite (shutdown: Redis kills its child) and waits until its files are
/// settled: the manifest then names the previous files and the new incremental file.
pub fn stop_rewrite(srv: &Server) {
    let a = &srv.persistence.aof;
    if a.rewrite_in_progress.load(Ordering::Acquire) {
        crate::log_warning!("There is a child rewriting the AOF. Killing it!");
    }
    a.rewrite_requested.store(false, Ordering::Release);
    a.rewrite_scheduled.store(false, Ordering::Release);
    a.progress.cancel.store(true, Ordering::Relaxed);
    crate::daemons::persistence::drop_pending_child(srv);
    drop(a.files_lock.lock());
}

/// Creating the AOF directory at start-up, with every shard held by `locks`: a new base holding
/// the dataset, a new empty incremental file, the manifest naming them; the previous files are
/// removed once the manifest no longer names them.
pub fn rewrite_locked(srv: &Server, locks: &mut Locks) -> std::io::Result<()> {
    let d = dir(srv);
    std::fs::create_dir_all(&d)?;
    let name = fname(srv);
    let old = srv.persistence.aof.manifest.lock().clone();
    let (base_seq, incr_seq) = next_seqs(&old);
    let preamble = srv.config.flag(crate::config::p::AOF_USE_RDB_PREAMBLE);
    let base = AofFile { name: aof::base_name(&name, base_seq, preamble), seq: base_seq };
    let incr = AofFile { name: aof::incr_name(&name, incr_seq), seq: incr_seq };
    let opts = crate::persist::save_opts(&srv.config);
    let head = crate::daemons::persistence::header(srv, true);
    let mut visit =
        |f: &mut dyn FnMut(usize, &crate::engine::Shard)| crate::daemons::persistence::each_locked_shard(srv, locks, f);
    let form = base_form(srv);
    let autosync = srv.config.flag(crate::config::p::AOF_REWRITE_INCREMENTAL_FSYNC);
    let info =
        rdbfile::save_with(&d.join(&base.name), autosync, |w| rdbfile::write_locked(&mut visit, w, &head, opts, form))?;
    // With AOF off (BGREWRITEAOF anyway, as Redis allows) only the base is written.
    let on = srv.config.flag(crate::config::p::APPENDONLY);
    let m = Manifest { base: Some(base), history: Vec::new(), incr: if on { vec![incr.clone()] } else { Vec::new() } };
    if on {
        std::fs::File::create(d.join(&incr.name))?.sync_all()?;
    }
    aof::write_manifest(&d, &name, &m)?;
    if on {
        let log = open_log(srv, &d.join(&incr.name))?;
        if let Some(prev) = srv.persistence.aof.log() {
            prev.close();
        }
        install(srv, Some(log));
    }
    adopt(srv, &d, m, info.bytes);
    crate::log_notice!("Background AOF rewrite finished successfully");
    Ok(())
}

/// A rewrite's manifest `m` is on disk (its base `base_bytes` long): it becomes the one in
/// effect, the sizes the automatic rewrite measures start from it, and the files it no longer
/// names are removed.
fn adopt(srv: &Server, d: &Path, m: Manifest, base_bytes: u64) {
    let a = &srv.persistence.aof;
    a.base_size.store(base_bytes, Ordering::Relaxed);
    let mut incr_size = 0;
    if let (Some(log), Some(_)) = (a.log(), m.incr.first()) {
        // The log's file (its commands: without the padding `always` keeps after them).
        incr_size = log.end();
        log.file_size.store(incr_size, Ordering::Relaxed);
    }
    a.rewrite_base.store(base_bytes + incr_size, Ordering::Relaxed);
    a.rewrites.fetch_add(1, Ordering::Relaxed);
    let replaced = std::mem::replace(&mut *a.manifest.lock(), m.clone());
    for f in replaced.base.iter().chain(&replaced.history).chain(&replaced.incr) {
        if !m.incr.contains(f) && m.base.as_ref() != Some(f) && !m.history.contains(f) {
            let _ = std::fs::remove_file(d.join(&f.name));
        }
    }
}

/// Loads the files a manifest names: the base (an RDB, or commands), then each incremental
/// file's commands in order. A torn last command of the last file is cut off when
/// `aof-load-truncated` allows (as Redis, with a warning); anywhere else it is an error.
/// Incremental files are read up to their padding (`aof::content_end`); with `trim` (at
/// start-up) the padding a crash left is cut off too.
fn load(srv: &Server, d: &Path, m: &Manifest, trim: bool) -> Result<(), PersistError> {
    let start = std::time::Instant::now();
    let mut files: Vec<(&AofFile, bool)> = Vec::new();
    if let Some(b) = &m.base {
        files.push((b, false));
    }
    for (i, f) in m.incr.iter().enumerate() {
        files.push((f, i + 1 == m.incr.len()));
    }
    let mut replay = Replay::new(srv);
    let mut keys = 0u64;
    for (f, last) in files {
        let path = d.join(&f.name);
        let file = std::fs::File::open(&path).map_err(|e| {
            let text = format!("Fatal error: can't open the append log file {} for reading: {}", f.name, io_text(&e));
            PersistError::io(e, text)
        })?;
        let size = file.metadata().map_or(0, |x| x.len());
        let end = if Some(f) == m.base.as_ref() { size } else { aof::content_end(&file)? };
        if trim && end < size {
            truncate(&path, end).map_err(|e| {
                let text = format!("Can't cut the padding off {}: {}", f.name, io_text(&e));
                PersistError::io(e, text)
            })?;
        }
        let mut r = std::io::BufReader::with_capacity(1 << 20, std::io::Read::take(file, end));
        let is_rdb =
            std::io::BufRead::fill_buf(&mut r).is_ok_and(|b| b.starts_with(b"REDIS") || b.starts_with(b"VALKEY"));
        if is_rdb {
            // An RDB preamble, then (in an AOF of Redis 4–6) commands after it.
            let opts = crate::persist::load_opts(&srv.config);
            let now = srv.now_ms();
            // Keys past their time are kept (Redis's RDBFLAGS_AOF_PREAMBLE): the incremental
            // files were written against the base's whole keyspace, and a PERSIST or RENAME
            // of such a key must find it (expiry then takes what is still due).
            let keep_all = i64::MIN;
            let info =
                rdbfile::load_into(&srv.ks, &mut r, &opts, keep_all, srv.lru_clock(now), &srv.persistence.loading)
                    .map_err(|e| e.map_text(|m| format!("{m} (in {})", f.name)))?;
            crate::daemons::persistence::install_functions(srv, &info.functions, false)?;
            keys += info.keys_loaded;
            crate::log_notice!("Reading RDB base file on AOF loading...");
        }
        let max_bulk = srv.config.text(crate::config::p::PROTO_MAX_BULK_LEN).parse().unwrap_or(512 << 20);
        let mut reader = CommandReader::new(r, max_bulk);
        let mut multi_at: Option<u64> = None;
        loop {
            let at = reader.offset();
            match reader.read_next().map_err(|e| e.map_text(|m| format!("{m} ({})", f.name)))? {
                Next::Command(argv) => {
                    let name = String::from_utf8_lossy(&argv[0]).to_ascii_lowercase();
                    if name == "multi" {
                        multi_at = Some(at);
                    } else if name == "exec" {
                        multi_at = None;
                    }
                    replay.run(srv, &argv).map_err(|e| e.map_text(|m| format!("{m} ({})", f.name)))?;
                }
                Next::End => {
                    if let Some(at) = multi_at {
                        cut(srv, &path, at, last, "Revert incomplete MULTI/EXEC transaction in AOF file")?;
                        replay.run(srv, &[b"DISCARD".to_vec()])?;
                    }
                    break;
                }
                Next::Truncated(at) => {
                    let at = multi_at.unwrap_or(at);
                    if multi_at.is_some() {
                        replay.run(srv, &[b"DISCARD".to_vec()])?;
                    }
                    cut(srv, &path, at, last, "!!! Warning: short read while loading the AOF file !!!")?;
                    break;
                }
            }
        }
    }
    crate::log_notice!(
        "DB loaded from append only file: {:.3} seconds ({} keys from the base)",
        start.elapsed().as_secs_f64(),
        keys
    );
    Ok(())
}

use crate::log::strerror as io_text;

/// Cuts a torn tail off the last incremental file (`aof-load-truncated yes`).
fn cut(srv: &Server, path: &Path, at: u64, last: bool, what: &str) -> Result<(), PersistError> {
    if !last || !srv.config.flag(crate::config::p::AOF_LOAD_TRUNCATED) {
        return Err(PersistError::Corrupt(format!(
            "Unexpected end of file reading the append only file {} at offset {at}. You can: 1) Make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server.",
            path.display()
        )));
    }
    crate::log_warning!("{what}");
    crate::log_warning!(
        "AOF {} loaded anyway because aof-load-truncated is enabled (truncated at offset {at})",
        path.display()
    );
    Ok(truncate(path, at)?)
}

/// Cuts a file to `len` bytes, durably.
fn truncate(path: &Path, len: u64) -> std::io::Result<()> {
    let f = std::fs::OpenOptions::new().write(true).open(path)?;
    f.set_len(len)?;
    f.sync_all()
}

/// Runs logged commands as a client that is never answered (Redis's AOF fake client).
struct Replay {
    client: crate::exec::client::Client,
}

impl Replay {
    fn new(srv: &Server) -> Replay {
        let h = Arc::new(crate::exec::client::ClientHandle::new(
            srv.clients.next_id(),
            "aof:0".into(),
            String::new(),
            -1,
            true,
            0,
        ));
        let mut client = crate::exec::client::Client::new(h, 0, false);
        client.replaying = true;
        Replay { client }
    }

    fn run(&mut self, srv: &Server, argv: &[Vec<u8>]) -> Result<(), PersistError> {
        let args: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
        if srv.table.lookup(args[0]).is_none() {
            return Err(PersistError::Refused(format!(
                "Unknown command '{}' reading the append only file",
                String::from_utf8_lossy(args[0])
            )));
        }
        let mut out = crate::protocol::Reply::new(self.client.proto);
        self.client.clock = None;
        // In a transaction a blocking command does not block; logged effects never block.
        crate::exec::dispatch(srv, &srv.stats.workers[0], &mut self.client, &args, &mut out);
        if out.buf.first() == Some(&b'-') {
            super::replay_error(srv, super::Replayer::Aof, &args, &out.buf);
        }
        Ok(())
    }
}

/// DEBUG LOADAOF: the dataset is replaced by what the AOF directory holds (after writing what
/// is pending). Runs without holding locks across the replay, so it is not atomic with
/// respect to other clients, and the replay itself is not logged again.
pub fn debug_loadaof(srv: &Server) -> Result<(), PersistError> {
    let _files = srv.persistence.aof.files_lock.lock();
    let log = srv.persistence.aof.log();
    if let Some(l) = &log {
        l.write_pending();
    }
    let d = dir(srv);
    let text = std::fs::read_to_string(d.join(aof::manifest_name(&fname(srv))))?;
    let m = Manifest::parse(&text)?;
    srv.set_effect_sink(None);
    srv.scripts.functions.update(|st| *st = Default::default());
    {
        let mut locks = lock_all(srv);
        for db in 0..srv.ks.num_dbs() {
            for i in 0..crate::engine::SHARDS {
                locks.shard(db, i).empty();
            }
        }
    }
    // Other clients get -LOADING meanwhile, as in Redis (which loads in its only thread).
    srv.persistence.set_loading(true);
    let r = load(srv, &d, &m, false);
    srv.persistence.set_loading(false);
    // What was loaded counts as no change (Redis zeroes its dirty counter here), so it is
    // neither saved again for the save points nor shown in `rdb_changes_since_last_save`.
    let now = crate::daemons::persistence::dirty(srv);
    srv.persistence.dirty_at_save.store(now, Ordering::Relaxed);
    install(srv, log);
    r
}

/// `auto-aof-rewrite-percentage` / `auto-aof-rewrite-min-size` (Redis's serverCron rule):
/// once the AOF is over the minimum size and has grown by the percentage since the last
/// rewrite, rewrite it. Checked by the persistence thread.
/// Redis's `aofRewriteLimited`: after 3 rewrites in a row failed, the automatic and scheduled
/// ones wait 1 minute, then 2, 4 … up to an hour between tries (each failure leaves one more
/// incremental file); BGREWRITEAOF still runs at once. Only the persistence thread asks.
fn rewrite_limited(srv: &Server) -> bool {
    const THRESHOLD: u64 = 3;
    const MAX_MINUTES: i64 = 60;
    // (the next delay in minutes, when the next try may run in unix seconds; 0: none set)
    static LIMIT: parking_lot::Mutex<(i64, i64)> = parking_lot::Mutex::new((0, 0));
    let mut l = LIMIT.lock();
    if srv.persistence.aof.consecutive_failures.load(Ordering::Relaxed) < THRESHOLD {
        *l = (0, 0);
        return false;
    }
    let now = srv.now_ms() / 1000;
    if l.1 != 0 {
        if now < l.1 {
            return true;
        }
        l.1 = 0;
        return false;
    }
    l.0 = if l.0 == 0 { 1 } else { (l.0 * 2).min(MAX_MINUTES) };
    l.1 = now + l.0 * 60;
    crate::log_warning!(
        "Background AOF rewrite has repeatedly failed and triggered the limit, will retry in {} minutes",
        l.0
    );
    true
}

pub fn maybe_auto_rewrite(srv: &Server) {
    let Some(log) = srv.persistence.aof.log() else { return };
    let perc: u64 = srv.config.text(crate::config::p::AUTO_AOF_REWRITE_PERCENTAGE).parse().unwrap_or(0);
    let min: u64 = srv.config.text(crate::config::p::AUTO_AOF_REWRITE_MIN_SIZE).parse().unwrap_or(u64::MAX);
    let base = srv.persistence.aof.rewrite_base.load(Ordering::Relaxed).max(1);
    let current = srv.persistence.aof.base_size.load(Ordering::Relaxed) + log.file_size.load(Ordering::Relaxed);
    if perc == 0 || current <= min || (current * 100 / base).saturating_sub(100) < perc {
        return;
    }
    let a = &srv.persistence.aof;
    if srv.persistence.in_progress.load(Ordering::Acquire)
        || a.rewrite_in_progress.load(Ordering::Acquire)
        || rewrite_limited(srv)
    {
        return;
    }
    // The child before the flag, as for a scheduled rewrite (`run_requested`).
    crate::daemons::persistence::prespawn(srv, crate::persist::child::Kind::AofRewrite);
    if a.rewrite_in_progress.swap(true, Ordering::AcqRel) {
        crate::daemons::persistence::drop_pending_child(srv);
        return;
    }
    a.progress.cancel.store(false, Ordering::Relaxed);
    crate::log_notice!("Starting automatic rewriting of AOF on {}% growth", (current * 100 / base) - 100);
    rewrite_concurrent(srv);
}
