//! Lua scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT, as Redis 7.2 runs them.
//!
//! A script runs as if Redis's single thread ran it alone. It first takes the keyspace's
//! script gate (one script at a time, and no snapshot begins meanwhile), then locks each
//! shard the first time one of its commands needs it — declared keys or not, any database
//! it SELECTs — and keeps every lock until it ends. Other commands wait only if they need one
//! of those shards; they never hold a shard while waiting (`engine::Locks::acquire`), so the
//! script's any-order locking cannot deadlock. Nothing else can observe a script's partial
//! effects: what it changed stays locked until it is complete. Its commands see one time (no
//! key expires half-way), and its effects are logged as the commands it ran, wrapped in
//! MULTI/EXEC. Past `busy-reply-threshold` every other client is answered `-BUSY`, and
//! SCRIPT KILL can stop a script that has not written.
//!
//! Layers: this module sits above `exec` (its commands go through `exec::call::script_call`)
//! and below `commands`, whose table lists the commands defined here.

mod convert;
mod functions;
mod ldb;
pub mod libs;
mod rcall;
mod vm;

pub use functions::*;

use crate::exec::client::{Client, ClientHandle};
use crate::exec::*;
use crate::protocol::Proto;
use crate::services::scripts::{parse_shebang, sflags, sha1_hex, FunctionInfo, Library, Script};
use mlua::Value;
use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub use vm::memory_used;

/// Brings this interpreter's FUNCTION callbacks up to date with the libraries (after a
/// FUNCTION LOAD, DELETE, FLUSH or RESTORE on any worker).
fn sync_functions(vm: &mut vm::Vm, srv: &Server) {
    let generation = srv.scripts.functions.generation.load(Ordering::Acquire);
    if vm.functions_generation == Some(generation) {
        return;
    }
    let libs: Vec<Arc<Library>> = srv.scripts.functions.read().libraries.values().cloned().collect();
    vm.functions.clear();
    for lib in libs {
        // Each library loaded once already; it loads the same way again here.
        if let Ok(regs) = vm.load_library(&lib.code[lib.shebang_len..]) {
            for r in regs {
                vm.functions.insert(r.name.to_ascii_lowercase(), r.callback);
            }
        }
    }
    vm.functions_generation = Some(generation);
}

/// What a running script's callbacks need: the server, the locks it has gathered, and the
/// client its commands run as (Redis's `lua_client`).
struct RunCtx<'r, 'k> {
    srv: &'r Server,
    ws: &'r crate::services::stats::WorkerStats,
    locks: &'r mut crate::engine::Locks<'k>,
    client: &'r mut Client,
    read_only: bool,
    /// `redis.set_repl`: where the following commands' effects go (`REPL_*` bits).
    propagate: u8,
}

/// `redis.REPL_AOF`, `redis.REPL_REPLICA` and both.
pub const REPL_AOF: u8 = 1;
pub const REPL_ALL: u8 = 3;

thread_local! {
    /// The client a script's commands run as, one per worker thread, reused.
    static SCRIPT_CLIENT: RefCell<Option<Client>> = const { RefCell::new(None) };
}

/// Adds `body` to the script cache after compiling it in this thread's interpreter (SCRIPT
/// LOAD, and EVAL of a script not seen before). `Err` is the reply.
pub fn load_script(srv: &Server, body: &[u8]) -> Result<Arc<Script>, CmdError> {
    let sha = sha1_hex(body);
    if let Some(s) = srv.scripts.get(&sha) {
        return Ok(s);
    }
    let (flags, shebang_len) = parse_shebang(body).map_err(|e| CmdError::msg(format!("ERR {e}")))?;
    let script = Arc::new(Script { sha, body: body.into(), flags, shebang_len });
    let generation = srv.scripts.generation.load(Ordering::Acquire);
    vm::with_vm(generation, &srv.scripts.run, |vm| vm.compile(&script))
        .map_err(|e| CmdError::msg(format!("ERR Error compiling script (new function): {e}")))?;
    srv.scripts.insert(script.clone());
    Ok(script)
}

/// The worker's cron: after a SCRIPT FLUSH, this worker's old interpreter goes at once (INFO
/// `used_memory_lua` then counts only interpreters in use, as Redis's single one).
pub fn release_stale_vm(srv: &Server, worker: usize) {
    if vm::drop_stale(srv.scripts.generation.load(Ordering::Acquire)) {
        srv.scripts.vm_bytes[worker % 64].store(0, Ordering::Relaxed);
    }
}

/// EVAL and its variants: `evalsha` names the script by SHA, `ro` refuses writes. After
/// SCRIPT DEBUG SYNC an EVAL runs under the debugger (`ldb`): on the worker it asks for the
/// connection to be handed to a session thread of its own, which runs it again, there.
pub fn eval_generic(ctx: &mut Ctx, evalsha: bool, ro: bool) -> CmdResult {
    if !ctx.client.lua_debug {
        return eval_run(ctx, evalsha, ro);
    }
    if evalsha {
        if ctx.args[1].len() != 40 {
            return Err(CmdError::msg("NOSCRIPT No matching script. Please use EVAL."));
        }
        return Err(CmdError::msg("ERR Please use EVAL instead of EVALSHA for debugging"));
    }
    let Some(wire) = ctx.client.ldb_wire.take() else {
        // Redis would debug it in the middle of the transaction's reply; a connection cannot
        // be handed over half-way through one here.
        if ctx.client.in_exec {
            return Err(CmdError::msg("ERR Lua debugging is not available inside MULTI/EXEC"));
        }
        ctx.client.ldb_request = Some(ctx.args.iter().map(|a| a.to_vec()).collect());
        return Ok(());
    };
    crate::log_notice!("Redis synchronous debugging eval session started");
    ldb::begin(wire, ctx.args[1], ctx.srv.config.hot.busy_reply_ms.load(Ordering::Relaxed));
    let r = eval_run(ctx, evalsha, ro);
    // `<endsession>` goes out before the reply (an error included), and the connection
    // closes after it (`server::debugging`).
    ctx.client.ldb_wire = ldb::end();
    ctx.client.lua_debug = false;
    crate::log_notice!("Redis synchronous debugging eval session ended");
    r
}

fn eval_run(ctx: &mut Ctx, evalsha: bool, ro: bool) -> CmdResult {
    let srv = ctx.srv;
    // MONITOR shows the script before the commands it runs (EVAL is `skip_monitor` for that).
    if srv.pubsub.monitoring() {
        crate::exec::call::feed_monitors(srv, ctx.client, ctx.args);
    }
    const NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";
    if evalsha && ctx.args[1].len() != 40 {
        return Err(CmdError::msg(NOSCRIPT));
    }
    let numkeys = ctx.arg_i64(2)?;
    let nargs = (ctx.args.len() - 3) as i64;
    if numkeys > nargs {
        return Err(CmdError::msg("ERR Number of keys can't be greater than number of args"));
    }
    if numkeys < 0 {
        return Err(CmdError::msg("ERR Number of keys can't be negative"));
    }
    let script = if evalsha {
        srv.scripts.get(ctx.args[1]).ok_or_else(|| CmdError::msg(NOSCRIPT))?
    } else {
        load_script(srv, ctx.args[1])?
    };
    let compat = script.flags & sflags::EVAL_COMPAT != 0;
    if !compat {
        prepare_flagged(ctx, script.flags, ro)?;
    } else if srv.persistence.gates.load(Ordering::Relaxed) & crate::services::gates::GATE_STALE != 0
        && !ctx.client.replaying
    {
        // EVAL may run on a stale replica (flag `stale`), but a script without a shebang may
        // not, as Redis's scriptPrepareForRun decides.
        return Err(CmdError::MasterDown);
    }
    let read_only = ro || (!compat && script.flags & sflags::NO_WRITES != 0);
    let numkeys = numkeys as usize;
    let name = String::from_utf8_lossy(&script.sha).into_owned();
    run(ctx, &name, Target::Eval(&script), script.flags, read_only, numkeys)
}

/// Redis's scriptPrepareForRun for a script that declares flags (a shebang, or a function):
/// one that may write is refused where writes are, and one that did not declare `allow-oom`
/// does not start when memory was out when it arrived (`no-writes` implies allow-oom). At
/// the top level the gates (`call::gate_flags`) refused such a call already, with the error
/// any write gets; these texts are what EXEC and a script calling a script see.
pub fn prepare_flagged(ctx: &Ctx, flags: u32, ro: bool) -> Result<(), CmdError> {
    if ctx.srv.cluster.enabled && flags & sflags::NO_CLUSTER != 0 {
        return Err(CmdError::msg("ERR Can not run script on cluster, 'no-cluster' flag is set."));
    }
    if flags & sflags::NO_WRITES == 0 {
        refuse_writable(ctx.srv, ctx.client.replaying, ro)?;
        if flags & sflags::ALLOW_OOM == 0
            && ctx.client.oom_at_start
            && ctx.srv.config.hot.maxmemory.load(Ordering::Relaxed) != 0
        {
            return Err(CmdError::Oom);
        }
    }
    Ok(())
}

/// What a run calls: an EVAL script, or a FUNCTION by name.
enum Target<'a> {
    Eval(&'a Script),
    Function(&'a str),
}

/// Runs a script or function for the command in `ctx` (keys and arguments from position 3,
/// `numkeys` of them keys). `name` is what errors and FUNCTION STATS call it.
fn run(ctx: &mut Ctx, name: &str, target: Target, flags: u32, read_only: bool, numkeys: usize) -> CmdResult {
    let srv = ctx.srv;
    let keys = &ctx.args[3..3 + numkeys];
    let argv = &ctx.args[3 + numkeys..];
    // One script at a time, no snapshot starting meanwhile (see `Keyspace::script_gate`).
    let _gate = srv.ks.enter_script_gate();
    let run = &srv.scripts.run;
    let threshold = srv.config.hot.busy_reply_ms.load(Ordering::Relaxed);
    run.start(name, ctx.args, matches!(target, Target::Eval(_)), ctx.client.worker, threshold);
    let generation = srv.scripts.generation.load(Ordering::Acquire);
    let now = ctx.ks.now;
    SCRIPT_CLIENT.with(|slot| {
        let mut slot = slot.borrow_mut();
        let client = slot.get_or_insert_with(|| {
            let handle = Arc::new(ClientHandle::new(0, String::new(), String::new(), -1, true, now));
            Client::new(handle, ctx.client.worker, false)
        });
        client.db = ctx.client.db;
        client.proto = Proto::Resp2;
        client.in_exec = true;
        client.in_script = true;
        client.fixed_ms = Some(now);
        client.fixed_us = Some(ctx.client.fixed_us.unwrap_or_else(crate::services::clock::unix_us));
        client.clock = None;
        client.exec_effects.clear();
        client.ready.clear();
        // The keys the script reads are tracked for its caller (CLIENT TRACKING).
        client.tracking = ctx.client.tracking.clone();
        client.caching = ctx.client.caching;
        // Its commands run with the caller's permissions (and are logged as the caller's).
        client.user = ctx.client.user.clone();
        client.perms = ctx.client.perms.clone();
        client.acl_epoch = ctx.client.acl_epoch;
        client.acl_origin = Some(ctx.client.handle.clone());
        client.oom_at_start = ctx.client.oom_at_start;
        // A script replayed from the AOF or the master's stream writes where the caller may
        // (a read-only replica loading its AOF, as Redis's obey-client rule).
        client.replaying = ctx.client.replaying;
        client.allow_oom = flags & sflags::ALLOW_OOM != 0;
        // Cluster mode: the script's commands are routed as its caller's (READONLY, ASKING),
        // and stay in the slot of its declared keys unless it may cross slots.
        client.asking = ctx.client.asking;
        client.read_only_mode = ctx.client.read_only_mode;
        client.cluster_slot = ctx.client.cluster_slot;
        client.cross_slot_ok = flags & (sflags::EVAL_COMPAT | sflags::ALLOW_CROSS_SLOT) != 0;
        let state =
            RefCell::new(RunCtx { srv, ws: ctx.ws, locks: &mut *ctx.ks.locks, client, read_only, propagate: REPL_ALL });
        let worker = ctx.client.worker;
        let result = vm::with_vm(generation, run, |vm| {
            let r = run_in_vm(vm, &target, keys, argv, &state);
            // (A debugging session's interpreter is its thread's, not the worker's.)
            if !ldb::active() {
                srv.scripts.vm_bytes[worker % 64].store(vm.lua.used_memory() as u64, Ordering::Relaxed);
            }
            r
        });
        let st = state.into_inner();
        // The caller's tracking state is not kept alive by the thread's script client; the
        // keys it modified reach BCAST clients in one go (with the caller's transaction, if
        // it runs in one).
        st.client.tracking = None;
        let touched = std::mem::take(&mut st.client.bcast_batch);
        if ctx.client.in_exec {
            ctx.client.bcast_batch.extend(touched);
        } else {
            srv.tracking.broadcast(&srv.reach(), touched);
        }
        let script_resp3 = st.client.proto == Proto::Resp3;
        let mark = ctx.reply.buf.len();
        // An error the command that raised it already counted (Redis's
        // `ignore_error_stats_update`) is not counted again as the script's reply.
        let counted = match &result {
            Ok(Ok(Value::Table(t))) | Ok(Err(Value::Table(t))) => {
                t.raw_get::<bool>("ignore_error_stats_update").unwrap_or(false)
            }
            _ => false,
        };
        match result {
            Ok(Ok(v)) => convert::lua_to_reply(&v, ctx.reply, script_resp3),
            Ok(Err(e)) => ctx.reply.error(&error_text(&e, name)),
            Err(e) => ctx.reply.error(&format!("ERR Error running script {name}, {e}")),
        }
        // A script whose reply is an error failed, as Redis counts it.
        if ctx.reply.buf.get(mark) == Some(&b'-') {
            ctx.ws.cmds[ctx.cmd.id].failed_calls.fetch_add(1, Ordering::Relaxed);
            if !counted {
                let line = &ctx.reply.buf[mark + 1..];
                let end = line.windows(2).position(|w| w == b"\r\n").unwrap_or(line.len());
                crate::exec::call::count_error(ctx.ws, &String::from_utf8_lossy(&line[..end]));
            }
        }
        // Its effects as one group (a transaction wraps its own), and the clients blocked on
        // keys it made ready, served once it is complete (by `call`'s epilogue).
        let mut effects = std::mem::take(&mut st.client.exec_effects);
        if !ctx.client.in_exec {
            Effect::wrap(&mut effects);
        }
        ctx.ks.effects.append(&mut effects);
        ctx.ks.ready.append(&mut st.client.ready);
        st.client.fixed_ms = None;
        st.client.fixed_us = None;
    });
    ctx.rewrote = true;
    run.finish();
    Ok(())
}

/// The reply for a script that failed: Redis's text, with where it failed.
fn error_text(e: &Value, name: &str) -> String {
    let Value::Table(t) = e else {
        let msg = match e {
            Value::String(s) => s.to_string_lossy(),
            _ => "execution failure".to_string(),
        };
        return format!("ERR Error running script {name}, {msg}");
    };
    let msg = match t.raw_get::<Value>("err") {
        Ok(Value::String(s)) => s.to_string_lossy(),
        _ => "ERR unknown error".to_string(),
    };
    let source = t.raw_get::<Value>("source").ok().and_then(|v| match v {
        Value::String(s) => Some(s.to_string_lossy()),
        _ => None,
    });
    let line = t.raw_get::<Value>("line").ok().and_then(|v| match v {
        Value::Integer(i) => Some(i.to_string()),
        Value::Number(n) => Some((n as i64).to_string()),
        Value::String(s) => Some(s.to_string_lossy()),
        _ => None,
    });
    match (source, line) {
        (Some(s), Some(l)) => format!("{msg} script: {name}, on {s}:{l}."),
        _ => msg,
    }
}

/// Runs the script in this thread's interpreter with the run's entry points in place.
/// `Ok(Ok(v))`: it returned `v`; `Ok(Err(e))`: it failed with the error value `e`.
fn run_in_vm(
    vm: &mut vm::Vm,
    target: &Target,
    keys: &[&[u8]],
    argv: &[&[u8]],
    state: &RefCell<RunCtx>,
) -> mlua::Result<Result<Value, Value>> {
    let list = |lua: &mlua::Lua, items: &[&[u8]]| -> mlua::Result<mlua::Table> {
        let t = lua.create_table_with_capacity(items.len(), 0)?;
        for (i, it) in items.iter().enumerate() {
            t.raw_set(i + 1, lua.create_string(it)?)?;
        }
        Ok(t)
    };
    let f = match target {
        Target::Eval(script) => {
            let f = vm.compile(script).map_err(|e| mlua::Error::RuntimeError(e.to_string()))?;
            // EVAL's keys and arguments are globals.
            vm.backing.raw_set("KEYS", list(&vm.lua, keys)?)?;
            vm.backing.raw_set("ARGV", list(&vm.lua, argv)?)?;
            f
        }
        Target::Function(name) => {
            sync_functions(vm, state.borrow().srv);
            let cb = vm
                .functions
                .get(&name.to_ascii_lowercase())
                .cloned()
                .ok_or_else(|| mlua::Error::RuntimeError("Function not found".into()))?;
            // A function gets them as its two arguments.
            vm.bind(&cb, list(&vm.lua, keys)?, list(&vm.lua, argv)?)?
        }
    };
    let run = state.borrow().srv.scripts.run.clone();
    // `redis.call` and the other run-bound entry points find the run's state through this.
    let installed = rcall::install(state);
    let out = Ok(vm.run(&f, &run));
    drop(installed);
    let lua = &vm.lua;
    vm.runs_since_gc += 1;
    if vm.runs_since_gc >= 50 {
        vm.runs_since_gc = 0;
        let _ = lua.gc_step_kbytes(50);
    }
    out
}

/// One of the run-bound `redis.*` functions other than `call` and `pcall` (`rcall`), with
/// its arguments.
fn run_entry(lua: &mlua::Lua, entry: vm::Entry, args: Vec<Value>) -> mlua::Result<(bool, Value)> {
    rcall::with_ctx(|state| run_entry_in(lua, entry, args, state)).unwrap_or_else(|| {
        Ok((false, Value::Table(vm::error_table(lua, "This function can only be called from a running script")?)))
    })
}

fn run_entry_in(
    lua: &mlua::Lua,
    entry: vm::Entry,
    args: Vec<Value>,
    state: &RefCell<RunCtx>,
) -> mlua::Result<(bool, Value)> {
    let fail = |msg: &str| Ok((false, Value::Table(vm::error_table(lua, msg)?)));
    match entry {
        vm::Entry::SetResp => {
            if args.len() != 1 {
                return fail("redis.setresp() requires one argument.");
            }
            let proto = match lua.coerce_number(args[0].clone())?.unwrap_or(0.0) as i64 {
                2 => Proto::Resp2,
                3 => Proto::Resp3,
                _ => return fail("RESP version must be 2 or 3."),
            };
            state.borrow_mut().client.proto = proto;
            Ok((true, Value::Nil))
        }
        vm::Entry::SetRepl => {
            if args.len() != 1 {
                return fail("redis.set_repl() requires one argument.");
            }
            let n = lua.coerce_number(args[0].clone())?.unwrap_or(0.0) as i64;
            if n & !3 != 0 {
                return fail("Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.");
            }
            state.borrow_mut().propagate = n as u8;
            Ok((true, Value::Nil))
        }
        vm::Entry::AclCheckCmd => {
            let argv = match convert::args_to_argv(&args) {
                Ok(a) => a,
                Err(e) => return fail(e),
            };
            let refs: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
            let st = state.borrow();
            match crate::exec::call::resolve(st.srv, &refs) {
                // The caller's permissions (the script's client carries them).
                Ok(cmd) => {
                    let ok = st.client.perms.as_ref().is_none_or(|p| p.unrestricted || p.check(cmd, &refs).is_ok());
                    Ok((true, Value::Boolean(ok)))
                }
                Err(_) => fail("Invalid command passed to redis.acl_check_cmd()"),
            }
        }
    }
}

// EVAL script numkeys [key ...] [arg ...]
pub fn eval(ctx: &mut Ctx) -> CmdResult {
    eval_generic(ctx, false, false)
}

// EVAL_RO script numkeys [key ...] [arg ...]
pub fn eval_ro(ctx: &mut Ctx) -> CmdResult {
    eval_generic(ctx, false, true)
}

// EVALSHA sha1 numkeys [key ...] [arg ...]
pub fn evalsha(ctx: &mut Ctx) -> CmdResult {
    eval_generic(ctx, true, false)
}

// EVALSHA_RO sha1 numkeys [key ...] [arg ...]
pub fn evalsha_ro(ctx: &mut Ctx) -> CmdResult {
    eval_generic(ctx, true, true)
}

// SCRIPT LOAD script
pub fn script_load(ctx: &mut Ctx) -> CmdResult {
    let s = load_script(ctx.srv, ctx.args[2])?;
    ctx.reply.bulk(&s.sha);
    Ok(())
}

// SCRIPT EXISTS sha1 [sha1 ...]
pub fn script_exists(ctx: &mut Ctx) -> CmdResult {
    ctx.reply.array(ctx.args.len() - 2);
    for sha in &ctx.args[2..] {
        ctx.reply.int(ctx.srv.scripts.get(sha).is_some() as i64);
    }
    Ok(())
}

// SCRIPT SHOW sha1 (Valkey 8): the body of a cached script, as it was loaded.
pub fn script_show(ctx: &mut Ctx) -> CmdResult {
    match ctx.srv.scripts.get(ctx.args[2]) {
        Some(script) => ctx.reply.bulk(&script.body),
        None => return Err(CmdError::msg("NOSCRIPT No matching script.")),
    }
    Ok(())
}

/// SCRIPT FLUSH and FUNCTION FLUSH take nothing or ASYNC or SYNC (both free at once: the
/// cache and the libraries are small next to the dataset).
fn flush_mode_ok(args: &[&[u8]]) -> bool {
    match args.len() {
        2 => true,
        3 => args[2].eq_ignore_ascii_case(b"sync") || args[2].eq_ignore_ascii_case(b"async"),
        _ => false,
    }
}

// SCRIPT FLUSH [ASYNC | SYNC]
pub fn script_flush(ctx: &mut Ctx) -> CmdResult {
    if !flush_mode_ok(ctx.args) {
        return Err(CmdError::msg("ERR SCRIPT FLUSH only support SYNC|ASYNC option"));
    }
    ctx.srv.scripts.flush();
    ctx.reply.ok();
    Ok(())
}

// SCRIPT KILL
pub fn script_kill(ctx: &mut Ctx) -> CmdResult {
    kill(ctx, true)
}

// SCRIPT DEBUG YES|SYNC|NO
pub fn script_debug(ctx: &mut Ctx) -> CmdResult {
    // Replies still to write (an earlier command of the batch, EXEC's own): Redis's test.
    if !ctx.reply.buf.is_empty() || ctx.client.in_exec {
        return Err(CmdError::msg("ERR SCRIPT DEBUG must be called outside a pipeline"));
    }
    let a = ctx.args[2];
    if a.eq_ignore_ascii_case(b"no") {
        ctx.client.lua_debug = false;
    } else if a.eq_ignore_ascii_case(b"sync") {
        ctx.client.lua_debug = true;
    } else if a.eq_ignore_ascii_case(b"yes") {
        // Redis forks a copy of itself whose changes are thrown away; Atoll has no such
        // copy to give. Refused rather than run as SYNC: that session's writes would stay.
        return Err(CmdError::msg(
            "ERR SCRIPT DEBUG YES (a forked session whose changes are rolled back) is not supported by Atoll; use SCRIPT DEBUG SYNC",
        ));
    } else {
        return Err(CmdError::msg("ERR Use SCRIPT DEBUG YES/SYNC/NO"));
    }
    ctx.reply.ok();
    Ok(())
}

/// Redis's scriptPrepareForRun for a script whose flags let it write (a function, or EVAL with
/// a shebang, without `no-writes`): refused up front on a read-only replica, while saves fail,
/// through an `_ro` command, or with too few good replicas — in Redis's order. `obey`: the
/// caller is the master's stream or an AOF replay, which must run it.
pub fn refuse_writable(srv: &Server, obey: bool, ro: bool) -> Result<(), CmdError> {
    let gates = srv.persistence.gates.load(Ordering::Relaxed);
    if gates & crate::services::gates::GATE_READONLY != 0 && !obey {
        return Err(CmdError::msg("READONLY Can not run script with write flag on readonly replica"));
    }
    if srv.persistence.failed() && srv.persistence.writes_refused(&srv.config) && !obey {
        return Err(CmdError::msg("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Writable scripts are blocked. Use 'no-writes' flag for read only scripts."));
    }
    if ro {
        return Err(CmdError::msg("ERR Can not execute a script with write flag using *_ro command."));
    }
    if gates & crate::services::gates::GATE_NO_REPLICAS != 0 {
        return Err(CmdError::NoReplicas);
    }
    Ok(())
}
