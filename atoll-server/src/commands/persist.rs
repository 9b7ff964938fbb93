//! Persistence commands: DUMP and RESTORE (Redis's payloads), SAVE, BGSAVE and LASTSAVE.
//! The formats live in `persist`; this module parses arguments and applies the results.

use crate::daemons::persistence;
use crate::exec::{eq_ic, parse_int, CmdError, CmdResult, Ctx};
use crate::persist;
use crate::services::migrate::MigrateSockets;
use crate::services::notify;

// DUMP key
pub fn dump(ctx: &mut Ctx) -> CmdResult {
    let opts = persist::save_opts(&ctx.srv.config);
    match ctx.ks.lookup_read(ctx.args[1]) {
        None => ctx.reply.null(),
        Some(o) => {
            let payload = persist::dump(&o, &opts);
            ctx.reply.bulk(&payload);
        }
    }
    Ok(())
}

// RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]
pub fn restore(ctx: &mut Ctx) -> CmdResult {
    let args = ctx.args;
    let key = args[1];
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq): (Option<i64>, Option<i64>) = (None, None);
    let mut j = 4;
    while j < args.len() {
        let more = j + 1 < args.len();
        if eq_ic(args[j], "REPLACE") {
            replace = true;
        } else if eq_ic(args[j], "ABSTTL") {
            absttl = true;
        } else if eq_ic(args[j], "IDLETIME") && more && freq.is_none() {
            let v = parse_int(args[j + 1])?;
            if v < 0 {
                return Err(CmdError::msg("ERR Invalid IDLETIME value, must be >= 0"));
            }
            idle = Some(v);
            j += 1;
        } else if eq_ic(args[j], "FREQ") && more && idle.is_none() {
            let v = parse_int(args[j + 1])?;
            if !(0..=255).contains(&v) {
                return Err(CmdError::msg("ERR Invalid FREQ value, must be >= 0 and <= 255"));
            }
            freq = Some(v);
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    if !replace && ctx.ks.lookup_write(key).is_some() {
        return Err(CmdError::msg("BUSYKEY Target key name already exists."));
    }
    let mut ttl = parse_int(args[2])?;
    if ttl < 0 {
        return Err(CmdError::msg("ERR Invalid TTL value, must be >= 0"));
    }
    let skip_crc = ctx.srv.skip_checksum.load(std::sync::atomic::Ordering::Relaxed);
    let c = &*ctx.client;
    let trusted = c.replaying
        || c.handle.master.load(std::sync::atomic::Ordering::Relaxed)
        || c.user.as_ref().is_some_and(|u| u.rules().skip_sanitize);
    let opts = persist::restore_opts(&ctx.srv.config, trusted);
    let val = persist::restore(args[3], &opts, skip_crc);
    if val.is_ok() {
        persist::log_repairs(key, "RESTORE");
    } else {
        crate::engine::rdb::load::take_repairs();
    }
    let val = val.map_err(|e| {
        if let persist::PayloadError::BadData(why) = &e {
            // Logged as Redis logs a corrupt payload, so an operator sees what was wrong.
            crate::log_warning!("Internal error in RDB reading offset 0, function at RESTORE -> {why}");
        }
        CmdError::msg(e.reply())
    })?;
    // With REPLACE the key was never looked up: an old value goes even if past its time
    // (Redis's dbDelete, no `expired`).
    let deleted = replace && ctx.ks.delete_unlooked(key).is_some();
    if ttl != 0 && !absttl {
        ttl = ttl.saturating_add(ctx.ks.now);
    }
    if ttl != 0 && ttl <= ctx.ks.now {
        // Already expired: the key is gone (a replaced one deleted), nothing is added.
        if deleted {
            // As Redis's restoreCommand: UNLINK when server-side deletions are lazy.
            let verb: &[u8] =
                if ctx.srv.config.flag(crate::config::p::LAZYFREE_LAZY_SERVER_DEL) { b"UNLINK" } else { b"DEL" };
            ctx.rewrite_effect(vec![verb.to_vec(), key.to_vec()]);
            ctx.ks.note(notify::GENERIC, "del", key);
        } else {
            ctx.no_effect();
        }
        ctx.reply.ok();
        return Ok(());
    }
    ctx.ks.set(key, val, false);
    if ttl != 0 {
        ctx.ks.set_expire(key, ttl);
        if !absttl {
            // Propagated with its absolute time, as Redis rewrites it.
            let mut argv: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
            argv[2] = ttl.to_string().into_bytes();
            argv.push(b"ABSTTL".to_vec());
            ctx.rewrite_effect(argv);
        }
    }
    // IDLETIME sets the access time under an LRU policy, FREQ the counter under an LFU one
    // (Redis's objectSetLRUOrLFU); the other is ignored.
    let lfu = ctx.ks.lfu.is_some();
    let now = ctx.ks.now;
    let set = match (lfu, idle, freq) {
        (false, Some(secs), _) => Some(ctx.ks.lru_clock.saturating_sub(secs.min(u32::MAX as i64) as u32)),
        (true, _, Some(f)) => Some((crate::services::evict::lfu_minutes(now) << 8) | f.clamp(0, 255) as u32),
        _ => None,
    };
    if let Some(v) = set {
        if let Some(mut o) = ctx.ks.peek(key) {
            o.set_lru(v);
        }
    }
    ctx.ks.note(notify::GENERIC, "restore", key);
    ctx.reply.ok();
    Ok(())
}

// SAVE
pub fn save(ctx: &mut Ctx) -> CmdResult {
    match persistence::save(ctx.srv) {
        Ok(_) => {
            ctx.reply.ok();
            Ok(())
        }
        Err(crate::persist::PersistError::Running) => Err(CmdError::msg(persistence::ERR_BGSAVE_RUNNING)),
        Err(_) => Err(CmdError::msg("ERR")),
    }
}

// BGSAVE [SCHEDULE]
pub fn bgsave(ctx: &mut Ctx) -> CmdResult {
    // With SCHEDULE (or inside EXEC), a save asked for while an AOF rewrite runs starts after
    // it, as Redis's waits for the rewrite's child.
    let schedule = ctx.args.len() == 2 && eq_ic(ctx.args[1], "SCHEDULE");
    if !(ctx.args.len() == 1 || schedule) {
        return Err(CmdError::Syntax);
    }
    let after_rewrite = ctx.srv.persistence.aof.rewrite_in_progress.load(std::sync::atomic::Ordering::Acquire);
    // The progress total, counted through this command's locks (a transaction holds them).
    let total = (0..ctx.srv.ks.num_dbs()).map(|d| ctx.ks.locks.dbsize(d) as u64).sum();
    let now = !ctx.client.in_exec && !after_rewrite;
    match persistence::bgsave(ctx.srv, schedule || ctx.client.in_exec, total, now) {
        Ok(()) if ctx.client.in_exec || after_rewrite => ctx.reply.simple("Background saving scheduled"),
        Ok(()) => ctx.reply.simple("Background saving started"),
        Err(e) => return Err(CmdError::msg(e)),
    }
    Ok(())
}

// BGREWRITEAOF: runs on the persistence thread while clients go on (see `exec::aof`).
pub fn bgrewriteaof(ctx: &mut Ctx) -> CmdResult {
    let reply = crate::daemons::aof::request_rewrite(ctx.srv, ctx.client.in_exec).map_err(CmdError::msg)?;
    ctx.reply.simple(reply);
    Ok(())
}

// MIGRATE host port <key | ""> destination-db timeout [COPY] [REPLACE]
//   [AUTH password | AUTH2 username password] [KEYS key [key ...]]
//
// Like Redis, the transfer runs inside the command (the keys' shards stay locked, so nothing
// changes them half-way): DUMP payloads sent as RESTORE commands in one pipeline, then the
// moved keys deleted here unless COPY. The connection is bounded by `timeout` at every step
// and kept for the next MIGRATE to the same target (`services::migrate`).
pub fn migrate(ctx: &mut Ctx) -> CmdResult {
    let args = ctx.args;
    let (mut copy, mut replace) = (false, false);
    let mut auth: Option<Vec<Vec<u8>>> = None;
    let mut keys: Vec<&[u8]> = vec![args[3]];
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - j - 1;
        if eq_ic(args[j], "COPY") {
            copy = true;
        } else if eq_ic(args[j], "REPLACE") {
            replace = true;
        } else if eq_ic(args[j], "AUTH") {
            if more < 1 {
                return Err(CmdError::Syntax);
            }
            auth = Some(vec![b"AUTH".to_vec(), args[j + 1].to_vec()]);
            j += 1;
        } else if eq_ic(args[j], "AUTH2") {
            if more < 2 {
                return Err(CmdError::Syntax);
            }
            auth = Some(vec![b"AUTH".to_vec(), args[j + 1].to_vec(), args[j + 2].to_vec()]);
            j += 2;
        } else if eq_ic(args[j], "KEYS") {
            if !args[3].is_empty() {
                return Err(CmdError::msg(
                    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string",
                ));
            }
            keys = args[j + 1..].to_vec();
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let mut timeout = parse_int(args[5])?;
    let dbid = parse_int(args[4])?;
    if timeout <= 0 {
        timeout = 1000;
    }
    // The keys that exist, with their payloads and remaining TTLs.
    let opts = persist::save_opts(&ctx.srv.config);
    let now = ctx.ks.now;
    let mut found: Vec<(&[u8], Vec<u8>, i64)> = Vec::new();
    for &k in &keys {
        let Some(o) = ctx.ks.lookup_read(k) else { continue };
        let payload = persist::dump(&o, &opts);
        let ttl = ctx.ks.get_expire(k).map_or(0, |t| (t - now).max(1));
        found.push((k, payload, ttl));
    }
    if found.is_empty() {
        ctx.reply.simple("NOKEY");
        return Ok(());
    }
    let host = String::from_utf8_lossy(args[1]).to_string();
    let port_text = String::from_utf8_lossy(args[2]).to_string();
    let name = format!("{host}:{port_text}");
    let dur = std::time::Duration::from_millis(timeout as u64);
    let cache = &ctx.srv.migrate_sockets;
    // As Redis: a socket error other than a timeout is retried once on a fresh connection
    // (a cached one may have been closed by the target meanwhile).
    let mut may_retry = true;
    loop {
        let now_s = ctx.srv.now_ms() / 1000;
        let mut cs = match cache.take(&name) {
            Some(c) => c,
            None => MigrateSockets::fresh(connect(&host, &port_text, dur)?, now_s),
        };
        let _ = cs.sock.set_read_timeout(Some(dur));
        let _ = cs.sock.set_write_timeout(Some(dur));
        let _ = cs.sock.set_nodelay(true);
        let select = cs.db != Some(dbid);
        let mut req = Vec::new();
        if let Some(a) = &auth {
            crate::persist::aof::encode(&mut req, a);
        }
        if select {
            crate::persist::aof::encode(&mut req, &[b"SELECT".to_vec(), dbid.to_string().into_bytes()]);
        }
        for (k, payload, ttl) in &found {
            // In cluster mode the target is importing the slot: RESTORE-ASKING lets it in.
            let verb: &[u8] = if ctx.srv.cluster.enabled { b"RESTORE-ASKING" } else { b"RESTORE" };
            let mut argv = vec![verb.to_vec(), k.to_vec(), ttl.to_string().into_bytes(), payload.clone()];
            if replace {
                argv.push(b"REPLACE".to_vec());
            }
            crate::persist::aof::encode(&mut req, &argv);
        }
        let failed = |e: &std::io::Error, what: &str, may_retry: &mut bool| -> Option<CmdError> {
            let timed_out = matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut);
            if !timed_out && std::mem::take(may_retry) {
                return None;
            }
            Some(CmdError::msg(format!("IOERR error or timeout {what} to target instance")))
        };
        if let Err(e) = std::io::Write::write_all(&mut cs.sock, &req) {
            match failed(&e, "writing", &mut may_retry) {
                None => continue,
                Some(err) => return Err(err),
            }
        }
        let mut rd = std::io::BufReader::new(&cs.sock);
        let mut auth_line = String::new();
        let mut select_line = String::new();
        let heads = match (&auth, select) {
            (Some(_), true) => read_line(&mut rd, &mut auth_line).and_then(|_| read_line(&mut rd, &mut select_line)),
            (Some(_), false) => read_line(&mut rd, &mut auth_line),
            (None, true) => read_line(&mut rd, &mut select_line),
            (None, false) => Ok(()),
        };
        if let Err(e) = heads {
            match failed(&e, "reading", &mut may_retry) {
                None => continue,
                Some(err) => return Err(err),
            }
        }
        // The first error the target gave (AUTH's, SELECT's, then a RESTORE's) is the reply;
        // the keys it acknowledged are deleted here either way.
        let head_err = [&auth_line, &select_line].into_iter().find(|l| l.starts_with('-')).cloned();
        let mut first_err: Option<String> = None;
        let mut socket_err = None;
        let mut moved = vec![b"DEL".to_vec()];
        let mut line = String::new();
        for (j, (k, _, _)) in found.iter().enumerate() {
            if let Err(e) = read_line(&mut rd, &mut line) {
                socket_err = Some((e, j));
                break;
            }
            if let Some(h) = head_err.as_ref().or(line.starts_with('-').then_some(&line)) {
                first_err.get_or_insert_with(|| h.clone());
            } else if !copy {
                if ctx.ks.delete(k).is_some() {
                    ctx.ks.note(notify::GENERIC, "del", k);
                }
                moved.push(k.to_vec());
            }
        }
        drop(rd);
        if let Some((e, 0)) = &socket_err {
            // Nothing was acknowledged: a retry cannot apply anything twice.
            if first_err.is_none() {
                match failed(e, "reading", &mut may_retry) {
                    None => continue,
                    Some(err) => return Err(err),
                }
            }
        }
        if moved.len() > 1 {
            // Propagated as the deletion of the keys that moved.
            ctx.rewrite_effect(moved);
        } else {
            ctx.no_effect();
        }
        if let Some(l) = first_err {
            // The connection stays cached, but with no database known to be selected.
            if socket_err.is_none() {
                cache.put(name, cs.sock, None, now_s);
            }
            let l = l.trim_end();
            return Err(CmdError::msg(format!("ERR Target instance replied with error: {}", &l[1..])));
        }
        if socket_err.is_some() {
            return Err(CmdError::msg("IOERR error or timeout reading to target instance"));
        }
        cache.put(name, cs.sock, Some(dbid), now_s);
        ctx.reply.ok();
        return Ok(());
    }
}

/// A new connection to MIGRATE's target, bounded by its timeout.
fn connect(host: &str, port: &str, dur: std::time::Duration) -> Result<std::net::TcpStream, CmdError> {
    let refused = || CmdError::msg("IOERR error or timeout connecting to the client");
    let port: u16 = port.parse().map_err(|_| refused())?;
    let addr =
        std::net::ToSocketAddrs::to_socket_addrs(&(host, port)).ok().and_then(|mut a| a.next()).ok_or_else(refused)?;
    std::net::TcpStream::connect_timeout(&addr, dur).map_err(|_| refused())
}

/// One reply line from MIGRATE's target, at most 1 KB read (Redis's buffer) so a hostile
/// target cannot grow it; a closed connection is an error.
fn read_line(rd: &mut impl std::io::BufRead, line: &mut String) -> std::io::Result<()> {
    use std::io::BufRead;
    line.clear();
    match std::io::Read::take(rd, 1024).read_line(line)? {
        0 => Err(std::io::ErrorKind::UnexpectedEof.into()),
        _ => Ok(()),
    }
}
