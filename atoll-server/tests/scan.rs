//! Black-box tests of the keyspace walkers (SCAN, KEYS, RANDOMKEY) against the built
//! `atoll-server`, through the `redis` client library.
//!
//! SCAN's contract: a key present for the whole scan is returned at least once, however the
//! keyspace grows or shrinks in between calls (Atoll packs a shard index and a per-shard
//! reverse-binary cursor into the cursor). Walkers never return keys whose TTL has passed.

use redis::{Commands, Connection};
use std::collections::HashSet;
use std::time::Duration;

mod common;
use common::{start_atoll, ServerProc};

/// A server for these tests (the common start-up waits until it answers PING, and honours
/// `ATOLL_TEST_IO_BACKEND`).
fn start() -> ServerProc {
    start_atoll(&["--save", "", "--enable-debug-command", "yes"])
}

fn connect(server: &ServerProc) -> Connection {
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/", server.port)).unwrap();
    client.get_connection().expect("connect to atoll-server")
}

/// Sets `name(i)` to `i` for every `i` in `range`, a thousand keys per MSET.
fn mset_range(con: &mut Connection, range: std::ops::Range<usize>, name: impl Fn(usize) -> String) {
    let all: Vec<usize> = range.collect();
    for chunk in all.chunks(1000) {
        let pairs: Vec<(String, usize)> = chunk.iter().map(|&i| (name(i), i)).collect();
        let _: () = con.mset(&pairs).unwrap();
    }
}

/// One SCAN call: (next cursor, keys).
fn scan(con: &mut Connection, cursor: u64, extra: &[&str]) -> (u64, Vec<String>) {
    let mut cmd = redis::cmd("SCAN");
    cmd.arg(cursor);
    for a in extra {
        cmd.arg(*a);
    }
    let (next, keys): (String, Vec<String>) = cmd.query(con).unwrap();
    (next.parse().expect("the cursor is an unsigned integer"), keys)
}

/// Every key of a full scan (as a set), and the number of calls it took.
fn full_scan(con: &mut Connection, extra: &[&str]) -> (HashSet<String>, usize) {
    let (mut seen, mut calls, mut cursor) = (HashSet::new(), 0, 0);
    loop {
        let (next, keys) = scan(con, cursor, extra);
        seen.extend(keys);
        calls += 1;
        cursor = next;
        if cursor == 0 {
            return (seen, calls);
        }
    }
}

#[test]
fn scan_returns_every_stable_key_while_the_keyspace_changes() {
    const STABLE: usize = 5_000;
    const ADDED: usize = 20_000;
    let server = start();
    let mut con = connect(&server);
    let mut writer = connect(&server);
    mset_range(&mut con, 0..STABLE, |i| format!("stable:{i}"));
    // Short-lived keys that exist when the scan starts and are deleted during it.
    mset_range(&mut con, 0..2_000, |i| format!("doomed:{i}"));

    // A second client keeps writing and deleting its own keys concurrently, on whatever
    // worker thread serves it, while the scan walks the shards.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let stop = stop.clone();
        let mut con = connect(&server);
        std::thread::spawn(move || {
            let mut round = 0usize;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                mset_range(&mut con, 0..200, |i| format!("churn:{round}:{i}"));
                if round > 0 {
                    let old: Vec<String> = (0..200).map(|i| format!("churn:{}:{i}", round - 1)).collect();
                    let _: usize = con.del(&old).unwrap();
                }
                round += 1;
            }
            round
        })
    };

    let (mut seen, mut cursor, mut calls, mut added) = (HashSet::new(), 0u64, 0usize, 0usize);
    loop {
        let (next, keys) = scan(&mut con, cursor, &["COUNT", "100"]);
        for k in &keys {
            assert!(!k.is_empty());
        }
        seen.extend(keys);
        calls += 1;
        // Between calls: grow the keyspace by 20,000 keys in steps (every shard's table grows
        // and rehashes), and delete the doomed keys.
        if added < ADDED {
            let step = 1_000.min(ADDED - added);
            mset_range(&mut writer, added..added + step, |i| format!("added:{i}"));
            added += step;
        }
        if calls <= 20 {
            let doomed: Vec<String> = (0..100).map(|i| format!("doomed:{}", (calls - 1) * 100 + i)).collect();
            let _: usize = writer.del(&doomed).unwrap();
        }
        cursor = next;
        if cursor == 0 {
            break;
        }
        assert!(calls < 100_000, "the scan does not terminate");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let churn_rounds = churn.join().unwrap();
    assert!(churn_rounds > 0);
    assert!(calls > 20, "COUNT 100 over 7,000+ keys should take many calls, took {calls}");
    assert_eq!(added, ADDED, "all keys were added while the scan was running");
    let missing: Vec<usize> = (0..STABLE).filter(|i| !seen.contains(&format!("stable:{i}"))).collect();
    assert!(missing.is_empty(), "{} stable keys never returned, e.g. stable:{}", missing.len(), missing[0]);
    // Nothing that never existed is invented.
    assert!(seen.iter().all(|k| ["stable:", "doomed:", "added:", "churn:"].iter().any(|p| k.starts_with(p))));

    // A scan of the settled keyspace returns every key; duplicates are allowed, gaps are not.
    let dbsize: usize = redis::cmd("DBSIZE").query(&mut con).unwrap();
    let (all, _) = full_scan(&mut con, &["COUNT", "1000"]);
    assert_eq!(all.len(), dbsize);
}

#[test]
fn scan_filters_by_pattern_and_type() {
    let server = start();
    let mut con = connect(&server);
    mset_range(&mut con, 0..3_000, |i| format!("user:{i}"));
    mset_range(&mut con, 0..1_000, |i| format!("session:{i}"));

    let (users, _) = full_scan(&mut con, &["MATCH", "user:*", "COUNT", "50"]);
    assert_eq!(users.len(), 3_000);
    assert!(users.iter().all(|k| k.starts_with("user:")));

    let (ones, _) = full_scan(&mut con, &["MATCH", "session:1??"]);
    let expected: HashSet<String> = (100..200).map(|i| format!("session:{i}")).collect();
    assert_eq!(ones, expected);

    let (strings, _) = full_scan(&mut con, &["TYPE", "string", "COUNT", "500"]);
    assert_eq!(strings.len(), 4_000);
    let (upper, _) = full_scan(&mut con, &["TYPE", "STRING", "MATCH", "user:42"]);
    assert_eq!(upper, HashSet::from(["user:42".to_string()]));
    let (lists, _) = full_scan(&mut con, &["TYPE", "list"]);
    assert!(lists.is_empty());
    let (none, _) = full_scan(&mut con, &["MATCH", "nothing*"]);
    assert!(none.is_empty());

    // COUNT is a hint: a large COUNT takes the whole keyspace in few calls.
    let (all, calls) = full_scan(&mut con, &["COUNT", "100000"]);
    assert_eq!(all.len(), 4_000);
    assert!(calls <= 2, "took {calls} calls");

    // Option errors.
    let err = redis::cmd("SCAN").arg(0).arg("COUNT").arg(0).query::<redis::Value>(&mut con).unwrap_err();
    assert!(err.to_string().contains("syntax error"), "{err}");
    let err = redis::cmd("SCAN").arg("abc").query::<redis::Value>(&mut con).unwrap_err();
    assert!(err.to_string().contains("invalid cursor"), "{err}");
}

#[test]
fn walkers_never_return_expired_keys() {
    let server = start();
    let mut con = connect(&server);
    // Keep expired keys in memory, so only the walkers' own checks hide them.
    let _: () = redis::cmd("DEBUG").arg("SET-ACTIVE-EXPIRE").arg(0).query(&mut con).unwrap();
    mset_range(&mut con, 0..500, |i| format!("live:{i}"));
    mset_range(&mut con, 0..1_500, |i| format!("short:{i}"));
    // One pipeline, so every TTL is set well before the first one runs out.
    let mut p = redis::pipe();
    for i in 0..1_500 {
        p.pexpire(format!("short:{i}"), 300);
    }
    let set: Vec<bool> = p.query(&mut con).unwrap();
    assert!(set.iter().all(|s| *s));
    let ttl: i64 = con.pttl("short:0").unwrap();
    assert!(ttl > 0 && ttl <= 300, "{ttl}");
    std::thread::sleep(Duration::from_millis(500));

    // Still in memory (DBSIZE counts them, as in Redis) but logically gone.
    let dbsize: usize = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(dbsize, 2_000);
    let keys: Vec<String> = con.keys("*").unwrap();
    assert_eq!(keys.len(), 500, "KEYS returned expired keys");
    assert!(keys.iter().all(|k| k.starts_with("live:")));
    let short: Vec<String> = con.keys("short:*").unwrap();
    assert!(short.is_empty());
    for _ in 0..50 {
        let k: String = redis::cmd("RANDOMKEY").query(&mut con).unwrap();
        assert!(k.starts_with("live:"), "RANDOMKEY returned {k}");
    }
    let (all, _) = full_scan(&mut con, &["COUNT", "200"]);
    assert_eq!(all.len(), 500);
    assert!(all.iter().all(|k| k.starts_with("live:")));
    // The walkers reclaimed what they found expired.
    let dbsize: usize = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(dbsize, 500);

    // A keyspace where every key has expired: RANDOMKEY answers null instead of looping.
    let _: () = redis::cmd("FLUSHALL").query(&mut con).unwrap();
    mset_range(&mut con, 0..1_000, |i| format!("gone:{i}"));
    for i in 0..1_000 {
        let _: bool = con.pexpire(format!("gone:{i}"), 20).unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    let k: Option<String> = redis::cmd("RANDOMKEY").query(&mut con).unwrap();
    assert_eq!(k, None);
    let keys: Vec<String> = con.keys("*").unwrap();
    assert!(keys.is_empty());
}
