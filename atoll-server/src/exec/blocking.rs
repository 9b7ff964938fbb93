//! Blocking commands (BLPOP, BLMOVE, BZPOPMIN, XREAD BLOCK …): waiters registered on keys and
//! served by the write that makes a key ready (DESIGN §1 "Blocking commands").
//!
//! The API a blocking command uses:
//! 1. Try to serve at once (the key already has data) like the non-blocking form.
//! 2. Inside MULTI/EXEC (`ctx.client.in_exec`) never block: reply as on timeout.
//! 3. Otherwise call `ctx.block(BlockRequest { .. })` and reply nothing. The client is suspended
//!    (its later pipelined commands wait) until one of its keys is served or the deadline passes.
//! 4. A write that may make a key ready calls `ctx.ks.signal_ready(key)`. When that command
//!    (or transaction) is done — its own effects recorded first, as Redis orders them — and while
//!    its shard locks are still held, the longest-waiting client on the key is served by its
//!    `serve` function, which pops / reads on the waiter's behalf and builds the waiter's reply.
//!    The reply is handed to the waiter's worker. No third client can take the element in
//!    between, and a wakeup cannot be lost: waiters register under the same shard lock.
//!
//! A waiter lives in the registry of each of its keys' shards. Its state (waiting, served,
//! timed out, unblocked, cancelled) changes only under its own mutex, and `serve` runs holding
//! it, so a timeout racing with a serve sees either "not served" or the complete reply — an
//! element is never popped for a client that has already given up.

use super::{CmdError, KsView};
use crate::engine::{key_shard, Blocked, Locks};
use crate::lockorder::{rank, Mutex};
use crate::protocol::{Proto, Reply};
use std::any::Any;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Result of trying to serve a blocked client from a key that was signalled ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// The reply is complete: the client is unblocked.
    Done,
    /// Nothing to serve after all (wrong type now, or still empty): keep waiting.
    NotReady,
    /// Serving needs locks the writer does not hold (BLMOVE to a key in another shard): the
    /// waiter re-runs its command itself, with all its locks, ahead of later waiters.
    Retry,
}

/// Serves a blocked client: `argv` is the blocked command as the client sent it, `key` the key
/// that became ready (in `ks.db`, the client's database). Writes the client's reply to `reply`.
pub type ServeFn = fn(ks: &mut KsView, argv: &[Vec<u8>], key: &[u8], reply: &mut Reply) -> Served;

/// Writes the reply a blocked client gets when its timeout expires.
pub type TimeoutFn = fn(reply: &mut Reply);

/// What a blocking command asks for when it has to wait.
pub struct BlockRequest {
    /// The command the waiter keeps for `serve`, when it differs from what the client sent
    /// (XREAD … `$` keeps the IDs `$` stood for at block time). None keeps the command as sent.
    pub argv: Option<Vec<Vec<u8>>>,
    /// Keys to wait on, in the client's current database.
    pub keys: Vec<Vec<u8>>,
    /// Absolute deadline in Unix ms; None waits forever.
    pub deadline_ms: Option<i64>,
    pub serve: ServeFn,
    pub on_timeout: TimeoutFn,
    /// Called once the waiter exists, with its locks still held: for a wait something other
    /// than a key ends (WAIT: replicas' acknowledgements).
    pub registered: Option<fn(&super::Server, &Arc<Waiter>)>,
}

pub use crate::services::clients::WaitState;

/// A blocked client, shared by its worker and the writers that may serve it.
pub struct Waiter {
    pub client_id: u64,
    pub db: usize,
    pub argv: Vec<Vec<u8>>,
    pub keys: Vec<Vec<u8>>,
    pub deadline_ms: Option<i64>,
    pub proto: Proto,
    pub serve: ServeFn,
    pub on_timeout: TimeoutFn,
    pub state: Mutex<WaitState, { rank::WAITER }>,
    /// Tells the client's worker that the wait ended (safe to call from any thread).
    pub wake: WakeFn,
    /// A client postponed by CLIENT PAUSE: at its deadline (the pause's end) the command runs
    /// again instead of timing out, and CLIENT UNBLOCK does not apply.
    pub postponed: bool,
    /// The ACL registry's epoch when the client blocked: if rules changed since, the command
    /// is run again rather than served in place, so the permission check sees the new rules.
    pub acl_epoch: u64,
}

/// A postponed command is served by nothing but the end of the pause.
pub fn never_served(_: &mut KsView, _: &[Vec<u8>], _: &[u8], _: &mut Reply) -> Served {
    Served::NotReady
}

/// Wakes a client's worker: pushes the client onto the worker's resume list and wakes its
/// event loop.
pub type WakeFn = Arc<dyn Fn() + Send + Sync>;

thread_local! {
    /// During a worker's round: the wakes of clients that this round's writes served. Their
    /// replies report those writes, so they may go out only once the round's effects are as
    /// durable as the policy promises (`appendfsync always`: fsync'd) — the round releases
    /// them after that wait (`release_served`). None elsewhere: woken at once.
    static SERVED_WAKES: std::cell::RefCell<Option<Vec<WakeFn>>> = const { std::cell::RefCell::new(None) };
}

/// A worker's round begins: wakes of served clients wait for [`release_served`].
pub fn defer_served_wakes() {
    SERVED_WAKES.with(|s| {
        let mut s = s.borrow_mut();
        if s.is_none() {
            *s = Some(Vec::new());
        }
    });
}

/// The round's effects are written (and with `always` fsync'd): the clients it served may be
/// answered.
pub fn release_served() {
    let list = SERVED_WAKES.with(|s| s.borrow_mut().take());
    for wake in list.into_iter().flatten() {
        wake();
    }
}

fn wake_served(wake: &WakeFn) {
    let deferred = SERVED_WAKES.with(|s| match s.borrow_mut().as_mut() {
        Some(list) => {
            list.push(wake.clone());
            true
        }
        None => false,
    });
    if !deferred {
        wake();
    }
}

impl Waiter {
    /// Ends the wait from outside (timeout, CLIENT UNBLOCK). False if it already ended.
    pub fn finish(&self, to: WaitState) -> bool {
        let mut st = self.state.lock();
        if *st != WaitState::Waiting {
            return false;
        }
        *st = to;
        drop(st);
        (self.wake)();
        true
    }
}

impl crate::services::clients::Wait for Waiter {
    fn postponed(&self) -> bool {
        self.postponed
    }

    fn finish(&self, end: WaitState) -> bool {
        Waiter::finish(self, end)
    }

    fn waiting(&self) -> bool {
        *self.state.lock() == WaitState::Waiting
    }

    fn timed(&self) -> bool {
        // A postponed client's deadline is the pause's end, not a timeout (Redis's postponed
        // clients are not in its timeout table).
        !self.postponed && self.deadline_ms.is_some_and(|d| d > 0)
    }

    fn argv(&self) -> &[Vec<u8>] {
        &self.argv
    }

    fn keys(&self) -> &[Vec<u8>] {
        &self.keys
    }
}

/// Parses a blocking timeout in seconds (BLPOP, BZPOPMIN …; fractions allowed, 0 = forever) into
/// an absolute deadline.
pub fn deadline_from_secs(arg: &[u8], now_ms: i64) -> Result<Option<i64>, CmdError> {
    let s = std::str::from_utf8(arg).map_err(|_| CmdError::msg("ERR timeout is not a float or out of range"))?;
    // Redis reads it with strtold, which also takes hex (`0x7FFFFFFFFFFFFF`).
    let hex = |t: &str| {
        let (neg, body) = t.strip_prefix('-').map_or((false, t.strip_prefix('+').unwrap_or(t)), |b| (true, b));
        let digits = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X"))?;
        let v = u128::from_str_radix(digits, 16).ok()? as f64;
        Some(if neg { -v } else { v })
    };
    let v: f64 = hex(s)
        .or_else(|| s.parse().ok())
        .filter(|v: &f64| v.is_finite() && !s.starts_with(char::is_whitespace))
        .ok_or_else(|| CmdError::msg("ERR timeout is not a float or out of range"))?;
    if v < 0.0 {
        return Err(CmdError::msg("ERR timeout is negative"));
    }
    let ms = (v * 1000.0).ceil();
    if ms > (i64::MAX / 2) as f64 {
        return Err(CmdError::msg("ERR timeout is out of range"));
    }
    Ok(if ms == 0.0 { None } else { Some(now_ms + ms as i64) })
}

/// Parses a timeout in milliseconds (XREAD BLOCK; 0 = forever).
pub fn deadline_from_ms(arg: &[u8], now_ms: i64) -> Result<Option<i64>, CmdError> {
    let v = crate::protocol::parse_i64(arg)
        .ok_or_else(|| CmdError::msg("ERR timeout is not an integer or out of range"))?;
    if v < 0 {
        return Err(CmdError::msg("ERR timeout is negative"));
    }
    if v > i64::MAX / 2 {
        return Err(CmdError::msg("ERR timeout is out of range"));
    }
    Ok(if v == 0 { None } else { Some(now_ms + v) })
}

/// Called by every write that may make `key` ready for blocked clients: remembers the key if
/// anybody waits on it, to be served when the command is done.
pub fn signal_ready(ks: &mut KsView, key: &[u8]) {
    let shard = ks.shard(key);
    let waited = shard.blocked.as_ref().is_some_and(|b| b.contains_key(key));
    let db = ks.db;
    if waited && !ks.ready.iter().any(|(d, k)| *d == db && k == key) {
        ks.ready.push((db, key.to_vec()));
    }
}

/// Registers a waiter on all its keys; the caller holds the keys' shard locks, so no write can
/// slip between the command's "nothing to pop" and the registration.
pub fn register(locks: &mut Locks, w: &Arc<Waiter>) {
    for k in &w.keys {
        let shard = locks.shard(w.db, key_shard(k));
        shard.blocked.get_or_insert_with(Default::default).entry(k.as_slice().into()).or_default().push_back(w.clone());
    }
}

/// A registry entry as the waiter it is (the keyspace knows them as `engine::Blocked`; only
/// waiters are ever registered).
fn as_waiter(w: &Arc<dyn Blocked>) -> &Waiter {
    let any: &dyn Any = &**w;
    any.downcast_ref::<Waiter>().expect("only waiters are registered")
}

impl Blocked for Waiter {
    fn command(&self) -> &[u8] {
        self.argv.first().map_or(&[], |a| a.as_slice())
    }
}

/// Removes a finished waiter from the registries of its keys (taking each shard briefly; the
/// caller holds no locks).
pub fn unregister(ks: &crate::engine::Keyspace, w: &Arc<Waiter>) {
    for k in &w.keys {
        let (k, w) = (k.clone(), w.clone());
        ks.change_shard(w.db, key_shard(&k), move |s| {
            if let Some(b) = &mut s.blocked {
                if let Some(q) = b.get_mut(k.as_slice()) {
                    q.retain(|x| !std::ptr::addr_eq(Arc::as_ptr(x), Arc::as_ptr(&w)));
                    if q.is_empty() {
                        b.remove(k.as_slice());
                    }
                }
                if b.is_empty() {
                    s.blocked = None;
                }
            }
        });
    }
}

/// Serves waiters on the keys signalled ready by the command that just ran with `ks`. Serving
/// can make further keys ready (BLMOVE pushes to its destination); those are served too.
pub fn serve_ready(ks: &mut KsView, srv: &super::Server) {
    let mut rounds = 0;
    while !ks.ready.is_empty() && rounds < 1000 {
        rounds += 1;
        let ready = std::mem::take(&mut ks.ready);
        let saved = ks.db;
        for (db, key) in ready {
            // The key's database (MOVE, COPY … DB, SWAPDB and SELECT inside MULTI write
            // outside the client's current one).
            ks.db = db;
            serve_key(ks, srv, &key);
        }
        ks.db = saved;
    }
}

fn serve_key(ks: &mut KsView, srv: &super::Server, key: &[u8]) {
    // The waiters on this key, oldest first. Each is offered the key in turn: a list pop
    // that finds the list empty leaves the rest waiting (cheaply), while stream readers —
    // who do not consume — may all be served by one XADD.
    let waiters: Vec<Arc<Waiter>> = {
        let shard = ks.shard(key);
        let Some(b) = shard.blocked.as_mut() else { return };
        let Some(q) = b.get_mut(key) else { return };
        q.retain(|w| *as_waiter(w).state.lock() == WaitState::Waiting);
        if q.is_empty() {
            b.remove(key);
            if b.is_empty() {
                shard.blocked = None;
            }
            return;
        }
        q.iter()
            .map(|w| {
                let any: Arc<dyn Any + Send + Sync> = w.clone();
                any.downcast::<Waiter>().expect("only waiters are registered")
            })
            .collect()
    };
    // Redis looks the key up without effects here (LOOKUP_NOEFFECTS): a key whose time passed
    // counts as missing and stays until the next command that touches it deletes it, so the
    // DEL reaches the AOF and replicas in that command's place. Only XREADGROUP is woken by
    // a missing key (its group went with it).
    let now = ks.now;
    let gone = ks.shard(key).is_expired(key, now);
    for next in waiters {
        if gone && !next.argv[0].eq_ignore_ascii_case(b"xreadgroup") {
            continue;
        }
        let mut st = next.state.lock();
        if *st != WaitState::Waiting {
            continue;
        }
        if next.acl_epoch != srv.acl.epoch.load(Ordering::Relaxed) {
            *st = WaitState::Retry;
            drop(st);
            (next.wake)();
            srv.blocked_clients.fetch_sub(1, Ordering::Relaxed);
            break;
        }
        let mut reply = Reply::new(next.proto);
        let saved_db = ks.db;
        ks.db = next.db;
        let dirty = ks.dirty;
        let served = (next.serve)(ks, &next.argv, key, &mut reply);
        ks.db = saved_db;
        // One change per served command, as Redis counts the command when it runs again (a
        // BLMOVE's pop and push are one LMOVE).
        if ks.dirty > dirty {
            ks.dirty = dirty + 1;
        }
        match served {
            Served::NotReady => continue,
            Served::Retry => {
                *st = WaitState::Retry;
                drop(st);
                (next.wake)();
                srv.blocked_clients.fetch_sub(1, Ordering::Relaxed);
                // Later waiters wait until the re-run has had its chance.
                break;
            }
            Served::Done => {
                *st = WaitState::Served(reply.buf);
                drop(st);
                wake_served(&next.wake);
                srv.blocked_clients.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
    let shard = ks.shard(key);
    if let Some(b) = shard.blocked.as_mut() {
        if let Some(q) = b.get_mut(key) {
            q.retain(|w| *as_waiter(w).state.lock() == WaitState::Waiting);
            if q.is_empty() {
                b.remove(key);
            }
        }
        if b.is_empty() {
            shard.blocked = None;
        }
    }
}
