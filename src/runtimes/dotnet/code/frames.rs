//! CoreCLR's explicit `Frame`s: the records the runtime pushes on a thread's stack where managed
//! code calls native code (an `InlinedCallFrame` for a P/Invoke), where a thread was
//! interrupted (`FaultingExceptionFrame`, `ResumableFrame`), and where native code entered
//! managed code. They form a singly linked list from `Thread::m_pFrame` (`Frame.Next`), ended by
//! `FRAME_TOP`; the list is bounded by [`MAX_FRAMES`] and cycle-checked.
//!
//! A Frame's first field is its `FrameIdentifier`; the descriptor's `<Type>Identifier` globals
//! name the values. Fields come from the descriptor (StackWalk contract): `InlinedCallFrame`
//! (`CallerReturnAddress`, `CallSiteSP`, `CalleeSavedFP`; an inactive one has a zero return
//! address), `SoftwareExceptionFrame` and `FaultingExceptionFrame` (`TargetContext`, a saved
//! CONTEXT inside the Frame), `ResumableFrame` and `RedirectedThreadFrame` (`TargetContextPtr`),
//! `HijackFrame` (a thread hijacked for a GC suspension: `HijackArgs`).
//! An `InlinedCallFrame` with no call in progress marks no transition and is left out, as SOS
//! leaves it out.
//! The CONTEXT layouts (AMD64's, ARM64's) are the Windows ones, which CoreCLR's PAL keeps on
//! Linux; registers land in the walk's DWARF numbering for the process's architecture.

use crate::runtimes::dotnet::error::DotnetError;
use crate::runtimes::dotnet::contract::target::Target;
use crate::runtimes::dotnet::threads::{self, FRAME_TOP};
use crate::arch::{Arch, aarch64, x86_64};
use crate::unwind::managed::{CodeLookup, ManagedCode, ManagedName, TransitionFrame};
use crate::unwind::FrameRegs;
use std::collections::{HashMap, HashSet};

/// More explicit Frames than one thread ever has; a longer chain is corrupt.
pub(crate) const MAX_FRAMES: usize = 4096;

/// AMD64 `CONTEXT`: offsets of rax, rcx, rdx, rbx, rsp, rbp, rsi, rdi, r8..r15 (Windows
/// register order, 8 bytes apart from 0x78) and rip.
const CONTEXT_RAX: u64 = 0x78;
const CONTEXT_RIP: u64 = 0xf8;
/// ARM64 `CONTEXT`: `ContextFlags`, `Cpsr`, then x0–x28, fp, lr (8 bytes apart from 8), sp, pc.
const ARM64_CONTEXT_X0: u64 = 0x08;
const ARM64_CONTEXT_SP: u64 = 0x100;
const ARM64_CONTEXT_PC: u64 = 0x108;

/// A runtime's code map with its threads' Frame chains beside it.
pub(crate) struct WithFrames<C> {
    pub(crate) code: C,
    pub(crate) frames: HashMap<u32, Vec<TransitionFrame>>,
}

impl<C: CodeLookup> CodeLookup for WithFrames<C> {
    fn lookup(&self, ip: u64) -> Option<ManagedCode> {
        self.code.lookup(ip)
    }
    fn name(&self, method: u64) -> Option<ManagedName> {
        self.code.name(method)
    }
    fn transition_frames(&self, tid: u32) -> Vec<TransitionFrame> {
        self.frames.get(&tid).cloned().unwrap_or_default()
    }
    fn unwind_memory(&self) -> Option<&dyn crate::process::Memory> {
        self.code.unwind_memory()
    }
}

/// Every managed thread's Frame chain, by OS thread id; the error says why the thread list
/// could not be read (a thread that cannot be read is left out).
pub(crate) fn read(t: &Target, arch: Arch) -> Result<HashMap<u32, Vec<TransitionFrame>>, DotnetError> {
    let ts = threads::thread_store(t)?;
    let addresses = threads::thread_addresses(t, ts)?;
    let names = identifier_names(t);
    let mut out = HashMap::new();
    for a in addresses {
        let Ok(th) = threads::read_thread(t, a, 0, 0) else { continue };
        if th.os_tid == 0 {
            continue;
        }
        if let Some(first) = th.last_frame {
            out.insert(th.os_tid, chain(t, arch, first, &names));
        }
    }
    Ok(out)
}

/// `FrameIdentifier` value → type name, from the `<Type>Identifier` globals.
pub(crate) fn identifier_names(t: &Target) -> HashMap<u64, String> {
    t.descriptor
        .globals
        .keys()
        .filter_map(|name| {
            // `HelperMethodFrame_1OBJ` too (.NET 8's Frames, named by their vtables).
            let ty = name.strip_suffix("Identifier").filter(|ty| ty.contains("Frame"))?;
            Some((t.global(name).ok()?, ty.to_string()))
        })
        .collect()
}

/// The chain from `first`, innermost first. A Frame that cannot be read ends it.
pub(crate) fn chain(t: &Target, arch: Arch, first: u64, names: &HashMap<u64, String>) -> Vec<TransitionFrame> {
    let Ok(next_offset) = t.offset("Frame", "Next") else { return Vec::new() };
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut at = first;
    while at != 0 && at != FRAME_TOP && out.len() < MAX_FRAMES && seen.insert(at) {
        let Ok(id) = t.read_ptr(at, "Frame identifier") else { break };
        let kind = names.get(&id).cloned().unwrap_or_else(|| format!("Frame({id:#x})"));
        let (resume, exact) = resume(t, arch, at, &kind);
        // An InlinedCallFrame with no call in progress marks no transition (SOS leaves it out).
        if !(kind == "InlinedCallFrame" && resume.is_none()) {
            out.push(TransitionFrame { address: at, kind, resume, resume_ip_is_exact: exact });
        }
        match t.read_ptr(at.wrapping_add(next_offset), "Frame.Next") {
            Ok(next) => at = next,
            Err(_) => break,
        }
    }
    out
}

/// The caller context a Frame saved, for the kinds that save one.
fn resume(t: &Target, arch: Arch, frame: u64, kind: &str) -> (Option<FrameRegs>, bool) {
    let field = |f: &str| t.field_ptr(frame, kind, f).ok();
    match kind {
        "InlinedCallFrame" => {
            let (Some(ip), Some(sp)) = (field("CallerReturnAddress"), field("CallSiteSP")) else { return (None, false) };
            if ip == 0 {
                // No call in progress: the Frame is set up but inactive.
                return (None, false);
            }
            let mut r = FrameRegs::new(arch);
            r.set(arch.pc_reg(), ip);
            r.set(arch.sp_reg(), sp);
            if let Some(fp) = field("CalleeSavedFP") {
                r.set(arch.fp_reg(), fp);
            }
            (Some(r), false)
        }
        "SoftwareExceptionFrame" | "FaultingExceptionFrame" => {
            let Ok(off) = t.offset(kind, "TargetContext") else { return (None, false) };
            (context(t, arch, frame.wrapping_add(off)), kind == "FaultingExceptionFrame")
        }
        "HijackFrame" => (hijacked_caller(t, arch, frame), false),
        "ResumableFrame" | "RedirectedThreadFrame" => {
            let ptr = t.field_ptr(frame, "ResumableFrame", "TargetContextPtr").ok().filter(|&p| p != 0);
            (ptr.and_then(|p| context(t, arch, p)), true)
        }
        _ => (None, false),
    }
}

/// The caller of a method the runtime hijacked to suspend its thread for a GC: its return
/// address was replaced by the hijack stub's, which saved the real one and the callee-saved
/// registers in `HijackArgs`. As CoreCLR's `HijackFrame::UpdateRegDisplay` resumes there (on
/// Linux): at the real return address, the stack pointer just past the record (AMD64: its last
/// field is that return address; ARM64: the record rounded up to 16 bytes). Without it the
/// native walk ends in the stub and the thread shows no managed frames.
fn hijacked_caller(t: &Target, arch: Arch, frame: u64) -> Option<FrameRegs> {
    let ip = t.field_ptr(frame, "HijackFrame", "ReturnAddress").ok().filter(|&v| v != 0)?;
    let args = t.field_ptr(frame, "HijackFrame", "HijackArgsPtr").ok().filter(|&v| v != 0)?;
    let size = t.size("HijackArgs").ok().filter(|&s| s != 0 && s % 8 == 0 && s <= 1024)?;
    let mut r = FrameRegs::new(arch);
    match arch {
        Arch::X86_64 => {
            use x86_64::dwarf::{R12, R13, R14, R15, RBP, RBX, RSP};
            let saved = args.checked_add(t.offset("HijackArgs", "CalleeSavedRegisters").ok()?)?;
            for (name, reg) in [("R12", R12), ("R13", R13), ("R14", R14), ("R15", R15), ("Rbx", RBX), ("Rbp", RBP)] {
                if let Ok(v) = t.field_ptr(saved, "CalleeSavedRegisters", name) {
                    r.set(reg, v);
                }
            }
            r.set(RSP, args.checked_add(size)?);
        }
        Arch::Aarch64 => {
            for x in 19..=28u16 {
                if let Ok(v) = t.field_ptr(args, "HijackArgs", &format!("X{x}")) {
                    r.set(x, v);
                }
            }
            if let Ok(fp) = t.field_ptr(args, "HijackArgs", "Fp") {
                r.set(aarch64::dwarf::FP, fp);
            }
            if let Ok(lr) = t.field_ptr(args, "HijackArgs", "Lr") {
                r.set(aarch64::dwarf::LR, lr);
            }
            r.set(aarch64::dwarf::SP, args.checked_add(size + size % 16)?);
        }
    }
    r.set(arch.pc_reg(), ip);
    Some(r)
}

/// The registers of a saved CONTEXT (AMD64's or ARM64's, by `arch`) at `at`; `None` unless the
/// pc and sp are readable and nonzero.
fn context(t: &Target, arch: Arch, at: u64) -> Option<FrameRegs> {
    let mut r = FrameRegs::new(arch);
    match arch {
        Arch::X86_64 => {
            for (w, &d) in x86_64::dwarf::FROM_WINDOWS.iter().enumerate() {
                if let Ok(v) = t.read_ptr(at.wrapping_add(CONTEXT_RAX + 8 * w as u64), "CONTEXT register") {
                    r.set(d, v);
                }
            }
            let ip = t.read_ptr(at.wrapping_add(CONTEXT_RIP), "CONTEXT.Rip").ok().filter(|&v| v != 0)?;
            r.set(x86_64::dwarf::RIP, ip);
        }
        Arch::Aarch64 => {
            for x in 0..=aarch64::dwarf::LR {
                if let Ok(v) = t.read_ptr(at.wrapping_add(ARM64_CONTEXT_X0 + 8 * x as u64), "CONTEXT register") {
                    r.set(x, v);
                }
            }
            if let Ok(sp) = t.read_ptr(at.wrapping_add(ARM64_CONTEXT_SP), "CONTEXT.Sp") {
                r.set(aarch64::dwarf::SP, sp);
            }
            let pc = t.read_ptr(at.wrapping_add(ARM64_CONTEXT_PC), "CONTEXT.Pc").ok().filter(|&v| v != 0)?;
            r.set(aarch64::dwarf::PC, pc);
        }
    }
    r.sp().filter(|&sp| sp != 0)?;
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::RangeMemory;
    use crate::runtimes::dotnet::contract::descriptor::Descriptor;

    fn target(mem: &RangeMemory) -> Target<'_> {
        let json = br#"{"version":0,"types":{"Frame":{"Next":8},"InlinedCallFrame":{"!":56,"CallSiteSP":24,"CallerReturnAddress":32,"CalleeSavedFP":40}},"globals":{"InlinedCallFrameIdentifier":["0x1","nuint"],"DebuggerU2MCatchHandlerFrameIdentifier":["0x11","nuint"]}}"#;
        Target::new(mem, Descriptor::parse(json, 0).expect("descriptor"), Vec::new())
    }

    fn words(v: &[u64]) -> Vec<u8> {
        v.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn chain_names_frames_and_reads_the_inlined_call_frames_caller() {
        let mut m = RangeMemory::new();
        // ICF at 0x1000 (active), ICF at 0x2000 (inactive: no return address), U2M at 0x3000.
        m.add(0x1000, words(&[1, 0x2000, 0, 0x7000_0010, 0x5555_1234, 0x7000_0080]));
        m.add(0x2000, words(&[1, 0x3000, 0, 0, 0, 0]));
        m.add(0x3000, words(&[0x11, FRAME_TOP]));
        let t = target(&m);
        let frames = chain(&t, Arch::X86_64, 0x1000, &identifier_names(&t));
        let kinds: Vec<_> = frames.iter().map(|f| (f.address, f.kind.as_str())).collect();
        assert_eq!(kinds, [(0x1000, "InlinedCallFrame"), (0x3000, "DebuggerU2MCatchHandlerFrame")], "the inactive ICF is left out");
        let r = frames[0].resume.expect("active ICF resumes");
        assert_eq!((r.ip(), r.sp(), r.bp()), (Some(0x5555_1234), Some(0x7000_0010), Some(0x7000_0080)));
        assert!(frames[1].resume.is_none());
    }

    #[test]
    fn a_looping_or_unreadable_chain_ends() {
        let mut m = RangeMemory::new();
        m.add(0x1000, words(&[0x11, 0x2000]));
        m.add(0x2000, words(&[0x99, 0x1000]));
        let t = target(&m);
        let frames = chain(&t, Arch::X86_64, 0x1000, &identifier_names(&t));
        assert_eq!(frames.iter().map(|f| f.kind.as_str()).collect::<Vec<_>>(), ["DebuggerU2MCatchHandlerFrame", "Frame(0x99)"]);
        assert!(chain(&t, Arch::X86_64, 0x9000, &identifier_names(&t)).is_empty());
    }
}
