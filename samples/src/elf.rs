//! Just enough ELF reading to find a file's GNU build-id and tell a core
//! file from other files.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};

const NT_GNU_BUILD_ID: u32 = 3;
const SHT_NOTE: u32 = 7;
const PT_NOTE: u32 = 4;
const ET_CORE: u16 = 4;

fn u16_at(b: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?))
}

fn is_elf64_le(b: &[u8]) -> bool {
    b.len() >= 64 && &b[..4] == b"\x7fELF" && b[4] == 2 && b[5] == 1
}

/// Whether `path` is an ELF core file (reads only the header).
pub fn is_core_file(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 64];
    let Ok(mut f) = std::fs::File::open(path) else {
        return false;
    };
    if f.read_exact(&mut head).is_err() {
        return false;
    }
    is_elf64_le(&head) && u16_at(&head, 16) == Some(ET_CORE)
}

/// Build-id as lowercase hex, from the file's note sections (or note
/// segments when it has no section headers).
pub fn build_id(path: &Path) -> Result<Option<String>> {
    let b = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    if !is_elf64_le(&b) {
        bail!("{} is not a little-endian ELF64 file", path.display());
    }
    let mut ranges = Vec::new();
    let (shoff, shentsize, shnum) = (u64_at(&b, 0x28), u16_at(&b, 0x3a), u16_at(&b, 0x3c));
    if let (Some(shoff), Some(ent), Some(num)) = (shoff, shentsize, shnum) {
        for i in 0..num as usize {
            let h = shoff as usize + i * ent as usize;
            if u32_at(&b, h + 4) == Some(SHT_NOTE)
                && let (Some(off), Some(size)) = (u64_at(&b, h + 0x18), u64_at(&b, h + 0x20))
            {
                ranges.push((off as usize, size as usize));
            }
        }
    }
    if ranges.is_empty() {
        let (phoff, phentsize, phnum) = (u64_at(&b, 0x20), u16_at(&b, 0x36), u16_at(&b, 0x38));
        if let (Some(phoff), Some(ent), Some(num)) = (phoff, phentsize, phnum) {
            for i in 0..num as usize {
                let h = phoff as usize + i * ent as usize;
                if u32_at(&b, h) == Some(PT_NOTE)
                    && let (Some(off), Some(size)) = (u64_at(&b, h + 8), u64_at(&b, h + 0x20))
                {
                    ranges.push((off as usize, size as usize));
                }
            }
        }
    }
    for (off, size) in ranges {
        let Some(notes) = b.get(off..off.saturating_add(size)) else {
            continue;
        };
        let mut p = 0;
        while p + 12 <= notes.len() {
            let (Some(namesz), Some(descsz), Some(ty)) =
                (u32_at(notes, p), u32_at(notes, p + 4), u32_at(notes, p + 8))
            else {
                break;
            };
            let name_at = p + 12;
            let desc_at = name_at + (namesz as usize).next_multiple_of(4);
            let end = desc_at + (descsz as usize).next_multiple_of(4);
            if ty == NT_GNU_BUILD_ID
                && notes.get(name_at..name_at + namesz as usize) == Some(b"GNU\0")
                && let Some(desc) = notes.get(desc_at..desc_at + descsz as usize)
            {
                return Ok(Some(desc.iter().map(|x| format!("{x:02x}")).collect()));
            }
            p = end;
        }
    }
    Ok(None)
}

/// `<root>/.build-id/xx/rest.debug` for a build-id.
pub fn build_id_path(root: &Path, id: &str) -> PathBuf {
    root.join(".build-id")
        .join(&id[..2])
        .join(format!("{}.debug", &id[2..]))
}
