//! Offering a candidate owner for a lock that records none (Rust's std locks, glibc's internal
//! ones): a thread that holds such a lock keeps a guard pointing at it on its stack. A pointer
//! into the lock on exactly one other thread's stack makes that thread the *inferred* owner —
//! reported as such, with the evidence, never as a fact.

use super::evidence::{PointerPlace, ReaderEvidence};
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
    /// Registers a function keeps a pointer in across a call (callee-saved, and the argument
    /// registers of the call it is in).
    pub(crate) saved: Vec<(&'static str, u64)>,
}

impl StackRange {
    pub(crate) fn of(tid: u32, regs: &crate::arch::Registers) -> StackRange {
        let saved = match regs {
            crate::arch::Registers::X86_64(r) => {
                vec![("rbx", r.rbx), ("rbp", r.rbp), ("r12", r.r12), ("r13", r.r13), ("r14", r.r14), ("r15", r.r15), ("rdi", r.rdi), ("rsi", r.rsi)]
            }
            // x19–x28 and the first two argument registers (x29 is the frame pointer).
            crate::arch::Registers::Aarch64(r) => {
                const NAMES: [&str; 10] = ["x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27", "x28"];
                let mut v: Vec<(&'static str, u64)> = NAMES.iter().zip(&r.x[19..29]).map(|(n, v)| (*n, *v)).collect();
                v.extend([("x0", r.x[0]), ("x1", r.x[1])]);
                v
            }
        };
        StackRange { tid, sp: regs.sp(), saved }
    }
}

/// Threads (other than `exclude`) with a pointer into `[lo, hi)` in a register or on their
/// stack (from the stack pointer up): which thread, where (the register or stack address), the
/// pointer. The budget as for [`pointer_holders`].
pub(crate) fn pointers_into(process: &Process, stacks: &[StackRange], lo: u64, hi: u64, exclude: &[u32], budget: &mut u64) -> Option<Vec<ReaderEvidence>> {
    let mut out = Vec::new();
    for s in stacks.iter().filter(|s| !exclude.contains(&s.tid)) {
        if let Some((name, v)) = s.saved.iter().find(|(_, v)| *v >= lo && *v < hi) {
            out.push(ReaderEvidence { tid: s.tid, place: PointerPlace::Register(name), value: *v });
            continue;
        }
        let one = StackRange { tid: s.tid, sp: s.sp, saved: s.saved.clone() };
        match scan(process, &one, lo, hi.saturating_sub(1), budget)? {
            Some((at, v)) => out.push(ReaderEvidence { tid: s.tid, place: PointerPlace::Stack(at), value: v }),
            None => {}
        }
    }
    Some(out)
}

/// Threads (other than `exclude`) whose stack holds a pointer into `[futex - 64, futex]`, with
/// the stack address of the first such pointer.
/// `budget` is decremented by the words searched; `None` when it ran out before the search ended.
pub(crate) fn pointer_holders(process: &Process, stacks: &[StackRange], futex: u64, exclude: &[u32], budget: &mut u64) -> Option<Vec<(u32, u64, u64)>> {
    let lo = futex.saturating_sub(LOCK_SPAN_BEFORE);
    let mut out = Vec::new();
    for s in stacks.iter().filter(|s| !exclude.contains(&s.tid)) {
        if let Some((at, v)) = scan(process, s, lo, futex, budget)? {
            out.push((s.tid, at, v));
        }
    }
    Some(out)
}

/// The first word of `s`'s stack (from its stack pointer up) in `[lo, hi]`: where and what.
/// `None` when the budget ran out.
fn scan(process: &Process, s: &StackRange, lo: u64, hi: u64, budget: &mut u64) -> Option<Option<(u64, u64)>> {
    let Some(words) = StackWords::new(process, s.sp, MAX_STACK_WORDS * 8) else { return Some(None) };
    if words.spans_nothing() {
        return Some(None);
    }
    if *budget == 0 {
        return None;
    }
    let scanned = words.len();
    let found = words.into_iter().find(|&(_, v)| v >= lo && v <= hi);
    // Thousands of stacks are scanned per lock: their pages go back to the kernel as each is
    // done (peak RSS, not CPU, is what they would cost).
    process.core.done_with_segment_at(s.sp);
    match found {
        Some(found) => Some(Some(found)),
        None => {
            *budget = budget.saturating_sub(scanned);
            Some(None)
        }
    }
}
