//! String commands (Redis's `t_string.c`): GET/SET and their variants, counters, ranges, LCS.
//!
//! Encodings follow what Redis would report in OBJECT ENCODING: a value set whole goes
//! through [`Value::from_bytes`] (`int`, `embstr` or `raw`), a value modified in place
//! (APPEND, SETRANGE) becomes [`Value::Raw`], the INCR family stores [`Value::Int`].

use crate::engine::keytable::Entry;
use crate::engine::ldouble::{self, IncrError, LongDoubleSource};
use crate::engine::Value;
use crate::exec::*;
use crate::protocol::Reply;
use crate::services::notify;

// ---------------------------------------------------------------------------------------------
// Helpers shared by the string and bitmap commands
// ---------------------------------------------------------------------------------------------

/// `proto-max-bulk-len`: the largest string a client may create by growing one.
pub(crate) fn max_bulk_len(ctx: &Ctx) -> i64 {
    ctx.srv.config.hot.proto_max_bulk_len.load(std::sync::atomic::Ordering::Relaxed)
}

/// Redis's `checkStringLength`: a string of `size + append` bytes must fit under
/// proto-max-bulk-len. Called before anything is allocated, so a client cannot make us
/// allocate more than the limit.
fn check_string_length(max: i64, size: u64, append: u64) -> CmdResult {
    match size.checked_add(append) {
        Some(total) if total <= max.max(0) as u64 => Ok(()),
        _ => Err(CmdError::msg("ERR string exceeds maximum allowed size (proto-max-bulk-len)")),
    }
}

/// Grows `v` to hold `extra` more bytes the way sds does (double while small, then +1 MB), so
/// repeated APPENDs are amortised without doubling a huge string's memory.
pub(crate) fn reserve_sds(v: &mut Vec<u8>, extra: usize) {
    let need = v.len() + extra;
    if need > v.capacity() {
        const PREALLOC: usize = 1 << 20;
        let target = if need < PREALLOC { need * 2 } else { need + PREALLOC };
        v.reserve_exact(target - v.len());
    }
}

/// Adds a string value as a bulk reply, read in place from the key (`Entry::as_bytes`).
fn reply_value(reply: &mut Reply, v: &Entry) {
    let mut ibuf = itoa::Buffer::new();
    match v.as_bytes(&mut ibuf) {
        Some(s) => reply.bulk(s),
        None => reply.null(),
    }
}

/// Redis's `getGenericCommand`: replies with the value of `key` (null if missing).
/// WRONGTYPE for other types. Returns whether the key existed.
fn get_generic(ctx: &mut Ctx, key: &[u8]) -> Result<bool, CmdError> {
    match ctx.ks.get_string(key)? {
        Some(v) => {
            reply_value(ctx.reply, &v);
            Ok(true)
        }
        None => {
            ctx.reply.null();
            Ok(false)
        }
    }
}

/// Whether a value is the string `want` (an integer compared as its text); WRONGTYPE when it
/// is not a string. SET … IFEQ's and DELIFEQ's test.
fn holds_string(v: &Value, want: &[u8]) -> Result<bool, CmdError> {
    if !v.is_string() {
        return Err(CmdError::WrongType);
    }
    let mut ibuf = itoa::Buffer::new();
    Ok(v.as_bytes(&mut ibuf) == Some(want))
}

/// A string's digest as DIGEST answers it (Redis 8.4): XXH3's 64 bits, 16 lowercase hex digits.
fn digest_of(bytes: &[u8]) -> [u8; 16] {
    let h = xxhash_rust::xxh3::xxh3_64(bytes);
    let mut out = [0u8; 16];
    for (i, b) in out.iter_mut().enumerate() {
        *b = b"0123456789abcdef"[((h >> (60 - 4 * i)) & 0xf) as usize];
    }
    out
}

/// A compare-and-set/delete condition: Valkey 8.1's IFEQ and Redis 8.4's IFNE, IFDEQ, IFDNE.
#[derive(Clone, Copy)]
enum Cond<'a> {
    Eq(&'a [u8]),
    Ne(&'a [u8]),
    DigestEq(&'a [u8]),
    DigestNe(&'a [u8]),
}

impl<'a> Cond<'a> {
    fn parse(token: &[u8], arg: &'a [u8]) -> Option<Cond<'a>> {
        Some(if eq_ic(token, "IFEQ") {
            Cond::Eq(arg)
        } else if eq_ic(token, "IFNE") {
            Cond::Ne(arg)
        } else if eq_ic(token, "IFDEQ") {
            Cond::DigestEq(arg)
        } else if eq_ic(token, "IFDNE") {
            Cond::DigestNe(arg)
        } else {
            return None;
        })
    }

    /// Whether the condition holds for the key's value (None: no key). IFEQ and IFDEQ need the
    /// key, IFNE and IFDNE hold without one; a value that is not a string is WRONGTYPE. A
    /// digest is compared as DIGEST writes it, hex digits in either case.
    fn holds(self, v: Option<&Value>) -> Result<bool, CmdError> {
        let Some(v) = v else {
            return Ok(matches!(self, Cond::Ne(_) | Cond::DigestNe(_)));
        };
        if !v.is_string() {
            return Err(CmdError::WrongType);
        }
        let mut ibuf = itoa::Buffer::new();
        let have = v.as_bytes(&mut ibuf).unwrap_or_default();
        let digest_is = |want: &[u8]| digest_of(have).eq_ignore_ascii_case(want);
        Ok(match self {
            Cond::Eq(want) => have == want,
            Cond::Ne(want) => have != want,
            Cond::DigestEq(want) => digest_is(want),
            Cond::DigestNe(want) => !digest_is(want),
        })
    }
}

/// Reads an integer from a string value (Redis's `getLongLongFromObject`): the whole string
/// must be a canonical 64-bit integer.
fn value_as_i64(v: &Value) -> Result<i64, CmdError> {
    if let Value::Int(i) = v {
        return Ok(*i);
    }
    let mut ibuf = itoa::Buffer::new();
    parse_int(v.as_bytes(&mut ibuf).ok_or(CmdError::WrongType)?)
}

// ---------------------------------------------------------------------------------------------
// SET and its options
// ---------------------------------------------------------------------------------------------

/// Options of SET and GETEX (Redis's `OBJ_*` flags).
#[derive(Default, Clone, Copy)]
struct SetFlags {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    persist: bool,
    ex: bool,
    px: bool,
    exat: bool,
    pxat: bool,
}

impl SetFlags {
    fn any_expire(&self) -> bool {
        self.ex || self.px || self.exat || self.pxat
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Unit {
    Seconds,
    Millis,
}

#[derive(Clone, Copy, PartialEq)]
enum ExtCommand {
    Set,
    GetEx,
    /// MSETEX, its options starting at this argument.
    MSetEx(usize),
}

/// Redis's `parseExtendedStringArgumentsOrReply`. The conflict rules are Redis's exactly:
/// an option conflicting with one already given is a syntax error, the same option may be
/// repeated (the last expire wins), and an expire option needs a following argument.
/// Returns the flags, the expire argument, its unit, and the IFEQ/IFNE/IFDEQ/IFDNE condition.
#[allow(clippy::type_complexity)]
fn parse_ext_args<'a>(
    args: &[&'a [u8]],
    kind: ExtCommand,
) -> Result<(SetFlags, Option<&'a [u8]>, Unit, Option<Cond<'a>>), CmdError> {
    let mut f = SetFlags::default();
    let mut expire = None;
    let mut ifeq: Option<Cond<'a>> = None;
    let mut unit = Unit::Seconds;
    let mut j = match kind {
        ExtCommand::Set => 3,
        ExtCommand::GetEx => 2,
        ExtCommand::MSetEx(start) => start,
    };
    // GET and IFEQ are SET's alone; NX, XX and KEEPTTL MSETEX's too.
    let is_set = kind == ExtCommand::Set;
    let setlike = kind != ExtCommand::GetEx;
    while j < args.len() {
        let opt = args[j];
        let next = args.get(j + 1).copied();
        if eq_ic(opt, "NX") && !f.xx && ifeq.is_none() && setlike {
            f.nx = true;
        } else if eq_ic(opt, "XX") && !f.nx && ifeq.is_none() && setlike {
            f.xx = true;
        } else if let Some(c) =
            next.and_then(|n| Cond::parse(opt, n)).filter(|_| !f.nx && !f.xx && ifeq.is_none() && is_set)
        {
            // Valkey 8.1's IFEQ, Redis 8.4's IFNE, IFDEQ and IFDNE: one condition at most.
            ifeq = Some(c);
            j += 1;
        } else if eq_ic(opt, "GET") && is_set {
            f.get = true;
        } else if eq_ic(opt, "KEEPTTL") && !f.persist && !f.any_expire() && setlike {
            f.keepttl = true;
        } else if eq_ic(opt, "PERSIST") && kind == ExtCommand::GetEx && !f.any_expire() && !f.keepttl {
            f.persist = true;
        } else if eq_ic(opt, "EX") && !f.keepttl && !f.persist && !f.exat && !f.px && !f.pxat && next.is_some() {
            f.ex = true;
            expire = next;
            j += 1;
        } else if eq_ic(opt, "PX") && !f.keepttl && !f.persist && !f.ex && !f.exat && !f.pxat && next.is_some() {
            f.px = true;
            unit = Unit::Millis;
            expire = next;
            j += 1;
        } else if eq_ic(opt, "EXAT") && !f.keepttl && !f.persist && !f.ex && !f.px && !f.pxat && next.is_some() {
            f.exat = true;
            expire = next;
            j += 1;
        } else if eq_ic(opt, "PXAT") && !f.keepttl && !f.persist && !f.ex && !f.exat && !f.px && next.is_some() {
            f.pxat = true;
            unit = Unit::Millis;
            expire = next;
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok((f, expire, unit, ifeq))
}

/// Redis's `getExpireMillisecondsOrReply`: the expire argument as an absolute Unix time in
/// milliseconds. Zero, negative, or overflowing values are "invalid expire time".
fn expire_at_ms(now: i64, cmd: &str, expire: &[u8], f: SetFlags, unit: Unit) -> Result<i64, CmdError> {
    let invalid = || CmdError::msg(format!("ERR invalid expire time in '{cmd}' command"));
    let mut ms = parse_int(expire)?;
    if ms <= 0 || (unit == Unit::Seconds && ms > i64::MAX / 1000) {
        return Err(invalid());
    }
    if unit == Unit::Seconds {
        ms *= 1000;
    }
    if f.ex || f.px {
        // Redis adds in C and then checks for a non-positive result; wrapping reproduces that.
        ms = ms.wrapping_add(now);
    }
    if ms <= 0 {
        return Err(invalid());
    }
    Ok(ms)
}

/// How SET-like commands answer: SET says OK / null, SETNX says 1 / 0.
#[derive(Clone, Copy, PartialEq)]
enum SetReply {
    OkNull,
    OneZero,
}

/// Redis's `setGenericCommand`, shared by SET, SETNX, SETEX and PSETEX; `ifeq` is Valkey
/// 8.1's condition (set only over a string equal to it).
#[allow(clippy::too_many_arguments)]
fn set_generic(
    ctx: &mut Ctx,
    f: SetFlags,
    key: &[u8],
    val: &[u8],
    expire: Option<&[u8]>,
    unit: Unit,
    replies: SetReply,
    ifeq: Option<Cond>,
) -> CmdResult {
    // The expire is validated before anything else happens (even before GET replies).
    let when = match expire {
        Some(e) => Some(expire_at_ms(ctx.ks.now, ctx.cmd.full_name(), e, f, unit)?),
        None => None,
    };
    if f.get {
        get_generic(ctx, key)?;
    }
    let (found, holds) = match (ctx.ks.lookup_write(key), ifeq) {
        // Without GET, a condition over another type is WRONGTYPE (with GET, GET said so).
        (o, Some(c)) => (o.is_some(), c.holds(o.as_deref())?),
        (o, None) => (o.is_some(), true),
    };
    if (f.nx && found) || (f.xx && !found) || !holds {
        // Refused: nothing written, so nothing counted dirty or propagated.
        if !f.get {
            match replies {
                SetReply::OkNull => ctx.reply.null(),
                SetReply::OneZero => ctx.reply.int(0),
            }
        }
        return Ok(());
    }
    ctx.ks.set(key, Value::from_bytes(val), f.keepttl || when.is_some());
    ctx.ks.note(notify::STRING, "set", key);
    if let Some(ms) = when {
        ctx.ks.set_expire(key, ms);
        ctx.ks.note(notify::GENERIC, "expire", key);
        // Relative times would replay differently later: propagate the absolute time. A
        // command given PXAT already goes as it is, GET and the option's spelling included, as
        // Redis propagates it.
        if !f.pxat {
            let ms = itoa::Buffer::new().format(ms).as_bytes().to_vec();
            ctx.rewrite_effect(vec![b"SET".to_vec(), key.to_vec(), val.to_vec(), b"PXAT".to_vec(), ms]);
        }
    } else if f.get {
        // Propagate without GET (which may be repeated); the rest is deterministic as is.
        ctx.rewrite_effect(without_get(ctx.args));
    }
    if !f.get {
        match replies {
            SetReply::OkNull => ctx.reply.ok(),
            SetReply::OneZero => ctx.reply.int(1),
        }
    }
    Ok(())
}

/// SET's arguments without its GET options (the values of EX … and IFEQ kept, even one
/// spelt `GET`).
fn without_get(args: &[&[u8]]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = args[..3].iter().map(|a| a.to_vec()).collect();
    let mut j = 3;
    while j < args.len() {
        let takes_value =
            ["EX", "PX", "EXAT", "PXAT", "IFEQ", "IFNE", "IFDEQ", "IFDNE"].iter().any(|t| eq_ic(args[j], t));
        if takes_value {
            out.extend([args[j].to_vec(), args[j + 1].to_vec()]);
            j += 2;
        } else {
            if !eq_ic(args[j], "GET") {
                out.push(args[j].to_vec());
            }
            j += 1;
        }
    }
    out
}

// SET key value [NX | XX | IFEQ comparison-value] [GET] [EX seconds | PX milliseconds | EXAT unix-time-seconds |
//     PXAT unix-time-milliseconds | KEEPTTL]
pub fn set(ctx: &mut Ctx) -> CmdResult {
    let (f, expire, unit, ifeq) = parse_ext_args(ctx.args, ExtCommand::Set)?;
    let (key, val) = (ctx.arg(1), ctx.arg(2));
    set_generic(ctx, f, key, val, expire, unit, SetReply::OkNull, ifeq)
}

// SETNX key value
pub fn setnx(ctx: &mut Ctx) -> CmdResult {
    let f = SetFlags { nx: true, ..Default::default() };
    let (key, val) = (ctx.arg(1), ctx.arg(2));
    set_generic(ctx, f, key, val, None, Unit::Seconds, SetReply::OneZero, None)
}

// SETEX key seconds value
pub fn setex(ctx: &mut Ctx) -> CmdResult {
    let f = SetFlags { ex: true, ..Default::default() };
    let (key, secs, val) = (ctx.arg(1), ctx.arg(2), ctx.arg(3));
    set_generic(ctx, f, key, val, Some(secs), Unit::Seconds, SetReply::OkNull, None)
}

// PSETEX key milliseconds value
pub fn psetex(ctx: &mut Ctx) -> CmdResult {
    let f = SetFlags { px: true, ..Default::default() };
    let (key, ms, val) = (ctx.arg(1), ctx.arg(2), ctx.arg(3));
    set_generic(ctx, f, key, val, Some(ms), Unit::Millis, SetReply::OkNull, None)
}

// ---------------------------------------------------------------------------------------------
// GET and its variants
// ---------------------------------------------------------------------------------------------

// GET key
pub fn get(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.arg(1);
    get_generic(ctx, key).map(|_| ())
}

// GETSET key value
pub fn getset(ctx: &mut Ctx) -> CmdResult {
    let (key, val) = (ctx.arg(1), ctx.arg(2));
    get_generic(ctx, key)?;
    ctx.ks.set(key, Value::from_bytes(val), false);
    ctx.ks.note(notify::STRING, "set", key);
    ctx.rewrite_effect(vec![b"SET".to_vec(), key.to_vec(), val.to_vec()]);
    Ok(())
}

// GETDEL key
pub fn getdel(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.arg(1);
    if get_generic(ctx, key)? && ctx.ks.delete(key).is_some() {
        ctx.rewrite_effect(vec![b"DEL".to_vec(), key.to_vec()]);
        ctx.ks.note(notify::GENERIC, "del", key);
    }
    Ok(())
}

// GETEX key [EX seconds | PX milliseconds | EXAT unix-time-seconds |
//     PXAT unix-time-milliseconds | PERSIST]
pub fn getex(ctx: &mut Ctx) -> CmdResult {
    let (f, expire, unit, _) = parse_ext_args(ctx.args, ExtCommand::GetEx)?;
    let key = ctx.arg(1);
    let now = ctx.ks.now;
    let cmd = ctx.cmd;
    let name = cmd.full_name();
    // Unlike SET, the key is looked up (and a missing key answered) before the expire is
    // validated, as in Redis.
    let when = match ctx.ks.lookup_read(key) {
        None => {
            ctx.reply.null();
            return Ok(());
        }
        Some(o) if !o.is_string() => return Err(CmdError::WrongType),
        Some(o) => {
            let when = match expire {
                Some(e) => Some(expire_at_ms(now, name, e, f, unit)?),
                None => None,
            };
            reply_value(ctx.reply, &o);
            when
        }
    };
    match when {
        // An absolute time already in the past deletes the key, propagated as UNLINK when
        // expiries are lazy, DEL otherwise (as Redis's getexCommand).
        Some(ms) if (f.exat || f.pxat) && ms <= now => {
            ctx.ks.delete(key);
            let verb: &[u8] =
                if ctx.srv.config.flag(crate::config::p::LAZYFREE_LAZY_EXPIRE) { b"UNLINK" } else { b"DEL" };
            ctx.rewrite_effect(vec![verb.to_vec(), key.to_vec()]);
            ctx.ks.note(notify::GENERIC, "del", key);
        }
        Some(ms) => {
            ctx.ks.set_expire(key, ms);
            ctx.ks.modified(key);
            ctx.ks.note(notify::GENERIC, "expire", key);
            let ms = itoa::Buffer::new().format(ms).as_bytes().to_vec();
            ctx.rewrite_effect(vec![b"PEXPIREAT".to_vec(), key.to_vec(), ms]);
        }
        // PERSIST is a change only if there was a TTL to remove.
        None if f.persist && ctx.ks.remove_expire(key) => {
            ctx.ks.modified(key);
            ctx.rewrite_effect(vec![b"PERSIST".to_vec(), key.to_vec()]);
            ctx.ks.note(notify::GENERIC, "persist", key);
        }
        None => {}
    }
    Ok(())
}

// MGET key [key ...]
pub fn mget(ctx: &mut Ctx) -> CmdResult {
    let args = ctx.args;
    ctx.reply.array(args.len() - 1);
    for &key in &args[1..] {
        // Keys of other types read as null here, not WRONGTYPE.
        match ctx.ks.lookup_read(key) {
            Some(o) if o.is_string() => reply_value(ctx.reply, &o),
            _ => ctx.reply.null(),
        }
    }
    Ok(())
}

/// MSET and MSETNX: all keys are set or (MSETNX) none is.
fn mset_generic(ctx: &mut Ctx, nx: bool) -> CmdResult {
    let args = ctx.args;
    if args.len().is_multiple_of(2) {
        return Err(CmdError::Arity(ctx.cmd.full_name().to_string()));
    }
    if nx {
        for pair in args[1..].chunks(2) {
            if ctx.ks.lookup_write(pair[0]).is_some() {
                ctx.reply.int(0);
                return Ok(());
            }
        }
    }
    for pair in args[1..].chunks(2) {
        ctx.ks.set(pair[0], Value::from_bytes(pair[1]), false);
        ctx.ks.note(notify::STRING, "set", pair[0]);
    }
    if nx {
        ctx.reply.int(1);
    } else {
        ctx.reply.ok();
    }
    Ok(())
}

// MSET key value [key value ...]
pub fn mset(ctx: &mut Ctx) -> CmdResult {
    mset_generic(ctx, false)
}

// MSETNX key value [key value ...]
pub fn msetnx(ctx: &mut Ctx) -> CmdResult {
    mset_generic(ctx, true)
}

// MSETEX numkeys key value [key value ...] [NX | XX] [EX seconds | PX milliseconds |
//     EXAT unix-time-seconds | PXAT unix-time-milliseconds | KEEPTTL]   (Valkey 9.1)
//
// Sets every pair with one expiry, all or none: NX only when no key exists, XX only when every
// key does (1 when set, 0 when not). Over keys of any type, as MSET.
pub fn msetex(ctx: &mut Ctx) -> CmdResult {
    let args = ctx.args;
    let n = match crate::protocol::parse_i64(args[1]) {
        Some(n) if (1..=i32::MAX as i64).contains(&n) => n as usize,
        _ => return Err(CmdError::msg("ERR invalid numkeys value or out of range")),
    };
    // The keys' shards are locked only when all n pairs are there (`lock_plan`): nothing is
    // looked at before this check.
    let start = n.checked_mul(2).and_then(|p| p.checked_add(2)).filter(|&s| s <= args.len()).ok_or(CmdError::Syntax)?;
    let (f, expire, unit, _) = parse_ext_args(args, ExtCommand::MSetEx(start))?;
    let when = match expire {
        Some(e) => Some(expire_at_ms(ctx.ks.now, ctx.cmd.full_name(), e, f, unit)?),
        None => None,
    };
    let pairs = &args[2..start];
    if f.nx || f.xx {
        let want = f.xx;
        for pair in pairs.chunks(2) {
            if ctx.ks.lookup_write(pair[0]).is_some() != want {
                ctx.reply.int(0);
                return Ok(());
            }
        }
    }
    for pair in pairs.chunks(2) {
        ctx.ks.set(pair[0], Value::from_bytes(pair[1]), f.keepttl || when.is_some());
        ctx.ks.note(notify::STRING, "set", pair[0]);
        if let Some(ms) = when {
            ctx.ks.set_expire(pair[0], ms);
            ctx.ks.note(notify::GENERIC, "expire", pair[0]);
        }
    }
    if let Some(ms) = when {
        // Replicas and the AOF get the absolute time (the condition held here already).
        let mut argv: Vec<Vec<u8>> = args[..start].iter().map(|a| a.to_vec()).collect();
        argv.extend([b"PXAT".to_vec(), itoa::Buffer::new().format(ms).as_bytes().to_vec()]);
        ctx.rewrite_effect(argv);
    }
    ctx.reply.int(1);
    Ok(())
}

// DELIFEQ key value   (Valkey 9.0)
//
// Deletes the key if it holds exactly this string: 1 if deleted, 0 if not (missing or
// another value); WRONGTYPE over another type. Propagated as DEL.
pub fn delifeq(ctx: &mut Ctx) -> CmdResult {
    let (key, want) = (ctx.arg(1), ctx.arg(2));
    let equal = match ctx.ks.lookup_write(key) {
        None => false,
        Some(o) => holds_string(&o, want)?,
    };
    if equal && ctx.ks.delete(key).is_some() {
        ctx.ks.note(notify::GENERIC, "del", key);
        ctx.rewrite_effect(vec![b"DEL".to_vec(), key.to_vec()]);
        ctx.reply.int(1);
    } else {
        ctx.reply.int(0);
    }
    Ok(())
}

// DELEX key [IFEQ value | IFNE value | IFDEQ digest | IFDNE digest]   (Redis 8.4)
//
// Without a condition, DEL of one key (any type); with one, the key must hold a string and is
// deleted if the condition holds (Redis's documented behaviour: no server here runs Redis 8).
// 1 if deleted, else 0; propagated as DEL.
pub fn delex(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.arg(1);
    let cond = match ctx.args.len() {
        2 => None,
        4 => Some(Cond::parse(ctx.arg(2), ctx.arg(3)).ok_or(CmdError::Syntax)?),
        _ => return Err(CmdError::Syntax),
    };
    let delete = match (ctx.ks.lookup_write(key), cond) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some(o), Some(c)) => c.holds(Some(&*o))?,
    };
    if delete && ctx.ks.delete(key).is_some() {
        ctx.ks.note(notify::GENERIC, "del", key);
        ctx.rewrite_effect(vec![b"DEL".to_vec(), key.to_vec()]);
        ctx.reply.int(1);
    } else {
        ctx.no_effect();
        ctx.reply.int(0);
    }
    Ok(())
}

// DIGEST key   (Redis 8.4)
//
// The XXH3 digest of the string at key as 16 lowercase hex digits; null without the key,
// WRONGTYPE for another type.
pub fn digest(ctx: &mut Ctx) -> CmdResult {
    match ctx.ks.get_string(ctx.args[1])? {
        None => ctx.reply.null(),
        Some(o) => {
            let mut ibuf = itoa::Buffer::new();
            let d = digest_of(o.as_bytes(&mut ibuf).unwrap_or_default());
            ctx.reply.bulk(&d);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Counters
// ---------------------------------------------------------------------------------------------

/// Redis's `incrDecrCommand`: adds `incr` to the integer at key (0 if missing), keeping the
/// TTL, storing the result `int`-encoded.
fn incr_decr(ctx: &mut Ctx, incr: i64) -> CmdResult {
    let key = ctx.arg(1);
    // Updated in place (one hash lookup on this hot path); the TTL stays untouched.
    let new = match ctx.ks.lookup_write(key) {
        None => {
            ctx.ks.insert_new(key, Value::Int(incr));
            incr
        }
        Some(o) if !o.is_string() => return Err(CmdError::WrongType),
        Some(mut o) => {
            let new = value_as_i64(&o)?.checked_add(incr).ok_or(CmdError::Overflow)?;
            o.set(Value::Int(new));
            new
        }
    };
    ctx.ks.modified(key);
    ctx.ks.note(notify::STRING, "incrby", key);
    ctx.reply.int(new);
    Ok(())
}

// INCR key
pub fn incr(ctx: &mut Ctx) -> CmdResult {
    incr_decr(ctx, 1)
}

// DECR key
pub fn decr(ctx: &mut Ctx) -> CmdResult {
    incr_decr(ctx, -1)
}

// INCRBY key increment
pub fn incrby(ctx: &mut Ctx) -> CmdResult {
    let incr = ctx.arg_i64(2)?;
    incr_decr(ctx, incr)
}

// DECRBY key decrement
pub fn decrby(ctx: &mut Ctx) -> CmdResult {
    let decr = ctx.arg_i64(2)?;
    // Negating i64::MIN would overflow; Redis has a dedicated message for it.
    if decr == i64::MIN {
        return Err(CmdError::msg("ERR decrement would overflow"));
    }
    incr_decr(ctx, -decr)
}

// INCRBYFLOAT key increment
pub fn incrbyfloat(ctx: &mut Ctx) -> CmdResult {
    let (key, incr) = (ctx.arg(1), ctx.arg(2));
    // Computed in C long double (see `ldouble`), so the text matches Redis's digit for digit.
    let mut ibuf = itoa::Buffer::new();
    let result = match ctx.ks.lookup_write(key) {
        None => ldouble::incr_by(&LongDoubleSource::Int(0), incr),
        Some(o) => match &*o {
            // An int-encoded value converts exactly; text is parsed as Redis's string2ld.
            Value::Int(i) => ldouble::incr_by(&LongDoubleSource::Int(*i), incr),
            v => match v.as_bytes(&mut ibuf) {
                Some(text) => ldouble::incr_by(&LongDoubleSource::Text(text), incr),
                None => return Err(CmdError::WrongType),
            },
        },
    };
    let new = result.map_err(|e| match e {
        IncrError::BadValue | IncrError::BadIncrement => CmdError::NotFloat,
        IncrError::NotFinite => CmdError::msg("ERR increment would produce NaN or Infinity"),
    })?;
    // Redis stores the text as a plain string (embstr/raw), never int-encoded, and keeps the TTL.
    ctx.ks.set(key, Value::from_text(&new), true);
    ctx.ks.note(notify::STRING, "incrbyfloat", key);
    ctx.reply.bulk(&new);
    // Replicas and the AOF get the result, so float formatting can never make them diverge.
    ctx.rewrite_effect(vec![b"SET".to_vec(), key.to_vec(), new, b"KEEPTTL".to_vec()]);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Lengths and ranges
// ---------------------------------------------------------------------------------------------

// APPEND key value
pub fn append(ctx: &mut Ctx) -> CmdResult {
    let (key, val) = (ctx.arg(1), ctx.arg(2));
    let max = max_bulk_len(ctx);
    let total = match ctx.ks.lookup_write(key) {
        // A new key is stored as SET would store it (Redis runs tryObjectEncoding on it).
        None => {
            ctx.ks.set(key, Value::from_bytes(val), false);
            val.len()
        }
        Some(o) if !o.is_string() => return Err(CmdError::WrongType),
        Some(mut o) => {
            let cur = o.str_len().unwrap_or(0);
            check_string_length(max, cur as u64, val.len() as u64)?;
            let v = o.val_mut().make_raw().expect("string value");
            reserve_sds(v, val.len());
            v.extend_from_slice(val);
            let total = v.len();
            ctx.ks.modified(key);
            total
        }
    };
    ctx.ks.note(notify::STRING, "append", key);
    ctx.reply.int(total as i64);
    Ok(())
}

// STRLEN key
pub fn strlen(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.arg(1);
    let n = match ctx.ks.get_string(key)? {
        Some(v) => v.str_len().unwrap_or(0),
        None => 0,
    };
    ctx.reply.int(n as i64);
    Ok(())
}

/// The byte range `start..=end` of a string of `len` bytes after Redis's GETRANGE index
/// rules (negative indexes count from the end, out-of-range ones are clamped), or None when
/// the range is empty.
fn getrange_bounds(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    if start < 0 && end < 0 && start > end {
        return None;
    }
    let len_i = len as i64;
    let mut start = if start < 0 { start.wrapping_add(len_i) } else { start };
    let mut end = if end < 0 { end.wrapping_add(len_i) } else { end };
    start = start.max(0);
    end = end.max(0);
    if end as u64 >= len as u64 {
        end = len_i - 1;
    }
    if start > end || len == 0 {
        return None;
    }
    Some((start as usize, end as usize))
}

// GETRANGE key start end   (also SUBSTR key start end)
pub fn getrange(ctx: &mut Ctx) -> CmdResult {
    let key = ctx.arg(1);
    let start = ctx.arg_i64(2)?;
    let end = ctx.arg_i64(3)?;
    let mut ibuf = itoa::Buffer::new();
    match ctx.ks.get_string(key)? {
        None => ctx.reply.bulk(b""),
        Some(v) => {
            let s = v.as_bytes(&mut ibuf).unwrap_or(b"");
            match getrange_bounds(start, end, s.len()) {
                Some((a, b)) => ctx.reply.bulk(&s[a..=b]),
                None => ctx.reply.bulk(b""),
            }
        }
    }
    Ok(())
}

// SETRANGE key offset value
pub fn setrange(ctx: &mut Ctx) -> CmdResult {
    let (key, val) = (ctx.arg(1), ctx.arg(3));
    let offset = ctx.arg_i64(2)?;
    if offset < 0 {
        return Err(CmdError::msg("ERR offset is out of range"));
    }
    let max = max_bulk_len(ctx);
    let offset_u = offset as u64;
    let len = match ctx.ks.lookup_write(key) {
        None => {
            // Setting nothing on a missing key creates nothing.
            if val.is_empty() {
                ctx.reply.int(0);
                return Ok(());
            }
            check_string_length(max, offset_u, val.len() as u64)?;
            let mut v = vec![0u8; offset as usize + val.len()];
            v[offset as usize..].copy_from_slice(val);
            let len = v.len();
            ctx.ks.set(key, Value::Raw(v), false);
            len
        }
        Some(o) if !o.is_string() => return Err(CmdError::WrongType),
        Some(mut o) => {
            let cur = o.str_len().unwrap_or(0);
            if val.is_empty() {
                ctx.reply.int(cur as i64);
                return Ok(());
            }
            check_string_length(max, offset_u, val.len() as u64)?;
            let v = o.val_mut().make_raw().expect("string value");
            let end = offset as usize + val.len();
            if end > v.len() {
                reserve_sds(v, end - v.len());
                v.resize(end, 0);
            }
            v[offset as usize..end].copy_from_slice(val);
            let len = v.len();
            ctx.ks.modified(key);
            len
        }
    };
    ctx.ks.note(notify::STRING, "setrange", key);
    ctx.reply.int(len as i64);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// LCS
// ---------------------------------------------------------------------------------------------

/// The LCS table could not be allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LcsAllocError;

/// One matching range of LCS IDX: positions in the first and second string, and its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LcsMatch {
    pub a: (u32, u32),
    pub b: (u32, u32),
    pub len: u32,
}

/// What LCS computed: the length, and (when asked) the subsequence and its matching ranges.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct LcsResult {
    pub len: u32,
    pub string: Vec<u8>,
    pub matches: Vec<LcsMatch>,
}

/// Longest common subsequence by the classic dynamic-programming table, walked back from
/// the end exactly as Redis does, so the subsequence chosen among equal-length candidates
/// and the order of the ranges (last match first) are Redis's. Ranges shorter than
/// `min_match_len` are left out. `walk` false computes only the length (LCS ... LEN), in
/// O(len(b)) memory. Err when the table cannot be allocated.
pub fn lcs_compute(a: &[u8], b: &[u8], walk: bool, min_match_len: i64) -> Result<LcsResult, LcsAllocError> {
    let (alen, blen) = (a.len(), b.len());
    let w = blen + 1;
    if !walk {
        // Only the length: two rows of the table suffice.
        let mut prev = vec![0u32; w];
        let mut cur = vec![0u32; w];
        for i in 1..=alen {
            for j in 1..=blen {
                cur[j] = if a[i - 1] == b[j - 1] { prev[j - 1] + 1 } else { prev[j].max(cur[j - 1]) };
            }
            std::mem::swap(&mut prev, &mut cur);
        }
        return Ok(LcsResult { len: prev[blen], ..Default::default() });
    }
    // The full table, allocated fallibly: its size is the product of two client-controlled
    // lengths, and Redis answers an error rather than dying when it does not fit.
    let cells = (alen + 1).checked_mul(w).ok_or(LcsAllocError)?;
    let mut dp: Vec<u32> = Vec::new();
    dp.try_reserve_exact(cells).map_err(|_| LcsAllocError)?;
    dp.resize(cells, 0);
    for i in 1..=alen {
        for j in 1..=blen {
            dp[i * w + j] = if a[i - 1] == b[j - 1] {
                dp[(i - 1) * w + j - 1] + 1
            } else {
                dp[(i - 1) * w + j].max(dp[i * w + j - 1])
            };
        }
    }
    let total = dp[alen * w + blen];
    let mut out = LcsResult { len: total, string: vec![0; total as usize], matches: Vec::new() };
    // Walk back from (alen, blen), growing the current range backwards while matches are
    // contiguous and emitting it when contiguity breaks or a string's start is reached.
    let unset = alen as u32;
    let (mut ar_start, mut ar_end, mut br_start, mut br_end) = (unset, 0u32, 0u32, 0u32);
    let (mut i, mut j, mut idx) = (alen, blen, total as usize);
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            out.string[idx - 1] = a[i - 1];
            if ar_start == unset {
                ar_start = (i - 1) as u32;
                ar_end = ar_start;
                br_start = (j - 1) as u32;
                br_end = br_start;
            } else if ar_start == i as u32 && br_start == j as u32 {
                ar_start -= 1;
                br_start -= 1;
            } else {
                emit = true;
            }
            if ar_start == 0 || br_start == 0 {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if dp[(i - 1) * w + j] > dp[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            if ar_start != unset {
                emit = true;
            }
        }
        if emit {
            let match_len = ar_end.wrapping_sub(ar_start).wrapping_add(1);
            if min_match_len == 0 || match_len as i64 >= min_match_len {
                out.matches.push(LcsMatch { a: (ar_start, ar_end), b: (br_start, br_end), len: match_len });
            }
            ar_start = unset;
        }
    }
    Ok(out)
}

// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN min-match-len] [WITHMATCHLEN]
pub fn lcs(ctx: &mut Ctx) -> CmdResult {
    let wrong = || CmdError::msg("ERR The specified keys must contain string values");
    // Both keys are looked up (and type-checked) before the options are parsed, as in Redis.
    let mut fetch = |key: &[u8]| -> Result<Vec<u8>, CmdError> {
        match ctx.ks.lookup_read(key) {
            None => Ok(Vec::new()),
            Some(o) => o.to_vec().ok_or_else(wrong),
        }
    };
    let a = fetch(ctx.args[1]);
    let b = fetch(ctx.args[2]);
    let (a, b) = (a?, b?);
    let (mut getlen, mut getidx, mut withmatchlen, mut minmatchlen) = (false, false, false, 0i64);
    let mut j = 3;
    while j < ctx.args.len() {
        let opt = ctx.args[j];
        let more = ctx.args.len() - 1 - j;
        if eq_ic(opt, "IDX") {
            getidx = true;
        } else if eq_ic(opt, "LEN") {
            getlen = true;
        } else if eq_ic(opt, "WITHMATCHLEN") {
            withmatchlen = true;
        } else if eq_ic(opt, "MINMATCHLEN") && more > 0 {
            minmatchlen = ctx.arg_i64(j + 1)?.max(0);
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    if getidx && getlen {
        return Err(CmdError::msg("ERR If you want both the length and indexes, please just use IDX."));
    }
    if a.len() >= u32::MAX as usize - 1 || b.len() >= u32::MAX as usize - 1 {
        return Err(CmdError::msg("ERR String too long for LCS"));
    }
    // Redis sizes its table before computing and refuses one past `proto-max-bulk-len`
    // (whichever reply is asked for): the table is (len(a)+1)·(len(b)+1) u32 cells, and the
    // time grows with it.
    let cells = (a.len() as u128 + 1) * (b.len() as u128 + 1);
    let max_bulk = ctx.srv.config.text(crate::config::p::PROTO_MAX_BULK_LEN).parse::<u128>().unwrap_or(512 << 20);
    if cells * 4 > max_bulk {
        return Err(CmdError::msg("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len"));
    }
    let res = lcs_compute(&a, &b, getidx || !getlen, minmatchlen)
        .map_err(|_| CmdError::msg("ERR Insufficient memory, failed allocating transient memory for LCS"))?;
    let r = &mut *ctx.reply;
    if getidx {
        r.map(2);
        r.bulk(b"matches");
        r.array(res.matches.len());
        for m in &res.matches {
            r.array(2 + withmatchlen as usize);
            r.array(2);
            r.int(m.a.0 as i64);
            r.int(m.a.1 as i64);
            r.array(2);
            r.int(m.b.0 as i64);
            r.int(m.b.1 as i64);
            if withmatchlen {
                r.int(m.len as i64);
            }
        }
        r.bulk(b"len");
        r.int(res.len as i64);
    } else if getlen {
        r.int(res.len as i64);
    } else {
        r.bulk(&res.string);
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::exec::testing::TestClient;
    use crate::exec::Server;
    use parking_lot::Mutex;
    use std::sync::Arc;

    /// An in-process server with an effect sink, to check what writes count and propagate.
    type EffectLog = Arc<Mutex<Vec<Vec<Vec<u8>>>>>;

    pub(crate) struct Harness {
        pub srv: Server,
        client: TestClient,
        pub effects: EffectLog,
    }

    impl Harness {
        pub fn new() -> Harness {
            let srv = Server::new(crate::config::Config::defaults(), crate::commands::table::build(), 1, 0);
            let effects: EffectLog = Default::default();
            let sink = effects.clone();
            srv.set_effect_sink(Some(Box::new(move |e, _| sink.lock().extend(e.iter().map(|e| e.argv.clone())))));
            let client = TestClient::new(&srv);
            Harness { srv, client, effects }
        }

        /// Runs one inline command; returns its raw reply.
        pub fn run(&mut self, cmd: &str) -> String {
            self.client.run(&self.srv, cmd)
        }

        /// Effects published since the last call, as space-separated text.
        pub fn take_effects(&self) -> Vec<String> {
            let e = std::mem::take(&mut *self.effects.lock());
            e.iter().map(|argv| argv.iter().map(|a| String::from_utf8_lossy(a)).collect::<Vec<_>>().join(" ")).collect()
        }

        pub fn dirty(&self) -> u64 {
            self.srv.stats.sum(|c| &c.dirty)
        }
    }

    /// Parses the absolute time at the end of an effect such as `SET k v PXAT <ms>`.
    fn last_num(effect: &str) -> i64 {
        effect.rsplit(' ').next().unwrap().parse().unwrap()
    }

    #[test]
    fn string_effects_are_rewritten_deterministically() {
        let mut h = Harness::new();
        let before = crate::exec::unix_ms();
        assert_eq!(h.run("SET k v EX 100"), "+OK\r\n");
        let e = h.take_effects();
        assert!(e[0].starts_with("SET k v PXAT "), "{e:?}");
        let at = last_num(&e[0]);
        assert!(at >= before + 100_000 && at <= crate::exec::unix_ms() + 100_000);
        // A refused SET NX changes nothing: no effect, no dirty.
        let d = h.dirty();
        assert_eq!(h.run("SET k w NX"), "$-1\r\n");
        assert_eq!(h.run("SET missing w XX GET"), "$-1\r\n");
        assert!(h.take_effects().is_empty());
        assert_eq!(h.dirty(), d);
        assert_eq!(h.run("SET k w GET get"), "$1\r\nv\r\n");
        assert_eq!(h.take_effects(), vec!["SET k w"]);
        assert_eq!(h.run("SET k w PXAT 4102444800000 GET"), "$1\r\nw\r\n");
        // Given PXAT, the command goes as sent, GET included (as Redis 7.2 propagates it).
        assert_eq!(h.take_effects(), vec!["SET k w PXAT 4102444800000 GET"]);
        h.run("SETEX s 10 v");
        assert!(h.take_effects()[0].starts_with("SET s v PXAT "));
        h.run("PSETEX s 10000 v");
        assert!(h.take_effects()[0].starts_with("SET s v PXAT "));
        h.run("SETNX s x");
        assert!(h.take_effects().is_empty());
        h.run("GETSET s x");
        assert_eq!(h.take_effects(), vec!["SET s x"]);
        // GETEX: relative and absolute times become PEXPIREAT, PERSIST only when a TTL existed.
        h.run("GETEX s EX 50");
        let e = h.take_effects();
        assert!(e[0].starts_with("PEXPIREAT s "), "{e:?}");
        h.run("GETEX s PXAT 4102444800000");
        assert_eq!(h.take_effects(), vec!["PEXPIREAT s 4102444800000"]);
        h.run("GETEX s PERSIST");
        assert_eq!(h.take_effects(), vec!["PERSIST s"]);
        let d = h.dirty();
        h.run("GETEX s PERSIST");
        h.run("GETEX s");
        h.run("GETEX missing EX 10");
        assert!(h.take_effects().is_empty());
        assert_eq!(h.dirty(), d);
        assert_eq!(h.run("GETEX s EXAT 1"), "$1\r\nx\r\n");
        assert_eq!(h.take_effects(), vec!["DEL s"]);
        assert_eq!(h.run("EXISTS s"), ":0\r\n");
        h.run("SET g 1");
        h.take_effects();
        h.run("GETDEL g");
        h.run("GETDEL g");
        assert_eq!(h.take_effects(), vec!["DEL g"]);
        // INCRBYFLOAT propagates its result, keeping the TTL.
        h.run("SET f 0.1");
        assert_eq!(h.run("INCRBYFLOAT f 0.2"), "$3\r\n0.3\r\n");
        assert_eq!(h.take_effects(), vec!["SET f 0.1", "SET f 0.3 KEEPTTL"]);
        // Plain writes propagate as sent; MSETNX refused propagates nothing.
        h.run("INCR n");
        h.run("MSETNX n 1 m 2");
        h.run("APPEND n 5");
        h.run("SETRANGE n 0 \"\"");
        assert_eq!(h.take_effects(), vec!["INCR n", "APPEND n 5"]);
    }

    #[test]
    fn dirty_counts_one_per_key_written() {
        let mut h = Harness::new();
        let d = h.dirty();
        h.run("MSET a 1 b 2 c 3");
        assert_eq!(h.dirty(), d + 3);
        h.run("MSETNX a 1 z 2");
        assert_eq!(h.dirty(), d + 3);
        h.run("INCRBY a abc");
        h.run("APPEND a \"\"");
        assert_eq!(h.dirty(), d + 4);
    }

    #[test]
    fn lcs_matches_redis_examples() {
        // From the Redis documentation of LCS.
        let r = lcs_compute(b"ohmytext", b"mynewtext", true, 0).unwrap();
        assert_eq!(r.string, b"mytext");
        assert_eq!(r.len, 6);
        assert_eq!(
            r.matches,
            vec![LcsMatch { a: (4, 7), b: (5, 8), len: 4 }, LcsMatch { a: (2, 3), b: (0, 1), len: 2 },]
        );
        let r = lcs_compute(b"ohmytext", b"mynewtext", true, 4).unwrap();
        assert_eq!(r.matches, vec![LcsMatch { a: (4, 7), b: (5, 8), len: 4 }]);
        assert_eq!(lcs_compute(b"ohmytext", b"mynewtext", false, 0).unwrap().len, 6);
    }

    #[test]
    fn lcs_edge_cases() {
        assert_eq!(lcs_compute(b"", b"abc", true, 0).unwrap(), LcsResult::default());
        assert_eq!(lcs_compute(b"abc", b"", false, 0).unwrap().len, 0);
        let r = lcs_compute(b"abc", b"abc", true, 0).unwrap();
        assert_eq!(r.matches, vec![LcsMatch { a: (0, 2), b: (0, 2), len: 3 }]);
        let r = lcs_compute(b"abc", b"xyz", true, 0).unwrap();
        assert_eq!((r.len, r.matches.len()), (0, 0));
        // Ties go the way Redis's walk goes (on equal lengths it steps back in the second
        // string), so "ab" / "ba" gives "b" as Redis does.
        let r = lcs_compute(b"ab", b"ba", true, 0).unwrap();
        assert_eq!(r.string, b"b");
        for (x, y) in [(&b"AGGTAB"[..], &b"GXTXAYB"[..]), (b"aaaa", b"aa"), (b"abcbdab", b"bdcaba")] {
            let full = lcs_compute(x, y, true, 0).unwrap();
            assert_eq!(full.len, lcs_compute(x, y, false, 0).unwrap().len);
            assert_eq!(full.string.len(), full.len as usize);
        }
    }

    #[test]
    fn getrange_index_rules() {
        assert_eq!(getrange_bounds(0, -1, 5), Some((0, 4)));
        assert_eq!(getrange_bounds(-3, -1, 5), Some((2, 4)));
        assert_eq!(getrange_bounds(-1, -3, 5), None);
        assert_eq!(getrange_bounds(2, 100, 5), Some((2, 4)));
        assert_eq!(getrange_bounds(5, 10, 5), None);
        assert_eq!(getrange_bounds(-100, 0, 5), Some((0, 0)));
        assert_eq!(getrange_bounds(0, -100, 5), Some((0, 0)));
        assert_eq!(getrange_bounds(0, 0, 0), None);
        assert_eq!(getrange_bounds(i64::MIN, i64::MAX, 5), Some((0, 4)));
    }

    #[test]
    fn set_option_conflicts() {
        let parse = |s: &str| {
            let args: Vec<&[u8]> = s.split(' ').map(|a| a.as_bytes()).collect();
            parse_ext_args(&args, ExtCommand::Set).map(|(f, e, _, _)| (f.nx, f.xx, f.get, e.map(|e| e.to_vec())))
        };
        assert!(parse("SET k v NX XX").is_err());
        assert!(parse("SET k v EX 1 PX 2").is_err());
        assert!(parse("SET k v KEEPTTL EX 1").is_err());
        assert!(parse("SET k v EX").is_err());
        assert!(parse("SET k v PERSIST").is_err());
        assert_eq!(parse("SET k v EX 1 EX 2").unwrap().3, Some(b"2".to_vec()));
        assert_eq!(parse("SET k v nx get nx").unwrap(), (true, false, true, None));
    }

    #[test]
    fn expire_validation() {
        let f = SetFlags { ex: true, ..Default::default() };
        assert_eq!(expire_at_ms(1000, "set", b"10", f, Unit::Seconds), Ok(11000));
        assert!(expire_at_ms(1000, "set", b"0", f, Unit::Seconds).is_err());
        assert!(expire_at_ms(1000, "set", b"-1", f, Unit::Seconds).is_err());
        assert!(expire_at_ms(1000, "set", b"9223372036854775", f, Unit::Seconds).is_err());
        let px = SetFlags { px: true, ..Default::default() };
        assert!(expire_at_ms(1000, "set", b"9223372036854775807", px, Unit::Millis).is_err());
        assert_eq!(expire_at_ms(1000, "setex", b"x", f, Unit::Seconds), Err(CmdError::NotInteger));
        assert_eq!(
            expire_at_ms(1000, "setex", b"0", f, Unit::Seconds).unwrap_err().text(),
            "ERR invalid expire time in 'setex' command"
        );
    }
}
