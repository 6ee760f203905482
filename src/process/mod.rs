//! The process as the dump shows it: the core, its modules and their files, and one memory view
//! over all of them.

pub(crate) mod discover;
pub(crate) mod dynsym;
pub(crate) mod elf_file;
mod link_map;
pub(crate) mod locate;
pub(crate) mod memory;
pub(crate) mod module;
pub(crate) mod section_cache;
pub(crate) mod stack_words;

pub use elf_file::ElfFile;
pub use locate::Locator;
pub use section_cache::{user_cache_dir, SectionCache, UserCacheError, DEFAULT_MAX_BYTES as DEFAULT_CACHE_MAX_BYTES};
pub use memory::{Memory, MemoryError, RangeMemory};
pub use module::{BuildIdSource, FileRange, FileStatus, Module, PathSource};
pub(crate) use stack_words::StackWords;

use crate::core::{Absence, Core, CoreError};
use crate::diagnostics::Diagnostic;
use std::path::Path;

/// A file-backed range, for the fallback read: sorted by start.
#[derive(Debug, Clone, Copy)]
struct Backing {
    start: u64,
    end: u64,
    file_offset: u64,
    module: usize,
}

pub struct Process {
    pub core: Core,
    /// Sorted by start address.
    pub modules: Vec<Module>,
    backing: Vec<Backing>,
    pub diagnostics: Vec<Diagnostic>,
}

impl Process {
    /// Opens a core file and finds its modules' files.
    pub fn open(core_path: impl AsRef<Path>, locator: &Locator) -> Result<Process, CoreError> {
        Ok(Process::from_core(Core::open(core_path)?, locator))
    }

    /// As [`Process::open`], with a compressed core decompressed to at most `max_decompressed` bytes.
    pub fn open_limited(core_path: impl AsRef<Path>, locator: &Locator, max_decompressed: u64) -> Result<Process, CoreError> {
        Ok(Process::from_core(Core::open_limited(core_path, max_decompressed)?, locator))
    }

    pub fn from_core(core: Core, locator: &Locator) -> Process {
        let mut diagnostics = Vec::new();
        let modules = discover::discover(&core, locator, &mut diagnostics);
        let mut backing: Vec<Backing> = modules
            .iter()
            .enumerate()
            .filter(|(_, m)| m.file.is_some())
            .flat_map(|(i, m)| m.ranges.iter().map(move |r| Backing { start: r.start, end: r.end, file_offset: r.file_offset, module: i }))
            .collect();
        backing.sort_by_key(|b| b.start);
        Process { core, modules, backing, diagnostics }
    }

    /// The module whose address range holds `addr`.
    pub fn module_at(&self, addr: u64) -> Option<(usize, &Module)> {
        let i = self.modules.partition_point(|m| m.start <= addr);
        let idx = i.checked_sub(1)?;
        let m = &self.modules[idx];
        m.contains(addr).then_some((idx, m))
    }

    /// Every diagnostic so far: the core's, then the process's.
    pub fn all_diagnostics(&self) -> impl Iterator<Item = &Diagnostic> {
        self.core.diagnostics.iter().chain(self.diagnostics.iter())
    }

    fn read_backing_file(&self, addr: u64, len: usize) -> Option<&[u8]> {
        let i = self.backing.partition_point(|b| b.start <= addr);
        let b = self.backing[..i].last().filter(|b| addr < b.end)?;
        let file = self.modules[b.module].file.as_ref()?;
        let offset = b.file_offset.checked_add(addr - b.start)?;
        let avail = (b.end - addr).min(len as u64);
        // The file may be shorter than the mapping (the tail of the last page).
        let have = (file.bytes().len() as u64).checked_sub(offset)?.min(avail);
        if have == 0 {
            return None;
        }
        file.bytes_at_offset(offset, have)
    }
}

impl Memory for Process {
    fn chunk(&self, addr: u64, len: usize) -> Result<&[u8], MemoryError> {
        match self.core.bytes_at(addr, len) {
            Ok(b) if !b.is_empty() => Ok(b),
            Ok(_) => Err(MemoryError::NotSaved(addr)),
            Err(Absence::Truncated) => Err(MemoryError::Truncated(addr)),
            Err(absence) => self.read_backing_file(addr, len).ok_or(MemoryError::from_absence(absence, addr)),
        }
    }
}
