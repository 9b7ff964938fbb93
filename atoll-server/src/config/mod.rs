//! The configuration: the table of parameters ([`table`]), their values' syntax ([`value`]),
//! and the store that the config file, `--directive value` flags and CONFIG GET/SET/REWRITE
//! share, with Redis 7.2's rules and error texts.

pub mod events;
pub mod p;
pub mod process;
pub mod supervise;
pub mod table;
pub mod value;

use crate::engine::glob::glob_match;
use crate::lockorder::{rank, RwLock};
use crate::protocol::parser::split_args;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicUsize, Ordering};
pub use table::{Def, Kind, Support, DEFS};
pub use value::parse_memory;

const LOGLEVELS: &[&str] = &["debug", "verbose", "notice", "warning", "nothing"];

/// `Hot::track` bit: per-command latency histograms (`latency-tracking`).
pub const TRACK_LATENCY: u32 = 1;
/// `Hot::track` bit: hot-key sampling (`hotkeys`).
pub const TRACK_HOTKEYS: u32 = 2;
/// `Hot::track` bit: a HOTKEYS session is running (set by HOTKEYS START, not by the table).
pub const TRACK_SESSION: u32 = 4;

/// Values read on hot paths, mirrored into atomics whenever the table changes.
#[derive(Default)]
pub struct Hot {
    pub proto_max_bulk_len: AtomicI64,
    pub client_query_buffer_limit: AtomicUsize,
    pub maxclients: AtomicUsize,
    pub timeout: AtomicU64,
    pub protected_mode: AtomicBool,
    pub hz: AtomicU32,
    /// The rate the timers run at now: `hz`, doubled (up to 500) while there are more than
    /// 200 clients per tick, under `dynamic-hz` (Redis's serverCron rule); set by the cron.
    pub effective_hz: AtomicU32,
    pub dynamic_hz: AtomicBool,
    /// `busy-reply-threshold` (alias `lua-time-limit`), read by every script run.
    pub busy_reply_ms: AtomicI64,
    pub io_batch_wait: AtomicU32,
    pub loglevel: AtomicU32,
    // Encoding thresholds of the aggregate types (CONFIG SET-able, read on every write).
    pub list_max_listpack_size: AtomicI64,
    pub hash_max_listpack_entries: AtomicUsize,
    pub hash_max_listpack_value: AtomicUsize,
    pub set_max_intset_entries: AtomicUsize,
    pub set_max_listpack_entries: AtomicUsize,
    pub set_max_listpack_value: AtomicUsize,
    pub zset_max_listpack_entries: AtomicUsize,
    pub zset_max_listpack_value: AtomicUsize,
    // Slow log, latency monitor and latency tracking (read after every command).
    pub slowlog_slower_than: AtomicI64,
    pub slowlog_max_len: AtomicUsize,
    /// COMMANDLOG's large-request and large-reply thresholds in bytes (a command that reaches
    /// one is logged; u64::MAX when the setting is negative: off) and lengths.
    pub large_request_over: AtomicU64,
    pub large_request_max: AtomicUsize,
    pub large_reply_over: AtomicU64,
    pub large_reply_max: AtomicUsize,
    pub latency_monitor_ms: AtomicU64,
    pub latency_tracking: AtomicBool,
    /// What the end of every command records, one load for all: [`TRACK_LATENCY`] and
    /// [`TRACK_HOTKEYS`] bits.
    pub track: AtomicU32,
    /// The smallest duration (µs) that concerns the slow log or the latency monitor; u64::MAX
    /// when both are off. `call` compares each command's duration with this one number.
    pub slow_us: AtomicU64,
    /// Sample the hottest keys (`hotkeys`).
    pub hotkeys: AtomicBool,
    /// `lazyfree-lazy-user-del`: DEL frees big values in the background, as UNLINK does.
    pub lazy_user_del: AtomicBool,
    /// `client-output-buffer-limit` of the normal, pubsub and replica classes (the order of
    /// `exec::pubsub::OutputClass`): hard bytes, soft bytes, soft seconds (0 = none).
    pub obuf: [AtomicU64; 9],
    /// The smallest of those byte limits that is set (u64::MAX when none is): replies made
    /// in one batch are weighed against the limits only once they are this big.
    pub obuf_look: AtomicU64,
    /// Where a batch's replies are first weighed: `obuf_look`, or 32 KB with
    /// `maxmemory-clients` set (client eviction counts replies as they are built).
    pub batch_look: AtomicU64,
    /// `notify-keyspace-events` as flags (`exec::notify`); 0 when no event can be sent.
    pub notify: AtomicU32,
    /// `tracking-table-max-keys` (0: no limit).
    pub tracking_max_keys: AtomicUsize,
    /// `maxmemory` in bytes (0: no limit): the one load a command pays when there is none.
    pub maxmemory: AtomicU64,
    /// `maxmemory-policy` as `exec::evict::Policy`.
    pub maxmemory_policy: AtomicU32,
    pub maxmemory_samples: AtomicUsize,
    pub maxmemory_tenacity: AtomicU32,
    pub lfu_log_factor: AtomicU32,
    pub lfu_decay_time: AtomicU32,
    /// `lazyfree-lazy-eviction`: evicted values are freed in the background (and logged as UNLINK).
    pub lazy_eviction: AtomicBool,
    /// `maxmemory-clients`: bytes, or a percentage of maxmemory stored negative (0: off).
    pub maxmemory_clients: AtomicI64,
}

pub struct Config {
    /// Canonical values, indexed like [`DEFS`].
    values: RwLock<Vec<String>, { rank::LEAF }>,
    pub hot: Hot,
    pub config_file: Option<String>,
    /// `rename-command` lines, applied to the command table at start-up (`server::net`).
    pub renames: Vec<Rename>,
    /// `user` lines (the name, then its rules), loaded once the command table exists.
    pub users: Vec<ConfUser>,
}

/// One `user name rule …` line of the config file.
pub struct ConfUser {
    pub argv: Vec<Vec<u8>>,
}

/// One `rename-command old new` line (`new` empty: the command is gone).
pub struct Rename {
    pub from: String,
    pub to: String,
    /// The line, for the fatal error should the rename fail.
    pub at: FileError,
}

/// Why the configuration (its file, an included one, or the flags) could not be loaded; its
/// text is redis-server's fatal message.
#[derive(Debug, Clone, PartialEq)]
pub enum FileError {
    /// The file could not be read.
    Open { file: String, why: String },
    /// A line was refused: its number (from 1), its text, and why.
    Line { line: usize, text: String, why: String },
}

impl FileError {
    /// The same line, refused for `why`.
    pub fn because(&self, why: impl std::fmt::Display) -> FileError {
        match self {
            FileError::Line { line, text, .. } => {
                FileError::Line { line: *line, text: text.clone(), why: why.to_string() }
            }
            FileError::Open { file, .. } => FileError::Open { file: file.clone(), why: why.to_string() },
        }
    }
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileError::Open { file, why } => write!(f, "Fatal error, can't open config file '{file}': {why}"),
            FileError::Line { line, text, why } => write!(
                f,
                "\n*** FATAL CONFIG FILE ERROR (Redis {}) ***\nReading the configuration file, at line {line}\n>>> '{text}'\n{why}",
                crate::REDIS_VERSION
            ),
        }
    }
}

/// `maxmemory-policy` as a number: its place in this list (`exec::evict::Policy` follows it).
pub const MAXMEMORY_POLICIES: [&str; 8] = [
    "noeviction",
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
];

fn policy_code(name: &str) -> u32 {
    MAXMEMORY_POLICIES.iter().position(|p| *p == name).unwrap_or(0) as u32
}

/// Index and row of a parameter by its name or alias (any case).
pub fn find_def(name: &str) -> Option<(usize, &'static Def)> {
    DEFS.iter()
        .enumerate()
        .find(|(_, d)| d.name.eq_ignore_ascii_case(name) || d.alias.is_some_and(|a| a.eq_ignore_ascii_case(name)))
}

/// The names of the directives a config file may hold besides the table's.
const FILE_ONLY: &[&str] = &["include", "user", "loadmodule", "sentinel"];
/// Of those, the ones Atoll does not read yet (refused, never ignored).
const FILE_ONLY_PENDING: &[&str] = &["loadmodule", "sentinel"];
/// Pre-7.0 directives Redis 7.2 still reads and ignores (with exactly one argument).
const IGNORED: &[&str] = &["list-max-ziplist-entries", "list-max-ziplist-value", "lua-replicate-commands"];

/// The registered spelling of `typed`: the alias when the alias was used.
fn registered_name(def: &Def, typed: &str) -> &'static str {
    match def.alias {
        Some(a) if a.eq_ignore_ascii_case(typed) => a,
        _ => def.name,
    }
}

/// Why a parameter's value was refused, or could not be carried out, in Redis's words.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigError {
    /// The value is not one the parameter takes.
    BadValue(std::borrow::Cow<'static, str>),
    /// A value asking for what Atoll does not have yet: refused, never accepted and ignored.
    NotYet(&'static str),
    /// CONFIG SET of a parameter only the configuration file sets.
    Immutable,
    /// CONFIG SET of a protected parameter (`enable-protected-configs`).
    Protected,
    /// The same parameter twice in one CONFIG SET.
    Duplicate,
    /// Accepted, but carrying it out failed (the directory, the port, the open-files limit,
    /// the OOM score).
    Apply(String),
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::BadValue(m) => f.write_str(m),
            ConfigError::NotYet(what) => write!(f, "not supported by Atoll yet: {what}"),
            ConfigError::Immutable => f.write_str("can't set immutable config"),
            ConfigError::Protected => f.write_str("can't set protected config"),
            ConfigError::Duplicate => f.write_str("duplicate parameter"),
            ConfigError::Apply(m) => f.write_str(m),
        }
    }
}

/// CONFIG SET's refusal; its text is Redis's whole reply.
#[derive(Debug, Clone, PartialEq)]
pub enum SetError {
    /// No such parameter.
    Unknown(String),
    /// The parameter (as registered, or as typed) refused the change.
    Failed { name: String, why: ConfigError },
}

impl std::fmt::Display for SetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SetError::Unknown(name) => write!(f, "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"),
            SetError::Failed { name, why } => {
                write!(f, "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}")
            }
        }
    }
}

fn set_err(name: &str, why: ConfigError) -> SetError {
    SetError::Failed { name: name.to_string(), why }
}

/// A parameter of several arguments (Redis's MULTI_ARG_CONFIG; `replicaof` apart).
fn multi_arg(kind: &Kind) -> bool {
    matches!(kind, Kind::Save | Kind::OutputLimits | Kind::OomValues | Kind::Bind | Kind::Percentiles | Kind::Flags(_))
}

/// Splits a CONFIG SET value of a multi-word parameter on single spaces, as Redis does.
fn words(def: &Def, v: &str) -> Vec<String> {
    if multi_arg(&def.kind) || def.kind == Kind::Replicaof {
        v.split(' ').map(String::from).collect()
    } else {
        vec![v.to_string()]
    }
}

impl Config {
    pub fn defaults() -> Config {
        let c = Config {
            values: RwLock::new(DEFS.iter().map(|d| d.default.to_string()).collect()),
            hot: Hot::default(),
            config_file: None,
            renames: Vec::new(),
            users: Vec::new(),
        };
        c.refresh_hot();
        c
    }

    /// Loads `atoll-server [config-file] [--directive value ...]`, like redis-server: the file
    /// first, then the flags as if appended to it. Returns warnings to log once logging is set
    /// up; an error is the fatal message redis-server would print.
    pub fn from_args(args: &[String]) -> Result<(Config, Vec<String>), FileError> {
        let mut cfg = Config::defaults();
        let mut text = String::new();
        let mut rest = args;
        if let Some(first) = args.first() {
            if !first.starts_with("--") {
                let content = if first == "-" {
                    let mut s = String::new();
                    std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
                        .map_err(|e| FileError::Open { file: "-".into(), why: e.to_string() })?;
                    s
                } else {
                    cfg.config_file =
                        Some(std::fs::canonicalize(first).map(|p| p.display().to_string()).unwrap_or(first.clone()));
                    std::fs::read_to_string(first)
                        .map_err(|e| FileError::Open { file: first.clone(), why: e.to_string() })?
                };
                text.push_str(&content);
                rest = &args[1..];
            }
        }
        // The flags are appended after the file and a newline as Redis's main() appends them:
        // `--name` starts a line (`name `), and the arguments after it follow, quoted, until
        // the next `--name` — once the line has one. An argument holding a name and its value
        // (`"--port 6380"`) is a whole line, written as it is. A `--save` followed by another
        // `--name`, or last, gets `""`. An argument before any `--name` is quoted onto the
        // text too (`loglevel verbose`: wrong usage Redis supports anyway).
        text.push('\n');
        let mut options = String::new();
        let mut handled = true;
        for (j, a) in rest.iter().enumerate() {
            if handled && a.starts_with("--") {
                if !options.is_empty() {
                    options.push('\n');
                }
                options.push_str(&a[2..]);
                options.push(' ');
                let mut parts = Vec::new();
                if split_args(a.as_bytes(), &mut parts) && parts.len() == 1 {
                    handled = false;
                    if a.eq_ignore_ascii_case("--save") {
                        let next_is_name = rest.get(j + 1).is_some_and(|n| n.starts_with("--"));
                        if next_is_name || j + 1 == rest.len() {
                            options.push_str("\"\"");
                            handled = next_is_name;
                        }
                    }
                } else {
                    handled = true;
                }
            } else {
                options.push_str(&value::quote(a));
                options.push(' ');
                handled = true;
            }
        }
        text.push_str(&options);
        text.push('\n');
        let warnings = cfg.load_text(&text)?;
        Ok((cfg, warnings))
    }

    /// Applies redis.conf text. Errors read like redis-server's fatal config error.
    pub fn load_text(&mut self, text: &str) -> Result<Vec<String>, FileError> {
        let mut warnings = Vec::new();
        // The first `save` line replaces the default points, later ones add to them.
        let mut save_seen = false;
        for (lineno, raw) in text.lines().enumerate() {
            let t = raw.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let mut argv = Vec::new();
            let fatal = |msg: &str| FileError::Line { line: lineno + 1, text: t.to_string(), why: msg.to_string() };
            if !split_args(t.as_bytes(), &mut argv) {
                return Err(fatal("Unbalanced quotes in configuration line"));
            }
            if argv.is_empty() {
                continue;
            }
            let name = String::from_utf8_lossy(&argv[0]).to_ascii_lowercase();
            let vals: Vec<String> = argv[1..].iter().map(|v| String::from_utf8_lossy(v).into_owned()).collect();
            if name == "include" {
                for f in &vals {
                    let content = std::fs::read_to_string(f)
                        .map_err(|e| FileError::Open { file: f.clone(), why: e.to_string() })?;
                    warnings.extend(self.load_text(&content)?);
                }
                continue;
            }
            if name == "rename-command" {
                let [from, to] = &vals[..] else {
                    return Err(fatal("Bad directive or wrong number of arguments"));
                };
                self.renames.push(Rename { from: from.clone(), to: to.clone(), at: fatal("") });
                continue;
            }
            if name == "user" {
                if argv.len() < 2 {
                    return Err(fatal("Bad directive or wrong number of arguments"));
                }
                if self.users.iter().any(|u| u.argv[0] == argv[1]) {
                    return Err(fatal(&format!(
                        "Error in user declaration '{}': Duplicate user found. A user can only be defined once in config files",
                        String::from_utf8_lossy(&argv[1])
                    )));
                }
                self.users.push(ConfUser { argv: argv[1..].to_vec() });
                continue;
            }
            if IGNORED.contains(&name.as_str()) && vals.len() == 1 {
                continue;
            }
            if FILE_ONLY_PENDING.contains(&name.as_str()) {
                return Err(fatal(&format!("'{name}' is not supported by Atoll yet")));
            }
            let Some((i, def)) = find_def(&name) else {
                return Err(fatal("Bad directive or wrong number of arguments"));
            };
            // A multi-argument parameter's lone, non-empty argument holds them all (`--save
            // "3600 1 300 100"`): split as Redis's loader splits it.
            let mut vals = vals;
            if multi_arg(&def.kind) && vals.len() == 1 && !vals[0].is_empty() {
                let mut parts = Vec::new();
                if split_args(vals[0].as_bytes(), &mut parts) {
                    vals = parts.iter().map(|p| String::from_utf8_lossy(p).into_owned()).collect();
                }
            }
            let args: Vec<&str> = vals.iter().map(|s| s.as_str()).collect();
            let current = self.values.read()[i].clone();
            let mut v = value::parse(def, &args, &current).map_err(|e| fatal(&e.to_string()))?;
            if def.kind == Kind::Save && save_seen && !v.is_empty() && !current.is_empty() {
                v = format!("{current} {v}");
            }
            save_seen |= def.kind == Kind::Save;
            check_support(def, &v).map_err(|e| fatal(&e.to_string()))?;
            // maxclients beyond the open-files limit is lowered with a warning at start-up
            // (`net::run`, Redis's adjustOpenFilesLimit); only CONFIG SET refuses it. An
            // unknown `locale-collate` stops start-up there too, with Redis's log line.
            if def.name != "maxclients" && def.name != "locale-collate" {
                apply(def, &v).map_err(|e| fatal(&e.to_string()))?;
            }
            self.values.write()[i] = v;
        }
        self.refresh_hot();
        Ok(warnings)
    }

    /// A parameter's value by name, as CONFIG GET prints it: for names known only at run
    /// time (CONFIG GET's own, the tests). The server's own reads use the typed handles of
    /// [`p`] (`flag`, `int`, `text`), which need no lookup and cannot name a parameter that
    /// does not exist.
    /// A parameter's value by a name known only at run time (CONFIG GET's, a name a client
    /// gave); None if no parameter has it. The server's own reads go through the typed
    /// handles (`p::*`), checked when the program is compiled.
    pub fn lookup(&self, name: &str) -> Option<String> {
        find_def(name).map(|(i, def)| self.value_of(i, def))
    }

    /// A yes/no parameter.
    pub fn flag(&self, p: table::Param<bool>) -> bool {
        self.values.read()[p.idx] == "yes"
    }

    /// A numeric parameter (integers, memory sizes in bytes, octal modes).
    pub fn int(&self, p: table::Param<i64>) -> i64 {
        self.values.read()[p.idx].parse().unwrap_or(0)
    }

    /// Any parameter, as CONFIG GET prints it.
    pub fn text(&self, p: table::Param<String>) -> String {
        self.value_of(p.idx, &DEFS[p.idx])
    }

    fn value_of(&self, i: usize, def: &Def) -> String {
        if def.kind == Kind::Dir {
            return std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_default();
        }
        let v = self.values.read()[i].clone();
        // `notify-keyspace-events` with `A` keeps `n` on but does not print it (Redis's
        // keyspaceEventsFlagsToString); the stored value has it for the flags.
        if def.kind == Kind::Events && v.starts_with("An") {
            return format!("A{}", &v[2..]);
        }
        v
    }

    /// CONFIG GET: (name, value) pairs for every parameter matching any pattern. A pattern
    /// without glob characters is an exact (case-insensitive) name, answered under the name as
    /// typed, hidden parameters included; a glob lists registered names, aliases too. A name
    /// is reported once (Redis's dictionary of replies).
    pub fn matching(&self, patterns: &[&[u8]]) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        let push = |out: &mut Vec<(String, String)>, k: String, v: String| {
            if !out.iter().any(|(o, _)| o.eq_ignore_ascii_case(&k)) {
                out.push((k, v));
            }
        };
        for p in patterns {
            if !p.iter().any(|c| matches!(c, b'*' | b'?' | b'[')) {
                let typed = String::from_utf8_lossy(p).into_owned();
                if let Some((i, def)) = find_def(&typed) {
                    let v = self.value_of(i, def);
                    push(&mut out, typed, v);
                }
                continue;
            }
            for (i, d) in DEFS.iter().enumerate() {
                if d.has(table::HIDDEN) {
                    continue;
                }
                for n in std::iter::once(d.name).chain(d.alias) {
                    if glob_match(p, n.as_bytes(), true) {
                        let v = self.value_of(i, d);
                        push(&mut out, n.to_string(), v);
                    }
                }
            }
        }
        out
    }

    /// CONFIG SET of several pairs, all or nothing, with Redis's checks in Redis's order: names
    /// first (unknown, immutable, protected, duplicate: the first problem wins), then values.
    /// `local`: the client is on loopback or the unix socket (`enable-protected-configs local`).
    /// Errors are Redis's full reply text.
    pub fn set_many(&self, pairs: &[(&[u8], &[u8])], local: bool) -> Result<(), SetError> {
        let protected_ok = match self.text(crate::config::p::ENABLE_PROTECTED_CONFIGS).as_str() {
            "yes" => true,
            "local" => local,
            _ => false,
        };
        let mut found: Vec<(usize, &'static Def, String)> = Vec::new();
        for (name, _) in pairs {
            let typed = String::from_utf8_lossy(name).into_owned();
            let Some((i, def)) = find_def(&typed) else {
                return Err(SetError::Unknown(typed));
            };
            if def.has(table::IMMUTABLE) {
                return Err(set_err(&typed, ConfigError::Immutable));
            }
            if def.has(table::PROTECTED) && !protected_ok {
                return Err(set_err(&typed, ConfigError::Protected));
            }
            // The same spelling twice; a name and its alias are two entries for Redis.
            if found.iter().any(|(j, _, t)| *j == i && t.eq_ignore_ascii_case(&typed)) {
                return Err(set_err(&typed, ConfigError::Duplicate));
            }
            found.push((i, def, typed));
        }
        let mut staged: Vec<(usize, &'static Def, String)> = Vec::new();
        for ((i, def, typed), (_, v)) in found.into_iter().zip(pairs) {
            let shown = registered_name(def, &typed);
            let current = staged
                .iter()
                .rev()
                .find(|(j, _, _)| *j == i)
                .map(|s| s.2.clone())
                .unwrap_or_else(|| self.value_of(i, def));
            let w = words(def, &String::from_utf8_lossy(v));
            let args: Vec<&str> = w.iter().map(|s| s.as_str()).collect();
            let v = value::parse(def, &args, &current).map_err(|e| set_err(shown, e))?;
            if let Support::FileOnly(what) = def.support {
                if v != current {
                    return Err(set_err(shown, ConfigError::NotYet(what)));
                }
            }
            check_support(def, &v).map_err(|e| set_err(shown, e))?;
            staged.push((i, def, v));
        }
        // Apply (a `dir` that cannot be entered fails here); earlier ones are rolled back.
        let mut applied: Vec<(usize, &'static Def, String)> = Vec::new();
        for (i, def, v) in &staged {
            let before = self.value_of(*i, def);
            if let Err(e) = apply(def, v) {
                for (j, d, old) in applied.into_iter().rev() {
                    let _ = apply(d, &old);
                    self.values.write()[j] = old;
                }
                return Err(set_err(registered_name(def, def.name), e));
            }
            applied.push((*i, def, before));
            self.values.write()[*i] = v.clone();
        }
        // The OOM score depends on two parameters: written once both are in place.
        if staged.iter().any(|(_, d, _)| d.name.starts_with("oom-score-adj")) {
            if let Err(e) = process::set_oom_score(
                &self.text(crate::config::p::OOM_SCORE_ADJ),
                &self.text(crate::config::p::OOM_SCORE_ADJ_VALUES),
            ) {
                for (j, _, old) in applied.into_iter().rev() {
                    self.values.write()[j] = old;
                }
                let _ = process::set_oom_score(
                    &self.text(crate::config::p::OOM_SCORE_ADJ),
                    &self.text(crate::config::p::OOM_SCORE_ADJ_VALUES),
                );
                return Err(set_err("oom-score-adj", e));
            }
        }
        if staged.iter().any(|(_, d, _)| d.name == "proc-title-template") {
            process::set_title(self, None);
        }
        self.refresh_hot();
        Ok(())
    }

    /// Sets a value from inside the server (maxclients lowered to the open-files limit).
    pub fn set_internal(&self, name: &str, v: &str) {
        if let Some((i, _)) = find_def(name) {
            self.values.write()[i] = v.to_string();
            self.refresh_hot();
        }
    }

    /// CONFIG REWRITE, as Redis 7.2 does it: each parameter goes on the first line where it
    /// (or its alias) appeared, under its primary name, and later lines for it are dropped;
    /// comments, blank lines and `include`/`rename-command` lines stay; unknown lines are kept
    /// commented out (`# ??? ...`); parameters not in the file and not at their default are
    /// appended after `# Generated by CONFIG REWRITE`; `save` and `dir` are always written.
    /// Written to a temporary file, fsynced, renamed into place.
    ///
    /// `users`: the ACL users' lines (`user name rules…`), written where the file had `user`
    /// lines (the rest after them, as Redis); empty when an ACL file holds them (the file's
    /// `user` lines are then dropped). `force_all` (DEBUG CONFIG-REWRITE-FORCE-ALL) appends
    /// every parameter not in the file, defaults included.
    pub fn rewrite(&self, path: &str, users: &[String], force_all: bool) -> std::io::Result<()> {
        let old = std::fs::read_to_string(path).unwrap_or_default();
        let mut done = vec![false; DEFS.len()];
        let mut out: Vec<String> = Vec::new();
        let mut users = users.iter();
        for raw in old.lines() {
            let t = raw.trim();
            let mut argv = Vec::new();
            if t.is_empty() || t.starts_with('#') {
                out.push(t.to_string());
                continue;
            }
            if !split_args(t.as_bytes(), &mut argv) || argv.is_empty() {
                out.push(format!("# ??? {t}"));
                continue;
            }
            let name = String::from_utf8_lossy(&argv[0]).to_ascii_lowercase();
            if name == "user" {
                out.extend(users.next().cloned());
                continue;
            }
            if FILE_ONLY.contains(&name.as_str()) {
                out.push(t.to_string());
                continue;
            }
            match find_def(&name) {
                Some((i, def)) if !done[i] => {
                    done[i] = true;
                    out.extend(self.lines_for(i, def));
                }
                Some(_) => {}
                None => out.push(format!("# ??? {t}")),
            }
        }
        let marker = "# Generated by CONFIG REWRITE";
        let mut header = out.iter().any(|l| l == marker);
        for (i, def) in DEFS.iter().enumerate() {
            let always = matches!(def.kind, Kind::Save | Kind::Dir);
            if !done[i] && (always || force_all || self.value_of(i, def) != def.default) {
                if !header {
                    out.push(marker.to_string());
                    header = true;
                }
                out.extend(self.lines_for(i, def));
            }
        }
        for u in users {
            if !header {
                out.push(marker.to_string());
                header = true;
            }
            out.push(u.clone());
        }
        // Runs of blank lines collapse to one.
        let mut text = String::new();
        let mut blank = false;
        for l in out {
            if l.is_empty() && blank {
                continue;
            }
            blank = l.is_empty();
            text.push_str(&l);
            text.push('\n');
        }
        let tmp = format!("{path}.tmp-{}", std::process::id());
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, path)
    }

    /// The config-file lines that set parameter `i` to its current value.
    fn lines_for(&self, i: usize, def: &Def) -> Vec<String> {
        let v = self.value_of(i, def);
        match def.kind {
            // No master: no line; nor in cluster mode, where nodes.conf names the master and
            // a `replicaof` line would stop the next start (Redis's
            // rewriteConfigReplicaOfOption).
            Kind::Replicaof if v.is_empty() || self.flag(p::CLUSTER_ENABLED) => Vec::new(),
            Kind::Save if !v.is_empty() => {
                let w: Vec<&str> = v.split(' ').collect();
                w.chunks(2).map(|p| format!("save {} {}", p[0], p[1])).collect()
            }
            Kind::OutputLimits => {
                let classes = ["normal", "replica", "pubsub"];
                value::output_limits(&v)
                    .iter()
                    .zip(classes)
                    .map(|([h, s, t], c)| {
                        format!("{} {c} {} {} {t}", def.name, value::format_memory(*h), value::format_memory(*s))
                    })
                    .collect()
            }
            _ => vec![format!("{} {}", def.name, value::rewrite_words(def, &v).join(" "))],
        }
    }

    fn refresh_hot(&self) {
        let vals = self.values.read();
        let get = |n: &str| &vals[find_def(n).unwrap().0];
        let h = &self.hot;
        h.proto_max_bulk_len.store(get("proto-max-bulk-len").parse().unwrap_or(512 << 20), Ordering::Relaxed);
        h.client_query_buffer_limit
            .store(get("client-query-buffer-limit").parse().unwrap_or(1 << 30), Ordering::Relaxed);
        h.maxclients.store(get("maxclients").parse().unwrap_or(10000), Ordering::Relaxed);
        h.timeout.store(get("timeout").parse().unwrap_or(0), Ordering::Relaxed);
        h.protected_mode.store(get("protected-mode") == "yes", Ordering::Relaxed);
        h.io_batch_wait.store(get("io-batch-wait").parse().unwrap_or(0), Ordering::Relaxed);
        h.busy_reply_ms.store(get("busy-reply-threshold").parse().unwrap_or(5000), Ordering::Relaxed);
        let hz = get("hz").parse::<u32>().unwrap_or(10).clamp(1, 500);
        h.hz.store(hz, Ordering::Relaxed);
        // The cron recomputes it at its next tick (with `dynamic-hz`).
        h.effective_hz.store(hz, Ordering::Relaxed);
        h.dynamic_hz.store(get("dynamic-hz") == "yes", Ordering::Relaxed);
        // As in Redis, jemalloc's background thread returns freed pages (old hash tables after a
        // rehash, deleted values) to the OS without waiting for the next allocation to notice.
        let bg = get("jemalloc-bg-thread") == "yes";
        if tikv_jemalloc_ctl::background_thread::read().is_ok_and(|cur| cur != bg) {
            let _ = tikv_jemalloc_ctl::background_thread::write(bg);
        }
        let num = |n: &str| get(n).parse::<i64>().unwrap_or(0);
        h.list_max_listpack_size.store(num("list-max-listpack-size"), Ordering::Relaxed);
        // Redis's quicklist keeps at most 16 bits of depth (`COMPRESS_MAX`).
        let depth = num("list-compress-depth").clamp(0, 65535) as usize;
        crate::engine::list::COMPRESS_DEPTH.store(depth, Ordering::Relaxed);
        for (a, n) in [
            (&h.hash_max_listpack_entries, "hash-max-listpack-entries"),
            (&h.hash_max_listpack_value, "hash-max-listpack-value"),
            (&h.set_max_intset_entries, "set-max-intset-entries"),
            (&h.set_max_listpack_entries, "set-max-listpack-entries"),
            (&h.set_max_listpack_value, "set-max-listpack-value"),
            (&h.zset_max_listpack_entries, "zset-max-listpack-entries"),
            (&h.zset_max_listpack_value, "zset-max-listpack-value"),
        ] {
            a.store(num(n).max(0) as usize, Ordering::Relaxed);
        }
        let slower = num("slowlog-log-slower-than");
        let monitor = num("latency-monitor-threshold").max(0) as u64;
        h.slowlog_slower_than.store(slower, Ordering::Relaxed);
        h.slowlog_max_len.store(num("slowlog-max-len").max(0) as usize, Ordering::Relaxed);
        let over = |n: &str| u64::try_from(num(n)).unwrap_or(u64::MAX);
        h.large_request_over.store(over("commandlog-request-larger-than"), Ordering::Relaxed);
        h.large_reply_over.store(over("commandlog-reply-larger-than"), Ordering::Relaxed);
        h.large_request_max.store(num("commandlog-large-request-max-len").max(0) as usize, Ordering::Relaxed);
        h.large_reply_max.store(num("commandlog-large-reply-max-len").max(0) as usize, Ordering::Relaxed);
        h.latency_monitor_ms.store(monitor, Ordering::Relaxed);
        h.latency_tracking.store(get("latency-tracking") == "yes", Ordering::Relaxed);
        let slow_log = if slower >= 0 { slower as u64 } else { u64::MAX };
        let slow_mon = if monitor > 0 { monitor.saturating_mul(1000) } else { u64::MAX };
        h.slow_us.store(slow_log.min(slow_mon), Ordering::Relaxed);
        h.hotkeys.store(get("hotkeys") == "yes", Ordering::Relaxed);
        h.lazy_user_del.store(get("lazyfree-lazy-user-del") == "yes", Ordering::Relaxed);
        h.tracking_max_keys.store(get("tracking-table-max-keys").parse().unwrap_or(1_000_000), Ordering::Relaxed);
        h.maxmemory.store(get("maxmemory").parse().unwrap_or(0), Ordering::Relaxed);
        h.maxmemory_policy.store(policy_code(get("maxmemory-policy")), Ordering::Relaxed);
        h.maxmemory_samples.store(get("maxmemory-samples").parse().unwrap_or(5), Ordering::Relaxed);
        h.maxmemory_tenacity.store(get("maxmemory-eviction-tenacity").parse().unwrap_or(10), Ordering::Relaxed);
        h.lfu_log_factor.store(get("lfu-log-factor").parse().unwrap_or(10), Ordering::Relaxed);
        h.lfu_decay_time.store(get("lfu-decay-time").parse().unwrap_or(1), Ordering::Relaxed);
        h.lazy_eviction.store(get("lazyfree-lazy-eviction") == "yes", Ordering::Relaxed);
        let mc = get("maxmemory-clients");
        let mc = match mc.strip_suffix('%') {
            Some(p) => -p.parse::<i64>().unwrap_or(0),
            None => mc.parse().unwrap_or(0),
        };
        h.maxmemory_clients.store(mc, Ordering::Relaxed);
        h.notify.store(events::flags_of(get("notify-keyspace-events")), Ordering::Relaxed);
        let limits = value::output_limits(get("client-output-buffer-limit"));
        for (i, class) in [0, 2, 1].into_iter().enumerate() {
            for (j, v) in limits[class].iter().enumerate() {
                h.obuf[i * 3 + j].store(*v, Ordering::Relaxed);
            }
        }
        // A replica's hard limit is never below `repl-backlog-size` (Redis's
        // checkClientOutputBufferLimits): what it has not read yet is in the backlog anyway, and
        // a lower limit would turn every partial resync after a burst into a disconnection.
        let backlog = get("repl-backlog-size").parse::<u64>().unwrap_or(1 << 20);
        let replica_hard = &h.obuf[2 * 3];
        let hard = replica_hard.load(Ordering::Relaxed);
        if hard > 0 && hard < backlog {
            replica_hard.store(backlog, Ordering::Relaxed);
        }
        let look = [0, 2].iter().flat_map(|&c| &limits[c][..2]).copied().filter(|&b| b > 0).min().unwrap_or(u64::MAX);
        h.obuf_look.store(look, Ordering::Relaxed);
        h.batch_look.store(if mc != 0 { look.min(32 << 10) } else { look }, Ordering::Relaxed);
        let track = (get("latency-tracking") == "yes") as u32 * TRACK_LATENCY
            + (get("hotkeys") == "yes") as u32 * TRACK_HOTKEYS;
        // The session's bit is the HOTKEYS command's, not the table's: keep it.
        let _ = h.track.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| Some(track | (t & TRACK_SESSION)));
        let lvl = LOGLEVELS.iter().position(|l| l == get("loglevel")).unwrap_or(2);
        h.loglevel.store(lvl as u32, Ordering::Relaxed);
    }

    /// Worker threads: `threads`, else `io-threads` if set above 1, else the number of cores.
    pub fn worker_threads(&self) -> usize {
        let t = self.int(crate::config::p::THREADS);
        if t > 0 {
            return t as usize;
        }
        let io = self.int(crate::config::p::IO_THREADS);
        if io > 1 {
            return io as usize;
        }
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    }
}

/// Raises the open-files limit for maxclients as Redis does; returns the maxclients to use.
pub fn adjust_open_files(maxclients: usize) -> usize {
    const RESERVED: u64 = 32;
    let want = maxclients as u64 + RESERVED;
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return maxclients;
    }
    if lim.rlim_cur >= want {
        return maxclients;
    }
    let mut best = lim.rlim_cur;
    let mut f = want;
    while f > lim.rlim_cur {
        let nl = libc::rlimit { rlim_cur: f, rlim_max: f.max(lim.rlim_max) };
        let nl = if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &nl) } == 0 {
            Some(f)
        } else {
            let nl2 = libc::rlimit { rlim_cur: f.min(lim.rlim_max), rlim_max: lim.rlim_max };
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &nl2) } == 0 {
                Some(f.min(lim.rlim_max))
            } else {
                None
            }
        };
        if let Some(v) = nl {
            best = v;
            break;
        }
        f -= 16.min(f);
    }
    if best >= want {
        return maxclients;
    }
    crate::log_warning!("You requested maxclients of {} requiring at least {} max file descriptors.", maxclients, want);
    let reduced = best.saturating_sub(RESERVED).max(1) as usize;
    crate::log_warning!(
        "Server can't set maximum open files to {} because of OS error: Operation not permitted.",
        want
    );
    crate::log_warning!(
        "Current maximum open files is {}. maxclients has been reduced to {} to compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'.",
        best,
        reduced
    );
    reduced
}

/// Refuses a value that asks for a feature Atoll does not have yet (see `table::Support`).
fn check_support(def: &Def, v: &str) -> Result<(), ConfigError> {
    if let Support::Unable(why) = def.support {
        return if v == def.default { Ok(()) } else { Err(ConfigError::BadValue(why.into())) };
    }
    let Support::Pending(what) = def.support else { return Ok(()) };
    let fine = match def.kind {
        // Only the normal class is enforced for clients Atoll has; replica and pub/sub limits
        // wait for those features and change nothing today.
        Kind::OutputLimits => value::output_limits(v)[0] == [0, 0, 0],
        _ => v == def.default,
    };
    if fine {
        Ok(())
    } else {
        Err(ConfigError::NotYet(what))
    }
}

/// Rebinds the TCP listeners to a port (0: none), installed by the server once it listens:
/// CONFIG SET port. The configuration names nothing above it, so the server hands it this.
pub static LISTEN: std::sync::OnceLock<Box<Listen>> = std::sync::OnceLock::new();
pub type Listen = dyn Fn(u16) -> Result<(), ConfigError> + Send + Sync;

/// Carries out a value that acts at once: the working directory, the open-files limit that
/// maxclients needs, the port listened on.
fn apply(def: &Def, v: &str) -> Result<(), ConfigError> {
    if def.name == "port" {
        if let Some(listen) = LISTEN.get() {
            listen(v.parse().unwrap_or(0))?;
        }
    }
    if def.name == "maxclients" {
        let want: usize = v.parse().unwrap_or(0);
        let got = adjust_open_files(want);
        if got != want {
            return Err(ConfigError::Apply(format!(
                "The operating system is not able to handle the specified number of clients, try with {got}"
            )));
        }
    }
    if def.name == "use-exit-on-panic" {
        crate::log::exit_on_panic(v == "yes");
    }
    if def.name == "hide-user-data-from-log" {
        crate::log::hide_user_data(v == "yes");
    }
    if def.name == "proc-title-template" && !process::valid_title_template(v) {
        return Err(ConfigError::Apply("template format is invalid or contains unknown variables".into()));
    }
    if def.name == "locale-collate" {
        crate::collate::set(v).map_err(|e| ConfigError::Apply(e.to_string()))?;
    }
    if def.kind == Kind::Dir && !v.is_empty() {
        std::env::set_current_dir(v).map_err(|e| ConfigError::Apply(crate::log::strerror(&e)))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_then_flags() {
        let path = std::env::temp_dir().join(format!("atoll-conf-{}", std::process::id()));
        std::fs::write(&path, "# comment\nport 7000\nsave \"\"\nbind 127.0.0.1 ::1\nhash-max-ziplist-entries 64\n")
            .unwrap();
        let args: Vec<String> =
            vec![path.display().to_string(), "--port".into(), "7001".into(), "--save".into(), "".into()];
        let (c, _) = Config::from_args(&args).unwrap();
        assert_eq!(c.lookup("port").unwrap(), "7001");
        assert_eq!(c.lookup("save").unwrap(), "");
        assert_eq!(c.lookup("bind").unwrap(), "127.0.0.1 ::1");
        assert_eq!(c.lookup("hash-max-listpack-entries").unwrap(), "64");
        std::fs::remove_file(path).ok();
    }

    #[test]
    fn bad_lines_are_fatal_with_redis_texts() {
        let err = Config::from_args(&["--port".into(), "abc".into()]).err().unwrap().to_string();
        assert!(err.ends_with("at line 2\n>>> 'port \"abc\"'\nargument couldn't be parsed into an integer"), "{err}");
        let err = Config::from_args(&["--foo".into(), "bar".into()]).err().unwrap().to_string();
        assert!(err.ends_with("Bad directive or wrong number of arguments"), "{err}");
        let err = Config::from_args(&["--maxmemory".into(), "--port".into(), "7398".into()]).err().unwrap().to_string();
        assert!(err.contains(">>> 'maxmemory \"--port\" \"7398\"'\nwrong number of arguments"), "{err}");
        // A setting Atoll cannot honour is refused, never ignored.
        let err = Config::from_args(&["--server_cpulist".into(), "0-1".into()]).err().unwrap().to_string();
        assert!(err.ends_with("not supported by Atoll yet: CPU affinity lists"), "{err}");
        assert!(Config::from_args(&["--server_cpulist".into(), "".into()]).is_ok());
        // More clients than the open-files limit allows is lowered at start-up, not refused.
        assert!(Config::from_args(&["--maxclients".into(), "4000000".into()]).is_ok());
        // Old names Redis 7.2 still reads and ignores.
        assert!(Config::from_args(&["--list-max-ziplist-entries".into(), "5".into()]).is_ok());
    }

    #[test]
    fn config_set_rules() {
        let c = Config::defaults();
        assert!(c.set_many(&[(b"timeout", b"5"), (b"hz", b"20")], true).is_ok());
        assert_eq!(c.hot.timeout.load(Ordering::Relaxed), 5);
        let e = c.set_many(&[(b"databases", b"3")], true).unwrap_err().to_string();
        assert!(e.contains("can't set immutable config"));
        let e = c.set_many(&[(b"nope", b"3")], true).unwrap_err().to_string();
        assert_eq!(e, "ERR Unknown option or number of arguments for CONFIG SET - 'nope'");
        // All or nothing.
        assert!(c.set_many(&[(b"timeout", b"7"), (b"hz", b"x")], true).is_err());
        assert_eq!(c.lookup("timeout").unwrap(), "5");
        // An alias sets the same value; name and alias in one call are not duplicates.
        assert!(c
            .set_many(&[(b"zset-max-ziplist-entries", b"10"), (b"zset-max-listpack-entries", b"20")], true)
            .is_ok());
        assert_eq!(c.lookup("zset-max-ziplist-entries").unwrap(), "20");
        let e = c.set_many(&[(b"timeout", b"1"), (b"TIMEOUT", b"2")], true).unwrap_err().to_string();
        assert!(e.ends_with("(possibly related to argument 'TIMEOUT') - duplicate parameter"), "{e}");
        let e = c.set_many(&[(b"dir", b"/tmp")], true).unwrap_err().to_string();
        assert!(e.ends_with("can't set protected config"), "{e}");
        let e = c.set_many(&[(b"tls-port", b"6380")], true).unwrap_err().to_string();
        assert!(e.contains("not supported by Atoll yet: rebinding listeners"), "{e}");
        assert!(c.set_many(&[(b"maxmemory", b"1mb")], true).is_ok());
        assert_eq!(c.hot.maxmemory.load(Ordering::Relaxed), 1 << 20);
    }

    #[test]
    fn config_get_patterns_and_aliases() {
        let c = Config::defaults();
        let keys = |p: &[&[u8]]| c.matching(p).into_iter().map(|(k, _)| k).collect::<Vec<_>>();
        assert_eq!(keys(&[b"HASH-MAX-ZIPLIST-ENTRIES"]), ["HASH-MAX-ZIPLIST-ENTRIES"]);
        let mut k = keys(&[b"hash-max-*-entries"]);
        k.sort();
        assert_eq!(k, ["hash-max-listpack-entries", "hash-max-ziplist-entries"]);
        assert_eq!(keys(&[b"maxmemory", b"MAXMEMORY"]), ["maxmemory"]);
        // Hidden parameters answer only to their exact name.
        assert!(keys(&[b"*watchdog*"]).is_empty());
        assert_eq!(keys(&[b"watchdog-period"]), ["watchdog-period"]);
    }
}
