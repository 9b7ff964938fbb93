//! The append-only file as operators drive it: `appendonly yes` at start-up (load the
//! directory, or create it), CONFIG SET appendonly, BGREWRITEAOF, the effect sink that
//! appends every write's effects, and `appendfsync always`'s wait before replies go out.
//!
//! A rewrite (and turning AOF on at runtime) runs with every shard locked: the new base is the
//! dataset at that instant, the new incremental file starts empty, and no effect can fall
//! between them. It blocks writes for the time of writing the base — Redis's forked rewrite
//! does not; making it fork-less and concurrent like BGSAVE is the next step.

use super::{Effect, Server};
use crate::engine::{LockPlan, Locks};
use crate::persist::aof::{self, AofFile, AofLog, CommandReader, Fsync, Manifest, Next};
use crate::persist::rdbfile;
use parking_lot::{Mutex, RwLock};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[derive(Default)]
pub struct AofState {
    log: RwLock<Option<Arc<AofLog>>>,
    manifest: Mutex<Manifest>,
    pub rewrites: AtomicU64,
    pub base_size: AtomicU64,
}

impl AofState {
    /// The open log, if AOF is on.
    pub fn log(&self) -> Option<Arc<AofLog>> {
        self.log.read().clone()
    }
}

fn dir(srv: &Server) -> PathBuf {
    aof::dir_path(&srv.config.get("appenddirname"))
}

fn fname(srv: &Server) -> String {
    srv.config.get("appendfilename")
}

/// Installs `log` as where effects go.
fn install(srv: &Server, log: Option<Arc<AofLog>>) {
    *srv.persistence.aof.log.write() = log.clone();
    match log {
        Some(l) => srv.set_effect_sink(Some(Box::new(move |effects: &[Effect]| {
            l.append(effects.iter().map(|e| (e.db, e.argv.as_slice())));
        }))),
        None => srv.set_effect_sink(None),
    }
}

/// After a round of commands, before its replies go out: what this thread appended is
/// handed to the kernel, and with `appendfsync always` waited for until it is on disk (every
/// worker's waiting appends share one fsync: group commit). Costs a thread-local read when
/// the round wrote nothing.
pub fn before_replies(srv: &Server) {
    let upto = aof::take_thread_appended();
    if upto == 0 {
        return;
    }
    if let Some(log) = srv.persistence.aof.log() {
        log.before_replies(upto);
    }
}

/// `appendfsync` or `aof-timestamp-enabled` changed.
pub fn set_policy(srv: &Server) {
    if let Some(log) = srv.persistence.aof.log() {
        apply_settings(srv, &log);
    }
}

fn apply_settings(srv: &Server, log: &AofLog) {
    log.policy.store(Fsync::parse(&srv.config.get("appendfsync")) as u8, Ordering::Relaxed);
    log.timestamps.store(srv.config.get_bool("aof-timestamp-enabled"), Ordering::Relaxed);
}

/// Opens an incremental file for appending, with the current settings.
fn open_log(srv: &Server, path: &Path) -> std::io::Result<Arc<AofLog>> {
    let log = AofLog::open(path, Fsync::parse(&srv.config.get("appendfsync")))?;
    apply_settings(srv, &log);
    Ok(log)
}

/// Start-up with `appendonly yes`: loads the AOF directory named by the manifest, or creates
/// one from the (empty) dataset; then logs every write.
pub fn start(srv: &Server) -> Result<(), String> {
    let d = dir(srv);
    let manifest_path = d.join(aof::manifest_name(&fname(srv)));
    if manifest_path.exists() {
        let text = std::fs::read_to_string(&manifest_path).map_err(|e| e.to_string())?;
        let m = Manifest::parse(&text)?;
        load(srv, &d, &m)?;
        let last = match m.incr.last() {
            Some(f) => f.clone(),
            None => {
                // A base without incremental files: start one.
                let seq = 1 + m.base.as_ref().map_or(0, |b| b.seq);
                let f = AofFile { name: aof::incr_name(&fname(srv), seq), seq };
                let mut m2 = m.clone();
                m2.incr.push(f.clone());
                aof::write_manifest(&d, &fname(srv), &m2).map_err(|e| e.to_string())?;
                f
            }
        };
        let mut m = m;
        if !m.incr.contains(&last) {
            m.incr.push(last.clone());
        }
        *srv.persistence.aof.manifest.lock() = m;
        let log = open_log(srv, &d.join(&last.name)).map_err(|e| e.to_string())?;
        install(srv, Some(log));
        Ok(())
    } else if Path::new(&fname(srv)).is_file() {
        upgrade(srv, &d)?;
        start(srv)
    } else {
        let mut locks = lock_all(srv);
        rewrite_locked(srv, &mut locks).map_err(|e| format!("Can't create the AOF directory: {e}"))
    }
}

/// An AOF of Redis before 7.0 — one file, `appendfilename` in `dir` — becomes the base of a
/// multi-part AOF, as Redis 7 upgrades it: moved into the directory under its name, with an
/// empty incremental file and a manifest naming both.
fn upgrade(srv: &Server, d: &Path) -> Result<(), String> {
    let name = fname(srv);
    std::fs::create_dir_all(d).map_err(|e| e.to_string())?;
    std::fs::rename(&name, d.join(&name)).map_err(|e| e.to_string())?;
    let incr = AofFile { name: aof::incr_name(&name, 1), seq: 1 };
    std::fs::File::create(d.join(&incr.name)).and_then(|f| f.sync_all()).map_err(|e| e.to_string())?;
    let m = Manifest { base: Some(AofFile { name: name.clone(), seq: 1 }), history: Vec::new(), incr: vec![incr] };
    aof::write_manifest(d, &name, &m).map_err(|e| e.to_string())?;
    crate::log_notice!("Successfully migrated an old-style AOF into the AOF directory {}", d.display());
    Ok(())
}

fn lock_all(srv: &Server) -> Locks<'_> {
    let mut plan = LockPlan::default();
    for db in 0..srv.ks.num_dbs() {
        plan.whole_db(db);
    }
    Locks::acquire(&srv.ks, plan)
}

/// CONFIG SET appendonly yes|no at runtime.
pub fn set_enabled(srv: &Server, on: bool) -> Result<(), String> {
    let running = srv.persistence.aof.log().is_some();
    if on && !running {
        let mut locks = lock_all(srv);
        rewrite_locked(srv, &mut locks).map_err(|e| e.to_string())?;
        crate::log_notice!("Background append only file rewriting started");
    } else if !on && running {
        if let Some(l) = srv.persistence.aof.log.write().take() {
            srv.set_effect_sink(None);
            l.close();
        }
    }
    Ok(())
}

/// BGREWRITEAOF (and turning AOF on), with every shard held by `locks`: a new base holding the
/// dataset, a new empty incremental file, the manifest naming them; the previous files are
/// removed once the manifest no longer names them.
pub fn rewrite_locked(srv: &Server, locks: &mut Locks) -> std::io::Result<()> {
    let d = dir(srv);
    std::fs::create_dir_all(&d)?;
    let name = fname(srv);
    let old = srv.persistence.aof.manifest.lock().clone();
    let seq = old.base.as_ref().map_or(0, |b| b.seq).max(old.incr.last().map_or(0, |i| i.seq)) + 1;
    let preamble = srv.config.get_bool("aof-use-rdb-preamble");
    let base = AofFile { name: aof::base_name(&name, seq, preamble), seq };
    let incr = AofFile { name: aof::incr_name(&name, seq), seq };
    let opts = crate::persist::save_opts(&srv.config);
    let head = super::persistence::header(srv, true);
    let mut visit =
        |f: &mut dyn FnMut(usize, &crate::engine::Shard)| super::persistence::each_locked_shard(srv, locks, f);
    let info = if preamble {
        rdbfile::save_with(&d.join(&base.name), |w| rdbfile::write_locked(&mut visit, w, &head, opts, true))?
    } else {
        rdbfile::save_with(&d.join(&base.name), |mut w| {
            use std::io::Write;
            let (mut keys, mut bytes, mut buf, mut err) = (0, 0, Vec::new(), None);
            // With `aof-timestamp-enabled`, the base starts with the time it was taken.
            if srv.config.get_bool("aof-timestamp-enabled") {
                aof::timestamp_annotation(&mut buf, crate::exec::unix_ms() / 1000);
            }
            // The libraries first, as Redis's rewrite writes them.
            for code in &head.functions {
                aof::encode(&mut buf, &[b"FUNCTION".to_vec(), b"LOAD".to_vec(), code.clone()]);
            }
            w.write_all(&buf)?;
            bytes += buf.len() as u64;
            let mut last_db = None;
            visit(&mut |db, sh| {
                if err.is_some() || sh.keys.is_empty() {
                    return;
                }
                buf.clear();
                if last_db != Some(db) {
                    aof::encode(&mut buf, &[b"SELECT".to_vec(), db.to_string().into_bytes()]);
                    last_db = Some(db);
                }
                sh.keys.for_each(|k, v| {
                    aof::value_commands(&mut buf, k, v, sh.expires.get(k).copied());
                    keys += 1;
                });
                bytes += buf.len() as u64;
                if let Err(e) = w.write_all(&buf) {
                    err = Some(e);
                }
            });
            match err {
                Some(e) => Err(e),
                None => Ok((rdbfile::SaveInfo { keys, bytes }, w)),
            }
        })?
    };
    // With AOF off (BGREWRITEAOF anyway, as Redis allows) only the base is written.
    let on = srv.config.get_bool("appendonly");
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
    *srv.persistence.aof.manifest.lock() = m;
    srv.persistence.aof.base_size.store(info.bytes, Ordering::Relaxed);
    srv.persistence.aof.rewrites.fetch_add(1, Ordering::Relaxed);
    for f in old.base.iter().chain(&old.history).chain(&old.incr) {
        let _ = std::fs::remove_file(d.join(&f.name));
    }
    crate::log_notice!("Background AOF rewrite finished successfully");
    Ok(())
}

/// Loads the files a manifest names: the base (an RDB, or commands), then each incremental
/// file's commands in order. A torn last command of the last file is cut off when
/// `aof-load-truncated` allows (as Redis, with a warning); anywhere else it is an error.
fn load(srv: &Server, d: &Path, m: &Manifest) -> Result<(), String> {
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
            format!("Fatal error: can't open the append log file {} for reading: {}", f.name, io_text(&e))
        })?;
        let mut r = std::io::BufReader::with_capacity(1 << 20, file);
        let is_rdb = std::io::BufRead::fill_buf(&mut r).is_ok_and(|b| b.starts_with(b"REDIS"));
        if is_rdb {
            // An RDB preamble, then (in an AOF of Redis 4–6) commands after it.
            let opts = crate::persist::load_opts(&srv.config);
            let now = srv.now_ms();
            let info = rdbfile::load_into(&srv.ks, &mut r, &opts, now, srv.lru_clock(now), &srv.persistence.loading)
                .map_err(|e| format!("{e} (in {})", f.name))?;
            super::persistence::install_functions(srv, &info.functions, false)?;
            keys += info.keys_loaded;
            crate::log_notice!("Reading RDB base file on AOF loading...");
        }
        let max_bulk = srv.config.get("proto-max-bulk-len").parse().unwrap_or(512 << 20);
        let mut reader = CommandReader::new(r, max_bulk);
        let mut multi_at: Option<u64> = None;
        loop {
            let at = reader.offset();
            match reader.read_next().map_err(|e| format!("{e} ({})", f.name))? {
                Next::Command(argv) => {
                    let name = String::from_utf8_lossy(&argv[0]).to_ascii_lowercase();
                    if name == "multi" {
                        multi_at = Some(at);
                    } else if name == "exec" {
                        multi_at = None;
                    }
                    replay.run(srv, &argv).map_err(|e| format!("{e} ({})", f.name))?;
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
fn cut(srv: &Server, path: &Path, at: u64, last: bool, what: &str) -> Result<(), String> {
    if !last || !srv.config.get_bool("aof-load-truncated") {
        return Err(format!(
            "Unexpected end of file reading the append only file {} at offset {at}. You can: 1) Make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server.",
            path.display()
        ));
    }
    crate::log_warning!("{what}");
    crate::log_warning!(
        "AOF {} loaded anyway because aof-load-truncated is enabled (truncated at offset {at})",
        path.display()
    );
    let f = std::fs::OpenOptions::new().write(true).open(path).map_err(|e| e.to_string())?;
    f.set_len(at).map_err(|e| e.to_string())?;
    f.sync_all().map_err(|e| e.to_string())
}

/// Runs logged commands as a client that is never answered (Redis's AOF fake client).
struct Replay {
    client: super::client::Client,
}

impl Replay {
    fn new(srv: &Server) -> Replay {
        let h = Arc::new(super::client::ClientHandle::new(
            srv.clients.next_id(),
            "aof:0".into(),
            String::new(),
            -1,
            true,
            0,
        ));
        let mut client = super::client::Client::new(h, 0, false);
        client.replaying = true;
        Replay { client }
    }

    fn run(&mut self, srv: &Server, argv: &[Vec<u8>]) -> Result<(), String> {
        let args: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
        if srv.table.lookup(args[0]).is_none() {
            return Err(format!("Unknown command '{}' reading the append only file", String::from_utf8_lossy(args[0])));
        }
        let mut out = crate::protocol::Reply::new(self.client.proto);
        self.client.clock = None;
        // In a transaction a blocking command does not block; logged effects never block.
        super::dispatch(srv, &srv.stats.workers[0], &mut self.client, &args, &mut out);
        Ok(())
    }
}

/// DEBUG LOADAOF: the dataset is replaced by what the AOF directory holds (after writing what
/// is pending). Runs without holding locks across the replay, so it is not atomic with
/// respect to other clients, and the replay itself is not logged again.
pub fn debug_loadaof(srv: &Server) -> Result<(), String> {
    let log = srv.persistence.aof.log();
    if let Some(l) = &log {
        l.write_pending();
    }
    let d = dir(srv);
    let text = std::fs::read_to_string(d.join(aof::manifest_name(&fname(srv)))).map_err(|e| e.to_string())?;
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
    let r = load(srv, &d, &m);
    install(srv, log);
    r
}

/// `auto-aof-rewrite-percentage` / `auto-aof-rewrite-min-size` (Redis's serverCron rule):
/// once the AOF is over the minimum size and has grown by the percentage since the last
/// rewrite, rewrite it. Checked by the persistence thread.
pub fn maybe_auto_rewrite(srv: &Server) {
    let Some(log) = srv.persistence.aof.log() else { return };
    let perc: u64 = srv.config.get("auto-aof-rewrite-percentage").parse().unwrap_or(0);
    let min: u64 = srv.config.get("auto-aof-rewrite-min-size").parse().unwrap_or(u64::MAX);
    let base = srv.persistence.aof.base_size.load(Ordering::Relaxed).max(1);
    let current = base + log.file_size.load(Ordering::Relaxed);
    if perc == 0 || current <= min || (current * 100 / base).saturating_sub(100) < perc {
        return;
    }
    crate::log_notice!("Starting automatic rewriting of AOF on {}% growth", (current * 100 / base) - 100);
    let mut locks = lock_all(srv);
    if let Err(e) = rewrite_locked(srv, &mut locks) {
        crate::log_warning!("Automatic AOF rewrite failed: {e}");
    }
}
