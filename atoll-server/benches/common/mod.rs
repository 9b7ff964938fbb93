//! What the scaling benchmarks share: the command batches, the pinned worker threads that
//! feed them through a `Session`, and the machine's own ceiling.

use atoll::config::Config;
use atoll::exec::client::{Client, ClientHandle};
use atoll::protocol::Reply;
use atoll::server::session::Session;
use atoll::server::Server;
use rand::{Rng, SeedableRng};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Commands per `Session::feed` call: one pipelined batch, as a busy connection delivers them.
pub const BATCH: usize = 32;
/// Distinct batches each thread cycles through (random keys, precomputed so the benchmark
/// measures the server, not the key generator).
const BATCHES: usize = 256;
pub const KEYSPACE: u64 = 100_000;

fn encode(args: &[&[u8]], out: &mut Vec<u8>) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

fn batches(cmd: &str, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let val = [b'v'; 32];
    (0..BATCHES)
        .map(|_| {
            let mut buf = Vec::new();
            for _ in 0..BATCH {
                let key = format!("key:{:012}", rng.gen_range(0..KEYSPACE));
                match cmd {
                    "SET" => encode(&[b"SET", key.as_bytes(), &val], &mut buf),
                    "INCR" => {
                        encode(&[b"INCR", format!("ctr:{:012}", rng.gen_range(0..KEYSPACE)).as_bytes()], &mut buf)
                    }
                    _ => encode(&[b"GET", key.as_bytes()], &mut buf),
                }
            }
            buf
        })
        .collect()
}

fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET and sched_setaffinity only read
    // and write that local set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// The machine's own ceiling: private arithmetic, no shared memory. On a VM whose vCPUs share
/// physical cores with other tenants this is below 2.0x, and it bounds what the engine can show.
pub fn ceiling(threads: usize, iters: u64) -> Duration {
    let start = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let start = start.clone();
            std::thread::spawn(move || {
                pin(t % cores());
                let mut x = [1u64, 2, 3, 4, 5, 6, 7, 8];
                start.wait();
                let t0 = Instant::now();
                for _ in 0..iters * 300 {
                    for v in x.iter_mut() {
                        *v = v.wrapping_mul(2862933555777941757).wrapping_add(3037000493);
                        *v ^= *v >> 17;
                    }
                }
                std::hint::black_box(x);
                t0.elapsed()
            })
        })
        .collect();
    start.wait();
    handles.into_iter().map(|h| h.join().unwrap()).max().unwrap()
}

/// Runs `iters` batches on each of `threads` threads at once; returns the wall time. With
/// `own_db`, thread t works in database t: the same work with no shard (and so no cache line
/// of the keyspace) shared between threads — the control for the contention model in
/// docs/ARCHITECTURE.md.
pub fn run(srv: &Arc<Server>, cmd: &str, threads: usize, iters: u64, own_db: bool) -> Duration {
    let start = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (srv, start) = (srv.clone(), start.clone());
            let input = batches(cmd, 1 + t as u64);
            std::thread::spawn(move || {
                pin(t % cores());
                let h =
                    Arc::new(ClientHandle::new(srv.clients.next_id(), "bench:0".into(), String::new(), -1, true, 0));
                let mut session = Session::new(Client::new(h, t, false));
                let mut out = Reply::new(session.client.proto);
                let ws = &srv.stats.workers[t];
                if own_db {
                    session.feed(&srv, ws, format!("SELECT {t}\r\n").as_bytes(), &mut out);
                    out.buf.clear();
                }
                start.wait();
                let t0 = Instant::now();
                for i in 0..iters as usize {
                    session.feed(&srv, ws, &input[i % BATCHES], &mut out);
                    out.buf.clear();
                }
                t0.elapsed()
            })
        })
        .collect();
    start.wait();
    handles.into_iter().map(|h| h.join().unwrap()).max().unwrap()
}

pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The measured workloads: name, command, and whether each thread works in its own database.
pub const WORKLOADS: [(&str, &str, bool); 4] =
    [("GET", "GET", false), ("SET", "SET", false), ("INCR", "INCR", false), ("GET-own-db", "GET", true)];

/// A server with both keyspaces (shared and one database per thread) preloaded, so GET hits
/// and SET overwrites, as in the network benchmark.
pub fn preloaded_server() -> Arc<Server> {
    let srv = Arc::new(Server::new(Config::defaults(), atoll::commands::table::build(), 2, 0));
    for db in [false, true] {
        for cmd in ["SET", "INCR"] {
            run(&srv, cmd, 2, (KEYSPACE as usize * 2 / BATCH) as u64, db);
        }
    }
    srv
}
