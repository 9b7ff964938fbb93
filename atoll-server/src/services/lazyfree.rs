//! Background freeing (Redis's `lazyfree.c`). UNLINK — and DEL under `lazyfree-lazy-user-del`
//! — take the key out of the keyspace at once but hand a value that takes long to free (a big
//! set, hash, sorted set, quicklist or stream) to one freeing thread, so the command's latency
//! and the shard lock's hold time do not grow with the value's size. Small values are freed
//! in place: a channel send costs more than freeing them. FLUSHALL/FLUSHDB ASYNC (or under
//! `lazyfree-lazy-user-flush`) hand over whole shard tables, counted as their keys.
//!
//! INFO reports `lazyfree_pending_objects` (handed over, not yet freed) and
//! `lazyfreed_objects` (freed in the background since the last CONFIG RESETSTAT).

use crate::engine::Obj;
use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, OnceLock};

/// Redis's `LAZYFREE_THRESHOLD`: values whose free effort is at most this are freed in place.
pub const THRESHOLD: usize = 64;

#[derive(Default)]
struct Counters {
    pending: AtomicU64,
    freed: AtomicU64,
}

/// Something to drop, standing for `objects` freed objects.
struct Job {
    what: Box<dyn Any + Send>,
    objects: u64,
}

#[derive(Default)]
pub struct LazyFree {
    /// The freeing thread's queue, started on first use (most servers never need it).
    /// `Sender` is `Sync`, so workers send on it without a lock.
    tx: OnceLock<Sender<Job>>,
    counters: Arc<Counters>,
}

impl LazyFree {
    /// Frees `obj`: in the background if that is worth it, else here.
    pub fn free(&self, obj: Obj) {
        if obj.val.free_effort() > THRESHOLD {
            self.hand_over(Box::new(obj), 1);
        }
    }

    /// Frees `what` — the tables of a flushed database holding `objects` keys — in the
    /// background, whatever its size (as Redis's `emptyDbAsync`).
    pub fn free_table<T: Send + 'static>(&self, what: T, objects: u64) {
        self.hand_over(Box::new(what), objects);
    }

    fn hand_over(&self, what: Box<dyn Any + Send>, objects: u64) {
        self.counters.pending.fetch_add(objects, Ordering::Relaxed);
        let tx = self.tx.get_or_init(|| {
            let (tx, rx) = channel::<Job>();
            let c = self.counters.clone();
            std::thread::Builder::new()
                .name("lazyfree".into())
                .spawn(move || {
                    for job in rx {
                        drop(job.what);
                        c.freed.fetch_add(job.objects, Ordering::Relaxed);
                        c.pending.fetch_sub(job.objects, Ordering::Relaxed);
                    }
                })
                .expect("spawning the lazyfree thread");
            tx
        });
        if let Err(e) = tx.send(Job { what, objects }) {
            // The thread is gone (it cannot panic on a drop, but be safe): free it here.
            drop(e.0);
            self.counters.pending.fetch_sub(objects, Ordering::Relaxed);
        }
    }

    pub fn pending(&self) -> u64 {
        self.counters.pending.load(Ordering::Relaxed)
    }

    pub fn freed(&self) -> u64 {
        self.counters.freed.load(Ordering::Relaxed)
    }

    /// CONFIG RESETSTAT.
    pub fn reset_stats(&self) {
        self.counters.freed.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Value;

    fn wait_freed(lf: &LazyFree, n: u64) {
        for _ in 0..1000 {
            if lf.freed() == n && lf.pending() == 0 {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        panic!("freed {} pending {}", lf.freed(), lf.pending());
    }

    #[test]
    fn small_values_are_freed_in_place_big_ones_in_the_background() {
        let lf = LazyFree::default();
        lf.free(Obj { val: Value::from_bytes(b"small"), lru: 0 });
        assert_eq!((lf.freed(), lf.pending()), (0, 0));
        let lim = crate::engine::set::SetLimits { intset_entries: 16, listpack_entries: 16, listpack_value: 16 };
        let mut set = crate::engine::set::Set::default();
        for i in 0..1000 {
            set.add(format!("member:{i}").as_bytes(), &lim);
        }
        assert!(Value::Set(set.clone()).free_effort() > THRESHOLD);
        lf.free(Obj { val: Value::Set(set), lru: 0 });
        wait_freed(&lf, 1);
        lf.reset_stats();
        assert_eq!(lf.freed(), 0);
    }
}
