//! Time: the wall clock, and the per-command clock the call path reads (monotonic, a few
//! nanoseconds a read, its offset to the wall clock re-read by the cron).

use std::sync::atomic::{AtomicI64, Ordering};

pub fn unix_ms() -> i64 {
    unix_us() / 1000
}

pub fn unix_us() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}

/// Wall-clock milliseconds derived from the monotonic clock, so a command needs a single clock
/// read for both its time and its duration. The offset to the wall clock is re-read by the
/// cron (`hz` times a second), so a wall-clock adjustment is followed within one cron period.
/// The monotonic clock is `quanta`'s: the CPU's time-stamp counter where it is invariant, a
/// few nanoseconds per read instead of a clock_gettime call (two per command add up).
pub struct Clock {
    /// Read directly rather than through `quanta::Instant::now`, which first checks a
    /// thread-local test override and a lazily initialized global clock on every call.
    src: quanta::Clock,
    base: quanta::Instant,
    /// The wall clock at `base`, in microseconds: kept finer than the milliseconds it yields,
    /// so that truncating twice cannot put a command's time a millisecond behind the wall clock.
    wall_us_at_base: AtomicI64,
}

impl Clock {
    pub fn new() -> Clock {
        let src = quanta::Clock::new();
        let c = Clock { base: src.now(), src, wall_us_at_base: AtomicI64::new(0) };
        c.resync();
        c
    }

    /// The monotonic time now (the per-command clock read).
    #[inline]
    pub fn instant(&self) -> quanta::Instant {
        self.src.now()
    }

    pub fn resync(&self) {
        let el = self.instant().saturating_duration_since(self.base).as_micros() as i64;
        self.wall_us_at_base.store(unix_us() - el, Ordering::Relaxed);
    }

    #[inline]
    pub fn ms_at(&self, t: quanta::Instant) -> i64 {
        (self.wall_us_at_base.load(Ordering::Relaxed) + t.saturating_duration_since(self.base).as_micros() as i64)
            / 1000
    }

    #[inline]
    pub fn now_ms(&self) -> i64 {
        self.ms_at(self.instant())
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}
