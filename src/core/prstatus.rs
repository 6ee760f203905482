//! NT_PRSTATUS: one per thread. x86_64 `struct elf_prstatus` (336 bytes): signal info, pids,
//! times, then `pr_reg` (user_regs_struct) at offset 112.

use crate::bytes::{i32_at, u16_at};
use crate::arch::x86_64::{Registers, USER_REGS_SIZE};

const PR_CURSIG: usize = 12;
const PR_PID: usize = 32;
const PR_REG: usize = 112;

#[derive(Debug, Clone)]
pub(crate) struct PrStatus {
    pub(crate) tid: u32,
    /// The signal the thread was stopped by, 0 if none (gcore's threads, the kernel's other threads).
    pub(crate) cursig: u16,
    pub(crate) registers: Registers,
}

pub(crate) fn parse(desc: &[u8]) -> Option<PrStatus> {
    if desc.len() < PR_REG + USER_REGS_SIZE {
        return None;
    }
    Some(PrStatus {
        tid: i32_at(desc, PR_PID)? as u32,
        cursig: u16_at(desc, PR_CURSIG)?,
        registers: Registers::from_user_regs(&desc[PR_REG..PR_REG + USER_REGS_SIZE])?,
    })
}
