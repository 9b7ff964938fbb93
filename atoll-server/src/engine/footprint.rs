//! What a value occupies in Atoll's heap, for MEMORY USAGE: every allocation its structures
//! hold, at the allocator's size class (`alloc::usable`, what INFO `used_memory` counts) —
//! measured from Atoll's own layout, not modelled on Redis's.
//!
//! As Redis's SAMPLES: the allocations made per element of a collection (its nodes, member
//! and value bytes) are measured on the first `samples` elements (0: all of them), and their
//! mean is multiplied by the element count; the collection's own arrays are counted whole.
//! Ordered maps from `std` (stream nodes, consumer groups, pending entries, field deadlines in
//! time order) do not expose their node allocations: they are counted from the B-tree's node
//! layout (see [`btree`]), an estimate within a few per cent of the allocator's count.

/// The allocator's size class for `n` bytes (0 for none).
#[inline]
pub fn cls(n: usize) -> usize {
    crate::alloc::usable(n)
}

/// A `Vec`'s or boxed slice's buffer: `cap` elements of `T`.
#[inline]
pub fn array<T>(cap: usize) -> usize {
    cls(cap * std::mem::size_of::<T>())
}

/// A `std` B-tree of `n` elements of `K` and `V`: its nodes hold up to 11, and keys that
/// arrive in ascending order (stream IDs, pending entries) leave each full node split at 6,
/// so leaves hold 6 and an internal node (12 more edge pointers) stands above every 6 of them.
pub fn btree<K, V>(n: usize) -> usize {
    const CAPACITY: usize = 11;
    const FILL: usize = 6;
    let leaf = 16 + CAPACITY * (std::mem::size_of::<K>() + std::mem::size_of::<V>());
    let leaves = n.div_ceil(FILL);
    let internal = if leaves > 1 { leaves.div_ceil(FILL) } else { 0 };
    leaves * cls(leaf) + internal * cls(leaf + 8 * (CAPACITY + 1))
}

/// Per-element allocations: measured on the first `samples` elements (0: all), extrapolated
/// to the count.
pub struct Sampler {
    samples: usize,
    sum: usize,
    seen: usize,
}

impl Sampler {
    pub fn new(samples: usize) -> Sampler {
        Sampler { samples, sum: 0, seen: 0 }
    }

    /// More elements are to be measured.
    #[inline]
    pub fn wants(&self) -> bool {
        self.samples == 0 || self.seen < self.samples
    }

    #[inline]
    pub fn add(&mut self, bytes: usize) {
        self.sum += bytes;
        self.seen += 1;
    }

    /// The measured elements' mean times `count`.
    pub fn total(&self, count: usize) -> usize {
        if self.seen == 0 || self.seen >= count {
            self.sum
        } else {
            (self.sum as f64 / self.seen as f64 * count as f64) as usize
        }
    }
}
