//! The .NET async stacks in the HTML report: each group of identical async stacks folded, its
//! frames indented as SOS `dumpasync` indents them.

use super::async_text::{frame_words, group_title};
use super::html::escape;
use super::words::plural;
use crate::runtimes::dotnet::DotnetReport;
use std::fmt::Write;

/// Groups drawn; the rest are counted.
const GROUPS_SHOWN: usize = 100;

pub(crate) fn section(out: &mut String, d: &DotnetReport) {
    if d.async_stacks.is_empty() {
        return;
    }
    let _ = write!(
        out,
        "<section id=\"async\"><h2>Async stacks</h2><p>{} async stack{} that hold no thread, in {} group{}",
        d.async_stacks.len(),
        plural(d.async_stacks.len()),
        d.async_groups.len(),
        plural(d.async_groups.len())
    );
    if let Some(a) = &d.async_tasks {
        let _ = write!(out, " ({} task{} pending)", a.pending_tasks, plural(a.pending_tasks));
        if !a.cut.is_empty() {
            let _ = write!(out, "; cut: {}", escape(&a.cut.join("; ")));
        }
    }
    out.push_str(".</p>");
    for g in d.async_groups.iter().take(GROUPS_SHOWN) {
        let _ = write!(out, "<details class=\"stack group\"><summary>{}</summary><div class=\"frames\">", escape(&group_title(d, g)));
        for f in &g.frames {
            let _ = write!(out, "<div class=\"f\">{}<span class=\"fn\">{}</span> <span class=\"ip\">{}</span></div>", "  ".repeat(f.depth.min(64) as usize), escape(&frame_words(f)), f.address);
        }
        out.push_str("</div></details>\n");
    }
    if d.async_groups.len() > GROUPS_SHOWN {
        let _ = write!(out, "<p>… {} more groups (see the JSON's dotnet.async_groups)</p>", d.async_groups.len() - GROUPS_SHOWN);
    }
    out.push_str("</section>\n");
}
