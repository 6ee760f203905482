//! The crash, said first in the text report: the `Crash:` line with its details, and the
//! crashed thread's stack, whole, with a recursion shown as one turn of its cycle and a count.

use super::model::{FrameReport, Report, ThreadReport};
use crate::crash::{Access, CrashKind, CrashReport, OperandReport};
use std::fmt::Write;

/// `rax = 0, offset 0x2c`: the registers that formed the faulting operand.
pub(crate) fn operand_words(op: &OperandReport) -> Option<String> {
    let mut parts = Vec::new();
    for r in [&op.base, &op.index].into_iter().flatten() {
        match r.value {
            Some(v) if v.0 == 0 => parts.push(format!("{} = 0", r.register)),
            Some(v) => parts.push(format!("{} = {:#x}", r.register, v.0)),
            None => parts.push(format!("{} unknown", r.register)),
        }
    }
    if op.scale > 1 {
        parts.push(format!("scale {}", op.scale));
    }
    if op.displacement != 0 {
        let d = op.displacement;
        parts.push(if d < 0 { format!("offset -{:#x}", d.unsigned_abs()) } else { format!("offset {d:#x}") });
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// `thread 123 "name" (main thread)`.
pub(crate) fn thread_words(r: &Report, tid: u32) -> String {
    let mut s = format!("thread {tid}");
    if let Some(name) = r.threads.iter().find(|t| t.tid == tid).and_then(|t| t.name.as_deref()) {
        let _ = write!(s, " \"{name}\"");
    }
    if r.dump.pid == Some(tid) {
        s.push_str(" (main thread)");
    }
    s
}

fn frame_place(f: &FrameReport) -> String {
    let mut s = f.function.clone().unwrap_or_else(|| format!("{:#x}", f.ip.0));
    match (&f.file, f.line) {
        (Some(file), Some(line)) => {
            let _ = write!(s, " ({}:{line})", file.rsplit('/').next().unwrap_or(file));
        }
        _ => {
            if let Some(m) = &f.module {
                let _ = write!(s, " [{m}]");
            }
        }
    }
    s
}

/// The `Crash:` line and its details.
pub(crate) fn lines(out: &mut String, r: &Report, c: &CrashReport) {
    let _ = write!(out, "\nCrash: {}", c.kind.as_str());
    if let Some(s) = &c.signal {
        let _ = write!(out, " — {}", s.name);
        if let Some(code) = &s.code_name {
            let _ = write!(out, " ({code})");
        } else if s.source == crate::core::siginfo::SignalSource::Prstatus {
            out.push_str(" (no NT_SIGINFO: code and address unknown)");
        }
        if c.kind == CrashKind::Killed
            && let Some(pid) = s.sender_pid
        {
            let _ = write!(out, " {}", crate::report::words::signal_sender(pid));
        }
    }
    if let Some(tid) = c.thread {
        let _ = write!(out, " on {}", thread_words(r, tid));
    }
    if let Some(a) = c.address {
        // Only a memory fault's address is the one accessed (SIGFPE's and SIGILL's is the PC).
        let memory_fault = c.signal.as_ref().is_some_and(|s| matches!(s.number, 7 | 11));
        let what = match c.instruction.as_ref().and_then(|i| i.access).filter(|_| memory_fault) {
            Some(Access::Read) => "read of ",
            Some(Access::Write) => "write to ",
            Some(Access::Execute) => "execution at ",
            None if c.overwritten_return.is_some() => "execution at ",
            None => "at ",
        };
        let _ = write!(out, " — {what}{a}");
        if let Some(k) = c.address_kind {
            let _ = write!(out, " {}", k.words());
        }
        if let Some(r) = &c.overwritten_return {
            let _ = write!(out, " — {}", crate::report::words::overwritten_return(r));
        }
        if let Some(words) = c.instruction.as_ref().filter(|_| memory_fault).and_then(|i| i.operand.as_ref()).and_then(operand_words) {
            let _ = write!(out, " ({words})");
        }
    }
    match (&c.exception, &c.message) {
        // A FailFast's own words first; the exception it passed (or that the runtime's
        // preallocated ExecutionEngineException wraps) is another thing, with its own message.
        (Some(e), Some(m)) if c.kind == crate::crash::CrashKind::Failfast => {
            let _ = write!(out, " — \"{}\" — {}", m.text, e.type_name);
            if let Some(text) = &e.message {
                let _ = write!(out, ": \"{text}\"");
            }
        }
        (Some(e), m) => {
            let _ = write!(out, " — {}", e.type_name);
            if let Some(text) = e.message.as_deref().or(m.as_ref().filter(|m| m.source != "cxx_exception").map(|m| m.text.as_str())) {
                let _ = write!(out, ": \"{text}\"");
            }
        }
        (None, Some(m)) => {
            let _ = write!(out, " — \"{}\"", m.text);
        }
        (None, None) => {}
    }
    if let Some(rec) = &c.recursion {
        let _ = write!(out, " — {} recursing {} frames deep", rec.cycle.join(" → "), rec.frames);
    }
    if let Some(o) = &c.origin {
        let _ = write!(out, " — in {}", frame_place(o));
    }
    out.push('\n');
    if let Some(i) = &c.instruction {
        let _ = writeln!(out, "  instruction: {:#x}  {}  ({})", i.address.0, i.text, i.bytes);
    }
    if let Some(m) = &c.mapping {
        let _ = write!(out, "  mapping: {}-{} {}", m.start, m.end, m.perms);
        if let Some(f) = m.file.as_deref().or(m.module.as_deref()) {
            let _ = write!(out, " {f}");
        }
        out.push('\n');
    }
    if let Some(e) = &c.exception {
        let mut inner = e.inner.as_deref();
        while let Some(x) = inner {
            let _ = writeln!(out, "  inner: {}{}", x.type_name, x.message.as_deref().map(|m| format!(": \"{m}\"")).unwrap_or_default());
            inner = x.inner.as_deref();
        }
    }
    if let Some(m) = c.message.as_ref().filter(|m| !m.source.is_empty()) {
        let _ = writeln!(out, "  message read from: {}", m.source);
    }
    let _ = writeln!(out, "  signature: {}", c.signature);
}

/// The crashed thread's stack, first and whole; a recursion is one turn of its cycle and a
/// count. Returns the tid shown.
pub(crate) fn crashed_thread(out: &mut String, r: &Report, c: &CrashReport, state: &str) -> Option<u32> {
    if c.kind == CrashKind::Killed {
        return None;
    }
    let t: &ThreadReport = r.threads.iter().find(|t| Some(t.tid) == c.thread)?;
    let _ = writeln!(out, "\n== Crashed thread ==");
    let _ = write!(out, "Thread {}", t.tid);
    if let Some(name) = &t.name {
        let _ = write!(out, " \"{name}\"");
    }
    let _ = writeln!(out, " — {state}");
    match &c.recursion {
        Some(rec) if rec.repeats > 2 => {
            let turn_end = rec.first_frame + rec.cycle.len();
            super::text::frames(out, &t.frames[..turn_end.min(t.frames.len())], None);
            let _ = writeln!(
                out,
                "    ... the {} frame{} above repeat{} {} more times ({} frames in all) ...",
                rec.cycle.len(),
                if rec.cycle.len() == 1 { "" } else { "s" },
                if rec.cycle.len() == 1 { "s" } else { "" },
                rec.repeats - 1,
                rec.frames
            );
            let rest = (rec.first_frame + rec.frames).min(t.frames.len());
            super::text::frames(out, &t.frames[rest..], None);
        }
        _ => super::text::frames(out, &t.frames, None),
    }
    if !t.stack_end.complete {
        let _ = writeln!(out, "    (stack incomplete: {})", t.stack_end.detail);
    }
    Some(t.tid)
}
