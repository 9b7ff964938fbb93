//! Sentinel, unchanged: three real Redis 7.2.6 sentinels (`redis-server --sentinel`) monitor a
//! primary with two replicas — all Atoll, and a mix of Redis 7.2.6 and Atoll — under a write
//! load. The primary is killed (-9): the sentinels agree it is down, promote a replica within
//! seconds (their timeouts shortened as Redis's own sentinel tests shorten them), the other
//! replica follows the promoted one, no write that `WAIT 1` confirmed is lost, and the old
//! primary, started again, is turned into a replica of the new one by the sentinels
//! (REPLICAOF and CONFIG REWRITE, as Sentinel sends them).

mod common;

use common::*;
use redis::Value;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn con(port: u16) -> redis::Connection {
    let c = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
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
fn fresh_info(port: u16, section: &str, name: &str) -> Option<String> {
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/")).ok()?.get_connection().ok()?;
    info_field(&mut c, section, name)
}

fn fresh(port: u16) -> redis::Connection {
    let mut last = None;
    for _ in 0..100 {
        match redis::Client::open(format!("redis://127.0.0.1:{port}/")).and_then(|c| c.get_connection()) {
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

/// A sentinel of Redis 7.2.6 watching `mymaster` at `port` (quorum 2), with the timeouts
/// Redis's own sentinel tests use.
fn start_sentinel(master_port: u16) -> ServerProc {
    let port = free_port();
    let dir = scratch_dir(port);
    let conf = dir.join("sentinel.conf");
    std::fs::write(
        &conf,
        format!(
            "port {port}\ndir {}\nlogfile sentinel.log\nsentinel monitor mymaster 127.0.0.1 {master_port} 2\n\
             sentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 5000\n\
             sentinel parallel-syncs mymaster 1\n",
            dir.display()
        ),
    )
    .unwrap();
    let conf = conf.to_str().unwrap();
    spawn_redis(port, &[conf, "--sentinel"], "sentinel")
}

/// Redis 7.2.6 (`redis_bin`) with these arguments, once it takes connections on `port`.
fn spawn_redis(port: u16, args: &[&str], name: &'static str) -> ServerProc {
    let child = Command::new(redis_bin())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("start {name}: {e}"));
    let proc = ServerProc { child, port, name };
    wait_until(&format!("{name} to listen on {port}"), 20, || {
        redis::Client::open(format!("redis://127.0.0.1:{port}/")).and_then(|c| c.get_connection()).is_ok()
    });
    proc
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

type Start = fn(&[&str]) -> ServerProc;

/// The primary, on a port of our choosing so it can be started again there.
fn start_primary(atoll: bool, port: u16, args: &[&str]) -> ServerProc {
    if atoll {
        return start_atoll_at(port, args);
    }
    let port_s = port.to_string();
    let mut all = vec!["--port", port_s.as_str(), "--save", "", "--appendonly", "no"];
    all.extend_from_slice(args);
    spawn_redis(port, &all, "redis")
}

#[test]
fn sentinels_fail_over_a_killed_primary_to_a_replica_under_load() {
    let (redis, atoll): (Start, Start) = (start_redis, start_atoll);
    for (name, primary_is_atoll, replica_starts) in
        [("all Atoll", true, [atoll, atoll]), ("Redis primary, Atoll and Redis replicas", false, [atoll, redis])]
    {
        let fast = ["--repl-diskless-sync-delay", "0", "--enable-debug-command", "yes"];
        let pport = free_port();
        let pdir = scratch_dir(pport);
        let pdir = pdir.to_str().unwrap().to_string();
        let pp = pport.to_string();
        let mut pargs: Vec<&str> = fast.to_vec();
        pargs.extend(["--dir", &pdir]);
        let primary = start_primary(primary_is_atoll, pport, &pargs);
        let mut rargs = fast.to_vec();
        rargs.extend(["--replicaof", "127.0.0.1", &pp]);
        let replicas: Vec<ServerProc> = replica_starts.iter().map(|s| s(&rargs)).collect();
        let mut p = con(primary.port);
        q(&mut p, &["SET", "before", "1"]).unwrap();
        for r in &replicas {
            let mut c = con(r.port);
            wait_until(&format!("{name}: replica link"), 30, || {
                info_field(&mut c, "replication", "master_link_status").as_deref() == Some("up")
            });
        }
        let sentinels: Vec<ServerProc> = (0..3).map(|_| start_sentinel(pport)).collect();
        let mut s0 = con(sentinels[0].port);
        wait_until(&format!("{name}: the sentinels to find the replicas and each other"), 30, || {
            count(&mut s0, "REPLICAS") == 2 && count(&mut s0, "SENTINELS") == 2
        });
        // The write load: INCRs, each confirmed by WAIT 1 (the highest confirmed is kept).
        let confirmed = Arc::new(AtomicI64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let load = {
            let (confirmed, stop) = (confirmed.clone(), stop.clone());
            std::thread::spawn(move || {
                let Ok(mut c) =
                    redis::Client::open(format!("redis://127.0.0.1:{pport}/")).and_then(|c| c.get_connection())
                else {
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
        wait_until(&format!("{name}: a replica promoted"), 10, || {
            new_port = master_port_by_sentinel(&mut s0).filter(|p| *p != pport);
            new_port.is_some()
        });
        let promoted_after = killed.elapsed();
        let new_port = new_port.unwrap();
        wait_until(&format!("{name}: the promoted replica to be a master"), 10, || {
            fresh_info(new_port, "replication", "role").as_deref() == Some("master")
        });
        let held: i64 = match q(&mut fresh(new_port), &["GET", "load"]) {
            Ok(Value::BulkString(b)) => String::from_utf8(b).unwrap().parse().unwrap(),
            other => panic!("{name}: {other:?}"),
        };
        let confirmed = confirmed.load(Ordering::Relaxed);
        assert!(
            confirmed > 0 && held >= confirmed,
            "{name}: {confirmed} confirmed by WAIT 1, the new master holds {held}"
        );
        // The other replica follows the promoted one.
        let other = replicas.iter().find(|r| r.port != new_port).unwrap().port;
        q(&mut fresh(new_port), &["SET", "after", "1"]).unwrap();
        let np = new_port.to_string();
        wait_until(&format!("{name}: the other replica to follow the new master"), 30, || {
            fresh_info(other, "replication", "master_port").as_deref() == Some(np.as_str())
                && fresh_info(other, "replication", "master_link_status").as_deref() == Some("up")
        });
        // The old primary, started again, is made a replica of the new one by the sentinels.
        let old = start_primary(primary_is_atoll, pport, &pargs);
        wait_until(&format!("{name}: the old primary to rejoin as a replica"), 60, || {
            fresh_info(pport, "replication", "master_port").as_deref() == Some(np.as_str())
                && fresh_info(pport, "replication", "master_link_status").as_deref() == Some("up")
        });
        let digest_of = |port: u16| match q(&mut fresh(port), &["DEBUG", "DIGEST"]) {
            Ok(Value::BulkString(b)) => b,
            Ok(Value::SimpleString(s)) => s.into_bytes(),
            other => panic!("{other:?}"),
        };
        let want = offset(&mut fresh(new_port));
        let digest = digest_of(new_port);
        for (who, port) in [("other replica", other), ("old primary", pport)] {
            wait_until(&format!("{name}: the {who} to catch up"), 20, || offset(&mut fresh(port)) == want);
            assert_eq!(digest_of(port), digest, "{name}: {who}'s data");
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
