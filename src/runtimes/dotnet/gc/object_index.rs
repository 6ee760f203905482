//! Which addresses are objects of the heap, found on demand: each segment is walked (by the
//! walk's own rules, [`crate::runtimes::dotnet::gc::walk::Cursor`]) only as far as the highest address asked about,
//! so a search that stops early reads a small part of the heap. An address is an object when
//! the walk starts one there (free objects are not objects). Each segment keeps the starts it
//! walked past (8 bytes each, in order), so that memory grows with the objects walked.
//!
//! A search marks addresses visited before it knows they are objects (it asks only of those
//! it expands): one bit per 8 bytes of a segment the dump holds in one piece (so the bitmap is
//! at most a 64th of the dump), a hash set for the others.

use crate::runtimes::dotnet::contract::target::Target;
use crate::runtimes::dotnet::gc::gcvars::Segment;
use crate::runtimes::dotnet::gc::walk::{Cursor, TypeShape};
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::HashMap;

struct Lazy<'a> {
    segment: Segment,
    cursor: Cursor<'a>,
    /// Object starts walked so far, ascending.
    starts: Vec<u64>,
    /// Visited addresses, one bit per 8 bytes from the segment's start (allocated on the first
    /// mark; only for a segment in one piece in the dump).
    visited: Vec<u64>,
}

/// The heap's objects, walked lazily (see the module doc).
pub(crate) struct ObjectIndex<'a> {
    t: &'a Target<'a>,
    free_mt: u64,
    unmask: u64,
    /// Sorted by start.
    segments: Vec<Lazy<'a>>,
    shapes: FxHashMap<u64, Result<TypeShape, String>>,
    /// Visited addresses of segments without a bitmap.
    visited: FxHashSet<u64>,
    /// The lowest segment start and highest `allocated`: a cheap first test.
    pub(crate) bounds: (u64, u64),
    /// Objects the lazy walk went past (free ones included).
    pub(crate) walked: u64,
}

impl<'a> ObjectIndex<'a> {
    pub(crate) fn new(t: &'a Target<'a>, contexts: &HashMap<u64, u64>, segments: &[Segment], free_mt: u64) -> ObjectIndex<'a> {
        let mut segs: Vec<Lazy<'a>> = segments.iter().filter(|s| s.allocated > s.start).map(|s| Lazy { segment: *s, cursor: Cursor::new(t, contexts, s), starts: Vec::new(), visited: Vec::new() }).collect();
        segs.sort_by_key(|s| s.segment.start);
        let bounds = (segs.first().map(|s| s.segment.start).unwrap_or(1), segs.iter().map(|s| s.segment.allocated).max().unwrap_or(0));
        let unmask = t.global("ObjectToMethodTableUnmask").unwrap_or(7);
        ObjectIndex { t, free_mt, unmask, segments: segs, shapes: FxHashMap::default(), visited: FxHashSet::default(), bounds, walked: 0 }
    }

    /// The segment holding `a` (the last one starting at or below it).
    fn segment_of(&self, a: u64) -> Option<usize> {
        let i = self.segments.partition_point(|s| s.segment.start <= a).checked_sub(1)?;
        (a < self.segments[i].segment.allocated).then_some(i)
    }

    /// Walks segment `i` past `a` (or to its end).
    fn walk_past(&mut self, i: usize, a: u64) {
        let (t, free_mt) = (self.t, self.free_mt);
        let shapes = &mut self.shapes;
        let s = &mut self.segments[i];
        while s.cursor.at <= a {
            let mut shape_of = |mt: u64| shapes.entry(mt).or_insert_with(|| TypeShape::read(t, mt, free_mt)).clone();
            let Some(m) = s.cursor.next(&mut shape_of) else { break };
            self.walked += 1;
            if m.mt != free_mt {
                s.starts.push(m.at);
            }
        }
    }

    /// Segment and index of the object starting at `a`, if one does.
    fn find(&mut self, a: u64) -> Option<(usize, usize)> {
        if a < self.bounds.0 || a > self.bounds.1 || !a.is_multiple_of(8) {
            return None;
        }
        let i = self.segment_of(a)?;
        self.walk_past(i, a);
        let k = self.segments[i].starts.binary_search(&a).ok()?;
        Some((i, k))
    }

    /// Whether an object of the heap starts at `a`.
    pub(crate) fn is_object(&mut self, a: u64) -> bool {
        self.find(a).is_some()
    }

    /// Marks the address `a` visited (whether or not an object starts there): true when it is
    /// in a segment, 8-aligned, and not visited before.
    pub(crate) fn visit(&mut self, a: u64) -> bool {
        if a < self.bounds.0 || a > self.bounds.1 || !a.is_multiple_of(8) {
            return false;
        }
        let Some(i) = self.segment_of(a) else { return false };
        let s = &mut self.segments[i];
        if !s.cursor.in_one_piece() {
            return self.visited.insert(a);
        }
        if s.visited.is_empty() {
            s.visited = vec![0; ((s.segment.allocated - s.segment.start) / 8).div_ceil(64) as usize];
        }
        let k = ((a - s.segment.start) / 8) as usize;
        let (w, bit) = (k / 64, 1u64 << (k % 64));
        let Some(word) = s.visited.get_mut(w) else { return false };
        let fresh = *word & bit == 0;
        *word |= bit;
        fresh
    }

    /// Forgets every visited mark (a new search).
    pub(crate) fn clear_visited(&mut self) {
        for s in &mut self.segments {
            s.visited = Vec::new();
        }
        self.visited.clear();
    }

    /// The MethodTable of the object at `a` and its size as SOS counts it (`a` an object the
    /// index has found).
    pub(crate) fn object(&mut self, a: u64) -> Option<(u64, u64)> {
        let mt = self.t.mem.read_u64(a).ok()? & !self.unmask;
        let shape = self.shapes.get(&mt)?.clone().ok()?;
        let count = if shape.component_size != 0 { self.t.mem.read_u32(a + 8).ok()? } else { 0 };
        Some((mt, shape.size(count)))
    }

    /// Walks every segment to its end.
    pub(crate) fn walk_all(&mut self) {
        for i in 0..self.segments.len() {
            self.walk_past(i, u64::MAX - 1);
        }
    }

    /// The MethodTables the walk has met so far (readable ones).
    pub(crate) fn method_tables(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.shapes.iter().filter(|(mt, s)| s.is_ok() && **mt != self.free_mt).map(|(mt, _)| *mt).collect();
        v.sort_unstable();
        v
    }

    /// Segments whose walk stopped early so far: (segment, where, why).
    pub(crate) fn broken(&self) -> Vec<(&Segment, u64, String)> {
        self.segments.iter().filter_map(|s| s.cursor.broken.as_ref().map(|(at, why)| (&s.segment, *at, why.clone()))).collect()
    }
}
