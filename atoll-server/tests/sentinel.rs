//! Sentinel, unchanged: three real sentinels — Redis 7.2.6's (`redis-server --sentinel`) and
//! Valkey 9.1.2's — monitor a primary with two replicas — all Atoll, and mixes of Atoll with
//! Redis 7.2.6 and Valkey 9.1.2 nodes — under a write load; in one topology every node asks
//! for a password and the sentinels log in as an ACL user that may run only what Sentinel
//! sends (`sentinel auth-user/auth-pass`, the user Redis's documentation gives). The primary is
//! killed (-9): the sentinels agree it is down, promote a replica within seconds (their
//! timeouts shortened as Redis's own sentinel tests shorten them), the other replica follows
//! the promoted one, no write that `WAIT 1` confirmed is lost, and the old primary, started
//! again, is turned into a replica of the new one by the sentinels (REPLICAOF and CONFIG
//! REWRITE, as Sentinel sends them).

mod common;

use common::*;
use redis::Value;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The data nodes' password (`requirepass`, `masterauth`) when a topology asks for one.
const PASS: &str = "data-pass";

/// The user Sentinel logs in as: what Redis's Sentinel documentation says it needs, no more.
const SENTINEL_USER: &[&str] = &[
    "sentinel-user",
    "on",
    ">sentinel-pass",
    "allchannels",
    "+multi",
    "+slaveof",
    "+ping",
    "+exec",
    "+subscribe",
    "+config|rewrite",
    "+role",
    "+publish",
    "+info",
    "+client|setname",
    "+client|kill",
    "+script|kill",
];

fn url(port: u16, auth: bool) -> String {
    if auth {
        format!("redis://:{PASS}@127.0.0.1:{port}/")
    } else {
        format!("redis://127.0.0.1:{port}/")
    }
}

fn con(port: u16, auth: bool) -> redis::Connection {
    let c = redis::Client::open(url(port, auth)).unwrap();
    let con = c.get_connection().expect("connect");
    con.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    con
}

fn q(c: &mut redis::Connection, args: &[&str]) -> redis::RedisResult<Value> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c)
}

fn info_field(c: &mut redis::Connection, section: &str, name: &str) -> Option<String> {
    let Ok(Value::BulkString(b)) = q(c, &["INFO", section]) else { return None };
    let text = String::from_utf8(b).ok()?;
    text.lines().find_map(|l| l.strip_prefix(&format!("{name}:")).map(|v| v.to_string()))
}

/// A field of INFO asked on a new connection: the sentinels close clients' connections when
/// they reconfigure a node (CLIENT KILL TYPE normal, in the MULTI with REPLICAOF).
fn fresh_info(port: u16, auth: bool, section: &str, name: &str) -> Option<String> {
    let mut c = redis::Client::open(url(port, auth)).ok()?.get_connection().ok()?;
    info_field(&mut c, section, name)
}

fn fresh(port: u16, auth: bool) -> redis::Connection {
    let mut last = None;
    for _ in 0..100 {
        match redis::Client::open(url(port, auth)).and_then(|c| c.get_connection()) {
            Ok(c) => return c,
            Err(e) => last = Some(e),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("connect to {port}: {last:?}")
}

fn wait_until(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < Duration::from_secs(secs), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Which server a node (or a sentinel) is.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    Atoll,
    Redis,
    Valkey,
}

/// A sentinel (Redis's or Valkey's) watching `mymaster` at `port` (quorum 2), with the
/// timeouts Redis's own sentinel tests use; logging in to the data nodes as `sentinel-user`
/// when they ask for a password.
fn start_sentinel(kind: Kind, master_port: u16, auth: bool) -> ServerProc {
    let port = free_port();
    let dir = scratch_dir(port);
    let conf = dir.join("sentinel.conf");
    let mut text = format!(
        "port {port}\ndir {}\nlogfile sentinel.log\nsentinel monitor mymaster 127.0.0.1 {master_port} 2\n\
         sentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 5000\n\
         sentinel parallel-syncs mymaster 1\n",
        dir.display()
    );
    if auth {
        text.push_str("sentinel auth-user mymaster sentinel-user\nsentinel auth-pass mymaster sentinel-pass\n");
    }
    std::fs::write(&conf, text).unwrap();
    let conf = conf.to_str().unwrap();
    spawn(kind, port, &[conf, "--sentinel"], "sentinel", false)
}

/// Redis 7.2.6 or Valkey 9.1.2 with these arguments, once it takes connections on `port`.
fn spawn(kind: Kind, port: u16, args: &[&str], name: &'static str, auth: bool) -> ServerProc {
    let bin = if kind == Kind::Valkey { valkey_bin() } else { redis_bin() };
    let child = Command::new(bin)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("start {name}: {e}"));
    let proc = ServerProc { child, port, name };
    wait_until(&format!("{name} to listen on {port}"), 20, || {
        redis::Client::open(url(port, auth)).and_then(|c| c.get_connection()).is_ok()
    });
    proc
}

/// A data node on `port` (a port of our choosing, so the primary can be started again there).
fn start_node(kind: Kind, port: u16, args: &[&str], auth: bool) -> ServerProc {
    let mut all: Vec<&str> = args.to_vec();
    let dir = scratch_dir(port);
    let dir = dir.to_str().unwrap().to_string();
    // A log per node, beside the sentinels' (read when a test fails).
    all.extend(["--dir", &dir, "--logfile", "node.log", "--loglevel", "verbose"]);
    if auth {
        all.extend(["--requirepass", PASS, "--masterauth", PASS, "--user"]);
        all.extend(SENTINEL_USER);
    }
    if kind == Kind::Atoll {
        return start_atoll_at(port, &all);
    }
    let port_s = port.to_string();
    let mut base = vec!["--port", port_s.as_str(), "--save", "", "--appendonly", "no"];
    base.extend(all);
    spawn(kind, port, &base, if kind == Kind::Redis { "redis" } else { "valkey" }, auth)
}

fn master_port_by_sentinel(s: &mut redis::Connection) -> Option<u16> {
    match q(s, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"]) {
        Ok(Value::Array(a)) if a.len() == 2 => match &a[1] {
            Value::BulkString(p) => std::str::from_utf8(p).ok()?.parse().ok(),
            _ => None,
        },
        _ => None,
    }
}

fn count(s: &mut redis::Connection, what: &str) -> usize {
    match q(s, &["SENTINEL", what, "mymaster"]) {
        Ok(Value::Array(a)) => a.len(),
        _ => 0,
    }
}

/// One topology: the sentinels' kind, the primary's, the replicas', and whether the data
/// nodes ask for passwords.
struct Topology {
    name: &'static str,
    sentinels: Kind,
    primary: Kind,
    replicas: [Kind; 2],
    auth: bool,
}

#[test]
fn sentinels_fail_over_a_killed_primary_to_a_replica_under_load() {
    use Kind::*;
    let topologies = [
        Topology {
            name: "Redis sentinels, all Atoll",
            sentinels: Redis,
            primary: Atoll,
            replicas: [Atoll, Atoll],
            auth: false,
        },
        Topology {
            name: "Redis sentinels, Redis primary, Atoll and Redis replicas",
            sentinels: Redis,
            primary: Redis,
            replicas: [Atoll, Redis],
            auth: false,
        },
        Topology {
            name: "Redis sentinels logged in as an ACL user, all Atoll",
            sentinels: Redis,
            primary: Atoll,
            replicas: [Atoll, Atoll],
            auth: true,
        },
        Topology {
            name: "Valkey sentinels, all Atoll",
            sentinels: Valkey,
            primary: Atoll,
            replicas: [Atoll, Atoll],
            auth: false,
        },
        Topology {
            name: "Valkey sentinels, Valkey primary, Atoll and Valkey replicas",
            sentinels: Valkey,
            primary: Valkey,
            replicas: [Atoll, Valkey],
            auth: false,
        },
        Topology {
            name: "Valkey sentinels, Atoll primary, Valkey and Atoll replicas",
            sentinels: Valkey,
            primary: Atoll,
            replicas: [Valkey, Atoll],
            auth: false,
        },
    ];
    for t in topologies {
        let (name, auth) = (t.name, t.auth);
        let fast = ["--repl-diskless-sync-delay", "0", "--enable-debug-command", "yes"];
        let pport = free_port();
        let pp = pport.to_string();
        let primary = start_node(t.primary, pport, &fast, auth);
        let mut rargs = fast.to_vec();
        rargs.extend(["--replicaof", "127.0.0.1", &pp]);
        let replicas: Vec<ServerProc> = t.replicas.iter().map(|k| start_node(*k, free_port(), &rargs, auth)).collect();
        let mut p = con(primary.port, auth);
        q(&mut p, &["SET", "before", "1"]).unwrap();
        for r in &replicas {
            let mut c = con(r.port, auth);
            wait_until(&format!("{name}: replica link"), 30, || {
                info_field(&mut c, "replication", "master_link_status").as_deref() == Some("up")
            });
        }
        let sentinels: Vec<ServerProc> = (0..3).map(|_| start_sentinel(t.sentinels, pport, auth)).collect();
        let mut s0 = con(sentinels[0].port, false);
        wait_until(&format!("{name}: the sentinels to find the replicas and each other"), 30, || {
            count(&mut s0, "REPLICAS") == 2 && count(&mut s0, "SENTINELS") == 2
        });
        // The write load: INCRs, each confirmed by WAIT 1 (the highest confirmed is kept).
        let confirmed = Arc::new(AtomicI64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let load = {
            let (confirmed, stop) = (confirmed.clone(), stop.clone());
            std::thread::spawn(move || {
                let Ok(mut c) = redis::Client::open(url(pport, auth)).and_then(|c| c.get_connection()) else {
                    return;
                };
                let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
                while !stop.load(Ordering::Relaxed) {
                    let Ok(v) = redis::cmd("INCR").arg("load").query::<i64>(&mut c) else { return };
                    match redis::cmd("WAIT").arg(1).arg(500).query::<i64>(&mut c) {
                        Ok(n) if n >= 1 => confirmed.fetch_max(v, Ordering::Relaxed),
                        Ok(_) => 0,
                        Err(_) => return,
                    };
                }
            })
        };
        std::thread::sleep(Duration::from_millis(700));
        let mut primary = primary;
        let _ = primary.child.kill();
        let _ = primary.child.wait();
        let killed = Instant::now();
        stop.store(true, Ordering::Relaxed);
        let _ = load.join();
        let mut new_port = None;
        // A split vote is retried only after twice the failover timeout (2 × 5 s).
        wait_until(&format!("{name}: a replica promoted"), 40, || {
            new_port = master_port_by_sentinel(&mut s0).filter(|p| *p != pport);
            new_port.is_some()
        });
        let promoted_after = killed.elapsed();
        let new_port = new_port.unwrap();
        wait_until(&format!("{name}: the promoted replica to be a master"), 10, || {
            fresh_info(new_port, auth, "replication", "role").as_deref() == Some("master")
        });
        let held: i64 = match q(&mut fresh(new_port, auth), &["GET", "load"]) {
            Ok(Value::BulkString(b)) => String::from_utf8(b).unwrap().parse().unwrap(),
            other => panic!("{name}: {other:?}"),
        };
        let confirmed = confirmed.load(Ordering::Relaxed);
        assert!(
            confirmed > 0 && held >= confirmed,
            "{name}: {confirmed} confirmed by WAIT 1, the new master holds {held}"
        );
        // The other replica follows the promoted one, and the old primary, started again, is
        // made a replica by the sentinels. The master is asked of the sentinels each time: if
        // the old primary comes back while they still reconfigure, they may fail over once
        // more (seen once in a few dozen runs), and Sentinel's word is what clients follow.
        q(&mut fresh(new_port, auth), &["SET", "after", "1"]).unwrap();
        let old = start_node(t.primary, pport, &fast, auth);
        let nodes: Vec<u16> = replicas.iter().map(|r| r.port).chain([pport]).collect();
        let mut master = new_port;
        wait_until(&format!("{name}: the other replica and the old primary to follow the new master"), 60, || {
            let Some(m) = master_port_by_sentinel(&mut s0) else { return false };
            master = m;
            let mp = m.to_string();
            fresh_info(m, auth, "replication", "role").as_deref() == Some("master")
                && nodes.iter().filter(|p| **p != m).all(|p| {
                    fresh_info(*p, auth, "replication", "master_port").as_deref() == Some(mp.as_str())
                        && fresh_info(*p, auth, "replication", "master_link_status").as_deref() == Some("up")
                })
        });
        if master != new_port {
            println!("{name}: the sentinels failed over once more, to {master}");
        }
        let digest_of = |port: u16| match q(&mut fresh(port, auth), &["DEBUG", "DIGEST"]) {
            Ok(Value::BulkString(b)) => b,
            Ok(Value::SimpleString(s)) => s.into_bytes(),
            other => panic!("{other:?}"),
        };
        // At or past the master's offset: the sentinels' hello messages are PUBLISHed on the
        // master every second or two and travel in the stream, so a replica a hello behind when
        // `want` is read is past it once it has caught up (it never equals it again).
        let want = offset(&mut fresh(master, auth));
        let digest = digest_of(master);
        for port in nodes.iter().filter(|p| **p != master) {
            let start = Instant::now();
            loop {
                let at = offset(&mut fresh(*port, auth));
                if at >= want {
                    break;
                }
                assert!(
                    start.elapsed() < Duration::from_secs(20),
                    "{name}: {port} stuck at {at}, the master at {want}"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
            assert_eq!(digest_of(*port), digest, "{name}: {port}'s data");
        }
        println!(
            "{name}: promoted {:.1} s after the kill; {confirmed} writes confirmed, {held} held",
            promoted_after.as_secs_f64()
        );
        drop(old);
        drop(sentinels);
    }
}

fn offset(c: &mut redis::Connection) -> i64 {
    info_field(c, "replication", "master_repl_offset").and_then(|v| v.parse().ok()).unwrap_or(-1)
}
