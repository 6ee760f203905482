//! The report for people: a header, then each thread's stack, one frame a line
//! (`#3  0x00007f…  ___pthread_mutex_lock (pthread_mutex_lock.c:93) [libc.so.6]`).

use super::model::{FrameReport, Report, ThreadReport};
use crate::unwind::Trust;
use std::fmt::Write;

#[derive(Debug, Clone, Default)]
pub struct TextOptions {
    /// Show at most this many frames per stack (the rest are counted, not shown).
    pub max_frames: Option<usize>,
}

pub fn render(report: &Report, opts: &TextOptions) -> String {
    let mut out = String::new();
    header(&mut out, report);
    for t in &report.threads {
        out.push('\n');
        thread(&mut out, t, opts.max_frames);
    }
    let warnings: Vec<_> = report.diagnostics.iter().filter(|d| d.severity == crate::Severity::Warning).collect();
    if !warnings.is_empty() {
        let _ = writeln!(out, "\n{} warning{}:", warnings.len(), if warnings.len() == 1 { "" } else { "s" });
        for d in warnings {
            let _ = write!(out, "  [{}] {}", d.stage, d.message);
            if let Some(o) = d.offset {
                let _ = write!(out, " (file offset {o:#x})");
            }
            out.push('\n');
        }
    }
    out
}

fn header(out: &mut String, r: &Report) {
    let d = &r.dump;
    let _ = write!(out, "{}", d.path);
    if let Some(pid) = d.pid {
        let _ = write!(out, ": pid {pid}");
    }
    if let Some(cmd) = d.command_line.as_deref().filter(|c| !c.is_empty()) {
        let _ = write!(out, " `{cmd}`");
    }
    if let Some(sig) = &d.signal {
        let _ = write!(out, ", {}", sig.name);
        if let Some(a) = sig.fault_address {
            let _ = write!(out, " at {a}");
        }
    }
    let _ = writeln!(out, "; {} threads, {} modules{}", r.threads.len(), r.modules.len(), if d.partial { " (partial: see warnings)" } else { "" });
}

pub fn thread(out: &mut String, t: &ThreadReport, max_frames: Option<usize>) {
    let _ = write!(out, "Thread {}", t.tid);
    if let Some(name) = &t.name {
        let _ = write!(out, " \"{name}\"");
    }
    if t.signalled {
        out.push_str(" (signalled)");
    }
    out.push('\n');
    frames(out, &t.frames, max_frames);
    if !t.stack_end.complete {
        let _ = writeln!(out, "    (stack incomplete: {})", t.stack_end.detail);
    }
}

pub fn frames(out: &mut String, frames: &[FrameReport], max_frames: Option<usize>) {
    let shown = max_frames.unwrap_or(usize::MAX).min(frames.len());
    for f in &frames[..shown] {
        frame(out, f);
    }
    if shown < frames.len() {
        let _ = writeln!(out, "    ... {} more frames", frames.len() - shown);
    }
}

fn frame(out: &mut String, f: &FrameReport) {
    let _ = write!(out, "  #{:<3} {:#018x}  ", f.index, f.ip.0);
    if f.signal_frame {
        out.push_str("<signal handler called>");
    } else {
        out.push_str(f.function.as_deref().unwrap_or("??"));
        match (&f.file, f.line) {
            (Some(file), Some(line)) => {
                let base = file.rsplit('/').next().unwrap_or(file);
                let _ = write!(out, " ({base}:{line})");
            }
            _ => {
                if let (Some(off), Some(_)) = (f.function_offset, &f.function) {
                    let _ = write!(out, "+{off}");
                }
            }
        }
    }
    if let Some(m) = &f.module {
        let _ = write!(out, " [{m}]");
    }
    if f.inlined {
        out.push_str(" (inlined)");
    }
    match f.trust {
        Trust::Scan => out.push_str(" (found by stack scan)"),
        Trust::FramePointer => out.push_str(" (found by frame pointer)"),
        _ => {}
    }
    out.push('\n');
}
