//! HyperLogLog values move between Redis and Atoll unchanged: a raw HLL string taken from one
//! server (GET) and stored in the other (SET) counts and grows identically on both, in the
//! sparse and the dense encoding.

mod common;
use common::*;

fn cmd(c: &mut RawConn, args: &[&[u8]]) -> Vec<u8> {
    c.cmd(args)
}

/// The bulk payload of a `$n\r\n...\r\n` reply.
fn bulk(reply: &[u8]) -> Vec<u8> {
    assert_eq!(reply[0], b'$', "not a bulk reply: {}", String::from_utf8_lossy(reply));
    let nl = reply.windows(2).position(|w| w == b"\r\n").unwrap();
    reply[nl + 2..reply.len() - 2].to_vec()
}

fn fill(c: &mut RawConn, key: &[u8], prefix: &str, n: usize) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let elems: Vec<Vec<u8>> = chunk.iter().map(|i| format!("{prefix}{i}").into_bytes()).collect();
        let mut args: Vec<&[u8]> = vec![b"PFADD", key];
        args.extend(elems.iter().map(|e| e.as_slice()));
        let r = cmd(c, &args);
        assert!(r.starts_with(b":"), "PFADD failed: {}", String::from_utf8_lossy(&r));
    }
}

#[test]
fn raw_hll_strings_move_both_ways() {
    let redis = start_redis(&[]);
    let atoll = start_atoll(&[]);
    let mut r = RawConn::connect(redis.port);
    let mut a = RawConn::connect(atoll.port);
    // Sizes that stay sparse, and ones that go dense.
    for (i, n) in [1usize, 50, 300, 2000, 20000].into_iter().enumerate() {
        let key = format!("h{i}").into_bytes();
        let prefix = format!("e{i}-");
        for redis_first in [true, false] {
            let (from, to) = if redis_first { (&mut r, &mut a) } else { (&mut a, &mut r) };
            cmd(from, &[b"DEL", &key]);
            cmd(to, &[b"DEL", &key]);
            fill(from, &key, &prefix, n);
            let raw = bulk(&cmd(from, &[b"GET", &key]));
            assert_eq!(cmd(to, &[b"SET", &key, &raw]), b"+OK\r\n");
            // Same estimate, same bytes after the count is cached, same growth.
            let c_from = cmd(from, &[b"PFCOUNT", &key]);
            assert_eq!(c_from, cmd(to, &[b"PFCOUNT", &key]), "PFCOUNT of n={n}");
            assert_eq!(cmd(from, &[b"GET", &key]), cmd(to, &[b"GET", &key]), "cached bytes of n={n}");
            for extra in [&b"x1"[..], b"x2", b"another element"] {
                assert_eq!(cmd(from, &[b"PFADD", &key, extra]), cmd(to, &[b"PFADD", &key, extra]));
            }
            assert_eq!(cmd(from, &[b"PFCOUNT", &key]), cmd(to, &[b"PFCOUNT", &key]));
            assert_eq!(cmd(from, &[b"GET", &key]), cmd(to, &[b"GET", &key]), "bytes after PFADD, n={n}");
        }
    }
    // Unions and merges of values built on different servers agree.
    fill(&mut r, b"u1", "u", 3000);
    let raw = bulk(&cmd(&mut r, &[b"GET", b"u1"]));
    cmd(&mut a, &[b"SET", b"u1", &raw]);
    fill(&mut a, b"u2", "w", 100);
    let raw = bulk(&cmd(&mut a, &[b"GET", b"u2"]));
    cmd(&mut r, &[b"SET", b"u2", &raw]);
    assert_eq!(cmd(&mut r, &[b"PFCOUNT", b"u1", b"u2"]), cmd(&mut a, &[b"PFCOUNT", b"u1", b"u2"]));
    assert_eq!(cmd(&mut r, &[b"PFMERGE", b"m", b"u2", b"u1"]), cmd(&mut a, &[b"PFMERGE", b"m", b"u2", b"u1"]));
    assert_eq!(cmd(&mut r, &[b"GET", b"m"]), cmd(&mut a, &[b"GET", b"m"]));
    assert_eq!(cmd(&mut r, &[b"PFCOUNT", b"m"]), cmd(&mut a, &[b"PFCOUNT", b"m"]));
}
