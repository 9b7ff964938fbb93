//! Atomic slot migration's moving parts (Valkey 9's protocol, see
//! `services::cluster::migration`): the source's link to the target — one thread per export —
//! and, on the bus thread's cron, the target's ACKs and both ends' timeouts.
//!
//! The export thread connects to the target's client port, authenticates as a replica would
//! (`masteruser`/`masterauth`), sends ESTABLISH, then the slots' point-in-time snapshot as
//! commands straight from the keyspace (`rdbfile::write_slots_snapshot`: no fork, the shards a
//! write is about to change are serialized first), SNAPSHOT-EOF, and from then on the writes
//! the call path copied since the snapshot's instant. Asked to pause, it holds this node's
//! writes back once everything copied is sent; asked for the failover, it grants it and waits
//! until the cluster bus shows the target owning the slots.
//!
//! A second thread reads the target's messages (they are `CLUSTER SYNCSLOTS` commands) and
//! hands them over; only the export thread writes to the socket.

use crate::exec::{PauseBy, Server};
use crate::persist::aof::{encode, CommandReader, Next};
use crate::persist::rdbfile;
use crate::services::cluster::migration::{message, Job, Step};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

/// How long the source holds its writes back for the target to take the slots over (Valkey:
/// `cluster-manual-failover-timeout` × 2, with its default of 5 s).
const PAUSE_MS: i64 = 10_000;
/// Why an export fails when its link does (Valkey's words).
const LOST_TARGET: &str =
    "Connection lost to target. Check CLUSTER GETSLOTMIGRATIONS on the target node for more information.";
/// What REQUEST-FAILOVER extends the pause to, at least (Valkey's CLUSTER_OPERATION_TIMEOUT).
const FAILOVER_MS: i64 = 2_000;

/// The bus thread's cron (every 100 ms): starts new exports' threads; for imports, the ACK
/// each second and the timeout of a silent source.
pub fn cron(srv: &Arc<Server>) {
    let migrations = &srv.cluster.migrations;
    for job in migrations.running(true) {
        if !job.started.swap(true, Ordering::AcqRel) {
            let (srv2, job2) = (srv.clone(), job.clone());
            let spawned = std::thread::Builder::new().name("slot-export".into()).spawn(move || run(&srv2, &job2));
            if let Err(e) = spawned {
                job.fail(&format!("Can't start the slot migration: {e}"));
                finished(srv, &job);
            }
        }
    }
    let now = crate::services::cluster::now_ms();
    let timeout = repl_timeout_ms(srv);
    for job in migrations.running(false) {
        let id = job.link.load(Ordering::Relaxed);
        let Some(h) = (id > 0).then(|| srv.clients.get(id as u64)).flatten() else { continue };
        let mut p = job.progress.lock();
        let heard = p.heard_ms.max(h.last_ms.load(Ordering::Relaxed));
        if now - heard > timeout && !matches!(p.step, Step::FailoverGranted) {
            drop(p);
            if job.fail("Timed out after too long with no interaction") {
                h.kill();
                srv.cluster.import_failed(&job);
                srv.slot_import_ended(&job);
            }
            continue;
        }
        // The target's ACKs start once the source's first one came.
        let acking = !matches!(p.step, Step::WaitingForAck | Step::FailoverGranted);
        if acking && now - p.acked_ms >= 1000 {
            p.acked_ms = now;
            drop(p);
            srv.pubsub.send_raw(&srv.config.hot, &h.mailbox(), &message("ACK"));
        }
    }
}

fn repl_timeout_ms(srv: &Server) -> i64 {
    srv.config.text(crate::config::p::REPL_TIMEOUT).parse::<i64>().unwrap_or(60).max(1) * 1000
}

/// An export ended, however: its writes are no longer copied, its pause is lifted.
fn finished(srv: &Server, job: &Job) {
    *job.stream.lock() = None;
    srv.cluster.migrations.refresh_exporting();
    srv.refresh_effects();
    if srv.cluster.migrations.running(true).iter().all(|j| j.step() != Step::FailoverGranted) {
        srv.unpause(PauseBy::SlotMigration);
    }
}

fn run(srv: &Server, job: &Arc<Job>) {
    match export(srv, job) {
        Ok(()) => {}
        Err(why) => {
            job.fail(&why);
        }
    }
    finished(srv, job);
}

/// What the reader thread hands over.
enum Heard {
    Command(Vec<Vec<u8>>),
    Closed,
}

/// A line of the target's reply (AUTH, ESTABLISH), with its CRLF; None if it closed first.
fn reply_line(r: &mut BufReader<TcpStream>) -> Option<String> {
    let mut line = Vec::new();
    match r.read_until(b'\n', &mut line) {
        Ok(n) if n > 0 => Some(String::from_utf8_lossy(&line).into_owned()),
        _ => None,
    }
}

fn send(sock: &mut TcpStream, argv: &[&[u8]]) -> Result<(), String> {
    let argv: Vec<Vec<u8>> = argv.iter().map(|a| a.to_vec()).collect();
    let mut out = Vec::new();
    encode(&mut out, &argv);
    write(sock, &out)
}

fn write(sock: &mut TcpStream, bytes: &[u8]) -> Result<(), String> {
    sock.write_all(bytes).map_err(|_| LOST_TARGET.to_string())
}

/// The snapshot's instant: every shard locked, so the writes copied from here on are exactly
/// those the snapshot does not hold.
struct Hooks<'a> {
    job: &'a Job,
}

impl rdbfile::SnapshotHooks for Hooks<'_> {
    fn header(&mut self, _: &crate::engine::Keyspace) -> std::io::Result<rdbfile::Header<'static>> {
        Ok(rdbfile::Header::default())
    }

    fn quiesce(&self) -> bool {
        true
    }

    fn begun(&mut self, epoch: Option<u64>) {
        if epoch.is_some() {
            *self.job.stream.lock() = Some(Default::default());
            self.job.set(Step::Snapshotting);
        }
    }
}

/// The snapshot's bytes, written to the link as they are made.
struct Link<'a> {
    sock: &'a mut TcpStream,
    job: &'a Job,
}

impl Write for Link<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.job.cancel.load(Ordering::Relaxed) || self.job.step().finished() {
            return Err(std::io::Error::other("stopped"));
        }
        self.sock.write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn export(srv: &Server, job: &Arc<Job>) -> Result<(), String> {
    let (host, port) = job.peer.clone();
    let timeout = repl_timeout_ms(srv);
    let addr = std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), port))
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| format!("Failed to connect to target node {host}:{port}"))?;
    let mut sock = TcpStream::connect_timeout(&addr, Duration::from_millis(timeout as u64))
        .map_err(|e| format!("Failed to connect to target node {host}:{port}: {e}"))?;
    let _ = sock.set_nodelay(true);
    let _ = sock.set_write_timeout(Some(Duration::from_millis(timeout as u64)));
    let _ = sock.set_read_timeout(Some(Duration::from_millis(timeout as u64)));
    let mut replies = BufReader::new(sock.try_clone().map_err(|e| e.to_string())?);
    // As a replica authenticates to its primary.
    let pass = srv.config.text(crate::config::p::MASTERAUTH);
    if !pass.is_empty() {
        job.set(Step::SendingAuth);
        let user = srv.config.text(crate::config::p::MASTERUSER);
        if user.is_empty() {
            send(&mut sock, &[b"AUTH", pass.as_bytes()])?;
        } else {
            send(&mut sock, &[b"AUTH", user.as_bytes(), pass.as_bytes()])?;
        }
        match reply_line(&mut replies) {
            None => return Err("Target node did not respond to AUTH command".into()),
            Some(l) if l.starts_with('-') => {
                return Err(format!("Failed to AUTH to target node: {}", l.trim_end()));
            }
            Some(_) => {}
        }
    }
    job.set(Step::SendingEstablish);
    let mut out = Vec::new();
    encode(&mut out, &job.establish_argv());
    write(&mut sock, &out)?;
    match reply_line(&mut replies) {
        None => return Err(LOST_TARGET.into()),
        Some(l) if l.starts_with('-') => return Err(format!("Received error during handshake to target: {l}")),
        Some(_) => {}
    }
    write(&mut sock, &message("ACK"))?;
    let _ = sock.set_read_timeout(None);
    let (tx, rx) = mpsc::channel::<Heard>();
    let max_bulk = srv.config.text(crate::config::p::PROTO_MAX_BULK_LEN).parse::<u64>().unwrap_or(512 << 20);
    let result = std::thread::scope(|scope| {
        scope.spawn(move || {
            let mut cmds = CommandReader::new(replies, max_bulk);
            loop {
                match cmds.read_next() {
                    Ok(Next::Command(argv)) => {
                        if tx.send(Heard::Command(argv)).is_err() {
                            return;
                        }
                    }
                    _ => {
                        let _ = tx.send(Heard::Closed);
                        return;
                    }
                }
            }
        });
        let r = drive(srv, job, &mut sock, &rx);
        // The reader ends with the socket.
        let _ = sock.shutdown(std::net::Shutdown::Both);
        r
    });
    result
}

/// From the snapshot to the end: the export's steps, driven by what the target says.
fn drive(srv: &Server, job: &Arc<Job>, sock: &mut TcpStream, heard: &mpsc::Receiver<Heard>) -> Result<(), String> {
    job.set(Step::WaitingToSnapshot);
    let mut slots = vec![false; crate::services::cluster::wire::SLOTS];
    for s in job.slots() {
        slots[s] = true;
    }
    let slots = Arc::new(slots);
    let opts = crate::persist::save_opts(&srv.config);
    let progress = Arc::new(rdbfile::Progress::default());
    loop {
        if job.cancel.load(Ordering::Relaxed) {
            job.set(Step::Cancelled);
            return Ok(());
        }
        if job.step().finished() {
            return Ok(());
        }
        let mut hooks = Hooks { job };
        let link = Link { sock: &mut *sock, job };
        match rdbfile::write_slots_snapshot(&srv.ks, link, &mut hooks, opts, slots.clone(), &progress) {
            Ok(_) => break,
            Err(e) if e.to_string() == rdbfile::ERR_IN_PROGRESS => std::thread::sleep(Duration::from_millis(20)),
            Err(_) if job.cancel.load(Ordering::Relaxed) => {
                job.set(Step::Cancelled);
                return Ok(());
            }
            // Failed meanwhile (a flush): the reason is already the job's.
            Err(_) if job.step().finished() => return Ok(()),
            // The snapshot fails only where the socket does.
            Err(_) => return Err(LOST_TARGET.into()),
        }
    }
    write(sock, &message("SNAPSHOT-EOF"))?;
    job.set(Step::Replicating);
    let timeout = repl_timeout_ms(srv);
    let mut last_ack_sent = 0i64;
    let mut last_ack = srv.now_ms();
    let mut pause_until = 0i64;
    // (The copied writes start with a SELECT of their own — `Captured::db` starts unknown — so
    // none lands in a database the snapshot selected last; Valkey 9.1 sends none there.)
    loop {
        let now = srv.now_ms();
        if job.cancel.load(Ordering::Relaxed) {
            job.set(Step::Cancelled);
            return Ok(());
        }
        let step = job.step();
        if step.finished() {
            return Ok(());
        }
        match heard.recv_timeout(Duration::from_millis(5)) {
            Ok(Heard::Command(argv)) => {
                let sub = argv.get(2).map(|a| a.to_ascii_uppercase()).unwrap_or_default();
                let syncslots = argv.len() == 3
                    && argv[0].eq_ignore_ascii_case(b"cluster")
                    && argv[1].eq_ignore_ascii_case(b"syncslots");
                if argv.len() == 1 && argv[0].eq_ignore_ascii_case(b"ping") {
                    write(sock, b"+PONG\r\n")?;
                } else if syncslots && sub == b"ACK" {
                    last_ack = now;
                    job.progress.lock().last_ack = now / 1000;
                } else if syncslots && sub == b"REQUEST-PAUSE" {
                    if !matches!(step, Step::Snapshotting | Step::Replicating) {
                        return Err("Unexpected state machine transition".into());
                    }
                    job.set(Step::WaitingToPause);
                } else if syncslots && sub == b"REQUEST-FAILOVER" {
                    if step != Step::FailoverPaused {
                        return Err("Unexpected state machine transition".into());
                    }
                    if now >= pause_until {
                        return Err("Unpaused before failover completed".into());
                    }
                    pause_until = pause_until.max(now + FAILOVER_MS);
                    srv.pause(PauseBy::SlotMigration, now, pause_until, false);
                    // Whatever a write that slipped past the pause copied goes first: the
                    // target applies it before it takes the slots.
                    flush_copied(job, sock)?;
                    write(sock, &message("FAILOVER-GRANTED"))?;
                    job.set(Step::FailoverGranted);
                } else {
                    return Err(
                        "Failed to process command during slot migration. Check logs for more information".into()
                    );
                }
            }
            Ok(Heard::Closed) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                // The target closes its end once it has taken the slots.
                if step != Step::FailoverGranted {
                    return Err(LOST_TARGET.into());
                }
                // Nothing more to hear: the cluster bus says when the slots have moved.
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        let step = job.step();
        if step == Step::FailoverGranted {
            match owner_of(srv, job) {
                Owner::Target => {
                    job.set(Step::Success);
                    crate::log_notice!("Slot migration {} ({}) succeeded", job.name, job.ranges_text());
                    return Ok(());
                }
                Owner::Other => return Err("Slots are no longer owned by myself".into()),
                Owner::Me => {}
            }
            if now >= pause_until {
                return Err(
                    "Unpaused before migration completed (migration may have succeeded with lost writes)".into()
                );
            }
            continue;
        }
        flush_copied(job, sock)?;
        if step == Step::WaitingToPause && job.pending() == 0 {
            pause_until = now + PAUSE_MS;
            srv.pause(PauseBy::SlotMigration, now, pause_until, false);
            // A write that passed the pause's check before it began holds its shard's lock
            // until it has published what it copied: once every lock has been had, those are
            // in the copy and go before PAUSED.
            let mut plan = crate::engine::LockPlan::default();
            plan.whole_db(0);
            drop(crate::engine::Locks::acquire(&srv.ks, plan));
            flush_copied(job, sock)?;
            write(sock, &message("PAUSED"))?;
            job.set(Step::FailoverPaused);
        }
        if step == Step::FailoverPaused && now >= pause_until {
            return Err("Timed out before streaming completed".into());
        }
        if now - last_ack_sent >= 1000 {
            last_ack_sent = now;
            write(sock, &message("ACK"))?;
        }
        if now - last_ack > timeout {
            return Err("Timed out after too long with no interaction".into());
        }
    }
}

/// Sends what the call path copied since the last call.
fn flush_copied(job: &Job, sock: &mut TcpStream) -> Result<(), String> {
    let bytes = {
        let mut s = job.stream.lock();
        match s.as_mut() {
            Some(c) if !c.buf.is_empty() => std::mem::take(&mut c.buf),
            _ => return Ok(()),
        }
    };
    write(sock, &bytes)
}

enum Owner {
    Me,
    Target,
    Other,
}

/// Who the cluster view says serves the job's slots now.
fn owner_of(srv: &Server, job: &Job) -> Owner {
    srv.cluster
        .read(|st| {
            let target = crate::services::cluster::parse_name(job.target.as_bytes());
            if job.slots().all(|s| st.slots[s].is_some() && st.slots[s] == target) {
                Owner::Target
            } else if job.slots().any(|s| st.slots[s] != Some(st.myself) && st.slots[s] != target) {
                Owner::Other
            } else {
                Owner::Me
            }
        })
        .unwrap_or(Owner::Other)
}
