//! The origin: the first frame of the program's own code above the machinery of dying.

use super::machinery::{normalize, Machinery};
use crate::threads::FrameReport;

/// Not a function of its own: a signal trampoline, a runtime transition record, or the bad PC
/// of a call through a wild pointer (`bad_pc`).
fn is_noise(f: &FrameReport, bad_pc: Option<u64>) -> bool {
    f.signal_frame || f.transition.is_some() || Some(f.ip.0) == bad_pc
}

fn is_library(f: &FrameReport, m: &Machinery) -> bool {
    f.module.as_deref().is_some_and(|name| m.is_library(name))
}

fn is_machinery(f: &FrameReport, m: &Machinery) -> bool {
    f.function.as_deref().is_some_and(|name| m.is_machinery(&normalize(name)))
}

/// The index just past the machinery at the top of the stack: machinery frames, with library
/// frames and noise between them, up to the first frame of the program's own code.
pub(crate) fn past_machinery(frames: &[FrameReport], m: &Machinery, bad_pc: Option<u64>) -> usize {
    let mut after = 0;
    for (i, f) in frames.iter().enumerate() {
        if is_machinery(f, m) {
            after = i + 1;
        } else if !(is_library(f, m) || is_noise(f, bad_pc)) {
            break;
        }
    }
    after
}

/// The origin's index in `frames`.
pub(crate) fn find(frames: &[FrameReport], m: &Machinery, bad_pc: Option<u64>) -> Option<usize> {
    let start = past_machinery(frames, m, bad_pc);
    let rest = || frames.iter().enumerate().skip(start).filter(|(_, f)| !is_noise(f, bad_pc) && !is_machinery(f, m));
    rest().find(|(_, f)| !is_library(f, m)).or_else(|| rest().next()).map(|(i, _)| i)
}
