//! The io_uring backend of the worker loop (`io-backend io_uring`; issue 4's experiment).
//!
//! Same rounds as the epoll loop (`worker.rs`), with the syscalls batched:
//! - each connection has one multishot receive posted for its whole life; the kernel picks a
//!   buffer from a ring of provided buffers shared by all connections of the worker, so an idle
//!   connection holds no input buffer;
//! - replies are sent with one send SQE per connection per round, and all of a round's sends
//!   are submitted by the same `io_uring_enter` that waits for the next completions — one
//!   syscall per round instead of one read and one write per active connection plus
//!   epoll_wait;
//! - the ring is created with `DEFER_TASKRUN` and `SINGLE_ISSUER`: receive work queued by
//!   arriving data runs when the worker enters the kernel, not as interruptions.
//!
//! A send's buffer must stay put until its completion arrives, so a connection has two:
//! `sending` (owned by the kernel while a send is in flight) and `link.out`, where new replies
//! accumulate meanwhile. A connection is freed only once no operation of it is in flight.

use super::stats::bump;
use super::worker::{Accepted, Conn, Core, HasLink, Inbox, Link, Wake};
use super::Server;
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::Arc;

const SQ_ENTRIES: u32 = 1024;
const CQ_ENTRIES: u32 = 16384;
/// Provided receive buffers per worker (a power of two) and their size: 1 MiB in all.
const BUFS: u16 = 256;
const BUF_SIZE: usize = 4096;
const BGID: u16 = 0;

/// user_data: connection token << 2 | operation.
const OP_RECV: u64 = 0;
const OP_SEND: u64 = 1;
const OP_CANCEL: u64 = 2;
const WAKE: u64 = u64::MAX;

/// The ring of provided buffers: entries the kernel consumes from the head, that the worker
/// refills at the tail once it has used a buffer's bytes.
struct BufRing {
    entries: *mut types::BufRingEntry,
    map_len: usize,
    bufs: Vec<u8>,
    tail: u16,
}

impl BufRing {
    fn new(ring: &IoUring) -> io::Result<BufRing> {
        let map_len = BUFS as usize * std::mem::size_of::<types::BufRingEntry>();
        // SAFETY: a fresh anonymous mapping (page aligned, as the kernel requires); checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut br = BufRing { entries: p.cast(), map_len, bufs: vec![0u8; BUFS as usize * BUF_SIZE], tail: 0 };
        // SAFETY: the mapping lives until `drop`, which runs after the ring is unregistered
        // (the ring is dropped first, see `Worker`).
        unsafe { ring.submitter().register_buf_ring_with_flags(p as u64, BUFS, BGID, 0)? };
        for bid in 0..BUFS {
            br.put(bid);
        }
        br.publish();
        Ok(br)
    }

    fn buf(&self, bid: u16, len: usize) -> &[u8] {
        let start = bid as usize * BUF_SIZE;
        &self.bufs[start..start + len.min(BUF_SIZE)]
    }

    /// Gives buffer `bid` back (visible to the kernel at the next `publish`).
    fn put(&mut self, bid: u16) {
        let i = (self.tail & (BUFS - 1)) as usize;
        // SAFETY: `i < BUFS`, inside the mapping; the kernel does not read entries past the
        // published tail.
        let e = unsafe { &mut *self.entries.add(i) };
        e.set_addr(self.bufs[bid as usize * BUF_SIZE..].as_ptr() as u64);
        e.set_len(BUF_SIZE as u32);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        // SAFETY: the tail field lives in the first entry of the mapping; the kernel reads it
        // with acquire ordering.
        unsafe {
            let tail = types::BufRingEntry::tail(self.entries) as *const AtomicU16;
            (*tail).store(self.tail, Ordering::Release);
        }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping made in `new`.
        unsafe { libc::munmap(self.entries.cast(), self.map_len) };
    }
}

struct Connection {
    fd: OwnedFd,
    link: Link,
    /// Bytes handed to the kernel by the send in flight (or about to be resent after a short
    /// send); new replies go to `link.out` meanwhile.
    sending: Vec<u8>,
    sent: usize,
    send_inflight: bool,
    recv_armed: bool,
    /// Closing: waiting for the operations in flight to finish before freeing.
    dead: bool,
}

impl HasLink for Connection {
    fn link(&mut self) -> &mut Link {
        &mut self.link
    }
}

struct Worker {
    // Field order is drop order: the ring (and its registration of `bufs`) goes first.
    ring: IoUring,
    bufs: BufRing,
    core: Core,
    conns: slab::Slab<Connection>,
    wake_fd: i32,
    wake_buf: Box<u64>,
    cqes: Vec<(u64, i32, u32)>,
}

/// Creates a worker's inbox, woken through an eventfd; `run` then builds the ring on the worker
/// thread (the ring's single issuer).
pub fn new_worker() -> io::Result<Arc<Inbox>> {
    // SAFETY: plain eventfd creation; the result is checked.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new descriptor nothing else owns.
    Ok(Inbox::new(Wake::EventFd(unsafe { OwnedFd::from_raw_fd(fd) })))
}

/// True if this kernel lets us build the ring the backend needs (checked once at startup, so
/// the server can fall back to epoll).
pub fn available() -> bool {
    // Lets the tests exercise the fallback on a kernel that does have io_uring.
    if std::env::var_os("ATOLL_NO_IO_URING").is_some() {
        return false;
    }
    build_ring().and_then(|r| BufRing::new(&r).map(|_| ())).is_ok()
}

fn build_ring() -> io::Result<IoUring> {
    IoUring::builder()
        .setup_cqsize(CQ_ENTRIES)
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_submit_all()
        .build(SQ_ENTRIES)
}

/// The worker thread's body.
pub fn run(id: usize, srv: Arc<Server>, inbox: Arc<Inbox>, ready: Arc<AtomicUsize>) {
    let wake_fd = match inbox.waker() {
        Wake::EventFd(fd) => fd.as_raw_fd(),
        Wake::Mio(_) => unreachable!("io_uring worker with an epoll inbox"),
    };
    let ring = build_ring().and_then(|ring| BufRing::new(&ring).map(|b| (ring, b)));
    let (ring, bufs) = match ring {
        Ok(r) => r,
        Err(e) => {
            // `available()` said yes a moment ago; without a loop the server cannot serve.
            crate::log_warning!("io_uring setup failed on worker {id}: {e}");
            std::process::exit(1);
        }
    };
    let mut w = Worker {
        ring,
        bufs,
        core: Core::new(id, srv, inbox),
        conns: slab::Slab::new(),
        wake_fd,
        wake_buf: Box::new(0),
        cqes: Vec::with_capacity(1024),
    };
    w.post_wake_read();
    ready.fetch_add(1, Ordering::Release);
    w.main_loop();
}

impl Worker {
    fn push(&mut self, e: squeue::Entry) {
        loop {
            // SAFETY: every buffer an entry points to (receive buffers, `sending`, `wake_buf`)
            // stays alive and unmoved until that entry's completion is reaped.
            if unsafe { self.ring.submission().push(&e) }.is_ok() {
                return;
            }
            // Submission queue full: hand what is queued to the kernel and retry.
            let _ = self.ring.submit();
        }
    }

    fn post_wake_read(&mut self) {
        let ptr = (&mut *self.wake_buf as *mut u64).cast::<u8>();
        let e = opcode::Read::new(types::Fd(self.wake_fd), ptr, 8).build().user_data(WAKE);
        self.push(e);
    }

    fn post_recv(&mut self, t: usize) {
        let c = &mut self.conns[t];
        c.recv_armed = true;
        let e = opcode::RecvMulti::new(types::Fd(c.fd.as_raw_fd()), BGID).build().user_data((t as u64) << 2 | OP_RECV);
        self.push(e);
    }

    fn main_loop(&mut self) {
        loop {
            let ts = types::Timespec::from(self.core.timeout());
            let args = types::SubmitArgs::new().timespec(&ts);
            if let Err(e) = self.ring.submitter().submit_with_args(1, &args) {
                match e.raw_os_error() {
                    Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY) => {}
                    _ => crate::log_warning!("io_uring_enter failed: {e}"),
                }
            }
            self.cqes.clear();
            self.cqes.extend(self.ring.completion().map(|c| (c.user_data(), c.result(), c.flags())));
            let cqes = std::mem::take(&mut self.cqes);
            for &(ud, res, flags) in &cqes {
                if ud == WAKE {
                    for c in self.core.drain_inbox(&mut self.conns) {
                        self.add_connection(c);
                    }
                    self.post_wake_read();
                    continue;
                }
                let t = (ud >> 2) as usize;
                match ud & 3 {
                    OP_RECV => self.on_recv(t, res, flags),
                    OP_SEND => self.on_send(t, res),
                    _ => {}
                }
            }
            self.cqes = cqes;
            self.bufs.publish();
            // beforeSleep: queue the sends of everything this round produced; the next
            // io_uring_enter submits them all.
            let pending = self.core.take_flush(&mut self.conns);
            for &t in &pending {
                self.flush(t);
            }
            self.core.end_round(pending, &mut self.conns);
        }
    }

    fn add_connection(&mut self, conn: Conn) {
        let a = Accepted::new(conn, &self.core.srv);
        let entry = self.conns.vacant_entry();
        let t = entry.key();
        let link = self.core.new_link(t, &a);
        self.core.publish(&link);
        entry.insert(Connection {
            fd: a.fd,
            link,
            sending: Vec::new(),
            sent: 0,
            send_inflight: false,
            recv_armed: false,
            dead: false,
        });
        self.post_recv(t);
    }

    fn on_recv(&mut self, t: usize, res: i32, flags: u32) {
        let more = cqueue::more(flags);
        let bid = cqueue::buffer_select(flags);
        let Some(c) = self.conns.get_mut(t) else {
            if let Some(b) = bid {
                self.bufs.put(b);
            }
            return;
        };
        if !more {
            c.recv_armed = false;
        }
        if res > 0 {
            // Bytes for a connection already closing (or killed) are dropped; the buffer is
            // recycled either way.
            let keep = if c.dead || c.link.session.client.handle.killed.load(Ordering::Acquire) {
                false
            } else {
                let data = self.bufs.buf(bid.unwrap_or(0), res as usize);
                self.core.ingest(&mut c.link, t, data)
            };
            if let Some(b) = bid {
                self.bufs.put(b);
            }
            if !keep {
                return self.close(t);
            }
            let c = &mut self.conns[t];
            let pending = !c.link.out.is_empty();
            self.core.queue(&mut c.link, t, pending);
            if !more {
                // The kernel ended the multishot (e.g. its buffers ran out): post it again.
                self.post_recv(t);
            }
        } else if res == -libc::ENOBUFS && !c.dead {
            self.post_recv(t);
        } else {
            // End of stream, an error, or our own cancel.
            self.close(t);
        }
    }

    fn on_send(&mut self, t: usize, res: i32) {
        let Some(c) = self.conns.get_mut(t) else { return };
        c.send_inflight = false;
        if res <= 0 || c.dead {
            return self.close(t);
        }
        bump(&self.core.srv.stats.workers[self.core.id].counters.net_output_bytes, res as u64);
        c.sent += res as usize;
        self.flush(t);
    }

    /// Sends what is pending: the rest of a short send, else everything in `link.out`.
    fn flush(&mut self, t: usize) {
        let Some(c) = self.conns.get_mut(t) else { return };
        if c.dead || c.send_inflight {
            return;
        }
        if c.sent >= c.sending.len() {
            c.sending.clear();
            c.sent = 0;
            if c.link.out.is_empty() {
                if c.sending.capacity() > super::worker::KEEP_OUT {
                    c.sending = Vec::new();
                }
                if !self.core.flushed(&mut c.link) {
                    self.close(t);
                }
                return;
            }
            std::mem::swap(&mut c.sending, &mut c.link.out);
        }
        let rest = &c.sending[c.sent..];
        let e = opcode::Send::new(types::Fd(c.fd.as_raw_fd()), rest.as_ptr(), rest.len() as u32)
            .flags(libc::MSG_NOSIGNAL)
            .build()
            .user_data((t as u64) << 2 | OP_SEND);
        c.send_inflight = true;
        self.push(e);
    }

    /// Starts closing `t`; frees it once nothing of it is in flight.
    fn close(&mut self, t: usize) {
        let Some(c) = self.conns.get_mut(t) else { return };
        if !c.dead {
            c.dead = true;
            if c.recv_armed {
                let e =
                    opcode::AsyncCancel::new((t as u64) << 2 | OP_RECV).build().user_data((t as u64) << 2 | OP_CANCEL);
                self.push(e);
            }
        }
        let c = &self.conns[t];
        if c.recv_armed || c.send_inflight {
            return;
        }
        let mut c = self.conns.remove(t);
        let fd = c.fd;
        self.core.release(&mut c.link, move || drop(fd));
    }
}
