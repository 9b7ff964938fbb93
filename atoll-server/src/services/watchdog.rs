//! The watchdog's state: its figures and which workers' stalls were reported. The thread
//! that looks at the workers is `daemons::watchdog`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A round without progress for this long is a stall, when `watchdog-period` is 0.
pub const DEFAULT_LIMIT_MS: i64 = 10_000;

/// The watchdog's figures and per-worker report state.
#[derive(Default)]
pub struct Watchdog {
    /// Stalls reported since start-up.
    pub reports: AtomicU64,
    /// Workers whose current stall was reported (and has not ended).
    reported: Vec<AtomicBool>,
}

/// What one look at a worker found.
pub enum Seen {
    /// Nothing to say: moving, or a stall already reported.
    Quiet,
    /// A stall begins: report it (counted in `reports`).
    Stalled,
    /// A reported stall is over.
    Moving,
}

impl Watchdog {
    pub fn new(workers: usize) -> Watchdog {
        Watchdog { reports: AtomicU64::new(0), reported: (0..workers).map(|_| AtomicBool::new(false)).collect() }
    }

    /// Workers stalled now (reported and not yet past their stuck round).
    pub fn stalled(&self) -> usize {
        self.reported.iter().filter(|r| r.load(Ordering::Relaxed)).count()
    }

    /// Worker `id` was looked at and found `stuck` or not: reports each stall once.
    pub fn observe(&self, id: usize, stuck: bool) -> Seen {
        let Some(reported) = self.reported.get(id) else { return Seen::Quiet };
        match (stuck, reported.swap(stuck, Ordering::Relaxed)) {
            (false, true) => Seen::Moving,
            (true, false) => {
                self.reports.fetch_add(1, Ordering::Relaxed);
                Seen::Stalled
            }
            _ => Seen::Quiet,
        }
    }
}
