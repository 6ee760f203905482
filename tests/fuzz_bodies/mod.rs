//! The bodies of the fuzz targets (`fuzz/fuzz_targets/*.rs` include this file by path) and of
//! the property tests in `src/tests/fuzz_parsers.rs`, so both exercise exactly the same code. Kept
//! outside `src/` on purpose: the library has no fuzzing API. Each body panics only when knot
//! breaks a promise (a panic inside knot, or a walk past its frame bound); bad input itself must
//! come back as an error or a partial result.
#![allow(dead_code)]

use knot::{report_for, Options};
use knot::core::Core;
use knot::process::{ElfFile, Locator, Process};
use knot::report::Report;

/// Frames per walk in the fuzz bodies: hostile stacks reach it, and a lower bound than the
/// default keeps each case fast without changing which code runs.
pub const FUZZ_MAX_FRAMES: usize = 512;

/// Target `core_reader`: parses a core and reads what it points at.
pub fn core_reader(bytes: &[u8]) -> Option<Core> {
    core_from(bytes.to_vec())
}

/// [`core_reader`] on a buffer the caller gives up (saves copying a multi-megabyte core).
pub fn core_from(bytes: Vec<u8>) -> Option<Core> {
    let core = Core::from_bytes("fuzz-core", bytes).ok()?;
    for t in &core.threads {
        let _ = core.bytes_at(t.registers.sp(), 256);
        let _ = core.bytes_at(t.registers.pc(), 16);
    }
    for s in core.segments.iter() {
        let _ = core.bytes_at(s.vaddr, 4096);
        let _ = core.bytes_at(s.end().saturating_sub(1), 4096);
    }
    Some(core)
}

/// Target `elf_file`: parses a module file and asks it everything the later stages ask.
pub fn elf_file(bytes: &[u8]) {
    let Ok(file) = ElfFile::from_bytes("fuzz-elf", bytes.to_vec()) else { return };
    for i in 0..file.sections.len() {
        let _ = file.section_data(i);
    }
    for name in [".eh_frame", ".eh_frame_hdr", ".debug_frame", ".debug_info", ".symtab", ".dynsym", ".gnu_debuglink"] {
        let _ = file.section(name);
    }
    let _ = file.debuglink();
    let _ = file.first_load_vaddr();
    for p in file.program_headers.iter().take(64) {
        let _ = file.offset_of_vaddr(p.p_vaddr);
        let _ = file.offset_of_vaddr(p.p_vaddr.wrapping_add(p.p_filesz).wrapping_sub(1));
        let _ = file.bytes_at_offset(p.p_offset, p.p_filesz);
    }
}

/// The process view of a core, its modules found through `locator`.
pub fn process(bytes: Vec<u8>, locator: &Locator) -> Option<Process> {
    Some(Process::from_core(core_from(bytes)?, locator))
}

/// The whole report, checking that "partial" says what the diagnostics say.
pub fn report(process: &Process, opts: &Options) -> Report {
    let report = report_for(process, opts);
    let warned = process.all_diagnostics().any(|d| d.severity == knot::Severity::Warning);
    assert_eq!(report.dump.partial, warned);
    assert_eq!(report.threads.len(), process.core.threads.len());
    report
}

/// Target `pipeline`: core → process → report (the report walks every stack, bounded by
/// `opts.max_walk_frames`; the walk's own promises are checked by the crate's property tests,
/// `src/tests/fuzz_parsers.rs`, which reach the unwinder).
pub fn pipeline(bytes: Vec<u8>, opts: &Options) -> Option<Report> {
    let process = process(bytes, &opts.locator)?;
    Some(report(&process, opts))
}

/// The fuzz targets' locator: module files only under `$KNOT_FUZZ_SYSROOT` when set, else a
/// sysroot where nothing exists, so a run does not depend on the machine's files.
pub fn locator_from_env() -> Locator {
    let sysroot = std::env::var_os("KNOT_FUZZ_SYSROOT").map(Into::into).unwrap_or_else(|| "/nonexistent-knot-sysroot".into());
    Locator { sysroot: Some(sysroot), no_default_debug_dir: true, ..Locator::default() }
}

/// Options for the fuzz targets: bounded walks, modules found through `locator`.
pub fn fuzz_options(locator: Locator) -> Options {
    Options { locator, max_walk_frames: Some(FUZZ_MAX_FRAMES), ..Options::default() }
}
