//! Lua helper libraries that Redis 7.2 preloads into its scripting VM: `cjson`, `cmsgpack`, `bit` and `struct`.
//!
//! Redis links C implementations of these modules into its embedded Lua 5.1. No maintained crate ships them
//! for mlua, so Atoll carries its own Rust implementations, written to produce the same bytes and the same
//! error messages as Redis 7.2.6 (checked against a real redis-server while writing the tests).
//!
//! Every library function is a Rust callback behind a small C-ABI trampoline. mlua raises Rust errors as
//! userdata values, but Redis scripts expect plain string errors (for example when they
//! `pcall(cjson.decode, s)` and inspect the message), so the callback returns a status flag and the
//! trampoline raises the message string itself. The callback prepends the `chunk:line:` position of the
//! calling Lua code, as `luaL_error` does in C.

use std::os::raw::c_int;

use mlua::{ffi, Function, Lua, MultiValue, Table, Value};

mod bit;
mod cjson;
mod cmsgpack;
mod luastruct;

pub(crate) use cjson::format_g;

/// How Lua prints a number (`%.14g`), for the few places a number turns into text.
pub fn lua_number_text(n: f64) -> String {
    format_g(n, 14)
}

/// Lua 5.1's `LUAI_MAXCSTACK`: the most stack slots a C function may use. The C libraries hit this limit on
/// very deep or very wide data; we emulate the same accounting to fail at the same points.
pub(crate) const LUA_MAX_C_STACK: usize = 8000;

/// An error raised by a library function, converted to a Lua string error by the wrapper.
#[derive(Debug)]
pub(crate) enum LibError {
    /// Like `luaL_error`: the caller's position is prepended.
    Located(String),
    /// Like `luaL_argerror`: `bad argument #n to 'name' (msg)`, with position.
    Arg(i32, String),
    /// Raised without position information (errors the Lua core raises from inside a C function).
    Plain(String),
}

pub(crate) type LibResult<T> = Result<T, LibError>;

pub(crate) fn located<T>(msg: impl Into<String>) -> LibResult<T> {
    Err(LibError::Located(msg.into()))
}

pub(crate) fn arg_err<T>(narg: i32, msg: impl Into<String>) -> LibResult<T> {
    Err(LibError::Arg(narg, msg.into()))
}

impl From<mlua::Error> for LibError {
    fn from(e: mlua::Error) -> Self {
        match e {
            mlua::Error::RuntimeError(m) | mlua::Error::MemoryError(m) => LibError::Plain(m),
            other => LibError::Plain(other.to_string()),
        }
    }
}

/// Lua's name for the type of a value (`lua_typename`).
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

/// Arguments of one call, with the accessors of the C auxiliary library (`luaL_check*`).
pub(crate) struct Args {
    vals: Vec<Value>,
}

impl Args {
    pub(crate) fn len(&self) -> usize {
        self.vals.len()
    }

    /// Argument `i` (1-based); `None` when absent ("no value").
    pub(crate) fn get(&self, i: usize) -> Option<&Value> {
        self.vals.get(i.wrapping_sub(1))
    }

    pub(crate) fn value(&self, i: usize) -> Value {
        self.get(i).cloned().unwrap_or(Value::Nil)
    }

    /// Append a nil argument (struct.pack pushes one, which changes "no value" into "nil" in errors).
    pub(crate) fn push_nil(&mut self) {
        self.vals.push(Value::Nil);
    }

    pub(crate) fn is_none(&self, i: usize) -> bool {
        self.get(i).is_none()
    }

    fn got(&self, i: usize) -> &'static str {
        self.get(i).map_or("no value", type_name)
    }

    pub(crate) fn type_error<T>(&self, i: usize, expected: &str) -> LibResult<T> {
        arg_err(i as i32, format!("{} expected, got {}", expected, self.got(i)))
    }

    /// `lua_tonumber`: numbers and numeric strings.
    pub(crate) fn to_number(&self, lua: &Lua, i: usize) -> LibResult<Option<f64>> {
        to_number(lua, &self.value(i))
    }

    /// `luaL_checknumber`.
    pub(crate) fn check_number(&self, lua: &Lua, i: usize) -> LibResult<f64> {
        match self.to_number(lua, i)? {
            Some(n) => Ok(n),
            None => self.type_error(i, "number"),
        }
    }

    /// `luaL_checkinteger` (truncating like the C cast on x86-64).
    pub(crate) fn check_integer(&self, lua: &Lua, i: usize) -> LibResult<i64> {
        self.check_number(lua, i).map(number_to_integer)
    }

    /// `luaL_optinteger`.
    pub(crate) fn opt_integer(&self, lua: &Lua, i: usize, default: i64) -> LibResult<i64> {
        match self.get(i) {
            None | Some(Value::Nil) => Ok(default),
            Some(_) => self.check_integer(lua, i),
        }
    }

    /// `luaL_checklstring`: strings, and numbers converted to strings.
    pub(crate) fn check_bytes(&self, lua: &Lua, i: usize) -> LibResult<Vec<u8>> {
        match self.get(i) {
            Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
            Some(v @ (Value::Integer(_) | Value::Number(_))) => match lua.coerce_string(v.clone())? {
                Some(s) => Ok(s.as_bytes().to_vec()),
                None => self.type_error(i, "string"),
            },
            _ => self.type_error(i, "string"),
        }
    }
}

/// `lua_tonumber` on any value: numbers, and strings Lua can convert.
pub(crate) fn to_number(lua: &Lua, v: &Value) -> LibResult<Option<f64>> {
    Ok(match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        Value::String(_) => lua.coerce_number(v.clone())?,
        _ => None,
    })
}

/// `(lua_Integer)d` as compiled for x86-64: truncation, and INT64_MIN for NaN and out-of-range values.
pub(crate) fn number_to_integer(n: f64) -> i64 {
    if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&n) {
        n as i64
    } else {
        i64::MIN
    }
}

/// `(int)d` as compiled for x86-64: truncation, and INT_MIN for NaN and out-of-range values.
pub(crate) fn number_to_int(n: f64) -> i32 {
    if n > -2_147_483_649.0 && n < 2_147_483_648.0 {
        n as i32
    } else {
        i32::MIN
    }
}

/// mlua turns integral numbers into `Value::Integer`, which loses the sign of negative zero. Re-read such a
/// value from its table as a float so that `-0` survives.
pub(crate) fn exact_number(table: &Table, key: &Value, v: Value) -> Value {
    match v {
        Value::Integer(0) => match table.raw_get::<f64>(key.clone()) {
            Ok(n) => Value::Number(n),
            Err(_) => v,
        },
        v => v,
    }
}

/// `luaL_where(L, 1)` as seen from inside a wrapped library function: the position of the Lua code that
/// called the wrapper (stack level 0 is the Rust callback, 1 the wrapper, 2 its caller).
fn where_prefix(lua: &Lua) -> String {
    if let Some(d) = lua.inspect_stack(2) {
        let line = d.curr_line();
        if line > 0 {
            if let Some(src) = d.source().short_src {
                return format!("{}:{}: ", src, line);
            }
        }
    }
    String::new()
}

/// The name `luaL_argerror` would print for the running library function.
fn arg_error_message(lua: &Lua, canonical: &str, narg: i32, msg: &str) -> String {
    let mut narg = narg;
    let mut name: Option<String> = None;
    if let Some(d) = lua.inspect_stack(1) {
        let names = d.names();
        if names.name_what == Some("method") {
            narg -= 1;
            if narg == 0 {
                let n = names.name.as_deref().unwrap_or("?").to_string();
                return format!("calling '{}' on bad self ({})", n, msg);
            }
        }
        name = names.name.map(|n| n.into_owned());
    }
    let name = match name {
        Some(n) => n,
        // A C function keeps its name when it is tail-called; our Lua wrapper loses it, so fall back to the
        // library name in that case (level 2 is then the "(tail call)" pseudo-frame).
        None if lua.inspect_stack(2).is_some_and(|d| d.source().what == "tail") => canonical.to_string(),
        None => "?".to_string(),
    };
    format!("bad argument #{} to '{}' ({})", narg, name, msg)
}

/// Result lists longer than this travel from the callback to the trampoline in a table, because mlua needs
/// extra stack room to return values directly and would fail before Lua's own limit.
const PACK_RESULTS_ABOVE: usize = 200;

type Callback = dyn Fn(&Lua, Args) -> LibResult<MultiValue>;

/// The C function scripts actually call. It calls the Rust callback (upvalue 1), which returns `true, ...`
/// or `false, message`, and turns the latter into a plain Lua string error.
///
/// This has to be a C function rather than a Lua wrapper: Lua 5.1 forgets the caller's frame when a Lua
/// function is tail-called (`return cjson.decode(s)`), which would lose the `user_script:1:` prefix that
/// Redis reports. `unsafe` is unavoidable here because mlua offers no safe way to raise a non-userdata error
/// from Rust. No Rust value with a destructor is alive when `lua_error` unwinds out of this frame.
unsafe extern "C-unwind" fn trampoline(state: *mut ffi::lua_State) -> c_int {
    unsafe {
        let nargs = ffi::lua_gettop(state);
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
        ffi::lua_insert(state, 1);
        ffi::lua_call(state, nargs, ffi::LUA_MULTRET);
        finish(state)
    }
}

/// Like `trampoline`, but passes the arguments as `(count, {args...})` so that negative zero survives (mlua
/// converts `-0.0` arguments to the integer 0; reading them back from a table as floats keeps the sign).
unsafe extern "C-unwind" fn packed_trampoline(state: *mut ffi::lua_State) -> c_int {
    unsafe {
        let nargs = ffi::lua_gettop(state);
        ffi::lua_createtable(state, nargs, 0);
        ffi::lua_insert(state, 1);
        for i in (1..=nargs).rev() {
            ffi::lua_rawseti(state, 1, i.into());
        }
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
        ffi::lua_pushinteger(state, nargs as ffi::lua_Integer);
        ffi::lua_pushvalue(state, 1);
        ffi::lua_call(state, 2, ffi::LUA_MULTRET);
        ffi::lua_remove(state, 1);
        finish(state)
    }
}

unsafe fn finish(state: *mut ffi::lua_State) -> c_int {
    unsafe {
        if ffi::lua_type(state, 1) == ffi::LUA_TNUMBER {
            // Long result lists arrive as `(2, {results...}, n)`; see `PACK_RESULTS_ABOVE`.
            let n = ffi::lua_tointeger(state, 3) as c_int;
            ffi::lua_settop(state, 2);
            ffi::lua_replace(state, 1);
            if ffi::lua_checkstack(state, n) == 0 {
                ffi::lua_pushstring(state, c"stack overflow (too many results)".as_ptr());
                ffi::lua_error(state)
            }
            for i in 1..=n {
                ffi::lua_rawgeti(state, 1, i.into());
            }
            n
        } else if ffi::lua_toboolean(state, 1) != 0 {
            ffi::lua_remove(state, 1);
            ffi::lua_gettop(state)
        } else {
            ffi::lua_settop(state, 2);
            ffi::lua_error(state)
        }
    }
}

/// Wraps `raw` — a function that returns `true, results...` or `false, error` — in a C function
/// that returns the results or raises the error value as it is, a table included (what
/// `redis.call` raises). Being a C function, it keeps its caller's frame even when called as
/// `return f(...)`, so errors still name the script's line.
pub(crate) fn raising(lua: &Lua, raw: Function) -> mlua::Result<Function> {
    // SAFETY: the closure only pushes a C closure capturing the function already on the stack.
    unsafe { lua.exec_raw(raw, |state| ffi::lua_pushcclosure(state, trampoline, 1)) }
}

/// `raising` for functions called with many arguments (`redis.call('LPUSH', k, unpack(t))`
/// with thousands): `raw` receives `(count, {args...})`, one table instead of each argument on
/// the Rust side's stack, so it takes as many arguments as Lua itself allows.
pub(crate) fn raising_packed(lua: &Lua, raw: Function) -> mlua::Result<Function> {
    // SAFETY: as in `raising`.
    unsafe { lua.exec_raw(raw, |state| ffi::lua_pushcclosure(state, packed_trampoline, 1)) }
}

pub(crate) struct Builder;

impl Builder {
    pub(crate) fn new(_lua: &Lua) -> mlua::Result<Self> {
        Ok(Builder)
    }

    fn build(&self, lua: &Lua, name: &'static str, packed: bool, f: Box<Callback>) -> mlua::Result<Function> {
        let raw = lua.create_function(move |lua, mut args: MultiValue| {
            let vals: Vec<Value> = if packed {
                let n = match args.pop_front() {
                    Some(Value::Integer(n)) if n >= 0 => n as usize,
                    _ => 0,
                };
                match args.pop_front() {
                    Some(Value::Table(t)) => (1..=n)
                        .map(|i| {
                            let key = Value::Integer(i as i64);
                            let v = t.raw_get::<Value>(key.clone()).unwrap_or(Value::Nil);
                            exact_number(&t, &key, v)
                        })
                        .collect(),
                    _ => Vec::new(),
                }
            } else {
                args.into_iter().collect()
            };
            let mut out = MultiValue::new();
            match f(lua, Args { vals }) {
                Ok(vals) if vals.len() > PACK_RESULTS_ABOVE => {
                    let n = vals.len();
                    let t = lua.create_table_with_capacity(n, 0)?;
                    for (i, v) in vals.into_iter().enumerate() {
                        t.raw_set(i + 1, v)?;
                    }
                    out.push_back(Value::Integer(2));
                    out.push_back(Value::Table(t));
                    out.push_back(Value::Integer(n as i64));
                }
                Ok(vals) => {
                    out = vals;
                    out.push_front(Value::Boolean(true));
                }
                Err(e) => {
                    let msg = match e {
                        LibError::Located(m) => format!("{}{}", where_prefix(lua), m),
                        LibError::Arg(n, m) => {
                            format!("{}{}", where_prefix(lua), arg_error_message(lua, name, n, &m))
                        }
                        LibError::Plain(m) => m,
                    };
                    out.push_back(Value::Boolean(false));
                    out.push_back(Value::String(lua.create_string(msg)?));
                }
            }
            Ok(out)
        })?;
        if packed {
            raising_packed(lua, raw)
        } else {
            raising(lua, raw)
        }
    }

    /// Register `f` as `table[name]`.
    pub(crate) fn add<F>(&self, lua: &Lua, table: &Table, name: &'static str, f: F) -> mlua::Result<()>
    where
        F: Fn(&Lua, Args) -> LibResult<MultiValue> + 'static,
    {
        table.raw_set(name, self.build(lua, name, false, Box::new(f))?)
    }

    /// Like `add`, but arguments keep the sign of negative zero (slower: arguments travel in a table).
    pub(crate) fn add_packed<F>(&self, lua: &Lua, table: &Table, name: &'static str, f: F) -> mlua::Result<()>
    where
        F: Fn(&Lua, Args) -> LibResult<MultiValue> + 'static,
    {
        table.raw_set(name, self.build(lua, name, true, Box::new(f))?)
    }
}

/// Wrap one value as a return list.
pub(crate) fn ret1(v: Value) -> LibResult<MultiValue> {
    Ok(MultiValue::from_iter([v]))
}

/// Create the global tables `cjson`, `cmsgpack`, `bit` and `struct` (and `package.loaded` entries).
pub fn register_all(lua: &Lua) -> mlua::Result<()> {
    let builder = std::rc::Rc::new(Builder::new(lua)?);
    let libs = [
        ("cjson", cjson::create(lua, builder.clone())?),
        ("struct", luastruct::create(lua, &builder)?),
        ("cmsgpack", cmsgpack::create(lua, &builder)?),
        ("bit", bit::create(lua, &builder)?),
    ];
    let globals = lua.globals();
    let loaded = match globals.raw_get::<Value>("package")? {
        Value::Table(p) => match p.raw_get::<Value>("loaded")? {
            Value::Table(l) => Some(l),
            _ => None,
        },
        _ => None,
    };
    for (name, table) in libs {
        globals.raw_set(name, table.clone())?;
        if let Some(l) = &loaded {
            l.raw_set(name, table)?;
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod testutil {
    use mlua::Lua;

    /// Serialises Lua values the same way as the script used to collect expectations from redis-server.
    const PRELUDE: &str = r#"
local function S(v, d)
  d = d or 0
  local t = type(v)
  if t == 'string' then
    return '"' .. v:gsub('[^ -~]', function(c) return string.format('\\x%02x', c:byte()) end):gsub('"', '\\"') .. '"'
  elseif t == 'number' then
    return string.format('%.17g', v)
  elseif t == 'table' then
    if d > 20 then return '{...}' end
    local ks = {}
    for k, x in pairs(v) do ks[#ks + 1] = S(k, d + 1) .. '=' .. S(x, d + 1) end
    table.sort(ks)
    return '{' .. table.concat(ks, ',') .. '}'
  elseif t == 'userdata' and v == cjson.null then
    return 'null'
  else
    return t == 'nil' and 'nil' or (t == 'boolean' and tostring(v) or t)
  end
end
local function R(...)
  local n = select('#', ...)
  local out = {}
  for i = 1, n do out[i] = S((select(i, ...))) end
  return table.concat(out, ',')
end
local function H(s) return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end)) end
local function X(h) return (h:gsub('%x%x', function(x) return string.char(tonumber(x, 16)) end)) end
"#;

    pub(crate) fn new_lua() -> Lua {
        let lua = Lua::new();
        super::register_all(&lua).expect("register_all");
        lua
    }

    /// Run each `(body, expected)` case like the oracle script did: `R(pcall(function() <body> end))`.
    /// A body starting with `@` is used verbatim, otherwise it is an expression list to return.
    pub(crate) fn check_cases(cases: &'static [(&'static str, &'static str)]) {
        // Nesting cases recurse ~1000-4000 levels, which needs more than the 2 MiB test-thread stack in
        // unoptimised builds.
        std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn(move || run_cases(cases))
            .expect("spawn")
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e));
    }

    fn run_cases(cases: &[(&str, &str)]) {
        let lua = new_lua();
        let mut failures = Vec::new();
        for (case, expected) in cases {
            let body = match case.strip_prefix('@') {
                Some(b) => b.to_string(),
                None => format!("return {}", case),
            };
            // The oracle's script had the prelude on 27 lines before the test line; keep the same line
            // number so that error positions match.
            let pre = PRELUDE.trim_start();
            let pad = "\n".repeat(27usize.saturating_sub(pre.lines().count()));
            let src = format!("{}{}return R(pcall(function() {} end))", pre, pad, body);
            let got: String = match lua.load(&src).set_name("@user_script").eval() {
                Ok(s) => s,
                Err(e) => format!("LUA ERROR: {}", e),
            };
            if got != *expected {
                failures.push(format!("case: {}\n  expected: {}\n  got:      {}", case, expected, got));
            }
        }
        assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    }
}
