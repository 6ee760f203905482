//! A flame graph of every thread's stack (inferno), for the HTML report. Width is the number of
//! threads; the top of each tower is where those threads are, and what they wait for.

use super::model::{FrameReport, Report};
use super::words::lock_name;

/// The folded stacks: `root;outermost;…;innermost;[state] 1`, one line per thread. inferno
/// merges identical lines.
pub(crate) fn folded_lines(report: &Report) -> Vec<String> {
    let root = clean(report.dump.process_name.as_deref().filter(|n| !n.is_empty()).unwrap_or("all threads"));
    report
        .threads
        .iter()
        .map(|t| {
            let mut line = root.clone();
            for f in t.frames.iter().rev() {
                line.push(';');
                line.push_str(&clean(&frame_name(f)));
            }
            let state = match t.blocked_on.as_deref().and_then(|id| report.locks.iter().find(|l| l.id == id)) {
                Some(l) => format!("[blocked on {}]", lock_name(l)),
                None => format!("[{}]", t.state),
            };
            line.push(';');
            line.push_str(&clean(&state));
            line.push_str(" 1");
            line
        })
        .collect()
}

fn frame_name(f: &FrameReport) -> String {
    if f.signal_frame {
        return "<signal handler called>".to_string();
    }
    if let Some(t) = &f.transition {
        return format!("[{}]", t.kind);
    }
    match (&f.function, &f.module) {
        (Some(func), _) => func.clone(),
        (None, Some(m)) => format!("?? [{m}]"),
        (None, None) => format!("?? {}", f.ip),
    }
}

/// `;` separates frames in the folded format, and a line ends at a newline.
fn clean(s: &str) -> String {
    s.chars().map(|c| if c == ';' { ':' } else if c.is_control() { ' ' } else { c }).collect()
}

/// The flame graph as a standalone SVG document (with its own script for zoom and search), or
/// `None` when there are no threads.
pub fn flame_graph(report: &Report) -> Option<String> {
    let lines = folded_lines(report);
    if lines.is_empty() {
        return None;
    }
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = format!("Every thread's stack ({} thread{})", lines.len(), if lines.len() == 1 { "" } else { "s" });
    opts.subtitle = Some("Width: threads. Top: where they are and what they wait for. Click to zoom, Ctrl-F to search.".to_string());
    opts.count_name = "threads".to_string();
    opts.name_type = "Frame:".to_string();
    opts.hash = true;
    opts.deterministic = true;
    opts.min_width = 0.0;
    let mut out = Vec::new();
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), &mut out).ok()?;
    String::from_utf8(out).ok()
}
