//! Replication, the master's half as a daemon: PSYNC and SYNC make a client a replica, the
//! replication thread pings replicas, ends WAITs, runs full resyncs (fork-less snapshots sent
//! diskless or through a file) and frees the backlog when nobody follows. The stream, the
//! backlog and the replicas' state are `services::replication`'s (see there for the design).

use crate::exec::blocking::{WaitState, Waiter};
use crate::exec::Server;
use crate::lockorder::Mutex;
use crate::persist::rdbfile;
use crate::services::clients::ClientHandle;
pub use crate::services::replication::*;
use std::io::Write;
use std::sync::atomic::AtomicI64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

pub use crate::services::clients::Handshake;

/// The backlog's capacity as `repl-backlog-size` says now.
pub fn backlog_size(srv: &Server) -> usize {
    backlog_cap(&srv.config.text(crate::config::p::REPL_BACKLOG_SIZE))
}

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
        state: Mutex::new(ReplicaState { link: Link::WaitBgsave, await_ack: false, from: None }),
        ack_offset: AtomicI64::new(0),
        aof_ack_offset: AtomicI64::new(0),
        ack_ms: AtomicI64::new(now),
        acked: Default::default(),
    });
    repl.ensure_backlog(backlog_size(srv));
    srv.refresh_effects();
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
    if f.backlog.is_none() {
        return false;
    }
    let Some(tail) = Replication::backlog_from(&f, off) else {
        crate::log_notice!(
            "Unable to partial resync with replica {}:{} for lack of backlog (Replica request was: {off}).",
            r.ip,
            r.port
        );
        repl.sync_partial_err.fetch_add(1, Ordering::Relaxed);
        return false;
    };
    let line = format!("+CONTINUE {replid}\r\n");
    r.handle.repl_uncounted.fetch_add(line.len() as u64, Ordering::Relaxed);
    reply.extend_from_slice(line.as_bytes());
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
pub fn host_of(addr: &str) -> String {
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
        // An ACK from a replica online (its snapshot loaded).
        if r.link() == Link::Online {
            r.acked.store(true, Ordering::Relaxed);
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
        if !wt.w.waiting() {
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
    // A period from start, not from the epoch: replicas that reconnect to a restarted master
    // before this thread's first turn must not get a PING at once.
    let mut last_ping = srv.now_ms();
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
        crate::daemons::replica_link::maybe_start(&srv);
        let now = srv.now_ms();
        // Not while writes are paused: the stream must not move then (Redis's beforeSleep).
        // A replica's stream is its master's: it adds nothing of its own (PINGs, GETACKs).
        let proxying = repl.proxying.load(Ordering::Acquire);
        if repl.connected() > 0 && !srv.writes_paused() && repl.getack.swap(false, Ordering::AcqRel) && !proxying {
            repl.feed_command(&srv.reach(), &[b"REPLCONF", b"GETACK", b"*"]);
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
        if repl.connected() == 0 || proxying {
            last_ping = now;
        } else if now - last_ping >= period && !srv.writes_paused() {
            last_ping = now;
            repl.feed_command(&srv.reach(), &[b"PING"]);
        }
        update_failover(&srv, now);
        crate::daemons::replica_link::check_timeout(&srv, now);
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
        repl.trim_backlog();
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
    // A replica keeps its backlog (replicas of it continue from there), as Redis's do.
    if ttl == 0
        || since == 0
        || now - since < ttl * 1000
        || repl.proxying.load(Ordering::Acquire)
        || !repl.queue.lock().is_empty()
    {
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

/// Starts a full resync for the queued replicas once `repl-diskless-sync-delay` has let
/// others gather (a disk-based one starts at once), on a thread of its own.
fn start_syncs(srv: &Arc<Server>, now: i64) {
    let repl = &srv.repl;
    let mut q = repl.queue.lock();
    q.retain(|r| !r.handle.killed.load(Ordering::Relaxed));
    if q.is_empty() {
        return;
    }
    let current = repl.current.lock().clone();
    if let Some(cur) = current {
        // The feed's lock comes before the queue's (lock order).
        drop(q);
        if cur.disk {
            join_disk_sync(srv, &cur);
        }
        return;
    }
    if srv.ks.snapshots.running() {
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
    let cur = Arc::new(CurrentSync { disk: !diskless, batch: parking_lot::Mutex::new(batch), ..Default::default() });
    *repl.current.lock() = Some(cur.clone());
    let srv2 = srv.clone();
    let spawned = std::thread::Builder::new().name("repl-sync".into()).spawn(move || {
        full_sync(&srv2, &cur, diskless);
        srv2.repl.current.lock().take_if(|c| Arc::ptr_eq(c, &cur));
    });
    if let Err(e) = spawned {
        crate::log_warning!("Can't start the replicas' snapshot: {e}");
        repl.current.lock().take();
    }
}

/// Replicas that asked for a full sync while a disk-based one makes its file join it, as
/// Redis's attach to the BGSAVE in progress: they get its `+FULLRESYNC` and, from the backlog,
/// the stream since its instant, which waits behind the file. Those that arrive before the
/// instant, or once the backlog no longer reaches back to it, wait for the next sync.
fn join_disk_sync(srv: &Server, cur: &CurrentSync) {
    if cur.sending.load(Ordering::Acquire) {
        return;
    }
    let Some((replid, off)) = cur.at.lock().clone() else { return };
    let mut f = srv.repl.feed.lock();
    let Some(b) = f.backlog.as_ref() else { return };
    // The first byte a replica at `off` needs is `off + 1`, the backlog's `first` its first.
    if off + 1 < b.first || off + 1 > b.first + b.buf.len() as i64 {
        return;
    }
    let mut q = srv.repl.queue.lock();
    q.retain(|r| !r.handle.killed.load(Ordering::Relaxed));
    let mut batch = cur.batch.lock();
    if cur.abandoned.load(Ordering::Acquire) {
        return;
    }
    for r in q.drain(..) {
        crate::log_notice!("Waiting for end of BGSAVE for SYNC");
        r.state.lock().from = Some(off + 1);
        r.ack_offset.store(off, Ordering::Relaxed);
        if r.psync {
            let line = format!("+FULLRESYNC {replid} {off}\r\n");
            r.handle.repl_uncounted.fetch_add(line.len() as u64, Ordering::Relaxed);
            srv.pubsub.send_raw(&srv.config.hot, &r.mailbox, line.as_bytes());
        }
        f.replicas.push(r.clone());
        batch.push(r);
    }
    srv.repl.count.store(f.replicas.len(), Ordering::Relaxed);
    srv.repl.alone_since.store(0, Ordering::Relaxed);
}

/// What the snapshot does at its instant: every shard is locked (`quiesce`), so the stream
/// so far is exactly what the snapshot holds; the replicas join the stream there.
struct SyncHooks<'a> {
    srv: &'a Server,
    batch: &'a [Arc<Replica>],
    cur: &'a CurrentSync,
    mark: Option<[u8; 40]>,
    /// (replication ID, offset, stream database) at the instant.
    at: Option<(String, i64, usize)>,
    /// The transfer child writes the replicas' heads: they are left here (one per replica of
    /// the batch) instead of going to the replicas' mailboxes.
    heads: Option<Arc<HeadsOut>>,
}

/// Where the replicas' heads go at the instant: the transfer child's input (a second handle
/// on it), in the order of its sockets — at once, so each replica has its `+FULLRESYNC` as
/// soon as the snapshot begins, however slowly the snapshot then comes.
struct HeadsOut {
    pipe: std::fs::File,
    /// The batch index of each of the child's sockets.
    order: Vec<usize>,
    /// The frame's length (counted in the trailer).
    written: std::sync::atomic::AtomicU64,
}

impl rdbfile::SnapshotHooks for SyncHooks<'_> {
    fn header(&mut self, _: &crate::engine::Keyspace) -> std::io::Result<rdbfile::Header<'static>> {
        Ok(crate::daemons::persistence::header(self.srv, false))
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
        // A master's stream after the instant starts with a SELECT (Redis resets slaveseldb);
        // a replica's is its master's, whose database the snapshot records.
        let stream_db = if repl.proxying.load(Ordering::Acquire) { f.stream_db } else { 0 };
        self.at = Some((replid.clone(), off, stream_db));
        *self.cur.at.lock() = Some((replid.clone(), off));
        f.db = None;
        let mut heads = Vec::new();
        for r in self.batch {
            if r.handle.killed.load(Ordering::Relaxed) {
                heads.push(Vec::new());
                continue;
            }
            let mut head = Vec::new();
            if r.psync {
                let line = format!("+FULLRESYNC {replid} {off}\r\n");
                // Not counted as the stream (sent by the worker; the child's sums leave it out).
                if self.heads.is_none() {
                    r.handle.repl_uncounted.fetch_add(line.len() as u64, Ordering::Relaxed);
                }
                head.extend_from_slice(line.as_bytes());
            }
            if let Some(mark) = &self.mark {
                head.extend_from_slice(b"$EOF:");
                head.extend_from_slice(mark);
                head.extend_from_slice(b"\r\n");
            }
            r.ack_offset.store(off, Ordering::Relaxed);
            r.state.lock().from = Some(off + 1);
            if self.heads.is_none() && !head.is_empty() {
                srv.pubsub.send_raw(&srv.config.hot, &r.mailbox, &head);
            }
            heads.push(head);
            f.replicas.push(r.clone());
        }
        if let Some(h) = &self.heads {
            let mut frame = Vec::new();
            for &b in &h.order {
                let head = heads.get(b).map(Vec::as_slice).unwrap_or_default();
                frame.extend_from_slice(&(head.len() as u32).to_le_bytes());
                frame.extend_from_slice(head);
            }
            // A failure shows at the stream's next write, on the same pipe.
            if (&h.pipe).write_all(&frame).is_ok() {
                h.written.store(frame.len() as u64, Ordering::Release);
            }
        }
        repl.count.store(f.replicas.len(), Ordering::Relaxed);
        repl.alone_since.store(0, Ordering::Relaxed);
    }

    fn instant_aux(&mut self) -> Vec<(&'static str, String)> {
        match &self.at {
            Some((id, off, db)) => {
                vec![("repl-stream-db", db.to_string()), ("repl-id", id.clone()), ("repl-offset", off.to_string())]
            }
            None => Vec::new(),
        }
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
    batch.iter().filter(|r| !gone(r))
}

/// Killed, or its connection closed.
fn gone(r: &Replica) -> bool {
    r.handle.killed.load(Ordering::Relaxed) || *r.handle.closed.lock()
}

/// Pushes `buf` to the replicas, waiting first while any of them has more than
/// `IN_FLIGHT` bytes not yet written to its socket. Err once none is left.
/// A replica that reads nothing of it for `repl-timeout` is dropped, so one stopped replica
/// does not hold the snapshot (and the others) for ever — Redis's "Disconnecting timedout
/// replica (full sync)".
fn send_all(srv: &Server, batch: &[Arc<Replica>], buf: &[u8]) -> std::io::Result<()> {
    let timeout = srv.config.text(crate::config::p::REPL_TIMEOUT).parse::<i64>().unwrap_or(60).max(1) * 1000;
    // Per replica: the output it had pending when we last saw it change, and when. A worker
    // moves a mailbox's bytes to its socket buffer before it counts them there, so a reading
    // replica's figure can dip for a moment: any change counts as progress, only a figure
    // that stays the same for `repl-timeout` as a stall.
    let mut read = vec![(usize::MAX, 0i64); batch.len()];
    loop {
        if live(batch).next().is_none() || srv.shutting_down.load(Ordering::Relaxed) {
            return Err(std::io::Error::other("no replica left"));
        }
        let now = srv.now_ms();
        let mut behind = false;
        for (r, (seen, since)) in batch.iter().zip(read.iter_mut()) {
            let pending = r.mailbox.len() + r.handle.out_pending.load(Ordering::Relaxed) as usize;
            if r.handle.killed.load(Ordering::Relaxed) || pending <= IN_FLIGHT {
                continue;
            }
            behind = true;
            if pending != *seen {
                (*seen, *since) = (pending, now);
            } else if now - *since > timeout {
                crate::log_warning!("Disconnecting timedout replica (full sync): {}:{}", r.ip, r.port);
                r.handle.kill();
            }
        }
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
fn full_sync(srv: &Server, cur: &CurrentSync, diskless: bool) {
    let batch = cur.batch.lock().clone();
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
    *srv.repl.snapshot.lock() = Some((srv.now_ms(), progress.clone()));
    let sent = loop {
        if live(&batch).next().is_none() {
            break Err("no replica left".to_string());
        }
        let mut hooks = SyncHooks { srv, batch: &batch, cur, mark, at: None, heads: None };
        // TLS replicas' bytes must go through their workers' TLS sessions: sent from here.
        let child = diskless && live(&batch).all(|r| !r.handle.tls);
        let r = if child {
            through_child(srv, cur, &batch, &mut hooks, opts, form, &progress)
        } else if diskless {
            rdbfile::write_snapshot(&srv.ks, Fanout { srv, batch: &batch }, &mut hooks, opts, form, &progress)
                .and_then(|_| send_all(srv, &batch, mark.as_ref().unwrap()))
        } else {
            to_file(srv, cur, &mut hooks, opts, form, &progress)
        };
        match r {
            Err(e) if e.to_string() == rdbfile::ERR_IN_PROGRESS => std::thread::sleep(Duration::from_millis(20)),
            r => break r.map_err(|e| e.to_string()),
        }
    };
    // Made (a file's is sent after this, as Redis's parent sends what its child wrote).
    clear_snapshot(srv, &progress);
    // With the replicas that joined a disk-based sync.
    let batch = cur.batch.lock().clone();
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

/// A diskless full sync sent by the transfer child (`persist::transfer`): the snapshot (and
/// each replica's head, at its instant) goes down the child's input, and the child writes it
/// to the replicas' sockets. Meanwhile `watch_transfer` reads what the child reports and
/// drops replicas as Redis's parent does. Ok once the child has sent the whole stream to
/// every replica still connected.
fn through_child(
    srv: &Server,
    cur: &CurrentSync,
    batch: &[Arc<Replica>],
    hooks: &mut SyncHooks<'_>,
    opts: crate::engine::rdb::save::SaveOpts,
    form: rdbfile::Form,
    progress: &Arc<rdbfile::Progress>,
) -> std::io::Result<()> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    // Nothing of the server's may still be on its way to a socket the child writes to (the
    // newlines a waiting replica got).
    let since = srv.now_ms();
    let pending = |r: &Replica| r.mailbox.len() + r.handle.out_pending.load(Ordering::Relaxed) as usize;
    while live(batch).any(|r| pending(r) > 0) {
        if srv.now_ms() - since > 5000 {
            live(batch).filter(|r| pending(r) > 0).for_each(|r| {
                r.handle.kill();
            });
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // Copies of the sockets, taken while each connection is surely open; the child gets its
    // own, and these let the watcher shut a dropped replica's socket down under the child.
    let mut socks: Vec<(usize, OwnedFd)> = Vec::new();
    for (i, r) in batch.iter().enumerate() {
        if r.handle.killed.load(Ordering::Relaxed) {
            continue;
        }
        let closed = r.handle.closed.lock();
        if *closed {
            continue;
        }
        // SAFETY: the connection's descriptor, open while `closed` is false and held.
        let d = unsafe { libc::fcntl(r.handle.fd, libc::F_DUPFD_CLOEXEC, 0) };
        if d >= 0 {
            // SAFETY: the copy is ours alone.
            socks.push((i, unsafe { OwnedFd::from_raw_fd(d) }));
        }
    }
    if socks.is_empty() {
        return Err(std::io::Error::other("no replica left"));
    }
    let raw: Vec<i32> = socks.iter().map(|(_, f)| f.as_raw_fd()).collect();
    let t = crate::persist::transfer::spawn(&raw).inspect_err(|e| {
        crate::log_warning!("Can't save in background: fork: {e}");
    })?;
    let pid = t.pid;
    crate::daemons::persistence::count_child(srv, pid, t.spawn_us);
    crate::log_notice!("Background RDB transfer started by pid {pid}");
    let heads = Arc::new(HeadsOut {
        pipe: t.input.try_clone()?,
        order: socks.iter().map(|(i, _)| *i).collect(),
        written: Default::default(),
    });
    hooks.heads = Some(heads.clone());
    let done = std::sync::atomic::AtomicBool::new(false);
    let reports = t.reports;
    let (r, status, sent) = std::thread::scope(|s| {
        let watcher = s.spawn(|| watch_transfer(srv, batch, &socks, reports, pid, &done, progress));
        let mut sink = ToChild { out: Some(t.input), written: 0 };
        let r = (|| {
            // Redis's child buffers its pipe writes as much (16 KB).
            let w = std::io::BufWriter::with_capacity(16 << 10, &mut sink);
            let (_, w) = rdbfile::write_snapshot(&srv.ks, w, hooks, opts, form, progress)?;
            let sink = w.into_inner().map_err(|e| e.into_error())?;
            sink.write_all(hooks.mark.as_ref().expect("a diskless sync has its mark"))?;
            sink.trailer(heads.written.load(Ordering::Acquire))
        })();
        // Every handle on the child's input goes, so it sees the input end.
        hooks.heads = None;
        done.store(true, Ordering::Release);
        if r.is_err() {
            // SAFETY: a signal to our own child, not reaped yet.
            unsafe { libc::kill(pid as i32, libc::SIGUSR1) };
        }
        // The input closes: a child without the trailer exits at once.
        sink.out = None;
        drop(heads);
        let mut status = 0i32;
        // SAFETY: reaps our own child.
        let reaped = unsafe { libc::waitpid(pid as i32, &mut status, 0) } == pid as i32;
        (r, reaped.then_some(status), watcher.join().unwrap_or_default())
    });
    // What the child wrote is replication output (INFO `total_net_repl_output_bytes`), as
    // Redis's parent counts what it writes from its child's pipe — the `+FULLRESYNC` line apart.
    let line = cur.at.lock().as_ref().map_or(0, |(id, off)| format!("+FULLRESYNC {id} {off}\r\n").len() as u64);
    let counted: u64 =
        socks.iter().zip(&sent).map(|((b, _), n)| n.saturating_sub(if batch[*b].psync { line } else { 0 })).sum();
    crate::services::stats::bump(&srv.stats.background().counters.net_repl_output_bytes, counted);
    match status {
        Some(st) if libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0 && r.is_ok() => {
            crate::log_notice!(
                "Diskless rdb transfer, done reading from pipe, {} replicas still up.",
                live(batch).count()
            );
            crate::log_notice!("Background RDB transfer terminated with success");
            Ok(())
        }
        Some(st) if libc::WIFSIGNALED(st) => {
            let sig = libc::WTERMSIG(st);
            crate::log_warning!("Background transfer terminated by signal {sig}");
            Err(r
                .err()
                .unwrap_or_else(|| std::io::Error::other(format!("the transfer child was killed by signal {sig}"))))
        }
        _ => {
            crate::log_warning!("Background transfer error");
            Err(r.err().unwrap_or_else(|| std::io::Error::other("the transfer child failed")))
        }
    }
}

/// The transfer child's input, after the heads (`HeadsOut`): the stream, counted for the
/// trailer.
struct ToChild {
    out: Option<std::fs::File>,
    written: u64,
}

impl ToChild {
    fn pipe(&mut self) -> std::io::Result<&mut std::fs::File> {
        self.out.as_mut().ok_or_else(|| std::io::Error::from(std::io::ErrorKind::BrokenPipe))
    }

    /// The stream is whole: its trailer (as `persist::child`'s), counting the heads' frame.
    fn trailer(&mut self, heads: u64) -> std::io::Result<()> {
        let mut t = Vec::with_capacity(crate::persist::child::TRAILER);
        t.extend_from_slice(crate::persist::child::MAGIC);
        t.extend_from_slice(&(heads + self.written).to_le_bytes());
        self.pipe()?.write_all(&t)
    }
}

impl Write for ToChild {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.pipe()?.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Beside a transfer child, until it exits: a replica it reports dropped is closed; one that
/// left, or reads nothing for `repl-timeout`, has its socket shut down under the child (which
/// then drops it); with none left the child is killed, as Redis's parent kills its child.
/// A child that dies early stops the snapshot.
fn watch_transfer(
    srv: &Server,
    batch: &[Arc<Replica>],
    socks: &[(usize, std::os::fd::OwnedFd)],
    reports: std::fs::File,
    pid: u32,
    done: &std::sync::atomic::AtomicBool,
    progress: &rdbfile::Progress,
) -> Vec<u64> {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    let mut reports = reports;
    // What the child wrote to each socket, as it reports when it drops one or ends.
    let mut sent = vec![0u64; socks.len()];
    let mut text = Vec::new();
    // Per socket: shut down by us, and its unsent bytes when they last changed, and when.
    let mut shut = vec![false; socks.len()];
    let mut queued = vec![(-1i32, srv.now_ms()); socks.len()];
    let mut killed_child = false;
    loop {
        let mut pfd = libc::pollfd { fd: reports.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: poll on one pollfd we own.
        let ready = unsafe { libc::poll(&mut pfd, 1, 100) } > 0;
        if ready {
            let mut buf = [0u8; 4096];
            match reports.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => text.extend_from_slice(&buf[..n]),
            }
            while let Some(nl) = text.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = text.drain(..=nl).collect();
                let line = String::from_utf8_lossy(&line);
                let mut it = line.trim_end().splitn(4, ' ');
                let (what, k, n) = (it.next(), it.next().and_then(|k| k.parse::<usize>().ok()), it.next());
                let (Some(k), Some(n)) = (k.filter(|k| *k < socks.len()), n.and_then(|n| n.parse::<u64>().ok())) else {
                    continue;
                };
                sent[k] = n;
                if what == Some("drop") {
                    if let Some((b, _)) = socks.get(k) {
                        let r = &batch[*b];
                        if !gone(r) {
                            crate::log_warning!(
                                "Diskless rdb transfer, write error sending DB to replica: {}",
                                it.next().unwrap_or("")
                            );
                            r.handle.kill();
                        }
                        shut[k] = true;
                    }
                }
            }
        }
        let now = srv.now_ms();
        let timeout = srv.config.text(crate::config::p::REPL_TIMEOUT).parse::<i64>().unwrap_or(60).max(1) * 1000;
        for (k, (b, fd)) in socks.iter().enumerate() {
            if shut[k] {
                continue;
            }
            let r = &batch[*b];
            let mut left = 0i32;
            // SAFETY: SIOCOUTQ into an int we own, on our copy of the socket.
            unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCOUTQ, &mut left) };
            if !gone(r) {
                if left == 0 || left != queued[k].0 {
                    queued[k] = (left, now);
                    continue;
                }
                if now - queued[k].1 <= timeout {
                    continue;
                }
                crate::log_warning!("Disconnecting timedout replica (full sync): {}:{}", r.ip, r.port);
                r.handle.kill();
            }
            // SAFETY: our copy of the socket: shutting it down makes the child's writes fail.
            unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_RDWR) };
            shut[k] = true;
        }
        if !killed_child && !done.load(Ordering::Acquire) && live(batch).next().is_none() {
            crate::log_warning!("Diskless rdb transfer, last replica dropped, killing fork child.");
            // SAFETY: a signal to our own child, not reaped yet (the writer reaps it).
            unsafe { libc::kill(pid as i32, libc::SIGUSR1) };
            progress.cancel.store(true, Ordering::Relaxed);
            killed_child = true;
        }
    }
    // The child is gone (its reports ended): a snapshot still being written stops.
    if !done.load(Ordering::Acquire) {
        progress.cancel.store(true, Ordering::Relaxed);
    }
    sent
}

/// This sync's snapshot is made: INFO stops reporting it — unless another sync's has begun
/// since (a disk-based sync sends its file after its snapshot, and the next may start then).
fn clear_snapshot(srv: &Server, progress: &Arc<rdbfile::Progress>) {
    let mut s = srv.repl.snapshot.lock();
    if s.as_ref().is_some_and(|(_, p)| Arc::ptr_eq(p, progress)) {
        *s = None;
    }
}

/// The replica has its snapshot: what piled up goes first, then the stream as it happens,
/// in order (both under the feed lock).
fn put_online(srv: &Server, r: &Replica) {
    let f = srv.repl.feed.lock();
    let mut st = r.state.lock();
    let from = st.from.take();
    st.link = Link::Online;
    st.await_ack = false;
    drop(st);
    let Some(from) = from else { return };
    match Replication::backlog_from(&f, from) {
        Some(pending) if !pending.is_empty() => {
            srv.pubsub.send_raw(&srv.config.hot, &r.mailbox, &pending);
        }
        Some(_) => {}
        // Kept for it, unless the backlog was started afresh meanwhile: it must sync again.
        None => {
            r.handle.kill();
        }
    }
}

/// A disk-based full sync, as Redis's: a background save of the RDB file (`dbfilename`, by
/// the file child, `persist::child`), then the file to the replicas as `$<length>` and the
/// bytes. If every replica leaves before the file is made, the save is abandoned — unless
/// save points are set, which make it a save worth finishing (Redis's rule).
fn to_file(
    srv: &Server,
    cur: &CurrentSync,
    hooks: &mut SyncHooks<'_>,
    opts: crate::engine::rdb::save::SaveOpts,
    form: rdbfile::Form,
    progress: &Arc<rdbfile::Progress>,
) -> std::io::Result<()> {
    use crate::daemons::persistence;
    let path = persistence::rdb_path(srv);
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new(".")).to_owned();
    let autosync = srv.config.flag(crate::config::p::RDB_SAVE_INCREMENTAL_FSYNC);
    let start_dirty = persistence::dirty(srv);
    let kind = crate::persist::child::Kind::Rdb;
    let child = persistence::start_child(srv, kind, &dir, &path, autosync, progress).inspect_err(|e| {
        crate::log_warning!("Can't save in background: fork: {e}");
    })?;
    let pid = child.pid;
    crate::log_notice!("Background saving started by pid {pid}");
    // The child's own file, opened as soon as it exists: what is sent is this snapshot even
    // if another save renames its file over `dbfilename` before the sending starts.
    let since = std::time::Instant::now();
    let mut f = loop {
        match std::fs::File::open(&child.temp) {
            Ok(f) => break f,
            Err(e) if progress.cancel.load(Ordering::Relaxed) || since.elapsed() > Duration::from_secs(5) => {
                child.finish(false);
                let _ = srv.persistence.child_pid.compare_exchange(pid, 0, Ordering::AcqRel, Ordering::Relaxed);
                return Err(e);
            }
            Err(_) => std::thread::sleep(Duration::from_millis(1)),
        }
    };
    let done = std::sync::atomic::AtomicBool::new(false);
    let (r, ended) = std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Acquire) {
                // Decided under the batch's lock, which a replica joining takes too: one that
                // joins is counted here, one that comes after waits for the next sync.
                let batch = cur.batch.lock();
                if live(&batch).next().is_none() && srv.config.text(crate::config::p::SAVE).is_empty() {
                    cur.abandoned.store(true, Ordering::Release);
                    progress.cancel.store(true, Ordering::Relaxed);
                    return;
                }
                drop(batch);
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        let out = rdbfile::save_through_child(&srv.ks, child, hooks, opts, form, progress);
        done.store(true, Ordering::Release);
        out
    });
    let _ = srv.persistence.child_pid.compare_exchange(pid, 0, Ordering::AcqRel, Ordering::Relaxed);
    // Another snapshot was being made: the caller tries again.
    if r.as_ref().is_err_and(|e| e.to_string() == rdbfile::ERR_IN_PROGRESS) {
        return r.map(|_| ());
    }
    persistence::child_outcome(r, ended, "Background saving").inspect_err(|e| {
        // A failed save is a failed BGSAVE (`rdb_last_bgsave_status`), unless called off.
        if e.to_string() != rdbfile::CANCELLED {
            srv.persistence.set_failed(true);
        }
    })?;
    persistence::saved(srv, start_dirty);
    crate::log_notice!("Background saving terminated with success");
    // The file is made; now it is sent (INFO's `send_bulk`, as Redis's replicas show while
    // the parent sends its child's file; a diskless transfer shows `wait_bgsave` throughout).
    clear_snapshot(srv, progress);
    // No replica joins from here on, and the next sync may begin.
    cur.sending.store(true, Ordering::Release);
    srv.repl.current.lock().take_if(|c| std::ptr::eq(&**c, cur));
    let batch = &cur.batch.lock().clone()[..];
    for r in batch {
        r.state.lock().link = Link::SendBulk;
    }
    let len = f.metadata()?.len();
    send_all(srv, batch, format!("${len}\r\n").as_bytes())?;
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let n = std::io::Read::read(&mut f, &mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        send_all(srv, batch, &chunk[..n])?;
    }
}

/// FAILOVER, once checked: writes pause (until the failover ends) while the replication
/// thread waits for the target — or any replica — to acknowledge the whole stream.
pub fn start_failover(srv: &Server, target: Option<(String, u16)>, timeout_ms: i64, force: bool) {
    let _step = srv.repl.failover_step.lock();
    let now = srv.now_ms();
    match &target {
        Some((h, p)) => crate::log_notice!("FAILOVER requested to {h}:{p}."),
        None => crate::log_notice!("FAILOVER requested to any replica."),
    }
    *srv.repl.failover.lock() = Failover {
        state: FailoverState::WaitForSync,
        target,
        end_ms: if timeout_ms > 0 { now.saturating_add(timeout_ms) } else { 0 },
        force,
    };
    srv.pause(crate::exec::PauseBy::Failover, now, i64::MAX, false);
    srv.repl.wake_thread();
}

/// The failover is over (done, or given up): writes resume.
pub fn clear_failover(srv: &Server) {
    *srv.repl.failover.lock() = Failover::default();
    srv.unpause(crate::exec::PauseBy::Failover);
}

/// Gives the failover up (FAILOVER ABORT, its timeout, a target that refused): a server that
/// already follows the target is a master again (with a new history that continues its
/// old one, so its replicas continue too), as Redis's abortFailover.
pub fn abort_failover(srv: &Server, why: &str) {
    let _step = srv.repl.failover_step.lock();
    let f = srv.repl.failover.lock().clone();
    if f.state == FailoverState::None {
        return;
    }
    match &f.target {
        Some((h, p)) => crate::log_notice!("FAILOVER to {h}:{p} aborted: {why}"),
        None => crate::log_notice!("FAILOVER to any replica aborted: {why}"),
    }
    if f.state == FailoverState::InProgress {
        crate::daemons::replica_link::unfollow(srv);
    }
    clear_failover(srv);
}

/// The replication thread's turn at a failover waiting for its replica (Redis's
/// updateFailoverStatus): on time out it fails over anyway (FORCE) or gives up; once the
/// target (or any replica) has acknowledged the whole stream, this server follows it and the
/// link asks it to take over.
fn update_failover(srv: &Server, now: i64) {
    let _step = srv.repl.failover_step.lock();
    let f = srv.repl.failover.lock().clone();
    if f.state != FailoverState::WaitForSync {
        return;
    }
    if f.end_ms != 0 && f.end_ms <= now {
        match (&f.target, f.force) {
            (Some((h, p)), true) => {
                crate::log_notice!("FAILOVER to {h}:{p} time out exceeded, failing over.");
                srv.repl.failover.lock().state = FailoverState::InProgress;
                crate::daemons::replica_link::follow(srv, h, *p);
            }
            _ => {
                drop(_step);
                abort_failover(srv, "Replica never caught up before timeout");
            }
        }
        return;
    }
    let offset = srv.repl.offset();
    // A replica online that has acknowledged the whole stream (an ACK, not the offset its
    // snapshot began at: one still loading is no candidate).
    let synced = |r: &Arc<Replica>| {
        r.link() == Link::Online && r.acked.load(Ordering::Relaxed) && r.ack_offset.load(Ordering::Acquire) == offset
    };
    let caught_up = match &f.target {
        Some((h, p)) => srv.repl.find_replica(h, *p).filter(synced),
        None => srv.repl.replicas().into_iter().find(synced),
    };
    let Some(r) = caught_up else { return };
    let (host, port) = (r.ip.clone(), r.port);
    {
        let mut g = srv.repl.failover.lock();
        g.state = FailoverState::InProgress;
        g.target = Some((host.clone(), port));
    }
    crate::log_notice!("Failover target {host}:{port} is synced, failing over.");
    crate::daemons::replica_link::follow(srv, &host, port);
}
