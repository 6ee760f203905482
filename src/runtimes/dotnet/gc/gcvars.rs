//! The GC's DAC interface, `GcDacVars` (`src/coreclr/gc/gcinterface.dac.h`, fields in
//! `gcinterface.dacvars.def` order, versioned by the major/minor number it starts with), and
//! what it leads to: each GC heap's generation table, the heap segments or regions of every
//! generation (`dac_heap_segment`), the allocation contexts, the OOM history and the
//! background GC state.
//!
//! Workstation GC keeps one heap in statics that the vars point at; server GC keeps `n_heaps`
//! `gc_heap` objects whose fields are at `gc_heap_field_offsets` (the order of
//! `dac_gcheap_fields.h`). Regions (the .NET 7+ default) are told from segments by the
//! generation's `allocation_start` offset, which regions do not have (-1).

use crate::runtimes::dotnet::error::DotnetError;
use crate::runtimes::dotnet::contract::gc_constants::GcConstants;
use crate::runtimes::dotnet::contract::target::{Result, Target};
use serde::Serialize;
use std::collections::HashSet;

/// The `GcDacVars` major version this reader implements.
pub(crate) const MAJOR_VERSION: u8 = 2;
const PTR: u64 = 8;
/// Generations a heap may have (gen0, gen1, gen2, LOH, POH).
const MAX_GENERATIONS: u64 = 8;
const MAX_HEAPS: i32 = 1024;
/// Segments or regions in one generation's list at most: bounds a corrupt `next` chain.
pub(crate) const MAX_SEGMENTS: usize = 1 << 20;
/// `heap_segment.flags` bits (gcpriv.h): read-only (frozen), UOH (LOH/POH).
const SEGMENT_FLAG_READONLY: u64 = 0x1;
/// `dac_gcheap_fields.h` order.
const HEAP_FIELD_ALLOC_ALLOCATED: usize = 0;
const HEAP_FIELD_EPHEMERAL_SEGMENT: usize = 1;
const HEAP_FIELD_FINALIZE_QUEUE: usize = 2;
const HEAP_FIELD_OOM_INFO: usize = 3;
const HEAP_FIELD_GENERATION_TABLE: usize = 18;
const HEAP_FIELD_COUNT: usize = 19;

/// GcDacVars field offsets (all but the first four are pointers).
pub(crate) mod var {
    pub(crate) const VERSION: u64 = 0;
    pub(crate) const GENERATION_SIZE: u64 = 8;
    pub(crate) const TOTAL_GENERATION_COUNT: u64 = 16;
    pub(crate) const GENERATION_TABLE: u64 = 48;
    pub(crate) const MAX_GEN: u64 = 56;
    pub(crate) const CURRENT_C_GC_STATE: u64 = 72;
    pub(crate) const EPHEMERAL_HEAP_SEGMENT: u64 = 80;
    pub(crate) const ALLOC_ALLOCATED: u64 = 120;
    pub(crate) const OOM_INFO: u64 = 136;
    pub(crate) const FINALIZE_QUEUE: u64 = 144;
    pub(crate) const N_HEAPS: u64 = 176;
    pub(crate) const G_HEAPS: u64 = 184;
    pub(crate) const GC_STRUCTURES_INVALID_CNT: u64 = 192;
    pub(crate) const HANDLE_TABLE_MAP: u64 = 232;
    pub(crate) const GC_HEAP_FIELD_OFFSETS: u64 = 240;
    pub(crate) const GENERATION_FIELD_OFFSETS: u64 = 248;
}

/// `dac_heap_segment` field offsets.
mod seg {
    pub(crate) const ALLOCATED: u64 = 0;
    pub(crate) const COMMITTED: u64 = 8;
    pub(crate) const RESERVED: u64 = 16;
    pub(crate) const MEM: u64 = 32;
    pub(crate) const FLAGS: u64 = 40;
    pub(crate) const NEXT: u64 = 48;
}

/// How the GC lays out its heap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HeapLayout {
    /// .NET 7+ default: fixed-size regions per generation.
    Regions,
    /// Segments (`DOTNET_GCRegionRange`-less builds, clrgc.dll/`libclrgc.so`).
    Segments,
}

/// Which part of the heap a segment or region holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SegmentKind {
    Gen0,
    Gen1,
    Gen2,
    /// Segments layout: the segment holding gen0 and gen1 (and gen2's youngest part).
    Ephemeral,
    Large,
    Pinned,
    /// Read-only (frozen) segments: string literals and other objects the runtime never moves
    /// or collects (SOS's "NonGC heap").
    Frozen,
}

/// One segment or region, its objects in `[start, allocated)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Segment {
    pub address: u64,
    pub(crate) heap: usize,
    pub kind: SegmentKind,
    pub start: u64,
    pub allocated: u64,
    pub committed: u64,
    pub(crate) reserved: u64,
}

/// `oom_history` (gcinterface.dac.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct OomHistory {
    pub(crate) reason: u32,
    pub(crate) alloc_size: u64,
    pub(crate) reserved: u64,
    pub(crate) allocated: u64,
    pub(crate) gc_index: u64,
    pub(crate) fgm: u32,
    pub(crate) size: u64,
    pub(crate) available_pagefile_mb: u64,
    pub(crate) loh_p: bool,
}

/// One GC heap (one for workstation GC).
#[derive(Debug, Clone)]
pub(crate) struct Heap {
    pub(crate) index: usize,
    /// The server GC's `gc_heap` object (its first field is the heap's GC-done event); 0 for the
    /// workstation GC, whose heap is statics.
    pub(crate) address: u64,
    pub(crate) alloc_allocated: u64,
    pub(crate) ephemeral_segment: u64,
    /// Each generation's allocation context (pointer, limit) and start segment.
    pub(crate) generations: Vec<Generation>,
    pub(crate) oom: Option<OomHistory>,
    /// The variable (workstation: `gc_heap::finalize_queue`; server: the heap's field) that
    /// holds this heap's `CFinalize*`, or 0 when not known.
    pub(crate) finalize_queue_var: u64,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Generation {
    pub(crate) alloc_context: (u64, u64),
    pub(crate) start_segment: u64,
}

/// What `GcDacVars` says.
#[derive(Debug, Clone)]
pub(crate) struct GcVars {
    pub(crate) server: bool,
    pub(crate) layout: HeapLayout,
    pub(crate) max_generation: u32,
    /// `current_c_gc_state`: 0 marking, 1 planning, 2 free (no background GC running).
    pub(crate) background_gc_state: Option<u32>,
    /// Where `current_c_gc_state` is: one of this GC's own statics (workstation or server), which
    /// tells which of the runtime's two `heap_hard_limit` variables is this GC's.
    pub(crate) gc_state_var: Option<u64>,
    pub(crate) heaps: Vec<Heap>,
    /// `total_generation_count` (gen0..gen2, LOH, POH on .NET 7+).
    pub(crate) generation_count: u64,
    /// The handle table map (`g_HandleTableMap`), or 0.
    pub(crate) handle_table_map: u64,
    /// `gc_structures_invalid_cnt` is not 0: the GC is planning or moving objects (SOS: "The GC
    /// heap is not in a valid state for traversal"); `None` when it could not be read.
    pub(crate) structures_invalid: Option<bool>,
}

impl GcVars {
    /// Reads the vars at `address` (the value of `g_gcDacGlobals`).
    /// `server` is the runtime's `g_heap_type` (GC_HEAP_SVR): `built_with_svr` only says the GC
    /// could run as server GC.
    /// `constants` (the runtime build's, with its module's load bias) stand in for `max_gen` and
    /// `generation_field_offsets` when the dump lacks their bytes (single-file apps).
    pub(crate) fn read(t: &Target, address: u64, server: bool, constants: Option<(&GcConstants, u64)>) -> Result<GcVars> {
        let version = t.read_u16(address + var::VERSION, "GcDacVars version")?;
        let (major, minor) = ((version & 0xff) as u8, (version >> 8) as u8);
        if major != MAJOR_VERSION {
            return Err(DotnetError::Unsupported(format!("GcDacVars major version {major}.{minor} (knot reads {MAJOR_VERSION}.x)")));
        }
        let ptr = |off: u64, what: &str| t.read_ptr(address.wrapping_add(off), &format!("GcDacVars.{what}"));
        let generation_size = ptr(var::GENERATION_SIZE, "generation_size")?;
        let generation_count = ptr(var::TOTAL_GENERATION_COUNT, "total_generation_count")?;
        if generation_count == 0 || generation_count > MAX_GENERATIONS || generation_size == 0 || generation_size > 4096 {
            return Err(DotnetError::Invalid { what: "GcDacVars", at: address, why: format!("{generation_count} generations of {generation_size} bytes") });
        }
        let max_gen_at = ptr(var::MAX_GEN, "max_gen")?;
        let max_generation = match t.read_u32(max_gen_at, "max_gen") {
            Ok(v) => v,
            Err(e) => constants.and_then(|(c, bias)| c.max_generation_for(bias, max_gen_at)).ok_or(e)?,
        };
        let gen_offsets_at = ptr(var::GENERATION_FIELD_OFFSETS, "generation_field_offsets")?;
        let gen_offset = |i: u64| -> Result<i32> { Ok(t.read_u32(gen_offsets_at + 4 * i, "generation_field_offsets")? as i32) };
        let (alloc_context_off, start_segment_off, allocation_start_off) = match (gen_offset(0), gen_offset(1), gen_offset(2)) {
            (Ok(a), Ok(b), Ok(c)) => (a, b, c),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                let [a, b, c] = constants.and_then(|(k, bias)| k.generation_field_offsets_for(bias, gen_offsets_at)).ok_or(e)?;
                (a, b, c)
            }
        };
        if alloc_context_off < 0 || start_segment_off < 0 || start_segment_off as u64 >= generation_size {
            return Err(DotnetError::Invalid { what: "generation_field_offsets", at: gen_offsets_at, why: format!("allocation_context {alloc_context_off}, start_segment {start_segment_off}") });
        }
        let layout = if allocation_start_off < 0 { HeapLayout::Regions } else { HeapLayout::Segments };
        let opt_var = |off: u64| -> Option<u64> { ptr(off, "var").ok().filter(|&p| p != 0) };
        let gc_state_var = opt_var(var::CURRENT_C_GC_STATE);
        let background_gc_state = gc_state_var.and_then(|p| t.read_u32(p, "current_c_gc_state").ok());

        let generations_at = |table: u64| -> Result<Vec<Generation>> {
            (0..generation_count)
                .map(|g| {
                    let at = table + g * generation_size;
                    Ok(Generation {
                        alloc_context: (
                            t.read_ptr(at + alloc_context_off as u64, "generation allocation context")?,
                            t.read_ptr(at + alloc_context_off as u64 + PTR, "generation allocation context")?,
                        ),
                        start_segment: t.read_ptr(at + start_segment_off as u64, "generation start_segment")?,
                    })
                })
                .collect()
        };
        let oom_at = |at: u64| read_oom(t, at).ok();

        let mut heaps = Vec::new();
        if !server {
            let table = ptr(var::GENERATION_TABLE, "generation_table")?;
            let alloc_allocated = t.read_ptr(ptr(var::ALLOC_ALLOCATED, "alloc_allocated")?, "alloc_allocated")?;
            let ephemeral_segment = t.read_ptr(ptr(var::EPHEMERAL_HEAP_SEGMENT, "ephemeral_heap_segment")?, "ephemeral_heap_segment")?;
            let oom_address = ptr(var::OOM_INFO, "oom_info")?;
            let finalize_queue_var = ptr(var::FINALIZE_QUEUE, "finalize_queue").unwrap_or(0);
            heaps.push(Heap { index: 0, address: 0, alloc_allocated, ephemeral_segment, generations: generations_at(table)?, oom: oom_at(oom_address), finalize_queue_var });
        } else {
            let n = t.read_u32(ptr(var::N_HEAPS, "n_heaps")?, "n_heaps")? as i32;
            if n <= 0 || n > MAX_HEAPS {
                return Err(DotnetError::Invalid { what: "GcDacVars.n_heaps", at: address, why: format!("{n} heaps") });
            }
            let list = t.read_ptr(ptr(var::G_HEAPS, "g_heaps")?, "g_heaps")?;
            let offsets_at = ptr(var::GC_HEAP_FIELD_OFFSETS, "gc_heap_field_offsets")?;
            let offsets: Vec<i32> = (0..HEAP_FIELD_COUNT as u64).map(|i| t.read_u32(offsets_at + 4 * i, "gc_heap_field_offsets").map(|v| v as i32)).collect::<Result<_>>()?;
            let field = |heap: u64, i: usize| -> Result<u64> {
                let off = offsets[i];
                if off < 0 {
                    return Err(DotnetError::Invalid { what: "gc_heap_field_offsets", at: offsets_at, why: format!("field {i} is missing") });
                }
                Ok(heap + off as u64)
            };
            for i in 0..n as u64 {
                let h = t.read_ptr(list + PTR * i, "g_heaps entry")?;
                let alloc_allocated = t.read_ptr(field(h, HEAP_FIELD_ALLOC_ALLOCATED)?, "gc_heap.alloc_allocated")?;
                let ephemeral_segment = t.read_ptr(field(h, HEAP_FIELD_EPHEMERAL_SEGMENT)?, "gc_heap.ephemeral_heap_segment")?;
                let oom_address = field(h, HEAP_FIELD_OOM_INFO)?;
                let generations = generations_at(field(h, HEAP_FIELD_GENERATION_TABLE)?)?;
                let finalize_queue_var = field(h, HEAP_FIELD_FINALIZE_QUEUE).unwrap_or(0);
                heaps.push(Heap { index: i as usize, address: h, alloc_allocated, ephemeral_segment, generations, oom: oom_at(oom_address), finalize_queue_var });
            }
        }
        let handle_table_map = ptr(var::HANDLE_TABLE_MAP, "handle_table_map").unwrap_or(0);
        let structures_invalid = opt_var(var::GC_STRUCTURES_INVALID_CNT).and_then(|p| t.read_u32(p, "gc_structures_invalid_cnt").ok()).map(|n| n != 0);
        Ok(GcVars { server, layout, max_generation, background_gc_state, gc_state_var, heaps, generation_count, handle_table_map, structures_invalid })
    }

    /// Every segment or region of every heap, in the order SOS walks them: LOH, gen2 (with
    /// the frozen segments at its head), then for regions gen1 and gen0, then POH. A segment
    /// reached twice is listed once; a chain is cut at [`MAX_SEGMENTS`].
    pub(crate) fn segments(&self, t: &Target) -> (Vec<Segment>, Vec<DotnetError>) {
        let mut out = Vec::new();
        let mut errors = Vec::new();
        let mut seen: HashSet<u64> = HashSet::new();
        let max = self.max_generation as usize;
        for heap in &self.heaps {
            let mut order: Vec<usize> = vec![max + 1, max];
            if self.layout == HeapLayout::Regions {
                order.extend((0..max).rev());
            }
            if heap.generations.len() > max + 2 {
                order.push(max + 2);
            }
            for g in order {
                let Some(generation) = heap.generations.get(g) else { continue };
                let mut at = generation.start_segment;
                let mut n = 0usize;
                while at != 0 && seen.insert(at) {
                    n += 1;
                    if n > MAX_SEGMENTS {
                        errors.push(DotnetError::TooMany { what: "generation segment list", at: generation.start_segment, limit: MAX_SEGMENTS as u64 });
                        break;
                    }
                    match read_segment(t, at, heap, g, max, self.layout) {
                        Ok((s, next)) => {
                            out.push(s);
                            at = next;
                        }
                        Err(e) => {
                            errors.push(e);
                            break;
                        }
                    }
                }
            }
        }
        (out, errors)
    }

    /// Allocation contexts that are not objects: each generation's (the heap's own) of every
    /// heap, as (pointer, limit).
    pub(crate) fn heap_alloc_contexts(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.heaps.iter().flat_map(|h| h.generations.iter().map(|g| g.alloc_context))
    }
}

fn read_segment(t: &Target, at: u64, heap: &Heap, generation: usize, max: usize, layout: HeapLayout) -> Result<(Segment, u64)> {
    let p = |off: u64, what: &str| t.read_ptr(at.wrapping_add(off), &format!("heap_segment.{what} of {at:#x}"));
    let flags = p(seg::FLAGS, "flags")?;
    let start = p(seg::MEM, "mem")?;
    let allocated = if at == heap.ephemeral_segment { heap.alloc_allocated } else { p(seg::ALLOCATED, "allocated")? };
    let kind = if flags & SEGMENT_FLAG_READONLY != 0 {
        SegmentKind::Frozen
    } else if generation == max + 1 {
        SegmentKind::Large
    } else if generation == max + 2 {
        SegmentKind::Pinned
    } else if layout == HeapLayout::Regions {
        match generation {
            0 => SegmentKind::Gen0,
            1 => SegmentKind::Gen1,
            _ => SegmentKind::Gen2,
        }
    } else if at == heap.ephemeral_segment {
        SegmentKind::Ephemeral
    } else {
        SegmentKind::Gen2
    };
    let s = Segment { address: at, heap: heap.index, kind, start, allocated, committed: p(seg::COMMITTED, "committed")?, reserved: p(seg::RESERVED, "reserved")? };
    if s.allocated < s.start {
        return Err(DotnetError::Invalid { what: "heap_segment", at, why: format!("allocated {:#x} is below mem {:#x}", s.allocated, s.start) });
    }
    Ok((s, p(seg::NEXT, "next")?))
}

fn read_oom(t: &Target, at: u64) -> Result<OomHistory> {
    let b = t.read_bytes(at, 72, "oom_history")?;
    let q = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]));
    let d = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap_or([0; 4]));
    Ok(OomHistory {
        reason: d(0),
        alloc_size: q(8),
        reserved: q(16),
        allocated: q(24),
        gc_index: q(32),
        fgm: d(40),
        size: q(48),
        available_pagefile_mb: q(56),
        loh_p: d(64) != 0,
    })
}
