//! The configuration table (DESIGN habit 7): every parameter Redis 7.2 knows, with its alias,
//! type, bounds, default and flags as Redis 7.2.6 has them (`CONFIG GET *` on the real server is
//! the reference; `tests/config.rs` checks every row against it), plus Atoll's own.
//!
//! Each row also says what Atoll does with the parameter (`Support`):
//! * `live` — Atoll acts on it.
//! * `pending(WHAT)` — the feature does not exist yet. The default (the value that describes
//!   what Atoll does) is accepted; any other value is refused with an error naming what is
//!   missing, in CONFIG SET and at start-up: `appendonly yes` must never be silently ignored.
//! * `unable(WHY)` — as `pending`, but refused with the words Redis itself answers when it is
//!   built without the ability (`activedefrag yes` without Redis's modified jemalloc), or with
//!   why Atoll's design cannot do what the value asks (`io-threads-do-reads no`).
//! * `file_only(WHAT)` — set at start-up; CONFIG SET of another value is refused (Redis can
//!   rebind listeners at runtime, Atoll cannot yet).
//!
//! Atoll's defaults equal Redis's except `bind` (loopback only, in
//! `tests/known_differences.txt`).

/// Flags, as Redis's config table has them.
pub const IMMUTABLE: u8 = 1;
/// Changeable only with `enable-protected-configs` (`dir`, `dbfilename`).
pub const PROTECTED: u8 = 2;
/// Its value is redacted from the slowlog and logs (passwords).
pub const SENSITIVE: u8 = 4;
/// Not listed by pattern matches (`CONFIG GET *`), only by its exact name.
pub const HIDDEN: u8 = 8;
/// Refused while loading a dataset.
pub const DENY_LOADING: u8 = 16;

const IMAX: i128 = i32::MAX as i128;
const UMAX: i128 = u32::MAX as i128;
const LMAX: i128 = i64::MAX as i128;
const ULMAX: i128 = u64::MAX as i128;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// `yes` / `no`.
    Bool,
    /// A decimal integer (Redis's `string2ll`: no sign but `-`, no leading zeros, no units).
    Int {
        min: i128,
        max: i128,
    },
    /// A byte count with Redis's units (`1k` = 1000, `1kb` = 1024 … `gb`); printed in bytes.
    Memory {
        min: i128,
        max: i128,
    },
    /// A byte count, or `N%` (of maxmemory), stored negative (`maxmemory-clients`).
    MemoryOrPercent {
        max: i128,
    },
    /// An octal number (`unixsocketperm`).
    Octal {
        max: i64,
    },
    Str,
    /// One of these names, case-insensitive.
    Enum(&'static [&'static str]),
    /// Several of these names, space-separated (`shutdown-on-sigint save now`).
    Flags(&'static [&'static str]),
    // Parameters with a syntax of their own, as in Redis.
    /// `<seconds> <changes> ...` pairs, or "".
    Save,
    /// `<class> <hard> <soft> <seconds>` groups.
    OutputLimits,
    /// Keyspace event class characters.
    Events,
    /// Three integers in -2000..2000.
    OomValues,
    /// Up to 16 addresses, `-` marking an optional one.
    Bind,
    /// The working directory (CONFIG SET changes it).
    Dir,
    /// `<host> <port>`, or "".
    Replicaof,
    /// Percentiles in [0, 100].
    Percentiles,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Support {
    Live,
    /// Only the default is accepted; the text names the missing feature.
    Pending(&'static str),
    /// CONFIG SET of a new value is refused; the text names what is missing.
    FileOnly(&'static str),
    /// Only the default is accepted; any other value is refused with Redis's own words for a
    /// server built without the ability (the text).
    Unable(&'static str),
}

pub struct Def {
    pub name: &'static str,
    pub alias: Option<&'static str>,
    pub kind: Kind,
    pub default: &'static str,
    pub flags: u8,
    pub support: Support,
}

impl Def {
    const fn new(name: &'static str, kind: Kind, default: &'static str) -> Def {
        Def { name, alias: None, kind, default, flags: 0, support: Support::Live }
    }
    const fn alias(mut self, alias: &'static str) -> Def {
        self.alias = Some(alias);
        self
    }
    const fn flags(mut self, flags: u8) -> Def {
        self.flags = flags;
        self
    }
    const fn live(self) -> Def {
        self
    }
    const fn pending(mut self, what: &'static str) -> Def {
        self.support = Support::Pending(what);
        self
    }
    const fn unable(mut self, why: &'static str) -> Def {
        self.support = Support::Unable(why);
        self
    }
    const fn file_only(mut self, what: &'static str) -> Def {
        self.support = Support::FileOnly(what);
        self
    }

    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

// What a `pending` parameter is waiting for, as its error names it.
/// Redis 7.2.6's refusal when its allocator is not its own modified jemalloc (a build with
/// `MALLOC=libc` or a distribution's jemalloc): Atoll's jemalloc is the unmodified one, which
/// gives no hint of which allocations moving would compact.
const DEFRAG: &str = "Active defragmentation cannot be enabled: it requires a Redis server compiled with a modified Jemalloc like the one shipped by default with the Redis source distribution";
/// The `active-defrag-*` thresholds tune a defragmentation Atoll does not have (`activedefrag`
/// above): a value other than the default would be a setting that changes nothing.
const DEFRAG_TUNING: &str = "active defragmentation";
/// Redis's default is `yes`: after a crash it tests the memory in place, its threads killed.
/// Atoll runs none, so its default says `no` and `yes` is refused.
const MEMTEST: &str = "a memory test after a crash";
/// Redis's default `no` keeps reading and parsing on its main thread; Atoll's worker threads
/// always read and parse their own connections, so its default says `yes`.
const READS: &str = "Atoll's worker threads always read and parse their own connections (io-threads-do-reads yes)";
const DUAL_CHANNEL: &str = "dual-channel replication";
const NODELAY: &str = "turning TCP_NODELAY off on replicas' connections";
const DEL_SYNC: &str = "deleting the files replication loaded";
const CRASHLOG: &str = "a crash without its report";
const DISK_ERRORS: &str = "a replica that goes on past its disk's write errors";
const EFFORT: &str = "tuning the active expiry's effort (Atoll's is level 1's)";
const WARNINGS: &str = "warnings to ignore (Atoll gives none of Redis's)";
const CPULIST: &str = "CPU affinity lists";
const SOCKMARK: &str = "socket marks";
const BIND: &str = "rebinding listeners at runtime (restart with the new value)";

/// Parameters whose names are synonyms of another value of the same enum (Redis prints the
/// first): `oom-score-adj relative` reads back as `yes`.
pub const ENUM_SYNONYMS: &[(&str, &str, &str)] = &[("oom-score-adj", "relative", "yes")];

use Kind::*;

#[rustfmt::skip]
pub const DEFS: &[Def] = &[
    Def::new("acl-pubsub-default", Enum(&["allchannels", "resetchannels"]), "resetchannels").live(),
    Def::new("aclfile", Str, "").flags(IMMUTABLE).live(),
    Def::new("acllog-max-len", Int { min: 0, max: LMAX }, "128").live(),
    Def::new("active-defrag-cycle-max", Int { min: 1, max: 99 }, "25").pending(DEFRAG_TUNING),
    Def::new("active-defrag-cycle-min", Int { min: 1, max: 99 }, "1").pending(DEFRAG_TUNING),
    Def::new("active-defrag-ignore-bytes", Memory { min: 1, max: LMAX }, "104857600").pending(DEFRAG_TUNING),
    Def::new("active-defrag-max-scan-fields", Int { min: 1, max: LMAX }, "1000").pending(DEFRAG_TUNING),
    Def::new("active-defrag-threshold-lower", Int { min: 0, max: 1000 }, "10").pending(DEFRAG_TUNING),
    Def::new("active-defrag-threshold-upper", Int { min: 0, max: 1000 }, "100").pending(DEFRAG_TUNING),
    Def::new("active-expire-effort", Int { min: 1, max: 10 }, "1").pending(EFFORT),
    Def::new("activedefrag", Bool, "no").unable(DEFRAG),
    Def::new("activerehashing", Bool, "yes").live(),
    Def::new("always-show-logo", Bool, "no").flags(IMMUTABLE).live(),
    Def::new("aof-disable-auto-gc", Bool, "no").flags(HIDDEN).live(),
    Def::new("aof-load-truncated", Bool, "yes").live(),
    // Atoll's own: with `appendfsync always`, write the incremental file into space padded
    // ahead, so each fsync flushes data only (persist::aof::Tail).
    Def::new("aof-preallocate", Bool, "no").live(),
    Def::new("aof-rewrite-incremental-fsync", Bool, "yes").live(),
    Def::new("aof-timestamp-enabled", Bool, "no").live(),
    Def::new("aof-use-rdb-preamble", Bool, "yes").live(),
    Def::new("aof_rewrite_cpulist", Str, "").flags(IMMUTABLE).pending(CPULIST),
    Def::new("appenddirname", Str, "appendonlydir").flags(IMMUTABLE).live(),
    Def::new("appendfilename", Str, "appendonly.aof").flags(IMMUTABLE).live(),
    Def::new("appendfsync", Enum(&["everysec", "always", "no"]), "everysec").live(),
    Def::new("appendonly", Bool, "no").flags(DENY_LOADING).live(),
    Def::new("auto-aof-rewrite-min-size", Memory { min: 0, max: LMAX }, "67108864").live(),
    Def::new("auto-aof-rewrite-percentage", Int { min: 0, max: IMAX }, "100").live(),
    Def::new("bgsave_cpulist", Str, "").flags(IMMUTABLE).pending(CPULIST),
    Def::new("bind", Bind, "127.0.0.1 -::1").file_only(BIND),
    Def::new("bind-source-addr", Str, "").live(),
    Def::new("bio_cpulist", Str, "").flags(IMMUTABLE).pending(CPULIST),
    Def::new("busy-reply-threshold", Int { min: 0, max: LMAX }, "5000").alias("lua-time-limit").live(),
    Def::new("client-output-buffer-limit", OutputLimits, "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60").live(),
    Def::new("client-query-buffer-limit", Memory { min: 1048576, max: LMAX }, "1073741824").live(),
    Def::new("cluster-allow-pubsubshard-when-down", Bool, "yes").live(),
    Def::new("cluster-allow-reads-when-down", Bool, "no").live(),
    Def::new("cluster-allow-replica-migration", Bool, "yes").live(),
    Def::new("cluster-announce-bus-port", Int { min: 0, max: 65535 }, "0").live(),
    Def::new("cluster-announce-hostname", Str, "").live(),
    Def::new("cluster-announce-human-nodename", Str, "").live(),
    Def::new("cluster-announce-ip", Str, "").live(),
    Def::new("cluster-announce-port", Int { min: 0, max: 65535 }, "0").live(),
    Def::new("cluster-announce-tls-port", Int { min: 0, max: 65535 }, "0").live(),
    Def::new("cluster-config-file", Str, "nodes.conf").flags(IMMUTABLE).live(),
    Def::new("cluster-enabled", Bool, "no").flags(IMMUTABLE).live(),
    Def::new("cluster-link-sendbuf-limit", Memory { min: 0, max: ULMAX }, "0").live(),
    Def::new("cluster-migration-barrier", Int { min: 0, max: IMAX }, "1").live(),
    Def::new("cluster-node-timeout", Int { min: 0, max: LMAX }, "15000").live(),
    Def::new("cluster-ping-interval", Int { min: 0, max: LMAX }, "0").flags(HIDDEN).live(),
    Def::new("cluster-port", Int { min: 0, max: 65535 }, "0").flags(IMMUTABLE).live(),
    Def::new("cluster-preferred-endpoint-type", Enum(&["ip", "hostname", "unknown-endpoint"]), "ip").live(),
    Def::new("cluster-replica-no-failover", Bool, "no").alias("cluster-slave-no-failover").live(),
    Def::new("cluster-replica-validity-factor", Int { min: 0, max: IMAX }, "10").alias("cluster-slave-validity-factor").live(),
    Def::new("cluster-require-full-coverage", Bool, "yes").live(),
    Def::new("commandlog-large-reply-max-len", Int { min: 0, max: LMAX }, "128").live(),
    Def::new("commandlog-large-request-max-len", Int { min: 0, max: LMAX }, "128").live(),
    Def::new("commandlog-reply-larger-than", Int { min: -1, max: LMAX }, "1048576").live(),
    Def::new("commandlog-request-larger-than", Int { min: -1, max: LMAX }, "1048576").live(),
    Def::new("crash-log-enabled", Bool, "yes").pending(CRASHLOG),
    Def::new("crash-memcheck-enabled", Bool, "no").pending(MEMTEST),
    Def::new("daemonize", Bool, "no").flags(IMMUTABLE).live(),
    Def::new("databases", Int { min: 1, max: IMAX }, "16").flags(IMMUTABLE).live(),
    Def::new("dbfilename", Str, "dump.rdb").flags(PROTECTED).live(),
    Def::new("dir", Dir, "").flags(PROTECTED | DENY_LOADING).live(),
    Def::new("disable-thp", Bool, "yes").flags(IMMUTABLE).live(),
    Def::new("dual-channel-replication-enabled", Bool, "no").pending(DUAL_CHANNEL),
    Def::new("dynamic-hz", Bool, "yes").live(),
    Def::new("enable-debug-command", Enum(&["no", "yes", "local"]), "no").flags(IMMUTABLE).live(),
    Def::new("enable-module-command", Enum(&["no", "yes", "local"]), "no").flags(IMMUTABLE).live(),
    Def::new("enable-protected-configs", Enum(&["no", "yes", "local"]), "no").flags(IMMUTABLE).live(),
    Def::new("hash-max-listpack-entries", Int { min: 0, max: LMAX }, "512").alias("hash-max-ziplist-entries").live(),
    Def::new("hash-max-listpack-value", Memory { min: 0, max: LMAX }, "64").alias("hash-max-ziplist-value").live(),
    Def::new("hll-sparse-max-bytes", Memory { min: 0, max: LMAX }, "3000").live(),
    Def::new("hide-user-data-from-log", Bool, "no").live(),
    Def::new("hz", Int { min: 0, max: IMAX }, "10").live(),
    Def::new("ignore-warnings", Str, "").pending(WARNINGS),
    Def::new("io-threads", Int { min: 1, max: 128 }, "1").flags(IMMUTABLE).live(),
    Def::new("io-threads-do-reads", Bool, "yes").flags(IMMUTABLE).unable(READS),
    Def::new("jemalloc-bg-thread", Bool, "yes").live(),
    Def::new("key-load-delay", Int { min: -IMAX - 1, max: IMAX }, "0").flags(HIDDEN).live(),
    Def::new("latency-monitor-threshold", Int { min: 0, max: LMAX }, "0").live(),
    Def::new("latency-tracking", Bool, "yes").live(),
    Def::new("latency-tracking-info-percentiles", Percentiles, "50 99 99.9").live(),
    Def::new("lazyfree-lazy-eviction", Bool, "no").live(),
    Def::new("lazyfree-lazy-expire", Bool, "no").live(),
    Def::new("lazyfree-lazy-server-del", Bool, "no").live(),
    Def::new("lazyfree-lazy-user-del", Bool, "no").live(),
    Def::new("lazyfree-lazy-user-flush", Bool, "no").live(),
    Def::new("lfu-decay-time", Int { min: 0, max: IMAX }, "1").live(),
    Def::new("lfu-log-factor", Int { min: 0, max: IMAX }, "10").live(),
    Def::new("list-compress-depth", Int { min: 0, max: IMAX }, "0").live(),
    Def::new("list-max-listpack-size", Int { min: -IMAX - 1, max: IMAX }, "-2").alias("list-max-ziplist-size").live(),
    Def::new("loading-process-events-interval-bytes", Int { min: 1024, max: IMAX }, "2097152").flags(HIDDEN).live(),
    Def::new("locale-collate", Str, "").live(),
    Def::new("logfile", Str, "").flags(IMMUTABLE).live(),
    Def::new("loglevel", Enum(&["debug", "verbose", "notice", "warning", "nothing"]), "notice").live(),
    Def::new("masterauth", Str, "").flags(SENSITIVE).live(),
    Def::new("masteruser", Str, "").flags(SENSITIVE).live(),
    Def::new("maxclients", Int { min: 1, max: UMAX }, "10000").live(),
    Def::new("maxmemory", Memory { min: 0, max: ULMAX }, "0").live(),
    Def::new("maxmemory-clients", MemoryOrPercent { max: LMAX }, "0").live(),
    Def::new("maxmemory-eviction-tenacity", Int { min: 0, max: 100 }, "10").live(),
    Def::new("maxmemory-policy", Enum(&["volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl", "allkeys-lru", "allkeys-lfu", "allkeys-random", "noeviction"]), "noeviction").live(),
    Def::new("maxmemory-samples", Int { min: 1, max: IMAX }, "5").live(),
    Def::new("min-replicas-max-lag", Int { min: 0, max: IMAX }, "10").alias("min-slaves-max-lag").live(),
    Def::new("min-replicas-to-write", Int { min: 0, max: IMAX }, "0").alias("min-slaves-to-write").live(),
    Def::new("no-appendfsync-on-rewrite", Bool, "no").live(),
    Def::new("notify-keyspace-events", Events, "").live(),
    Def::new("oom-score-adj", Enum(&["no", "yes", "relative", "absolute"]), "no").live(),
    Def::new("oom-score-adj-values", OomValues, "0 200 800").live(),
    Def::new("pidfile", Str, "").flags(IMMUTABLE).live(),
    // CONFIG SET rebinds the listeners (`config::LISTEN`), rolled back if binding fails.
    Def::new("port", Int { min: 0, max: 65535 }, "6379").live(),
    Def::new("proc-title-template", Str, "{title} {listen-addr} {server-mode}").live(),
    Def::new("propagation-error-behavior", Enum(&["ignore", "panic", "panic-on-replicas"]), "ignore").live(),
    Def::new("protected-mode", Bool, "yes").live(),
    Def::new("proto-max-bulk-len", Memory { min: 1048576, max: LMAX }, "536870912").live(),
    Def::new("rdb-del-sync-files", Bool, "no").pending(DEL_SYNC),
    Def::new("rdb-key-save-delay", Int { min: -IMAX - 1, max: IMAX }, "0").flags(HIDDEN).live(),
    Def::new("rdb-save-incremental-fsync", Bool, "yes").live(),
    Def::new("rdb-version-check", Enum(&["strict", "relaxed"]), "strict").live(),
    Def::new("rdbchecksum", Bool, "yes").flags(IMMUTABLE).live(),
    Def::new("rdbcompression", Bool, "yes").live(),
    Def::new("repl-backlog-size", Memory { min: 1, max: LMAX }, "1048576").live(),
    Def::new("repl-backlog-ttl", Int { min: 0, max: LMAX }, "3600").live(),
    Def::new("repl-disable-tcp-nodelay", Bool, "no").pending(NODELAY),
    Def::new("repl-diskless-load", Enum(&["disabled", "on-empty-db", "swapdb"]), "disabled").flags(DENY_LOADING).live(),
    Def::new("repl-diskless-sync", Bool, "yes").live(),
    Def::new("repl-diskless-sync-delay", Int { min: 0, max: IMAX }, "5").live(),
    Def::new("repl-diskless-sync-max-replicas", Int { min: 0, max: IMAX }, "0").live(),
    Def::new("repl-ping-replica-period", Int { min: 1, max: IMAX }, "10").alias("repl-ping-slave-period").live(),
    Def::new("repl-timeout", Int { min: 1, max: IMAX }, "60").live(),
    Def::new("replica-announce-ip", Str, "").alias("slave-announce-ip").live(),
    Def::new("replica-announce-port", Int { min: 0, max: 65535 }, "0").alias("slave-announce-port").live(),
    Def::new("replica-announced", Bool, "yes").live(),
    Def::new("replica-ignore-disk-write-errors", Bool, "no").pending(DISK_ERRORS),
    Def::new("replica-ignore-maxmemory", Bool, "yes").alias("slave-ignore-maxmemory").live(),
    Def::new("replica-lazy-flush", Bool, "no").alias("slave-lazy-flush").live(),
    Def::new("replica-priority", Int { min: 0, max: IMAX }, "100").alias("slave-priority").live(),
    Def::new("replica-read-only", Bool, "yes").alias("slave-read-only").live(),
    Def::new("replica-serve-stale-data", Bool, "yes").alias("slave-serve-stale-data").live(),
    Def::new("replicaof", Replicaof, "").alias("slaveof").flags(IMMUTABLE).live(),
    Def::new("requirepass", Str, "").flags(SENSITIVE).live(),
    Def::new("sanitize-dump-payload", Enum(&["no", "yes", "clients"]), "no").live(),
    Def::new("save", Save, "3600 1 300 100 60 10000").live(),
    Def::new("server_cpulist", Str, "").flags(IMMUTABLE).pending(CPULIST),
    Def::new("set-max-intset-entries", Int { min: 0, max: LMAX }, "512").live(),
    Def::new("set-max-listpack-entries", Int { min: 0, max: LMAX }, "128").live(),
    Def::new("set-max-listpack-value", Int { min: 0, max: LMAX }, "64").live(),
    Def::new("set-proc-title", Bool, "yes").flags(IMMUTABLE).live(),
    Def::new("shutdown-on-sigint", Flags(&["default", "save", "nosave", "now", "force"]), "default").live(),
    Def::new("shutdown-on-sigterm", Flags(&["default", "save", "nosave", "now", "force"]), "default").live(),
    Def::new("shutdown-timeout", Int { min: 0, max: IMAX }, "10").live(),
    Def::new("slowlog-log-slower-than", Int { min: -1, max: LMAX }, "10000").alias("commandlog-execution-slower-than").live(),
    Def::new("slowlog-max-len", Int { min: 0, max: LMAX }, "128").alias("commandlog-slow-execution-max-len").live(),
    Def::new("socket-mark-id", Int { min: 0, max: UMAX }, "0").flags(IMMUTABLE).pending(SOCKMARK),
    Def::new("stop-writes-on-bgsave-error", Bool, "yes").live(),
    Def::new("stream-node-max-bytes", Memory { min: 0, max: LMAX }, "4096").live(),
    Def::new("stream-node-max-entries", Int { min: 0, max: LMAX }, "100").live(),
    Def::new("supervised", Enum(&["upstart", "systemd", "auto", "no"]), "no").flags(IMMUTABLE).live(),
    Def::new("syslog-enabled", Bool, "no").flags(IMMUTABLE).live(),
    Def::new("syslog-facility", Enum(&["user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"]), "local0").flags(IMMUTABLE).live(),
    Def::new("syslog-ident", Str, "redis").flags(IMMUTABLE).live(),
    Def::new("tcp-backlog", Int { min: 0, max: IMAX }, "511").flags(IMMUTABLE).live(),
    Def::new("tcp-keepalive", Int { min: 0, max: IMAX }, "300").live(),
    Def::new("timeout", Int { min: 0, max: IMAX }, "0").live(),
    Def::new("tls-auth-clients", Enum(&["no", "yes", "optional"]), "yes").live(),
    Def::new("tls-ca-cert-dir", Str, "").live(),
    Def::new("tls-ca-cert-file", Str, "").live(),
    Def::new("tls-cert-file", Str, "").live(),
    Def::new("tls-ciphers", Str, "").live(),
    Def::new("tls-ciphersuites", Str, "").live(),
    Def::new("tls-client-cert-file", Str, "").live(),
    Def::new("tls-client-key-file", Str, "").live(),
    Def::new("tls-client-key-file-pass", Str, "").live(),
    // tls-replication makes a replica's link to its master TLS (daemons::upstream_conn);
    // tls-cluster the cluster bus's links (daemons::cluster_bus). As in Redis both require a
    // CA and turn the TLS configuration on.
    Def::new("tls-cluster", Bool, "no").live(),
    Def::new("tls-dh-params-file", Str, "").live(),
    Def::new("tls-key-file", Str, "").live(),
    Def::new("tls-key-file-pass", Str, "").live(),
    Def::new("tls-port", Int { min: 0, max: 65535 }, "0").file_only(BIND),
    Def::new("tls-prefer-server-ciphers", Bool, "no").live(),
    Def::new("tls-protocols", Str, "").live(),
    Def::new("tls-replication", Bool, "no").live(),
    Def::new("tls-session-cache-size", Int { min: 0, max: IMAX }, "20480").live(),
    Def::new("tls-session-cache-timeout", Int { min: 0, max: IMAX }, "300").live(),
    Def::new("tls-session-caching", Bool, "yes").live(),
    Def::new("tracking-table-max-keys", Int { min: 0, max: LMAX }, "1000000").live(),
    Def::new("unixsocket", Str, "").flags(IMMUTABLE).live(),
    Def::new("unixsocketperm", Octal { max: 0o777 }, "0").flags(IMMUTABLE).live(),
    Def::new("use-exit-on-panic", Bool, "no").flags(HIDDEN).live(),
    // Live: a worker stuck in one round this long (ms) is reported (`daemons::watchdog`; 0: the
    // watchdog's own default).
    Def::new("watchdog-period", Int { min: 0, max: IMAX }, "0").flags(HIDDEN),
    Def::new("zset-max-listpack-entries", Int { min: 0, max: LMAX }, "128").alias("zset-max-ziplist-entries").live(),
    Def::new("zset-max-listpack-value", Memory { min: 0, max: LMAX }, "64").alias("zset-max-ziplist-value").live(),
    // Atoll's own. The immutable ones are HIDDEN from pattern matches: tools (and Redis's own
    // test suite) walk `CONFIG GET *` and set each value back, skipping only the immutable
    // names Redis has; `CONFIG GET threads` by its name still answers.
    // Worker threads (0: one per core); a redis.conf `io-threads N` (N > 1) means the same.
    Def::new("threads", Int { min: 0, max: 1024 }, "0").flags(IMMUTABLE | HIDDEN).live(),
    // How workers move bytes. io_uring (less server CPU than epoll pipelined and over unix
    // sockets, the same unpipelined over TCP; docs/BENCHMARKS.md) falls back to epoll where the
    // kernel refuses it.
    Def::new("io-backend", Enum(&["epoll", "io_uring"]), "io_uring").flags(IMMUTABLE | HIDDEN).live(),
    // The longest an io_uring worker waits for more requests before serving those it has, in
    // microseconds (0: never waits). The wait actually used adapts to the load; see
    // `server::uring::Pacing`.
    Def::new("io-batch-wait", Int { min: 0, max: 1000 }, "50").live(),
    // The HTTP listener for Prometheus metrics (`/metrics`) and the live dashboard (`/`), on
    // the `bind` addresses; 0 (the default) runs none.
    Def::new("metrics-port", Int { min: 0, max: 65535 }, "0").flags(IMMUTABLE | HIDDEN).live(),
    // Sample one keyed command in 64 into a top-k sketch of the hottest keys (DEBUG HOTKEYS,
    // the dashboard, `/metrics`).
    Def::new("hotkeys", Bool, "yes").live(),
];

/// A typed handle on one parameter of [`DEFS`]: its index, found when the program is
/// compiled. `Config::flag`, `Config::int` and `Config::text` read it without a name lookup,
/// and a misspelt or mistyped name is a compile error (`param` panics in a const context).
pub struct Param<T> {
    pub idx: usize,
    _kind: std::marker::PhantomData<fn() -> T>,
}

impl<T> Clone for Param<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Param<T> {}

const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

const fn index(name: &str) -> usize {
    let mut i = 0;
    while i < DEFS.len() {
        if same(DEFS[i].name, name) {
            return i;
        }
        i += 1;
    }
    panic!("no such config parameter in config/table.rs");
}

/// A yes/no parameter.
pub const fn flag(name: &str) -> Param<bool> {
    let idx = index(name);
    assert!(matches!(DEFS[idx].kind, Bool), "not a yes/no parameter");
    Param { idx, _kind: std::marker::PhantomData }
}

/// A number: an integer, a memory size (bytes), an octal mode.
pub const fn number(name: &str) -> Param<i64> {
    let idx = index(name);
    assert!(matches!(DEFS[idx].kind, Int { .. } | Memory { .. } | Octal { .. }), "not a numeric parameter");
    Param { idx, _kind: std::marker::PhantomData }
}

/// Any parameter, as CONFIG GET prints it.
pub const fn text(name: &str) -> Param<String> {
    Param { idx: index(name), _kind: std::marker::PhantomData }
}
