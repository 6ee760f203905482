//! Bad input is normal input for a dump reader. Each test here takes a good core (the committed
//! `abba` dumps), breaks it the way real dumps break — cut short, overwritten, hostile — and
//! checks that knot answers with a `CoreError` naming what and where, or with a reading marked
//! partial whose diagnostics carry offsets; never a panic, a hang or an unbounded allocation.

use crate::tests::common;
use crate::tests::dumpedit::*;
use crate::{report_for, Options};
use crate::core::{Absence, Core, CoreError};
use crate::process::{ElfFile, Process};
use crate::report::Report;
use crate::unwind::{Stack, StackEnd, Unwinder, DEFAULT_MAX_FRAMES};
use crate::{Diagnostic, Severity};
use knot_samples::{DumpKind, SampleDump};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::tests::allocator::largest_allocation;

const MIB: usize = 1 << 20;

// ---------------------------------------------------------------------------------------------
// Seeds and shortcuts.

fn gcore() -> &'static SampleDump {
    common::abba(DumpKind::Gcore)
}

fn kernel() -> &'static SampleDump {
    common::abba(DumpKind::Kernel)
}

/// The gcore seed: its notes are at the end of the file, after every segment.
fn seed() -> &'static [u8] {
    common::abba_bytes(DumpKind::Gcore)
}

/// The kernel seed: its notes come first, right after the program headers.
fn kernel_seed() -> &'static [u8] {
    common::abba_bytes(DumpKind::Kernel)
}

fn read(bytes: Vec<u8>) -> Result<Core, CoreError> {
    Core::from_bytes("bad.core", bytes)
}

fn read_ok(bytes: Vec<u8>) -> Core {
    read(bytes).unwrap_or_else(|e| panic!("expected a (partial) reading, got: {e}"))
}

fn cut(bytes: &[u8], len: usize) -> Vec<u8> {
    bytes[..len].to_vec()
}


/// The warning whose message contains `text`.
fn warning<'a>(diagnostics: impl IntoIterator<Item = &'a Diagnostic>, text: &str) -> &'a Diagnostic {
    let all: Vec<&Diagnostic> = diagnostics.into_iter().collect();
    all.iter()
        .copied()
        .find(|d| d.severity == Severity::Warning && d.message.contains(text))
        .unwrap_or_else(|| panic!("no warning containing {text:?} in {all:#?}"))
}

fn process(core: Core, sample: &SampleDump) -> Process {
    Process::from_core(core, &common::options_for(sample).locator)
}

fn walk(process: &Process) -> (Vec<Stack>, Duration) {
    let t = Instant::now();
    let stacks = Unwinder::new(process).walk_all();
    (stacks, t.elapsed())
}

fn report(process: &Process, sample: &SampleDump) -> Report {
    report_for(process, &common::options_for(sample))
}

/// A scratch directory for files this test writes.
fn scratch(name: &str) -> PathBuf {
    let dir = crate::tests::scratch_root().join("bad_input").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

const SEED_THREADS: usize = 3;

// ---------------------------------------------------------------------------------------------
// Truncation.

#[test]
fn cuts_inside_the_elf_header_are_not_elf_or_a_bad_header() {
    assert!(matches!(read(Vec::new()), Err(CoreError::Empty { .. })));
    for len in 1..4 {
        assert!(matches!(read(cut(seed(), len)), Err(CoreError::NotElf { .. })), "cut at {len}");
    }
    for len in 4..EHDR_SIZE {
        match read(cut(seed(), len)) {
            Err(e @ CoreError::BadHeader { .. }) => assert!(e.to_string().contains(&format!("file is {len} bytes")), "{e}"),
            other => panic!("cut at {len}: expected BadHeader, got {other:?}"),
        }
    }
}

#[test]
fn cuts_inside_the_program_headers_name_their_offset_count_and_the_file_length() {
    let phnum = phdrs(seed()).len() as u64;
    let table_end = EHDR_SIZE + phnum as usize * PHDR_SIZE;
    for len in [EHDR_SIZE, EHDR_SIZE + 1, EHDR_SIZE + 5 * PHDR_SIZE + 3, table_end - 1] {
        match read(cut(seed(), len)) {
            Err(e @ CoreError::ProgramHeadersTruncated { .. }) => {
                let CoreError::ProgramHeadersTruncated { offset, count, entry_size, file_len, .. } = e else { unreachable!() };
                assert_eq!((offset, count, entry_size, file_len), (EHDR_SIZE as u64, phnum, PHDR_SIZE as u64, len as u64));
                let msg = e.to_string();
                assert!(msg.contains("offset 0x40") && msg.contains("truncated"), "{msg}");
            }
            other => panic!("cut at {len}: expected ProgramHeadersTruncated, got {other:?}"),
        }
    }
}

#[test]
fn a_cut_before_the_notes_is_an_error_naming_where_the_notes_were() {
    // gcore writes the notes after every segment: a cut in mid-memory leaves no thread at all.
    let notes = note_segment(seed());
    let stack = load_holding(seed(), register(seed(), 1, REG_RSP));
    let len = (stack.offset + stack.filesz / 2) as usize;
    match read(cut(seed(), len)) {
        Err(e @ CoreError::NotesTruncated { .. }) => {
            let CoreError::NotesTruncated { offset, size, file_len, .. } = e else { unreachable!() };
            assert_eq!((offset, size, file_len), (notes.offset, notes.filesz, len as u64));
            let msg = e.to_string();
            assert!(msg.contains(&format!("{:#x}", notes.offset)) && msg.contains("truncated"), "{msg}");
        }
        other => panic!("expected NotesTruncated, got {other:?}"),
    }
}

#[test]
fn a_cut_inside_the_notes_keeps_the_threads_before_it_and_says_where_the_notes_stop() {
    let notes = note_segment(seed());
    let second = prstatus(seed(), 1);
    let len = second.at + 100;
    let core = read_ok(cut(seed(), len));
    assert_eq!(core.threads.len(), 1, "only the first NT_PRSTATUS is whole");
    assert!(core.is_partial());
    let segment = warning(&core.diagnostics, "note segment cut off");
    assert_eq!(segment.offset, Some(notes.offset));
    let walk_end = warning(&core.diagnostics, "notes unreadable from here on");
    assert_eq!(walk_end.offset, Some(second.at as u64), "{walk_end:?}");

    let p = process(core, gcore());
    let r = report(&p, gcore());
    assert!(r.dump.partial);
    assert_eq!(r.threads.len(), 1);
    assert!(r.diagnostics.iter().any(|d| d.offset == Some(second.at as u64)));
}

#[test]
fn a_cut_through_a_thread_stack_ends_that_stack_unreadable_and_the_report_partial() {
    // The kernel writes the notes first, so a cut in a stack leaves the threads readable.
    let seed = kernel_seed();
    let (thread, rsp) = (2, register(seed, 2, REG_RSP));
    let stack = load_holding(seed, rsp);
    // Keep frame #0's slots, lose its callers'.
    let len = stack.file_offset(rsp) + 0x28;
    let cut_vaddr = rsp + 0x28;
    let core = read_ok(cut(seed, len));
    assert_eq!(core.threads.len(), SEED_THREADS);
    let truncated = warning(&core.diagnostics, "the core is truncated");
    assert_eq!(truncated.offset, Some(len as u64));
    assert_eq!(truncated.address, Some(cut_vaddr));
    assert_eq!(core.bytes_at(cut_vaddr, 8), Err(Absence::Truncated));

    let p = process(core, kernel());
    let r = report(&p, kernel());
    assert!(r.dump.partial);
    let t = &r.threads[thread];
    assert!(!t.stack_end.complete, "{:?}", t.stack_end);
    assert_eq!(t.stack_end.reason, "unreadable", "{:?}", t.stack_end);
    let at = t.stack_end.address.expect("an unreadable end names its address").0;
    assert!(at >= cut_vaddr && at < stack.vaddr + stack.memsz, "{at:#x} should lie in the cut-off part of the stack");
    assert!(!t.frames.is_empty());
}

#[test]
fn cutting_the_last_byte_is_noticed_where_it_matters() {
    // gcore's last bytes are section headers, which a core reader does not need.
    let core = read_ok(cut(seed(), seed().len() - 1));
    assert_eq!(core.threads.len(), SEED_THREADS);
    assert!(!core.is_partial(), "{:#?}", core.diagnostics);
    // The kernel's last byte is process memory.
    let k = kernel_seed();
    let core = read_ok(cut(k, k.len() - 1));
    assert!(core.is_partial());
    assert_eq!(warning(&core.diagnostics, "the core is truncated").offset, Some(k.len() as u64 - 1));
}

/// Cut points: evenly spread, plus both sides of every segment and note boundary.
fn cut_points(bytes: &[u8]) -> Vec<usize> {
    let mut points: Vec<usize> = (1..120).map(|i| bytes.len() / 120 * i).collect();
    for p in phdrs(bytes) {
        for at in [p.offset as usize, p.end_offset()] {
            points.extend([at.saturating_sub(1), at, at + 1]);
        }
    }
    for n in notes(bytes) {
        points.extend([n.at, n.at + 5, n.desc_at + 1]);
    }
    points.retain(|&p| p > 0 && p < bytes.len());
    points.sort_unstable();
    points.dedup();
    points
}

#[test]
fn every_cut_gives_an_error_or_a_partial_reading_and_a_bounded_walk() {
    let t = Instant::now();
    let mut tried = 0;
    for (seed, sample) in [(seed(), gcore()), (kernel_seed(), kernel())] {
        let content_end = phdrs(seed).iter().map(|p| p.end_offset()).max().unwrap_or(0);
        for len in cut_points(seed) {
            tried += 1;
            match read(cut(seed, len)) {
                Err(e) => assert!(!e.to_string().is_empty()),
                Ok(core) => {
                    if len < content_end {
                        assert!(core.is_partial(), "a cut at {len} (before {content_end}) must be noticed");
                    }
                    let p = process(core, sample);
                    for s in walk(&p).0 {
                        assert!(!s.frames.is_empty() && s.frames.len() <= DEFAULT_MAX_FRAMES);
                    }
                }
            }
        }
    }
    eprintln!("{tried} cuts in {:?}", t.elapsed());
}

// ---------------------------------------------------------------------------------------------
// Corrupt notes.

#[test]
fn garbage_over_the_notes_is_an_error_or_a_partial_reading() {
    let seg = note_segment(seed());
    for s in 1..=8u64 {
        let mut bytes = seed().to_vec();
        Rng(s.wrapping_mul(0x9e37_79b9_7f4a_7c15)).fill(&mut bytes[seg.offset as usize..seg.end_offset()]);
        match read(bytes) {
            Err(e) => assert!(matches!(e, CoreError::NoThreads { .. }), "seed {s}: {e}"),
            Ok(core) => assert!(core.is_partial(), "seed {s}"),
        }
    }
    // Garbage over the second half: the threads before it survive, the reading says where.
    let mut bytes = seed().to_vec();
    let from = prstatus(seed(), 1).at;
    Rng(7).fill(&mut bytes[from..seg.end_offset()]);
    let core = read_ok(bytes);
    assert_eq!(core.threads.len(), 1);
    assert_eq!(warning(&core.diagnostics, "notes unreadable").offset, Some(from as u64));
}

#[test]
fn a_note_claiming_a_huge_descriptor_ends_the_note_walk_at_its_offset() {
    let auxv = notes_of_kind(seed(), NT_AUXV).remove(0);
    let mut bytes = seed().to_vec();
    put_u32(&mut bytes, auxv.at + RawNote::DESCSZ, 0xffff_fff0);
    let (core, largest) = largest_allocation(|| read_ok(bytes));
    assert_eq!(core.threads.len(), SEED_THREADS, "the threads come before NT_AUXV");
    let d = warning(&core.diagnostics, "descriptor 4294967280");
    assert_eq!(d.offset, Some(auxv.at as u64));
    assert!(core.auxv.entries.is_empty() && core.files.is_none());
    assert!(largest < MIB, "a descriptor size must not drive an allocation ({largest} bytes)");
}

#[test]
fn nt_file_with_a_huge_count_is_ignored_with_a_diagnostic_and_allocates_nothing() {
    let nt_file = notes_of_kind(seed(), NT_FILE).remove(0);
    for (count, expect) in [(u64::MAX, "more than its"), (((nt_file.desc.len() - 16) / 24) as u64, "paths")] {
        let mut bytes = seed().to_vec();
        put_u64(&mut bytes, nt_file.desc_at, count);
        let (core, largest) = largest_allocation(|| read_ok(bytes));
        let d = warning(&core.diagnostics, "NT_FILE ignored");
        assert!(d.message.contains(expect), "{d:?}");
        assert_eq!(d.offset, Some(nt_file.at as u64));
        assert!(core.files.is_none());
        assert!(largest < MIB, "count {count}: {largest} bytes");
        // Without NT_FILE the modules come from the link_map; the reading still completes.
        let p = process(core, gcore());
        assert!(!p.modules.is_empty());
        walk(&p);
    }
}

#[test]
fn a_flood_of_malformed_notes_gives_a_bounded_number_of_warnings() {
    let n = 200_000;
    let mut list = note_list(seed());
    list.extend((0..n).map(|_| (b"CORE\0".to_vec(), NT_PRSTATUS, vec![0u8; 4])));
    let core = read_ok(with_notes(seed(), &list));
    assert_eq!(core.threads.len(), SEED_THREADS);
    let malformed = core.diagnostics.iter().filter(|d| d.message.contains("malformed")).count();
    assert!(malformed <= 40, "{malformed} warnings for {n} malformed notes");
    let summary = warning(&core.diagnostics, "more malformed notes");
    assert!(summary.message.contains(&(n - 32).to_string()), "{summary:?}");
}

#[test]
fn nt_file_with_tens_of_thousands_of_modules_is_read_in_linear_time() {
    // Opening a core with n modules in NT_FILE, none of whose files exist: the time it takes
    // grows with n, not n² — 5 times the modules take less than 15 times as long (quadratic work
    // would take 25 times). A ratio of two runs side by side, not a wall-clock bound: the suite
    // runs on loaded, shared machines (the faster of two runs of each size).
    let opened = |n: u64| {
        let paths: Vec<String> = (0..n).map(|i| format!("/nonexistent/lib{i}.so")).collect();
        let entries: Vec<(u64, u64, u64, &str)> =
            (0..n).map(|i| (0x1000_0000 + i * 0x1000, 0x1000_1000 + i * 0x1000, 0, paths[i as usize].as_str())).collect();
        let mut list = note_list(seed());
        let slot = list.iter_mut().find(|(_, kind, _)| *kind == NT_FILE).expect("NT_FILE");
        slot.2 = encode_nt_file(&entries);
        let took = (0..2)
            .map(|_| {
                let core = read_ok(with_notes(seed(), &list));
                assert_eq!(core.files.as_ref().map(|f| f.len()), Some(n as usize));
                let t = Instant::now();
                let p = process(core, gcore());
                let took = t.elapsed();
                assert!(p.diagnostics.len() as u64 >= n - 1, "every missing module file is reported");
                took
            })
            .min()
            .unwrap_or_default();
        eprintln!("{n} NT_FILE modules: {took:?}");
        took
    };
    let (small, large) = (opened(10_000), opened(50_000));
    assert!(large.as_secs_f64() < 15.0 * small.as_secs_f64().max(0.001), "50 000 modules took {large:?}, 10 000 took {small:?}");
}

// ---------------------------------------------------------------------------------------------
// Program headers.

#[test]
fn e_phnum_past_the_end_of_the_file_is_program_headers_truncated() {
    let mut bytes = cut(seed(), MIB);
    put_u16(&mut bytes, E_PHNUM, 0xfffe);
    let (r, largest) = largest_allocation(|| read(bytes));
    assert!(matches!(r, Err(CoreError::ProgramHeadersTruncated { count: 0xfffe, offset: 64, .. })), "{r:?}");
    assert!(largest < MIB);
}

#[test]
fn e_phnum_huge_inside_the_file_reads_garbage_headers_without_panicking() {
    let mut bytes = seed().to_vec();
    put_u16(&mut bytes, E_PHNUM, 0xfffe);
    if let Ok(core) = read(bytes) {
        // The first 22 headers are the real ones; the rest is process memory read as headers.
        assert!(core.threads.len() >= SEED_THREADS);
        walk(&process(core, gcore()));
    }
}

fn with_pn_xnum(mut bytes: Vec<u8>, shoff: u64) -> Vec<u8> {
    put_u16(&mut bytes, E_PHNUM, 0xffff);
    put_u64(&mut bytes, E_SHOFF, shoff);
    bytes
}

#[test]
fn pn_xnum_takes_the_count_from_section_header_0() {
    let phnum = phdrs(seed()).len() as u32;
    let shoff = u64_at(seed(), E_SHOFF);
    let mut bytes = with_pn_xnum(seed().to_vec(), shoff);
    put_u32(&mut bytes, shoff as usize + 44, phnum);
    let core = read_ok(bytes);
    assert_eq!(core.threads.len(), SEED_THREADS);
    assert!(!core.is_partial(), "{:#?}", core.diagnostics);
}

#[test]
fn pn_xnum_without_a_section_header_is_a_bad_header() {
    for shoff in [0, seed().len() as u64, u64::MAX - 44, u64::MAX] {
        match read(with_pn_xnum(seed().to_vec(), shoff)) {
            Err(e @ CoreError::BadHeader { .. }) => assert!(e.to_string().contains("PN_XNUM"), "{e}"),
            other => panic!("e_shoff {shoff:#x}: expected BadHeader, got {other:?}"),
        }
    }
}

#[test]
fn pn_xnum_with_a_count_of_u32_max_is_refused_before_allocating() {
    let shoff = u64_at(seed(), E_SHOFF);
    let mut bytes = with_pn_xnum(seed().to_vec(), shoff);
    put_u32(&mut bytes, shoff as usize + 44, u32::MAX);
    let (r, largest) = largest_allocation(|| read(bytes));
    assert!(matches!(r, Err(CoreError::ProgramHeadersTruncated { count: 0xffff_ffff, .. })), "{r:?}");
    assert!(largest < MIB, "{largest} bytes");
}

// ---------------------------------------------------------------------------------------------
// Absurd segments.

/// The core with PT_LOAD `index` (among the loads) edited: (field offset in the header, value).
fn with_load_fields(bytes: &[u8], index: usize, fields: &[(usize, u64)]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let load = loads(bytes)[index];
    for &(field, value) in fields {
        put_u64(&mut out, load.at + field, value);
    }
    out
}

#[test]
fn a_segment_past_the_end_of_the_file_is_truncated_memory() {
    let load = loads(seed())[3];
    let bytes = with_load_fields(seed(), 3, &[(Phdr::P_OFFSET, seed().len() as u64 + 0x1000)]);
    let core = read_ok(bytes);
    assert!(core.is_partial());
    let d = warning(&core.diagnostics, "the core is truncated");
    assert_eq!(d.address, Some(load.vaddr));
    assert_eq!(core.bytes_at(load.vaddr, 8), Err(Absence::Truncated));
    walk(&process(core, gcore()));
}

#[test]
fn segment_sizes_and_offsets_that_overflow_u64_are_clamped_not_a_panic() {
    let (o, v, f, m) = (Phdr::P_OFFSET, Phdr::P_VADDR, Phdr::P_FILESZ, Phdr::P_MEMSZ);
    let cases: Vec<(&str, Vec<u8>, bool)> = vec![
        ("offset and sizes at u64::MAX", with_load_fields(seed(), 3, &[(o, u64::MAX), (f, u64::MAX), (m, u64::MAX)]), true),
        ("a segment that wraps the address space", with_load_fields(seed(), 3, &[(v, u64::MAX - 0x10), (f, u64::MAX), (m, u64::MAX)]), true),
        (
            "two segments of u64::MAX bytes",
            with_load_fields(&with_load_fields(seed(), 3, &[(f, u64::MAX), (m, u64::MAX)]), 4, &[(f, u64::MAX), (m, u64::MAX)]),
            true,
        ),
        // Only memsz bytes are memory; the rest of filesz is never read.
        ("filesz larger than memsz", with_load_fields(seed(), 3, &[(f, u64::MAX), (m, 0x10)]), false),
    ];
    for (what, bytes, partial) in cases {
        let core = read(bytes).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(core.is_partial(), partial, "{what}: {:#?}", core.diagnostics);
        for s in core.segments.iter() {
            assert!(s.vaddr.checked_add(s.memsz).is_some() && s.present <= s.filesz && s.filesz <= s.memsz, "{what}: {s:x?}");
            let _ = core.bytes_at(s.vaddr, 64);
            let _ = core.bytes_at(s.end().saturating_sub(8), 64);
        }
        walk(&process(core, gcore()));
    }
}

#[test]
fn a_note_segment_past_the_end_of_the_file_is_an_error_not_a_panic() {
    let seg = note_segment(seed());
    for offset in [seed().len() as u64 + 100, u64::MAX / 2, u64::MAX] {
        let mut bytes = seed().to_vec();
        put_u64(&mut bytes, seg.at + Phdr::P_OFFSET, offset);
        match read(bytes) {
            Err(CoreError::NotesTruncated { offset: at, .. }) => assert_eq!(at, offset),
            other => panic!("notes at {offset:#x}: expected NotesTruncated, got {other:?}"),
        }
    }
    let mut bytes = seed().to_vec();
    put_u64(&mut bytes, seg.at + Phdr::P_FILESZ, u64::MAX);
    let core = read_ok(bytes);
    assert_eq!(core.threads.len(), SEED_THREADS);
    assert_eq!(warning(&core.diagnostics, "note segment cut off").offset, Some(seg.offset));
}

#[test]
fn overlapping_segments_are_read_and_flagged() {
    // Move a one-page segment on top of thread 1's stack.
    let rsp = register(seed(), 1, REG_RSP);
    let page = loads(seed())
        .into_iter()
        .position(|l| l.memsz == 0x1000 && l.flags & PF_X == 0 && l.vaddr >= 0x7f00_0000_0000)
        .expect("a one-page segment");
    let bytes = with_load_fields(seed(), page, &[(Phdr::P_VADDR, rsp & !0xfff)]);
    let core = read_ok(bytes);
    assert!(core.is_partial());
    let d = warning(&core.diagnostics, "overlap");
    assert!(d.address.is_some(), "{d:?}");
    let p = process(core, gcore());
    let r = report(&p, gcore());
    assert_eq!(r.threads.len(), SEED_THREADS);
}

#[test]
fn duplicated_note_headers_do_not_multiply_the_threads() {
    let seg = note_segment(seed());
    let mut extra = Vec::new();
    for _ in 0..2000 {
        extra.extend_from_slice(&seed()[seg.at..seg.at + PHDR_SIZE]);
    }
    let mut bytes = with_extra_phdrs(seed(), &extra);
    bytes.shrink_to_fit(); // so that handing the buffer over does not count as an allocation
    let (core, largest) = largest_allocation(|| read_ok(bytes));
    assert_eq!(core.threads.len(), SEED_THREADS);
    warning(&core.diagnostics, "overlap");
    assert!(largest < MIB, "{largest} bytes");
}

// ---------------------------------------------------------------------------------------------
// Not a core of an architecture knot reads (x86_64, aarch64).

#[test]
fn a_core_of_another_architecture_is_refused_by_name() {
    let mut bytes = seed().to_vec();
    put_u16(&mut bytes, E_MACHINE, 243); // EM_RISCV
    match read(bytes) {
        Err(e @ CoreError::UnsupportedArch { .. }) => assert!(e.to_string().to_lowercase().contains("riscv"), "{e}"),
        other => panic!("expected UnsupportedArch, got {other:?}"),
    }
}

#[test]
fn an_x86_64_core_labelled_aarch64_is_read_without_a_panic() {
    // aarch64 is read now: x86-64 notes under its label are wrong-sized registers, which the
    // reader must refuse or mark, never index past.
    let mut bytes = seed().to_vec();
    put_u16(&mut bytes, E_MACHINE, 183); // EM_AARCH64
    match read(bytes) {
        Ok(core) => assert!(core.threads.len() <= SEED_THREADS),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

#[test]
fn a_32_bit_core_is_unsupported_arch() {
    let mut bytes = seed().to_vec();
    bytes[4] = 1; // ELFCLASS32
    match read(bytes) {
        Err(e @ CoreError::UnsupportedArch { .. }) => assert!(e.to_string().contains("32-bit"), "{e}"),
        other => panic!("expected UnsupportedArch, got {other:?}"),
    }
}

#[test]
fn a_big_endian_core_is_unsupported_arch() {
    let mut bytes = seed().to_vec();
    bytes[5] = 2; // ELFDATA2MSB, with the header fields it implies
    bytes[E_TYPE..E_TYPE + 2].copy_from_slice(&4u16.to_be_bytes());
    bytes[E_MACHINE..E_MACHINE + 2].copy_from_slice(&21u16.to_be_bytes()); // EM_PPC64
    match read(bytes) {
        Err(e @ CoreError::UnsupportedArch { .. }) => assert!(e.to_string().contains("big-endian"), "{e}"),
        other => panic!("expected UnsupportedArch, got {other:?}"),
    }
}

#[test]
fn an_executable_is_not_a_core() {
    let mut bytes = seed().to_vec();
    put_u16(&mut bytes, E_TYPE, 2); // ET_EXEC
    assert!(matches!(read(bytes), Err(CoreError::NotCore { e_type: 2, .. })));
    let exe = std::fs::read(&gcore().binary).expect("the sample binary");
    assert!(matches!(read(exe), Err(CoreError::NotCore { e_type: 3, .. })), "a PIE is ET_DYN");
}

#[test]
fn files_that_are_not_cores_get_a_clear_error() {
    let dir = scratch("not_cores");
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.join(name);
        std::fs::write(&p, bytes).expect("write");
        p
    };
    let empty = write("empty", b"");
    let text = write("text", b"this is not a core dump\n");
    let zeros = write("zeros", &[0u8; 4096]);
    assert!(matches!(Core::open(&empty), Err(CoreError::Empty { .. })));
    assert!(matches!(Core::open(&dir), Err(CoreError::IsDirectory { .. })));
    assert!(matches!(Core::open(&text), Err(CoreError::NotElf { .. })));
    assert!(matches!(Core::open(&zeros), Err(CoreError::NotElf { .. })));
    assert!(matches!(Core::open(dir.join("missing")), Err(CoreError::Open { .. })));
    assert!(matches!(read(vec![0; 4096]), Err(CoreError::NotElf { .. })));
}

#[test]
fn a_compressed_core_cut_short_is_an_error_or_a_partial_reading() {
    let dir = scratch("compressed");
    // The committed kernel core as it is stored: gzip -9.
    let gz = std::fs::read(knot_samples::dumps_dir().join("abba/kernel/core.gz")).expect("core.gz");
    for keep in [10, gz.len() / 3, gz.len() - 1] {
        let path = dir.join(format!("cut-{keep}.core.gz"));
        std::fs::write(&path, &gz[..keep]).expect("write");
        match Core::open(&path) {
            Err(e) => assert!(e.to_string().contains("gzip"), "{e}"),
            Ok(core) => assert!(core.is_partial()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Hostile stacks. Thread 1 of the gcore seed gets registers and stack words chosen to trap a
// walker; every walk must end with a reason, within its frame bound, quickly.

const HOSTILE_THREAD: usize = 1;
/// Code with no module and so no CFI: the vsyscall page, which the core maps executable.
fn code_without_cfi(bytes: &[u8]) -> u64 {
    let page = loads(bytes).into_iter().find(|l| l.flags & PF_X != 0 && l.vaddr >= 0xffff_ffff_ff60_0000).expect("the vsyscall page");
    page.vaddr + 0x400
}

/// A scratch area deep inside thread 1's stack segment (below anything it used), zeroed.
fn hostile_area(bytes: &mut [u8], len: usize) -> u64 {
    let stack = load_holding(bytes, register(bytes, HOSTILE_THREAD, REG_RSP));
    let at = stack.vaddr + 0x10000;
    poke(bytes, at, &vec![0u8; len]);
    at
}

fn set_regs(bytes: &mut [u8], rip: u64, rsp: u64, rbp: u64) {
    set_register(bytes, HOSTILE_THREAD, REG_RIP, rip);
    set_register(bytes, HOSTILE_THREAD, REG_RSP, rsp);
    set_register(bytes, HOSTILE_THREAD, REG_RBP, rbp);
}

/// Walks the edited core; returns thread 1's stack.
fn hostile_walk(bytes: Vec<u8>, what: &str) -> Stack {
    let p = process(read_ok(bytes), gcore());
    let (mut stacks, took) = walk(&p);
    eprintln!("{what}: {} frames, {:?}, in {took:?}", stacks[HOSTILE_THREAD].frames.len(), stacks[HOSTILE_THREAD].end);
    // A guard against a walk that loops or hangs, not a speed test (the suite runs on loaded,
    // shared machines): the walk's bounds end it in well under a second.
    assert!(took < Duration::from_secs(60), "{what}: the walk took {took:?}");
    for s in &stacks {
        assert!(s.frames.len() <= DEFAULT_MAX_FRAMES);
    }
    stacks.swap_remove(HOSTILE_THREAD)
}

#[test]
fn a_frame_pointer_that_points_at_itself_ends_the_walk() {
    let mut bytes = seed().to_vec();
    let code = code_without_cfi(&bytes);
    let s = hostile_area(&mut bytes, 0x4000);
    poke_u64(&mut bytes, s, s);
    poke_u64(&mut bytes, s + 8, code);
    set_regs(&mut bytes, code, s, s);
    let stack = hostile_walk(bytes, "rbp -> itself");
    assert_eq!(stack.frames.len(), 2, "{:x?}", stack.frames);
    assert_eq!(stack.end, StackEnd::NoCaller { ip: code });
}

#[test]
fn a_frame_pointer_cycle_is_broken_by_the_rising_stack_pointer() {
    let mut bytes = seed().to_vec();
    let code = code_without_cfi(&bytes);
    let s = hostile_area(&mut bytes, 0x4000);
    // [s] -> s+32 -> s -> ...
    poke_u64(&mut bytes, s, s + 32);
    poke_u64(&mut bytes, s + 8, code);
    poke_u64(&mut bytes, s + 32, s);
    poke_u64(&mut bytes, s + 40, code);
    set_regs(&mut bytes, code, s, s);
    let stack = hostile_walk(bytes, "rbp cycle");
    assert_eq!(stack.frames.len(), 3, "{:x?}", stack.frames);
    assert!(!stack.end.is_complete());
    assert!(stack.frames.windows(2).all(|w| w[1].sp > w[0].sp));
}

#[test]
fn a_stack_full_of_return_addresses_stops_at_the_frame_limit() {
    // A real return address into libc, repeated over 2 MiB: every CFI step finds a caller.
    let good = Unwinder::new(&process(read_ok(seed().to_vec()), gcore())).walk_all();
    let ret = good[HOSTILE_THREAD].frames[1].ip;
    let mut bytes = seed().to_vec();
    let len = 2 * MIB;
    let s = hostile_area(&mut bytes, len);
    let words: Vec<u8> = std::iter::repeat_n(ret.to_le_bytes(), len / 8).flatten().collect();
    poke(&mut bytes, s, &words);
    set_regs(&mut bytes, ret, s, 0);
    let stack = hostile_walk(bytes.clone(), "2 MiB of return addresses");
    assert_eq!(stack.end, StackEnd::DepthLimit { frames: DEFAULT_MAX_FRAMES });
    assert_eq!(stack.frames.len(), DEFAULT_MAX_FRAMES);
    // The same through the report, with a lower bound.
    let p = process(read_ok(bytes), gcore());
    let opts = Options { max_walk_frames: Some(100), stacks_only: true, ..common::options_for(gcore()) };
    let t = Instant::now();
    let r = report_for(&p, &opts);
    eprintln!("report with a 100-frame bound: {:?}", t.elapsed());
    assert_eq!(r.threads[HOSTILE_THREAD].stack_end.reason, "depth_limit");
}

#[test]
fn a_zero_instruction_pointer_still_ends_with_a_reason() {
    let mut bytes = seed().to_vec();
    set_register(&mut bytes, HOSTILE_THREAD, REG_RIP, 0);
    let stack = hostile_walk(bytes, "rip = 0");
    assert_eq!(stack.frames[0].ip, 0);
    assert!(stack.frames.len() < 64);
    let mut bytes = seed().to_vec();
    set_regs(&mut bytes, 0, 0, 0);
    let stack = hostile_walk(bytes, "rip = rsp = rbp = 0");
    assert_eq!(stack.frames.len(), 1);
    assert_eq!(stack.end, StackEnd::Unreadable { address: 0 });
}

#[test]
fn an_unmapped_stack_pointer_ends_the_walk_unreadable_there() {
    for rip_in_libc in [true, false] {
        let mut bytes = seed().to_vec();
        let rip = if rip_in_libc { register(&bytes, HOSTILE_THREAD, REG_RIP) } else { code_without_cfi(&bytes) };
        set_regs(&mut bytes, rip, 0x1000, 0x1000);
        let stack = hostile_walk(bytes, "rsp unmapped");
        assert_eq!(stack.frames.len(), 1);
        match stack.end {
            StackEnd::Unreadable { address } => assert!((0x1000..0x1100).contains(&address), "{address:#x}"),
            other => panic!("rip in libc: {rip_in_libc}: expected Unreadable, got {other:?}"),
        }
    }
}

#[test]
fn registers_at_the_top_of_the_address_space_do_not_overflow() {
    // Move the vsyscall page to the last page of the address space and point the thread there.
    let mut bytes = seed().to_vec();
    let page = loads(&bytes).into_iter().position(|l| l.vaddr >= 0xffff_ffff_ff60_0000).expect("vsyscall");
    bytes = with_load_fields(&bytes, page, &[(Phdr::P_VADDR, 0xffff_ffff_ffff_f000)]);
    for sp in [u64::MAX - 7, u64::MAX - 15, u64::MAX - 23] {
        let mut b = bytes.clone();
        let top = loads(&b)[page];
        // Make the words there point back into the page: a frame pointer chain off the end.
        let at = top.offset as usize + 0xfe0;
        for i in 0..4 {
            put_u64(&mut b, at + i * 8, u64::MAX - 7);
        }
        set_regs(&mut b, 0xffff_ffff_ffff_f800, sp, sp);
        let stack = hostile_walk(b, "top of the address space");
        assert!(!stack.end.is_complete());
    }
}

// ---------------------------------------------------------------------------------------------
// Modules from hostile memory.

/// The gcore seed with NT_FILE renamed to an unknown note type: modules come from link_map.
fn without_nt_file() -> Vec<u8> {
    let nt_file = notes_of_kind(seed(), NT_FILE).remove(0);
    let mut bytes = seed().to_vec();
    put_u32(&mut bytes, nt_file.at + RawNote::TYPE, 0x0bad_0bad);
    bytes
}

/// The address of the executable's `r_debug.r_map` field, found as the dynamic linker would.
fn r_map_field(bytes: &[u8]) -> u64 {
    let (_, phdr) = auxv_entry(bytes, AT_PHDR).expect("AT_PHDR");
    let (_, phnum) = auxv_entry(bytes, AT_PHNUM).expect("AT_PHNUM");
    let mut bias = 0;
    let mut dynamic = 0;
    for i in 0..phnum {
        let at = phdr + i * 56;
        let kind = peek_u64(bytes, at) as u32;
        let vaddr = peek_u64(bytes, at + 16);
        match kind {
            6 => bias = phdr - vaddr,
            2 => dynamic = vaddr,
            _ => {}
        }
    }
    let dynamic = bias + dynamic;
    let r_debug = (0..64).map(|i| (peek_u64(bytes, dynamic + i * 16), peek_u64(bytes, dynamic + i * 16 + 8))).find(|&(tag, _)| tag == 21).expect("DT_DEBUG").1;
    r_debug + 8
}

#[test]
fn a_link_map_that_loops_back_is_cut_with_a_diagnostic() {
    let mut bytes = without_nt_file();
    let first = peek_u64(&bytes, r_map_field(&bytes));
    let mut last = first;
    while peek_u64(&bytes, last + 24) != 0 {
        last = peek_u64(&bytes, last + 24);
    }
    poke_u64(&mut bytes, last + 24, first);
    let p = process(read_ok(bytes), gcore());
    warning(&p.diagnostics, "loops back");
    assert!(p.modules.len() >= 3, "{:#?}", p.modules);
    walk(&p);
}

#[test]
fn a_link_map_longer_than_any_process_is_cut_with_a_diagnostic() {
    let mut bytes = without_nt_file();
    let field = r_map_field(&bytes);
    // 5000 entries in thread 1's unused stack, all naming one missing library.
    let n = 5000u64;
    let area = hostile_area(&mut bytes, (n as usize + 1) * 40);
    let name = area + n * 40;
    poke(&mut bytes, name, b"/nonexistent/libloop.so\0");
    for i in 0..n {
        let e = area + i * 40;
        poke_u64(&mut bytes, e + 8, name);
        poke_u64(&mut bytes, e + 24, if i + 1 < n { e + 40 } else { 0 });
    }
    poke_u64(&mut bytes, field, area);
    let t = Instant::now();
    let p = process(read_ok(bytes), gcore());
    eprintln!("a {n}-entry link_map: {:?}", t.elapsed());
    warning(&p.diagnostics, "link_map list is longer than");
}

#[test]
fn hostile_auxv_pointers_do_not_overflow_the_link_map_walk() {
    for phdr in [u64::MAX, u64::MAX - 8, u64::MAX - 60] {
        let mut bytes = without_nt_file();
        let (at, _) = auxv_entry(&bytes, AT_PHDR).expect("AT_PHDR");
        put_u64(&mut bytes, at, phdr);
        let p = process(read_ok(bytes), gcore());
        walk(&p);
    }
    // A DT_DEBUG pointing at the top of memory, and link_map entries there.
    let mut bytes = without_nt_file();
    let field = r_map_field(&bytes);
    poke_u64(&mut bytes, field, u64::MAX - 8);
    walk(&process(read_ok(bytes), gcore()));
}

#[test]
fn a_vdso_claiming_a_huge_size_does_not_overflow() {
    let (_, vdso) = auxv_entry(seed(), AT_SYSINFO_EHDR).expect("AT_SYSINFO_EHDR");
    let mut bytes = seed().to_vec();
    let phoff = peek_u64(&bytes, vdso + 32);
    let phnum = u16::from_le_bytes(peek_u64(&bytes, vdso + 56).to_le_bytes()[..2].try_into().unwrap());
    for i in 0..phnum as u64 {
        let ph = vdso + phoff + i * 56;
        if peek_u64(&bytes, ph) as u32 == PT_LOAD {
            poke_u64(&mut bytes, ph + 40, u64::MAX); // p_memsz
        }
    }
    let p = process(read_ok(bytes), gcore());
    let m = p.modules.iter().find(|m| m.path == "[vdso]").expect("the vDSO is still found, as mapped");
    assert_eq!(m.end - m.start, load_holding(seed(), vdso).memsz, "{m:?}");
    walk(&p);
}

#[test]
fn a_vdso_at_the_top_of_the_address_space_does_not_overflow() {
    // The vsyscall page moved to the last page of memory, holding a one-segment ELF image, and
    // AT_SYSINFO_EHDR pointing at it.
    let top = 0xffff_ffff_ffff_f000u64;
    let page = loads(seed()).into_iter().position(|l| l.vaddr >= 0xffff_ffff_ff60_0000).expect("vsyscall");
    let mut bytes = with_load_fields(seed(), page, &[(Phdr::P_VADDR, top)]);
    let at = loads(&bytes)[page].offset as usize;
    let mut image = vec![0u8; 0x1000];
    image[..4].copy_from_slice(b"\x7fELF");
    image[4] = 2;
    image[5] = 1;
    image[6] = 1;
    put_u16(&mut image, E_TYPE, 3);
    put_u16(&mut image, E_MACHINE, 62);
    put_u64(&mut image, E_PHOFF, 64);
    put_u16(&mut image, 52, 64);
    put_u16(&mut image, 54, PHDR_SIZE as u16);
    put_u16(&mut image, E_PHNUM, 1);
    put_u32(&mut image, 64, PT_LOAD);
    put_u64(&mut image, 64 + Phdr::P_FILESZ, 0x1000);
    put_u64(&mut image, 64 + Phdr::P_MEMSZ, 0x1000);
    bytes[at..at + 0x1000].copy_from_slice(&image);
    let (slot, _) = auxv_entry(&bytes, AT_SYSINFO_EHDR).expect("AT_SYSINFO_EHDR");
    put_u64(&mut bytes, slot, top);
    let p = process(read_ok(bytes), gcore());
    for m in &p.modules {
        assert!(m.start <= m.end, "{m:?}");
    }
    walk(&p);
}

// ---------------------------------------------------------------------------------------------
// Module files.

/// A module file with one section turned into a compressed one claiming `size` bytes, whose
/// body (`body_len` bytes of garbage) is appended to the file.
fn with_compressed_section(file: &[u8], size: u64, body_len: usize) -> (Vec<u8>, usize) {
    let mut out = file.to_vec();
    let body_at = out.len();
    out.extend(1u32.to_le_bytes()); // ELFCOMPRESS_ZLIB
    out.extend(0u32.to_le_bytes());
    out.extend(size.to_le_bytes());
    out.extend(1u64.to_le_bytes());
    let mut body = vec![0u8; body_len];
    Rng(3).fill(&mut body);
    body[0] = 0x78; // a zlib header, so the stream starts
    body[1] = 0x9c;
    out.extend(body);
    let shoff = u64_at(&out, E_SHOFF) as usize;
    let shnum = u16_at(&out, 60) as usize;
    let shstrndx = u16_at(&out, 62) as usize;
    // The last section that is not NOBITS and does not hold the section names.
    let index = (1..shnum).rev().find(|&i| i != shstrndx && u32_at(&out, shoff + i * SHDR_SIZE + 4) != 8).expect("a section");
    let sh = shoff + index * SHDR_SIZE;
    let flags = u64_at(&out, sh + 8) | 0x800; // SHF_COMPRESSED
    put_u64(&mut out, sh + 8, flags);
    put_u64(&mut out, sh + 24, body_at as u64);
    let size = (out.len() - body_at) as u64;
    put_u64(&mut out, sh + 32, size);
    (out, index)
}

#[test]
fn a_compressed_section_claiming_a_gigabyte_does_not_reserve_it_up_front() {
    let binary = std::fs::read(&gcore().binary).expect("binary");
    let (bytes, index) = with_compressed_section(&binary, 1 << 30, MIB);
    let file = ElfFile::from_bytes("compressed", bytes).expect("still an ELF file");
    let (data, largest) = largest_allocation(|| file.section_data(index).map(|d| d.len()));
    assert_eq!(data, None, "garbage does not inflate");
    assert!(largest <= 64 * MIB, "reserved {largest} bytes for a claim the data cannot back");
    // Claims past the ratio or the size limit are refused without inflating at all.
    for size in [u64::MAX, 1 << 40] {
        let (bytes, index) = with_compressed_section(&binary, size, 4096);
        let file = ElfFile::from_bytes("compressed", bytes).expect("ELF");
        let (data, largest) = largest_allocation(|| file.section_data(index).map(|d| d.len()));
        assert_eq!(data, None);
        assert!(largest < MIB, "{largest}");
    }
}

#[test]
fn a_corrupt_compressed_section_read_through_the_cache_gives_nothing_and_is_not_cached() {
    let binary = std::fs::read(&gcore().binary).expect("binary");
    let (bytes, index) = with_compressed_section(&binary, 64 * 1024, 4096);
    let dir = scratch("section-cache");
    let cache = std::sync::Arc::new(crate::process::SectionCache::new(&dir, 1 << 30));
    // Twice: the second run finds nothing cached by the first.
    for _ in 0..2 {
        let mut file = ElfFile::from_bytes("compressed", bytes.clone()).expect("still an ELF file");
        assert!(file.build_id.is_some(), "the sample has a build-id, so the cache is used");
        // As if read from a file on disk (an image in memory has no identity to key entries by).
        file.set_identity(crate::process::section_cache::FileIdentity { dev: 1, ino: 2, size: 3, mtime_ns: 4, ctime_ns: 5 });
        file.set_section_cache(Some(cache.clone()));
        assert_eq!(file.section_data(index).map(|d| d.len()), None, "garbage does not inflate");
    }
    let entries = std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
    assert_eq!(entries, 0, "nothing was stored for a section that did not inflate");
}
