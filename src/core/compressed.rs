//! Compressed cores (`core.gz`, `core.zst`), as dumps are often shipped: streamed into an
//! unlinked temporary file, then mapped like any core. Memory use stays that of a buffer.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::Path;

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
}

/// Why decompression failed: the stream itself, or the temporary file it is written to (a full
/// `$TMPDIR` is the user's to fix, not a corrupt dump, so the two are told apart).
#[derive(Debug)]
pub(crate) enum DecompressError {
    Stream(io::Error),
    TempFile { written: u64, source: io::Error },
}

impl From<io::Error> for DecompressError {
    fn from(e: io::Error) -> Self {
        DecompressError::Stream(e)
    }
}

/// Decompresses `path` into an anonymous temporary file. The output must start like an ELF file:
/// anything else is refused after the first block, before it can fill the disk.
pub(crate) fn decompress(path: &Path, kind: Compression) -> Result<Decompressed, DecompressError> {
    let input = io::BufReader::with_capacity(1 << 20, File::open(path)?);
    let mut out = tempfile::tempfile().map_err(|source| DecompressError::TempFile { written: 0, source })?;
    let (size, cut_off) = match kind {
        Compression::Gzip => copy(flate2::read::MultiGzDecoder::new(input), &mut out)?,
        Compression::Zstd => {
            let decoder = ruzstd::decoding::StreamingDecoder::new(input).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
            copy(decoder, &mut out)?
        }
        Compression::Xz => {
            return Err(DecompressError::Stream(io::Error::new(io::ErrorKind::Unsupported, "xz-compressed cores are not supported; decompress with `xz -d` first")));
        }
    };
    out.flush().map_err(|source| DecompressError::TempFile { written: size, source })?;
    Ok(Decompressed { file: out, size, cut_off })
}

/// Copies until the end of the stream, or until it breaks after some output (then the error is
/// returned as text beside the byte count).
fn copy(mut from: impl Read, to: &mut File) -> Result<(u64, Option<String>), DecompressError> {
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok((total, None)),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if total >= 64 => return Ok((total, Some(e.to_string()))),
            Err(e) => return Err(DecompressError::Stream(e)),
        };
        if total == 0 && (n < 4 || &buf[..4] != b"\x7fELF") {
            return Err(DecompressError::Stream(io::Error::new(io::ErrorKind::InvalidData, "the decompressed data is not an ELF file")));
        }
        to.write_all(&buf[..n]).map_err(|source| DecompressError::TempFile { written: total, source })?;
        total += n as u64;
    }
}
