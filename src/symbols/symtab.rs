//! ELF symbol tables (`.symtab`, `.dynsym`) as gdb's minimal symbols: sorted, sized, and looked
//! up the way `lookup_minimal_symbol_by_pc_section` does, so the name knot gives an address with
//! no DWARF is the one gdb prints.
//!
//! How gdb (and so knot) chooses:
//! - Every named symbol in an executable section is a text symbol (FUNC, GNU_IFUNC, NOTYPE,
//!   even zero-sized labels), except SECTION and FILE symbols, undefined, absolute and common
//!   ones. Data symbols are the named ones in other allocated sections, TLS excepted.
//! - A table is sorted by address, then by name (byte order, as `strcmp`). A lookup starts at
//!   the *last* symbol at or below the address, so among aliases at one address the greatest name
//!   wins: for glibc's `pthread_mutex_lock`, `__pthread_mutex_lock` and `___pthread_mutex_lock`
//!   that is `pthread_mutex_lock`. It walks back over symbols of other sections and over
//!   zero-sized symbols (remembering the first); a sized symbol that ends before the address gives
//!   way to the one before it if that one reaches further; the sized symbol found must cover the
//!   address, or else the closest zero-sized symbol is taken, and if there is none nothing is
//!   claimed.
//! - Versions: a `.symtab` name with a version (`pthread_mutex_lock@@GLIBC_2.2.5`, glibc's
//!   `.symver`) is kept as it is, and gdb adds a zero-sized copy without the version.
//!   `.dynsym` names are bare (gdb 13's BFD appends no version to them), so aliases that differ
//!   only in version collapse into one.
//! - PLT entries are zero-sized `foo@plt` symbols, as BFD synthesizes them for gdb.
//! - Per file, `.symtab` is used when there is one, `.dynsym` only when there is not (gdb skips
//!   the dynamic symbols of an unstripped file). The separate debug file's `.symtab` is a table
//!   of its own; see [`best_of`].

use crate::bytes::{u16_at, u32_at, u64_at};
use crate::process::ElfFile;
use rustc_hash::FxHashMap;
use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

pub(super) const SHT_SYMTAB: u32 = 2;
const SHT_HASH: u32 = 5;
const SHT_DYNSYM: u32 = 11;
const SHT_GNU_HASH: u32 = 0x6fff_fff6;
const SHT_RELA: u32 = 4;
const RELA_SIZE: usize = 24;
const R_X86_64_GLOB_DAT: u64 = 6;
const R_X86_64_JUMP_SLOT: u64 = 7;
const SHF_ALLOC: u64 = 0x2;
const SHF_EXECINSTR: u64 = 0x4;
const SHF_TLS: u64 = 0x400;
const SHN_UNDEF: u16 = 0;
const SHN_LORESERVE: u16 = 0xff00;
const STB_GLOBAL: u8 = 1;
const STB_WEAK: u8 = 2;
const STB_GNU_UNIQUE: u8 = 10;
const STT_SECTION: u8 = 3;
const STT_FILE: u8 = 4;
const STT_TLS: u8 = 6;
const SYM_SIZE: usize = 24;
/// How far a lookup walks back over zero-sized or other-section symbols; gdb has no bound, but a
/// crafted table could make every lookup linear.
const MAX_WALK_BACK: usize = 4096;
/// Lookups by name a table answers by scanning its records before it builds an index by name:
/// a scan costs about as much as 1/40 of sorting the table and hashing every name.
const SCANNED_NAME_LOOKUPS: usize = 32;
/// Names of the kept tables of a module file and of a separate debug file (`symtab_only`).
const KEPT_AS: &str = "symbols";
const KEPT_AS_DEBUG: &str = "symbols_symtab_only";
const KEPT_VERSION: u64 = 1;
const KEPT_HEADER: usize = 40;
const KEPT_SECTION: usize = 16;
const KEPT_RECORD: usize = 32;
const KEPT_PLT: u32 = 1;
const KEPT_GLOBAL: u32 = 2;
/// The name is in `.dynstr` (a PLT entry's), not the table's string table.
const KEPT_DYNSTR: u32 = 4;
const KEPT_FLAGS: u32 = KEPT_PLT | KEPT_GLOBAL | KEPT_DYNSTR;

/// Which table a name came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum NameSource {
    Dwarf,
    Symtab,
    Dynsym,
}

/// One symbol. Names borrow the file's string table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sym<'a> {
    pub(crate) addr: u64,
    pub(crate) size: u64,
    pub(crate) name: &'a [u8],
    /// A PLT entry, named `name@plt` (`name` is the dynamic symbol it jumps to).
    pub(crate) plt: bool,
    /// Bound globally (`STB_GLOBAL`, `STB_WEAK`, `STB_GNU_UNIQUE`): gdb's "external" symbols,
    /// which a lookup by name prefers to file-local ones.
    pub(crate) global: bool,
    /// Index into the table's section ranges.
    section: u32,
}

impl<'a> Sym<'a> {
    /// The name as gdb spells it.
    pub(crate) fn full_name(&self) -> Cow<'a, str> {
        let name = String::from_utf8_lossy(self.name);
        if self.plt { Cow::Owned(format!("{name}@plt")) } else { name }
    }

    fn name_bytes(&self) -> impl Iterator<Item = u8> + '_ {
        let suffix: &[u8] = if self.plt { b"@plt" } else { b"" };
        self.name.iter().chain(suffix).copied()
    }

    /// The order of gdb's names (`strcmp` on the name as spelled, `@plt` included); a plain
    /// slice comparison when neither is a PLT entry, which is nearly always.
    fn cmp_name(&self, other: &Sym<'_>) -> std::cmp::Ordering {
        if self.plt || other.plt { self.name_bytes().cmp(other.name_bytes()) } else { self.name.cmp(other.name) }
    }

    fn same_name(&self, other: &Sym<'_>) -> bool {
        self.name == other.name && self.plt == other.plt
    }
}

/// Link-time range of a section symbols point into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SectionRange {
    start: u64,
    end: u64,
}

/// One table: the text or the data symbols of one file's `.symtab` or `.dynsym`. Sorted by
/// address on its first address lookup only: a module asked only for names (a call site's
/// target named by a declaration is looked for in every module, as gdb does) or never for a
/// data address does not pay for the sort. The records are kept once, in table order; the
/// sorted table is an index into them (4 bytes a symbol, not a second 40-byte copy).
#[derive(Debug, Default)]
pub(crate) struct SymbolTable<'a> {
    /// gdb's records in table order, as read.
    records: Vec<Sym<'a>>,
    /// Indices into `records` sorted by address, then name, and compacted (see
    /// [`SymbolTable::by_address`]).
    by_address: OnceLock<Vec<u32>>,
    /// Lookups by name so far: the first few scan `records`, after that `by_name` answers.
    name_lookups: AtomicUsize,
    /// Name to (address, global) for non-PLT symbols, built from `by_address` once lookups by
    /// name are many.
    by_name: OnceLock<FxHashMap<&'a [u8], (u64, bool)>>,
    sections: Vec<SectionRange>,
    pub(crate) source: Option<NameSource>,
}

/// A symbol found for an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hit<'a> {
    pub(crate) sym: Sym<'a>,
    pub(crate) source: NameSource,
}

/// Both tables of one file.
#[derive(Debug, Default)]
pub(crate) struct FileSymbols<'a> {
    pub(crate) text: SymbolTable<'a>,
    pub(crate) data: SymbolTable<'a>,
}

impl<'a> FileSymbols<'a> {
    /// The symbols of `file`: its `.symtab`, or its `.dynsym` when it has no `.symtab` (or, with
    /// `symtab_only`, nothing then: a separate debug file's `.dynsym` is a copy of the module's).
    /// With a section cache, the records and their sorted order are kept: a later run rebuilds
    /// the tables from them without parsing the entries or sorting (see [`FileSymbols::decode`]).
    pub(crate) fn read(file: &'a ElfFile, symtab_only: bool) -> FileSymbols<'a> {
        let Some(tables) = Tables::of(file, symtab_only) else { return FileSymbols::default() };
        let what = if symtab_only { KEPT_AS_DEBUG } else { KEPT_AS };
        if let Some(bytes) = file.cached_derived(what, KEPT_VERSION, tables.bound)
            && let Some(kept) = FileSymbols::decode(&bytes, &tables)
        {
            return kept;
        }
        let read = FileSymbols::parse(file, symtab_only, &tables);
        // Called only with a cache to keep it in: a cold run sorts both tables now (a few ms at
        // most, once) so that no later run sorts them.
        file.store_derived(what, KEPT_VERSION, || read.encode(&tables));
        read
    }

    fn parse(file: &'a ElfFile, symtab_only: bool, tables: &Tables<'a>) -> FileSymbols<'a> {
        let (entries, strtab, source) = (tables.entries, tables.strtab, tables.source);
        // Most symbols are text (the entries are in the file, so this reserves no more than it).
        let mut text = Vec::with_capacity(entries.len() / SYM_SIZE);
        let mut data = Vec::new();
        let mut sections = SectionIndex::default();
        // Entry 0 is the null symbol. The name is read last: many entries (files, sections) are
        // dropped on their other fields.
        for entry in entries.chunks_exact(SYM_SIZE).skip(1) {
            let Some(raw) = parse_sym(entry) else { continue };
            let Some(kind) = classify(file, raw.info, raw.shndx) else { continue };
            let Some((name, version_at)) = versioned_c_str(strtab, raw.name as usize).filter(|(n, _)| !n.is_empty()) else { continue };
            let Some(section) = sections.index(file, raw.shndx) else { continue };
            let table = match kind {
                Kind::Text => &mut text,
                Kind::Data => &mut data,
            };
            let global = matches!(raw.info >> 4, STB_GLOBAL | STB_WEAK | STB_GNU_UNIQUE);
            push_records(table, Sym { addr: raw.value, size: raw.size, name, plt: false, global, section }, version_at);
        }
        if !symtab_only {
            plt_symbols(file, &mut sections, &mut text);
        }
        FileSymbols {
            text: SymbolTable::new(text, sections.ranges.clone(), Some(source)),
            data: SymbolTable::new(data, sections.ranges, Some(source)),
        }
    }

    /// The kept form (sorting both tables if they are not yet): a header of five u64 (section
    /// ranges, then records and sorted positions of the text table, then of the data table),
    /// the section ranges (start, end), and per table its records ([`KEPT_RECORD`] bytes:
    /// address, size, name offset and length in its string table, section, flags) and its
    /// sorted, compacted positions (u32). Empty (which no decode accepts) if a name is in
    /// neither string table, which `parse` does not make.
    fn encode(&self, tables: &Tables<'_>) -> Vec<u8> {
        let (text_order, data_order) = (self.text.by_address(), self.data.by_address());
        let sections = &self.text.sections;
        let len = KEPT_HEADER
            + sections.len() * KEPT_SECTION
            + (self.text.records.len() + self.data.records.len()) * KEPT_RECORD
            + (text_order.len() + data_order.len()) * 4;
        let mut out = Vec::with_capacity(len);
        for n in [sections.len(), self.text.records.len(), text_order.len(), self.data.records.len(), data_order.len()] {
            out.extend((n as u64).to_le_bytes());
        }
        for r in sections {
            out.extend(r.start.to_le_bytes());
            out.extend(r.end.to_le_bytes());
        }
        for (table, order) in [(&self.text, text_order), (&self.data, data_order)] {
            for s in &table.records {
                // PLT names are the dynamic symbols' (in `.dynstr`), the others the table's.
                let (string_table, flag) = if s.plt { (tables.dynstr, KEPT_DYNSTR) } else { (tables.strtab, 0) };
                let Some(at) = offset_in(string_table, s.name) else { return Vec::new() };
                let Ok(name_len) = u32::try_from(s.name.len()) else { return Vec::new() };
                let flags = flag | if s.plt { KEPT_PLT } else { 0 } | if s.global { KEPT_GLOBAL } else { 0 };
                out.extend(s.addr.to_le_bytes());
                out.extend(s.size.to_le_bytes());
                for v in [at, name_len, s.section, flags] {
                    out.extend(v.to_le_bytes());
                }
            }
            for &i in order {
                out.extend(i.to_le_bytes());
            }
        }
        out
    }

    /// Kept tables, checked against the file's string tables: every count and length must add
    /// up to the entry's, every name lie inside its string table, be non-empty and hold no NUL,
    /// every section index be a kept range, and each sorted order be distinct positions of
    /// the table's records in address order. Anything else: `None` (the file is read again).
    fn decode(bytes: &[u8], tables: &Tables<'a>) -> Option<FileSymbols<'a>> {
        let count = |at: usize| u64_at(bytes, at).and_then(|n| usize::try_from(n).ok());
        let [n_sections, n_text, n_text_order, n_data, n_data_order] =
            [count(0)?, count(8)?, count(16)?, count(24)?, count(32)?];
        let mut at = KEPT_HEADER;
        let mut take = |len: usize| -> Option<&[u8]> {
            let part = bytes.get(at..at.checked_add(len)?)?;
            at += len;
            Some(part)
        };
        let section_bytes = take(n_sections.checked_mul(KEPT_SECTION)?)?;
        let text = (take(n_text.checked_mul(KEPT_RECORD)?)?, take(n_text_order.checked_mul(4)?)?);
        let data = (take(n_data.checked_mul(KEPT_RECORD)?)?, take(n_data_order.checked_mul(4)?)?);
        if at != bytes.len() {
            return None;
        }
        let sections: Vec<SectionRange> = section_bytes
            .chunks_exact(KEPT_SECTION)
            .map(|c| Some(SectionRange { start: u64_at(c, 0)?, end: u64_at(c, 8)? }))
            .collect::<Option<_>>()?;
        let n_sections = u32::try_from(n_sections).ok()?;
        let table = |(records, order): (&[u8], &[u8])| -> Option<SymbolTable<'a>> {
            let mut out: Vec<Sym<'a>> = Vec::with_capacity(records.len() / KEPT_RECORD);
            for r in records.chunks_exact(KEPT_RECORD) {
                let r: &[u8; KEPT_RECORD] = r.try_into().ok()?;
                let word = |at: usize| u64::from_le_bytes([r[at], r[at + 1], r[at + 2], r[at + 3], r[at + 4], r[at + 5], r[at + 6], r[at + 7]]);
                let half = |at: usize| u32::from_le_bytes([r[at], r[at + 1], r[at + 2], r[at + 3]]);
                let (at, len, section, flags) = (half(16) as usize, half(20) as usize, half(24), half(28));
                let plt = flags & KEPT_PLT != 0;
                // A PLT name is a dynamic symbol's, any other the table's.
                let string_table = if plt { tables.dynstr } else { tables.strtab };
                let name = string_table.get(at..at.checked_add(len)?)?;
                // Names are short: a plain loop beats a call to memchr.
                if name.is_empty() || name.contains(&0) || section >= n_sections || plt != (flags & KEPT_DYNSTR != 0) || flags & !KEPT_FLAGS != 0 {
                    return None;
                }
                out.push(Sym { addr: word(0), size: word(8), name, plt, global: flags & KEPT_GLOBAL != 0, section });
            }
            let records = out;
            let order: Vec<u32> = order.chunks_exact(4).map(|c| u32_at(c, 0)).collect::<Option<_>>()?;
            let mut seen = vec![false; records.len()];
            let mut last = 0;
            for &i in &order {
                let addr = records.get(i as usize)?.addr;
                let slot = seen.get_mut(i as usize)?;
                if *slot || addr < last {
                    return None;
                }
                (*slot, last) = (true, addr);
            }
            // Compaction keeps a record of each address: an order that drops them all is not one.
            if order.is_empty() != records.is_empty() {
                return None;
            }
            let mut table = SymbolTable::new(records, sections.clone(), Some(tables.source));
            table.by_address = OnceLock::from(order);
            Some(table)
        };
        Some(FileSymbols { text: table(text)?, data: table(data)? })
    }
}

/// Where `name` starts in `table`, if it lies inside it.
fn offset_in(table: &[u8], name: &[u8]) -> Option<u32> {
    let at = (name.as_ptr() as usize).checked_sub(table.as_ptr() as usize)?;
    (at.checked_add(name.len())? <= table.len()).then_some(())?;
    u32::try_from(at).ok()
}

/// The sections [`FileSymbols::read`] takes a file's tables from.
struct Tables<'a> {
    entries: &'a [u8],
    /// The table's string table.
    strtab: &'a [u8],
    /// The first `.dynsym`'s string table, which PLT entries are named from (empty with
    /// `symtab_only`: then there are none).
    dynstr: &'a [u8],
    source: NameSource,
    /// The most bytes a kept entry of these tables takes: two records an entry (a versioned
    /// name's bare copy), one for the smallest PLT entry of each `.plt*` section's bytes, and
    /// a position each.
    bound: u64,
}

impl<'a> Tables<'a> {
    fn of(file: &'a ElfFile, symtab_only: bool) -> Option<Tables<'a>> {
        let find = |kind: u32| file.sections.iter().position(|s| s.kind == kind);
        let (index, source) = match (find(SHT_SYMTAB), find(SHT_DYNSYM)) {
            (Some(i), _) => (i, NameSource::Symtab),
            (None, Some(i)) if !symtab_only => (i, NameSource::Dynsym),
            _ => return None,
        };
        let entries = file.section_data(index)?;
        let strtab = file.section_data(file.sections.get(index)?.link as usize)?;
        let dynstr = if symtab_only {
            &[][..]
        } else {
            find(SHT_DYNSYM).and_then(|i| file.section_data(file.sections.get(i)?.link as usize)).unwrap_or_default()
        };
        let plt_bytes: u64 = if symtab_only { 0 } else { file.sections.iter().filter(|s| s.name.starts_with(".plt")).map(|s| s.size).fold(0, u64::saturating_add) };
        let records = (entries.len() as u64 / SYM_SIZE as u64).saturating_mul(2).saturating_add(plt_bytes / 8);
        let sections = file.sections.len() as u64;
        let bound = records
            .saturating_mul(2 * (KEPT_RECORD as u64 + 4))
            .saturating_add(sections.saturating_mul(KEPT_SECTION as u64))
            .saturating_add(KEPT_HEADER as u64);
        Some(Tables { entries, strtab, dynstr, source, bound })
    }
}

impl<'a> SymbolTable<'a> {
    fn new(records: Vec<Sym<'a>>, sections: Vec<SectionRange>, source: Option<NameSource>) -> SymbolTable<'a> {
        SymbolTable { records, sections, source, ..SymbolTable::default() }
    }

    /// The table as gdb keeps it: sorted by address, then name, and compacted
    /// (`compact_minimal_symbols`: one entry per address, name and section), as indices into
    /// `records`. Made on first use.
    fn by_address(&self) -> &[u32] {
        self.by_address.get_or_init(|| {
            let mut order = sorted(&self.records);
            let same = |x: u32, y: u32| match (self.records.get(x as usize), self.records.get(y as usize)) {
                (Some(a), Some(b)) => a.addr == b.addr && a.section == b.section && a.same_name(b),
                _ => false,
            };
            order.dedup_by(|b, a| same(*a, *b));
            order.shrink_to_fit();
            order
        })
    }

    /// The record at `i` of the sorted table.
    fn sorted_at(&self, i: usize) -> Option<&Sym<'a>> {
        self.records.get(*self.by_address().get(i)? as usize)
    }

    /// The sorted table's records, in its order.
    fn sorted_records(&self) -> impl Iterator<Item = &Sym<'a>> + '_ {
        self.by_address().iter().filter_map(|&at| self.records.get(at as usize))
    }

    /// The non-PLT symbol called `name` as gdb's `lookup_minimal_symbol` finds it in this
    /// table: the first global one in address order, else the first local one, with whether it
    /// is global. The first lookups scan the records as read (a run asks for a handful of
    /// names, and a scan costs a fraction of sorting); later ones use an index by name.
    pub(crate) fn named(&self, name: &[u8]) -> Option<(u64, bool)> {
        if self.name_lookups.fetch_add(1, Ordering::Relaxed) < SCANNED_NAME_LOOKUPS {
            return self.scan_named(name);
        }
        let index = self.by_name.get_or_init(|| {
            let mut map: FxHashMap<&'a [u8], (u64, bool)> = FxHashMap::default();
            for sym in self.sorted_records().filter(|s| !s.plt) {
                let slot = map.entry(sym.name).or_insert((sym.addr, sym.global));
                if sym.global && !slot.1 {
                    *slot = (sym.addr, true);
                }
            }
            map
        });
        index.get(name).copied()
    }

    /// [`SymbolTable::named`] without the sorted table: the records spelled `name` (a PLT
    /// entry too, as `foo@plt`: it takes part in compaction) put in the sorted table's order
    /// among themselves (address, then table order) and compacted as it is.
    fn scan_named(&self, name: &[u8]) -> Option<(u64, bool)> {
        let spelled = |s: &Sym<'_>| {
            if s.plt { name.strip_suffix(b"@plt") == Some(s.name) } else { s.name == name }
        };
        let mut found: Vec<(u64, usize, Sym<'a>)> =
            self.records.iter().enumerate().filter(|(_, s)| spelled(s)).map(|(i, s)| (s.addr, i, *s)).collect();
        found.sort_unstable_by_key(|&(addr, i, _)| (addr, i));
        found.dedup_by(|b, a| a.2.addr == b.2.addr && a.2.section == b.2.section && a.2.same_name(&b.2));
        let mut plain = found.iter().map(|f| f.2).filter(|s| !s.plt);
        let first = plain.next()?;
        let sym = if first.global { first } else { plain.find(|s| s.global).unwrap_or(first) };
        Some((sym.addr, sym.global))
    }

    /// A table from explicit symbols, each with its section range `[start, end)`.
    #[cfg(test)]
    pub(crate) fn from_symbols(entries: &[(u64, u64, &'a str, (u64, u64))], source: NameSource) -> SymbolTable<'a> {
        let mut sections: Vec<SectionRange> = Vec::new();
        let syms = entries
            .iter()
            .map(|&(addr, size, name, (start, end))| {
                let range = SectionRange { start, end };
                let section = match sections.iter().position(|s| *s == range) {
                    Some(i) => i,
                    None => {
                        sections.push(range);
                        sections.len() - 1
                    }
                };
                Sym { addr, size, name: name.as_bytes(), plt: false, global: true, section: section as u32 }
            })
            .collect();
        SymbolTable::new(syms, sections, Some(source))
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_address().len()
    }

    /// Every symbol, by address.
    #[cfg(test)]
    pub(crate) fn symbols(&self) -> Vec<Sym<'a>> {
        self.sorted_records().copied().collect()
    }

    /// The symbol gdb would name `addr` (a link-time address) with; see the module docs.
    pub(crate) fn lookup(&self, addr: u64) -> Option<Hit<'a>> {
        let source = self.source?;
        let in_section = |s: &Sym<'_>| self.sections.get(s.section as usize).is_some_and(|r| addr >= r.start && addr < r.end);
        let end = self.by_address().partition_point(|&at| self.records.get(at as usize).is_some_and(|s| s.addr <= addr));
        let mut best_zero_sized: Option<Sym<'a>> = None;
        let mut sized: Option<Sym<'a>> = None;
        let mut i = end;
        let floor = end.saturating_sub(MAX_WALK_BACK);
        while i > floor {
            i -= 1;
            let Some(s) = self.sorted_at(i) else { break };
            if !in_section(s) {
                continue;
            }
            if s.size == 0 {
                best_zero_sized.get_or_insert(*s);
                continue;
            }
            // Past this one's end, but inside the one before it (glibc's nocancel variants
            // inside the cancellable ones, on i686): go on to that one.
            if let Some(prev) = i.checked_sub(1).and_then(|p| self.sorted_at(p))
                && addr >= end_of(s)
                && addr < end_of(prev)
            {
                continue;
            }
            sized = Some(*s);
            break;
        }
        let sym = match sized {
            Some(s) if addr < end_of(&s) => s,
            _ => best_zero_sized?,
        };
        Some(Hit { sym, source: if sym.plt { NameSource::Dynsym } else { source } })
    }
}

/// The positions of `syms` by address, then by name; equal names stay in table order, so that
/// a duplicate's first (sized) entry is the one kept. The same order as a stable sort by
/// (address, name), for a fraction of its cost: positions (4 bytes) are sorted by address, and
/// only the runs that share an address compare names. Positions are `u32`: a table of more
/// than 4 Gi records (a 96 GiB `.symtab`) is sorted up to there.
fn sorted(syms: &[Sym<'_>]) -> Vec<u32> {
    let addr = |i: u32| syms.get(i as usize).map_or(0, |s| s.addr);
    let mut order: Vec<u32> = (0..u32::try_from(syms.len()).unwrap_or(u32::MAX)).collect();
    radix_sort_by_address(&mut order, addr);
    let mut start = 0;
    while let Some(&first) = order.get(start) {
        let at = addr(first);
        // Runs are short (aliases): a walk finds their end sooner than a binary search.
        let end = order[start..].iter().position(|&i| addr(i) != at).map_or(order.len(), |n| start + n);
        if end - start > 1 {
            // Stable, and the run is in table order already.
            order[start..end].sort_by(|&x, &y| match (syms.get(x as usize), syms.get(y as usize)) {
                (Some(a), Some(b)) => a.cmp_name(b),
                _ => x.cmp(&y),
            });
        }
        start = end;
    }
    order
}

/// Sorts positions given in ascending order by `addr(position)`, ties in position order (as
/// `sort_unstable` orders (address, position) pairs): a stable LSD radix sort, one pass per
/// byte in which the addresses differ (three for libc, whose text spans 2 MB), in a fraction
/// of a comparison sort's instructions and in 8 bytes a symbol.
fn radix_sort_by_address(order: &mut Vec<u32>, addr: impl Fn(u32) -> u64) {
    debug_assert!(order.windows(2).all(|w| w[0] < w[1]), "positions come in ascending order");
    let Some(&first) = order.first() else { return };
    let first = addr(first);
    let differ = order.iter().fold(0u64, |acc, &i| acc | (addr(i) ^ first));
    let mut spare = vec![0u32; order.len()];
    for byte in 0..8 {
        let shift = byte * 8;
        if (differ >> shift) & 0xff == 0 {
            continue;
        }
        let digit = |i: u32| ((addr(i) >> shift) & 0xff) as usize;
        let mut at = [0usize; 256];
        for &i in order.iter() {
            at[digit(i)] += 1;
        }
        let mut sum = 0;
        for slot in at.iter_mut() {
            (*slot, sum) = (sum, sum + *slot);
        }
        for &i in order.iter() {
            let d = digit(i);
            // In bounds: `at[d]` counts the positions of smaller digits and this digit's so far.
            if let Some(dest) = spare.get_mut(at[d]) {
                *dest = i;
            }
            at[d] += 1;
        }
        std::mem::swap(order, &mut spare);
    }
}

/// BFD's synthetic `foo@plt` symbols, which gdb adds: a zero-sized text symbol at each entry of
/// `.plt`, `.plt.sec` and `.plt.got` whose `jmp *slot(%rip)` goes through a GOT slot that a
/// `R_X86_64_JUMP_SLOT` or `R_X86_64_GLOB_DAT` relocation binds to a dynamic symbol.
fn plt_symbols<'a>(file: &'a ElfFile, sections: &mut SectionIndex, out: &mut Vec<Sym<'a>>) {
    let Some(dynsym) = file.sections.iter().position(|s| s.kind == SHT_DYNSYM) else { return };
    let (Some(dynsym_data), Some(dynstr)) = (file.section_data(dynsym), file.sections.get(dynsym).and_then(|s| file.section_data(s.link as usize)))
    else {
        return;
    };
    let mut slots: Vec<(u64, &'a [u8])> = Vec::new();
    for (i, rela) in file.sections.iter().enumerate() {
        if rela.kind != SHT_RELA || rela.link as usize != dynsym {
            continue;
        }
        let Some(data) = file.section_data(i) else { continue };
        for r in data.chunks_exact(RELA_SIZE) {
            let (Some(offset), Some(info)) = (u64_at(r, 0), u64_at(r, 8)) else { continue };
            if !matches!(info & 0xffff_ffff, R_X86_64_JUMP_SLOT | R_X86_64_GLOB_DAT) {
                continue;
            }
            let Some(entry) = usize::try_from(info >> 32).ok().and_then(|n| n.checked_mul(SYM_SIZE)).and_then(|at| dynsym_data.get(at..at.checked_add(SYM_SIZE)?))
            else {
                continue;
            };
            if let Some(name) = parse_sym(entry).and_then(|r| c_str(dynstr, r.name as usize)).filter(|n| !n.is_empty()) {
                slots.push((offset, name));
            }
        }
    }
    if slots.is_empty() {
        return;
    }
    slots.sort_unstable();
    for (shndx, s) in file.sections.iter().enumerate() {
        if !matches!(s.name.as_str(), ".plt" | ".plt.sec" | ".plt.got") || s.flags & SHF_EXECINSTR == 0 {
            continue;
        }
        let Some(data) = file.section_data(shndx) else { continue };
        let Some(section) = u16::try_from(shndx).ok().and_then(|i| sections.index(file, i)) else { continue };
        let entry_size = if s.entsize == 8 || s.entsize == 16 { s.entsize as usize } else { 16 };
        for (n, entry) in data.chunks(entry_size).enumerate() {
            // `jmp *disp32(%rip)`, perhaps after `endbr64` and with a `bnd` prefix.
            let Some(at) = memchr::memmem::find(entry, &[0xff, 0x25]) else { continue };
            let Some(disp) = entry.get(at + 2..at + 6).and_then(|d| d.try_into().ok()).map(i32::from_le_bytes) else { continue };
            let entry_addr = s.addr.wrapping_add((n * entry_size) as u64);
            let slot = entry_addr.wrapping_add(at as u64 + 6).wrapping_add(disp as i64 as u64);
            if let Ok(i) = slots.binary_search_by_key(&slot, |&(o, _)| o)
                && let Some(&(_, name)) = slots.get(i)
            {
                out.push(Sym { addr: entry_addr, size: 0, name, plt: true, global: false, section });
            }
        }
    }
}

/// `sym`, and for `foo@VER` or `foo@@VER` also a zero-sized `foo`, as gdb's ELF reader does.
#[cfg(test)]
fn push_as_gdb_records<'a>(table: &mut Vec<Sym<'a>>, sym: Sym<'a>) {
    push_records(table, sym, memchr::memchr(b'@', sym.name));
}

/// [`push_as_gdb_records`] with the first `@` of the name already found.
fn push_records<'a>(table: &mut Vec<Sym<'a>>, sym: Sym<'a>, version_at: Option<usize>) {
    table.push(sym);
    if let Some(at) = version_at.filter(|&at| at > 0) {
        table.push(Sym { size: 0, name: sym.name.get(..at).unwrap_or_default(), ..sym });
    }
}

/// The NUL-terminated name at `at` and where its first `@` is, in one scan when it has none.
fn versioned_c_str(table: &[u8], at: usize) -> Option<(&[u8], Option<usize>)> {
    let rest = table.get(at..)?;
    let first = memchr::memchr2(0, b'@', rest)?;
    if rest.get(first) == Some(&0) {
        return Some((&rest[..first], None));
    }
    let end = first + memchr::memchr(0, rest.get(first..)?)?;
    Some((&rest[..end], Some(first)))
}

fn end_of(s: &Sym<'_>) -> u64 {
    s.addr.saturating_add(s.size)
}

/// The best of several files' answers, as gdb picks across an objfile and its separate debug
/// objfile: the symbol at the highest address; on a tie the earlier file's.
pub(crate) fn best_of<'a>(hits: impl IntoIterator<Item = Option<Hit<'a>>>) -> Option<Hit<'a>> {
    let mut best: Option<Hit<'a>> = None;
    for hit in hits.into_iter().flatten() {
        if best.is_none_or(|b| b.sym.addr < hit.sym.addr) {
            best = Some(hit);
        }
    }
    best
}

/// Lookups by name in a file whose only table is `.dynsym`, through its `.gnu.hash` (or
/// SysV `.hash`): the entries spelled `name` are found by walking one hash chain, without
/// reading the table (a name looked for in every module, as a call site's target named by a
/// declaration is, then costs a few cache lines per module instead of its whole table).
/// [`DynsymNames::named`] answers exactly as [`SymbolTable::named`] on the file's text table.
pub(crate) struct DynsymNames<'a> {
    file: &'a ElfFile,
    dynsym: &'a [u8],
    dynstr: &'a [u8],
    index: HashIndex<'a>,
}

enum HashIndex<'a> {
    /// `.gnu.hash`: entries from `symoffset` on are hashed, sorted by bucket; each chain word
    /// holds the entry's hash with bit 0 set on the last of a bucket's run.
    Gnu { buckets: &'a [u8], chain: &'a [u8], symoffset: u32 },
    /// SysV `.hash`: every entry is on one of the linked chains.
    Sysv { buckets: &'a [u8], chain: &'a [u8] },
}

impl<'a> DynsymNames<'a> {
    /// The hash index of `file`'s `.dynsym` when that is the table [`FileSymbols::read`]
    /// takes (the file has no `.symtab`), else `None`: then the table answers.
    pub(crate) fn of(file: &'a ElfFile) -> Option<DynsymNames<'a>> {
        if file.sections.iter().any(|s| s.kind == SHT_SYMTAB) {
            return None;
        }
        DynsymNames::of_dynsym(file, &[SHT_GNU_HASH, SHT_HASH])
    }

    /// The index of `file`'s first `.dynsym` (the one the table reads), from the first hash
    /// section of the `kinds` linked to it. `None` when there is none or its header does not
    /// fit, and when a dynamic name holds an `@`: the table gives such a name a bare copy,
    /// which no hash chain holds.
    fn of_dynsym(file: &'a ElfFile, kinds: &[u32]) -> Option<DynsymNames<'a>> {
        let dynsym_at = file.sections.iter().position(|s| s.kind == SHT_DYNSYM)?;
        let dynsym = file.section_data(dynsym_at)?;
        let dynstr = file.section_data(file.sections.get(dynsym_at)?.link as usize)?;
        if memchr::memchr(b'@', dynstr).is_some() {
            return None;
        }
        let (kind, at) = kinds.iter().find_map(|&kind| Some((kind, file.sections.iter().position(|s| s.kind == kind && s.link as usize == dynsym_at)?)))?;
        let index = if kind == SHT_GNU_HASH {
            let data = file.section_data(at)?;
            let (nbuckets, symoffset, bloom_words) = (u32_at(data, 0)? as usize, u32_at(data, 4)?, u32_at(data, 8)? as usize);
            let buckets_at = bloom_words.checked_mul(8)?.checked_add(16)?;
            let chain_at = nbuckets.checked_mul(4)?.checked_add(buckets_at)?;
            HashIndex::Gnu { buckets: data.get(buckets_at..chain_at)?, chain: data.get(chain_at..)?, symoffset }
        } else {
            let data = file.section_data(at)?;
            let (nbucket, nchain) = (u32_at(data, 0)? as usize, u32_at(data, 4)? as usize);
            let chain_at = nbucket.checked_mul(4)?.checked_add(8)?;
            let end = nchain.checked_mul(4)?.checked_add(chain_at)?;
            HashIndex::Sysv { buckets: data.get(8..chain_at)?, chain: data.get(chain_at..end)? }
        };
        let buckets = match &index {
            HashIndex::Gnu { buckets, .. } | HashIndex::Sysv { buckets, .. } => buckets.len() / 4,
        };
        (buckets > 0).then_some(DynsymNames { file, dynsym, dynstr, index })
    }

    /// [`SymbolTable::named`] for the file's text table: the non-PLT text symbol spelled
    /// `name`, the first global one in the sorted, compacted order, else the first local one.
    /// The outer `None` says the hash section did not hold together on this walk (an index past
    /// the table, a chain that runs off its end or loops): ask the table then.
    pub(crate) fn named(&self, name: &[u8]) -> Option<Option<(u64, bool)>> {
        let entries = self.dynsym.len() / SYM_SIZE;
        // (address, entry, section index, global) of each text symbol spelled `name`.
        let mut found: Vec<(u64, u32, u16, bool)> = Vec::new();
        let mut consider = |i: u32| -> Option<()> {
            let at = (i as usize).checked_mul(SYM_SIZE)?;
            let raw = parse_sym(self.dynsym.get(at..at.checked_add(SYM_SIZE)?)?)?;
            // The name last: most unhashed entries are undefined. A name the string table
            // cannot give is not in the table either.
            if matches!(classify(self.file, raw.info, raw.shndx), Some(Kind::Text))
                && !name.is_empty()
                && c_str(self.dynstr, raw.name as usize) == Some(name)
            {
                found.push((raw.value, i, raw.shndx, matches!(raw.info >> 4, STB_GLOBAL | STB_WEAK | STB_GNU_UNIQUE)));
            }
            Some(())
        };
        match self.index {
            HashIndex::Gnu { buckets, chain, symoffset } => {
                // The entries before `symoffset` are on no chain (undefined ones, mostly): looked
                // at one by one, as few as they are.
                for i in 1..symoffset.min(u32::try_from(entries).unwrap_or(u32::MAX)) {
                    consider(i)?;
                }
                let hash = gnu_hash(name);
                let bucket = (hash as usize) % (buckets.len() / 4);
                let mut i = u32_at(buckets, bucket * 4)?;
                if i != 0 {
                    loop {
                        let word = u32_at(chain, (i.checked_sub(symoffset)? as usize).checked_mul(4)?)?;
                        if word | 1 == hash | 1 {
                            consider(i)?;
                        }
                        if word & 1 == 1 {
                            break;
                        }
                        // Bounded: the chain section ends.
                        i = i.checked_add(1)?;
                    }
                }
            }
            HashIndex::Sysv { buckets, chain } => {
                let bucket = (elf_hash(name) as usize) % (buckets.len() / 4);
                let mut i = u32_at(buckets, bucket * 4)?;
                let mut steps = 0;
                while i != 0 {
                    // A chain longer than the table loops.
                    steps += 1;
                    if steps > chain.len() / 4 {
                        return None;
                    }
                    consider(i)?;
                    i = u32_at(chain, (i as usize).checked_mul(4)?)?;
                }
            }
        }
        // The table's order among them (address, then table order) and its compaction.
        found.sort_unstable_by_key(|&(addr, i, _, _)| (addr, i));
        found.dedup_by(|b, a| a.0 == b.0 && a.2 == b.2);
        let first = found.first();
        let sym = found.iter().find(|f| f.3).or(first);
        Some(sym.map(|&(addr, _, _, global)| (addr, global)))
    }
}

/// The GNU hash of a name (`dl_new_hash`).
fn gnu_hash(name: &[u8]) -> u32 {
    name.iter().fold(5381u32, |h, &c| h.wrapping_mul(33).wrapping_add(u32::from(c)))
}

/// The SysV ELF hash of a name.
fn elf_hash(name: &[u8]) -> u32 {
    name.iter().fold(0u32, |h, &c| {
        let h = (h << 4).wrapping_add(u32::from(c));
        let g = h & 0xf000_0000;
        (h ^ (g >> 24)) & !g
    })
}

enum Kind {
    Text,
    Data,
}

/// One `Elf64_Sym`; `name` is its offset in the string table, read apart (most entries are
/// dropped on their other fields first).
struct RawSym {
    name: u32,
    info: u8,
    shndx: u16,
    value: u64,
    size: u64,
}

/// Which table a symbol with this `st_info` and `st_shndx` goes to, if any (a symbol without a
/// name goes to none either).
fn classify(file: &ElfFile, info: u8, shndx: u16) -> Option<Kind> {
    let st_type = info & 0xf;
    if shndx == SHN_UNDEF || shndx >= SHN_LORESERVE || st_type == STT_SECTION || st_type == STT_FILE {
        return None;
    }
    let section = file.sections.get(shndx as usize)?;
    if section.flags & SHF_ALLOC == 0 {
        return None;
    }
    if section.flags & SHF_EXECINSTR != 0 {
        Some(Kind::Text)
    } else if st_type == STT_TLS || section.flags & SHF_TLS != 0 {
        None
    } else {
        Some(Kind::Data)
    }
}

/// Maps ELF section indices to the table's section ranges.
#[derive(Default)]
struct SectionIndex {
    by_shndx: Vec<(u16, u32)>,
    ranges: Vec<SectionRange>,
    /// The last section asked for: runs of symbols share one (`.text`, mostly).
    last: Option<(u16, u32)>,
}

impl SectionIndex {
    fn index(&mut self, file: &ElfFile, shndx: u16) -> Option<u32> {
        if let Some((s, i)) = self.last
            && s == shndx
        {
            return Some(i);
        }
        let i = match self.by_shndx.iter().find(|(s, _)| *s == shndx) {
            Some(&(_, i)) => i,
            None => {
                let s = file.sections.get(shndx as usize)?;
                let i = u32::try_from(self.ranges.len()).ok()?;
                self.ranges.push(SectionRange { start: s.addr, end: s.addr.saturating_add(s.size) });
                self.by_shndx.push((shndx, i));
                i
            }
        };
        self.last = Some((shndx, i));
        Some(i)
    }
}

#[cfg(test)]
fn for_each_symbol<'a>(file: &'a ElfFile, index: usize, mut f: impl FnMut(RawSym, &'a [u8])) {
    let Some(section) = file.sections.get(index) else { return };
    let Some(data) = file.section_data(index) else { return };
    let Some(strtab) = file.section_data(section.link as usize) else { return };
    // Entry 0 is the null symbol.
    for entry in data.chunks_exact(SYM_SIZE).skip(1) {
        let Some(raw) = parse_sym(entry) else { continue };
        let Some(name) = c_str(strtab, raw.name as usize) else { continue };
        f(raw, name);
    }
}

fn parse_sym(entry: &[u8]) -> Option<RawSym> {
    Some(RawSym {
        name: u32_at(entry, 0)?,
        info: *entry.get(4)?,
        shndx: u16_at(entry, 6)?,
        value: u64_at(entry, 8)?,
        size: u64_at(entry, 16)?,
    })
}

fn c_str(table: &[u8], at: usize) -> Option<&[u8]> {
    let rest = table.get(at..)?;
    let end = memchr::memchr(0, rest)?;
    Some(&rest[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: (u64, u64) = (0x1000, 0x2000);
    const INIT: (u64, u64) = (0x800, 0x900);

    fn name(hit: Option<Hit<'_>>) -> Option<String> {
        hit.map(|h| h.sym.full_name().into_owned())
    }

    #[test]
    fn sized_symbol_covers_its_range_only() {
        let t = SymbolTable::from_symbols(&[(0x1000, 0x10, "a", TEXT), (0x1020, 0x10, "b", TEXT)], NameSource::Symtab);
        assert_eq!(name(t.lookup(0x1000)), Some("a".into()));
        assert_eq!(name(t.lookup(0x100f)), Some("a".into()));
        assert_eq!(name(t.lookup(0x1010)), None, "past a's end, before b");
        assert_eq!(name(t.lookup(0x102f)), Some("b".into()));
        assert_eq!(name(t.lookup(0x1030)), None);
        assert_eq!(name(t.lookup(0xfff)), None);
    }

    #[test]
    fn aliases_pick_the_greatest_name_as_gdb_does() {
        let t = SymbolTable::from_symbols(
            &[
                (0x1000, 0x40, "___pthread_mutex_lock", TEXT),
                (0x1000, 0x40, "__pthread_mutex_lock", TEXT),
                (0x1000, 0x40, "pthread_mutex_lock", TEXT),
                (0x1000, 0x40, "__GI___pthread_mutex_lock", TEXT),
            ],
            NameSource::Symtab,
        );
        assert_eq!(name(t.lookup(0x1010)), Some("pthread_mutex_lock".into()));
        let t = SymbolTable::from_symbols(&[(0x1000, 0x40, "__lll_lock_wait", TEXT), (0x1000, 0x40, "__GI___lll_lock_wait", TEXT)], NameSource::Symtab);
        assert_eq!(name(t.lookup(0x1000)), Some("__lll_lock_wait".into()), "'l' sorts after 'G'");
    }

    #[test]
    fn sized_alias_beats_zero_sized_alias() {
        let t = SymbolTable::from_symbols(&[(0x1000, 0x40, "real", TEXT), (0x1000, 0, "zz_label", TEXT)], NameSource::Symtab);
        assert_eq!(name(t.lookup(0x1004)), Some("real".into()));
    }

    #[test]
    fn zero_sized_symbols_cover_up_to_the_next_when_nothing_sized_does() {
        let t = SymbolTable::from_symbols(
            &[(0x1000, 0x10, "sized", TEXT), (0x1040, 0, "label", TEXT), (0x1080, 0, "later", TEXT)],
            NameSource::Symtab,
        );
        assert_eq!(name(t.lookup(0x1008)), Some("sized".into()));
        assert_eq!(name(t.lookup(0x1020)), None);
        assert_eq!(name(t.lookup(0x1050)), Some("label".into()));
        assert_eq!(name(t.lookup(0x1090)), Some("later".into()));
    }

    #[test]
    fn sized_symbol_inside_wins_over_a_closer_label() {
        // A label inside a sized function: gdb names addresses after it by the function.
        let t = SymbolTable::from_symbols(&[(0x1000, 0x100, "func", TEXT), (0x1040, 0, "inner_label", TEXT)], NameSource::Symtab);
        assert_eq!(name(t.lookup(0x1050)), Some("func".into()));
        // Past the function's end, the label is the closest thing gdb has.
        assert_eq!(name(t.lookup(0x1100)), Some("inner_label".into()));
    }

    #[test]
    fn symbols_of_other_sections_are_skipped() {
        let t = SymbolTable::from_symbols(&[(0x880, 0, "_init_label", INIT), (0x1000, 0x10, "f", TEXT)], NameSource::Symtab);
        assert_eq!(name(t.lookup(0x800 + 0x80)), Some("_init_label".into()));
        // An address in .text with nothing there is not `_init_label`'s, though it is the closest
        // zero-sized symbol below.
        let t = SymbolTable::from_symbols(&[(0x880, 0, "_init_label", INIT)], NameSource::Symtab);
        assert_eq!(name(t.lookup(0x1500)), None);
    }

    #[test]
    fn best_of_prefers_the_highest_address_then_the_first_file() {
        let a = SymbolTable::from_symbols(&[(0x1000, 0x100, "dyn_name", TEXT)], NameSource::Dynsym);
        let b = SymbolTable::from_symbols(&[(0x1000, 0x100, "static_name", TEXT), (0x1040, 0x20, "local_fn", TEXT)], NameSource::Symtab);
        let hit = best_of([a.lookup(0x1010), b.lookup(0x1010)]).unwrap();
        assert_eq!((hit.sym.full_name().as_ref(), hit.source), ("dyn_name", NameSource::Dynsym));
        let hit = best_of([a.lookup(0x1044), b.lookup(0x1044)]).unwrap();
        assert_eq!((hit.sym.full_name().as_ref(), hit.source), ("local_fn", NameSource::Symtab));
        assert!(best_of([None, None]).is_none());
    }

    #[test]
    fn duplicate_entries_collapse() {
        let t = SymbolTable::from_symbols(&[(0x1000, 0x10, "a", TEXT), (0x1000, 0x10, "a", TEXT)], NameSource::Symtab);
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn versioned_names_get_a_bare_zero_sized_copy() {
        let mut syms = Vec::new();
        for name in ["___pthread_mutex_lock", "__pthread_mutex_lock@GLIBC_2.2.5", "pthread_mutex_lock@@GLIBC_2.2.5"] {
            push_as_gdb_records(&mut syms, Sym { addr: 0x1000, size: 0x40, name: name.as_bytes(), plt: false, global: true, section: 0 });
        }
        assert_eq!(syms.len(), 5);
        let t = SymbolTable::new(syms, vec![SectionRange { start: 0x1000, end: 0x2000 }], Some(NameSource::Symtab));
        // The bare copies are zero-sized, so the greatest sized name wins, version and all.
        assert_eq!(name(t.lookup(0x1008)), Some("pthread_mutex_lock@@GLIBC_2.2.5".into()));
    }

    #[test]
    fn a_sized_symbol_ending_early_gives_way_to_an_enclosing_one() {
        let t = SymbolTable::from_symbols(&[(0x1000, 0x100, "cancellable", TEXT), (0x1040, 0x10, "nocancel", TEXT)], NameSource::Symtab);
        assert_eq!(name(t.lookup(0x1044)), Some("nocancel".into()));
        assert_eq!(name(t.lookup(0x1060)), Some("cancellable".into()));
    }

    #[test]
    fn truncated_entries_and_bad_offsets_are_ignored() {
        assert!(parse_sym(&[0u8; 10]).is_none());
        let mut e = [0u8; 24];
        e[0..4].copy_from_slice(&100u32.to_le_bytes());
        let name = |e: &[u8], strtab| parse_sym(e).and_then(|r| c_str(strtab, r.name as usize));
        let versioned = |e: &[u8], strtab| parse_sym(e).and_then(|r| versioned_c_str(strtab, r.name as usize));
        assert!(name(&e, b"\0abc\0").is_none(), "name offset past the string table");
        assert!(versioned(&e, b"\0abc\0").is_none());
        e[0..4].copy_from_slice(&1u32.to_le_bytes());
        assert_eq!(name(&e, b"\0abc\0"), Some(&b"abc"[..]));
        assert_eq!(versioned(&e, b"\0abc\0"), Some((&b"abc"[..], None)));
        assert_eq!(versioned(&e, b"\0a@@V\0"), Some((&b"a@@V"[..], Some(1))));
        assert!(name(&e, b"\0abc").is_none(), "unterminated name");
        assert!(versioned(&e, b"\0abc").is_none());
        assert!(versioned(&e, b"\0a@V").is_none(), "unterminated, after the version's @");
    }

    fn libc_debug_file() -> ElfFile {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/dumps/debug/.build-id/93/ac61ec5a8eb1396f9fbd350e3169a558528a40.debug");
        ElfFile::open(path).expect("the committed libc debug file")
    }

    /// What a lookup by name answered before tables were lazy: an index by name over the whole
    /// address-sorted table, the first global symbol of each name, else the first.
    fn eager_index<'a>(sorted: &[Sym<'a>]) -> FxHashMap<&'a [u8], (u64, bool)> {
        let mut map: FxHashMap<&'a [u8], (u64, bool)> = FxHashMap::default();
        for sym in sorted.iter().filter(|s| !s.plt) {
            let slot = map.entry(sym.name).or_insert((sym.addr, sym.global));
            if sym.global && !slot.1 {
                *slot = (sym.addr, true);
            }
        }
        map
    }

    /// On libc's real tables (the debug file's `.symtab` with its versioned copies and local
    /// aliases, and the library's `.dynsym` with BFD's `@plt` entries), every name is found by
    /// the scan and by the index as the eager index found it, and names are found without
    /// sorting the table.
    #[test]
    fn lookups_by_name_answer_as_the_eager_index_on_libc() {
        let debug = libc_debug_file();
        let lib = ElfFile::open(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/dumps/sysroot/lib/x86_64-linux-gnu/libc.so.6"))
            .expect("the committed libc");
        for (file, symtab_only) in [(&debug, true), (&lib, false)] {
            let syms = FileSymbols::read(file, symtab_only);
            let table = &syms.text;
            let mut names: Vec<&[u8]> = table.records.iter().map(|s| s.name).collect();
            names.sort_unstable();
            names.dedup();
            assert!(names.len() > 1000, "libc's names read ({})", names.len());
            let plt: Vec<Vec<u8>> = table.records.iter().filter(|s| s.plt).map(|s| [s.name, b"@plt"].concat()).collect();
            assert!(symtab_only || !plt.is_empty(), "the library's PLT entries");
            let scanned: Vec<_> = names.iter().map(|n| table.scan_named(n)).collect();
            assert!(table.by_address.get().is_none(), "scanning for names does not sort the table");
            let eager = eager_index(&table.symbols());
            let globals = scanned.iter().filter(|f| f.is_some_and(|(_, g)| g)).count();
            assert!(globals > 100 && globals < names.len(), "globals and locals both ({globals} of {})", names.len());
            for (name, got) in names.iter().zip(&scanned) {
                assert_eq!(*got, eager.get(name).copied(), "scan for {}", String::from_utf8_lossy(name));
                assert_eq!(table.named(name), *got, "named() for {}", String::from_utf8_lossy(name));
            }
            assert!(table.by_name.get().is_some(), "past {SCANNED_NAME_LOOKUPS} lookups the index answers");
            for name in plt.iter().map(Vec::as_slice).chain([&b"no_such_function"[..], b""]) {
                assert_eq!(table.scan_named(name), eager.get(name).copied(), "{}", String::from_utf8_lossy(name));
            }
        }
    }

    /// Records that tie on address and name compact as the sorted table does: the first one in
    /// table order stands for the others, so a global duplicate after a local one is not seen.
    #[test]
    fn lookups_by_name_see_the_compacted_table() {
        const OTHER: (u64, u64) = (0x3000, 0x4000);
        let mut t = SymbolTable::from_symbols(
            &[(0x1800, 0, "f", TEXT), (0x1800, 8, "f", TEXT), (0x3000, 4, "f", OTHER), (0x1000, 0x10, "g", TEXT), (0x1000, 0x10, "g", TEXT)],
            NameSource::Symtab,
        );
        for (i, global) in [false, true, true, false, true].into_iter().enumerate() {
            t.records[i].global = global;
        }
        let eager = eager_index(&t.symbols());
        assert_eq!(eager.get(&b"f"[..]), Some(&(0x3000, true)), "the global duplicate at 0x1800 was compacted away");
        assert_eq!(eager.get(&b"g"[..]), Some(&(0x1000, false)));
        for name in [&b"f"[..], b"g", b"h"] {
            assert_eq!(t.scan_named(name), eager.get(name).copied());
        }
    }

    /// Dynamic-only libraries of the committed sysroot and of this machine (those it has).
    fn dynamic_only_libraries() -> Vec<ElfFile> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let committed = ["samples/dumps/sysroot/lib/x86_64-linux-gnu/libc.so.6", "samples/dumps/sysroot/lib64/ld-linux-x86-64.so.2"];
        let machine = ["libc.so.6", "libstdc++.so.6", "libm.so.6", "libgcc_s.so.1", "libz.so.1", "libssl.so.3", "libcrypto.so.3"];
        let mut files: Vec<ElfFile> = committed.iter().map(|p| ElfFile::open(root.join(p)).expect("a committed library")).collect();
        for name in machine {
            match ElfFile::open(std::path::Path::new("/lib/x86_64-linux-gnu").join(name)) {
                Ok(f) => files.push(f),
                Err(e) => eprintln!("{name} skipped: {e}"),
            }
        }
        files
    }

    /// Every name of the file's `.dynsym` (defined, undefined, data, versioned twice), and
    /// names it does not have.
    fn dynamic_names(file: &ElfFile) -> Vec<&[u8]> {
        let index = file.sections.iter().position(|s| s.kind == SHT_DYNSYM).expect("a .dynsym");
        let mut names: Vec<&[u8]> = Vec::new();
        for_each_symbol(file, index, |_, name| names.push(name));
        names.extend([&b"no_such_function"[..], b"", b"malloc@plt", b"memcpy@GLIBC_2.14"]);
        names.sort_unstable();
        names.dedup();
        names
    }

    /// For every name a dynamic-only library has, the hash index (`.gnu.hash`, and `.hash`
    /// where there is one) gives what the table gives: the compacted order's first global text
    /// symbol, else its first local one, PLT entries never, data symbols never.
    #[test]
    fn the_hash_index_answers_lookups_by_name_as_the_table() {
        let (mut compared, mut several, mut sysv) = (0, 0, 0);
        for file in dynamic_only_libraries() {
            let what = file.path().display().to_string();
            assert!(!file.sections.iter().any(|s| s.kind == SHT_SYMTAB), "{what} has a .symtab");
            let table = FileSymbols::read(&file, false);
            let mut indexes = vec![DynsymNames::of(&file).unwrap_or_else(|| panic!("{what}: a hash index"))];
            indexes.extend(DynsymNames::of_dynsym(&file, &[SHT_HASH]));
            sysv += indexes.len() - 1;
            let names = dynamic_names(&file);
            let mut defined = 0;
            for name in &names {
                let want = table.text.named(name);
                defined += usize::from(want.is_some());
                for index in &indexes {
                    assert_eq!(index.named(name), Some(want), "{what}: {}", String::from_utf8_lossy(name));
                }
                // The same name at more than one address: a symbol with several versions.
                let spelled = table.text.records.iter().filter(|s| !s.plt && s.name == *name).map(|s| s.addr).collect::<std::collections::BTreeSet<_>>();
                several += usize::from(spelled.len() > 1);
            }
            assert!(defined > 10, "{what}: {defined} text symbols of {} names", names.len());
            compared += names.len();
        }
        assert!(several > 0, "some names have several versions at different addresses");
        assert!(sysv > 0, "the committed libc has a .hash too");
        eprintln!("{compared} names compared, {several} with several versions, {sysv} SysV indexes");
    }

    /// Locals among the versions: with every third dynamic symbol of libc made local (its
    /// hash unchanged), a name's global version still wins over a local one at a lower
    /// address, and a name with only locals is found as local, as the table finds them.
    #[test]
    fn the_hash_index_prefers_globals_as_the_table_does() {
        let libc = &dynamic_only_libraries()[0];
        let edited = with_section_edited(libc, SHT_DYNSYM, |b| {
            for entry in b.chunks_exact_mut(SYM_SIZE).step_by(3) {
                entry[4] &= 0xf;
            }
        });
        let table = FileSymbols::read(&edited, false);
        let index = DynsymNames::of(&edited).expect("a hash index");
        let (mut locals, mut global_over_local) = (0, 0);
        for name in dynamic_names(&edited) {
            let want = table.text.named(name);
            assert_eq!(index.named(name), Some(want), "{}", String::from_utf8_lossy(name));
            locals += usize::from(want.is_some_and(|(_, g)| !g));
            let spelled: Vec<_> = table.text.records.iter().filter(|s| s.name == name && !s.plt).collect();
            global_over_local += usize::from(spelled.iter().any(|s| s.global) && spelled.iter().any(|s| !s.global && Some(s.addr) < want.map(|w| w.0)));
        }
        assert!(locals > 100 && global_over_local > 0, "{locals} found as local, {global_over_local} globals after a local");
    }

    /// `file`'s bytes with `edit` applied to the bytes of its section of type `kind`.
    fn with_section_edited(file: &ElfFile, kind: u32, edit: impl Fn(&mut [u8])) -> ElfFile {
        let s = file.sections.iter().find(|s| s.kind == kind).expect("the section");
        let mut bytes = file.bytes().to_vec();
        edit(&mut bytes[s.offset as usize..(s.offset + s.size) as usize]);
        ElfFile::from_bytes("edited", bytes).expect("still an ELF file")
    }

    /// A hash section that does not hold together ends every walk (a bucket past the chains, a
    /// chain with no end, a SysV chain that loops) with "ask the table", never a hang or a
    /// panic.
    #[test]
    fn a_broken_hash_index_ends_its_walks_and_defers_to_the_table() {
        let libc = &dynamic_only_libraries()[0];
        let names = dynamic_names(libc);
        let words = |b: &mut [u8], from: usize, value: &dyn Fn(usize) -> u32| {
            for (n, w) in b.chunks_exact_mut(4).enumerate().skip(from) {
                w.copy_from_slice(&value(n).to_le_bytes());
            }
        };
        let header = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
        // Buckets (and everything after the header and bloom) point far past the table.
        let far = with_section_edited(libc, SHT_GNU_HASH, |b| {
            let from = 4 + header(b, 8) * 2;
            words(b, from, &|_| 0xffff_fff0);
        });
        // Chain words without the end bit: every walk runs to the end of the section.
        let endless = with_section_edited(libc, SHT_GNU_HASH, |b| {
            let from = 4 + header(b, 8) * 2 + header(b, 0);
            words(b, from, &|_| 0x2);
        });
        // Each SysV chain link points to itself.
        let looping = with_section_edited(libc, SHT_HASH, |b| {
            let from = 2 + header(b, 0);
            words(b, from, &|n| (n - from) as u32);
        });
        for (what, file, kinds) in [("far", &far, SHT_GNU_HASH), ("endless", &endless, SHT_GNU_HASH), ("looping", &looping, SHT_HASH)] {
            let index = DynsymNames::of_dynsym(file, &[kinds]).expect("the header still fits");
            let deferred = names.iter().filter(|n| index.named(n).is_none()).count();
            assert!(deferred > names.len() / 2, "{what}: {deferred} of {} walks deferred", names.len());
        }
    }

    /// The libc library (`.symtab`-less: its `.dynsym`, with `@plt` entries) and its debug file.
    fn libc_files() -> [(ElfFile, bool); 2] {
        let lib = ElfFile::open(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/dumps/sysroot/lib/x86_64-linux-gnu/libc.so.6"))
            .expect("the committed libc");
        [(libc_debug_file(), true), (lib, false)]
    }

    /// Every answer of `read` equals `built`'s: the records, the sorted table, every lookup by
    /// address (at, just before and inside each symbol) and by name.
    fn assert_answers_as(read: &FileSymbols<'_>, built: &FileSymbols<'_>) {
        for (got, want) in [(&read.text, &built.text), (&read.data, &built.data)] {
            assert_eq!(got.records, want.records);
            assert_eq!(got.sections, want.sections);
            assert_eq!(got.source, want.source);
            assert_eq!(got.by_address(), want.by_address());
            let mut names: Vec<Vec<u8>> = want.records.iter().map(|s| if s.plt { [s.name, b"@plt"].concat() } else { s.name.to_vec() }).collect();
            names.extend([b"no_such_function".to_vec(), Vec::new()]);
            names.sort_unstable();
            names.dedup();
            for name in &names {
                assert_eq!(got.scan_named(name), want.scan_named(name), "{}", String::from_utf8_lossy(name));
            }
            for s in &want.records {
                for addr in [s.addr, s.addr.wrapping_sub(1), s.addr.saturating_add(s.size / 2 + 1)] {
                    assert_eq!(got.lookup(addr), want.lookup(addr), "{addr:#x}");
                }
            }
        }
    }

    /// libc's tables kept and read back answer every lookup as the tables read from the file;
    /// an entry damaged in any field a decode checks is refused as a whole.
    #[test]
    fn kept_tables_read_back_as_built_and_damaged_ones_not_at_all() {
        for (file, symtab_only) in libc_files() {
            let tables = Tables::of(&file, symtab_only).expect("libc's tables");
            let built = FileSymbols::parse(&file, symtab_only, &tables);
            let kept = built.encode(&tables);
            assert!(kept.len() as u64 <= tables.bound, "within the bound a read allows");
            let read = FileSymbols::decode(&kept, &tables).expect("the kept tables");
            assert!(read.text.records.len() > 1000 && (symtab_only || read.text.records.iter().any(|s| s.plt)));
            assert!(read.text.by_address.get().is_some() && read.data.by_address.get().is_some(), "sorted without sorting");
            assert_answers_as(&read, &built);

            let count = |at: usize| u64::from_le_bytes(kept[at..at + 8].try_into().unwrap()) as usize;
            let records = KEPT_HEADER + count(0) * KEPT_SECTION;
            let order = records + count(8) * KEPT_RECORD;
            let field = |record: usize, at: usize| records + record * KEPT_RECORD + at;
            let plain = built.text.records.iter().position(|s| !s.plt).expect("a record named from the table's strings");
            let name_len = u32::from_le_bytes(kept[field(plain, 20)..field(plain, 24)].try_into().unwrap());
            let set = |b: &mut Vec<u8>, at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
            let first_order = u32::from_le_bytes(kept[order..order + 4].try_into().unwrap());
            let mut cases: Vec<(&str, Vec<u8>)> = vec![("cut short", kept[..kept.len() - 1].to_vec()), ("a byte more", [&kept[..], &[0]].concat()), ("empty", Vec::new())];
            let mut edit = |what: &'static str, f: &dyn Fn(&mut Vec<u8>)| {
                let mut b = kept.clone();
                f(&mut b);
                cases.push((what, b));
            };
            edit("a record more", &|b| b[8] += 1);
            edit("a name past its string table", &|b| set(b, field(0, 16), tables.strtab.len() as u32));
            edit("a name running off its string table", &|b| set(b, field(0, 20), u32::MAX));
            edit("an empty name", &|b| set(b, field(0, 20), 0));
            // The name runs on over its NUL into the next one.
            edit("a name holding a NUL", &|b| set(b, field(plain, 20), name_len + 2));
            edit("a section not kept", &|b| set(b, field(0, 24), count(0) as u32));
            edit("an unknown flag", &|b| set(b, field(0, 28), 8));
            edit("a PLT entry named from the table's strings", &|b| set(b, field(0, 28), KEPT_PLT));
            edit("a position past the records", &|b| set(b, order, count(8) as u32));
            edit("a position twice", &|b| set(b, order + 4, first_order));
            edit("positions out of address order", &|b| {
                let (x, y) = (order, order + 4 * (count(16) - 1));
                let (first, last) = (b[x..x + 4].to_vec(), b[y..y + 4].to_vec());
                b[x..x + 4].copy_from_slice(&last);
                b[y..y + 4].copy_from_slice(&first);
            });
            for (what, bytes) in &cases {
                assert!(FileSymbols::decode(bytes, &tables).is_none(), "{what} (symtab_only {symtab_only})");
            }
        }
    }

    /// With a cache, the first read keeps the tables and the second rebuilds them from the
    /// entry, sorted already: the same answers either way; without a cache nothing is kept.
    #[test]
    fn a_second_read_rebuilds_the_tables_the_first_kept() {
        use crate::process::section_cache::{FileIdentity, SectionCache, SETTLE};
        let dir = std::env::temp_dir().join(format!("knot-symbols-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cache = std::sync::Arc::new(SectionCache::new(&dir, 1 << 30));
        for (plain, symtab_only) in libc_files() {
            let meta = std::fs::metadata(plain.path()).expect("the committed file");
            if FileIdentity::settled(&meta, std::time::SystemTime::now()).is_none() {
                // Checked out just now: knot trusts its identity in a moment.
                std::thread::sleep(SETTLE);
            }
            let open = || {
                let mut file = ElfFile::open(plain.path()).expect("the committed file");
                file.set_section_cache(Some(cache.clone()));
                file
            };
            let what = if symtab_only { KEPT_AS_DEBUG } else { KEPT_AS };
            let uncached = FileSymbols::read(&plain, symtab_only);
            assert!(plain.cached_derived(what, KEPT_VERSION, u64::MAX).is_none(), "nothing kept without a cache");
            let first_file = open();
            assert!(first_file.cached_derived(what, KEPT_VERSION, u64::MAX).is_none(), "nothing kept before the first read");
            assert_answers_as(&FileSymbols::read(&first_file, symtab_only), &uncached);
            let second_file = open();
            assert!(second_file.cached_derived(what, KEPT_VERSION, u64::MAX).is_some(), "kept by the first read");
            let second = FileSymbols::read(&second_file, symtab_only);
            assert!(second.text.by_address.get().is_some(), "sorted as kept");
            assert_answers_as(&second, &uncached);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The radix sort gives `sort_unstable`'s order, whichever bytes of the addresses differ.
    #[test]
    fn the_radix_sort_orders_as_sort_unstable() {
        let spread = (0..5000u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (i % 64));
        let edges = [u64::MAX, 0, 1 << 56, 0x1234_5678_9abc_def0, 0x40, 0x40, 1 << 8, u64::MAX, 0xff, 0x100];
        let addrs: Vec<u64> = edges.into_iter().chain(spread).collect();
        let mut pairs: Vec<(u64, u32)> = addrs.iter().copied().zip(0..).collect();
        pairs.sort_unstable();
        let mut order: Vec<u32> = (0..addrs.len() as u32).collect();
        radix_sort_by_address(&mut order, |i| addrs[i as usize]);
        assert_eq!(order, pairs.iter().map(|p| p.1).collect::<Vec<_>>());
        let mut same = vec![0u32, 1, 2];
        radix_sort_by_address(&mut same, |_| 7);
        assert_eq!(same, [0, 1, 2]);
        radix_sort_by_address(&mut Vec::new(), |_| 0);
    }

    /// The pair sort orders as a stable sort by (address, name) does, on libc's real table
    /// (aliases, versioned copies) and on entries that tie on address and name but not size.
    #[test]
    fn the_pair_sort_is_the_stable_sort() {
        let file = libc_debug_file();
        let mut raw = Vec::new();
        let index = file.sections.iter().position(|s| s.kind == SHT_SYMTAB).expect("a .symtab");
        let mut sections = SectionIndex::default();
        for_each_symbol(&file, index, |r, name| {
            if let Some(section) = sections.index(&file, r.shndx) {
                push_as_gdb_records(&mut raw, Sym { addr: r.value, size: r.size, name, plt: false, global: r.info >> 4 == STB_GLOBAL, section });
            }
        });
        assert!(raw.len() > 5000, "libc's table read ({})", raw.len());
        let tie = |size, plt| Sym { addr: 0x40, size, name: b"x", plt, global: false, section: 0 };
        raw.extend([tie(3, false), tie(0, true), tie(1, false), tie(2, true), tie(0, false)]);
        let mut stable = raw.clone();
        stable.sort_by(|a, b| a.addr.cmp(&b.addr).then_with(|| a.name_bytes().cmp(b.name_bytes())));
        let order: Vec<Sym<'_>> = sorted(&raw).iter().map(|&i| raw[i as usize]).collect();
        assert_eq!(order, stable);
    }
}
