//! The conversions between Redis replies and Lua values, with Redis's rules.
//!
//! A command's reply becomes a Lua value (`redis.call`, pushed by `rcall`): integers → numbers, bulk strings →
//! strings, a null → `false` (RESP2) or `nil` (RESP3), a status → `{ok=…}`, an error →
//! `{err=…}`, arrays → tables; in RESP3 (`redis.setresp(3)`) maps → `{map={…}}`, sets →
//! `{set={member=true}}`, doubles → `{double=n}`, booleans → booleans, big numbers →
//! `{big_number="…"}`, verbatim strings → `{verbatim_string={format=…, string=…}}`.
//!
//! A script's return value becomes the reply (for the calling client's protocol): numbers are
//! truncated to integers, `true` → 1 and `false` → null (booleans in RESP3 when the script
//! chose RESP3), tables with `err`/`ok`/`double`/`big_number`/`verbatim_string`/`map`/`set`
//! fields → that reply, other tables → arrays stopping at the first nil.

use crate::protocol::{Proto, Reply};
use mlua::{Table, Value};

/// How deep a returned table may nest before the rest is refused (Redis stops where Lua's
/// stack would overflow).
const MAX_REPLY_DEPTH: usize = 1000;

/// Writes a script's return value as the reply. `script_resp3`: the script chose RESP3 with
/// `redis.setresp(3)` (booleans then stay booleans).
pub fn lua_to_reply(v: &Value, out: &mut Reply, script_resp3: bool) {
    write_value(v, out, script_resp3, 0)
}

fn write_value(v: &Value, out: &mut Reply, script_resp3: bool, depth: usize) {
    if depth > MAX_REPLY_DEPTH {
        out.error("ERR reached lua stack limit");
        return;
    }
    match v {
        Value::String(s) => out.bulk(&s.as_bytes()),
        Value::Boolean(b) => {
            if script_resp3 {
                out.bool(*b)
            } else if *b {
                out.int(1)
            } else {
                out.null()
            }
        }
        Value::Integer(i) => out.int(*i),
        Value::Number(n) => out.int(truncate(*n)),
        Value::Table(t) => write_table(t, out, script_resp3, depth),
        _ => out.null(),
    }
}

/// The doubles a `long long` can hold (2^63 itself is out).
const I64_RANGE: std::ops::Range<f64> = -9.223_372_036_854_776e18..9.223_372_036_854_776e18;

/// `(long long)` of a Lua number, as C converts it on x86-64: out of range (and NaN) gives
/// the "integer indefinite" value, i64::MIN.
fn truncate(n: f64) -> i64 {
    if !(I64_RANGE).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

fn write_table(t: &Table, out: &mut Reply, script_resp3: bool, depth: usize) {
    let field = |name: &str| t.raw_get::<Value>(name).unwrap_or(Value::Nil);
    if let Value::String(e) = field("err") {
        let text = e.to_string_lossy();
        out.error(&text);
        return;
    }
    if let Value::String(s) = field("ok") {
        let text: String = s.to_string_lossy().chars().map(|c| if c == '\r' || c == '\n' { ' ' } else { c }).collect();
        out.simple(&text);
        return;
    }
    match field("double") {
        Value::Number(d) => return out.double(d),
        Value::Integer(i) => return out.double(i as f64),
        _ => {}
    }
    if let Value::String(s) = field("big_number") {
        let text: Vec<u8> = s.as_bytes().iter().map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }).collect();
        big_number(out, &text);
        return;
    }
    if let Value::Table(v) = field("verbatim_string") {
        if let (Ok(Value::String(fmt)), Ok(Value::String(text))) =
            (v.raw_get::<Value>("format"), v.raw_get::<Value>("string"))
        {
            out.verbatim(&fmt.to_string_lossy(), &text.as_bytes());
            return;
        }
    }
    if let Value::Table(m) = field("map") {
        let d = out.defer(b'%');
        let mut n = 0;
        for (k, v) in m.pairs::<Value, Value>().flatten() {
            write_value(&k, out, script_resp3, depth + 1);
            write_value(&v, out, script_resp3, depth + 1);
            n += 1;
        }
        out.set_deferred(d, n);
        return;
    }
    if let Value::Table(s) = field("set") {
        let d = out.defer(b'~');
        let mut n = 0;
        for (k, _) in s.pairs::<Value, Value>().flatten() {
            write_value(&k, out, script_resp3, depth + 1);
            n += 1;
        }
        out.set_deferred(d, n);
        return;
    }
    let d = out.defer(b'*');
    let mut n = 0;
    loop {
        let v: Value = t.raw_get(n + 1).unwrap_or(Value::Nil);
        if v == Value::Nil {
            break;
        }
        write_value(&v, out, script_resp3, depth + 1);
        n += 1;
    }
    out.set_deferred(d, n);
}

/// A big number: `(` in RESP3, a bulk string in RESP2.
fn big_number(out: &mut Reply, text: &[u8]) {
    match out.proto {
        Proto::Resp2 => out.bulk(text),
        Proto::Resp3 => {
            out.buf.push(b'(');
            out.buf.extend_from_slice(text);
            out.buf.extend_from_slice(b"\r\n");
        }
    }
}

/// The arguments of `redis.call` as command arguments: strings as they are, numbers as
/// integers when they are whole (Redis's `double2ll`), else in the shortest round-trip form;
/// anything else is refused.
pub fn args_to_argv(args: &[Value]) -> Result<Vec<Vec<u8>>, &'static str> {
    if args.is_empty() {
        return Err("Please specify at least one argument for this redis lib call");
    }
    let mut argv = Vec::with_capacity(args.len());
    for a in args {
        argv.push(match a {
            Value::String(s) => s.as_bytes().to_vec(),
            Value::Integer(i) => i.to_string().into_bytes(),
            Value::Number(n) => {
                let mut out = Vec::with_capacity(24);
                number_arg(*n, &mut out);
                out
            }
            _ => return Err("Lua redis lib command arguments must be strings or integers"),
        });
    }
    Ok(argv)
}

/// Appends a number argument of `redis.call` as Redis formats it.
pub fn number_arg(n: f64, out: &mut Vec<u8>) {
    // Whole numbers that fit a long long print as integers (1e9 → "1000000000").
    if n.fract() == 0.0 && I64_RANGE.contains(&n) {
        out.extend_from_slice(itoa::Buffer::new().format(n as i64).as_bytes());
        return;
    }
    crate::protocol::fmt_double(n, out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlua::Lua;

    fn reply_of(lua: &Lua, code: &str, proto: Proto, resp3: bool) -> String {
        let v: Value = lua.load(code).eval().unwrap();
        let mut out = Reply::new(proto);
        lua_to_reply(&v, &mut out, resp3);
        String::from_utf8(out.buf).unwrap()
    }

    #[test]
    fn lua_values_become_redis_replies() {
        let lua = Lua::new();
        let r2 = |c: &str| reply_of(&lua, c, Proto::Resp2, false);
        assert_eq!(r2("return 3.99"), ":3\r\n");
        assert_eq!(r2("return -3.99"), ":-3\r\n");
        assert_eq!(r2("return {1,2,nil,3}"), "*2\r\n:1\r\n:2\r\n");
        assert_eq!(r2("return nil"), "$-1\r\n");
        assert_eq!(r2("return true"), ":1\r\n");
        assert_eq!(r2("return false"), "$-1\r\n");
        assert_eq!(r2("return {a=1}"), "*0\r\n");
        assert_eq!(r2("return {err='x y'}"), "-x y\r\n");
        assert_eq!(r2("return {ok='a\\r\\nb'}"), "+a  b\r\n");
        assert_eq!(r2("return {double=1.5}"), "$3\r\n1.5\r\n");
        let r3 = |c: &str| reply_of(&lua, c, Proto::Resp3, false);
        assert_eq!(r3("return false"), "_\r\n");
        assert_eq!(r3("return {double=1.5}"), ",1.5\r\n");
        assert_eq!(r3("return {map={a=1}}"), "%1\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(r3("return {set={a=1}}"), "~1\r\n$1\r\na\r\n");
        assert_eq!(r3("return {big_number='123'}"), "(123\r\n");
        assert_eq!(r3("return {verbatim_string={format='txt',string='hi'}}"), "=6\r\ntxt:hi\r\n");
        assert_eq!(reply_of(&lua, "return false", Proto::Resp3, true), "#f\r\n");
    }

    #[test]
    fn arguments_convert_as_redis_converts_them() {
        let lua = Lua::new();
        let args: mlua::MultiValue = lua.load("return 'a', 1e9, 3.5, -2").eval().unwrap();
        let argv = args_to_argv(&args.into_iter().collect::<Vec<_>>()).unwrap();
        assert_eq!(argv, vec![b"a".to_vec(), b"1000000000".to_vec(), b"3.5".to_vec(), b"-2".to_vec()]);
        assert!(args_to_argv(&[Value::Nil]).is_err());
        assert!(args_to_argv(&[]).is_err());
    }
}
