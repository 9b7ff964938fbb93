//! The server's shared state ([`Server`]): configuration, keyspace, command table, clients,
//! statistics and the clock every command reads.

use super::client;
use super::{CommandTable, Effect};
use crate::config::Config;
use crate::engine::Keyspace;
use crate::lockorder::{rank, Mutex};
use crate::services::clock::{unix_ms, Clock};
use crate::services::lazyfree;
use crate::services::stats;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShutdownMode {
    Default,
    NoSave,
    Save,
}

/// Totals at the last sampling instant and the rates computed then (INFO instantaneous_*).
#[derive(Clone, Copy)]
struct Sample {
    at: Instant,
    ops: u64,
    cycles: u64,
    us: u64,
    ops_per_sec: u64,
    cycles_per_sec: u64,
    us_per_cycle: u64,
    net_in: u64,
    net_out: u64,
    repl_in: u64,
    repl_out: u64,
    /// Network bytes per second, in and out, and of them the replication links'.
    in_per_sec: f64,
    out_per_sec: f64,
    repl_in_per_sec: f64,
    repl_out_per_sec: f64,
}

impl Default for Sample {
    fn default() -> Sample {
        Sample {
            at: Instant::now(),
            ops: 0,
            cycles: 0,
            us: 0,
            ops_per_sec: 0,
            cycles_per_sec: 0,
            us_per_cycle: 0,
            net_in: 0,
            net_out: 0,
            repl_in: 0,
            repl_out: 0,
            in_per_sec: 0.0,
            out_per_sec: 0.0,
            repl_in_per_sec: 0.0,
            repl_out_per_sec: 0.0,
        }
    }
}

/// A consumer of write effects (AOF, replicas, tests), given with the snapshot epoch the
/// writes come after (`engine::Locks::seen_epoch`).
pub type EffectSink = Box<dyn Fn(&[Effect], u64) + Send + Sync>;

/// What installs FUNCTION libraries found by a load (see `Server::functions_loader`).
pub type FunctionsLoader = fn(&Server, &[Vec<u8>], bool) -> Result<(), crate::persist::PersistError>;

/// Why writes are paused (Redis's pause purposes): each ends on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PauseBy {
    Client = 0,
    Shutdown = 1,
    Failover = 2,
    /// An atomic slot migration's source, while the target takes the slots over.
    SlotMigration = 3,
}

pub struct Server {
    pub config: Config,
    pub ks: Keyspace,
    pub table: CommandTable,
    /// Users, permissions and the ACL log.
    pub acl: crate::services::acl::Acl,
    /// The TLS configuration new TLS connections start from (`tls-*`).
    pub tls: crate::services::tls::TlsContext,
    /// maxmemory eviction statistics.
    pub evict: crate::services::evict::Evict,
    pub clients: client::Registry,
    pub stats: stats::Stats,
    /// Stuck-worker reports (`daemons::watchdog`, its figures in `services::watchdog`).
    pub watchdog: crate::services::watchdog::Watchdog,
    pub lazyfree: lazyfree::LazyFree,
    pub threads: usize,
    pub started: Instant,
    pub clock: Clock,
    pub start_ms: i64,
    pub run_id: String,
    /// The replication ID (INFO master_replid; DEBUG CHANGE-REPL-ID makes a new one).
    pub replid: Mutex<String, { rank::LEAF }>,
    /// The TCP port listened on (CONFIG SET port changes it).
    pub tcp_port: std::sync::atomic::AtomicU16,
    pub executable: String,
    pub active_expire: AtomicBool,
    /// DEBUG SET-SKIP-CHECKSUM-VALIDATION: RESTORE does not check the payload's CRC-64.
    pub skip_checksum: AtomicBool,
    /// DEBUG PAUSE-CRON: the workers' periodic tasks (active expiry, timeouts) are stopped.
    pub cron_paused: AtomicBool,
    /// DEBUG SLEEP's stop of every worker.
    pub freeze: crate::services::freeze::Freeze,
    /// MIGRATE's open connections to its targets.
    pub migrate_sockets: crate::services::migrate::MigrateSockets,
    /// Allocated bytes once the server was up, and the highest seen since (MEMORY STATS).
    pub startup_allocated: std::sync::atomic::AtomicU64,
    pub peak_allocated: std::sync::atomic::AtomicU64,
    /// DEBUG SET-DISABLE-DENY-SCRIPTS (kept for scripting: `noscript` commands in scripts).
    pub deny_scripts_disabled: AtomicBool,
    /// Pub/Sub channels and patterns, and the workers' message posts.
    pub pubsub: crate::services::pubsub::PubSub,
    /// Client-side caching: the tracking table, BCAST prefixes, tracking clients.
    pub tracking: crate::services::tracking::Tracking,
    /// The script cache and the running script's state.
    pub scripts: crate::services::scripts::Scripts,
    /// Loads FUNCTION libraries found in an RDB file or AOF (the scripting layer, above this
    /// one, registers it when the server starts).
    pub functions_loader: std::sync::OnceLock<FunctionsLoader>,
    pub lastsave: AtomicI64,
    /// RDB snapshots: SAVE/BGSAVE state and INFO persistence figures.
    pub persistence: crate::services::persistence::Persistence,
    /// Redis Cluster: this node's view and the per-slot routes (disabled: standalone).
    pub cluster: crate::services::cluster::Cluster,
    /// Replicas, the replication stream and its backlog.
    pub repl: crate::services::replication::Replication,
    pub shutting_down: AtomicBool,
    /// A shutdown waits for lagging replicas until this unix ms (0: none; INFO's
    /// `shutdown_in_milliseconds`, SHUTDOWN ABORT).
    pub shutdown_deadline_ms: AtomicI64,
    /// SHUTDOWN ABORT asked the waiting shutdown to stop.
    pub shutdown_abort: AtomicBool,
    /// A signal (SIGTERM, SIGINT) asked for a shutdown that has not begun (Redis's
    /// `shutdown_asap`): acted on while the cron runs (DEBUG PAUSE-CRON holds it back), and
    /// SHUTDOWN ABORT clears it.
    pub shutdown_asap: AtomicBool,
    /// The SHUTDOWN command asked the main thread to wait for replicas first (and the
    /// clients to answer if the shutdown is aborted or fails).
    pub shutdown_callers:
        crate::lockorder::Mutex<Vec<std::sync::Arc<super::client::ClientHandle>>, { crate::lockorder::rank::LEAF }>,
    /// Workers run the io_uring backend (INFO's multiplexing_api).
    pub io_uring: AtomicBool,
    /// SLOWLOG.
    /// SLOWLOG and COMMANDLOG.
    pub commandlog: crate::services::commandlog::CommandLog,
    /// The latency monitor's events (LATENCY LATEST …).
    pub latency: crate::services::latency::Monitor,
    /// The pause in force (CLIENT PAUSE, SHUTDOWN's wait for replicas, FAILOVER, combined):
    /// its end (unix ms; 0 when none), whether it holds back every command or only writes,
    /// and the clients postponed by it.
    pub pause_until: AtomicI64,
    pub pause_all: AtomicBool,
    /// When the last pause of everything ends (an `ALL` pause shorter than a write pause of
    /// another purpose leaves the write pause alone once it is over).
    pause_all_until: AtomicI64,
    pub paused: Mutex<Vec<std::sync::Arc<super::blocking::Waiter>>, { rank::WAITS }>,
    /// Each purpose's own pause (end, all), as Redis keeps them apart: CLIENT UNPAUSE ends
    /// the client's, not a failover's.
    pause_by: Mutex<[(i64, bool); 4], { rank::LEAF }>,
    /// Clients suspended in a blocking command (INFO blocked_clients).
    pub blocked_clients: std::sync::atomic::AtomicUsize,
    /// Time of the last INFO stats reset etc. are derived from these.
    effects_on: AtomicBool,
    /// (time of the last sample, commands then, ops/sec computed) for INFO.
    ops_sample: Mutex<Sample, { rank::LEAF }>,
    sink: Mutex<Option<EffectSink>, { rank::EFFECTS }>,
}

impl Server {
    /// An import began here: this node's replicas are told (Valkey's target passes the
    /// ESTABLISH on), so they hide the slots' keys as it does until the import ends.
    pub fn slot_import_began(&self, job: &crate::services::cluster::migration::Job) {
        let argv = job.establish_argv();
        let args: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
        self.repl.feed_command(&self.reach(), &args);
    }

    /// An import ended (once per job): its replicas learn how, in Valkey's FINISH.
    pub fn slot_import_ended(&self, job: &crate::services::cluster::migration::Job) {
        if !job.step().finished() || job.announced.swap(true, Ordering::AcqRel) {
            return;
        }
        let argv = job.finish_argv();
        let args: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
        self.repl.feed_command(&self.reach(), &args);
    }

    pub fn new(config: Config, table: CommandTable, threads: usize, tcp_port: u16) -> Server {
        let dbs = config.int(crate::config::p::DATABASES).max(1) as usize;
        let run_id: String = {
            use rand::Rng;
            let mut r = rand::thread_rng();
            (0..40).map(|_| char::from_digit(r.gen_range(0..16), 16).unwrap()).collect()
        };
        let now = unix_ms();
        let persistence = crate::services::persistence::Persistence::new();
        let acl = {
            let env = crate::services::acl::RuleEnv {
                table: &table,
                all_channels_default: config.text(crate::config::p::ACL_PUBSUB_DEFAULT) == "allchannels",
            };
            let acl = crate::services::acl::Acl::new(&env);
            acl.set_default_password(&env, config.text(crate::config::p::REQUIREPASS).as_bytes());
            acl
        };
        Server {
            acl,
            tls: Default::default(),
            evict: Default::default(),
            stats: stats::Stats::new(threads, table.all.len()),
            watchdog: crate::services::watchdog::Watchdog::new(threads),
            lazyfree: lazyfree::LazyFree::default(),
            table,
            ks: Keyspace::new(dbs),
            clients: client::Registry::new(),
            threads,
            started: Instant::now(),
            clock: Clock::new(),
            start_ms: now,
            replid: Mutex::new(run_id.clone()),
            run_id,
            tcp_port: std::sync::atomic::AtomicU16::new(tcp_port),
            executable: std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default(),
            active_expire: AtomicBool::new(true),
            skip_checksum: AtomicBool::new(false),
            cron_paused: AtomicBool::new(false),
            freeze: Default::default(),
            migrate_sockets: Default::default(),
            startup_allocated: Default::default(),
            peak_allocated: Default::default(),
            deny_scripts_disabled: AtomicBool::new(false),
            pubsub: crate::services::pubsub::PubSub::new(threads),
            tracking: Default::default(),
            scripts: crate::services::scripts::Scripts::new(persistence.gates.clone()),
            functions_loader: std::sync::OnceLock::new(),
            lastsave: AtomicI64::new(now / 1000),
            persistence,
            shutting_down: AtomicBool::new(false),
            shutdown_deadline_ms: AtomicI64::new(0),
            shutdown_abort: AtomicBool::new(false),
            shutdown_asap: AtomicBool::new(false),
            shutdown_callers: crate::lockorder::Mutex::new(Vec::new()),
            io_uring: AtomicBool::new(false),
            blocked_clients: Default::default(),
            pause_until: AtomicI64::new(0),
            pause_all: AtomicBool::new(false),
            pause_all_until: AtomicI64::new(0),
            paused: Mutex::new(Vec::new()),
            pause_by: Mutex::new([(0, false); 4]),
            commandlog: Default::default(),
            latency: Default::default(),
            effects_on: AtomicBool::new(false),
            sink: Mutex::new(None),
            cluster: crate::services::cluster::Cluster::new(config.flag(crate::config::p::CLUSTER_ENABLED)),
            repl: Default::default(),
            ops_sample: Mutex::new(Sample { at: Instant::now(), ..Sample::default() }),
            config,
        }
    }

    /// What ACL rules are read against: the command table and `acl-pubsub-default`.
    pub fn acl_env(&self) -> crate::services::acl::RuleEnv<'_, super::table::Run> {
        crate::services::acl::RuleEnv {
            table: &self.table,
            all_channels_default: self.config.text(crate::config::p::ACL_PUBSUB_DEFAULT) == "allchannels",
        }
    }

    /// Wall-clock milliseconds: the time base of TTLs.
    #[inline]
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// What delivering to clients needs (tracking's invalidations, keyspace events).
    pub fn reach(&self) -> crate::services::pubsub::Reach<'_> {
        crate::services::pubsub::Reach { hot: &self.config.hot, clients: &self.clients, pubsub: &self.pubsub }
    }

    /// Seconds since start plus `LRU_BASE`, the clock OBJECT IDLETIME is measured in.
    #[inline]
    pub fn lru_clock(&self, now_ms: i64) -> u32 {
        crate::engine::value::LRU_BASE + ((now_ms - self.start_ms).max(0) / 1000) as u32
    }

    pub fn effects_enabled(&self) -> bool {
        self.effects_on.load(Ordering::Relaxed)
    }

    /// Installs the consumer of write effects (persistence and replication will).
    pub fn set_effect_sink(&self, sink: Option<EffectSink>) {
        let mut g = self.sink.lock();
        *g = sink;
        self.effects_on.store(g.is_some() || self.repl.on() || self.cluster.migrations.exporting(), Ordering::Release);
    }

    /// Effects are wanted while the AOF sink is installed, the replication backlog exists or
    /// a slot migration copies the writes to its slots.
    pub fn refresh_effects(&self) {
        let g = self.sink.lock();
        self.effects_on.store(g.is_some() || self.repl.on() || self.cluster.migrations.exporting(), Ordering::Release);
    }

    /// A pause for `by` at `now`: holds back writes (or, with `all`, every command) until
    /// `until`. A pause of the same purpose still on keeps the later end and the wider kind,
    /// as in Redis; one that has ended leaves nothing behind (a `WRITE` pause after an `ALL`
    /// one that ran out holds back writes only). What is in force is the widest of them all.
    pub fn pause(&self, by: PauseBy, now: i64, until: i64, all: bool) {
        let mut p = self.pause_by.lock();
        let e = &mut p[by as usize];
        if e.0 == 0 || now >= e.0 {
            *e = (0, false);
        }
        e.0 = e.0.max(until);
        e.1 |= all;
        self.publish_pause(&p, now);
    }

    fn publish_pause(&self, p: &[(i64, bool); 4], now: i64) {
        let on = || p.iter().filter(|(until, _)| *until != 0 && now < *until);
        let all_until = on().filter(|e| e.1).map(|e| e.0).max().unwrap_or(0);
        self.pause_all_until.store(all_until, Ordering::Relaxed);
        self.pause_until.store(on().map(|e| e.0).max().unwrap_or(0), Ordering::Relaxed);
        self.pause_all.store(all_until != 0, Ordering::Relaxed);
    }

    /// When a postponed command should look again: the end of the pause of everything if it
    /// ends first (a read may run then; a write is held again if a write pause remains).
    pub fn pause_retry_at(&self, now: i64) -> i64 {
        let all = self.pause_all_until.load(Ordering::Relaxed);
        let until = self.pause_until.load(Ordering::Relaxed);
        if all > now && all < until {
            all
        } else {
            until
        }
    }

    /// Some(all) while a pause is on at `now`.
    pub fn pause_active(&self, now: i64) -> Option<bool> {
        let until = self.pause_until.load(Ordering::Relaxed);
        (until != 0 && now < until)
            .then(|| self.pause_all.load(Ordering::Relaxed) && now < self.pause_all_until.load(Ordering::Relaxed))
    }

    /// Writes are held back now (so expiry must not delete keys either, as in Redis).
    pub fn writes_paused(&self) -> bool {
        self.pause_until.load(Ordering::Relaxed) != 0 && self.pause_active(self.now_ms()).is_some()
    }

    /// Ends `by`'s pause (CLIENT UNPAUSE: the client's); every postponed client tries its
    /// command again (held back again if another pause still holds it).
    pub fn unpause(&self, by: PauseBy) {
        {
            let mut p = self.pause_by.lock();
            p[by as usize] = (0, false);
            self.publish_pause(&p, self.now_ms());
        }
        for w in std::mem::take(&mut *self.paused.lock()) {
            if w.finish(super::blocking::WaitState::Retry) {
                self.blocked_clients.fetch_sub(1, Ordering::Relaxed);
                (w.wake)();
            }
        }
    }

    /// Commands per second over the last sampling period (sampled by the cron of worker 0).
    pub fn instantaneous_ops(&self) -> u64 {
        self.ops_sample.lock().ops_per_sec
    }

    /// (event-loop rounds per second, µs of work per round) over the last sampling period.
    pub fn instantaneous_eventloop(&self) -> (u64, u64) {
        let s = self.ops_sample.lock();
        (s.cycles_per_sec, s.us_per_cycle)
    }

    /// (input, output) KiB per second over the last sampling period (INFO
    /// instantaneous_input_kbps / instantaneous_output_kbps).
    pub fn instantaneous_kbps(&self) -> (f64, f64) {
        let s = self.ops_sample.lock();
        (s.in_per_sec / 1024.0, s.out_per_sec / 1024.0)
    }

    /// The same of the replication links (instantaneous_input_repl_kbps /
    /// instantaneous_output_repl_kbps).
    pub fn instantaneous_repl_kbps(&self) -> (f64, f64) {
        let s = self.ops_sample.lock();
        (s.repl_in_per_sec / 1024.0, s.repl_out_per_sec / 1024.0)
    }

    /// Before an answer about the clients (INFO, CLIENT LIST): lets every other worker run two
    /// rounds of its loop, so what clients sent before this command — a request already in
    /// another worker's socket — has been taken and run, as Redis's one thread takes every
    /// ready socket before the next. Waits at most 20 ms (a worker busy with a long command,
    /// or frozen by DEBUG SLEEP, is not waited for longer), not for a worker that is itself
    /// waiting here (two INFOs on two workers would wait for each other), and only outside
    /// transactions and scripts (which may hold what another worker needs for its round).
    pub fn settle_peers(&self, me: usize) {
        let n = self.stats.workers.len() - 1; // the last entry is the background tasks'
        if n < 2 || me >= n {
            return;
        }
        let beat = |w: usize| &self.stats.workers[w].beat;
        let cycles = |w: usize| self.stats.workers[w].counters.eventloop_cycles.load(Ordering::Acquire);
        beat(me).settling.store(true, Ordering::Release);
        let before: Vec<u64> = (0..n).map(cycles).collect();
        for w in (0..n).filter(|&w| w != me) {
            crate::services::pubsub::wake_now(&self.pubsub, w);
        }
        let deadline = Instant::now() + std::time::Duration::from_millis(20);
        for w in (0..n).filter(|&w| w != me) {
            // Two rounds, and then as many as it takes to read what had already arrived
            // (a big request comes a buffer a round on io_uring; Redis reads a big argument
            // whole before it serves the next client).
            while (cycles(w) < before[w] + 2 || beat(w).input_pending.load(Ordering::Acquire))
                && Instant::now() < deadline
                && !beat(w).settling.load(Ordering::Acquire)
            {
                if cycles(w) == before[w] + 1 {
                    // The round that ended may have begun before this command arrived.
                    crate::services::pubsub::wake_now(&self.pubsub, w);
                }
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
        beat(me).settling.store(false, Ordering::Release);
    }

    /// Called periodically: updates the instantaneous figures (at most once a second).
    pub fn sample_ops(&self) {
        let ops = self.stats.sum(|c| &c.commands);
        let cycles = self.stats.sum(|c| &c.eventloop_cycles);
        let us = self.stats.sum(|c| &c.eventloop_us);
        let net_in = self.stats.net_input();
        let net_out = self.stats.net_output();
        let repl_in = self.stats.sum(|c| &c.net_repl_input_bytes);
        let repl_out = self.stats.sum(|c| &c.net_repl_output_bytes);
        let mut s = self.ops_sample.lock();
        let el = s.at.elapsed().as_secs_f64();
        if el >= 1.0 {
            let d_cycles = cycles.saturating_sub(s.cycles);
            s.ops_per_sec = (ops.saturating_sub(s.ops) as f64 / el) as u64;
            // Per event loop, as Redis's one loop reports it: idle, each worker turns `hz`
            // times a second for its cron, and a sum would read as `hz` × workers.
            let loops = self.stats.workers.len().max(1) as f64;
            s.cycles_per_sec = (d_cycles as f64 / el / loops) as u64;
            s.us_per_cycle = us.saturating_sub(s.us).checked_div(d_cycles).unwrap_or(0);
            s.in_per_sec = net_in.saturating_sub(s.net_in) as f64 / el;
            s.out_per_sec = net_out.saturating_sub(s.net_out) as f64 / el;
            s.repl_in_per_sec = repl_in.saturating_sub(s.repl_in) as f64 / el;
            s.repl_out_per_sec = repl_out.saturating_sub(s.repl_out) as f64 / el;
            *s = Sample { at: Instant::now(), ops, cycles, us, net_in, net_out, repl_in, repl_out, ..*s };
        }
    }

    /// Hands effects to the consumer; called with the writer's shard locks still held, so
    /// effects touching the same keys arrive in the order the writes happened. `epoch`: the
    /// snapshot epoch the writes come after (`Locks::seen_epoch`, or the locked shard's
    /// `saved_epoch`): an AOF rewrite running meanwhile sends what its base already holds to
    /// the old incremental file.
    pub fn publish_effects(&self, effects: &[Effect], epoch: u64) {
        // A script's `redis.set_repl` may have sent some to one side only (rare: a copy each).
        if effects.iter().any(|e| e.to != super::Propagate::Both) {
            let aof = Effect::for_side(effects, super::Propagate::Aof);
            let repl = Effect::for_side(effects, super::Propagate::Replicas);
            let g = self.sink.lock();
            if let (Some(s), false) = (g.as_ref(), aof.is_empty()) {
                s(&aof, epoch);
            }
            if self.repl.on() && !repl.is_empty() {
                self.repl.feed(&self.reach(), &repl);
            }
            if self.cluster.migrations.exporting() {
                self.cluster.migrations.capture(&repl, |argv| self.effect_slot(argv));
            }
            return;
        }
        let g = self.sink.lock();
        if let Some(s) = g.as_ref() {
            s(effects, epoch);
        }
        // Under the same lock: the replication stream and the AOF see one order.
        if self.repl.on() {
            self.repl.feed(&self.reach(), effects);
        }
        if self.cluster.migrations.exporting() {
            self.cluster.migrations.capture(effects, |argv| self.effect_slot(argv));
        }
    }

    /// The slot of a propagated command's keys (cluster mode: all in one), None if it names
    /// none.
    fn effect_slot(&self, argv: &[Vec<u8>]) -> Option<usize> {
        let args: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
        let mut cmd = self.table.lookup(args.first()?)?;
        if cmd.is_container {
            cmd = cmd.subcommand(args.get(1)?)?;
        }
        let mut pos: smallvec::SmallVec<[usize; 8]> = smallvec::SmallVec::new();
        crate::cmdspec::keyspec::key_positions(&cmd.key_specs, &args, &mut pos).ok()?;
        let k = args.get(*pos.first()?)?;
        Some(crate::engine::slot::key_slot(k))
    }
}

/// Eviction's view of the server: what it reads, and the call path's consequences of an
/// evicted key.
impl crate::services::evict::Host for Server {
    fn keyspace(&self) -> &crate::engine::Keyspace {
        &self.ks
    }

    fn hot(&self) -> &crate::config::Hot {
        &self.config.hot
    }

    fn state(&self) -> &crate::services::evict::Evict {
        &self.evict
    }

    fn clients(&self) -> &crate::services::clients::Registry {
        &self.clients
    }

    fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    fn lru_clock(&self, now_ms: i64) -> u32 {
        Server::lru_clock(self, now_ms)
    }

    fn not_counted(&self) -> u64 {
        self.repl.replicas_share() + crate::services::clients::in_transit()
    }

    fn writes_paused(&self) -> bool {
        Server::writes_paused(self)
    }

    fn replica_ignores_maxmemory(&self) -> bool {
        self.repl.upstream.following() && self.config.flag(crate::config::p::REPLICA_IGNORE_MAXMEMORY)
    }

    fn client_line(&self, c: &crate::services::clients::ClientHandle, now_ms: i64) -> String {
        crate::services::clients::info_line(&self.table, c, now_ms, None)
    }

    fn free_value(&self, obj: crate::engine::Obj, lazy: bool) {
        if lazy {
            self.lazyfree.free(obj);
        } else {
            drop(obj);
        }
    }
    fn evicted(&self, db: usize, key: &[u8], lazy: bool, saved_epoch: u64) {
        crate::services::notify::raise(&self.reach(), crate::services::notify::EVICTED, "evicted", db, key);
        if self.tracking.on() {
            self.tracking.modified(&self.reach(), &[(key.into(), true)], 0, None);
        }
        if self.effects_enabled() {
            let cmd: &[u8] = if lazy { b"UNLINK" } else { b"DEL" };
            self.publish_effects(
                &[super::Effect::new(db, vec![cmd.to_vec(), key.to_vec()])],
                self.ks.snapshots.seen(saved_epoch),
            );
        }
    }
}
