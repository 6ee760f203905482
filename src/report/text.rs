//! The report for people: a header, then each thread's stack, one frame a line
//! (`#3  0x00007f…  ___pthread_mutex_lock (pthread_mutex_lock.c:93) [libc.so.6]`).

use super::model::{FrameReport, Group, Report, ThreadReport, Verdict};
use super::words::{lock_name, owner_words, plural, role_lines, state_words};
use crate::waits::{LockFact, LockKind, Owner};
use std::collections::BTreeSet;
use crate::unwind::Trust;
use std::fmt::Write;

#[derive(Debug, Clone, Default)]
pub struct TextOptions {
    /// Show at most this many frames per stack (the rest are counted, not shown).
    pub max_frames: Option<usize>,
}

/// ANSI colours for a terminal (the verdict, lock names, owners). Without them the text is
/// exactly [`render`]'s: colour only wraps words in escape codes.
#[derive(Debug, Clone, Copy, Default)]
struct Paint {
    on: bool,
}

impl Paint {
    fn paint(self, code: &str, s: &str) -> String {
        if self.on { format!("\x1b[{code}m{s}\x1b[0m") } else { s.to_string() }
    }

    fn verdict(self, v: Verdict, s: &str) -> String {
        let code = match v {
            Verdict::Deadlock | Verdict::Crash | Verdict::Abandoned => "1;31",
            Verdict::GcStall | Verdict::Contention | Verdict::ThreadPoolStarved | Verdict::BlockedOnIo => "1;33",
            Verdict::Idle => "1;36",
            Verdict::NothingBlocked => "1;32",
            Verdict::NotAnalyzed => "1",
        };
        self.paint(code, s)
    }

    fn cycle(self, s: &str) -> String {
        self.paint("31", s)
    }

    fn lock(self, s: &str) -> String {
        self.paint("1;35", s)
    }

    fn owner(self, s: &str) -> String {
        self.paint("1;33", s)
    }
}

pub fn render(report: &Report, opts: &TextOptions) -> String {
    render_colored(report, opts, false)
}

/// [`render`], with ANSI colours when `color` is true (for a terminal).
pub fn render_colored(report: &Report, opts: &TextOptions, color: bool) -> String {
    let paint = Paint { on: color };
    let mut out = String::new();
    header(&mut out, report);
    // Why it died comes first; when the heap is the story, its suspects say why next.
    if let Some(c) = &report.crash {
        super::crash_text::lines(&mut out, report, c);
    }
    super::gc_text::suspects_at(&mut out, report, super::gc_text::SuspectPlace::First);
    summary(&mut out, report, paint);
    super::gc_text::suspects_at(&mut out, report, super::gc_text::SuspectPlace::AfterVerdict);
    let mut shown: BTreeSet<u32> = BTreeSet::new();
    // The crashed thread's stack comes first, whole.
    if let Some(c) = &report.crash {
        let state = c.thread.and_then(|t| thread_by_tid(report, t)).map(|t| state_words(t, &report.locks)).unwrap_or_default();
        shown.extend(super::crash_text::crashed_thread(&mut out, report, c, &state));
    }
    for lock in report.locks.iter().filter(|l| !l.waiter_tids.is_empty()) {
        out.push('\n');
        lock_section(&mut out, report, lock, opts, &mut shown, paint);
    }
    let rest: Vec<&Group> = report.groups.iter().filter(|g| g.tids.iter().any(|t| !shown.contains(t))).collect();
    if !rest.is_empty() {
        let _ = writeln!(out, "\n== {} ==", if shown.is_empty() { "Threads" } else { "Other threads" });
        for g in rest {
            let tids: Vec<u32> = g.tids.iter().copied().filter(|t| !shown.contains(t)).collect();
            group(&mut out, report, &tids, &g.frames, opts.max_frames);
        }
    }
    if let Some(d) = report.dotnet.as_ref() {
        super::async_text::section(&mut out, d, opts.max_frames);
    }
    warnings(&mut out, report);
    out
}

fn thread_by_tid(report: &Report, tid: u32) -> Option<&ThreadReport> {
    report.threads.iter().find(|t| t.tid == tid)
}

fn summary(out: &mut String, r: &Report, paint: Paint) {
    let blocked = r.threads.iter().filter(|t| t.blocked_on.is_some()).count();
    if r.verdict == Verdict::NotAnalyzed {
        let _ = writeln!(out, "\nNo verdict: locks and waits were not analysed (--stacks-only)");
        return;
    }
    let _ = write!(out, "\nVerdict: {}", paint.verdict(r.verdict, &super::words::verdict(r.verdict).to_uppercase()));
    if !r.verdict_limits.is_empty() {
        let short: Vec<&str> = r.verdict_limits.iter().map(|l| l.short.as_str()).collect();
        let _ = write!(out, " (limited by {} missing)", short.join(" and "));
    }
    match r.verdict {
        Verdict::Deadlock | Verdict::ThreadPoolStarved => match super::words::pool_verdict(r) {
            // Through the pool, or starved: which workers wait for what, in the service's words, first.
            Some(pool) => out.push_str(&pool.line),
            None if r.verdict == Verdict::Deadlock => {
                let n: usize = r.deadlocks.iter().map(|d| d.tids.len()).sum();
                let _ = write!(out, " — {n} thread{} in {} cycle{}", plural(n), r.deadlocks.len(), plural(r.deadlocks.len()));
            }
            None => {}
        },
        Verdict::GcStall => {
            if let Some(gc) = r.dotnet.as_ref().and_then(|d| d.gc.as_ref()) {
                out.push_str(&super::gc_text::stall_words(r, gc));
            }
        }
        Verdict::Abandoned => {
            let _ = write!(out, " — {}", super::words::abandoned(&r.locks));
        }
        _ => {}
    }
    let contended = r.locks.iter().filter(|l| !l.waiter_tids.is_empty()).count();
    let _ = writeln!(out, "; {blocked} of {} threads blocked on {contended} lock{}", r.threads.len(), plural(contended));
    if let Some(cause) = super::words::pool_verdict(r).and_then(|p| p.cause) {
        let _ = writeln!(out, "  cause: {cause}");
    }
    for l in &r.verdict_limits {
        let _ = writeln!(out, "  limited by {}: {}; fix: {}", l.missing, l.hides, l.fix);
    }
    for d in &r.deadlocks {
        let cycle = format!("cycle{}:", if d.inferred { " (through an inferred owner)" } else { "" });
        let _ = writeln!(out, "  {} {}", paint.cycle(&cycle), d.description);
    }
    if let Some(tp) = r.dotnet.as_ref().and_then(|d| d.thread_pool.as_ref()) {
        let _ = write!(out, "  thread pool: {} worker{}, {} blocked inside work items", tp.workers_total, plural(tp.workers_total as usize), tp.workers_blocked.len());
        match (tp.workers_running, tp.workers_idle) {
            (Some(run), Some(idle)) => {
                let _ = write!(out, "; {run} running, {idle} idle");
                if let (Some(min), Some(max)) = (tp.min_workers, tp.max_workers) {
                    let _ = write!(out, " (min {min}, max {max})");
                }
            }
            _ => out.push_str("; running/idle workers not read"),
        }
        match tp.queued_work_items {
            Some(q) => {
                let local: u32 = tp.local_queues.iter().map(|l| l.work_items).sum();
                let _ = write!(out, "; {q} queued work item{}", plural(q as usize));
                if q > 0 {
                    match tp.high_priority_queue.filter(|&h| h > 0) {
                        // The high-priority queue (a TimerQueue the timer thread queued, …) said as such.
                        Some(h) => {
                            let _ = write!(out, " ({} global, {h} high-priority, {local} in workers' local queues", tp.global_queue.unwrap_or(0));
                        }
                        None => {
                            let _ = write!(out, " ({} global, {local} in workers' local queues", tp.global_queue.unwrap_or(0));
                        }
                    }
                    let owned: Vec<String> = tp
                        .local_queues
                        .iter()
                        .filter(|l| l.work_items > 0)
                        .map(|l| format!("{} on {}", l.work_items, l.worker_tid.map_or("an unknown thread".to_string(), |t| format!("thread {t}"))))
                        .collect();
                    if !owned.is_empty() {
                        let _ = write!(out, ": {}", owned.join(", "));
                    }
                    out.push(')');
                }
            }
            None => out.push_str("; queued work items not read"),
        }
        out.push('\n');
        if !tp.work_item_types.is_empty() {
            let top: Vec<String> = tp.work_item_types.iter().take(3).map(|t| format!("{} {}", t.count, t.name)).collect();
            let more = tp.work_item_types.len().saturating_sub(3);
            let _ = writeln!(out, "    queued: {}{}", top.join(", "), if more > 0 { format!(", and {more} more type{}", plural(more)) } else { String::new() });
            if !tp.high_priority_work_items.is_empty() {
                let high: Vec<String> = tp.high_priority_work_items.iter().map(|t| format!("{} {}", t.count, t.name)).collect();
                let _ = writeln!(out, "    in the high-priority queue: {}", high.join(", "));
            }
        }
        if tp.workers_running.is_none() || tp.queued_work_items.is_none() {
            for why in &tp.unavailable {
                let _ = writeln!(out, "    not read: {why}");
            }
        }
    }
    if let Some(d) = r.dotnet.as_ref() {
        super::gc_text::summary_lines(out, r, d);
        super::async_text::summary_line(out, d);
    }
    for l in r.locks.iter().filter(|l| !l.waiter_tids.is_empty()).take(5) {
        let _ = writeln!(out, "  {} waiter{} on {} — {}", l.waiter_tids.len(), plural(l.waiter_tids.len()), paint.lock(&lock_name(l)), paint.owner(&owner_words(l)));
        // What stopped working, in the service's own words (the waiters' roles).
        for line in role_lines(l, &r.threads) {
            let _ = writeln!(out, "  {line}");
        }
    }
    if let Some(s) = &r.verdict_signature {
        let _ = writeln!(out, "  signature: {s}");
    }
}

fn lock_section(out: &mut String, r: &Report, l: &LockFact, opts: &TextOptions, shown: &mut BTreeSet<u32>, paint: Paint) {
    if l.managed.is_some() {
        // `23 threads wait for monitor on System.Object at 0x… (held by thread 19133 (RootBuilder))`
        let n = l.waiter_tids.len();
        let verb = if l.kind == LockKind::MonitorWait { if n == 1 { "is in" } else { "are in" } } else if n == 1 { "waits for" } else { "wait for" };
        let _ = writeln!(out, "== {n} thread{} {verb} {} ({}) ==", plural(n), paint.lock(&lock_name(l)), paint.owner(&owner_words(l)));
        let _ = writeln!(out, "   {}", super::words::lock_detail(l));
    } else {
        let _ = write!(out, "== {} — {}", paint.lock(&lock_name(l)), l.label);
        if let Some(a) = l.address {
            let _ = write!(out, " at {a}");
        }
        let _ = writeln!(out, " — {} ==", paint.owner(&owner_words(l)));
    }
    // A Monitor's recursion is in its label; a native mutex says so only when recursive.
    if let Some(n) = l.recursion.filter(|_| l.managed.is_none()) {
        let _ = writeln!(out, "   held {n} time{} (recursive)", plural(n as usize));
    }
    if let Owner::Inferred { evidence, .. } = &l.owner {
        let _ = writeln!(out, "   inferred: {evidence}");
    }
    // The owner first, and whole: the call holding the lock is the answer.
    // The crashed thread's stack was shown first, whole; other owners are shown whole each time.
    let crashed = r.crash.as_ref().filter(|c| c.kind != crate::crash::CrashKind::Killed).and_then(|c| c.thread);
    if let Some(owner) = l.owner.tid().filter(|&t| Some(t) == crashed) {
        let _ = writeln!(out, "Owner: thread {owner} (crashed; stack shown above)");
    } else if let Some(owner) = l.owner.tid().and_then(|t| thread_by_tid(r, t)) {
        let _ = write!(out, "Owner: ");
        thread_painted(out, owner, &r.locks, None, Some(&super::fold::crash_addresses(r)), |s| paint.owner(s));
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
    let roles = super::words::group_role_words(tids.iter().filter_map(|&t| thread_by_tid(r, t))).map(|w| format!(" [{w}]")).unwrap_or_default();
    let _ = writeln!(out, "  {} thread{} ({state}){roles}: {}", tids.len(), plural(tids.len()), list.join(", "));
    frames(out, frames_, max_frames);
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
        if sig.source == crate::core::siginfo::SignalSource::Prstatus {
            out.push_str(" (from pr_cursig: code and address unknown)");
        }
    }
    let (threads, modules) = (r.threads.len(), r.modules.len());
    let _ = writeln!(
        out,
        "; {threads} thread{}, {modules} module{}{}",
        plural(threads),
        plural(modules),
        if d.partial { " (partial: see warnings)" } else { "" }
    );
    if let Some(l) = &r.live {
        let _ = writeln!(out, "Live: process {} was stopped for {:.1} ms to copy {} threads and {} KiB of memory", l.pid, l.pause_ms, l.threads, l.bytes_copied / 1024);
    }
}

pub fn thread(out: &mut String, t: &ThreadReport, locks: &[LockFact], max_frames: Option<usize>) {
    thread_painted(out, t, locks, max_frames, None, str::to_string)
}

/// A thread's title line and stack; with `fold`, runs of unsymbolized frames of one module are
/// one line each (`report::fold`; `fold` holds the addresses no run may hide).
fn thread_painted(out: &mut String, t: &ThreadReport, locks: &[LockFact], max_frames: Option<usize>, fold: Option<&[u64]>, title: impl Fn(&str) -> String) {
    let _ = write!(out, "{}", title(&format!("Thread {}", t.tid)));
    if let Some(own) = super::words::own_tid_words(t) {
        let _ = write!(out, " ({own})");
    }
    if let Some(name) = &t.name {
        let _ = write!(out, " \"{name}\"");
    }
    if let Some(role) = super::words::role_words(t) {
        let _ = write!(out, " [{role}]");
    }
    if t.signalled {
        out.push_str(" (signalled)");
    }
    let _ = writeln!(out, " — {}", state_words(t, locks));
    match fold {
        Some(keep) => folded_frames(out, &t.frames, keep),
        None => frames(out, &t.frames, max_frames),
    }
    if !t.stack_end.complete {
        let _ = writeln!(out, "    (stack incomplete: {})", t.stack_end.detail);
    }
}

pub(crate) fn frames(out: &mut String, frames: &[FrameReport], max_frames: Option<usize>) {
    let shown = max_frames.unwrap_or(usize::MAX).min(frames.len());
    for f in &frames[..shown] {
        frame(out, f);
    }
    if shown < frames.len() {
        let _ = writeln!(out, "    ... {} more frames", frames.len() - shown);
    }
}

/// Every frame, a run of unsymbolized frames of one module as one line: `#4-#13  10 frames in
/// libcoreclr.so, no symbols (0x… … 0x…)`.
fn folded_frames(out: &mut String, frames: &[FrameReport], keep: &[u64]) {
    for line in super::fold::fold(frames, keep) {
        match line {
            super::fold::Line::Frame(f) => frame(out, f),
            super::fold::Line::Run { module, frames } => {
                let (first, last) = (&frames[0], &frames[frames.len() - 1]);
                let span = format!("#{}-#{}", first.index, last.index);
                let _ = writeln!(out, "  {span:<4} {:#018x}  {} (… {:#018x})", first.ip.0, super::words::folded_frames(frames.len(), module), last.ip.0);
            }
        }
    }
}

fn frame(out: &mut String, f: &FrameReport) {
    let _ = write!(out, "  #{:<3} {:#018x}  ", f.index, f.ip.0);
    if let Some(t) = &f.transition {
        let _ = writeln!(out, "[{}: {:#x}]", t.kind, t.address.0);
        return;
    }
    if f.managed {
        // As SOS's clrstack: `Namespace.Type.Method(Signature) + 0xoff [Assembly.dll]`.
        out.push_str(f.function.as_deref().unwrap_or("??"));
        out.push_str(f.signature.as_deref().unwrap_or(""));
        if let Some(off) = f.function_offset {
            let _ = write!(out, " + {off}");
        }
    } else if f.signal_frame {
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
    if f.no_symbols {
        out.push_str(" (no symbols)");
    }
    if f.inlined {
        out.push_str(" (inlined)");
    }
    if f.tail_call {
        out.push_str(" (tail call)");
    }
    match f.trust {
        Trust::Scan => out.push_str(" (found by stack scan)"),
        Trust::FramePointer => out.push_str(" (found by frame pointer)"),
        Trust::TransitionFrame => out.push_str(" (resumed at a runtime transition frame)"),
        _ => {}
    }
    out.push('\n');
}
