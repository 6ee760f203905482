//! The two things the reader needs from `libcoreclr.so` on disk: where an exported symbol is
//! (`.dynsym`/`.dynstr`: `process::dynsym`, which native readings share), and what a pointer
//! slot in `.data` holds after the dynamic linker's relocations (`.rela.dyn`, `.relr.dyn`), for
//! when the dump did not save that page.

use crate::bytes::{u16_at, u64_at};
pub(crate) use crate::process::dynsym::dynamic_symbol;
use crate::process::dynsym::symbol_value;
use crate::process::ElfFile;

const SHT_RELA: u32 = 4;
const SHT_RELR: u32 = 19;
const RELA_SIZE: usize = 24;
const R_X86_64_64: u32 = 1;
const R_X86_64_RELATIVE: u32 = 8;
// The catalogue also reads linux-arm64 runtime files.
const EM_AARCH64: u16 = 183;
const R_AARCH64_ABS64: u32 = 257;
const R_AARCH64_RELATIVE: u32 = 1027;

/// What the dynamic linker stores in one 8-byte slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// A link-time address: the runtime value is it plus the module's bias.
    Relative(u64),
    /// Not relocated: the file's bytes are the runtime value.
    Plain(u64),
}

/// Reads the 8-byte slot at link-time address `vaddr` as it is after relocation. `None` when the
/// slot is outside the file's loaded data or relocated against a symbol this file does not
/// define (its value is then unknowable from the file).
pub(crate) fn relocated_slot(file: &ElfFile, vaddr: u64) -> Option<Slot> {
    for (i, s) in file.sections.iter().enumerate() {
        if s.kind == SHT_RELA && s.entsize as usize == RELA_SIZE {
            let data = file.section_data(i)?;
            for r in data.chunks_exact(RELA_SIZE) {
                if u64_at(r, 0)? != vaddr {
                    continue;
                }
                let info = u64_at(r, 8)?;
                let addend = u64_at(r, 16)?;
                let aarch64 = u16_at(file.bytes(), 18) == Some(EM_AARCH64);
                let (relative, absolute) = if aarch64 { (R_AARCH64_RELATIVE, R_AARCH64_ABS64) } else { (R_X86_64_RELATIVE, R_X86_64_64) };
                let kind = (info & 0xffff_ffff) as u32;
                return if kind == relative {
                    Some(Slot::Relative(addend))
                } else if kind == absolute {
                    symbol_value(file, (info >> 32) as u32).map(|v| Slot::Relative(v.wrapping_add(addend)))
                } else {
                    None
                };
            }
        }
        if s.kind == SHT_RELR {
            let data = file.section_data(i)?;
            if relr_covers(data, vaddr) {
                // RELR slots hold their link-time value in the file.
                return file_u64(file, vaddr).map(Slot::Relative);
            }
        }
    }
    file_u64(file, vaddr).map(Slot::Plain)
}

/// Whether a packed-relative (RELR) table relocates `vaddr`.
fn relr_covers(data: &[u8], vaddr: u64) -> bool {
    let mut base = 0u64;
    for w in data.chunks_exact(8) {
        let Some(entry) = u64_at(w, 0) else { return false };
        if entry & 1 == 0 {
            if entry == vaddr {
                return true;
            }
            base = entry.wrapping_add(8);
        } else {
            let mut bits = entry >> 1;
            let mut at = base;
            while bits != 0 {
                if bits & 1 != 0 && at == vaddr {
                    return true;
                }
                bits >>= 1;
                at = at.wrapping_add(8);
            }
            base = base.wrapping_add(63 * 8);
        }
    }
    false
}

/// The file's 8 bytes at link-time address `vaddr` (zero in `.bss`-like tails: NOBITS bytes are
/// zero at load).
pub(crate) fn file_u64(file: &ElfFile, vaddr: u64) -> Option<u64> {
    let b = file_bytes(file, vaddr, 8)?;
    u64_at(&b, 0)
}

/// `len` bytes of the file's image at link-time address `vaddr`, as loaded before relocation
/// (zero past a segment's file bytes, inside its memory size).
pub(crate) fn file_bytes(file: &ElfFile, vaddr: u64, len: usize) -> Option<Vec<u8>> {
    use goblin::elf::program_header::PT_LOAD;
    let p = file.program_headers.iter().filter(|p| p.p_type == PT_LOAD).find(|p| vaddr >= p.p_vaddr && vaddr - p.p_vaddr < p.p_memsz)?;
    let delta = vaddr - p.p_vaddr;
    if delta.checked_add(len as u64)? > p.p_memsz {
        return None;
    }
    let mut out = vec![0u8; len];
    if delta < p.p_filesz {
        let n = (p.p_filesz - delta).min(len as u64);
        let bytes = file.bytes_at_offset(p.p_offset + delta, n)?;
        out[..bytes.len()].copy_from_slice(bytes);
    }
    Some(out)
}

/// The `@(#)Version X @Commit: Y` string compiled into the runtime. It is a writable `char[]`
/// (`sccsid`), so `.data` is searched first: a whole-file search reads all of a 7 MB
/// `libcoreclr.so` into the page tables to find a string near its end. Other files (a
/// single-file host, a build laid out otherwise) are searched whole.
pub(crate) fn sccs_version(file: &ElfFile) -> Option<(String, Option<String>)> {
    file.section(".data").and_then(parse_sccs_version).or_else(|| parse_sccs_version(file.bytes()))
}

fn parse_sccs_version(bytes: &[u8]) -> Option<(String, Option<String>)> {
    let at = memchr::memmem::find(bytes, b"@(#)Version ")?;
    let rest = bytes.get(at + 12..)?;
    let end = rest.iter().take(256).position(|&b| b == 0)?;
    let text = std::str::from_utf8(&rest[..end]).ok()?;
    let mut parts = text.splitn(2, " @Commit: ");
    let version = parts.next()?.trim().to_string();
    let commit = parts.next().map(|c| c.trim().to_string());
    Some((version, commit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sccs_version_strings() {
        assert_eq!(
            parse_sccs_version(b"\0junk@(#)Version 10.0.1226.42308 @Commit: 0c0fe8ba\0more"),
            Some(("10.0.1226.42308".into(), Some("0c0fe8ba".into())))
        );
        assert_eq!(parse_sccs_version(b"@(#)Version 9.0.23\0"), Some(("9.0.23".into(), None)));
        // Cut before its terminator, or not there at all: nothing, never a slice past the end.
        assert_eq!(parse_sccs_version(b"xx@(#)Version 10.0.1"), None);
        assert_eq!(parse_sccs_version(b"@(#)Version "), None);
        assert_eq!(parse_sccs_version(b""), None);
    }

    #[test]
    fn relr_bitmaps() {
        // An address entry (relocates 0x1000; the bitmap that follows starts at 0x1008), then a
        // bitmap with bits 0 and 2 set: 0x1008 and 0x1018.
        let mut t = Vec::new();
        t.extend_from_slice(&0x1000u64.to_le_bytes());
        t.extend_from_slice(&((0b101u64 << 1) | 1).to_le_bytes());
        assert!(relr_covers(&t, 0x1000));
        assert!(relr_covers(&t, 0x1008));
        assert!(!relr_covers(&t, 0x1010));
        assert!(relr_covers(&t, 0x1018));
        assert!(!relr_covers(&t, 0x2000));
    }
}
