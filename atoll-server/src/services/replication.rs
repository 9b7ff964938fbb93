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
//!   RDB is on its way stay in the backlog — one buffer for every replica waiting, as Redis
//!   7's replication buffer, which grows past `repl-backlog-size` while one needs it — and
//!   follow the RDB. One snapshot
//!   serves every replica waiting when it starts (`repl-diskless-sync-delay` lets more
//!   gather). Diskless (`$EOF:<mark>` framing, when the replica said `capa eof`) or through a
//!   temporary file (`$<length>` framing) as `repl-diskless-sync` says.
//! * **The replica's link** is its client connection: the stream goes through the client's
//!   mailbox (as Pub/Sub messages do) on its own worker, under the `replica` class of
//!   `client-output-buffer-limit`. The replica's REPLCONF ACKs arrive as commands.
//! * **The replication thread** pings replicas every `repl-ping-replica-period`, drops those
//!   silent past `repl-timeout`, ends WAITs, starts full resyncs and frees the backlog
//!   `repl-backlog-ttl` seconds after the last replica left.
//! * **A replica serves replicas of its own** (chained replication, Redis's PSYNC2): while it
//!   follows a master (`proxying`), its stream is the master's, byte for byte — each command
//!   of the master's goes to its backlog and replicas once applied (`feed_proxied`), under the
//!   same shard locks as its change when it has one, so its offsets and replication ID are
//!   the master's and a replica of it may continue with the master, or with it once promoted.
//!   Its own writes (a writable replica's) reach no replica of it, as in Redis.

//!
//! This module holds the state both halves share and the feed; the threads and the protocol
//! (PSYNC, full resyncs, ACKs, WAIT, the replica's link) are `daemons::replication` and
//! `daemons::replica_link`.

use super::clients::{ClientHandle, Mailbox, Wait as ClientWait};
use super::effects::Effect;
use super::pubsub::Reach;
use crate::lockorder::{rank, Mutex};
use crate::persist::aof::encode;
use parking_lot::Condvar;
use std::collections::VecDeque;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

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
    pub mailbox: Arc<Mailbox>,
    /// REPLCONF listening-port (0: not said).
    pub port: u16,
    /// REPLCONF ip-address, or the connection's address.
    pub ip: String,
    /// Said `capa eof`: can take a diskless RDB of unknown length.
    pub capa_eof: bool,
    /// Came with PSYNC (gets +FULLRESYNC first), not the old SYNC.
    pub psync: bool,
    pub state: Mutex<ReplicaState, { rank::REPLICA }>,
    /// The last offset the replica acknowledged (REPLCONF ACK), and when (unix ms).
    pub ack_offset: AtomicI64,
    /// The offset the replica's own AOF has fsync'd (REPLCONF ACK … FACK), for WAITAOF.
    pub aof_ack_offset: AtomicI64,
    pub ack_ms: AtomicI64,
    /// Has sent a REPLCONF ACK (so holds its snapshot, loaded): what FAILOVER requires of its
    /// target, as Redis's `repl_ack_off` moves only on an ACK.
    pub acked: AtomicBool,
}

pub struct ReplicaState {
    pub link: Link,
    /// The snapshot went out diskless: the stream starts with the replica's first ACK.
    pub await_ack: bool,
    /// While its snapshot is made and sent: the offset of the first byte of the stream it
    /// needs after it. Those bytes stay in the backlog for it, past `repl-backlog-size` if
    /// need be — one buffer for every replica, as Redis 7's replication buffer, not a copy
    /// each — and are handed to it when it goes online.
    pub from: Option<i64>,
}

impl Replica {
    pub fn link(&self) -> Link {
        self.state.lock().link
    }
}

/// The stream's recent past: the last `cap` bytes fed.
pub struct Backlog {
    pub buf: VecDeque<u8>,
    pub cap: usize,
    /// Offset of `buf[0]` (`repl_backlog_first_byte_offset`).
    pub first: i64,
}

#[derive(Default)]
pub struct Feed {
    pub backlog: Option<Backlog>,
    /// The database the stream last selected (None: the next effect selects its own).
    pub db: Option<usize>,
    pub replicas: Vec<Arc<Replica>>,
    scratch: Vec<u8>,
    /// While proxying a master's stream: the database that stream has selected, which a
    /// snapshot for a replica of this one records (`repl-stream-db`) so that replica applies
    /// what follows the snapshot in the right database.
    pub stream_db: usize,
}

/// A client in WAIT: done once `n` replicas acknowledged `target`.
pub struct Wait {
    pub w: Arc<dyn ClientWait>,
    pub target: i64,
    pub n: usize,
    /// Unix ms (0: none).
    pub deadline: i64,
    /// WAITAOF: the local copies asked for (0 or 1) and the AOF bytes that must be fsync'd.
    pub aof: Option<(usize, u64)>,
}

#[derive(Default)]
pub struct Replication {
    pub feed: Mutex<Feed, { rank::REPL_FEED }>,
    /// `master_repl_offset`: bytes ever fed.
    pub offset: AtomicI64,
    /// The backlog exists: writes produce effects for it.
    pub on: AtomicBool,
    /// Unix ms the last replica left (for `repl-backlog-ttl`; 0 while some are connected).
    pub alone_since: AtomicI64,
    /// Replicas counted for INFO without the feed lock.
    pub count: AtomicUsize,
    /// Replicas waiting for a full resync to begin.
    pub queue: Mutex<Vec<Arc<Replica>>, { rank::REPLICAS }>,
    /// Unix ms the oldest queued replica arrived.
    pub queued_at: AtomicI64,
    pub waits: Mutex<Vec<Wait>, { rank::WAITS }>,
    /// A WAIT is waiting: the thread asks replicas for an ACK.
    pub getack: AtomicBool,
    /// Wakes the replication thread.
    pub wake: (parking_lot::Mutex<bool>, Condvar),
    /// Full resyncs done (`sync_full`), partial ones accepted and refused.
    pub sync_full: AtomicU64,
    pub sync_partial_ok: AtomicU64,
    pub sync_partial_err: AtomicU64,
    /// The history this server continued when it stopped following a master
    /// (`master_replid2`, `second_repl_offset`; -1 when none).
    pub replid2: Mutex<Option<(String, i64)>, { rank::LEAF }>,
    /// The replica's half: the master this server follows, if any.
    pub upstream: Upstream,
    /// Following a master: the stream is the master's (`feed_proxied`), not effects.
    pub proxying: AtomicBool,
    /// FAILOVER's progress (`master_failover_state`).
    pub failover: Mutex<Failover, { rank::LEAF }>,
    /// Held through each of FAILOVER's steps, so an ABORT never falls between a step's check
    /// and its action.
    pub failover_step: Mutex<(), { rank::FAILOVER }>,
    /// A write of this server's own was applied while it proxied a master's stream (never
    /// fed): on a read-only replica that is a write that raced REPLICAOF, and the history this
    /// server would offer its new master no longer matches its data.
    pub stray_write: AtomicBool,
    /// The snapshot being made for replicas, while it is made (when it began, how far it is):
    /// INFO reports it as Redis reports its child making an RDB for replicas
    /// (`rdb_bgsave_in_progress`, `rdb_current_bgsave_time_sec`, the `current_*` fields).
    pub snapshot: Mutex<Option<(i64, Arc<crate::persist::rdbfile::Progress>)>, { rank::LEAF }>,
    /// The full sync whose snapshot is being made (and, diskless, sent): no other begins
    /// meanwhile, and a replica arriving during a disk-based one joins it.
    pub current: parking_lot::Mutex<Option<Arc<CurrentSync>>>,
}

/// A full sync under way (Redis's RDB child for replicas).
#[derive(Default)]
pub struct CurrentSync {
    /// Through a file (`repl-diskless-sync no`): replicas may join until the file is sent.
    pub disk: bool,
    /// The replicas it serves.
    pub batch: parking_lot::Mutex<Vec<Arc<Replica>>>,
    /// Its instant, once passed: (replication ID, offset).
    pub at: parking_lot::Mutex<Option<(String, i64)>>,
    /// The file is being sent: too late to join.
    pub sending: AtomicBool,
    /// Given up because every replica left (set under `batch`'s lock): a replica asking now
    /// must not join a snapshot about to be thrown away, and waits for the next sync.
    pub abandoned: AtomicBool,
}

/// The replication buffers' memory (`Replication::buffers`).
pub struct ReplBuffers {
    pub total: u64,
    pub backlog: u64,
    pub replicas: u64,
}

/// A coordinated failover (FAILOVER): writes are paused until a replica has the whole stream,
/// then this server follows it and asks it to take over (PSYNC … FAILOVER).
#[derive(Default, Clone)]
pub struct Failover {
    pub state: FailoverState,
    /// The replica named (TO host port), or the one found caught up.
    pub target: Option<(String, u16)>,
    /// Unix ms the wait for the replica ends (0: none).
    pub end_ms: i64,
    pub force: bool,
}

#[derive(Default, Clone, Copy, PartialEq, Eq, Debug)]
pub enum FailoverState {
    #[default]
    None,
    WaitForSync,
    InProgress,
}

impl FailoverState {
    /// INFO's `master_failover_state`.
    pub fn name(self) -> &'static str {
        match self {
            FailoverState::None => "no-failover",
            FailoverState::WaitForSync => "waiting-for-sync",
            FailoverState::InProgress => "failover-in-progress",
        }
    }
}

thread_local! {
    /// The stream's offset after the last effects this thread fed. A client's writes are fed
    /// by its worker's thread, so this is at or past the client's last write: what WAIT waits
    /// for (Redis keeps it per client, `woff`; this may wait for a few more bytes, never fewer).
    static FED: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
}

thread_local! {
    /// The master's command (or transaction) the replica link thread is applying, as it came:
    /// fed to this server's replicas by the effects' publication, under the command's locks,
    /// or by the link once the command is done if it changed nothing.
    static PROXY: std::cell::RefCell<Option<Vec<u8>>> = const { std::cell::RefCell::new(None) };
}

/// The link thread: `bytes` are the master's command it is about to apply (see `PROXY`).
pub fn set_proxy(bytes: Vec<u8>) {
    PROXY.with(|p| *p.borrow_mut() = Some(bytes));
}

/// What `set_proxy` left that no publication took (None once fed).
pub fn take_proxy() -> Option<Vec<u8>> {
    PROXY.with(|p| p.borrow_mut().take())
}

/// The offset WAIT on this thread waits for (see `FED`).
pub fn fed_here() -> i64 {
    FED.with(|f| f.get())
}

/// The backlog's capacity for `repl-backlog-size` (at least 16 KB, as Redis).
pub fn backlog_cap(setting: &str) -> usize {
    setting.parse::<usize>().unwrap_or(1 << 20).max(16 * 1024)
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

    /// The offset a cluster node announces and ranks replicas by: a replica without its
    /// master's history (a full sync under way, its data loading) announces 0, so its
    /// master's CLUSTER SLOTS hides it and CLUSTER SHARDS shows it `loading` (Redis's
    /// replicationGetSlaveOffset with neither a master nor a cached master).
    pub fn cluster_offset(&self) -> u64 {
        if self.upstream.following() && !self.upstream.synced.load(Ordering::Acquire) {
            return 0;
        }
        self.offset().max(0) as u64
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

    /// The replication buffers, measured as Redis 7 reports its one replication buffer:
    /// `total` (INFO `mem_total_replication_buffers`) is the backlog's allocation and the
    /// stream queued for online replicas, not yet taken by their sockets; of it, what is held
    /// past `repl-backlog-size` and what is queued are the replicas' (`mem_clients_slaves`,
    /// not counted for `maxmemory`), the rest the backlog's (`mem_replication_backlog`).
    /// `buffers().replicas` (what eviction leaves out), at no cost without replicas.
    pub fn replicas_share(&self) -> u64 {
        if self.count.load(Ordering::Relaxed) == 0 && self.queue.lock().is_empty() {
            return 0;
        }
        self.buffers().replicas
    }

    pub fn buffers(&self) -> ReplBuffers {
        // The allocation, and what it holds past `repl-backlog-size` (for replicas).
        let (alloc, beyond) = {
            let f = self.feed.lock();
            match f.backlog.as_ref() {
                Some(b) if b.buf.capacity() > 0 => {
                    (crate::alloc::usable_size(b.buf.capacity()), b.buf.len().saturating_sub(b.cap) as u64)
                }
                _ => (0, 0),
            }
        };
        let all = self.all_replicas();
        let queued: u64 =
            all.iter().map(|r| r.mailbox.len() as u64 + r.handle.out_pending.load(Ordering::Relaxed)).sum();
        let total = alloc + queued;
        let replicas = if all.is_empty() { 0 } else { (beyond + queued).min(total) };
        ReplBuffers { total, backlog: total - replicas, replicas }
    }

    /// Replicas fed the stream (or about to receive their snapshot).
    pub fn replicas(&self) -> Vec<Arc<Replica>> {
        self.feed.lock().replicas.clone()
    }

    /// Every replica, those still waiting for their snapshot to begin included (INFO).
    pub fn all_replicas(&self) -> Vec<Arc<Replica>> {
        let mut v = self.replicas();
        // Those of the sync under way whose snapshot's instant has not come yet (between the
        // queue and the feed: a snapshot in progress always lists its replicas).
        let current = self.current.lock().clone();
        if let Some(cur) = current {
            for r in cur.batch.lock().iter() {
                let gone = r.handle.killed.load(Ordering::Relaxed) || *r.handle.closed.lock();
                if !gone && !v.iter().any(|x| Arc::ptr_eq(x, r)) {
                    v.push(r.clone());
                }
            }
        }
        v.extend(self.queue.lock().iter().cloned());
        v
    }

    /// (active, size, first byte offset, bytes held) for INFO.
    pub fn backlog_info(&self, cap: usize) -> (bool, usize, i64, usize) {
        match &self.feed.lock().backlog {
            Some(b) => (true, b.cap, b.first, b.buf.len()),
            None => (false, cap, 0, 0),
        }
    }

    /// Feeds a command's effects to the stream. Called under the server's effect lock (see
    /// `publish_effects` in the call path), so the stream's order is the writes' order.
    pub fn feed(&self, r: &Reach, effects: &[Effect]) {
        // Under the feed lock: a switch of role (`start_proxying`, `become_master`) falls
        // wholly before or after this write, which is then counted exactly once.
        let mut f = self.feed.lock();
        if self.proxying.load(Ordering::Acquire) {
            // A replica passes its master's stream on as it came; its own writes (on a
            // writable replica) reach no replica of it.
            match take_proxy() {
                Some(b) => self.append(r, &mut f, &b),
                None => self.stray_write.store(true, Ordering::Relaxed),
            }
            return;
        }
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
        self.append(r, f, &out);
        f.scratch = out;
        FED.with(|c| c.set(self.offset()));
    }

    /// Feeds a command no write caused (PING, REPLCONF GETACK, DEBUG REPLICATE): no SELECT
    /// before it.
    pub fn feed_command(&self, r: &Reach, argv: &[&[u8]]) {
        let mut f = self.feed.lock();
        if f.backlog.is_none() {
            return;
        }
        let argv: Vec<Vec<u8>> = argv.iter().map(|a| a.to_vec()).collect();
        let mut out = Vec::new();
        encode(&mut out, &argv);
        self.append(r, &mut f, &out);
    }

    /// A replica: feeds bytes of its master's stream as they came, and (`db`) the database
    /// that stream has selected after them.
    pub fn feed_proxied(&self, r: &Reach, bytes: &[u8], db: Option<usize>) {
        let mut f = self.feed.lock();
        // Promoted meanwhile: the master's last command is not part of this one's history.
        if !self.proxying.load(Ordering::Acquire) {
            return;
        }
        if let Some(db) = db {
            f.stream_db = db;
        }
        self.append(r, &mut f, bytes);
    }

    /// A master becomes a replica: from now on the stream is the master's. Returns the
    /// offset its own history stands at, every write fed before it counted (under the feed
    /// lock), to offer the new master.
    pub fn start_proxying(&self) -> i64 {
        let _f = self.feed.lock();
        self.proxying.store(true, Ordering::Release);
        self.stray_write.store(false, Ordering::Relaxed);
        self.offset()
    }

    /// A replica's new history (a full sync from its master at `offset`): its replicas are
    /// disconnected (what they hold is of the old one) and the backlog starts afresh there, so
    /// replicas of this one can sync and continue (a replica keeps its backlog: Redis's
    /// replicas never free theirs).
    pub fn restart_history(&self, offset: i64, cap: usize) {
        self.disconnect_replicas();
        let mut f = self.feed.lock();
        self.reset_backlog(&mut f, offset, cap);
    }

    /// `restart_history` by the replica's link, unless this server was promoted meanwhile
    /// (checked under the feed lock, which the promotion takes).
    pub fn restart_history_if_proxying(&self, offset: i64, cap: usize) {
        if !self.proxying.load(Ordering::Acquire) {
            return;
        }
        self.disconnect_replicas();
        let mut f = self.feed.lock();
        if self.proxying.load(Ordering::Acquire) {
            self.reset_backlog(&mut f, offset, cap);
        }
    }

    fn reset_backlog(&self, f: &mut Feed, offset: i64, cap: usize) {
        self.offset.store(offset, Ordering::Release);
        f.backlog = Some(Backlog { buf: VecDeque::new(), cap, first: offset + 1 });
        f.db = None;
        f.stream_db = 0;
        self.on.store(true, Ordering::Release);
    }

    /// Disconnects this server's replicas; the backlog stays, so they may continue from it
    /// when they come back (to learn of a new replication ID, for one).
    pub fn disconnect_replicas(&self) {
        let mut f = self.feed.lock();
        for r in f.replicas.drain(..) {
            r.handle.kill();
        }
        self.count.store(0, Ordering::Relaxed);
        if self.alone_since.load(Ordering::Relaxed) == 0 {
            self.alone_since.store(super::clock::unix_ms(), Ordering::Relaxed);
        }
        drop(f);
        for r in self.queue.lock().drain(..) {
            r.handle.kill();
        }
    }

    fn append(&self, r: &Reach, f: &mut Feed, bytes: &[u8]) {
        let Feed { backlog, replicas, .. } = f;
        let Some(b) = backlog.as_mut() else { return };
        b.buf.extend(bytes);
        let end = self.offset.fetch_add(bytes.len() as i64, Ordering::AcqRel) + bytes.len() as i64;
        let mut lost = false;
        // The oldest byte a replica still receiving its snapshot needs.
        let mut need = i64::MAX;
        for rep in replicas.iter() {
            let st = rep.state.lock();
            if st.link == Link::Online {
                drop(st);
                lost |= !r.pubsub.send_raw(r.hot, &rep.mailbox, bytes);
                continue;
            }
            let Some(from) = st.from else { continue };
            drop(st);
            // What it holds is the stream since `from`, counted against its output limit.
            if super::pubsub::over_output_limit(r.hot, &rep.handle, (end + 1 - from).max(0) as u64) {
                st_clear(rep);
                super::pubsub::close_over_limit(&rep.handle);
                lost = true;
            } else {
                need = need.min(from);
            }
        }
        trim(b, need);
        if lost {
            self.forget_dead(f);
        }
    }

    /// Trims the backlog to its size, keeping what replicas still receiving their snapshot
    /// need (the replication thread's turn: a replica that left lets the memory go even when
    /// nothing is written).
    pub fn trim_backlog(&self) {
        let mut f = self.feed.lock();
        let need = oldest_needed(&f);
        if let Some(b) = f.backlog.as_mut() {
            trim(b, need);
        }
    }

    /// The stream from `from` on, out of the backlog (a replica's part once it goes online),
    /// or None if the backlog no longer holds it.
    pub fn backlog_from(f: &Feed, from: i64) -> Option<Vec<u8>> {
        let b = f.backlog.as_ref()?;
        if from < b.first || from > b.first + b.buf.len() as i64 {
            return None;
        }
        let skip = (from - b.first) as usize;
        let (a, c) = b.buf.as_slices();
        let mut out = Vec::with_capacity(b.buf.len() - skip);
        if skip < a.len() {
            out.extend_from_slice(&a[skip..]);
            out.extend_from_slice(c);
        } else {
            out.extend_from_slice(&c[skip - a.len()..]);
        }
        Some(out)
    }

    fn forget_dead(&self, f: &mut Feed) {
        f.replicas.retain(|r| !r.handle.killed.load(Ordering::Relaxed));
        self.count.store(f.replicas.len(), Ordering::Relaxed);
        if f.replicas.is_empty() {
            self.alone_since.store(super::clock::unix_ms(), Ordering::Relaxed);
        }
    }

    /// The backlog is created when the first replica arrives (Redis's
    /// createReplicationBacklog): from then on writes produce effects.
    /// The caller then refreshes whether writes produce effects (`refresh_effects`).
    pub fn ensure_backlog(&self, cap: usize) {
        let mut f = self.feed.lock();
        if f.backlog.is_none() {
            let off = self.offset();
            f.backlog = Some(Backlog { buf: VecDeque::new(), cap, first: off + 1 });
            // A new backlog starts a new history: the stream selects its database afresh.
            f.db = None;
        }
        drop(f);
        self.on.store(true, Ordering::Release);
    }

    /// CONFIG SET repl-backlog-size: keeps the newest bytes that fit.
    pub fn resize_backlog(&self, cap: usize) {
        if let Some(b) = self.feed.lock().backlog.as_mut() {
            b.cap = cap;
        }
        self.trim_backlog();
    }

    /// A replica left (its connection closed).
    pub fn remove(&self, id: u64) {
        let mut f = self.feed.lock();
        let before = f.replicas.len();
        f.replicas.retain(|r| r.handle.id != id);
        if f.replicas.len() != before {
            self.count.store(f.replicas.len(), Ordering::Relaxed);
            if f.replicas.is_empty() {
                self.alone_since.store(super::clock::unix_ms(), Ordering::Relaxed);
            }
            // What the backlog held for it alone goes with it, as Redis frees the blocks a
            // replica was the last to reference.
            let need = oldest_needed(&f);
            if let Some(b) = f.backlog.as_mut() {
                trim(b, need);
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

    /// REPLICAOF NO ONE: a new history that continues the followed one at `offset`, which
    /// replicas of the old master may still continue (`replid2`).
    pub fn become_master(&self, replid: &Mutex<String, { rank::LEAF }>) {
        // Under the feed lock: the master's command being applied now is either fed before
        // (and in the old history) or not at all (its effects then start the new one).
        let mut f = self.feed.lock();
        self.proxying.store(false, Ordering::Release);
        let offset = self.offset();
        let old = std::mem::replace(&mut *replid.lock(), new_replid());
        *self.replid2.lock() = Some((old, offset + 1));
        // The next write selects its database: what the master's stream selected last is
        // not known to follow.
        f.db = None;
    }

    pub fn wake_thread(&self) {
        let (m, cv) = &self.wake;
        *m.lock() = true;
        cv.notify_one();
    }

    /// The replica at `host`:`port` (its announced or connection address and listening port).
    pub fn find_replica(&self, host: &str, port: u16) -> Option<Arc<Replica>> {
        self.feed.lock().replicas.iter().find(|r| r.ip.eq_ignore_ascii_case(host) && r.port == port).cloned()
    }

    /// Replicas that acknowledged `target` or more. Only one that has ACKed counts: a
    /// replica still receiving its snapshot has none of the data yet, whatever offset the
    /// snapshot began at (Redis counts online replicas by their ACKs).
    pub fn acked(&self, target: i64) -> usize {
        self.feed
            .lock()
            .replicas
            .iter()
            .filter(|r| r.acked.load(Ordering::Relaxed) && r.ack_offset.load(Ordering::Relaxed) >= target)
            .count()
    }

    /// Replicas whose AOF has fsync'd `target` or more (WAITAOF).
    pub fn aof_acked(&self, target: i64) -> usize {
        self.feed
            .lock()
            .replicas
            .iter()
            .filter(|r| r.acked.load(Ordering::Relaxed) && r.aof_ack_offset.load(Ordering::Relaxed) >= target)
            .count()
    }
}

fn st_clear(r: &Replica) {
    r.state.lock().from = None;
}

/// The first byte of the stream a replica still receiving its snapshot needs (MAX: none).
fn oldest_needed(f: &Feed) -> i64 {
    f.replicas.iter().filter_map(|r| r.state.lock().from).min().unwrap_or(i64::MAX)
}

/// Keeps the backlog's newest `cap` bytes, and every byte from `need` on; its memory follows
/// once it is far bigger than what it holds.
fn trim(b: &mut Backlog, need: i64) {
    if b.buf.len() > b.cap {
        let cut = (b.buf.len() - b.cap).min((need - b.first).max(0) as usize);
        if cut > 0 {
            b.buf.drain(..cut);
            b.first += cut as i64;
        }
    }
    let keep = b.buf.len().max(b.cap);
    if b.buf.capacity() > 2 * keep + (64 << 10) {
        b.buf.shrink_to(keep);
    }
}

/// A new random replication ID (40 hex digits).
pub fn new_replid() -> String {
    use rand::Rng;
    let mut r = rand::thread_rng();
    (0..40).map(|_| char::from_digit(r.gen_range(0..16), 16).unwrap()).collect()
}

/// The link's state, as ROLE and INFO name it.
pub const CONNECT: u8 = 0;
pub const CONNECTING: u8 = 1;
pub const SYNC: u8 = 2;
pub const CONNECTED: u8 = 3;
/// Connected, and not yet told how the master will sync (PING to the PSYNC reply).
pub const HANDSHAKE: u8 = 4;

#[derive(Default)]
pub struct Upstream {
    /// The master (host, port) while following one.
    pub master: Mutex<Option<(String, u16)>, { rank::LEAF }>,
    /// Bumped by every REPLICAOF: a link thread of an older generation stops.
    pub generation: AtomicU64,
    pub state: AtomicU8,
    /// The master's replication ID this replica follows, and the stream's offset applied
    /// (`slave_repl_offset`) and read (`slave_read_repl_offset`).
    pub master_replid: Mutex<String, { rank::LEAF }>,
    pub offset: AtomicI64,
    pub read_offset: AtomicI64,
    /// Unix ms of the last byte from the master, and when the link went down (0: up).
    pub last_io_ms: AtomicI64,
    pub down_since_ms: AtomicI64,
    /// A full sync has been completed at least once (its data may serve reads).
    pub synced: AtomicBool,
    /// The database the stream selected last: a continued stream does not select it again.
    pub db: AtomicUsize,
    /// The link's socket, to cut it from another thread (REPLICAOF NO ONE, a new master).
    pub sock: Mutex<Option<TcpStream>, { rank::LEAF }>,
    /// A link thread is to be started (the replication thread has the server's Arc).
    pub start_wanted: AtomicBool,
    /// A snapshot is being loaded from the link beside the old dataset, which goes on
    /// serving (`repl-diskless-load swapdb`; INFO `async_loading`).
    pub async_loading: AtomicBool,
    /// The stream offset this replica's AOF holds fsync'd (FACK), and the (AOF bytes, stream
    /// offset) pairs applied and not yet fsync'd, kept from one link to the next: a partial
    /// resync makes nothing durable, only a full sync's rewrite does (0: none known yet).
    pub aof_fsynced: AtomicI64,
    pub aof_unsynced: Mutex<VecDeque<(u64, i64)>, { rank::LEAF }>,
}

impl Upstream {
    pub fn following(&self) -> bool {
        self.master.lock().is_some()
    }

    pub fn cut(&self) {
        if let Some(s) = self.sock.lock().take() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}
