//! Hostile clients: huge declared lengths, glob bombs, deeply nested script values, clients that
//! never read and clients that send half a huge request. Each time the server must go on
//! serving a well-behaved client, keep its memory bounded (INFO `used_memory`, measured) and
//! not panic. (Protocol framing errors are in `blackbox.rs`; 10k clients with 1 MB query
//! buffers each is a bench, `bench/`.)

mod common;

use common::*;
use std::time::{Duration, Instant};

fn used_memory(c: &mut RawConn) -> i64 {
    let info = String::from_utf8_lossy(&c.cmd(&[b"INFO", b"memory"])).into_owned();
    info.lines().find_map(|l| l.strip_prefix("used_memory:")).unwrap().trim().parse().unwrap()
}

/// Waits until `used_memory` is back under `limit` (buffers of closed clients are freed by
/// their workers shortly after).
fn settles_under(c: &mut RawConn, limit: i64) -> i64 {
    let start = Instant::now();
    loop {
        let u = used_memory(c);
        if u < limit || start.elapsed() > Duration::from_secs(5) {
            return u;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn huge_declared_lengths_allocate_nothing() {
    let s = start_atoll(&[]);
    let mut c = RawConn::connect(s.port);
    let before = used_memory(&mut c);
    // 200 connections each announce a million arguments and a 512 MB argument, then stall.
    let mut stalled = Vec::new();
    for _ in 0..200 {
        let mut h = RawConn::connect(s.port);
        h.send_raw(b"*1048576\r\n$536870912\r\nabc");
        stalled.push(h);
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n");
    let grown = used_memory(&mut c) - before;
    assert!(grown < 16 << 20, "200 announced 512 MB requests grew memory by {grown} bytes");
}

#[test]
fn glob_bombs_finish_quickly() {
    let r = start_redis(&[]);
    let a = start_atoll(&[]);
    let long = vec![b'a'; 5000];
    let bomb = format!("{}b", "*a".repeat(30)).into_bytes();
    for port in [r.port, a.port] {
        let mut c = RawConn::connect(port);
        c.cmd(&[b"SET", &long, b"1"]);
        let start = Instant::now();
        assert_eq!(c.cmd(&[b"KEYS", &bomb]), b"*0\r\n");
        let scan = c.cmd(&[b"SCAN", b"0", b"MATCH", &bomb, b"COUNT", b"1000"]);
        assert!(scan.ends_with(b"*0\r\n"), "{}", show(&scan));
        // A pattern subscriber against a long channel name.
        let mut sub = RawConn::connect(port);
        sub.cmd(&[b"PSUBSCRIBE", &bomb]);
        assert_eq!(c.cmd(&[b"PUBLISH", &long, b"m"]), b":0\r\n");
        // An ACL key pattern against a long key.
        assert_eq!(
            c.cmd(&[b"ACL", b"SETUSER", b"u", b"on", b"nopass", b"+@all", &[b"~".as_slice(), &bomb].concat()]),
            b"+OK\r\n"
        );
        let dry = c.cmd(&[b"ACL", b"DRYRUN", b"u", b"GET", &long]);
        assert!(dry.starts_with(b"$"), "{}", show(&dry));
        let took = start.elapsed();
        assert!(took < Duration::from_secs(1), "port {port}: glob bombs took {took:?}");
    }
}

#[test]
fn nested_script_values_are_refused_as_redis_refuses_them() {
    let r = start_redis(&[]);
    let a = start_atoll(&[]);
    let (mut rc, mut ac) = (RawConn::connect(r.port), RawConn::connect(a.port));
    for script in [
        "local t = {} local c = t for i=1,100000 do c[1] = {} c = c[1] end return t",
        "local t = {} local c = t for i=1,1000 do c[1] = {} c = c[1] end return cjson.encode(t)",
        "return cjson.decode(string.rep('[', 100000) .. string.rep(']', 100000))",
        "return cmsgpack.unpack(string.rep(string.char(0x91), 100000) .. string.char(0x01))",
    ] {
        let args: [&[u8]; 3] = [b"EVAL", script.as_bytes(), b"0"];
        let (x, y) = (rc.cmd(&args), ac.cmd(&args));
        // The same error (a reply nested as deep as the Lua stack allows comes first for the
        // first script: where the stack ends differs, the refusal does not).
        let last = |r: &[u8]| {
            let t = String::from_utf8_lossy(r).into_owned();
            t.trim_end().rsplit("\r\n").next().unwrap_or_default().to_string()
        };
        assert!(last(&x).starts_with('-'), "{script}: redis did not refuse");
        assert_eq!(last(&x), last(&y), "{script}");
    }
    assert_eq!(ac.cmd(&[b"PING"]), b"+PONG\r\n");
}

#[test]
fn a_client_that_never_reads_is_cut_off() {
    let s = start_atoll(&["--client-output-buffer-limit", "normal 4mb 0 0"]);
    let mut c = RawConn::connect(s.port);
    c.cmd(&[b"SET", b"big", &vec![b'x'; 1 << 20]]);
    let before = used_memory(&mut c);
    // Enough GETs of 1 MB to fill the kernel's socket buffers and then 4 MB of the server's.
    let mut greedy = RawConn::connect(s.port);
    assert_eq!(greedy.cmd(&[b"PING"]), b"+PONG\r\n");
    let one = encode(&[b"GET".to_vec(), b"big".to_vec()]);
    let mut closed = false;
    let mut sent = 0;
    for _ in 0..2000 {
        sent += 1;
        if std::io::Write::write_all(&mut greedy.stream, &one).is_err() {
            closed = true;
            break;
        }
        if c.cmd(&[b"CLIENT", b"LIST"]).windows(3).filter(|w| w == b"id=").count() < 2 {
            closed = true;
            break;
        }
    }
    // Either the output limit cut it off (it kept asking), or the server stopped reading it
    // while its replies wait: its memory stays bounded both ways.
    let grown = used_memory(&mut c) - before;
    println!("a client that never reads: closed {closed} after {sent} GETs of 1 MB; memory grew {grown} bytes");
    assert!(grown < 16 << 20, "a client that never reads grew memory by {grown} bytes");
    assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n");
    let after = settles_under(&mut c, before + (8 << 20));
    assert!(after < before + (8 << 20), "memory stayed {} bytes above", after - before);
}

#[test]
fn half_sent_huge_requests_are_bounded_by_the_query_buffer_limit() {
    let s = start_atoll(&["--client-query-buffer-limit", "1mb"]);
    let mut c = RawConn::connect(s.port);
    let before = used_memory(&mut c);
    let chunk = vec![b'x'; 64 << 10];
    let mut greedy = Vec::new();
    for _ in 0..50 {
        let mut h = RawConn::connect(s.port);
        assert_eq!(h.cmd(&[b"PING"]), b"+PONG\r\n");
        h.send_raw(b"*2\r\n$3\r\nGET\r\n$3000000\r\n");
        greedy.push(h);
    }
    // Each sends 2 MB of its 3 MB argument: over the 1 MB limit, each is closed.
    for _ in 0..32 {
        for h in greedy.iter_mut() {
            let _ = std::io::Write::write_all(&mut h.stream, &chunk);
        }
    }
    let start = Instant::now();
    assert!(greedy.len() == 50);
    while c.cmd(&[b"CLIENT", b"LIST"]).windows(3).filter(|w| w == b"id=").count() > 1 {
        assert!(start.elapsed() < Duration::from_secs(5), "clients over the query buffer limit stayed");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n");
    let after = settles_under(&mut c, before + (8 << 20));
    assert!(after < before + (8 << 20), "memory stayed {} bytes above", after - before);
}

/// Clients that leave big requests unfinished run no command, yet `maxmemory-clients` closes
/// them as their buffers grow (Redis checks every event-loop round, Atoll too), beside Redis.
/// Each buffer is the argument's declared size, not a doubled one.
#[test]
fn unfinished_big_requests_are_evicted_without_any_command() {
    for s in [start_redis(&["--maxmemory-clients", "16mb"]), start_atoll(&["--maxmemory-clients", "16mb"])] {
        let mut c = RawConn::connect(s.port);
        c.cmd(&[b"CLIENT", b"NO-EVICT", b"on"]);
        let mut greedy = Vec::new();
        for _ in 0..40 {
            let mut h = RawConn::connect(s.port);
            h.send_raw(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1048576\r\n");
            h.send_raw(&vec![b'x'; 1_000_000]);
            greedy.push(h);
        }
        // 40 MB held against a 16 MB limit: most go, without any command being run. Every
        // greedy client is accounted for first — listed or evicted — since a connection the
        // server has not taken in yet is not listed either.
        let start = Instant::now();
        let clients = |c: &mut RawConn| c.cmd(&[b"CLIENT", b"LIST"]).windows(3).filter(|w| w == b"id=").count();
        let evicted = |c: &mut RawConn| -> usize {
            let info = String::from_utf8_lossy(&c.cmd(&[b"INFO", b"stats"])).into_owned();
            info.lines().find_map(|l| l.strip_prefix("evicted_clients:")).unwrap().trim().parse().unwrap()
        };
        while clients(&mut c) > 18 || clients(&mut c) + evicted(&mut c) < 41 {
            assert!(start.elapsed() < Duration::from_secs(5), "{}: {} clients stayed", s.name, clients(&mut c));
            std::thread::sleep(Duration::from_millis(20));
        }
        let evicted = evicted(&mut c);
        assert!(evicted >= 23, "{}: evicted_clients {evicted}", s.name);
        assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n");
    }
}

/// Whether a client named `name` is in CLIENT LIST.
fn listed(c: &mut RawConn, name: &str) -> bool {
    show(&c.cmd(&[b"CLIENT", b"LIST"])).contains(&format!("name={name} "))
}

/// Replies over the normal class's hard limit are never sent: the client is closed at once,
/// as Redis checks the limit as it buffers each reply — one big LRANGE, a pipeline whose
/// replies add up, KEYS; a transaction runs whole first. Redis 7.2.6 and Atoll alike.
#[test]
fn replies_over_the_hard_limit_are_not_sent() {
    for s in [start_redis(&[]), start_atoll(&[])] {
        let mut c = RawConn::connect(s.port);
        assert_eq!(c.cmd(&[b"CONFIG", b"SET", b"client-output-buffer-limit", b"normal 100000 0 0"]), b"+OK\r\n");
        let item = vec![b'x'; 1000];
        for _ in 0..150 {
            c.cmd(&[b"RPUSH", b"list", &item]);
        }
        c.cmd(&[b"SET", b"big", &vec![b'y'; 10_000]]);
        // One LRANGE of 150 kB: no reply at all.
        let mut rd = RawConn::connect(s.port);
        assert_eq!(rd.cmd(&[b"CLIENT", b"SETNAME", b"big1"]), b"+OK\r\n");
        rd.send(&v(&["LRANGE", "list", "0", "-1"]));
        assert_eq!(rd.read_to_close(), b"", "port {}", s.port);
        assert!(!listed(&mut c, "big1"));
        // A pipeline of GETs of 10 kB, 150 kB in all, sent at once: no reply either.
        let mut rd = RawConn::connect(s.port);
        assert_eq!(rd.cmd(&[b"CLIENT", b"SETNAME", b"big2"]), b"+OK\r\n");
        let pipe: Vec<u8> = (0..15).flat_map(|_| encode(&v(&["GET", "big"]))).collect();
        rd.send_raw(&pipe);
        assert_eq!(rd.read_to_close(), b"", "port {}", s.port);
        // A transaction runs to its end, and its reply is not sent.
        let mut rd = RawConn::connect(s.port);
        assert_eq!(rd.cmd(&[b"MULTI"]), b"+OK\r\n");
        assert_eq!(rd.cmd(&[b"SET", b"k2", b"v2"]), b"+QUEUED\r\n");
        assert_eq!(rd.cmd(&[b"LRANGE", b"list", b"0", b"-1"]), b"+QUEUED\r\n");
        assert_eq!(rd.cmd(&[b"SET", b"k3", b"v3"]), b"+QUEUED\r\n");
        rd.send(&v(&["EXEC"]));
        assert_eq!(rd.read_to_close(), b"", "port {}", s.port);
        assert_eq!(c.cmd(&[b"MGET", b"k2", b"k3"]), b"*2\r\n$2\r\nv2\r\n$2\r\nv3\r\n");
        // KEYS over the limit.
        for i in 0..1000 {
            c.cmd(&[b"SET", format!("long-key-name-prefix-of-100-chars-{}-{i}", "-".repeat(66)).as_bytes(), b"1"]);
        }
        let mut rd = RawConn::connect(s.port);
        rd.send(&v(&["KEYS", "*"]));
        assert_eq!(rd.read_to_close(), b"", "port {}", s.port);
        // Under the limit, replies go out as ever.
        assert_eq!(c.cmd(&[b"GET", b"big"]).len(), 10_000 + 10);
    }
}

/// A subscriber that stops reading stays over the soft limit with no new message to check
/// it: it is still closed once the soft limit's seconds are up (Redis's clientsCron), and not
/// before.
#[test]
fn the_soft_limit_closes_a_reader_that_went_quiet() {
    for s in [start_redis(&[]), start_atoll(&[])] {
        let mut c = RawConn::connect(s.port);
        assert_eq!(c.cmd(&[b"CONFIG", b"SET", b"client-output-buffer-limit", b"pubsub 0 100000 1"]), b"+OK\r\n");
        let mut sub = RawConn::connect(s.port);
        assert_eq!(sub.cmd(&[b"CLIENT", b"SETNAME", b"quiet"]), b"+OK\r\n");
        sub.send(&v(&["SUBSCRIBE", "ch"]));
        let _ = sub.read_reply();
        // Publish until the server holds over 100 kB for it (its socket buffers full first).
        let msg = vec![b'x'; 1000];
        let start = Instant::now();
        loop {
            c.cmd(&[b"PUBLISH", b"ch", &msg]);
            let list = show(&c.cmd(&[b"CLIENT", b"LIST"]));
            let line = list
                .split('\n')
                .find(|l| l.contains("name=quiet "))
                .unwrap_or_else(|| panic!("port {}: closed before its output reached the soft limit", s.port));
            let omem: u64 = line.split("omem=").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
            if omem > 100_000 {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(20), "omem never grew past the soft limit");
        }
        // No more traffic. Not closed at once...
        let quiet = Instant::now();
        assert!(listed(&mut c, "quiet"), "port {}", s.port);
        // ...but within the soft limit's second, plus a cron's slack.
        while listed(&mut c, "quiet") {
            assert!(quiet.elapsed() < Duration::from_secs(4), "port {}: still connected", s.port);
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// HRANDFIELD, SRANDMEMBER and ZRANDMEMBER with a huge negative count stop as soon as the
/// reply breaks the output limit, as Redis's do: the client is closed within moments, and
/// the server never builds the gigabytes asked for.
#[test]
fn random_picks_with_a_huge_count_stop_at_the_output_limit() {
    for s in [start_redis(&[]), start_atoll(&[])] {
        let mut c = RawConn::connect(s.port);
        assert_eq!(c.cmd(&[b"CONFIG", b"SET", b"client-output-buffer-limit", b"normal 1000000 0 0"]), b"+OK\r\n");
        c.cmd(&[b"HSET", b"h", b"a", b"b"]);
        c.cmd(&[b"SADD", b"s", b"a", b"b"]);
        c.cmd(&[b"SADD", b"si", b"1", b"2"]);
        c.cmd(&[b"ZADD", b"z", b"1", b"a"]);
        let before = used_memory(&mut c);
        for argv in [
            v(&["HRANDFIELD", "h", "-999999999"]),
            v(&["HRANDFIELD", "h", "-999999999", "WITHVALUES"]),
            v(&["SRANDMEMBER", "s", "-999999999"]),
            v(&["SRANDMEMBER", "si", "-999999999"]),
            v(&["ZRANDMEMBER", "z", "-999999999", "WITHSCORES"]),
        ] {
            let start = Instant::now();
            let mut rd = RawConn::connect(s.port);
            rd.send(&argv);
            assert_eq!(rd.read_to_close(), b"", "port {}: {}", s.port, show(&argv.concat()));
            assert!(start.elapsed() < Duration::from_secs(3), "{}: {:?}", show(&argv.concat()), start.elapsed());
        }
        assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n");
        let after = settles_under(&mut c, before + (8 << 20));
        assert!(after < before + (8 << 20), "memory stayed {} bytes above", after - before);
    }
}

/// The `qbuf` field of CLIENT LIST while a big argument arrives counts that argument's bytes
/// only (Redis drops the request's parsed head from its query buffer at that point), and a
/// reader that stops taking big replies is evicted by `maxmemory-clients` before CLIENT LIST
/// can see it over the limit — Redis 7.2.6 and Atoll alike.
#[test]
fn client_memory_is_weighed_as_redis_weighs_it() {
    for s in [start_redis(&[]), start_atoll(&[])] {
        let mut c = RawConn::connect(s.port);
        let mut big = RawConn::connect(s.port);
        assert_eq!(big.cmd(&[b"CLIENT", b"SETNAME", b"qb"]), b"+OK\r\n");
        let n = 1 << 20;
        big.send_raw(format!("*1\r\n${n}\r\n").as_bytes());
        big.send_raw(&vec![b'v'; n]);
        let start = Instant::now();
        loop {
            let list = show(&c.cmd(&[b"CLIENT", b"LIST"]));
            let line = list.split('\n').find(|l| l.contains("name=qb ")).unwrap().to_string();
            let qbuf: usize = line.split(" qbuf=").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
            if qbuf == n {
                break;
            }
            assert!(qbuf < n, "port {}: qbuf {qbuf} for an argument of {n} bytes", s.port);
            assert!(start.elapsed() < Duration::from_secs(5), "port {}: qbuf stayed {qbuf}", s.port);
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(big);
        // A reader of 200 kB replies that never reads: gone before it is seen over 3 MB.
        assert_eq!(c.cmd(&[b"CONFIG", b"SET", b"maxmemory-clients", b"3000000"]), b"+OK\r\n");
        assert_eq!(c.cmd(&[b"CLIENT", b"NO-EVICT", b"on"]), b"+OK\r\n");
        c.cmd(&[b"SETRANGE", b"k", b"200000", b"v"]);
        let mut rd = RawConn::connect(s.port);
        assert_eq!(rd.cmd(&[b"CLIENT", b"SETNAME", b"slow"]), b"+OK\r\n");
        let get = encode(&v(&["GET", "k"]));
        let mut evicted = false;
        for _ in 0..500 {
            let list = show(&c.cmd(&[b"CLIENT", b"LIST"]));
            let Some(line) = list.split('\n').find(|l| l.contains("name=slow ")) else {
                evicted = true;
                break;
            };
            let mem: u64 = line.split("tot-mem=").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
            assert!(mem < 3_000_000, "port {}: a client seen at {mem} bytes", s.port);
            if std::io::Write::write_all(&mut rd.stream, &get).is_err() {
                evicted = true;
                break;
            }
        }
        assert!(evicted, "port {}: never evicted", s.port);
        c.cmd(&[b"CONFIG", b"SET", b"maxmemory-clients", b"0"]);
    }
}
