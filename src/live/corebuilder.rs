//! Writes what was read from a live process as an ELF core, laid out as the kernel and gcore
//! lay theirs out, so the dump reader ([`crate::core::Core::from_bytes`]) and every stage after
//! it read a live process exactly as they read a dump.

use crate::core::knot_note::{self, Capture};

const EHDR_SIZE: usize = 64;
const PHDR_SIZE: usize = 56;
const SHDR_SIZE: usize = 64;
const PT_LOAD: u32 = 1;
const PT_NOTE: u32 = 4;
const NT_PRSTATUS: u32 = 1;
const NT_FPREGSET: u32 = 2;
const NT_PRPSINFO: u32 = 3;
const NT_AUXV: u32 = 6;
const NT_FILE: u32 = 0x4649_4c45;
const PRSTATUS_SIZE: usize = 336;
const PRPSINFO_SIZE: usize = 136;
/// e_phnum's escape value: the real count is in section header 0.
const PN_XNUM: usize = 0xffff;
const PAGE: u64 = 4096;

/// One thread: its registers as `user_regs_struct` bytes, and its FPU state if read.
#[derive(Debug, Clone)]
pub struct ThreadRecord {
    pub(crate) tid: u32,
    pub(crate) regs: [u8; 216],
    pub(crate) fpregs: Option<Vec<u8>>,
}

/// The process, for NT_PRPSINFO and each NT_PRSTATUS.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProcessRecord {
    pub(crate) pid: u32,
    pub(crate) ppid: u32,
    pub(crate) pgrp: u32,
    pub(crate) sid: u32,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    /// The scheduler state letter before knot stopped it.
    pub(crate) state: u8,
    pub(crate) comm: String,
    pub(crate) args: String,
}

/// A mapping's piece of memory: `data` holds its first bytes (possibly none: mapped but not
/// copied, as a kernel core leaves file-backed text out).
#[derive(Debug, Clone)]
pub(crate) struct Region {
    pub(crate) vaddr: u64,
    pub(crate) memsz: u64,
    /// PF_R 4 | PF_W 2 | PF_X 1.
    pub(crate) flags: u32,
    pub(crate) data: Vec<u8>,
}

/// A file-backed mapping for NT_FILE.
#[derive(Debug, Clone)]
pub(crate) struct FileEntry {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) offset: u64,
    pub(crate) path: String,
}

#[derive(Debug, Clone, Default)]
pub struct CoreParts {
    pub(crate) process: ProcessRecord,
    pub threads: Vec<ThreadRecord>,
    pub(crate) auxv: Vec<u8>,
    pub(crate) files: Vec<FileEntry>,
    pub(crate) names: Vec<(u32, String)>,
    pub capture: Capture,
    /// Sorted by address, not overlapping.
    pub(crate) regions: Vec<Region>,
}

fn note(out: &mut Vec<u8>, owner: &[u8], kind: u32, desc: &[u8]) {
    out.extend((owner.len() as u32 + 1).to_le_bytes());
    out.extend((desc.len() as u32).to_le_bytes());
    out.extend(kind.to_le_bytes());
    out.extend(owner);
    out.push(0);
    pad4(out);
    out.extend(desc);
    pad4(out);
}

fn pad4(out: &mut Vec<u8>) {
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_str(b: &mut [u8], at: usize, len: usize, s: &str) {
    let bytes = s.as_bytes();
    // Keep a NUL at the end of the field.
    let n = bytes.len().min(len - 1);
    b[at..at + n].copy_from_slice(&bytes[..n]);
}

fn prstatus(p: &ProcessRecord, t: &ThreadRecord) -> Vec<u8> {
    let mut b = vec![0u8; PRSTATUS_SIZE];
    put_u32(&mut b, 32, t.tid);
    put_u32(&mut b, 36, p.ppid);
    put_u32(&mut b, 40, p.pgrp);
    put_u32(&mut b, 44, p.sid);
    b[112..112 + 216].copy_from_slice(&t.regs);
    put_u32(&mut b, 328, u32::from(t.fpregs.is_some()));
    b
}

fn prpsinfo(p: &ProcessRecord) -> Vec<u8> {
    let mut b = vec![0u8; PRPSINFO_SIZE];
    // pr_state is the index of the letter in "RSDTZW", as the kernel writes it.
    b[0] = b"RSDTZW".iter().position(|&c| c == p.state).unwrap_or(0) as u8;
    b[1] = p.state;
    b[2] = u8::from(p.state == b'Z');
    put_u32(&mut b, 16, p.uid);
    put_u32(&mut b, 20, p.gid);
    put_u32(&mut b, 24, p.pid);
    put_u32(&mut b, 28, p.ppid);
    put_u32(&mut b, 32, p.pgrp);
    put_u32(&mut b, 36, p.sid);
    put_str(&mut b, 40, 16, &p.comm);
    put_str(&mut b, 56, 80, &p.args);
    b
}

fn nt_file(files: &[FileEntry]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend((files.len() as u64).to_le_bytes());
    b.extend(PAGE.to_le_bytes());
    for f in files {
        b.extend(f.start.to_le_bytes());
        b.extend(f.end.to_le_bytes());
        b.extend((f.offset / PAGE).to_le_bytes());
    }
    for f in files {
        b.extend(f.path.bytes().filter(|&c| c != 0));
        b.push(0);
    }
    b
}

/// The notes, in the kernel's order: process, then per thread its status and FPU state, then
/// auxv and files; knot's own last.
fn notes(parts: &CoreParts) -> Vec<u8> {
    let mut out = Vec::new();
    note(&mut out, b"CORE", NT_PRPSINFO, &prpsinfo(&parts.process));
    for t in &parts.threads {
        note(&mut out, b"CORE", NT_PRSTATUS, &prstatus(&parts.process, t));
        if let Some(fp) = &t.fpregs {
            note(&mut out, b"CORE", NT_FPREGSET, fp);
        }
    }
    if !parts.auxv.is_empty() {
        note(&mut out, b"CORE", NT_AUXV, &parts.auxv);
    }
    note(&mut out, b"CORE", NT_FILE, &nt_file(&parts.files));
    note(&mut out, knot_note::OWNER, knot_note::NT_KNOT_THREAD_NAMES, &knot_note::encode_thread_names(parts.names.iter().map(|(t, n)| (*t, n.as_str()))));
    note(&mut out, knot_note::OWNER, knot_note::NT_KNOT_CAPTURE, &parts.capture.encode());
    out
}

/// One `Elf64_Phdr` (its physical address is always 0).
struct Phdr {
    kind: u32,
    flags: u32,
    offset: u64,
    vaddr: u64,
    filesz: u64,
    memsz: u64,
    align: u64,
}

fn phdr(out: &mut Vec<u8>, p: Phdr) {
    out.extend(p.kind.to_le_bytes());
    out.extend(p.flags.to_le_bytes());
    out.extend(p.offset.to_le_bytes());
    out.extend(p.vaddr.to_le_bytes());
    out.extend(0u64.to_le_bytes());
    out.extend(p.filesz.to_le_bytes());
    out.extend(p.memsz.to_le_bytes());
    out.extend(p.align.to_le_bytes());
}

/// The whole core file.
pub(crate) fn build(parts: &CoreParts) -> Vec<u8> {
    let notes = notes(parts);
    let count = 1 + parts.regions.len();
    let xnum = count >= PN_XNUM;
    let phoff = EHDR_SIZE;
    let shoff = phoff + count * PHDR_SIZE;
    let notes_at = shoff + if xnum { SHDR_SIZE } else { 0 };
    let data_at = (notes_at + notes.len()).next_multiple_of(PAGE as usize);
    let total = data_at + parts.regions.iter().map(|r| r.data.len()).sum::<usize>();

    let mut out = Vec::with_capacity(total);
    // The ELF header: 64-bit, little-endian, version 1, ET_CORE, EM_X86_64.
    out.extend(b"\x7fELF\x02\x01\x01");
    out.resize(16, 0);
    out.extend(4u16.to_le_bytes());
    out.extend(62u16.to_le_bytes());
    out.extend(1u32.to_le_bytes());
    out.extend(0u64.to_le_bytes()); // e_entry
    out.extend((phoff as u64).to_le_bytes());
    out.extend((if xnum { shoff as u64 } else { 0 }).to_le_bytes());
    out.extend(0u32.to_le_bytes()); // e_flags
    out.extend((EHDR_SIZE as u16).to_le_bytes());
    out.extend((PHDR_SIZE as u16).to_le_bytes());
    out.extend((if xnum { PN_XNUM } else { count } as u16).to_le_bytes());
    out.extend((SHDR_SIZE as u16).to_le_bytes());
    out.extend((u16::from(xnum)).to_le_bytes()); // e_shnum
    out.extend(0u16.to_le_bytes()); // e_shstrndx

    phdr(&mut out, Phdr { kind: PT_NOTE, flags: 0, offset: notes_at as u64, vaddr: 0, filesz: notes.len() as u64, memsz: 0, align: 4 });
    let mut offset = data_at as u64;
    for r in &parts.regions {
        phdr(&mut out, Phdr { kind: PT_LOAD, flags: r.flags, offset, vaddr: r.vaddr, filesz: r.data.len() as u64, memsz: r.memsz, align: PAGE });
        offset += r.data.len() as u64;
    }
    if xnum {
        // Section header 0 carries the program header count in sh_info (offset 44).
        let at = out.len();
        out.resize(at + SHDR_SIZE, 0);
        out[at + 44..at + 48].copy_from_slice(&(count as u32).to_le_bytes());
    }
    out.extend(&notes);
    out.resize(data_at, 0);
    for r in &parts.regions {
        out.extend(&r.data);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::Core;

    fn regs(rip: u64, rsp: u64) -> [u8; 216] {
        let mut r = [0u8; 216];
        r[16 * 8..17 * 8].copy_from_slice(&rip.to_le_bytes());
        r[19 * 8..20 * 8].copy_from_slice(&rsp.to_le_bytes());
        r[15 * 8..16 * 8].copy_from_slice(&202u64.to_le_bytes());
        r
    }

    fn parts(regions: Vec<Region>) -> CoreParts {
        CoreParts {
            process: ProcessRecord { pid: 41, ppid: 1, state: b'S', comm: "app".into(), args: "./app --serve".into(), ..ProcessRecord::default() },
            threads: vec![
                ThreadRecord { tid: 41, regs: regs(0x401000, 0x7000), fpregs: Some(vec![0; 512]) },
                ThreadRecord { tid: 42, regs: regs(0x401010, 0x7800), fpregs: None },
            ],
            auxv: [6u64, 4096, 0, 0].iter().flat_map(|v| v.to_le_bytes()).collect(),
            files: vec![FileEntry { start: 0x400000, end: 0x402000, offset: 0, path: "/app".into() }],
            names: vec![(41, "app".into()), (42, "worker 1".into())],
            capture: Capture { pid: 41, threads: 2, pause_us: 1500, bytes_copied: 8, bytes_left_out: 0, mappings_left_out: 0 },
            regions,
        }
    }

    #[test]
    fn the_dump_reader_reads_back_every_thread_note_and_byte() {
        let regions = vec![
            Region { vaddr: 0x400000, memsz: 0x2000, flags: 5, data: vec![0x7f, b'E', b'L', b'F'] },
            Region { vaddr: 0x7000, memsz: 0x1000, flags: 6, data: vec![1, 2, 3, 4, 5, 6, 7, 8] },
        ];
        let core = Core::from_bytes("/proc/41", build(&parts(regions))).unwrap();
        assert_eq!(core.threads.iter().map(|t| t.tid).collect::<Vec<_>>(), vec![41, 42]);
        assert_eq!((core.threads[1].registers.pc(), core.threads[1].registers.sp()), (0x401010, 0x7800));
        assert_eq!(core.threads[0].registers.syscall_number(), Some(202));
        assert!(core.threads[0].has_fpregs && !core.threads[1].has_fpregs);
        let p = core.process.as_ref().unwrap();
        assert_eq!((p.pid, p.ppid, p.name.as_str(), p.args.as_str(), p.state), (41, 1, "app", "./app --serve", 'S'));
        assert_eq!(core.auxv.get(6), Some(4096));
        assert_eq!(core.files.as_ref().unwrap()[0].path, "/app");
        assert_eq!(core.thread_names.get(&42).map(String::as_str), Some("worker 1"));
        assert_eq!(core.capture.map(|c| c.pause_us), Some(1500));
        assert_eq!(core.bytes_at(0x7004, 16).unwrap(), &[5, 6, 7, 8]);
        assert_eq!(core.bytes_at(0x400000, 4).unwrap(), b"\x7fELF");
        assert!(core.bytes_at(0x400004, 4).is_err(), "the rest of a module's first mapping is not saved");
        assert!(core.diagnostics.is_empty(), "{:?}", core.diagnostics);
    }

    #[test]
    fn more_than_65534_segments_use_the_extended_count() {
        let regions: Vec<Region> = (0..70_000u64).map(|i| Region { vaddr: 0x10_0000 + i * 0x1000, memsz: 0x1000, flags: 4, data: Vec::new() }).collect();
        let core = Core::from_bytes("/proc/41", build(&parts(regions))).unwrap();
        assert_eq!(core.segments.len(), 70_000);
        assert_eq!(core.threads.len(), 2);
    }
}
