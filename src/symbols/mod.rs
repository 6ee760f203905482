//! Names, source lines and inline chains for code addresses, and names for data addresses, the
//! way gdb's `bt` and `print` give them (checked against gdb 13 by the tests in `tests.rs`).
//!
//! Per module, everything is read once, on the first address that falls in it, and shared by
//! every thread: the symbol tables (`symtab.rs`: gdb's minimal symbols) and the DWARF
//! (`dwarf.rs`: the inline chain, file and line, through addr2line). DWARF names come first; an
//! address DWARF does not cover, or whose function DWARF does not name, is named from the symbol
//! tables (`source` says which).
//!
//! How a name is spelled, as gdb does:
//! - C: the DWARF linkage name when there is one, else `DW_AT_name` (glibc's `__lll_lock_wait`
//!   is `__GI___lll_lock_wait`, `pthread_mutex_lock` is `___pthread_mutex_lock`).
//! - C++ with a linkage name: demangled, without parameters or return type
//!   (`bank::Account::deposit<long>`). Without one: built from the DIE tree (`die_name.rs`).
//! - Rust: always built from the DIE tree (`m::{impl#0}::go`), never from the linkage name.
//! - Symbol-table names: as stored, C++ demangled with parameters (`std::thread::join()`), Rust
//!   demangled without hash. Which alias wins at one address is gdb's rule, see `symtab.rs`.
//! - File names as the line table gives them (`./nptl/futex-internal.c`, `dl.c`), see `dwarf.rs`.
//!
//! Nothing read from a file can make a lookup panic: the tables are parsed with bounds checks,
//! and a DWARF lookup that errs (or makes addr2line panic, which is caught) falls back to the
//! symbol tables for that address only.
//!
//! `Symbolizer` is `Sync`: the per-module state sits in a `OnceLock`; symbol tables are immutable
//! once built, and each module's addr2line context (which caches through `OnceCell` and so is not
//! `Sync`) is behind its own mutex, held only for the lookup itself.

mod die_name;
mod dwarf;
mod names;
mod symtab;

#[cfg(test)]
mod tests;

pub use symtab::NameSource;

use crate::process::{Module, Process};
use dwarf::Dwarf;
use goblin::elf::program_header::PT_LOAD;
use names::{display_name, NameKind};
use std::sync::OnceLock;
use symtab::{best_of, FileSymbols, Hit};

/// One source-level frame at an address: a real function, or a function inlined into it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFrame {
    /// The name gdb's `bt` prints (demangled; C++ from DWARF without parameters).
    pub function: Option<String>,
    /// The name as recorded: the DWARF linkage name (else `DW_AT_name`), or the ELF symbol.
    pub raw_name: Option<String>,
    /// The file as the line table names it (as gdb shows it: relative to the unit's directory).
    pub file: Option<String>,
    pub line: Option<u32>,
    pub column: Option<u32>,
    /// True for every frame of the chain but the last (the real function).
    pub inlined: bool,
    /// The address minus the start of the symbol-table symbol covering it; for the outer frame
    /// only, and only when a symbol covers the address.
    pub function_offset: Option<u64>,
    /// Where `function` came from.
    pub source: NameSource,
}

/// What is known at an address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Symbolized {
    /// Index into `Process::modules` of the module holding the address.
    pub module: Option<usize>,
    /// Innermost (most deeply inlined) first, the real function last; empty when nothing is
    /// known (no module, or a module with neither DWARF nor a symbol covering the address).
    pub frames: Vec<SourceFrame>,
}

/// Everything read from one module's files.
struct ModuleSymbols<'p> {
    /// gdb's objfile order: the module file's table, then the separate debug file's.
    files: Vec<FileSymbols<'p>>,
    dwarf: Option<Dwarf<'p>>,
}

impl<'p> ModuleSymbols<'p> {
    fn load(module: &'p Module) -> ModuleSymbols<'p> {
        let mut files = Vec::with_capacity(2);
        if let Some(f) = &module.file {
            files.push(FileSymbols::read(f, false));
        }
        if let Some(d) = &module.debug_file {
            files.push(FileSymbols::read(d, true));
        }
        ModuleSymbols { files, dwarf: Dwarf::load(module.symbol_files()) }
    }

    fn text_symbol(&self, link: u64) -> Option<Hit<'p>> {
        best_of(self.files.iter().map(|f| f.text.lookup(link)))
    }

    fn data_symbol(&self, link: u64) -> Option<Hit<'p>> {
        // gdb names data only by sized symbols.
        best_of(self.files.iter().map(|f| f.data.lookup(link))).filter(|h| h.sym.size > 0)
    }
}

/// Symbolizes addresses of one process. `Sync`: threads are symbolized in parallel.
pub struct Symbolizer<'p> {
    process: &'p Process,
    modules: Vec<OnceLock<ModuleSymbols<'p>>>,
}

impl<'p> Symbolizer<'p> {
    /// Cheap: nothing is read until an address in a module is looked up.
    pub fn new(process: &'p Process) -> Self {
        Symbolizer { process, modules: process.modules.iter().map(|_| OnceLock::new()).collect() }
    }

    fn module(&self, index: usize) -> Option<(&'p Module, &ModuleSymbols<'p>)> {
        let module = self.process.modules.get(index)?;
        Some((module, self.modules.get(index)?.get_or_init(|| ModuleSymbols::load(module))))
    }

    /// The source-level frames at runtime address `addr`: innermost inlined frame first, the
    /// real (outer) function last. With `is_return_address` (every frame but the first of a
    /// stack, unless it follows a signal frame) the lookup is at `addr - 1`, inside the call
    /// instruction, as gdb does; `function_offset` is still from `addr`.
    pub fn symbolize(&self, addr: u64, is_return_address: bool) -> Symbolized {
        let probe = if is_return_address { addr.wrapping_sub(1) } else { addr };
        let Some((index, _)) = self.process.module_at(probe) else { return Symbolized::default() };
        let Some((module, syms)) = self.module(index) else { return Symbolized::default() };
        let link = module.to_link_address(probe);
        let mut frames = Vec::new();
        if let Some(dwarf) = &syms.dwarf
            && dwarf.frames(link, &mut frames).is_err()
        {
            frames.clear();
        }
        // A lone frame with neither name nor line says nothing.
        if let [f] = frames.as_slice()
            && f.function.is_none()
            && f.file.is_none()
            && f.line.is_none()
        {
            frames.clear();
        }
        let symbol = syms.text_symbol(link);
        let offset = symbol.map(|h| module.to_link_address(addr).wrapping_sub(h.sym.addr));
        let last = frames.len().checked_sub(1);
        match last {
            None => {
                if let Some(hit) = symbol {
                    let raw = hit.sym.full_name();
                    frames.push(SourceFrame {
                        function: Some(display_name(&raw, None, NameKind::Minimal)),
                        raw_name: Some(raw.into_owned()),
                        file: None,
                        line: None,
                        column: None,
                        inlined: false,
                        function_offset: offset,
                        source: hit.source,
                    });
                }
            }
            Some(last) => {
                for f in &mut frames[..last] {
                    f.inlined = true;
                }
                if let Some(outer) = frames.get_mut(last) {
                    outer.function_offset = offset;
                    if outer.function.is_none()
                        && let Some(hit) = symbol
                    {
                        let raw = hit.sym.full_name();
                        outer.function = Some(display_name(&raw, None, NameKind::Minimal));
                        outer.raw_name = Some(raw.into_owned());
                        outer.source = hit.source;
                    }
                }
            }
        }
        Symbolized { module: Some(index), frames }
    }

    /// The name of the data (or, failing that, function) symbol covering runtime address
    /// `addr`, with `addr`'s offset into it: gdb's `<lock_a>`, `<pairs+24>`.
    pub fn data_symbol(&self, addr: u64) -> Option<(String, u64)> {
        let index = self.data_module(addr)?;
        let (module, syms) = self.module(index)?;
        let link = module.to_link_address(addr);
        let hit = syms.data_symbol(link).or_else(|| syms.text_symbol(link))?;
        Some((display_name(&hit.sym.full_name(), None, NameKind::Minimal), link.wrapping_sub(hit.sym.addr)))
    }

    /// The module whose image holds `addr`, counting the part of its last segment that is not in
    /// the file (`.bss`), which no file mapping covers.
    fn data_module(&self, addr: u64) -> Option<usize> {
        if let Some((i, _)) = self.process.module_at(addr) {
            return Some(i);
        }
        let i = self.process.modules.partition_point(|m| m.start <= addr).checked_sub(1)?;
        let module = self.process.modules.get(i)?;
        let link = module.to_link_address(addr);
        let image = module.image()?;
        image
            .program_headers
            .iter()
            .any(|p| p.p_type == PT_LOAD && link >= p.p_vaddr && link - p.p_vaddr < p.p_memsz)
            .then_some(i)
    }
}

#[allow(dead_code)]
fn assert_sync() {
    fn sync<T: Sync + Send>() {}
    sync::<Symbolizer<'static>>();
}
