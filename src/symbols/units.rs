//! Which units of a module's DWARF cover an address, known without parsing the units.
//!
//! addr2line's own index parses every unit (its abbreviations, first DIE and line-table header)
//! before the first lookup: 2 063 units and about 80 M instructions for libc, for the few dozen
//! addresses a dump asks about. This index reads only the unit headers and `.debug_aranges`;
//! `dwarf.rs` then parses just the units an address falls in, each once. A unit `.debug_aranges`
//! does not list is parsed on the module's first lookup for its DIE ranges (as addr2line does);
//! without any `.debug_aranges` there is nothing to gain and `dwarf.rs` uses addr2line's index.
//!
//! With `--cache-dir`, the completed index is kept beside the debug file's inflated sections
//! (keyed by the same file identity, see `process/section_cache.rs`), so a later run neither
//! walks every unit header (scattered over `.debug_info`: libc's 2 063 headers were a page fault
//! each in ~16 pages) nor reads `.debug_aranges` and the left-out units' root DIEs again: 4.4 M
//! instructions of a cached memcached run's 22 M. An entry read back is checked like any input
//! (its checksum, its counts against its length, each unit inside `.debug_info` and in order,
//! each range's unit known) and ranges are sorted again; anything else is no entry.
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
    /// Read from the cache, or already written to it (or there is none).
    stored: bool,
}

/// The name and format version of a kept index. A change to what [`UnitIndex::read`] or
/// [`UnitIndex::complete`] find, or to the layout, must bump the version: older entries then miss.
const KEPT_AS: &str = "unit_index";
const KEPT_VERSION: u64 = 1;
/// A kept index's unit count and range count, then each unit (offset, length) and each range
/// (begin, end, unit), all little-endian u64.
const KEPT_HEADER: usize = 16;
const KEPT_UNIT: usize = 16;
const KEPT_RANGE: usize = 24;

impl UnitIndex {
    /// The index of `dwarf`'s units; `None` without `.debug_aranges` or when the address ranges
    /// cannot be read (addr2line's index then decides). Past a unit header that cannot be read,
    /// only the units `.debug_aranges` names are known.
    pub(crate) fn read(dwarf: &gimli::Dwarf<Reader<'_>>) -> Option<UnitIndex> {
        if dwarf.debug_aranges.reader().is_empty() {
            return None;
        }
        let compile = |h: &gimli::UnitHeader<Reader<'_>>| {
            matches!(h.type_(), gimli::UnitType::Compilation | gimli::UnitType::Skeleton(_) | gimli::UnitType::SplitCompilation(_))
        };
        let mut units = Vec::new();
        let mut headers = dwarf.units();
        // Where a header that cannot be read stopped the walk: the units after it are still
        // found from `.debug_aranges`, which gives their offsets (one damaged unit header
        // would otherwise cost every unit of the module).
        let mut broken_at = None;
        let mut end = 0;
        loop {
            match headers.next() {
                Ok(Some(header)) => {
                    let Some(offset) = header.debug_info_offset() else { continue };
                    end = offset.0.saturating_add(header.length_including_self());
                    if compile(&header) {
                        units.push(UnitSpan { offset: offset.0, len: header.length_including_self() });
                    }
                }
                Ok(None) => break,
                Err(_) => {
                    broken_at = Some(end);
                    break;
                }
            }
        }
        // (begin, end, unit offset), then by unit once every unit is known.
        let mut listed_ranges = Vec::new();
        let mut found = Vec::new();
        let mut sets = dwarf.debug_aranges.headers();
        while let Some(set) = sets.next().ok()? {
            let offset = set.debug_info_offset().0;
            if units.binary_search_by_key(&offset, |u| u.offset).is_err() {
                // Past a damaged header: the unit there, if its own header reads.
                if broken_at.is_none_or(|at| offset <= at) {
                    continue;
                }
                let Some(header) = dwarf.debug_info.header_from_offset(gimli::DebugInfoOffset(offset)).ok().filter(|h| compile(h)) else { continue };
                found.push(UnitSpan { offset, len: header.length_including_self() });
            }
            let mut entries = set.entries();
            // Errors in one entry are skipped, as addr2line does (the iterator stops on the ones
            // it cannot step over).
            while let Some(entry) = entries.next().transpose() {
                let Ok(entry) = entry else { continue };
                if entry.length() != 0 {
                    let r = entry.range();
                    listed_ranges.push((r.begin, r.end, offset));
                }
            }
        }
        if !found.is_empty() {
            units.extend(found);
            units.sort_unstable_by_key(|u| u.offset);
            units.dedup_by_key(|u| u.offset);
        }
        let mut ranges = Vec::with_capacity(listed_ranges.len());
        let mut listed = vec![false; units.len()];
        for (begin, end, offset) in listed_ranges {
            let Ok(unit) = units.binary_search_by_key(&offset, |u| u.offset) else { continue };
            ranges.push(Range { begin, end, min_begin: 0, unit });
            listed[unit] = true;
        }
        let unlisted = (0..units.len()).filter(|&u| !listed[u]).collect();
        let mut index = UnitIndex { units, ranges, unlisted, stored: false };
        index.sort();
        Some(index)
    }

    /// The index an earlier run kept for `file` (see the module docs); `None` without a cache
    /// or a whole entry.
    pub(crate) fn kept(file: &crate::process::ElfFile, dwarf: &gimli::Dwarf<Reader<'_>>) -> Option<UnitIndex> {
        let info = dwarf.debug_info.reader().len();
        // At most a unit per 8 bytes of `.debug_info` and a few ranges for each: a larger entry
        // is not one knot wrote for this file.
        let bound = (info as u64).saturating_mul(8).saturating_add(1 << 20);
        let bytes = file.cached_derived(KEPT_AS, KEPT_VERSION, bound)?;
        UnitIndex::decode(&bytes, info)
    }

    /// Keeps the completed index for later runs, once (nothing without a cache).
    pub(crate) fn keep(&mut self, file: &crate::process::ElfFile) {
        if self.stored || !self.unlisted.is_empty() {
            return;
        }
        self.stored = true;
        file.store_derived(KEPT_AS, KEPT_VERSION, || self.encode());
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(KEPT_HEADER + self.units.len() * KEPT_UNIT + self.ranges.len() * KEPT_RANGE);
        for n in [self.units.len(), self.ranges.len()] {
            out.extend((n as u64).to_le_bytes());
        }
        for u in &self.units {
            out.extend((u.offset as u64).to_le_bytes());
            out.extend((u.len as u64).to_le_bytes());
        }
        for r in &self.ranges {
            for v in [r.begin, r.end, r.unit as u64] {
                out.extend(v.to_le_bytes());
            }
        }
        out
    }

    /// A kept index, checked against a `.debug_info` of `info` bytes.
    fn decode(bytes: &[u8], info: usize) -> Option<UnitIndex> {
        let word = |at: usize| crate::bytes::u64_at(bytes, at);
        let count = |at: usize| word(at).and_then(|n| usize::try_from(n).ok());
        let (n_units, n_ranges) = (count(0)?, count(8)?);
        let ranges_at = n_units.checked_mul(KEPT_UNIT)?.checked_add(KEPT_HEADER)?;
        if ranges_at.checked_add(n_ranges.checked_mul(KEPT_RANGE)?)? != bytes.len() {
            return None;
        }
        let mut units = Vec::with_capacity(n_units);
        let mut next = 0;
        for i in 0..n_units {
            let at = KEPT_HEADER + i * KEPT_UNIT;
            let (offset, len) = (count(at)?, count(at + 8)?);
            // In section order, not overlapping, and inside `.debug_info`.
            if offset < next || len == 0 || offset.checked_add(len)? > info {
                return None;
            }
            next = offset + len;
            units.push(UnitSpan { offset, len });
        }
        let mut ranges = Vec::with_capacity(n_ranges);
        for i in 0..n_ranges {
            let at = ranges_at + i * KEPT_RANGE;
            let unit = count(at + 16).filter(|&u| u < n_units)?;
            ranges.push(Range { begin: word(at)?, end: word(at + 8)?, min_begin: 0, unit });
        }
        let mut index = UnitIndex { units, ranges, unlisted: Vec::new(), stored: true };
        // Written sorted, so one pass (and `min_begin` set); ranges out of order are sorted again.
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
    let Some(unit) = root_only_unit(dwarf, header).or_else(|| dwarf.unit(header).ok()) else { return Vec::new() };
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

/// The unit of `header` knowing only its root DIE's abbreviation, which is all its ranges need:
/// the table is scanned, not parsed, up to the root's code. (libc's 126 units `.debug_aranges`
/// leaves out have a table each; parsing them whole to read one DIE was 2.3 M instructions a
/// run.) `None` when the code is not in the table or the table is unreadable before it; a table
/// damaged only after it still gives the root, where a whole parse would give nothing.
fn root_only_unit<'p>(dwarf: &gimli::Dwarf<Reader<'p>>, header: gimli::UnitHeader<Reader<'p>>) -> Option<gimli::Unit<Reader<'p>>> {
    let code = header.range_from(header.root_offset()..).ok()?.read_uleb128().ok()?;
    let table = dwarf.debug_abbrev.reader().slice().get(header.debug_abbrev_offset().0..)?;
    let mut r = gimli::EndianSlice::new(table, dwarf.debug_abbrev.reader().endian());
    for _ in 0..MAX_ABBREVIATIONS {
        let start = table.len() - r.len();
        let this = declaration(&mut r, |_| {})?;
        if this == 0 {
            return None;
        }
        if this == code {
            // The one declaration, ended as a table ends, parsed by gimli as it parses tables.
            let mut one = table.get(start..table.len() - r.len())?.to_vec();
            one.push(0);
            let abbreviations = gimli::DebugAbbrev::new(&one, r.endian()).abbreviations(gimli::DebugAbbrevOffset(0)).ok()?;
            return gimli::Unit::new_with_abbreviations(dwarf, header, std::sync::Arc::new(abbreviations)).ok();
        }
    }
    None
}

/// Reads one declaration off an abbreviation table: its code, 0 at the table's end; `None` when
/// the bytes end or break first. Each attribute's form is shown to `form` on the way (an
/// implicit constant's value is read past).
fn declaration(r: &mut Reader<'_>, mut form: impl FnMut(u64)) -> Option<u64> {
    let code = r.read_uleb128().ok()?;
    if code == 0 {
        return Some(0);
    }
    // The tag and the children flag, then the attributes up to the (0, 0) pair.
    r.read_uleb128().ok()?;
    r.read_u8().ok()?;
    loop {
        let (name, f) = (r.read_uleb128().ok()?, r.read_uleb128().ok()?);
        if name == 0 && f == 0 {
            return Some(code);
        }
        form(f);
        if f == u64::from(gimli::DW_FORM_implicit_const.0) {
            r.read_sleb128().ok()?;
        }
    }
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
        let mut outside = false;
        let refers_outside = |form: u64| {
            u16::try_from(form).map_or(true, |form| {
                matches!(
                    gimli::DwForm(form),
                    gimli::DW_FORM_ref_addr | gimli::DW_FORM_ref_sup4 | gimli::DW_FORM_ref_sup8 | gimli::DW_FORM_GNU_ref_alt | gimli::DW_FORM_indirect
                )
            })
        };
        match declaration(&mut r, |form| outside |= refers_outside(form)) {
            // Unreadable.
            None => return true,
            Some(0) => return false,
            Some(_) if outside => return true,
            Some(_) => {}
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
        let mut index = UnitIndex { units, ranges, unlisted: Vec::new(), stored: false };
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

    type Ranges = Vec<(u64, u64)>;

    /// A DWARF 4 unit whose root DIE (abbreviation code `code`) has `DW_AT_low_pc` 0x1000 (addr)
    /// and `DW_AT_high_pc` 0x40 (data4), read with the abbreviation table `abbrev`.
    fn root_ranges(abbrev: &'static [u8], code: u8) -> (Option<Ranges>, Ranges) {
        let mut info = vec![0u8; 4];
        info.extend(4u16.to_le_bytes());
        info.extend(0u32.to_le_bytes());
        info.push(8);
        info.push(code);
        info.extend(0x1000u64.to_le_bytes());
        info.extend(0x40u32.to_le_bytes());
        let len = (info.len() - 4) as u32;
        info[..4].copy_from_slice(&len.to_le_bytes());
        let info: &'static [u8] = Vec::leak(info);
        let dwarf = gimli::Dwarf {
            debug_abbrev: gimli::DebugAbbrev::new(abbrev, gimli::RunTimeEndian::Little),
            debug_info: gimli::DebugInfo::new(info, gimli::RunTimeEndian::Little),
            ..Default::default()
        };
        let header = dwarf.debug_info.header_from_offset(gimli::DebugInfoOffset(0)).unwrap();
        let root = root_only_unit(&dwarf, header).map(|unit| {
            let mut out = Vec::new();
            let mut ranges = dwarf.unit_ranges(&unit).unwrap();
            while let Ok(Some(r)) = ranges.next() {
                out.push((r.begin, r.end));
            }
            out
        });
        (root, die_ranges(&dwarf, 0))
    }

    #[test]
    fn a_root_is_read_with_its_one_abbreviation() {
        // code 1: DW_TAG_variable, no children, (DW_AT_name, string); code 2: DW_TAG_compile_unit,
        // no children, (DW_AT_low_pc, addr), (DW_AT_high_pc, data4); end of table.
        const TABLE: &[u8] = &[1, 0x34, 0, 0x03, 0x08, 0, 0, 2, 0x11, 0, 0x11, 0x01, 0x12, 0x06, 0, 0, 0];
        let whole = Some(vec![(0x1000, 0x1040)]);
        assert_eq!(root_ranges(TABLE, 2), (whole.clone(), vec![(0x1000, 0x1040)]));
        // A code the table does not have, a table cut inside the root's declaration, and bytes
        // that are no table (an over-long LEB128): nothing, from either reading.
        assert_eq!(root_ranges(TABLE, 3), (None, vec![]));
        assert_eq!(root_ranges(&TABLE[..11], 2), (None, vec![]));
        assert_eq!(root_ranges(&[0xff; 16], 2), (None, vec![]));
        // Damaged only after the root's declaration (a duplicate code gimli rejects whole):
        // the root is still read.
        const DUPLICATE_AFTER: &[u8] = &[2, 0x11, 0, 0x11, 0x01, 0x12, 0x06, 0, 0, 2, 0x34, 0, 0, 0, 0];
        assert!(gimli::DebugAbbrev::new(DUPLICATE_AFTER, gimli::RunTimeEndian::Little).abbreviations(gimli::DebugAbbrevOffset(0)).is_err());
        assert_eq!(root_ranges(DUPLICATE_AFTER, 2), (whole, vec![(0x1000, 0x1040)]));
    }

    /// The damaged-input cases below read the committed libc debug file (Debian 12's libc6-dbg:
    /// 2 063 units, all in `.debug_aranges`), inflate its DWARF and write it back, damaged, into
    /// a small ELF file of uncompressed sections.
    mod damaged {
        use super::super::super::dwarf::Dwarf;
        use super::super::super::symtab::FileSymbols;
        use super::super::super::SourceFrame;
        use super::*;
        use crate::process::ElfFile;

        const SECTIONS: [&str; 7] = [".debug_aranges", ".debug_info", ".debug_abbrev", ".debug_line", ".debug_str", ".debug_line_str", ".debug_rnglists"];

        struct Libc {
            sections: Vec<(&'static str, Vec<u8>)>,
            /// Link-time addresses to look up: function starts and insides over the library.
            probes: Vec<u64>,
        }

        fn libc() -> Libc {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/dumps/debug/.build-id/93/ac61ec5a8eb1396f9fbd350e3169a558528a40.debug");
            let file = ElfFile::open(path).expect("the committed libc debug file");
            let sections = SECTIONS.iter().map(|&n| (n, file.section(n).expect(n).to_vec())).collect();
            let syms = FileSymbols::read(&file, true);
            let probes = syms.text.symbols().iter().step_by(211).flat_map(|s| [s.addr, s.addr + 9]).collect();
            Libc { sections, probes }
        }

        impl Libc {
            fn get(&self, name: &str) -> &[u8] {
                &self.sections.iter().find(|(n, _)| *n == name).expect(name).1
            }

            /// The sections with `name` replaced by `bytes`.
            fn with(&self, name: &str, bytes: Vec<u8>) -> Vec<(&'static str, Vec<u8>)> {
                self.sections.iter().map(|(n, b)| (*n, if *n == name { bytes.clone() } else { b.clone() })).collect()
            }
        }

        /// An ELF file of `sections`, uncompressed.
        fn elf(sections: &[(&str, Vec<u8>)]) -> ElfFile {
            let mut out = vec![0u8; 64];
            let mut names = vec![0u8];
            let mut headers = vec![[0u64; 8]];
            for (name, bytes) in sections {
                out.resize(out.len().next_multiple_of(8), 0);
                headers.push([names.len() as u64, 1, 0, 0, out.len() as u64, bytes.len() as u64, 0, 1]);
                names.extend_from_slice(name.as_bytes());
                names.push(0);
                out.extend_from_slice(bytes);
            }
            let name = names.len() as u64;
            names.extend_from_slice(b".shstrtab\0");
            headers.push([name, 3, 0, 0, out.len() as u64, names.len() as u64, 0, 1]);
            out.extend_from_slice(&names);
            out.resize(out.len().next_multiple_of(8), 0);
            let shoff = out.len() as u64;
            for [name, kind, flags, addr, offset, size, link_info, align] in &headers {
                out.extend_from_slice(&(*name as u32).to_le_bytes());
                out.extend_from_slice(&(*kind as u32).to_le_bytes());
                for v in [*flags, *addr, *offset, *size] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
                out.extend_from_slice(&link_info.to_le_bytes());
                out.extend_from_slice(&align.to_le_bytes());
                out.extend_from_slice(&0u64.to_le_bytes());
            }
            let shnum = headers.len() as u16;
            out[..4].copy_from_slice(b"\x7fELF");
            out[4..8].copy_from_slice(&[2, 1, 1, 0]);
            out[16..18].copy_from_slice(&1u16.to_le_bytes()); // ET_REL
            out[18..20].copy_from_slice(&62u16.to_le_bytes()); // EM_X86_64
            out[20..24].copy_from_slice(&1u32.to_le_bytes());
            out[40..48].copy_from_slice(&shoff.to_le_bytes());
            out[52..54].copy_from_slice(&64u16.to_le_bytes());
            out[58..60].copy_from_slice(&64u16.to_le_bytes());
            out[60..62].copy_from_slice(&shnum.to_le_bytes());
            out[62..64].copy_from_slice(&(shnum - 1).to_le_bytes());
            ElfFile::from_bytes("damaged-libc.debug", out).expect("the ELF file written")
        }

        fn dwarf_of(file: &ElfFile) -> gimli::Dwarf<Reader<'_>> {
            gimli::Dwarf::load(|id| Ok::<_, ()>(gimli::EndianSlice::new(file.section(id.name()).unwrap_or(&[]), gimli::RunTimeEndian::Little))).expect("sections")
        }

        /// Reads the index of `file` (no panic: nothing here catches one), and checks it is
        /// bounded by the bytes it came from.
        fn index_of(file: &ElfFile) -> Option<UnitIndex> {
            let dwarf = dwarf_of(file);
            let mut index = UnitIndex::read(&dwarf)?;
            index.complete(&dwarf);
            let (aranges, info) = (file.section(".debug_aranges").map_or(0, <[u8]>::len), file.section(".debug_info").map_or(0, <[u8]>::len));
            // An entry takes at least 2 bytes of `.debug_aranges`; a unit at least 11 of `.debug_info`, and
            // each of its DIE or line ranges at least 2.
            assert!(index.units.len() <= info / 11 + 1, "{} units from {info} bytes", index.units.len());
            assert!(index.ranges.len() <= aranges / 2 + info / 2, "{} ranges", index.ranges.len());
            for u in &index.units {
                assert!(u.offset < info, "a unit at {:#x} past the section's end", u.offset);
            }
            Some(index)
        }

        /// Every probe's frames through `Dwarf` (by unit, or the whole index it falls back to).
        fn lookups(file: &ElfFile, probes: &[u64]) -> Vec<Vec<SourceFrame>> {
            let Some(dwarf) = Dwarf::load([file]) else { return vec![Vec::new(); probes.len()] };
            probes
                .iter()
                .map(|&p| {
                    let mut out = Vec::new();
                    let result = dwarf.frames(p, &mut out);
                    assert_ne!(result, Err(super::super::super::dwarf::LookupError::Panicked), "addr2line panicked at {p:#x}");
                    out
                })
                .collect()
        }

        /// Each damaged answer is the intact one or nothing (a unit is asked only whether it
        /// covers the address itself, so damage elsewhere can lose an answer, not change it);
        /// returns how many were kept.
        fn same_or_nothing(intact: &[Vec<SourceFrame>], damaged: &[Vec<SourceFrame>], what: &str) -> usize {
            let mut kept = 0;
            for (i, (a, b)) in intact.iter().zip(damaged).enumerate() {
                assert!(b.is_empty() || a == b, "{what}: probe {i} answered {b:?}, intact {a:?}");
                kept += usize::from(!b.is_empty() && a == b);
            }
            kept
        }

        /// A kept index is the built one, as later runs read it back; an entry that is not one
        /// knot wrote for this `.debug_info` is none at all.
        #[test]
        fn a_kept_index_reads_back_as_built_and_a_damaged_one_not_at_all() {
            let libc = libc();
            let built = index_of(&elf(&libc.sections)).expect("the index");
            let info = libc.get(".debug_info").len();
            let kept = built.encode();
            let back = UnitIndex::decode(&kept, info).expect("read back");
            assert!(back.units == built.units && back.unlisted.is_empty());
            assert_eq!(back.encode(), kept, "the same ranges in the same order");
            let same = |index: &UnitIndex| libc.probes.iter().all(|&p| index.candidates(p) == built.candidates(p));
            assert!(same(&back));

            let ranges_at = KEPT_HEADER + built.units.len() * KEPT_UNIT;
            let put = |at: usize, v: u64| {
                let mut b = kept.clone();
                b[at..at + 8].copy_from_slice(&v.to_le_bytes());
                b
            };
            // Ranges out of order: sorted again, the same answers.
            let mut shuffled = kept[..ranges_at].to_vec();
            for r in kept[ranges_at..].chunks(KEPT_RANGE).rev() {
                shuffled.extend(r);
            }
            assert!(UnitIndex::decode(&shuffled, info).is_some_and(|i| same(&i)), "ranges reversed");

            let (n_units, n_ranges) = (built.units.len() as u64, built.ranges.len() as u64);
            let last = built.units.last().expect("units");
            let mut swapped = kept.clone();
            swapped[KEPT_HEADER..KEPT_HEADER + 2 * KEPT_UNIT].rotate_left(KEPT_UNIT);
            let cases: [(&str, Vec<u8>, usize); 12] = [
                ("empty", Vec::new(), info),
                ("cut in the counts", kept[..9].to_vec(), info),
                ("cut by a byte", kept[..kept.len() - 1].to_vec(), info),
                ("cut by a range", kept[..kept.len() - KEPT_RANGE].to_vec(), info),
                ("a byte more", [&kept[..], &[0]].concat(), info),
                ("one unit more than written", put(0, n_units + 1), info),
                ("one range more than written", put(8, n_ranges + 1), info),
                ("counts that overflow", put(8, u64::MAX / 8), info),
                ("units out of order", swapped, info),
                ("a unit of no length", put(KEPT_HEADER + 8, 0), info),
                ("the last unit past .debug_info", kept.clone(), last.offset + last.len - 1),
                ("a range of no unit", put(ranges_at + 16, n_units), info),
            ];
            for (what, bytes, info) in cases {
                assert!(UnitIndex::decode(&bytes, info).is_none(), "{what}");
            }
        }

        /// With a cache, the first run keeps the index it built and the second reads it back
        /// instead of walking the unit headers: the same answers either way.
        #[test]
        fn a_second_run_reads_the_index_the_first_kept() {
            use crate::process::section_cache::{FileIdentity, SectionCache, SETTLE};
            let libc = libc();
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/dumps/debug/.build-id/93/ac61ec5a8eb1396f9fbd350e3169a558528a40.debug");
            let meta = std::fs::metadata(&path).expect("the committed libc debug file");
            if FileIdentity::settled(&meta, std::time::SystemTime::now()).is_none() {
                // Checked out just now: knot trusts its identity in a moment.
                std::thread::sleep(SETTLE);
            }
            let dir = std::env::temp_dir().join(format!("knot-unit-index-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            let cache = std::sync::Arc::new(SectionCache::new(&dir, 1 << 30));
            let open = || {
                let mut file = ElfFile::open(&path).expect("the committed libc debug file");
                file.set_section_cache(Some(cache.clone()));
                file
            };
            let uncached = lookups(&ElfFile::open(&path).expect("libc"), &libc.probes);
            let first = open();
            assert!(UnitIndex::kept(&first, &dwarf_of(&first)).is_none(), "nothing kept before the first run");
            assert!(lookups(&first, &libc.probes) == uncached, "the first run");
            let second = open();
            let kept = UnitIndex::kept(&second, &dwarf_of(&second)).expect("the index the first run kept");
            assert_eq!(kept.encode(), index_of(&elf(&libc.sections)).expect("the index").encode());
            assert!(lookups(&second, &libc.probes) == uncached, "the second run");
            // Without a cache nothing is kept or read.
            let plain = ElfFile::open(&path).expect("libc");
            assert!(UnitIndex::kept(&plain, &dwarf_of(&plain)).is_none());
            let _ = std::fs::remove_dir_all(&dir);
        }

        #[test]
        fn damaged_aranges_lose_nothing_and_never_panic() {
            let libc = libc();
            let intact_file = elf(&libc.sections);
            let intact_index = index_of(&intact_file).expect("the intact index");
            assert!(intact_index.unlisted.is_empty() && intact_index.units.len() == 2063, "{} units", intact_index.units.len());
            let intact = lookups(&intact_file, &libc.probes);
            let named = intact.iter().filter(|f| !f.is_empty()).count();
            assert!(named > libc.probes.len() / 2, "{named} of {} probes named", libc.probes.len());

            let aranges = libc.get(".debug_aranges");
            let mut cases: Vec<(String, Vec<u8>)> = Vec::new();
            // Cut short anywhere: in a set header, in an entry, between sets.
            for cut in [0, 1, 5, 11, 12, 31, 47, aranges.len() / 3 + 3, aranges.len() / 2, aranges.len() - 9] {
                cases.push((format!("cut at {cut}"), aranges[..cut].to_vec()));
            }
            // A set's header: a length past the end, the 64-bit escape, a reserved length, a bad
            // version, offsets of no unit, address sizes gimli refuses or misreads.
            let edits: [(usize, &[u8]); 9] = [
                (0, &[0xf0, 0xff, 0xff, 0x7f]),
                (0, &[0xff, 0xff, 0xff, 0xff]),
                (0, &[0xf5, 0xff, 0xff, 0xff]),
                (4, &[9, 0]),
                (4, &[0, 0]),
                (6, &[0xff, 0xff, 0xff, 0x7f]),
                (10, &[3]),
                (10, &[0]),
                (11, &[4]),
            ];
            for (at, bytes) in edits {
                let mut b = aranges.to_vec();
                b[at..at + bytes.len()].copy_from_slice(bytes);
                cases.push((format!("first set's header: {bytes:02x?} at {at}"), b));
            }
            // Every 7th byte of the second half flipped.
            let mut b = aranges.to_vec();
            let half = b.len() / 2;
            b[half..].iter_mut().step_by(7).for_each(|x| *x ^= 0x5a);
            cases.push(("second half garbled".into(), b));

            for (what, bytes) in cases {
                let file = elf(&libc.with(".debug_aranges", bytes));
                let index = index_of(&file);
                let answers = lookups(&file, &libc.probes);
                let kept = same_or_nothing(&intact, &answers, &what);
                // With an index, or addr2line's whole one to fall back on, the units are all
                // still there: every probe keeps its answer.
                assert_eq!(kept, named, "{what}: {kept} of {named} answers kept (index: {})", index.is_some());
            }
        }

        #[test]
        fn damaged_unit_headers_stay_within_the_unit_and_never_panic() {
            let libc = libc();
            let intact_file = elf(&libc.sections);
            let intact_index = index_of(&intact_file).expect("the intact index");
            let intact = lookups(&intact_file, &libc.probes);
            let info = libc.get(".debug_info");
            // The unit of a probe in the middle of the library.
            let probe = libc.probes[libc.probes.len() / 2];
            let unit = *intact_index.candidates(probe).first().expect("a unit for the probe");
            let at = intact_index.span(unit).expect("its span").offset;

            let edits: [(usize, &[u8]); 8] = [
                (0, &[0xff, 0xff, 0xff, 0x7f]),                   // a length past the section's end
                (0, &[0xf0, 0xff, 0xff, 0xff]),                   // a reserved length
                (0, &[0xff, 0xff, 0xff, 0xff]),                   // the 64-bit escape over 32-bit data
                (0, &[0, 0, 0, 0]),                               // an empty unit
                (4, &[1, 0]),                                     // version 1
                (4, &[77, 0]),                                    // version 77
                (8, &[0xff, 0xff, 0xff, 0x7f]),                   // DWARF 5: an abbreviation offset past the end
                (7, &[3]),                                        // DWARF 5: address size 3
            ];
            // The intact unit of each probe (its span), to say which answers must survive.
            let unit_of: Vec<Option<UnitSpan>> = libc.probes.iter().map(|&p| intact_index.candidates(p).first().and_then(|&u| intact_index.span(u))).collect();
            // (what, the damaged section, the bytes from which units are lost).
            let mut cases: Vec<(String, Vec<u8>, usize)> = Vec::new();
            for (delta, bytes) in edits {
                let mut b = info.to_vec();
                b[at + delta..at + delta + bytes.len()].copy_from_slice(bytes);
                cases.push((format!("unit at {at:#x}: {bytes:02x?} at +{delta}"), b, at));
            }
            // Cut inside that unit's header, and inside its DIEs: every unit from there on is lost.
            for cut in [at + 3, at + 9, at + 40] {
                cases.push((format!("cut at {cut:#x}"), info[..cut].to_vec(), at));
            }
            for (what, bytes, lost_from) in cases {
                let cut = bytes.len() < info.len();
                let file = elf(&libc.with(".debug_info", bytes));
                assert!(index_of(&file).is_some(), "{what}: the index is still read");
                let answers = lookups(&file, &libc.probes);
                same_or_nothing(&intact, &answers, &what);
                // Every other unit still answers: the ones before, and (unless the section was
                // cut) the ones after, found from `.debug_aranges`.
                for (i, span) in unit_of.iter().enumerate() {
                    let Some(span) = span else { continue };
                    let lost = span.offset == lost_from || (cut && span.offset > lost_from);
                    if !lost {
                        assert_eq!(answers[i], intact[i], "{what}: probe {i} (unit at {:#x}) lost its answer", span.offset);
                    }
                }
            }
        }
    }
}
