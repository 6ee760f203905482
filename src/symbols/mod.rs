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
//! Tail calls: a function that jumped to the next one left no frame; gdb puts it back from the
//! DWARF call sites when they say unambiguously which function it was, and so does
//! [`Symbolizer::tail_calls`] (`tailcall.rs` for the search, `callsites.rs` for what is read,
//! per unit and on first need).
//!
//! Nothing read from a file can make a lookup panic: the tables are parsed with bounds checks,
//! and a DWARF lookup that errs (or makes addr2line panic, which is caught) falls back to the
//! symbol tables for that address only.
//!
//! `Symbolizer` is `Sync`: the per-module state sits in a `OnceLock`; symbol tables are immutable
//! once built, and each module's addr2line context (which caches through `OnceCell` and so is not
//! `Sync`) is behind its own mutex, held only for the lookup itself.

mod callsites;
mod die_name;
mod dwarf;
mod managed;
mod names;
mod symtab;
mod tailcall;
mod units;

#[cfg(test)]
mod tests;

pub(crate) use managed::ManagedSymbol;
pub(crate) use symtab::NameSource;

use crate::core::auxv;
use crate::process::{Module, Process};
use callsites::Target;
use dwarf::Dwarf;
use goblin::elf::program_header::PT_LOAD;
use names::{display_name, NameKind};
use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use symtab::{best_of, DynsymNames, FileSymbols, Hit};

/// One source-level frame at an address: a real function, or a function inlined into it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SourceFrame {
    /// The name gdb's `bt` prints (see the module docs).
    pub(crate) function: Option<String>,
    /// The name as recorded: the DWARF linkage name (else `DW_AT_name`), or the ELF symbol.
    pub(crate) raw_name: Option<String>,
    /// The file as the line table names it (as gdb shows it: relative to the unit's directory).
    pub(crate) file: Option<String>,
    pub(crate) line: Option<u32>,
    pub(crate) column: Option<u32>,
    /// True for every frame of the chain but the last (the real function).
    pub(crate) inlined: bool,
    /// A function that tail-called (jumped to) the next inner frame's function and so left no
    /// frame of its own: put back from DWARF call sites, as gdb does (see [`TailCallFrame`]).
    pub(crate) tail_call: bool,
    /// The address minus the start of the symbol-table symbol covering it; for the outer frame
    /// only, and only when a symbol covers the address.
    pub(crate) function_offset: Option<u64>,
    /// Where `function` came from.
    pub(crate) source: NameSource,
}

/// What is known at an address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Symbolized {
    /// Index into `Process::modules` of the module holding the address.
    pub(crate) module: Option<usize>,
    /// Innermost (most deeply inlined) first, the real function last; empty when nothing is
    /// known (no module, or a module with neither DWARF nor a symbol covering the address).
    pub(crate) frames: Vec<SourceFrame>,
}

/// A frame gdb shows for a function that tail-called toward the next inner frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TailCallFrame {
    /// Runtime return address of the tail-call site: the address just after the jump, which
    /// gdb gives as the frame's pc (names and lines are looked up at `pc - 1`).
    pub(crate) pc: u64,
    /// Index into `Process::modules` of the module holding the site.
    pub(crate) module: Option<usize>,
    /// Named as gdb names a tail-call frame: after the innermost function at `pc - 1` (an
    /// inlined one, if the jump is in inlined code), with its file and line. `tail_call` is set,
    /// `inlined` is not, and `function_offset` is from `pc`, as for an outer frame.
    pub(crate) frame: SourceFrame,
}

/// Everything read from one module's files, each part on first need.
struct ModuleSymbols<'p> {
    module: &'p Module,
    /// gdb's objfile order: the module file's table, then the separate debug file's. Read on
    /// the first address lookup, or the first lookup by name the hash index cannot answer.
    files: OnceLock<Vec<FileSymbols<'p>>>,
    /// The module file's `.dynsym` hash index, when `.dynsym` is its table (no `.symtab`).
    dynsym_names: OnceLock<Option<DynsymNames<'p>>>,
    /// Read on the first DWARF question, so that a lookup by name reads only symbol tables.
    dwarf: OnceLock<Option<Dwarf<'p>>>,
}

impl<'p> ModuleSymbols<'p> {
    /// Cheap: nothing is read yet.
    fn load(module: &'p Module) -> ModuleSymbols<'p> {
        ModuleSymbols { module, files: OnceLock::new(), dynsym_names: OnceLock::new(), dwarf: OnceLock::new() }
    }

    fn files(&self) -> &[FileSymbols<'p>] {
        self.files.get_or_init(|| {
            let mut files = Vec::with_capacity(2);
            if let Some(f) = &self.module.file {
                files.push(FileSymbols::read(f, false));
            }
            if let Some(d) = &self.module.debug_file {
                files.push(FileSymbols::read(d, true));
            }
            files
        })
    }

    fn dwarf(&self) -> Option<&Dwarf<'p>> {
        self.dwarf.get_or_init(|| Dwarf::load(self.module.symbol_files())).as_ref()
    }

    /// The text symbol called `name` (a global one rather than a local one; PLT entries never),
    /// as gdb's `lookup_minimal_symbol` within one objfile: the first global one over the files
    /// in order, else the first local one.
    /// A module file whose only table is `.dynsym` answers from its hash index without being
    /// read (the whole answer when no debug file has a `.symtab` to ask next).
    fn symbol_named(&self, name: &[u8]) -> Option<(u64, bool)> {
        let hashed = self.dynsym_names.get_or_init(|| self.module.file.as_ref().and_then(DynsymNames::of));
        if let Some(names) = hashed {
            let debug_table = self.module.debug_file.as_ref().is_some_and(|d| d.sections.iter().any(|s| s.kind == symtab::SHT_SYMTAB));
            match names.named(name) {
                Some(global @ Some((_, true))) => return global,
                Some(found) if !debug_table => return found,
                // A local or no answer with a debug table to ask, or a hash section that
                // does not hold together: the tables answer.
                _ => {}
            }
        }
        let mut local = None;
        for f in self.files() {
            match f.text.named(name) {
                Some(global @ (_, true)) => return Some(global),
                Some(found) => {
                    local.get_or_insert(found);
                }
                None => {}
            }
        }
        local
    }

    fn text_symbol(&self, link: u64) -> Option<Hit<'p>> {
        best_of(self.files().iter().map(|f| f.text.lookup(link)))
    }

    fn data_symbol(&self, link: u64) -> Option<Hit<'p>> {
        // gdb names data only by sized symbols.
        best_of(self.files().iter().map(|f| f.data.lookup(link))).filter(|h| h.sym.size > 0)
    }
}

/// The tail-call sites found between a caller and a callee, innermost first.
type TailChain = Arc<[u64]>;

/// The answer `memo` keeps for `key`, found by `find` on the first question. `find` runs without
/// the lock held: two threads asking at once both look, and agree.
fn remembered<K, Q, V>(memo: &Mutex<FxHashMap<K, V>>, key: &Q, find: impl FnOnce() -> V) -> V
where
    K: std::borrow::Borrow<Q> + std::hash::Hash + Eq,
    Q: ToOwned<Owned = K> + std::hash::Hash + Eq + ?Sized,
    V: Clone,
{
    if let Some(known) = memo.lock().unwrap_or_else(PoisonError::into_inner).get(key) {
        return known.clone();
    }
    let found = find();
    memo.lock().unwrap_or_else(PoisonError::into_inner).insert(key.to_owned(), found.clone());
    found
}

/// Symbolizes addresses of one process. `Sync`: threads are symbolized in parallel.
pub(crate) struct Symbolizer<'p> {
    process: &'p Process,
    modules: Vec<OnceLock<ModuleSymbols<'p>>>,
    /// gdb's objfile order for lookups by name: the executable, then the others.
    name_order: Vec<usize>,
    /// Tail-call chains found, by (caller pc, callee lookup address): threads share stacks.
    chains: Mutex<FxHashMap<(u64, u64), TailChain>>,
    /// Functions found by name, runtime addresses.
    named: Mutex<FxHashMap<String, Option<u64>>>,
    /// What `symbolize` and `managed` answered, by (address, is a return address): a service's
    /// threads wait in the same few places (the autofac dump: 555 native frames at 57 addresses,
    /// 647 managed ones at 47).
    symbolized: Mutex<FxHashMap<(u64, bool), Symbolized>>,
    managed_seen: Mutex<FxHashMap<(u64, bool), Option<managed::ManagedSymbol>>>,
    /// A runtime's code map, for code outside every ELF image (`managed.rs`).
    code_lookup: Option<&'p dyn crate::unwind::managed::CodeLookup>,
}

impl<'p> Symbolizer<'p> {
    /// Cheap: nothing is read until an address in a module is looked up.
    pub(crate) fn new(process: &'p Process) -> Self {
        let exe = process.core.auxv.get(auxv::AT_PHDR).and_then(|a| process.module_at(a)).map(|(i, _)| i);
        let name_order = exe.into_iter().chain((0..process.modules.len()).filter(|&i| Some(i) != exe)).collect();
        Symbolizer {
            process,
            modules: process.modules.iter().map(|_| OnceLock::new()).collect(),
            name_order,
            chains: Mutex::default(),
            named: Mutex::default(),
            symbolized: Mutex::default(),
            managed_seen: Mutex::default(),
            code_lookup: None,
        }
    }

    fn module(&self, index: usize) -> Option<(&'p Module, &ModuleSymbols<'p>)> {
        let module = self.process.modules.get(index)?;
        Some((module, self.modules.get(index)?.get_or_init(|| ModuleSymbols::load(module))))
    }

    /// The source-level frames at runtime address `addr`: innermost inlined frame first, the
    /// real (outer) function last. With `is_return_address` (every frame but the first of a
    /// stack, unless it follows a signal frame) the lookup is at `addr - 1`, inside the call
    /// instruction, as gdb does; `function_offset` is still from `addr`.
    pub(crate) fn symbolize(&self, addr: u64, is_return_address: bool) -> Symbolized {
        remembered(&self.symbolized, &(addr, is_return_address), || self.symbolize_uncached(addr, is_return_address))
    }

    fn symbolize_uncached(&self, addr: u64, is_return_address: bool) -> Symbolized {
        let probe = if is_return_address { addr.wrapping_sub(1) } else { addr };
        let Some((index, _)) = self.process.module_at(probe) else { return Symbolized::default() };
        let Some((module, syms)) = self.module(index) else { return Symbolized::default() };
        let link = module.to_link_address(probe);
        // The DWARF frames and the symbol table's name side by side: on a module's first
        // address each reads its own tables (libc: its unit index, and a 10 000-entry `.symtab`
        // to sort), and a dump's threads mostly stop in the same module.
        let (mut frames, symbol) = rayon::join(
            || {
                let mut frames = Vec::new();
                if let Some(dwarf) = syms.dwarf()
                    && dwarf.frames(link, &mut frames).is_err()
                {
                    frames.clear();
                }
                frames
            },
            || syms.text_symbol(link),
        );
        // A lone frame with neither name nor line says nothing.
        if let [f] = frames.as_slice()
            && f.function.is_none()
            && f.file.is_none()
            && f.line.is_none()
        {
            frames.clear();
        }
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
                        tail_call: false,
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

    /// The frames gdb inserts between a callee frame and its caller for functions that
    /// tail-called on the way (`dwarf2/frame-tailcall.c`), innermost first; see `tailcall.rs`
    /// for how the chain is found. `callee_ip` and `callee_ip_is_exact` are the inner frame's
    /// (its function is looked up at `callee_ip - 1` unless exact), `caller_ip` the caller's
    /// return address. Empty when the caller's call site goes straight to the callee's
    /// function, when the caller has no call site there (code built without them, as at
    /// `-O0`), or when the DWARF does not say unambiguously which functions were skipped.
    pub(crate) fn tail_calls(&self, callee_ip: u64, callee_ip_is_exact: bool, caller_ip: u64) -> Vec<TailCallFrame> {
        let probe = if callee_ip_is_exact { callee_ip } else { callee_ip.wrapping_sub(1) };
        let sites = remembered(&self.chains, &(caller_ip, probe), || TailChain::from(self.tail_chain(caller_ip, probe)));
        sites.iter().map(|&pc| self.tail_call_frame(pc)).collect()
    }

    fn tail_chain(&self, caller_ip: u64, callee_probe: u64) -> Vec<u64> {
        let graph = Graph(self);
        // Most callers have no call site there (no call-site DWARF, or an indirect call): then
        // the callee's function is not even looked up. gdb needs both, in the other order.
        if tailcall::CallGraph::targets(&graph, caller_ip).is_none() {
            return Vec::new();
        }
        let Some(entry) = self.function_entry(callee_probe) else { return Vec::new() };
        tailcall::find_chain(&graph, caller_ip, entry)
    }

    fn tail_call_frame(&self, pc: u64) -> TailCallFrame {
        let sym = self.symbolize(pc, true);
        let outer = sym.frames.last().map(|f| (f.function_offset, f.function.clone(), f.raw_name.clone(), f.source));
        let mut frame = sym.frames.into_iter().next().unwrap_or(SourceFrame {
            function: None,
            raw_name: None,
            file: None,
            line: None,
            column: None,
            inlined: false,
            tail_call: true,
            function_offset: None,
            source: NameSource::Dwarf,
        });
        if let Some((offset, function, raw_name, source)) = outer {
            frame.function_offset = offset;
            if frame.function.is_none() {
                (frame.function, frame.raw_name, frame.source) = (function, raw_name, source);
            }
        }
        frame.inlined = false;
        frame.tail_call = true;
        TailCallFrame { pc, module: sym.module, frame }
    }

    /// gdb's `get_pc_function_start`: the entry of the DWARF function (not an inlined one)
    /// holding runtime address `probe`, else the start of the symbol covering it.
    fn function_entry(&self, probe: u64) -> Option<u64> {
        let (index, _) = self.process.module_at(probe)?;
        let (module, syms) = self.module(index)?;
        let link = module.to_link_address(probe);
        let entry = syms.dwarf().and_then(|d| d.function_entry(link)).or_else(|| syms.text_symbol(link).map(|h| h.sym.addr))?;
        Some(entry.wrapping_add(module.bias))
    }

    /// The runtime address of the function called `name`, as gdb's `lookup_minimal_symbol`
    /// over all objfiles: the first global symbol in objfile order, else a local one.
    fn function_named(&self, name: &str) -> Option<u64> {
        remembered(&self.named, name, || self.function_named_uncached(name))
    }

    fn function_named_uncached(&self, name: &str) -> Option<u64> {
        let mut local = None;
        let mut found = None;
        for &i in &self.name_order {
            let Some((module, syms)) = self.module(i) else { continue };
            match syms.symbol_named(name.as_bytes()) {
                Some((addr, true)) => {
                    found = Some(addr.wrapping_add(module.bias));
                    break;
                }
                Some((addr, false)) => {
                    local.get_or_insert(addr.wrapping_add(module.bias));
                }
                None => {}
            }
        }
        found.or(local)
    }

    /// The name of the data (or, failing that, function) symbol covering runtime address
    /// `addr`, with `addr`'s offset into it: gdb's `<lock_a>`, `<pairs+24>`.
    pub(crate) fn data_symbol(&self, addr: u64) -> Option<(String, u64)> {
        let index = self.data_module(addr)?;
        let (module, syms) = self.module(index)?;
        let link = module.to_link_address(addr);
        let hit = syms.data_symbol(link).or_else(|| syms.text_symbol(link))?;
        Some((display_name(&hit.sym.full_name(), None, NameKind::Minimal), link.wrapping_sub(hit.sym.addr)))
    }

    /// The data symbol covering runtime address `addr`: its runtime start and its size (0 when
    /// the symbol table gives none).
    pub(crate) fn data_object(&self, addr: u64) -> Option<(u64, u64)> {
        let index = self.data_module(addr)?;
        let (module, syms) = self.module(index)?;
        let link = module.to_link_address(addr);
        let hit = syms.data_symbol(link)?;
        Some((addr.wrapping_sub(link.wrapping_sub(hit.sym.addr)), hit.sym.size))
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

/// Inflates the compressed DWARF of every module a thread's registers point into (the modules its
/// innermost frame is in, which every report names), so that the reading of the runtime and the
/// stack walks, which need no DWARF, run beside it (see `analysis::report_for`). Nothing is
/// computed twice: each section is inflated once (`ElfFile::section_data`), and a symbol lookup
/// that needs one still being inflated waits for it.
pub(crate) fn inflate_ahead(process: &Process) {
    let mut modules: Vec<usize> = process.core.threads.iter().filter_map(|t| process.module_at(t.registers.pc())).map(|(i, _)| i).collect();
    modules.sort_unstable();
    modules.dedup();
    for i in modules {
        if let Some(m) = process.modules.get(i) {
            dwarf::dwarf_file(m.symbol_files());
        }
    }
}

/// The process's call graph, as the tail-call search sees it (runtime addresses).
struct Graph<'s, 'p>(&'s Symbolizer<'p>);

impl<'s, 'p> Graph<'s, 'p> {
    /// The module holding `addr`, its DWARF, and `addr` as a link-time address.
    fn dwarf_at(&self, addr: u64) -> Option<(&'p Module, &'s Dwarf<'p>, u64)> {
        let (index, _) = self.0.process.module_at(addr)?;
        let (module, syms) = self.0.module(index)?;
        Some((module, syms.dwarf()?, module.to_link_address(addr)))
    }
}

impl tailcall::CallGraph for Graph<'_, '_> {
    fn targets(&self, site: u64) -> Option<Vec<u64>> {
        // The site's unit is the one holding the call, before the return address.
        let (module, dwarf, _) = self.dwarf_at(site.wrapping_sub(1))?;
        match dwarf.call_site(module.to_link_address(site))? {
            Target::Unknown => None,
            Target::Addresses(link) => Some(link.into_iter().map(|a| a.wrapping_add(module.bias)).collect()),
            Target::Name(name) => Some(vec![self.0.function_named(&name)?]),
        }
    }

    fn tail_sites(&self, entry: u64) -> Option<Vec<u64>> {
        let (module, dwarf, link) = self.dwarf_at(entry)?;
        Some(dwarf.tail_call_sites(link)?.into_iter().map(|a| a.wrapping_add(module.bias)).collect())
    }
}

#[allow(dead_code)]
fn assert_sync() {
    fn sync<T: Sync + Send>() {}
    sync::<Symbolizer<'static>>();
}
