//! The report for people: a header, then each thread's stack, one frame a line
//! (`#3  0x00007f…  ___pthread_mutex_lock (pthread_mutex_lock.c:93) [libc.so.6]`).

use super::model::{FrameReport, Group, Report, ThreadReport, Verdict};
use crate::waits::{LockFact, Owner};
use std::collections::BTreeSet;
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
    summary(&mut out, report);
    let mut shown: BTreeSet<u32> = BTreeSet::new();
    for lock in report.locks.iter().filter(|l| !l.waiter_tids.is_empty()) {
        out.push('\n');
        lock_section(&mut out, report, lock, opts, &mut shown);
    }
    let rest: Vec<&Group> = report.groups.iter().filter(|g| g.tids.iter().any(|t| !shown.contains(t))).collect();
    if !rest.is_empty() {
        let _ = writeln!(out, "\n== {} ==", if shown.is_empty() { "Threads" } else { "Other threads" });
        for g in rest {
            let tids: Vec<u32> = g.tids.iter().copied().filter(|t| !shown.contains(t)).collect();
            group(&mut out, report, &tids, &g.frames, opts.max_frames);
        }
    }
    warnings(&mut out, report);
    out
}

fn thread_by_tid(report: &Report, tid: u32) -> Option<&ThreadReport> {
    report.threads.iter().find(|t| t.tid == tid)
}

fn summary(out: &mut String, r: &Report) {
    let blocked = r.threads.iter().filter(|t| t.blocked_on.is_some()).count();
    let _ = write!(out, "\nVerdict: {}", r.verdict.as_str().to_uppercase());
    match r.verdict {
        Verdict::Deadlock => {
            let n: usize = r.deadlocks.iter().map(|d| d.tids.len()).sum();
            let _ = write!(out, " — {n} threads in {} cycle{}", r.deadlocks.len(), plural(r.deadlocks.len()));
        }
        _ => {}
    }
    let contended = r.locks.iter().filter(|l| !l.waiter_tids.is_empty()).count();
    let _ = writeln!(out, "; {blocked} of {} threads blocked on {contended} lock{}", r.threads.len(), plural(contended));
    for d in &r.deadlocks {
        let _ = writeln!(out, "  cycle{}: {}", if d.inferred { " (through an inferred owner)" } else { "" }, d.description);
    }
    for l in r.locks.iter().filter(|l| !l.waiter_tids.is_empty()).take(5) {
        let _ = writeln!(out, "  {} waiter{} on {} — {}", l.waiter_tids.len(), plural(l.waiter_tids.len()), l.display_name(), owner_words(l));
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn owner_words(l: &LockFact) -> String {
    match &l.owner {
        Owner::Known { tid } if l.kind == "join" => format!("thread {tid} has not exited"),
        Owner::Exited { tid } if l.kind == "join" => format!("thread {tid} is gone but was never reaped"),
        Owner::Known { tid } => format!("held by thread {tid}"),
        Owner::Inferred { tid, .. } => format!("probably held by thread {tid} (inferred)"),
        Owner::Exited { tid } => format!("held by thread {tid}, which has exited"),
        Owner::Readers { count } => format!("held by {count} reader{}", plural(*count as usize)),
        Owner::None => "no owner (waiting to be signalled)".to_string(),
        Owner::Unknown { why } => format!("owner unknown: {why}"),
    }
}

fn lock_section(out: &mut String, r: &Report, l: &LockFact, opts: &TextOptions, shown: &mut BTreeSet<u32>) {
    let _ = write!(out, "== {} — {}", l.display_name(), l.label);
    if let Some(a) = l.address {
        let _ = write!(out, " at {a}");
    }
    let _ = writeln!(out, " — {} ==", owner_words(l));
    if let Some(n) = l.recursion {
        let _ = writeln!(out, "   held {n} time{} (recursive)", plural(n as usize));
    }
    if let Owner::Inferred { evidence, .. } = &l.owner {
        let _ = writeln!(out, "   inferred: {evidence}");
    }
    // The owner first, and whole: the call holding the lock is the answer.
    if let Some(owner) = l.owner.tid().and_then(|t| thread_by_tid(r, t)) {
        let _ = write!(out, "Owner: ");
        thread(out, owner, &r.locks, None);
        shown.insert(owner.tid);
    }
    let waiters: Vec<&ThreadReport> = l.waiter_tids.iter().filter_map(|&t| thread_by_tid(r, t)).collect();
    let _ = writeln!(out, "Waiters: {} thread{}", waiters.len(), plural(waiters.len()));
    for g in r.groups.iter() {
        let tids: Vec<u32> = g.tids.iter().copied().filter(|t| l.waiter_tids.contains(t)).collect();
        if tids.is_empty() {
            continue;
        }
        let already: Vec<u32> = tids.iter().copied().filter(|t| shown.contains(t)).collect();
        let fresh: Vec<u32> = tids.iter().copied().filter(|t| !shown.contains(t)).collect();
        for t in already {
            let _ = writeln!(out, "  thread {t} (stack shown above)");
        }
        if !fresh.is_empty() {
            group(out, r, &fresh, &g.frames, opts.max_frames);
            shown.extend(fresh);
        }
    }
}

fn group(out: &mut String, r: &Report, tids: &[u32], frames_: &[FrameReport], max_frames: Option<usize>) {
    let state = tids.first().and_then(|&t| thread_by_tid(r, t)).map(|t| state_words(t, &r.locks)).unwrap_or_default();
    let list: Vec<String> = tids.iter().map(|t| t.to_string()).collect();
    let _ = writeln!(out, "  {} thread{} ({state}): {}", tids.len(), plural(tids.len()), list.join(", "));
    frames(out, frames_, max_frames);
}

/// `blocked on lock_a (futex wait on 0x…)`, or the bare state.
fn state_words(t: &ThreadReport, locks: &[LockFact]) -> String {
    match t.blocked_on.as_deref().and_then(|id| locks.iter().find(|l| l.id == id)) {
        Some(l) => format!("blocked on {} ({})", l.display_name(), t.state.label()),
        None => t.state.label(),
    }
}

fn warnings(out: &mut String, report: &Report) {
    let warnings: Vec<_> = report.diagnostics.iter().filter(|d| d.severity == crate::Severity::Warning).collect();
    if !warnings.is_empty() {
        let _ = writeln!(out, "\n{} warning{}:", warnings.len(), plural(warnings.len()));
        for d in warnings {
            let _ = write!(out, "  [{}] {}", d.stage, d.message);
            if let Some(o) = d.offset {
                let _ = write!(out, " (file offset {o:#x})");
            }
            out.push('\n');
        }
    }
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

pub fn thread(out: &mut String, t: &ThreadReport, locks: &[LockFact], max_frames: Option<usize>) {
    let _ = write!(out, "Thread {}", t.tid);
    if let Some(name) = &t.name {
        let _ = write!(out, " \"{name}\"");
    }
    if t.signalled {
        out.push_str(" (signalled)");
    }
    let _ = writeln!(out, " — {}", state_words(t, locks));
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
