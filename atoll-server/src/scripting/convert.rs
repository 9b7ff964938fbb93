//! The conversions between Redis replies and Lua values, with Redis's rules.
//!
//! A command's reply becomes a Lua value (`redis.call`): integers → numbers, bulk strings →
//! strings, a null → `false` (RESP2) or `nil` (RESP3), a status → `{ok=…}`, an error →
//! `{err=…}`, arrays → tables; in RESP3 (`redis.setresp(3)`) maps → `{map={…}}`, sets →
//! `{set={member=true}}`, doubles → `{double=n}`, booleans → booleans, big numbers →
//! `{big_number="…"}`, verbatim strings → `{verbatim_string={format=…, string=…}}`.
//!
//! A script's return value becomes the reply (for the calling client's protocol): numbers are
//! truncated to integers, `true` → 1 and `false` → null (booleans in RESP3 when the script
//! chose RESP3), tables with `err`/`ok`/`double`/`big_number`/`verbatim_string`/`map`/`set`
//! fields → that reply, other tables → arrays stopping at the first nil.

use crate::protocol::value::RespValue;
use crate::protocol::{Proto, Reply};
use mlua::{Lua, Table, Value};

/// How deep a returned table may nest before the rest is refused (Redis stops where Lua's
/// stack would overflow).
const MAX_REPLY_DEPTH: usize = 1000;

/// A command's reply as the Lua value `redis.call` returns.
pub fn reply_to_lua(lua: &Lua, v: &RespValue, resp3: bool) -> mlua::Result<Value> {
    let single = |field: &str, v: Value| -> mlua::Result<Value> {
        let t = lua.create_table()?;
        t.raw_set(field, v)?;
        Ok(Value::Table(t))
    };
    Ok(match v {
        RespValue::Int(i) => Value::Number(*i as f64),
        RespValue::Bulk(b) => Value::String(lua.create_string(b)?),
        RespValue::Simple(s) => single("ok", Value::String(lua.create_string(s)?))?,
        RespValue::Error(e) => single("err", Value::String(lua.create_string(e)?))?,
        RespValue::Null => {
            if resp3 {
                Value::Nil
            } else {
                Value::Boolean(false)
            }
        }
        RespValue::Array(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, reply_to_lua(lua, item, resp3)?)?;
            }
            Value::Table(t)
        }
        RespValue::Map(pairs) => {
            let m = lua.create_table_with_capacity(0, pairs.len())?;
            for (k, v) in pairs {
                m.raw_set(reply_to_lua(lua, k, resp3)?, reply_to_lua(lua, v, resp3)?)?;
            }
            single("map", Value::Table(m))?
        }
        RespValue::Set(items) => {
            let s = lua.create_table_with_capacity(0, items.len())?;
            for item in items {
                s.raw_set(reply_to_lua(lua, item, resp3)?, true)?;
            }
            single("set", Value::Table(s))?
        }
        RespValue::Double(d) => single("double", Value::Number(*d))?,
        RespValue::Bool(b) => Value::Boolean(*b),
        RespValue::BigNumber(n) => single("big_number", Value::String(lua.create_string(n)?))?,
        RespValue::Verbatim(fmt, text) => {
            let t = lua.create_table()?;
            t.raw_set("format", lua.create_string(fmt)?)?;
            t.raw_set("string", lua.create_string(text)?)?;
            single("verbatim_string", Value::Table(t))?
        }
    })
}

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
            Value::Number(n) => number_arg(*n),
            _ => return Err("Lua redis lib command arguments must be strings or integers"),
        });
    }
    Ok(argv)
}

fn number_arg(n: f64) -> Vec<u8> {
    // Whole numbers that fit a long long print as integers (1e9 → "1000000000").
    if n.fract() == 0.0 && I64_RANGE.contains(&n) {
        return (n as i64).to_string().into_bytes();
    }
    let mut out = Vec::with_capacity(24);
    crate::protocol::fmt_double(n, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn replies_become_lua_values() {
        let lua = Lua::new();
        let v = RespValue::Array(vec![RespValue::Int(7), RespValue::Null, RespValue::Simple(b"OK")]);
        let t = reply_to_lua(&lua, &v, false).unwrap();
        lua.globals().set("t", t).unwrap();
        let s: String = lua.load("return tostring(t[1]) .. tostring(t[2]) .. t[3].ok").eval().unwrap();
        assert_eq!(s, "7falseOK");
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
