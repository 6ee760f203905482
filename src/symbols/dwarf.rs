//! DWARF lookups through addr2line: the inline chain and source lines at an address.
//!
//! `addr2line::Context` fills its caches through `core::cell::OnceCell`, so it is `Send` but not
//! `Sync`; each module's context sits behind its own mutex. A lookup holds it for microseconds
//! once the unit is parsed, and different modules never contend. Everything handed out is owned,
//! so the lock is released before names are post-processed.

use super::callsites::{Target, UnitCalls};
use super::die_name::Namer;
use super::names::{display_name, is_cpp, NameKind};
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
    ctx: addr2line::Context<Reader<'p>>,
    /// Per unit (by section offset): each line-table file as addr2line renders it, and as gdb
    /// shows it. Filled on a unit's first lookup.
    files: FxHashMap<usize, Vec<(String, String)>>,
    namer: Namer,
    /// Per unit (by section offset): its call sites and functions, read on the first
    /// tail-call question about an address in it.
    calls: FxHashMap<usize, UnitCalls>,
}

/// Why a lookup gave nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LookupError {
    /// The DWARF is malformed where the address points.
    Malformed(String),
    /// addr2line panicked on this data (caught; the module's DWARF stays usable).
    Panicked,
}

impl<'p> Dwarf<'p> {
    /// The DWARF of the first of `files` that has a `.debug_info`; `None` when none has, or the
    /// unit index cannot be built.
    ///
    /// Only the sections addr2line reads for names, lines and inline chains (those its own
    /// `Context::from_sections` takes), which are also all the call-site index reads, are
    /// loaded; the others (location lists, macros, type units, name indexes) are left empty,
    /// so a compressed one is never inflated.
    pub(crate) fn load(files: impl IntoIterator<Item = &'p ElfFile>) -> Option<Dwarf<'p>> {
        let file = files.into_iter().find(|f| f.section(".debug_info").is_some_and(|d| !d.is_empty()))?;
        let load = |id: gimli::SectionId| -> Result<Reader<'p>, gimli::Error> {
            let data = if needed(id) { file.section(id.name()).unwrap_or(&[]) } else { &[] };
            Ok(EndianSlice::new(data, RunTimeEndian::Little))
        };
        let built = catch_unwind(AssertUnwindSafe(|| {
            let dwarf = gimli::Dwarf::load(load).ok()?;
            addr2line::Context::from_dwarf(dwarf).ok()
        }));
        let ctx = built.ok().flatten()?;
        Some(Dwarf { inner: Mutex::new(Inner { ctx, files: FxHashMap::default(), namer: Namer::default(), calls: FxHashMap::default() }) })
    }

    /// Runs `f` on the call-site index of the unit covering link-time address `probe`; `None`
    /// when no unit covers it (or the lookup panicked).
    fn with_calls<T>(&self, probe: u64, f: impl FnOnce(&UnitCalls) -> Option<T>) -> Option<T> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let result = catch_unwind(AssertUnwindSafe(|| {
            let Inner { ctx, calls, .. } = &mut *inner;
            let unit = ctx.find_dwarf_and_unit(probe).skip_all_loads()?;
            let index = calls.entry(unit.header.offset().0).or_insert_with(|| UnitCalls::parse(unit));
            f(index)
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
        let result = catch_unwind(AssertUnwindSafe(|| collect(&mut inner, probe, out)));
        drop(inner);
        let result = result.unwrap_or(Err(LookupError::Panicked));
        if result.is_err() {
            out.truncate(start);
        }
        result
    }
}

fn collect(inner: &mut Inner<'_>, probe: u64, out: &mut Vec<SourceFrame>) -> Result<(), LookupError> {
    let bad = |e: gimli::Error| LookupError::Malformed(e.to_string());
    let Inner { ctx, files, namer, .. } = inner;
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

/// Whether addr2line (or the call-site index) reads section `id`.
fn needed(id: gimli::SectionId) -> bool {
    use gimli::SectionId::*;
    matches!(id, DebugAbbrev | DebugAddr | DebugAranges | DebugInfo | DebugLine | DebugLineStr | DebugRanges | DebugRngLists | DebugStr | DebugStrOffsets)
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
