//! DWARF lookups through addr2line: the inline chain and source lines at an address.
//!
//! A module's units are found through `.debug_aranges` (`units.rs`) and each unit an address
//! falls in gets its own addr2line context, built on its first lookup: addr2line's index over
//! every unit would parse all of them first (libc's 2 063). Without `.debug_aranges`, or once a
//! unit refers to DIEs of another one (`DW_FORM_ref_addr`), the module uses one context over
//! all units, as addr2line alone would.
//!
//! `addr2line::Context` fills its caches through `core::cell::OnceCell`, so it is `Send` but not
//! `Sync`; each module's contexts sit behind its own mutex. A lookup holds it for microseconds
//! once the unit is parsed, and different modules never contend. Everything handed out is owned,
//! so the lock is released before names are post-processed.

use super::callsites::{Target, UnitCalls};
use super::die_name::Namer;
use super::names::{display_name, is_cpp, NameKind};
use super::units::{self, UnitIndex};
use super::{NameSource, SourceFrame};
use crate::process::ElfFile;
use gimli::{EndianSlice, RunTimeEndian};
use std::panic::{catch_unwind, AssertUnwindSafe};
use rustc_hash::FxHashMap;
use std::sync::{Mutex, PoisonError};

pub(crate) type Reader<'p> = EndianSlice<'p, RunTimeEndian>;

pub(crate) struct Dwarf<'p> {
    inner: Mutex<Inner<'p>>,
}

struct Inner<'p> {
    file: &'p ElfFile,
    /// Every section, for unit headers and the index.
    whole: gimli::Dwarf<Reader<'p>>,
    mode: Mode<'p>,
}

/// How units are found and parsed.
enum Mode<'p> {
    /// Only the units addresses fall in are parsed, each on its own (`units.rs`); by index in
    /// the unit index, `None` for a unit that could not be parsed.
    ByUnit { index: UnitIndex, scopes: FxHashMap<usize, Option<Scope<'p>>> },
    /// addr2line's index over every unit: without `.debug_aranges`, or once a unit refers to
    /// another one (a unit parsed alone cannot follow that).
    Whole(Scope<'p>),
    /// The whole index could not be built.
    Nothing,
}

/// One addr2line context (over one unit, or all) and what knot reads beside it.
struct Scope<'p> {
    ctx: addr2line::Context<Reader<'p>>,
    /// Per unit (by section offset): each line-table file as addr2line renders it, and as gdb
    /// shows it. Filled on a unit's first lookup.
    files: FxHashMap<usize, Vec<(String, String)>>,
    namer: Namer,
    /// Per unit (by section offset): its call sites and functions, read on the first
    /// tail-call question about an address in it.
    calls: FxHashMap<usize, UnitCalls>,
}

impl<'p> Scope<'p> {
    fn new(ctx: addr2line::Context<Reader<'p>>) -> Self {
        Scope { ctx, files: FxHashMap::default(), namer: Namer::default(), calls: FxHashMap::default() }
    }

    /// Whether a unit of this scope has a function or a line at `probe`.
    fn covers(&self, probe: u64) -> bool {
        self.ctx.find_dwarf_and_unit(probe).skip_all_loads().is_some()
    }

    fn calls(&mut self, probe: u64) -> Option<&UnitCalls> {
        let Scope { ctx, calls, .. } = self;
        let unit = ctx.find_dwarf_and_unit(probe).skip_all_loads()?;
        Some(calls.entry(unit.header.offset().0).or_insert_with(|| UnitCalls::parse(unit)))
    }
}

/// Why a lookup gave nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LookupError {
    /// The DWARF is malformed where the address points.
    Malformed(String),
    /// addr2line panicked on this data (caught; the module's DWARF stays usable).
    Panicked,
}

/// The sections of `file` addr2line reads, with `.debug_info` and `.debug_aranges` replaced
/// when given (a unit parsed on its own).
fn sections<'p>(file: &'p ElfFile, only: Option<&'p [u8]>) -> Option<gimli::Dwarf<Reader<'p>>> {
    let load = |id: gimli::SectionId| -> Result<Reader<'p>, gimli::Error> {
        let data = match (id, only) {
            (gimli::SectionId::DebugInfo, Some(unit)) => unit,
            // Its offsets are the whole section's; the unit's own ranges say where it is.
            (gimli::SectionId::DebugAranges, Some(_)) => &[],
            _ if needed(id) => file.section(id.name()).unwrap_or(&[]),
            _ => &[],
        };
        Ok(EndianSlice::new(data, RunTimeEndian::Little))
    };
    gimli::Dwarf::load(load).ok()
}

fn context<'p>(file: &'p ElfFile, only: Option<&'p [u8]>) -> Option<addr2line::Context<Reader<'p>>> {
    catch_unwind(AssertUnwindSafe(|| addr2line::Context::from_dwarf(sections(file, only)?).ok())).ok().flatten()
}

/// addr2line's index over every unit; when that fails (it gives up on a damaged
/// `.debug_aranges`), the same without `.debug_aranges`: units are then found by their DIEs.
fn whole_context(file: &ElfFile) -> Option<addr2line::Context<Reader<'_>>> {
    context(file, None).or_else(|| {
        let mut dwarf = sections(file, None)?;
        dwarf.debug_aranges = gimli::DebugAranges::from(EndianSlice::new(&[], RunTimeEndian::Little));
        catch_unwind(AssertUnwindSafe(|| addr2line::Context::from_dwarf(dwarf).ok())).ok().flatten()
    })
}

/// Inflates the compressed sections of `file` that addr2line reads side by side: the largest
/// (`.debug_info`, most of the time) here, the others on a second thread, so a cold run waits
/// for `.debug_info` alone when a core is free. Nothing happens when fewer than two are
/// compressed; a thread that cannot be started leaves the work to the first reads.
fn inflate_ahead(file: &ElfFile) {
    const SHF_COMPRESSED: u64 = 0x800;
    let mut compressed: Vec<(u64, usize)> = file
        .sections
        .iter()
        .enumerate()
        .filter(|(_, s)| s.flags & SHF_COMPRESSED != 0 && !s.is_nobits())
        .filter(|(_, s)| NEEDED.iter().any(|id| id.name() == s.name))
        .map(|(i, s)| (s.size, i))
        .collect();
    if compressed.len() < 2 {
        return;
    }
    compressed.sort_unstable();
    let Some((_, largest)) = compressed.pop() else { return };
    std::thread::scope(|scope| {
        let rest = || {
            for &(_, i) in compressed.iter().rev() {
                file.section_data(i);
            }
        };
        let helper = std::thread::Builder::new().name("knot-inflate".into()).spawn_scoped(scope, rest);
        file.section_data(largest);
        if helper.is_err() {
            rest();
        }
    });
}

/// The first of `files` with a non-empty `.debug_info`: the file a module's DWARF is read from.
/// Its compressed sections that addr2line reads are inflated on the way (see [`inflate_ahead`]).
pub(crate) fn dwarf_file<'p>(files: impl IntoIterator<Item = &'p ElfFile>) -> Option<&'p ElfFile> {
    files.into_iter().find(|f| {
        if f.section_by_name(".debug_info").is_none_or(|(_, s)| s.size == 0 || s.is_nobits()) {
            return false;
        }
        inflate_ahead(f);
        f.section(".debug_info").is_some_and(|d| !d.is_empty())
    })
}

/// Which scope answers for a unit.
enum Found<'s, 'p> {
    Scope(&'s mut Scope<'p>),
    /// The unit could not be parsed: it answers nothing.
    Nothing,
    /// The unit refers to others: the module switches to the whole index.
    NeedsWhole,
}

impl<'p> Inner<'p> {
    /// The scope of unit `unit` of the index, parsed on first use.
    fn unit_scope(&mut self, unit: usize) -> Found<'_, 'p> {
        let Inner { file, whole, mode } = self;
        let file = *file;
        let Mode::ByUnit { index, scopes } = mode else { return Found::Nothing };
        if let std::collections::hash_map::Entry::Vacant(slot) = scopes.entry(unit) {
            let Some(span) = index.span(unit) else { return Found::Nothing };
            let Some(header) = whole.debug_info.header_from_offset(gimli::DebugInfoOffset(span.offset)).ok() else { return Found::Nothing };
            if units::may_refer_outside(whole, header.debug_abbrev_offset().0) {
                return Found::NeedsWhole;
            }
            let bytes = file.section(gimli::SectionId::DebugInfo.name()).and_then(|d| d.get(span.offset..span.offset.checked_add(span.len)?));
            slot.insert(bytes.and_then(|b| context(file, Some(b))).map(Scope::new));
        }
        match scopes.get_mut(&unit) {
            Some(Some(scope)) => Found::Scope(scope),
            _ => Found::Nothing,
        }
    }

    fn switch_to_whole(&mut self) {
        self.mode = whole_context(self.file).map_or(Mode::Nothing, |ctx| Mode::Whole(Scope::new(ctx)));
    }

    /// The units that may hold `probe`, in the order to ask them; completes the index first.
    fn candidates(&mut self, probe: u64) -> Vec<usize> {
        let Inner { file, whole, mode } = self;
        let Mode::ByUnit { index, .. } = mode else { return Vec::new() };
        index.complete(whole);
        index.keep(file);
        index.candidates(probe)
    }

    /// Runs `f` on the scope whose unit has a function or line at `probe` (addr2line's choice of
    /// unit).
    fn with_scope<T>(&mut self, probe: u64, mut f: impl FnMut(&mut Scope<'p>) -> T) -> Option<T> {
        loop {
            match &mut self.mode {
                Mode::Whole(scope) => return Some(f(scope)),
                Mode::Nothing => return None,
                Mode::ByUnit { .. } => {}
            }
            let mut switch = false;
            for unit in self.candidates(probe) {
                match self.unit_scope(unit) {
                    Found::Scope(scope) if scope.covers(probe) => return Some(f(scope)),
                    Found::Scope(_) | Found::Nothing => {}
                    Found::NeedsWhole => {
                        switch = true;
                        break;
                    }
                }
            }
            if !switch {
                return None;
            }
            self.switch_to_whole();
        }
    }
}

impl<'p> Dwarf<'p> {
    /// The DWARF of the first of `files` that has a `.debug_info`; `None` when none has, or
    /// (without `.debug_aranges` to find units by) the unit index cannot be built.
    ///
    /// Only the sections addr2line reads for names, lines and inline chains (those its own
    /// `Context::from_sections` takes), which are also all the call-site index reads, are
    /// loaded; the others (location lists, macros, type units, name indexes) are left empty,
    /// so a compressed one is never inflated.
    pub(crate) fn load(files: impl IntoIterator<Item = &'p ElfFile>) -> Option<Dwarf<'p>> {
        let file = dwarf_file(files)?;
        let whole = sections(file, None)?;
        let index = UnitIndex::kept(file, &whole).or_else(|| catch_unwind(AssertUnwindSafe(|| UnitIndex::read(&whole))).ok().flatten());
        let mode = match index {
            Some(index) => Mode::ByUnit { index, scopes: FxHashMap::default() },
            None => Mode::Whole(Scope::new(whole_context(file)?)),
        };
        Some(Dwarf { inner: Mutex::new(Inner { file, whole, mode }) })
    }

    /// The same DWARF through addr2line's index over every unit, as without `.debug_aranges`.
    #[cfg(test)]
    fn load_whole(file: &'p ElfFile) -> Option<Dwarf<'p>> {
        let mode = Mode::Whole(Scope::new(context(file, None)?));
        Some(Dwarf { inner: Mutex::new(Inner { file, whole: sections(file, None)?, mode }) })
    }

    /// Units parsed on their own so far; `None` when the module uses addr2line's whole index.
    #[cfg(test)]
    fn units_parsed(&self) -> Option<usize> {
        match &self.inner.lock().unwrap_or_else(PoisonError::into_inner).mode {
            Mode::ByUnit { scopes, .. } => Some(scopes.len()),
            _ => None,
        }
    }

    /// Runs `f` on the call-site index of the unit covering link-time address `probe`; `None`
    /// when no unit covers it (or the lookup panicked).
    fn with_calls<T>(&self, probe: u64, f: impl FnOnce(&UnitCalls) -> Option<T>) -> Option<T> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let mut f = Some(f);
        let result = catch_unwind(AssertUnwindSafe(|| {
            inner.with_scope(probe, |scope| scope.calls(probe).and_then(|index| f.take().and_then(|f| f(index)))).flatten()
        }));
        result.ok().flatten()
    }

    /// The target of the call site whose return address is `return_pc` (link-time), looked up
    /// in the unit holding `return_pc - 1`, the call (gdb's `call_site_for_pc`).
    pub(crate) fn call_site(&self, return_pc: u64) -> Option<Target> {
        self.with_calls(return_pc.wrapping_sub(1), |u| u.site(return_pc).cloned())
    }

    /// The entry of the function (not an inlined one) holding `probe`.
    pub(crate) fn function_entry(&self, probe: u64) -> Option<u64> {
        self.with_calls(probe, |u| u.entry_of(probe))
    }

    /// The tail-call sites (return addresses) of the function starting exactly at `entry`;
    /// `None` when no function starts there.
    pub(crate) fn tail_call_sites(&self, entry: u64) -> Option<Vec<u64>> {
        self.with_calls(entry, |u| u.tail_sites(entry).map(<[u64]>::to_vec))
    }

    /// Appends the frames at link-time address `probe` to `out`, innermost first. A frame whose
    /// function has no name (code with line information but no subprogram, such as assembly)
    /// has `function: None`. On an error `out` is left as it was.
    pub(crate) fn frames(&self, probe: u64, out: &mut Vec<SourceFrame>) -> Result<(), LookupError> {
        let start = out.len();
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let result = catch_unwind(AssertUnwindSafe(|| inner.with_scope(probe, |scope| collect(scope, probe, out)).unwrap_or(Ok(()))));
        drop(inner);
        let result = result.unwrap_or(Err(LookupError::Panicked));
        if result.is_err() {
            out.truncate(start);
        }
        result
    }
}

fn collect(scope: &mut Scope<'_>, probe: u64, out: &mut Vec<SourceFrame>) -> Result<(), LookupError> {
    let bad = |e: gimli::Error| LookupError::Malformed(e.to_string());
    let Scope { ctx, files, namer, .. } = scope;
    let unit = ctx.find_dwarf_and_unit(probe).skip_all_loads();
    let unit_files: &[(String, String)] = match unit {
        Some(unit) => files.entry(unit.header.offset().0).or_insert_with(|| line_table_files(unit)),
        None => &[],
    };
    // How a frame's name is built; the outer frame's is built again once it is known to be the
    // outer one (only C++ names without a linkage name differ, by their parameters).
    let mut name = |raw: &str, lang: Option<gimli::DwLang>, die: Option<gimli::UnitOffset>, inlined: bool| -> String {
        let mut from_dies = |with_params: bool| unit.zip(die).and_then(|(u, d)| namer.function_name(u, d, with_params));
        let by_dies = match lang {
            // gdb never uses Rust linkage names.
            Some(gimli::DW_LANG_Rust) => from_dies(false),
            // C++ without a linkage name: gdb builds the name from the scopes.
            Some(l) if is_cpp(l) && !raw.starts_with("_Z") => from_dies(!inlined),
            _ => None,
        };
        by_dies.unwrap_or_else(|| display_name(raw, lang, NameKind::Debug))
    };
    let mut last: Option<(Option<gimli::DwLang>, Option<gimli::UnitOffset>)> = None;
    let mut frames = ctx.find_frames(probe).skip_all_loads().map_err(bad)?;
    while let Some(frame) = frames.next().map_err(bad)? {
        let (raw_name, lang) = match &frame.function {
            Some(f) => (Some(f.raw_name().map_err(bad)?.into_owned()), f.language),
            None => (None, None),
        };
        let (file, line, column) = match &frame.location {
            Some(l) => (l.file.map(|f| gdb_file_name(f, unit_files)), l.line, l.column),
            None => (None, None, None),
        };
        let function = raw_name.as_deref().map(|raw| name(raw, lang, frame.dw_die_offset, true));
        last = Some((lang, frame.dw_die_offset));
        out.push(SourceFrame { function, raw_name, file, line, column, inlined: false, tail_call: false, function_offset: None, source: NameSource::Dwarf });
    }
    if let (Some((Some(lang), die)), Some(outer)) = (last, out.last_mut())
        && is_cpp(lang)
        && let Some(raw) = outer.raw_name.as_deref()
        && !raw.starts_with("_Z")
    {
        outer.function = Some(name(raw, Some(lang), die, false));
    }
    Ok(())
}

/// The sections addr2line (or the call-site index) reads.
const NEEDED: [gimli::SectionId; 10] = {
    use gimli::SectionId::*;
    [DebugAbbrev, DebugAddr, DebugAranges, DebugInfo, DebugLine, DebugLineStr, DebugRanges, DebugRngLists, DebugStr, DebugStrOffsets]
};

/// Whether addr2line (or the call-site index) reads section `id`.
fn needed(id: gimli::SectionId) -> bool {
    NEEDED.contains(&id)
}

fn gdb_file_name(rendered: &str, unit_files: &[(String, String)]) -> String {
    unit_files.iter().find(|(r, _)| r == rendered).map_or_else(|| rendered.to_string(), |(_, shown)| shown.clone())
}

/// Every file of the unit's line table: (addr2line's rendering, gdb's name).
///
/// addr2line joins the unit's directory, the file's directory and its name. gdb shows the
/// directory entry and the name (`./nptl/futex-internal.c`, `../sysdeps/nptl/futex-internal.h`,
/// `/usr/include/stdio.h`; DWARF 5's directory 0 counts, DWARF 4's does not), except that the
/// file the unit is named after is shown by the unit's `DW_AT_name` (`dl.c`).
fn line_table_files(unit: gimli::UnitRef<'_, Reader<'_>>) -> Vec<(String, String)> {
    let Some(program) = &unit.line_program else { return Vec::new() };
    let header = program.header();
    let text = |r: Reader<'_>| r.to_string_lossy().into_owned();
    let attr = |v| unit.attr_string(v).ok().map(text);
    let comp_dir = unit.comp_dir.map(text);
    let joined = |p: &str| match &comp_dir {
        Some(dir) if !is_absolute(p) && !dir.is_empty() => format!("{}/{p}", dir.trim_end_matches('/')),
        _ => p.to_string(),
    };
    let primary = unit.name.map(text).map(|name| (joined(&name), name));
    let mut out = Vec::with_capacity(header.file_names().len());
    for file in header.file_names() {
        let Some(name) = attr(file.path_name()) else { continue };
        let index = file.directory_index();
        let directory = file.directory(header).and_then(attr);
        let mut rendered = comp_dir.clone().unwrap_or_default();
        if index != 0
            && let Some(d) = &directory
        {
            path_push(&mut rendered, d);
        }
        path_push(&mut rendered, &name);
        let gdb_directory = if header.version() <= 4 && index == 0 { None } else { directory };
        let mut shown = match gdb_directory {
            Some(d) if !is_absolute(&name) => format!("{d}/{name}"),
            _ => name,
        };
        if let Some((full, name)) = &primary
            && joined(&shown) == *full
        {
            shown = name.clone();
        }
        out.push((rendered, shown));
    }
    out
}

fn is_absolute(p: &str) -> bool {
    p.starts_with('/') || p.starts_with('\\') || p.get(1..3) == Some(":/") || p.get(1..3) == Some(":\\")
}

/// addr2line's own path joining, to find its rendering again.
fn path_push(path: &mut String, p: &str) {
    if is_absolute(p) {
        *path = p.to_string();
    } else {
        let sep = if path.starts_with('\\') || path.get(1..3) == Some(":\\") { '\\' } else { '/' };
        if !path.is_empty() && !path.ends_with(sep) {
            path.push(sep);
        }
        path.push_str(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed libc debug file (Debian 12's libc6-dbg): 2 063 units, all in `.debug_aranges`.
    fn libc_debug() -> ElfFile {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/dumps/debug/.build-id/93/ac61ec5a8eb1396f9fbd350e3169a558528a40.debug");
        ElfFile::open(path).expect("the committed libc debug file")
    }

    #[test]
    fn units_parsed_alone_answer_as_addr2line_over_all_of_them() {
        let file = libc_debug();
        let by_unit = Dwarf::load([&file]).expect("libc's DWARF");
        let whole = Dwarf::load_whole(&file).expect("libc's DWARF, whole");
        assert_eq!(by_unit.units_parsed(), Some(0), "nothing parsed before the first lookup");
        // Function starts, their insides and the bytes just past them, spread over the library.
        let syms = super::super::symtab::FileSymbols::read(&file, true);
        let starts: Vec<u64> = syms.text.symbols().iter().step_by(97).map(|s| s.addr).collect();
        assert!(starts.len() > 20, "libc's symbol table read");
        let mut named = 0;
        for &start in &starts {
            for probe in [start, start + 9, start.wrapping_sub(1)] {
                let (mut a, mut b) = (Vec::new(), Vec::new());
                assert_eq!(by_unit.frames(probe, &mut a), whole.frames(probe, &mut b), "{probe:#x}");
                assert_eq!(a, b, "frames at {probe:#x}");
                named += usize::from(a.iter().any(|f| f.function.is_some()));
                assert_eq!(by_unit.function_entry(probe), whole.function_entry(probe), "entry at {probe:#x}");
                assert_eq!(by_unit.call_site(probe), whole.call_site(probe), "call site at {probe:#x}");
            }
        }
        assert!(named > starts.len(), "DWARF names most of them ({named})");
        let parsed = by_unit.units_parsed().expect("libc is read unit by unit");
        assert!(parsed <= 3 * starts.len() && parsed < 2063 / 4, "{parsed} units parsed for {} functions", starts.len());
    }

    #[test]
    fn addr2line_renderings_are_rebuilt() {
        let mut p = "/tmp/x".to_string();
        path_push(&mut p, "../sysdeps/nptl");
        path_push(&mut p, "futex-internal.h");
        assert_eq!(p, "/tmp/x/../sysdeps/nptl/futex-internal.h");
        path_push(&mut p, "/usr/include/stdio.h");
        assert_eq!(p, "/usr/include/stdio.h");
        assert_eq!(gdb_file_name("/a/b.c", &[("/a/b.c".into(), "b.c".into())]), "b.c");
        assert_eq!(gdb_file_name("/a/c.c", &[("/a/b.c".into(), "b.c".into())]), "/a/c.c");
    }
}
