//! Black-box tests: the built atoll-server binary, driven by a real client library (the
//! `redis` crate) and by raw sockets where the bytes themselves matter.

mod common;
use common::*;
use redis::Commands;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn client(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection().unwrap()
}

/// Raises this test process's open-files limit (many connections).
fn raise_nofile(n: u64) {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain libc calls on a struct we own.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = n.min(lim.rlim_max);
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
}

#[test]
fn pipelining_returns_replies_in_order() {
    let s = start_atoll(&[]);
    let mut c = client(s.port);
    let mut p = redis::pipe();
    for i in 0..1000 {
        p.cmd("SET").arg(format!("key{i}")).arg(i).ignore();
    }
    for i in 0..1000 {
        p.cmd("GET").arg(format!("key{i}"));
    }
    let vals: Vec<i64> = p.query(&mut c).unwrap();
    assert_eq!(vals, (0..1000).collect::<Vec<i64>>());
    // A raw pipeline split at every byte boundary gives the same replies.
    let mut raw = RawConn::connect(s.port);
    let mut req = Vec::new();
    for i in 0..50 {
        req.extend(encode(&[b"INCR".to_vec(), b"ctr".to_vec()]));
        let _ = i;
    }
    for chunk in req.chunks(7) {
        raw.send_raw(chunk);
        std::thread::sleep(Duration::from_micros(200));
    }
    for i in 1..=50 {
        assert_eq!(raw.read_reply(), format!(":{i}\r\n").into_bytes());
    }
}

#[test]
fn resp3_via_client_library_and_raw() {
    let s = start_atoll(&[]);
    let c = redis::Client::open(format!("redis://127.0.0.1:{}/?protocol=resp3", s.port)).unwrap();
    let mut c = c.get_connection().unwrap();
    let _: () = c.set("a", "1").unwrap();
    let v: String = c.get("a").unwrap();
    assert_eq!(v, "1");
    let mut raw = RawConn::connect(s.port);
    let hello = raw.cmd(&[b"HELLO", b"3"]);
    assert!(hello.starts_with(b"%7\r\n$6\r\nserver\r\n"), "{}", show(&hello));
    assert_eq!(raw.cmd(&[b"GET", b"missing"]), b"_\r\n");
    let cfg = raw.cmd(&[b"CONFIG", b"GET", b"port"]);
    assert!(cfg.starts_with(b"%1\r\n$4\r\nport\r\n"), "{}", show(&cfg));
    assert_eq!(raw.cmd(&[b"HELLO", b"2"]).first(), Some(&b'*'));
    assert_eq!(raw.cmd(&[b"GET", b"missing"]), b"$-1\r\n");
}

#[test]
fn inline_commands_with_quoting() {
    let s = start_atoll(&[]);
    let mut raw = RawConn::connect(s.port);
    raw.send_raw(b"SET \"a key\" 'it''s'\r\n");
    assert_eq!(raw.read_reply(), b"-ERR Protocol error: unbalanced quotes in request\r\n");
    let mut raw = RawConn::connect(s.port);
    raw.send_raw(b"SET \"a key\" \"x\\x41\\ny\"\r\nGET \"a key\"\r\n\r\nPING\n");
    assert_eq!(raw.read_reply(), b"+OK\r\n");
    assert_eq!(raw.read_reply(), b"$4\r\nxA\ny\r\n");
    assert_eq!(raw.read_reply(), b"+PONG\r\n");
}

#[test]
fn protocol_errors_close_the_connection() {
    let s = start_atoll(&[]);
    for (req, err) in [
        (&b"*1\r\n$-5\r\n"[..], &b"-ERR Protocol error: invalid bulk length\r\n"[..]),
        (b"*abc\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
        (b"*1\r\n:5\r\n", b"-ERR Protocol error: expected '$', got ':'\r\n"),
    ] {
        let mut raw = RawConn::connect(s.port);
        raw.send_raw(req);
        assert_eq!(raw.read_to_close(), err);
    }
    // A command before the error in the same read still runs.
    let mut raw = RawConn::connect(s.port);
    raw.send_raw(b"*1\r\n$4\r\nPING\r\n*x\r\n");
    assert_eq!(raw.read_to_close(), b"+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n");
    // HTTP requests are dropped without a reply.
    let mut raw = RawConn::connect(s.port);
    raw.send_raw(b"POST / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(raw.read_to_close(), b"");
    // An inline request over 64 KB without a newline is refused.
    let mut raw = RawConn::connect(s.port);
    raw.send_raw(&vec![b'a'; 70 * 1024]);
    assert_eq!(raw.read_to_close(), b"-ERR Protocol error: too big inline request\r\n");
    // A huge declared bulk is refused without being allocated.
    let mut raw = RawConn::connect(s.port);
    raw.send_raw(b"*1\r\n$9999999999\r\n");
    assert_eq!(raw.read_to_close(), b"-ERR Protocol error: invalid bulk length\r\n");
    // The server is still fine.
    let mut c = client(s.port);
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn requirepass_limits_unauthenticated_clients() {
    let s = start_atoll(&["--requirepass", "secret"]);
    let mut raw = RawConn::connect(s.port);
    assert_eq!(raw.cmd(&[b"GET", b"x"]), b"-NOAUTH Authentication required.\r\n");
    assert_eq!(raw.cmd(&[b"AUTH", b"wrong"]), b"-WRONGPASS invalid username-password pair or user is disabled.\r\n");
    assert_eq!(raw.cmd(&[b"AUTH", b"secret"]), b"+OK\r\n");
    assert_eq!(raw.cmd(&[b"PING"]), b"+PONG\r\n");
    // More than 10 arguments before AUTH is a protocol error.
    let mut raw = RawConn::connect(s.port);
    raw.send_raw(b"*11\r\n");
    assert_eq!(raw.read_to_close(), b"-ERR Protocol error: unauthenticated multibulk length\r\n");
    let mut raw = RawConn::connect(s.port);
    raw.send_raw(b"*2\r\n$4\r\nAUTH\r\n$20000\r\n");
    assert_eq!(raw.read_to_close(), b"-ERR Protocol error: unauthenticated bulk length\r\n");
    // RESET in the middle of a pipeline makes the client unauthenticated again, and the
    // requests after it in the same read are held to the limits again.
    let mut raw = RawConn::connect(s.port);
    assert_eq!(raw.cmd(&[b"AUTH", b"secret"]), b"+OK\r\n");
    raw.send_raw(b"*1\r\n$4\r\nPING\r\n*1\r\n$5\r\nRESET\r\n*11\r\n");
    assert_eq!(raw.read_to_close(), b"+PONG\r\n+RESET\r\n-ERR Protocol error: unauthenticated multibulk length\r\n");
    // Any number of switches in one read, without the server going deeper for each.
    let mut raw = RawConn::connect(s.port);
    let round = b"*2\r\n$4\r\nAUTH\r\n$6\r\nsecret\r\n*1\r\n$5\r\nRESET\r\n";
    raw.send_raw(&round.repeat(5_000));
    for _ in 0..5_000 {
        assert_eq!(raw.read_reply(), b"+OK\r\n");
        assert_eq!(raw.read_reply(), b"+RESET\r\n");
    }
    assert_eq!(raw.cmd(&[b"PING"]), b"-NOAUTH Authentication required.\r\n");
    let c = redis::Client::open(format!("redis://:secret@127.0.0.1:{}/", s.port)).unwrap();
    let mut c = c.get_connection().unwrap();
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn two_thousand_concurrent_connections() {
    raise_nofile(8192);
    let s = start_atoll(&["--threads", "2"]);
    let mut conns: Vec<RawConn> = (0..2000).map(|_| RawConn::connect(s.port)).collect();
    for (i, c) in conns.iter_mut().enumerate() {
        c.send(&[b"SET".to_vec(), format!("conn{i}").into_bytes(), i.to_string().into_bytes()]);
    }
    for c in conns.iter_mut() {
        assert_eq!(c.read_reply(), b"+OK\r\n");
    }
    for (i, c) in conns.iter_mut().enumerate() {
        assert_eq!(
            c.cmd(&[b"GET", format!("conn{i}").as_bytes()]),
            format!("${}\r\n{i}\r\n", i.to_string().len()).into_bytes()
        );
    }
    let mut c = client(s.port);
    let info: String = redis::cmd("INFO").arg("clients").query(&mut c).unwrap();
    assert!(info.contains("connected_clients:2001"), "{info}");
}

#[test]
fn concurrent_incr_is_exact() {
    let s = start_atoll(&["--threads", "2"]);
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let port = s.port;
            std::thread::spawn(move || {
                let mut c = client(port);
                for _ in 0..2000 {
                    let _: i64 = c.incr("counter", 1).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut c = client(s.port);
    let v: i64 = c.get("counter").unwrap();
    assert_eq!(v, 16000);
}

#[test]
fn multi_exec_transfers_are_never_seen_half_done() {
    let s = start_atoll(&["--threads", "2"]);
    // Two keys in different shards (different hash slots).
    let (a, b) = ("acct:alpha", "acct:omega");
    assert_ne!(atoll::engine::slot::key_shard(a.as_bytes()), atoll::engine::slot::key_shard(b.as_bytes()));
    let mut c = client(s.port);
    let _: () = c.set(a, 1000).unwrap();
    let _: () = c.set(b, 1000).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let port = s.port;
            std::thread::spawn(move || {
                let mut c = client(port);
                for i in 0..1500 {
                    let amount = (i % 7) + 1;
                    let (from, to) = if (i + w) % 2 == 0 { (a, b) } else { (b, a) };
                    let _: () = redis::pipe()
                        .atomic()
                        .decr(from, amount)
                        .ignore()
                        .incr(to, amount)
                        .ignore()
                        .query(&mut c)
                        .unwrap();
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (port, stop) = (s.port, stop.clone());
            std::thread::spawn(move || {
                let mut c = client(port);
                let mut checks = 0;
                while !stop.load(Ordering::Relaxed) {
                    let (x, y): (i64, i64) = redis::cmd("MGET").arg(a).arg(b).query(&mut c).unwrap();
                    assert_eq!(x + y, 2000, "MGET saw a transfer half done: {x} + {y}");
                    checks += 1;
                }
                checks
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
}

#[test]
fn mset_is_never_torn() {
    let s = start_atoll(&["--threads", "2"]);
    let keys: Vec<String> = (0..8).map(|i| format!("torn:{i}")).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (port, keys) = (s.port, keys.clone());
            std::thread::spawn(move || {
                let mut c = client(port);
                for i in 0..3000 {
                    let v = format!("{w}-{i}");
                    let pairs: Vec<(&str, &str)> = keys.iter().map(|k| (k.as_str(), v.as_str())).collect();
                    let _: () = c.mset(&pairs).unwrap();
                }
            })
        })
        .collect();
    let reader = {
        let (port, keys, stop) = (s.port, keys.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut c = client(port);
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let vals: Vec<Option<String>> = c.mget(&keys).unwrap();
                if vals[0].is_some() {
                    assert!(vals.iter().all(|v| v == &vals[0]), "torn MSET observed: {vals:?}");
                }
                n += 1;
            }
            n
        })
    };
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
}

#[test]
fn watch_detects_conflicts_across_workers() {
    let s = start_atoll(&["--threads", "2"]);
    let mut c1 = client(s.port);
    let mut c2 = client(s.port);
    let _: () = c1.set("w", 1).unwrap();
    let _: () = redis::cmd("WATCH").arg("w").query(&mut c1).unwrap();
    let _: () = c2.set("w", 2).unwrap();
    let r: Option<(String,)> = redis::pipe().atomic().set("w", 3).query(&mut c1).unwrap();
    assert!(r.is_none(), "EXEC must fail after a watched key changed");
    let v: i64 = c1.get("w").unwrap();
    assert_eq!(v, 2);
    // Optimistic increments from many threads lose no update.
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let port = s.port;
            std::thread::spawn(move || {
                let mut c = client(port);
                let mut done = 0;
                while done < 200 {
                    let _: () = redis::cmd("WATCH").arg("opt").query(&mut c).unwrap();
                    let v: Option<i64> = c.get("opt").unwrap();
                    let r: Option<(String,)> =
                        redis::pipe().atomic().set("opt", v.unwrap_or(0) + 1).query(&mut c).unwrap();
                    if r.is_some() {
                        done += 1;
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let v: i64 = c1.get("opt").unwrap();
    assert_eq!(v, 800);
}

#[test]
fn client_kill_and_list_across_workers() {
    let s = start_atoll(&["--threads", "2"]);
    let mut victim = RawConn::connect(s.port);
    assert_eq!(victim.cmd(&[b"CLIENT", b"SETNAME", b"victim"]), b"+OK\r\n");
    let id = victim.cmd(&[b"CLIENT", b"ID"]);
    let id = std::str::from_utf8(&id[1..id.len() - 2]).unwrap().to_string();
    let mut c = client(s.port);
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut c).unwrap();
    assert!(list.contains("name=victim"), "{list}");
    let n: i64 = redis::cmd("CLIENT").arg("KILL").arg("ID").arg(&id).query(&mut c).unwrap();
    assert_eq!(n, 1);
    assert_eq!(victim.read_to_close(), b"");
}

#[test]
fn config_file_flags_and_unix_socket() {
    let dir = std::env::temp_dir().join(format!("atoll-bb-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("atoll.sock");
    let conf = dir.join("atoll.conf");
    std::fs::write(
        &conf,
        format!(
            "# test\nunixsocket {}\nproto-max-bulk-len 10mb\nsave \"\"\nappendonly no\nhash-max-ziplist-entries 64\n",
            sock.display()
        ),
    )
    .unwrap();
    let port = free_port();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_atoll-server"))
        .arg(&conf)
        .args(["--port", &port.to_string(), "--databases", "4"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Killed on drop if an assertion fails before SHUTDOWN.
    let mut srv = ServerProc { child, port, name: "atoll" };
    let mut ok = false;
    for _ in 0..200 {
        if std::os::unix::net::UnixStream::connect(&sock).is_ok() {
            ok = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(ok, "unix socket never accepted");
    let c = redis::Client::open(format!("redis+unix://{}", sock.display())).unwrap();
    let mut c = c.get_connection().unwrap();
    let cfg: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("proto-max-bulk-len").query(&mut c).unwrap();
    assert_eq!(cfg, vec!["proto-max-bulk-len".to_string(), "10485760".to_string()]);
    let cfg: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("hash-max-listpack-entries").query(&mut c).unwrap();
    assert_eq!(cfg[1], "64");
    let dbs: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("databases").query(&mut c).unwrap();
    assert_eq!(dbs[1], "4");
    let r: redis::RedisResult<()> = redis::cmd("SELECT").arg(4).query(&mut c);
    assert!(r.unwrap_err().to_string().contains("DB index is out of range"));
    // SHUTDOWN exits cleanly, removes the socket and logs Redis's lines.
    let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").arg("NOSAVE").query(&mut c);
    let status = srv.child.wait().unwrap();
    assert!(status.success());
    let mut out = String::new();
    std::io::Read::read_to_string(srv.child.stdout.as_mut().unwrap(), &mut out).unwrap();
    assert!(out.contains("Ready to accept connections tcp"), "{out}");
    assert!(out.contains("Ready to accept connections unix"), "{out}");
    assert!(!sock.exists());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn sigterm_shuts_down_gracefully() {
    let mut s = start_atoll(&[]);
    // SAFETY: sending a signal to our own child process.
    unsafe { libc::kill(s.child.id() as i32, libc::SIGTERM) };
    let status = s.child.wait().unwrap();
    assert!(status.success(), "exit status {status}");
}

#[test]
fn active_expiry_reclaims_unread_keys() {
    let s = start_atoll(&["--hz", "50"]);
    let mut c = client(s.port);
    for i in 0..200 {
        let _: () = redis::cmd("SET").arg(format!("tmp{i}")).arg("v").arg("PX").arg(50).query(&mut c).unwrap();
    }
    let _: () = c.set("keep", "v").unwrap();
    let mut n = 201;
    for _ in 0..100 {
        n = redis::cmd("DBSIZE").query(&mut c).unwrap();
        if n == 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(n, 1, "expired keys were not reclaimed by the active cycle");
    let info: String = redis::cmd("INFO").arg("stats").query(&mut c).unwrap();
    assert!(info.contains("expired_keys:200"), "{info}");
}

/// The server runs the backend the suite asked for: a silent fallback to epoll would make every
/// other test here prove nothing about io_uring (scripts/test.sh runs the suite on both).
#[test]
fn runs_the_requested_io_backend() {
    let s = start_atoll(&[]);
    let mut c = client(s.port);
    let info: String = redis::cmd("INFO").arg("server").query(&mut c).unwrap();
    let mut want = std::env::var("ATOLL_TEST_IO_BACKEND").unwrap_or_else(|_| "io_uring".into());
    // On a kernel that refuses io_uring (seccomp in some containers) the server must run epoll.
    if want == "io_uring" && !atoll::server::uring::available() {
        note_fallback("runs_the_requested_io_backend", "the kernel refuses io_uring: checked that epoll runs instead");
        want = "epoll".into();
    }
    assert!(info.contains(&format!("multiplexing_api:{want}\r\n")), "{info}");
}

/// Where the kernel refuses io_uring (simulated here), the server says so and serves on epoll.
#[test]
fn falls_back_to_epoll_without_io_uring() {
    let port = free_port();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_atoll-server"))
        .args(["--port", &port.to_string(), "--io-backend", "io_uring", "--save", ""])
        .env("ATOLL_NO_IO_URING", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut c = None;
    for _ in 0..200 {
        if let Ok(conn) = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap().get_connection() {
            c = Some(conn);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut c = c.expect("server did not start");
    let info: String = redis::cmd("INFO").arg("server").query(&mut c).unwrap();
    assert!(info.contains("multiplexing_api:epoll\r\n"), "{info}");
    let _: () = c.set("k", "v").unwrap();
    assert_eq!(c.get::<_, String>("k").unwrap(), "v");
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(log.contains("io_uring is not available on this system: falling back to epoll."), "{log}");
}

fn info_field(c: &mut redis::Connection, name: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("stats").query(c).unwrap();
    let line = info.lines().find(|l| l.starts_with(&format!("{name}:"))).unwrap_or_else(|| panic!("{info}"));
    line[name.len() + 1..].parse().unwrap()
}

/// `threads` clients each INCR a shared counter `n` times, round trip by round trip.
fn busy_clients(port: u16, threads: usize, n: usize) {
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            std::thread::spawn(move || {
                let mut c = client(port);
                for _ in 0..n {
                    let _: i64 = c.incr("counter", 1).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

/// Many busy unpipelined clients make an io_uring worker hold its wake-ups for batches of
/// requests (`io-batch-wait`): every reply still arrives, in order, and CONFIG SET 0 turns the
/// waits off. The epoll backend never holds a wake-up.
#[test]
fn batched_waits_under_many_busy_clients() {
    // Two workers whatever the core count: each must see ≥ 16 busy clients (`Pacing`).
    let s = start_atoll(&["--io-batch-wait", "1000", "--threads", "2"]);
    let mut c = client(s.port);
    let got: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("io-batch-wait").query(&mut c).unwrap();
    assert_eq!(got, ["io-batch-wait", "1000"]);
    let reads0 = info_field(&mut c, "total_reads_processed");
    let writes0 = info_field(&mut c, "total_writes_processed");
    busy_clients(s.port, 64, 600);
    assert_eq!(c.get::<_, i64>("counter").unwrap(), 64 * 600);
    // Every request was its own read and its reply its own write (no pipelining here).
    assert!(info_field(&mut c, "total_reads_processed") - reads0 >= 64 * 600);
    assert!(info_field(&mut c, "total_writes_processed") - writes0 >= 64 * 600);
    let info: String = redis::cmd("INFO").arg("server").query(&mut c).unwrap();
    let batched = info_field(&mut c, "io_batched_waits");
    if info.contains("multiplexing_api:io_uring\r\n") && atoll::server::uring::batch_waits_available() {
        assert!(batched > 0, "64 busy clients and no batched wait");
    } else {
        // On the epoll pass (scripts/test.sh runs this suite on both) none are expected either;
        // only an io_uring run without the kernel's feature is a fallback.
        if std::env::var("ATOLL_TEST_IO_BACKEND").map_or(true, |b| b == "io_uring") {
            note_fallback(
                "batched_waits_under_many_busy_clients",
                "batched waits need io_uring with min-timeout waits (Linux >= 6.12): checked that none happen",
            );
        }
        assert_eq!(batched, 0);
    }

    let _: () = redis::cmd("CONFIG").arg("SET").arg("io-batch-wait").arg("0").query(&mut c).unwrap();
    // The setting applies from the next 10 ms epoch of each worker.
    busy_clients(s.port, 8, 300);
    std::thread::sleep(Duration::from_millis(30));
    busy_clients(s.port, 8, 100);
    let before = info_field(&mut c, "io_batched_waits");
    busy_clients(s.port, 64, 300);
    assert_eq!(info_field(&mut c, "io_batched_waits"), before);
    assert_eq!(c.get::<_, i64>("counter").unwrap(), 64 * 600 + 8 * 400 + 64 * 300);
    let err = redis::cmd("CONFIG").arg("SET").arg("io-batch-wait").arg("-1").query::<()>(&mut c).unwrap_err();
    assert!(err.to_string().contains("argument must be between 0 and 1000"), "{err}");
}

/// The io_uring loop looks at the first request of every connection in a round and prefetches
/// their keys together, handing each session the shard and hash it computed. Many unpipelined
/// clients on one worker, in different databases, with the same key names, some of them
/// sending each request in two writes (the second half of a request must not take a hint
/// computed for anything else), all read back exactly their own values.
#[test]
fn unpipelined_clients_across_databases_read_their_own_keys() {
    let s = start_atoll(&["--threads", "1"]);
    let port = s.port;
    let handles: Vec<_> = (0..24u32)
        .map(|i| {
            std::thread::spawn(move || {
                let db = (i % 16).to_string();
                let mut c = RawConn::connect(port);
                assert_eq!(c.cmd(&[b"SELECT", db.as_bytes()]), b"+OK\r\n");
                for j in 0..300u32 {
                    // Clients i and i + 16 share database i % 16; their key names differ, but
                    // every database has the same names.
                    let key = format!("k{}:{}", i / 16, j % 7);
                    let val = format!("{i}:{j}");
                    assert_eq!(c.cmd(&[b"SET", key.as_bytes(), val.as_bytes()]), b"+OK\r\n");
                    let get = encode(&[b"GET".to_vec(), key.clone().into_bytes()]);
                    if i % 3 == 0 {
                        // Split inside the key: the first read ends mid-request.
                        let cut = get.len() - 3;
                        c.send_raw(&get[..cut]);
                        std::thread::sleep(Duration::from_micros(200));
                        c.send_raw(&get[cut..]);
                    } else {
                        c.send_raw(&get);
                    }
                    assert_eq!(c.read_reply(), format!("${}\r\n{val}\r\n", val.len()).into_bytes());
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    // Each database holds the last writes of its own clients (293: the last j with j % 7 == 6).
    let mut c = client(port);
    for db in 0..16u32 {
        let _: () = redis::cmd("SELECT").arg(db).query(&mut c).unwrap();
        assert_eq!(c.get::<_, String>("k0:6").unwrap(), format!("{db}:293"));
        let second: Option<String> = c.get("k1:6").unwrap();
        assert_eq!(second, (db < 8).then(|| format!("{}:293", db + 16)));
    }
}

/// Large requests and replies cross many receive buffers and short sends (io_uring provides
/// 4 KB buffers; a 1 MB value spans hundreds of them), pipelined with small ones.
#[test]
fn large_values_round_trip_through_small_buffers() {
    let s = start_atoll(&[]);
    let mut c = client(s.port);
    let big: Vec<u8> = (0..1_000_003u32).map(|i| (i % 251) as u8).collect();
    let mut p = redis::pipe();
    for i in 0..8 {
        p.set(format!("big{i}"), &big).ignore().get(format!("big{i}")).incr("n", 1);
    }
    let got: Vec<(Vec<u8>, i64)> = p.query(&mut c).unwrap();
    assert_eq!(got.len(), 8);
    for (i, (v, n)) in got.iter().enumerate() {
        assert_eq!(v, &big);
        assert_eq!(*n, i as i64 + 1);
    }
}

/// A setting Atoll cannot honour yet stops start-up with Redis's fatal-config format and a
/// reason naming what is missing; it is never silently ignored.
#[test]
fn unsupported_settings_refuse_to_start() {
    for (name, value, missing) in [
        ("server_cpulist", "0-1", "CPU affinity lists"),
        ("dual-channel-replication-enabled", "yes", "dual-channel replication"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_atoll-server"))
            .args(["--port", "0", &format!("--{name}")])
            .args(value.split(' '))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{name} {value}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("*** FATAL CONFIG FILE ERROR"), "{name}: {err}");
        assert!(err.contains(&format!("not supported by Atoll yet: {missing}")), "{name}: {err}");
    }
}

/// Keys that are never read again are reclaimed by active expiry within Redis's window (its
/// test waits 2 s for three keys with a 500 ms TTL), even when every database holds keys and
/// one worker sweeps them all.
#[test]
fn active_expiry_reclaims_unread_keys_in_every_database() {
    let s = start_atoll(&["--threads", "1"]);
    let mut c = RawConn::connect(s.port);
    for db in 0..16 {
        c.cmd(&[b"SELECT", db.to_string().as_bytes()]);
        assert_eq!(c.cmd(&[b"SET", b"stays", b"1"]), b"+OK\r\n");
    }
    c.cmd(&[b"SELECT", b"9"]);
    for k in [&b"key1"[..], b"key2", b"key3"] {
        assert_eq!(c.cmd(&[b"PSETEX", k, b"500", b"a"]), b"+OK\r\n");
    }
    assert_eq!(c.cmd(&[b"DBSIZE"]), b":4\r\n");
    let start = std::time::Instant::now();
    // DBSIZE does not expire keys itself: only the active cycle can bring it down.
    while c.cmd(&[b"DBSIZE"]) != b":1\r\n" {
        assert!(start.elapsed() < Duration::from_secs(10), "keys did not actively expire");
        std::thread::sleep(Duration::from_millis(100));
    }
    let info = String::from_utf8_lossy(&c.cmd(&[b"INFO", b"stats"])).to_string();
    assert!(info.contains("expired_keys:3\r\n"), "{info}");
}

/// INFO's instantaneous rates follow the traffic: under a steady stream of 1 KB SETs the
/// input rate agrees with the command rate times the request size, and the output rate with
/// the `+OK` replies.
#[test]
fn instantaneous_rates_follow_the_traffic() {
    let s = start_atoll(&[]);
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (stop, port) = (stop.clone(), s.port);
        std::thread::spawn(move || {
            let mut c = RawConn::connect(port);
            let value = vec![b'v'; 1000];
            let one = encode(&[b"SET".to_vec(), b"k".to_vec(), value]);
            let batch: Vec<u8> = one.iter().copied().cycle().take(one.len() * 16).collect();
            while !stop.load(Ordering::Relaxed) {
                c.send_raw(&batch);
                for _ in 0..16 {
                    c.read_reply();
                }
            }
            one.len()
        })
    };
    std::thread::sleep(Duration::from_millis(2500));
    let mut c = RawConn::connect(s.port);
    let info = String::from_utf8_lossy(&c.cmd(&[b"INFO", b"stats"])).to_string();
    stop.store(true, Ordering::Relaxed);
    let request = load.join().unwrap() as f64;
    let field = |n: &str| -> f64 {
        info.lines().find_map(|l| l.strip_prefix(&format!("{n}:"))).unwrap_or_else(|| panic!("{n}")).parse().unwrap()
    };
    let ops = field("instantaneous_ops_per_sec");
    let (kin, kout) = (field("instantaneous_input_kbps"), field("instantaneous_output_kbps"));
    assert!(ops > 1000.0, "{info}");
    let want_in = ops * request / 1024.0;
    assert!((kin - want_in).abs() / want_in < 0.25, "input {kin} KiB/s, expected about {want_in}: {info}");
    let want_out = ops * 5.0 / 1024.0;
    assert!((kout - want_out).abs() / want_out < 0.25, "output {kout} KiB/s, expected about {want_out}: {info}");
}

/// INFO's client memory figures see a client's unfinished request: a 100 KB SET half sent
/// shows in `client_recent_max_input_buffer` and `mem_clients_normal`, and leaves them once
/// the request completes.
#[test]
fn info_client_buffers_follow_an_unfinished_request() {
    let s = start_atoll(&[]);
    let mut info_conn = RawConn::connect(s.port);
    let mut field = |n: &str| -> u64 {
        let info = String::from_utf8_lossy(&info_conn.cmd(&[b"INFO", b"everything"])).to_string();
        info.lines().find_map(|l| l.strip_prefix(&format!("{n}:"))).unwrap_or_else(|| panic!("{n}")).parse().unwrap()
    };
    // Both clients connected and answered once, so only the unfinished request differs
    // between the two measurements (reply buffers of up to 4 KB kept between rounds aside).
    let mut c = RawConn::connect(s.port);
    assert_eq!(c.cmd(&[b"PING"]), b"+PONG\r\n");
    let idle = field("mem_clients_normal");
    c.send_raw(b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$100000\r\n");
    c.send_raw(&[b'x'; 50_000]);
    let mut held = 0;
    for _ in 0..100 {
        held = field("client_recent_max_input_buffer");
        if held >= 50_000 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(held >= 50_000, "{held}");
    let busy = field("mem_clients_normal");
    assert!(busy + 4096 >= idle + 50_000, "idle {idle}, busy {busy}");
    c.send_raw(&[b'x'; 50_000]);
    c.send_raw(b"\r\n");
    assert_eq!(c.read_reply(), b"+OK\r\n");
    assert_eq!(field("client_recent_max_input_buffer"), 0);
    // The client's state plus the small reply buffer it keeps between rounds (≤ 4 KB).
    let after = field("mem_clients_normal");
    assert!(after <= idle + 4096 && after + 4096 >= idle, "{idle} {after}");
}

/// `expired_stale_perc` follows active expiry as Redis's does: it rises while the cycles find
/// expired keys in their samples, decays once there are none, and RESETSTAT zeroes it.
#[test]
fn expired_stale_perc_rises_and_decays() {
    let s = start_atoll(&[]);
    let mut c = RawConn::connect(s.port);
    let stats = |c: &mut RawConn| -> (u64, f64) {
        let info = String::from_utf8_lossy(&c.cmd(&[b"INFO", b"stats"])).to_string();
        let f = |n: &str| info.lines().find_map(|l| l.strip_prefix(&format!("{n}:"))).unwrap().to_string();
        assert!(f("expired_time_cap_reached_count").parse::<u64>().is_ok());
        (f("expired_keys").parse().unwrap(), f("expired_stale_perc").parse().unwrap())
    };
    let mut batch = Vec::new();
    for i in 0..20_000 {
        batch.extend(encode(&[
            b"SET".to_vec(),
            format!("k{i}").into_bytes(),
            b"v".to_vec(),
            b"PX".to_vec(),
            b"200".to_vec(),
        ]));
    }
    c.send_raw(&batch);
    for _ in 0..20_000 {
        c.read_reply();
    }
    let mut peak = 0.0f64;
    for _ in 0..300 {
        let (expired, perc) = stats(&mut c);
        peak = peak.max(perc);
        if expired == 20_000 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(peak > 1.0, "peak {peak}");
    // It decays with each cron cycle that finds nothing stale: a starved server gets fewer.
    let start = std::time::Instant::now();
    let mut later = stats(&mut c).1;
    while later >= peak / 2.0 {
        assert!(start.elapsed() < Duration::from_secs(10), "{later} after a peak of {peak}");
        std::thread::sleep(Duration::from_millis(100));
        later = stats(&mut c).1;
    }
    c.cmd(&[b"CONFIG", b"RESETSTAT"]);
    assert_eq!(stats(&mut c).1, 0.0);
}

/// Clients that close or reset right after their last bytes (here: a reply left unread, so
/// the close is a reset arriving with the data) are let go of, on both backends: with epoll's
/// edge trigger the end came in the same event as the data, and a short read once ended the
/// reading there, so such clients stayed listed forever.
#[test]
fn clients_that_reset_right_after_their_last_bytes_are_let_go() {
    let s = start_atoll(&["--threads", "2"]);
    for i in 0..20 {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        c.write_all(b"\x16\x03\x01garbage\nmore garbage without a newline").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        c.write_all(if i % 2 == 0 { b"\x15\x03\x03" } else { b"GET k\r\n" }).unwrap();
        drop(c);
    }
    let mut admin = RawConn::connect(s.port);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let list = admin.cmd(&[b"CLIENT", b"LIST"]);
        let n = String::from_utf8_lossy(&list).matches("cmd=").count();
        if n == 1 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{n} clients listed: {}", show(&list));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// BITOP DIFF, DIFF1, ANDOR and ONE (Redis 8.2; Valkey 9.1.2 has none of them, so no server
/// can be the oracle): results checked bit by bit against the definitions Redis documents —
/// on X and Y1…Yn, DIFF = X ∧ ¬(Y1 ∨ … ∨ Yn), DIFF1 = ¬X ∧ (Y1 ∨ … ∨ Yn), ANDOR =
/// X ∧ (Y1 ∨ … ∨ Yn), ONE = set in exactly one source — over sources of different lengths
/// and missing ones; the result as long as the longest source, an empty one deleting the
/// destination; Redis's errors; the same in MULTI and in a script.
#[test]
fn bitop_diff_diff1_andor_one_follow_their_definitions() {
    let a = start_atoll(&[]);
    let mut c = RawConn::connect(a.port);
    let bit = |s: &[u8], i: usize| s.get(i / 8).is_some_and(|b| b & (0x80 >> (i % 8)) != 0);
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..200 {
        let n = 2 + (next() % 4) as usize;
        let mut srcs: Vec<Option<Vec<u8>>> = Vec::new();
        for k in 0..n {
            let key = format!("src{k}");
            if next() % 7 == 0 {
                c.cmd(&[b"DEL", key.as_bytes()]);
                srcs.push(None);
            } else {
                let v: Vec<u8> = (0..next() % 40).map(|_| next() as u8).collect();
                c.cmd(&[b"SET", key.as_bytes(), &v]);
                srcs.push(Some(v));
            }
        }
        let maxlen = srcs.iter().map(|s| s.as_ref().map_or(0, |v| v.len())).max().unwrap();
        for op in ["DIFF", "diff1", "AndOr", "ONE"] {
            let mut args: Vec<Vec<u8>> = vec![b"BITOP".to_vec(), op.as_bytes().to_vec(), b"dest".to_vec()];
            args.extend((0..n).map(|k| format!("src{k}").into_bytes()));
            let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
            assert_eq!(c.cmd(&refs), format!(":{maxlen}\r\n").into_bytes(), "round {round} {op}");
            let mut want = vec![0u8; maxlen];
            for i in 0..maxlen * 8 {
                let bits: Vec<bool> = srcs.iter().map(|s| s.as_ref().is_some_and(|v| bit(v, i))).collect();
                let (x, rest) = (bits[0], bits[1..].iter().any(|b| *b));
                let on = match op.to_ascii_uppercase().as_str() {
                    "DIFF" => x && !rest,
                    "DIFF1" => !x && rest,
                    "ANDOR" => x && rest,
                    _ => bits.iter().filter(|b| **b).count() == 1,
                };
                if on {
                    want[i / 8] |= 0x80 >> (i % 8);
                }
            }
            let got = c.cmd(&[b"GET", b"dest"]);
            let expect = if maxlen == 0 {
                b"$-1\r\n".to_vec()
            } else {
                [format!("${maxlen}\r\n").into_bytes(), want, b"\r\n".to_vec()].concat()
            };
            assert_eq!(show(&got), show(&expect), "round {round} {op} over {srcs:?}");
        }
    }
    // Errors, in Redis's words (the operation named in capitals, as Redis writes it).
    for (args, err) in [
        (&["BITOP", "diff", "d", "x"][..], "-ERR BITOP DIFF must be called with at least two source keys.\r\n"),
        (&["BITOP", "DIFF1", "d", "x"], "-ERR BITOP DIFF1 must be called with at least two source keys.\r\n"),
        (&["BITOP", "andor", "d", "x"], "-ERR BITOP ANDOR must be called with at least two source keys.\r\n"),
        (&["BITOP", "NOT", "d", "x", "y"], "-ERR BITOP NOT must be called with a single source key.\r\n"),
        (&["BITOP", "NOR", "d", "x", "y"], "-ERR syntax error\r\n"),
    ] {
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        assert_eq!(show(&c.cmd(&refs)), show(err.as_bytes()), "{args:?}");
    }
    // ONE of a single key is that key; a list among the sources: WRONGTYPE, nothing written.
    c.cmd(&[b"SET", b"one", b"\x0f"]);
    assert_eq!(c.cmd(&[b"BITOP", b"ONE", b"d1", b"one"]), b":1\r\n");
    assert_eq!(c.cmd(&[b"GET", b"d1"]), b"$1\r\n\x0f\r\n");
    c.cmd(&[b"RPUSH", b"list", b"a"]);
    let e = c.cmd(&[b"BITOP", b"DIFF", b"d2", b"one", b"list"]);
    assert!(e.starts_with(b"-WRONGTYPE"), "{}", show(&e));
    assert_eq!(c.cmd(&[b"EXISTS", b"d2"]), b":0\r\n");
    // Missing sources only: 0, and the destination deleted.
    c.cmd(&[b"SET", b"d3", b"old"]);
    assert_eq!(c.cmd(&[b"BITOP", b"DIFF1", b"d3", b"nokey1", b"nokey2"]), b":0\r\n");
    assert_eq!(c.cmd(&[b"EXISTS", b"d3"]), b":0\r\n");
    // In MULTI and in a script, as alone.
    c.cmd(&[b"SET", b"x", b"\xf0"]);
    c.cmd(&[b"SET", b"y", b"\x3c"]);
    c.cmd(&[b"MULTI"]);
    c.cmd(&[b"BITOP", b"DIFF", b"m", b"x", b"y"]);
    c.cmd(&[b"GET", b"m"]);
    assert_eq!(show(&c.cmd(&[b"EXEC"])), show(b"*2\r\n:1\r\n$1\r\n\xc0\r\n"));
    let script = b"redis.call('BITOP', 'ANDOR', KEYS[1], KEYS[2], KEYS[3]) return redis.call('GET', KEYS[1])";
    assert_eq!(show(&c.cmd(&[b"EVAL", script, b"3", b"s", b"x", b"y"])), show(b"$1\r\n\x30\r\n"));
}

/// A hash field past its deadline is gone for every command — HLEN, HGETALL, HSCAN, HRANDFIELD,
/// EXISTS and TYPE included — at once, not when the expiry cycle gets to it: with active expiry
/// off, the first command touching the key removes the due fields (`hexpired`; `del` and the
/// key's removal with its last field), and writes see them gone too (HSET counts such a field
/// as new, HINCRBY starts from 0). Active expiry then empties a big hash over several cycles,
/// with `hexpired` per hash and INFO `expired_fields` counting every field.
#[test]
fn due_fields_are_gone_for_every_command() {
    let a = start_atoll(&["--enable-debug-command", "yes", "--notify-keyspace-events", "Eghx"]);
    let mut c = RawConn::connect(a.port);
    let mut sub = RawConn::connect(a.port);
    sub.cmd(&[b"PSUBSCRIBE", b"__keyevent@0__:*"]);
    c.cmd(&[b"DEBUG", b"SET-ACTIVE-EXPIRE", b"0"]);
    c.cmd(&[b"HSET", b"h", b"a", b"1", b"b", b"2", b"c", b"3", b"n", b"10"]);
    c.cmd(&[b"HPEXPIRE", b"h", b"100", b"FIELDS", b"3", b"a", b"b", b"n"]);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(c.cmd(&[b"HLEN", b"h"]), b":1\r\n");
    assert_eq!(c.cmd(&[b"HGETALL", b"h"]), b"*2\r\n$1\r\nc\r\n$1\r\n3\r\n");
    assert_eq!(c.cmd(&[b"HSCAN", b"h", b"0"]), b"*2\r\n$1\r\n0\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n");
    assert_eq!(c.cmd(&[b"HRANDFIELD", b"h", b"-5"]), b"*5\r\n$1\r\nc\r\n$1\r\nc\r\n$1\r\nc\r\n$1\r\nc\r\n$1\r\nc\r\n");
    assert_eq!(c.cmd(&[b"HSET", b"h", b"a", b"9"]), b":1\r\n", "a due field is a new one");
    assert_eq!(c.cmd(&[b"HINCRBY", b"h", b"n", b"1"]), b":1\r\n", "from 0");
    let event = |e: &[u8]| parse_array(e)[2].clone();
    for want in [&b"hset"[..], b"hexpire", b"hexpired", b"hset", b"hincrby"] {
        assert_eq!(event(&sub.read_reply()), [&b"__keyevent@0__:"[..], want].concat(), "hexpired: the first lookup");
    }
    // The last field's deadline takes the key: EXISTS and TYPE already know.
    c.cmd(&[b"HSET", b"last", b"x", b"1"]);
    c.cmd(&[b"HPEXPIRE", b"last", b"50", b"FIELDS", b"1", b"x"]);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(c.cmd(&[b"EXISTS", b"last"]), b":0\r\n");
    assert_eq!(c.cmd(&[b"TYPE", b"last"]), b"+none\r\n");
    for want in [&b"hset"[..], b"hexpire", b"hexpired", b"del"] {
        assert_eq!(event(&sub.read_reply()), [&b"__keyevent@0__:"[..], want].concat());
    }
    // Active expiry: 30 000 due fields in one hash, emptied over several cycles (at most 1000
    // fields of a hash per pass), the key removed with the last.
    c.cmd(&[b"DEL", b"big"]);
    let mut args: Vec<Vec<u8>> = vec![b"HSET".to_vec(), b"big".to_vec()];
    for i in 0..30_000 {
        args.push(format!("f{i}").into_bytes());
        args.push(b"v".to_vec());
    }
    c.send(&args);
    assert_eq!(c.read_reply(), b":30000\r\n");
    let mut args: Vec<Vec<u8>> =
        vec![b"HPEXPIRE".to_vec(), b"big".to_vec(), b"100".to_vec(), b"FIELDS".to_vec(), b"30000".to_vec()];
    args.extend((0..30_000).map(|i| format!("f{i}").into_bytes()));
    c.send(&args);
    c.read_reply();
    let before = info_number(&mut c, "expired_fields");
    std::thread::sleep(Duration::from_millis(200));
    c.cmd(&[b"DEBUG", b"SET-ACTIVE-EXPIRE", b"1"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    // Watched through DBSIZE, which does not look the key up (a lookup would reclaim it).
    while c.cmd(&[b"DBSIZE"]) != b":1\r\n" {
        assert!(std::time::Instant::now() < deadline, "active field expiry did not empty the hash");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(info_number(&mut c, "expired_fields") - before, 30_000);
    for want in [&b"hset"[..], b"hexpire"] {
        assert_eq!(event(&sub.read_reply()), [&b"__keyevent@0__:"[..], want].concat());
    }
    let mut expired_events = 0;
    loop {
        let e = event(&sub.read_reply());
        if e == b"__keyevent@0__:del" {
            break;
        }
        assert_eq!(e, b"__keyevent@0__:hexpired");
        expired_events += 1;
    }
    assert!(expired_events >= 30, "one event per pass over the hash: {expired_events}");
}

fn info_number(c: &mut RawConn, field: &str) -> i64 {
    let info = String::from_utf8_lossy(&c.cmd(&[b"INFO", b"stats"])).to_string();
    info.lines().find_map(|l| l.strip_prefix(&format!("{field}:"))).unwrap().trim().parse().unwrap()
}

/// Redis 8.4's compare-and-set and compare-and-delete, following Redis's documentation (no
/// Redis 8 runs here): DIGEST is XXH3-64 as 16 lowercase hex digits (the documentation's
/// example, and three more published values); SET … IFEQ/IFNE/IFDEQ/IFDNE set only when the
/// condition holds (IFNE and IFDNE also without the key, IFEQ and IFDEQ never), one condition
/// at most and none with NX/XX; DELEX deletes any key without a condition, a string key when
/// its condition holds; WRONGTYPE over another type; the same in MULTI and in a script.
#[test]
fn redis8_digest_and_conditional_writes_follow_redis_documentation() {
    let a = start_atoll(&[]);
    let mut c = RawConn::connect(a.port);
    for (value, digest) in [
        ("Hello world", "b6acb9d84a38ff74"),
        ("Hello, Dragonfly!", "063b4909128e92b7"),
        ("test", "9ec9f7918d7dfc40"),
        ("hello", "9555e8555c62dcfd"),
    ] {
        c.cmd(&[b"SET", b"k", value.as_bytes()]);
        assert_eq!(c.cmd(&[b"DIGEST", b"k"]), format!("$16\r\n{digest}\r\n").into_bytes(), "{value}");
    }
    c.cmd(&[b"SET", b"n", b"123"]);
    let d123 = bulk_text(&c.cmd(&[b"DIGEST", b"n"]));
    c.cmd(&[b"SET", b"n", b"123 "]);
    assert_ne!(bulk_text(&c.cmd(&[b"DIGEST", b"n"])), d123, "an integer is digested as its text");
    c.cmd(&[b"SET", b"n", b"123"]);
    assert_eq!(bulk_text(&c.cmd(&[b"DIGEST", b"n"])), d123);
    assert_eq!(c.cmd(&[b"DIGEST", b"missing"]), b"$-1\r\n");
    c.cmd(&[b"RPUSH", b"list", b"x"]);
    let wrongtype = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n".to_vec();
    assert_eq!(c.cmd(&[b"DIGEST", b"list"]), wrongtype);
    // SET's conditions.
    c.cmd(&[b"SET", b"k", b"v1"]);
    let dk = bulk_text(&c.cmd(&[b"DIGEST", b"k"]));
    let cases: Vec<(Vec<&[u8]>, &[u8])> = vec![
        (vec![b"SET", b"k", b"v2", b"IFNE", b"v1"], b"$-1\r\n"),
        (vec![b"SET", b"k", b"v2", b"IFNE", b"other"], b"+OK\r\n"),
        (vec![b"SET", b"k", b"v3", b"IFDEQ", dk.as_bytes()], b"$-1\r\n"),
        (vec![b"SET", b"missing1", b"v", b"IFNE", b"x"], b"+OK\r\n"),
        (vec![b"SET", b"missing2", b"v", b"IFDNE", b"0"], b"+OK\r\n"),
        (vec![b"SET", b"missing3", b"v", b"IFDEQ", b"0"], b"$-1\r\n"),
        (vec![b"SET", b"missing4", b"v", b"IFEQ", b"v"], b"$-1\r\n"),
        (vec![b"SET", b"k", b"v", b"NX", b"IFNE", b"a"], b"-ERR syntax error\r\n"),
        (vec![b"SET", b"k", b"v", b"IFNE", b"a", b"IFDEQ", b"b"], b"-ERR syntax error\r\n"),
        (vec![b"SET", b"k", b"v", b"IFDNE"], b"-ERR syntax error\r\n"),
        (vec![b"SET", b"list", b"v", b"IFNE", b"a"], &wrongtype),
        (vec![b"SET", b"list", b"v", b"IFDNE", b"a"], &wrongtype),
    ];
    for (args, want) in &cases {
        assert_eq!(
            show(&c.cmd(args)),
            show(want),
            "{:?}",
            args.iter().map(|a| String::from_utf8_lossy(a)).collect::<Vec<_>>()
        );
    }
    let d2 = bulk_text(&c.cmd(&[b"DIGEST", b"k"]));
    assert_eq!(c.cmd(&[b"SET", b"k", b"v3", b"IFDEQ", d2.to_uppercase().as_bytes(), b"GET"]), b"$2\r\nv2\r\n");
    assert_eq!(c.cmd(&[b"SET", b"k", b"v4", b"IFDNE", d2.as_bytes(), b"PX", b"100000"]), b"+OK\r\n");
    assert_eq!(c.cmd(&[b"GET", b"k"]), b"$2\r\nv4\r\n");
    // DELEX.
    let d4 = bulk_text(&c.cmd(&[b"DIGEST", b"k"]));
    for (args, want) in [
        (vec![&b"DELEX"[..], b"k", b"IFEQ", b"v3"], &b":0\r\n"[..]),
        (vec![b"DELEX", b"k", b"IFNE", b"v4"], b":0\r\n"),
        (vec![b"DELEX", b"k", b"IFDNE", d4.as_bytes()], b":0\r\n"),
        (vec![b"DELEX", b"k", b"IFDEQ", d4.as_bytes()], b":1\r\n"),
        (vec![b"DELEX", b"k"], b":0\r\n"),
        (vec![b"DELEX", b"missing1", b"IFNE", b"zzz"], b":1\r\n"),
        (vec![b"DELEX", b"missing1", b"IFNE", b"zzz"], b":0\r\n"),
        (vec![b"DELEX", b"list", b"IFEQ", b"x"], &wrongtype),
        (vec![b"DELEX", b"list", b"BOGUS", b"x"], b"-ERR syntax error\r\n"),
        (vec![b"DELEX", b"list", b"IFEQ"], b"-ERR syntax error\r\n"),
        (vec![b"DELEX", b"list"], b":1\r\n"),
        (vec![b"DELEX"], b"-ERR wrong number of arguments for 'delex' command\r\n"),
    ] {
        assert_eq!(
            show(&c.cmd(&args)),
            show(want),
            "{:?}",
            args.iter().map(|a| String::from_utf8_lossy(a)).collect::<Vec<_>>()
        );
    }
    // In MULTI and in a script.
    c.cmd(&[b"SET", b"m", b"1"]);
    c.cmd(&[b"MULTI"]);
    c.cmd(&[b"SET", b"m", b"2", b"IFNE", b"1"]);
    c.cmd(&[b"SET", b"m", b"3", b"IFEQ", b"1"]);
    c.cmd(&[b"DIGEST", b"m"]);
    c.cmd(&[b"DELEX", b"m", b"IFNE", b"3"]);
    let digest3 = bulk_text(&{
        let mut t = RawConn::connect(a.port);
        t.cmd(&[b"SET", b"tmp", b"3"]);
        t.cmd(&[b"DIGEST", b"tmp"])
    });
    assert_eq!(c.cmd(&[b"EXEC"]), format!("*4\r\n$-1\r\n+OK\r\n$16\r\n{digest3}\r\n:0\r\n").into_bytes());
    let script = b"redis.call('SET', KEYS[1], 'x', 'IFDNE', '0'); return {redis.call('DIGEST', KEYS[1]), redis.call('DELEX', KEYS[1], 'IFEQ', 'x')}";
    let got = c.cmd(&[b"EVAL", script, b"1", b"s"]);
    assert!(got.starts_with(b"*2\r\n$16\r\n") && got.ends_with(b":1\r\n"), "{}", show(&got));
    assert_eq!(c.cmd(&[b"EXISTS", b"s"]), b":0\r\n");
}

fn bulk_text(reply: &[u8]) -> String {
    let s = String::from_utf8_lossy(reply).to_string();
    s.split("\r\n").nth(1).unwrap_or_default().to_string()
}

/// Redis 8.2's XDELEX and XACKDEL, following Redis's documentation (no Redis 8 runs here):
/// per ID 1 deleted, 2 kept because a group has not read or not acknowledged it (ACKED), -1
/// not in the stream (every ID without the key); KEEPREF leaves the groups' references,
/// DELREF removes them (even for an entry already gone); XACKDEL acknowledges in its group
/// first; a missing group is NOGROUP.
#[test]
fn xdelex_and_xackdel_follow_redis_documentation() {
    let a = start_atoll(&[]);
    let mut c = RawConn::connect(a.port);
    for i in 1..=5 {
        c.cmd(&[b"XADD", b"s", format!("{i}-1").as_bytes(), b"f", b"v"]);
    }
    c.cmd(&[b"XGROUP", b"CREATE", b"s", b"g1", b"0"]);
    c.cmd(&[b"XGROUP", b"CREATE", b"s", b"g2", b"$"]);
    c.cmd(&[b"XREADGROUP", b"GROUP", b"g1", b"c1", b"COUNT", b"2", b"STREAMS", b"s", b">"]);
    let pending = |c: &mut RawConn| {
        let r = c.cmd(&[b"XPENDING", b"s", b"g1"]);
        String::from_utf8_lossy(&r).split("\r\n").nth(1).unwrap().to_string()
    };
    assert_eq!(pending(&mut c), ":2");
    let cases: Vec<(Vec<&[u8]>, &str)> = vec![
        (vec![b"XDELEX", b"s", b"IDS", b"1", b"9-9"], "*1\r\n:-1\r\n"),
        // 1-1 is pending in g1; 3-1 and 5-1 g1 has not read yet.
        (vec![b"XDELEX", b"s", b"ACKED", b"IDS", b"3", b"1-1", b"3-1", b"5-1"], "*3\r\n:2\r\n:2\r\n:2\r\n"),
        // Acknowledged in g1, read by both: deleted.
        (vec![b"XACKDEL", b"s", b"g1", b"ACKED", b"IDS", b"2", b"1-1", b"2-1"], "*2\r\n:1\r\n:1\r\n"),
        (vec![b"XLEN", b"s"], ":3\r\n"),
        (vec![b"XDELEX", b"s", b"IDS", b"1", b"3-1", b"KEEPREF"], "*1\r\n:1\r\n"),
        (vec![b"XDELEX", b"nokey", b"IDS", b"2", b"1-1", b"2-1"], "*2\r\n:-1\r\n:-1\r\n"),
        (vec![b"XACKDEL", b"nokey", b"g", b"IDS", b"1", b"1-1"], "*1\r\n:-1\r\n"),
        (
            vec![b"XACKDEL", b"s", b"nogroup", b"IDS", b"1", b"4-1"],
            "-NOGROUP No such key 's' or consumer group 'nogroup'\r\n",
        ),
        (
            vec![b"XDELEX", b"s", b"IDS", b"0", b"1-1"],
            "-ERR Number of IDs must be a positive integer that matches the IDs given\r\n",
        ),
        (
            vec![b"XDELEX", b"s", b"IDS", b"2", b"4-1"],
            "-ERR Number of IDs must be a positive integer that matches the IDs given\r\n",
        ),
        (vec![b"XDELEX", b"s", b"KEEPREF", b"DELREF", b"IDS", b"1", b"4-1"], "-ERR syntax error\r\n"),
        (vec![b"XDELEX", b"s", b"IDS", b"1", b"4-1", b"BOGUS"], "-ERR syntax error\r\n"),
        (
            vec![b"XDELEX", b"s", b"IDS", b"1", b"bad"],
            "-ERR Invalid stream ID specified as stream command argument\r\n",
        ),
        (vec![b"XDELEX", b"s", b"DELREF"], "-ERR wrong number of arguments for 'xdelex' command\r\n"),
        (vec![b"XLEN", b"s"], ":2\r\n"),
    ];
    for (args, want) in &cases {
        assert_eq!(
            show(&c.cmd(args)),
            show(want.as_bytes()),
            "{:?}",
            args.iter().map(|a| String::from_utf8_lossy(a)).collect::<Vec<_>>()
        );
    }
    // KEEPREF leaves a dangling reference; DELREF removes it, entry gone or not.
    c.cmd(&[b"XREADGROUP", b"GROUP", b"g1", b"c1", b"COUNT", b"2", b"STREAMS", b"s", b">"]);
    assert_eq!(pending(&mut c), ":2");
    assert_eq!(c.cmd(&[b"XDELEX", b"s", b"IDS", b"1", b"4-1"]), b"*1\r\n:1\r\n");
    assert_eq!(pending(&mut c), ":2", "KEEPREF: the reference stays");
    assert_eq!(c.cmd(&[b"XDELEX", b"s", b"DELREF", b"IDS", b"2", b"4-1", b"5-1"]), b"*2\r\n:-1\r\n:1\r\n");
    assert_eq!(pending(&mut c), ":0", "DELREF: no reference left");
    assert_eq!(c.cmd(&[b"XLEN", b"s"]), b":0\r\n");
    c.cmd(&[b"SET", b"str", b"x"]);
    assert_eq!(
        c.cmd(&[b"XDELEX", b"str", b"IDS", b"1", b"1-1"]),
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
}

/// HOTKEYS GET's one map (RESP2: a flat array inside a one-element array), by field name.
fn hotkeys_report(c: &mut RawConn) -> Vec<(String, Vec<u8>)> {
    let r = c.cmd(&[b"HOTKEYS", b"GET"]);
    let (_, outer) = split_aggregate(&r).unwrap_or_else(|| panic!("{}", show(&r)));
    assert_eq!(outer.len(), 1, "one map per node: {}", show(&r));
    let (_, items) = split_aggregate(&outer[0]).unwrap();
    items
        .chunks(2)
        .map(|kv| {
            (String::from_utf8_lossy(&parse_array(&[b"*1\r\n", &kv[0][..]].concat())[0]).into_owned(), kv[1].clone())
        })
        .collect()
}

fn report_int(rep: &[(String, Vec<u8>)], name: &str) -> i64 {
    let v = &rep.iter().find(|(k, _)| k == name).unwrap_or_else(|| panic!("no {name} in {rep:?}")).1;
    assert_eq!(v[0], b':', "{name}: {}", show(v));
    std::str::from_utf8(&v[1..v.len() - 2]).unwrap().parse().unwrap()
}

/// A `by-*` list as (key, value) pairs.
fn report_list(rep: &[(String, Vec<u8>)], name: &str) -> Vec<(String, i64)> {
    let v = &rep.iter().find(|(k, _)| k == name).unwrap_or_else(|| panic!("no {name}")).1;
    let (_, items) = split_aggregate(v).unwrap();
    items
        .chunks(2)
        .map(|kv| {
            let key = String::from_utf8_lossy(&parse_array(&[b"*1\r\n", &kv[0][..]].concat())[0]).into_owned();
            (key, std::str::from_utf8(&kv[1][1..kv[1].len() - 2]).unwrap().parse().unwrap())
        })
        .collect()
}

/// Redis 8.6's HOTKEYS, from Redis's reference and the facts of its sources (no server here
/// runs it): START's checks in their order and texts, STOP/GET without a session (null),
/// RESET refused while running; GET's fields in order, with the CPU and NET ones only for the
/// metrics asked; bytes counted exactly (the request as RESP plus the reply, divided among a
/// command's keys; commands without keys nowhere; each command of a MULTI on its own, EXEC
/// not); a script's time on its declared keys and its own commands not counted; SAMPLE
/// thinning the ranking but not the totals; DURATION stopping the session by itself.
#[test]
fn hotkeys_session_measures_keys_as_redis_documents() {
    let a = start_atoll(&[]);
    let mut c = RawConn::connect(a.port);
    let cases: Vec<(Vec<&[u8]>, &str)> = vec![
        (vec![b"HOTKEYS"], "-ERR wrong number of arguments for 'hotkeys' command\r\n"),
        (vec![b"HOTKEYS", b"GET"], "$-1\r\n"),
        (vec![b"HOTKEYS", b"STOP"], "$-1\r\n"),
        (vec![b"HOTKEYS", b"RESET"], "+OK\r\n"),
        (vec![b"HOTKEYS", b"GET", b"x"], "-ERR wrong number of arguments for 'hotkeys|get' command\r\n"),
        (vec![b"HOTKEYS", b"NOPE"], "-ERR unknown subcommand 'NOPE'. Try HOTKEYS HELP.\r\n"),
        (vec![b"HOTKEYS", b"START"], "-ERR METRICS parameter is required\r\n"),
        (vec![b"HOTKEYS", b"START", b"COUNT", b"1", b"METRICS"], "-ERR METRICS parameter is required\r\n"),
        (vec![b"HOTKEYS", b"START", b"METRICS", b"0", b"CPU"], "-ERR METRICS count must be > 0 and <= 2\r\n"),
        (vec![b"HOTKEYS", b"START", b"METRICS", b"x", b"CPU"], "-ERR METRICS count must be > 0 and <= 2\r\n"),
        (
            vec![b"HOTKEYS", b"START", b"METRICS", b"2", b"CPU"],
            "-ERR METRICS count does not match number of metric types provided\r\n",
        ),
        (
            vec![b"HOTKEYS", b"START", b"METRICS", b"2", b"net", b"NET"],
            "-ERR METRICS NET defined more than once!\r\n",
        ),
        (
            vec![b"HOTKEYS", b"START", b"METRICS", b"1", b"GPU"],
            "-ERR METRICS no valid metrics passed. Supported: CPU|NET\r\n",
        ),
        (vec![b"HOTKEYS", b"START", b"METRICS", b"1", b"CPU", b"NET"], "-ERR syntax error\r\n"),
        (vec![b"HOTKEYS", b"START", b"METRICS", b"1", b"CPU", b"COUNT"], "-ERR syntax error\r\n"),
        (
            vec![b"HOTKEYS", b"START", b"METRICS", b"1", b"CPU", b"COUNT", b"65"],
            "-ERR COUNT must be between 1 and 64\r\n",
        ),
        (
            vec![b"HOTKEYS", b"START", b"METRICS", b"1", b"CPU", b"DURATION", b"0"],
            "-ERR DURATION must be between 1 and 1000000\r\n",
        ),
        (
            vec![b"HOTKEYS", b"START", b"METRICS", b"1", b"CPU", b"SAMPLE", b"0"],
            "-ERR SAMPLE ratio must be positive\r\n",
        ),
        (
            vec![b"HOTKEYS", b"START", b"METRICS", b"1", b"CPU", b"SLOTS", b"1", b"0"],
            "-ERR SLOTS parameter cannot be used in non-cluster mode\r\n",
        ),
        (
            vec![b"EVAL", b"return redis.call('HOTKEYS', 'GET')", b"0"],
            "-ERR This Redis command is not allowed from script script: f_0d2cbcd2f8c4b0ec4a4a2fcd2d2b48d6a8ad3bc5, on @user_script:1.\r\n",
        ),
    ];
    for (args, want) in &cases {
        let got = c.cmd(args);
        if want.starts_with("-ERR This Redis command") {
            assert!(show(&got).starts_with("-ERR This Redis command is not allowed from script"), "{}", show(&got));
            continue;
        }
        assert_eq!(
            show(&got),
            show(want.as_bytes()),
            "{:?}",
            args.iter().map(|a| String::from_utf8_lossy(a)).collect::<Vec<_>>()
        );
    }

    // NET only, counted to the byte. SET k1 hello: 32 bytes in, 5 out; GET k1: 21 in, 11 out;
    // PING has no key; MSET a 1 b 22: 43 in, 5 out, 24 for each key.
    assert_eq!(c.cmd(&[b"HOTKEYS", b"START", b"METRICS", b"1", b"NET"]), b"+OK\r\n");
    assert_eq!(
        show(&c.cmd(&[b"HOTKEYS", b"START", b"METRICS", b"1", b"CPU"])),
        "-ERR hotkey tracking session already in progress\\r\\n"
    );
    assert_eq!(
        show(&c.cmd(&[b"HOTKEYS", b"RESET"])),
        "-ERR hotkey tracking session in progress, stop tracking first\\r\\n"
    );
    c.cmd(&[b"SET", b"k1", b"hello"]);
    c.cmd(&[b"GET", b"k1"]);
    c.cmd(&[b"PING"]);
    c.cmd(&[b"MSET", b"a", b"1", b"b", b"22"]);
    assert_eq!(c.cmd(&[b"HOTKEYS", b"STOP"]), b"+OK\r\n");
    assert_eq!(c.cmd(&[b"HOTKEYS", b"STOP"]), b"$-1\r\n");
    let rep = hotkeys_report(&mut c);
    let names: Vec<&str> = rep.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "tracking-active",
            "sample-ratio",
            "selected-slots",
            "all-commands-all-slots-us",
            "net-bytes-all-commands-all-slots",
            "collection-start-time-unix-ms",
            "collection-duration-ms",
            "total-net-bytes",
            "by-net-bytes"
        ]
    );
    assert_eq!(report_int(&rep, "tracking-active"), 0);
    assert_eq!(report_int(&rep, "sample-ratio"), 1);
    assert_eq!(show(&rep[2].1), "*1\\r\\n*2\\r\\n:0\\r\\n:16383\\r\\n");
    assert_eq!(report_int(&rep, "net-bytes-all-commands-all-slots"), 117);
    assert_eq!(report_int(&rep, "total-net-bytes"), 117);
    assert_eq!(report_list(&rep, "by-net-bytes"), [("k1".into(), 69), ("a".into(), 24), ("b".into(), 24)]);
    let start = report_int(&rep, "collection-start-time-unix-ms");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    assert!((now - 10_000..=now).contains(&start), "{start} vs {now}");
    // The results stay until RESET; GET in RESP3 is a map inside an array.
    c.cmd(&[b"HELLO", b"3"]);
    assert!(c.cmd(&[b"HOTKEYS", b"GET"]).starts_with(b"*1\r\n%9\r\n"));
    assert_eq!(c.cmd(&[b"HOTKEYS", b"RESET"]), b"+OK\r\n");
    assert_eq!(c.cmd(&[b"HOTKEYS", b"GET"]), b"_\r\n");
    c.cmd(&[b"HELLO", b"2"]);

    // Each command of a MULTI on its own (SET m1 abc: 30 bytes in, 5 out); MULTI and EXEC
    // have no key.
    assert_eq!(c.cmd(&[b"HOTKEYS", b"START", b"METRICS", b"1", b"NET"]), b"+OK\r\n");
    c.cmd(&[b"MULTI"]);
    c.cmd(&[b"SET", b"m1", b"abc"]);
    c.cmd(&[b"SET", b"m2", b"abc"]);
    c.cmd(&[b"EXEC"]);
    c.cmd(&[b"HOTKEYS", b"STOP"]);
    let rep = hotkeys_report(&mut c);
    assert_eq!(report_int(&rep, "net-bytes-all-commands-all-slots"), 70);
    assert_eq!(report_list(&rep, "by-net-bytes"), [("m1".into(), 35), ("m2".into(), 35)]);

    // CPU: a script's time goes to its declared key; the commands it runs are not counted.
    assert_eq!(c.cmd(&[b"HOTKEYS", b"START", b"METRICS", b"1", b"CPU", b"COUNT", b"2"]), b"+OK\r\n");
    // (TIME is fixed inside a script: count instead of watching the clock.)
    let busy = b"redis.call('SET', 'inner', 'v') local x = 0 for i = 1, 5000000 do x = x + i end return x";
    c.cmd(&[b"EVAL", busy, b"1", b"slow"]);
    for _ in 0..20 {
        c.cmd(&[b"SET", b"fast", b"v"]);
    }
    c.cmd(&[b"HOTKEYS", b"STOP"]);
    let rep = hotkeys_report(&mut c);
    let names: Vec<&str> = rep.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names[7..],
        ["total-cpu-time-user-ms", "total-cpu-time-sys-ms", "by-cpu-time-us"],
        "CPU's fields, and no NET ones"
    );
    let by_cpu = report_list(&rep, "by-cpu-time-us");
    assert_eq!(by_cpu[0].0, "slow", "{by_cpu:?}");
    assert!(by_cpu[0].1 >= 2_000, "five million Lua additions take milliseconds: {by_cpu:?}");
    assert!(by_cpu.len() <= 2 && by_cpu.iter().all(|(k, _)| k != "inner"), "{by_cpu:?}");
    assert!(report_int(&rep, "all-commands-all-slots-us") >= by_cpu[0].1);
    assert!(report_int(&rep, "total-cpu-time-user-ms") + report_int(&rep, "total-cpu-time-sys-ms") >= 20);

    // SAMPLE thins the ranking, not the totals; DURATION stops the session by itself.
    let start = [b"HOTKEYS" as &[u8], b"START", b"METRICS", b"1", b"NET", b"SAMPLE", b"1000", b"DURATION", b"1"];
    assert_eq!(c.cmd(&start), b"+OK\r\n");
    for _ in 0..200 {
        c.cmd(&[b"SET", b"k1", b"hello"]);
    }
    let rep = hotkeys_report(&mut c);
    assert_eq!(report_int(&rep, "tracking-active"), 1);
    assert_eq!(report_int(&rep, "sample-ratio"), 1000);
    assert_eq!(report_int(&rep, "net-bytes-all-commands-all-slots"), 200 * 37);
    assert!(report_int(&rep, "total-net-bytes") < 200 * 37 / 4, "one command in 1000 is ranked");
    std::thread::sleep(Duration::from_millis(1200));
    c.cmd(&[b"SET", b"k1", b"hello"]);
    let rep = hotkeys_report(&mut c);
    assert_eq!(report_int(&rep, "tracking-active"), 0);
    assert_eq!(report_int(&rep, "collection-duration-ms"), 1000);
    assert_eq!(report_int(&rep, "net-bytes-all-commands-all-slots"), 200 * 37, "nothing counted after the end");
    assert_eq!(c.cmd(&[b"HOTKEYS", b"STOP"]), b"$-1\r\n");
    assert_eq!(c.cmd(&[b"HOTKEYS", b"RESET"]), b"+OK\r\n");
}
