//! FUNCTION and FCALL: libraries of named Lua functions (Redis 7's functions).
//!
//! A library is loaded once to validate it and learn what it registers; the shared registry
//! (`services::scripts::Functions`) keeps its code and its functions' names and flags. Each worker's
//! interpreter loads the libraries again when the registry changed since it last looked, so
//! FCALL finds the callbacks in whichever worker runs it.

use super::{run, vm, FunctionInfo, Library, Target};
use crate::exec::*;
use crate::persist::PersistError;
use crate::services::scripts::{parse_library_meta, sflags, valid_name, ScriptError};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A library's name and where its Lua code starts, from its metadata line, checked in
/// Redis's order (metadata, name, engine); `Err` is the reply.
fn library_meta(code: &[u8]) -> Result<(String, usize), CmdError> {
    let (engine, name, shebang_len) = parse_library_meta(code).map_err(|e| CmdError::msg(format!("ERR {e}")))?;
    if !valid_name(&name) {
        return Err(CmdError::msg("ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"));
    }
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(CmdError::msg(format!("ERR Engine '{engine}' not found")));
    }
    Ok((name, shebang_len))
}

/// Loads a library's code into this thread's interpreter and describes it; `Err` is the reply.
pub fn prepare_library(srv: &Server, code: &[u8]) -> Result<Arc<Library>, CmdError> {
    let (name, shebang_len) = library_meta(code)?;
    let generation = srv.scripts.generation.load(Ordering::Acquire);
    let regs = vm::with_vm(generation, &srv.scripts.run, |vm| vm.load_library(&code[shebang_len..]))?;
    let functions =
        regs.into_iter().map(|r| FunctionInfo { name: r.name, description: r.description, flags: r.flags }).collect();
    Ok(Arc::new(Library { name, code: code.into(), shebang_len, functions }))
}

/// Installs libraries found in an RDB file or an AOF's preamble (registered as the server's
/// `functions_loader`); with `replace` a library of the same name is replaced, else it is an
/// error (Redis's "Library already exists" load failure).
pub fn install_libraries(srv: &Server, codes: &[Vec<u8>], replace: bool) -> Result<(), PersistError> {
    let failed = |e: String| PersistError::Refused(format!("Failed loading library: {e}"));
    for code in codes {
        let lib = prepare_library(srv, code).map_err(|e| failed(e.text().into_owned()))?;
        srv.scripts.functions.update(|st| st.add(lib, replace)).map_err(|e| failed(e.to_string()))?;
    }
    Ok(())
}

/// Changes the libraries for a FUNCTION command (`f` Err: nothing changed) and counts the
/// change. Standalone, the command is logged while the change is still exclusive: an AOF
/// rewrite copies the libraries and takes its instant under the same lock, so the command
/// lands exactly in the file whose base does not hold it (the epoch read here says which).
/// Inside EXEC the transaction holds the script gate, which a rewrite's start needs too, and
/// the epilogue logs it with the rest.
fn change<R, E>(
    ctx: &mut Ctx,
    f: impl FnOnce(&mut crate::services::scripts::FunctionsState) -> Result<R, E>,
) -> Result<R, E> {
    let srv = ctx.srv;
    let publish = ctx.ks.emit && !ctx.client.in_exec;
    let (db, args) = (ctx.ks.db, ctx.args);
    let r = srv.scripts.functions.update(|st| {
        let r = f(st)?;
        if publish {
            let argv = args.iter().map(|a| a.to_vec()).collect();
            srv.publish_effects(&[Effect::new(db, argv)], srv.ks.snapshots.epoch());
        }
        Ok(r)
    });
    if r.is_ok() {
        ctx.ks.dirty += 1;
        if publish {
            ctx.no_effect();
        }
    }
    r
}

// FUNCTION LOAD [REPLACE] function-code
pub fn function_load(ctx: &mut Ctx) -> CmdResult {
    let mut replace = false;
    let n = ctx.args.len();
    for a in &ctx.args[2..n - 1] {
        if a.eq_ignore_ascii_case(b"replace") {
            replace = true;
        } else {
            return Err(CmdError::msg(format!("ERR Unknown option given: {}", String::from_utf8_lossy(a))));
        }
    }
    let code = ctx.args[n - 1];
    let srv = ctx.srv;
    // Redis refuses an existing library before running the new code.
    let (name, _) = library_meta(code)?;
    if !replace && srv.scripts.functions.read().libraries.contains_key(&name) {
        return Err(CmdError::msg(format!("ERR Library '{name}' already exists")));
    }
    let lib = prepare_library(srv, code)?;
    let name = lib.name.clone();
    // A change of the dataset Redis counts and logs (the AOF replays the command).
    change(ctx, |st| st.add(lib, replace)).map_err(|e| CmdError::msg(format!("ERR {e}")))?;
    ctx.reply.bulk(name.as_bytes());
    Ok(())
}

// FUNCTION DELETE library-name
pub fn function_delete(ctx: &mut Ctx) -> CmdResult {
    let name = String::from_utf8_lossy(ctx.args[2]).into_owned();
    let srv = ctx.srv;
    if !srv.scripts.functions.read().libraries.contains_key(&name) {
        return Err(CmdError::msg("ERR Library not found"));
    }
    change(ctx, |st| {
        st.remove(&name);
        Ok::<(), ()>(())
    })
    .ok();
    ctx.reply.ok();
    Ok(())
}

// FUNCTION FLUSH [ASYNC | SYNC]
pub fn function_flush(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() > 3 {
        return Err(CmdError::msg(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
            String::from_utf8_lossy(ctx.args[1])
        )));
    }
    if !super::flush_mode_ok(ctx.args) {
        return Err(CmdError::msg("ERR FUNCTION FLUSH only supports SYNC|ASYNC option"));
    }
    change(ctx, |st| {
        *st = Default::default();
        Ok::<(), ()>(())
    })
    .ok();
    ctx.reply.ok();
    Ok(())
}

// FUNCTION LIST [LIBRARYNAME library-name-pattern] [WITHCODE]
pub fn function_list(ctx: &mut Ctx) -> CmdResult {
    let mut pattern: Option<&[u8]> = None;
    let mut with_code = false;
    let mut i = 2;
    while i < ctx.args.len() {
        let a = ctx.args[i];
        if a.eq_ignore_ascii_case(b"withcode") && !with_code {
            with_code = true;
        } else if a.eq_ignore_ascii_case(b"libraryname") && pattern.is_none() {
            i += 1;
            let Some(p) = ctx.args.get(i) else {
                return Err(CmdError::msg("ERR library name argument was not given"));
            };
            pattern = Some(p);
        } else {
            return Err(CmdError::msg(format!("ERR Unknown argument {}", String::from_utf8_lossy(a))));
        }
        i += 1;
    }
    let st = ctx.srv.scripts.functions.read();
    let libs: Vec<&Arc<Library>> = st
        .libraries
        .values()
        .filter(|l| pattern.is_none_or(|p| crate::engine::glob::glob_match(p, l.name.as_bytes(), false)))
        .collect();
    let r = &mut *ctx.reply;
    r.array(libs.len());
    for lib in libs {
        r.map(if with_code { 4 } else { 3 });
        r.bulk(b"library_name");
        r.bulk(lib.name.as_bytes());
        r.bulk(b"engine");
        r.bulk(b"LUA");
        r.bulk(b"functions");
        r.array(lib.functions.len());
        for f in &lib.functions {
            r.map(3);
            r.bulk(b"name");
            r.bulk(f.name.as_bytes());
            r.bulk(b"description");
            match &f.description {
                Some(d) => r.bulk(d),
                None => r.null(),
            }
            r.bulk(b"flags");
            let names: Vec<&str> =
                sflags::NAMES.iter().filter(|(_, bit)| f.flags & bit != 0).map(|(n, _)| *n).collect();
            r.set(names.len());
            for n in names {
                r.simple(n);
            }
        }
        if with_code {
            r.bulk(b"library_code");
            r.bulk(&lib.code);
        }
    }
    Ok(())
}

// FUNCTION STATS
pub fn function_stats(ctx: &mut Ctx) -> CmdResult {
    let srv = ctx.srv;
    let run = &srv.scripts.run;
    // Only a script past busy-reply-threshold can be seen running, as in single-threaded
    // Redis (a quick one on another worker is as if it ran before or after); a busy EVAL
    // script makes FUNCTION STATS itself refuse.
    let busy = run.running.load(Ordering::Acquire) && run.busy.load(Ordering::Relaxed);
    if busy && run.is_eval.load(Ordering::Relaxed) {
        return Err(CmdError::Busy { function: false });
    }
    let r = &mut *ctx.reply;
    r.map(2);
    r.bulk(b"running_script");
    if busy {
        let (name, argv) = run.name.lock().clone();
        r.map(3);
        r.bulk(b"name");
        r.bulk(name.as_bytes());
        r.bulk(b"command");
        r.array(argv.len());
        for a in &argv {
            r.bulk(a);
        }
        r.bulk(b"duration_ms");
        r.int(unix_ms() - run.started_ms.load(Ordering::Relaxed));
    } else {
        r.null();
    }
    let st = srv.scripts.functions.read();
    r.bulk(b"engines");
    r.map(1);
    r.bulk(b"LUA");
    r.map(2);
    r.bulk(b"libraries_count");
    r.int(st.libraries.len() as i64);
    r.bulk(b"functions_count");
    r.int(st.functions.len() as i64);
    Ok(())
}

// FUNCTION KILL
pub fn function_kill(ctx: &mut Ctx) -> CmdResult {
    kill(ctx, false)
}

/// SCRIPT KILL and FUNCTION KILL: each stops only its own kind, and only before a write.
pub fn kill(ctx: &mut Ctx, eval: bool) -> CmdResult {
    let run = &ctx.srv.scripts.run;
    if !run.running.load(Ordering::Acquire) {
        return Err(CmdError::msg("NOTBUSY No scripts in execution right now."));
    }
    if run.wrote.load(Ordering::Relaxed) {
        return Err(CmdError::msg("UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command."));
    }
    match (eval, run.is_eval.load(Ordering::Relaxed)) {
        (true, false) => return Err(CmdError::Busy { function: true }),
        (false, true) => return Err(CmdError::Busy { function: false }),
        _ => {}
    }
    run.kill.store(true, Ordering::Relaxed);
    ctx.reply.ok();
    Ok(())
}

// FUNCTION DUMP
pub fn function_dump(ctx: &mut Ctx) -> CmdResult {
    let st = ctx.srv.scripts.functions.read();
    let opts = crate::persist::save_opts(&ctx.srv.config);
    let payload = crate::persist::dump_functions(st.libraries.values().map(|l| &*l.code), &opts);
    drop(st);
    ctx.reply.bulk(&payload);
    Ok(())
}

// FUNCTION RESTORE serialized-value [FLUSH | APPEND | REPLACE]
pub fn function_restore(ctx: &mut Ctx) -> CmdResult {
    #[derive(PartialEq)]
    enum Policy {
        Flush,
        Append,
        Replace,
    }
    if ctx.args.len() > 4 {
        return Err(CmdError::msg(
            "ERR unknown subcommand or wrong number of arguments for 'restore'. Try FUNCTION HELP.",
        ));
    }
    let policy = match ctx.args.get(3) {
        None => Policy::Append,
        Some(p) if p.eq_ignore_ascii_case(b"flush") => Policy::Flush,
        Some(p) if p.eq_ignore_ascii_case(b"append") => Policy::Append,
        Some(p) if p.eq_ignore_ascii_case(b"replace") => Policy::Replace,
        Some(_) => {
            return Err(CmdError::msg(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            ))
        }
    };
    let srv = ctx.srv;
    let codes = crate::persist::restore_functions(ctx.args[2]).map_err(|e| CmdError::msg(format!("ERR {e}")))?;
    let mut libs = Vec::with_capacity(codes.len());
    for code in &codes {
        libs.push(prepare_library(srv, code)?);
    }
    // All or nothing: the new set is built aside and swapped in only if every library fits.
    change(ctx, |st| {
        let mut next = if policy == Policy::Flush { Default::default() } else { st.clone() };
        for lib in libs {
            let name = lib.name.clone();
            next.add(lib, policy == Policy::Replace).map_err(|e| match e {
                // FUNCTION RESTORE words it without quotes.
                ScriptError::LibraryExists(_) => format!("ERR Library {name} already exists"),
                e => format!("ERR {e}"),
            })?;
        }
        *st = next;
        Ok::<(), String>(())
    })
    .map_err(CmdError::msg)?;
    ctx.reply.ok();
    Ok(())
}

/// FCALL and FCALL_RO.
fn fcall_generic(ctx: &mut Ctx, ro: bool) -> CmdResult {
    let srv = ctx.srv;
    // MONITOR shows the call before the commands it runs (FCALL is `skip_monitor` for that).
    if srv.pubsub.monitoring() {
        crate::exec::call::feed_monitors(srv, ctx.client, ctx.args);
    }
    let fname = String::from_utf8_lossy(ctx.args[1]).into_owned();
    let Some((_, info)) = srv.scripts.functions.read().function(&fname) else {
        return Err(CmdError::msg("ERR Function not found"));
    };
    let numkeys =
        crate::protocol::parse_i64(ctx.args[2]).ok_or_else(|| CmdError::msg("ERR Bad number of keys provided"))?;
    if numkeys > (ctx.args.len() - 3) as i64 {
        return Err(CmdError::msg("ERR Number of keys can't be greater than number of args"));
    }
    if numkeys < 0 {
        return Err(CmdError::msg("ERR Number of keys can't be negative"));
    }
    super::prepare_flagged(ctx, info.flags, ro)?;
    let read_only = ro || info.flags & sflags::NO_WRITES != 0;
    run(ctx, &fname, Target::Function(&fname), info.flags, read_only, numkeys as usize)
}

// FCALL function numkeys [key ...] [arg ...]
pub fn fcall(ctx: &mut Ctx) -> CmdResult {
    fcall_generic(ctx, false)
}

// FCALL_RO function numkeys [key ...] [arg ...]
pub fn fcall_ro(ctx: &mut Ctx) -> CmdResult {
    fcall_generic(ctx, true)
}
