//! What the GC was doing when the dump was taken: memory committed per generation, the hard
//! limit, whether a GC was in progress, and the last out-of-memory it recorded (SOS
//! `analyzeoom`'s reading of `oom_history`).

use crate::runtimes::dotnet::contract::target::Target;
use crate::runtimes::dotnet::gc::gcvars::{GcVars, OomHistory, Segment, SegmentKind};
use crate::process::Process;
use serde::Serialize;

/// `c_gc_state_free`: no background GC running.
const BACKGROUND_GC_FREE: u32 = 2;

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Committed {
    pub gen0: u64,
    pub gen1: u64,
    pub gen2: u64,
    pub loh: u64,
    pub poh: u64,
    /// Read-only (frozen) segments: SOS's "NonGC heap".
    pub(crate) frozen: u64,
    /// Segments layout: the ephemeral segment (gen0, gen1 and the youngest gen2).
    pub(crate) ephemeral: u64,
}

impl Committed {
    /// What the GC heap has committed (SOS's "GC Committed Heap Size", frozen segments left out).
    pub(crate) fn gc_total(&self) -> u64 {
        self.gen0 + self.gen1 + self.gen2 + self.loh + self.poh + self.ephemeral
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HardLimitSource {
    /// `GCHeapHardLimit` (or `GCHeapHardLimitPercent`) in the process's environment.
    Setting,
    /// No setting: the GC's default under a container memory limit (75 % of it).
    ContainerDefault,
}

/// The last OOM the GC recorded, as SOS `analyzeoom` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LastOom {
    pub(crate) heap: usize,
    /// `oom_reason`: budget, cant_commit, cant_reserve, loh, low_mem, unproductive_full_gc.
    pub(crate) reason: &'static str,
    /// SOS's line for the reason.
    pub reason_text: &'static str,
    /// The allocation that failed.
    pub(crate) allocation_bytes: u64,
    /// The GC after which it happened (SOS: "after GC #N").
    pub(crate) gc_index: u64,
    /// `failure_get_memory`, when the GC could not get memory from the OS.
    pub(crate) get_memory_failure: Option<&'static str>,
    /// SOS's "Details:" line, when there is one.
    pub detail: Option<String>,
    pub(crate) large_object_heap: bool,
    /// The size the GC tried to reserve or commit.
    pub(crate) size: u64,
    pub(crate) available_commit_mb: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GcState {
    pub committed: Committed,
    pub(crate) committed_bytes: u64,
    /// The heap hard limit in bytes (`None`: no limit, or not known for this build).
    pub hard_limit_bytes: Option<u64>,
    pub hard_limit_source: Option<HardLimitSource>,
    /// Whether this runtime build's limit could be read (its place is a per-build fact).
    pub(crate) hard_limit_read: bool,
    /// The runtime was suspended for a GC, or a background GC was running.
    pub(crate) gc_in_progress: bool,
    /// A background GC was marking or planning.
    pub(crate) background_gc_running: bool,
    pub last_oom: Option<LastOom>,
}

pub(crate) fn gc_state(process: &Process, t: &Target, vars: &GcVars, segments: &[Segment]) -> GcState {
    let mut c = Committed::default();
    for s in segments {
        // Committed memory starts at the region's page (the region header sits before `mem`);
        // a frozen segment's objects start one pointer after its memory.
        let begin = if s.kind == SegmentKind::Frozen { s.start.saturating_sub(8) } else { s.start & !0xfff };
        let n = s.committed.saturating_sub(begin);
        match s.kind {
            SegmentKind::Gen0 => c.gen0 += n,
            SegmentKind::Gen1 => c.gen1 += n,
            SegmentKind::Gen2 => c.gen2 += n,
            SegmentKind::Ephemeral => c.ephemeral += n,
            SegmentKind::Large => c.loh += n,
            SegmentKind::Pinned => c.poh += n,
            SegmentKind::Frozen => c.frozen += n,
        }
    }
    let suspended = t.global_deref("GCThread").is_ok_and(|v| v != 0);
    let background_gc_running = vars.background_gc_state.is_some_and(|s| s != BACKGROUND_GC_FREE);
    let hard_limit_raw = hard_limit_variable(process, vars).and_then(|at| t.read_ptr(at, "gc_heap::heap_hard_limit").ok());
    let hard_limit_read = hard_limit_raw.is_some();
    let hard_limit_bytes = hard_limit_raw;
    let hard_limit_source = hard_limit_bytes.filter(|&l| l != 0).map(|_| {
        if environment_has(process, &["DOTNET_GCHeapHardLimit", "COMPlus_GCHeapHardLimit", "DOTNET_GCHeapHardLimitPercent", "COMPlus_GCHeapHardLimitPercent"]) {
            HardLimitSource::Setting
        } else {
            HardLimitSource::ContainerDefault
        }
    });
    let last_oom = vars.heaps.iter().find_map(|h| h.oom.filter(|o| o.reason != 0 || o.fgm != 0).map(|o| last_oom(h.index, &o)));
    GcState {
        committed_bytes: c.gc_total(),
        committed: c,
        hard_limit_bytes: hard_limit_bytes.filter(|&l| l != 0),
        hard_limit_source,
        hard_limit_read,
        gc_in_progress: suspended || background_gc_running,
        background_gc_running,
        last_oom,
    }
}

/// The GC's container-default stores sit in its statics, next to `current_c_gc_state`.
const SAME_STATICS: u64 = 64 << 10;

/// `gc_heap::heap_hard_limit` of the GC this process ran (workstation or server): of the
/// runtime build's two (the catalogue's, else found in the runtime's file), the one beside this
/// GC's `current_c_gc_state`.
fn hard_limit_variable(process: &Process, vars: &GcVars) -> Option<u64> {
    let module = crate::runtimes::dotnet::contract::locate::runtime_module(process)?;
    let rvas = match crate::runtimes::dotnet::contract::locate::catalogued(module) {
        Some(b) => b.heap_hard_limit.clone(),
        None => crate::runtimes::dotnet::contract::hard_limit_store::heap_hard_limit_rvas(module.file.as_ref()?),
    };
    let anchor = vars.gc_state_var?;
    rvas.iter().map(|rva| module.bias.wrapping_add(*rva)).min_by_key(|at| at.abs_diff(anchor)).filter(|at| at.abs_diff(anchor) < SAME_STATICS)
}

fn last_oom(heap: usize, o: &OomHistory) -> LastOom {
    let (reason, reason_text) = match o.reason {
        1 => ("budget", "OOM was due to an internal .Net error, likely a bug in the GC"),
        2 => ("cant_commit", "Didn't have enough memory to commit"),
        3 => ("cant_reserve", "OOM was due to an internal .Net error, likely a bug in the GC"),
        4 => ("loh", "Didn't have enough memory to allocate an LOH segment"),
        5 => ("low_mem", "Low on memory during GC"),
        6 => ("unproductive_full_gc", "Could not do a full GC"),
        _ => ("unknown", "unknown reason"),
    };
    let fgm = match o.fgm {
        0 => None,
        1 => Some(("reserve_segment", "Failed to reserve memory")),
        2 => Some(("commit_segment_beg", "Didn't have enough memory to commit beginning of the segment")),
        3 => Some(("commit_eph_segment", "Didn't have enough memory to commit the new ephemeral segment")),
        4 => Some(("grow_table", "Didn't have enough memory to grow the internal GC data structures")),
        5 => Some(("commit_table", "Didn't have enough memory to commit the internal GC data structures")),
        _ => Some(("unknown", "unknown failure")),
    };
    let detail = fgm.map(|(_, text)| format!("{} {text} {} bytes", if o.loh_p { "LOH" } else { "SOH" }, thousands(o.size)));
    LastOom {
        heap,
        reason,
        reason_text,
        allocation_bytes: o.alloc_size,
        gc_index: o.gc_index,
        get_memory_failure: fgm.map(|(k, _)| k),
        detail,
        large_object_heap: o.loh_p,
        size: o.size,
        available_commit_mb: o.available_pagefile_mb,
    }
}

/// `1234567` → `1,234,567` (SOS's `:n0`).
pub(crate) fn thousands(v: u64) -> String {
    let s = v.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Whether the process's initial environment (on the main thread's stack, from the auxiliary
/// vector's `AT_EXECFN` region) names one of `names`. Reads at most 256 KiB.
fn environment_has(process: &Process, names: &[&str]) -> bool {
    let Some(execfn) = process.core.auxv.entries.iter().find(|(k, _)| *k == AT_EXECFN).map(|(_, v)| *v) else { return false };
    // The environment strings lie just below AT_EXECFN's string at the top of the stack.
    let from = execfn.saturating_sub(256 * 1024);
    let Some(seg) = process.core.segments.find(execfn) else { return false };
    let start = from.max(seg.vaddr);
    let Ok(bytes) = process.core.bytes_at(start, (execfn - start) as usize + 4096) else { return false };
    bytes.split(|&b| b == 0).any(|s| names.iter().any(|n| s.len() > n.len() && s.starts_with(n.as_bytes()) && s[n.len()] == b'='))
}

const AT_EXECFN: u64 = 31;
