//! A stable key for a crash, Socorro-style: the kind, the signal (and exception type), then the
//! origin frame and a few of its callers — names normalised, never addresses or thread ids; a
//! frame without a symbol is its module's build-id and the offset in it.

use super::machinery::{normalize, Machinery};
use super::model::{CrashKind, Recursion};
use crate::process::Process;
use crate::threads::FrameReport;

/// `kind` as the signature spells it (the JSON spelling).
fn kind_key(kind: CrashKind) -> &'static str {
    match kind {
        CrashKind::Fault => "fault",
        CrashKind::StackOverflow => "stack_overflow",
        CrashKind::Abort => "abort",
        CrashKind::Failfast => "failfast",
        CrashKind::UnhandledException => "unhandled_exception",
        CrashKind::Killed => "killed",
    }
}

/// A frame's part of the signature.
pub(crate) fn frame_key(process: &Process, f: &FrameReport) -> String {
    if let Some(name) = &f.function {
        return normalize(name);
    }
    match process.module_at(f.ip.0) {
        Some((_, m)) => {
            let offset = f.ip.0.wrapping_sub(m.start);
            match m.build_id_hex() {
                Some(id) => format!("{}[{id}]+{offset:#x}", m.name()),
                None => format!("{}+{offset:#x}", m.name()),
            }
        }
        None => "??".to_string(),
    }
}

/// What the signature is built from.
pub(crate) struct SignatureInput<'a> {
    pub(crate) kind: CrashKind,
    /// The signal's name, when there is one.
    pub(crate) signal: Option<&'a str>,
    /// The exception's type, when one is known.
    pub(crate) exception: Option<&'a str>,
    pub(crate) frames: &'a [FrameReport],
    /// Index of the first frame past the machinery, and of the origin.
    pub(crate) past_machinery: usize,
    pub(crate) origin: Option<usize>,
    pub(crate) recursion: Option<&'a Recursion>,
    /// The thread returned to an overwritten return address: no frame says where.
    pub(crate) overwritten_return: bool,
}

pub(crate) fn build(process: &Process, m: &Machinery, input: &SignatureInput<'_>) -> String {
    let mut head = kind_key(input.kind).to_string();
    for part in [input.signal, input.exception].into_iter().flatten() {
        head.push(':');
        head.push_str(part);
    }
    let mut parts = vec![head];
    if let Some(r) = input.recursion.filter(|_| input.kind == CrashKind::StackOverflow) {
        // Where in the cycle the stack ran out varies from run to run: the cycle, from its
        // smallest name, says which recursion it was; the frame below it, who started it.
        let turn = r.cycle.iter().map(|n| normalize(n)).collect::<Vec<_>>();
        let first = turn.iter().enumerate().min_by(|a, b| a.1.cmp(b.1)).map_or(0, |(i, _)| i);
        parts.extend(turn[first..].iter().chain(&turn[..first]).cloned());
        if let Some(below) = input.frames.get(r.first_frame + r.frames) {
            parts.push(frame_key(process, below));
        }
        return parts.join(" | ");
    }
    if input.overwritten_return {
        parts.push("overwritten_return".to_string());
        return parts.join(" | ");
    }
    if let Some(origin) = input.origin {
        let start = input.past_machinery.min(origin);
        for f in &input.frames[start..origin] {
            let key = frame_key(process, f);
            if m.is_signature_prefix(&key) {
                parts.push(key);
            }
        }
        for (i, f) in input.frames[origin..].iter().filter(|f| f.transition.is_none() && !f.signal_frame).take(m.signature.frames).enumerate() {
            let key = frame_key(process, f);
            // The program's callers only: a library frame below the origin is how the thread
            // was started (libc, the .NET runtime's call descriptors).
            let library = f.module.as_deref().is_some_and(|name| m.is_library(name));
            if m.is_stop(&key) || (i > 0 && library) {
                break;
            }
            parts.push(key);
        }
    }
    parts.join(" | ")
}
