//! Which units of a module's DWARF cover an address, known without parsing the units.
//!
//! addr2line's own index parses every unit (its abbreviations, first DIE and line-table header)
//! before the first lookup: 4 126 units and about 80 M instructions for libc, for the few dozen
//! addresses a dump asks about. This index reads only the unit headers and `.debug_aranges`;
//! `dwarf.rs` then parses just the units an address falls in, each once. A unit `.debug_aranges`
//! does not list is parsed on the module's first lookup for its DIE ranges (as addr2line does);
//! without any `.debug_aranges` there is nothing to gain and `dwarf.rs` uses addr2line's index.
//!
//! Candidates come in addr2line's order (by range end, then unit), and the first unit that has a
//! function or a line at the address answers, as in `addr2line::Context::find_frames`.

use super::dwarf::Reader;
use gimli::{Reader as _, Section as _};

/// Abbreviations read from one table before giving up on it.
const MAX_ABBREVIATIONS: usize = 1 << 16;

/// A unit's bytes in `.debug_info`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UnitSpan {
    pub(crate) offset: usize,
    pub(crate) len: usize,
}

#[derive(Debug, Clone, Copy)]
struct Range {
    begin: u64,
    end: u64,
    /// The lowest `begin` of this range and of every range after it (addr2line's `min_begin`),
    /// so a scan for an address stops early.
    min_begin: u64,
    unit: usize,
}

pub(crate) struct UnitIndex {
    /// Compile units (not type or partial units), in section order.
    units: Vec<UnitSpan>,
    /// By `(end, unit)`.
    ranges: Vec<Range>,
    /// Units `.debug_aranges` gives no range for: their DIE ranges are read on the first lookup.
    unlisted: Vec<usize>,
}

impl UnitIndex {
    /// The index of `dwarf`'s units; `None` without `.debug_aranges` or when the unit headers or
    /// the address ranges cannot be read (addr2line's index then decides, and fails alike).
    pub(crate) fn read(dwarf: &gimli::Dwarf<Reader<'_>>) -> Option<UnitIndex> {
        if dwarf.debug_aranges.reader().is_empty() {
            return None;
        }
        let mut units = Vec::new();
        let mut headers = dwarf.units();
        while let Some(header) = headers.next().ok()? {
            let Some(offset) = header.debug_info_offset() else { continue };
            if !matches!(header.type_(), gimli::UnitType::Compilation | gimli::UnitType::Skeleton(_) | gimli::UnitType::SplitCompilation(_)) {
                continue;
            }
            units.push(UnitSpan { offset: offset.0, len: header.length_including_self() });
        }
        let mut ranges = Vec::new();
        let mut listed = vec![false; units.len()];
        let mut sets = dwarf.debug_aranges.headers();
        while let Some(set) = sets.next().ok()? {
            let Ok(unit) = units.binary_search_by_key(&set.debug_info_offset().0, |u| u.offset) else { continue };
            let mut entries = set.entries();
            // Errors in one entry are skipped, as addr2line does (the iterator stops on the ones
            // it cannot step over).
            while let Some(entry) = entries.next().transpose() {
                let Ok(entry) = entry else { continue };
                if entry.length() != 0 {
                    let r = entry.range();
                    ranges.push(Range { begin: r.begin, end: r.end, min_begin: 0, unit });
                    listed[unit] = true;
                }
            }
        }
        let unlisted = (0..units.len()).filter(|&u| !listed[u]).collect();
        let mut index = UnitIndex { units, ranges, unlisted };
        index.sort();
        Some(index)
    }

    /// Reads the DIE ranges of the units `.debug_aranges` left out (once): the unit's own
    /// `DW_AT_ranges` or low and high pc, else its line table's sequences, as addr2line.
    pub(crate) fn complete(&mut self, dwarf: &gimli::Dwarf<Reader<'_>>) {
        if self.unlisted.is_empty() {
            return;
        }
        for unit in std::mem::take(&mut self.unlisted) {
            let Some(span) = self.units.get(unit) else { continue };
            for (begin, end) in die_ranges(dwarf, span.offset) {
                self.ranges.push(Range { begin, end, min_begin: 0, unit });
            }
        }
        self.sort();
    }

    fn sort(&mut self) {
        self.ranges.sort_unstable_by_key(|r| (r.end, r.unit));
        let mut min = u64::MAX;
        for r in self.ranges.iter_mut().rev() {
            min = min.min(r.begin);
            r.min_begin = min;
        }
    }

    /// The units whose ranges hold `probe`, in addr2line's order (a unit may come twice).
    pub(crate) fn candidates(&self, probe: u64) -> Vec<usize> {
        let high = probe.saturating_add(1);
        let start = self.ranges.partition_point(|r| r.end <= probe);
        self.ranges[start..]
            .iter()
            .take_while(|r| high > r.min_begin)
            .filter(|r| (r.begin..r.end).contains(&probe))
            .map(|r| r.unit)
            .collect()
    }

    pub(crate) fn span(&self, unit: usize) -> Option<UnitSpan> {
        self.units.get(unit).copied()
    }
}

/// The link-time ranges of the unit at `offset` from its DIE, else from its line table.
fn die_ranges(dwarf: &gimli::Dwarf<Reader<'_>>, offset: usize) -> Vec<(u64, u64)> {
    let Ok(header) = dwarf.debug_info.header_from_offset(gimli::DebugInfoOffset(offset)) else { return Vec::new() };
    let Ok(unit) = dwarf.unit(header) else { return Vec::new() };
    let mut out = Vec::new();
    if let Ok(mut ranges) = dwarf.unit_ranges(&unit) {
        while let Ok(Some(r)) = ranges.next() {
            out.push((r.begin, r.end));
        }
    }
    if out.is_empty()
        && let Some(program) = unit.line_program.clone()
        && let Ok((_, sequences)) = program.sequences()
    {
        out.extend(sequences.iter().filter(|s| s.start < s.end).map(|s| (s.start, s.end)));
    }
    out
}

/// Whether the abbreviation table at `offset` of `.debug_abbrev` lets a DIE refer outside its
/// unit (`DW_FORM_ref_addr`, a supplementary file's forms, or a form only the DIE names); an
/// unreadable table counts as such. A unit parsed on its own cannot follow such a reference.
pub(crate) fn may_refer_outside(dwarf: &gimli::Dwarf<Reader<'_>>, offset: usize) -> bool {
    let mut r = *dwarf.debug_abbrev.reader();
    if r.skip(offset).is_err() {
        return true;
    }
    for _ in 0..MAX_ABBREVIATIONS {
        let Ok(code) = r.read_uleb128() else { return true };
        if code == 0 {
            return false;
        }
        // The tag and the children flag.
        if r.read_uleb128().is_err() || r.read_u8().is_err() {
            return true;
        }
        loop {
            let (Ok(name), Ok(form)) = (r.read_uleb128(), r.read_uleb128()) else { return true };
            if name == 0 && form == 0 {
                break;
            }
            let Ok(form) = u16::try_from(form) else { return true };
            match gimli::DwForm(form) {
                gimli::DW_FORM_ref_addr | gimli::DW_FORM_ref_sup4 | gimli::DW_FORM_ref_sup8 | gimli::DW_FORM_GNU_ref_alt | gimli::DW_FORM_indirect => return true,
                gimli::DW_FORM_implicit_const if r.read_sleb128().is_err() => return true,
                _ => {}
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(ranges: &[(u64, u64, usize)]) -> UnitIndex {
        let units = (0..4).map(|i| UnitSpan { offset: i * 100, len: 100 }).collect();
        let ranges = ranges.iter().map(|&(begin, end, unit)| Range { begin, end, min_begin: 0, unit }).collect();
        let mut index = UnitIndex { units, ranges, unlisted: Vec::new() };
        index.sort();
        index
    }

    #[test]
    fn candidates_in_addr2line_order() {
        // Unit 2 spans the others (a weak symbol's unit); it ends last, so it comes last.
        let i = index(&[(0x1000, 0x2000, 0), (0x2000, 0x3000, 1), (0x0800, 0x4000, 2), (0x3000, 0x3100, 3)]);
        assert_eq!(i.candidates(0x1000), vec![0, 2]);
        assert_eq!(i.candidates(0x1fff), vec![0, 2]);
        assert_eq!(i.candidates(0x2000), vec![1, 2]);
        assert_eq!(i.candidates(0x3050), vec![3, 2]);
        assert_eq!(i.candidates(0x0700), Vec::<usize>::new());
        assert_eq!(i.candidates(0x4000), Vec::<usize>::new());
        assert_eq!(i.candidates(u64::MAX), Vec::<usize>::new());
    }

    fn dwarf_with_abbrev(bytes: &'static [u8]) -> gimli::Dwarf<Reader<'static>> {
        gimli::Dwarf { debug_abbrev: gimli::DebugAbbrev::new(bytes, gimli::RunTimeEndian::Little), ..Default::default() }
    }

    #[test]
    fn references_outside_the_unit_are_seen() {
        // code 1, DW_TAG_compile_unit, children, (DW_AT_name, strp), (DW_AT_language, implicit_const 12), end; end of table.
        let local: &[u8] = &[1, 0x11, 1, 0x03, 0x0e, 0x13, 0x21, 12, 0, 0, 0];
        assert!(!may_refer_outside(&dwarf_with_abbrev(local), 0));
        // code 2 has (DW_AT_abstract_origin, ref_addr).
        let outside: &[u8] = &[1, 0x11, 1, 0x03, 0x0e, 0, 0, 2, 0x1d, 0, 0x31, 0x10, 0, 0, 0];
        assert!(may_refer_outside(&dwarf_with_abbrev(outside), 0));
        // Cut short, or past the end.
        assert!(may_refer_outside(&dwarf_with_abbrev(&[1, 0x11, 1, 0x03]), 0));
        assert!(may_refer_outside(&dwarf_with_abbrev(local), 100));
    }
}
