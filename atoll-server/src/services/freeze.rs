//! Stopping every worker for a while: DEBUG SLEEP.
//!
//! Redis's DEBUG SLEEP stops its one thread, so the server answers nothing for the time; its
//! own tests (and operators' scripts) use it to make a server look hung — a MIGRATE or a
//! replica must then time out. Sleeping only the caller's worker would leave the others
//! answering, so the sleeper freezes them: each worker checks the freeze where a round of
//! work begins (holding no lock there) and waits until every freeze is over. A worker in the
//! middle of a round finishes it first, as commands already running in Redis's one thread
//! would have.

use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

#[derive(Default)]
pub struct Freeze {
    /// Freezes in force (two clients may DEBUG SLEEP at once).
    active: AtomicUsize,
    /// Guards the wait: a thawing sleeper notifies under it, so no waiter misses the wake.
    lock: Mutex<()>,
    thawed: Condvar,
}

impl Freeze {
    /// Sleeps the calling thread for `dur` while every other worker stays frozen.
    pub fn sleep(&self, dur: Duration) {
        self.active.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(dur);
        let _g = self.lock.lock();
        self.active.fetch_sub(1, Ordering::SeqCst);
        self.thawed.notify_all();
    }

    /// Called where a worker's round begins: returns at once unless a freeze is in force,
    /// else when every freeze is over. One relaxed load on the hot path.
    #[inline]
    pub fn wait_out(&self) {
        if self.active.load(Ordering::Relaxed) != 0 {
            self.wait_slow();
        }
    }

    #[cold]
    fn wait_slow(&self) {
        let mut g = self.lock.lock();
        while self.active.load(Ordering::SeqCst) != 0 {
            self.thawed.wait(&mut g);
        }
    }
}
