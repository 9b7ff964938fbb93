//! Messaging between clients (DESIGN §1 "Messaging"): the Pub/Sub registry, and the mailboxes
//! through which a message reaches a client on any worker.
//!
//! A subscriber owns one [`Mailbox`]. PUBLISH looks the channel up in the registry (a read lock
//! shared by all publishers), encodes the message once, and appends it to every subscriber's
//! mailbox — a short lock per subscriber, the bytes already in the subscriber's protocol. A
//! mailbox that was empty is queued on its worker's [`Post`], and each worker that got one is
//! woken once per PUBLISH, however many of its clients received the message. The worker moves
//! the bytes into the client's output before it writes (its `beforeSleep`), so a message never
//! overtakes a reply its subscriber was already sent. A publisher's messages reach every
//! subscriber in the order it published them: each mailbox is appended to under its lock.
//!
//! A mailbox holds at most what `client-output-buffer-limit` allows its class: past the hard
//! limit, or past the soft one for longer than its seconds, the subscriber is disconnected (as
//! Redis does), so a consumer that stops reading cannot grow the server's memory.
//!
//! Messages a client publishes to itself (it is subscribed and publishes, or its own write
//! raises a keyspace notification it listens to) stay in its mailbox until the command ends:
//! they follow the command's reply, and a whole EXEC's or script's, as in Redis 7.2.

use super::clients::ClientHandle;
pub use super::clients::{Kind, Mailbox, Subs};
use super::clock::{unix_ms, unix_us};
use crate::config::Hot;
use crate::engine::glob::glob_match;
use crate::lockorder::{rank, Mutex, RwLock};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// What wakes a worker's event loop (set by the network layer when the worker starts).
pub type WakeFn = Box<dyn Fn() + Send + Sync>;

/// The classes of `client-output-buffer-limit` Atoll's clients fall in.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum OutputClass {
    Normal = 0,
    Pubsub = 1,
    Replica = 2,
}

/// Whether `bytes` of pending output breaks the client's `client-output-buffer-limit`
/// (Redis's `checkClientOutputBufferLimits`): at or over the hard limit, or over the soft one
/// for longer than its seconds — the first time over the soft limit starts that clock, and
/// coming back under it stops it.
pub fn over_output_limit(hot: &Hot, h: &ClientHandle, bytes: u64) -> bool {
    // A MONITOR client is a normal one here, as in Redis's getClientType.
    let class = if h.replica.load(Ordering::Relaxed) {
        OutputClass::Replica
    } else if h.subscriptions() > 0 {
        OutputClass::Pubsub
    } else {
        OutputClass::Normal
    } as usize;
    let lim = &hot.obuf[class * 3..class * 3 + 3];
    let (hard, soft, secs) =
        (lim[0].load(Ordering::Relaxed), lim[1].load(Ordering::Relaxed), lim[2].load(Ordering::Relaxed));
    if hard > 0 && bytes >= hard {
        return true;
    }
    if soft > 0 && bytes >= soft {
        let now = unix_ms();
        let since = h.obuf_soft_since.load(Ordering::Relaxed);
        if since == 0 {
            h.obuf_soft_since.store(now, Ordering::Relaxed);
            return false;
        }
        return (now - since) / 1000 > secs as i64;
    }
    if h.obuf_soft_since.load(Ordering::Relaxed) != 0 {
        h.obuf_soft_since.store(0, Ordering::Relaxed);
    }
    false
}

/// Redis's CLIENT_CLOSE_ASAP check inside commands whose reply size the client picks
/// (HRANDFIELD, SRANDMEMBER and ZRANDMEMBER with a negative count, KEYS): once the reply
/// being built breaks the client's output limit, the command stops adding to it; the session
/// then discards the reply and closes the client. Costs a comparison per element below the
/// smallest limit set.
pub struct OutputGuard<'a> {
    hot: &'a Hot,
    h: &'a ClientHandle,
    look: u64,
}

impl<'a> OutputGuard<'a> {
    pub fn new(hot: &'a Hot, h: &'a ClientHandle) -> Self {
        OutputGuard { hot, h, look: hot.obuf_look.load(Ordering::Relaxed) }
    }

    /// A reply of `len` bytes so far breaks the limit: stop.
    #[inline]
    pub fn full(&self, len: usize) -> bool {
        len as u64 >= self.look && over_output_limit(self.hot, self.h, len as u64)
    }
}

/// What delivering to a client needs: the output limits, the clients (a redirect's target)
/// and the mailboxes' posts. Tracking's invalidations and keyspace events go through it.
#[derive(Clone, Copy)]
pub struct Reach<'a> {
    pub hot: &'a Hot,
    pub clients: &'a super::clients::Registry,
    pub pubsub: &'a PubSub,
}

/// Disconnects a client over its output limit, with Redis's log line.
#[cold]
pub fn close_over_limit(h: &ClientHandle) {
    if h.kill() {
        crate::log_warning!(
            "Client id={} addr={} scheduled to be closed ASAP for overcoming of output buffer limits.",
            h.id,
            h.addr
        );
    }
}

/// Appends a frame encoded for RESP2 (`*N…`); a RESP3 client gets it as a push (`>N…`)
/// unless `as_is` (MONITOR's status lines). Returns true if the mailbox must be queued on
/// its worker (it was not already).
fn put(mb: &Mailbox, hot: &Hot, frame: &[u8], queue: bool, as_is: bool) -> bool {
    let h = &mb.handle;
    let mut st = mb.state.lock();
    if h.killed.load(Ordering::Relaxed) {
        return false;
    }
    let at = st.buf.len();
    st.buf.extend_from_slice(frame);
    if !as_is && h.resp.load(Ordering::Relaxed) == 3 {
        st.buf[at] = b'>';
    }
    let total = st.buf.len() as u64 + h.out_pending.load(Ordering::Relaxed);
    if over_output_limit(hot, h, total) {
        st.buf = Vec::new();
        st.recount(false);
        drop(st);
        close_over_limit(h);
        return false;
    }
    st.recount(h.replica.load(Ordering::Relaxed));
    if queue && !st.queued {
        st.queued = true;
        return true;
    }
    false
}

/// A worker's queue of mailboxes with messages, and the way to wake it.
#[derive(Default)]
pub struct Post {
    queue: Mutex<Vec<Arc<Mailbox>>, { rank::POST }>,
    /// The queue is not empty: a worker's round looks at this, not the lock.
    pending: AtomicBool,
    wake: OnceLock<WakeFn>,
}

impl Post {
    /// The mailboxes queued since the last call (the worker delivers them).
    #[inline]
    pub fn take(&self, into: &mut Vec<Arc<Mailbox>>) {
        if self.pending.swap(false, Ordering::Acquire) {
            std::mem::swap(&mut *self.queue.lock(), into);
        }
    }
}

type Subscribers = HashMap<Box<[u8]>, Vec<Arc<Mailbox>>>;

/// The server's Pub/Sub registry: channel, pattern and shard channel → subscribers.
pub struct PubSub {
    channels: RwLock<Subscribers, { rank::PUBSUB }>,
    patterns: RwLock<Subscribers, { rank::PUBSUB }>,
    shard: RwLock<Subscribers, { rank::PUBSUB }>,
    /// One per worker.
    posts: Vec<Post>,
    /// MONITOR clients, and whether there is any (the one load `call` pays).
    monitors: RwLock<Vec<Arc<Mailbox>>, { rank::PUBSUB }>,
    monitoring: AtomicBool,
}

/// Appends a RESP2 bulk string.
fn bulk(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'$');
    out.extend_from_slice(itoa::Buffer::new().format(s.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(s);
    out.extend_from_slice(b"\r\n");
}

/// A message frame as RESP2 sends it: `*N` then the bulk strings.
pub fn frame(parts: &[&[u8]]) -> Vec<u8> {
    let mut f = Vec::with_capacity(16 + parts.iter().map(|p| p.len() + 16).sum::<usize>());
    f.push(b'*');
    f.extend_from_slice(itoa::Buffer::new().format(parts.len()).as_bytes());
    f.extend_from_slice(b"\r\n");
    for p in parts {
        bulk(&mut f, p);
    }
    f
}

thread_local! {
    /// On a worker thread during its round: the workers to wake once the round's commands are
    /// done (a bit each), instead of one wake-up call per message. None elsewhere (the cron
    /// after the round, other threads): wakes go out at once.
    static DEFERRED_WAKES: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// A worker's round begins: wakes wait for [`flush_wakes`].
pub fn defer_wakes() {
    DEFERRED_WAKES.with(|d| d.set(Some(0)));
}

/// The round's commands are done (`beforeSleep`): wakes the workers that got messages, except
/// `own` (which delivers its own right after), and stops deferring.
pub fn flush_wakes(ps: &PubSub, own: usize) {
    let Some(mask) = DEFERRED_WAKES.with(|d| d.take()) else { return };
    let mut m = mask & !(1u64 << (own % 64));
    while m != 0 {
        let w = m.trailing_zeros() as usize;
        m &= m - 1;
        if let Some(wake) = ps.posts.get(w).and_then(|p| p.wake.get()) {
            wake();
        }
    }
}

/// Wakes worker `w` now (its loop runs a round even with nothing to do).
pub fn wake_now(ps: &PubSub, w: usize) {
    if let Some(wake) = ps.posts.get(w).and_then(|p| p.wake.get()) {
        wake();
    }
}

/// Wakes worker `w` now, or at the end of this worker's round.
fn wake_worker(ps: &PubSub, w: usize) {
    let deferred = w < 64
        && DEFERRED_WAKES.with(|d| match d.get() {
            Some(m) => {
                d.set(Some(m | 1 << w));
                true
            }
            None => false,
        });
    if !deferred {
        if let Some(wake) = ps.posts.get(w).and_then(|p| p.wake.get()) {
            wake();
        }
    }
}

/// Mailboxes a delivery must queue, per worker (so each worker is woken once).
struct Deliveries {
    per_worker: Vec<Vec<Arc<Mailbox>>>,
}

impl Deliveries {
    fn new() -> Deliveries {
        Deliveries { per_worker: Vec::new() }
    }

    fn add(&mut self, mb: &Arc<Mailbox>) {
        if self.per_worker.len() <= mb.worker {
            self.per_worker.resize_with(mb.worker + 1, Vec::new);
        }
        self.per_worker[mb.worker].push(mb.clone());
    }

    fn send(self, ps: &PubSub) {
        for (w, mbs) in self.per_worker.into_iter().enumerate() {
            if mbs.is_empty() {
                continue;
            }
            let Some(post) = ps.posts.get(w) else { continue };
            post.queue.lock().extend(mbs);
            post.pending.store(true, Ordering::Release);
            wake_worker(ps, w);
        }
    }
}

impl PubSub {
    pub fn new(workers: usize) -> PubSub {
        PubSub {
            channels: RwLock::default(),
            patterns: RwLock::default(),
            shard: RwLock::default(),
            posts: (0..workers.max(1)).map(|_| Post::default()).collect(),
            monitors: RwLock::default(),
            monitoring: AtomicBool::new(false),
        }
    }

    /// Registers how worker `w`'s loop is woken.
    pub fn set_wake(&self, w: usize, wake: WakeFn) {
        if let Some(p) = self.posts.get(w) {
            let _ = p.wake.set(wake);
        }
    }

    pub fn post(&self, w: usize) -> &Post {
        &self.posts[w]
    }

    fn map(&self, kind: Kind) -> &RwLock<Subscribers, { rank::PUBSUB }> {
        match kind {
            Kind::Channel => &self.channels,
            Kind::Pattern => &self.patterns,
            Kind::Shard => &self.shard,
        }
    }

    /// Adds the mailbox's subscription (the caller checked it is new).
    pub fn add(&self, kind: Kind, name: &[u8], mb: &Arc<Mailbox>) {
        self.map(kind).write().entry(name.into()).or_default().push(mb.clone());
    }

    /// Removes the mailbox's subscription; a name left without subscribers is forgotten (so
    /// channels that came and went take no memory).
    pub fn remove(&self, kind: Kind, name: &[u8], mb: &Arc<Mailbox>) {
        let mut m = self.map(kind).write();
        if let Some(v) = m.get_mut(name) {
            v.retain(|x| !Arc::ptr_eq(x, mb));
            if v.is_empty() {
                m.remove(name);
            }
        }
    }

    /// The connections of `user` holding a subscription its new `rules` no longer allow (ACL
    /// SETUSER closes them, as Redis's `ACLKillPubsubClientsIfNeeded`).
    pub fn subscribers_losing(
        &self,
        user: &Arc<crate::services::acl::User>,
        rules: &crate::services::acl::Rules,
    ) -> Vec<Arc<ClientHandle>> {
        let mut out: Vec<Arc<ClientHandle>> = Vec::new();
        for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
            for (name, subs) in self.map(kind).read().iter() {
                for mb in subs {
                    let h = &mb.handle;
                    // None is the default user.
                    let mine = match h.user.lock().as_ref() {
                        Some(u) => Arc::ptr_eq(u, user),
                        None => user.name == b"default",
                    };
                    if mine
                        && !rules.keeps_subscription(name, kind == Kind::Pattern)
                        && !out.iter().any(|o| o.id == h.id)
                    {
                        out.push(h.clone());
                    }
                }
            }
        }
        out
    }

    /// Active names (with at least one subscriber) matching `pattern`, if given.
    pub fn names(&self, kind: Kind, pattern: Option<&[u8]>) -> Vec<Box<[u8]>> {
        self.map(kind).read().keys().filter(|n| pattern.is_none_or(|p| glob_match(p, n, false))).cloned().collect()
    }

    /// Subscribers of one name.
    pub fn count(&self, kind: Kind, name: &[u8]) -> usize {
        self.map(kind).read().get(name).map_or(0, |v| v.len())
    }

    /// Distinct names subscribed.
    pub fn len(&self, kind: Kind) -> usize {
        self.map(kind).read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len(Kind::Channel) == 0 && self.len(Kind::Pattern) == 0 && self.len(Kind::Shard) == 0
    }

    /// PUBLISH / SPUBLISH: delivers `msg` to the channel's subscribers (and, for a plain
    /// channel, to every matching pattern's) and returns how many deliveries were made.
    /// `self_id`: the publishing client, whose own copy waits for its command to end.
    pub fn publish(&self, hot: &Hot, shard: bool, channel: &[u8], msg: &[u8], self_id: u64) -> usize {
        let mut receivers = 0;
        let mut d = Deliveries::new();
        let kind = if shard { Kind::Shard } else { Kind::Channel };
        {
            let map = self.map(kind).read();
            if let Some(subs) = map.get(channel) {
                let word: &[u8] = if shard { b"smessage" } else { b"message" };
                let f = frame(&[word, channel, msg]);
                for mb in subs {
                    if put(mb, hot, &f, mb.handle.id != self_id, false) {
                        d.add(mb);
                    }
                    receivers += 1;
                }
            }
        }
        if !shard {
            let pats = self.patterns.read();
            for (p, subs) in pats.iter() {
                if !glob_match(p, channel, false) {
                    continue;
                }
                let f = frame(&[b"pmessage", p, channel, msg]);
                for mb in subs {
                    if put(mb, hot, &f, mb.handle.id != self_id, false) {
                        d.add(mb);
                    }
                    receivers += 1;
                }
            }
        }
        d.send(self);
        receivers
    }

    /// Unsubscribes every client from the shard channels of `slots`, telling each with a
    /// `sunsubscribe` and its shard subscriptions left, as Redis does when a slot leaves the
    /// node or changes hands (its removeChannelsInSlot): what is published there from now on
    /// is published on another node.
    pub fn drop_shard_slots(&self, hot: &Hot, slots: &std::collections::HashSet<usize>) {
        let doomed: Vec<Box<[u8]>> =
            self.shard.read().keys().filter(|n| slots.contains(&crate::engine::slot::key_slot(n))).cloned().collect();
        let mut d = Deliveries::new();
        for name in doomed {
            let Some(subs) = self.shard.write().remove(&name) else { continue };
            for mb in subs {
                let left = self.shard.read().values().filter(|v| v.iter().any(|x| Arc::ptr_eq(x, &mb))).count();
                {
                    let mut st = mb.state.lock();
                    st.dropped.push(name.clone());
                    mb.dropped_pending.store(true, Ordering::Release);
                }
                let mut f = frame(&[b"sunsubscribe", &name]);
                f[1] = b'3';
                f.push(b':');
                f.extend_from_slice(itoa::Buffer::new().format(left).as_bytes());
                f.extend_from_slice(b"\r\n");
                if put(&mb, hot, &f, true, false) {
                    d.add(&mb);
                }
            }
        }
        d.send(self);
    }

    /// Appends bytes as they are (the replication stream) to a replica's mailbox and wakes
    /// its worker. False if the replica is gone or was closed for its output limit.
    pub fn send_raw(&self, hot: &Hot, mb: &Arc<Mailbox>, bytes: &[u8]) -> bool {
        let mut d = Deliveries::new();
        if put(mb, hot, bytes, true, true) {
            d.add(mb);
        }
        d.send(self);
        !mb.handle.killed.load(Ordering::Relaxed)
    }

    /// Sends one frame to a client's mailbox from another client (tracking invalidations,
    /// MONITOR lines), waking its worker.
    pub fn send(&self, hot: &Hot, mb: &Arc<Mailbox>, frame: &[u8], self_id: u64) {
        let mut d = Deliveries::new();
        if put(mb, hot, frame, mb.handle.id != self_id, false) {
            d.add(mb);
        }
        d.send(self);
    }
}

impl PubSub {
    /// A MONITOR client starts receiving every command.
    pub fn add_monitor(&self, mb: Arc<Mailbox>) {
        let mut m = self.monitors.write();
        m.push(mb);
        self.monitoring.store(true, Ordering::Relaxed);
    }

    pub fn remove_monitor(&self, mb: &Arc<Mailbox>) {
        let mut m = self.monitors.write();
        m.retain(|x| !Arc::ptr_eq(x, mb));
        self.monitoring.store(!m.is_empty(), Ordering::Relaxed);
    }

    /// Any MONITOR client connected.
    #[inline]
    pub fn monitoring(&self) -> bool {
        self.monitoring.load(Ordering::Relaxed)
    }
}

/// Which arguments MONITOR shows as `(redacted)`: the passwords Redis's
/// `redactClientCommandArgument` hides in the commands MONITOR shows (AUTH, HELLO … AUTH,
/// MIGRATE … AUTH/AUTH2), walking the options as those commands parse them.
fn redactions(argv: &[&[u8]]) -> Vec<bool> {
    let mut mask = vec![false; argv.len()];
    let is = |a: &[u8], w: &str| a.eq_ignore_ascii_case(w.as_bytes());
    if is(argv[0], "auth") {
        mask[1..].iter_mut().for_each(|m| *m = true);
    } else if is(argv[0], "hello") {
        let mut j = 2;
        while j < argv.len() {
            if is(argv[j], "auth") && j + 2 < argv.len() {
                mask[j + 1] = true;
                mask[j + 2] = true;
                j += 2;
            } else if is(argv[j], "setname") {
                j += 1;
            }
            j += 1;
        }
    } else if is(argv[0], "migrate") {
        let mut j = 6;
        while j < argv.len() {
            if is(argv[j], "auth") && j + 1 < argv.len() {
                mask[j + 1] = true;
                j += 1;
            } else if is(argv[j], "auth2") && j + 2 < argv.len() {
                mask[j + 1] = true;
                mask[j + 2] = true;
                j += 2;
            } else if is(argv[j], "keys") {
                break;
            }
            j += 1;
        }
    }
    mask
}

/// Sends a command to the MONITOR clients, as Redis's `replicationFeedMonitors` words it:
/// `+<sec>.<usec> [<db> <from>] "arg" …`, `from` being the client's address, `unix:<path>`
/// or `lua`.
pub fn feed_monitors(ps: &PubSub, hot: &Hot, db: usize, from: &[u8], argv: &[&[u8]]) {
    let us = unix_us();
    let mut line = Vec::with_capacity(64 + from.len() + argv.iter().map(|a| a.len() + 3).sum::<usize>());
    line.push(b'+');
    line.extend_from_slice(format!("{}.{:06} [{} ", us / 1_000_000, us % 1_000_000, db).as_bytes());
    line.extend_from_slice(from);
    line.extend_from_slice(b"] ");
    let hide = redactions(argv);
    for (i, a) in argv.iter().enumerate() {
        if i > 0 {
            line.push(b' ');
        }
        let a: &[u8] = if hide[i] { b"(redacted)" } else { a };
        crate::protocol::cat_repr(&mut line, a);
    }
    line.extend_from_slice(b"\r\n");
    let mut d = Deliveries::new();
    for mb in ps.monitors.read().iter() {
        if put(mb, hot, &line, true, true) {
            d.add(mb);
        }
    }
    d.send(ps);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_resp2_arrays_of_bulks() {
        assert_eq!(frame(&[b"message", b"ch", b""]), b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$0\r\n\r\n");
    }
}
