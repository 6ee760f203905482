//! What a stack walk produces: frames that say how they were found, and why the walk ended.

use super::regs::FrameRegs;
use serde::Serialize;

/// How a frame was found, most trustworthy first (rust-minidump's categories).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Trust {
    /// The thread's own registers: frame #0.
    Context,
    /// Recovered with DWARF call frame information.
    Cfi,
    /// Recovered by following the %rbp chain.
    FramePointer,
    /// A return address found by scanning the stack; may be stale.
    Scan,
    /// Recovered with the unwind data a runtime keeps for code it made (.NET JIT and
    /// ReadyToRun code: Windows-style unwind codes).
    RuntimeUnwindInfo,
    /// Resumed from the caller context a runtime saved in a transition record on the stack
    /// (a CoreCLR `InlinedCallFrame`, say), where the walk could not go on by itself.
    TransitionFrame,
    /// Not unwound: recorded by the runtime when it happened (a .NET exception's saved stack
    /// trace, whose frames may be long gone from the stack).
    Recorded,
}

impl Trust {
    pub fn as_str(&self) -> &'static str {
        match self {
            Trust::Context => "context",
            Trust::Cfi => "cfi",
            Trust::FramePointer => "frame_pointer",
            Trust::Scan => "scan",
            Trust::RuntimeUnwindInfo => "runtime_unwind_info",
            Trust::TransitionFrame => "transition_frame",
            Trust::Recorded => "recorded",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// The instruction pointer: for frame #0 the next instruction to execute, for callers the
    /// return address.
    pub ip: u64,
    pub sp: u64,
    /// The canonical frame address, when CFI gave one.
    pub cfa: Option<u64>,
    pub trust: Trust,
    /// True when `ip` is exact (frame #0, or the frame interrupted by a signal); otherwise it is
    /// a return address and lookups use `ip - 1`, the call instruction.
    pub ip_is_exact: bool,
    /// This frame is a signal trampoline (`__restore_rt`): a `<signal handler called>` frame.
    pub is_signal_frame: bool,
    /// The registers as they were in this frame, as far as they could be recovered.
    pub regs: FrameRegs,
}

impl Frame {
    /// The address to look up symbols and unwind rules for.
    pub fn lookup_address(&self) -> u64 {
        if self.ip_is_exact { self.ip } else { self.ip.saturating_sub(1) }
    }
}

/// Why a walk stopped. Only `Outermost` and `ZeroReturnAddress` are the normal ends of a stack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub(crate) enum StackEnd {
    /// CFI marks the return address undefined: the thread's first frame (`_start`, `clone3`).
    Outermost,
    /// The caller's return address is 0: the conventional end of a frame-pointer chain.
    ZeroReturnAddress,
    /// The caller's stack pointer did not move up: following it would loop.
    NoProgress { ip: u64, sp: u64 },
    /// Memory the next step needed is not in the dump.
    Unreadable { address: u64 },
    /// No way to find the caller (no CFI, no frame pointer, nothing found by scanning).
    NoCaller { ip: u64 },
    /// The return address does not point into any known code. `sp` is that caller's stack
    /// pointer: where the last walked frame ends (the heap's stack roots scan no further).
    NotCode {
        ip: u64,
        #[serde(skip)]
        sp: u64,
    },
    /// The thread is at a pc outside code that the word just below its stack pointer holds:
    /// it got there by returning to an overwritten return address (a smashed stack). What
    /// called the function that returned is not known: the walk ends at frame #0.
    SmashedReturn { ip: u64, slot: u64 },
    /// The walk reached the frame limit.
    DepthLimit { frames: usize },
    /// The frame is the program's entry point (`_start`, at the auxiliary vector's AT_ENTRY):
    /// nothing calls it, and the word above it is `argc`.
    EntryPoint,
}

impl StackEnd {
    /// Whether the walk reached the thread's first frame (a stack with scanned frames is still
    /// not certain: see [`Stack::is_complete`]).
    pub(crate) fn is_complete(&self) -> bool {
        matches!(self, StackEnd::Outermost | StackEnd::ZeroReturnAddress | StackEnd::EntryPoint)
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Stack {
    pub tid: u32,
    pub frames: Vec<Frame>,
    pub end: StackEnd,
    /// Frames found by searching the stack for return addresses (each validated, none certain).
    pub scanned: usize,
    /// The runtime's transition records on this thread's stack, innermost first (empty
    /// without a runtime code lookup): reports show them between the frames they sit in.
    pub transitions: Vec<super::managed::TransitionFrame>,
}

impl Stack {
    /// The walk reached the thread's first frame and needed no scanning to get there.
    pub(crate) fn is_complete(&self) -> bool {
        self.end.is_complete() && self.scanned == 0
    }

    /// Where each transition record is shown among the frames: `(i, record)` puts the record
    /// just before frame `i`, the frame whose stack range (its sp up to its caller's) holds it.
    /// A record in no frame's range — beyond where the walk ended, or on a stack the walk did
    /// not cross at that point — goes after the last frame (`i == frames.len()`), never before
    /// frame #0: a thread that handles a stack overflow on another stack has its outer records
    /// (`DebuggerU2MCatchHandlerFrame`, at the top of its own stack) below the handler's frames
    /// by address only. Within a slot the runtime's order (innermost first) is kept.
    pub(crate) fn transition_slots(&self) -> Vec<(usize, &super::managed::TransitionFrame)> {
        let slot = |address: u64| {
            self.frames
                .iter()
                .enumerate()
                .position(|(i, f)| self.frames.get(i + 1).is_some_and(|caller| f.sp <= address && address < caller.sp))
                .unwrap_or(self.frames.len())
        };
        let mut out: Vec<(usize, &super::managed::TransitionFrame)> = self.transitions.iter().map(|t| (slot(t.address), t)).collect();
        // Stable: records in one slot keep their chain order.
        out.sort_by_key(|(i, _)| *i);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unwind::managed::TransitionFrame;

    fn frame(ip: u64, sp: u64) -> Frame {
        Frame { ip, sp, cfa: None, trust: Trust::Cfi, ip_is_exact: false, is_signal_frame: false, regs: FrameRegs::default() }
    }

    fn record(address: u64, kind: &str) -> TransitionFrame {
        TransitionFrame { address, kind: kind.into(), resume: None, resume_ip_is_exact: false }
    }

    #[test]
    fn records_go_before_the_frame_that_holds_them_and_never_before_frame_0() {
        // A handler stack at 0x9000.. (frames 0-1), then the thread's own stack at 0x1000..
        // (frames 2-3): the walk crossed from one to the other.
        let stack = Stack {
            tid: 1,
            frames: vec![frame(1, 0x9000), frame(2, 0x9100), frame(3, 0x1000), frame(4, 0x1100)],
            end: StackEnd::Outermost,
            scanned: 0,
            transitions: vec![record(0x9080, "FaultingExceptionFrame"), record(0x1080, "InlinedCallFrame"), record(0x1f00, "DebuggerU2MCatchHandlerFrame")],
        };
        let slots: Vec<_> = stack.transition_slots().into_iter().map(|(i, t)| (i, t.kind.as_str())).collect();
        assert_eq!(slots, [(0, "FaultingExceptionFrame"), (2, "InlinedCallFrame"), (4, "DebuggerU2MCatchHandlerFrame")]);
    }
}
