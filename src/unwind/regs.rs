//! The registers a stack walk tracks for one frame: the x86_64 general registers (DWARF 0..=15)
//! and the return address column (16), each either known or not. Analyzers read callee-saved
//! values from outer frames here (a lock's address kept in %rbx, say).

use crate::arch::x86_64::{dwarf, Registers};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FrameRegs {
    vals: [u64; dwarf::TRACKED],
    known: u32,
}

impl FrameRegs {
    /// Every register of the thread's context, all known.
    pub(crate) fn from_context(r: &Registers) -> FrameRegs {
        let mut out = FrameRegs::default();
        for reg in 0..dwarf::TRACKED as u16 {
            if let Some(v) = r.dwarf(reg) {
                out.set(reg, v);
            }
        }
        out
    }

    pub(crate) fn get(&self, reg: u16) -> Option<u64> {
        let i = reg as usize;
        (i < dwarf::TRACKED && self.known & (1 << i) != 0).then(|| self.vals[i])
    }

    pub(crate) fn set(&mut self, reg: u16, value: u64) {
        let i = reg as usize;
        if i < dwarf::TRACKED {
            self.vals[i] = value;
            self.known |= 1 << i;
        }
    }

    pub(crate) fn ip(&self) -> Option<u64> {
        self.get(dwarf::RIP)
    }

    pub(crate) fn sp(&self) -> Option<u64> {
        self.get(dwarf::RSP)
    }

    pub(crate) fn bp(&self) -> Option<u64> {
        self.get(dwarf::RBP)
    }
}

/// Registers the x86_64 psABI makes callee-saved: an unwind rule that does not mention them means
/// "same value as in the callee".
pub(crate) fn is_callee_saved(reg: u16) -> bool {
    matches!(reg, dwarf::RBX | dwarf::RBP | dwarf::R12 | dwarf::R13 | dwarf::R14 | dwarf::R15)
}
