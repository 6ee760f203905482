//! The crash as the report carries it: what killed the process, where, and what it said. The
//! native reading fills it from the signal, the mappings, the code and glibc's and libstdc++'s
//! own records; a runtime layer (.NET) adds or overrides through [`super::RuntimeCrashFacts`].

use crate::hex::Hex;
use crate::threads::FrameReport;
use schemars::JsonSchema;
use serde::Serialize;

/// Why the process died, said first.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CrashReport {
    pub kind: CrashKind,
    /// The thread that crashed (took the signal, or the runtime names).
    pub thread: Option<u32>,
    /// The signal in the dump's NT_SIGINFO; null when the dump records none.
    pub signal: Option<CrashSignal>,
    /// The faulting address (`si_addr`) of a CPU fault; for a general-protection fault (the
    /// kernel gives no address) the address the instruction computed.
    pub address: Option<Hex>,
    /// What `address` was, from the dump's own mappings.
    pub address_kind: Option<AddressKind>,
    /// The mapping holding `address` (or the PC, for `not_executable`).
    pub mapping: Option<MappingReport>,
    /// The instruction at the crashing thread's PC, for a fault.
    pub instruction: Option<InstructionReport>,
    /// What the process said as it died.
    pub message: Option<CrashMessage>,
    /// The exception being thrown (C++ where found; .NET), innermost cause in `inner`.
    pub exception: Option<ExceptionReport>,
    /// The first frame of the program's own code above the machinery of dying: the frame a
    /// person opens first. `index` is its position in the crashing thread's `frames`.
    pub origin: Option<FrameReport>,
    /// A repeating cycle in the crashing thread's stack (stack overflows, runaway recursion).
    pub recursion: Option<Recursion>,
    /// The thread faulted on a return to an overwritten return address (a smashed stack): the
    /// address it returned to and the stack slot that still holds it. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overwritten_return: Option<OverwrittenReturn>,
    /// A stable key for this crash: equal for two dumps of the same crash, different for a
    /// different one. See docs/report-fields.md.
    pub signature: String,
}

/// A return to an overwritten return address: where the thread went and the slot it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct OverwrittenReturn {
    /// The address it returned to (the faulting pc).
    pub value: Hex,
    /// The stack slot the return took it from (just below the stack pointer), which holds it.
    pub slot: Hex,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CrashKind {
    /// The CPU faulted (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS from the kernel).
    Fault,
    /// A fault in the guard gap below a thread's stack.
    StackOverflow,
    /// The process raised the signal itself: abort(), assert, glibc's heap checks,
    /// std::terminate, a Rust panic under panic=abort.
    Abort,
    /// .NET `Environment.FailFast`.
    Failfast,
    /// .NET: an exception nobody caught.
    UnhandledException,
    /// A core-dumping signal another process sent (`sender_pid`).
    Killed,
}

impl CrashKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CrashKind::Fault => "fault",
            CrashKind::StackOverflow => "stack overflow",
            CrashKind::Abort => "abort",
            CrashKind::Failfast => "FailFast",
            CrashKind::UnhandledException => "unhandled exception",
            CrashKind::Killed => "killed",
        }
    }
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CrashSignal {
    pub number: i32,
    /// `SIGSEGV`, …
    pub name: String,
    /// `si_code` as recorded; null when the core has no NT_SIGINFO (`source` is `prstatus`).
    pub code: Option<i32>,
    /// `si_code` as the kernel names it for this signal: `SEGV_MAPERR`, `SI_TKILL`, …
    pub code_name: Option<String>,
    /// The sending process, for a signal sent with kill/tgkill/sigqueue.
    pub sender_pid: Option<u32>,
    /// Where the dump recorded the signal: `siginfo` (NT_SIGINFO), or `prstatus` (only the
    /// thread's `pr_cursig`: code, address and sender unknown).
    pub source: crate::core::siginfo::SignalSource,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AddressKind {
    /// Below the lowest address a process may map (`vm.mmap_min_addr`, 64 KiB): a null
    /// pointer, or a field read through one.
    NullPage,
    /// In the guard gap below a thread's stack: a stack overflow.
    StackGuard,
    /// In no mapping.
    Unmapped,
    /// A write to a mapping without write permission.
    ReadOnly,
    /// The PC in a mapping without execute permission.
    NotExecutable,
    /// A mapping with no access at all (PROT_NONE) that is not a stack guard.
    NoAccess,
    /// A file mapping beyond the end of the file (SIGBUS).
    PastEndOfFile,
    /// In the kernel half of the address space, or not canonical.
    Kernel,
}

impl AddressKind {
    pub fn words(self) -> &'static str {
        match self {
            AddressKind::NullPage => "in the null page",
            AddressKind::StackGuard => "in a stack guard gap",
            AddressKind::Unmapped => "unmapped",
            AddressKind::ReadOnly => "in a read-only mapping",
            AddressKind::NotExecutable => "in a mapping that is not executable",
            AddressKind::NoAccess => "in a no-access mapping",
            AddressKind::PastEndOfFile => "past the end of the mapped file",
            AddressKind::Kernel => "a kernel address",
        }
    }
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct MappingReport {
    pub start: Hex,
    pub end: Hex,
    /// `r-x`, `rw-`, `---`, …
    pub perms: String,
    /// The file mapped there (NT_FILE), if any.
    pub file: Option<String>,
    /// The module's file name, when the mapping is part of a loaded module.
    pub module: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct InstructionReport {
    pub address: Hex,
    /// The instruction's bytes, hex, space-separated.
    pub bytes: String,
    /// Intel syntax, as yaxpeax-x86 prints it.
    pub text: String,
    /// Whether the instruction reads, writes or executes the faulting address.
    pub access: Option<Access>,
    /// The memory operand, with the registers that formed its address and their values.
    pub operand: Option<OperandReport>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    Read,
    Write,
    Execute,
}

/// `[base + index*scale + displacement]` with each register's value at the crash.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct OperandReport {
    pub base: Option<RegisterValue>,
    pub index: Option<RegisterValue>,
    pub scale: u8,
    pub displacement: i64,
    /// The address the operand computes.
    pub address: Option<Hex>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RegisterValue {
    pub register: String,
    /// Null for a register the core does not record (a vector register).
    pub value: Option<Hex>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CrashMessage {
    pub text: String,
    /// Where it was read: `glibc_abort_msg`, `cxx_exception`, `dotnet_failfast`, …
    pub source: String,
}

/// An exception as SOS `pe` prints one; `inner` follows `InnerException`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ExceptionReport {
    /// The type's name (`LedgerError`, `System.InvalidOperationException`).
    #[serde(rename = "type")]
    pub type_name: String,
    pub message: Option<String>,
    /// .NET's HResult.
    pub hresult: Option<Hex>,
    /// The thrown object's address.
    pub address: Option<Hex>,
    /// The exception's own stack trace, where it keeps one (.NET `_stackTrace`).
    pub stack: Vec<FrameReport>,
    pub inner: Option<Box<ExceptionReport>>,
}

/// A stack that repeats: `cycle` (innermost first) `repeats` times from frame `first_frame`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Recursion {
    /// Index in the thread's `frames` of the cycle's first appearance.
    pub first_frame: usize,
    /// Frames the repetition covers (`cycle.len() * repeats`).
    pub frames: usize,
    /// Function names of one turn of the cycle, innermost first.
    pub cycle: Vec<String>,
    pub repeats: usize,
}
