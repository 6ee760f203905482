//! Just enough ECMA-335 metadata to name a type or a method: the PE image of a managed module
//! (at `Module.Base`), its CLI header, the metadata root, the `#~` tables stream, the `#Strings`
//! and `#Blob` heaps; the TypeDef, TypeRef, TypeSpec, MethodDef, NestedClass, GenericParam and
//! Assembly tables. Every count and offset read from the
//! image is checked against the stream it claims to be in.
//!
//! The image bytes come from the dump, or — for pages the dump did not save — from the file the
//! dump's NT_FILE note says was mapped there (`ImageMemory`): managed assemblies are mapped
//! read-only, so the file holds the same bytes. A file whose first bytes differ from the dump's
//! copy is refused.

use crate::runtimes::dotnet::error::DotnetError;
use crate::core::FileMapping;
use crate::diagnostics::Severity;
use crate::process::{Locator, Memory, MemoryError, Process};
use std::path::PathBuf;
use memmap2::Mmap;
use std::sync::{Mutex, OnceLock};

const METADATA_SIGNATURE: u32 = 0x424A_5342; // "BSJB"
const MAX_STREAMS: u16 = 16;
const MAX_NAME: usize = 1024;
/// Larger than any signature knot decodes (a method signature is tens of bytes).
const MAX_BLOB: u32 = 64 * 1024;
const MAX_SECTIONS: u16 = 96;
const CLR_DIRECTORY: u64 = 14;
const VERIFY_BYTES: usize = 512;
/// The images named in the one line that says which were not found on disk; the rest counted.
const MAX_NAMED_MISSING: usize = 6;

/// Dump memory, with the files mapped into the process behind it for image pages the dump left
/// out. Only for reading managed images' read-only metadata.
pub(crate) struct ImageMemory<'p> {
    process: &'p Process,
    mappings: Vec<Backing>,
    /// What happened with the files (reported once each): a warning when one was refused or not
    /// found, info when one was used without being checkable against the dump; with the index
    /// of the mapping each is about (they are told in mapping order: which one was read first
    /// depends on the threads).
    pub(crate) notes: Mutex<Vec<(usize, Severity, String)>>,
    /// The mappings whose file was found nowhere (index, path, start): said in one line, for a
    /// service maps tens of the framework's assemblies and reading statics asks for each.
    missing: Mutex<Vec<(usize, String, u64)>>,
}

struct Backing {
    mapping: FileMapping,
    /// Where the file may be on disk, best first.
    candidates: Vec<PathBuf>,
    map: OnceLock<Option<Mmap>>,
}

impl<'p> ImageMemory<'p> {
    /// The process's non-ELF file mappings (managed images), found on disk through `locator`
    /// (its sysroot and search directories) as the native modules are.
    pub(crate) fn new(process: &'p Process, locator: &Locator) -> ImageMemory<'p> {
        let is_elf_module = |path: &str| process.modules.iter().any(|m| m.path == path);
        let mappings = process
            .core
            .files
            .iter()
            .flatten()
            .filter(|f| !is_elf_module(&f.path))
            .map(|f| Backing { mapping: f.clone(), candidates: locator.module_candidates(&f.path), map: OnceLock::new() })
            .collect();
        ImageMemory { process, mappings, notes: Mutex::new(Vec::new()), missing: Mutex::new(Vec::new()) }
    }

    fn note(&self, b: &Backing, severity: Severity, s: String) {
        let index = self.mappings.iter().position(|m| std::ptr::eq(m, b)).unwrap_or(usize::MAX);
        if let Ok(mut n) = self.notes.lock()
            && !n.iter().any(|(_, _, x)| *x == s)
        {
            n.push((index, severity, s));
        }
    }

    fn file_of<'s>(&'s self, b: &'s Backing) -> Option<&'s Mmap> {
        b.map
            .get_or_init(|| {
                // The dump's copy of the mapping's first bytes, when it saved them, must match.
                let saved = self.process.core.bytes_at(b.mapping.start, VERIFY_BYTES).ok().filter(|s| !s.is_empty());
                for path in &b.candidates {
                    let Ok(f) = crate::open::open_regular(path) else { continue };
                    // SAFETY: read-only private mapping of a file knot never writes.
                    let Ok(map) = (unsafe { Mmap::map(&f) }) else { continue };
                    let off = b.mapping.file_offset as usize;
                    match saved {
                        Some(saved) if map.get(off..off + saved.len()) != Some(saved) => {
                            self.note(b, Severity::Warning, format!("{} differs from the image the dump holds at {:#x}; not used", path.display(), b.mapping.start));
                            continue;
                        }
                        Some(_) => {}
                        None => self.note(b, Severity::Info, format!("{} read for pages the dump lacks, unverified (the dump did not save its first page)", path.display())),
                    }
                    return Some(map);
                }
                let index = self.mappings.iter().position(|m| std::ptr::eq(m, b)).unwrap_or(usize::MAX);
                if let Ok(mut m) = self.missing.lock() {
                    m.push((index, b.mapping.path.clone(), b.mapping.start));
                }
                None
            })
            .as_ref()
    }
}

/// What happened with the managed images' files, as diagnostics (each once); the images not
/// found on disk in one line, placed where the first of them is in mapping order.
pub(crate) fn image_notes(image: &ImageMemory<'_>) -> Vec<crate::diagnostics::Diagnostic> {
    use crate::diagnostics::Diagnostic;
    let Ok(mut notes) = image.notes.lock().map(|n| n.clone()) else { return Vec::new() };
    let mut missing = image.missing.lock().map(|m| m.clone()).unwrap_or_default();
    missing.sort_by_key(|&(index, _, _)| index);
    // An image mapped in pieces is one image.
    let mut seen = std::collections::HashSet::new();
    missing.retain(|(_, path, _)| seen.insert(path.clone()));
    let mut out: Vec<(usize, Diagnostic)> = notes
        .drain(..)
        .map(|(index, severity, n)| {
            let message = format!("managed image: {n}");
            let d = match severity {
                Severity::Warning => Diagnostic::warning(crate::runtimes::dotnet::STAGE, message),
                Severity::Info => Diagnostic::info(crate::runtimes::dotnet::STAGE, message),
            };
            (index, d)
        })
        .collect();
    if let Some(&(first, _, _)) = missing.first() {
        out.push((first, Diagnostic::warning(crate::runtimes::dotnet::STAGE, missing_images(&missing))));
    }
    out.sort_by_key(|&(index, _)| index);
    out.into_iter().map(|(_, d)| d).collect()
}

/// "PATH (mapped at A) not found on disk" for one image; for several, how many, the first
/// [`MAX_NAMED_MISSING`] by file name and where they were looked for by the dump's paths.
fn missing_images(missing: &[(usize, String, u64)]) -> String {
    if let [(_, path, start)] = missing {
        return format!("managed image: {path} (mapped at {start:#x}) not found on disk");
    }
    let file_name = |p: &str| p.rsplit('/').next().unwrap_or(p).to_string();
    let mut names: Vec<String> = missing.iter().take(MAX_NAMED_MISSING).map(|(_, p, _)| file_name(p)).collect();
    if missing.len() > MAX_NAMED_MISSING {
        names.push(format!("and {} more", missing.len() - MAX_NAMED_MISSING));
    }
    let mut dirs: Vec<&str> = missing.iter().map(|(_, p, _)| p.rsplit_once('/').map_or("", |(d, _)| d)).collect();
    dirs.sort_unstable();
    dirs.dedup();
    let from = match dirs.as_slice() {
        [dir] => format!(" (the dump's {dir}/)"),
        _ => String::new(),
    };
    format!("managed images: {} not found on disk{from}, their pages the dump left out unread: {}", missing.len(), names.join(", "))
}

impl Memory for ImageMemory<'_> {
    fn chunk(&self, addr: u64, len: usize) -> Result<&[u8], MemoryError> {
        let err = match self.process.chunk(addr, len) {
            Ok(b) => return Ok(b),
            Err(e @ MemoryError::Truncated(_)) => return Err(e),
            Err(e) => e,
        };
        let b = self.mappings.iter().find(|b| addr >= b.mapping.start && addr < b.mapping.end).ok_or(err)?;
        let map = self.file_of(b).ok_or(err)?;
        let off = (addr - b.mapping.start).checked_add(b.mapping.file_offset).ok_or(err)? as usize;
        let avail = ((b.mapping.end - addr) as usize).min(len);
        let bytes = map.get(off..).ok_or(err)?;
        let n = avail.min(bytes.len());
        if n == 0 {
            return Err(err);
        }
        Ok(&bytes[..n])
    }
}

// ---------------------------------------------------------------- reading helpers

fn rd(mem: &dyn Memory, addr: u64, len: usize, what: &str) -> Result<Vec<u8>, DotnetError> {
    let mut b = vec![0u8; len];
    mem.read(addr, &mut b).map_err(|e| DotnetError::memory(what, e))?;
    Ok(b)
}
fn rd_u16(mem: &dyn Memory, addr: u64, what: &str) -> Result<u16, DotnetError> {
    // On the stack: a table cell is read per type name (a heap's worth of them).
    let mut b = [0u8; 2];
    mem.read(addr, &mut b).map_err(|e| DotnetError::memory(what, e))?;
    Ok(u16::from_le_bytes(b))
}
fn rd_u32(mem: &dyn Memory, addr: u64, what: &str) -> Result<u32, DotnetError> {
    mem.read_u32(addr).map_err(|e| DotnetError::memory(what, e))
}

// ---------------------------------------------------------------- PE → metadata root

/// Finds the metadata root of the PE image at `base`: the CLI header's metadata directory,
/// resolved as a mapped image (RVA from base) or as a flat file (RVA through the section
/// table), whichever has the metadata signature there.
pub(crate) fn metadata_root(mem: &dyn Memory, base: u64) -> Result<(u64, u32), DotnetError> {
    let bad = |why: String| DotnetError::Metadata { at: base, why };
    if rd_u16(mem, base, "PE DOS header")? != 0x5a4d {
        return Err(bad("no MZ signature".into()));
    }
    let pe = base + rd_u32(mem, base + 0x3c, "PE e_lfanew")? as u64;
    if rd_u32(mem, pe, "PE signature")? != 0x4550 {
        return Err(bad("no PE signature".into()));
    }
    let coff = pe + 4;
    let nsections = rd_u16(mem, coff + 2, "COFF header")?;
    let opt_size = rd_u16(mem, coff + 16, "COFF header")? as u64;
    let opt = coff + 20;
    let dirs = match rd_u16(mem, opt, "PE optional header")? {
        0x10b => opt + 96,
        0x20b => opt + 112,
        m => return Err(bad(format!("optional header magic {m:#x}"))),
    };
    let ndirs = rd_u32(mem, dirs - 4, "PE NumberOfRvaAndSizes")? as u64;
    if ndirs <= CLR_DIRECTORY {
        return Err(bad("no CLI header directory: not a managed image".into()));
    }
    let cli_rva = rd_u32(mem, dirs + 8 * CLR_DIRECTORY, "CLI header directory")?;
    if cli_rva == 0 {
        return Err(bad("no CLI header: not a managed image".into()));
    }
    if nsections > MAX_SECTIONS {
        return Err(bad(format!("{nsections} sections")));
    }
    let sections_at = opt + opt_size;
    let mut sections = Vec::new();
    for i in 0..nsections as u64 {
        let s = rd(mem, sections_at + 40 * i, 40, "PE section header")?;
        let u = |o: usize| u32::from_le_bytes([s[o], s[o + 1], s[o + 2], s[o + 3]]);
        sections.push((u(12), u(8).max(u(16)), u(20))); // (rva, size, raw offset)
    }
    let to_file = |rva: u32| sections.iter().find(|(va, size, _)| rva >= *va && rva - va < *size).map(|(va, _, raw)| (rva - va + raw) as u64);
    // Try mapped, then flat.
    let mut candidates = vec![(base + cli_rva as u64, true)];
    if let Some(off) = to_file(cli_rva) {
        candidates.push((base + off, false));
    }
    for (cli, mapped) in candidates {
        let Ok(md_rva) = rd_u32(mem, cli + 8, "CLI header metadata directory") else { continue };
        let Ok(md_size) = rd_u32(mem, cli + 12, "CLI header metadata directory") else { continue };
        let root = if mapped { Some(base + md_rva as u64) } else { to_file(md_rva).map(|o| base + o) };
        let Some(root) = root else { continue };
        if rd_u32(mem, root, "metadata signature").ok() == Some(METADATA_SIGNATURE) {
            return Ok((root, md_size));
        }
    }
    Err(bad("no metadata signature (BSJB) where the CLI header points, mapped or flat".into()))
}

// ---------------------------------------------------------------- tables

#[derive(Clone, Copy)]
enum Col {
    U16,
    U32,
    Str,
    Guid,
    Blob,
    /// Index into one table.
    Table(u8),
    /// Coded index: tag bits and the tables it can name.
    Coded(u8, &'static [u8]),
}

use Col::*;

const TYPE_DEF_OR_REF: Col = Coded(2, &[0x02, 0x01, 0x1b]);
const HAS_CONSTANT: Col = Coded(2, &[0x04, 0x08, 0x17]);
const HAS_CUSTOM_ATTRIBUTE: Col =
    Coded(5, &[0x06, 0x04, 0x01, 0x02, 0x08, 0x09, 0x0a, 0x00, 0x0e, 0x17, 0x14, 0x11, 0x1a, 0x1b, 0x20, 0x23, 0x26, 0x27, 0x28, 0x2a, 0x2c, 0x2b]);
const HAS_FIELD_MARSHAL: Col = Coded(1, &[0x04, 0x08]);
const HAS_DECL_SECURITY: Col = Coded(2, &[0x02, 0x06, 0x20]);
const MEMBER_REF_PARENT: Col = Coded(3, &[0x02, 0x01, 0x1a, 0x06, 0x1b]);
const HAS_SEMANTICS: Col = Coded(1, &[0x14, 0x17]);
const METHOD_DEF_OR_REF: Col = Coded(1, &[0x06, 0x0a]);
const MEMBER_FORWARDED: Col = Coded(1, &[0x04, 0x06]);
const IMPLEMENTATION: Col = Coded(2, &[0x26, 0x23, 0x27]);
const CUSTOM_ATTRIBUTE_TYPE: Col = Coded(3, &[0x06, 0x0a]);
const RESOLUTION_SCOPE: Col = Coded(2, &[0x00, 0x1a, 0x23, 0x01]);
const TYPE_OR_METHOD_DEF: Col = Coded(1, &[0x02, 0x06]);

/// Columns of tables 0x00..=0x2c (ECMA-335 II.22).
const SCHEMA: [&[Col]; 0x2d] = [
    &[U16, Str, Guid, Guid, Guid],                                      // 0x00 Module
    &[RESOLUTION_SCOPE, Str, Str],                                      // 0x01 TypeRef
    &[U32, Str, Str, TYPE_DEF_OR_REF, Table(0x04), Table(0x06)],        // 0x02 TypeDef
    &[Table(0x04)],                                                     // 0x03 FieldPtr
    &[U16, Str, Blob],                                                  // 0x04 Field
    &[Table(0x06)],                                                     // 0x05 MethodPtr
    &[U32, U16, U16, Str, Blob, Table(0x08)],                           // 0x06 MethodDef
    &[Table(0x08)],                                                     // 0x07 ParamPtr
    &[U16, U16, Str],                                                   // 0x08 Param
    &[Table(0x02), TYPE_DEF_OR_REF],                                    // 0x09 InterfaceImpl
    &[MEMBER_REF_PARENT, Str, Blob],                                    // 0x0a MemberRef
    &[U16, HAS_CONSTANT, Blob],                                         // 0x0b Constant (type u8 + pad)
    &[HAS_CUSTOM_ATTRIBUTE, CUSTOM_ATTRIBUTE_TYPE, Blob],               // 0x0c CustomAttribute
    &[HAS_FIELD_MARSHAL, Blob],                                         // 0x0d FieldMarshal
    &[U16, HAS_DECL_SECURITY, Blob],                                    // 0x0e DeclSecurity
    &[U16, U32, Table(0x02)],                                           // 0x0f ClassLayout
    &[U32, Table(0x04)],                                                // 0x10 FieldLayout
    &[Blob],                                                            // 0x11 StandAloneSig
    &[Table(0x02), Table(0x14)],                                        // 0x12 EventMap
    &[Table(0x14)],                                                     // 0x13 EventPtr
    &[U16, Str, TYPE_DEF_OR_REF],                                       // 0x14 Event
    &[Table(0x02), Table(0x17)],                                        // 0x15 PropertyMap
    &[Table(0x17)],                                                     // 0x16 PropertyPtr
    &[U16, Str, Blob],                                                  // 0x17 Property
    &[U16, Table(0x06), HAS_SEMANTICS],                                 // 0x18 MethodSemantics
    &[Table(0x02), METHOD_DEF_OR_REF, METHOD_DEF_OR_REF],               // 0x19 MethodImpl
    &[Str],                                                             // 0x1a ModuleRef
    &[Blob],                                                            // 0x1b TypeSpec
    &[U16, MEMBER_FORWARDED, Str, Table(0x1a)],                         // 0x1c ImplMap
    &[U32, Table(0x04)],                                                // 0x1d FieldRVA
    &[U32, U32],                                                        // 0x1e EncLog
    &[U32],                                                             // 0x1f EncMap
    &[U32, U16, U16, U16, U16, U32, Blob, Str, Str],                    // 0x20 Assembly
    &[U32],                                                             // 0x21 AssemblyProcessor
    &[U32, U32, U32],                                                   // 0x22 AssemblyOS
    &[U16, U16, U16, U16, U32, Blob, Str, Str, Blob],                   // 0x23 AssemblyRef
    &[U32, Table(0x23)],                                                // 0x24 AssemblyRefProcessor
    &[U32, U32, U32, Table(0x23)],                                      // 0x25 AssemblyRefOS
    &[U32, Str, Blob],                                                  // 0x26 File
    &[U32, U32, Str, Str, IMPLEMENTATION],                              // 0x27 ExportedType
    &[U32, U32, Str, IMPLEMENTATION],                                   // 0x28 ManifestResource
    &[Table(0x02), Table(0x02)],                                        // 0x29 NestedClass
    &[U16, U16, TYPE_OR_METHOD_DEF, Str],                               // 0x2a GenericParam
    &[METHOD_DEF_OR_REF, Blob],                                         // 0x2b MethodSpec
    &[Table(0x2a), TYPE_DEF_OR_REF],                                    // 0x2c GenericParamConstraint
];

pub(crate) const TYPE_REF: usize = 0x01;
pub(crate) const TYPE_DEF: usize = 0x02;
pub(crate) const FIELD: usize = 0x04;
pub(crate) const METHOD_DEF: usize = 0x06;
pub(crate) const TYPE_SPEC: usize = 0x1b;
pub(crate) const GENERIC_PARAM: usize = 0x2a;
pub(crate) const ASSEMBLY: usize = 0x20;
pub(crate) const NESTED_CLASS: usize = 0x29;

#[derive(Debug, Clone, Copy, Default)]
struct Table {
    rows: u32,
    row_size: u32,
    at: u64,
}

/// A module's metadata tables and string heap, located (nothing is read until asked).
#[derive(Debug, Clone)]
pub(crate) struct Metadata {
    pub(crate) root: u64,
    strings: (u64, u32),
    /// The `#Blob` heap, when the image has one.
    blobs: Option<(u64, u32)>,
    tables: [Table; 0x2d],
    /// Column widths (bytes) per table, in schema order.
    widths: Vec<Vec<u8>>,
}

impl Metadata {
    /// Reads the metadata root at `root` (`size` bytes, from the CLI header).
    pub(crate) fn open(mem: &dyn Memory, root: u64, size: u32) -> Result<Metadata, DotnetError> {
        let bad = |why: String| DotnetError::Metadata { at: root, why };
        if rd_u32(mem, root, "metadata root")? != METADATA_SIGNATURE {
            return Err(bad("no BSJB signature".into()));
        }
        let vlen = rd_u32(mem, root + 12, "metadata version length")?;
        if vlen > 255 {
            return Err(bad(format!("version string length {vlen}")));
        }
        let mut at = root + 16 + ((vlen as u64 + 3) & !3);
        let nstreams = rd_u16(mem, at + 2, "metadata stream count")?;
        if nstreams > MAX_STREAMS {
            return Err(bad(format!("{nstreams} streams")));
        }
        at += 4;
        let (mut tables_stream, mut strings, mut blobs) = (None, None, None);
        for _ in 0..nstreams {
            let off = rd_u32(mem, at, "stream header")?;
            let ssize = rd_u32(mem, at + 4, "stream header")?;
            let name = rd(mem, at + 8, 32, "stream name")?;
            let nlen = name.iter().position(|&b| b == 0).ok_or_else(|| bad("unterminated stream name".into()))?;
            if off.checked_add(ssize).is_none_or(|end| end > size) {
                return Err(bad(format!("stream at {off:#x}+{ssize:#x} runs past the metadata ({size:#x} bytes)")));
            }
            match &name[..nlen] {
                b"#~" | b"#-" => tables_stream = Some((root + off as u64, ssize)),
                b"#Strings" => strings = Some((root + off as u64, ssize)),
                b"#Blob" => blobs = Some((root + off as u64, ssize)),
                _ => {}
            }
            at += 8 + ((nlen as u64 + 4) & !3);
        }
        let (tstream, tsize) = tables_stream.ok_or_else(|| bad("no #~ stream".into()))?;
        let strings = strings.ok_or_else(|| bad("no #Strings heap".into()))?;
        let heap_sizes = rd(mem, tstream + 6, 1, "#~ heap sizes")?[0];
        if heap_sizes & !0x07 != 0 {
            return Err(bad(format!("#~ heap-size flags {heap_sizes:#x} (extra data or delta images are not read)")));
        }
        let valid = u64::from_le_bytes(rd(mem, tstream + 8, 8, "#~ valid mask")?.try_into().unwrap_or([0; 8]));
        if valid >> 0x2d != 0 {
            return Err(bad(format!("tables beyond 0x2c present (valid mask {valid:#x})")));
        }
        let mut tables = [Table::default(); 0x2d];
        let mut at = tstream + 24;
        for (i, t) in tables.iter_mut().enumerate() {
            if valid & (1 << i) != 0 {
                t.rows = rd_u32(mem, at, "#~ row count")?;
                if t.rows > 0x00ff_ffff {
                    return Err(bad(format!("table {i:#x} claims {} rows", t.rows)));
                }
                at += 4;
            }
        }
        let (ws, wg, wb) = (if heap_sizes & 1 != 0 { 4 } else { 2 }, if heap_sizes & 2 != 0 { 4 } else { 2 }, if heap_sizes & 4 != 0 { 4 } else { 2 });
        let rows = |t: u8| tables.get(t as usize).map_or(0, |t| t.rows);
        let widths: Vec<Vec<u8>> = SCHEMA
            .iter()
            .map(|cols| {
                cols.iter()
                    .map(|c| match *c {
                        U16 => 2,
                        U32 => 4,
                        Str => ws,
                        Guid => wg,
                        Blob => wb,
                        Table(t) => {
                            if rows(t) < 1 << 16 {
                                2
                            } else {
                                4
                            }
                        }
                        Coded(bits, ts) => {
                            let max = ts.iter().map(|&t| rows(t)).max().unwrap_or(0);
                            if max < 1 << (16 - bits) {
                                2
                            } else {
                                4
                            }
                        }
                    })
                    .collect()
            })
            .collect();
        let end = tstream + tsize as u64;
        for (i, t) in tables.iter_mut().enumerate() {
            t.row_size = widths[i].iter().map(|&w| w as u32).sum();
            t.at = at;
            at = at.checked_add(t.rows as u64 * t.row_size as u64).ok_or_else(|| bad("table sizes overflow".into()))?;
        }
        if at > end {
            return Err(bad(format!("tables need {:#x} bytes, the #~ stream has {tsize:#x}", at - tstream)));
        }
        Ok(Metadata { root, strings, blobs, tables, widths })
    }

    pub(crate) fn rows(&self, table: usize) -> u32 {
        self.tables.get(table).map_or(0, |t| t.rows)
    }

    /// Column `col` of row `rid` (1-based) of `table`.
    fn cell(&self, mem: &dyn Memory, table: usize, rid: u32, col: usize) -> Result<u32, DotnetError> {
        let t = self.tables.get(table).ok_or_else(|| DotnetError::Metadata { at: self.root, why: format!("no table {table:#x}") })?;
        if rid == 0 || rid > t.rows {
            return Err(DotnetError::Metadata { at: self.root, why: format!("row {rid} of table {table:#x} (it has {})", t.rows) });
        }
        let w = &self.widths[table];
        let off: u64 = w[..col].iter().map(|&x| x as u64).sum();
        let at = t.at + (rid as u64 - 1) * t.row_size as u64 + off;
        match w[col] {
            2 => rd_u16(mem, at, "metadata table cell").map(u32::from),
            _ => rd_u32(mem, at, "metadata table cell"),
        }
    }

    /// A `#Strings` heap entry.
    pub(crate) fn string(&self, mem: &dyn Memory, index: u32) -> Result<String, DotnetError> {
        let (heap, size) = self.strings;
        if index >= size {
            return Err(DotnetError::Metadata { at: self.root, why: format!("string index {index:#x} outside the heap ({size:#x} bytes)") });
        }
        let max = ((size - index) as usize).min(MAX_NAME);
        mem.read_c_string(heap + index as u64, max).map_err(|e| DotnetError::memory("metadata string", e))
    }

    /// A Field's name.
    pub(crate) fn field_name(&self, mem: &dyn Memory, rid: u32) -> Result<String, DotnetError> {
        let name = self.cell(mem, FIELD, rid, 1)?;
        self.string(mem, name)
    }

    /// A TypeDef's (namespace, name).
    pub(crate) fn type_def_name(&self, mem: &dyn Memory, rid: u32) -> Result<(String, String), DotnetError> {
        let name = self.cell(mem, TYPE_DEF, rid, 1)?;
        let ns = self.cell(mem, TYPE_DEF, rid, 2)?;
        Ok((self.string(mem, ns)?, self.string(mem, name)?))
    }

    /// The TypeDef enclosing `rid`, when it is nested (NestedClass is sorted by its first column).
    pub(crate) fn enclosing_type(&self, mem: &dyn Memory, rid: u32) -> Result<Option<u32>, DotnetError> {
        let (mut lo, mut hi) = (1u32, self.rows(NESTED_CLASS));
        while lo <= hi && hi != 0 {
            let mid = lo + (hi - lo) / 2;
            let nested = self.cell(mem, NESTED_CLASS, mid, 0)?;
            match nested.cmp(&rid) {
                std::cmp::Ordering::Equal => return self.cell(mem, NESTED_CLASS, mid, 1).map(Some),
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid - 1,
            }
        }
        Ok(None)
    }

    /// A Field's signature blob (ECMA-335 II.23.2.4: FIELD, custom modifiers, the type).
    pub(crate) fn field_signature(&self, mem: &dyn Memory, rid: u32) -> Result<Vec<u8>, DotnetError> {
        let sig = self.cell(mem, FIELD, rid, 2)?;
        self.blob(mem, sig)
    }

    /// The TypeDef whose full name (as [`Metadata::type_def_full_name`] gives it:
    /// `Namespace.Outer+Inner`) is `full`; a scan of the TypeDef table by the last simple name.
    pub(crate) fn type_def_by_name(&self, mem: &dyn Memory, full: &str) -> Result<Option<u32>, DotnetError> {
        let simple = match full.rfind('+') {
            Some(i) => &full[i + 1..],
            None => full.rfind('.').map_or(full, |i| &full[i + 1..]),
        };
        for rid in 1..=self.rows(TYPE_DEF) {
            let name = self.cell(mem, TYPE_DEF, rid, 1)?;
            if self.string(mem, name)? == simple && self.type_def_full_name(mem, rid)? == full {
                return Ok(Some(rid));
            }
        }
        Ok(None)
    }

    /// The assembly's simple name (Assembly table, row 1).
    pub(crate) fn assembly_name(&self, mem: &dyn Memory) -> Result<Option<String>, DotnetError> {
        if self.rows(ASSEMBLY) == 0 {
            return Ok(None);
        }
        let name = self.cell(mem, ASSEMBLY, 1, 7)?;
        self.string(mem, name).map(Some)
    }

    /// The full name SOS prints for a TypeDef: `Namespace.Outer+Inner`.
    pub(crate) fn type_def_full_name(&self, mem: &dyn Memory, rid: u32) -> Result<String, DotnetError> {
        let mut parts = Vec::new();
        let mut cur = rid;
        for _ in 0..64 {
            let (ns, name) = self.type_def_name(mem, cur)?;
            match self.enclosing_type(mem, cur)? {
                Some(outer) if outer != cur => {
                    parts.push(name);
                    cur = outer;
                }
                _ => {
                    parts.push(if ns.is_empty() { name } else { format!("{ns}.{name}") });
                    parts.reverse();
                    return Ok(parts.join("+"));
                }
            }
        }
        Err(DotnetError::Metadata { at: self.root, why: format!("nesting of TypeDef {rid} is deeper than 64 (a cycle?)") })
    }

    /// A `#Blob` heap entry (its compressed length prefix decoded, ECMA-335 II.24.2.4).
    pub(crate) fn blob(&self, mem: &dyn Memory, index: u32) -> Result<Vec<u8>, DotnetError> {
        let bad = |why: String| DotnetError::Metadata { at: self.root, why };
        let (heap, size) = self.blobs.ok_or_else(|| bad("no #Blob heap".into()))?;
        if index >= size {
            return Err(bad(format!("blob index {index:#x} outside the heap ({size:#x} bytes)")));
        }
        let head = rd(mem, heap + index as u64, ((size - index) as usize).min(4), "metadata blob length")?;
        let (len, used) = match head.first() {
            Some(&b) if b & 0x80 == 0 => (b as u32, 1),
            Some(&b) if b & 0xc0 == 0x80 && head.len() >= 2 => ((((b & 0x3f) as u32) << 8) | head[1] as u32, 2),
            Some(&b) if b & 0xe0 == 0xc0 && head.len() >= 4 => {
                ((((b & 0x1f) as u32) << 24) | (head[1] as u32) << 16 | (head[2] as u32) << 8 | head[3] as u32, 4)
            }
            _ => return Err(bad(format!("blob {index:#x} has a bad length prefix"))),
        };
        if len > MAX_BLOB || (index as u64 + used + len as u64) > size as u64 {
            return Err(bad(format!("blob {index:#x} of {len} bytes runs past the heap ({size:#x} bytes)")));
        }
        rd(mem, heap + index as u64 + used, len as usize, "metadata blob")
    }

    /// A MethodDef's name and signature blob.
    pub(crate) fn method_def(&self, mem: &dyn Memory, rid: u32) -> Result<(String, Vec<u8>), DotnetError> {
        let name = self.cell(mem, METHOD_DEF, rid, 3)?;
        let sig = self.cell(mem, METHOD_DEF, rid, 4)?;
        Ok((self.string(mem, name)?, self.blob(mem, sig)?))
    }

    /// A TypeRef's (namespace, name). A nested TypeRef has an empty namespace.
    pub(crate) fn type_ref_name(&self, mem: &dyn Memory, rid: u32) -> Result<(String, String), DotnetError> {
        let name = self.cell(mem, TYPE_REF, rid, 1)?;
        let ns = self.cell(mem, TYPE_REF, rid, 2)?;
        Ok((self.string(mem, ns)?, self.string(mem, name)?))
    }

    /// A TypeRef's ResolutionScope: `Some(rid)` of the enclosing TypeRef when it is nested.
    pub(crate) fn type_ref_enclosing(&self, mem: &dyn Memory, rid: u32) -> Result<Option<u32>, DotnetError> {
        let scope = self.cell(mem, TYPE_REF, rid, 0)?;
        Ok((scope & 3 == 3).then_some(scope >> 2))
    }

    /// A TypeSpec's signature blob.
    pub(crate) fn type_spec(&self, mem: &dyn Memory, rid: u32) -> Result<Vec<u8>, DotnetError> {
        let sig = self.cell(mem, TYPE_SPEC, rid, 0)?;
        self.blob(mem, sig)
    }

    /// The name of generic parameter `number` of the TypeDef (`owner_table` TYPE_DEF) or MethodDef
    /// (METHOD_DEF) `owner`, when the GenericParam table has it (a linear scan: only for
    /// signatures that mention a generic variable).
    pub(crate) fn generic_param_name(&self, mem: &dyn Memory, owner_table: usize, owner: u32, number: u32) -> Result<Option<String>, DotnetError> {
        let tag = match owner_table {
            TYPE_DEF => 0,
            METHOD_DEF => 1,
            _ => return Ok(None),
        };
        let coded = (owner << 1) | tag;
        for rid in 1..=self.rows(GENERIC_PARAM) {
            if self.cell(mem, GENERIC_PARAM, rid, 2)? == coded && self.cell(mem, GENERIC_PARAM, rid, 0)? == number {
                let name = self.cell(mem, GENERIC_PARAM, rid, 3)?;
                return self.string(mem, name).map(Some);
            }
        }
        Ok(None)
    }

}

#[cfg(test)]
mod tests {
    use super::missing_images;

    fn framework(names: &[&str]) -> Vec<(usize, String, u64)> {
        names.iter().enumerate().map(|(i, n)| (i, format!("/usr/share/dotnet/shared/Microsoft.NETCore.App/10.0.12/{n}"), 0x7000_0000 + i as u64 * 0x4000)).collect()
    }

    #[test]
    fn one_image_not_found_is_said_with_its_path_and_address() {
        assert_eq!(
            missing_images(&framework(&["System.Threading.Thread.dll"])),
            "managed image: /usr/share/dotnet/shared/Microsoft.NETCore.App/10.0.12/System.Threading.Thread.dll (mapped at 0x70000000) not found on disk"
        );
    }

    #[test]
    fn many_images_not_found_are_one_bounded_line() {
        let names: Vec<String> = (0..9).map(|i| format!("System.Part{i}.dll")).collect();
        let line = missing_images(&framework(&names.iter().map(String::as_str).collect::<Vec<_>>()));
        assert!(line.starts_with("managed images: 9 not found on disk (the dump's /usr/share/dotnet/shared/Microsoft.NETCore.App/10.0.12/)"), "{line}");
        assert!(line.contains("System.Part0.dll, ") && line.contains("System.Part5.dll, and 3 more"), "{line}");
        assert!(!line.contains("System.Part6.dll"), "{line}");
    }
}
