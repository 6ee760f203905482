//! Compressed cores (`core.gz`, `core.zst`), as dumps are often shipped: streamed into an
//! unlinked temporary file, then mapped like any core. Memory use stays that of a buffer.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    Gzip,
    Zstd,
    Xz,
}

impl Compression {
    pub fn detect(magic: &[u8]) -> Option<Compression> {
        match magic {
            [0x1f, 0x8b, ..] => Some(Compression::Gzip),
            [0x28, 0xb5, 0x2f, 0xfd, ..] => Some(Compression::Zstd),
            [0xfd, b'7', b'z', b'X', b'Z', 0, ..] => Some(Compression::Xz),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
            Compression::Xz => "xz",
        }
    }
}

/// Decompresses `path` into an anonymous temporary file and returns it, rewound, with its size.
pub fn decompress(path: &Path, kind: Compression) -> io::Result<(File, u64)> {
    let input = io::BufReader::with_capacity(1 << 20, File::open(path)?);
    let mut out = tempfile::tempfile()?;
    let written = match kind {
        Compression::Gzip => copy(flate2::read::MultiGzDecoder::new(input), &mut out)?,
        Compression::Zstd => {
            let decoder = ruzstd::decoding::StreamingDecoder::new(input).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
            copy(decoder, &mut out)?
        }
        Compression::Xz => {
            return Err(io::Error::new(io::ErrorKind::Unsupported, "xz-compressed cores are not supported; decompress with `xz -d` first"));
        }
    };
    out.flush()?;
    Ok((out, written))
}

fn copy(mut from: impl Read, to: &mut File) -> io::Result<u64> {
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
        total += n as u64;
    }
}
