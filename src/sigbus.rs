//! A mapped file that shrinks while knot reads it: reads past its new end would raise SIGBUS
//! and kill knot (a dump being rewritten, a watcher's dump truncated by its producer). Instead,
//! each mapping knot reads is registered here, and a SIGBUS handler that finds the faulting
//! address in one maps zero pages over the rest of that mapping, marks it, and returns: the read
//! completes with zeros, and the owner asks [`Guard::faulted`] afterwards and reports the file
//! as changed while it was read (a clean error, not a crash, and not a reading of zeros taken for
//! the dump). A fault anywhere else goes to the handler that was there before (Rust's stack-
//! overflow report, or the default action).
//!
//! Why this design: copying every core into memory is not possible for the 8 GiB cores knot
//! reads; checking the file's length before each access still races with the truncation; and
//! unwinding out of a signal handler is not sound in Rust. Replacing the vanished pages is what
//! the kernel would have to do anyway, the handler uses only `mmap` (a system call) and atomics,
//! and nothing that reads the mapping has to change.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;

const SLOTS: usize = 256;

struct Slot {
    start: AtomicUsize,
    end: AtomicUsize,
    faulted: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot { start: AtomicUsize::new(0), end: AtomicUsize::new(0), faulted: AtomicBool::new(false) };
static REGISTRY: [Slot; SLOTS] = [EMPTY; SLOTS];
/// The handler that was installed before ours, to pass other faults on to.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();
static PAGE: AtomicUsize = AtomicUsize::new(4096);

/// A registered mapping; dropping it unregisters the range (before the mapping is unmapped).
#[derive(Debug)]
pub(crate) struct Guard {
    slot: Option<usize>,
}

impl Guard {
    /// Whether a read fell past the file's end since the mapping was made: the file shrank
    /// while knot read it, and what was read there is zeros, not the file.
    pub(crate) fn faulted(&self) -> bool {
        self.slot.is_some_and(|i| REGISTRY[i].faulted.load(Ordering::Acquire))
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            REGISTRY[i].end.store(0, Ordering::Release);
            REGISTRY[i].faulted.store(false, Ordering::Release);
            REGISTRY[i].start.store(0, Ordering::Release);
        }
    }
}

/// Registers the mapping `bytes` (the whole of a file's mapping). When every slot is taken the
/// mapping is read unguarded, as before.
pub(crate) fn guard(bytes: &[u8]) -> Guard {
    install();
    let page = PAGE.load(Ordering::Relaxed);
    let start = bytes.as_ptr() as usize;
    let end = (start + bytes.len()).div_ceil(page) * page;
    for (i, s) in REGISTRY.iter().enumerate() {
        if s.start.compare_exchange(0, usize::MAX, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            s.faulted.store(false, Ordering::Release);
            s.end.store(end, Ordering::Release);
            s.start.store(start, Ordering::Release);
            return Guard { slot: Some(i) };
        }
    }
    Guard { slot: None }
}

fn install() {
    PREVIOUS.get_or_init(|| {
        // SAFETY: sysconf and sigaction with a zeroed, then filled, sigaction; the handler is an
        // `extern "C"` function that only uses atomics and mmap.
        unsafe {
            let page = libc::sysconf(libc::_SC_PAGESIZE);
            if page > 0 {
                PAGE.store(page as usize, Ordering::Relaxed);
            }
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = on_sigbus as *const () as usize;
            new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut new.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(libc::SIGBUS, &new, &mut old);
            old
        }
    });
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = PAGE.load(Ordering::Relaxed);
    for s in &REGISTRY {
        let (start, end) = (s.start.load(Ordering::Acquire), s.end.load(Ordering::Acquire));
        if start == 0 || start == usize::MAX || addr < start || addr >= end {
            continue;
        }
        let from = addr & !(page - 1);
        // SAFETY: replaces pages of a mapping knot owns, read-only, with zero pages; the range
        // lies inside that mapping, which stays mapped while its guard lives.
        let r = unsafe {
            libc::mmap(from as *mut libc::c_void, end - from, libc::PROT_READ, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED, -1, 0)
        };
        if r != libc::MAP_FAILED {
            s.faulted.store(true, Ordering::Release);
            return;
        }
    }
    // Not ours: what would have happened without this handler.
    if let Some(prev) = PREVIOUS.get() {
        let h = prev.sa_sigaction;
        if h != libc::SIG_DFL && h != libc::SIG_IGN {
            if prev.sa_flags & libc::SA_SIGINFO != 0 {
                // SAFETY: the previous handler was installed as an SA_SIGINFO handler.
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) = unsafe { std::mem::transmute(h) };
                f(sig, info, ctx);
            } else {
                // SAFETY: the previous handler was installed as a plain handler.
                let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(h) };
                f(sig);
            }
            return;
        }
    }
    // SAFETY: restoring the default action; the faulting access repeats and kills the process
    // as it would have.
    unsafe {
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
    }
}
