//! The configuration table against Redis 7.2.6 itself (the oracle of `common::redis_bin`):
//! every parameter Redis knows, its default, CONFIG SET of valid and invalid values (replies
//! compared byte for byte, then CONFIG GET), aliases and patterns; and CONFIG REWRITE.

mod common;

use atoll::config::{find_def, Support};
use common::*;
use std::collections::BTreeMap;

/// Parameters whose value depends on how each test server was started, or which Atoll sets
/// differently on purpose (`tests/known_differences.txt`).
/// Atoll's own parameters (not Redis's).
const ATOLL_OWN: &[&str] = &["threads", "io-backend", "io-batch-wait", "metrics-port", "hotkeys", "aof-preallocate"];

/// Valkey's parameters Atoll knows (its stock valkey.conf sets them), checked against Valkey
/// 9.1.2 in `valkeys_parameters_exist_with_valkeys_defaults`.
const VALKEY_OWN: &[&str] = &[
    "hide-user-data-from-log",
    "rdb-version-check",
    "dual-channel-replication-enabled",
    "commandlog-execution-slower-than",
    "commandlog-slow-execution-max-len",
    "commandlog-request-larger-than",
    "commandlog-large-request-max-len",
    "commandlog-reply-larger-than",
    "commandlog-large-reply-max-len",
];

/// Defaults that say what Atoll does where Redis's say what Redis does (the other value is
/// refused, `every_row_acts_or_is_refused`).
const DEFAULTS_OF_ATOLL: &[(&str, &str)] = &[
    // Redis tests its memory in place after a crash; Atoll does not.
    ("crash-memcheck-enabled", "no"),
    // Redis reads on its main thread unless told; Atoll's workers read their own connections.
    ("io-threads-do-reads", "yes"),
];

const ENV_DEPENDENT: &[&str] = &[
    "port",
    // Atoll binds loopback only by default; Redis 7.2 binds every interface (protected mode).
    "bind",
    // The oracle is built with libc malloc: its jemalloc-bg-thread is inert.
    "jemalloc-bg-thread",
    // Each test server runs in a scratch directory of its own.
    "dir",
];

fn pairs(reply: &[u8]) -> BTreeMap<String, String> {
    let items = parse_array(reply);
    items
        .chunks(2)
        .map(|p| (String::from_utf8_lossy(&p[0]).into_owned(), String::from_utf8_lossy(&p[1]).into_owned()))
        .collect()
}

#[test]
fn every_redis_parameter_exists_with_its_default() {
    let r = start_redis(&[]);
    let a = start_atoll(&["--enable-debug-command", "yes"]);
    let mut rc = RawConn::connect(r.port);
    let mut ac = RawConn::connect(a.port);
    let want = pairs(&rc.cmd(&[b"CONFIG", b"GET", b"*"]));
    let got = pairs(&ac.cmd(&[b"CONFIG", b"GET", b"*"]));
    assert!(want.len() >= 190, "the oracle listed {} parameters", want.len());
    let mut wrong = Vec::new();
    for (k, v) in &want {
        match got.get(k) {
            None => wrong.push(format!("{k}: missing")),
            Some(g) if DEFAULTS_OF_ATOLL.iter().any(|(n, d)| n == k && d == g) => {}
            Some(g) if g != v && !ENV_DEPENDENT.contains(&k.as_str()) => wrong.push(format!("{k}: {g:?}, Redis {v:?}")),
            _ => {}
        }
    }
    // Atoll lists nothing Redis does not, but its own parameters.
    for k in got.keys() {
        if !want.contains_key(k) && !ATOLL_OWN.contains(&k.as_str()) && !VALKEY_OWN.contains(&k.as_str()) {
            wrong.push(format!("{k}: not a Redis 7.2 parameter"));
        }
    }
    // Hidden parameters answer only to their exact name, on both.
    for name in ["watchdog-period", "key-load-delay", "rdb-key-save-delay", "use-exit-on-panic", "aof-disable-auto-gc"]
    {
        let q: [&[u8]; 3] = [b"CONFIG", b"GET", name.as_bytes()];
        let (rv, av) = (rc.cmd(&q), ac.cmd(&q));
        if rv != av {
            wrong.push(format!("hidden {name}: {} vs {}", show(&av), show(&rv)));
        }
    }
    assert!(wrong.is_empty(), "{} differences:\n{}", wrong.len(), wrong.join("\n"));
}

/// Values tried on every parameter: each kind's valid and invalid forms.
const PROBES: &[&str] = &[
    "yes",
    "NO",
    "maybe",
    "0",
    "1",
    "-1",
    "7",
    "100",
    "65536",
    "2147483648",
    "99999999999999999999",
    "abc",
    "1kb",
    "2MB",
    "10xb",
    "5%",
    "200%",
    "",
    "0 200 800",
    "0 a 800",
    "normal 0 0 0",
    "pubsub 1mb 512kb 30",
    "foo 1 2 3",
    "KEA",
    "Q",
    "50 99.9",
    "101",
    "no one",
    "everysec",
    "allkeys-lru",
    "save now",
    "save nosave",
    "relative",
    "777",
    "host.example",
    "a b",
    "100 1 60 5",
];

/// Left alone: changing them on the oracle acts on the machine or the test (listeners, files,
/// process state), or depends on how Redis was built.
const SKIP: &[&str] = &[
    "port",
    "tls-port",
    "bind",
    "bind-source-addr",
    "dir",
    "dbfilename",
    "appendonly",
    "requirepass",
    "timeout",
    "maxmemory",
    "oom-score-adj",
    "oom-score-adj-values",
    "proc-title-template",
    "socket-mark-id",
    "server_cpulist",
];

#[test]
fn config_set_replies_match_redis() {
    let r = start_redis(&[]);
    let a = start_atoll(&["--enable-debug-command", "yes"]);
    let mut rc = RawConn::connect(r.port);
    let mut ac = RawConn::connect(a.port);
    let names: Vec<String> = pairs(&rc.cmd(&[b"CONFIG", b"GET", b"*"])).into_keys().collect();
    let mut wrong = Vec::new();
    let mut compared = 0;
    for name in &names {
        if SKIP.contains(&name.as_str()) {
            continue;
        }
        let support = find_def(name).expect("every name is in the table").1.support;
        let get: [&[u8]; 3] = [b"CONFIG", b"GET", name.as_bytes()];
        let before = rc.cmd(&get);
        let original = parse_array(&before).pop().unwrap();
        for p in PROBES {
            // Redis sizes its event loop to maxclients (2^31 slots would take minutes), and how
            // far the open-files limit can be raised depends on the process.
            if name == "maxclients" && (*p == "2147483648" || *p == "65536") {
                continue;
            }
            let set: [&[u8]; 4] = [b"CONFIG", b"SET", name.as_bytes(), p.as_bytes()];
            let (rv, av) = (rc.cmd(&set), ac.cmd(&set));
            compared += 1;
            // A parameter whose feature Atoll lacks refuses what Redis would act on (or refuses
            // for a reason of its own configuration, as TLS settings without certificates).
            let refused_honestly = matches!(support, Support::Pending(_) | Support::FileOnly(_))
                && String::from_utf8_lossy(&av).contains("not supported by Atoll yet");
            if rv != av && !refused_honestly {
                wrong.push(format!("CONFIG SET {name} {p:?}: {} vs Redis {}", show(&av), show(&rv)));
            }
            if rv == b"+OK\r\n" && av == b"+OK\r\n" {
                let (rg, ag) = (rc.cmd(&get), ac.cmd(&get));
                if rg != ag {
                    wrong.push(format!("after SET {name} {p:?}: GET {} vs Redis {}", show(&ag), show(&rg)));
                }
            }
            // Back to the original value on both.
            let restore: [&[u8]; 4] = [b"CONFIG", b"SET", name.as_bytes(), &original];
            rc.cmd(&restore);
            ac.cmd(&restore);
        }
    }
    assert!(compared > 5000, "only {compared} comparisons");
    assert!(wrong.is_empty(), "{} differences:\n{}", wrong.len(), wrong.join("\n"));
}

#[test]
fn config_errors_and_patterns_match_redis() {
    let r = start_redis(&[]);
    let a = start_atoll(&["--enable-debug-command", "yes"]);
    let mut rc = RawConn::connect(r.port);
    let mut ac = RawConn::connect(a.port);
    let cases: &[&[&str]] = &[
        &["CONFIG", "SET", "foo-bar", "1"],
        &["CONFIG", "SET", "maxmemory", "1mb", "foo-bar", "1"],
        &["CONFIG", "SET", "timeout", "x", "foo", "1"],
        &["CONFIG", "SET", "timeout", "x", "daemonize", "yes"],
        &["CONFIG", "SET", "timeout", "1", "TIMEOUT", "2"],
        &["CONFIG", "SET", "replica-priority", "10", "slave-priority", "20"],
        &["CONFIG", "GET", "replica-priority"],
        &["CONFIG", "SET", "slave-priority", "x"],
        &["CONFIG", "SET", "SLAVEOF", "x y"],
        &["CONFIG", "SET", "dir", "/tmp"],
        &["CONFIG", "SET", "maxmemory"],
        &["CONFIG", "SET", "maxmemory", "1", "timeout"],
        &["CONFIG", "SET", "hz", "20", "maxmemory-samples", "0"],
        &["CONFIG", "GET", "hz"],
        &["CONFIG", "GET"],
        &["CONFIG", "GET", "nonexistent"],
        &["CONFIG", "GET", "MAXMEMORY"],
        &["CONFIG", "GET", "hash-max-ziplist-entries"],
        &["CONFIG", "GET", "maxmemory", "maxmemory"],
        &["CONFIG", "FOO"],
        &["CONFIG", "HELP"],
        &["CONFIG", "HELP", "x"],
        &["CONFIG", "RESETSTAT", "x"],
        &["CONFIG", "REWRITE"],
        &["CONFIG", "SET", "list-max-ziplist-size", "4"],
        &["CONFIG", "GET", "list-max-listpack-size"],
        &["CONFIG", "SET", "hash-max-ziplist-value", "1k"],
        &["CONFIG", "GET", "hash-max-listpack-value"],
    ];
    let mut wrong = Vec::new();
    for c in cases {
        let argv: Vec<&[u8]> = c.iter().map(|s| s.as_bytes()).collect();
        let (rv, av) = (rc.cmd(&argv), ac.cmd(&argv));
        if rv != av {
            wrong.push(format!("{}: {} vs Redis {}", c.join(" "), show(&av), show(&rv)));
        }
    }
    // Pattern replies, compared as sets (Redis answers in its dictionary's order).
    for p in ["*max-*-entries*", "*ziplist*", "slave*", "*slave*", "HASH-MAX-*-ENTRIES", "*", "maxmem*"] {
        let q: [&[u8]; 3] = [b"CONFIG", b"GET", p.as_bytes()];
        let mut rk: Vec<String> = pairs(&rc.cmd(&q)).into_keys().collect();
        let mut ak: Vec<String> = pairs(&ac.cmd(&q)).into_keys().collect();
        rk.sort();
        ak.retain(|k| !ATOLL_OWN.contains(&k.as_str()) && !VALKEY_OWN.contains(&k.as_str()));
        ak.sort();
        if rk != ak {
            wrong.push(format!("CONFIG GET {p}: {ak:?} vs Redis {rk:?}"));
        }
    }
    assert!(wrong.is_empty(), "{} differences:\n{}", wrong.len(), wrong.join("\n"));
}

/// CONFIG REWRITE keeps comments and blank lines, writes an alias line under its primary name,
/// drops later duplicates, comments out lines it does not know, and appends changed
/// parameters after one marker; the file then loads back with the same values.
#[test]
fn config_rewrite_keeps_the_file() {
    let dir = std::env::temp_dir().join(format!("atoll-rw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("atoll.conf");
    std::fs::write(
        &conf,
        "# my settings\n\n   # indented comment\nhash-max-ziplist-entries 64\nhz 15\nhz 16\nlist-max-ziplist-entries 5\nsave \"\"\n",
    )
    .unwrap();
    let port = free_port();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_atoll-server"))
        .arg(&conf)
        .args(["--port", &port.to_string(), "--loglevel", "warning"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _srv = ServerProc { child, port, name: "atoll" };
    wait_for_port(port);
    let mut c = RawConn::connect(port);
    assert_eq!(
        c.cmd(&[b"CONFIG", b"SET", b"hash-max-listpack-entries", b"32", b"maxmemory-samples", b"7"]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd(&[b"CONFIG", b"SET", b"proto-max-bulk-len", b"2gb"]), b"+OK\r\n");
    assert_eq!(c.cmd(&[b"CONFIG", b"REWRITE"]), b"+OK\r\n");
    let text = std::fs::read_to_string(&conf).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        &lines[..5],
        ["# my settings", "", "# indented comment", "hash-max-listpack-entries 32", "hz 16"],
        "{text}"
    );
    assert!(lines.contains(&"# ??? list-max-ziplist-entries 5"), "{text}");
    assert!(lines.contains(&"save \"\""), "{text}");
    assert_eq!(lines.iter().filter(|l| l.starts_with("hz ")).count(), 1, "{text}");
    let marker = lines.iter().position(|l| *l == "# Generated by CONFIG REWRITE").expect("marker");
    assert!(lines[marker..].contains(&"maxmemory-samples 7"), "{text}");
    assert!(lines[marker..].contains(&"proto-max-bulk-len 2gb"), "{text}");
    assert!(lines[marker..].iter().any(|l| l.starts_with("dir \"")), "{text}");
    // A second rewrite changes nothing.
    assert_eq!(c.cmd(&[b"CONFIG", b"REWRITE"]), b"+OK\r\n");
    assert_eq!(std::fs::read_to_string(&conf).unwrap(), text);
    std::fs::remove_dir_all(&dir).ok();
}

/// Redis 7.2's stock redis.conf and its test suite's default.conf (from the oracle's source
/// tree) load as they are; the values they set are what CONFIG GET then reports.
#[test]
fn stock_redis_configs_load() {
    let src = std::path::Path::new(&redis_bin()).parent().unwrap().parent().unwrap().to_path_buf();
    for (file, checks) in [
        ("redis.conf", &[("hash-max-listpack-entries", "512"), ("appendonly", "no"), ("protected-mode", "yes")][..]),
        (
            "tests/assets/default.conf",
            &[("notify-keyspace-events", "AKE"), ("latency-monitor-threshold", "1"), ("save", "")],
        ),
    ] {
        let path = src.join(file);
        let port = free_port();
        let dir = scratch_dir(port);
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_atoll-server"))
            .arg(&path)
            .args(["--port", &port.to_string(), "--pidfile", "", "--dir", dir.to_str().unwrap(), "--logfile", ""])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let _srv = ServerProc { child, port, name: "atoll" };
        wait_for_port(port);
        let mut c = RawConn::connect(port);
        for (name, want) in checks {
            let got = parse_array(&c.cmd(&[b"CONFIG", b"GET", name.as_bytes()]));
            assert_eq!(String::from_utf8_lossy(&got[1]), *want, "{file}: {name}");
        }
    }
}

/// `rename-command` as Redis applies it: the new name answers, the old one is unknown, an
/// empty name removes the command, COMMAND INFO still names it by its own name; a rename of
/// a missing command or onto an existing name is a fatal configuration error.
#[test]
fn rename_command_matches_redis() {
    let args = ["--rename-command", "flushall", "", "--rename-command", "get", "fetch"];
    let r = start_redis(&args);
    let a = start_atoll(&args);
    let mut rc = RawConn::connect(r.port);
    let mut ac = RawConn::connect(a.port);
    let cases: &[&[&str]] = &[
        &["SET", "k", "v"],
        &["FETCH", "k"],
        &["fetch", "k"],
        &["GET", "k"],
        &["FLUSHALL"],
        &["COMMAND", "INFO", "fetch"],
        &["COMMAND", "INFO", "get"],
        &["DBSIZE"],
    ];
    for c in cases {
        let args: Vec<&[u8]> = c.iter().map(|s| s.as_bytes()).collect();
        assert_eq!(show(&ac.cmd(&args)), show(&rc.cmd(&args)), "{c:?}");
    }
    for (bad, text) in [
        (["--rename-command", "nosuchcmd", "x"], "No such command in rename-command"),
        (["--rename-command", "get", "set"], "Target command name already exists"),
    ] {
        for bin in [redis_bin(), env!("CARGO_BIN_EXE_atoll-server").to_string()] {
            let out = std::process::Command::new(&bin)
                .args(["--port", &free_port().to_string()])
                .args(bad)
                .output()
                .expect("run server");
            let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert!(!out.status.success() && all.contains(text), "{bin} {bad:?}: {all}");
            assert!(all.contains(">>> 'rename-command"), "{bin}: {all}");
        }
    }
}

/// `oom-score-adj` writes the process's OOM-killer score as Redis does: `yes`/`relative` adds
/// the primary's value to the score the process started with, `absolute` sets it, `no` puts
/// the original back; CONFIG SET of either parameter applies at once. Checked on the process
/// of both servers.
#[test]
fn oom_score_adj_matches_redis() {
    let score = |p: &ServerProc| -> i64 {
        std::fs::read_to_string(format!("/proc/{}/oom_score_adj", p.child.id())).unwrap().trim().parse().unwrap()
    };
    let r = start_redis(&["--oom-score-adj", "yes", "--oom-score-adj-values", "10 200 800"]);
    let a = start_atoll(&["--oom-score-adj", "yes", "--oom-score-adj-values", "10 200 800"]);
    let start = score(&r) - 10;
    assert_eq!(score(&a), score(&r));
    let mut rc = RawConn::connect(r.port);
    let mut ac = RawConn::connect(a.port);
    let steps: &[&[&str]] = &[
        &["CONFIG", "SET", "oom-score-adj-values", "30 200 800"],
        &["CONFIG", "SET", "oom-score-adj", "absolute", "oom-score-adj-values", "100 200 800"],
        &["CONFIG", "SET", "oom-score-adj", "relative"],
        &["CONFIG", "SET", "oom-score-adj", "no"],
        &["CONFIG", "SET", "oom-score-adj-values", "5000 0 0"],
    ];
    for s in steps {
        let args: Vec<&[u8]> = s.iter().map(|x| x.as_bytes()).collect();
        assert_eq!(show(&ac.cmd(&args)), show(&rc.cmd(&args)), "{s:?}");
        assert_eq!(score(&a), score(&r), "after {s:?}");
    }
    // Redis lists a pattern's matches in its dict's order: compared as maps.
    let get: &[&[u8]] = &[b"CONFIG", b"GET", b"oom-score-adj*"];
    assert_eq!(pairs(&ac.cmd(get)), pairs(&rc.cmd(get)));
    // The last CONFIG SET was refused and `no` restored the score the process began with.
    assert_eq!(score(&a), start);
}

/// The command line is turned into config lines as Redis's main() does: a `--name` takes the
/// arguments after it (even ones starting with `--`) until it has one, an argument holding a
/// name and its value is a whole line, a multi-argument parameter's lone argument is split, and
/// a parameter given none is refused. Fatal errors name the same line with the same reason as
/// Redis 7.2.6; the accepted ones set the same values.
#[test]
fn command_lines_parse_as_redis_parses_them() {
    let fatal = |bin: &str, args: &[&str]| -> String {
        // (Under `timeout`: a server that wrongly starts must not hang the test.)
        let out = std::process::Command::new("timeout").arg("5").arg(bin).args(args).output().expect("run server");
        assert!(!out.status.success(), "{bin} {args:?} started");
        let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let mut lines = all.lines().skip_while(|l| !l.starts_with(">>>"));
        format!("{} / {}", lines.next().unwrap_or(&all), lines.next().unwrap_or(""))
    };
    let bad: &[&[&str]] = &[
        &["--invalid"],
        &["--port"],
        &["--port", "6380", "--loglevel"],
        &["--port", "6379", "6380"],
        &["--port", "--loglevel", "verbose"],
        &["--port", "--bla", "--loglevel", "verbose"],
        &["--logfile", "--my--log--file", "--loglevel", "--bla"],
        &["--shutdown-on-sigint"],
        &["--shutdown-on-sigint", "now force", "--shutdown-on-sigterm"],
        &["--replicaof", "--127.0.0.1", "--abc"],
    ];
    for args in bad {
        let want = fatal(&redis_bin(), args);
        assert_eq!(fatal(env!("CARGO_BIN_EXE_atoll-server"), args), want, "{args:?}");
    }
    let good: &[&str] = &[
        "--maxmemory 700mb",
        "--maxmemory-policy volatile-lru",
        "--shutdown-on-sigint",
        "now force",
        "--save",
        "3600 1 300 100",
    ];
    let (r, a) = (start_redis(good), start_atoll(good));
    for name in ["maxmemory", "maxmemory-policy", "shutdown-on-sigint", "save"] {
        let get = |port| RawConn::connect(port).cmd(&[b"CONFIG", b"GET", name.as_bytes()]);
        assert_eq!(show(&get(a.port)), show(&get(r.port)), "{name}");
    }
}

/// DEBUG CONFIG-REWRITE-FORCE-ALL writes every parameter, defaults included, and the server
/// restarts from that file with the same configuration — on Redis 7.2.6 as on Atoll (the
/// check Redis's own suite makes).
#[test]
fn config_rewrite_force_all_restarts_to_the_same_configuration() {
    for bin in [redis_bin(), env!("CARGO_BIN_EXE_atoll-server").to_string()] {
        let dir = std::env::temp_dir().join(format!("atoll-rwall-{}-{}", std::process::id(), bin.len()));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("server.conf");
        let port = free_port();
        std::fs::write(&conf, format!("port {port}\nsave \"\"\nenable-debug-command yes\nhz 15\n")).unwrap();
        let start = || {
            let child = std::process::Command::new(&bin)
                .arg(&conf)
                .current_dir(&dir)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap();
            wait_for_port(port);
            ServerProc { child, port, name: "server" }
        };
        let s = start();
        let mut c = RawConn::connect(port);
        let before = pairs(&c.cmd(&[b"CONFIG", b"GET", b"*"]));
        assert_eq!(c.cmd(&[b"DEBUG", b"CONFIG-REWRITE-FORCE-ALL"]), b"+OK\r\n", "{bin}");
        let text = std::fs::read_to_string(&conf).unwrap();
        // Defaults too.
        assert!(text.lines().any(|l| l == "maxmemory-samples 5"), "{bin}: {text}");
        assert!(text.lines().any(|l| l == "hz 15"), "{bin}: {text}");
        drop(c);
        drop(s);
        let _s = start();
        let after = pairs(&RawConn::connect(port).cmd(&[b"CONFIG", b"GET", b"*"]));
        assert_eq!(after, before, "{bin}");
        std::fs::remove_dir_all(&dir).ok();
    }
}

/// CONFIG SET port moves the listener, as in Redis: the new port answers, the old one is
/// closed, INFO follows; a port that cannot be bound fails the whole call with Redis's words
/// and changes nothing, the other parameters of the call included.
#[test]
fn config_set_port_moves_the_listener_as_redis_does() {
    let r = start_redis(&[]);
    let a = start_atoll(&[]);
    // Held by someone else: binding it must fail.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_port = taken.local_addr().unwrap().port().to_string();
    for s in [&r, &a] {
        let mut c = RawConn::connect(s.port);
        let e = c.cmd(&[b"CONFIG", b"SET", b"maxmemory", b"10000001", b"port", taken_port.as_bytes()]);
        let e = String::from_utf8_lossy(&e).to_string();
        assert!(
            e.starts_with(
                "-ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port"
            ),
            "{}: {e}",
            s.name
        );
        assert_eq!(parse_array(&c.cmd(&[b"CONFIG", b"GET", b"maxmemory"]))[1], b"0", "{}", s.name);
        assert_eq!(parse_array(&c.cmd(&[b"CONFIG", b"GET", b"port"]))[1], s.port.to_string().into_bytes());
        // The same port again changes nothing.
        assert_eq!(c.cmd(&[b"CONFIG", b"SET", b"port", s.port.to_string().as_bytes()]), b"+OK\r\n", "{}", s.name);
        let new = free_port();
        assert_eq!(c.cmd(&[b"CONFIG", b"SET", b"port", new.to_string().as_bytes()]), b"+OK\r\n", "{}", s.name);
        let mut moved = RawConn::connect(new);
        assert_eq!(moved.cmd(&[b"PING"]), b"+PONG\r\n");
        let info = String::from_utf8_lossy(&moved.cmd(&[b"INFO", b"server"])).to_string();
        assert!(info.contains(&format!("tcp_port:{new}\r\n")), "{}: {info}", s.name);
        assert!(std::net::TcpStream::connect(("127.0.0.1", s.port)).is_err(), "{}: the old port still listens", s.name);
        // The connection made before the move is still served.
        assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n");
    }
}

/// Debian's packaged redis.conf: the machine's own when redis-server is installed, else Redis
/// 7.2.6's with the changes Debian's packaging makes to it (in the background, its pid file,
/// log file and data directory).
fn debian_redis_conf(dir: &std::path::Path) -> std::path::PathBuf {
    let installed = std::path::Path::new("/etc/redis/redis.conf");
    let text = if installed.exists() {
        std::fs::read_to_string(installed).unwrap()
    } else {
        let src = std::path::Path::new(&redis_bin()).parent().unwrap().parent().unwrap().join("redis.conf");
        std::fs::read_to_string(src)
            .unwrap()
            .replace("\ndaemonize no", "\ndaemonize yes")
            .replace("\npidfile /var/run/redis_6379.pid", "\npidfile /run/redis/redis-server.pid")
            .replace("\nlogfile \"\"", "\nlogfile /var/log/redis/redis-server.log")
            .replace("\ndir ./", "\ndir /var/lib/redis")
    };
    let path = dir.join("debian-redis.conf");
    std::fs::write(&path, machine_paths(&text, "/var/lib/redis", dir)).unwrap();
    path
}

/// A packaged config with its data directory (which the package creates) moved to `dir`:
/// the file's `dir` is changed into at once, before the command line's `--dir` is read.
fn machine_paths(text: &str, data_dir: &str, dir: &std::path::Path) -> String {
    let line = format!("\ndir {data_dir}\n");
    assert!(text.contains(&line), "the packaged config sets `dir {data_dir}`");
    text.replace(&line, &format!("\ndir {}\n", dir.display()))
}

fn pid_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

/// `daemonize yes` (Debian's config): the command returns to the shell at once, the pid file
/// holds the pid of the process that answers, which left the shell's session; SHUTDOWN removes
/// the file. Redis 7.2.6 beside it, from the same config.
#[test]
fn debians_config_starts_in_the_background_as_redis() {
    for (name, bin) in [("redis", redis_bin()), ("atoll", env!("CARGO_BIN_EXE_atoll-server").to_string())] {
        let port = free_port();
        let dir = scratch_dir(port);
        let conf = debian_redis_conf(&dir);
        let pidfile = dir.join("server.pid");
        let status = std::process::Command::new(&bin)
            .arg(&conf)
            .args(["--port", &port.to_string(), "--dir", dir.to_str().unwrap()])
            .args(["--logfile", dir.join("server.log").to_str().unwrap(), "--pidfile", pidfile.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "{name}: {status}");
        wait_for_port(port);
        let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        let mut c = RawConn::connect(port);
        let info = String::from_utf8_lossy(&c.cmd(&[b"INFO", b"server"])).to_string();
        assert!(info.contains(&format!("process_id:{pid}\r\n")), "{name}: {info}");
        // SAFETY: reads another process's session id.
        assert_eq!(unsafe { libc::getsid(pid) }, pid, "{name}: the daemon leads its own session");
        c.send(&v(&["SHUTDOWN", "NOSAVE"]));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while pid_alive(pid) {
            assert!(std::time::Instant::now() < deadline, "{name}: still running");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(!pidfile.exists(), "{name}: the pid file stays");
    }
}

/// `supervised systemd`: the states systemd waits for arrive on NOTIFY_SOCKET — loading,
/// READY=1 once connections are accepted, STOPPING=1 at shutdown — and the server stays in
/// the foreground even with `daemonize yes`, as Redis under systemd.
#[test]
fn systemd_supervision_reports_ready_and_stopping() {
    let port = free_port();
    let dir = scratch_dir(port);
    let sock_path = dir.join("notify.sock");
    let sock = std::os::unix::net::UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_atoll-server"))
        .args(["--port", &port.to_string(), "--save", "", "--dir", dir.to_str().unwrap()])
        .args(["--supervised", "systemd", "--daemonize", "yes"])
        .env("NOTIFY_SOCKET", &sock_path)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let recv = || {
        let mut buf = [0u8; 512];
        let n = sock.recv(&mut buf).expect("a notification");
        String::from_utf8_lossy(&buf[..n]).to_string()
    };
    assert_eq!(recv(), "STATUS=Atoll is loading...\n");
    assert_eq!(recv(), "STATUS=Ready to accept connections\nREADY=1\n");
    let mut c = RawConn::connect(port);
    let info = String::from_utf8_lossy(&c.cmd(&[b"INFO", b"server"])).to_string();
    assert!(info.contains("process_supervised:systemd\r\n"), "{info}");
    c.send(&v(&["SHUTDOWN", "NOSAVE"]));
    assert_eq!(recv(), "STATUS=Shutting down\nSTOPPING=1\n");
    assert!(child.wait().unwrap().success());
}

/// `syslog-enabled yes`: each line logged reaches the system logger with the ident, the
/// facility and the level as Redis's `syslog(3)` call sends them — Redis 7.2.6 beside it, its
/// lines in the same form. Each server runs in a mount namespace of its own whose /dev/log is
/// this test's socket.
#[test]
fn syslog_lines_reach_the_system_logger() {
    let mut firsts = Vec::new();
    for (name, bin, banner) in [
        ("redis", redis_bin(), "oO0OoO0OoO0Oo Redis is starting oO0OoO0OoO0Oo"),
        ("atoll", env!("CARGO_BIN_EXE_atoll-server").to_string(), "oO0OoO0OoO0Oo Atoll is starting oO0OoO0OoO0Oo"),
    ] {
        let port = free_port();
        let dir = scratch_dir(port);
        let sock_path = dir.join("syslog.sock");
        let sock = std::os::unix::net::UnixDatagram::bind(&sock_path).unwrap();
        sock.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
        let script = format!(
            "mount -t tmpfs tmpfs /dev && mknod -m 666 /dev/null c 1 3 && ln -s {} /dev/log && exec {bin} --port {port} --save '' --dir {} --syslog-enabled yes --syslog-ident atoll-test --syslog-facility local3",
            sock_path.display(),
            dir.display()
        );
        let child = std::process::Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", &script])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("unshare (util-linux) runs the server in a mount namespace");
        let _srv = ServerProc { child, port, name };
        let mut lines = Vec::new();
        let mut buf = [0u8; 2048];
        // Redis sends its first lines before it calls openlog (glibc's defaults: facility
        // user, the program's name, no pid); its first line in the configured form comes later.
        while !lines.iter().any(|l: &String| l.contains(" atoll-test[")) {
            assert!(lines.len() < 30, "{name}: {lines:?}");
            let n = sock.recv(&mut buf).expect("a syslog line");
            lines.push(String::from_utf8_lossy(&buf[..n]).to_string());
        }
        let line = lines.iter().find(|l| l.contains(" atoll-test[")).unwrap().clone();
        // `<PRI>Mmm dd hh:mm:ss atoll-test[PID]: text`, PRI = local3 (19) × 8 + the level.
        let pri: u32 = line[1..line.find('>').unwrap()].parse().unwrap();
        assert_eq!(pri / 8, 19, "{name}: {line}");
        let (head, rest) = line.split_at(line.find(" atoll-test[").unwrap());
        assert_eq!(head.len(), format!("<{pri}>").len() + 15, "{name}: the timestamp in {line}");
        let pid = &rest[" atoll-test[".len()..rest.find("]: ").unwrap()];
        assert!(pid.parse::<u32>().is_ok(), "{name}: {line}");
        if name == "atoll" {
            // Atoll opens the log before its first line: the banner, at notice (157).
            assert_eq!(pri, 157, "{line}");
            assert!(line.ends_with(&format!("]: {banner}")), "{lines:?}");
        } else {
            assert!(lines.iter().any(|l| l.ends_with(banner)), "{lines:?}");
        }
        firsts.push(pri / 8);
    }
    assert_eq!(firsts[0], firsts[1], "the facility");
}

/// Starts `bin` with `args` and the extra environment `env`, output to `log`.
fn spawn_with_env(
    bin: &str,
    args: &[&str],
    env: &[(&str, &std::path::Path)],
    log: &std::path::Path,
) -> std::process::Child {
    let mut cmd = std::process::Command::new(bin);
    cmd.args(args).stdout(std::fs::File::create(log).unwrap()).stderr(std::process::Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// `locale-collate`: SORT … ALPHA (unless STORE, which orders bytes) and Lua's string
/// comparisons follow the locale's collation as Redis's `strcoll` does; CONFIG SET changes it
/// at once; an unknown name is refused, and at start-up stops the server with Redis's log
/// line. The test builds en_US.UTF-8 with glibc's localedef into a folder of its own
/// (LOCPATH), so it needs no locale installed on the machine.
#[test]
fn locale_collate_orders_sort_and_lua_as_redis() {
    let locales = std::env::temp_dir().join(format!("atoll-locales-{}", std::process::id()));
    std::fs::create_dir_all(&locales).unwrap();
    let status = std::process::Command::new("localedef")
        .args(["-i", "en_US", "-f", "UTF-8"])
        .arg(locales.join("en_US.UTF-8"))
        .status()
        .expect("localedef (glibc, with Debian's `locales` package) builds the test's locale");
    assert!(status.success(), "localedef: {status}");
    let env = [("LOCPATH", locales.as_path())];
    let cases: &[&[&str]] = &[
        &["RPUSH", "l", "b", "B", "a", "A", "c", "a b", "ab", "_x", "10", "9"],
        &["MSET", "w_b", "B", "w_B", "a", "w_a", "b", "w_A", "A", "w_c", "_", "w_ab", "a b", "w_a b", "ab"],
        &["SORT", "l", "ALPHA"],
        &["SORT", "l", "ALPHA", "DESC", "LIMIT", "1", "4"],
        &["SORT", "l", "BY", "w_*", "ALPHA"],
        &["SORT", "l", "ALPHA", "STORE", "dst"],
        &["LRANGE", "dst", "0", "-1"],
        &["SORT", "l", "BY", "w_*", "ALPHA", "STORE", "dst2"],
        &["LRANGE", "dst2", "0", "-1"],
        &["SADD", "s", "b", "B", "a", "A", "_x"],
        &["EVAL", "return redis.call('sort', KEYS[1], 'BY', 'nosort')", "1", "s"],
        &[
            "EVAL",
            "return {tostring('a' < 'B'), tostring('B' < 'a'), tostring('a b' < 'ab'), tostring('_x' < 'a')}",
            "0",
        ],
    ];
    let mut runs = Vec::new();
    for (name, bin) in [("redis", redis_bin()), ("atoll", env!("CARGO_BIN_EXE_atoll-server").to_string())] {
        let port = free_port();
        let dir = scratch_dir(port);
        let args = [
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--dir",
            dir.to_str().unwrap(),
            "--locale-collate",
            "en_US.UTF-8",
        ];
        let child = spawn_with_env(&bin, &args, &env, &dir.join("out.log"));
        let _s = ServerProc { child, port, name };
        wait_for_port(port);
        let mut c = RawConn::connect(port);
        let mut replies = Vec::new();
        for locale in ["en_US.UTF-8", "C"] {
            assert_eq!(c.cmd(&[b"CONFIG", b"SET", b"locale-collate", locale.as_bytes()]), b"+OK\r\n", "{name}");
            c.cmd(&[b"DEL", b"l", b"s", b"dst", b"dst2"]);
            for case in cases {
                let args: Vec<&[u8]> = case.iter().map(|a| a.as_bytes()).collect();
                replies.push(show(&c.cmd(&args)));
            }
        }
        let e = c.cmd(&[b"CONFIG", b"SET", b"locale-collate", b"xx_NOWHERE.UTF-8"]);
        assert_eq!(
            show(&e),
            show(b"-ERR CONFIG SET failed (possibly related to argument 'locale-collate') - Invalid locale name\r\n"),
            "{name}"
        );
        assert_eq!(parse_array(&c.cmd(&[b"CONFIG", b"GET", b"locale-collate"]))[1], b"C", "{name}");
        runs.push(replies);
    }
    assert_eq!(runs[1], runs[0], "Atoll's replies (en_US.UTF-8 then C) differ from Redis 7.2.6's");
    // Not vacuous: the two locales order the list differently.
    let n = cases.len();
    assert_ne!(runs[0][2], runs[0][n + 2], "en_US.UTF-8 and C sort alike: {}", runs[0][2]);
    assert_ne!(runs[0][11], runs[0][n + 11]);
    // An unknown locale at start-up: both stop with the same line.
    for (name, bin) in [("redis", redis_bin()), ("atoll", env!("CARGO_BIN_EXE_atoll-server").to_string())] {
        let out = std::process::Command::new(&bin)
            .args(["--port", &free_port().to_string(), "--save", "", "--locale-collate", "xx_NOWHERE"])
            .env("LOCPATH", &locales)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{name}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("# Failed to configure LOCALE for invalid locale name."), "{name}: {text}");
    }
    std::fs::remove_dir_all(&locales).ok();
}

/// `activedefrag`: Atoll's jemalloc is the stock one, without the hint Redis's modified copy
/// gives, so `yes` is refused in Redis's words for such a build — the oracle is one (built
/// with MALLOC=libc): CONFIG SET and the configuration file alike. `no` is accepted, and
/// INFO reports no defragmentation, measured the same way.
#[test]
fn activedefrag_is_refused_as_redis_refuses_it_without_its_jemalloc() {
    let r = start_redis(&[]);
    let a = start_atoll(&[]);
    for s in [&r, &a] {
        let mut c = RawConn::connect(s.port);
        let e = c.cmd(&[b"CONFIG", b"SET", b"activedefrag", b"yes"]);
        assert_eq!(
            show(&e),
            show(b"-ERR CONFIG SET failed (possibly related to argument 'activedefrag') - Active defragmentation cannot be enabled: it requires a Redis server compiled with a modified Jemalloc like the one shipped by default with the Redis source distribution\r\n"),
            "{}",
            s.name
        );
        assert_eq!(c.cmd(&[b"CONFIG", b"SET", b"activedefrag", b"no"]), b"+OK\r\n", "{}", s.name);
        let info = String::from_utf8_lossy(&c.cmd(&[b"INFO", b"all"])).to_string();
        for field in ["active_defrag_running:0\r\n", "active_defrag_hits:0\r\n", "total_active_defrag_time:0\r\n"] {
            assert!(info.contains(field), "{}: {field}", s.name);
        }
    }
    for (name, bin) in [("redis", redis_bin()), ("atoll", env!("CARGO_BIN_EXE_atoll-server").to_string())] {
        let dir = scratch_dir(free_port());
        let conf = dir.join("defrag.conf");
        std::fs::write(&conf, "activedefrag yes\n").unwrap();
        let out =
            std::process::Command::new(&bin).arg(&conf).args(["--port", &free_port().to_string()]).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{name}");
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(text.contains(">>> 'activedefrag yes'\nActive defragmentation cannot be enabled: it requires a Redis server compiled with a modified Jemalloc"), "{name}: {text}");
    }
}

/// Valkey's own parameters that its stock configuration sets (Atoll accepts them so that
/// file starts): each exists with Valkey 9.1.2's default, but `hide-user-data-from-log`,
/// which Atoll leaves off as Redis 7.2 (whose logs show keys) does.
#[test]
fn valkeys_parameters_exist_with_valkeys_defaults() {
    let vk = start_valkey(&[]);
    let a = start_atoll(&[]);
    let (mut vc, mut ac) = (RawConn::connect(vk.port), RawConn::connect(a.port));
    for name in VALKEY_OWN {
        let q: [&[u8]; 3] = [b"CONFIG", b"GET", name.as_bytes()];
        let (want, got) = (vc.cmd(&q), ac.cmd(&q));
        if *name == "hide-user-data-from-log" {
            assert_eq!(parse_array(&got)[1], b"no");
            assert_eq!(parse_array(&want)[1], b"yes");
        } else {
            assert_eq!(show(&got), show(&want), "{name}");
        }
    }
    // Invalid values: the same refusal.
    for (name, value) in [("rdb-version-check", "loose"), ("hide-user-data-from-log", "maybe")] {
        let q: [&[u8]; 4] = [b"CONFIG", b"SET", name.as_bytes(), value.as_bytes()];
        assert_eq!(show(&ac.cmd(&q)), show(&vc.cmd(&q)), "{name} {value}");
    }
    // What Atoll cannot do yet is refused, not accepted and ignored.
    let e = ac.cmd(&[b"CONFIG", b"SET", b"dual-channel-replication-enabled", b"yes"]);
    assert!(show(&e).contains("not supported by Atoll yet: dual-channel replication"), "{}", show(&e));
}

/// Debian's packaged valkey.conf (Valkey 8.1.1's, from Debian 13's valkey-server package,
/// fetched and checked by `scripts/valkey.sh conf`) starts Atoll in the background with only
/// the machine's paths and the port changed — beside Valkey 9.1.2 started the same way —
/// and the values it sets are what CONFIG GET reports on both.
#[test]
fn valkeys_debian_config_starts_in_the_background() {
    let tool = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/valkey.sh");
    let out = std::process::Command::new(&tool).arg("conf").output().expect("scripts/valkey.sh conf");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let conf = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(text.contains("\ndaemonize yes\n") && text.contains("\nhide-user-data-from-log yes\n"), "{conf}");
    for (name, bin) in [("valkey", valkey_bin()), ("atoll", env!("CARGO_BIN_EXE_atoll-server").to_string())] {
        let port = free_port();
        let dir = scratch_dir(port);
        let conf = dir.join("valkey.conf");
        std::fs::write(&conf, machine_paths(&text, "/var/lib/valkey", &dir)).unwrap();
        let pidfile = dir.join("server.pid");
        let status = std::process::Command::new(&bin)
            .arg(&conf)
            .args(["--port", &port.to_string(), "--dir", dir.to_str().unwrap()])
            .args(["--logfile", dir.join("server.log").to_str().unwrap(), "--pidfile", pidfile.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "{name}: {status}");
        wait_for_port(port);
        let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        let mut c = RawConn::connect(port);
        for (param, want) in [
            ("hide-user-data-from-log", "yes"),
            ("lazyfree-lazy-user-flush", "yes"),
            ("lazyfree-lazy-eviction", "yes"),
            ("replica-lazy-flush", "yes"),
            ("rdb-version-check", "strict"),
            ("commandlog-execution-slower-than", "10000"),
            ("slowlog-log-slower-than", "10000"),
            ("commandlog-large-request-max-len", "128"),
            ("oom-score-adj-values", "0 200 800"),
            ("daemonize", "yes"),
        ] {
            let got = parse_array(&c.cmd(&[b"CONFIG", b"GET", param.as_bytes()]));
            assert_eq!(String::from_utf8_lossy(&got[1]), want, "{name}: {param}");
        }
        assert_eq!(c.cmd(&[b"SET", b"k", b"v"]), b"+OK\r\n", "{name}");
        c.send(&v(&["SHUTDOWN", "NOSAVE"]));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while pid_alive(pid) {
            assert!(std::time::Instant::now() < deadline, "{name}: still running");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(!pidfile.exists(), "{name}: the pid file stays");
    }
}

/// `supervised upstart` with UPSTART_JOB set: the server stops itself with SIGSTOP where it
/// detects its supervisor (upstart's "expect stop" continues it) and serves once continued,
/// reporting its supervisor in INFO — Redis 7.2.6 beside it.
#[test]
fn upstart_supervision_stops_once_ready() {
    for (name, bin) in [("redis", redis_bin()), ("atoll", env!("CARGO_BIN_EXE_atoll-server").to_string())] {
        let port = free_port();
        let dir = scratch_dir(port);
        let child = std::process::Command::new(&bin)
            .args([
                "--port",
                &port.to_string(),
                "--save",
                "",
                "--dir",
                dir.to_str().unwrap(),
                "--supervised",
                "upstart",
            ])
            .env("UPSTART_JOB", "atoll-test")
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let _s = ServerProc { child, port, name };
        // /proc/PID/stat's third field: T once stopped.
        let state = || {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            stat.rsplit(')').next().unwrap_or("").split_whitespace().next().unwrap_or("").to_string()
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while state() != "T" {
            assert!(std::time::Instant::now() < deadline, "{name}: never stopped itself (state {})", state());
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // Redis stops at detection, before it listens (upstart's `expect stop` then
        // continues it): nothing answers on the port yet.
        assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err(), "{name}: listening while stopped");
        // SAFETY: continues the child this test started.
        unsafe { libc::kill(pid, libc::SIGCONT) };
        wait_for_port(port);
        let mut c = RawConn::connect(port);
        let info = String::from_utf8_lossy(&c.cmd(&[b"INFO", b"server"])).to_string();
        assert!(info.contains("process_supervised:upstart\r\n"), "{name}: {info}");
    }
}

/// `logfile` and logrotate's `copytruncate`: after the file is truncated in place, the next
/// lines start at its beginning (the log is opened for appending), not after a hole — as
/// Redis 7.2.6's, beside it.
#[test]
fn a_logfile_truncated_in_place_keeps_being_written_from_its_start() {
    for (name, bin) in [("redis", redis_bin()), ("atoll", env!("CARGO_BIN_EXE_atoll-server").to_string())] {
        let port = free_port();
        let dir = scratch_dir(port);
        let log = dir.join("server.log");
        let child = std::process::Command::new(&bin)
            .args(["--port", &port.to_string(), "--save", "", "--dir", dir.to_str().unwrap()])
            .args(["--logfile", log.to_str().unwrap(), "--enable-debug-command", "yes"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let _s = ServerProc { child, port, name };
        wait_for_port(port);
        let before = std::fs::metadata(&log).unwrap().len();
        assert!(before > 200, "{name}: the start-up lines: {before} bytes");
        // What copytruncate does: copy, then truncate the original in place.
        std::fs::copy(&log, dir.join("server.log.1")).unwrap();
        std::fs::OpenOptions::new().write(true).open(&log).unwrap().set_len(0).unwrap();
        let mut c = RawConn::connect(port);
        assert_eq!(c.cmd(&[b"DEBUG", b"LOG", b"after the rotation"]), b"+OK\r\n", "{name}");
        let text = std::fs::read(&log).unwrap();
        assert!(!text.contains(&0), "{name}: a hole of NUL bytes where the old lines were: {} bytes", text.len());
        let text = String::from_utf8(text).unwrap();
        assert!(text.lines().count() <= 3 && text.contains("DEBUG LOG: after the rotation"), "{name}: {text}");
    }
}

/// Every row of the table acts or is refused: a value other than the default of a row whose
/// feature Atoll lacks stops start-up with an error naming what is missing (or Redis's own
/// words), never accepted and ignored. (Since 2026-11-29 no row is accepted without acting:
/// `list-compress-depth` and `sanitize-dump-payload`, the last two, act.)
#[test]
fn every_row_acts_or_is_refused() {
    use atoll::config::{Config, Kind, DEFS};
    let mut wrong = Vec::new();
    let mut refused = 0;
    for def in DEFS {
        match def.support {
            Support::Pending(_) | Support::Unable(_) => {
                let other = match def.kind {
                    Kind::Bool => (if def.default == "yes" { "no" } else { "yes" }).to_string(),
                    Kind::Int { max, .. } | Kind::Memory { max, .. } => {
                        let d: i128 = def.default.parse().unwrap();
                        (if d < max { d + 1 } else { d - 1 }).to_string()
                    }
                    Kind::Enum(names) => names.iter().find(|n| **n != def.default).unwrap().to_string(),
                    Kind::Str => "127.0.0.2".to_string(),
                    _ => {
                        wrong.push(format!("{}: no non-default value to try", def.name));
                        continue;
                    }
                };
                let args = vec![format!("--{}", def.name), other.clone()];
                match Config::from_args(&args) {
                    Ok(_) => wrong.push(format!("{} {other}: accepted", def.name)),
                    Err(e) => {
                        let e = e.to_string();
                        let named = match def.support {
                            Support::Pending(what) => e.contains(&format!("not supported by Atoll yet: {what}")),
                            Support::Unable(why) => e.contains(why),
                            _ => false,
                        };
                        if !named {
                            wrong.push(format!("{} {other}: refused with {e:?}", def.name));
                        }
                        refused += 1;
                    }
                }
            }
            Support::Live | Support::FileOnly(_) => {}
        }
    }
    // Cluster mode's twenty rows act since issue 38 (tests/cluster.rs); the rest still refuse.
    assert!(refused >= 10, "only {refused} rows refused");
    assert!(wrong.is_empty(), "{} rows:\n{}", wrong.len(), wrong.join("\n"));
}

/// `always-show-logo`: `yes` writes the start-up logo (its version, mode, port and pid lines)
/// in place of the one-line "Running mode=…", `no` (with a log file) the line — as Redis 7.2.6.
#[test]
fn always_show_logo_writes_the_logo_as_redis_does() {
    for (name, bin) in [("redis", redis_bin()), ("atoll", env!("CARGO_BIN_EXE_atoll-server").to_string())] {
        for show in ["yes", "no"] {
            let port = free_port();
            let dir = scratch_dir(port);
            let log = dir.join("server.log");
            let child = std::process::Command::new(&bin)
                .args(["--port", &port.to_string(), "--save", "", "--dir", dir.to_str().unwrap()])
                .args(["--logfile", log.to_str().unwrap(), "--always-show-logo", show])
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let pid = child.id();
            let _s = ServerProc { child, port, name };
            wait_for_port(port);
            let text = std::fs::read_to_string(&log).unwrap();
            let logo = text.contains(&format!(" PID: {pid}\n")) && text.contains(&format!(" Port: {port}\n"));
            assert_eq!(logo, show == "yes", "{name} always-show-logo {show}: {text}");
            assert_eq!(text.contains("Running mode="), show == "no", "{name} always-show-logo {show}: {text}");
        }
    }
}

/// `use-exit-on-panic` (hidden; Redis's tests set it): DEBUG PANIC writes the crash report,
/// then the process exits with status 1 instead of dying by SIGABRT — Redis 7.2.6 beside it.
#[test]
fn use_exit_on_panic_exits_instead_of_aborting() {
    use std::os::unix::process::ExitStatusExt;
    for (name, bin) in [("redis", redis_bin()), ("atoll", env!("CARGO_BIN_EXE_atoll-server").to_string())] {
        for exit in ["yes", "no"] {
            let port = free_port();
            let dir = scratch_dir(port);
            let mut child = std::process::Command::new(&bin)
                .args(["--port", &port.to_string(), "--save", "", "--dir", dir.to_str().unwrap()])
                .args(["--enable-debug-command", "yes", "--use-exit-on-panic", exit, "--crash-memcheck-enabled", "no"])
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap();
            wait_for_port(port);
            RawConn::connect(port).send(&v(&["DEBUG", "PANIC"]));
            let status = child.wait().unwrap();
            if exit == "yes" {
                assert_eq!(status.code(), Some(1), "{name} use-exit-on-panic yes: {status}");
            } else {
                assert_eq!(status.signal(), Some(libc::SIGABRT), "{name} use-exit-on-panic no: {status}");
            }
        }
    }
}

/// `dynamic-hz`: with more than 200 clients per tick the timers run faster — INFO `hz` doubles
/// from `hz 1` with 250 connections, `configured_hz` stays — and with `no` they do not; Redis
/// 7.2.6 beside it.
#[test]
fn dynamic_hz_follows_the_number_of_clients_as_redis() {
    for (name, bin) in [("redis", redis_bin()), ("atoll", env!("CARGO_BIN_EXE_atoll-server").to_string())] {
        for dynamic in ["yes", "no"] {
            let port = free_port();
            let dir = scratch_dir(port);
            let child = std::process::Command::new(&bin)
                .args(["--port", &port.to_string(), "--save", "", "--dir", dir.to_str().unwrap()])
                .args(["--hz", "1", "--dynamic-hz", dynamic])
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let _s = ServerProc { child, port, name };
            wait_for_port(port);
            let conns: Vec<RawConn> = (0..250).map(|_| RawConn::connect(port)).collect();
            let mut c = RawConn::connect(port);
            let field = |c: &mut RawConn, f: &str| -> String {
                let info = String::from_utf8_lossy(&c.cmd(&[b"INFO", b"server"])).to_string();
                info.lines().find_map(|l| l.strip_prefix(&format!("{f}:"))).unwrap_or("").trim().to_string()
            };
            let want = if dynamic == "yes" { "2" } else { "1" };
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while field(&mut c, "hz") != want {
                assert!(
                    std::time::Instant::now() < deadline,
                    "{name} dynamic-hz {dynamic}: hz {}",
                    field(&mut c, "hz")
                );
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            // It stays there (no flapping back while the clients stay).
            std::thread::sleep(std::time::Duration::from_millis(1200));
            assert_eq!(field(&mut c, "hz"), want, "{name} dynamic-hz {dynamic}");
            assert_eq!(field(&mut c, "configured_hz"), "1", "{name}");
            drop(conns);
        }
    }
}

/// The process title as `ps` shows it (`/proc/<pid>/cmdline`, NULs as spaces, trimmed).
fn proc_title(pid: u32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    String::from_utf8_lossy(&raw).replace('\0', " ").trim().to_string()
}

/// `proc-title-template` and `set-proc-title` act as in Redis 7.2.6: the title `ps` shows
/// follows the template at start-up and on CONFIG SET (the binary's path aside, the same text
/// as Redis's), a bad template is refused with Redis's error, and `set-proc-title no` leaves
/// the command line as it was run.
#[test]
fn the_process_title_follows_its_template_as_in_redis() {
    let template = "TEST {title} {listen-addr} {port} {tls-port} {unixsocket} {config-file} {server-mode}";
    for s in [start_redis(&["--proc-title-template", template]), start_atoll(&["--proc-title-template", template])] {
        let name = s.name;
        let pid = s.child.id();
        let bin = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).unwrap();
        let bin = bin.split(['\0', ' ']).nth(1).unwrap_or_default().to_string();
        let port = s.port;
        let mut c = RawConn::connect(port);
        let expect = |t: &str| t.replace("{bin}", &bin).replace("{port}", &port.to_string());
        // No `bind` given: Redis's default binds `* -::*`, Atoll's tests run Atoll the same way.
        let first = String::from_utf8_lossy(&c.cmd(&[b"CONFIG", b"GET", b"bind"])).to_string();
        let bind = first.split("\r\n").nth(4).unwrap_or("*").split(' ').next().unwrap_or("*").to_string();
        assert_eq!(proc_title(pid), expect(&format!("TEST {{bin}} {bind}:{{port}} {{port}} 0  -")), "{name}");
        assert_eq!(
            c.cmd(&[b"CONFIG", b"SET", b"proc-title-template", b"{title} {{port {port}}}"]),
            b"+OK\r\n",
            "{name}"
        );
        assert_eq!(proc_title(pid), expect("{bin} {port {port}}}"), "{name}");
        for bad in ["{invalid-var}", "{title", "x {", " "] {
            let e = String::from_utf8_lossy(&c.cmd(&[b"CONFIG", b"SET", b"proc-title-template", bad.as_bytes()]))
                .to_string();
            assert_eq!(
                e,
                "-ERR CONFIG SET failed (possibly related to argument 'proc-title-template') - template format is invalid or contains unknown variables\r\n",
                "{name}: {bad:?}"
            );
        }
        assert_eq!(proc_title(pid), expect("{bin} {port {port}}}"), "{name}");
    }
    // set-proc-title no: the command line stays as the server was started.
    for s in [start_redis(&["--set-proc-title", "no"]), start_atoll(&["--set-proc-title", "no"])] {
        let title = proc_title(s.child.id());
        assert!(title.contains("--set-proc-title no"), "{}: {title}", s.name);
    }
}
