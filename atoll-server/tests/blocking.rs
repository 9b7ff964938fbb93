//! Blocking commands across worker threads: FIFO service, exactly-once delivery, timeouts,
//! CLIENT UNBLOCK, MULTI, and keys that change under a waiter.

mod common;
use common::*;
use std::time::{Duration, Instant};

fn blocked_clients(c: &mut RawConn) -> i64 {
    let info = c.cmd(&[b"INFO", b"clients"]);
    let s = String::from_utf8_lossy(&info).to_string();
    s.lines().find_map(|l| l.strip_prefix("blocked_clients:")).map(|v| v.trim().parse().unwrap()).unwrap()
}

fn wait_blocked(c: &mut RawConn, n: i64) {
    let start = Instant::now();
    while blocked_clients(c) != n {
        assert!(start.elapsed() < Duration::from_secs(10), "never reached {n} blocked clients");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn waiters_are_served_in_fifo_order() {
    let s = start_atoll(&["--threads", "2"]);
    let mut ctl = RawConn::connect(s.port);
    let mut waiters = Vec::new();
    for i in 0..3 {
        let mut w = RawConn::connect(s.port);
        w.send(&[b"BLPOP".to_vec(), b"q".to_vec(), b"0".to_vec()]);
        wait_blocked(&mut ctl, i + 1);
        waiters.push(w);
    }
    assert_eq!(ctl.cmd(&[b"RPUSH", b"q", b"a", b"b", b"c", b"d"]), b":4\r\n");
    for (w, v) in waiters.iter_mut().zip(["a", "b", "c"]) {
        assert_eq!(w.read_reply(), format!("*2\r\n$1\r\nq\r\n$1\r\n{v}\r\n").into_bytes());
    }
    assert_eq!(ctl.cmd(&[b"LRANGE", b"q", b"0", b"-1"]), b"*1\r\n$1\r\nd\r\n");
    assert_eq!(blocked_clients(&mut ctl), 0);
}

#[test]
fn every_element_is_delivered_exactly_once() {
    let s = start_atoll(&["--threads", "2"]);
    let port = s.port;
    const PER_PRODUCER: usize = 500;
    let consumers: Vec<_> = (0..6)
        .map(|_| {
            std::thread::spawn(move || {
                let mut c = RawConn::connect(port);
                let mut got = Vec::new();
                loop {
                    let r = c.cmd(&[b"BLPOP", b"jobs:a", b"jobs:b", b"1"]);
                    if r == b"*-1\r\n" {
                        return got;
                    }
                    let (_, elems) = split_aggregate(&r).unwrap();
                    got.push(String::from_utf8_lossy(&elems[1]).to_string());
                }
            })
        })
        .collect();
    let producers: Vec<_> = (0..4)
        .map(|p| {
            std::thread::spawn(move || {
                let mut c = RawConn::connect(port);
                for i in 0..PER_PRODUCER {
                    let key: &[u8] = if i % 2 == 0 { b"jobs:a" } else { b"jobs:b" };
                    let v = format!("{p}-{i}");
                    let r = c.cmd(&[b"RPUSH", key, v.as_bytes()]);
                    assert_eq!(r[0], b':');
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    let mut all: Vec<String> = Vec::new();
    for c in consumers {
        all.extend(c.join().unwrap());
    }
    let n = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), n, "an element was delivered twice");
    // Each bulk element value looks like "$len\r\np-i\r\n"; count distinct deliveries.
    assert_eq!(n, 4 * PER_PRODUCER, "elements lost");
}

#[test]
fn timeouts_unblock_and_multi() {
    let s = start_atoll(&[]);
    let mut c = RawConn::connect(s.port);
    let t = Instant::now();
    assert_eq!(c.cmd(&[b"BLPOP", b"empty", b"0.2"]), b"*-1\r\n");
    let el = t.elapsed();
    assert!(el >= Duration::from_millis(190) && el < Duration::from_secs(3), "{el:?}");
    assert_eq!(c.cmd(&[b"BLPOP", b"empty", b"-1"]), b"-ERR timeout is negative\r\n");
    assert_eq!(c.cmd(&[b"BLPOP", b"empty", b"abc"]), b"-ERR timeout is not a float or out of range\r\n");
    // RESP3 timeout reply.
    assert_eq!(c.cmd(&[b"HELLO", b"3"])[0], b'%');
    assert_eq!(c.cmd(&[b"BLPOP", b"empty", b"0.05"]), b"_\r\n");
    assert_eq!(c.cmd(&[b"HELLO", b"2"])[0], b'*');
    // Inside MULTI a blocking pop does not block.
    assert_eq!(c.cmd(&[b"MULTI"]), b"+OK\r\n");
    assert_eq!(c.cmd(&[b"BLPOP", b"empty", b"0"]), b"+QUEUED\r\n");
    assert_eq!(c.cmd(&[b"EXEC"]), b"*1\r\n*-1\r\n");
    // CLIENT UNBLOCK, both ways.
    let mut ctl = RawConn::connect(s.port);
    let id = c.cmd(&[b"CLIENT", b"ID"]);
    let id = &id[1..id.len() - 2];
    c.send(&[b"BLPOP".to_vec(), b"empty".to_vec(), b"0".to_vec()]);
    wait_blocked(&mut ctl, 1);
    assert_eq!(ctl.cmd(&[b"CLIENT", b"UNBLOCK", id, b"TIMEOUT"]), b":1\r\n");
    assert_eq!(c.read_reply(), b"*-1\r\n");
    c.send(&[b"BLPOP".to_vec(), b"empty".to_vec(), b"0".to_vec()]);
    wait_blocked(&mut ctl, 1);
    assert_eq!(ctl.cmd(&[b"CLIENT", b"UNBLOCK", id, b"ERROR"]), b":1\r\n");
    assert_eq!(c.read_reply(), b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n");
    assert_eq!(ctl.cmd(&[b"CLIENT", b"UNBLOCK", id]), b":0\r\n");
    // Commands pipelined behind a blocked one wait for it.
    c.send_raw(&[encode(&[b"BLPOP".to_vec(), b"p".to_vec(), b"0".to_vec()]), encode(&[b"PING".to_vec()])].concat());
    wait_blocked(&mut ctl, 1);
    ctl.cmd(&[b"RPUSH", b"p", b"x"]);
    assert_eq!(c.read_reply(), b"*2\r\n$1\r\np\r\n$1\r\nx\r\n");
    assert_eq!(c.read_reply(), b"+PONG\r\n");
}

#[test]
fn waiters_follow_key_changes() {
    let s = start_atoll(&["--threads", "2"]);
    let mut ctl = RawConn::connect(s.port);
    let mut w = RawConn::connect(s.port);
    w.send(&[b"BLPOP".to_vec(), b"k".to_vec(), b"0".to_vec()]);
    wait_blocked(&mut ctl, 1);
    // Another type under the key: the waiter keeps waiting.
    assert_eq!(ctl.cmd(&[b"SET", b"k", b"str"]), b"+OK\r\n");
    assert_eq!(ctl.cmd(&[b"DEL", b"k"]), b":1\r\n");
    assert_eq!(blocked_clients(&mut ctl), 1);
    // A list renamed onto the key serves it.
    assert_eq!(ctl.cmd(&[b"RPUSH", b"other", b"v"]), b":1\r\n");
    assert_eq!(ctl.cmd(&[b"RENAME", b"other", b"k"]), b"+OK\r\n");
    assert_eq!(w.read_reply(), b"*2\r\n$1\r\nk\r\n$1\r\nv\r\n");
    assert_eq!(ctl.cmd(&[b"EXISTS", b"k"]), b":0\r\n");
    // A waiter that disconnects takes nothing with it.
    let mut gone = RawConn::connect(s.port);
    gone.send(&[b"BLPOP".to_vec(), b"k2".to_vec(), b"0".to_vec()]);
    wait_blocked(&mut ctl, 1);
    drop(gone);
    wait_blocked(&mut ctl, 0);
    assert_eq!(ctl.cmd(&[b"RPUSH", b"k2", b"z"]), b":1\r\n");
    assert_eq!(ctl.cmd(&[b"LLEN", b"k2"]), b":1\r\n");
    // A transaction's pushes are served after EXEC, from its final state.
    w.send(&[b"BLPOP".to_vec(), b"t".to_vec(), b"0".to_vec()]);
    wait_blocked(&mut ctl, 1);
    ctl.cmd(&[b"MULTI"]);
    ctl.cmd(&[b"RPUSH", b"t", b"1"]);
    ctl.cmd(&[b"RPUSH", b"t", b"2"]);
    ctl.cmd(&[b"LPOP", b"t"]);
    assert_eq!(ctl.cmd(&[b"EXEC"]), b"*3\r\n:1\r\n:2\r\n$1\r\n1\r\n");
    assert_eq!(w.read_reply(), b"*2\r\n$1\r\nt\r\n$1\r\n2\r\n");
}

#[test]
fn blmove_across_shards_is_served() {
    let s = start_atoll(&["--threads", "2"]);
    // Source and destination in different shards, destination in a lower one and a higher one.
    let src = "src:list";
    for dst in ["dst:a", "dst:zz", "dst:q"] {
        assert_ne!(atoll::engine::slot::key_shard(src.as_bytes()), atoll::engine::slot::key_shard(dst.as_bytes()));
        let mut ctl = RawConn::connect(s.port);
        let mut w = RawConn::connect(s.port);
        w.send(&[b"BLMOVE".to_vec(), src.into(), dst.into(), b"LEFT".to_vec(), b"RIGHT".to_vec(), b"0".to_vec()]);
        wait_blocked(&mut ctl, 1);
        assert_eq!(ctl.cmd(&[b"RPUSH", src.as_bytes(), b"x"]), b":1\r\n");
        assert_eq!(w.read_reply(), b"$1\r\nx\r\n");
        assert_eq!(ctl.cmd(&[b"LRANGE", dst.as_bytes(), b"0", b"-1"]), b"*1\r\n$1\r\nx\r\n");
        assert_eq!(ctl.cmd(&[b"EXISTS", src.as_bytes()]), b":0\r\n");
    }
}

#[test]
fn sorted_set_and_stream_waiters() {
    let s = start_atoll(&["--threads", "2"]);
    let mut ctl = RawConn::connect(s.port);
    // BZPOPMIN is served by ZADD.
    let mut w = RawConn::connect(s.port);
    w.send(&[b"BZPOPMIN".to_vec(), b"z".to_vec(), b"0".to_vec()]);
    wait_blocked(&mut ctl, 1);
    assert_eq!(ctl.cmd(&[b"ZADD", b"z", b"2", b"b", b"1", b"a"]), b":2\r\n");
    assert_eq!(w.read_reply(), b"*3\r\n$1\r\nz\r\n$1\r\na\r\n$1\r\n1\r\n");
    // Two XREAD BLOCK `$` readers both see the entries added after they blocked.
    let mut r1 = RawConn::connect(s.port);
    let mut r2 = RawConn::connect(s.port);
    assert_eq!(ctl.cmd(&[b"XADD", b"st", b"1-1", b"f", b"old"]), b"$3\r\n1-1\r\n");
    for r in [&mut r1, &mut r2] {
        r.send(&[
            b"XREAD".to_vec(),
            b"BLOCK".to_vec(),
            b"0".to_vec(),
            b"STREAMS".to_vec(),
            b"st".to_vec(),
            b"$".to_vec(),
        ]);
    }
    wait_blocked(&mut ctl, 2);
    assert_eq!(ctl.cmd(&[b"XADD", b"st", b"2-1", b"f", b"new"]), b"$3\r\n2-1\r\n");
    let expected = b"*1\r\n*2\r\n$2\r\nst\r\n*1\r\n*2\r\n$3\r\n2-1\r\n*2\r\n$1\r\nf\r\n$3\r\nnew\r\n".to_vec();
    assert_eq!(r1.read_reply(), expected);
    assert_eq!(r2.read_reply(), expected);
    // XREAD BLOCK times out with a null array.
    assert_eq!(r1.cmd(&[b"XREAD", b"BLOCK", b"50", b"STREAMS", b"st", b"$"]), b"*-1\r\n");
    // A blocked XREADGROUP whose group is destroyed gets an error (7.2), not a hang.
    assert_eq!(ctl.cmd(&[b"XGROUP", b"CREATE", b"st", b"g", b"$"]), b"+OK\r\n");
    r2.send(&[
        b"XREADGROUP".to_vec(),
        b"GROUP".to_vec(),
        b"g".to_vec(),
        b"c".to_vec(),
        b"BLOCK".to_vec(),
        b"0".to_vec(),
        b"STREAMS".to_vec(),
        b"st".to_vec(),
        b">".to_vec(),
    ]);
    wait_blocked(&mut ctl, 1);
    assert_eq!(ctl.cmd(&[b"DEL", b"st"]), b":1\r\n");
    let r = r2.read_reply();
    assert!(r.starts_with(b"-NOGROUP") || r.starts_with(b"-UNBLOCKED"), "{}", show(&r));
    assert_eq!(blocked_clients(&mut ctl), 0);
}

#[test]
fn move_and_swapdb_wake_waiters_in_other_databases() {
    let s = start_atoll(&["--threads", "2"]);
    let mut ctl = RawConn::connect(s.port);
    // A waiter in db 1; a list MOVEd there from db 0 serves it.
    let mut w = RawConn::connect(s.port);
    assert_eq!(w.cmd(&[b"SELECT", b"1"]), b"+OK\r\n");
    w.send(&[b"BLPOP".to_vec(), b"mv".to_vec(), b"0".to_vec()]);
    wait_blocked(&mut ctl, 1);
    assert_eq!(ctl.cmd(&[b"RPUSH", b"mv", b"x"]), b":1\r\n");
    assert_eq!(ctl.cmd(&[b"MOVE", b"mv", b"1"]), b":1\r\n");
    assert_eq!(w.read_reply(), b"*2\r\n$2\r\nmv\r\n$1\r\nx\r\n");
    // A waiter in db 1; SWAPDB brings a list under its key.
    w.send(&[b"BLPOP".to_vec(), b"sw".to_vec(), b"0".to_vec()]);
    wait_blocked(&mut ctl, 1);
    assert_eq!(ctl.cmd(&[b"SELECT", b"2"]), b"+OK\r\n");
    assert_eq!(ctl.cmd(&[b"RPUSH", b"sw", b"y"]), b":1\r\n");
    assert_eq!(ctl.cmd(&[b"SWAPDB", b"1", b"2"]), b"+OK\r\n");
    assert_eq!(w.read_reply(), b"*2\r\n$2\r\nsw\r\n$1\r\ny\r\n");
    assert_eq!(blocked_clients(&mut ctl), 0);
}

/// A client blocked in XREADGROUP whose stream is deleted, overwritten, flushed or swapped away
/// gets the command's error at once (Redis 7.2), on both servers alike; a blocked XREAD keeps
/// waiting and is served by the next stream under that name.
#[test]
fn blocked_xreadgroup_learns_its_stream_is_gone_as_redis_does() {
    type Step = &'static [&'static [&'static str]];
    let cases: &[(&str, Step)] = &[
        ("DEL", &[&["DEL", "s"]]),
        ("SET over it", &[&["SET", "s", "v"]]),
        ("MULTI DEL SADD", &[&["MULTI"], &["DEL", "s"], &["SADD", "s", "e"], &["EXEC"]]),
        ("FLUSHALL", &[&["FLUSHALL"]]),
        ("FLUSHDB", &[&["FLUSHDB"]]),
        ("SWAPDB to nothing", &[&["SWAPDB", "0", "4"]]),
    ];
    let r = start_redis(&[]);
    let a = start_atoll(&["--threads", "2"]);
    for (what, steps) in cases {
        let mut replies = Vec::new();
        for port in [r.port, a.port] {
            let mut ctl = RawConn::connect(port);
            ctl.cmd(&[b"FLUSHALL"]);
            ctl.cmd(&[b"XADD", b"s", b"666", b"f", b"v"]);
            ctl.cmd(&[b"XGROUP", b"CREATE", b"s", b"g", b"$"]);
            let mut w = RawConn::connect(port);
            let argv: [&[u8]; 9] = [b"XREADGROUP", b"GROUP", b"g", b"alice", b"BLOCK", b"0", b"STREAMS", b"s", b">"];
            w.send(&argv.map(|a| a.to_vec()));
            wait_blocked(&mut ctl, 1);
            for step in steps.iter() {
                let argv: Vec<&[u8]> = step.iter().map(|s| s.as_bytes()).collect();
                ctl.cmd(&argv);
            }
            w.stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            replies.push(w.read_reply());
        }
        assert_eq!(show(&replies[1]), show(&replies[0]), "{what}");
        assert!(replies[0].starts_with(b"-"), "{what}: {}", show(&replies[0]));
    }
    // XREAD (no group) keeps waiting through a SET and a DEL, and reads the new stream.
    for port in [r.port, a.port] {
        let mut ctl = RawConn::connect(port);
        ctl.cmd(&[b"FLUSHALL"]);
        ctl.cmd(&[b"XADD", b"s", b"666", b"f", b"v"]);
        let mut w = RawConn::connect(port);
        let argv: [&[u8]; 6] = [b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$"];
        w.send(&argv.map(|a| a.to_vec()));
        wait_blocked(&mut ctl, 1);
        ctl.cmd(&[b"SET", b"s", b"v"]);
        ctl.cmd(&[b"DEL", b"s"]);
        ctl.cmd(&[b"XADD", b"s", b"667", b"f", b"v"]);
        let got = w.read_reply();
        assert!(show(&got).contains("667-0"), "{}", show(&got));
    }
}

/// A CLIENT PAUSE ALL that has run out leaves nothing behind: a WRITE pause after it holds
/// back writes only, so CLIENT PAUSE and INFO still answer (Redis resets an ended pause; its
/// unit/pause tests hung here).
#[test]
fn an_ended_pause_all_does_not_widen_the_next_write_pause() {
    let r = start_redis(&[]);
    let a = start_atoll(&[]);
    for port in [r.port, a.port] {
        let mut ctl = RawConn::connect(port);
        // Timed from before the pause is asked for: it ends 200 ms after the server took it.
        let start = Instant::now();
        assert_eq!(ctl.cmd(&[b"CLIENT", b"PAUSE", b"200", b"ALL"]), b"+OK\r\n");
        // Under ALL every command waits for its end, CLIENT PAUSE too.
        assert_eq!(ctl.cmd(&[b"CLIENT", b"PAUSE", b"20", b"WRITE"]), b"+OK\r\n");
        assert!(start.elapsed() >= Duration::from_millis(190), "port {port}: {:?}", start.elapsed());
        let mut reader = RawConn::connect(port);
        // The ALL pause is over: a new WRITE pause holds back writes only.
        assert_eq!(ctl.cmd(&[b"CLIENT", b"PAUSE", b"60000", b"WRITE"]), b"+OK\r\n");
        assert_eq!(ctl.cmd(&[b"CLIENT", b"PAUSE", b"10", b"WRITE"]), b"+OK\r\n");
        assert_eq!(reader.cmd(&[b"GET", b"k"]), b"$-1\r\n");
        let mut writer = RawConn::connect(port);
        writer.send(&[b"SET".to_vec(), b"k".to_vec(), b"v".to_vec()]);
        wait_blocked(&mut ctl, 1);
        // The shorter second pause did not end the first.
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(blocked_clients(&mut ctl), 1, "port {port}");
        assert_eq!(ctl.cmd(&[b"CLIENT", b"UNPAUSE"]), b"+OK\r\n");
        assert_eq!(writer.read_reply(), b"+OK\r\n");
    }
}

/// Under CLIENT PAUSE WRITE a script that declares `no-writes` runs (EVAL, EVALSHA, FCALL, and
/// inside MULTI), while one without a shebang, or one that may write, waits — on Redis and
/// Atoll alike (Redis takes EVAL's and FCALL's flags from the script).
#[test]
fn a_write_pause_lets_no_writes_scripts_run() {
    let r = start_redis(&[]);
    let a = start_atoll(&[]);
    let ro = b"#!lua flags=no-writes\nreturn 'ro'".to_vec();
    let lib = b"#!lua name=plib\nredis.register_function{function_name='pf', callback=function() return 'f' end, flags={'no-writes'}}\nredis.register_function('pw', function() return 'w' end)".to_vec();
    for port in [r.port, a.port] {
        let mut ctl = RawConn::connect(port);
        assert!(ctl.cmd(&[b"FUNCTION", b"LOAD", b"REPLACE", &lib]).starts_with(b"$4"));
        let sha = ctl.cmd(&[b"SCRIPT", b"LOAD", &ro]);
        let sha = sha[5..45].to_vec();
        assert_eq!(ctl.cmd(&[b"CLIENT", b"PAUSE", b"100000", b"WRITE"]), b"+OK\r\n");
        let mut c = RawConn::connect(port);
        assert_eq!(c.cmd(&[b"EVAL", &ro, b"0"]), b"$2\r\nro\r\n", "port {port}");
        assert_eq!(c.cmd(&[b"EVALSHA", &sha, b"0"]), b"$2\r\nro\r\n");
        assert_eq!(c.cmd(&[b"FCALL", b"pf", b"0"]), b"$1\r\nf\r\n");
        assert_eq!(c.cmd(&[b"MULTI"]), b"+OK\r\n");
        assert_eq!(c.cmd(&[b"EVAL", &ro, b"0"]), b"+QUEUED\r\n");
        assert_eq!(c.cmd(&[b"EXEC"]), b"*1\r\n$2\r\nro\r\n");
        assert_eq!(blocked_clients(&mut ctl), 0);
        // These may write: they wait for the pause to end.
        let waiting: Vec<Vec<Vec<u8>>> = vec![
            vec![b"EVAL".to_vec(), b"return 1".to_vec(), b"0".to_vec()],
            vec![b"EVAL".to_vec(), b"#!lua\nreturn 2".to_vec(), b"0".to_vec()],
            vec![b"FCALL".to_vec(), b"pw".to_vec(), b"0".to_vec()],
        ];
        let mut held: Vec<RawConn> = waiting.iter().map(|_| RawConn::connect(port)).collect();
        for (w, argv) in held.iter_mut().zip(&waiting) {
            w.send(argv);
        }
        wait_blocked(&mut ctl, 3);
        assert_eq!(ctl.cmd(&[b"CLIENT", b"UNPAUSE"]), b"+OK\r\n");
        assert_eq!(held[0].read_reply(), b":1\r\n");
        assert_eq!(held[1].read_reply(), b":2\r\n");
        assert_eq!(held[2].read_reply(), b"$1\r\nw\r\n");
    }
}

/// CLIENT PAUSE WRITE holds writes from every worker until the pause ends or CLIENT UNPAUSE,
/// lets reads through, and keeps expired keys (read as missing) until it is over; the same
/// session behaves alike on Redis 7.2.6.
#[test]
fn client_pause_holds_writes_across_workers() {
    let r = start_redis(&[]);
    let a = start_atoll(&["--threads", "2"]);
    for port in [r.port, a.port] {
        let mut ctl = RawConn::connect(port);
        assert_eq!(ctl.cmd(&[b"SET", b"k", b"v", b"PX", b"100"]), b"+OK\r\n");
        assert_eq!(ctl.cmd(&[b"CLIENT", b"PAUSE", b"100000", b"WRITE"]), b"+OK\r\n");
        // Writers on other connections (other workers) wait; readers do not.
        let mut writers: Vec<RawConn> = (0..4).map(|_| RawConn::connect(port)).collect();
        for (i, w) in writers.iter_mut().enumerate() {
            w.send(&[b"SET".to_vec(), format!("w{i}").into_bytes(), b"1".to_vec()]);
        }
        let mut reader = RawConn::connect(port);
        assert_eq!(reader.cmd(&[b"GET", b"w0"]), b"$-1\r\n");
        wait_blocked(&mut ctl, 4);
        std::thread::sleep(Duration::from_millis(150));
        // k is past its time: missing to readers, but not deleted while writes are paused.
        assert_eq!(reader.cmd(&[b"GET", b"k"]), b"$-1\r\n");
        assert_eq!(reader.cmd(&[b"DBSIZE"]), b":1\r\n", "port {port}");
        assert_eq!(ctl.cmd(&[b"CLIENT", b"UNPAUSE"]), b"+OK\r\n");
        for w in writers.iter_mut() {
            assert_eq!(w.read_reply(), b"+OK\r\n");
        }
        assert_eq!(reader.cmd(&[b"EXISTS", b"w0", b"w1", b"w2", b"w3"]), b":4\r\n");
        // A pause that ends by itself releases its writers too.
        let start = Instant::now();
        assert_eq!(ctl.cmd(&[b"CLIENT", b"PAUSE", b"200", b"WRITE"]), b"+OK\r\n");
        assert_eq!(reader.cmd(&[b"SET", b"late", b"1"]), b"+OK\r\n");
        assert!(start.elapsed() >= Duration::from_millis(190), "{:?}", start.elapsed());
        for bad in [
            &[&b"CLIENT"[..], b"PAUSE", b"abc"][..],
            &[b"CLIENT", b"PAUSE", b"-1"],
            &[b"CLIENT", b"PAUSE", b"10", b"foo"],
        ] {
            assert!(ctl.cmd(bad).starts_with(b"-ERR"));
        }
    }
}

/// INFO `clients_in_timeout_table` counts the blocked clients that have a timeout (a BLPOP
/// with 0 waits forever and is not counted), as Redis 7.2.6 does.
#[test]
fn clients_in_timeout_table_counts_waits_with_a_timeout() {
    for s in [start_redis(&[]), start_atoll(&[])] {
        let mut ctl = RawConn::connect(s.port);
        let field = |c: &mut RawConn| -> i64 {
            let info = String::from_utf8_lossy(&c.cmd(&[b"INFO", b"clients"])).to_string();
            info.lines().find_map(|l| l.strip_prefix("clients_in_timeout_table:")).unwrap().trim().parse().unwrap()
        };
        assert_eq!(field(&mut ctl), 0);
        let mut forever = RawConn::connect(s.port);
        forever.send(&[b"BLPOP".to_vec(), b"q".to_vec(), b"0".to_vec()]);
        wait_blocked(&mut ctl, 1);
        assert_eq!(field(&mut ctl), 0);
        let mut timed = RawConn::connect(s.port);
        timed.send(&[b"BRPOP".to_vec(), b"q".to_vec(), b"30".to_vec()]);
        let mut waits = RawConn::connect(s.port);
        // Long enough to be counted below however slowly this thread runs.
        waits.send(&[b"BZPOPMIN".to_vec(), b"z".to_vec(), b"3".to_vec()]);
        wait_blocked(&mut ctl, 3);
        assert_eq!(field(&mut ctl), 2);
        // One times out, one is served: neither is counted any more.
        assert_eq!(waits.read_reply(), b"*-1\r\n");
        assert_eq!(ctl.cmd(&[b"RPUSH", b"q", b"a", b"b"]), b":2\r\n");
        forever.read_reply();
        timed.read_reply();
        wait_blocked(&mut ctl, 0);
        assert_eq!(field(&mut ctl), 0);
    }
}

/// What clients sent before an INFO or a CLIENT LIST is in its answer, whichever worker thread
/// holds their connections: two clients send a blocking command (not waiting for anything),
/// and INFO at once counts them blocked, CLIENT LIST at once shows their command — as Redis's
/// one thread takes every ready socket before the next (its own tests count on it).
#[test]
fn info_and_client_list_see_what_other_clients_already_sent() {
    let s = start_atoll(&["--threads", "4"]);
    let mut ctl = RawConn::connect(s.port);
    let mut waiting = Vec::new();
    for round in 1..=20 {
        for _ in 0..2 {
            let mut w = RawConn::connect(s.port);
            // Served once, so the connection is its worker's (as the test framework's clients
            // are, which SELECT first).
            assert_eq!(w.cmd(&[b"PING"]), b"+PONG\r\n");
            // A request that parks the client until it is killed: the reply never comes.
            w.send(&[b"BLPOP".to_vec(), format!("nothing:{round}").into_bytes(), b"0".to_vec()]);
            waiting.push(w);
        }
        assert_eq!(blocked_clients(&mut ctl), 2 * round, "round {round}");
        let list = String::from_utf8_lossy(&ctl.cmd(&[b"CLIENT", b"LIST"])).to_string();
        assert_eq!(list.matches("cmd=blpop").count() as i64, 2 * round, "round {round}");
    }
}
