//! One Lua 5.1 interpreter per worker thread, built as Redis builds its own: the base, table,
//! string and math libraries plus `cjson`, `cmsgpack`, `bit` and `struct`, the `redis` API
//! table, and a sandbox in which every global and library table is read-only.
//!
//! Redis makes tables read-only with a flag its patched Lua checks on every store. Stock Lua
//! 5.1 (what `mlua` vendors) has no such flag, so the sandbox gets the same behaviour from
//! proxies: a script's globals are an empty table whose metatable reads from a hidden table
//! and refuses every store ("Attempt to modify a readonly table"), each library table is such
//! a proxy too, and `rawset`/`setmetatable` refuse to touch a proxy. Reading a global that
//! does not exist is an error, as in Redis. `loadstring`/`load` give what they compile the
//! same globals and refuse precompiled bytecode (Redis's Lua only has the text parser).
//!
//! The interpreter is per thread because a Lua state is not `Send`; scripts are compiled into
//! it on first use from the shared cache (`services::scripts`). Runs on different workers are
//! serialized by the keyspace's script gate, so interpreters never run at the same time.

use super::libs;
use crate::exec::CmdError;
use crate::services::scripts::ScriptError;
use crate::services::scripts::{RunState, Script};
use mlua::{Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState};
use std::collections::HashMap;
use std::sync::Arc;

/// The chunk name of every script: errors read `user_script:LINE: …`, as Redis's do.
pub const CHUNK_NAME: &str = "@user_script";
/// The chunk name of every FUNCTION library.
pub const LIBRARY_CHUNK_NAME: &str = "@user_function";

/// The `redis.*` functions bound to the running script besides `call` and `pcall` (which are
/// C functions of their own, `rcall`).
#[derive(Clone, Copy)]
pub enum Entry {
    SetResp,
    SetRepl,
    AclCheckCmd,
}

/// A function a library registered while loading.
pub struct Registered {
    pub name: String,
    pub callback: Function,
    pub description: Option<Vec<u8>>,
    pub flags: u32,
}

/// The functions registered by the library loading now (`None`: no library is loading).
type Collector = std::rc::Rc<std::cell::RefCell<Option<Vec<Registered>>>>;

/// Globals a script sees (Redis's allow lists), besides the libraries.
const BUILTINS: &[&str] = &[
    "xpcall",
    "tostring",
    "getfenv",
    "next",
    "assert",
    "tonumber",
    "rawequal",
    "collectgarbage",
    "getmetatable",
    "pcall",
    "coroutine",
    "type",
    "select",
    "unpack",
    "gcinfo",
    "pairs",
    "rawget",
    "ipairs",
    "_VERSION",
    "setfenv",
    "error",
    "newproxy",
];

const LIBRARIES: &[&str] = &["string", "table", "math", "cjson", "bit", "cmsgpack", "struct"];

/// The sandbox, in Lua: it receives the real globals and the hidden table scripts read, and
/// fills the hidden table with read-only views.
const SANDBOX: &str = r#"
local G, B, builtins, libraries, redis_api, library_api = ...
local readonly = setmetatable({}, {__mode = "k"})
-- A read-only view's table, so pairs() and next() still walk what it shows.
local viewed = setmetatable({}, {__mode = "k"})
local real_setmetatable, real_rawset, real_setfenv = G.setmetatable, G.rawset, G.setfenv
local function refuse() error("Attempt to modify a readonly table", 2) end
local function protect(t)
  local meta = {__index = t, __newindex = refuse}
  local proxy = real_setmetatable({}, meta)
  readonly[proxy] = true
  viewed[proxy] = t
  local meta_view = real_setmetatable({}, {__index = meta, __newindex = refuse})
  readonly[meta_view] = true
  meta.__metatable = meta_view
  return proxy
end
for _, name in ipairs(builtins) do B[name] = G[name] end
for _, name in ipairs(libraries) do B[name] = protect(G[name]) end
B.redis = protect(redis_api)
-- Stores into a read-only table fail the same way through every door.
local function refuse_here() error("Attempt to modify a readonly table", 0) end
local real_next = G.next
B.next = function(t, k) return real_next(viewed[t] or t, k) end
B.pairs = function(t)
  if viewed[t] then return real_next, viewed[t], nil end
  return G.pairs(t)
end
B.rawset = function(t, k, v)
  if readonly[t] then refuse_here() end
  return real_rawset(t, k, v)
end
-- Redis's pcall hands back an error table's message (scripts written before 7.0 expect a
-- string from pcall(redis.call, ...)).
local real_pcall = G.pcall
local function pcall_result(ok, ...)
  if ok then return ok, ... end
  local e = ...
  if type(e) == "table" then
    local m = e.err
    if type(m) == "string" or type(m) == "number" then return false, m end
  end
  return false, e
end
B.pcall = function(...) return pcall_result(real_pcall(...)) end
B.setmetatable = function(t, m)
  if readonly[t] then refuse_here() end
  return real_setmetatable(t, m)
end
-- The globals: reads go to B (an error when missing), stores are refused.
local env_meta = {
  __index = function(_, k)
    local v = B[k]
    if v == nil then
      error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
    end
    return v
  end,
  __newindex = refuse,
}
local env = real_setmetatable({}, env_meta)
readonly[env] = true
local env_meta_view = real_setmetatable({}, {__index = env_meta, __newindex = refuse})
readonly[env_meta_view] = true
env_meta.__metatable = env_meta_view
B._G = env
-- FUNCTION libraries share one globals table. While a library loads, reads reach only the
-- library API (redis.register_function, redis.log …); afterwards, when its functions run,
-- the globals scripts see. Rust switches `fenv_meta.__index` between the two.
local function missing(_, k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end
real_setmetatable(library_api, {__index = missing})
local library_view = protect(library_api)
local load_index = function(_, k)
  if k == "redis" then return library_view end
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end
local fenv_meta = {__index = env_meta.__index, __newindex = refuse}
local fenv = real_setmetatable({}, fenv_meta)
readonly[fenv] = true
local fenv_meta_view = real_setmetatable({}, {__index = fenv_meta, __newindex = refuse})
readonly[fenv_meta_view] = true
fenv_meta.__metatable = fenv_meta_view
local function bind(f, a, b) return function() return f(a, b) end end
local real_loadstring, real_load = G.loadstring, G.load
B.loadstring = function(s, name)
  if type(s) == "string" and s:byte(1) == 27 then return nil, "binary chunks are not allowed" end
  local f, e = real_loadstring(s, name)
  if f then real_setfenv(f, env) end
  return f, e
end
B.load = function(reader, name)
  local parts = {}
  if type(reader) == "function" then
    while true do
      local piece = reader()
      if piece == nil or piece == "" then break end
      if type(piece) ~= "string" then return nil, "reader function must return a string" end
      parts[#parts + 1] = piece
    end
  end
  return B.loadstring(table.concat(parts), name)
end
return env, fenv, fenv_meta, load_index, env_meta.__index, bind
"#;

/// A Redis-style error table (`{err="CODE message"}`) from a reply error's text, as Redis's
/// `luaPushErrorBuff` builds it: `-CODE message` keeps its code, a bare message gets `ERR`.
pub fn error_table(lua: &Lua, text: &str) -> mlua::Result<Table> {
    let (code, msg) = match text.strip_prefix('-') {
        Some(rest) => match rest.split_once(' ') {
            Some((code, msg)) => (code.to_string(), msg.to_string()),
            None => ("ERR".to_string(), rest.to_string()),
        },
        None => ("ERR".to_string(), text.to_string()),
    };
    let msg = msg.trim_matches(|c| c == '\r' || c == '\n');
    let t = lua.create_table()?;
    t.raw_set("err", format!("{code} {msg}"))?;
    Ok(t)
}

/// The per-thread interpreter.
pub struct Vm {
    pub lua: Lua,
    /// `Scripts::generation` when it was built: SCRIPT FLUSH makes it stale.
    pub generation: u64,
    /// Compiled scripts by SHA.
    funcs: HashMap<[u8; 40], Function>,
    /// What scripts read as globals (KEYS and ARGV are set here per run).
    pub backing: Table,
    /// Their globals table (read-only), the environment of every compiled script.
    env: Table,
    /// `xpcall`, and the message handler that adds the failing line to an error.
    xpcall: Function,
    handler: Function,
    /// Runs since the last incremental GC step (Redis steps every 50 scripts).
    pub runs_since_gc: u32,
    /// FUNCTION libraries: their globals, the metatable whose `__index` switches between
    /// loading (`load_index`) and running (`run_index`), and `bind(f, a, b)`.
    fenv: Table,
    fenv_meta: Table,
    load_index: Value,
    run_index: Value,
    bind: Function,
    collector: Collector,
    /// `Functions::generation` the callbacks below were loaded at.
    pub functions_generation: Option<u64>,
    pub functions: HashMap<String, Function>,
}

/// A string as Lua 5.1 reads it as a number (`strtod`, or hex with `0x`).
fn lua_number(t: &str) -> Option<f64> {
    let (neg, body) = match t.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let v = match body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok()? as f64,
        None if body.chars().all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-')) => {
            body.parse::<f64>().ok()?
        }
        None => return None,
    };
    Some(if neg { -v } else { v })
}

impl Vm {
    pub fn new(generation: u64, run: &Arc<RunState>) -> mlua::Result<Vm> {
        let lua = Lua::new_with(StdLib::TABLE | StdLib::STRING | StdLib::MATH, LuaOptions::default())?;
        let g = lua.globals();
        libs::register_all(&lua)?;
        // math.random and math.randomseed over Redis's lrand48 stream (the same numbers on
        // every platform, one stream for all scripts).
        let math: Table = g.get("math")?;
        let r = run.clone();
        math.set(
            "random",
            lua.create_function(move |lua, args: MultiValue| {
                let x = r.next_rand() as f64 / i32::MAX as f64;
                let int = |v: &Value, n: usize| -> mlua::Result<f64> {
                    match v {
                        Value::Integer(i) => Ok(*i as f64),
                        Value::Number(f) => Ok(f.trunc()),
                        Value::String(s) => s
                            .to_str()
                            .ok()
                            .and_then(|s| s.trim().parse::<f64>().ok())
                            .map(f64::trunc)
                            .ok_or_else(|| bad_arg(n, "random", "number", v)),
                        _ => Err(bad_arg(n, "random", "number", v)),
                    }
                };
                let pick = || -> mlua::Result<f64> {
                    match args.len() {
                        0 => Ok(x),
                        1 => {
                            let u = int(&args[0], 1)?;
                            if u < 1.0 {
                                return Err(mlua::Error::RuntimeError(
                                    "bad argument #1 to 'random' (interval is empty)".into(),
                                ));
                            }
                            Ok((x * u).floor() + 1.0)
                        }
                        2 => {
                            let (l, u) = (int(&args[0], 1)?, int(&args[1], 2)?);
                            if l > u {
                                return Err(mlua::Error::RuntimeError(
                                    "bad argument #2 to 'random' (interval is empty)".into(),
                                ));
                            }
                            Ok((x * (u - l + 1.0)).floor() + l)
                        }
                        _ => Err(mlua::Error::RuntimeError("wrong number of arguments".into())),
                    }
                };
                pick().map_err(|e| located(lua, e))
            })?,
        )?;
        let r = run.clone();
        math.set(
            "randomseed",
            lua.create_function(move |lua, seed: Value| {
                // luaL_checkint: a number, or a string Lua reads as one (ARGV's are strings).
                let s = match seed {
                    Value::Integer(i) => i as i32,
                    Value::Number(f) => f as i64 as i32,
                    Value::String(ref t) => match t.to_str().ok().and_then(|t| lua_number(t.trim())) {
                        Some(f) => f as i64 as i32,
                        None => return Err(located(lua, bad_arg(1, "randomseed", "number", &seed))),
                    },
                    ref v => return Err(located(lua, bad_arg(1, "randomseed", "number", v))),
                };
                r.seed_rand(s);
                Ok(())
            })?,
        )?;

        // The redis table; the run-bound functions find the running script through `rcall`.
        let redis = lua.create_table()?;
        redis.set("REDIS_VERSION", crate::REDIS_VERSION)?;
        redis.set("REDIS_VERSION_NUM", version_num(crate::REDIS_VERSION))?;
        for (name, level) in [("LOG_DEBUG", 0), ("LOG_VERBOSE", 1), ("LOG_NOTICE", 2), ("LOG_WARNING", 3)] {
            redis.set(name, level)?;
        }
        for (name, v) in [("REPL_NONE", 0), ("REPL_AOF", 1), ("REPL_SLAVE", 2), ("REPL_REPLICA", 2), ("REPL_ALL", 3)] {
            redis.set(name, v)?;
        }
        let sha1hex = lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return Ok((false, Value::Table(error_table(lua, "wrong number of arguments")?)));
            }
            let bytes = match &args[0] {
                Value::String(s) => s.as_bytes().to_vec(),
                Value::Integer(i) => i.to_string().into_bytes(),
                Value::Number(n) => libs::lua_number_text(*n).into_bytes(),
                _ => Vec::new(),
            };
            Ok((true, Value::String(lua.create_string(crate::services::scripts::sha1_hex(&bytes))?)))
        })?;
        redis.set("sha1hex", libs::raising(&lua, sha1hex)?)?;
        redis.set(
            "error_reply",
            lua.create_function(|lua, args: MultiValue| match (args.len(), args.front()) {
                (1, Some(Value::String(s))) => {
                    let s = s.to_string_lossy();
                    let text = if s.starts_with('-') { s.to_string() } else { format!("-{s}") };
                    error_table(lua, &text)
                }
                _ => error_table(lua, "wrong number or type of arguments"),
            })?,
        )?;
        redis.set(
            "status_reply",
            lua.create_function(|lua, args: MultiValue| match (args.len(), args.front()) {
                (1, Some(Value::String(s))) => {
                    let t = lua.create_table()?;
                    t.raw_set("ok", s.clone())?;
                    Ok(t)
                }
                _ => error_table(lua, "wrong number or type of arguments"),
            })?,
        )?;
        redis.set("replicate_commands", lua.create_function(|_, ()| Ok(true))?)?;
        redis.set("breakpoint", lua.create_function(|_, ()| Ok(super::ldb::breakpoint()))?)?;
        redis.set(
            "debug",
            lua.create_function(|_, args: MultiValue| {
                super::ldb::debug(&args.into_iter().collect::<Vec<_>>());
                Ok(())
            })?,
        )?;
        redis.set("log", libs::raising(&lua, lua.create_function(redis_log)?)?)?;
        // SAFETY: plain C functions of the Lua API (see `rcall`).
        unsafe {
            redis.set("call", lua.create_c_function(super::rcall::redis_call)?)?;
            redis.set("pcall", lua.create_c_function(super::rcall::redis_pcall)?)?;
        }
        for (name, entry) in
            [("setresp", Entry::SetResp), ("set_repl", Entry::SetRepl), ("acl_check_cmd", Entry::AclCheckCmd)]
        {
            // Arguments arrive packed in a table (`raising_packed`): scripts pass thousands.
            let f = lua.create_function(move |lua, (n, t): (i64, Table)| {
                let args: Vec<Value> = (1..=n).map(|i| t.raw_get(i)).collect::<mlua::Result<_>>()?;
                super::run_entry(lua, entry, args)
            })?;
            redis.set(name, libs::raising_packed(&lua, f)?)?;
        }

        // The API a FUNCTION library sees while it loads.
        let collector: Collector = Default::default();
        let library_api = lua.create_table()?;
        let c = collector.clone();
        library_api.set(
            "register_function",
            libs::raising(&lua, lua.create_function(move |lua, args: MultiValue| register_function(lua, args, &c))?)?,
        )?;
        for k in ["log", "LOG_DEBUG", "LOG_VERBOSE", "LOG_NOTICE", "LOG_WARNING", "REDIS_VERSION", "REDIS_VERSION_NUM"]
        {
            library_api.set(k, redis.get::<Value>(k)?)?;
        }

        // The sandbox.
        let backing = lua.create_table()?;
        let list = |names: &[&str]| lua.create_sequence_from(names.iter().copied());
        let (env, fenv, fenv_meta, load_index, run_index, bind): (Table, Table, Table, Value, Value, Function) = lua
            .load(SANDBOX)
            .set_name("=sandbox")
            .call((g.clone(), backing.clone(), list(BUILTINS)?, list(LIBRARIES)?, redis.clone(), library_api))?;
        let xpcall: Function = g.get("xpcall")?;
        let handler = lua.create_function(error_handler)?;
        Ok(Vm {
            lua,
            generation,
            funcs: HashMap::new(),
            backing,
            env,
            xpcall,
            handler,
            runs_since_gc: 0,
            fenv,
            fenv_meta,
            load_index,
            run_index,
            bind,
            collector,
            functions_generation: None,
            functions: HashMap::new(),
        })
    }

    /// Compiles `body` (its Lua code after the shebang) unless it already is. `Err` is the
    /// compiler's message (`user_script:1: …`).
    pub fn compile(&mut self, script: &Script) -> Result<Function, ScriptError> {
        if let Some(f) = self.funcs.get(&script.sha) {
            return Ok(f.clone());
        }
        let code = &script.body[script.shebang_len..];
        let f = self
            .lua
            .load(code)
            .set_name(CHUNK_NAME)
            .set_mode(mlua::ChunkMode::Text)
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| {
                ScriptError::Compile(match e {
                    mlua::Error::SyntaxError { message, .. } => message,
                    e => e.to_string(),
                })
            })?;
        self.funcs.insert(script.sha, f.clone());
        Ok(f)
    }

    /// Loads a FUNCTION library's code (after its shebang) and returns what it registered;
    /// `Err` is Redis's reply. The code runs with only the library API in sight, and at
    /// most 500 ms (Redis's load timeout).
    pub fn load_library(&self, code: &[u8]) -> Result<Vec<Registered>, CmdError> {
        let f = self
            .lua
            .load(code)
            .set_name(LIBRARY_CHUNK_NAME)
            .set_mode(mlua::ChunkMode::Text)
            .set_environment(self.fenv.clone())
            .into_function()
            .map_err(|e| match e {
                mlua::Error::SyntaxError { message, .. } => {
                    CmdError::msg(format!("ERR Error compiling function: {message}"))
                }
                e => CmdError::msg(format!("ERR Error compiling function: {e}")),
            })?;
        *self.collector.borrow_mut() = Some(Vec::new());
        self.fenv_meta.raw_set("__index", self.load_index.clone()).expect("table set");
        let started = std::time::Instant::now();
        self.lua.set_hook(HookTriggers::new().every_nth_instruction(100_000), move |_, _| {
            if started.elapsed() > std::time::Duration::from_millis(500) {
                return Err(mlua::Error::RuntimeError("FUNCTION LOAD timeout".into()));
            }
            Ok(VmState::Continue)
        });
        let out = self.xpcall.call::<MultiValue>((f, self.handler.clone()));
        self.lua.remove_hook();
        self.fenv_meta.raw_set("__index", self.run_index.clone()).expect("table set");
        let registered = self.collector.borrow_mut().take().unwrap_or_default();
        match out {
            Ok(vals) if matches!(vals.front(), Some(Value::Boolean(true))) => {}
            Ok(vals) => {
                let msg = match vals.get(1) {
                    Some(Value::Table(t)) => t.raw_get::<String>("err").unwrap_or_default(),
                    Some(Value::String(s)) => s.to_string_lossy(),
                    _ => "unknown error".into(),
                };
                return Err(CmdError::msg(format!("ERR Error registering functions: {msg}")));
            }
            Err(e) => return Err(CmdError::msg(format!("ERR Error registering functions: {e}"))),
        }
        if registered.is_empty() {
            return Err(CmdError::msg("ERR No functions registered"));
        }
        Ok(registered)
    }

    /// `f(a, b)` as a function of no arguments (xpcall in Lua 5.1 passes none).
    pub fn bind(&self, f: &Function, a: Table, b: Table) -> mlua::Result<Function> {
        self.bind.call((f.clone(), a, b))
    }

    /// Runs a compiled script with the message handler in place: `Ok` is its return value,
    /// `Err` the error value the handler built (a table with `err`, `source`, `line`).
    pub fn run(&self, f: &Function, run: &Arc<RunState>) -> Result<Value, Value> {
        // Lua's `<` on strings calls strcoll: this thread follows `locale-collate`.
        crate::collate::enter();
        if super::ldb::active() {
            // Under the debugger: its hook on every line (and every 100,000 instructions,
            // for a loop that never stops), in place of the busy check — Redis's too.
            super::ldb::attach(self.env.clone(), self.backing.clone());
            self.lua.set_hook(HookTriggers::new().every_line().every_nth_instruction(100_000), |lua, d| {
                super::ldb::hook(lua, &d)
            });
        } else if run.busy_threshold_ms() > 0 {
            let r = run.clone();
            self.lua.set_hook(HookTriggers::new().every_nth_instruction(100_000), move |lua, _| {
                let mut killed = r.check_busy();
                if !killed && r.busy.load(std::sync::atomic::Ordering::Relaxed) {
                    // This worker's other clients are answered meanwhile (`-BUSY`, or SCRIPT
                    // KILL and the few commands Redis runs during a busy script).
                    crate::services::scripts::poll_while_busy();
                    killed = r.check_busy();
                }
                if killed {
                    // From now on fire on every line (a loop's jump back counts), as Redis's
                    // hook does, so a pcall cannot swallow the kill and go on.
                    lua.set_hook(HookTriggers::new().every_line(), |_, _| {
                        Err(mlua::Error::RuntimeError("ERR Script killed by user with SCRIPT KILL...".into()))
                    });
                    return Err(mlua::Error::RuntimeError("ERR Script killed by user with SCRIPT KILL...".into()));
                }
                Ok(VmState::Continue)
            });
        }
        let out = self.xpcall.call::<MultiValue>((f.clone(), self.handler.clone()));
        self.lua.remove_hook();
        match out {
            Ok(mut vals) => {
                let ok = matches!(vals.pop_front(), Some(Value::Boolean(true)));
                let v = vals.pop_front().unwrap_or(Value::Nil);
                if ok {
                    Ok(v)
                } else {
                    Err(v)
                }
            }
            Err(e) => Err(Value::String(self.lua.create_string(format!("ERR {e}")).expect("string"))),
        }
    }
}

/// `redis.register_function(name, callback)` or `redis.register_function{function_name=…,
/// callback=…, flags={…}, description=…}`, while a library loads: `true`, or `false` and an
/// error table with Redis's text.
fn register_function(lua: &Lua, args: MultiValue, collector: &Collector) -> mlua::Result<(bool, Value)> {
    let fail = |msg: &str| Ok((false, Value::Table(error_table(lua, msg)?)));
    let mut col = collector.borrow_mut();
    let Some(list) = col.as_mut() else {
        return fail("redis.register_function can only be called on FUNCTION LOAD command");
    };
    let (name, callback, description, flags) = match args.len() {
        1 => {
            let Value::Table(t) = &args[0] else {
                return fail("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).");
            };
            let (mut name, mut callback, mut description, mut flags) = (None, None, None, 0u32);
            for pair in t.clone().pairs::<Value, Value>() {
                let (k, v) = pair?;
                let key = match &k {
                    Value::String(s) => s.to_string_lossy(),
                    Value::Integer(i) => i.to_string(),
                    Value::Number(n) => libs::lua_number_text(*n),
                    _ => return fail("named argument key given to redis.register_function is not a string"),
                };
                match key.to_ascii_lowercase().as_str() {
                    "function_name" => match v {
                        Value::String(s) => name = Some(s.to_string_lossy()),
                        Value::Integer(i) => name = Some(i.to_string()),
                        Value::Number(n) => name = Some(libs::lua_number_text(n)),
                        _ => return fail("function_name argument given to redis.register_function must be a string"),
                    },
                    "description" => match v {
                        Value::String(s) => description = Some(s.as_bytes().to_vec()),
                        _ => return fail("description argument given to redis.register_function must be a string"),
                    },
                    "callback" => match v {
                        Value::Function(f) => callback = Some(f),
                        _ => return fail("callback argument given to redis.register_function must be a function"),
                    },
                    "flags" => {
                        let Value::Table(ft) = v else {
                            return fail(
                                "flags argument to redis.register_function must be a table representing function flags",
                            );
                        };
                        for i in 1.. {
                            let f: Value = ft.raw_get(i)?;
                            let s = match f {
                                Value::Nil => break,
                                Value::String(s) => s.to_string_lossy(),
                                _ => return fail("unknown flag given"),
                            };
                            match crate::services::scripts::sflags::NAMES
                                .iter()
                                .find(|(n, _)| n.eq_ignore_ascii_case(&s))
                            {
                                Some((_, bit)) => flags |= bit,
                                None => return fail("unknown flag given"),
                            }
                        }
                    }
                    _ => return fail("unknown argument given to redis.register_function"),
                }
            }
            let Some(name) = name else {
                return fail("redis.register_function must get a function name argument");
            };
            let Some(callback) = callback else {
                return fail("redis.register_function must get a callback argument");
            };
            (name, callback, description, flags)
        }
        2 => {
            let name = match &args[0] {
                Value::String(s) => s.to_string_lossy(),
                Value::Integer(i) => i.to_string(),
                Value::Number(n) => libs::lua_number_text(*n),
                _ => return fail("first argument to redis.register_function must be a string"),
            };
            let Value::Function(f) = &args[1] else {
                return fail("second argument to redis.register_function must be a function");
            };
            (name, f.clone(), None, 0)
        }
        _ => return fail("wrong number of arguments to redis.register_function"),
    };
    if !crate::services::scripts::valid_name(&name) {
        return fail("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long");
    }
    if list.iter().any(|r| r.name.eq_ignore_ascii_case(&name)) {
        return fail("Function already exists in the library");
    }
    list.push(Registered { name, callback, description, flags });
    Ok((true, Value::Nil))
}

/// `redis.log(level, ...)`: `true`, or `false` and an error table.
fn redis_log(lua: &Lua, args: MultiValue) -> mlua::Result<(bool, Value)> {
    let fail = |msg: &str| Ok((false, Value::Table(error_table(lua, msg)?)));
    if args.len() < 2 {
        return fail("redis.log() requires two arguments or more.");
    }
    let Some(level) = lua.coerce_number(args[0].clone())? else {
        return fail("First argument must be a number (log level).");
    };
    let level = level as i64;
    if !(0..=3).contains(&level) {
        return fail("Invalid debug level.");
    }
    let mut msg = String::new();
    for (i, a) in args.iter().skip(1).enumerate() {
        let s = match a {
            Value::String(s) => s.to_string_lossy(),
            Value::Integer(n) => n.to_string(),
            Value::Number(n) => libs::lua_number_text(*n),
            _ => continue,
        };
        if i > 0 {
            msg.push(' ');
        }
        msg.push_str(&s);
    }
    crate::log::log(level as u32, &msg);
    Ok((true, Value::Nil))
}

/// `bad argument #n to 'f' (number expected, got nil)`, Lua's own wording.
/// An error a library function raises, as Lua's luaL_error and luaL_argerror write it: after
/// the place in the script that called the function (`user_script:3: `, luaL_where).
fn located(lua: &Lua, e: mlua::Error) -> mlua::Error {
    match e {
        mlua::Error::RuntimeError(m) => {
            let place = lua.inspect_stack(1).and_then(|d| {
                let line = d.curr_line();
                let src = d.source().short_src.map(|s| s.into_owned());
                src.filter(|_| line > 0).map(|s| format!("{s}:{line}: "))
            });
            mlua::Error::RuntimeError(format!("{}{m}", place.unwrap_or_default()))
        }
        e => e,
    }
}

fn bad_arg(n: usize, f: &str, want: &str, got: &Value) -> mlua::Error {
    let got = match got {
        Value::Nil => "no value",
        v => v.type_name(),
    };
    mlua::Error::RuntimeError(format!("bad argument #{n} to '{f}' ({want} expected, got {got})"))
}

/// `7.2.4` → 0x070204.
fn version_num(v: &str) -> i64 {
    v.split('.').take(3).fold(0i64, |acc, p| (acc << 8) | p.parse::<i64>().unwrap_or(0))
}

/// The message handler every script runs under (Redis's `__redis__err__handler`): a string
/// error becomes `{err="ERR <text>"}`, and the source and line of the innermost frame of
/// the user's script are added, for the ` script: …, on @user_script:N.` suffix.
fn error_handler(lua: &Lua, err: Value) -> mlua::Result<Value> {
    let t = match err {
        Value::Table(t) => t,
        Value::String(s) => error_table(lua, &s.to_string_lossy())?,
        Value::Error(e) => {
            // A Rust error raised by a callback (the kill hook, a library): its own words.
            let mut inner: &mlua::Error = &e;
            while let mlua::Error::CallbackError { cause, .. } = inner {
                inner = cause;
            }
            let text = match inner {
                mlua::Error::RuntimeError(m) => m.clone(),
                other => other.to_string(),
            };
            let t = lua.create_table()?;
            let text = if text.starts_with("ERR ") { text } else { format!("ERR {text}") };
            t.raw_set("err", text)?;
            t
        }
        other => {
            let t = lua.create_table()?;
            t.raw_set("err", format!("ERR {}", lua_value_text(&other)))?;
            t
        }
    };
    for level in 1..64 {
        let Some(d) = lua.inspect_stack(level) else { break };
        let src = d.source();
        if src.what == "C" {
            continue;
        }
        if let Some(s) = src.source.as_deref() {
            if s == CHUNK_NAME || s == LIBRARY_CHUNK_NAME {
                t.raw_set("source", s)?;
                t.raw_set("line", d.curr_line())?;
                break;
            }
        }
    }
    Ok(Value::Table(t))
}

/// `tostring` of a value that is not a string or a table, for error texts.
fn lua_value_text(v: &Value) -> String {
    match v {
        Value::Nil => "nil".into(),
        Value::Boolean(b) => b.to_string(),
        Value::Integer(i) => i.to_string(),
        Value::Number(n) => libs::lua_number_text(*n),
        v => v.type_name().to_string(),
    }
}

thread_local! {
    static VM: std::cell::RefCell<Option<Vm>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` with this thread's interpreter, (re)building it when missing or older than the
/// last SCRIPT FLUSH.
pub fn with_vm<R>(generation: u64, run: &Arc<RunState>, f: impl FnOnce(&mut Vm) -> R) -> R {
    VM.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.as_ref().is_none_or(|vm| vm.generation != generation) {
            *slot = None;
            *slot = Some(Vm::new(generation, run).expect("the Lua interpreter builds"));
        }
        f(slot.as_mut().expect("built above"))
    })
}

/// Drops this thread's interpreter if a SCRIPT FLUSH made it stale, so that its memory is
/// given back now rather than at this thread's next script. True if one was dropped.
pub fn drop_stale(generation: u64) -> bool {
    VM.with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else { return false };
        let stale = slot.as_ref().is_some_and(|vm| vm.generation != generation);
        if stale {
            *slot = None;
        }
        stale
    })
}

/// The Lua memory of this thread's interpreter (INFO `used_memory_lua`).
pub fn memory_used() -> usize {
    VM.with(|cell| cell.borrow().as_ref().map_or(0, |vm| vm.lua.used_memory()))
}
