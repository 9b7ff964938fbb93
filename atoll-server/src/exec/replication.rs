//! Replication, the master's half (Redis's replication.c): replicas connect as clients,
//! PSYNC or SYNC, get a point-in-time snapshot in RDB form and then the stream of every
//! write's effects, the same bytes a Redis 7.2 master would send, so a stock `redis-server
//! --replicaof` follows Atoll.
//!
//! * **The stream** is the effects of writes (DESIGN §1 "Effects") as RESP commands, with a
//!   SELECT whenever the database changes, fed under the server's effect lock, so its order is
//!   the order the writes held their shards in. Every byte also goes to the **backlog**
//!   (`repl-backlog-size`), a ring whose first byte has offset `first`; `offset` counts every
//!   byte ever fed (`master_repl_offset`). A replica that lost its link asks for the bytes
//!   after its offset (PSYNC replid offset) and gets them from the backlog (+CONTINUE) while
//!   they are still there.
//! * **A full resync** (+FULLRESYNC) is a fork-less snapshot (`rdbfile::write_snapshot`) whose
//!   instant is taken with every shard locked (`SnapshotHooks::quiesce`): at that instant no
//!   write is between its change and its effect, so the snapshot holds exactly the stream
//!   before `offset` and the replica gets exactly the bytes after it. Effects fed while the
//!   RDB is on its way wait in the replica's own buffer and follow the RDB. One snapshot
//!   serves every replica waiting when it starts (`repl-diskless-sync-delay` lets more
//!   gather). Diskless (`$EOF:<mark>` framing, when the replica said `capa eof`) or through a
//!   temporary file (`$<length>` framing) as `repl-diskless-sync` says.
//! * **The replica's link** is its client connection: the stream goes through the client's
//!   mailbox (as Pub/Sub messages do) on its own worker, under the `replica` class of
//!   `client-output-buffer-limit`. The replica's REPLCONF ACKs arrive as commands.
//! * **The replication thread** pings replicas every `repl-ping-replica-period`, drops those
//!   silent past `repl-timeout`, ends WAITs, starts full resyncs and frees the backlog
//!   `repl-backlog-ttl` seconds after the last replica left.

use super::blocking::{WaitState, Waiter};
use super::client::{ClientHandle, Mailbox};
use super::{Effect, Server};
use crate::lockorder::{rank, Mutex};
use crate::persist::{aof::encode, rdbfile};
use parking_lot::Condvar;
use std::collections::VecDeque;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Where a replica's link is (INFO's `state=`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Link {
    /// Waiting for its snapshot to begin.
    WaitBgsave,
    /// Its snapshot is being sent; the stream waits in `pending`.
    SendBulk,
    /// Fed the stream as it happens.
    Online,
}

/// A replica of this server.
pub struct Replica {
    pub handle: Arc<ClientHandle>,
    mailbox: Arc<Mailbox>,
    /// REPLCONF listening-port (0: not said).
    pub port: u16,
    /// REPLCONF ip-address, or the connection's address.
    pub ip: String,
    /// Said `capa eof`: can take a diskless RDB of unknown length.
    pub capa_eof: bool,
    /// Came with PSYNC (gets +FULLRESYNC first), not the old SYNC.
    pub psync: bool,
    state: Mutex<ReplicaState, { rank::REPLICA }>,
    /// The last offset the replica acknowledged (REPLCONF ACK), and when (unix ms).
    pub ack_offset: AtomicI64,
    /// The offset the replica's own AOF has fsync'd (REPLCONF ACK … FACK), for WAITAOF.
    pub aof_ack_offset: AtomicI64,
    pub ack_ms: AtomicI64,
}

struct ReplicaState {
    link: Link,
    /// The snapshot went out diskless: the stream starts with the replica's first ACK.
    await_ack: bool,
    /// The stream fed while the snapshot is sent.
    pending: Vec<u8>,
}

impl Replica {
    pub fn link(&self) -> Link {
        self.state.lock().link
    }
}

/// The stream's recent past: the last `cap` bytes fed.
struct Backlog {
    buf: VecDeque<u8>,
    cap: usize,
    /// Offset of `buf[0]` (`repl_backlog_first_byte_offset`).
    first: i64,
}

#[derive(Default)]
struct Feed {
    backlog: Option<Backlog>,
    /// The database the stream last selected (None: the next effect selects its own).
    db: Option<usize>,
    replicas: Vec<Arc<Replica>>,
    scratch: Vec<u8>,
}

/// A client in WAIT: done once `n` replicas acknowledged `target`.
struct Wait {
    w: Arc<Waiter>,
    target: i64,
    n: usize,
    /// Unix ms (0: none).
    deadline: i64,
    /// WAITAOF: the local copies asked for (0 or 1) and the AOF bytes that must be fsync'd.
    aof: Option<(usize, u64)>,
}

#[derive(Default)]
pub struct Replication {
    feed: Mutex<Feed, { rank::REPL_FEED }>,
    /// `master_repl_offset`: bytes ever fed.
    offset: AtomicI64,
    /// The backlog exists: writes produce effects for it.
    on: AtomicBool,
    /// Unix ms the last replica left (for `repl-backlog-ttl`; 0 while some are connected).
    alone_since: AtomicI64,
    /// Replicas counted for INFO without the feed lock.
    count: AtomicUsize,
    /// Replicas waiting for a full resync to begin.
    queue: Mutex<Vec<Arc<Replica>>, { rank::REPLICAS }>,
    /// Unix ms the oldest queued replica arrived.
    queued_at: AtomicI64,
    waits: Mutex<Vec<Wait>, { rank::WAITS }>,
    /// A WAIT is waiting: the thread asks replicas for an ACK.
    getack: AtomicBool,
    /// Wakes the replication thread.
    wake: (parking_lot::Mutex<bool>, Condvar),
    /// Full resyncs done (`sync_full`), partial ones accepted and refused.
    pub sync_full: AtomicU64,
    pub sync_partial_ok: AtomicU64,
    pub sync_partial_err: AtomicU64,
    /// The history this server continued when it stopped following a master
    /// (`master_replid2`, `second_repl_offset`; -1 when none).
    pub replid2: Mutex<Option<(String, i64)>, { rank::LEAF }>,
    /// The replica's half: the master this server follows, if any.
    pub upstream: super::upstream::Upstream,
}

thread_local! {
    /// The stream's offset after the last effects this thread fed. A client's writes are fed
    /// by its worker's thread, so this is at or past the client's last write: what WAIT waits
    /// for (Redis keeps it per client, `woff`; this may wait for a few more bytes, never fewer).
    static FED: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
}

/// The offset WAIT on this thread waits for (see `FED`).
pub fn fed_here() -> i64 {
    FED.with(|f| f.get())
}

fn backlog_cap(srv: &Server) -> usize {
    srv.config.text(crate::config::p::REPL_BACKLOG_SIZE).parse::<usize>().unwrap_or(1 << 20).max(16 * 1024)
}

impl Replication {
    /// The backlog exists: writes emit effects for the stream.
    #[inline]
    pub fn on(&self) -> bool {
        self.on.load(Ordering::Acquire)
    }

    pub fn offset(&self) -> i64 {
        self.offset.load(Ordering::Acquire)
    }

    /// Replicas that have not acknowledged the whole stream, with how far behind they are
    /// (`Lagging replica …` at shutdown): (ip:port, bytes behind, seconds since their last ACK
    /// when online, state).
    pub fn lagging(&self, now_ms: i64) -> Vec<(String, i64, i64, &'static str)> {
        let offset = self.offset();
        self.all_replicas()
            .into_iter()
            .filter(|r| r.ack_offset.load(Ordering::Acquire) != offset)
            .map(|r| {
                let link = r.link();
                let lag = if link == Link::Online { (now_ms - r.ack_ms.load(Ordering::Relaxed)) / 1000 } else { 0 };
                let state = match link {
                    Link::WaitBgsave => "wait_bgsave",
                    Link::SendBulk => "send_bulk",
                    Link::Online => "online",
                };
                (format!("{}:{}", r.ip, r.port), offset - r.ack_offset.load(Ordering::Acquire), lag, state)
            })
            .collect()
    }

    /// The backlog's bytes (INFO `mem_replication_backlog`).
    pub fn backlog_bytes(&self) -> u64 {
        self.feed.lock().backlog.as_ref().map_or(0, |b| b.buf.len()) as u64
    }

    /// What the replicas have not been sent yet: their connections' buffers, their mailboxes,
    /// the stream held while their snapshot goes out (INFO `mem_clients_slaves`; not
    /// counted for `maxmemory`, as Redis leaves its replication buffer beyond the backlog out).
    pub fn replica_buffers(&self) -> u64 {
        if self.count.load(Ordering::Relaxed) == 0 && self.queue.lock().is_empty() {
            return 0;
        }
        self.all_replicas()
            .iter()
            // The connection's buffers (holding what the socket has not taken), its mailbox,
            // and the stream kept while its snapshot goes out.
            .map(|r| {
                // Each big buffer as the allocator counts it (its size class).
                let reply = r.handle.reply_cap.load(Ordering::Relaxed);
                let held = crate::alloc::usable_size(reply as usize) + r.handle.memory() - reply;
                held + crate::alloc::usable_size(r.mailbox.held())
                    + crate::alloc::usable_size(r.state.lock().pending.capacity())
            })
            .sum()
    }

    /// Replicas fed the stream (or about to receive their snapshot).
    pub fn replicas(&self) -> Vec<Arc<Replica>> {
        self.feed.lock().replicas.clone()
    }

    /// Every replica, those still waiting for their snapshot to begin included (INFO).
    pub fn all_replicas(&self) -> Vec<Arc<Replica>> {
        let mut v = self.replicas();
        v.extend(self.queue.lock().iter().cloned());
        v
    }

    /// (active, size, first byte offset, bytes held) for INFO.
    pub fn backlog_info(&self, srv: &Server) -> (bool, usize, i64, usize) {
        match &self.feed.lock().backlog {
            Some(b) => (true, b.cap, b.first, b.buf.len()),
            None => (false, backlog_cap(srv), 0, 0),
        }
    }

    /// Feeds a command's effects to the stream. Called under the server's effect lock (see
    /// `Server::publish_effects`), so the stream's order is the writes' order.
    pub fn feed(&self, srv: &Server, effects: &[Effect]) {
        let mut f = self.feed.lock();
        let f = &mut *f;
        let mut out = std::mem::take(&mut f.scratch);
        out.clear();
        for e in effects {
            if f.db != Some(e.db) && e.db != Effect::NO_DB {
                encode(&mut out, &[b"SELECT".to_vec(), e.db.to_string().into_bytes()]);
                f.db = Some(e.db);
            }
            encode(&mut out, &e.argv);
        }
        self.append(srv, f, &out);
        f.scratch = out;
        FED.with(|c| c.set(self.offset()));
    }

    /// Feeds a command no write caused (PING, REPLCONF GETACK, DEBUG REPLICATE): no SELECT
    /// before it.
    pub fn feed_command(&self, srv: &Server, argv: &[&[u8]]) {
        let mut f = self.feed.lock();
        if f.backlog.is_none() {
            return;
        }
        let argv: Vec<Vec<u8>> = argv.iter().map(|a| a.to_vec()).collect();
        let mut out = Vec::new();
        encode(&mut out, &argv);
        self.append(srv, &mut f, &out);
    }

    fn append(&self, srv: &Server, f: &mut Feed, bytes: &[u8]) {
        let Some(b) = f.backlog.as_mut() else { return };
        b.buf.extend(bytes);
        if b.buf.len() > b.cap {
            let cut = b.buf.len() - b.cap;
            b.buf.drain(..cut);
            b.first += cut as i64;
        }
        self.offset.fetch_add(bytes.len() as i64, Ordering::AcqRel);
        let mut lost = false;
        for r in &f.replicas {
            let mut st = r.state.lock();
            if st.link == Link::Online {
                drop(st);
                lost |= !srv.pubsub.send_raw(&srv.config.hot, &r.mailbox, bytes);
            } else {
                st.pending.extend_from_slice(bytes);
                let pending = st.pending.len() as u64;
                drop(st);
                if super::pubsub::over_output_limit(&srv.config.hot, &r.handle, pending) {
                    st_clear(r);
                    super::pubsub::close_over_limit(&r.handle);
                    lost = true;
                }
            }
        }
        if lost {
            self.forget_dead(f);
        }
    }

    fn forget_dead(&self, f: &mut Feed) {
        f.replicas.retain(|r| !r.handle.killed.load(Ordering::Relaxed));
        self.count.store(f.replicas.len(), Ordering::Relaxed);
        if f.replicas.is_empty() {
            self.alone_since.store(super::unix_ms(), Ordering::Relaxed);
        }
    }

    /// The backlog is created when the first replica arrives (Redis's
    /// createReplicationBacklog): from then on writes produce effects.
    fn ensure_backlog(&self, srv: &Server) {
        let mut f = self.feed.lock();
        if f.backlog.is_none() {
            let off = self.offset();
            f.backlog = Some(Backlog { buf: VecDeque::new(), cap: backlog_cap(srv), first: off + 1 });
            // A new backlog starts a new history: the stream selects its database afresh.
            f.db = None;
        }
        drop(f);
        self.on.store(true, Ordering::Release);
        srv.refresh_effects();
    }

    /// CONFIG SET repl-backlog-size: keeps the newest bytes that fit.
    pub fn resize_backlog(&self, srv: &Server) {
        let cap = backlog_cap(srv);
        if let Some(b) = self.feed.lock().backlog.as_mut() {
            b.cap = cap;
            if b.buf.len() > cap {
                let cut = b.buf.len() - cap;
                b.buf.drain(..cut);
                b.first += cut as i64;
            }
        }
    }

    /// A replica left (its connection closed).
    pub fn remove(&self, id: u64) {
        let mut f = self.feed.lock();
        let before = f.replicas.len();
        f.replicas.retain(|r| r.handle.id != id);
        if f.replicas.len() != before {
            self.count.store(f.replicas.len(), Ordering::Relaxed);
            if f.replicas.is_empty() {
                self.alone_since.store(super::unix_ms(), Ordering::Relaxed);
            }
        }
        drop(f);
        self.queue.lock().retain(|r| r.handle.id != id);
    }

    pub fn connected(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    pub fn wake(&self) {
        self.wake_thread();
    }

    /// Becoming a replica: our replicas are disconnected and the backlog goes (the history
    /// they followed ends here).
    pub fn drop_all_replicas(&self) {
        let mut f = self.feed.lock();
        for r in f.replicas.drain(..) {
            r.handle.kill();
        }
        self.count.store(0, Ordering::Relaxed);
        for r in self.queue.lock().drain(..) {
            r.handle.kill();
        }
        f.backlog = None;
        drop(f);
        self.on.store(false, Ordering::Release);
    }

    /// REPLICAOF NO ONE: a new history that continues the followed one at `offset`, which
    /// replicas of the old master may still continue (`replid2`).
    pub fn become_master(&self, srv: &Server, offset: i64) {
        let old = std::mem::replace(&mut *srv.replid.lock(), new_replid());
        *self.replid2.lock() = Some((old, offset + 1));
        self.offset.store(offset, Ordering::Release);
    }

    fn wake_thread(&self) {
        let (m, cv) = &self.wake;
        *m.lock() = true;
        cv.notify_one();
    }

    /// Replicas that acknowledged `target` or more.
    pub fn acked(&self, target: i64) -> usize {
        self.feed.lock().replicas.iter().filter(|r| r.ack_offset.load(Ordering::Relaxed) >= target).count()
    }

    /// Replicas whose AOF has fsync'd `target` or more (WAITAOF).
    pub fn aof_acked(&self, target: i64) -> usize {
        self.feed.lock().replicas.iter().filter(|r| r.aof_ack_offset.load(Ordering::Relaxed) >= target).count()
    }
}

fn st_clear(r: &Replica) {
    r.state.lock().pending = Vec::new();
}

pub use super::client::Handshake;

/// PSYNC replid offset / SYNC: makes the client a replica. A partial resync is answered at
/// once from the backlog (`+CONTINUE`; `reply` gets that line); a full one is queued for the
/// replication thread, which sends `+FULLRESYNC` at the snapshot's instant. Returns the
/// mailbox the session keeps for the replica.
pub fn attach(
    srv: &Server,
    handle: &Arc<ClientHandle>,
    hs: &Handshake,
    psync: Option<(&[u8], &[u8])>,
    reply: &mut Vec<u8>,
) -> Arc<Replica> {
    let repl = &srv.repl;
    let mailbox = handle.mailbox();
    handle.replica.store(true, Ordering::Relaxed);
    let ip = hs.ip.clone().unwrap_or_else(|| host_of(&handle.addr));
    let now = srv.now_ms();
    let r = Arc::new(Replica {
        handle: handle.clone(),
        mailbox,
        port: hs.port,
        ip,
        capa_eof: hs.capa_eof,
        psync: psync.is_some(),
        state: Mutex::new(ReplicaState { link: Link::WaitBgsave, await_ack: false, pending: Vec::new() }),
        ack_offset: AtomicI64::new(0),
        aof_ack_offset: AtomicI64::new(0),
        ack_ms: AtomicI64::new(now),
    });
    repl.ensure_backlog(srv);
    if let Some((id, off)) = psync {
        if try_partial(srv, &r, id, off, reply) {
            return r;
        }
    }
    crate::log_notice!("Replica {}:{} asks for synchronization", r.ip, r.port);
    crate::log_notice!("Full resync requested by replica {}:{}", r.ip, r.port);
    repl.sync_full.fetch_add(1, Ordering::Relaxed);
    let mut q = repl.queue.lock();
    if q.is_empty() {
        repl.queued_at.store(now, Ordering::Relaxed);
    }
    q.push(r.clone());
    drop(q);
    repl.wake_thread();
    r
}

/// `+CONTINUE` and the backlog from the replica's offset on, if the backlog still holds it
/// and the replica followed this history (Redis's masterTryPartialResynchronization).
fn try_partial(srv: &Server, r: &Arc<Replica>, id: &[u8], off: &[u8], reply: &mut Vec<u8>) -> bool {
    let repl = &srv.repl;
    let replid = srv.replid.lock().clone();
    let Some(off) = std::str::from_utf8(off).ok().and_then(|s| s.parse::<i64>().ok()) else { return false };
    // A replica of the master this server followed may continue that history up to where
    // this server left it (PSYNC2).
    let continues_old = repl.replid2.lock().as_ref().is_some_and(|(id2, upto)| id == id2.as_bytes() && off <= *upto);
    if id != replid.as_bytes() && !continues_old {
        if id != b"?" {
            crate::log_notice!(
                "Partial resynchronization not accepted: Replication ID mismatch (Replica asked for '{}', my replication IDs are '{}' and '0000000000000000000000000000000000000000')",
                String::from_utf8_lossy(id),
                replid
            );
            repl.sync_partial_err.fetch_add(1, Ordering::Relaxed);
        }
        return false;
    }
    let mut f = repl.feed.lock();
    let Some(b) = f.backlog.as_ref() else { return false };
    if off < b.first || off > b.first + b.buf.len() as i64 {
        crate::log_notice!(
            "Unable to partial resync with replica {}:{} for lack of backlog (Replica request was: {off}).",
            r.ip,
            r.port
        );
        repl.sync_partial_err.fetch_add(1, Ordering::Relaxed);
        return false;
    }
    let skip = (off - b.first) as usize;
    let (a, c) = b.buf.as_slices();
    let mut tail = Vec::with_capacity(b.buf.len() - skip);
    if skip < a.len() {
        tail.extend_from_slice(&a[skip..]);
        tail.extend_from_slice(c);
    } else {
        tail.extend_from_slice(&c[skip - a.len()..]);
    }
    reply.extend_from_slice(format!("+CONTINUE {replid}\r\n").as_bytes());
    r.state.lock().link = Link::Online;
    r.ack_offset.store(off - 1, Ordering::Relaxed);
    // Under the feed lock: nothing fed after the backlog's end can come before it.
    if !tail.is_empty() {
        srv.pubsub.send_raw(&srv.config.hot, &r.mailbox, &tail);
    }
    f.replicas.push(r.clone());
    repl.count.store(f.replicas.len(), Ordering::Relaxed);
    repl.alone_since.store(0, Ordering::Relaxed);
    drop(f);
    repl.sync_partial_ok.fetch_add(1, Ordering::Relaxed);
    crate::log_notice!(
        "Partial resynchronization request from {}:{} accepted. Sending {} bytes of backlog starting from offset {off}.",
        r.ip,
        r.port,
        tail.len()
    );
    true
}

/// The host part of `ip:port` (`[v6]:port` keeps the brackets off).
fn host_of(addr: &str) -> String {
    match addr.rfind(':') {
        Some(i) => addr[..i].trim_start_matches('[').trim_end_matches(']').to_string(),
        None => addr.to_string(),
    }
}

/// REPLCONF ACK offset [FACK aof-offset] from a replica.
pub fn ack(srv: &Server, id: u64, offset: i64, fack: Option<i64>) {
    let now = srv.now_ms();
    let f = srv.repl.feed.lock();
    let found = f.replicas.iter().find(|r| r.handle.id == id).cloned();
    drop(f);
    if let Some(r) = found {
        if offset > r.ack_offset.load(Ordering::Relaxed) {
            r.ack_offset.store(offset, Ordering::Relaxed);
        }
        if let Some(f) = fack {
            if f > r.aof_ack_offset.load(Ordering::Relaxed) {
                r.aof_ack_offset.store(f, Ordering::Relaxed);
            }
        }
        r.ack_ms.store(now, Ordering::Relaxed);
        if r.state.lock().await_ack {
            put_online(srv, &r);
        }
        if srv.persistence.gates.load(Ordering::Relaxed) & crate::services::gates::GATE_NO_REPLICAS != 0 {
            refresh_good(srv);
        }
    }
    if !srv.repl.waits.lock().is_empty() {
        end_waits(srv, false);
    }
}

/// WAIT that has to wait: registered so acknowledgements (or its deadline) end it. The
/// replication thread asks the replicas for an ACK (REPLCONF GETACK) on its next turn.
pub fn add_wait(srv: &Server, w: &Arc<Waiter>) {
    let arg = |i: usize| w.argv.get(i).and_then(|a| std::str::from_utf8(a).ok()).and_then(|s| s.parse::<i64>().ok());
    let (Some(n), Some(target), Some(deadline)) = (arg(1), arg(2), arg(3)) else { return };
    // WAITAOF's waiter carries the local copies asked for and the AOF offset to reach.
    let aof = match (arg(4), arg(5)) {
        (Some(local), Some(bytes)) => Some((local.max(0) as usize, bytes.max(0) as u64)),
        _ => None,
    };
    srv.repl.waits.lock().push(Wait { w: w.clone(), target, n: n.max(0) as usize, deadline, aof });
    srv.repl.getack.store(true, Ordering::Release);
    srv.repl.wake_thread();
}

/// Ends the WAITs whose replicas have acknowledged enough; with `expired`, also those whose
/// deadline passed (their reply counts the replicas acknowledged by then).
fn end_waits(srv: &Server, expired: bool) {
    let now = srv.now_ms();
    // Read before the waits are locked: the open AOF ranks outside them (lock order).
    let log = srv.persistence.aof.log();
    let mut waits = srv.repl.waits.lock();
    waits.retain(|wt| {
        if *wt.w.state.lock() != WaitState::Waiting {
            return false;
        }
        let late = expired && wt.deadline > 0 && now >= wt.deadline;
        let reply = match wt.aof {
            None => {
                let got = srv.repl.acked(wt.target);
                (got >= wt.n || late).then(|| format!(":{got}\r\n").into_bytes())
            }
            Some((local, bytes)) => {
                if local > 0 && log.is_none() {
                    Some(format!("-{ERR_WAITAOF_NO_AOF}\r\n").into_bytes())
                } else {
                    let here = log.as_ref().is_some_and(|l| l.durable.load(Ordering::Acquire) >= bytes) as usize;
                    let got = srv.repl.aof_acked(wt.target);
                    ((here >= local && got >= wt.n) || late)
                        .then(|| format!("*2\r\n:{here}\r\n:{got}\r\n").into_bytes())
                }
            }
        };
        let Some(reply) = reply else { return true };
        if wt.w.finish(WaitState::Served(reply)) {
            srv.blocked_clients.fetch_sub(1, Ordering::Relaxed);
        }
        false
    });
}

pub const ERR_WAITAOF_NO_AOF: &str = "ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.";

/// The replication thread (started with the server): pings, timeouts, WAIT deadlines, full
/// resyncs and the backlog's time to live, ten times a second or when woken.
pub fn run_thread(srv: Arc<Server>) {
    let repl = &srv.repl;
    let mut last_ping = 0i64;
    let mut last_newline = 0i64;
    loop {
        {
            let (m, cv) = &repl.wake;
            let mut woken = m.lock();
            if !*woken {
                // Ten turns a second, or sooner for a WAIT's deadline.
                let now = srv.now_ms();
                let next = repl.waits.lock().iter().filter(|w| w.deadline > 0).map(|w| w.deadline - now).min();
                let aof_waits = repl.waits.lock().iter().any(|w| w.aof.is_some());
                let ms = next.unwrap_or(100).clamp(1, if aof_waits { 10 } else { 100 }) as u64;
                cv.wait_for(&mut woken, Duration::from_millis(ms));
            }
            *woken = false;
        }
        if srv.shutting_down.load(Ordering::Acquire) {
            return;
        }
        super::upstream::maybe_start(&srv);
        let now = srv.now_ms();
        // Not while writes are paused: the stream must not move then (Redis's beforeSleep).
        if repl.connected() > 0 && !srv.writes_paused() && repl.getack.swap(false, Ordering::AcqRel) {
            repl.feed_command(&srv, &[b"REPLCONF", b"GETACK", b"*"]);
        }
        if !repl.waits.lock().is_empty() {
            end_waits(&srv, true);
        }
        // Pings keep the replicas' link timers alive (Redis's replicationCron); not while
        // writes are paused, as the stream must not move then.
        let period =
            srv.config.text(crate::config::p::REPL_PING_REPLICA_PERIOD).parse::<i64>().unwrap_or(10).max(1) * 1000;
        // The first comes a period after a replica attached, not at once (Redis's fall on
        // multiples of the period since start; a stream read right after SYNC has none).
        if repl.connected() == 0 {
            last_ping = now;
        } else if now - last_ping >= period && !srv.writes_paused() {
            last_ping = now;
            repl.feed_command(&srv, &[b"PING"]);
        }
        drop_timed_out(&srv, now);
        refresh_good(&srv);
        start_syncs(&srv, now);
        // A newline a second keeps replicas waiting for their snapshot from timing out (they
        // skip empty lines before the PSYNC reply), as Redis's replicationCron does.
        if now - last_newline >= 1000 {
            last_newline = now;
            let q = repl.queue.lock();
            if !q.is_empty() && now - repl.queued_at.load(Ordering::Relaxed) >= 1000 {
                for r in q.iter() {
                    srv.pubsub.send_raw(&srv.config.hot, &r.mailbox, b"\n");
                }
            }
        }
        free_idle_backlog(&srv, now);
    }
}

/// `min-replicas-to-write`: raises the gate that refuses writes while fewer replicas than
/// that are online and acknowledged within `min-replicas-max-lag` seconds (Redis's
/// refreshGoodSlavesCount, checked on every ACK and every turn of the thread).
pub fn refresh_good(srv: &Server) {
    let min = srv.config.text(crate::config::p::MIN_REPLICAS_TO_WRITE).parse::<usize>().unwrap_or(0);
    let lag = srv.config.text(crate::config::p::MIN_REPLICAS_MAX_LAG).parse::<i64>().unwrap_or(10);
    let short = if min == 0 || lag == 0 || srv.repl.upstream.following() {
        false
    } else {
        let now = srv.now_ms();
        let good = srv
            .repl
            .replicas()
            .iter()
            .filter(|r| r.link() == Link::Online && (now - r.ack_ms.load(Ordering::Relaxed)) / 1000 <= lag)
            .count();
        good < min
    };
    srv.persistence.set_gate(crate::services::gates::GATE_NO_REPLICAS, short);
}

/// Replicas silent for longer than `repl-timeout` are disconnected.
fn drop_timed_out(srv: &Server, now: i64) {
    let timeout = srv.config.text(crate::config::p::REPL_TIMEOUT).parse::<i64>().unwrap_or(60) * 1000;
    for r in srv.repl.replicas() {
        if r.link() == Link::Online && now - r.ack_ms.load(Ordering::Relaxed) > timeout {
            crate::log_warning!("Disconnecting timedout replica (streaming sync): {}:{}", r.ip, r.port);
            r.handle.kill();
        }
    }
}

/// `repl-backlog-ttl` seconds after the last replica left, the backlog goes and writes stop
/// producing effects for it (0: kept forever).
fn free_idle_backlog(srv: &Server, now: i64) {
    let repl = &srv.repl;
    let ttl = srv.config.text(crate::config::p::REPL_BACKLOG_TTL).parse::<i64>().unwrap_or(3600);
    let since = repl.alone_since.load(Ordering::Relaxed);
    if ttl == 0 || since == 0 || now - since < ttl * 1000 || !repl.queue.lock().is_empty() {
        return;
    }
    let mut f = repl.feed.lock();
    if !f.replicas.is_empty() || f.backlog.is_none() {
        return;
    }
    f.backlog = None;
    drop(f);
    repl.alone_since.store(0, Ordering::Relaxed);
    repl.on.store(false, Ordering::Release);
    srv.refresh_effects();
    // A later replica must not resume the history whose bytes were thrown away.
    *srv.replid.lock() = new_replid();
    crate::log_notice!("Replication backlog freed after {ttl} seconds without connected replicas.");
}

/// A new random replication ID (40 hex digits).
pub fn new_replid() -> String {
    use rand::Rng;
    let mut r = rand::thread_rng();
    (0..40).map(|_| char::from_digit(r.gen_range(0..16), 16).unwrap()).collect()
}

/// Starts a full resync for the queued replicas once `repl-diskless-sync-delay` has let
/// others gather (a disk-based one starts at once), on a thread of its own.
fn start_syncs(srv: &Arc<Server>, now: i64) {
    let repl = &srv.repl;
    let mut q = repl.queue.lock();
    q.retain(|r| !r.handle.killed.load(Ordering::Relaxed));
    if q.is_empty() || srv.ks.snapshots.running() {
        return;
    }
    let diskless = srv.config.flag(crate::config::p::REPL_DISKLESS_SYNC) && q.iter().all(|r| r.capa_eof);
    if diskless {
        let delay = srv.config.text(crate::config::p::REPL_DISKLESS_SYNC_DELAY).parse::<i64>().unwrap_or(5) * 1000;
        let max = srv.config.text(crate::config::p::REPL_DISKLESS_SYNC_MAX_REPLICAS).parse::<usize>().unwrap_or(0);
        let waited = now - repl.queued_at.load(Ordering::Relaxed);
        if waited < delay && (max == 0 || q.len() < max) {
            return;
        }
    }
    let batch = std::mem::take(&mut *q);
    drop(q);
    let srv2 = srv.clone();
    let spawned = std::thread::Builder::new().name("repl-sync".into()).spawn(move || full_sync(&srv2, batch, diskless));
    if let Err(e) = spawned {
        crate::log_warning!("Can't start the replicas' snapshot: {e}");
    }
}

/// What the snapshot does at its instant: every shard is locked (`quiesce`), so the stream
/// so far is exactly what the snapshot holds; the replicas join the stream there.
struct SyncHooks<'a> {
    srv: &'a Server,
    batch: &'a [Arc<Replica>],
    mark: Option<[u8; 40]>,
}

impl rdbfile::SnapshotHooks for SyncHooks<'_> {
    fn header(&mut self, _: &crate::engine::Keyspace) -> std::io::Result<rdbfile::Header<'static>> {
        Ok(super::persistence::header(self.srv, false))
    }

    fn quiesce(&self) -> bool {
        true
    }

    fn begun(&mut self, epoch: Option<u64>) {
        if epoch.is_none() {
            return;
        }
        let srv = self.srv;
        let repl = &srv.repl;
        let replid = srv.replid.lock().clone();
        let mut f = repl.feed.lock();
        let off = repl.offset();
        // The stream after the instant starts with a SELECT (Redis resets slaveseldb).
        f.db = None;
        for r in self.batch {
            if r.handle.killed.load(Ordering::Relaxed) {
                continue;
            }
            let mut head = Vec::new();
            if r.psync {
                head.extend_from_slice(format!("+FULLRESYNC {replid} {off}\r\n").as_bytes());
            }
            if let Some(mark) = &self.mark {
                head.extend_from_slice(b"$EOF:");
                head.extend_from_slice(mark);
                head.extend_from_slice(b"\r\n");
            }
            r.state.lock().link = Link::SendBulk;
            r.ack_offset.store(off, Ordering::Relaxed);
            if !head.is_empty() {
                srv.pubsub.send_raw(&srv.config.hot, &r.mailbox, &head);
            }
            f.replicas.push(r.clone());
        }
        repl.count.store(f.replicas.len(), Ordering::Relaxed);
        repl.alone_since.store(0, Ordering::Relaxed);
    }
}

/// Replicas' output waiting beyond this, the snapshot's writer waits for them to read.
const IN_FLIGHT: usize = 4 << 20;

/// Sends snapshot bytes to every replica of the batch still connected.
struct Fanout<'a> {
    srv: &'a Server,
    batch: &'a [Arc<Replica>],
}

impl Write for Fanout<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        send_all(self.srv, self.batch, buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn live(batch: &[Arc<Replica>]) -> impl Iterator<Item = &Arc<Replica>> {
    batch.iter().filter(|r| !r.handle.killed.load(Ordering::Relaxed))
}

/// Pushes `buf` to the replicas, waiting first while any of them has more than
/// `IN_FLIGHT` bytes not yet written to its socket. Err once none is left.
fn send_all(srv: &Server, batch: &[Arc<Replica>], buf: &[u8]) -> std::io::Result<()> {
    loop {
        if live(batch).next().is_none() || srv.shutting_down.load(Ordering::Relaxed) {
            return Err(std::io::Error::other("no replica left"));
        }
        let behind =
            live(batch).any(|r| r.mailbox.len() + r.handle.out_pending.load(Ordering::Relaxed) as usize > IN_FLIGHT);
        if !behind {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    for r in live(batch) {
        srv.pubsub.send_raw(&srv.config.hot, &r.mailbox, buf);
    }
    Ok(())
}

/// One snapshot for a batch of replicas: waits for any other snapshot to end, sends the RDB
/// (diskless, or through a temporary file), then the stream that piled up meanwhile.
fn full_sync(srv: &Server, batch: Vec<Arc<Replica>>, diskless: bool) {
    let opts = crate::persist::save_opts(&srv.config);
    let form = rdbfile::Form::Rdb { checksum: true };
    let progress = Arc::new(rdbfile::Progress::default());
    let mark = diskless.then(|| {
        let id = new_replid();
        let mut m = [0u8; 40];
        m.copy_from_slice(id.as_bytes());
        m
    });
    crate::log_notice!("Starting BGSAVE for SYNC with target: {}", if diskless { "replicas sockets" } else { "disk" });
    let sent = loop {
        if live(&batch).next().is_none() {
            break Err("no replica left".to_string());
        }
        let mut hooks = SyncHooks { srv, batch: &batch, mark };
        let r = if diskless {
            rdbfile::write_snapshot(&srv.ks, Fanout { srv, batch: &batch }, &mut hooks, opts, form, &progress)
                .and_then(|_| send_all(srv, &batch, mark.as_ref().unwrap()))
        } else {
            to_file(srv, &batch, &mut hooks, opts, form, &progress)
        };
        match r {
            Err(e) if e.to_string() == rdbfile::ERR_IN_PROGRESS => std::thread::sleep(Duration::from_millis(20)),
            r => break r.map_err(|e| e.to_string()),
        }
    };
    if let Err(e) = sent {
        crate::log_warning!("Replica full sync failed: {e}");
        for r in &batch {
            if !r.handle.killed.load(Ordering::Relaxed) {
                r.handle.kill();
            }
        }
        return;
    }
    for r in live(&batch) {
        r.ack_ms.store(srv.now_ms(), Ordering::Relaxed);
        if diskless {
            // A replica reading an `$EOF:` payload looks for the mark at the end of what each
            // read returns: stream bytes right behind it would hide it. As Redis does
            // (repl_start_cmd_stream_on_ack), the stream starts once the replica has loaded
            // the snapshot and sent its first ACK.
            r.state.lock().await_ack = true;
        } else {
            put_online(srv, r);
        }
        crate::log_notice!("Synchronization with replica {}:{} succeeded", r.ip, r.port);
    }
}

/// The replica has its snapshot: what piled up goes first, then the stream as it happens,
/// in order (both under the feed lock).
fn put_online(srv: &Server, r: &Replica) {
    let _f = srv.repl.feed.lock();
    let mut st = r.state.lock();
    let pending = std::mem::take(&mut st.pending);
    st.link = Link::Online;
    st.await_ack = false;
    drop(st);
    if !pending.is_empty() {
        srv.pubsub.send_raw(&srv.config.hot, &r.mailbox, &pending);
    }
}

/// A disk-based full sync: the snapshot goes to a temporary file, then to the replicas as
/// `$<length>` and the bytes.
fn to_file(
    srv: &Server,
    batch: &[Arc<Replica>],
    hooks: &mut SyncHooks<'_>,
    opts: crate::engine::rdb::save::SaveOpts,
    form: rdbfile::Form,
    progress: &Arc<rdbfile::Progress>,
) -> std::io::Result<()> {
    let path = std::path::PathBuf::from(format!("temp-repl-{}-{}.rdb", std::process::id(), super::unix_us()));
    let result = (|| {
        let f = std::fs::File::create(&path)?;
        let w = std::io::BufWriter::with_capacity(1 << 20, f);
        let (_, w) = rdbfile::write_snapshot(&srv.ks, w, hooks, opts, form, progress)?;
        drop(w.into_inner().map_err(|e| e.into_error())?);
        let len = std::fs::metadata(&path)?.len();
        send_all(srv, batch, format!("${len}\r\n").as_bytes())?;
        let mut f = std::fs::File::open(&path)?;
        let mut chunk = vec![0u8; 64 << 10];
        loop {
            let n = std::io::Read::read(&mut f, &mut chunk)?;
            if n == 0 {
                return Ok(());
            }
            send_all(srv, batch, &chunk[..n])?;
        }
    })();
    let _ = std::fs::remove_file(&path);
    result
}
