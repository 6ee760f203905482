//! `knot heap stat CORE` as a report: the GC heap by type as SOS `dumpheap -stat` prints it, and
//! the GC's own state — the heap read alone (no stacks, no locks, no object graph), for a look
//! at what fills a heap that costs what the walk costs.

use crate::diagnostics::Diagnostic;
use crate::runtimes::dotnet::gc::report::{GcReport, HeapTypeReport};
use crate::runtimes::dotnet::gc::state::thousands;
use crate::runtimes::HeapReading;
use super::gc_text::{bytes, limit_source_words};
use crate::hex::Hex;
use schemars::JsonSchema;
use serde::Serialize;
use std::fmt::Write;
use std::path::Path;

/// One dump's heap by type (`knot heap stat --format json`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HeapStatReport {
    pub path: String,
    /// Objects on the GC heap, free objects included (SOS's "Total N objects").
    pub total_objects: u64,
    /// Their bytes as SOS counts them (an array's size unaligned).
    pub total_bytes: u64,
    /// Bytes of free objects (SOS's `Free` row).
    pub free_bytes: u64,
    /// Every type, the most bytes first (the same rows as the analysis's `dotnet.heap.types`).
    pub types: Vec<HeapTypeReport>,
    /// The GC's state: layout, hard limit, committed memory, a GC in progress, the last OOM.
    pub gc: GcReport,
    /// What could not be read: a region whose walk stopped early, a root table not read.
    pub diagnostics: Vec<Diagnostic>,
}

impl HeapStatReport {
    pub(crate) fn of(path: &Path, reading: &HeapReading) -> HeapStatReport {
        let HeapReading::Dotnet(gc) = reading;
        let s = &gc.stats;
        HeapStatReport {
            path: path.display().to_string(),
            total_objects: s.total_objects,
            total_bytes: s.total_bytes,
            free_bytes: s.free_bytes,
            types: s.types.iter().map(|t| HeapTypeReport { name: t.name.clone(), method_table: Hex(t.method_table), count: t.count, bytes: t.bytes }).collect(),
            gc: GcReport::of(gc),
            diagnostics: gc.diagnostics.clone(),
        }
    }

    /// The report as pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// For people: a line on the GC's state, then SOS's `Statistics:` table — the fewest bytes
    /// first, columns as wide as their widest cell, counts and sizes with thousands separators —
    /// and its `Total` line, so the rows read (and diff) as `dumpheap -stat`'s do.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let g = &self.gc;
        let _ = write!(out, "GC heap of {}: {} ({} {} heap{}), committed {}", self.path, bytes(self.total_bytes), g.layout, if g.server { "server" } else { "workstation" }, if g.heaps == 1 { "" } else { "s" }, bytes(g.committed_bytes));
        match (g.hard_limit_bytes, g.limit_percent()) {
            (Some(limit), Some(p)) => {
                let _ = write!(out, "; hard limit {}{} ({p:.1} % committed)", bytes(limit), limit_source_words(g));
            }
            _ if !g.hard_limit_read => out.push_str("; hard limit not read for this runtime build"),
            _ => out.push_str("; no hard limit"),
        }
        out.push('\n');
        if g.gc_in_progress {
            out.push_str("A garbage collection was in progress when the dump was taken.\n");
        }
        if let Some(o) = &g.last_oom {
            let _ = writeln!(out, "Last OOM: {} ({}), allocating {} bytes after GC #{}", o.reason_text, o.reason, thousands(o.allocation_bytes), o.gc_index);
        }
        for d in &self.diagnostics {
            let _ = writeln!(out, "warning: {}", d.message);
        }
        let mut rows: Vec<(String, String, String, &str)> = self.types.iter().map(|t| (format!("{:012x}", t.method_table.0), thousands(t.count), thousands(t.bytes), t.name.as_str())).collect();
        // SOS lists the fewest bytes first (the largest last, nearest the prompt).
        let mut order: Vec<usize> = (0..rows.len()).collect();
        order.sort_by(|&a, &b| self.types[a].bytes.cmp(&self.types[b].bytes).then(self.types[a].count.cmp(&self.types[b].count)).then(self.types[a].name.cmp(&self.types[b].name)));
        let width = |header: &str, cell: fn(&(String, String, String, &str)) -> usize| rows.iter().map(cell).max().unwrap_or(0).max(header.len());
        let (w_mt, w_count, w_size) = (width("MT", |r| r.0.len()), width("Count", |r| r.1.len()), width("TotalSize", |r| r.2.len()));
        out.push_str("Statistics:\n");
        let _ = writeln!(out, "{:>w_mt$} {:>w_count$} {:>w_size$} Class Name", "MT", "Count", "TotalSize");
        for i in order {
            let (mt, count, size, name) = std::mem::take(&mut rows[i]);
            let _ = writeln!(out, "{mt:>w_mt$} {count:>w_count$} {size:>w_size$} {name}");
        }
        let _ = writeln!(out, "Total {} objects, {} bytes", thousands(self.total_objects), thousands(self.total_bytes));
        out
    }
}

/// The JSON Schema of [`HeapStatReport`].
pub fn json_schema() -> String {
    serde_json::to_string_pretty(&schemars::schema_for!(HeapStatReport)).unwrap_or_default()
}
