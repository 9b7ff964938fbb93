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

const RANKS: usize = 2;

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
