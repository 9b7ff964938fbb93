//! The session: bytes in, bytes out, no I/O (DESIGN §1). It parses requests (with a look-ahead
//! that prefetches their keys) and hands each to `exec::call`; the event loop underneath only
//! moves bytes, so it can be swapped without touching a command.

use crate::engine::Spot;
use crate::exec::blocking::WaitState;
use crate::exec::call::{dispatch, dispatch_hinted, error_reply, KeyHint};
use crate::exec::client::Client;
use crate::exec::{CmdError, Server};
use crate::protocol::parser::{scan_request, ArgSource};
use crate::protocol::{Limits, Parsed, Parser, Reply};
use crate::services::stats::WorkerStats;
use smallvec::SmallVec;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub type Argv<'a> = SmallVec<[&'a [u8]; 8]>;

pub struct Session {
    pub client: Client,
    parser: Parser,
    /// Bytes of a request not yet complete (empty between requests, so idle clients hold no
    /// input buffer).
    pending: Vec<u8>,
}

impl Session {
    pub fn new(client: Client) -> Session {
        Session { client, parser: Parser::new(), pending: Vec::new() }
    }

    /// True if a partial request is buffered.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// While a big argument arrives: how many of its bytes (and its CRLF) are still to come.
    pub fn big_remaining(&self) -> usize {
        self.parser.big_need().saturating_sub(self.pending.len())
    }

    /// The bytes received and not yet run (for a debugging session, which reads on from
    /// where the EVAL that started it ended).
    pub fn take_pending(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.pending)
    }

    /// Gives memory back while the connection is idle.
    pub fn shrink(&mut self) {
        if self.pending.is_empty() && self.pending.capacity() > 0 {
            self.pending = Vec::new();
        }
        self.parser.shrink();
    }

    /// Processes bytes read from the connection, appending replies to `out`. Returns false if
    /// the connection must be closed once `out` is written.
    pub fn feed(&mut self, srv: &Server, ws: &WorkerStats, input: &[u8], out: &mut Reply) -> bool {
        self.feed_hinted(srv, ws, input, None, out)
    }

    /// `feed`, with what `first_key` found for this same `input` (its first request is not
    /// scanned, nor its key hashed, again).
    pub fn feed_hinted(
        &mut self,
        srv: &Server,
        ws: &WorkerStats,
        input: &[u8],
        first: Option<&FirstReq>,
        out: &mut Reply,
    ) -> bool {
        self.client.handle.last_ms.store(srv.now_ms(), Ordering::Relaxed);
        if self.pending.is_empty() {
            let used = self.process(srv, ws, input, first, out);
            if used < input.len() && !self.client.close_after_reply {
                self.pending.extend_from_slice(&input[used..]);
            }
        } else {
            // Waiting for a big argument: the buffer grows by doubling as usual, but never past
            // the argument's end (a 300 MB value must not hold 512 MB). Never more than the
            // bytes received either: the declared length alone allocates nothing.
            let need = self.parser.big_need();
            let total = self.pending.len() + input.len();
            if need > 0 && total > self.pending.capacity() {
                let grow_to = (self.pending.capacity() * 2).max(total).min(need.max(total));
                self.pending.reserve_exact(grow_to - self.pending.len());
            }
            self.pending.extend_from_slice(input);
            let buf = std::mem::take(&mut self.pending);
            let used = self.process(srv, ws, &buf, None, out);
            self.pending = buf;
            self.pending.drain(..used);
        }
        let limit = srv.config.hot.client_query_buffer_limit.load(Ordering::Relaxed);
        if self.pending.len() > limit {
            crate::log_warning!("Closing client that reached max query buffer length (qbuf={})", self.pending.len());
            return false;
        }
        let h = &self.client.handle;
        // Redis's figure: while a big argument arrives, its bytes only (the request's parsed
        // head is not counted, as Redis has dropped it from its query buffer by then).
        let head = self.parser.big_start().min(self.pending.len());
        h.qbuf.store((self.pending.len() - head) as u64, Ordering::Relaxed);
        // A big unfinished request is weighed by client eviction before anything else runs.
        if self.pending.capacity() >= crate::protocol::parser::BIG_ARG
            && srv.config.hot.maxmemory_clients.load(Ordering::Relaxed) != 0
        {
            srv.evict.client_grew();
        }
        // The spare room is only worth a store while a request is unfinished (or just was):
        // between requests the buffer is empty and given back at the next flush.
        let free = if self.pending.is_empty() { 0 } else { (self.pending.capacity() - self.pending.len()) as u64 };
        if free != 0 || h.qbuf_free.load(Ordering::Relaxed) != 0 {
            h.qbuf_free.store(free, Ordering::Relaxed);
        }
        !self.client.close_after_reply
    }

    /// Runs every complete request in `buf`; returns the bytes consumed. `first`: the request
    /// at the start of `buf`, if the event loop's look-ahead scanned it.
    fn process(
        &mut self,
        srv: &Server,
        ws: &WorkerStats,
        buf: &[u8],
        mut first: Option<&FirstReq>,
        out: &mut Reply,
    ) -> usize {
        let mut pos = 0;
        let mut limits = client_limits(srv, self.client.authenticated);
        // Requests already parsed by the look-ahead (see `prefetch`), replayed below.
        let mut ahead = Ahead::default();
        // A clock reading from an earlier batch is stale (see `Client::clock`).
        self.client.clock = None;
        while pos < buf.len()
            && !self.client.close_after_reply
            && self.client.shutdown.is_none()
            && self.client.waiting.is_none()
            && self.client.ldb_request.is_none()
        {
            // Look ahead from this request on: parse it and the ones behind it and start the
            // cache misses of their keys, so they overlap with each other and with execution.
            // (Starting behind this one left its own key to be looked up cold, three or four
            // misses in a row.) Not while the parser holds a partly parsed request.
            if ahead.exhausted() && self.client.authenticated && !self.parser.in_progress() {
                // The event loop's scan is of the request at the start of `buf` only.
                let hint = if pos == 0 { first.take() } else { None };
                prefetch(srv, self.client.db, buf, pos, hint, &limits, &mut ahead);
            }
            let (parsed, hint) = match ahead.take(pos) {
                Some(r) => (Parsed::Command { consumed: r.consumed }, Some(r)),
                None => (self.parser.parse(&buf[pos..], &limits), None),
            };
            match parsed {
                Parsed::Command { consumed } => {
                    // Filled in place by plain loops: a SmallVec returned from a `match` arm
                    // or built by `collect` is copied (136 bytes) or costs several times more.
                    let mut argv = Argv::new();
                    match (&hint, self.parser.source) {
                        (Some(r), _) => {
                            for &(s, e) in &ahead.args[r.args.clone()] {
                                argv.push(&buf[s..e]);
                            }
                        }
                        (None, ArgSource::Buffer) => {
                            for &(s, e) in &self.parser.ranges {
                                argv.push(&buf[pos + s..pos + e]);
                            }
                        }
                        (None, ArgSource::Inline) => {
                            for a in &self.parser.inline_args {
                                argv.push(a.as_slice());
                            }
                        }
                    }
                    pos += consumed;
                    // Browsers and HTTP proxies tricked into talking to us: close silently.
                    if argv[0].eq_ignore_ascii_case(b"post") || argv[0].eq_ignore_ascii_case(b"host:") {
                        crate::log_warning!(
                            "Possible SECURITY ATTACK detected. It looks like somebody is sending POST or Host: commands to Redis. This is likely due to an attacker attempting to use Cross Protocol Scripting to compromise your Redis instance. Connection aborted."
                        );
                        self.client.close_after_reply = true;
                        break;
                    }
                    let key_hint = hint.and_then(|r| r.key);
                    self.client.req_bytes = consumed as u64;
                    dispatch_hinted(srv, ws, &mut self.client, &argv, key_hint, out);
                    self.client.after_command(argv[0], &mut out.buf);
                    // Replies that outgrow the output-buffer limit are not sent: the client
                    // is closed and its pipeline stops here, as Redis checks the limit at every
                    // reply it buffers (a big LRANGE or KEYS gets no answer, a transaction runs
                    // whole first, a batch of GETs of a big value does not make gigabytes of
                    // replies). A length test per command; the limits are weighed only past
                    // the smallest of them (or 32 KB, for client eviction).
                    if out.buf.len() as u64 >= srv.config.hot.batch_look.load(Ordering::Relaxed)
                        && over_batch_limit(srv, &self.client, &out.buf)
                    {
                        crate::services::pubsub::close_over_limit(&self.client.handle);
                        self.client.close_after_reply = true;
                        out.buf.clear();
                        pos = buf.len();
                        break;
                    }
                    if self.client.waiting.is_some() {
                        // Blocked: later requests wait in the buffer until it is served.
                        break;
                    }
                }
                Parsed::Skip { consumed } => pos += consumed,
                Parsed::Incomplete => break,
                Parsed::Error(msg) => {
                    out.error(&format!("ERR {msg}"));
                    ws.counters.error_replies.fetch_add(1, Ordering::Relaxed);
                    crate::log_verbose!("Protocol error ({msg}) from client: id={}", self.client.id());
                    self.client.close_after_reply = true;
                    pos = buf.len();
                    break;
                }
            }
            // AUTH (or RESET, which logs the client out) inside this batch changes the limits
            // for the rest of it, and what the look-ahead parsed under the old ones is dropped.
            // (A loop, not a recursive call: a batch may switch any number of times.)
            if limits.unauthenticated == self.client.authenticated {
                limits.unauthenticated = !self.client.authenticated;
                ahead = Ahead::default();
            }
        }
        self.client.clock = None;
        pos
    }
}

/// Commands looked at per prefetch pass: enough to overlap the misses of a typical pipeline
/// (redis-benchmark -P 16), few enough that the keys are still cached when their turn comes.
const PREFETCH_AHEAD: usize = 16;

/// Requests parsed ahead by `prefetch`, so the main loop neither parses them nor hashes their
/// first key again.
#[derive(Default)]
struct Ahead {
    reqs: SmallVec<[AheadReq; PREFETCH_AHEAD]>,
    /// Arguments of the recorded requests, as absolute spans of the batch.
    args: SmallVec<[(usize, usize); 4 * PREFETCH_AHEAD]>,
    /// Index in `reqs` of the next request to replay.
    next: usize,
}

#[derive(Clone)]
struct AheadReq {
    /// Where the request starts in the batch, and its length.
    at: usize,
    consumed: usize,
    /// Its arguments in `Ahead::args`.
    args: std::ops::Range<usize>,
    /// The shard and keyspace hash of its first argument (the key of most commands).
    key: Option<KeyHint>,
}

/// The first request of some input, already scanned by the event loop's look-ahead
/// (`Session::first_key`): its length, its argument spans and where its key lives. Handed to
/// the session with that same input, it spares scanning and hashing the request twice.
#[derive(Default)]
pub struct FirstReq {
    consumed: usize,
    args: SmallVec<[(usize, usize); AHEAD_MAX_ARGS]>,
    key: KeyHint,
}

/// Requests with more arguments than this end the look-ahead; the main loop parses them (their
/// argument spans would not fit the look-ahead's fixed storage).
const AHEAD_MAX_ARGS: usize = 8;

impl Ahead {
    /// Every recorded request has been replayed. (They are contiguous from where the
    /// look-ahead started, so the main loop is then where it stopped.)
    fn exhausted(&self) -> bool {
        self.next >= self.reqs.len()
    }

    /// The recorded request starting at `pos`, if the look-ahead parsed it.
    #[inline]
    fn take(&mut self, pos: usize) -> Option<AheadReq> {
        let r = self.reqs.get(self.next)?;
        if r.at != pos {
            return None;
        }
        self.next += 1;
        Some(r.clone())
    }
}

/// Pipelined requests: parses the next complete requests of `buf` from `pos` (recording them
/// in `ahead` for the main loop) and prefetches where their first argument (the key of most
/// commands) lives in the keyspace. A guess that is not a key costs one useless prefetch.
/// `first`: the request at `pos`, already scanned.
fn prefetch(
    srv: &Server,
    db: usize,
    buf: &[u8],
    mut pos: usize,
    mut first: Option<&FirstReq>,
    limits: &Limits,
    ahead: &mut Ahead,
) {
    ahead.reqs.clear();
    ahead.args.clear();
    ahead.next = 0;
    let mut spots: SmallVec<[Spot; PREFETCH_AHEAD]> = SmallVec::new();
    // Stops at the first request `scan_request` declines: the main loop parses that one, and
    // the look-ahead resumes behind it.
    while ahead.reqs.len() < PREFETCH_AHEAD {
        let from = ahead.args.len();
        let (consumed, known) = match first.take() {
            Some(f) => {
                debug_assert!({
                    let mut again: SmallVec<[(usize, usize); AHEAD_MAX_ARGS]> = SmallVec::new();
                    scan_request(buf, pos, AHEAD_MAX_ARGS, limits, &mut again) == Some(f.consumed) && again == f.args
                });
                ahead.args.extend_from_slice(&f.args);
                (f.consumed, Some(f.key))
            }
            None => match scan_request(buf, pos, AHEAD_MAX_ARGS, limits, &mut ahead.args) {
                Some(consumed) => (consumed, None),
                None => break,
            },
        };
        let n = ahead.args.len() - from;
        let key = (n >= 2).then(|| {
            let (s, e) = ahead.args[from + 1];
            let key = &buf[s..e];
            let spot = match known {
                Some(h) => {
                    debug_assert!(
                        h.shard == crate::engine::key_shard(key) && h.hash == crate::engine::dict::hash_key(key)
                    );
                    Spot { db, shard: h.shard, slot: h.slot, hash: h.hash, key }
                }
                None => Spot::new(db, key),
            };
            spots.push(spot);
            KeyHint { shard: spot.shard, slot: spot.slot, hash: spot.hash }
        });
        ahead.reqs.push(AheadReq { at: pos, consumed, args: from..from + n, key });
        pos += consumed;
    }
    // A lone request has nothing to overlap its misses with: its lookup waits for them anyway.
    if spots.len() > 1 {
        srv.ks.prefetch_spots(&spots);
    }
}

impl Session {
    /// Where the first request of `input` will look up its key, if feeding `input` to this
    /// session runs that request at once and the look-ahead would take it. The event loop
    /// collects these over every connection a round delivered, so that unpipelined clients'
    /// lookups overlap their cache misses as a pipeline's do (`Keyspace::prefetch_spots`).
    /// The scanned request is left in `f`, to hand back with `input` (`feed_hinted`); its
    /// `consumed()` says whether more requests follow it (the session's own look-ahead then
    /// prefetches them all, this key with them). Filled in place: it is a few hundred bytes.
    pub fn first_key<'a>(&self, srv: &Server, input: &'a [u8], f: &mut FirstReq) -> Option<Spot<'a>> {
        if !self.pending.is_empty()
            || !self.client.authenticated
            || self.parser.in_progress()
            || self.client.waiting.is_some()
        {
            return None;
        }
        // The limits `process` will parse this request under: what is scanned here is taken
        // as parsed there.
        let limits = client_limits(srv, true);
        f.args.clear();
        f.consumed = scan_request(input, 0, AHEAD_MAX_ARGS, &limits, &mut f.args)?;
        let &(s, e) = f.args.get(1)?;
        let spot = Spot::new(self.client.db, &input[s..e]);
        f.key = KeyHint { shard: spot.shard, slot: spot.slot, hash: spot.hash };
        Some(spot)
    }
}

/// Whether the replies `buf` made in one batch break the client's hard output-buffer limit
/// (the soft one needs time, which a batch does not take), or the client was evicted. With `maxmemory-clients` set, they
/// are also shown as client memory from 32 KB on, each time they grow by as much again, so
/// that client eviction weighs them before the next command anywhere (Redis counts a reply
/// as it is buffered, and evicts fat clients before key eviction).
#[cold]
fn over_batch_limit(srv: &Server, client: &crate::exec::client::Client, buf: &[u8]) -> bool {
    let h = &client.handle;
    // Evicted meanwhile (it may be this client's own growth that did it): its pipeline stops
    // here, as Redis stops a client that evicted itself.
    if h.killed.load(Ordering::Relaxed) {
        return true;
    }
    if srv.config.hot.maxmemory_clients.load(Ordering::Relaxed) != 0 {
        let shown = h.reply_round.load(Ordering::Relaxed);
        if buf.len() as u64 >= shown + (32 << 10) {
            h.reply_round.store(buf.len() as u64, Ordering::Relaxed);
            srv.evict.client_grew();
        }
    }
    crate::services::pubsub::OutputGuard::new(&srv.config.hot, h).full(buf.len())
}

/// The protocol limits a client's requests are parsed under.
fn client_limits(srv: &Server, authenticated: bool) -> Limits {
    Limits {
        max_bulk_len: srv.config.hot.proto_max_bulk_len.load(Ordering::Relaxed),
        unauthenticated: !authenticated,
        ..Limits::default()
    }
}

impl FirstReq {
    /// The request's length in the input.
    pub fn consumed(&self) -> usize {
        self.consumed
    }
}

impl Session {
    /// Appends bytes read while the client is blocked; they run once it is unblocked. False if
    /// the query buffer limit is exceeded (the connection must close).
    pub fn buffer_input(&mut self, input: &[u8], srv: &Server) -> bool {
        self.pending.extend_from_slice(input);
        self.pending.len() <= srv.config.hot.client_query_buffer_limit.load(Ordering::Relaxed)
    }

    /// Called by the event loop when the client's wait ended (served, timed out, unblocked):
    /// appends the reply for the blocked command and runs the requests that queued behind it.
    pub fn resume(&mut self, srv: &Server, ws: &WorkerStats, out: &mut Reply) -> bool {
        let Some(w) = self.client.waiting.take() else { return true };
        *self.client.handle.waiter.lock() = None;
        let mut state = std::mem::replace(&mut *w.state.lock(), WaitState::Cancelled);
        // The end of a CLIENT PAUSE runs the postponed command.
        if w.postponed && state == WaitState::TimedOut {
            state = WaitState::Retry;
        }
        out.proto = self.client.proto;
        crate::exec::blocking::unregister(&srv.ks, &w);
        // The wait ended: the blocked command counts as a call now, and the slow log sees it
        // (a re-run counts and logs itself).
        let ran_us = std::mem::take(&mut self.client.blocked_us);
        let cmd = if matches!(state, WaitState::Retry) {
            None
        } else {
            let argv: Vec<&[u8]> = w.argv.iter().map(|a| a.as_slice()).collect();
            let c = crate::exec::call::resolve(srv, &argv).ok();
            if let Some(c) = c {
                ws.cmds[c.id].calls.fetch_add(1, Ordering::Relaxed);
                let reply_bytes = if let WaitState::Served(b) = &state { b.len() as u64 } else { 0 };
                crate::exec::call::after_wait(srv, &self.client, c, &argv, ran_us, reply_bytes);
            }
            c.map(|c| c.id)
        };
        // A wait that ends in an error (a stream deleted under XREADGROUP, CLIENT UNBLOCK …
        // ERROR) is a failed call of the blocked command, as Redis counts it.
        let failed = |ws: &WorkerStats| {
            if let Some(id) = cmd {
                ws.cmds[id].failed_calls.fetch_add(1, Ordering::Relaxed);
            }
        };
        match state {
            WaitState::Served(bytes) => {
                if let Some(text) = bytes.strip_prefix(b"-") {
                    let text = String::from_utf8_lossy(text);
                    crate::exec::call::count_error(ws, text.trim_end());
                    failed(ws);
                }
                out.raw(&bytes)
            }
            WaitState::Retry => {
                self.client.clock = None;
                let argv: Vec<&[u8]> = w.argv.iter().map(|a| a.as_slice()).collect();
                self.client.retrying = true;
                dispatch(srv, ws, &mut self.client, &argv, out);
                self.client.retrying = false;
                self.client.after_command(argv[0], &mut out.buf);
                if self.client.waiting.is_some() {
                    return true;
                }
            }
            WaitState::Unblocked => {
                failed(ws);
                error_reply(ws, out, &CmdError::msg("UNBLOCKED client unblocked via CLIENT UNBLOCK"))
            }
            _ => (w.on_timeout)(out),
        }
        self.feed(srv, ws, &[], out)
    }

    /// The wait this client is in, if blocked.
    pub fn waiting(&self) -> Option<Arc<crate::exec::blocking::Waiter>> {
        self.client.waiting.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::client::ClientHandle;
    use parking_lot::Mutex;

    fn session(srv: &Server) -> Session {
        let h = Arc::new(ClientHandle::new(srv.clients.next_id(), "test:0".into(), String::new(), -1, true, 0));
        Session::new(Client::new(h, 0, false))
    }

    fn feed(srv: &Server, s: &mut Session, input: &[u8]) -> String {
        let mut out = Reply::new(s.client.proto);
        s.feed(srv, &srv.stats.workers[0], input, &mut out);
        String::from_utf8_lossy(&out.buf).into_owned()
    }

    #[test]
    fn session_is_bytes_in_bytes_out() {
        let srv = Server::new(crate::config::Config::defaults(), crate::commands::table::build(), 1, 0);
        let mut s = session(&srv);
        // Two commands and half of a third in one read; the rest in the next.
        let out = feed(&srv, &mut s, b"*1\r\n$4\r\nPING\r\nECHO hi\r\n*2\r\n$4\r\nECHO\r\n$5\r\nwo");
        assert_eq!(out, "+PONG\r\n$2\r\nhi\r\n");
        assert!(s.has_pending());
        assert_eq!(feed(&srv, &mut s, b"rld\r\n"), "$5\r\nworld\r\n");
        assert!(!s.has_pending());
        assert_eq!(
            feed(&srv, &mut s, b"NOPE a\r\n"),
            "-ERR unknown command 'NOPE', with args beginning with: 'a' \r\n"
        );
        assert_eq!(feed(&srv, &mut s, b"ECHO\r\n"), "-ERR wrong number of arguments for 'echo' command\r\n");
    }

    #[test]
    fn a_big_argument_gets_a_buffer_of_its_size() {
        let srv = Server::new(crate::config::Config::defaults(), crate::commands::table::build(), 1, 0);
        let mut s = session(&srv);
        let head = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1048576\r\n";
        let mut chunk = head.to_vec();
        chunk.extend_from_slice(&[b'v'; 4000]);
        assert_eq!(feed(&srv, &mut s, &chunk), "");
        for _ in 0..100 {
            feed(&srv, &mut s, &[b'v'; 4096]);
        }
        // Doubling, bounded by what arrived (the declared megabyte is not allocated up front).
        assert!(s.pending.capacity() < 2 * (head.len() + 4000 + 409600));
        // All but the last 2,000 bytes of the value.
        let mut left = 1048576 - 4000 - 409600 - 2000;
        while left > 0 {
            let n = left.min(4096);
            feed(&srv, &mut s, &vec![b'v'; n]);
            left -= n;
        }
        // The last step stops at the request's size: not doubled to 2 MB.
        assert_eq!(s.pending.capacity(), head.len() + 1048576 + 2);
        let rest = 2000;
        let mut tail = vec![b'v'; rest];
        tail.extend_from_slice(b"\r\n");
        assert_eq!(feed(&srv, &mut s, &tail), "+OK\r\n");
    }

    #[test]
    fn first_key_hint_matches_what_the_session_runs() {
        let srv = Server::new(crate::config::Config::defaults(), crate::commands::table::build(), 1, 0);
        let ws = &srv.stats.workers[0];
        let mut s = session(&srv);
        feed(&srv, &mut s, b"SELECT 3\r\nSET k v\r\n");
        let get = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
        let mut hint = FirstReq::default();
        let spot = s.first_key(&srv, get, &mut hint).expect("a common-form request with a key");
        let len = hint.consumed();
        assert_eq!((spot.db, spot.key, len), (3, &b"k"[..], get.len()));
        assert_eq!((spot.shard, spot.hash), (crate::engine::key_shard(b"k"), crate::engine::dict::hash_key(b"k")));
        let mut out = Reply::new(s.client.proto);
        assert!(s.feed_hinted(&srv, ws, get, Some(&hint), &mut out));
        assert_eq!(out.buf, b"$1\r\nv\r\n");
        // A pipeline: the length says more follows (the session prefetches it all).
        let two = [&get[..], &get[..]].concat();
        assert!(s.first_key(&srv, &two, &mut hint).is_some());
        assert_eq!(hint.consumed(), get.len());
        // Nothing to hint: no key, inline form, or the session is inside a partial request.
        assert!(s.first_key(&srv, b"*1\r\n$4\r\nPING\r\n", &mut hint).is_none());
        assert!(s.first_key(&srv, b"GET k\r\n", &mut hint).is_none());
        assert_eq!(feed(&srv, &mut s, b"*2\r\n$3\r\nGET\r\n$1"), "");
        assert!(s.first_key(&srv, b"\r\nk\r\n", &mut hint).is_none());
        assert_eq!(feed(&srv, &mut s, b"\r\nk\r\n"), "$1\r\nv\r\n");
    }

    #[test]
    fn effects_are_published_for_writes_only() {
        let srv = Server::new(crate::config::Config::defaults(), crate::commands::table::build(), 1, 0);
        let seen: Arc<Mutex<Vec<Vec<Vec<u8>>>>> = Default::default();
        let sink = seen.clone();
        srv.set_effect_sink(Some(Box::new(move |effects, _| {
            sink.lock().extend(effects.iter().map(|e| e.argv.clone()));
        })));
        let mut s = session(&srv);
        feed(&srv, &mut s, b"SELECT 2\r\nFLUSHDB\r\nPING\r\nSWAPDB 2 3\r\n");
        let got = seen.lock().clone();
        assert_eq!(got, vec![vec![b"FLUSHDB".to_vec()], vec![b"SWAPDB".to_vec(), b"2".to_vec(), b"3".to_vec()]]);
    }

    #[test]
    fn transaction_queues_and_aborts() {
        let srv = Server::new(crate::config::Config::defaults(), crate::commands::table::build(), 1, 0);
        let mut s = session(&srv);
        assert_eq!(feed(&srv, &mut s, b"MULTI\r\nPING\r\nEXEC\r\n"), "+OK\r\n+QUEUED\r\n*1\r\n+PONG\r\n");
        assert_eq!(
            feed(&srv, &mut s, b"MULTI\r\nECHO\r\nEXEC\r\n"),
            "+OK\r\n-ERR wrong number of arguments for 'echo' command\r\n-EXECABORT Transaction discarded because of previous errors.\r\n"
        );
    }
}
