//! Who holds a lock that records no holder — a Rust std lock's owner, a pthread rwlock's readers:
//! a thread that holds one keeps a pointer to it (a guard's) or to the object it is part of in one
//! of its frames while it works. Each candidate is said with that frame and the slot or register
//! that holds the pointer. Only a pointer into the lock's own object counts — its data symbol's
//! bounds, or the lock's own bytes when no symbol names it — never one into a neighbour.

use super::ThreadInput;
use super::catalog::Catalog;
use super::evidence::{FrameHold, PointerPlace};
use super::frame_slots;
use crate::process::{Process, StackWords};
use crate::symbols::Symbolizer;

/// Stack slots searched in one frame at most.
const MAX_FRAME_WORDS: u64 = 64 * 1024;
/// Words searched by all the inferences of one analysis at most (many threads × many
/// ownerless locks must not turn into hours).
pub(crate) const TOTAL_BUDGET_WORDS: u64 = 32 << 20;

/// The object a lock is part of: where a pointer counts as pointing at the lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LockObject {
    pub(crate) start: u64,
    pub(crate) end: u64,
}

impl LockObject {
    /// The data symbol that holds the lock at `addr` (a global struct whose field it is, a
    /// Rust static), else the lock's own `size` bytes.
    pub(crate) fn of(symbolizer: &Symbolizer<'_>, addr: u64, size: u64) -> LockObject {
        let own = LockObject { start: addr, end: addr.saturating_add(size.max(1)) };
        match symbolizer.data_object(addr) {
            Some((start, len)) if len > 0 && start <= addr && addr < start.saturating_add(len) => LockObject { start, end: start.saturating_add(len).max(own.end) },
            _ => own,
        }
    }

    fn holds(&self, v: u64) -> bool {
        v >= self.start && v < self.end
    }
}

/// For every thread but `exclude` (the lock's waiters), the innermost frame outside any lock
/// family's own functions (`catalog`) that keeps a pointer into `object` in a stack slot it owns
/// or a register known in it. `None` when the budget ran out before the search ended.
pub(crate) fn frames_pointing_into(process: &Process, catalog: &Catalog, threads: &[ThreadInput<'_>], object: &LockObject, exclude: &[u32], budget: &mut u64) -> Option<Vec<FrameHold>> {
    let machinery = |name: &str| catalog.families.iter().any(|f| f.entry.iter().any(|e| e == name));
    let mut out = Vec::new();
    for t in threads.iter().filter(|t| !exclude.contains(&t.tid)) {
        let frames = frame_slots::frames(t);
        'frames: for (i, f) in frames.iter().enumerate() {
            let name = t.functions.get(f.index).copied().filter(|n| !n.is_empty());
            // A frame of a lock's own functions holds the lock it is taking, not one it holds
            // (a lock call inlined into the program's function leaves the frame the program's).
            if name.is_some_and(machinery) {
                continue;
            }
            let found = |place: PointerPlace, value: u64| FrameHold { tid: t.tid, frame: f.index, function: name.map(str::to_string), place, value };
            // A register keeps its value across the frames that do not touch it: it is said of
            // the outermost frame that still has it.
            for (reg, v) in f.registers() {
                if object.holds(v) {
                    let outermost = frames[i..].iter().take_while(|g| g.registers().iter().any(|&(r, x)| r == reg && x == v)).last().map_or(f.index, |g| g.index);
                    let function = t.functions.get(outermost).copied().filter(|n| !n.is_empty()).map(str::to_string);
                    out.push(FrameHold { tid: t.tid, frame: outermost, function, place: PointerPlace::Register(reg), value: v });
                    break 'frames;
                }
            }
            // The outermost frame (the thread's start, or where the walk ended) owns no slots
            // that are known: above it lies the thread's descriptor, with its start argument.
            let (lo, Some(hi)) = f.slots else { continue };
            let words = hi.saturating_sub(lo).min(MAX_FRAME_WORDS * 8);
            if *budget == 0 {
                return None;
            }
            let Some(slots) = StackWords::new(process, lo, words) else { continue };
            *budget = budget.saturating_sub(slots.len());
            for (at, v) in slots {
                if object.holds(v) {
                    out.push(found(PointerPlace::Stack(at), v));
                    break 'frames;
                }
            }
        }
    }
    Some(out)
}
