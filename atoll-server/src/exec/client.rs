//! Per-client state. [`Client`] is owned by the connection's session (no locking); the
//! [`ClientHandle`] is the part other workers may read or signal (CLIENT LIST, CLIENT KILL),
//! kept in the [`Registry`].

use crate::engine::WatchFlag;
use crate::protocol::Proto;
pub use crate::services::clients::*;

use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyMode {
    On,
    Off,
    /// Skip the reply of the next command only.
    SkipNext,
    /// Skipping the current command's reply.
    Skipping,
    /// This command's reply goes out, none after it (a slot migration's import link once
    /// `CLUSTER SYNCSLOTS ESTABLISH` is answered).
    OffAfterThis,
}

/// A queued MULTI transaction.
#[derive(Default)]
pub struct MultiState {
    pub queued: Vec<Vec<Vec<u8>>>,
    /// A queue-time error happened: EXEC must answer EXECABORT.
    pub error: bool,
}

/// WATCHed keys of a client.
pub struct WatchState {
    pub flag: Arc<WatchFlag>,
    /// (db, key) pairs. WATCH reclaims keys already past their TTL before registering, so
    /// a registered key's later expiry is a change, as in Redis 7.
    pub keys: Vec<(usize, Box<[u8]>)>,
}

/// Session-owned client state.
pub struct Client {
    pub handle: Arc<ClientHandle>,
    pub worker: usize,
    pub db: usize,
    pub proto: Proto,
    pub authenticated: bool,
    /// The user the connection runs as (None: `default`).
    pub user: Option<Arc<crate::services::acl::User>>,
    /// The user's rules as last read, and the registry's `epoch` then (0: never read): a
    /// command first refreshes them when the epoch moved (see `exec::call`).
    pub perms: Option<Arc<crate::services::acl::Rules>>,
    pub acl_epoch: u64,
    /// A script's client: the connection that runs the script (ACL LOG shows it).
    pub acl_origin: Option<Arc<ClientHandle>>,
    /// The last command found memory over `maxmemory` with nothing left to evict (Redis's
    /// `pre_command_oom_state`): a script it runs may not grow memory.
    pub oom_at_start: bool,
    /// A script declared `allow-oom`.
    pub allow_oom: bool,
    pub multi: Option<MultiState>,
    pub watch: Option<WatchState>,
    pub reply_mode: ReplyMode,
    pub no_touch: bool,
    /// CLIENT CAPA redirect (Valkey 8): on a replica, data commands answer `-REDIRECT
    /// master:port` instead of being served; READONLY (`read_only_mode`) lets reads through.
    pub capa_redirect: bool,
    pub read_only_mode: bool,
    /// ASKING: the next command (or the transaction) may run on a slot being imported.
    pub asking: bool,
    /// Cluster mode: the slot of the keys of the command running (a script's own commands
    /// must stay in it unless the script may cross slots).
    pub cluster_slot: Option<usize>,
    pub cross_slot_ok: bool,
    /// Close once the pending replies are written (QUIT, protocol error).
    pub close_after_reply: bool,
    /// The slot migration this connection brings in (the source's link to this target).
    pub import: Option<std::sync::Arc<crate::services::cluster::migration::Job>>,
    /// SHUTDOWN asked; the network layer acts on it.
    pub shutdown: Option<crate::exec::ShutdownMode>,
    /// True while EXEC runs this client's queued commands: blocking commands must not block.
    pub in_exec: bool,
    /// The AOF loader replaying logged commands (runs while the server is loading).
    pub replaying: bool,
    /// The effects of the transaction EXEC is running, published together at its end
    /// (wrapped in MULTI/EXEC when there are several, as Redis propagates them).
    pub exec_effects: Vec<super::Effect>,
    /// Set by a blocking command that has to wait (see `server::blocking`).
    pub blocked: Option<crate::exec::blocking::BlockRequest>,
    /// The wait this client is suspended in.
    pub waiting: Option<Arc<crate::exec::blocking::Waiter>>,
    /// (db, key) made ready inside a transaction, served when EXEC ends.
    pub ready: Vec<(usize, Vec<u8>)>,
    /// How a waiter wakes this client's worker (set by the event loop).
    pub wake: Option<crate::exec::blocking::WakeFn>,
    /// When the previous command of the current pipelined batch ended: the next one's start,
    /// so a pipeline reads the clock once per command, not twice. The session clears it
    /// between batches.
    pub clock: Option<quanta::Instant>,
    /// `Command::id + 1` of the last top-level command this client ran by name (0: none), tried
    /// first when resolving the next request: pipelines repeat one command, and comparing a
    /// name costs less than hashing it.
    pub memo_cmd: usize,
    /// The time every command of a running script sees (unix ms): a script is one instant,
    /// as in Redis 7.2, so no key expires half-way through it.
    pub fixed_ms: Option<i64>,
    /// The instant TIME answers inside EXEC and scripts (unix µs): the outermost command's
    /// start, as Redis's cached time.
    pub fixed_us: Option<i64>,
    /// The client a script's commands run as (XREAD … BLOCK refuses it, as Redis does).
    pub in_script: bool,
    /// Pub/Sub subscriptions and the mailbox messages arrive in (None: not subscribed).
    pub subs: Option<Box<Subs>>,
    /// The command's reply is a push (the (un)subscribe family): CLIENT REPLY OFF keeps it.
    pub push_reply: bool,
    /// MONITOR: the mailbox every command's line is delivered to.
    pub monitor: Option<Arc<Mailbox>>,
    /// What a replica said with REPLCONF before its PSYNC.
    pub repl_hs: Option<Box<Handshake>>,
    /// This connection is a replica of this server (it ran SYNC or PSYNC): its commands are
    /// its ACKs, never answered (`call::replica_misuse` for anything else).
    pub replica: bool,
    /// Re-running a command after its wait (a blocking retry, a CLIENT PAUSE): MONITOR
    /// showed it already.
    pub retrying: bool,
    /// Microseconds the command now blocked ran before it blocked: the slow log records it
    /// once the wait ends, as Redis reports a blocking command only after it is unblocked.
    pub blocked_us: u64,
    /// The bytes of the request being run, as they came over the wire (COMMANDLOG's
    /// large-request; 0 for a script's commands).
    pub req_bytes: u64,
    /// Where the reply to the request being run starts in the output (COMMANDLOG's
    /// large-reply: a transaction's commands count from its EXEC's start, as Valkey's).
    pub reply_mark: usize,
    /// CLIENT TRACKING ON: the client's settings.
    pub tracking: Option<Arc<Tracker>>,
    /// CLIENT CACHING YES/NO was given for the next command (or transaction).
    pub caching: bool,
    /// Keys (and who modified them) a running transaction or script has modified, for the
    /// BCAST clients once it ends.
    pub bcast_batch: Batch,
    /// SCRIPT DEBUG SYNC: this client's next EVAL runs under the Lua debugger.
    pub lua_debug: bool,
    /// EVAL asked for a debugging session: the worker hands the connection, with this
    /// command, to a thread of its own (`server::debugging`) and stops reading it.
    pub ldb_request: Option<Vec<Vec<u8>>>,
    /// On that thread: the connection the debugger talks over while the EVAL runs.
    pub ldb_wire: Option<Box<dyn DebugWire>>,
}

/// The connection of a Lua debugging session, in blocking form (`scripting::ldb` uses it from
/// inside the script's line hook, as Redis's debugger uses its client's socket).
pub trait DebugWire: Send {
    /// Appends what the client sent next to `buf`, waiting for it; 0 when it has gone.
    fn read(&mut self, buf: &mut Vec<u8>) -> std::io::Result<usize>;
    /// Writes `bytes` whole (an error: the client does not read, or has gone).
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()>;
    /// The session is over: what ends the protocol (TLS's close alert) goes out.
    fn finish(&mut self);
}

impl Client {
    /// Every subscription of the client ends, without confirmations, and MONITOR mode with
    /// them (RESET, disconnect).
    pub fn unsubscribe_all(&mut self, ps: &crate::services::pubsub::PubSub) {
        use crate::services::pubsub::Kind;
        if let Some(mb) = self.monitor.take() {
            ps.remove_monitor(&mb);
            self.handle.monitor.store(false, std::sync::atomic::Ordering::Relaxed);
        }
        let Some(mut subs) = self.subs.take() else { return };
        for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
            for name in std::mem::take(subs.set(kind)) {
                ps.remove(kind, &name, &subs.mailbox);
            }
        }
        subs.show();
    }
}

impl Client {
    pub fn new(handle: Arc<ClientHandle>, worker: usize, needs_auth: bool) -> Client {
        Client {
            handle,
            worker,
            db: 0,
            proto: Proto::Resp2,
            authenticated: !needs_auth,
            user: None,
            perms: None,
            acl_epoch: 0,
            acl_origin: None,
            oom_at_start: false,
            allow_oom: false,
            multi: None,
            watch: None,
            reply_mode: ReplyMode::On,
            no_touch: false,
            capa_redirect: false,
            read_only_mode: false,
            asking: false,
            cluster_slot: None,
            cross_slot_ok: true,
            close_after_reply: false,
            import: None,
            shutdown: None,
            in_exec: false,
            exec_effects: Vec::new(),
            replaying: false,
            blocked: None,
            waiting: None,
            ready: Vec::new(),
            wake: None,
            clock: None,
            memo_cmd: 0,
            fixed_ms: None,
            fixed_us: None,
            in_script: false,
            subs: None,
            push_reply: false,
            monitor: None,
            repl_hs: None,
            replica: false,
            retrying: false,
            blocked_us: 0,
            req_bytes: 0,
            reply_mark: 0,
            tracking: None,
            caching: false,
            bcast_batch: Vec::new(),
            lua_debug: false,
            ldb_request: None,
            ldb_wire: None,
        }
    }

    pub fn id(&self) -> u64 {
        self.handle.id
    }

    /// Closes connection `h`: another client's at once, this one's after its reply (CLIENT
    /// KILL, ACL DELUSER …).
    pub fn close(&mut self, h: &ClientHandle) {
        if h.id == self.id() {
            self.close_after_reply = true;
        } else {
            h.kill();
        }
    }

    /// The name of the user the connection runs as.
    pub fn user_name(&self) -> Vec<u8> {
        self.user.as_ref().map_or_else(|| b"default".to_vec(), |u| u.name.clone())
    }

    /// Runs as `user` from now on (AUTH, HELLO AUTH; None: `default`, as RESET does).
    pub fn set_user(&mut self, user: Option<Arc<crate::services::acl::User>>) {
        *self.handle.user.lock() = user.clone();
        self.perms = None;
        self.acl_epoch = 0;
        self.user = user;
    }

    /// Forgets the shard channels the server unsubscribed this client from (their slot left
    /// the node) before its next command is judged, as Redis drops them at once; a client
    /// left with no subscription leaves the subscribed state.
    #[inline]
    pub fn reconcile_subs(&mut self) {
        if let Some(s) = self.subs.as_mut() {
            if s.mailbox.dropped_pending.load(std::sync::atomic::Ordering::Acquire) {
                s.reconcile();
                if s.total() == 0 && s.mailbox.is_empty() {
                    self.subs = None;
                }
            }
        }
    }

    /// In RESP2 Pub/Sub mode: only the (un)subscribe commands, PING, QUIT and RESET run.
    #[inline]
    pub fn resp2_subscribed(&self) -> bool {
        self.proto == Proto::Resp2 && self.subs.as_ref().is_some_and(|s| s.total() > 0)
    }

    /// After each top-level command: messages the client sent itself follow the reply, and
    /// CLIENT CACHING lapses (it covers the next command, or the next transaction; any CLIENT
    /// subcommand keeps it, as in Redis).
    #[inline]
    pub fn after_command(&mut self, name: &[u8], out: &mut Vec<u8>) {
        if self.subs.is_some() {
            self.take_messages(out);
        }
        if self.caching && self.multi.is_none() && !name.eq_ignore_ascii_case(b"client") {
            self.caching = false;
        }
    }

    /// Moves messages waiting for this client (published by itself, or arrived while its
    /// command ran) behind its replies; forgets the subscription state once it is empty.
    pub fn take_messages(&mut self, out: &mut Vec<u8>) {
        if let Some(s) = self.subs.as_mut() {
            s.mailbox.take_into(out);
            s.reconcile();
            if s.total() == 0 {
                self.subs = None;
            }
        }
    }
}
