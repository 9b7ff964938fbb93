//! The hottest keys (Atoll's own, `hotkeys yes`): each worker samples one keyed command in
//! [`SAMPLE_EVERY`] into a small Space-Saving sketch (Metwally et al.: a fixed number of
//! counters; an unseen key takes over the smallest one, so a key that is truly hot cannot be
//! pushed out). The dashboard, `/metrics` and DEBUG HOTKEYS merge the workers' sketches.
//! A command pays one counter decrement; only a sampled one takes the sketch's lock.

use crate::lockorder::{rank, Mutex};
use std::sync::atomic::{AtomicU32, Ordering};

/// One keyed command in this many is sampled.
pub const SAMPLE_EVERY: u32 = 64;
/// Counters per worker.
const CAPACITY: usize = 64;
/// Keys longer than this are counted under their first bytes (a bounded sketch).
const MAX_KEY: usize = 128;

/// A counter of the sketch: database, key, sampled commands.
type Counter = (usize, Box<[u8]>, u64);

#[derive(Default)]
pub struct HotKeys {
    countdown: AtomicU32,
    sketch: Mutex<Vec<Counter>, { rank::LEAF }>,
}

impl HotKeys {
    /// Counts a keyed command; every [`SAMPLE_EVERY`]th is recorded. Only the owning worker
    /// calls this.
    #[inline]
    pub fn touch(&self, db: usize, key: &[u8]) {
        let n = self.countdown.load(Ordering::Relaxed);
        if n > 0 {
            self.countdown.store(n - 1, Ordering::Relaxed);
            return;
        }
        self.countdown.store(SAMPLE_EVERY - 1, Ordering::Relaxed);
        self.record(db, key);
    }

    #[cold]
    fn record(&self, db: usize, key: &[u8]) {
        let key = &key[..key.len().min(MAX_KEY)];
        let mut s = self.sketch.lock();
        if let Some(e) = s.iter_mut().find(|e| e.0 == db && &*e.1 == key) {
            e.2 += 1;
        } else if s.len() < CAPACITY {
            s.push((db, key.into(), 1));
        } else if let Some(min) = s.iter_mut().min_by_key(|e| e.2) {
            *min = (db, key.into(), min.2 + 1);
        }
    }

    pub fn reset(&self) {
        self.sketch.lock().clear();
    }
}

/// The `n` hottest keys over all workers: (db, key, estimated commands).
pub fn top<'a>(sketches: impl Iterator<Item = &'a HotKeys>, n: usize) -> Vec<(usize, Vec<u8>, u64)> {
    let mut all: Vec<(usize, Vec<u8>, u64)> = Vec::new();
    for h in sketches {
        for (db, k, c) in h.sketch.lock().iter() {
            match all.iter_mut().find(|e| e.0 == *db && e.1 == **k) {
                Some(e) => e.2 += c,
                None => all.push((*db, k.to_vec(), *c)),
            }
        }
    }
    all.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.1.cmp(&b.1)));
    all.truncate(n);
    for e in &mut all {
        e.2 *= SAMPLE_EVERY as u64;
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heavy_key_survives_a_stream_of_light_ones() {
        let mut w = Weighted::default();
        for i in 0..100_000u32 {
            w.add(format!("light:{i}").as_bytes(), 1, 10);
            if i % 10 == 0 {
                w.add(b"heavy", 5, 10);
            }
        }
        assert!(w.counts.len() <= 20);
        assert_eq!(w.counts.get(&b"heavy"[..]), Some(&50_000));
    }

    #[test]
    fn a_hot_key_stays_on_top() {
        let h = HotKeys::default();
        for i in 0..200_000u32 {
            // One command in four (scattered) is on the hot key; the rest are all different.
            if i.wrapping_mul(2_654_435_761) % 4 == 0 {
                h.touch(0, b"hot");
            } else {
                h.touch(0, format!("cold:{i}").as_bytes());
            }
        }
        let t = top(std::iter::once(&h), 3);
        assert_eq!(t[0].1, b"hot");
        assert!(t[0].2 > 30_000, "{}", t[0].2);
    }
}

// ---------------------------------------------------------------------------------------------
// Redis 8.6's HOTKEYS session: the CPU time and network bytes of the commands on each key
// over a session an operator starts and stops. Unlike the always-on sampler above, a session
// costs nothing until started (one bit of `Hot::track`); while on, each worker adds what its
// keyed commands cost into its own two weighted Space-Saving sketches (the same algorithm,
// weighted by microseconds or bytes), which HOTKEYS GET merges.
// ---------------------------------------------------------------------------------------------

/// `METRICS` bits.
pub const METRIC_CPU: u32 = 1;
pub const METRIC_NET: u32 = 2;
/// Counters per sketch for each key asked for (`COUNT k` keeps `k * SKETCH_PER_KEY`).
const SKETCH_PER_KEY: usize = 10;
/// Keys longer than this are counted under their first bytes (a bounded sketch).
const SESSION_MAX_KEY: usize = 4 << 10;

/// How a session was started, and where it stands (HOTKEYS GET's metadata).
#[derive(Clone, Debug)]
pub struct SessionInfo {
    pub epoch: u64,
    pub active: bool,
    pub metrics: u32,
    pub count: usize,
    pub sample: u32,
    pub start_ms: i64,
    /// DURATION in ms (0: until HOTKEYS STOP).
    pub duration_ms: i64,
    /// Set when the session stopped: how long it ran.
    pub ran_ms: Option<i64>,
    /// The process's user and system CPU time (µs) when it started, and when it stopped.
    pub rusage_start: (u64, u64),
    pub rusage_end: Option<(u64, u64)>,
}

/// The process's user and system CPU time in µs.
pub fn cpu_times() -> (u64, u64) {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes only into the struct we pass.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    (us(ru.ru_utime), us(ru.ru_stime))
}

/// The bit of the call path's flags that says a session runs: set and cleared only under the
/// session's lock, so a START racing a STOP cannot leave it on for a stopped session or off
/// for a running one.
pub struct Switch<'a> {
    pub flags: &'a AtomicU32,
    pub bit: u32,
}

impl Switch<'_> {
    fn set(&self, on: bool) {
        if on {
            self.flags.fetch_or(self.bit, Ordering::Relaxed);
        } else {
            self.flags.fetch_and(!self.bit, Ordering::Relaxed);
        }
    }
}

/// The server's one session (in `Stats`). The parameters the workers need on every recorded
/// command sit in atomics; the rest under a lock only the HOTKEYS commands take.
#[derive(Default)]
pub struct Session {
    info: Mutex<Option<SessionInfo>, { rank::LEAF }>,
    epoch: std::sync::atomic::AtomicU64,
    metrics: AtomicU32,
    count: AtomicU32,
    sample: AtomicU32,
    /// Unix ms at which a session with DURATION stops (0: none).
    deadline_ms: std::sync::atomic::AtomicI64,
    /// A session runs (a worker that saw the call path's bit late records nothing after STOP).
    running: std::sync::atomic::AtomicBool,
}

/// A bounded weighted heavy-hitter counter: each key's weight added exactly while it is
/// tracked; when `2 × cap` keys are tracked the lighter half goes (amortized O(1) per add, no
/// scan per new key). A key heavier than the `cap`-th heaviest when a pruning comes stays.
#[derive(Default)]
struct Weighted {
    counts: std::collections::HashMap<Box<[u8]>, u64>,
}

impl Weighted {
    fn add(&mut self, key: &[u8], w: u64, cap: usize) {
        let key = &key[..key.len().min(SESSION_MAX_KEY)];
        if let Some(c) = self.counts.get_mut(key) {
            *c += w;
            return;
        }
        let cap = cap.max(1);
        if self.counts.len() >= 2 * cap {
            self.prune(cap);
        }
        self.counts.insert(key.into(), w);
    }

    /// Keeps the `cap` heaviest keys.
    #[cold]
    fn prune(&mut self, cap: usize) {
        let mut weights: Vec<u64> = self.counts.values().copied().collect();
        let (_, &mut threshold, _) = weights.select_nth_unstable_by(cap - 1, |a, b| b.cmp(a));
        self.counts.retain(|_, c| *c >= threshold);
        // Ties at the threshold: drop the extra ones.
        let mut extra = self.counts.len().saturating_sub(cap);
        self.counts.retain(|_, c| {
            if extra > 0 && *c == threshold {
                extra -= 1;
                false
            } else {
                true
            }
        });
    }
}

/// One worker's share of the session.
#[derive(Default)]
struct Share {
    epoch: u64,
    all_ns: u64,
    all_net: u64,
    /// Bytes fed to the NET sketch (each command's bytes divided among its keys).
    fed_net: u64,
    cpu: Weighted,
    net: Weighted,
    rng: u64,
}

/// A worker's part of the session (in `WorkerStats`); only its worker records into it.
#[derive(Default)]
pub struct WorkerSession {
    share: Mutex<Share, { rank::LEAF }>,
}

/// What HOTKEYS GET reports.
pub struct Report {
    pub info: SessionInfo,
    pub all_us: u64,
    pub all_net: u64,
    pub fed_net: u64,
    pub by_cpu: Vec<(Vec<u8>, u64)>,
    pub by_net: Vec<(Vec<u8>, u64)>,
}

/// Why HOTKEYS START or RESET refused.
#[derive(Debug, PartialEq)]
pub enum SessionError {
    InProgress,
}

impl Session {
    /// Starts a session (the previous one's data goes) and sets the call path's bit.
    pub fn start(
        &self,
        mut info: SessionInfo,
        workers: &[super::stats::WorkerStats],
        switch: &Switch,
    ) -> Result<(), SessionError> {
        {
            let mut cur = self.info.lock();
            if cur.as_ref().is_some_and(|c| c.active) {
                return Err(SessionError::InProgress);
            }
            info.epoch = self.epoch.load(Ordering::Relaxed) + 1;
            self.metrics.store(info.metrics, Ordering::Relaxed);
            self.count.store(info.count as u32, Ordering::Relaxed);
            self.sample.store(info.sample, Ordering::Relaxed);
            let deadline = if info.duration_ms > 0 { info.start_ms + info.duration_ms } else { 0 };
            self.deadline_ms.store(deadline, Ordering::Relaxed);
            self.epoch.store(info.epoch, Ordering::Release);
            self.running.store(true, Ordering::Release);
            *cur = Some(info);
            switch.set(true);
        }
        Self::free_shares(workers);
        Ok(())
    }

    /// Stops the running session at `now_ms` (a DURATION that passed stops it at its end) and
    /// clears the call path's bit; false if none was running.
    pub fn stop(&self, now_ms: i64, switch: &Switch) -> bool {
        let mut cur = self.info.lock();
        switch.set(false);
        self.running.store(false, Ordering::Release);
        self.deadline_ms.store(0, Ordering::Relaxed);
        match cur.as_mut() {
            Some(c) if c.active => {
                c.active = false;
                let end = if c.duration_ms > 0 { now_ms.min(c.start_ms + c.duration_ms) } else { now_ms };
                c.ran_ms = Some((end - c.start_ms).max(0));
                c.rusage_end = Some(cpu_times());
                true
            }
            _ => false,
        }
    }

    /// Stops a session whose DURATION has passed (checked again under the lock, so a new
    /// session started meanwhile is left alone); true if it did.
    pub fn expire(&self, now_ms: i64, switch: &Switch) -> bool {
        let d = self.deadline_ms.load(Ordering::Relaxed);
        if d == 0 || now_ms < d {
            return false;
        }
        let due = self
            .info
            .lock()
            .as_ref()
            .is_some_and(|c| c.active && c.duration_ms > 0 && now_ms >= c.start_ms + c.duration_ms);
        // (Between the check and the stop only this session's own STOP can run: a new START
        // needs it stopped first.)
        due && self.stop(now_ms, switch)
    }

    /// Whether a session is running.
    pub fn active(&self) -> bool {
        self.info.lock().as_ref().is_some_and(|c| c.active)
    }

    /// Drops a stopped session's data.
    pub fn reset(&self, workers: &[super::stats::WorkerStats]) -> Result<(), SessionError> {
        {
            let mut cur = self.info.lock();
            if cur.as_ref().is_some_and(|c| c.active) {
                return Err(SessionError::InProgress);
            }
            *cur = None;
            self.epoch.fetch_add(1, Ordering::Release);
        }
        Self::free_shares(workers);
        Ok(())
    }

    fn free_shares(workers: &[super::stats::WorkerStats]) {
        for w in workers {
            *w.session.share.lock() = Share::default();
        }
    }

    /// Records one keyed command: `ns` of time and `bytes` in and out, divided evenly among
    /// its `keys` (a command counts whole in the totals; with SAMPLE r, one command in r feeds
    /// the sketches). Time is kept in nanoseconds and reported in microseconds, so the many
    /// commands shorter than a microsecond still add up.
    #[cold]
    pub fn record(&self, w: &WorkerSession, keys: &[&[u8]], ns: u64, bytes: u64) {
        if !self.running.load(Ordering::Acquire) {
            return;
        }
        let epoch = self.epoch.load(Ordering::Acquire);
        let metrics = self.metrics.load(Ordering::Relaxed);
        let cap = self.count.load(Ordering::Relaxed) as usize * SKETCH_PER_KEY;
        let sample = self.sample.load(Ordering::Relaxed).max(1) as u64;
        let mut s = w.share.lock();
        if s.epoch != epoch {
            let seed =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
            *s = Share { epoch, rng: seed ^ (w as *const WorkerSession as u64), ..Share::default() };
        }
        s.all_ns += ns;
        s.all_net += bytes;
        let sampled = sample == 1 || {
            // xorshift64*: a fair coin per command, without a shared generator.
            let mut x = s.rng | 1;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            s.rng = x;
            x.is_multiple_of(sample)
        };
        if sampled && !keys.is_empty() {
            let n = keys.len() as u64;
            for k in keys {
                if metrics & METRIC_CPU != 0 {
                    s.cpu.add(k, ns / n, cap);
                }
                if metrics & METRIC_NET != 0 {
                    s.net.add(k, bytes / n, cap);
                    s.fed_net += bytes / n;
                }
            }
        }
    }

    /// The session's report (None: no session since the last RESET).
    pub fn report(&self, workers: &[super::stats::WorkerStats]) -> Option<Report> {
        let info = self.info.lock().clone()?;
        let mut r = Report { info, all_us: 0, all_net: 0, fed_net: 0, by_cpu: Vec::new(), by_net: Vec::new() };
        let mut cpu: std::collections::HashMap<Vec<u8>, u64> = Default::default();
        let mut net: std::collections::HashMap<Vec<u8>, u64> = Default::default();
        for w in workers {
            let s = w.session.share.lock();
            if s.epoch != r.info.epoch {
                continue;
            }
            r.all_us += s.all_ns;
            r.all_net += s.all_net;
            r.fed_net += s.fed_net;
            for (k, c) in &s.cpu.counts {
                *cpu.entry(k.to_vec()).or_default() += c;
            }
            for (k, c) in &s.net.counts {
                *net.entry(k.to_vec()).or_default() += c;
            }
        }
        let top = |m: std::collections::HashMap<Vec<u8>, u64>, k: usize| {
            let mut v: Vec<(Vec<u8>, u64)> = m.into_iter().filter(|e| e.1 > 0).collect();
            v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            v.truncate(k);
            v
        };
        r.all_us /= 1000;
        let mut by_cpu = top(cpu, r.info.count);
        for e in &mut by_cpu {
            e.1 /= 1000;
        }
        by_cpu.retain(|e| e.1 > 0);
        r.by_cpu = by_cpu;
        r.by_net = top(net, r.info.count);
        Some(r)
    }
}
