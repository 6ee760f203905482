//! The .NET async stacks in the text report: one line in the summary (how many stacks hold no
//! thread, in how many groups), and a section with each group of identical stacks once, as SOS
//! `dumpasync` indents them (innermost first, continuations one level deeper).

use super::words::plural;
use crate::runtimes::dotnet::DotnetReport;
use crate::runtimes::dotnet::report::{AsyncFrameReport, AsyncGroupReport};
use std::fmt::Write;

/// Groups shown in the text; the rest are counted.
pub(crate) const GROUPS_SHOWN: usize = 20;

/// `  async: 5 stacks in 3 groups (23 tasks pending)`: nothing when there are none.
pub(crate) fn summary_line(out: &mut String, d: &DotnetReport) {
    let Some(a) = &d.async_tasks else { return };
    let n = d.async_stacks.len();
    if n == 0 {
        return;
    }
    let _ = write!(out, "  async: {n} async stack{} that hold no thread, in {} group{} ({} task{} pending)", plural(n), d.async_groups.len(), plural(d.async_groups.len()), a.pending_tasks, plural(a.pending_tasks));
    if !a.cut.is_empty() {
        let _ = write!(out, "; cut: {}", a.cut.join("; "));
    }
    out.push('\n');
}

/// `== Async stacks ==`, each group once.
pub(crate) fn section(out: &mut String, d: &DotnetReport, max_frames: Option<usize>) {
    if d.async_stacks.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n== Async stacks ({} in {} group{}; SOS dumpasync) ==", d.async_stacks.len(), d.async_groups.len(), plural(d.async_groups.len()));
    for g in d.async_groups.iter().take(GROUPS_SHOWN) {
        let _ = writeln!(out, "  {}", group_title(d, g));
        frames(out, &g.frames, max_frames);
    }
    if d.async_groups.len() > GROUPS_SHOWN {
        let _ = writeln!(out, "  … {} more group{} (see the JSON's dotnet.async_groups)", d.async_groups.len() - GROUPS_SHOWN, plural(d.async_groups.len() - GROUPS_SHOWN));
    }
}

/// `3 × awaiting System.Runtime.CompilerServices.TaskAwaiter<System.Int32> (first at 0x…)`.
pub(crate) fn group_title(d: &DotnetReport, g: &AsyncGroupReport) -> String {
    let first = g.stacks.first().and_then(|&i| d.async_stacks.get(i));
    let head = match (&g.awaiting, first.and_then(|s| s.awaiting.as_ref())) {
        (Some(t), Some(a)) => format!("awaiting {t} (at {})", a.address),
        _ => match g.frames.first() {
            Some(f) => format!("innermost {} at {}", f.type_name, f.address),
            None => "empty".into(),
        },
    };
    let cut = first.and_then(|s| s.cut.as_deref()).map(|c| format!("; cut: {c}")).unwrap_or_default();
    format!("{} × {head}{cut}", g.stacks.len())
}

/// A frame as SOS prints it, without its addresses: `(0) App.Program+<LoadAsync>d__4`.
pub(crate) fn frame_words(f: &AsyncFrameReport) -> String {
    format!("({}) {}", f.state, f.type_name)
}

fn frames(out: &mut String, frames: &[AsyncFrameReport], max_frames: Option<usize>) {
    let limit = max_frames.unwrap_or(usize::MAX);
    for f in frames.iter().take(limit) {
        let _ = writeln!(out, "      {}{}", "  ".repeat(f.depth.min(64) as usize), frame_words(f));
    }
    if frames.len() > limit {
        let _ = writeln!(out, "      … {} more frame{}", frames.len() - limit, plural(frames.len() - limit));
    }
}
