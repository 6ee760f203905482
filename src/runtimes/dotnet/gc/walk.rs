//! The heap walk: every object of every segment or region, one after the other from the
//! segment's start to its `allocated`, the allocation contexts (memory handed to a thread or
//! the heap for allocating, not yet objects) skipped. Segments are walked in parallel; each
//! walk is linear in its size.
//!
//! An object's size is its MethodTable's base size plus, for arrays and strings, the component
//! count (the u32 after the MethodTable pointer) times the component size; objects are 8-byte
//! aligned and at least 24 bytes. A free object (the free MethodTable) is a gap the GC keeps
//! walkable. What SOS counts for an object (`dumpheap`'s size) is the unaligned size.
//!
//! Damage ends a segment's walk, never the whole heap's: an unreadable MethodTable, one whose
//! EEClass does not point back, a size that runs past `allocated`, memory the dump lacks. The
//! walk of a segment is bounded by its `allocated` (every step moves forward at least 24
//! bytes), and every read is of the dump.

use super::super::objects;
use super::super::target::Target;
use super::gcvars::{Segment, SegmentKind};
use rayon::prelude::*;
use std::collections::{HashMap, HashSet};

pub const MIN_OBJECT_SIZE: u64 = 24;
const ALIGN: u64 = 8;
const HAS_COMPONENT_SIZE: u32 = 0x8000_0000;
/// A base size above this is not a real MethodTable's.
const MAX_BASE_SIZE: u32 = 1 << 30;

/// What the walk needs to size an object, read once per MethodTable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TypeShape {
    pub base_size: u32,
    /// Bytes per element for arrays and strings, 0 otherwise.
    pub component_size: u32,
}

impl TypeShape {
    /// Reads a MethodTable's base size and component size, refusing one that does not look
    /// like a MethodTable (its EEClass must point back at it or at its canonical table; the
    /// free MethodTable `free_mt` has no EEClass).
    pub fn read(t: &Target, mt: u64, free_mt: u64) -> Result<TypeShape, String> {
        let flags = t.field_u32(mt, "MethodTable", "MTFlags").map_err(|e| e.to_string())?;
        let base_size = t.field_u32(mt, "MethodTable", "BaseSize").map_err(|e| e.to_string())?;
        let component_size = if flags & HAS_COMPONENT_SIZE != 0 { flags & 0xffff } else { 0 };
        if base_size < ALIGN as u32 || base_size > MAX_BASE_SIZE {
            return Err(format!("MethodTable {mt:#x} has base size {base_size}"));
        }
        // The free MethodTable has no EEClass.
        if mt != free_mt && !objects::is_plausible_method_table(t, mt) {
            return Err(format!("{mt:#x} is not a MethodTable (its EEClass does not point back)"));
        }
        Ok(TypeShape { base_size, component_size })
    }

    /// The object's size as SOS counts it (unaligned, at least 24 bytes), given its component
    /// count.
    pub fn size(&self, count: u32) -> u64 {
        (self.base_size as u64 + count as u64 * self.component_size as u64).max(MIN_OBJECT_SIZE)
    }
}

/// The size an object takes on the heap: [`TypeShape::size`] aligned.
pub fn aligned(size: u64) -> u64 {
    size.div_ceil(ALIGN) * ALIGN
}

/// Objects of one type in one walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TypeCount {
    pub count: u64,
    /// Sum of the objects' sizes as SOS counts them.
    pub bytes: u64,
}

/// One segment's walk.
#[derive(Debug, Clone, Default)]
pub struct SegmentWalk {
    pub types: HashMap<u64, TypeCount>,
    pub objects: u64,
    /// Sum of the objects' sizes as SOS counts them.
    pub bytes: u64,
    /// Where and why the walk stopped before `allocated`.
    pub broken: Option<(u64, String)>,
    /// Words that hold one of the [`WalkInput::targets`].
    pub hits: Vec<Hit>,
}

/// What the walk needs besides the segments.
pub struct WalkInput<'a> {
    pub t: &'a Target<'a>,
    /// Allocation contexts: pointer → limit.
    pub alloc_contexts: &'a HashMap<u64, u64>,
    pub free_mt: u64,
    /// Objects whose referrers are wanted: every word of every other object (strings and free
    /// objects aside) is compared with them. Empty: no scan.
    pub targets: &'a HashSet<u64>,
    pub string_mt: u64,
}

/// Referrers kept per segment at most (a lock object has few).
pub const MAX_HITS_PER_SEGMENT: usize = 256;

/// A word inside an object that holds a target's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    pub referrer: u64,
    pub method_table: u64,
    /// From the referrer's start (its MethodTable pointer).
    pub offset: u64,
    pub target: u64,
}

/// Walks every segment, in parallel; results in segment order.
pub fn walk_all(input: &WalkInput, segments: &[Segment]) -> Vec<SegmentWalk> {
    segments.par_iter().map(|s| walk_segment(input, s)).collect()
}

/// Walks one segment.
pub fn walk_segment(input: &WalkInput, s: &Segment) -> SegmentWalk {
    let t = input.t;
    let mut out = SegmentWalk::default();
    let mut shapes: HashMap<u64, Result<TypeShape, String>> = HashMap::new();
    let unmask = t.global("ObjectToMethodTableUnmask").unwrap_or(7);
    let skip_contexts = !matches!(s.kind, SegmentKind::Large | SegmentKind::Frozen);
    let skip = |mut at: u64| -> Result<u64, String> {
        if !skip_contexts {
            return Ok(at);
        }
        // A chain of contexts cannot be longer than the segment has room for.
        for _ in 0..1024 {
            match input.alloc_contexts.get(&at) {
                Some(&limit) if limit > at => at = limit + aligned(MIN_OBJECT_SIZE),
                Some(&limit) => return Err(format!("allocation context at {at:#x} ends at {limit:#x}")),
                None => return Ok(at),
            }
        }
        Err(format!("allocation contexts chained past {at:#x}"))
    };
    let mut at = match skip(s.start) {
        Ok(a) => a,
        Err(e) => {
            out.broken = Some((s.start, e));
            return out;
        }
    };
    while at < s.allocated {
        let mt = match t.mem.read_u64(at) {
            Ok(v) => v & !unmask,
            Err(e) => {
                out.broken = Some((at, format!("object header not in the dump: {e}")));
                break;
            }
        };
        if mt == 0 {
            out.broken = Some((at, "object with a null MethodTable".into()));
            break;
        }
        let shape = match shapes.entry(mt).or_insert_with(|| TypeShape::read(t, mt, input.free_mt)) {
            Ok(sh) => *sh,
            Err(e) => {
                out.broken = Some((at, e.clone()));
                break;
            }
        };
        let count = if shape.component_size != 0 {
            match t.mem.read_u32(at + 8) {
                Ok(c) => c,
                Err(e) => {
                    out.broken = Some((at, format!("component count not in the dump: {e}")));
                    break;
                }
            }
        } else {
            0
        };
        let size = shape.size(count);
        let step = aligned(size);
        if at.checked_add(step).is_none_or(|end| end > s.allocated) {
            out.broken = Some((at, format!("object of {size} bytes (MethodTable {mt:#x}) runs past the segment's end {:#x}", s.allocated)));
            break;
        }
        if !input.targets.is_empty() && mt != input.free_mt && mt != input.string_mt && out.hits.len() < MAX_HITS_PER_SEGMENT {
            scan(input, at, mt, step, &mut out.hits);
        }
        let e = out.types.entry(mt).or_default();
        e.count += 1;
        e.bytes += size;
        out.objects += 1;
        out.bytes += size;
        at = match skip(at + step) {
            Ok(a) => a,
            Err(e) => {
                out.broken = Some((at + step, e));
                break;
            }
        };
    }
    out
}

/// Compares each word of the object at `at` (after its MethodTable pointer) with the targets.
fn scan(input: &WalkInput, at: u64, mt: u64, size: u64, hits: &mut Vec<Hit>) {
    let mut off = 8;
    while off < size && hits.len() < MAX_HITS_PER_SEGMENT {
        let Ok(chunk) = input.t.mem.chunk(at + off, (size - off) as usize) else { return };
        for (i, w) in chunk.chunks_exact(8).enumerate() {
            let v = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
            if input.targets.contains(&v) {
                hits.push(Hit { referrer: at, method_table: mt, offset: off + 8 * i as u64, target: v });
            }
        }
        off += (chunk.len() as u64 / 8).max(1) * 8;
    }
}
