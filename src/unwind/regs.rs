//! The registers a stack walk tracks for one frame, by DWARF number, each either known or not:
//! x86-64's general registers (0..=15) and its return address column (16); aarch64's x0–x30
//! (0..=30), sp (31) and the pc (knot's slot 32). Analyzers read callee-saved values from outer
//! frames here (a lock's address kept in %rbx or x19, say).

use crate::arch::{Arch, Registers};

/// Slots for the architecture that tracks the most (aarch64's 33).
const MAX_TRACKED: usize = crate::arch::aarch64::dwarf::TRACKED;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameRegs {
    vals: [u64; MAX_TRACKED],
    known: u64,
    arch: Arch,
}

/// No register known, on x86-64.
impl Default for FrameRegs {
    fn default() -> Self {
        FrameRegs::new(Arch::X86_64)
    }
}

impl FrameRegs {
    /// No register known, on `arch`.
    pub(crate) fn new(arch: Arch) -> FrameRegs {
        FrameRegs { vals: [0; MAX_TRACKED], known: 0, arch }
    }

    /// Every register of the thread's context, all known.
    pub(crate) fn from_context(r: &Registers) -> FrameRegs {
        let mut out = FrameRegs::new(r.arch());
        for reg in 0..out.arch.tracked() as u16 {
            if let Some(v) = r.dwarf(reg) {
                out.set(reg, v);
            }
        }
        out
    }

    pub(crate) fn arch(&self) -> Arch {
        self.arch
    }

    pub(crate) fn get(&self, reg: u16) -> Option<u64> {
        let i = reg as usize;
        (i < self.arch.tracked() && self.known & (1 << i) != 0).then(|| self.vals[i])
    }

    pub(crate) fn set(&mut self, reg: u16, value: u64) {
        let i = reg as usize;
        if i < self.arch.tracked() {
            self.vals[i] = value;
            self.known |= 1 << i;
        }
    }

    pub(crate) fn ip(&self) -> Option<u64> {
        self.get(self.arch.pc_reg())
    }

    pub(crate) fn sp(&self) -> Option<u64> {
        self.get(self.arch.sp_reg())
    }

    pub(crate) fn bp(&self) -> Option<u64> {
        self.get(self.arch.fp_reg())
    }
}
