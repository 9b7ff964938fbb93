//! Lists (Redis's `t_list.c`): the list type API, then the list commands, then the blocking
//! commands and the functions that serve their waiters.
//!
//! Storage is one `VecDeque` of boxed elements: O(1) push and pop at both ends, O(1) indexing,
//! and no capacity slack per element. What OBJECT ENCODING reports follows Redis 7.2: a list is
//! `listpack` while it would fit in one listpack under `list-max-listpack-size`, and `quicklist`
//! once it grew past that. To decide exactly when Redis would convert, the list keeps the byte
//! size its listpack would have (`lp_bytes`), computed with listpack's own entry encoding.

use crate::engine::list::*;
use crate::engine::Value;
use crate::exec::blocking::{self, BlockRequest, Served};
use crate::exec::*;
use crate::protocol::Reply;
use crate::services::notify;
use std::sync::atomic::{AtomicI64, Ordering};

impl End {
    /// Parses `LEFT` / `RIGHT` (Redis's `getListPositionFromObjectOrReply`).
    fn parse(arg: &[u8]) -> Result<End, CmdError> {
        if eq_ic(arg, "LEFT") {
            Ok(End::Head)
        } else if eq_ic(arg, "RIGHT") {
            Ok(End::Tail)
        } else {
            Err(CmdError::Syntax)
        }
    }

    fn pop_name(self) -> &'static [u8] {
        match self {
            End::Head => b"LPOP",
            End::Tail => b"RPOP",
        }
    }

    /// The keyspace event of a pop from this end.
    fn pop_event(self) -> &'static str {
        match self {
            End::Head => "lpop",
            End::Tail => "rpop",
        }
    }

    /// The keyspace event of a push onto this end.
    fn push_event(self) -> &'static str {
        match self {
            End::Head => "lpush",
            End::Tail => "rpush",
        }
    }

    /// As Redis writes it into a served BLMOVE's LMOVE (its shared `left` / `right`).
    fn word(self) -> &'static [u8] {
        match self {
            End::Head => b"left",
            End::Tail => b"right",
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers shared by the commands
// ---------------------------------------------------------------------------------------------

/// The last `list-max-listpack-size` a list command read from the configuration. Blocked
/// clients are served by a `ServeFn`, which gets no server handle; every list write refreshes
/// this before it runs, and waiters are served right after such a write, so they see the
/// setting that write saw.
static FILL: AtomicI64 = AtomicI64::new(-2);

fn fill(ctx: &Ctx) -> i64 {
    let f = ctx.srv.config.hot.list_max_listpack_size.load(Ordering::Relaxed);
    FILL.store(f, Ordering::Relaxed);
    f
}

fn cached_fill() -> i64 {
    FILL.load(Ordering::Relaxed)
}

/// Redis's `getRangeLongFromObjectOrReply`: an integer in `min..=max`; with `msg`, that text
/// is the error for both a non-integer and an out-of-range value.
pub(crate) fn range_long(arg: &[u8], min: i64, max: i64, msg: Option<&'static str>) -> Result<i64, CmdError> {
    let v = match crate::protocol::parse_i64(arg) {
        Some(v) => v,
        None => return Err(msg.map(|m| CmdError::msg(format!("ERR {m}"))).unwrap_or(CmdError::NotInteger)),
    };
    if v < min || v > max {
        return Err(match msg {
            Some(m) => CmdError::msg(format!("ERR {m}")),
            None => CmdError::msg(format!("ERR value is out of range, value must between {min} and {max}")),
        });
    }
    Ok(v)
}

/// Redis's `getPositiveLongFromObjectOrReply` without a custom message.
fn positive_long(arg: &[u8]) -> Result<i64, CmdError> {
    range_long(arg, 0, i64::MAX, Some("value is out of range, must be positive"))
}

/// After elements were removed from the list at `key`: raises `event` (`lpop`, `ltrim` …),
/// then deletes the key if the list is empty (raising `del`, as Redis's
/// `listElementsRemoved`), otherwise lets it shrink back to a listpack; counts the change
/// either way.
fn after_removal(ks: &mut KsView, key: &[u8], fill: i64, event: &'static str) {
    ks.note(notify::LIST, event, key);
    let empty = match ks.peek(key).and_then(|o| o.into_obj()) {
        Some(Value::List(l)) => {
            l.try_convert_quicklist(fill, true);
            l.is_empty()
        }
        _ => false,
    };
    if empty {
        ks.delete(key);
        ks.note(notify::GENERIC, "del", key);
    } else {
        ks.modified(key);
    }
}

/// Pops up to `count` elements from `end` of the list at `key` (which exists, is a list and
/// is not empty) and adds them to `reply` as an array, in pop order. Returns how many.
fn pop_range(ks: &mut KsView, key: &[u8], end: End, count: usize, reply: &mut Reply, fill: i64) -> usize {
    let n = match ks.peek(key).and_then(|o| o.into_obj()) {
        Some(Value::List(l)) => {
            let n = count.min(l.len());
            reply.array(n);
            for _ in 0..n {
                let v = l.pop(end).expect("n ≤ len");
                reply.bulk(&v);
            }
            n
        }
        _ => unreachable!("pop_range on a missing list"),
    };
    after_removal(ks, key, fill, end.pop_event());
    n
}

/// Pops one element from `end` of the list at `key` (existing, non-empty).
fn pop_one(ks: &mut KsView, key: &[u8], end: End, fill: i64) -> Box<[u8]> {
    let v = match ks.peek(key).and_then(|o| o.into_obj()) {
        Some(Value::List(l)) => l.pop(end).expect("non-empty list"),
        _ => unreachable!("pop_one on a missing list"),
    };
    after_removal(ks, key, fill, end.pop_event());
    v
}

/// Pushes `v` onto `end` of the list at `dst`, creating it (LMOVE's destination, Redis's
/// `lmoveHandlePush`). The caller checked that `dst` is missing or a list.
fn push_to(ks: &mut KsView, dst: &[u8], v: &[u8], end: End, fill: i64) {
    match ks.peek(dst).and_then(|o| o.into_obj()) {
        Some(Value::List(l)) => {
            l.before_append(fill, v.len(), 1);
            l.push(v, end);
        }
        _ => {
            let mut l = List::new();
            l.before_append(fill, v.len(), 1);
            l.push(v, end);
            ks.insert_new(dst, Value::List(Box::new(l)));
        }
    }
    ks.modified(dst);
    ks.note(notify::LIST, end.push_event(), dst);
    ks.signal_ready(dst);
}

/// Whether `key` holds something other than a list.
fn is_other_type(ks: &mut KsView, key: &[u8]) -> bool {
    ks.lookup_write(key).is_some_and(|o| !matches!(*o, Value::List(_)))
}

/// Non-empty list at `key`? (Err for another type.)
fn has_elements(ks: &mut KsView, key: &[u8]) -> Result<bool, CmdError> {
    Ok(ks.write::<List>(key)?.is_some_and(|l| !l.is_empty()))
}

// ---------------------------------------------------------------------------------------------
// Pushes
// ---------------------------------------------------------------------------------------------

/// Redis's `pushGenericCommand`: LPUSH/RPUSH, and with `only_existing` LPUSHX/RPUSHX.
fn push_generic(ctx: &mut Ctx, end: End, only_existing: bool) -> CmdResult {
    let fill = fill(ctx);
    let key = ctx.arg(1);
    let elements = &ctx.args[2..];
    let raw: usize = elements.iter().map(|e| e.len()).sum();
    let len = match ctx.ks.write::<List>(key)? {
        Some(l) => {
            l.before_append(fill, raw, elements.len());
            for e in elements {
                l.push(e, end);
            }
            l.len()
        }
        None if only_existing => {
            ctx.reply.int(0);
            return Ok(());
        }
        None => {
            let mut l = List::new();
            l.before_append(fill, raw, elements.len());
            for e in elements {
                l.push(e, end);
            }
            let n = l.len();
            ctx.ks.insert_new(key, Value::List(Box::new(l)));
            n
        }
    };
    ctx.ks.modified(key);
    ctx.ks.note(notify::LIST, end.push_event(), key);
    ctx.ks.signal_ready(key);
    ctx.reply.int(len as i64);
    Ok(())
}

// LPUSH key element [element ...]
pub fn lpush(ctx: &mut Ctx) -> CmdResult {
    push_generic(ctx, End::Head, false)
}

// RPUSH key element [element ...]
pub fn rpush(ctx: &mut Ctx) -> CmdResult {
    push_generic(ctx, End::Tail, false)
}

// LPUSHX key element [element ...]
pub fn lpushx(ctx: &mut Ctx) -> CmdResult {
    push_generic(ctx, End::Head, true)
}

// RPUSHX key element [element ...]
pub fn rpushx(ctx: &mut Ctx) -> CmdResult {
    push_generic(ctx, End::Tail, true)
}

// LINSERT key <BEFORE | AFTER> pivot element
pub fn linsert(ctx: &mut Ctx) -> CmdResult {
    let after = if eq_ic(ctx.arg(2), "AFTER") {
        true
    } else if eq_ic(ctx.arg(2), "BEFORE") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    let fill = fill(ctx);
    let (key, pivot, element) = (ctx.arg(1), ctx.arg(3), ctx.arg(4));
    let Some(l) = ctx.ks.write::<List>(key)? else {
        ctx.reply.int(0);
        return Ok(());
    };
    // Redis converts before looking for the pivot, so even a failed insert may convert.
    l.before_append(fill, element.len(), 1);
    let Some(pos) = l.position(pivot) else {
        ctx.reply.int(-1);
        return Ok(());
    };
    l.insert(if after { pos + 1 } else { pos }, element);
    let len = l.len();
    ctx.ks.modified(key);
    ctx.ks.note(notify::LIST, "linsert", key);
    ctx.ks.signal_ready(key);
    ctx.reply.int(len as i64);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Reads
// ---------------------------------------------------------------------------------------------

// LLEN key
pub fn llen(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.arg(1);
    let n = ctx.ks.read::<List>(key)?.map_or(0, |l| l.len());
    ctx.reply.int(n as i64);
    Ok(())
}

// LINDEX key index
pub fn lindex(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.arg(1);
    // The key is looked up before the index is parsed, as in Redis.
    let Some(l) = ctx.ks.read::<List>(key)? else {
        ctx.reply.null();
        return Ok(());
    };
    let index = parse_int(ctx.args[2])?;
    match l.get(index) {
        Some(v) => ctx.reply.bulk(&v),
        None => ctx.reply.null(),
    }
    Ok(())
}

// LRANGE key start stop
pub fn lrange(ctx: &mut Ctx) -> CmdResult {
    let start = ctx.arg_i64(2)?;
    let end = ctx.arg_i64(3)?;
    let key = ctx.arg(1);
    let Some(l) = ctx.ks.read::<List>(key)? else {
        ctx.reply.array(0);
        return Ok(());
    };
    match l.range_bounds(start, end) {
        None => ctx.reply.array(0),
        Some((s, e)) => {
            ctx.reply.array(e - s + 1);
            for v in l.range(s, e) {
                ctx.reply.bulk(&v);
            }
        }
    }
    Ok(())
}

// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]
pub fn lpos(ctx: &mut Ctx) -> CmdResult {
    let args = ctx.args;
    let element = args[2];
    let (mut rank, mut count, mut maxlen) = (1i64, None::<i64>, 0i64);
    let mut j = 3;
    while j < args.len() {
        let more = j + 1 < args.len();
        if eq_ic(args[j], "RANK") && more {
            j += 1;
            rank = range_long(args[j], -i64::MAX, i64::MAX, None)?;
            if rank == 0 {
                return Err(CmdError::msg(
                    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... \
                     or use negative to start from the end of the list",
                ));
            }
        } else if eq_ic(args[j], "COUNT") && more {
            j += 1;
            count = Some(range_long(args[j], 0, i64::MAX, Some("COUNT can't be negative"))?);
        } else if eq_ic(args[j], "MAXLEN") && more {
            j += 1;
            maxlen = range_long(args[j], 0, i64::MAX, Some("MAXLEN can't be negative"))?;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let Some(l) = ctx.ks.read::<List>(args[1])? else {
        match count {
            Some(_) => ctx.reply.array(0),
            None => ctx.reply.null(),
        }
        return Ok(());
    };
    // A negative rank searches from the tail.
    let from_tail = rank < 0;
    let rank = rank.unsigned_abs();
    let len = l.len();
    let limit = if maxlen == 0 { len } else { (maxlen as u64).min(len as u64) as usize };
    let mut found = Vec::new();
    let mut matches = 0u64;
    let wanted = match count {
        None => 1,
        Some(0) => u64::MAX,
        Some(c) => c as u64,
    };
    // One pass in the search's direction (a compressed middle is unpacked chunk by chunk).
    let scan: Box<dyn Iterator<Item = (usize, _)>> =
        if from_tail { Box::new(l.iter().rev().enumerate()) } else { Box::new(l.iter().enumerate()) };
    for (scanned, e) in scan.take(limit) {
        let pos = if from_tail { len - 1 - scanned } else { scanned };
        if *e == *element {
            matches += 1;
            if matches >= rank {
                found.push(pos as i64);
                if found.len() as u64 >= wanted {
                    break;
                }
            }
        }
    }
    match count {
        Some(_) => {
            ctx.reply.array(found.len());
            for p in found {
                ctx.reply.int(p);
            }
        }
        None => match found.first() {
            Some(&p) => ctx.reply.int(p),
            None => ctx.reply.null(),
        },
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// In-place changes
// ---------------------------------------------------------------------------------------------

// LSET key index element
pub fn lset(ctx: &mut Ctx) -> CmdResult {
    let fill = fill(ctx);
    let (key, element) = (ctx.arg(1), ctx.arg(3));
    let Some(l) = ctx.ks.write::<List>(key)? else { return Err(CmdError::NoSuchKey) };
    let index = parse_int(ctx.args[2])?;
    l.before_append(fill, element.len(), 1);
    if !l.set(index, element) {
        return Err(CmdError::OutOfRange);
    }
    // A big element may have been replaced by a small one: the growing case was handled
    // above, this handles shrinking.
    l.try_convert_quicklist(fill, true);
    ctx.ks.modified(key);
    ctx.ks.note(notify::LIST, "lset", key);
    ctx.reply.ok();
    Ok(())
}

// LREM key count element
pub fn lrem(ctx: &mut Ctx) -> CmdResult {
    let count = ctx.arg_i64(2)?;
    let fill = fill(ctx);
    let (key, element) = (ctx.arg(1), ctx.arg(3));
    let Some(l) = ctx.ks.write::<List>(key)? else {
        ctx.reply.int(0);
        return Ok(());
    };
    let removed = l.remove_matching(element, count);
    if removed > 0 {
        after_removal(&mut ctx.ks, key, fill, "lrem");
    }
    ctx.reply.int(removed as i64);
    Ok(())
}

// LTRIM key start stop
pub fn ltrim(ctx: &mut Ctx) -> CmdResult {
    let start = ctx.arg_i64(2)?;
    let end = ctx.arg_i64(3)?;
    let fill = fill(ctx);
    let key = ctx.arg(1);
    let Some(l) = ctx.ks.write::<List>(key)? else {
        ctx.reply.ok();
        return Ok(());
    };
    let keep = l.range_bounds(start, end);
    let removed = l.trim(keep);
    if removed > 0 {
        after_removal(&mut ctx.ks, key, fill, "ltrim");
    } else {
        // Redis signals the key modified and raises `ltrim` even when nothing was trimmed
        // (WATCH and subscribers see it), but counts no change, so nothing is propagated.
        ctx.ks.touch(key);
        ctx.ks.note(notify::LIST, "ltrim", key);
    }
    ctx.reply.ok();
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Pops and moves
// ---------------------------------------------------------------------------------------------

/// Redis's `popGenericCommand`: LPOP/RPOP with an optional count.
fn pop_generic(ctx: &mut Ctx, end: End) -> CmdResult {
    if ctx.args.len() > 3 {
        return Err(CmdError::Arity(ctx.cmd.full_name().to_string()));
    }
    let count = match ctx.args.get(2) {
        Some(a) => Some(positive_long(a)?),
        None => None,
    };
    let fill = fill(ctx);
    let key = ctx.arg(1);
    if ctx.ks.write::<List>(key)?.is_none() {
        match count {
            Some(_) => ctx.reply.null_array(),
            None => ctx.reply.null(),
        }
        return Ok(());
    }
    match count {
        Some(0) => ctx.reply.array(0),
        Some(n) => {
            pop_range(&mut ctx.ks, key, end, n as usize, ctx.reply, fill);
        }
        None => {
            let v = pop_one(&mut ctx.ks, key, end, fill);
            ctx.reply.bulk(&v);
        }
    }
    Ok(())
}

// LPOP key [count]
pub fn lpop(ctx: &mut Ctx) -> CmdResult {
    pop_generic(ctx, End::Head)
}

// RPOP key [count]
pub fn rpop(ctx: &mut Ctx) -> CmdResult {
    pop_generic(ctx, End::Tail)
}

/// Redis's `lmoveGenericCommand` for a source that exists: pops from `src`, pushes onto
/// `dst`, replies with the element. Returns false (nothing done, nothing replied) when the
/// source is missing or empty.
fn lmove_now(
    ks: &mut KsView,
    src: &[u8],
    dst: &[u8],
    from: End,
    to: End,
    reply: &mut Reply,
    fill: i64,
) -> Result<bool, CmdError> {
    if !has_elements(ks, src)? {
        return Ok(false);
    }
    if is_other_type(ks, dst) {
        return Err(CmdError::WrongType);
    }
    let v = match ks.peek(src).and_then(|o| o.into_obj()) {
        Some(Value::List(l)) => l.pop(from).expect("non-empty"),
        _ => unreachable!(),
    };
    // Pushing before the source is checked for emptiness keeps `LMOVE k k` of a one-element
    // list from deleting the key.
    // Redis's order: the push onto the destination (`lpush`/`rpush`), then the pop from the
    // source (`lpop`/`rpop`, and `del` if it emptied).
    push_to(ks, dst, &v, to, fill);
    after_removal(ks, src, fill, from.pop_event());
    reply.bulk(&v);
    Ok(true)
}

// LMOVE source destination <LEFT | RIGHT> <LEFT | RIGHT>
pub fn lmove(ctx: &mut Ctx) -> CmdResult {
    let from = End::parse(ctx.arg(3))?;
    let to = End::parse(ctx.arg(4))?;
    lmove_generic(ctx, from, to)
}

// RPOPLPUSH source destination
pub fn rpoplpush(ctx: &mut Ctx) -> CmdResult {
    lmove_generic(ctx, End::Tail, End::Head)
}

fn lmove_generic(ctx: &mut Ctx, from: End, to: End) -> CmdResult {
    let fill = fill(ctx);
    let (src, dst) = (ctx.arg(1), ctx.arg(2));
    if !lmove_now(&mut ctx.ks, src, dst, from, to, ctx.reply, fill)? {
        ctx.reply.null();
    }
    Ok(())
}

/// LMPOP / BLMPOP arguments from `numkeys_idx` on: (keys, end, count).
fn parse_mpop<'a>(args: &[&'a [u8]], numkeys_idx: usize) -> Result<(Vec<&'a [u8]>, End, usize), CmdError> {
    let numkeys = range_long(args[numkeys_idx], 1, i64::MAX, Some("numkeys should be greater than 0"))? as u64;
    let where_idx = (numkeys_idx as u64).saturating_add(numkeys).saturating_add(1);
    if where_idx >= args.len() as u64 {
        return Err(CmdError::Syntax);
    }
    let where_idx = where_idx as usize;
    let end = End::parse(args[where_idx])?;
    let mut count = None;
    let mut j = where_idx + 1;
    while j < args.len() {
        if count.is_none() && eq_ic(args[j], "COUNT") && j + 1 < args.len() {
            j += 1;
            count = Some(range_long(args[j], 1, i64::MAX, Some("count should be greater than 0"))?);
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let count = count.unwrap_or(1) as usize;
    Ok((args[numkeys_idx + 1..where_idx].to_vec(), end, count))
}

/// Pops from the first non-empty list among `keys` (LMPOP): replies `[key, [elements]]` and
/// records the effect as `[LR]POP key n`. Returns false if all were empty.
fn mpop_now(
    ks: &mut KsView,
    keys: &[&[u8]],
    end: End,
    count: usize,
    reply: &mut Reply,
    fill: i64,
) -> Result<bool, CmdError> {
    for &key in keys {
        if !has_elements(ks, key)? {
            continue;
        }
        reply.array(2);
        reply.bulk(key);
        let n = pop_range(ks, key, end, count, reply, fill);
        ks.effect(vec![end.pop_name().to_vec(), key.to_vec(), n.to_string().into_bytes()]);
        return Ok(true);
    }
    Ok(false)
}

// LMPOP numkeys key [key ...] <LEFT | RIGHT> [COUNT count]
pub fn lmpop(ctx: &mut Ctx) -> CmdResult {
    let (keys, end, count) = parse_mpop(ctx.args, 1)?;
    let fill = fill(ctx);
    // mpop_now records the rewritten effect itself.
    ctx.rewrote = true;
    if !mpop_now(&mut ctx.ks, &keys, end, count, ctx.reply, fill)? {
        ctx.reply.null_array();
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Blocking commands
//
// Each tries to serve at once like its non-blocking form and propagates as that form; inside
// EXEC it replies as on timeout; otherwise it blocks with a serve function that redoes the
// pop on the waiter's behalf when a key is signalled ready.
// ---------------------------------------------------------------------------------------------

fn timeout_null_array(reply: &mut Reply) {
    reply.null_array();
}

fn timeout_null(reply: &mut Reply) {
    reply.null();
}

/// BLPOP / BRPOP: `argv` is `B[LR]POP key [key ...] timeout`.
fn bpop_generic(ctx: &mut Ctx, end: End) -> CmdResult {
    let args = ctx.args;
    let deadline = blocking::deadline_from_secs(args[args.len() - 1], ctx.ks.now)?;
    let fill = fill(ctx);
    let keys = &args[1..args.len() - 1];
    for &key in keys {
        if !has_elements(&mut ctx.ks, key)? {
            continue;
        }
        let v = pop_one(&mut ctx.ks, key, end, fill);
        ctx.reply.array(2);
        ctx.reply.bulk(key);
        ctx.reply.bulk(&v);
        ctx.rewrite_effect(vec![end.pop_name().to_vec(), key.to_vec()]);
        return Ok(());
    }
    if ctx.client.in_exec {
        ctx.reply.null_array();
        return Ok(());
    }
    ctx.block(BlockRequest {
        argv: None,
        keys: keys.iter().map(|k| k.to_vec()).collect(),
        deadline_ms: deadline,
        serve: serve_bpop,
        on_timeout: timeout_null_array,
        registered: None,
    });
    Ok(())
}

/// Serves a client blocked in BLPOP/BRPOP from `key`.
fn serve_bpop(ks: &mut KsView, argv: &[Vec<u8>], key: &[u8], reply: &mut Reply) -> Served {
    let end = if argv[0].eq_ignore_ascii_case(b"BRPOP") { End::Tail } else { End::Head };
    if !matches!(has_elements(ks, key), Ok(true)) {
        return Served::NotReady;
    }
    let v = pop_one(ks, key, end, cached_fill());
    reply.array(2);
    reply.bulk(key);
    reply.bulk(&v);
    ks.effect(vec![end.pop_name().to_vec(), key.to_vec()]);
    Served::Done
}

// BLPOP key [key ...] timeout
pub fn blpop(ctx: &mut Ctx) -> CmdResult {
    bpop_generic(ctx, End::Head)
}

// BRPOP key [key ...] timeout
pub fn brpop(ctx: &mut Ctx) -> CmdResult {
    bpop_generic(ctx, End::Tail)
}

// BLMPOP timeout numkeys key [key ...] <LEFT | RIGHT> [COUNT count]
pub fn blmpop(ctx: &mut Ctx) -> CmdResult {
    let (keys, end, count) = parse_mpop(ctx.args, 2)?;
    let deadline = blocking::deadline_from_secs(ctx.arg(1), ctx.ks.now)?;
    let fill = fill(ctx);
    // Every key is type-checked before anything is popped, as in Redis.
    ctx.rewrote = true;
    if mpop_now(&mut ctx.ks, &keys, end, count, ctx.reply, fill)? {
        return Ok(());
    }
    ctx.rewrote = false;
    if ctx.client.in_exec {
        ctx.reply.null_array();
        return Ok(());
    }
    ctx.block(BlockRequest {
        argv: None,
        keys: keys.iter().map(|k| k.to_vec()).collect(),
        deadline_ms: deadline,
        serve: serve_blmpop,
        on_timeout: timeout_null_array,
        registered: None,
    });
    Ok(())
}

/// Serves a client blocked in BLMPOP from `key`.
fn serve_blmpop(ks: &mut KsView, argv: &[Vec<u8>], key: &[u8], reply: &mut Reply) -> Served {
    let args: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
    let Ok((_, end, count)) = parse_mpop(&args, 2) else { return Served::NotReady };
    if !matches!(has_elements(ks, key), Ok(true)) {
        return Served::NotReady;
    }
    match mpop_now(ks, &[key], end, count, reply, cached_fill()) {
        Ok(true) => Served::Done,
        _ => Served::NotReady,
    }
}

/// BLMOVE / BRPOPLPUSH once the arguments are parsed.
fn blmove_generic(ctx: &mut Ctx, from: End, to: End, deadline: Option<i64>) -> CmdResult {
    let fill = fill(ctx);
    let (src, dst) = (ctx.arg(1), ctx.arg(2));
    if lmove_now(&mut ctx.ks, src, dst, from, to, ctx.reply, fill)? {
        ctx.rewrite_effect(lmove_effect(ctx.args, src, dst, from, to, false));
        return Ok(());
    }
    if ctx.client.in_exec {
        ctx.reply.null();
        return Ok(());
    }
    ctx.block(BlockRequest {
        argv: None,
        keys: vec![src.to_vec()],
        deadline_ms: deadline,
        serve: serve_blmove,
        on_timeout: timeout_null,
        registered: None,
    });
    Ok(())
}

/// BLMOVE propagates as LMOVE, BRPOPLPUSH as RPOPLPUSH: with the client's own direction
/// words when it moved at once, with Redis's lower-case ones when it was served blocked.
fn lmove_effect<A: AsRef<[u8]>>(argv: &[A], src: &[u8], dst: &[u8], from: End, to: End, served: bool) -> Vec<Vec<u8>> {
    if argv[0].as_ref().eq_ignore_ascii_case(b"BRPOPLPUSH") {
        vec![b"RPOPLPUSH".to_vec(), src.to_vec(), dst.to_vec()]
    } else if served {
        vec![b"LMOVE".to_vec(), src.to_vec(), dst.to_vec(), from.word().to_vec(), to.word().to_vec()]
    } else {
        vec![b"LMOVE".to_vec(), src.to_vec(), dst.to_vec(), argv[3].as_ref().to_vec(), argv[4].as_ref().to_vec()]
    }
}

/// Serves a client blocked in BLMOVE/BRPOPLPUSH from its source `key`.
fn serve_blmove(ks: &mut KsView, argv: &[Vec<u8>], key: &[u8], reply: &mut Reply) -> Served {
    let (from, to) = if argv[0].eq_ignore_ascii_case(b"BRPOPLPUSH") {
        (End::Tail, End::Head)
    } else {
        match (End::parse(&argv[3]), End::parse(&argv[4])) {
            (Ok(f), Ok(t)) => (f, t),
            _ => return Served::NotReady,
        }
    };
    let dst = argv[2].as_slice();
    // The writer that made the source ready may not hold the destination's shard: the waiter
    // then re-runs BLMOVE itself, taking both locks in order.
    if !ks.locks.holds(ks.db, crate::engine::key_shard(dst)) {
        return Served::Retry;
    }
    if !matches!(has_elements(ks, key), Ok(true)) {
        return Served::NotReady;
    }
    // Redis 7.2 re-runs the command for the waiter: a destination of another type is the
    // waiter's WRONGTYPE error, which ends its wait.
    match lmove_now(ks, key, dst, from, to, reply, cached_fill()) {
        Ok(true) => {
            ks.effect(lmove_effect(argv, key, dst, from, to, true));
            Served::Done
        }
        Ok(false) => Served::NotReady,
        Err(e) => {
            reply.error(&e.text());
            Served::Done
        }
    }
}

// BLMOVE source destination <LEFT | RIGHT> <LEFT | RIGHT> timeout
pub fn blmove(ctx: &mut Ctx) -> CmdResult {
    let from = End::parse(ctx.arg(3))?;
    let to = End::parse(ctx.arg(4))?;
    let deadline = blocking::deadline_from_secs(ctx.arg(5), ctx.ks.now)?;
    blmove_generic(ctx, from, to, deadline)
}

// BRPOPLPUSH source destination timeout
pub fn brpoplpush(ctx: &mut Ctx) -> CmdResult {
    let deadline = blocking::deadline_from_secs(ctx.arg(3), ctx.ks.now)?;
    blmove_generic(ctx, End::Tail, End::Head, deadline)
}
