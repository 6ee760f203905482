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
}
