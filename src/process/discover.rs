//! Finding the modules of the process: from NT_FILE when the core has it, else from the dynamic
//! linker's `r_debug`/`link_map` list in memory; the vDSO from AT_SYSINFO_EHDR. Each module's
//! load bias and build-id come from its ELF headers in dump memory when those pages were saved.

use super::elf_file::{build_id_in_notes, ElfFile};
use super::link_map;
use super::locate::Locator;
use super::module::{BuildIdSource, FileRange, FileStatus, Module, PathSource};
use crate::core::{auxv, Core, FileMapping};
use crate::diagnostics::Diagnostic;
use goblin::elf::program_header::{PT_LOAD, PT_NOTE};
use std::collections::HashMap;

const PHDR_SIZE: usize = 56;
const MAX_PHDRS: usize = 256;
const MAX_NOTE_BYTES: u64 = 64 * 1024;
const MAX_VDSO_BYTES: u64 = 1 << 20;

/// A program header as read from memory or file: the fields discovery needs.
#[derive(Debug, Clone, Copy)]
struct Phdr {
    kind: u32,
    offset: u64,
    vaddr: u64,
    filesz: u64,
    memsz: u64,
}

fn parse_phdrs(bytes: &[u8]) -> Vec<Phdr> {
    bytes
        .chunks_exact(PHDR_SIZE)
        .take(MAX_PHDRS)
        .map(|p| {
            let u = |o: usize| u64::from_le_bytes(p[o..o + 8].try_into().unwrap_or([0; 8]));
            Phdr { kind: u32::from_le_bytes(p[0..4].try_into().unwrap_or([0; 4])), offset: u(8), vaddr: u(16), filesz: u(32), memsz: u(40) }
        })
        .collect()
}

/// Reads `len` bytes at `addr` from the core's own bytes only (no file fallback).
fn core_bytes(core: &Core, addr: u64, len: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let at = addr.checked_add(out.len() as u64)?;
        let chunk = core.bytes_at(at, len - out.len()).ok().filter(|c| !c.is_empty())?;
        out.extend_from_slice(chunk);
    }
    Some(out)
}

/// The program headers of the ELF image whose header is at `base` in dump memory.
fn phdrs_in_memory(core: &Core, base: u64) -> Option<Vec<Phdr>> {
    let ehdr = core_bytes(core, base, 64)?;
    if &ehdr[..4] != b"\x7fELF" {
        return None;
    }
    let phoff = u64::from_le_bytes(ehdr[32..40].try_into().ok()?);
    let phnum = u16::from_le_bytes(ehdr[56..58].try_into().ok()?) as usize;
    core_bytes(core, base.checked_add(phoff)?, phnum.min(MAX_PHDRS) * PHDR_SIZE).map(|b| parse_phdrs(&b))
}

fn phdrs_in_file(file: &ElfFile) -> Vec<Phdr> {
    file.program_headers
        .iter()
        .map(|p| Phdr { kind: p.p_type, offset: p.p_offset, vaddr: p.p_vaddr, filesz: p.p_filesz, memsz: p.p_memsz })
        .collect()
}

fn link_base(phdrs: &[Phdr]) -> Option<u64> {
    phdrs.iter().filter(|p| p.kind == PT_LOAD).min_by_key(|p| p.offset).map(|p| p.vaddr.wrapping_sub(p.offset) & !0xfff)
}

fn build_id_in_memory(core: &Core, phdrs: &[Phdr], bias: u64) -> Option<Vec<u8>> {
    phdrs.iter().filter(|p| p.kind == PT_NOTE).find_map(|p| {
        let bytes = core_bytes(core, bias.wrapping_add(p.vaddr), p.filesz.min(MAX_NOTE_BYTES) as usize)?;
        build_id_in_notes(&bytes)
    })
}

/// The build-id note read from a copy of the file's first page at `copy` (the data's mapping
/// of an old-layout library whose text page the dump left out), when the note lies in that page.
fn build_id_in_first_page(core: &Core, phdrs: &[Phdr], copy: u64) -> Option<Vec<u8>> {
    phdrs.iter().filter(|p| p.kind == PT_NOTE && p.offset.checked_add(p.filesz).is_some_and(|end| end <= 0x1000)).find_map(|p| {
        let bytes = core_bytes(core, copy.checked_add(p.offset)?, p.filesz as usize)?;
        build_id_in_notes(&bytes)
    })
}

/// A module before its files are looked for.
struct Found {
    path: String,
    path_source: PathSource,
    ranges: Vec<FileRange>,
    header_addr: u64,
    /// `l_ld` from the link map: an address inside the object.
    dynamic: Option<u64>,
}

/// The most segments one module without headers or file is taken to span.
const MAX_HEADERLESS_SEGMENTS: usize = 64;
/// The most a module without headers or file is taken to span.
const MAX_HEADERLESS_SPAN: u64 = 1 << 32;

/// A path that names no file: the `[executable]` some dumpers write in NT_FILE, an empty name.
fn is_pseudo_path(path: &str) -> bool {
    path.is_empty() || path.starts_with('[')
}

/// The program's name where the dump's list of files gives none: `--exe`, else AT_EXECFN,
/// else NT_PRPSINFO's command line (its first word) or short name.
fn program_name(core: &Core, locator: &Locator) -> (String, PathSource) {
    if let Some(exe) = &locator.executable {
        return (exe.display().to_string(), PathSource::ExeOption);
    }
    if let Some(name) = link_map::execfn(core) {
        return (name, PathSource::AuxvExecfn);
    }
    let from_prpsinfo = core.process.as_ref().and_then(|p| {
        let first = p.args.split_whitespace().next().filter(|a| !a.is_empty());
        first.map(str::to_string).or_else(|| (!p.name.is_empty()).then(|| p.name.clone()))
    });
    match from_prpsinfo {
        Some(name) => (name, PathSource::Prpsinfo),
        None => ("[executable]".into(), PathSource::Unknown),
    }
}

/// The address range of an object whose file is absent and whose headers are not in the dump:
/// the core's segments that run on without a gap from its header, up to the next object's
/// header, and at least to its dynamic section. Empty when no segment starts at the header.
fn headerless_ranges(core: &Core, f: &Found, next_header: u64) -> Vec<FileRange> {
    let mut out: Vec<FileRange> = Vec::new();
    let mut at = f.header_addr;
    for seg in core.segments.iter().filter(|s| s.vaddr >= f.header_addr).take(MAX_HEADERLESS_SEGMENTS) {
        let contiguous = seg.vaddr == at || f.dynamic.is_some_and(|d| seg.vaddr <= d);
        if !contiguous || seg.vaddr >= next_header || seg.vaddr - f.header_addr >= MAX_HEADERLESS_SPAN {
            break;
        }
        out.push(FileRange { start: seg.vaddr, end: seg.end().min(next_header), file_offset: seg.vaddr - f.header_addr });
        at = seg.end();
    }
    if out.first().is_none_or(|r| r.start != f.header_addr) {
        return Vec::new();
    }
    out
}

/// Whether any of `ranges` is executable in the core: code, not a mapped data file.
fn holds_code(core: &Core, ranges: &[FileRange]) -> bool {
    core.segments.iter().any(|s| s.flags & 1 != 0 && ranges.iter().any(|r| s.vaddr < r.end && r.start < s.end()))
}

fn from_nt_file(files: &[FileMapping]) -> Vec<Found> {
    let mut out: Vec<Found> = Vec::new();
    // Path → index in `out`: NT_FILE may list tens of thousands of mappings.
    let mut by_path: HashMap<&str, usize> = HashMap::new();
    for m in files {
        let range = FileRange { start: m.start, end: m.end, file_offset: m.file_offset };
        match by_path.get(m.path.as_str()).map(|&i| &mut out[i]) {
            Some(f) => {
                f.ranges.push(range);
                if m.file_offset == 0 && m.start < f.header_addr {
                    f.header_addr = m.start;
                }
            }
            None => {
                by_path.insert(&m.path, out.len());
                out.push(Found {
                    path: m.path.clone(),
                    path_source: PathSource::NtFile,
                    ranges: vec![range],
                    header_addr: if m.file_offset == 0 { m.start } else { u64::MAX },
                    dynamic: None,
                });
            }
        }
    }
    // A file mapped without its first page is data, not a loaded image.
    out.retain(|f| f.header_addr != u64::MAX);
    out
}

/// The NT_FILE entries that agree with the dump's own memory. A second mapping of a file's first
/// page (a second place for one path's ELF header) is refused, with a warning, when the dump
/// shows that ELF header at another of them and not at this one. (A mapping with no segment
/// alone says nothing: gcore and createdump leave read-only file pages out; and .NET maps an
/// assembly's first page more than once.)
fn consistent_with_memory(core: &Core, files: &[FileMapping], diagnostics: &mut Vec<Diagnostic>) -> Vec<FileMapping> {
    let mapped = |a: u64| !matches!(core.bytes_at(a, 1), Err(crate::core::Absence::NotMapped));
    let elf_at = |a: u64| core.bytes_at(a, 4).is_ok_and(|b| b == b"\x7fELF");
    // Path → the mapping of its first page that the dump backs best: an ELF header in memory,
    // then a segment, then the lowest address.
    let mut best: HashMap<&str, (u8, u64)> = HashMap::new();
    for m in files.iter().filter(|m| m.file_offset == 0) {
        let rank = if elf_at(m.start) { 2 } else if mapped(m.start) { 1 } else { 0 };
        let e = best.entry(m.path.as_str()).or_insert((rank, m.start));
        if rank > e.0 || (rank == e.0 && m.start < e.1) {
            *e = (rank, m.start);
        }
    }
    let mut out = Vec::with_capacity(files.len());
    for m in files {
        // Only where the dump shows an ELF header: a managed assembly (PE) is mapped at offset 0
        // more than once by its runtime (flat and as an image).
        let why = if m.file_offset == 0
            && !elf_at(m.start)
            && best.get(m.path.as_str()).is_some_and(|&(rank, at)| at != m.start && rank == 2 && !page_zero_twice(core, at, m.start))
        {
            let at = best[m.path.as_str()].1;
            Some(format!("the dump shows the file's ELF header at {at:#x}"))
        } else {
            None
        };
        match why {
            Some(why) => diagnostics.push(
                Diagnostic::warning("modules", format!("NT_FILE places {} at {:#x}..{:#x}, which contradicts the dump's memory ({why}): entry refused", m.path, m.start, m.end))
                    .at_address(m.start),
            ),
            None => out.push(m.clone()),
        }
    }
    out
}

/// Where the image's own PT_LOADs map the file's first page, relative to its ELF header: the text
/// at 0, and in older toolchains' layout (data a max-page-size above, at a file offset inside the
/// first page) the data too. Page-aligned; at most `MAX_PHDRS`.
fn page_zero_places(phdrs: &[Phdr]) -> Vec<u64> {
    let Some(base) = link_base(phdrs) else { return Vec::new() };
    phdrs.iter().filter(|p| p.kind == PT_LOAD && p.offset & !0xfff == 0).map(|p| (p.vaddr & !0xfff).wrapping_sub(base)).collect()
}

/// Whether the ELF header the dump shows at `shown` and the first page mapped at `other` are
/// one image by the header's own layout: both PT_LOADs of a library linked the old way map file
/// offset 0 (text at its base, data 2 MiB above), so its header is at both places, and a dump
/// that left the text page out shows it only at the data's.
fn page_zero_twice(core: &Core, shown: u64, other: u64) -> bool {
    let Some(phdrs) = phdrs_in_memory(core, shown) else { return false };
    let places = page_zero_places(&phdrs);
    let delta = other.wrapping_sub(shown);
    places.iter().any(|&a| places.iter().any(|&b| a != b && a.wrapping_sub(b) == delta))
}

/// The program headers of the image whose first page is mapped at `header_addr`: from its ELF
/// header there, or, where the dump left that page out, from another mapping of the file's
/// first page that the header's own layout places (`page_zero_twice`). With the address of the
/// copy they were read at.
fn phdrs_of_image(core: &Core, header_addr: u64, ranges: &[FileRange]) -> Option<(Vec<Phdr>, u64)> {
    if let Some(p) = phdrs_in_memory(core, header_addr) {
        return Some((p, header_addr));
    }
    ranges
        .iter()
        .filter(|r| r.file_offset == 0 && r.start != header_addr)
        .find(|r| page_zero_twice(core, r.start, header_addr))
        .and_then(|r| phdrs_in_memory(core, r.start).map(|p| (p, r.start)))
}

/// Discovers every module and opens its files through `locator`.
pub(crate) fn discover(core: &Core, locator: &Locator, diagnostics: &mut Vec<Diagnostic>) -> Vec<Module> {
    let mut modules = Vec::new();
    let found = match &core.files {
        Some(files) => from_nt_file(&consistent_with_memory(core, files, diagnostics)),
        None => {
            diagnostics.push(Diagnostic::info("modules", "the core has no NT_FILE note; modules come from the dynamic linker's link_map"));
            link_map::walk(core, diagnostics)
                .into_iter()
                .map(|o| Found { path: o.path, path_source: PathSource::LinkMap, ranges: Vec::new(), header_addr: o.header_addr, dynamic: o.dynamic })
                .collect()
        }
    };
    // The executable is the image holding the program headers the kernel passed in AT_PHDR.
    let exe_phdr = core.auxv.get(auxv::AT_PHDR);
    let mut headers: Vec<u64> = found.iter().map(|f| f.header_addr).collect();
    headers.sort_unstable();
    for mut f in found {
        let is_exe = exe_phdr.is_some_and(|a| f.ranges.iter().any(|r| a >= r.start && a < r.end) || (f.ranges.is_empty() && a & !0xfff == f.header_addr));
        // The linker's own entry for the program has no name: without NT_FILE, or where NT_FILE
        // names it `[executable]`, the program is named from what else there is, and says so.
        if is_exe && (is_pseudo_path(&f.path) || f.path_source == PathSource::LinkMap) {
            let (name, source) = program_name(core, locator);
            diagnostics.push(Diagnostic::info(
                "modules",
                format!("the dump's list of files does not name the program; it is named {name} from {}", match source {
                    PathSource::ExeOption => "--exe",
                    PathSource::AuxvExecfn => "the auxiliary vector (AT_EXECFN)",
                    PathSource::Prpsinfo => "NT_PRPSINFO",
                    _ => "nothing",
                }),
            ));
            f.path = name;
            f.path_source = source;
        }
        let next_header = headers.get(headers.partition_point(|&h| h <= f.header_addr)).copied().unwrap_or(u64::MAX);
        if let Some(m) = open_module(core, locator, f, is_exe, next_header, diagnostics) {
            modules.push(m);
        }
    }
    if let Some(vdso) = core.auxv.get(auxv::AT_SYSINFO_EHDR).and_then(|addr| vdso_module(core, addr)) {
        modules.push(vdso);
    }
    modules.sort_by_key(|m| m.start);
    if let Some(cache) = &locator.section_cache {
        for f in modules.iter_mut().flat_map(|m| m.file.iter_mut().chain(m.debug_file.iter_mut())) {
            f.set_section_cache(Some(cache.clone()));
        }
    }
    modules
}

/// Opens the first candidate file whose build-id matches the dump's (any readable ELF file when
/// the dump has no build-id). Returns the file, or the error for the best candidate.
fn open_matching(candidates: &[std::path::PathBuf], want: Option<&[u8]>) -> (std::path::PathBuf, Result<ElfFile, super::elf_file::ElfFileError>) {
    let mut first: Option<(std::path::PathBuf, Result<ElfFile, super::elf_file::ElfFileError>)> = None;
    for cand in candidates {
        let opened = ElfFile::open(cand);
        match (&opened, want) {
            (Ok(file), Some(id)) if file.build_id.as_deref() != Some(id) => {}
            (Ok(_), _) => return (cand.clone(), opened),
            (Err(super::elf_file::ElfFileError::Open { .. }), _) => {}
            (Err(_), _) => {}
        }
        // Remember the most telling failure: a file that exists beats one that does not.
        let better = match (&first, &opened) {
            (None, _) => true,
            (Some((_, Err(super::elf_file::ElfFileError::Open { .. }))), r) => !matches!(r, Err(super::elf_file::ElfFileError::Open { .. })),
            _ => false,
        };
        if better {
            first = Some((cand.clone(), opened));
        }
    }
    first.unwrap_or_else(|| {
        let p = candidates.first().cloned().unwrap_or_default();
        let err = super::elf_file::ElfFileError::Open { path: p.clone(), source: std::io::Error::from(std::io::ErrorKind::NotFound) };
        (p, Err(err))
    })
}

/// Mappings NT_FILE names that are never a loaded image: anonymous inodes (`anon_inode:[io_uring]`,
/// `anon_inode:[perf_event]`), memfds, POSIX and System V shared memory. (Another path, even a
/// device, is looked at and refused with a warning: a hostile NT_FILE must be said.)
fn names_no_image(path: &str) -> bool {
    const PREFIXES: &[&str] = &["anon_inode:", "/memfd:", "/dev/shm/", "/SYSV", "/anon_hugepage", "/drm mm object"];
    PREFIXES.iter().any(|p| path.starts_with(p))
}

fn open_module(core: &Core, locator: &Locator, f: Found, is_executable: bool, next_header: u64, diagnostics: &mut Vec<Diagnostic>) -> Option<Module> {
    // The headers in dump memory identify what ran; the file is chosen to match them.
    let (mem_phdrs, copy_at) = match phdrs_of_image(core, f.header_addr, &f.ranges) {
        Some((p, at)) => (Some(p), at),
        None => (None, f.header_addr),
    };
    let mem_bias = mem_phdrs.as_deref().and_then(link_base).map(|b| f.header_addr.wrapping_sub(b));
    let dump_id = match (&mem_phdrs, mem_bias) {
        (Some(p), Some(b)) => build_id_in_memory(core, p, b).or_else(|| build_id_in_first_page(core, p, copy_at)),
        _ => None,
    };
    // Not a file a module could be loaded from (an io_uring, a memfd, shared memory) and no ELF
    // image in memory: data, not a module, and nothing to open or warn about.
    if mem_phdrs.is_none() && names_no_image(&f.path) {
        return None;
    }
    // A name that is no path (`[executable]`, or one knot made up) is never opened; a path that
    // would lead out of the sysroot, or to a device, is refused and said.
    let real_path = matches!(f.path_source, PathSource::NtFile | PathSource::LinkMap | PathSource::AuxvExecfn) && !is_pseudo_path(&f.path);
    if real_path && let Err(why) = locator.module_path(&f.path) {
        let d = match why {
            crate::open::Refused::NotAbsolute(_) => Diagnostic::info("modules", format!("{}: not opened: {why}", f.path)),
            _ => Diagnostic::warning("modules", format!("{}: not opened: {why}", f.path)),
        };
        diagnostics.push(d.at_address(f.header_addr));
    }
    let mut candidates = if real_path { locator.module_candidates(&f.path) } else { Vec::new() };
    if is_executable
        && let Some(exe) = &locator.executable {
            candidates.insert(0, exe.clone());
        }
    let (disk_path, opened) = open_matching(&candidates, dump_id.as_deref());
    // The program the user named (--exe, or gdb's PROGRAM CORE) and did not get: say why.
    if let Some(exe) = locator.executable.as_ref().filter(|e| is_executable && **e != disk_path) {
        let why = match ElfFile::open(exe) {
            Ok(file) => match (&dump_id, &file.build_id) {
                (Some(want), Some(have)) if want != have => {
                    format!("it is another build (build-id {}; the dump ran {})", super::elf_file::hex(have), super::elf_file::hex(want))
                }
                _ => "another candidate matched first".to_string(),
            },
            Err(e) => e.to_string(),
        };
        diagnostics.push(Diagnostic::warning("modules", format!("--exe {} not used for {}: {why}", exe.display(), f.path)).at_address(f.header_addr));
    }
    let phdrs = match (&mem_phdrs, &opened) {
        (Some(p), _) => p.clone(),
        (None, Ok(file)) => phdrs_in_file(file),
        // Neither an ELF image in memory nor an ELF file on disk: a mapped data file.
        (None, Err(super::elf_file::ElfFileError::NotElf { .. })) => return None,
        (None, Err(e)) => return headerless_module(core, f, next_header, &disk_path, e, diagnostics),
    };
    // The file's first page placed where the dump holds other bytes than an ELF header: the
    // entry contradicts the dump's memory.
    if mem_phdrs.is_none()
        && opened.is_ok()
        && let Some(saved) = core_bytes(core, f.header_addr, 4)
        && saved != b"\x7fELF"
    {
        diagnostics.push(
            Diagnostic::warning(
                "modules",
                format!("NT_FILE places {} at {:#x}, which contradicts the dump's memory (it holds no ELF header there): entry refused", f.path, f.header_addr),
            )
            .at_address(f.header_addr),
        );
        return None;
    }
    let bias = f.header_addr.wrapping_sub(link_base(&phdrs)?);

    let mut ranges = f.ranges;
    if ranges.is_empty() {
        ranges = phdrs
            .iter()
            .filter(|p| p.kind == PT_LOAD && p.filesz > 0)
            .map(|p| {
                let start = bias.wrapping_add(p.vaddr) & !0xfff;
                let file_offset = p.offset & !0xfff;
                FileRange { start, end: bias.wrapping_add(p.vaddr).wrapping_add(p.filesz), file_offset }
            })
            .collect();
    }
    let start = ranges.iter().map(|r| r.start).min().unwrap_or(f.header_addr);
    let end = ranges.iter().map(|r| r.end).max().unwrap_or(f.header_addr);

    let mut module = Module {
        path: f.path.clone(),
        path_source: f.path_source,
        start,
        end,
        bias,
        ranges,
        build_id: dump_id.clone(),
        build_id_source: dump_id.as_ref().map(|_| BuildIdSource::Dump),
        file: None,
        debug_file: None,
        file_status: FileStatus::Missing { tried: disk_path.display().to_string() },
        debug_status: None,
    };
    match opened {
        Ok(file) => match (&dump_id, &file.build_id) {
            (Some(want), Some(have)) if want != have => {
                let reason = format!(
                    "build-id mismatch: the dump ran {}, the file is {}",
                    super::elf_file::hex(want),
                    super::elf_file::hex(have)
                );
                diagnostics.push(Diagnostic::warning("modules", format!("{} refused: {reason}", disk_path.display())).at_address(start));
                module.file_status = FileStatus::Refused { path: disk_path.display().to_string(), reason };
            }
            _ => {
                if dump_id.is_none() {
                    module.build_id = file.build_id.clone();
                    module.build_id_source = file.build_id.as_ref().map(|_| BuildIdSource::File);
                }
                module.file_status = FileStatus::Loaded { path: disk_path.display().to_string() };
                module.file = Some(file);
            }
        },
        Err(super::elf_file::ElfFileError::Open { source, .. }) if source.kind() != std::io::ErrorKind::NotFound => {
            let reason = source.to_string();
            diagnostics.push(Diagnostic::warning("modules", format!("{}: not opened: {reason}; its code is read from the dump only", f.path)).at_address(start));
            module.file_status = FileStatus::Refused { path: disk_path.display().to_string(), reason };
        }
        Err(super::elf_file::ElfFileError::Open { .. }) => {
            diagnostics.push(
                Diagnostic::warning("modules", format!("{}: file not found (looked at {}); its code is read from the dump only", f.path, disk_path.display()))
                    .at_address(start),
            );
        }
        Err(e) => {
            module.file_status = FileStatus::Refused { path: disk_path.display().to_string(), reason: e.to_string() };
            diagnostics.push(Diagnostic::warning("modules", format!("{} refused: {e}", disk_path.display())).at_address(start));
        }
    }
    find_debug_file(&mut module, locator);
    Some(module)
}

/// An object whose file is absent and whose ELF headers are not in the dump stays a module, as
/// `eu-unstrip -n` lists it: its name and base from the link map or NT_FILE, its range from the
/// core's mappings, no build-id (the note is in the missing header page), no symbols. A file
/// that holds no code (a mapped data file) is not a module.
fn headerless_module(
    core: &Core,
    f: Found,
    next_header: u64,
    disk_path: &std::path::Path,
    error: &super::elf_file::ElfFileError,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<Module> {
    let ranges = if f.ranges.is_empty() { headerless_ranges(core, &f, next_header) } else { f.ranges };
    if ranges.is_empty() || !holds_code(core, &ranges) {
        diagnostics.push(
            Diagnostic::warning("modules", format!("{}: its ELF headers are not in the dump and the file is unusable ({error}); its frames stay unnamed", f.path))
                .at_address(f.header_addr),
        );
        return None;
    }
    let start = ranges.iter().map(|r| r.start).min().unwrap_or(f.header_addr);
    let end = ranges.iter().map(|r| r.end).max().unwrap_or(f.header_addr);
    diagnostics.push(
        Diagnostic::warning(
            "modules",
            format!(
                "{}: file not found (looked at {}) and its ELF headers are not in the dump; kept as a module at {start:#x}..{end:#x} without symbols",
                f.path,
                disk_path.display()
            ),
        )
        .at_address(start),
    );
    Some(Module {
        path: f.path,
        path_source: f.path_source,
        start,
        end,
        // A shared object's link base is 0: its bias is where its header is.
        bias: f.header_addr,
        ranges,
        build_id: None,
        build_id_source: None,
        file: None,
        debug_file: None,
        file_status: FileStatus::Missing { tried: disk_path.display().to_string() },
        debug_status: Some("no file, no headers in the dump: no symbols".into()),
    })
}

fn find_debug_file(module: &mut Module, locator: &Locator) {
    if module.file.as_ref().is_some_and(|f| f.section_by_name(".debug_info").is_some()) {
        module.debug_status = Some("debug info in the module file".into());
        return;
    }
    if let Some(id) = module.build_id.clone() {
        for cand in locator.build_id_candidates(&id) {
            if let Ok(file) = ElfFile::open(&cand)
                && file.build_id.as_deref() == Some(&id[..]) {
                    module.debug_status = Some(format!("{} (by build-id)", cand.display()));
                    module.debug_file = Some(file);
                    return;
                }
        }
    }
    let link = module.file.as_ref().and_then(|f| f.debuglink().map(|l| (f.path().to_path_buf(), l)));
    if let Some((binary, (name, crc))) = link {
        for cand in locator.debuglink_candidates(&binary, &name) {
            if let Ok(file) = ElfFile::open(&cand) {
                let id_ok = match (&module.build_id, &file.build_id) {
                    (Some(a), Some(b)) => a == b,
                    _ => file.crc32() == crc,
                };
                if id_ok {
                    module.debug_status = Some(format!("{} (by .gnu_debuglink)", cand.display()));
                    module.debug_file = Some(file);
                    return;
                }
            }
        }
    }
    module.debug_status = Some("no separate debug file found".into());
}

fn vdso_module(core: &Core, addr: u64) -> Option<Module> {
    let phdrs = phdrs_in_memory(core, addr)?;
    let base = link_base(&phdrs)?;
    // The image's section headers lie past its PT_LOAD's end: take the whole mapping.
    let loaded = phdrs.iter().filter(|p| p.kind == PT_LOAD).map(|p| p.vaddr.wrapping_sub(base).saturating_add(p.memsz)).max()?;
    let mapped = core.segments.find(addr).map(|s| s.end() - addr).unwrap_or(loaded);
    // The image's own headers may claim more than the dump holds: then the mapping alone.
    let bytes = core_bytes(core, addr, mapped.max(loaded).min(MAX_VDSO_BYTES) as usize)
        .or_else(|| core_bytes(core, addr, mapped.min(MAX_VDSO_BYTES) as usize))?;
    let size = bytes.len() as u64;
    let file = ElfFile::from_bytes("[vdso]", bytes).ok()?;
    let bias = addr.wrapping_sub(base);
    Some(Module {
        path: "[vdso]".into(),
        path_source: PathSource::Image,
        start: addr,
        end: addr.saturating_add(size),
        bias,
        ranges: Vec::new(),
        build_id: file.build_id.clone(),
        build_id_source: file.build_id.as_ref().map(|_| BuildIdSource::Dump),
        file: Some(file),
        debug_file: None,
        file_status: FileStatus::InMemory,
        debug_status: None,
    })
}
