//! Sorted-set commands (Redis's `t_zset.c`, "Sorted set commands").
//!
//! Argument checks run in Redis's order (options and ranges are parsed before the key is
//! looked up, so a bad range reports its error even on a key of the wrong type), and replies
//! follow Redis's shapes in RESP2 and RESP3: WITHSCORES is a flat array in RESP2 and an array
//! of [member, double] pairs in RESP3.

use crate::engine::set::Set;
pub use crate::engine::zset::*;
use crate::engine::Value;
use crate::exec::blocking::{deadline_from_secs, BlockRequest, Served};
use crate::exec::parse_scan_cursor;
use crate::exec::Ctx;
use crate::exec::{eq_ic, parse_int, CmdError, CmdResult, KsView};
use crate::protocol::{Proto, Reply};
use crate::services::notify;
use crate::types::set::{parse_scan_opts, Loaned};
use rand::seq::SliceRandom;
use std::collections::HashMap;
use std::sync::atomic::Ordering;

impl ZLimits {
    pub fn from_ctx(ctx: &Ctx) -> ZLimits {
        let h = &ctx.srv.config.hot;
        ZLimits {
            entries: h.zset_max_listpack_entries.load(Ordering::Relaxed),
            value: h.zset_max_listpack_value.load(Ordering::Relaxed),
        }
    }
}

const NAN_ERR: &str = "ERR resulting score is not a number (NaN)";
const RANGE_ERR: &str = "ERR min or max is not a float";
const LEX_ERR: &str = "ERR min or max not valid string range item";

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// After removals: raises `event` (`zrem`, `zpopmin` …), then deletes the key (raising `del`)
/// when the zset became empty, else counts the change.
fn finish_removal(ks: &mut KsView, key: &[u8], event: &'static str) {
    ks.note(notify::ZSET, event, key);
    let empty = matches!(ks.peek(key), Some(o) if matches!(&*o, Value::ZSet(z) if z.is_empty()));
    if empty {
        ks.delete(key);
        ks.note(notify::GENERIC, "del", key);
    } else {
        ks.modified(key);
    }
}

/// Stores `z` at `dst` raising `event` (`zunionstore`, `geosearchstore` …), or deletes `dst`
/// when `z` is empty (raising `del` if it existed); returns the stored length. A stored zset
/// may satisfy clients blocked in BZPOPMIN & co.
pub(crate) fn store_zset(ks: &mut KsView, dst: &[u8], z: ZSet, event: &'static str) -> usize {
    let n = z.len();
    if n == 0 {
        if ks.delete(dst).is_some() {
            ks.note(notify::GENERIC, "del", dst);
        }
    } else {
        ks.set(dst, Value::ZSet(z), false);
        ks.note(notify::ZSET, event, dst);
        ks.signal_ready(dst);
    }
    n
}

/// Parses ZADD/ZINCRBY-style scores: "value is not a valid float".
fn score_arg(b: &[u8]) -> Result<f64, CmdError> {
    parse_score(b).ok_or(CmdError::NotFloat)
}

/// Replies (member, score) pairs: flat in RESP2 or without scores, nested pairs in RESP3.
fn reply_elements(reply: &mut Reply, items: &[(Box<[u8]>, f64)], withscores: bool) {
    elements_header(reply, items.len(), withscores);
    for (m, s) in items {
        reply_element(reply, m, *s, withscores);
    }
}

/// The array header for `n` elements: RESP2 flattens scores into it, RESP3 nests pairs.
fn elements_header(reply: &mut Reply, n: usize, withscores: bool) {
    let flat = withscores && reply.proto != Proto::Resp3;
    reply.array(if flat { n * 2 } else { n });
}

fn reply_element(reply: &mut Reply, m: &[u8], s: f64, withscores: bool) {
    let nested = withscores && reply.proto == Proto::Resp3;
    if nested {
        reply.array(2);
    }
    reply.bulk(m);
    if withscores {
        reply.double(s);
    }
}

// ---------------------------------------------------------------------------------------------
// ZADD, ZINCRBY, ZREM, simple reads
// ---------------------------------------------------------------------------------------------

/// Redis's `zaddGenericCommand`, for ZADD and ZINCRBY (`incr_cmd`).
fn zadd_generic(ctx: &mut Ctx, incr_cmd: bool) -> CmdResult {
    let key = ctx.arg(1);
    let mut f = AddFlags { incr: incr_cmd, ..AddFlags::default() };
    let mut ch = false;
    let mut idx = 2;
    if !incr_cmd {
        while idx < ctx.args.len() {
            let o = ctx.args[idx];
            if eq_ic(o, "nx") {
                f.nx = true;
            } else if eq_ic(o, "xx") {
                f.xx = true;
            } else if eq_ic(o, "ch") {
                ch = true;
            } else if eq_ic(o, "incr") {
                f.incr = true;
            } else if eq_ic(o, "gt") {
                f.gt = true;
            } else if eq_ic(o, "lt") {
                f.lt = true;
            } else {
                break;
            }
            idx += 1;
        }
    }
    let elements = ctx.args.len() - idx;
    if !elements.is_multiple_of(2) || elements == 0 {
        return Err(CmdError::Syntax);
    }
    let n = elements / 2;
    if f.xx && f.nx {
        return Err(CmdError::msg("ERR XX and NX options at the same time are not compatible"));
    }
    // Redis's wording: GT+LT, GT+NX and LT+NX all conflict.
    if ((f.gt || f.lt) && f.nx) || (f.gt && f.lt) {
        return Err(CmdError::msg("ERR GT, LT, and/or NX options at the same time are not compatible"));
    }
    if f.incr && n > 1 {
        return Err(CmdError::msg("ERR INCR option supports a single increment-element pair"));
    }
    // All scores are checked before anything changes: the command runs fully or not at all.
    let mut pairs = Vec::with_capacity(n);
    for j in 0..n {
        pairs.push((score_arg(ctx.args[idx + 2 * j])?, ctx.args[idx + 2 * j + 1]));
    }
    zadd_apply(ctx, key, f, ch, pairs)
}

/// The part of ZADD after argument checks, shared with GEOADD: adds `pairs` under `f`,
/// creating the key if needed, and replies as ZADD (or ZINCRBY with `f.incr`).
pub(crate) fn zadd_apply(ctx: &mut Ctx, key: &[u8], f: AddFlags, ch: bool, pairs: Vec<(f64, &[u8])>) -> CmdResult {
    let n = pairs.len();
    let lim = ZLimits::from_ctx(ctx);
    let exists = ctx.ks.write::<ZSet>(key)?.is_some();
    if !exists {
        if f.xx {
            if f.incr {
                ctx.reply.null();
            } else {
                ctx.reply.int(0);
            }
            return Ok(());
        }
        let max_len = pairs.iter().map(|(_, m)| m.len()).max().unwrap_or(0);
        ctx.ks.insert_new(key, Value::ZSet(ZSet::create(n, max_len, &lim)));
    }
    let z = ctx.ks.write::<ZSet>(key)?.expect("just ensured");
    let (mut added, mut updated, mut processed) = (0i64, 0i64, 0);
    let mut last = 0.0;
    let mut err = None;
    for (score, m) in pairs {
        match z.add(score, m, f, &lim) {
            Err(NanScore) => {
                err = Some(CmdError::msg(NAN_ERR));
                break;
            }
            Ok(AddOutcome::Added(s)) => (added, processed, last) = (added + 1, processed + 1, s),
            Ok(AddOutcome::Updated(s)) => (updated, processed, last) = (updated + 1, processed + 1, s),
            Ok(AddOutcome::Unchanged(s)) => (processed, last) = (processed + 1, s),
            Ok(AddOutcome::Nop) => {}
        }
    }
    if added + updated > 0 {
        ctx.ks.modified(key);
        ctx.ks.note(notify::ZSET, if f.incr { "zincr" } else { "zadd" }, key);
        ctx.ks.signal_ready(key);
    }
    if let Some(e) = err {
        return Err(e);
    }
    if f.incr {
        if processed > 0 {
            ctx.reply.double(last);
        } else {
            ctx.reply.null();
        }
    } else {
        ctx.reply.int(if ch { added + updated } else { added });
    }
    Ok(())
}

// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]
pub fn zadd(ctx: &mut Ctx) -> CmdResult {
    zadd_generic(ctx, false)
}

// ZINCRBY key increment member
pub fn zincrby(ctx: &mut Ctx) -> CmdResult {
    zadd_generic(ctx, true)
}

// ZREM key member [member ...]
pub fn zrem(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.arg(1);
    let args = ctx.args;
    let mut removed = 0;
    if let Some(z) = ctx.ks.write::<ZSet>(key)? {
        for m in &args[2..] {
            if z.remove(m) {
                removed += 1;
                if z.is_empty() {
                    break;
                }
            }
        }
    }
    if removed > 0 {
        finish_removal(&mut ctx.ks, key, "zrem");
    }
    ctx.reply.int(removed);
    Ok(())
}

// ZCARD key
pub fn zcard(ctx: &mut Ctx) -> CmdResult {
    let n = ctx.ks.read::<ZSet>(ctx.args[1])?.map_or(0, |z| z.len());
    ctx.reply.int(n as i64);
    Ok(())
}

// ZSCORE key member
pub fn zscore(ctx: &mut Ctx) -> CmdResult {
    match ctx.ks.read::<ZSet>(ctx.args[1])?.and_then(|z| z.score(ctx.args[2])) {
        Some(s) => ctx.reply.double(s),
        None => ctx.reply.null(),
    }
    Ok(())
}

// ZMSCORE key member [member ...]
pub fn zmscore(ctx: &mut Ctx) -> CmdResult {
    let args = ctx.args;
    let scores: Vec<Option<f64>> = match ctx.ks.read::<ZSet>(args[1])? {
        Some(z) => args[2..].iter().map(|m| z.score(m)).collect(),
        None => vec![None; args.len() - 2],
    };
    ctx.reply.array(scores.len());
    for s in scores {
        match s {
            Some(s) => ctx.reply.double(s),
            None => ctx.reply.null(),
        }
    }
    Ok(())
}

// ZCOUNT key min max
pub fn zcount(ctx: &mut Ctx) -> CmdResult {
    let r = ScoreRange::parse(ctx.arg(2), ctx.arg(3)).ok_or(CmdError::msg(RANGE_ERR))?;
    let n = ctx.ks.read::<ZSet>(ctx.args[1])?.map_or(0, |z| {
        let (a, b) = z.score_span(&r);
        b - a
    });
    ctx.reply.int(n as i64);
    Ok(())
}

// ZLEXCOUNT key min max
pub fn zlexcount(ctx: &mut Ctx) -> CmdResult {
    let r = LexRange::parse(ctx.arg(2), ctx.arg(3)).ok_or(CmdError::msg(LEX_ERR))?;
    let n = ctx.ks.read::<ZSet>(ctx.args[1])?.map_or(0, |z| {
        let (a, b) = z.lex_span(&r);
        b - a
    });
    ctx.reply.int(n as i64);
    Ok(())
}

fn zrank_generic(ctx: &mut Ctx, rev: bool) -> CmdResult {
    if ctx.args.len() > 4 {
        return Err(CmdError::Arity(ctx.cmd.full_name().to_string()));
    }
    let withscore = ctx.args.len() == 4;
    if withscore && !eq_ic(ctx.arg(3), "withscore") {
        return Err(CmdError::Syntax);
    }
    let found = match ctx.ks.read::<ZSet>(ctx.args[1])? {
        Some(z) => z.rank(ctx.args[2]).map(|(r, s)| (if rev { z.len() - 1 - r } else { r }, s)),
        None => None,
    };
    match found {
        Some((r, s)) => {
            if withscore {
                ctx.reply.array(2);
                ctx.reply.int(r as i64);
                ctx.reply.double(s);
            } else {
                ctx.reply.int(r as i64);
            }
        }
        None if withscore => ctx.reply.null_array(),
        None => ctx.reply.null(),
    }
    Ok(())
}

// ZRANK key member [WITHSCORE]
pub fn zrank(ctx: &mut Ctx) -> CmdResult {
    zrank_generic(ctx, false)
}

// ZREVRANK key member [WITHSCORE]
pub fn zrevrank(ctx: &mut Ctx) -> CmdResult {
    zrank_generic(ctx, true)
}

// ---------------------------------------------------------------------------------------------
// ZRANGE and its relatives
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum RangeKind {
    Rank,
    Score,
    Lex,
}

enum Bounds {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange),
}

/// Resolves a range request against `z` into ascending ranks `[start, end]` and a walk
/// direction. None when the range is empty.
fn resolve(z: &ZSet, b: &Bounds, rev: bool, offset: i64, limit: i64) -> Option<(usize, usize)> {
    let len = z.len() as i64;
    match b {
        Bounds::Rank(s, e) => {
            let (mut s, mut e) = (*s, *e);
            if s < 0 {
                s += len;
            }
            if e < 0 {
                e += len;
            }
            s = s.max(0);
            if s > e || s >= len {
                return None;
            }
            e = e.min(len - 1);
            Some(if rev { ((len - 1 - e) as usize, (len - 1 - s) as usize) } else { (s as usize, e as usize) })
        }
        Bounds::Score(_) | Bounds::Lex(_) => {
            // Redis skips `offset` elements with `while (offset--)`: a negative offset skips
            // everything; a negative limit means no limit.
            if offset < 0 || (offset > 0 && offset >= len) {
                return None;
            }
            let (first, end, offset) = match b {
                Bounds::Score(r) => {
                    let (f, e) = z.score_span(r);
                    (f, e, offset)
                }
                // The lex walk applies the offset itself (see `ZSet::lex_span_from`).
                Bounds::Lex(r) => {
                    let (f, e) = z.lex_span_from(r, rev, offset as usize);
                    (f, e, 0)
                }
                Bounds::Rank(..) => unreachable!(),
            };
            let avail = (end - first) as i64 - offset;
            if avail <= 0 || limit == 0 {
                return None;
            }
            let n = if limit < 0 { avail } else { avail.min(limit) } as usize;
            let off = offset as usize;
            Some(if rev { (end - off - n, end - off - 1) } else { (first + off, first + off + n - 1) })
        }
    }
}

/// Redis's `zrangeGenericCommand`: ZRANGE, ZRANGESTORE and the legacy forms. `kind`/`rev`
/// are fixed by the legacy commands (which then reject BYSCORE/BYLEX/REV as syntax errors).
fn zrange_generic(ctx: &mut Ctx, store: bool, kind: Option<RangeKind>, rev: Option<bool>) -> CmdResult {
    let first = if store { 2 } else { 1 };
    let src = ctx.arg(first);
    let (mut minidx, mut maxidx) = (first + 1, first + 2);
    let (mut kind_opt, mut rev_opt) = (kind, rev);
    let mut withscores = false;
    let (mut offset, mut limit) = (0i64, -1i64);
    let mut has_limit = false;
    let mut j = first + 3;
    while j < ctx.args.len() {
        let a = ctx.args[j];
        let left = ctx.args.len() - j - 1;
        if !store && eq_ic(a, "withscores") {
            withscores = true;
        } else if eq_ic(a, "limit") && left >= 2 {
            offset = parse_int(ctx.args[j + 1])?;
            limit = parse_int(ctx.args[j + 2])?;
            has_limit = true;
            j += 2;
        } else if rev_opt.is_none() && eq_ic(a, "rev") {
            rev_opt = Some(true);
        } else if kind_opt.is_none() && eq_ic(a, "bylex") {
            kind_opt = Some(RangeKind::Lex);
        } else if kind_opt.is_none() && eq_ic(a, "byscore") {
            kind_opt = Some(RangeKind::Score);
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let rev = rev_opt.unwrap_or(false);
    let kind = kind_opt.unwrap_or(RangeKind::Rank);
    if has_limit && kind == RangeKind::Rank {
        return Err(CmdError::msg(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if withscores && kind == RangeKind::Lex {
        return Err(CmdError::msg("ERR syntax error, WITHSCORES not supported in combination with BYLEX"));
    }
    if rev && kind != RangeKind::Rank {
        // The range is given as [max, min].
        std::mem::swap(&mut minidx, &mut maxidx);
    }
    let bounds = match kind {
        RangeKind::Rank => Bounds::Rank(ctx.arg_i64(minidx)?, ctx.arg_i64(maxidx)?),
        RangeKind::Score => {
            Bounds::Score(ScoreRange::parse(ctx.arg(minidx), ctx.arg(maxidx)).ok_or(CmdError::msg(RANGE_ERR))?)
        }
        RangeKind::Lex => Bounds::Lex(LexRange::parse(ctx.arg(minidx), ctx.arg(maxidx)).ok_or(CmdError::msg(LEX_ERR))?),
    };
    let mut items: Vec<(Box<[u8]>, f64)> = Vec::new();
    if let Some(z) = ctx.ks.read::<ZSet>(src)? {
        if let Some((s, e)) = resolve(z, &bounds, rev, offset, limit) {
            items.reserve(e - s + 1);
            z.for_range(s, e, rev, |m, sc| items.push((m.into(), sc)));
        }
    }
    if store {
        let lim = ZLimits::from_ctx(ctx);
        let items = items.into_iter().map(|(m, s)| (s, m)).collect();
        let n = store_zset(&mut ctx.ks, ctx.args[1], ZSet::build(items, &lim), "zrangestore");
        ctx.reply.int(n as i64);
    } else {
        reply_elements(ctx.reply, &items, withscores);
    }
    Ok(())
}

// ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]
pub fn zrange(ctx: &mut Ctx) -> CmdResult {
    zrange_generic(ctx, false, None, None)
}

// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]
pub fn zrangestore(ctx: &mut Ctx) -> CmdResult {
    zrange_generic(ctx, true, None, None)
}

// ZREVRANGE key start stop [WITHSCORES]
pub fn zrevrange(ctx: &mut Ctx) -> CmdResult {
    zrange_generic(ctx, false, Some(RangeKind::Rank), Some(true))
}

// ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]
pub fn zrangebyscore(ctx: &mut Ctx) -> CmdResult {
    zrange_generic(ctx, false, Some(RangeKind::Score), Some(false))
}

// ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]
pub fn zrevrangebyscore(ctx: &mut Ctx) -> CmdResult {
    zrange_generic(ctx, false, Some(RangeKind::Score), Some(true))
}

// ZRANGEBYLEX key min max [LIMIT offset count]
pub fn zrangebylex(ctx: &mut Ctx) -> CmdResult {
    zrange_generic(ctx, false, Some(RangeKind::Lex), Some(false))
}

// ZREVRANGEBYLEX key max min [LIMIT offset count]
pub fn zrevrangebylex(ctx: &mut Ctx) -> CmdResult {
    zrange_generic(ctx, false, Some(RangeKind::Lex), Some(true))
}

/// ZREMRANGEBYRANK/SCORE/LEX: the range is parsed before the key is looked up.
fn zremrange_generic(ctx: &mut Ctx, kind: RangeKind) -> CmdResult {
    let key = ctx.arg(1);
    let bounds = match kind {
        RangeKind::Rank => Bounds::Rank(ctx.arg_i64(2)?, ctx.arg_i64(3)?),
        RangeKind::Score => Bounds::Score(ScoreRange::parse(ctx.arg(2), ctx.arg(3)).ok_or(CmdError::msg(RANGE_ERR))?),
        RangeKind::Lex => Bounds::Lex(LexRange::parse(ctx.arg(2), ctx.arg(3)).ok_or(CmdError::msg(LEX_ERR))?),
    };
    let mut removed = 0;
    if let Some(z) = ctx.ks.write::<ZSet>(key)? {
        if let Some((s, e)) = resolve(z, &bounds, false, 0, -1) {
            z.remove_range(s, e, |_, _| removed += 1);
        }
    }
    if removed > 0 {
        let event = match kind {
            RangeKind::Rank => "zremrangebyrank",
            RangeKind::Score => "zremrangebyscore",
            RangeKind::Lex => "zremrangebylex",
        };
        finish_removal(&mut ctx.ks, key, event);
    }
    ctx.reply.int(removed);
    Ok(())
}

// ZREMRANGEBYRANK key start stop
pub fn zremrangebyrank(ctx: &mut Ctx) -> CmdResult {
    zremrange_generic(ctx, RangeKind::Rank)
}

// ZREMRANGEBYSCORE key min max
pub fn zremrangebyscore(ctx: &mut Ctx) -> CmdResult {
    zremrange_generic(ctx, RangeKind::Score)
}

// ZREMRANGEBYLEX key min max
pub fn zremrangebylex(ctx: &mut Ctx) -> CmdResult {
    zremrange_generic(ctx, RangeKind::Lex)
}

// ---------------------------------------------------------------------------------------------
// Pops: ZPOPMIN/ZPOPMAX, ZMPOP and the blocking forms
// ---------------------------------------------------------------------------------------------

/// Pops up to `count` elements from the zset at `key` (the caller checked it is a zset),
/// deleting the key when it empties.
fn pop_elements(ks: &mut KsView, key: &[u8], max: bool, count: usize) -> Vec<(Box<[u8]>, f64)> {
    let mut out = Vec::new();
    if let Ok(Some(z)) = ks.write::<ZSet>(key) {
        let n = count.min(z.len());
        if n > 0 {
            let len = z.len();
            let (s, e) = if max { (len - n, len - 1) } else { (0, n - 1) };
            z.remove_range(s, e, |m, sc| out.push((m, sc)));
            if max {
                out.reverse();
            }
        }
    }
    if !out.is_empty() {
        finish_removal(ks, key, if max { "zpopmax" } else { "zpopmin" });
    }
    out
}

/// The effect of a pop: ZPOPMIN/ZPOPMAX, with ZMPOP's and BZMPOP's count the number actually
/// popped, as Redis 7.2 propagates them (`ZMPOP 1 k MIN COUNT 10` on 3 members: `ZPOPMIN k 3`).
fn pop_effect(ks: &mut KsView, key: &[u8], max: bool, count: Option<usize>) {
    let mut argv = vec![if max { b"ZPOPMAX".to_vec() } else { b"ZPOPMIN".to_vec() }, key.to_vec()];
    if let Some(c) = count {
        argv.push(itoa::Buffer::new().format(c).as_bytes().to_vec());
    }
    ks.effect(argv);
}

/// Reply of BZPOPMIN/BZPOPMAX: [key, member, score].
fn reply_bzpop(reply: &mut Reply, key: &[u8], items: &[(Box<[u8]>, f64)]) {
    reply.array(items.len() * 2 + 1);
    reply.bulk(key);
    for (m, s) in items {
        reply.bulk(m);
        reply.double(*s);
    }
}

/// Reply of ZMPOP/BZMPOP: [key, [[member, score], ...]] in both protocols.
fn reply_mpop(reply: &mut Reply, key: &[u8], items: &[(Box<[u8]>, f64)]) {
    reply.array(2);
    reply.bulk(key);
    reply.array(items.len());
    for (m, s) in items {
        reply.array(2);
        reply.bulk(m);
        reply.double(*s);
    }
}

fn zpop_generic(ctx: &mut Ctx, max: bool) -> CmdResult {
    if ctx.args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let key = ctx.arg(1);
    let count = if ctx.args.len() == 3 {
        let bad = || CmdError::msg("ERR value is out of range, must be positive");
        let c = crate::protocol::parse_i64(ctx.arg(2)).ok_or_else(bad)?;
        if c < 0 {
            return Err(bad());
        }
        Some(c as usize)
    } else {
        None
    };
    if ctx.ks.write::<ZSet>(key)?.is_none() || count == Some(0) {
        ctx.reply.array(0);
        return Ok(());
    }
    let items = pop_elements(&mut ctx.ks, key, max, count.unwrap_or(1));
    if count.is_some() {
        // RESP3 nests [member, score] pairs only when a count was given.
        reply_elements(ctx.reply, &items, true);
    } else {
        ctx.reply.array(items.len() * 2);
        for (m, s) in &items {
            ctx.reply.bulk(m);
            ctx.reply.double(*s);
        }
    }
    Ok(())
}

// ZPOPMIN key [count]
pub fn zpopmin(ctx: &mut Ctx) -> CmdResult {
    zpop_generic(ctx, false)
}

// ZPOPMAX key [count]
pub fn zpopmax(ctx: &mut Ctx) -> CmdResult {
    zpop_generic(ctx, true)
}

/// Parsed `numkeys key [key ...] MIN|MAX [COUNT count]` of ZMPOP/BZMPOP.
struct MpopArgs {
    keys: std::ops::Range<usize>,
    max: bool,
    count: usize,
}

fn parse_mpop(args: &[&[u8]], numkeys_idx: usize) -> Result<MpopArgs, CmdError> {
    let bad_numkeys = || CmdError::msg("ERR numkeys should be greater than 0");
    let n = crate::protocol::parse_i64(args[numkeys_idx]).ok_or_else(bad_numkeys)?;
    if n < 1 {
        return Err(bad_numkeys());
    }
    let where_idx = (numkeys_idx as u64).saturating_add(n as u64).saturating_add(1);
    if where_idx >= args.len() as u64 {
        return Err(CmdError::Syntax);
    }
    let where_idx = where_idx as usize;
    let max = if eq_ic(args[where_idx], "MIN") {
        false
    } else if eq_ic(args[where_idx], "MAX") {
        true
    } else {
        return Err(CmdError::Syntax);
    };
    let mut count = None;
    let mut j = where_idx + 1;
    while j < args.len() {
        if count.is_none() && eq_ic(args[j], "COUNT") && j + 1 < args.len() {
            let bad = || CmdError::msg("ERR count should be greater than 0");
            let c = crate::protocol::parse_i64(args[j + 1]).ok_or_else(bad)?;
            if c < 1 {
                return Err(bad());
            }
            count = Some(c as usize);
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(MpopArgs { keys: numkeys_idx + 1..where_idx, max, count: count.unwrap_or(1) })
}

/// The first key (in order) holding a zset; WRONGTYPE if a key before it holds another type.
fn first_nonempty<'a>(ks: &mut KsView, keys: &[&'a [u8]]) -> Result<Option<&'a [u8]>, CmdError> {
    for &k in keys {
        if ks.write::<ZSet>(k)?.is_some() {
            return Ok(Some(k));
        }
    }
    Ok(None)
}

// ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]
pub fn zmpop(ctx: &mut Ctx) -> CmdResult {
    let a = parse_mpop(ctx.args, 1)?;
    let keys = &ctx.args[a.keys.clone()];
    match first_nonempty(&mut ctx.ks, keys)? {
        None => ctx.reply.null_array(),
        Some(k) => {
            let items = pop_elements(&mut ctx.ks, k, a.max, a.count);
            reply_mpop(ctx.reply, k, &items);
            ctx.rewrote = true;
            pop_effect(&mut ctx.ks, k, a.max, Some(items.len()));
        }
    }
    Ok(())
}

fn timeout_reply(reply: &mut Reply) {
    reply.null_array();
}

/// Serves a client blocked in BZPOPMIN/BZPOPMAX on `key`.
fn serve_bzpop(ks: &mut KsView, argv: &[Vec<u8>], key: &[u8], reply: &mut Reply) -> Served {
    let max = argv[0].eq_ignore_ascii_case(b"bzpopmax");
    if !matches!(ks.write::<ZSet>(key), Ok(Some(_))) {
        return Served::NotReady;
    }
    let items = pop_elements(ks, key, max, 1);
    reply_bzpop(reply, key, &items);
    pop_effect(ks, key, max, None);
    Served::Done
}

/// Serves a client blocked in BZMPOP on `key`.
fn serve_bzmpop(ks: &mut KsView, argv: &[Vec<u8>], key: &[u8], reply: &mut Reply) -> Served {
    let args: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
    let Ok(a) = parse_mpop(&args, 2) else { return Served::NotReady };
    if !matches!(ks.write::<ZSet>(key), Ok(Some(_))) {
        return Served::NotReady;
    }
    let items = pop_elements(ks, key, a.max, a.count);
    reply_mpop(reply, key, &items);
    pop_effect(ks, key, a.max, Some(items.len()));
    Served::Done
}

fn bzpop_generic(ctx: &mut Ctx, max: bool) -> CmdResult {
    let n = ctx.args.len();
    let deadline = deadline_from_secs(ctx.args[n - 1], ctx.ks.now)?;
    let keys = &ctx.args[1..n - 1];
    if let Some(k) = first_nonempty(&mut ctx.ks, keys)? {
        let items = pop_elements(&mut ctx.ks, k, max, 1);
        reply_bzpop(ctx.reply, k, &items);
        ctx.rewrote = true;
        pop_effect(&mut ctx.ks, k, max, None);
        return Ok(());
    }
    if ctx.client.in_exec {
        timeout_reply(ctx.reply);
        return Ok(());
    }
    ctx.block(BlockRequest {
        argv: None,
        keys: keys.iter().map(|k| k.to_vec()).collect(),
        deadline_ms: deadline,
        serve: serve_bzpop,
        on_timeout: timeout_reply,
        registered: None,
    });
    Ok(())
}

// BZPOPMIN key [key ...] timeout
pub fn bzpopmin(ctx: &mut Ctx) -> CmdResult {
    bzpop_generic(ctx, false)
}

// BZPOPMAX key [key ...] timeout
pub fn bzpopmax(ctx: &mut Ctx) -> CmdResult {
    bzpop_generic(ctx, true)
}

// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]
pub fn bzmpop(ctx: &mut Ctx) -> CmdResult {
    let deadline = deadline_from_secs(ctx.arg(1), ctx.ks.now)?;
    let a = parse_mpop(ctx.args, 2)?;
    let keys = &ctx.args[a.keys.clone()];
    if let Some(k) = first_nonempty(&mut ctx.ks, keys)? {
        let items = pop_elements(&mut ctx.ks, k, a.max, a.count);
        reply_mpop(ctx.reply, k, &items);
        ctx.rewrote = true;
        pop_effect(&mut ctx.ks, k, a.max, Some(items.len()));
        return Ok(());
    }
    if ctx.client.in_exec {
        timeout_reply(ctx.reply);
        return Ok(());
    }
    ctx.block(BlockRequest {
        argv: None,
        keys: keys.iter().map(|k| k.to_vec()).collect(),
        deadline_ms: deadline,
        serve: serve_bzmpop,
        on_timeout: timeout_reply,
        registered: None,
    });
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// ZRANDMEMBER, ZSCAN
// ---------------------------------------------------------------------------------------------

// ZRANDMEMBER key [count [WITHSCORES]]
pub fn zrandmember(ctx: &mut Ctx) -> CmdResult {
    let argc = ctx.args.len();
    let mut count = None;
    let mut withscores = false;
    if argc >= 3 {
        let c = parse_int(ctx.arg(2))?;
        if c == i64::MIN {
            return Err(CmdError::msg(
                "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
            ));
        }
        if argc > 4 || (argc == 4 && !eq_ic(ctx.arg(3), "withscores")) {
            return Err(CmdError::Syntax);
        }
        if argc == 4 {
            withscores = true;
            if !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&c) {
                return Err(CmdError::msg("ERR value is out of range"));
            }
        }
        count = Some(c);
    }
    let mut rng = rand::thread_rng();
    let Some(z) = ctx.ks.read::<ZSet>(ctx.args[1])? else {
        match count {
            None => ctx.reply.null(),
            Some(_) => ctx.reply.array(0),
        }
        return Ok(());
    };
    let picks: Vec<(Box<[u8]>, f64)> = match count {
        None => {
            let (m, _) = z.random(&mut rng).expect("zsets are never empty");
            ctx.reply.bulk(&m);
            return Ok(());
        }
        Some(c) if c < 0 => {
            // Streamed: the reply grows with the data, never sized up front by the count.
            let n = c.unsigned_abs();
            let guard = crate::services::pubsub::OutputGuard::new(&ctx.srv.config.hot, &ctx.client.handle);
            let reply = &mut *ctx.reply;
            elements_header(reply, n as usize, withscores);
            z.sample(n, &mut rng, |m, s| {
                reply_element(reply, m, s, withscores);
                !guard.full(reply.buf.len())
            });
            return Ok(());
        }
        Some(c) => {
            let c = c as usize;
            let mut all = Vec::with_capacity(z.len());
            if c >= z.len() || c * 3 > z.len() {
                // Redis walks the whole set from its tail here.
                z.for_range(0, z.len() - 1, true, |m, s| all.push((Box::<[u8]>::from(m), s)));
                if c < all.len() {
                    all.partial_shuffle(&mut rng, c);
                    all.truncate(c);
                }
                all
            } else {
                let mut seen = std::collections::HashSet::new();
                while all.len() < c {
                    let (m, s) = z.random(&mut rng).unwrap();
                    if seen.insert(m.clone()) {
                        all.push((m.into_boxed_slice(), s));
                    }
                }
                all
            }
        }
    };
    reply_elements(ctx.reply, &picks, withscores);
    Ok(())
}

// ZSCAN key cursor [MATCH pattern] [COUNT count]
pub fn zscan(ctx: &mut Ctx) -> CmdResult {
    let cursor = parse_scan_cursor(ctx.arg(2))?;
    let args = ctx.args;
    let Some(z) = ctx.ks.read::<ZSet>(args[1])? else {
        ctx.reply.array(2);
        ctx.reply.bulk(b"0");
        ctx.reply.array(0);
        return Ok(());
    };
    let opts = parse_scan_opts(&args[3..])?;
    let mut out: Vec<(Vec<u8>, f64)> = Vec::new();
    let next = z.scan(cursor, opts.count, |m, s| {
        if opts.matches(m) {
            out.push((m.to_vec(), s))
        }
    });
    ctx.reply.array(2);
    ctx.reply.bulk(itoa::Buffer::new().format(next).as_bytes());
    ctx.reply.array(out.len() * 2);
    let mut buf = Vec::new();
    for (m, s) in &out {
        ctx.reply.bulk(m);
        buf.clear();
        crate::protocol::reply::fmt_double(*s, &mut buf);
        ctx.reply.bulk(&buf);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// ZUNION, ZINTER, ZDIFF (and STORE forms), ZINTERCARD
// ---------------------------------------------------------------------------------------------

/// (score, member) pairs of a computed result.
type Items = Vec<(f64, Box<[u8]>)>;

#[derive(Clone, Copy, PartialEq)]
enum ZOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

/// Redis's `zunionInterAggregate`; a SUM of +inf and -inf is 0 by convention.
fn aggregate(target: &mut f64, val: f64, agg: Aggregate) {
    match agg {
        Aggregate::Sum => {
            *target += val;
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Aggregate::Min => {
            if val < *target {
                *target = val
            }
        }
        Aggregate::Max => {
            if val > *target {
                *target = val
            }
        }
    }
}

/// An input of the multi-key operations: a sorted set, or a plain set whose members score 1.
#[derive(Clone, Copy)]
enum Src<'a> {
    Missing,
    Set(&'a Set),
    Z(&'a ZSet),
}

impl Src<'_> {
    fn len(&self) -> usize {
        match self {
            Src::Missing => 0,
            Src::Set(s) => s.len(),
            Src::Z(z) => z.len(),
        }
    }
    fn find(&self, m: &[u8]) -> Option<f64> {
        match self {
            Src::Missing => None,
            Src::Set(s) => s.contains(m).then_some(1.0),
            Src::Z(z) => z.score(m),
        }
    }
    fn for_each(&self, mut f: impl FnMut(&[u8], f64)) {
        match self {
            Src::Missing => {}
            Src::Set(s) => s.for_each(|m| f(m, 1.0)),
            Src::Z(z) => z.for_each(f),
        }
    }
}

/// Options of the multi-key operations.
struct OpArgs {
    keys: std::ops::Range<usize>,
    weights: Vec<f64>,
    agg: Aggregate,
    withscores: bool,
    limit: usize,
}

/// Parses `numkeys key [key ...]` and the options after it (Redis's
/// `zunionInterDiffGenericCommand`). Key types are checked between numkeys and the options,
/// as Redis does, so the loaned values come back with the options.
fn parse_op<'a>(
    ctx: &mut Ctx<'a, '_, '_>,
    numkeys_idx: usize,
    op: ZOp,
    store: bool,
    card: bool,
) -> Result<(OpArgs, Loaned<'a>), CmdError> {
    let n = parse_int(ctx.arg(numkeys_idx))?;
    if n < 1 {
        return Err(CmdError::msg(format!("ERR at least 1 input key is needed for '{}' command", ctx.cmd.full_name())));
    }
    if n as u64 > (ctx.args.len() - numkeys_idx - 1) as u64 {
        return Err(CmdError::Syntax);
    }
    let n = n as usize;
    let keys = numkeys_idx + 1..numkeys_idx + 1 + n;
    let loaned = Loaned::take(&mut ctx.ks, &ctx.args[keys.clone()]);
    for i in 0..n {
        if let Some(v) = loaned.get(i) {
            if !matches!(v, Value::Set(_) | Value::ZSet(_)) {
                loaned.restore(&mut ctx.ks);
                return Err(CmdError::WrongType);
            }
        }
    }
    let mut a = OpArgs { keys: keys.clone(), weights: vec![1.0; n], agg: Aggregate::Sum, withscores: false, limit: 0 };
    let mut j = keys.end;
    let args = ctx.args;
    let res: CmdResult = (|| {
        while j < args.len() {
            let remaining = args.len() - j;
            if op != ZOp::Diff && !card && remaining > n && eq_ic(args[j], "weights") {
                j += 1;
                for w in a.weights.iter_mut() {
                    *w = parse_score(args[j]).ok_or(CmdError::msg("ERR weight value is not a float"))?;
                    j += 1;
                }
            } else if op != ZOp::Diff && !card && remaining >= 2 && eq_ic(args[j], "aggregate") {
                let v = args[j + 1];
                a.agg = if eq_ic(v, "sum") {
                    Aggregate::Sum
                } else if eq_ic(v, "min") {
                    Aggregate::Min
                } else if eq_ic(v, "max") {
                    Aggregate::Max
                } else {
                    return Err(CmdError::Syntax);
                };
                j += 2;
            } else if card && remaining >= 2 && eq_ic(args[j], "limit") {
                // Redis words a limit that is not an integer the same way.
                let bad = || CmdError::msg("ERR LIMIT can't be negative");
                let l = parse_int(args[j + 1]).map_err(|_| bad())?;
                if l < 0 {
                    return Err(bad());
                }
                a.limit = l as usize;
                j += 2;
            } else if !store && !card && eq_ic(args[j], "withscores") {
                a.withscores = true;
                j += 1;
            } else {
                return Err(CmdError::Syntax);
            }
        }
        Ok(())
    })();
    if let Err(e) = res {
        loaned.restore(&mut ctx.ks);
        return Err(e);
    }
    Ok((a, loaned))
}

/// Computes the operation; returns the elements in no particular order and, for ZINTERCARD,
/// stops after `limit` matches.
fn compute_op(loaned: &Loaned, a: &OpArgs, op: ZOp, card_only: bool) -> (Items, usize) {
    let n = a.keys.len();
    let mut srcs: Vec<(Src, f64)> = (0..n)
        .map(|i| {
            let s = match loaned.get(i) {
                Some(Value::Set(s)) => Src::Set(s),
                Some(Value::ZSet(z)) => Src::Z(z),
                _ => Src::Missing,
            };
            (s, a.weights[i])
        })
        .collect();
    let mut out: Vec<(f64, Box<[u8]>)> = Vec::new();
    let mut card = 0usize;
    match op {
        ZOp::Inter => {
            // Smallest input first (Redis sorts the inputs by cardinality).
            srcs.sort_by_key(|(s, _)| s.len());
            if srcs[0].0.len() == 0 {
                return (out, 0);
            }
            let (first, w0) = srcs[0];
            let mut done = false;
            first.for_each(|m, sc| {
                if done {
                    return;
                }
                let mut score = w0 * sc;
                if score.is_nan() {
                    score = 0.0;
                }
                for (s, w) in &srcs[1..] {
                    match s.find(m) {
                        Some(v) => aggregate(&mut score, v * w, a.agg),
                        None => return,
                    }
                }
                card += 1;
                if card_only {
                    if a.limit > 0 && card >= a.limit {
                        done = true;
                    }
                } else {
                    out.push((score, m.into()));
                }
            });
        }
        ZOp::Union => {
            srcs.sort_by_key(|(s, _)| s.len());
            let mut acc: HashMap<Box<[u8]>, f64> = HashMap::new();
            for (s, w) in &srcs {
                s.for_each(|m, sc| {
                    let mut score = w * sc;
                    if score.is_nan() {
                        score = 0.0;
                    }
                    match acc.get_mut(m) {
                        Some(t) => aggregate(t, score, a.agg),
                        None => {
                            acc.insert(m.into(), score);
                        }
                    }
                });
            }
            out = acc.into_iter().map(|(m, s)| (s, m)).collect();
        }
        ZOp::Diff => {
            let first = srcs[0].0;
            first.for_each(|m, sc| {
                if !srcs[1..].iter().any(|(s, _)| s.find(m).is_some()) {
                    out.push((sc, m.into()));
                }
            });
        }
    }
    let c = if card_only { card } else { out.len() };
    (out, c)
}

fn zop_generic(ctx: &mut Ctx, op: ZOp, store: bool) -> CmdResult {
    let (a, loaned) = parse_op(ctx, if store { 2 } else { 1 }, op, store, false)?;
    let (mut items, _) = compute_op(&loaned, &a, op, false);
    loaned.restore(&mut ctx.ks);
    if store {
        let lim = ZLimits::from_ctx(ctx);
        let event = match op {
            ZOp::Union => "zunionstore",
            ZOp::Inter => "zinterstore",
            ZOp::Diff => "zdiffstore",
        };
        let n = store_zset(&mut ctx.ks, ctx.args[1], ZSet::build(items, &lim), event);
        ctx.reply.int(n as i64);
    } else {
        items.sort_by(|x, y| x.0.partial_cmp(&y.0).unwrap_or(std::cmp::Ordering::Equal).then_with(|| x.1.cmp(&y.1)));
        let items: Vec<(Box<[u8]>, f64)> = items.into_iter().map(|(s, m)| (m, s)).collect();
        reply_elements(ctx.reply, &items, a.withscores);
    }
    Ok(())
}

// ZUNION numkeys key [key ...] [WEIGHTS weight [weight ...]] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
pub fn zunion(ctx: &mut Ctx) -> CmdResult {
    zop_generic(ctx, ZOp::Union, false)
}

// ZINTER numkeys key [key ...] [WEIGHTS weight [weight ...]] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
pub fn zinter(ctx: &mut Ctx) -> CmdResult {
    zop_generic(ctx, ZOp::Inter, false)
}

// ZDIFF numkeys key [key ...] [WITHSCORES]
pub fn zdiff(ctx: &mut Ctx) -> CmdResult {
    zop_generic(ctx, ZOp::Diff, false)
}

// ZUNIONSTORE destination numkeys key [key ...] [WEIGHTS weight [weight ...]] [AGGREGATE SUM|MIN|MAX]
pub fn zunionstore(ctx: &mut Ctx) -> CmdResult {
    zop_generic(ctx, ZOp::Union, true)
}

// ZINTERSTORE destination numkeys key [key ...] [WEIGHTS weight [weight ...]] [AGGREGATE SUM|MIN|MAX]
pub fn zinterstore(ctx: &mut Ctx) -> CmdResult {
    zop_generic(ctx, ZOp::Inter, true)
}

// ZDIFFSTORE destination numkeys key [key ...]
pub fn zdiffstore(ctx: &mut Ctx) -> CmdResult {
    zop_generic(ctx, ZOp::Diff, true)
}

// ZINTERCARD numkeys key [key ...] [LIMIT limit]
pub fn zintercard(ctx: &mut Ctx) -> CmdResult {
    let (a, loaned) = parse_op(ctx, 1, ZOp::Inter, false, true)?;
    let (_, card) = compute_op(&loaned, &a, ZOp::Inter, true);
    loaned.restore(&mut ctx.ks);
    ctx.reply.int(card as i64);
    Ok(())
}
