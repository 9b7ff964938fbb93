//! The append-only file, with real processes and real files: directories written by Redis
//! 7.2.6 load into Atoll and the other way round; `kill -9` under `appendfsync always` loses
//! no acknowledged write; a torn tail is cut as Redis cuts it; rewrites keep the data.

mod common;

use common::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn dir_of(c: &mut RawConn) -> String {
    String::from_utf8_lossy(&parse_array(&c.cmd(&[b"CONFIG", b"GET", b"dir"]))[1]).to_string()
}

/// A mix of writes whose effects differ from the commands sent (relative TTLs, INCRBYFLOAT,
/// SPOP, blocking-free pops, a transaction, a second database).
/// Keys for a base to hold, `key:0` … `key:19999` (DEBUG POPULATE would not be logged, as in
/// Redis).
fn twenty_thousand_keys(c: &mut RawConn) {
    for chunk in 0..20 {
        let mut argv = vec!["MSET".to_string()];
        for i in 0..1000 {
            argv.push(format!("key:{}", chunk * 1000 + i));
            argv.push(format!("value:{i}"));
        }
        let argv: Vec<&str> = argv.iter().map(|s| s.as_str()).collect();
        run_all(c, &[v(&argv)]);
    }
}

fn workload(c: &mut RawConn) {
    let mut cmds = vec![
        v(&["SET", "s", "hello"]),
        v(&["APPEND", "s", " world"]),
        v(&["SET", "ttl", "v", "EX", "1000"]),
        v(&["INCR", "n"]),
        v(&["INCRBYFLOAT", "f", "1.5"]),
        v(&["RPUSH", "l", "a", "b", "c", "d"]),
        v(&["LPOP", "l"]),
        v(&["HSET", "h", "a", "1", "b", "2"]),
        v(&["SADD", "set", "1", "2", "3", "4"]),
        v(&["ZADD", "z", "1", "a", "2", "b"]),
        v(&["ZINCRBY", "z", "5", "a"]),
        v(&["XADD", "x", "1-1", "f", "v"]),
        v(&["XGROUP", "CREATE", "x", "g", "0"]),
        v(&["MULTI"]),
        v(&["INCR", "n"]),
        v(&["SET", "t", "in-tx"]),
        v(&["EXEC"]),
        v(&["SELECT", "5"]),
        v(&["SET", "other", "db"]),
        v(&["SELECT", "0"]),
        v(&["DEL", "set"]),
        v(&["SADD", "set", "x"]),
    ];
    for i in 0..200 {
        cmds.push(v(&["RPUSH", "big", &format!("element-{i}")]));
    }
    run_all(c, &cmds);
}

/// Waits for a BGREWRITEAOF (which runs while clients go on) to finish; its status.
fn wait_rewrite(c: &mut RawConn) -> String {
    for _ in 0..3000 {
        let info = String::from_utf8_lossy(&c.cmd(&[b"INFO", b"persistence"])).to_string();
        if info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrite_scheduled:0") {
            let status = info.split("aof_last_bgrewrite_status:").nth(1).unwrap_or("");
            return status.lines().next().unwrap_or("").trim().to_string();
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("the AOF rewrite did not finish");
}

fn digest(c: &mut RawConn) -> Vec<u8> {
    c.cmd(&[b"DEBUG", b"DIGEST"])
}

/// An AOF of Redis before 7.0 (one file in `dir`) is upgraded as Redis 7.2.6 upgrades it —
/// moved into the directory as the base, an incremental file added, the same manifest — also
/// when an earlier upgrade was interrupted after its manifest and before the move; a manifest
/// naming a base that is nowhere stops start-up, naming it.
#[test]
fn an_aof_of_redis_before_7_is_upgraded_as_redis_upgrades_it() {
    let old = [encode(&v(&["SET", "k1", "v1"])), encode(&v(&["RPUSH", "l", "a", "b"]))].concat();
    let want_manifest = "file appendonly.aof seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n";
    for interrupted in [false, true] {
        for oracle in [false, true] {
            let d = std::env::temp_dir().join(format!("atoll-upgrade-{}-{interrupted}-{oracle}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("appendonly.aof"), &old).unwrap();
            if interrupted {
                std::fs::create_dir_all(d.join("appendonlydir")).unwrap();
                std::fs::write(d.join("appendonlydir/appendonly.aof.manifest"), "file appendonly.aof seq 1 type b\n")
                    .unwrap();
            }
            let args = ["--appendonly", "yes", "--dir", d.to_str().unwrap()];
            let s = if oracle { start_redis(&args) } else { start_atoll(&args) };
            let mut c = RawConn::connect(s.port);
            let what = format!("{} interrupted={interrupted}", s.name);
            assert_eq!(c.cmd(&[b"GET", b"k1"]), b"$2\r\nv1\r\n", "{what}");
            assert_eq!(c.cmd(&[b"LLEN", b"l"]), b":2\r\n", "{what}");
            assert!(!d.join("appendonly.aof").exists(), "{what}: the old file was moved");
            let manifest = std::fs::read_to_string(d.join("appendonlydir/appendonly.aof.manifest")).unwrap();
            assert_eq!(manifest, want_manifest, "{what}");
            drop(s);
            let _ = std::fs::remove_dir_all(&d);
        }
    }
    // The manifest names the old file, which is in neither place.
    let d = std::env::temp_dir().join(format!("atoll-upgrade-missing-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("appendonlydir")).unwrap();
    std::fs::write(d.join("appendonlydir/appendonly.aof.manifest"), "file appendonly.aof seq 1 type b\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_atoll-server"))
        .args(["--port", &free_port().to_string(), "--appendonly", "yes", "--dir", d.to_str().unwrap()])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert!(log.contains("appendonly.aof") && log.contains("No such file or directory"), "{log}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn aof_directories_move_both_ways_between_redis_and_atoll() {
    // Redis writes, Atoll loads.
    let r = start_redis(&["--appendonly", "yes"]);
    let mut rc = RawConn::connect(r.port);
    workload(&mut rc);
    let want = digest(&mut rc);
    let rdir = dir_of(&mut rc);
    rc.send(&v(&["SHUTDOWN", "NOSAVE"]));
    let mut r = r;
    let _ = r.child.wait();
    let a = start_atoll(&["--enable-debug-command", "yes", "--appendonly", "yes", "--dir", &rdir]);
    let mut ac = RawConn::connect(a.port);
    assert_eq!(show(&digest(&mut ac)), show(&want), "Redis's AOF loaded into Atoll");
    drop(ac);
    drop(a);
    // Atoll writes, Redis loads — with `#TS:` timestamp annotations, which Redis skips.
    let a = start_atoll(&["--enable-debug-command", "yes", "--appendonly", "yes", "--aof-timestamp-enabled", "yes"]);
    let mut ac = RawConn::connect(a.port);
    workload(&mut ac);
    // Half of it in a base written as commands (`aof-use-rdb-preamble no`), the rest after.
    assert_eq!(ac.cmd(&[b"CONFIG", b"SET", b"aof-use-rdb-preamble", b"no"]), b"+OK\r\n");
    assert!(ac.cmd(&[b"BGREWRITEAOF"]).starts_with(b"+"));
    assert_eq!(wait_rewrite(&mut ac), "ok");
    run_all(
        &mut ac,
        &[v(&["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "x", ">"]), v(&["SET", "after", "rewrite"])],
    );
    let want = digest(&mut ac);
    let adir = dir_of(&mut ac);
    ac.send(&v(&["SHUTDOWN", "NOSAVE"]));
    let mut a = a;
    assert!(a.child.wait().unwrap().success());
    // The command-form base starts with one, and the incremental file has them.
    let files: Vec<std::path::PathBuf> = std::fs::read_dir(std::path::Path::new(&adir).join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "aof"))
        .collect();
    assert!(files.len() >= 2, "{files:?}");
    for f in &files {
        let text = std::fs::read(f).unwrap();
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        if name.contains(".base.") {
            assert!(text.starts_with(b"#TS:"), "{name} does not start with a timestamp");
        } else if !text.is_empty() {
            assert!(text.windows(4).any(|w| w == b"#TS:"), "{name} has no timestamp");
        }
    }
    let r2 = start_redis(&["--appendonly", "yes", "--dir", &adir]);
    let mut r2c = RawConn::connect(r2.port);
    assert_eq!(show(&digest(&mut r2c)), show(&want), "Atoll's AOF loaded into Redis");
    // And redis-check-aof agrees the directory is valid.
    let tool = std::path::Path::new(&redis_bin()).parent().unwrap().join("redis-check-aof");
    let manifest = std::path::Path::new(&adir).join("appendonlydir/appendonly.aof.manifest");
    let out = std::process::Command::new(tool).arg(&manifest).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("is valid"), "{text}");
}

/// `appendfsync always`: a write is acknowledged only once it is on disk, so `kill -9` at
/// any moment loses nothing that was acknowledged. Several writers, transactions and
/// multi-key commands; twenty trials, killed at different moments.
#[test]
fn kill_9_with_appendfsync_always_loses_no_acknowledged_write() {
    for trial in 0..20 {
        // Every other trial with the file padded ahead (`aof-preallocate`); every third on
        // the epoll backend (rounds there look for late requests before their fsync too).
        let padded = trial % 2 == 0;
        let backend = if trial % 3 == 1 { "epoll" } else { "io_uring" };
        let a = start_atoll(&[
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--aof-preallocate",
            if padded { "yes" } else { "no" },
            "--io-backend",
            backend,
        ]);
        let mut admin = RawConn::connect(a.port);
        let dir = dir_of(&mut admin);
        let stop = Arc::new(AtomicBool::new(false));
        let mut writers = Vec::new();
        for w in 0..4 {
            let (port, stop) = (a.port, stop.clone());
            writers.push(std::thread::spawn(move || {
                let mut c = RawConn::connect(port);
                c.stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut acked = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let n = (acked + 1).to_string();
                    let batch = [
                        encode(&v(&["MULTI"])),
                        encode(&v(&["SET", &format!("w{w}:a"), &n])),
                        encode(&v(&["SET", &format!("w{w}:b"), &n])),
                        encode(&v(&["EXEC"])),
                        encode(&v(&["MSET", &format!("w{w}:c"), &n, &format!("w{w}:d"), &n])),
                    ]
                    .concat();
                    if std::io::Write::write_all(&mut c.stream, &batch).is_err() {
                        break;
                    }
                    // All five replies, or the server died: only then is `n` acknowledged.
                    if !await_replies(&mut c, 5) {
                        return acked;
                    }
                    acked += 1;
                }
                acked
            }));
        }
        std::thread::sleep(Duration::from_millis(150 + 17 * trial));
        let mut a = a;
        a.child.kill().unwrap();
        let _ = a.child.wait();
        stop.store(true, Ordering::Relaxed);
        let acked: Vec<u64> = writers.into_iter().map(|t| t.join().unwrap()).collect();
        assert!(acked.iter().sum::<u64>() > 0, "trial {trial}: nothing was written");
        // The incremental file was written into padding allocated ahead: the crash leaves it
        // there, after the commands.
        let adir = std::path::Path::new(&dir).join("appendonlydir");
        let incr = std::fs::read_dir(&adir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with(".incr.aof"))
            .unwrap();
        let bytes = std::fs::read(&incr).unwrap();
        assert_eq!(bytes.ends_with(b"                  \n"), padded, "trial {trial}: padding after the commands");
        // Every fourth trial (padded), Redis 7.2.6 loads the crashed directory as it is, and
        // finds the same.
        let copy = (trial % 4 == 0).then(|| {
            let copy = std::env::temp_dir().join(format!("atoll-aof-kill-{}-{trial}", std::process::id()));
            std::fs::create_dir_all(copy.join("appendonlydir")).unwrap();
            for e in std::fs::read_dir(&adir).unwrap() {
                let p = e.unwrap().path();
                std::fs::copy(&p, copy.join("appendonlydir").join(p.file_name().unwrap())).unwrap();
            }
            copy
        });
        let b = start_atoll(&["--appendonly", "yes", "--dir", &dir]);
        check_acked(&mut RawConn::connect(b.port), &acked, &format!("trial {trial}"));
        // Loading cut the padding off.
        if padded {
            assert!(std::fs::metadata(&incr).unwrap().len() < bytes.len() as u64);
        }
        if let Some(copy) = copy {
            let r = start_redis(&["--appendonly", "yes", "--dir", copy.to_str().unwrap()]);
            check_acked(&mut RawConn::connect(r.port), &acked, &format!("trial {trial}, Redis"));
            drop(r);
            let _ = std::fs::remove_dir_all(&copy);
        }
    }
}

/// After a crash: each writer's pairs written together are equal, and no acknowledged round
/// is missing (one more, sent but not yet acknowledged, may be there).
fn check_acked(bc: &mut RawConn, acked: &[u64], what: &str) {
    for (w, &n) in acked.iter().enumerate() {
        let vals: Vec<u64> = ["a", "b", "c", "d"]
            .iter()
            .map(|s| {
                let r = bc.cmd(&[b"GET", format!("w{w}:{s}").as_bytes()]);
                bulk_u64(&r)
            })
            .collect();
        assert_eq!(vals[0], vals[1], "{what} writer {w}: transaction cut {vals:?}");
        assert_eq!(vals[2], vals[3], "{what} writer {w}: MSET cut {vals:?}");
        assert!(vals[0] >= n && vals[2] >= n, "{what} writer {w}: acked {n}, found {vals:?}");
        assert!(vals[0] <= n + 1 && vals[2] <= n + 1, "{what} writer {w}: {vals:?} after {n}");
    }
}

/// BGREWRITEAOF runs while clients write (no fork, no pause): four writers keep doing
/// transactions of non-idempotent writes (INCR, RPUSH) and two-key MSETs with `appendfsync
/// always` while a rewrite, slowed by `rdb-key-save-delay`, writes its base; the server is
/// killed during the rewrite in some trials and after it in others. After a restart every
/// acknowledged round is there exactly once: a write that the base holds and that was also
/// logged after it would count twice, one that fell between the files would be missing.
#[test]
fn bgrewriteaof_runs_while_clients_write_and_a_kill_loses_nothing() {
    for trial in 0..6 {
        let during = trial % 2 == 0;
        // Trials 2 and 3 with the files padded ahead (`aof-preallocate`): both incremental
        // files are then padded while the log is split.
        let padded = trial / 2 == 1;
        let a = start_atoll(&[
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--save",
            "",
            "--enable-debug-command",
            "yes",
            "--aof-preallocate",
            if padded { "yes" } else { "no" },
        ]);
        let mut admin = RawConn::connect(a.port);
        let dir = dir_of(&mut admin);
        twenty_thousand_keys(&mut admin);
        let stop = Arc::new(AtomicBool::new(false));
        let acked_now: Arc<Vec<std::sync::atomic::AtomicU64>> = Arc::new((0..4).map(|_| Default::default()).collect());
        let mut writers = Vec::new();
        for w in 0..4 {
            let (port, stop, acked_now) = (a.port, stop.clone(), acked_now.clone());
            writers.push(std::thread::spawn(move || {
                let mut c = RawConn::connect(port);
                c.stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut acked = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let n = (acked + 1).to_string();
                    let batch = [
                        encode(&v(&["MULTI"])),
                        encode(&v(&["INCR", &format!("r{w}:n")])),
                        encode(&v(&["RPUSH", &format!("r{w}:l"), &n])),
                        encode(&v(&["EXEC"])),
                        encode(&v(&["MSET", &format!("r{w}:c"), &n, &format!("r{w}:d"), &n])),
                    ]
                    .concat();
                    if std::io::Write::write_all(&mut c.stream, &batch).is_err() || !await_replies(&mut c, 5) {
                        return acked;
                    }
                    acked += 1;
                    acked_now[w].store(acked, Ordering::Relaxed);
                }
                acked
            }));
        }
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(admin.cmd(&[b"CONFIG", b"SET", b"rdb-key-save-delay", b"100"]), b"+OK\r\n");
        assert!(admin.cmd(&[b"BGREWRITEAOF"]).starts_with(b"+Background append only file rewriting started"));
        let at_start: u64 = acked_now.iter().map(|a| a.load(Ordering::Relaxed)).sum();
        std::thread::sleep(Duration::from_millis(300 + 60 * trial));
        let info = String::from_utf8_lossy(&admin.cmd(&[b"INFO", b"persistence"])).to_string();
        assert!(info.contains("aof_rewrite_in_progress:1"), "trial {trial}: the rewrite should still run: {info}");
        let during_rewrite = acked_now.iter().map(|a| a.load(Ordering::Relaxed)).sum::<u64>() - at_start;
        assert!(during_rewrite > 20, "trial {trial}: writes waited for the rewrite ({during_rewrite} rounds)");
        if !during {
            assert_eq!(admin.cmd(&[b"CONFIG", b"SET", b"rdb-key-save-delay", b"0"]), b"+OK\r\n");
            assert_eq!(wait_rewrite(&mut admin), "ok");
            std::thread::sleep(Duration::from_millis(100));
        }
        let mut a = a;
        a.child.kill().unwrap();
        let _ = a.child.wait();
        stop.store(true, Ordering::Relaxed);
        let acked: Vec<u64> = writers.into_iter().map(|t| t.join().unwrap()).collect();
        let mut files: Vec<String> = std::fs::read_dir(std::path::Path::new(&dir).join("appendonlydir"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .filter(|n| !n.starts_with("temp-"))
            .collect();
        files.sort();
        let want: &[&str] = if during {
            // Killed mid-rewrite: the previous files and the new incremental file.
            &[
                "appendonly.aof.1.base.rdb",
                "appendonly.aof.1.incr.aof",
                "appendonly.aof.2.incr.aof",
                "appendonly.aof.manifest",
            ]
        } else {
            &["appendonly.aof.2.base.rdb", "appendonly.aof.2.incr.aof", "appendonly.aof.manifest"]
        };
        assert_eq!(files, want, "trial {trial}");
        // The incremental file being written when the kill came is padded, or not.
        let last = std::fs::read(std::path::Path::new(&dir).join("appendonlydir/appendonly.aof.2.incr.aof")).unwrap();
        assert_eq!(last.ends_with(b"                  \n"), padded, "trial {trial}: padding");
        let b = start_atoll(&["--appendonly", "yes", "--dir", &dir]);
        let mut bc = RawConn::connect(b.port);
        assert!(bulk_u64(&bc.cmd(&[b"DBSIZE"])) >= 20000, "trial {trial}: the populated keys");
        for (w, &n) in acked.iter().enumerate() {
            let count = bulk_u64(&bc.cmd(&[b"GET", format!("r{w}:n").as_bytes()]));
            let len = bulk_u64(&bc.cmd(&[b"LLEN", format!("r{w}:l").as_bytes()]));
            let last = bulk_u64(&bc.cmd(&[b"LINDEX", format!("r{w}:l").as_bytes(), b"-1"]));
            let c = bulk_u64(&bc.cmd(&[b"GET", format!("r{w}:c").as_bytes()]));
            let d = bulk_u64(&bc.cmd(&[b"GET", format!("r{w}:d").as_bytes()]));
            let what =
                format!("trial {trial} writer {w}: acked {n}, INCR {count}, LLEN {len}, last {last}, MSET {c}/{d}");
            assert_eq!((len, last), (count, count), "{what}: each round once");
            assert_eq!(c, d, "{what}: MSET cut");
            assert!(count >= n && c >= n, "{what}: an acknowledged round is missing");
            assert!(count <= n + 1 && c <= n + 1, "{what}: more than was sent");
        }
    }
}

/// `appendfsync everysec`: `kill -9` may lose the last second or two of writes (Redis's
/// promise), never more, and never half a transaction. The writer notes when each round was
/// acknowledged; after the kill, every round acknowledged more than two seconds before it
/// must be there.
#[test]
fn kill_9_with_appendfsync_everysec_loses_at_most_the_last_seconds() {
    for trial in 0..3 {
        let a = start_atoll(&["--appendonly", "yes", "--appendfsync", "everysec"]);
        let mut admin = RawConn::connect(a.port);
        let dir = dir_of(&mut admin);
        let stop = Arc::new(AtomicBool::new(false));
        let (port, stop2) = (a.port, stop.clone());
        let writer = std::thread::spawn(move || {
            let mut c = RawConn::connect(port);
            c.stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut acks: Vec<(std::time::Instant, u64)> = Vec::new();
            let mut n = 0u64;
            while !stop2.load(Ordering::Relaxed) {
                n += 1;
                let s = n.to_string();
                let batch = [
                    encode(&v(&["MULTI"])),
                    encode(&v(&["SET", "e:a", &s])),
                    encode(&v(&["INCR", "e:count"])),
                    encode(&v(&["SET", "e:b", &s])),
                    encode(&v(&["EXEC"])),
                ]
                .concat();
                if std::io::Write::write_all(&mut c.stream, &batch).is_err() {
                    break;
                }
                if !await_replies(&mut c, 5) {
                    return acks;
                }
                acks.push((std::time::Instant::now(), n));
            }
            acks
        });
        std::thread::sleep(Duration::from_millis(3500 + 400 * trial));
        let mut a = a;
        let killed_at = std::time::Instant::now();
        a.child.kill().unwrap();
        let _ = a.child.wait();
        stop.store(true, Ordering::Relaxed);
        let acks = writer.join().unwrap();
        let promised = acks
            .iter()
            .rev()
            .find(|(t, _)| killed_at.duration_since(*t) > Duration::from_secs(2))
            .map_or(0, |&(_, n)| n);
        assert!(promised > 0, "trial {trial}: nothing acknowledged early enough");
        let b = start_atoll(&["--appendonly", "yes", "--dir", &dir]);
        let mut bc = RawConn::connect(b.port);
        let a_val = bulk_u64(&bc.cmd(&[b"GET", b"e:a"]));
        let b_val = bulk_u64(&bc.cmd(&[b"GET", b"e:b"]));
        let count = bulk_u64(&bc.cmd(&[b"GET", b"e:count"]));
        assert_eq!((a_val, b_val), (count, count), "trial {trial}: transaction cut");
        assert!(count >= promised, "trial {trial}: {count} rounds survived, {promised} were over 2 s old");
        assert!(count <= acks.last().map_or(0, |x| x.1) + 1, "trial {trial}: more than was sent");
    }
}

/// Reads until `n` whole replies have arrived; false if the connection ended first (the
/// server was killed).
fn await_replies(c: &mut RawConn, n: usize) -> bool {
    let mut buf = Vec::new();
    loop {
        let mut got = 0;
        let mut p = 0;
        while let Some(e) = reply_end(&buf, p) {
            got += 1;
            p = e;
        }
        if got >= n {
            return true;
        }
        let mut tmp = [0u8; 4096];
        match std::io::Read::read(&mut c.stream, &mut tmp) {
            Ok(0) | Err(_) => return false,
            Ok(k) => buf.extend_from_slice(&tmp[..k]),
        }
    }
}

/// A bulk (nil: 0) or integer reply's number.
fn bulk_u64(r: &[u8]) -> u64 {
    if r.starts_with(b"$-1") {
        return 0;
    }
    let s = String::from_utf8_lossy(r);
    if let Some(n) = s.strip_prefix(':') {
        return n.trim().parse().unwrap();
    }
    s.lines().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_torn_last_command_is_cut_as_redis_cuts_it() {
    let a = start_atoll(&["--appendonly", "yes", "--appendfsync", "always", "--aof-preallocate", "yes"]);
    let mut ac = RawConn::connect(a.port);
    let dir = dir_of(&mut ac);
    run_all(&mut ac, &[v(&["SET", "a", "1"]), v(&["SET", "b", "2"])]);
    let mut a = a;
    a.child.kill().unwrap();
    let _ = a.child.wait();
    let incr = std::path::Path::new(&dir).join("appendonlydir/appendonly.aof.1.incr.aof");
    // The crash left `always`'s padding after the commands: a start-up cuts it off.
    let padded = std::fs::read(&incr).unwrap();
    drop(start_atoll(&["--appendonly", "yes", "--dir", &dir]));
    let whole = std::fs::read(&incr).unwrap();
    assert!(whole.len() < padded.len() && padded.starts_with(&whole) && whole.ends_with(b"$1\r\n2\r\n"));
    // Half a SET, then half a transaction: each torn tail goes, the rest stays.
    for (tail, name) in [
        (&b"*3\r\n$3\r\nSET\r\n$1\r\nc\r\n$5\r\nhel"[..], "half a command"),
        (b"*1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$1\r\nc\r\n$1\r\n3\r\n", "a transaction without EXEC"),
    ] {
        let mut torn = whole.clone();
        torn.extend_from_slice(tail);
        std::fs::write(&incr, &torn).unwrap();
        // With aof-load-truncated no, the server refuses to start.
        let port = free_port();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_atoll-server"))
            .args(["--port", &port.to_string(), "--dir", &dir, "--appendonly", "yes", "--aof-load-truncated", "no"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{name}");
        let b = start_atoll(&["--appendonly", "yes", "--dir", &dir]);
        let mut bc = RawConn::connect(b.port);
        assert_eq!(bc.cmd(&[b"GET", b"b"]), b"$1\r\n2\r\n", "{name}");
        assert_eq!(bc.cmd(&[b"EXISTS", b"c"]), b":0\r\n", "{name}");
        drop(bc);
        drop(b);
        assert_eq!(std::fs::read(&incr).unwrap(), whole, "{name}: the file is cut back to its last whole command");
    }
}

#[test]
fn rewrites_and_runtime_switches_keep_the_data() {
    let a = start_atoll(&["--enable-debug-command", "yes"]);
    let mut ac = RawConn::connect(a.port);
    let dir = dir_of(&mut ac);
    workload(&mut ac);
    // Turned on at runtime: the current data becomes the base, written by a rewrite.
    assert_eq!(ac.cmd(&[b"CONFIG", b"SET", b"appendonly", b"yes"]), b"+OK\r\n");
    for i in 0..500 {
        ac.cmd(&[b"INCR", format!("counter{}", i % 5).as_bytes()]);
    }
    let info = String::from_utf8_lossy(&ac.cmd(&[b"INFO", b"persistence"])).to_string();
    assert!(info.contains("aof_enabled:1"), "{info}");
    assert_eq!(wait_rewrite(&mut ac), "ok");
    assert_eq!(show(&ac.cmd(&[b"BGREWRITEAOF"])), "+Background append only file rewriting started\\r\\n");
    assert_eq!(wait_rewrite(&mut ac), "ok");
    let files: Vec<String> = std::fs::read_dir(std::path::Path::new(&dir).join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    let mut files = files;
    files.sort();
    assert_eq!(files, ["appendonly.aof.2.base.rdb", "appendonly.aof.2.incr.aof", "appendonly.aof.manifest"]);
    ac.cmd(&[b"SET", b"after-rewrite", b"1"]);
    let want = digest(&mut ac);
    let mut a = a;
    a.child.kill().unwrap();
    let _ = a.child.wait();
    let b = start_atoll(&["--enable-debug-command", "yes", "--appendonly", "yes", "--dir", &dir]);
    let mut bc = RawConn::connect(b.port);
    assert_eq!(show(&digest(&mut bc)), show(&want));
    assert_eq!(bc.cmd(&[b"CONFIG", b"SET", b"appendonly", b"no"]), b"+OK\r\n");
    let info = String::from_utf8_lossy(&bc.cmd(&[b"INFO", b"persistence"])).to_string();
    assert!(info.contains("aof_enabled:0"), "{info}");
}

/// CONFIG SET appendonly yes at runtime, as Redis 7 does it, without holding the dataset: the
/// reply comes at once while the first base is written (slowed here), a writer keeps being
/// answered meanwhile, a SHUTDOWN without FORCE is refused ("Writing initial AOF"), and once
/// the base is written the manifest names it and the incremental file that took the writes
/// after its instant: the AOF replays to the live data, and a restart from it too.
#[test]
fn turning_aof_on_at_runtime_writes_the_first_base_while_clients_write() {
    let a = start_atoll(&["--enable-debug-command", "yes", "--save", ""]);
    let mut ac = RawConn::connect(a.port);
    let dir = dir_of(&mut ac);
    twenty_thousand_keys(&mut ac);
    run_all(&mut ac, &[v(&["CONFIG", "SET", "rdb-key-save-delay", "100"])]);
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let writer = {
        let (port, stop, done) = (a.port, stop.clone(), done.clone());
        std::thread::spawn(move || {
            let mut c = RawConn::connect(port);
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let k = format!("key:{}", n % 20_000);
                c.cmd(&[b"INCR", b"writes"]);
                c.cmd(&[b"RPUSH", b"log", n.to_string().as_bytes()]);
                c.cmd(&[b"SET", k.as_bytes(), n.to_string().as_bytes()]);
                done.store(n, Ordering::Relaxed);
            }
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    let t0 = std::time::Instant::now();
    assert_eq!(ac.cmd(&[b"CONFIG", b"SET", b"appendonly", b"yes"]), b"+OK\r\n");
    let answered_in = t0.elapsed();
    let info = String::from_utf8_lossy(&ac.cmd(&[b"INFO", b"persistence"])).to_string();
    assert!(info.contains("aof_enabled:1") && info.contains("aof_rewrite_in_progress:1"), "{info}");
    let before = done.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(300));
    assert!(done.load(Ordering::Relaxed) > before + 20, "the writer waited for the base");
    assert_eq!(show(&ac.cmd(&[b"SHUTDOWN"])), "-ERR Errors trying to SHUTDOWN. Check logs.\\r\\n");
    let adir = std::path::Path::new(&dir).join("appendonlydir");
    assert!(adir.join("temp-appendonly.aof.incr").exists());
    assert_eq!(wait_rewrite(&mut ac), "ok");
    // 20,000 keys at 100 µs each: the base took seconds, the reply did not.
    let took = t0.elapsed();
    assert!(took > Duration::from_secs(1) && answered_in < took / 4, "{answered_in:?} of {took:?}");
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let mut files: Vec<String> =
        std::fs::read_dir(&adir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().to_string()).collect();
    files.sort();
    assert_eq!(files, ["appendonly.aof.1.base.rdb", "appendonly.aof.1.incr.aof", "appendonly.aof.manifest"]);
    let want = digest(&mut ac);
    run_all(&mut ac, &[v(&["DEBUG", "LOADAOF"])]);
    assert_eq!(show(&digest(&mut ac)), show(&want), "the AOF replays to the live data");
    let mut a = a;
    a.child.kill().unwrap();
    let _ = a.child.wait();
    let b = start_atoll(&["--enable-debug-command", "yes", "--appendonly", "yes", "--dir", &dir]);
    assert_eq!(show(&digest(&mut RawConn::connect(b.port))), show(&want));
}

/// Random command streams over every type: the dataset's digest is the same after DEBUG
/// RELOAD (RDB) and after DEBUG LOADAOF (the AOF's effects replayed), seed after seed.
#[test]
fn random_writes_survive_reload_and_aof_replay_with_equal_digests() {
    let a = start_atoll(&["--enable-debug-command", "yes", "--appendonly", "yes"]);
    let mut c = RawConn::connect(a.port);
    let mut rng = 0x9E3779B97F4A7C15u64;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    for round in 0..5 {
        let mut cmds = vec![v(&["XGROUP", "CREATE", "x0", "g", "0", "MKSTREAM"])];
        for _ in 0..2000 {
            let k = format!("k{}", next(40));
            let m = format!("m{}", next(300));
            let n = next(1000).to_string();
            let cmd: Vec<String> = match next(16) {
                0 => vec!["SET".into(), k, n],
                1 => vec!["INCRBY".into(), format!("n{}", next(5)), n],
                2 => vec!["RPUSH".into(), format!("l{}", next(5)), m],
                3 => vec!["LPOP".into(), format!("l{}", next(5))],
                4 => vec!["HSET".into(), format!("h{}", next(5)), m, n],
                5 => vec!["HDEL".into(), format!("h{}", next(5)), m],
                6 => vec!["SADD".into(), format!("s{}", next(5)), if next(2) == 0 { n } else { m }],
                7 => vec!["SPOP".into(), format!("s{}", next(5))],
                8 => vec!["ZADD".into(), format!("z{}", next(5)), n, m],
                9 => vec!["ZINCRBY".into(), format!("z{}", next(5)), "1.5".into(), m],
                10 => vec!["XADD".into(), format!("x{}", next(3)), "*".into(), "f".into(), m],
                11 => vec!["EXPIRE".into(), k, (100 + next(1000)).to_string()],
                12 => vec!["DEL".into(), k],
                13 => vec!["INCRBYFLOAT".into(), format!("f{}", next(3)), "0.25".into()],
                14 => vec!["SET".into(), k, "x".repeat(next(200) as usize)],
                15 if next(2) == 0 => {
                    ["XREADGROUP", "GROUP", "g", &format!("c{}", next(3)), "COUNT", "2", "STREAMS", "x0", ">"]
                        .iter()
                        .map(|s| s.to_string())
                        .collect()
                }
                _ => vec!["ZPOPMIN".into(), format!("z{}", next(5))],
            };
            cmds.push(cmd.into_iter().map(String::into_bytes).collect::<Vec<_>>());
        }
        let mut batch = Vec::new();
        for a in &cmds {
            batch.extend(encode(a));
        }
        c.send_raw(&batch);
        for _ in &cmds {
            c.read_reply();
        }
        let before = digest(&mut c);
        assert_eq!(c.cmd(&[b"DEBUG", b"RELOAD"]), b"+OK\r\n");
        assert_eq!(show(&digest(&mut c)), show(&before), "round {round}: DEBUG RELOAD");
        assert_eq!(c.cmd(&[b"DEBUG", b"LOADAOF"]), b"+OK\r\n");
        assert_eq!(show(&digest(&mut c)), show(&before), "round {round}: DEBUG LOADAOF");
        // A rewrite, its base as an RDB or (every other round) as commands, then the same.
        let preamble: &[u8] = if round % 2 == 0 { b"no" } else { b"yes" };
        assert_eq!(c.cmd(&[b"CONFIG", b"SET", b"aof-use-rdb-preamble", preamble]), b"+OK\r\n");
        // The last round's rewrite may still be on its way (the persistence thread takes it
        // up on its next turn, maybe after that round's LOADAOF).
        let start = std::time::Instant::now();
        while String::from_utf8_lossy(&c.cmd(&[b"INFO", b"persistence"])).contains("aof_rewrite_in_progress:1") {
            assert!(start.elapsed() < Duration::from_secs(10), "round {round}: a rewrite that does not end");
            std::thread::sleep(Duration::from_millis(10));
        }
        let r = c.cmd(&[b"BGREWRITEAOF"]);
        assert!(r.starts_with(b"+Background append only file rewriting"), "{}", show(&r));
        assert_eq!(c.cmd(&[b"DEBUG", b"LOADAOF"]), b"+OK\r\n");
        assert_eq!(show(&digest(&mut c)), show(&before), "round {round}: rewrite (preamble {preamble:?}) and reload");
    }
}

/// `auto-aof-rewrite-percentage`: once the log passed the minimum size and doubled since the
/// last rewrite, it is rewritten without being asked, and nothing is lost.
#[test]
fn the_log_is_rewritten_when_it_grows() {
    let a = start_atoll(&[
        "--enable-debug-command",
        "yes",
        "--appendonly",
        "yes",
        "--auto-aof-rewrite-min-size",
        "64kb",
        "--auto-aof-rewrite-percentage",
        "100",
    ]);
    let mut c = RawConn::connect(a.port);
    let dir = dir_of(&mut c);
    let val = "v".repeat(100);
    for i in 0..3000 {
        c.cmd(&[b"SET", format!("k{}", i % 100).as_bytes(), val.as_bytes()]);
    }
    let mut rewrites = 0;
    for _ in 0..200 {
        let info = String::from_utf8_lossy(&c.cmd(&[b"INFO", b"persistence"])).to_string();
        rewrites = info.lines().find_map(|l| l.strip_prefix("aof_rewrites:")).unwrap().trim().parse::<u64>().unwrap();
        if rewrites >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // The first rewrite created the directory at start-up; at least one more came by itself.
    assert!(rewrites >= 2, "aof_rewrites:{rewrites}");
    let want = digest(&mut c);
    let mut a = a;
    a.child.kill().unwrap();
    let _ = a.child.wait();
    let b = start_atoll(&["--enable-debug-command", "yes", "--appendonly", "yes", "--dir", &dir]);
    let mut bc = RawConn::connect(b.port);
    assert_eq!(show(&digest(&mut bc)), show(&want));
}

/// `appendfsync always` across workers: a reply that reports another worker's write (a GET of
/// a key just SET there) waits until that write is on disk too, as every reply of a Redis
/// event-loop iteration waits for its fsync. The write is held back with DEBUG
/// AOF-FLUSH-SLEEP; a reader on the other worker sees the new value only after it.
#[test]
fn replies_wait_for_other_workers_writes_to_be_durable() {
    let a = start_atoll(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--threads",
        "2",
        "--enable-debug-command",
        "yes",
    ]);
    let mut admin = RawConn::connect(a.port);
    let mut writer = RawConn::connect(a.port);
    let mut reader = RawConn::connect(a.port);
    // Connections are dealt out to the workers in turn: the writer and the reader land on
    // different ones (were they on one, the reader would wait behind the writer's round anyway).
    assert_eq!(admin.cmd(&[b"DEBUG", b"AOF-FLUSH-SLEEP", b"400000"]), b"+OK\r\n");
    // Timed from before the write is sent: the reply can only come once the write is on disk,
    // 400 ms after the server took it, however late this thread is scheduled.
    let t0 = std::time::Instant::now();
    writer.send(&v(&["SET", "k", "new"]));
    std::thread::sleep(Duration::from_millis(50));
    let got = reader.cmd(&[b"GET", b"k"]);
    let waited = t0.elapsed();
    assert_eq!(writer.read_reply(), b"+OK\r\n");
    assert_eq!(admin.cmd(&[b"DEBUG", b"AOF-FLUSH-SLEEP", b"0"]), b"+OK\r\n");
    if got == b"$3\r\nnew\r\n" {
        assert!(waited >= Duration::from_millis(380), "the reader saw the write {waited:?} before it was on disk");
    } else {
        assert_eq!(got, b"$-1\r\n");
    }
}

/// CONFIG SET appendonly inside MULTI/EXEC, as Redis 7.2: the switch is made in the
/// transaction (nothing waited for with its keys held) and the first base is written after
/// it; the transaction's own writes are in the AOF a restart loads. Turned off the same way.
#[test]
fn appendonly_switched_inside_a_transaction_writes_its_base_after_it() {
    let a = start_atoll(&["--enable-debug-command", "yes"]);
    let mut ac = RawConn::connect(a.port);
    let dir = dir_of(&mut ac);
    workload(&mut ac);
    assert_eq!(ac.cmd(&[b"MULTI"]), b"+OK\r\n");
    assert_eq!(ac.cmd(&[b"SET", b"foo", b"bar"]), b"+QUEUED\r\n");
    assert_eq!(ac.cmd(&[b"CONFIG", b"SET", b"appendonly", b"yes"]), b"+QUEUED\r\n");
    assert_eq!(ac.cmd(&[b"SET", b"foo2", b"bar2"]), b"+QUEUED\r\n");
    assert_eq!(show(&ac.cmd(&[b"EXEC"])), show(b"*3\r\n+OK\r\n+OK\r\n+OK\r\n"));
    assert_eq!(wait_rewrite(&mut ac), "ok");
    let info = String::from_utf8_lossy(&ac.cmd(&[b"INFO", b"persistence"])).to_string();
    assert!(info.contains("aof_enabled:1"), "{info}");
    let want = digest(&mut ac);
    let mut a = a;
    a.child.kill().unwrap();
    let _ = a.child.wait();
    let b = start_atoll(&["--enable-debug-command", "yes", "--appendonly", "yes", "--dir", &dir]);
    let mut bc = RawConn::connect(b.port);
    assert_eq!(show(&digest(&mut bc)), show(&want));
    assert_eq!(bc.cmd(&[b"MULTI"]), b"+OK\r\n");
    assert_eq!(bc.cmd(&[b"CONFIG", b"SET", b"appendonly", b"no"]), b"+QUEUED\r\n");
    assert_eq!(show(&bc.cmd(&[b"EXEC"])), show(b"*1\r\n+OK\r\n"));
    let info = String::from_utf8_lossy(&bc.cmd(&[b"INFO", b"persistence"])).to_string();
    assert!(info.contains("aof_enabled:0"), "{info}");
}

/// `aof-disable-auto-gc yes`: the files two rewrites replaced stay, named as history in the
/// manifest in Redis's order; `no` again removes them from the manifest and the disk — the
/// manifest byte for byte as Redis 7.2.6 writes it, beside it.
#[test]
fn aof_history_is_kept_and_removed_as_redis_keeps_it() {
    let mut manifests = Vec::new();
    for redis in [true, false] {
        let args = ["--appendonly", "yes", "--aof-disable-auto-gc", "yes", "--aof-use-rdb-preamble", "yes"];
        let s = if redis { start_redis(&args) } else { start_atoll(&args) };
        let mut c = RawConn::connect(s.port);
        let d = std::path::PathBuf::from(dir_of(&mut c)).join("appendonlydir");
        let manifest = || std::fs::read_to_string(d.join("appendonly.aof.manifest")).unwrap();
        for i in 0..2 {
            c.cmd(&[b"SET", b"k", i.to_string().as_bytes()]);
            c.cmd(&[b"BGREWRITEAOF"]);
            assert_eq!(wait_rewrite(&mut c), "ok", "{}", s.name);
        }
        let kept = manifest();
        for f in [
            "appendonly.aof.1.base.rdb",
            "appendonly.aof.2.base.rdb",
            "appendonly.aof.1.incr.aof",
            "appendonly.aof.2.incr.aof",
        ] {
            assert!(d.join(f).exists(), "{}: {f} is gone: {kept}", s.name);
        }
        assert_eq!(c.cmd(&[b"CONFIG", b"SET", b"aof-disable-auto-gc", b"no"]), b"+OK\r\n");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while d.join("appendonly.aof.1.base.rdb").exists() {
            assert!(std::time::Instant::now() < deadline, "{}: the history stays", s.name);
            std::thread::sleep(Duration::from_millis(20));
        }
        manifests.push((kept, manifest()));
    }
    assert_eq!(
        manifests[0].0,
        "file appendonly.aof.3.base.rdb seq 3 type b\nfile appendonly.aof.2.incr.aof seq 2 type h\nfile appendonly.aof.2.base.rdb seq 2 type h\nfile appendonly.aof.1.incr.aof seq 1 type h\nfile appendonly.aof.1.base.rdb seq 1 type h\nfile appendonly.aof.3.incr.aof seq 3 type i\n",
        "Redis 7.2.6's manifest"
    );
    assert_eq!(manifests[1], manifests[0], "Atoll's manifests (left) against Redis 7.2.6's");
}

/// DEBUG LOADAOF replaying a slow script (an EVAL kept verbatim in the AOF, as Redis's own
/// aof.tcl writes one): other clients get `-LOADING` while it runs — on every worker, the
/// loading one included — and the load ends with the script's write. Atoll's worker that ran
/// the load served its other connections from the script's hook and waited there for the load
/// to read more: the load was its own script, so the worker hung for good (found by Redis's
/// "EVAL timeout with slow verbatim Lua script from AOF"). Run beside Redis 7.2.6.
#[test]
fn a_slow_script_in_a_replayed_aof_answers_loading_as_redis() {
    let script = "redis.call('set',KEYS[1],'y'); for i=1,1500000 do redis.call('ping') end return 'ok'";
    for (name, atoll) in [("redis", false), ("atoll", true)] {
        let args = [
            "--appendonly",
            "yes",
            "--aof-use-rdb-preamble",
            "no",
            "--lua-time-limit",
            "1",
            "--enable-debug-command",
            "yes",
        ];
        let s = if atoll { start_atoll(&args) } else { start_redis(&args) };
        let mut c = RawConn::connect(s.port);
        let dir = dir_of(&mut c);
        let incr = std::fs::read_dir(std::path::Path::new(&dir).join("appendonlydir"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with(".incr.aof"))
            .expect("an incremental AOF file");
        let mut body = encode(&v(&["select", "9"]));
        body.extend(encode(&v(&["eval", script, "1", "x"])));
        std::fs::write(&incr, body).unwrap();
        // Connections on every worker (they are spread over the workers as they arrive).
        let mut others: Vec<RawConn> = (0..4).map(|_| RawConn::connect(s.port)).collect();
        c.send(&v(&["debug", "loadaof"]));
        let start = std::time::Instant::now();
        let mut loading = 0;
        while loading == 0 && start.elapsed() < Duration::from_secs(5) {
            for o in others.iter_mut() {
                o.send(&v(&["ping"]));
                let r = o.try_read_reply(Duration::from_secs(10)).unwrap_or_else(|| panic!("{name}: PING hung"));
                loading += r.starts_with(b"-LOADING") as usize;
            }
        }
        assert!(loading > 0, "{name}: no -LOADING while the AOF's slow script ran");
        // Every connection answers while the load goes on (none waits on the loading worker).
        for o in others.iter_mut() {
            o.send(&v(&["ping"]));
            let r = o.try_read_reply(Duration::from_secs(10)).unwrap_or_else(|| panic!("{name}: PING hung"));
            assert!(r == b"+PONG\r\n" || r.starts_with(b"-LOADING"), "{name}: {}", show(&r));
        }
        let r = c.try_read_reply(Duration::from_secs(60)).unwrap_or_else(|| panic!("{name}: DEBUG LOADAOF hung"));
        assert_eq!(show(&r), "+OK\\r\\n", "{name}");
        assert_eq!(c.cmd(&[b"select", b"9"]), b"+OK\r\n");
        assert_eq!(show(&c.cmd(&[b"get", b"x"])), "$1\\r\\ny\\r\\n", "{name}");
        assert_eq!(c.cmd(&[b"ping"]), b"+PONG\r\n", "{name}");
    }
}

fn info_field(c: &mut RawConn, field: &str) -> String {
    let info = String::from_utf8_lossy(&c.cmd(&[b"INFO", b"all"])).to_string();
    let at = format!("{field}:");
    info.lines().find_map(|l| l.strip_prefix(&at)).unwrap_or_else(|| panic!("no {field} in INFO")).trim().to_string()
}

/// AOF turned on at runtime while its first rewrite keeps failing (the rewrite's child killed
/// twice), as Redis's aof-multi-part "AOF will open a temporary INCR AOF …": each failed try
/// removes its temporary INCR file (one log line each), none uses up a file number, so the try
/// that succeeds names base 1 and incr 1; the data loads back whole, and DEBUG LOADAOF leaves
/// no change to save (`rdb_changes_since_last_save:0`). Run beside Redis 7.2.6. Atoll named
/// a numbered INCR file at every try and logged the removal only once (and counted the load as
/// changes).
#[test]
fn aof_turned_on_takes_a_fresh_temporary_file_for_each_try_as_redis() {
    for (name, atoll) in [("redis", false), ("atoll", true)] {
        let logs = std::env::temp_dir().join(format!("atoll-aof-temp-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&logs);
        std::fs::create_dir_all(&logs).unwrap();
        let log = logs.join("server.log");
        let args = [
            "--enable-debug-command",
            "yes",
            "--loglevel",
            "notice",
            "--logfile",
            log.to_str().unwrap(),
            "--aof-use-rdb-preamble",
            "yes",
        ];
        let s = if atoll { start_atoll(&args) } else { start_redis(&args) };
        let pid = s.child.id();
        let mut c = RawConn::connect(s.port);
        for i in 0..20 {
            assert_eq!(c.cmd(&[b"SET", format!("k{i}").as_bytes(), b"v"]), b"+OK\r\n");
        }
        let removals = || std::fs::read_to_string(&log).unwrap().matches("Removing the temp incr aof file").count();
        // A child that takes a second a key (20 s): it is killed long before.
        assert_eq!(c.cmd(&[b"CONFIG", b"SET", b"rdb-key-save-delay", b"1000000"]), b"+OK\r\n");
        assert_eq!(c.cmd(&[b"CONFIG", b"SET", b"appendonly", b"yes"]), b"+OK\r\n");
        for attempt in 1..=2 {
            let start = std::time::Instant::now();
            let child = loop {
                let kids = children_of(pid);
                if info_field(&mut c, "aof_rewrite_in_progress") == "1" && kids.len() == 1 {
                    break kids[0];
                }
                assert!(start.elapsed() < Duration::from_secs(10), "{name}: try {attempt} did not start");
                std::thread::sleep(Duration::from_millis(20));
            };
            // A write during the try: in its temporary file only.
            assert_eq!(c.cmd(&[b"INCR", b"during"]), format!(":{attempt}\r\n").into_bytes(), "{name}");
            if attempt == 2 {
                // The next try (a new child) writes at full speed.
                assert_eq!(c.cmd(&[b"CONFIG", b"SET", b"rdb-key-save-delay", b"0"]), b"+OK\r\n");
            }
            // SAFETY: a signal to the server's own child.
            unsafe { libc::kill(child as i32, libc::SIGKILL) };
            let start = std::time::Instant::now();
            while removals() < attempt {
                assert!(
                    start.elapsed() < Duration::from_secs(10),
                    "{name}: try {attempt}'s temporary file not removed"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            assert_eq!(removals(), attempt, "{name}");
        }
        let start = std::time::Instant::now();
        while info_field(&mut c, "aof_rewrite_in_progress") != "0"
            || info_field(&mut c, "aof_rewrite_scheduled") != "0"
            || info_field(&mut c, "aof_last_bgrewrite_status") != "ok"
        {
            assert!(start.elapsed() < Duration::from_secs(20), "{name}: no try succeeded");
            std::thread::sleep(Duration::from_millis(20));
        }
        let dir = std::path::Path::new(&dir_of(&mut c)).join("appendonlydir");
        let manifest = std::fs::read_to_string(dir.join("appendonly.aof.manifest")).unwrap();
        assert_eq!(
            manifest, "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n",
            "{name}"
        );
        assert!(!dir.join("temp-appendonly.aof.incr").exists(), "{name}: the temporary file is left");
        let before = digest(&mut c);
        assert_eq!(c.cmd(&[b"DEBUG", b"LOADAOF"]), b"+OK\r\n");
        assert_eq!(digest(&mut c), before, "{name}");
        assert_eq!(show(&c.cmd(&[b"GET", b"during"])), "$1\\r\\n2\\r\\n", "{name}");
        assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "0", "{name}");
    }
}
