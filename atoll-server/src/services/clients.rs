//! Clients as every thread sees them: each connection's shared handle (what CLIENT LIST,
//! CLIENT KILL, INFO and other workers read or set), the registry of connected clients, and the
//! per-client messaging state (mailboxes, subscriptions, tracking settings) that Pub/Sub,
//! tracking and the replication feed deliver through. The session-owned half of a client is
//! `exec::client::Client`.

use crate::lockorder::{rank, Mutex};
use indexmap::IndexSet;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

/// How a wait ended, or that it has not (a blocked client's state: `exec::blocking::Waiter`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitState {
    Waiting,
    /// Served: the reply bytes for the client.
    Served(Vec<u8>),
    /// CLIENT UNBLOCK … TIMEOUT, or the deadline passed.
    TimedOut,
    /// CLIENT UNBLOCK … ERROR.
    Unblocked,
    /// The client went away.
    Cancelled,
    /// The key is ready but the waiter must re-run its command (see `Served::Retry`).
    Retry,
}

/// A client's blocking wait as other connections reach it (CLIENT UNBLOCK, a replica's
/// REPLICAOF unblocking everyone): the call path's `Waiter` is one.
pub trait Wait: Send + Sync {
    /// Postponed by CLIENT PAUSE: the pause's end, not a key, ends it.
    fn postponed(&self) -> bool;
    /// Ends the wait with `end` and wakes the client's worker; false if it had ended already.
    fn finish(&self, end: WaitState) -> bool;
    /// It has not ended yet.
    fn waiting(&self) -> bool;
    /// It ends at a deadline if nothing serves it first (Redis's timeout table).
    fn timed(&self) -> bool;
    /// The command it waits in, as the client sent it.
    fn argv(&self) -> &[Vec<u8>];
    /// The keys it waits on (none: it waits for something else, as WAIT does).
    fn keys(&self) -> &[Vec<u8>];
}

/// Information other threads can see about a client.
pub struct ClientHandle {
    /// The user the connection runs as (None: `default`): CLIENT LIST `user`, CLIENT KILL USER,
    /// and the connections ACL DELUSER closes.
    pub user: Mutex<Option<Arc<crate::services::acl::User>>, { rank::CLIENT }>,
    pub id: u64,
    pub addr: String,
    pub laddr: String,
    pub fd: i32,
    pub unix: bool,
    /// Over TLS: its bytes are the worker's to write (a replica's snapshot cannot be handed
    /// to the transfer child).
    pub tls: bool,
    pub created_ms: i64,
    pub last_ms: AtomicI64,
    pub db: AtomicUsize,
    pub resp: AtomicU8,
    pub name: Mutex<Vec<u8>, { rank::CLIENT }>,
    pub lib_name: Mutex<Vec<u8>, { rank::CLIENT }>,
    pub lib_ver: Mutex<Vec<u8>, { rank::CLIENT }>,
    /// Id of the last command run (index into the command table), +1; 0 = none.
    pub last_cmd: AtomicUsize,
    /// In MULTI: number of queued commands, else -1 (as CLIENT LIST shows).
    pub multi: AtomicI64,
    /// Bytes of the commands queued in MULTI (CLIENT LIST multi-mem).
    pub multi_mem: AtomicU64,
    /// Memory of the client's watched keys and of its tracking prefixes, as client eviction
    /// weighs them (Redis's getClientMemoryUsage counts both).
    pub watch_mem: AtomicU64,
    pub tracking_mem: AtomicU64,
    pub qbuf: AtomicU64,
    /// Spare capacity of the buffer holding an unfinished request (CLIENT LIST `qbuf-free`).
    pub qbuf_free: AtomicU64,
    /// Capacity of the connection's reply buffers between rounds (`rbs`).
    pub reply_cap: AtomicU64,
    /// With `maxmemory-clients` set: the capacity of the replies a batch of this client's
    /// requests is building now, once past 32 KB (0 again when they are flushed). Redis
    /// counts a reply as it is buffered, and evicts fat clients before the next command.
    pub reply_round: AtomicU64,
    /// The largest batch of replies since the reply buffer was last given back (`rbp`).
    pub reply_peak: AtomicU64,
    /// Reply bytes the socket has not taken yet (`obl`, `omem`; `events=rw` while non-zero).
    pub out_pending: AtomicU64,
    pub flags_watch: AtomicBool,
    pub no_evict: AtomicBool,
    pub no_touch: AtomicBool,
    /// CLIENT KILL: the connection closes as soon as its worker sees this.
    pub killed: AtomicBool,
    /// Set by the owning worker (under the lock) right before it closes the socket, so a
    /// killer never shuts down a descriptor number that was closed and reused meanwhile.
    pub closed: Mutex<bool, { rank::CLIENT_CLOSED }>,
    /// The client's blocking wait, for CLIENT UNBLOCK from other connections.
    pub waiter: Mutex<Option<Arc<dyn Wait>>, { rank::CLIENT }>,
    /// Channels, patterns and shard channels subscribed (CLIENT LIST `sub`, `psub`, `ssub`).
    pub sub: AtomicU32,
    pub psub: AtomicU32,
    pub ssub: AtomicU32,
    /// When the pending output first went over the soft `client-output-buffer-limit` (unix
    /// ms; 0 = it is under).
    pub obuf_soft_since: AtomicI64,
    /// In MONITOR mode (CLIENT LIST flag `O`).
    pub monitor: AtomicBool,
    /// A replica fed by this server (PSYNC/SYNC ran; CLIENT LIST flag `S`): its output is
    /// the replication stream, under the `replica` output-buffer limits.
    pub replica: AtomicBool,
    /// Bytes at the head of a replica's output not counted as traffic: its `+FULLRESYNC` or
    /// `+CONTINUE` line, which Redis writes past its client buffers, uncounted.
    pub repl_uncounted: AtomicU64,
    /// This replica's link to its master (CLIENT LIST flag `M`, TYPE master).
    pub master: AtomicBool,
    /// QUIT ran: the connection closes once its reply is written.
    pub quitting: AtomicBool,
    /// The worker owning the connection, and the connection's slot there.
    pub worker: usize,
    pub token: usize,
    /// Where messages for this client wait for its worker (made on first use; dropped when
    /// the connection closes, which breaks the handle ↔ mailbox cycle).
    pub mail: Mutex<Option<Arc<Mailbox>>, { rank::CLIENT }>,
    /// CLIENT TRACKING is on (flag `t`; `B` in BCAST mode), and its redirect (`redir`).
    pub tracking: Mutex<Option<Arc<Tracker>>, { rank::CLIENT }>,
}

impl ClientHandle {
    /// What the connection holds between commands (CLIENT LIST `tot-mem` less the running
    /// request; INFO `mem_clients_normal` sums it): its state, about 1 KB (docs/BENCHMARKS.md
    /// measures 1.6 KB per idle connection with the kernel's share), its unfinished request
    /// with the buffer's spare room, its queued transaction, its reply buffers and the replies
    /// a slow reader has not taken yet (the backend's buffers grow to hold them).
    pub fn memory(&self) -> u64 {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        1024 + r(&self.qbuf)
            + r(&self.qbuf_free)
            + r(&self.multi_mem)
            + r(&self.reply_cap)
            + r(&self.reply_round)
            + r(&self.watch_mem)
            + r(&self.tracking_mem)
            + self.subscriptions() as u64 * STATE_ENTRY
    }

    pub fn new(id: u64, addr: String, laddr: String, fd: i32, unix: bool, now_ms: i64) -> ClientHandle {
        ClientHandle {
            user: Mutex::new(None),
            id,
            addr,
            laddr,
            fd,
            unix,
            tls: false,
            created_ms: now_ms,
            last_ms: now_ms.into(),
            db: 0.into(),
            resp: 2.into(),
            name: Default::default(),
            lib_name: Default::default(),
            lib_ver: Default::default(),
            last_cmd: 0.into(),
            multi: (-1).into(),
            multi_mem: 0.into(),
            watch_mem: 0.into(),
            tracking_mem: 0.into(),
            qbuf: 0.into(),
            qbuf_free: 0.into(),
            reply_cap: 0.into(),
            reply_round: 0.into(),
            reply_peak: 0.into(),
            out_pending: 0.into(),
            repl_uncounted: 0.into(),
            flags_watch: AtomicBool::new(false),
            no_evict: AtomicBool::new(false),
            no_touch: AtomicBool::new(false),
            killed: AtomicBool::new(false),
            closed: Mutex::new(true),
            waiter: Mutex::new(None),
            sub: 0.into(),
            psub: 0.into(),
            ssub: 0.into(),
            obuf_soft_since: 0.into(),
            monitor: AtomicBool::new(false),
            replica: AtomicBool::new(false),
            master: AtomicBool::new(false),
            quitting: AtomicBool::new(false),
            worker: 0,
            token: 0,
            mail: Mutex::new(None),
            tracking: Mutex::new(None),
        }
    }

    /// Moves the messages waiting in this client's mailbox, if it has one, to the end of `out`.
    pub fn take_mail(&self, out: &mut Vec<u8>) {
        let mail = self.mail.lock().clone();
        if let Some(mb) = mail {
            mb.take_into(out);
        }
    }

    /// The client's mailbox (see `exec::pubsub`). Once the connection is closed a detached
    /// one is returned (what is put there goes nowhere), so no handle ↔ mailbox cycle is made
    /// after the owner cleared it; `closed` is held while one is stored.
    pub fn mailbox(self: &Arc<Self>) -> Arc<Mailbox> {
        let closed = self.closed.lock();
        if *closed {
            return Mailbox::new(self.clone());
        }
        let mb = self.mail.lock().get_or_insert_with(|| Mailbox::new(self.clone())).clone();
        drop(closed);
        mb
    }

    /// Subscriptions of every kind: non-zero means the client is in Pub/Sub mode (flag `P`,
    /// CLIENT LIST TYPE pubsub, the pubsub output-limit class).
    pub fn subscriptions(&self) -> u32 {
        self.sub.load(Ordering::Relaxed) + self.psub.load(Ordering::Relaxed) + self.ssub.load(Ordering::Relaxed)
    }

    /// Asks the connection to close, from any thread. Shutting the socket down wakes the
    /// owning worker with an end-of-file, so the hot path needs no extra wakeup mechanism.
    /// The name of the user the connection runs as.
    pub fn user_name(&self) -> Vec<u8> {
        self.user.lock().as_ref().map_or_else(|| b"default".to_vec(), |u| u.name.clone())
    }

    /// Loopback or unix socket (for protected mode and `enable-debug-command local`).
    pub fn is_local(&self) -> bool {
        self.unix || self.addr.starts_with("127.") || self.addr.starts_with("[::1]")
    }

    /// The connection came in on local port `port` (0: never), e.g. the TLS port: a cluster
    /// redirection then names the node's TLS port.
    pub fn came_in_on(&self, port: i64) -> bool {
        port != 0 && self.laddr.rsplit(':').next().and_then(|p| p.parse::<i64>().ok()) == Some(port)
    }

    /// Closes the connection; true for the call that killed it first (two workers may pick
    /// the same fat client at once, and only one eviction is counted).
    pub fn kill(&self) -> bool {
        let first = !self.killed.swap(true, Ordering::AcqRel);
        let closed = self.closed.lock();
        if !*closed {
            // SAFETY: the descriptor belongs to this open connection (`closed` is false and
            // its owner cannot close it while we hold the lock).
            unsafe { libc::shutdown(self.fd, libc::SHUT_RDWR) };
        }
        first
    }
}

/// All connected clients, for CLIENT LIST / KILL and INFO clients.
/// What one watched key, subscription or tracking prefix costs a client besides its name:
/// the list and map entries that hold it (Redis counts about as much per entry).
pub const STATE_ENTRY: u64 = 48;

#[derive(Default)]
pub struct Registry {
    clients: Mutex<BTreeMap<u64, Arc<ClientHandle>>, { rank::CLIENTS }>,
    next_id: AtomicU64,
}

impl Registry {
    pub fn new() -> Registry {
        Registry { clients: Mutex::new(BTreeMap::new()), next_id: AtomicU64::new(1) }
    }

    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    pub fn add(&self, h: Arc<ClientHandle>) {
        self.clients.lock().insert(h.id, h);
    }

    pub fn remove(&self, id: u64) {
        self.clients.lock().remove(&id);
    }

    pub fn len(&self) -> usize {
        self.clients.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn snapshot(&self) -> Vec<Arc<ClientHandle>> {
        self.clients.lock().values().cloned().collect()
    }

    /// Folds over the registered clients under the registry lock, without cloning handles
    /// (INFO's client figures).
    pub fn fold<T>(&self, init: T, mut f: impl FnMut(T, &ClientHandle) -> T) -> T {
        self.clients.lock().values().fold(init, |acc, h| f(acc, h))
    }

    pub fn get(&self, id: u64) -> Option<Arc<ClientHandle>> {
        self.clients.lock().get(&id).cloned()
    }

    /// Visits every registered client under the registry lock.
    pub fn for_each(&self, mut f: impl FnMut(&Arc<ClientHandle>)) {
        for h in self.clients.lock().values() {
            f(h);
        }
    }
}

// Per-client messaging state (Pub/Sub, tracking, the replication feed).

/// Messages waiting for one client, already encoded in its protocol.
pub struct Mailbox {
    pub handle: Arc<ClientHandle>,
    pub worker: usize,
    /// The connection's slot on its worker.
    pub token: usize,
    pub(crate) state: Mutex<MailState, { rank::MAILBOX }>,
    /// `state.dropped` is not empty: the client's worker reconciles its subscriptions before
    /// its next command (one load, only for subscribed clients).
    pub dropped_pending: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
pub(crate) struct MailState {
    pub buf: Vec<u8>,
    /// Waiting in its worker's post queue.
    pub queued: bool,
    /// Shard channels the server unsubscribed this client from (their slot left this node):
    /// the client's own set forgets them when it next looks ([`Subs::reconcile`]).
    pub dropped: Vec<Box<[u8]>>,
    /// What this mailbox adds to [`in_transit`] now, and the capacity it was computed for.
    counted: u64,
    counted_cap: usize,
}

/// Bytes of messages on their way to clients other than replicas, as the allocator counts
/// them: in mailboxes, or moved to a client's output by its worker but not yet offered to its
/// socket. Redis writes the messages a command produced to the sockets before it reads the
/// next command (`beforeSleep`), so the memory they take is gone from `used_memory` by then;
/// here the recipient's worker runs on another thread and may not have had its turn. Eviction
/// does not count them (see `evict::used_for_limit`): otherwise the invalidations an eviction
/// sends tracking clients on other workers would make the next command evict again, until the
/// keyspace is empty. What a socket does not take counts again, as a Redis client's output
/// buffer does. (Replicas' mailboxes are counted with their buffers.)
static IN_TRANSIT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The part of [`IN_TRANSIT`] one connection's output holds: messages its worker moved there
/// from the mailbox, until the socket has been offered them.
#[derive(Default)]
pub struct Arriving(u64);

impl Arriving {
    /// The output grew by `bytes` (as the allocator counts them) of messages.
    #[inline]
    pub fn add(&mut self, bytes: u64) {
        IN_TRANSIT.fetch_add(bytes, Ordering::Relaxed);
        self.0 += bytes;
    }

    /// The socket was offered them: what it did not take is the client's output buffer.
    #[inline]
    pub fn settle(&mut self) {
        if self.0 != 0 {
            IN_TRANSIT.fetch_sub(self.0, Ordering::Relaxed);
            self.0 = 0;
        }
    }
}

impl Drop for Arriving {
    fn drop(&mut self) {
        self.settle();
    }
}

/// See [`IN_TRANSIT`].
pub fn in_transit() -> u64 {
    IN_TRANSIT.load(Ordering::Relaxed)
}

impl MailState {
    /// Brings [`IN_TRANSIT`] up to date after `buf` changed: a comparison, and the allocator's
    /// size class and one atomic operation only when the allocation did.
    #[inline]
    pub(crate) fn recount(&mut self, replica: bool) {
        // An empty buffer's allocation is kept for the next messages: it is held, not on its
        // way anywhere, and counts (as a Redis client's reply buffer does).
        let cap = if replica || self.buf.is_empty() { 0 } else { self.buf.capacity() };
        if cap != self.counted_cap {
            self.counted_cap = cap;
            let now = crate::alloc::usable_size(cap);
            if now > self.counted {
                IN_TRANSIT.fetch_add(now - self.counted, Ordering::Relaxed);
            } else {
                IN_TRANSIT.fetch_sub(self.counted - now, Ordering::Relaxed);
            }
            self.counted = now;
        }
    }
}

impl Drop for MailState {
    fn drop(&mut self) {
        IN_TRANSIT.fetch_sub(self.counted, Ordering::Relaxed);
    }
}

impl Mailbox {
    pub fn new(handle: Arc<ClientHandle>) -> Arc<Mailbox> {
        let (worker, token) = (handle.worker, handle.token);
        Arc::new(Mailbox {
            handle,
            worker,
            token,
            state: Mutex::new(MailState::default()),
            dropped_pending: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Memory the mailbox holds (its buffer's capacity: what the allocator counts).
    pub fn held(&self) -> usize {
        self.state.lock().buf.capacity()
    }

    /// Moves the waiting messages to the end of `out`.
    pub fn take_into(&self, out: &mut Vec<u8>) {
        let mut st = self.state.lock();
        st.queued = false;
        if st.buf.is_empty() {
            return;
        }
        if out.is_empty() {
            std::mem::swap(out, &mut st.buf);
        } else {
            out.extend_from_slice(&st.buf);
            st.buf.clear();
        }
        if st.buf.capacity() > 4096 {
            st.buf = Vec::new();
        }
        st.recount(self.handle.replica.load(Ordering::Relaxed));
    }

    /// Bytes waiting.
    pub fn len(&self) -> usize {
        self.state.lock().buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The three kinds of subscription.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Channel,
    Pattern,
    Shard,
}

impl Kind {
    /// The reply's first word when subscribing / unsubscribing.
    pub fn words(self) -> (&'static str, &'static str) {
        match self {
            Kind::Channel => ("subscribe", "unsubscribe"),
            Kind::Pattern => ("psubscribe", "punsubscribe"),
            Kind::Shard => ("ssubscribe", "sunsubscribe"),
        }
    }
}

/// A client's subscriptions (held by its session), in the order it made them.
pub struct Subs {
    pub mailbox: Arc<Mailbox>,
    pub channels: IndexSet<Box<[u8]>>,
    pub patterns: IndexSet<Box<[u8]>>,
    pub shard: IndexSet<Box<[u8]>>,
}

impl Subs {
    pub fn set(&mut self, kind: Kind) -> &mut IndexSet<Box<[u8]>> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    /// The count a (un)subscribe reply carries: channels and patterns together; shard
    /// channels on their own (Redis's `clientSubscriptionsCount` / `…ShardSubscriptionsCount`).
    pub fn count(&self, kind: Kind) -> usize {
        match kind {
            Kind::Shard => self.shard.len(),
            _ => self.channels.len() + self.patterns.len(),
        }
    }

    pub fn total(&self) -> usize {
        self.channels.len() + self.patterns.len() + self.shard.len()
    }

    /// Forgets the shard channels the server unsubscribed this client from meanwhile (it
    /// was told, in its mailbox, with `sunsubscribe`).
    pub fn reconcile(&mut self) {
        if !self.mailbox.dropped_pending.load(Ordering::Acquire) {
            return;
        }
        let dropped = {
            let mut st = self.mailbox.state.lock();
            self.mailbox.dropped_pending.store(false, Ordering::Release);
            std::mem::take(&mut st.dropped)
        };
        if !dropped.is_empty() {
            for name in dropped {
                self.shard.shift_remove(&name);
            }
            self.show();
        }
    }

    /// Publishes the counts CLIENT LIST shows.
    pub fn show(&self) {
        let h = &self.mailbox.handle;
        h.sub.store(self.channels.len() as u32, Ordering::Relaxed);
        h.psub.store(self.patterns.len() as u32, Ordering::Relaxed);
        h.ssub.store(self.shard.len() as u32, Ordering::Relaxed);
    }
}

/// A tracking client's settings (fixed from CLIENT TRACKING ON until OFF).
pub struct Tracker {
    pub handle: Arc<ClientHandle>,
    pub redirect: u64,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    pub prefixes: Vec<Box<[u8]>>,
    /// The redirect target was gone when an invalidation had to be sent (flag `R`).
    pub broken: AtomicBool,
}

/// Modified keys waiting for the BCAST broadcast, each with who modified it (0: expiry).
pub type Batch = Vec<(Box<[u8]>, u64)>;

/// What the command running now adds to its client's memory: (its request as the protocol
/// carried it, its arguments) — Redis's query buffer and `argv-mem`.
pub fn running_bytes(a: &[&[u8]]) -> (usize, usize) {
    let len = |n: usize| itoa::Buffer::new().format(n).len();
    let request = 3 + len(a.len()) + a.iter().map(|x| 5 + len(x.len()) + x.len()).sum::<usize>();
    (request, a.iter().map(|x| x.len()).sum())
}

/// A CLIENT LIST / CLIENT INFO line. `current`: the arguments of the command running now (only
/// the caller is running one): Redis counts them in argv-mem, and the request itself in qbuf,
/// since its query buffer is trimmed after the command.
pub fn info_line<R>(
    table: &crate::cmdspec::CommandTable<R>,
    h: &ClientHandle,
    now: i64,
    current: Option<&[&[u8]]>,
) -> String {
    let (request, argv_mem) = current.map_or((0, 0), running_bytes);
    let cmd = match h.last_cmd.load(Ordering::Relaxed) {
        0 => "NULL".to_string(),
        i => table.all[i - 1].name.clone(),
    };
    let multi = h.multi.load(Ordering::Relaxed);
    // In the order Redis's catClientInfoString writes them.
    let mut flags = String::new();
    if h.replica.load(Ordering::Relaxed) {
        flags.push('S');
    }
    if h.master.load(Ordering::Relaxed) {
        flags.push('M');
    }
    if h.monitor.load(Ordering::Relaxed) {
        flags.push('O');
    }
    if h.subscriptions() > 0 {
        flags.push('P');
    }
    if multi >= 0 {
        flags.push('x');
    }
    if h.waiter.lock().is_some() {
        flags.push('b');
    }
    let tracking = h.tracking.lock().clone();
    if let Some(t) = &tracking {
        flags.push('t');
        if t.broken.load(Ordering::Relaxed) {
            flags.push('R');
        }
        if t.bcast {
            flags.push('B');
        }
    }
    if h.unix {
        flags.push('U');
    }
    if h.no_evict.load(Ordering::Relaxed) {
        flags.push('e');
    }
    if h.no_touch.load(Ordering::Relaxed) {
        flags.push('T');
    }
    if flags.is_empty() {
        flags.push('N');
    }
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let qbuf = load(&h.qbuf) + request as u64;
    let multi_mem = load(&h.multi_mem);
    // Atoll keeps one growable reply buffer per connection, not Redis's fixed 16 KB buffer
    // plus a list of blocks: replies a slow reader has not taken are both the buffer's
    // occupancy (`obl`) and the output memory that `client-output-buffer-limit` weighs (`omem`);
    // `oll` (list blocks) has no counterpart and stays 0.
    let pending = load(&h.out_pending);
    let tot = h.memory() + request as u64 + argv_mem as u64;
    // One field lock at a time (the format's temporaries would hold them all at once).
    let name = String::from_utf8_lossy(&h.name.lock()).into_owned();
    let user = String::from_utf8_lossy(&h.user_name()).into_owned();
    let lib_name = String::from_utf8_lossy(&h.lib_name.lock()).into_owned();
    let lib_ver = String::from_utf8_lossy(&h.lib_ver.lock()).into_owned();
    format!(
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free={} argv-mem={} multi-mem={} rbs={} rbp={} obl={} oll=0 omem={} tot-mem={} events={} cmd={} user={} redir={} resp={} lib-name={} lib-ver={}",
        h.id,
        h.addr,
        h.laddr,
        h.fd,
        name,
        (now - h.created_ms).max(0) / 1000,
        (now - h.last_ms.load(Ordering::Relaxed)).max(0) / 1000,
        flags,
        h.db.load(Ordering::Relaxed),
        h.sub.load(Ordering::Relaxed),
        h.psub.load(Ordering::Relaxed),
        h.ssub.load(Ordering::Relaxed),
        multi,
        qbuf,
        load(&h.qbuf_free),
        argv_mem,
        multi_mem,
        load(&h.reply_cap),
        load(&h.reply_peak),
        pending,
        pending,
        tot,
        if pending > 0 { "rw" } else { "r" },
        cmd,
        user,
        tracking.as_ref().map_or(-1, |t| t.redirect as i64),
        h.resp.load(Ordering::Relaxed),
        lib_name,
        lib_ver,
    )
}

/// What a replica said with REPLCONF before its PSYNC (`exec::replication` reads it).
#[derive(Default, Clone, Debug)]
pub struct Handshake {
    /// REPLCONF listening-port (0: not said).
    pub port: u16,
    /// REPLCONF ip-address.
    pub ip: Option<String>,
    /// REPLCONF capa eof: can take a diskless RDB of unknown length.
    pub capa_eof: bool,
}
