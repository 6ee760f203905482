//! The x64 Windows unwind format (`RUNTIME_FUNCTION` → `UNWIND_INFO` → unwind codes), which
//! CoreCLR's JIT and ReadyToRun images use on Linux too. Given a frame's registers and the
//! fragment holding its address, it recovers the caller's registers the way the Windows
//! `RtlVirtualUnwind` does (Microsoft's "x64 exception handling" documentation; CoreCLR's copy in
//! src/coreclr/unwinder/amd64):
//!
//! - In an epilogue (frame #0 or an interrupted frame only: a return address is never in one),
//!   the epilogue is emulated forward: found by decoding instructions (version 1) or from the
//!   `UWOP_EPILOG` codes (version 2).
//! - Otherwise the prologue is undone: codes are applied in array order (the reverse of the
//!   prologue), skipping those whose prologue offset the address has not reached yet; then the
//!   chained entries (`UNW_FLAG_CHAININFO`), at most [`CHAIN_LIMIT`], never one twice; then the
//!   return address is popped, unless a machine frame (`UWOP_PUSH_MACHFRAME`) gave `rip`.
//!
//! Registers use the Windows numbering inside (rax, rcx, rdx, rbx, rsp, rbp, rsi, rdi, r8..r15)
//! and DWARF numbering in [`FrameRegs`]. The code is run on Linux with the SysV ABI, so only
//! rbx, rbp and r12..r15 carry over from the callee unchanged; the others become unknown.
//! Everything read is bounded: at most 255 codes per entry, 32 bytes of instructions.

use super::managed::WindowsUnwind;
use super::regs::FrameRegs;
use crate::arch::x86_64::dwarf;
use crate::process::Memory;

/// The Windows unwinder's bound on chained entries.
pub(crate) const CHAIN_LIMIT: usize = 32;

const UNW_FLAG_CHAININFO: u8 = 0x4;

const UWOP_PUSH_NONVOL: u8 = 0;
const UWOP_ALLOC_LARGE: u8 = 1;
const UWOP_ALLOC_SMALL: u8 = 2;
const UWOP_SET_FPREG: u8 = 3;
const UWOP_SAVE_NONVOL: u8 = 4;
const UWOP_SAVE_NONVOL_FAR: u8 = 5;
const UWOP_EPILOG: u8 = 6;
const UWOP_SPARE_CODE: u8 = 7;
const UWOP_SAVE_XMM128: u8 = 8;
const UWOP_SAVE_XMM128_FAR: u8 = 9;
const UWOP_PUSH_MACHFRAME: u8 = 10;
/// CoreCLR on Unix only: a frame-pointer offset too large for `UNWIND_INFO.FrameOffset`.
const UWOP_SET_FPREG_LARGE: u8 = 11;

const WIN_RSP: usize = 4;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum WinUnwindError {
    #[error("unwind data at {0:#x} is not in the dump")]
    Unreadable(u64),
    #[error("UNWIND_INFO at {at:#x} has unknown version {version}")]
    Version { at: u64, version: u8 },
    #[error("UNWIND_INFO at {at:#x}: unknown unwind operation {op}")]
    BadOp { at: u64, op: u8 },
    #[error("UNWIND_INFO at {at:#x}: an unwind code runs past the code count")]
    Truncated { at: u64 },
    #[error("UNWIND_INFO at {at:#x}: chained entries loop or exceed {CHAIN_LIMIT}")]
    Chain { at: u64 },
    #[error("register {0} is needed to unwind but not known")]
    MissingRegister(&'static str),
    #[error("address {ip:#x} is outside the fragment {begin:#x}..{end:#x}")]
    Outside { ip: u64, begin: u64, end: u64 },
    #[error("address {0:#x} is in an epilogue that cannot be decoded")]
    BadEpilogue(u64),
}

type Result<T> = std::result::Result<T, WinUnwindError>;

/// The caller's registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unwound {
    pub(crate) regs: FrameRegs,
    /// A machine frame (an interrupt or exception context) gave `rip`: it is the exact
    /// interrupted address, not a return address.
    pub(crate) machine_frame: bool,
}

/// One `UNWIND_INFO`, read from the dump.
#[derive(Debug, Clone)]
struct Info {
    at: u64,
    version: u8,
    flags: u8,
    prolog_size: u8,
    frame_reg: u8,
    frame_offset: u8,
    /// Each slot as (prologue offset / low byte, op byte); a slot is also a u16 operand.
    codes: Vec<[u8; 2]>,
    /// The chained `RUNTIME_FUNCTION` (begin, end, unwind data), RVAs.
    chained: Option<(u32, u32, u32)>,
}

impl Info {
    fn read(mem: &dyn Memory, at: u64) -> Result<Info> {
        let mut head = [0u8; 4];
        mem.read(at, &mut head).map_err(|_| WinUnwindError::Unreadable(at))?;
        let version = head[0] & 7;
        let flags = head[0] >> 3;
        if !(1..=2).contains(&version) {
            return Err(WinUnwindError::Version { at, version });
        }
        let count = head[2] as usize;
        let mut raw = vec![0u8; count * 2];
        let codes_at = at.wrapping_add(4);
        mem.read(codes_at, &mut raw).map_err(|_| WinUnwindError::Unreadable(codes_at))?;
        let codes = raw.chunks_exact(2).map(|c| [c[0], c[1]]).collect();
        let chained = if flags & UNW_FLAG_CHAININFO != 0 {
            // The chained entry follows the codes, padded to an even count.
            let entry = codes_at.wrapping_add(((count + 1) & !1) as u64 * 2);
            let mut e = [0u8; 12];
            mem.read(entry, &mut e).map_err(|_| WinUnwindError::Unreadable(entry))?;
            let u = |i: usize| u32::from_le_bytes([e[i], e[i + 1], e[i + 2], e[i + 3]]);
            Some((u(0), u(4), u(8)))
        } else {
            None
        };
        Ok(Info { at, version, flags, prolog_size: head[1], frame_reg: head[3] & 0xf, frame_offset: head[3] >> 4, codes, chained })
    }

    fn op(&self, i: usize) -> (u8, u8, u8) {
        let [offset, b] = self.codes[i];
        (offset, b & 0xf, b >> 4)
    }

    /// Slot `i` as a 16-bit operand.
    fn slot(&self, i: usize) -> Result<u32> {
        let [lo, hi] = *self.codes.get(i).ok_or(WinUnwindError::Truncated { at: self.at })?;
        Ok(u16::from_le_bytes([lo, hi]) as u32)
    }

    /// Slots `i` and `i + 1` as a 32-bit operand.
    fn slot32(&self, i: usize) -> Result<u32> {
        Ok(self.slot(i)? | self.slot(i + 1)? << 16)
    }

    /// How many slots the code at `i` takes, checked against the count.
    fn slots(&self, i: usize) -> Result<usize> {
        let (_, op, info) = self.op(i);
        let n = match op {
            UWOP_PUSH_NONVOL | UWOP_ALLOC_SMALL | UWOP_SET_FPREG | UWOP_PUSH_MACHFRAME => 1,
            UWOP_ALLOC_LARGE if info == 0 => 2,
            UWOP_ALLOC_LARGE => 3,
            UWOP_SAVE_NONVOL | UWOP_EPILOG | UWOP_SAVE_XMM128 => 2,
            UWOP_SAVE_NONVOL_FAR | UWOP_SPARE_CODE | UWOP_SAVE_XMM128_FAR | UWOP_SET_FPREG_LARGE => 3,
            _ => return Err(WinUnwindError::BadOp { at: self.at, op }),
        };
        if i + n > self.codes.len() {
            return Err(WinUnwindError::Truncated { at: self.at });
        }
        Ok(n)
    }

    /// The scaled frame-pointer offset: `FrameOffset * 16`, or `UWOP_SET_FPREG_LARGE`'s.
    fn fp_offset(&self) -> Result<u64> {
        if self.frame_offset == 15 {
            let mut i = 0;
            while i < self.codes.len() {
                let n = self.slots(i)?;
                if self.op(i).1 == UWOP_SET_FPREG_LARGE {
                    return Ok(self.slot32(i + 1)? as u64 * 16);
                }
                i += n;
            }
        }
        Ok(self.frame_offset as u64 * 16)
    }

    /// The prologue offset of the code that sets the frame pointer, if any.
    fn set_fp_offset(&self) -> Result<Option<u8>> {
        let mut i = 0;
        while i < self.codes.len() {
            let n = self.slots(i)?;
            let (offset, op, _) = self.op(i);
            if op == UWOP_SET_FPREG || op == UWOP_SET_FPREG_LARGE {
                return Ok(Some(offset));
            }
            i += n;
        }
        Ok(None)
    }
}

/// The register file while unwinding, Windows numbering.
struct Context<'m> {
    mem: &'m dyn Memory,
    regs: [Option<u64>; 16],
    /// Registers given a value read from the stack (as opposed to carried from the callee).
    restored: u16,
    rip: Option<u64>,
}

impl Context<'_> {
    fn get(&self, reg: usize) -> Result<u64> {
        const NAMES: [&str; 16] = ["rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"];
        self.regs.get(reg).copied().flatten().ok_or(WinUnwindError::MissingRegister(NAMES.get(reg).copied().unwrap_or("?")))
    }
    fn rsp(&self) -> Result<u64> {
        self.get(WIN_RSP)
    }
    fn set_rsp(&mut self, v: u64) {
        self.regs[WIN_RSP] = Some(v);
    }
    fn read(&self, addr: u64) -> Result<u64> {
        self.mem.read_u64(addr).map_err(|_| WinUnwindError::Unreadable(addr))
    }
    fn restore(&mut self, reg: u8, from: u64) -> Result<()> {
        let v = self.read(from)?;
        self.regs[(reg & 0xf) as usize] = Some(v);
        self.restored |= 1 << (reg & 0xf);
        Ok(())
    }
    fn pop(&mut self, reg: u8) -> Result<()> {
        let sp = self.rsp()?;
        self.restore(reg, sp)?;
        self.set_rsp(sp.wrapping_add(8));
        Ok(())
    }
    fn machine_frame(&mut self, error_code: bool) -> Result<()> {
        let base = self.rsp()?.wrapping_add(if error_code { 8 } else { 0 });
        self.rip = Some(self.read(base)?);
        let sp = self.read(base.wrapping_add(24))?;
        self.set_rsp(sp);
        Ok(())
    }
    fn ret(&mut self) -> Result<()> {
        let sp = self.rsp()?;
        self.rip = Some(self.read(sp)?);
        self.set_rsp(sp.wrapping_add(8));
        Ok(())
    }
}

/// Unwinds the frame at `ip` (exact for frame #0 and interrupted frames, else a return
/// address) in the fragment `function`, from the frame's registers `callee`.
pub(crate) fn unwind(mem: &dyn Memory, function: &WindowsUnwind, ip: u64, ip_is_exact: bool, callee: &FrameRegs) -> Result<Unwound> {
    if ip < function.begin || ip > function.end {
        return Err(WinUnwindError::Outside { ip, begin: function.begin, end: function.end });
    }
    let mut ctx = Context { mem, regs: [None; 16], restored: 0, rip: None };
    for (w, &d) in dwarf::FROM_WINDOWS.iter().enumerate() {
        ctx.regs[w] = callee.get(d);
    }
    let info = Info::read(mem, function.unwind_info)?;
    let machine_frame = if ip_is_exact && in_epilogue(mem, function, &info, ip)? {
        unwind_epilogue(&mut ctx, function, &info, ip)?
    } else {
        let base = establisher_frame(&ctx, &info, ip.wrapping_sub(function.begin))?;
        unwind_prologue(&mut ctx, function, info, ip, base)?
    };
    let mut regs = FrameRegs::default();
    for (w, &d) in dwarf::FROM_WINDOWS.iter().enumerate() {
        if let Some(v) = ctx.regs[w]
            && (ctx.restored & (1 << w) != 0 || crate::arch::Arch::X86_64.is_callee_saved(d) || w == WIN_RSP)
        {
            regs.set(d, v);
        }
    }
    if let Some(rip) = ctx.rip {
        regs.set(dwarf::RIP, rip);
    }
    Ok(Unwound { regs, machine_frame })
}

/// The base the `SAVE_*` offsets are relative to: the frame register minus its offset once
/// the prologue has set it, else the stack pointer.
fn establisher_frame(ctx: &Context, info: &Info, prolog_offset: u64) -> Result<u64> {
    if info.frame_reg == 0 {
        return ctx.rsp();
    }
    let fp_set = prolog_offset >= info.prolog_size as u64
        || info.flags & UNW_FLAG_CHAININFO != 0
        || info.set_fp_offset()?.is_some_and(|o| prolog_offset >= o as u64);
    if fp_set { Ok(ctx.get(info.frame_reg as usize)?.wrapping_sub(info.fp_offset()?)) } else { ctx.rsp() }
}

fn unwind_prologue(ctx: &mut Context, function: &WindowsUnwind, mut info: Info, ip: u64, base: u64) -> Result<bool> {
    let mut begin = function.begin;
    let mut seen = vec![info.at];
    loop {
        let prolog_offset = ip.wrapping_sub(begin);
        let mut machine_frame = false;
        let mut i = 0;
        while i < info.codes.len() {
            let n = info.slots(i)?;
            let (offset, op, opinfo) = info.op(i);
            if prolog_offset >= offset as u64 {
                match op {
                    UWOP_PUSH_NONVOL => ctx.pop(opinfo)?,
                    UWOP_ALLOC_LARGE => {
                        let size = if opinfo == 0 { info.slot(i + 1)? as u64 * 8 } else { info.slot32(i + 1)? as u64 };
                        let sp = ctx.rsp()?;
                        ctx.set_rsp(sp.wrapping_add(size));
                    }
                    UWOP_ALLOC_SMALL => {
                        let sp = ctx.rsp()?;
                        ctx.set_rsp(sp.wrapping_add(opinfo as u64 * 8 + 8));
                    }
                    UWOP_SET_FPREG | UWOP_SET_FPREG_LARGE => {
                        let fp = ctx.get(info.frame_reg as usize)?;
                        let off = if op == UWOP_SET_FPREG { info.frame_offset as u64 * 16 } else { info.slot32(i + 1)? as u64 * 16 };
                        ctx.set_rsp(fp.wrapping_sub(off));
                    }
                    UWOP_SAVE_NONVOL => ctx.restore(opinfo, base.wrapping_add(info.slot(i + 1)? as u64 * 8))?,
                    UWOP_SAVE_NONVOL_FAR => ctx.restore(opinfo, base.wrapping_add(info.slot32(i + 1)? as u64))?,
                    UWOP_PUSH_MACHFRAME => {
                        ctx.machine_frame(opinfo != 0)?;
                        machine_frame = true;
                    }
                    // Epilogue markers, spare codes and XMM saves change no tracked register.
                    _ => {}
                }
            }
            i += n;
        }
        let Some((b, _, u)) = info.chained else {
            if !machine_frame {
                ctx.ret()?;
            }
            return Ok(machine_frame);
        };
        let next = function.image_base.wrapping_add(u as u64);
        if seen.contains(&next) || seen.len() > CHAIN_LIMIT {
            return Err(WinUnwindError::Chain { at: info.at });
        }
        seen.push(next);
        begin = function.image_base.wrapping_add(b as u64);
        info = Info::read(ctx.mem, next)?;
    }
}

/// Up to 32 bytes of code at `ip`; unreadable bytes read as 0, which matches no epilogue.
fn code_bytes(mem: &dyn Memory, ip: u64) -> [u8; 32] {
    let mut buf = [0u8; 32];
    let mut done = 0;
    while done < buf.len() {
        match mem.chunk(ip.wrapping_add(done as u64), buf.len() - done) {
            Ok(c) if !c.is_empty() => {
                buf[done..done + c.len()].copy_from_slice(c);
                done += c.len();
            }
            _ => break,
        }
    }
    buf
}

const REX_W: u8 = 0x48;

fn is_rex(b: u8) -> bool {
    b & 0xf0 == 0x40
}

fn i32_at(code: &[u8; 32], at: usize) -> i64 {
    let b = |k: usize| code.get(at + k).copied().unwrap_or(0);
    i32::from_le_bytes([b(0), b(1), b(2), b(3)]) as i64
}

fn in_epilogue(mem: &dyn Memory, function: &WindowsUnwind, info: &Info, ip: u64) -> Result<bool> {
    if info.version >= 2 {
        return Ok(epilogue_offset_v2(function, info, ip).is_some());
    }
    let code = code_bytes(mem, ip);
    let b = |k: usize| code.get(k).copied().unwrap_or(0);
    let mut at = 0usize;
    let nb = |at: usize, k: usize| b(at + k);
    if nb(at, 0) == REX_W && nb(at, 1) == 0x83 && nb(at, 2) == 0xc4 {
        at += 4;
    } else if nb(at, 0) == REX_W && nb(at, 1) == 0x81 && nb(at, 2) == 0xc4 {
        at += 7;
    } else if nb(at, 0) & 0xfe == REX_W && nb(at, 1) == 0x8d {
        let reg = ((nb(at, 0) & 1) << 3) | (nb(at, 2) & 7);
        if reg != 0 && reg == info.frame_reg {
            match nb(at, 2) & 0xf8 {
                0x60 => at += 4,
                0xa0 => at += 7,
                _ => {}
            }
        }
    }
    while at < code.len() {
        if nb(at, 0) & 0xf8 == 0x58 {
            at += 1;
        } else if is_rex(nb(at, 0)) && nb(at, 1) & 0xf8 == 0x58 {
            at += 2;
        } else {
            break;
        }
    }
    if nb(at, 0) == 0xf2 {
        at += 1;
    }
    let (c0, c1, c2) = (nb(at, 0), nb(at, 1), nb(at, 2));
    Ok(match c0 {
        0xc3 | 0xc2 => true,
        0xf3 => c1 == 0xc3,
        0xeb | 0xe9 => {
            let next = ip.wrapping_add(at as u64);
            let target = if c0 == 0xeb { next.wrapping_add(2).wrapping_add(c1 as i8 as i64 as u64) } else { next.wrapping_add(5).wrapping_add(i32_at(&code, at + 1) as u64) };
            // A jump out of the fragment (or back to its start) is a tail call: an epilogue.
            target < function.begin || target >= function.end || (target == function.begin && info.flags & UNW_FLAG_CHAININFO == 0)
        }
        0xff => c1 == 0x25,
        _ => c0 & 0xf8 == REX_W && c1 == 0xff && c2 & 0x38 == 0x20,
    })
}

/// For version 2: the offset of `ip` into the epilogue the `UWOP_EPILOG` codes place it in.
fn epilogue_offset_v2(function: &WindowsUnwind, info: &Info, ip: u64) -> Option<u64> {
    let (size, op, flags) = (!info.codes.is_empty()).then(|| info.op(0))?;
    if op != UWOP_EPILOG || size == 0 {
        return None;
    }
    let size = size as u64;
    let end = function.end.wrapping_sub(function.image_base);
    let rel = ip.wrapping_sub(function.image_base);
    if flags & 1 != 0 {
        let start = end.wrapping_sub(size);
        if rel.wrapping_sub(start) < size {
            return Some(rel - start);
        }
    }
    for i in 1..info.codes.len() {
        let (low, op, high) = info.op(i);
        if op != UWOP_EPILOG {
            break;
        }
        let from_end = low as u64 + high as u64 * 256;
        if from_end == 0 {
            break;
        }
        let start = end.wrapping_sub(from_end);
        if rel.wrapping_sub(start) < size {
            return Some(rel.wrapping_sub(start));
        }
    }
    None
}

fn unwind_epilogue(ctx: &mut Context, function: &WindowsUnwind, info: &Info, ip: u64) -> Result<bool> {
    if info.version >= 2 {
        let offset = epilogue_offset_v2(function, info, ip).ok_or(WinUnwindError::BadEpilogue(ip))?;
        return unwind_epilogue_v2(ctx, function, info.clone(), offset);
    }
    let code = code_bytes(ctx.mem, ip);
    let b = |k: usize| code.get(k).copied().unwrap_or(0);
    let mut at = 0usize;
    if b(0) & 0xf8 == REX_W {
        match b(1) {
            0x83 => {
                let sp = ctx.rsp()?;
                ctx.set_rsp(sp.wrapping_add(b(3) as i8 as i64 as u64));
                at = 4;
            }
            0x81 => {
                let sp = ctx.rsp()?;
                ctx.set_rsp(sp.wrapping_add(i32_at(&code, 3) as u64));
                at = 7;
            }
            0x8d => {
                let reg = (((b(0) & 1) << 3) | (b(2) & 7)) as usize;
                match b(2) & 0xf8 {
                    0x60 => {
                        let fp = ctx.get(reg)?;
                        ctx.set_rsp(fp.wrapping_add(b(3) as i8 as i64 as u64));
                        at = 4;
                    }
                    0xa0 => {
                        let fp = ctx.get(reg)?;
                        ctx.set_rsp(fp.wrapping_add(i32_at(&code, 3) as u64));
                        at = 7;
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    while at + 1 < code.len() {
        if b(at) & 0xf8 == 0x58 {
            ctx.pop(b(at) & 7)?;
            at += 1;
        } else if is_rex(b(at)) && b(at + 1) & 0xf8 == 0x58 {
            ctx.pop(((b(at) & 1) << 3) | (b(at + 1) & 7))?;
            at += 2;
        } else {
            break;
        }
    }
    ctx.ret()?;
    Ok(false)
}

/// Version 2: the pops not yet done are undone from the prologue's push codes (the epilogue
/// mirrors them), then the return (or a machine frame).
fn unwind_epilogue_v2(ctx: &mut Context, function: &WindowsUnwind, mut info: Info, offset: u64) -> Result<bool> {
    let mut seen = vec![info.at];
    let first_push = loop {
        let mut i = 0;
        let mut found = None;
        while i < info.codes.len() {
            let (_, op, _) = info.op(i);
            if op == UWOP_PUSH_NONVOL || op == UWOP_PUSH_MACHFRAME {
                found = Some(i);
                break;
            }
            i += info.slots(i)?;
        }
        if let Some(i) = found {
            break i;
        }
        let Some((_, _, u)) = info.chained else { break info.codes.len() };
        let next = function.image_base.wrapping_add(u as u64);
        if seen.contains(&next) || seen.len() > CHAIN_LIMIT {
            return Err(WinUnwindError::Chain { at: info.at });
        }
        seen.push(next);
        info = Info::read(ctx.mem, next)?;
    };
    let mut current = 0u64;
    let mut i = first_push;
    while i < info.codes.len() {
        let (_, op, reg) = info.op(i);
        if op != UWOP_PUSH_NONVOL {
            break;
        }
        if current >= offset {
            ctx.pop(reg)?;
        }
        current += if reg >= 8 { 2 } else { 1 };
        i += 1;
    }
    if i < info.codes.len() {
        let (_, op, reg) = info.op(i);
        if op == UWOP_ALLOC_SMALL && reg == 0 {
            // `pop rcx` of a pushed RFLAGS.
            if current >= offset {
                let sp = ctx.rsp()?;
                ctx.set_rsp(sp.wrapping_add(8));
            }
            i += 1;
        }
    }
    if i < info.codes.len() && info.op(i).1 == UWOP_PUSH_MACHFRAME {
        ctx.machine_frame(false)?;
        return Ok(true);
    }
    ctx.ret()?;
    Ok(false)
}

#[cfg(test)]
mod tests;
