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
//! Release builds compile all of this to nothing; the tests run debug builds, where a broken
//! order panics at the wait that breaks it, naming both ranks, instead of hanging sometimes.

/// Ranks from outermost (taken first) to innermost.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
#[repr(u8)]
pub enum Rank {
    /// `Keyspace::script_gate`: a script's or a transaction-with-a-script's whole run.
    ScriptGate = 0,
    /// The keyspace's shard mutexes (`engine::Locks`), several in ascending id order with
    /// only the first waited for.
    Shard = 1,
}

#[cfg(debug_assertions)]
const RANKS: usize = 2;

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
    match WAITING.get(slot)?.load(std::sync::atomic::Ordering::Relaxed) {
        1 => Some(Rank::ScriptGate),
        2 => Some(Rank::Shard),
        _ => None,
    }
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
            panic!(
                "lock order broken: waiting for {rank:?} while holding {} {:?} lock(s) (see docs/ARCHITECTURE.md, Lock order)",
                held[inner],
                ranks()[inner]
            );
        }
    });
    #[cfg(not(debug_assertions))]
    let _ = rank;
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

#[cfg(debug_assertions)]
fn ranks() -> [Rank; RANKS] {
    [Rank::ScriptGate, Rank::Shard]
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
}
