//! Where a CoreCLR build keeps `gc_heap::heap_hard_limit`, found in its x86-64 code rather than
//! by value on a dump: the GC computes the container default (no `GCHeapHardLimit` set, a cgroup
//! memory limit) as `max(20 MiB, physical memory × 75 %)` and stores it into that variable —
//! `mov $0x1400000, %r32; cmov… %r64, %r64; mov %r64, heap_hard_limit(%rip)`. The 20 MiB floor
//! is found nowhere else in that shape. The GC is compiled twice into the runtime (workstation
//! `WKS::` and server `SVR::`), so a build has two such stores; which one a process used is
//! told by the dump (`gc::state`: the one beside the GC's other statics).
//!
//! Checked: on 10.0.12 the workstation store is the variable found by value on three dumps
//! (gc_oom, heap_population, monitor_abba), and every x86-64 `libcoreclr.so` and
//! `singlefilehost` of 9.0.18–9.0.23 and 10.0.11–10.0.15 has exactly two.
//!
//! aarch64 builds compute the same and store it as `mov wA, #0x1400000; …; csel xD, …, xA, hi;
//! adrp xB, page; str xD, [xB, #off]` ([`heap_hard_limit_rvas_aarch64`]): every linux-arm64
//! `libcoreclr.so` and `singlefilehost` of 9.0.23, 10.0.12 and 10.0.15 has exactly two, and in
//! each the same function loads the stored variable back (`ldr x, [page, #off]`) on its other
//! path. No arm64 dump was read to confirm the variable by value.

use crate::process::ElfFile;
use yaxpeax_arch::LengthedInstruction;
use yaxpeax_x86::long_mode::{InstDecoder, Instruction, Opcode, Operand, RegSpec};

/// `20 * 1024 * 1024`: the container default's floor.
const FLOOR: u32 = 20 << 20;
/// Stores kept at most (a build has two; more means the shape is not the one above).
const MAX_STORES: usize = 8;
const PF_X: u32 = 1;

/// The link-time addresses the container-default computation stores into, sorted (empty when
/// the code has no such store, or more than [`MAX_STORES`]).
pub(crate) fn heap_hard_limit_rvas(file: &ElfFile) -> Vec<u64> {
    use goblin::elf::program_header::PT_LOAD;
    let mut out = Vec::new();
    for p in file.program_headers.iter().filter(|p| p.p_type == PT_LOAD && p.p_flags & PF_X != 0) {
        let Some(code) = file.bytes_at_offset(p.p_offset, p.p_filesz) else { continue };
        for at in memchr::memmem::find_iter(code, &FLOOR.to_le_bytes()) {
            // The immediate follows a one-byte opcode (B8+r), after a REX prefix for r8d–r15d.
            for start in [at.checked_sub(1), at.checked_sub(2)].into_iter().flatten() {
                if let Some(target) = store_after(code, start, p.p_vaddr) {
                    out.push(target);
                }
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    if out.len() > MAX_STORES {
        return Vec::new();
    }
    out
}

/// The RIP-relative store target when `code[start..]` is `mov $FLOOR, r; cmov… r, x; mov r, [rip+d]`.
fn store_after(code: &[u8], start: usize, vaddr: u64) -> Option<u64> {
    let decoder = InstDecoder::default();
    let mut at = start;
    let mut next = || -> Option<Instruction> {
        let inst = decoder.decode_slice(code.get(at..(at + 15).min(code.len()))?).ok()?;
        at += inst.len().to_const() as usize;
        Some(inst)
    };
    let mov = next()?;
    let reg = match (mov.opcode(), mov.operand(0), mov.operand(1)) {
        (Opcode::MOV, Operand::Register(r), Operand::ImmediateU32(FLOOR)) => r,
        (Opcode::MOV, Operand::Register(r), Operand::ImmediateI32(v)) if v as u32 == FLOOR => r,
        _ => return None,
    };
    let cmov = next()?;
    if !is_cmov(cmov.opcode()) || !matches!(cmov.operand(0), Operand::Register(r) if r.num() == reg.num()) {
        return None;
    }
    let store = next()?;
    let end = vaddr.checked_add(at as u64)?;
    match (store.opcode(), store.operand(0), store.operand(1)) {
        (Opcode::MOV, Operand::RegDisp(base, d), Operand::Register(src)) if base == RegSpec::rip() && src.num() == reg.num() && src.width() == 8 => {
            Some(end.wrapping_add(i64::from(d) as u64))
        }
        _ => None,
    }
}

/// Instructions looked at after the `mov` for the `csel`, and after the `csel` for the store.
const AARCH64_WINDOW: usize = 4;

/// As [`heap_hard_limit_rvas`], for an aarch64 build.
pub(crate) fn heap_hard_limit_rvas_aarch64(file: &ElfFile) -> Vec<u64> {
    use goblin::elf::program_header::PT_LOAD;
    let mut out = Vec::new();
    for p in file.program_headers.iter().filter(|p| p.p_type == PT_LOAD && p.p_flags & PF_X != 0) {
        let Some(code) = file.bytes_at_offset(p.p_offset, p.p_filesz) else { continue };
        let words: Vec<u32> = code.chunks_exact(4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])).collect();
        for i in 0..words.len() {
            if let Some(target) = aarch64_store_after(&words, i, p.p_vaddr) {
                out.push(target);
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    if out.len() > MAX_STORES {
        return Vec::new();
    }
    out
}

/// The store target when `words[i..]` (at link address `vaddr + 4 i`… of the segment starting
/// at `vaddr`) is the container default's `movz`, `csel`, `adrp`, `str` (see the module).
fn aarch64_store_after(words: &[u32], i: usize, vaddr: u64) -> Option<u64> {
    // MOVZ wA/xA, #0x140, LSL #16 (= FLOOR).
    let mov = *words.get(i)?;
    if mov & 0x7fff_ffe0 != 0x52a0_2800 {
        return None;
    }
    let a = mov & 31;
    // CSEL xD, xN, xM, cond with A as one of its sources.
    let (c, csel) = (i + 1..=i + AARCH64_WINDOW).find_map(|j| {
        let w = *words.get(j)?;
        (w & 0xffe0_0c00 == 0x9a80_0000 && ((w >> 5) & 31 == a || (w >> 16) & 31 == a)).then_some((j, w))
    })?;
    let d = csel & 31;
    // ADRP xB, page; then STR xD, [xB, #imm12 * 8].
    for j in c + 1..=c + AARCH64_WINDOW {
        let adrp = *words.get(j)?;
        if adrp & 0x9f00_0000 != 0x9000_0000 {
            continue;
        }
        let str_ = *words.get(j + 1)?;
        let b = adrp & 31;
        if str_ & 0xffc0_0000 != 0xf900_0000 || str_ & 31 != d || (str_ >> 5) & 31 != b {
            return None;
        }
        let imm = (((adrp >> 5) & 0x7ffff) << 2 | (adrp >> 29) & 3) as u64;
        // Sign-extend the 21-bit page count.
        let pages = ((imm << 43) as i64 >> 43) as u64;
        let pc = vaddr.checked_add(4 * j as u64)?;
        let page = (pc & !0xfff).wrapping_add(pages << 12);
        return Some(page.wrapping_add((((str_ >> 10) & 0xfff) as u64) * 8));
    }
    None
}

fn is_cmov(op: Opcode) -> bool {
    matches!(
        op,
        Opcode::CMOVA
            | Opcode::CMOVB
            | Opcode::CMOVG
            | Opcode::CMOVGE
            | Opcode::CMOVL
            | Opcode::CMOVLE
            | Opcode::CMOVNA
            | Opcode::CMOVNB
            | Opcode::CMOVNO
            | Opcode::CMOVNP
            | Opcode::CMOVNS
            | Opcode::CMOVNZ
            | Opcode::CMOVO
            | Opcode::CMOVP
            | Opcode::CMOVS
            | Opcode::CMOVZ
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_container_default_store_is_found_and_nothing_else() {
        // 10.0.12's workstation copy at 0x5f1eaa: mov $0x1400000,%r13d; cmovae %rdx,%r13;
        // mov %r13,0xe8165(%rip) -> 0x6da020.
        let code = [0x41, 0xbd, 0x00, 0x00, 0x40, 0x01, 0x4c, 0x0f, 0x43, 0xea, 0x4c, 0x89, 0x2d, 0x65, 0x81, 0x0e, 0x00];
        assert_eq!(store_after(&code, 0, 0x5f1eaa), Some(0x6da020));
        // A store of another register, or no cmov between, is not the shape.
        let mut other = code;
        other[12] = 0x05; // mov %r8,…
        assert_eq!(store_after(&other, 0, 0x5f1eaa), None);
        let no_cmov = [0x41, 0xbd, 0x00, 0x00, 0x40, 0x01, 0x4c, 0x89, 0x2d, 0x65, 0x81, 0x0e, 0x00];
        assert_eq!(store_after(&no_cmov, 0, 0), None);
        // Truncated code ends the match, it does not panic.
        assert_eq!(store_after(&code[..9], 0, 0), None);
        assert_eq!(store_after(&code, code.len(), 0), None);
    }

    #[test]
    fn the_aarch64_container_default_store_is_found_and_nothing_else() {
        // linux-arm64 10.0.12's workstation copy at 0x57fb08: mov w9, #0x1400000; lsr x8, x8, #2;
        // cmp x8, x9; csel x8, x8, x9, hi; adrp x9, 0x6c2000; str x8, [x9, #992] -> 0x6c23e0.
        let code = [0x52a0_2809, 0xd342_fd08, 0xeb09_011f, 0x9a89_8108, 0xf000_0a09, 0xf901_f128];
        assert_eq!(aarch64_store_after(&code, 0, 0x57fb08), Some(0x6c23e0));
        // A store of another register, or no csel reading the floor, is not the shape.
        let mut other = code;
        other[5] = 0xf901_f129; // str x9, …
        assert_eq!(aarch64_store_after(&other, 0, 0x57fb08), None);
        let mut no_csel = code;
        no_csel[3] = 0xd503_201f; // nop
        assert_eq!(aarch64_store_after(&no_csel, 0, 0x57fb08), None);
        // Truncated code ends the match, it does not panic.
        assert_eq!(aarch64_store_after(&code[..5], 0, 0), None);
        assert_eq!(aarch64_store_after(&code, code.len(), 0), None);
    }
}
