//! The dynamic linker's list of loaded objects, for cores without NT_FILE: the executable's
//! PT_DYNAMIC (found through AT_PHDR) holds DT_DEBUG → `struct r_debug` → `r_map`, a list of
//! `struct link_map { l_addr, l_name, l_ld, l_next, l_prev }`.

use crate::core::{auxv, Core};
use crate::diagnostics::Diagnostic;

const PT_PHDR: u32 = 6;
const PT_DYNAMIC: u32 = 2;
const DT_NULL: u64 = 0;
const DT_DEBUG: u64 = 21;
const AT_EXECFN: u64 = 31;
/// More objects than any real process loads; a longer list is a corrupt or cyclic one.
const MAX_OBJECTS: usize = 4096;
const MAX_DYNAMIC: usize = 512;

fn read_u64(core: &Core, addr: u64) -> Option<u64> {
    let b = core.bytes_at(addr, 8).ok()?;
    Some(u64::from_le_bytes(b.try_into().ok()?))
}

fn read_string(core: &Core, addr: u64) -> Option<String> {
    let b = core.bytes_at(addr, 4096).ok()?;
    let end = b.iter().position(|&c| c == 0)?;
    Some(String::from_utf8_lossy(&b[..end]).into_owned())
}

/// One object the linker reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Object {
    /// The path the linker used; empty for the executable when AT_EXECFN gives none.
    pub(crate) path: String,
    /// Where its ELF header is (`l_addr` for a shared object, whose link base is 0).
    pub(crate) header_addr: u64,
    /// `l_ld`, its dynamic section: inside the object whatever else is missing.
    pub(crate) dynamic: Option<u64>,
}

/// The program's name from the auxiliary vector (AT_EXECFN), when the dump holds a non-empty one.
pub(crate) fn execfn(core: &Core) -> Option<String> {
    core.auxv.get(AT_EXECFN).and_then(|a| read_string(core, a)).filter(|s| !s.is_empty())
}

/// The objects the linker reports. The executable comes first, named by AT_EXECFN (or not named).
pub(crate) fn walk(core: &Core, diagnostics: &mut Vec<Diagnostic>) -> Vec<Object> {
    let mut out = Vec::new();
    let (Some(phdr), Some(phnum)) = (core.auxv.get(auxv::AT_PHDR), core.auxv.get(auxv::AT_PHNUM)) else {
        diagnostics.push(Diagnostic::warning("modules", "no AT_PHDR in the auxiliary vector: modules cannot be listed"));
        return out;
    };
    let mut bias = None;
    let mut dynamic = None;
    for i in 0..phnum.min(256) {
        // Pointers come from the dump: every address is computed with checked arithmetic.
        let Some(at) = phdr.checked_add(i * 56) else { break };
        let kind = read_u64(core, at).map(|v| v as u32);
        let vaddr = at.checked_add(16).and_then(|a| read_u64(core, a));
        match (kind, vaddr) {
            (Some(PT_PHDR), Some(v)) => bias = Some(phdr.wrapping_sub(v)),
            (Some(PT_DYNAMIC), Some(v)) => dynamic = Some(v),
            _ => {}
        }
    }
    let bias = bias.unwrap_or(0);
    // The executable's header is at the start of its first page.
    out.push(Object { path: execfn(core).unwrap_or_default(), header_addr: phdr & !0xfff, dynamic: None });
    let Some(dynamic) = dynamic.map(|d| bias.wrapping_add(d)) else {
        diagnostics.push(Diagnostic::info("modules", "the executable has no PT_DYNAMIC: statically linked"));
        return out;
    };
    let r_debug = (0..MAX_DYNAMIC as u64)
        .map_while(|i| {
            let at = dynamic.checked_add(i * 16)?;
            Some((read_u64(core, at)?, read_u64(core, at.checked_add(8)?)?))
        })
        .take_while(|&(tag, _)| tag != DT_NULL)
        .find(|&(tag, _)| tag == DT_DEBUG)
        .map(|(_, v)| v);
    let Some(mut lm) = r_debug.filter(|&a| a != 0).and_then(|a| read_u64(core, a.checked_add(8)?)) else {
        diagnostics.push(Diagnostic::warning("modules", "DT_DEBUG/r_debug not readable in the dump: only the executable is known").at_address(dynamic));
        return out;
    };
    let mut seen = std::collections::HashSet::new();
    while lm != 0 {
        // Bounds the entries visited, named or not (`seen` and the time spent with them).
        if seen.len() >= MAX_OBJECTS {
            diagnostics.push(
                Diagnostic::warning("modules", format!("link_map list is longer than {MAX_OBJECTS} objects; walk stopped")).at_address(lm),
            );
            break;
        }
        if !seen.insert(lm) {
            diagnostics.push(Diagnostic::warning("modules", "link_map list loops back on itself; walk stopped").at_address(lm));
            break;
        }
        let field = |offset: u64| lm.checked_add(offset).and_then(|a| read_u64(core, a));
        let (Some(l_addr), Some(l_name), Some(l_next), l_ld) = (read_u64(core, lm), field(8), field(24), field(16)) else {
            diagnostics.push(Diagnostic::warning("modules", "link_map entry not readable; walk stopped").at_address(lm));
            break;
        };
        let name = read_string(core, l_name).unwrap_or_default();
        // The first entry (empty name) is the executable, already listed; skip the vDSO too.
        if !name.is_empty() && !name.starts_with("linux-vdso") {
            out.push(Object { path: name, header_addr: l_addr, dynamic: l_ld });
        }
        lm = l_next;
    }
    out
}
