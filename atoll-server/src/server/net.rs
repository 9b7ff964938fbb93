//! Server start-up, listeners, the acceptor and shutdown.
//!
//! N worker threads (`evloop.rs`), each with its own epoll loop that owns its connections for
//! their whole life; every command runs to completion on its connection's worker. The main
//! thread (a small tokio runtime) binds the listeners, accepts, applies the accept-time checks
//! (maxclients, protected mode) and hands connections out round-robin through the workers'
//! bounded inboxes; it also waits for SIGTERM/SIGINT and SHUTDOWN.

use super::worker::{Conn, Inbox};
use super::{Server, ShutdownMode};
use crate::{log_notice, log_verbose, log_warning};
use std::io;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

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
    crate::log::init(&config.text(crate::config::p::LOGFILE), config.hot.loglevel.load(Ordering::Relaxed));
    if config.text(crate::config::p::SYSLOG_ENABLED) == "yes" {
        crate::log::open_syslog(
            &config.text(crate::config::p::SYSLOG_IDENT),
            &config.text(crate::config::p::SYSLOG_FACILITY),
        );
    }
    // Into the background first, as Redis: a fork keeps only this thread, and none other
    // has started yet.
    let supervised = crate::config::supervise::detect(&config.text(crate::config::p::SUPERVISED));
    let background = config.text(crate::config::p::DAEMONIZE) == "yes" && !supervised;
    if background {
        crate::config::supervise::daemonize();
    }
    crate::log::install_crash_report();
    crate::log::install_panic_policy();
    // The client port is bound before the rest of start-up (the CPU count from cgroups, the
    // locale, the open-files limit: milliseconds), so a client that connects as soon as the
    // process runs waits in the backlog instead of being refused. A failure is reported below,
    // in its place after the banner, as Redis reports it.
    let port = config.int(crate::config::p::PORT) as u16;
    let backlog = config.int(crate::config::p::TCP_BACKLOG) as i32;
    let mut early_tcp =
        if port == 0 { None } else { try_bind_all(&config.text(crate::config::p::BIND), port, backlog).ok() };
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
    crate::config::process::disable_thp_if_always(config.text(crate::config::p::DISABLE_THP) == "yes");
    if let Err(e) = crate::config::process::set_oom_score(
        &config.text(crate::config::p::OOM_SCORE_ADJ),
        &config.text(crate::config::p::OOM_SCORE_ADJ_VALUES),
    ) {
        log_warning!("{e}");
    }
    // As Redis's start-up: the collation locale ("" from the environment), or stop.
    if crate::collate::set(&config.text(crate::config::p::LOCALE_COLLATE)).is_err() {
        log_warning!("Failed to configure LOCALE for invalid locale name.");
        return 1;
    }
    let maxclients = config.int(crate::config::p::MAXCLIENTS) as usize;
    let adjusted = crate::config::adjust_open_files(maxclients);
    if adjusted != maxclients {
        config.set_internal("maxclients", &adjusted.to_string());
    }
    // Each listening port on every `bind` address (none for port 0); a required address that
    // cannot be bound stops start-up.
    let mut listen = |port: u16, what: &str| {
        if port == 0 {
            Some(Vec::new())
        } else if let Some(l) = if what == "tcp" { early_tcp.take() } else { None } {
            Some(l)
        } else {
            bind_all(&config.text(crate::config::p::BIND), port, backlog, what)
        }
    };
    let tls_port = config.int(crate::config::p::TLS_PORT) as u16;
    let metrics_port = config.int(crate::config::p::METRICS_PORT) as u16;
    // In this order, stopping at the first that fails (as Redis's listeners).
    let mut bound = || Some((listen(port, "tcp")?, listen(tls_port, "tls")?, listen(metrics_port, "metrics")?));
    let Some((listeners, tls_listeners, metrics_listeners)) = bound() else {
        return 1;
    };
    let unixsocket = config.text(crate::config::p::UNIXSOCKET);
    let mut unix_listener = None;
    if !unixsocket.is_empty() {
        let _ = std::fs::remove_file(&unixsocket);
        match std::os::unix::net::UnixListener::bind(&unixsocket) {
            Ok(l) => {
                let perm = u32::from_str_radix(&config.text(crate::config::p::UNIXSOCKETPERM), 8).unwrap_or(0);
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
    // A daemon always has a pid file (Redis's default path when none is set).
    if background && config.text(crate::config::p::PIDFILE).is_empty() {
        config.set_internal("pidfile", "/var/run/redis.pid");
    }
    let pidfile = config.text(crate::config::p::PIDFILE);
    if !pidfile.is_empty() {
        if let Err(e) = std::fs::write(&pidfile, format!("{}\n", std::process::id())) {
            log_warning!("Failed to write PID file: {}", crate::log::strerror(&e));
        }
    }
    // Cluster mode has one database (Redis changes the setting too).
    let dbs = config.int(crate::config::p::DATABASES);
    if config.flag(crate::config::p::CLUSTER_ENABLED) && dbs > 1 {
        log_warning!("WARNING: Changing databases number from {dbs} to 1 since we are in cluster mode");
        config.set_internal("databases", "1");
    }
    let mut table = crate::commands::table::build();
    for r in &config.renames {
        if let Err(e) = table.rename(&r.from, &r.to) {
            eprintln!("{}", r.at.because(e));
            return 1;
        }
    }
    let srv = Arc::new(Server::new(config, table, threads, port));
    if crate::services::tls::wanted(&srv.config) {
        if let Err(e) = srv.tls.reconfigure(&srv.config) {
            log_warning!("{e}");
            log_warning!("Failed to configure TLS. Check logs for more info.");
            return 1;
        }
    }
    if let Err(e) = crate::commands::acl::load_at_startup(&srv) {
        log_warning!("{e}");
        return 1;
    }
    let _ = srv.functions_loader.set(crate::scripting::install_libraries);
    if srv.cluster.enabled && !start_cluster(&srv) {
        return 1;
    }
    let (allocated, _, _) = crate::commands::info::allocated_bytes();
    srv.startup_allocated.store(allocated, Ordering::Relaxed);
    srv.peak_allocated.store(allocated, Ordering::Relaxed);
    // Loading runs on a thread of its own once the server is up: meanwhile commands without
    // Redis's `loading` flag (all but INFO, CONFIG, SHUTDOWN and the like) get `-LOADING`, as
    // in Redis, and INFO shows the progress. With AOF on, the AOF is the dataset (as Redis:
    // the RDB file is not read then).
    srv.persistence.set_loading(true);
    srv.persistence.loading_start_s.store(srv.now_ms() / 1000, Ordering::Relaxed);
    if !srv.config.flag(crate::config::p::APPENDONLY) {
        // Known before the first client can ask (INFO loading_total_bytes).
        let size = std::fs::metadata(crate::daemons::persistence::rdb_path(&srv)).map_or(0, |m| m.len());
        srv.persistence.loading_total_bytes.store(size, Ordering::Relaxed);
    }
    let loader = {
        let srv = srv.clone();
        move || {
            let p = &srv.persistence;
            p.loading
                .key_delay_us
                .store(srv.config.text(crate::config::p::KEY_LOAD_DELAY).parse().unwrap_or(0), Ordering::Relaxed);
            let loaded = if srv.config.flag(crate::config::p::APPENDONLY) {
                crate::daemons::aof::start(&srv)
            } else {
                crate::daemons::persistence::load_at_startup(&srv)
            };
            if let Err(e) = loaded {
                log_warning!("Terminating server after rdb file reading failure.");
                log_warning!("Fatal error loading the DB: {e}. Exiting.");
                std::process::exit(1);
            }
            p.set_loading(false);
        }
    };
    {
        let srv2 = srv.clone();
        std::thread::Builder::new()
            .name("atoll-persist".into())
            .spawn(move || crate::daemons::scheduler::run_thread(srv2))
            .expect("spawn the persistence thread");
        let srv3 = srv.clone();
        std::thread::Builder::new()
            .name("atoll-repl".into())
            .spawn(move || crate::daemons::replication::run_thread(srv3))
            .expect("spawn the replication thread");
        crate::daemons::watchdog::spawn(srv.clone());
        // A crash report names the crashing worker's command and client.
        let weak = Arc::downgrade(&srv);
        crate::log::set_crash_context(Box::new(move || match (weak.upgrade(), crate::lockorder::current_slot()) {
            (Some(srv), Some(id)) => crate::daemons::watchdog::running(&srv, id),
            _ => String::new(),
        }));
        // `replicaof` in the configuration: follow that master from the start.
        let of = srv.config.text(crate::config::p::REPLICAOF);
        let mut it = of.split_whitespace();
        if let (Some(host), Some(port)) = (it.next(), it.next().and_then(|p| p.parse::<u16>().ok())) {
            crate::daemons::replica_link::follow_configured(&srv, host, port);
        }
    }
    let (sd_tx, mut sd_rx) = tokio::sync::watch::channel(None);
    let _ = super::worker::SHUTDOWN.set(sd_tx);
    let ready = Arc::new(AtomicUsize::new(0));
    let mut workers: Vec<Arc<Inbox>> = Vec::new();
    let mut uring = srv.config.text(crate::config::p::IO_BACKEND) == "io_uring";
    if uring && !super::uring::available() {
        log_warning!("io_uring is not available on this system: falling back to epoll.");
        uring = false;
    }
    srv.io_uring.store(uring, Ordering::Relaxed);
    const WORKER_STACK: usize = 64 << 20;
    for id in 0..threads {
        let (srv2, ready2) = (srv.clone(), ready.clone());
        // Scripts run on the workers, and the Lua libraries decode nested data recursively
        // to the depths Redis allows (cjson 1000 levels, cmsgpack about 4000): a large stack
        // (address space; pages are used only as deep as a script goes).
        let builder = std::thread::Builder::new().name(format!("atoll-w{id}")).stack_size(WORKER_STACK);
        let made = if uring {
            super::uring::new_worker().inspect(|inbox| {
                let i = inbox.clone();
                builder
                    .spawn(move || {
                        crate::lockorder::register_thread(id);
                        super::uring::run(id, srv2, i, ready2)
                    })
                    .expect("spawn worker");
            })
        } else {
            super::evloop::new_worker().map(|(poll, inbox)| {
                let i = inbox.clone();
                builder
                    .spawn(move || {
                        crate::lockorder::register_thread(id);
                        super::evloop::run(id, srv2, poll, i, ready2)
                    })
                    .expect("spawn worker");
                inbox
            })
        };
        let inbox = match made {
            Ok(i) => i,
            Err(e) => {
                log_warning!("Failed creating the event loop: {e}");
                return 1;
            }
        };
        let i = inbox.clone();
        srv.pubsub.set_wake(id, Box::new(move || i.wake_loop()));
        workers.push(inbox);
    }
    // Sleeping, not spinning: start-up takes milliseconds, and a spinning thread can starve the
    // others under valgrind's one-thread-at-a-time scheduler.
    while ready.load(Ordering::Acquire) < threads {
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    // Redis's rule: the logo when the log is a terminal's (not a file, not syslog), or when
    // `always-show-logo` asks; else one line.
    let config = &srv.config;
    let to_terminal = config.text(crate::config::p::LOGFILE).is_empty()
        && config.text(crate::config::p::SYSLOG_ENABLED) != "yes"
        // SAFETY: isatty only inspects the descriptor.
        && unsafe { libc::isatty(1) } == 1;
    if to_terminal || config.flag(crate::config::p::ALWAYS_SHOW_LOGO) {
        crate::log::raw(crate::log::NOTICE, &logo(port, threads, uring));
    } else {
        log_notice!(
            "Running mode=standalone, port={}, threads={}, io-backend={}.",
            port,
            threads,
            if uring { "io_uring" } else { "epoll" }
        );
    }
    // The process title, as Redis sets it once it listens (`proc-title-template`).
    crate::config::process::set_title(&srv.config, None);
    log_notice!("Server initialized");
    std::thread::Builder::new().name("atoll-load".into()).spawn(loader).expect("spawn the loader");
    // CONFIG SET port asks the main thread, which owns the listeners, and waits for its answer.
    type Rebind = (u16, std::sync::mpsc::Sender<Result<(), crate::config::ConfigError>>);
    let (rebind_tx, mut rebind_rx) = tokio::sync::mpsc::unbounded_channel::<Rebind>();
    let _ = crate::config::LISTEN.set(Box::new(move |port| {
        let (tx, rx) = std::sync::mpsc::channel();
        use crate::config::ConfigError;
        rebind_tx.send((port, tx)).map_err(|_| ConfigError::Apply("the server is shutting down".into()))?;
        rx.recv_timeout(std::time::Duration::from_secs(5))
            .map_err(|_| ConfigError::Apply("the listeners did not answer".into()))?
    }));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("main runtime");
    let code = rt.block_on(async move {
        let next = Rc::new(std::cell::Cell::new(0usize));
        let workers = Rc::new(workers);
        let local = tokio::task::LocalSet::new();
        // One acceptor task per TCP or TLS listener; the plain TCP ones are kept, so that
        // CONFIG SET port can replace them.
        let acceptor = {
            let (srv, workers, next) = (srv.clone(), workers.clone(), next.clone());
            move |l: std::net::TcpListener, tls: bool| {
                let l = tokio::net::TcpListener::from_std(l).expect("listener");
                let (srv, workers, next) = (srv.clone(), workers.clone(), next.clone());
                async move {
                    first_events(&srv).await;
                    loop {
                        let Ok((s, peer)) = l.accept().await else {
                            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                            continue;
                        };
                        let Ok(mut s) = s.into_std() else { continue };
                        // A TLS client is refused without words: Redis's text cannot go out
                        // before a handshake, and plain text would read as a broken record.
                        let admitted = if tls {
                            admit(&srv, &mut std::io::sink(), Some(peer.ip()))
                        } else {
                            admit(&srv, &mut s, Some(peer.ip()))
                        };
                        if !admitted {
                            continue;
                        }
                        let _ = tcp_keepalive(&s, srv.config.int(crate::config::p::TCP_KEEPALIVE));
                        let conn = if tls {
                            match tls_codec(&srv) {
                                Some(codec) => Conn::Tls(s, codec),
                                None => continue,
                            }
                        } else {
                            Conn::Tcp(s)
                        };
                        let w = pick_worker(&srv, &next, workers.len());
                        hand_out(&workers[w], conn).await;
                    }
                }
            }
        };
        let mut tcp_tasks: Vec<tokio::task::JoinHandle<()>> =
            listeners.into_iter().map(|l| local.spawn_local(acceptor(l, false))).collect();
        for l in tls_listeners {
            local.spawn_local(acceptor(l, true));
        }
        // CONFIG SET port: the new port's listeners first (a failure changes nothing), then
        // the old ones go.
        local.spawn_local({
            let srv = srv.clone();
            async move {
                while let Some((port, reply)) = rebind_rx.recv().await {
                    // The port listened on already (CONFIG SET of the same value): nothing to do.
                    if port == srv.tcp_port.load(Ordering::Relaxed) {
                        let _ = reply.send(Ok(()));
                        continue;
                    }
                    let r = if port == 0 {
                        Ok(Vec::new())
                    } else {
                        try_bind_all(&srv.config.text(crate::config::p::BIND), port, srv.config.int(crate::config::p::TCP_BACKLOG) as i32)
                            .map_err(|(_, e)| {
                                crate::config::ConfigError::Apply(format!(
                                    "Unable to listen on this port: {}",
                                    crate::log::strerror(&e)
                                ))
                            })
                    };
                    let r = r.map(|ls| {
                        for t in tcp_tasks.drain(..) {
                            t.abort();
                        }
                        // This task runs in the LocalSet: its acceptors do too.
                        tcp_tasks = ls.into_iter().map(|l| tokio::task::spawn_local(acceptor(l, false))).collect();
                        srv.tcp_port.store(port, Ordering::Relaxed);
                        log_notice!("Listening on port {port} (tcp)");
                    });
                    let _ = reply.send(r);
                }
            }
        });
        if let Some(l) = unix_listener {
            let l = tokio::net::UnixListener::from_std(l).expect("unix listener");
            let (srv, workers, next) = (srv.clone(), workers.clone(), next.clone());
            local.spawn_local(async move {
                first_events(&srv).await;
                loop {
                    let Ok((s, _)) = l.accept().await else {
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                        continue;
                    };
                    let Ok(mut s) = s.into_std() else { continue };
                    if !admit(&srv, &mut s, None) {
                        continue;
                    }
                    let w = pick_worker(&srv, &next, workers.len());
                    hand_out(&workers[w], Conn::Unix(s)).await;
                }
            });
        }
        for l in metrics_listeners {
            let l = tokio::net::TcpListener::from_std(l).expect("metrics listener");
            local.spawn_local(super::http::serve(l, srv.clone()));
        }
        if metrics_port != 0 {
            log_notice!("Serving metrics and the dashboard on port {metrics_port} (http)");
        }
        if port != 0 {
            log_notice!("Ready to accept connections tcp");
        }
        if tls_port != 0 {
            log_notice!("Ready to accept connections tls");
        }
        if !unixsocket.is_empty() {
            log_notice!("Ready to accept connections unix");
        }
        if srv.config.text(crate::config::p::REPLICAOF).is_empty() {
            crate::config::supervise::notify("Ready to accept connections", true, false);
        } else {
            crate::config::supervise::notify(
                "Ready to accept connections in read-only mode. Waiting for MASTER <-> REPLICA sync",
                true,
                false,
            );
        }
        local
            .run_until(async {
                let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).unwrap();
                let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).unwrap();
                loop {
                    let (mode, signalled) = tokio::select! {
                        _ = term.recv() => { log_warning!("Received SIGTERM scheduling shutdown..."); (signal_mode(&srv, crate::config::p::SHUTDOWN_ON_SIGTERM), true) }
                        _ = int.recv() => { log_warning!("Received SIGINT scheduling shutdown..."); (signal_mode(&srv, crate::config::p::SHUTDOWN_ON_SIGINT), true) }
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
                            (m.unwrap_or(ShutdownMode::Default), false)
                        }
                    };
                    if signalled {
                        // As Redis's cron acts on the signal: not while DEBUG PAUSE-CRON holds
                        // the cron, and not at all once SHUTDOWN ABORT cleared the request.
                        srv.shutdown_asap.store(true, Ordering::Release);
                        while srv.cron_paused.load(Ordering::Relaxed) && srv.shutdown_asap.load(Ordering::Acquire) {
                            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                        }
                        if !srv.shutdown_asap.swap(false, Ordering::AcqRel) {
                            continue;
                        }
                    }
                    // Lagging replicas get their grace period first (a signal's shutdown
                    // always considers it; SHUTDOWN's only when it asked for it).
                    let asked = !srv.shutdown_callers.lock().is_empty();
                    if (signalled || asked) && !wait_for_replicas(&srv).await {
                        // Requests made while it waited were for the shutdown just aborted.
                        sd_rx.borrow_and_update();
                        continue;
                    }
                    // A save that fails keeps the server running, as Redis does: exiting
                    // would lose what could not be written.
                    // The save runs on a thread of its own, so a SIGINT meanwhile is heard: as
                    // Redis's handler, "You insist", the temporary file removed, exit 1.
                    let saver = srv.clone();
                    let mut save = tokio::task::spawn_blocking(move || shutdown(&saver, mode));
                    let done = loop {
                        tokio::select! {
                            r = &mut save => break r.unwrap_or(None),
                            _ = int.recv() => {
                                log_warning!("You insist... exiting now.");
                                // dbfilename is a bare name in the working directory (`dir`).
                                let _ = std::fs::remove_file(crate::persist::rdbfile::temp_path(std::path::Path::new(".")));
                                std::process::exit(1);
                            }
                            _ = term.recv() => log_warning!("Received SIGTERM scheduling shutdown..."),
                        }
                    };
                    match done {
                        Some(code) => return code,
                        None => {
                            log_warning!("Errors trying to shut down the server. Check the logs for more information.");
                            if signalled {
                                log_warning!("SIGTERM received but errors trying to shut down the server, check the logs for more information");
                            }
                            cancel_shutdown(&srv);
                        }
                    }
                }
            })
            .await
    });
    std::process::exit(code);
}

/// Redis loads before its event loop runs and serves events (answering `-LOADING`) only once
/// `loading-process-events-interval-bytes` of the file are read: clients of a small dataset
/// wait in the listen backlog and never see `-LOADING`. Connections are accepted from the
/// same point here.
async fn first_events(srv: &Server) {
    let interval: u64 =
        srv.config.text(crate::config::p::LOADING_PROCESS_EVENTS_INTERVAL_BYTES).parse().unwrap_or(2 << 20);
    let p = &srv.persistence;
    while p.loading() && p.loading.loaded_bytes.load(Ordering::Relaxed) < interval {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
}

/// Listens on `port` at every `bind` address (a `-` marks one that may be missing); None
/// after logging why when a required address cannot be bound.
/// Cluster mode: nodes.conf loaded and locked, the bus port bound, the bus thread started.
fn start_cluster(srv: &Arc<Server>) -> bool {
    use crate::config::p;
    if !srv.config.text(p::REPLICAOF).is_empty() {
        log_warning!("replicaof directive not allowed in cluster mode");
        return false;
    }
    let lock = match crate::daemons::cluster_bus::load(srv) {
        Ok(l) => l,
        Err(e) => {
            log_warning!("{e}");
            return false;
        }
    };
    // The lock lives as long as the process, as Redis keeps its descriptor open.
    std::mem::forget(lock);
    let bus_port = crate::daemons::cluster_bus::settings(srv).bus_port;
    let backlog = srv.config.int(p::TCP_BACKLOG) as i32;
    let Some(ls) = bind_all(&srv.config.text(p::BIND), bus_port, backlog, "cluster bus") else {
        return false;
    };
    crate::daemons::cluster_bus::spawn(srv.clone(), ls);
    true
}

fn bind_all(bind: &str, port: u16, backlog: i32, what: &str) -> Option<Vec<std::net::TcpListener>> {
    match try_bind_all(bind, port, backlog) {
        Ok(ls) => Some(ls),
        Err((addr, e)) => {
            log_warning!("Warning: Could not create server TCP listening socket {addr}:{port}: {e}");
            log_warning!("Failed listening on port {port} ({what}), aborting.");
            None
        }
    }
}

/// Listens on `port` at every `bind` address; the first required address that cannot be
/// bound, and why, otherwise.
fn try_bind_all(bind: &str, port: u16, backlog: i32) -> Result<Vec<std::net::TcpListener>, (String, io::Error)> {
    let mut out = Vec::new();
    for a in bind.split_whitespace() {
        let (optional, addr) = match a.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, a),
        };
        match bind_tcp(addr, port, backlog) {
            Ok(l) => out.push(l),
            Err(e) if optional => log_verbose!("Skipping optional address {addr}: {e}"),
            Err(e) => return Err((addr.to_string(), e)),
        }
    }
    Ok(out)
}

/// The codec of a new TLS connection, from the configuration in use now.
fn tls_codec(srv: &Server) -> Option<Box<super::tls::TlsCodec>> {
    let config = srv.tls.server_config()?;
    match super::tls::TlsCodec::new(config) {
        Ok(c) => Some(Box::new(c)),
        Err(e) => {
            log_warning!("Error creating a TLS connection: {e}");
            None
        }
    }
}

/// Gives a connection to a worker; if its inbox is full (the worker is far behind), waits a
/// little rather than queueing without bound.
/// The next worker round-robin, passing over the one running a script that has turned busy:
/// that worker serves nobody until the script ends, and a new connection (an operator's
/// SCRIPT KILL) must be answered meanwhile.
fn pick_worker(srv: &Server, next: &std::cell::Cell<usize>, n: usize) -> usize {
    let mut w = next.get() % n;
    let run = &srv.scripts.run;
    if n > 1 && run.busy.load(Ordering::Relaxed) && run.worker.load(Ordering::Relaxed) == w {
        w = (w + 1) % n;
    }
    next.set(w + 1);
    w
}

async fn hand_out(inbox: &Inbox, mut conn: Conn) {
    for _ in 0..1000 {
        match inbox.try_push(conn) {
            None => return,
            Some(back) => conn = back,
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    log_warning!("Worker inbox full: dropping a new connection");
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
        // As Redis: protected while the default user needs no password.
        let protected = srv.config.hot.protected_mode.load(Ordering::Relaxed) && srv.acl.default.rules().nopass;
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

/// `shutdown-on-sigterm` / `shutdown-on-sigint`: whether a signal's shutdown saves.
fn signal_mode(srv: &Server, param: crate::config::table::Param<String>) -> ShutdownMode {
    let v = srv.config.text(param);
    if v.split(' ').any(|f| f == "nosave") {
        ShutdownMode::NoSave
    } else if v.split(' ').any(|f| f == "save") {
        ShutdownMode::Save
    } else {
        ShutdownMode::Default
    }
}

/// Redis's shutdown grace period: while replicas have not acknowledged the whole stream,
/// writes are paused and they get up to `shutdown-timeout` seconds (asked for an ACK at
/// once). False if SHUTDOWN ABORT ended it (the server goes on).
async fn wait_for_replicas(srv: &Server) -> bool {
    let timeout = srv.config.int(crate::config::p::SHUTDOWN_TIMEOUT);
    if timeout <= 0 || srv.repl.lagging(srv.now_ms()).is_empty() {
        return true;
    }
    // (A replica's stream is its master's: it asks nothing of its own replicas.)
    if !srv.writes_paused() && !srv.repl.proxying.load(Ordering::Acquire) {
        srv.repl.feed_command(&srv.reach(), &[b"REPLCONF", b"GETACK", b"*"]);
    }
    let start = srv.now_ms();
    srv.pause(crate::exec::PauseBy::Shutdown, start, i64::MAX, false);
    let deadline = start + timeout * 1000;
    srv.shutdown_deadline_ms.store(deadline, Ordering::Relaxed);
    log_notice!("Waiting for replicas before shutting down.");
    loop {
        if srv.shutdown_abort.swap(false, Ordering::AcqRel) {
            log_notice!("Shutdown manually aborted.");
            cancel_shutdown(srv);
            return false;
        }
        let now = srv.now_ms();
        if now >= deadline || srv.repl.lagging(now).is_empty() {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// The shutdown did not happen (aborted, or its save failed): writes resume, and the
/// clients whose SHUTDOWN waited are told, as Redis answers them.
fn cancel_shutdown(srv: &Server) {
    srv.shutdown_deadline_ms.store(0, Ordering::Relaxed);
    srv.unpause(crate::exec::PauseBy::Shutdown);
    let callers = std::mem::take(&mut *srv.shutdown_callers.lock());
    srv.blocked_clients.fetch_sub(callers.len(), Ordering::Relaxed);
    for h in callers {
        srv.pubsub.send_raw(&srv.config.hot, &h.mailbox(), b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n");
    }
}

/// Final steps before exit: the final save (SAVE, or by default when `save` points are
/// configured; NOSAVE skips it), then the pid and socket files. None if the save failed.
fn shutdown(srv: &Server, mode: ShutdownMode) -> Option<i32> {
    crate::config::supervise::notify("Shutting down", false, true);
    // Redis's finishShutdown reports the replicas first, whatever happens next.
    let lagging = srv.repl.lagging(srv.now_ms());
    for (name, behind, lag, state) in &lagging {
        log_notice!("Lagging replica {name} reported offset {behind} behind master, lag={lag}, state={state}.");
    }
    let replicas = srv.repl.all_replicas().len();
    if replicas > 0 {
        log_notice!(
            "{} of {replicas} replicas are in sync when shutting down.",
            replicas.saturating_sub(lagging.len())
        );
    }
    if crate::daemons::aof::writing_initial(srv) {
        log_warning!("Writing initial AOF, can't exit.");
        crate::config::supervise::notify("Writing initial AOF, can't exit.", false, false);
        return None;
    }
    crate::daemons::aof::stop_rewrite(srv);
    if crate::daemons::persistence::shutdown_save(srv, mode).is_err() {
        return None;
    }
    srv.shutting_down.store(true, Ordering::Release);
    if let Some(log) = srv.persistence.aof.log() {
        log_notice!("Calling fsync() on the AOF file.");
        log.close();
    }
    let pidfile = srv.config.text(crate::config::p::PIDFILE);
    if !pidfile.is_empty() {
        log_notice!("Removing the pid file.");
        let _ = std::fs::remove_file(&pidfile);
    }
    let unixsocket = srv.config.text(crate::config::p::UNIXSOCKET);
    if !unixsocket.is_empty() {
        log_notice!("Removing the unix socket file.");
        let _ = std::fs::remove_file(&unixsocket);
    }
    log_warning!("Atoll is now ready to exit, bye bye...");
    Some(0)
}

/// Atoll's start-up logo (an atoll: a ring of reef round its lagoon), with what Redis's shows
/// beside its own: version, mode, port and pid.
fn logo(port: u16, threads: usize, uring: bool) -> String {
    let backend = if uring { "io_uring" } else { "epoll" };
    let (version, redis, pid) = (env!("CARGO_PKG_VERSION"), crate::REDIS_VERSION, std::process::id());
    [
        "                .-~~~~~~~~-.".to_string(),
        format!("           .-~  .-~~~~-.  ~-.          Atoll {version} (redis_version {redis}) 64 bit"),
        "          /   .~          ~.   \\".to_string(),
        format!("         |   (    lagoon    )   |       Running in standalone mode, {threads} threads ({backend})"),
        format!("          \\   `~.        .~'   /        Port: {port}"),
        format!("           `-.   `~~~~~~'   .-'         PID: {pid}"),
        "              `~-.______.-~'".to_string(),
        String::new(),
        String::new(),
    ]
    .join("\n")
}
