//! Rebuilding every thread's stack. Each step tries, in order: DWARF CFI of the module holding
//! the frame's address; for an address no CFI covers, the unwind data of a runtime's code map
//! ([`managed::CodeLookup`], e.g. .NET JIT code, with `windows_x64`); the %rbp chain; and a
//! bounded scan of the stack for a return address. Where all fail, the walk resumes at a
//! runtime transition record (a CoreCLR `Frame`) above it, if there is one. Every frame records
//! which one found it; every walk ends with a reason, and is bounded.
//!
//! Scanning is careful: a candidate return address must lie in a module's code or code a runtime
//! knows (never in a thread's stack, even an executable one), follow a call instruction, and,
//! where its module has CFI, unwind to a plausible caller; and, scanning from generated code
//! (no module, no runtime's code map), of the candidates one scan finds the first whose chain is
//! consistent with the stack wins (unwound on by CFI to the thread's
//! start or to a frame the %rbp chain confirms), not a stale return address an earlier call
//! left above the stack pointer. A frame-pointer step is checked
//! against the words it jumps over: a valid return address among them means frames without a
//! frame pointer were skipped, and the scan's frames are kept (marked `Scan`). A stack that
//! needed scanning is never complete; one that reaches the program's entry point is.

mod cfi;
pub(crate) mod frame;
pub(crate) mod managed;
pub(crate) mod regs;
mod scan;
pub(crate) mod windows_arm64;
pub(crate) mod windows_x64;

pub(crate) use frame::{Frame, Stack, StackEnd, Trust};
pub(crate) use regs::FrameRegs;

use crate::arch::Arch;
use crate::core::CoreThread;
use crate::process::{Memory, Process};
use cfi::ModuleCfi;
use managed::{CodeLookup, ManagedCodeKind, TransitionFrame, UnwindFormat};
use rayon::prelude::*;
use std::sync::OnceLock;

/// Frames per stack at most; deeper stacks end with [`StackEnd::DepthLimit`].
pub(crate) const DEFAULT_MAX_FRAMES: usize = 10_000;
/// How far a scan looks for a return address, in 8-byte words.
const SCAN_WORDS: u64 = 1024;
/// How many validated return addresses one scan weighs against each other at most.
const MAX_SCAN_CANDIDATES: usize = 8;
/// How far a scanned candidate's chain is followed to confirm it, in frames.
const CONFIRM_STEPS: usize = 64;
/// A frame-pointer step may not jump further than this.
const MAX_FRAME_SIZE: u64 = 16 << 20;
const PF_X: u32 = 1;
/// A return address this close after the program's entry point is in `_start` (glibc's calls
/// `__libc_start_main` at +0x21..+0x24; musl's `_start_c` sooner).
const ENTRY_WINDOW: u64 = 64;

pub(crate) struct Unwinder<'p> {
    process: &'p Process,
    cfi: Vec<OnceLock<Option<ModuleCfi<'p>>>>,
    /// Executable address ranges, sorted and merged.
    code: Vec<(u64, u64)>,
    pub max_frames: usize,
    /// A runtime's map of the code it made, asked where no CFI covers an address.
    code_lookup: Option<&'p dyn CodeLookup>,
    /// The program's entry point (AT_ENTRY).
    entry: Option<u64>,
    /// The mappings holding a thread's stack pointer, sorted: never code for a scan.
    stacks: Vec<(u64, u64)>,
    arch: Arch,
    /// aarch64: the pointer-authentication bits of a return address (NT_ARM_PAC_MASK), cleared.
    pac_mask: u64,
}

impl<'p> Unwinder<'p> {
    pub(crate) fn new(process: &'p Process) -> Unwinder<'p> {
        let mut code: Vec<(u64, u64)> = process.core.segments.iter().filter(|s| s.flags & PF_X != 0).map(|s| (s.vaddr, s.end())).collect();
        for m in &process.modules {
            if let Some(file) = m.image() {
                for p in file.program_headers.iter().filter(|p| p.p_type == goblin::elf::program_header::PT_LOAD && p.p_flags & PF_X != 0) {
                    let start = m.bias.wrapping_add(p.p_vaddr);
                    code.push((start, start.saturating_add(p.p_memsz)));
                }
            }
        }
        code.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(code.len());
        for (s, e) in code {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        let mut stacks: Vec<(u64, u64)> =
            process.core.threads.iter().filter_map(|t| process.core.segments.find(t.registers.sp())).map(|s| (s.vaddr, s.end())).collect();
        stacks.sort_unstable();
        stacks.dedup();
        Unwinder {
            process,
            cfi: process.modules.iter().map(|_| OnceLock::new()).collect(),
            code: merged,
            max_frames: DEFAULT_MAX_FRAMES,
            code_lookup: None,
            entry: process.core.auxv.get(crate::core::auxv::AT_ENTRY).filter(|&e| e != 0),
            stacks,
            arch: process.core.arch,
            pac_mask: process.core.pac_mask.unwrap_or(0),
        }
    }

    /// Unwinds code that has no CFI (JIT and ReadyToRun code) with `lookup`'s unwind data, and
    /// resumes at its transition records.
    pub(crate) fn with_code_lookup(mut self, lookup: &'p dyn CodeLookup) -> Unwinder<'p> {
        self.code_lookup = Some(lookup);
        self
    }

    fn is_code(&self, addr: u64) -> bool {
        let i = self.code.partition_point(|&(s, _)| s <= addr);
        i > 0 && addr < self.code[i - 1].1
    }

    /// As [`Self::is_code`], or a return address into code the runtime knows (its pages may be
    /// missing from a small dump). Not for scanning: each miss asks the code map.
    fn is_code_or_managed(&self, ra: u64) -> bool {
        self.is_code(ra) || self.code_lookup.is_some_and(|l| l.lookup(ra.wrapping_sub(1)).is_some())
    }

    fn in_stack(&self, addr: u64) -> bool {
        let i = self.stacks.partition_point(|&(s, _)| s <= addr);
        i > 0 && addr < self.stacks[i - 1].1
    }

    /// The frame is in the program's entry function.
    fn is_entry(&self, frame: &Frame) -> bool {
        self.entry.is_some_and(|e| frame.lookup_address().wrapping_sub(e) < ENTRY_WINDOW)
    }

    fn module_cfi(&self, index: usize) -> Option<&ModuleCfi<'p>> {
        self.cfi[index].get_or_init(|| ModuleCfi::load(&self.process.modules[index], &self.process.core)).as_ref()
    }

    /// Walks every thread, in parallel, in the core's thread order.
    pub(crate) fn walk_all(&self) -> Vec<Stack> {
        let core = &self.process.core;
        core.threads
            .par_iter()
            .map(|t| {
                let stack = self.walk(t);
                core.done_with_segment_at(t.registers.sp());
                stack
            })
            .collect()
    }

    pub(crate) fn walk(&self, thread: &CoreThread) -> Stack {
        let regs = FrameRegs::from_context(&thread.registers);
        let first = Frame {
            ip: thread.registers.pc(),
            sp: thread.registers.sp(),
            cfa: None,
            trust: Trust::Context,
            ip_is_exact: true,
            is_signal_frame: false,
            regs,
        };
        let mut frames = vec![first];
        let mut ctx = gimli::UnwindContext::new();
        let transitions = self.code_lookup.map(|l| l.transition_frames(thread.tid)).unwrap_or_default();
        // Transition records are used innermost first, each at most once: the walk stays bounded.
        let mut next_transition = 0;
        let mut scanned = 0;
        let end = loop {
            if frames.len() >= self.max_frames {
                break StackEnd::DepthLimit { frames: frames.len() };
            }
            let is_first = frames.len() == 1;
            let Some(current) = frames.last_mut() else { break StackEnd::NoCaller { ip: 0 } };
            let in_entry = self.is_entry(current);
            // A call through a bad pointer is read at [rsp] exactly: no search.
            let bad_pc = is_first && !self.is_code_or_managed(current.ip);
            if let Some(slot) = bad_pc.then(|| self.returned_from(current)).flatten() {
                break StackEnd::SmashedReturn { ip: current.ip, slot };
            }
            match self.step(current, is_first, &mut ctx) {
                Err(StackEnd::Outermost) if in_entry => break StackEnd::Outermost,
                // Whatever lies above `_start` is argc and argv, not a caller.
                _ if in_entry => break StackEnd::EntryPoint,
                Ok(next) => {
                    if next.trust == Trust::Scan && !bad_pc {
                        scanned += 1;
                    }
                    let next = self.prefer_transition(current, next, &transitions, &mut next_transition);
                    let next = self.complete_from_transition(next, &transitions, &mut next_transition);
                    let next = self.return_address_from_transition(current, next, &transitions, &mut next_transition);
                    frames.push(next)
                }
                Err(end) => {
                    let sp = current.sp;
                    match self.resume_at_transition(&transitions, &mut next_transition, sp) {
                        Some(next) => frames.push(next),
                        None => break end,
                    }
                }
            }
        };
        // Kept until the report is written, for every thread: no spare room.
        frames.shrink_to_fit();
        Stack { tid: thread.tid, frames, end, scanned, transitions }
    }

    /// A guess (frame pointer or scan) out of native code that lands in managed code, or beyond
    /// the next transition record, is replaced by that record's saved caller context: where
    /// native code entered the runtime, the record says exactly where the managed caller is,
    /// while a scan finds stale return addresses (as CoreCLR's own stack walk does).
    fn prefer_transition(&self, current: &Frame, next: Frame, transitions: &[TransitionFrame], index: &mut usize) -> Frame {
        let Some(lookup) = self.code_lookup else { return next };
        if !matches!(next.trust, Trust::Scan | Trust::FramePointer) || lookup.lookup(current.lookup_address()).is_some() {
            return next;
        }
        let pending = transitions[(*index).min(transitions.len())..]
            .iter()
            .filter_map(|t| t.resume.and_then(|r| r.sp()))
            .find(|&sp| sp > current.sp);
        let Some(resume_sp) = pending else { return next };
        if lookup.lookup(next.lookup_address()).is_none() && next.sp < resume_sp {
            return next;
        }
        let mut probe = *index;
        self.resume_at_transition(transitions, &mut probe, current.sp).map_or(next, |t| {
            *index = probe;
            t
        })
    }

    /// A step into managed code that a transition record saved a whole context for — the same
    /// instruction — takes the record's registers. CoreCLR handles a stack overflow on another
    /// stack, through a trampoline whose CFI gives the faulting ip and %rbp but can only give
    /// its own CFA as %rsp; the `FaultingExceptionFrame` it pushed holds the thread's real
    /// context, without which the managed frames above cannot be unwound.
    fn complete_from_transition(&self, next: Frame, transitions: &[TransitionFrame], index: &mut usize) -> Frame {
        let Some(lookup) = self.code_lookup else { return next };
        let pending = transitions.get(*index..).unwrap_or_default();
        let Some(offset) = pending.iter().position(|t| {
            t.resume_ip_is_exact && t.resume.is_some_and(|r| r.ip() == Some(next.ip) && r.sp().is_some_and(|sp| sp != next.sp))
        }) else {
            return next;
        };
        if lookup.lookup(next.ip).is_none() {
            return next;
        }
        let t = &pending[offset];
        let Some(regs) = t.resume else { return next };
        let Some(sp) = regs.sp() else { return next };
        *index += offset + 1;
        Frame { ip: next.ip, sp, cfa: None, trust: Trust::TransitionFrame, ip_is_exact: true, is_signal_frame: false, regs }
    }

    /// A step out of native code into the managed method that a pending transition record (an
    /// `InlinedCallFrame`: a P/Invoke or FCALL in progress) saved a return address in takes
    /// that address as the frame's IP, as CoreCLR's own stack walk (SOS `clrstack`) does: it
    /// never unwinds the native frames but resumes at the record. On .NET 10 the two differ —
    /// the record holds the return from `JIT_PInvokeBegin`, the CFI the return from the target
    /// a few instructions on — and only the record's gives SOS's `+ offset` (issue #30 item 6).
    /// Only the IP changes: both lie in the method's body, where its unwind data is the same.
    fn return_address_from_transition(&self, current: &Frame, next: Frame, transitions: &[TransitionFrame], index: &mut usize) -> Frame {
        let Some(lookup) = self.code_lookup else { return next };
        if next.trust == Trust::TransitionFrame || lookup.lookup(current.lookup_address()).is_some() {
            return next;
        }
        let Some(method) = lookup.lookup(next.lookup_address()).filter(|c| c.kind != ManagedCodeKind::Stub) else { return next };
        let pending = transitions.get(*index..).unwrap_or_default();
        let found = pending.iter().position(|t| {
            !t.resume_ip_is_exact
                && t.resume.is_some_and(|r| {
                    r.sp().is_some_and(|sp| sp > current.sp)
                        && r.ip().is_some_and(|ip| ip != 0 && lookup.lookup(ip.wrapping_sub(1)).is_some_and(|c| c.method_start == method.method_start))
                })
        });
        let Some(offset) = found else { return next };
        let Some(ip) = pending[offset].resume.and_then(|r| r.ip()) else { return next };
        *index += offset + 1;
        let mut regs = next.regs;
        regs.set(self.arch.pc_reg(), ip);
        Frame { ip, ip_is_exact: false, regs, ..next }
    }

    /// The first unused transition record whose saved caller context is above `sp` and in code.
    fn resume_at_transition(&self, transitions: &[TransitionFrame], next: &mut usize, sp: u64) -> Option<Frame> {
        while let Some(t) = transitions.get(*next) {
            *next += 1;
            let Some(regs) = t.resume else { continue };
            let (Some(ip), Some(caller_sp)) = (regs.ip(), regs.sp()) else { continue };
            if caller_sp > sp && ip != 0 && self.is_code_or_managed(ip) {
                return Some(Frame { ip, sp: caller_sp, cfa: None, trust: Trust::TransitionFrame, ip_is_exact: t.resume_ip_is_exact, is_signal_frame: false, regs });
            }
        }
        None
    }

    /// Finds the caller of `frame`. Marks `frame` as a signal trampoline when its CFI says so.
    fn step(&self, frame: &mut Frame, is_first: bool, ctx: &mut gimli::UnwindContext<usize>) -> Result<Frame, StackEnd> {
        let memory: &dyn Memory = self.process;
        if is_first
            && let Some(next) = self.bad_pc_step(frame)
        {
            return self.accept(frame, next);
        }
        if let Some(next) = self.aarch64_sigreturn_step(frame) {
            return self.accept(frame, next);
        }
        let addr = frame.lookup_address();
        let mut cfi_error = None;
        let mut has_cfi = false;
        if let Some((index, module)) = self.process.module_at(addr)
            && let Some(cfi) = self.module_cfi(index)
                && let Some(rule) = cfi.rule(module.to_link_address(addr), ctx) {
                    has_cfi = true;
                    frame.is_signal_frame = rule.signal_frame;
                    match cfi.apply(&rule, &frame.regs, memory) {
                        Ok(rec) if rec.outermost => return Err(StackEnd::Outermost),
                        Ok(mut rec) => {
                            let ip = self.strip(rec.regs.ip().unwrap_or(0));
                            if let Some(ip) = rec.regs.ip().map(|v| self.strip(v)) {
                                rec.regs.set(self.arch.pc_reg(), ip);
                            }
                            let next = Frame {
                                ip,
                                sp: rec.regs.sp().unwrap_or(rec.cfa),
                                cfa: Some(rec.cfa),
                                trust: Trust::Cfi,
                                // The frame a signal interrupted resumes at its exact ip.
                                ip_is_exact: rule.signal_frame,
                                is_signal_frame: false,
                                regs: rec.regs,
                            };
                            return self.accept(frame, next);
                        }
                        Err(cfi::ApplyError::Unreadable(a)) => cfi_error = Some(StackEnd::Unreadable { address: a }),
                        Err(_) => {}
                    }
                }
        if !has_cfi
            && let Some(next) = self.runtime_step(frame, addr)
        {
            return self.accept(frame, next);
        }
        if let Some(next) = self.frame_pointer_step(frame) {
            // Return addresses between this frame and the caller the %rbp chain names are
            // frames that keep no frame pointer: take the first of them instead.
            let skipped = if self.code_lookup.is_some_and(|l| l.lookup(addr).is_some()) {
                None
            } else {
                self.scan_between(frame, frame.sp, next.sp.saturating_sub(16), false, ctx)
            };
            return self.accept(frame, skipped.unwrap_or(next));
        }
        if let Some(next) = self.scan_step(frame, ctx) {
            return self.accept(frame, next);
        }
        if let Some(end) = cfi_error {
            return Err(end);
        }
        // Nothing found because the stack itself is not in the dump: say so, not "no caller".
        if memory.read_u64(frame.sp).is_err() {
            return Err(StackEnd::Unreadable { address: frame.sp });
        }
        Err(StackEnd::NoCaller { ip: frame.ip })
    }

    /// Checks that `next` makes progress up the stack and points at code.
    fn accept(&self, frame: &Frame, next: Frame) -> Result<Frame, StackEnd> {
        if next.ip == 0 {
            return Err(StackEnd::ZeroReturnAddress);
        }
        // Stacks grow down: a caller's frame is higher, except across a signal (alternate stack).
        // On aarch64 a function that keeps no stack frame (a leaf, a syscall wrapper) has its
        // caller's sp: the same sp is progress when the pc moved.
        let same_sp_ok = self.arch == Arch::Aarch64 && next.sp == frame.sp && next.ip != frame.ip;
        if next.sp <= frame.sp && !frame.is_signal_frame && !same_sp_ok {
            return Err(StackEnd::NoProgress { ip: next.ip, sp: next.sp });
        }
        if !self.is_code_or_managed(next.ip) {
            return Err(StackEnd::NotCode { ip: next.ip, sp: next.sp });
        }
        Ok(next)
    }

    /// The caller of a frame in code a runtime made, from the runtime's unwind data.
    fn runtime_step(&self, frame: &Frame, addr: u64) -> Option<Frame> {
        let lookup = self.code_lookup?;
        let code = lookup.lookup(addr)?;
        let unwind = code.unwind?;
        let memory: &dyn Memory = lookup.unwind_memory().unwrap_or(self.process);
        let mut out = match unwind.format {
            UnwindFormat::X64 => windows_x64::unwind(memory, &unwind, frame.ip, frame.ip_is_exact, &frame.regs).ok()?,
            UnwindFormat::Arm64 { unwind_data } => windows_arm64::unwind(memory, &unwind, unwind_data, frame.ip, &frame.regs).ok()?,
        };
        if self.arch == Arch::Aarch64 {
            // A return address the prologue signed (`pac` code): stripped as native ones are.
            let pc = self.strip(out.regs.ip()?);
            out.regs.set(self.arch.pc_reg(), pc);
        }
        let sp = out.regs.sp()?;
        Some(Frame { ip: out.regs.ip()?, sp, cfa: Some(sp), trust: Trust::RuntimeUnwindInfo, ip_is_exact: out.machine_frame, is_signal_frame: false, regs: out.regs })
    }

    /// A thread at a pc outside code that the word just below its stack pointer holds got there
    /// by a return (x86-64's `ret` popped it; aarch64's epilogue loaded x30 from there): the
    /// return address was overwritten, and the word the stack pointer now points at is whatever
    /// the caller's frame held, no return address. That slot, if so.
    fn returned_from(&self, frame: &Frame) -> Option<u64> {
        let slot = frame.sp.checked_sub(8)?;
        let memory: &dyn Memory = self.process;
        (memory.read_u64(slot).ok()? == frame.ip).then_some(slot)
    }

    /// A thread that crashed at a PC outside code (a call through a bad function pointer) ran no
    /// instruction there: the call's return address is the word at the stack pointer (x86-64)
    /// or in the link register (aarch64), and every other register is still the caller's.
    fn bad_pc_step(&self, frame: &Frame) -> Option<Frame> {
        if self.is_code_or_managed(frame.ip) {
            return None;
        }
        let memory: &dyn Memory = self.process;
        let (ra, caller_sp) = match self.arch {
            Arch::X86_64 => (memory.read_u64(frame.sp).ok()?, frame.sp.checked_add(8)?),
            Arch::Aarch64 => (self.strip(frame.regs.get(crate::arch::aarch64::dwarf::LR)?), frame.sp),
        };
        if !self.is_code(ra) {
            return None;
        }
        let mut regs = frame.regs;
        regs.set(self.arch.sp_reg(), caller_sp);
        regs.set(self.arch.pc_reg(), ra);
        Some(Frame { ip: ra, sp: caller_sp, cfa: None, trust: Trust::Scan, ip_is_exact: false, is_signal_frame: false, regs })
    }

    /// aarch64's signal trampoline, `__kernel_rt_sigreturn` in the vdso (`mov x8, #139; svc #0`,
    /// where a handler returns to): its CFI names only the frame record of the interrupted
    /// code (its x29 and x30), not the pc it was interrupted at, so the interrupted registers
    /// are read from the `rt_sigframe` at sp as gdb does — `siginfo` (128 bytes), then the
    /// `ucontext` whose `uc_mcontext` (at 176) holds `fault_address`, x0–x30, sp, pc. The
    /// frame is marked a signal frame; its caller resumes at its exact pc.
    fn aarch64_sigreturn_step(&self, frame: &mut Frame) -> Option<Frame> {
        const SIGRETURN: [u8; 8] = [0x68, 0x11, 0x80, 0xd2, 0x01, 0x00, 0x00, 0xd4];
        const SIGCONTEXT_REGS: u64 = 128 + 176 + 8;
        if self.arch != Arch::Aarch64 {
            return None;
        }
        let memory: &dyn Memory = self.process;
        let mut code = [0u8; 8];
        memory.read(frame.ip, &mut code).ok().filter(|_| code == SIGRETURN)?;
        let at = frame.sp.checked_add(SIGCONTEXT_REGS)?;
        let mut regs = FrameRegs::new(Arch::Aarch64);
        for reg in 0..33u16 {
            regs.set(reg, memory.read_u64(at.checked_add(8 * u64::from(reg))?).ok()?);
        }
        let (ip, sp) = (regs.ip()?, regs.sp()?);
        frame.is_signal_frame = true;
        // Read from the kernel's own record of the context, as exact as CFI.
        Some(Frame { ip, sp, cfa: Some(frame.sp), trust: Trust::Cfi, ip_is_exact: true, is_signal_frame: false, regs })
    }

    /// A return address without its pointer-authentication code (aarch64; nothing on x86-64).
    fn strip(&self, ip: u64) -> u64 {
        ip & !self.pac_mask
    }

    /// The caller through the frame pointer: x86-64's %rbp points at {caller's %rbp, return
    /// address}, aarch64's x29 at the frame record {caller's x29, x30}; the caller's stack
    /// pointer is taken as just above them (exact on x86-64; on aarch64 at least that).
    fn frame_pointer_step(&self, frame: &Frame) -> Option<Frame> {
        let bp = frame.regs.bp()?;
        if bp < frame.sp || bp - frame.sp > MAX_FRAME_SIZE || bp % 8 != 0 {
            return None;
        }
        let memory: &dyn Memory = self.process;
        // A %rbp at the top of the address space has no caller frame above it.
        let caller_sp = bp.checked_add(16)?;
        let caller_bp = memory.read_u64(bp).ok()?;
        let ra = self.strip(memory.read_u64(bp + 8).ok()?);
        if !self.is_code(ra) {
            return None;
        }
        let mut regs = FrameRegs::new(self.arch);
        regs.set(self.arch.fp_reg(), caller_bp);
        regs.set(self.arch.sp_reg(), caller_sp);
        regs.set(self.arch.pc_reg(), ra);
        Some(Frame { ip: ra, sp: caller_sp, cfa: Some(caller_sp), trust: Trust::FramePointer, ip_is_exact: false, is_signal_frame: false, regs })
    }

    fn scan_step(&self, frame: &Frame, ctx: &mut gimli::UnwindContext<usize>) -> Option<Frame> {
        // Frame #0 may be a leaf that pushed nothing: its return address is at [rsp]. A caller
        // frame's own return address was at sp - 8 and is already used, so start at sp.
        let end = frame.sp.saturating_add(SCAN_WORDS * 8);
        self.scan_between(frame, frame.sp, end, true, ctx)
    }

    /// The first validated return address in the words from `start` up to `end` (at most
    /// [`SCAN_WORDS`]), as the caller's frame; scanning from generated code (no module, no
    /// runtime's code map), the first whose chain is confirmed ([`Self::confirmed`]);
    /// of competing candidates the first confirmed one wins, a stale return address left by an
    /// earlier call losing to the true caller's further up. Without any confirmed, the first
    /// (as ever: a guess, and the stack stays marked incomplete). JIT code counts only when
    /// `jit` is true.
    fn scan_between(&self, frame: &Frame, start: u64, end: u64, jit: bool, ctx: &mut gimli::UnwindContext<usize>) -> Option<Frame> {
        let memory: &dyn Memory = self.process;
        let words = (end.saturating_sub(start) / 8).min(SCAN_WORDS);
        // Only code nobody describes (no module, no runtime's code map: code generated at run
        // time) leaves the stale return addresses a candidate must be confirmed against; a
        // module's frame keeps the first candidate, as ever.
        let generated = self.process.module_at(frame.lookup_address()).is_none() && self.code_lookup.is_none_or(|l| l.lookup(frame.lookup_address()).is_none());
        let mut first = None;
        let mut tried = 0;
        let mut fp_cfas = None;
        for i in 0..words {
            let Some(slot) = start.checked_add(i * 8) else { break };
            let Ok(value) = memory.read_u64(slot) else { break };
            if let Some(next) = self.scan_candidate(frame, slot, value, jit, ctx) {
                if !generated {
                    return Some(next);
                }
                let fp_cfas = fp_cfas.get_or_insert_with(|| self.frame_pointer_cfas(frame.regs.bp(), frame.sp));
                if self.confirmed(&next, fp_cfas, ctx) {
                    return Some(next);
                }
                first.get_or_insert(next);
                tried += 1;
                if tried >= MAX_SCAN_CANDIDATES {
                    break;
                }
            }
        }
        first
    }

    /// The CFAs of the frames the %rbp chain from `bp` names (each frame's %rbp + 16), up the
    /// stack from `above`, at most [`CONFIRM_STEPS`]: where a scanned candidate's CFI-unwound
    /// chain meets one of them, frame pointers confirm it.
    fn frame_pointer_cfas(&self, bp: Option<u64>, above: u64) -> Vec<u64> {
        let memory: &dyn Memory = self.process;
        let mut out = Vec::new();
        let (Some(mut bp), mut floor) = (bp, above) else { return out };
        while out.len() < CONFIRM_STEPS {
            if bp < floor || bp - floor > MAX_FRAME_SIZE || bp % 8 != 0 {
                break;
            }
            let (Ok(saved), Ok(ra)) = (memory.read_u64(bp), memory.read_u64(bp.saturating_add(8))) else { break };
            if !self.is_code(ra) {
                break;
            }
            let Some(cfa) = bp.checked_add(16) else { break };
            out.push(cfa);
            floor = cfa;
            bp = saved;
        }
        out
    }

    /// Whether a scanned caller is consistent with the stack: unwound on by CFI, each caller's
    /// CFA is above the last and each return address follows a call, until the thread's start
    /// (the CFI's outermost frame, the entry function, code a runtime knows) or a frame the
    /// %rbp chain confirms (`fp_cfas`), or [`CONFIRM_STEPS`] frames without a contradiction. A
    /// frame without CFI before that (code nobody describes: where a stale return address's
    /// CFI leads back into the generated code that left it) is no confirmation.
    fn confirmed(&self, candidate: &Frame, fp_cfas: &[u64], ctx: &mut gimli::UnwindContext<usize>) -> bool {
        let memory: &dyn Memory = self.process;
        let mut f = *candidate;
        for _ in 0..CONFIRM_STEPS {
            let addr = f.lookup_address();
            if self.is_entry(&f) || self.code_lookup.is_some_and(|l| l.lookup(addr).is_some()) {
                return true;
            }
            let Some((index, module)) = self.process.module_at(addr) else { return false };
            let Some(cfi) = self.module_cfi(index) else { return false };
            let Some(rule) = cfi.rule(module.to_link_address(addr), ctx) else { return false };
            let rec = match cfi.apply(&rule, &f.regs, memory) {
                Ok(rec) => rec,
                Err(_) => return false,
            };
            if rec.outermost || fp_cfas.contains(&rec.cfa) {
                return true;
            }
            let ip = rec.regs.ip().unwrap_or(0);
            let sp = rec.regs.sp().unwrap_or(rec.cfa);
            if ip == 0 {
                return true;
            }
            if sp <= f.sp || !self.is_code_or_managed(ip) || !scan::follows_call(self.arch, memory, ip) {
                return false;
            }
            f = Frame { ip, sp, cfa: Some(rec.cfa), trust: Trust::Cfi, ip_is_exact: rule.signal_frame, is_signal_frame: false, regs: rec.regs };
        }
        true
    }

    /// `value`, read at `slot`, as a return address, if it passes every check: it points into a
    /// module's code or code a runtime knows (not into a thread's stack, whatever its
    /// permissions), right after a call instruction, and its frame's CFI, where there is some,
    /// unwinds to a caller above it in code (or to the end of the stack).
    fn scan_candidate(&self, frame: &Frame, slot: u64, value: u64, jit: bool, ctx: &mut gimli::UnwindContext<usize>) -> Option<Frame> {
        let memory: &dyn Memory = self.process;
        let value = self.strip(value);
        if !self.is_code(value) || self.in_stack(value) {
            return None;
        }
        let call = value.wrapping_sub(1);
        let module = self.process.module_at(call);
        if module.is_none() && !(jit && self.code_lookup.is_some_and(|l| l.lookup(call).is_some())) {
            return None;
        }
        if !scan::follows_call(self.arch, memory, value) {
            return None;
        }
        let caller_sp = slot.checked_add(8)?;
        let (sp_reg, pc_reg, fp_reg) = (self.arch.sp_reg(), self.arch.pc_reg(), self.arch.fp_reg());
        let mut regs = FrameRegs::new(self.arch);
        regs.set(sp_reg, caller_sp);
        regs.set(pc_reg, value);
        // Keep %rbp: it is still the best guess for a frame-pointer walk further up.
        if let Some(bp) = frame.regs.bp() {
            regs.set(fp_reg, bp);
        }
        if let Some((index, m)) = module
            && let Some(cfi) = self.module_cfi(index)
            && let Some(rule) = cfi.rule(m.to_link_address(call), ctx)
        {
            // The candidate's %rbp: the one carried up, or the one its callee pushed right
            // below the return address (a standard prologue).
            let pushed = slot.checked_sub(8).and_then(|a| memory.read_u64(a).ok());
            let guesses = [frame.regs.bp(), pushed];
            let agrees = |bp: Option<u64>| {
                let mut r = regs;
                if let Some(bp) = bp {
                    r.set(fp_reg, bp);
                }
                match cfi.apply(&rule, &r, memory) {
                    Ok(rec) if rec.outermost => true,
                    Ok(rec) => {
                        let ip = rec.regs.ip().unwrap_or(0);
                        rec.regs.sp().unwrap_or(rec.cfa) > caller_sp && (ip == 0 || self.is_code_or_managed(ip) && scan::follows_call(self.arch, memory, ip))
                    }
                    Err(_) => false,
                }
            };
            match guesses.iter().find(|g| g.is_some() && agrees(**g)) {
                Some(Some(bp)) => regs.set(fp_reg, *bp),
                // The CFA needs no guess: the CFI disagrees, so the word is stale.
                _ if rule.cfa_from_sp() => return None,
                // It needs a %rbp that no guess gives: unchecked, kept as the scan's guess.
                _ => {}
            }
        }
        Some(Frame { ip: value, sp: caller_sp, cfa: None, trust: Trust::Scan, ip_is_exact: false, is_signal_frame: false, regs })
    }
}
