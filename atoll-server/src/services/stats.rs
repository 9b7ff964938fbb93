//! The server's statistics, kept per worker thread so counting a command never bounces a shared
//! cache line between cores; INFO sums the workers.

use std::sync::atomic::{AtomicU64, Ordering};

/// Adds to a counter that only one thread writes (its worker): a plain load and store, no
/// locked read-modify-write on the command path. Readers (INFO) may see it a moment late;
/// a concurrent CONFIG RESETSTAT may be overwritten by one in-flight update, which is harmless.
#[inline]
pub fn bump(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

/// Counters of one worker (or of the background tasks). Only its owner increments them.
#[derive(Default)]
#[repr(align(128))]
pub struct Counters {
    pub commands: AtomicU64,
    pub connections: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub net_input_bytes: AtomicU64,
    pub net_output_bytes: AtomicU64,
    /// Replication traffic, which Redis keeps out of the two above: what a replica reads from
    /// its master (the snapshot and the stream; the background counters, from the link
    /// thread) and what a master writes to its replicas (the workers owning those
    /// connections).
    pub net_repl_input_bytes: AtomicU64,
    pub net_repl_output_bytes: AtomicU64,
    /// Chunks of input received and reply writes (one per write or send call): Redis counts
    /// read events and `writeToClient` calls, which is the same one per request unpipelined.
    pub reads_processed: AtomicU64,
    pub writes_processed: AtomicU64,
    /// io_uring waits that let the kernel hold the wake-up for more requests (`Pacing`).
    pub batched_waits: AtomicU64,
    pub keyspace_hits: AtomicU64,
    pub keyspace_misses: AtomicU64,
    pub expired_keys: AtomicU64,
    /// Hash fields removed at their deadline (Valkey's INFO `expired_fields`).
    pub expired_fields: AtomicU64,
    pub expire_cycle_cpu_ms: AtomicU64,
    /// Expiry cycles that ran out of their time budget (INFO expired_time_cap_reached_count).
    pub expire_cycle_capped: AtomicU64,
    pub error_replies: AtomicU64,
    pub unexpected_error_replies: AtomicU64,
    pub dirty: AtomicU64,
    /// Event-loop rounds, and the time spent working in them (not waiting), in µs.
    pub eventloop_cycles: AtomicU64,
    pub eventloop_us: AtomicU64,
    /// INFO debug: ns spent making the AOF durable before replies (writes, `always`'s
    /// fsyncs) and in the cron; the longest round in µs, and the most commands a round ran.
    pub eventloop_aof_ns: AtomicU64,
    pub eventloop_cron_ns: AtomicU64,
    pub eventloop_max_us: AtomicU64,
    pub eventloop_max_cmds: AtomicU64,
}

/// Per-command counters (INFO commandstats).
#[derive(Default)]
pub struct CmdStat {
    pub calls: AtomicU64,
    pub usec: AtomicU64,
    pub rejected_calls: AtomicU64,
    pub failed_calls: AtomicU64,
    /// Latency histogram (`latency-tracking`), allocated at the first call.
    pub hist: super::latency::HistSlot,
}

/// What the watchdog reads of a worker (`daemons::watchdog`): relaxed stores by the worker, loads
/// by the watchdog, no lock on either side.
#[derive(Default)]
pub struct Beat {
    /// The server clock's ms of the worker's last sign of progress inside a round (the round's
    /// start, or a pass of the busy poll while a script runs); 0 between rounds.
    pub progress_ms: AtomicU64,
    /// The command last started (its table id + 1) and its client's id.
    pub cmd: std::sync::atomic::AtomicU32,
    pub client: AtomicU64,
    /// The worker is letting the others run their rounds before an INFO or CLIENT LIST
    /// (`settle_peers` in exec): others do not wait for it meanwhile.
    pub settling: std::sync::atomic::AtomicBool,
    /// The worker's last round read a full buffer from a socket: more input has likely
    /// arrived that it has not read yet (`Core::read_full`).
    pub input_pending: std::sync::atomic::AtomicBool,
}

impl Beat {
    /// A command starts (two relaxed stores on the worker's own line).
    #[inline]
    pub fn running(&self, cmd_id: usize, client: u64) {
        self.cmd.store(cmd_id as u32 + 1, Ordering::Relaxed);
        self.client.store(client, Ordering::Relaxed);
    }
}

pub struct WorkerStats {
    pub counters: Counters,
    pub beat: Beat,
    pub cmds: Box<[CmdStat]>,
    /// Error replies by error code (the first word), for INFO errorstats.
    pub errors: crate::lockorder::Mutex<std::collections::BTreeMap<String, u64>, { crate::lockorder::rank::LEAF }>,
    /// Sampled hottest keys (`hotkeys`).
    pub hot: super::hotkeys::HotKeys,
    /// This worker's part of a HOTKEYS session.
    pub session: super::hotkeys::WorkerSession,
}

impl WorkerStats {
    pub fn new(ncmds: usize) -> WorkerStats {
        WorkerStats {
            counters: Counters::default(),
            beat: Beat::default(),
            cmds: (0..ncmds).map(|_| CmdStat::default()).collect(),
            errors: Default::default(),
            hot: Default::default(),
            session: Default::default(),
        }
    }

    pub fn reset(&self) {
        let c = &self.counters;
        for a in [
            &c.commands,
            &c.connections,
            &c.rejected_connections,
            &c.net_input_bytes,
            &c.net_output_bytes,
            &c.net_repl_input_bytes,
            &c.net_repl_output_bytes,
            &c.reads_processed,
            &c.writes_processed,
            &c.batched_waits,
            &c.keyspace_hits,
            &c.keyspace_misses,
            &c.expired_keys,
            &c.expired_fields,
            &c.expire_cycle_cpu_ms,
            &c.expire_cycle_capped,
            &c.error_replies,
            &c.unexpected_error_replies,
            &c.eventloop_cycles,
            &c.eventloop_us,
            &c.eventloop_aof_ns,
            &c.eventloop_cron_ns,
            &c.eventloop_max_us,
            &c.eventloop_max_cmds,
        ] {
            a.store(0, Ordering::Relaxed);
        }
        for s in self.cmds.iter() {
            s.calls.store(0, Ordering::Relaxed);
            s.usec.store(0, Ordering::Relaxed);
            s.rejected_calls.store(0, Ordering::Relaxed);
            s.failed_calls.store(0, Ordering::Relaxed);
            s.hist.reset();
        }
        self.errors.lock().clear();
        self.hot.reset();
    }
}

pub struct Stats {
    /// One per worker, plus one at the end for background work (active expiry).
    pub workers: Box<[WorkerStats]>,
    /// Redis's `stat_expired_stale_perc`: a moving average (weight 0.05 per expiry cycle) of
    /// the share of sampled TTL keys found already expired, as f64 bits.
    expired_stale: AtomicU64,
    /// Redis 8.6's HOTKEYS session.
    pub hotkeys: super::hotkeys::Session,
}

impl Stats {
    pub fn new(workers: usize, ncmds: usize) -> Stats {
        Stats {
            workers: (0..=workers).map(|_| WorkerStats::new(ncmds)).collect(),
            expired_stale: AtomicU64::new(0),
            hotkeys: Default::default(),
        }
    }

    pub fn background(&self) -> &WorkerStats {
        self.workers.last().unwrap()
    }

    /// Sum of one counter over all workers.
    pub fn sum(&self, f: impl Fn(&Counters) -> &AtomicU64) -> u64 {
        self.workers.iter().map(|w| f(&w.counters).load(Ordering::Relaxed)).sum()
    }

    /// Bytes read from the network, replication links included (INFO total_net_input_bytes,
    /// which in Redis holds total_net_repl_input_bytes too).
    pub fn net_input(&self) -> u64 {
        self.sum(|c| &c.net_input_bytes) + self.sum(|c| &c.net_repl_input_bytes)
    }

    /// Bytes written to the network, replicas' streams included.
    pub fn net_output(&self) -> u64 {
        self.sum(|c| &c.net_output_bytes) + self.sum(|c| &c.net_repl_output_bytes)
    }

    /// The largest of the workers' values (INFO debug's maxima).
    pub fn max(&self, f: impl Fn(&Counters) -> &AtomicU64) -> u64 {
        self.workers.iter().map(|w| f(&w.counters).load(Ordering::Relaxed)).max().unwrap_or(0)
    }

    pub fn cmd_sum(&self, id: usize, f: impl Fn(&CmdStat) -> &AtomicU64) -> u64 {
        self.workers.iter().map(|w| f(&w.cmds[id]).load(Ordering::Relaxed)).sum()
    }

    pub fn errors(&self) -> std::collections::BTreeMap<String, u64> {
        let mut out = std::collections::BTreeMap::new();
        for w in self.workers.iter() {
            for (k, v) in w.errors.lock().iter() {
                *out.entry(k.clone()).or_insert(0) += v;
            }
        }
        out
    }

    /// Folds one expiry cycle's sample into `expired_stale_perc`; a cycle that found nothing
    /// to sample counts as 0 %, so the figure decays once the keyspace is clean (as Redis's).
    /// Workers' cycles may race here; a lost update only skips one step of the average.
    pub fn note_expiry_sample(&self, sampled: usize, expired: usize) {
        let cur = if sampled == 0 { 0.0 } else { expired as f64 / sampled as f64 };
        let old = f64::from_bits(self.expired_stale.load(Ordering::Relaxed));
        self.expired_stale.store((cur * 0.05 + old * 0.95).to_bits(), Ordering::Relaxed);
    }

    pub fn expired_stale_perc(&self) -> f64 {
        f64::from_bits(self.expired_stale.load(Ordering::Relaxed)) * 100.0
    }

    pub fn reset(&self) {
        self.expired_stale.store(0, Ordering::Relaxed);
        for w in self.workers.iter() {
            w.reset();
        }
    }
}

/// The allocator's (allocated, active, resident) bytes, refreshed now.
pub fn allocated_bytes() -> (u64, u64, u64) {
    use tikv_jemalloc_ctl::{epoch, stats};
    let _ = epoch::advance();
    // Allocated bytes are the counting allocator's (Redis's used_memory, what maxmemory holds
    // to); jemalloc's own statistic where that allocator is not installed (unit tests).
    let used = match crate::alloc::used_memory() {
        0 => stats::allocated::read().unwrap_or(0) as u64,
        n => n,
    };
    (used, stats::active::read().unwrap_or(0) as u64, stats::resident::read().unwrap_or(0) as u64)
}

/// jemalloc's `stats.allocated` (INFO `allocator_allocated`).
pub fn jemalloc_allocated() -> u64 {
    let _ = tikv_jemalloc_ctl::epoch::advance();
    tikv_jemalloc_ctl::stats::allocated::read().unwrap_or(0) as u64
}
