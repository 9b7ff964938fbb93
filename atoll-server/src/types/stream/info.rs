//! XINFO: STREAM [FULL], GROUPS, CONSUMERS, HELP, with Redis 7.2's fields.

use super::group::reply_help;
use super::*;
use crate::exec::*;

/// The stream for XINFO (a missing key is "no such key") and the reply builder, borrowed
/// side by side.
fn info_stream<'a>(ctx: &'a mut Ctx) -> Result<(&'a mut Stream, &'a mut Reply), CmdError> {
    let key = ctx.arg(2);
    let s = ctx.ks.read::<Stream>(key)?.ok_or(CmdError::NoSuchKey)?;
    Ok((s, &mut *ctx.reply))
}

fn reply_opt_int(reply: &mut Reply, v: Option<i64>) {
    match v {
        Some(v) => reply.int(v),
        None => reply.null(),
    }
}

fn entries_read(g: &Group) -> Option<i64> {
    (g.entries_read != ENTRIES_READ_INVALID).then_some(g.entries_read)
}

// XINFO STREAM key [FULL [COUNT count]]
pub fn xinfo_stream(ctx: &mut Ctx) -> CmdResult {
    let argc = ctx.args.len();
    // COUNT 0 means everything; the default keeps a FULL reply bounded.
    let (full, count) = match argc {
        3 => (false, 0),
        4 if eq_ic(ctx.arg(3), "FULL") => (true, 10),
        6 if eq_ic(ctx.arg(3), "FULL") && eq_ic(ctx.arg(4), "COUNT") => (true, ctx.arg_i64(5)?.max(0) as usize),
        _ => {
            return Err(CmdError::msg(format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try XINFO HELP.",
                String::from_utf8_lossy(ctx.arg(1))
            )))
        }
    };
    let (s, reply) = info_stream(ctx)?;
    reply.map(if full { 9 } else { 10 });
    reply.bulk(b"length");
    reply.int(s.length as i64);
    reply.bulk(b"radix-tree-keys");
    reply.int(s.node_count() as i64);
    reply.bulk(b"radix-tree-nodes");
    reply.int(s.rax_node_count() as i64);
    reply.bulk(b"last-generated-id");
    reply_id(reply, s.last_id);
    reply.bulk(b"max-deleted-entry-id");
    reply_id(reply, s.max_deleted_id);
    reply.bulk(b"entries-added");
    reply.int(s.entries_added as i64);
    reply.bulk(b"recorded-first-entry-id");
    reply_id(reply, s.first_id);
    if !full {
        reply.bulk(b"groups");
        reply.int(s.groups.len() as i64);
        for (name, rev) in [(&b"first-entry"[..], false), (&b"last-entry"[..], true)] {
            reply.bulk(name);
            match s.range(StreamId::MIN, StreamId::MAX, rev, 1).first() {
                Some(e) => reply_entry(reply, e),
                None => reply.null(),
            }
        }
        return Ok(());
    }
    reply.bulk(b"entries");
    reply_entries(reply, &s.range(StreamId::MIN, StreamId::MAX, false, count));
    let take = if count == 0 { usize::MAX } else { count };
    reply.bulk(b"groups");
    reply.array(s.groups.len());
    for (name, g) in &s.groups {
        reply.map(7);
        reply.bulk(b"name");
        reply.bulk(name);
        reply.bulk(b"last-delivered-id");
        reply_id(reply, g.last_id);
        reply.bulk(b"entries-read");
        reply_opt_int(reply, entries_read(g));
        reply.bulk(b"lag");
        reply_opt_int(reply, s.group_lag(g));
        reply.bulk(b"pel-count");
        reply.int(g.pel.len() as i64);
        reply.bulk(b"pending");
        let pel: Vec<_> = g.pel.iter().take(take).collect();
        reply.array(pel.len());
        for (id, n) in pel {
            reply.array(4);
            reply_id(reply, *id);
            reply.bulk(&n.consumer);
            reply.int(n.delivery_time);
            reply.int(n.delivery_count as i64);
        }
        reply.bulk(b"consumers");
        reply.array(g.consumers.len());
        for (cname, c) in &g.consumers {
            reply.map(5);
            reply.bulk(b"name");
            reply.bulk(cname);
            reply.bulk(b"seen-time");
            reply.int(c.seen_time);
            reply.bulk(b"active-time");
            reply.int(c.active_time);
            reply.bulk(b"pel-count");
            reply.int(c.pel.len() as i64);
            reply.bulk(b"pending");
            let pel: Vec<_> = c.pel.iter().take(take).collect();
            reply.array(pel.len());
            for id in pel {
                let n = &g.pel[id];
                reply.array(3);
                reply_id(reply, *id);
                reply.int(n.delivery_time);
                reply.int(n.delivery_count as i64);
            }
        }
    }
    Ok(())
}

// XINFO GROUPS key
pub fn xinfo_groups(ctx: &mut Ctx) -> CmdResult {
    let (s, reply) = info_stream(ctx)?;
    reply.array(s.groups.len());
    for (name, g) in &s.groups {
        reply.map(6);
        reply.bulk(b"name");
        reply.bulk(name);
        reply.bulk(b"consumers");
        reply.int(g.consumers.len() as i64);
        reply.bulk(b"pending");
        reply.int(g.pel.len() as i64);
        reply.bulk(b"last-delivered-id");
        reply_id(reply, g.last_id);
        reply.bulk(b"entries-read");
        reply_opt_int(reply, entries_read(g));
        reply.bulk(b"lag");
        reply_opt_int(reply, s.group_lag(g));
    }
    Ok(())
}

// XINFO CONSUMERS key group
pub fn xinfo_consumers(ctx: &mut Ctx) -> CmdResult {
    let (key, gname) = (ctx.arg(2), ctx.arg(3));
    let now = ctx.ks.now;
    let (s, reply) = info_stream(ctx)?;
    let Some(g) = s.groups.get(gname) else {
        return Err(CmdError::msg(format!(
            "NOGROUP No such consumer group '{}' for key name '{}'",
            String::from_utf8_lossy(gname),
            String::from_utf8_lossy(key)
        )));
    };
    reply.array(g.consumers.len());
    for (name, c) in &g.consumers {
        // 7.2: `idle` is since last seen, `inactive` since last successful read or claim.
        reply.map(4);
        reply.bulk(b"name");
        reply.bulk(name);
        reply.bulk(b"pending");
        reply.int(c.pel.len() as i64);
        reply.bulk(b"idle");
        reply.int((now - c.seen_time).max(0));
        reply.bulk(b"inactive");
        reply.int(if c.active_time != -1 { now - c.active_time } else { -1 });
    }
    Ok(())
}

const XINFO_HELP: &[&str] = &[
    "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
    "HELP",
    "    Print this help.",
];

// XINFO HELP
pub fn xinfo_help(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() != 2 || !eq_ic(ctx.arg(1), "HELP") {
        return Err(CmdError::msg(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try XINFO HELP.",
            String::from_utf8_lossy(ctx.arg(1))
        )));
    }
    reply_help(ctx.reply, XINFO_HELP);
    Ok(())
}
