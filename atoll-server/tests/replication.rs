//! Replication, Atoll as the master: a real Redis 7.2.6 (`redis-server --replicaof`) is the
//! replica. It must load Atoll's snapshot, follow the stream byte for byte (its offset equals
//! Atoll's), end up with the same dataset (DEBUG DIGEST, computed as Redis computes it), and
//! continue from the backlog after a dropped link. Checked for diskless and disk-based full
//! syncs, with writes racing the snapshot.

mod common;

use common::*;
use redis::Value;
use std::time::{Duration, Instant};

fn con(port: u16) -> redis::Connection {
    let c = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let con = c.get_connection().expect("connect");
    con.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    con
}

fn q(c: &mut redis::Connection, args: &[&str]) -> Value {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn s(c: &mut redis::Connection, args: &[&str]) -> String {
    match q(c, args) {
        Value::BulkString(b) => String::from_utf8(b).unwrap(),
        Value::SimpleString(t) => t,
        Value::Okay => "OK".into(),
        Value::Int(i) => i.to_string(),
        Value::VerbatimString { text, .. } => text,
        other => format!("{other:?}"),
    }
}

/// One field of INFO's section.
fn info_field(c: &mut redis::Connection, section: &str, name: &str) -> Option<String> {
    let text = s(c, &["INFO", section]);
    text.lines().find_map(|l| l.strip_prefix(&format!("{name}:")).map(|v| v.to_string()))
}

fn wait_until(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < Duration::from_secs(secs), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Values of every type, with and without TTLs, in two databases.
fn load_dataset(c: &mut redis::Connection) {
    q(c, &["DEBUG", "POPULATE", "20000", "key", "16"]);
    q(c, &["RPUSH", "list", "a", "b", "c", "d"]);
    q(c, &["HSET", "hash", "f1", "v1", "f2", "v2"]);
    q(c, &["SADD", "set", "m1", "m2", "m3", "m4", "m5"]);
    q(c, &["ZADD", "zset", "1", "a", "2.5", "b", "3", "c"]);
    q(c, &["XADD", "stream", "1-1", "f", "v"]);
    q(c, &["PFADD", "hll", "x", "y", "z"]);
    q(c, &["SETBIT", "bits", "1000", "1"]);
    q(c, &["SET", "ttl", "v", "EX", "1000"]);
    q(c, &["SELECT", "5"]);
    q(c, &["SET", "in5", "five"]);
    q(c, &["SELECT", "0"]);
}

/// Writes whose effects differ from the commands (Redis rewrites them for replicas).
fn write_mix(c: &mut redis::Connection) {
    q(c, &["INCR", "counter"]);
    q(c, &["INCRBYFLOAT", "float", "1.5"]);
    q(c, &["SPOP", "set"]);
    q(c, &["SET", "later", "v", "EX", "100"]);
    q(c, &["EXPIRE", "hash", "500"]);
    q(c, &["LMOVE", "list", "list2", "LEFT", "RIGHT"]);
    q(c, &["ZPOPMIN", "zset"]);
    q(c, &["HINCRBYFLOAT", "hash", "f3", "0.25"]);
    q(c, &["EVAL", "redis.call('set', KEYS[1], ARGV[1]); return redis.call('incr', KEYS[2])", "2", "lua", "luan", "v"]);
    redis::pipe().atomic().cmd("SET").arg("tx1").arg("1").cmd("RPUSH").arg("tx2").arg("a").query::<Value>(c).unwrap();
    q(c, &["SELECT", "7"]);
    q(c, &["SET", "in7", "seven"]);
    q(c, &["SELECT", "5"]);
    q(c, &["FLUSHDB"]);
    q(c, &["SELECT", "0"]);
    q(c, &["DEL", "key:7", "key:8"]);
    q(c, &["XADD", "stream", "MAXLEN", "~", "10", "*", "f", "w"]);
}

/// Atoll and its replica hold the same data, and the replica's offset is Atoll's.
fn assert_in_sync(master: &mut redis::Connection, replica: &mut redis::Connection) {
    assert_eq!(s(master, &["WAIT", "1", "10000"]), "1", "the replica acknowledges the stream");
    let moff = info_field(master, "replication", "master_repl_offset").unwrap();
    wait_until("the replica's offset to reach the master's", 10, || {
        info_field(replica, "replication", "master_repl_offset").as_deref() == Some(moff.as_str())
    });
    for db in 0..16 {
        let m = s(master, &["SELECT", &db.to_string()]) + &s(master, &["DBSIZE"]);
        let r = s(replica, &["SELECT", &db.to_string()]) + &s(replica, &["DBSIZE"]);
        assert_eq!(m, r, "db {db}");
    }
    q(master, &["SELECT", "0"]);
    q(replica, &["SELECT", "0"]);
    assert_eq!(s(master, &["DEBUG", "DIGEST"]), s(replica, &["DEBUG", "DIGEST"]), "the datasets' digests");
}

fn start_master(diskless: &str) -> ServerProc {
    start_atoll(&[
        "--enable-debug-command",
        "yes",
        "--repl-diskless-sync",
        diskless,
        "--repl-diskless-sync-delay",
        "0",
        "--repl-ping-replica-period",
        "1",
    ])
}

fn start_replica(master: &ServerProc) -> ServerProc {
    start_redis(&["--replicaof", "127.0.0.1", &master.port.to_string()])
}

fn link_up(replica: &mut redis::Connection) {
    wait_until("the replica's link", 30, || {
        info_field(replica, "replication", "master_link_status").as_deref() == Some("up")
    });
}

/// A diskless full sync is sent by a child process, as Redis's: it is found under the master
/// (`pgrep -P`), named for what it does, sends one snapshot to a Redis and an Atoll replica
/// at once, and killing it (`kill -9`) ends the sync, after which the replicas sync again.
/// Run the same on Redis 7.2.6 as the master, then on Atoll.
#[test]
fn a_diskless_sync_is_sent_by_a_child_process_as_in_redis() {
    let args = [
        "--enable-debug-command",
        "yes",
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
        "--rdbcompression",
        "no",
    ];
    for master in [start_redis(&args), start_atoll(&args)] {
        let name = master.name;
        let pid = master.child.id();
        let mut m = con(master.port);
        q(&mut m, &["DEBUG", "POPULATE", "2000", "key", "1000"]);
        // 2,000 keys at a millisecond each: the transfer lasts two seconds.
        q(&mut m, &["CONFIG", "SET", "rdb-key-save-delay", "1000"]);
        let port = master.port.to_string();
        let replicas = [
            start_redis(&["--replicaof", "127.0.0.1", &port]),
            start_atoll(&["--enable-debug-command", "yes", "--replicaof", "127.0.0.1", &port]),
        ];
        let mut kids = Vec::new();
        wait_until("the transfer's child", 10, || {
            kids = children_of(pid);
            !kids.is_empty()
        });
        assert_eq!(kids.len(), 1, "{name}: {kids:?}");
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", kids[0])).unwrap_or_default();
        assert!(String::from_utf8_lossy(&cmdline).contains("-rdb-to-"), "{name}: {cmdline:?}");
        assert_eq!(info_field(&mut m, "persistence", "rdb_bgsave_in_progress").as_deref(), Some("1"), "{name}");
        // SAFETY: a signal to the master's child, found above.
        unsafe { libc::kill(kids[0] as i32, libc::SIGKILL) };
        wait_until("the sync's end", 10, || {
            info_field(&mut m, "persistence", "rdb_bgsave_in_progress").as_deref() == Some("0")
        });
        // The replicas come back for a sync of their own, which now goes through.
        q(&mut m, &["CONFIG", "SET", "rdb-key-save-delay", "0"]);
        q(&mut m, &["SET", "after", "the kill"]);
        let mut rs: Vec<redis::Connection> = replicas.iter().map(|r| con(r.port)).collect();
        for r in rs.iter_mut() {
            link_up(r);
        }
        online_at_master(&mut m, 2);
        assert_eq!(s(&mut m, &["WAIT", "2", "10000"]), "2", "{name}");
        let digest = s(&mut m, &["DEBUG", "DIGEST"]);
        for (r, replica) in rs.iter_mut().zip(&replicas) {
            assert_eq!(s(r, &["DEBUG", "DIGEST"]), digest, "{name} -> {}", replica.name);
        }
        wait_until("the child's end", 10, || children_of(pid).is_empty());
        let forks = info_field(&mut m, "stats", "total_forks").unwrap().parse::<u64>().unwrap();
        assert!(forks >= 2, "{name}: {forks} children");
    }
}

/// Replicas waiting for their snapshot share one replication buffer, as Redis 7's do: the
/// stream written meanwhile is held once (in the backlog, which outgrows its size for them),
/// not once per replica; a replica leaving frees nothing while another still needs it, and
/// the last one leaving lets the backlog shrink back. Beside Redis 7.2.6.
#[test]
fn replicas_awaiting_their_snapshot_share_one_replication_buffer_as_in_redis() {
    let args = [
        "--enable-debug-command",
        "yes",
        "--repl-backlog-size",
        "16384",
        "--repl-diskless-sync",
        "no",
        "--client-output-buffer-limit",
        "replica 0 0 0",
    ];
    let int = |c: &mut redis::Connection, section: &str, name: &str| -> i64 {
        info_field(c, section, name).unwrap_or_else(|| panic!("no {name}")).parse().unwrap()
    };
    for master in [start_redis(&args), start_atoll(&args)] {
        let name = master.name;
        let mut m = con(master.port);
        q(&mut m, &["DEBUG", "POPULATE", "100", "key", "16"]);
        // A hundred seconds to write the file: the replicas wait for it throughout.
        q(&mut m, &["CONFIG", "SET", "rdb-key-save-delay", "1000000"]);
        let port = master.port.to_string();
        let mut replicas =
            vec![start_redis(&["--replicaof", "127.0.0.1", &port]), start_atoll(&["--replicaof", "127.0.0.1", &port])];
        wait_until("both replicas to wait for the snapshot", 10, || {
            let text = s(&mut m, &["INFO", "replication"]);
            text.lines().filter(|l| l.starts_with("slave") && l.contains("state=wait_bgsave")).count() == 2
        });
        let value = "v".repeat(1024);
        for i in 0..1024 {
            q(&mut m, &["SET", &format!("big:{i}"), &value]);
        }
        let held = int(&mut m, "replication", "repl_backlog_histlen");
        assert!(held > 1024 * 1024, "{name}: the backlog holds the stream for them ({held})");
        let total = int(&mut m, "memory", "mem_total_replication_buffers");
        assert!(total >= held && total < 3 * held, "{name}: {total} for {held} held once");
        replicas.truncate(1);
        wait_until("one replica to leave", 10, || int(&mut m, "replication", "connected_slaves") == 1);
        assert_eq!(int(&mut m, "memory", "mem_total_replication_buffers"), total, "{name}: still held for the other");
        replicas.clear();
        wait_until(&format!("{name}: the backlog to shrink back"), 20, || {
            // Redis frees whole 16 KB blocks, keeping at least the size: within a block of it.
            int(&mut m, "replication", "repl_backlog_histlen") <= 2 * 16384
                && int(&mut m, "memory", "mem_total_replication_buffers") < total - 1024 * 1024
        });
    }
}

/// Until the master counts its first `n` replicas online: a replica sees its link up a moment
/// before (the master waits for its first ACK), and FAILOVER refuses a target not yet online.
fn online_at_master(master: &mut redis::Connection, n: usize) {
    wait_until("the master to count its replicas online", 30, || {
        let text = s(master, &["INFO", "replication"]);
        text.lines().filter(|l| l.starts_with("slave") && l.contains(",state=online,")).count() >= n
    });
}

#[test]
fn a_redis_replica_follows_atoll() {
    for diskless in ["yes", "no"] {
        let atoll = start_master(diskless);
        let mut m = con(atoll.port);
        load_dataset(&mut m);
        // The snapshot takes a while (10 µs a key), and writes race it: overwrites of keys it
        // has not reached yet, new keys, and INCRs whose count must come out exact.
        q(&mut m, &["CONFIG", "SET", "rdb-key-save-delay", "10"]);
        let port = atoll.port;
        let writer = std::thread::spawn(move || {
            let mut w = con(port);
            for i in 0..3000 {
                let k = format!("key:{}", (i * 7919) % 20000);
                q(&mut w, &["SET", &k, &i.to_string()]);
                q(&mut w, &["INCR", "racing"]);
            }
        });
        let redis = start_replica(&atoll);
        let mut r = con(redis.port);
        link_up(&mut r);
        writer.join().unwrap();
        q(&mut m, &["CONFIG", "SET", "rdb-key-save-delay", "0"]);
        write_mix(&mut m);
        assert_in_sync(&mut m, &mut r);
        assert_eq!(s(&mut r, &["GET", "racing"]), "3000", "diskless {diskless}");
        let role = q(&mut m, &["ROLE"]);
        let Value::Array(parts) = role else { panic!("{role:?}") };
        assert_eq!(parts[0], Value::BulkString(b"master".to_vec()));
        let Value::Array(replicas) = &parts[2] else { panic!("{parts:?}") };
        assert_eq!(replicas.len(), 1);
        assert_eq!(info_field(&mut m, "replication", "connected_slaves").as_deref(), Some("1"));
        let slave0 = info_field(&mut m, "replication", "slave0").unwrap();
        assert!(slave0.starts_with(&format!("ip=127.0.0.1,port={},state=online,offset=", redis.port)), "{slave0}");
        assert_eq!(info_field(&mut m, "stats", "sync_full").as_deref(), Some("1"));
        // Expiry on the master reaches the replica as a DEL.
        q(&mut m, &["SET", "short", "v", "PX", "50"]);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(q(&mut m, &["GET", "short"]), Value::Nil);
        assert_in_sync(&mut m, &mut r);
        assert_eq!(q(&mut r, &["EXISTS", "short"]), Value::Int(0));
    }
}

#[test]
fn a_replica_that_lost_its_link_continues_from_the_backlog() {
    let atoll = start_master("yes");
    let mut m = con(atoll.port);
    load_dataset(&mut m);
    let redis = start_replica(&atoll);
    let mut r = con(redis.port);
    link_up(&mut r);
    assert_in_sync(&mut m, &mut r);
    // Drop the link from the master's side while the replica is stopped (so it cannot
    // reconnect at once); writes go on meanwhile and it must catch up from the backlog.
    signal(&redis, libc::SIGSTOP);
    assert_eq!(s(&mut m, &["CLIENT", "KILL", "TYPE", "replica"]), "1");
    write_mix(&mut m);
    signal(&redis, libc::SIGCONT);
    wait_until("the replica to come back", 30, || {
        info_field(&mut m, "stats", "sync_partial_ok").as_deref() == Some("1")
    });
    link_up(&mut r);
    assert_in_sync(&mut m, &mut r);
    assert_eq!(info_field(&mut m, "stats", "sync_full").as_deref(), Some("1"), "no second full sync");
    // A backlog too small for what was missed: a full resync instead.
    q(&mut m, &["CONFIG", "SET", "repl-backlog-size", "16384"]);
    signal(&redis, libc::SIGSTOP);
    assert_eq!(s(&mut m, &["CLIENT", "KILL", "TYPE", "replica"]), "1");
    let big = "x".repeat(1000);
    for i in 0..100 {
        q(&mut m, &["SET", &format!("big:{i}"), &big]);
    }
    signal(&redis, libc::SIGCONT);
    wait_until("a second full sync", 30, || info_field(&mut m, "stats", "sync_full").as_deref() == Some("2"));
    link_up(&mut r);
    assert_in_sync(&mut m, &mut r);
    assert_eq!(info_field(&mut m, "stats", "sync_partial_err").as_deref(), Some("1"));
}

fn signal(p: &ServerProc, sig: i32) {
    // SAFETY: a signal to the child process this test started and still owns.
    assert_eq!(unsafe { libc::kill(p.child.id() as i32, sig) }, 0);
}

#[test]
fn wait_counts_replicas_as_redis_does() {
    let atoll = start_master("yes");
    let mut m = con(atoll.port);
    // No replica: WAIT 0 answers at once, WAIT 1 at its timeout, with 0.
    assert_eq!(q(&mut m, &["WAIT", "0", "0"]), Value::Int(0));
    let t = Instant::now();
    assert_eq!(q(&mut m, &["WAIT", "1", "300"]), Value::Int(0));
    let took = t.elapsed();
    assert!(took >= Duration::from_millis(290) && took < Duration::from_millis(1500), "{took:?}");
    let redis = start_replica(&atoll);
    let mut r = con(redis.port);
    link_up(&mut r);
    q(&mut m, &["SET", "k", "v"]);
    assert_eq!(q(&mut m, &["WAIT", "1", "0"]), Value::Int(1));
    // Asking for more replicas than there are waits out the timeout and counts the one.
    let t = Instant::now();
    assert_eq!(q(&mut m, &["WAIT", "2", "200"]), Value::Int(1));
    assert!(t.elapsed() >= Duration::from_millis(190));
    assert_eq!(s(&mut r, &["GET", "k"]), "v");
    // Inside MULTI WAIT does not block.
    let v: Value = redis::pipe().atomic().cmd("WAIT").arg(5).arg(0).query(&mut m).unwrap();
    assert_eq!(v, Value::Array(vec![Value::Int(1)]));
    // Messages published on the master reach the replica's subscribers.
    let mut sub = RawConn::connect(redis.port);
    sub.cmd(&[b"SUBSCRIBE", b"news"]);
    assert_eq!(q(&mut m, &["PUBLISH", "news", "hello"]), Value::Int(0));
    assert_eq!(sub.read_reply(), b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n");
}

#[test]
fn replconf_and_psync_answer_as_redis_does() {
    let atoll = start_master("yes");
    let redis = start_redis(&["--repl-diskless-sync-delay", "0"]);
    for port in [atoll.port, redis.port] {
        let mut c = RawConn::connect(port);
        let who = if port == atoll.port { "atoll" } else { "redis" };
        assert_eq!(c.cmd(&[b"REPLCONF", b"listening-port", b"1234"]), b"+OK\r\n", "{who}");
        assert_eq!(c.cmd(&[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"]), b"+OK\r\n", "{who}");
        assert_eq!(c.cmd(&[b"REPLCONF", b"listening-port"]), b"-ERR syntax error\r\n", "{who}");
        assert_eq!(
            c.cmd(&[b"REPLCONF", b"nonsense", b"1"]),
            b"-ERR Unrecognized REPLCONF option: nonsense\r\n",
            "{who}"
        );
        // ACK from a client that is not a replica: no reply at all, as from a replica.
        c.send(&v(&["REPLCONF", "ACK", "10"]));
        assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n", "{who}");
        // PSYNC with an unknown history: +FULLRESYNC <replid> <offset>, then the RDB.
        c.send(&v(&["PSYNC", "?", "-1"]));
        let line = c.read_reply();
        let text = String::from_utf8_lossy(&line).to_string();
        let parts: Vec<&str> = text.trim_end().split(' ').collect();
        assert_eq!(parts.len(), 3, "{who}: {text}");
        assert_eq!(parts[0], "+FULLRESYNC", "{who}");
        assert_eq!(parts[1].len(), 40, "{who}");
        assert!(parts[2].parse::<i64>().is_ok(), "{who}: {text}");
    }
}

/// Atoll following a master, Redis's or its own, until REPLICAOF NO ONE.
fn follow_and_promote(master: &ServerProc, master_is_atoll: bool) {
    let mut m = con(master.port);
    load_dataset(&mut m);
    let atoll = start_atoll(&["--enable-debug-command", "yes"]);
    let mut r = con(atoll.port);
    assert_eq!(s(&mut r, &["REPLICAOF", "127.0.0.1", &master.port.to_string()]), "OK");
    assert_eq!(
        s(&mut r, &["REPLICAOF", "127.0.0.1", &master.port.to_string()]),
        "OK Already connected to specified master"
    );
    link_up(&mut r);
    write_mix(&mut m);
    assert_in_sync(&mut m, &mut r);
    // A replica refuses writes, and shows its master.
    let e = redis::cmd("SET").arg("x").arg("1").query::<Value>(&mut r).unwrap_err();
    assert_eq!(e.code(), Some("READONLY"), "{e}");
    let role = q(&mut r, &["ROLE"]);
    let Value::Array(parts) = role else { panic!("{role:?}") };
    assert_eq!(parts[0], Value::BulkString(b"slave".to_vec()));
    assert_eq!(parts[3], Value::BulkString(b"connected".to_vec()));
    assert_eq!(info_field(&mut r, "replication", "master_port"), Some(master.port.to_string()));
    // Keys that expire on the master go when the master says so.
    q(&mut m, &["SET", "short", "v", "PX", "100"]);
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(q(&mut r, &["GET", "short"]), Value::Nil, "reads as missing on the replica");
    assert_eq!(q(&mut m, &["GET", "short"]), Value::Nil);
    assert_in_sync(&mut m, &mut r);
    if master_is_atoll {
        // A lost link continues from the master's backlog.
        assert_eq!(s(&mut m, &["CLIENT", "KILL", "TYPE", "replica"]), "1");
        q(&mut m, &["INCR", "after-kill"]);
        wait_until("a partial resync", 30, || info_field(&mut m, "stats", "sync_partial_ok").as_deref() == Some("1"));
        link_up(&mut r);
        assert_in_sync(&mut m, &mut r);
        assert_eq!(s(&mut r, &["GET", "after-kill"]), "1");
    }
    // Promoted: writable, a master with a new history that continues the old one.
    let old_id = info_field(&mut m, "replication", "master_replid").unwrap();
    assert_eq!(s(&mut r, &["REPLICAOF", "NO", "ONE"]), "OK");
    assert_eq!(info_field(&mut r, "replication", "role").as_deref(), Some("master"));
    assert_eq!(info_field(&mut r, "replication", "master_replid2"), Some(old_id));
    assert_eq!(s(&mut r, &["SET", "x", "1"]), "OK");
    // Writes on the old master no longer arrive.
    q(&mut m, &["SET", "only-on-master", "1"]);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(q(&mut r, &["EXISTS", "only-on-master"]), Value::Int(0));
}

#[test]
fn atoll_follows_a_redis_master() {
    let redis = start_redis(&["--repl-diskless-sync-delay", "0"]);
    follow_and_promote(&redis, false);
}

#[test]
fn atoll_follows_an_atoll_master() {
    let master = start_master("yes");
    follow_and_promote(&master, true);
}

#[test]
fn wait_and_waitaof_arguments_answer_as_redis_does() {
    let atoll = start_master("yes");
    let redis = start_redis(&[]);
    let cases: &[&[&str]] = &[
        &["WAIT", "0", "0"],
        &["WAIT", "1", "-1"],
        &["WAIT", "x", "0"],
        &["WAIT", "2", "9223372036854775808"],
        &["WAIT", "2", "9223372036854775807"],
        &["WAITAOF", "0", "0", "0"],
        &["WAITAOF", "2", "0", "0"],
        &["WAITAOF", "0", "-1", "0"],
        &["WAITAOF", "0", "0", "-1"],
        &["WAITAOF", "x", "0", "0"],
        &["WAITAOF", "1", "0", "0"],
        &["WAITAOF", "0", "0"],
        &["REPLCONF", "GETACK", "*"],
        &["DEBUG", "REPLICATE"],
        &["DEBUG", "REPLICATE", "PING"],
        &["REPLICAOF", "127.0.0.1", "99999"],
    ];
    let mut a = RawConn::connect(atoll.port);
    let mut r = RawConn::connect(redis.port);
    for args in cases {
        let argv: Vec<&[u8]> = args.iter().map(|x| x.as_bytes()).collect();
        if args[0] == "REPLCONF" {
            // No reply from either: a PING after it answers first.
            for c in [&mut a, &mut r] {
                c.send(&v(args));
                assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n", "{args:?}");
            }
            continue;
        }
        assert_eq!(show(&a.cmd(&argv)), show(&r.cmd(&argv)), "{args:?}");
    }
}

/// WAITAOF counts an Atoll replica whose AOF was switched on after its link came up (and on
/// again after off), beside a Redis 7.2.6 replica doing the same: the replica's FACK follows
/// the AOF open now, not the one open when the link began (it stayed without FACK, and a
/// WAITAOF 0 1 0 waited for ever — found by Redis's unit/wait).
#[test]
fn waitaof_counts_a_replica_whose_aof_was_switched_on_while_linked() {
    for replica_is_atoll in [true, false] {
        let atoll = start_master("no");
        let mut m = con(atoll.port);
        let port = atoll.port.to_string();
        let replica = if replica_is_atoll {
            start_atoll(&["--replicaof", "127.0.0.1", &port])
        } else {
            start_redis(&["--replicaof", "127.0.0.1", &port])
        };
        let mut r = con(replica.port);
        link_up(&mut r);
        for turn in ["yes", "no", "yes"] {
            q(&mut r, &["CONFIG", "SET", "appendonly", turn]);
        }
        wait_until("the replica's first AOF base", 30, || {
            info_field(&mut r, "persistence", "aof_rewrite_in_progress").as_deref() == Some("0")
                && info_field(&mut r, "persistence", "aof_rewrite_scheduled").as_deref() == Some("0")
        });
        q(&mut r, &["CONFIG", "SET", "appendfsync", "always"]);
        q(&mut m, &["INCR", "foo"]);
        let t = Instant::now();
        let got = q(&mut m, &["WAITAOF", "0", "1", "5000"]);
        assert_eq!(got, Value::Array(vec![Value::Int(0), Value::Int(1)]), "replica_is_atoll={replica_is_atoll}");
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    }
}

/// A replica whose link drops and continues (`+CONTINUE`) has not fsync'd its AOF by that:
/// with `appendfsync no` its FACK stays where its full sync's rewrite left it, so the
/// master's WAITAOF does not count it for a write made before the reconnect (it counted it:
/// the new link took everything applied as durable); once it fsyncs (`everysec`) it does.
/// The same with a Redis 7.2.6 replica.
#[test]
fn waitaof_does_not_count_a_replica_made_durable_by_a_reconnect_alone() {
    for replica_is_atoll in [true, false] {
        let atoll = start_master("yes");
        let mut m = con(atoll.port);
        let port = atoll.port.to_string();
        let args = ["--replicaof", "127.0.0.1", &port, "--appendonly", "yes", "--appendfsync", "no"];
        let replica = if replica_is_atoll { start_atoll(&args) } else { start_redis(&args) };
        let mut r = con(replica.port);
        link_up(&mut r);
        online_at_master(&mut m, 1);
        wait_until("the replica's AOF base", 30, || {
            info_field(&mut r, "persistence", "aof_rewrite_in_progress").as_deref() == Some("0")
        });
        q(&mut m, &["SET", "k", "v"]);
        assert_eq!(q(&mut m, &["WAIT", "1", "5000"]), Value::Int(1));
        let partial = |m: &mut redis::Connection| info_field(m, "stats", "sync_partial_ok").unwrap();
        assert_eq!(partial(&mut m), "0");
        q(&mut r, &["CLIENT", "KILL", "TYPE", "master"]);
        wait_until("the partial resync", 30, || partial(&mut m) == "1");
        link_up(&mut r);
        online_at_master(&mut m, 1);
        let got = q(&mut m, &["WAITAOF", "0", "1", "300"]);
        assert_eq!(got, Value::Array(vec![Value::Int(0), Value::Int(0)]), "replica_is_atoll={replica_is_atoll}");
        q(&mut r, &["CONFIG", "SET", "appendfsync", "everysec"]);
        q(&mut m, &["SET", "k", "v2"]);
        let got = q(&mut m, &["WAITAOF", "0", "1", "5000"]);
        assert_eq!(got, Value::Array(vec![Value::Int(0), Value::Int(1)]), "replica_is_atoll={replica_is_atoll}");
    }
}

/// Fills the stream behind a stopped replica until the master holds over 2 MB for it (what
/// Redis's integration/shutdown does, reading INFO's `mem_total_replication_buffers`).
fn fill_behind_stopped_replica(m: &mut redis::Connection) {
    let value = "x".repeat(1024);
    let mut round = 0;
    loop {
        round += 1;
        let mut p = redis::pipe();
        for i in 0..1024 {
            p.cmd("SET").arg(format!("junk{round}:{i}")).arg(&value).ignore();
        }
        let () = p.query(m).unwrap();
        let held: u64 = info_field(m, "memory", "mem_total_replication_buffers").unwrap().parse().unwrap();
        if held > 2 * 1024 * 1024 {
            return;
        }
        assert!(round < 200, "the replication buffers never grew past 2 MB ({held})");
    }
}

/// `shutdown-timeout`: a master whose replica has not acknowledged the stream pauses writes and
/// waits for it (INFO `shutdown_in_milliseconds`) before exiting, so the last write reaches the
/// replica; SHUTDOWN ABORT ends such a wait, the SHUTDOWN caller gets Redis's error and writes
/// go on. The replica is Redis 7.2.6.
#[test]
fn shutdown_waits_for_a_lagging_replica_as_redis_does() {
    // Waited for, then exits.
    let mut atoll = start_master("yes");
    let mut m = con(atoll.port);
    let redis = start_replica(&atoll);
    let mut r = con(redis.port);
    link_up(&mut r);
    q(&mut m, &["CONFIG", "SET", "shutdown-timeout", "60"]);
    q(&mut m, &["SET", "k", "1"]);
    assert_eq!(q(&mut m, &["WAIT", "1", "0"]), Value::Int(1));
    signal(&redis, libc::SIGSTOP);
    fill_behind_stopped_replica(&mut m);
    assert_eq!(q(&mut m, &["INCR", "k"]), Value::Int(2));
    let mut caller = RawConn::connect(atoll.port);
    caller.send(&v(&["SHUTDOWN"]));
    wait_until("the shutdown's grace period", 10, || {
        info_field(&mut m, "server", "shutdown_in_milliseconds").is_some_and(|ms| ms.parse::<i64>().unwrap() > 0)
    });
    // Writes are paused meanwhile.
    let mut w = RawConn::connect(atoll.port);
    w.send(&v(&["SET", "late", "1"]));
    assert_eq!(w.try_read_reply(Duration::from_millis(300)), None);
    signal(&redis, libc::SIGCONT);
    wait_until("the master's exit", 60, || atoll.child.try_wait().unwrap().is_some());
    assert_eq!(s(&mut r, &["GET", "k"]), "2");

    // Aborted.
    let atoll = start_master("yes");
    let mut m = con(atoll.port);
    let redis = start_replica(&atoll);
    let mut r = con(redis.port);
    link_up(&mut r);
    q(&mut m, &["CONFIG", "SET", "shutdown-timeout", "60"]);
    assert_eq!(RawConn::connect(atoll.port).cmd(&[b"SHUTDOWN", b"ABORT"]), b"-ERR No shutdown in progress.\r\n");
    signal(&redis, libc::SIGSTOP);
    fill_behind_stopped_replica(&mut m);
    let mut caller = RawConn::connect(atoll.port);
    caller.send(&v(&["SHUTDOWN"]));
    wait_until("the shutdown's grace period", 10, || {
        info_field(&mut m, "server", "shutdown_in_milliseconds").is_some()
    });
    let mut other = RawConn::connect(atoll.port);
    assert_eq!(other.cmd(&[b"SHUTDOWN", b"ABORT"]), b"+OK\r\n");
    assert_eq!(caller.read_reply(), b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n");
    assert_eq!(other.cmd(&[b"SET", b"after", b"1"]), b"+OK\r\n");
    assert!(info_field(&mut m, "server", "shutdown_in_milliseconds").is_none());
    signal(&redis, libc::SIGCONT);
}

/// A replica that does not read makes its master hold the stream for it: INFO measures it
/// (`mem_clients_slaves`, within `mem_total_replication_buffers`, apart from
/// `mem_clients_normal`) and reports it as not counted for `maxmemory`
/// (`mem_not_counted_for_evict`, as Redis); once the replica reads again the buffers go.
#[test]
fn a_slow_replicas_buffer_is_measured() {
    let atoll = start_master("yes");
    let mut m = con(atoll.port);
    let redis = start_replica(&atoll);
    let mut r = con(redis.port);
    link_up(&mut r);
    let mut p = redis::pipe();
    for i in 0..1000 {
        p.cmd("SET").arg(format!("key:{i}")).arg("v").ignore();
    }
    let () = p.query(&mut m).unwrap();
    assert_eq!(q(&mut m, &["WAIT", "1", "0"]), Value::Int(1));
    signal(&redis, libc::SIGSTOP);
    let payload = "A".repeat(100);
    for _ in 0..400 {
        let mut p = redis::pipe();
        for _ in 0..500 {
            p.cmd("SETRANGE").arg("key:0").arg(0).arg(&payload).ignore();
        }
        let () = p.query(&mut m).unwrap();
    }
    // One INFO, so the figures are of one moment.
    let info = s(&mut m, &["INFO", "memory"]);
    let field = |name: &str| -> u64 {
        info.lines().find_map(|l| l.strip_prefix(&format!("{name}:"))).unwrap().trim().parse().unwrap()
    };
    let held = field("mem_clients_slaves");
    assert!(held > 8 * 1024 * 1024, "the stopped replica's buffer: {held}");
    assert_eq!(field("mem_not_counted_for_evict"), held);
    assert!(field("mem_total_replication_buffers") >= held);
    assert!(field("mem_clients_normal") < 1024 * 1024, "the replica counted as a normal client");
    signal(&redis, libc::SIGCONT);
    assert_eq!(q(&mut m, &["WAIT", "1", "0"]), Value::Int(1));
    // Caught up, the replica holds no buffer beyond its connection's own small state.
    wait_until("the replica's buffers given back", 10, || {
        info_field(&mut m, "memory", "mem_clients_slaves").unwrap().parse::<u64>().unwrap() < 64 * 1024
    });
}

/// A replica's view of a master: SYNC, the snapshot skipped, then the commands as they come.
struct ReplStream {
    stream: std::net::TcpStream,
    buf: Vec<u8>,
}

impl ReplStream {
    fn attach(port: u16) -> ReplStream {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        stream.write_all(b"SYNC\r\n").unwrap();
        let mut buf = Vec::new();
        loop {
            // Newlines are the master's keepalives while it prepares the snapshot.
            let skip = buf.iter().take_while(|&&b| b == b'\n').count();
            buf.drain(..skip);
            if let Some(eol) = buf.windows(2).position(|w| w == b"\r\n") {
                assert_eq!(buf[0], b'$', "not a disk-based snapshot: {}", show(&buf[..eol]));
                let len: usize = std::str::from_utf8(&buf[1..eol]).unwrap().parse().unwrap();
                if buf.len() >= eol + 2 + len {
                    buf.drain(..eol + 2 + len);
                    return ReplStream { stream, buf };
                }
            }
            let mut tmp = [0u8; 65536];
            let n = stream.read(&mut tmp).expect("read the snapshot");
            assert!(n > 0, "master closed the link");
            buf.extend_from_slice(&tmp[..n]);
        }
    }

    /// The commands that arrive until the link is quiet for half a second (PINGs left out).
    fn commands(&mut self) -> Vec<String> {
        use std::io::Read;
        self.stream.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
        let mut tmp = [0u8; 65536];
        while let Ok(n) = self.stream.read(&mut tmp) {
            if n == 0 {
                break;
            }
            self.buf.extend_from_slice(&tmp[..n]);
        }
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < self.buf.len() {
            let end = reply_end(&self.buf, pos).expect("a whole command");
            let words: Vec<String> =
                parse_array(&self.buf[pos..end]).iter().map(|w| String::from_utf8_lossy(w).into_owned()).collect();
            if !words[0].eq_ignore_ascii_case("PING") {
                out.push(words.join(" "));
            }
            pos = end;
        }
        self.buf.clear();
        out
    }
}

/// What reaches a replica of Redis 7.2.6 (first) and of Atoll (second) when `work` runs on
/// each, with disk-based full syncs: the streams to compare.
fn streams_beside_redis(work: impl Fn(&mut redis::Connection)) -> Vec<Vec<String>> {
    let atoll = start_atoll(&["--repl-diskless-sync", "no"]);
    let redis = start_redis(&["--repl-diskless-sync", "no"]);
    let mut seen = Vec::new();
    for port in [redis.port, atoll.port] {
        let mut c = con(port);
        let mut repl = ReplStream::attach(port);
        work(&mut c);
        seen.push(repl.commands());
    }
    seen
}

/// Deleting a whole key as a side effect (SPOP of every member, GETEX with a time already past,
/// RESTORE … REPLACE with a past TTL) reaches replicas as DEL or UNLINK, chosen by the lazyfree
/// setting Redis consults for that command.
#[test]
fn implicit_deletions_propagate_as_del_or_unlink_as_redis_does() {
    let seen = streams_beside_redis(|c| {
        for lazy in ["no", "yes"] {
            q(c, &["CONFIG", "SET", "lazyfree-lazy-server-del", lazy]);
            q(c, &["CONFIG", "SET", "lazyfree-lazy-expire", lazy]);
            q(c, &["SADD", "s", "a", "b", "c"]);
            q(c, &["SPOP", "s", "3"]);
            q(c, &["SET", "g", "v"]);
            q(c, &["GETEX", "g", "PXAT", "1"]);
            q(c, &["SET", "r", "v"]);
            let Value::BulkString(payload) = q(c, &["DUMP", "r"]) else { panic!("DUMP") };
            let mut restore = redis::cmd("RESTORE");
            restore.arg("r").arg(1).arg(payload).arg("REPLACE").arg("ABSTTL");
            let _: Value = restore.query(c).unwrap();
            assert_eq!(q(c, &["EXISTS", "s", "g", "r"]), Value::Int(0));
        }
    });
    assert_eq!(seen[1], seen[0], "Atoll's replication stream (right) against Redis's (left)");
    assert!(seen[0].iter().any(|c| c == "UNLINK s") && seen[0].iter().any(|c| c == "DEL r"), "{:?}", seen[0]);
}

/// ZMPOP, BZMPOP, LMPOP and BLMPOP reach replicas as ZPOPMIN/ZPOPMAX/LPOP/RPOP with the count
/// actually popped (COUNT 10 on three members: 3), as Redis 7.2.6 propagates them (Redis's
/// "ZMPOP propagate as pop with count command to replica"; Atoll sent the count asked for).
#[test]
fn multi_key_pops_propagate_with_the_count_popped_as_redis_does() {
    let seen = streams_beside_redis(|c| {
        q(c, &["ZADD", "z{t}", "1", "one", "2", "two", "3", "three"]);
        q(c, &["ZMPOP", "1", "z{t}", "MIN"]);
        q(c, &["ZMPOP", "2", "nokey{t}", "z{t}", "MAX", "COUNT", "10"]);
        q(c, &["ZADD", "z{t}", "1", "one", "2", "two", "3", "three"]);
        q(c, &["BZMPOP", "0", "1", "z{t}", "MIN", "COUNT", "2"]);
        q(c, &["BZMPOP", "0", "1", "z{t}", "MAX", "COUNT", "5"]);
        q(c, &["RPUSH", "l{t}", "a", "b", "c"]);
        q(c, &["LMPOP", "1", "l{t}", "LEFT", "COUNT", "2"]);
        q(c, &["BLMPOP", "0", "1", "l{t}", "RIGHT", "COUNT", "9"]);
    });
    assert_eq!(seen[1], seen[0], "Atoll's replication stream (right) against Redis's (left)");
    assert!(seen[0].iter().any(|c| c == "ZPOPMAX z{t} 2"), "{:?}", seen[0]);
}

/// SET with a relative time reaches replicas as SET … PXAT <ms>; one given PXAT goes as the
/// client sent it (its spelling and GET kept), as Redis 7.2.6 propagates it.
#[test]
fn set_given_pxat_propagates_as_sent_as_redis_does() {
    let atoll = start_atoll(&["--repl-diskless-sync", "no"]);
    let redis = start_redis(&["--repl-diskless-sync", "no"]);
    let mut seen = Vec::new();
    for port in [redis.port, atoll.port] {
        let mut c = con(port);
        let mut repl = ReplStream::attach(port);
        q(&mut c, &["SET", "a", "v", "pxat", "4102444800000"]);
        q(&mut c, &["SET", "a", "w", "PxAt", "4102444800000", "GET"]);
        q(&mut c, &["SET", "b", "v", "NX", "pxat", "4102444800001"]);
        q(&mut c, &["SET", "c", "v", "ex", "100", "GET"]);
        q(&mut c, &["SET", "c", "v", "XX", "PX", "100000"]);
        seen.push(
            repl.commands()
                .iter()
                .map(|c| if c.contains("4102444800") { c.clone() } else { without_times(c) })
                .collect::<Vec<_>>(),
        );
        let cmds = repl.commands();
        assert!(cmds.is_empty(), "{cmds:?}");
    }
    assert_eq!(seen[1], seen[0], "Atoll's replication stream (right) against Redis's (left)");
    assert!(seen[0].iter().any(|c| c == "SET a w PxAt 4102444800000 GET"), "{:?}", seen[0]);
}

/// What came after 7.2 reaches replicas as Valkey 9.1.2 sends it: SET … IFEQ verbatim (without
/// GET; as SET … PXAT with an expiry), DELIFEQ as DEL, MSETEX with its absolute time, and
/// nothing for a condition that failed.
#[test]
fn commands_beyond_72_propagate_as_valkey_does() {
    let atoll = start_atoll(&["--repl-diskless-sync", "no"]);
    let valkey = start_valkey(&["--repl-diskless-sync", "no"]);
    let mut seen = Vec::new();
    for port in [valkey.port, atoll.port] {
        let mut c = con(port);
        let mut repl = ReplStream::attach(port);
        for cmd in [
            &["SET", "k", "v"][..],
            &["SET", "k", "v2", "IFEQ", "v"],
            &["SET", "k", "v3", "IFEQ", "nope"],
            &["SET", "k", "v4", "IFEQ", "v2", "EX", "100"],
            &["SET", "k", "v5", "IFEQ", "v4", "GET"],
            &["SET", "k", "GET", "IFEQ", "v5", "GET"],
            &["DELIFEQ", "k", "nope"],
            &["DELIFEQ", "k", "GET"],
            &["MSETEX", "2", "a", "1", "b", "2", "EX", "100"],
            &["MSETEX", "1", "a", "1"],
            &["MSETEX", "2", "a", "1", "c", "2", "NX"],
            &["MSETEX", "1", "a", "3", "XX", "KEEPTTL"],
            &["HSET", "h", "a", "1", "b", "2"],
            &["HGETDEL", "h", "FIELDS", "2", "a", "x"],
            &["HGETDEL", "h", "FIELDS", "1", "zz"],
            &["HGETDEL", "h", "FIELDS", "1", "b"],
        ] {
            q(&mut c, cmd);
        }
        // Absolute times differ between the two runs: compare their presence, not their value.
        let stream: Vec<String> = repl
            .commands()
            .into_iter()
            .map(|c| {
                let words: Vec<&str> = c.split(' ').collect();
                let mut out = Vec::new();
                for (i, w) in words.iter().enumerate() {
                    let after_pxat = i > 0 && words[i - 1].eq_ignore_ascii_case("PXAT");
                    out.push(if after_pxat { "<ms>".to_string() } else { w.to_string() });
                }
                out.join(" ")
            })
            .collect();
        seen.push(stream);
    }
    assert_eq!(seen[1], seen[0], "Atoll's replication stream (right) against Valkey 9.1.2's (left)");
    assert!(seen[0].iter().any(|c| c == "DEL k"), "{:?}", seen[0]);
}

/// `bind-source-addr`: a replica connects to its master from that address (another loopback
/// address here), which the master's INFO shows — Atoll and Redis 7.2.6 as replicas, each of
/// an Atoll and a Redis master. A source it cannot bind keeps the link down, not connected
/// from elsewhere.
#[test]
fn bind_source_addr_is_where_a_replica_connects_from() {
    for master_is_atoll in [true, false] {
        let master = if master_is_atoll {
            start_atoll(&["--protected-mode", "no"])
        } else {
            start_redis(&["--protected-mode", "no"])
        };
        for replica_is_atoll in [true, false] {
            let args = ["--bind-source-addr", "127.0.0.2", "--replicaof", "127.0.0.1", &master.port.to_string()];
            let replica = if replica_is_atoll { start_atoll(&args) } else { start_redis(&args) };
            let mut r = con(replica.port);
            link_up(&mut r);
            let mut m = con(master.port);
            let slave0 = info_field(&mut m, "replication", "slave0").unwrap_or_default();
            assert!(
                slave0.starts_with("ip=127.0.0.2,"),
                "master atoll={master_is_atoll}, replica atoll={replica_is_atoll}: {slave0}"
            );
            drop(replica);
            wait_until("the replica gone", 20, || {
                info_field(&mut m, "replication", "connected_slaves").as_deref() == Some("0")
            });
        }
    }
    // An address no interface has: the replica never links.
    let master = start_atoll(&["--protected-mode", "no"]);
    let replica =
        start_atoll(&["--bind-source-addr", "192.0.2.7", "--replicaof", "127.0.0.1", &master.port.to_string()]);
    std::thread::sleep(std::time::Duration::from_secs(2));
    let mut r = con(replica.port);
    assert_eq!(info_field(&mut r, "replication", "master_link_status").as_deref(), Some("down"));
    let mut m = con(master.port);
    assert_eq!(info_field(&mut m, "replication", "connected_slaves").as_deref(), Some("0"));
}

/// `replica-lazy-flush`: at a full sync the replica's old keys go to the lazyfree thread
/// (INFO `lazyfreed_objects` counts them, a key each) with `yes`, and are freed in place with
/// `no` — Atoll and Redis 7.2.6 as replicas, beside each other.
#[test]
fn replica_lazy_flush_frees_the_old_keys_in_the_background() {
    let master = start_atoll(&["--protected-mode", "no"]);
    let mut m = con(master.port);
    q(&mut m, &["SET", "from-master", "1"]);
    for lazy in ["yes", "no"] {
        let mut counts = Vec::new();
        for replica_is_atoll in [true, false] {
            let args = ["--replica-lazy-flush", lazy];
            let replica = if replica_is_atoll { start_atoll(&args) } else { start_redis(&args) };
            let mut r = con(replica.port);
            for i in 0..200 {
                q(&mut r, &["SET", &format!("own:{i}"), "x"]);
            }
            q(&mut r, &["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
            link_up(&mut r);
            assert_eq!(s(&mut r, &["DBSIZE"]), "1");
            let freed = || info_field(&mut con(replica.port), "memory", "lazyfreed_objects").unwrap_or_default();
            if lazy == "yes" {
                let deadline = std::time::Instant::now() + Duration::from_secs(10);
                while freed() != "200" {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "atoll={replica_is_atoll}: lazyfreed_objects {}",
                        freed()
                    );
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            counts.push(freed());
        }
        assert_eq!(counts[0], counts[1], "replica-lazy-flush {lazy}: Atoll, then Redis");
        assert_eq!(counts[0], if lazy == "yes" { "200" } else { "0" }, "replica-lazy-flush {lazy}");
    }
}

/// CLIENT CAPA redirect (Valkey 8): on a replica, a client that declared it gets
/// `-REDIRECT master:port` for commands that read or write data (inside MULTI too, which then
/// aborts), reads again after READONLY, redirected reads after READWRITE; commands that touch
/// no data are served. Atoll's replica of Atoll beside Valkey 9.1.2's of Valkey, reply for
/// reply (the master's port written `PORT`). Without the capability READONLY answers as in
/// Redis 7.2 (Valkey accepts it: tests/known_differences.txt).
#[test]
fn client_capa_redirect_sends_data_commands_to_the_master_as_valkey_does() {
    let cases: &[&[&str]] = &[
        &["CLIENT", "CAPA"],
        &["CLIENT", "CAPA", "foo"],
        &["GET", "k"],
        &["CLIENT", "CAPA", "REDIRECT", "other"],
        &["GET", "k"],
        &["SET", "k", "x"],
        &["PING"],
        &["ECHO", "e"],
        &["DBSIZE"],
        &["KEYS", "*"],
        &["EXISTS", "k"],
        &["SCAN", "0"],
        &["TYPE", "k"],
        &["PUBLISH", "ch", "m"],
        &["EVAL", "return 1", "0"],
        &["EVAL_RO", "return redis.call('get', KEYS[1])", "1", "k"],
        &["MULTI"],
        &["GET", "k"],
        &["PING"],
        &["EXEC"],
        &["READONLY"],
        &["GET", "k"],
        &["MGET", "k", "k2"],
        &["SET", "k", "x"],
        &["FLUSHALL"],
        &["DBSIZE"],
        &["READWRITE"],
        &["GET", "k"],
        &["SELECT", "1"],
        &["TTL", "k"],
        &["RESET"],
        &["GET", "k"],
    ];
    let mut runs = Vec::new();
    for valkey in [true, false] {
        let start = |args: &[&str]| if valkey { start_valkey(args) } else { start_atoll(args) };
        let master = start(&["--repl-diskless-sync-delay", "0"]);
        let mut m = RawConn::connect(master.port);
        assert_eq!(m.cmd(&[b"SET", b"k", b"v"]), b"+OK\r\n");
        let replica = start(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
        let mut rc = con(replica.port);
        link_up(&mut rc);
        let mut c = RawConn::connect(replica.port);
        let port = master.port.to_string();
        let mut replies = Vec::new();
        for case in cases {
            let args: Vec<&[u8]> = case.iter().map(|a| a.as_bytes()).collect();
            replies.push(show(&c.cmd(&args)).replace(&port, "PORT"));
        }
        runs.push(replies);
    }
    let lines =
        |r: &[String]| -> Vec<String> { cases.iter().zip(r).map(|(c, r)| format!("{}: {r}", c.join(" "))).collect() };
    assert_eq!(lines(&runs[1]), lines(&runs[0]), "Atoll (left) against Valkey 9.1.2 (right)");
    assert!(runs[0][4].contains("REDIRECT 127.0.0.1:PORT"), "{:?}", runs[0]);
    // Without the capability: Redis 7.2's answer.
    let a = start_atoll(&[]);
    let mut c = RawConn::connect(a.port);
    assert_eq!(show(&c.cmd(&[b"READONLY"])), show(b"-ERR This instance has cluster support disabled\r\n"));
}

/// The words of a replicated command with its absolute times (after HPEXPIREAT or PXAT)
/// replaced, lower-cased: Valkey keeps the case a client sent.
fn without_times(c: &str) -> String {
    let words: Vec<&str> = c.split(' ').collect();
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        let timed = i >= 2
            && (words[0].eq_ignore_ascii_case("HPEXPIREAT") && i == 2 || words[i - 1].eq_ignore_ascii_case("PXAT"));
        out.push(if timed { "<ms>".to_string() } else { w.to_ascii_lowercase() });
    }
    out.join(" ")
}

/// Hash-field expiry reaches replicas in absolute form, as Valkey 9.1.2 sends it: HEXPIRE and
/// HGETEX … EX as HPEXPIREAT, HSETEX … EX as HSETEX … PXAT, a time already past as the HDEL of
/// what it removed, nothing for a condition that failed.
#[test]
fn hash_field_expiry_propagates_as_valkey_does() {
    let atoll = start_atoll(&["--repl-diskless-sync", "no"]);
    let valkey = start_valkey(&["--repl-diskless-sync", "no"]);
    let mut seen = Vec::new();
    for port in [valkey.port, atoll.port] {
        let mut c = con(port);
        let mut repl = ReplStream::attach(port);
        for cmd in [
            &["HSET", "h", "a", "1", "b", "2", "c", "3", "d", "4"][..],
            &["HEXPIRE", "h", "100", "FIELDS", "2", "a", "zz"],
            &["HPEXPIRE", "h", "100000", "NX", "FIELDS", "2", "a", "b"],
            &["HEXPIREAT", "h", "4102444800", "XX", "FIELDS", "1", "c"],
            &["HPEXPIREAT", "h", "4102444800000", "FIELDS", "1", "c"],
            &["HEXPIRE", "h", "0", "FIELDS", "2", "d", "zz"],
            &["HPERSIST", "h", "FIELDS", "1", "zz"],
            &["HPERSIST", "h", "FIELDS", "2", "a", "b"],
            &["HGETEX", "h", "FIELDS", "1", "a"],
            &["HGETEX", "h", "EX", "100", "FIELDS", "2", "a", "zz"],
            &["HGETEX", "h", "PERSIST", "FIELDS", "2", "a", "b"],
            &["HGETEX", "h", "PXAT", "1", "FIELDS", "1", "b"],
            &["HSETEX", "h", "EX", "100", "FIELDS", "2", "e", "5", "f", "6"],
            &["HSETEX", "h", "FNX", "FIELDS", "1", "e", "5"],
            &["HSETEX", "h", "KEEPTTL", "FIELDS", "1", "e", "55"],
            &["HSETEX", "h2", "NX", "PX", "100000", "FIELDS", "1", "x", "1"],
            &["HINCRBY", "h", "e", "1"],
            &["HINCRBYFLOAT", "h", "e", "0.5"],
            &["HINCRBY", "h", "c", "1"],
            &["HINCRBYFLOAT", "h", "c", "1.5"],
        ] {
            q(&mut c, cmd);
        }
        seen.push(repl.commands().iter().map(|c| without_times(c)).collect::<Vec<_>>());
    }
    assert_eq!(seen[0], seen[1], "Valkey 9.1.2's replication stream (left) against Atoll's (right)");
    assert!(seen[0].iter().any(|c| c.starts_with("hdel h d")), "{:?}", seen[0]);
}

/// Replicas of Atoll — Atoll and Valkey 9.1.2 — get field deadlines in the full sync (Valkey's
/// RDB type 22) and in the stream, answer as if a due field were gone, and leave removing it
/// to the master: with the master's active expiry off a replica removes nothing (its
/// `expired_fields` stays 0), once it is on the master's HDEL empties both.
#[test]
fn replicas_hold_field_deadlines_and_wait_for_the_masters_hdel() {
    let m = start_atoll(&["--enable-debug-command", "yes", "--repl-diskless-sync-delay", "0"]);
    let mut mc = con(m.port);
    q(&mut mc, &["HSET", "synced", "a", "1", "b", "2"]);
    q(&mut mc, &["HPEXPIREAT", "synced", "4102444800000", "FIELDS", "1", "a"]);
    let port = m.port.to_string();
    let replicas =
        [start_atoll(&["--replicaof", "127.0.0.1", &port]), start_valkey(&["--replicaof", "127.0.0.1", &port])];
    let mut rcs: Vec<redis::Connection> = replicas.iter().map(|r| con(r.port)).collect();
    for rc in rcs.iter_mut() {
        link_up(rc);
        assert_eq!(s(rc, &["HPEXPIRETIME", "synced", "FIELDS", "2", "a", "b"]), "array([int(4102444800000), int(-1)])");
    }
    q(&mut mc, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    q(&mut mc, &["HSET", "h", "a", "1", "b", "2", "c", "3"]);
    q(&mut mc, &["HPEXPIRE", "h", "300", "FIELDS", "2", "a", "b"]);
    for rc in rcs.iter_mut() {
        wait_until("the deadlines on the replica", 10, || {
            s(rc, &["HPTTL", "h", "FIELDS", "1", "b"]) != "array([int(-2)])"
        });
    }
    std::thread::sleep(Duration::from_millis(600));
    for (i, rc) in rcs.iter_mut().enumerate() {
        assert_eq!(
            s(rc, &["HLEN", "h"]),
            if i == 0 { "1" } else { "3" },
            "replica {i}: HLEN (Valkey counts due fields)"
        );
        assert_eq!(s(rc, &["HGET", "h", "a"]), "nil", "replica {i}");
        assert_eq!(s(rc, &["HTTL", "h", "FIELDS", "1", "a"]), "array([int(-2)])", "replica {i}");
        assert_eq!(info_field(rc, "stats", "expired_fields").as_deref(), Some("0"), "replica {i} expires nothing");
    }
    q(&mut mc, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
    wait_until("the master's active field expiry", 10, || {
        info_field(&mut mc, "stats", "expired_fields").as_deref() == Some("2")
    });
    for (i, rc) in rcs.iter_mut().enumerate() {
        wait_until("the HDEL on the replica", 10, || s(rc, &["HLEN", "h"]) == "1");
        assert_eq!(s(rc, &["HGETALL", "h"]), s(&mut mc, &["HGETALL", "h"]), "replica {i}");
    }
    // The last field's deadline takes the key with it, on the replicas too.
    q(&mut mc, &["HPEXPIRE", "h", "50", "FIELDS", "1", "c"]);
    wait_until("the key's removal", 10, || s(&mut mc, &["EXISTS", "h"]) == "0");
    for rc in rcs.iter_mut() {
        wait_until("the key's removal on the replica", 10, || s(rc, &["EXISTS", "h"]) == "0");
    }
}

/// Atoll as a replica of Valkey 9.1.2: the full sync (a `VALKEY080` snapshot with field
/// deadlines) and the stream (HPEXPIREAT, HSETEX … PXAT, the master's MULTI/HDEL/UNLINK of
/// its active field expiry) leave Atoll with the master's hash, deadlines included.
#[test]
fn atoll_follows_a_valkey_master_with_field_deadlines() {
    let m = start_valkey(&["--repl-diskless-sync", "no"]);
    let mut mc = con(m.port);
    q(&mut mc, &["HSET", "synced", "a", "1", "b", "2"]);
    q(&mut mc, &["HPEXPIREAT", "synced", "4102444800000", "FIELDS", "1", "a"]);
    let r = start_atoll(&["--replicaof", "127.0.0.1", &m.port.to_string()]);
    let mut rc = con(r.port);
    link_up(&mut rc);
    assert_eq!(
        s(&mut rc, &["HPEXPIRETIME", "synced", "FIELDS", "2", "a", "b"]),
        "array([int(4102444800000), int(-1)])"
    );
    q(&mut mc, &["HSET", "h", "a", "1", "b", "2", "c", "3"]);
    q(&mut mc, &["HSETEX", "h", "PX", "200", "FIELDS", "1", "d", "4"]);
    q(&mut mc, &["HPEXPIRE", "h", "200", "FIELDS", "1", "a"]);
    q(&mut mc, &["HPEXPIREAT", "h", "4102444800000", "FIELDS", "1", "b"]);
    q(&mut mc, &["HPEXPIRE", "gone", "200", "FIELDS", "1", "x"]);
    q(&mut mc, &["HSET", "gone", "x", "1"]);
    q(&mut mc, &["HPEXPIRE", "gone", "200", "FIELDS", "1", "x"]);
    wait_until("the replica's copy", 10, || s(&mut rc, &["HLEN", "h"]) == "4" || s(&mut rc, &["HLEN", "h"]) == "2");
    wait_until("the master's field expiry on the replica", 10, || {
        s(&mut rc, &["EXISTS", "gone"]) == "0" && s(&mut rc, &["HLEN", "h"]) == "2"
    });
    let fields = ["HMGET", "h", "a", "b", "c", "d"];
    assert_eq!(s(&mut rc, &fields), s(&mut mc, &fields));
    assert_eq!(
        s(&mut rc, &["HPEXPIRETIME", "h", "FIELDS", "3", "a", "b", "c"]),
        "array([int(-2), int(4102444800000), int(-1)])"
    );
    assert_eq!(
        info_field(&mut rc, "stats", "expired_fields").as_deref(),
        Some("0"),
        "the replica expired nothing itself"
    );
}

/// Redis 8.2's trim policies on XADD/XTRIM (KEEPREF / DELREF / ACKED) reach a replica as an
/// exact trim that removes the same entries: an approximate or limited ACKED trim passes over
/// entries a group still owes, so the MINID the effect carries is the first entry it did not
/// look at, not the first entry left. The replica keeps Redis's default node size while the
/// master's nodes hold 10 entries, so nothing depends on the node layout.
#[test]
fn stream_trim_policies_reach_a_replica_exactly() {
    let master = start_master("no");
    let mut m = con(master.port);
    q(&mut m, &["CONFIG", "SET", "stream-node-max-entries", "10"]);
    let replica = start_atoll(&["--enable-debug-command", "yes", "--replicaof", "127.0.0.1", &master.port.to_string()]);
    let mut r = con(replica.port);
    link_up(&mut r);
    for i in 1..=60 {
        q(&mut m, &["XADD", "s", &format!("{i}-1"), "f", "v"]);
    }
    q(&mut m, &["XGROUP", "CREATE", "s", "g", "0"]);
    q(&mut m, &["XREADGROUP", "GROUP", "g", "c", "COUNT", "25", "STREAMS", "s", ">"]);
    let acks: Vec<String> = (1..=25).filter(|i| *i != 3 && *i != 17).map(|i| format!("{i}-1")).collect();
    let mut ack = vec!["XACK", "s", "g"];
    ack.extend(acks.iter().map(|a| a.as_str()));
    assert_eq!(s(&mut m, &ack), "23");
    // Every node lies inside the trim, so `~` walks them all: 1..25 go but 3 and 17 (pending)
    // and 26..60 (not yet read) stay.
    assert_eq!(s(&mut m, &["XTRIM", "s", "MAXLEN", "~", "20", "ACKED"]), "23");
    assert_eq!(s(&mut m, &["XLEN", "s"]), "37");
    q(&mut m, &["XREADGROUP", "GROUP", "g", "c", "COUNT", "100", "STREAMS", "s", ">"]);
    let acks: Vec<String> = (26..=40).map(|i| format!("{i}-1")).collect();
    let mut ack = vec!["XACK", "s", "g"];
    ack.extend(acks.iter().map(|a| a.as_str()));
    q(&mut m, &ack);
    // LIMIT 12 stops before the node of 31..40: 26..30 go, and the replica is told MINID 31-1,
    // not 3-1 (the first entry left), or it would keep 26..30.
    assert_eq!(s(&mut m, &["XTRIM", "s", "MINID", "~", "45-1", "LIMIT", "12", "ACKED"]), "5");
    assert_eq!(s(&mut m, &["XLEN", "s"]), "32");
    let pending = |c: &mut redis::Connection| match q(c, &["XPENDING", "s", "g"]) {
        Value::Array(v) => match &v[0] {
            Value::Int(n) => *n,
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    };
    // KEEPREF is the default; the word is accepted anywhere among the options.
    assert_eq!(s(&mut m, &["XTRIM", "s", "MINID", "33-1", "KEEPREF"]), "4");
    assert_eq!(pending(&mut m), 22, "KEEPREF: 3 and 17 are gone but still pending");
    // DELREF: the entries go with every group's reference to them.
    q(&mut m, &["XADD", "s", "DELREF", "MAXLEN", "~", "5", "61-1", "f", "v"]);
    assert_eq!(s(&mut m, &["XLEN", "s"]), "5");
    assert_eq!(pending(&mut m), 6, "41..56 went with their references; 57..60 and the dangling 3 and 17 remain");
    // ACKED on XADD without any group owing anything: a plain exact trim.
    q(&mut m, &["XGROUP", "DESTROY", "s", "g"]);
    q(&mut m, &["XADD", "s", "ACKED", "MAXLEN", "~", "2", "62-1", "f", "v"]);
    assert_eq!(s(&mut m, &["XLEN", "s"]), "2");
    // ACKED by MAXLEN with `~` passes nodes keeping what the group owes: the replica is told
    // the MINID it reached, since an exact MAXLEN would stop inside the first node (the
    // replica's nodes now as small as the master's, so that it would).
    q(&mut r, &["CONFIG", "SET", "stream-node-max-entries", "10"]);
    for i in 1..=30 {
        q(&mut m, &["XADD", "s2", &format!("{i}-1"), "f", "v"]);
    }
    q(&mut m, &["XGROUP", "CREATE", "s2", "g", "0"]);
    q(&mut m, &["XREADGROUP", "GROUP", "g", "c", "COUNT", "30", "STREAMS", "s2", ">"]);
    q(&mut m, &["XACK", "s2", "g", "9-1", "10-1", "19-1", "20-1", "29-1", "30-1"]);
    assert_eq!(s(&mut m, &["XTRIM", "s2", "MAXLEN", "~", "0", "ACKED"]), "6");
    assert_eq!(s(&mut m, &["XLEN", "s2"]), "24");
    assert_in_sync(&mut m, &mut r);
    assert_eq!(s(&mut r, &["XLEN", "s"]), "2");
    assert_eq!(s(&mut r, &["XLEN", "s2"]), "24");
    assert_eq!(
        format!("{:?}", q(&mut m, &["XRANGE", "s", "-", "+"])),
        format!("{:?}", q(&mut r, &["XRANGE", "s", "-", "+"]))
    );
}

/// INFO's replication traffic: what a master writes to its replicas and what a replica reads
/// from its master (the snapshot and the stream) are counted apart (`total_net_repl_*`,
/// `instantaneous_*_repl_kbps`) and within the totals, as Redis 7.2.6 counts them — checked
/// on a Redis pair first (the premise), then on Atoll pairs.
#[test]
fn replication_traffic_is_counted_as_redis_counts_it() {
    let int = |c: &mut redis::Connection, section: &str, name: &str| -> f64 {
        info_field(c, section, name).unwrap_or_else(|| panic!("no {name}")).parse().unwrap()
    };
    type Start = fn(&[&str]) -> ServerProc;
    let (redis, atoll): (Start, Start) = (start_redis, start_atoll);
    let pairs = [
        ("redis → redis", redis, redis),
        ("atoll → atoll", atoll, atoll),
        ("atoll → redis", atoll, redis),
        ("redis → atoll", redis, atoll),
    ];
    for (pair, start_m, start_r) in pairs {
        let master = start_m(&["--repl-diskless-sync-delay", "0", "--repl-ping-replica-period", "1"]);
        let mut m = con(master.port);
        let value = "x".repeat(500);
        for i in 0..200 {
            q(&mut m, &["SET", &format!("before:{i}"), &value]);
        }
        let replica = start_r(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
        let mut r = con(replica.port);
        link_up(&mut r);
        // Traffic for a while, so the per-second rates have something to show.
        let port = master.port;
        let writer = std::thread::spawn(move || {
            let mut w = con(port);
            let start = Instant::now();
            let mut i = 0;
            while start.elapsed() < Duration::from_millis(3000) {
                q(&mut w, &["SET", &format!("during:{}", i % 100), &"y".repeat(1000)]);
                i += 1;
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        std::thread::sleep(Duration::from_millis(2200));
        assert!(int(&mut m, "stats", "instantaneous_output_repl_kbps") > 0.0, "{pair}: master's rate");
        assert!(int(&mut r, "stats", "instantaneous_input_repl_kbps") > 0.0, "{pair}: replica's rate");
        assert_eq!(int(&mut m, "stats", "instantaneous_input_repl_kbps"), 0.0, "{pair}");
        assert_eq!(int(&mut r, "stats", "instantaneous_output_repl_kbps"), 0.0, "{pair}");
        writer.join().unwrap();
        // Once the replica has everything: it read what the master wrote to it, byte for
        // byte (the snapshot, its header line, the stream), and both hold more than the stream.
        let mut last = (0.0, 0.0);
        wait_until(&format!("{pair}: the counts to agree"), 20, || {
            let offset = int(&mut m, "replication", "master_repl_offset");
            let (out, inp) = (
                int(&mut m, "stats", "total_net_repl_output_bytes"),
                int(&mut r, "stats", "total_net_repl_input_bytes"),
            );
            last = (out, inp);
            int(&mut r, "replication", "slave_repl_offset") == offset && out == inp && out > offset
        });
        let (out, _) = last;
        assert!(out > 200.0 * 500.0 + 1000.0, "{pair}: {out}");
        // The totals hold the replication bytes too.
        assert!(int(&mut m, "stats", "total_net_output_bytes") > out, "{pair}");
        assert!(int(&mut r, "stats", "total_net_input_bytes") > out, "{pair}");
        assert_eq!(int(&mut m, "stats", "total_net_repl_input_bytes"), 0.0, "{pair}");
        assert_eq!(int(&mut r, "stats", "total_net_repl_output_bytes"), 0.0, "{pair}");
        // CONFIG RESETSTAT starts them again.
        q(&mut m, &["CONFIG", "RESETSTAT"]);
        assert!(int(&mut m, "stats", "total_net_repl_output_bytes") < 1000.0, "{pair}");
    }
}

/// `propagation-error-behavior`: a command of the master's stream that the replica answers
/// with an error is logged ("== CRITICAL =="), and with `panic` — or `panic-on-replicas` on a
/// read-only replica — the replica stops, as Redis 7.2.6's does (checked on it first).
#[test]
fn propagation_error_behavior_acts_as_in_redis() {
    let master = start_redis(&["--repl-diskless-sync-delay", "0"]);
    let mut m = con(master.port);
    type Start = fn(&[&str]) -> ServerProc;
    let (redis, atoll): (Start, Start) = (start_redis, start_atoll);
    for (who, start) in [("redis", redis), ("atoll", atoll)] {
        for (behavior, read_only, panics) in [
            ("ignore", "yes", false),
            ("panic-on-replicas", "no", false),
            ("panic", "yes", true),
            ("panic-on-replicas", "yes", true),
        ] {
            let log = std::env::temp_dir()
                .join(format!("atoll-propagation-{}-{who}-{behavior}-{read_only}.log", std::process::id()));
            let _ = std::fs::remove_file(&log);
            let port = master.port.to_string();
            let mut replica = start(&[
                "--replicaof",
                "127.0.0.1",
                &port,
                "--propagation-error-behavior",
                behavior,
                "--replica-read-only",
                read_only,
                "--logfile",
                log.to_str().unwrap(),
                "--loglevel",
                "notice",
            ]);
            let mut r = con(replica.port);
            link_up(&mut r);
            q(&mut m, &["DEBUG", "REPLICATE", "fake-command-1"]);
            let case = format!("{who}, {behavior}, replica-read-only {read_only}");
            if panics {
                wait_until(&format!("{case}: the replica to stop"), 20, || {
                    matches!(replica.child.try_wait(), Ok(Some(_)))
                });
                let text = std::fs::read_to_string(&log).unwrap();
                assert!(
                    text.contains(
                        "This replica panicked sending an error to its master after processing the command '<unknown>'"
                    ),
                    "{case}: {text}"
                );
            } else {
                let tag = format!("after-{who}-{behavior}-{read_only}");
                q(&mut m, &["SET", &tag, "1"]);
                wait_until(&format!("{case}: the stream to go on"), 20, || {
                    q(&mut r, &["EXISTS", &tag]) == Value::Int(1)
                });
                assert!(matches!(replica.child.try_wait(), Ok(None)), "{case}: stopped");
                let text = std::fs::read_to_string(&log).unwrap();
                assert!(
                    text.contains(
                        "== CRITICAL == This replica is sending an error to its master: 'unknown command 'fake-command-1'"
                    ),
                    "{case}: {text}"
                );
            }
            let _ = std::fs::remove_file(&log);
        }
    }
}

/// On a replica, CLIENT PAUSE WRITE holds the master's stream back (read, not applied, until
/// the pause ends), and `oom-score-adj-values` applies its replica class while the server
/// follows a master — as Redis 7.2.6 does (checked on it first).
#[test]
fn a_replica_pauses_its_stream_and_takes_the_replica_oom_class() {
    let master = start_redis(&["--repl-diskless-sync-delay", "0"]);
    let mut m = con(master.port);
    type Start = fn(&[&str]) -> ServerProc;
    let (redis, atoll): (Start, Start) = (start_redis, start_atoll);
    for (who, start) in [("redis", redis), ("atoll", atoll)] {
        let replica = start(&["--oom-score-adj", "yes", "--oom-score-adj-values", "10 20 30"]);
        let oom = || -> i64 {
            std::fs::read_to_string(format!("/proc/{}/oom_score_adj", replica.child.id()))
                .unwrap()
                .trim()
                .parse()
                .unwrap()
        };
        let mine: i64 = std::fs::read_to_string("/proc/self/oom_score_adj").unwrap().trim().parse().unwrap();
        assert_eq!(oom(), (mine + 10).min(1000), "{who}: a primary's class");
        let mut r = con(replica.port);
        assert_eq!(s(&mut r, &["REPLICAOF", "127.0.0.1", &master.port.to_string()]), "OK");
        assert_eq!(oom(), (mine + 20).min(1000), "{who}: a replica's class");
        link_up(&mut r);
        q(&mut m, &["SET", "foo", "bar"]);
        let caught_up = |m: &mut redis::Connection, r: &mut redis::Connection, field: &str| {
            info_field(r, "replication", field) == info_field(m, "replication", "master_repl_offset")
        };
        wait_until("the replica to catch up", 20, || caught_up(&mut m, &mut r, "slave_repl_offset"));
        let before = info_field(&mut r, "replication", "slave_repl_offset");
        assert_eq!(s(&mut r, &["CLIENT", "PAUSE", "100000", "WRITE"]), "OK");
        let held = format!("held-for-{who}");
        q(&mut m, &["SET", &held, "bar2"]);
        wait_until("the replica to read the write", 20, || caught_up(&mut m, &mut r, "slave_read_repl_offset"));
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(info_field(&mut r, "replication", "slave_repl_offset"), before, "{who}: applied under the pause");
        assert_eq!(q(&mut r, &["GET", &held]), Value::Nil, "{who}");
        assert_eq!(s(&mut r, &["CLIENT", "UNPAUSE"]), "OK");
        wait_until("the write to apply after the pause", 20, || {
            q(&mut r, &["GET", &held]) == Value::BulkString(b"bar2".to_vec())
        });
        assert_eq!(s(&mut r, &["REPLICAOF", "NO", "ONE"]), "OK");
        assert_eq!(oom(), (mine + 10).min(1000), "{who}: a primary's class again");
    }
}

/// A writable replica (`replica-read-only no`) expires the keys its own clients gave a TTL —
/// the master will never send their DELs — and only those: a key of the master's waits for
/// the master's DEL. INFO's `slave_expires_tracked_keys` counts the names tracked, one per
/// name whatever the databases; FLUSHALL forgets them. Run on Redis 7.2.6 and Atoll replicas
/// of a Redis master, with the AOF off and on (as Redis's own expire test does); both must see
/// the same.
#[test]
fn a_writable_replica_expires_the_keys_its_clients_wrote() {
    let master = start_redis(&["--repl-diskless-sync-delay", "0"]);
    let mut m = con(master.port);
    q(&mut m, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    type Start = fn(&[&str]) -> ServerProc;
    let (redis, atoll): (Start, Start) = (start_redis, start_atoll);
    let mut seen = Vec::new();
    for (who, start) in [("redis", redis), ("atoll", atoll)] {
        let port = master.port.to_string();
        let replica = start(&["--replicaof", "127.0.0.1", &port, "--replica-read-only", "no"]);
        let mut r = con(replica.port);
        link_up(&mut r);
        let mut lines = Vec::new();
        for aof in ["no", "yes"] {
            q(&mut r, &["CONFIG", "SET", "appendonly", aof]);
            wait_until(&format!("{who}: the AOF rewrite"), 20, || {
                info_field(&mut r, "persistence", "aof_rewrite_in_progress").as_deref() == Some("0")
                    && info_field(&mut r, "persistence", "aof_rewrite_scheduled").as_deref() == Some("0")
            });
            q(&mut r, &["FLUSHALL"]);
            let tag = format!("from-master-{aof}");
            q(&mut m, &["SET", &tag, "v", "PX", "50"]);
            wait_until(&format!("{who}: the master's key"), 20, || q(&mut r, &["DBSIZE"]) == Value::Int(1));
            let expired = |r: &mut redis::Connection| info_field(r, "stats", "expired_keys").unwrap();
            let before: u64 = expired(&mut r).parse().unwrap();
            // Long enough that both are still tracked when counted, however slow the round trips.
            q(&mut r, &["SET", "foo", "bar", "PX", "1000"]);
            q(&mut r, &["SET", "keep", "v", "EX", "1000"]);
            q(&mut r, &["SELECT", "3"]);
            q(&mut r, &["SET", "foo", "bar", "PX", "1000"]);
            q(&mut r, &["SELECT", "0"]);
            lines.push(format!("tracked {}", info_field(&mut r, "stats", "slave_expires_tracked_keys").unwrap()));
            wait_until(&format!("{who}: the replica's own keys to expire"), 10, || {
                expired(&mut r).parse::<u64>().unwrap() >= before + 2
            });
            std::thread::sleep(Duration::from_millis(300));
            lines.push(format!("expired {}", expired(&mut r).parse::<u64>().unwrap() - before));
            lines.push(format!("tracked {}", info_field(&mut r, "stats", "slave_expires_tracked_keys").unwrap()));
            // The master's key is past its time too, but stays (hidden) until the master's DEL.
            lines.push(format!("dbsize {:?} get {:?}", q(&mut r, &["DBSIZE"]), q(&mut r, &["GET", &tag])));
            lines.push(format!("foo {:?} keep {:?}", q(&mut r, &["GET", "foo"]), q(&mut r, &["EXISTS", "keep"])));
            q(&mut r, &["FLUSHALL"]);
            lines.push(format!("tracked {}", info_field(&mut r, "stats", "slave_expires_tracked_keys").unwrap()));
        }
        seen.push(lines);
    }
    let expect = ["tracked 2", "expired 2", "tracked 1", "dbsize int(2) get nil", "foo nil keep int(1)", "tracked 0"];
    let expect: Vec<String> = expect.iter().chain(expect.iter()).map(|s| s.to_string()).collect();
    assert_eq!(seen[0], expect, "redis");
    assert_eq!(seen[1], expect, "atoll");
}

fn offset_of(c: &mut redis::Connection) -> i64 {
    info_field(c, "replication", "master_repl_offset").unwrap().parse().unwrap()
}

/// Writes across databases (SELECTs in the stream), a transaction, a script and expiries.
fn chain_writes(m: &mut redis::Connection, round: usize) {
    for db in [0, 3, 0, 9] {
        q(m, &["SELECT", &db.to_string()]);
        q(m, &["INCR", &format!("counter:{round}")]);
        q(m, &["RPUSH", "list", &round.to_string()]);
    }
    q(m, &["SELECT", "0"]);
    redis::pipe()
        .atomic()
        .cmd("SELECT")
        .arg(4)
        .cmd("SET")
        .arg("tx")
        .arg(round)
        .cmd("SELECT")
        .arg(0)
        .query::<Value>(m)
        .unwrap();
    q(m, &["EVAL", "redis.call('hset', KEYS[1], ARGV[1], ARGV[1]); return 1", "1", "lua", &round.to_string()]);
    q(m, &["SET", &format!("ttl:{round}"), "v", "EX", "1000"]);
    q(m, &["SPOP", "set"]);
}

/// Chained replication: an Atoll replica serves replicas of its own with its master's stream
/// and replication ID, byte for byte (their offsets are the top master's), in both mixes the
/// issue names — Redis 7.2.6 → Atoll → {Atoll, Redis 7.2.6} and Atoll → Atoll → {Atoll, Redis
/// 7.2.6} — through full syncs, partial resyncs after killed links (the middle's, the ends'),
/// writes in several databases, transactions and scripts; every node's DEBUG DIGEST equal at
/// the end. Then the middle is promoted (REPLICAOF NO ONE): both ends continue with it by a
/// partial resync (its old ID is its `master_replid2`), and take its writes.
#[test]
fn chained_replicas_follow_the_masters_stream_and_its_promoted_middle() {
    type Start = fn(&[&str]) -> ServerProc;
    let (redis, atoll): (Start, Start) = (start_redis, start_atoll);
    for (top_name, top) in [("redis", redis), ("atoll", atoll)] {
        let fast = ["--repl-diskless-sync-delay", "0", "--enable-debug-command", "yes"];
        let master = top(&fast);
        let mut m = con(master.port);
        load_dataset(&mut m);
        let mp = master.port.to_string();
        let mut args = fast.to_vec();
        args.extend(["--replicaof", "127.0.0.1", &mp]);
        let middle = start_atoll(&args);
        let mut mid = con(middle.port);
        link_up(&mut mid);
        chain_writes(&mut m, 0);
        let midp = middle.port.to_string();
        let mut args = fast.to_vec();
        args.extend(["--replicaof", "127.0.0.1", &midp]);
        let ends = [start_atoll(&args), start_redis(&args)];
        let mut e: Vec<redis::Connection> = ends.iter().map(|p| con(p.port)).collect();
        let case = |what: &str| format!("{top_name} → atoll → ends: {what}");
        for round in 1..6 {
            chain_writes(&mut m, round);
            match round {
                2 => drop(q(&mut mid, &["CLIENT", "KILL", "TYPE", "master"])),
                3 => {
                    for c in e.iter_mut() {
                        q(c, &["CLIENT", "KILL", "TYPE", "master"]);
                    }
                }
                4 => drop(q(&mut m, &["CLIENT", "KILL", "TYPE", "replica"])),
                _ => {}
            }
        }
        let want = offset_of(&mut m);
        let digest = s(&mut m, &["DEBUG", "DIGEST"]);
        let replid = info_field(&mut m, "replication", "master_replid").unwrap();
        for (i, c) in std::iter::once(&mut mid).chain(e.iter_mut()).enumerate() {
            wait_until(&case(&format!("node {i} to reach the master's offset")), 30, || {
                info_field(c, "replication", "master_link_status").as_deref() == Some("up") && offset_of(c) == want
            });
            assert_eq!(s(c, &["DEBUG", "DIGEST"]), digest, "{}", case(&format!("node {i}'s digest")));
            assert_eq!(info_field(c, "replication", "master_replid").unwrap(), replid, "{}", case("replid"));
        }
        let full_before: u64 = info_field(&mut mid, "stats", "sync_full").unwrap().parse().unwrap();
        let partial_before: u64 = info_field(&mut mid, "stats", "sync_partial_ok").unwrap().parse().unwrap();
        // The middle is promoted; the ends continue with it without a full sync.
        q(&mut mid, &["REPLICAOF", "NO", "ONE"]);
        assert_eq!(info_field(&mut mid, "replication", "master_replid2").unwrap(), replid, "{}", case("replid2"));
        q(&mut mid, &["SET", "after-promotion", "1"]);
        q(&mut mid, &["SELECT", "6"]);
        q(&mut mid, &["INCR", "in6"]);
        let want = offset_of(&mut mid);
        let digest = s(&mut mid, &["DEBUG", "DIGEST"]);
        for (i, c) in e.iter_mut().enumerate() {
            wait_until(&case(&format!("end {i} to continue with the promoted middle")), 30, || {
                info_field(c, "replication", "master_link_status").as_deref() == Some("up") && offset_of(c) == want
            });
            assert_eq!(s(c, &["DEBUG", "DIGEST"]), digest, "{}", case(&format!("end {i}'s digest after promotion")));
        }
        assert_eq!(
            info_field(&mut mid, "stats", "sync_full").unwrap().parse::<u64>().unwrap(),
            full_before,
            "{}",
            case("no full sync")
        );
        let partial: u64 = info_field(&mut mid, "stats", "sync_partial_ok").unwrap().parse().unwrap();
        assert_eq!(partial, partial_before + 2, "{}", case("both ends continued"));
        // The old master rejoins as a replica of the promoted middle, continuing its own
        // history there (PSYNC with its ID and offset) rather than loading a snapshot.
        q(&mut m, &["REPLICAOF", "127.0.0.1", &midp]);
        q(&mut mid, &["SET", "after-rejoin", "1"]);
        let want = offset_of(&mut mid);
        wait_until(&case("the old master to follow the middle"), 30, || {
            info_field(&mut m, "replication", "master_link_status").as_deref() == Some("up")
                && offset_of(&mut m) == want
        });
        assert_eq!(
            s(&mut m, &["DEBUG", "DIGEST"]),
            s(&mut mid, &["DEBUG", "DIGEST"]),
            "{}",
            case("old master's digest")
        );
        assert_eq!(
            info_field(&mut mid, "stats", "sync_full").unwrap().parse::<u64>().unwrap(),
            full_before,
            "{}",
            case("the old master continued")
        );
    }
}

/// A chain under a write load that never pauses, with links killed at random moments: Atoll
/// → Atoll → Redis 7.2.6 and Redis 7.2.6 → Atoll → Atoll. While writes flow (several
/// databases, transactions, scripts, keys with TTLs), a killer drops a random link every
/// 50–300 ms (the middle's or the end's link to its master, or the master's side of the
/// replicas' links) from a seeded generator whose seed is printed; when the load stops, every
/// node reaches the top's offset with the same DEBUG DIGEST, and every reconnection was a
/// partial resync (a replica that starts with `replicaof` set asks `PSYNC ? -1`, as Redis's).
#[test]
fn a_chain_under_load_survives_random_link_kills() {
    type Start = fn(&[&str]) -> ServerProc;
    let (redis, atoll): (Start, Start) = (start_redis, start_atoll);
    let seed = std::env::var("ATOLL_CHAIN_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    println!("a_chain_under_load_survives_random_link_kills: ATOLL_CHAIN_SEED={seed}");
    for (name, top, end) in [("atoll → atoll → redis", atoll, redis), ("redis → atoll → atoll", redis, atoll)] {
        // A backlog for several seconds of this load: a link down for the second a replica
        // waits before it reconnects must continue by partial resync.
        let fast = ["--repl-diskless-sync-delay", "0", "--enable-debug-command", "yes", "--repl-backlog-size", "64mb"];
        let master = top(&fast);
        let mut m = con(master.port);
        load_dataset(&mut m);
        let mp = master.port.to_string();
        let mut args = fast.to_vec();
        args.extend(["--replicaof", "127.0.0.1", &mp]);
        let middle = start_atoll(&args);
        let midp = middle.port.to_string();
        let mut args = fast.to_vec();
        args.extend(["--replicaof", "127.0.0.1", &midp]);
        let last = end(&args);
        let (mut mid, mut e) = (con(middle.port), con(last.port));
        link_up(&mut mid);
        link_up(&mut e);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let port = master.port;
        let load = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut c = con(port);
                let mut round = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    chain_writes(&mut c, round % 50);
                    round += 1;
                }
                round
            })
        };
        let mut rng = seed ^ (name.len() as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let start = Instant::now();
        let mut kills = 0;
        while start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(50 + next() % 250));
            let (c, kind) = match next() % 4 {
                0 => (&mut mid, "master"),
                1 => (&mut e, "master"),
                2 => (&mut m, "replica"),
                _ => (&mut mid, "replica"),
            };
            q(c, &["CLIENT", "KILL", "TYPE", kind]);
            kills += 1;
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let rounds = load.join().unwrap();
        let want = offset_of(&mut m);
        let digest = s(&mut m, &["DEBUG", "DIGEST"]);
        for (who, c) in [("middle", &mut mid), ("end", &mut e)] {
            wait_until(&format!("{name}: the {who} to reach the top's offset (seed {seed})"), 60, || {
                info_field(c, "replication", "master_link_status").as_deref() == Some("up") && offset_of(c) == want
            });
            assert_eq!(s(c, &["DEBUG", "DIGEST"]), digest, "{name}: the {who}'s digest (seed {seed})");
        }
        let syncs = |c: &mut redis::Connection| {
            let mut n = |f: &str| info_field(c, "stats", f).unwrap();
            format!(
                "{} full, {} partial, {} partial refused",
                n("sync_full"),
                n("sync_partial_ok"),
                n("sync_partial_err")
            )
        };
        let (top_syncs, mid_syncs) = (syncs(&mut m), syncs(&mut mid));
        println!("{name}: {rounds} rounds of writes, {kills} links killed; the top served {top_syncs}, the middle {mid_syncs}");
        // Each link's first sync is its only full one: every reconnection continued.
        for (who, got) in [("top", &top_syncs), ("middle", &mid_syncs)] {
            assert!(
                got.starts_with("1 full,") && got.ends_with(" 0 partial refused"),
                "{name}: the {who} served {got} (seed {seed})"
            );
        }
    }
}

fn err_of(c: &mut redis::Connection, args: &[&str]) -> String {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query::<Value>(c) {
        Ok(v) => format!("ok {v:?}"),
        Err(e) => e.to_string(),
    }
}

/// FAILOVER's refusals, word for word as Redis 7.2.6's: without replicas, bad arguments, on a
/// replica, a second one while one waits, REPLICAOF meanwhile, ABORT with none; and a failover
/// that times out (its replica stopped) gives the role back.
#[test]
fn failover_refuses_and_times_out_as_redis_does() {
    type Start = fn(&[&str]) -> ServerProc;
    let (redis, atoll): (Start, Start) = (start_redis, start_atoll);
    let mut seen = Vec::new();
    for start in [redis, atoll] {
        let master = start(&["--repl-diskless-sync-delay", "0"]);
        let mut m = con(master.port);
        let mut lines = vec![err_of(&mut m, &["FAILOVER"]), err_of(&mut m, &["FAILOVER", "ABORT"])];
        let mp = master.port.to_string();
        let replica = start(&["--replicaof", "127.0.0.1", &mp]);
        let mut r = con(replica.port);
        link_up(&mut r);
        online_at_master(&mut m, 1);
        let rp = replica.port.to_string();
        for args in [
            &["FAILOVER", "TIMEOUT", "0"][..],
            &["FAILOVER", "TIMEOUT", "x"],
            &["FAILOVER", "FORCE", "TIMEOUT", "100"],
            &["FAILOVER", "TO", "127.0.0.1", &rp, "FORCE"],
            &["FAILOVER", "TO", "127.0.0.1", "notaport"],
            &["FAILOVER", "TO", "127.0.0.2", &rp],
            &["FAILOVER", "TO", "127.0.0.1"],
            &["FAILOVER", "FORCE", "FORCE"],
            &["FAILOVER", "ABORT", "TIMEOUT", "10"],
        ] {
            lines.push(err_of(&mut m, args));
        }
        lines.push(err_of(&mut r, &["FAILOVER"]));
        // A replica that never catches up: the failover waits, then gives up.
        signal(&replica, libc::SIGSTOP);
        q(&mut m, &["SET", "k", "1"]);
        lines.push(err_of(&mut m, &["FAILOVER", "TO", "127.0.0.1", &rp, "TIMEOUT", "600"]));
        lines.push(info_field(&mut m, "replication", "master_failover_state").unwrap());
        lines.push(err_of(&mut m, &["FAILOVER"]));
        lines.push(err_of(&mut m, &["REPLICAOF", "NO", "ONE"]));
        lines.push(err_of(&mut m, &["GET", "k"]));
        wait_until("the failover to time out", 10, || {
            info_field(&mut m, "replication", "master_failover_state").as_deref() == Some("no-failover")
        });
        lines.push(info_field(&mut m, "replication", "role").unwrap());
        lines.push(err_of(&mut m, &["SET", "k", "2"]));
        signal(&replica, libc::SIGCONT);
        seen.push(lines);
    }
    assert_eq!(seen[1], seen[0], "Atoll (left) against Redis (right)");
    assert!(seen[0].iter().any(|l| l.contains("waiting-for-sync")), "{:?}", seen[0]);
}

/// FAILOVER hands the role over without losing a write, in both directions between Atoll
/// and Redis 7.2.6: a write load runs on the master meanwhile (paused, then refused with
/// READONLY once the master has become a replica); the target continues the master's history
/// (the old master and the other replica join it by partial resync), every acknowledged write
/// is there, and the digests agree.
#[test]
fn failover_hands_the_master_role_to_a_replica_both_ways() {
    type Start = fn(&[&str]) -> ServerProc;
    let (redis, atoll): (Start, Start) = (start_redis, start_atoll);
    for (mname, mstart, tname, tstart) in [("atoll", atoll, "redis", redis), ("redis", redis, "atoll", atoll)] {
        let case = format!("{mname} master fails over to a {tname} replica");
        let fast = ["--repl-diskless-sync-delay", "0", "--enable-debug-command", "yes"];
        let master = mstart(&fast);
        let mut m = con(master.port);
        load_dataset(&mut m);
        let mp = master.port.to_string();
        let mut args = fast.to_vec();
        args.extend(["--replicaof", "127.0.0.1", &mp]);
        let target = tstart(&args);
        let other = start_atoll(&args);
        let (mut t, mut o) = (con(target.port), con(other.port));
        link_up(&mut t);
        link_up(&mut o);
        online_at_master(&mut m, 2);
        // The write load: INCRs until the master refuses (READONLY once it follows the target).
        let port = master.port;
        let load = std::thread::spawn(move || {
            let mut c = con(port);
            let mut acked = 0u64;
            loop {
                match redis::cmd("INCR").arg("load").query::<i64>(&mut c) {
                    Ok(_) => acked += 1,
                    Err(e) => {
                        assert!(e.to_string().contains("read only replica"), "{e}");
                        return acked;
                    }
                }
            }
        });
        std::thread::sleep(Duration::from_millis(300));
        let partial_before: u64 = info_field(&mut t, "stats", "sync_partial_ok").unwrap().parse().unwrap();
        let tp = target.port.to_string();
        assert_eq!(s(&mut m, &["FAILOVER", "TO", "127.0.0.1", &tp, "TIMEOUT", "10000"]), "OK", "{case}");
        wait_until(&format!("{case}: the failover to end"), 20, || {
            info_field(&mut m, "replication", "master_failover_state").as_deref() == Some("no-failover")
        });
        let acked = load.join().unwrap();
        assert_eq!(info_field(&mut m, "replication", "role").as_deref(), Some("slave"), "{case}");
        assert_eq!(info_field(&mut t, "replication", "role").as_deref(), Some("master"), "{case}");
        q(&mut o, &["REPLICAOF", "127.0.0.1", &tp]);
        q(&mut t, &["SET", "after", "1"]);
        let want = offset_of(&mut t);
        for (who, c) in [("old master", &mut m), ("other replica", &mut o)] {
            wait_until(&format!("{case}: the {who} to follow the target"), 20, || {
                info_field(c, "replication", "master_link_status").as_deref() == Some("up") && offset_of(c) == want
            });
        }
        let load_value: u64 = s(&mut t, &["GET", "load"]).parse().unwrap();
        assert!(acked > 0 && load_value == acked, "{case}: {acked} INCRs acknowledged, the target holds {load_value}");
        let partial: u64 = info_field(&mut t, "stats", "sync_partial_ok").unwrap().parse().unwrap();
        assert_eq!(partial, partial_before + 2, "{case}: the old master and the other replica continued");
        let digest = s(&mut t, &["DEBUG", "DIGEST"]);
        assert_eq!(s(&mut m, &["DEBUG", "DIGEST"]), digest, "{case}: old master");
        assert_eq!(s(&mut o, &["DEBUG", "DIGEST"]), digest, "{case}: other replica");
    }
}

fn stat(c: &mut redis::Connection, section: &str, name: &str) -> i64 {
    info_field(c, section, name).unwrap_or_else(|| panic!("INFO {name}")).parse().unwrap()
}

/// The RDB file keeps the replication history (`repl-id`, `repl-offset`, `repl-stream-db`, as
/// Redis writes them), and a restart continues it as Redis's does (PSYNC2): a restarted master
/// takes the old ID as its second one, so its replicas — Atoll and Redis 7.2.6 — and their own
/// replicas continue by partial resync, and gets the DELs of the keys that expired while it was
/// down; a restarted replica continues with its master the same way.
#[test]
fn a_restart_continues_the_replication_history_kept_in_the_rdb() {
    let mport = free_port();
    let mdir = scratch_dir(mport);
    let mdir = mdir.to_str().unwrap().to_string();
    let fast =
        ["--repl-diskless-sync-delay", "0", "--enable-debug-command", "yes", "--repl-ping-replica-period", "3600"];
    let margs: Vec<&str> = fast.iter().copied().chain(["--dir", &mdir]).collect();
    let master = start_atoll_at(mport, &margs);
    let mut m = con(master.port);
    // Before the replicas come (DEBUG POPULATE is not replicated; their full sync carries it).
    load_dataset(&mut m);
    let mp = mport.to_string();
    let mut rargs = fast.to_vec();
    rargs.extend(["--replicaof", "127.0.0.1", &mp]);
    let r1port = free_port();
    let r1dir = scratch_dir(r1port);
    let r1dir = r1dir.to_str().unwrap().to_string();
    let r1args: Vec<&str> = rargs.iter().copied().chain(["--dir", &r1dir]).collect();
    let r1 = start_atoll_at(r1port, &r1args);
    let r2 = start_redis(&rargs);
    let r1p = r1port.to_string();
    let sub = start_atoll(&["--replicaof", "127.0.0.1", &r1p, "--enable-debug-command", "yes"]);
    let (mut c1, mut c2, mut c3) = (con(r1.port), con(r2.port), con(sub.port));
    chain_writes(&mut m, 0);
    q(&mut m, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    for j in 0..64 {
        q(&mut m, &["SELECT", &(j % 16).to_string()]);
        q(&mut m, &["SET", &format!("short:{j}"), "v", "PX", "10"]);
    }
    q(&mut m, &["SELECT", "0"]);
    let offset = offset_of(&mut m);
    for c in [&mut c1, &mut c2, &mut c3] {
        wait_until("the replicas to reach the master's offset", 30, || {
            info_field(c, "replication", "master_link_status").as_deref() == Some("up") && offset_of(c) == offset
        });
    }
    wait_until("the master to know its replicas have it all", 10, || {
        s(&mut m, &["INFO", "replication"]).lines().filter(|l| l.contains(&format!("offset={offset},"))).count() == 2
    });
    std::thread::sleep(Duration::from_millis(30));
    let replid = info_field(&mut m, "replication", "master_replid").unwrap();
    let _ = redis::cmd("SHUTDOWN").arg("SAVE").query::<Value>(&mut m);
    drop(master);
    let master = start_atoll_at(mport, &margs);
    let mut m = con(master.port);
    assert_eq!(stat(&mut m, "persistence", "rdb_last_load_keys_expired"), 64);
    assert_ne!(info_field(&mut m, "replication", "master_replid").unwrap(), replid);
    assert_eq!(info_field(&mut m, "replication", "master_replid2").unwrap(), replid);
    assert_eq!(stat(&mut m, "replication", "second_repl_offset"), offset + 1);
    assert_eq!(stat(&mut m, "replication", "repl_backlog_first_byte_offset"), offset + 1);
    let dels = stat(&mut m, "replication", "repl_backlog_histlen");
    assert!(dels > 0, "the expired keys' DELs are in the backlog");
    assert_eq!(offset_of(&mut m), offset + dels);
    let want = offset_of(&mut m);
    for (who, c) in [("atoll replica", &mut c1), ("redis replica", &mut c2), ("replica of the replica", &mut c3)] {
        let start = Instant::now();
        while !(info_field(c, "replication", "master_link_status").as_deref() == Some("up") && offset_of(c) == want) {
            if start.elapsed() > Duration::from_secs(30) {
                let master_info = s(&mut m, &["INFO", "replication"]);
                panic!(
                    "the {who} did not continue with the restarted master (offset {want}):\n{}\nmaster:\n{master_info}",
                    s(c, &["INFO", "replication"])
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    assert_eq!(stat(&mut m, "stats", "sync_full"), 0, "no full sync after the master's restart");
    assert_eq!(stat(&mut m, "stats", "sync_partial_ok"), 2);
    let digest = s(&mut m, &["DEBUG", "DIGEST"]);
    for (who, c) in [("atoll replica", &mut c1), ("redis replica", &mut c2), ("replica of the replica", &mut c3)] {
        assert_eq!(s(c, &["DEBUG", "DIGEST"]), digest, "{who}");
    }
    // The Atoll replica restarts: it continues with the master too.
    q(&mut m, &["SELECT", "7"]);
    q(&mut m, &["SET", "before-replica-restart", "1"]);
    let want = offset_of(&mut m);
    wait_until("the replica to have it", 10, || offset_of(&mut c1) == want);
    let _ = redis::cmd("SHUTDOWN").arg("SAVE").query::<Value>(&mut c1);
    drop(r1);
    q(&mut m, &["SET", "while-replica-down", "1"]);
    let r1 = start_atoll_at(r1port, &r1args);
    let mut c1 = con(r1.port);
    let want = offset_of(&mut m);
    wait_until("the restarted replica to continue", 30, || {
        info_field(&mut c1, "replication", "master_link_status").as_deref() == Some("up") && offset_of(&mut c1) == want
    });
    assert_eq!(stat(&mut m, "stats", "sync_full"), 0, "no full sync after the replica's restart");
    assert_eq!(stat(&mut m, "stats", "sync_partial_ok"), 3);
    assert_eq!(s(&mut c1, &["DEBUG", "DIGEST"]), s(&mut m, &["DEBUG", "DIGEST"]), "restarted replica");
}

/// `repl-diskless-load`, beside Redis 7.2.6 as the replica. With `swapdb` the snapshot is
/// parsed from the link into a dataset of its own: when the master's history is the replica's
/// (a full resync from the same master, its backlog outrun) the old dataset goes on serving
/// reads meanwhile (INFO `async_loading:1`), and a transfer cut short (the master killed)
/// leaves it as it was; from a new master, clients get -LOADING until the load ends. With
/// `on-empty-db`, an empty replica loads from the link and one holding data goes through the
/// disk, as the log says ("to parser", "to disk"). The master (Redis) sends its snapshot
/// slowly (`rdb-key-save-delay`), big enough (2 MB) that it arrives piece by piece.
#[test]
fn diskless_load_serves_the_old_data_while_the_new_arrives() {
    type Start = fn(&[&str]) -> ServerProc;
    let (redis, atoll): (Start, Start) = (start_redis, start_atoll);
    let mut seen = Vec::new();
    for (who, start) in [("redis", redis), ("atoll", atoll)] {
        let mut lines = Vec::new();
        let master = start_redis(&["--repl-diskless-sync-delay", "0", "--repl-backlog-size", "16384"]);
        let mut m = con(master.port);
        q(&mut m, &["DEBUG", "POPULATE", "2000", "key", "1000"]);
        let mp = master.port.to_string();
        // Redis serves clients between pieces of a load (every 1 KB here).
        let replica = start(&[
            "--repl-diskless-load",
            "swapdb",
            "--replicaof",
            "127.0.0.1",
            &mp,
            "--loading-process-events-interval-bytes",
            "1024",
            "--enable-debug-command",
            "yes",
        ]);
        let mut r = con(replica.port);
        link_up(&mut r);
        q(&mut m, &["SET", "old", "1"]);
        wait_until(&format!("{who}: old"), 10, || q(&mut r, &["EXISTS", "old"]) == Value::Int(1));
        for attempt in ["whole", "cut"] {
            // The master's backlog is outrun while the link is down: a full resync of the same
            // history, sent slowly.
            q(&mut m, &["CONFIG", "SET", "rdb-key-save-delay", "1000"]);
            signal(&replica, libc::SIGSTOP);
            q(&mut m, &["CLIENT", "KILL", "TYPE", "replica"]);
            let big = "x".repeat(40_000);
            q(&mut m, &["SET", &format!("big-{attempt}"), &big]);
            signal(&replica, libc::SIGCONT);
            wait_until(&format!("{who}: the load to start"), 20, || {
                info_field(&mut r, "persistence", "async_loading").as_deref() == Some("1")
            });
            lines.push(format!(
                "{attempt}: during: loading={} old={:?} big={:?} dbsize={:?}",
                info_field(&mut r, "persistence", "loading").unwrap(),
                q(&mut r, &["GET", "old"]),
                q(&mut r, &["EXISTS", &format!("big-{attempt}")]),
                q(&mut r, &["DBSIZE"])
            ));
            if attempt == "cut" {
                signal(&master, libc::SIGKILL);
                wait_until(&format!("{who}: the cut load to end"), 20, || {
                    info_field(&mut r, "persistence", "async_loading").as_deref() == Some("0")
                });
                lines.push(format!(
                    "cut: after: old={:?} dbsize={:?}",
                    q(&mut r, &["GET", "old"]),
                    q(&mut r, &["DBSIZE"])
                ));
                break;
            }
            q(&mut m, &["CONFIG", "SET", "rdb-key-save-delay", "0"]);
            link_up(&mut r);
            wait_until(&format!("{who}: the stream after the load"), 10, || offset_of(&mut r) == offset_of(&mut m));
            lines.push(format!(
                "whole: after: big={:?} dbsize={:?}",
                q(&mut r, &["EXISTS", "big-whole"]),
                q(&mut r, &["DBSIZE"])
            ));
            assert_eq!(s(&mut r, &["DEBUG", "DIGEST"]), s(&mut m, &["DEBUG", "DIGEST"]), "{who}");
        }
        seen.push(lines);
    }
    assert_eq!(seen[1], seen[0], "Atoll (left) against Redis (right)");
    assert!(seen[0].iter().any(|l| l == "cut: after: old=bulk-string('\"1\"') dbsize=int(2002)"), "{:?}", seen[0]);

    // From a new master, -LOADING meanwhile; on-empty-db: from the link when empty, through
    // the disk otherwise.
    for (mode, data, want) in
        [("swapdb", true, "to parser"), ("on-empty-db", false, "to parser"), ("on-empty-db", true, "to disk")]
    {
        let master = start_redis(&["--repl-diskless-sync-delay", "0", "--rdb-key-save-delay", "1000"]);
        let mut m = con(master.port);
        q(&mut m, &["DEBUG", "POPULATE", "2000", "key", "1000"]);
        let log = std::env::temp_dir().join(format!("atoll-diskless-{}-{mode}-{data}.log", std::process::id()));
        let _ = std::fs::remove_file(&log);
        // As Redis, a load serves clients only between pieces of it (every 1 KB here): with
        // the default 2 MB piece this 2 MB snapshot would keep them waiting to its end.
        let replica = start_atoll(&[
            "--repl-diskless-load",
            mode,
            "--logfile",
            log.to_str().unwrap(),
            "--loglevel",
            "notice",
            "--enable-debug-command",
            "yes",
            "--loading-process-events-interval-bytes",
            "1024",
        ]);
        let mut r = con(replica.port);
        if data {
            q(&mut r, &["SET", "mine", "1"]);
        }
        q(&mut r, &["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
        if want == "to parser" {
            wait_until("-LOADING during the load", 20, || {
                err_of(&mut r, &["GET", "mine"]).contains("Redis is loading the dataset in memory")
            });
            assert_eq!(info_field(&mut r, "persistence", "async_loading").as_deref(), Some("0"));
        }
        q(&mut m, &["CONFIG", "SET", "rdb-key-save-delay", "0"]);
        link_up(&mut r);
        assert_eq!(s(&mut r, &["DEBUG", "DIGEST"]), s(&mut m, &["DEBUG", "DIGEST"]));
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(text.contains(&format!("receiving streamed RDB from master with EOF {want}")), "{mode} {data}: {text}");
    }
}

/// While a master makes the snapshot for a full sync, INFO says so as Redis's does for the
/// child making one: `rdb_bgsave_in_progress:1`, a running `rdb_current_bgsave_time_sec`, and
/// the replica `wait_bgsave` for the whole of a diskless transfer; once it is loaded, no save
/// in progress and the replica `online` — beside Redis 7.2.6.
#[test]
fn a_snapshot_for_replicas_shows_in_info_as_redis_shows_its_child() {
    type Start = fn(&[&str]) -> ServerProc;
    let (redis, atoll): (Start, Start) = (start_redis, start_atoll);
    let mut seen = Vec::new();
    for start in [redis, atoll] {
        let master = start(&["--repl-diskless-sync-delay", "0", "--enable-debug-command", "yes"]);
        let mut m = con(master.port);
        q(&mut m, &["DEBUG", "POPULATE", "20", "key", "10"]);
        // 50 ms a key: a second of snapshot.
        q(&mut m, &["CONFIG", "SET", "rdb-key-save-delay", "50000"]);
        let mp = master.port.to_string();
        let replica = start(&["--replicaof", "127.0.0.1", &mp]);
        let mut during = String::new();
        wait_until("the snapshot to start", 10, || {
            // The snapshot first, then the replica: a replica is listed before its snapshot
            // begins, so once one is seen in progress the replica is there to be read (the
            // other order raced the snapshot's start between the two reads).
            let inprog = info_field(&mut m, "persistence", "rdb_bgsave_in_progress").unwrap();
            let secs: i64 = info_field(&mut m, "persistence", "rdb_current_bgsave_time_sec").unwrap().parse().unwrap();
            let slave0 = info_field(&mut m, "replication", "slave0").unwrap_or_default();
            let state = slave0.split(',').find_map(|f| f.strip_prefix("state=")).unwrap_or("").to_string();
            during = format!("in_progress={inprog} state={state} current_secs_set={}", secs >= 0);
            inprog == "1"
        });
        q(&mut m, &["CONFIG", "SET", "rdb-key-save-delay", "0"]);
        let mut r = con(replica.port);
        link_up(&mut r);
        online_at_master(&mut m, 1);
        let after = format!(
            "in_progress={} current_secs={}",
            info_field(&mut m, "persistence", "rdb_bgsave_in_progress").unwrap(),
            info_field(&mut m, "persistence", "rdb_current_bgsave_time_sec").unwrap()
        );
        seen.push((during, after));
    }
    assert_eq!(seen[1], seen[0], "Atoll (left) against Redis (right)");
    assert_eq!(seen[0].0, "in_progress=1 state=wait_bgsave current_secs_set=true");
}

/// A replica's hard output limit set below `repl-backlog-size` counts as the backlog's size,
/// as in Redis 7: a replica whose link broke during a burst bigger than its limit continues
/// by partial resync and is not dropped for the burst's backlog — beside Redis 7.2.6, with
/// Redis's own scenario (10 MB values, a 512 KB limit, a 100 MB backlog).
#[test]
fn a_replica_output_limit_below_the_backlog_counts_as_the_backlog_as_in_redis() {
    type Start = fn(&[&str]) -> ServerProc;
    let (redis, atoll): (Start, Start) = (start_redis, start_atoll);
    let mut seen = Vec::new();
    let big = "A".repeat(10 << 20);
    for start in [redis, atoll] {
        let master = start(&[
            "--repl-diskless-sync-delay",
            "0",
            "--enable-debug-command",
            "yes",
            "--repl-backlog-size",
            "100mb",
            "--client-output-buffer-limit",
            "replica 512k 0 0",
        ]);
        let mut m = con(master.port);
        let mp = master.port.to_string();
        let replica = start(&["--replicaof", "127.0.0.1", &mp]);
        let mut r = con(replica.port);
        link_up(&mut r);
        online_at_master(&mut m, 1);
        let v: Value = redis::pipe()
            .atomic()
            .cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("replica")
            .cmd("SET")
            .arg("key")
            .arg(&big)
            .cmd("SET")
            .arg("key")
            .arg(&big)
            .cmd("DEBUG")
            .arg("SLEEP")
            .arg(2)
            .query(&mut m)
            .unwrap();
        drop(v);
        q(&mut m, &["SET", "key", &big]);
        let caught_up = |m: &mut redis::Connection, r: &mut redis::Connection| {
            let want = offset_of(m);
            wait_until("the replica to reach the master's offset", 30, || offset_of(r) == want);
        };
        caught_up(&mut m, &mut r);
        let syncs = |m: &mut redis::Connection| {
            format!(
                "full={} partial={}",
                info_field(m, "stats", "sync_full").unwrap(),
                info_field(m, "stats", "sync_partial_ok").unwrap()
            )
        };
        let first = syncs(&mut m);
        redis::pipe()
            .atomic()
            .cmd("SET")
            .arg("key")
            .arg(&big)
            .cmd("SET")
            .arg("key")
            .arg(&big)
            .query::<Value>(&mut m)
            .unwrap();
        caught_up(&mut m, &mut r);
        seen.push((first, syncs(&mut m)));
    }
    assert_eq!(seen[1], seen[0], "Atoll (left) against Redis (right)");
    assert_eq!(seen[0], ("full=1 partial=1".to_string(), "full=1 partial=1".to_string()));
}

/// A replica's connection answers nothing but is dropped when it sends anything else than
/// REPLCONF (its reply would land in the replication stream), and PSYNC with an offset that
/// is not a number is refused with the client left as it was — beside Redis 7.2.6.
#[test]
fn a_replica_connection_that_sends_commands_is_dropped_as_redis_drops_it() {
    type Start = fn(&[&str]) -> ServerProc;
    let (redis, atoll): (Start, Start) = (start_redis, start_atoll);
    let mut seen = Vec::new();
    for start in [redis, atoll] {
        let master = start(&["--repl-diskless-sync-delay", "0"]);
        let mut m = con(master.port);
        let mut lines = vec![err_of(&mut m, &["PSYNC", "replicationid", "offset_str"]), err_of(&mut m, &["PING"])];
        for (sync, cmd) in [
            (&[&b"SYNC"[..]][..], &[&b"PING"[..]][..]),
            (&[b"PSYNC", b"replicationid", b"-1"], &[b"GET", b"foo"]),
            (&[b"PSYNC", b"replicationid", b"-1"], &[b"SLOWLOG", b"GET"]),
        ] {
            let mut rc = RawConn::connect(master.port);
            rc.send(&sync.iter().map(|a| a.to_vec()).collect::<Vec<_>>());
            wait_until("the connection to count as a replica", 10, || {
                info_field(&mut m, "replication", "connected_slaves").as_deref() == Some("1")
            });
            rc.send(&cmd.iter().map(|a| a.to_vec()).collect::<Vec<_>>());
            wait_until("the replica to be dropped", 10, || {
                info_field(&mut m, "replication", "connected_slaves").as_deref() == Some("0")
            });
            lines.push(format!("{:?} dropped", String::from_utf8_lossy(cmd[0])));
        }
        lines.push(err_of(&mut m, &["PING"]));
        seen.push(lines);
    }
    assert_eq!(seen[1], seen[0], "Atoll (left) against Redis (right)");
}

/// REPLICAOF to another master keeps what this replica has until a new dataset actually
/// loads, as Redis 7.2: its own replicas stay connected, and when the full sync from the new
/// master is cut before the snapshot arrives, going back to the first master continues the
/// old history by partial resync (Redis's "Don't disconnect with replicas before loading
/// transferred RDB" and "Discard cache master before loading"). The aborted master is Redis
/// 7.2.6 and Atoll in turn.
#[test]
fn an_aborted_full_sync_keeps_the_replicas_and_the_history() {
    type Start = fn(&[&str]) -> ServerProc;
    let (redis, atoll): (Start, Start) = (start_redis, start_atoll);
    for (name, second) in [("redis", redis), ("atoll", atoll)] {
        let fast = ["--repl-diskless-sync-delay", "0", "--enable-debug-command", "yes"];
        let master1 = start_atoll(&fast);
        let mut m1 = con(master1.port);
        q(&mut m1, &["SET", "a", "b"]);
        let master2 = second(&fast);
        let mut m2 = con(master2.port);
        q(&mut m2, &["DEBUG", "POPULATE", "10", "master2", "10"]);
        // A second a key: the snapshot never finishes before the master goes.
        q(&mut m2, &["CONFIG", "SET", "rdb-key-save-delay", "1000000"]);
        let p1 = master1.port.to_string();
        let mut args = fast.to_vec();
        args.extend(["--replicaof", "127.0.0.1", &p1]);
        let middle = start_atoll(&args);
        let mut mid = con(middle.port);
        link_up(&mut mid);
        let pm = middle.port.to_string();
        let mut args = fast.to_vec();
        args.extend(["--replicaof", "127.0.0.1", &pm]);
        let sub = start_atoll(&args);
        let mut sc = con(sub.port);
        link_up(&mut sc);
        let p2 = master2.port.to_string();
        q(&mut mid, &["REPLICAOF", "127.0.0.1", &p2]);
        wait_until(&format!("{name}: the full sync to start"), 10, || {
            info_field(&mut m2, "persistence", "rdb_bgsave_in_progress").as_deref() == Some("1")
                && info_field(&mut m2, "replication", "slave0").is_some_and(|s| s.contains("wait_bgsave"))
        });
        drop(m2);
        drop(master2);
        let replid = info_field(&mut m1, "replication", "master_replid").unwrap();
        assert_eq!(info_field(&mut mid, "replication", "master_replid").unwrap(), replid, "{name}");
        let (full, partial) = (
            info_field(&mut m1, "stats", "sync_full").unwrap(),
            info_field(&mut m1, "stats", "sync_partial_ok").unwrap().parse::<u64>().unwrap(),
        );
        q(&mut mid, &["REPLICAOF", "127.0.0.1", &p1]);
        link_up(&mut mid);
        q(&mut m1, &["SET", "after", "1"]);
        let want = offset_of(&mut m1);
        wait_until(&format!("{name}: the sub-replica to get the write"), 10, || offset_of(&mut sc) == want);
        assert_eq!(info_field(&mut m1, "stats", "sync_full").unwrap(), full, "{name}: no full sync");
        assert_eq!(
            info_field(&mut m1, "stats", "sync_partial_ok").unwrap().parse::<u64>().unwrap(),
            partial + 1,
            "{name}: a partial resync"
        );
        // The sub-replica never had to sync again.
        assert_eq!(info_field(&mut mid, "stats", "sync_full").unwrap(), "1", "{name}");
        assert_eq!(info_field(&mut mid, "stats", "sync_partial_ok").unwrap(), "0", "{name}");
        assert_eq!(s(&mut sc, &["GET", "after"]), "1", "{name}");
    }
}

/// A replica that stops reading during a full sync is dropped after `repl-timeout`, and the
/// other replica of the same snapshot gets it whole — beside Redis 7.2.6 ("Disconnecting
/// timedout replica (full sync)"); before, one stopped replica held the snapshot for ever.
#[test]
fn a_replica_stopped_during_a_full_sync_is_dropped_and_the_other_completes() {
    type Start = fn(&[&str]) -> ServerProc;
    let (redis, atoll): (Start, Start) = (start_redis, start_atoll);
    let mut seen = Vec::new();
    for start in [redis, atoll] {
        let master = start(&[
            "--repl-diskless-sync-delay",
            "1",
            "--repl-diskless-sync-max-replicas",
            "2",
            "--repl-timeout",
            "2",
            "--rdbcompression",
            "no",
            "--enable-debug-command",
            "yes",
        ]);
        let mut m = con(master.port);
        q(&mut m, &["DEBUG", "POPULATE", "3000", "key", "10000"]);
        // 1 ms a key: a snapshot of 3 s, 30 MB.
        q(&mut m, &["CONFIG", "SET", "rdb-key-save-delay", "1000"]);
        let mp = master.port.to_string();
        let (a, b) = (start(&["--replicaof", "127.0.0.1", &mp]), start(&["--replicaof", "127.0.0.1", &mp]));
        wait_until("both replicas in the snapshot", 20, || {
            info_field(&mut m, "persistence", "rdb_bgsave_in_progress").as_deref() == Some("1")
                && info_field(&mut m, "replication", "connected_slaves").as_deref() == Some("2")
        });
        signal(&b, libc::SIGSTOP);
        let mut ac = con(a.port);
        wait_until("the other replica's link", 60, || {
            info_field(&mut ac, "replication", "master_link_status").as_deref() == Some("up")
        });
        wait_until("the stopped replica to be dropped", 30, || {
            info_field(&mut m, "replication", "connected_slaves").as_deref() == Some("1")
        });
        q(&mut m, &["CONFIG", "SET", "rdb-key-save-delay", "0"]);
        let dbsize = |c: &mut redis::Connection| s(c, &["DBSIZE"]);
        let want = offset_of(&mut m);
        wait_until("the replica to catch up", 20, || offset_of(&mut ac) == want);
        seen.push((dbsize(&mut ac), dbsize(&mut m)));
        signal(&b, libc::SIGCONT);
    }
    assert_eq!(seen[1], seen[0], "Atoll (left) against Redis (right)");
    assert_eq!(seen[0], ("3000".to_string(), "3000".to_string()));
}

/// WAIT counts a replica once it has the data and said so: one still receiving its snapshot
/// does not count, not even for writes the snapshot holds — beside Redis 7.2.6.
#[test]
fn wait_does_not_count_a_replica_still_receiving_its_snapshot() {
    type Start = fn(&[&str]) -> ServerProc;
    let (redis, atoll): (Start, Start) = (start_redis, start_atoll);
    let mut seen = Vec::new();
    for start in [redis, atoll] {
        let master = start(&["--repl-diskless-sync-delay", "0", "--enable-debug-command", "yes"]);
        let mut m = con(master.port);
        q(&mut m, &["DEBUG", "POPULATE", "20", "key", "10"]);
        q(&mut m, &["SET", "before", "1"]);
        q(&mut m, &["CONFIG", "SET", "rdb-key-save-delay", "100000"]);
        let mp = master.port.to_string();
        let replica = start(&["--replicaof", "127.0.0.1", &mp]);
        wait_until("the snapshot to start", 10, || {
            info_field(&mut m, "persistence", "rdb_bgsave_in_progress").as_deref() == Some("1")
        });
        let during = s(&mut m, &["WAIT", "1", "200"]);
        q(&mut m, &["CONFIG", "SET", "rdb-key-save-delay", "0"]);
        let mut r = con(replica.port);
        link_up(&mut r);
        let after = s(&mut m, &["WAIT", "1", "5000"]);
        seen.push((during, after));
    }
    assert_eq!(seen[1], seen[0], "Atoll (left) against Redis (right)");
    assert_eq!(seen[0], ("0".to_string(), "1".to_string()));
}
