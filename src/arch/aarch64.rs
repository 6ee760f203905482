//! aarch64 general registers as the kernel lays them out in a core (`struct user_pt_regs`:
//! x0–x30, sp, pc, pstate), and their DWARF register numbers (the Arm "DWARF for the Arm 64-bit
//! Architecture" ABI: x0–x30 are 0–30, sp is 31).

use serde::Serialize;

/// Size of `user_pt_regs` in bytes.
pub(crate) const USER_PT_REGS_SIZE: usize = 34 * 8;

/// The general registers of one thread at the moment of the dump.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Registers {
    /// x0–x30 (x29 is the frame pointer, x30 the link register).
    pub(crate) x: [u64; 31],
    pub sp: u64,
    pub pc: u64,
    pub(crate) pstate: u64,
}

impl Registers {
    /// Reads `user_pt_regs` from [`USER_PT_REGS_SIZE`] little-endian bytes.
    pub(crate) fn from_user_pt_regs(bytes: &[u8]) -> Option<Registers> {
        let word = |i: usize| bytes.get(i * 8..i * 8 + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
        let mut x = [0u64; 31];
        for (i, slot) in x.iter_mut().enumerate() {
            *slot = word(i)?;
        }
        Some(Registers { x, sp: word(31)?, pc: word(32)?, pstate: word(33)? })
    }

    /// The value of a DWARF-numbered register, for the registers a stack walk tracks.
    pub(crate) fn dwarf(&self, reg: u16) -> Option<u64> {
        match reg {
            0..=30 => Some(self.x[reg as usize]),
            dwarf::SP => Some(self.sp),
            dwarf::PC => Some(self.pc),
            _ => None,
        }
    }
}

/// DWARF register numbers for aarch64.
pub(crate) mod dwarf {
    /// The frame pointer (x29): it points at the frame record {caller's x29, return address}.
    pub(crate) const FP: u16 = 29;
    /// The link register (x30): a call leaves the return address here; CIEs name it the return
    /// address column.
    pub(crate) const LR: u16 = 30;
    pub(crate) const SP: u16 = 31;
    /// The pc, in a slot of knot's own past the DWARF numbers a walk tracks (DWARF numbers no pc:
    /// the caller's pc is the return address column's value).
    pub(crate) const PC: u16 = 32;
    /// Registers 0..=32 are the ones a walk tracks.
    pub(crate) const TRACKED: usize = 33;

    /// The register's name (`x19`, `sp`), by DWARF number.
    pub(crate) fn name(reg: u16) -> Option<&'static str> {
        const NAMES: [&str; 33] = [
            "x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10", "x11", "x12", "x13", "x14", "x15", "x16", "x17", "x18", "x19", "x20", "x21", "x22",
            "x23", "x24", "x25", "x26", "x27", "x28", "x29", "x30", "sp", "pc",
        ];
        NAMES.get(reg as usize).copied()
    }

}

/// Registers AAPCS64 makes callee-saved (x19–x29, sp): an unwind rule that does not mention them
/// means "same value as in the callee".
pub(crate) fn is_callee_saved(reg: u16) -> bool {
    matches!(reg, 19..=29 | dwarf::SP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_pt_regs_reads_x0_to_x30_then_sp_pc_pstate() {
        let bytes: Vec<u8> = (0..34u64).flat_map(|i| (0x100 + i).to_le_bytes()).collect();
        let r = Registers::from_user_pt_regs(&bytes).unwrap();
        assert_eq!((r.x[0], r.x[29], r.x[30], r.sp, r.pc, r.pstate), (0x100, 0x11d, 0x11e, 0x11f, 0x120, 0x121));
        assert_eq!((r.dwarf(dwarf::FP), r.dwarf(dwarf::SP), r.dwarf(dwarf::PC), r.dwarf(33)), (Some(0x11d), Some(0x11f), Some(0x120), None));
        assert!(Registers::from_user_pt_regs(&bytes[..33 * 8]).is_none());
    }
}
