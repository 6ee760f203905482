//! The ELF core reader: maps the file read-only, finds its segments and notes, and rebuilds the
//! threads. Nothing here knows about modules or stacks; see [`crate::process`].

pub(crate) mod auxv;
pub(crate) mod compressed;
mod error;
pub(crate) mod knot_note;
pub(crate) mod notes;
pub(crate) mod nt_file;
pub(crate) mod prpsinfo;
pub(crate) mod prstatus;
pub(crate) mod segments;
pub(crate) mod siginfo;

pub use error::CoreError;
pub use auxv::Auxv;
pub use compressed::DEFAULT_MAX_DECOMPRESSED;
pub use notes::{Note, Notes};
pub use nt_file::FileMapping;
pub use siginfo::{SignalInfo, SignalSource};
pub use crate::arch::{Arch, Registers};
pub(crate) use prpsinfo::ProcessInfo;
pub use segments::{Absence, Segment, Segments};

use crate::bytes::Bytes;
use crate::diagnostics::Diagnostic;
use goblin::elf::header::{self, Header};
use goblin::elf::program_header::{self, ProgramHeader};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const NT_PRSTATUS: u32 = 1;
const NT_FPREGSET: u32 = 2;
const NT_PRPSINFO: u32 = 3;
const NT_AUXV: u32 = 6;
const NT_X86_XSTATE: u32 = 0x202;
/// aarch64: the thread pointer (`tpidr_el0`, 8 bytes; 16 with `tpidr2_el0`).
const NT_ARM_TLS: u32 = 0x401;
/// aarch64: the masks of the pointer-authentication code bits (data mask, instruction mask).
const NT_ARM_PAC_MASK: u32 = 0x406;
const NT_SIGINFO: u32 = 0x5349_4749;
const NT_FILE: u32 = 0x4649_4c45;
/// e_phnum value meaning "the real count is in section header 0's sh_info".
const PN_XNUM: u16 = 0xffff;
/// Malformed notes warned about one by one, at most; the rest are counted in one warning, so a
/// core made of tiny bogus notes cannot turn into many times its size in diagnostics.
const MAX_NOTE_WARNINGS: usize = 32;

/// One thread as the core records it, in the core's order.
#[derive(Debug, Clone)]
pub struct CoreThread {
    pub tid: u32,
    pub registers: Registers,
    /// The signal this thread was stopped by (0 when none).
    pub(crate) cursig: u16,
    /// The thread that took the signal that caused the dump (the kernel writes it first, with
    /// NT_SIGINFO after it).
    pub signalled: bool,
    /// Whether NT_FPREGSET / NT_X86_XSTATE were present for this thread.
    pub(crate) has_fpregs: bool,
    pub(crate) has_xstate: bool,
    /// aarch64's thread pointer (`tpidr_el0`, NT_ARM_TLS); x86-64's is `fs_base` in the registers.
    pub(crate) tls: Option<u64>,
}

/// A parsed core file. Memory is read lazily from the mapping.
pub struct Core {
    path: PathBuf,
    map: Bytes,
    /// The architecture the core was written on (its `e_machine`).
    pub arch: Arch,
    /// aarch64: the bits of a code pointer that hold its pointer-authentication code
    /// (NT_ARM_PAC_MASK's instruction mask), cleared from return addresses before use.
    pub(crate) pac_mask: Option<u64>,
    pub segments: Segments,
    pub threads: Vec<CoreThread>,
    pub(crate) process: Option<ProcessInfo>,
    pub auxv: Auxv,
    /// NT_FILE's mappings; `None` when the core has no NT_FILE note.
    pub files: Option<Vec<FileMapping>>,
    pub signal: Option<SignalInfo>,
    /// Thread names by tid, from knot's own note (cores `knot pid` builds); kernel cores and
    /// gcore record none.
    pub thread_names: BTreeMap<u32, String>,
    /// How the live process was read, when `knot pid` built this core.
    pub(crate) capture: Option<knot_note::Capture>,
    /// What was odd or missing; a warning here means the reading is partial.
    pub diagnostics: Vec<Diagnostic>,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core")
            .field("path", &self.path)
            .field("size", &self.map.len())
            .field("segments", &self.segments.len())
            .field("threads", &self.threads.len())
            .finish()
    }
}

impl Core {
    /// Opens `path` read-only and maps it. The file is never written, and never read whole.
    pub fn open(path: impl AsRef<Path>) -> Result<Core, CoreError> {
        Core::open_limited(path, compressed::DEFAULT_MAX_DECOMPRESSED)
    }

    /// As [`Core::open`], with a compressed core decompressed to at most `max_decompressed`
    /// bytes (besides the bound its own program headers set).
    pub fn open_limited(path: impl AsRef<Path>, max_decompressed: u64) -> Result<Core, CoreError> {
        let path = path.as_ref().to_path_buf();
        let open_err = |source| CoreError::Open { path: path.clone(), source };
        let meta = std::fs::metadata(&path).map_err(open_err)?;
        if meta.is_dir() {
            return Err(CoreError::IsDirectory { path });
        }
        if meta.len() == 0 {
            return Err(CoreError::Empty { path });
        }
        // Not a FIFO or a device: the open cannot block, and the type is checked before any read.
        let mut file = crate::open::open_regular(&path).map_err(open_err)?;
        let mut magic = [0u8; 6];
        let n = std::io::Read::read(&mut file, &mut magic).map_err(open_err)?;
        let mut note = None;
        if let Some(kind) = compressed::Compression::detect(&magic[..n]) {
            let plain = compressed::decompress(&path, kind, max_decompressed).map_err(|e| match e {
                compressed::DecompressError::Stream(source) => CoreError::Decompress { path: path.clone(), kind: kind.name(), source },
                compressed::DecompressError::TempFile { written, source } => {
                    CoreError::DecompressSpace { path: path.clone(), dir: std::env::temp_dir(), written, source }
                }
                compressed::DecompressError::TooBig { declared, limit } => CoreError::DecompressTooBig { path: path.clone(), declared, limit },
            })?;
            let size = plain.size;
            note = Some(match plain.cut_off {
                // The core is whole; what follows it is not knot's to read.
                None if plain.past_end.is_some() => Diagnostic::info(
                    "core",
                    format!(
                        "{} is {}-compressed and its stream goes on past the {size} bytes the core's program headers declare: the rest was not decompressed",
                        path.display(),
                        kind.name()
                    ),
                ),
                None => Diagnostic::info("core", format!("{} is {}-compressed: read through a {size}-byte temporary file", path.display(), kind.name())),
                Some(why) => Diagnostic::warning(
                    "core",
                    format!("{} is {}-compressed and its stream breaks off after {size} bytes ({why}): read as a truncated core", path.display(), kind.name()),
                ),
            });
            file = plain.file;
        }
        // SAFETY: the mapping is read-only and knot never writes through it. If another process
        // truncates the file while knot runs, reads past the new end would fault (SIGBUS): the
        // mapping is guarded (crate::sigbus), they read zeros, and `changed_while_read` says so.
        let map = unsafe { memmap2::MmapOptions::new().map(&file) }.map_err(open_err)?;
        // Access is sparse (a few stack pages per thread): no read-ahead or fault-around.
        let _ = map.advise(memmap2::Advice::Random);
        if map.is_empty() {
            return Err(CoreError::Empty { path });
        }
        let mut core = Core::from_map(path, Bytes::mapped(map))?;
        core.diagnostics.extend(note);
        Ok(core)
    }

    /// Parses a core held in memory; `name` stands in for its path in messages.
    pub fn from_bytes(name: impl Into<PathBuf>, bytes: Vec<u8>) -> Result<Core, CoreError> {
        let path = name.into();
        if bytes.is_empty() {
            return Err(CoreError::Empty { path });
        }
        Core::from_map(path, Bytes::Owned(bytes.into_boxed_slice()))
    }

    fn from_map(path: PathBuf, map: Bytes) -> Result<Core, CoreError> {
        let bytes: &[u8] = &map;
        if bytes.len() < 4 || &bytes[..4] != b"\x7fELF" {
            return Err(CoreError::NotElf { path });
        }
        if bytes.len() < header::header64::SIZEOF_EHDR {
            return Err(CoreError::BadHeader { path, reason: format!("file is {} bytes, an ELF header needs 64", bytes.len()) });
        }
        let hdr = goblin::elf::Elf::parse_header(bytes)
            .map_err(|e| CoreError::BadHeader { path: path.clone(), reason: e.to_string() })?;
        let arch = check_kind(&path, &hdr)?;

        let mut diagnostics = Vec::new();
        let phdrs = program_headers(&path, bytes, &hdr)?;
        let file_len = bytes.len() as u64;
        let mut loads = Vec::new();
        let mut note_ranges = Vec::new();
        for (i, ph) in phdrs.iter().enumerate() {
            let present = file_len.saturating_sub(ph.p_offset).min(ph.p_filesz);
            match ph.p_type {
                program_header::PT_LOAD => {
                    // No segment runs past the end of the address space: clamping memsz keeps
                    // every address computed from a segment in range.
                    let room = u64::MAX - ph.p_vaddr;
                    if ph.p_memsz > room {
                        diagnostics.push(
                            Diagnostic::warning(
                                "core",
                                format!("segment at {:#x} claims {} bytes, past the end of the address space; only {room} are read", ph.p_vaddr, ph.p_memsz),
                            )
                            .at_offset(hdr.e_phoff + i as u64 * program_header::program_header64::SIZEOF_PHDR as u64)
                            .at_address(ph.p_vaddr),
                        );
                    }
                    let memsz = ph.p_memsz.min(room);
                    let seg = Segment {
                        vaddr: ph.p_vaddr,
                        memsz,
                        offset: ph.p_offset,
                        filesz: ph.p_filesz.min(memsz),
                        present: present.min(memsz),
                        flags: ph.p_flags,
                    };
                    loads.push(seg);
                }
                program_header::PT_NOTE => {
                    if present < ph.p_filesz {
                        diagnostics.push(
                            Diagnostic::warning("core", format!("note segment cut off: {} of {} bytes present", present, ph.p_filesz))
                                .at_offset(ph.p_offset),
                        );
                    }
                    note_ranges.push(NoteRange { offset: ph.p_offset, present, size: ph.p_filesz });
                }
                _ => {}
            }
        }

        // One summary for a truncated core, not one line per segment.
        let cut: Vec<&Segment> = loads.iter().filter(|s| s.is_truncated()).collect();
        if let Some(first) = cut.first() {
            let missing = cut.iter().map(|s| s.filesz - s.present).fold(0u64, u64::saturating_add);
            diagnostics.push(
                Diagnostic::warning(
                    "core",
                    format!(
                        "the core is truncated: it ends at {file_len} bytes, inside segment {:#x}..{:#x}; {} of {} segments are cut off ({missing} bytes of memory missing)",
                        first.vaddr,
                        first.end(),
                        cut.len(),
                        loads.len()
                    ),
                )
                .at_offset(first.offset + first.present)
                .at_address(first.vaddr + first.present),
            );
        }
        let segments = Segments::new(loads);
        if let Some((count, first)) = segments.overlaps() {
            diagnostics.push(
                Diagnostic::warning(
                    "core",
                    format!("{count} PT_LOAD segments overlap others, the first at {first:#x}: memory there is ambiguous (reads use the segment starting nearest below)"),
                )
                .at_address(first),
            );
        }
        let mut found = Found { diagnostics, arch, ..Found::default() };
        for range in distinct_note_ranges(&note_ranges, &mut found.diagnostics) {
            // `distinct_note_ranges` only keeps non-empty ranges that lie inside the file.
            found.read_notes(&bytes[range.offset as usize..(range.offset + range.present) as usize], range.offset);
        }
        if found.malformed > MAX_NOTE_WARNINGS {
            let more = found.malformed - MAX_NOTE_WARNINGS;
            found.diagnostics.push(Diagnostic::warning("core", format!("{more} more malformed notes were ignored")));
        }
        if found.threads.is_empty() {
            // Most often the file was cut before its notes (gcore writes them last).
            if let Some(cut) = note_ranges.iter().find(|r| r.present < r.size) {
                return Err(CoreError::NotesTruncated { path, offset: cut.offset, size: cut.size, file_len });
            }
            return Err(CoreError::NoThreads { path });
        }
        if !found.threads.iter().any(|t| t.signalled)
            && let Some(t) = found.threads.iter_mut().find(|t| t.cursig != 0) {
                t.signalled = true;
                // No NT_SIGINFO (kernels before 3.7, some dumpers): the number is all there is.
                if found.signal.is_none() {
                    found.signal = Some(SignalInfo::from_cursig(t.cursig));
                    found.diagnostics.push(Diagnostic::info(
                        "core",
                        format!("the core has no NT_SIGINFO: signal {} taken from thread {}'s pr_cursig; its code and address are unknown", siginfo::signal_name(i32::from(t.cursig)), t.tid),
                    ));
                }
            }
        Ok(Core {
            path,
            map,
            arch,
            pac_mask: found.pac_mask,
            segments,
            threads: found.threads,
            process: found.process,
            auxv: found.auxv,
            files: found.files,
            signal: found.signal,
            thread_names: found.thread_names,
            capture: found.capture,
            diagnostics: found.diagnostics,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The whole file, for readers that need raw offsets.
    pub fn file_bytes(&self) -> &[u8] {
        &self.map
    }

    /// Up to `len` bytes at `addr` that the core holds contiguously, without copying.
    pub fn bytes_at(&self, addr: u64, len: usize) -> Result<&[u8], Absence> {
        let (offset, avail) = self.segments.locate(addr)?;
        let n = (len as u64).min(avail) as usize;
        // `locate` only returns offsets whose `avail` bytes lie inside the file.
        Ok(&self.map[offset as usize..offset as usize + n])
    }

    /// Hints that the `len` bytes at `addr` will be read soon, front to back (a heap walk): the
    /// kernel reads them ahead instead of faulting page by page (the mapping is opened for
    /// random access).
    pub(crate) fn will_read(&self, addr: u64, len: u64) {
        if let (Bytes::Mapped { map: m, .. }, Some((off, n))) = (&self.map, self.page_range(addr, len)) {
            let _ = m.advise_range(memmap2::Advice::WillNeed, off, n);
        }
    }

    /// Lets the kernel take back this mapping's pages of the `len` bytes at `addr` once they
    /// have been read (they stay in the page cache): a walk of a heap bigger than memory keeps
    /// its resident set small.
    pub(crate) fn done_reading(&self, addr: u64, len: u64) {
        if let (Bytes::Mapped { map: m, .. }, Some((off, n))) = (&self.map, self.page_range(addr, len)) {
            // SAFETY: the mapping is a private read-only file mapping nobody writes: dropped
            // pages are read again from the file on the next access, with the same bytes, and
            // no reference into the mapping is invalidated.
            let _ = unsafe { m.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, off, n) };
        }
    }

    /// Lets the kernel take back this mapping's pages of the whole segment holding `addr` (a
    /// thread's stack, once walked or scanned): the kernel maps the pages around each one read
    /// (fault-around), so thousands of stacks would otherwise keep hundreds of MiB resident.
    pub(crate) fn done_with_segment_at(&self, addr: u64) {
        // Fault-around maps a window of pages (64 KiB, more with large folios) that reaches
        // into the neighbouring segments of the file: they are let go too.
        const SLACK: u64 = 256 << 10;
        const PAGE: u64 = 4096;
        let Bytes::Mapped { map: m, .. } = &self.map else { return };
        let Some(seg) = self.segments.find(addr) else { return };
        let start = seg.offset.saturating_sub(SLACK) / PAGE * PAGE;
        let end = seg.offset.saturating_add(seg.present.min(seg.filesz)).saturating_add(SLACK).min(m.len() as u64) / PAGE * PAGE;
        if end > start {
            // SAFETY: as in `done_reading`: a private read-only file mapping; dropped pages are
            // read again from the file, with the same bytes, on the next access.
            let _ = unsafe { m.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start as usize, (end - start) as usize) };
        }
    }

    /// The whole pages of the file that hold the `len` bytes at `addr`, as (offset, length).
    fn page_range(&self, addr: u64, len: u64) -> Option<(usize, usize)> {
        const PAGE: u64 = 4096;
        let (offset, avail) = self.segments.locate(addr).ok()?;
        let end = offset.checked_add(len.min(avail))?;
        let start = offset / PAGE * PAGE;
        let end = (end / PAGE * PAGE).min(self.map.len() as u64);
        (end > start).then(|| (start as usize, (end - start) as usize))
    }

    /// Whether the core file shrank while it was read (truncated by another process): what was
    /// read past its new end is zeros, so the reading is not the dump's.
    pub fn changed_while_read(&self) -> bool {
        self.map.changed_while_read()
    }

    /// Whether any warning made this reading partial.
    pub fn is_partial(&self) -> bool {
        self.diagnostics.iter().any(|d| d.severity == crate::diagnostics::Severity::Warning)
    }
}


/// A PT_NOTE segment: `present` of its `size` bytes lie in the file from `offset`.
#[derive(Debug, Clone, Copy)]
struct NoteRange {
    offset: u64,
    present: u64,
    size: u64,
}

/// The note ranges to read, in program header order: empty ones left out, and any that overlaps
/// another left out too (so hostile duplicate headers cannot multiply the threads), with one
/// warning for all of those.
fn distinct_note_ranges(ranges: &[NoteRange], diagnostics: &mut Vec<Diagnostic>) -> Vec<NoteRange> {
    let mut by_offset: Vec<usize> = (0..ranges.len()).filter(|&i| ranges[i].present > 0).collect();
    by_offset.sort_by_key(|&i| (ranges[i].offset, i));
    let mut keep = vec![false; ranges.len()];
    let mut skipped: Vec<u64> = Vec::new();
    let mut end = 0u64;
    for i in by_offset {
        let r = ranges[i];
        if r.offset < end {
            skipped.push(r.offset);
            continue;
        }
        keep[i] = true;
        // `present > 0` means `offset + present` is within the file.
        end = r.offset + r.present;
    }
    if let Some(&first) = skipped.iter().min() {
        diagnostics.push(
            Diagnostic::warning("core", format!("{} note segments overlap others and were ignored, the first at offset {first:#x}", skipped.len()))
                .at_offset(first),
        );
    }
    ranges.iter().zip(keep).filter(|(_, k)| *k).map(|(r, _)| *r).collect()
}

/// What the notes yield, gathered before the [`Core`] is assembled.
#[derive(Default)]
struct Found {
    arch: Arch,
    pac_mask: Option<u64>,
    threads: Vec<CoreThread>,
    process: Option<ProcessInfo>,
    auxv: Auxv,
    files: Option<Vec<FileMapping>>,
    signal: Option<SignalInfo>,
    thread_names: BTreeMap<u32, String>,
    capture: Option<knot_note::Capture>,
    diagnostics: Vec<Diagnostic>,
    /// Malformed notes seen, warned about or not.
    malformed: usize,
}

impl Found {
    fn malformed_note(&mut self, d: Diagnostic) {
        self.malformed += 1;
        if self.malformed <= MAX_NOTE_WARNINGS {
            self.diagnostics.push(d);
        }
    }

    fn read_notes(&mut self, data: &[u8], base: u64) {
        let mut notes = notes::Notes::new(data, base);
        for note in notes.by_ref() {
            let owner = note.owner();
            if owner == knot_note::OWNER {
                self.read_knot_note(&note);
                continue;
            }
            if owner != b"CORE" && owner != b"LINUX" {
                continue;
            }
            let bad = |what: &str| Diagnostic::warning("core", format!("{what} note is malformed ({} bytes); ignored", note.desc.len())).at_offset(note.offset);
            match (owner, note.kind) {
                (b"CORE", NT_PRSTATUS) => match prstatus::parse(note.desc, self.arch) {
                    Some(p) => self.threads.push(CoreThread {
                        tid: p.tid,
                        registers: p.registers,
                        cursig: p.cursig,
                        signalled: false,
                        has_fpregs: false,
                        has_xstate: false,
                        tls: None,
                    }),
                    None => self.malformed_note(bad("NT_PRSTATUS")),
                },
                (b"CORE", NT_PRPSINFO) => match prpsinfo::parse(note.desc) {
                    Some(p) => self.process = Some(p),
                    None => self.malformed_note(bad("NT_PRPSINFO")),
                },
                (b"CORE", NT_AUXV) => self.auxv = Auxv::parse(note.desc),
                (b"CORE", NT_FILE) => match nt_file::parse(note.desc) {
                    Ok(files) => self.files = Some(files),
                    Err(why) => self.malformed_note(Diagnostic::warning("core", format!("NT_FILE ignored: {why}")).at_offset(note.offset)),
                },
                (b"CORE", NT_SIGINFO) => match siginfo::parse(note.desc) {
                    Some(s) => {
                        // The kernel writes NT_SIGINFO right after the dumping thread's NT_PRSTATUS.
                        if self.signal.is_none() {
                            if let Some(t) = self.threads.last_mut() {
                                t.signalled = true;
                            }
                            self.signal = Some(s);
                        }
                    }
                    None => self.malformed_note(bad("NT_SIGINFO")),
                },
                (b"CORE", NT_FPREGSET) => {
                    if let Some(t) = self.threads.last_mut() {
                        t.has_fpregs = true;
                    }
                }
                (b"LINUX", NT_X86_XSTATE) if self.arch == Arch::X86_64 => {
                    if let Some(t) = self.threads.last_mut() {
                        t.has_xstate = true;
                    }
                }
                (b"LINUX", NT_ARM_TLS) if self.arch == Arch::Aarch64 => match crate::bytes::u64_at(note.desc, 0) {
                    Some(tp) => {
                        if let Some(t) = self.threads.last_mut() {
                            t.tls = Some(tp);
                        }
                    }
                    None => self.malformed_note(bad("NT_ARM_TLS")),
                },
                (b"LINUX", NT_ARM_PAC_MASK) if self.arch == Arch::Aarch64 => match crate::bytes::u64_at(note.desc, 8) {
                    // One mask for the process: every thread's note holds the same.
                    Some(mask) => self.pac_mask = Some(mask),
                    None => self.malformed_note(bad("NT_ARM_PAC_MASK")),
                },
                _ => {}
            }
        }
        if let Some((offset, why)) = notes.error {
            self.diagnostics.push(Diagnostic::warning("core", format!("notes unreadable from here on: {why}")).at_offset(offset));
        }
    }

    fn read_knot_note(&mut self, note: &notes::Note<'_>) {
        match note.kind {
            knot_note::NT_KNOT_THREAD_NAMES => {
                if let Err(why) = knot_note::parse_thread_names(note.desc, &mut self.thread_names) {
                    self.malformed_note(Diagnostic::warning("core", format!("KNOT thread-name note: {why}; the names after it are ignored")).at_offset(note.offset));
                }
            }
            knot_note::NT_KNOT_CAPTURE => match knot_note::Capture::parse(note.desc) {
                Some(c) => {
                    if c.bytes_left_out > 0 {
                        self.diagnostics.push(Diagnostic::warning(
                            "live",
                            format!(
                                "the live reading left out {} bytes of memory in {} mappings (the copy limit, --max-copy-mib); facts kept there are missing",
                                c.bytes_left_out, c.mappings_left_out
                            ),
                        ));
                    }
                    self.capture = Some(c);
                }
                None => self.malformed_note(Diagnostic::warning("core", format!("KNOT capture note is malformed ({} bytes); ignored", note.desc.len())).at_offset(note.offset)),
            },
            _ => {}
        }
    }

}

/// The core's architecture: x86-64 or aarch64, 64-bit little-endian; any other is refused by name.
fn check_kind(path: &Path, hdr: &Header) -> Result<Arch, CoreError> {
    let class = hdr.e_ident[header::EI_CLASS];
    let data = hdr.e_ident[header::EI_DATA];
    if hdr.e_type != header::ET_CORE {
        return Err(CoreError::NotCore { path: path.to_path_buf(), e_type: hdr.e_type });
    }
    let arch = match hdr.e_machine {
        header::EM_X86_64 => Some(Arch::X86_64),
        header::EM_AARCH64 => Some(Arch::Aarch64),
        _ => None,
    };
    let Some(arch) = arch.filter(|_| class == header::ELFCLASS64 && data == header::ELFDATA2LSB) else {
        let arch = format!(
            "{}, {}, {}",
            header::machine_to_str(hdr.e_machine),
            if class == header::ELFCLASS64 { "64-bit" } else { "32-bit" },
            if data == header::ELFDATA2LSB { "little-endian" } else { "big-endian" }
        );
        return Err(CoreError::UnsupportedArch { path: path.to_path_buf(), arch });
    };
    Ok(arch)
}

fn program_headers(path: &Path, bytes: &[u8], hdr: &Header) -> Result<Vec<ProgramHeader>, CoreError> {
    let mut count = hdr.e_phnum as u64;
    if hdr.e_phnum == PN_XNUM {
        // More than 65534 segments: the count is in section header 0's sh_info (offset 44).
        let at = if hdr.e_shoff == 0 { None } else { hdr.e_shoff.checked_add(44).and_then(|o| usize::try_from(o).ok()) };
        let Some(b) = at.and_then(|o| bytes.get(o..o.checked_add(4)?)) else {
            return Err(CoreError::BadHeader {
                path: path.to_path_buf(),
                reason: format!(
                    "e_phnum is PN_XNUM (0xffff) but there is no section header 0 to hold the real count (e_shoff {:#x}, file {} bytes)",
                    hdr.e_shoff,
                    bytes.len()
                ),
            });
        };
        count = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64;
    }
    let entry_size = program_header::program_header64::SIZEOF_PHDR as u64;
    let end = count.checked_mul(entry_size).and_then(|n| n.checked_add(hdr.e_phoff));
    if hdr.e_phentsize as u64 != entry_size && count > 0 {
        return Err(CoreError::BadHeader { path: path.to_path_buf(), reason: format!("e_phentsize is {}, expected {entry_size}", hdr.e_phentsize) });
    }
    match end {
        Some(end) if end <= bytes.len() as u64 => {}
        _ => {
            return Err(CoreError::ProgramHeadersTruncated {
                path: path.to_path_buf(),
                offset: hdr.e_phoff,
                count,
                entry_size,
                file_len: bytes.len() as u64,
            });
        }
    }
    let ctx = goblin::container::Ctx::new(goblin::container::Container::Big, goblin::container::Endian::Little);
    ProgramHeader::parse(bytes, hdr.e_phoff as usize, count as usize, ctx)
        .map_err(|e| CoreError::BadHeader { path: path.to_path_buf(), reason: format!("program headers: {e}") })
}
