//! One loaded ELF image in the process: where it sits, its build-id, and the files that back it.

use super::elf_file::{hex, ElfFile};
use serde::Serialize;

/// An address range of the module backed by its file at `file_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileRange {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) file_offset: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BuildIdSource {
    /// Read from the image's note in dump memory: the identity of what really ran.
    Dump,
    /// Only the file on disk had one; it could not be checked against the dump.
    File,
}

/// Where the module's name came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PathSource {
    /// The core's NT_FILE note.
    NtFile,
    /// The dynamic linker's `link_map` in dump memory (a core without NT_FILE).
    LinkMap,
    /// The image itself, read from dump memory (the vDSO).
    Image,
    /// The program, where the dump names it nowhere usable: from `--exe`,
    ExeOption,
    /// from the auxiliary vector's AT_EXECFN string,
    AuxvExecfn,
    /// from NT_PRPSINFO's command line (or its short name),
    Prpsinfo,
    /// or from nothing: `[executable]`.
    Unknown,
}

impl PathSource {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            PathSource::NtFile => "nt_file",
            PathSource::LinkMap => "link_map",
            PathSource::Image => "image",
            PathSource::ExeOption => "exe_option",
            PathSource::AuxvExecfn => "auxv_execfn",
            PathSource::Prpsinfo => "prpsinfo",
            PathSource::Unknown => "unknown",
        }
    }

    /// The program was named by something other than the dump's list of mapped files.
    pub(crate) fn is_fallback(self) -> bool {
        matches!(self, PathSource::ExeOption | PathSource::AuxvExecfn | PathSource::Prpsinfo | PathSource::Unknown)
    }
}

/// What happened when knot looked for the module's file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum FileStatus {
    Loaded { path: String },
    /// The image was read out of dump memory (the vDSO).
    InMemory,
    Missing { tried: String },
    /// A file was found but is not the one that ran (or is not a readable ELF file).
    Refused { path: String, reason: String },
}

pub struct Module {
    /// The path the dump names.
    pub path: String,
    pub path_source: PathSource,
    pub start: u64,
    pub end: u64,
    /// Added to link-time addresses to get runtime addresses.
    pub bias: u64,
    pub ranges: Vec<FileRange>,
    pub build_id: Option<Vec<u8>>,
    pub build_id_source: Option<BuildIdSource>,
    pub file: Option<ElfFile>,
    pub debug_file: Option<ElfFile>,
    pub file_status: FileStatus,
    /// Where the debug file came from, or why there is none.
    pub debug_status: Option<String>,
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module")
            .field("path", &self.path)
            .field("start", &format_args!("{:#x}", self.start))
            .field("end", &format_args!("{:#x}", self.end))
            .field("bias", &format_args!("{:#x}", self.bias))
            .field("build_id", &self.build_id.as_deref().map(hex))
            .field("file_status", &self.file_status)
            .finish()
    }
}

impl Module {
    /// The file name, as the text report shows it (`libc.so.6`).
    pub fn name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }

    pub(crate) fn contains(&self, addr: u64) -> bool {
        addr >= self.start && addr < self.end
    }

    pub(crate) fn build_id_hex(&self) -> Option<String> {
        self.build_id.as_deref().map(hex)
    }

    /// The link-time address for a runtime address in this module.
    pub(crate) fn to_link_address(&self, addr: u64) -> u64 {
        addr.wrapping_sub(self.bias)
    }

    /// The file that holds unwind tables and text: the module file.
    pub(crate) fn image(&self) -> Option<&ElfFile> {
        self.file.as_ref()
    }

    /// The files to read symbols and DWARF from, best first.
    pub(crate) fn symbol_files(&self) -> impl Iterator<Item = &ElfFile> {
        self.debug_file.iter().chain(self.file.iter())
    }
}
