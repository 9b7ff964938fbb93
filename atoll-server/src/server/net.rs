//! Worker threads and their event loops.
//!
//! N workers, each a single-threaded tokio runtime (`current_thread`, never the work-stealing
//! one) that owns its connections for their whole life; every command runs to completion on
//! its connection's worker. The main thread accepts connections and hands them out round-robin
//! through bounded mailboxes.
//!
//! Syscalls and wakeups per request matter more than anything else here (DESIGN §4): a read
//! that returns less than the buffer clears readiness (so there is no extra read that fails
//! with EAGAIN); all complete requests in a read are executed before one write of all their
//! replies; and, like Redis's beforeSleep, a connection yields once before writing so that
//! every connection made readable in the same event-loop round reads first — the peer then
//! wakes once for many replies. The read buffer is shared per worker, so an idle connection
//! holds no input buffer and at most a small reply buffer.

use super::client::{Client, ClientHandle};
use super::session::Session;
use super::{stats::WorkerStats, Server, ShutdownMode};
use crate::protocol::Reply;
use crate::{log_notice, log_verbose, log_warning};
use std::cell::RefCell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::mpsc;

/// Bytes read per syscall, shared by all connections of a worker.
const READ_CHUNK: usize = 64 * 1024;
/// A connection keeps its reply buffer between batches only up to this size.
const KEEP_OUT_PER_CONN: usize = 4096;

/// A connection handed from the acceptor to a worker.
pub enum Conn {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

/// Readiness waiting, common to TCP and unix sockets.
trait Stream: AsyncRead + AsyncWrite + Unpin {
    async fn wait_readable(&self) -> io::Result<()>;
}
impl Stream for tokio::net::TcpStream {
    async fn wait_readable(&self) -> io::Result<()> {
        self.readable().await
    }
}
impl Stream for tokio::net::UnixStream {
    async fn wait_readable(&self) -> io::Result<()> {
        self.readable().await
    }
}

/// Per-worker scratch input buffer, shared by the worker's connections (one runs at a time
/// and none holds it across an await).
struct Scratch {
    input: Vec<u8>,
}

pub struct Worker {
    pub id: usize,
    pub tx: mpsc::Sender<Conn>,
}

/// Polls a future once with a no-op waker: Ready(result) or None. Used for reads and writes
/// that must not hold the shared buffers across an await.
fn poll_once<T>(f: impl FnOnce(&mut Context<'_>) -> Poll<T>) -> Option<T> {
    let mut cx = Context::from_waker(Waker::noop());
    match f(&mut cx) {
        Poll::Ready(v) => Some(v),
        Poll::Pending => None,
    }
}

impl ClientHandle {
    /// Loopback or unix socket (for protected mode and `enable-debug-command local`).
    pub fn is_local(&self) -> bool {
        self.unix || self.addr.starts_with("127.") || self.addr.starts_with("[::1]")
    }
}

static SHUTDOWN: std::sync::OnceLock<tokio::sync::watch::Sender<Option<ShutdownMode>>> = std::sync::OnceLock::new();

/// Asks the main thread to shut the server down.
pub fn request_shutdown(mode: ShutdownMode) {
    if let Some(tx) = SHUTDOWN.get() {
        let _ = tx.send(Some(mode));
    }
}

enum Step {
    /// Nothing more to read now.
    Drained,
    /// End of file or an I/O error.
    Closed,
    /// Read `n` bytes and executed them, replies appended to the connection's output.
    Done { n: usize, keep: bool },
}

/// One read and the execution of every complete request in it — synchronously, so the worker's
/// shared input buffer is never held across an await. Replies accumulate in `out`.
fn read_and_execute<S: Stream>(
    stream: &mut S,
    session: &mut Session,
    srv: &Server,
    ws: &WorkerStats,
    scratch: &RefCell<Scratch>,
    out: &mut Vec<u8>,
) -> Step {
    let mut guard = scratch.borrow_mut();
    let sc = &mut *guard;
    if sc.input.len() < READ_CHUNK {
        sc.input.resize(READ_CHUNK, 0);
    }
    let mut rb = ReadBuf::new(&mut sc.input);
    let n = match poll_once(|cx| Pin::new(&mut *stream).poll_read(cx, &mut rb)) {
        None => return Step::Drained,
        Some(Err(_)) => return Step::Closed,
        Some(Ok(())) => rb.filled().len(),
    };
    if n == 0 {
        return Step::Closed;
    }
    let mut reply = Reply { buf: std::mem::take(out), proto: session.client.proto };
    let keep = session.feed(srv, ws, &sc.input[..n], &mut reply);
    *out = reply.buf;
    if session.client.sleep_ms > 0 {
        // DEBUG SLEEP: Redis blocks the whole server; we block this worker.
        std::thread::sleep(std::time::Duration::from_millis(session.client.sleep_ms));
        session.client.sleep_ms = 0;
    }
    Step::Done { n, keep }
}

/// Writes `out` completely: directly while the socket takes it, waiting for writability only
/// when its buffer is full. Leaves `out` empty (and small: an idle connection keeps no big
/// buffer).
async fn flush<S: Stream>(stream: &mut S, out: &mut Vec<u8>, ws: &WorkerStats) -> io::Result<()> {
    super::stats::bump(&ws.counters.net_output_bytes, out.len() as u64);
    let mut written = 0;
    while written < out.len() {
        match poll_once(|cx| Pin::new(&mut *stream).poll_write(cx, &out[written..])) {
            Some(Ok(w)) => written += w,
            Some(Err(e)) => return Err(e),
            None => {
                stream.write_all(&out[written..]).await?;
                written = out.len();
            }
        }
    }
    out.clear();
    if out.capacity() > KEEP_OUT_PER_CONN {
        *out = Vec::new();
    }
    Ok(())
}

/// Suspends a client blocked in BLPOP & co until it is served, its deadline passes or it is
/// unblocked; then writes its reply and runs the requests that queued behind it (which may
/// block again). Input arriving meanwhile is buffered; end-of-file cancels the wait.
/// Returns Ok(false) when the connection must close.
async fn wait_blocked<S: Stream>(
    stream: &mut S,
    session: &mut Session,
    srv: &Server,
    ws: &WorkerStats,
) -> io::Result<bool> {
    use super::blocking::WaitState;
    while let Some(w) = session.waiting() {
        let sleep = async {
            match w.deadline_ms {
                Some(d) => {
                    let left = (d - srv.now_ms()).max(0) as u64;
                    tokio::time::sleep(std::time::Duration::from_millis(left)).await
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = w.wake.notified() => {}
            _ = sleep => {
                if w.finish(WaitState::TimedOut) {
                    srv.blocked_clients.fetch_sub(1, Ordering::Relaxed);
                }
            }
            r = stream.wait_readable() => {
                r?;
                let mut buf = [0u8; 16 * 1024];
                let mut rb = ReadBuf::new(&mut buf);
                match poll_once(|cx| Pin::new(&mut *stream).poll_read(cx, &mut rb)) {
                    Some(Ok(())) if rb.filled().is_empty() => return Ok(false),
                    Some(Ok(())) if !session.buffer_input(rb.filled(), srv) => return Ok(false),
                    Some(Ok(())) => {}
                    Some(Err(e)) => return Err(e),
                    None => {}
                }
                if session.client.handle.killed.load(Ordering::Acquire) {
                    return Ok(false);
                }
            }
        }
        if *w.state.lock() == WaitState::Waiting {
            continue;
        }
        let mut reply = Reply::new(session.client.proto);
        let keep = session.resume(srv, ws, &mut reply);
        ws.counters.net_output_bytes.fetch_add(reply.buf.len() as u64, Ordering::Relaxed);
        stream.write_all(&reply.buf).await?;
        if !keep {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Serves one connection until it closes.
async fn serve<S: Stream>(mut stream: S, mut session: Session, srv: Arc<Server>, scratch: Rc<RefCell<Scratch>>) {
    let ws: &WorkerStats = &srv.stats.workers[session.client.worker];
    let handle = session.client.handle.clone();
    let mut out: Vec<u8> = Vec::new();
    'conn: loop {
        // Wait for input. CLIENT KILL and the idle timeout (checked by the cron) shut the
        // socket down, which wakes this wait with an end-of-file.
        if stream.wait_readable().await.is_err() {
            break;
        }
        if handle.killed.load(Ordering::Acquire) {
            break;
        }
        // Read everything available, executing requests as they complete.
        let mut keep = true;
        let mut closed = false;
        loop {
            match read_and_execute(&mut stream, &mut session, &srv, ws, &scratch, &mut out) {
                Step::Drained => break,
                Step::Closed => {
                    closed = true;
                    break;
                }
                Step::Done { n, keep: k } => {
                    keep = k;
                    if !k || n < READ_CHUNK || session.waiting().is_some() || session.client.shutdown.is_some() {
                        break;
                    }
                }
            }
        }
        if !out.is_empty() && !closed {
            // Like Redis's beforeSleep: let the other connections that became readable in
            // this event-loop round run their requests first, then write. The client wakes
            // once to many replies instead of once per reply, which saves the kernel most of
            // the wakeup work on loopback.
            tokio::task::yield_now().await;
            if flush(&mut stream, &mut out, ws).await.is_err() {
                break;
            }
        }
        if closed || !keep {
            break;
        }
        if session.waiting().is_some() {
            match wait_blocked(&mut stream, &mut session, &srv, ws).await {
                Ok(true) => {}
                _ => break 'conn,
            }
        }
        if let Some(mode) = session.client.shutdown.take() {
            request_shutdown(mode);
            // Keep the connection open until the process exits, as Redis does.
            std::future::pending::<()>().await;
        }
        if !session.has_pending() {
            session.shrink();
        }
    }
    super::session::disconnect(&srv, &mut session.client);
    srv.clients.remove(handle.id);
    *handle.closed.lock() = true;
    drop(stream);
}

fn worker_main(id: usize, srv: Arc<Server>, mut rx: mpsc::Receiver<Conn>, ready: Arc<AtomicUsize>) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("worker runtime");
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let scratch = Rc::new(RefCell::new(Scratch { input: Vec::new() }));
        // Active expiry on every worker, sharing one cursor.
        {
            let srv = srv.clone();
            tokio::task::spawn_local(async move {
                loop {
                    let hz = srv.config.hot.hz.load(Ordering::Relaxed).max(1) as u64;
                    tokio::time::sleep(std::time::Duration::from_millis(1000 / hz)).await;
                    super::expire::cycle(&srv, &srv.stats.workers[id].counters);
                    if id == 0 {
                        srv.clock.resync();
                        srv.sample_ops();
                        close_idle_clients(&srv);
                    }
                }
            });
        }
        ready.fetch_add(1, Ordering::Release);
        while let Some(conn) = rx.recv().await {
            let needs_auth = srv.config.hot.has_password.load(Ordering::Relaxed);
            let (addr, laddr, fd, unix) = match &conn {
                Conn::Tcp(s) => (
                    s.peer_addr().map(|a| a.to_string()).unwrap_or_default(),
                    s.local_addr().map(|a| a.to_string()).unwrap_or_default(),
                    std::os::fd::AsRawFd::as_raw_fd(s),
                    false,
                ),
                Conn::Unix(s) => (
                    format!("{}:0", srv.config.get("unixsocket")),
                    srv.config.get("unixsocket"),
                    std::os::fd::AsRawFd::as_raw_fd(s),
                    true,
                ),
            };
            let handle = Arc::new(ClientHandle::new(srv.clients.next_id(), addr, laddr, fd, unix, srv.now_ms()));
            // The socket is open from here on: CLIENT KILL may shut it down.
            *handle.closed.lock() = false;
            srv.clients.add(handle.clone());
            let session = Session::new(Client::new(handle, id, needs_auth));
            let (srv2, sc) = (srv.clone(), scratch.clone());
            match conn {
                Conn::Tcp(s) => {
                    let _ = s.set_nodelay(true);
                    match tokio::net::TcpStream::from_std(s) {
                        Ok(s) => {
                            tokio::task::spawn_local(serve(s, session, srv2, sc));
                        }
                        Err(_) => srv.clients.remove(session.client.id()),
                    }
                }
                Conn::Unix(s) => match tokio::net::UnixStream::from_std(s) {
                    Ok(s) => {
                        tokio::task::spawn_local(serve(s, session, srv2, sc));
                    }
                    Err(_) => srv.clients.remove(session.client.id()),
                },
            }
        }
    });
}

/// `timeout`: closes clients idle for longer (Redis's clientsCron rule).
fn close_idle_clients(srv: &Server) {
    let timeout = srv.config.hot.timeout.load(Ordering::Relaxed) as i64;
    if timeout == 0 {
        return;
    }
    let now = srv.now_ms();
    for h in srv.clients.snapshot() {
        if now - h.last_ms.load(Ordering::Relaxed) > timeout * 1000 {
            log_verbose!("Closing idle client");
            h.kill();
        }
    }
}

/// Raises the open-files limit for maxclients as Redis does; returns the maxclients to use.
fn adjust_open_files(maxclients: usize) -> usize {
    const RESERVED: u64 = 32;
    let want = maxclients as u64 + RESERVED;
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return maxclients;
    }
    if lim.rlim_cur >= want {
        return maxclients;
    }
    let mut best = lim.rlim_cur;
    let mut f = want;
    while f > lim.rlim_cur {
        let nl = libc::rlimit { rlim_cur: f, rlim_max: f.max(lim.rlim_max) };
        let nl = if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &nl) } == 0 {
            Some(f)
        } else {
            let nl2 = libc::rlimit { rlim_cur: f.min(lim.rlim_max), rlim_max: lim.rlim_max };
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &nl2) } == 0 {
                Some(f.min(lim.rlim_max))
            } else {
                None
            }
        };
        if let Some(v) = nl {
            best = v;
            break;
        }
        f -= 16.min(f);
    }
    if best >= want {
        return maxclients;
    }
    log_warning!("You requested maxclients of {} requiring at least {} max file descriptors.", maxclients, want);
    let reduced = best.saturating_sub(RESERVED).max(1) as usize;
    log_warning!("Server can't set maximum open files to {} because of OS error: Operation not permitted.", want);
    log_warning!(
        "Current maximum open files is {}. maxclients has been reduced to {} to compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'.",
        best,
        reduced
    );
    reduced
}

fn bind_tcp(addr: &str, port: u16, backlog: i32) -> io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let ip: std::net::IpAddr = match addr {
        "*" => "0.0.0.0".parse().unwrap(),
        "::*" => "::".parse().unwrap(),
        a => a.parse().map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "bad address"))?,
    };
    let sa = std::net::SocketAddr::new(ip, port);
    let sock = Socket::new(Domain::for_address(sa), Type::STREAM, Some(Protocol::TCP))?;
    if ip.is_ipv6() {
        sock.set_only_v6(true)?;
    }
    sock.set_reuse_address(true)?;
    sock.bind(&sa.into())?;
    sock.listen(backlog)?;
    sock.set_nonblocking(true)?;
    Ok(sock.into())
}

/// Starts the server and blocks until shutdown. Returns the process exit code.
pub fn run(config: crate::config::Config, warnings: Vec<String>) -> i32 {
    super::log::init(&config.get("logfile"), config.hot.loglevel.load(Ordering::Relaxed));
    let threads = config.worker_threads();
    log_notice!("oO0OoO0OoO0Oo Atoll is starting oO0OoO0OoO0Oo");
    log_notice!(
        "Atoll version={}, redis_version={}, bits=64, pid={}, just started",
        env!("CARGO_PKG_VERSION"),
        crate::REDIS_VERSION,
        std::process::id()
    );
    match &config.config_file {
        Some(_) => log_notice!("Configuration loaded"),
        None => log_warning!(
            "Warning: no config file specified, using the default config. In order to specify a config file use atoll-server /path/to/atoll.conf"
        ),
    }
    for w in &warnings {
        log_warning!("{w}");
    }
    let maxclients = config.get_i64("maxclients") as usize;
    let adjusted = adjust_open_files(maxclients);
    if adjusted != maxclients {
        let _ = config.set_many(&[(b"maxclients", adjusted.to_string().as_bytes())]);
    }
    let port = config.get_i64("port") as u16;
    let backlog = config.get_i64("tcp-backlog") as i32;
    let mut listeners = Vec::new();
    if port != 0 {
        for a in config.get("bind").split_whitespace() {
            let (optional, addr) = match a.strip_prefix('-') {
                Some(r) => (true, r),
                None => (false, a),
            };
            match bind_tcp(addr, port, backlog) {
                Ok(l) => listeners.push(l),
                Err(e) if optional => log_verbose!("Skipping optional address {addr}: {e}"),
                Err(e) => {
                    log_warning!("Warning: Could not create server TCP listening socket {addr}:{port}: {e}");
                    log_warning!("Failed listening on port {port} (tcp), aborting.");
                    return 1;
                }
            }
        }
    }
    let unixsocket = config.get("unixsocket");
    let mut unix_listener = None;
    if !unixsocket.is_empty() {
        let _ = std::fs::remove_file(&unixsocket);
        match std::os::unix::net::UnixListener::bind(&unixsocket) {
            Ok(l) => {
                let perm = u32::from_str_radix(&config.get("unixsocketperm"), 8).unwrap_or(0);
                if perm != 0 {
                    use std::os::unix::fs::PermissionsExt;
                    let _ = std::fs::set_permissions(&unixsocket, std::fs::Permissions::from_mode(perm));
                }
                let _ = l.set_nonblocking(true);
                unix_listener = Some(l);
            }
            Err(e) => {
                log_warning!("Failed opening Unix socket: {e}");
                return 1;
            }
        }
    }
    let pidfile = config.get("pidfile");
    if !pidfile.is_empty() {
        let _ = std::fs::write(&pidfile, format!("{}\n", std::process::id()));
    }
    let dir = config.get("dir");
    if !dir.is_empty() {
        if let Err(e) = std::env::set_current_dir(&dir) {
            log_warning!("Can't chdir to '{dir}': {e}");
            return 1;
        }
    }
    let srv = Arc::new(Server::new(config, threads, port));
    let (sd_tx, mut sd_rx) = tokio::sync::watch::channel(None);
    let _ = SHUTDOWN.set(sd_tx);
    let ready = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for id in 0..threads {
        let (tx, rx) = mpsc::channel(1024);
        let (srv2, ready2) = (srv.clone(), ready.clone());
        std::thread::Builder::new()
            .name(format!("atoll-w{id}"))
            .spawn(move || worker_main(id, srv2, rx, ready2))
            .expect("spawn worker");
        workers.push(Worker { id, tx });
    }
    while ready.load(Ordering::Acquire) < threads {
        std::thread::yield_now();
    }
    log_notice!("Running mode=standalone, port={}, threads={}.", port, threads);
    log_notice!("Server initialized");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("main runtime");
    let code = rt.block_on(async move {
        let next = Rc::new(std::cell::Cell::new(0usize));
        let workers = Rc::new(workers);
        let local = tokio::task::LocalSet::new();
        for l in listeners {
            let l = tokio::net::TcpListener::from_std(l).expect("listener");
            let (srv, workers, next) = (srv.clone(), workers.clone(), next.clone());
            local.spawn_local(async move {
                loop {
                    let Ok((s, peer)) = l.accept().await else {
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                        continue;
                    };
                    let Ok(mut s) = s.into_std() else { continue };
                    if !admit(&srv, &mut s, Some(peer.ip())) {
                        continue;
                    }
                    let _ = tcp_keepalive(&s, srv.config.get_i64("tcp-keepalive"));
                    let w = next.get() % workers.len();
                    next.set(w + 1);
                    let _ = workers[w].tx.send(Conn::Tcp(s)).await;
                }
            });
        }
        if let Some(l) = unix_listener {
            let l = tokio::net::UnixListener::from_std(l).expect("unix listener");
            let (srv, workers, next) = (srv.clone(), workers.clone(), next.clone());
            local.spawn_local(async move {
                loop {
                    let Ok((s, _)) = l.accept().await else {
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                        continue;
                    };
                    let Ok(mut s) = s.into_std() else { continue };
                    if !admit(&srv, &mut s, None) {
                        continue;
                    }
                    let w = next.get() % workers.len();
                    next.set(w + 1);
                    let _ = workers[w].tx.send(Conn::Unix(s)).await;
                }
            });
        }
        if port != 0 {
            log_notice!("Ready to accept connections tcp");
        }
        if !unixsocket.is_empty() {
            log_notice!("Ready to accept connections unix");
        }
        local
            .run_until(async {
                let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).unwrap();
                let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).unwrap();
                let mode = tokio::select! {
                    _ = term.recv() => { log_warning!("Received SIGTERM scheduling shutdown..."); ShutdownMode::Default }
                    _ = int.recv() => { log_warning!("Received SIGINT scheduling shutdown..."); ShutdownMode::Default }
                    _ = async {
                        loop {
                            if sd_rx.changed().await.is_err() {
                                break;
                            }
                            if sd_rx.borrow().is_some() {
                                break;
                            }
                        }
                    } => {
                        let m = *sd_rx.borrow();
                        log_warning!("User requested shutdown...");
                        m.unwrap_or(ShutdownMode::Default)
                    }
                };
                shutdown(&srv, mode)
            })
            .await
    });
    std::process::exit(code);
}

/// Accept-time checks: maxclients and protected mode. Writes Redis's error and closes.
fn admit<S: std::io::Write>(srv: &Server, s: &mut S, peer: Option<std::net::IpAddr>) -> bool {
    let stats = &srv.stats.background().counters;
    if srv.clients.len() >= srv.config.hot.maxclients.load(Ordering::Relaxed) {
        let _ = s.write_all(b"-ERR max number of clients reached\r\n");
        stats.rejected_connections.fetch_add(1, Ordering::Relaxed);
        return false;
    }
    if let Some(ip) = peer {
        let protected = srv.config.hot.protected_mode.load(Ordering::Relaxed)
            && !srv.config.hot.has_password.load(Ordering::Relaxed);
        if protected && !ip.is_loopback() {
            let _ = s.write_all(PROTECTED_MSG.as_bytes());
            stats.rejected_connections.fetch_add(1, Ordering::Relaxed);
            return false;
        }
    }
    stats.connections.fetch_add(1, Ordering::Relaxed);
    true
}

const PROTECTED_MSG: &str = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Set up an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

fn tcp_keepalive(s: &std::net::TcpStream, secs: i64) -> io::Result<()> {
    if secs <= 0 {
        return Ok(());
    }
    let sock = socket2::SockRef::from(s);
    let ka = socket2::TcpKeepalive::new()
        .with_time(std::time::Duration::from_secs(secs as u64))
        .with_interval(std::time::Duration::from_secs((secs as u64 / 3).max(1)));
    sock.set_tcp_keepalive(&ka)
}

/// Final steps before exit. SAVE becomes real with persistence; today there is nothing to
/// write, so every mode exits cleanly.
fn shutdown(srv: &Server, mode: ShutdownMode) -> i32 {
    srv.shutting_down.store(true, Ordering::Release);
    if mode == ShutdownMode::Save {
        log_notice!("Saving is not available yet (no persistence); nothing to save.");
    }
    let pidfile = srv.config.get("pidfile");
    if !pidfile.is_empty() {
        log_notice!("Removing the pid file.");
        let _ = std::fs::remove_file(&pidfile);
    }
    let unixsocket = srv.config.get("unixsocket");
    if !unixsocket.is_empty() {
        log_notice!("Removing the unix socket file.");
        let _ = std::fs::remove_file(&unixsocket);
    }
    log_warning!("Atoll is now ready to exit, bye bye...");
    0
}
