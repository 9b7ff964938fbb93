//! Scripting beyond single replies (those are in `cases/scripting.txt`): function libraries
//! moving between Redis 7.2.6 and Atoll in RDB files, FUNCTION DUMP payloads and the AOF;
//! scripts' atomicity against other workers' clients; a busy script answered `-BUSY` and
//! stopped by SCRIPT KILL from another worker, and from the worker running it (on both
//! event-loop backends).

mod common;
use common::*;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn cmd(c: &mut RawConn, args: &[&[u8]]) -> Vec<u8> {
    c.cmd(args)
}

fn dir_of(c: &mut RawConn) -> String {
    String::from_utf8_lossy(&parse_array(&cmd(c, &[b"CONFIG", b"GET", b"dir"]))[1]).to_string()
}

const LIB: &[u8] = b"#!lua name=shared\nredis.register_function('twice', function(keys, args) return args[1] * 2 end)\nredis.register_function{function_name='peek', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}, description='reads'}";

#[test]
fn function_libraries_move_between_redis_and_atoll() {
    let r = start_redis(&[]);
    let a = start_atoll(&["--enable-debug-command", "yes"]);
    let (mut rc, mut ac) = (RawConn::connect(r.port), RawConn::connect(a.port));
    assert_eq!(cmd(&mut rc, &[b"FUNCTION", b"LOAD", LIB]), b"$6\r\nshared\r\n");
    assert_eq!(cmd(&mut ac, &[b"FUNCTION", b"LOAD", LIB]), b"$6\r\nshared\r\n");
    // FUNCTION DUMP payloads restore on the other side (same framing and size; the LZF
    // back-references may point at different, equal earlier bytes).
    let rdump = cmd(&mut rc, &[b"FUNCTION", b"DUMP"]);
    let adump = cmd(&mut ac, &[b"FUNCTION", b"DUMP"]);
    assert_eq!(adump.len(), rdump.len());
    let a2 = start_atoll(&[]);
    let mut a2c = RawConn::connect(a2.port);
    assert_eq!(cmd(&mut a2c, &[b"FUNCTION", b"RESTORE", &bulk(&rdump)]), b"+OK\r\n");
    assert_eq!(cmd(&mut a2c, &[b"FCALL", b"twice", b"0", b"21"]), b":42\r\n");
    let r3 = start_redis(&[]);
    let mut r3c = RawConn::connect(r3.port);
    assert_eq!(cmd(&mut r3c, &[b"FUNCTION", b"RESTORE", &bulk(&adump)]), b"+OK\r\n");
    assert_eq!(cmd(&mut r3c, &[b"FCALL", b"twice", b"0", b"21"]), b":42\r\n");
    let list = cmd(&mut rc, &[b"FUNCTION", b"LIST", b"WITHCODE"]);
    // Redis's RDB file (FUNCTION2 records) into Atoll.
    assert_eq!(cmd(&mut rc, &[b"SET", b"k", b"v"]), b"+OK\r\n");
    assert_eq!(cmd(&mut rc, &[b"SAVE"]), b"+OK\r\n");
    let rdir = dir_of(&mut rc);
    let a3 = start_atoll(&["--dir", &rdir]);
    let mut a3c = RawConn::connect(a3.port);
    assert_eq!(cmd(&mut a3c, &[b"FCALL_RO", b"peek", b"1", b"k"]), b"$1\r\nv\r\n");
    assert_eq!(sorted_list(&cmd(&mut a3c, &[b"FUNCTION", b"LIST", b"WITHCODE"])), sorted_list(&list));
    // Atoll's RDB file into Redis, checked by redis-check-rdb first.
    assert_eq!(cmd(&mut ac, &[b"SET", b"k", b"v2"]), b"+OK\r\n");
    assert_eq!(cmd(&mut ac, &[b"SAVE"]), b"+OK\r\n");
    let adir = dir_of(&mut ac);
    let check = std::process::Command::new(std::path::Path::new(&redis_bin()).with_file_name("redis-check-rdb"))
        .arg(std::path::Path::new(&adir).join("dump.rdb"))
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stdout));
    let r2 = start_redis(&["--dir", &adir]);
    let mut r2c = RawConn::connect(r2.port);
    assert_eq!(cmd(&mut r2c, &[b"FCALL_RO", b"peek", b"1", b"k"]), b"$2\r\nv2\r\n");
    assert_eq!(sorted_list(&cmd(&mut r2c, &[b"FUNCTION", b"LIST", b"WITHCODE"])), sorted_list(&list));
    // DEBUG RELOAD keeps them; NOFLUSH without MERGE refuses the duplicate, as Redis does.
    assert_eq!(cmd(&mut ac, &[b"DEBUG", b"RELOAD"]), b"+OK\r\n");
    assert_eq!(cmd(&mut ac, &[b"FCALL", b"twice", b"0", b"4"]), b":8\r\n");
    let noflush = cmd(&mut ac, &[b"DEBUG", b"RELOAD", b"NOFLUSH"]);
    assert_eq!(noflush, cmd(&mut rc, &[b"DEBUG", b"RELOAD", b"NOFLUSH"]));
}

#[test]
fn functions_survive_an_aof_restart() {
    let a = start_atoll(&["--appendonly", "yes"]);
    let mut ac = RawConn::connect(a.port);
    assert_eq!(cmd(&mut ac, &[b"FUNCTION", b"LOAD", LIB]), b"$6\r\nshared\r\n");
    assert_eq!(cmd(&mut ac, &[b"EVAL", b"return redis.call('INCRBY', KEYS[1], ARGV[1])", b"1", b"n", b"5"]), b":5\r\n");
    let dir = dir_of(&mut ac);
    drop(ac);
    drop(a);
    let b = start_atoll(&["--appendonly", "yes", "--dir", &dir]);
    let mut bc = RawConn::connect(b.port);
    assert_eq!(cmd(&mut bc, &[b"FCALL", b"twice", b"0", b"5"]), b":10\r\n");
    assert_eq!(cmd(&mut bc, &[b"GET", b"n"]), b"$1\r\n5\r\n");
}

fn bulk(reply: &[u8]) -> Vec<u8> {
    let nl = reply.iter().position(|&c| c == b'\n').unwrap();
    reply[nl + 1..reply.len() - 2].to_vec()
}

/// A reply's bytes split into lines and sorted (Redis lists functions in hash order).
fn sorted_list(reply: &[u8]) -> Vec<Vec<u8>> {
    let mut lines: Vec<Vec<u8>> = reply.split(|&c| c == b'\n').map(|l| l.to_vec()).collect();
    lines.sort();
    lines
}

/// Scripts moving "money" between accounts spread over many shards (undeclared keys too)
/// while clients on the other worker read the total with MGET and run their own transfers:
/// every read sees the invariant total, and nothing is lost.
#[test]
fn scripts_are_atomic_across_workers() {
    let a = start_atoll(&["--threads", "2"]);
    const ACCOUNTS: usize = 64;
    const TOTAL: i64 = ACCOUNTS as i64 * 100;
    let mut c = RawConn::connect(a.port);
    for i in 0..ACCOUNTS {
        assert_eq!(cmd(&mut c, &[b"SET", format!("acct:{i}").as_bytes(), b"100"]), b"+OK\r\n");
    }
    // Moves ARGV[1] units from account a to b: reads and writes keys it does not declare.
    let script = b"local a = 'acct:' .. ARGV[2]\nlocal b = 'acct:' .. ARGV[3]\nlocal v = tonumber(redis.call('GET', a))\nredis.call('SET', a, v - ARGV[1])\nlocal w = tonumber(redis.call('GET', b))\nredis.call('SET', b, w + ARGV[1])\nreturn 1";
    let stop = Arc::new(AtomicBool::new(false));
    let mut movers = Vec::new();
    for t in 0..3u64 {
        let port = a.port;
        movers.push(std::thread::spawn(move || {
            let mut c = RawConn::connect(port);
            let mut x = t + 1;
            for _ in 0..1500 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let (from, to) = ((x >> 33) as usize % ACCOUNTS, (x >> 17) as usize % ACCOUNTS);
                let r = c.cmd(&[b"EVAL", script, b"0", b"7", from.to_string().as_bytes(), to.to_string().as_bytes()]);
                assert_eq!(r, b":1\r\n");
            }
        }));
    }
    let keys: Vec<Vec<u8>> = (0..ACCOUNTS).map(|i| format!("acct:{i}").into_bytes()).collect();
    let mut readers = Vec::new();
    for _ in 0..2 {
        let (port, stop, keys) = (a.port, stop.clone(), keys.clone());
        readers.push(std::thread::spawn(move || {
            let mut c = RawConn::connect(port);
            let mut args: Vec<&[u8]> = vec![b"MGET"];
            args.extend(keys.iter().map(|k| k.as_slice()));
            let mut reads = 0;
            while !stop.load(Ordering::Relaxed) {
                let vals = parse_array(&c.cmd(&args));
                let sum: i64 = vals.iter().map(|v| std::str::from_utf8(v).unwrap().parse::<i64>().unwrap()).sum();
                assert_eq!(sum, TOTAL, "a read saw half of a script");
                reads += 1;
            }
            reads
        }));
    }
    for m in movers {
        m.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let reads: usize = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert!(reads > 0);
    let mut args: Vec<&[u8]> = vec![b"MGET"];
    args.extend(keys.iter().map(|k| k.as_slice()));
    let sum: i64 =
        parse_array(&cmd(&mut c, &args)).iter().map(|v| std::str::from_utf8(v).unwrap().parse::<i64>().unwrap()).sum();
    assert_eq!(sum, TOTAL);
}

/// A read-only script running past `busy-reply-threshold`: a client on the other worker gets
/// `-BUSY`, SCRIPT KILL from it stops the script, which fails with Redis's error; a script that
/// wrote is unkillable.
#[test]
fn busy_scripts_answer_busy_and_can_be_killed() {
    let a = start_atoll(&["--threads", "2", "--busy-reply-threshold", "100"]);
    // Connections are handed to the workers in turn: the first and the second are on
    // different workers.
    let mut runner = RawConn::connect(a.port);
    let mut other = RawConn::connect(a.port);
    assert_eq!(cmd(&mut runner, &[b"PING"]), b"+PONG\r\n");
    assert_eq!(cmd(&mut other, &[b"SCRIPT", b"KILL"]), b"-NOTBUSY No scripts in execution right now.\r\n");
    runner.send(&[b"EVAL".to_vec(), b"local i = 0 while true do i = i + 1 end".to_vec(), b"0".to_vec()]);
    let mut busy = Vec::new();
    for _ in 0..100 {
        busy = cmd(&mut other, &[b"PING"]);
        if busy.starts_with(b"-BUSY") {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(busy, b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n");
    assert_eq!(
        cmd(&mut other, &[b"FUNCTION", b"KILL"]),
        b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
    );
    assert_eq!(cmd(&mut other, &[b"SCRIPT", b"KILL"]), b"+OK\r\n");
    let r = runner.read_reply();
    assert!(r.starts_with(b"-ERR Script killed by user with SCRIPT KILL... script: "), "{}", show(&r));
    assert_eq!(cmd(&mut other, &[b"PING"]), b"+PONG\r\n");
    assert_eq!(cmd(&mut runner, &[b"PING"]), b"+PONG\r\n");
    // A script that wrote cannot be killed; it is stopped only by ending by itself (two
    // hundred million rounds of Lua: a second or more, well past the kill attempt; TIME would
    // not do, as a script sees one instant, as in Redis 7.2).
    runner.send(&[
        b"EVAL".to_vec(),
        b"redis.call('SET', 'w', 1) local i = 0 while i < 200000000 do i = i + 1 end return 'done'".to_vec(),
        b"0".to_vec(),
    ]);
    std::thread::sleep(Duration::from_millis(400));
    let k = cmd(&mut other, &[b"SCRIPT", b"KILL"]);
    assert!(k.starts_with(b"-UNKILLABLE Sorry the script already executed write commands"), "{}", show(&k));
    assert_eq!(runner.read_reply(), b"$4\r\ndone\r\n");
}

/// Polls `c` with PING until the server answers `-BUSY` (a script turned busy).
fn await_busy(c: &mut RawConn) -> Vec<u8> {
    let mut r = Vec::new();
    for _ in 0..100 {
        r = cmd(c, &[b"PING"]);
        if r.starts_with(b"-BUSY") {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    r
}

/// One worker, so every client shares the worker running the busy script: the worker keeps
/// answering them while the script runs (Redis's processEventsWhileBlocked) — `-BUSY` to
/// connected and new clients, FUNCTION STATS and SCRIPT KILL run; requests the script's own
/// client pipelined behind it run after it, not `-BUSY`; SHUTDOWN NOSAVE stops the server.
#[test]
fn a_busy_scripts_own_worker_keeps_answering_its_other_clients() {
    const BUSY: &[u8] = b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
    for backend in ["io_uring", "epoll"] {
        let mut a = start_atoll(&["--threads", "1", "--busy-reply-threshold", "100", "--io-backend", backend]);
        let mut runner = RawConn::connect(a.port);
        let mut other = RawConn::connect(a.port);
        assert_eq!(cmd(&mut other, &[b"SET", b"k", b"v"]), b"+OK\r\n");
        let eval = b"*3\r\n$4\r\nEVAL\r\n$39\r\nlocal i = 0 while true do i = i + 1 end\r\n$1\r\n0\r\n";
        // The script, and behind it in the same write a request that must wait for it.
        runner.send_raw(&[&eval[..], b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"].concat());
        assert_eq!(await_busy(&mut other), BUSY, "{backend}");
        // Answered while busy: allowed commands run, others are refused; a pipeline of both
        // comes back in order.
        other.send_raw(b"*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
        assert_eq!(other.read_reply(), BUSY);
        assert_eq!(other.read_reply(), BUSY);
        // FUNCTION STATS runs during a busy script, and refuses while it is an EVAL one.
        assert_eq!(cmd(&mut other, &[b"FUNCTION", b"STATS"]), BUSY, "{backend}");
        // A client that connects now is taken in and answered too.
        let mut late = RawConn::connect(a.port);
        assert_eq!(cmd(&mut late, &[b"PING"]), BUSY, "{backend}");
        assert_eq!(cmd(&mut other, &[b"SCRIPT", b"KILL"]), b"+OK\r\n", "{backend}");
        let r = runner.read_reply();
        assert!(r.starts_with(b"-ERR Script killed by user with SCRIPT KILL... script: "), "{}", show(&r));
        assert_eq!(runner.read_reply(), b"$1\r\nv\r\n", "{backend}: the pipelined GET ran after the script");
        for c in [&mut runner, &mut other, &mut late] {
            assert_eq!(cmd(c, &[b"PING"]), b"+PONG\r\n", "{backend}");
        }
        // A script queued behind a blocking pop runs when the pop is served (by a push from
        // this worker) or times out; its worker answers meanwhile all the same.
        let pop = |key: &str, timeout: &str| -> Vec<u8> {
            let args: Vec<Vec<u8>> = vec![b"BLPOP".to_vec(), key.as_bytes().to_vec(), timeout.as_bytes().to_vec()];
            [encode(&args), eval.to_vec()].concat()
        };
        runner.send_raw(&pop("q", "0"));
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(cmd(&mut other, &[b"LPUSH", b"q", b"x"]), b":1\r\n", "{backend}");
        assert_eq!(await_busy(&mut other), BUSY, "{backend}: served pop");
        assert_eq!(cmd(&mut other, &[b"SCRIPT", b"KILL"]), b"+OK\r\n", "{backend}");
        assert_eq!(runner.read_reply(), b"*2\r\n$1\r\nq\r\n$1\r\nx\r\n", "{backend}");
        assert!(runner.read_reply().starts_with(b"-ERR Script killed"), "{backend}");
        runner.send_raw(&pop("q2", "0.1"));
        assert_eq!(await_busy(&mut other), BUSY, "{backend}: timed-out pop");
        assert_eq!(cmd(&mut other, &[b"SCRIPT", b"KILL"]), b"+OK\r\n", "{backend}");
        assert_eq!(runner.read_reply(), b"*-1\r\n", "{backend}");
        assert!(runner.read_reply().starts_with(b"-ERR Script killed"), "{backend}");
        // SHUTDOWN NOSAVE from the busy worker's own client stops the server.
        runner.send_raw(eval);
        assert_eq!(await_busy(&mut other), BUSY, "{backend}");
        other.send(&[b"SHUTDOWN".to_vec(), b"NOSAVE".to_vec()]);
        let mut exited = false;
        for _ in 0..250 {
            if a.child.try_wait().expect("wait").is_some() {
                exited = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(exited, "{backend}: SHUTDOWN NOSAVE during a busy script stops the server");
    }
}

/// One worker, and clients on it that watch or wait on keys a busy script has read (so the
/// script holds their shards): UNWATCH, DISCARD and RESET while it runs, and such clients
/// closing, all answered or taken in at once — their watches and waits are let go of once the
/// script ends (they once waited for the script's own locks and hung the worker for good).
/// Redis 7.2.6 runs the same sequence; the replies are compared.
#[test]
fn clients_leaving_watches_and_waits_during_a_busy_script_do_not_hang_its_worker() {
    let run = |srv: &ServerProc| -> Vec<Vec<u8>> {
        let mut seen = Vec::new();
        let mut watcher = RawConn::connect(srv.port);
        let mut closer = RawConn::connect(srv.port);
        let mut waiter = RawConn::connect(srv.port);
        let mut other = RawConn::connect(srv.port);
        let mut runner = RawConn::connect(srv.port);
        for c in [&mut watcher, &mut closer] {
            assert_eq!(cmd(c, &[b"WATCH", b"k", b"q"]), b"+OK\r\n");
        }
        assert_eq!(cmd(&mut watcher, &[b"MULTI"]), b"+OK\r\n");
        waiter.send(&v(&["BLPOP", "q", "0"]));
        std::thread::sleep(Duration::from_millis(50));
        // Reads both keys (so it holds their shards), then spins until killed.
        let script = "redis.call('get', KEYS[1]) redis.call('llen', KEYS[2]) local i = 0 while true do i = i + 1 end";
        runner.send(&v(&["EVAL", script, "2", "k", "q"]));
        assert!(await_busy(&mut other).starts_with(b"-BUSY"), "{}: the script never turned busy", srv.name);
        seen.push(cmd(&mut watcher, &[b"DISCARD"]));
        seen.push(cmd(&mut watcher, &[b"UNWATCH"]));
        seen.push(cmd(&mut watcher, &[b"RESET"]));
        drop(closer);
        drop(waiter);
        std::thread::sleep(Duration::from_millis(100));
        seen.push(cmd(&mut other, &[b"PING"]));
        seen.push(cmd(&mut other, &[b"SCRIPT", b"KILL"]));
        let killed = runner.read_reply();
        assert!(killed.starts_with(b"-ERR Script killed"), "{}: {}", srv.name, show(&killed));
        // Served again, with the closed clients' watches and waits gone.
        seen.push(cmd(&mut other, &[b"PING"]));
        let info = String::from_utf8_lossy(&cmd(&mut other, &[b"INFO", b"clients"])).into_owned();
        for f in ["blocked_clients:", "total_blocking_keys:"] {
            let line = info.lines().find(|l| l.starts_with(f)).unwrap_or_default().to_string();
            seen.push(line.into_bytes());
        }
        // WATCH still works on the key the script held.
        assert_eq!(cmd(&mut watcher, &[b"WATCH", b"k"]), b"+OK\r\n");
        assert_eq!(cmd(&mut other, &[b"SET", b"k", b"2"]), b"+OK\r\n");
        assert_eq!(cmd(&mut watcher, &[b"MULTI"]), b"+OK\r\n");
        assert_eq!(cmd(&mut watcher, &[b"GET", b"k"]), b"+QUEUED\r\n");
        seen.push(cmd(&mut watcher, &[b"EXEC"]));
        seen
    };
    let redis = start_redis(&["--busy-reply-threshold", "100"]);
    let want = run(&redis);
    for backend in ["io_uring", "epoll"] {
        let atoll = start_atoll(&["--threads", "1", "--busy-reply-threshold", "100", "--io-backend", backend]);
        let got = run(&atoll);
        let show_all = |r: &[Vec<u8>]| r.iter().map(|x| show(x)).collect::<Vec<_>>();
        assert_eq!(show_all(&got), show_all(&want), "{backend}: Atoll beside Redis 7.2.6");
    }
}

/// While a script is busy, beside Redis 7.2.6: a command queued in MULTI is refused and
/// flags the transaction, and the EXEC that follows is refused too and ends it
/// (`-EXECABORT Transaction discarded because of: BUSY …`, as Redis's execCommandAbort), so
/// the client is out of MULTI after; SHUTDOWN without NOSAVE is refused (its save would wait
/// for the script). The same bytes from both servers.
#[test]
fn a_transaction_refused_while_a_script_is_busy_is_aborted_and_left_as_redis_does() {
    let atoll = start_atoll(&["--busy-reply-threshold", "100"]);
    let redis = start_redis(&["--busy-reply-threshold", "100"]);
    let mut transcripts = Vec::new();
    for port in [redis.port, atoll.port] {
        let mut runner = RawConn::connect(port);
        let mut other = RawConn::connect(port);
        let mut t = Vec::new();
        assert_eq!(cmd(&mut other, &[b"SET", b"xx", b"1"]), b"+OK\r\n");
        t.push(cmd(&mut other, &[b"MULTI"]));
        t.push(cmd(&mut other, &[b"INCR", b"xx"]));
        runner.send(&[b"EVAL".to_vec(), b"while true do end".to_vec(), b"0".to_vec()]);
        t.push(await_busy(&mut RawConn::connect(port)));
        t.push(cmd(&mut other, &[b"INCR", b"xx"]));
        t.push(cmd(&mut other, &[b"EXEC"]));
        t.push(cmd(&mut other, &[b"SHUTDOWN"]));
        t.push(cmd(&mut other, &[b"SCRIPT", b"KILL"]));
        let killed = runner.read_reply();
        assert!(killed.starts_with(b"-ERR Script killed by user"), "{}", show(&killed));
        // Out of MULTI: answered, not QUEUED; the transaction ran nothing.
        t.push(cmd(&mut other, &[b"PING", b"asdf"]));
        t.push(cmd(&mut other, &[b"GET", b"xx"]));
        transcripts.push(t);
    }
    let show_all = |t: &Vec<Vec<u8>>| t.iter().map(|r| show(r)).collect::<Vec<_>>().join(" | ");
    assert_eq!(show_all(&transcripts[1]), show_all(&transcripts[0]), "Atoll (left) and Redis 7.2.6 (right)");
    assert!(transcripts[1][4].starts_with(b"-EXECABORT Transaction discarded because of: BUSY"));
}

/// A script and a transaction are each one instant for TIME (Redis 7.2 answers its cached
/// time, taken when the outermost command started): two TIMEs around a 10 ms DEBUG SLEEP
/// inside EXEC, and around a few million rounds of Lua inside a script, are equal.
#[test]
fn time_inside_exec_and_scripts_is_the_commands_instant() {
    let a = start_atoll(&["--enable-debug-command", "yes"]);
    let mut c = RawConn::connect(a.port);
    assert_eq!(cmd(&mut c, &[b"MULTI"]), b"+OK\r\n");
    cmd(&mut c, &[b"TIME"]);
    cmd(&mut c, &[b"DEBUG", b"SLEEP", b"0.01"]);
    cmd(&mut c, &[b"TIME"]);
    let r = String::from_utf8_lossy(&cmd(&mut c, &[b"EXEC"])).into_owned();
    let (first, second) = r.strip_prefix("*3\r\n").and_then(|b| b.split_once("+OK\r\n")).expect("EXEC's three replies");
    assert!(first.starts_with("*2\r\n"), "{r:?}");
    assert_eq!(first, second, "TIME moved inside EXEC");
    let r = cmd(
        &mut c,
        &[
            b"EVAL",
            b"local a = redis.call('TIME') for i = 1, 3000000 do end local b = redis.call('TIME') return a[1] == b[1] and a[2] == b[2]",
            b"0",
        ],
    );
    assert_eq!(r, b":1\r\n", "TIME moved inside a script");
    // Outside, it moves.
    let t1 = cmd(&mut c, &[b"TIME"]);
    cmd(&mut c, &[b"DEBUG", b"SLEEP", b"0.01"]);
    assert_ne!(cmd(&mut c, &[b"TIME"]), t1);
}

/// One step of a debugging conversation: what the client sends, and whether the server then
/// ends the session (everything up to the close is read) or answers one reply.
enum Say {
    Cmd(&'static [&'static str]),
    Raw(Vec<u8>),
    Last(&'static [&'static str]),
    LastRaw(Vec<u8>),
}

/// Runs `steps` on a fresh connection to `port`; the replies, with Lua's addresses (which
/// differ from run to run) masked.
fn converse(port: u16, steps: &[Say]) -> Vec<String> {
    let mut c = RawConn::connect(port);
    let mut out = Vec::new();
    for s in steps {
        let (bytes, last) = match s {
            Say::Cmd(a) | Say::Last(a) => {
                (encode(&a.iter().map(|x| x.as_bytes().to_vec()).collect::<Vec<_>>()), matches!(s, Say::Last(_)))
            }
            Say::Raw(b) | Say::LastRaw(b) => (b.clone(), matches!(s, Say::LastRaw(_))),
        };
        if c.stream.write_all(&bytes).is_err() {
            panic!("port {port}: the connection closed before step {}: {:?}", out.len(), out.last());
        }
        let got = if last { c.read_to_close() } else { c.read_reply() };
        let mut text = show(&got);
        while let Some(at) = text.find("@0x") {
            let end = text[at + 3..].find(|ch: char| !ch.is_ascii_hexdigit()).map_or(text.len(), |e| at + 3 + e);
            text.replace_range(at..end, "@ADDR");
        }
        out.push(text);
    }
    out
}

const DEBUGGED: &str = "local a = 1\nlocal t = {1,2,'x'}\nredis.call('set','k',a)\nredis.debug('hi', t, 3.5)\nlocal m = {x=1}\nredis.breakpoint()\nlocal r = redis.call('get','k')\nreturn r\n";
const DEBUGGED_RESP3: &str = "local big = string.rep('x', 300)\nlocal f = function() return 1 end\nlocal n = {a={b={c=1}}, [5]=true}\nredis.setresp(3)\nredis.call('hset','h','f','v')\nlocal x = redis.pcall('incr','h')\nreturn redis.call('hgetall','h')\n";
const DEBUGGED_NESTED: &str =
    "local function inner(q)\n  local z = q .. '\\n\\t\\1\"'\n  return z\nend\nlocal out = inner('a')\nreturn out\n";

/// The debugger's conversations, the same for Redis 7.2.6 and Atoll.
fn debugger_conversations() -> Vec<Vec<Say>> {
    use Say::*;
    let sync = Cmd(&["SCRIPT", "DEBUG", "SYNC"]);
    vec![
        // Stepping, listing, breakpoints, printing, evaluating, Redis commands, the help.
        vec![
            Cmd(&["SCRIPT", "DEBUG", "SYNC"]),
            Cmd(&["EVAL", DEBUGGED, "0"]),
            Cmd(&["h"]),
            Cmd(&["s"]),
            Cmd(&["p"]),
            Cmd(&["p", "t"]),
            Cmd(&["p", "KEYS"]),
            Cmd(&["p", "nope"]),
            Cmd(&["l"]),
            Cmd(&["l", "3", "1"]),
            Cmd(&["w"]),
            Cmd(&["b"]),
            Cmd(&["b", "7"]),
            Cmd(&["b", "99"]),
            Cmd(&["b", "-7"]),
            Cmd(&["b", "-7"]),
            Cmd(&["b", "x"]),
            Cmd(&["b", "7", "-3"]),
            Cmd(&["b"]),
            Cmd(&["t"]),
            Cmd(&["m"]),
            Cmd(&["m", "10"]),
            Cmd(&["m", "0"]),
            Cmd(&["e", "1+1"]),
            Cmd(&["e", "x ="]),
            Cmd(&["e", "error('boom')"]),
            Cmd(&["e", "redis.call('get','k')"]),
            Cmd(&["r", "get", "k"]),
            Cmd(&["r", "nosuchcmd"]),
            Cmd(&["r", "incr", "nosuch2", "x"]),
            Cmd(&["r"]),
            Cmd(&["s"]),
            Cmd(&["s"]),
            Cmd(&["c"]),
            Cmd(&["zzz"]),
            Last(&["c"]),
        ],
        // Values of every kind, trimming, RESP3 replies, errors a command returns.
        vec![
            Cmd(&["SCRIPT", "DEBUG", "SYNC"]),
            Cmd(&["EVAL", DEBUGGED_RESP3, "1", "kk", "argv1"]),
            Cmd(&["n"]),
            Cmd(&["step"]),
            Cmd(&["next"]),
            Cmd(&["print"]),
            Cmd(&["p", "ARGV"]),
            Cmd(&["redis", "hgetall", "h"]),
            Cmd(&["r", "zadd", "z", "1.5", "m"]),
            Cmd(&["r", "zscore", "z", "m"]),
            Cmd(&["r", "smembers", "nosuch"]),
            Cmd(&["r", "ping"]),
            Cmd(&["r", "debug", "protocol", "bignum"]),
            Cmd(&["r", "set", "a", "1", "b", "2", "c", "3", "d", "4", "e", "5", "f"]),
            Cmd(&["maxlen", "0"]),
            Cmd(&["p", "big"]),
            Cmd(&["s"]),
            Cmd(&["s"]),
            Cmd(&["s"]),
            Last(&["s"]),
        ],
        // A call stack, escapes, an abort.
        vec![
            Cmd(&["SCRIPT", "DEBUG", "SYNC"]),
            Cmd(&["EVAL", DEBUGGED_NESTED, "0"]),
            Cmd(&["s"]),
            Cmd(&["s"]),
            Cmd(&["s"]),
            Cmd(&["trace"]),
            Cmd(&["p"]),
            Cmd(&["p", "q"]),
            Cmd(&["s"]),
            Cmd(&["e", "{1,{2}}"]),
            Cmd(&["e", "nil"]),
            Cmd(&["m", "60"]),
            Cmd(&["r", "set", "big", "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"]),
            Cmd(&["r", "get", "big"]),
            Cmd(&["e", "string.rep('z',100)"]),
            Last(&["a"]),
        ],
        // A breakpoint inside a loop, then all removed.
        vec![
            Cmd(&["SCRIPT", "DEBUG", "SYNC"]),
            Cmd(&["EVAL", "local t = {}\nfor i=1,3 do\n  t[i] = i\nend\nreturn t", "0"]),
            Cmd(&["b", "3"]),
            Cmd(&["c"]),
            Cmd(&["c"]),
            Cmd(&["b", "0"]),
            Last(&["c"]),
        ],
        // Broken input ends the script; so does a failing command; a bad EVAL ends at once.
        vec![Cmd(&["SCRIPT", "DEBUG", "SYNC"]), Cmd(&["EVAL", "return 1", "0"]), LastRaw(b"*1\r\n$0\r\n\r\n".to_vec())],
        vec![Cmd(&["SCRIPT", "DEBUG", "SYNC"]), Cmd(&["EVAL", "return 1", "0"]), LastRaw(b"garbage\r\n".to_vec())],
        vec![sync, Cmd(&["EVAL", "redis.call('nosuch')\nreturn 1", "0"]), Last(&["s"])],
        vec![Cmd(&["SCRIPT", "DEBUG", "SYNC"]), Last(&["EVAL", "return 1", "x"])],
        vec![
            Cmd(&["SCRIPT", "DEBUG", "SYNC"]),
            Cmd(&["EVALSHA", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "0"]),
            Cmd(&["EVALSHA", "x", "0"]),
            Cmd(&["EVAL_RO", "return redis.call('set','a','b')", "0"]),
            Last(&["c"]),
        ],
        // Where SCRIPT DEBUG is refused, and turning it off again.
        vec![
            Cmd(&["MULTI"]),
            Cmd(&["SCRIPT", "DEBUG", "SYNC"]),
            Cmd(&["EXEC"]),
            Cmd(&["SCRIPT", "DEBUG", "SYNC"]),
            Cmd(&["SCRIPT", "DEBUG", "NO"]),
            Cmd(&["EVAL", "return 5", "0"]),
            Cmd(&["SCRIPT", "DEBUG", "maybe"]),
            Cmd(&["SCRIPT", "DEBUG"]),
        ],
        // Redis's own suite: NUL bytes in a debugger command, and a Redis command with a
        // hundred arguments (its Lua stack once overflowed).
        vec![
            Cmd(&["SCRIPT", "DEBUG", "SYNC"]),
            Cmd(&["EVAL", "return 'hello'", "0"]),
            Raw(b"*1\r\n$13\r\n'hello\0world'\r\n".to_vec()),
            Raw(b"*1\r\n$8\r\n'hello\0'\r\n".to_vec()),
            Raw(b"*1\r\n$8\r\n'\0hello'\r\n".to_vec()),
            Raw(b"*1\r\n$9\r\n'\0hello\0'\r\n".to_vec()),
            Raw([b"*101\r\n$5\r\nredis\r\n".to_vec(), b"$4\r\ntest\r\n".repeat(100)].concat()),
            Last(&["c"]),
        ],
    ]
}

#[test]
fn the_debugger_answers_as_redis_does() {
    let r = start_redis(&[]);
    let want: Vec<Vec<String>> = debugger_conversations().iter().map(|c| converse(r.port, c)).collect();
    for backend in ["io_uring", "epoll"] {
        let a = start_atoll(&["--io-backend", backend]);
        for (i, conv) in debugger_conversations().iter().enumerate() {
            let got = converse(a.port, conv);
            assert_eq!(got.len(), want[i].len(), "{backend}: conversation {i}");
            for (step, (w, g)) in want[i].iter().zip(&got).enumerate() {
                assert_eq!(g, w, "{backend}: conversation {i}, step {step}");
            }
        }
        // The server is whole after every session (each ended by closing its connection).
        let mut c = RawConn::connect(a.port);
        assert_eq!(c.cmd(&[b"GET", b"k"]), b"$1\r\n1\r\n");
    }
}

#[test]
fn a_debugging_session_holds_only_its_own_connection() {
    for backend in ["io_uring", "epoll"] {
        let a = start_atoll(&["--io-backend", backend]);
        let mut c = RawConn::connect(a.port);
        // Redis's forked sessions (changes thrown away) are refused, not run as SYNC.
        let yes = c.cmd(&[b"SCRIPT", b"DEBUG", b"YES"]);
        assert!(yes.starts_with(b"-ERR SCRIPT DEBUG YES"), "{}", show(&yes));
        // Inside a transaction the connection cannot leave half-way through EXEC's reply.
        assert_eq!(c.cmd(&[b"SCRIPT", b"DEBUG", b"SYNC"]), b"+OK\r\n");
        c.cmd(&[b"MULTI"]);
        c.cmd(&[b"EVAL", b"return 1", b"0"]);
        assert_eq!(show(&c.cmd(&[b"EXEC"])), "*1\\r\\n-ERR Lua debugging is not available inside MULTI/EXEC\\r\\n");
        // A debugger command sent with the EVAL is read, not lost (Redis leaves it in the
        // query buffer it no longer reads, and the session waits for ever).
        c.send_raw(b"*3\r\n$4\r\nEVAL\r\n$8\r\nreturn 7\r\n$1\r\n0\r\n*1\r\n$1\r\nc\r\n");
        assert_eq!(
            show(&c.read_to_close()),
            "*2\\r\\n+* Stopped at 1, stop reason = step over\\r\\n+-> 1   return 7\\r\\n*1\\r\\n+<endsession>\\r\\n:7\\r\\n"
        );
        // An EVAL held back by CLIENT PAUSE starts its session once the pause ends.
        let mut p = RawConn::connect(a.port);
        assert_eq!(p.cmd(&[b"CLIENT", b"PAUSE", b"100000", b"WRITE"]), b"+OK\r\n");
        let mut q = RawConn::connect(a.port);
        assert_eq!(q.cmd(&[b"SCRIPT", b"DEBUG", b"SYNC"]), b"+OK\r\n");
        q.send(&v(&["EVAL", "return 3", "0"]));
        assert_eq!(q.try_read_reply(Duration::from_millis(300)), None);
        assert_eq!(p.cmd(&[b"CLIENT", b"UNPAUSE"]), b"+OK\r\n");
        assert_eq!(
            show(&q.read_reply()),
            "*2\\r\\n+* Stopped at 1, stop reason = step over\\r\\n+-> 1   return 3\\r\\n"
        );
        q.send(&v(&["c"]));
        assert_eq!(show(&q.read_to_close()), "*1\\r\\n+<endsession>\\r\\n:3\\r\\n");
        // A session stopped half-way holds its keys; everyone else is served meanwhile, and
        // killing its client lets the script run to its end.
        let mut d = RawConn::connect(a.port);
        assert_eq!(d.cmd(&[b"SCRIPT", b"DEBUG", b"SYNC"]), b"+OK\r\n");
        let id = String::from_utf8_lossy(&d.cmd(&[b"CLIENT", b"ID"])[1..]).trim().to_string();
        d.cmd(&[b"EVAL", b"redis.call('set','held','1')\nredis.call('set','held','2')\nreturn 1", b"0"]);
        let stopped = show(&d.cmd(&[b"s"]));
        assert!(stopped.contains("Stopped at 2"), "{stopped}");
        let mut o = RawConn::connect(a.port);
        assert_eq!(o.cmd(&[b"PING"]), b"+PONG\r\n");
        let list = show(&o.cmd(&[b"CLIENT", b"LIST"]));
        assert!(list.contains(&format!("id={id} ")), "{list}");
        assert_eq!(o.cmd(&[b"CLIENT", b"KILL", b"ID", id.as_bytes()]), b":1\r\n");
        assert_eq!(o.cmd(&[b"GET", b"held"]), b"$1\r\n2\r\n");
        let _ = d.read_to_close();
        let list = show(&o.cmd(&[b"CLIENT", b"LIST"]));
        assert!(!list.contains(&format!("id={id} ")), "{list}");
    }
}
