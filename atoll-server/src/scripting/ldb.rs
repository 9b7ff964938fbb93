//! The Lua debugger (Redis's LDB): after SCRIPT DEBUG SYNC, a client's EVAL stops before the
//! script's first line and waits for the client's commands — step, continue, breakpoints,
//! listing, printing variables, evaluating Lua, running Redis commands — each answered with
//! an array of status lines. When the script ends the client gets `<endsession>`, then the
//! EVAL's reply, and the connection closes.
//!
//! The session runs on a thread of its own holding the client's connection
//! (`server::debugging`): the line hook reads and writes that connection directly, as
//! Redis's does, so no worker waits for a person at a keyboard. What the script locked stays
//! locked meanwhile — Redis's synchronous mode blocks its whole server; here the commands
//! that need what the script holds wait, and the rest go on.
//!
//! Texts, the command parser (with its limits: 1,024 arguments of at most 1,024 bytes, a 1 MB
//! input buffer) and the value and reply renderings follow Redis 7.2's; the differential test
//! `tests/scripting.rs` (`the_debugger_answers_as_redis_does`) holds them to the real server.

use crate::exec::client::DebugWire;
use crate::protocol::cat_repr;
use mlua::{Lua, Table, Value, VmState};
use std::cell::RefCell;
use std::time::Instant;

const MAX_BREAKPOINTS: usize = 64;
const MAXLEN_DEFAULT: usize = 256;
/// Nesting shown of a table inside a table (Redis's LUA_MINSTACK / 2).
const MAX_DEPTH: usize = 10;
/// A client that sends this much without completing a command ends the script.
const MAX_INPUT: usize = 1 << 20;

const HELP: &[&str] = &[
    "Redis Lua debugger help:",
    "[h]elp               Show this help.",
    "[s]tep               Run current line and stop again.",
    "[n]ext               Alias for step.",
    "[c]ontinue           Run till next breakpoint.",
    "[l]ist               List source code around current line.",
    "[l]ist [line]        List source code around [line].",
    "                     line = 0 means: current position.",
    "[l]ist [line] [ctx]  In this form [ctx] specifies how many lines",
    "                     to show before/after [line].",
    "[w]hole              List all source code. Alias for 'list 1 1000000'.",
    "[p]rint              Show all the local variables.",
    "[p]rint <var>        Show the value of the specified variable.",
    "                     Can also show global vars KEYS and ARGV.",
    "[b]reak              Show all breakpoints.",
    "[b]reak <line>       Add a breakpoint to the specified line.",
    "[b]reak -<line>      Remove breakpoint from the specified line.",
    "[b]reak 0            Remove all breakpoints.",
    "[t]race              Show a backtrace.",
    "[e]val <code>        Execute some Lua code (in a different callframe).",
    "[r]edis <cmd>        Execute a Redis command.",
    "[m]axlen [len]       Trim logged Redis replies and Lua var dumps to len.",
    "                     Specifying zero as <len> means unlimited.",
    "[a]bort              Stop the execution of the script. In sync",
    "                     mode dataset changes will be retained.",
    "",
    "Debugger functions you can call from Lua scripts:",
    "redis.debug()        Produce logs in the debugger console.",
    "redis.breakpoint()   Stop execution like if there was a breakpoint in the",
    "                     next line of code.",
];

/// One debugging session: the thread's only one, for the length of one EVAL.
struct Session {
    wire: Box<dyn DebugWire>,
    /// Bytes of the client's next command.
    input: Vec<u8>,
    logs: Vec<Vec<u8>>,
    /// Stop at the next line whatever the breakpoints say.
    step: bool,
    /// `redis.breakpoint()` was called: stop at the next line.
    luabp: bool,
    breakpoints: Vec<i32>,
    /// The script's source, line by line (the body EVAL received, shebang included).
    src: Vec<Vec<u8>>,
    line: i32,
    /// Replies and values longer than this are cut in the logs (0: never).
    maxlen: usize,
    hint_sent: bool,
    /// Since the script started or last stopped (the infinite-loop stop).
    since: Instant,
    timeout_ms: u128,
    /// The script's globals (its environment) and where KEYS and ARGV live.
    env: Option<Table>,
    backing: Option<Table>,
}

thread_local! {
    static LDB: RefCell<Option<Session>> = const { RefCell::new(None) };
}

fn with<R>(f: impl FnOnce(&mut Session) -> R) -> Option<R> {
    LDB.with(|c| c.borrow_mut().as_mut().map(f))
}

fn rt(msg: &str) -> mlua::Error {
    mlua::Error::RuntimeError(msg.to_string())
}

/// Starts a session for the EVAL of `body` on this thread. `threshold_ms`: busy-reply-threshold
/// (a script running that long without a stop stops, "infinite loop?"; 5 s when 0).
pub fn begin(wire: Box<dyn DebugWire>, body: &[u8], threshold_ms: i64) {
    let mut end = body.len();
    while end > 0 && matches!(body[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    let src = if end == 0 { Vec::new() } else { body[..end].split(|&b| b == b'\n').map(|l| l.to_vec()).collect() };
    let session = Session {
        wire,
        input: Vec::new(),
        logs: Vec::new(),
        step: true,
        luabp: false,
        breakpoints: Vec::new(),
        src,
        line: 0,
        maxlen: MAXLEN_DEFAULT,
        hint_sent: false,
        since: Instant::now(),
        timeout_ms: if threshold_ms > 0 { threshold_ms as u128 } else { 5000 },
        env: None,
        backing: None,
    };
    LDB.with(|c| *c.borrow_mut() = Some(session));
}

/// Ends the session: the logs left and `<endsession>` go out; the connection is handed back
/// for the EVAL's reply.
pub fn end() -> Option<Box<dyn DebugWire>> {
    with(|s| {
        s.log(b"<endsession>".to_vec());
        s.send_logs();
    });
    LDB.with(|c| c.borrow_mut().take()).map(|s| s.wire)
}

/// A session runs on this thread.
pub fn active() -> bool {
    LDB.with(|c| c.borrow().is_some())
}

/// The interpreter's tables the session reads: the script's globals and KEYS/ARGV's home.
pub fn attach(env: Table, backing: Table) {
    with(|s| {
        s.env = Some(env);
        s.backing = Some(backing);
    });
}

/// Redis's `ldbIsEnabled`: stepping, so `redis.call` logs its command and reply.
pub fn stepping() -> bool {
    LDB.with(|c| c.try_borrow().ok().and_then(|s| s.as_ref().map(|s| s.step)).unwrap_or(false))
}

/// `redis.call` is about to run `argv` (logged while stepping).
pub fn log_command(argv: &[&[u8]]) {
    with(|s| {
        let mut line = b"<redis>".to_vec();
        for (j, a) in argv.iter().enumerate() {
            if j == 10 {
                // Redis's count (one short of what it leaves out).
                line.extend_from_slice(format!(" ... ({} more)", argv.len() - j - 1).as_bytes());
                break;
            }
            line.push(b' ');
            line.extend_from_slice(a);
        }
        s.log(line);
    });
}

/// An error `redis.call` raises or returns (logged while stepping).
pub fn log_error(text: &[u8]) {
    with(|s| {
        let mut line = b"<error> ".to_vec();
        line.extend_from_slice(text);
        s.log(line);
    });
}

/// A command's reply as `redis.call` got it (RESP), errors inside it first.
pub fn log_reply(reply: &[u8]) {
    with(|s| {
        let mut errors = Vec::new();
        collect_errors(reply, 0, &mut errors);
        for e in errors {
            let mut line = b"<error> ".to_vec();
            line.extend_from_slice(e);
            s.log(line);
        }
        let mut line = b"<reply> ".to_vec();
        human(reply, 0, &mut line);
        s.log_maxlen(line);
    });
}

/// `redis.breakpoint()`: true (and a stop at the next line) during a session.
pub fn breakpoint() -> bool {
    with(|s| s.luabp = true).is_some()
}

/// `redis.debug(...)`: the values, logged with the current line.
pub fn debug(values: &[Value]) {
    if !active() {
        return;
    }
    let line = with(|s| s.line).unwrap_or(0);
    let mut text = format!("<debug> line {line}: ").into_bytes();
    for (i, v) in values.iter().enumerate() {
        cat_value(&mut text, v, 0);
        if i + 1 < values.len() {
            text.extend_from_slice(b", ");
        }
    }
    with(|s| s.log(text));
}

impl Session {
    fn log(&mut self, entry: Vec<u8>) {
        self.logs.push(entry);
    }

    /// Logs `entry` cut to `maxlen`, with a hint the first time a cut is made.
    fn log_maxlen(&mut self, mut entry: Vec<u8>) {
        let cut = self.maxlen > 0 && entry.len() > self.maxlen;
        if cut {
            entry.truncate(self.maxlen);
            entry.extend_from_slice(b" ...");
        }
        self.log(entry);
        if cut && !self.hint_sent {
            self.hint_sent = true;
            self.log(b"<hint> The above reply was trimmed. Use 'maxlen 0' to disable trimming.".to_vec());
        }
    }

    /// The logs as one array of status lines (line breaks inside become spaces).
    fn send_logs(&mut self) {
        let mut out = format!("*{}\r\n", self.logs.len()).into_bytes();
        for mut l in self.logs.drain(..) {
            for b in l.iter_mut() {
                if *b == b'\r' || *b == b'\n' {
                    *b = b' ';
                }
            }
            out.push(b'+');
            out.extend_from_slice(&l);
            out.extend_from_slice(b"\r\n");
        }
        // A failed write shows at the next read, which ends the session.
        let _ = self.wire.write(&out);
    }

    fn source_line(&self, n: i32) -> &[u8] {
        match usize::try_from(n - 1).ok().and_then(|i| self.src.get(i)) {
            Some(l) => l,
            None => b"<out of range source code line>",
        }
    }

    fn log_source_line(&mut self, n: i32) {
        let prefix = match (self.line == n, self.breakpoints.contains(&n)) {
            (true, true) => "->#",
            (true, false) => "-> ",
            (false, true) => "  #",
            (false, false) => "   ",
        };
        let mut l = format!("{prefix}{n:<3} ").into_bytes();
        l.extend_from_slice(self.source_line(n));
        self.log(l);
    }

    fn list(&mut self, around: i32, context: i32) {
        for j in 1..=self.src.len() as i32 {
            if around != 0 && (around - j).abs() > context {
                continue;
            }
            self.log_source_line(j);
        }
    }

    /// The next command the client sends (None: it has gone). The whole input buffer goes
    /// with it, as Redis's debugger discards what followed a command in the same read.
    fn next_command(&mut self) -> mlua::Result<Option<Vec<Vec<u8>>>> {
        loop {
            match parse_command(&self.input) {
                Parsed::Command(argv) => {
                    self.input.clear();
                    return Ok(Some(argv));
                }
                Parsed::Error => return Err(rt("protocol error")),
                Parsed::More => {}
            }
            match self.wire.read(&mut self.input) {
                Ok(n) if n > 0 => {}
                _ => {
                    // The script runs on without anyone to stop it.
                    self.step = false;
                    self.breakpoints.clear();
                    return Ok(None);
                }
            }
            if self.input.len() > MAX_INPUT {
                self.input = Vec::new();
                return Err(rt("max client buffer reached"));
            }
        }
    }

    fn set_maxlen(&mut self, argv: &[Vec<u8>]) {
        if argv.len() == 2 {
            let mut v = atoi(&argv[1]);
            self.hint_sent = true;
            if v != 0 && v <= 60 {
                v = 60;
            }
            self.maxlen = v as usize;
        }
        let msg = if self.maxlen > 0 {
            format!("<value> replies are truncated at {} bytes.", self.maxlen)
        } else {
            "<value> replies are unlimited.".to_string()
        };
        self.log(msg.into_bytes());
    }

    fn set_breakpoints(&mut self, argv: &[Vec<u8>]) {
        if argv.len() == 1 {
            if self.breakpoints.is_empty() {
                self.log(b"No breakpoints set. Use 'b <line>' to add one.".to_vec());
            } else {
                self.log(format!("{} breakpoints set:", self.breakpoints.len()).into_bytes());
                for b in self.breakpoints.clone() {
                    self.log_source_line(b);
                }
            }
            return;
        }
        for arg in &argv[1..] {
            let Some(line) = crate::protocol::parse_i64(arg) else {
                let mut l = b"Invalid argument:'".to_vec();
                l.extend_from_slice(c_str(arg));
                l.push(b'\'');
                self.log(l);
                continue;
            };
            if line == 0 {
                self.breakpoints.clear();
                self.log(b"All breakpoints removed.".to_vec());
            } else if line > 0 {
                if self.breakpoints.len() == MAX_BREAKPOINTS {
                    self.log(b"Too many breakpoints set.".to_vec());
                } else if line <= self.src.len() as i64 && !self.breakpoints.contains(&(line as i32)) {
                    self.breakpoints.push(line as i32);
                    self.list(line as i32, 1);
                } else {
                    // Out of the source, or set already: Redis says the same for both.
                    self.log(b"Wrong line number.".to_vec());
                }
            } else {
                let line = line.unsigned_abs().min(i32::MAX as u64) as i32;
                match self.breakpoints.iter().position(|&b| b == line) {
                    Some(i) => {
                        self.breakpoints.remove(i);
                        self.log(b"Breakpoint removed.".to_vec());
                    }
                    None => self.log(b"No breakpoint in the specified line.".to_vec()),
                }
            }
        }
    }
}

/// What the interpreter calls before each line of the script (and every 100,000
/// instructions): stops where a step, a breakpoint or `redis.breakpoint()` says, or when the
/// script has run past the time limit without a stop, and then reads the client's commands.
pub fn hook(lua: &Lua, d: &mlua::Debug) -> mlua::Result<VmState> {
    let line = d.curr_line();
    let ours = d.source().short_src.as_deref().is_some_and(|s| s.contains("user_script"));
    let count = matches!(d.event(), mlua::DebugEvent::Count);
    let stop = with(|s| {
        // Lines of other chunks (the sandbox's own Lua helpers) are not the script's: Redis's
        // libraries are all C, so its debugger never sees such lines.
        if !ours {
            return None;
        }
        s.line = line;
        let bp = s.breakpoints.contains(&line) || s.luabp;
        let mut timeout = false;
        if count && !s.step && !bp {
            if s.since.elapsed().as_millis() < s.timeout_ms {
                return None;
            }
            timeout = true;
            s.step = true;
        }
        if !s.step && !bp {
            return None;
        }
        let reason = if bp {
            if s.luabp {
                "redis.breakpoint() called"
            } else {
                "break point"
            }
        } else if timeout {
            "timeout reached, infinite loop?"
        } else {
            "step over"
        };
        s.step = false;
        s.luabp = false;
        s.log(format!("* Stopped at {line}, stop reason = {reason}").into_bytes());
        s.log_source_line(line);
        s.send_logs();
        Some(timeout)
    })
    .flatten();
    if let Some(timeout) = stop {
        let here = repl(lua)?;
        if !here && timeout {
            // Nobody is left to stop a script that does not end by itself.
            return Err(rt("timeout during Lua debugging with client closing connection"));
        }
        with(|s| s.since = Instant::now());
    }
    Ok(VmState::Continue)
}

/// The client's commands until one resumes the script. False if the client has gone.
fn repl(lua: &Lua) -> mlua::Result<bool> {
    loop {
        let Some(argv) = with(|s| s.next_command()).unwrap_or(Ok(None))? else { return Ok(false) };
        let name = String::from_utf8_lossy(c_str(&argv[0])).to_ascii_lowercase();
        match (name.as_str(), argv.len()) {
            ("h" | "help", _) => {
                with(|s| HELP.iter().for_each(|h| s.log(h.as_bytes().to_vec())));
            }
            ("s" | "step" | "n" | "next", _) => {
                with(|s| s.step = true);
                return Ok(true);
            }
            ("c" | "continue", _) => return Ok(true),
            ("t" | "trace", _) => trace(lua),
            ("m" | "maxlen", _) => {
                with(|s| s.set_maxlen(&argv));
            }
            ("b" | "break", _) => {
                with(|s| s.set_breakpoints(&argv));
            }
            ("e" | "eval", _) => eval(lua, &argv[1..]),
            ("a" | "abort", _) => return Err(rt("script aborted for user request")),
            ("r" | "redis", n) if n > 1 => redis(lua, &argv[1..]),
            ("p" | "print", 2) => print(lua, &argv[1]),
            ("p" | "print", _) => print_all(lua),
            ("l" | "list", n) => {
                with(|s| {
                    let mut around = s.line;
                    let mut context = 5;
                    if n > 1 {
                        let num = atoi(&argv[1]);
                        if num > 0 {
                            around = num;
                        }
                    }
                    if n > 2 {
                        context = atoi(&argv[2]);
                    }
                    s.list(around, context);
                });
            }
            ("w" | "whole", _) => {
                with(|s| s.list(1, 1_000_000));
            }
            _ => {
                with(|s| s.log(b"<error> Unknown Redis Lua debugger command or wrong number of arguments.".to_vec()));
            }
        }
        with(|s| s.send_logs());
    }
}

/// The locals of the function `level` calls above the running one (0: the running one).
/// None past the outermost call.
fn locals(lua: &Lua, level: i32) -> Option<Vec<(Vec<u8>, Value)>> {
    // SAFETY: reads the call stack with the Lua API; each value pushed is checked for room
    // and handed back as a result. `exec_raw` runs the closure as a C function: one call
    // above the hook's view of the stack, hence `level + 1`.
    let found: mlua::MultiValue = unsafe {
        lua.exec_raw((), |l| {
            use mlua::ffi;
            let mut ar: ffi::lua_Debug = std::mem::zeroed();
            if ffi::lua_getstack(l, level + 1, &mut ar) == 0 {
                return;
            }
            ffi::lua_pushboolean(l, 1);
            let mut i = 1;
            loop {
                if ffi::lua_checkstack(l, 3) == 0 {
                    break;
                }
                let name = ffi::lua_getlocal(l, &ar, i);
                if name.is_null() {
                    break;
                }
                ffi::lua_pushstring(l, name);
                ffi::lua_insert(l, -2);
                i += 1;
            }
        })
    }
    .ok()?;
    let mut it = found.into_iter();
    it.next()?;
    let mut out = Vec::new();
    while let (Some(Value::String(n)), Some(v)) = (it.next(), it.next()) {
        out.push((n.as_bytes().to_vec(), v));
    }
    Some(out)
}

fn print(lua: &Lua, name: &[u8]) {
    let name = c_str(name);
    let mut level = 0;
    while let Some(vars) = locals(lua, level) {
        if let Some((_, v)) = vars.iter().find(|(n, _)| n.as_slice() == name) {
            let mut line = b"<value> ".to_vec();
            cat_value(&mut line, v, 0);
            with(|s| s.log_maxlen(line));
            return;
        }
        level += 1;
    }
    if name == b"ARGV" || name == b"KEYS" {
        let v = with(|s| s.backing.clone())
            .flatten()
            .and_then(|t| t.raw_get::<Value>(if name == b"KEYS" { "KEYS" } else { "ARGV" }).ok())
            .unwrap_or(Value::Nil);
        let mut line = b"<value> ".to_vec();
        cat_value(&mut line, &v, 0);
        with(|s| s.log_maxlen(line));
    } else {
        with(|s| s.log(b"No such variable.".to_vec()));
    }
}

fn print_all(lua: &Lua) {
    let mut shown = 0;
    for (name, v) in locals(lua, 0).unwrap_or_default() {
        if name.windows(12).any(|w| w == b"(*temporary)") {
            continue;
        }
        let mut line = b"<value> ".to_vec();
        line.extend_from_slice(&name);
        line.extend_from_slice(b" = ");
        cat_value(&mut line, &v, 0);
        with(|s| s.log_maxlen(line));
        shown += 1;
    }
    if shown == 0 {
        with(|s| s.log(b"No local variables in the current context.".to_vec()));
    }
}

fn trace(lua: &Lua) {
    let mut level = 0;
    while let Some(d) = lua.inspect_stack(level) {
        let ours = d.source().short_src.as_deref().is_some_and(|s| s.contains("user_script"));
        if ours {
            let name = d.names().name.map(|n| n.to_string()).unwrap_or_else(|| "top level".into());
            let line = d.curr_line();
            let head = format!("{} {}:", if level == 0 { "In" } else { "From" }, name);
            with(|s| {
                s.log(head.into_bytes());
                s.log_source_line(line);
            });
        }
        level += 1;
    }
    if level == 0 {
        with(|s| s.log(b"<error> Can't retrieve Lua stack.".to_vec()));
    }
}

/// `eval <code>`: the code as an expression first, else as statements, in the script's
/// globals; its value or its error is logged.
fn eval(lua: &Lua, words: &[Vec<u8>]) {
    let code = words.join(&b' ');
    let mut expr = b"return ".to_vec();
    expr.extend_from_slice(&code);
    let env = with(|s| s.env.clone()).flatten();
    let load = |src: &[u8]| {
        let chunk = lua.load(src).set_name("@ldb_eval").set_mode(mlua::ChunkMode::Text);
        match &env {
            Some(e) => chunk.set_environment(e.clone()),
            None => chunk,
        }
        .into_function()
    };
    let f = match load(&expr).or_else(|_| load(&code)) {
        Ok(f) => f,
        Err(e) => {
            let msg = match e {
                mlua::Error::SyntaxError { message, .. } => message,
                e => e.to_string(),
            };
            with(|s| s.log(format!("<error> {msg}").into_bytes()));
            return;
        }
    };
    let line = match protected(lua, Value::Function(f), &[]) {
        Ok(v) => {
            let mut l = b"<retval> ".to_vec();
            cat_value(&mut l, &v, 0);
            with(|s| s.log_maxlen(l));
            return;
        }
        Err(e) => {
            let mut l = b"<error> ".to_vec();
            match e {
                Value::String(s) => l.extend_from_slice(&s.as_bytes()),
                Value::Integer(i) => l.extend_from_slice(i.to_string().as_bytes()),
                Value::Number(n) => l.extend_from_slice(super::libs::lua_number_text(n).as_bytes()),
                _ => l.extend_from_slice(b"(null)"),
            }
            l
        }
    };
    with(|s| s.log(line));
}

/// `redis <command>`: runs it through `redis.call` with the logging of a step.
fn redis(lua: &Lua, args: &[Vec<u8>]) {
    let call = with(|s| s.env.clone())
        .flatten()
        .and_then(|env| env.get::<Table>("redis").ok())
        .and_then(|r| r.get::<Value>("call").ok())
        .unwrap_or(Value::Nil);
    let args: Vec<Value> = args.iter().filter_map(|a| lua.create_string(a).ok().map(Value::String)).collect();
    with(|s| s.step = true);
    let _ = protected(lua, call, &args);
    with(|s| s.step = false);
}

/// Calls `f(args)` under the interpreter's own `pcall` (an error stays the value raised, with
/// no traceback added). Ok: the first value returned.
fn protected(lua: &Lua, f: Value, args: &[Value]) -> Result<Value, Value> {
    let Ok(pcall) = lua.globals().raw_get::<mlua::Function>("pcall") else { return Err(Value::Nil) };
    let mut all = vec![f];
    all.extend_from_slice(args);
    match pcall.call::<mlua::MultiValue>(mlua::MultiValue::from_iter(all)) {
        Ok(vals) => {
            let mut it = vals.into_iter();
            match it.next() {
                Some(Value::Boolean(true)) => Ok(it.next().unwrap_or(Value::Nil)),
                _ => Err(it.next().unwrap_or(Value::Nil)),
            }
        }
        Err(e) => Err(lua.create_string(e.to_string()).map(Value::String).unwrap_or(Value::Nil)),
    }
}

/// A Lua value as the debugger shows it (Redis's `ldbCatStackValue`).
fn cat_value(out: &mut Vec<u8>, v: &Value, level: usize) {
    if level == MAX_DEPTH {
        out.extend_from_slice(b"<max recursion level reached! Nested table?>");
        return;
    }
    let level = level + 1;
    match v {
        Value::String(s) => cat_repr(out, &s.as_bytes()),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(i) => out.extend_from_slice(super::libs::format_g(*i as f64, 6).as_bytes()),
        Value::Number(n) => out.extend_from_slice(super::libs::format_g(*n, 6).as_bytes()),
        Value::Nil => out.extend_from_slice(b"nil"),
        Value::Table(t) => {
            // Both renderings at once; which one shows depends on whether the keys were
            // 1, 2, 3 … in the order `next` gave them.
            let (mut as_array, mut as_map) = (Vec::new(), Vec::new());
            let mut is_array = true;
            let mut expected = 1.0;
            for (k, val) in t.clone().pairs::<Value, Value>().flatten() {
                let key_num = match k {
                    Value::Integer(i) => Some(i as f64),
                    Value::Number(n) => Some(n),
                    _ => None,
                };
                if is_array && key_num != Some(expected) {
                    is_array = false;
                }
                cat_value(&mut as_array, &val, level);
                as_array.extend_from_slice(b"; ");
                as_map.push(b'[');
                cat_value(&mut as_map, &k, level);
                as_map.extend_from_slice(b"]=");
                cat_value(&mut as_map, &val, level);
                as_map.extend_from_slice(b"; ");
                expected += 1.0;
            }
            as_array.truncate(as_array.len().saturating_sub(2));
            as_map.truncate(as_map.len().saturating_sub(2));
            out.push(b'{');
            out.extend_from_slice(if is_array { &as_array } else { &as_map });
            out.push(b'}');
        }
        other => {
            let kind = match other {
                Value::Function(_) => "function",
                Value::Thread(_) => "thread",
                Value::LightUserData(_) => "light-userdata",
                _ => "userdata",
            };
            out.extend_from_slice(format!("\"{kind}@{:p}\"", other.to_pointer()).as_bytes());
        }
    }
}

/// The error replies inside a reply, in order (each is logged as Redis converts it).
fn collect_errors<'a>(r: &'a [u8], pos: usize, out: &mut Vec<&'a [u8]>) -> usize {
    let Some(eol) = line_end(r, pos) else { return r.len() };
    let head = &r[pos + 1..eol];
    let next = eol + 2;
    match r.get(pos) {
        Some(b'-') => {
            out.push(&r[pos..eol]);
            next
        }
        Some(b'$' | b'=' | b'!') => {
            let n = atoi(head);
            if n < 0 {
                next
            } else {
                (next + n as usize + 2).min(r.len())
            }
        }
        Some(b'*' | b'~' | b'>') => {
            let mut p = next;
            for _ in 0..atoi(head).max(0) {
                p = collect_errors(r, p, out);
            }
            p
        }
        Some(b'%' | b'|') => {
            let mut p = next;
            for _ in 0..atoi(head).max(0) * 2 {
                p = collect_errors(r, p, out);
            }
            p
        }
        _ => next,
    }
}

/// A RESP reply in the debugger's words (Redis's `ldbRedisProtocolToHuman`). Returns where
/// the next reply starts.
fn human(r: &[u8], pos: usize, out: &mut Vec<u8>) -> usize {
    let Some(eol) = line_end(r, pos) else { return r.len() };
    let head = &r[pos + 1..eol];
    let next = eol + 2;
    let items = |out: &mut Vec<u8>, n: i32, sep: &[u8], pairs: bool| {
        let mut p = next;
        for j in 0..n.max(0) {
            p = human(r, p, out);
            if pairs {
                out.extend_from_slice(b" => ");
                p = human(r, p, out);
            }
            if j != n - 1 {
                out.extend_from_slice(sep);
            }
        }
        p
    };
    match r[pos] {
        b':' => {
            out.extend_from_slice(head);
            next
        }
        b'$' => {
            let n = atoi(head);
            if n < 0 {
                out.extend_from_slice(b"NULL");
                next
            } else {
                let end = (next + n as usize).min(r.len());
                cat_repr(out, &r[next..end]);
                (end + 2).min(r.len())
            }
        }
        b'+' | b'-' => {
            cat_repr(out, &r[pos..eol]);
            next
        }
        b'*' => {
            let n = atoi(head);
            if n == -1 {
                out.extend_from_slice(b"NULL");
                return next;
            }
            out.push(b'[');
            let p = items(out, n, b",", false);
            out.push(b']');
            p
        }
        b'~' => {
            out.extend_from_slice(b"~(");
            let p = items(out, atoi(head), b",", false);
            out.push(b')');
            p
        }
        b'%' => {
            out.push(b'{');
            let p = items(out, atoi(head), b",", true);
            out.push(b'}');
            p
        }
        b'_' => {
            out.extend_from_slice(b"(null)");
            next
        }
        b'#' => {
            out.extend_from_slice(if head.first() == Some(&b't') { b"#true" } else { b"#false" });
            next
        }
        b',' => {
            out.extend_from_slice(b"(double) ");
            out.extend_from_slice(head);
            next
        }
        // Redis renders no other type (verbatim strings, big numbers): nothing is shown.
        _ => next,
    }
}

fn line_end(r: &[u8], pos: usize) -> Option<usize> {
    if pos >= r.len() {
        return None;
    }
    r[pos..].windows(2).position(|w| w == b"\r\n").map(|i| pos + i)
}

/// Bytes up to the first NUL: what C string functions see of an argument.
fn c_str(a: &[u8]) -> &[u8] {
    a.split(|&b| b == 0).next().unwrap_or(a)
}

/// C's `atoi`: leading blanks, a sign, the digits that follow; 0 when there are none.
fn atoi(a: &[u8]) -> i32 {
    let a = c_str(a);
    let mut i = a.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(a.len());
    let neg = a.get(i) == Some(&b'-');
    if matches!(a.get(i), Some(b'-' | b'+')) {
        i += 1;
    }
    let mut v: i64 = 0;
    while let Some(d) = a.get(i).filter(|d| d.is_ascii_digit()) {
        v = (v * 10 + (d - b'0') as i64).min(i64::from(i32::MAX) + 1);
        i += 1;
    }
    let v = if neg { -v } else { v };
    v.clamp(i32::MIN as i64, i32::MAX as i64) as i32
}

enum Parsed {
    Command(Vec<Vec<u8>>),
    More,
    Error,
}

/// Redis's debugger command parser: `*<n>\r\n` then `n` bulk strings, 1 to 1,024 of them, each
/// 1 to 1,024 bytes; its searches stop at a NUL byte, as the C string functions it uses do.
fn parse_command(buf: &[u8]) -> Parsed {
    if buf.is_empty() {
        return Parsed::More;
    }
    let text = c_str(buf);
    let Some(star) = text.iter().position(|&b| b == b'*') else { return Parsed::Error };
    let crlf = |from: usize| text[from..].windows(2).position(|w| w == b"\r\n").map(|i| from + i);
    let Some(eol) = crlf(star) else { return Parsed::More };
    let argc = atoi(&text[star + 1..eol]);
    if !(1..=1024).contains(&argc) {
        return Parsed::Error;
    }
    let mut p = eol + 2;
    let mut argv = Vec::with_capacity(argc as usize);
    while argv.len() < argc as usize {
        match buf.get(p) {
            None | Some(0) => return Parsed::More,
            Some(b'$') => {}
            Some(_) => return Parsed::Error,
        }
        let Some(eol) = buf[p..].iter().position(|&b| b == 0).map_or_else(
            || buf[p..].windows(2).position(|w| w == b"\r\n").map(|i| p + i),
            |nul| buf[p..p + nul].windows(2).position(|w| w == b"\r\n").map(|i| p + i),
        ) else {
            return Parsed::More;
        };
        let len = atoi(&buf[p + 1..eol]);
        if !(1..=1024).contains(&len) {
            return Parsed::Error;
        }
        let start = eol + 2;
        let end = start + len as usize;
        if end + 2 > buf.len() {
            return Parsed::More;
        }
        argv.push(buf[start..end].to_vec());
        if &buf[end..end + 2] != b"\r\n" {
            return Parsed::Error;
        }
        p = end + 2;
    }
    Parsed::Command(argv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_as_redis_parses_them() {
        let Parsed::Command(a) = parse_command(b"*2\r\n$1\r\nb\r\n$2\r\n10\r\n") else { panic!() };
        assert_eq!(a, vec![b"b".to_vec(), b"10".to_vec()]);
        assert!(matches!(parse_command(b"*2\r\n$1\r\nb\r\n"), Parsed::More));
        assert!(matches!(parse_command(b"*1\r\n$0\r\n\r\n"), Parsed::Error));
        assert!(matches!(parse_command(b"garbage\r\n"), Parsed::Error));
        assert!(matches!(parse_command(b"*1025\r\n"), Parsed::Error));
        let Parsed::Command(a) = parse_command(b"*1\r\n$13\r\n'hello\0world'\r\n") else { panic!() };
        assert_eq!(c_str(&a[0]), b"'hello");
    }

    #[test]
    fn replies_read_as_redis_shows_them() {
        let show = |r: &[u8]| {
            let mut o = Vec::new();
            human(r, 0, &mut o);
            String::from_utf8(o).unwrap()
        };
        assert_eq!(show(b"+OK\r\n"), "\"+OK\"");
        assert_eq!(show(b"$-1\r\n"), "NULL");
        assert_eq!(show(b"*2\r\n$1\r\nf\r\n:3\r\n"), "[\"f\",3]");
        assert_eq!(show(b"%1\r\n$1\r\nf\r\n$1\r\nv\r\n"), "{\"f\" => \"v\"}");
        assert_eq!(show(b"~1\r\n,1.5\r\n"), "~((double) 1.5)");
        assert_eq!(show(b"_\r\n"), "(null)");
        assert_eq!(show(b"#t\r\n"), "#true");
        let mut errs = Vec::new();
        collect_errors(b"*2\r\n-ERR a\r\n$1\r\nx\r\n", 0, &mut errs);
        assert_eq!(errs, vec![b"-ERR a".as_slice()]);
    }

    #[test]
    fn atoi_reads_as_c_does() {
        assert_eq!(atoi(b" 42x"), 42);
        assert_eq!(atoi(b"-7"), -7);
        assert_eq!(atoi(b"x"), 0);
        assert_eq!(atoi(b"99999999999"), i32::MAX);
    }
}
