//! NT_PRSTATUS: one per thread. `struct elf_prstatus` is the same on x86-64 and aarch64 up to
//! `pr_reg` at offset 112 (signal info, pids, times); `pr_reg` is the architecture's register
//! set: x86-64's `user_regs_struct` (27 words), aarch64's `user_pt_regs` (34 words).

use crate::arch::{aarch64, x86_64, Arch, Registers};
use crate::bytes::{i32_at, u16_at};

const PR_CURSIG: usize = 12;
const PR_PID: usize = 32;
pub(crate) const PR_REG: usize = 112;

#[derive(Debug, Clone)]
pub(crate) struct PrStatus {
    pub(crate) tid: u32,
    /// The signal the thread was stopped by, 0 if none (gcore's threads, the kernel's other threads).
    pub(crate) cursig: u16,
    pub(crate) registers: Registers,
}

/// The size of `pr_reg` on `arch`.
pub(crate) fn regs_size(arch: Arch) -> usize {
    match arch {
        Arch::X86_64 => x86_64::USER_REGS_SIZE,
        Arch::Aarch64 => aarch64::USER_PT_REGS_SIZE,
    }
}

pub(crate) fn parse(desc: &[u8], arch: Arch) -> Option<PrStatus> {
    let size = regs_size(arch);
    let regs = desc.get(PR_REG..PR_REG.checked_add(size)?)?;
    Some(PrStatus {
        tid: i32_at(desc, PR_PID)? as u32,
        cursig: u16_at(desc, PR_CURSIG)?,
        registers: match arch {
            Arch::X86_64 => Registers::X86_64(x86_64::Registers::from_user_regs(regs)?),
            Arch::Aarch64 => Registers::Aarch64(aarch64::Registers::from_user_pt_regs(regs)?),
        },
    })
}
