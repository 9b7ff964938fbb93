//! Generic keyspace commands (Redis's `db.c`, `expire.c` and `object.c` commands): DEL, UNLINK,
//! EXISTS, TYPE, RENAME, RENAMENX, COPY, MOVE, KEYS, SCAN, RANDOMKEY, the EXPIRE family, TTL,
//! PTTL, EXPIRETIME, PEXPIRETIME, PERSIST, TOUCH and OBJECT.
//!
//! Key commands run with their keys' shards locked by the dispatcher. The walkers (KEYS, SCAN,
//! RANDOMKEY) run with `Scope::Walk`: outside a transaction they hold no lock and visit one shard
//! at a time through [`Locks::with_shard`], so a walk over a big keyspace never stops the other
//! workers; inside EXEC the whole database is locked and `with_shard` uses those locks.
//! Walkers skip keys whose TTL has passed and reclaim them while they hold the shard lock.

use crate::engine::glob::glob_match;
use crate::engine::keytable::Entry;
use crate::engine::{LockPlan, Locks, SHARDS};
use crate::engine::{Shard, Value};
use crate::exec::help_reply;
use crate::exec::*;
use crate::services::notify;
use crate::services::stats::Counters;
use rand::Rng;
use std::sync::atomic::Ordering;

/// A SCAN cursor is `(in-shard dict cursor << SHARD_BITS) | shard index`.
const SHARD_BITS: u32 = SHARDS.trailing_zeros();
const SHARD_MASK: u64 = (SHARDS as u64) - 1;
const _: () = assert!(1 << SHARD_BITS == SHARDS, "SHARDS must be a power of two");

/// Redis shares the integer objects 0..OBJ_SHARED_INTEGERS, which OBJECT REFCOUNT reports as
/// `OBJ_SHARED_REFCOUNT` (INT_MAX).
const OBJ_SHARED_INTEGERS: i64 = 10_000;
const OBJ_SHARED_REFCOUNT: i64 = i32::MAX as i64;

/// RANDOMKEY: weighted picks tried before falling back to a sweep (Redis's `maxtries`).
const RANDOM_TRIES: usize = 100;

const ERR_SAME_OBJECT: &str = "ERR source and destination objects are the same";
const ERR_DB_RANGE: &str = "ERR DB index is out of range";

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// Redis's `lookupKeyReadWithFlags(LOOKUP_NOTOUCH)`: lazily expires and counts keyspace hits and
/// misses, but leaves the access clock alone (EXISTS, TYPE, TTL, OBJECT …).
fn lookup_notouch<'v>(ks: &'v mut KsView, key: &[u8]) -> Option<Entry<'v>> {
    let stats = ks.stats;
    let o = ks.peek(key);
    let counter = if o.is_some() { &stats.keyspace_hits } else { &stats.keyspace_misses };
    counter.fetch_add(1, Ordering::Relaxed);
    o
}

/// `lookup_notouch` that raises `keymiss` for a missing key, as Redis's
/// `lookupKeyReadWithFlags(LOOKUP_NOTOUCH)` does for EXISTS, TYPE and the TTL family (OBJECT
/// looks up with LOOKUP_NONOTIFY: no event).
fn lookup_notouch_noting<'v>(ks: &'v mut KsView, key: &[u8]) -> Option<Entry<'v>> {
    if ks.notify & notify::KEY_MISS != 0 && !ks.exists(key) {
        ks.stats.keyspace_misses.fetch_add(1, Ordering::Relaxed);
        ks.note(notify::KEY_MISS, "keymiss", key);
        return None;
    }
    lookup_notouch(ks, key)
}

/// Runs `f` with the view switched to database `db` (MOVE, COPY … DB), then switches back, so
/// the dispatcher still attributes the command's own effect to the client's database.
fn in_db<R>(ks: &mut KsView, db: usize, f: impl FnOnce(&mut KsView) -> R) -> R {
    let home = std::mem::replace(&mut ks.db, db);
    let r = f(ks);
    ks.db = home;
    r
}

/// Parses a destination DB index like Redis's `getIntFromObjectOrReply` + `selectDb`.
fn parse_db_index(arg: &[u8], ndbs: usize) -> Result<usize, CmdError> {
    let v = parse_int(arg)?;
    if v < i32::MIN as i64 || v > i32::MAX as i64 {
        return Err(CmdError::msg("ERR value is out of range, value must between -2147483648 and 2147483647"));
    }
    if v < 0 || v as usize >= ndbs {
        return Err(CmdError::msg(ERR_DB_RANGE));
    }
    Ok(v as usize)
}

/// Lenient DB index for lock plans: any index that fits a shard id, else None (nothing to lock).
/// Indexes beyond the configured databases are skipped by `Locks::acquire`; the command itself
/// reports every error.
fn plan_db_index(arg: &[u8]) -> Option<usize> {
    match crate::protocol::parse_i64(arg) {
        Some(v) if (0..=u16::MAX as i64).contains(&v) => Some(v as usize),
        _ => None,
    }
}

/// Deletes keys a walker found past their TTL (Redis's `expireIfNeeded` from SCAN and
/// RANDOMKEY). Runs under the walker's shard lock and publishes the `DEL` effects right away, as
/// active expiry does, so they are ordered before any later write to the same keys.
fn reclaim_expired(srv: &Server, stats: &Counters, db: usize, shard: &mut Shard, expired: &[Box<[u8]>]) {
    if expired.is_empty() {
        return;
    }
    for k in expired {
        shard.remove(k);
        shard.touch_watched(k);
        notify::raise(&srv.reach(), notify::EXPIRED, "expired", db, k);
    }
    if srv.tracking.on() {
        let touched: Vec<crate::services::tracking::Touched> = expired.iter().map(|k| (k.clone(), true)).collect();
        srv.tracking.modified(&srv.reach(), &touched, 0, None);
    }
    stats.expired_keys.fetch_add(expired.len() as u64, Ordering::Relaxed);
    if srv.effects_enabled() {
        let effects: Vec<Effect> = expired.iter().map(|k| Effect::new(db, vec![b"DEL".to_vec(), k.to_vec()])).collect();
        srv.publish_effects(&effects, srv.ks.snapshots.seen(shard.saved_epoch));
    }
}

// ---------------------------------------------------------------------------------------------
// DEL, UNLINK, EXISTS, TYPE, TOUCH
// ---------------------------------------------------------------------------------------------

/// DEL and UNLINK: the keys leave the keyspace now; with `lazy`, a big value is freed by the
/// lazyfree thread (see `services::lazyfree`) instead of under the shard lock.
fn del_generic(ctx: &mut Ctx, lazy: bool) -> CmdResult {
    let mut deleted = 0;
    for &key in &ctx.args[1..] {
        if let Some(obj) = ctx.ks.delete(key) {
            ctx.ks.note(notify::GENERIC, "del", key);
            deleted += 1;
            if lazy {
                ctx.srv.lazyfree.free(obj);
            }
        }
    }
    ctx.reply.int(deleted);
    Ok(())
}

// DEL key [key ...]
pub fn del(ctx: &mut Ctx) -> CmdResult {
    let lazy = ctx.srv.config.hot.lazy_user_del.load(std::sync::atomic::Ordering::Relaxed);
    del_generic(ctx, lazy)
}

// UNLINK key [key ...]
pub fn unlink(ctx: &mut Ctx) -> CmdResult {
    del_generic(ctx, true)
}

// EXISTS key [key ...]
pub fn exists(ctx: &mut Ctx) -> CmdResult {
    // A key named twice counts twice, as in Redis.
    let mut n = 0;
    for &key in &ctx.args[1..] {
        if lookup_notouch_noting(&mut ctx.ks, key).is_some() {
            n += 1;
        }
    }
    ctx.reply.int(n);
    Ok(())
}

// TYPE key
pub fn type_(ctx: &mut Ctx) -> CmdResult {
    let name = lookup_notouch_noting(&mut ctx.ks, ctx.args[1]).map_or("none", |o| o.type_name());
    ctx.reply.simple(name);
    Ok(())
}

// TOUCH key [key ...]
pub fn touch(ctx: &mut Ctx) -> CmdResult {
    // A read lookup updates the access clock; that is the whole point of TOUCH (the session
    // ignores CLIENT NO-TOUCH for it).
    let mut n = 0;
    for &key in &ctx.args[1..] {
        if ctx.ks.lookup_read(key).is_some() {
            n += 1;
        }
    }
    ctx.reply.int(n);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// RENAME, RENAMENX, COPY, MOVE
// ---------------------------------------------------------------------------------------------

/// Stores `val` at `key` as Redis's `dbDelete` + `dbAdd` do when `existed` (RENAME over a key,
/// COPY … REPLACE): the old value and its TTL go and the key is created again, so `new` is
/// raised even though the name was taken.
fn replace_key(ks: &mut KsView, key: &[u8], val: Value, existed: bool) {
    let old_stream = existed && ks.shard(key).remove(key).is_some_and(|o| matches!(o.val, Value::Stream(_)));
    ks.set(key, val, false);
    // Clients blocked on a replaced stream must learn it (as `set` would have signalled).
    if old_stream {
        ks.signal_ready(key);
    }
}

fn rename_generic(ctx: &mut Ctx, nx: bool) -> CmdResult {
    let (src, dst) = (ctx.args[1], ctx.args[2]);
    // A missing source is an error even when both names are the same.
    if ctx.ks.lookup_write(src).is_none() {
        return Err(CmdError::NoSuchKey);
    }
    if src == dst {
        if nx {
            ctx.reply.int(0);
        } else {
            ctx.reply.ok();
        }
        return Ok(());
    }
    let expire = ctx.ks.get_expire(src);
    let dst_exists = ctx.ks.lookup_write(dst).is_some();
    if nx && dst_exists {
        ctx.reply.int(0);
        return Ok(());
    }
    let obj = ctx.ks.shard(src).remove(src).expect("source looked up under the same lock");
    ctx.ks.touch(src);
    // The old destination goes and the key is added anew (`new`), signalling its watchers and
    // counting the one change Redis counts for a rename; the source's TTL then moves over.
    replace_key(&mut ctx.ks, dst, obj.val, dst_exists);
    if let Some(t) = expire {
        ctx.ks.set_expire(dst, t);
    }
    ctx.ks.note(notify::GENERIC, "rename_from", src);
    ctx.ks.note(notify::GENERIC, "rename_to", dst);
    if nx {
        ctx.reply.int(1);
    } else {
        ctx.reply.ok();
    }
    Ok(())
}

// RENAME key newkey
pub fn rename(ctx: &mut Ctx) -> CmdResult {
    rename_generic(ctx, false)
}

// RENAMENX key newkey
pub fn renamenx(ctx: &mut Ctx) -> CmdResult {
    rename_generic(ctx, true)
}

/// COPY's options: (destination db, REPLACE). `ndbs` bounds the db index.
fn parse_copy_options(args: &[&[u8]], db: usize, ndbs: usize) -> Result<(usize, bool), CmdError> {
    let (mut dst_db, mut replace) = (db, false);
    let mut j = 3;
    while j < args.len() {
        if eq_ic(args[j], "REPLACE") {
            replace = true;
        } else if eq_ic(args[j], "DB") && j + 1 < args.len() {
            dst_db = parse_db_index(args[j + 1], ndbs)?;
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok((dst_db, replace))
}

/// COPY's key specs name both keys in the client's database; with `DB n` the destination key
/// lives in another database, whose shard is added here.
pub fn plan_copy(args: &[&[u8]], db: usize, plan: &mut LockPlan) -> CmdResult {
    let mut dst_db = db;
    let mut j = 3;
    while j < args.len() {
        if eq_ic(args[j], "DB") && j + 1 < args.len() {
            match plan_db_index(args[j + 1]) {
                Some(d) => dst_db = d,
                // The command will fail on this index before touching any key.
                None => return Ok(()),
            }
            j += 1;
        }
        j += 1;
    }
    if args.len() > 2 {
        plan.key(dst_db, args[2]);
    }
    Ok(())
}

// COPY source destination [DB destination-db] [REPLACE]
pub fn copy(ctx: &mut Ctx) -> CmdResult {
    let (src, dst) = (ctx.args[1], ctx.args[2]);
    let (dst_db, replace) = parse_copy_options(ctx.args, ctx.ks.db, ctx.srv.ks.num_dbs())?;
    if ctx.srv.cluster.enabled && (dst_db != 0 || ctx.ks.db != 0) {
        return Err(CmdError::msg("ERR Copying to another database is not allowed in cluster mode"));
    }
    if dst_db == ctx.ks.db && src == dst {
        return Err(CmdError::msg(ERR_SAME_OBJECT));
    }
    let Some(o) = ctx.ks.lookup_read(src) else {
        ctx.reply.int(0);
        return Ok(());
    };
    // A copy is a new object: same value and encoding, fresh access clock.
    let val = o.clone();
    let expire = ctx.ks.get_expire(src);
    let copied = in_db(&mut ctx.ks, dst_db, |ks| {
        let exists = ks.lookup_write(dst).is_some();
        if exists && !replace {
            return false;
        }
        replace_key(ks, dst, val, exists);
        if let Some(t) = expire {
            ks.set_expire(dst, t);
        }
        ks.note(notify::GENERIC, "copy_to", dst);
        true
    });
    ctx.reply.int(copied as i64);
    Ok(())
}

/// MOVE's key spec names the key in the client's database; its shard in the destination
/// database is added here.
pub fn plan_move(args: &[&[u8]], _db: usize, plan: &mut LockPlan) -> CmdResult {
    if args.len() > 2 {
        if let Some(d) = plan_db_index(args[2]) {
            plan.key(d, args[1]);
        }
    }
    Ok(())
}

// MOVE key db
pub fn move_(ctx: &mut Ctx) -> CmdResult {
    if ctx.srv.cluster.enabled {
        return Err(CmdError::msg("ERR MOVE is not allowed in cluster mode"));
    }
    let key = ctx.args[1];
    let dst_db = parse_db_index(ctx.args[2], ctx.srv.ks.num_dbs())?;
    if dst_db == ctx.ks.db {
        return Err(CmdError::msg(ERR_SAME_OBJECT));
    }
    if ctx.ks.lookup_write(key).is_none() {
        ctx.reply.int(0);
        return Ok(());
    }
    let expire = ctx.ks.get_expire(key);
    if in_db(&mut ctx.ks, dst_db, |ks| ks.lookup_write(key).is_some()) {
        ctx.reply.int(0);
        return Ok(());
    }
    let obj = ctx.ks.shard(key).remove(key).expect("key looked up under the same lock");
    ctx.ks.touch(key);
    // The TTL travels with the key; `set` signals the destination's watchers and counts the
    // one change.
    in_db(&mut ctx.ks, dst_db, |ks| {
        ks.set(key, obj.val, false);
        if let Some(t) = expire {
            ks.set_expire(key, t);
        }
    });
    ctx.ks.note(notify::GENERIC, "move_from", key);
    ctx.ks.note_in(dst_db, notify::GENERIC, "move_to", key);
    ctx.reply.int(1);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Keyspace walkers: KEYS, SCAN, RANDOMKEY
// ---------------------------------------------------------------------------------------------

/// Calls `f` on every live key of `db`, one shard lock at a time, reclaiming expired keys.
fn for_each_live_key(
    srv: &Server,
    stats: &Counters,
    locks: &mut Locks,
    db: usize,
    now: i64,
    mut f: impl FnMut(&[u8], &Value),
) {
    if srv.ks.db_if_exists(db).is_none() {
        return;
    }
    for shard in 0..SHARDS {
        locks.with_shard(db, shard, |s| {
            if s.keys.is_empty() {
                return;
            }
            let mut expired: Vec<Box<[u8]>> = Vec::new();
            s.keys.for_each(|k, o| {
                if s.is_expired(k, now) {
                    expired.push(k.into());
                } else {
                    f(k, o);
                }
            });
            reclaim_expired(srv, stats, db, s, &expired);
        });
    }
}

// KEYS pattern
pub fn keys(ctx: &mut Ctx) -> CmdResult {
    let pattern = ctx.args[1];
    let all = pattern == b"*";
    let (srv, stats, db, now) = (ctx.srv, ctx.ks.stats, ctx.ks.db, ctx.ks.now);
    let reply = &mut *ctx.reply;
    // The count is only known at the end: the array header is inserted then.
    let header = reply.defer(b'*');
    let mut n = 0;
    let guard = crate::services::pubsub::OutputGuard::new(&srv.config.hot, &ctx.client.handle);
    let mut full = false;
    let m = &srv.cluster.migrations;
    let hiding = m.importing();
    for_each_live_key(srv, stats, ctx.ks.locks, db, now, |k, _| {
        if hiding && m.hidden(crate::engine::slot::key_slot(k)) {
            return;
        }
        if !full && (all || glob_match(pattern, k, false)) {
            reply.bulk(k);
            n += 1;
            full = guard.full(reply.buf.len());
        }
    });
    reply.set_deferred(header, n);
    Ok(())
}

/// SCAN's filters and effort hint.
struct ScanOptions<'a> {
    /// Elements to examine per call (a hint; at least one shard step is always made).
    count: u64,
    pattern: Option<&'a [u8]>,
    type_name: Option<&'a [u8]>,
}

fn parse_scan_options<'a>(args: &[&'a [u8]]) -> Result<ScanOptions<'a>, CmdError> {
    let mut opts = ScanOptions { count: 10, pattern: None, type_name: None };
    let mut i = 0;
    while i < args.len() {
        let has_value = i + 1 < args.len();
        if eq_ic(args[i], "COUNT") && has_value {
            let c = parse_int(args[i + 1])?;
            if c < 1 {
                return Err(CmdError::Syntax);
            }
            opts.count = c as u64;
        } else if eq_ic(args[i], "MATCH") && has_value {
            // "*" matches everything: no need to run the matcher.
            opts.pattern = if args[i + 1] == b"*" { None } else { Some(args[i + 1]) };
        } else if eq_ic(args[i], "TYPE") && has_value {
            // An unknown type name filters everything out (7.2 still accepts it).
            opts.type_name = Some(args[i + 1]);
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    Ok(opts)
}

/// One SCAN call over `db` from `cursor`: returns the next cursor (0 when the scan is complete)
/// and the live keys that passed the filters.
///
/// Shards are visited in index order and each shard's table with its reverse-binary cursor, so
/// a key present for the whole scan is returned at least once whatever happens to the tables in
/// between. Like Redis, the call stops once `count` elements were examined or after `10 × count`
/// buckets; empty shards cost nothing, so a small keyspace is returned in one call.
fn scan_keys(
    srv: &Server,
    stats: &Counters,
    locks: &mut Locks,
    db: usize,
    now: i64,
    cursor: u64,
    opts: &ScanOptions,
) -> (u64, Vec<Box<[u8]>>) {
    let mut out: Vec<Box<[u8]>> = Vec::new();
    if srv.ks.db_if_exists(db).is_none() {
        return (0, out);
    }
    let mut shard = (cursor & SHARD_MASK) as usize;
    let mut dict_cursor = cursor >> SHARD_BITS;
    let mut budget = opts.count.saturating_mul(10);
    let mut sampled: u64 = 0;
    loop {
        dict_cursor = locks.with_shard(db, shard, |s| {
            if s.keys.is_empty() {
                return 0;
            }
            let mut expired: Vec<Box<[u8]>> = Vec::new();
            let mut c = dict_cursor;
            loop {
                c = s.keys.scan(c, |k, o| {
                    sampled += 1;
                    if let Some(p) = opts.pattern {
                        if !glob_match(p, k, false) {
                            return;
                        }
                    }
                    if s.is_expired(k, now) {
                        expired.push(k.into());
                        return;
                    }
                    if let Some(t) = opts.type_name {
                        // Redis looks the key up to learn its type: a keyspace hit.
                        stats.keyspace_hits.fetch_add(1, Ordering::Relaxed);
                        if !t.eq_ignore_ascii_case(o.type_name().as_bytes()) {
                            return;
                        }
                    }
                    out.push(k.into());
                });
                budget = budget.saturating_sub(1);
                if c == 0 || sampled >= opts.count || budget == 0 {
                    break;
                }
            }
            reclaim_expired(srv, stats, db, s, &expired);
            c
        });
        if dict_cursor == 0 {
            shard += 1;
            if shard == SHARDS {
                return (0, out);
            }
        }
        if sampled >= opts.count || budget == 0 {
            // The dict cursor is below its table's size, so the shift cannot overflow.
            return ((dict_cursor << SHARD_BITS) | shard as u64, out);
        }
    }
}

// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]
pub fn scan(ctx: &mut Ctx) -> CmdResult {
    let cursor = parse_scan_cursor(ctx.args[1])?;
    let opts = parse_scan_options(&ctx.args[2..])?;
    let (next, mut keys) = scan_keys(ctx.srv, ctx.ks.stats, ctx.ks.locks, ctx.ks.db, ctx.ks.now, cursor, &opts);
    let m = &ctx.srv.cluster.migrations;
    if m.importing() {
        keys.retain(|k| !m.hidden(crate::engine::slot::key_slot(k)));
    }
    ctx.reply.array(2);
    let mut b = itoa::Buffer::new();
    ctx.reply.bulk(b.format(next).as_bytes());
    ctx.reply.array(keys.len());
    for k in &keys {
        ctx.reply.bulk(k);
    }
    Ok(())
}

/// A random live key of `db`, or None when it has none.
///
/// A shard is picked with probability proportional to its size (from one pass over the shard
/// sizes), then a random key inside it, so every key is about equally likely. Expired picks are
/// reclaimed and retried a bounded number of times; if the keyspace is mostly expired, a sweep
/// from a random shard reclaims what it passes and returns the first live key it finds. Either
/// way the call terminates, even when every key has expired.
fn random_key<R: Rng>(
    srv: &Server,
    stats: &Counters,
    locks: &mut Locks,
    db: usize,
    now: i64,
    rng: &mut R,
) -> Option<Box<[u8]>> {
    srv.ks.db_if_exists(db)?;
    let mut sizes: Vec<usize> = (0..SHARDS).map(|s| locks.with_shard(db, s, |sh| sh.keys.len())).collect();
    let mut total: usize = sizes.iter().sum();
    if total == 0 {
        return None;
    }
    for _ in 0..RANDOM_TRIES {
        if total == 0 {
            break;
        }
        let mut r = rng.gen_range(0..total);
        let mut shard = 0;
        while r >= sizes[shard] {
            r -= sizes[shard];
            shard += 1;
        }
        let (found, len) = locks.with_shard(db, shard, |s| {
            let Some(k) = s.keys.random(rng).map(Box::<[u8]>::from) else {
                return (None, 0);
            };
            if s.is_expired(&k, now) {
                reclaim_expired(srv, stats, db, s, std::slice::from_ref(&k));
                (None, s.keys.len())
            } else {
                (Some(k), s.keys.len())
            }
        });
        if found.is_some() {
            return found;
        }
        // Another client may have changed the shard since the sizes were taken.
        total = total - sizes[shard] + len;
        sizes[shard] = len;
    }
    let start = rng.gen_range(0..SHARDS);
    for i in 0..SHARDS {
        let shard = (start + i) % SHARDS;
        let found = locks.with_shard(db, shard, |s| {
            if s.keys.is_empty() {
                return None;
            }
            let mut expired: Vec<Box<[u8]>> = Vec::new();
            let mut live: Option<Box<[u8]>> = None;
            s.keys.for_each(|k, _| {
                if s.is_expired(k, now) {
                    expired.push(k.into());
                } else if live.is_none() {
                    live = Some(k.into());
                }
            });
            reclaim_expired(srv, stats, db, s, &expired);
            live
        });
        if found.is_some() {
            return found;
        }
    }
    None
}

// RANDOMKEY
pub fn randomkey(ctx: &mut Ctx) -> CmdResult {
    let mut rng = rand::thread_rng();
    let m = &ctx.srv.cluster.migrations;
    let mut found = random_key(ctx.srv, ctx.ks.stats, ctx.ks.locks, ctx.ks.db, ctx.ks.now, &mut rng);
    // A key of a slot being imported is not shown: another pick, a bounded number of times.
    let mut tries = 0;
    while m.importing() && found.as_ref().is_some_and(|k| m.hidden(crate::engine::slot::key_slot(k))) {
        tries += 1;
        found = if tries < 100 {
            random_key(ctx.srv, ctx.ks.stats, ctx.ks.locks, ctx.ks.db, ctx.ks.now, &mut rng)
        } else {
            None
        };
    }
    match found {
        Some(k) => ctx.reply.bulk(&k),
        None => ctx.reply.null(),
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, EXPIRETIME, PEXPIRETIME, TTL, PTTL, PERSIST
// ---------------------------------------------------------------------------------------------

const EXPIRE_NX: u8 = 1;
const EXPIRE_XX: u8 = 2;
const EXPIRE_GT: u8 = 4;
const EXPIRE_LT: u8 = 8;

/// The `NX | XX | GT | LT` options of the EXPIRE family, checked as Redis 7 does: options
/// first (before the time argument), then their compatibility.
pub(crate) fn parse_expire_flags(opts: &[&[u8]]) -> Result<u8, CmdError> {
    let mut flags = 0;
    for &o in opts {
        flags |= if eq_ic(o, "NX") {
            EXPIRE_NX
        } else if eq_ic(o, "XX") {
            EXPIRE_XX
        } else if eq_ic(o, "GT") {
            EXPIRE_GT
        } else if eq_ic(o, "LT") {
            EXPIRE_LT
        } else {
            return Err(CmdError::msg(format!("ERR Unsupported option {}", String::from_utf8_lossy(o))));
        };
    }
    if flags & EXPIRE_NX != 0 && flags & (EXPIRE_XX | EXPIRE_GT | EXPIRE_LT) != 0 {
        return Err(CmdError::msg("ERR NX and XX, GT or LT options at the same time are not compatible"));
    }
    if flags & EXPIRE_GT != 0 && flags & EXPIRE_LT != 0 {
        return Err(CmdError::msg("ERR GT and LT options at the same time are not compatible"));
    }
    Ok(flags)
}

/// Turns the time argument into absolute Unix milliseconds: `basetime` is now for the relative
/// forms and 0 for the absolute ones. Overflow is an error naming the command, as in Redis.
fn expire_when(ctx: &Ctx, basetime: i64, seconds: bool) -> Result<i64, CmdError> {
    let overflow = || CmdError::msg(format!("ERR invalid expire time in '{}' command", ctx.cmd.full_name()));
    let mut when = parse_int(ctx.args[2])?;
    if seconds {
        when = when.checked_mul(1000).ok_or_else(overflow)?;
    }
    if when > i64::MAX - basetime {
        return Err(overflow());
    }
    Ok(when + basetime)
}

/// Whether the NX/XX/GT/LT conditions allow setting `when` over the key's `current` expiry.
/// No TTL counts as an infinite one: GT never beats it, LT always does.
pub(crate) fn expire_allowed(flags: u8, current: Option<i64>, when: i64) -> bool {
    if flags & EXPIRE_NX != 0 && current.is_some() {
        return false;
    }
    if flags & EXPIRE_XX != 0 && current.is_none() {
        return false;
    }
    if flags & EXPIRE_GT != 0 && current.is_none_or(|c| when <= c) {
        return false;
    }
    if flags & EXPIRE_LT != 0 && current.is_some_and(|c| when >= c) {
        return false;
    }
    true
}

fn expire_generic(ctx: &mut Ctx, basetime: i64, seconds: bool) -> CmdResult {
    let flags = parse_expire_flags(&ctx.args[3..])?;
    let when = expire_when(ctx, basetime, seconds)?;
    let key = ctx.args[1];
    if ctx.ks.lookup_write(key).is_none() {
        ctx.reply.int(0);
        return Ok(());
    }
    if flags != 0 && !expire_allowed(flags, ctx.ks.get_expire(key), when) {
        ctx.reply.int(0);
        return Ok(());
    }
    if when <= ctx.ks.now && !ctx.ks.loading {
        // A time already past deletes the key now; replicas and the AOF get the deletion, not
        // an expiry they would apply at their own, later time.
        ctx.ks.delete(key);
        let verb: &[u8] = if ctx.srv.config.flag(crate::config::p::LAZYFREE_LAZY_EXPIRE) { b"UNLINK" } else { b"DEL" };
        ctx.rewrite_effect(vec![verb.to_vec(), key.to_vec()]);
        ctx.ks.note(notify::GENERIC, "del", key);
    } else {
        ctx.ks.set_expire(key, when);
        ctx.ks.modified(key);
        ctx.ks.note(notify::GENERIC, "expire", key);
        // Relative times are propagated as the absolute time computed here (the options are
        // kept, as Redis does); PEXPIREAT already is that form.
        if ctx.cmd.full_name() != "pexpireat" {
            let mut argv = Vec::with_capacity(ctx.args.len());
            argv.push(b"PEXPIREAT".to_vec());
            argv.push(key.to_vec());
            argv.push(itoa::Buffer::new().format(when).as_bytes().to_vec());
            argv.extend(ctx.args[3..].iter().map(|a| a.to_vec()));
            ctx.rewrite_effect(argv);
        }
    }
    ctx.reply.int(1);
    Ok(())
}

// EXPIRE key seconds [NX | XX | GT | LT]
pub fn expire(ctx: &mut Ctx) -> CmdResult {
    let now = ctx.ks.now;
    expire_generic(ctx, now, true)
}

// PEXPIRE key milliseconds [NX | XX | GT | LT]
pub fn pexpire(ctx: &mut Ctx) -> CmdResult {
    let now = ctx.ks.now;
    expire_generic(ctx, now, false)
}

// EXPIREAT key unix-time-seconds [NX | XX | GT | LT]
pub fn expireat(ctx: &mut Ctx) -> CmdResult {
    expire_generic(ctx, 0, true)
}

// PEXPIREAT key unix-time-milliseconds [NX | XX | GT | LT]
pub fn pexpireat(ctx: &mut Ctx) -> CmdResult {
    expire_generic(ctx, 0, false)
}

/// TTL, PTTL, EXPIRETIME, PEXPIRETIME: -2 for a missing key, -1 without a TTL, else the time
/// left (or the absolute time), rounded to the nearest second for the second forms.
fn ttl_generic(ctx: &mut Ctx, ms: bool, absolute: bool) -> CmdResult {
    let key = ctx.args[1];
    if lookup_notouch_noting(&mut ctx.ks, key).is_none() {
        ctx.reply.int(-2);
        return Ok(());
    }
    let reply = match ctx.ks.get_expire(key) {
        None => -1,
        Some(t) => {
            let v = if absolute { t } else { t.saturating_sub(ctx.ks.now) }.max(0);
            if ms {
                v
            } else {
                rounded_seconds(v)
            }
        }
    };
    ctx.reply.int(reply);
    Ok(())
}

/// Milliseconds as TTL's and EXPIRETIME's seconds: rounded to the nearest, without
/// overflowing near i64::MAX (Redis answers 9223372036854776 for PEXPIREAT k
/// 9223372036854775807). HTTL and HEXPIRETIME round the same way.
pub(crate) fn rounded_seconds(ms: i64) -> i64 {
    ((ms as i128 + 500) / 1000) as i64
}

// TTL key
pub fn ttl(ctx: &mut Ctx) -> CmdResult {
    ttl_generic(ctx, false, false)
}

// PTTL key
pub fn pttl(ctx: &mut Ctx) -> CmdResult {
    ttl_generic(ctx, true, false)
}

// EXPIRETIME key
pub fn expiretime(ctx: &mut Ctx) -> CmdResult {
    ttl_generic(ctx, false, true)
}

// PEXPIRETIME key
pub fn pexpiretime(ctx: &mut Ctx) -> CmdResult {
    ttl_generic(ctx, true, true)
}

// PERSIST key
pub fn persist(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.args[1];
    let removed = ctx.ks.lookup_write(key).is_some() && ctx.ks.remove_expire(key);
    if removed {
        ctx.ks.modified(key);
        ctx.ks.note(notify::GENERIC, "persist", key);
    }
    ctx.reply.int(removed as i64);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// OBJECT
// ---------------------------------------------------------------------------------------------

// OBJECT HELP
pub fn object_help(ctx: &mut Ctx) -> CmdResult {
    if ctx.args.len() == 1 {
        return Err(CmdError::Arity("object".into()));
    }
    help_reply(
        ctx,
        "OBJECT",
        &[
            "ENCODING <key>",
            "    Return the kind of internal representation used in order to store the value",
            "    associated with a <key>.",
            "FREQ <key>",
            "    Return the access frequency index of the <key>. The returned integer is",
            "    proportional to the logarithm of the recent access frequency of the key.",
            "IDLETIME <key>",
            "    Return the idle time of the <key>, that is the approximated number of",
            "    seconds elapsed since the last access to the key.",
            "REFCOUNT <key>",
            "    Return the number of references of the value associated with the specified",
            "    <key>.",
        ],
    );
    Ok(())
}

// OBJECT ENCODING key
pub fn object_encoding(ctx: &mut Ctx) -> CmdResult {
    match lookup_notouch(&mut ctx.ks, ctx.args[2]) {
        Some(o) => {
            let enc = o.encoding();
            ctx.reply.bulk(enc.as_bytes());
        }
        None => ctx.reply.null(),
    }
    Ok(())
}

// OBJECT FREQ key
pub fn object_freq(ctx: &mut Ctx) -> CmdResult {
    // A missing key answers null before the policy is looked at, as in Redis.
    let Some(lru) = lookup_notouch(&mut ctx.ks, ctx.args[2]).map(|o| o.lru()) else {
        ctx.reply.null();
        return Ok(());
    };
    let Some((_, decay)) = ctx.ks.lfu else {
        return Err(CmdError::msg(
            "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ));
    };
    ctx.reply.int(crate::services::evict::lfu_decayed(lru, ctx.ks.now, decay) as i64);
    Ok(())
}

// OBJECT IDLETIME key
pub fn object_idletime(ctx: &mut Ctx) -> CmdResult {
    let lru_clock = ctx.ks.lru_clock;
    let Some(idle_secs) = lookup_notouch(&mut ctx.ks, ctx.args[2]).map(|o| lru_clock.saturating_sub(o.lru())) else {
        ctx.reply.null();
        return Ok(());
    };
    if ctx.ks.lfu.is_some() {
        return Err(CmdError::msg(
            "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ));
    }
    ctx.reply.int(idle_secs as i64);
    Ok(())
}

/// The refcount Redis would report for a value: small integers are shared objects, except
/// when an LRU/LFU eviction policy with a memory limit needs a per-key access clock.
pub(crate) fn refcount(srv: &Server, v: &Value) -> i64 {
    let small_int = matches!(*v, Value::Int(i) if (0..OBJ_SHARED_INTEGERS).contains(&i));
    let shared = small_int && {
        let policy = srv.config.text(crate::config::p::MAXMEMORY_POLICY);
        srv.config.int(crate::config::p::MAXMEMORY) == 0 || !(policy.ends_with("-lru") || policy.ends_with("-lfu"))
    };
    if shared {
        OBJ_SHARED_REFCOUNT
    } else {
        1
    }
}

// OBJECT REFCOUNT key
pub fn object_refcount(ctx: &mut Ctx) -> CmdResult {
    let srv = ctx.srv;
    match lookup_notouch(&mut ctx.ks, ctx.args[2]).map(|o| refcount(srv, &o)) {
        Some(n) => ctx.reply.int(n),
        None => ctx.reply.null(),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::engine::key_shard;
    use std::collections::HashSet;

    fn server() -> Server {
        Server::new(Config::defaults(), crate::commands::table::build(), 1, 0)
    }

    fn put(locks: &mut Locks, db: usize, key: &[u8], expire: Option<i64>) {
        locks.with_shard(db, key_shard(key), |s| {
            s.keys.insert(key, Obj { val: Value::from_bytes(b"v"), lru: 0 });
            if let Some(t) = expire {
                s.expires.insert(key, t);
            }
        });
        if expire.is_some() {
            locks.keyspace().db(db).mark_volatile(key_shard(key));
        }
    }

    fn remove(locks: &mut Locks, db: usize, key: &[u8]) {
        locks.with_shard(db, key_shard(key), |s| s.remove(key));
    }

    fn opts(count: u64) -> ScanOptions<'static> {
        ScanOptions { count, pattern: None, type_name: None }
    }

    #[test]
    fn scan_cursor_parses_like_strtoul() {
        assert_eq!(parse_scan_cursor(b"0"), Ok(0));
        assert_eq!(parse_scan_cursor(b""), Ok(0));
        assert_eq!(parse_scan_cursor(b"+7"), Ok(7));
        assert_eq!(parse_scan_cursor(b"-1"), Ok(u64::MAX));
        assert_eq!(parse_scan_cursor(b"18446744073709551615"), Ok(u64::MAX));
        for bad in [&b"18446744073709551616"[..], b" 1", b"1 ", b"x", b"+", b"-", b"1.5"] {
            assert!(parse_scan_cursor(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn scan_options() {
        let a: Vec<&[u8]> = vec![b"match", b"k*", b"COUNT", b"5", b"type", b"string"];
        let o = parse_scan_options(&a).unwrap();
        assert_eq!((o.count, o.pattern, o.type_name), (5, Some(&b"k*"[..]), Some(&b"string"[..])));
        assert!(parse_scan_options(&[&b"MATCH"[..], b"*"]).unwrap().pattern.is_none());
        assert_eq!(parse_scan_options(&[&b"COUNT"[..], b"0"]).err(), Some(CmdError::Syntax));
        assert_eq!(parse_scan_options(&[&b"COUNT"[..], b"x"]).err(), Some(CmdError::NotInteger));
        assert_eq!(parse_scan_options(&[&b"COUNT"[..]]).err(), Some(CmdError::Syntax));
        assert_eq!(parse_scan_options(&[&b"BOGUS"[..], b"1"]).err(), Some(CmdError::Syntax));
    }

    #[test]
    fn expire_options_follow_redis7_rules() {
        assert_eq!(parse_expire_flags(&[]), Ok(0));
        assert_eq!(parse_expire_flags(&[&b"gt"[..], b"XX"]), Ok(EXPIRE_GT | EXPIRE_XX));
        let nx = CmdError::msg("ERR NX and XX, GT or LT options at the same time are not compatible");
        assert_eq!(parse_expire_flags(&[&b"NX"[..], b"LT"]), Err(nx));
        let gtlt = CmdError::msg("ERR GT and LT options at the same time are not compatible");
        assert_eq!(parse_expire_flags(&[&b"GT"[..], b"LT"]), Err(gtlt));
        assert_eq!(parse_expire_flags(&[&b"foo"[..]]), Err(CmdError::msg("ERR Unsupported option foo")));
        // No TTL is infinite: GT never wins over it, LT always does.
        assert!(!expire_allowed(EXPIRE_GT, None, 100));
        assert!(expire_allowed(EXPIRE_LT, None, 100));
        assert!(expire_allowed(EXPIRE_GT, Some(50), 100));
        assert!(!expire_allowed(EXPIRE_LT, Some(50), 100));
        assert!(!expire_allowed(EXPIRE_NX, Some(50), 100));
        assert!(!expire_allowed(EXPIRE_XX, None, 100));
    }

    #[test]
    fn db_index_errors() {
        assert_eq!(parse_db_index(b"3", 16), Ok(3));
        assert_eq!(parse_db_index(b"16", 16), Err(CmdError::msg(ERR_DB_RANGE)));
        assert_eq!(parse_db_index(b"-1", 16), Err(CmdError::msg(ERR_DB_RANGE)));
        assert_eq!(parse_db_index(b"x", 16), Err(CmdError::NotInteger));
        assert!(matches!(parse_db_index(b"99999999999", 16), Err(CmdError::Msg(m)) if m.contains("must between")));
    }

    #[test]
    fn plans_lock_the_destination_db() {
        let id = |db: usize, key: &[u8]| crate::engine::shard_id(db, key_shard(key));
        let mut p = LockPlan::default();
        plan_move(&[b"MOVE", b"k", b"5"], 0, &mut p).unwrap();
        assert_eq!(p.ids.as_slice(), &[id(5, b"k")]);
        let mut p = LockPlan::default();
        plan_move(&[b"MOVE", b"k", b"x"], 0, &mut p).unwrap();
        assert!(p.is_empty());
        let mut p = LockPlan::default();
        let args: &[&[u8]] = &[b"COPY", b"a", b"b", b"REPLACE", b"DB", b"1", b"DB", b"3"];
        plan_copy(args, 0, &mut p).unwrap();
        assert_eq!(p.ids.as_slice(), &[id(3, b"b")]);
        let mut p = LockPlan::default();
        plan_copy(&[b"COPY", b"a", b"b"], 2, &mut p).unwrap();
        assert_eq!(p.ids.as_slice(), &[id(2, b"b")]);
    }

    /// Keys present for the whole scan are returned at least once while other keys are added
    /// (growing the shards' tables) and removed (shrinking them) between calls.
    #[test]
    fn scan_returns_stable_keys_across_resizes() {
        let srv = server();
        let stats = Counters::default();
        let mut locks = Locks::none(&srv.ks);
        for i in 0..3000 {
            put(&mut locks, 0, format!("stable:{i}").as_bytes(), None);
        }
        let mut seen = HashSet::new();
        let (mut cursor, mut round) = (0, 0);
        loop {
            let (next, keys) = scan_keys(&srv, &stats, &mut locks, 0, 0, cursor, &opts(50));
            seen.extend(keys);
            round += 1;
            if round < 40 {
                for j in 0..500 {
                    put(&mut locks, 0, format!("extra:{round}:{j}").as_bytes(), None);
                }
            } else if round < 80 {
                for j in 0..500 {
                    remove(&mut locks, 0, format!("extra:{}:{j}", round - 39).as_bytes());
                }
            }
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        for i in 0..3000 {
            assert!(seen.contains(format!("stable:{i}").as_bytes()), "missed stable:{i}");
        }
    }

    #[test]
    fn scan_filters_and_small_keyspace_in_one_call() {
        let srv = server();
        let stats = Counters::default();
        let mut locks = Locks::none(&srv.ks);
        let (next, keys) = scan_keys(&srv, &stats, &mut locks, 0, 0, 0, &opts(10));
        assert_eq!((next, keys.len()), (0, 0));
        for k in ["a1", "a2", "b1"] {
            put(&mut locks, 0, k.as_bytes(), None);
        }
        put(&mut locks, 0, b"a3", Some(1000));
        let (next, keys) = scan_keys(&srv, &stats, &mut locks, 0, 2000, 0, &opts(10));
        assert_eq!((next, keys.len()), (0, 3), "expired a3 skipped");
        assert_eq!(srv.ks.dbsize(0), 3, "expired a3 reclaimed");
        let o = ScanOptions { count: 10, pattern: Some(b"a*"), type_name: Some(b"STRING") };
        let (_, mut keys) = scan_keys(&srv, &stats, &mut locks, 0, 2000, 0, &o);
        keys.sort();
        assert_eq!(keys, vec![Box::from(&b"a1"[..]), Box::from(&b"a2"[..])]);
        let o = ScanOptions { count: 10, pattern: None, type_name: Some(b"list") };
        assert!(scan_keys(&srv, &stats, &mut locks, 0, 2000, 0, &o).1.is_empty());
    }

    #[test]
    fn walkers_skip_and_reclaim_expired_keys() {
        let srv = server();
        let stats = Counters::default();
        let mut locks = Locks::none(&srv.ks);
        let mut rng = rand::thread_rng();
        assert!(random_key(&srv, &stats, &mut locks, 0, 0, &mut rng).is_none());
        for i in 0..2000 {
            put(&mut locks, 0, format!("gone:{i}").as_bytes(), Some(10));
        }
        // Everything expired: RANDOMKEY terminates with null and the keys are gone.
        assert!(random_key(&srv, &stats, &mut locks, 0, 20, &mut rng).is_none());
        assert_eq!(srv.ks.dbsize(0), 0);
        for i in 0..2000 {
            put(&mut locks, 0, format!("gone:{i}").as_bytes(), Some(10));
        }
        put(&mut locks, 0, b"alive", None);
        assert_eq!(random_key(&srv, &stats, &mut locks, 0, 20, &mut rng).as_deref(), Some(&b"alive"[..]));
        let mut live = Vec::new();
        for_each_live_key(&srv, &stats, &mut locks, 0, 20, |k, _| live.push(k.to_vec()));
        assert_eq!(live, vec![b"alive".to_vec()]);
        assert_eq!(srv.ks.dbsize(0), 1);
        assert!(stats.expired_keys.load(Ordering::Relaxed) >= 4000);
    }

    #[test]
    fn randomkey_is_roughly_uniform() {
        let srv = server();
        let stats = Counters::default();
        let mut locks = Locks::none(&srv.ks);
        // Ten keys in one shard (hash tag) and ten spread out: each should be picked about as
        // often as any other.
        for i in 0..10 {
            put(&mut locks, 0, format!("{{tag}}:{i}").as_bytes(), None);
            put(&mut locks, 0, format!("spread:{i}").as_bytes(), None);
        }
        let mut rng = rand::thread_rng();
        let mut tagged = 0;
        for _ in 0..2000 {
            if random_key(&srv, &stats, &mut locks, 0, 0, &mut rng).unwrap().starts_with(b"{tag}") {
                tagged += 1;
            }
        }
        assert!((700..1300).contains(&tagged), "tagged picked {tagged} of 2000");
    }
    // Whole commands through a session (keys are created directly in the keyspace, so these
    // tests need no string command).

    use crate::engine::Obj;
    use crate::exec::testing::TestClient;
    use std::sync::Arc;

    fn session(srv: &Server) -> TestClient {
        TestClient::new(srv)
    }

    fn run(srv: &Server, s: &mut TestClient, line: &str) -> String {
        s.run(srv, line)
    }

    fn put_now(srv: &Server, db: usize, key: &str, ttl_ms: Option<i64>) {
        let mut locks = Locks::none(&srv.ks);
        put(&mut locks, db, key.as_bytes(), ttl_ms.map(|t| srv.now_ms() + t));
    }

    type Seen = Arc<parking_lot::Mutex<Vec<(usize, Vec<String>)>>>;

    fn record_effects(srv: &Server) -> Seen {
        let seen: Seen = Default::default();
        let sink = seen.clone();
        srv.set_effect_sink(Some(Box::new(move |effects, _| {
            sink.lock().extend(
                effects
                    .iter()
                    .map(|e| (e.db, e.argv.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect())),
            );
        })));
        seen
    }

    #[test]
    fn expire_effects_are_absolute_or_deletions() {
        let srv = server();
        let seen = record_effects(&srv);
        let mut s = session(&srv);
        put_now(&srv, 0, "k", None);
        assert_eq!(run(&srv, &mut s, "EXPIRE k 100 NX"), ":1\r\n");
        assert_eq!(run(&srv, &mut s, "EXPIRE k 50 GT"), ":0\r\n");
        assert_eq!(run(&srv, &mut s, "PEXPIREAT k 99999999999999"), ":1\r\n");
        assert_eq!(run(&srv, &mut s, "EXPIRETIME k"), ":100000000000\r\n");
        assert_eq!(run(&srv, &mut s, "EXPIRE k -1"), ":1\r\n");
        assert_eq!(run(&srv, &mut s, "EXISTS k"), ":0\r\n");
        let got = seen.lock().clone();
        assert_eq!(got.len(), 3, "{got:?}");
        let when: i64 = got[0].1[2].parse().unwrap();
        assert_eq!(got[0].1[..2], ["PEXPIREAT", "k"]);
        assert_eq!(got[0].1[3], "NX");
        assert!((when - srv.now_ms() - 100_000).abs() < 5_000);
        assert_eq!(got[1].1, ["PEXPIREAT", "k", "99999999999999"]);
        assert_eq!(got[2].1, ["DEL", "k"]);
    }

    #[test]
    fn walkers_publish_deletions_of_expired_keys() {
        let srv = server();
        let seen = record_effects(&srv);
        let mut s = session(&srv);
        put_now(&srv, 0, "old", Some(-1));
        put_now(&srv, 0, "new", None);
        assert_eq!(run(&srv, &mut s, "KEYS *"), "*1\r\n$3\r\nnew\r\n");
        assert_eq!(seen.lock().clone(), vec![(0, vec!["DEL".to_string(), "old".to_string()])]);
        assert_eq!(run(&srv, &mut s, "DBSIZE"), ":1\r\n");
    }

    #[test]
    fn rename_moves_ttl_and_signals_watchers() {
        let srv = server();
        let mut a = session(&srv);
        let mut b = session(&srv);
        put_now(&srv, 0, "src", Some(100_000));
        put_now(&srv, 0, "dst", None);
        assert_eq!(run(&srv, &mut a, "WATCH dst"), "+OK\r\n");
        assert_eq!(run(&srv, &mut b, "RENAMENX src dst"), ":0\r\n");
        assert_eq!(run(&srv, &mut b, "RENAME src src"), "+OK\r\n");
        assert_eq!(run(&srv, &mut b, "RENAME nosuch x"), "-ERR no such key\r\n");
        assert_eq!(run(&srv, &mut b, "RENAME src dst"), "+OK\r\n");
        assert_eq!(run(&srv, &mut a, "MULTI"), "+OK\r\n");
        assert_eq!(run(&srv, &mut a, "EXISTS src dst dst"), "+QUEUED\r\n");
        assert_eq!(run(&srv, &mut a, "EXEC"), "*-1\r\n");
        assert_eq!(run(&srv, &mut a, "EXISTS src dst dst"), ":2\r\n");
        let ttl = run(&srv, &mut a, "TTL dst");
        assert!(ttl == ":100\r\n" || ttl == ":99\r\n", "{ttl}");
    }

    #[test]
    fn move_and_copy_between_databases() {
        let srv = server();
        let mut s = session(&srv);
        put_now(&srv, 0, "k", Some(100_000));
        put_now(&srv, 1, "taken", None);
        assert_eq!(run(&srv, &mut s, "MOVE k 0"), "-ERR source and destination objects are the same\r\n");
        assert_eq!(run(&srv, &mut s, "MOVE k 16"), "-ERR DB index is out of range\r\n");
        assert_eq!(run(&srv, &mut s, "MOVE k 1"), ":1\r\n");
        assert_eq!(run(&srv, &mut s, "MOVE k 1"), ":0\r\n");
        assert_eq!(run(&srv, &mut s, "SELECT 1"), "+OK\r\n");
        assert!(run(&srv, &mut s, "PTTL k").parse_int_reply() > 90_000);
        assert_eq!(run(&srv, &mut s, "COPY k taken"), ":0\r\n");
        assert_eq!(run(&srv, &mut s, "COPY k k"), "-ERR source and destination objects are the same\r\n");
        assert_eq!(run(&srv, &mut s, "COPY k k DB 2"), ":1\r\n");
        assert_eq!(run(&srv, &mut s, "COPY k taken REPLACE"), ":1\r\n");
        assert!(run(&srv, &mut s, "PTTL taken").parse_int_reply() > 90_000);
        assert_eq!(run(&srv, &mut s, "MULTI"), "+OK\r\n");
        run(&srv, &mut s, "MOVE k 3");
        run(&srv, &mut s, "COPY taken k DB 4");
        run(&srv, &mut s, "KEYS *");
        assert_eq!(run(&srv, &mut s, "EXEC"), "*3\r\n:1\r\n:1\r\n*1\r\n$5\r\ntaken\r\n");
        assert_eq!(srv.ks.dbsize(0), 0);
        assert_eq!(srv.ks.dbsize(1), 1);
        assert_eq!(srv.ks.dbsize(2), 1);
        assert_eq!(srv.ks.dbsize(3), 1);
        assert_eq!(srv.ks.dbsize(4), 1);
    }

    #[test]
    fn object_and_type() {
        let srv = server();
        let mut s = session(&srv);
        let mut locks = Locks::none(&srv.ks);
        locks.with_shard(0, key_shard(b"n"), |sh| {
            sh.keys.insert(b"n", Obj { val: Value::Int(42), lru: crate::engine::value::LRU_BASE })
        });
        locks.with_shard(0, key_shard(b"big"), |sh| {
            sh.keys.insert(b"big", Obj { val: Value::Int(10_000), lru: crate::engine::value::LRU_BASE })
        });
        drop(locks);
        assert_eq!(run(&srv, &mut s, "OBJECT ENCODING n"), "$3\r\nint\r\n");
        assert_eq!(run(&srv, &mut s, "OBJECT REFCOUNT n"), ":2147483647\r\n");
        assert_eq!(run(&srv, &mut s, "OBJECT REFCOUNT big"), ":1\r\n");
        assert_eq!(run(&srv, &mut s, "OBJECT REFCOUNT nosuch"), "$-1\r\n");
        assert!(run(&srv, &mut s, "OBJECT FREQ n").starts_with("-ERR An LFU maxmemory policy is not selected"));
        assert_eq!(run(&srv, &mut s, "OBJECT FREQ nosuch"), "$-1\r\n");
        assert_eq!(run(&srv, &mut s, "OBJECT IDLETIME n"), ":0\r\n");
        assert_eq!(run(&srv, &mut s, "TYPE n"), "+string\r\n");
        assert_eq!(run(&srv, &mut s, "TYPE nosuch"), "+none\r\n");
        assert_eq!(run(&srv, &mut s, "EXISTS n n nosuch"), ":2\r\n");
        assert!(run(&srv, &mut s, "OBJECT HELP").starts_with("*15\r\n+OBJECT <subcommand>"));
    }

    trait IntReply {
        fn parse_int_reply(&self) -> i64;
    }

    impl IntReply for String {
        fn parse_int_reply(&self) -> i64 {
            self.trim_start_matches(':').trim_end().parse().unwrap()
        }
    }
}
