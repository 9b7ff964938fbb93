//! Sequences of commands, not single requests (issue 34). Three clients of one in-process
//! server send commands picked from the whole command table — arguments drawn from a small
//! vocabulary of keys, numbers and option words, so that many are well-shaped — one by one or
//! pipelined, inside MULTI/EXEC, inside EVAL and FCALL (`redis.pcall` of the picked command),
//! across databases, with CLIENT KILL, CLIENT PAUSE, SWAPDB, FLUSHALL and DEBUG RELOAD among
//! them.
//!
//! Must hold: no panic (`bench/fuzz.sh` builds with debug assertions, so the lock-order check
//! of `atoll::lockorder` is live too), no hang (libFuzzer's `-timeout`), and every request of a
//! client that is not blocked, paused, subscribed or gone gets exactly one reply. Commands
//! that would leave the process (SHUTDOWN, DEBUG's crashes, replication and cluster links,
//! MIGRATE, CONFIG SET, saves to files other than DEBUG RELOAD's) are left out: the network
//! tests and `bench/sequences.py` cover those with real processes.
#![no_main]

use atoll::exec::client::{Client, ClientHandle};
use atoll::exec::Server;
use atoll::protocol::Reply;
use atoll::server::session::Session;
use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, OnceLock};

const CLIENTS: usize = 3;

/// Not picked at random (see the module's comment); some come back in a fixed form below.
const LEFT_OUT: &[&str] = &[
    "shutdown",
    "debug",
    "monitor",
    "sync",
    "psync",
    "replicaof",
    "slaveof",
    "failover",
    "replconf",
    "migrate",
    "config|set",
    "config|rewrite",
    "save",
    "bgsave",
    "bgrewriteaof",
    "wait",
    "waitaof",
    "module",
    "cluster",
    "acl|load",
    "acl|save",
    "client|pause",
    "client|kill",
    "quit",
    "sentinel",
    "lastsave",
    "latency|doctor",
    "memory|doctor",
];

const WORDS: &[&[u8]] = &[
    b"k0",
    b"k1",
    b"k2",
    b"{t}a",
    b"{t}b",
    b"0",
    b"1",
    b"-1",
    b"2",
    b"10",
    b"100",
    b"1.5",
    b"+inf",
    b"-inf",
    b"NX",
    b"XX",
    b"GT",
    b"LT",
    b"CH",
    b"INCR",
    b"WITHSCORES",
    b"LIMIT",
    b"COUNT",
    b"MATCH",
    b"*",
    b"TYPE",
    b"string",
    b"EX",
    b"PX",
    b"KEEPTTL",
    b"GET",
    b"BY",
    b"ALPHA",
    b"STORE",
    b"LEFT",
    b"RIGHT",
    b"BEFORE",
    b"AFTER",
    b"$",
    b"0-0",
    b"MAXLEN",
    b"~",
    b"GROUP",
    b"g",
    b"c",
    b"MKSTREAM",
    b"-",
    b"+",
    b"AND",
    b"OR",
    b"WEIGHTS",
    b"AGGREGATE",
    b"MIN",
    b"REV",
    b"BYSCORE",
    b"BYLEX",
    b"[a",
    b"(a",
    b"DB",
    b"REPLACE",
    b"v",
    b"",
    b"a\r\nb",
    b"FIELDS",
    b"ENCODING",
    b"RESET",
    b"NOVALUES",
];

struct World {
    srv: Server,
    /// Each command of the table as the arguments that name it (`["config", "get"]`).
    names: Vec<Vec<Vec<u8>>>,
}

fn world() -> &'static World {
    static W: OnceLock<World> = OnceLock::new();
    W.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("atoll-fuzz-seq-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        let args: Vec<String> = ["--enable-debug-command", "yes", "--save", "", "--dir", dir.to_str().unwrap()]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let (config, _) = atoll::config::Config::from_args(&args).expect("the fuzz server's settings");
        let srv = Server::new(config, atoll::commands::table::build(), 1, 0);
        let names = srv
            .table
            .all
            .iter()
            .map(|c| c.full_name().to_string())
            .filter(|n| !LEFT_OUT.iter().any(|l| n == l || n.starts_with(&format!("{l}|"))))
            .map(|n| n.split('|').map(|p| p.as_bytes().to_vec()).collect())
            .collect();
        World { srv, names }
    })
}

/// One client: its session and the requests it has not sent yet (a pipeline).
struct Conn {
    session: Session,
    pending: Vec<u8>,
    sent: usize,
}

impl Conn {
    fn new(srv: &Server) -> Conn {
        let h = Arc::new(ClientHandle::new(srv.clients.next_id(), "fuzz:0".into(), String::new(), -1, true, 0));
        srv.clients.add(h.clone());
        Conn { session: Session::new(Client::new(h, 0, false)), pending: Vec::new(), sent: 0 }
    }

    fn id(&self) -> u64 {
        self.session.client.handle.id
    }

    fn queue(&mut self, argv: &[&[u8]]) {
        self.pending.extend_from_slice(format!("*{}\r\n", argv.len()).as_bytes());
        for a in argv {
            self.pending.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            self.pending.extend_from_slice(a);
            self.pending.extend_from_slice(b"\r\n");
        }
        self.sent += 1;
    }

    /// Sends the pipeline; false if the connection must close. Every request is answered
    /// unless the client is waiting (blocked, paused) or in Pub/Sub mode.
    fn flush(&mut self, srv: &Server) -> bool {
        let input = std::mem::take(&mut self.pending);
        let n = std::mem::take(&mut self.sent);
        let mut out = Reply::new(self.session.client.proto);
        let keep = self.session.feed(srv, &srv.stats.workers[0], &input, &mut out);
        let quiet = self.session.waiting().is_some()
            || self.session.client.subs.is_some()
            || self.session.client.monitor.is_some()
            || self.session.client.reply_mode != atoll::exec::client::ReplyMode::On;
        if keep && !quiet && n > 0 {
            assert!(!out.buf.is_empty(), "{n} request(s) and no reply");
        }
        keep && !self.session.client.handle.killed.load(std::sync::atomic::Ordering::Acquire)
    }

    fn run(&mut self, srv: &Server, argv: &[&[u8]]) {
        self.queue(argv);
        self.flush(srv);
    }

    /// Closes the connection as the event loop does.
    fn close(mut self, srv: &Server) {
        atoll::exec::call::disconnect(srv, &mut self.session.client);
        srv.clients.remove(self.id());
        *self.session.client.handle.closed.lock() = true;
    }
}

/// The input, read a byte at a time (zeros once it is used up).
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn next(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    fn done(&self) -> bool {
        self.0.is_empty()
    }
}

/// A command from the table with `0..6` vocabulary words after its name.
fn pick(w: &World, b: &mut Bytes) -> Vec<Vec<u8>> {
    let i = (b.next() as usize) << 8 | b.next() as usize;
    let mut argv = w.names[i % w.names.len()].clone();
    for _ in 0..b.next() % 6 {
        argv.push(WORDS[b.next() as usize % WORDS.len()].to_vec());
    }
    argv
}

fn refs(v: &[Vec<u8>]) -> Vec<&[u8]> {
    v.iter().map(|a| a.as_slice()).collect()
}

fuzz_target!(|data: &[u8]| {
    let w = world();
    let srv = &w.srv;
    // A clean start: no pause, no data, no scripts, the default user as it was; then the
    // function FCALL wraps commands in.
    let mut admin = Conn::new(srv);
    for argv in [
        &[&b"CLIENT"[..], b"UNPAUSE"][..],
        &[b"FLUSHALL"],
        &[b"SCRIPT", b"FLUSH"],
        &[b"FUNCTION", b"FLUSH"],
        &[b"ACL", b"SETUSER", b"default", b"reset", b"on", b"nopass", b"~*", b"&*", b"+@all"],
        &[
            b"FUNCTION",
            b"LOAD",
            b"#!lua name=fz\nredis.register_function('call', function(k, a) return redis.pcall(unpack(a)) end)",
        ],
    ] {
        admin.run(srv, argv);
    }
    admin.close(srv);
    let mut conns: Vec<Conn> = (0..CLIENTS).map(|_| Conn::new(srv)).collect();
    let mut b = Bytes(data);
    let mut steps = 0;
    while !b.done() && steps < 200 {
        steps += 1;
        let op = b.next();
        let c = b.next() as usize % CLIENTS;
        match op % 16 {
            0..=8 => {
                let argv = pick(w, &mut b);
                conns[c].queue(&refs(&argv));
            }
            9 => conns[c].queue(&[b"MULTI"]),
            10 => conns[c].queue(&[b"EXEC"]),
            11 => {
                let inner = pick(w, &mut b);
                let mut argv: Vec<&[u8]> = vec![b"EVAL", b"return redis.pcall(unpack(ARGV))", b"0"];
                argv.extend(inner.iter().map(|a| a.as_slice()));
                conns[c].queue(&argv);
            }
            12 => {
                let inner = pick(w, &mut b);
                let mut argv: Vec<&[u8]> = vec![b"FCALL", b"call", b"0"];
                argv.extend(inner.iter().map(|a| a.as_slice()));
                conns[c].queue(&argv);
            }
            13 => {
                let other = conns[b.next() as usize % CLIENTS].id().to_string().into_bytes();
                let db = [b"0", b"1", b"2"][b.next() as usize % 3];
                match b.next() % 8 {
                    0 => conns[c].queue(&[b"CLIENT", b"KILL", b"ID", &other]),
                    1 => conns[c].queue(&[b"CLIENT", b"PAUSE", b"20", b"WRITE"]),
                    2 => conns[c].queue(&[b"CLIENT", b"UNPAUSE"]),
                    3 => conns[c].queue(&[b"SWAPDB", b"0", db]),
                    4 => conns[c].queue(&[b"FLUSHALL"]),
                    5 => conns[c].queue(&[b"DEBUG", b"RELOAD"]),
                    6 => conns[c].queue(&[b"SELECT", db]),
                    _ => conns[c].queue(&[b"CLIENT", b"UNBLOCK", &other]),
                }
            }
            _ => {
                if !conns[c].flush(srv) {
                    let gone = std::mem::replace(&mut conns[c], Conn::new(srv));
                    gone.close(srv);
                }
            }
        }
    }
    for c in conns.iter_mut() {
        c.flush(srv);
    }
    for c in conns {
        c.close(srv);
    }
});
