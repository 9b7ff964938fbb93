//! What a worker thread does whatever moves its bytes: the part of the event loop shared by the
//! epoll backend (`evloop.rs`) and the io_uring backend (`uring.rs`).
//!
//! A worker owns its connections for their whole life. Each round it takes in what the
//! connections sent, runs every complete request (replies accumulate in the connection's
//! output), and only then writes all output ("beforeSleep"): peers wake once for many replies.
//! Between rounds it expires blocked clients' deadlines and runs the cron (`hz`): active expiry,
//! idle timeouts. The backends differ only in how bytes arrive and leave.
//!
//! Other threads talk to a worker through its [`Inbox`]: new connections from the acceptor, and
//! blocked clients whose wait ended (served by another worker's write, CLIENT UNBLOCK), each
//! followed by a wake of the loop.

use super::session::{FirstReq, Session};
use super::tls::TlsCodec;
use super::{Server, ShutdownMode};
use crate::exec::blocking::WaitState;
use crate::exec::client::{Client, ClientHandle};
use crate::lockorder::{rank, Mutex};
use crate::protocol::Reply;
use crate::services::stats::bump;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Where `request_shutdown` sends the request: the main thread's watch (set once by `net::run`).
pub(super) static SHUTDOWN: std::sync::OnceLock<tokio::sync::watch::Sender<Option<ShutdownMode>>> =
    std::sync::OnceLock::new();

/// Asks the main thread to shut the server down.
pub fn request_shutdown(mode: ShutdownMode) {
    if let Some(tx) = SHUTDOWN.get() {
        let _ = tx.send(Some(mode));
    }
}

/// `timeout`: closes clients idle for longer (Redis's clientsCron rule).
pub fn close_idle_clients(srv: &Server) {
    let timeout = srv.config.hot.timeout.load(Ordering::Relaxed) as i64;
    if timeout == 0 {
        return;
    }
    let now = srv.now_ms();
    for h in srv.clients.snapshot() {
        // Subscribers and monitors wait for messages, not requests: Redis never times them
        // out.
        if h.subscriptions() > 0
            || h.monitor.load(Ordering::Relaxed)
            || h.replica.load(Ordering::Relaxed)
            || h.master.load(Ordering::Relaxed)
        {
            continue;
        }
        if now - h.last_ms.load(Ordering::Relaxed) > timeout * 1000 {
            crate::log_verbose!("Closing idle client");
            h.kill();
        }
    }
}

/// `client-output-buffer-limit` once per cron, as Redis's clientsCron: a reader that stopped
/// taking its output stays over the soft limit with no new output to check it, and is closed
/// when its seconds are up.
pub fn close_over_output_limits(srv: &Server) {
    if srv.config.hot.obuf_look.load(Ordering::Relaxed) == u64::MAX {
        return;
    }
    for h in srv.clients.snapshot() {
        let pending = h.out_pending.load(Ordering::Relaxed);
        if pending > 0 && crate::services::pubsub::over_output_limit(&srv.config.hot, &h, pending) {
            crate::services::pubsub::close_over_limit(&h);
        }
    }
}

/// A connection keeps its reply buffer between rounds only up to this size.
pub const KEEP_OUT: usize = 4096;
/// Free connection slots a worker keeps, so that a busy script's poll can take new connections
/// without moving the connection running the script (see `services::scripts::BusyPoll`).
pub const SPARE_SLOTS: usize = 64;
/// Connections waiting in a worker's inbox before the acceptor backs off.
pub const INBOX_LIMIT: usize = 65536;
/// At most this many looks for late requests before a round's fsync (`Core::top_up`).
const TOP_UP_LOOKS: usize = 8;

/// A connection handed from the acceptor to a worker.
pub enum Conn {
    Tcp(std::net::TcpStream),
    /// A connection to a `tls-port`, with its codec (made at accept time, from the TLS
    /// configuration then in use).
    Tls(std::net::TcpStream, Box<TlsCodec>),
    Unix(std::os::unix::net::UnixStream),
}

/// How another thread wakes a worker's loop.
pub enum Wake {
    Mio(mio::Waker),
    /// An eventfd the io_uring loop keeps a read posted on.
    EventFd(OwnedFd),
}

impl Wake {
    fn wake(&self) {
        match self {
            Wake::Mio(w) => {
                let _ = w.wake();
            }
            Wake::EventFd(fd) => {
                let one = 1u64;
                // SAFETY: writes 8 bytes from a live u64 to an eventfd this struct owns.
                unsafe { libc::write(fd.as_raw_fd(), &one as *const u64 as *const libc::c_void, 8) };
            }
        }
    }
}

/// The mailbox of a worker: what other threads hand it, plus the way to wake its loop.
pub struct Inbox {
    conns: Mutex<VecDeque<Conn>, { rank::INBOX }>,
    /// (token, client id) of blocked clients whose wait ended.
    resumed: Mutex<Vec<(usize, u64)>, { rank::INBOX }>,
    wake: Wake,
}

impl Inbox {
    pub fn new(wake: Wake) -> Arc<Inbox> {
        Arc::new(Inbox { conns: Mutex::new(VecDeque::new()), resumed: Mutex::new(Vec::new()), wake })
    }

    pub fn waker(&self) -> &Wake {
        &self.wake
    }

    /// Hands a new connection to the worker; gives it back when the inbox is full.
    pub fn try_push(&self, c: Conn) -> Option<Conn> {
        let mut q = self.conns.lock();
        if q.len() >= INBOX_LIMIT {
            return Some(c);
        }
        q.push_back(c);
        drop(q);
        self.wake.wake();
        None
    }

    /// The oldest connection waiting to be added.
    pub fn pop_conn(&self) -> Option<Conn> {
        self.conns.lock().pop_front()
    }

    /// Wakes the worker's loop.
    pub fn wake_loop(&self) {
        self.wake.wake();
    }

    fn resume(&self, token: usize, client: u64) {
        self.resumed.lock().push((token, client));
        self.wake.wake();
    }
}

/// The backend-independent state of one connection.
pub struct Link {
    pub session: Session,
    /// Replies not yet handed to the socket.
    pub out: Vec<u8>,
    /// Bytes at the front of `out` already written (the epoll backend writes `out` in place).
    pub sent: usize,
    /// Bytes the backend holds outside `out`, not yet written (the io_uring backend's send
    /// buffer).
    pub in_flight: usize,
    /// Close once the output is written.
    pub closing: bool,
    /// Already queued for this round's flush.
    pub queued: bool,
    /// A TLS connection's codec: input is opened before the session sees it, output sealed
    /// before the backend writes it.
    pub tls: Option<Box<TlsCodec>>,
    /// What the handle last showed of the output side (see [`Link::show_output`]).
    shown: OutputShown,
    /// Messages moved into `out` this round, not yet offered to the socket (not counted for
    /// eviction meanwhile, see `clients::Arriving`).
    pub arriving: crate::services::clients::Arriving,
}

/// CLIENT LIST's output fields as last published: `rbs` (reply buffer capacity), `rbp` (the
/// largest batch of replies since the buffer was last given back) and the bytes the socket has
/// not taken yet (`obl`/`omem`, `events=rw`).
#[derive(Default, Clone, Copy)]
struct OutputShown {
    cap: usize,
    peak: usize,
    pending: usize,
}

/// Counts `n` bytes written to a client: a replica's stream apart from clients' replies
/// (INFO `total_net_repl_output_bytes`), its `+FULLRESYNC`/`+CONTINUE` line in neither.
#[inline]
pub fn count_output(h: &crate::services::clients::ClientHandle, counters: &crate::services::stats::Counters, n: usize) {
    if !h.replica.load(std::sync::atomic::Ordering::Relaxed) {
        bump(&counters.net_output_bytes, n as u64);
        return;
    }
    replica_output(h, counters, n as u64);
}

#[cold]
fn replica_output(h: &crate::services::clients::ClientHandle, counters: &crate::services::stats::Counters, mut n: u64) {
    use std::sync::atomic::Ordering::Relaxed;
    let skip = h.repl_uncounted.load(Relaxed).min(n);
    if skip > 0 {
        h.repl_uncounted.fetch_sub(skip, Relaxed);
        n -= skip;
    }
    bump(&counters.net_repl_output_bytes, n);
}

impl Link {
    /// There is something to write: replies, or a TLS handshake's messages.
    pub fn has_output(&self) -> bool {
        self.out.len() > self.sent || self.tls.as_ref().is_some_and(|t| t.wants_write())
    }

    /// Output bytes the client has not taken yet, wherever they are.
    pub fn unsent(&self) -> usize {
        self.in_flight + self.out.len() - self.sent
    }

    /// Publishes the output side to the client's handle, touching the shared atomics only
    /// when a figure changed: a client whose replies fit its socket and its kept buffer costs
    /// three comparisons per flush. `batch`: bytes of the replies being written now; `cap`:
    /// capacity of the buffers the backend holds for this connection.
    pub fn show_output(&mut self, srv: &Server, batch: usize, pending: usize, cap: usize) {
        let h = &self.session.client.handle;
        // The replies a batch was building are now in the buffers `cap` counts.
        if h.reply_round.load(Ordering::Relaxed) != 0 {
            h.reply_round.store(0, Ordering::Relaxed);
        }
        // A reader this far behind breaks `client-output-buffer-limit`: it is disconnected.
        if pending > 0 {
            // The socket took what it could; the rest is the client's output buffer.
            self.arriving.settle();
            if crate::services::pubsub::over_output_limit(&srv.config.hot, h, pending as u64) {
                crate::services::pubsub::close_over_limit(h);
            }
        } else if h.obuf_soft_since.load(Ordering::Relaxed) != 0 {
            // All written: the soft limit's clock starts over.
            h.obuf_soft_since.store(0, Ordering::Relaxed);
        }
        if batch > self.shown.peak {
            self.shown.peak = batch;
            h.reply_peak.store(batch as u64, Ordering::Relaxed);
        }
        if pending != self.shown.pending {
            self.shown.pending = pending;
            h.out_pending.store(pending as u64, Ordering::Relaxed);
        }
        if cap != self.shown.cap {
            // Replies piling up for a reader that does not take them: weighed against
            // `maxmemory-clients` at this round's end, not a scan later (Redis evicts before
            // the next command runs).
            if cap > self.shown.cap + (32 << 10) && srv.config.hot.maxmemory_clients.load(Ordering::Relaxed) != 0 {
                srv.evict.client_grew();
            }
            self.shown.cap = cap;
            h.reply_cap.store(cap as u64, Ordering::Relaxed);
        }
    }

    /// The reply buffer was given back: its peak starts over (from the batch that grew it).
    fn reset_peak(&mut self) {
        if self.shown.peak != 0 {
            self.shown.peak = 0;
            self.session.client.handle.reply_peak.store(0, Ordering::Relaxed);
        }
    }
}

/// Gives the core access to the link inside a backend's connection type.
/// What the worker core asks of a backend (epoll, io_uring) to take in new connections and to
/// resume clients whose wait ended — the glue both backends share ([`take_inbox`],
/// [`resume_waiting`]).
pub trait Backend {
    fn core(&mut self) -> &mut Core;
    /// Adds a connection the acceptor handed over.
    fn add_connection(&mut self, c: Conn);
    /// Connection `t`'s link, in its boxed slab entry: valid until `t` is closed by the
    /// backend, for the command path to use while no other reference into the connections is
    /// held (a busy script's poll leaves `t`'s entry alone).
    fn link_ptr(&mut self, t: usize) -> Option<*mut Link>;
    /// Registers the backend's busy-script poll while `t`'s commands run.
    fn busy_poll(&mut self, t: usize) -> crate::services::scripts::BusyPollGuard;
    /// After `t`'s commands, which may have run a busy script.
    fn after_busy(&mut self, t: usize);
}

/// Takes the inbox: adds the new connections, then resumes the clients whose wait ended.
pub fn take_inbox<B: Backend>(b: &mut B) {
    for c in b.core().drain_inbox() {
        b.add_connection(c);
    }
    resume_waiting(b);
}

/// Resumes the clients whose wait ended (`Core::to_resume`), each as its own input is run:
/// with the busy poll registered, since the requests that queued behind the wait may run a
/// script.
pub fn resume_waiting<B: Backend>(b: &mut B) {
    for (t, id) in std::mem::take(&mut b.core().to_resume) {
        let Some(link) = b.link_ptr(t) else { continue };
        let busy = b.busy_poll(t);
        // SAFETY: `link_ptr`'s: `t`'s boxed entry, which the poll leaves alone; nothing else
        // refers into the connections while the command path uses it.
        b.core().resume_one(unsafe { &mut *link }, t, id);
        drop(busy);
        b.after_busy(t);
    }
}

pub trait HasLink {
    fn link(&mut self) -> &mut Link;
}

/// Connections are boxed in the backends' slabs: the running connection's entry is then an
/// allocation of its own, which a busy script's poll never covers when it walks the slab.
impl<T: HasLink> HasLink for Box<T> {
    fn link(&mut self) -> &mut Link {
        (**self).link()
    }
}

/// The part of a worker that a busy script's poll uses (a backend's `Io`), in an allocation
/// of its own that the worker reaches only through this pointer.
///
/// Why: while a connection's command runs, the interpreter's hook may call the poll, which
/// needs `&mut Io` to serve the other connections. If `Io` were a field of the worker, the
/// event loop's `&mut self` — live on the stack under the command — would cover it, and the
/// poll's `&mut` would alias it. Here the worker holds a pointer, not the `Io`: the event loop
/// takes a `&mut Io` for each step (`get`) and holds none while the command path runs (it
/// holds the `Core`, its input buffer and the running connection's boxed entry), so the
/// poll's `&mut Io`, made from the same pointer (`ptr`), is the only one alive while it runs.
pub struct IoHome<T>(std::ptr::NonNull<T>);

impl<T> IoHome<T> {
    pub fn new(io: T) -> IoHome<T> {
        IoHome(std::ptr::NonNull::from(Box::leak(Box::new(io))))
    }

    /// The `Io`, for one step of the event loop (never held across the command path).
    #[inline]
    pub fn get(&mut self) -> &mut T {
        // SAFETY: the allocation lives as long as `self`; the only other `&mut T` is the busy
        // poll's, alive only inside the command path, during which the event loop holds none
        // (the contract above).
        unsafe { self.0.as_mut() }
    }

    /// Shared access, for a step that only reads.
    #[inline]
    pub fn get_ref(&self) -> &T {
        // SAFETY: as `get`.
        unsafe { self.0.as_ref() }
    }

    /// The pointer the busy poll is given.
    pub fn ptr(&self) -> *mut T {
        self.0.as_ptr()
    }
}

impl<T> Drop for IoHome<T> {
    fn drop(&mut self) {
        // SAFETY: made by `Box::leak` in `new`, freed once here.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

/// A new connection as a backend sees it: the socket, made non-blocking, and who is on the
/// other end.
pub struct Accepted {
    pub fd: OwnedFd,
    pub unix: bool,
    pub addr: String,
    pub laddr: String,
    pub tls: Option<Box<TlsCodec>>,
}

impl Accepted {
    pub fn new(conn: Conn, srv: &Server) -> Accepted {
        let tcp = |s: std::net::TcpStream, tls: Option<Box<TlsCodec>>| {
            let _ = s.set_nodelay(true);
            let _ = s.set_nonblocking(true);
            Accepted {
                addr: s.peer_addr().map(|a| a.to_string()).unwrap_or_default(),
                laddr: s.local_addr().map(|a| a.to_string()).unwrap_or_default(),
                unix: false,
                fd: s.into(),
                tls,
            }
        };
        match conn {
            Conn::Tcp(s) => tcp(s, None),
            Conn::Tls(s, codec) => tcp(s, Some(codec)),
            Conn::Unix(s) => {
                let _ = s.set_nonblocking(true);
                let path = srv.config.text(crate::config::p::UNIXSOCKET);
                Accepted { addr: format!("{path}:0"), laddr: path, unix: true, fd: s.into(), tls: None }
            }
        }
    }
}

/// Deadlines of blocked clients: (deadline ms, token, client id).
type Timers = BinaryHeap<Reverse<(i64, usize, u64)>>;

pub struct Core {
    pub id: usize,
    pub srv: Arc<Server>,
    pub inbox: Arc<Inbox>,
    /// Connections with output to write at the end of this round.
    pub to_flush: Vec<usize>,
    /// (token, client id) of blocked clients whose wait ended, for the backend to resume.
    pub to_resume: Vec<(usize, u64)>,
    /// (token, client id) of connections whose EVAL asked for a Lua debugging session: the
    /// backend hands each to `debugging::hand_over` at its next turn.
    pub hand_overs: Vec<(usize, u64)>,
    timers: Timers,
    /// Mailboxes being delivered (kept to reuse its allocation).
    mail: Vec<Arc<crate::services::pubsub::Mailbox>>,
    next_cron: i64,
    /// When the current round's work began (after its wait).
    round_start: Option<quanta::Instant>,
    /// The worker's command count when the round began (INFO debug's commands per round).
    round_cmds: u64,
    /// A receive this round filled its whole buffer: the socket likely holds more, which the
    /// next round reads (io_uring hands input over a buffer at a time). Published at the
    /// round's end as `Beat::input_pending` for `settle_peers`.
    pub read_full: bool,
    input_pending: bool,
}

impl Core {
    pub fn new(id: usize, srv: Arc<Server>, inbox: Arc<Inbox>) -> Core {
        let next_cron = srv.now_ms();
        Core {
            id,
            srv,
            inbox,
            to_flush: Vec::new(),
            to_resume: Vec::new(),
            hand_overs: Vec::new(),
            timers: BinaryHeap::new(),
            mail: Vec::new(),
            next_cron,
            round_start: None,
            round_cmds: 0,
            read_full: false,
            input_pending: false,
        }
    }

    /// How long the loop may sleep: until the next blocked client's deadline or cron tick.
    pub fn timeout(&self) -> Duration {
        let now = self.srv.now_ms();
        let mut wake_at = self.next_cron;
        if let Some(Reverse((d, _, _))) = self.timers.peek() {
            wake_at = wake_at.min(*d);
        }
        Duration::from_millis((wake_at - now).clamp(0, 1000) as u64)
    }

    /// Bytes arrived on connection `t`: runs every complete request. Returns false if the
    /// connection must be closed now (it sent more than a blocked client may buffer).
    /// `first`: `Session::first_key`'s scan of `data`, if the event loop looked ahead.
    pub fn ingest(&mut self, l: &mut Link, t: usize, data: &[u8], first: Option<&FirstReq>) -> bool {
        let (keep, ran) = run_input(&self.srv, self.id, l, data, first);
        if ran {
            self.after_commands(l, t);
        }
        keep
    }

    /// Queues `t` for this round's flush if it has output (or must close).
    pub fn queue(&mut self, l: &mut Link, t: usize, pending_out: bool) {
        if (pending_out || l.closing) && !l.queued {
            l.queued = true;
            self.to_flush.push(t);
        }
    }

    /// A blocked client's wait ended: append its reply, run what queued behind it.
    fn resume(&mut self, l: &mut Link, t: usize) {
        let Some(w) = l.session.waiting() else { return };
        if *w.state.lock() == WaitState::Waiting {
            return;
        }
        let srv = self.srv.clone();
        let mut reply = Reply { buf: std::mem::take(&mut l.out), proto: l.session.client.proto };
        let keep = l.session.resume(&srv, &srv.stats.workers[self.id], &mut reply);
        l.out = reply.buf;
        // Messages held back while the reply was on its way (see `deliver`) follow it.
        l.session.client.handle.take_mail(&mut l.out);
        if !keep {
            l.closing = true;
        }
        self.after_commands(l, t);
        self.queue(l, t, true);
    }

    /// Takes the inbox: new connections are returned for the backend to add; resumed clients
    /// join `to_resume`, which the backend runs next (`resume_one`).
    pub fn drain_inbox(&mut self) -> Vec<Conn> {
        let new: Vec<Conn> = self.inbox.conns.lock().drain(..).collect();
        self.to_resume.append(&mut self.inbox.resumed.lock());
        new
    }

    /// Runs the wait that ended for client `id` on connection `t` (from `to_resume`), with
    /// the backend's busy-script poll registered as for arriving input: the requests that
    /// queued behind the wait may run a script.
    pub fn resume_one(&mut self, l: &mut Link, t: usize, id: u64) {
        if l.session.client.id() == id {
            self.resume(l, t);
        }
    }

    /// `appendfsync always`, before the round's fsync: whether to look once more, without
    /// waiting, for requests that came in while the round ran (`looks`: looks so far, `got`:
    /// what the last one brought, or the round itself), so that they join this round.
    ///
    /// Why: the fsync, not the CPU, sets the pace under `always`, and a request that arrives
    /// just after a round began otherwise waits for that round's fsync, its replies, and then
    /// the next round's fsync — while joining costs one non-blocking syscall. With 50 busy
    /// clients over TCP a round grows from ~40 requests per fsync to ~48, and SET/s rise
    /// 4–10 % (docs/BENCHMARKS.md, issue 17's seventh session). Looking stops once a look
    /// brings fewer than two (a look costs about what a request does) or after eight, so that
    /// a flood of arrivals cannot keep the round's replies from going out.
    pub fn top_up(&self, looks: &mut usize, got: usize) -> bool {
        if *looks >= TOP_UP_LOOKS || got < 2 || !crate::daemons::aof::round_awaits_fsync(&self.srv) {
            return false;
        }
        *looks += 1;
        true
    }

    /// beforeSleep, first half: the connections to write, each unmarked so the writes may
    /// queue it again. The backend writes them, then hands the list back to `end_round`.
    pub fn take_flush<C: HasLink>(&mut self, conns: &mut slab::Slab<C>) -> Vec<usize> {
        // Other workers learn of this round's messages once; this one delivers its own now.
        crate::services::pubsub::flush_wakes(&self.srv.pubsub, self.id);
        self.deliver(conns);
        // `appendfsync always`: this round's writes are on disk before any reply goes out —
        // this worker's, and those of clients it served that wait on other workers.
        let aof_ns = crate::daemons::aof::before_replies(&self.srv);
        if aof_ns > 0 {
            bump(&self.srv.stats.workers[self.id].counters.eventloop_aof_ns, aof_ns);
        }
        crate::exec::blocking::release_served();
        let pending = std::mem::take(&mut self.to_flush);
        for &t in &pending {
            if let Some(c) = conns.get_mut(t) {
                c.link().queued = false;
            }
        }
        pending
    }

    /// Messages other clients sent this worker's clients (Pub/Sub, notifications): each
    /// client's mailbox is moved behind its replies, to be written with them.
    fn deliver<C: HasLink>(&mut self, conns: &mut slab::Slab<C>) {
        let mut mbs = std::mem::take(&mut self.mail);
        self.srv.pubsub.post(self.id).take(&mut mbs);
        for mb in mbs.drain(..) {
            let Some(c) = conns.get_mut(mb.token) else { continue };
            let l = c.link();
            if l.session.client.id() != mb.handle.id {
                continue;
            }
            // A blocked client already served (its reply on the way to `resume`) gets its
            // messages after that reply, as Redis sends them after the unblocked command's:
            // they stay in the mailbox, still marked queued, until `resume` takes them.
            if l.session.waiting().is_some_and(|w| *w.state.lock() != WaitState::Waiting) {
                continue;
            }
            // A reader that keeps a full socket never empties `out` at once: drop what was
            // written before appending, so the buffer holds only what is unsent.
            if l.sent > 0 && l.sent * 2 >= l.out.len() {
                l.out.drain(..l.sent);
                l.sent = 0;
            }
            // What the output's allocation grows by is the messages' memory, moved from the
            // mailbox: on its way still, until the socket is offered it.
            let before = l.out.capacity();
            mb.take_into(&mut l.out);
            if l.out.capacity() > before {
                let grown = crate::alloc::usable_size(l.out.capacity()) - crate::alloc::usable_size(before);
                l.arriving.add(grown);
            }
            // Shard channels dropped by the server: CLIENT LIST shows it at once.
            l.session.client.reconcile_subs();
            // A subscriber whose socket is full keeps its messages here: all it has not taken
            // yet is weighed against its output limit.
            let h = &mb.handle;
            if crate::services::pubsub::over_output_limit(&self.srv.config.hot, h, l.unsent() as u64) {
                crate::services::pubsub::close_over_limit(h);
            }
            self.queue(l, mb.token, true);
        }
        self.mail = mbs;
    }

    /// The wait is over: a round of work begins (INFO's eventloop_* figures).
    #[inline]
    pub fn begin_round(&mut self) {
        // DEBUG SLEEP on another worker stops this one too, before its round counts as begun.
        self.srv.freeze.wait_out();
        self.round_start = Some(self.srv.clock.instant());
        self.srv.stats.workers[self.id].beat.progress_ms.store(self.srv.now_ms().max(1) as u64, Ordering::Relaxed);
        self.round_cmds = self.srv.stats.workers[self.id].counters.commands.load(Ordering::Relaxed);
        crate::services::pubsub::defer_wakes();
        crate::exec::blocking::defer_served_wakes();
    }

    /// End of a round: recycles the flush list, then deadlines that passed and the cron.
    pub fn end_round<C: HasLink>(&mut self, mut flushed: Vec<usize>, conns: &mut slab::Slab<C>) {
        // Clients that grew this round, by input no command has consumed yet (a slow or
        // hostile sender's query buffer): Redis checks in every beforeSleep. Scans are at most
        // one a millisecond across workers. Before the round is counted, so a peer settling
        // (`settle_peers`) sees its outcome.
        if self.srv.config.hot.maxmemory_clients.load(Ordering::Relaxed) != 0 {
            crate::services::evict::evict_clients(&*self.srv);
        }
        let beat = &self.srv.stats.workers[self.id].beat;
        beat.progress_ms.store(0, Ordering::Relaxed);
        let pending = std::mem::take(&mut self.read_full);
        if pending != self.input_pending {
            self.input_pending = pending;
            beat.input_pending.store(pending, Ordering::Release);
        }
        if let Some(t0) = self.round_start.take() {
            let c = &self.srv.stats.workers[self.id].counters;
            let us = self.srv.clock.instant().saturating_duration_since(t0).as_micros() as u64;
            bump(&c.eventloop_cycles, 1);
            bump(&c.eventloop_us, us);
            // INFO debug's maxima: this worker's own counters, so a load and rarely a store.
            if us > c.eventloop_max_us.load(Ordering::Relaxed) {
                c.eventloop_max_us.store(us, Ordering::Relaxed);
            }
            let cmds = c.commands.load(Ordering::Relaxed).wrapping_sub(self.round_cmds);
            if cmds > c.eventloop_max_cmds.load(Ordering::Relaxed) && cmds < u64::MAX / 2 {
                c.eventloop_max_cmds.store(cmds, Ordering::Relaxed);
            }
        }
        flushed.clear();
        if self.to_flush.is_empty() {
            self.to_flush = flushed;
        }
        self.tick(conns);
    }

    /// Deadlines that passed, then the cron when it is due.
    fn tick<C: HasLink>(&mut self, conns: &mut slab::Slab<C>) {
        let now = self.srv.now_ms();
        while let Some(Reverse((d, t, id))) = self.timers.peek().copied() {
            if d > now {
                break;
            }
            self.timers.pop();
            let Some(c) = conns.get_mut(t) else { continue };
            let l = c.link();
            if l.session.client.id() != id {
                continue;
            }
            if let Some(w) = l.session.waiting() {
                if w.deadline_ms == Some(d) && w.finish(WaitState::TimedOut) {
                    self.srv.blocked_clients.fetch_sub(1, Ordering::Relaxed);
                    self.to_resume.push((t, id));
                }
            }
        }
        // Resumes queued by `finish` for these clients find them no longer waiting.
        if now >= self.next_cron && !self.srv.cron_paused.load(Ordering::Relaxed) {
            let srv = self.srv.clone();
            let t0 = srv.clock.instant();
            super::expire::cycle(&srv, &srv.stats.workers[self.id].counters);
            crate::scripting::release_stale_vm(&srv, self.id);
            if self.id == 0 {
                adapt_hz(&srv);
                srv.clock.resync();
                srv.sample_ops();
                close_idle_clients(&srv);
                close_over_output_limits(&srv);
                srv.migrate_sockets.close_idle(srv.now_ms() / 1000);
                super::rehash::tick(&srv);
                // `no-appendfsync-on-rewrite`: the AOF skips its fsyncs while a snapshot is
                // written (Redis checks for a child doing disk I/O at each flush).
                if let Some(log) = srv.persistence.aof.log() {
                    let hold =
                        srv.ks.snapshots.running() && srv.config.flag(crate::config::p::NO_APPENDFSYNC_ON_REWRITE);
                    log.hold_fsync.store(hold, Ordering::Relaxed);
                }
                // A lowered tracking-table-max-keys takes effect without waiting for a read.
                srv.tracking.enforce_limit(&srv.reach());
            }
            let hz = srv.config.hot.effective_hz.load(Ordering::Relaxed).max(1) as i64;
            self.next_cron = now + 1000 / hz;
            let ns = srv.clock.instant().saturating_duration_since(t0).as_nanos() as u64;
            bump(&srv.stats.workers[self.id].counters.eventloop_cron_ns, ns);
        }
    }

    /// After commands ran for a connection: SHUTDOWN, and a new blocking deadline.
    fn after_commands(&mut self, l: &mut Link, t: usize) {
        let client = &mut l.session.client;
        if client.ldb_request.is_some() {
            self.hand_overs.push((t, client.id()));
        }
        if let Some(mode) = client.shutdown {
            // Write what is pending first; with nothing pending the main thread exits now.
            if l.out.is_empty() {
                client.shutdown = None;
                request_shutdown(mode);
            }
        }
        if let Some(w) = l.session.waiting() {
            if let Some(d) = w.deadline_ms {
                self.timers.push(Reverse((d, t, l.session.client.id())));
            }
        }
    }
}

/// All output of `l` reached the socket: recycle the buffer, act on SHUTDOWN, give back
/// idle memory. `kept`: capacity of the backend's own send buffer, still held. Returns
/// false if the connection must now close.
pub fn flushed(srv: &Server, l: &mut Link, kept: usize) -> bool {
    let batch = l.out.len();
    l.out.clear();
    l.arriving.settle();
    if l.out.capacity() > KEEP_OUT {
        l.out = Vec::new();
        l.reset_peak();
    }
    let cap = l.out.capacity() + kept;
    l.show_output(srv, batch, 0, cap);
    if l.closing {
        return false;
    }
    if let Some(mode) = l.session.client.shutdown.take() {
        request_shutdown(mode);
    }
    if !l.session.has_pending() {
        l.session.shrink();
    }
    true
}

/// The connection is gone: its watches and blocking wait end, it leaves the client list.
/// `drop_socket` closes the descriptor — under the handle's lock, so a concurrent CLIENT
/// KILL cannot shut down a descriptor number the OS has already reused.
pub fn release(srv: &Server, l: &mut Link, drop_socket: impl FnOnce()) {
    crate::exec::call::disconnect(srv, &mut l.session.client);
    let handle = l.session.client.handle.clone();
    srv.clients.remove(handle.id);
    let mut closed = handle.closed.lock();
    *closed = true;
    drop_socket();
    drop(closed);
    // No mailbox can be stored any more (`ClientHandle::mailbox`): clear the last one.
    handle.mail.lock().take();
}

/// While a script this worker runs is busy (`services::scripts::poll_while_busy`): runs what
/// another of its connections sent, as `Core::ingest` does but without the `Core`, which the
/// running command holds. The call path answers `-BUSY` to all but the few commands Redis runs
/// during a busy script (SCRIPT KILL, FUNCTION KILL/STATS, SHUTDOWN NOSAVE, AUTH, HELLO, …),
/// and none of those blocks. False if the connection must close.
pub fn ingest_while_busy(srv: &Server, worker: usize, l: &mut Link, data: &[u8]) -> bool {
    let (keep, ran) = run_input(srv, worker, l, data, None);
    // SHUTDOWN NOSAVE stops the server even now, as in Redis.
    if ran {
        if let Some(mode) = l.session.client.shutdown.take() {
            request_shutdown(mode);
        }
    }
    keep
}

/// Bytes arrived on a connection: counted, then kept (a blocked client), ignored (a closing
/// one) or run. Returns (the connection may stay open, requests ran).
fn run_input(srv: &Server, worker: usize, l: &mut Link, data: &[u8], first: Option<&FirstReq>) -> (bool, bool) {
    let Some(tls) = l.tls.as_deref_mut() else { return run_plain(srv, worker, l, data, first) };
    let mut plain = std::mem::take(&mut tls.plain);
    if let Err(e) = tls.open(data, &mut plain) {
        // Redis logs failed handshakes (a client without a required certificate) this way;
        // the alert rustls queued goes out before the connection closes.
        crate::log_verbose!("Error accepting a client connection: {e} (addr={})", l.session.client.handle.addr);
        // A peer that does not speak TLS at all (plain RESP on the TLS port) is closed
        // without an alert, as OpenSSL does: its client sees the connection end, not bytes
        // it would misread as a reply.
        if matches!(e, rustls::Error::InvalidMessage(_)) {
            return (false, false);
        }
        l.closing = true;
        return (true, false);
    }
    // The scan of `first` was of the ciphertext: none (the event loop does not look ahead
    // into TLS input).
    debug_assert!(first.is_none());
    let r = if plain.is_empty() { (true, false) } else { run_plain(srv, worker, l, &plain, None) };
    if let Some(tls) = l.tls.as_deref_mut() {
        tls.keep_plain(plain);
    }
    r
}

/// `run_input` of bytes as the client sent them (opened already on a TLS connection).
fn run_plain(srv: &Server, worker: usize, l: &mut Link, data: &[u8], first: Option<&FirstReq>) -> (bool, bool) {
    // Counted here, where the network delivers bytes, so input a blocked or closing client
    // receives counts too (as in Redis), and a resumed client's replay does not.
    let ws = &srv.stats.workers[worker];
    bump(&ws.counters.net_input_bytes, data.len() as u64);
    bump(&ws.counters.reads_processed, 1);
    if l.closing {
        // Replies are being flushed before closing; the rest is ignored, as Redis.
        return (true, false);
    }
    if l.session.waiting().is_some() {
        // Blocked: keep the bytes for when the wait ends.
        return (l.session.buffer_input(data, srv), false);
    }
    let mut reply = Reply { buf: std::mem::take(&mut l.out), proto: l.session.client.proto };
    let keep = l.session.feed_hinted(srv, ws, data, first, &mut reply);
    l.out = reply.buf;
    if !keep {
        l.closing = true;
    }
    (true, true)
}

/// The session of a new connection, registered with the server once the backend has
/// taken the socket (`publish`).
pub fn new_link(srv: &Server, worker: usize, inbox: &Arc<Inbox>, token: usize, a: &mut Accepted) -> Link {
    let needs_auth = srv.acl.auth_required();
    let mut handle = ClientHandle::new(
        srv.clients.next_id(),
        a.addr.clone(),
        a.laddr.clone(),
        a.fd.as_raw_fd(),
        a.unix,
        srv.now_ms(),
    );
    (handle.worker, handle.token) = (worker, token);
    handle.tls = a.tls.is_some();
    let mut client = Client::new(Arc::new(handle), worker, needs_auth);
    let inbox = inbox.clone();
    let id = client.id();
    client.wake = Some(Arc::new(move || inbox.resume(token, id)));
    Link {
        session: Session::new(client),
        out: Vec::new(),
        sent: 0,
        in_flight: 0,
        closing: false,
        queued: false,
        tls: a.tls.take(),
        shown: OutputShown::default(),
        arriving: Default::default(),
    }
}

/// The connection is live: CLIENT LIST shows it and CLIENT KILL may shut it down.
pub fn publish(srv: &Server, link: &Link) {
    let handle = link.session.client.handle.clone();
    *handle.closed.lock() = false;
    srv.clients.add(handle);
}

/// A new connection for a busy script's poll to take, if the slab has a free slot for it
/// already: growing the slab would move the entry of the connection running the script.
pub fn spare_slot_conn<C>(conns: &slab::Slab<C>, inbox: &Inbox) -> Option<Conn> {
    if conns.len() < conns.capacity() {
        inbox.pop_conn()
    } else {
        None
    }
}

/// `dynamic-hz` (Redis's serverCron rule): the timers run at `hz`, doubled while more than 200
/// clients would share one tick, up to 500 a second. Worker 0's cron sets it for all.
fn adapt_hz(srv: &Server) {
    let hot = &srv.config.hot;
    let mut hz = hot.hz.load(Ordering::Relaxed).max(1);
    if hot.dynamic_hz.load(Ordering::Relaxed) {
        let clients = srv.clients.len() as u32;
        while clients / hz > 200 {
            hz *= 2;
            if hz > 500 {
                hz = 500;
                break;
            }
        }
    }
    hot.effective_hz.store(hz, Ordering::Relaxed);
}
