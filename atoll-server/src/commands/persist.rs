//! Persistence commands: DUMP and RESTORE (Redis's payloads), SAVE, BGSAVE and LASTSAVE.
//! The formats live in `persist`; this module parses arguments and applies the results.

use crate::exec::persistence;
use crate::exec::{eq_ic, parse_int, CmdError, CmdResult, Ctx};
use crate::persist;

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
    let val = persist::restore(args[3], &persist::load_opts(&ctx.srv.config)).map_err(|e| CmdError::msg(e.reply()))?;
    let deleted = replace && ctx.ks.delete(key).is_some();
    if ttl != 0 && !absttl {
        ttl = ttl.saturating_add(ctx.ks.now);
    }
    if ttl != 0 && ttl <= ctx.ks.now {
        // Already expired: the key is gone (a replaced one deleted), nothing is added.
        if deleted {
            ctx.rewrite_effect(vec![b"DEL".to_vec(), key.to_vec()]);
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
    if let Some(secs) = idle {
        let clock = ctx.ks.lru_clock;
        if let Some(mut o) = ctx.ks.peek(key) {
            o.set_lru(clock.saturating_sub(secs.min(u32::MAX as i64) as u32));
        }
    }
    // FREQ is accepted as Redis does; Atoll keeps no LFU counter until maxmemory policies exist.
    let _ = freq;
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
        Err(e) if e == persistence::ERR_BGSAVE_RUNNING => Err(CmdError::msg(persistence::ERR_BGSAVE_RUNNING)),
        Err(_) => Err(CmdError::msg("ERR")),
    }
}

// BGSAVE [SCHEDULE]
pub fn bgsave(ctx: &mut Ctx) -> CmdResult {
    let schedule = match ctx.args.len() {
        1 => false,
        2 if eq_ic(ctx.args[1], "SCHEDULE") => true,
        _ => return Err(CmdError::Syntax),
    };
    let _ = schedule;
    match persistence::bgsave(ctx.srv) {
        Ok(()) if ctx.client.in_exec => ctx.reply.simple("Background saving scheduled"),
        Ok(()) => ctx.reply.simple("Background saving started"),
        Err(e) => return Err(CmdError::msg(e)),
    }
    Ok(())
}

// BGREWRITEAOF (every shard locked by the table's scope: see `exec::aof`)
pub fn bgrewriteaof(ctx: &mut Ctx) -> CmdResult {
    crate::exec::aof::rewrite_locked(ctx.srv, ctx.ks.locks)
        .map_err(|e| CmdError::msg(format!("ERR Background AOF rewrite failed: {e}")))?;
    ctx.reply.simple("Background append only file rewriting started");
    Ok(())
}
