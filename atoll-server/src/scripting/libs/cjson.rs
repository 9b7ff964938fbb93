//! `cjson`: JSON encoding and decoding for Lua scripts, compatible with the lua-cjson 2.1.0 module that
//! Redis 7.2 builds into its Lua VM.
//!
//! Written by hand because no maintained crate provides lua-cjson for mlua. Reproduced behaviour: numbers
//! are printed with `%.14g` (configurable precision), `/` is escaped as `\/`, an empty table encodes as `{}`,
//! tables with only positive integer keys are arrays unless "excessively sparse", `cjson.null` is a NULL
//! light userdata, the decoder accepts what C `strtod` accepts (hex, `inf`, `nan`) by default, and the error
//! messages (`Cannot serialise ...`, `Expected value but found invalid token at character 1`, nesting limits
//! of 1000) match Redis. Deviation: nesting is additionally capped at `HARD_DEPTH_LIMIT` levels so that a
//! script raising the configured limits cannot exhaust the native stack.

use std::cell::RefCell;
use std::rc::Rc;

use mlua::{LightUserData, Lua, MultiValue, Table, Value};

use super::{arg_err, exact_number, located, number_to_int, ret1, type_name};
use super::{Args, Builder, LibResult, LUA_MAX_C_STACK};

/// Recursion cap for encoding and decoding, whatever the configured depth.
const HARD_DEPTH_LIMIT: i64 = 2000;

#[derive(Clone)]
struct Config {
    sparse_convert: bool,
    sparse_ratio: i32,
    sparse_safe: i32,
    encode_max_depth: i32,
    decode_max_depth: i32,
    /// 0 = error, 1 = emit `inf`/`nan`, 2 = emit `null`.
    encode_invalid_numbers: usize,
    decode_invalid_numbers: bool,
    encode_number_precision: i32,
    encode_keep_buffer: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            sparse_convert: false,
            sparse_ratio: 2,
            sparse_safe: 10,
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            encode_invalid_numbers: 0,
            decode_invalid_numbers: true,
            encode_number_precision: 14,
            encode_keep_buffer: true,
        }
    }
}

type Cfg = Rc<RefCell<Config>>;

fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// Build a fresh `cjson` module table with its own configuration.
pub(super) fn create(lua: &Lua, builder: Rc<Builder>) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let cfg: Cfg = Rc::new(RefCell::new(Config::default()));

    let c = cfg.clone();
    builder.add_packed(lua, &t, "encode", move |_lua, args| {
        if args.len() != 1 {
            return arg_err(1, "expected 1 argument");
        }
        let cfg = c.borrow().clone();
        let mut out = Vec::new();
        Encoder { cfg: &cfg }.value(&args.value(1), 0, &mut out)?;
        ret1(Value::String(_lua.create_string(&out)?))
    })?;
    let c = cfg.clone();
    builder.add(lua, &t, "decode", move |lua, args| {
        if args.len() != 1 {
            return arg_err(1, "expected 1 argument");
        }
        let data = args.check_bytes(lua, 1)?;
        let cfg = c.borrow().clone();
        ret1(decode(lua, &cfg, &data)?)
    })?;
    let c = cfg.clone();
    builder.add(lua, &t, "encode_sparse_array", move |lua, args| {
        arg_count(&args, 3)?;
        let mut cfg = c.borrow_mut();
        let convert = bool_option(lua, &args, 1, &mut cfg.sparse_convert)?;
        let ratio = int_option(lua, &args, 2, &mut cfg.sparse_ratio, 0, i32::MAX)?;
        let safe = int_option(lua, &args, 3, &mut cfg.sparse_safe, 0, i32::MAX)?;
        Ok(MultiValue::from_iter([convert, ratio, safe]))
    })?;
    let c = cfg.clone();
    builder.add(lua, &t, "encode_max_depth", move |lua, args| {
        arg_count(&args, 1)?;
        ret1(int_option(lua, &args, 1, &mut c.borrow_mut().encode_max_depth, 1, i32::MAX)?)
    })?;
    let c = cfg.clone();
    builder.add(lua, &t, "decode_max_depth", move |lua, args| {
        arg_count(&args, 1)?;
        ret1(int_option(lua, &args, 1, &mut c.borrow_mut().decode_max_depth, 1, i32::MAX)?)
    })?;
    let c = cfg.clone();
    builder.add(lua, &t, "encode_number_precision", move |lua, args| {
        arg_count(&args, 1)?;
        ret1(int_option(lua, &args, 1, &mut c.borrow_mut().encode_number_precision, 1, 14)?)
    })?;
    let c = cfg.clone();
    builder.add(lua, &t, "encode_keep_buffer", move |lua, args| {
        arg_count(&args, 1)?;
        ret1(bool_option(lua, &args, 1, &mut c.borrow_mut().encode_keep_buffer)?)
    })?;
    let c = cfg.clone();
    builder.add(lua, &t, "encode_invalid_numbers", move |lua, args| {
        arg_count(&args, 1)?;
        let mut cfg = c.borrow_mut();
        let setting = &mut cfg.encode_invalid_numbers;
        if !matches!(args.value(1), Value::Nil) {
            if let Value::Boolean(b) = args.value(1) {
                *setting = usize::from(b);
            } else {
                *setting = check_option(lua, &args, 1, &["off", "on", "null"])?;
            }
        }
        match *setting {
            0 => ret1(Value::Boolean(false)),
            1 => ret1(Value::Boolean(true)),
            _ => ret1(Value::String(lua.create_string("null")?)),
        }
    })?;
    let c = cfg.clone();
    builder.add(lua, &t, "decode_invalid_numbers", move |lua, args| {
        arg_count(&args, 1)?;
        ret1(bool_option(lua, &args, 1, &mut c.borrow_mut().decode_invalid_numbers)?)
    })?;
    let b = builder.clone();
    builder.add(lua, &t, "new", move |lua, _args| ret1(Value::Table(create(lua, b.clone())?)))?;
    t.raw_set("null", null())?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    Ok(t)
}

fn arg_count(args: &Args, max: usize) -> LibResult<()> {
    if args.len() > max {
        return arg_err(max as i32 + 1, "found too many arguments");
    }
    Ok(())
}

/// `luaL_checkoption` without a default.
fn check_option(lua: &Lua, args: &Args, i: usize, options: &[&str]) -> LibResult<usize> {
    let name = args.check_bytes(lua, i)?;
    match options.iter().position(|o| o.as_bytes() == name.as_slice()) {
        Some(p) => Ok(p),
        None => arg_err(i as i32, format!("invalid option '{}'", String::from_utf8_lossy(&name))),
    }
}

fn bool_option(lua: &Lua, args: &Args, i: usize, setting: &mut bool) -> LibResult<Value> {
    match args.value(i) {
        Value::Nil => {}
        Value::Boolean(b) => *setting = b,
        _ => *setting = check_option(lua, args, i, &["off", "on"])? == 1,
    }
    Ok(Value::Boolean(*setting))
}

fn int_option(lua: &Lua, args: &Args, i: usize, setting: &mut i32, min: i32, max: i32) -> LibResult<Value> {
    if !matches!(args.value(i), Value::Nil) {
        // The C code stores the lua_Integer into an int.
        let v = args.check_integer(lua, i)? as i32;
        if v < min || v > max {
            // lua-cjson always blames argument 1 here.
            return arg_err(1, format!("expected integer between {} and {}", min, max));
        }
        *setting = v;
    }
    Ok(Value::Integer(i64::from(*setting)))
}

/// Format like C `printf("%.<precision>g")`.
pub(crate) fn format_g(x: f64, precision: i32) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan".into() } else { "nan".into() };
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf".into() } else { "inf".into() };
    }
    let p = precision.max(1) as usize;
    if x == 0.0 {
        return if x.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    let sci = format!("{:.*e}", p - 1, x);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i64 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= p as i64 {
        let m = trim_fraction(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{}{:02}", m, sign, exp.abs())
    } else {
        let decimals = (p as i64 - 1 - exp).max(0) as usize;
        trim_fraction(&format!("{:.*}", decimals, x)).to_string()
    }
}

fn trim_fraction(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

struct Encoder<'a> {
    cfg: &'a Config,
}

fn serialise_error<T>(what: &str, reason: &str) -> LibResult<T> {
    located(format!("Cannot serialise {}: {}", what, reason))
}

impl Encoder<'_> {
    fn value(&self, v: &Value, depth: i64, out: &mut Vec<u8>) -> LibResult<()> {
        match v {
            Value::String(s) => append_string(&s.as_bytes(), out),
            Value::Integer(i) => self.number(*i as f64, out)?,
            Value::Number(n) => self.number(*n, out)?,
            Value::Boolean(true) => out.extend_from_slice(b"true"),
            Value::Boolean(false) => out.extend_from_slice(b"false"),
            Value::Nil => out.extend_from_slice(b"null"),
            Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
            Value::Table(t) => {
                let depth = depth + 1;
                // The C library also fails when it runs out of Lua stack slots (two per level at most).
                let slots_ok = (depth * 2 + 3) as usize <= LUA_MAX_C_STACK;
                if depth > i64::from(self.cfg.encode_max_depth) || !slots_ok || depth > HARD_DEPTH_LIMIT {
                    return located(format!("Cannot serialise, excessive nesting ({})", depth));
                }
                let len = self.array_length(t)?;
                if len > 0 {
                    self.array(t, len, depth, out)?;
                } else {
                    self.object(t, depth, out)?;
                }
            }
            other => return serialise_error(type_name(other), "type not supported"),
        }
        Ok(())
    }

    fn number(&self, n: f64, out: &mut Vec<u8>) -> LibResult<()> {
        match self.cfg.encode_invalid_numbers {
            0 if !n.is_finite() => return serialise_error("number", "must not be NaN or Inf"),
            1 if n.is_nan() => {
                out.extend_from_slice(b"nan");
                return Ok(());
            }
            2 if !n.is_finite() => {
                out.extend_from_slice(b"null");
                return Ok(());
            }
            _ => {}
        }
        out.extend_from_slice(format_g(n, self.cfg.encode_number_precision).as_bytes());
        Ok(())
    }

    /// Largest index if the table is a (not too sparse) array, otherwise a value <= 0.
    fn array_length(&self, t: &Table) -> LibResult<i32> {
        let mut max: i32 = 0;
        let mut items: i32 = 0;
        for pair in t.clone().pairs::<Value, Value>() {
            let (k, _) = pair?;
            let k = match k {
                Value::Integer(i) => i as f64,
                Value::Number(n) => n,
                _ => return Ok(-1),
            };
            if k == 0.0 || k.floor() != k || k < 1.0 {
                return Ok(-1);
            }
            if k > f64::from(max) {
                max = number_to_int(k);
            }
            items = items.wrapping_add(1);
        }
        let cfg = self.cfg;
        if cfg.sparse_ratio > 0 && max > items.wrapping_mul(cfg.sparse_ratio) && max > cfg.sparse_safe {
            if !cfg.sparse_convert {
                return serialise_error("table", "excessively sparse array");
            }
            return Ok(-1);
        }
        Ok(max)
    }

    fn array(&self, t: &Table, len: i32, depth: i64, out: &mut Vec<u8>) -> LibResult<()> {
        out.push(b'[');
        for i in 1..=i64::from(len) {
            if i > 1 {
                out.push(b',');
            }
            let key = Value::Integer(i);
            let v = exact_number(t, &key, t.raw_get::<Value>(key.clone())?);
            self.value(&v, depth, out)?;
        }
        out.push(b']');
        Ok(())
    }

    fn object(&self, t: &Table, depth: i64, out: &mut Vec<u8>) -> LibResult<()> {
        out.push(b'{');
        let mut first = true;
        for pair in t.clone().pairs::<Value, Value>() {
            let (k, v) = pair?;
            if !first {
                out.push(b',');
            }
            first = false;
            match &k {
                Value::Integer(_) | Value::Number(_) => {
                    out.push(b'"');
                    let n = match k {
                        Value::Integer(i) => i as f64,
                        Value::Number(n) => n,
                        _ => 0.0,
                    };
                    self.number(n, out)?;
                    out.extend_from_slice(b"\":");
                }
                Value::String(s) => {
                    append_string(&s.as_bytes(), out);
                    out.push(b':');
                }
                other => return serialise_error(type_name(other), "table key must be a number or string"),
            }
            let v = exact_number(t, &k, v);
            self.value(&v, depth, out)?;
        }
        out.push(b'}');
        Ok(())
    }
}

fn append_string(s: &[u8], out: &mut Vec<u8>) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            0x08 => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            0x0c => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{:04x}", c).as_bytes()),
            _ => out.push(c),
        }
    }
    out.push(b'"');
}

// ===== decoding =====

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str,
    Num,
    Bool,
    Null,
    Colon,
    Comma,
    End,
    Error,
}

impl Tok {
    fn name(self) -> &'static str {
        match self {
            Tok::ObjBegin => "T_OBJ_BEGIN",
            Tok::ObjEnd => "T_OBJ_END",
            Tok::ArrBegin => "T_ARR_BEGIN",
            Tok::ArrEnd => "T_ARR_END",
            Tok::Str => "T_STRING",
            Tok::Num => "T_NUMBER",
            Tok::Bool => "T_BOOLEAN",
            Tok::Null => "T_NULL",
            Tok::Colon => "T_COLON",
            Tok::Comma => "T_COMMA",
            Tok::End => "T_END",
            Tok::Error => "T_ERROR",
        }
    }
}

struct Token {
    kind: Tok,
    index: usize,
    num: f64,
    boolean: bool,
    text: Vec<u8>,
    error: &'static str,
}

struct Parser<'a> {
    data: &'a [u8],
    pos: usize,
    cfg: &'a Config,
    depth: i64,
}

fn decode(lua: &Lua, cfg: &Config, data: &[u8]) -> LibResult<Value> {
    if data.len() >= 2 && (data[0] == 0 || data[1] == 0) {
        return located("JSON parser does not support UTF-16 or UTF-32");
    }
    let mut p = Parser { data, pos: 0, cfg, depth: 0 };
    let tok = p.next_token();
    let v = p.value(lua, tok)?;
    let tok = p.next_token();
    if tok.kind != Tok::End {
        return p.fail("the end", &tok);
    }
    Ok(v)
}

impl Parser<'_> {
    /// The byte at `i`, with the C string's terminating NUL past the end.
    fn at(&self, i: usize) -> u8 {
        self.data.get(i).copied().unwrap_or(0)
    }

    fn token(&self, kind: Tok, index: usize) -> Token {
        Token { kind, index, num: 0.0, boolean: false, text: Vec::new(), error: "" }
    }

    fn error_token(&self, what: &'static str) -> Token {
        let mut t = self.token(Tok::Error, self.pos);
        t.error = what;
        t
    }

    fn fail<T>(&self, expected: &str, tok: &Token) -> LibResult<T> {
        let found = if tok.kind == Tok::Error { tok.error } else { tok.kind.name() };
        located(format!("Expected {} but found {} at character {}", expected, found, tok.index + 1))
    }

    fn starts_with(&self, s: &[u8]) -> bool {
        self.data.get(self.pos..self.pos + s.len()) == Some(s)
    }

    fn next_token(&mut self) -> Token {
        while matches!(self.at(self.pos), b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
        let start = self.pos;
        let ch = self.at(start);
        let single = match ch {
            b'{' => Some(Tok::ObjBegin),
            b'}' => Some(Tok::ObjEnd),
            b'[' => Some(Tok::ArrBegin),
            b']' => Some(Tok::ArrEnd),
            b',' => Some(Tok::Comma),
            b':' => Some(Tok::Colon),
            _ => None,
        };
        if let Some(kind) = single {
            self.pos += 1;
            return self.token(kind, start);
        }
        match ch {
            0 => self.token(Tok::End, start),
            b'"' => self.string_token(),
            b'-' | b'0'..=b'9' => {
                if !self.cfg.decode_invalid_numbers && self.is_invalid_number() {
                    return self.error_token("invalid number");
                }
                self.number_token()
            }
            b'f' | b'i' | b'I' | b'n' | b'N' | b't' | b'+' => {
                let mut t = self.token(Tok::Bool, start);
                if self.starts_with(b"true") {
                    t.boolean = true;
                    self.pos += 4;
                    t
                } else if self.starts_with(b"false") {
                    self.pos += 5;
                    t
                } else if self.starts_with(b"null") {
                    self.pos += 4;
                    t.kind = Tok::Null;
                    t
                } else if self.cfg.decode_invalid_numbers && self.is_invalid_number() {
                    self.number_token()
                } else {
                    self.error_token("invalid token")
                }
            }
            _ => self.error_token("invalid token"),
        }
    }

    /// Numbers `strtod` accepts but strict JSON does not: leading `+` or zeros, hex, inf and nan.
    fn is_invalid_number(&self) -> bool {
        let mut p = self.pos;
        if self.at(p) == b'+' {
            return true;
        }
        if self.at(p) == b'-' {
            p += 1;
        }
        let c = self.at(p);
        if c == b'0' {
            let c2 = self.at(p + 1);
            return (c2 | 0x20) == b'x' || c2.is_ascii_digit();
        }
        if c <= b'9' {
            return false;
        }
        let rest = self.data.get(p..p + 3).unwrap_or(&[]);
        rest.eq_ignore_ascii_case(b"inf") || rest.eq_ignore_ascii_case(b"nan")
    }

    fn number_token(&mut self) -> Token {
        // The buffer handed to strtod ends at the first NUL byte.
        let end = self.data[self.pos..].iter().position(|&b| b == 0).map_or(self.data.len(), |i| self.pos + i);
        match strtod(&self.data[self.pos..end]) {
            Some((n, used)) => {
                let mut t = self.token(Tok::Num, self.pos);
                t.num = n;
                self.pos += used;
                t
            }
            None => self.error_token("invalid number"),
        }
    }

    fn string_token(&mut self) -> Token {
        let start = self.pos;
        self.pos += 1;
        let mut text = Vec::new();
        loop {
            let ch = self.at(self.pos);
            match ch {
                b'"' => break,
                0 => return self.error_token("unexpected end of string"),
                b'\\' => {
                    let decoded = match self.at(self.pos + 1) {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 0x08,
                        b't' => b'\t',
                        b'n' => b'\n',
                        b'f' => 0x0c,
                        b'r' => b'\r',
                        b'u' => {
                            if self.unicode_escape(&mut text) {
                                continue;
                            }
                            return self.error_token("invalid unicode escape code");
                        }
                        _ => return self.error_token("invalid escape code"),
                    };
                    text.push(decoded);
                    self.pos += 2;
                }
                _ => {
                    text.push(ch);
                    self.pos += 1;
                }
            }
        }
        self.pos += 1;
        let mut t = self.token(Tok::Str, start);
        t.text = text;
        t
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let mut v = 0;
        for i in 0..4 {
            v = (v << 4) | char::from(self.at(at + i)).to_digit(16)?;
        }
        Some(v)
    }

    /// Decode `\uXXXX` (or a surrogate pair) at `pos` into UTF-8; false on malformed escapes.
    fn unicode_escape(&mut self, out: &mut Vec<u8>) -> bool {
        let Some(mut cp) = self.hex4(self.pos + 2) else { return false };
        let mut len = 6;
        if cp & 0xF800 == 0xD800 {
            if cp & 0x400 != 0 || self.at(self.pos + 6) != b'\\' || self.at(self.pos + 7) != b'u' {
                return false;
            }
            let Some(low) = self.hex4(self.pos + 8) else { return false };
            if low & 0xFC00 != 0xDC00 {
                return false;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            len = 12;
        }
        let mut buf = [0u8; 4];
        match char::from_u32(cp) {
            Some(c) => out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes()),
            None => return false,
        }
        self.pos += len;
        true
    }

    fn descend(&mut self) -> LibResult<()> {
        self.depth += 1;
        let slots_ok = (self.depth * 3 + 3) as usize <= LUA_MAX_C_STACK;
        if self.depth > i64::from(self.cfg.decode_max_depth) || !slots_ok || self.depth > HARD_DEPTH_LIMIT {
            return located(format!(
                "Found too many nested data structures ({}) at character {}",
                self.depth, self.pos
            ));
        }
        Ok(())
    }

    fn value(&mut self, lua: &Lua, tok: Token) -> LibResult<Value> {
        Ok(match tok.kind {
            Tok::Str => Value::String(lua.create_string(&tok.text)?),
            Tok::Num => Value::Number(tok.num),
            Tok::Bool => Value::Boolean(tok.boolean),
            Tok::Null => null(),
            Tok::ObjBegin => Value::Table(self.object(lua)?),
            Tok::ArrBegin => Value::Table(self.array(lua)?),
            _ => return self.fail("value", &tok),
        })
    }

    fn object(&mut self, lua: &Lua) -> LibResult<Table> {
        self.descend()?;
        let t = lua.create_table()?;
        let mut tok = self.next_token();
        if tok.kind == Tok::ObjEnd {
            self.depth -= 1;
            return Ok(t);
        }
        loop {
            if tok.kind != Tok::Str {
                return self.fail("object key string", &tok);
            }
            let key = lua.create_string(&tok.text)?;
            tok = self.next_token();
            if tok.kind != Tok::Colon {
                return self.fail("colon", &tok);
            }
            tok = self.next_token();
            let v = self.value(lua, tok)?;
            t.raw_set(key, v)?;
            tok = self.next_token();
            if tok.kind == Tok::ObjEnd {
                self.depth -= 1;
                return Ok(t);
            }
            if tok.kind != Tok::Comma {
                return self.fail("comma or object end", &tok);
            }
            tok = self.next_token();
        }
    }

    fn array(&mut self, lua: &Lua) -> LibResult<Table> {
        self.descend()?;
        let t = lua.create_table()?;
        let mut tok = self.next_token();
        if tok.kind == Tok::ArrEnd {
            self.depth -= 1;
            return Ok(t);
        }
        let mut i: i64 = 1;
        loop {
            let v = self.value(lua, tok)?;
            t.raw_set(i, v)?;
            i += 1;
            tok = self.next_token();
            if tok.kind == Tok::ArrEnd {
                self.depth -= 1;
                return Ok(t);
            }
            if tok.kind != Tok::Comma {
                return self.fail("comma or array end", &tok);
            }
            tok = self.next_token();
        }
    }
}

/// C `strtod` (glibc flavour, "C" locale) on a buffer: the value and the number of bytes used, or `None`
/// when no number could be read. Accepts decimal and hexadecimal floats, `inf`, `infinity` and `nan(...)`.
pub(crate) fn strtod(s: &[u8]) -> Option<(f64, usize)> {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut i = 0;
    while matches!(at(i), b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let negative = at(i) == b'-';
    if matches!(at(i), b'+' | b'-') {
        i += 1;
    }
    let sign = if negative { -1.0 } else { 1.0 };
    let rest = &s[i.min(s.len())..];
    let ci_prefix = |p: &[u8]| rest.len() >= p.len() && rest[..p.len()].eq_ignore_ascii_case(p);
    if ci_prefix(b"infinity") {
        return Some((sign * f64::INFINITY, i + 8));
    }
    if ci_prefix(b"inf") {
        return Some((sign * f64::INFINITY, i + 3));
    }
    if ci_prefix(b"nan") {
        let mut end = i + 3;
        if at(end) == b'(' {
            let mut j = end + 1;
            while at(j).is_ascii_alphanumeric() || at(j) == b'_' {
                j += 1;
            }
            if at(j) == b')' {
                end = j + 1;
            }
        }
        return Some((sign * f64::NAN, end));
    }
    if at(i) == b'0' && (at(i + 1) | 0x20) == b'x' {
        if let Some((v, used)) = hex_float(&s[i + 2..]) {
            return Some((sign * v, i + 2 + used));
        }
    }
    let start = i;
    let mut digits = 0;
    while at(i).is_ascii_digit() {
        i += 1;
        digits += 1;
    }
    if at(i) == b'.' {
        i += 1;
        while at(i).is_ascii_digit() {
            i += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return None;
    }
    if (at(i) | 0x20) == b'e' {
        let mut j = i + 1;
        if matches!(at(j), b'+' | b'-') {
            j += 1;
        }
        if at(j).is_ascii_digit() {
            while at(j).is_ascii_digit() {
                j += 1;
            }
            i = j;
        }
    }
    let text = std::str::from_utf8(&s[start..i]).ok()?;
    let text = if text.starts_with('.') { format!("0{}", text) } else { text.to_string() };
    let v: f64 = text.parse().ok()?;
    Some((sign * v, i))
}

/// The part of a hexadecimal float after `0x`.
fn hex_float(s: &[u8]) -> Option<(f64, usize)> {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut i = 0;
    let mut mant: u128 = 0;
    let mut exp: i64 = 0;
    let mut digits = 0;
    let mut sticky = false;
    let mut seen_point = false;
    loop {
        let c = at(i);
        if c == b'.' && !seen_point {
            seen_point = true;
            i += 1;
            continue;
        }
        let Some(d) = char::from(c).to_digit(16) else { break };
        digits += 1;
        if mant >> 120 == 0 {
            mant = (mant << 4) | u128::from(d);
            if seen_point {
                exp -= 4;
            }
        } else {
            sticky |= d != 0;
            if !seen_point {
                exp += 4;
            }
        }
        i += 1;
    }
    if digits == 0 {
        return None;
    }
    if (at(i) | 0x20) == b'p' {
        let mut j = i + 1;
        let neg = at(j) == b'-';
        if matches!(at(j), b'+' | b'-') {
            j += 1;
        }
        if at(j).is_ascii_digit() {
            let mut e: i64 = 0;
            while at(j).is_ascii_digit() {
                e = (e * 10 + i64::from(at(j) - b'0')).min(100_000);
                j += 1;
            }
            exp += if neg { -e } else { e };
            i = j;
        }
    }
    if sticky {
        mant |= 1;
    }
    let mut v = mant as f64;
    let mut e = exp.clamp(-3000, 3000);
    while e > 0 {
        let step = e.min(1000);
        v *= 2f64.powi(step as i32);
        e -= step;
    }
    while e < 0 {
        let step = (-e).min(1000);
        v /= 2f64.powi(step as i32);
        e += step;
    }
    Some((v, i))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::check_cases;
    use super::{format_g, strtod};

    #[test]
    fn format_g_matches_printf() {
        assert_eq!(format_g(0.1, 14), "0.1");
        assert_eq!(format_g(1.0 / 3.0, 14), "0.33333333333333");
        assert_eq!(format_g(1e15, 14), "1e+15");
        assert_eq!(format_g(123456789012345.0, 14), "1.2345678901234e+14");
        assert_eq!(format_g(-1e-7, 14), "-1e-07");
        assert_eq!(format_g(0.0001, 14), "0.0001");
        assert_eq!(format_g(std::f64::consts::PI, 3), "3.14");
        assert_eq!(format_g(1e100, 14), "1e+100");
        assert_eq!(format_g(-0.0, 14), "-0");
        assert_eq!(format_g(99999999999999.5, 14), "1e+14");
    }

    #[test]
    fn strtod_like_c() {
        assert_eq!(strtod(b"12abc"), Some((12.0, 2)));
        assert_eq!(strtod(b"1e"), Some((1.0, 1)));
        assert_eq!(strtod(b"0x"), Some((0.0, 1)));
        assert_eq!(strtod(b"0x1p4"), Some((16.0, 5)));
        assert_eq!(strtod(b"-"), None);
        assert_eq!(strtod(b"infinit"), Some((f64::INFINITY, 3)));
    }

    #[test]
    fn matches_redis_7_2_6() {
        check_cases(&[
            (r##"cjson.encode({1,2,{a=3}})"##, r##"true,"[1,2,{\"a\":3}]""##),
            (r##"cjson.encode({})"##, r##"true,"{}""##),
            (r##"cjson.encode({a={}})"##, r##"true,"{\"a\":{}}""##),
            (
                r##"cjson.encode("a/b\"c\\d\n\r\t\b\f\1\31\127\128\255")"##,
                r##"true,"\"a\/b\\"c\\d\n\r\t\b\f\u0001\u001f\u007f\x80\xff\"""##,
            ),
            (
                r##"cjson.encode(1.5), cjson.encode(-0.0), cjson.encode(0.1), cjson.encode(1/3)"##,
                r##"true,"1.5","-0","0.1","0.33333333333333""##,
            ),
            (
                r##"cjson.encode(123456789012345), cjson.encode(1e15), cjson.encode(1e100), cjson.encode(-1e-7), cjson.encode(2^53)"##,
                r##"true,"1.2345678901234e+14","1e+15","1e+100","-1e-07","9.007199254741e+15""##,
            ),
            (
                r##"cjson.encode(100), cjson.encode(1e14), cjson.encode(12345678901234567890), cjson.encode(0.0001), cjson.encode(0.00001)"##,
                r##"true,"100","1e+14","1.2345678901235e+19","0.0001","1e-05""##,
            ),
            (
                r##"cjson.encode(true), cjson.encode(false), cjson.encode(nil), cjson.encode(cjson.null)"##,
                r##"true,"true","false","null","null""##,
            ),
            (r##"cjson.encode({1,nil,3})"##, r##"true,"[1,null,3]""##),
            (r##"cjson.encode({[1]=1,[2]=2,[4]=4})"##, r##"true,"[1,2,null,4]""##),
            (
                r##"cjson.encode({[1]=1,[11]=2})"##,
                r##"false,"user_script:28: Cannot serialise table: excessively sparse array""##,
            ),
            (
                r##"cjson.encode({[1]=1,[20]=2})"##,
                r##"false,"user_script:28: Cannot serialise table: excessively sparse array""##,
            ),
            (r##"cjson.encode({[10]=1})"##, r##"true,"[null,null,null,null,null,null,null,null,null,1]""##),
            (
                r##"cjson.encode({[11]=1})"##,
                r##"false,"user_script:28: Cannot serialise table: excessively sparse array""##,
            ),
            (r##"cjson.encode({[0]=1})"##, r##"true,"{\"0\":1}""##),
            (r##"cjson.encode({[-1]=1})"##, r##"true,"{\"-1\":1}""##),
            (r##"cjson.encode({[1.5]=1})"##, r##"true,"{\"1.5\":1}""##),
            (r##"cjson.encode({[1e10]=1})"##, r##"true,"{\"10000000000\":1}""##),
            (r##"cjson.encode({[2^31]=1})"##, r##"true,"{\"2147483648\":1}""##),
            (r##"cjson.encode({[1]=1, x=2})"##, r##"true,"{\"1\":1,\"x\":2}""##),
            (
                r##"cjson.encode({[true]=1})"##,
                r##"false,"user_script:28: Cannot serialise boolean: table key must be a number or string""##,
            ),
            (
                r##"cjson.encode({f=function() end})"##,
                r##"false,"user_script:28: Cannot serialise function: type not supported""##,
            ),
            (
                r##"cjson.encode(function() end)"##,
                r##"false,"user_script:28: Cannot serialise function: type not supported""##,
            ),
            (r##"cjson.encode(1/0)"##, r##"false,"user_script:28: Cannot serialise number: must not be NaN or Inf""##),
            (r##"cjson.encode(-1/0)"##, r##"false,"user_script:28: Cannot serialise number: must not be NaN or Inf""##),
            (r##"cjson.encode(0/0)"##, r##"false,"user_script:28: Cannot serialise number: must not be NaN or Inf""##),
            (r##"cjson.encode({[0/0]=1})"##, r##"false,"user_script:28: table index is NaN""##),
            (r##"cjson.encode()"##, r##"false,"user_script:28: bad argument #1 to 'encode' (expected 1 argument)""##),
            (
                r##"cjson.encode(1, 2)"##,
                r##"false,"user_script:28: bad argument #1 to 'encode' (expected 1 argument)""##,
            ),
            (r##"cjson.encode({a={b={c={d={}}}}})"##, r##"true,"{\"a\":{\"b\":{\"c\":{\"d\":{}}}}}""##),
            (r##"cjson.encode({cjson.null, false, "x"})"##, r##"true,"[null,false,\"x\"]""##),
            (r##"cjson.encode({["a\0b"]=1})"##, r##"true,"{\"a\u0000b\":1}""##),
            (r##"cjson.encode("\0")"##, r##"true,"\"\u0000\"""##),
            (r##"cjson.encode(setmetatable({}, {__index=function() return 1 end}))"##, r##"true,"{}""##),
            (r##"cjson.decode('{"a":[1,2,3],"b":{"c":null}}')"##, r##"true,{"a"={1=1,2=2,3=3},"b"={"c"=null}}"##),
            (r##"cjson.decode('[1,2,3]')"##, r##"true,{1=1,2=2,3=3}"##),
            (
                r##"cjson.decode('"\\u00e9\\u20ac\\ud83d\\ude00\\/\\b\\f\\n\\r\\t\\"\\\\"')"##,
                r##"true,"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80/\x08\x0c\x0a\x0d\x09\"\""##,
            ),
            (r##"cjson.decode('"\\u0000x"')"##, r##"true,"\x00x""##),
            (
                r##"cjson.decode('"\\ud83d"')"##,
                r##"false,"user_script:28: Expected value but found invalid unicode escape code at character 2""##,
            ),
            (
                r##"cjson.decode('"\\ude00"')"##,
                r##"false,"user_script:28: Expected value but found invalid unicode escape code at character 2""##,
            ),
            (
                r##"cjson.decode('"\\ud83dx"')"##,
                r##"false,"user_script:28: Expected value but found invalid unicode escape code at character 2""##,
            ),
            (
                r##"cjson.decode('"\\u12"')"##,
                r##"false,"user_script:28: Expected value but found invalid unicode escape code at character 2""##,
            ),
            (
                r##"cjson.decode('"\\x"')"##,
                r##"false,"user_script:28: Expected value but found invalid escape code at character 2""##,
            ),
            (
                r##"cjson.decode('"abc')"##,
                r##"false,"user_script:28: Expected value but found unexpected end of string at character 5""##,
            ),
            (r##"cjson.decode('')"##, r##"false,"user_script:28: Expected value but found T_END at character 1""##),
            (r##"cjson.decode('  ')"##, r##"false,"user_script:28: Expected value but found T_END at character 3""##),
            (
                r##"cjson.decode('x')"##,
                r##"false,"user_script:28: Expected value but found invalid token at character 1""##,
            ),
            (
                r##"cjson.decode('[1,2')"##,
                r##"false,"user_script:28: Expected comma or array end but found T_END at character 5""##,
            ),
            (
                r##"cjson.decode('[1 2]')"##,
                r##"false,"user_script:28: Expected comma or array end but found T_NUMBER at character 4""##,
            ),
            (
                r##"cjson.decode('{"a" 1}')"##,
                r##"false,"user_script:28: Expected colon but found T_NUMBER at character 6""##,
            ),
            (
                r##"cjson.decode('{1:2}')"##,
                r##"false,"user_script:28: Expected object key string but found T_NUMBER at character 2""##,
            ),
            (
                r##"cjson.decode('{"a":1,}')"##,
                r##"false,"user_script:28: Expected object key string but found T_OBJ_END at character 8""##,
            ),
            (
                r##"cjson.decode('[1,]')"##,
                r##"false,"user_script:28: Expected value but found T_ARR_END at character 4""##,
            ),
            (r##"cjson.decode('[]')"##, r##"true,{}"##),
            (r##"cjson.decode('{}')"##, r##"true,{}"##),
            (
                r##"cjson.decode('nul')"##,
                r##"false,"user_script:28: Expected value but found invalid token at character 1""##,
            ),
            (
                r##"cjson.decode('truex')"##,
                r##"false,"user_script:28: Expected the end but found invalid token at character 5""##,
            ),
            (
                r##"cjson.decode('true false')"##,
                r##"false,"user_script:28: Expected the end but found T_BOOLEAN at character 6""##,
            ),
            (r##"cjson.decode(' true ')"##, r##"true,true"##),
            (
                r##"cjson.decode('-0'), cjson.decode('1e3'), cjson.decode('1.5E-2'), cjson.decode('-12.25')"##,
                r##"true,-0,1000,0.014999999999999999,-12.25"##,
            ),
            (
                r##"cjson.decode('0x10'), cjson.decode('+5'), cjson.decode('007'), cjson.decode('1.')"##,
                r##"true,16,5,7,1"##,
            ),
            (
                r##"cjson.decode('inf'), cjson.decode('-Infinity'), cjson.decode('NaN') ~= cjson.decode('NaN'), cjson.decode('nan(123)') ~= 0"##,
                r##"true,inf,-inf,true,true"##,
            ),
            (
                r##"cjson.decode('-')"##,
                r##"false,"user_script:28: Expected value but found invalid number at character 1""##,
            ),
            (
                r##"cjson.decode('.5')"##,
                r##"false,"user_script:28: Expected value but found invalid token at character 1""##,
            ),
            (
                r##"cjson.decode('1e')"##,
                r##"false,"user_script:28: Expected the end but found invalid token at character 2""##,
            ),
            (
                r##"cjson.decode('1e+')"##,
                r##"false,"user_script:28: Expected the end but found invalid token at character 2""##,
            ),
            (
                r##"cjson.decode('0x')"##,
                r##"false,"user_script:28: Expected the end but found invalid token at character 2""##,
            ),
            (r##"cjson.decode('0x1p4'), cjson.decode('0x.8'), cjson.decode('0X1P-1')"##, r##"true,16,0.5,0.5"##),
            (
                r##"cjson.decode('infinit')"##,
                r##"false,"user_script:28: Expected the end but found invalid token at character 4""##,
            ),
            (r##"cjson.decode('[infinity]')"##, r##"true,{1=inf}"##),
            (
                r##"cjson.decode('- 1')"##,
                r##"false,"user_script:28: Expected value but found invalid number at character 1""##,
            ),
            (r##"cjson.decode('12345678901234567890123')"##, r##"true,1.2345678901234568e+22"##),
            (r##"cjson.decode('1e400'), cjson.decode('-1e400'), cjson.decode('1e-400')"##, r##"true,inf,-inf,0"##),
            (r##"cjson.decode(123)"##, r##"true,123"##),
            (
                r##"cjson.decode(nil)"##,
                r##"false,"user_script:28: bad argument #1 to 'decode' (string expected, got nil)""##,
            ),
            (r##"cjson.decode()"##, r##"false,"user_script:28: bad argument #1 to 'decode' (expected 1 argument)""##),
            (
                r##"cjson.decode({})"##,
                r##"false,"user_script:28: bad argument #1 to 'decode' (string expected, got table)""##,
            ),
            (
                r##"cjson.decode('"a"', 2)"##,
                r##"false,"user_script:28: bad argument #1 to 'decode' (expected 1 argument)""##,
            ),
            (r##"cjson.decode('a\0')"##, r##"false,"user_script:28: JSON parser does not support UTF-16 or UTF-32""##),
            (r##"cjson.decode('\0a')"##, r##"false,"user_script:28: JSON parser does not support UTF-16 or UTF-32""##),
            (
                r##"cjson.decode('1\0 junk')"##,
                r##"false,"user_script:28: JSON parser does not support UTF-16 or UTF-32""##,
            ),
            (
                r##"cjson.decode('"a\0b"')"##,
                r##"false,"user_script:28: Expected value but found unexpected end of string at character 3""##,
            ),
            (r##"cjson.decode('[1,2]\n\t\r ')"##, r##"true,{1=1,2=2}"##),
            (r##"cjson.decode('"\tx"')"##, r##"true,"\x09x""##),
            (r##"cjson.decode('{"a":1,"a":2}')"##, r##"true,{"a"=2}"##),
            (r##"cjson.decode('[null,null]')"##, r##"true,{1=null,2=null}"##),
            (r##"cjson.decode(string.rep('[', 1000) .. string.rep(']', 1000)) ~= nil"##, r##"true,true"##),
            (
                r##"cjson.decode(string.rep('[', 1001) .. string.rep(']', 1001))"##,
                r##"false,"user_script:28: Found too many nested data structures (1001) at character 1001""##,
            ),
            (
                r##"cjson.decode(string.rep('{"a":', 1001))"##,
                r##"false,"user_script:28: Found too many nested data structures (1001) at character 5001""##,
            ),
            (
                r##"cjson.decode('[' .. string.rep('[', 1000))"##,
                r##"false,"user_script:28: Found too many nested data structures (1001) at character 1001""##,
            ),
            (
                r##"cjson.null, type(cjson.null), cjson._NAME, cjson._VERSION"##,
                r##"true,null,"userdata","cjson","2.1.0""##,
            ),
            (
                r##"@local t = {} local c = t for i = 1, 999 do c[1] = {} c = c[1] end return #cjson.encode(t)"##,
                r##"true,2000"##,
            ),
            (
                r##"@local t = {} local c = t for i = 1, 1000 do c[1] = {} c = c[1] end return cjson.encode(t)"##,
                r##"false,"user_script:28: Cannot serialise, excessive nesting (1001)""##,
            ),
            (
                r##"@local t = {} t[1] = t return cjson.encode(t)"##,
                r##"false,"user_script:28: Cannot serialise, excessive nesting (1001)""##,
            ),
            (
                r##"cjson.encode_max_depth(), cjson.decode_max_depth(), cjson.encode_number_precision(), cjson.encode_keep_buffer(), cjson.encode_invalid_numbers(), cjson.decode_invalid_numbers(), cjson.encode_sparse_array()"##,
                r##"true,1000,1000,14,true,false,true,false,2,10"##,
            ),
            (
                r##"@local r = {cjson.encode_number_precision(3)} local e = cjson.encode(math.pi) cjson.encode_number_precision(14) return r[1], e"##,
                r##"true,3,"3.14""##,
            ),
            (
                r##"cjson.encode_number_precision(0)"##,
                r##"false,"user_script:28: bad argument #1 to 'encode_number_precision' (expected integer between 1 and 14)""##,
            ),
            (
                r##"cjson.encode_number_precision(15)"##,
                r##"false,"user_script:28: bad argument #1 to 'encode_number_precision' (expected integer between 1 and 14)""##,
            ),
            (
                r##"cjson.encode_number_precision('x')"##,
                r##"false,"user_script:28: bad argument #1 to 'encode_number_precision' (number expected, got string)""##,
            ),
            (
                r##"cjson.encode_number_precision(1, 2)"##,
                r##"false,"user_script:28: bad argument #2 to 'encode_number_precision' (found too many arguments)""##,
            ),
            (
                r##"cjson.encode_max_depth(0)"##,
                r##"false,"user_script:28: bad argument #1 to 'encode_max_depth' (expected integer between 1 and 2147483647)""##,
            ),
            (
                r##"@local a = cjson.encode_max_depth(2) local ok, e = pcall(cjson.encode, {{{1}}}) local ok2, e2 = pcall(cjson.encode, {{1}}) cjson.encode_max_depth(1000) return a, ok, e, ok2, e2"##,
                r##"true,2,false,"Cannot serialise, excessive nesting (3)",true,"[[1]]""##,
            ),
            (
                r##"@local a = cjson.decode_max_depth(2) local ok, e = pcall(cjson.decode, '[[[1]]]') local ok2, e2 = pcall(cjson.decode, '{"a":{"b":{}}}') cjson.decode_max_depth(1000) return a, ok, e, ok2, e2"##,
                r##"true,2,false,"Found too many nested data structures (3) at character 3",false,"Found too many nested data structures (3) at character 11""##,
            ),
            (
                r##"@local r = {cjson.encode_sparse_array(true)} local e = cjson.encode({[1]=1,[20]=2}) cjson.encode_sparse_array(false) return r[1], r[2], r[3], e"##,
                r##"true,true,2,10,"{\"1\":1,\"20\":2}""##,
            ),
            (
                r##"@local r = {cjson.encode_sparse_array(nil, 0)} local e = cjson.encode({[1]=1,[20]=2}) cjson.encode_sparse_array(false, 2, 10) return r[1], r[2], r[3], e"##,
                r##"true,false,0,10,"[1,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,2]""##,
            ),
            (
                r##"@local r = {cjson.encode_sparse_array(nil, nil, 100)} local e = cjson.encode({[1]=1,[50]=2}) cjson.encode_sparse_array(false, 2, 10) return r[1], r[2], r[3], e"##,
                r##"true,false,2,100,"[1,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,2]""##,
            ),
            (
                r##"@local r = {cjson.encode_sparse_array('on')} local r2 = {cjson.encode_sparse_array('off')} return r[1], r2[1]"##,
                r##"true,true,false"##,
            ),
            (
                r##"cjson.encode_sparse_array('maybe')"##,
                r##"false,"user_script:28: bad argument #1 to 'encode_sparse_array' (invalid option 'maybe')""##,
            ),
            (
                r##"@local a = cjson.encode_invalid_numbers(true) local e = cjson.encode({1/0, -1/0, 0/0}) cjson.encode_invalid_numbers(false) return a, e"##,
                r##"true,true,"[inf,-inf,nan]""##,
            ),
            (
                r##"@local a = cjson.encode_invalid_numbers('null') local e = cjson.encode({1/0, -1/0, 0/0}) cjson.encode_invalid_numbers('off') return a, e"##,
                r##"true,"null","[null,null,null]""##,
            ),
            (
                r##"@local a = cjson.decode_invalid_numbers(false) local ok, e = pcall(cjson.decode, '0x10') local ok2, e2 = pcall(cjson.decode, '[1, inf]') local ok3, e3 = pcall(cjson.decode, '-5') cjson.decode_invalid_numbers(true) return a, ok, e, ok2, e2, ok3, e3"##,
                r##"true,false,false,"Expected value but found invalid number at character 1",false,"Expected value but found invalid token at character 5",true,-5"##,
            ),
            (
                r##"@local a = cjson.decode_invalid_numbers(false) local ok, e = pcall(cjson.decode, '+5') local ok2, e2 = pcall(cjson.decode, '012') local ok3, e3 = pcall(cjson.decode, 'nan') cjson.decode_invalid_numbers(true) return a, ok, e, ok2, e2, ok3, e3"##,
                r##"true,false,false,"Expected value but found invalid token at character 1",false,"Expected value but found invalid number at character 1",false,"Expected value but found invalid token at character 1""##,
            ),
            (
                r##"@local a = cjson.encode_keep_buffer(false) local e = cjson.encode({1}) local b = cjson.encode_keep_buffer(true) return a, e, b"##,
                r##"true,false,"[1]",true"##,
            ),
            (
                r##"@local c = cjson.new() c.encode_max_depth(1) local ok = pcall(c.encode, {{1}}) return ok, cjson.encode({{1}}), c._NAME, c.null"##,
                r##"true,false,"[[1]]","cjson",null"##,
            ),
            (
                r##"cjson.encode({a=1,b=2,c=3,d=4,hello="x",world={}})"##,
                r##"true,"{\"a\":1,\"c\":3,\"b\":2,\"d\":4,\"hello\":\"x\",\"world\":{}}""##,
            ),
        ]);
    }
}
