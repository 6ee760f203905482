//! The ARM64 Windows unwind format (`.pdata` → `.xdata` → unwind codes), which CoreCLR's JIT and
//! ReadyToRun images use on Linux arm64 too. Given a frame's registers and the function holding
//! its address, it recovers the caller's registers as `RtlVirtualUnwind` does (Microsoft's
//! "ARM64 exception handling" documentation; CoreCLR's copy in src/coreclr/unwinder/arm64):
//!
//! - A `RUNTIME_FUNCTION` is two words: the function's start RVA, then either the RVA of its
//!   `.xdata` (low two bits 0), packed unwind data (1: a function, 2: a fragment without
//!   prologue or epilogue), or (3) the RVA of a parent entry whose prologue covers it.
//! - The `.xdata` header gives the function's length, its epilogue scopes (or one epilogue
//!   described in the header, `E`), and a byte string of unwind codes: the prologue's codes
//!   first, in the reverse order of its instructions, each epilogue's at its scope's index.
//! - The codes run until `end`: in the body all of the prologue's; in the prologue or an
//!   epilogue, those of the instructions already done (one code per instruction; an epilogue
//!   has one more instruction, its `ret`). The pc is then the restored `lr`.
//! - Packed data is expanded into the codes the same prologue would have (the canonical
//!   prologue of the documentation: integer pairs, `lr`, FP pairs, homed arguments, locals with
//!   the `fp`/`lr` record) and unwound the same way.
//!
//! Registers use DWARF numbering (x0–x30, sp = 31, the pc in knot's slot 32). Only x19–x29 and
//! sp carry over from the callee unchanged (AAPCS64's callee-saved set); the caller's x30 is
//! the return address. FP registers (d8–d15) are not tracked, but their saves move sp as they
//! must. Everything read is bounded: at most 255 code words and 65535 epilogue scopes.

use super::managed::WindowsUnwind;
use super::regs::FrameRegs;
use super::windows_x64::Unwound;
use crate::arch::aarch64::dwarf;
use crate::process::Memory;

/// How a `RUNTIME_FUNCTION`'s second word is read (its low two bits).
const PDATA_XDATA: u32 = 0;
const PDATA_PACKED_FUNCTION: u32 = 1;
const PDATA_PACKED_FRAGMENT: u32 = 2;
const PDATA_CHAINED: u32 = 3;

/// The `.xdata` header's largest epilogue count (its extended 16-bit field).
const MAX_EPILOG_SCOPES: u32 = 0xffff;

const OP_END: u8 = 0xe4;
const OP_END_C: u8 = 0xe5;
const OP_SET_FP: u8 = 0xe1;
const OP_NOP: u8 = 0xe3;
const OP_PAC: u8 = 0xfc;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Arm64UnwindError {
    #[error("unwind data at {0:#x} is not in the dump")]
    Unreadable(u64),
    #[error(".xdata at {at:#x} has unknown version {version}")]
    Version { at: u64, version: u32 },
    #[error("unwind code {code:#04x} at byte {index} is not valid here")]
    BadCode { code: u8, index: usize },
    #[error("unwind code {0:#04x} (a Windows kernel frame) is not read on Linux")]
    Unsupported(u8),
    #[error("a chained RUNTIME_FUNCTION's parent at {0:#x} is chained again")]
    Chain(u64),
    #[error("register {0} is needed to unwind but not known")]
    MissingRegister(&'static str),
    #[error("address {ip:#x} is outside the function {begin:#x}..{end:#x}")]
    Outside { ip: u64, begin: u64, end: u64 },
    #[error("RUNTIME_FUNCTION word {0:#x} has no length (a chained entry)")]
    NoLength(u32),
}

type Result<T> = std::result::Result<T, Arm64UnwindError>;

fn read_u32(mem: &dyn Memory, at: u64) -> Result<u32> {
    mem.read_u32(at).map_err(|_| Arm64UnwindError::Unreadable(at))
}

/// The length in bytes of the function a `RUNTIME_FUNCTION` whose second word is `unwind_data`
/// describes (from its `.xdata` header, or the packed word itself): where its code ends.
pub(crate) fn function_length(mem: &dyn Memory, image_base: u64, unwind_data: u32) -> Result<u32> {
    match unwind_data & 3 {
        PDATA_XDATA => Ok((read_u32(mem, image_base.wrapping_add(unwind_data as u64))? & 0x3ffff) * 4),
        PDATA_PACKED_FUNCTION | PDATA_PACKED_FRAGMENT => Ok(((unwind_data >> 2) & 0x7ff) * 4),
        _ => Err(Arm64UnwindError::NoLength(unwind_data)),
    }
}

/// One function's unwind description, as the `.xdata` gives it (read from the dump or
/// expanded from packed data).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Xdata {
    /// In instructions (4 bytes).
    function_length: u32,
    /// `E`: one epilogue, at the function's end, whose codes start at `epilog_index`.
    epilog_in_header: bool,
    epilog_index: u32,
    /// (start offset in instructions, index of its first code), in order.
    scopes: Vec<(u32, u32)>,
    codes: Vec<u8>,
}

impl Xdata {
    fn read(mem: &dyn Memory, at: u64) -> Result<Xdata> {
        let header = read_u32(mem, at)?;
        let version = (header >> 18) & 3;
        if version != 0 {
            return Err(Arm64UnwindError::Version { at, version });
        }
        let mut next = at.wrapping_add(4);
        let mut words = (header >> 27) & 31;
        let mut count = (header >> 22) & 31;
        if words == 0 && count == 0 {
            let ext = read_u32(mem, next)?;
            next = next.wrapping_add(4);
            words = (ext >> 16) & 0xff;
            count = ext & 0xffff;
        }
        let epilog_in_header = header & (1 << 21) != 0;
        let mut scopes = Vec::new();
        if !epilog_in_header {
            let n = count.min(MAX_EPILOG_SCOPES) as usize;
            let mut raw = vec![0u8; n * 4];
            mem.read(next, &mut raw).map_err(|_| Arm64UnwindError::Unreadable(next))?;
            scopes = raw.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).map(|w| (w & 0x3ffff, w >> 22)).collect();
            next = next.wrapping_add(n as u64 * 4);
        }
        let mut codes = vec![0u8; words as usize * 4];
        mem.read(next, &mut codes).map_err(|_| Arm64UnwindError::Unreadable(next))?;
        Ok(Xdata { function_length: header & 0x3ffff, epilog_in_header, epilog_index: if epilog_in_header { count } else { 0 }, scopes, codes })
    }

    /// The codes a packed `RUNTIME_FUNCTION` word stands for: the canonical prologue of the
    /// documentation's "packed unwind data", with its mirror epilogue at the function's end.
    fn expand_packed(word: u32) -> Xdata {
        let flag = word & 3;
        let function_length = (word >> 2) & 0x7ff;
        let reg_f = (word >> 13) & 7;
        let reg_i = (word >> 16) & 0xf;
        let h = (word >> 20) & 1;
        let cr = (word >> 21) & 3;
        let frame_size = (word >> 23) & 0x1ff;
        // Sizes in 8-byte slots.
        let fam = frame_size * 2;
        let int_regs = reg_i + u32::from(cr == 1);
        let fp_regs = if reg_f != 0 { reg_f + 1 } else { 0 };
        let mut sav = int_regs + fp_regs;
        if sav > 0 {
            sav += h * 8;
        }
        let sav = (sav + 1) & !1;
        let loc = fam.saturating_sub(sav);
        // In prologue order (first instruction first), each code in its byte order.
        let mut ops: Vec<Vec<u8>> = Vec::new();
        let mut predec_done = false;
        let mut slot = 0u32;
        if cr == 2 {
            ops.push(vec![OP_PAC]);
        }
        if int_regs != 0 {
            if reg_i == 1 && cr == 1 {
                ops.push(alloc(sav * 8));
                predec_done = true;
            }
            let pairs = (reg_i / 2) * 2;
            for r in (0..pairs).step_by(2) {
                if predec_done {
                    ops.push(two(0xc8, r, 4, slot));
                } else {
                    ops.push(two(0xcc, r, 4, sav - 1));
                    predec_done = true;
                }
                slot += 2;
            }
            if reg_i % 2 == 1 {
                if cr == 1 {
                    // save_lrpair: <x(19+2X), lr>.
                    ops.push(two(0xd6, pairs / 2, 3, slot));
                    slot += 2;
                } else if predec_done {
                    ops.push(two(0xd0, pairs, 4, slot));
                    slot += 1;
                } else {
                    ops.push(save_reg_x(pairs, sav - 1));
                    slot += 1;
                    predec_done = true;
                }
            } else if cr == 1 {
                // lr alone: x(19+11).
                if predec_done {
                    ops.push(two(0xd0, 11, 4, slot));
                } else {
                    ops.push(save_reg_x(11, sav - 1));
                    predec_done = true;
                }
                slot += 1;
            }
        }
        if fp_regs != 0 {
            let pairs = (fp_regs / 2) * 2;
            for r in (0..pairs).step_by(2) {
                if predec_done {
                    ops.push(two(0xd8, r, 3, slot));
                } else {
                    ops.push(two(0xda, r, 3, sav - 1));
                    predec_done = true;
                }
                slot += 2;
            }
            if fp_regs % 2 == 1 {
                if predec_done {
                    ops.push(two(0xdc, pairs, 3, slot));
                } else {
                    ops.push(vec![0xde, ((pairs as u8 & 7) << 5) | ((sav - 1) as u8 & 0x1f)]);
                    predec_done = true;
                }
            }
        }
        // Homed arguments (x0–x7 stored in the save area): four instructions, no unwind effect.
        let nops_at = (h != 0 && predec_done).then_some(ops.len());
        if nops_at.is_some() {
            ops.extend(std::iter::repeat_n(vec![OP_NOP], 4));
        }
        let mut fp_set = false;
        if loc > 0 {
            if cr == 2 || cr == 3 {
                if loc <= 512 / 8 {
                    ops.push(vec![0x80 | ((loc - 1) as u8 & 0x3f)]);
                } else {
                    ops.push(alloc(loc * 8));
                    ops.push(vec![0x40]);
                }
                ops.push(vec![OP_SET_FP]);
                fp_set = true;
            } else {
                ops.push(alloc(loc * 8));
            }
        }
        // Unwind order: the last prologue instruction's code first.
        let prolog: Vec<u8> = ops.iter().rev().flatten().copied().collect();
        if flag == PDATA_PACKED_FRAGMENT {
            // A fragment has no prologue of its own: `end_c` first (an empty scope), then the
            // codes of the prologue it continues, all run wherever the pc is.
            let codes = [&[OP_END_C][..], &prolog, &[OP_END]].concat();
            return Xdata { function_length, epilog_in_header: false, epilog_index: 0, scopes: Vec::new(), codes };
        }
        let mut codes = prolog;
        codes.push(OP_END);
        let mut epilog_index = u32::from(fp_set);
        if let Some(at) = nops_at {
            // The epilogue does not reload the homed arguments: the prologue's codes without
            // its four nops, after the prologue's own.
            let epilogue: Vec<u8> = ops.iter().enumerate().rev().filter(|(i, _)| !(at..at + 4).contains(i)).flat_map(|(_, op)| op.iter().copied()).collect();
            epilog_index += codes.len() as u32;
            codes.extend(epilogue);
            codes.push(OP_END);
        }
        Xdata { function_length, epilog_in_header: true, epilog_index, scopes: Vec::new(), codes }
    }
}

/// A two-byte code `base:x:z` with a `x_bits`-bit register field and a 6-bit offset.
fn two(base: u8, x: u32, x_bits: u32, z: u32) -> Vec<u8> {
    let v = ((base as u32) << 8) | ((x & ((1 << x_bits) - 1)) << 6) | (z & 0x3f);
    vec![(v >> 8) as u8, v as u8]
}

/// `save_reg_x`: `1101010x|xxxzzzzz`.
fn save_reg_x(x: u32, z: u32) -> Vec<u8> {
    vec![0xd4 | ((x >> 3) & 1) as u8, (((x & 7) << 5) | (z & 0x1f)) as u8]
}

/// The smallest `alloc_*` code for `bytes` (a multiple of 16).
fn alloc(bytes: u32) -> Vec<u8> {
    let x = bytes / 16;
    if bytes >= 16384 {
        vec![0xe0, (x >> 16) as u8, (x >> 8) as u8, x as u8]
    } else if bytes >= 512 {
        vec![0xc0 | ((x >> 8) & 7) as u8, x as u8]
    } else {
        vec![(x & 0x1f) as u8]
    }
}

/// How many bytes the code starting with `op` has, and how many instructions it stands for.
fn code_size(op: u8) -> (usize, u32) {
    const SIZE: [u8; 32] = [4, 1, 2, 1, 1, 1, 1, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 3, 4, 5, 1, 1, 1, 1];
    const INSNS: [u8; 32] = [1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];
    match op {
        0..=0xbf => (1, 1),
        0xc0..=0xdf => (2, 1),
        _ => (SIZE[(op - 0xe0) as usize] as usize, INSNS[(op - 0xe0) as usize] as u32),
    }
}

fn is_end(op: u8) -> bool {
    op & 0xfe == OP_END
}

/// The instructions the codes from `from` describe, up to an end code; an epilogue counts its
/// `ret` too.
fn scope_size(codes: &[u8], from: usize, epilogue: bool) -> u32 {
    let mut at = from;
    let mut size = 0;
    while let Some(&op) = codes.get(at) {
        if is_end(op) {
            break;
        }
        let (len, insns) = code_size(op);
        size += insns;
        at += len;
    }
    size + u32::from(epilogue)
}

/// The register file while unwinding.
struct Context<'m> {
    mem: &'m dyn Memory,
    x: [Option<u64>; 31],
    sp: Option<u64>,
    pc: Option<u64>,
    /// x0–x30 given a value read from the stack.
    restored: u32,
}

impl Context<'_> {
    fn sp(&self) -> Result<u64> {
        self.sp.ok_or(Arm64UnwindError::MissingRegister("sp"))
    }
    fn reg(&self, r: usize, name: &'static str) -> Result<u64> {
        self.x.get(r).copied().flatten().ok_or(Arm64UnwindError::MissingRegister(name))
    }
    /// `count` 8-byte registers from `first` (x0–x30, or FP registers when `fp`, which are
    /// read but not kept) at sp + `offset`; a negative offset is a pre-decrement: the registers
    /// are at sp, and sp moves up by its size after.
    fn restore(&mut self, offset: i64, first: u32, count: u32, fp: bool, width: u64) -> Result<()> {
        let limit = if fp { 32 } else { 31 };
        if first + count > limit {
            return Err(Arm64UnwindError::BadCode { code: 0, index: first as usize });
        }
        let sp = self.sp()?;
        let mut at = if offset >= 0 { sp.wrapping_add(offset as u64) } else { sp };
        for r in first..first + count {
            let v = self.mem.read_u64(at).map_err(|_| Arm64UnwindError::Unreadable(at))?;
            if !fp {
                self.x[r as usize] = Some(v);
                self.restored |= 1 << r;
            }
            at = at.wrapping_add(width);
        }
        if offset < 0 {
            self.sp = Some(sp.wrapping_add(offset.unsigned_abs()));
        }
        Ok(())
    }
    fn add_sp(&mut self, bytes: u64) -> Result<()> {
        self.sp = Some(self.sp()?.wrapping_add(bytes));
        Ok(())
    }
    fn read(&self, at: u64) -> Result<u64> {
        self.mem.read_u64(at).map_err(|_| Arm64UnwindError::Unreadable(at))
    }
}

/// The `RUNTIME_FUNCTION` a chained one (low bits 3) stands under: its (begin RVA, word).
fn chained_parent(mem: &dyn Memory, function: &WindowsUnwind, word: u32) -> Result<(u32, u32)> {
    let at = function.image_base.wrapping_add((word & !3) as u64);
    let begin = read_u32(mem, at)?;
    let data = read_u32(mem, at.wrapping_add(4))?;
    if data & 3 == PDATA_CHAINED {
        return Err(Arm64UnwindError::Chain(at));
    }
    Ok((begin, data))
}

/// Unwinds the frame at `ip` (exact for frame #0 and interrupted frames, else a return
/// address) in `function`, whose `RUNTIME_FUNCTION` second word is `unwind_data`, from the
/// frame's registers `callee`.
pub(crate) fn unwind(mem: &dyn Memory, function: &WindowsUnwind, unwind_data: u32, ip: u64, callee: &FrameRegs) -> Result<Unwound> {
    if ip < function.begin || ip > function.end {
        return Err(Arm64UnwindError::Outside { ip, begin: function.begin, end: function.end });
    }
    let mut ctx = Context { mem, x: [None; 31], sp: callee.get(dwarf::SP), pc: None, restored: 0 };
    for (r, slot) in ctx.x.iter_mut().enumerate() {
        *slot = callee.get(r as u16);
    }
    // Where the unwind starts, in instructions from the function's start.
    let (word, offset) = if unwind_data & 3 == PDATA_CHAINED {
        // A fragment under a parent's prologue: the parent is unwound from its start's view
        // (RtlVirtualUnwind: ControlPcRva = the parent's BeginAddress).
        let (_, parent) = chained_parent(mem, function, unwind_data)?;
        (parent, 0)
    } else {
        (unwind_data, (ip - function.begin) / 4)
    };
    let xdata = if word & 3 == PDATA_XDATA {
        Xdata::read(mem, function.image_base.wrapping_add(word as u64))?
    } else {
        Xdata::expand_packed(word)
    };
    let final_pc_from_lr = run(&mut ctx, &xdata, offset.min(u32::MAX as u64) as u32)?;
    if final_pc_from_lr {
        ctx.pc = Some(ctx.reg(30, "lr")?);
    }
    let mut regs = FrameRegs::new(crate::arch::Arch::Aarch64);
    for (r, v) in ctx.x.iter().enumerate() {
        if let Some(v) = *v
            && (ctx.restored & (1 << r) != 0 || (19..=29).contains(&r))
        {
            regs.set(r as u16, v);
        }
    }
    let pc = ctx.pc.ok_or(Arm64UnwindError::MissingRegister("pc"))?;
    regs.set(dwarf::LR, pc);
    regs.set(dwarf::PC, pc);
    regs.set(dwarf::SP, ctx.sp()?);
    Ok(Unwound { regs, machine_frame: !final_pc_from_lr })
}

/// Runs the codes that apply at `offset` (in instructions); says whether the pc is to come from
/// `lr` (false after a machine frame or a saved context gave it).
fn run(ctx: &mut Context, xdata: &Xdata, offset: u32) -> Result<bool> {
    let codes = &xdata.codes;
    let mut at = 0usize;
    let mut skip = 0u32;
    let words = codes.len() as u32;
    let mut decided = false;
    // In the prologue: only the codes of the instructions already done.
    if offset < words {
        let size = scope_size(codes, 0, false);
        if offset < size {
            skip = size - offset;
            decided = true;
        }
    }
    if !decided && xdata.epilog_in_header {
        let index = xdata.epilog_index;
        if (offset as u64) + (words as u64).saturating_sub(index as u64) >= xdata.function_length as u64 {
            let size = scope_size(codes, index as usize, true);
            let start = xdata.function_length.saturating_sub(size);
            if offset >= start {
                at = index as usize;
                skip = offset - start;
            }
        }
    } else if !decided {
        for &(start, index) in &xdata.scopes {
            if offset < start {
                break;
            }
            if (offset as u64) < start as u64 + (words as u64).saturating_sub(index as u64) {
                let size = scope_size(codes, index as usize, true);
                if offset < start + size {
                    at = index as usize;
                    skip = offset - start;
                    break;
                }
            }
        }
    }
    while skip > 0 {
        let Some(&op) = codes.get(at) else { break };
        if is_end(op) {
            break;
        }
        at += code_size(op).0;
        skip -= 1;
    }
    execute(ctx, codes, at)
}

fn execute(ctx: &mut Context, codes: &[u8], mut at: usize) -> Result<bool> {
    let mut save_nexts = 0u32;
    let mut pc_from_lr = true;
    while let Some(&op) = codes.get(at) {
        let index = at;
        at += 1;
        let bad = || Arm64UnwindError::BadCode { code: op, index };
        let mut next = || -> Result<u8> {
            let b = codes.get(at).copied().ok_or_else(bad)?;
            at += 1;
            Ok(b)
        };
        // Only pair saves take the accumulated save_next's.
        let pairs_only = |n: u32| if n != 0 { Err(bad()) } else { Ok(()) };
        match op {
            0x00..=0x1f => {
                pairs_only(save_nexts)?;
                ctx.add_sp(16 * (op & 0x1f) as u64)?;
            }
            0x20..=0x3f => {
                ctx.restore(-8 * (op & 0x1f) as i64, 19, 2 + 2 * save_nexts, false, 8)?;
                save_nexts = 0;
            }
            0x40..=0x7f => {
                pairs_only(save_nexts)?;
                ctx.restore(8 * (op & 0x3f) as i64, 29, 2, false, 8)?;
            }
            0x80..=0xbf => {
                pairs_only(save_nexts)?;
                ctx.restore(-8 * ((op & 0x3f) as i64 + 1), 29, 2, false, 8)?;
            }
            0xc0..=0xc7 => {
                pairs_only(save_nexts)?;
                let lo = next()?;
                ctx.add_sp(16 * ((((op & 7) as u64) << 8) | lo as u64))?;
            }
            0xc8..=0xcf => {
                let n = next()?;
                let reg = 19 + (((op & 3) as u32) << 2) + (n >> 6) as u32;
                let off = if op <= 0xcb { 8 * (n & 0x3f) as i64 } else { -8 * ((n & 0x3f) as i64 + 1) };
                ctx.restore(off, reg, 2 + 2 * save_nexts, false, 8)?;
                save_nexts = 0;
            }
            0xd0..=0xd3 => {
                pairs_only(save_nexts)?;
                let n = next()?;
                ctx.restore(8 * (n & 0x3f) as i64, 19 + (((op & 3) as u32) << 2) + (n >> 6) as u32, 1, false, 8)?;
            }
            0xd4..=0xd5 => {
                pairs_only(save_nexts)?;
                let n = next()?;
                ctx.restore(-8 * ((n & 0x1f) as i64 + 1), 19 + (((op & 1) as u32) << 3) + (n >> 5) as u32, 1, false, 8)?;
            }
            0xd6..=0xd7 => {
                pairs_only(save_nexts)?;
                let n = next()?;
                let off = 8 * (n & 0x3f) as i64;
                ctx.restore(off, 19 + 2 * ((((op & 1) as u32) << 2) + (n >> 6) as u32), 1, false, 8)?;
                ctx.restore(off + 8, 30, 1, false, 8)?;
            }
            0xd8..=0xdb => {
                let n = next()?;
                let reg = 8 + (((op & 1) as u32) << 2) + (n >> 6) as u32;
                let off = if op <= 0xd9 { 8 * (n & 0x3f) as i64 } else { -8 * ((n & 0x3f) as i64 + 1) };
                ctx.restore(off, reg, 2 + 2 * save_nexts, true, 8)?;
                save_nexts = 0;
            }
            0xdc..=0xdd => {
                pairs_only(save_nexts)?;
                let n = next()?;
                ctx.restore(8 * (n & 0x3f) as i64, 8 + (((op & 1) as u32) << 2) + (n >> 6) as u32, 1, true, 8)?;
            }
            0xde => {
                pairs_only(save_nexts)?;
                let n = next()?;
                ctx.restore(-8 * ((n & 0x1f) as i64 + 1), 8 + (n >> 5) as u32, 1, true, 8)?;
            }
            0xdf => {
                // alloc_z: a multiple of the SVE vector length, which the dump does not record.
                return Err(Arm64UnwindError::Unsupported(op));
            }
            0xe0 => {
                pairs_only(save_nexts)?;
                let (a, b, c) = (next()?, next()?, next()?);
                ctx.add_sp(16 * (((a as u64) << 16) | ((b as u64) << 8) | c as u64))?;
            }
            OP_SET_FP => {
                pairs_only(save_nexts)?;
                ctx.sp = Some(ctx.reg(29, "fp")?);
            }
            0xe2 => {
                pairs_only(save_nexts)?;
                let n = next()?;
                ctx.sp = Some(ctx.reg(29, "fp")?.wrapping_sub(8 * n as u64));
            }
            OP_NOP => pairs_only(save_nexts)?,
            OP_END => {
                pairs_only(save_nexts)?;
                return Ok(pc_from_lr);
            }
            OP_END_C => {}
            0xe6 => save_nexts += 1,
            0xe7 => {
                // save_any_reg: 11100111 0pxrrrrr ffoooooo.
                let (b1, b2) = (next()?, next()?);
                let (p, x, r) = ((b1 >> 6) & 1, (b1 >> 5) & 1, (b1 & 0x1f) as u32);
                let (f, o) = (b2 >> 6, (b2 & 0x3f) as i64);
                if b1 & 0x80 != 0 || (p == 0 && save_nexts != 0) {
                    return Err(bad());
                }
                let scale = if x == 1 || f == 2 || p == 1 { 16 } else { 8 };
                let off = (o + x as i64) * scale * if x == 1 { -1 } else { 1 };
                let count = 1 + p as u32 + 2 * save_nexts;
                match f {
                    0 => ctx.restore(off, r, count, false, 8)?,
                    1 => ctx.restore(off, r, count, true, 8)?,
                    2 => ctx.restore(off, r, count, true, 16)?,
                    _ => return Err(bad()),
                }
                save_nexts = 0;
            }
            0xe9 => {
                // A machine frame: sp and pc saved at sp.
                pairs_only(save_nexts)?;
                let sp = ctx.sp()?;
                let (new_sp, pc) = (ctx.read(sp)?, ctx.read(sp.wrapping_add(8))?);
                ctx.sp = Some(new_sp);
                ctx.pc = Some(pc);
                pc_from_lr = false;
            }
            0xea => {
                // A whole ARM64 CONTEXT at sp: x0–x28 from 8, fp, lr, sp, pc after them.
                pairs_only(save_nexts)?;
                let base = ctx.sp()?;
                for r in 0..31u32 {
                    let v = ctx.read(base.wrapping_add(8 + 8 * r as u64))?;
                    ctx.x[r as usize] = Some(v);
                    ctx.restored |= 1 << r;
                }
                ctx.sp = Some(ctx.read(base.wrapping_add(0x100))?);
                ctx.pc = Some(ctx.read(base.wrapping_add(0x108))?);
                pc_from_lr = false;
            }
            0xec => {
                pairs_only(save_nexts)?;
                ctx.pc = Some(ctx.reg(30, "lr")?);
                pc_from_lr = false;
            }
            0xe8 | 0xeb => return Err(Arm64UnwindError::Unsupported(op)),
            OP_PAC => {
                // The return address is signed; the caller strips it with the process's mask.
                pairs_only(save_nexts)?;
            }
            0xf8..=0xfb => {
                pairs_only(save_nexts)?;
                at += 1 + (op & 3) as usize;
            }
            0xfd..=0xff => pairs_only(save_nexts)?,
            _ => return Err(bad()),
        }
    }
    Ok(pc_from_lr)
}

#[cfg(test)]
mod tests;
