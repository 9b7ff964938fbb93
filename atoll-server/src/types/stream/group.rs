//! Consumer groups: XGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, and the delivery half of
//! XREADGROUP.

use super::*;
use crate::engine::Value;
use crate::exec::*;
use crate::services::notify;

fn lossy(b: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(b)
}

fn nogroup(key: &[u8], group: &[u8]) -> CmdError {
    CmdError::msg(format!("NOGROUP No such key '{}' or consumer group '{}'", lossy(key), lossy(group)))
}

/// XREADGROUP with `>`: delivers entries after the group's last-delivered ID, adds them to
/// the PELs (unless NOACK) and propagates each delivery as XCLAIM (which carries the group's
/// position: LASTID) or, with NOACK, the new position as XGROUP SETID (Redis's
/// `streamReplyWithRange` with a group).
pub(crate) fn deliver_new(
    ks: &mut KsView,
    reply: &mut Reply,
    key: &[u8],
    gname: &[u8],
    cname: &[u8],
    count: usize,
    noack: bool,
) {
    let now = ks.now;
    let Ok(Some(s)) = ks.read::<Stream>(key) else { return };
    let start = s.groups[gname].last_id.incr();
    let ids: Vec<StreamId> = match start {
        Some(start) => s.range(start, StreamId::MAX, false, count).iter().map(|e| e.id).collect(),
        None => Vec::new(),
    };
    reply.array(ids.len());
    let mut effects = Vec::new();
    for &id in &ids {
        reply_entry(reply, s.get(id).unwrap());
        s.advance_group(gname, id);
        let g = s.groups.get_mut(gname).unwrap();
        if !noack {
            let nack = Nack { consumer: cname.to_vec(), delivery_time: now, delivery_count: 1 };
            // The entry may be pending for another consumer already (after XGROUP SETID): it
            // moves to this one.
            if let Some(old) = g.pel.insert(id, nack.clone()) {
                if let Some(c) = g.consumers.get_mut(&old.consumer) {
                    c.pel.remove(&id);
                }
            }
            let c = g.consumers.get_mut(cname).unwrap();
            c.pel.insert(id);
            c.active_time = now;
            effects.push((id, nack, g.last_id));
        }
    }
    let g = s.groups[gname].clone_position();
    for (id, nack, last) in effects {
        let pos = Group::new(last, g.entries_read);
        propagate_xclaim(ks, key, gname, &pos, id, &nack);
    }
    // With NOACK no XCLAIM carries the group's new position: Redis 7.2 sends it alone then.
    if noack && !ids.is_empty() {
        propagate_group_id(ks, key, gname, &g);
    }
}

impl Group {
    /// The group's position only (last ID and counter), for building effects.
    fn clone_position(&self) -> Group {
        Group::new(self.last_id, self.entries_read)
    }
}

/// XREADGROUP with an ID: the consumer's own pending entries after `after`, each delivery
/// counted again (a deleted entry shows as `[id, nil]`).
pub(crate) fn reply_history(
    ks: &mut KsView,
    reply: &mut Reply,
    key: &[u8],
    gname: &[u8],
    cname: &[u8],
    after: StreamId,
    count: usize,
) {
    let now = ks.now;
    let Ok(Some(s)) = ks.read::<Stream>(key) else { return };
    let Some(start) = after.incr() else {
        reply.array(0);
        return;
    };
    let g = s.groups.get_mut(gname).unwrap();
    let ids: Vec<StreamId> =
        g.consumers[cname].pel.range(start..).take(if count == 0 { usize::MAX } else { count }).copied().collect();
    reply.array(ids.len());
    for id in ids {
        match s.get(id) {
            Some(e) => {
                reply_entry(reply, e);
                let n = s.groups.get_mut(gname).unwrap().pel.get_mut(&id).unwrap();
                n.delivery_time = now;
                n.delivery_count += 1;
            }
            None => {
                reply.array(2);
                reply_id(reply, id);
                reply.null_array();
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// XGROUP
// ---------------------------------------------------------------------------------------------

fn subcommand_syntax(ctx: &Ctx) -> CmdError {
    CmdError::msg(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try XGROUP HELP.",
        lossy(ctx.arg(1))
    ))
}

/// Common start of the XGROUP subcommands with a key (Redis's `xgroupCommand` preamble):
/// WRONGTYPE, then the key must exist (unless MKSTREAM), then the group (for some).
fn xgroup_lookup(ctx: &mut Ctx, mkstream: bool, need_group: bool) -> Result<bool, CmdError> {
    let (key, gname) = (ctx.arg(2), ctx.arg(3));
    let s = ctx.ks.write::<Stream>(key)?;
    let exists = s.is_some();
    if !exists && !mkstream {
        return Err(CmdError::msg(
            "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the \
             MKSTREAM option to create an empty stream automatically.",
        ));
    }
    if need_group && !s.is_some_and(|s| s.groups.contains_key(gname)) {
        return Err(CmdError::msg(format!(
            "NOGROUP No such consumer group '{}' for key name '{}'",
            lossy(gname),
            lossy(key)
        )));
    }
    Ok(exists)
}

fn parse_entries_read(arg: &[u8]) -> Result<i64, CmdError> {
    let n = parse_int(arg)?;
    if n < 0 && n != ENTRIES_READ_INVALID {
        return Err(CmdError::msg("ERR value for ENTRIESREAD must be positive or -1"));
    }
    Ok(n)
}

// XGROUP CREATE key group <id | $> [MKSTREAM] [ENTRIESREAD entries-read]
pub fn xgroup_create(ctx: &mut Ctx) -> CmdResult {
    let mut mkstream = false;
    let mut entries_read = ENTRIES_READ_INVALID;
    let mut i = 5;
    while i < ctx.args.len() {
        if eq_ic(ctx.arg(i), "MKSTREAM") {
            mkstream = true;
            i += 1;
        } else if eq_ic(ctx.arg(i), "ENTRIESREAD") && i + 1 < ctx.args.len() {
            entries_read = parse_entries_read(ctx.arg(i + 1))?;
            i += 2;
        } else {
            return Err(subcommand_syntax(ctx));
        }
    }
    let exists = xgroup_lookup(ctx, mkstream, false)?;
    if ctx.args.len() > 8 {
        return Err(subcommand_syntax(ctx));
    }
    let (key, gname, idarg) = (ctx.arg(2), ctx.arg(3), ctx.arg(4));
    let id = if idarg == b"$" {
        match ctx.ks.write::<Stream>(key)? {
            Some(s) => s.last_id,
            None => StreamId::MIN,
        }
    } else {
        parse_id(idarg, 0)?
    };
    if !exists {
        ctx.ks.insert_new(key, Value::Stream(Box::default()));
        ctx.ks.modified(key);
    }
    let s = ctx.ks.write::<Stream>(key)?.unwrap();
    if s.groups.contains_key(gname) {
        return Err(CmdError::msg("BUSYGROUP Consumer Group name already exists"));
    }
    s.groups.insert(gname.to_vec(), Group::new(id, entries_read));
    ctx.ks.modified(key);
    ctx.ks.note(notify::STREAM, "xgroup-create", key);
    ctx.reply.ok();
    Ok(())
}

// XGROUP SETID key group <id | $> [ENTRIESREAD entries-read]
pub fn xgroup_setid(ctx: &mut Ctx) -> CmdResult {
    xgroup_lookup(ctx, false, true)?;
    let n = ctx.args.len();
    if n != 5 && n != 7 {
        return Err(subcommand_syntax(ctx));
    }
    let (key, gname, idarg) = (ctx.arg(2), ctx.arg(3), ctx.arg(4));
    let s = ctx.ks.write::<Stream>(key)?.unwrap();
    let id = if idarg == b"$" { s.last_id } else { parse_id(idarg, 0)? };
    let mut entries_read = ENTRIES_READ_INVALID;
    if n == 7 {
        if !eq_ic(ctx.arg(5), "ENTRIESREAD") {
            return Err(subcommand_syntax(ctx));
        }
        entries_read = parse_entries_read(ctx.arg(6))?;
    }
    let s = ctx.ks.write::<Stream>(key)?.unwrap();
    let g = s.groups.get_mut(gname).unwrap();
    g.last_id = id;
    g.entries_read = entries_read;
    ctx.ks.modified(key);
    ctx.ks.note(notify::STREAM, "xgroup-setid", key);
    ctx.reply.ok();
    Ok(())
}

// XGROUP DESTROY key group
pub fn xgroup_destroy(ctx: &mut Ctx) -> CmdResult {
    xgroup_lookup(ctx, false, false)?;
    let (key, gname) = (ctx.arg(2), ctx.arg(3));
    let s = ctx.ks.write::<Stream>(key)?.unwrap();
    if s.groups.remove(gname).is_some() {
        ctx.ks.modified(key);
        ctx.ks.note(notify::STREAM, "xgroup-destroy", key);
        // Clients blocked in XREADGROUP on this group get their error now.
        ctx.ks.signal_ready(key);
        ctx.reply.int(1);
    } else {
        ctx.reply.int(0);
    }
    Ok(())
}

// XGROUP CREATECONSUMER key group consumer
pub fn xgroup_createconsumer(ctx: &mut Ctx) -> CmdResult {
    xgroup_lookup(ctx, false, true)?;
    let (key, gname, cname) = (ctx.arg(2), ctx.arg(3), ctx.arg(4));
    let now = ctx.ks.now;
    let s = ctx.ks.write::<Stream>(key)?.unwrap();
    let created = s.groups.get_mut(gname).unwrap().create_consumer(cname, now);
    if created {
        ctx.ks.modified(key);
        ctx.ks.note(notify::STREAM, "xgroup-createconsumer", key);
    }
    ctx.reply.int(created as i64);
    Ok(())
}

// XGROUP DELCONSUMER key group consumer
pub fn xgroup_delconsumer(ctx: &mut Ctx) -> CmdResult {
    xgroup_lookup(ctx, false, true)?;
    let (key, gname, cname) = (ctx.arg(2), ctx.arg(3), ctx.arg(4));
    let s = ctx.ks.write::<Stream>(key)?.unwrap();
    let g = s.groups.get_mut(gname).unwrap();
    let mut pending = 0;
    if let Some(c) = g.consumers.remove(cname) {
        // Its pending entries leave the group PEL too.
        pending = c.pel.len();
        for id in c.pel {
            g.pel.remove(&id);
        }
        ctx.ks.modified(key);
        ctx.ks.note(notify::STREAM, "xgroup-delconsumer", key);
    }
    ctx.reply.int(pending as i64);
    Ok(())
}

const XGROUP_HELP: &[&str] = &[
    "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
    "HELP",
    "    Print this help.",
];

pub(crate) fn reply_help(reply: &mut Reply, lines: &[&str]) {
    reply.array(lines.len());
    for l in lines {
        reply.simple(l);
    }
}

// XGROUP HELP
pub fn xgroup_help(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() != 2 || !eq_ic(ctx.arg(1), "HELP") {
        return Err(subcommand_syntax(ctx));
    }
    reply_help(ctx.reply, XGROUP_HELP);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// XACK, XPENDING
// ---------------------------------------------------------------------------------------------

// XACK key group id [id ...]
pub fn xack(ctx: &mut Ctx) -> CmdResult {
    let (key, gname) = (ctx.arg(1), ctx.arg(2));
    let has_group = match ctx.ks.write::<Stream>(key)? {
        Some(s) => s.groups.contains_key(gname),
        None => false,
    };
    if !has_group {
        ctx.reply.int(0);
        return Ok(());
    }
    // All IDs are checked first: acknowledging is all or nothing.
    let ids = ctx.args[3..].iter().map(|a| parse_strict_id(a)).collect::<Result<Vec<_>, _>>()?;
    let s = ctx.ks.write::<Stream>(key)?.unwrap();
    let g = s.groups.get_mut(gname).unwrap();
    let acked = ids.into_iter().filter(|&id| g.ack(id)).count();
    if acked > 0 {
        ctx.ks.modified(key);
        ctx.ks.dirty += acked as u64 - 1;
    }
    ctx.reply.int(acked as i64);
    Ok(())
}

// XPENDING key group [[IDLE min-idle-time] start end count [consumer]]
pub fn xpending(ctx: &mut Ctx) -> CmdResult {
    let argc = ctx.args.len();
    if argc != 3 && !(6..=9).contains(&argc) {
        return Err(CmdError::Syntax);
    }
    let (key, gname) = (ctx.arg(1), ctx.arg(2));
    let mut range = None;
    if argc >= 6 {
        let mut at = 3;
        let mut minidle = 0;
        if eq_ic(ctx.arg(3), "IDLE") {
            minidle = ctx.arg_i64(4)?;
            if argc < 8 {
                return Err(CmdError::Syntax);
            }
            at += 2;
        }
        let count = ctx.arg_i64(at + 2)?.max(0);
        let start = parse_range_start(ctx.arg(at))?;
        let end = parse_range_end(ctx.arg(at + 1))?;
        let consumer = ctx.args.get(at + 3).copied();
        range = Some((minidle, start, end, count, consumer));
    }
    let now = ctx.ks.now;
    let s = ctx.ks.read::<Stream>(key)?;
    let Some(g) = s.and_then(|s| s.groups.get(gname)) else { return Err(nogroup(key, gname)) };
    let reply = &mut *ctx.reply;
    match range {
        None => {
            reply.array(4);
            reply.int(g.pel.len() as i64);
            if g.pel.is_empty() {
                reply.null();
                reply.null();
                reply.null_array();
            } else {
                reply_id(reply, *g.pel.keys().next().unwrap());
                reply_id(reply, *g.pel.keys().next_back().unwrap());
                let busy: Vec<_> = g.consumers.iter().filter(|(_, c)| !c.pel.is_empty()).collect();
                reply.array(busy.len());
                for (name, c) in busy {
                    reply.array(2);
                    reply.bulk(name);
                    reply.bulk_i64(c.pel.len() as i64);
                }
            }
        }
        Some((minidle, start, end, count, consumer)) => {
            let ids: Vec<StreamId> = match consumer {
                Some(cn) => match g.consumers.get(cn) {
                    Some(c) if start <= end => c.pel.range(start..=end).copied().collect(),
                    Some(_) => Vec::new(),
                    None => {
                        reply.array(0);
                        return Ok(());
                    }
                },
                None if start <= end => g.pel.range(start..=end).map(|(id, _)| *id).collect(),
                None => Vec::new(),
            };
            let mut out = Vec::new();
            for id in ids {
                if out.len() as i64 >= count {
                    break;
                }
                let n = &g.pel[&id];
                if minidle != 0 && now - n.delivery_time < minidle {
                    continue;
                }
                out.push((id, n));
            }
            reply.array(out.len());
            for (id, n) in out {
                reply.array(4);
                reply_id(reply, id);
                reply.bulk(&n.consumer);
                reply.int((now - n.delivery_time).max(0));
                reply.int(n.delivery_count as i64);
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// XCLAIM, XAUTOCLAIM
// ---------------------------------------------------------------------------------------------

/// XCLAIM/XAUTOCLAIM's consumer: created if missing (true then), and seen now.
fn touch_consumer(g: &mut Group, cname: &[u8], now: i64) -> bool {
    let created = g.create_consumer(cname, now);
    if let Some(c) = g.consumers.get_mut(cname) {
        c.seen_time = now;
    }
    created
}

/// Gives a pending entry to `cname` (creating the consumer if needed), with its new delivery
/// time and count. Returns the updated NACK.
fn claim_one(g: &mut Group, id: StreamId, cname: &[u8], time: i64, count: Option<u64>, now: i64) -> Nack {
    g.create_consumer(cname, now);
    let n = g.pel.get_mut(&id).unwrap();
    let old = std::mem::replace(&mut n.consumer, cname.to_vec());
    n.delivery_time = time;
    if let Some(c) = count {
        n.delivery_count = c;
    }
    let nack = n.clone();
    if old != cname {
        if let Some(c) = g.consumers.get_mut(&old) {
            c.pel.remove(&id);
        }
    }
    let c = g.consumers.get_mut(cname).unwrap();
    c.pel.insert(id);
    c.active_time = now;
    nack
}

// XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME unix-time-milliseconds]
//     [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID lastid]
pub fn xclaim(ctx: &mut Ctx) -> CmdResult {
    let (key, gname, cname) = (ctx.arg(1), ctx.arg(2), ctx.arg(3));
    let now = ctx.ks.now;
    match ctx.ks.read::<Stream>(key)? {
        Some(s) if s.groups.contains_key(gname) => {}
        _ => return Err(nogroup(key, gname)),
    }
    let minidle =
        parse_int(ctx.arg(4)).map_err(|_| CmdError::msg("ERR Invalid min-idle-time argument for XCLAIM"))?.max(0);
    // IDs run until the first argument that is not one; options follow.
    let mut ids = Vec::new();
    let mut j = 5;
    while j < ctx.args.len() {
        match parse_strict_id(ctx.arg(j)) {
            Ok(id) => ids.push((id, j)),
            Err(_) => break,
        }
        j += 1;
    }
    let (mut force, mut justid) = (false, false);
    let mut delivery: Option<i64> = None;
    let mut retry: Option<i64> = None;
    let mut last_id = StreamId::MIN;
    while j < ctx.args.len() {
        let more = ctx.args.len() - 1 - j;
        let opt = ctx.arg(j);
        let int_opt = |j: usize, what: &str| {
            parse_int(ctx.arg(j)).map_err(|_| CmdError::msg(format!("ERR Invalid {what} option argument for XCLAIM")))
        };
        if eq_ic(opt, "FORCE") {
            force = true;
        } else if eq_ic(opt, "JUSTID") {
            justid = true;
        } else if eq_ic(opt, "IDLE") && more > 0 {
            j += 1;
            delivery = Some(now - int_opt(j, "IDLE")?);
        } else if eq_ic(opt, "TIME") && more > 0 {
            j += 1;
            delivery = Some(int_opt(j, "TIME")?);
        } else if eq_ic(opt, "RETRYCOUNT") && more > 0 {
            j += 1;
            retry = Some(int_opt(j, "RETRYCOUNT")?);
        } else if eq_ic(opt, "LASTID") && more > 0 {
            j += 1;
            last_id = parse_strict_id(ctx.arg(j))?;
        } else {
            return Err(CmdError::msg(format!("ERR Unrecognized XCLAIM option '{}'", lossy(opt))));
        }
        j += 1;
    }
    // A bogus delivery time (negative, or in the future) is taken as now.
    let delivery = match delivery {
        Some(t) if t >= 0 && t <= now => t,
        _ => now,
    };
    let s = ctx.ks.read::<Stream>(key)?.unwrap();
    let mut propagate_last = false;
    let created;
    {
        let g = s.groups.get_mut(gname).unwrap();
        if last_id > g.last_id {
            g.last_id = last_id;
            propagate_last = true;
        }
        // The consumer exists from here on, whether or not anything is claimed.
        created = touch_consumer(g, cname, now);
    }
    if created {
        ctx.ks.dirty += 1;
        ctx.ks.note(notify::STREAM, "xgroup-createconsumer", key);
    }
    let s = ctx.ks.read::<Stream>(key)?.unwrap();
    let mut out: Vec<StreamId> = Vec::new();
    let mut effects: Vec<(StreamId, Nack)> = Vec::new();
    for (id, _) in ids {
        let exists = s.exists(id);
        let g = s.groups.get_mut(gname).unwrap();
        if !exists {
            // The entry is gone: its PEL entry goes too.
            if let Some(n) = g.pel.get(&id).cloned() {
                g.ack(id);
                effects.push((id, n));
                propagate_last = false;
            }
            continue;
        }
        let mut forced = false;
        if force && !g.pel.contains_key(&id) {
            g.pel.insert(id, Nack { consumer: Vec::new(), delivery_time: now, delivery_count: 0 });
            forced = true;
        }
        let Some(n) = g.pel.get(&id) else { continue };
        if !forced && minidle > 0 && now - n.delivery_time < minidle {
            continue;
        }
        let count = match retry {
            Some(r) if r >= 0 => Some(r as u64),
            _ if justid => None,
            _ => Some(n.delivery_count + 1),
        };
        let nack = claim_one(g, id, cname, delivery, count, now);
        effects.push((id, nack));
        propagate_last = false;
        out.push(id);
    }
    let pos = s.groups[gname].clone_position();
    ctx.reply.array(out.len());
    for &id in &out {
        if justid {
            reply_id(ctx.reply, id);
        } else {
            reply_entry(ctx.reply, s.get(id).unwrap());
        }
    }
    ctx.no_effect();
    let dirty = effects.len() as u64 + propagate_last as u64;
    for (id, nack) in &effects {
        propagate_xclaim(&mut ctx.ks, key, gname, &pos, *id, nack);
    }
    if propagate_last {
        propagate_group_id(&mut ctx.ks, key, gname, &pos);
    }
    if dirty > 0 {
        ctx.ks.modified(key);
        ctx.ks.dirty += dirty - 1;
    }
    Ok(())
}

// XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]
pub fn xautoclaim(ctx: &mut Ctx) -> CmdResult {
    let (key, gname, cname) = (ctx.arg(1), ctx.arg(2), ctx.arg(3));
    let now = ctx.ks.now;
    let minidle =
        parse_int(ctx.arg(4)).map_err(|_| CmdError::msg("ERR Invalid min-idle-time argument for XAUTOCLAIM"))?.max(0);
    let start = parse_range_start(ctx.arg(5))?;
    let mut count: i64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < ctx.args.len() {
        let more = ctx.args.len() - 1 - j;
        if eq_ic(ctx.arg(j), "COUNT") && more > 0 {
            let max = i64::MAX / 16;
            count = match parse_int(ctx.arg(j + 1)) {
                Ok(c) if (1..=max).contains(&c) => c,
                _ => return Err(CmdError::msg("ERR COUNT must be > 0")),
            };
            j += 1;
        } else if eq_ic(ctx.arg(j), "JUSTID") {
            justid = true;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let s = match ctx.ks.read::<Stream>(key)? {
        Some(s) if s.groups.contains_key(gname) => s,
        _ => return Err(nogroup(key, gname)),
    };
    // The consumer exists from here on, whether or not anything is claimed.
    if touch_consumer(s.groups.get_mut(gname).unwrap(), cname, now) {
        ctx.ks.dirty += 1;
        ctx.ks.note(notify::STREAM, "xgroup-createconsumer", key);
    }
    let s = ctx.ks.read::<Stream>(key)?.unwrap();
    let mut attempts = count * 10;
    let mut claimed: Vec<StreamId> = Vec::new();
    let mut deleted: Vec<StreamId> = Vec::new();
    let mut effects: Vec<(StreamId, Nack)> = Vec::new();
    let mut cursor = start;
    let next: Option<StreamId>;
    loop {
        // The next PEL entry at or after the cursor.
        let Some((&id, n)) = s.groups[gname].pel.range(cursor..).next() else {
            next = None;
            break;
        };
        if attempts == 0 || count == 0 {
            next = Some(id);
            break;
        }
        attempts -= 1;
        cursor = match id.incr() {
            Some(c) => c,
            None => StreamId::MAX,
        };
        let n = n.clone();
        let exists = s.exists(id);
        let g = s.groups.get_mut(gname).unwrap();
        if !exists {
            g.ack(id);
            effects.push((id, n));
            deleted.push(id);
            count -= 1;
        } else if minidle == 0 || now - n.delivery_time >= minidle {
            let c = if justid { None } else { Some(n.delivery_count + 1) };
            let nack = claim_one(g, id, cname, now, c, now);
            effects.push((id, nack));
            claimed.push(id);
            count -= 1;
        }
        if id == StreamId::MAX {
            next = None;
            break;
        }
    }
    let pos = s.groups[gname].clone_position();
    let reply = &mut *ctx.reply;
    reply.array(3);
    reply_id(reply, next.unwrap_or_default());
    reply.array(claimed.len());
    for &id in &claimed {
        if justid {
            reply_id(reply, id);
        } else {
            reply_entry(reply, s.get(id).unwrap());
        }
    }
    reply.array(deleted.len());
    for &id in &deleted {
        reply_id(reply, id);
    }
    ctx.no_effect();
    for (id, nack) in &effects {
        propagate_xclaim(&mut ctx.ks, key, gname, &pos, *id, nack);
    }
    if !effects.is_empty() {
        ctx.ks.modified(key);
        ctx.ks.dirty += effects.len() as u64 - 1;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// XDELEX and XACKDEL (Redis 8.2)
// ---------------------------------------------------------------------------------------------

/// `[KEEPREF | DELREF | ACKED] IDS numids id …` from `from` on: the policy (one at most, the
/// same word repeated allowed) and the IDs, all parsed before anything changes. Redis's
/// reference lets the IDS block stand anywhere among the options.
fn parse_policy_ids(args: &[&[u8]], from: usize) -> Result<(RefPolicy, Vec<StreamId>), CmdError> {
    let mut policy = None;
    let mut ids = None;
    let mut i = from;
    while i < args.len() {
        let a = args[i];
        let p = if eq_ic(a, "KEEPREF") {
            Some(RefPolicy::KeepRef)
        } else if eq_ic(a, "DELREF") {
            Some(RefPolicy::DelRef)
        } else if eq_ic(a, "ACKED") {
            Some(RefPolicy::Acked)
        } else {
            None
        };
        if let Some(p) = p {
            if policy.is_some_and(|q| q != p) {
                return Err(CmdError::Syntax);
            }
            policy = Some(p);
            i += 1;
        } else if eq_ic(a, "IDS") && ids.is_none() {
            let n = parse_int(args.get(i + 1).ok_or(CmdError::Syntax)?)?;
            if n < 1 || (args.len() - i - 2) < n as usize {
                return Err(CmdError::msg("ERR Number of IDs must be a positive integer that matches the IDs given"));
            }
            let list = &args[i + 2..i + 2 + n as usize];
            ids = Some(list.iter().map(|a| parse_strict_id(a)).collect::<Result<Vec<_>, _>>()?);
            i += 2 + n as usize;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok((policy.unwrap_or(RefPolicy::KeepRef), ids.ok_or(CmdError::Syntax)?))
}

/// Deletes `id` under `policy`: 1 deleted, 2 kept (ACKED: some group has not read or not
/// acknowledged it), -1 not in the stream (DELREF still drops the groups' references). Also
/// says whether anything changed (an entry or a reference gone).
fn delete_with_policy(s: &mut Stream, id: StreamId, policy: RefPolicy) -> (i64, bool) {
    let mut refs_gone = false;
    if policy == RefPolicy::DelRef {
        for g in s.groups.values_mut() {
            refs_gone |= g.ack(id);
        }
    }
    if !s.exists(id) {
        return (-1, refs_gone);
    }
    if policy == RefPolicy::Acked && s.referenced(id) {
        return (2, refs_gone);
    }
    s.xdel(id);
    (1, true)
}

/// The epilogue of XDELEX and XACKDEL: the per-ID codes, the change counted, `xdel` raised when
/// an entry went.
fn policy_reply(ctx: &mut Ctx, key: &[u8], codes: &[i64], changed: bool) {
    ctx.reply.array(codes.len());
    for &c in codes {
        ctx.reply.int(c);
    }
    if codes.contains(&1) {
        ctx.ks.note(notify::STREAM, "xdel", key);
    }
    if changed {
        ctx.ks.modified(key);
    } else {
        ctx.no_effect();
    }
}

// XDELEX key [KEEPREF | DELREF | ACKED] IDS numids id [id ...]   (Redis 8.2)
//
// Per ID: 1 deleted, 2 not deleted (ACKED and a group still owes it), -1 not in the stream
// (every ID -1 without the key). Propagated as sent.
pub fn xdelex(ctx: &mut Ctx) -> CmdResult {
    delete_ids(ctx, None)
}

// XACKDEL key group [KEEPREF | DELREF | ACKED] IDS numids id [id ...]   (Redis 8.2)
//
// Acknowledges each ID in `group`, then deletes it as XDELEX does: 1 acknowledged (if pending)
// and deleted, 2 acknowledged but kept (ACKED and another group still owes it), -1 not in the
// stream. A missing key is -1 for every ID; a missing group is NOGROUP, as XREADGROUP's.
pub fn xackdel(ctx: &mut Ctx) -> CmdResult {
    let group = ctx.arg(2);
    delete_ids(ctx, Some(group))
}

/// XDELEX, and XACKDEL when `ack_in` names the group to acknowledge in first.
fn delete_ids(ctx: &mut Ctx, ack_in: Option<&[u8]>) -> CmdResult {
    let (policy, ids) = parse_policy_ids(ctx.args, if ack_in.is_some() { 3 } else { 2 })?;
    let key = ctx.arg(1);
    let Some(s) = ctx.ks.write::<Stream>(key)? else {
        policy_reply(ctx, key, &vec![-1; ids.len()], false);
        return Ok(());
    };
    if let Some(g) = ack_in.filter(|g| !s.groups.contains_key(*g)) {
        return Err(nogroup(key, g));
    }
    let mut changed = false;
    let mut codes = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(g) = ack_in {
            changed |= s.groups.get_mut(g).expect("checked").ack(id);
        }
        let (code, change) = delete_with_policy(s, id, policy);
        changed |= change;
        codes.push(code);
    }
    policy_reply(ctx, key, &codes, changed);
    Ok(())
}
