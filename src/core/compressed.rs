//! Compressed cores (`core.gz`, `core.zst`), as dumps are often shipped: streamed into an
//! unlinked temporary file, then mapped like any core. Memory use stays that of a buffer.
//!
//! What is written is bounded by the core itself: its ELF header must say ET_CORE (checked on
//! the first block), and once its program headers are out, the file size they need
//! (`max(p_offset + p_filesz)`) ends the copy; a stream that goes on is cut there. An upper
//! bound given by the user ([`DEFAULT_MAX_DECOMPRESSED`] unless told) ends it too.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// The most bytes a compressed core may decompress to unless the user says otherwise: far above
/// any core knot is asked to read in one go, far below filling a disk by mistake.
pub const DEFAULT_MAX_DECOMPRESSED: u64 = 64 << 30;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Compression {
    Gzip,
    Zstd,
    Xz,
}

impl Compression {
    pub(crate) fn detect(magic: &[u8]) -> Option<Compression> {
        match magic {
            [0x1f, 0x8b, ..] => Some(Compression::Gzip),
            [0x28, 0xb5, 0x2f, 0xfd, ..] => Some(Compression::Zstd),
            [0xfd, b'7', b'z', b'X', b'Z', 0, ..] => Some(Compression::Xz),
            _ => None,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
            Compression::Xz => "xz",
        }
    }
}

/// What decompression produced.
pub(crate) struct Decompressed {
    pub(crate) file: File,
    pub(crate) size: u64,
    /// The stream broke off (a truncated download, say) after `size` good bytes: the core is
    /// read as a truncated one, and this says why.
    pub(crate) cut_off: Option<String>,
    /// The stream went on past the end the core's program headers declare: bytes past it were
    /// not written (the count is at least this; the rest of the stream was not read).
    pub(crate) past_end: Option<u64>,
}

/// Why decompression failed: the stream itself, or the temporary file it is written to (a full
/// `$TMPDIR` is the user's to fix, not a corrupt dump, so the two are told apart).
#[derive(Debug)]
pub(crate) enum DecompressError {
    Stream(io::Error),
    TempFile { written: u64, source: io::Error },
    /// The core declares (or the stream reaches) more than the limit.
    TooBig { declared: Option<u64>, limit: u64 },
}

impl From<io::Error> for DecompressError {
    fn from(e: io::Error) -> Self {
        DecompressError::Stream(e)
    }
}

/// Decompresses `path` into an anonymous temporary file. The output must start like an ELF file:
/// anything else is refused after the first block, before it can fill the disk.
pub(crate) fn decompress(path: &Path, kind: Compression, limit: u64) -> Result<Decompressed, DecompressError> {
    let input = io::BufReader::with_capacity(1 << 20, File::open(path)?);
    let mut out = tempfile::tempfile().map_err(|source| DecompressError::TempFile { written: 0, source })?;
    let (size, cut_off, past_end) = match kind {
        Compression::Gzip => copy(flate2::read::MultiGzDecoder::new(input), &mut out, limit)?,
        Compression::Zstd => {
            let decoder = ruzstd::decoding::StreamingDecoder::new(input).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
            copy(decoder, &mut out, limit)?
        }
        Compression::Xz => {
            return Err(DecompressError::Stream(io::Error::new(io::ErrorKind::Unsupported, "xz-compressed cores are not supported; decompress with `xz -d` first")));
        }
    };
    out.flush().map_err(|source| DecompressError::TempFile { written: size, source })?;
    Ok(Decompressed { file: out, size, cut_off, past_end })
}

const ET_CORE: u16 = 4;
const EHDR: usize = 64;
const PHDR: u64 = 56;
const PN_XNUM: u16 = 0xffff;

/// The first bytes must be a 64-bit little-endian ELF core's header: anything else is refused
/// before more than one block is written. Returns where the program headers are.
fn core_header(head: &[u8]) -> Result<Option<(u64, u64)>, DecompressError> {
    let invalid = |why: String| DecompressError::Stream(io::Error::new(io::ErrorKind::InvalidData, why));
    if head.len() < 4 || &head[..4] != b"\x7fELF" {
        return Err(invalid("the decompressed data is not an ELF file".into()));
    }
    if head.len() < EHDR {
        return Ok(None);
    }
    let e_type = u16::from_le_bytes([head[16], head[17]]);
    if head[4] != 2 || head[5] != 1 || e_type != ET_CORE {
        return Err(invalid(format!("the decompressed data is an ELF file but not a 64-bit little-endian core (class {}, data {}, e_type {e_type})", head[4], head[5])));
    }
    let phoff = crate::bytes::u64_at(head, 32).unwrap_or(0);
    let phnum = crate::bytes::u16_at(head, 56).unwrap_or(0);
    // With PN_XNUM the count is in a section header: the size stays bounded by the limit only.
    Ok((phnum != PN_XNUM).then_some((phoff, u64::from(phnum))))
}

/// Where the section headers end (gcore writes some after the segments), 0 without any.
fn section_headers_end(head: &[u8]) -> u64 {
    let shoff = crate::bytes::u64_at(head, 40).unwrap_or(0);
    let shentsize = u64::from(crate::bytes::u16_at(head, 58).unwrap_or(0));
    let shnum = u64::from(crate::bytes::u16_at(head, 60).unwrap_or(0)).max(1);
    if shoff == 0 { 0 } else { shoff.saturating_add(shnum.saturating_mul(shentsize)) }
}

/// The file size the program headers need: the end of the furthest segment (and of the
/// headers themselves).
fn declared_size(out: &File, phoff: u64, phnum: u64) -> io::Result<u64> {
    let mut table = vec![0u8; (phnum * PHDR) as usize];
    out.read_exact_at(&mut table, phoff)?;
    let ends = table.chunks_exact(PHDR as usize).map(|p| {
        let offset = crate::bytes::u64_at(p, 8).unwrap_or(0);
        let filesz = crate::bytes::u64_at(p, 32).unwrap_or(0);
        offset.saturating_add(filesz)
    });
    Ok(ends.fold(phoff.saturating_add(phnum * PHDR), u64::max))
}

/// Copies until the end of the stream, or until it breaks after some output (then the error is
/// returned as text beside the byte count), or until the end the core's program headers
/// declare (then the third value is how many more bytes the stream had in the last block).
fn copy(mut from: impl Read, to: &mut File, limit: u64) -> Result<(u64, Option<String>, Option<u64>), DecompressError> {
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    let mut head: Vec<u8> = Vec::with_capacity(EHDR);
    // Where the program headers are, once the ELF header is out; then the declared size.
    let mut table: Option<(u64, u64)> = None;
    let mut declared: Option<u64> = None;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok((total, None, None)),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if total >= 64 => return Ok((total, Some(e.to_string()), None)),
            Err(e) => return Err(DecompressError::Stream(e)),
        };
        if head.len() < EHDR {
            let take = (EHDR - head.len()).min(n);
            head.extend_from_slice(&buf[..take]);
            table = core_header(&head)?;
        }
        let end = declared.unwrap_or(limit).min(limit);
        let room = end.saturating_sub(total);
        let write = (n as u64).min(room) as usize;
        to.write_all(&buf[..write]).map_err(|source| DecompressError::TempFile { written: total, source })?;
        total += write as u64;
        if write < n {
            return match declared {
                Some(d) if d <= limit => Ok((total, None, Some((n - write) as u64))),
                _ => Err(DecompressError::TooBig { declared, limit }),
            };
        }
        if declared.is_none()
            && let Some((phoff, phnum)) = table
            && phoff.saturating_add(phnum * PHDR) <= total
        {
            let d = declared_size(to, phoff, phnum).map_err(|source| DecompressError::TempFile { written: total, source })?.max(section_headers_end(&head));
            if d > limit {
                return Err(DecompressError::TooBig { declared: Some(d), limit });
            }
            declared = Some(d);
            if total > d {
                to.set_len(d).map_err(|source| DecompressError::TempFile { written: total, source })?;
                return Ok((d, None, Some(total - d)));
            }
        }
    }
}
