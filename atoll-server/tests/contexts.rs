//! Every command in every context a client can put it in (issue: "nothing a client sends can
//! hang the server"): alone, pipelined behind other commands, inside MULTI/EXEC, inside EVAL
//! and FCALL (`redis.pcall`), inside MULTI on a replica, while `CLIENT PAUSE WRITE` is on, and
//! while another client keeps writing the keys it touches — on Redis 7.2.6 and on Atoll side
//! by side, with a timeout on every reply.
//!
//! The commands are not listed here: they are Atoll's own `COMMAND` table (every subcommand
//! too), and their arguments are generated from `COMMAND DOCS` — the smallest valid-shaped
//! call (required arguments only, the first choice of each `oneof`, one of each `multiple`),
//! keys created beforehand with the type of the command's group. A command added to the table
//! is covered without anyone adding it here.
//!
//! Checked, for each command × context: a reply arrives within the timeout on both servers (or
//! both close the connection), Atoll never answers `ERR internal error` (a caught panic: the
//! debug build's lock-order check fails that way), and where the context is deterministic the
//! reply types (and, for errors, the error code) equal Redis's. The few differences that are
//! known and explained are listed in `tests/context_differences.txt`. A command Redis 7.2 does
//! not have (COMMAND DOCS `since` after 7.2) is compared with Valkey 9.1.2 instead.

mod common;
use common::*;
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long any one reply may take before the test calls it a hang.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------------
// A RESP2 reader that keeps the reply's shape.

#[derive(Clone, Debug, PartialEq)]
enum R {
    Simple(String),
    Err(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Arr(Option<Vec<R>>),
}

impl R {
    fn text(&self) -> String {
        match self {
            R::Simple(s) | R::Err(s) => s.clone(),
            R::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
            R::Int(i) => i.to_string(),
            _ => String::new(),
        }
    }
    fn items(&self) -> &[R] {
        match self {
            R::Arr(Some(v)) => v,
            _ => &[],
        }
    }
    /// A flat `[k, v, k, v …]` array as pairs.
    fn pairs(&self) -> Vec<(String, &R)> {
        self.items().chunks(2).filter(|c| c.len() == 2).map(|c| (c[0].text(), &c[1])).collect()
    }
    fn get(&self, k: &str) -> Option<&R> {
        self.pairs().into_iter().find(|(n, _)| n == k).map(|(_, v)| v)
    }
    /// The reply's shape for comparison: its type, an error's code, an array's element shapes.
    fn shape(&self) -> String {
        match self {
            R::Simple(_) => "+".into(),
            R::Err(e) => format!("-{}", e.split(' ').next().unwrap_or("")),
            R::Int(_) => ":".into(),
            R::Bulk(Some(_)) => "$".into(),
            R::Bulk(None) => "$nil".into(),
            R::Arr(None) => "*nil".into(),
            R::Arr(Some(_)) => "*".into(),
        }
    }
    /// Short enough for a failure message: errors in full, the rest as shapes.
    fn brief(&self) -> String {
        match self {
            R::Err(e) => format!("-{e}"),
            R::Arr(Some(v)) if v.len() <= 8 => {
                format!("[{}]", v.iter().map(|r| r.brief()).collect::<Vec<_>>().join(" "))
            }
            other => other.shape(),
        }
    }
}

fn parse(buf: &[u8], pos: usize) -> Option<(R, usize)> {
    let le = pos + buf.get(pos..)?.windows(2).position(|w| w == b"\r\n")?;
    let line = String::from_utf8_lossy(&buf[pos + 1..le]).into_owned();
    let next = le + 2;
    let n = || line.parse::<i64>().unwrap_or(-1);
    Some(match buf[pos] {
        b'+' => (R::Simple(line), next),
        b'-' => (R::Err(line), next),
        b':' => (R::Int(n()), next),
        b'$' => {
            if n() < 0 {
                (R::Bulk(None), next)
            } else {
                let end = next + n() as usize;
                if buf.len() < end + 2 {
                    return None;
                }
                (R::Bulk(Some(buf[next..end].to_vec())), end + 2)
            }
        }
        b'*' => {
            if n() < 0 {
                (R::Arr(None), next)
            } else {
                let mut v = Vec::new();
                let mut p = next;
                for _ in 0..n() {
                    let (e, q) = parse(buf, p)?;
                    v.push(e);
                    p = q;
                }
                (R::Arr(Some(v)), p)
            }
        }
        other => panic!("unexpected RESP2 type byte {:?}", other as char),
    })
}

/// What became of one expected reply.
#[derive(Clone, Debug, PartialEq)]
enum Outcome {
    Reply(R),
    /// The server closed the connection (QUIT, a killed client …).
    Closed,
    /// Nothing within the timeout.
    Hang,
}

impl Outcome {
    fn shape(&self) -> String {
        match self {
            Outcome::Reply(r) => r.shape(),
            Outcome::Closed => "closed".into(),
            Outcome::Hang => "HANG".into(),
        }
    }
}

struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
    closed: bool,
}

impl Conn {
    fn open(port: u16) -> Conn {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_nodelay(true).unwrap();
        Conn { s, buf: Vec::new(), closed: false }
    }
    fn send(&mut self, cmds: &[Vec<Vec<u8>>]) {
        let mut out = Vec::new();
        for c in cmds {
            out.extend(encode(c));
        }
        if self.s.write_all(&out).is_err() {
            self.closed = true;
        }
    }
    fn read(&mut self, timeout: Duration) -> Outcome {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some((r, end)) = parse(&self.buf, 0).filter(|_| !self.buf.is_empty()) {
                self.buf.drain(..end);
                return Outcome::Reply(r);
            }
            if self.closed {
                return Outcome::Closed;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Outcome::Hang;
            }
            self.s.set_read_timeout(Some(left.min(Duration::from_millis(200)))).unwrap();
            let mut tmp = [0u8; 65536];
            match self.s.read(&mut tmp) {
                Ok(0) => self.closed = true,
                Ok(n) => self.buf.extend_from_slice(&tmp[..n]),
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => self.closed = true,
            }
        }
    }
    fn call(&mut self, args: &[&str]) -> R {
        self.send(&[v(args)]);
        match self.read(REPLY_TIMEOUT) {
            Outcome::Reply(r) => r,
            o => panic!("{args:?}: {o:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The commands and their generated arguments.

#[derive(Clone, Debug)]
struct Cmd {
    /// `get`, `config|get`.
    name: String,
    group: String,
    args: Vec<Vec<u8>>,
    /// The key arguments, for the concurrent writer.
    keys: Vec<String>,
    /// Added after Redis 7.2: Valkey 9.1.2 is its oracle.
    beyond72: bool,
}

/// A string argument's value, by what the argument is called (all else "1").
fn string_value(name: &str, cmd: &str) -> String {
    match name {
        "script" => "return 1".into(),
        "host" => "127.0.0.1".into(),
        "pattern" => "*".into(),
        "member" | "element" | "pivot" => "a".into(),
        "field" => "f1".into(),
        "group" | "groupname" => "g".into(),
        "consumer" | "consumername" => "c".into(),
        "id" | "start" | "end" if cmd.starts_with('x') => "0-1".into(),
        "function-code" => "#!lua name=lib2\nredis.register_function('f2', function() return 1 end)".into(),
        _ => "1".into(),
    }
}

fn gen_args(spec: &R, cmd: &str, out: &mut Vec<Vec<u8>>, keys: &mut Vec<String>) {
    let name = spec.get("name").map(|r| r.text()).unwrap_or_default();
    let ty = spec.get("type").map(|r| r.text()).unwrap_or_default();
    if let Some(t) = spec.get("token") {
        out.push(t.text().into_bytes());
    }
    match ty.as_str() {
        "key" => {
            let k = format!("{{t}}k{}", keys.len() + 1);
            out.push(k.clone().into_bytes());
            keys.push(k);
        }
        "string" => out.push(string_value(&name, cmd).into_bytes()),
        "integer" | "double" => out.push(b"1".to_vec()),
        "unix-time" => out.push(b"2000000000".to_vec()),
        "pattern" => out.push(b"*".to_vec()),
        "pure-token" => {}
        "oneof" => {
            if let Some(first) = spec.get("arguments").and_then(|a| a.items().first()) {
                gen_args(first, cmd, out, keys);
            }
        }
        "block" => {
            for a in spec.get("arguments").map(|a| a.items()).unwrap_or(&[]) {
                if !is_optional(a) {
                    gen_args(a, cmd, out, keys);
                }
            }
        }
        other => panic!("{cmd}: argument {name} of unknown type {other}"),
    }
}

fn is_optional(a: &R) -> bool {
    a.get("flags").is_some_and(|f| f.items().iter().any(|x| x.text() == "optional"))
}

/// Every command and subcommand of Atoll's table, with arguments generated from its COMMAND
/// DOCS.
fn commands(atoll: u16) -> Vec<Cmd> {
    let mut c = Conn::open(atoll);
    let docs = c.call(&["COMMAND", "DOCS"]);
    let mut out = Vec::new();
    let mut add = |name: String, doc: &R| {
        let mut args = Vec::new();
        let mut keys = Vec::new();
        for part in name.split('|') {
            args.push(part.as_bytes().to_vec());
        }
        for a in doc.get("arguments").map(|a| a.items()).unwrap_or(&[]) {
            if !is_optional(a) {
                gen_args(a, &name, &mut args, &mut keys);
            }
        }
        let group = doc.get("group").map(|g| g.text()).unwrap_or_default();
        let since = doc.get("since").map(|g| g.text()).unwrap_or_default();
        let version: Vec<u32> = since.split('.').filter_map(|p| p.parse().ok()).collect();
        let beyond72 = version.as_slice() > [7, 2, 99].as_slice();
        out.push(Cmd { name, group, args, keys, beyond72 });
    };
    for (name, doc) in docs.pairs() {
        let subs = doc.get("subcommands").map(|s| s.pairs()).unwrap_or_default();
        if subs.is_empty() {
            add(name.to_lowercase(), doc);
        } else {
            for (sub, sdoc) in subs {
                add(sub.to_lowercase(), sdoc);
            }
        }
    }
    assert!(out.len() > 200, "COMMAND DOCS listed only {} commands", out.len());
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Commands the generated call cannot be run for, and why. Each is exercised by its own tests.
fn skipped(name: &str) -> Option<&'static str> {
    Some(match name {
        "shutdown" => "stops the server",
        "replicaof" | "slaveof" => "makes the server follow another (tests/replication.rs)",
        "sync" | "psync" => "turns the connection into a replica's link (tests/replication.rs)",
        "debug" => "its subcommands crash, sleep or reload on purpose (tests/introspection.rs)",
        _ => return None,
    })
}

/// Creates each key of `cmd` with the type its group works on.
fn setup(c: &mut Conn, cmd: &Cmd, db_select: bool) {
    if db_select {
        c.call(&["SELECT", "0"]);
    }
    for k in &cmd.keys {
        match cmd.group.as_str() {
            "list" => c.call(&["RPUSH", k, "a", "b", "c"]),
            "hash" => c.call(&["HSET", k, "f1", "1", "f2", "2"]),
            "set" => c.call(&["SADD", k, "a", "b", "c"]),
            "sorted-set" => c.call(&["ZADD", k, "1", "a", "2", "b"]),
            "geo" => c.call(&["GEOADD", k, "13.361389", "38.115556", "a"]),
            "stream" => {
                c.call(&["XADD", k, "0-1", "f", "v"]);
                c.call(&["XGROUP", "CREATE", k, "g", "0"])
            }
            "hyperloglog" => c.call(&["PFADD", k, "a"]),
            _ => c.call(&["SET", k, "1"]),
        };
    }
}

/// Waits until no save or rewrite runs (a BGSAVE's reply depends on it).
fn persistence_idle(c: &mut Conn) {
    let start = Instant::now();
    loop {
        let info = c.call(&["INFO", "persistence"]).text();
        if !info.contains("rdb_bgsave_in_progress:1") && !info.contains("aof_rewrite_in_progress:1") {
            return;
        }
        assert!(start.elapsed() < REPLY_TIMEOUT, "a save never ended");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A server under test: the one contexts run on, and its admin connection.
struct Side {
    port: u16,
    admin: Conn,
}

impl Side {
    fn new(port: u16) -> Side {
        let mut admin = Conn::open(port);
        admin.call(&["CLIENT", "SETNAME", "admin"]);
        Side { port, admin }
    }
    /// A clean server for the next trial: no keys, the function library the FCALL context
    /// calls, no pause.
    fn reset(&mut self, cmd: &Cmd) {
        persistence_idle(&mut self.admin);
        self.admin.call(&["CLIENT", "UNPAUSE"]);
        self.admin.call(&["FLUSHALL"]);
        self.admin.call(&[
            "FUNCTION",
            "LOAD",
            "REPLACE",
            "#!lua name=ctx\nredis.register_function('ctx', function(keys, args) return redis.pcall(unpack(args)) end)",
        ]);
        setup(&mut self.admin, cmd, true);
    }
}

/// The replies one context got on one server.
fn run_context(side: &mut Side, ctx: &str, cmd: &Cmd) -> Vec<Outcome> {
    if std::env::var_os("ATOLL_CONTEXTS_TRACE").is_some() {
        eprintln!("{} {ctx} {}", side.port, cmd.name);
    }
    side.reset(cmd);
    let mut c = Conn::open(side.port);
    let a = cmd.args.clone();
    // The script contexts pass the whole call as ARGV to `redis.pcall`.
    let script = |head: &[&str]| -> Vec<Vec<u8>> {
        let mut w = v(head);
        w.extend(a.iter().cloned());
        w
    };
    let batch: Vec<Vec<Vec<u8>>> = match ctx {
        "alone" => vec![a.clone()],
        "pipelined" => vec![v(&["PING"]), v(&["SET", "{t}p", "1"]), a.clone(), v(&["PING"])],
        "multi" => vec![v(&["MULTI"]), a.clone(), v(&["EXEC"])],
        "eval" => vec![script(&["EVAL", "return redis.pcall(unpack(ARGV))", "0"])],
        "fcall" => vec![script(&["FCALL", "ctx", "0"])],
        "paused" => {
            side.admin.call(&["CLIENT", "PAUSE", "100000", "WRITE"]);
            c.send(std::slice::from_ref(&a));
            // Whether it answers while writes are paused is part of the outcome. No answer in
            // 300 ms may be a slow server: the command is held back once the server counts
            // its client blocked, and served if it answers first.
            let mut during = c.read(Duration::from_millis(300));
            let deadline = Instant::now() + REPLY_TIMEOUT;
            while during == Outcome::Hang && Instant::now() < deadline {
                let info = side.admin.call(&["INFO", "clients"]).text();
                let blocked = info.lines().find_map(|l| l.strip_prefix("blocked_clients:"));
                if blocked.is_some_and(|n| n.trim() != "0") {
                    break;
                }
                during = c.read(Duration::from_millis(50));
            }
            side.admin.call(&["CLIENT", "UNPAUSE"]);
            let after = if during == Outcome::Hang { c.read(REPLY_TIMEOUT) } else { during.clone() };
            // Recorded as an error-shaped marker so its word is part of the compared shape.
            let marker = Outcome::Reply(R::Err(if during == Outcome::Hang { "POSTPONED" } else { "SERVED" }.into()));
            return vec![marker, after];
        }
        other => panic!("no context {other}"),
    };
    let n = batch.len();
    c.send(&batch);
    (0..n).map(|_| c.read(REPLY_TIMEOUT)).collect()
}

fn brief(o: &[Outcome]) -> String {
    o.iter()
        .map(|x| match x {
            Outcome::Reply(r) => r.brief(),
            other => other.shape(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The outcomes' shapes, compared between the servers: each reply's type (an error's code),
/// and inside an EXEC reply (the last of a MULTI … EXEC batch) each queued reply's type. Other
/// arrays count only as arrays: their length may depend on timing (SLOWLOG GET).
fn shapes(o: &[Outcome], exec_last: bool) -> String {
    o.iter()
        .enumerate()
        .map(|(i, x)| match x {
            Outcome::Reply(R::Arr(Some(v))) if exec_last && i + 1 == o.len() => {
                format!("[{}]", v.iter().map(|r| r.shape()).collect::<Vec<_>>().join(" "))
            }
            other => other.shape(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `tests/context_differences.txt`: `command context` lines (and `#` comments) where Atoll's
/// reply shape differs from Redis 7.2.6's for an explained reason.
fn known_differences() -> BTreeSet<(String, String)> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/context_differences.txt");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut w = l.split_whitespace();
            (w.next().unwrap().to_string(), w.next().unwrap_or("*").to_string())
        })
        .collect()
}

fn internal_error(o: &[Outcome]) -> bool {
    fn walk(r: &R) -> bool {
        match r {
            R::Err(e) => e.contains("internal error"),
            R::Arr(Some(v)) => v.iter().any(walk),
            _ => false,
        }
    }
    o.iter().any(|x| matches!(x, Outcome::Reply(r) if walk(r)))
}

const CONTEXTS: &[&str] = &["alone", "pipelined", "multi", "eval", "fcall", "paused"];

#[test]
fn every_command_in_every_context_answers_as_redis_does() {
    let redis = start_redis(&[]);
    let valkey = start_valkey(&[]);
    let atoll = start_atoll(&["--enable-debug-command", "yes"]);
    let cmds = commands(atoll.port);
    let known = known_differences();
    let mut sides = [Side::new(redis.port), Side::new(atoll.port), Side::new(valkey.port)];
    let mut failures = Vec::new();
    let mut used_known = BTreeSet::new();
    let mut trials = 0;
    for cmd in &cmds {
        if skipped(&cmd.name).is_some() {
            continue;
        }
        for ctx in CONTEXTS {
            // CLIENT PAUSE under the test's own pause turns it into a pause of ALL for 100 s
            // (Redis keeps the longer end and the stricter mode), admin connection included.
            // PFSELFTEST runs ~0.5 s on Redis: longer than the window that tells a postponed
            // command from a served one.
            if *ctx == "paused" && matches!(cmd.name.as_str(), "client|pause" | "pfselftest") {
                continue;
            }
            let [r, a, v] = &mut sides;
            let r = if cmd.beyond72 { v } else { r };
            let ro = run_context(r, ctx, cmd);
            let ao = run_context(a, ctx, cmd);
            trials += 1;
            if std::env::var_os("ATOLL_CONTEXTS_TRACE").is_some() {
                eprintln!("  Redis {}\n  Atoll {}", brief(&ro), brief(&ao));
            }
            let show_args = cmd.args.iter().map(|x| String::from_utf8_lossy(x).into_owned()).collect::<Vec<_>>();
            if ao.contains(&Outcome::Hang) || internal_error(&ao) {
                failures.push(format!("{ctx}: {show_args:?}: Atoll {} (Redis {})", brief(&ao), brief(&ro)));
                continue;
            }
            assert!(!ro.contains(&Outcome::Hang), "{ctx}: {show_args:?}: Redis itself hung: {ro:?}");
            let exec = *ctx == "multi";
            let (rs, as_) = (shapes(&ro, exec), shapes(&ao, exec));
            if rs != as_ {
                let key = (cmd.name.clone(), ctx.to_string());
                let any = (cmd.name.clone(), "*".to_string());
                if known.contains(&key) || known.contains(&any) {
                    used_known.insert(if known.contains(&key) { key } else { any });
                } else {
                    failures.push(format!("{ctx}: {show_args:?}:\n    Redis {}\n    Atoll {}", brief(&ro), brief(&ao)));
                }
            }
        }
    }
    let stale: Vec<_> = known.difference(&used_known).collect();
    eprintln!("{} commands × {} contexts: {trials} trials, {} failures", cmds.len(), CONTEXTS.len(), failures.len());
    assert!(failures.is_empty(), "{} of {trials} trials differ or hang:\n{}", failures.len(), failures.join("\n"));
    assert!(stale.is_empty(), "tests/context_differences.txt lists differences that no longer occur: {stale:?}");
}

/// Inside MULTI on a replica (each server followed by a replica of its own kind), and while
/// another client keeps rewriting the command's keys: no hang, no internal error; on the
/// replica the reply shapes equal Redis's.
#[test]
fn every_command_on_a_replica_and_under_concurrent_writes() {
    let redis = start_redis(&[]);
    let valkey = start_valkey(&[]);
    let atoll = start_atoll(&["--enable-debug-command", "yes"]);
    let redis_rep = start_redis(&["--replicaof", "127.0.0.1", &redis.port.to_string()]);
    let valkey_rep = start_valkey(&["--replicaof", "127.0.0.1", &valkey.port.to_string()]);
    let atoll_rep = start_atoll(&["--replicaof", "127.0.0.1", &atoll.port.to_string()]);
    for rep in [&redis_rep, &valkey_rep, &atoll_rep] {
        let mut c = Conn::open(rep.port);
        let start = Instant::now();
        while !c.call(&["INFO", "replication"]).text().contains("master_link_status:up") {
            assert!(start.elapsed() < Duration::from_secs(20), "replica on {} never linked", rep.port);
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let cmds = commands(atoll.port);
    let known = known_differences();
    let mut failures = Vec::new();
    let mut trials = 0;
    for cmd in &cmds {
        if skipped(&cmd.name).is_some() {
            continue;
        }
        // On the replica: the keys are written on its master and waited for.
        let mut outs = Vec::new();
        let oracle = if cmd.beyond72 { (&valkey, &valkey_rep) } else { (&redis, &redis_rep) };
        for (master, rep) in [oracle, (&atoll, &atoll_rep)] {
            let mut m = Side::new(master.port);
            m.reset(cmd);
            m.admin.call(&["WAIT", "1", "5000"]);
            let mut c = Conn::open(rep.port);
            c.send(&[v(&["MULTI"]), cmd.args.clone(), v(&["EXEC"])]);
            outs.push((0..3).map(|_| c.read(REPLY_TIMEOUT)).collect::<Vec<_>>());
        }
        trials += 1;
        let show_args = cmd.args.iter().map(|x| String::from_utf8_lossy(x).into_owned()).collect::<Vec<_>>();
        let (ro, ao) = (&outs[0], &outs[1]);
        if ao.contains(&Outcome::Hang) || internal_error(ao) {
            failures.push(format!("replica: {show_args:?}: Atoll {}", brief(ao)));
        } else if shapes(ro, true) != shapes(ao, true)
            && !known.contains(&(cmd.name.clone(), "replica".into()))
            && !known.contains(&(cmd.name.clone(), "*".into()))
        {
            failures.push(format!("replica: {show_args:?}:\n    Redis {}\n    Atoll {}", brief(ro), brief(ao)));
        }

        // Under a concurrent writer on Atoll's other connection (likely another worker).
        if cmd.keys.is_empty() {
            continue;
        }
        let mut side = Side::new(atoll.port);
        side.reset(cmd);
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (stop, keys, port, c2) = (stop.clone(), cmd.keys.clone(), atoll.port, cmd.clone());
            std::thread::spawn(move || {
                let mut w = Conn::open(port);
                while !stop.load(Ordering::Relaxed) {
                    for k in &keys {
                        w.call(&["DEL", k]);
                    }
                    setup(&mut w, &c2, false);
                }
            })
        };
        let mut c = Conn::open(atoll.port);
        for _ in 0..3 {
            c.send(std::slice::from_ref(&cmd.args));
            let o = c.read(REPLY_TIMEOUT);
            trials += 1;
            if o == Outcome::Hang || internal_error(std::slice::from_ref(&o)) {
                failures.push(format!("concurrent: {show_args:?}: Atoll {}", brief(std::slice::from_ref(&o))));
                break;
            }
            if o == Outcome::Closed {
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        writer.join().expect("writer");
    }
    eprintln!("{trials} trials, {} failures", failures.len());
    assert!(failures.is_empty(), "{} trials hang or fail:\n{}", failures.len(), failures.join("\n"));
}
