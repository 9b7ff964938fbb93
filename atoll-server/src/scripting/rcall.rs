//! `redis.call` and `redis.pcall` as C functions that work on the Lua stack directly.
//!
//! They are what a script spends its time in, so they skip mlua's callback machinery (a
//! `MultiValue` of registry references per call, a table to carry the arguments, an unwind
//! guard): the arguments are read off the stack into one reused buffer, the command runs,
//! and its reply is pushed as the Lua value Redis gives (the rules in `convert`'s notes).
//! The running script's context reaches them through a thread-local pointer that `install`
//! sets for exactly the length of a run.
//!
//! `unsafe` is the Lua C API's. One rule keeps it sound: `lua_error` (a `longjmp`) is called
//! only from the outermost frame, once every Rust value with a destructor is gone. The one
//! Lua call that could `longjmp` from deeper is a memory error while a value is pushed, and
//! then nothing is borrowed: the buffers are moved out of their thread-local while in use
//! (such an error would leak them, never leave a borrow held).

use super::convert::number_arg;
use super::RunCtx;
use crate::exec::Propagate;
use crate::protocol::value::{parse_reply, RespValue};
use crate::protocol::{Proto, Reply};
use mlua::ffi;
use smallvec::SmallVec;
use std::cell::{Cell, RefCell};
use std::ffi::c_int;

thread_local! {
    /// The `RefCell<RunCtx>` of the script running on this thread (null between runs).
    static RUN: Cell<*const ()> = const { Cell::new(std::ptr::null()) };
    /// The argument and reply buffers, reused from call to call.
    static SCRATCH: Cell<Option<Box<Scratch>>> = const { Cell::new(None) };
}

#[derive(Default)]
struct Scratch {
    args: Vec<u8>,
    spans: Vec<(usize, usize)>,
    out: Vec<u8>,
}

/// Makes `ctx` the running script's context until the guard drops.
pub(super) fn install(ctx: &RefCell<RunCtx>) -> Installed {
    Installed(RUN.replace(ctx as *const RefCell<RunCtx> as *const ()))
}

pub(super) struct Installed(*const ());

impl Drop for Installed {
    fn drop(&mut self) {
        RUN.set(self.0);
    }
}

/// Runs `f` with the running script's context, if a script is running on this thread.
pub(super) fn with_ctx<R>(f: impl FnOnce(&RefCell<RunCtx<'_, '_>>) -> R) -> Option<R> {
    let p = RUN.get();
    if p.is_null() {
        return None;
    }
    // SAFETY: `install` stored a pointer to a `RefCell<RunCtx>` that outlives the guard, and
    // the guard is alive for the whole run this callback is part of. The lifetimes are the
    // run's; nothing borrowed here escapes `f` (its result cannot name them).
    Some(f(unsafe { &*(p as *const RefCell<RunCtx<'_, '_>>) }))
}

/// `redis.call`: the reply, or the error raised.
pub(super) unsafe extern "C-unwind" fn redis_call(l: *mut ffi::lua_State) -> c_int {
    // SAFETY: called by Lua with a valid state; see the module's note on `lua_error`.
    unsafe {
        if call(l, true) {
            ffi::lua_error(l)
        } else {
            1
        }
    }
}

/// `redis.pcall`: the reply, or the error as a `{err=…}` table.
pub(super) unsafe extern "C-unwind" fn redis_pcall(l: *mut ffi::lua_State) -> c_int {
    // SAFETY: as `redis_call` (it never raises).
    unsafe {
        call(l, false);
        1
    }
}

/// Runs the command whose arguments are on the stack and pushes the result. True: the value
/// pushed is an error to raise (`raise` and the command failed).
unsafe fn call(l: *mut ffi::lua_State, raise: bool) -> bool {
    let mut s = SCRATCH.take().unwrap_or_default();
    let failed = unsafe { run(l, raise, &mut s) };
    SCRATCH.set(Some(s));
    failed
}

unsafe fn run(l: *mut ffi::lua_State, raise: bool, s: &mut Scratch) -> bool {
    let nargs = unsafe { ffi::lua_gettop(l) };
    // Under the debugger, while stepping, the command, its reply and errors are logged.
    let logged = super::ldb::stepping();
    if nargs == 0 {
        let msg = "Please specify at least one argument for this redis lib call";
        if logged {
            super::ldb::log_error(msg.as_bytes());
        }
        unsafe { push_error(l, msg, false) };
        return raise;
    }
    s.args.clear();
    s.spans.clear();
    for i in 1..=nargs {
        let from = s.args.len();
        // Numbers are formatted here, not by `lua_tolstring`, which would also turn the
        // stack slot itself into a string.
        match unsafe { ffi::lua_type(l, i) } {
            ffi::LUA_TNUMBER => number_arg(unsafe { ffi::lua_tonumber(l, i) }, &mut s.args),
            ffi::LUA_TSTRING => {
                let mut len = 0usize;
                let p = unsafe { ffi::lua_tolstring(l, i, &mut len) };
                // SAFETY: Lua's string of `len` bytes, alive while it is on the stack.
                s.args.extend_from_slice(unsafe { std::slice::from_raw_parts(p as *const u8, len) });
            }
            _ => {
                let msg = "Lua redis lib command arguments must be strings or integers";
                if logged {
                    super::ldb::log_error(msg.as_bytes());
                }
                unsafe { push_error(l, msg, false) };
                return raise;
            }
        }
        s.spans.push((from, s.args.len()));
    }
    // The arguments are copied: their stack room is the reply's (a call with thousands of
    // arguments leaves little else under Lua's C stack limit).
    unsafe { ffi::lua_settop(l, 0) };
    let argv: SmallVec<[&[u8]; 8]> = s.spans.iter().map(|&(a, b)| &s.args[a..b]).collect();
    s.out.clear();
    if logged {
        super::ldb::log_command(&argv);
    }
    let ran = with_ctx(|ctx| {
        let mut st = ctx.borrow_mut();
        let st = &mut *st;
        let mut out = Reply { buf: std::mem::take(&mut s.out), proto: st.client.proto };
        let logged = st.client.exec_effects.len();
        let r = crate::exec::call::script_call(st.srv, st.ws, st.client, &mut out, &argv, st.locks, st.read_only);
        match st.propagate {
            crate::scripting::REPL_ALL => {}
            0 => st.client.exec_effects.truncate(logged),
            only => {
                let to = if only == crate::scripting::REPL_AOF { Propagate::Aof } else { Propagate::Replicas };
                st.client.exec_effects[logged..].iter_mut().for_each(|e| e.to = to);
            }
        }
        s.out = out.buf;
        r.map(|()| st.client.proto == Proto::Resp3)
    });
    match ran {
        None => {
            unsafe { push_error(l, "redis.call can only be called from a running script", false) };
            raise
        }
        Some(Err(refusal)) => {
            let text = refusal.to_string();
            if logged {
                super::ldb::log_error(text.as_bytes());
            }
            unsafe { push_error(l, &text, true) };
            raise
        }
        Some(Ok(resp3)) => {
            if logged {
                super::ldb::log_reply(&s.out);
            }
            match parse_reply(&s.out) {
                Some((reply, _)) => {
                    unsafe { push_reply(l, &reply, resp3) };
                    raise && matches!(reply, RespValue::Error(_))
                }
                None => {
                    unsafe { push_error(l, "ERR internal error: unreadable reply", false) };
                    true
                }
            }
        }
    }
}

/// Pushes `{err="CODE message"}` as `vm::error_table` builds it; `not_counted`: the error was
/// already counted where it happened (Redis's `ignore_error_stats_update`).
unsafe fn push_error(l: *mut ffi::lua_State, text: &str, not_counted: bool) {
    let (code, msg) = match text.strip_prefix('-') {
        Some(rest) => rest.split_once(' ').unwrap_or(("ERR", rest)),
        None => ("ERR", text),
    };
    let msg = msg.trim_matches(|c| c == '\r' || c == '\n');
    let err = format!("{code} {msg}");
    unsafe {
        ffi::lua_createtable(l, 0, 2);
        push_bytes(l, b"err");
        push_bytes(l, err.as_bytes());
        ffi::lua_rawset(l, -3);
        if not_counted {
            push_bytes(l, b"ignore_error_stats_update");
            ffi::lua_pushboolean(l, 1);
            ffi::lua_rawset(l, -3);
        }
    }
}

unsafe fn push_bytes(l: *mut ffi::lua_State, b: &[u8]) {
    unsafe { ffi::lua_pushlstring(l, b.as_ptr() as *const _, b.len()) };
}

/// Pushes `{field=<what push_inner pushes>}`.
unsafe fn push_single(l: *mut ffi::lua_State, field: &[u8], push_inner: impl FnOnce()) {
    unsafe {
        ffi::lua_createtable(l, 0, 1);
        push_bytes(l, field);
        push_inner();
        ffi::lua_rawset(l, -3);
    }
}

/// Pushes a command's reply as the Lua value `redis.call` returns (the rules in `convert`'s
/// notes).
unsafe fn push_reply(l: *mut ffi::lua_State, v: &RespValue, resp3: bool) {
    unsafe {
        // A table under construction and a key/value pair at each level of nesting.
        if ffi::lua_checkstack(l, 4) == 0 {
            ffi::lua_pushnil(l);
            return;
        }
        match v {
            RespValue::Int(i) => ffi::lua_pushnumber(l, *i as f64),
            RespValue::Bulk(b) => push_bytes(l, b),
            RespValue::Simple(s) => push_single(l, b"ok", || push_bytes(l, s)),
            // Counted when the command replied it: Redis marks the table so that the
            // script's error reply, if it becomes one, is not counted again.
            RespValue::Error(e) => {
                push_single(l, b"err", || push_bytes(l, e));
                push_bytes(l, b"ignore_error_stats_update");
                ffi::lua_pushboolean(l, 1);
                ffi::lua_rawset(l, -3);
            }
            RespValue::Null if resp3 => ffi::lua_pushnil(l),
            RespValue::Null => ffi::lua_pushboolean(l, 0),
            RespValue::Array(items) => {
                ffi::lua_createtable(l, items.len().min(i32::MAX as usize) as c_int, 0);
                for (i, item) in items.iter().enumerate() {
                    push_reply(l, item, resp3);
                    ffi::lua_rawseti(l, -2, (i + 1) as _);
                }
            }
            RespValue::Map(pairs) => push_single(l, b"map", || {
                ffi::lua_createtable(l, 0, pairs.len().min(i32::MAX as usize) as c_int);
                for (k, v) in pairs {
                    push_reply(l, k, resp3);
                    push_reply(l, v, resp3);
                    set_field(l);
                }
            }),
            RespValue::Set(items) => push_single(l, b"set", || {
                ffi::lua_createtable(l, 0, items.len().min(i32::MAX as usize) as c_int);
                for item in items {
                    push_reply(l, item, resp3);
                    ffi::lua_pushboolean(l, 1);
                    set_field(l);
                }
            }),
            RespValue::Double(d) => push_single(l, b"double", || ffi::lua_pushnumber(l, *d)),
            RespValue::Bool(b) => ffi::lua_pushboolean(l, *b as c_int),
            RespValue::BigNumber(n) => push_single(l, b"big_number", || push_bytes(l, n)),
            RespValue::Verbatim(fmt, text) => push_single(l, b"verbatim_string", || {
                ffi::lua_createtable(l, 0, 2);
                push_bytes(l, b"format");
                push_bytes(l, fmt);
                ffi::lua_rawset(l, -3);
                push_bytes(l, b"string");
                push_bytes(l, text);
                ffi::lua_rawset(l, -3);
            }),
        }
    }
}

/// `t[k] = v` for the table under the key and value on top, skipping a nil or NaN key
/// (which `lua_rawset` would raise on: neither can be a Lua table key).
unsafe fn set_field(l: *mut ffi::lua_State) {
    unsafe {
        let t = ffi::lua_type(l, -2);
        if t == ffi::LUA_TNIL || (t == ffi::LUA_TNUMBER && ffi::lua_tonumber(l, -2).is_nan()) {
            ffi::lua_settop(l, -3);
        } else {
            ffi::lua_rawset(l, -3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlua::{Lua, Value};

    /// The reply pushed, as Lua's own code describes it.
    fn describe(v: &RespValue, resp3: bool) -> String {
        let lua = Lua::new();
        // SAFETY: pushes one value on the stack exec_raw hands over.
        let pushed: Value = unsafe { lua.exec_raw((), |l| push_reply(l, v, resp3)) }.unwrap();
        lua.globals().set("v", pushed).unwrap();
        lua.load(
            r#"
            local function d(x)
              if type(x) ~= "table" then return type(x) .. ":" .. tostring(x) end
              local keys = {}
              for k in pairs(x) do keys[#keys + 1] = tostring(k) end
              table.sort(keys)
              local parts = {}
              for _, k in ipairs(keys) do
                local val = x[k]
                if val == nil then val = x[tonumber(k)] end
                parts[#parts + 1] = k .. "=" .. d(val)
              end
              return "{" .. table.concat(parts, ",") .. "}"
            end
            return d(v)
            "#,
        )
        .eval()
        .unwrap()
    }

    #[test]
    fn replies_become_lua_values_as_in_redis() {
        let arr = RespValue::Array(vec![RespValue::Int(7), RespValue::Null, RespValue::Simple(b"OK")]);
        assert_eq!(describe(&arr, false), "{1=number:7,2=boolean:false,3={ok=string:OK}}");
        // RESP3's null is nil, which leaves a hole in the table.
        assert_eq!(describe(&arr, true), "{1=number:7,3={ok=string:OK}}");
        assert_eq!(
            describe(&RespValue::Error(b"ERR x"), false),
            "{err=string:ERR x,ignore_error_stats_update=boolean:true}"
        );
        assert_eq!(describe(&RespValue::Bulk(b"a\0b"), false), "string:a\0b");
        let map =
            RespValue::Map(vec![(RespValue::Bulk(b"f"), RespValue::Int(1)), (RespValue::Null, RespValue::Int(2))]);
        assert_eq!(describe(&map, true), "{map={f=number:1}}");
        let set = RespValue::Set(vec![RespValue::Bulk(b"m")]);
        assert_eq!(describe(&set, true), "{set={m=boolean:true}}");
        assert_eq!(describe(&RespValue::Double(1.5), true), "{double=number:1.5}");
        assert_eq!(describe(&RespValue::Bool(true), true), "boolean:true");
        assert_eq!(describe(&RespValue::BigNumber(b"123"), true), "{big_number=string:123}");
        assert_eq!(
            describe(&RespValue::Verbatim(b"txt", b"hi"), true),
            "{verbatim_string={format=string:txt,string=string:hi}}"
        );
    }
}
