//! Stream commands without consumer groups, plus XREAD/XREADGROUP (which share one reader).

use super::*;
use crate::engine::Value;
use crate::exec::blocking::{deadline_from_ms, BlockRequest, Served};
use crate::exec::*;
use crate::services::notify;

fn node_limits(ctx: &Ctx) -> NodeLimits {
    let c = &ctx.srv.config;
    NodeLimits {
        max_bytes: c.int(crate::config::p::STREAM_NODE_MAX_BYTES).max(0) as usize,
        max_entries: c.int(crate::config::p::STREAM_NODE_MAX_ENTRIES).max(0) as usize,
    }
}

/// Parsed XADD/XTRIM options (Redis's `streamParseAddOrTrimArgsOrReply`).
struct AddTrim {
    trim: TrimArgs,
    /// Index of the MAXLEN/MINID value, for rewriting the effect.
    trim_arg_idx: usize,
    nomkstream: bool,
    /// XADD's explicit ID and whether its sequence was given.
    id: Option<(StreamId, bool)>,
    /// Index of the ID argument (XADD).
    id_idx: usize,
}

fn parse_add_trim(ctx: &Ctx, xadd: bool) -> Result<AddTrim, CmdError> {
    let args = ctx.args;
    let mut p = AddTrim {
        trim: TrimArgs { strategy: TrimStrategy::None, approx: false, limit: 0, policy: RefPolicy::KeepRef },
        trim_arg_idx: 0,
        nomkstream: false,
        id: None,
        id_idx: args.len(),
    };
    let mut limit: Option<i64> = None;
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = args[i];
        if xadd && opt == b"*" {
            p.id_idx = i;
            break;
        } else if (eq_ic(opt, "maxlen") || eq_ic(opt, "minid")) && more > 0 {
            if p.trim.strategy != TrimStrategy::None {
                return Err(CmdError::msg(
                    "ERR syntax error, MAXLEN and MINID options at the same time are not compatible",
                ));
            }
            p.trim.approx = false;
            let next = args[i + 1];
            if more >= 2 && next == b"~" {
                p.trim.approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            if eq_ic(opt, "maxlen") {
                let n = parse_int(args[i + 1])?;
                if n < 0 {
                    return Err(CmdError::msg("ERR The MAXLEN argument must be >= 0."));
                }
                p.trim.strategy = TrimStrategy::MaxLen(n as u64);
            } else {
                p.trim.strategy = TrimStrategy::MinId(parse_strict_id(args[i + 1])?);
            }
            i += 1;
            p.trim_arg_idx = i;
        } else if eq_ic(opt, "limit") && more > 0 {
            let n = parse_int(args[i + 1])?;
            if n < 0 {
                return Err(CmdError::msg("ERR The LIMIT argument must be >= 0."));
            }
            limit = Some(n);
            i += 1;
        } else if xadd && eq_ic(opt, "nomkstream") {
            p.nomkstream = true;
        } else if eq_ic(opt, "keepref") {
            // Redis 8.2: what trimming does to the consumer groups' references.
            p.trim.policy = RefPolicy::KeepRef;
        } else if eq_ic(opt, "delref") {
            p.trim.policy = RefPolicy::DelRef;
        } else if eq_ic(opt, "acked") {
            p.trim.policy = RefPolicy::Acked;
        } else if xadd {
            let how = IdParse { missing_seq: 0, strict: true, seq_star: true };
            p.id = Some(parse_id_full(opt, how)?);
            p.id_idx = i;
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if xadd && i >= args.len() {
        p.id_idx = args.len();
    }
    if limit.is_some_and(|l| l != 0) && p.trim.strategy == TrimStrategy::None {
        return Err(CmdError::msg("ERR syntax error, LIMIT cannot be used without specifying a trimming strategy"));
    }
    if !xadd && p.trim.strategy == TrimStrategy::None {
        return Err(CmdError::msg("ERR syntax error, XTRIM must be called with a trimming strategy"));
    }
    // Replayed from the AOF (Redis's `mustObeyClient`): the threshold was rewritten exact when
    // logged, so LIMIT is ignored rather than refused.
    if ctx.client.replaying {
        p.trim.limit = 0;
        return Ok(p);
    }
    match limit {
        Some(_) if !p.trim.approx => {
            return Err(CmdError::msg("ERR syntax error, LIMIT cannot be used without the special ~ option"));
        }
        Some(l) => p.trim.limit = l as u64,
        // Approximate trimming without LIMIT is bounded so one command cannot take too long.
        None if p.trim.approx => {
            let cfg = ctx.srv.config.int(crate::config::p::STREAM_NODE_MAX_ENTRIES).saturating_mul(100);
            p.trim.limit = if cfg <= 0 || cfg > 10000 { 10000 } else { cfg as u64 };
        }
        None => p.trim.limit = 0,
    }
    Ok(p)
}

/// After a limited (approximate) trim the effect must say exactly what happened: `~` becomes
/// `=` and the threshold becomes what is left (Redis's `streamRewriteTrimArgument`): the
/// length, or the first entry the trim did not look at — the first entry left under KEEPREF,
/// the maximal ID once the stream is empty (so the replica empties it too), and under ACKED
/// the point past the entries it kept because a group still owes them.
///
/// An ACKED trim by MAXLEN goes as that MINID too: it may pass whole nodes keeping entries a
/// group owes, which an exact `MAXLEN = <length left>` would not repeat on the replica (it
/// stops at the first node not wholly inside the trim).
fn rewrite_trim(argv: &mut [Vec<u8>], p: &AddTrim, s: &Stream, t: &Trimmed) {
    if p.trim.approx {
        argv[p.trim_arg_idx - 1] = b"=".to_vec();
        argv[p.trim_arg_idx] = match p.trim.strategy {
            TrimStrategy::MaxLen(_) if p.trim.policy != RefPolicy::Acked => i64_bytes(s.length as i64),
            TrimStrategy::MaxLen(_) => {
                argv[p.trim_arg_idx - 2] = b"MINID".to_vec();
                t.frontier.to_bytes()
            }
            _ => t.frontier.to_bytes(),
        };
    }
}

// XADD key [NOMKSTREAM] [KEEPREF | DELREF | ACKED] [<MAXLEN | MINID> [= | ~] threshold
//     [LIMIT count]] <* | id> field value [field value ...]
//
// KEEPREF/DELREF/ACKED are Redis 8.2's (not in 7.2 or Valkey 9.1): what the trim does to the
// consumer groups' references (`Stream::trim`).
pub fn xadd(ctx: &mut Ctx) -> CmdResult {
    let p = parse_add_trim(ctx, true)?;
    let field_pos = p.id_idx + 1;
    let nfields = ctx.args.len().saturating_sub(field_pos);
    if field_pos > ctx.args.len() || nfields < 2 || !nfields.is_multiple_of(2) {
        return Err(CmdError::Arity("xadd".into()));
    }
    if let Some((id, true)) = p.id {
        if id.is_zero() {
            return Err(CmdError::msg("ERR The ID specified in XADD must be greater than 0-0"));
        }
    }
    let key = ctx.arg(1);
    let limits = node_limits(ctx);
    let now = ctx.ks.now;
    let created = match ctx.ks.write::<Stream>(key)? {
        Some(_) => false,
        None if p.nomkstream => {
            ctx.reply.null();
            return Ok(());
        }
        None => true,
    };
    let mut fresh = Stream::default();
    let s = if created { &mut fresh } else { ctx.ks.write::<Stream>(key)?.unwrap() };
    if s.last_id == StreamId::MAX {
        return Err(CmdError::msg("ERR The stream has exhausted the last possible ID, unable to add more items"));
    }
    let id = match p.id {
        Some((id, true)) => id,
        Some((id, false)) => {
            if s.last_id.ms == id.ms {
                match s.last_id.incr() {
                    Some(n) if s.last_id.seq != u64::MAX => n,
                    _ => StreamId::MIN,
                }
            } else {
                id
            }
        }
        None => {
            let ms = now.max(0) as u64;
            if ms > s.last_id.ms {
                StreamId::new(ms, 0)
            } else {
                s.last_id.incr().unwrap_or(StreamId::MIN)
            }
        }
    };
    if id <= s.last_id {
        return Err(CmdError::msg("ERR The ID specified in XADD is equal or smaller than the target stream top item"));
    }
    let fields: Vec<Vec<u8>> = ctx.args[field_pos..].iter().map(|a| a.to_vec()).collect();
    s.append(id, fields, limits);
    reply_id(ctx.reply, id);
    let trimmed = p.trim.strategy != TrimStrategy::None;
    let t = s.trim(&p.trim);
    let mut argv: Vec<Vec<u8>> = ctx.args.iter().map(|a| a.to_vec()).collect();
    if trimmed {
        rewrite_trim(&mut argv, &p, s, &t);
    }
    if created {
        ctx.ks.insert_new(key, Value::Stream(Box::new(fresh)));
    }
    ctx.ks.modified(key);
    // Redis's order: `new` (when created), `xadd`, then `xtrim` if the trim removed anything.
    ctx.ks.note(notify::STREAM, "xadd", key);
    if t.deleted > 0 {
        ctx.ks.note(notify::STREAM, "xtrim", key);
    }
    // The effect carries the concrete ID, so a replica or the AOF adds the same entry.
    if !matches!(p.id, Some((_, true))) {
        argv[p.id_idx] = id.to_bytes();
    }
    ctx.rewrite_effect(argv);
    ctx.ks.signal_ready(key);
    Ok(())
}

// XLEN key
pub fn xlen(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.arg(1);
    let n = ctx.ks.read::<Stream>(key)?.map(|s| s.length).unwrap_or(0);
    ctx.reply.int(n as i64);
    Ok(())
}

fn range_generic(ctx: &mut Ctx, rev: bool) -> CmdResult {
    let (start_arg, end_arg) = if rev { (ctx.arg(3), ctx.arg(2)) } else { (ctx.arg(2), ctx.arg(3)) };
    let start = parse_range_start(start_arg)?;
    let end = parse_range_end(end_arg)?;
    let mut count: i64 = -1;
    let mut j = 4;
    while j < ctx.args.len() {
        if eq_ic(ctx.arg(j), "COUNT") && j + 1 < ctx.args.len() {
            count = ctx.arg_i64(j + 1)?.max(0);
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    if count == 0 {
        ctx.reply.null_array();
        return Ok(());
    }
    let key = ctx.arg(1);
    let Some(s) = ctx.ks.read::<Stream>(key)? else {
        ctx.reply.array(0);
        return Ok(());
    };
    let entries = s.range(start, end, rev, count.max(0) as usize);
    reply_entries(ctx.reply, &entries);
    Ok(())
}

// XRANGE key start end [COUNT count]
pub fn xrange(ctx: &mut Ctx) -> CmdResult {
    range_generic(ctx, false)
}

// XREVRANGE key end start [COUNT count]
pub fn xrevrange(ctx: &mut Ctx) -> CmdResult {
    range_generic(ctx, true)
}

// XDEL key id [id ...]
pub fn xdel(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.arg(1);
    if ctx.ks.write::<Stream>(key)?.is_none() {
        ctx.reply.int(0);
        return Ok(());
    }
    // All IDs are checked before anything is deleted: no half-done command.
    let ids = ctx.args[2..].iter().map(|a| parse_strict_id(a)).collect::<Result<Vec<_>, _>>()?;
    let s = ctx.ks.write::<Stream>(key)?.unwrap();
    let deleted = ids.into_iter().filter(|&id| s.xdel(id)).count();
    if deleted > 0 {
        ctx.ks.modified(key);
        ctx.ks.dirty += deleted as u64 - 1;
        ctx.ks.note(notify::STREAM, "xdel", key);
    }
    ctx.reply.int(deleted as i64);
    Ok(())
}

// XTRIM key <MAXLEN | MINID> [= | ~] threshold [LIMIT count] [KEEPREF | DELREF | ACKED]
pub fn xtrim(ctx: &mut Ctx) -> CmdResult {
    let p = parse_add_trim(ctx, false)?;
    let key = ctx.arg(1);
    let Some(s) = ctx.ks.write::<Stream>(key)? else {
        ctx.reply.int(0);
        return Ok(());
    };
    let t = s.trim(&p.trim);
    let deleted = t.deleted;
    if deleted > 0 {
        let mut argv: Vec<Vec<u8>> = ctx.args.iter().map(|a| a.to_vec()).collect();
        rewrite_trim(&mut argv, &p, s, &t);
        ctx.ks.modified(key);
        ctx.ks.dirty += deleted - 1;
        ctx.ks.note(notify::STREAM, "xtrim", key);
        ctx.rewrite_effect(argv);
    }
    ctx.reply.int(deleted as i64);
    Ok(())
}

// XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]
pub fn xsetid(ctx: &mut Ctx) -> CmdResult {
    let id = parse_strict_id(ctx.arg(2))?;
    let mut entries_added: i64 = -1;
    let mut max_xdel = StreamId::MIN;
    let mut i = 3;
    while i < ctx.args.len() {
        let more = ctx.args.len() - 1 - i;
        if eq_ic(ctx.arg(i), "ENTRIESADDED") && more > 0 {
            entries_added = ctx.arg_i64(i + 1)?;
            if entries_added < 0 {
                return Err(CmdError::msg("ERR entries_added must be positive"));
            }
        } else if eq_ic(ctx.arg(i), "MAXDELETEDID") && more > 0 {
            max_xdel = parse_strict_id(ctx.arg(i + 1))?;
            if id < max_xdel {
                return Err(CmdError::msg(
                    "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                ));
            }
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let key = ctx.arg(1);
    let s = ctx.ks.write::<Stream>(key)?.ok_or(CmdError::NoSuchKey)?;
    if id < s.max_deleted_id {
        return Err(CmdError::msg("ERR The ID specified in XSETID is smaller than current max_deleted_entry_id"));
    }
    if s.length > 0 {
        if id < s.last_valid_id() {
            return Err(CmdError::msg("ERR The ID specified in XSETID is smaller than the target stream top item"));
        }
        if entries_added != -1 && s.length > entries_added as u64 {
            return Err(CmdError::msg(
                "ERR The entries_added specified in XSETID is smaller than the target stream length",
            ));
        }
    }
    s.last_id = id;
    if entries_added != -1 {
        s.entries_added = entries_added as u64;
    }
    if !max_xdel.is_zero() {
        s.max_deleted_id = max_xdel;
    }
    ctx.ks.modified(key);
    ctx.ks.note(notify::STREAM, "xsetid", key);
    ctx.reply.ok();
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// XREAD / XREADGROUP
// ---------------------------------------------------------------------------------------------

/// What to read from one stream.
#[derive(Clone, Copy, PartialEq)]
enum ReadFrom {
    /// Entries after this ID (for XREADGROUP: this consumer's history after it).
    After(StreamId),
    /// XREADGROUP's `>`: entries never delivered to the group.
    New,
}

struct ReadArgs<'a> {
    deadline: Option<Option<i64>>,
    count: usize,
    noack: bool,
    group: Option<(&'a [u8], &'a [u8])>,
    keys: &'a [&'a [u8]],
    ids: Vec<ReadFrom>,
    /// Index of the first ID argument.
    ids_at: usize,
}

/// Parses XREAD/XREADGROUP and resolves the IDs against the streams, with Redis's error
/// order. `$` becomes the stream's last ID now.
fn parse_read<'a>(
    ks: &mut KsView,
    args: &'a [&'a [u8]],
    xreadgroup: bool,
    in_script: bool,
) -> Result<ReadArgs<'a>, CmdError> {
    let mut r = ReadArgs { deadline: None, count: 0, noack: false, group: None, keys: &[], ids: Vec::new(), ids_at: 0 };
    let mut streams_at = 0;
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - i - 1;
        let o = args[i];
        if eq_ic(o, "BLOCK") && more > 0 {
            if in_script {
                let name = if xreadgroup { "xreadgroup" } else { "xread" };
                return Err(CmdError::msg(format!("ERR {name} command is not allowed with BLOCK option from scripts")));
            }
            i += 1;
            r.deadline = Some(deadline_from_ms(args[i], ks.now)?);
        } else if eq_ic(o, "COUNT") && more > 0 {
            i += 1;
            r.count = parse_int(args[i])?.max(0) as usize;
        } else if eq_ic(o, "STREAMS") && more > 0 {
            streams_at = i + 1;
            if !(args.len() - streams_at).is_multiple_of(2) {
                // 7.2 names the command and the ID that stands for "new" (7.0 said XREAD, '$').
                let (name, id) = if xreadgroup { ("xreadgroup", '>') } else { ("xread", '$') };
                return Err(CmdError::msg(format!(
                    "ERR Unbalanced '{name}' list of streams: for each stream key an ID or '{id}' must be specified."
                )));
            }
            break;
        } else if eq_ic(o, "GROUP") && more >= 2 {
            if !xreadgroup {
                return Err(CmdError::msg(
                    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            r.group = Some((args[i + 1], args[i + 2]));
            i += 2;
        } else if eq_ic(o, "NOACK") {
            if !xreadgroup {
                return Err(CmdError::msg(
                    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            r.noack = true;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if streams_at == 0 {
        return Err(CmdError::Syntax);
    }
    if xreadgroup && r.group.is_none() {
        return Err(CmdError::msg("ERR Missing GROUP option for XREADGROUP"));
    }
    let n = (args.len() - streams_at) / 2;
    r.keys = &args[streams_at..streams_at + n];
    r.ids_at = streams_at + n;
    for (k, &key) in r.keys.iter().enumerate() {
        let arg = args[r.ids_at + k];
        let s = ks.read::<Stream>(key)?;
        if let Some((g, _)) = r.group {
            if s.as_ref().and_then(|s| s.groups.get(g)).is_none() {
                return Err(nogroup_read(key, g));
            }
        }
        if arg == b"$" {
            if xreadgroup {
                return Err(CmdError::msg(
                    "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of \
                     this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would \
                     just return an empty result set.",
                ));
            }
            r.ids.push(ReadFrom::After(s.map(|s| s.last_id).unwrap_or_default()));
        } else if arg == b">" {
            if !xreadgroup {
                return Err(CmdError::msg(
                    "ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> \
                     option.",
                ));
            }
            r.ids.push(ReadFrom::New);
        } else {
            r.ids.push(ReadFrom::After(parse_strict_id(arg)?));
        }
    }
    Ok(r)
}

fn nogroup_read(key: &[u8], group: &[u8]) -> CmdError {
    CmdError::msg(format!(
        "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
        String::from_utf8_lossy(key),
        String::from_utf8_lossy(group)
    ))
}

/// Serves what can be served now; returns the number of streams in the reply (0 = nothing,
/// and nothing was written to `reply`).
fn serve_read(ks: &mut KsView, reply: &mut Reply, r: &ReadArgs) -> usize {
    let resp3 = reply.proto == crate::protocol::Proto::Resp3;
    let outer = reply.defer(if resp3 { b'%' } else { b'*' });
    let mut served = 0;
    for (k, &key) in r.keys.iter().enumerate() {
        let now = ks.now;
        let Ok(Some(s)) = ks.read::<Stream>(key) else { continue };
        let from = r.ids[k];
        match r.group {
            None => {
                let ReadFrom::After(after) = from else { continue };
                if s.length == 0 || s.last_valid_id() <= after {
                    continue;
                }
                let Some(start) = after.incr() else { continue };
                let entries = s.range(start, StreamId::MAX, false, r.count);
                served += 1;
                if !resp3 {
                    reply.array(2);
                }
                reply.bulk(key);
                reply_entries(reply, &entries);
            }
            Some((gname, cname)) => {
                let Some(glast) = s.groups.get(gname).map(|g| g.last_id) else { continue };
                let history = match from {
                    ReadFrom::After(id) => Some(id),
                    ReadFrom::New => None,
                };
                let can_serve = history.is_some() || (s.length > 0 && s.last_valid_id() > glast);
                let g = s.groups.get_mut(gname).unwrap();
                if g.create_consumer(cname, now) {
                    // A new consumer is propagated on its own only with NOACK, as Redis 7.2
                    // does (otherwise the XCLAIMs of its deliveries create it on a replica).
                    ks.dirty += 1;
                    ks.note(notify::STREAM, "xgroup-createconsumer", key);
                    if r.noack {
                        ks.effect(vec![
                            b"XGROUP".to_vec(),
                            b"CREATECONSUMER".to_vec(),
                            key.to_vec(),
                            gname.to_vec(),
                            cname.to_vec(),
                        ]);
                    }
                }
                let Ok(Some(s)) = ks.read::<Stream>(key) else { continue };
                let g = s.groups.get_mut(gname).unwrap();
                g.consumers.get_mut(cname).unwrap().seen_time = now;
                if !can_serve {
                    continue;
                }
                served += 1;
                if !resp3 {
                    reply.array(2);
                }
                reply.bulk(key);
                ks.dirty += 1;
                match history {
                    Some(after) => super::group::reply_history(ks, reply, key, gname, cname, after, r.count),
                    None => super::group::deliver_new(ks, reply, key, gname, cname, r.count, r.noack),
                }
            }
        }
    }
    if served > 0 {
        reply.set_deferred(outer, served);
    }
    served
}

fn read_timeout(reply: &mut Reply) {
    reply.null_array();
}

/// Re-runs a blocked XREAD/XREADGROUP for a waiter when one of its streams changed, as Redis
/// 7.2 re-executes the command: the reply is what the command would say now. For XREADGROUP
/// a deleted key or group (or a key of another type) ends the wait with the command's error.
fn serve_blocked(ks: &mut KsView, argv: &[Vec<u8>], _key: &[u8], reply: &mut Reply, xreadgroup: bool) -> Served {
    let args: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
    let r = match parse_read(ks, &args, xreadgroup, false) {
        Ok(r) => r,
        Err(e) => {
            if xreadgroup {
                reply.error(&e.text());
                return Served::Done;
            }
            return Served::NotReady;
        }
    };
    // `$` was resolved to concrete IDs when the client blocked (see `read_generic`).
    // Deliveries are propagated as XCLAIM / XGROUP SETID effects by the reader itself.
    if serve_read(ks, reply, &r) > 0 {
        Served::Done
    } else {
        Served::NotReady
    }
}

fn serve_xread(ks: &mut KsView, argv: &[Vec<u8>], key: &[u8], reply: &mut Reply) -> Served {
    serve_blocked(ks, argv, key, reply, false)
}

fn serve_xreadgroup(ks: &mut KsView, argv: &[Vec<u8>], key: &[u8], reply: &mut Reply) -> Served {
    serve_blocked(ks, argv, key, reply, true)
}

fn read_generic(ctx: &mut Ctx, xreadgroup: bool) -> CmdResult {
    let args = ctx.args;
    // Deliveries are propagated as XCLAIM / XGROUP SETID effects, never as the command.
    ctx.no_effect();
    let r = parse_read(&mut ctx.ks, args, xreadgroup, ctx.client.in_script)?;
    if serve_read(&mut ctx.ks, ctx.reply, &r) > 0 {
        return Ok(());
    }
    match r.deadline {
        Some(deadline) if !ctx.client.in_exec => {
            // `$` means "the last ID now": the waiter keeps the resolved IDs, so whatever is
            // added later — one entry or many — is what it reads.
            let mut argv = ctx.argv_owned();
            for (k, id) in r.ids.iter().enumerate() {
                if args[r.ids_at + k] == b"$" {
                    if let ReadFrom::After(id) = id {
                        argv[r.ids_at + k] = id.to_bytes();
                    }
                }
            }
            ctx.block(BlockRequest {
                argv: Some(argv),
                keys: r.keys.iter().map(|k| k.to_vec()).collect(),
                deadline_ms: deadline,
                serve: if xreadgroup { serve_xreadgroup } else { serve_xread },
                on_timeout: read_timeout,
                registered: None,
            });
        }
        _ => ctx.reply.null_array(),
    }
    Ok(())
}

// XREAD [COUNT count] [BLOCK milliseconds] STREAMS key [key ...] id [id ...]
pub fn xread(ctx: &mut Ctx) -> CmdResult {
    read_generic(ctx, false)
}

// XREADGROUP GROUP group consumer [COUNT count] [BLOCK milliseconds] [NOACK]
//     STREAMS key [key ...] id [id ...]
pub fn xreadgroup(ctx: &mut Ctx) -> CmdResult {
    read_generic(ctx, true)
}
