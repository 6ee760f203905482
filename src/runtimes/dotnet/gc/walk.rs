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
//! A bad object does not end the walk: an unreadable MethodTable (a null one where an
//! allocation context left unused memory, the GC's own notes in the gaps of a heap caught
//! mid-collection), one whose EEClass does not point back, a size that runs past `allocated`.
//! As SOS does (`dumpheap`, `verifyheap`), the object is counted as skipped (an object of no
//! size) and the walk looks for the next word that is a real MethodTable, from one minimum
//! object on (85,000 bytes on the large object heap). Only memory the dump lacks, or no
//! MethodTable before `allocated`, ends a segment's walk, never the whole heap's. The walk of a
//! segment is bounded by its `allocated` (every step moves forward at least 8 bytes), and every
//! read is of the dump.

use crate::runtimes::dotnet::types::objects;
use crate::runtimes::dotnet::contract::target::Target;
use crate::runtimes::dotnet::gc::gcvars::{Segment, SegmentKind};
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::collections::{HashMap, HashSet};

pub(crate) const MIN_OBJECT_SIZE: u64 = 24;
const ALIGN: u64 = 8;
const HAS_COMPONENT_SIZE: u32 = 0x8000_0000;
/// A base size above this is not a real MethodTable's.
const MAX_BASE_SIZE: u32 = 1 << 30;

/// What the walk needs to size an object, read once per MethodTable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TypeShape {
    pub(crate) base_size: u32,
    /// Bytes per element for arrays and strings, 0 otherwise.
    pub(crate) component_size: u32,
}

impl TypeShape {
    /// Reads a MethodTable's base size and component size, refusing one that does not look
    /// like a MethodTable (its EEClass must point back at it or at its canonical table; the
    /// free MethodTable `free_mt` has no EEClass).
    pub(crate) fn read(t: &Target, mt: u64, free_mt: u64) -> Result<TypeShape, String> {
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
    pub(crate) fn size(&self, count: u32) -> u64 {
        (self.base_size as u64 + count as u64 * self.component_size as u64).max(MIN_OBJECT_SIZE)
    }
}

/// The size an object takes on the heap: [`TypeShape::size`] aligned.
pub(crate) fn aligned(size: u64) -> u64 {
    size.div_ceil(ALIGN) * ALIGN
}

/// Objects of one type in one walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct TypeCount {
    pub(crate) count: u64,
    /// Sum of the objects' sizes as SOS counts them.
    pub(crate) bytes: u64,
}

/// One segment's walk.
#[derive(Debug, Clone, Default)]
pub(crate) struct SegmentWalk {
    pub(crate) types: HashMap<u64, TypeCount>,
    pub(crate) objects: u64,
    /// Sum of the objects' sizes as SOS counts them.
    pub(crate) bytes: u64,
    /// Where and why the walk stopped before `allocated`.
    pub(crate) broken: Option<(u64, String)>,
    /// The bad objects the walk went on past (see the module doc).
    pub(crate) skipped: Skipped,
    /// Words that hold one of the [`WalkInput::targets`].
    pub(crate) hits: Vec<Hit>,
    /// Objects of the [`WalkInput::wanted`] types (or types derived from them), in heap order.
    pub(crate) collected: Vec<Collected>,
    /// Objects of wanted types past [`MAX_COLLECTED_PER_SEGMENT`], counted, not kept.
    pub(crate) collected_cut: u64,
    /// Every object but the free ones, in address order, when [`WalkInput::collect`] asks.
    pub(crate) nodes: SegmentNodes,
    /// Their references, read while their bytes are at hand (with `nodes`).
    pub(crate) refs: crate::runtimes::dotnet::gc::raw_refs::SegmentRefs,
}

/// A type the walk collects the objects of (with those of the types derived from it): its
/// TypeDef in its module, as every MethodTable of it and of its instantiations records them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WantedType {
    /// The `Module` its MethodTables point at.
    pub(crate) module: u64,
    /// Its TypeDef's row (`types::objects::type_def_rid`).
    pub(crate) rid: u32,
}

/// An object of a wanted type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Collected {
    /// Which of [`WalkInput::wanted`] its type is or derives from.
    pub(crate) wanted: u8,
    pub(crate) address: u64,
    pub(crate) method_table: u64,
    /// Its size as SOS counts it.
    pub(crate) size: u64,
}

/// Wanted objects kept per segment at most (a dump with a million live tasks is rare; past
/// this the async stacks are cut, and say so).
pub(crate) const MAX_COLLECTED_PER_SEGMENT: usize = 1 << 20;
/// Parent types followed at most when asking whether a type derives from a wanted one.
const MAX_PARENTS: usize = 32;

/// Whether the type `mt` is `wanted` or derives from it.
pub(crate) fn derives_from(t: &Target, mt: u64, wanted: WantedType) -> bool {
    let mut at = mt;
    for _ in 0..MAX_PARENTS {
        if at == 0 {
            return false;
        }
        let (Ok(rid), Ok(module)) = (crate::runtimes::dotnet::types::objects::type_def_rid(t, at), t.field_ptr(at, "MethodTable", "Module")) else { return false };
        if rid == wanted.rid && module == wanted.module {
            return true;
        }
        match t.field_ptr(at, "MethodTable", "ParentMethodTable") {
            Ok(p) if p != at => at = p,
            _ => return false,
        }
    }
    false
}

/// Which wanted type `mt` is or derives from (the first found going up its parents).
fn wanted_kind(t: &Target, wanted: &[WantedType], mt: u64, shape: &TypeShape) -> Option<u8> {
    // Arrays and strings derive from no wanted type (and their MTFlags2 hold no TypeDef).
    if wanted.is_empty() || shape.component_size != 0 {
        return None;
    }
    let mut at = mt;
    for _ in 0..MAX_PARENTS {
        if at == 0 {
            return None;
        }
        let rid = crate::runtimes::dotnet::types::objects::type_def_rid(t, at).ok()?;
        let module = t.field_ptr(at, "MethodTable", "Module").ok()?;
        if let Some(i) = wanted.iter().position(|w| w.rid == rid && w.module == module) {
            return u8::try_from(i).ok();
        }
        match t.field_ptr(at, "MethodTable", "ParentMethodTable") {
            Ok(p) if p != at => at = p,
            _ => return None,
        }
    }
    None
}

/// The objects of one segment, for the object graph: addresses ascending, each one's
/// MethodTable (an index into `method_tables`) and its size as SOS reports it (saturated).
///
/// An address is kept in 4 bytes, not 8 (the walk's lists are most of its memory): as its
/// distance in 8-byte words from the start of its run, a run starting anew where an address is
/// not a whole number of words from the run's start or too far for a u32 (never, on a heap
/// whose objects are 8-byte aligned in segments below 32 GiB).
#[derive(Debug, Clone, Default)]
pub(crate) struct SegmentNodes {
    /// Each object's words from its run's start.
    offsets: Vec<u32>,
    /// (the run's first address, the index of its first object), ascending.
    runs: Vec<(u64, usize)>,
    pub(crate) types: Vec<u32>,
    pub(crate) sizes: Vec<u32>,
    pub(crate) method_tables: Vec<u64>,
}

impl SegmentNodes {
    /// Adds the next object's address (above the last one).
    pub(crate) fn push_address(&mut self, a: u64) {
        let i = self.offsets.len();
        if let Some(&(base, _)) = self.runs.last()
            && a >= base
            && (a - base).is_multiple_of(8)
            && let Ok(words) = u32::try_from((a - base) / 8)
        {
            self.offsets.push(words);
            return;
        }
        self.runs.push((a, i));
        self.offsets.push(0);
    }

    /// Objects kept.
    pub(crate) fn len(&self) -> usize {
        self.offsets.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// The first object's address.
    pub(crate) fn first(&self) -> Option<u64> {
        self.runs.first().map(|r| r.0)
    }

    /// The objects' addresses in order.
    pub(crate) fn addresses(&self) -> impl Iterator<Item = u64> + '_ {
        self.runs.iter().enumerate().flat_map(move |(k, &(base, from))| {
            let to = self.runs.get(k + 1).map_or(self.offsets.len(), |r| r.1);
            self.offsets[from..to].iter().map(move |&w| base + 8 * u64::from(w))
        })
    }

    #[cfg(test)]
    pub(crate) fn of(addresses: &[u64], types: Vec<u32>, sizes: Vec<u32>, method_tables: Vec<u64>) -> SegmentNodes {
        let mut n = SegmentNodes { types, sizes, method_tables, ..SegmentNodes::default() };
        for &a in addresses {
            n.push_address(a);
        }
        n
    }
}

/// What the walk needs besides the segments.
pub(crate) struct WalkInput<'a> {
    pub(crate) t: &'a Target<'a>,
    /// Allocation contexts: pointer → limit.
    pub(crate) alloc_contexts: &'a HashMap<u64, u64>,
    pub(crate) free_mt: u64,
    /// Objects whose referrers are wanted: every word of every other object (strings and free
    /// objects aside) is compared with them. Empty: no scan.
    pub(crate) targets: &'a HashSet<u64>,
    pub(crate) string_mt: u64,
    /// The core, for read-ahead and release hints on each segment's pages.
    pub(crate) core: Option<&'a crate::core::Core>,
    /// Types whose objects (and those of derived types) the walk collects: tasks for the async
    /// stacks, SemaphoreSlims. Empty: none.
    pub(crate) wanted: &'a [WantedType],
    /// Keep every object's address, type and size ([`SegmentWalk::nodes`]) and its references
    /// ([`SegmentWalk::refs`], put where the sink says).
    pub(crate) collect: Option<&'a crate::runtimes::dotnet::gc::raw_refs::RefSink>,
    /// The most objects kept over all segments (`collect`); past it, none is kept.
    pub(crate) node_cap: Option<&'a NodeCap>,
}

/// The objects a walk may keep for the object graph, over all its segments (walked in
/// parallel): past `max`, every segment drops what it kept and keeps no more, so that a heap
/// whose graph would not fit the memory limit costs no more than its statistics.
#[derive(Debug)]
pub(crate) struct NodeCap {
    max: u64,
    kept: std::sync::atomic::AtomicU64,
    over: std::sync::atomic::AtomicBool,
}

/// Objects a segment keeps between two looks at the shared count.
const CAP_STEP: usize = 1 << 16;

impl NodeCap {
    pub(crate) fn new(max: u64) -> NodeCap {
        NodeCap { max, kept: 0.into(), over: false.into() }
    }

    /// Counts `n` more objects kept; false (from then on) once the total is past the cap.
    fn take(&self, n: u64) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        if self.over.load(Relaxed) {
            return false;
        }
        if self.kept.fetch_add(n, Relaxed).saturating_add(n) > self.max {
            self.over.store(true, Relaxed);
            return false;
        }
        true
    }

    /// Whether the walk met more objects than the cap.
    pub(crate) fn exceeded(&self) -> bool {
        self.over.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Referrers kept per segment at most (a lock object has few).
pub(crate) const MAX_HITS_PER_SEGMENT: usize = 256;

/// A word inside an object that holds a target's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hit {
    pub(crate) referrer: u64,
    pub(crate) method_table: u64,
    /// From the referrer's start (its MethodTable pointer).
    pub(crate) offset: u64,
    pub(crate) target: u64,
}

/// Walks every segment, in parallel; results in segment order.
pub(crate) fn walk_all(input: &WalkInput, segments: &[Segment]) -> Vec<SegmentWalk> {
    use crate::heap_progress::{advance, start, HeapStep};
    let span = |s: &Segment| s.allocated.saturating_sub(s.start);
    start(HeapStep::Walk, segments.iter().map(span).sum());
    segments
        .par_iter()
        .map(|s| {
            let w = walk_segment(input, s);
            advance(span(s));
            w
        })
        .collect()
}

/// One object met by a [`Cursor`]: where, its MethodTable, shape and size as SOS counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Met {
    pub(crate) at: u64,
    pub(crate) mt: u64,
    pub(crate) size: u64,
}

/// Steps through one segment's objects in order, skipping allocation contexts: the walk's
/// rules (see the module doc) in one place, for the full walk and for the lazy one that finds
/// object starts on demand (`crate::runtimes::dotnet::gc::object_index`).
pub(crate) struct Cursor<'a> {
    t: &'a Target<'a>,
    start: u64,
    allocated: u64,
    /// The segment's bytes when the dump holds them in one piece (else empty: read per object).
    bytes: &'a [u8],
    /// The allocation contexts inside this segment: pointer → limit.
    here: FxHashMap<u64, u64>,
    lowest: u64,
    highest: u64,
    unmask: u64,
    /// The next object's address.
    pub(crate) at: u64,
    /// Where and why the walk stopped before `allocated`.
    pub(crate) broken: Option<(u64, String)>,
    /// Large object heap: a bad object is passed by 85,000 bytes at least, not one minimum object.
    large: bool,
    /// The bad objects passed.
    pub(crate) skipped: Skipped,
}

/// Bad objects a walk went on past, as SOS counts them: each one an object of no size.
#[derive(Debug, Clone, Default)]
pub(crate) struct Skipped {
    pub(crate) objects: u64,
    /// The bytes between each bad object and the next good one.
    pub(crate) bytes: u64,
    /// How many bad objects had each first word (the MethodTable bits of it): SOS lists them by
    /// it, as `<unknown_type_…>` rows of no size.
    pub(crate) by_word: FxHashMap<u64, u64>,
}

/// Where SOS looks for the next object past a bad one on the large object heap.
const LARGE_SKIP: u64 = 85_000;
/// A word at or below this is no MethodTable (SOS's test when it looks for the next object).
const LOWEST_METHOD_TABLE: u64 = 0x1000;

impl<'a> Cursor<'a> {
    pub(crate) fn new(t: &'a Target<'a>, alloc_contexts: &HashMap<u64, u64>, s: &Segment) -> Cursor<'a> {
        let skip_contexts = !matches!(s.kind, SegmentKind::Large | SegmentKind::Frozen);
        // The contexts inside this segment: an object address is looked up only when it is one.
        let here: FxHashMap<u64, u64> =
            if skip_contexts { alloc_contexts.iter().filter(|(p, _)| **p >= s.start && **p <= s.allocated).map(|(p, l)| (*p, *l)).collect() } else { FxHashMap::default() };
        let (lowest, highest) = (here.keys().min().copied().unwrap_or(u64::MAX), here.keys().max().copied().unwrap_or(0));
        // The segment's bytes in one piece when the dump holds them so (it usually does): a
        // slice read per object instead of a lookup.
        let len = usize::try_from(s.allocated.saturating_sub(s.start)).unwrap_or(0);
        let bytes: &[u8] = t.mem.chunk(s.start, len).unwrap_or(&[]);
        let unmask = t.global("ObjectToMethodTableUnmask").unwrap_or(7);
        let large = s.kind == SegmentKind::Large;
        let mut c = Cursor { t, start: s.start, allocated: s.allocated, bytes, here, lowest, highest, unmask, at: s.start, broken: None, large, skipped: Skipped::default() };
        match c.skip(s.start) {
            Ok(a) => c.at = a,
            Err(e) => {
                c.broken = Some((s.start, e));
                c.at = s.allocated;
            }
        }
        c
    }

    /// Past the allocation contexts that start at `at`.
    fn skip(&self, mut at: u64) -> Result<u64, String> {
        if at < self.lowest || at > self.highest {
            return Ok(at);
        }
        // A chain of contexts cannot be longer than the segment has room for.
        for _ in 0..1024 {
            match self.here.get(&at) {
                Some(&limit) if limit > at => at = limit + aligned(MIN_OBJECT_SIZE),
                Some(&limit) => return Err(format!("allocation context at {at:#x} ends at {limit:#x}")),
                None => return Ok(at),
            }
        }
        Err(format!("allocation contexts chained past {at:#x}"))
    }

    /// The `len` bytes at `at`, when the segment's bytes are in one piece and hold them.
    #[inline]
    pub(crate) fn bytes_at(&self, at: u64, len: usize) -> Option<&'a [u8]> {
        let off = usize::try_from(at.checked_sub(self.start)?).ok()?;
        self.bytes.get(off..off.checked_add(len)?)
    }

    /// Whether the dump holds the segment's bytes in one piece (so its size is real).
    pub(crate) fn in_one_piece(&self) -> bool {
        !self.bytes.is_empty()
    }

    fn word(&self, a: u64) -> Option<u64> {
        let off = usize::try_from(a.checked_sub(self.start)?).ok()?;
        Some(u64::from_le_bytes(self.bytes.get(off..off.checked_add(8)?)?.try_into().ok()?))
    }

    /// The next object, its type's shape from `shape_of` (the caller caches shapes); `None` at
    /// the segment's end or where the walk broke (`broken` says where and why).
    pub(crate) fn next(&mut self, shape_of: &mut dyn FnMut(u64) -> Result<TypeShape, String>) -> Option<Met> {
        loop {
            if self.broken.is_some() || self.at >= self.allocated {
                return None;
            }
            let at = self.at;
            match self.object_at(at, shape_of) {
                Ok(met) => return Some(met),
                Err(why) => self.pass(at, why, shape_of),
            }
        }
    }

    /// Past the bad object at `at`, as SOS goes on: from one minimum object (85,000 bytes on the
    /// large object heap) past it, allocation contexts skipped, to the next word that is a
    /// MethodTable. The bad object is counted either way (SOS counts it before it looks on); no
    /// MethodTable before `allocated` ends the segment there, a word the dump lacks breaks it.
    fn pass(&mut self, at: u64, why: String, shape_of: &mut dyn FnMut(u64) -> Result<TypeShape, String>) {
        let mut candidate = at.saturating_add(if self.large { LARGE_SKIP } else { MIN_OBJECT_SIZE });
        let found: Result<u64, String> = loop {
            if candidate >= self.allocated {
                break Ok(self.allocated);
            }
            match self.skip(candidate) {
                Ok(past) if past > candidate => {
                    candidate = past;
                    continue;
                }
                Ok(_) => {}
                Err(e) => break Err(e),
            }
            candidate += 8;
            if candidate >= self.allocated {
                break Ok(self.allocated);
            }
            let word = match self.word(candidate) {
                Some(w) => w,
                None => match self.t.mem.read_u64(candidate) {
                    Ok(w) => w,
                    Err(e) => break Err(format!("past a bad object ({why}), memory not in the dump: {e}")),
                },
            };
            let mt = word & !self.unmask;
            if mt > LOWEST_METHOD_TABLE && shape_of(mt).is_ok() {
                break Ok(candidate);
            }
        };
        let next = match found {
            Ok(next) => next,
            Err(e) => {
                self.broken = Some((at, e));
                self.allocated
            }
        };
        self.skipped.objects += 1;
        self.skipped.bytes += next.saturating_sub(at);
        let head = self.word(at).or_else(|| self.t.mem.read_u64(at).ok()).unwrap_or(0);
        *self.skipped.by_word.entry(head & !self.unmask).or_default() += 1;
        self.at = next;
    }

    /// The object at `at` and the cursor past it, or why there is none.
    fn object_at(&mut self, at: u64, shape_of: &mut dyn FnMut(u64) -> Result<TypeShape, String>) -> Result<Met, String> {
        let head = match self.word(at) {
            Some(v) => Ok(v),
            None => self.t.mem.read_u64(at),
        };
        let why = match head {
            Err(e) => format!("object header not in the dump: {e}"),
            Ok(v) if v & !self.unmask == 0 => "object with a null MethodTable".into(),
            Ok(v) => {
                let mt = v & !self.unmask;
                match shape_of(mt) {
                    Err(e) => e,
                    Ok(shape) => {
                        let count = if shape.component_size != 0 { self.word(at + 8).map(|w| Ok(w as u32)).unwrap_or_else(|| self.t.mem.read_u32(at + 8)) } else { Ok(0) };
                        match count {
                            Err(e) => format!("component count not in the dump: {e}"),
                            Ok(count) => {
                                let size = shape.size(count);
                                let step = aligned(size);
                                if at.checked_add(step).is_none_or(|end| end > self.allocated) {
                                    format!("object of {size} bytes (MethodTable {mt:#x}) runs past the segment's end {:#x}", self.allocated)
                                } else {
                                    // The walk waits on each object's first word (a cache
                                    // miss each): a load well ahead of it, which nothing
                                    // waits on, brings the next lines in meanwhile.
                                    if let Some(off) = at.checked_sub(self.start).and_then(|o| usize::try_from(o).ok()).and_then(|o| o.checked_add(AHEAD)) {
                                        std::hint::black_box(self.bytes.get(off).copied());
                                    }
                                    match self.skip(at + step) {
                                        Ok(a) => self.at = a,
                                        Err(e) => {
                                            self.broken = Some((at + step, e));
                                            self.at = self.allocated;
                                        }
                                    }
                                    return Ok(Met { at, mt, size });
                                }
                            }
                        }
                    }
                }
            }
        };
        Err(why)
    }
}

/// How far ahead of the object being read the walk touches the segment's bytes.
const AHEAD: usize = 1024;

/// Walks one segment.
pub(crate) fn walk_segment(input: &WalkInput, s: &Segment) -> SegmentWalk {
    let t = input.t;
    let mut out = SegmentWalk::default();
    // Per type met here: its shape, the counts and its index in `out.nodes.method_tables`, in
    // `types` (one hash lookup per object at most, none when the type is the previous one's).
    let mut slot_of: FxHashMap<u64, usize> = FxHashMap::default();
    let mut types: Vec<(u64, TypeShape, TypeCount, Option<u8>, u32)> = Vec::new();
    let mut last: Option<(u64, usize)> = None;
    // Words that were no MethodTable: a walk going on past a bad object tries many.
    let mut not_types: rustc_hash::FxHashSet<u64> = rustc_hash::FxHashSet::default();
    let bounds = (input.targets.iter().min().copied().unwrap_or(u64::MAX), input.targets.iter().max().copied().unwrap_or(0));
    if let Some(core) = input.core {
        core.will_read(s.start, s.allocated.saturating_sub(s.start));
    }
    let mut cursor = Cursor::new(t, input.alloc_contexts, s);
    let mut collect = input.collect.filter(|_| input.node_cap.is_none_or(|c| !c.exceeded()));
    let mut counted = 0usize;
    loop {
        let mut shape_of = |mt: u64| -> Result<TypeShape, String> {
            if let Some((m, k)) = last
                && m == mt
            {
                return Ok(types[k].1);
            }
            let k = match slot_of.get(&mt) {
                Some(&k) => k,
                None => {
                    if not_types.contains(&mt) {
                        return Err(format!("{mt:#x} is not a MethodTable"));
                    }
                    let sh = TypeShape::read(t, mt, input.free_mt).inspect_err(|_| {
                        not_types.insert(mt);
                    })?;
                    let kind = wanted_kind(t, input.wanted, mt, &sh);
                    types.push((mt, sh, TypeCount::default(), kind, u32::MAX));
                    slot_of.insert(mt, types.len() - 1);
                    types.len() - 1
                }
            };
            last = Some((mt, k));
            Ok(types[k].1)
        };
        let Some(Met { at, mt, size }) = cursor.next(&mut shape_of) else { break };
        let step = aligned(size);
        if !input.targets.is_empty() && mt != input.free_mt && mt != input.string_mt && out.hits.len() < MAX_HITS_PER_SEGMENT {
            scan(input, at, mt, step, bounds, &mut out.hits);
        }
        // `next` asked `shape_of` for this object's type last.
        if let Some((_, k)) = last
            && let Some((_, _, c, kind, node_type)) = types.get_mut(k)
        {
            if let Some(wanted) = *kind {
                if out.collected.len() < MAX_COLLECTED_PER_SEGMENT {
                    out.collected.push(Collected { wanted, address: at, method_table: mt, size });
                } else {
                    out.collected_cut += 1;
                }
            }
            c.count += 1;
            c.bytes += size;
            if let Some(sink) = collect
                && mt != input.free_mt
            {
                let n = &mut out.nodes;
                if *node_type == u32::MAX {
                    n.method_tables.push(mt);
                    *node_type = (n.method_tables.len() - 1) as u32;
                    // The references' descriptions are numbered as the node types.
                    out.refs.desc_of(t, mt);
                }
                n.push_address(at);
                n.types.push(*node_type);
                let size = u32::try_from(size).unwrap_or(u32::MAX);
                n.sizes.push(size);
                // The object's bytes were just read: its references are read now, not in a
                // second pass over the dump.
                out.refs.push(sink, *node_type as usize, at, size, |len| {
                    cursor.bytes_at(at, len).or_else(|| t.mem.chunk(at, len).ok().filter(|b| b.len() >= len))
                });
                if let Some(cap) = input.node_cap
                    && n.len() - counted >= CAP_STEP
                {
                    counted = n.len();
                    if !cap.take(CAP_STEP as u64) {
                        out.nodes = SegmentNodes::default();
                        out.refs = Default::default();
                        collect = None;
                    }
                }
            }
        }
        out.objects += 1;
        out.bytes += size;
    }
    if let Some(cap) = input.node_cap
        && collect.is_some()
        && !cap.take((out.nodes.len() - counted) as u64)
    {
        out.nodes = SegmentNodes::default();
        out.refs = Default::default();
        collect = None;
    }
    if let Some(sink) = collect {
        out.refs.finish(sink);
    }
    out.broken = cursor.broken.take();
    out.skipped = std::mem::take(&mut cursor.skipped);
    // SOS counts each bad object it passes as an object (of no size).
    out.objects += out.skipped.objects;
    out.types = types.into_iter().map(|(mt, _, c, _, _)| (mt, c)).collect();
    if let Some(core) = input.core {
        core.done_reading(s.start, s.allocated.saturating_sub(s.start));
    }
    out
}

/// Compares each word of the object at `at` (after its MethodTable pointer) with the targets.
/// `(lo, hi)` bound the targets: most words fail that test without a hash.
fn scan(input: &WalkInput, at: u64, mt: u64, size: u64, (lo, hi): (u64, u64), hits: &mut Vec<Hit>) {
    let mut off = 8;
    while off < size && hits.len() < MAX_HITS_PER_SEGMENT {
        let Ok(chunk) = input.t.mem.chunk(at + off, (size - off) as usize) else { return };
        for (i, w) in chunk.chunks_exact(8).enumerate() {
            let v = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
            if v >= lo && v <= hi && input.targets.contains(&v) {
                hits.push(Hit { referrer: at, method_table: mt, offset: off + 8 * i as u64, target: v });
            }
        }
        off += (chunk.len() as u64 / 8).max(1) * 8;
    }
}
