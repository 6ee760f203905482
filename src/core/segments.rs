//! PT_LOAD segments: the process memory the core holds. A segment whose file size is smaller
//! than its memory size holds only its first `filesz` bytes; the rest was not saved (kernel cores
//! leave out file-backed text, for instance) and reads there are *unavailable*, never zeros.

use std::sync::atomic::{AtomicUsize, Ordering};

/// One PT_LOAD segment, with its file bytes clamped to what the file really has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub vaddr: u64,
    pub memsz: u64,
    pub(crate) offset: u64,
    /// p_filesz as the header says.
    pub filesz: u64,
    /// Bytes present in the file from `offset` (less than `filesz` when the core is truncated).
    pub present: u64,
    pub(crate) flags: u32,
}

impl Segment {
    pub fn end(&self) -> u64 {
        self.vaddr.saturating_add(self.memsz)
    }

    pub(crate) fn contains(&self, addr: u64) -> bool {
        addr >= self.vaddr && addr < self.end()
    }

    pub(crate) fn is_truncated(&self) -> bool {
        self.present < self.filesz
    }
}

/// Why an address could not be read from the core's own bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Absence {
    /// No segment covers the address: it was not mapped (or not dumped at all).
    NotMapped,
    /// A segment covers it but its bytes were not written to the core (filesz < memsz).
    NotSaved,
    /// The segment's bytes should be there but the file ends first.
    Truncated,
}

#[derive(Debug, Default)]
pub struct Segments {
    /// Sorted by vaddr (stable: equal starts keep their header order). Overlapping segments are
    /// kept; a lookup uses the one starting nearest below the address (the later of equals).
    list: Vec<Segment>,
    /// Each segment starts at or after the end of the one before: the segment covering an
    /// address is then the only one that can, and `last` may answer for it.
    disjoint: bool,
    /// The two segments `find` answered last, the latest first: reads come in runs on one
    /// segment (a structure's fields, a heap walk, a stack) and go back and forth between two
    /// (an object and its method table), so most skip the search (a .NET run makes ~100k).
    last: [AtomicUsize; 2],
}

impl Clone for Segments {
    fn clone(&self) -> Segments {
        let last = self.last.each_ref().map(|l| AtomicUsize::new(l.load(Ordering::Relaxed)));
        Segments { list: self.list.clone(), disjoint: self.disjoint, last }
    }
}

impl Segments {
    pub(crate) fn new(mut list: Vec<Segment>) -> Segments {
        list.sort_by_key(|s| s.vaddr);
        let disjoint = list.windows(2).all(|w| w[1].vaddr >= w[0].end());
        Segments { list, disjoint, last: [AtomicUsize::new(0), AtomicUsize::new(0)] }
    }

    pub fn iter(&self) -> impl Iterator<Item = &Segment> {
        self.list.iter()
    }

    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    /// How many segments overlap one before them, and the start of the first that does; `None`
    /// when none do (a well-formed core).
    pub(crate) fn overlaps(&self) -> Option<(usize, u64)> {
        let mut end = 0u64;
        let mut count = 0;
        let mut first = None;
        for s in self.list.iter().filter(|s| s.memsz > 0) {
            if s.vaddr < end {
                count += 1;
                first.get_or_insert(s.vaddr);
            }
            end = end.max(s.end());
        }
        first.map(|a| (count, a))
    }

    /// The segment covering `addr`.
    pub(crate) fn find(&self, addr: u64) -> Option<&Segment> {
        let [latest, before] = &self.last;
        let recent = latest.load(Ordering::Relaxed);
        if self.disjoint {
            if let Some(s) = self.list.get(recent)
                && s.contains(addr)
            {
                return Some(s);
            }
            let other = before.load(Ordering::Relaxed);
            if let Some(s) = self.list.get(other)
                && s.contains(addr)
            {
                before.store(recent, Ordering::Relaxed);
                latest.store(other, Ordering::Relaxed);
                return Some(s);
            }
        }
        let i = self.list.partition_point(|s| s.vaddr <= addr);
        let found = (i.saturating_sub(4)..i).rev().find(|&j| self.list[j].contains(addr))?;
        if found != recent {
            before.store(recent, Ordering::Relaxed);
            latest.store(found, Ordering::Relaxed);
        }
        self.list.get(found)
    }

    /// Where `addr` lives in the file and how many contiguous bytes from there the file holds.
    pub fn locate(&self, addr: u64) -> Result<(u64, u64), Absence> {
        let seg = self.find(addr).ok_or(Absence::NotMapped)?;
        let delta = addr - seg.vaddr;
        if delta >= seg.filesz {
            return Err(Absence::NotSaved);
        }
        if delta >= seg.present {
            return Err(Absence::Truncated);
        }
        Ok((seg.offset + delta, seg.present - delta))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(vaddr: u64, memsz: u64, offset: u64, filesz: u64, present: u64) -> Segment {
        Segment { vaddr, memsz, offset, filesz, present, flags: 4 }
    }

    #[test]
    fn bytes_past_filesz_are_not_saved_rather_than_zero() {
        let s = Segments::new(vec![seg(0x1000, 0x2000, 0x400, 0x1000, 0x1000)]);
        assert_eq!(s.locate(0x1010), Ok((0x410, 0xff0)));
        assert_eq!(s.locate(0x2010), Err(Absence::NotSaved));
        assert_eq!(s.locate(0x3000), Err(Absence::NotMapped));
        assert_eq!(s.locate(0x0fff), Err(Absence::NotMapped));
    }

    #[test]
    fn a_truncated_file_is_told_apart_from_an_unsaved_range() {
        let s = Segments::new(vec![seg(0x1000, 0x1000, 0x400, 0x1000, 0x10)]);
        assert_eq!(s.locate(0x1008), Ok((0x408, 8)));
        assert_eq!(s.locate(0x1010), Err(Absence::Truncated));
    }

    #[test]
    fn overlapping_segments_are_counted() {
        let s = Segments::new(vec![seg(0x1000, 0x3000, 0, 0, 0), seg(0x2000, 0x1000, 0, 0, 0), seg(0x5000, 0x1000, 0, 0, 0)]);
        assert_eq!(s.overlaps(), Some((1, 0x2000)));
        assert_eq!(Segments::new(vec![seg(0x1000, 0x1000, 0, 0, 0), seg(0x2000, 0x1000, 0, 0, 0)]).overlaps(), None);
    }

    #[test]
    fn the_last_hit_answers_as_the_search_does() {
        // Disjoint: the remembered segment is used while it covers the address, and only then.
        let s = Segments::new(vec![seg(0x1000, 0x1000, 0, 0x1000, 0x1000), seg(0x3000, 0x1000, 0x1000, 0x1000, 0x1000)]);
        assert!(s.disjoint);
        for (addr, want) in [(0x3008, Ok((0x1008, 0xff8))), (0x3010, Ok((0x1010, 0xff0))), (0x1010, Ok((0x10, 0xff0))), (0x2000, Err(Absence::NotMapped)), (0x1fff, Ok((0xfff, 1))), (0x4000, Err(Absence::NotMapped))] {
            assert_eq!(s.locate(addr), want, "{addr:#x}");
        }
        // Overlapping: never from the cache (the nearest start below wins, as before).
        let o = Segments::new(vec![seg(0x1000, 0x3000, 0, 0x3000, 0x3000), seg(0x2000, 0x1000, 0x8000, 0x1000, 0x1000)]);
        assert!(!o.disjoint);
        assert_eq!(o.locate(0x1010), Ok((0x10, 0x2ff0)));
        assert_eq!(o.locate(0x2010), Ok((0x8010, 0xff0)));
        assert_eq!(o.locate(0x1010), Ok((0x10, 0x2ff0)));
    }

    /// Going back and forth between segments (the two remembered, then a third) answers as
    /// the search does, and an address between segments is in none.
    #[test]
    fn remembered_segments_answer_as_the_search() {
        let list = (0..100).map(|i| seg(0x10000 * i, 0x1000, i * 0x1000, 0x1000, 0x1000)).collect();
        let s = Segments::new(list);
        for round in 0..3u64 {
            for i in [7u64, 42, 7, 42, 99, 7, 0] {
                let addr = 0x10000 * i + 0x10 * round;
                assert_eq!(s.locate(addr), Ok((i * 0x1000 + 0x10 * round, 0x1000 - 0x10 * round)), "segment {i}");
                assert_eq!(s.locate(addr + 0x1000), Err(Absence::NotMapped), "past segment {i}");
            }
        }
    }

    #[test]
    fn finds_among_many_sorted_segments() {
        let list = (0..100).rev().map(|i| seg(0x10000 * i, 0x1000, i * 0x1000, 0x1000, 0x1000)).collect();
        let s = Segments::new(list);
        assert_eq!(s.locate(0x10000 * 42 + 5), Ok((42 * 0x1000 + 5, 0x1000 - 5)));
        assert_eq!(s.locate(0x10000 * 42 + 0x1000), Err(Absence::NotMapped));
    }
}
