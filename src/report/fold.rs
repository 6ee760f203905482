//! A stack as a person reads it: a run of frames of one module that has no symbols (the .NET
//! runtime ships `libcoreclr.so` without them: ten `?? [libcoreclr.so]` under each monitor
//! owner) is one line. The JSON keeps every frame; only the text and HTML fold.
//!
//! A frame is never folded when a person needs it alone: the innermost frame (where the thread
//! is, or the crash site), the frame a signal interrupted (just outside `<signal handler
//! called>`), a frame found by scanning (it says so), and a frame at one of the crash's known
//! addresses (the faulting instruction, the fault address, the crash's origin).

use super::model::{FrameReport, Report};
use crate::unwind::Trust;

/// Fewest frames that make a folded run.
const MIN_RUN: usize = 2;

/// One line of a folded stack.
#[derive(Debug)]
pub(crate) enum Line<'a> {
    Frame(&'a FrameReport),
    /// Consecutive unsymbolized frames of one module.
    Run { module: &'a str, frames: &'a [FrameReport] },
}

/// The addresses of a report's crash no folded run may hide.
pub(crate) fn crash_addresses(r: &Report) -> Vec<u64> {
    let Some(c) = &r.crash else { return Vec::new() };
    c.instruction.iter().map(|i| i.address.0).chain(c.address.map(|a| a.0)).chain(c.origin.iter().map(|o| o.ip.0)).collect()
}

/// `frames` as lines, each run of at least [`MIN_RUN`] foldable frames of one module as one.
pub(crate) fn fold<'a>(frames: &'a [FrameReport], keep: &[u64]) -> Vec<Line<'a>> {
    let foldable = |i: usize| -> Option<&'a str> {
        let f = &frames[i];
        let after_signal = i > 0 && frames[i - 1].signal_frame;
        let plain = i > 0 && !after_signal && !f.managed && !f.signal_frame && f.transition.is_none() && f.function.is_none() && f.trust != Trust::Scan;
        if plain && !keep.contains(&f.ip.0) { f.module.as_deref() } else { None }
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < frames.len() {
        if let Some(module) = foldable(i) {
            let mut end = i + 1;
            while end < frames.len() && foldable(end) == Some(module) {
                end += 1;
            }
            if end - i >= MIN_RUN {
                out.push(Line::Run { module, frames: &frames[i..end] });
                i = end;
                continue;
            }
        }
        out.push(Line::Frame(&frames[i]));
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hex::Hex;

    fn frame(index: usize, ip: u64, function: Option<&str>, module: &str) -> FrameReport {
        FrameReport {
            index,
            ip: Hex(ip),
            function: function.map(str::to_string),
            function_offset: None,
            module: Some(module.to_string()),
            file: None,
            line: None,
            inlined: false,
            tail_call: false,
            signal_frame: false,
            trust: if index == 0 { Trust::Context } else { Trust::Cfi },
            managed: false,
            signature: None,
            transition: None,
            no_symbols: true,
        }
    }

    fn shape(lines: &[Line]) -> Vec<String> {
        lines
            .iter()
            .map(|l| match l {
                Line::Frame(f) => format!("#{}", f.index),
                Line::Run { module, frames } => format!("{}x{module}", frames.len()),
            })
            .collect()
    }

    #[test]
    fn runs_of_one_module_fold_and_what_a_person_needs_stays() {
        let mut s: Vec<FrameReport> = (0..8).map(|i| frame(i, 0x1000 + i as u64, None, "libcoreclr.so")).collect();
        s[4].module = Some("libother.so".into());
        s[6].function = Some("known".into());
        // Frame #0 stays alone (where the thread is); 1-3 fold; one frame of another module and
        // a named one stay; a single unnamed frame is not a run.
        assert_eq!(shape(&fold(&s, &[])), ["#0", "3xlibcoreclr.so", "#4", "#5", "#6", "#7"]);
        // A crash address splits a run.
        assert_eq!(shape(&fold(&s, &[0x1002])), ["#0", "#1", "#2", "#3", "#4", "#5", "#6", "#7"]);
        // The frame a signal interrupted, and a scanned one, stay.
        s[1].signal_frame = true;
        s[3].trust = Trust::Scan;
        assert_eq!(shape(&fold(&s, &[])), ["#0", "#1", "#2", "#3", "#4", "#5", "#6", "#7"]);
        // Managed frames and transitions never fold.
        let mut m: Vec<FrameReport> = (0..4).map(|i| frame(i, 0x2000 + i as u64, None, "x.dll")).collect();
        m[1].managed = true;
        m[2].managed = true;
        assert_eq!(shape(&fold(&m, &[])), ["#0", "#1", "#2", "#3"]);
    }
}
