//! Code that has no ELF CFI because a runtime made it: JIT-compiled methods and ReadyToRun
//! (precompiled) code in managed images. The unwinder asks a [`CodeLookup`] — implemented by a
//! runtime reader such as `runtimes::dotnet` — whether an address is such code, and if so how to
//! unwind it and what to call it. The unwinder itself knows no runtime.

use super::regs::FrameRegs;

/// What the runtime says about one address of its code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ManagedCode {
    /// First byte of the method's code (its entry point), for `+offset` display.
    pub method_start: u64,
    /// The runtime's handle for the method (CoreCLR: the `MethodDesc` address), when known.
    pub method: Option<u64>,
    pub kind: ManagedCodeKind,
    /// How to unwind the function fragment that holds the address, when the runtime has it.
    pub unwind: Option<WindowsUnwind>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ManagedCodeKind {
    /// Compiled at run time into a code heap.
    Jitted,
    /// Precompiled into a managed image (ReadyToRun).
    ReadyToRun,
    /// A runtime stub (precode, thunk): code, but not a method.
    Stub,
}

/// Windows-style unwind data, which CoreCLR uses on every OS: a `RUNTIME_FUNCTION` and the
/// unwind description it points to (x64's `UNWIND_INFO`, ARM64's `.xdata` or packed word). All
/// addresses absolute (image base already added).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WindowsUnwind {
    /// The base the RVAs in the unwind data (chained entries) are relative to.
    pub(crate) image_base: u64,
    /// The fragment's first byte (`RUNTIME_FUNCTION.BeginAddress` + base).
    pub begin: u64,
    /// One past its last byte (`RUNTIME_FUNCTION.EndAddress` + base).
    pub end: u64,
    /// Address of the `UNWIND_INFO` or `.xdata` (`RUNTIME_FUNCTION.UnwindData` + base; for
    /// ARM64 meaningful only when the word's low bits are 0).
    pub unwind_info: u64,
    pub(crate) format: UnwindFormat,
}

/// Whose format the unwind data is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnwindFormat {
    /// x64: `RUNTIME_FUNCTION` of three words, `UNWIND_INFO` (`unwind::windows_x64`).
    X64,
    /// ARM64: `RUNTIME_FUNCTION` of two words, the second (`unwind_data`) an `.xdata` RVA or
    /// packed unwind data by its low bits (`unwind::windows_arm64`).
    Arm64 { unwind_data: u32 },
}

/// A managed method's name, as SOS's `clrstack` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ManagedName {
    /// `Namespace.Type.Method`, nested types joined with `+`, generic arguments as SOS shows
    /// them; no signature. This is what stacks are compared and grouped by.
    pub qualified: String,
    /// The parameter list, e.g. `(System.Object, Boolean ByRef)`, when decoded.
    pub signature: Option<String>,
    /// The managed module (assembly file name, e.g. `System.Private.CoreLib.dll`).
    pub module: Option<String>,
}

/// A runtime's map of its own code. Lookups must be cheap after the first (cache inside) and
/// must never panic on dump data: an address the runtime cannot place is `None`.
pub(crate) trait CodeLookup: Send + Sync {
    fn lookup(&self, ip: u64) -> Option<ManagedCode>;
    fn name(&self, method: u64) -> Option<ManagedName>;
    /// The runtime's bookkeeping records on thread `tid`'s stack (CoreCLR's `Frame` chain),
    /// innermost first. The unwinder resumes at one where its own walk cannot go on (native
    /// code without unwind data between managed frames), and reports shows them in the stack.
    fn transition_frames(&self, tid: u32) -> Vec<TransitionFrame> {
        let _ = tid;
        Vec::new()
    }
    /// The memory to read this code's unwind data and instructions through, when it is not the
    /// process's alone: a ReadyToRun method's `UNWIND_INFO` and code live in its managed image,
    /// whose pages a dump may leave out for the image's file to supply.
    fn unwind_memory(&self) -> Option<&dyn crate::process::Memory> {
        None
    }
}

/// One runtime transition record on a thread's stack (CoreCLR: an `InlinedCallFrame` for a
/// P/Invoke, a `FaultingExceptionFrame`, ...), as SOS shows it: `[InlinedCallFrame: addr]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransitionFrame {
    /// Where the record lives (on the stack, inside its owner's frame).
    pub(crate) address: u64,
    /// The runtime's type name for it, e.g. `InlinedCallFrame`.
    pub(crate) kind: String,
    /// The context the record saved for its caller, when it saved one (`ip` and `sp` known).
    pub(crate) resume: Option<FrameRegs>,
    /// The saved `ip` is where the thread was interrupted (a full saved context), not a
    /// return address.
    pub(crate) resume_ip_is_exact: bool,
}
