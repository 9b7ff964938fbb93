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

use super::worker::{Accepted, Conn, Core, HasLink, Inbox, IoHome, Link, Wake};
use super::Server;
use crate::services::scripts::{register_busy_poll, BusyPoll};
use crate::services::stats::bump;
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
    /// A TLS connection's sealed output, and how much of it is written (`link.out` is
    /// written in place otherwise).
    wire: Vec<u8>,
    wire_sent: usize,
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
    /// Reached through its own pointer: see `IoHome` for why (a busy script's poll).
    io: IoHome<Io>,
    /// The round's input buffer (borrowed by the command path while a request runs).
    input: Vec<u8>,
    /// The event being handled said the peer closed or reset: read on to the end of the
    /// stream even after a short read (see `read_and_run`).
    peer_closed: bool,
}

/// The part of a worker that `busy_poll` may use while one of its connections runs a busy
/// script: everything but the `Core` and the input buffer, which that command holds.
struct Io {
    srv: Arc<Server>,
    id: usize,
    inbox: Arc<Inbox>,
    poll: Poll,
    /// Boxed: the running connection's entry is outside the slab's storage (`IoHome`).
    conns: slab::Slab<Box<Connection>>,
    busy: Busy,
}

/// `busy_poll`'s state.
struct Busy {
    events: Events,
    input: Vec<u8>,
    /// The poll took readiness of the running connection itself (read it again after).
    current_ready: bool,
    /// The poll took the inbox's wake-up (drain the inbox after).
    woken: bool,
    /// The poll has tried every connection once since this script turned busy.
    swept: bool,
}

/// Creates a worker's poll instance and inbox; `run` then owns the poll on the worker thread.
pub fn new_worker() -> io::Result<(Poll, Arc<Inbox>)> {
    let poll = Poll::new()?;
    let waker = Waker::new(poll.registry(), WAKER)?;
    Ok((poll, Inbox::new(Wake::Mio(waker))))
}

/// The worker thread's body.
pub fn run(id: usize, srv: Arc<Server>, poll: Poll, inbox: Arc<Inbox>, ready: Arc<AtomicUsize>) {
    let busy = Busy {
        events: Events::with_capacity(256),
        input: Vec::new(),
        current_ready: false,
        woken: false,
        swept: false,
    };
    let io = Io {
        srv: srv.clone(),
        id,
        inbox: inbox.clone(),
        poll,
        conns: slab::Slab::with_capacity(super::worker::SPARE_SLOTS),
        busy,
    };
    let mut w = Worker {
        core: Core::new(id, srv, inbox),
        io: IoHome::new(io),
        input: vec![0u8; READ_CHUNK],
        peer_closed: false,
    };
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

impl super::worker::Backend for Worker {
    fn core(&mut self) -> &mut Core {
        &mut self.core
    }

    fn add_connection(&mut self, c: Conn) {
        let io = self.io.get();
        io.add_connection(c);
        io.conns.reserve(super::worker::SPARE_SLOTS);
    }

    fn link_ptr(&mut self, t: usize) -> Option<*mut Link> {
        // SAFETY: `running`'s pointer is `t`'s live boxed entry; only the field's address is taken.
        self.running(t).map(|c| unsafe { &raw mut (*c).link })
    }

    fn busy_poll(&mut self, t: usize) -> crate::services::scripts::BusyPollGuard {
        // SAFETY: the poll makes its `&mut Io` from the `IoHome`'s pointer and touches every
        // connection but `t`, whose boxed entry it never covers; the guard is dropped before
        // the backend takes a reference into the `Io` again.
        unsafe { register_busy_poll(BusyPoll { poll: busy_poll, ctx: self.io.ptr().cast(), current: t }) }
    }

    fn after_busy(&mut self, t: usize) {
        Worker::after_busy(self, t);
    }
}

impl Worker {
    fn main_loop(&mut self) {
        let mut events = Events::with_capacity(1024);
        loop {
            if let Err(e) = self.io.get().poll.poll(&mut events, Some(self.core.timeout())) {
                if e.kind() != io::ErrorKind::Interrupted {
                    crate::log_warning!("epoll failed: {e}");
                }
                continue;
            }
            self.core.begin_round();
            self.run_events(&events);
            // `appendfsync always`: requests that came in while the round ran join it before
            // its fsync (`Core::top_up`).
            let mut looks = 0;
            let mut got = events.iter().count();
            while self.core.top_up(&mut looks, got) {
                if self.io.get().poll.poll(&mut events, Some(std::time::Duration::ZERO)).is_err() {
                    break;
                }
                got = events.iter().count();
                self.run_events(&events);
            }
            // A busy script's poll took the inbox's wake-up.
            if std::mem::take(&mut self.io.get().busy.woken) {
                super::worker::take_inbox(self);
            }
            self.hand_overs();
            // beforeSleep: write everything this round produced.
            let pending = self.core.take_flush(&mut self.io.get().conns);
            for &t in &pending {
                self.io.get().flush(t);
            }
            self.core.end_round(pending, &mut self.io.get().conns);
            super::worker::resume_waiting(self);
            self.hand_overs();
        }
    }

    /// Connections whose EVAL starts a Lua debugging session leave the loop for the
    /// session's thread, with what they had not written yet.
    fn hand_overs(&mut self) {
        for (t, id) in std::mem::take(&mut self.core.hand_overs) {
            let io = self.io.get();
            let Some(c) = io.conns.get(t) else { continue };
            if c.link.session.client.id() != id || c.link.session.client.ldb_request.is_none() {
                continue;
            }
            let c = *io.conns.remove(t);
            let _ = io.poll.registry().deregister(&mut SourceFd(&c.fd.as_raw_fd()));
            let sealed = c.wire[c.wire_sent.min(c.wire.len())..].to_vec();
            super::debugging::hand_over(io.srv.clone(), c.fd, c.link, sealed);
        }
    }

    /// Handles one poll's events.
    fn run_events(&mut self, events: &Events) {
        for ev in events.iter() {
            match ev.token() {
                WAKER => super::worker::take_inbox(self),
                Token(t) => {
                    if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                        self.peer_closed = ev.is_read_closed() || ev.is_error();
                        self.on_readable(t);
                        self.peer_closed = false;
                    }
                    // Not when this round has replies for it too: they go out at its end,
                    // after the round's fsync with `appendfsync always` (Redis's
                    // AE_BARRIER: never writable after readable in one iteration).
                    if ev.is_writable() && self.io.get().conns.get(t).is_some_and(|c| !c.link.queued) {
                        self.io.get().flush(t);
                    }
                }
            }
        }
    }

    /// Reads everything available and runs it; output is written at the end of the round.
    fn on_readable(&mut self, t: usize) {
        // SAFETY: `busy_poll` makes its `&mut Io` from the `IoHome`'s pointer and touches every
        // connection but `t`, whose boxed entry it never covers; while `t`'s requests run the
        // event loop holds no `&mut Io` (only the `Core`, `input` and `t`'s entry), so no
        // other reference to what the poll touches is alive.
        let _busy = unsafe { register_busy_poll(BusyPoll { poll: busy_poll, ctx: self.io.ptr().cast(), current: t }) };
        // Readiness the busy poll took from `t` itself means more to read.
        while self.read_and_run(t) && std::mem::take(&mut self.io.get().busy.current_ready) {}
        self.io.get().busy.swept = false;
    }

    /// After a command that may have run a busy script for `t`: readiness the poll took from
    /// `t` itself means more to read.
    fn after_busy(&mut self, t: usize) {
        self.io.get().busy.swept = false;
        if std::mem::take(&mut self.io.get().busy.current_ready) && self.io.get().conns.contains(t) {
            self.on_readable(t);
        }
    }

    /// Connection `t`'s entry, for the command path to use while no `&mut Io` is held (the
    /// busy poll may take one meanwhile). Valid until `t` is closed by the event loop.
    fn running(&mut self, t: usize) -> Option<*mut Connection> {
        self.io.get().conns.get_mut(t).map(|c| &mut **c as *mut Connection)
    }

    /// `on_readable`'s work; false if the connection closed.
    fn read_and_run(&mut self, t: usize) -> bool {
        let Some(c) = self.running(t) else { return false };
        // SAFETY: `running`'s: the entry is boxed, the busy poll leaves it alone, and it is
        // closed only below, after its last use.
        let c = unsafe { &mut *c };
        if c.link.session.client.handle.killed.load(Ordering::Acquire) {
            self.io.get().close(t);
            return false;
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
            // A short read means the socket is drained — unless the peer closed or reset
            // it: then the end arrived with this data, in the same edge, and no other event
            // will tell of it (a client that closes right after its last bytes stayed listed
            // forever), so read on until the read that reports it. Or while a big argument
            // arrives: taking bytes opens the receive window, and on loopback the sender's
            // queued bytes arrive at once (Redis reads a big argument whole; the next command
            // must see its client weighed by client eviction).
            if n < self.input.len() && !self.peer_closed && c.link.session.big_remaining() == 0 {
                break;
            }
        }
        if close {
            self.io.get().close(t);
            return false;
        }
        let pending = c.link.has_output();
        self.core.queue(&mut c.link, t, pending);
        true
    }
}

/// While a script run by connection `current` is busy (the interpreter's hook calls this
/// about every millisecond): serves the worker's other connections once — their requests are
/// answered `-BUSY` but for SCRIPT KILL and the like (`worker::ingest_while_busy`), and their
/// replies written at once. New connections wait in the inbox.
///
/// # Safety
/// `ctx` is the `IoHome` pointer of the worker whose `on_readable` registered this poll and is
/// still running.
unsafe fn busy_poll(ctx: *mut (), current: usize) {
    // SAFETY: the caller's: `ctx` is the worker's `IoHome` pointer, and nothing else holds a
    // reference to the `Io` while the command path runs (see `on_readable`).
    let io = unsafe { &mut *ctx.cast::<Io>() };
    io.serve_while_busy(current);
}

impl Io {
    fn add_connection(&mut self, conn: super::worker::Conn) {
        let mut a = Accepted::new(conn, &self.srv);
        let entry = self.conns.vacant_entry();
        let token = entry.key();
        let link = super::worker::new_link(&self.srv, self.id, &self.inbox, token, &mut a);
        let fd = a.fd.as_raw_fd();
        if self.poll.registry().register(&mut SourceFd(&fd), Token(token), Interest::READABLE).is_err() {
            return;
        }
        super::worker::publish(&self.srv, &link);
        entry.insert(Box::new(Connection { fd: a.fd, link, wire: Vec::new(), wire_sent: 0, want_write: false }));
    }

    /// New connections, taken while a script is busy — only into slots the slab already has,
    /// so that the running connection's entry does not move.
    fn accept_while_busy(&mut self) {
        while let Some(c) = super::worker::spare_slot_conn(&self.conns, &self.inbox) {
            self.add_connection(c);
        }
    }
    fn serve_while_busy(&mut self, current: usize) {
        // A script runs, and this worker still serves: alive, for the watchdog.
        crate::daemons::watchdog::alive(&self.srv, self.id);
        let mut events = std::mem::replace(&mut self.busy.events, Events::with_capacity(0));
        if self.poll.poll(&mut events, Some(std::time::Duration::ZERO)).is_err() {
            events.clear();
        }
        let mut ready: Vec<usize> = Vec::new();
        for ev in events.iter() {
            match ev.token() {
                WAKER => {
                    self.busy.woken = true;
                    self.accept_while_busy();
                }
                Token(t) if t == current => self.busy.current_ready = true,
                Token(t) => ready.push(t),
            }
        }
        self.busy.events = events;
        // Readiness the event loop took before the script started is not reported again:
        // every connection is tried once.
        if !std::mem::replace(&mut self.busy.swept, true) {
            ready = (0..self.conns.capacity()).filter(|&t| t != current && self.conns.contains(t)).collect();
        }
        for t in ready {
            self.read_while_busy(t);
        }
    }

    /// Reads what connection `t` (not the running one) sent, runs it, writes the replies.
    fn read_while_busy(&mut self, t: usize) {
        if self.busy.input.len() < READ_CHUNK {
            self.busy.input.resize(READ_CHUNK, 0);
        }
        let Some(c) = self.conns.get_mut(t) else { return };
        let mut close = c.link.session.client.handle.killed.load(Ordering::Acquire);
        while !close {
            // SAFETY: reads into the poll's own buffer, within its length.
            let r = sys(unsafe {
                libc::read(c.fd.as_raw_fd(), self.busy.input.as_mut_ptr().cast(), self.busy.input.len())
            });
            match r {
                Ok(0) => close = true,
                Ok(n) => {
                    close = !super::worker::ingest_while_busy(&self.srv, self.id, &mut c.link, &self.busy.input[..n]);
                    if n < self.busy.input.len() {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => close = true,
            }
        }
        if close {
            self.close(t);
        } else if !c.link.queued {
            // (Queued: replies of the round too, written at its end.)
            self.flush(t);
        }
    }

    /// Writes a connection's pending output; registers for writability if the socket is full.
    fn flush(&mut self, t: usize) {
        let ws = &self.srv.stats.workers[self.id];
        let Some(c) = self.conns.get_mut(t) else { return };
        let batch = c.link.out.len();
        let handle = &c.link.session.client.handle;
        // TLS: the replies not yet sealed join the sealed bytes still to write.
        let (buf, sent) = match c.link.tls.as_deref_mut() {
            Some(tls) => {
                tls.seal(&c.link.out[c.link.sent..], &mut c.wire);
                c.link.sent = c.link.out.len();
                (&c.wire, &mut c.wire_sent)
            }
            None => (&c.link.out, &mut c.link.sent),
        };
        while *sent < buf.len() {
            let rest = &buf[*sent..];
            // SAFETY: writes from a live slice, within its length.
            match sys(unsafe { libc::write(c.fd.as_raw_fd(), rest.as_ptr().cast(), rest.len()) }) {
                Ok(0) => {
                    self.close(t);
                    return;
                }
                Ok(n) => {
                    super::worker::count_output(handle, &ws.counters, n);
                    bump(&ws.counters.writes_processed, 1);
                    *sent += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.close(t);
                    return;
                }
            }
        }
        let unsent = buf.len() - *sent;
        let fd = c.fd.as_raw_fd();
        if c.link.tls.is_some() {
            // Sealed bytes the socket has not taken count as the client's pending output.
            c.link.in_flight = unsent;
            if unsent == 0 {
                c.wire.clear();
                c.wire_sent = 0;
                if c.wire.capacity() > super::worker::KEEP_OUT {
                    c.wire = Vec::new();
                }
            }
        }
        if unsent > 0 {
            let cap = c.link.out.capacity() + c.wire.capacity();
            c.link.show_output(&self.srv, batch, c.link.unsent(), cap);
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
        if !super::worker::flushed(&self.srv, &mut c.link, c.wire.capacity()) {
            self.close(t);
        }
    }

    fn close(&mut self, t: usize) {
        if !self.conns.contains(t) {
            return;
        }
        let mut c = *self.conns.remove(t);
        let _ = self.poll.registry().deregister(&mut SourceFd(&c.fd.as_raw_fd()));
        let fd = c.fd;
        super::worker::release(&self.srv, &mut c.link, move || drop(fd));
    }
}
