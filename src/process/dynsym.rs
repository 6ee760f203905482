//! An ELF file's exported symbols (`.dynsym`/`.dynstr`): where a symbol a library exports is
//! (glibc's `__abort_msg`, the .NET runtime's contract descriptor).

use crate::bytes::{u16_at, u32_at, u64_at};
use crate::process::ElfFile;

const SHT_DYNSYM: u32 = 11;
const SYM_SIZE: usize = 24;
const SHN_UNDEF: u16 = 0;

/// An exported symbol's link-time value and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DynSymbol {
    pub(crate) value: u64,
    pub(crate) size: u64,
}


/// The defined `.dynsym` symbol called `name` (version suffixes live in `.gnu.version`, not in the
/// name, so `DotNetRuntimeContractDescriptor@@V1.0` is found as `DotNetRuntimeContractDescriptor`).
pub(crate) fn dynamic_symbol(file: &ElfFile, name: &str) -> Option<DynSymbol> {
    let (index, symtab) = file.sections.iter().enumerate().find(|(_, s)| s.kind == SHT_DYNSYM)?;
    let syms = file.section_data(index)?;
    let strtab = file.section_data(symtab.link as usize)?;
    syms.chunks_exact(SYM_SIZE).skip(1).find_map(|s| {
        let name_off = u32_at(s, 0)? as usize;
        let shndx = u16_at(s, 6)?;
        if shndx == SHN_UNDEF {
            return None;
        }
        let rest = strtab.get(name_off..)?;
        let end = rest.iter().position(|&b| b == 0)?;
        (&rest[..end] == name.as_bytes()).then(|| DynSymbol { value: u64_at(s, 8).unwrap_or(0), size: u64_at(s, 16).unwrap_or(0) })
    })
}

/// The link-time value of the defined dynamic symbol with index `i`.
pub(crate) fn symbol_value(file: &ElfFile, i: u32) -> Option<u64> {
    let (index, _) = file.sections.iter().enumerate().find(|(_, s)| s.kind == SHT_DYNSYM)?;
    let syms = file.section_data(index)?;
    let s = syms.get(i as usize * SYM_SIZE..(i as usize + 1) * SYM_SIZE)?;
    (u16_at(s, 6)? != SHN_UNDEF).then(|| u64_at(s, 8)).flatten()
}
