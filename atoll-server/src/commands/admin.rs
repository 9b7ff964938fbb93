//! Server roles and extensions: ROLE, the master's side of replication (REPLCONF, PSYNC/SYNC,
//! WAIT; see `exec::replication`), REPLICAOF/SLAVEOF (following a master: `exec::upstream`), MODULE (no
//! modules: LIST is empty, LOAD is refused), and LOLWUT, with our own art.

use crate::daemons::replication as repl;
use crate::exec::*;
use std::sync::atomic::Ordering;

// ROLE
pub fn role(ctx: &mut Ctx) -> CmdResult {
    let srv = ctx.srv;
    let up = &srv.repl.upstream;
    if let Some((host, port)) = up.master.lock().clone() {
        use crate::daemons::replica_link::{CONNECTED, CONNECTING, HANDSHAKE, SYNC};
        ctx.reply.array(5);
        ctx.reply.bulk(b"slave");
        ctx.reply.bulk(host.as_bytes());
        ctx.reply.int(port as i64);
        let state: &[u8] = match up.state.load(Ordering::Relaxed) {
            CONNECTING => b"connecting",
            HANDSHAKE => b"handshake",
            SYNC => b"sync",
            CONNECTED => b"connected",
            _ => b"connect",
        };
        ctx.reply.bulk(state);
        let off = if up.synced.load(Ordering::Relaxed) { up.offset.load(Ordering::Relaxed) } else { -1 };
        ctx.reply.int(off);
        return Ok(());
    }
    let replicas = srv.repl.replicas();
    ctx.reply.array(3);
    ctx.reply.bulk(b"master");
    ctx.reply.int(srv.repl.offset());
    let online: Vec<_> = replicas.iter().filter(|r| r.link() == repl::Link::Online).collect();
    ctx.reply.array(online.len());
    for r in online {
        ctx.reply.array(3);
        ctx.reply.bulk(r.ip.as_bytes());
        ctx.reply.bulk(r.port.to_string().as_bytes());
        ctx.reply.bulk(r.ack_offset.load(Ordering::Relaxed).to_string().as_bytes());
    }
    Ok(())
}

// REPLCONF option value [option value ...]
pub fn replconf(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let replica = ctx.client.handle.replica.load(Ordering::Relaxed);
    let mut i = 1;
    while i < ctx.args.len() {
        let (opt, val) = (ctx.arg(i), ctx.arg(i + 1));
        if eq_ic(opt, "listening-port") {
            let port = parse_int(val).ok().filter(|p| (0..=65535).contains(p)).ok_or(CmdError::NotInteger)?;
            ctx.client.repl_hs.get_or_insert_with(Default::default).port = port as u16;
        } else if eq_ic(opt, "ip-address") {
            let ip = String::from_utf8_lossy(val).into_owned();
            ctx.client.repl_hs.get_or_insert_with(Default::default).ip = Some(ip);
        } else if eq_ic(opt, "capa") {
            if eq_ic(val, "eof") {
                ctx.client.repl_hs.get_or_insert_with(Default::default).capa_eof = true;
            }
        } else if eq_ic(opt, "ack") || eq_ic(opt, "fack") {
            // From a replica: its offset (and its AOF's, FACK), no reply (Redis's
            // replconfCommand).
            if replica && eq_ic(opt, "ack") {
                let fack = (ctx.args.len() >= 5 && eq_ic(ctx.arg(3), "fack"))
                    .then(|| crate::protocol::parse_i64(ctx.arg(4)))
                    .flatten();
                if let Some(off) = crate::protocol::parse_i64(val) {
                    repl::ack(ctx.srv, ctx.client.id(), off, fack);
                }
            }
            return Ok(());
        } else if eq_ic(opt, "getack") {
            // Asked of a replica by its master; a master has nothing to say.
            return Ok(());
        } else if eq_ic(opt, "rdb-only") || eq_ic(opt, "rdb-filter-only") {
            return Err(CmdError::msg(format!(
                "ERR REPLCONF {} is not supported by Atoll yet",
                String::from_utf8_lossy(opt).to_lowercase()
            )));
        } else {
            return Err(CmdError::msg(format!("ERR Unrecognized REPLCONF option: {}", String::from_utf8_lossy(opt))));
        }
        i += 2;
    }
    ctx.reply.ok();
    Ok(())
}

// PSYNC replicationid offset  /  SYNC
pub fn psync(ctx: &mut Ctx) -> CmdResult {
    // Already a replica: ignored, as in Redis.
    if ctx.client.handle.replica.load(Ordering::Relaxed) {
        return Ok(());
    }
    let up = &ctx.srv.repl.upstream;
    // PSYNC replid offset FAILOVER: our master hands over to us (its FAILOVER), if we follow
    // the history it names.
    if ctx.args.len() > 3 && eq_ic(ctx.arg(0), "psync") && eq_ic(ctx.arg(3), "failover") {
        let id = String::from_utf8_lossy(ctx.arg(1)).into_owned();
        crate::log_notice!("Failover request received for replid {id}.");
        if !up.following() {
            return Err(CmdError::msg("ERR PSYNC FAILOVER can't be sent to a master."));
        }
        if *ctx.srv.replid.lock() != id {
            return Err(CmdError::msg("ERR PSYNC FAILOVER replid must match my replid."));
        }
        crate::daemons::replica_link::unfollow(ctx.srv);
        crate::log_notice!(
            "MASTER MODE enabled (failover request from 'id={} addr={}')",
            ctx.client.id(),
            ctx.client.handle.addr
        );
    }
    if ctx.srv.repl.failover.lock().state != repl::FailoverState::None {
        return Err(CmdError::msg("NOMASTERLINK Can't SYNC while failing over"));
    }
    if up.following() {
        // A replica serves replicas of its own once its link is up (chained replication).
        if up.state.load(Ordering::Relaxed) != crate::daemons::replica_link::CONNECTED {
            return Err(CmdError::msg("NOMASTERLINK Can't SYNC while not connected with my master"));
        }
    }
    if ctx.client.in_exec {
        return Err(CmdError::msg("ERR Replica can't be in a transaction"));
    }
    // An offset that is not a number: an error, and the client stays what it was (Redis's
    // syncCommand, since 7.0.12).
    if eq_ic(ctx.arg(0), "psync") && ctx.args.len() >= 3 && crate::protocol::parse_i64(ctx.arg(2)).is_none() {
        let hs = ctx.client.repl_hs.as_deref();
        let ip = hs
            .and_then(|h| h.ip.clone())
            .unwrap_or_else(|| crate::daemons::replication::host_of(&ctx.client.handle.addr));
        let port = hs.map(|h| h.port).unwrap_or(0);
        crate::log_warning!("Replica {ip}:{port} asks for synchronization but with a wrong offset");
        return Err(CmdError::msg("ERR value is not an integer or out of range"));
    }
    let hs = ctx.client.repl_hs.take().map(|b| *b).unwrap_or_default();
    let psync = (ctx.args.len() >= 3).then(|| (ctx.arg(1), ctx.arg(2)));
    let mut head = Vec::new();
    let handle = ctx.client.handle.clone();
    repl::attach(ctx.srv, &handle, &hs, psync, &mut head);
    ctx.client.replica = true;
    // A partial resync answers +CONTINUE now; a full one answers when its snapshot begins.
    if !head.is_empty() {
        ctx.reply.raw(&head);
    }
    Ok(())
}

// REPLICAOF host port | NO ONE   (and SLAVEOF)
pub fn replicaof(ctx: &mut Ctx) -> CmdResult {
    if ctx.srv.cluster.enabled {
        return Err(CmdError::msg("ERR REPLICAOF not allowed in cluster mode."));
    }
    if ctx.srv.repl.failover.lock().state != repl::FailoverState::None {
        return Err(CmdError::msg("ERR REPLICAOF not allowed while failing over."));
    }
    if eq_ic(ctx.arg(1), "no") && eq_ic(ctx.arg(2), "one") {
        if ctx.srv.repl.upstream.following() {
            crate::daemons::replica_link::unfollow(ctx.srv);
        }
        ctx.reply.ok();
        return Ok(());
    }
    let port = ctx.arg(2);
    let port = match crate::protocol::parse_i64(port) {
        Some(p) if port.iter().all(|c| c.is_ascii_digit()) && (0..=65535).contains(&p) => p as u16,
        _ => return Err(CmdError::msg("ERR Invalid master port")),
    };
    let host = String::from_utf8_lossy(ctx.arg(1)).into_owned();
    if crate::daemons::replica_link::follow(ctx.srv, &host, port) {
        crate::log_notice!("REPLICAOF {host}:{port} enabled (user request from 'id={}')", ctx.client.id());
        ctx.reply.ok();
    } else {
        ctx.reply.simple("OK Already connected to specified master");
    }
    Ok(())
}

// FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT milliseconds]
//
// Hands the master's role to a replica without losing a write: writes pause until the
// replica has acknowledged the whole stream, then this server follows it and asks it to take
// over (PSYNC … FAILOVER); the replication thread and the link carry it out
// (`daemons::replication::start_failover`), INFO's `master_failover_state` follows it.
pub fn failover(ctx: &mut Ctx) -> CmdResult {
    let srv = ctx.srv;
    if srv.cluster.enabled {
        return Err(CmdError::msg("ERR FAILOVER not allowed in cluster mode. Use CLUSTER FAILOVER command instead."));
    }
    if ctx.args.len() == 2 && eq_ic(ctx.arg(1), "abort") {
        if srv.repl.failover.lock().state == repl::FailoverState::None {
            return Err(CmdError::msg("ERR No failover in progress."));
        }
        repl::abort_failover(srv, "Failover manually aborted");
        ctx.reply.ok();
        return Ok(());
    }
    let (mut timeout, mut force, mut target) = (0i64, false, None::<(String, i64)>);
    let mut j = 1;
    while j < ctx.args.len() {
        let a = ctx.arg(j);
        if eq_ic(a, "timeout") && j + 1 < ctx.args.len() && timeout == 0 {
            timeout = ctx.arg_i64(j + 1)?;
            if timeout <= 0 {
                return Err(CmdError::msg("ERR FAILOVER timeout must be greater than 0"));
            }
            j += 2;
        } else if eq_ic(a, "to") && j + 2 < ctx.args.len() && target.is_none() {
            let port = ctx.arg_i64(j + 2)?;
            target = Some((String::from_utf8_lossy(ctx.arg(j + 1)).into_owned(), port));
            j += 3;
        } else if eq_ic(a, "force") && !force {
            force = true;
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    if srv.repl.failover.lock().state != repl::FailoverState::None {
        return Err(CmdError::msg("ERR FAILOVER already in progress."));
    }
    if srv.repl.upstream.following() {
        return Err(CmdError::msg("ERR FAILOVER is not valid when server is a replica."));
    }
    if srv.repl.connected() == 0 {
        return Err(CmdError::msg("ERR FAILOVER requires connected replicas."));
    }
    if force && (timeout == 0 || target.is_none()) {
        return Err(CmdError::msg("ERR FAILOVER with force option requires both a timeout and target HOST and IP."));
    }
    let target = match target {
        Some((host, port)) => {
            let found = u16::try_from(port).ok().and_then(|p| srv.repl.find_replica(&host, p));
            let Some(r) = found else {
                return Err(CmdError::msg("ERR FAILOVER target HOST and PORT is not a replica."));
            };
            if r.link() != repl::Link::Online {
                return Err(CmdError::msg("ERR FAILOVER target replica is not online."));
            }
            Some((host, r.port))
        }
        None => None,
    };
    repl::start_failover(srv, target, timeout, force);
    ctx.reply.ok();
    Ok(())
}

// WAITAOF numlocal numreplicas timeout
pub fn waitaof(ctx: &mut Ctx) -> CmdResult {
    let numlocal = match crate::protocol::parse_i64(ctx.arg(1)) {
        Some(n) if (0..=1).contains(&n) => n,
        Some(_) => return Err(CmdError::msg("ERR value is out of range, value must between 0 and 1")),
        None => return Err(CmdError::NotInteger),
    };
    let numreplicas = match crate::protocol::parse_i64(ctx.arg(2)) {
        Some(n) if n >= 0 => n,
        Some(_) => return Err(CmdError::msg("ERR value is out of range, must be positive")),
        None => return Err(CmdError::NotInteger),
    };
    let deadline = ack_deadline(ctx, ctx.arg(3))?;
    let srv = ctx.srv;
    if srv.repl.upstream.following() {
        return Err(CmdError::msg("ERR WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated."));
    }
    let log = srv.persistence.aof.log();
    if numlocal > 0 && log.is_none() {
        return Err(CmdError::msg(repl::ERR_WAITAOF_NO_AOF));
    }
    // Everything appended so far must be fsync'd (this client's writes are in it), and the
    // replicas' AOFs must hold what this thread fed them.
    let bytes = log.as_ref().map_or(0, |l| l.appended());
    let here = log.as_ref().is_some_and(|l| l.durable.load(Ordering::Acquire) >= bytes) as i64;
    let target = repl::fed_here();
    let got = srv.repl.aof_acked(target) as i64;
    if (here >= numlocal && got >= numreplicas) || ctx.client.in_exec {
        ctx.reply.array(2);
        ctx.reply.int(here);
        ctx.reply.int(got);
        return Ok(());
    }
    let what = [numreplicas, target, deadline, numlocal, bytes as i64];
    block_for_acks(ctx, b"WAITAOF", &what, |reply| {
        reply.array(2);
        reply.int(0);
        reply.int(0);
    });
    Ok(())
}

/// WAIT's and WAITAOF's timeout (ms, 0: none) as a deadline in unix ms (0: none).
fn ack_deadline(ctx: &Ctx, arg: &[u8]) -> Result<i64, CmdError> {
    let timeout = crate::protocol::parse_i64(arg)
        .ok_or_else(|| CmdError::msg("ERR timeout is not an integer or out of range"))?;
    if timeout < 0 {
        return Err(CmdError::msg("ERR timeout is negative"));
    }
    if timeout > 0 && timeout > i64::MAX - ctx.ks.now {
        return Err(CmdError::msg("ERR timeout is out of range"));
    }
    Ok(if timeout > 0 { ctx.ks.now + timeout } else { 0 })
}

/// Blocks the client until the replication thread ends its wait (`repl::add_wait`, which
/// reads what is waited for from the waiter's arguments: replicas, offset, deadline, and
/// for WAITAOF the local copies and the AOF bytes). It also ends it at its deadline,
/// replying the counts by then; `on_timeout` is not reached.
fn block_for_acks(ctx: &mut Ctx, name: &[u8], what: &[i64], on_timeout: blocking::TimeoutFn) {
    let mut argv = vec![name.to_vec()];
    argv.extend(what.iter().map(|v| v.to_string().into_bytes()));
    ctx.block(blocking::BlockRequest {
        argv: Some(argv),
        keys: Vec::new(),
        deadline_ms: None,
        serve: blocking::never_served,
        on_timeout,
        registered: Some(repl::add_wait),
    });
}

// MODULE HELP
pub fn module_help(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() == 1 {
        return Err(CmdError::Arity("module".into()));
    }
    help_reply(
        ctx,
        "MODULE",
        &[
            "LIST",
            "    Return a list of loaded modules.",
            "LOAD <path> [<arg> ...]",
            "    Load a module library from <path>, passing to it any optional arguments.",
            "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
            "    Load a module library from <path>, while passing it module configurations and optional arguments.",
            "UNLOAD <name>",
            "    Unload a module.",
        ],
    );
    Ok(())
}

// MODULE LIST
pub fn module_list(ctx: &mut Ctx) -> CmdResult {
    ctx.reply.array(0);
    Ok(())
}

// MODULE LOAD path [arg ...]  /  MODULE LOADEX path ...
pub fn module_load(ctx: &mut Ctx) -> CmdResult {
    crate::log_warning!(
        "Module {} failed to load: Atoll does not load Redis modules (their C API is Redis's own process)",
        String::from_utf8_lossy(ctx.arg(2))
    );
    Err(CmdError::msg("ERR Error loading the extension. Please check the server logs."))
}

// MODULE UNLOAD name
pub fn module_unload(_ctx: &mut Ctx) -> CmdResult {
    Err(CmdError::msg("ERR Error unloading module: no such module with that name"))
}

/// An atoll seen from above, in a field of `w` × `h` characters: a ring of reef around a
/// lagoon, surf on the outside, the ring's width and the sea's swell varying with `seed`.
fn atoll_art(w: usize, h: usize, seed: u64) -> String {
    let mut out = String::new();
    let (cx, cy) = (w as f64 / 2.0, h as f64 / 2.0);
    let r = (w.min(h * 2) as f64) * 0.35;
    for y in 0..h {
        for x in 0..w {
            // Characters are about twice as tall as wide.
            let (dx, dy) = (x as f64 - cx, (y as f64 - cy) * 2.0);
            let angle = dy.atan2(dx);
            let wobble =
                1.0 + 0.08 * (angle * 3.0 + seed as f64).sin() + 0.05 * (angle * 7.0 - seed as f64 * 0.7).cos();
            let d = (dx * dx + dy * dy).sqrt() / (r * wobble);
            let c = match d {
                d if d < 0.62 => '.',
                d if d < 0.74 => ':',
                d if d < 1.0 => '#',
                d if d < 1.08 => '%',
                _ if (x as u64 * 7 + y as u64 * 13 + seed).is_multiple_of(11) => '~',
                _ => ' ',
            };
            out.push(c);
        }
        out.push('\n');
    }
    out
}

// LOLWUT [VERSION version]
pub fn lolwut(ctx: &mut Ctx) -> CmdResult {
    let mut seed = 0u64;
    if ctx.args.len() >= 3 && eq_ic(ctx.arg(1), "version") {
        seed = parse_int(ctx.arg(2))?.unsigned_abs();
    }
    let art = atoll_art(64, 20, seed);
    let text = format!("{art}\nAtoll ver. {} (Redis ver. {})\n", env!("CARGO_PKG_VERSION"), crate::REDIS_VERSION);
    ctx.reply.verbatim("txt", text.as_bytes());
    Ok(())
}

// WAIT numreplicas timeout
//
// A master without replicas: no replica acknowledges anything, so the answer is 0 — at once
// when no replica was asked for, or from a script or a transaction (they never block);
// otherwise once the timeout (milliseconds; 0 = forever) passes, as Redis waits for acks that
// cannot come.
pub fn wait(ctx: &mut Ctx) -> CmdResult {
    if ctx.srv.repl.upstream.following() {
        return Err(CmdError::msg("ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated."));
    }
    let numreplicas = ctx.arg_i64(1)?;
    let deadline = ack_deadline(ctx, ctx.arg(2))?;
    let srv = ctx.srv;
    let target = repl::fed_here();
    let acked = srv.repl.acked(target);
    if acked as i64 >= numreplicas || ctx.client.in_exec {
        ctx.reply.int(acked as i64);
        return Ok(());
    }
    block_for_acks(ctx, b"WAIT", &[numreplicas, target, deadline], |reply| reply.int(0));
    Ok(())
}
