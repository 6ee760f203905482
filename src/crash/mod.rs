//! Why the process died (issue 18): the signal, the faulting address and instruction, what the
//! process said (glibc's abort message, the C++ exception), the frame of its own code where it
//! happened, a recursion's cycle, and a stable signature — read once into [`CrashReport`].
//!
//! A runtime layer that knows more (the .NET runtime's FailFast message, its exceptions, the
//! fact that the SIGABRT in its own dumps is not a kill) passes `RuntimeCrashFacts`; whatever
//! it sets wins over the native reading.

pub(crate) mod abort_message;
pub(crate) mod address;
pub(crate) mod cxx_exception;
pub(crate) mod instruction;
pub(crate) mod machinery;
pub(crate) mod model;
pub(crate) mod origin;
pub(crate) mod recursion;
pub(crate) mod signal;
pub(crate) mod signature;

pub(crate) use model::*;

use crate::process::Process;
use crate::hex::Hex;
use crate::threads::ThreadReport;
use crate::symbols::Symbolizer;

/// What a runtime layer knows about the crash; each field set overrides the native reading.
#[derive(Debug, Clone, Default)]
pub(crate) struct RuntimeCrashFacts {
    /// `failfast`, `unhandled_exception`, `stack_overflow`, …: the runtime's own reading of a
    /// dump it wrote (which records SIGABRT from pid 0 whatever happened).
    pub(crate) kind: Option<CrashKind>,
    /// The thread that crashed, when the runtime names another than the signalled one.
    pub(crate) thread: Option<u32>,
    /// The FailFast message, say (its `source` says where it was read).
    pub(crate) message: Option<CrashMessage>,
    pub(crate) exception: Option<ExceptionReport>,
    /// The origin's index in the crashing thread's frames, when the runtime knows better which
    /// managed frames are machinery.
    pub(crate) origin_frame: Option<usize>,
}

/// Frames of a thread that signals itself (`abort`, `raise`), found among its innermost
/// [`RAISE_DEPTH`].
const RAISE: &[&str] = &["raise", "abort", "gsignal", "__pthread_kill_implementation", "__pthread_kill_internal", "__pthread_kill", "pthread_kill", "tgkill"];
const RAISE_DEPTH: usize = 8;
/// A mapping's execute permission.
const PF_X: u32 = 1;

/// Frames that mean a C++ exception is on its way to `std::terminate`.
const CXX_THROW: &[&str] = &["__cxa_throw", "__cxa_rethrow", "std::terminate", "__cxxabiv1::__terminate"];

/// The crash the dump records, or `None` when it records none (a gcore of a live process, a
/// dump taken on request without a signal).
pub(crate) fn read(process: &Process, symbolizer: &Symbolizer<'_>, threads: &[ThreadReport], runtime: Option<&RuntimeCrashFacts>) -> Option<CrashReport> {
    let core = &process.core;
    let sig = core.signal.as_ref();
    let own_pid = core.process.as_ref().map(|p| p.pid);
    let signalled = core.threads.iter().find(|t| t.signalled).map(|t| t.tid);
    let signalled_frames = signalled.and_then(|tid| threads.iter().find(|t| t.tid == tid)).map_or(&[][..], |t| t.frames.as_slice());
    let raised_itself = signalled_frames.iter().take(RAISE_DEPTH).any(|f| f.function.as_deref().is_some_and(|n| RAISE.contains(&machinery::normalize(n).as_str())));
    let native_kind = sig.and_then(|s| signal::kind(s.signo, s.code, s.sender_pid, own_pid, raised_itself));
    let mut kind = runtime.and_then(|r| r.kind).or(native_kind)?;
    let tid = runtime.and_then(|r| r.thread).or(signalled);
    let core_thread = tid.and_then(|tid| core.threads.iter().find(|t| t.tid == tid));
    let frames = tid.and_then(|tid| threads.iter().find(|t| t.tid == tid)).map_or(&[][..], |t| t.frames.as_slice());

    // The fault: its address, the instruction, what the address was.
    let (mut address, mut address_kind, mut mapping, mut instruction) = (None, None, None, None);
    if let (Some(s), Some(t), Some(CrashKind::Fault)) = (sig, core_thread, native_kind) {
        let regs = &t.registers;
        let memory_fault = matches!(s.signo, signal::SIGSEGV | signal::SIGBUS);
        let given = s.fault_address.filter(|_| s.code != Some(signal::SI_KERNEL));
        instruction = match regs {
            crate::arch::Registers::X86_64(r) => instruction::decode(process, r, r.rip, given.filter(|_| memory_fault)),
            crate::arch::Registers::Aarch64(r) => instruction::decode_aarch64(process, r, r.pc, given.filter(|_| memory_fault)),
        };
        if memory_fault {
            // A general-protection fault gives no address: the operand's is the one it tried.
            address = given.or_else(|| instruction.as_ref().and_then(|i| i.operand.as_ref()).and_then(|o| o.address).map(|h| h.0));
            let access = instruction.as_ref().and_then(|i| i.access);
            address_kind = address.and_then(|a| address::classify(process, a, s.signo, s.code.unwrap_or(0), access));
            mapping = address.and_then(|a| address::mapping(process, a));
        } else {
            address = given;
        }
    }
    // A fault at the pc that the slot just below the stack pointer holds: a return to an
    // overwritten return address (the unwinder ends the stack there too).
    let overwritten_return = match (sig, core_thread, native_kind) {
        (Some(s), Some(t), Some(CrashKind::Fault)) if matches!(s.signo, signal::SIGSEGV | signal::SIGBUS) => {
            let (pc, sp) = (t.registers.pc(), t.registers.sp());
            let executable = process.core.segments.find(pc).is_some_and(|seg| seg.flags & PF_X != 0);
            let slot = sp.checked_sub(8);
            let holds_pc = slot.and_then(|a| crate::process::Memory::read_u64(process, a).ok()) == Some(pc);
            (!executable && holds_pc && address == Some(pc)).then(|| OverwrittenReturn { value: Hex(pc), slot: Hex(slot.unwrap_or(0)) })
        }
        _ => None,
    };
    if address_kind == Some(AddressKind::StackGuard) && runtime.and_then(|r| r.kind).is_none() {
        kind = CrashKind::StackOverflow;
    }

    let mut exception = runtime.and_then(|r| r.exception.clone());
    if exception.is_none()
        && let Some(t) = core_thread
        && frames.iter().any(|f| f.function.as_deref().is_some_and(|n| CXX_THROW.contains(&machinery::normalize(n).as_str())))
    {
        exception = cxx_exception::read(process, symbolizer, t.registers.sp());
    }
    let message = runtime
        .and_then(|r| r.message.clone())
        .or_else(|| {
            (sig.is_some_and(|s| s.signo == signal::SIGABRT) && kind == CrashKind::Abort)
                .then(|| abort_message::read(process))
                .flatten()
                .map(|text| CrashMessage { text, source: "glibc_abort_msg".into() })
        })
        .or_else(|| {
            exception.as_ref().filter(|_| runtime.and_then(|r| r.exception.as_ref()).is_none()).map(|e| CrashMessage {
                text: match &e.message {
                    Some(m) => format!("{}: {m}", e.type_name),
                    None => e.type_name.clone(),
                },
                source: "cxx_exception".into(),
            })
        });

    let names: Vec<&str> = frames.iter().map(|f| f.function.as_deref().unwrap_or("??")).collect();
    let recursion = recursion::find(&names);
    let bad_pc = instruction.as_ref().filter(|i| i.access == Some(Access::Execute)).map(|i| i.address.0);
    let (past, origin) = match machinery::Machinery::builtin() {
        // Where a smashed stack returned to is no frame of the program, and its callers are
        // not known.
        _ if overwritten_return.is_some() => (0, None),
        Ok(m) if kind != CrashKind::Killed => {
            let past = origin::past_machinery(frames, m, bad_pc);
            (past, runtime.and_then(|r| r.origin_frame).filter(|&i| i < frames.len()).or_else(|| origin::find(frames, m, bad_pc)))
        }
        _ => (0, None),
    };
    let signal_name = sig.map(|s| crate::core::siginfo::signal_name(s.signo));
    let signature = match machinery::Machinery::builtin() {
        Ok(m) => signature::build(
            process,
            m,
            &signature::SignatureInput {
                kind,
                signal: signal_name,
                exception: exception.as_ref().map(|e| e.type_name.as_str()),
                frames,
                past_machinery: past,
                origin,
                recursion: recursion.as_ref(),
                overwritten_return: overwritten_return.is_some(),
            },
        ),
        Err(_) => String::new(),
    };
    Some(CrashReport {
        kind,
        thread: tid,
        signal: sig.map(|s| CrashSignal {
            number: s.signo,
            name: crate::core::siginfo::signal_name(s.signo).to_string(),
            code: s.code,
            code_name: s.code.and_then(|c| signal::code_name(s.signo, c)).map(str::to_string),
            source: s.source,
            sender_pid: s.sender_pid,
        }),
        address: address.map(Hex),
        address_kind,
        mapping,
        instruction,
        message,
        exception,
        origin: origin.and_then(|i| frames.get(i)).cloned(),
        recursion,
        overwritten_return,
        signature,
    })
}
