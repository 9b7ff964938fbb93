//! Latency: per-command histograms (`latency-tracking`: INFO latencystats, LATENCY HISTOGRAM,
//! the metrics endpoint) and the latency monitor (`latency-monitor-threshold`: LATENCY
//! LATEST/HISTORY/GRAPH/DOCTOR/RESET), with Redis 7.2's numbers.
//!
//! A histogram has HdrHistogram's layout with Redis's parameters (values 1 ns … 1 s, two
//! significant digits: 256 exact sub-buckets, then 128 per power of two), so every percentile
//! and bucket prints exactly as Redis prints it. It is written here rather than taken from the
//! `hdrhistogram` crate because each worker records into its own histograms while INFO reads
//! them from another thread: the counts are atomics written by one thread with a plain load
//! and store (no lock, no read-modify-write on the command path), which the crate's `&mut`
//! recording API cannot offer.

use crate::lockorder::{rank, Mutex};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Sub-buckets per bucket: 2 significant decimal digits.
const SUB: u32 = 256;
const HALF_MAG: u32 = 7;
/// Buckets to cover 1 s in ns (256 << 22 > 1e9).
const BUCKETS: usize = 23;
const LEN: usize = (BUCKETS + 1) << HALF_MAG;
const MAX_NS: u64 = 1_000_000_000;

fn bucket_of(v: u64) -> u32 {
    (64 - (v | (SUB as u64 - 1)).leading_zeros()) - (HALF_MAG + 1)
}

fn index_of(v: u64) -> usize {
    let b = bucket_of(v);
    let sub = (v >> b) as usize;
    ((b as usize + 1) << HALF_MAG) + sub - (1 << HALF_MAG)
}

/// The lowest value counted at index `i`.
fn value_at(i: usize) -> u64 {
    let mut b = (i >> HALF_MAG) as i64 - 1;
    let mut sub = (i & ((1 << HALF_MAG) - 1)) as u64 + (1 << HALF_MAG);
    if b < 0 {
        sub -= 1 << HALF_MAG;
        b = 0;
    }
    sub << b
}

fn lowest_equiv(v: u64) -> u64 {
    let b = bucket_of(v);
    (v >> b) << b
}

fn highest_equiv(v: u64) -> u64 {
    let b = bucket_of(v);
    let size = if (v >> b) >= SUB as u64 { 1u64 << (b + 1) } else { 1u64 << b };
    lowest_equiv(v) + size - 1
}

/// The slot of each duration under 64 µs.
static SMALL: [u16; 64] = {
    let mut t = [0u16; 64];
    let mut us = 0;
    while us < 64 {
        let v = if us == 0 { 1 } else { us as u64 * 1000 };
        // index_of, in a const context.
        let b = (64 - (v | (SUB as u64 - 1)).leading_zeros()) - (HALF_MAG + 1);
        t[us] = (((b as usize + 1) << HALF_MAG) + (v >> b) as usize - (1 << HALF_MAG)) as u16;
        us += 1;
    }
    t
};

/// One command's latency histogram in one worker. Only that worker records into it.
pub struct Hist {
    counts: Box<[AtomicU64]>,
}

impl Hist {
    fn new() -> Hist {
        Hist { counts: (0..LEN).map(|_| AtomicU64::new(0)).collect() }
    }

    /// Records a call of `us` microseconds, as Redis does: in ns, clamped to [1 ns, 1 s].
    /// Almost every call takes under 64 µs, whose slots come from a table.
    #[inline]
    pub fn record(&self, us: u64) {
        let i = match SMALL.get(us as usize) {
            Some(&i) => i as usize,
            None => index_of(us.saturating_mul(1000).clamp(1, MAX_NS)),
        };
        let c = &self.counts[i];
        c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }
}

/// A command's histogram slot in a worker's statistics, allocated at its first call (24 KB;
/// most commands are never called).
#[derive(Default)]
pub struct HistSlot(OnceLock<Hist>);

impl HistSlot {
    #[inline]
    pub fn record(&self, us: u64) {
        self.0.get_or_init(Hist::new).record(us);
    }

    pub fn get(&self) -> Option<&Hist> {
        self.0.get()
    }

    pub fn reset(&self) {
        if let Some(h) = self.0.get() {
            for c in h.counts.iter() {
                c.store(0, Ordering::Relaxed);
            }
        }
    }
}

/// The counts of one command summed over the workers.
pub struct Merged {
    counts: Vec<u64>,
    pub total: u64,
}

impl Merged {
    pub fn of<'a>(hists: impl Iterator<Item = &'a Hist>) -> Option<Merged> {
        let mut counts = vec![0u64; LEN];
        let mut any = false;
        for h in hists {
            any = true;
            for (m, c) in counts.iter_mut().zip(h.counts.iter()) {
                *m += c.load(Ordering::Relaxed);
            }
        }
        let total = counts.iter().sum();
        (any && total > 0).then_some(Merged { counts, total })
    }

    /// Redis's `hdr_value_at_percentile`, in ns: the highest value of the bucket where the
    /// cumulative count reaches the percentile (the lowest for the 0th).
    pub fn value_at_percentile(&self, p: f64) -> u64 {
        let want = (((p.min(100.0) / 100.0) * self.total as f64) + 0.5) as u64;
        let want = want.max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= want {
                let v = value_at(i);
                return if p == 0.0 { lowest_equiv(v) } else { highest_equiv(v) };
            }
        }
        0
    }

    /// Every level of LATENCY HISTOGRAM's scale (1024 ns × 2^k, up to 1 s), with the calls at
    /// or below it: (upper bound in ns, cumulative calls). A fixed set, as Prometheus buckets
    /// must be.
    pub fn levels(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let (mut level, mut i, mut cum) = (1024u64, 0usize, 0u64);
        while level <= MAX_NS * 2 {
            let hi = highest_equiv(level);
            while i < LEN && value_at(i) <= hi {
                cum += self.counts[i];
                i += 1;
            }
            out.push((hi, cum));
            level *= 2;
        }
        out
    }

    /// LATENCY HISTOGRAM's buckets: (upper bound in µs, cumulative calls) at 1024 ns × 2^k,
    /// skipping levels that add no calls, up to the level that holds the last one.
    pub fn usec_buckets(&self) -> Vec<(u64, u64)> {
        let cum_at = |hi: u64| -> u64 {
            self.counts.iter().enumerate().take_while(|(i, _)| value_at(*i) <= hi).map(|(_, c)| c).sum()
        };
        let mut out = Vec::new();
        let (mut level, mut prev) = (1024u64, 0u64);
        loop {
            let hi = highest_equiv(level);
            let cum = cum_at(hi);
            if cum > prev {
                out.push((hi / 1000, cum));
            }
            prev = cum;
            if cum >= self.total || level > MAX_NS {
                break;
            }
            level *= 2;
        }
        out
    }
}

/// A percentile as Redis prints it in INFO (`50`, `99.9`): `%f` without trailing zeros.
pub fn percentile_label(p: f64) -> String {
    let s = format!("{p:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

// ---------------------------------------------------------------------------------------------
// The latency monitor
// ---------------------------------------------------------------------------------------------

/// Samples kept per event, as Redis (LATENCY_TS_LEN).
const SAMPLES: usize = 160;

#[derive(Clone, Copy, Default)]
pub struct Sample {
    pub time: i64,
    pub ms: u64,
}

/// One event's series: a ring of samples (at most one per second) and its all-time maximum.
pub struct Series {
    samples: [Sample; SAMPLES],
    next: usize,
    pub max: u64,
}

impl Series {
    fn add(&mut self, time: i64, ms: u64) {
        self.max = self.max.max(ms);
        let prev = &mut self.samples[(self.next + SAMPLES - 1) % SAMPLES];
        if prev.time == time {
            prev.ms = prev.ms.max(ms);
            return;
        }
        self.samples[self.next] = Sample { time, ms };
        self.next = (self.next + 1) % SAMPLES;
    }

    /// The samples, oldest first.
    pub fn samples(&self) -> Vec<Sample> {
        (0..SAMPLES).map(|i| self.samples[(self.next + i) % SAMPLES]).filter(|s| s.time != 0).collect()
    }

    pub fn latest(&self) -> Sample {
        self.samples[(self.next + SAMPLES - 1) % SAMPLES]
    }
}

/// Events by name (`command`, `fast-command`, `expire-cycle` …), in the order first seen.
#[derive(Default)]
pub struct Monitor {
    events: Mutex<(Vec<String>, HashMap<String, Series>), { rank::LEAF }>,
}

impl Monitor {
    /// Adds a sample of `ms` for `event` at unix second `time`.
    pub fn add(&self, event: &str, time: i64, ms: u64) {
        let mut g = self.events.lock();
        let (order, map) = &mut *g;
        let s = map.entry(event.to_string()).or_insert_with(|| {
            order.push(event.to_string());
            Series { samples: [Sample::default(); SAMPLES], next: 0, max: 0 }
        });
        s.add(time, ms);
    }

    /// Calls `f` with the events in the order first seen.
    pub fn with<R>(&self, f: impl FnOnce(&[String], &HashMap<String, Series>) -> R) -> R {
        let g = self.events.lock();
        f(&g.0, &g.1)
    }

    /// Deletes the named events (case-insensitive), or all of them; returns how many.
    pub fn reset(&self, names: &[&[u8]]) -> usize {
        let mut g = self.events.lock();
        let (order, map) = &mut *g;
        let before = order.len();
        if names.is_empty() {
            order.clear();
            map.clear();
        } else {
            order.retain(|e| !names.iter().any(|n| n.eq_ignore_ascii_case(e.as_bytes())));
            map.retain(|k, _| order.contains(k));
        }
        before - order.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn merged(us: &[u64]) -> Merged {
        let h = Hist::new();
        for &u in us {
            h.record(u);
        }
        Merged::of(std::iter::once(&h)).unwrap()
    }

    /// Figures read off Redis 7.2.6 (INFO latencystats and LATENCY HISTOGRAM).
    #[test]
    fn percentiles_and_buckets_print_as_redis() {
        let m = merged(&[10]);
        assert_eq!(format!("{:.3}", m.value_at_percentile(50.0) as f64 / 1000.0), "10.047");
        assert_eq!(format!("{:.3}", m.value_at_percentile(0.0) as f64 / 1000.0), "9.984");
        let m = merged(&[0]);
        assert_eq!(format!("{:.3}", m.value_at_percentile(99.9) as f64 / 1000.0), "0.001");
        let mut set = vec![0u64; 294];
        set.extend([1, 1, 1, 2, 2, 7]);
        let m = merged(&set);
        assert_eq!(m.usec_buckets(), vec![(1, 297), (2, 299), (8, 300)]);
        assert_eq!(format!("{:.3}", m.value_at_percentile(99.0) as f64 / 1000.0), "1.003");
        assert_eq!(format!("{:.3}", m.value_at_percentile(100.0) as f64 / 1000.0), "7.007");
        assert_eq!(percentile_label(99.9), "99.9");
        assert_eq!(percentile_label(50.0), "50");
    }

    #[test]
    fn the_small_table_is_index_of() {
        for us in 0..64u64 {
            assert_eq!(SMALL[us as usize] as usize, index_of((us * 1000).max(1)), "{us}");
        }
    }

    #[test]
    fn monitor_keeps_one_sample_per_second_and_the_max() {
        let m = Monitor::default();
        m.add("command", 100, 20);
        m.add("command", 100, 30);
        m.add("command", 101, 10);
        m.with(|order, map| {
            assert_eq!(order, ["command"]);
            let s = &map["command"];
            assert_eq!(s.samples().iter().map(|s| (s.time, s.ms)).collect::<Vec<_>>(), [(100, 30), (101, 10)]);
            assert_eq!(s.max, 30);
        });
        assert_eq!(m.reset(&[b"COMMAND", b"nosuch"]), 1);
    }
}
