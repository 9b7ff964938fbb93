//! The state of persistence: the RDB snapshots' figures and gates (loading, a failed save)
//! and the append-only file's (the open log, its manifest, the rewrite's progress). What
//! drives them is the call path's `persistence` and `aof` modules (SAVE, BGSAVE,
//! appends) and `daemons::persistence` (the thread that saves and rewrites).

use super::gates::{GATE_LOADING, GATE_SAVE_FAILED};
use crate::lockorder::{rank, Mutex, RwLock};
use crate::persist::aof::{AofLog, Manifest};
use crate::persist::rdbfile;
use parking_lot::Condvar;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Default)]
pub struct Persistence {
    /// A snapshot (SAVE or BGSAVE) is being written.
    pub in_progress: AtomicBool,
    /// The running BGSAVE's start (unix ms).
    pub bgsave_started_ms: AtomicI64,
    pub last_bgsave_secs: AtomicI64,
    /// Unix ms of the last attempt, for retrying a failed save point after 5 s as Redis does.
    pub last_try_ms: AtomicI64,
    pub saves: AtomicU64,
    /// The dirty counter when the last successful snapshot began.
    pub dirty_at_save: AtomicU64,
    /// BGSAVE SCHEDULE (or BGSAVE inside EXEC): run on the persistence thread's next tick.
    pub scheduled: AtomicBool,
    /// The append-only file.
    pub aof: AofState,
    /// `GATE_LOADING` (a start-up load is running: commands without the `loading` flag get
    /// `-LOADING`) and `GATE_SAVE_FAILED` (the last SAVE/BGSAVE failed:
    /// `rdb_last_bgsave_status:err`, and `-MISCONF` for writes). One word, so the command path
    /// tests both with one load.
    pub gates: Arc<std::sync::atomic::AtomicU8>,
    pub loading_start_s: AtomicI64,
    pub loading_total_bytes: AtomicU64,
    /// Its progress (bytes read) and `key-load-delay`.
    pub loading: rdbfile::LoadHooks,
    /// The running save's progress (INFO `current_save_keys_*`, `current_cow_size`).
    pub progress: Arc<rdbfile::Progress>,
    /// `current_cow_size` of the last finished save (`rdb_last_cow_size`).
    pub last_cow_bytes: AtomicU64,
    pub last_load_keys_loaded: AtomicU64,
    pub last_load_keys_expired: AtomicU64,
    /// The background child writing a file now (0: none), BGSAVE's or the AOF rewrite's.
    pub child_pid: std::sync::atomic::AtomicU32,
    /// Background children started (INFO `total_forks`), and how long the last start took in
    /// µs (`latest_fork_usec`).
    pub children_started: AtomicU64,
    pub last_spawn_us: AtomicU64,
    /// A child started by the command that asked for a save (BGSAVE, BGREWRITEAOF), as Redis
    /// forks before it replies, for the persistence thread to write through. A leaf lock,
    /// held only to put it or take it.
    pub pending_child: parking_lot::Mutex<Option<crate::persist::child::Child>>,
    /// Wakes the persistence thread (a BGSAVE request).
    wake: (parking_lot::Mutex<bool>, Condvar),
}

impl Persistence {
    /// `stop-writes-on-bgsave-error`: writes are refused while the last save failed and save
    /// points are configured (Redis's `-MISCONF`).
    pub fn writes_refused(&self, config: &crate::config::Config) -> bool {
        self.failed()
            && config.flag(crate::config::p::STOP_WRITES_ON_BGSAVE_ERROR)
            && !config.text(crate::config::p::SAVE).is_empty()
    }

    pub fn set_loading(&self, on: bool) {
        self.set_gate(GATE_LOADING, on);
    }

    pub fn loading(&self) -> bool {
        self.gates.load(Ordering::Acquire) & GATE_LOADING != 0
    }

    pub fn set_failed(&self, failed: bool) {
        self.set_gate(GATE_SAVE_FAILED, failed);
    }

    pub fn failed(&self) -> bool {
        self.gates.load(Ordering::Relaxed) & GATE_SAVE_FAILED != 0
    }

    pub fn set_gate(&self, bit: u8, on: bool) {
        if on {
            // A new load has read nothing yet (see `exec::call`'s wait for its first events).
            if bit & crate::services::gates::GATE_LOADING != 0 {
                self.loading.loaded_bytes.store(0, Ordering::Relaxed);
            }
            self.gates.fetch_or(bit, Ordering::Release);
        } else {
            self.gates.fetch_and(!bit, Ordering::Release);
        }
    }

    /// Wakes the persistence thread (a BGSAVE or rewrite request).
    pub fn wake(&self) {
        let (m, cv) = &self.wake;
        *m.lock() = true;
        cv.notify_one();
    }

    /// The persistence thread's wait for a request (`wake_thread`) or the next tick.
    pub fn wait_for_wake(&self, tick: Duration) {
        let (m, cv) = &self.wake;
        let mut woken = m.lock();
        if !*woken {
            cv.wait_for(&mut woken, tick);
        }
        *woken = false;
    }

    pub fn new() -> Persistence {
        let p = Persistence::default();
        p.last_bgsave_secs.store(-1, Ordering::Relaxed);
        p.aof.last_rewrite_secs.store(-1, Ordering::Relaxed);
        p
    }
}

#[derive(Default)]
pub struct AofState {
    pub(crate) log: RwLock<Option<Arc<AofLog>>, { rank::AOF_SWITCH }>,
    pub(crate) manifest: Mutex<Manifest, { rank::LEAF }>,
    pub rewrites: AtomicU64,
    /// The base file's size (`aof_base_size`).
    pub base_size: AtomicU64,
    /// The AOF's whole size when it was last loaded or rewritten: the automatic rewrite
    /// measures growth against it (Redis's `aof_rewrite_base_size`).
    pub rewrite_base: AtomicU64,
    /// A rewrite runs, or was asked for and will run at once (`aof_rewrite_in_progress`: set
    /// when asked, so a client polling INFO never sees it done before it ran).
    pub rewrite_in_progress: AtomicBool,
    /// Asked for while a BGSAVE runs (or inside EXEC): starts after it (`aof_rewrite_scheduled`).
    pub rewrite_scheduled: AtomicBool,
    /// The persistence thread is to start a rewrite.
    pub(crate) rewrite_requested: AtomicBool,
    /// AOF was turned on at runtime and waits for its first base (Redis's AOF_WAIT_REWRITE):
    /// the log appends to a temporary file no manifest names until the rewrite is done.
    pub(crate) enabling: AtomicBool,
    /// Unix ms the running rewrite started (0: none), and the last one's duration in seconds.
    pub rewrite_started_ms: AtomicI64,
    pub last_rewrite_secs: AtomicI64,
    pub last_rewrite_failed: AtomicBool,
    pub consecutive_failures: AtomicU64,
    /// Bytes commands serialized ahead of the last rewrite's walk (`aof_last_cow_size`).
    pub last_cow_bytes: AtomicU64,
    /// Held by whatever replaces the AOF's files (a rewrite, turning AOF on or off, DEBUG
    /// LOADAOF): one at a time. Taken before any shard lock.
    pub(crate) files_lock: Mutex<(), { rank::AOF_FILES }>,
    /// The running rewrite's progress; `cancel` stops it (AOF turned off, shutdown).
    pub progress: Arc<rdbfile::Progress>,
}

impl AofState {
    /// The open log, if AOF is on.
    pub fn log(&self) -> Option<Arc<AofLog>> {
        self.log.read().clone()
    }
}
