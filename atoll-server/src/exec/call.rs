//! Running one command (Redis's `processCommand` and `call`): resolve it in the table, pass the
//! generic gates (arity, auth, DEBUG, MULTI queueing), take its locks, run it, then the write
//! epilogue — dirty count, effects, blocked clients registered and served — and statistics.

use super::blocking::{self, WaitState, Waiter};
use super::client::{Client, ReplyMode};
use super::table::{flags, Scope};
use super::{CmdError, CmdResult, Command, Ctx, Effect, KsView, Server};
use crate::cmdspec::keyspec;
use crate::engine::{LockPlan, Locks};
use crate::protocol::Reply;
use crate::services::acl::{Context, Denied};
use crate::services::stats::{self, WorkerStats};
use smallvec::SmallVec;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Where a look-ahead found a request's first argument would live: its shard, and its hash
/// in the shard's table.
#[derive(Clone, Copy, Default)]
pub struct KeyHint {
    pub shard: usize,
    pub slot: usize,
    pub hash: u64,
}

/// Formats Redis's unknown-command error, quoting up to the first arguments.
fn unknown_command_error(argv: &[&[u8]]) -> String {
    let name = String::from_utf8_lossy(&argv[0][..argv[0].len().min(128)]).into_owned();
    let mut args = String::new();
    for a in &argv[1..] {
        if args.len() >= 128 {
            break;
        }
        let s = String::from_utf8_lossy(&a[..a.len().min(128 - args.len())]).into_owned();
        args.push('\'');
        args.push_str(&s);
        args.push_str("' ");
    }
    format!("ERR unknown command '{name}', with args beginning with: {args}")
}

fn reject(srv: &Server, ws: &WorkerStats, client: &mut Client, out: &mut Reply, cmd: Option<&Command>, e: CmdError) {
    if let Some(c) = cmd {
        ws.cmds[c.id].rejected_calls.fetch_add(1, Ordering::Relaxed);
    }
    // An error for one of this server's replicas would land in its stream: dropped instead.
    if client.replica {
        let name = cmd.map(|c| c.full_name()).unwrap_or("unknown");
        return replica_misuse(srv, client, name, Some(&e.text()));
    }
    if let Some(m) = client.multi.as_mut() {
        m.error = true;
        // A refused EXEC ends the transaction, as Redis's execCommandAbort does: the client
        // learns why and is out of MULTI (a BUSY script, LOADING, OOM … at EXEC time).
        if cmd.is_some_and(|c| c.name == "exec") {
            super::multi::discard_state(srv, client);
            super::multi::unwatch_all(srv, client);
            let e = CmdError::msg(format!("EXECABORT Transaction discarded because of: {}", e.text()));
            return error_reply(ws, out, &e);
        }
    }
    error_reply(ws, out, &e);
}

/// Valkey 8's standalone redirection, for a client that declared CLIENT CAPA redirect: on a
/// replica, a command that reads or writes data answers `-REDIRECT host:port` (the master as
/// REPLICAOF named it); after READONLY only writes do. Whether the link is up does not matter.
#[cold]
fn redirect(srv: &Server, client: &Client, cmd: &Command) -> Option<CmdError> {
    if client.replaying || !cmd.has(flags::WRITE | flags::READONLY) {
        return None;
    }
    if client.read_only_mode && !cmd.has(flags::WRITE) {
        return None;
    }
    let (host, port) = srv.repl.upstream.master.lock().clone()?;
    Some(CmdError::msg(format!("REDIRECT {host}:{port}")))
}

/// Cluster mode's routing (Redis's getNodeByQuery): `None` when this node runs the command.
/// ASKING holds for one command, or for a whole transaction.
#[inline]
fn cluster_gate(
    srv: &Server,
    client: &mut Client,
    cmd: &Command,
    argv: &[&[u8]],
    hint: Option<KeyHint>,
) -> Option<CmdError> {
    // ASKING lasts for this command, or this whole transaction (its own run sets it again).
    let asking = client.asking;
    if asking && (client.multi.is_none() || cmd.name == "exec") {
        client.asking = false;
    }
    client.cluster_slot = None;
    if client.replaying {
        return None;
    }
    // The common case: one key, in a slot served here with nothing moving; the look-ahead
    // that found its shard computed its slot.
    if let Some(i) = cmd.single_key {
        if let Some(k) = argv.get(i) {
            let slot = match hint {
                Some(h) if i == 1 => h.slot,
                _ => crate::engine::slot::key_slot(k),
            };
            if srv.cluster.serves(slot) {
                client.cluster_slot = Some(slot);
                return None;
            }
        }
    }
    let exec = cmd.name == "exec";
    if cmd.key_specs.is_empty() && !cmd.has(flags::MOVABLE_KEYS) && !exec {
        return None;
    }
    if cmd.single_key.is_none() && !exec {
        // Several keys (MGET, a script's keys …): in one slot served here, or the slow path.
        let mut pos: SmallVec<[usize; 8]> = SmallVec::new();
        if keyspec::key_positions(&cmd.key_specs, argv, &mut pos).is_ok() {
            let mut slot = None;
            for p in pos {
                let Some(k) = argv.get(p) else { continue };
                if p == 3 && k.is_empty() && cmd.name == "migrate" {
                    continue;
                }
                let s = crate::engine::slot::key_slot(k);
                match slot {
                    None => slot = Some(s),
                    Some(f) if f != s => return cluster_route(srv, client, cmd, argv, asking),
                    _ => {}
                }
            }
            match slot {
                // No key at all: run here, whatever the cluster's state (as Redis).
                None => return None,
                Some(s) if srv.cluster.serves(s) => {
                    client.cluster_slot = Some(s);
                    return None;
                }
                _ => {}
            }
        }
    }
    cluster_route(srv, client, cmd, argv, asking)
}

#[cold]
fn cluster_route(srv: &Server, client: &mut Client, cmd: &Command, argv: &[&[u8]], asking: bool) -> Option<CmdError> {
    use crate::services::cluster::{Query, Redirect};
    // Every key the command (or the transaction) names.
    let mut keys: Vec<&[u8]> = Vec::new();
    // As Redis's getCommandFlags: a script with a shebang writes unless `no-writes`, and
    // EXEC writes when a queued command does (a READONLY replica then redirects it).
    let write = gate_flags(srv, client, cmd, argv) & flags::WRITE != 0;
    let mut is_migrate = cmd.name == "migrate";
    fn add<'a>(c: &Command, a: &[&'a [u8]], keys: &mut Vec<&'a [u8]>) {
        let mut pos: SmallVec<[usize; 8]> = SmallVec::new();
        if keyspec::key_positions(&c.key_specs, a, &mut pos).is_ok() {
            for p in pos {
                // MIGRATE … "" … KEYS k1 k2: the empty key argument names no key (Redis's
                // migrateGetKeys).
                if p >= a.len() {
                    continue;
                }
                let empty_migrate_key = p == 3 && c.name == "migrate" && a[p].is_empty();
                if !empty_migrate_key {
                    keys.push(a[p]);
                }
            }
        }
    }
    let owned: Vec<Vec<&[u8]>>;
    if cmd.name == "exec" {
        let m = client.multi.as_ref()?;
        owned = m.queued.iter().map(|q| q.iter().map(|a| a.as_slice()).collect()).collect();
        for q in &owned {
            if let Ok(c) = resolve(srv, q) {
                is_migrate = false;
                add(c, q, &mut keys);
            }
        }
    } else {
        add(cmd, argv, &mut keys);
    }
    let mut slot = None;
    let mut multiple = false;
    for k in &keys {
        let s = crate::engine::slot::key_slot(k);
        match slot {
            None => slot = Some(s),
            Some(f) if f != s => return Some(CmdError::msg("CROSSSLOT Keys in request don't hash to the same slot")),
            _ => multiple |= *k != keys[0],
        }
    }
    client.cluster_slot = slot;
    let pubsubshard = matches!(cmd.name.as_str(), "ssubscribe" | "sunsubscribe" | "spublish");
    let q = Query {
        slot,
        keys: &keys,
        multiple_keys: multiple,
        write,
        asking: asking || cmd.name == "restore-asking",
        readonly: client.read_only_mode,
        pubsubshard,
        is_migrate,
    };
    let tls_port = srv.config.int(crate::config::p::TLS_PORT);
    let tls_client = client.handle.came_in_on(tls_port);
    // Whether a key exists here (a slot being moved): looked up in database 0 without the
    // cluster lock, which ranks after the shards.
    let needs_lookup = {
        let g = srv.cluster.state.lock();
        let st = g.as_ref()?;
        slot.is_some_and(|s| st.migrating.contains_key(&s) || st.importing.contains_key(&s))
    };
    let present: Vec<bool> = if needs_lookup && !pubsubshard {
        keys.iter().map(|k| key_exists(srv, k)).collect()
    } else {
        vec![true; keys.len()]
    };
    let g = srv.cluster.state.lock();
    let st = g.as_ref()?;
    let mut i = 0;
    let r: Result<(), Redirect> = st.route(&q, &mut |_| {
        i += 1;
        present[i - 1]
    });
    r.err().map(|e| CmdError::msg(st.redirect_text(&e, tls_client)))
}

/// Whether `key` is in database 0 and not expired.
fn key_exists(srv: &Server, key: &[u8]) -> bool {
    if srv.ks.db_if_exists(0).is_none() {
        return false;
    }
    let mut plan = LockPlan::default();
    plan.key(0, key);
    let mut locks = Locks::acquire_keys(&srv.ks, plan);
    let shard = locks.shard(0, crate::engine::slot::key_shard(key));
    shard.keys.get(key).is_some() && !shard.is_expired(key, crate::exec::unix_ms())
}

/// Writes an error reply and counts it in INFO errorstats.
pub fn error_reply(ws: &WorkerStats, out: &mut Reply, e: &CmdError) {
    let text = e.text();
    out.error(&text);
    count_error(ws, &text);
}

/// Counts an error reply (INFO total_error_replies and errorstats by its first word).
pub fn count_error(ws: &WorkerStats, text: &str) {
    ws.counters.error_replies.fetch_add(1, Ordering::Relaxed);
    let code = text.split(' ').next().unwrap_or("ERR").to_string();
    *ws.errors.lock().entry(code).or_insert(0) += 1;
}

/// Resolves a request to its command (or subcommand), or the error Redis would give.
pub fn resolve<'t>(srv: &'t Server, argv: &[&[u8]]) -> Result<&'t Arc<Command>, (Option<&'t Command>, CmdError)> {
    let Some(cmd) = srv.table.lookup(argv[0]) else {
        return Err((None, CmdError::Msg(unknown_command_error(argv).into())));
    };
    if cmd.is_container && argv.len() >= 2 {
        return match cmd.subcommand(argv[1]) {
            Some(sub) if sub.arity_ok(argv.len()) => Ok(sub),
            Some(sub) => Err((Some(sub), CmdError::Arity(sub.full_name().to_string()))),
            // An unknown subcommand is no command: Redis counts it in no commandstats line.
            None => Err((
                None,
                CmdError::Msg(
                    format!(
                        "ERR unknown subcommand '{}'. Try {} HELP.",
                        String::from_utf8_lossy(&argv[1][..argv[1].len().min(128)]),
                        cmd.name.to_uppercase()
                    )
                    .into(),
                ),
            )),
        };
    }
    if !cmd.arity_ok(argv.len()) {
        return Err((Some(cmd), CmdError::Arity(cmd.full_name().to_string())));
    }
    Ok(cmd)
}

/// `resolve`, trying the client's previous command first (see `Client::memo_cmd`).
fn resolve_memo<'t>(
    srv: &'t Server,
    client: &mut Client,
    argv: &[&[u8]],
) -> Result<&'t Arc<Command>, (Option<&'t Command>, CmdError)> {
    if let Some(c) = client.memo_cmd.checked_sub(1).and_then(|i| srv.table.all.get(i)) {
        if argv[0].eq_ignore_ascii_case(c.name.as_bytes()) && c.arity_ok(argv.len()) {
            return Ok(c);
        }
    }
    let c = resolve(srv, argv)?;
    // Only a plain top-level command: a container resolves by its second argument, and a
    // subcommand's name ("config|get") is not something a request can name.
    if !c.is_container && argv[0].eq_ignore_ascii_case(c.name.as_bytes()) {
        client.memo_cmd = c.id + 1;
    }
    Ok(c)
}

/// The generic gates (Redis's `processCommand`), then the command.
pub fn dispatch(srv: &Server, ws: &WorkerStats, client: &mut Client, argv: &[&[u8]], out: &mut Reply) {
    dispatch_hinted(srv, ws, client, argv, None, out)
}

/// `dispatch`, with the shard and hash of `argv[1]` when the look-ahead already computed them.
pub fn dispatch_hinted(
    srv: &Server,
    ws: &WorkerStats,
    client: &mut Client,
    argv: &[&[u8]],
    key_hint: Option<KeyHint>,
    out: &mut Reply,
) {
    out.proto = client.proto;
    // Redis keeps the tracking table within its limit before every command (the cron does too,
    // but may be paused); invalidations so caused reach a tracking client before its reply
    // (pushes: CLIENT REPLY OFF does not drop them).
    if srv.tracking.on() {
        tracking_before_command(srv, client, out);
    }
    // CLIENT REPLY OFF/SKIP: run the command but drop what it replies.
    let mark = out.buf.len();
    client.reply_mark = mark;
    if client.reply_mode == ReplyMode::SkipNext {
        client.reply_mode = ReplyMode::Skipping;
    }
    gated(srv, ws, client, argv, key_hint, out);
    let pushed = std::mem::take(&mut client.push_reply);
    match client.reply_mode {
        ReplyMode::On => {}
        ReplyMode::OffAfterThis => client.reply_mode = ReplyMode::Off,
        ReplyMode::Off if client.import.is_some() && out.buf.get(mark) == Some(&b'-') => {
            // An import link's command failed: as Valkey, the migration fails and the link
            // closes (the source learns of it from the closed socket).
            let err = String::from_utf8_lossy(&out.buf[mark + 1..]).trim_end().to_string();
            out.buf.truncate(mark);
            crate::log_warning!(
                "== CRITICAL == This slot-import-target is sending an error to its slot-import-source: '{err}' after processing the command '{}'",
                String::from_utf8_lossy(argv[0])
            );
            if let Some(job) = &client.import {
                job.fail("Failed to process command during slot migration. Check logs for more information");
                srv.cluster.import_failed(job);
                srv.slot_import_ended(job);
            }
            client.close_after_reply = true;
        }
        ReplyMode::Off | ReplyMode::Skipping | ReplyMode::SkipNext => {
            // (Un)subscribe confirmations are pushes: silencing replies does not drop them.
            if !pushed {
                out.buf.truncate(mark);
            }
            if client.reply_mode == ReplyMode::Skipping {
                client.reply_mode = ReplyMode::On;
            }
        }
    }
}

#[cold]
fn tracking_before_command(srv: &Server, client: &Client, out: &mut Reply) {
    srv.tracking.enforce_limit(&srv.reach());
    if client.tracking.is_some() {
        client.handle.take_mail(&mut out.buf);
    }
}

fn gated(
    srv: &Server,
    ws: &WorkerStats,
    client: &mut Client,
    argv: &[&[u8]],
    key_hint: Option<KeyHint>,
    out: &mut Reply,
) {
    let cmd = match resolve_memo(srv, client, argv) {
        Ok(c) => c,
        Err((cmd, e)) => return reject(srv, ws, client, out, cmd, e),
    };
    client.handle.last_cmd.store(cmd.id + 1, Ordering::Relaxed);
    // The user's rules changed since this connection last read them (one relaxed load).
    let epoch = srv.acl.epoch.load(Ordering::Relaxed);
    if client.acl_epoch != epoch {
        refresh_acl(srv, client, epoch);
    }
    if !client.authenticated && !cmd.has(flags::NO_AUTH) {
        return reject(srv, ws, client, out, Some(cmd), CmdError::NoAuth);
    }
    // ACL: skipped for a user whose root selector allows everything (the default user).
    if let Some(p) = client.perms.as_ref().filter(|p| !p.unrestricted) {
        if let Err((d, pos)) = p.check(cmd, argv) {
            let context = if client.multi.is_some() { Context::Multi } else { Context::Toplevel };
            let e = acl_denied(srv, client, cmd, argv, d, pos, context);
            return reject(srv, ws, client, out, Some(cmd), CmdError::msg(format!("NOPERM {e}")));
        }
    }
    // Cluster mode: a command on keys this node does not serve goes elsewhere (one bool when
    // standalone; one byte per key slot in the common case).
    if srv.cluster.enabled {
        if let Some(e) = cluster_gate(srv, client, cmd, argv, key_hint) {
            if cmd.name == "exec" {
                super::multi::discard_state(srv, client);
                super::multi::unwatch_all(srv, client);
                ws.cmds[cmd.id].rejected_calls.fetch_add(1, Ordering::Relaxed);
                return error_reply(ws, out, &e);
            }
            return reject(srv, ws, client, out, Some(cmd), e);
        }
    }
    // CLIENT CAPA redirect: on a replica, data commands go to the master (one load otherwise).
    if client.capa_redirect {
        if let Some(e) = redirect(srv, client, cmd) {
            return reject(srv, ws, client, out, Some(cmd), e);
        }
    }
    // DEBUG and MODULE LOAD/UNLOAD are PROTECTED: allowed by their `enable-*-command`
    // setting (immutable, so read only here, off the common path).
    if cmd.has(flags::PROTECTED) {
        let (param, setting, what) = if cmd.name.starts_with("module") {
            (crate::config::p::ENABLE_MODULE_COMMAND, "enable-module-command", "MODULE")
        } else {
            (crate::config::p::ENABLE_DEBUG_COMMAND, "enable-debug-command", "DEBUG")
        };
        let v = srv.config.text(param);
        if !(v == "yes" || (v == "local" && client.handle.is_local())) {
            return reject(srv, ws, client, out, Some(cmd), CmdError::msg(format!(
                "ERR {what} command not allowed. If the {setting} option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.",
            )));
        }
    }
    if client.subs.is_some() {
        client.reconcile_subs();
    }
    if client.resp2_subscribed() && !cmd.has(flags::PUBSUB_CONTEXT) {
        return reject(srv, ws, client, out, Some(cmd), CmdError::msg(format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            cmd.full_name()
        )));
    }
    // Loading, or the last save failed: one relaxed load when neither.
    let gates = srv.persistence.gates.load(Ordering::Relaxed);
    if gates != 0 && !client.replaying {
        if let Some(e) = gate_refusal(srv, client, cmd, argv, gates) {
            return reject(srv, ws, client, out, Some(cmd), e);
        }
    }
    // A replica's connection carries its ACKs: anything that would answer goes into its
    // stream instead. Redis drops such a replica (one bool, set by SYNC/PSYNC).
    if client.replica && cmd.name != "replconf" {
        let keyspace = cmd.has(flags::WRITE | flags::READONLY | flags::MAY_REPLICATE);
        return replica_misuse(
            srv,
            client,
            cmd.full_name(),
            keyspace.then_some("Replica can't interact with the keyspace"),
        );
    }
    // A MONITOR client is a replica to Redis, which keeps it away from the keyspace.
    if client.monitor.is_some() && cmd.has(flags::WRITE | flags::READONLY | flags::MAY_REPLICATE) {
        return reject(srv, ws, client, out, Some(cmd), CmdError::msg("ERR Replica can't interact with the keyspace"));
    }
    // Client eviction, then maxmemory: one relaxed load each when they are off.
    if srv.config.hot.maxmemory_clients.load(Ordering::Relaxed) != 0 {
        crate::services::evict::evict_clients(srv);
    }
    if srv.config.hot.maxmemory.load(Ordering::Relaxed) != 0 && !client.replaying {
        let gate = memory_gate(srv, client, cmd, argv);
        // Invalidations of keys just evicted reach a tracking client before its reply.
        if client.tracking.is_some() {
            client.handle.take_mail(&mut out.buf);
        }
        if let Err(e) = gate {
            return reject(srv, ws, client, out, Some(cmd), e);
        }
    }
    if let Some(m) = client.multi.as_mut() {
        let n = cmd.name.as_str();
        let passes = matches!(n, "exec" | "discard" | "multi" | "watch" | "quit" | "reset");
        if !passes {
            if cmd.has(flags::NO_MULTI) {
                return reject(
                    srv,
                    ws,
                    client,
                    out,
                    Some(cmd),
                    CmdError::msg("ERR Command not allowed inside a transaction"),
                );
            }
            m.queued.push(argv.iter().map(|a| a.to_vec()).collect());
            client.handle.multi.store(m.queued.len() as i64, Ordering::Relaxed);
            // Each queued argument's bytes plus a pointer-and-length per argument.
            let bytes: usize = argv.iter().map(|a| a.len() + 16).sum();
            client.handle.multi_mem.fetch_add(bytes as u64, Ordering::Relaxed);
            out.simple("QUEUED");
            return;
        }
    }
    ws.beat.running(cmd.id, client.id());
    // CLIENT PAUSE: one load when no pause is on.
    if srv.pause_until.load(Ordering::Relaxed) != 0 && must_wait_for_pause(srv, client, cmd, argv) {
        return postpone(srv, client, argv);
    }
    let plan = match (key_hint, cmd.run.scope, cmd.single_key) {
        // GET, SET, INCR … whose key the look-ahead already hashed to its shard.
        (Some(k), Scope::Keys, Some(1)) => LockPlan::one(client.db, k.shard),
        _ => match lock_plan(cmd, argv, client.db, false, srv.ks.num_dbs()) {
            Ok(p) => p,
            Err(e) => return reject(srv, ws, client, out, Some(cmd), e),
        },
    };
    // A command that touches only the keys it names waits for a big value a snapshot is
    // still writing only if it is one of them; any other finishes all in its shards.
    let mut locks = if matches!(cmd.run.scope, Scope::Keys) {
        let mut l = Locks::acquire_keys(&srv.ks, plan);
        if l.deferred {
            finish_deferred_keys(cmd, argv, client.db, &mut l);
        }
        l
    } else {
        Locks::acquire(&srv.ks, plan)
    };
    call(srv, ws, client, out, cmd, argv, &mut locks, key_hint.map(|k| k.hash));
    drop(locks);
    // What the busy poll put off while this command ran a script (one load otherwise).
    srv.ks.run_later();
}

/// A command from one of this server's replicas other than its REPLCONF: its reply would
/// land in the replication stream, so the replica is dropped unanswered, with Redis's log
/// lines (a keyspace command's refusal first, as Redis logs an error sent to a replica).
#[cold]
fn replica_misuse(srv: &Server, client: &mut Client, name: &str, error: Option<&str>) {
    if let Some(e) = error {
        let e = e.strip_prefix("ERR ").unwrap_or(e);
        crate::log_warning!(
            "== CRITICAL == This master is sending an error to its replica: '{e}' after processing the command '{name}'"
        );
    }
    let info = super::client::info_line(&srv.table, &client.handle, srv.now_ms(), None);
    crate::log_warning!("Replica generated a reply to command '{name}', disconnecting it: {info}");
    client.handle.kill();
}

/// Runs a command whose gates it passed already on its worker: the EVAL of a Lua debugging
/// session, moved with its connection to a thread of its own (`server::debugging`).
pub fn run_passed(srv: &Server, ws: &WorkerStats, client: &mut Client, argv: &[&[u8]], out: &mut Reply) {
    out.proto = client.proto;
    let cmd = match resolve(srv, argv) {
        Ok(c) => c.clone(),
        Err((_, e)) => return error_reply(ws, out, &e),
    };
    let plan = match lock_plan(&cmd, argv, client.db, false, srv.ks.num_dbs()) {
        Ok(p) => p,
        Err(e) => return error_reply(ws, out, &e),
    };
    let mut locks = Locks::acquire(&srv.ks, plan);
    call(srv, ws, client, out, &cmd, argv, &mut locks, None);
    drop(locks);
    srv.ks.run_later();
}

/// Finishes the snapshot's writing of the big values among the command's keys.
#[cold]
fn finish_deferred_keys(cmd: &Command, argv: &[&[u8]], db: usize, locks: &mut Locks) {
    let mut pos: SmallVec<[usize; 8]> = SmallVec::new();
    match cmd.single_key {
        Some(i) if i < argv.len() => pos.push(i),
        Some(_) => {}
        None => {
            let _ = keyspec::key_positions(&cmd.key_specs, argv, &mut pos);
        }
    }
    for i in pos {
        locks.finish_deferred(db, argv[i]);
    }
}

/// Over `maxmemory`, evicts first (Redis's `performEvictions` in `processCommand`); refuses a
/// command that may grow memory when nothing more can be evicted — any command but EXEC,
/// DISCARD, QUIT and RESET inside MULTI, and an EXEC of such commands.
fn memory_gate(srv: &Server, client: &mut Client, cmd: &Command, argv: &[&[u8]]) -> CmdResult {
    let out_of_memory = crate::services::evict::perform(srv) == crate::services::evict::Outcome::Fail;
    client.oom_at_start = out_of_memory;
    if !out_of_memory {
        return Ok(());
    }
    let n = cmd.name.as_str();
    let mut reject = gate_flags(srv, client, cmd, argv) & flags::DENYOOM != 0;
    if client.multi.is_some() && !matches!(n, "exec" | "discard" | "quit" | "reset") {
        reject = true;
    }
    if reject {
        return Err(CmdError::Oom);
    }
    Ok(())
}

/// What the gate word refuses `cmd` with, if anything (not for the master's stream or an
/// AOF replay, which must run). The script flags are looked at only past the gates that do
/// not need them.
#[cold]
fn gate_refusal(srv: &Server, client: &Client, cmd: &Command, argv: &[&[u8]], gates: u8) -> Option<CmdError> {
    use crate::services::gates::{
        GATE_LOADING, GATE_NO_REPLICAS, GATE_READONLY, GATE_REPLICA, GATE_SAVE_FAILED, GATE_SCRIPT_BUSY, GATE_STALE,
    };
    if gates & GATE_LOADING != 0 && !cmd.has(flags::LOADING) && !load_passed_quietly(srv) {
        return Some(CmdError::Loading);
    }

    // The master's stream on a replica waits for a busy script instead (its shards).
    if gates & GATE_SCRIPT_BUSY != 0 && !cmd.has(flags::ALLOW_BUSY) {
        return Some(busy_error(srv));
    }
    let eff = gate_flags(srv, client, cmd, argv);
    // A replica loading its master's snapshot beside the old data still serves, but not what
    // would change its role or its files meanwhile (Redis's no-async-loading commands).
    if gates & GATE_REPLICA != 0
        && eff & flags::NO_ASYNC_LOADING != 0
        && srv.repl.upstream.async_loading.load(std::sync::atomic::Ordering::Relaxed)
    {
        return Some(CmdError::Loading);
    }
    let writes = eff & flags::WRITE != 0;
    if gates & GATE_STALE != 0 && eff & flags::STALE == 0 {
        return Some(CmdError::MasterDown);
    }
    if gates & GATE_NO_REPLICAS != 0 && writes {
        return Some(CmdError::NoReplicas);
    }
    if gates & GATE_READONLY != 0 && writes {
        return Some(CmdError::ReadOnly);
    }
    // stop-writes-on-bgsave-error.
    if gates & GATE_SAVE_FAILED != 0 && (writes || cmd.name == "ping") && srv.persistence.writes_refused(&srv.config) {
        return Some(CmdError::Misconf);
    }
    None
}

/// Redis serves no event during a load until `loading-process-events-interval-bytes` of it
/// are read (a replica's full sync, DEBUG RELOAD): a command arriving meanwhile waits, and a
/// small load is never seen as `-LOADING`. So here: a command that meets a load waits while
/// the load has read less than that; true if the load ended meanwhile (the command runs).
/// Not while a script is busy: that script may be the load's own (an EVAL in the AOF that
/// DEBUG LOADAOF replays), which cannot go on while its thread waits here (the command came
/// from inside its hook), and Redis serves events from a slow script whatever the load has
/// read — the command gets `-LOADING` at once.
#[cold]
fn load_passed_quietly(srv: &Server) -> bool {
    let interval: u64 =
        srv.config.text(crate::config::p::LOADING_PROCESS_EVENTS_INTERVAL_BYTES).parse().unwrap_or(2 << 20);
    let p = &srv.persistence;
    loop {
        if !p.loading() {
            return true;
        }
        // The busy gate is read each time round: a script the load runs may turn busy while
        // this command waits.
        if p.loading.loaded_bytes.load(Ordering::Relaxed) >= interval
            || p.gates.load(Ordering::Relaxed) & crate::services::gates::GATE_SCRIPT_BUSY != 0
            || crate::engine::is_serving_while_busy()
        {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// The `-BUSY` text while a script runs: its kind names the command that stops it.
pub fn busy_error(srv: &Server) -> CmdError {
    CmdError::Busy { function: !srv.scripts.run.is_eval.load(Ordering::Relaxed) }
}

/// The flags the gates check a command by (Redis's getCommandFlags, and processCommand's view
/// of EXEC). A script that declares flags (a shebang, or any function) replaces EVAL's and
/// FCALL's own: it writes unless `no-writes`, is refused when out of memory unless
/// `allow-oom` or `no-writes`, and runs on a stale replica only with `allow-stale`. So a
/// writing function on a read-only replica is refused as any write is, before it starts. EXEC
/// writes, denies OOM and refuses staleness as the commands it queued do, so a transaction
/// is refused whole when its writes would be (`-EXECABORT … NOREPLICAS`). Only the gates'
/// rare paths call this.
fn gate_flags(srv: &Server, client: &Client, cmd: &Command, argv: &[&[u8]]) -> u32 {
    use crate::services::scripts::sflags;
    if cmd.name == "exec" {
        let Some(m) = client.multi.as_ref() else { return cmd.flags };
        let mut eff = cmd.flags;
        for q in &m.queued {
            let args: Vec<&[u8]> = q.iter().map(|a| a.as_slice()).collect();
            if let Ok(c) = resolve(srv, &args) {
                let f = gate_flags(srv, client, c, &args);
                eff |= f & (flags::WRITE | flags::DENYOOM | flags::NO_ASYNC_LOADING);
                if f & flags::STALE == 0 {
                    eff &= !flags::STALE;
                }
            }
        }
        return eff;
    }
    let script = match cmd.name.as_str() {
        "eval" | "eval_ro" if argv.len() > 1 => {
            let sha = crate::services::scripts::sha1_hex(argv[1]);
            match srv.scripts.get(&sha) {
                Some(s) => Some(s.flags),
                None => crate::services::scripts::parse_shebang(argv[1]).ok().map(|(f, _)| f),
            }
        }
        "evalsha" | "evalsha_ro" if argv.len() > 1 => srv.scripts.get(argv[1]).map(|s| s.flags),
        "fcall" | "fcall_ro" if argv.len() > 1 => {
            let name = String::from_utf8_lossy(argv[1]);
            srv.scripts.functions.read().function(&name).map(|(_, f)| f.flags)
        }
        _ => None,
    };
    match script {
        Some(f) if f & sflags::EVAL_COMPAT == 0 => {
            let mut eff = cmd.flags & !(flags::STALE | flags::DENYOOM | flags::WRITE);
            if f & (sflags::ALLOW_OOM | sflags::NO_WRITES) == 0 {
                eff |= flags::DENYOOM;
            }
            if f & sflags::NO_WRITES == 0 {
                eff |= flags::WRITE;
            }
            if f & sflags::ALLOW_STALE != 0 {
                eff |= flags::STALE;
            }
            eff
        }
        _ => cmd.flags,
    }
}

/// (`lfu-log-factor`, `lfu-decay-time`) under an LFU `maxmemory-policy`.
#[inline]
pub fn lfu_params(srv: &Server) -> Option<(u32, u32)> {
    let hot = &srv.config.hot;
    crate::services::evict::Policy::from_u32(hot.maxmemory_policy.load(Ordering::Relaxed))
        .is_lfu()
        .then(|| (hot.lfu_log_factor.load(Ordering::Relaxed), hot.lfu_decay_time.load(Ordering::Relaxed)))
}

/// Reads the connection's user's rules again after an ACL change. A user deleted meanwhile
/// leaves the connection as the default user, unauthenticated (its connection is being closed);
/// a default user without password lets an unauthenticated connection in, as Redis's
/// `authRequired` does.
#[cold]
pub fn refresh_acl(srv: &Server, client: &mut Client, epoch: u64) {
    if client.user.as_ref().is_some_and(|u| u.deleted.load(Ordering::Acquire)) {
        client.set_user(None);
        client.authenticated = false;
    }
    if !client.authenticated && !srv.acl.auth_required() {
        client.authenticated = true;
    }
    let user = client.user.clone().unwrap_or_else(|| srv.acl.default.clone());
    client.perms = Some(user.rules());
    client.acl_epoch = epoch;
}

/// Logs an ACL denial (ACL LOG, INFO counters) and returns Redis's NOPERM text for it, without
/// the code.
pub fn acl_denied(
    srv: &Server,
    client: &Client,
    cmd: &Command,
    argv: &[&[u8]],
    d: Denied,
    pos: usize,
    context: Context,
) -> String {
    let user = client.user_name();
    let object: &[u8] = match d {
        Denied::Command | Denied::Auth => cmd.name.as_bytes(),
        Denied::Key | Denied::Channel => argv[pos],
    };
    log_acl(srv, client, d, context, object, &user);
    crate::services::acl::denial_text(d, &user, cmd, argv.get(pos).copied().unwrap_or(b""), false)
}

/// Adds an ACL LOG entry for `client` (the caller of a script, for the script's commands).
pub fn log_acl(srv: &Server, client: &Client, d: Denied, context: Context, object: &[u8], user: &[u8]) {
    let now = srv.now_ms();
    let who = client.acl_origin.as_ref().unwrap_or(&client.handle);
    let info = super::client::info_line(&srv.table, who, now, None);
    let max = srv.config.int(crate::config::p::ACLLOG_MAX_LEN).max(0) as usize;
    srv.acl.log_denial(d, context, object, user, info, now, max);
}

/// Whether CLIENT PAUSE holds this command back: every command under `ALL`; under `WRITE`
/// those that may write (write commands, and EXEC of a transaction holding one), as Redis.
fn must_wait_for_pause(srv: &Server, client: &Client, cmd: &Command, argv: &[&[u8]]) -> bool {
    let Some(all) = srv.pause_active(srv.now_ms()) else { return false };
    // Replicas are never paused: their ACKs must get through (Redis's processCommand). Nor
    // is a replayed stream (the master's on a replica, the AOF at load): it has no session
    // to resume a postponed command in its place, so it applies in order at once.
    if client.replaying || client.handle.replica.load(Ordering::Relaxed) {
        return false;
    }
    if all || may_write(srv, cmd, argv) {
        return true;
    }
    cmd.name == "exec"
        && client.multi.as_ref().is_some_and(|m| {
            m.queued.iter().any(|argv| {
                let args: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
                resolve(srv, &args).is_ok_and(|c| may_write(srv, c, &args))
            })
        })
}

/// A write command, or one that may replicate — unless it runs a script whose shebang
/// declares `no-writes` (Redis's getCommandFlags for EVAL and FCALL).
fn may_write(srv: &Server, cmd: &Command, argv: &[&[u8]]) -> bool {
    if cmd.has(flags::WRITE) {
        return true;
    }
    cmd.has(flags::MAY_REPLICATE)
        && (!matches!(cmd.name.as_str(), "eval" | "evalsha" | "fcall") || srv.scripts.call_may_write(&cmd.name, argv))
}

/// Suspends the client until the pause ends (its deadline, or CLIENT UNPAUSE); the command
/// then runs as if just received.
#[cold]
fn postpone(srv: &Server, client: &mut Client, argv: &[&[u8]]) {
    let w = Arc::new(Waiter {
        client_id: client.id(),
        db: client.db,
        argv: argv.iter().map(|a| a.to_vec()).collect(),
        keys: Vec::new(),
        deadline_ms: Some(srv.pause_retry_at(srv.now_ms())),
        proto: client.proto,
        serve: blocking::never_served,
        on_timeout: |_| {},
        state: crate::lockorder::Mutex::new(WaitState::Waiting),
        wake: client.wake.clone().unwrap_or_else(|| Arc::new(|| {})),
        postponed: true,
        acl_epoch: client.acl_epoch,
    });
    srv.blocked_clients.fetch_add(1, Ordering::Relaxed);
    *client.handle.waiter.lock() = Some(w.clone());
    client.waiting = Some(w.clone());
    srv.paused.lock().push(w);
}

/// The shards a command must lock. `in_exec`: walkers lock their whole database.
pub fn lock_plan(cmd: &Command, argv: &[&[u8]], db: usize, in_exec: bool, ndbs: usize) -> Result<LockPlan, CmdError> {
    let mut plan = LockPlan::default();
    let keys = |plan: &mut LockPlan| -> CmdResult {
        let mut pos: SmallVec<[usize; 8]> = SmallVec::new();
        if keyspec::key_positions(&cmd.key_specs, argv, &mut pos).is_err() {
            // The command reports its own numkeys error before touching keys.
            return Ok(());
        }
        for i in pos {
            plan.key(db, argv[i]);
        }
        Ok(())
    };
    match cmd.run.scope {
        Scope::None => {}
        Scope::Keys => match cmd.single_key {
            // The common case (GET, SET, INCR …): one key at a fixed position.
            Some(i) => {
                if i < argv.len() {
                    plan.key(db, argv[i]);
                }
            }
            None => keys(&mut plan)?,
        },
        Scope::Walk => {
            if in_exec {
                plan.whole_db(db)
            }
        }
        Scope::WalkAll => {
            if in_exec {
                for d in 0..ndbs {
                    plan.whole_db(d);
                }
            }
        }
        Scope::WalkAllOr(all) => {
            if in_exec || all(argv) {
                for d in 0..ndbs {
                    plan.whole_db(d);
                }
            }
        }
        Scope::Db => plan.whole_db(db),
        Scope::All => {
            for d in 0..ndbs {
                plan.whole_db(d);
            }
        }
        Scope::Custom(f) => {
            keys(&mut plan)?;
            f(argv, db, &mut plan)?;
        }
    }
    Ok(plan)
}

/// Runs one command with the locks held (used directly and by EXEC for queued commands).
/// `arg1_hash`: the keyspace hash of `argv[1]`, when the look-ahead computed it.
#[allow(clippy::too_many_arguments)]
pub fn call(
    srv: &Server,
    ws: &WorkerStats,
    client: &mut Client,
    out: &mut Reply,
    cmd: &Command,
    argv: &[&[u8]],
    locks: &mut Locks<'_>,
    arg1_hash: Option<u64>,
) -> bool {
    // One clock read gives both the command's fixed time (7.2 semantics) and the start of
    // its duration measurement; within a pipelined batch it is the previous command's end.
    let start = client.clock.take().unwrap_or_else(|| srv.clock.instant());
    let now = client.fixed_ms.unwrap_or_else(|| srv.clock.ms_at(start));
    // Where this command's reply begins (a queued command's inside EXEC's), for HOTKEYS.
    let reply_from = out.buf.len();
    let emit = srv.effects_enabled();
    let db = client.db;
    let no_touch = client.no_touch && cmd.name != "touch";
    let lfu = lfu_params(srv);
    let replica = srv.persistence.gates.load(Ordering::Relaxed) & crate::services::gates::GATE_REPLICA != 0;
    let mut ctx = Ctx {
        srv,
        ws,
        reply: out,
        args: argv,
        cmd,
        rewrote: false,
        ks: KsView {
            locks,
            db,
            now,
            lru_clock: if lfu.is_some() { crate::services::evict::lfu_initial(now) } else { srv.lru_clock(now) },
            lfu,
            no_touch,
            dirty: 0,
            emit,
            effects: Vec::new(),
            stats: &ws.counters,
            ready: Vec::new(),
            key_hint: arg1_hash.and_then(|h| argv.get(1).map(|a| (a.as_ptr() as usize, a.len(), h))),
            // A replica leaves expired keys to its master's DELs — but a writable replica's
            // own write deletes what it finds expired, as Redis's lookups for writing do.
            hold_expired: (srv.pause_until.load(Ordering::Relaxed) != 0 && srv.writes_paused())
                || (replica && (client.replaying || !cmd.has(flags::WRITE))),
            replica_ttls: replica && !client.replaying,
            loading: client.replaying,
            notify: srv.config.hot.notify.load(Ordering::Relaxed),
            notes: Vec::new(),
            track: srv.tracking.on(),
            touched: Vec::new(),
        },
        client,
    };
    // A panic in a handler that may write stops the process (`log::install_panic_policy`): a
    // half-made change must not live on with memory, AOF and replicas disagreeing.
    let mode = if cmd.has(flags::WRITE) { crate::log::IN_WRITE_HANDLER } else { crate::log::IN_READ_HANDLER };
    let prev = crate::log::enter_handler(mode);
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (cmd.run.handler)(&mut ctx)));
    crate::log::leave_handler(prev);
    let res: CmdResult = match res {
        Ok(r) => r,
        Err(_) => {
            // A command not flagged as writing that changed data all the same (a script's
            // writes, EXEC's) is no safer to keep running.
            if ctx.ks.dirty > 0 || !ctx.ks.effects.is_empty() {
                crate::log::crash(&format!("panic in command '{}' after it changed data", cmd.full_name()));
            }
            crate::log_warning!("BUG: command '{}' panicked; answered with an error", cmd.full_name());
            Err(CmdError::msg("ERR internal error"))
        }
    };
    let ok = res.is_ok();
    if let Err(e) = &res {
        ws.cmds[cmd.id].failed_calls.fetch_add(1, Ordering::Relaxed);
        error_reply(ws, ctx.reply, e);
    }
    // Write epilogue: count the change and publish the effects, still under the locks so
    // their order matches the order of the writes.
    if ctx.ks.dirty > 0 {
        ws.counters.dirty.fetch_add(ctx.ks.dirty, Ordering::Relaxed);
        if emit && !ctx.rewrote {
            let db = ctx.ks.db;
            ctx.ks.effects.push(Effect::new(db, argv.iter().map(|a| a.to_vec()).collect()));
        }
    }
    // A blocking command that has to wait: register it under the locks it holds.
    if let Some(req) = ctx.client.blocked.take() {
        let w = Arc::new(Waiter {
            client_id: ctx.client.id(),
            db: ctx.ks.db,
            argv: req.argv.unwrap_or_else(|| argv.iter().map(|a| a.to_vec()).collect()),
            keys: req.keys,
            deadline_ms: req.deadline_ms,
            proto: ctx.client.proto,
            serve: req.serve,
            on_timeout: req.on_timeout,
            state: crate::lockorder::Mutex::new(WaitState::Waiting),
            wake: ctx.client.wake.clone().unwrap_or_else(|| Arc::new(|| {})),
            postponed: false,
            acl_epoch: ctx.client.acl_epoch,
        });
        blocking::register(ctx.ks.locks, &w);
        srv.blocked_clients.fetch_add(1, Ordering::Relaxed);
        if let Some(then) = req.registered {
            then(srv, &w);
        }
        *ctx.client.handle.waiter.lock() = Some(w.clone());
        ctx.client.waiting = Some(w);
    }
    // Serve clients blocked on keys this command made ready — after its own effects, and for
    // a transaction only once the whole EXEC is done (so no waiter sees half of it).
    ctx.client.ready.append(&mut ctx.ks.ready);
    if !ctx.client.in_exec && !ctx.client.ready.is_empty() {
        ctx.ks.ready = std::mem::take(&mut ctx.client.ready);
        let before = ctx.ks.dirty;
        blocking::serve_ready(&mut ctx.ks, srv);
        // The waiters' pops and moves are changes too, as Redis counts them when their
        // commands run again.
        if ctx.ks.dirty > before {
            ws.counters.dirty.fetch_add(ctx.ks.dirty - before, Ordering::Relaxed);
        }
    }
    if !ctx.ks.notes.is_empty() {
        crate::services::notify::publish(&srv.reach(), &ctx.ks.notes, ctx.client.id());
    }
    if ctx.ks.track {
        track(srv, ctx.client, cmd, argv, &ctx.ks.touched);
    }
    if emit && !ctx.ks.effects.is_empty() {
        if ctx.client.in_exec {
            ctx.client.exec_effects.append(&mut ctx.ks.effects);
        } else {
            srv.publish_effects(&ctx.ks.effects, ctx.ks.locks.seen_epoch());
        }
    }
    if srv.pubsub.monitoring()
        && !cmd.has(flags::SKIP_MONITOR | flags::ADMIN)
        && !ctx.client.replaying
        && !ctx.client.retrying
    {
        feed_monitors(srv, ctx.client, argv);
    }
    let st = &ws.cmds[cmd.id];
    let end = srv.clock.instant();
    let us = end.duration_since(start).as_micros() as u64;
    // A command that blocked counts as a call when its wait ends, as in Redis; an EVAL that
    // starts a debugging session, when it runs on the session's thread (`run_passed`).
    if ctx.client.waiting.is_none() && ctx.client.ldb_request.is_none() {
        stats::bump(&st.calls, 1);
        stats::bump(&st.usec, us);
    }
    let hot = &srv.config.hot;
    let track = hot.track.load(Ordering::Relaxed);
    if track & crate::config::TRACK_LATENCY != 0 {
        st.hist.record(us);
    }
    if track & crate::config::TRACK_HOTKEYS != 0 {
        if let Some(key) = cmd.single_key.and_then(|i| argv.get(i)) {
            ws.hot.touch(db, key);
        }
    }
    if track & crate::config::TRACK_SESSION != 0 && !ctx.client.in_script {
        let own_reply = ctx.reply.buf.len().saturating_sub(reply_from) as u64;
        hotkeys_session(srv, ws, cmd, argv, end.duration_since(start).as_nanos() as u64, own_reply);
    }
    let reply_bytes = ctx.reply.buf.len().saturating_sub(ctx.client.reply_mark) as u64;
    if over_a_threshold(hot, us, ctx.client.req_bytes, reply_bytes) {
        if ctx.client.waiting.is_none() {
            slow_call(srv, ctx.client, cmd, argv, us, reply_bytes);
        } else {
            ctx.client.blocked_us = us;
        }
    }
    ctx.client.clock = Some(end);
    stats::bump(&ws.counters.commands, 1);
    ok
}

/// A HOTKEYS session is running: the command's time and bytes (its request as RESP and its
/// reply) go to its keys, as Redis 8.6 counts them. A command without keys counts nowhere;
/// a script's own commands not at all (the EVAL counts, with its declared keys).
#[cold]
fn hotkeys_session(srv: &Server, ws: &WorkerStats, cmd: &Command, argv: &[&[u8]], ns: u64, reply_bytes: u64) {
    let session = &srv.stats.hotkeys;
    let switch = crate::services::hotkeys::Switch { flags: &srv.config.hot.track, bit: crate::config::TRACK_SESSION };
    if session.expire(srv.now_ms(), &switch) {
        return;
    }
    let mut pos: SmallVec<[usize; 8]> = SmallVec::new();
    if keyspec::key_positions(&cmd.key_specs, argv, &mut pos).is_err() || pos.is_empty() {
        return;
    }
    let keys: SmallVec<[&[u8]; 8]> = pos.iter().map(|&i| argv[i]).collect();
    let digits = |n: usize| n.checked_ilog10().unwrap_or(0) as u64 + 1;
    let request: u64 = 3 + digits(argv.len()) + argv.iter().map(|a| 5 + digits(a.len()) + a.len() as u64).sum::<u64>();
    session.record(&ws.session, &keys, ns, request + reply_bytes);
}

/// Client-side caching after a command: invalidations for the keys it modified, and for a
/// tracking client's read-only command the keys it read (EVAL_RO and the like excepted:
/// the commands their script runs are tracked instead, as in Redis).
#[cold]
fn track(
    srv: &Server,
    client: &mut Client,
    cmd: &Command,
    argv: &[&[u8]],
    touched: &[crate::services::tracking::Touched],
) {
    if !touched.is_empty() {
        // A script's commands run as another client: NOLOOP is about its caller.
        let by = client.tracking.as_ref().map_or(client.id(), |t| t.handle.id);
        let batch = if client.in_exec { Some(&mut client.bcast_batch) } else { None };
        srv.tracking.modified(&srv.reach(), touched, by, batch);
    }
    if client.tracking.is_some()
        && cmd.has(flags::READONLY)
        && !cmd.has(flags::PUBSUB)
        && !matches!(cmd.name.as_str(), "eval_ro" | "evalsha_ro" | "fcall_ro")
    {
        let mut pos: SmallVec<[usize; 8]> = SmallVec::new();
        if keyspec::key_positions(&cmd.key_specs, argv, &mut pos).is_ok() {
            let keys: SmallVec<[&[u8]; 8]> = pos.iter().map(|&i| argv[i]).collect();
            if let Some(t) = &client.tracking {
                srv.tracking.read_by(&srv.reach(), t, client.caching, &keys);
            }
        }
    }
}

/// A blocked command's wait ended (served, timed out, unblocked): the command log and the
/// latency monitor see it now, with the time it ran (not the time it waited), as in Redis.
/// `us`: what it ran before it blocked (`Client::blocked_us`); `reply_bytes`: the reply it
/// was served.
pub fn after_wait(srv: &Server, client: &Client, cmd: &Command, argv: &[&[u8]], us: u64, reply_bytes: u64) {
    if over_a_threshold(&srv.config.hot, us, client.req_bytes, reply_bytes) {
        slow_call(srv, client, cmd, argv, us, reply_bytes);
    }
}

/// Whether a command reached one of the command log's or the latency monitor's thresholds
/// (its duration, its request's and its reply's sizes): three loads and compares per command.
#[inline]
fn over_a_threshold(hot: &crate::config::Hot, us: u64, request_bytes: u64, reply_bytes: u64) -> bool {
    us >= hot.slow_us.load(Ordering::Relaxed)
        || request_bytes >= hot.large_request_over.load(Ordering::Relaxed)
        || reply_bytes >= hot.large_reply_over.load(Ordering::Relaxed)
}

/// A command over one of the command log's thresholds or the latency monitor's: record it.
#[cold]
fn slow_call(srv: &Server, client: &Client, cmd: &Command, argv: &[&[u8]], us: u64, reply_bytes: u64) {
    let hot = &srv.config.hot;
    let now = srv.now_ms() / 1000;
    // EXEC and the commands that carry secrets are left out of every log (Redis's
    // `skip_slowlog`, Valkey's `skip_commandlog`).
    if !cmd.has(flags::SKIP_SLOWLOG) {
        use crate::services::commandlog::{Limits, Measured};
        let slower = hot.slowlog_slower_than.load(Ordering::Relaxed);
        let over = |a: &std::sync::atomic::AtomicU64| Some(a.load(Ordering::Relaxed)).filter(|&t| t != u64::MAX);
        let limits = Limits {
            slower_than: u64::try_from(slower).ok(),
            slow_max: hot.slowlog_max_len.load(Ordering::Relaxed),
            request_over: over(&hot.large_request_over),
            request_max: hot.large_request_max.load(Ordering::Relaxed),
            reply_over: over(&hot.large_reply_over),
            reply_max: hot.large_reply_max.load(Ordering::Relaxed),
        };
        let measured = Measured { usec: us, request_bytes: client.req_bytes, reply_bytes };
        let h = &client.handle;
        let name = h.name.lock().clone();
        srv.commandlog.record(argv, &measured, &limits, now, &h.addr, &name);
    }
    let ms = us / 1000;
    let threshold = hot.latency_monitor_ms.load(Ordering::Relaxed);
    if threshold > 0 && ms >= threshold {
        let event = if cmd.has(flags::FAST) { "fast-command" } else { "command" };
        srv.latency.add(event, now, ms);
    }
}

/// Cleanup when a connection closes: its watches leave the shard registries, a pending
/// blocking wait is cancelled.
pub fn disconnect(srv: &Server, client: &mut Client) {
    if let Some(job) = client.import.take() {
        srv.cluster.import_closed(&job);
        srv.slot_import_ended(&job);
    }
    if client.handle.replica.load(Ordering::Relaxed) {
        srv.repl.remove(client.id());
    }
    super::multi::unwatch_all(srv, client);
    client.unsubscribe_all(&srv.pubsub);
    if client.tracking.take().is_some() {
        srv.tracking.disable(client.id());
        *client.handle.tracking.lock() = None;
    }
    // The mailbox refers back to the handle: break the cycle (`Core::release` clears it
    // again once the handle is closed, in case another client reached it meanwhile).
    client.handle.mail.lock().take();
    if let Some(w) = client.waiting.take() {
        if w.finish(WaitState::Cancelled) {
            srv.blocked_clients.fetch_sub(1, Ordering::Relaxed);
        }
        blocking::unregister(&srv.ks, &w);
        *client.handle.waiter.lock() = None;
    }
}

/// Why `redis.call` refused a command; its text is the script's error.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// A rule for scripts, in Redis's words (the script's error gives it the `ERR` code).
    Rule(std::borrow::Cow<'static, str>),
    /// A gate's refusal, keeping its own code (`-READONLY …`).
    Gate(CmdError),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Rule(m) => f.write_str(m),
            Refusal::Gate(e) => write!(f, "-{}", e.text()),
        }
    }
}

/// A command called by a running script (`redis.call`/`redis.pcall`; Redis's `scriptCall`):
/// the script's own checks — the command exists with the right arity, may run from a script,
/// is no write in a read-only script, may write now — then its shards are added to the
/// script's locks (it keeps them until it ends) and it runs through [`call`] like any other,
/// its reply in `out`. `Err`: why the call was refused.
pub fn script_call(
    srv: &Server,
    ws: &WorkerStats,
    client: &mut Client,
    out: &mut Reply,
    argv: &[&[u8]],
    locks: &mut Locks<'_>,
    read_only: bool,
) -> Result<(), Refusal> {
    // A refusal is a rejected call of the command (if it exists) and an error reply of its own
    // in the error statistics, as Redis's scriptCall counts it (the script's error that may
    // follow is not counted again).
    let refused = |cmd: Option<&Command>, e: Refusal| {
        if let Some(c) = cmd {
            ws.cmds[c.id].rejected_calls.fetch_add(1, Ordering::Relaxed);
        }
        match &e {
            Refusal::Rule(_) => count_error(ws, "ERR"),
            Refusal::Gate(g) => count_error(ws, &g.text()),
        }
        Err(e)
    };
    let rule = |m: &'static str| Refusal::Rule(m.into());
    let cmd = match resolve(srv, argv) {
        Ok(c) => c,
        Err((Some(c), _)) => return refused(Some(c), rule("Wrong number of args calling Redis command from script")),
        Err((None, _)) => return refused(None, rule("Unknown Redis command called from script")),
    };
    let refuse = |e: Refusal| refused(Some(cmd), e);
    if cmd.has(flags::NOSCRIPT) && !srv.deny_scripts_disabled.load(Ordering::Relaxed) {
        return refuse(rule("This Redis command is not allowed from script"));
    }
    // A stale replica (an `allow-stale` script got this far): only commands flagged `stale`.
    if srv.persistence.gates.load(Ordering::Relaxed) & crate::services::gates::GATE_STALE != 0
        && !cmd.has(flags::STALE)
        && !client.replaying
    {
        return refuse(rule("Can not execute the command on a stale replica"));
    }
    if let Some(p) = client.perms.as_ref().filter(|p| !p.unrestricted) {
        if let Err((d, pos)) = p.check(cmd, argv) {
            let e = acl_denied(srv, client, cmd, argv, d, pos, Context::Lua);
            return refuse(Refusal::Rule(format!("ACL failure in script: {e}").into()));
        }
    }
    let writes = cmd.has(flags::WRITE);
    if read_only && (writes || cmd.has(flags::MAY_REPLICATE)) {
        return refuse(rule("Write commands are not allowed from read-only scripts."));
    }
    // A read-only replica, a failed save, too few good replicas: writes are refused, unless
    // the script already wrote (it cannot stop half-way), as Redis's
    // scriptVerifyWriteCommandAllow.
    if writes && !srv.scripts.run.wrote.load(Ordering::Relaxed) && !client.replaying {
        let gates = srv.persistence.gates.load(Ordering::Relaxed);
        if gates & crate::services::gates::GATE_READONLY != 0 {
            return refuse(Refusal::Gate(CmdError::ReadOnly));
        }
        if srv.persistence.failed() && srv.persistence.writes_refused(&srv.config) {
            return refuse(Refusal::Gate(CmdError::Misconf));
        }
        if gates & crate::services::gates::GATE_NO_REPLICAS != 0 {
            return refuse(Refusal::Gate(CmdError::NoReplicas));
        }
    }
    // Out of memory when the script started: no command that may grow memory, unless the
    // script already wrote (it cannot stop half-way), as Redis's scriptVerifyOOM.
    if client.oom_at_start
        && cmd.has(flags::DENYOOM)
        && !srv.scripts.run.wrote.load(Ordering::Relaxed)
        && srv.config.hot.maxmemory.load(Ordering::Relaxed) != 0
        && !client.allow_oom
    {
        return refuse(Refusal::Gate(CmdError::Oom));
    }
    if writes {
        srv.scripts.run.wrote.store(true, Ordering::Relaxed);
    }
    let plan = match lock_plan(cmd, argv, client.db, true, srv.ks.num_dbs()) {
        Ok(p) => p,
        Err(e) => {
            error_reply(ws, out, &e);
            return Ok(());
        }
    };
    locks.add(&plan);
    if srv.cluster.enabled && !client.replaying {
        if let Err(m) = script_cluster_check(srv, client, cmd, argv, locks) {
            return refuse(Refusal::Rule(m.into()));
        }
    }
    // A script's command came over no wire; its reply is its own (COMMANDLOG, as Valkey's).
    client.req_bytes = 0;
    client.reply_mark = out.buf.len();
    call(srv, ws, client, out, cmd, argv, locks, None);
    Ok(())
}

/// Cluster mode, a script's own command (Redis's scriptVerifyClusterState): its keys must be
/// served here, and in the slot of the script's declared keys unless the script may cross
/// slots. The shards are already held (`locks`), so presence is looked up in them.
fn script_cluster_check(
    srv: &Server,
    client: &mut Client,
    cmd: &Command,
    argv: &[&[u8]],
    locks: &mut Locks<'_>,
) -> Result<(), &'static str> {
    use crate::services::cluster::{Query, Redirect};
    let mut pos: SmallVec<[usize; 8]> = SmallVec::new();
    if cmd.key_specs.is_empty() || keyspec::key_positions(&cmd.key_specs, argv, &mut pos).is_err() {
        return Ok(());
    }
    let keys: Vec<&[u8]> = pos.iter().filter(|&&p| p < argv.len()).map(|&p| argv[p]).collect();
    let Some(first) = keys.first() else { return Ok(()) };
    let slot = crate::engine::slot::key_slot(first);
    let nonlocal = "Script attempted to access a non local key in a cluster node";
    if keys.iter().any(|k| crate::engine::slot::key_slot(k) != slot) {
        return Err(nonlocal);
    }
    if !srv.cluster.serves(slot) {
        let now = crate::exec::unix_ms();
        let present: Vec<bool> = keys
            .iter()
            .map(|k| {
                let s = locks.shard(0, crate::engine::slot::key_shard(k));
                s.keys.get(k).is_some() && !s.is_expired(k, now)
            })
            .collect();
        let q = Query {
            slot: Some(slot),
            keys: &keys,
            multiple_keys: keys.iter().any(|k| *k != keys[0]),
            write: cmd.has(flags::WRITE),
            asking: client.asking,
            readonly: client.read_only_mode,
            pubsubshard: matches!(cmd.name.as_str(), "spublish" | "ssubscribe" | "sunsubscribe"),
            is_migrate: false,
        };
        let g = srv.cluster.state.lock();
        if let Some(st) = g.as_ref() {
            let mut i = 0;
            match st.route(&q, &mut |_| {
                i += 1;
                present[i - 1]
            }) {
                Ok(()) => {}
                Err(Redirect::DownReadOnly) => {
                    return Err("Script attempted to execute a write command while the cluster is down and readonly")
                }
                Err(Redirect::Down) => return Err("Script attempted to execute a command while the cluster is down"),
                Err(_) => return Err(nonlocal),
            }
        }
    }
    if !client.cross_slot_ok {
        match client.cluster_slot {
            None => client.cluster_slot = Some(slot),
            Some(s) if s != slot => return Err("Script attempted to access keys that do not hash to the same slot"),
            _ => {}
        }
    }
    Ok(())
}

/// Sends a command to the MONITOR clients, with where it came from: the client's address,
/// `unix:<path>` or `lua`.
pub fn feed_monitors(srv: &Server, client: &Client, argv: &[&[u8]]) {
    let h = &client.handle;
    let unix;
    let from: &[u8] = if client.in_script {
        b"lua"
    } else if h.unix {
        unix = format!("unix:{}", srv.config.text(crate::config::p::UNIXSOCKET));
        unix.as_bytes()
    } else {
        h.addr.as_bytes()
    };
    crate::services::pubsub::feed_monitors(&srv.pubsub, &srv.config.hot, client.db, from, argv);
}
