//! Offering a candidate owner for a lock that records none (Rust's std locks, glibc's internal
//! ones): a thread that holds such a lock keeps a guard pointing at it on its stack. A pointer
//! into the lock on exactly one other thread's stack makes that thread the *inferred* owner —
//! reported as such, with the evidence, never as a fact.

use crate::process::{Process, StackWords};

/// How far before the futex word a guard's pointer may point (the lock structure's start).
const LOCK_SPAN_BEFORE: u64 = 64;
/// Words of stack searched per thread at most.
const MAX_STACK_WORDS: u64 = 128 * 1024;
/// Words searched by all inferences of one analysis at most (many threads × many unowned locks
/// must not turn into hours).
pub(crate) const TOTAL_BUDGET_WORDS: u64 = 32 << 20;

pub(crate) struct StackRange {
    pub(crate) tid: u32,
    pub(crate) sp: u64,
}

/// Threads (other than `exclude`) whose stack holds a pointer into `[futex - 64, futex]`, with
/// the stack address of the first such pointer.
/// `budget` is decremented by the words searched; `None` when it ran out before the search ended.
pub(crate) fn pointer_holders(process: &Process, stacks: &[StackRange], futex: u64, exclude: &[u32], budget: &mut u64) -> Option<Vec<(u32, u64, u64)>> {
    let lo = futex.saturating_sub(LOCK_SPAN_BEFORE);
    let mut out = Vec::new();
    for s in stacks.iter().filter(|s| !exclude.contains(&s.tid)) {
        let Some(words) = StackWords::new(process, s.sp, MAX_STACK_WORDS * 8) else { continue };
        if words.spans_nothing() {
            continue;
        }
        if *budget == 0 {
            return None;
        }
        let scanned = words.len();
        match words.into_iter().find(|&(_, v)| v >= lo && v <= futex) {
            Some((at, v)) => out.push((s.tid, at, v)),
            None => *budget = budget.saturating_sub(scanned),
        }
    }
    Some(out)
}
