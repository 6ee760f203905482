//! `knot heap diff OLD NEW` as a report: the JSON document and the text for people.

use crate::diagnostics::Diagnostic;
use crate::runtimes::dotnet::gc::diff::{HeapDiff, HolderGrowth, TypeGrowth};
use crate::runtimes::dotnet::gc::state::thousands;
use super::gc_text::bytes;
use schemars::JsonSchema;
use serde::Serialize;
use std::fmt::Write;
use std::path::Path;

/// Types shown in the text report by default.
pub const TEXT_TYPES: usize = 25;
/// Holders shown in the text report at most.
const TEXT_HOLDERS: usize = 5;

/// What grew between two dumps of one program (`knot heap diff --format json`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HeapDiffReport {
    pub old: HeapSide,
    pub new: HeapSide,
    /// Every type of either heap, matched by name: the largest growth in bytes first
    /// (retained when both dumps' graphs were read, else shallow); types that shrank last.
    pub types: Vec<TypeGrowthReport>,
    /// The top holders of either dump (each dump's 20 largest) matched by root path — root,
    /// path types and fields, never addresses — the largest growth of retained bytes first;
    /// empty unless both dumps' object graphs were read.
    pub holders: Vec<HolderGrowthReport>,
    /// What knot could not read of either heap (each message says which dump).
    pub diagnostics: Vec<Diagnostic>,
}

/// One dump's heap in total.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HeapSide {
    pub path: String,
    /// Objects on the GC heap, free objects included (SOS's "Total N objects").
    pub total_objects: u64,
    /// Their bytes as SOS counts them.
    pub total_bytes: u64,
}

/// A holder matched by root path in both dumps.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HolderGrowthReport {
    /// `static SessionCache.s_all`, or the root's kind (`strong_handle`, `stack`, …).
    pub root: String,
    /// From the root's object to the holder: `Type.field`, `Type[]` for an array element
    /// (element indices are left out: they move).
    pub path: Vec<String>,
    /// The holder's type.
    #[serde(rename = "type")]
    pub type_name: String,
    /// Retained bytes of the holders of this root path among that dump's top holders; null
    /// when none was among them.
    pub old_retained_bytes: Option<u64>,
    pub new_retained_bytes: Option<u64>,
    /// `new - old` (a dump without it counting 0).
    pub retained_growth: i64,
    /// How many of that dump's top holders have this root path.
    pub old_holders: usize,
    pub new_holders: usize,
}

/// One type in both dumps.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TypeGrowthReport {
    /// As SOS `dumpheap -stat` names it.
    #[serde(rename = "type")]
    pub type_name: String,
    pub old_count: u64,
    pub new_count: u64,
    /// `new_count - old_count`.
    pub count_growth: i64,
    /// Shallow bytes (SOS's sizes).
    pub old_bytes: u64,
    pub new_bytes: u64,
    /// `new_bytes - old_bytes`.
    pub bytes_growth: i64,
    /// Retained bytes of the type (dominator tree grouped by class); null when that dump's
    /// object graph was not read.
    pub old_retained_bytes: Option<u64>,
    pub new_retained_bytes: Option<u64>,
    /// Null unless both are known.
    pub retained_growth: Option<i64>,
}

impl HeapDiffReport {
    pub(crate) fn of(old: &Path, new: &Path, d: &HeapDiff, diagnostics: Vec<Diagnostic>) -> HeapDiffReport {
        HeapDiffReport {
            old: HeapSide { path: old.display().to_string(), total_objects: d.old_objects, total_bytes: d.old_bytes },
            new: HeapSide { path: new.display().to_string(), total_objects: d.new_objects, total_bytes: d.new_bytes },
            types: d.types.iter().map(TypeGrowthReport::of).collect(),
            holders: d.holders.iter().map(HolderGrowthReport::of).collect(),
            diagnostics,
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// The text report: the totals, then the `top` types that grew most (and those that shrank
    /// most, when any did).
    pub fn to_text(&self, top: usize) -> String {
        let mut out = String::new();
        let (o, n) = (&self.old, &self.new);
        let _ = writeln!(out, "Heap diff: {} → {}", o.path, n.path);
        let _ = writeln!(
            out,
            "  GC heap: {} in {} objects → {} in {} objects ({}, {} objects)",
            bytes(o.total_bytes),
            thousands(o.total_objects),
            bytes(n.total_bytes),
            thousands(n.total_objects),
            signed_bytes(crate::runtimes::dotnet::gc::diff::delta(o.total_bytes, n.total_bytes)),
            signed(crate::runtimes::dotnet::gc::diff::delta(o.total_objects, n.total_objects)),
        );
        let retained = self.types.iter().any(|t| t.retained_growth.is_some());
        let grew: Vec<&TypeGrowthReport> = self.types.iter().filter(|t| key(t) > 0).take(top).collect();
        let mut shrank: Vec<&TypeGrowthReport> = self.types.iter().filter(|t| key(t) < 0).collect();
        shrank.reverse();
        shrank.truncate(top.min(5));
        if grew.is_empty() {
            let _ = writeln!(out, "\nNo type grew.");
        } else {
            let _ = writeln!(out, "\nGrew most ({} of {} types grew):", grew.len().min(top), self.types.iter().filter(|t| key(t) > 0).count());
            table(&mut out, &grew, retained);
        }
        if !shrank.is_empty() {
            let _ = writeln!(out, "\nShrank most:");
            table(&mut out, &shrank, retained);
        }
        let holders: Vec<&HolderGrowthReport> = self.holders.iter().filter(|h| h.retained_growth > 0).take(top.min(TEXT_HOLDERS)).collect();
        if !holders.is_empty() {
            let _ = writeln!(out, "\nHolders that grew most (matched by root path):");
            let _ = writeln!(out, "  {:>12} {:>12} {:>12}  holder", "retained", "old", "new");
            for h in holders {
                let side = |b: Option<u64>| b.map(bytes).unwrap_or_else(|| "-".into());
                let _ = writeln!(out, "  {:>12} {:>12} {:>12}  {} ← {}", signed_bytes(h.retained_growth), side(h.old_retained_bytes), side(h.new_retained_bytes), h.type_name, h.root);
                if h.path.len() > 1 {
                    let _ = writeln!(out, "  {:>38}  {}", "", h.path.join(" → "));
                }
            }
        }
        if !self.diagnostics.is_empty() {
            let _ = writeln!(out, "\nWarnings:");
            for d in &self.diagnostics {
                let _ = writeln!(out, "  {}", d.message);
            }
        }
        out
    }
}

/// What the order is by: retained growth when known, else shallow.
fn key(t: &TypeGrowthReport) -> i64 {
    t.retained_growth.unwrap_or(t.bytes_growth)
}

fn table(out: &mut String, rows: &[&TypeGrowthReport], retained: bool) {
    if retained {
        let _ = writeln!(out, "  {:>12} {:>12} {:>12} {:>12} {:>12}  type", "retained", "bytes", "count", "old count", "new count");
    } else {
        let _ = writeln!(out, "  {:>12} {:>12} {:>12} {:>12}  type", "bytes", "count", "old count", "new count");
    }
    for t in rows {
        let r = if retained { format!("{:>12} ", t.retained_growth.map(signed_bytes).unwrap_or_default()) } else { String::new() };
        let _ = writeln!(
            out,
            "  {r}{:>12} {:>12} {:>12} {:>12}  {}",
            signed_bytes(t.bytes_growth),
            signed(t.count_growth),
            thousands(t.old_count),
            thousands(t.new_count),
            t.type_name
        );
    }
}

/// `+1,234`, `-5`, `0`.
fn signed(v: i64) -> String {
    match v {
        0 => "0".into(),
        v if v > 0 => format!("+{}", thousands(v as u64)),
        v => format!("-{}", thousands(v.unsigned_abs())),
    }
}

/// `+1.2 MiB`, `-512 B`.
fn signed_bytes(v: i64) -> String {
    match v {
        0 => "0 B".into(),
        v if v > 0 => format!("+{}", bytes(v as u64)),
        v => format!("-{}", bytes(v.unsigned_abs())),
    }
}

impl HolderGrowthReport {
    fn of(h: &HolderGrowth) -> HolderGrowthReport {
        HolderGrowthReport {
            root: h.root.clone(),
            path: h.path.clone(),
            type_name: h.type_name.clone(),
            old_retained_bytes: h.old_retained,
            new_retained_bytes: h.new_retained,
            retained_growth: h.retained_growth(),
            old_holders: h.old_holders,
            new_holders: h.new_holders,
        }
    }
}

impl TypeGrowthReport {
    fn of(t: &TypeGrowth) -> TypeGrowthReport {
        TypeGrowthReport {
            type_name: t.name.clone(),
            old_count: t.old_count,
            new_count: t.new_count,
            count_growth: t.count_growth(),
            old_bytes: t.old_bytes,
            new_bytes: t.new_bytes,
            bytes_growth: t.bytes_growth(),
            old_retained_bytes: t.old_retained,
            new_retained_bytes: t.new_retained,
            retained_growth: t.retained_growth(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs() {
        assert_eq!(signed(1234), "+1,234");
        assert_eq!(signed(-5), "-5");
        assert_eq!(signed_bytes(2048), "+2.0 KiB");
        assert_eq!(signed_bytes(-100), "-100 B");
    }
}
