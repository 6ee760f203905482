//! Property tests: random mutations of a real core (and of real module files) fed through every
//! stage, and random input to each note parser. The bodies are those of the cargo-fuzz targets
//! (`tests/fuzz_bodies/`), so what passes here is what the fuzzer runs. Each property has a
//! fixed case budget; together they run in well under a minute in a debug build on 2 cores.

use crate::tests::common;
use crate::tests::dumpedit;
use crate::tests::fuzz_bodies;

use dumpedit::*;
use crate::Options;
use crate::core::{auxv::Auxv, notes::Notes, nt_file, prpsinfo, prstatus, siginfo};
use crate::process::{Locator, Process};
use crate::unwind::{Stack, Unwinder};
use knot_samples::{DumpKind, SampleDump};
use proptest::prelude::*;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A case slower than this is a hang in the making, not a slow machine.
const CASE_LIMIT: Duration = Duration::from_secs(20);

/// Every thread's stack, checking the walk's promises: at least frame #0, at most the bound.
fn walk(process: &Process, max_frames: usize) -> Vec<Stack> {
    let mut unwinder = Unwinder::new(process);
    unwinder.max_frames = max_frames;
    let stacks = unwinder.walk_all();
    assert_eq!(stacks.len(), process.core.threads.len());
    for s in &stacks {
        assert!(!s.frames.is_empty() && s.frames.len() <= max_frames, "thread {}: {} frames, bound {max_frames}", s.tid, s.frames.len());
    }
    stacks
}

/// The fuzz body `pipeline` with the walk's promises checked first (the fuzz target reaches
/// only the public API, so the walk is checked here).
fn pipeline(bytes: Vec<u8>, opts: &Options) -> Option<crate::report::Report> {
    let process = fuzz_bodies::process(bytes, &opts.locator)?;
    walk(&process, opts.max_walk_frames.unwrap_or(fuzz_bodies::FUZZ_MAX_FRAMES));
    Some(fuzz_bodies::report(&process, opts))
}

/// `cases` per property; `PROPTEST_CASES=n` replaces it, for a longer campaign on one machine.
fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(cases);
    ProptestConfig { cases, max_shrink_iters: 256, ..ProptestConfig::default() }
}

fn gcore() -> &'static SampleDump {
    static D: OnceLock<SampleDump> = OnceLock::new();
    D.get_or_init(|| common::committed("abba", DumpKind::Gcore))
}

fn seed() -> &'static [u8] {
    static B: OnceLock<Vec<u8>> = OnceLock::new();
    B.get_or_init(|| std::fs::read(&gcore().core).expect("read the gcore seed"))
}

/// Where mutations aim in the seed: byte ranges, and the note headers' offsets.
struct Layout {
    phdrs: (usize, usize),
    notes: (usize, usize),
    note_headers: Vec<usize>,
    /// File offsets of every thread's `pr_reg`.
    registers: Vec<usize>,
}

fn layout() -> &'static Layout {
    static L: OnceLock<Layout> = OnceLock::new();
    L.get_or_init(|| {
        let p = phdrs(seed());
        let seg = note_segment(seed());
        Layout {
            phdrs: (p[0].at, p[0].at + p.len() * PHDR_SIZE),
            notes: (seg.offset as usize, seg.end_offset()),
            note_headers: notes(seed()).iter().map(|n| n.at).collect(),
            registers: notes_of_kind(seed(), NT_PRSTATUS).iter().map(|n| n.desc_at + PR_REG).collect(),
        }
    })
}

/// The module files as the sample's locator finds them (CFI and symbols from real files).
fn with_files() -> Locator {
    common::options_for(gcore()).locator
}

/// A locator that finds no file at all: every module is read from the dump only.
fn without_files() -> Locator {
    Locator { sysroot: Some("/nonexistent-knot-sysroot".into()), no_default_debug_dir: true, ..Locator::default() }
}

// ---------------------------------------------------------------------------------------------
// Mutations.

#[derive(Debug, Clone, Copy)]
enum Region {
    Header,
    ProgramHeaders,
    Notes,
    /// One of the note headers' three words (namesz, descsz, type).
    NoteHeader,
    /// One of the 27 registers of one thread.
    Register,
    Anywhere,
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip { region: Region, pos: u32, bit: u8 },
    Put32 { region: Region, pos: u32, value: u32 },
    Put64 { region: Region, pos: u32, value: u64 },
    /// Copies `len` bytes from anywhere over `region`.
    Splice { from: u32, region: Region, pos: u32, len: u16 },
    Truncate { pos: u32 },
}

/// An offset in `region` of a file of `len` bytes, aligned to `align`, with room for `width`.
fn offset(region: Region, pos: u32, align: usize, width: usize, len: usize) -> Option<usize> {
    let l = layout();
    let pos = pos as usize;
    let at = match region {
        Region::Header => pos % EHDR_SIZE,
        Region::ProgramHeaders => l.phdrs.0 + pos % (l.phdrs.1 - l.phdrs.0),
        Region::Notes => l.notes.0 + pos % (l.notes.1 - l.notes.0),
        Region::NoteHeader => l.note_headers[pos % l.note_headers.len()] + (pos / l.note_headers.len() % 3) * 4,
        Region::Register => l.registers[pos % l.registers.len()] + (pos / l.registers.len() % 27) * 8,
        Region::Anywhere => pos % len.max(1),
    };
    let at = at & !(align - 1);
    (at + width <= len).then_some(at)
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    let len = bytes.len();
    match *m {
        Mutation::Flip { region, pos, bit } => {
            if let Some(at) = offset(region, pos, 1, 1, len) {
                bytes[at] ^= 1 << (bit % 8);
            }
        }
        Mutation::Put32 { region, pos, value } => {
            if let Some(at) = offset(region, pos, 4, 4, len) {
                put_u32(bytes, at, value);
            }
        }
        Mutation::Put64 { region, pos, value } => {
            if let Some(at) = offset(region, pos, 8, 8, len) {
                put_u64(bytes, at, value);
            }
        }
        Mutation::Splice { from, region, pos, len: n } => {
            let n = n as usize;
            let from = from as usize % len.max(1);
            if let Some(at) = offset(region, pos, 1, n, len)
                && from + n <= len {
                    bytes.copy_within(from..from + n, at);
                }
        }
        Mutation::Truncate { pos } => bytes.truncate(pos as usize % len.max(1)),
    }
}

fn region() -> impl Strategy<Value = Region> {
    prop_oneof![
        1 => Just(Region::Header),
        3 => Just(Region::ProgramHeaders),
        2 => Just(Region::Notes),
        3 => Just(Region::NoteHeader),
        2 => Just(Region::Register),
        1 => Just(Region::Anywhere),
    ]
}

/// Values that make parsers trip: edges, sizes near the file's, and anything.
fn value64() -> impl Strategy<Value = u64> {
    let len = seed().len() as u64;
    let segments: Vec<(u64, u64)> = loads(seed()).iter().map(|l| (l.vaddr, l.memsz.max(1))).collect();
    // An address in some mapped segment: a plausible pointer, stack slot or code address.
    let mapped = (0..segments.len(), any::<u64>()).prop_map(move |(i, off)| segments[i].0 + off % segments[i].1);
    prop_oneof![
        3 => mapped,
        1 => Just(0u64),
        1 => Just(1),
        1 => Just(u64::MAX),
        1 => Just(u64::MAX - 7),
        1 => Just(i64::MAX as u64),
        1 => Just(1 << 32),
        1 => Just(len),
        1 => Just(len + 1),
        1 => 0..len,
        2 => any::<u64>(),
    ]
}

fn value32() -> impl Strategy<Value = u32> {
    prop_oneof![Just(0u32), Just(1), Just(u32::MAX), Just(0xffff), Just(0x8000_0000), 0..4096u32, any::<u32>()]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (region(), any::<u32>(), any::<u8>()).prop_map(|(region, pos, bit)| Mutation::Flip { region, pos, bit }),
        3 => (region(), any::<u32>(), value32()).prop_map(|(region, pos, value)| Mutation::Put32 { region, pos, value }),
        3 => (region(), any::<u32>(), value64()).prop_map(|(region, pos, value)| Mutation::Put64 { region, pos, value }),
        1 => (any::<u32>(), region(), any::<u32>(), 1..512u16).prop_map(|(from, region, pos, len)| Mutation::Splice { from, region, pos, len }),
        1 => any::<u32>().prop_map(|pos| Mutation::Truncate { pos }),
    ]
}

fn mutated(mutations: &[Mutation]) -> Vec<u8> {
    let mut bytes = seed().to_vec();
    for m in mutations {
        apply(&mut bytes, m);
    }
    bytes
}

proptest! {
    #![proptest_config(config(256))]

    /// Core → process (with the real module files, so CFI runs) → every stack.
    #[test]
    fn mutated_cores_read_and_walk_without_panicking(mutations in prop::collection::vec(mutation(), 1..5)) {
        let bytes = mutated(&mutations);
        let t = Instant::now();
        if let Some(p) = fuzz_bodies::process(bytes, &with_files()) {
            walk(&p, fuzz_bodies::FUZZ_MAX_FRAMES);
        }
        prop_assert!(t.elapsed() < CASE_LIMIT, "{:?}", t.elapsed());
    }

    /// The whole report (lock analysis, graph, groups) over mutated cores, modules from the
    /// dump only, which keeps each case cheap.
    #[test]
    fn mutated_cores_make_a_report_without_panicking(mutations in prop::collection::vec(mutation(), 1..5)) {
        let bytes = mutated(&mutations);
        let t = Instant::now();
        let _ = pipeline(bytes, &fuzz_bodies::fuzz_options(without_files()));
        prop_assert!(t.elapsed() < CASE_LIMIT, "{:?}", t.elapsed());
    }
}

proptest! {
    // Symbols from the real files cost most (debug info); a few cases cover that path.
    #![proptest_config(config(8))]

    #[test]
    fn mutated_cores_make_a_report_with_module_files(mutations in prop::collection::vec(mutation(), 1..4)) {
        let bytes = mutated(&mutations);
        let opts = Options { stacks_only: false, ..fuzz_bodies::fuzz_options(with_files()) };
        let t = Instant::now();
        let _ = pipeline(bytes, &opts);
        prop_assert!(t.elapsed() < CASE_LIMIT, "{:?}", t.elapsed());
    }
}

// ---------------------------------------------------------------------------------------------
// Module files.

fn module_file(path: &std::path::Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn binary() -> &'static [u8] {
    static B: OnceLock<Vec<u8>> = OnceLock::new();
    B.get_or_init(|| module_file(&gcore().binary))
}

fn libc() -> &'static [u8] {
    static B: OnceLock<Vec<u8>> = OnceLock::new();
    let root = gcore().sysroot.clone().expect("the committed samples have a sysroot");
    B.get_or_init(|| module_file(&root.join("usr/lib/x86_64-linux-gnu/libc.so.6")))
}

/// Overwrites at the ELF header, program headers or section headers of `file`.
#[derive(Debug, Clone)]
struct FileEdit {
    table: u8,
    pos: u32,
    value: u64,
    width: u8,
}

fn file_edit() -> impl Strategy<Value = FileEdit> {
    (0..4u8, any::<u32>(), value64(), prop_oneof![Just(1u8), Just(2), Just(4), Just(8)]).prop_map(|(table, pos, value, width)| FileEdit { table, pos, value, width })
}

fn edit_file(file: &[u8], edits: &[FileEdit]) -> Vec<u8> {
    let mut b = file.to_vec();
    let phoff = u64_at(file, E_PHOFF) as usize;
    let phnum = u16_at(file, E_PHNUM) as usize;
    let shoff = u64_at(file, E_SHOFF) as usize;
    let shnum = u16_at(file, 60) as usize;
    for e in edits {
        let w = e.width as usize;
        let (from, to) = match e.table {
            0 => (0, EHDR_SIZE),
            1 => (phoff, phoff + phnum * PHDR_SIZE),
            2 => (shoff, shoff + shnum * SHDR_SIZE),
            _ => (0, b.len()),
        };
        let at = (from + e.pos as usize % (to - from).max(1)) & !(w - 1);
        if at + w <= b.len() {
            b[at..at + w].copy_from_slice(&e.value.to_le_bytes()[..w]);
        }
    }
    b
}

proptest! {
    #![proptest_config(config(192))]

    #[test]
    fn mutated_executables_are_refused_or_read(edits in prop::collection::vec(file_edit(), 1..6)) {
        fuzz_bodies::elf_file(&edit_file(binary(), &edits));
    }
}

proptest! {
    #![proptest_config(config(48))]

    #[test]
    fn mutated_libc_is_refused_or_read(edits in prop::collection::vec(file_edit(), 1..6)) {
        fuzz_bodies::elf_file(&edit_file(libc(), &edits));
    }
}

// ---------------------------------------------------------------------------------------------
// The note parsers on their own.

/// A note whose header may lie about its sizes.
fn lying_note() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![0..16u32, any::<u32>()],
        prop_oneof![0..64u32, any::<u32>()],
        any::<u32>(),
        prop::collection::vec(any::<u8>(), 0..16),
        prop::collection::vec(any::<u8>(), 0..64),
        any::<bool>(),
    )
        .prop_map(|(namesz, descsz, kind, name, desc, honest)| {
            let mut v = encode_note(&name, kind, &desc);
            if !honest {
                put_u32(&mut v, 0, namesz);
                put_u32(&mut v, 4, descsz);
            }
            v
        })
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn the_note_iterator_stays_inside_its_data(
        notes in prop::collection::vec(lying_note(), 0..8),
        tail in prop::collection::vec(any::<u8>(), 0..16),
        base in any::<u32>(),
    ) {
        let mut data: Vec<u8> = notes.concat();
        data.extend(tail);
        let base = base as u64;
        let mut it = Notes::new(&data, base);
        let mut last = None;
        let mut count = 0;
        for n in it.by_ref() {
            count += 1;
            prop_assert!(count <= data.len() / 12 + 1, "the walk must advance");
            prop_assert!(n.offset >= base && n.offset < base + data.len() as u64);
            prop_assert!(last.is_none_or(|l| n.offset > l), "offsets rise");
            prop_assert!(n.name.len() + n.desc.len() + 12 <= data.len());
            last = Some(n.offset);
        }
        if let Some((at, why)) = &it.error {
            prop_assert!(*at >= base && *at <= base + data.len() as u64, "{at} {why}");
            prop_assert!(last.is_none_or(|l| *at > l));
        }
    }

    #[test]
    fn arbitrary_bytes_are_never_more_notes_than_they_can_hold(data in prop::collection::vec(any::<u8>(), 0..2048)) {
        let n = Notes::new(&data, 0).count();
        prop_assert!(n <= data.len() / 12);
    }

    #[test]
    fn nt_file_parses_or_says_why(
        count in prop_oneof![0..8u64, any::<u64>()],
        entries in prop::collection::vec((any::<u64>(), any::<u64>(), any::<u64>()), 0..8),
        names in prop::collection::vec(prop::collection::vec(1..=255u8, 0..12), 0..8),
        cut in any::<u16>(),
        nul_terminated in any::<bool>(),
    ) {
        let mut d = Vec::new();
        d.extend(count.to_le_bytes());
        d.extend(4096u64.to_le_bytes());
        for (s, e, p) in &entries {
            d.extend(s.to_le_bytes());
            d.extend(e.to_le_bytes());
            d.extend(p.to_le_bytes());
        }
        for name in &names {
            d.extend(name);
            if nul_terminated {
                d.push(0);
            }
        }
        let keep = d.len() - (cut as usize % 4).min(d.len());
        d.truncate(keep);
        match nt_file::parse(&d) {
            Ok(files) => {
                prop_assert_eq!(files.len() as u64, count);
                prop_assert!(files.iter().all(|f| f.end >= f.start));
            }
            Err(why) => prop_assert!(!why.is_empty()),
        }
    }

    #[test]
    fn nt_file_on_arbitrary_bytes_never_allocates_past_its_size(d in prop::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(files) = nt_file::parse(&d) {
            prop_assert!(files.len() * 24 + 16 <= d.len());
        }
    }

    #[test]
    fn fixed_layout_notes_parse_exactly_when_long_enough(d in prop::collection::vec(any::<u8>(), 0..400)) {
        // pr_reg (user_regs_struct) starts at offset 112 of NT_PRSTATUS.
        prop_assert_eq!(prstatus::parse(&d, crate::arch::Arch::X86_64).is_some(), d.len() >= 112 + crate::arch::x86_64::USER_REGS_SIZE);
        prop_assert_eq!(prpsinfo::parse(&d).is_some(), d.len() >= 136);
        prop_assert_eq!(siginfo::parse(&d).is_some(), d.len() >= 12);
    }

    #[test]
    fn auxv_stops_at_at_null_and_never_reads_past_its_data(d in prop::collection::vec(any::<u8>(), 0..512), null_at in any::<u8>()) {
        let mut d = d;
        let slot = null_at as usize * 16;
        if slot + 8 <= d.len() {
            put_u64(&mut d, slot, 0);
        }
        let auxv = Auxv::parse(&d);
        prop_assert!(auxv.entries.len() <= d.len() / 16);
        prop_assert!(auxv.entries.iter().all(|&(k, _)| k != 0));
    }
}
