//! Scripts as the execution core sees them: the cache of script bodies every worker shares
//! (EVAL and SCRIPT LOAD add to it, EVALSHA and SCRIPT EXISTS look in it, SCRIPT FLUSH empties
//! it), the shebang flags, and the state of the script running now (for `-BUSY`, SCRIPT
//! KILL). The Lua side — the interpreter, one per worker thread, and the conversions — is the
//! `scripting` layer above; the commands a script calls go through the call path's `script_call`.

use crate::lockorder::{rank, RwLock};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

/// Shebang flags (`#!lua flags=...`), as Redis's `SCRIPT_FLAG_*`.
pub mod sflags {
    pub const NO_WRITES: u32 = 1 << 0;
    pub const ALLOW_OOM: u32 = 1 << 1;
    pub const ALLOW_STALE: u32 = 1 << 2;
    pub const NO_CLUSTER: u32 = 1 << 3;
    /// No shebang: Redis's pre-7.0 compatible behaviour (writes allowed, flags ignored).
    pub const EVAL_COMPAT: u32 = 1 << 4;
    pub const ALLOW_CROSS_SLOT: u32 = 1 << 5;

    pub const NAMES: [(&str, u32); 5] = [
        ("no-writes", NO_WRITES),
        ("allow-oom", ALLOW_OOM),
        ("allow-stale", ALLOW_STALE),
        ("no-cluster", NO_CLUSTER),
        ("allow-cross-slot-keys", ALLOW_CROSS_SLOT),
    ];
}

/// One cached script.
pub struct Script {
    /// Lower-case hex SHA-1 of the whole body.
    pub sha: [u8; 40],
    pub body: Box<[u8]>,
    pub flags: u32,
    /// Length of the shebang line (the Lua code starts there, keeping its line feed so line
    /// numbers stay the user's).
    pub shebang_len: usize,
}

/// The script cache and the running script's state.
pub struct Scripts {
    cache: RwLock<HashMap<[u8; 40], Arc<Script>>, { rank::LEAF }>,
    /// Bumped by SCRIPT FLUSH: each worker's interpreter is rebuilt when it sees a new value.
    pub generation: AtomicU64,
    /// Bytes of the cached bodies (INFO `used_memory_scripts_eval`).
    pub bytes: AtomicU64,
    /// The running script (shared with the interpreters' hooks, which outlive a borrow).
    pub run: Arc<RunState>,
    /// FUNCTION libraries.
    pub functions: Functions,
    /// Bytes each worker's Lua interpreter holds (by worker id, modulo the slots), updated after
    /// each run there (INFO `used_memory_lua`).
    pub vm_bytes: [AtomicU64; 64],
}

/// One function of a library.
#[derive(Clone, Debug)]
pub struct FunctionInfo {
    pub name: String,
    pub description: Option<Vec<u8>>,
    pub flags: u32,
}

/// A library loaded with FUNCTION LOAD (or from an RDB file, or FUNCTION RESTORE).
#[derive(Debug)]
pub struct Library {
    pub name: String,
    /// The whole code, shebang included (FUNCTION LIST WITHCODE, DUMP, RDB).
    pub code: Box<[u8]>,
    /// Where the Lua code starts (after the shebang line, keeping its line feed).
    pub shebang_len: usize,
    pub functions: Vec<FunctionInfo>,
}

/// The libraries and the functions they registered (names are unique across libraries).
#[derive(Default)]
pub struct Functions {
    state: RwLock<FunctionsState, { rank::FUNCTIONS }>,
    /// Bumped by every change: each worker's interpreter reloads its libraries when it sees a
    /// new value.
    pub generation: AtomicU64,
}

#[derive(Default, Clone)]
pub struct FunctionsState {
    pub libraries: std::collections::BTreeMap<String, Arc<Library>>,
    /// Function name, lower-cased (names are case-insensitive, as in Redis) → library name.
    pub functions: HashMap<String, String>,
}

/// Why a script or a library was refused; its text is Redis's (the caller adds the code).
#[derive(Debug, Clone, PartialEq)]
pub enum ScriptError {
    /// FUNCTION LOAD of a library that exists, without REPLACE.
    LibraryExists(String),
    /// A function name another library registered.
    FunctionExists(String),
    /// The library's first line (`#!lua name=…`) is wrong: why.
    Metadata(String),
    /// The script's shebang (`#!lua flags=…`) is wrong: why.
    Shebang(String),
    /// The Lua compiler's message.
    Compile(String),
}

impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScriptError::LibraryExists(name) => write!(f, "Library '{name}' already exists"),
            ScriptError::FunctionExists(name) => write!(f, "Function {name} already exists"),
            ScriptError::Metadata(m) | ScriptError::Shebang(m) | ScriptError::Compile(m) => f.write_str(m),
        }
    }
}

impl FunctionsState {
    /// Adds `lib`; with `replace` a library of the same name is replaced.
    pub fn add(&mut self, lib: Arc<Library>, replace: bool) -> Result<(), ScriptError> {
        let old = self.libraries.get(&lib.name).cloned();
        if old.is_some() && !replace {
            return Err(ScriptError::LibraryExists(lib.name.clone()));
        }
        for f in &lib.functions {
            if let Some(owner) = self.functions.get(&f.name.to_ascii_lowercase()) {
                if *owner != lib.name {
                    return Err(ScriptError::FunctionExists(f.name.clone()));
                }
            }
        }
        if let Some(old) = old {
            for f in &old.functions {
                self.functions.remove(&f.name.to_ascii_lowercase());
            }
        }
        for f in &lib.functions {
            self.functions.insert(f.name.to_ascii_lowercase(), lib.name.clone());
        }
        self.libraries.insert(lib.name.clone(), lib);
        Ok(())
    }

    pub fn remove(&mut self, name: &str) -> bool {
        let Some(lib) = self.libraries.remove(name) else { return false };
        for f in &lib.functions {
            self.functions.remove(&f.name.to_ascii_lowercase());
        }
        true
    }

    /// The library and description of function `name`.
    pub fn function(&self, name: &str) -> Option<(Arc<Library>, FunctionInfo)> {
        let lib = self.libraries.get(self.functions.get(&name.to_ascii_lowercase())?)?.clone();
        let info = lib.functions.iter().find(|f| f.name.eq_ignore_ascii_case(name))?.clone();
        Some((lib, info))
    }
}

impl Functions {
    pub fn read(&self) -> crate::lockorder::RwLockReadGuard<'_, FunctionsState, { rank::FUNCTIONS }> {
        self.state.read()
    }

    /// Changes the libraries; the change is seen by every interpreter (generation bumped).
    pub fn update<R>(&self, f: impl FnOnce(&mut FunctionsState) -> R) -> R {
        let mut g = self.state.write();
        let r = f(&mut g);
        self.generation.fetch_add(1, Ordering::AcqRel);
        r
    }
}

/// The state of the script running now. Scripts run one at a time (the keyspace's script
/// gate), so one record serves them all.
pub struct RunState {
    /// A script is running (on some worker).
    pub running: AtomicBool,
    /// It has run a write command (then SCRIPT KILL answers UNKILLABLE).
    pub wrote: AtomicBool,
    /// SCRIPT KILL asked it to stop.
    pub kill: AtomicBool,
    /// It ran past the threshold: other clients are answered `-BUSY`.
    pub busy: AtomicBool,
    /// The worker thread running it (new connections go to the others while it is busy).
    pub worker: std::sync::atomic::AtomicUsize,
    /// When it started (unix ms).
    pub started_ms: AtomicI64,
    /// `busy-reply-threshold` when it started (ms; 0: never busy).
    pub threshold_ms: AtomicI64,
    /// Its name (a SHA, or a function's name), for the slow-script log line and FUNCTION
    /// STATS, and the command that runs it.
    pub name: crate::lockorder::Mutex<(String, Vec<Vec<u8>>), { rank::LEAF }>,
    /// It is an EVAL script (not a function): SCRIPT KILL, not FUNCTION KILL, stops it.
    pub is_eval: AtomicBool,
    /// The command path's gate word (`services::gates`), where `GATE_SCRIPT_BUSY` is raised.
    gates: Arc<AtomicU8>,
    /// Redis's lrand48 state behind `math.random` (48 bits), one stream for every script.
    rand48: AtomicU64,
}

use super::clock::unix_ms as now_ms;

/// lrand48's starting state and the state `srand48(s)` sets: 0x330E below the seed's 32 bits.
const RAND48_INIT: u64 = 0x1234_ABCD_330E;

impl RunState {
    pub fn busy_threshold_ms(&self) -> i64 {
        self.threshold_ms.load(Ordering::Relaxed)
    }

    /// Called by the interpreter's hook every 100,000 instructions: past the threshold the
    /// server turns busy (other clients get `-BUSY`, once, with Redis's log line). True when
    /// SCRIPT KILL asked the script to stop.
    pub fn check_busy(&self) -> bool {
        let t = self.threshold_ms.load(Ordering::Relaxed);
        if t > 0 && !self.busy.load(Ordering::Relaxed) {
            let elapsed = now_ms() - self.started_ms.load(Ordering::Relaxed);
            if elapsed >= t {
                self.busy.store(true, Ordering::Relaxed);
                self.gates.fetch_or(super::gates::GATE_SCRIPT_BUSY, Ordering::Release);
                let name = self.name.lock().0.clone();
                let how = if self.is_eval.load(Ordering::Relaxed) { "SCRIPT KILL" } else { "FUNCTION KILL" };
                crate::log_warning!(
                    "Slow script detected: still in execution after {elapsed} milliseconds. You can try killing the script using the {how} command. Script name is: {name}."
                );
            }
        }
        if self.kill.load(Ordering::Relaxed) {
            crate::log_notice!("Lua script killed by user with SCRIPT KILL.");
            return true;
        }
        false
    }

    /// A script starts (under the script gate).
    pub fn start(&self, name: &str, argv: &[&[u8]], is_eval: bool, worker: usize, threshold_ms: i64) {
        self.worker.store(worker, Ordering::Relaxed);
        *self.name.lock() = (name.to_string(), argv.iter().map(|a| a.to_vec()).collect());
        self.is_eval.store(is_eval, Ordering::Relaxed);
        self.started_ms.store(now_ms(), Ordering::Relaxed);
        self.threshold_ms.store(threshold_ms, Ordering::Relaxed);
        self.wrote.store(false, Ordering::Relaxed);
        self.kill.store(false, Ordering::Relaxed);
        self.running.store(true, Ordering::Release);
    }

    /// The script ended: the server is not busy any more.
    pub fn finish(&self) {
        self.running.store(false, Ordering::Release);
        self.kill.store(false, Ordering::Relaxed);
        if self.busy.swap(false, Ordering::Relaxed) {
            self.gates.fetch_and(!super::gates::GATE_SCRIPT_BUSY, Ordering::Release);
        }
    }

    /// The next number of the lrand48 stream (31 bits).
    pub fn next_rand(&self) -> u32 {
        let next = |x: u64| x.wrapping_mul(0x5_DEEC_E66D).wrapping_add(0xB) & ((1 << 48) - 1);
        let old =
            self.rand48.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |x| Some(next(x))).unwrap_or(RAND48_INIT);
        (next(old) >> 17) as u32
    }

    /// `srand48(seed)`.
    pub fn seed_rand(&self, seed: i32) {
        self.rand48.store(((seed as u32 as u64) << 16) | 0x330E, Ordering::Relaxed);
    }
}

impl Scripts {
    pub fn new(gates: Arc<AtomicU8>) -> Scripts {
        Scripts {
            cache: RwLock::new(HashMap::new()),
            generation: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            run: Arc::new(RunState {
                running: AtomicBool::new(false),
                wrote: AtomicBool::new(false),
                kill: AtomicBool::new(false),
                busy: AtomicBool::new(false),
                worker: Default::default(),
                started_ms: AtomicI64::new(0),
                threshold_ms: AtomicI64::new(0),
                name: crate::lockorder::Mutex::new((String::new(), Vec::new())),
                is_eval: AtomicBool::new(true),
                gates,
                rand48: AtomicU64::new(RAND48_INIT),
            }),
            functions: Functions::default(),
            vm_bytes: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Whether EVAL, EVALSHA or FCALL (`name`, lowercase, with its arguments `argv`) may
    /// write, by the flags its script declares (Redis's evalGetCommandFlags and
    /// fcallGetCommandFlags, for CLIENT PAUSE WRITE). A script without a shebang, an EVALSHA
    /// of a script not cached, or a function not found: it may, as the command's own
    /// `may-replicate` flag says.
    pub fn call_may_write(&self, name: &str, argv: &[&[u8]]) -> bool {
        let flags = match (name, argv.get(1)) {
            ("eval", Some(body)) => parse_shebang(body).map_or(sflags::EVAL_COMPAT, |(f, _)| f),
            ("evalsha", Some(sha)) => self.get(sha).map_or(sflags::EVAL_COMPAT, |s| s.flags),
            ("fcall", Some(f)) => {
                let Ok(f) = std::str::from_utf8(f) else { return true };
                self.functions.read().function(f).map_or(sflags::EVAL_COMPAT, |(_, i)| i.flags)
            }
            _ => return true,
        };
        flags & sflags::EVAL_COMPAT != 0 || flags & sflags::NO_WRITES == 0
    }

    pub fn get(&self, sha: &[u8]) -> Option<Arc<Script>> {
        let key: [u8; 40] = sha.try_into().ok()?;
        let key = key.map(|c| c.to_ascii_lowercase());
        self.cache.read().get(&key).cloned()
    }

    pub fn insert(&self, s: Arc<Script>) {
        let n = (s.body.len() + 40) as u64;
        if self.cache.write().insert(s.sha, s).is_none() {
            self.bytes.fetch_add(n, Ordering::Relaxed);
        }
    }

    pub fn len(&self) -> usize {
        self.cache.read().len()
    }

    /// Bytes of all the workers' Lua interpreters.
    pub fn vm_memory(&self) -> u64 {
        self.vm_bytes.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// SCRIPT FLUSH: forgets every script; interpreters are rebuilt on their next use.
    pub fn flush(&self) {
        let old = std::mem::take(&mut *self.cache.write());
        self.bytes.store(0, Ordering::Relaxed);
        self.generation.fetch_add(1, Ordering::AcqRel);
        drop(old);
    }
}

/// A library or function name: letters, digits and underscores, at least one.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// Reads a library's metadata line (`#!lua name=mylib`), as Redis does. Returns the engine,
/// the library name and the length of the line; `Err` is Redis's text.
pub fn parse_library_meta(code: &[u8]) -> Result<(String, String, usize), ScriptError> {
    if !code.starts_with(b"#!") {
        return Err(ScriptError::Metadata("Missing library metadata".into()));
    }
    let Some(end) = code.iter().position(|&c| c == b'\n') else {
        return Err(ScriptError::Metadata("Invalid library metadata".into()));
    };
    let mut raw = Vec::new();
    if !crate::protocol::parser::split_args(&code[..end], &mut raw) || raw.is_empty() {
        return Err(ScriptError::Metadata("Invalid library metadata".into()));
    }
    let parts: Vec<String> = raw.iter().map(|p| String::from_utf8_lossy(p).into_owned()).collect();
    let Some(engine) = parts[0].strip_prefix("#!") else {
        return Err(ScriptError::Metadata("Invalid library metadata".into()));
    };
    let mut name = None;
    for p in &parts[1..] {
        match p.strip_prefix("name=") {
            Some(n) => {
                if name.is_some() {
                    return Err(ScriptError::Metadata(
                        "Invalid metadata value, name argument was given multiple times".into(),
                    ));
                }
                name = Some(n.to_string());
            }
            None => return Err(ScriptError::Metadata(format!("Invalid metadata value given: {p}"))),
        }
    }
    let Some(name) = name else {
        return Err(ScriptError::Metadata("Library name was not given".into()));
    };
    Ok((engine.to_string(), name, end))
}

/// The lower-case hex SHA-1 of `body` (script names, `redis.sha1hex`).
pub fn sha1_hex(body: &[u8]) -> [u8; 40] {
    use sha1::{Digest, Sha1};
    let d = Sha1::digest(body);
    let mut out = [0u8; 40];
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (i, b) in d.iter().enumerate() {
        out[2 * i] = HEX[(b >> 4) as usize];
        out[2 * i + 1] = HEX[(b & 15) as usize];
    }
    out
}

/// Reads the shebang line of a script body, as Redis does: none means compatibility mode;
/// `#!lua` with `flags=a,b` options; anything else is an error with Redis's text. Returns
/// the flags and the shebang's length.
pub fn parse_shebang(body: &[u8]) -> Result<(u32, usize), ScriptError> {
    if !body.starts_with(b"#!") {
        return Ok((sflags::EVAL_COMPAT, 0));
    }
    let Some(end) = body.iter().position(|&c| c == b'\n') else {
        return Err(ScriptError::Shebang("Invalid script shebang".into()));
    };
    let mut raw = Vec::new();
    if !crate::protocol::parser::split_args(&body[..end], &mut raw) || raw.is_empty() {
        return Err(ScriptError::Shebang("Invalid engine in script shebang".into()));
    }
    let parts: Vec<String> = raw.iter().map(|p| String::from_utf8_lossy(p).into_owned()).collect();
    let engine = &parts[0];
    if engine != "#!lua" {
        return Err(ScriptError::Shebang(format!("Unexpected engine in script shebang: {engine}")));
    }
    let mut flags = 0;
    for p in &parts[1..] {
        let Some(list) = p.strip_prefix("flags=") else {
            return Err(ScriptError::Shebang(format!("Unknown lua shebang option: {p}")));
        };
        // Redis splits on commas keeping empty parts: `flags=` alone names no flag.
        if list.is_empty() {
            continue;
        }
        for f in list.split(',') {
            match sflags::NAMES.iter().find(|(n, _)| *n == f) {
                Some((_, bit)) => flags |= bit,
                None => return Err(ScriptError::Shebang(format!("Unexpected flag in script shebang: {f}"))),
            }
        }
    }
    Ok((flags, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebangs_parse_as_redis_parses_them() {
        assert_eq!(parse_shebang(b"return 1"), Ok((sflags::EVAL_COMPAT, 0)));
        assert_eq!(parse_shebang(b"#!lua\nreturn 1"), Ok((0, 5)));
        assert_eq!(
            parse_shebang(b"#!lua flags=no-writes,allow-oom\nx"),
            Ok((sflags::NO_WRITES | sflags::ALLOW_OOM, 31))
        );
        assert_eq!(parse_shebang(b"#!lua"), Err(ScriptError::Shebang("Invalid script shebang".into())));
        assert_eq!(
            parse_shebang(b"#!py\n"),
            Err(ScriptError::Shebang("Unexpected engine in script shebang: #!py".into()))
        );
        assert_eq!(
            parse_shebang(b"#!lua foo=bar\n"),
            Err(ScriptError::Shebang("Unknown lua shebang option: foo=bar".into()))
        );
        assert_eq!(
            parse_shebang(b"#!lua flags=bad\n"),
            Err(ScriptError::Shebang("Unexpected flag in script shebang: bad".into()))
        );
    }

    #[test]
    fn math_random_follows_lrand48() {
        let s = Scripts::new(Arc::new(AtomicU8::new(0)));
        // lrand48() after srand48(0)-style defaults: the first values of the stream.
        let first: Vec<u32> = (0..3).map(|_| s.run.next_rand()).collect();
        s.run.rand48.store(RAND48_INIT, Ordering::Relaxed);
        let again: Vec<u32> = (0..3).map(|_| s.run.next_rand()).collect();
        assert_eq!(first, again);
        assert!(first.iter().all(|&x| x <= i32::MAX as u32));
    }

    #[test]
    fn sha1_is_lower_hex() {
        assert_eq!(&sha1_hex(b""), b"da39a3ee5e6b4b0d3255bfef95601890afd80709");
    }
}

/// How a worker answers its other connections while a script it runs is busy: the event loop
/// registers a poll function around each batch of work it hands to the command path, and the
/// interpreter's hook calls it (`poll_while_busy`) once the script has run past
/// `busy-reply-threshold` — Redis's `processEventsWhileBlocked`. The function pointer and its
/// context are the backend's; this layer only carries them.
#[derive(Clone, Copy)]
pub struct BusyPoll {
    pub poll: unsafe fn(ctx: *mut (), current: usize),
    pub ctx: *mut (),
    /// The connection whose command is running (left alone by the poll).
    pub current: usize,
}

thread_local! {
    static BUSY_POLL: std::cell::Cell<Option<BusyPoll>> = const { std::cell::Cell::new(None) };
}

/// Registers `p` until the guard drops.
///
/// # Safety
/// `p.poll(p.ctx, p.current)` must be sound to call at any point the command path may run a
/// script, for as long as the guard lives.
pub unsafe fn register_busy_poll(p: BusyPoll) -> BusyPollGuard {
    BusyPollGuard(BUSY_POLL.replace(Some(p)))
}

pub struct BusyPollGuard(Option<BusyPoll>);

impl Drop for BusyPollGuard {
    fn drop(&mut self) {
        BUSY_POLL.set(self.0);
    }
}

/// Called by the interpreter's hook while the script is busy: serves this worker's other
/// connections once. Not re-entered (the poll is taken out while it runs).
pub fn poll_while_busy() {
    if let Some(p) = BUSY_POLL.take() {
        // The script holds shards: what the poll serves must not wait for them.
        let was = crate::engine::serving_while_busy(true);
        // SAFETY: `register_busy_poll`'s contract.
        unsafe { (p.poll)(p.ctx, p.current) };
        crate::engine::serving_while_busy(was);
        BUSY_POLL.set(Some(p));
    }
}
