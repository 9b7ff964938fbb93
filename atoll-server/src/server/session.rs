//! The session: bytes in, bytes out, no I/O (DESIGN §1). It parses requests, runs the generic
//! gates (Redis's `processCommand`) and executes commands; the event loop underneath only
//! moves bytes, so it can be swapped without touching a command.

use super::client::{Client, ReplyMode};
use super::stats::WorkerStats;
use super::Server;
use crate::commands::table::{flags, Scope};
use crate::commands::{keyspec, CmdError, CmdResult, Command, Ctx, KsView};
use crate::engine::{LockPlan, Locks, Spot};
use crate::protocol::parser::{scan_request, ArgSource};
use crate::protocol::{Limits, Parsed, Parser, Reply};
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
        self.client.handle.qbuf.store(self.pending.len() as u64, Ordering::Relaxed);
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
                    dispatch_hinted(srv, ws, &mut self.client, &argv, key_hint, out);
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

/// Where a look-ahead found a request's first argument would live: its shard, and its hash
/// in the shard's table.
#[derive(Clone, Copy, Default)]
struct KeyHint {
    shard: usize,
    hash: u64,
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
                    Spot { db, shard: h.shard, hash: h.hash, key }
                }
                None => Spot::new(db, key),
            };
            spots.push(spot);
            KeyHint { shard: spot.shard, hash: spot.hash }
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
        f.key = KeyHint { shard: spot.shard, hash: spot.hash };
        Some(spot)
    }
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

/// Formats Redis's unknown-command error, quoting up to the first arguments.
fn unknown_command_error(argv: &[&[u8]]) -> String {
    let name = String::from_utf8_lossy(&argv[0][..argv[0].len().min(128)]).into_owned();
    let mut args = String::new();
    for a in &argv[1..] {
        if args.len() >= 128 {
            break;
        }
        let s = String::from_utf8_lossy(&a[..a.len().min(128 - args.len())]).into_owned();
        args.push('\'');
        args.push_str(&s);
        args.push_str("' ");
    }
    format!("ERR unknown command '{name}', with args beginning with: {args}")
}

fn reject(ws: &WorkerStats, client: &mut Client, out: &mut Reply, cmd: Option<&Command>, e: CmdError) {
    if let Some(c) = cmd {
        ws.cmds[c.id].rejected_calls.fetch_add(1, Ordering::Relaxed);
    }
    if let Some(m) = client.multi.as_mut() {
        m.error = true;
    }
    error_reply(ws, out, &e);
}

/// Writes an error reply and counts it in INFO errorstats.
pub fn error_reply(ws: &WorkerStats, out: &mut Reply, e: &CmdError) {
    let text = e.text();
    out.error(&text);
    ws.counters.error_replies.fetch_add(1, Ordering::Relaxed);
    let code = text.split(' ').next().unwrap_or("ERR").to_string();
    *ws.errors.lock().entry(code).or_insert(0) += 1;
}

/// Resolves a request to its command (or subcommand), or the error Redis would give.
pub fn resolve<'t>(srv: &'t Server, argv: &[&[u8]]) -> Result<&'t Arc<Command>, (Option<&'t Command>, CmdError)> {
    let Some(cmd) = srv.table.lookup(argv[0]) else {
        return Err((None, CmdError::Msg(unknown_command_error(argv).into())));
    };
    if cmd.is_container && argv.len() >= 2 {
        return match cmd.subcommand(argv[1]) {
            Some(sub) if sub.arity_ok(argv.len()) => Ok(sub),
            Some(sub) => Err((Some(sub), CmdError::Arity(sub.full_name().to_string()))),
            None => Err((
                Some(cmd),
                CmdError::Msg(
                    format!(
                        "ERR unknown subcommand '{}'. Try {} HELP.",
                        String::from_utf8_lossy(&argv[1][..argv[1].len().min(128)]),
                        cmd.name.to_uppercase()
                    )
                    .into(),
                ),
            )),
        };
    }
    if !cmd.arity_ok(argv.len()) {
        return Err((Some(cmd), CmdError::Arity(cmd.full_name().to_string())));
    }
    Ok(cmd)
}

/// `resolve`, trying the client's previous command first (see `Client::memo_cmd`).
fn resolve_memo<'t>(
    srv: &'t Server,
    client: &mut Client,
    argv: &[&[u8]],
) -> Result<&'t Arc<Command>, (Option<&'t Command>, CmdError)> {
    if let Some(c) = client.memo_cmd.checked_sub(1).and_then(|i| srv.table.all.get(i)) {
        if argv[0].eq_ignore_ascii_case(c.name.as_bytes()) && c.arity_ok(argv.len()) {
            return Ok(c);
        }
    }
    let c = resolve(srv, argv)?;
    // Only a plain top-level command: a container resolves by its second argument, and a
    // subcommand's name ("config|get") is not something a request can name.
    if !c.is_container && argv[0].eq_ignore_ascii_case(c.name.as_bytes()) {
        client.memo_cmd = c.id + 1;
    }
    Ok(c)
}

/// The generic gates (Redis's `processCommand`), then the command.
pub fn dispatch(srv: &Server, ws: &WorkerStats, client: &mut Client, argv: &[&[u8]], out: &mut Reply) {
    dispatch_hinted(srv, ws, client, argv, None, out)
}

/// `dispatch`, with the shard and hash of `argv[1]` when the look-ahead already computed them.
fn dispatch_hinted(
    srv: &Server,
    ws: &WorkerStats,
    client: &mut Client,
    argv: &[&[u8]],
    key_hint: Option<KeyHint>,
    out: &mut Reply,
) {
    out.proto = client.proto;
    // CLIENT REPLY OFF/SKIP: run the command but drop what it replies.
    let mark = out.buf.len();
    if client.reply_mode == ReplyMode::SkipNext {
        client.reply_mode = ReplyMode::Skipping;
    }
    gated(srv, ws, client, argv, key_hint, out);
    match client.reply_mode {
        ReplyMode::Off => out.buf.truncate(mark),
        ReplyMode::Skipping => {
            out.buf.truncate(mark);
            client.reply_mode = ReplyMode::On;
        }
        _ => {}
    }
}

fn gated(
    srv: &Server,
    ws: &WorkerStats,
    client: &mut Client,
    argv: &[&[u8]],
    key_hint: Option<KeyHint>,
    out: &mut Reply,
) {
    let cmd = match resolve_memo(srv, client, argv) {
        Ok(c) => c,
        Err((cmd, e)) => return reject(ws, client, out, cmd, e),
    };
    client.handle.last_cmd.store(cmd.id + 1, Ordering::Relaxed);
    if !client.authenticated && !cmd.has(flags::NO_AUTH) {
        return reject(ws, client, out, Some(cmd), CmdError::msg("NOAUTH Authentication required."));
    }
    if cmd.name == "debug" {
        let setting = srv.config.get("enable-debug-command");
        let allowed = setting == "yes" || (setting == "local" && client.handle.is_local());
        if !allowed {
            return reject(ws, client, out, Some(cmd), CmdError::msg(
                "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.",
            ));
        }
    }
    if let Some(m) = client.multi.as_mut() {
        let n = cmd.name.as_str();
        let passes = matches!(n, "exec" | "discard" | "multi" | "watch" | "quit" | "reset");
        if !passes {
            if cmd.has(flags::NO_MULTI) {
                return reject(
                    ws,
                    client,
                    out,
                    Some(cmd),
                    CmdError::msg("ERR Command not allowed inside a transaction"),
                );
            }
            m.queued.push(argv.iter().map(|a| a.to_vec()).collect());
            client.handle.multi.store(m.queued.len() as i64, Ordering::Relaxed);
            out.simple("QUEUED");
            return;
        }
    }
    let plan = match (key_hint, cmd.scope, cmd.single_key) {
        // GET, SET, INCR … whose key the look-ahead already hashed to its shard.
        (Some(k), Scope::Keys, Some(1)) => LockPlan::one(client.db, k.shard),
        _ => match lock_plan(cmd, argv, client.db, false, srv.ks.num_dbs()) {
            Ok(p) => p,
            Err(e) => return reject(ws, client, out, Some(cmd), e),
        },
    };
    let mut locks = Locks::acquire(&srv.ks, plan);
    call(srv, ws, client, out, cmd, argv, &mut locks, key_hint.map(|k| k.hash));
}

/// The shards a command must lock. `in_exec`: walkers lock their whole database.
pub fn lock_plan(cmd: &Command, argv: &[&[u8]], db: usize, in_exec: bool, ndbs: usize) -> Result<LockPlan, CmdError> {
    let mut plan = LockPlan::default();
    let keys = |plan: &mut LockPlan| -> CmdResult {
        let mut pos: SmallVec<[usize; 8]> = SmallVec::new();
        if keyspec::key_positions(&cmd.key_specs, argv, &mut pos).is_err() {
            // The command reports its own numkeys error before touching keys.
            return Ok(());
        }
        for i in pos {
            plan.key(db, argv[i]);
        }
        Ok(())
    };
    match cmd.scope {
        Scope::None => {}
        Scope::Keys => match cmd.single_key {
            // The common case (GET, SET, INCR …): one key at a fixed position.
            Some(i) => {
                if i < argv.len() {
                    plan.key(db, argv[i]);
                }
            }
            None => keys(&mut plan)?,
        },
        Scope::Walk => {
            if in_exec {
                plan.whole_db(db)
            }
        }
        Scope::WalkAll => {
            if in_exec {
                for d in 0..ndbs {
                    plan.whole_db(d);
                }
            }
        }
        Scope::Db => plan.whole_db(db),
        Scope::All => {
            for d in 0..ndbs {
                plan.whole_db(d);
            }
        }
        Scope::Custom(f) => {
            keys(&mut plan)?;
            f(argv, db, &mut plan)?;
        }
    }
    Ok(plan)
}

/// Runs one command with the locks held (used directly and by EXEC for queued commands).
/// `arg1_hash`: the keyspace hash of `argv[1]`, when the look-ahead computed it.
#[allow(clippy::too_many_arguments)]
pub fn call(
    srv: &Server,
    ws: &WorkerStats,
    client: &mut Client,
    out: &mut Reply,
    cmd: &Command,
    argv: &[&[u8]],
    locks: &mut Locks<'_>,
    arg1_hash: Option<u64>,
) -> bool {
    // One clock read gives both the command's fixed time (7.2 semantics) and the start of
    // its duration measurement; within a pipelined batch it is the previous command's end.
    let start = client.clock.take().unwrap_or_else(|| srv.clock.instant());
    let now = srv.clock.ms_at(start);
    let emit = srv.effects_enabled();
    let db = client.db;
    let no_touch = client.no_touch && cmd.name != "touch";
    let mut ctx = Ctx {
        srv,
        ws,
        reply: out,
        args: argv,
        cmd,
        rewrote: false,
        ks: KsView {
            locks,
            db,
            now,
            lru_clock: srv.lru_clock(now),
            no_touch,
            dirty: 0,
            emit,
            effects: Vec::new(),
            stats: &ws.counters,
            ready: Vec::new(),
            key_hint: arg1_hash.and_then(|h| argv.get(1).map(|a| (a.as_ptr() as usize, a.len(), h))),
        },
        client,
    };
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (cmd.handler)(&mut ctx)));
    let res: CmdResult = match res {
        Ok(r) => r,
        Err(p) => {
            let what = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            crate::log_warning!("BUG: command '{}' panicked: {}", cmd.name, what);
            Err(CmdError::msg("ERR internal error"))
        }
    };
    let ok = res.is_ok();
    if let Err(e) = &res {
        ws.cmds[cmd.id].failed_calls.fetch_add(1, Ordering::Relaxed);
        error_reply(ws, ctx.reply, e);
    }
    // Write epilogue: count the change and publish the effects, still under the locks so
    // their order matches the order of the writes.
    if ctx.ks.dirty > 0 {
        ws.counters.dirty.fetch_add(ctx.ks.dirty, Ordering::Relaxed);
        if emit && !ctx.rewrote {
            let db = ctx.ks.db;
            ctx.ks.effects.push(crate::commands::Effect { db, argv: argv.iter().map(|a| a.to_vec()).collect() });
        }
    }
    // A blocking command that has to wait: register it under the locks it holds.
    if let Some(req) = ctx.client.blocked.take() {
        let w = Arc::new(crate::server::blocking::Waiter {
            client_id: ctx.client.id(),
            db: ctx.ks.db,
            argv: req.argv.unwrap_or_else(|| argv.iter().map(|a| a.to_vec()).collect()),
            keys: req.keys,
            deadline_ms: req.deadline_ms,
            proto: ctx.client.proto,
            serve: req.serve,
            on_timeout: req.on_timeout,
            state: parking_lot::Mutex::new(crate::server::blocking::WaitState::Waiting),
            wake: ctx.client.wake.clone().unwrap_or_else(|| Arc::new(|| {})),
        });
        crate::server::blocking::register(ctx.ks.locks, &w);
        srv.blocked_clients.fetch_add(1, Ordering::Relaxed);
        *ctx.client.handle.waiter.lock() = Some(w.clone());
        ctx.client.waiting = Some(w);
    }
    // Serve clients blocked on keys this command made ready — after its own effects, and for
    // a transaction only once the whole EXEC is done (so no waiter sees half of it).
    ctx.client.ready.append(&mut ctx.ks.ready);
    if !ctx.client.in_exec && !ctx.client.ready.is_empty() {
        ctx.ks.ready = std::mem::take(&mut ctx.client.ready);
        crate::server::blocking::serve_ready(&mut ctx.ks, srv);
    }
    if emit && !ctx.ks.effects.is_empty() {
        srv.publish_effects(&ctx.ks.effects);
    }
    let st = &ws.cmds[cmd.id];
    super::stats::bump(&st.calls, 1);
    let end = srv.clock.instant();
    super::stats::bump(&st.usec, end.duration_since(start).as_micros() as u64);
    ctx.client.clock = Some(end);
    super::stats::bump(&ws.counters.commands, 1);
    ok
}

/// Cleanup when a connection closes: its watches leave the shard registries, a pending
/// blocking wait is cancelled.
pub fn disconnect(srv: &Server, client: &mut Client) {
    crate::commands::multi::unwatch_all(srv, client);
    if let Some(w) = client.waiting.take() {
        if w.finish(crate::server::blocking::WaitState::Cancelled) {
            srv.blocked_clients.fetch_sub(1, Ordering::Relaxed);
        }
        crate::server::blocking::unregister(&srv.ks, &w);
        *client.handle.waiter.lock() = None;
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
        let state = std::mem::replace(&mut *w.state.lock(), crate::server::blocking::WaitState::Cancelled);
        out.proto = self.client.proto;
        crate::server::blocking::unregister(&srv.ks, &w);
        match state {
            crate::server::blocking::WaitState::Served(bytes) => out.raw(&bytes),
            crate::server::blocking::WaitState::Retry => {
                self.client.clock = None;
                let argv: Vec<&[u8]> = w.argv.iter().map(|a| a.as_slice()).collect();
                dispatch(srv, ws, &mut self.client, &argv, out);
                if self.client.waiting.is_some() {
                    return true;
                }
            }
            crate::server::blocking::WaitState::Unblocked => {
                error_reply(ws, out, &CmdError::msg("UNBLOCKED client unblocked via CLIENT UNBLOCK"))
            }
            _ => (w.on_timeout)(out),
        }
        self.feed(srv, ws, &[], out)
    }

    /// The wait this client is in, if blocked.
    pub fn waiting(&self) -> Option<Arc<crate::server::blocking::Waiter>> {
        self.client.waiting.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::client::ClientHandle;
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
        let srv = Server::new(crate::config::Config::defaults(), 1, 0);
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
    fn first_key_hint_matches_what_the_session_runs() {
        let srv = Server::new(crate::config::Config::defaults(), 1, 0);
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
        let srv = Server::new(crate::config::Config::defaults(), 1, 0);
        let seen: Arc<Mutex<Vec<Vec<Vec<u8>>>>> = Default::default();
        let sink = seen.clone();
        srv.set_effect_sink(Some(Box::new(move |effects| {
            sink.lock().extend(effects.iter().map(|e| e.argv.clone()));
        })));
        let mut s = session(&srv);
        feed(&srv, &mut s, b"SELECT 2\r\nFLUSHDB\r\nPING\r\nSWAPDB 2 3\r\n");
        let got = seen.lock().clone();
        assert_eq!(got, vec![vec![b"FLUSHDB".to_vec()], vec![b"SWAPDB".to_vec(), b"2".to_vec(), b"3".to_vec()]]);
    }

    #[test]
    fn transaction_queues_and_aborts() {
        let srv = Server::new(crate::config::Config::defaults(), 1, 0);
        let mut s = session(&srv);
        assert_eq!(feed(&srv, &mut s, b"MULTI\r\nPING\r\nEXEC\r\n"), "+OK\r\n+QUEUED\r\n*1\r\n+PONG\r\n");
        assert_eq!(
            feed(&srv, &mut s, b"MULTI\r\nECHO\r\nEXEC\r\n"),
            "+OK\r\n-ERR wrong number of arguments for 'echo' command\r\n-EXECABORT Transaction discarded because of previous errors.\r\n"
        );
    }
}
