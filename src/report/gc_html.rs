//! The .NET GC heap in the HTML report: what the GC holds against its limit, the last OOM, and
//! a bar per type for the largest types (the rest summed in one bar).

use super::gc_text::bytes;
use super::html::escape;
use crate::runtimes::dotnet::gc::state::thousands;
use crate::runtimes::dotnet::DotnetReport;
use std::fmt::Write;

/// Bars drawn; the other types share one.
const BARS: usize = 30;

pub(crate) fn section(out: &mut String, d: &DotnetReport) {
    let (Some(heap), Some(gc)) = (d.heap.as_ref(), d.gc.as_ref()) else { return };
    out.push_str("<section id=\"gcheap\"><h2>GC heap by type</h2>");
    let _ = write!(out, "<p>{} in {} objects ({} free); committed {}", bytes(heap.total_bytes), thousands(heap.total_objects), bytes(heap.free_bytes), bytes(gc.committed_bytes));
    if let (Some(limit), Some(p)) = (gc.hard_limit_bytes, gc.limit_percent()) {
        let _ = write!(out, " of a {} hard limit (<b>{p:.1} %</b>)", bytes(limit));
    }
    let _ = write!(out, "; {}, {} GC.</p>", escape(&gc.layout), if gc.server { "server" } else { "workstation" });
    if let Some(o) = &gc.last_oom {
        let _ = write!(out, "<p class=\"warn\">Last OOM: {} (after GC #{}, allocating {} bytes)", escape(&o.reason_text), o.gc_index, thousands(o.allocation_bytes));
        if let Some(detail) = &o.detail {
            let _ = write!(out, "; {}", escape(detail));
        }
        out.push_str("</p>");
    }
    let max = heap.types.first().map_or(1, |t| t.bytes.max(1));
    out.push_str("<table class=\"heap\"><thead><tr><th>type</th><th class=\"n\">objects</th><th class=\"n\">bytes</th><th></th></tr></thead><tbody>");
    let row = |out: &mut String, name: &str, count: u64, b: u64, mt: Option<String>| {
        let width = (b as f64 * 100.0 / max as f64).clamp(0.5, 100.0);
        let title = mt.map(|m| format!(" title=\"MethodTable {m}\"")).unwrap_or_default();
        let _ = write!(
            out,
            "<tr><td class=\"mono\"{title}>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"barcell\"><div class=\"bar\" style=\"width:{width:.1}%\"></div></td></tr>",
            escape(name),
            thousands(count),
            thousands(b)
        );
    };
    for t in heap.types.iter().take(BARS) {
        row(out, &t.name, t.count, t.bytes, Some(t.method_table.to_string()));
    }
    if heap.types.len() > BARS {
        let rest = &heap.types[BARS..];
        let name = format!("{} other types", rest.len());
        row(out, &name, rest.iter().map(|t| t.count).sum(), rest.iter().map(|t| t.bytes).sum(), None);
    }
    out.push_str("</tbody></table></section>\n");
}

/// CSS for the section.
pub(crate) const CSS: &str = ".heap .barcell{width:40%}.heap .bar{height:12px;background:#4a7fd4;border-radius:2px}";
