//! Replication, the replica's half (Redis's replication.c, replica half): REPLICAOF host
//! port makes this server follow a master — Atoll or Redis, which speak the same protocol.
//!
//! A link thread connects, does the handshake (PING, AUTH with `masteruser`/`masterauth`,
//! REPLCONF listening-port and capa, PSYNC), and then either:
//! * **a full resync** (`+FULLRESYNC replid offset`): the RDB arrives (`$<length>` or
//!   diskless `$EOF:<mark>`), is written to `dbfilename`, and replaces the dataset with
//!   every shard locked, while other clients get `-LOADING`; or
//! * **a partial one** (`+CONTINUE`): the master sends what this replica missed.
//!
//! Then the stream: each command runs as the master's client (never answered; nothing
//! expires under it — the master's DELs do that), and `offset` counts the bytes applied.
//! `REPLCONF GETACK` is answered at once; an ACK also goes out every second. A lost link
//! reconnects and asks to continue from `offset`.
//!
//! While following a master: writes from other clients get `-READONLY` (with
//! `replica-read-only`, the default), keys past their time read as missing but are not
//! deleted, the server does not evict (`replica-ignore-maxmemory`), and it does not feed
//! replicas of its own (chaining is not supported yet: PSYNC is refused).

/// The Valkey release whose RDB files Atoll reads whole (`REPLCONF version`).
const READS_RDB_OF_VALKEY: &str = "9.1.2";
use crate::daemons::upstream_conn::Writer;
use crate::exec::Server;
use crate::lockorder::{rank, Mutex};
use crate::persist::aof::{CommandReader, Next};
use crate::services::gates::{GATE_LOADING, GATE_READONLY, GATE_REPLICA, GATE_STALE};
use crate::services::replication::FailoverState;
pub use crate::services::replication::{Upstream, CONNECT, CONNECTED, CONNECTING, HANDSHAKE, SYNC};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The link's socket as its reader sees it: once the handshake is over, what it reads from
/// the master (the snapshot and the stream) counts as replication input (INFO
/// `total_net_repl_input_bytes`), apart from clients' `total_net_input_bytes`, as in Redis.
/// Every read also says when the master was last heard from (`Upstream::last_io_ms`, a
/// keepalive newline included), which the replication thread's timeout check goes by.
struct Counted<'a> {
    sock: crate::daemons::upstream_conn::Reader,
    to: Option<&'a AtomicU64>,
    heard: &'a AtomicI64,
}

impl Read for Counted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.sock.read(buf)?;
        if let Some(c) = self.to {
            c.fetch_add(n as u64, Ordering::Relaxed);
        }
        if n > 0 {
            self.heard.store(crate::services::clock::unix_ms(), Ordering::Relaxed);
        }
        Ok(n)
    }
}

/// Starts counting the link's input as replication bytes, the bytes already read ahead
/// included.
fn count_from_here<'a>(r: &mut BufReader<Counted<'a>>, to: &'a AtomicU64) {
    to.fetch_add(r.buffer().len() as u64, Ordering::Relaxed);
    r.get_mut().to = Some(to);
}

/// Why the link to the master broke or a sync failed: logged, and the link reconnects.
#[derive(Debug)]
enum LinkError {
    /// The connection or a local file failed.
    Io(std::io::Error),
    /// The master said something this replica cannot go on from, or went away.
    Master(String),
    /// What the master sent did not load.
    Load(crate::persist::PersistError),
}

impl std::fmt::Display for LinkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LinkError::Io(e) => write!(f, "{e}"),
            LinkError::Master(m) => f.write_str(m),
            LinkError::Load(e) => write!(f, "{e}"),
        }
    }
}

/// REPLICAOF host port: follows that master from now on. Ok(false): already following it.
pub fn follow(srv: &Server, host: &str, port: u16) -> bool {
    follow_as(srv, host, port, true)
}

/// `replicaof` in the configuration at start-up: as REPLICAOF, except that a server that was
/// never a master has no history of its own to offer: it asks `PSYNC ? -1` unless its RDB
/// restored one (Redis sets its master from the configuration without caching itself).
pub fn follow_configured(srv: &Server, host: &str, port: u16) -> bool {
    follow_as(srv, host, port, false)
}

fn follow_as(srv: &Server, host: &str, port: u16, offer_own_history: bool) -> bool {
    let up = &srv.repl.upstream;
    let was_master = {
        let mut m = up.master.lock();
        if m.as_ref().is_some_and(|(h, p)| h.eq_ignore_ascii_case(host) && *p == port) {
            return false;
        }
        m.replace((host.to_string(), port)).is_none()
    };
    // Writes are refused from here on (a write already past that check is counted in the
    // history below, or marks it `stray_write`).
    srv.persistence.set_gate(GATE_REPLICA, true);
    srv.persistence.set_gate(GATE_READONLY, srv.config.flag(crate::config::p::REPLICA_READ_ONLY));
    if was_master && !offer_own_history {
        // Its stream is its master's from here; the history comes with the first sync, or
        // came from the RDB (`persistence::restore_history`).
        srv.repl.start_proxying();
    } else if was_master {
        // A master turned replica offers its own history to the new master (PSYNC with its
        // replication ID and offset), which continues it when it is the same (PSYNC2: a
        // failed-over master that rejoins), as Redis's replicationCacheMasterUsingMyself.
        let off = srv.repl.start_proxying();
        let own = srv.replid.lock().clone();
        *up.master_replid.lock() = own;
        up.offset.store(off, Ordering::Release);
        up.read_offset.store(off, Ordering::Release);
        up.synced.store(true, Ordering::Release);
        up.db.store(0, Ordering::Relaxed);
    }
    // CONFIG GET replicaof and CONFIG REWRITE show the master followed now (Sentinel rewrites
    // a replica's configuration after REPLICAOF).
    srv.config.set_internal("replicaof", &format!("{host} {port}"));
    up.generation.fetch_add(1, Ordering::AcqRel);
    up.cut();
    set_state(srv, CONNECT);
    up.down_since_ms.store(srv.now_ms(), Ordering::Relaxed);
    // Our replicas stay: they continue with whatever continues this server's history (a
    // partial resync with the new master streams on at the same offsets). A new history — a
    // full sync about to load, or a new replication ID — disconnects them then, as Redis 7.2
    // does (not at REPLICAOF: Redis's "Don't disconnect with replicas before loading").
    unblock_all(srv);
    oom_class(srv, true);
    crate::log_notice!("Connecting to MASTER {host}:{port}");
    up.start_wanted.store(true, Ordering::Release);
    srv.repl.wake();
    true
}

/// Clients blocked in a command (BLPOP, WAIT …, not CLIENT PAUSE's) get an error and are
/// closed: what they wait for may never come on a replica (Redis's
/// disconnectAllBlockedClients).
fn unblock_all(srv: &Server) {
    let err = b"-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)\r\n";
    for h in srv.clients.snapshot() {
        let Some(w) = h.waiter.lock().clone() else { continue };
        if w.postponed() {
            continue;
        }
        if w.finish(crate::exec::blocking::WaitState::Served(err.to_vec())) {
            srv.blocked_clients.fetch_sub(1, Ordering::Relaxed);
            h.quitting.store(true, Ordering::Relaxed);
        }
    }
}

/// REPLICAOF NO ONE: stops following; this server is a master again, with a new history
/// that continues the one it followed (replid2 and second_repl_offset say where).
pub fn unfollow(srv: &Server) {
    let up = &srv.repl.upstream;
    if up.master.lock().take().is_none() {
        return;
    }
    up.generation.fetch_add(1, Ordering::AcqRel);
    up.cut();
    srv.config.set_internal("replicaof", "");
    // The history continues from what was fed of the master's stream (a transaction still
    // being queued is dropped, as Redis drops it).
    srv.repl.become_master(&srv.replid);
    srv.persistence.set_gate(GATE_REPLICA, false);
    srv.persistence.set_gate(GATE_READONLY, false);
    srv.persistence.set_gate(GATE_STALE, false);
    // Replicas of this one reconnect to learn its new replication ID; they continue from
    // the backlog (the old ID is `replid2`), as Redis's do.
    srv.repl.disconnect_replicas();
    oom_class(srv, false);
    crate::log_notice!("MASTER MODE enabled");
}

/// The OOM killer's class for the role (`oom-score-adj-values`: a replica's is the second).
fn oom_class(srv: &Server, replica: bool) {
    crate::config::process::set_replica(
        replica,
        &srv.config.text(crate::config::p::OOM_SCORE_ADJ),
        &srv.config.text(crate::config::p::OOM_SCORE_ADJ_VALUES),
    );
}

/// The link's state, and the `-MASTERDOWN` gate that follows from it.
fn set_state(srv: &Server, state: u8) {
    srv.repl.upstream.state.store(state, Ordering::Relaxed);
    stale_changed(srv);
}

/// The link's state or `replica-serve-stale-data` changed.
pub fn stale_changed(srv: &Server) {
    let up = &srv.repl.upstream;
    let down = up.following() && up.state.load(Ordering::Relaxed) != CONNECTED;
    srv.persistence.set_gate(GATE_STALE, down && !srv.config.flag(crate::config::p::REPLICA_SERVE_STALE_DATA));
}

/// `replica-read-only` changed.
pub fn read_only_changed(srv: &Server) {
    if srv.repl.upstream.following() {
        srv.persistence.set_gate(GATE_READONLY, srv.config.flag(crate::config::p::REPLICA_READ_ONLY));
    }
}

/// Called by the replication thread: starts the link thread REPLICAOF asked for.
pub fn maybe_start(srv: &Arc<Server>) {
    let up = &srv.repl.upstream;
    if !up.start_wanted.swap(false, Ordering::AcqRel) {
        return;
    }
    let Some((host, port)) = up.master.lock().clone() else { return };
    let gen = up.generation.load(Ordering::Acquire);
    let srv2 = srv.clone();
    let r = std::thread::Builder::new().name("repl-link".into()).spawn(move || run_link(&srv2, &host, port, gen));
    if let Err(e) = r {
        crate::log_warning!("Can't start the replication link: {e}");
    }
}

fn current(srv: &Server, gen: u64) -> bool {
    srv.repl.upstream.generation.load(Ordering::Acquire) == gen && !srv.shutting_down.load(Ordering::Relaxed)
}

/// The link thread: connects, syncs and applies the stream until REPLICAOF changes; a lost
/// link is retried every second.
fn run_link(srv: &Server, host: &str, port: u16, gen: u64) {
    let up = &srv.repl.upstream;
    // Not before the dataset (and the history it may restore) has loaded at start.
    while current(srv, gen) && srv.persistence.loading() {
        std::thread::sleep(Duration::from_millis(10));
    }
    while current(srv, gen) {
        link_state(srv, gen, CONNECTING);
        if let Err(e) = session(srv, host, port, gen) {
            if current(srv, gen) {
                crate::log_warning!("Replication link with MASTER {host}:{port}: {e}");
            }
        }
        if !current(srv, gen) {
            break;
        }
        *up.sock.lock() = None;
        if up.state.load(Ordering::Relaxed) == CONNECTED {
            up.down_since_ms.store(srv.now_ms(), Ordering::Relaxed);
            crate::log_notice!("Connection with master lost.");
        }
        link_state(srv, gen, CONNECT);
        for _ in 0..10 {
            if !current(srv, gen) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// `set_state` by a link thread, unless a newer REPLICAOF took over.
fn link_state(srv: &Server, gen: u64, state: u8) {
    if current(srv, gen) {
        set_state(srv, state);
    }
}

fn io<T>(r: std::io::Result<T>) -> Result<T, LinkError> {
    r.map_err(LinkError::Io)
}

/// A line from the master, without its CRLF; the newlines a master sends while it prepares
/// a snapshot (keep-alives) are skipped.
fn read_line(r: &mut impl BufRead) -> Result<String, LinkError> {
    loop {
        let mut l = Vec::new();
        let n = io(r.take(1024).read_until(b'\n', &mut l))?;
        if n == 0 {
            return Err(LinkError::Master("connection closed by master".into()));
        }
        if l == b"\n" {
            continue;
        }
        while l.last().is_some_and(|c| *c == b'\n' || *c == b'\r') {
            l.pop();
        }
        return Ok(String::from_utf8_lossy(&l).into_owned());
    }
}

/// Writes a command to the master; the bytes written.
fn send(w: &Writer, argv: &[&[u8]]) -> Result<usize, LinkError> {
    let argv: Vec<Vec<u8>> = argv.iter().map(|a| a.to_vec()).collect();
    let mut out = Vec::new();
    crate::persist::aof::encode(&mut out, &argv);
    io(w.send(&out))?;
    Ok(out.len())
}

/// A connection to `addr` from the address `source` (`bind-source-addr`; "" lets the kernel
/// choose), as Redis's replication connects (`anetTcpGenericConnect` with a source address).
fn connect_from(addr: &std::net::SocketAddr, source: &str, timeout: Duration) -> std::io::Result<TcpStream> {
    use socket2::{Domain, Protocol, Socket, Type};
    let sock = Socket::new(Domain::for_address(*addr), Type::STREAM, Some(Protocol::TCP))?;
    if !source.is_empty() {
        let ip: std::net::IpAddr = source
            .parse()
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "bind-source-addr is not an address"))?;
        sock.bind(&std::net::SocketAddr::new(ip, 0).into())?;
    }
    sock.connect_timeout(&(*addr).into(), timeout)?;
    Ok(sock.into())
}

/// One connection to the master, from the handshake to the link's end.
fn session(srv: &Server, host: &str, port: u16, gen: u64) -> Result<(), LinkError> {
    let up = &srv.repl.upstream;
    let timeout =
        Duration::from_secs(srv.config.text(crate::config::p::REPL_TIMEOUT).parse::<u64>().unwrap_or(60).max(1));
    let addr = io(std::net::ToSocketAddrs::to_socket_addrs(&(host, port)))?
        .next()
        .ok_or_else(|| LinkError::Master(format!("can't resolve {host}")))?;
    let source = srv.config.text(crate::config::p::BIND_SOURCE_ADDR);
    let sock = io(connect_from(&addr, &source, timeout))?;
    let _ = sock.set_nodelay(true);
    io(sock.set_read_timeout(Some(timeout)))?;
    // A master that stops reading for `repl-timeout` ends the link (the ACK thread's write
    // must not block the link's end for ever: the link waits for that thread).
    io(sock.set_write_timeout(Some(timeout)))?;
    *up.sock.lock() = Some(io(sock.try_clone())?);
    if !current(srv, gen) {
        return Ok(());
    }
    crate::log_notice!("MASTER <-> REPLICA sync started");
    link_state(srv, gen, HANDSHAKE);
    // `tls-replication yes`: TLS from the first byte, with the client certificate and CA of
    // the `tls-*` settings (checked when they were set).
    let tls = match srv.config.flag(crate::config::p::TLS_REPLICATION) {
        false => None,
        true => Some(srv.tls.client_config().ok_or_else(|| {
            LinkError::Master(
                "tls-replication is on but TLS is not configured (tls-cert-file, tls-ca-cert-file)".into(),
            )
        })?),
    };
    let tls_link = tls.is_some();
    let (sock, w) =
        crate::daemons::upstream_conn::open(sock, host, tls).map_err(|e| LinkError::Master(format!("TLS: {e}")))?;
    let w = &w;
    up.last_io_ms.store(srv.now_ms(), Ordering::Relaxed);
    let mut r = BufReader::with_capacity(64 << 10, Counted { sock, to: None, heard: &up.last_io_ms });
    // The handshake.
    send(w, &[b"PING"])?;
    let pong = read_line(&mut r)?;
    if pong.starts_with('-') && !pong.starts_with("-NOAUTH") && !pong.starts_with("-NOPERM") {
        return Err(LinkError::Master(format!("Error reply to PING from master: '{pong}'")));
    }
    crate::log_notice!("Master replied to PING, replication can continue...");
    let auth = srv.config.text(crate::config::p::MASTERAUTH);
    if !auth.is_empty() {
        let user = srv.config.text(crate::config::p::MASTERUSER);
        if user.is_empty() {
            send(w, &[b"AUTH", auth.as_bytes()])?;
        } else {
            send(w, &[b"AUTH", user.as_bytes(), auth.as_bytes()])?;
        }
        let l = read_line(&mut r)?;
        if l.starts_with('-') {
            return Err(LinkError::Master(format!("Unable to AUTH to MASTER: {l}")));
        }
    }
    // What the master shows and hands out for this replica (`replica-announce-*`).
    let announced = srv.config.text(crate::config::p::REPLICA_ANNOUNCE_PORT);
    // A TLS replica is reached on its TLS port (Redis's choice when none is announced).
    let tls_port = srv.config.int(crate::config::p::TLS_PORT);
    let my_port = match announced.as_str() {
        "0" | "" if tls_link && tls_port != 0 => tls_port.to_string(),
        "0" | "" => srv.tcp_port.load(Ordering::Relaxed).to_string(),
        p => p.to_string(),
    };
    send(w, &[b"REPLCONF", b"listening-port", my_port.as_bytes()])?;
    let _ = read_line(&mut r)?;
    let ip = srv.config.text(crate::config::p::REPLICA_ANNOUNCE_IP);
    if !ip.is_empty() {
        send(w, &[b"REPLCONF", b"ip-address", ip.as_bytes()])?;
        let _ = read_line(&mut r)?;
    }
    send(w, &[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"])?;
    let _ = read_line(&mut r)?;
    // A Valkey master writes the snapshot in the newest RDB the replica says it reads, going by
    // the version announced here: Atoll reads Valkey 9.1.2's (VALKEY080 with hash-field
    // deadlines), which a Valkey master then sends instead of failing on such a hash in RDB 11.
    // Redis 7.2 answers the unknown option with an error, which changes nothing.
    send(w, &[b"REPLCONF", b"version", READS_RDB_OF_VALKEY.as_bytes()])?;
    let _ = read_line(&mut r)?;
    // A write of our own that raced REPLICAOF on a read-only replica: our data is no longer
    // the history we would offer, so a full sync.
    if srv.repl.stray_write.swap(false, Ordering::Relaxed) && srv.config.flag(crate::config::p::REPLICA_READ_ONLY) {
        crate::log_warning!("A write reached this server as it became a replica: a full resync follows");
        up.synced.store(false, Ordering::Release);
    }
    // Continue the history we have, if any.
    let (id, off) = if up.synced.load(Ordering::Acquire) {
        (up.master_replid.lock().clone(), (up.offset.load(Ordering::Acquire) + 1).to_string())
    } else {
        ("?".to_string(), "-1".to_string())
    };
    if id != "?" {
        crate::log_notice!("Trying a partial resynchronization (request {id}:{off}).");
    }
    // A failover (FAILOVER on this server, which was the master) asks the target to take
    // over as it answers (Redis's PSYNC … FAILOVER).
    let failing_over = srv.repl.failover.lock().state == FailoverState::InProgress;
    if failing_over {
        if let Err(e) = send(w, &[b"PSYNC", id.as_bytes(), off.as_bytes(), b"FAILOVER"]) {
            crate::daemons::replication::abort_failover(srv, "Write error to failover target");
            return Err(e);
        }
    } else {
        send(w, &[b"PSYNC", id.as_bytes(), off.as_bytes()])?;
    }
    let reply = read_line(&mut r)?;
    if failing_over {
        if reply.starts_with("+FULLRESYNC") || reply.starts_with("+CONTINUE") {
            crate::daemons::replication::clear_failover(srv);
        } else {
            crate::daemons::replication::abort_failover(srv, "Failover target rejected psync request");
            return Err(LinkError::Master(format!("Unexpected reply to PSYNC from master: {reply}")));
        }
    }
    up.last_io_ms.store(srv.now_ms(), Ordering::Relaxed);
    count_from_here(&mut r, &srv.stats.background().counters.net_repl_input_bytes);
    if let Some(rest) = reply.strip_prefix("+FULLRESYNC ") {
        let mut it = rest.split(' ');
        let replid = it.next().unwrap_or_default().to_string();
        let offset: i64 = it.next().and_then(|o| o.parse().ok()).ok_or(LinkError::Master("bad +FULLRESYNC".into()))?;
        crate::log_notice!("Full resync from master: {replid}:{offset}");
        link_state(srv, gen, SYNC);
        // The same history as ours (a resync from our own master): a `swapdb` load may serve
        // the old data meanwhile.
        let same = *srv.replid.lock() == replid;
        let stream_db = full_sync(srv, &mut r, gen, same)?;
        *up.master_replid.lock() = replid.clone();
        *srv.replid.lock() = replid;
        *srv.repl.replid2.lock() = None;
        up.offset.store(offset, Ordering::Release);
        up.read_offset.store(offset, Ordering::Release);
        up.synced.store(true, Ordering::Release);
        // The AOF was rewritten from the snapshot: durable up to its offset.
        up.aof_fsynced.store(offset, Ordering::Release);
        up.aof_unsynced.lock().clear();
        // The master's stream continues in the database its snapshot says it had selected
        // (`repl-stream-db`; a Redis master selects afresh after a snapshot, Redis replicas
        // serving their own replicas do not).
        up.db.store(stream_db, Ordering::Relaxed);
        srv.repl.restart_history_if_proxying(offset, crate::daemons::replication::backlog_size(srv));
        srv.repl.feed.lock().stream_db = stream_db;
        srv.refresh_effects();
        crate::log_notice!("MASTER <-> REPLICA sync: Finished with success");
    } else if let Some(rest) = reply.strip_prefix("+CONTINUE") {
        let replid = rest.trim();
        let offset = up.offset.load(Ordering::Acquire);
        let old = up.master_replid.lock().clone();
        if !replid.is_empty() && replid != old {
            // The master was promoted (or is a promoted replica of the old one): its ID is
            // ours from now on; the old one stays continuable up to here (PSYNC2).
            crate::log_notice!("Master replication ID changed to {replid}");
            *up.master_replid.lock() = replid.to_string();
            *srv.replid.lock() = replid.to_string();
            *srv.repl.replid2.lock() = Some((old, offset + 1));
            srv.repl.disconnect_replicas();
        }
        // Replicas of this one continue from its backlog, which must be at the stream's
        // offset (it is, unless this server restarted or was a master without one).
        if srv.repl.offset() != offset || !srv.repl.on() {
            srv.repl.restart_history_if_proxying(offset, crate::daemons::replication::backlog_size(srv));
            srv.refresh_effects();
        }
        crate::log_notice!("Successful partial resynchronization with master.");
    } else {
        return Err(LinkError::Master(format!("Unexpected reply to PSYNC from master: {reply}")));
    }
    link_state(srv, gen, CONNECTED);
    up.down_since_ms.store(0, Ordering::Relaxed);
    stream(srv, r, w, gen)
}

/// Receives the snapshot into `dbfilename` and loads it in place of the dataset. Returns the
/// database the master's stream had selected at the snapshot (`repl-stream-db`, 0 if not
/// said).
fn full_sync(srv: &Server, r: &mut BufReader<Counted>, gen: u64, same: bool) -> Result<usize, LinkError> {
    let head = read_line(r)?;
    let Some(len) = head.strip_prefix('$') else {
        return Err(LinkError::Master(format!(
            "Bad protocol from MASTER, the first byte is not '$' (we received '{head}')"
        )));
    };
    // `repl-diskless-load`: straight from the link into memory — always with `swapdb` (the
    // old dataset serves until the new one is whole), with `on-empty-db` when there is
    // nothing to lose if the transfer fails.
    let diskless = match srv.config.text(crate::config::p::REPL_DISKLESS_LOAD).as_str() {
        "swapdb" => Some(true),
        "on-empty-db" if (0..srv.ks.num_dbs()).all(|d| srv.ks.dbsize(d) == 0) => Some(false),
        _ => None,
    };
    if let Some(swap) = diskless {
        return load_from_link(srv, r, len, gen, swap, swap && same);
    }
    let path = crate::daemons::persistence::rdb_path(srv);
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let tmp = dir.join(format!("temp-{}.{}.rdb", crate::services::clock::unix_ms(), std::process::id()));
    let got = (|| {
        let mut f = std::io::BufWriter::with_capacity(1 << 20, io(std::fs::File::create(&tmp))?);
        if let Some(mark) = len.strip_prefix("EOF:") {
            let mark = mark.as_bytes();
            if mark.len() != 40 {
                return Err(LinkError::Master("bad EOF mark".into()));
            }
            crate::log_notice!("MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF to disk");
            // Everything up to the mark; the last 40 bytes read are kept back until more come.
            let mut tail: Vec<u8> = Vec::with_capacity(80);
            let mut buf = vec![0u8; 64 << 10];
            loop {
                let n = io(r.read(&mut buf))?;
                if n == 0 {
                    return Err(LinkError::Master("connection closed during the transfer".into()));
                }
                tail.extend_from_slice(&buf[..n]);
                if tail.ends_with(mark) {
                    io(f.write_all(&tail[..tail.len() - 40]))?;
                    break;
                }
                if tail.len() > 40 {
                    let keep = tail.len() - 40;
                    io(f.write_all(&tail[..keep]))?;
                    tail.drain(..keep);
                }
                srv.repl.upstream.last_io_ms.store(srv.now_ms(), Ordering::Relaxed);
            }
        } else {
            let mut left: u64 = len.parse().map_err(|_| LinkError::Master(format!("bad bulk length '{len}'")))?;
            crate::log_notice!("MASTER <-> REPLICA sync: receiving {left} bytes from master to disk");
            let mut buf = vec![0u8; 64 << 10];
            while left > 0 {
                let want = buf.len().min(left as usize);
                let n = io(r.read(&mut buf[..want]))?;
                if n == 0 {
                    return Err(LinkError::Master("connection closed during the transfer".into()));
                }
                io(f.write_all(&buf[..n]))?;
                left -= n as u64;
                srv.repl.upstream.last_io_ms.store(srv.now_ms(), Ordering::Relaxed);
            }
        }
        let f = f.into_inner().map_err(|e| LinkError::Io(e.into_error()))?;
        io(f.sync_all())?;
        Ok(())
    })();
    if let Err(e) = got {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if !current(srv, gen) {
        let _ = std::fs::remove_file(&tmp);
        return Err(LinkError::Master("REPLICAOF changed during the transfer".into()));
    }
    io(std::fs::rename(&tmp, &path))?;
    // The new name survives a power cut too (the file itself was fsync'd above).
    if let Ok(d) = std::fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    // Our history ends here, as the data it describes goes: until the new one is in place a
    // save records none, and a failed load leads to a full sync. Not before: a transfer that
    // fails leaves data and history as they were, and the next PSYNC (to this master or
    // another) continues them (Redis 7.2 discards its cached master only now).
    srv.repl.upstream.synced.store(false, Ordering::Release);
    crate::log_notice!("MASTER <-> REPLICA sync: Flushing old data");
    crate::log_notice!("MASTER <-> REPLICA sync: Loading DB in memory");
    srv.persistence.set_gate(GATE_LOADING, true);
    let loaded = (|| {
        let mut locks = crate::daemons::aof::lock_all(srv);
        let lazy = srv.config.flag(crate::config::p::REPLICA_LAZY_FLUSH);
        crate::daemons::persistence::empty_all(srv, &mut locks, lazy);
        let r = crate::daemons::persistence::reload(srv, &mut locks, false, false, false);
        // Loaded: clients are no longer told -LOADING (Redis's loading ends with rdbLoad).
        // What needs the data waits for the AOF's rewrite below, as behind a busy thread.
        srv.persistence.set_gate(GATE_LOADING, false);
        let aux = r.map_err(LinkError::Load)?;
        // The AOF must hold the new dataset, which came without effects.
        if srv.persistence.aof.log().is_some() {
            crate::daemons::aof::rewrite_locked(srv, &mut locks).map_err(LinkError::Io)?;
        }
        Ok::<usize, LinkError>(crate::daemons::persistence::stream_db_in(&aux, srv.ks.num_dbs()).unwrap_or(0))
    })();
    srv.persistence.set_gate(GATE_LOADING, false);
    loaded
}

/// A diskless load (`repl-diskless-load`): the snapshot is parsed as it arrives into a dataset
/// of its own, which then takes the place of the old one in one step, every shard locked, as
/// Redis 7.2 loads: with `swap` (`swapdb`) the old dataset stays if the transfer fails, and
/// with `serve` (the master's history is ours) it goes on serving reads meanwhile (INFO
/// `async_loading:1`); otherwise clients get -LOADING until the load ends.
fn load_from_link(
    srv: &Server,
    r: &mut BufReader<Counted>,
    len: &str,
    gen: u64,
    swap: bool,
    serve: bool,
) -> Result<usize, LinkError> {
    let ndbs = srv.ks.num_dbs();
    let mark = len.strip_prefix("EOF:").map(|m| m.as_bytes().to_vec());
    if mark.as_ref().is_some_and(|m| m.len() != 40) {
        return Err(LinkError::Master("bad EOF mark".into()));
    }
    match &mark {
        Some(_) => crate::log_notice!("MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF to parser"),
        None => crate::log_notice!("MASTER <-> REPLICA sync: receiving {len} bytes from master to parser"),
    }
    if !swap {
        crate::log_notice!("MASTER <-> REPLICA sync: Flushing old data");
    }
    crate::log_notice!("MASTER <-> REPLICA sync: Loading DB in memory");
    if serve {
        srv.repl.upstream.async_loading.store(true, Ordering::Relaxed);
    } else {
        srv.persistence.set_gate(GATE_LOADING, true);
    }
    let fresh = crate::engine::Keyspace::new(ndbs);
    let loaded = (|| {
        let opts = crate::persist::load_opts(&srv.config);
        // A replica loads its master's keys whatever their TTL: the master's DELs remove them.
        let now = srv.now_ms();
        let lru = srv.lru_clock(now);
        let hooks = &srv.persistence.loading;
        let info = match &mark {
            Some(mark) => {
                let info = crate::persist::rdbfile::load_into(&fresh, r, &opts, i64::MIN, lru, hooks)
                    .map_err(LinkError::Load)?;
                // The mark follows the RDB's checksum.
                let mut got = [0u8; 40];
                io(r.read_exact(&mut got))?;
                if got[..] != mark[..] {
                    return Err(LinkError::Master("the snapshot does not end with its EOF mark".into()));
                }
                info
            }
            None => {
                let n: u64 = len.parse().map_err(|_| LinkError::Master(format!("bad bulk length '{len}'")))?;
                let mut body = std::io::Read::take(&mut *r, n);
                let info = crate::persist::rdbfile::load_into(&fresh, &mut body, &opts, i64::MIN, lru, hooks)
                    .map_err(LinkError::Load)?;
                if body.limit() != 0 {
                    return Err(LinkError::Master("the snapshot is shorter than its length".into()));
                }
                info
            }
        };
        if !current(srv, gen) {
            return Err(LinkError::Master("REPLICAOF changed during the transfer".into()));
        }
        // Our history ends as the old dataset goes (see `full_sync`): until here a cut
        // transfer left both, and the next PSYNC continues them.
        srv.repl.upstream.synced.store(false, Ordering::Release);
        // In place of the old dataset, all at once.
        if swap {
            crate::log_notice!("MASTER <-> REPLICA sync: Swapping active DB with loaded DB");
        }
        let mut locks = crate::daemons::aof::lock_all(srv);
        for db in 0..ndbs {
            let new_db = fresh.db_if_exists(db);
            for i in 0..crate::engine::SHARDS {
                let sh = locks.shard(db, i);
                let mut n = new_db.map(|d| d.shards[i].lock());
                let keys = &sh.keys;
                let incoming = n.as_deref().map(|n| &n.keys);
                sh.touch_watched_where(|k| keys.contains_key(k) || incoming.is_some_and(|t| t.contains_key(k)));
                match n.as_deref_mut() {
                    Some(n) => {
                        std::mem::swap(&mut sh.keys, &mut n.keys);
                        std::mem::swap(&mut sh.expires, &mut n.expires);
                        std::mem::swap(&mut sh.field_ttls, &mut n.field_ttls);
                    }
                    None => sh.empty(),
                }
                if !sh.expires.is_empty() || sh.field_ttls.is_some() {
                    srv.ks.db(db).mark_volatile(i);
                }
            }
        }
        srv.ks.replica_ttls.lock().clear();
        srv.scripts.functions.update(|st| *st = Default::default());
        crate::daemons::persistence::install_functions(srv, &info.functions, true).map_err(LinkError::Load)?;
        srv.persistence.last_load_keys_loaded.store(info.keys_loaded, Ordering::Relaxed);
        srv.persistence.last_load_keys_expired.store(info.keys_expired, Ordering::Relaxed);
        // The AOF must hold the new dataset, which came without effects.
        if srv.persistence.aof.log().is_some() {
            crate::daemons::aof::rewrite_locked(srv, &mut locks).map_err(LinkError::Io)?;
        }
        Ok(crate::daemons::persistence::stream_db_in(&info.aux, ndbs).unwrap_or(0))
    })();
    srv.repl.upstream.async_loading.store(false, Ordering::Relaxed);
    srv.persistence.set_gate(GATE_LOADING, false);
    match &loaded {
        Err(e) => {
            if let LinkError::Load(e) = e {
                // Redis's words where its loader stops (a short read when the link is cut).
                crate::log_warning!("Internal error in RDB reading -> {e}");
            }
            crate::log_warning!("Failed trying to load the MASTER synchronization DB from socket, check server logs.");
            if swap {
                crate::log_notice!("MASTER <-> REPLICA sync: Discarding temporary DB in background");
            }
        }
        Ok(_) if swap => crate::log_notice!("MASTER <-> REPLICA sync: Discarding old DB in background"),
        Ok(_) => {}
    }
    // The dataset left over (the old one, or a partial new one) is freed here, on the link's
    // thread, no lock held.
    drop(fresh);
    loaded
}

/// Applies the master's stream until the link ends.
fn stream(srv: &Server, mut r: BufReader<Counted>, w: &Writer, gen: u64) -> Result<(), LinkError> {
    let up = &srv.repl.upstream;
    let start = up.offset.load(Ordering::Acquire);
    // What the AOF holds fsync'd goes on from the last link (a full sync set it to its
    // snapshot, which its rewrite made durable); a partial resync adds nothing to it. None
    // known (a restart, its AOF loaded): what was loaded.
    let fsynced = match up.aof_fsynced.load(Ordering::Acquire) {
        0 => start,
        f => f,
    };
    let unsynced = std::mem::take(&mut *up.aof_unsynced.lock());
    let acks = Acks { offset: AtomicI64::new(start), fsynced: AtomicI64::new(fsynced), aof: Mutex::new(unsynced) };
    // An ACK every second, from a thread of its own (the reader may wait a long time).
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new().name("repl-ack".into()).spawn_scoped(scope, || {
            while !stop.load(Ordering::Acquire) {
                // The AOF open now, not when the link began: it may have been switched on
                // since (CONFIG SET appendonly yes), and FACK must follow it, or a master's
                // WAITAOF waits forever.
                let log = srv.persistence.aof.log();
                if send_ack(srv, w, &acks, log.as_deref()).is_err() {
                    return;
                }
                drop(log);
                for _ in 0..100 {
                    if stop.load(Ordering::Acquire) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        });
        if let Err(e) = spawned {
            return Err(LinkError::Io(std::io::Error::new(e.kind(), format!("can't start the ACK thread: {e}"))));
        }
        let result = apply_stream(srv, &mut r, w, &acks, gen);
        stop.store(true, Ordering::Release);
        // For the next link (the ACK thread is joined when the scope ends; what it saw
        // last is at most this).
        up.aof_fsynced.store(acks.fsynced.load(Ordering::Acquire), Ordering::Release);
        let unsynced = std::mem::take(&mut *acks.aof.lock());
        *up.aof_unsynced.lock() = unsynced;
        // The link is down from here (INFO says so at once, as Redis's does), not once the
        // ACK thread has noticed.
        if result.is_err() && current(srv, gen) {
            up.down_since_ms.store(srv.now_ms(), Ordering::Relaxed);
            crate::log_notice!("Connection with master lost.");
            link_state(srv, gen, CONNECT);
        }
        result
    })
}

/// `stream`'s loop: reads the master's commands and runs them, answering GETACK.
fn apply_stream(srv: &Server, r: &mut BufReader<Counted>, w: &Writer, acks: &Acks, gen: u64) -> Result<(), LinkError> {
    let up = &srv.repl.upstream;
    let mut client = master_client(srv, r.get_ref().sock.tcp());
    client.db = up.db.load(Ordering::Relaxed);
    let base = up.offset.load(Ordering::Acquire);
    let max_bulk = srv.config.text(crate::config::p::PROTO_MAX_BULK_LEN).parse::<u64>().unwrap_or(512 << 20);
    let mut cmds = CommandReader::new(r, max_bulk);
    // The master's commands as they came, kept while a transaction is being queued: replicas
    // of this one get MULTI … EXEC in one piece once EXEC applied it (a snapshot for them never
    // falls inside it).
    let mut proxy: Vec<u8> = Vec::new();
    let mut read_before = base;
    let result = loop {
        if !current(srv, gen) {
            break Ok(());
        }
        // DEBUG SLEEP stops Redis's one thread, its master's stream included: this link
        // reads nothing meanwhile either (what arrives waits in the socket).
        srv.freeze.wait_out();
        let next = cmds.read_next();
        let read_to = base + cmds.offset() as i64;
        up.read_offset.store(read_to, Ordering::Release);
        up.last_io_ms.store(srv.now_ms(), Ordering::Relaxed);
        let argv = match next {
            Ok(Next::Command(a)) => a,
            Ok(Next::End) | Ok(Next::Truncated(_)) => {
                break Err(LinkError::Master("connection with master closed".into()))
            }
            Err(e) => break Err(LinkError::Load(e)),
        };
        if !current(srv, gen) {
            break Ok(());
        }
        let is = |i: usize, s: &str| argv.get(i).is_some_and(|a| a.eq_ignore_ascii_case(s.as_bytes()));
        // CLIENT PAUSE holds the master's commands back too, as Redis postpones its master
        // client: what arrives is read (slave_read_repl_offset grows), applied once the pause
        // ends (slave_repl_offset waits).
        while current(srv, gen) && held_by_pause(srv, &argv) {
            std::thread::sleep(Duration::from_millis(1));
        }
        // The command's bytes as the master sent them. The stream is RESP multibulk as any
        // master writes it, so re-encoding gives those bytes back; a length that differs
        // (another framing) would shift this server's offsets off the master's.
        let before = proxy.len();
        crate::persist::aof::encode(&mut proxy, &argv);
        let canonical = (proxy.len() - before) as i64 == read_to - read_before;
        read_before = read_to;
        if is(0, "replconf") && is(1, "getack") {
            // The offset before this command, as Redis answers. With `appendfsync always`
            // what was applied is fsync'd first (a worker does so before its replies; the
            // master's commands have none), so FACK covers it, as Redis's does.
            let log = srv.persistence.aof.log();
            if let Some(l) = log.as_deref() {
                l.before_replies(l.appended());
            }
            if let Err(e) = send_ack(srv, w, acks, log.as_deref()) {
                break Err(e);
            }
        } else {
            let args: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
            let mut out = crate::protocol::Reply::new(client.proto);
            client.clock = None;
            // Fed to replicas of this one by the effects' publication, under the locks of the
            // change (see `services::replication`'s PROXY).
            crate::services::replication::set_proxy(std::mem::take(&mut proxy));
            crate::exec::dispatch(srv, &srv.stats.workers[0], &mut client, &args, &mut out);
            if let Some(left) = crate::services::replication::take_proxy() {
                proxy = left;
            }
            up.db.store(client.db, Ordering::Relaxed);
            if out.buf.first() == Some(&b'-') {
                super::replay_error(srv, super::Replayer::Master, &args, &out.buf);
            }
        }
        // What changed nothing (PING, SELECT, GETACK, a refused command) goes to replicas of
        // this one now, unless a transaction is still being queued.
        if client.multi.is_none() && !proxy.is_empty() {
            srv.repl.feed_proxied(&srv.reach(), &proxy, Some(client.db));
            proxy.clear();
        } else if client.multi.is_none() {
            srv.repl.feed.lock().stream_db = client.db;
        }
        if !canonical || (client.multi.is_none() && srv.repl.offset() != read_to) {
            // Not the master's bytes: replicas of this one start over from here.
            crate::log_warning!("The master's stream is not in canonical RESP; replicas of this replica will resync");
            srv.repl.restart_history_if_proxying(read_to, crate::daemons::replication::backlog_size(srv));
            proxy.clear();
        }
        up.offset.store(read_to, Ordering::Release);
        acks.applied(read_to, srv.persistence.aof.log().as_deref());
    };
    // Unlisted, and marked closed before the socket is (no kill may reach a reused number).
    srv.clients.remove(client.id());
    *client.handle.closed.lock() = true;
    result
}

/// A pause holds this command of the master's back: any under CLIENT PAUSE ALL, those that
/// write (or may) under PAUSE WRITE.
fn held_by_pause(srv: &Server, argv: &[Vec<u8>]) -> bool {
    match srv.pause_active(srv.now_ms()) {
        None => false,
        Some(true) => true,
        Some(false) => argv
            .first()
            .and_then(|n| srv.table.lookup(n))
            .is_some_and(|c| c.has(crate::exec::table::flags::WRITE | crate::exec::table::flags::MAY_REPLICATE)),
    }
}

/// What the ACKs report: the stream's offset applied, and how far this replica's AOF has
/// fsync'd it (FACK, for the master's WAITAOF).
struct Acks {
    offset: AtomicI64,
    /// (AOF bytes appended once the command was applied, the stream offset after it), for
    /// the commands whose AOF bytes may not be fsync'd yet.
    aof: Mutex<std::collections::VecDeque<(u64, i64)>, { rank::LEAF }>,
    fsynced: AtomicI64,
}

impl Acks {
    fn applied(&self, offset: i64, log: Option<&crate::persist::aof::AofLog>) {
        self.offset.store(offset, Ordering::Release);
        if let Some(l) = log {
            let at = l.appended();
            let mut q = self.aof.lock();
            match q.back_mut() {
                Some(last) if last.0 == at => last.1 = offset,
                _ => q.push_back((at, offset)),
            }
        }
    }

    /// The stream offset this replica's AOF has fsync'd; None with AOF off (no FACK then,
    /// as Redis's `fsynced_reploff` of -1).
    fn fsynced(&self, log: Option<&crate::persist::aof::AofLog>) -> Option<i64> {
        let l = log?;
        let durable = l.durable.load(Ordering::Acquire);
        let mut q = self.aof.lock();
        while let Some(&(at, off)) = q.front() {
            if at > durable {
                break;
            }
            self.fsynced.store(off, Ordering::Release);
            q.pop_front();
        }
        Some(self.fsynced.load(Ordering::Acquire))
    }
}

/// Sends REPLCONF ACK (and FACK) on the link; the figures are read before the socket is
/// locked (both are leaves of the lock order). The bytes count as this server's output
/// (`total_net_output_bytes`: the master's client is not a replica), as in Redis.
fn send_ack(srv: &Server, w: &Writer, acks: &Acks, log: Option<&crate::persist::aof::AofLog>) -> Result<(), LinkError> {
    let o = acks.offset.load(Ordering::Acquire).to_string();
    let n = match acks.fsynced(log) {
        Some(f) => send(w, &[b"REPLCONF", b"ACK", o.as_bytes(), b"FACK", f.to_string().as_bytes()])?,
        None => send(w, &[b"REPLCONF", b"ACK", o.as_bytes()])?,
    };
    // Two threads send ACKs (the link's and the ACK thread): an atomic add, not `bump`.
    srv.stats.background().counters.net_output_bytes.fetch_add(n as u64, Ordering::Relaxed);
    Ok(())
}

/// The master's client: runs what the stream says, never answered, and nothing expires under
/// it (as Redis's master client sees keys).
/// It is listed as a client (CLIENT LIST flag `M`, TYPE master) with the master's address;
/// CLIENT KILL on it cuts the link, which then reconnects and continues (as in Redis).
fn master_client(srv: &Server, sock: &TcpStream) -> crate::exec::client::Client {
    use std::os::fd::AsRawFd;
    let addr = sock.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "master".into());
    let laddr = sock.local_addr().map(|a| a.to_string()).unwrap_or_default();
    let h = Arc::new(crate::exec::client::ClientHandle::new(
        srv.clients.next_id(),
        addr,
        laddr,
        sock.as_raw_fd(),
        false,
        srv.now_ms(),
    ));
    h.master.store(true, Ordering::Relaxed);
    *h.closed.lock() = false;
    srv.clients.add(h.clone());
    let mut c = crate::exec::client::Client::new(h, 0, false);
    c.replaying = true;
    c
}

/// The replication thread's check of the link (Redis's replicationCron): a master silent for
/// `repl-timeout` — while connecting, in the handshake, sending the snapshot or streaming —
/// gets the link cut (logged in Redis's words); the link thread then reconnects. Goes by the
/// setting as it is now (CONFIG SET repl-timeout applies to a link already up).
pub fn check_timeout(srv: &Server, now: i64) {
    let up = &srv.repl.upstream;
    let state = up.state.load(Ordering::Relaxed);
    // (Not while the snapshot received loads: the master has nothing to say meanwhile.)
    if state == CONNECT || !up.following() || srv.persistence.loading() {
        return;
    }
    let timeout = srv.config.text(crate::config::p::REPL_TIMEOUT).parse::<i64>().unwrap_or(60).max(1) * 1000;
    let last = up.last_io_ms.load(Ordering::Relaxed);
    if last == 0 || now - last <= timeout {
        return;
    }
    match state {
        CONNECTED => crate::log_warning!("MASTER timeout: no data nor PING received..."),
        SYNC => crate::log_warning!(
            "Timeout receiving bulk data from MASTER... If the problem persists try to set the 'repl-timeout' parameter in redis.conf to a larger value."
        ),
        _ => crate::log_warning!("Timeout connecting to the MASTER..."),
    }
    // Once per silence: the next session starts the clock again.
    up.last_io_ms.store(now, Ordering::Relaxed);
    up.cut();
}
