//! A thread the kernel refused a priority-inheritance mutex. `FUTEX_LOCK_PI` fails with EDEADLK
//! when the wait would close a cycle of PI owners; for a mutex that is neither error-checking
//! nor recursive, glibc's `pthread_mutex_lock` does not return that but parks the thread for
//! good (`__futex_abstimed_wait64` on a zero word of its own stack). The word is no lock: the
//! thread waits for the mutex it was refused, which its lock frames still point into.

use super::catalog::Family;
use super::evidence::PointerPlace;
use super::frame_slots;
use super::readers;
use super::ThreadInput;
use crate::process::{Memory, Process};

/// How far into a `pthread_mutex_t` a pointer a lock function keeps may point (its `__data`).
const MUTEX_SPAN: u64 = 40;
/// A mapping's write permission: a mutex is written by whoever takes it (never in code).
const PF_W: u32 = 2;
/// Stack slots of one frame searched at most.
const MAX_FRAME_WORDS: u64 = 4096;

/// The mutex a parked thread was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) mutex: u64,
    /// The report's frame that holds the pointer.
    pub(crate) frame: usize,
    pub(crate) place: PointerPlace,
    /// The pointer (into the mutex).
    pub(crate) value: u64,
}

/// For thread `t`, asleep on `word` inside the mutex family's frame `entry` (a word that is no
/// mutex): the PI mutex it was refused, or why it cannot be said.
/// Whether a wait inside a mutex's functions is glibc's park for good: `FUTEX_WAIT` expecting 0
/// (or `FUTEX_WAIT_BITSET`) on a zero word of the thread's own stack (a mutex's waiter expects its word to say locked,
/// and a PI mutex's waits in `FUTEX_LOCK_PI`).
pub(crate) fn parked(process: &Process, t: &ThreadInput<'_>, word: u64, expected: u32, op: &str) -> bool {
    let sp = t.registers.sp();
    expected == 0 && matches!(op, "FUTEX_WAIT" | "FUTEX_WAIT_BITSET") && process.core.segments.find(sp).is_some_and(|s| word >= sp && word < s.end()) && process.read_u32(word).ok() == Some(0)
}

/// `own_tid` is the thread's tid as the process numbers it (a mutex it holds itself is not the one).
pub(crate) fn find(process: &Process, family: &Family, t: &ThreadInput<'_>, own_tid: u32, entry: usize, word: u64) -> Result<Refusal, String> {
    let on_own_stack = process.core.segments.find(t.registers.sp()).is_some_and(|s| word >= t.registers.sp() && word < s.end());
    if !on_own_stack || process.read_u32(word).ok() != Some(0) {
        return Err(format!("it sleeps on {word:#x} inside {}, a word that is no pthread_mutex_t: no lock is read there", name(t, entry)));
    }
    // The lock's own frames, from the one that parked it out to the first caller past them.
    let frames = frame_slots::frames(t);
    let Some(start) = frames.iter().position(|f| f.has_name(entry) || f.index >= entry) else {
        return Err(format!("its frames past {} are not known", name(t, entry)));
    };
    let mut found: Vec<Refusal> = Vec::new();
    let note = |found: &mut Vec<Refusal>, frame: usize, place: PointerPlace, value: u64| {
        for off in (0..MUTEX_SPAN).step_by(4) {
            let Some(mutex) = value.checked_sub(off) else { break };
            let writable = process.core.segments.find(mutex).is_some_and(|seg| seg.flags & PF_W != 0);
            if writable && readers::pi_mutex_owner(family, process, mutex).is_some_and(|owner| owner != own_tid) && !found.iter().any(|r| r.mutex == mutex) {
                found.push(Refusal { mutex, frame, place, value });
            }
        }
    };
    for f in frames.iter().skip(start) {
        for (reg, v) in f.registers() {
            note(&mut found, f.index, PointerPlace::Register(reg), v);
        }
        let (lo, hi) = f.slots;
        let hi = hi.unwrap_or(lo).min(lo.saturating_add(MAX_FRAME_WORDS * 8));
        if let Some(words) = crate::process::StackWords::new(process, lo, hi.saturating_sub(lo)) {
            for (at, v) in words {
                note(&mut found, f.index, PointerPlace::Stack(at), v);
            }
        }
        // Past the lock's own functions, one caller more (it passed the mutex), no further.
        if !f.names.clone().any(|i| t.functions.get(i).is_some_and(|n| family.entry.iter().any(|e| e == n))) {
            break;
        }
    }
    match found.as_slice() {
        [one] => Ok(*one),
        [] => Err(format!("it sleeps for good on {word:#x}, a word of its own stack, inside {}: the kernel refused it a priority-inheritance mutex (EDEADLK), but no frame of it points into one", name(t, entry))),
        many => Err(format!(
            "it sleeps for good on {word:#x}, a word of its own stack, inside {}: refused a priority-inheritance mutex (EDEADLK), but its frames point into {} of them ({})",
            name(t, entry),
            many.len(),
            many.iter().map(|r| format!("{:#x}", r.mutex)).collect::<Vec<_>>().join(", ")
        )),
    }
}

fn name<'a>(t: &ThreadInput<'a>, i: usize) -> &'a str {
    t.functions.get(i).copied().filter(|n| !n.is_empty()).unwrap_or("pthread_mutex_lock")
}
