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
