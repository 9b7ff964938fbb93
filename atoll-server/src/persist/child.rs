//! The background child: BGSAVE's file and BGREWRITEAOF's base are written to disk by a child
//! process, as Redis's are, so what operators do with Redis's child acts here too — `kill -9`
//! it to abandon a save, find it with `pgrep -P`, give it its own OOM score
//! (`oom-score-adj-values`' third class), count it (INFO `total_forks`).
//!
//! The snapshot itself stays fork-less (DESIGN: the server's threads serialize it, point in
//! time, while the workers serve); the child is the other end of a pipe. It is this same
//! binary, started with `posix_spawn` (no copy of the server's page tables, unlike a fork: the
//! spawning thread waits about a millisecond, the others not at all), and does one thing:
//! copy its standard input to `temp-<its pid>.rdb` (`temp-rewriteaof-<its pid>.aof`) in the
//! directory it is given, fsync it (every 4 MB too, with the incremental-fsync settings) and
//! rename it: over the RDB file, or to `temp-rewriteaof-bg-<its pid>.aof`, which the server
//! then moves into the AOF directory — Redis's names at each step, which its tests look for.
//!
//! The stream is complete only with its trailer — a magic word and the number of bytes before
//! it — so a child whose parent died, or gave up, never renames a partial file over a good one:
//! it removes its temporary file and exits 1. The parent ends a child early with SIGUSR1, as
//! Redis does, which is not an error (a FLUSHALL, AOF turned off, the server shutting down).

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The argument that makes `atoll-server` a background child (`main` checks for it first).
pub const CHILD_FLAG: &str = "--background-child";

/// How the errors of a child that died begin.
pub const CHILD_ERROR: &str = "the background child";

pub(crate) const MAGIC: &[u8; 8] = b"ATOLLEND";
pub(crate) const TRAILER: usize = 16;

/// What a child writes: Redis's names for the process and its temporary file.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// BGSAVE (and save points): `temp-<pid>.rdb` beside the RDB file.
    Rdb,
    /// BGREWRITEAOF's base file: `temp-rewriteaof-<pid>.aof` in the working directory.
    AofRewrite,
}

impl Kind {
    /// The process's name (`ps`), as Redis titles its children.
    fn title(self) -> &'static str {
        match self {
            Kind::Rdb => "atoll-rdb-bgsave",
            Kind::AofRewrite => "atoll-aof-rewrite",
        }
    }

    /// The file being written.
    fn temp_name(self, pid: u32) -> String {
        match self {
            Kind::Rdb => format!("temp-{pid}.rdb"),
            Kind::AofRewrite => format!("temp-rewriteaof-{pid}.aof"),
        }
    }

    /// Where a complete file goes: the target itself for a snapshot (Redis's child renames
    /// it over `dump.rdb`); for a rewrite, Redis's finished name, which the server moves into
    /// the AOF directory.
    fn done_name(self, pid: u32, dir: &Path, target: &Path) -> PathBuf {
        match self {
            Kind::Rdb => target.to_path_buf(),
            Kind::AofRewrite => dir.join(format!("temp-rewriteaof-bg-{pid}.aof")),
        }
    }

    fn arg(self) -> &'static str {
        match self {
            Kind::Rdb => "rdb",
            Kind::AofRewrite => "aof",
        }
    }
}

/// How a child ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Ended {
    /// The file is in place.
    Saved,
    /// Exited with this code without renaming (an I/O error, or a stream cut short).
    Failed(i32),
    /// Killed by this signal (SIGUSR1: by the server itself, which is no error).
    Signal(i32),
}

/// A running child, and the write end of its pipe.
pub struct Child {
    pub pid: u32,
    pub kind: Kind,
    /// The temporary file the child writes (removed here if the child could not), and
    /// where it puts it when done.
    pub temp: PathBuf,
    done_at: PathBuf,
    target: PathBuf,
    pipe: Option<std::fs::File>,
    written: u64,
    /// Set when the stream is complete: the child's exit is then the save's end, not a death
    /// that should stop the writer.
    done: Arc<AtomicBool>,
    watcher: Option<std::thread::JoinHandle<()>>,
    /// How long spawning took (INFO `latest_fork_usec`).
    pub spawn_us: u64,
    /// `rdb-key-save-delay` when the child was started: the save keeps it.
    pub key_delay_us: i64,
}

/// Starts a child writing `target` (temporary file in `temp_dir`). `on_death` runs (on a
/// watcher thread) if the child dies before the stream is complete, so the writer stops
/// early instead of at its next write to the pipe.
pub fn spawn(
    kind: Kind,
    temp_dir: &Path,
    target: &Path,
    incremental_fsync: bool,
    on_death: impl FnOnce() + Send + 'static,
) -> std::io::Result<Child> {
    use std::os::unix::process::CommandExt;
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors into the array we own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors are new and ours alone.
    let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let start = std::time::Instant::now();
    // `/proc/self/exe`: this very binary even if the file was replaced since (an upgrade).
    // No pre_exec hook, so std uses posix_spawn (vfork-like) rather than fork.
    let spawned = std::process::Command::new("/proc/self/exe")
        .arg0(kind.title())
        .arg(CHILD_FLAG)
        .arg(kind.arg())
        .arg(temp_dir)
        .arg(target)
        .arg(if incremental_fsync { "1" } else { "0" })
        .stdin(std::process::Stdio::from(rd))
        .stdout(std::process::Stdio::null())
        // What the child reports goes to the server's log, as Redis's child logs there (a
        // stray line on standard error is a failure to Redis's test harnesses).
        .stderr(crate::log::log_fd_copy().map_or_else(std::process::Stdio::inherit, std::process::Stdio::from))
        .spawn()?;
    let spawn_us = start.elapsed().as_micros() as u64;
    let pid = spawned.id();
    // The handle is not kept: the child is reaped by pid (`finish`), and the watcher peeks at
    // its end without reaping it.
    drop(spawned);
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let done = done.clone();
        std::thread::Builder::new()
            .name("atoll-child-watch".into())
            .spawn(move || {
                // SAFETY: waitid on our own child's pid, into a zeroed siginfo we own; WNOWAIT
                // leaves it to be reaped by `finish`.
                let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
                let r =
                    unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOWAIT) };
                if r == 0 && !done.load(Ordering::Acquire) {
                    on_death();
                }
            })
            .ok()
    };
    Ok(Child {
        pid,
        kind,
        temp: temp_dir.join(kind.temp_name(pid)),
        done_at: kind.done_name(pid, temp_dir, target),
        target: target.to_path_buf(),
        pipe: Some(std::fs::File::from(wr)),
        written: 0,
        done,
        watcher,
        spawn_us,
        key_delay_us: 0,
    })
}

impl Write for Child {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.pipe.as_mut().ok_or_else(|| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Child {
    /// Where the file goes, when the server decides it after the start (a rewrite's base,
    /// numbered once the rewrite begins). A rewrite's child never renames onto it itself.
    pub fn set_target(&mut self, target: &Path) {
        if self.kind == Kind::AofRewrite {
            self.target = target.to_path_buf();
        }
    }

    /// Ends the child: with `complete`, the stream's trailer goes and the child renames its
    /// file; otherwise it is killed with SIGUSR1. Waits for it to exit and reaps it; a
    /// temporary file it left is removed.
    pub fn finish(mut self, complete: bool) -> Ended {
        if complete {
            let mut t = [0u8; TRAILER];
            t[..8].copy_from_slice(MAGIC);
            t[8..].copy_from_slice(&self.written.to_le_bytes());
            self.done.store(true, Ordering::Release);
            if let Some(p) = self.pipe.as_mut() {
                let _ = p.write_all(&t);
            }
        } else {
            self.done.store(true, Ordering::Release);
            // SAFETY: a signal to our own child, not reaped yet (so the pid is still its).
            unsafe { libc::kill(self.pid as i32, libc::SIGUSR1) };
        }
        self.pipe = None;
        if let Some(w) = self.watcher.take() {
            let _ = w.join();
        }
        let mut status = 0i32;
        // SAFETY: reaps our own child.
        let r = unsafe { libc::waitpid(self.pid as i32, &mut status, 0) };
        let ended = if r != self.pid as i32 {
            Ended::Failed(-1)
        } else if libc::WIFSIGNALED(status) {
            Ended::Signal(libc::WTERMSIG(status))
        } else if libc::WEXITSTATUS(status) == 0 {
            Ended::Saved
        } else {
            Ended::Failed(libc::WEXITSTATUS(status))
        };
        if ended == Ended::Saved && self.done_at != self.target {
            // A rewrite's base: moved into place by the server, as Redis's parent does.
            if let Err(e) = std::fs::rename(&self.done_at, &self.target) {
                crate::log_warning!(
                    "Error trying to rename the temporary AOF base file {} into {}: {}",
                    self.done_at.display(),
                    self.target.display(),
                    crate::log::strerror(&e)
                );
                let _ = std::fs::remove_file(&self.done_at);
                return Ended::Failed(-1);
            }
            sync_dir_of(&self.target);
        }
        if ended != Ended::Saved {
            let _ = std::fs::remove_file(&self.temp);
            let _ = std::fs::remove_file(&self.done_at);
        }
        ended
    }
}

/// The child's whole life: `args` after the flag are the kind, the directory of the temporary
/// file, the target and the incremental-fsync switch. Returns the exit code.
pub fn main(args: &[String]) -> i32 {
    if args.first().is_some_and(|k| k == "repl") {
        return super::transfer::main(&args[1..]);
    }
    let (Some(kind), Some(dir), Some(target), Some(fsync)) = (args.first(), args.get(1), args.get(2), args.get(3))
    else {
        return 2;
    };
    let kind = if kind == "aof" { Kind::AofRewrite } else { Kind::Rdb };
    let temp = Path::new(dir).join(kind.temp_name(std::process::id()));
    let done = kind.done_name(std::process::id(), Path::new(dir), Path::new(target));
    // Reported in Redis's words (rdbSave's and rewriteAppendOnlyFile's), with its child's role.
    let cwd = std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_else(|_| "unknown".into());
    let rdb = kind == Kind::Rdb;
    match copy_in(&temp, fsync == "1") {
        Ok(true) => {}
        Ok(false) => {
            let _ = std::fs::remove_file(&temp);
            return 1;
        }
        Err((opening, e)) => {
            let e = crate::log::strerror(&e);
            crate::log::child_warning(&match (opening, rdb) {
                (true, true) => format!(
                    "Failed opening the temp RDB file {} (in server root dir {cwd}) for saving: {e}",
                    kind.temp_name(std::process::id())
                ),
                (true, false) => format!("Opening the temp file for AOF rewrite in rewriteAppendOnlyFile(): {e}"),
                (false, true) => format!("Write error saving DB on disk: {e}"),
                (false, false) => format!("Write error writing append only file on disk: {e}"),
            });
            let _ = std::fs::remove_file(&temp);
            return 1;
        }
    }
    if let Err(e) = std::fs::rename(&temp, &done) {
        let e = crate::log::strerror(&e);
        crate::log::child_warning(&if rdb {
            format!(
                "Error moving temp DB file {} on the final destination {} (in server root dir {cwd}): {e}",
                kind.temp_name(std::process::id()),
                done.display()
            )
        } else {
            format!("Error moving temp append only file on the final destination: {e}")
        });
        let _ = std::fs::remove_file(&temp);
        return 1;
    }
    sync_dir_of(&done);
    0
}

/// fsync of the directory holding `path`, so a rename into it is durable.
fn sync_dir_of(path: &Path) {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if let Ok(d) = std::fs::File::open(parent) {
        let _ = d.sync_all();
    }
}

/// Copies standard input to `temp`, holding back the last bytes until the end shows whether
/// they are the trailer. Ok(false): the stream ended without its trailer (the parent is gone).
/// Err: (whether the file could not be created, the error).
fn copy_in(temp: &Path, incremental: bool) -> Result<bool, (bool, std::io::Error)> {
    let created = std::fs::File::create(temp).map_err(|e| (true, e))?;
    copy_into(crate::persist::rdbfile::AutoSync::new(created, incremental)).map_err(|e| (false, e))
}

fn copy_into(mut f: crate::persist::rdbfile::AutoSync) -> std::io::Result<bool> {
    let mut input = std::io::stdin().lock();
    let mut buf = vec![0u8; 1 << 20];
    // `held` bytes at the front of `buf` are not written yet: they may be the trailer.
    let mut held = 0usize;
    let mut total = 0u64;
    loop {
        let n = match input.read(&mut buf[held..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let have = held + n;
        let out = have.saturating_sub(TRAILER);
        f.write_all(&buf[..out])?;
        total += out as u64;
        buf.copy_within(out..have, 0);
        held = have - out;
    }
    let t = &buf[..held];
    if held != TRAILER || &t[..8] != MAGIC || u64::from_le_bytes(t[8..].try_into().unwrap_or_default()) != total {
        return Ok(false);
    }
    f.file.sync_all()?;
    Ok(true)
}
