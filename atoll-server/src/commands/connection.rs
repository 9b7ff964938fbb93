//! Connection commands: PING, ECHO, AUTH, HELLO, QUIT, RESET, SELECT and CLIENT.

use crate::exec::client::ReplyMode;
use crate::exec::*;
use crate::protocol::Proto;
use std::sync::atomic::Ordering;

// PING [message]
pub fn ping(ctx: &mut Ctx) -> CmdResult {
    // In RESP2 Pub/Sub mode PING answers as a message would: ["pong", argument or ""].
    if ctx.client.resp2_subscribed() {
        if ctx.args.len() > 2 {
            return Err(CmdError::Arity("ping".into()));
        }
        ctx.reply.array(2);
        ctx.reply.bulk(b"pong");
        ctx.reply.bulk(ctx.args.get(1).copied().unwrap_or(b""));
        return Ok(());
    }
    match ctx.args.len() {
        1 => ctx.reply.simple("PONG"),
        2 => ctx.reply.bulk(ctx.args[1]),
        _ => return Err(CmdError::Arity("ping".into())),
    }
    Ok(())
}

// READONLY, READWRITE: in cluster mode, reads of a replica's master's slots are served by the
// replica after READONLY (`services::cluster::State::route`). Standalone they are refused as
// Redis without cluster mode refuses them — unless the client declared CLIENT CAPA redirect
// (Valkey 8): then READONLY lets its reads be served on a replica, READWRITE has them
// redirected again.
pub fn readonly(ctx: &mut Ctx) -> CmdResult {
    set_read_only_mode(ctx, true)
}

pub fn readwrite(ctx: &mut Ctx) -> CmdResult {
    set_read_only_mode(ctx, false)
}

fn set_read_only_mode(ctx: &mut Ctx, on: bool) -> CmdResult {
    if !ctx.client.capa_redirect && !ctx.srv.cluster.enabled {
        return Err(CmdError::msg("ERR This instance has cluster support disabled"));
    }
    ctx.client.read_only_mode = on;
    ctx.reply.ok();
    Ok(())
}

// CLIENT CAPA capability [capability ...] (Valkey 8): `redirect` is the one known; others are
// ignored, as Valkey ignores them.
pub fn client_capa(ctx: &mut Ctx) -> CmdResult {
    if ctx.args[2..].iter().any(|a| a.eq_ignore_ascii_case(b"redirect")) {
        ctx.client.capa_redirect = true;
    }
    ctx.reply.ok();
    Ok(())
}

// ECHO message
pub fn echo(ctx: &mut Ctx) -> CmdResult {
    ctx.reply.bulk(ctx.args[1]);
    Ok(())
}

const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

// AUTH [username] password
pub fn auth(ctx: &mut Ctx) -> CmdResult {
    let (user, pass): (&[u8], &[u8]) = match ctx.args.len() {
        2 => (b"default", ctx.args[1]),
        3 => (ctx.args[1], ctx.args[2]),
        _ => return Err(CmdError::Syntax),
    };
    if ctx.args.len() == 2 && ctx.srv.acl.default.rules().nopass {
        return Err(CmdError::msg(
            "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
        ));
    }
    if !super::acl::authenticate(ctx, user, pass) {
        return Err(CmdError::msg(WRONGPASS));
    }
    ctx.reply.ok();
    Ok(())
}

/// Validates a client name or library attribute: printable ASCII without spaces.
fn valid_name(v: &[u8]) -> bool {
    v.iter().all(|&c| (b'!'..=b'~').contains(&c))
}

// HELLO [protover [AUTH username password] [SETNAME clientname]]
pub fn hello(ctx: &mut Ctx) -> CmdResult {
    let args = ctx.args;
    let mut proto = None;
    let mut i = 1;
    if args.len() > 1 {
        let v =
            parse_int(args[1]).map_err(|_| CmdError::msg("ERR Protocol version is not an integer or out of range"))?;
        if !(2..=3).contains(&v) {
            return Err(CmdError::msg("NOPROTO unsupported protocol version"));
        }
        proto = Some(if v == 3 { Proto::Resp3 } else { Proto::Resp2 });
        i = 2;
    }
    let mut auth: Option<(&[u8], &[u8])> = None;
    let mut setname: Option<&[u8]> = None;
    while i < args.len() {
        let more = args.len() - i - 1;
        if eq_ic(args[i], "AUTH") && more >= 2 {
            auth = Some((args[i + 1], args[i + 2]));
            i += 3;
        } else if eq_ic(args[i], "SETNAME") && more >= 1 {
            setname = Some(args[i + 1]);
            i += 2;
        } else {
            return Err(CmdError::msg(format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(args[i])
            )));
        }
    }
    if let Some((u, p)) = auth {
        if !super::acl::authenticate(ctx, u, p) {
            return Err(CmdError::msg(WRONGPASS));
        }
    }
    if !ctx.client.authenticated {
        return Err(CmdError::msg("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"));
    }
    if let Some(n) = setname {
        if !valid_name(n) {
            return Err(CmdError::msg("ERR Client names cannot contain spaces, newlines or special characters."));
        }
        *ctx.client.handle.name.lock() = n.to_vec();
    }
    if let Some(p) = proto {
        ctx.client.proto = p;
        ctx.reply.proto = p;
        ctx.client.handle.resp.store(if p == Proto::Resp3 { 3 } else { 2 }, Ordering::Relaxed);
    }
    let r = &mut *ctx.reply;
    r.map(7);
    r.bulk(b"server");
    r.bulk(b"redis");
    r.bulk(b"version");
    r.bulk(crate::REDIS_VERSION.as_bytes());
    r.bulk(b"proto");
    r.int(if ctx.client.proto == Proto::Resp3 { 3 } else { 2 });
    r.bulk(b"id");
    r.int(ctx.client.id() as i64);
    r.bulk(b"mode");
    r.bulk(b"standalone");
    r.bulk(b"role");
    r.bulk(b"master");
    r.bulk(b"modules");
    r.array(0);
    Ok(())
}

// QUIT
pub fn quit(ctx: &mut Ctx) -> CmdResult {
    ctx.reply.ok();
    ctx.client.close_after_reply = true;
    // Gone for other clients from now on (a tracking redirect to it is broken), as Redis's
    // single thread frees it before running anyone else's command.
    ctx.client.handle.quitting.store(true, Ordering::Relaxed);
    Ok(())
}

// RESET
pub fn reset(ctx: &mut Ctx) -> CmdResult {
    // Messages waiting for the client arrive before +RESET, in the protocol they were made for.
    if !ctx.client.in_exec {
        ctx.client.handle.take_mail(&mut ctx.reply.buf);
    }
    crate::exec::multi::discard_state(ctx.srv, ctx.client);
    crate::exec::multi::unwatch_all(ctx.srv, ctx.client);
    ctx.client.unsubscribe_all(&ctx.srv.pubsub);
    if ctx.client.tracking.take().is_some() {
        ctx.srv.tracking.disable(ctx.client.id());
        *ctx.client.handle.tracking.lock() = None;
    }
    ctx.client.caching = false;
    let c = &mut *ctx.client;
    // The name goes; the library name and version stay (they describe the connection).
    c.handle.name.lock().clear();
    c.db = 0;
    c.handle.db.store(0, Ordering::Relaxed);
    c.proto = Proto::Resp2;
    c.handle.resp.store(2, Ordering::Relaxed);
    ctx.reply.proto = Proto::Resp2;
    c.reply_mode = ReplyMode::On;
    c.no_touch = false;
    c.handle.no_touch.store(false, Ordering::Relaxed);
    c.handle.no_evict.store(false, Ordering::Relaxed);
    // Back to the default user, authenticated only if it needs no password.
    c.set_user(None);
    c.authenticated = !ctx.srv.acl.auth_required();
    ctx.reply.simple("RESET");
    Ok(())
}

// SELECT index
pub fn select(ctx: &mut Ctx) -> CmdResult {
    let idx = ctx.arg_i64(1)?;
    if ctx.srv.cluster.enabled && idx != 0 {
        return Err(CmdError::msg("ERR SELECT is not allowed in cluster mode"));
    }
    if idx < 0 || idx >= ctx.srv.ks.num_dbs() as i64 {
        return Err(CmdError::msg("ERR DB index is out of range"));
    }
    ctx.client.db = idx as usize;
    ctx.ks.db = idx as usize;
    ctx.client.handle.db.store(idx as usize, Ordering::Relaxed);
    ctx.reply.ok();
    Ok(())
}

// CLIENT HELP
pub fn client_help(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() == 1 {
        return Err(CmdError::Arity("client".into()));
    }
    help_reply(
        ctx,
        "CLIENT",
        &[
            "CACHING (YES|NO)",
            "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
            "GETREDIR",
            "    Return the client ID we are redirecting to when tracking is enabled.",
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are:",
            "    * ADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made from the specified address",
            "    * LADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made to specified local address",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Kill connections by type.",
            "    * USER <username>",
            "      Kill connections authenticated by <username>.",
            "    * SKIPME (YES|NO)",
            "      Skip killing current connection (default: yes).",
            "    * ID <client-id>",
            "      Kill connections by client id.",
            "LIST [options ...]",
            "    Return information about client connections. Options:",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Return clients of specified type.",
            "UNPAUSE",
            "    Stop the current client pause, resuming traffic.",
            "PAUSE <timeout> [WRITE|ALL]",
            "    Suspend all, or just write, clients for <timeout> milliseconds.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "SETINFO <option> <value>",
            "    Set client meta attr. Options are:",
            "    * LIB-NAME: the client lib name.",
            "    * LIB-VER: the client lib version.",
            "UNBLOCK <clientid> [TIMEOUT|ERROR]",
            "    Unblock the specified blocked client.",
            "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
            "         [OPTIN] [OPTOUT] [NOLOOP]",
            "    Control server assisted client side caching.",
            "TRACKINGINFO",
            "    Report tracking status for the current connection.",
            "NO-EVICT (ON|OFF)",
            "    Protect current client connection from eviction.",
            "NO-TOUCH (ON|OFF)",
            "    Will not touch LRU/LFU stats when this mode is on.",
        ],
    );
    Ok(())
}

// CLIENT ID
pub fn client_id(ctx: &mut Ctx) -> CmdResult {
    ctx.reply.int(ctx.client.id() as i64);
    Ok(())
}

// CLIENT GETNAME
pub fn client_getname(ctx: &mut Ctx) -> CmdResult {
    let name = ctx.client.handle.name.lock().clone();
    if name.is_empty() {
        ctx.reply.null();
    } else {
        ctx.reply.bulk(&name);
    }
    Ok(())
}

// CLIENT SETNAME connection-name
pub fn client_setname(ctx: &mut Ctx) -> CmdResult {
    let n = ctx.args[2];
    if !valid_name(n) {
        return Err(CmdError::msg("ERR Client names cannot contain spaces, newlines or special characters."));
    }
    *ctx.client.handle.name.lock() = n.to_vec();
    ctx.reply.ok();
    Ok(())
}

// CLIENT SETINFO <LIB-NAME libname | LIB-VER libver>
pub fn client_setinfo(ctx: &mut Ctx) -> CmdResult {
    let (attr, val) = (ctx.args[2], ctx.args[3]);
    let (slot, label) = if eq_ic(attr, "lib-name") {
        (&ctx.client.handle.lib_name, "lib-name")
    } else if eq_ic(attr, "lib-ver") {
        (&ctx.client.handle.lib_ver, "lib-ver")
    } else {
        return Err(CmdError::msg(format!("ERR Unrecognized option '{}'", String::from_utf8_lossy(attr))));
    };
    if !valid_name(val) {
        return Err(CmdError::msg(format!("ERR {label} cannot contain spaces, newlines or special characters.")));
    }
    *slot.lock() = val.to_vec();
    ctx.reply.ok();
    Ok(())
}

/// The request the caller's buffers hold while it runs: inside a transaction that is the EXEC
/// (the queued command's arguments are counted in multi-mem), else the command itself.
fn running_request<'c>(ctx: &Ctx<'c, '_, '_>) -> &'c [&'c [u8]] {
    if ctx.client.in_exec {
        &[b"EXEC"]
    } else {
        ctx.args
    }
}

/// The client's class for CLIENT LIST/KILL TYPE (no master link yet: Atoll is not a replica).
fn client_type(h: &crate::exec::client::ClientHandle) -> &'static str {
    if h.replica.load(std::sync::atomic::Ordering::Relaxed) {
        "replica"
    } else if h.master.load(std::sync::atomic::Ordering::Relaxed) {
        "master"
    } else if h.subscriptions() > 0 {
        "pubsub"
    } else {
        "normal"
    }
}

// CLIENT LIST [TYPE <NORMAL | MASTER | REPLICA | PUBSUB>] [ID client-id [client-id ...]]
pub fn client_list(ctx: &mut Ctx) -> CmdResult {
    ctx.settle_peers();
    let args = ctx.args;
    let mut ids: Option<Vec<u64>> = None;
    let mut only_type: Option<String> = None;
    let mut i = 2;
    while i < args.len() {
        if eq_ic(args[i], "TYPE") && i + 1 < args.len() {
            let t = String::from_utf8_lossy(args[i + 1]).to_lowercase();
            if !matches!(t.as_str(), "normal" | "master" | "replica" | "slave" | "pubsub") {
                return Err(CmdError::msg(format!(
                    "ERR Unknown client type '{}'",
                    String::from_utf8_lossy(args[i + 1])
                )));
            }
            only_type = Some(if t == "slave" { "replica".into() } else { t });
            i += 2;
        } else if eq_ic(args[i], "ID") && i + 1 < args.len() {
            let mut v = Vec::new();
            i += 1;
            while i < args.len() {
                match crate::protocol::parse_i64(args[i]) {
                    Some(id) if id > 0 => v.push(id as u64),
                    _ => return Err(CmdError::msg("ERR Invalid client ID")),
                }
                i += 1;
            }
            ids = Some(v);
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let now = ctx.srv.now_ms();
    let mut out = String::new();
    for h in ctx.srv.clients.snapshot() {
        // A killed client is gone for Redis (freed at once); here its worker may not have
        // closed it yet.
        if h.killed.load(Ordering::Relaxed) && h.id != ctx.client.id() {
            continue;
        }
        if let Some(ids) = &ids {
            if !ids.contains(&h.id) {
                continue;
            }
        }
        if only_type.as_ref().is_some_and(|t| t != client_type(&h)) {
            continue;
        }
        let current = if h.id == ctx.client.id() { Some(running_request(ctx)) } else { None };
        out.push_str(&crate::exec::client::info_line(&ctx.srv.table, &h, now, current));
        out.push('\n');
    }
    ctx.reply.verbatim("txt", out.as_bytes());
    Ok(())
}

// CLIENT INFO
pub fn client_info(ctx: &mut Ctx) -> CmdResult {
    let mut line = crate::exec::client::info_line(
        &ctx.srv.table,
        &ctx.client.handle,
        ctx.srv.now_ms(),
        Some(running_request(ctx)),
    );
    line.push('\n');
    ctx.reply.verbatim("txt", line.as_bytes());
    Ok(())
}

// CLIENT KILL <ip:port | <option value> ...>
pub fn client_kill(ctx: &mut Ctx) -> CmdResult {
    let args = ctx.args;
    let me = ctx.client.id();
    if args.len() == 3 {
        // Old form: CLIENT KILL addr:port, +OK or an error.
        let addr = args[2];
        let target = ctx.srv.clients.snapshot().into_iter().find(|h| h.addr.as_bytes() == addr);
        return match target {
            Some(h) => {
                ctx.client.close(&h);
                ctx.reply.ok();
                Ok(())
            }
            None => Err(CmdError::msg("ERR No such client")),
        };
    }
    if !args.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let mut id = None;
    let mut addr = None;
    let mut laddr = None;
    let mut user = None;
    let mut ctype = None;
    let mut maxage = None;
    let mut skipme = true;
    for pair in args[2..].chunks(2) {
        let (k, v) = (pair[0], pair[1]);
        if eq_ic(k, "ID") {
            match crate::protocol::parse_i64(v) {
                Some(x) if x > 0 => id = Some(x as u64),
                _ => return Err(CmdError::msg("ERR client-id should be greater than 0")),
            }
        } else if eq_ic(k, "ADDR") {
            addr = Some(v.to_vec());
        } else if eq_ic(k, "LADDR") {
            laddr = Some(v.to_vec());
        } else if eq_ic(k, "USER") {
            if ctx.srv.acl.get(v).is_none() {
                return Err(CmdError::msg(format!("ERR No such user '{}'", String::from_utf8_lossy(v))));
            }
            user = Some(v.to_vec());
        } else if eq_ic(k, "TYPE") {
            let t = String::from_utf8_lossy(v).to_lowercase();
            if !matches!(t.as_str(), "normal" | "master" | "replica" | "slave" | "pubsub") {
                return Err(CmdError::msg(format!("ERR Unknown client type '{}'", String::from_utf8_lossy(v))));
            }
            ctype = Some(if t == "slave" { "replica".into() } else { t });
        } else if eq_ic(k, "SKIPME") {
            if eq_ic(v, "yes") {
                skipme = true;
            } else if eq_ic(v, "no") {
                skipme = false;
            } else {
                return Err(CmdError::Syntax);
            }
        } else if eq_ic(k, "MAXAGE") {
            maxage = Some(parse_int(v).map_err(|_| CmdError::msg("ERR maxage is not an integer or out of range"))?);
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let now = ctx.srv.now_ms();
    let mut killed = 0;
    for h in ctx.srv.clients.snapshot() {
        if id.is_some_and(|i| i != h.id)
            || addr.as_ref().is_some_and(|a| a != h.addr.as_bytes())
            || laddr.as_ref().is_some_and(|a| a != h.laddr.as_bytes())
            || user.as_ref().is_some_and(|u| *u != h.user_name())
            || ctype.as_ref().is_some_and(|t| t != client_type(&h))
            || maxage.is_some_and(|m| (now - h.created_ms) / 1000 < m)
            || (skipme && h.id == me)
            // Already on its way out (killed by an ACL change, an earlier KILL, a limit):
            // Redis would have freed it, and counts it no more.
            || h.killed.load(std::sync::atomic::Ordering::Acquire)
        {
            continue;
        }
        ctx.client.close(&h);
        killed += 1;
    }
    ctx.reply.int(killed);
    Ok(())
}

// CLIENT REPLY <ON | OFF | SKIP>
pub fn client_reply(ctx: &mut Ctx) -> CmdResult {
    let a = ctx.args[2];
    if eq_ic(a, "ON") {
        ctx.client.reply_mode = ReplyMode::On;
        ctx.reply.ok();
    } else if eq_ic(a, "OFF") {
        ctx.client.reply_mode = ReplyMode::Off;
    } else if eq_ic(a, "SKIP") {
        if ctx.client.reply_mode != ReplyMode::Off {
            ctx.client.reply_mode = ReplyMode::SkipNext;
        }
    } else {
        return Err(CmdError::Syntax);
    }
    Ok(())
}

fn on_off(a: &[u8]) -> Result<bool, CmdError> {
    if eq_ic(a, "ON") {
        Ok(true)
    } else if eq_ic(a, "OFF") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

// CLIENT NO-EVICT <ON | OFF>
pub fn client_no_evict(ctx: &mut Ctx) -> CmdResult {
    let v = on_off(ctx.args[2])?;
    ctx.client.handle.no_evict.store(v, Ordering::Relaxed);
    ctx.reply.ok();
    Ok(())
}

// CLIENT NO-TOUCH <ON | OFF>
pub fn client_no_touch(ctx: &mut Ctx) -> CmdResult {
    let v = on_off(ctx.args[2])?;
    ctx.client.no_touch = v;
    ctx.client.handle.no_touch.store(v, Ordering::Relaxed);
    ctx.reply.ok();
    Ok(())
}

// CLIENT TRACKING <ON | OFF> [REDIRECT client-id] [PREFIX prefix ...] [BCAST] [OPTIN] [OPTOUT]
//   [NOLOOP]
pub fn client_tracking(ctx: &mut Ctx) -> CmdResult {
    use crate::services::tracking::Tracker;
    let args = ctx.args;
    let (mut redirect, mut bcast, mut optin, mut optout, mut noloop) = (0u64, false, false, false, false);
    let mut prefixes: Vec<Box<[u8]>> = Vec::new();
    let mut j = 3;
    while j < args.len() {
        let more = j + 1 < args.len();
        if eq_ic(args[j], "REDIRECT") && more {
            j += 1;
            if redirect != 0 {
                return Err(CmdError::msg("ERR A client can only redirect to a single other client"));
            }
            let id = parse_int(args[j])?;
            if id <= 0 || ctx.srv.clients.get(id as u64).is_none() {
                return Err(CmdError::msg("ERR The client ID you want redirect to does not exist"));
            }
            redirect = id as u64;
        } else if eq_ic(args[j], "BCAST") {
            bcast = true;
        } else if eq_ic(args[j], "OPTIN") {
            optin = true;
        } else if eq_ic(args[j], "OPTOUT") {
            optout = true;
        } else if eq_ic(args[j], "NOLOOP") {
            noloop = true;
        } else if eq_ic(args[j], "PREFIX") && more {
            j += 1;
            prefixes.push(args[j].into());
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let srv = ctx.srv;
    if eq_ic(args[2], "OFF") {
        if ctx.client.tracking.take().is_some() {
            srv.tracking.disable(ctx.client.id());
            *ctx.client.handle.tracking.lock() = None;
            ctx.client.handle.tracking_mem.store(0, Ordering::Relaxed);
        }
        ctx.client.caching = false;
        ctx.reply.ok();
        return Ok(());
    }
    if !eq_ic(args[2], "ON") {
        return Err(CmdError::Syntax);
    }
    if !bcast && !prefixes.is_empty() {
        return Err(CmdError::msg("ERR PREFIX option requires BCAST mode to be enabled"));
    }
    let old = ctx.client.tracking.clone();
    if old.as_ref().is_some_and(|o| o.bcast != bcast) {
        return Err(CmdError::msg("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode."));
    }
    if bcast && (optin || optout) {
        return Err(CmdError::msg("ERR OPTIN and OPTOUT are not compatible with BCAST"));
    }
    if optin && optout {
        return Err(CmdError::msg("ERR You can't specify both OPTIN mode and OPTOUT mode"));
    }
    if old.as_ref().is_some_and(|o| (optin && o.optout) || (optout && o.optin)) {
        return Err(CmdError::msg("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode."));
    }
    let mut all: Vec<Box<[u8]>> = old.as_ref().map(|o| o.prefixes.clone()).unwrap_or_default();
    if bcast {
        // A client's prefixes must not overlap (one a prefix of another), as in Redis.
        let overlap = |a: &[u8], b: &[u8]| a.starts_with(b) || b.starts_with(a);
        for (i, p) in prefixes.iter().enumerate() {
            let show = |x: &[u8]| String::from_utf8_lossy(x).into_owned();
            if let Some(e) = all.iter().find(|e| overlap(e, p)) {
                return Err(CmdError::msg(format!(
                    "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                    show(p),
                    show(e)
                )));
            }
            if let Some(q) = prefixes[i + 1..].iter().find(|q| overlap(p, q)) {
                return Err(CmdError::msg(format!(
                    "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                    show(p),
                    show(q)
                )));
            }
        }
        // No PREFIX means the empty prefix, added even beside earlier ones (as Redis's
        // enableTracking does).
        if prefixes.is_empty() && !all.iter().any(|p| p.is_empty()) {
            all.push(Box::from(&b""[..]));
        }
        all.extend(prefixes);
    }
    let t = std::sync::Arc::new(Tracker {
        handle: ctx.client.handle.clone(),
        redirect,
        bcast,
        optin,
        optout,
        noloop,
        prefixes: all,
        broken: Default::default(),
    });
    if old.is_some() {
        srv.tracking.disable(ctx.client.id());
    }
    let mem: u64 = t.prefixes.iter().map(|p| p.len() as u64 + crate::exec::client::STATE_ENTRY).sum();
    ctx.client.handle.tracking_mem.store(mem, Ordering::Relaxed);
    srv.tracking.enable(t.clone());
    *ctx.client.handle.tracking.lock() = Some(t.clone());
    ctx.client.tracking = Some(t);
    ctx.reply.ok();
    Ok(())
}

// CLIENT CACHING <YES | NO>
pub fn client_caching(ctx: &mut Ctx) -> CmdResult {
    let Some(t) = ctx.client.tracking.clone() else {
        return Err(CmdError::msg(
            "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled",
        ));
    };
    if eq_ic(ctx.args[2], "YES") {
        if !t.optin {
            return Err(CmdError::msg("ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode."));
        }
    } else if eq_ic(ctx.args[2], "NO") {
        if !t.optout {
            return Err(CmdError::msg("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode."));
        }
    } else {
        return Err(CmdError::Syntax);
    }
    ctx.client.caching = true;
    ctx.reply.ok();
    Ok(())
}

// CLIENT GETREDIR
pub fn client_getredir(ctx: &mut Ctx) -> CmdResult {
    ctx.reply.int(ctx.client.tracking.as_ref().map_or(-1, |t| t.redirect as i64));
    Ok(())
}

// CLIENT TRACKINGINFO
pub fn client_trackinginfo(ctx: &mut Ctx) -> CmdResult {
    let t = ctx.client.tracking.clone();
    let caching = ctx.client.caching;
    let mut flags: Vec<&str> = vec![if t.is_some() { "on" } else { "off" }];
    if let Some(t) = &t {
        let pairs = [
            (t.bcast, "bcast"),
            (t.optin, "optin"),
            (t.optin && caching, "caching-yes"),
            (t.optout, "optout"),
            (t.optout && caching, "caching-no"),
            (t.noloop, "noloop"),
            (t.broken.load(Ordering::Relaxed), "broken_redirect"),
        ];
        flags.extend(pairs.iter().filter(|(on, _)| *on).map(|(_, f)| *f));
    }
    let r = &mut *ctx.reply;
    r.map(3);
    r.bulk(b"flags");
    r.set(flags.len());
    for f in flags {
        r.bulk(f.as_bytes());
    }
    r.bulk(b"redirect");
    r.int(t.as_ref().map_or(-1, |t| t.redirect as i64));
    r.bulk(b"prefixes");
    let mut prefixes = t.as_ref().filter(|t| t.bcast).map(|t| t.prefixes.clone()).unwrap_or_default();
    prefixes.sort();
    r.array(prefixes.len());
    for p in prefixes {
        r.bulk(&p);
    }
    Ok(())
}

// CLIENT UNBLOCK client-id [TIMEOUT | ERROR]
pub fn client_unblock(ctx: &mut Ctx) -> CmdResult {
    let id = parse_int(ctx.args[2])?;
    let error = match ctx.args.get(3) {
        None => false,
        Some(a) if eq_ic(a, "TIMEOUT") => false,
        Some(a) if eq_ic(a, "ERROR") => true,
        Some(_) => return Err(CmdError::msg("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")),
    };
    let waiter = ctx.srv.clients.get(id.max(0) as u64).and_then(|h| h.waiter.lock().clone());
    // A client postponed by CLIENT PAUSE waits for the pause, not for a key.
    let done = waiter.filter(|w| !w.postponed()).is_some_and(|w| {
        use crate::exec::blocking::WaitState;
        let ok = w.finish(if error { WaitState::Unblocked } else { WaitState::TimedOut });
        if ok {
            ctx.srv.blocked_clients.fetch_sub(1, Ordering::Relaxed);
        }
        ok
    });
    ctx.reply.int(done as i64);
    Ok(())
}

// CLIENT PAUSE timeout [WRITE | ALL]
pub fn client_pause(ctx: &mut Ctx) -> CmdResult {
    let ms = parse_int(ctx.arg(2)).map_err(|_| CmdError::msg("ERR timeout is not an integer or out of range"))?;
    if ms < 0 {
        return Err(CmdError::msg("ERR timeout is negative"));
    }
    let all = match ctx.args.get(3) {
        None => true,
        Some(m) if eq_ic(m, "all") => true,
        Some(m) if eq_ic(m, "write") => false,
        Some(_) => return Err(CmdError::msg("ERR CLIENT PAUSE mode must be WRITE or ALL")),
    };
    if ctx.args.len() > 4 {
        return Err(CmdError::msg(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
            String::from_utf8_lossy(ctx.arg(1))
        )));
    }
    ctx.srv.pause(crate::exec::PauseBy::Client, ctx.ks.now, ctx.ks.now.saturating_add(ms), all);
    ctx.reply.ok();
    Ok(())
}

// CLIENT UNPAUSE
pub fn client_unpause(ctx: &mut Ctx) -> CmdResult {
    ctx.srv.unpause(crate::exec::PauseBy::Client);
    ctx.reply.ok();
    Ok(())
}
