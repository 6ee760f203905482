use std::path::PathBuf;

/// Why a core file could not be read at all. Problems that leave a partial reading possible are
/// [`crate::Diagnostic`]s instead.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    #[error("cannot open {path}")]
    Open { path: PathBuf, source: std::io::Error },
    #[error("{path}: cannot decompress the {kind} stream")]
    Decompress { path: PathBuf, kind: &'static str, source: std::io::Error },
    #[error("{path}: cannot write the decompressed core into a temporary file in {dir} after {written} bytes (free space there, or point TMPDIR elsewhere, or decompress it yourself)")]
    DecompressSpace { path: PathBuf, dir: PathBuf, written: u64, source: std::io::Error },
    #[error("{path}: the decompressed core {} more than the limit of {limit} bytes (--max-decompressed-mib)", match .declared { Some(d) => format!("declares {d} bytes,"), None => "runs to".to_string() })]
    DecompressTooBig { path: PathBuf, declared: Option<u64>, limit: u64 },
    #[error("{path} shrank while knot read it (truncated by another process?); read it again once it is complete")]
    ChangedWhileRead { path: PathBuf },
    #[error("{path} is a directory; give the path of a core file")]
    IsDirectory { path: PathBuf },
    #[error("{path} is empty (0 bytes): not a core file")]
    Empty { path: PathBuf },
    #[error("{path} is not an ELF file (no \\x7fELF magic at offset 0)")]
    NotElf { path: PathBuf },
    #[error("{path}: malformed ELF header at offset 0: {reason}")]
    BadHeader { path: PathBuf, reason: String },
    #[error("{path} is an ELF file but not a core dump (e_type {e_type}, expected ET_CORE = 4)")]
    NotCore { path: PathBuf, e_type: u16 },
    #[error("{path} is a core of another architecture ({arch}); knot reads x86_64 and aarch64 (64-bit little-endian) cores")]
    UnsupportedArch { path: PathBuf, arch: String },
    #[error("{path}: program headers at offset {offset:#x} ({count} × {entry_size} bytes) run past the end of the file ({file_len} bytes): the core is truncated")]
    ProgramHeadersTruncated { path: PathBuf, offset: u64, count: u64, entry_size: u64, file_len: u64 },
    #[error("{path}: the notes (the threads and their registers) at offset {offset:#x} ({size} bytes) run past the end of the file ({file_len} bytes): the core is truncated")]
    NotesTruncated { path: PathBuf, offset: u64, size: u64, file_len: u64 },
    #[error("{path}: no thread found (no readable NT_PRSTATUS note); the core is truncated or corrupt")]
    NoThreads { path: PathBuf },
}
