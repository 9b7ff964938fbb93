//! Hashes (Redis's `t_hash.c`): the hash type API, then the hash commands.
//!
//! Two encodings, as OBJECT ENCODING reports them: `listpack`, the pairs packed into one byte
//! buffer searched linearly, and `hashtable`, our [`Dict`] (reverse-binary SCAN cursor, random
//! sampling, incremental rehash). A hash converts once it has more than `hash-max-listpack-entries`
//! fields or a field or value longer than `hash-max-listpack-value` bytes, and never converts
//! back, like Redis.
//!
//! Memory: a big hash costs one dict node per field (next pointer, boxed field, value), the
//! field's bytes and — only for values longer than [`INLINE`] bytes — one value allocation.
//! Short values (counters, ids, small strings) live inside the node.

use crate::engine::glob::glob_match;
use crate::engine::hash::*;
use crate::engine::ldouble::LongDouble;
use crate::engine::Value;
use crate::exec::*;
use crate::protocol::Proto;
use crate::services::notify;
use std::sync::atomic::Ordering;

impl Limits {
    pub fn from_ctx(ctx: &Ctx) -> Limits {
        let h = &ctx.srv.config.hot;
        Limits {
            max_entries: h.hash_max_listpack_entries.load(Ordering::Relaxed),
            max_value: h.hash_max_listpack_value.load(Ordering::Relaxed),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers shared by the commands
// ---------------------------------------------------------------------------------------------

/// Redis's `hashTypeLookupWriteOrCreate`: the hash at `key`, created empty if missing. The
/// caller must leave it non-empty (or delete it) before returning.
fn hash_or_create<'v>(ks: &'v mut KsView<'_, '_>, key: &[u8]) -> Result<&'v mut Hash, CmdError> {
    if ks.write::<Hash>(key)?.is_none() {
        ks.insert_new(key, Value::Hash(Hash::default()));
    }
    Ok(ks.write::<Hash>(key)?.expect("just created"))
}

/// Deletes `key` if its hash is empty (raising `del`), else just counts the change.
fn after_removal(ks: &mut KsView, key: &[u8]) {
    let empty = matches!(ks.peek(key).and_then(|o| o.into_obj()), Some(Value::Hash(h)) if h.is_empty());
    if empty {
        ks.delete(key);
        ks.note(notify::GENERIC, "del", key);
    } else {
        ks.modified(key);
    }
}

// ---------------------------------------------------------------------------------------------
// Writes
// ---------------------------------------------------------------------------------------------

/// HSET and HMSET: set every pair; returns how many fields were new.
fn hset_generic(ctx: &mut Ctx) -> Result<i64, CmdError> {
    let args = ctx.args;
    if args.len() % 2 == 1 {
        return Err(CmdError::Arity(ctx.cmd.full_name().to_string()));
    }
    let lim = Limits::from_ctx(ctx);
    let key = args[1];
    let h = hash_or_create(&mut ctx.ks, key)?;
    h.convert_for(args[2..].iter().map(|a| a.len()), lim);
    let mut created = 0;
    for pair in args[2..].chunks(2) {
        created += h.set(pair[0], pair[1], lim) as i64;
    }
    ctx.ks.modified(key);
    // Raised even when no field changed.
    ctx.ks.note(notify::HASH, "hset", key);
    Ok(created)
}

// HSET key field value [field value ...]
pub fn hset(ctx: &mut Ctx) -> CmdResult {
    let n = hset_generic(ctx)?;
    ctx.reply.int(n);
    Ok(())
}

// HMSET key field value [field value ...]
pub fn hmset(ctx: &mut Ctx) -> CmdResult {
    hset_generic(ctx)?;
    ctx.reply.ok();
    Ok(())
}

// HSETNX key field value
pub fn hsetnx(ctx: &mut Ctx) -> CmdResult {
    let lim = Limits::from_ctx(ctx);
    let (key, field, value) = (ctx.arg(1), ctx.arg(2), ctx.arg(3));
    if ctx.ks.write::<Hash>(key)?.is_some_and(|h| h.contains(field)) {
        ctx.reply.int(0);
        return Ok(());
    }
    let h = hash_or_create(&mut ctx.ks, key)?;
    h.set(field, value, lim);
    ctx.ks.modified(key);
    ctx.ks.note(notify::HASH, "hset", key);
    ctx.reply.int(1);
    Ok(())
}

// HDEL key field [field ...]
pub fn hdel(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.arg(1);
    let Some(h) = ctx.ks.write::<Hash>(key)? else {
        ctx.reply.int(0);
        return Ok(());
    };
    let mut deleted = 0;
    for f in &ctx.args[2..] {
        if h.remove(f) {
            deleted += 1;
            if h.is_empty() {
                break;
            }
        }
    }
    if deleted > 0 {
        ctx.ks.note(notify::HASH, "hdel", key);
        after_removal(&mut ctx.ks, key);
    }
    ctx.reply.int(deleted);
    Ok(())
}

// HGETDEL key FIELDS numfields field [field ...]   (Valkey 9.0)
//
// The fields' values (null for a missing one), then the fields are gone; the key goes with its
// last field. Propagated as it came when something was deleted, as Valkey does.
pub fn hgetdel(ctx: &mut Ctx) -> CmdResult {
    let args = ctx.args;
    if !eq_ic(args[2], "FIELDS") {
        return Err(CmdError::Syntax);
    }
    let n = parse_int(args[3])?;
    let fields = &args[4..];
    if n < 1 || n as usize != fields.len() {
        return Err(CmdError::msg("ERR numfields should be greater than 0 and match the provided number of fields"));
    }
    let key = args[1];
    let Some(h) = ctx.ks.write::<Hash>(key)? else {
        ctx.reply.array(fields.len());
        for _ in fields {
            ctx.reply.null();
        }
        ctx.no_effect();
        return Ok(());
    };
    ctx.reply.array(fields.len());
    let mut deleted = 0;
    for f in fields {
        match h.get(f) {
            Some(v) => {
                ctx.reply.bulk(v);
                h.remove(f);
                deleted += 1;
            }
            None => ctx.reply.null(),
        }
    }
    if deleted > 0 {
        ctx.ks.note(notify::HASH, "hdel", key);
        after_removal(&mut ctx.ks, key);
    } else {
        ctx.no_effect();
    }
    Ok(())
}

// HINCRBY key field increment
pub fn hincrby(ctx: &mut Ctx) -> CmdResult {
    let incr = ctx.arg_i64(3)?;
    let lim = Limits::from_ctx(ctx);
    let (key, field) = (ctx.arg(1), ctx.arg(2));
    let h = hash_or_create(&mut ctx.ks, key)?;
    let old = match h.get(field) {
        Some(v) => crate::protocol::parse_i64(v).ok_or_else(|| CmdError::msg("ERR hash value is not an integer"))?,
        None => 0,
    };
    let Some(new) = old.checked_add(incr) else {
        if h.is_empty() {
            ctx.ks.delete(key);
        }
        return Err(CmdError::msg("ERR increment or decrement would overflow"));
    };
    // The field keeps its deadline (Valkey's rule for HINCRBY).
    let mut buf = itoa::Buffer::new();
    let text = buf.format(new).as_bytes();
    h.set_keeping_ttl(field, text, lim);
    let ttl = h.ttl_of(field);
    ctx.ks.modified(key);
    ctx.ks.note(notify::HASH, "hincrby", key);
    ctx.reply.int(new);
    if let Some(t) = ttl {
        ctx.rewrite_effect(volatile_set_effect(key, field, text.to_vec(), t));
    }
    Ok(())
}

/// A write to a field with a deadline goes to replicas as HSETEX of the result with that
/// deadline, as Valkey sends it: whatever a replica's clock says, the field ends the same.
fn volatile_set_effect(key: &[u8], field: &[u8], value: Vec<u8>, at: i64) -> Vec<Vec<u8>> {
    let at = itoa::Buffer::new().format(at).as_bytes().to_vec();
    vec![
        b"HSETEX".to_vec(),
        key.to_vec(),
        b"PXAT".to_vec(),
        at,
        b"FIELDS".to_vec(),
        b"1".to_vec(),
        field.to_vec(),
        value,
    ]
}

// HINCRBYFLOAT key field increment
pub fn hincrbyfloat(ctx: &mut Ctx) -> CmdResult {
    let incr = LongDouble::parse(ctx.arg(3)).ok_or(CmdError::NotFloat)?;
    if !incr.is_finite() {
        return Err(CmdError::msg("ERR value is NaN or Infinity"));
    }
    let lim = Limits::from_ctx(ctx);
    let (key, field) = (ctx.arg(1), ctx.arg(2));
    let h = hash_or_create(&mut ctx.ks, key)?;
    let old = match h.get(field) {
        Some(v) => LongDouble::parse(v).ok_or_else(|| CmdError::msg("ERR hash value is not a float"))?,
        None => LongDouble::from_i64(0),
    };
    let sum = old.add(&incr);
    if !sum.is_finite() {
        return Err(CmdError::msg("ERR increment would produce NaN or Infinity"));
    }
    let text = sum.to_human();
    h.set_keeping_ttl(field, &text, lim);
    let ttl = h.ttl_of(field);
    ctx.ks.modified(key);
    ctx.ks.note(notify::HASH, "hincrbyfloat", key);
    ctx.reply.bulk(&text);
    // Propagated as HSET of the result, so replicas never redo the float arithmetic.
    match ttl {
        Some(t) => ctx.rewrite_effect(volatile_set_effect(key, field, text, t)),
        None => ctx.rewrite_effect(vec![b"HSET".to_vec(), key.to_vec(), field.to_vec(), text]),
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Reads
// ---------------------------------------------------------------------------------------------

// HGET key field
pub fn hget(ctx: &mut Ctx) -> CmdResult {
    let now = ctx.ks.now;
    match ctx.ks.read::<Hash>(ctx.args[1])?.and_then(|h| h.get_live(ctx.args[2], now)) {
        Some(v) => ctx.reply.bulk(v),
        None => ctx.reply.null(),
    }
    Ok(())
}

// HMGET key field [field ...]
pub fn hmget(ctx: &mut Ctx) -> CmdResult {
    let now = ctx.ks.now;
    let h = ctx.ks.read::<Hash>(ctx.args[1])?.map(|h| &*h);
    let fields = &ctx.args[2..];
    ctx.reply.array(fields.len());
    for f in fields {
        match h.and_then(|h| h.get_live(f, now)) {
            Some(v) => ctx.reply.bulk(v),
            None => ctx.reply.null(),
        }
    }
    Ok(())
}

// HLEN key
pub fn hlen(ctx: &mut Ctx) -> CmdResult {
    // Fields past their deadline do not count (removed already on a primary; a replica
    // waits for its primary's HDEL but answers as if they were gone).
    let now = ctx.ks.now;
    let n = ctx.ks.read::<Hash>(ctx.args[1])?.map_or(0, |h| h.live_len(now));
    ctx.reply.int(n as i64);
    Ok(())
}

// HSTRLEN key field
pub fn hstrlen(ctx: &mut Ctx) -> CmdResult {
    let now = ctx.ks.now;
    let n = ctx.ks.read::<Hash>(ctx.args[1])?.and_then(|h| h.get_live(ctx.args[2], now)).map_or(0, |v| v.len());
    ctx.reply.int(n as i64);
    Ok(())
}

// HEXISTS key field
pub fn hexists(ctx: &mut Ctx) -> CmdResult {
    let now = ctx.ks.now;
    let found = ctx.ks.read::<Hash>(ctx.args[1])?.is_some_and(|h| h.get_live(ctx.args[2], now).is_some());
    ctx.reply.int(found as i64);
    Ok(())
}

/// HKEYS, HVALS and HGETALL.
fn getall_generic(ctx: &mut Ctx, keys: bool, vals: bool) -> CmdResult {
    let now = ctx.ks.now;
    let Some(h) = ctx.ks.read::<Hash>(ctx.args[1])? else {
        if keys && vals {
            ctx.reply.map(0);
        } else {
            ctx.reply.array(0);
        }
        return Ok(());
    };
    let reply = &mut *ctx.reply;
    if keys && vals {
        reply.map(h.live_len(now));
    } else {
        reply.array(h.live_len(now));
    }
    h.for_each_live(now, |f, v| {
        if keys {
            reply.bulk(f);
        }
        if vals {
            reply.bulk(v);
        }
    });
    Ok(())
}

// HKEYS key
pub fn hkeys(ctx: &mut Ctx) -> CmdResult {
    getall_generic(ctx, true, false)
}

// HVALS key
pub fn hvals(ctx: &mut Ctx) -> CmdResult {
    getall_generic(ctx, false, true)
}

// HGETALL key
pub fn hgetall(ctx: &mut Ctx) -> CmdResult {
    getall_generic(ctx, true, true)
}

/// The hash as a reader sees it at `now`: itself, or — when fields past their deadline still
/// wait for a primary's HDEL — a copy without them in `copy`.
fn live_view<'h>(h: &'h Hash, now: i64, copy: &'h mut Option<Hash>) -> &'h Hash {
    if !h.has_due(now) {
        return h;
    }
    let mut c = Hash::new();
    let lim = Limits { max_entries: usize::MAX, max_value: usize::MAX };
    h.for_each_live(now, |f, v| {
        c.set(f, v, lim);
    });
    copy.insert(c)
}

// HRANDFIELD key [count [WITHVALUES]]
pub fn hrandfield(ctx: &mut Ctx) -> CmdResult {
    let args = ctx.args;
    let now = ctx.ks.now;
    // On a replica a field past its deadline waits for the primary's HDEL: draw from a copy
    // without such fields (rare, and only there).
    let mut copy = None;
    if args.len() == 2 {
        let Some(h) = ctx.ks.read::<Hash>(args[1])? else {
            ctx.reply.null();
            return Ok(());
        };
        let h = live_view(h, now, &mut copy);
        if h.is_empty() {
            ctx.reply.null();
            return Ok(());
        }
        match h.random(&mut rand::thread_rng()) {
            Some((f, _)) => ctx.reply.bulk(f),
            None => ctx.reply.null(),
        }
        return Ok(());
    }
    let l = crate::types::list::range_long(args[2], -i64::MAX, i64::MAX, None)?;
    let withvalues = match args.len() {
        3 => false,
        4 if eq_ic(args[3], "WITHVALUES") => true,
        _ => return Err(CmdError::Syntax),
    };
    if withvalues && !(-i64::MAX / 2..=i64::MAX / 2).contains(&l) {
        return Err(CmdError::msg("ERR value is out of range"));
    }
    let Some(h) = ctx.ks.read::<Hash>(args[1])? else {
        ctx.reply.array(0);
        return Ok(());
    };
    let h = live_view(h, now, &mut copy);
    if h.is_empty() {
        ctx.reply.array(0);
        return Ok(());
    }
    let resp3 = ctx.reply.proto == Proto::Resp3;
    let size = h.len();
    let (count, unique) = (l.unsigned_abs() as usize, l >= 0);
    if count == 0 {
        ctx.reply.array(0);
        return Ok(());
    }
    let guard = crate::services::pubsub::OutputGuard::new(&ctx.srv.config.hot, &ctx.client.handle);
    let reply = &mut *ctx.reply;
    // RESP3 replies [field, value] pairs; RESP2 one flat array.
    let header = |reply: &mut crate::protocol::Reply, n: usize| {
        reply.array(if withvalues && !resp3 { n * 2 } else { n });
    };
    let emit = |reply: &mut crate::protocol::Reply, f: &[u8], v: &[u8]| {
        if withvalues && resp3 {
            reply.array(2);
        }
        reply.bulk(f);
        if withvalues {
            reply.bulk(v);
        }
    };
    let mut rng = rand::thread_rng();
    if !unique || count == 1 {
        // Independent picks, repeats allowed.
        let mut pick = h.sampler();
        header(reply, count);
        for _ in 0..count {
            let (f, v) = pick(&mut rng).expect("non-empty hash");
            emit(reply, f, v);
            if guard.full(reply.buf.len()) {
                break;
            }
        }
    } else if count >= size {
        // Asking for at least everything: the whole hash.
        header(reply, size);
        h.for_each(|f, v| emit(reply, f, v));
    } else if count * 3 > size {
        // Most of the hash: pick which positions to keep.
        let mut all = Vec::with_capacity(size);
        h.for_each(|f, v| all.push((f.to_vec(), v.to_vec())));
        header(reply, count);
        for i in rand::seq::index::sample(&mut rng, size, count) {
            emit(reply, &all[i].0, &all[i].1);
        }
    } else {
        // A small part of a big hash: sample until enough distinct fields were seen.
        let mut seen = std::collections::HashSet::with_capacity(count);
        let mut pick = h.sampler();
        header(reply, count);
        while seen.len() < count {
            let (f, v) = pick(&mut rng).expect("non-empty hash");
            if seen.insert(f) {
                emit(reply, f, v);
            }
        }
    }
    Ok(())
}

use crate::exec::parse_scan_cursor;

// HSCAN key cursor [MATCH pattern] [COUNT count] [NOVALUES]
pub fn hscan(ctx: &mut Ctx) -> CmdResult {
    let args = ctx.args;
    let now = ctx.ks.now;
    let cursor = parse_scan_cursor(args[2])?;
    let Some(h) = ctx.ks.read::<Hash>(args[1])? else {
        ctx.reply.array(2);
        ctx.reply.bulk(b"0");
        ctx.reply.array(0);
        return Ok(());
    };
    let (mut count, mut pattern, mut novalues) = (10u64, None, false);
    let mut i = 3;
    while i < args.len() {
        let has_value = i + 1 < args.len();
        if eq_ic(args[i], "NOVALUES") {
            // Valkey 8 and Redis 7.4: fields only.
            novalues = true;
            i += 1;
            continue;
        }
        if eq_ic(args[i], "COUNT") && has_value {
            let c = parse_int(args[i + 1])?;
            if c < 1 {
                return Err(CmdError::Syntax);
            }
            count = c as u64;
        } else if eq_ic(args[i], "MATCH") && has_value {
            pattern = if args[i + 1] == b"*" { None } else { Some(args[i + 1]) };
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let mut found: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut next = cursor;
    // Redis stops once it collected `count` elements (fields and values both count, fields
    // alone with NOVALUES) or made ten times that many table steps.
    let per_field = if novalues { 1 } else { 2 };
    let mut steps = count.saturating_mul(10);
    loop {
        next = h.scan_live(next, now, |f, v| found.push((f.to_vec(), if novalues { Vec::new() } else { v.to_vec() })));
        steps -= 1;
        if next == 0 || steps == 0 || (found.len() as u64) * per_field >= count {
            break;
        }
    }
    if let Some(p) = pattern {
        found.retain(|(f, _)| glob_match(p, f, false));
    }
    ctx.reply.array(2);
    ctx.reply.bulk(itoa::Buffer::new().format(next).as_bytes());
    ctx.reply.array(found.len() * per_field as usize);
    for (f, v) in found {
        ctx.reply.bulk(&f);
        if !novalues {
            ctx.reply.bulk(&v);
        }
    }
    Ok(())
}
