//! The worker event loop: one thread, one epoll instance (through mio), the connections it
//! owns for their whole life. Redis's `ae` loop, in Rust:
//!
//! 1. wait for events (or the next timer: a blocked client's deadline, the cron);
//! 2. for every readable connection, read everything available (a read shorter than the
//!    buffer means the socket is drained, so there is no extra read that returns EAGAIN) and
//!    run every complete request in it; replies accumulate in the connection's output;
//! 3. only then write the output of every connection that produced some ("beforeSleep"): the
//!    peers wake once for many replies, and one event-loop round costs one epoll_wait, one
//!    read and one write per active connection;
//! 4. expire blocked clients' deadlines; run the cron (`hz`): active expiry, idle timeouts.
//!
//! The session (`session.rs`) is I/O-free, so this loop only moves bytes. Other threads talk
//! to a worker through its [`Inbox`]: new connections from the acceptor, and blocked clients
//! whose wait ended (served by another worker's write, CLIENT UNBLOCK), each followed by a
//! wake of the loop.

use super::blocking::WaitState;
use super::client::{Client, ClientHandle};
use super::session::Session;
use super::stats::bump;
use super::Server;
use crate::protocol::Reply;
use mio::{Events, Interest, Poll, Token, Waker};
use parking_lot::Mutex;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Bytes read per syscall (the worker's one shared input buffer).
const READ_CHUNK: usize = 64 * 1024;
/// A connection keeps its reply buffer between rounds only up to this size.
const KEEP_OUT: usize = 4096;
/// Connections waiting in a worker's inbox before the acceptor backs off.
pub const INBOX_LIMIT: usize = 65536;
const WAKER: Token = Token(usize::MAX);

/// A connection handed from the acceptor to a worker.
pub enum Conn {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

enum Io {
    Tcp(mio::net::TcpStream),
    Unix(mio::net::UnixStream),
}

impl Io {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        match self {
            Io::Tcp(s) => s,
            Io::Unix(s) => s,
        }
    }
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Io::Tcp(s) => s.read(buf),
            Io::Unix(s) => s.read(buf),
        }
    }
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Io::Tcp(s) => s.write(buf),
            Io::Unix(s) => s.write(buf),
        }
    }
}

/// The mailbox of a worker: what other threads hand it, plus the waker of its loop.
pub struct Inbox {
    conns: Mutex<VecDeque<Conn>>,
    /// (token, client id) of blocked clients whose wait ended.
    resumed: Mutex<Vec<(usize, u64)>>,
    waker: Waker,
}

impl Inbox {
    /// Hands a new connection to the worker; gives it back when the inbox is full.
    pub fn try_push(&self, c: Conn) -> Option<Conn> {
        let mut q = self.conns.lock();
        if q.len() >= INBOX_LIMIT {
            return Some(c);
        }
        q.push_back(c);
        drop(q);
        let _ = self.waker.wake();
        None
    }

    fn resume(&self, token: usize, client: u64) {
        self.resumed.lock().push((token, client));
        let _ = self.waker.wake();
    }
}

struct Connection {
    io: Io,
    session: Session,
    out: Vec<u8>,
    out_pos: usize,
    /// WRITABLE interest is registered (the socket buffer was full).
    want_write: bool,
    /// Close once the output is written.
    closing: bool,
    /// Already queued for this round's flush.
    queued: bool,
}

struct Worker {
    id: usize,
    srv: Arc<Server>,
    poll: Poll,
    inbox: Arc<Inbox>,
    conns: slab::Slab<Connection>,
    input: Vec<u8>,
    to_flush: Vec<usize>,
    /// Blocked clients' deadlines: (deadline ms, token, client id).
    timers: BinaryHeap<Reverse<(i64, usize, u64)>>,
}

/// Creates a worker's poll instance and inbox; `run` then owns the poll on the worker thread.
pub fn new_worker() -> io::Result<(Poll, Arc<Inbox>)> {
    let poll = Poll::new()?;
    let waker = Waker::new(poll.registry(), WAKER)?;
    let inbox = Arc::new(Inbox { conns: Mutex::new(VecDeque::new()), resumed: Mutex::new(Vec::new()), waker });
    Ok((poll, inbox))
}

/// The worker thread's body.
pub fn run(id: usize, srv: Arc<Server>, poll: Poll, inbox: Arc<Inbox>, ready: Arc<AtomicUsize>) {
    let mut w = Worker {
        id,
        srv,
        poll,
        inbox,
        conns: slab::Slab::new(),
        input: vec![0u8; READ_CHUNK],
        to_flush: Vec::new(),
        timers: BinaryHeap::new(),
    };
    ready.fetch_add(1, Ordering::Release);
    w.main_loop();
}

impl Worker {
    fn main_loop(&mut self) {
        let mut events = Events::with_capacity(1024);
        let mut next_cron = self.srv.now_ms();
        loop {
            let now = self.srv.now_ms();
            let mut wake_at = next_cron;
            if let Some(Reverse((d, _, _))) = self.timers.peek() {
                wake_at = wake_at.min(*d);
            }
            let timeout = Duration::from_millis((wake_at - now).clamp(0, 1000) as u64);
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    crate::log_warning!("epoll failed: {e}");
                }
                continue;
            }
            for ev in events.iter() {
                match ev.token() {
                    WAKER => self.drain_inbox(),
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
            let pending = std::mem::take(&mut self.to_flush);
            for t in &pending {
                if let Some(c) = self.conns.get_mut(*t) {
                    c.queued = false;
                }
                self.flush(*t);
            }
            self.to_flush = pending;
            self.to_flush.clear();
            self.expire_timers();
            let now = self.srv.now_ms();
            if now >= next_cron {
                self.cron();
                let hz = self.srv.config.hot.hz.load(Ordering::Relaxed).max(1) as i64;
                next_cron = now + 1000 / hz;
            }
        }
    }

    fn cron(&mut self) {
        let srv = self.srv.clone();
        super::expire::cycle(&srv, &srv.stats.workers[self.id].counters);
        if self.id == 0 {
            srv.clock.resync();
            srv.sample_ops();
            super::net::close_idle_clients(&srv);
        }
    }

    fn drain_inbox(&mut self) {
        let conns: Vec<Conn> = self.inbox.conns.lock().drain(..).collect();
        for c in conns {
            self.add_connection(c);
        }
        let resumed: Vec<(usize, u64)> = std::mem::take(&mut *self.inbox.resumed.lock());
        for (t, id) in resumed {
            if self.conns.get(t).is_some_and(|c| c.session.client.id() == id) {
                self.resume(t);
            }
        }
    }

    fn add_connection(&mut self, conn: Conn) {
        let srv = self.srv.clone();
        let needs_auth = srv.config.hot.has_password.load(Ordering::Relaxed);
        let (addr, laddr, fd, unix, io) = match conn {
            Conn::Tcp(s) => {
                let _ = s.set_nodelay(true);
                let _ = s.set_nonblocking(true);
                (
                    s.peer_addr().map(|a| a.to_string()).unwrap_or_default(),
                    s.local_addr().map(|a| a.to_string()).unwrap_or_default(),
                    std::os::fd::AsRawFd::as_raw_fd(&s),
                    false,
                    Io::Tcp(mio::net::TcpStream::from_std(s)),
                )
            }
            Conn::Unix(s) => {
                let _ = s.set_nonblocking(true);
                let path = srv.config.get("unixsocket");
                (
                    format!("{path}:0"),
                    path,
                    std::os::fd::AsRawFd::as_raw_fd(&s),
                    true,
                    Io::Unix(mio::net::UnixStream::from_std(s)),
                )
            }
        };
        let handle = Arc::new(ClientHandle::new(srv.clients.next_id(), addr, laddr, fd, unix, srv.now_ms()));
        let entry = self.conns.vacant_entry();
        let token = entry.key();
        let mut client = Client::new(handle.clone(), self.id, needs_auth);
        let inbox = self.inbox.clone();
        let id = handle.id;
        client.wake = Some(Arc::new(move || inbox.resume(token, id)));
        let mut c = Connection {
            io,
            session: Session::new(client),
            out: Vec::new(),
            out_pos: 0,
            want_write: false,
            closing: false,
            queued: false,
        };
        if self.poll.registry().register(c.io.source(), Token(token), Interest::READABLE).is_err() {
            return;
        }
        // The socket is open from here on: CLIENT KILL may shut it down.
        *handle.closed.lock() = false;
        srv.clients.add(handle);
        entry.insert(c);
    }

    /// Reads everything available and runs it; output is written at the end of the round.
    fn on_readable(&mut self, t: usize) {
        let srv = self.srv.clone();
        let ws = &srv.stats.workers[self.id];
        let Some(c) = self.conns.get_mut(t) else { return };
        if c.session.client.handle.killed.load(Ordering::Acquire) {
            self.close(t);
            return;
        }
        let mut close = false;
        loop {
            let n = match c.io.read(&mut self.input) {
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
            if c.closing {
                // Replies are being flushed before closing; the rest is ignored, as Redis.
            } else if c.session.waiting().is_some() {
                // Blocked: keep the bytes for when the wait ends.
                if !c.session.buffer_input(&self.input[..n], &srv) {
                    close = true;
                    break;
                }
            } else {
                let mut reply = Reply { buf: std::mem::take(&mut c.out), proto: c.session.client.proto };
                let keep = c.session.feed(&srv, ws, &self.input[..n], &mut reply);
                c.out = reply.buf;
                if !keep {
                    c.closing = true;
                }
                after_commands(c, &srv, &mut self.timers, t);
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
        if (c.out.len() > c.out_pos || c.closing) && !c.queued {
            c.queued = true;
            self.to_flush.push(t);
        }
    }

    /// A blocked client's wait ended: append its reply, run what queued behind it.
    fn resume(&mut self, t: usize) {
        let srv = self.srv.clone();
        let ws = &srv.stats.workers[self.id];
        let c = &mut self.conns[t];
        let Some(w) = c.session.waiting() else { return };
        if *w.state.lock() == WaitState::Waiting {
            return;
        }
        let mut reply = Reply { buf: std::mem::take(&mut c.out), proto: c.session.client.proto };
        let keep = c.session.resume(&srv, ws, &mut reply);
        c.out = reply.buf;
        if !keep {
            c.closing = true;
        }
        after_commands(c, &srv, &mut self.timers, t);
        if !c.queued {
            c.queued = true;
            self.to_flush.push(t);
        }
    }

    fn expire_timers(&mut self) {
        let now = self.srv.now_ms();
        while let Some(Reverse((d, t, id))) = self.timers.peek().copied() {
            if d > now {
                break;
            }
            self.timers.pop();
            let Some(c) = self.conns.get(t) else { continue };
            if c.session.client.id() != id {
                continue;
            }
            if let Some(w) = c.session.waiting() {
                if w.deadline_ms == Some(d) && w.finish(WaitState::TimedOut) {
                    self.srv.blocked_clients.fetch_sub(1, Ordering::Relaxed);
                    self.resume(t);
                }
            }
        }
        // Resumes queued by `finish` for these clients find them no longer waiting.
    }

    /// Writes a connection's pending output; registers for writability if the socket is full.
    fn flush(&mut self, t: usize) {
        let srv = self.srv.clone();
        let ws = &srv.stats.workers[self.id];
        let Some(c) = self.conns.get_mut(t) else { return };
        while c.out_pos < c.out.len() {
            match c.io.write(&c.out[c.out_pos..]) {
                Ok(0) => {
                    self.close(t);
                    return;
                }
                Ok(n) => {
                    bump(&ws.counters.net_output_bytes, n as u64);
                    c.out_pos += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.close(t);
                    return;
                }
            }
        }
        if c.out_pos < c.out.len() {
            if !c.want_write {
                c.want_write = true;
                let _ =
                    self.poll.registry().reregister(c.io.source(), Token(t), Interest::READABLE | Interest::WRITABLE);
            }
            return;
        }
        c.out.clear();
        c.out_pos = 0;
        if c.out.capacity() > KEEP_OUT {
            c.out = Vec::new();
        }
        if c.want_write {
            c.want_write = false;
            let _ = self.poll.registry().reregister(c.io.source(), Token(t), Interest::READABLE);
        }
        if c.closing {
            self.close(t);
            return;
        }
        if let Some(mode) = c.session.client.shutdown.take() {
            super::net::request_shutdown(mode);
        }
        if !c.session.has_pending() {
            c.session.shrink();
        }
    }

    fn close(&mut self, t: usize) {
        if !self.conns.contains(t) {
            return;
        }
        let mut c = self.conns.remove(t);
        let _ = self.poll.registry().deregister(c.io.source());
        super::session::disconnect(&self.srv, &mut c.session.client);
        let handle = c.session.client.handle.clone();
        self.srv.clients.remove(handle.id);
        // Under the lock: a concurrent CLIENT KILL must not shut down a reused descriptor.
        let mut closed = handle.closed.lock();
        *closed = true;
        drop(c);
        drop(closed);
    }
}

/// After commands ran for a connection: DEBUG SLEEP, SHUTDOWN, and a new blocking deadline.
fn after_commands(c: &mut Connection, srv: &Server, timers: &mut BinaryHeap<Reverse<(i64, usize, u64)>>, t: usize) {
    if c.session.client.sleep_ms > 0 {
        // DEBUG SLEEP: Redis blocks the whole server; we block this worker.
        std::thread::sleep(Duration::from_millis(c.session.client.sleep_ms));
        c.session.client.sleep_ms = 0;
    }
    if c.session.client.shutdown.is_some() {
        // Write what is pending, then the main thread exits the process.
        if let Some(mode) = c.session.client.shutdown {
            if c.out.len() == c.out_pos {
                c.session.client.shutdown = None;
                super::net::request_shutdown(mode);
            }
        }
    }
    if let Some(w) = c.session.waiting() {
        if let Some(d) = w.deadline_ms {
            timers.push(Reverse((d, t, c.session.client.id())));
        }
    }
    let _ = srv;
}
