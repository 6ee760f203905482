//! A thread's frames as places that hold values: each physical frame's stack slots (from its
//! stack pointer up to its caller's) and the registers known in it (callee-saved ones recovered
//! by the walk; every register in the innermost frame). Where a thread keeps a pointer is said
//! as the frame that holds it and the slot or register it is in.

use super::ThreadInput;
use crate::unwind::Frame;

/// One physical frame of a thread.
pub(crate) struct FrameSlots<'a> {
    /// The report's index of the frame (its outermost name: the function that owns the
    /// frame, after any inlined into it).
    pub(crate) index: usize,
    /// The report's indices of every name the frame has (its inlined calls first).
    pub(crate) names: std::ops::RangeInclusive<usize>,
    pub(crate) frame: &'a Frame,
    /// The stack slots the frame owns: `[its sp, its caller's sp)` (the outermost frame's end
    /// is unknown: `None`).
    pub(crate) slots: (u64, Option<u64>),
}

/// The thread's physical frames, innermost first, each tied to its names in the report
/// (`threads::build` gives each physical frame its tail-call frames, then its inlined calls,
/// then itself; a runtime's transition records stand between).
pub(crate) fn frames<'a>(t: &ThreadInput<'a>) -> Vec<FrameSlots<'a>> {
    let stack = t.stack;
    let mut out = Vec::with_capacity(stack.frames.len());
    let mut first_name = None;
    let mut physical = 0usize;
    for (i, f) in t.frames.iter().enumerate() {
        if f.tail_call {
            continue;
        }
        first_name.get_or_insert(i);
        if f.inlined {
            continue;
        }
        let Some(frame) = stack.frames.get(physical) else { break };
        let caller_sp = stack.frames.get(physical + 1).map(|c| c.sp);
        out.push(FrameSlots { index: i, names: first_name.take().unwrap_or(i)..=i, frame, slots: (frame.sp, caller_sp) });
        physical += 1;
    }
    out
}

impl FrameSlots<'_> {
    /// The registers known in this frame, with their names: (name, value).
    pub(crate) fn registers(&self) -> Vec<(&'static str, u64)> {
        let arch = self.frame.regs.arch();
        (0..arch.tracked() as u16)
            .filter(|&r| r != arch.sp_reg() && r != arch.pc_reg())
            .filter_map(|r| Some((arch.reg_name(r)?, self.frame.regs.get(r)?)))
            .collect()
    }

    /// Whether the report's frame `i` is one of this frame's names.
    pub(crate) fn has_name(&self, i: usize) -> bool {
        self.names.contains(&i)
    }
}
