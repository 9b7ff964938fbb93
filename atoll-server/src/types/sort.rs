//! SORT and SORT_RO (Redis's `sort.c`): sorts a list, set or sorted set, optionally by the
//! values of other keys (`BY weight_*`, `BY obj_*->field`), fetching other keys for each
//! element (`GET`), and optionally storing the result as a list.
//!
//! BY and GET patterns reach arbitrary keys, so both commands lock the whole database
//! (`Scope::Db` in the command table).

use crate::engine::list::List;
use crate::engine::Value;
use crate::exec::*;
use crate::services::notify;
use std::cmp::Ordering;

/// Options of one SORT call.
struct SortOptions<'a> {
    desc: bool,
    alpha: bool,
    limit: Option<(i64, i64)>,
    by: Option<&'a [u8]>,
    /// BY a pattern without `*` (`BY nosort`): keep the container's own order.
    dont_sort: bool,
    gets: Vec<&'a [u8]>,
    store: Option<&'a [u8]>,
}

/// `full_keys`: the user may read every key (BY and GET name keys no key spec shows).
fn parse_options<'a>(args: &[&'a [u8]], readonly: bool, full_keys: bool) -> Result<SortOptions<'a>, CmdError> {
    let mut o = SortOptions {
        desc: false,
        alpha: false,
        limit: None,
        by: None,
        dont_sort: false,
        gets: Vec::new(),
        store: None,
    };
    let mut j = 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = args[j];
        if eq_ic(a, "ASC") {
            o.desc = false;
        } else if eq_ic(a, "DESC") {
            o.desc = true;
        } else if eq_ic(a, "ALPHA") {
            o.alpha = true;
        } else if eq_ic(a, "LIMIT") && left >= 2 {
            o.limit = Some((parse_int(args[j + 1])?, parse_int(args[j + 2])?));
            j += 2;
        } else if !readonly && eq_ic(a, "STORE") && left >= 1 {
            o.store = Some(args[j + 1]);
            j += 1;
        } else if eq_ic(a, "BY") && left >= 1 {
            o.by = Some(args[j + 1]);
            o.dont_sort = !args[j + 1].contains(&b'*');
            if !o.dont_sort && !full_keys {
                return Err(CmdError::msg("ERR BY option of SORT denied due to insufficient ACL permissions."));
            }
            j += 1;
        } else if eq_ic(a, "GET") && left >= 1 {
            if !full_keys {
                return Err(CmdError::msg("ERR GET option of SORT denied due to insufficient ACL permissions."));
            }
            o.gets.push(args[j + 1]);
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok(o)
}

/// Redis's `lookupKeyByPattern`: `#` is the element itself; otherwise the first `*` of the
/// pattern is replaced by the element and the key read — a string, or with `->field` a hash
/// field. None if the pattern has no `*` or the key or field is missing or of another type.
fn lookup_by_pattern(ks: &mut KsView, pattern: &[u8], subst: &[u8]) -> Option<Vec<u8>> {
    if pattern == b"#" {
        return Some(subst.to_vec());
    }
    let star = pattern.iter().position(|&c| c == b'*')?;
    // A `->` after the star with a field name after it dereferences a hash field.
    let arrow = pattern[star + 1..].windows(2).position(|w| w == b"->").map(|p| star + 1 + p);
    let (key_end, field) = match arrow {
        Some(a) if a + 2 < pattern.len() => (a, Some(&pattern[a + 2..])),
        _ => (pattern.len(), None),
    };
    let mut key = Vec::with_capacity(key_end + subst.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(subst);
    key.extend_from_slice(&pattern[star + 1..key_end]);
    let o = ks.lookup_read(&key)?;
    match field {
        Some(f) => match &*o {
            Value::Hash(h) => h.get(f).map(|v| v.to_vec()),
            _ => None,
        },
        None => o.to_vec(),
    }
}

/// The score of a sort key as Redis computes it with `strtod`: leading white space allowed,
/// nothing after the number, no NaN, no overflow or underflow. The empty string is 0.
fn strtod_score(b: &[u8]) -> Option<f64> {
    if b.is_empty() {
        return Some(0.0);
    }
    let s = std::str::from_utf8(b).ok()?;
    let t = s.trim_start_matches([' ', '\t', '\n', '\u{b}', '\u{c}', '\r']);
    let lower = t.to_ascii_lowercase();
    let body = lower.trim_start_matches(['+', '-']);
    // Rust's parser accepts words strtod does not ("infinit"); keep to strtod's own.
    if body.starts_with(|c: char| c.is_ascii_alphabetic()) && !matches!(body, "inf" | "infinity") {
        return None;
    }
    let v: f64 = t.parse().ok()?;
    if v.is_nan() {
        return None;
    }
    let is_inf_word = body.starts_with("inf");
    if v.is_infinite() && !is_inf_word {
        return None; // ERANGE: overflow
    }
    let mantissa_nonzero = body.split(['e']).next().is_some_and(|m| m.bytes().any(|c| (b'1'..=b'9').contains(&c)));
    if (v == 0.0 && mantissa_nonzero) || (v != 0.0 && v.abs() < f64::MIN_POSITIVE) {
        return None; // ERANGE: underflow
    }
    Some(v)
}

/// One element being sorted, with what it is compared by.
struct Item {
    obj: Vec<u8>,
    score: f64,
    cmp: Option<Vec<u8>>,
    /// What `strcoll` compares when the sort collates (`collate::sort_key`).
    key: Option<std::ffi::CString>,
}

/// The elements of the value to sort. Lists and sorted sets have an order of their own, kept
/// when nothing is sorted; `range` (already normalised) restricts to positions start..=end,
/// read from the tail when `desc`.
fn load_elements(val: Option<&Value>, range: Option<(usize, usize)>, desc: bool) -> Vec<Vec<u8>> {
    match val {
        None => Vec::new(),
        Some(Value::List(l)) => match range {
            Some((s, e)) if desc => {
                let n = l.len();
                l.range(n - 1 - e, n - 1 - s).rev().map(|v| v.to_vec()).collect()
            }
            Some((s, e)) => l.range(s, e).map(|v| v.to_vec()).collect(),
            None => l.iter().map(|v| v.to_vec()).collect(),
        },
        Some(Value::Set(s)) => s.members(),
        Some(Value::ZSet(z)) => {
            let mut out = Vec::new();
            let mut push = |m: &[u8], _score: f64| out.push(m.to_vec());
            match range {
                Some((s, e)) if desc => {
                    let n = z.len();
                    z.for_range(n - 1 - e, n - 1 - s, true, &mut push);
                }
                Some((s, e)) => z.for_range(s, e, false, &mut push),
                None => z.for_each(&mut push),
            }
            out
        }
        Some(_) => Vec::new(),
    }
}

fn sort_generic(ctx: &mut Ctx, readonly: bool) -> CmdResult {
    let full_keys =
        ctx.client.perms.as_ref().is_none_or(|p| p.unrestricted || p.check_with_all_keys_readable(ctx.cmd, ctx.args));
    let mut o = parse_options(ctx.args, readonly, full_keys)?;
    let key = ctx.arg(1);
    // A missing key sorts like an empty list.
    let kind = ctx.ks.lookup_read(key).map_or(Kind::List, |o| kind_of(&o));
    if kind == Kind::Other {
        return Err(CmdError::WrongType);
    }
    // A set has no order of its own: when it is stored (or replicated through a script) it
    // is sorted alphabetically, so the result is the same everywhere.
    if o.dont_sort && kind == Kind::Set && (o.store.is_some() || ctx.client.in_script) {
        o.dont_sort = false;
        o.alpha = true;
        o.by = None;
    }
    let len = match ctx.ks.peek(key).and_then(|o| o.into_obj()) {
        Some(Value::List(l)) => l.len(),
        Some(Value::Set(s)) => s.len(),
        Some(Value::ZSet(z)) => z.len(),
        _ => 0,
    } as i64;
    // LIMIT sanity checks, exactly Redis's.
    let (limit_start, limit_count) = o.limit.unwrap_or((0, -1));
    let mut start = limit_start.max(0);
    let mut end = if limit_count < 0 { len - 1 } else { start.saturating_add(limit_count) - 1 };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    if end >= len {
        end = len - 1;
    }
    // Ordered containers with nothing to sort load just the requested range.
    let direct = o.dont_sort && matches!(kind, Kind::List | Kind::ZSet);
    let elements = {
        let v = ctx.ks.peek(key).and_then(|o| o.into_obj());
        if direct {
            let r = (end >= start).then_some((start as usize, end as usize));
            if r.is_some() {
                let e = load_elements(v.map(|v| &*v), r, o.desc);
                end -= start;
                start = 0;
                e
            } else {
                Vec::new()
            }
        } else {
            load_elements(v.map(|v| &*v), None, false)
        }
    };
    let mut items: Vec<Item> = elements.into_iter().map(|obj| Item { obj, score: 0.0, cmp: None, key: None }).collect();
    let mut conversion_error = false;
    if !o.dont_sort {
        for it in items.iter_mut() {
            let by = match o.by {
                Some(p) => match lookup_by_pattern(&mut ctx.ks, p, &it.obj) {
                    Some(v) => v,
                    None => continue,
                },
                None => it.obj.clone(),
            };
            if o.alpha {
                if o.by.is_some() {
                    it.cmp = Some(by);
                }
            } else {
                match strtod_score(&by) {
                    Some(s) => it.score = s,
                    None => conversion_error = true,
                }
            }
        }
        let (alpha, by, desc) = (o.alpha, o.by.is_some(), o.desc);
        // Redis collates (strcoll under `locale-collate`) when the result is only returned;
        // a stored result is ordered by bytes, so it is the same on every replica whatever
        // their locales.
        let collator = (alpha && o.store.is_none()).then(crate::collate::enter);
        if collator.is_some() {
            for it in items.iter_mut() {
                it.key = if by {
                    it.cmp.as_deref().map(crate::collate::sort_key)
                } else {
                    Some(crate::collate::sort_key(&it.obj))
                };
            }
        }
        items.sort_by(|a, b| {
            let c = if !alpha {
                a.score.partial_cmp(&b.score).unwrap_or(Ordering::Equal).then_with(|| a.obj.cmp(&b.obj))
            } else if by {
                // Elements whose BY key is missing sort first.
                match (&a.cmp, &b.cmp) {
                    (None, None) => Ordering::Equal,
                    (None, Some(_)) => Ordering::Less,
                    (Some(_), None) => Ordering::Greater,
                    (Some(x), Some(y)) => match (collator, &a.key, &b.key) {
                        (Some(c), Some(kx), Some(ky)) => c.compare_keys(kx, ky),
                        _ => x.cmp(y),
                    },
                }
            } else {
                match (collator, &a.key, &b.key) {
                    (Some(c), Some(kx), Some(ky)) => c.compare_keys(kx, ky),
                    _ => a.obj.cmp(&b.obj),
                }
            };
            if desc {
                c.reverse()
            } else {
                c
            }
        });
    }
    if conversion_error {
        return Err(CmdError::msg("ERR One or more scores can't be converted into double"));
    }
    let selected: &[Item] = if end >= start && start >= 0 { &items[start as usize..=end as usize] } else { &[] };
    let out_len = if o.gets.is_empty() { selected.len() } else { selected.len() * o.gets.len() };
    match o.store {
        None => {
            ctx.reply.array(out_len);
            for it in selected {
                if o.gets.is_empty() {
                    ctx.reply.bulk(&it.obj);
                }
                for g in &o.gets {
                    match lookup_by_pattern(&mut ctx.ks, g, &it.obj) {
                        Some(v) => ctx.reply.bulk(&v),
                        None => ctx.reply.null(),
                    }
                }
            }
        }
        Some(dst) => {
            let mut out: Vec<Box<[u8]>> = Vec::with_capacity(out_len);
            for it in selected {
                if o.gets.is_empty() {
                    out.push(it.obj.as_slice().into());
                }
                for g in &o.gets {
                    // A missing GET key stores an empty string.
                    out.push(lookup_by_pattern(&mut ctx.ks, g, &it.obj).unwrap_or_default().into());
                }
            }
            if out.is_empty() {
                // Deleted with no lookup first (Redis's dbDelete): `del` even for a key past
                // its time that nothing has expired yet.
                if ctx.ks.delete_unlooked(dst).is_some() {
                    ctx.ks.note(notify::GENERIC, "del", dst);
                }
            } else {
                let fill = ctx.srv.config.hot.list_max_listpack_size.load(std::sync::atomic::Ordering::Relaxed);
                ctx.ks.set(dst, Value::List(Box::new(List::from_elements(out, fill))), false);
                ctx.ks.note(notify::LIST, "sortstore", dst);
            }
            ctx.reply.int(out_len as i64);
        }
    }
    Ok(())
}

/// What kind of value SORT is looking at.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    List,
    Set,
    ZSet,
    Other,
}

fn kind_of(v: &Value) -> Kind {
    match v {
        Value::List(_) => Kind::List,
        Value::Set(_) => Kind::Set,
        Value::ZSet(_) => Kind::ZSet,
        _ => Kind::Other,
    }
}

// SORT key [BY pattern] [LIMIT offset count] [GET pattern [GET pattern ...]] [ASC | DESC]
//     [ALPHA] [STORE destination]
pub fn sort(ctx: &mut Ctx) -> CmdResult {
    sort_generic(ctx, false)
}

// SORT_RO key [BY pattern] [LIMIT offset count] [GET pattern [GET pattern ...]] [ASC | DESC]
//     [ALPHA]
pub fn sort_ro(ctx: &mut Ctx) -> CmdResult {
    sort_generic(ctx, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_parse_like_strtod() {
        assert_eq!(strtod_score(b""), Some(0.0));
        assert_eq!(strtod_score(b" 1.5"), Some(1.5));
        assert_eq!(strtod_score(b"-3"), Some(-3.0));
        assert_eq!(strtod_score(b"+inf"), Some(f64::INFINITY));
        assert_eq!(strtod_score(b"1e2"), Some(100.0));
        for bad in [&b"1 "[..], b"abc", b"nan", b"1e400", b"1e-400", b" ", b"1x", b"infinit"] {
            assert_eq!(strtod_score(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
