//! The epoll backend of the worker loop (through mio): Redis's `ae` loop, in Rust.
//!
//! 1. wait for events (or the next timer: a blocked client's deadline, the cron);
//! 2. for every readable connection, read everything available (a read shorter than the
//!    buffer means the socket is drained, so there is no extra read that returns EAGAIN) and
//!    run every complete request in it; replies accumulate in the connection's output;
//! 3. only then write the output of every connection that produced some ("beforeSleep"): the
//!    peers wake once for many replies, and one event-loop round costs one epoll_wait, one
//!    read and one write per active connection;
//! 4. expire blocked clients' deadlines; run the cron.
//!
//! Steps shared with the io_uring backend live in `worker.rs`.

use super::worker::{Accepted, Core, HasLink, Inbox, Link, Wake};
use super::Server;
use crate::exec::stats::bump;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Bytes read per syscall (the worker's one shared input buffer).
const READ_CHUNK: usize = 64 * 1024;
const WAKER: Token = Token(usize::MAX);

struct Connection {
    fd: OwnedFd,
    link: Link,
    /// WRITABLE interest is registered (the socket buffer was full).
    want_write: bool,
}

impl HasLink for Connection {
    fn link(&mut self) -> &mut Link {
        &mut self.link
    }
}

struct Worker {
    core: Core,
    poll: Poll,
    conns: slab::Slab<Connection>,
    input: Vec<u8>,
}

/// Creates a worker's poll instance and inbox; `run` then owns the poll on the worker thread.
pub fn new_worker() -> io::Result<(Poll, Arc<Inbox>)> {
    let poll = Poll::new()?;
    let waker = Waker::new(poll.registry(), WAKER)?;
    Ok((poll, Inbox::new(Wake::Mio(waker))))
}

/// The worker thread's body.
pub fn run(id: usize, srv: Arc<Server>, poll: Poll, inbox: Arc<Inbox>, ready: Arc<AtomicUsize>) {
    let mut w =
        Worker { core: Core::new(id, srv, inbox), poll, conns: slab::Slab::new(), input: vec![0u8; READ_CHUNK] };
    ready.fetch_add(1, Ordering::Release);
    w.main_loop();
}

/// read(2)/write(2) on a raw descriptor, as `io::Result`.
fn sys(n: isize) -> io::Result<usize> {
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

impl Worker {
    fn main_loop(&mut self) {
        let mut events = Events::with_capacity(1024);
        loop {
            if let Err(e) = self.poll.poll(&mut events, Some(self.core.timeout())) {
                if e.kind() != io::ErrorKind::Interrupted {
                    crate::log_warning!("epoll failed: {e}");
                }
                continue;
            }
            self.core.begin_round();
            for ev in events.iter() {
                match ev.token() {
                    WAKER => {
                        for c in self.core.drain_inbox(&mut self.conns) {
                            self.add_connection(c);
                        }
                    }
                    Token(t) => {
                        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                            self.on_readable(t);
                        }
                        if ev.is_writable() && self.conns.contains(t) {
                            self.flush(t);
                        }
                    }
                }
            }
            // beforeSleep: write everything this round produced.
            let pending = self.core.take_flush(&mut self.conns);
            for &t in &pending {
                self.flush(t);
            }
            self.core.end_round(pending, &mut self.conns);
        }
    }

    fn add_connection(&mut self, conn: super::worker::Conn) {
        let a = Accepted::new(conn, &self.core.srv);
        let entry = self.conns.vacant_entry();
        let token = entry.key();
        let link = self.core.new_link(token, &a);
        let fd = a.fd.as_raw_fd();
        if self.poll.registry().register(&mut SourceFd(&fd), Token(token), Interest::READABLE).is_err() {
            return;
        }
        self.core.publish(&link);
        entry.insert(Connection { fd: a.fd, link, want_write: false });
    }

    /// Reads everything available and runs it; output is written at the end of the round.
    fn on_readable(&mut self, t: usize) {
        let Some(c) = self.conns.get_mut(t) else { return };
        if c.link.session.client.handle.killed.load(Ordering::Acquire) {
            self.close(t);
            return;
        }
        let mut close = false;
        loop {
            // SAFETY: reads into the worker's own buffer, within its length.
            let r = sys(unsafe { libc::read(c.fd.as_raw_fd(), self.input.as_mut_ptr().cast(), self.input.len()) });
            let n = match r {
                Ok(0) => {
                    close = true;
                    break;
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    close = true;
                    break;
                }
            };
            if !self.core.ingest(&mut c.link, t, &self.input[..n], None) {
                close = true;
                break;
            }
            if n < self.input.len() {
                break;
            }
        }
        if close {
            self.close(t);
            return;
        }
        let c = &mut self.conns[t];
        let pending = c.link.out.len() > c.link.sent;
        self.core.queue(&mut c.link, t, pending);
    }

    /// Writes a connection's pending output; registers for writability if the socket is full.
    fn flush(&mut self, t: usize) {
        let ws = &self.core.srv.stats.workers[self.core.id];
        let Some(c) = self.conns.get_mut(t) else { return };
        let batch = c.link.out.len();
        while c.link.sent < c.link.out.len() {
            let rest = &c.link.out[c.link.sent..];
            // SAFETY: writes from a live slice, within its length.
            match sys(unsafe { libc::write(c.fd.as_raw_fd(), rest.as_ptr().cast(), rest.len()) }) {
                Ok(0) => {
                    self.close(t);
                    return;
                }
                Ok(n) => {
                    bump(&ws.counters.net_output_bytes, n as u64);
                    bump(&ws.counters.writes_processed, 1);
                    c.link.sent += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.close(t);
                    return;
                }
            }
        }
        let fd = c.fd.as_raw_fd();
        if c.link.sent < c.link.out.len() {
            let cap = c.link.out.capacity();
            c.link.show_output(&self.core.srv, batch, batch - c.link.sent, cap);
            if !c.want_write {
                c.want_write = true;
                let _ = self.poll.registry().reregister(
                    &mut SourceFd(&fd),
                    Token(t),
                    Interest::READABLE | Interest::WRITABLE,
                );
            }
            return;
        }
        c.link.sent = 0;
        if c.want_write {
            c.want_write = false;
            let _ = self.poll.registry().reregister(&mut SourceFd(&fd), Token(t), Interest::READABLE);
        }
        if !self.core.flushed(&mut c.link, 0) {
            self.close(t);
        }
    }

    fn close(&mut self, t: usize) {
        if !self.conns.contains(t) {
            return;
        }
        let mut c = self.conns.remove(t);
        let _ = self.poll.registry().deregister(&mut SourceFd(&c.fd.as_raw_fd()));
        let fd = c.fd;
        self.core.release(&mut c.link, move || drop(fd));
    }
}
