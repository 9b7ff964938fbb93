//! A lean load generator for `bench/`: the load `redis-benchmark -t set|get -c C -n N -r R -d D
//! -P P` puts on a server (C connections, each with P requests outstanding, random keys
//! `key:%012d` from R, D-byte values), at about half of redis-benchmark's CPU per request.
//!
//! Why it exists: on this 2-core machine the load generator gets one core, and
//! redis-benchmark spends 6–8 µs of it per unpipelined request (hiredis, an `epoll_ctl` pair per
//! request, its own bookkeeping), so with `appendfsync always` its core is saturated before
//! either server is (docs/BENCHMARKS.md). No kept Rust crate generates Redis load (the clients
//! are clients, not load generators), and memtier_benchmark is not packaged here, so this one
//! is written for the purpose: one thread, mio (epoll, edge-triggered) registered once per
//! connection, one `read` per burst of replies and one `write` per request.
//!
//! Usage: atoll-loadgen [--host H] [--port P | --socket PATH] [-t set|get] [-c 50] [-n 300000]
//!                      [-r 100000] [-d 32] [-P 1]
//! Prints one line: `ops_per_sec=… p50_ms=… p99_ms=… errors=…`; exits 1 on any error reply.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use mio::net::{TcpStream, UnixStream};
use mio::{Events, Interest, Poll, Token};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

struct Opts {
    host: String,
    port: u16,
    socket: Option<String>,
    test: String,
    clients: usize,
    requests: u64,
    keyspace: u64,
    data: usize,
    pipeline: usize,
}

fn parse_opts() -> Result<Opts, String> {
    let mut o = Opts {
        host: "127.0.0.1".into(),
        port: 6379,
        socket: None,
        test: "set".into(),
        clients: 50,
        requests: 300_000,
        keyspace: 100_000,
        data: 32,
        pipeline: 1,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or_else(|| format!("{a} needs a value"));
        let num = |v: String| v.parse::<u64>().map_err(|e| format!("{a}: {e}"));
        match a.as_str() {
            "--host" | "-h" => o.host = val()?,
            "--port" | "-p" => o.port = num(val()?)? as u16,
            "--socket" | "-s" => o.socket = Some(val()?),
            "-t" => o.test = val()?.to_ascii_lowercase(),
            "-c" => o.clients = num(val()?)?.max(1) as usize,
            "-n" => o.requests = num(val()?)?.max(1),
            "-r" => o.keyspace = num(val()?)?.max(1),
            "-d" => o.data = num(val()?)? as usize,
            "-P" => o.pipeline = num(val()?)?.max(1) as usize,
            _ => return Err(format!("unknown argument {a}")),
        }
    }
    if o.test != "set" && o.test != "get" {
        return Err(format!("-t {}: only set and get", o.test));
    }
    Ok(o)
}

enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        match self {
            Stream::Tcp(s) => s,
            Stream::Unix(s) => s,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(b),
            Stream::Unix(s) => s.read(b),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(b),
            Stream::Unix(s) => s.write(b),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

struct Conn {
    stream: Stream,
    /// When each outstanding request was sent, oldest first.
    sent_at: VecDeque<Instant>,
    rbuf: Vec<u8>,
    /// Bytes of `rbuf` already parsed into replies.
    rpos: usize,
    wbuf: Vec<u8>,
}

/// The length of the one complete RESP2 reply at the start of `b`, whether it is an error
/// reply, or None while it is incomplete.
fn reply_len(b: &[u8]) -> Result<Option<(usize, bool)>, String> {
    let Some(nl) = b.windows(2).position(|w| w == b"\r\n") else { return Ok(None) };
    let line = &b[1..nl];
    let head = nl + 2;
    let int = || -> Result<i64, String> {
        std::str::from_utf8(line).ok().and_then(|s| s.parse().ok()).ok_or_else(|| "bad length".to_string())
    };
    match b[0] {
        b'+' | b':' => Ok(Some((head, false))),
        b'-' => Ok(Some((head, true))),
        b'$' => {
            let n = int()?;
            if n < 0 {
                return Ok(Some((head, false)));
            }
            let end = head + n as usize + 2;
            Ok((b.len() >= end).then_some((end, false)))
        }
        b'*' => {
            let mut at = head;
            let mut err = false;
            for _ in 0..int()?.max(0) {
                match reply_len(&b[at..])? {
                    Some((n, e)) => {
                        at += n;
                        err |= e;
                    }
                    None => return Ok(None),
                }
            }
            Ok(Some((at, err)))
        }
        c => Err(format!("unexpected reply byte {c:?}")),
    }
}

fn push_request(o: &Opts, rng: &mut SmallRng, value: &[u8], out: &mut Vec<u8>) {
    let key = format!("key:{:012}", rng.gen_range(0..o.keyspace));
    if o.test == "set" {
        out.extend_from_slice(format!("*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n", key.len(), value.len()).as_bytes());
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    } else {
        out.extend_from_slice(format!("*2\r\n$3\r\nGET\r\n${}\r\n{key}\r\n", key.len()).as_bytes());
    }
}

/// Writes what `wbuf` holds; what the socket does not take now waits for a writable event.
fn flush(c: &mut Conn) -> io::Result<()> {
    while !c.wbuf.is_empty() {
        match c.stream.write(&c.wbuf) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                c.wbuf.drain(..n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn run(o: &Opts) -> Result<(), String> {
    let mut poll = Poll::new().map_err(|e| e.to_string())?;
    let mut conns = Vec::with_capacity(o.clients);
    for i in 0..o.clients {
        // Connected blocking first (so a refused connection is an error here, not an event),
        // then switched to non-blocking for mio.
        let mut stream = match &o.socket {
            Some(path) => {
                let s = std::os::unix::net::UnixStream::connect(path).map_err(|e| format!("{path}: {e}"))?;
                s.set_nonblocking(true).map_err(|e| e.to_string())?;
                Stream::Unix(UnixStream::from_std(s))
            }
            None => {
                let s = std::net::TcpStream::connect((o.host.as_str(), o.port))
                    .map_err(|e| format!("{}:{}: {e}", o.host, o.port))?;
                s.set_nodelay(true).map_err(|e| e.to_string())?;
                s.set_nonblocking(true).map_err(|e| e.to_string())?;
                Stream::Tcp(TcpStream::from_std(s))
            }
        };
        poll.registry()
            .register(stream.source(), Token(i), Interest::READABLE | Interest::WRITABLE)
            .map_err(|e| e.to_string())?;
        conns.push(Conn {
            stream,
            sent_at: VecDeque::with_capacity(o.pipeline),
            rbuf: Vec::with_capacity(64 * 1024),
            rpos: 0,
            wbuf: Vec::with_capacity(4096),
        });
    }
    let value = vec![b'x'; o.data];
    let mut rng = SmallRng::seed_from_u64(0x61_746f_6c6c);
    // Latencies in µs, one per request: the number of requests is the caller's own choice.
    let mut lat: Vec<u32> = Vec::with_capacity(o.requests.min(50_000_000) as usize);
    let (mut sent, mut done, mut errors) = (0u64, 0u64, 0u64);
    let start = Instant::now();
    for c in conns.iter_mut() {
        while c.sent_at.len() < o.pipeline && sent < o.requests {
            push_request(o, &mut rng, &value, &mut c.wbuf);
            c.sent_at.push_back(Instant::now());
            sent += 1;
        }
        flush(c).map_err(|e| e.to_string())?;
    }
    let mut events = Events::with_capacity(1024);
    while done < o.requests {
        poll.poll(&mut events, Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
        if events.is_empty() {
            return Err(format!("no reply for 10 s ({done} of {} done)", o.requests));
        }
        for ev in events.iter() {
            let c = &mut conns[ev.token().0];
            if ev.is_readable() {
                // Edge-triggered: a read that leaves room in the buffer has drained the
                // socket, and data arriving later raises a new event; so one read per burst.
                loop {
                    if c.rbuf.capacity() - c.rbuf.len() < 16 * 1024 {
                        c.rbuf.reserve(64 * 1024);
                    }
                    let len = c.rbuf.len();
                    let room = c.rbuf.capacity() - len;
                    // SAFETY: the bytes past `len` are written by read() before set_len
                    // exposes only the `n` it wrote.
                    let n = unsafe {
                        let tail = std::slice::from_raw_parts_mut(c.rbuf.as_mut_ptr().add(len), room);
                        match c.stream.read(tail) {
                            Ok(0) => return Err("the server closed a connection".into()),
                            Ok(n) => n,
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                            Err(e) => return Err(e.to_string()),
                        }
                    };
                    unsafe { c.rbuf.set_len(len + n) };
                    if n < room {
                        break;
                    }
                }
                let now = Instant::now();
                while let Some((n, err)) = reply_len(&c.rbuf[c.rpos..])? {
                    c.rpos += n;
                    errors += err as u64;
                    let t = c.sent_at.pop_front().ok_or("a reply nothing asked for")?;
                    lat.push(now.duration_since(t).as_micros().min(u32::MAX as u128) as u32);
                    done += 1;
                    if sent < o.requests {
                        push_request(o, &mut rng, &value, &mut c.wbuf);
                        c.sent_at.push_back(now);
                        sent += 1;
                    }
                }
                if c.rpos == c.rbuf.len() {
                    c.rbuf.clear();
                    c.rpos = 0;
                } else if c.rpos > 32 * 1024 {
                    c.rbuf.drain(..c.rpos);
                    c.rpos = 0;
                }
            }
            flush(c).map_err(|e| e.to_string())?;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    lat.sort_unstable();
    let pct = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)] as f64 / 1000.0;
    println!(
        "ops_per_sec={:.0} p50_ms={:.3} p99_ms={:.3} errors={errors}",
        o.requests as f64 / secs,
        pct(0.50),
        pct(0.99)
    );
    if errors > 0 {
        return Err(format!("{errors} error replies"));
    }
    Ok(())
}

fn main() {
    let r = parse_opts().and_then(|o| run(&o));
    if let Err(e) = r {
        eprintln!("atoll-loadgen: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::reply_len;

    #[test]
    fn replies_are_framed_whole_or_not_at_all() {
        assert_eq!(reply_len(b"+OK\r\n+O").unwrap(), Some((5, false)));
        assert_eq!(reply_len(b"-ERR x\r\n").unwrap(), Some((8, true)));
        assert_eq!(reply_len(b"$3\r\nabc\r\n").unwrap(), Some((9, false)));
        assert_eq!(reply_len(b"$3\r\nabc\r").unwrap(), None);
        assert_eq!(reply_len(b"$-1\r\n").unwrap(), Some((5, false)));
        assert_eq!(reply_len(b"*2\r\n:1\r\n$1\r\na\r\n").unwrap(), Some((15, false)));
        assert_eq!(reply_len(b"*2\r\n:1\r\n").unwrap(), None);
        assert!(reply_len(b"?\r\n").is_err());
    }
}
