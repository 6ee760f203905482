//! A module's ELF file on disk (the executable, a shared library, or its separate debug file),
//! mapped read-only. Only headers are parsed up front; section bytes are handed out as borrowed
//! slices of the mapping, or decompressed once on first use when the section is SHF_COMPRESSED.

use crate::bytes::Bytes;
use goblin::container::{Container, Ctx, Endian};
use goblin::elf::header::{self, Header};
use goblin::elf::program_header::{self, ProgramHeader};
use goblin::elf::section_header::{self, SectionHeader};
use memmap2::Mmap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

const ELFCOMPRESS_ZLIB: u32 = 1;
const NT_GNU_BUILD_ID: u32 = 3;
/// zlib cannot expand data more than about 1032:1; a larger claim is hostile.
const MAX_INFLATE_RATIO: u64 = 1100;
const MAX_SECTION_SIZE: u64 = 2 << 30;
/// Reserved up front when inflating, at most: the header's size is only a claim, so a larger
/// output grows as the data really decompresses.
const MAX_INFLATE_RESERVE: u64 = 16 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ElfFileError {
    #[error("cannot open {path}: {source}")]
    Open { path: PathBuf, source: std::io::Error },
    #[error("{path} is not an ELF file")]
    NotElf { path: PathBuf },
    #[error("{path}: {reason}")]
    Malformed { path: PathBuf, reason: String },
}

/// One section header, reduced to what knot uses.
#[derive(Debug, Clone)]
pub struct Section {
    pub(crate) name: String,
    pub(crate) kind: u32,
    pub(crate) flags: u64,
    pub(crate) addr: u64,
    pub(crate) offset: u64,
    pub(crate) size: u64,
    pub(crate) link: u32,
    pub(crate) entsize: u64,
}

impl Section {
    pub(crate) fn is_nobits(&self) -> bool {
        self.kind == section_header::SHT_NOBITS
    }
}

/// A mapped ELF file.
pub struct ElfFile {
    path: PathBuf,
    map: Bytes,
    pub program_headers: Vec<ProgramHeader>,
    pub sections: Vec<Section>,
    /// Each compressed section, inflated on first use (or mapped from the cache).
    inflated: Vec<OnceLock<Option<super::section_cache::SectionBytes>>>,
    pub build_id: Option<Vec<u8>>,
    /// Where inflated sections are kept between runs (`--cache-dir`), if anywhere.
    cache: Option<Arc<super::section_cache::SectionCache>>,
    /// Which file this is on disk, to key its cached sections by; `None` for an image in memory
    /// and for a file changed too recently to be recognised by it.
    identity: Option<super::section_cache::FileIdentity>,
}

impl std::fmt::Debug for ElfFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElfFile").field("path", &self.path).field("sections", &self.sections.len()).finish()
    }
}

impl ElfFile {
    pub fn open(path: impl AsRef<Path>) -> Result<ElfFile, ElfFileError> {
        let path = path.as_ref().to_path_buf();
        let (file, meta) = crate::open::open_regular_with_metadata(&path).map_err(|source| ElfFileError::Open { path: path.clone(), source })?;
        // SAFETY: read-only private mapping of a file knot never writes; see Core::open.
        let map = unsafe { Mmap::map(&file) }.map_err(|source| ElfFileError::Open { path: path.clone(), source })?;
        let mut elf = ElfFile::parse(path, Bytes::mapped(map))?;
        elf.identity = super::section_cache::FileIdentity::settled(&meta, std::time::SystemTime::now());
        Ok(elf)
    }

    /// An ELF image held in memory, e.g. copied out of the dump; `name` stands in for its path.
    pub fn from_bytes(name: impl Into<PathBuf>, bytes: Vec<u8>) -> Result<ElfFile, ElfFileError> {
        ElfFile::parse(name.into(), Bytes::Owned(bytes.into_boxed_slice()))
    }

    fn parse(path: PathBuf, map: Bytes) -> Result<ElfFile, ElfFileError> {
        let bytes: &[u8] = &map;
        if bytes.len() < header::header64::SIZEOF_EHDR || &bytes[..4] != b"\x7fELF" {
            return Err(ElfFileError::NotElf { path });
        }
        let bad = |reason: String| ElfFileError::Malformed { path: path.clone(), reason };
        let hdr: Header = goblin::elf::Elf::parse_header(bytes).map_err(|e| bad(format!("ELF header: {e}")))?;
        if hdr.e_ident[header::EI_CLASS] != header::ELFCLASS64 || hdr.e_ident[header::EI_DATA] != header::ELFDATA2LSB {
            return Err(bad("not a 64-bit little-endian ELF file".into()));
        }
        let ctx = Ctx::new(Container::Big, Endian::Little);
        let table = |off: u64, count: u64, entsize: u64, what: &str| -> Result<(), ElfFileError> {
            match count.checked_mul(entsize).and_then(|n| n.checked_add(off)) {
                Some(end) if end <= bytes.len() as u64 => Ok(()),
                _ => Err(bad(format!("{what} table at {off:#x} ({count} entries) runs past the end of the file"))),
            }
        };
        table(hdr.e_phoff, hdr.e_phnum as u64, program_header::program_header64::SIZEOF_PHDR as u64, "program header")?;
        let program_headers = ProgramHeader::parse(bytes, hdr.e_phoff as usize, hdr.e_phnum as usize, ctx)
            .map_err(|e| bad(format!("program headers: {e}")))?;
        let shnum = if hdr.e_shoff == 0 { 0 } else { hdr.e_shnum as u64 };
        table(hdr.e_shoff, shnum, section_header::section_header64::SIZEOF_SHDR as u64, "section header")?;
        let raw = if shnum == 0 {
            Vec::new()
        } else {
            SectionHeader::parse(bytes, hdr.e_shoff as usize, shnum as usize, ctx).map_err(|e| bad(format!("section headers: {e}")))?
        };
        let names = raw.get(hdr.e_shstrndx as usize).and_then(|s| file_range(bytes, s.sh_offset, s.sh_size));
        let sections: Vec<Section> = raw
            .iter()
            .map(|s| Section {
                name: names.map(|n| c_str_at(n, s.sh_name)).unwrap_or_default(),
                kind: s.sh_type,
                flags: s.sh_flags,
                addr: s.sh_addr,
                offset: s.sh_offset,
                size: s.sh_size,
                link: s.sh_link,
                entsize: s.sh_entsize,
            })
            .collect();
        let inflated = sections.iter().map(|_| OnceLock::new()).collect();
        let mut file = ElfFile { path, map, program_headers, sections, inflated, build_id: None, cache: None, identity: None };
        file.build_id = file.find_build_id();
        Ok(file)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.map
    }

    pub(crate) fn section_by_name(&self, name: &str) -> Option<(usize, &Section)> {
        self.sections.iter().enumerate().find(|(_, s)| s.name == name)
    }

    /// The contents of section `index`, decompressed if needed. `None` for NOBITS sections,
    /// ranges outside the file and data that fails to decompress.
    pub fn section_data(&self, index: usize) -> Option<&[u8]> {
        let s = self.sections.get(index)?;
        if s.is_nobits() {
            return None;
        }
        let raw = file_range(&self.map, s.offset, s.size)?;
        if s.flags & section_header::SHF_COMPRESSED as u64 == 0 {
            return Some(raw);
        }
        self.inflated.get(index)?.get_or_init(|| self.inflate_section(s, raw)).as_deref()
    }

    /// Keeps this file's inflated sections in `cache` (read from it first).
    pub fn set_section_cache(&mut self, cache: Option<Arc<super::section_cache::SectionCache>>) {
        self.cache = cache;
    }

    /// Stands this image in for a settled file on disk, so its sections go through the cache.
    #[cfg(test)]
    pub(crate) fn set_identity(&mut self, identity: super::section_cache::FileIdentity) {
        self.identity = Some(identity);
    }

    /// A compressed section's bytes: from the cache when it holds them, else inflated (and
    /// stored there).
    fn inflate_section(&self, s: &Section, raw: &[u8]) -> Option<super::section_cache::SectionBytes> {
        let key = match (&self.cache, &self.build_id, self.identity, declared_size(raw)) {
            (Some(cache), Some(id), Some(file), Some(size)) => {
                let key = super::section_cache::Key { build_id: id, section: &s.name, file, offset: s.offset, compressed_size: s.size, size };
                Some((cache, key))
            }
            _ => None,
        };
        if let Some((cache, key)) = &key
            && let Some(hit) = cache.get(key)
        {
            return Some(hit);
        }
        let data = inflate(raw)?;
        if let Some((cache, key)) = &key {
            cache.put(key, raw, &data);
        }
        Some(super::section_cache::SectionBytes::inflated(data))
    }

    /// What the cache holds for `what`, built by format `version` from this file's debug
    /// sections, at most `max_len` bytes; `None` without a cache or a settled identity (see
    /// [`FileIdentity::settled`](super::section_cache::FileIdentity::settled)).
    pub(crate) fn cached_derived(&self, what: &str, version: u64, max_len: u64) -> Option<super::section_cache::SectionBytes> {
        let (cache, key) = self.derived_key(what, version)?;
        cache.get_derived(&key, max_len)
    }

    /// Keeps what `build` gives for later runs' [`ElfFile::cached_derived`]; `build` is not
    /// called when there is nowhere to keep it.
    pub(crate) fn store_derived(&self, what: &str, version: u64, build: impl FnOnce() -> Vec<u8>) {
        if let Some((cache, key)) = self.derived_key(what, version) {
            cache.put_derived(&key, &build());
        }
    }

    fn derived_key<'s>(&'s self, what: &'s str, version: u64) -> Option<(&'s super::section_cache::SectionCache, super::section_cache::DerivedKey<'s>)> {
        let (cache, build_id, file) = (self.cache.as_deref()?, self.build_id.as_deref()?, self.identity?);
        // The debug sections' headers: the file's identity already stands for its bytes; this
        // ties the entry to the sections it was built from as well.
        let mut headers = Vec::new();
        for s in self.sections.iter().filter(|s| s.name.starts_with(".debug_")) {
            headers.extend(s.name.as_bytes());
            headers.push(0);
            for v in [s.offset, s.size, s.flags] {
                headers.extend(v.to_le_bytes());
            }
        }
        let sections = twox_hash::XxHash3_64::oneshot(&headers);
        Some((cache, super::section_cache::DerivedKey { build_id, what, version, sections, file }))
    }

    /// Section data by name.
    pub fn section(&self, name: &str) -> Option<&[u8]> {
        let (i, _) = self.section_by_name(name)?;
        self.section_data(i)
    }

    /// The link-time address of the first loadable byte (p_vaddr of the PT_LOAD at file offset 0).
    pub fn first_load_vaddr(&self) -> Option<u64> {
        self.program_headers
            .iter()
            .filter(|p| p.p_type == program_header::PT_LOAD)
            .min_by_key(|p| p.p_offset)
            .map(|p| p.p_vaddr.wrapping_sub(p.p_offset))
    }

    /// Bytes at file offset `offset`.
    pub fn bytes_at_offset(&self, offset: u64, len: u64) -> Option<&[u8]> {
        file_range(&self.map, offset, len)
    }

    /// The file offset of link-time address `vaddr`, from the PT_LOAD that maps it, with the
    /// number of file bytes that follow in that segment.
    pub fn offset_of_vaddr(&self, vaddr: u64) -> Option<(u64, u64)> {
        self.program_headers.iter().filter(|p| p.p_type == program_header::PT_LOAD).find_map(|p| {
            let delta = vaddr.checked_sub(p.p_vaddr)?;
            if delta >= p.p_filesz {
                return None;
            }
            Some((p.p_offset.checked_add(delta)?, p.p_filesz - delta))
        })
    }

    /// `.gnu_debuglink`: the debug file's name and the CRC32 of its contents.
    pub fn debuglink(&self) -> Option<(String, u32)> {
        let data = self.section(".gnu_debuglink")?;
        let end = data.iter().position(|&b| b == 0)?;
        let name = std::str::from_utf8(&data[..end]).ok()?.to_string();
        let crc_at = (end + 4) & !3;
        let crc = data.get(crc_at..crc_at + 4)?;
        Some((name, u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]])))
    }

    pub(crate) fn crc32(&self) -> u32 {
        crc32fast::hash(&self.map)
    }

    fn find_build_id(&self) -> Option<Vec<u8>> {
        let from_segments = self
            .program_headers
            .iter()
            .filter(|p| p.p_type == program_header::PT_NOTE)
            .filter_map(|p| file_range(&self.map, p.p_offset, p.p_filesz));
        let from_sections = self
            .sections
            .iter()
            .filter(|s| s.kind == section_header::SHT_NOTE)
            .filter_map(|s| file_range(&self.map, s.offset, s.size));
        from_segments.chain(from_sections).find_map(build_id_in_notes)
    }
}

/// The GNU build-id in a run of ELF notes.
pub(crate) fn build_id_in_notes(data: &[u8]) -> Option<Vec<u8>> {
    crate::core::notes::Notes::new(data, 0)
        .find(|n| n.kind == NT_GNU_BUILD_ID && n.owner() == b"GNU")
        .map(|n| n.desc.to_vec())
}

fn file_range(bytes: &[u8], offset: u64, len: u64) -> Option<&[u8]> {
    let end = offset.checked_add(len)?;
    bytes.get(usize::try_from(offset).ok()?..usize::try_from(end).ok()?)
}

fn c_str_at(table: &[u8], at: usize) -> String {
    let Some(rest) = table.get(at..) else { return String::new() };
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    String::from_utf8_lossy(&rest[..end]).into_owned()
}

/// The inflated size an SHF_COMPRESSED section's header declares.
fn declared_size(raw: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(raw.get(8..16)?.try_into().ok()?))
}

/// Decompresses an SHF_COMPRESSED section (Elf64_Chdr, then a zlib stream).
///
/// In one call into a buffer of the declared size: zlib then writes straight into it, with no
/// intermediate chunks and no copy of the output into its sliding window.
fn inflate(raw: &[u8]) -> Option<Box<[u8]>> {
    let ch_type = u32::from_le_bytes(raw.get(0..4)?.try_into().ok()?);
    let ch_size = u64::from_le_bytes(raw.get(8..16)?.try_into().ok()?);
    let body = raw.get(24..)?;
    if ch_type != ELFCOMPRESS_ZLIB || ch_size > MAX_SECTION_SIZE || ch_size > (body.len() as u64).saturating_mul(MAX_INFLATE_RATIO) {
        return None;
    }
    let size = usize::try_from(ch_size).ok()?;
    let mut out = Vec::new();
    // Reserved up to the bound first, then grown only as the data really decompresses: the
    // header's size is only a claim.
    out.try_reserve_exact(size.min(MAX_INFLATE_RESERVE as usize)).ok()?;
    let mut z = flate2::Decompress::new(true);
    loop {
        let before = z.total_in();
        let consumed = usize::try_from(before).ok()?;
        let status = z.decompress_vec(body.get(consumed..)?, &mut out, flate2::FlushDecompress::Finish).ok()?;
        match status {
            flate2::Status::StreamEnd => break,
            // Output full: grow toward the declared size (more than that is an error).
            _ if out.len() == out.capacity() && out.len() < size => {
                let more = (size - out.len()).min(out.len().max(1 << 20));
                out.try_reserve_exact(more).ok()?;
            }
            _ if z.total_in() == before => return None,
            _ => {}
        }
    }
    (out.len() == size).then(|| out.into_boxed_slice())
}

/// Formats a build-id as gdb and `file` print it.
pub(crate) fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// An SHF_COMPRESSED section's bytes: Elf64_Chdr declaring `declared` bytes, then `data`
    /// deflated by zlib.
    fn compressed(data: &[u8], declared: u64) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&ELFCOMPRESS_ZLIB.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&declared.to_le_bytes());
        out.extend_from_slice(&1u64.to_le_bytes());
        let mut z = flate2::write::ZlibEncoder::new(out, flate2::Compression::fast());
        z.write_all(data).expect("deflate");
        z.finish().expect("deflate")
    }

    #[test]
    fn sections_inflate_whole_and_only_as_declared() {
        // Past the up-front reservation, so the output grows while inflating.
        let big: Vec<u8> = (0..(MAX_INFLATE_RESERVE as usize + 300_001)).map(|i| (i % 251) as u8 ^ (i >> 12) as u8).collect();
        assert_eq!(inflate(&compressed(&big, big.len() as u64)).as_deref(), Some(&big[..]));
        let small = b"a .debug_line of a few bytes".repeat(5);
        assert_eq!(inflate(&compressed(&small, small.len() as u64)).as_deref(), Some(&small[..]));
        // A size claimed too large, or too small, is refused; so is a stream cut short.
        assert_eq!(inflate(&compressed(&small, small.len() as u64 + 1)), None);
        assert_eq!(inflate(&compressed(&small, small.len() as u64 - 1)), None);
        assert_eq!(inflate(&compressed(&big, big.len() as u64 - 1)), None);
        let whole = compressed(&small, small.len() as u64);
        assert_eq!(inflate(&whole[..whole.len() - 10]), None);
        // A claim beyond what zlib can expand the stream to is not even tried.
        assert_eq!(inflate(&compressed(&small, 1 << 40)), None);
        // An empty section.
        assert_eq!(inflate(&compressed(&[], 0)).as_deref(), Some(&[][..]));
    }
}
