//! Everything that depends on the processor architecture, behind one seam: the register set a
//! core records ([`Registers`]), the DWARF numbers of the registers a stack walk tracks and which
//! are callee-saved ([`Arch`]), the syscall table and how a thread inside a syscall is told from
//! its registers and the instruction at its pc ([`syscall`]). knot reads x86-64 and aarch64 cores.

pub(crate) mod aarch64;
pub(crate) mod aarch64_insn;
pub(crate) mod syscalls;
pub(crate) mod syscalls_generic;
pub(crate) mod x86_64;

use crate::process::Memory;
use serde::Serialize;

/// The architecture of a core (its ELF `e_machine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Arch {
    #[default]
    X86_64,
    Aarch64,
}

impl Arch {
    /// The DWARF number of the stack pointer.
    pub(crate) fn sp_reg(self) -> u16 {
        match self {
            Arch::X86_64 => x86_64::dwarf::RSP,
            Arch::Aarch64 => aarch64::dwarf::SP,
        }
    }

    /// The slot of the pc (x86-64: the return address column, 16; aarch64: knot's slot 32).
    pub(crate) fn pc_reg(self) -> u16 {
        match self {
            Arch::X86_64 => x86_64::dwarf::RIP,
            Arch::Aarch64 => aarch64::dwarf::PC,
        }
    }

    /// The DWARF number of the frame pointer (%rbp, x29).
    pub(crate) fn fp_reg(self) -> u16 {
        match self {
            Arch::X86_64 => x86_64::dwarf::RBP,
            Arch::Aarch64 => aarch64::dwarf::FP,
        }
    }

    /// How many registers (DWARF 0..n, the pc's slot among them) a walk tracks.
    pub(crate) fn tracked(self) -> usize {
        match self {
            Arch::X86_64 => x86_64::dwarf::TRACKED,
            Arch::Aarch64 => aarch64::dwarf::TRACKED,
        }
    }

    /// Whether the psABI makes `reg` callee-saved: a CFI row that does not mention it means "same
    /// value as in the callee".
    pub(crate) fn is_callee_saved(self, reg: u16) -> bool {
        match self {
            Arch::X86_64 => matches!(reg, x86_64::dwarf::RBX | x86_64::dwarf::RBP | x86_64::dwarf::R12 | x86_64::dwarf::R13 | x86_64::dwarf::R14 | x86_64::dwarf::R15),
            Arch::Aarch64 => aarch64::is_callee_saved(reg),
        }
    }

    /// A syscall's name by this architecture's number.
    /// The first address past user space: x86-64's canonical lower half ends at 2^47; aarch64's
    /// user half is at most 52 bits (with `FEAT_LVA`; 48 on most kernels), and the kernel reports
    /// a fault address with its top-byte tag cleared.
    pub(crate) fn user_space_end(self) -> u64 {
        match self {
            Arch::X86_64 => 0x0000_8000_0000_0000,
            Arch::Aarch64 => 0x0010_0000_0000_0000,
        }
    }

    pub(crate) fn syscall_name(self, nr: u64) -> Option<&'static str> {
        match self {
            Arch::X86_64 => syscalls::name(nr),
            Arch::Aarch64 => syscalls_generic::name(nr),
        }
    }

    /// A register's name by its DWARF number (`rbx`, `x19`).
    pub(crate) fn reg_name(self, reg: u16) -> Option<&'static str> {
        match self {
            Arch::X86_64 => x86_64::dwarf::name(reg),
            Arch::Aarch64 => aarch64::dwarf::name(reg),
        }
    }

    /// The number of `restart_syscall`, by which the kernel resumes an interrupted call with a
    /// timeout.
    pub(crate) fn restart_syscall(self) -> u64 {
        match self {
            Arch::X86_64 => 219,
            Arch::Aarch64 => 128,
        }
    }
}

/// The general registers of one thread at the moment of the dump, as its architecture has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Registers {
    X86_64(x86_64::Registers),
    Aarch64(aarch64::Registers),
}

impl Default for Registers {
    fn default() -> Self {
        Registers::X86_64(x86_64::Registers::default())
    }
}

impl Registers {
    pub fn arch(&self) -> Arch {
        match self {
            Registers::X86_64(_) => Arch::X86_64,
            Registers::Aarch64(_) => Arch::Aarch64,
        }
    }

    /// The program counter (%rip, pc).
    pub fn pc(&self) -> u64 {
        match self {
            Registers::X86_64(r) => r.rip,
            Registers::Aarch64(r) => r.pc,
        }
    }

    /// The stack pointer (%rsp, sp).
    pub fn sp(&self) -> u64 {
        match self {
            Registers::X86_64(r) => r.rsp,
            Registers::Aarch64(r) => r.sp,
        }
    }

    /// The value of a DWARF-numbered register (the pc in [`Arch::pc_reg`]'s slot).
    pub(crate) fn dwarf(&self, reg: u16) -> Option<u64> {
        match self {
            Registers::X86_64(r) => r.dwarf(reg),
            Registers::Aarch64(r) => r.dwarf(reg),
        }
    }

    /// The syscall number the kernel recorded for a thread inside a syscall: x86-64's `orig_rax`.
    /// An aarch64 core records none (`user_pt_regs` has no `syscallno`): `arch::syscall` reads it
    /// from x8 at an `svc #0`.
    pub fn syscall_number(&self) -> Option<u64> {
        match self {
            Registers::X86_64(r) => r.syscall_number(),
            Registers::Aarch64(_) => None,
        }
    }

    /// The six argument registers of a syscall (x86-64: rdi rsi rdx r10 r8 r9; aarch64: x0–x5,
    /// x0 back to the first argument when the call is to be restarted).
    pub(crate) fn syscall_args(&self) -> [u64; 6] {
        match self {
            Registers::X86_64(r) => [r.rdi, r.rsi, r.rdx, r.r10, r.r8, r.r9],
            Registers::Aarch64(r) => [r.x[0], r.x[1], r.x[2], r.x[3], r.x[4], r.x[5]],
        }
    }
}

/// A syscall a thread is inside: its number (the architecture's) and its six argument registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Syscall {
    pub(crate) number: u64,
    pub(crate) args: [u64; 6],
}

/// `svc #0`, aarch64's syscall instruction.
const SVC_0: u32 = 0xd400_0001;

/// The syscall the thread is inside, from its registers and the code at its pc, or `None` when
/// it is not inside one.
///
/// x86-64: `orig_rax` holds the number (-1 outside a syscall) and `rip` follows the `syscall`
/// instruction (`0f 05`); `orig_rax` alone can be stale after a signal restarts a call, so the
/// instruction confirms it — and where the code is not readable, `orig_rax` is trusted.
///
/// aarch64: the kernel writes a core (or stops a thread for ptrace) from its signal delivery,
/// after it has undone the interrupted call's return for a restart: a thread blocked in a
/// restartable call (a futex wait, a read, a pause, a sleep) has its pc rewound onto the
/// `svc #0` and x0 back to the call's first argument (`orig_x0`), x8 holding the number — 128,
/// `restart_syscall`, for a call with a timeout. A pc that is not on an `svc #0` is not in a
/// syscall the core can tell.
pub(crate) fn syscall(regs: &Registers, memory: &dyn Memory) -> Option<Syscall> {
    match regs {
        Registers::X86_64(r) => {
            let nr = r.syscall_number()?;
            let mut b = [0u8; 2];
            let readable = r.rip.checked_sub(2).is_some_and(|at| memory.read(at, &mut b).is_ok());
            if readable && b != [0x0f, 0x05] {
                return None;
            }
            Some(Syscall { number: nr, args: regs.syscall_args() })
        }
        Registers::Aarch64(r) => {
            let mut b = [0u8; 4];
            memory.read(r.pc, &mut b).ok()?;
            (u32::from_le_bytes(b) == SVC_0).then(|| Syscall { number: r.x[8], args: regs.syscall_args() })
        }
    }
}

/// The syscall number the thread's registers record, without the instruction check of
/// [`syscall`] on x86-64 (`orig_rax` as the kernel left it); on aarch64, [`syscall`]'s.
pub(crate) fn recorded_syscall(regs: &Registers, memory: &dyn Memory) -> Option<u64> {
    match regs {
        Registers::X86_64(r) => r.syscall_number(),
        Registers::Aarch64(_) => syscall(regs, memory).map(|s| s.number),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::RangeMemory;

    #[test]
    fn an_aarch64_thread_is_in_a_syscall_only_with_its_pc_on_svc_0() {
        let mut m = RangeMemory::new();
        m.add(0x1000, vec![0x01, 0x00, 0x00, 0xd4, 0x1f, 0x20, 0x03, 0xd5]); // svc #0; nop
        let mut r = aarch64::Registers { pc: 0x1000, ..Default::default() };
        r.x[8] = 98;
        r.x[0] = 0x5000;
        r.x[1] = 128;
        r.x[2] = 2;
        let s = syscall(&Registers::Aarch64(r), &m).unwrap();
        assert_eq!((s.number, s.args[0], s.args[1], s.args[2]), (98, 0x5000, 128, 2));
        r.pc = 0x1004;
        assert_eq!(syscall(&Registers::Aarch64(r), &m), None, "past the svc: the call returned");
        r.pc = 0x2000;
        assert_eq!(syscall(&Registers::Aarch64(r), &m), None, "unreadable code");
    }

    #[test]
    fn the_two_tables_number_futex_and_restart_syscall_apart() {
        assert_eq!(Arch::X86_64.syscall_name(202), Some("futex"));
        assert_eq!(Arch::Aarch64.syscall_name(98), Some("futex"));
        assert_eq!(Arch::Aarch64.syscall_name(Arch::Aarch64.restart_syscall()), Some("restart_syscall"));
        assert_eq!(Arch::X86_64.syscall_name(Arch::X86_64.restart_syscall()), Some("restart_syscall"));
    }
}
