//! Hash-field expiry (Valkey 9.0, Redis 7.4): HEXPIRE, HPEXPIRE, HEXPIREAT, HPEXPIREAT, HTTL,
//! HPTTL, HEXPIRETIME, HPEXPIRETIME, HPERSIST, HGETEX and HSETEX. Replies and errors follow
//! Valkey 9.1.2 (`tests/cases/valkey/hash_expiry.txt` compares them).
//!
//! The deadlines themselves live in the hash (`engine::hash`); a field past its deadline is
//! removed by the lookup of any command that touches its key on a primary, or by the active
//! expiry cycle (`server::expire`), both propagating HDEL. What these commands propagate is
//! always absolute: a relative time becomes HPEXPIREAT (or HSETEX … PXAT), a time already past
//! becomes the HDEL of what it removed, so a replica or an AOF replay reaches the same state
//! whatever its own clock says.

use crate::engine::hash::{Hash, Limits};
use crate::engine::Value;
use crate::exec::*;
use crate::services::notify;

fn numfields_error() -> CmdError {
    CmdError::msg("ERR numfields should be greater than 0 and match the provided number of fields")
}

fn invalid_time(ctx: &Ctx) -> CmdError {
    CmdError::msg(format!("ERR invalid expire time in '{}' command", ctx.cmd.full_name()))
}

/// The first `FIELDS` keyword at or after `from` (the options are before it). Valkey looks for
/// it before reading anything else: without one, the field count is what is wrong.
fn fields_keyword(args: &[&[u8]], from: usize) -> Result<usize, CmdError> {
    (from..args.len()).find(|&i| eq_ic(args[i], "FIELDS")).ok_or_else(numfields_error)
}

/// The fields after `FIELDS numfields` at `at`, `per` arguments each (a field, or a field and
/// its value); their number must be `numfields`.
fn fields_after<'a>(args: &'a [&'a [u8]], at: usize, per: usize) -> Result<&'a [&'a [u8]], CmdError> {
    let n = parse_int(args.get(at + 1).ok_or_else(numfields_error)?)?;
    let rest: &'a [&'a [u8]] = if at + 2 <= args.len() { &args[at + 2..] } else { &[] };
    if n < 1 || !rest.len().is_multiple_of(per) || n as usize != rest.len() / per {
        return Err(numfields_error());
    }
    Ok(rest)
}

/// A time argument as absolute Unix milliseconds: negative is refused, `base` is now for the
/// relative forms and 0 for the absolute ones, overflow is refused naming the command.
fn deadline(ctx: &Ctx, raw: i64, base: i64, seconds: bool) -> Result<i64, CmdError> {
    if raw < 0 {
        return Err(invalid_time(ctx));
    }
    let ms = if seconds { raw.checked_mul(1000).ok_or_else(|| invalid_time(ctx))? } else { raw };
    ms.checked_add(base).ok_or_else(|| invalid_time(ctx))
}

/// True if a deadline at `when` removes fields now rather than being stored: on a primary a
/// time already past deletes, while a replica (or a log replay) stores what its source sent
/// and waits for the source's HDEL.
fn past(ks: &KsView, when: i64) -> bool {
    when <= ks.now && !ks.loading && !ks.hold_expired
}

/// After fields were removed at their deadline by a command: `hexpired`, the HDEL effect, and
/// the key's deletion (`del`) if that was its last field.
fn fields_expired(ctx: &mut Ctx, key: &[u8], gone: &[&[u8]]) {
    ctx.ks.stats.expired_fields.fetch_add(gone.len() as u64, std::sync::atomic::Ordering::Relaxed);
    ctx.ks.note(notify::HASH, "hexpired", key);
    let mut argv = vec![b"HDEL".to_vec(), key.to_vec()];
    argv.extend(gone.iter().map(|f| f.to_vec()));
    ctx.ks.effect(argv);
    let empty = matches!(ctx.ks.peek(key).and_then(|o| o.into_obj()), Some(Value::Hash(h)) if h.is_empty());
    if empty {
        ctx.ks.delete(key);
        ctx.ks.note(notify::GENERIC, "del", key);
    }
}

// ---------------------------------------------------------------------------------------------
// HEXPIRE, HPEXPIRE, HEXPIREAT, HPEXPIREAT
// ---------------------------------------------------------------------------------------------

/// For each field: -2 missing, 0 a condition (NX/XX/GT/LT, as EXPIRE's) refused, 1 deadline
/// set, 2 removed (a time already past).
fn hexpire_generic(ctx: &mut Ctx, relative: bool, seconds: bool) -> CmdResult {
    let args = ctx.args;
    let at = fields_keyword(args, 3)?;
    let flags = crate::commands::keys::parse_expire_flags(&args[3..at])?;
    let raw = parse_int(args[2])?;
    let fields = fields_after(args, at, 1)?;
    let base = if relative { ctx.ks.now } else { 0 };
    let when = deadline(ctx, raw, base, seconds)?;
    let key = args[1];
    let past = past(&ctx.ks, when);
    let Some(h) = ctx.ks.write::<Hash>(key)? else {
        ctx.reply.array(fields.len());
        for _ in fields {
            ctx.reply.int(-2);
        }
        ctx.no_effect();
        return Ok(());
    };
    let mut codes = Vec::with_capacity(fields.len());
    let mut removed: Vec<&[u8]> = Vec::new();
    let mut set = false;
    for &f in fields {
        let code = if !h.contains(f) {
            -2
        } else if !crate::commands::keys::expire_allowed(flags, h.ttl_of(f), when) {
            0
        } else if past {
            h.remove(f);
            removed.push(f);
            2
        } else {
            h.set_ttl(f, when);
            set = true;
            1
        };
        codes.push(code);
    }
    ctx.reply.array(codes.len());
    for c in codes {
        ctx.reply.int(c);
    }
    ctx.no_effect();
    if set {
        ctx.ks.note_field_ttls(key);
        ctx.ks.modified(key);
        ctx.ks.note(notify::HASH, "hexpire", key);
        let mut argv = vec![b"HPEXPIREAT".to_vec(), key.to_vec(), itoa::Buffer::new().format(when).as_bytes().to_vec()];
        argv.extend(args[3..].iter().map(|a| a.to_vec()));
        ctx.ks.effect(argv);
    }
    if !removed.is_empty() {
        ctx.ks.modified(key);
        fields_expired(ctx, key, &removed);
    }
    Ok(())
}

// HEXPIRE key seconds [NX | XX | GT | LT] FIELDS numfields field [field ...]
pub fn hexpire(ctx: &mut Ctx) -> CmdResult {
    hexpire_generic(ctx, true, true)
}

// HPEXPIRE key milliseconds [NX | XX | GT | LT] FIELDS numfields field [field ...]
pub fn hpexpire(ctx: &mut Ctx) -> CmdResult {
    hexpire_generic(ctx, true, false)
}

// HEXPIREAT key unix-time-seconds [NX | XX | GT | LT] FIELDS numfields field [field ...]
pub fn hexpireat(ctx: &mut Ctx) -> CmdResult {
    hexpire_generic(ctx, false, true)
}

// HPEXPIREAT key unix-time-milliseconds [NX | XX | GT | LT] FIELDS numfields field [field ...]
pub fn hpexpireat(ctx: &mut Ctx) -> CmdResult {
    hexpire_generic(ctx, false, false)
}

// ---------------------------------------------------------------------------------------------
// HTTL, HPTTL, HEXPIRETIME, HPEXPIRETIME, HPERSIST
// ---------------------------------------------------------------------------------------------

/// `key FIELDS numfields field …` of the read-only forms: a wrong keyword or count is a syntax
/// error there (Valkey's own wording).
fn plain_fields<'a>(args: &'a [&'a [u8]]) -> Result<&'a [&'a [u8]], CmdError> {
    if !eq_ic(args[2], "FIELDS") {
        return Err(CmdError::Syntax);
    }
    let n = parse_int(args[3])?;
    let rest = &args[4..];
    if n < 1 || n as usize != rest.len() {
        return Err(CmdError::Syntax);
    }
    Ok(rest)
}

/// For each field: -2 missing, -1 no deadline, else the time left (or the deadline itself),
/// in milliseconds or rounded to the nearest second as TTL does.
fn httl_generic(ctx: &mut Ctx, ms: bool, absolute: bool) -> CmdResult {
    let fields = plain_fields(ctx.args)?;
    let now = ctx.ks.now;
    let h = ctx.ks.read::<Hash>(ctx.args[1])?.map(|h| &*h);
    ctx.reply.array(fields.len());
    for f in fields {
        let code = match h {
            Some(h) if h.get_live(f, now).is_some() => match h.ttl_of(f) {
                None => -1,
                Some(t) => {
                    let v = if absolute { t } else { t.saturating_sub(now) }.max(0);
                    if ms {
                        v
                    } else {
                        crate::commands::keys::rounded_seconds(v)
                    }
                }
            },
            _ => -2,
        };
        ctx.reply.int(code);
    }
    Ok(())
}

// HTTL key FIELDS numfields field [field ...]
pub fn httl(ctx: &mut Ctx) -> CmdResult {
    httl_generic(ctx, false, false)
}

// HPTTL key FIELDS numfields field [field ...]
pub fn hpttl(ctx: &mut Ctx) -> CmdResult {
    httl_generic(ctx, true, false)
}

// HEXPIRETIME key FIELDS numfields field [field ...]
pub fn hexpiretime(ctx: &mut Ctx) -> CmdResult {
    httl_generic(ctx, false, true)
}

// HPEXPIRETIME key FIELDS numfields field [field ...]
pub fn hpexpiretime(ctx: &mut Ctx) -> CmdResult {
    httl_generic(ctx, true, true)
}

// HPERSIST key FIELDS numfields field [field ...]
//
// For each field: -2 missing, -1 no deadline, 1 deadline removed.
pub fn hpersist(ctx: &mut Ctx) -> CmdResult {
    let args = ctx.args;
    if !eq_ic(args[2], "FIELDS") {
        return Err(CmdError::Syntax);
    }
    let fields = fields_after(args, 2, 1)?;
    let key = args[1];
    let now = ctx.ks.now;
    let mut codes = Vec::with_capacity(fields.len());
    let mut any = false;
    match ctx.ks.write::<Hash>(key)? {
        None => codes.resize(fields.len(), -2),
        Some(h) => {
            for f in fields {
                codes.push(if h.get_live(f, now).is_none() {
                    -2
                } else if h.persist(f) {
                    any = true;
                    1
                } else {
                    -1
                });
            }
        }
    }
    ctx.reply.array(codes.len());
    for c in codes {
        ctx.reply.int(c);
    }
    if any {
        ctx.ks.modified(key);
        ctx.ks.note(notify::HASH, "hpersist", key);
    } else {
        ctx.no_effect();
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// HGETEX, HSETEX
// ---------------------------------------------------------------------------------------------

/// The expiry option of HGETEX and HSETEX.
#[derive(Clone, Copy, PartialEq)]
enum Expiry {
    None,
    /// EX, PX, EXAT, PXAT: the absolute deadline.
    At(i64),
    /// HGETEX's PERSIST.
    Persist,
    /// HSETEX's KEEPTTL.
    KeepTtl,
}

/// Parses one of EX/PX/EXAT/PXAT at `args[i]` (its value at `i + 1`): the (seconds, relative)
/// form, or None if `args[i]` is none of them.
fn time_unit(arg: &[u8]) -> Option<(bool, bool)> {
    [("EX", (true, true)), ("PX", (false, true)), ("EXAT", (true, false)), ("PXAT", (false, false))]
        .into_iter()
        .find(|(n, _)| eq_ic(arg, n))
        .map(|(_, u)| u)
}

/// The same time option given twice is accepted (the last wins), two different ones are a
/// syntax error, as in Valkey.
fn parse_time(
    ctx: &Ctx,
    args: &[&[u8]],
    i: usize,
    unit: (bool, bool),
    prev: &mut Option<(&'static str, i64)>,
    name: &'static str,
) -> Result<(), CmdError> {
    if prev.is_some_and(|(p, _)| p != name) {
        return Err(CmdError::Syntax);
    }
    let raw = parse_int(args.get(i + 1).ok_or(CmdError::Syntax)?)?;
    let (seconds, relative) = unit;
    let when = deadline(ctx, raw, if relative { ctx.ks.now } else { 0 }, seconds)?;
    *prev = Some((name, when));
    Ok(())
}

fn unit_name(arg: &[u8]) -> &'static str {
    ["EX", "PX", "EXAT", "PXAT"].into_iter().find(|n| eq_ic(arg, n)).unwrap_or("")
}

// HGETEX key [EX seconds | PX milliseconds | EXAT unix-time-seconds | PXAT unix-time-milliseconds
//   | PERSIST] FIELDS numfields field [field ...]
//
// The values (null for a missing field); then the existing fields get the deadline, lose it
// (PERSIST) or, for a time already past, are removed.
pub fn hgetex(ctx: &mut Ctx) -> CmdResult {
    let args = ctx.args;
    let at = fields_keyword(args, 2)?;
    let mut time: Option<(&'static str, i64)> = None;
    let mut persist = false;
    let mut i = 2;
    while i < at {
        if eq_ic(args[i], "PERSIST") {
            if time.is_some() {
                return Err(CmdError::Syntax);
            }
            persist = true;
            i += 1;
        } else if let Some(unit) = time_unit(args[i]) {
            if persist || i + 1 >= at {
                return Err(CmdError::Syntax);
            }
            parse_time(ctx, args, i, unit, &mut time, unit_name(args[i]))?;
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let fields = fields_after(args, at, 1)?;
    let expiry = match (time, persist) {
        (Some((_, t)), _) => Expiry::At(t),
        (None, true) => Expiry::Persist,
        _ => Expiry::None,
    };
    let key = args[1];
    let now = ctx.ks.now;
    let is_past = matches!(expiry, Expiry::At(w) if past(&ctx.ks, w));
    ctx.no_effect();
    let Some(h) = ctx.ks.write::<Hash>(key)? else {
        ctx.reply.array(fields.len());
        for _ in fields {
            ctx.reply.null();
        }
        return Ok(());
    };
    ctx.reply.array(fields.len());
    let mut present: Vec<&[u8]> = Vec::new();
    for &f in fields {
        match h.get_live(f, now) {
            Some(v) => {
                ctx.reply.bulk(v);
                if !present.contains(&f) {
                    present.push(f);
                }
                // A time already past removes each field as it is read: named again, it is
                // missing (Valkey's order).
                if is_past {
                    h.remove(f);
                }
            }
            None => ctx.reply.null(),
        }
    }
    if present.is_empty() {
        return Ok(());
    }
    match expiry {
        Expiry::None | Expiry::KeepTtl => {}
        Expiry::Persist => {
            let persisted: Vec<&[u8]> = present.iter().copied().filter(|f| h.persist(f)).collect();
            if !persisted.is_empty() {
                ctx.ks.modified(key);
                ctx.ks.note(notify::HASH, "hpersist", key);
                let mut argv = vec![b"HPERSIST".to_vec(), key.to_vec(), b"FIELDS".to_vec()];
                argv.push(itoa::Buffer::new().format(persisted.len()).as_bytes().to_vec());
                argv.extend(persisted.iter().map(|f| f.to_vec()));
                ctx.ks.effect(argv);
            }
        }
        Expiry::At(_) if is_past => {
            ctx.ks.modified(key);
            fields_expired(ctx, key, &present);
        }
        Expiry::At(when) => {
            for f in &present {
                h.set_ttl(f, when);
            }
            ctx.ks.note_field_ttls(key);
            ctx.ks.modified(key);
            ctx.ks.note(notify::HASH, "hexpire", key);
            let mut argv = vec![b"HPEXPIREAT".to_vec(), key.to_vec()];
            argv.push(itoa::Buffer::new().format(when).as_bytes().to_vec());
            argv.push(b"FIELDS".to_vec());
            argv.push(itoa::Buffer::new().format(present.len()).as_bytes().to_vec());
            argv.extend(present.iter().map(|f| f.to_vec()));
            ctx.ks.effect(argv);
        }
    }
    Ok(())
}

// HSETEX key [NX | XX] [FNX | FXX] [EX seconds | PX milliseconds | EXAT unix-time-seconds |
//   PXAT unix-time-milliseconds | KEEPTTL] FIELDS numfields field value [field value ...]
//
// 1 when the fields were set, 0 when a condition refused: NX/XX on the key's existence,
// FNX/FXX on every field's. Fields lose their deadline unless KEEPTTL; with a time they all get
// it, and a time already past removes them once set.
pub fn hsetex(ctx: &mut Ctx) -> CmdResult {
    let args = ctx.args;
    let at = fields_keyword(args, 2)?;
    let (mut key_cond, mut field_cond): (Option<bool>, Option<bool>) = (None, None);
    let mut time: Option<(&'static str, i64)> = None;
    let mut keepttl = false;
    let mut i = 2;
    while i < at {
        let a = args[i];
        let (kc, fc) = (eq_ic(a, "NX") || eq_ic(a, "XX"), eq_ic(a, "FNX") || eq_ic(a, "FXX"));
        if kc || fc {
            let want = eq_ic(a, "NX") || eq_ic(a, "FNX");
            let slot = if kc { &mut key_cond } else { &mut field_cond };
            if slot.is_some_and(|w| w != want) {
                return Err(CmdError::Syntax);
            }
            *slot = Some(want);
            i += 1;
        } else if eq_ic(a, "KEEPTTL") {
            if time.is_some() {
                return Err(CmdError::Syntax);
            }
            keepttl = true;
            i += 1;
        } else if let Some(unit) = time_unit(a) {
            if keepttl || i + 1 >= at {
                return Err(CmdError::Syntax);
            }
            parse_time(ctx, args, i, unit, &mut time, unit_name(a))?;
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let pairs = fields_after(args, at, 2)?;
    let expiry = match (time, keepttl) {
        (Some((_, t)), _) => Expiry::At(t),
        (None, true) => Expiry::KeepTtl,
        _ => Expiry::None,
    };
    let key = args[1];
    let lim = Limits::from_ctx(ctx);
    let exists = ctx.ks.write::<Hash>(key)?.is_some();
    let key_ok = match key_cond {
        Some(true) => !exists,
        Some(false) => exists,
        None => true,
    };
    let fields_ok = key_ok
        && match field_cond {
            None => true,
            Some(want_absent) => {
                let h = ctx.ks.write::<Hash>(key)?;
                pairs.chunks(2).all(|p| h.as_ref().is_some_and(|h| h.contains(p[0])) != want_absent)
            }
        };
    if !fields_ok {
        ctx.reply.int(0);
        ctx.no_effect();
        return Ok(());
    }
    if !exists {
        ctx.ks.insert_new(key, Value::Hash(Hash::default()));
    }
    let h = ctx.ks.write::<Hash>(key)?.expect("just made");
    h.convert_for(pairs.iter().map(|a| a.len()), lim);
    for p in pairs.chunks(2) {
        if expiry == Expiry::KeepTtl {
            h.set_keeping_ttl(p[0], p[1], lim);
        } else {
            h.set(p[0], p[1], lim);
        }
    }
    ctx.ks.modified(key);
    ctx.ks.note(notify::HASH, "hset", key);
    ctx.reply.int(1);
    let Expiry::At(when) = expiry else {
        return Ok(());
    };
    let fields: Vec<&[u8]> = pairs.chunks(2).map(|p| p[0]).collect();
    ctx.ks.note(notify::HASH, "hexpire", key);
    if past(&ctx.ks, when) {
        // Set, then removed at once: replicas get the same two steps.
        let mut argv = vec![b"HSET".to_vec(), key.to_vec()];
        argv.extend(pairs.iter().map(|a| a.to_vec()));
        ctx.rewrite_effect(argv);
        let h = ctx.ks.write::<Hash>(key)?.expect("just set");
        let mut gone: Vec<&[u8]> = Vec::new();
        for f in fields {
            if h.remove(f) {
                gone.push(f);
            }
        }
        fields_expired(ctx, key, &gone);
        return Ok(());
    }
    let h = ctx.ks.write::<Hash>(key)?.expect("just set");
    for f in &fields {
        h.set_ttl(f, when);
    }
    ctx.ks.note_field_ttls(key);
    let mut argv = vec![b"HSETEX".to_vec(), key.to_vec(), b"PXAT".to_vec()];
    argv.push(itoa::Buffer::new().format(when).as_bytes().to_vec());
    argv.extend(args[at..].iter().map(|a| a.to_vec()));
    ctx.rewrite_effect(argv);
    Ok(())
}
