//! Recognising return addresses without unwind information: a value is a plausible return
//! address when it points into executable memory right after a call instruction.

use crate::arch::Arch;
use crate::process::Memory;

/// Whether the instruction before `addr` is a call of `arch`'s.
pub(crate) fn follows_call(arch: Arch, memory: &dyn Memory, addr: u64) -> bool {
    match arch {
        Arch::X86_64 => follows_x86_64_call(memory, addr),
        Arch::Aarch64 => follows_aarch64_call(memory, addr),
    }
}

/// Whether the word before `addr` is an aarch64 call: `bl imm26`, `blr Xn`, or one of the
/// pointer-authenticating `blraa`/`blrab`/`blraaz`/`blrabz`.
fn follows_aarch64_call(memory: &dyn Memory, addr: u64) -> bool {
    let mut b = [0u8; 4];
    let Some(at) = addr.checked_sub(4) else { return false };
    if !addr.is_multiple_of(4) || memory.read(at, &mut b).is_err() {
        return false;
    }
    let insn = u32::from_le_bytes(b);
    insn & 0xfc00_0000 == 0x9400_0000 // BL
        || insn & 0xffff_fc1f == 0xd63f_0000 // BLR
        || insn & 0xfeff_f800 == 0xd63f_0800 // BLRAA, BLRAB, BLRAAZ, BLRABZ
}

/// Whether the bytes before `addr` end with an x86_64 call: `e8 rel32`, or `ff /2` (indirect
/// call) in any of its ModRM/SIB/displacement lengths, with an optional REX prefix.
fn follows_x86_64_call(memory: &dyn Memory, addr: u64) -> bool {
    let mut buf = [0u8; 8];
    let Some(start) = addr.checked_sub(8) else { return false };
    if memory.read(start, &mut buf).is_err() {
        return false;
    }
    // e8 xx xx xx xx
    if buf[3] == 0xe8 {
        return true;
    }
    // ff with ModRM reg field 2, ending exactly at addr: lengths 2 (register), 3 (disp8 or SIB),
    // 4 (SIB+disp8), 6 (disp32 or rip-relative), 7 (SIB+disp32).
    for len in [2usize, 3, 4, 6, 7] {
        let at = 8 - len;
        if buf[at] == 0xff {
            let modrm = buf[at + 1];
            if (modrm >> 3) & 7 == 2 && modrm_length(modrm, buf.get(at + 2).copied()) == Some(len) {
                return true;
            }
        }
    }
    false
}

/// Total length of `ff /2` with this ModRM (and SIB byte, when present).
fn modrm_length(modrm: u8, sib: Option<u8>) -> Option<usize> {
    let md = modrm >> 6;
    let rm = modrm & 7;
    let has_sib = md != 3 && rm == 4;
    let disp = match md {
        0 if rm == 5 => 4,
        0 if has_sib && sib.map(|s| s & 7) == Some(5) => 4,
        0 => 0,
        1 => 1,
        2 => 4,
        _ => 0,
    };
    Some(2 + usize::from(has_sib) + disp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::RangeMemory;

    fn code(bytes: &[u8]) -> (RangeMemory, u64) {
        let mut m = RangeMemory::new();
        let mut v = vec![0x90u8; 16];
        v.extend_from_slice(bytes);
        let end = 0x1000 + v.len() as u64;
        m.add(0x1000, v);
        (m, end)
    }

    #[test]
    fn recognises_direct_and_indirect_calls() {
        assert!(follows_x86_64_call(&code(&[0xe8, 1, 2, 3, 4]).0, code(&[0xe8, 1, 2, 3, 4]).1));
        let (m, a) = code(&[0xff, 0xd0]); // call *%rax
        assert!(follows_x86_64_call(&m, a));
        let (m, a) = code(&[0x41, 0xff, 0xd4]); // call *%r12
        assert!(follows_x86_64_call(&m, a));
        let (m, a) = code(&[0xff, 0x15, 1, 2, 3, 4]); // call *disp32(%rip)
        assert!(follows_x86_64_call(&m, a));
        let (m, a) = code(&[0xff, 0x50, 0x10]); // call *0x10(%rax)
        assert!(follows_x86_64_call(&m, a));
    }

    #[test]
    fn rejects_non_calls() {
        let (m, a) = code(&[0x48, 0x89, 0xc7]); // mov %rax,%rdi
        assert!(!follows_x86_64_call(&m, a));
        let (m, a) = code(&[0xff, 0xe0]); // jmp *%rax (reg field 4)
        assert!(!follows_x86_64_call(&m, a));
        assert!(!follows_x86_64_call(&m, 0x3));
    }
}
