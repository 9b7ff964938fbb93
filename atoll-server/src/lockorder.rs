//! The lock order, checked in debug builds (docs/ARCHITECTURE.md, "Lock order").
//!
//! A thread may wait for a lock only while every lock it holds ranks strictly *outside* it
//! (a smaller [`Rank`]). Two threads can then never wait for each other in a circle, and a
//! thread can never wait for a lock it holds itself — the bug that hung a worker when INFO
//! inside MULTI walked the shards its own transaction held. A `try_lock` never waits and is
//! always allowed. The single sanctioned exception is written down where it happens: the
//! holder of the script gate may wait for a shard while holding others (`Locks::add`),
//! because every other thread waits for a shard only while holding none.
//!
//! Every lock of the server is either one of those two or a [`Mutex`] / [`RwLock`] of this
//! module, whose type names its rank, so none can be added outside the order. Release builds
//! compile the counting away (what stays is the watchdog's mark on a contended lock's slow
//! path); the tests run debug builds, where a broken order panics at the wait that breaks it,
//! naming both ranks, instead of hanging sometimes. `ATOLL_LOCKORDER_SURVEY=FILE` reports
//! instead of panicking, to find every nesting a test suite reaches in one run.

/// Ranks from outermost (taken first) to innermost; the table in docs/ARCHITECTURE.md says
/// what each guards and why it sits where it does.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
#[repr(u8)]
pub enum Rank {
    /// `AofState.files_lock`: one replacer of the AOF's files at a time.
    AofFiles = 0,
    /// `Keyspace::script_gate`: a script's or a transaction-with-a-script's whole run.
    ScriptGate,
    /// The keyspace's shard mutexes (`engine::Locks`), several in ascending id order with
    /// only the first waited for.
    Shard,
    /// FAILOVER's steps (start, the switch to following the target, abort): one at a time.
    Failover,
    /// The loaded function libraries.
    Functions,
    /// `AofState.log`: which AOF log is open (switched by a rewrite or `appendonly`).
    AofSwitch,
    /// `Snapshots.sink`: the running snapshot's consumer.
    SnapshotSink,
    /// A snapshot's chunk queues (`rdbfile::Chunks`).
    SnapshotChunks,
    /// Clients paused by CLIENT PAUSE, WAIT/WAITAOF waiters.
    Waits,
    /// One blocked client's wait state (`blocking::Waiter`).
    Waiter,
    /// The effect lock (`Server.sink`): orders a write's effects in AOF and replication.
    Effects,
    /// The AOF log's files (taken to write, then the pending buffer).
    AofLog,
    /// The AOF log's buffer of appended, not yet written bytes.
    AofPending,
    /// The replication feed: backlog and offsets.
    ReplFeed,
    /// Replicas waiting for a full resync.
    Replicas,
    /// One replica's state.
    Replica,
    /// ACL's user registry (a user's own rules rank as a leaf under it).
    AclUsers,
    /// Client-side caching: the trackers (held while invalidations are sent), then the BCAST
    /// prefixes, then a stripe of the key table.
    TrackingClients,
    TrackingPrefixes,
    TrackingTable,
    /// The client registry.
    Clients,
    /// Pub/Sub's subscriber maps and MONITOR's list.
    PubSub,
    /// A client's `closed` mark, held while its mailbox is made (`ClientHandle::mailbox`).
    ClientClosed,
    /// One client's shared fields (`ClientHandle`), one at a time.
    Client,
    /// A client's mailbox (`Mailbox.state`).
    Mailbox,
    /// A worker's queue of mailboxes (`pubsub::Post`).
    Post,
    /// A worker's inbox: new connections, resumed waiters.
    Inbox,
    /// Atomic slot migrations: the list of jobs (copied into under the effect lock), then one
    /// job's fields.
    SlotMigrations,
    SlotMigration,
    /// Leaves: held for a few instructions, never with another lock taken under them
    /// (config values, ACL, script cache, statistics, slow log, latency, manifest …).
    Leaf,
}

/// The ranks as `u8`s, for the `R` of [`Mutex`] and [`RwLock`].
pub mod rank {
    use super::Rank;
    pub const AOF_FILES: u8 = Rank::AofFiles as u8;
    pub const FAILOVER: u8 = Rank::Failover as u8;
    pub const FUNCTIONS: u8 = Rank::Functions as u8;
    pub const AOF_SWITCH: u8 = Rank::AofSwitch as u8;
    pub const SNAPSHOT_SINK: u8 = Rank::SnapshotSink as u8;
    pub const SNAPSHOT_CHUNKS: u8 = Rank::SnapshotChunks as u8;
    pub const WAITS: u8 = Rank::Waits as u8;
    pub const WAITER: u8 = Rank::Waiter as u8;
    pub const EFFECTS: u8 = Rank::Effects as u8;
    pub const AOF_LOG: u8 = Rank::AofLog as u8;
    pub const AOF_PENDING: u8 = Rank::AofPending as u8;
    pub const REPL_FEED: u8 = Rank::ReplFeed as u8;
    pub const REPLICAS: u8 = Rank::Replicas as u8;
    pub const REPLICA: u8 = Rank::Replica as u8;
    pub const ACL_USERS: u8 = Rank::AclUsers as u8;
    pub const CLIENTS: u8 = Rank::Clients as u8;
    pub const CLIENT_CLOSED: u8 = Rank::ClientClosed as u8;
    pub const PUBSUB: u8 = Rank::PubSub as u8;
    pub const TRACKING_CLIENTS: u8 = Rank::TrackingClients as u8;
    pub const TRACKING_PREFIXES: u8 = Rank::TrackingPrefixes as u8;
    pub const TRACKING_TABLE: u8 = Rank::TrackingTable as u8;
    pub const CLIENT: u8 = Rank::Client as u8;
    pub const MAILBOX: u8 = Rank::Mailbox as u8;
    pub const POST: u8 = Rank::Post as u8;
    pub const INBOX: u8 = Rank::Inbox as u8;
    pub const SLOT_MIGRATIONS: u8 = Rank::SlotMigrations as u8;
    pub const SLOT_MIGRATION: u8 = Rank::SlotMigration as u8;
    pub const LEAF: u8 = Rank::Leaf as u8;
}

const RANKS: usize = Rank::Leaf as usize + 1;

const ALL: [Rank; RANKS] = [
    Rank::AofFiles,
    Rank::ScriptGate,
    Rank::Shard,
    Rank::Failover,
    Rank::Functions,
    Rank::AofSwitch,
    Rank::SnapshotSink,
    Rank::SnapshotChunks,
    Rank::Waits,
    Rank::Waiter,
    Rank::Effects,
    Rank::AofLog,
    Rank::AofPending,
    Rank::ReplFeed,
    Rank::Replicas,
    Rank::Replica,
    Rank::AclUsers,
    Rank::TrackingClients,
    Rank::TrackingPrefixes,
    Rank::TrackingTable,
    Rank::Clients,
    Rank::PubSub,
    Rank::ClientClosed,
    Rank::Client,
    Rank::Mailbox,
    Rank::Post,
    Rank::Inbox,
    Rank::SlotMigrations,
    Rank::SlotMigration,
    Rank::Leaf,
];

/// A mutex of rank `R` (see [`rank`]): parking_lot's, with every wait checked against the
/// order in debug builds and marked for the watchdog. Release builds pay one extra
/// thread-local store on a contended lock only.
pub type Mutex<T, const R: u8> = lock_api::Mutex<RawRanked<R>, T>;
pub type MutexGuard<'a, T, const R: u8> = lock_api::MutexGuard<'a, RawRanked<R>, T>;
/// A readers-writer lock of rank `R`; a read is a wait like a write (parking_lot's fair lock
/// makes a second read by the same thread wait behind a queued writer).
pub type RwLock<T, const R: u8> = lock_api::RwLock<RawRankedRw<R>, T>;
pub type RwLockReadGuard<'a, T, const R: u8> = lock_api::RwLockReadGuard<'a, RawRankedRw<R>, T>;

/// A lock of rank `R` taken by waiting: checked against the order, tried first, the wait
/// marked for the watchdog only when it is contended, then counted as held.
#[inline]
fn take<const R: u8>(try_take: impl FnOnce() -> bool, wait: impl FnOnce()) {
    before_wait(ALL[R as usize]);
    if !try_take() {
        let _w = waiting(ALL[R as usize]);
        wait();
    }
    acquired(ALL[R as usize], 1);
}

/// A lock of rank `R` tried (never a wait): counted as held if it was taken.
#[inline]
fn tried<const R: u8>(taken: bool) -> bool {
    if taken {
        acquired(ALL[R as usize], 1);
    }
    taken
}

/// The raw mutex under [`Mutex`].
pub struct RawRanked<const R: u8>(parking_lot::RawMutex);

// SAFETY: every operation forwards to parking_lot's RawMutex, which keeps the contract; the
// bookkeeping around it is thread-local, and the guard marker keeps guards on their thread.
unsafe impl<const R: u8> lock_api::RawMutex for RawRanked<R> {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = RawRanked(<parking_lot::RawMutex as lock_api::RawMutex>::INIT);
    type GuardMarker = lock_api::GuardNoSend;

    #[inline]
    fn lock(&self) {
        take::<R>(|| self.0.try_lock(), || self.0.lock());
    }

    #[inline]
    fn try_lock(&self) -> bool {
        tried::<R>(self.0.try_lock())
    }

    #[inline]
    unsafe fn unlock(&self) {
        released(ALL[R as usize], 1);
        // SAFETY: the caller holds the lock (the trait's contract).
        unsafe { self.0.unlock() }
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.0.is_locked()
    }
}

/// The raw lock under [`RwLock`].
pub struct RawRankedRw<const R: u8>(parking_lot::RawRwLock);

// SAFETY: as for `RawRanked`.
unsafe impl<const R: u8> lock_api::RawRwLock for RawRankedRw<R> {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = RawRankedRw(<parking_lot::RawRwLock as lock_api::RawRwLock>::INIT);
    type GuardMarker = lock_api::GuardNoSend;

    #[inline]
    fn lock_shared(&self) {
        take::<R>(|| self.0.try_lock_shared(), || self.0.lock_shared());
    }

    #[inline]
    fn try_lock_shared(&self) -> bool {
        tried::<R>(self.0.try_lock_shared())
    }

    #[inline]
    unsafe fn unlock_shared(&self) {
        released(ALL[R as usize], 1);
        // SAFETY: the caller holds a shared lock (the trait's contract).
        unsafe { self.0.unlock_shared() }
    }

    #[inline]
    fn lock_exclusive(&self) {
        take::<R>(|| self.0.try_lock_exclusive(), || self.0.lock_exclusive());
    }

    #[inline]
    fn try_lock_exclusive(&self) -> bool {
        tried::<R>(self.0.try_lock_exclusive())
    }

    #[inline]
    unsafe fn unlock_exclusive(&self) {
        released(ALL[R as usize], 1);
        // SAFETY: the caller holds the exclusive lock (the trait's contract).
        unsafe { self.0.unlock_exclusive() }
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.0.is_locked()
    }
}

/// Threads that say what they wait for (workers, by id), for the watchdog: a static array so
/// a stuck thread's slot is read without any lock it might hold.
const SLOTS: usize = 1024;
static WAITING: [std::sync::atomic::AtomicU8; SLOTS] = [const { std::sync::atomic::AtomicU8::new(0) }; SLOTS];

thread_local! {
    static SLOT: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
}

/// This thread reports its waits in `slot` (a worker's id).
pub fn register_thread(slot: usize) {
    if slot < SLOTS {
        SLOT.set(slot);
    }
}

/// Marks this thread as waiting for a lock of `rank` until the mark drops (always compiled:
/// it is what the watchdog reports of a stuck worker). Taken only on a contended lock's slow
/// path.
pub struct Waiting(usize);

#[inline]
pub fn waiting(rank: Rank) -> Waiting {
    let slot = SLOT.get();
    if slot < SLOTS {
        WAITING[slot].store(rank as u8 + 1, std::sync::atomic::Ordering::Relaxed);
    }
    Waiting(slot)
}

impl Drop for Waiting {
    #[inline]
    fn drop(&mut self) {
        if self.0 < SLOTS {
            WAITING[self.0].store(0, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// The slot this thread reports in, if it registered one.
pub fn current_slot() -> Option<usize> {
    Some(SLOT.get()).filter(|&s| s < SLOTS)
}

/// What the thread reporting in `slot` waits for now, if anything.
pub fn waiting_in(slot: usize) -> Option<Rank> {
    let r = WAITING.get(slot)?.load(std::sync::atomic::Ordering::Relaxed) as usize;
    r.checked_sub(1).and_then(|r| ALL.get(r).copied())
}

/// Takes `m` (a lock of `rank`), marking the wait when it is contended.
#[inline]
pub fn lock<T>(m: &parking_lot::Mutex<T>, rank: Rank) -> parking_lot::MutexGuard<'_, T> {
    match m.try_lock() {
        Some(g) => g,
        None => {
            let _w = waiting(rank);
            m.lock()
        }
    }
}

#[cfg(debug_assertions)]
thread_local! {
    static HELD: std::cell::Cell<[u32; RANKS]> = const { std::cell::Cell::new([0; RANKS]) };
}

/// About to wait for a lock of `rank`: panics (debug builds) when this thread holds one of
/// the same or an inner rank.
#[inline]
#[track_caller]
pub fn before_wait(rank: Rank) {
    #[cfg(debug_assertions)]
    HELD.with(|h| {
        let held = h.get();
        if let Some(inner) = (rank as usize..RANKS).find(|&r| held[r] > 0) {
            let msg = format!(
                "lock order broken: waiting for {rank:?} while holding {} {:?} lock(s) (see docs/ARCHITECTURE.md, Lock order)",
                held[inner], ALL[inner]
            );
            if !survey(&msg) {
                panic!("{msg}");
            }
        }
    });
    #[cfg(not(debug_assertions))]
    let _ = rank;
}

/// With `ATOLL_LOCKORDER_SURVEY=FILE` in the environment (debug builds, for finding every
/// nesting in one run of the tests), a broken order is appended to FILE with its backtrace,
/// once per pair of ranks, and the thread goes on instead of panicking.
#[cfg(debug_assertions)]
fn survey(msg: &str) -> bool {
    use std::io::Write;
    static SEEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let Some(path) = std::env::var_os("ATOLL_LOCKORDER_SURVEY") else { return false };
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if seen.iter().any(|m| m == msg) {
        return true;
    }
    seen.push(msg.to_string());
    let bt = std::backtrace::Backtrace::force_capture();
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
        let _ = writeln!(f, "=== {msg}\n{bt}");
    }
    true
}

/// `n` locks of `rank` are now held by this thread.
#[inline]
pub fn acquired(rank: Rank, n: usize) {
    #[cfg(debug_assertions)]
    HELD.with(|h| {
        let mut held = h.get();
        held[rank as usize] += n as u32;
        h.set(held);
    });
    #[cfg(not(debug_assertions))]
    let _ = (rank, n);
}

/// `n` locks of `rank` this thread held are released.
#[inline]
pub fn released(rank: Rank, n: usize) {
    #[cfg(debug_assertions)]
    HELD.with(|h| {
        let mut held = h.get();
        held[rank as usize] -= n as u32;
        h.set(held);
    });
    #[cfg(not(debug_assertions))]
    let _ = (rank, n);
}

/// How many locks of `rank` this thread holds (always 0 in release builds).
pub fn held(rank: Rank) -> u32 {
    #[cfg(debug_assertions)]
    return HELD.with(|h| h.get()[rank as usize]);
    #[cfg(not(debug_assertions))]
    {
        let _ = rank;
        0
    }
}

#[cfg(all(test, debug_assertions))]
mod tests {
    use super::*;

    #[test]
    fn waiting_inside_out_panics() {
        before_wait(Rank::ScriptGate);
        acquired(Rank::ScriptGate, 1);
        before_wait(Rank::Shard);
        acquired(Rank::Shard, 2);
        let r = std::panic::catch_unwind(|| before_wait(Rank::Shard));
        assert!(r.is_err(), "waiting for a shard while holding shards must panic");
        let r = std::panic::catch_unwind(|| before_wait(Rank::ScriptGate));
        assert!(r.is_err(), "waiting for the gate while holding shards must panic");
        released(Rank::Shard, 2);
        released(Rank::ScriptGate, 1);
        before_wait(Rank::Shard);
        assert_eq!(held(Rank::Shard), 0);
    }

    #[test]
    fn ranked_locks_count_and_check_their_waits() {
        let outer: Mutex<u32, { rank::EFFECTS }> = Mutex::new(0);
        let inner: RwLock<u32, { rank::LEAF }> = RwLock::new(0);
        {
            let _o = outer.lock();
            let _i = inner.read();
            assert_eq!((held(Rank::Effects), held(Rank::Leaf)), (1, 1));
        }
        assert_eq!((held(Rank::Effects), held(Rank::Leaf)), (0, 0));
        let _i = inner.write();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(outer.lock())));
        assert!(r.is_err(), "waiting for an outer lock while holding an inner one must panic");
        // A try never waits, so it may go against the order.
        assert!(outer.try_lock().is_some());
        // A second read of the same lock is a wait too (a queued writer would block it).
        drop(_i);
        let _r = inner.read();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(inner.read())));
        assert!(r.is_err());
    }
}
