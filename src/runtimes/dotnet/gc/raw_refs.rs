//! Each object's references as the heap walk reads them, for the object graph's edges: the walk
//! has every object's bytes at hand (hot in the cache, the dump's pages just read), so it reads
//! the reference fields there (the type's GC description, read once per type) instead of the
//! edges reading every object of the dump a second time. What it keeps is the raw value of each
//! field that lies inside the heap's address range (every segment's start to the highest
//! `allocated`; null and anything outside dropped), in field order, and each object's count;
//! the edges resolve them to node numbers later (`graph::edges`), without the dump.
//!
//! Compact, because there is one per reference of the heap: a value as a u32, its distance in
//! 8-byte words from the heap's lowest address; one that is no whole number of words from it or
//! too far (a heap spanning 32 GiB or more: regions' large objects live at the top of the GC's
//! reservation) is the escape [`WIDE`] and its value in the segment's `wide` list. A count is a
//! byte, [`BIG`] for one in `big`. About 1 byte an object and 4 a reference.
//!
//! Under a memory limit with scratch files a block of [`BLOCK`] objects stays in its segment's
//! memory while the scratch directory's memory budget lasts (what the plan leaves beside the
//! walk's lists), and is appended to two files shared by the segments (walked in parallel) after,
//! so the kernel can write them back: files written under a cgroup's limit cost the walk more
//! than the second read of the dump they spare (measured: 12.3 s against 3.4 s for the bench's
//! 192 M objects in 4 GiB), so memory comes first. Without a limit each segment keeps them all in
//! memory. Either way a segment lists its blocks, which are the edges' units of parallel work.

use crate::runtimes::dotnet::gc::gcdesc::GcDesc;
use crate::runtimes::dotnet::gc::walk::SegmentNodes;
use crate::scratch::{Place, ScratchVec};
use rustc_hash::FxHashMap;
use std::sync::Mutex;

/// A reference kept as this is in the segment's `wide` list.
const WIDE: u32 = u32::MAX;
/// A count kept as this is in the segment's `big` list.
const BIG: u8 = u8::MAX;
/// Objects per block (the last of a segment may have fewer).
pub(crate) const BLOCK: usize = 1 << 16;

/// Where the walk puts the references it reads (shared by the segments' walks).
#[derive(Debug)]
pub(crate) struct RefSink {
    lo: u64,
    /// Past the highest `allocated`.
    hi: u64,
    files: Option<Files>,
}

/// Where blocks go past the memory budget: the shared files, and the scratch directory whose
/// memory budget the blocks kept in memory take.
#[derive(Debug)]
struct Files {
    store: Mutex<Store>,
    dir: std::sync::Arc<crate::scratch::ScratchDir>,
}

/// The references and counts of every segment, in scratch files.
#[derive(Debug, Clone)]
struct Store {
    refs: ScratchVec<u32>,
    counts: ScratchVec<u8>,
}

impl RefSink {
    /// A sink for a heap whose segments span `[lo, hi)`, keeping what it is given at `place`.
    pub(crate) fn new(lo: u64, hi: u64, place: &Place) -> RefSink {
        let files = match place {
            Place::Memory => None,
            Place::Files(dir) => Some(Files { store: Mutex::new(Store { refs: ScratchVec::new(place), counts: ScratchVec::new(place) }), dir: dir.clone() }),
        };
        RefSink { lo, hi, files }
    }

    /// The sink for these segments (their lowest start to their highest `allocated`).
    pub(crate) fn of(segments: &[crate::runtimes::dotnet::gc::Segment], place: &Place) -> RefSink {
        let live = || segments.iter().filter(|s| s.allocated > s.start);
        let lo = live().map(|s| s.start).min().unwrap_or(u64::MAX);
        let hi = live().map(|s| s.allocated).max().unwrap_or(0);
        RefSink::new(lo, hi, place)
    }

    /// What the walks kept, the segments' in segment order.
    pub(crate) fn into_refs(self, segments: Vec<SegmentRefs>) -> RawRefs {
        let mut descs = FxHashMap::default();
        for s in &segments {
            for (mt, d) in &s.descs {
                descs.entry(*mt).or_insert_with(|| d.clone());
            }
        }
        let files = self.files.map(|f| {
            let mut s = f.store.into_inner().unwrap_or_else(|p| p.into_inner());
            s.refs.write_back();
            s.counts.write_back();
            s
        });
        RawRefs { lo: self.lo, files, segments, descs }
    }
}

/// One block of a segment's objects: where its counts and references are (in the segment's own
/// lists, or in the shared files), and where its escapes start in the segment's lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Block {
    objects: usize,
    counts: usize,
    refs: usize,
    refs_len: usize,
    wide: usize,
    big: usize,
    /// Its counts and references are in the shared files (else in the segment's lists).
    in_file: bool,
}

/// One segment's references, as its walk read them (see the module doc).
#[derive(Debug, Clone, Default)]
pub(crate) struct SegmentRefs {
    /// Those of the blocks kept in memory, then those of the block being filled.
    refs: Vec<u32>,
    counts: Vec<u8>,
    /// The escaped references and counts, in order.
    wide: Vec<u64>,
    big: Vec<u32>,
    /// Objects whose references could not be read: (its index in the segment, whether its bytes
    /// are missing from the dump; else its GC description does not fit it), ascending.
    errors: Vec<(u32, bool)>,
    blocks: Vec<Block>,
    /// The block being filled: its first object's index, where its counts and references start
    /// in `counts` and `refs`, its escapes in `wide` and `big`.
    open: Block,
    /// Objects pushed.
    objects: usize,
    /// The last object's address.
    last: u64,
    /// The GC description of each type the walk read references for.
    descs: Vec<(u64, Result<GcDesc, String>)>,
}

impl SegmentRefs {
    /// Reads the GC description of `mt` (once per type in a segment: the caller keeps the
    /// number this returns beside the type), kept for the edges' errors.
    pub(crate) fn desc_of(&mut self, t: &crate::runtimes::dotnet::contract::target::Target, mt: u64) -> usize {
        self.descs.push((mt, GcDesc::read(t, mt).map_err(|e| e.to_string())));
        self.descs.len() - 1
    }

    /// The next object (at `at`, of `size` bytes as the graph keeps it: saturated at u32) of
    /// the type whose description is number `desc`: its references read from its bytes
    /// (`bytes(size)`, `None` when the dump lacks them), those inside the heap kept.
    #[inline]
    pub(crate) fn push<'b>(&mut self, sink: &RefSink, desc: usize, at: u64, size: u32, bytes: impl FnOnce(usize) -> Option<&'b [u8]>) {
        let index = self.objects as u32;
        let before = (self.refs.len(), self.wide.len());
        if let Some((_, Ok(d))) = self.descs.get(desc)
            && !matches!(d, GcDesc::None)
        {
            match bytes(size as usize) {
                Some(b) => {
                    let (lo, hi) = (sink.lo, sink.hi);
                    let (refs, wide) = (&mut self.refs, &mut self.wide);
                    let r = d.offsets(u64::from(size), |off| {
                        let o = off as usize;
                        let v = b.get(o..o + 8).and_then(|w| w.try_into().ok()).map_or(0, u64::from_le_bytes);
                        if v >= lo && v < hi {
                            let d = v - lo;
                            match u32::try_from(d / 8) {
                                Ok(w) if d % 8 == 0 && w != WIDE => refs.push(w),
                                _ => {
                                    refs.push(WIDE);
                                    wide.push(v);
                                }
                            }
                        }
                    });
                    if r.is_err() {
                        self.refs.truncate(before.0);
                        self.wide.truncate(before.1);
                        self.errors.push((index, false));
                    }
                }
                None => self.errors.push((index, true)),
            }
        }
        let count = self.refs.len() - before.0;
        match u8::try_from(count) {
            Ok(c) if c != BIG => self.counts.push(c),
            _ => {
                self.counts.push(BIG);
                self.big.push(count as u32);
            }
        }
        self.objects += 1;
        self.last = at;
        if self.objects - self.open.objects == BLOCK {
            self.close_block(sink);
        }
    }

    /// Ends the block being filled (kept in memory while the budget lasts, else appended to the
    /// files) and opens the next.
    fn close_block(&mut self, sink: &RefSink) {
        let objects = self.objects - self.open.objects;
        if objects == 0 {
            return;
        }
        let Block { counts, refs, wide, big, .. } = self.open;
        let refs_len = self.refs.len() - refs;
        let bytes = (objects + 4 * refs_len) as u64;
        // To the files only when there are files and their directory's budget cannot hold it.
        let block = match sink.files.as_ref().filter(|f| !f.dir.take(bytes)) {
            None => Block { objects, counts, refs, refs_len, wide, big, in_file: false },
            Some(files) => {
                let mut f = files.store.lock().unwrap_or_else(|p| p.into_inner());
                let b = Block { objects, counts: f.counts.len(), refs: f.refs.len(), refs_len, wide, big, in_file: true };
                f.counts.extend_from_slice(&self.counts[counts..]);
                f.refs.extend_from_slice(&self.refs[refs..]);
                drop(f);
                self.counts.truncate(counts);
                self.refs.truncate(refs);
                b
            }
        };
        self.blocks.push(block);
        self.open = Block { objects: self.objects, counts: self.counts.len(), refs: self.refs.len(), refs_len: 0, wide: self.wide.len(), big: self.big.len(), in_file: false };
    }

    /// The segment's walk is over: its last block closed, its lists' spare room freed.
    pub(crate) fn finish(&mut self, sink: &RefSink) {
        self.close_block(sink);
        self.refs.shrink_to_fit();
        self.counts.shrink_to_fit();
        self.wide.shrink_to_fit();
        self.big.shrink_to_fit();
    }
}

/// Every segment's references, as the walk kept them, for the edges (`graph::edges`).
#[derive(Clone, Default)]
pub(crate) struct RawRefs {
    /// The heap's lowest address: a kept reference is its distance in words from here.
    lo: u64,
    /// The shared files, when the references live in scratch files.
    files: Option<Store>,
    /// In segment order.
    segments: Vec<SegmentRefs>,
    /// Each type's GC description, or why it was refused.
    pub(crate) descs: FxHashMap<u64, Result<GcDesc, String>>,
}

impl std::fmt::Debug for RawRefs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawRefs").field("segments", &self.segments.len()).field("in_files", &self.files.is_some()).field("types", &self.descs.len()).finish()
    }
}

/// One segment's objects as the graph's nodes take them ([`RawRefs::in_node_order`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Part {
    /// The segment (its index in the walk's order).
    pub(crate) segment: usize,
    /// Its first objects that are no node (at or below an address a segment before it took).
    pub(crate) dropped: usize,
    /// The node of its first object past `dropped`.
    pub(crate) first_node: usize,
}

/// A run of one segment's objects whose references one task resolves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unit {
    pub(crate) part: Part,
    block: usize,
}

/// Why an object's references were not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failed {
    /// Its bytes are not in the dump.
    Missing,
    /// Its type's GC description does not fit it.
    Description,
}

impl RawRefs {
    /// Segments walked.
    pub(crate) fn segments(&self) -> usize {
        self.segments.len()
    }

    /// The segments with objects in the order `graph::nodes` merges them (by first address),
    /// each with the objects it leaves out: those at or below the last address taken before
    /// (a damaged segment list's overlapping segments). `nodes` are the walk's, in segment order.
    pub(crate) fn in_node_order(&self, nodes: &[SegmentNodes]) -> Vec<Part> {
        let mut order: Vec<usize> = (0..nodes.len()).filter(|&k| !nodes[k].is_empty()).collect();
        order.sort_by_key(|&k| nodes[k].first());
        let mut taken: Option<u64> = None;
        let mut next = 0usize;
        let mut out = Vec::with_capacity(order.len());
        for k in order {
            let n = &nodes[k];
            let dropped = match taken {
                Some(last) if n.first().is_some_and(|a| a <= last) => n.addresses().take_while(|&a| a <= last).count(),
                _ => 0,
            };
            out.push(Part { segment: k, dropped, first_node: next });
            if dropped < n.len() {
                next += n.len() - dropped;
                taken = Some(self.segments.get(k).filter(|s| s.objects == n.len()).map_or_else(|| n.addresses().last().unwrap_or(0), |s| s.last));
            }
        }
        out
    }

    /// Frees what segment `k` kept in memory (its references resolved).
    pub(crate) fn release(&mut self, k: usize) {
        if let Some(s) = self.segments.get_mut(k) {
            s.refs = Vec::new();
            s.counts = Vec::new();
            s.wide = Vec::new();
            s.big = Vec::new();
            s.errors = Vec::new();
        }
    }

    /// Whether `unit` is the last of its segment.
    pub(crate) fn ends_segment(&self, unit: &Unit) -> bool {
        self.segments.get(unit.part.segment).is_none_or(|s| unit.block + 1 >= s.blocks.len())
    }

    /// The units of work of `parts`, in node order: each block holding a node.
    pub(crate) fn units(&self, parts: &[Part]) -> Vec<Unit> {
        let mut out = Vec::new();
        for &part in parts {
            let Some(s) = self.segments.get(part.segment) else { continue };
            let mut first = 0;
            for (block, b) in s.blocks.iter().enumerate() {
                if first + b.objects > part.dropped {
                    out.push(Unit { part, block });
                }
                first += b.objects;
            }
        }
        out
    }

    /// The first node of `unit` (its segment's first node past the dropped ones, if it has one).
    pub(crate) fn first_node(&self, unit: &Unit) -> usize {
        let first = unit.block * BLOCK;
        unit.part.first_node + first.saturating_sub(unit.part.dropped)
    }

    /// Calls `each(node, references, failed)` for every node of `unit` in order, `references`
    /// the heap addresses its fields hold (in field order), `failed` why they were not read.
    pub(crate) fn visit(&self, unit: &Unit, mut each: impl FnMut(usize, &[u64], Option<Failed>)) {
        let mut buf: Vec<u64> = Vec::new();
        let Some(s) = self.segments.get(unit.part.segment) else { return };
        let Some(b) = s.blocks.get(unit.block) else { return };
        let (counts, refs): (&[u8], &[u32]) = match &self.files {
            Some(f) if b.in_file => (&f.counts, &f.refs),
            _ => (&s.counts, &s.refs),
        };
        let counts = counts.get(b.counts..b.counts + b.objects).unwrap_or(&[]);
        let refs = refs.get(b.refs..b.refs + b.refs_len).unwrap_or(&[]);
        let first = unit.block * BLOCK;
        let (mut r, mut w, mut g) = (0usize, b.wide, b.big);
        let mut e = s.errors.partition_point(|x| (x.0 as usize) < first);
        let lo = self.lo;
        for (j, &c) in counts.iter().enumerate() {
            let object = first + j;
            let count = if c == BIG {
                g += 1;
                s.big.get(g - 1).copied().unwrap_or(0) as usize
            } else {
                c as usize
            };
            let these = refs.get(r..r + count).unwrap_or(&[]);
            r += count;
            let mut failed = None;
            while let Some(&(at, missing)) = s.errors.get(e)
                && at as usize <= object
            {
                if at as usize == object {
                    failed = Some(if missing { Failed::Missing } else { Failed::Description });
                }
                e += 1;
            }
            if object < unit.part.dropped {
                w += these.iter().filter(|&&x| x == WIDE).count();
                continue;
            }
            buf.clear();
            for &x in these {
                buf.push(if x == WIDE {
                    w += 1;
                    s.wide.get(w - 1).copied().unwrap_or(0)
                } else {
                    lo + 8 * u64::from(x)
                });
            }
            each(unit.part.first_node + (object - unit.part.dropped), &buf, failed);
        }
    }
}

#[cfg(test)]
impl RawRefs {
    /// (the blocks whose references are in the files, all blocks).
    pub(crate) fn blocks_in_files(&self) -> (usize, usize) {
        let blocks = self.segments.iter().flat_map(|s| &s.blocks);
        (blocks.clone().filter(|b| b.in_file).count(), blocks.count())
    }
}

#[cfg(test)]
impl SegmentRefs {
    /// As [`SegmentRefs::desc_of`], the description given.
    pub(crate) fn with_desc(&mut self, mt: u64, desc: Result<GcDesc, String>) -> usize {
        self.descs.push((mt, desc));
        self.descs.len() - 1
    }
}
