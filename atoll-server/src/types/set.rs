//! Sets (Redis's `t_set.c`): the set type API, then the set commands.
//!
//! Three encodings, as Redis 7.2 reports them in OBJECT ENCODING:
//! * `intset`: a sorted `i64` array while every member is a canonical integer and there are at
//!   most `set-max-intset-entries` of them;
//! * `listpack`: the members packed into one byte buffer in insertion order (7.2), searched
//!   linearly, while there are at most `set-max-listpack-entries` members of at most
//!   `set-max-listpack-value` bytes;
//! * `hashtable`: our [`Dict`], with SCAN cursors and random sampling, beyond that.
//!
//! A set never converts back to a smaller encoding, like Redis.
//!
//! Commands reading several keys at once use [`Loaned`], which moves the values out of the
//! keyspace for the duration of the command (the command holds the shard locks, so nobody can
//! observe it) instead of copying them.

use crate::engine::glob::glob_match;
use crate::engine::set::*;
use crate::engine::Value;
use crate::exec::{eq_ic, parse_int, CmdError, CmdResult, Ctx, KsView};
use crate::services::notify;
use rand::seq::SliceRandom;
use rand::Rng;
use std::collections::HashMap;
use std::sync::atomic::Ordering;

impl SetLimits {
    pub fn from_ctx(ctx: &Ctx) -> SetLimits {
        let h = &ctx.srv.config.hot;
        SetLimits {
            // Redis caps the intset at 2^30 entries whatever the configuration says.
            intset_entries: h.set_max_intset_entries.load(Ordering::Relaxed).min(1 << 30),
            listpack_entries: h.set_max_listpack_entries.load(Ordering::Relaxed),
            listpack_value: h.set_max_listpack_value.load(Ordering::Relaxed),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers shared with the sorted-set and geo commands
// ---------------------------------------------------------------------------------------------

/// Values of several keys borrowed at once. `KsView` hands out one `&mut` at a time, so the
/// values are moved out of their shards (O(1) each) and moved back by [`Loaned::restore`].
/// The command holds every shard lock meanwhile, so no other client can observe the gap.
/// A key named twice is taken once.
pub(crate) struct Loaned<'a> {
    slots: Vec<(&'a [u8], Option<Value>)>,
    /// Argument position → slot.
    map: Vec<usize>,
}

impl<'a> Loaned<'a> {
    /// Takes the values of `keys` (lookups for reading: hits, misses and expiry as Redis's
    /// `lookupKeyRead`).
    pub fn take(ks: &mut KsView, keys: &[&'a [u8]]) -> Loaned<'a> {
        let mut slots: Vec<(&'a [u8], Option<Value>)> = Vec::with_capacity(keys.len());
        let mut index: HashMap<&'a [u8], usize> = HashMap::new();
        let mut map = Vec::with_capacity(keys.len());
        for &k in keys {
            if let Some(&j) = index.get(k) {
                map.push(j);
                continue;
            }
            let v = ks.lookup_read(k).map(|mut o| std::mem::replace(o.val_mut(), Value::Int(0)));
            index.insert(k, slots.len());
            map.push(slots.len());
            slots.push((k, v));
        }
        Loaned { slots, map }
    }

    pub fn get(&self, i: usize) -> Option<&Value> {
        self.slots[self.map[i]].1.as_ref()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Puts every value back where it was. Must run before the command touches these keys.
    pub fn restore(self, ks: &mut KsView) {
        for (k, v) in self.slots {
            if let Some(v) = v {
                if let Some(mut o) = ks.shard(k).keys.get_mut(k) {
                    o.set(v);
                }
            }
        }
    }
}

/// SSCAN/ZSCAN/HSCAN options: `COUNT n` (≥ 1) and `MATCH pattern`.
pub(crate) struct ScanOpts<'a> {
    pub count: usize,
    pub pattern: Option<&'a [u8]>,
}

impl ScanOpts<'_> {
    pub fn matches(&self, m: &[u8]) -> bool {
        self.pattern.is_none_or(|p| glob_match(p, m, false))
    }
}

pub(crate) fn parse_scan_opts<'a>(args: &[&'a [u8]]) -> Result<ScanOpts<'a>, CmdError> {
    let mut o = ScanOpts { count: 10, pattern: None };
    let mut i = 0;
    while i < args.len() {
        if i + 1 >= args.len() {
            return Err(CmdError::Syntax);
        }
        if eq_ic(args[i], "COUNT") {
            let c = parse_int(args[i + 1])?;
            if c < 1 {
                return Err(CmdError::Syntax);
            }
            o.count = c.min(1 << 40) as usize;
        } else if eq_ic(args[i], "MATCH") {
            o.pattern = if args[i + 1] == b"*" { None } else { Some(args[i + 1]) };
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    Ok(o)
}

pub(crate) use crate::exec::parse_scan_cursor;

/// Reads `numkeys` for SINTERCARD/ZINTERCARD-style commands: Redis's wording for each error.
pub(crate) fn parse_numkeys(ctx: &Ctx, idx: usize) -> Result<usize, CmdError> {
    let bad = || CmdError::msg("ERR numkeys should be greater than 0");
    let n = crate::protocol::parse_i64(ctx.arg(idx)).ok_or_else(bad)?;
    if n <= 0 {
        return Err(bad());
    }
    if n as usize > ctx.args.len() - idx - 1 {
        return Err(CmdError::msg("ERR Number of keys can't be greater than number of args"));
    }
    Ok(n as usize)
}

/// Replies with members as a RESP3 set (an array in RESP2).
fn reply_members(ctx: &mut Ctx, members: &[Vec<u8>]) {
    ctx.reply.set(members.len());
    for m in members {
        ctx.reply.bulk(m);
    }
}

/// After removals: deletes the key if the set became empty (Redis never keeps empty sets),
/// raising `del`.
fn delete_if_empty(ks: &mut KsView, key: &[u8]) -> bool {
    let empty = matches!(ks.peek(key), Some(o) if matches!(&*o, Value::Set(s) if s.is_empty()));
    if empty {
        ks.delete(key);
        ks.note(notify::GENERIC, "del", key);
    }
    empty
}

// ---------------------------------------------------------------------------------------------
// Set commands
// ---------------------------------------------------------------------------------------------

// SADD key member [member ...]
pub fn sadd(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.arg(1);
    let lim = SetLimits::from_ctx(ctx);
    let members = &ctx.args[2..];
    let added = match ctx.ks.write::<Set>(key)? {
        Some(s) => members.iter().filter(|m| s.add(m, &lim)).count(),
        None => {
            let mut s = Set::create(members[0], members.len(), &lim);
            let n = members.iter().filter(|m| s.add(m, &lim)).count();
            ctx.ks.insert_new(key, Value::Set(s));
            n
        }
    };
    if added > 0 {
        ctx.ks.modified(key);
        ctx.ks.note(notify::SET, "sadd", key);
    }
    ctx.reply.int(added as i64);
    Ok(())
}

// SREM key member [member ...]
pub fn srem(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.arg(1);
    let members = &ctx.args[2..];
    let removed = match ctx.ks.write::<Set>(key)? {
        Some(s) => {
            let mut n = 0;
            for m in members {
                if s.remove(m) {
                    n += 1;
                    if s.is_empty() {
                        break;
                    }
                }
            }
            n
        }
        None => 0,
    };
    if removed > 0 {
        ctx.ks.note(notify::SET, "srem", key);
        if !delete_if_empty(&mut ctx.ks, key) {
            ctx.ks.modified(key);
        }
    }
    ctx.reply.int(removed);
    Ok(())
}

// SMEMBERS key
pub fn smembers(ctx: &mut Ctx) -> CmdResult {
    let members = match ctx.ks.read::<Set>(ctx.args[1])? {
        Some(s) => s.members(),
        None => Vec::new(),
    };
    reply_members(ctx, &members);
    Ok(())
}

// SISMEMBER key member
pub fn sismember(ctx: &mut Ctx) -> CmdResult {
    let found = ctx.ks.read::<Set>(ctx.args[1])?.is_some_and(|s| s.contains(ctx.args[2]));
    ctx.reply.int(found as i64);
    Ok(())
}

// SMISMEMBER key member [member ...]
pub fn smismember(ctx: &mut Ctx) -> CmdResult {
    let args = ctx.args;
    let found: Vec<bool> = match ctx.ks.read::<Set>(args[1])? {
        Some(s) => args[2..].iter().map(|m| s.contains(m)).collect(),
        None => vec![false; args.len() - 2],
    };
    ctx.reply.array(found.len());
    for f in found {
        ctx.reply.int(f as i64);
    }
    Ok(())
}

// SCARD key
pub fn scard(ctx: &mut Ctx) -> CmdResult {
    let n = ctx.ks.read::<Set>(ctx.args[1])?.map_or(0, |s| s.len());
    ctx.reply.int(n as i64);
    Ok(())
}

/// Effects of SPOP are SREMs of what was popped, in batches like Redis's
/// `SPOP_MOVE_STRATEGY` propagation (1024 members per SREM).
fn emit_srem(ctx: &mut Ctx, key: &[u8], popped: &[Vec<u8>]) {
    for chunk in popped.chunks(1024) {
        let mut argv = Vec::with_capacity(chunk.len() + 2);
        argv.push(b"SREM".to_vec());
        argv.push(key.to_vec());
        argv.extend(chunk.iter().cloned());
        ctx.rewrite_effect(argv);
    }
}

// SPOP key [count]
pub fn spop(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.arg(1);
    if ctx.args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = if ctx.args.len() == 3 {
        // getPositiveLongFromObjectOrReply: one message for both failures.
        let bad = || CmdError::msg("ERR value is out of range, must be positive");
        let c = crate::protocol::parse_i64(ctx.arg(2)).ok_or_else(bad)?;
        if c < 0 {
            return Err(bad());
        }
        Some(c as u64)
    } else {
        None
    };
    let mut rng = rand::thread_rng();
    let Some(s) = ctx.ks.write::<Set>(key)? else {
        match count {
            None => ctx.reply.null(),
            Some(_) => ctx.reply.set(0),
        }
        return Ok(());
    };
    match count {
        None => {
            let m = s.pop_random(&mut rng).expect("sets are never empty");
            ctx.reply.bulk(&m);
            ctx.ks.note(notify::SET, "spop", key);
            delete_if_empty(&mut ctx.ks, key);
            ctx.ks.modified(key);
            ctx.rewrite_effect(vec![b"SREM".to_vec(), key.to_vec(), m]);
        }
        Some(0) => ctx.reply.set(0),
        Some(c) if c >= s.len() as u64 => {
            // The whole set: reply with it and delete the key, propagated as UNLINK when
            // server-side deletions are lazy, DEL otherwise (as Redis's spopWithCountCommand).
            let members = s.members();
            reply_members(ctx, &members);
            ctx.ks.note(notify::SET, "spop", key);
            ctx.ks.delete(key);
            ctx.ks.note(notify::GENERIC, "del", key);
            let verb: &[u8] =
                if ctx.srv.config.flag(crate::config::p::LAZYFREE_LAZY_SERVER_DEL) { b"UNLINK" } else { b"DEL" };
            ctx.rewrite_effect(vec![verb.to_vec(), key.to_vec()]);
        }
        Some(c) => {
            let popped = s.pop_many(c as usize, &mut rng);
            reply_members(ctx, &popped);
            ctx.ks.note(notify::SET, "spop", key);
            ctx.ks.modified(key);
            emit_srem(ctx, key, &popped);
        }
    }
    Ok(())
}

// SRANDMEMBER key [count]
pub fn srandmember(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = if ctx.args.len() == 3 {
        let c = parse_int(ctx.arg(2))?;
        if c == i64::MIN {
            return Err(CmdError::msg(
                "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
            ));
        }
        Some(c)
    } else {
        None
    };
    let mut rng = rand::thread_rng();
    let Some(s) = ctx.ks.read::<Set>(ctx.args[1])? else {
        match count {
            None => ctx.reply.null(),
            Some(_) => ctx.reply.array(0),
        }
        return Ok(());
    };
    // Random sampling moves a pending rehash along, as Redis's random key picks do (one step
    // per pick): a set read only by SRANDMEMBER still finishes growing its table.
    s.rehash_step(count.map_or(1, |c| c.unsigned_abs().clamp(1, 1000) as usize));
    let picks = match count {
        None => {
            let m = s.random(&mut rng).expect("sets are never empty");
            ctx.reply.bulk(&m);
            return Ok(());
        }
        Some(c) if c < 0 => {
            // Streamed: the reply grows with the data, never sized up front by the count.
            let n = c.unsigned_abs();
            let guard = crate::services::pubsub::OutputGuard::new(&ctx.srv.config.hot, &ctx.client.handle);
            let reply = &mut *ctx.reply;
            reply.array(n as usize);
            s.sample(n, &mut rng, |m| {
                reply.bulk(m);
                !guard.full(reply.buf.len())
            });
            return Ok(());
        }
        Some(c) => random_distinct(s, c as u64, &mut rng),
    };
    ctx.reply.array(picks.len());
    for p in &picks {
        ctx.reply.bulk(p);
    }
    Ok(())
}

/// `count` distinct random members (all of them when count ≥ size). Large requests shuffle a
/// copy; small ones sample until they have enough distinct picks (Redis's CASE 3 / CASE 4).
fn random_distinct<R: Rng>(s: &Set, count: u64, rng: &mut R) -> Vec<Vec<u8>> {
    let size = s.len() as u64;
    if count >= size {
        return s.members();
    }
    if count * 3 > size {
        let mut all = s.members();
        let (picked, _) = all.partial_shuffle(rng, count as usize);
        return picked.to_vec();
    }
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(count as usize);
    while (out.len() as u64) < count {
        let m = s.random(rng).unwrap();
        if seen.insert(m.clone()) {
            out.push(m);
        }
    }
    out
}

// SMOVE source destination member
pub fn smove(ctx: &mut Ctx) -> CmdResult {
    let (src, dst, m) = (ctx.arg(1), ctx.arg(2), ctx.arg(3));
    let lim = SetLimits::from_ctx(ctx);
    let Some(s) = ctx.ks.write::<Set>(src)? else {
        // Redis checks the destination's type only when the source exists.
        ctx.reply.int(0);
        return Ok(());
    };
    let src_has = s.contains(m);
    let dst_exists = ctx.ks.write::<Set>(dst)?.is_some();
    if src == dst {
        ctx.reply.int(src_has as i64);
        return Ok(());
    }
    if !src_has {
        ctx.reply.int(0);
        return Ok(());
    }
    if let Some(s) = ctx.ks.write::<Set>(src)? {
        s.remove(m);
    }
    // Redis's order: `srem` (and `del`) on the source, then `new` and `sadd` on the destination.
    ctx.ks.note(notify::SET, "srem", src);
    if !delete_if_empty(&mut ctx.ks, src) {
        ctx.ks.modified(src);
    }
    if dst_exists {
        if let Some(d) = ctx.ks.write::<Set>(dst)? {
            if d.add(m, &lim) {
                ctx.ks.modified(dst);
                ctx.ks.note(notify::SET, "sadd", dst);
            }
        }
    } else {
        let mut d = Set::create(m, 1, &lim);
        d.add(m, &lim);
        ctx.ks.insert_new(dst, Value::Set(d));
        ctx.ks.modified(dst);
        ctx.ks.note(notify::SET, "sadd", dst);
    }
    ctx.reply.int(1);
    Ok(())
}

/// Which multi-set operation.
#[derive(Clone, Copy, PartialEq)]
enum SetOp {
    Inter,
    Union,
    Diff,
}

/// Computes an intersection, union or difference of the sets at `keys` (missing keys are
/// empty). WRONGTYPE if any key holds another type, checked before computing, as Redis does.
/// `limit` stops an intersection early (SINTERCARD); 0 means no limit.
fn set_op(ks: &mut KsView, keys: &[&[u8]], op: SetOp, limit: usize) -> Result<Set, CmdError> {
    let loaned = Loaned::take(ks, keys);
    let result = compute_set_op(&loaned, op, limit);
    loaned.restore(ks);
    result
}

fn compute_set_op(loaned: &Loaned, op: SetOp, limit: usize) -> Result<Set, CmdError> {
    let mut sets: Vec<Option<&Set>> = Vec::with_capacity(loaned.len());
    for i in 0..loaned.len() {
        match loaned.get(i) {
            None => sets.push(None),
            Some(Value::Set(s)) => sets.push(Some(s)),
            Some(_) => return Err(CmdError::WrongType),
        }
    }
    // The result is collected in a hashtable (O(1) dedup); `store_set` re-encodes it.
    let mut out = Set::new_table();
    let mut add = |m: &[u8]| out.table_add(m);
    match op {
        SetOp::Inter => {
            if sets.iter().any(|s| s.is_none()) {
                return Ok(out);
            }
            let mut sets: Vec<&Set> = sets.into_iter().flatten().collect();
            // Walk the smallest set, probe the others.
            sets.sort_by_key(|s| s.len());
            let mut n = 0;
            let mut done = false;
            sets[0].for_each(|m| {
                if done {
                    return;
                }
                if sets[1..].iter().all(|s| s.contains(m)) {
                    add(m);
                    n += 1;
                    if limit > 0 && n >= limit {
                        done = true;
                    }
                }
            });
        }
        SetOp::Union => {
            for s in sets.iter().flatten() {
                s.for_each(&mut add);
            }
        }
        SetOp::Diff => {
            if let Some(first) = sets[0] {
                first.for_each(|m| {
                    if !sets[1..].iter().flatten().any(|s| s.contains(m)) {
                        add(m);
                    }
                });
            }
        }
    }
    Ok(out)
}

/// Stores a computed set at `dst` the way Redis builds it (from an empty intset, member by
/// member, so the encoding follows the thresholds) and raises `event`, or deletes `dst` when
/// the result is empty (raising `del` if there was a key to delete).
fn store_set(ctx: &mut Ctx, dst: &[u8], result: Set, event: &'static str) -> usize {
    let lim = SetLimits::from_ctx(ctx);
    let n = result.len();
    if n == 0 {
        // Redis's dbDelete, with no lookup first: a destination past its time that nothing has
        // expired yet is deleted like any other key (`del`, not `expired`).
        if let Some(o) = ctx.ks.shard(dst).remove(dst) {
            ctx.ks.modified(dst);
            // Clients blocked on a deleted stream must learn it (as `KsView::delete`).
            if matches!(o.val, Value::Stream(_)) {
                ctx.ks.signal_ready(dst);
            }
            ctx.ks.note(notify::GENERIC, "del", dst);
        }
        return 0;
    }
    let mut s = Set::new_intset();
    result.for_each(|m| {
        s.add(m, &lim);
    });
    ctx.ks.set(dst, Value::Set(s), false);
    ctx.ks.note(notify::SET, event, dst);
    n
}

fn reply_set(ctx: &mut Ctx, s: &Set) {
    ctx.reply.set(s.len());
    s.for_each(|m| ctx.reply.bulk(m));
}

// SINTER key [key ...]
pub fn sinter(ctx: &mut Ctx) -> CmdResult {
    let r = set_op(&mut ctx.ks, &ctx.args[1..], SetOp::Inter, 0)?;
    reply_set(ctx, &r);
    Ok(())
}

// SUNION key [key ...]
pub fn sunion(ctx: &mut Ctx) -> CmdResult {
    let r = set_op(&mut ctx.ks, &ctx.args[1..], SetOp::Union, 0)?;
    reply_set(ctx, &r);
    Ok(())
}

// SDIFF key [key ...]
pub fn sdiff(ctx: &mut Ctx) -> CmdResult {
    let r = set_op(&mut ctx.ks, &ctx.args[1..], SetOp::Diff, 0)?;
    reply_set(ctx, &r);
    Ok(())
}

fn store_op(ctx: &mut Ctx, op: SetOp) -> CmdResult {
    let r = set_op(&mut ctx.ks, &ctx.args[2..], op, 0)?;
    let event = match op {
        SetOp::Inter => "sinterstore",
        SetOp::Union => "sunionstore",
        SetOp::Diff => "sdiffstore",
    };
    let n = store_set(ctx, ctx.args[1], r, event);
    ctx.reply.int(n as i64);
    Ok(())
}

// SINTERSTORE destination key [key ...]
pub fn sinterstore(ctx: &mut Ctx) -> CmdResult {
    store_op(ctx, SetOp::Inter)
}

// SUNIONSTORE destination key [key ...]
pub fn sunionstore(ctx: &mut Ctx) -> CmdResult {
    store_op(ctx, SetOp::Union)
}

// SDIFFSTORE destination key [key ...]
pub fn sdiffstore(ctx: &mut Ctx) -> CmdResult {
    store_op(ctx, SetOp::Diff)
}

// SINTERCARD numkeys key [key ...] [LIMIT limit]
pub fn sintercard(ctx: &mut Ctx) -> CmdResult {
    let n = parse_numkeys(ctx, 1)?;
    let limit = parse_card_limit(ctx, 2 + n)?;
    let r = set_op(&mut ctx.ks, &ctx.args[2..2 + n], SetOp::Inter, limit)?;
    ctx.reply.int(r.len() as i64);
    Ok(())
}

/// `[LIMIT limit]` after the keys of SINTERCARD/ZINTERCARD (0 = no limit).
pub(crate) fn parse_card_limit(ctx: &Ctx, mut i: usize) -> Result<usize, CmdError> {
    let mut limit = 0;
    while i < ctx.args.len() {
        if eq_ic(ctx.args[i], "LIMIT") && i + 1 < ctx.args.len() {
            // Redis words a limit that is not an integer the same way.
            let bad = || CmdError::msg("ERR LIMIT can't be negative");
            let l = parse_int(ctx.args[i + 1]).map_err(|_| bad())?;
            if l < 0 {
                return Err(bad());
            }
            limit = l as usize;
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(limit)
}

// SSCAN key cursor [MATCH pattern] [COUNT count]
pub fn sscan(ctx: &mut Ctx) -> CmdResult {
    let cursor = parse_scan_cursor(ctx.arg(2))?;
    let args = ctx.args;
    let Some(s) = ctx.ks.read::<Set>(args[1])? else {
        ctx.reply.array(2);
        ctx.reply.bulk(b"0");
        ctx.reply.array(0);
        return Ok(());
    };
    let opts = parse_scan_opts(&args[3..])?;
    let mut out: Vec<Vec<u8>> = Vec::new();
    let next = s.scan(cursor, opts.count, |m| {
        if opts.matches(m) {
            out.push(m.to_vec())
        }
    });
    ctx.reply.array(2);
    ctx.reply.bulk(itoa::Buffer::new().format(next).as_bytes());
    ctx.reply.array(out.len());
    for m in &out {
        ctx.reply.bulk(m);
    }
    Ok(())
}
