//! x86_64 general registers as the kernel lays them out (`struct user_regs_struct`), and their
//! DWARF register numbers (System V psABI, figure 3.36).

use serde::Serialize;

/// Size of `user_regs_struct` in bytes.
pub(crate) const USER_REGS_SIZE: usize = 27 * 8;

/// The general registers of one thread at the moment of the dump.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Registers {
    pub(crate) r15: u64,
    pub(crate) r14: u64,
    pub(crate) r13: u64,
    pub(crate) r12: u64,
    pub(crate) rbp: u64,
    pub(crate) rbx: u64,
    pub(crate) r11: u64,
    pub(crate) r10: u64,
    pub(crate) r9: u64,
    pub(crate) r8: u64,
    pub(crate) rax: u64,
    pub(crate) rcx: u64,
    pub(crate) rdx: u64,
    pub(crate) rsi: u64,
    pub(crate) rdi: u64,
    /// The syscall number when the thread is inside a syscall, else `u64::MAX` (-1).
    pub(crate) orig_rax: u64,
    pub rip: u64,
    pub(crate) cs: u64,
    pub(crate) eflags: u64,
    pub rsp: u64,
    pub(crate) ss: u64,
    pub(crate) fs_base: u64,
    pub(crate) gs_base: u64,
    pub(crate) ds: u64,
    pub(crate) es: u64,
    pub(crate) fs: u64,
    pub(crate) gs: u64,
}

impl Registers {
    /// Reads `user_regs_struct` from exactly [`USER_REGS_SIZE`] little-endian bytes.
    pub(crate) fn from_user_regs(bytes: &[u8]) -> Option<Registers> {
        if bytes.len() < USER_REGS_SIZE {
            return None;
        }
        let mut v = [0u64; 27];
        for (i, slot) in v.iter_mut().enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
            *slot = u64::from_le_bytes(b);
        }
        Some(Registers {
            r15: v[0],
            r14: v[1],
            r13: v[2],
            r12: v[3],
            rbp: v[4],
            rbx: v[5],
            r11: v[6],
            r10: v[7],
            r9: v[8],
            r8: v[9],
            rax: v[10],
            rcx: v[11],
            rdx: v[12],
            rsi: v[13],
            rdi: v[14],
            orig_rax: v[15],
            rip: v[16],
            cs: v[17],
            eflags: v[18],
            rsp: v[19],
            ss: v[20],
            fs_base: v[21],
            gs_base: v[22],
            ds: v[23],
            es: v[24],
            fs: v[25],
            gs: v[26],
        })
    }

    /// The value of a DWARF-numbered register, for the registers a stack walk tracks.
    pub(crate) fn dwarf(&self, reg: u16) -> Option<u64> {
        Some(match reg {
            dwarf::RAX => self.rax,
            dwarf::RDX => self.rdx,
            dwarf::RCX => self.rcx,
            dwarf::RBX => self.rbx,
            dwarf::RSI => self.rsi,
            dwarf::RDI => self.rdi,
            dwarf::RBP => self.rbp,
            dwarf::RSP => self.rsp,
            dwarf::R8 => self.r8,
            dwarf::R9 => self.r9,
            dwarf::R10 => self.r10,
            dwarf::R11 => self.r11,
            dwarf::R12 => self.r12,
            dwarf::R13 => self.r13,
            dwarf::R14 => self.r14,
            dwarf::R15 => self.r15,
            dwarf::RIP => self.rip,
            _ => return None,
        })
    }

    /// The syscall the thread is inside, if any (`orig_rax` is -1 outside a syscall).
    pub fn syscall_number(&self) -> Option<u64> {
        if self.orig_rax as i64 >= 0 { Some(self.orig_rax) } else { None }
    }
}

/// DWARF register numbers for x86_64.
pub(crate) mod dwarf {
    pub(crate) const RAX: u16 = 0;
    pub(crate) const RDX: u16 = 1;
    pub(crate) const RCX: u16 = 2;
    pub(crate) const RBX: u16 = 3;
    pub(crate) const RSI: u16 = 4;
    pub(crate) const RDI: u16 = 5;
    pub(crate) const RBP: u16 = 6;
    pub(crate) const RSP: u16 = 7;
    pub(crate) const R8: u16 = 8;
    pub(crate) const R9: u16 = 9;
    pub(crate) const R10: u16 = 10;
    pub(crate) const R11: u16 = 11;
    pub(crate) const R12: u16 = 12;
    pub(crate) const R13: u16 = 13;
    pub(crate) const R14: u16 = 14;
    pub(crate) const R15: u16 = 15;
    /// The return address column.
    pub(crate) const RIP: u16 = 16;
    /// Registers 0..=16 are the ones a walk tracks.
    pub(crate) const TRACKED: usize = 17;

    /// Windows register number (rax rcx rdx rbx rsp rbp rsi rdi r8..r15: the order of x64 unwind
    /// codes and of CoreCLR's `CONTEXT`) → DWARF register number.
    pub(crate) const FROM_WINDOWS: [u16; 16] = [RAX, RCX, RDX, RBX, RSP, RBP, RSI, RDI, R8, R9, R10, R11, R12, R13, R14, R15];

    /// The register's name (`rbx`), by DWARF number.
    pub(crate) fn name(reg: u16) -> Option<&'static str> {
        const NAMES: [&str; 17] = ["rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rip"];
        NAMES.get(reg as usize).copied()
    }
}
