//! The .NET GC heap in the HTML report: what the GC holds against its limit, the last OOM, and
//! a bar per type for the largest types (the rest summed in one bar).

use super::gc_text::bytes;
use super::html::escape;
use crate::runtimes::dotnet::gc::state::thousands;
use crate::runtimes::dotnet::gc::report::SuspectReport;
use crate::runtimes::dotnet::DotnetReport;
use std::fmt::Write;

/// Bars drawn; the other types share one.
const BARS: usize = 30;

/// `said`: the leak suspects the report says (the header's floor, `gc_text::said_suspects`): only
/// those are called suspects here too.
pub(crate) fn section(out: &mut String, d: &DotnetReport, said: &[&SuspectReport]) {
    let (Some(heap), Some(gc)) = (d.heap.as_ref(), d.gc.as_ref()) else { return };
    out.push_str("<section id=\"gcheap\"><h2>GC heap by type</h2>");
    let _ = write!(out, "<p>{} in {} objects ({} free); committed {}", bytes(heap.total_bytes), thousands(heap.total_objects), bytes(heap.free_bytes), bytes(gc.committed_bytes));
    if let (Some(limit), Some(p)) = (gc.hard_limit_bytes, gc.limit_percent()) {
        let limit = bytes(limit);
        let _ = write!(out, " of {} {limit} hard limit (<b>{p:.1} %</b>)", super::words::a_or_an(&limit));
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
    retained_section(out, heap, said);
}

/// The leak suspects said in the verdict's header (as the text's first screen says them: first
/// when nothing else is the story, after the cycles when something is), each linked to its
/// path in "What keeps the heap alive".
pub(crate) fn suspects_at(out: &mut String, r: &crate::report::Report, place: super::gc_text::SuspectPlace) {
    if super::gc_text::suspect_place(r) != Some(place) {
        return;
    }
    for s in super::gc_text::said_suspects(r) {
        let _ = write!(out, "<p class=\"warn leak\"><b>Leak suspect:</b> {} <a href=\"#retained\">(path)</a></p>", escape(&super::words::suspect(s)));
    }
}

/// The dominator tree's top as an icicle (each row one level down, each box as wide as its
/// share of the reachable heap, the largest first; hover for the object), the leak suspects the
/// report says (`said`) with their paths from the roots, and retained bytes by type.
fn retained_section(out: &mut String, heap: &crate::runtimes::dotnet::gc::report::HeapReport, said: &[&SuspectReport]) {
    let Some(by_type) = heap.retained.as_ref() else { return };
    out.push_str("<section id=\"retained\"><h2>What keeps the heap alive</h2>");
    if let Some(u) = &heap.unreachable {
        let _ = write!(out, "<p>Garbage not yet collected: {} objects, {} (in no retained size).</p>", thousands(u.objects), bytes(u.bytes));
    }
    for s in said {
        let _ = write!(out, "<p class=\"warn\"><b>Leak suspect:</b> {}</p>", escape(&super::words::suspect(s)));
        if !s.path.is_empty() {
            out.push_str("<ol class=\"path mono\">");
            if let Some(r) = &s.root {
                let _ = write!(out, "<li>{}</li>", escape(&r.name.to_string()));
            }
            for p in &s.path {
                let field = p.field.as_deref().map(|f| format!(" <i>.{}</i>", escape(f))).unwrap_or_default();
                let _ = write!(out, "<li>{} {}{field}</li>", escape(&p.type_name), p.address);
            }
            out.push_str("</ol>");
        }
    }
    icicle(out, &heap.dominator_tree, heap.reachable_bytes);
    out.push_str("<table class=\"heap\"><thead><tr><th>type (dominator tree grouped by type)</th><th class=\"n\">objects</th><th class=\"n\">retained bytes</th><th></th></tr></thead><tbody>");
    let max = by_type.first().map_or(1, |t| t.retained_bytes.max(1));
    for t in by_type.iter().take(BARS) {
        let width = (t.retained_bytes as f64 * 100.0 / max as f64).clamp(0.5, 100.0);
        let _ = write!(
            out,
            "<tr><td class=\"mono\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"barcell\"><div class=\"bar\" style=\"width:{width:.1}%\"></div></td></tr>",
            escape(&t.type_name),
            thousands(t.count),
            thousands(t.retained_bytes)
        );
    }
    out.push_str("</tbody></table></section>\n");
}

/// Height of one icicle row, in pixels.
const ROW: f64 = 22.0;

/// The icicle: boxes placed left to right under their parent, as wide as their share of the
/// reachable heap (`reachable`; the boxes' percentages so agree with the suspects' and the
/// holders', and the top row's gap on the right is what the small holders keep).
fn icicle(out: &mut String, nodes: &[crate::runtimes::dotnet::gc::report::DominatorNode], reachable: u64) {
    if nodes.is_empty() {
        return;
    }
    let top: u64 = nodes.iter().filter(|n| n.parent.is_none()).map(|n| n.retained_bytes).sum();
    let total = reachable.max(top).max(1);
    let depth = nodes.iter().map(|n| n.depth).max().unwrap_or(0) + 1;
    // Left edge (percent) of each node, and of the next free place under each node.
    let mut left = vec![0.0f64; nodes.len()];
    let mut next = vec![0.0f64; nodes.len()];
    let mut top_next = 0.0f64;
    let _ = write!(out, "<div class=\"icicle\" style=\"height:{:.0}px\" title=\"\">", depth as f64 * ROW);
    for (i, n) in nodes.iter().enumerate() {
        let width = n.retained_bytes as f64 * 100.0 / total as f64;
        let x = match n.parent {
            Some(p) if p < i => {
                let x = next[p];
                next[p] += width;
                x
            }
            _ => {
                let x = top_next;
                top_next += width;
                x
            }
        };
        left[i] = x;
        next[i] = x;
        if width < 0.2 {
            continue;
        }
        let short = n.type_name.rsplit('.').next().unwrap_or(&n.type_name);
        let _ = write!(
            out,
            "<div class=\"ice\" style=\"left:{x:.3}%;width:{width:.3}%;top:{:.0}px\" title=\"{} at {:#x}: retains {} ({:.1} %)\">{}</div>",
            n.depth as f64 * ROW,
            escape(&n.type_name),
            n.address,
            bytes(n.retained_bytes),
            width,
            if width >= 4.0 { escape(short) } else { String::new() }
        );
    }
    out.push_str("</div>");
}

/// CSS for the section.
pub(crate) const CSS: &str = ".heap .barcell{width:40%}.heap .bar{height:12px;background:#4a7fd4;border-radius:2px}\
.icicle{position:relative;width:100%;margin:8px 0;overflow:hidden}\
.ice{position:absolute;height:20px;box-sizing:border-box;border:1px solid #fff;background:#e8a33d;font:11px monospace;overflow:hidden;white-space:nowrap;padding:2px 3px}\
.ice:hover{background:#d4572a;color:#fff}.path li{margin:2px 0}";
