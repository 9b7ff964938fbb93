//! The cluster bus thread: listens on the bus port, keeps a link to every known node, reads
//! whole messages and hands them to `services::cluster` (`State::process`), runs the bus's
//! 100 ms cron, and carries out what those leave behind — messages to send, links to close,
//! replication to start or stop, keys of lost slots to delete, nodes.conf to save.
//!
//! One thread with a `mio` poll: the bus carries a few messages per node per second, so a
//! thread of its own keeps it off the workers (a worker never waits for the bus) and keeps
//! its timing (failure detection, elections) independent of the load on the workers.
//!
//! With `tls-cluster yes` every link is TLS from its first byte, as Redis's: rustls's
//! connection state sits between the socket and the link's buffers (`read_link` decrypts
//! into `rbuf`, `flush` encrypts from `wbuf`), so the message code never sees the difference.
//! Certificates are the `tls-*` settings' (services::tls): the node accepting a link asks for
//! a client certificate as `tls-auth-clients` says, and the node connecting presents
//! `tls-client-cert-file` (else `tls-cert-file`) and checks the peer's chain, not its name.

use crate::exec::Server;
use crate::services::cluster::gossip::{Action, LinkView};
use crate::services::cluster::wire::{self, Name};
use crate::services::cluster::{self as cl, Endpoint, Settings, State};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use slab::Slab;
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WAKE: Token = Token(usize::MAX - 1);
const LISTEN_BASE: usize = usize::MAX - 64;
/// Buffer capacity a link keeps once empty (a few pings' worth); more is released.
const WBUF_KEEP: usize = 16 * 1024;
const RBUF_KEEP: usize = 64 * 1024;

struct Link {
    stream: TcpStream,
    /// The TLS session of a `tls-cluster` link (None: plain TCP).
    tls: Option<rustls::Connection>,
    node: Option<Name>,
    inbound: bool,
    connecting: bool,
    rbuf: Vec<u8>,
    wbuf: Vec<u8>,
    peer_ip: String,
    local_ip: String,
}

/// The cluster settings from the configuration.
pub fn settings(srv: &Server) -> Settings {
    use crate::config::p;
    let c = &srv.config;
    let tcp_port = srv.tcp_port.load(std::sync::atomic::Ordering::Relaxed);
    let tls_port = c.int(p::TLS_PORT) as u16;
    let tls_cluster = c.flag(p::TLS_CLUSTER);
    let cport = c.int(p::CLUSTER_PORT) as u16;
    let base = if tls_cluster { tls_port } else { tcp_port };
    Settings {
        node_timeout: c.int(p::CLUSTER_NODE_TIMEOUT),
        ping_interval: c.int(p::CLUSTER_PING_INTERVAL),
        require_full_coverage: c.flag(p::CLUSTER_REQUIRE_FULL_COVERAGE),
        allow_reads_when_down: c.flag(p::CLUSTER_ALLOW_READS_WHEN_DOWN),
        allow_pubsubshard_when_down: c.flag(p::CLUSTER_ALLOW_PUBSUBSHARD_WHEN_DOWN),
        allow_replica_migration: c.flag(p::CLUSTER_ALLOW_REPLICA_MIGRATION),
        migration_barrier: c.int(p::CLUSTER_MIGRATION_BARRIER),
        replica_validity_factor: c.int(p::CLUSTER_REPLICA_VALIDITY_FACTOR),
        replica_no_failover: c.flag(p::CLUSTER_REPLICA_NO_FAILOVER),
        announce_ip: c.text(p::CLUSTER_ANNOUNCE_IP),
        announce_hostname: c.text(p::CLUSTER_ANNOUNCE_HOSTNAME),
        announce_human_nodename: c.text(p::CLUSTER_ANNOUNCE_HUMAN_NODENAME),
        announce_port: c.int(p::CLUSTER_ANNOUNCE_PORT) as u16,
        announce_tls_port: c.int(p::CLUSTER_ANNOUNCE_TLS_PORT) as u16,
        announce_bus_port: c.int(p::CLUSTER_ANNOUNCE_BUS_PORT) as u16,
        preferred_endpoint: match c.text(p::CLUSTER_PREFERRED_ENDPOINT_TYPE).as_str() {
            "hostname" => Endpoint::Hostname,
            "unknown-endpoint" => Endpoint::Unknown,
            _ => Endpoint::Ip,
        },
        tls_cluster,
        tls_replication: c.flag(p::TLS_REPLICATION),
        link_sendbuf_limit: c.int(p::CLUSTER_LINK_SENDBUF_LIMIT) as u64,
        tcp_port,
        tls_port,
        bus_port: if cport != 0 { cport } else { base.wrapping_add(10000) },
    }
}

/// CONFIG SET changed a setting the bus uses: the state takes the new settings now.
pub fn apply_settings(srv: &Server) {
    let s = settings(srv);
    srv.cluster.with(|st| {
        st.settings = s;
        st.apply_announced();
    });
}

/// Loads (or creates) nodes.conf and locks it; the server exits when it cannot, as Redis.
pub fn load(srv: &Server) -> Result<std::fs::File, String> {
    use crate::config::p;
    let file = srv.config.text(p::CLUSTER_CONFIG_FILE);
    let path = std::path::PathBuf::from(&file);
    let lock = cl::conf::lock(&path)?;
    let text =
        std::fs::read_to_string(&path).map_err(|e| format!("Loading the cluster node config from {file}: {e}"))?;
    let s = settings(srv);
    let st = match cl::conf::load(&text, s.clone()) {
        Ok(Some(st)) => {
            crate::log_notice!("Node configuration loaded, I'm {}", cl::name_str(&st.myself));
            st
        }
        Ok(None) => {
            let st = State::new(s);
            crate::log_notice!("No cluster configuration found, I'm {}", cl::name_str(&st.myself));
            cl::conf::save(&st, &path, true).map_err(|e| format!("Fatal: can't update cluster config file: {e}"))?;
            st
        }
        Err(line) => return Err(format!("Unrecoverable error: corrupted cluster config file \"{line}\".")),
    };
    let _ = srv.cluster.conf_path.set(path);
    srv.cluster.publish(&st);
    *srv.cluster.state.lock() = Some(st);
    Ok(lock)
}

/// Starts the bus thread on the listeners the server bound for it.
pub fn spawn(srv: Arc<Server>, listeners: Vec<std::net::TcpListener>) {
    std::thread::Builder::new()
        .name("atoll-cluster".into())
        .spawn(move || run(srv, listeners))
        .expect("spawn the cluster bus thread");
}

fn offset(srv: &Server) -> u64 {
    srv.repl.cluster_offset()
}

fn run(srv: Arc<Server>, listeners: Vec<std::net::TcpListener>) {
    let mut poll = Poll::new().expect("a poll instance");
    let waker = Arc::new(Waker::new(poll.registry(), WAKE).expect("a waker"));
    let _ = srv.cluster.waker.set(waker);
    let mut ls = Vec::new();
    for (i, l) in listeners.into_iter().enumerate() {
        let _ = l.set_nonblocking(true);
        let mut l = TcpListener::from_std(l);
        poll.registry().register(&mut l, Token(LISTEN_BASE + i), Interest::READABLE).expect("register");
        ls.push(l);
    }
    // As Redis's bus listener, whose connection type is chosen at start-up: links accepted
    // are TLS when tls-cluster was on then (links made follow the setting of the moment).
    let tls_accept = srv.config.flag(crate::config::p::TLS_CLUSTER);
    let mut links: Slab<Link> = Slab::new();
    let mut events = Events::with_capacity(256);
    let mut iteration: u64 = 0;
    let mut next_cron = Instant::now();
    loop {
        // DEBUG SLEEP stops Redis's bus with the rest of it: no ping, pong or vote meanwhile
        // (a sleeping replica must not win an election with data it did not take).
        srv.freeze.wait_out();
        let wait = next_cron.saturating_duration_since(Instant::now());
        if let Err(e) = poll.poll(&mut events, Some(wait)) {
            if e.kind() != std::io::ErrorKind::Interrupted {
                crate::log_warning!("Cluster bus poll failed: {e}");
            }
        }
        for ev in events.iter() {
            let t = ev.token();
            if t == WAKE {
                continue;
            }
            if t.0 >= LISTEN_BASE {
                let l = &ls[t.0 - LISTEN_BASE];
                while let Ok((mut stream, peer)) = l.accept() {
                    let _ = stream.set_nodelay(true);
                    let tls = match tls_accept {
                        false => None,
                        true => match srv.tls.server_config().map(rustls::ServerConnection::new) {
                            Some(Ok(c)) => Some(rustls::Connection::Server(c)),
                            _ => {
                                crate::log_warning!("Error accepting cluster node connection: TLS is not configured");
                                continue;
                            }
                        },
                    };
                    let entry = links.vacant_entry();
                    let token = entry.key();
                    if poll.registry().register(&mut stream, Token(token), Interest::READABLE).is_err() {
                        continue;
                    }
                    let local_ip = stream.local_addr().map(|a| a.ip().to_string()).unwrap_or_default();
                    entry.insert(Link {
                        stream,
                        tls,
                        node: None,
                        inbound: true,
                        connecting: false,
                        rbuf: Vec::new(),
                        wbuf: Vec::new(),
                        peer_ip: peer.ip().to_string(),
                        local_ip,
                    });
                    crate::log_verbose!("Accepting cluster node connection from {}:{}", peer.ip(), peer.port());
                }
                continue;
            }
            let token = t.0;
            if !links.contains(token) {
                continue;
            }
            let mut ok = true;
            if links[token].connecting && (ev.is_writable() || ev.is_error() || ev.is_write_closed()) {
                let l = &mut links[token];
                match (l.stream.take_error(), l.stream.peer_addr()) {
                    (Ok(None), Ok(_)) => {
                        l.connecting = false;
                        l.local_ip = l.stream.local_addr().map(|a| a.ip().to_string()).unwrap_or_default();
                    }
                    // Not connected yet (a spurious wake-up): wait for the next event.
                    (Ok(None), Err(e)) if e.kind() == std::io::ErrorKind::NotConnected && !ev.is_error() => {}
                    _ => ok = false,
                }
            }
            if ok && ev.is_readable() {
                ok = read_link(&srv, &mut links, token);
            }
            if ok && links.contains(token) && !links[token].connecting {
                ok = flush(&mut links[token]);
            }
            if !ok {
                close(&srv, &poll, &mut links, token);
            } else if links.contains(token) {
                rearm(&poll, &mut links[token], token);
            }
        }
        if Instant::now() >= next_cron {
            next_cron = Instant::now() + Duration::from_millis(100);
            iteration += 1;
            cron(&srv, &poll, &mut links, iteration);
            redirect_blocked(&srv);
            super::slot_export::cron(&srv);
        }
        carry_out(&srv, &poll, &mut links);
        report(&srv, &links);
    }
}

/// Tells the state what each link holds (CLUSTER LINKS) and the server what all of them
/// hold (INFO's mem_cluster_links): measured here, where the buffers are.
fn report(srv: &Server, links: &Slab<Link>) {
    let mut mem = 0u64;
    let mut io = std::collections::HashMap::with_capacity(links.len());
    for (token, l) in links.iter() {
        mem += (std::mem::size_of::<Link>() + l.rbuf.capacity() + l.wbuf.capacity()) as u64;
        // What the poll waits for on it, named as Redis names its handlers: none while
        // connecting, then reading, and writing while bytes wait.
        let events = match (l.connecting, l.wbuf.is_empty()) {
            (true, _) => "",
            (false, true) => "r",
            (false, false) => "rw",
        };
        io.insert(token, (l.wbuf.len() as u64, events));
    }
    srv.cluster.links_mem.store(mem, std::sync::atomic::Ordering::Relaxed);
    if let Some(st) = srv.cluster.state.lock().as_mut() {
        st.link_io = io;
    }
}

/// Reads what arrived and processes every whole message; false: close the link.
fn read_link(srv: &Server, links: &mut Slab<Link>, token: usize) -> bool {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let l = &mut links[token];
        match read_some(l, &mut buf) {
            Some(true) => {}
            Some(false) => break,
            None => return false,
        }
        // Never more than one message beyond what is being read is held.
        let held = l.rbuf.len();
        if held > wire::MAX_LEN * 2 {
            return false;
        }
        if !process_ready(srv, links, token) {
            return false;
        }
    }
    process_ready(srv, links, token)
}

/// Moves what the socket has into `rbuf` (decrypted on a TLS link): Some(true) when bytes
/// came (more may follow), Some(false) when the socket has nothing now, None when the link
/// is closed or broken.
fn read_some(l: &mut Link, buf: &mut [u8]) -> Option<bool> {
    use std::io::ErrorKind::{Interrupted, WouldBlock};
    let Some(tls) = l.tls.as_mut() else {
        return match l.stream.read(buf) {
            Ok(0) => None,
            Ok(n) => {
                l.rbuf.extend_from_slice(&buf[..n]);
                Some(true)
            }
            Err(e) if e.kind() == WouldBlock => Some(false),
            Err(e) if e.kind() == Interrupted => Some(true),
            Err(_) => None,
        };
    };
    match tls.read_tls(&mut l.stream) {
        Ok(0) => return None,
        Ok(_) => {}
        Err(e) if e.kind() == WouldBlock => return Some(false),
        Err(e) if e.kind() == Interrupted => return Some(true),
        Err(_) => return None,
    }
    if let Err(e) = tls.process_new_packets() {
        // The alert rustls queued tells the peer why; then the link goes.
        let _ = tls.write_tls(&mut l.stream);
        crate::log_verbose!("Cluster bus TLS error from {}: {e}", l.peer_ip);
        return None;
    }
    loop {
        match tls.reader().read(buf) {
            // The peer's close_notify.
            Ok(0) => return None,
            Ok(n) => l.rbuf.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == WouldBlock => return Some(true),
            Err(_) => return None,
        }
    }
}

fn process_ready(srv: &Server, links: &mut Slab<Link>, token: usize) -> bool {
    loop {
        let l = &mut links[token];
        let len = match wire::frame_len(&l.rbuf) {
            Ok(Some(n)) => n,
            Ok(None) => return true,
            Err(_) => {
                crate::log_warning!("Bad message length or signature received on the Cluster bus.");
                return false;
            }
        };
        if l.rbuf.len() < len {
            return true;
        }
        let frame: Vec<u8> = l.rbuf.drain(..len).collect();
        if l.rbuf.is_empty() && l.rbuf.capacity() > RBUF_KEEP {
            // A big message (a large PUBLISH) was read: its buffer is not kept.
            l.rbuf = Vec::new();
        }
        let msg = match wire::decode(&frame) {
            Ok(m) => m,
            // Redis drops a message it cannot use and keeps the link.
            Err(_) => continue,
        };
        let filter = srv.cluster.drop_filter.load(std::sync::atomic::Ordering::Relaxed);
        if filter == msg.hdr.kind as i64 {
            // DEBUG DROP-CLUSTER-PACKET-FILTER: counted as received, then ignored.
            if let Some(st) = srv.cluster.state.lock().as_mut() {
                if let Some(c) = st.received.get_mut(msg.hdr.kind as usize) {
                    *c += 1;
                }
            }
            crate::log_warning!("Dropping packet that matches debug drop filter");
            continue;
        }
        let mut view = LinkView {
            token,
            node: l.node,
            inbound: l.inbound,
            peer_ip: l.peer_ip.clone(),
            local_ip: l.local_ip.clone(),
        };
        let off = offset(srv);
        let keep = {
            let mut g = srv.cluster.state.lock();
            let Some(st) = g.as_mut() else { return false };
            let keep = st.process(&mut view, msg, off, &|_| true);
            if let Some(n) = view.node {
                if view.inbound {
                    if let Some(node) = st.nodes.get_mut(&n) {
                        if node.inbound == Some(token) && node.inbound_ctime == 0 {
                            node.inbound_ctime = cl::now_ms();
                        }
                    }
                }
            }
            srv.cluster.publish_if_dirty(st);
            keep
        };
        links[token].node = view.node;
        if !keep {
            return false;
        }
    }
}

fn flush(l: &mut Link) -> bool {
    if l.tls.is_some() {
        return flush_tls(l);
    }
    while !l.wbuf.is_empty() {
        match l.stream.write(&l.wbuf) {
            Ok(0) => return false,
            Ok(n) => {
                l.wbuf.drain(..n);
                if l.wbuf.is_empty() && l.wbuf.capacity() > WBUF_KEEP {
                    // As Redis frees a link's message blocks once written: a burst of
                    // publishes does not keep its memory.
                    l.wbuf = Vec::new();
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return false,
        }
    }
    true
}

/// `flush` on a TLS link: the records rustls has sealed go out first; the messages in `wbuf`
/// are handed to it only once the handshake is done and what it sealed before is written, so
/// `wbuf` stays the measure of what waits (CLUSTER LINKS, `cluster-link-sendbuf-limit`).
fn flush_tls(l: &mut Link) -> bool {
    use std::io::ErrorKind::{Interrupted, WouldBlock};
    let Some(tls) = l.tls.as_mut() else { return true };
    loop {
        while tls.wants_write() {
            match tls.write_tls(&mut l.stream) {
                Ok(0) => return false,
                Ok(_) => {}
                Err(e) if e.kind() == WouldBlock => return true,
                Err(e) if e.kind() == Interrupted => {}
                Err(_) => return false,
            }
        }
        if l.wbuf.is_empty() || tls.is_handshaking() {
            return true;
        }
        match tls.writer().write(&l.wbuf) {
            Ok(0) => return true,
            Ok(n) => {
                l.wbuf.drain(..n);
                if l.wbuf.is_empty() && l.wbuf.capacity() > WBUF_KEEP {
                    l.wbuf = Vec::new();
                }
            }
            Err(_) => return false,
        }
    }
}

fn rearm(poll: &Poll, l: &mut Link, token: usize) {
    let tls_out = l.tls.as_ref().is_some_and(|t| t.wants_write());
    let interest = if l.connecting || !l.wbuf.is_empty() || tls_out {
        Interest::READABLE | Interest::WRITABLE
    } else {
        Interest::READABLE
    };
    let _ = poll.registry().reregister(&mut l.stream, Token(token), interest);
}

fn close(srv: &Server, poll: &Poll, links: &mut Slab<Link>, token: usize) {
    if !links.contains(token) {
        return;
    }
    let mut l = links.remove(token);
    let _ = poll.registry().deregister(&mut l.stream);
    let mut g = srv.cluster.state.lock();
    if let Some(st) = g.as_mut() {
        // The token is free for the next link: what was queued for this one is dropped.
        st.actions.retain(|a| !matches!(a, Action::SendLink(t, _) | Action::CloseLink(t) if *t == token));
        for n in st.nodes.values_mut() {
            if n.link == Some(token) {
                n.link = None;
            }
            if n.inbound == Some(token) {
                n.inbound = None;
                n.inbound_ctime = 0;
            }
        }
    }
}

/// Queues a message on a link (dropped past `cluster-link-sendbuf-limit`, as Redis frees
/// such a link).
fn queue(srv: &Server, poll: &Poll, links: &mut Slab<Link>, token: usize, bytes: &[u8], limit: u64) {
    let Some(l) = links.get_mut(token) else { return };
    l.wbuf.extend_from_slice(bytes);
    if limit != 0 && l.wbuf.len() as u64 > limit {
        crate::log_warning!(
            "Freeing cluster link ({} node {}), used memory: {} (exceeds limit of {limit})",
            if l.inbound { "from" } else { "to" },
            l.node.map(|n| cl::name_str(&n).to_string()).unwrap_or_default(),
            l.wbuf.len()
        );
        if let Some(st) = srv.cluster.state.lock().as_mut() {
            st.links_buffer_limit_exceeded += 1;
        }
        close(srv, poll, links, token);
        return;
    }
    if !l.connecting && !flush(l) {
        close(srv, poll, links, token);
        return;
    }
    if let Some(l) = links.get_mut(token) {
        rearm(poll, l, token);
    }
}

fn cron(srv: &Server, poll: &Poll, links: &mut Slab<Link>, iteration: u64) {
    let off = offset(srv);
    let data_age = {
        let up = &srv.repl.upstream;
        let now = cl::now_ms();
        if up.following() && up.synced.load(std::sync::atomic::Ordering::Relaxed) {
            now - up.last_io_ms.load(std::sync::atomic::Ordering::Relaxed)
        } else {
            now - up.down_since_ms.load(std::sync::atomic::Ordering::Relaxed)
        }
    };
    let ping_period = srv.config.text(crate::config::p::REPL_PING_REPLICA_PERIOD).parse::<i64>().unwrap_or(10);
    // (Read before the view's lock: the upstream's state has a lock of its own.)
    let following = srv.repl.upstream.following();
    let connect = {
        let mut g = srv.cluster.state.lock();
        let Some(st) = g.as_mut() else { return };
        let c = st.cron(iteration, off);
        // A replica (restarted from nodes.conf, or whose link was reset) follows its master.
        if st.me().is_slave() && !following {
            if let Some(m) = st.me().slaveof.and_then(|m| st.nodes.get(&m)).filter(|m| m.has_addr() && !m.ip.is_empty())
            {
                let port = if st.settings.tls_replication { m.tls_port } else { m.tcp_port };
                st.actions.push(Action::Follow { host: m.ip.clone(), port });
            }
        }
        if st.me().is_slave() {
            st.handle_manual_failover(off);
            st.handle_replica_failover(off, data_age, ping_period);
        }
        srv.cluster.publish_if_dirty(st);
        c.into_iter().filter_map(|n| st.nodes.get(&n).map(|x| (n, x.ip.clone(), x.cport))).collect::<Vec<_>>()
    };
    let tls_config = match srv.config.flag(crate::config::p::TLS_CLUSTER) {
        true => match srv.tls.client_config() {
            Some(c) => Some(c),
            None => {
                if !connect.is_empty() {
                    crate::log_warning!(
                        "Unable to connect to cluster nodes: tls-cluster is on but TLS is not configured"
                    );
                }
                return;
            }
        },
        false => None,
    };
    for (name, ip, cport) in connect {
        let addr = match ip.parse::<std::net::IpAddr>() {
            Ok(a) => std::net::SocketAddr::new(a, cport),
            Err(_) => continue,
        };
        // An address is no server name: the peer's certificate is checked by its chain only.
        let tls = match &tls_config {
            None => None,
            Some(c) => match rustls::ClientConnection::new(c.clone(), addr.ip().into()) {
                Ok(c) => Some(rustls::Connection::Client(c)),
                Err(e) => {
                    crate::log_warning!("Cluster bus TLS connection to {addr} failed: {e}");
                    continue;
                }
            },
        };
        let stream = match TcpStream::connect(addr) {
            Ok(s) => s,
            Err(_) => {
                if let Some(st) = srv.cluster.state.lock().as_mut() {
                    if let Some(n) = st.nodes.get_mut(&name) {
                        if n.ping_sent == 0 {
                            n.ping_sent = cl::now_ms();
                        }
                    }
                }
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let entry = links.vacant_entry();
        let token = entry.key();
        let mut link = Link {
            stream,
            tls,
            node: Some(name),
            inbound: false,
            connecting: true,
            rbuf: Vec::new(),
            wbuf: Vec::new(),
            peer_ip: ip.clone(),
            local_ip: String::new(),
        };
        if poll.registry().register(&mut link.stream, Token(token), Interest::READABLE | Interest::WRITABLE).is_err() {
            continue;
        }
        entry.insert(link);
        let mut g = srv.cluster.state.lock();
        let Some(st) = g.as_mut() else { return };
        let Some(n) = st.nodes.get_mut(&name) else { continue };
        n.link = Some(token);
        n.link_ctime = cl::now_ms();
        let old_ping = n.ping_sent;
        // The first message on a new link: MEET to a node met by CLUSTER MEET, else PING.
        if n.flags & cl::MEET != 0 {
            n.flags &= !cl::MEET;
            let m = st.ping(wire::MEET, off);
            st.sent[wire::MEET as usize] += 1;
            st.actions.push(Action::SendLink(token, m));
        } else {
            st.send_ping(name, off);
        }
        if old_ping != 0 {
            if let Some(n) = st.nodes.get_mut(&name) {
                n.ping_sent = old_ping;
            }
        }
    }
}

/// Carries out what the state left to do, outside its lock.
fn carry_out(srv: &Server, poll: &Poll, links: &mut Slab<Link>) {
    let (actions, save, limit, targets) = {
        let mut g = srv.cluster.state.lock();
        let Some(st) = g.as_mut() else { return };
        if st.todo_update {
            st.todo_update = false;
            st.update_state();
            srv.cluster.publish_if_dirty(st);
        }
        let actions = std::mem::take(&mut st.actions);
        let save = std::mem::take(&mut st.todo_save).then(|| cl::conf::render_numbered(st));
        let targets: Vec<(Name, Option<usize>)> = st.nodes.values().map(|n| (n.name, n.link)).collect();
        (actions, save, st.settings.link_sendbuf_limit, targets)
    };
    if let Some((text, number)) = save {
        if let Some(path) = srv.cluster.conf_path.get() {
            if let Err(e) = cl::conf::write_numbered(&text, number, path, true) {
                crate::log_warning!("Fatal: can't update cluster config file: {e}");
                std::process::exit(1);
            }
        }
    }
    let link_of = |n: &Name| targets.iter().find(|(x, _)| x == n).and_then(|(_, l)| *l);
    // Tokens closed by this batch: later actions of the batch on them are stale.
    let mut closed: Vec<usize> = Vec::new();
    for a in actions {
        match &a {
            Action::SendLink(t, _) | Action::CloseLink(t) if closed.contains(t) => continue,
            Action::CloseLink(t) => closed.push(*t),
            _ => {}
        }
        match a {
            Action::Send(to, msg) => {
                if let Some(t) = link_of(&to) {
                    queue(srv, poll, links, t, &wire::encode(&msg), limit);
                }
            }
            Action::SendLink(t, msg) => queue(srv, poll, links, t, &wire::encode(&msg), limit),
            Action::CloseLink(t) => close(srv, poll, links, t),
            Action::Publish { channel, message, shard } => {
                srv.pubsub.publish(&srv.config.hot, shard, &channel, &message, 0);
            }
            Action::Follow { host, port } => {
                crate::daemons::replica_link::follow(srv, &host, port);
            }
            Action::BecomeMaster => crate::daemons::replica_link::unfollow(srv),
            Action::DeleteSlots(slots) => delete_slots(srv, &slots),
            Action::DropShardChannels(slots) => {
                let slots: std::collections::HashSet<usize> = slots.into_iter().collect();
                srv.pubsub.drop_shard_slots(&srv.config.hot, &slots);
            }
            Action::PauseWrites(until) => {
                if until == 0 {
                    srv.unpause(crate::exec::PauseBy::Failover);
                } else {
                    srv.pause(crate::exec::PauseBy::Failover, cl::now_ms(), until, false);
                }
            }
        }
    }
}

/// Clients blocked on keys of a slot this node no longer serves get the redirection they
/// would get now (MOVED, or CLUSTERDOWN), and their wait ends: what they wait for will be
/// written elsewhere (Redis's clusterRedirectBlockedClientIfNeeded, run from its cron as
/// here). A slot being imported keeps its waiters, and so does a replica's reader of its
/// master's slots.
pub fn redirect_blocked(srv: &Server) {
    use crate::exec::blocking::WaitState;
    use crate::exec::table::flags;
    if srv.blocked_clients.load(std::sync::atomic::Ordering::Relaxed) == 0 {
        return;
    }
    let mut waits = Vec::new();
    for h in srv.clients.snapshot() {
        let Some(w) = h.waiter.lock().clone() else { continue };
        if w.postponed() || w.keys().is_empty() || !w.waiting() {
            continue;
        }
        let argv: Vec<&[u8]> = w.argv().iter().map(|a| a.as_slice()).collect();
        let writes = crate::exec::call::resolve(srv, &argv).is_ok_and(|c| c.has(flags::WRITE));
        let tls = h.came_in_on(srv.config.int(crate::config::p::TLS_PORT));
        let slot = crate::engine::slot::key_slot(&w.keys()[0]);
        waits.push((w, slot, writes, tls));
    }
    // All keys of a blocking command share a slot: the first one's decides.
    let verdicts: Vec<Option<String>> = srv
        .cluster
        .peek(|st| {
            waits
                .iter()
                .map(|(_, slot, writes, tls)| {
                    if !st.ok {
                        return Some(st.redirect_text(&cl::Redirect::Down, *tls));
                    }
                    let owner = st.slots[*slot];
                    let me = st.me();
                    let reads_master = !writes && me.is_slave() && me.slaveof.is_some() && me.slaveof == owner;
                    if owner == Some(st.myself) || reads_master || st.importing.contains_key(slot) {
                        return None;
                    }
                    Some(match owner {
                        None => st.redirect_text(&cl::Redirect::Unbound, *tls),
                        Some(n) => st.redirect_text(&cl::Redirect::Moved(*slot, n), *tls),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    for ((w, ..), verdict) in waits.into_iter().zip(verdicts) {
        let Some(text) = verdict else { continue };
        if w.finish(WaitState::Served(format!("-{text}\r\n").into_bytes())) {
            srv.blocked_clients.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// Deletes the keys of slots this node no longer serves (database 0).
pub fn delete_slots(srv: &Server, slots: &[usize]) {
    use crate::engine::slot::SHARDS;
    let mut shards: Vec<usize> = slots.iter().map(|s| s & (SHARDS - 1)).collect();
    shards.sort_unstable();
    shards.dedup();
    let wanted: std::collections::HashSet<usize> = slots.iter().copied().collect();
    for shard in shards {
        let plan = crate::engine::LockPlan::one(0, shard);
        let mut locks = crate::engine::Locks::acquire(&srv.ks, plan);
        let s = locks.shard(0, shard);
        let mut doomed: Vec<Vec<u8>> = Vec::new();
        let mut in_shard: Vec<usize> = wanted.iter().copied().filter(|w| w & (SHARDS - 1) == shard).collect();
        in_shard.sort_unstable();
        for slot in in_shard {
            let before = doomed.len();
            s.keys.slot_keys_while(slot, |k| {
                doomed.push(k.to_vec());
                true
            });
            if doomed.len() > before {
                crate::log_notice!("Deleting keys in dirty slot {slot}");
            }
        }
        if doomed.is_empty() {
            continue;
        }
        // As Redis's delKeysInSlot: each deletion reaches the replicas and the AOF (replicas
        // delete nothing of their own accord), and WATCH and tracking see the key change.
        for k in &doomed {
            s.remove(k);
            s.touch_watched(k);
        }
        if srv.tracking.on() {
            let touched: Vec<crate::services::tracking::Touched> =
                doomed.iter().map(|k| (k.clone().into_boxed_slice(), true)).collect();
            srv.tracking.modified(&srv.reach(), &touched, 0, None);
        }
        if srv.effects_enabled() {
            let cmd: &[u8] =
                if srv.config.flag(crate::config::p::LAZYFREE_LAZY_SERVER_DEL) { b"UNLINK" } else { b"DEL" };
            let effects: Vec<crate::exec::Effect> =
                doomed.iter().map(|k| crate::exec::Effect::new(0, vec![cmd.to_vec(), k.clone()])).collect();
            srv.publish_effects(&effects, srv.ks.snapshots.seen(s.saved_epoch));
        }
    }
}
