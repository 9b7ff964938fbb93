//! The process's allocator: jemalloc, counting the bytes it hands out (INFO `used_memory`, the
//! figure `maxmemory` is enforced against).
//!
//! jemalloc's own `stats.allocated` needs an `epoch` refresh (a global lock, microseconds) and
//! counts objects parked in thread caches as still allocated, so memory an eviction just freed
//! would not show for a while. Redis counts in its `zmalloc` wrapper instead; so does this one,
//! written here because no kept crate counts per thread without an atomic operation per call:
//! each thread adds the size class of what it allocates and frees (jemalloc's `nallocx`, the
//! usable size Redis counts) to a thread-local figure and moves it to the global counter once
//! it exceeds 64 KB either way. Reading is one atomic load; the count is exact to 64 KB per thread.
//!
//! Builds for the sanitizers (`--features system-alloc`, `bench/sanitizers.sh`) count over the
//! system allocator instead, which AddressSanitizer and ThreadSanitizer intercept: under
//! jemalloc they would not see the Rust heap at all (and ThreadSanitizer's start-up crashes).

#[cfg(feature = "system-alloc")]
use std::alloc::System as Inner;
use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, Ordering};
#[cfg(not(feature = "system-alloc"))]
use tikv_jemallocator::Jemalloc as Inner;

/// Bytes allocated, less what the threads have not moved here yet.
static USED: AtomicIsize = AtomicIsize::new(0);
const FLUSH_AT: isize = 64 * 1024;

thread_local! {
    static LOCAL: Cell<isize> = const { Cell::new(0) };
}

/// jemalloc with byte counting (see the module's notes).
pub struct Counting;

#[cfg(feature = "system-alloc")]
#[inline]
fn class_size(size: usize, _align: usize) -> isize {
    size.max(1) as isize
}

#[cfg(not(feature = "system-alloc"))]
#[inline]
fn class_size(size: usize, align: usize) -> isize {
    // MALLOCX_LG_ALIGN only when the alignment exceeds what the size class gives anyway, as
    // tikv-jemallocator passes it.
    let flags = if align <= 16 && align <= size { 0 } else { align.trailing_zeros() as i32 };
    // SAFETY: nallocx only computes a size class.
    (unsafe { tikv_jemalloc_sys::nallocx(size.max(1), flags) }) as isize
}

/// The bytes the allocator hands out for a request of `size` bytes (its size class; 0 for
/// nothing allocated), for figures that measure the heap a structure holds (MEMORY USAGE).
pub fn usable(size: usize) -> usize {
    if size == 0 {
        0
    } else {
        class_size(size, 8) as usize
    }
}

#[inline]
fn account(delta: isize) {
    // `try_with`: a thread being torn down counts straight into the global figure.
    let flushed = LOCAL.try_with(|l| {
        let v = l.get() + delta;
        if !(-FLUSH_AT..=FLUSH_AT).contains(&v) {
            USED.fetch_add(v, Ordering::Relaxed);
            l.set(0);
        } else {
            l.set(v);
        }
    });
    if flushed.is_err() {
        USED.fetch_add(delta, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded to the allocator unchanged; only counting is added.
unsafe impl GlobalAlloc for Counting {
    #[inline]
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = Inner.alloc(l);
        if !p.is_null() {
            account(class_size(l.size(), l.align()));
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = Inner.alloc_zeroed(l);
        if !p.is_null() {
            account(class_size(l.size(), l.align()));
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        account(-class_size(l.size(), l.align()));
        Inner.dealloc(p, l)
    }

    #[inline]
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new_size: usize) -> *mut u8 {
        let q = Inner.realloc(p, l, new_size);
        if !q.is_null() {
            account(class_size(new_size, l.align()) - class_size(l.size(), l.align()));
        }
        q
    }
}

/// Bytes the process has allocated (Redis's `zmalloc_used_memory`), including what this thread
/// has not flushed yet. 0 when the counting allocator is not the global one (unit tests).
/// What the allocator really hands out for a request of `size` bytes (its size class): the
/// figure `used_memory` counts for it.
pub fn usable_size(size: usize) -> u64 {
    if size == 0 {
        0
    } else {
        class_size(size, 1).max(0) as u64
    }
}

pub fn used_memory() -> u64 {
    let own = LOCAL.try_with(|l| l.get()).unwrap_or(0);
    (USED.load(Ordering::Relaxed) + own).max(0) as u64
}
