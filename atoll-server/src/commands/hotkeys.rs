//! HOTKEYS (Redis 8.6): a session that measures the CPU time and the network bytes of the
//! commands on each key, between HOTKEYS START and HOTKEYS STOP (or its DURATION), and reports
//! the heaviest keys. The measuring is `services::hotkeys::Session`, fed from the end of every
//! keyed command (`exec::call`) while the session's `track` bit is set.
//!
//! Atoll has no cluster mode yet, so SLOTS is refused as Redis refuses it outside one, and
//! `selected-slots` is the whole range. Redis 8.6 is not runnable here: replies, errors and
//! their order follow Redis's reference and sources' facts (the test says which).

use crate::config::TRACK_SESSION;
use crate::exec::*;
use crate::services::hotkeys::{cpu_times, SessionError, SessionInfo, Switch, METRIC_CPU, METRIC_NET};

/// The call path's session bit.
fn switch<'c>(ctx: &Ctx<'c, '_, '_>) -> Switch<'c> {
    Switch { flags: &ctx.srv.config.hot.track, bit: TRACK_SESSION }
}

/// A session whose DURATION passed stops before any HOTKEYS subcommand looks at it.
fn settle(ctx: &Ctx) {
    ctx.srv.stats.hotkeys.expire(ctx.srv.now_ms(), &switch(ctx));
}

/// An integer option within `lo..=hi`, else `msg` (Redis gives the range's message for a
/// value that is not a number too).
fn ranged(arg: &[u8], lo: i64, hi: i64, msg: &'static str) -> Result<i64, CmdError> {
    match parse_int(arg) {
        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
        _ => Err(CmdError::msg(msg)),
    }
}

// HOTKEYS START METRICS count [CPU] [NET] [COUNT k] [DURATION seconds] [SAMPLE ratio]
//     [SLOTS count slot [slot ...]]
pub fn hotkeys_start(ctx: &mut Ctx) -> CmdResult {
    settle(ctx);
    let session = &ctx.srv.stats.hotkeys;
    if session.active() {
        return Err(CmdError::msg("ERR hotkey tracking session already in progress"));
    }
    let args = ctx.args;
    if args.len() < 4 || !eq_ic(args[2], "METRICS") {
        return Err(CmdError::msg("ERR METRICS parameter is required"));
    }
    let n = ranged(args[3], 1, 2, "ERR METRICS count must be > 0 and <= 2")? as usize;
    let mut metrics = 0;
    let mut i = 4;
    for _ in 0..n {
        let Some(word) = args.get(i) else {
            return Err(CmdError::msg("ERR METRICS count does not match number of metric types provided"));
        };
        // A word Redis does not know yet is counted and passed over (newer metrics).
        for (name, bit) in [("CPU", METRIC_CPU), ("NET", METRIC_NET)] {
            if eq_ic(word, name) {
                if metrics & bit != 0 {
                    return Err(CmdError::msg(format!("ERR METRICS {name} defined more than once!")));
                }
                metrics |= bit;
            }
        }
        i += 1;
    }
    if metrics == 0 {
        return Err(CmdError::msg("ERR METRICS no valid metrics passed. Supported: CPU|NET"));
    }
    let (mut count, mut duration, mut sample) = (10, 0, 1);
    while i < args.len() {
        let Some(value) = args.get(i + 1) else { return Err(CmdError::Syntax) };
        let opt = args[i];
        if eq_ic(opt, "COUNT") {
            count = ranged(value, 1, 64, "ERR COUNT must be between 1 and 64")?;
        } else if eq_ic(opt, "DURATION") {
            duration = ranged(value, 1, 1_000_000, "ERR DURATION must be between 1 and 1000000")?;
        } else if eq_ic(opt, "SAMPLE") {
            sample = ranged(value, 1, i32::MAX as i64, "ERR SAMPLE ratio must be positive")?;
        } else if eq_ic(opt, "SLOTS") {
            return Err(CmdError::msg("ERR SLOTS parameter cannot be used in non-cluster mode"));
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let info = SessionInfo {
        epoch: 0,
        active: true,
        metrics,
        count: count as usize,
        sample: sample as u32,
        start_ms: ctx.srv.now_ms(),
        duration_ms: duration * 1000,
        ran_ms: None,
        rusage_start: cpu_times(),
        rusage_end: None,
    };
    match session.start(info, &ctx.srv.stats.workers, &switch(ctx)) {
        Ok(()) => {
            ctx.reply.ok();
            Ok(())
        }
        Err(SessionError::InProgress) => Err(CmdError::msg("ERR hotkey tracking session already in progress")),
    }
}

// HOTKEYS STOP: OK, or null when no session is running.
pub fn hotkeys_stop(ctx: &mut Ctx) -> CmdResult {
    settle(ctx);
    if ctx.srv.stats.hotkeys.stop(ctx.srv.now_ms(), &switch(ctx)) {
        ctx.reply.ok();
    } else {
        ctx.reply.null();
    }
    Ok(())
}

// HOTKEYS RESET: drops a stopped session's data.
pub fn hotkeys_reset(ctx: &mut Ctx) -> CmdResult {
    settle(ctx);
    match ctx.srv.stats.hotkeys.reset(&ctx.srv.stats.workers) {
        Ok(()) => {
            ctx.reply.ok();
            Ok(())
        }
        Err(SessionError::InProgress) => {
            Err(CmdError::msg("ERR hotkey tracking session in progress, stop tracking first"))
        }
    }
}

// HOTKEYS GET: one map per node (one here) in an array; null without a session.
pub fn hotkeys_get(ctx: &mut Ctx) -> CmdResult {
    settle(ctx);
    let Some(r) = ctx.srv.stats.hotkeys.report(&ctx.srv.stats.workers) else {
        ctx.reply.null();
        return Ok(());
    };
    let i = &r.info;
    let (cpu, net) = (i.metrics & METRIC_CPU != 0, i.metrics & METRIC_NET != 0);
    let ran = i.ran_ms.unwrap_or_else(|| (ctx.srv.now_ms() - i.start_ms).max(0));
    let o = &mut *ctx.reply;
    o.array(1);
    o.map(7 + 3 * cpu as usize + 2 * net as usize);
    o.bulk(b"tracking-active");
    o.int(i.active as i64);
    o.bulk(b"sample-ratio");
    o.int(i.sample as i64);
    // Outside cluster mode every slot is this node's: one range.
    o.bulk(b"selected-slots");
    o.array(1);
    o.array(2);
    o.int(0);
    o.int(16383);
    o.bulk(b"all-commands-all-slots-us");
    o.int(r.all_us as i64);
    o.bulk(b"net-bytes-all-commands-all-slots");
    o.int(r.all_net as i64);
    o.bulk(b"collection-start-time-unix-ms");
    o.int(i.start_ms);
    o.bulk(b"collection-duration-ms");
    o.int(ran);
    if cpu {
        // The process's CPU time over the session (until STOP, once stopped).
        let (user, sys) = i.rusage_end.unwrap_or_else(cpu_times);
        o.bulk(b"total-cpu-time-user-ms");
        o.int((user.saturating_sub(i.rusage_start.0) / 1000) as i64);
        o.bulk(b"total-cpu-time-sys-ms");
        o.int((sys.saturating_sub(i.rusage_start.1) / 1000) as i64);
    }
    if net {
        o.bulk(b"total-net-bytes");
        o.int(r.fed_net as i64);
    }
    for (on, name, list) in [(cpu, "by-cpu-time-us", &r.by_cpu), (net, "by-net-bytes", &r.by_net)] {
        if on {
            o.bulk(name.as_bytes());
            o.array(list.len() * 2);
            for (k, v) in list {
                o.bulk(k);
                o.int(*v as i64);
            }
        }
    }
    Ok(())
}

pub fn hotkeys_help(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() == 1 {
        return Err(CmdError::Arity("hotkeys".into()));
    }
    help_reply(
        ctx,
        "HOTKEYS",
        &[
            "START METRICS <count> [CPU] [NET] [COUNT <k>] [DURATION <seconds>] [SAMPLE <ratio>]",
            "      [SLOTS <count> <slot> ...]",
            "    Start measuring, per key, the CPU time (CPU) and the bytes read and written (NET)",
            "    of the commands on it: keep the <k> heaviest keys (default 10), stop by itself",
            "    after <seconds>, feed one command in <ratio> to the ranking. SLOTS needs cluster",
            "    mode.",
            "STOP",
            "    Stop measuring; the results stay until RESET or the next START.",
            "GET",
            "    Return the session's figures and its heaviest keys.",
            "RESET",
            "    Drop the results of a stopped session.",
        ],
    );
    Ok(())
}
