//! maxmemory and eviction, side by side with Redis 7.2.6 (`common::redis_bin`): the same
//! workload against both, memory measured from INFO (not assumed), the right keys evicted per
//! policy, Redis's OOM replies where nothing can be evicted.

mod common;

use common::*;

fn info_field(c: &mut RawConn, section: &str, field: &str) -> i64 {
    let info = String::from_utf8_lossy(&c.cmd(&[b"INFO", section.as_bytes()])).into_owned();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.trim().parse::<i64>().unwrap()))
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
}

/// Sends `n` commands made by `f` pipelined and reads every reply.
fn pipeline(c: &mut RawConn, n: usize, f: impl Fn(usize) -> Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut buf = Vec::new();
    for i in 0..n {
        buf.extend(encode(&f(i)));
    }
    c.send_raw(&buf);
    (0..n).map(|_| c.read_reply()).collect()
}

fn key(prefix: &str, i: usize) -> Vec<u8> {
    format!("{prefix}:{i:06}").into_bytes()
}

/// Sets maxmemory to what the server uses now plus `headroom` bytes; returns the limit.
fn limit_at(c: &mut RawConn, headroom: i64, policy: &str) -> i64 {
    let used = info_field(c, "memory", "used_memory");
    let limit = used + headroom;
    assert_eq!(c.cmd(&[b"CONFIG", b"SET", b"maxmemory-policy", policy.as_bytes()]), b"+OK\r\n");
    assert_eq!(c.cmd(&[b"CONFIG", b"SET", b"maxmemory", limit.to_string().as_bytes()]), b"+OK\r\n");
    limit
}

/// Hot keys are read between batches of new keys that push memory past the limit; the policy
/// must evict the others. The LRU clock ticks in seconds (as Redis's), so rounds are a second
/// apart. Returns (hot keys surviving of 500, evicted_keys, peak used/limit).
fn hot_keys_survive(port: u16, policy: &str) -> (usize, i64, f64) {
    let mut c = RawConn::connect(port);
    let value = vec![b'v'; 200];
    pipeline(&mut c, 500, |i| vec![b"SET".to_vec(), key("hot", i), value.clone()]);
    let limit = limit_at(&mut c, 2 << 20, policy);
    let mut peak: f64 = 0.0;
    for round in 0..4 {
        std::thread::sleep(std::time::Duration::from_millis(1100));
        // Read the hot keys (several times, so LFU counts them up too).
        for _ in 0..3 {
            pipeline(&mut c, 500, |i| vec![b"GET".to_vec(), key("hot", i)]);
        }
        let replies = pipeline(&mut c, 4000, |i| vec![b"SET".to_vec(), key("cold", round * 4000 + i), value.clone()]);
        assert!(replies.iter().all(|r| r == b"+OK\r\n"), "{}", show(&replies[0]));
        peak = peak.max(info_field(&mut c, "memory", "used_memory") as f64 / limit as f64);
    }
    let hot = pipeline(&mut c, 500, |i| vec![b"EXISTS".to_vec(), key("hot", i)]);
    let alive = hot.iter().filter(|r| *r == b":1\r\n").count();
    (alive, info_field(&mut c, "stats", "evicted_keys"), peak)
}

#[test]
fn allkeys_lru_and_lfu_keep_the_keys_in_use_like_redis() {
    for policy in ["allkeys-lru", "allkeys-lfu"] {
        let r = start_redis(&[]);
        let a = start_atoll(&[]);
        let (r_alive, r_evicted, r_peak) = hot_keys_survive(r.port, policy);
        let (a_alive, a_evicted, a_peak) = hot_keys_survive(a.port, policy);
        println!(
            "{policy}: redis keeps {r_alive}/500 hot keys, evicts {r_evicted}, peak {r_peak:.3} of maxmemory; atoll {a_alive}/500, {a_evicted}, {a_peak:.3}"
        );
        // The premise, on the oracle: the load does evict, and Redis keeps the keys in use.
        assert!(r_evicted > 3000, "{policy}: redis evicted {r_evicted}");
        assert!(r_alive >= 475, "{policy}: redis kept {r_alive}/500 hot keys");
        assert!(r_peak < 1.05, "{policy}: redis's memory reached {r_peak:.3} of maxmemory");
        assert!(a_evicted > 3000, "{policy}: atoll evicted {a_evicted}");
        assert!(a_alive >= 475, "{policy}: atoll kept {a_alive}/500 hot keys (redis {r_alive})");
        assert!(a_peak < 1.05, "{policy}: atoll's memory reached {a_peak:.3} of maxmemory");
    }
}

#[test]
fn volatile_policies_evict_only_keys_with_a_ttl_and_ttl_picks_the_soonest() {
    for (policy, expect_oom) in [("volatile-lru", true), ("volatile-ttl", true), ("volatile-random", true)] {
        let a = start_atoll(&[]);
        let mut c = RawConn::connect(a.port);
        let value = vec![b'v'; 200];
        // Persistent keys, then keys with TTLs (later ones expire later).
        pipeline(&mut c, 2000, |i| vec![b"SET".to_vec(), key("keep", i), value.clone()]);
        pipeline(&mut c, 2000, |i| {
            vec![b"SET".to_vec(), key("ttl", i), value.clone(), b"EX".to_vec(), (10_000 + i).to_string().into_bytes()]
        });
        limit_at(&mut c, -(200 << 10), policy);
        // Writing forces evictions of TTL keys only; once they are gone, OOM.
        let mut oom = false;
        for i in 0..20_000 {
            let r = c.cmd(&[b"SET", &key("new", i), &value]);
            if r.starts_with(b"-OOM") {
                assert_eq!(show(&r), show(b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"));
                oom = true;
                break;
            }
        }
        assert_eq!(oom, expect_oom, "{policy}");
        let kept = pipeline(&mut c, 2000, |i| vec![b"EXISTS".to_vec(), key("keep", i)]);
        assert!(kept.iter().all(|r| r == b":1\r\n"), "{policy} evicted a key without TTL");
        assert!(info_field(&mut c, "stats", "evicted_keys") > 0, "{policy}");
    }
    // volatile-ttl: with room for most, the soonest-expiring keys go first.
    let a = start_atoll(&[]);
    let mut c = RawConn::connect(a.port);
    let value = vec![b'v'; 200];
    pipeline(&mut c, 4000, |i| {
        vec![b"SET".to_vec(), key("ttl", i), value.clone(), b"EX".to_vec(), (10_000 + i).to_string().into_bytes()]
    });
    limit_at(&mut c, -(300 << 10), "volatile-ttl");
    c.cmd(&[b"SET", b"trigger", b"x"]);
    let evicted = info_field(&mut c, "stats", "evicted_keys") as usize;
    assert!(evicted > 100, "{evicted}");
    let early = pipeline(&mut c, 1000, |i| vec![b"EXISTS".to_vec(), key("ttl", i)]);
    let late = pipeline(&mut c, 1000, |i| vec![b"EXISTS".to_vec(), key("ttl", 3000 + i)]);
    let gone = |v: &[Vec<u8>]| v.iter().filter(|r| *r == b":0\r\n").count();
    assert!(gone(&early) > 2 * gone(&late), "early gone {} late gone {}", gone(&early), gone(&late));
}

#[test]
fn oom_replies_match_redis() {
    let r = start_redis(&[]);
    let a = start_atoll(&[]);
    let (mut rc, mut ac) = (RawConn::connect(r.port), RawConn::connect(a.port));
    let value = vec![b'v'; 1000];
    for c in [&mut rc, &mut ac] {
        pipeline(c, 3000, |i| vec![b"SET".to_vec(), key("k", i), value.clone()]);
        limit_at(c, -(1 << 20), "noeviction");
    }
    let both = |rc: &mut RawConn, ac: &mut RawConn, args: &[&[u8]]| {
        let (x, y) = (rc.cmd(args), ac.cmd(args));
        assert_eq!(
            show(&x),
            show(&y),
            "reply to {:?}",
            args.iter().map(|a| String::from_utf8_lossy(a)).collect::<Vec<_>>()
        );
        x
    };
    assert!(both(&mut rc, &mut ac, &[b"SET", b"x", b"1"]).starts_with(b"-OOM"));
    both(&mut rc, &mut ac, &[b"GET", b"k:000001"]);
    both(&mut rc, &mut ac, &[b"LPUSH", b"l", b"1"]);
    both(&mut rc, &mut ac, &[b"INCR", b"k:000002"]);
    both(&mut rc, &mut ac, &[b"EVAL", b"return redis.call('set', 'y', '1')", b"0"]);
    both(&mut rc, &mut ac, &[b"EVAL", b"return redis.call('get', 'k:000001')", b"0"]);
    both(&mut rc, &mut ac, &[b"EVAL", b"#!lua\nreturn redis.call('get', 'k:000001')", b"0"]);
    both(&mut rc, &mut ac, &[b"EVAL", b"#!lua flags=allow-oom\nreturn redis.call('set', 'z', '1')", b"0"]);
    both(&mut rc, &mut ac, &[b"EVAL", b"#!lua flags=no-writes\nreturn redis.call('get', 'k:000001')", b"0"]);
    both(&mut rc, &mut ac, &[b"MULTI"]);
    both(&mut rc, &mut ac, &[b"GET", b"k:000001"]);
    both(&mut rc, &mut ac, &[b"SET", b"x", b"1"]);
    both(&mut rc, &mut ac, &[b"EXEC"]);
    // Deleting keys frees memory; writes work again.
    for c in [&mut rc, &mut ac] {
        pipeline(c, 3000, |i| vec![b"DEL".to_vec(), key("k", i)]);
    }
    both(&mut rc, &mut ac, &[b"SET", b"x", b"1"]);
    assert_eq!(info_field(&mut ac, "stats", "evicted_keys"), 0);
}

#[test]
fn evictions_notify_and_are_logged_as_deletes() {
    let a = start_atoll(&["--appendonly", "yes", "--notify-keyspace-events", "Ee"]);
    let mut c = RawConn::connect(a.port);
    let mut sub = RawConn::connect(a.port);
    sub.cmd(&[b"SUBSCRIBE", b"__keyevent@0__:evicted"]);
    let value = vec![b'v'; 500];
    pipeline(&mut c, 2000, |i| vec![b"SET".to_vec(), key("k", i), value.clone()]);
    limit_at(&mut c, -(100 << 10), "allkeys-random");
    assert_eq!(c.cmd(&[b"SET", b"one-more", b"x"]), b"+OK\r\n");
    let evicted = info_field(&mut c, "stats", "evicted_keys");
    assert!(evicted > 0);
    let msg = sub.read_reply();
    assert!(String::from_utf8_lossy(&msg).contains("evicted"), "{}", show(&msg));
    // The evicted key is gone and the AOF has its DEL.
    let (_, items) = split_aggregate(&msg).unwrap();
    let gone = parse_array(&[b"*1\r\n".as_slice(), &items[2]].concat()).remove(0);
    assert_eq!(c.cmd(&[b"EXISTS", &gone]), b":0\r\n");
    let dir = String::from_utf8_lossy(&parse_array(&c.cmd(&[b"CONFIG", b"GET", b"dir"]))[1]).into_owned();
    let aof_dir = std::path::Path::new(&dir).join("appendonlydir");
    let mut found = false;
    for _ in 0..50 {
        for e in std::fs::read_dir(&aof_dir).unwrap() {
            let text = std::fs::read(e.unwrap().path()).unwrap();
            let del = [b"$3\r\nDEL\r\n$".as_slice(), gone.len().to_string().as_bytes(), b"\r\n", &gone].concat();
            found |= text.windows(del.len()).any(|w| w == del.as_slice());
        }
        if found {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(found, "no DEL of the evicted key in the AOF");
}

#[test]
fn object_freq_counts_accesses_under_lfu() {
    let a = start_atoll(&["--maxmemory-policy", "allkeys-lfu"]);
    let mut c = RawConn::connect(a.port);
    c.cmd(&[b"SET", b"k", b"v"]);
    assert_eq!(c.cmd(&[b"OBJECT", b"FREQ", b"k"]), b":5\r\n");
    pipeline(&mut c, 200, |_| vec![b"GET".to_vec(), b"k".to_vec()]);
    let f = c.cmd(&[b"OBJECT", b"FREQ", b"k"]);
    let n: i64 = String::from_utf8_lossy(&f[1..f.len() - 2]).parse().unwrap();
    assert!(n > 5, "{}", show(&f));
    assert!(c.cmd(&[b"OBJECT", b"IDLETIME", b"k"]).starts_with(b"-ERR An LFU maxmemory policy is selected"));
    c.cmd(&[b"CONFIG", b"SET", b"maxmemory-policy", b"allkeys-lru"]);
    assert!(c.cmd(&[b"OBJECT", b"FREQ", b"k"]).starts_with(b"-ERR An LFU maxmemory policy is not selected"));
}

/// Over `maxmemory` because one client's replies pile up, the fat client goes before any key
/// does (Redis's processCommand runs evictClients before performEvictions): a pipeline of big
/// GETs that it never reads closes it, and every key stays. Redis 7.2.6 and Atoll alike.
#[test]
fn fat_clients_are_evicted_before_keys() {
    for (name, s) in [("redis", start_redis(&[])), ("atoll", start_atoll(&[]))] {
        let mut c = RawConn::connect(s.port);
        assert_eq!(c.cmd(&[b"CLIENT", b"NO-EVICT", b"on"]), b"+OK\r\n");
        for j in 0..50 {
            c.cmd(&[b"SETRANGE", j.to_string().as_bytes(), b"100000", b"x"]);
        }
        let used = info_field(&mut c, "memory", "used_memory");
        let max = (used + (8 << 20)).to_string();
        for (k, v) in [("maxmemory-policy", "allkeys-lru"), ("maxmemory", max.as_str()), ("maxmemory-clients", "3mb")] {
            assert_eq!(c.cmd(&[b"CONFIG", b"SET", k.as_bytes(), v.as_bytes()]), b"+OK\r\n");
        }
        assert_eq!(c.cmd(&[b"CONFIG", b"RESETSTAT"]), b"+OK\r\n");
        // 200 GETs of 100 kB in one write: 20 MB of replies, read by no one.
        let mut fat = RawConn::connect(s.port);
        let pipe: Vec<u8> = (0..200).flat_map(|j| encode(&v(&["GET", &(j % 50).to_string()]))).collect();
        fat.send_raw(&pipe);
        let start = std::time::Instant::now();
        while info_field(&mut c, "stats", "evicted_clients") == 0 {
            assert!(start.elapsed() < std::time::Duration::from_secs(10), "{name}: no client evicted");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(info_field(&mut c, "stats", "evicted_keys"), 0, "{name}");
        assert_eq!(c.cmd(&[b"DBSIZE"]), b":50\r\n", "{name}");
        c.cmd(&[b"CONFIG", b"SET", b"maxmemory", b"0"]);
    }
}

/// Evicting keys that tracking clients cached sends them invalidations, which take memory
/// themselves; as in Redis, an eviction round frees the excess it measured and does not count
/// those messages against itself — otherwise every invalidation calls for another eviction
/// until the keyspace is empty (Redis's "client tracking don't cause eviction feedback loop",
/// which drained Atoll's keyspace to 0 keys).
#[test]
fn invalidations_of_evicted_keys_do_not_drain_the_keyspace() {
    for (name, s) in [("redis", start_redis(&[])), ("atoll", start_atoll(&[]))] {
        let mut c = RawConn::connect(s.port);
        for (k, v) in
            [("latency-tracking", "no"), ("maxmemory-policy", "allkeys-lru"), ("maxmemory-eviction-tenacity", "100")]
        {
            assert_eq!(c.cmd(&[b"CONFIG", b"SET", k.as_bytes(), v.as_bytes()]), b"+OK\r\n");
        }
        // Ten RESP3 clients track every key: each reads each key once. None reads its
        // invalidations afterwards.
        let mut trackers: Vec<RawConn> = (0..10).map(|_| RawConn::connect(s.port)).collect();
        for t in &mut trackers {
            t.cmd(&[b"HELLO", b"3"]);
            assert_eq!(t.cmd(&[b"CLIENT", b"TRACKING", b"on"]), b"+OK\r\n");
        }
        let keys: Vec<Vec<u8>> = (0..300).map(|j| format!("{j}{}", "x".repeat(1000)).into_bytes()).collect();
        for k in &keys {
            assert_eq!(c.cmd(&[b"SET", k, b"x"]), b"+OK\r\n");
            for t in &mut trackers {
                assert_eq!(t.cmd(&[b"GET", k]), b"$1\r\nx\r\n");
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(1100));
        // 40 kB under what is used: a few dozen of the 1 kB keys must go, not all of them.
        let used = info_field(&mut c, "memory", "used_memory");
        assert_eq!(c.cmd(&[b"CONFIG", b"SET", b"maxmemory", (used - 40_000).to_string().as_bytes()]), b"+OK\r\n");
        let evicted = info_field(&mut c, "stats", "evicted_keys");
        let n: i64 = String::from_utf8_lossy(&c.cmd(&[b"DBSIZE"])).trim_start_matches(':').trim().parse().unwrap();
        assert!((200..=300).contains(&n), "{name}: {n} keys left, {evicted} evicted");
        assert!((10..=50).contains(&evicted), "{name}: {evicted} keys evicted");
        c.cmd(&[b"CONFIG", b"SET", b"maxmemory", b"0"]);
        // Messages not yet moved to their clients' outputs are not counted for eviction; once
        // the workers have moved them (the trackers still read nothing), nothing is left
        // uncounted, as in Redis without replicas or AOF.
        let start = std::time::Instant::now();
        while info_field(&mut c, "memory", "mem_not_counted_for_evict") != 0 {
            assert!(start.elapsed() < std::time::Duration::from_secs(5), "{name}: messages stay uncounted");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// A client sending a big argument it never finishes is weighed as its bytes arrive: once
/// they are in the server's socket, the next command anywhere (here a CLIENT LIST, on the
/// same worker or another) already sees it evicted, as in Redis, which reads a big argument
/// whole before it serves the next client (Redis's "client evicted due to percentage of
/// maxmemory"). Atoll's io_uring receive hands over 128 KB a turn; without reading the rest
/// of the argument at once, 1 in 10 of these CLIENT LISTs still listed the client.
#[test]
fn a_big_unfinished_argument_is_weighed_before_the_next_command() {
    let servers = [
        ("redis", start_redis(&[])),
        ("atoll", start_atoll(&[])),
        ("atoll one worker", start_atoll(&["--threads", "1"])),
        ("atoll epoll", start_atoll(&["--io-backend", "epoll"])),
    ];
    for (name, s) in servers {
        let mut c = RawConn::connect(s.port);
        for (k, v) in [("maxmemory", "6mb"), ("maxmemory-clients", "7%")] {
            assert_eq!(c.cmd(&[b"CONFIG", b"SET", k.as_bytes(), v.as_bytes()]), b"+OK\r\n");
        }
        let n = (6 << 20) * 7 / 100;
        for i in 0..30 {
            let mut fat = RawConn::connect(s.port);
            let cname = format!("fat{i}");
            assert_eq!(fat.cmd(&[b"CLIENT", b"SETNAME", cname.as_bytes()]), b"+OK\r\n");
            let mut req = format!("*1\r\n${n}\r\n").into_bytes();
            req.resize(req.len() + n, b'v');
            // The server may close the connection before it has taken every byte.
            let _ = std::io::Write::write_all(&mut fat.stream, &req);
            let list = String::from_utf8_lossy(&c.cmd(&[b"CLIENT", b"LIST"])).into_owned();
            assert!(!list.contains(&format!("name={cname} ")), "{name}: try {i}: the client is still listed:\n{list}");
        }
        assert_eq!(info_field(&mut c, "stats", "evicted_clients"), 30, "{name}");
    }
}
