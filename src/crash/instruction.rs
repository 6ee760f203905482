//! The instruction at the crashing PC, decoded with yaxpeax-x86 (as rust-minidump's address
//! analysis does) on x86-64 and with `arch::aarch64_insn` on aarch64: its text, whether it
//! reads, writes or executes the faulting address, and the registers that formed its memory
//! operand.

use super::model::{Access, InstructionReport, OperandReport, RegisterValue};
use crate::arch::x86_64::Registers;
use crate::process::Memory;
use crate::hex::Hex;
use yaxpeax_arch::LengthedInstruction;
use yaxpeax_x86::long_mode::{InstDecoder, Instruction, Opcode, Operand, RegSpec};

/// The longest x86 instruction.
const MAX_LEN: usize = 15;

/// Decodes the instruction at `pc`; `fault` is the faulting address when the signal gave one.
pub(crate) fn decode(memory: &dyn Memory, regs: &Registers, pc: u64, fault: Option<u64>) -> Option<InstructionReport> {
    let bytes = read_code(memory, pc)?;
    let inst = InstDecoder::default().decode_slice(&bytes).ok()?;
    let len = (inst.len().to_const() as usize).min(bytes.len());
    let access = access(&inst, pc, fault);
    // At a PC in data the bytes are no instruction the CPU ran: nothing to explain by registers.
    let operand = memory_operand(&inst).filter(|_| access != Some(Access::Execute)).map(|(_, op)| operand_report(&op, regs, pc.wrapping_add(len as u64)));
    Some(InstructionReport {
        address: Hex(pc),
        bytes: bytes[..len].iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" "),
        text: inst.to_string(),
        access,
        operand,
    })
}

/// Up to 15 bytes at `pc`: fewer when the code ends at a mapping's end.
fn read_code(memory: &dyn Memory, pc: u64) -> Option<Vec<u8>> {
    (1..=MAX_LEN).rev().find_map(|n| {
        let mut b = vec![0u8; n];
        memory.read(pc, &mut b).ok().map(|_| b)
    })
}

/// The first explicit memory operand and its position.
fn memory_operand(inst: &Instruction) -> Option<(u8, Operand)> {
    (0..inst.operand_count()).map(|i| (i, inst.operand(i))).find(|(_, op)| op.is_memory())
}

/// Instructions whose memory operand, even when first, is only read (or not accessed at all).
fn reads_first_operand(op: Opcode) -> bool {
    matches!(
        op,
        Opcode::CMP
            | Opcode::TEST
            | Opcode::DIV
            | Opcode::IDIV
            | Opcode::MUL
            | Opcode::BT
            | Opcode::PUSH
            | Opcode::CALL
            | Opcode::CALLF
            | Opcode::JMP
            | Opcode::JMPF
            | Opcode::UCOMISS
            | Opcode::UCOMISD
            | Opcode::COMISS
            | Opcode::COMISD
            | Opcode::PTEST
            | Opcode::PREFETCHNTA
            | Opcode::PREFETCH0
            | Opcode::PREFETCH1
            | Opcode::PREFETCH2
            | Opcode::PREFETCHW
            | Opcode::NOP
            | Opcode::LEA
            | Opcode::CMPS
            | Opcode::SCAS
            | Opcode::LODS
    )
}

fn access(inst: &Instruction, pc: u64, fault: Option<u64>) -> Option<Access> {
    if fault == Some(pc) {
        return Some(Access::Execute);
    }
    match memory_operand(inst) {
        Some((0, _)) if !reads_first_operand(inst.opcode()) => Some(Access::Write),
        Some(_) if inst.opcode() == Opcode::LEA => None,
        Some(_) => Some(Access::Read),
        // Implicit stack and string accesses.
        None => match inst.opcode() {
            Opcode::PUSH | Opcode::CALL | Opcode::CALLF | Opcode::ENTER | Opcode::STOS | Opcode::MOVS => Some(Access::Write),
            Opcode::POP | Opcode::RETURN | Opcode::RETF | Opcode::LEAVE | Opcode::LODS | Opcode::SCAS | Opcode::CMPS => Some(Access::Read),
            _ => None,
        },
    }
}

/// A register's value at the crash; `next_pc` for RIP-relative operands.
fn register(regs: &Registers, reg: RegSpec, next_pc: u64) -> RegisterValue {
    let name = reg.name();
    let full = |n: &str| -> Option<u64> {
        Some(match n {
            "rax" => regs.rax,
            "rbx" => regs.rbx,
            "rcx" => regs.rcx,
            "rdx" => regs.rdx,
            "rsi" => regs.rsi,
            "rdi" => regs.rdi,
            "rbp" => regs.rbp,
            "rsp" => regs.rsp,
            "r8" => regs.r8,
            "r9" => regs.r9,
            "r10" => regs.r10,
            "r11" => regs.r11,
            "r12" => regs.r12,
            "r13" => regs.r13,
            "r14" => regs.r14,
            "r15" => regs.r15,
            "rip" => next_pc,
            _ => return None,
        })
    };
    // 32-bit addressing (an address-size prefix) uses the low halves.
    let value = full(name).or_else(|| {
        let wide = match name {
            "eax" | "ebx" | "ecx" | "edx" | "esi" | "edi" | "ebp" | "esp" => format!("r{}", &name[1..]),
            "eip" => "rip".to_string(),
            n if n.starts_with('r') && n.ends_with('d') => n[..n.len() - 1].to_string(),
            _ => return None,
        };
        full(&wide).map(|v| v & 0xffff_ffff)
    });
    RegisterValue { register: name.to_string(), value: value.map(Hex) }
}

fn operand_report(op: &Operand, regs: &Registers, next_pc: u64) -> OperandReport {
    let r = |reg: &RegSpec| Some(register(regs, *reg, next_pc));
    let (base, index, scale, displacement) = match op {
        Operand::DisplacementU32(d) => (None, None, 1, i64::from(*d)),
        Operand::DisplacementU64(d) => (None, None, 1, *d as i64),
        Operand::RegDeref(b) | Operand::RegDerefMasked(b, _) => (r(b), None, 1, 0),
        Operand::RegDisp(b, d) | Operand::RegDispMasked(b, d, _) => (r(b), None, 1, i64::from(*d)),
        Operand::RegScale(i, s) | Operand::RegScaleMasked(i, s, _) => (None, r(i), *s, 0),
        Operand::RegScaleDisp(i, s, d) | Operand::RegScaleDispMasked(i, s, d, _) => (None, r(i), *s, i64::from(*d)),
        Operand::RegIndexBase(b, i) | Operand::RegIndexBaseMasked(b, i, _) => (r(b), r(i), 1, 0),
        Operand::RegIndexBaseDisp(b, i, d) | Operand::RegIndexBaseDispMasked(b, i, d, _) => (r(b), r(i), 1, i64::from(*d)),
        Operand::RegIndexBaseScale(b, i, s) | Operand::RegIndexBaseScaleMasked(b, i, s, _) => (r(b), r(i), *s, 0),
        Operand::RegIndexBaseScaleDisp(b, i, s, d) | Operand::RegIndexBaseScaleDispMasked(b, i, s, d, _) => (r(b), r(i), *s, i64::from(*d)),
        _ => (None, None, 1, 0),
    };
    let value = |v: &Option<RegisterValue>| -> Option<u64> {
        match v {
            None => Some(0),
            Some(rv) => rv.value.map(|h| h.0),
        }
    };
    let address = (|| {
        let b = value(&base)?;
        let i = value(&index)?;
        Some(b.wrapping_add(i.wrapping_mul(u64::from(scale))).wrapping_add(displacement as u64))
    })();
    OperandReport { base, index, scale, displacement, address: address.map(Hex) }
}

/// The aarch64 instruction at `pc` (one 4-byte word); `fault` as for [`decode`].
pub(crate) fn decode_aarch64(memory: &dyn Memory, regs: &crate::arch::aarch64::Registers, pc: u64, fault: Option<u64>) -> Option<InstructionReport> {
    use crate::arch::aarch64_insn;
    let mut b = [0u8; 4];
    memory.read(pc, &mut b).ok()?;
    let d = aarch64_insn::decode(u32::from_le_bytes(b));
    let access = if fault == Some(pc) {
        Some(Access::Execute)
    } else {
        d.writes.map(|w| if w { Access::Write } else { Access::Read })
    };
    let reg = |n: u16| RegisterValue {
        register: if n == 31 { "sp".to_string() } else { format!("x{n}") },
        value: Some(Hex(if n == 31 { regs.sp } else { regs.x[n as usize] })),
    };
    let operand = d.address.filter(|_| access != Some(Access::Execute)).map(|a| {
        let base = Some(a.base.map_or_else(|| RegisterValue { register: "pc".into(), value: Some(Hex(pc)) }, reg));
        // The index register 31 is the zero register.
        let index = a.index.map(|(n, e, shift)| (RegisterValue { register: format!("x{n}"), value: Some(Hex(if n == 31 { 0 } else { regs.x[n as usize] })) }, e, shift));
        let base_value = a.base.map_or(pc, |n| if n == 31 { regs.sp } else { regs.x[n as usize] });
        let index_value = index.as_ref().map_or(0, |(r, e, shift)| e.apply(r.value.map_or(0, |h| h.0)) << shift);
        let address = base_value.wrapping_add(index_value).wrapping_add(a.offset as u64);
        let scale = index.as_ref().map_or(1, |(_, _, shift)| 1u8 << shift);
        OperandReport { base, index: index.map(|(r, _, _)| r), scale, displacement: a.offset, address: Some(Hex(address)) }
    });
    Some(InstructionReport { address: Hex(pc), bytes: b.iter().map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(" "), text: d.text, access, operand })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::RangeMemory;

    fn at(pc: u64, code: &[u8]) -> RangeMemory {
        let mut m = RangeMemory::new();
        m.add(pc, code.to_vec());
        m
    }

    #[test]
    fn a_field_read_through_null_names_the_register_and_offset() {
        // mov eax, dword [rax + 0x2c]
        let m = at(0x1000, &[0x8b, 0x40, 0x2c, 0x5d, 0xc3]);
        let regs = Registers { rax: 0, ..Default::default() };
        let i = decode(&m, &regs, 0x1000, Some(0x2c)).expect("decodes");
        assert_eq!(i.bytes, "8b 40 2c");
        assert_eq!(i.text, "mov eax, dword [rax + 0x2c]");
        assert_eq!(i.access, Some(Access::Read));
        let op = i.operand.expect("operand");
        assert_eq!(op.base.as_ref().map(|b| b.register.as_str()), Some("rax"));
        assert_eq!(op.displacement, 0x2c);
        assert_eq!(op.address, Some(Hex(0x2c)));
    }

    #[test]
    fn stores_calls_and_jumps_to_the_fault_are_told_apart() {
        let regs = Registers { rax: 0x5000, rsp: 0x7000, ..Default::default() };
        // mov byte [rax], 0x4b
        let w = decode(&at(0x1000, &[0xc6, 0x00, 0x4b]), &regs, 0x1000, Some(0x5000)).expect("decodes");
        assert_eq!(w.access, Some(Access::Write));
        // call 0x…: a push of the return address
        let c = decode(&at(0x1000, &[0xe8, 0, 0, 0, 0]), &regs, 0x1000, Some(0x6ff8)).expect("decodes");
        assert_eq!(c.access, Some(Access::Write));
        // The PC is the fault address.
        let x = decode(&at(0x1000, &[0x00, 0x00]), &regs, 0x1000, Some(0x1000)).expect("decodes");
        assert_eq!(x.access, Some(Access::Execute));
    }

    #[test]
    fn unreadable_code_gives_nothing() {
        assert!(decode(&RangeMemory::new(), &Registers::default(), 0x1000, None).is_none());
    }
}
