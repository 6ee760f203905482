//! The unit tests' allocator: the system's, counting. Two measures prove memory bounds on hostile
//! input: the largest single allocation made on the current thread (`largest_allocation`, for
//! the core and file readers, which run on the caller's thread), and the peak of live heap bytes
//! process-wide (`peak_above_start`, for an analysis, which runs on rayon's threads too; its
//! callers run one at a time through `PEAK_SERIAL`, and the bounds they check leave room for
//! the other tests of the binary running beside them). A request above `REFUSE_ABOVE` is
//! refused (null), so that a hostile size cannot take the machine's memory.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// Above this a request is refused (null: the allocation error handler aborts, which the test
/// would report as a crash) rather than handed to the system.
const REFUSE_ABOVE: usize = 4 << 30;

/// The tests measuring a process-wide peak run one at a time, so that one's peak is its own.
pub(crate) static PEAK_SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn grew(n: usize) {
    let _ = LARGEST.try_with(|c| c.set(c.get().max(n)));
    let now = LIVE.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: forwards every call to the system allocator; only counts bytes, and refuses absurd sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > REFUSE_ABOVE {
            return std::ptr::null_mut();
        }
        grew(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() > REFUSE_ABOVE {
            return std::ptr::null_mut();
        }
        grew(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > REFUSE_ABOVE {
            return std::ptr::null_mut();
        }
        grew(new_size);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f` and returns its result with the largest single allocation it made on this thread.
pub(crate) fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|c| c.set(0));
    let out = f();
    (out, LARGEST.with(|c| c.get()))
}

/// Runs `f` and returns its result with the peak of live heap bytes above those at its start.
pub(crate) fn peak_above_start<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let start = LIVE.load(Ordering::Relaxed);
    PEAK.store(start, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed).saturating_sub(start))
}
