//! The crash at the top of the HTML page: the same words as the text report's `Crash:` lines,
//! and the crashed thread's stack first, whole, a recursion shown once with its count.

use super::html::{escape, frames};
use super::model::Report;
use crate::crash::CrashKind;
use std::fmt::Write;

/// Writes the crash section; returns the crashed thread's tid when its stack was shown.
pub(crate) fn section(out: &mut String, r: &Report) -> Option<u32> {
    let c = r.crash.as_ref()?;
    let mut words = String::new();
    super::crash_text::lines(&mut words, r, c);
    let _ = write!(out, "<section id=\"crash\" class=\"verdict deadlock\"><h2>Crash</h2><pre>{}</pre>", escape(words.trim()));
    let shown = (c.kind != CrashKind::Killed).then(|| r.threads.iter().find(|t| Some(t.tid) == c.thread)).flatten();
    if let Some(t) = shown {
        let _ = write!(out, "<details class=\"stack owner\" open><summary id=\"t{}\"><b>Crashed thread:</b> {}</summary>", t.tid, escape(&format!("Thread {}{}", t.tid, t.name.as_deref().map(|n| format!(" \"{n}\"")).unwrap_or_default())));
        match &c.recursion {
            Some(rec) if rec.repeats > 2 => {
                let turn_end = (rec.first_frame + rec.cycle.len()).min(t.frames.len());
                frames(out, &t.frames[..turn_end]);
                let _ = write!(out, "<p class=\"shown\">… the frames above repeat {} more times ({} frames in all) …</p>", rec.repeats - 1, rec.frames);
                frames(out, &t.frames[(rec.first_frame + rec.frames).min(t.frames.len())..]);
            }
            _ => frames(out, &t.frames),
        }
        out.push_str("</details>");
    }
    out.push_str("</section>\n");
    shown.map(|t| t.tid)
}
