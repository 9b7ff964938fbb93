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
//! - when many connections are active, a worker waits a little for more requests before it
//!   serves a round (`Pacing`), so one wake-up serves several of them.
//!
//! A send's buffer must stay put until its completion arrives, so a connection has two:
//! `sending` (owned by the kernel while a send is in flight) and `link.out`, where new replies
//! accumulate meanwhile. A connection is freed only once no operation of it is in flight.

use super::session::FirstReq;
use super::worker::{Accepted, Conn, Core, HasLink, Inbox, IoHome, Link, Wake};
use super::Server;
use crate::engine::Spot;
use crate::services::scripts::{register_busy_poll, BusyPoll};
use crate::services::stats::bump;
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use smallvec::SmallVec;
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
/// A completion of the round's batch that a busy script's poll already handled.
const TAKEN: u64 = u64::MAX - 1;
/// Completions looked at per `prefetch_round`: as many keys as one prefetch batch overlaps
/// well (the pipelined look-ahead's size), fetched shortly before their requests run.
const ROUND_AHEAD: usize = 16;
/// Completions handled per round (each at most one 4 KB buffer of input).
const ROUND_MAX: usize = 1024;

/// Adaptive batching of a worker's wake-ups (`io-batch-wait`).
///
/// Unpipelined over loopback TCP, most of a request's server CPU is the kernel's, and a large
/// share of it is waking the worker: with 50 busy clients a round served ~1.8 requests, each
/// round paying for a sleep, a cross-CPU wake-up and a reschedule (docs/BENCHMARKS.md). So
/// after a round has answered requests, the worker asks the kernel to wake it only once as many
/// new requests have arrived as it just answered — those clients are the ones about to send
/// again — or after a short timer, whichever comes first (`IORING_FEAT_MIN_TIMEOUT`: past
/// `min_wait_usec` one completion is enough). The timer is the price: a request can wait that
/// long. It is set every epoch to an eighth of the clients' cycle time — active connections ÷
/// arrival rate (Little's law), which is roughly what each request already waits at this load —
/// capped by `io-batch-wait`, and it is zero unless it gathers at least two more requests on
/// average. Since timer × rate ≤ active ÷ 8, that takes at least 16 connections of this worker
/// sending in the epoch, and at the 50 µs cap a rate of 40k requests/s: a lone client, a few
/// busy ones, or many sparse ones never wait.
///
/// With `appendfsync always` there is no timer: a round's replies already wait for its fsync,
/// and the requests that arrive meanwhile make the next round; a timer only adds to the wait
/// (50 clients: 90–94k SET/s with it, 93–101k without).
struct Pacing {
    /// False when the kernel lacks min-timeout waits (before 6.12).
    supported: bool,
    epoch: u32,
    epoch_start: quanta::Instant,
    /// Receive completions and distinct connections seen in this epoch.
    arrivals: u32,
    active: u32,
    /// The timer the next waits use, in microseconds (0: plain waits).
    wait_us: u32,
}

const EPOCH: std::time::Duration = std::time::Duration::from_millis(10);
/// Below this a timer costs more than the batching saves.
const MIN_WAIT_US: u32 = 5;

/// The timer of the next epoch's waits, from what the last one saw: `active` connections sent
/// `arrivals` receives in `elapsed_us`.
fn batch_wait_us(active: u32, arrivals: u32, elapsed_us: u64, max_us: u32) -> u32 {
    if arrivals == 0 {
        return 0;
    }
    let cycle_us = elapsed_us * active as u64 / arrivals as u64;
    let w = (cycle_us / 8).min(max_us as u64);
    // Worth a timer only if it gathers at least two more requests on average.
    if w < MIN_WAIT_US as u64 || w * (arrivals as u64) < 2 * elapsed_us {
        0
    } else {
        w as u32
    }
}

impl Pacing {
    fn new(ring: &IoUring) -> Pacing {
        Pacing {
            supported: ring.params().is_feature_min_timeout(),
            epoch: 1,
            epoch_start: quanta::Instant::now(),
            arrivals: 0,
            active: 0,
            wait_us: 0,
        }
    }

    /// A receive completion for a connection last seen in epoch `*seen`.
    #[inline]
    fn arrival(&mut self, seen: &mut u32) {
        self.arrivals += 1;
        if *seen != self.epoch {
            *seen = self.epoch;
            self.active += 1;
        }
    }

    /// Once per round: at the end of an epoch, the timer for the next one (`max_us`: the cap,
    /// asked for then).
    fn tick(&mut self, max_us: impl FnOnce() -> u32) {
        let elapsed = self.epoch_start.elapsed();
        if elapsed < EPOCH {
            return;
        }
        self.wait_us = if self.supported {
            batch_wait_us(self.active, self.arrivals, elapsed.as_micros() as u64, max_us())
        } else {
            0
        };
        // Epoch 0 is never current, so a new connection (seen = 0) counts as active.
        self.epoch = self.epoch.wrapping_add(1).max(1);
        self.epoch_start = quanta::Instant::now();
        self.arrivals = 0;
        self.active = 0;
    }
}

/// The ring of provided buffers: entries the kernel consumes from the head, that the worker
/// refills at the tail once it has used a buffer's bytes. The entries and the buffers (1 MB)
/// are one anonymous mapping shared with the kernel, like the submission and completion rings:
/// I/O memory outside the allocator, so not in `used_memory` (it is in RSS), as the kernel's
/// socket buffers are not in Redis's.
struct BufRing {
    entries: *mut types::BufRingEntry,
    /// Bytes of the entries, rounded to a page: the buffers start there.
    entries_len: usize,
    map_len: usize,
    tail: u16,
}

impl BufRing {
    fn new(ring: &IoUring) -> io::Result<BufRing> {
        let entries_len = (BUFS as usize * std::mem::size_of::<types::BufRingEntry>()).next_multiple_of(4096);
        let map_len = entries_len + BUFS as usize * BUF_SIZE;
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
        let mut br = BufRing { entries: p.cast(), entries_len, map_len, tail: 0 };
        // SAFETY: the mapping lives until `drop`, which runs after the ring is unregistered
        // (the ring is dropped first, see `Worker`).
        unsafe { ring.submitter().register_buf_ring_with_flags(p as u64, BUFS, BGID, 0)? };
        for bid in 0..BUFS {
            br.put(bid);
        }
        br.publish();
        Ok(br)
    }

    fn buf_ptr(&self, bid: u16) -> *mut u8 {
        // SAFETY: `bid < BUFS`: inside the mapping, after the entries.
        unsafe { self.entries.cast::<u8>().add(self.entries_len + bid as usize * BUF_SIZE) }
    }

    fn buf(&self, bid: u16, len: usize) -> &[u8] {
        // SAFETY: the kernel filled `len` bytes of this buffer, which is not handed back to it
        // (`put`) while the slice is borrowed.
        unsafe { std::slice::from_raw_parts(self.buf_ptr(bid), len.min(BUF_SIZE)) }
    }

    /// Gives buffer `bid` back (visible to the kernel at the next `publish`).
    fn put(&mut self, bid: u16) {
        let i = (self.tail & (BUFS - 1)) as usize;
        let addr = self.buf_ptr(bid) as u64;
        // SAFETY: `i < BUFS`, inside the mapping; the kernel does not read entries past the
        // published tail.
        let e = unsafe { &mut *self.entries.add(i) };
        e.set_addr(addr);
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
    /// The `Pacing` epoch this connection last sent something in.
    seen: u32,
    /// Sent a request since its last reply was queued (see `Worker::answered`).
    received: bool,
    send_inflight: bool,
    recv_armed: bool,
    /// Closing: waiting for the operations in flight to finish before freeing.
    dead: bool,
    /// Leaving for a Lua debugging session: waiting for the operations in flight to finish
    /// before handing the socket over (`Io::finish_hand_over`).
    handover: bool,
}

impl HasLink for Connection {
    fn link(&mut self) -> &mut Link {
        &mut self.link
    }
}

struct Worker {
    // Field order is drop order: the ring (and its registration of `bufs`) goes first.
    /// Reached through its own pointer: see `IoHome` for why (a busy script's poll).
    io: IoHome<Io>,
    core: Core,
    pacing: Pacing,
}

/// The part of a worker that `busy_poll` may use while one of its connections runs a busy
/// script: everything but the `Core`, which that command holds.
struct Io {
    ring: IoUring,
    bufs: BufRing,
    srv: Arc<Server>,
    id: usize,
    inbox: Arc<Inbox>,
    /// Boxed: the running connection's entry is outside the slab's storage (`IoHome`).
    conns: slab::Slab<Box<Connection>>,
    wake_fd: i32,
    wake_buf: Box<u64>,
    /// Sends queued this round (each brings a completion), and how many of them answer
    /// requests received this round: those clients the next wait expects back. Replies that
    /// answer nothing new (pub/sub pushes, resumed blocked clients, the rest of a short send)
    /// bring no request back.
    sends: u32,
    answered: u32,
    /// The round's completions, and the one being handled.
    batch: Vec<(u64, i32, u32)>,
    batch_pos: usize,
    busy: Busy,
}

/// `busy_poll`'s state.
#[derive(Default)]
struct Busy {
    cqes: Vec<(u64, i32, u32)>,
    /// Completions of the running connection itself, for the event loop to handle after its
    /// command (a receive's bytes copied out, its buffer given back at once).
    deferred: Vec<(u64, i32, u32, Vec<u8>)>,
    /// The poll took the inbox's wake-up (drain the inbox after).
    woken: bool,
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

/// True if the io_uring backend can also hold a wait's wake-up for a batch (`Pacing`): the
/// kernel has min-timeout waits (Linux 6.12).
pub fn batch_waits_available() -> bool {
    available() && build_ring().is_ok_and(|r| r.params().is_feature_min_timeout())
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
    let pacing = Pacing::new(&ring);
    let io = Io {
        ring,
        bufs,
        srv: srv.clone(),
        id,
        inbox: inbox.clone(),
        conns: slab::Slab::with_capacity(super::worker::SPARE_SLOTS),
        wake_fd,
        wake_buf: Box::new(0),
        sends: 0,
        answered: 0,
        batch: Vec::with_capacity(1024),
        batch_pos: usize::MAX,
        busy: Busy::default(),
    };
    let mut w = Worker { io: IoHome::new(io), core: Core::new(id, srv, inbox), pacing };
    w.io.get().post_wake_read();
    ready.fetch_add(1, Ordering::Release);
    w.main_loop();
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
        self.io.get().conns.get_mut(t).map(|c| &raw mut c.link)
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
        // `prefetch_round`'s scans, reused round after round (filled in place: a few hundred
        // bytes each); its bitmask says which of them hold one.
        let mut firsts: [FirstReq; ROUND_AHEAD] = Default::default();
        loop {
            let ts = types::Timespec::from(self.core.timeout());
            let mut args = types::SubmitArgs::new().timespec(&ts);
            let mut want = 1;
            // Work already queued for the next round (a blocked client's timeout reply) must
            // not wait for the timer.
            if self.pacing.wait_us > 0 && self.io.get().answered > 0 && self.core.to_flush.is_empty() {
                // The sends' own completions usually arrive at once and count too.
                want = ((self.io.get().sends + self.io.get().answered) as usize).min(CQ_ENTRIES as usize / 2);
                args = args.min_wait_usec(self.pacing.wait_us);
                bump(&self.core.srv.stats.workers[self.core.id].counters.batched_waits, 1);
            }
            self.io.get().sends = 0;
            self.io.get().answered = 0;
            if let Err(e) = self.io.get().ring.submitter().submit_with_args(want, &args) {
                match e.raw_os_error() {
                    Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY) => {}
                    _ => crate::log_warning!("io_uring_enter failed: {e}"),
                }
            }
            self.core.begin_round();
            self.io.get().batch.clear();
            // At most ROUND_MAX completions per round: the rest wait in the completion queue
            // for the next round, so one round of floods (thousands of connections streaming
            // big requests) cannot hold up the replies of everyone else for long.
            let io = self.io.get();
            io.batch.extend(io.ring.completion().take(ROUND_MAX).map(|c| (c.user_data(), c.result(), c.flags())));
            let mut served = self.io.get().batch.len();
            self.run_batch(&mut firsts);
            // `appendfsync always`: requests that came in while the round ran join it before
            // its fsync (`Core::top_up`).
            let mut looks = 0;
            let mut got = served;
            while served < ROUND_MAX && self.core.top_up(&mut looks, got) {
                self.io.get().bufs.publish();
                // Runs the receive work that arrived, without waiting for any.
                let ts = types::Timespec::new();
                let _ = self.io.get().ring.submitter().submit_with_args(1, &types::SubmitArgs::new().timespec(&ts));
                self.io.get().batch.clear();
                let io = self.io.get();
                io.batch.extend(
                    io.ring.completion().take(ROUND_MAX - served).map(|c| (c.user_data(), c.result(), c.flags())),
                );
                got = self.io.get().batch.len();
                served += got;
                self.run_batch(&mut firsts);
            }
            // A busy script's poll took the inbox's wake-up.
            if std::mem::take(&mut self.io.get().busy.woken) {
                super::worker::take_inbox(self);
            }
            self.io.get().bufs.publish();
            self.hand_overs();
            // beforeSleep: queue the sends of everything this round produced; the next
            // io_uring_enter submits them all.
            let pending = self.core.take_flush(&mut self.io.get().conns);
            for &t in &pending {
                self.io.get().flush(t);
            }
            self.core.end_round(pending, &mut self.io.get().conns);
            super::worker::resume_waiting(self);
            self.hand_overs();
            let srv = &self.core.srv;
            self.pacing.tick(|| {
                if crate::daemons::aof::fsync_always(srv) {
                    0
                } else {
                    srv.config.hot.io_batch_wait.load(Ordering::Relaxed)
                }
            });
        }
    }

    /// Handles the completions in `io.batch`, in order.
    fn run_batch(&mut self, firsts: &mut [FirstReq; ROUND_AHEAD]) {
        let mut scanned = 0u32;
        let mut i = 0;
        while i < self.io.get().batch.len() {
            let (ud, res, flags) = self.io.get().batch[i];
            // A busy script's poll takes the completions after this one (`serve_while_busy`).
            self.io.get().batch_pos = i;
            let j = i % ROUND_AHEAD;
            if j == 0 {
                scanned = self.prefetch_round(i, firsts);
            }
            i += 1;
            if ud == TAKEN {
                continue;
            }
            if ud == WAKE {
                super::worker::take_inbox(self);
                self.io.get().post_wake_read();
                continue;
            }
            let t = (ud >> 2) as usize;
            match ud & 3 {
                OP_RECV => {
                    let first = (scanned & 1 << j != 0).then(|| &firsts[j]);
                    self.on_recv(t, res, flags, first)
                }
                OP_SEND => self.io.get().on_send(t, res),
                _ => {}
            }
        }
        self.io.get().batch_pos = usize::MAX;
    }

    /// Unpipelined clients: the first request of each connection in `cqes` is looked at before
    /// any of them runs, and their keys are prefetched together, so the lookups' cache misses
    /// overlap (as a pipeline's do in `Session::process`) instead of each request paying for
    /// them in turn. Leaves in `firsts`, per completion, its first request as scanned here
    /// (returning which hold one), which spares its session scanning it and hashing its key
    /// again.
    fn prefetch_round(&self, from: usize, firsts: &mut [FirstReq; ROUND_AHEAD]) -> u32 {
        let io = self.io.get_ref();
        let cqes = &io.batch[from..io.batch.len().min(from + ROUND_AHEAD)];
        let mut scanned = 0u32;
        // Unpipelined, each request touches its connection's state (a few hundred bytes:
        // session, parser, reply buffers, flags) for the first time since the kernel's network
        // work evicted it; its misses are started together too.
        for &(ud, res, _) in cqes {
            if ud & 3 == OP_RECV && ud != WAKE && res > 0 {
                if let Some(c) = io.conns.get((ud >> 2) as usize) {
                    crate::engine::dict::prefetch_range(
                        &**c as *const Connection as *const u8,
                        std::mem::size_of::<Connection>(),
                    );
                }
            }
        }
        let mut spots: SmallVec<[Spot; ROUND_AHEAD]> = SmallVec::new();
        for (i, &(ud, res, flags)) in cqes.iter().enumerate() {
            if ud & 3 != OP_RECV || ud == WAKE || res <= 0 {
                continue;
            }
            let (Some(c), Some(bid)) = (io.conns.get((ud >> 2) as usize), cqueue::buffer_select(flags)) else {
                continue;
            };
            // TLS input is ciphertext until the session's codec opens it.
            if c.dead || c.link.tls.is_some() {
                continue;
            }
            let data = io.bufs.buf(bid, res as usize);
            let first = &mut firsts[i];
            if let Some(spot) = c.link.session.first_key(&self.core.srv, data, first) {
                scanned |= 1 << i;
                // A pipeline's first key is prefetched with the rest of it, by the session.
                if first.consumed() == data.len() {
                    spots.push(spot);
                }
            }
        }
        if spots.len() > 1 {
            self.core.srv.ks.prefetch_spots(&spots);
        }
        scanned
    }

    /// Connections whose EVAL starts a Lua debugging session begin leaving the ring.
    fn hand_overs(&mut self) {
        for (t, id) in std::mem::take(&mut self.core.hand_overs) {
            self.io.get().begin_hand_over(t, id);
        }
    }

    fn on_recv(&mut self, t: usize, res: i32, flags: u32, first: Option<&FirstReq>) {
        // SAFETY: `busy_poll` makes its `&mut Io` from the `IoHome`'s pointer and touches every
        // connection but `t` (whose boxed entry it never covers) and every receive buffer but
        // the one being read; while `t`'s requests run nothing else holds a reference into
        // the `Io` (`Io::recv` lets its own go first), so the poll's is the only one alive.
        let busy = unsafe { register_busy_poll(BusyPoll { poll: busy_poll, ctx: self.io.ptr().cast(), current: t }) };
        self.recv(t, res, flags, first, None);
        drop(busy);
        self.after_busy(t);
    }

    /// Completions of `t` that arrived while a script it ran was busy, in their order.
    fn after_busy(&mut self, t: usize) {
        while !self.io.get().busy.deferred.is_empty() {
            for (ud, res, flags, bytes) in std::mem::take(&mut self.io.get().busy.deferred) {
                match ud & 3 {
                    OP_RECV => self.recv(t, res, flags, None, Some(&bytes)),
                    OP_SEND => self.io.get().on_send(t, res),
                    _ => {}
                }
            }
        }
    }

    /// A receive completion: runs its bytes (or `copied`, bytes set aside by the busy poll).
    fn recv(&mut self, t: usize, res: i32, flags: u32, first: Option<&FirstReq>, copied: Option<&[u8]>) {
        self.core.read_full |= copied.is_none() && res as usize >= BUF_SIZE;
        let (core, pacing) = (&mut self.core, &mut self.pacing);
        // SAFETY: the `IoHome`'s pointer, with no reference into the `Io` held meanwhile.
        let ran = unsafe {
            Io::recv(self.io.ptr(), t, res, flags, copied, |c, data| {
                pacing.arrival(&mut c.seen);
                core.ingest(&mut c.link, t, data, first)
            })
        };
        if ran {
            let c = &mut self.io.get().conns[t];
            let pending = c.link.has_output();
            self.core.queue(&mut c.link, t, pending);
            if copied.is_none() && res as usize >= BUF_SIZE {
                self.read_through(t);
            }
        }
    }

    /// A full buffer came while a big argument is still arriving: reads the rest of it that
    /// is already in the socket now, as Redis reads a big argument whole once its socket is
    /// readable. The kernel's multishot receive hands over at most 32 buffers (128 KB) a turn
    /// and then goes behind every other ready socket, so without this a 400 KB value would
    /// arrive over several rounds, with requests of other clients run in between — a CLIENT
    /// LIST that does not yet see the client over its memory limit evicted, for one.
    ///
    /// In order with the ring: only when no later completion of `t` waits in this round's
    /// batch or the completion queue (with `DEFER_TASKRUN` the kernel posts none until the
    /// next enter), and never once a busy script's poll set completions of `t` aside. Not for
    /// TLS (the argument's length counts plain text).
    fn read_through(&mut self, t: usize) {
        const MAX_READ: usize = 256 << 10;
        // Allocated for this argument and freed after it: no worker keeps a buffer this size
        // for the rare big argument (used_memory would count it).
        let mut through = Vec::new();
        loop {
            let io = self.io.get();
            if !io.busy.deferred.is_empty() || !io.ring.completion().is_empty() {
                return;
            }
            if io.batch_pos < io.batch.len()
                && io.batch[io.batch_pos + 1..]
                    .iter()
                    .any(|&(ud, _, _)| ud != TAKEN && ud != WAKE && ud & 3 == OP_RECV && (ud >> 2) as usize == t)
            {
                return;
            }
            let Some(c) = io.conns.get_mut(t) else { return };
            if c.dead || c.link.tls.is_some() || c.link.session.client.handle.killed.load(Ordering::Acquire) {
                return;
            }
            let want = c.link.session.big_remaining().min(MAX_READ);
            // The argument's last few KB come with the ring's next receive as usual.
            if want < BUF_SIZE {
                return;
            }
            if through.len() < want {
                through.resize(want, 0);
            }
            // SAFETY: reads into our own buffer, within its length.
            let n = unsafe { libc::recv(c.fd.as_raw_fd(), through.as_mut_ptr().cast(), want, libc::MSG_DONTWAIT) };
            // Nothing more yet, the end of the stream or an error: the ring's receive, which
            // reads on from here, reports them.
            if n <= 0 {
                return;
            }
            let n = n as usize;
            self.core.read_full = true;
            let c: *mut Connection = &mut **c;
            // SAFETY: `t`'s boxed entry, which a busy script's poll never touches (as in
            // `Io::recv`); no other reference into the `Io` is held while the requests run.
            if !self.core.ingest(unsafe { &mut (*c).link }, t, &through[..n], None) {
                self.io.get().close(t);
                return;
            }
            let c = &mut self.io.get().conns[t];
            let pending = c.link.has_output();
            self.core.queue(&mut c.link, t, pending);
            // A short read does not end it: taking bytes opens the receive window, and on
            // loopback the sender's queued bytes arrive at once; the loop ends when the
            // socket has nothing (EAGAIN) or the argument is complete.
            let _ = n;
        }
    }
}

/// While a script run by connection `current` is busy (the interpreter's hook calls this
/// about every millisecond): reaps the ring's completions once, serving the worker's other
/// connections — their requests are answered `-BUSY` but for SCRIPT KILL and the like
/// (`worker::ingest_while_busy`), their replies sent at once — and setting `current`'s own
/// aside. New connections wait in the inbox.
///
/// # Safety
/// `ctx` is the `IoHome` pointer of the worker whose `on_recv` registered this poll and is
/// still running.
unsafe fn busy_poll(ctx: *mut (), current: usize) {
    // SAFETY: the caller's: `ctx` is the worker's `IoHome` pointer, and nothing else holds a
    // reference into the `Io` while the command path runs (see `on_recv`).
    let io = unsafe { &mut *ctx.cast::<Io>() };
    io.serve_while_busy(current);
}

impl Io {
    fn add_connection(&mut self, conn: Conn) {
        let mut a = Accepted::new(conn, &self.srv);
        let entry = self.conns.vacant_entry();
        let t = entry.key();
        let link = super::worker::new_link(&self.srv, self.id, &self.inbox, t, &mut a);
        super::worker::publish(&self.srv, &link);
        entry.insert(Box::new(Connection {
            fd: a.fd,
            link,
            sending: Vec::new(),
            sent: 0,
            seen: 0,
            received: false,
            send_inflight: false,
            recv_armed: false,
            dead: false,
            handover: false,
        }));
        self.post_recv(t);
    }

    /// New connections, taken while a script is busy — only into slots the slab already has,
    /// so that the running connection's entry does not move.
    fn accept_while_busy(&mut self) {
        while let Some(c) = super::worker::spare_slot_conn(&self.conns, &self.inbox) {
            self.add_connection(c);
        }
    }
    /// A receive completion for `t`: hands its bytes (`copied`, or the kernel's buffer, then
    /// given back) to `run` (false: close the connection), posts the receive again when the
    /// kernel ended it, closes at the end of the stream. True if `t` ran requests and is open.
    ///
    /// # Safety
    /// `io` is a worker's `IoHome` pointer, and the caller holds no reference into the `Io`:
    /// `run` (the command path) may run a busy script whose poll makes its own `&mut Io`, so
    /// this function lets its borrow go before `run` and takes a new one after; `run` gets
    /// only `t`'s boxed entry and the receive buffer, which the poll leaves alone.
    unsafe fn recv(
        io: *mut Io,
        t: usize,
        res: i32,
        flags: u32,
        copied: Option<&[u8]>,
        run: impl FnOnce(&mut Connection, &[u8]) -> bool,
    ) -> bool {
        let more = cqueue::more(flags);
        let bid = if copied.is_some() { None } else { cqueue::buffer_select(flags) };
        let (c, data) = {
            // SAFETY: the caller's; this borrow ends before `run`.
            let me = unsafe { &mut *io };
            let Some(c) = me.conns.get_mut(t) else {
                if let Some(b) = bid {
                    me.bufs.put(b);
                }
                return false;
            };
            if !more {
                c.recv_armed = false;
            }
            if res <= 0 {
                if c.handover && !c.dead && (res == -libc::ECANCELED || res == -libc::ENOBUFS) {
                    // The receive ended for the hand-over (or ran out of buffers meanwhile).
                    me.finish_hand_over(t);
                } else if res == -libc::ENOBUFS && !c.dead {
                    me.post_recv(t);
                } else {
                    // End of stream, an error, or our own cancel.
                    me.close(t);
                }
                return false;
            }
            c.received = true;
            // Bytes for a connection already closing (or killed) are dropped; the buffer is
            // recycled either way.
            let dropped = c.dead || c.link.session.client.handle.killed.load(Ordering::Acquire);
            let c: *mut Connection = &mut **c;
            let data = match (dropped, copied) {
                (true, _) => None,
                (false, Some(d)) => Some(d),
                (false, None) => {
                    let b = me.bufs.buf(bid.unwrap_or(0), res as usize);
                    // SAFETY: the ring's mapping, which outlives this call; the buffer goes
                    // back to the kernel only below, after `run`.
                    Some(unsafe { std::slice::from_raw_parts(b.as_ptr(), b.len()) })
                }
            };
            (c, data)
        };
        // SAFETY: `t`'s boxed entry, which the poll never touches or removes.
        let keep = data.is_some_and(|d| run(unsafe { &mut *c }, d));
        // SAFETY: the caller's; `run` has returned, and the poll's borrow with it.
        let me = unsafe { &mut *io };
        if let Some(b) = bid {
            me.bufs.put(b);
        }
        if !keep {
            me.close(t);
            return false;
        }
        if !more {
            if me.conns.get(t).is_some_and(|c| c.handover) {
                me.finish_hand_over(t);
                return false;
            }
            // The kernel ended the multishot (e.g. its buffers ran out): post it again.
            me.post_recv(t);
        }
        true
    }

    fn serve_while_busy(&mut self, current: usize) {
        // A script runs, and this worker still serves: alive, for the watchdog.
        crate::daemons::watchdog::alive(&self.srv, self.id);
        // The sends queued since the last look go out now, and the kernel runs the receive
        // work that arrived (deferred until an enter that asks for completions; a zero timer
        // keeps this from waiting).
        let ts = types::Timespec::new();
        let _ = self.ring.submitter().submit_with_args(1, &types::SubmitArgs::new().timespec(&ts));
        let mut cqes = std::mem::take(&mut self.busy.cqes);
        cqes.clear();
        // The rest of the event loop's batch first (a request that arrived with the script's
        // own), then what came since.
        if self.batch_pos < self.batch.len() {
            for e in &mut self.batch[self.batch_pos + 1..] {
                cqes.push(std::mem::replace(e, (TAKEN, 0, 0)));
            }
        }
        cqes.extend(self.ring.completion().map(|c| (c.user_data(), c.result(), c.flags())));
        for &(ud, res, flags) in &cqes {
            if ud == TAKEN {
                continue;
            }
            if ud == WAKE {
                self.busy.woken = true;
                self.accept_while_busy();
                self.post_wake_read();
                continue;
            }
            let t = (ud >> 2) as usize;
            if t == current {
                let mut bytes = Vec::new();
                if ud & 3 == OP_RECV {
                    if let Some(b) = cqueue::buffer_select(flags) {
                        if res > 0 {
                            bytes.extend_from_slice(self.bufs.buf(b, res as usize));
                        }
                        self.bufs.put(b);
                    }
                }
                self.busy.deferred.push((ud, res, flags, bytes));
                continue;
            }
            match ud & 3 {
                OP_RECV => {
                    let (srv, id) = (self.srv.clone(), self.id);
                    // SAFETY: a pointer from this borrow, unused until `recv` returns; what
                    // `ingest_while_busy` runs never polls again.
                    let me: *mut Io = self;
                    if unsafe {
                        Io::recv(me, t, res, flags, None, |c, data| {
                            super::worker::ingest_while_busy(&srv, id, &mut c.link, data)
                        })
                    } {
                        self.flush(t);
                    }
                }
                OP_SEND => self.on_send(t, res),
                _ => {}
            }
        }
        self.busy.cqes = cqes;
        self.bufs.publish();
        let _ = self.ring.submit();
    }

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

    fn on_send(&mut self, t: usize, res: i32) {
        let Some(c) = self.conns.get_mut(t) else { return };
        c.send_inflight = false;
        if res <= 0 || c.dead {
            return self.close(t);
        }
        let counters = &self.srv.stats.workers[self.id].counters;
        super::worker::count_output(&c.link.session.client.handle, counters, res as usize);
        bump(&counters.writes_processed, 1);
        c.sent += res as usize;
        c.link.in_flight = c.sending.len() - c.sent;
        if c.sent < c.sending.len() {
            // A short send: the socket is full, the client reads slower than it asks.
            let pending = c.sending.len() - c.sent + c.link.out.len();
            let cap = c.sending.capacity() + c.link.out.capacity();
            c.link.show_output(&self.srv, c.sending.len(), pending, cap);
        }
        self.flush(t);
    }

    /// Sends what is pending: the rest of a short send, else everything in `link.out`.
    fn flush(&mut self, t: usize) {
        let Some(c) = self.conns.get_mut(t) else { return };
        if c.dead {
            return;
        }
        if c.handover {
            // What is unsent goes with the socket (`finish_hand_over`).
            return self.finish_hand_over(t);
        }
        if c.send_inflight {
            // Replies pile up behind a send the kernel cannot finish (the client does not
            // read): they are pending output, which the output-buffer limits and client
            // eviction must see.
            if !c.link.out.is_empty() {
                let pending = c.sending.len() - c.sent + c.link.out.len();
                let cap = c.sending.capacity() + c.link.out.capacity();
                c.link.show_output(&self.srv, c.sending.len(), pending, cap);
            }
            return;
        }
        if c.sent >= c.sending.len() {
            // Replies of this round go out at its end (`take_flush`: with `appendfsync
            // always`, after its fsync), even when an earlier send has just finished.
            if c.link.queued {
                return;
            }
            c.sending.clear();
            c.sent = 0;
            if !c.link.has_output() {
                if c.sending.capacity() > super::worker::KEEP_OUT {
                    c.sending = Vec::new();
                }
                if !super::worker::flushed(&self.srv, &mut c.link, c.sending.capacity()) {
                    self.close(t);
                }
                return;
            }
            match c.link.tls.as_deref_mut() {
                // The replies are sealed into the send buffer (with any handshake messages).
                Some(tls) => {
                    tls.seal(&c.link.out, &mut c.sending);
                    c.link.out.clear();
                }
                None => std::mem::swap(&mut c.sending, &mut c.link.out),
            }
            let batch = c.sending.len();
            c.link.in_flight = batch;
            c.link.show_output(&self.srv, batch, 0, c.sending.capacity() + c.link.out.capacity());
        }
        let rest = &c.sending[c.sent..];
        let e = opcode::Send::new(types::Fd(c.fd.as_raw_fd()), rest.as_ptr(), rest.len() as u32)
            .flags(libc::MSG_NOSIGNAL)
            .build()
            .user_data((t as u64) << 2 | OP_SEND);
        c.send_inflight = true;
        self.sends += 1;
        if std::mem::take(&mut c.received) {
            self.answered += 1;
        }
        self.push(e);
    }

    /// Starts handing `t` over to a Lua debugging session (its EVAL asked for one): the
    /// receive is cancelled; the socket goes once nothing of it is in flight.
    fn begin_hand_over(&mut self, t: usize, id: u64) {
        let Some(c) = self.conns.get_mut(t) else { return };
        if c.dead || c.handover || c.link.session.client.id() != id || c.link.session.client.ldb_request.is_none() {
            return;
        }
        c.handover = true;
        if c.recv_armed {
            let e = opcode::AsyncCancel::new((t as u64) << 2 | OP_RECV).build().user_data((t as u64) << 2 | OP_CANCEL);
            self.push(e);
        }
        self.finish_hand_over(t);
    }

    /// Hands `t`'s socket, session and unsent output to the debugging session's thread, once
    /// no receive or send of it is in flight.
    fn finish_hand_over(&mut self, t: usize) {
        let Some(c) = self.conns.get(t) else { return };
        if c.dead || !c.handover || c.recv_armed || c.send_inflight {
            return;
        }
        let c = *self.conns.remove(t);
        let sealed = c.sending[c.sent.min(c.sending.len())..].to_vec();
        super::debugging::hand_over(self.srv.clone(), c.fd, c.link, sealed);
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
        let mut c = *self.conns.remove(t);
        let fd = c.fd;
        super::worker::release(&self.srv, &mut c.link, move || drop(fd));
    }
}

#[cfg(test)]
mod tests {
    use super::batch_wait_us;

    #[test]
    fn batch_wait_follows_the_load() {
        // 50 clients at 80k requests/s (10 ms epoch): cycle 625 µs, an eighth is 78, capped.
        assert_eq!(batch_wait_us(50, 800, 10_000, 50), 50);
        assert_eq!(batch_wait_us(50, 800, 10_000, 100), 78);
        assert_eq!(batch_wait_us(50, 800, 10_000, 0), 0);
        // Timer × rate ≤ active ÷ 8: fewer than 16 clients never wait, however fast they go.
        assert_eq!(batch_wait_us(16, 800, 10_000, 50), 25);
        assert_eq!(batch_wait_us(15, 800, 10_000, 50), 0);
        assert_eq!(batch_wait_us(1, 3000, 10_000, 50), 0);
        assert_eq!(batch_wait_us(3, 3000, 10_000, 50), 0);
        // 8 clients at 80k/s: cycle 100 µs, a 12 µs timer would gather one request on average.
        assert_eq!(batch_wait_us(8, 800, 10_000, 50), 0);
        // 1000 mostly idle clients, 10k requests/s: a 50 µs timer would gather half a request.
        assert_eq!(batch_wait_us(1000, 100, 10_000, 50), 0);
        // 200 clients at 200k/s: cycle 1 ms, 50 µs gathers ten.
        assert_eq!(batch_wait_us(200, 2000, 10_000, 50), 50);
        // Nothing arrived.
        assert_eq!(batch_wait_us(50, 0, 10_000, 50), 0);
    }
}
