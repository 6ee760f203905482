//! DWARF call frame information of one module: `.eh_frame` (through `.eh_frame_hdr`'s binary
//! search table when present, else an index built once) and `.debug_frame` from the module or
//! its debug file. Without the module's file, `.eh_frame_hdr` and `.eh_frame` are read from dump
//! memory when the dump holds them (createdump saves libcoreclr's: a .NET dump unwinds through
//! the runtime's native frames with no file at hand), found through the image's
//! `PT_GNU_EH_FRAME` program header in memory. Rules found for an address are cached, so walking many similar stacks parses
//! each FDE once.

use super::regs::FrameRegs;
use crate::arch::{aarch64, Arch};
use crate::core::Core;
use crate::process::{ElfFile, Memory, Module};
use gimli::{
    BaseAddresses, CfaRule, DebugFrame, EhFrame, EndianSlice, LittleEndian, ParsedEhFrameHdr, Register, RegisterRule, UnwindContext,
    UnwindExpression, UnwindSection, Vendor,
};
use rustc_hash::FxHashMap;
use std::sync::{Arc, RwLock};

type R<'p> = EndianSlice<'p, LittleEndian>;

/// Bounds a DWARF expression from a hostile file.
const MAX_EXPRESSION_STEPS: u32 = 1000;
/// Rules cached per module at most; past this, lookups are simply not cached.
const MAX_CACHED_RULES: usize = 1 << 16;
const PT_GNU_EH_FRAME: u32 = 0x6474_e550;
/// Program headers read from memory at most.
const MAX_PHDRS: usize = 256;
/// `.eh_frame` bytes taken from dump memory at most (libcoreclr's is under 1 MiB).
const MAX_EH_FRAME_IN_MEMORY: usize = 64 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    EhFrame,
    DebugFrame,
}

/// The unwind rule for one address, reduced to the registers knot tracks.
/// Rules kept per row: as many as the architecture that tracks the most registers has.
const RULE_SLOTS: usize = aarch64::dwarf::TRACKED;

#[derive(Debug, Clone)]
pub(crate) struct Rule {
    arch: Arch,
    cfa: CfaRule<usize>,
    regs: [Option<RegisterRule<usize>>; RULE_SLOTS],
    ra_register: u16,
    /// The FDE's CIE has the `S` augmentation: this is a signal trampoline.
    pub(crate) signal_frame: bool,
    source: Source,
}

impl Rule {
    /// The CFA is the stack pointer plus a constant: applying the rule needs no guessed register.
    pub(crate) fn cfa_from_sp(&self) -> bool {
        matches!(self.cfa, CfaRule::RegisterAndOffset { register, .. } if register.0 == self.arch.sp_reg())
    }
}

/// The caller's registers, recovered by a [`Rule`].
pub(crate) struct Recovered {
    pub(crate) regs: FrameRegs,
    pub(crate) cfa: u64,
    /// The rule marks the return address undefined: there is no caller.
    pub(crate) outermost: bool,
}

#[derive(Debug)]
pub(crate) enum ApplyError {
    Unreadable(u64),
    /// A register the rule needs is not known in this frame.
    MissingRegister,
    BadExpression,
}

struct Table<'p, S> {
    section: S,
    bases: BaseAddresses,
    /// (start, end, FDE offset), sorted: used when there is no `.eh_frame_hdr` table.
    index: Vec<(u64, u64, usize)>,
    hdr: Option<ParsedEhFrameHdr<R<'p>>>,
}

pub(crate) struct ModuleCfi<'p> {
    arch: Arch,
    eh: Option<Table<'p, EhFrame<R<'p>>>>,
    debug: Option<Table<'p, DebugFrame<R<'p>>>>,
    cache: RwLock<FxHashMap<u64, Option<Arc<Rule>>>>,
}

fn section_addr<'f>(file: &'f ElfFile, name: &str) -> Option<(u64, &'f [u8])> {
    let (i, s) = file.section_by_name(name)?;
    Some((s.addr, file.section_data(i)?))
}

fn build_index<'p, S: UnwindSection<R<'p>>>(section: &S, bases: &BaseAddresses) -> Vec<(u64, u64, usize)> {
    let mut index = Vec::new();
    let mut entries = section.entries(bases);
    // A malformed entry ends the index: everything before it is still usable.
    while let Ok(Some(entry)) = entries.next() {
        if let gimli::CieOrFde::Fde(partial) = entry
            && let Ok(fde) = partial.parse(S::cie_from_offset)
                && fde.len() > 0 {
                    index.push((fde.initial_address(), fde.initial_address().saturating_add(fde.len()), fde.offset()));
                }
    }
    index.sort_unstable();
    index
}

/// `.eh_frame` through `.eh_frame_hdr`, both from dump memory (link-time addresses, as for a
/// file). `None` unless the dump holds the image's ELF and program headers and the whole
/// `.eh_frame_hdr`; `.eh_frame` is what follows its start in the dump's contiguous bytes.
fn eh_frame_in_memory<'p>(module: &Module, core: &'p Core) -> Option<Table<'p, EhFrame<R<'p>>>> {
    let ehdr = core.bytes_at(module.start, 64).ok().filter(|b| b.len() == 64 && b.starts_with(b"\x7fELF"))?;
    let phoff = u64::from_le_bytes(ehdr[32..40].try_into().ok()?);
    let phnum = (u16::from_le_bytes(ehdr[56..58].try_into().ok()?) as usize).min(MAX_PHDRS);
    let phdrs = core.bytes_at(module.start.checked_add(phoff)?, phnum * 56).ok().filter(|b| b.len() == phnum * 56)?;
    let (hdr_addr, hdr_len) = phdrs.chunks_exact(56).find_map(|p| {
        let u64_at = |o: usize| p.get(o..o + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
        (u32::from_le_bytes(p[..4].try_into().ok()?) == PT_GNU_EH_FRAME).then(|| Some((u64_at(16)?, u64_at(40)?))).flatten()
    })?;
    let hdr_len = usize::try_from(hdr_len).ok().filter(|&n| (4..=MAX_EH_FRAME_IN_MEMORY).contains(&n))?;
    let hdr_data = core.bytes_at(module.bias.wrapping_add(hdr_addr), hdr_len).ok().filter(|b| b.len() == hdr_len)?;
    let bases = BaseAddresses::default().set_eh_frame_hdr(hdr_addr);
    let hdr = gimli::EhFrameHdr::new(hdr_data, LittleEndian).parse(&bases, 8).ok()?;
    let gimli::Pointer::Direct(eh_addr) = hdr.eh_frame_ptr() else { return None };
    let eh_data = core.bytes_at(module.bias.wrapping_add(eh_addr), MAX_EH_FRAME_IN_MEMORY).ok().filter(|b| !b.is_empty())?;
    let bases = bases.set_eh_frame(eh_addr);
    let mut section = EhFrame::new(eh_data, LittleEndian);
    section.set_vendor(vendor(core.arch));
    let hdr = Some(hdr).filter(|h| h.table().is_some());
    let index = if hdr.is_none() { build_index(&section, &bases) } else { Vec::new() };
    Some(Table { section, bases, index, hdr })
}

impl<'p> ModuleCfi<'p> {
    /// Loads the unwind sections of `module` (from dump memory when its file is not at hand);
    /// `None` when it has none.
    pub(crate) fn load(module: &'p Module, core: &'p Core) -> Option<ModuleCfi<'p>> {
        let from_memory = || if module.image().is_none() { eh_frame_in_memory(module, core) } else { None };
        let eh = module.image().and_then(|file| {
            let (eh_addr, eh_data) = section_addr(file, ".eh_frame")?;
            let mut bases = BaseAddresses::default().set_eh_frame(eh_addr);
            if let Some((text, _)) = section_addr(file, ".text") {
                bases = bases.set_text(text);
            }
            if let Some((got, _)) = section_addr(file, ".got") {
                bases = bases.set_got(got);
            }
            let mut section = EhFrame::new(eh_data, LittleEndian);
            section.set_vendor(vendor(core.arch));
            let hdr = section_addr(file, ".eh_frame_hdr").and_then(|(hdr_addr, hdr_data)| {
                let bases = bases.clone().set_eh_frame_hdr(hdr_addr);
                gimli::EhFrameHdr::new(hdr_data, LittleEndian).parse(&bases, 8).ok().filter(|h| h.table().is_some())
            });
            if let Some((hdr_addr, _)) = section_addr(file, ".eh_frame_hdr") {
                bases = bases.set_eh_frame_hdr(hdr_addr);
            }
            let index = if hdr.is_none() { build_index(&section, &bases) } else { Vec::new() };
            Some(Table { section, bases, index, hdr })
        }).or_else(from_memory);
        let debug = module.symbol_files().find_map(|file| {
            let data = file.section(".debug_frame")?;
            let mut section = DebugFrame::new(data, LittleEndian);
            section.set_address_size(8);
            section.set_vendor(vendor(core.arch));
            let bases = BaseAddresses::default();
            let index = build_index(&section, &bases);
            (!index.is_empty()).then_some(Table { section, bases, index, hdr: None })
        });
        if eh.is_none() && debug.is_none() {
            return None;
        }
        Some(ModuleCfi { arch: core.arch, eh, debug, cache: RwLock::new(FxHashMap::default()) })
    }

    /// The rule for link-time address `addr`, from `.eh_frame` first, then `.debug_frame`.
    pub(crate) fn rule(&self, addr: u64, ctx: &mut UnwindContext<usize>) -> Option<Arc<Rule>> {
        if let Ok(cache) = self.cache.read()
            && let Some(hit) = cache.get(&addr) {
                return hit.clone();
            }
        let found = self.find(addr, ctx).map(Arc::new);
        if let Ok(mut cache) = self.cache.write()
            && cache.len() < MAX_CACHED_RULES {
                cache.insert(addr, found.clone());
            }
        found
    }

    fn find(&self, addr: u64, ctx: &mut UnwindContext<usize>) -> Option<Rule> {
        if let Some(t) = &self.eh {
            let fde = match &t.hdr {
                Some(hdr) => hdr.table().and_then(|tab| tab.fde_for_address(&t.section, &t.bases, addr, EhFrame::cie_from_offset).ok()),
                None => fde_from_index(t, addr),
            };
            if let Some(rule) = fde.and_then(|fde| rule_from_fde(self.arch, &t.section, &t.bases, &fde, ctx, addr, Source::EhFrame)) {
                return Some(rule);
            }
        }
        let t = self.debug.as_ref()?;
        let fde = fde_from_index(t, addr)?;
        rule_from_fde(self.arch, &t.section, &t.bases, &fde, ctx, addr, Source::DebugFrame)
    }

    fn expression(&self, e: UnwindExpression<usize>, source: Source) -> Option<gimli::Expression<R<'p>>> {
        match source {
            Source::EhFrame => e.get(&self.eh.as_ref()?.section).ok(),
            Source::DebugFrame => e.get(&self.debug.as_ref()?.section).ok(),
        }
    }

    /// Recovers the caller's registers from `regs` with `rule`.
    pub(crate) fn apply(&self, rule: &Rule, regs: &FrameRegs, memory: &dyn Memory) -> Result<Recovered, ApplyError> {
        let cfa = match &rule.cfa {
            CfaRule::RegisterAndOffset { register, offset } => {
                let base = regs.get(register.0).ok_or(ApplyError::MissingRegister)?;
                base.wrapping_add(*offset as u64)
            }
            CfaRule::Expression(e) => self.evaluate(*e, rule.source, regs, memory, None)?,
        };
        let read = |addr: u64| memory.read_u64(addr).map_err(|e| ApplyError::Unreadable(e.address()));
        let arch = rule.arch;
        let (pc, sp) = (arch.pc_reg(), arch.sp_reg());
        let mut out = FrameRegs::new(arch);
        let mut outermost = false;
        for reg in 0..arch.tracked() as u16 {
            let column = if reg == pc { rule.ra_register } else { reg };
            let rule_for = if (column as usize) < arch.tracked() { rule.regs[column as usize].clone() } else { None };
            let value = match rule_for {
                None if reg == sp => Some(cfa),
                None if arch.is_callee_saved(reg) => regs.get(reg),
                // aarch64: a return address column no row mentions is still in the link register
                // (a leaf, or before the prologue saves it); the outermost frame says undefined.
                None if reg == pc && arch == Arch::Aarch64 => regs.get(column),
                None if reg == pc => {
                    outermost = true;
                    None
                }
                None | Some(RegisterRule::Undefined) | Some(RegisterRule::Architectural) => {
                    if reg == pc {
                        outermost = true;
                    }
                    None
                }
                Some(RegisterRule::SameValue) => regs.get(if arch == Arch::Aarch64 { column } else { reg }),
                Some(RegisterRule::Offset(n)) => Some(read(cfa.wrapping_add(n as u64))?),
                Some(RegisterRule::ValOffset(n)) => Some(cfa.wrapping_add(n as u64)),
                Some(RegisterRule::Register(r)) => regs.get(r.0),
                Some(RegisterRule::Expression(e)) => Some(read(self.evaluate(e, rule.source, regs, memory, Some(cfa))?)?),
                Some(RegisterRule::ValExpression(e)) => Some(self.evaluate(e, rule.source, regs, memory, Some(cfa))?),
                Some(RegisterRule::Constant(c)) => Some(c),
            };
            if let Some(v) = value {
                out.set(reg, v);
            }
        }
        if rule.regs[sp as usize].is_none() {
            out.set(sp, cfa);
        }
        Ok(Recovered { regs: out, cfa, outermost })
    }

    fn evaluate(
        &self,
        e: UnwindExpression<usize>,
        source: Source,
        regs: &FrameRegs,
        memory: &dyn Memory,
        cfa: Option<u64>,
    ) -> Result<u64, ApplyError> {
        use gimli::{EvaluationResult, Location, Value};
        let expr = self.expression(e, source).ok_or(ApplyError::BadExpression)?;
        let encoding = gimli::Encoding { address_size: 8, format: gimli::Format::Dwarf32, version: 4 };
        let mut eval = expr.evaluation(encoding);
        eval.set_max_iterations(MAX_EXPRESSION_STEPS);
        if let Some(cfa) = cfa {
            eval.set_initial_value(cfa);
        }
        let mut state = eval.evaluate().map_err(|_| ApplyError::BadExpression)?;
        loop {
            state = match state {
                EvaluationResult::Complete => break,
                EvaluationResult::RequiresMemory { address, size, .. } => {
                    let mut buf = [0u8; 8];
                    let n = (size as usize).min(8);
                    memory.read(address, &mut buf[..n]).map_err(|e| ApplyError::Unreadable(e.address()))?;
                    eval.resume_with_memory(Value::Generic(u64::from_le_bytes(buf))).map_err(|_| ApplyError::BadExpression)?
                }
                EvaluationResult::RequiresRegister { register, .. } => {
                    let v = regs.get(register.0).ok_or(ApplyError::MissingRegister)?;
                    eval.resume_with_register(Value::Generic(v)).map_err(|_| ApplyError::BadExpression)?
                }
                _ => return Err(ApplyError::BadExpression),
            };
        }
        match eval.as_result().first().map(|p| &p.location) {
            Some(Location::Address { address }) => Ok(*address),
            Some(Location::Value { value }) => value.to_u64(!0).map_err(|_| ApplyError::BadExpression),
            _ => Err(ApplyError::BadExpression),
        }
    }
}

fn fde_from_index<'p, S: UnwindSection<R<'p>>>(t: &Table<'p, S>, addr: u64) -> Option<gimli::FrameDescriptionEntry<R<'p>>> {
    let i = t.index.partition_point(|&(start, _, _)| start <= addr).checked_sub(1)?;
    let (_, end, offset) = t.index[i];
    if addr >= end {
        return None;
    }
    let partial = t.section.partial_fde_from_offset(&t.bases, S::Offset::from(offset)).ok()?;
    partial.parse(S::cie_from_offset).ok()
}

/// gimli reads `DW_CFA_AARCH64_negate_ra_state` (whose opcode is SPARC's `DW_CFA_GNU_window_save`)
/// only when told the section is aarch64's.
fn vendor(arch: Arch) -> Vendor {
    match arch {
        Arch::X86_64 => Vendor::Default,
        Arch::Aarch64 => Vendor::AArch64,
    }
}

fn rule_from_fde<'p, S: UnwindSection<R<'p>>>(
    arch: Arch,
    section: &S,
    bases: &BaseAddresses,
    fde: &gimli::FrameDescriptionEntry<R<'p>>,
    ctx: &mut UnwindContext<usize>,
    addr: u64,
    source: Source,
) -> Option<Rule> {
    let row = fde.unwind_info_for_address(section, bases, ctx, addr).ok()?;
    let mut regs: [Option<RegisterRule<usize>>; RULE_SLOTS] = std::array::from_fn(|_| None);
    for (reg, slot) in regs.iter_mut().enumerate().take(arch.tracked()) {
        *slot = row.register(Register(reg as u16));
    }
    Some(Rule {
        arch,
        cfa: row.cfa().clone(),
        regs,
        ra_register: fde.cie().return_address_register().0,
        signal_frame: fde.cie().is_signal_trampoline(),
        source,
    })
}
