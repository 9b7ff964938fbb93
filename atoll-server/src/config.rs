//! The configuration table (DESIGN habit 7).
//!
//! One table of directives — name, aliases, type, default, mutability — drives the redis.conf
//! file, the `--directive value` command-line flags and CONFIG GET/SET. Directives marked
//! `stored` are Redis directives Atoll accepts and reports but does not act on yet (so a stock
//! redis.conf loads and tools that CONFIG GET them get an answer); a directive that is in no
//! table at all is accepted with a warning.

use crate::engine::glob::glob_match;
use crate::protocol::parser::split_args;
use parking_lot::RwLock;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicUsize, Ordering};

#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Bool,
    Int {
        min: i64,
        max: i64,
    },
    /// A byte count with Redis's units (`1gb`, `512mb`, `1k` …).
    Memory {
        min: i64,
        max: i64,
    },
    Str,
    Enum(&'static [&'static str]),
    /// Multi-word values (bind, save, client-output-buffer-limit …): kept as given.
    Words,
}

pub struct Def {
    pub name: &'static str,
    pub alias: Option<&'static str>,
    pub kind: Kind,
    pub default: &'static str,
    pub mutable: bool,
    /// Accepted and reported, not acted on yet.
    pub stored: bool,
}

const fn d(name: &'static str, kind: Kind, default: &'static str, mutable: bool) -> Def {
    Def { name, alias: None, kind, default, mutable, stored: false }
}
const fn s(name: &'static str, kind: Kind, default: &'static str) -> Def {
    Def { name, alias: None, kind, default, mutable: true, stored: true }
}

const I64MAX: i64 = i64::MAX;
const LOGLEVELS: &[&str] = &["debug", "verbose", "notice", "warning", "nothing"];
const YESNO_LOCAL: &[&str] = &["yes", "no", "local"];

pub static DEFS: &[Def] = &[
    d("bind", Kind::Words, "127.0.0.1 -::1", false),
    d("port", Kind::Int { min: 0, max: 65535 }, "6379", false),
    d("unixsocket", Kind::Str, "", false),
    d("unixsocketperm", Kind::Int { min: 0, max: 0o777 }, "0", false),
    d("tcp-backlog", Kind::Int { min: 0, max: i32::MAX as i64 }, "511", false),
    d("maxclients", Kind::Int { min: 1, max: i32::MAX as i64 }, "10000", true),
    d("timeout", Kind::Int { min: 0, max: i32::MAX as i64 }, "0", true),
    d("tcp-keepalive", Kind::Int { min: 0, max: i32::MAX as i64 }, "300", true),
    d("protected-mode", Kind::Bool, "yes", true),
    d("requirepass", Kind::Str, "", true),
    d("databases", Kind::Int { min: 1, max: 65535 }, "16", false),
    d("threads", Kind::Int { min: 0, max: 1024 }, "0", false),
    // Atoll's own: how workers move bytes. io_uring (less server CPU than epoll pipelined and
    // over unix sockets, the same unpipelined over TCP; docs/BENCHMARKS.md) falls back to
    // epoll where the kernel refuses it.
    d("io-backend", Kind::Enum(&["epoll", "io_uring"]), "io_uring", false),
    // Atoll's own: the longest an io_uring worker waits for more requests before serving those
    // it has, in microseconds (0: never waits). The wait actually used adapts to the load; see
    // `server::uring::Pacing`.
    d("io-batch-wait", Kind::Int { min: 0, max: 1000 }, "50", true),
    Def {
        name: "io-threads",
        alias: None,
        kind: Kind::Int { min: 1, max: 128 },
        default: "1",
        mutable: false,
        stored: false,
    },
    d("loglevel", Kind::Enum(LOGLEVELS), "notice", true),
    d("logfile", Kind::Str, "", false),
    d("pidfile", Kind::Str, "", false),
    d("dir", Kind::Str, "", true),
    d("proto-max-bulk-len", Kind::Memory { min: 1024 * 1024, max: I64MAX }, "536870912", true),
    d("client-query-buffer-limit", Kind::Memory { min: 1024 * 1024, max: I64MAX }, "1073741824", true),
    d("hz", Kind::Int { min: 0, max: i32::MAX as i64 }, "10", true),
    d("enable-debug-command", Kind::Enum(YESNO_LOCAL), "no", false),
    // Accepted so stock configs load; Atoll always runs in the foreground (use a supervisor).
    Def { name: "daemonize", alias: None, kind: Kind::Bool, default: "no", mutable: false, stored: true },
    // Accepted and reported; they take effect as their features land.
    s("save", Kind::Words, "3600 1 300 100 60 10000"),
    s("appendonly", Kind::Bool, "no"),
    s("appendfilename", Kind::Str, "appendonly.aof"),
    s("appenddirname", Kind::Str, "appendonlydir"),
    s("appendfsync", Kind::Enum(&["always", "everysec", "no"]), "everysec"),
    s("dbfilename", Kind::Str, "dump.rdb"),
    s("rdbcompression", Kind::Bool, "yes"),
    s("rdbchecksum", Kind::Bool, "yes"),
    s("stop-writes-on-bgsave-error", Kind::Bool, "yes"),
    s("maxmemory", Kind::Memory { min: 0, max: I64MAX }, "0"),
    s(
        "maxmemory-policy",
        Kind::Enum(&[
            "volatile-lru",
            "allkeys-lru",
            "volatile-lfu",
            "allkeys-lfu",
            "volatile-random",
            "allkeys-random",
            "volatile-ttl",
            "noeviction",
        ]),
        "noeviction",
    ),
    s("maxmemory-samples", Kind::Int { min: 1, max: 64 }, "5"),
    s("notify-keyspace-events", Kind::Str, ""),
    s("slowlog-log-slower-than", Kind::Int { min: -1, max: I64MAX }, "10000"),
    s("slowlog-max-len", Kind::Int { min: 0, max: I64MAX }, "128"),
    s("latency-monitor-threshold", Kind::Int { min: 0, max: I64MAX }, "0"),
    s("lua-time-limit", Kind::Int { min: 0, max: I64MAX }, "5000"),
    s("busy-reply-threshold", Kind::Int { min: 0, max: I64MAX }, "5000"),
    s("client-output-buffer-limit", Kind::Words, "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"),
    s("list-max-listpack-size", Kind::Int { min: i32::MIN as i64, max: i32::MAX as i64 }, "-2"),
    s("list-compress-depth", Kind::Int { min: 0, max: i32::MAX as i64 }, "0"),
    s("hash-max-listpack-entries", Kind::Int { min: 0, max: I64MAX }, "128"),
    s("hash-max-listpack-value", Kind::Int { min: 0, max: I64MAX }, "64"),
    s("set-max-intset-entries", Kind::Int { min: 0, max: I64MAX }, "512"),
    s("set-max-listpack-entries", Kind::Int { min: 0, max: I64MAX }, "128"),
    s("set-max-listpack-value", Kind::Int { min: 0, max: I64MAX }, "64"),
    s("zset-max-listpack-entries", Kind::Int { min: 0, max: I64MAX }, "128"),
    s("zset-max-listpack-value", Kind::Int { min: 0, max: I64MAX }, "64"),
    s("stream-node-max-bytes", Kind::Memory { min: 0, max: I64MAX }, "4096"),
    s("stream-node-max-entries", Kind::Int { min: 0, max: I64MAX }, "100"),
    s("hll-sparse-max-bytes", Kind::Memory { min: 0, max: I64MAX }, "3000"),
    s("activerehashing", Kind::Bool, "yes"),
    s("lazyfree-lazy-eviction", Kind::Bool, "no"),
    s("lazyfree-lazy-expire", Kind::Bool, "no"),
    s("lazyfree-lazy-server-del", Kind::Bool, "no"),
    s("lazyfree-lazy-user-del", Kind::Bool, "no"),
    s("lazyfree-lazy-user-flush", Kind::Bool, "no"),
    s("replica-read-only", Kind::Bool, "yes"),
    s("repl-diskless-sync", Kind::Bool, "yes"),
    s("cluster-enabled", Kind::Bool, "no"),
    s("supervised", Kind::Enum(&["upstart", "systemd", "auto", "no"]), "no"),
    s("always-show-logo", Kind::Bool, "no"),
    s("set-proc-title", Kind::Bool, "yes"),
    s("aof-use-rdb-preamble", Kind::Bool, "yes"),
    s("no-appendfsync-on-rewrite", Kind::Bool, "no"),
    s("auto-aof-rewrite-percentage", Kind::Int { min: 0, max: I64MAX }, "100"),
    s("auto-aof-rewrite-min-size", Kind::Memory { min: 0, max: I64MAX }, "67108864"),
    s("lfu-log-factor", Kind::Int { min: 0, max: I64MAX }, "10"),
    s("lfu-decay-time", Kind::Int { min: 0, max: I64MAX }, "1"),
    s("active-expire-effort", Kind::Int { min: 1, max: 10 }, "1"),
    s("dynamic-hz", Kind::Bool, "yes"),
    s("io-threads-do-reads", Kind::Bool, "no"),
    s("syslog-enabled", Kind::Bool, "no"),
    s("crash-log-enabled", Kind::Bool, "yes"),
    d("jemalloc-bg-thread", Kind::Bool, "yes", true),
];

/// Values read on hot paths, mirrored into atomics whenever the table changes.
#[derive(Default)]
pub struct Hot {
    pub proto_max_bulk_len: AtomicI64,
    pub client_query_buffer_limit: AtomicUsize,
    pub maxclients: AtomicUsize,
    pub timeout: AtomicU64,
    pub protected_mode: AtomicBool,
    pub has_password: AtomicBool,
    pub hz: AtomicU32,
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
}

pub struct Config {
    values: RwLock<Vec<String>>,
    pub hot: Hot,
    pub config_file: Option<String>,
}

/// Parses Redis memory units: `1k`=1000, `1kb`=1024, `1m`, `1mb`, `1g`, `1gb` (case-insensitive).
pub fn parse_memory(s: &str) -> Option<i64> {
    let l = s.to_ascii_lowercase();
    let (num, mul): (&str, i64) = if let Some(n) = l.strip_suffix("gb") {
        (n, 1 << 30)
    } else if let Some(n) = l.strip_suffix("mb") {
        (n, 1 << 20)
    } else if let Some(n) = l.strip_suffix("kb") {
        (n, 1 << 10)
    } else if let Some(n) = l.strip_suffix('g') {
        (n, 1_000_000_000)
    } else if let Some(n) = l.strip_suffix('m') {
        (n, 1_000_000)
    } else if let Some(n) = l.strip_suffix('k') {
        (n, 1000)
    } else if let Some(n) = l.strip_suffix('b') {
        (n, 1)
    } else {
        (&l[..], 1)
    };
    let v: i64 = crate::protocol::parse_i64(num.as_bytes())?;
    v.checked_mul(mul)
}

/// Checks and normalises a value for a directive; the error is Redis's wording.
pub fn validate(def: &Def, value: &str) -> Result<String, String> {
    match def.kind {
        Kind::Bool => match value.to_ascii_lowercase().as_str() {
            "yes" => Ok("yes".into()),
            "no" => Ok("no".into()),
            _ => Err("argument must be 'yes' or 'no'".into()),
        },
        Kind::Int { min, max } => {
            let v = if def.name == "unixsocketperm" {
                i64::from_str_radix(value, 8).map_err(|_| "argument couldn't be parsed into an integer".to_string())?
            } else {
                crate::protocol::parse_i64(value.as_bytes())
                    .ok_or_else(|| "argument couldn't be parsed into an integer".to_string())?
            };
            if v < min || v > max {
                return Err(format!("argument must be between {min} and {max} inclusive"));
            }
            if def.name == "unixsocketperm" {
                return Ok(format!("{v:o}"));
            }
            Ok(v.to_string())
        }
        Kind::Memory { min, max } => {
            let v = parse_memory(value).ok_or_else(|| "argument must be a memory value".to_string())?;
            if v < min || v > max {
                return Err(format!("argument must be between {min} and {max} inclusive"));
            }
            Ok(v.to_string())
        }
        Kind::Enum(opts) => {
            let l = value.to_ascii_lowercase();
            if opts.contains(&l.as_str()) {
                Ok(l)
            } else {
                Err(format!("argument(s) must be one of the following: {}", opts.join(", ")))
            }
        }
        Kind::Str | Kind::Words => Ok(value.to_string()),
    }
}

pub fn find_def(name: &str) -> Option<(usize, &'static Def)> {
    let l = name.to_ascii_lowercase();
    DEFS.iter().enumerate().find(|(_, d)| d.name == l || d.alias == Some(l.as_str()))
}

impl Config {
    pub fn defaults() -> Config {
        let c = Config {
            values: RwLock::new(DEFS.iter().map(|d| d.default.to_string()).collect()),
            hot: Hot::default(),
            config_file: None,
        };
        c.refresh_hot();
        c
    }

    /// Loads `atoll-server [config-file] [--directive value ...]`, like redis-server: the file
    /// first, then the flags as if appended to it. Returns warnings to log once logging is set
    /// up; an error is the fatal message redis-server would print.
    pub fn from_args(args: &[String]) -> Result<(Config, Vec<String>), String> {
        let mut cfg = Config::defaults();
        let mut text = String::new();
        let mut rest = args;
        if let Some(first) = args.first() {
            if !first.starts_with("--") {
                let content = if first == "-" {
                    let mut s = String::new();
                    std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).map_err(|e| e.to_string())?;
                    s
                } else {
                    cfg.config_file =
                        Some(std::fs::canonicalize(first).map(|p| p.display().to_string()).unwrap_or(first.clone()));
                    std::fs::read_to_string(first)
                        .map_err(|e| format!("Fatal error, can't open config file '{first}': {e}"))?
                };
                text.push_str(&content);
                text.push('\n');
                rest = &args[1..];
            }
        }
        // Flags: "--port 6380 --bind a b" becomes lines "port 6380" / "bind a b".
        let mut line: Vec<String> = Vec::new();
        let flush = |line: &mut Vec<String>, text: &mut String| {
            if !line.is_empty() {
                let quoted: Vec<String> = line.iter().map(|a| quote_arg(a)).collect();
                text.push_str(&quoted.join(" "));
                text.push('\n');
                line.clear();
            }
        };
        for a in rest {
            if let Some(name) = a.strip_prefix("--") {
                flush(&mut line, &mut text);
                line.push(name.to_string());
            } else {
                if line.is_empty() {
                    return Err(format!("Invalid argument '{a}' (directives start with --)"));
                }
                line.push(a.clone());
            }
        }
        flush(&mut line, &mut text);
        let warnings = cfg.load_text(&text)?;
        Ok((cfg, warnings))
    }

    /// Applies redis.conf text. Errors read like redis-server's fatal config error.
    pub fn load_text(&mut self, text: &str) -> Result<Vec<String>, String> {
        let mut warnings = Vec::new();
        for (lineno, raw) in text.lines().enumerate() {
            let t = raw.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let mut argv = Vec::new();
            let fatal = |msg: &str| {
                format!(
                    "\n*** FATAL CONFIG FILE ERROR (Atoll {}) ***\nReading the configuration file, at line {}\n>>> '{}'\n{}",
                    env!("CARGO_PKG_VERSION"),
                    lineno + 1,
                    t,
                    msg
                )
            };
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
                    let content = std::fs::read_to_string(f).map_err(|e| fatal(&format!("can't open {f}: {e}")))?;
                    warnings.extend(self.load_text(&content)?);
                }
                continue;
            }
            match find_def(&name) {
                None => warnings.push(format!("Ignoring unsupported configuration directive '{name}'")),
                Some((i, def)) => {
                    let joined = match def.kind {
                        Kind::Words => vals.join(" "),
                        _ => {
                            if vals.len() != 1 {
                                return Err(fatal("wrong number of arguments"));
                            }
                            vals[0].clone()
                        }
                    };
                    let v = validate(def, &joined).map_err(|e| fatal(&e))?;
                    self.values.write()[i] = v;
                }
            }
        }
        self.refresh_hot();
        Ok(warnings)
    }

    pub fn get(&self, name: &str) -> String {
        let (i, _) = find_def(name).expect("config directive in table");
        self.values.read()[i].clone()
    }

    pub fn get_i64(&self, name: &str) -> i64 {
        self.get(name).parse().unwrap_or(0)
    }

    pub fn get_bool(&self, name: &str) -> bool {
        self.get(name) == "yes"
    }

    /// CONFIG GET: (name, value) pairs for every directive matching any pattern, in table order.
    pub fn matching(&self, patterns: &[&[u8]]) -> Vec<(&'static str, String)> {
        let vals = self.values.read();
        let mut out = Vec::new();
        for (i, d) in DEFS.iter().enumerate() {
            let names = std::iter::once(d.name).chain(d.alias);
            for n in names {
                if patterns.iter().any(|p| glob_match(p, n.as_bytes(), true)) {
                    out.push((n, vals[i].clone()));
                }
            }
        }
        out
    }

    /// CONFIG SET of several pairs, all or nothing. Errors are Redis's full reply text.
    pub fn set_many(&self, pairs: &[(&[u8], &[u8])]) -> Result<(), String> {
        let mut staged: Vec<(usize, String)> = Vec::new();
        for (name, value) in pairs {
            let n = String::from_utf8_lossy(name).to_string();
            let Some((i, def)) = find_def(&n) else {
                return Err(format!("ERR Unknown option or number of arguments for CONFIG SET - '{n}'"));
            };
            if staged.iter().any(|(j, _)| *j == i) {
                return Err(format!(
                    "ERR CONFIG SET failed (possibly related to argument '{n}') - duplicate parameter"
                ));
            }
            if !def.mutable {
                return Err(format!(
                    "ERR CONFIG SET failed (possibly related to argument '{n}') - can't set immutable config"
                ));
            }
            let v = String::from_utf8_lossy(value).to_string();
            let v = validate(def, &v)
                .map_err(|e| format!("ERR CONFIG SET failed (possibly related to argument '{n}') - {e}"))?;
            staged.push((i, v));
        }
        {
            let mut vals = self.values.write();
            for (i, v) in staged {
                vals[i] = v;
            }
        }
        self.refresh_hot();
        Ok(())
    }

    /// CONFIG REWRITE: replaces the lines of directives in the file with their current values,
    /// appends changed directives the file lacks, keeps comments and unknown lines, and
    /// writes through a temporary file renamed into place.
    pub fn rewrite(&self, path: &str) -> std::io::Result<()> {
        let old = std::fs::read_to_string(path).unwrap_or_default();
        let vals = self.values.read().clone();
        let mut done = vec![false; DEFS.len()];
        let mut out = String::new();
        for line in old.lines() {
            let t = line.trim();
            let mut argv = Vec::new();
            if t.is_empty() || t.starts_with('#') || !split_args(t.as_bytes(), &mut argv) || argv.is_empty() {
                out.push_str(line);
                out.push('\n');
                continue;
            }
            let name = String::from_utf8_lossy(&argv[0]).to_ascii_lowercase();
            match find_def(&name) {
                Some((i, def)) => {
                    if !done[i] {
                        done[i] = true;
                        out.push_str(&format_directive(def, &vals[i]));
                    }
                }
                None => {
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
        let mut header = false;
        for (i, def) in DEFS.iter().enumerate() {
            if !done[i] && vals[i] != def.default {
                if !header {
                    out.push_str("# Generated by CONFIG REWRITE\n");
                    header = true;
                }
                out.push_str(&format_directive(def, &vals[i]));
            }
        }
        let tmp = format!("{path}.tmp-{}", std::process::id());
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(out.as_bytes())?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, path)
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
        h.has_password.store(!get("requirepass").is_empty(), Ordering::Relaxed);
        h.io_batch_wait.store(get("io-batch-wait").parse().unwrap_or(0), Ordering::Relaxed);
        h.hz.store(get("hz").parse::<u32>().unwrap_or(10).clamp(1, 500), Ordering::Relaxed);
        // As in Redis, jemalloc's background thread returns freed pages (old hash tables after a
        // rehash, deleted values) to the OS without waiting for the next allocation to notice.
        let bg = get("jemalloc-bg-thread") == "yes";
        if tikv_jemalloc_ctl::background_thread::read().is_ok_and(|cur| cur != bg) {
            let _ = tikv_jemalloc_ctl::background_thread::write(bg);
        }
        let num = |n: &str| get(n).parse::<i64>().unwrap_or(0);
        h.list_max_listpack_size.store(num("list-max-listpack-size"), Ordering::Relaxed);
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
        let lvl = LOGLEVELS.iter().position(|l| l == get("loglevel")).unwrap_or(2);
        h.loglevel.store(lvl as u32, Ordering::Relaxed);
    }

    /// Worker threads: `threads`, else `io-threads` if set above 1, else the number of cores.
    pub fn worker_threads(&self) -> usize {
        let t = self.get_i64("threads");
        if t > 0 {
            return t as usize;
        }
        let io = self.get_i64("io-threads");
        if io > 1 {
            return io as usize;
        }
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    }
}

fn format_directive(def: &Def, value: &str) -> String {
    match def.kind {
        Kind::Words if !value.is_empty() => format!("{} {}\n", def.name, value),
        _ => format!("{} {}\n", def.name, quote_arg(value)),
    }
}

/// Quotes a command-line argument for the config text (empty and spaced values survive).
fn quote_arg(a: &str) -> String {
    if !a.is_empty() && !a.bytes().any(|c| c.is_ascii_whitespace() || c == b'"' || c == b'\'' || c == b'\\') {
        return a.to_string();
    }
    let mut s = String::from("\"");
    for c in a.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            '\t' => s.push_str("\\t"),
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_then_flags() {
        let dir = std::env::temp_dir().join(format!("atoll-conf-{}", std::process::id()));
        std::fs::write(&dir, "# comment\nport 7000\nsave \"\"\nbind 127.0.0.1 ::1\nmaxmemory 1gb\nfoo-bar 1\n")
            .unwrap();
        let args: Vec<String> =
            vec![dir.display().to_string(), "--port".into(), "7001".into(), "--save".into(), "".into()];
        let (c, warnings) = Config::from_args(&args).unwrap();
        assert_eq!(c.get("port"), "7001");
        assert_eq!(c.get("save"), "");
        assert_eq!(c.get("bind"), "127.0.0.1 ::1");
        assert_eq!(c.get("maxmemory"), "1073741824");
        assert_eq!(warnings.len(), 1);
        std::fs::remove_file(dir).ok();
    }

    #[test]
    fn bad_values_are_fatal() {
        let err = Config::from_args(&["--port".into(), "abc".into()]).err().unwrap();
        assert!(err.contains("argument couldn't be parsed into an integer"), "{err}");
        assert!(Config::from_args(&["--protected-mode".into(), "maybe".into()]).is_err());
    }

    #[test]
    fn config_set_rules() {
        let c = Config::defaults();
        assert!(c.set_many(&[(b"timeout", b"5"), (b"hz", b"20")]).is_ok());
        assert_eq!(c.hot.timeout.load(Ordering::Relaxed), 5);
        let e = c.set_many(&[(b"databases", b"3")]).unwrap_err();
        assert!(e.contains("can't set immutable config"));
        let e = c.set_many(&[(b"nope", b"3")]).unwrap_err();
        assert_eq!(e, "ERR Unknown option or number of arguments for CONFIG SET - 'nope'");
        // All or nothing.
        assert!(c.set_many(&[(b"timeout", b"7"), (b"hz", b"x")]).is_err());
        assert_eq!(c.get("timeout"), "5");
        assert_eq!(parse_memory("1k"), Some(1000));
        assert_eq!(parse_memory("1KB"), Some(1024));
    }
}
