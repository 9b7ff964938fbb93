//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//!
//! EXEC locks every shard its queued commands touch (plus the shards of watched keys) in one
//! ascending pass, then runs the queue: no other command, on any worker, can observe half of
//! it. WATCH registers the client in the per-shard registry; any write, expiry or flush of a
//! watched key flips the client's flag, and EXEC fails when it is set.

use crate::engine::{key_shard, LockPlan, Locks, WatchFlag};
use crate::exec::client::{MultiState, WatchState};
use crate::exec::multi::{discard_state, unwatch_all, unwatch_locked};
use crate::exec::*;
use std::sync::atomic::Ordering;
use std::sync::Arc;

// MULTI
pub fn multi(ctx: &mut Ctx) -> CmdResult {
    if ctx.client.multi.is_some() {
        return Err(CmdError::msg("ERR MULTI calls can not be nested"));
    }
    ctx.client.multi = Some(MultiState::default());
    ctx.client.handle.multi.store(0, Ordering::Relaxed);
    ctx.reply.ok();
    Ok(())
}

// DISCARD
pub fn discard(ctx: &mut Ctx) -> CmdResult {
    if ctx.client.multi.is_none() {
        return Err(CmdError::msg("ERR DISCARD without MULTI"));
    }
    discard_state(ctx.srv, ctx.client);
    unwatch_locked(ctx.ks.locks, ctx.client);
    ctx.reply.ok();
    Ok(())
}

// WATCH key [key ...]
pub fn watch(ctx: &mut Ctx) -> CmdResult {
    if ctx.client.multi.is_some() {
        return Err(CmdError::msg("ERR WATCH inside MULTI is not allowed"));
    }
    let db = ctx.ks.db;
    for &key in &ctx.args[1..] {
        // A key already past its TTL is logically absent: reclaim it now, so that its later
        // deletion is not mistaken for a change (Redis 7 semantics).
        ctx.ks.exists(key);
        let w = ctx
            .client
            .watch
            .get_or_insert_with(|| WatchState { flag: Arc::new(WatchFlag::default()), keys: Vec::new() });
        if w.keys.iter().any(|(d, k)| *d == db && &**k == key) {
            continue;
        }
        ctx.ks.shard(key).watch(key, &w.flag);
        w.keys.push((db, key.into()));
        let h = &ctx.client.handle;
        h.watch_mem.fetch_add(key.len() as u64 + crate::exec::client::STATE_ENTRY, Ordering::Relaxed);
        ctx.client.handle.flags_watch.store(true, Ordering::Relaxed);
    }
    ctx.reply.ok();
    Ok(())
}

// UNWATCH
pub fn unwatch(ctx: &mut Ctx) -> CmdResult {
    unwatch_locked(ctx.ks.locks, ctx.client);
    ctx.reply.ok();
    Ok(())
}

// EXEC
pub fn exec(ctx: &mut Ctx) -> CmdResult {
    let r = exec_queued(ctx);
    // CLIENT LIST shows the client in MULTI (flag `x`, its queue) until EXEC is over, as Redis
    // does: a CLIENT INFO inside the transaction sees it so.
    ctx.client.handle.multi.store(-1, Ordering::Relaxed);
    ctx.client.handle.multi_mem.store(0, Ordering::Relaxed);
    r
}

fn exec_queued(ctx: &mut Ctx) -> CmdResult {
    let Some(m) = ctx.client.multi.take() else {
        return Err(CmdError::msg("ERR EXEC without MULTI"));
    };
    let srv = ctx.srv;
    if m.error {
        unwatch_all(srv, ctx.client);
        return Err(CmdError::msg("EXECABORT Transaction discarded because of previous errors."));
    }
    // One lock plan for the whole transaction, following SELECTs inside it.
    let mut plan = LockPlan::default();
    let mut db = ctx.client.db;
    let mut cmds = Vec::with_capacity(m.queued.len());
    for argv in &m.queued {
        let args: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
        let cmd = match resolve(srv, &args) {
            Ok(c) => c.clone(),
            Err((_, e)) => return Err(e),
        };
        let p = lock_plan(&cmd, &args, db, true, srv.ks.num_dbs())?;
        plan.ids.extend(p.ids);
        if cmd.name == "select" {
            if let Some(d) = crate::protocol::parse_i64(args[1]) {
                if d >= 0 && (d as usize) < srv.ks.num_dbs() {
                    db = d as usize;
                }
            }
        }
        cmds.push(cmd);
    }
    if let Some(w) = &ctx.client.watch {
        for (d, k) in &w.keys {
            plan.key(*d, k);
        }
    }
    // A queued script locks as it goes: the transaction holds the script gate first, as the
    // script would (see `Keyspace::script_gate`), so it may add shards while holding these.
    let _gate = cmds
        .iter()
        // FUNCTION's subcommands are named `function|load` …: the gate orders a queued
        // library change against an AOF rewrite's instant (`scripting::functions::change`).
        .any(|c| c.name.starts_with("eval") || c.name.starts_with("fcall") || c.name.starts_with("function"))
        .then(|| srv.ks.enter_script_gate());
    let mut locks = Locks::acquire(&srv.ks, plan);
    // Watched keys: touched since WATCH, or expired since (they were alive at WATCH time,
    // which reclaimed keys already expired then).
    let now = srv.now_ms();
    let dirty = match &ctx.client.watch {
        None => false,
        Some(w) => {
            w.flag.dirty.load(Ordering::Acquire)
                || w.keys.iter().any(|(d, k)| locks.shard(*d, key_shard(k)).is_expired(k, now))
        }
    };
    unwatch_locked(&mut locks, ctx.client);
    if dirty {
        ctx.reply.null_array();
        return Ok(());
    }
    ctx.reply.array(cmds.len());
    ctx.client.in_exec = true;
    ctx.client.fixed_us = Some(crate::services::clock::unix_us());
    for (cmd, argv) in cmds.iter().zip(&m.queued) {
        let args: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
        // Permissions are checked again: the user's rules may have changed since queueing.
        if let Some(p) = ctx.client.perms.as_ref().filter(|p| !p.unrestricted) {
            if let Err((d, pos)) = p.check(cmd, &args) {
                crate::exec::call::acl_denied(
                    srv,
                    ctx.client,
                    cmd,
                    &args,
                    d,
                    pos,
                    crate::services::acl::Context::Multi,
                );
                let why = match d {
                    crate::services::acl::Denied::Command => "no permission to execute the command or subcommand",
                    crate::services::acl::Denied::Key => "no permission to touch the specified keys",
                    crate::services::acl::Denied::Channel => {
                        "no permission to access one of the channels used as arguments"
                    }
                    crate::services::acl::Denied::Auth => "no permission",
                };
                crate::exec::call::error_reply(ctx.ws, ctx.reply, &CmdError::msg(format!("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {why}")));
                continue;
            }
        }
        call(srv, ctx.ws, ctx.client, ctx.reply, cmd, &args, &mut locks, None);
    }
    ctx.client.in_exec = false;
    ctx.client.fixed_us = None;
    // BCAST clients learn of the keys it modified in one go, as one event-loop round of Redis.
    srv.tracking.broadcast(&srv.reach(), std::mem::take(&mut ctx.client.bcast_batch));
    // The transaction's effects, as one group while its locks are still held: a log or a
    // replica sees all of it or none (wrapped as Redis wraps them when there are several).
    let mut effects = std::mem::take(&mut ctx.client.exec_effects);
    crate::exec::Effect::wrap(&mut effects);
    if !effects.is_empty() {
        srv.publish_effects(&effects, locks.seen_epoch());
    }
    // Clients blocked on keys the transaction made ready are served now that it is complete.
    if !ctx.client.ready.is_empty() {
        let mut ks = KsView {
            locks: &mut locks,
            db: ctx.client.db,
            now: srv.now_ms(),
            lru_clock: ctx.ks.lru_clock,
            lfu: ctx.ks.lfu,
            no_touch: false,
            dirty: 0,
            emit: ctx.ks.emit,
            effects: Vec::new(),
            stats: ctx.ks.stats,
            ready: std::mem::take(&mut ctx.client.ready),
            key_hint: None,
            hold_expired: false,
            replica_ttls: false,
            loading: false,
            notify: ctx.ks.notify,
            notes: Vec::new(),
            track: ctx.ks.track,
            touched: Vec::new(),
        };
        blocking::serve_ready(&mut ks, srv);
        crate::services::notify::publish(&srv.reach(), &ks.notes, ctx.client.id());
        if !ks.touched.is_empty() {
            srv.tracking.modified(&srv.reach(), &ks.touched, ctx.client.id(), Some(&mut ctx.client.bcast_batch));
        }
        if !ks.effects.is_empty() {
            srv.publish_effects(&ks.effects, ks.locks.seen_epoch());
        }
        ctx.ws.counters.dirty.fetch_add(ks.dirty, Ordering::Relaxed);
    }
    Ok(())
}
