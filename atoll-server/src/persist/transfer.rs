//! The diskless transfer's child: a full resync sent without a file (`repl-diskless-sync`)
//! is written to the replicas' sockets by a child process, as Redis's is, so what operators
//! do with Redis's transfer child acts here too — find it (`pgrep -P`), `kill -9` it to give
//! the transfer up, let the OOM killer take it rather than the server.
//!
//! As the file child (`persist::child`), it is this same binary started with `posix_spawn`,
//! and the snapshot is made by the server's threads and comes down its standard input. What
//! it does is the sending: it holds a copy of each replica's socket (descriptors 3, 4, …)
//! and writes to every one the replica's head (`+FULLRESYNC …`, `$EOF:<mark>`) and then the
//! same stream, at the pace of the slowest — so the server's workers carry none of it and
//! hold no copy of the snapshot for a slow replica. A replica whose socket fails is dropped
//! and the others go on; each drop is reported on standard output (`drop <i> <bytes sent>
//! <error>`, and at the end `sent <i> <bytes>` for each replica still up), which the server
//! reads to close that replica, to count the bytes and to kill the child once none is left. The server
//! ends a replica that stalls past `repl-timeout` by shutting its socket down, which this
//! child sees as a failure like any other.
//!
//! Standard input: for each replica, its head as a 4-byte little-endian length and the
//! bytes; then the stream; then the file child's trailer. A stream cut short (the server
//! died or gave up) makes the child exit 1 at once; so does its parent's death while a
//! replica is slow to read.

use super::child::{MAGIC, TRAILER};
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The child's process name (`ps`), as Redis titles its `redis-rdb-to-slaves`.
pub const TITLE: &str = "atoll-rdb-to-replicas";

/// The first replica socket's descriptor in the child.
const FIRST_FD: RawFd = 3;

/// A running transfer child: its pid, the write end of its input and the read end of its
/// reports.
pub struct Transfer {
    pub pid: u32,
    pub input: std::fs::File,
    pub reports: std::fs::File,
    pub spawn_us: u64,
}

/// Starts a transfer child for the replica sockets `socks` (the server's own descriptors:
/// the child gets copies, numbered from 3, and watches this process's pid).
pub fn spawn(socks: &[RawFd]) -> std::io::Result<Transfer> {
    let start = std::time::Instant::now();
    let (in_r, in_w) = pipe()?;
    let (out_r, out_w) = pipe()?;
    // Copies numbered above every target, so no dup2 below overwrites a source it still needs.
    let low = FIRST_FD + socks.len() as RawFd + 8;
    let dup = |fd: RawFd| -> std::io::Result<OwnedFd> {
        // SAFETY: F_DUPFD_CLOEXEC on a descriptor the caller keeps open for this call.
        let d = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, low) };
        if d < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: the new descriptor is ours alone.
        Ok(unsafe { OwnedFd::from_raw_fd(d) })
    };
    let src_in = dup(in_r.as_raw_fd())?;
    let src_out = dup(out_w.as_raw_fd())?;
    let copies = socks.iter().map(|&fd| dup(fd)).collect::<std::io::Result<Vec<_>>>()?;
    drop((in_r, out_w));
    let ppid = std::process::id().to_string();
    let n = socks.len().to_string();
    let args = [TITLE, super::child::CHILD_FLAG, "repl", n.as_str(), ppid.as_str()];
    let cargs: Vec<std::ffi::CString> =
        args.iter().map(|a| std::ffi::CString::new(*a).expect("no NUL in the child's arguments")).collect();
    let mut argv: Vec<*mut libc::c_char> = cargs.iter().map(|a| a.as_ptr() as *mut libc::c_char).collect();
    argv.push(std::ptr::null_mut());
    let path = c"/proc/self/exe";
    let mut pid: libc::pid_t = 0;
    // SAFETY: the file actions are initialised, used and destroyed here; every descriptor
    // named is open for the call; argv and environ are NULL-terminated arrays that outlive it.
    let rc = unsafe {
        let mut fa: libc::posix_spawn_file_actions_t = std::mem::zeroed();
        libc::posix_spawn_file_actions_init(&mut fa);
        libc::posix_spawn_file_actions_adddup2(&mut fa, src_in.as_raw_fd(), 0);
        libc::posix_spawn_file_actions_adddup2(&mut fa, src_out.as_raw_fd(), 1);
        for (i, c) in copies.iter().enumerate() {
            libc::posix_spawn_file_actions_adddup2(&mut fa, c.as_raw_fd(), FIRST_FD + i as RawFd);
        }
        extern "C" {
            static environ: *const *mut libc::c_char;
        }
        let rc = libc::posix_spawn(&mut pid, path.as_ptr(), &fa, std::ptr::null(), argv.as_ptr(), environ);
        libc::posix_spawn_file_actions_destroy(&mut fa);
        rc
    };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    Ok(Transfer {
        pid: pid as u32,
        input: std::fs::File::from(in_w),
        reports: std::fs::File::from(out_r),
        spawn_us: start.elapsed().as_micros() as u64,
    })
}

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors into the array we own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors are new and ours alone.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The child's whole life (`args`: the number of replica sockets, the parent's pid).
/// Exit 0: the stream went whole to every replica not dropped; 1: it was cut short.
pub fn main(args: &[String]) -> i32 {
    let (Some(n), Some(ppid)) =
        (args.first().and_then(|s| s.parse::<usize>().ok()), args.get(1).and_then(|s| s.parse::<i32>().ok()))
    else {
        return 2;
    };
    let mut t = Sender { socks: (0..n).map(|i| Some(FIRST_FD + i as RawFd)).collect(), sent: vec![0; n], ppid };
    match t.run() {
        Ok(true) => {
            // What each replica still up got, for the server's count of replication output.
            let mut out = std::io::stdout().lock();
            for (i, n) in t.sent.iter().enumerate() {
                if t.socks[i].is_some() && writeln!(out, "sent {i} {n}").is_err() {
                    return 1;
                }
            }
            if out.flush().is_err() {
                return 1;
            }
            0
        }
        Ok(false) => 1,
        Err(e) => {
            eprintln!("transfer child: {e}");
            1
        }
    }
}

struct Sender {
    /// Each replica's socket; None once dropped.
    socks: Vec<Option<RawFd>>,
    /// Bytes written to each.
    sent: Vec<u64>,
    ppid: i32,
}

impl Sender {
    fn run(&mut self) -> std::io::Result<bool> {
        let mut input = Input { fd: 0, total: 0 };
        // The heads, each to its own replica.
        for i in 0..self.socks.len() {
            let mut len = [0u8; 4];
            if !input.read_exact(&mut len)? {
                return Ok(false);
            }
            let len = u32::from_le_bytes(len) as usize;
            if len > 1 << 20 {
                return Err(std::io::Error::other("a replica's head is too long"));
            }
            let mut head = vec![0u8; len];
            if !input.read_exact(&mut head)? {
                return Ok(false);
            }
            self.send(&[(i, &head)])?;
        }
        // The stream, holding back what may be the trailer.
        let mut buf = vec![0u8; 1 << 20];
        let mut held = 0usize;
        loop {
            let n = input.read(&mut buf[held..])?;
            if n == 0 {
                break;
            }
            let have = held + n;
            let out = have.saturating_sub(TRAILER);
            if out > 0 {
                let all: Vec<(usize, &[u8])> = (0..self.socks.len()).map(|i| (i, &buf[..out])).collect();
                self.send(&all)?;
            }
            buf.copy_within(out..have, 0);
            held = have - out;
        }
        let t = &buf[..held];
        let whole = held == TRAILER
            && &t[..8] == MAGIC
            && u64::from_le_bytes(t[8..].try_into().unwrap_or_default()) == input.total - TRAILER as u64;
        Ok(whole)
    }

    /// Writes each piece to its replica's socket, waiting (100 ms at a time, watching the
    /// parent) for the slow ones; a socket that fails drops its replica.
    fn send(&mut self, pieces: &[(usize, &[u8])]) -> std::io::Result<()> {
        let mut at: Vec<usize> = vec![0; pieces.len()];
        loop {
            let mut waiting = Vec::new();
            for (k, (i, data)) in pieces.iter().enumerate() {
                let Some(fd) = self.socks[*i] else { continue };
                while at[k] < data.len() {
                    let rest = &data[at[k]..];
                    // SAFETY: a send from a live buffer on a descriptor this process holds.
                    let r = unsafe {
                        libc::send(fd, rest.as_ptr().cast(), rest.len(), libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
                    };
                    if r > 0 {
                        at[k] += r as usize;
                        self.sent[*i] += r as u64;
                        continue;
                    }
                    let e = std::io::Error::last_os_error();
                    match e.raw_os_error() {
                        Some(libc::EINTR) => continue,
                        Some(libc::EAGAIN) => waiting.push((k, fd)),
                        _ => self.drop_replica(*i, &e)?,
                    }
                    break;
                }
            }
            if waiting.is_empty() {
                return Ok(());
            }
            let mut polls: Vec<libc::pollfd> =
                waiting.iter().map(|&(_, fd)| libc::pollfd { fd, events: libc::POLLOUT, revents: 0 }).collect();
            // SAFETY: poll on an array we own.
            unsafe { libc::poll(polls.as_mut_ptr(), polls.len() as libc::nfds_t, 100) };
            // SAFETY: getppid cannot fail.
            if unsafe { libc::getppid() } != self.ppid {
                return Err(std::io::Error::other("the server is gone"));
            }
        }
    }

    fn drop_replica(&mut self, i: usize, e: &std::io::Error) -> std::io::Result<()> {
        if let Some(fd) = self.socks[i].take() {
            // SAFETY: our copy of the socket, closed once.
            unsafe { libc::close(fd) };
            let mut out = std::io::stdout().lock();
            writeln!(out, "drop {i} {} {e}", self.sent[i])?;
            out.flush()?;
        }
        Ok(())
    }
}

/// Standard input, counted, read without a buffer in between (the heads and the stream are
/// told apart by the lengths alone).
struct Input {
    fd: RawFd,
    total: u64,
}

impl Input {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            // SAFETY: a read into a live buffer of its own length.
            let r = unsafe { libc::read(self.fd, buf.as_mut_ptr().cast(), buf.len()) };
            if r >= 0 {
                self.total += r as u64;
                return Ok(r as usize);
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// Ok(false): the input ended first.
    fn read_exact(&mut self, buf: &mut [u8]) -> std::io::Result<bool> {
        let mut got = 0;
        while got < buf.len() {
            let n = self.read(&mut buf[got..])?;
            if n == 0 {
                return Ok(false);
            }
            got += n;
        }
        Ok(true)
    }
}
