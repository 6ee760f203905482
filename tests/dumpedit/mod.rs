//! Reading and editing the raw bytes of an x86_64 ELF core, for tests that make a bad core out
//! of a good one: where the program headers and notes are, and small edits (a header field, a
//! note, a thread's register, process memory) that leave everything else as it was.
#![allow(dead_code)]

pub const EHDR_SIZE: usize = 64;
pub const PHDR_SIZE: usize = 56;
pub const SHDR_SIZE: usize = 64;

pub const E_TYPE: usize = 16;
pub const E_MACHINE: usize = 18;
pub const E_PHOFF: usize = 32;
pub const E_SHOFF: usize = 40;
pub const E_PHNUM: usize = 56;

pub const PT_LOAD: u32 = 1;
pub const PT_NOTE: u32 = 4;
pub const PF_X: u32 = 1;

pub const NT_PRSTATUS: u32 = 1;
pub const NT_AUXV: u32 = 6;
pub const NT_FILE: u32 = 0x4649_4c45;

/// `pr_reg` in NT_PRSTATUS, and the index of some registers in `user_regs_struct`.
pub const PR_REG: usize = 112;
pub const REG_RBP: usize = 4;
pub const REG_RIP: usize = 16;
pub const REG_RSP: usize = 19;

pub const AT_PHDR: u64 = 3;
pub const AT_PHNUM: u64 = 5;
pub const AT_SYSINFO_EHDR: u64 = 33;

pub fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}

pub fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

pub fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

pub fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

pub fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

pub fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// One program header, with `at`: where the header itself lies in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phdr {
    pub index: usize,
    pub at: usize,
    pub kind: u32,
    pub flags: u32,
    pub offset: u64,
    pub vaddr: u64,
    pub filesz: u64,
    pub memsz: u64,
}

impl Phdr {
    pub const P_OFFSET: usize = 8;
    pub const P_VADDR: usize = 16;
    pub const P_FILESZ: usize = 32;
    pub const P_MEMSZ: usize = 40;

    pub fn contains(&self, vaddr: u64) -> bool {
        vaddr >= self.vaddr && vaddr - self.vaddr < self.memsz
    }

    /// The file offset of `vaddr`, which this segment must hold in the file.
    pub fn file_offset(&self, vaddr: u64) -> usize {
        assert!(vaddr >= self.vaddr && vaddr - self.vaddr < self.filesz, "{vaddr:#x} is not in the file part of {self:x?}");
        (self.offset + (vaddr - self.vaddr)) as usize
    }

    pub fn end_offset(&self) -> usize {
        (self.offset + self.filesz) as usize
    }
}

pub fn phdrs(core: &[u8]) -> Vec<Phdr> {
    let phoff = u64_at(core, E_PHOFF) as usize;
    let phnum = u16_at(core, E_PHNUM) as usize;
    (0..phnum)
        .map(|index| {
            let at = phoff + index * PHDR_SIZE;
            Phdr {
                index,
                at,
                kind: u32_at(core, at),
                flags: u32_at(core, at + 4),
                offset: u64_at(core, at + Phdr::P_OFFSET),
                vaddr: u64_at(core, at + Phdr::P_VADDR),
                filesz: u64_at(core, at + Phdr::P_FILESZ),
                memsz: u64_at(core, at + Phdr::P_MEMSZ),
            }
        })
        .collect()
}

/// The core with a new program header table (the old headers, then `extra`) at the end.
pub fn with_extra_phdrs(bytes: &[u8], extra: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    out.resize((out.len() + 7) & !7, 0);
    let table = out.len();
    let old = phdrs(bytes);
    out.extend_from_slice(&bytes[old[0].at..old[0].at + old.len() * PHDR_SIZE]);
    out.extend_from_slice(extra);
    put_u64(&mut out, E_PHOFF, table as u64);
    put_u16(&mut out, E_PHNUM, (old.len() + extra.len() / PHDR_SIZE) as u16);
    out
}


pub fn note_segment(core: &[u8]) -> Phdr {
    phdrs(core).into_iter().find(|p| p.kind == PT_NOTE).expect("the seed has a PT_NOTE")
}

/// The PT_LOAD holding `vaddr`.
pub fn load_holding(core: &[u8], vaddr: u64) -> Phdr {
    phdrs(core).into_iter().find(|p| p.kind == PT_LOAD && p.contains(vaddr)).unwrap_or_else(|| panic!("no PT_LOAD holds {vaddr:#x}"))
}

pub fn loads(core: &[u8]) -> Vec<Phdr> {
    phdrs(core).into_iter().filter(|p| p.kind == PT_LOAD).collect()
}

/// Writes `bytes` at process address `vaddr` (which the core must hold in its file).
pub fn poke(core: &mut [u8], vaddr: u64, bytes: &[u8]) {
    let at = load_holding(core, vaddr).file_offset(vaddr);
    core[at..at + bytes.len()].copy_from_slice(bytes);
}

pub fn poke_u64(core: &mut [u8], vaddr: u64, v: u64) {
    poke(core, vaddr, &v.to_le_bytes());
}

pub fn peek_u64(core: &[u8], vaddr: u64) -> u64 {
    u64_at(core, load_holding(core, vaddr).file_offset(vaddr))
}

/// One note as it lies in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawNote {
    /// File offset of the note's header.
    pub at: usize,
    pub name: Vec<u8>,
    pub kind: u32,
    /// File offset of the descriptor.
    pub desc_at: usize,
    pub desc: Vec<u8>,
}

impl RawNote {
    pub const DESCSZ: usize = 4;
    pub const TYPE: usize = 8;

    pub fn owner(&self) -> &[u8] {
        self.name.strip_suffix(&[0]).unwrap_or(&self.name)
    }
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// The notes of the first PT_NOTE, in file order.
pub fn notes(core: &[u8]) -> Vec<RawNote> {
    let seg = note_segment(core);
    let (mut pos, end) = (seg.offset as usize, seg.end_offset());
    let mut out = Vec::new();
    while pos + 12 <= end {
        let (namesz, descsz, kind) = (u32_at(core, pos) as usize, u32_at(core, pos + 4) as usize, u32_at(core, pos + 8));
        let name_at = pos + 12;
        let desc_at = name_at + align4(namesz);
        out.push(RawNote { at: pos, name: core[name_at..name_at + namesz].to_vec(), kind, desc_at, desc: core[desc_at..desc_at + descsz].to_vec() });
        pos = desc_at + align4(descsz);
    }
    out
}

pub fn notes_of_kind(core: &[u8], kind: u32) -> Vec<RawNote> {
    notes(core).into_iter().filter(|n| n.kind == kind && (n.owner() == b"CORE" || n.owner() == b"LINUX")).collect()
}

pub fn encode_note(name: &[u8], kind: u32, desc: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(12 + align4(name.len()) + align4(desc.len()));
    v.extend((name.len() as u32).to_le_bytes());
    v.extend((desc.len() as u32).to_le_bytes());
    v.extend(kind.to_le_bytes());
    v.extend(name);
    v.resize(align4(v.len()), 0);
    v.extend(desc);
    v.resize(align4(v.len()), 0);
    v
}

/// The core with its notes replaced by `notes` (name, type, descriptor): they are appended at
/// the end of the file and the PT_NOTE header points at them; the old notes stay as dead bytes.
pub fn with_notes(core: &[u8], notes: &[(Vec<u8>, u32, Vec<u8>)]) -> Vec<u8> {
    let mut out = core.to_vec();
    out.resize(align4(out.len()), 0);
    let start = out.len();
    for (name, kind, desc) in notes {
        out.extend(encode_note(name, kind.to_owned(), desc));
    }
    let seg = note_segment(core);
    put_u64(&mut out, seg.at + Phdr::P_OFFSET, start as u64);
    let size = (out.len() - start) as u64;
    put_u64(&mut out, seg.at + Phdr::P_FILESZ, size);
    out
}

/// The core's notes as (name, type, descriptor), for editing and [`with_notes`].
pub fn note_list(core: &[u8]) -> Vec<(Vec<u8>, u32, Vec<u8>)> {
    notes(core).into_iter().map(|n| (n.name, n.kind, n.desc)).collect()
}

/// NT_FILE's descriptor for `entries` (start, end, offset in pages, path).
pub fn encode_nt_file(entries: &[(u64, u64, u64, &str)]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend((entries.len() as u64).to_le_bytes());
    v.extend(4096u64.to_le_bytes());
    for (start, end, pages, _) in entries {
        v.extend(start.to_le_bytes());
        v.extend(end.to_le_bytes());
        v.extend(pages.to_le_bytes());
    }
    for (.., path) in entries {
        v.extend(path.as_bytes());
        v.push(0);
    }
    v
}

/// The `n`th NT_PRSTATUS note (thread `n` in core order).
pub fn prstatus(core: &[u8], n: usize) -> RawNote {
    notes_of_kind(core, NT_PRSTATUS).into_iter().nth(n).unwrap_or_else(|| panic!("no NT_PRSTATUS #{n}"))
}

/// File offset of register `reg` (an index in `user_regs_struct`) of thread `n`.
pub fn register_offset(core: &[u8], n: usize, reg: usize) -> usize {
    prstatus(core, n).desc_at + PR_REG + reg * 8
}

pub fn register(core: &[u8], n: usize, reg: usize) -> u64 {
    u64_at(core, register_offset(core, n, reg))
}

pub fn set_register(core: &mut [u8], n: usize, reg: usize, value: u64) {
    let at = register_offset(core, n, reg);
    put_u64(core, at, value);
}

/// A value of the auxiliary vector and the file offset where it is stored.
pub fn auxv_entry(core: &[u8], key: u64) -> Option<(usize, u64)> {
    let auxv = notes_of_kind(core, NT_AUXV).into_iter().next()?;
    auxv.desc.chunks_exact(16).enumerate().find(|(_, e)| u64_at(e, 0) == key).map(|(i, e)| (auxv.desc_at + i * 16 + 8, u64_at(e, 8)))
}

/// A small deterministic generator (xorshift64*), for reproducible garbage.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}
