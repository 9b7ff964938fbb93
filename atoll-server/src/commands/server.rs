//! Server commands: INFO, TIME, DBSIZE, FLUSHDB, FLUSHALL, SWAPDB, CONFIG, COMMAND, DEBUG,
//! SHUTDOWN, LASTSAVE, and SCRIPT/FUNCTION FLUSH (nothing to flush until scripting lands).

use super::info;
use crate::engine::{LockPlan, Shard, SHARDS};
use crate::exec::help_reply;
use crate::exec::table::{Command, CommandTable};
use crate::exec::ShutdownMode;
use crate::exec::*;
use crate::protocol::Reply;
use serde_json::Value as Json;
use std::sync::atomic::Ordering;
use std::sync::Arc;

// INFO [section [section ...]]
pub fn info(ctx: &mut Ctx) -> CmdResult {
    let sections = info::select_sections(&ctx.args[1..]);
    // Sections about what clients did (not the server's settings) see what they already sent.
    const LIVE: &[&str] =
        &["clients", "stats", "keyspace", "commandstats", "errorstats", "latencystats", "replication"];
    if sections.iter().any(|s| LIVE.contains(s)) {
        ctx.settle_peers();
    }
    let text = info::generate(ctx.srv, &sections, ctx.ks.locks);
    ctx.reply.verbatim("txt", text.as_bytes());
    Ok(())
}

// TIME
pub fn time(ctx: &mut Ctx) -> CmdResult {
    let us = ctx.client.fixed_us.unwrap_or_else(crate::services::clock::unix_us);
    ctx.reply.array(2);
    ctx.reply.bulk_i64(us.div_euclid(1_000_000));
    ctx.reply.bulk_i64(us.rem_euclid(1_000_000));
    Ok(())
}

// LASTSAVE
pub fn lastsave(ctx: &mut Ctx) -> CmdResult {
    ctx.reply.int(ctx.srv.lastsave.load(Ordering::Relaxed));
    Ok(())
}

// DBSIZE
pub fn dbsize(ctx: &mut Ctx) -> CmdResult {
    let db = ctx.ks.db;
    let mut n = 0;
    if ctx.srv.ks.db_if_exists(db).is_some() {
        for s in 0..SHARDS {
            n += ctx.ks.locks.with_shard(db, s, |sh| sh.keys.len());
        }
    }
    // Slots being imported are not counted until they are this node's (Valkey's ASM).
    let m = &ctx.srv.cluster.migrations;
    if m.importing() && db == 0 {
        for slot in (0..crate::engine::slot::SLOTS).filter(|&s| m.hidden(s)) {
            n -= ctx.ks.locks.with_shard(0, slot % SHARDS, |sh| sh.keys.count_in_slot(slot));
        }
    }
    ctx.reply.int(n as i64);
    Ok(())
}

/// Parses the optional ASYNC|SYNC of FLUSHDB/FLUSHALL. Both free synchronously today; the
/// memory is released while the shard locks are held either way.
/// FLUSHALL/FLUSHDB's mode: true to free in the background (ASYNC, or neither word with
/// `lazyfree-lazy-user-flush yes`).
fn flush_async(ctx: &Ctx) -> Result<bool, CmdError> {
    match ctx.args.len() {
        1 => Ok(ctx.srv.config.flag(crate::config::p::LAZYFREE_LAZY_USER_FLUSH)),
        2 if eq_ic(ctx.args[1], "ASYNC") => Ok(true),
        2 if eq_ic(ctx.args[1], "SYNC") => Ok(false),
        _ => Err(CmdError::Syntax),
    }
}

/// Empties one database whose shards are all locked; returns the number of keys removed.
/// `lazy`: the old tables go to the lazyfree thread instead of being freed here.
fn empty_db(ctx: &mut Ctx, db: usize, lazy: bool) -> usize {
    let mut removed = 0;
    let mut ready = Vec::new();
    for s in 0..SHARDS {
        let sh = ctx.ks.locks.shard(db, s);
        if sh.keys.is_empty() {
            continue;
        }
        let keys = &sh.keys;
        sh.touch_watched_where(|k| keys.contains_key(k));
        blocked_keys(db, sh, &mut ready);
        let n = sh.keys.len();
        removed += n;
        if lazy {
            let tables = (std::mem::take(&mut sh.keys), std::mem::take(&mut sh.expires));
            ctx.srv.lazyfree.free_table(tables, n as u64);
        } else {
            sh.keys.clear();
            sh.expires.clear();
        }
        sh.field_ttls = None;
    }
    ctx.ks.ready.append(&mut ready);
    removed
}

/// Every key of `sh` that clients are blocked on, as (db, key) to signal. A flush or a swap
/// can take a stream away from under a blocked XREADGROUP, which 7.2 answers with the
/// command's error at once (Redis's scanDatabaseForDeletedKeys); a list or zset waiter whose
/// key is still empty just keeps waiting.
fn blocked_keys(db: usize, sh: &Shard, out: &mut Vec<(usize, Vec<u8>)>) {
    if let Some(blocked) = &sh.blocked {
        out.extend(blocked.keys().map(|k| (db, k.to_vec())));
    }
}

// FLUSHDB [ASYNC | SYNC]
pub fn flushdb(ctx: &mut Ctx) -> CmdResult {
    let lazy = flush_async(ctx)?;
    let db = ctx.ks.db;
    let n = empty_db(ctx, db, lazy);
    ctx.ks.dirty += n.max(1) as u64;
    ctx.srv.tracking.flushed(&ctx.srv.reach());
    slot_migrations_flushed(ctx);
    ctx.reply.ok();
    Ok(())
}

/// A flush fails the atomic slot migrations under way (cluster mode), as Valkey's does; the
/// import links close.
fn slot_migrations_flushed(ctx: &Ctx) {
    if ctx.srv.cluster.enabled {
        let links = ctx.srv.cluster.migrations.flushed();
        for job in ctx.srv.cluster.migrations.all().iter().filter(|j| !j.export) {
            ctx.srv.slot_import_ended(job);
        }
        for id in links {
            if let Some(h) = ctx.srv.clients.get(id).filter(|_| id != ctx.client.id()) {
                h.kill();
            }
        }
    }
}

// FLUSHALL [ASYNC | SYNC]
pub fn flushall(ctx: &mut Ctx) -> CmdResult {
    let lazy = flush_async(ctx)?;
    let mut n = 0;
    for db in 0..ctx.srv.ks.num_dbs() {
        if ctx.ks.locks.holds(db, 0) {
            n += empty_db(ctx, db, lazy);
        }
    }
    ctx.ks.dirty += n.max(1) as u64;
    // A writable replica forgets the keys it was to expire: the master may send keys of
    // those names, and expiring them is the master's business (Redis does the same).
    ctx.srv.ks.replica_ttls.lock().clear();
    // The save it may make holds this command's changes (Redis counts them before it saves).
    crate::daemons::persistence::after_flushall(ctx.srv, ctx.ks.locks, ctx.ks.dirty);
    ctx.srv.tracking.flushed(&ctx.srv.reach());
    slot_migrations_flushed(ctx);
    ctx.reply.ok();
    Ok(())
}

fn parse_db_index(a: &[u8], which: &str, ndbs: usize) -> Result<usize, CmdError> {
    let v = crate::protocol::parse_i64(a).ok_or_else(|| CmdError::msg(format!("ERR invalid {which} DB index")))?;
    if v < 0 || v as usize >= ndbs {
        return Err(CmdError::msg("ERR DB index is out of range"));
    }
    Ok(v as usize)
}

/// SWAPDB locks both databases whole. (The database count is checked by the command.)
pub fn plan_swapdb(args: &[&[u8]], _db: usize, plan: &mut LockPlan) -> CmdResult {
    // Out-of-range indexes are reported by the command; the lock layer ignores them.
    let a = parse_db_index(args[1], "first", usize::MAX)?;
    let b = parse_db_index(args[2], "second", usize::MAX)?;
    plan.whole_db(a.min(u16::MAX as usize));
    plan.whole_db(b.min(u16::MAX as usize));
    Ok(())
}

// SWAPDB index1 index2
pub fn swapdb(ctx: &mut Ctx) -> CmdResult {
    if ctx.srv.cluster.enabled {
        return Err(CmdError::msg("ERR SWAPDB is not allowed in cluster mode"));
    }
    let n = ctx.srv.ks.num_dbs();
    let a = parse_db_index(ctx.args[1], "first", n)?;
    let b = parse_db_index(ctx.args[2], "second", n)?;
    if a != b {
        let mut ready = Vec::new();
        let now = ctx.ks.now;
        // SWAPDB goes to the log first: the deletions below happen after it.
        let argv = ctx.argv_owned();
        ctx.rewrite_effect(argv);
        let reclaim = !ctx.ks.hold_expired && !ctx.ks.loading;
        for s in 0..SHARDS {
            let (x, y) = ctx.ks.locks.pair(a, s, b, s);
            // Watchers belong to a database index, not to its data. A watched key changes if
            // the index held it (WATCH reclaimed it had it already expired, so it held it
            // live when watched) or now gets it live; a key past its time arriving is
            // logically no key, so no change (Redis's touchAllWatchedKeysInDb).
            x.touch_watched_where(|k| x.keys.contains_key(k) || (y.keys.contains_key(k) && !y.is_expired(k, now)));
            y.touch_watched_where(|k| y.keys.contains_key(k) || (x.keys.contains_key(k) && !x.is_expired(k, now)));
            std::mem::swap(&mut x.keys, &mut y.keys);
            std::mem::swap(&mut x.expires, &mut y.expires);
            std::mem::swap(&mut x.field_ttls, &mut y.field_ttls);
            // A watched key that arrived past its time is reclaimed now, as WATCH reclaims
            // one, so that neither EXEC nor its later deletion takes it for a change (Redis
            // flags such a watch `expired` instead).
            for (db, sh) in [(a, &mut *x), (b, &mut *y)] {
                if !reclaim {
                    break;
                }
                let stale: Vec<Box<[u8]>> = match &sh.watched {
                    Some(w) => w.keys().filter(|k| sh.is_expired(k, now)).cloned().collect(),
                    None => continue,
                };
                for k in stale {
                    sh.remove(&k);
                    ctx.ks.stats.expired_keys.fetch_add(1, Ordering::Relaxed);
                    if ctx.ks.emit {
                        ctx.ks.effects.push(Effect::new(db, vec![b"DEL".to_vec(), k.to_vec()]));
                    }
                }
            }
            for (db, sh) in [(a, &*x), (b, &*y)] {
                if !sh.expires.is_empty() || sh.field_ttls.is_some() {
                    ctx.srv.ks.db(db).mark_volatile(s);
                }
            }
            // Clients blocked in either database may now find a list, zset or stream under
            // their key, or find their stream gone (Redis's scanDatabaseForReadyKeys and
            // scanDatabaseForDeletedKeys).
            blocked_keys(a, x, &mut ready);
            blocked_keys(b, y, &mut ready);
        }
        ctx.ks.ready.append(&mut ready);
    }
    ctx.ks.dirty += 1;
    ctx.reply.ok();
    Ok(())
}

// CONFIG HELP
pub fn config_help(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() == 1 {
        return Err(CmdError::Arity("config".into()));
    }
    help_reply(
        ctx,
        "CONFIG",
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
        ],
    );
    Ok(())
}

// CONFIG GET parameter [parameter ...]
pub fn config_get(ctx: &mut Ctx) -> CmdResult {
    let pairs = ctx.srv.config.matching(&ctx.args[2..]);
    ctx.reply.map(pairs.len());
    for (k, v) in pairs {
        ctx.reply.bulk(k.as_bytes());
        ctx.reply.bulk(v.as_bytes());
    }
    Ok(())
}

// CONFIG SET parameter value [parameter value ...]
pub fn config_set(ctx: &mut Ctx) -> CmdResult {
    let args = &ctx.args[2..];
    if !args.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let pairs: Vec<(&[u8], &[u8])> = args.chunks(2).map(|p| (p[0], p[1])).collect();
    // While a dataset loads (an async load included), parameters that would change what it
    // loads into are refused with LOADING, before any other error (Redis's
    // DENY_LOADING_CONFIG).
    let loading = ctx.srv.persistence.loading() || ctx.srv.repl.upstream.async_loading.load(Ordering::Relaxed);
    if loading
        && pairs.iter().any(|(k, _)| {
            crate::config::find_def(&String::from_utf8_lossy(k).to_ascii_lowercase())
                .is_some_and(|(_, d)| d.flags & crate::config::table::DENY_LOADING != 0)
        })
    {
        return Err(CmdError::Loading);
    }
    let names = |n: &str| pairs.iter().any(|(k, _)| k.eq_ignore_ascii_case(n.as_bytes()));
    let aof_switch = names("appendonly");
    let was_on = ctx.srv.config.flag(crate::config::p::APPENDONLY);
    // Any tls-* parameter rebuilds the TLS configuration, even when set to the value it has:
    // that is how certificates are reloaded (Redis's VOLATILE_CONFIG files).
    let tls_names: Vec<String> = pairs
        .iter()
        .map(|(k, _)| String::from_utf8_lossy(k).to_ascii_lowercase())
        .filter(|k| k.starts_with("tls-"))
        .collect();
    let tls_before: Vec<(String, String)> =
        tls_names.iter().map(|k| (k.clone(), ctx.srv.config.lookup(k).unwrap_or_default())).collect();
    ctx.srv.config.set_many(&pairs, ctx.client.handle.is_local()).map_err(|e| CmdError::msg(e.to_string()))?;
    if !tls_names.is_empty() && crate::services::tls::wanted(&ctx.srv.config) {
        if let Err(e) = ctx.srv.tls.reconfigure(&ctx.srv.config) {
            crate::log_warning!("{e}");
            let back: Vec<(&[u8], &[u8])> = tls_before.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())).collect();
            let _ = ctx.srv.config.set_many(&back, true);
            return Err(CmdError::msg(format!(
                "ERR CONFIG SET failed (possibly related to argument '{}') - Unable to update TLS configuration. Check server logs.",
                tls_names[0]
            )));
        }
    }
    crate::log::set_level(ctx.srv.config.hot.loglevel.load(Ordering::Relaxed));
    // As Redis's apply functions: the node announces its new address at once (CLUSTER
    // NODES right after the CONFIG SET shows it), and the bus uses the new timings.
    if ctx.srv.cluster.enabled
        && pairs.iter().any(|(k, _)| {
            let k = String::from_utf8_lossy(k).to_ascii_lowercase();
            k.starts_with("cluster-") || matches!(k.as_str(), "port" | "tls-port" | "tls-cluster" | "tls-replication")
        })
    {
        crate::daemons::cluster_bus::apply_settings(ctx.srv);
    }
    if names("maxmemory") {
        let limit = ctx.srv.config.hot.maxmemory.load(Ordering::Relaxed);
        let used = crate::services::evict::used_for_limit(ctx.srv);
        if limit != 0 && used > limit {
            crate::log_warning!("WARNING: the new maxmemory value set via CONFIG SET ({limit}) is smaller than the current memory usage ({used}). This will result in key eviction and/or the inability to accept new write commands depending on the maxmemory-policy.");
            crate::services::evict::perform(ctx.srv);
        }
    }
    if names("requirepass") {
        let srv = ctx.srv;
        srv.acl.set_default_password(&srv.acl_env(), srv.config.text(crate::config::p::REQUIREPASS).as_bytes());
    }
    let any = |ns: &[&str]| ns.iter().any(|n| names(n));
    if any(&["min-replicas-to-write", "min-slaves-to-write", "min-replicas-max-lag", "min-slaves-max-lag"]) {
        crate::daemons::replication::refresh_good(ctx.srv);
    }
    if names("aof-disable-auto-gc") && !ctx.srv.config.flag(crate::config::p::AOF_DISABLE_AUTO_GC) {
        if let Err(e) = crate::daemons::aof::delete_history(ctx.srv) {
            crate::log_warning!("Can't remove the AOF's history files: {e}");
        }
    }
    if names("key-load-delay") {
        ctx.srv
            .persistence
            .loading
            .key_delay_us
            .store(ctx.srv.config.text(crate::config::p::KEY_LOAD_DELAY).parse().unwrap_or(0), Ordering::Relaxed);
    }
    if names("rdb-key-save-delay") {
        crate::persist::rdbfile::set_save_delay(
            ctx.srv.config.text(crate::config::p::RDB_KEY_SAVE_DELAY).parse().unwrap_or(0),
        );
    }
    if any(&["replica-serve-stale-data", "slave-serve-stale-data"]) {
        crate::daemons::replica_link::stale_changed(ctx.srv);
    }
    if any(&["replica-read-only", "slave-read-only"]) {
        crate::daemons::replica_link::read_only_changed(ctx.srv);
    }
    if names("repl-backlog-size") {
        ctx.srv.repl.resize_backlog(crate::daemons::replication::backlog_size(ctx.srv));
    }
    if names("appendfsync") || names("aof-timestamp-enabled") || names("aof-preallocate") {
        crate::daemons::aof::set_policy(ctx.srv);
    }
    let on = ctx.srv.config.flag(crate::config::p::APPENDONLY);
    if aof_switch && on != was_on {
        if let Err(e) = crate::daemons::aof::set_enabled(ctx.srv, on, ctx.client.in_exec) {
            let what = if on { "turn on" } else { "turn off" };
            crate::log_warning!("Unable to {what} AOF: {e}");
            let back: &[u8] = if was_on { b"yes" } else { b"no" };
            let _ = ctx.srv.config.set_many(&[(b"appendonly", back)], true);
            return Err(CmdError::msg(format!(
                "ERR CONFIG SET failed (possibly related to argument 'appendonly') - Unable to {what} AOF. Check server logs."
            )));
        }
    }
    ctx.reply.ok();
    Ok(())
}

// CONFIG RESETSTAT
pub fn config_resetstat(ctx: &mut Ctx) -> CmdResult {
    ctx.srv.stats.reset();
    for c in [&ctx.srv.repl.sync_full, &ctx.srv.repl.sync_partial_ok, &ctx.srv.repl.sync_partial_err] {
        c.store(0, Ordering::Relaxed);
    }
    ctx.srv.lazyfree.reset_stats();
    ctx.srv.evict.reset_stats();
    ctx.reply.ok();
    Ok(())
}

// CONFIG REWRITE
pub fn config_rewrite(ctx: &mut Ctx) -> CmdResult {
    if ctx.srv.config.config_file.is_none() {
        return Err(CmdError::msg("ERR The server is running without a config file"));
    }
    rewrite_config(ctx.srv, false).map_err(|e| CmdError::msg(format!("ERR Rewriting config file: {e}")))?;
    crate::log_notice!("CONFIG REWRITE executed with success.");
    ctx.reply.ok();
    Ok(())
}

/// Rewrites the config file (`force_all`: every parameter, defaults included).
pub fn rewrite_config(srv: &crate::exec::Server, force_all: bool) -> std::io::Result<()> {
    let Some(path) = srv.config.config_file.clone() else {
        return Err(std::io::Error::other("The server is running without a config file"));
    };
    // Users go to the config file unless an ACL file keeps them (Redis's rewriteConfigUserOption).
    let users: Vec<String> = if srv.config.text(crate::config::p::ACLFILE).is_empty() {
        srv.acl.lines().iter().map(|l| String::from_utf8_lossy(l).into_owned()).collect()
    } else {
        Vec::new()
    };
    srv.config.rewrite(&path, &users, force_all)
}

/// The command's ACL categories (those Redis derives from its flags included), in the order
/// of Redis's category table.
fn acl_categories(c: &Command) -> Vec<String> {
    crate::services::acl::CATEGORIES
        .iter()
        .enumerate()
        .filter(|(i, _)| c.acl_cats & (1 << i) != 0)
        .map(|(_, n)| format!("@{n}"))
        .collect()
}

fn reply_key_spec(r: &mut Reply, j: &Json) {
    r.map(3);
    r.bulk(b"flags");
    // In Redis's order of key-spec flags, whatever the order of the facts.
    const ORDER: &[&str] =
        &["RO", "RW", "OW", "RM", "ACCESS", "UPDATE", "INSERT", "DELETE", "NOT_KEY", "INCOMPLETE", "VARIABLE_FLAGS"];
    let mut flags: Vec<&str> =
        j["flags"].as_array().map(|a| a.iter().filter_map(|f| f.as_str()).collect()).unwrap_or_default();
    flags.sort_by_key(|f| ORDER.iter().position(|o| o.eq_ignore_ascii_case(f)).unwrap_or(ORDER.len()));
    flags.dedup();
    r.set(flags.len());
    for f in flags {
        // RO/RW/OW/RM keep their case; the others are printed in lower case.
        if matches!(f, "RO" | "RW" | "OW" | "RM") {
            r.simple(f);
        } else {
            r.simple(&f.to_lowercase());
        }
    }
    r.bulk(b"begin_search");
    r.map(2);
    r.bulk(b"type");
    let bs = &j["begin_search"];
    if let Some(i) = bs.get("index") {
        r.bulk(b"index");
        r.bulk(b"spec");
        r.map(1);
        r.bulk(b"index");
        r.int(i["pos"].as_i64().unwrap_or(0));
    } else if let Some(k) = bs.get("keyword") {
        r.bulk(b"keyword");
        r.bulk(b"spec");
        r.map(2);
        r.bulk(b"keyword");
        r.bulk(k["keyword"].as_str().unwrap_or("").as_bytes());
        r.bulk(b"startfrom");
        r.int(k["startfrom"].as_i64().unwrap_or(0));
    } else {
        r.bulk(b"unknown");
        r.bulk(b"spec");
        r.map(0);
    }
    r.bulk(b"find_keys");
    r.map(2);
    r.bulk(b"type");
    let fk = &j["find_keys"];
    if let Some(g) = fk.get("range") {
        r.bulk(b"range");
        r.bulk(b"spec");
        r.map(3);
        r.bulk(b"lastkey");
        r.int(g["lastkey"].as_i64().unwrap_or(0));
        r.bulk(b"keystep");
        r.int(g["step"].as_i64().unwrap_or(1));
        r.bulk(b"limit");
        r.int(g["limit"].as_i64().unwrap_or(0));
    } else if let Some(k) = fk.get("keynum") {
        r.bulk(b"keynum");
        r.bulk(b"spec");
        r.map(3);
        r.bulk(b"keynumidx");
        r.int(k["keynumidx"].as_i64().unwrap_or(0));
        r.bulk(b"firstkey");
        r.int(k["firstkey"].as_i64().unwrap_or(1));
        r.bulk(b"keystep");
        r.int(k["step"].as_i64().unwrap_or(1));
    } else {
        r.bulk(b"unknown");
        r.bulk(b"spec");
        r.map(0);
    }
}

/// One COMMAND INFO entry (10 fields, as Redis 7).
fn reply_command_info(r: &mut Reply, c: &Command) {
    r.array(10);
    r.bulk(c.name.as_bytes());
    r.int(c.arity);
    r.set(c.flag_names.len());
    for f in &c.flag_names {
        r.simple(f);
    }
    r.int(c.legacy_range.0);
    r.int(c.legacy_range.1);
    r.int(c.legacy_range.2);
    let cats = acl_categories(c);
    r.set(cats.len());
    for cat in cats {
        r.simple(&cat);
    }
    r.set(c.tips.len());
    for t in &c.tips {
        r.bulk(t.as_bytes());
    }
    let specs = c.spec["key_specs"].as_array().cloned().unwrap_or_default();
    r.set(specs.len());
    for s in &specs {
        reply_key_spec(r, s);
    }
    r.set(c.subcommands.len());
    for s in &c.subcommands {
        reply_command_info(r, s);
    }
}

// COMMAND
pub fn command(ctx: &mut Ctx) -> CmdResult {
    let cmds: Vec<&Arc<Command>> = ctx.srv.table.top_level().collect();
    ctx.reply.array(cmds.len());
    for c in cmds {
        reply_command_info(ctx.reply, c);
    }
    Ok(())
}

// COMMAND COUNT
pub fn command_count(ctx: &mut Ctx) -> CmdResult {
    ctx.reply.int(ctx.srv.table.len() as i64);
    Ok(())
}

/// Finds `name` or `container|sub` (COMMAND INFO/DOCS accept both).
fn find_command<'t>(t: &'t CommandTable, name: &[u8]) -> Option<&'t Arc<Command>> {
    match name.iter().position(|&b| b == b'|') {
        None => t.lookup(name),
        Some(p) => t.lookup(&name[..p])?.subcommand(&name[p + 1..]),
    }
}

// COMMAND INFO [command-name ...]
pub fn command_info(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() == 2 {
        return command(ctx);
    }
    ctx.reply.array(ctx.args.len() - 2);
    for &name in &ctx.args[2..] {
        match find_command(&ctx.srv.table, name) {
            Some(c) => reply_command_info(ctx.reply, c),
            None => ctx.reply.null(),
        }
    }
    Ok(())
}

fn reply_doc_args(r: &mut Reply, args: &[Json]) {
    r.array(args.len());
    for a in args {
        let mut fields: Vec<(&str, Json)> = Vec::new();
        let ty = a.get("type").and_then(|t| t.as_str()).unwrap_or("");
        for k in ["name", "type", "display_text", "key_spec_index", "token", "since", "deprecated_since"] {
            let key = if k == "display_text" { "display" } else { k };
            match a.get(key).or_else(|| a.get(k)) {
                // As Redis's generated table has them: names in lower case, tokens in upper
                // case (`""` stands for the empty string).
                Some(Json::String(v)) if k == "name" => fields.push((k, Json::String(v.to_lowercase()))),
                Some(Json::String(v)) if k == "token" => {
                    let t = if v == "\"\"" { String::new() } else { v.to_uppercase() };
                    fields.push((k, Json::String(t)))
                }
                Some(v) => fields.push((k, v.clone())),
                // Redis shows every argument but a block or a oneof with a display text, its
                // name unless the facts give another.
                None if k == "display_text" && !matches!(ty, "block" | "oneof") => {
                    if let Some(name) = a.get("name").and_then(|n| n.as_str()) {
                        fields.push((k, Json::String(name.to_lowercase())));
                    }
                }
                None => {}
            }
        }
        // Redis 7.2's facts mark flags as booleans, those read from a server's COMMAND DOCS
        // as a list.
        let listed = a.get("flags").and_then(|f| f.as_array());
        let mut flags = Vec::new();
        for f in ["optional", "multiple", "multiple_token"] {
            if a.get(f).and_then(|v| v.as_bool()) == Some(true) || listed.is_some_and(|l| l.iter().any(|x| x == f)) {
                flags.push(f);
            }
        }
        let sub = a.get("arguments").and_then(|v| v.as_array());
        r.map(fields.len() + usize::from(!flags.is_empty()) + usize::from(sub.is_some()));
        for (k, v) in fields {
            r.bulk(k.as_bytes());
            match v {
                Json::Number(n) => r.int(n.as_i64().unwrap_or(0)),
                Json::String(s) => r.bulk(s.as_bytes()),
                other => r.bulk(other.to_string().as_bytes()),
            }
        }
        if !flags.is_empty() {
            r.bulk(b"flags");
            r.set(flags.len());
            for f in flags {
                r.simple(f);
            }
        }
        if let Some(sub) = sub {
            r.bulk(b"arguments");
            reply_doc_args(r, sub);
        }
    }
}

fn reply_command_docs(r: &mut Reply, c: &Command) {
    let s = &c.spec;
    let mut n = 3; // summary, since, group
    let complexity = s.get("complexity").and_then(|v| v.as_str());
    n += usize::from(complexity.is_some());
    let args = s.get("arguments").and_then(|a| a.as_array());
    n += usize::from(args.is_some());
    let doc_flags = s.get("doc_flags").and_then(|a| a.as_array());
    n += usize::from(doc_flags.is_some());
    n += usize::from(s.get("deprecated_since").is_some());
    n += usize::from(s.get("replaced_by").is_some());
    n += usize::from(!c.subcommands.is_empty());
    r.map(n);
    r.bulk(b"summary");
    // Summaries and complexities are our own words (tools/prose.json, through
    // tools/gen_specs.py); every command has them.
    r.bulk(s.get("summary").and_then(|v| v.as_str()).unwrap_or_default().as_bytes());
    r.bulk(b"since");
    r.bulk(s["since"].as_str().unwrap_or("1.0.0").as_bytes());
    r.bulk(b"group");
    // Redis names the group of sorted sets `sorted-set` (the facts: `sorted_set`).
    r.bulk(s["group"].as_str().unwrap_or("generic").replace('_', "-").as_bytes());
    if let Some(text) = complexity {
        r.bulk(b"complexity");
        r.bulk(text.as_bytes());
    }
    if let Some(flags) = doc_flags {
        r.bulk(b"doc_flags");
        r.set(flags.len());
        for f in flags {
            r.simple(&f.as_str().unwrap_or("").to_lowercase());
        }
    }
    for k in ["deprecated_since", "replaced_by"] {
        if let Some(v) = s.get(k).and_then(|v| v.as_str()) {
            r.bulk(k.as_bytes());
            r.bulk(v.as_bytes());
        }
    }
    if let Some(a) = args {
        r.bulk(b"arguments");
        reply_doc_args(r, a);
    }
    if !c.subcommands.is_empty() {
        r.bulk(b"subcommands");
        r.map(c.subcommands.len());
        for sc in &c.subcommands {
            r.bulk(sc.name.as_bytes());
            reply_command_docs(r, sc);
        }
    }
}

// COMMAND DOCS [command-name ...]
pub fn command_docs(ctx: &mut Ctx) -> CmdResult {
    let cmds: Vec<Arc<Command>> = if ctx.args.len() == 2 {
        ctx.srv.table.top_level().cloned().collect()
    } else {
        ctx.args[2..].iter().filter_map(|n| find_command(&ctx.srv.table, n).cloned()).collect()
    };
    ctx.reply.map(cmds.len());
    for c in cmds {
        ctx.reply.bulk(c.name.as_bytes());
        reply_command_docs(ctx.reply, &c);
    }
    Ok(())
}

// COMMAND LIST [FILTERBY <MODULE module-name | ACLCAT category | PATTERN pattern>]
pub fn command_list(ctx: &mut Ctx) -> CmdResult {
    let args = ctx.args;
    let filter: Option<(&[u8], &[u8])> = match args.len() {
        2 => None,
        5 if eq_ic(args[2], "FILTERBY") => Some((args[3], args[4])),
        _ => return Err(CmdError::Syntax),
    };
    let mut names = Vec::new();
    for c in ctx.srv.table.top_level() {
        for cmd in std::iter::once(c).chain(c.subcommands.iter()) {
            let keep = match filter {
                None => true,
                Some((kind, v)) if eq_ic(kind, "MODULE") => {
                    let _ = v;
                    false
                }
                Some((kind, v)) if eq_ic(kind, "ACLCAT") => {
                    let want = format!("@{}", String::from_utf8_lossy(v).to_lowercase());
                    acl_categories(cmd).contains(&want)
                }
                Some((kind, v)) if eq_ic(kind, "PATTERN") => {
                    crate::engine::glob::glob_match(v, cmd.name.as_bytes(), true)
                }
                Some(_) => return Err(CmdError::Syntax),
            };
            if keep {
                names.push(cmd.name.clone());
            }
        }
    }
    ctx.reply.array(names.len());
    for n in names {
        ctx.reply.bulk(n.as_bytes());
    }
    Ok(())
}

/// The keys of the command in `args[2..]`, for GETKEYS / GETKEYSANDFLAGS.
/// A key and its key-spec flags.
type KeyWithFlags = (Vec<u8>, Vec<String>);

fn getkeys_of(ctx: &Ctx) -> Result<Vec<KeyWithFlags>, CmdError> {
    let argv = &ctx.args[2..];
    let Some(cmd) = find_command(&ctx.srv.table, argv[0]) else {
        return Err(CmdError::msg("ERR Invalid command specified"));
    };
    let cmd = if cmd.is_container && argv.len() > 1 {
        cmd.subcommand(argv[1]).ok_or_else(|| CmdError::msg("ERR Invalid command specified"))?
    } else {
        cmd
    };
    // Redis's doesCommandHaveKeys: some key spec that names a key.
    let names_keys = cmd.spec["key_specs"]
        .as_array()
        .is_some_and(|a| a.iter().any(|ks| !ks["flags"].as_array().is_some_and(|f| f.iter().any(|x| x == "NOT_KEY"))));
    if !names_keys {
        return Err(CmdError::msg("ERR The command has no key arguments"));
    }
    if !cmd.arity_ok(argv.len()) {
        return Err(CmdError::msg("ERR Invalid number of arguments specified for command"));
    }
    // A command that may name no key (EVAL with numkeys 0) has none; any other must.
    let none = || {
        if cmd.flags & crate::exec::table::flags::NO_MANDATORY_KEYS != 0 {
            Ok(Vec::new())
        } else {
            Err(CmdError::msg("ERR Invalid arguments specified for command"))
        }
    };
    // Key specs flagged VARIABLE_FLAGS: the flags depend on the arguments, as Redis's
    // setGetKeys and bitfieldGetKeys decide them.
    let fixed = |f: &[&str]| f.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    if cmd.name == "set" {
        let flags = if crate::cmdspec::keyspec::set_reads_its_key(argv) {
            fixed(&["RW", "ACCESS", "UPDATE"])
        } else {
            fixed(&["OW", "UPDATE"])
        };
        return Ok(vec![(argv[1].to_vec(), flags)]);
    }
    if cmd.name == "bitfield" {
        let flags = if crate::cmdspec::keyspec::bitfield_is_readonly(argv) {
            fixed(&["RO", "ACCESS"])
        } else {
            fixed(&["RW", "ACCESS", "UPDATE"])
        };
        return Ok(vec![(argv[1].to_vec(), flags)]);
    }
    let mut out = Vec::new();
    // SORT's STORE key has no key spec Redis can search (its specs say "unknown"): Redis finds
    // it with its own scan, skipping LIMIT's two arguments and BY's and GET's one; the last
    // STORE wins.
    if cmd.name == "sort" {
        let flags = |i: usize| -> Vec<String> {
            cmd.spec["key_specs"][i]["flags"]
                .as_array()
                .map(|a| a.iter().filter_map(|f| f.as_str().map(String::from)).collect())
                .unwrap_or_default()
        };
        out.push((argv[1].to_vec(), flags(0)));
        let (mut i, mut store) = (2, None);
        while i < argv.len() {
            if eq_ic(argv[i], "limit") {
                i += 2;
            } else if eq_ic(argv[i], "get") || eq_ic(argv[i], "by") {
                i += 1;
            } else if eq_ic(argv[i], "store") && i + 1 < argv.len() {
                store = Some(i + 1);
            }
            i += 1;
        }
        if let Some(k) = store {
            out.push((argv[k].to_vec(), flags(2)));
        }
        return Ok(out);
    }
    for (i, spec) in cmd.key_specs.iter().enumerate() {
        let mut pos = Vec::new();
        // A key count of 0 is a spec Redis calls invalid here (its last key before its
        // first): then the command's own key finder answers, which finds no key either.
        let keynum = cmd.spec["key_specs"][i]["find_keys"].get("keynum").is_some();
        if crate::cmdspec::keyspec::key_positions(std::slice::from_ref(spec), argv, &mut pos).is_err()
            || (keynum && pos.is_empty())
        {
            return none();
        }
        let flags: Vec<String> = cmd.spec["key_specs"][i]["flags"]
            .as_array()
            .map(|a| a.iter().filter_map(|f| f.as_str().map(String::from)).collect())
            .unwrap_or_default();
        for p in pos {
            out.push((argv[p].to_vec(), flags.clone()));
        }
    }
    if out.is_empty() {
        return none();
    }
    Ok(out)
}

// COMMAND GETKEYS command [arg ...]
pub fn command_getkeys(ctx: &mut Ctx) -> CmdResult {
    let keys = getkeys_of(ctx)?;
    ctx.reply.array(keys.len());
    for (k, _) in keys {
        ctx.reply.bulk(&k);
    }
    Ok(())
}

// COMMAND GETKEYSANDFLAGS command [arg ...]
pub fn command_getkeysandflags(ctx: &mut Ctx) -> CmdResult {
    let keys = getkeys_of(ctx)?;
    ctx.reply.array(keys.len());
    for (k, flags) in keys {
        ctx.reply.array(2);
        ctx.reply.bulk(&k);
        // In the order Redis prints them (its flag table's), whatever the spec's order.
        const ORDER: [&str; 11] =
            ["RO", "RW", "OW", "RM", "ACCESS", "UPDATE", "INSERT", "DELETE", "NOT_KEY", "INCOMPLETE", "VARIABLE_FLAGS"];
        let mut flags = flags;
        flags.sort_by_key(|f| ORDER.iter().position(|o| o == f).unwrap_or(ORDER.len()));
        ctx.reply.set(flags.len());
        for f in flags {
            if matches!(f.as_str(), "RO" | "RW" | "OW" | "RM") {
                ctx.reply.simple(&f);
            } else {
                ctx.reply.simple(&f.to_lowercase());
            }
        }
    }
    Ok(())
}

// COMMAND HELP
pub fn command_help(ctx: &mut Ctx) -> CmdResult {
    help_reply(
        ctx,
        "COMMAND",
        &[
            "(no subcommand)",
            "    Return details about all commands.",
            "COUNT",
            "    Return the total number of commands in this server.",
            "LIST",
            "    Return a list of all commands in this server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "GETKEYS <full-command>",
            "    Return the keys from a full command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full command.",
        ],
    );
    Ok(())
}

// SHUTDOWN [NOSAVE | SAVE] [NOW] [FORCE] [ABORT]
pub fn shutdown(ctx: &mut Ctx) -> CmdResult {
    let mut mode = ShutdownMode::Default;
    let (mut abort, mut force, mut now) = (false, false, false);
    for &a in &ctx.args[1..] {
        if eq_ic(a, "NOSAVE") {
            mode = ShutdownMode::NoSave;
        } else if eq_ic(a, "SAVE") {
            mode = ShutdownMode::Save;
        } else if eq_ic(a, "NOW") {
            now = true;
        } else if eq_ic(a, "FORCE") {
            force = true;
        } else if eq_ic(a, "ABORT") {
            abort = true;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    if abort {
        if ctx.args.len() != 2 {
            return Err(CmdError::Syntax);
        }
        if ctx.srv.shutdown_deadline_ms.load(Ordering::Relaxed) == 0 {
            // A signal's shutdown not begun yet is only a request: dropped (Redis's
            // abortShutdown clearing `shutdown_asap`).
            if ctx.srv.shutdown_asap.swap(false, Ordering::AcqRel) {
                crate::log_warning!("Shutdown manually aborted.");
                ctx.reply.ok();
                return Ok(());
            }
            return Err(CmdError::msg("ERR No shutdown in progress."));
        }
        ctx.srv.shutdown_abort.store(true, Ordering::Release);
        ctx.reply.ok();
        return Ok(());
    }
    // A busy script holds shards the final save would wait for (the busy poll runs this on
    // the script's own thread): as in Redis, only SHUTDOWN NOSAVE goes through then.
    if mode != ShutdownMode::NoSave
        && ctx.srv.persistence.gates.load(Ordering::Relaxed) & crate::services::gates::GATE_SCRIPT_BUSY != 0
    {
        return Err(crate::exec::call::busy_error(ctx.srv));
    }
    if crate::daemons::aof::writing_initial(ctx.srv) {
        if !force {
            crate::log_warning!("Writing initial AOF, can't exit.");
            return Err(CmdError::msg("ERR Errors trying to SHUTDOWN. Check logs."));
        }
        crate::log_warning!("Writing initial AOF. Exit anyway.");
        crate::daemons::aof::give_up_initial(ctx.srv);
    }
    // Replicas that have not acknowledged everything: the main thread gives them up to
    // `shutdown-timeout` seconds, writes paused, before the final save (Redis's
    // prepareForShutdown); this client is answered only if the shutdown is aborted or fails.
    let timeout = ctx.srv.config.int(crate::config::p::SHUTDOWN_TIMEOUT);
    // (What lags is read before the callers' list is locked: that lock is a leaf.)
    let lagging = !now && timeout > 0 && !ctx.srv.repl.lagging(ctx.srv.now_ms()).is_empty();
    let mut callers = ctx.srv.shutdown_callers.lock();
    let waiting = ctx.srv.shutdown_deadline_ms.load(Ordering::Relaxed) != 0 || !callers.is_empty();
    if !now && timeout > 0 && (waiting || lagging) {
        // Blocked until the shutdown ends (INFO counts it, as Redis's BLOCKED_SHUTDOWN).
        callers.push(ctx.client.handle.clone());
        drop(callers);
        ctx.srv.blocked_clients.fetch_add(1, Ordering::Relaxed);
        // A shutdown already waiting takes this caller along; otherwise this one starts it.
        if !waiting {
            ctx.client.shutdown = Some(mode);
        }
        return Ok(());
    }
    drop(callers);
    // The final save happens here, so its failure is this command's error reply (FORCE
    // exits anyway); the exit itself then has nothing left to save.
    if crate::daemons::persistence::shutdown_save(ctx.srv, mode).is_err() && !force {
        return Err(CmdError::msg("ERR Errors trying to SHUTDOWN. Check logs."));
    }
    ctx.client.shutdown = Some(ShutdownMode::NoSave);
    Ok(())
}

// SCRIPT HELP
pub fn script_help(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() == 1 {
        return Err(CmdError::Arity("script".into()));
    }
    help_reply(
        ctx,
        "SCRIPT",
        &[
            "DEBUG (YES|SYNC|NO)",
            "    Set the debug mode for subsequent scripts executed.",
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache. Very dangerous on replicas.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the scripts cache.",
            "    * SYNC: Synchronously flush the scripts cache.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
        ],
    );
    Ok(())
}

// FUNCTION HELP
pub fn function_help(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() == 1 {
        return Err(CmdError::Arity("function".into()));
    }
    help_reply(
        ctx,
        "FUNCTION",
        &[
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Create a new library with the given library name and code.",
            "DELETE <LIBRARY NAME>",
            "    Delete the given library.",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Return general information on all the libraries:",
            "    * Library name",
            "    * The engine used to run the Library",
            "    * Library description",
            "    * Functions list",
            "    * Library code (if WITHCODE is given)",
            "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
            "STATS",
            "    Return information about the current function running:",
            "    * Function name",
            "    * Command used to run the function",
            "    * Duration in MS that the function is running",
            "    If no function is running, return nil",
            "    In addition, returns a list of available engines.",
            "KILL",
            "    Kill the current running function.",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the libraries.",
            "    * SYNC: Synchronously flush the libraries.",
            "DUMP",
            "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
            "    control how to handle existing libraries (default APPEND):",
            "    * FLUSH: delete all existing libraries.",
            "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
            "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
            "      libraries with the new libraries (notice that even on this option there is a chance of failure",
            "      in case of functions name collision with another library).",
        ],
    );
    Ok(())
}
