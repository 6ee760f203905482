//! One frame of a thread's stack as knot established it: the unwinder's address and how it was
//! found, the symbolizer's names and lines, a runtime's managed method or transition record.
//! A leaf: every stage may use it (the waits tell a runtime's threads by their frames).

use crate::hex::Hex;
use crate::unwind::Trust;
use schemars::JsonSchema;
use serde::Serialize;

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FrameReport {
    /// Position in the stack, 0 innermost; inlined frames get their own index, as in gdb.
    pub index: usize,
    pub ip: Hex,
    pub function: Option<String>,
    /// Offset of `ip` from the start of `function`, when a symbol table gave it.
    pub function_offset: Option<Hex>,
    /// File name of the module (`libc.so.6`), or null when the address is in no known module.
    pub module: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// A call the compiler inlined into the frame that follows.
    pub inlined: bool,
    /// A function that tail-called (jumped to) the frame before it and so has no frame on the
    /// stack: put back from the DWARF call sites, as gdb shows it. `ip` is the address after
    /// the jump.
    pub tail_call: bool,
    /// This frame is a signal trampoline: gdb's `<signal handler called>`.
    pub signal_frame: bool,
    /// How the frame was found: context, cfi, runtime_unwind_info, frame_pointer, scan or
    /// transition_frame. Frames in managed code found by frame pointer or scan are best effort.
    pub trust: Trust,
    /// A managed (.NET JIT or ReadyToRun) method's frame: `function` is its qualified name as
    /// SOS's `clrstack` gives it, `module` its assembly, `function_offset` from the method's start.
    pub managed: bool,
    /// A managed method's parameter list, e.g. `(System.Object, Boolean ByRef)`.
    pub signature: Option<String>,
    /// Not a call frame but a runtime transition record on the stack (SOS's
    /// `[InlinedCallFrame: addr]`), shown where it sits between the frames; `ip` is the return
    /// address it saved, or 0.
    pub transition: Option<TransitionReport>,
    /// The frame's module has no file and no debug file at hand (its file was absent): nothing
    /// can name the frame, as `eu-unstrip -n` lists such a module without a file.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_symbols: bool,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TransitionReport {
    /// The runtime's type name for the record, e.g. `InlinedCallFrame`.
    pub kind: String,
    /// Where the record lives.
    pub address: Hex,
}

impl FrameReport {
    /// A managed frame known from a record, not an unwind (an exception's stack trace): its ip
    /// and name, the rest unknown.
    pub(crate) fn recorded_managed(index: usize, ip: u64, function: Option<String>) -> FrameReport {
        FrameReport {
            index,
            ip: Hex(ip),
            function,
            function_offset: None,
            module: None,
            file: None,
            line: None,
            inlined: false,
            tail_call: false,
            signal_frame: false,
            trust: Trust::Recorded,
            managed: true,
            signature: None,
            transition: None,
            no_symbols: false,
        }
    }

    /// The marker for a runtime transition record.
    pub fn transition(index: usize, t: &crate::unwind::managed::TransitionFrame) -> FrameReport {
        FrameReport {
            index,
            ip: Hex(t.resume.and_then(|r| r.ip()).unwrap_or(0)),
            function: None,
            function_offset: None,
            module: None,
            file: None,
            line: None,
            inlined: false,
            tail_call: false,
            signal_frame: false,
            trust: Trust::TransitionFrame,
            managed: false,
            signature: None,
            transition: Some(TransitionReport { kind: t.kind.clone(), address: Hex(t.address) }),
            no_symbols: false,
        }
    }

    /// A managed method's frame.
    pub fn managed(index: usize, frame: &crate::unwind::Frame, m: crate::symbols::ManagedSymbol, module: Option<String>) -> FrameReport {
        FrameReport {
            index,
            ip: Hex(frame.ip),
            function: m.qualified,
            function_offset: Some(Hex(m.offset)),
            module: m.module.or(module),
            file: None,
            line: None,
            inlined: false,
            tail_call: false,
            signal_frame: false,
            trust: frame.trust,
            managed: true,
            signature: m.signature,
            transition: None,
            no_symbols: false,
        }
    }
}
