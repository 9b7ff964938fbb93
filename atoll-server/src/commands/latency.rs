//! Where the time goes: SLOWLOG and COMMANDLOG (slow commands, large requests and replies),
//! LATENCY (the latency monitor's events and the per-command histograms). What they read is
//! recorded by `exec::call` (see `services::commandlog` and `services::latency`).

use crate::exec::table::Command;
use crate::exec::*;
use crate::protocol::Reply;
use crate::services::commandlog::{Kind, Log};
use crate::services::latency::{Merged, Series};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A GET's count: -1 for all, else at least 0 (Redis's and Valkey's words).
fn log_count(arg: &[u8]) -> Result<Option<usize>, CmdError> {
    let bad = || CmdError::msg("ERR count should be greater than or equal to -1");
    match parse_int(arg).map_err(|_| bad())? {
        -1 => Ok(None),
        n if n < -1 => Err(bad()),
        n => Ok(Some(n as usize)),
    }
}

/// A log's entries in SLOWLOG GET's layout (COMMANDLOG GET's too).
fn reply_entries(reply: &mut Reply, log: &Log, count: Option<usize>) {
    log.with(count, |entries| {
        let entries: Vec<_> = entries.collect();
        reply.array(entries.len());
        for e in entries {
            reply.array(6);
            reply.int(e.id as i64);
            reply.int(e.time);
            reply.int(e.value as i64);
            reply.array(e.args.len());
            for a in &e.args {
                reply.bulk(a);
            }
            reply.bulk(e.addr.as_bytes());
            reply.bulk(&e.name);
        }
    });
}

// SLOWLOG GET [count]
pub fn slowlog_get(ctx: &mut Ctx) -> CmdResult {
    let count = match ctx.args.len() {
        2 => Some(10),
        3 => log_count(ctx.arg(2))?,
        _ => {
            return Err(CmdError::msg(
                "ERR unknown subcommand or wrong number of arguments for 'GET'. Try SLOWLOG HELP.",
            ))
        }
    };
    reply_entries(ctx.reply, &ctx.srv.commandlog.slow, count);
    Ok(())
}

// SLOWLOG LEN
pub fn slowlog_len(ctx: &mut Ctx) -> CmdResult {
    ctx.reply.int(ctx.srv.commandlog.slow.len() as i64);
    Ok(())
}

// SLOWLOG RESET
pub fn slowlog_reset(ctx: &mut Ctx) -> CmdResult {
    ctx.srv.commandlog.slow.reset();
    ctx.reply.ok();
    Ok(())
}

/// COMMANDLOG's type argument, or Valkey's error.
fn log_kind(arg: &[u8]) -> Result<Kind, CmdError> {
    Kind::parse(arg)
        .ok_or_else(|| CmdError::msg("ERR type should be one of the following: slow, large-request, large-reply"))
}

// COMMANDLOG GET count type (Valkey 8.1)
pub fn commandlog_get(ctx: &mut Ctx) -> CmdResult {
    let count = log_count(ctx.arg(2))?;
    let kind = log_kind(ctx.arg(3))?;
    reply_entries(ctx.reply, ctx.srv.commandlog.get(kind), count);
    Ok(())
}

// COMMANDLOG LEN type
pub fn commandlog_len(ctx: &mut Ctx) -> CmdResult {
    let kind = log_kind(ctx.arg(2))?;
    ctx.reply.int(ctx.srv.commandlog.get(kind).len() as i64);
    Ok(())
}

// COMMANDLOG RESET type
pub fn commandlog_reset(ctx: &mut Ctx) -> CmdResult {
    let kind = log_kind(ctx.arg(2))?;
    ctx.srv.commandlog.get(kind).reset();
    ctx.reply.ok();
    Ok(())
}

// COMMANDLOG HELP
pub fn commandlog_help(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() == 1 {
        return Err(CmdError::Arity("commandlog".into()));
    }
    help_reply(
        ctx,
        "COMMANDLOG",
        &[
            "GET <count> <type>",
            "    Return top <count> entries of the specified <type> from the commandlog (-1 mean all).",
            "    Entries are made of:",
            "    id, timestamp,",
            "        time in microseconds for type of slow,",
            "        or size in bytes for type of large-request,",
            "        or size in bytes for type of large-reply",
            "    arguments array, client IP and port,",
            "    client name",
            "LEN <type>",
            "    Return the length of the specified type of commandlog.",
            "RESET <type>",
            "    Reset the specified type of commandlog.",
        ],
    );
    Ok(())
}

// SLOWLOG HELP
pub fn slowlog_help(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() == 1 {
        return Err(CmdError::Arity("slowlog".into()));
    }
    help_reply(
        ctx,
        "SLOWLOG",
        &[
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ],
    );
    Ok(())
}

// LATENCY HELP
pub fn latency_help(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() == 1 {
        return Err(CmdError::Arity("latency".into()));
    }
    help_reply(
        ctx,
        "LATENCY",
        &[
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
        ],
    );
    Ok(())
}

// LATENCY LATEST
pub fn latency_latest(ctx: &mut Ctx) -> CmdResult {
    let reply = &mut *ctx.reply;
    ctx.srv.latency.with(|order, map| {
        reply.array(order.len());
        for name in order {
            let s = &map[name];
            let last = s.latest();
            reply.array(4);
            reply.bulk(name.as_bytes());
            reply.int(last.time);
            reply.int(last.ms as i64);
            reply.int(s.max as i64);
        }
    });
    Ok(())
}

// LATENCY HISTORY event
pub fn latency_history(ctx: &mut Ctx) -> CmdResult {
    let name = String::from_utf8_lossy(ctx.arg(2)).into_owned();
    let reply = &mut *ctx.reply;
    ctx.srv.latency.with(|_, map| {
        let samples = map.get(&name).map(|s| s.samples()).unwrap_or_default();
        reply.array(samples.len());
        for s in samples {
            reply.array(2);
            reply.int(s.time);
            reply.int(s.ms as i64);
        }
    });
    Ok(())
}

// LATENCY RESET [event [event ...]]
pub fn latency_reset(ctx: &mut Ctx) -> CmdResult {
    let n = ctx.srv.latency.reset(&ctx.args[2..]);
    ctx.reply.int(n as i64);
    Ok(())
}

/// An age as LATENCY GRAPH labels it: `12s`, `3m`, `2h`, `1d`.
fn age_label(secs: i64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

/// Redis's sparkline for LATENCY GRAPH: four rows of `_o#` (with `|` below a full cell), one
/// column per sample, then each sample's age written downwards; 80 columns per band.
fn graph(event: &str, s: &Series, now: i64) -> String {
    let samples = s.samples();
    let (min, max) = samples.iter().fold((u64::MAX, 0), |(lo, hi), x| (lo.min(x.ms), hi.max(x.ms)));
    let mut out = format!("{event} - high {max} ms, low {min} ms (all time high {} ms)\n", s.max);
    out.push_str(&"-".repeat(80));
    out.push('\n');
    const ROWS: i64 = 4;
    let relmax = if max == min { 1 } else { max - min };
    let steps: Vec<i64> = samples.iter().map(|x| (((x.ms - min) * 12 / relmax) as i64).clamp(0, 11)).collect();
    let labels: Vec<Vec<char>> = samples.iter().map(|x| age_label(now - x.time).chars().collect()).collect();
    for (band, chunk) in steps.chunks(80).enumerate() {
        if band > 0 {
            out.push('\n');
        }
        let lab = &labels[band * 80..band * 80 + chunk.len()];
        for r in 0..ROWS {
            for &st in chunk {
                let i = st - (ROWS - r - 1) * 3;
                out.push(match i {
                    0 => '_',
                    1 => 'o',
                    2 => '#',
                    i if i >= 3 => '|',
                    _ => ' ',
                });
            }
            out.push('\n');
        }
        out.push_str(&" ".repeat(chunk.len()));
        out.push('\n');
        let deepest = lab.iter().map(|l| l.len()).max().unwrap_or(0);
        for row in 0..deepest {
            for l in lab {
                out.push(*l.get(row).unwrap_or(&' '));
            }
            out.push('\n');
        }
    }
    out
}

// LATENCY GRAPH event
pub fn latency_graph(ctx: &mut Ctx) -> CmdResult {
    let name = String::from_utf8_lossy(ctx.arg(2)).into_owned();
    let now = ctx.ks.now / 1000;
    let text = ctx.srv.latency.with(|_, map| map.get(&name).map(|s| graph(&name, s, now)));
    let text = text.ok_or_else(|| CmdError::msg(format!("ERR No samples available for event '{name}'")))?;
    ctx.reply.verbatim("txt", text.as_bytes());
    Ok(())
}

// LATENCY DOCTOR
pub fn latency_doctor(ctx: &mut Ctx) -> CmdResult {
    let threshold = ctx.srv.config.hot.latency_monitor_ms.load(Ordering::Relaxed);
    let slower = ctx.srv.config.hot.slowlog_slower_than.load(Ordering::Relaxed);
    let now = ctx.ks.now / 1000;
    let text = ctx.srv.latency.with(|order, map| doctor(order, map, threshold, slower, now));
    ctx.reply.verbatim("txt", text.as_bytes());
    Ok(())
}

/// The LATENCY DOCTOR report: per event its spike count, average, mean deviation and period,
/// then Redis's advice for the events Atoll records (`command`, `fast-command`).
fn doctor(
    order: &[String],
    map: &std::collections::HashMap<String, Series>,
    threshold: u64,
    slower: i64,
    now: i64,
) -> String {
    if order.is_empty() {
        return if threshold == 0 {
            "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n".into()
        } else {
            "Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n".into()
        };
    }
    let mut out = String::from(
        "Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n",
    );
    let (mut slow_cmds, mut fast_cmds) = (false, false);
    for (i, name) in order.iter().enumerate() {
        let s = &map[name];
        let samples = s.samples();
        let n = samples.len().max(1) as u64;
        let avg = samples.iter().map(|x| x.ms).sum::<u64>() / n;
        let mad = samples.iter().map(|x| x.ms.abs_diff(avg)).sum::<u64>() / n;
        let oldest = samples.first().map_or(now, |x| x.time);
        let period = (now - oldest).max(1) as f64 / n as f64;
        out.push_str(&format!(
            "{}. {}: {} latency spikes (average {}ms, mean deviation {}ms, period {:.2} sec). Worst all time event {}ms.\n",
            i + 1,
            name,
            samples.len(),
            avg,
            mad,
            period,
            s.max
        ));
        slow_cmds |= name == "command";
        fast_cmds |= name == "fast-command";
    }
    // Redis's advice for the events Atoll records, in Redis's order.
    let mut advice = String::new();
    if slow_cmds {
        if slower < 0 {
            advice.push_str(&format!("- There are latency issues with potentially slow commands you are using. Try to enable the Slow Log Redis feature using the command 'CONFIG SET slowlog-log-slower-than {}'. If the Slow log is disabled Redis is not able to log slow commands execution for you.\n", threshold * 1000));
        } else if (slower / 1000) as u64 > threshold {
            advice.push_str(&format!("- Your current Slow Log configuration only logs events that are slower than your configured latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than {}'.\n", threshold * 1000));
        }
        advice.push_str("- Check your Slow Log to understand what are the commands you are running which are too slow to execute. Please check https://redis.io/commands/slowlog for more information.\n");
    }
    if fast_cmds {
        advice.push_str("- The system is slow to execute Redis code paths not containing system calls. This usually means the system does not provide Redis CPU time to run for long periods. You should try to:\n  1) Lower the system load.\n  2) Use a computer / VM just for Redis if you are running other software in the same system.\n  3) Check if you have a \"noisy neighbour\" problem.\n  4) Check with 'redis-cli --intrinsic-latency 100' what is the intrinsic latency in your system.\n  5) Check if the problem is allocator-related by recompiling Redis with MALLOC=libc, if you are using Jemalloc. However this may create fragmentation problems.\n");
    }
    if slow_cmds {
        advice.push_str("- Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking operation. If you have very large objects that are often deleted, expired, or evicted, try to fragment those objects into multiple smaller objects.\n");
    }
    if advice.is_empty() {
        out.push_str("\nWhile there are latency events logged, I'm not able to suggest any easy fix. Please use the Redis community to get some help, providing this report in your help request.\n");
    } else {
        out.push_str("\nI have a few advices for you:\n\n");
        out.push_str(&advice);
    }
    out
}

/// A command's histogram merged over the workers, if it was called since the last reset.
pub fn merged_histogram(srv: &Server, c: &Command) -> Option<Merged> {
    Merged::of(srv.stats.workers.iter().filter_map(|w| w.cmds[c.id].hist.get()))
}

// LATENCY HISTOGRAM [command ...]
pub fn latency_histogram(ctx: &mut Ctx) -> CmdResult {
    let srv = ctx.srv;
    let mut picked: Vec<(Arc<Command>, Merged)> = Vec::new();
    let add = |c: &Arc<Command>, out: &mut Vec<(Arc<Command>, Merged)>| {
        if let Some(m) = merged_histogram(srv, c) {
            out.push((c.clone(), m));
        }
    };
    if ctx.args.len() == 2 {
        let mut all: Vec<&Arc<Command>> = srv.table.all.iter().collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        for c in all {
            add(c, &mut picked);
        }
    } else {
        for name in &ctx.args[2..] {
            let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
            if let Some(c) = srv.table.all.iter().find(|c| c.name == lower) {
                add(c, &mut picked);
                for sub in &c.subcommands {
                    add(sub, &mut picked);
                }
            }
        }
    }
    ctx.reply.map(picked.len());
    for (c, m) in picked {
        ctx.reply.bulk(c.name.as_bytes());
        ctx.reply.map(2);
        ctx.reply.bulk(b"calls");
        ctx.reply.int(m.total as i64);
        ctx.reply.bulk(b"histogram_usec");
        let buckets = m.usec_buckets();
        ctx.reply.map(buckets.len());
        for (us, n) in buckets {
            ctx.reply.int(us as i64);
            ctx.reply.int(n as i64);
        }
    }
    Ok(())
}
