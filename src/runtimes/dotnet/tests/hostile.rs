//! Hostile .NET dumps (issue 13, items 1 and 2), made here from the committed `monitor_abba` heap
//! dump: the runtime's contract descriptor rewritten with impossible sizes and offsets, and a
//! sync-block table stretched over a thousand aliases of one page. knot must answer each with a
//! diagnostic and a partial reading, in bounded memory: never a panic, an abort or gigabytes.
//!
//! The descriptor's JSON lives in `libcoreclr.so`'s read-only data, so a rewritten copy is put
//! in a new PT_LOAD at an address the process never used, and the header (in the dump's copy of
//! `.data`) is pointed at it: what a process with that descriptor would have left in its dump.

use crate::tests::dumpedit::*;
use crate::Options;
use crate::core::Core;
use crate::process::{Locator, Memory, Process};
use crate::report::Report;
use crate::runtimes::dotnet::{contract::context::Context, contract::locate};
use std::io::Read;
use std::sync::OnceLock;

use crate::tests::allocator::{peak_above_start, PEAK_SERIAL as SERIAL};

const MIB: usize = 1 << 20;

// ---------------------------------------------------------------------------------------------
// The seed.

struct Seed {
    bytes: Vec<u8>,
    locator: Locator,
}

fn seed() -> &'static Seed {
    static S: OnceLock<Seed> = OnceLock::new();
    S.get_or_init(|| {
        let d = knot_samples::dotnet::dumps("sos/syncblk.txt", false)
            .into_iter()
            .find(|d| d.sample == "monitor_abba" && d.kind == "heap")
            .expect("the committed samples/dotnet/dumps/monitor_abba/heap");
        let mut bytes = Vec::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&d.core).expect("open core.gz")).read_to_end(&mut bytes).expect("gunzip the seed");
        Seed { bytes, locator: Locator { sysroot: d.sysroot.clone(), search_dirs: d.search_dirs.clone(), ..Locator::default() } }
    })
}

fn process(bytes: Vec<u8>) -> Process {
    Process::from_core(Core::from_bytes("hostile-core", bytes).expect("the mutant is still a core"), &seed().locator)
}

fn analyze(bytes: Vec<u8>) -> Report {
    let p = process(bytes);
    crate::report_for(&p, &Options { locator: seed().locator.clone(), ..Options::default() })
}

/// An address range no PT_LOAD of `core` touches, for `len` bytes.
fn free_address(core: &[u8], len: u64) -> u64 {
    let loads = loads(core);
    (1u64..64)
        .map(|i| i << 40)
        .find(|&a| loads.iter().all(|p| p.vaddr + p.memsz <= a || p.vaddr >= a + len))
        .expect("a free address range")
}

/// `core` with `data` added as a new read-only PT_LOAD at `vaddr` (file offset page-aligned).
fn with_segment(core: &[u8], vaddr: u64, data: &[u8]) -> Vec<u8> {
    let mut out = core.to_vec();
    out.resize(out.len().next_multiple_of(4096), 0);
    let offset = out.len() as u64;
    out.extend_from_slice(data);
    let mut ph = vec![0u8; PHDR_SIZE];
    put_u32(&mut ph, 0, PT_LOAD);
    put_u32(&mut ph, 4, 4); // PF_R
    put_u64(&mut ph, Phdr::P_OFFSET, offset);
    put_u64(&mut ph, Phdr::P_VADDR, vaddr);
    put_u64(&mut ph, Phdr::P_FILESZ, data.len() as u64);
    put_u64(&mut ph, Phdr::P_MEMSZ, data.len() as u64);
    put_u64(&mut ph, 48, 4096);
    with_extra_phdrs(&out, &ph)
}

/// The seed with the runtime's descriptor JSON replaced by `edit` of it. The seed's descriptor
/// header is not in the dump (knot reads it from libcoreclr.so and relocates it): the mutant gets
/// a copy of the header in the dump, pointing at the rewritten JSON and at the relocated pointer
/// data, both in a new segment.
fn with_descriptor(edit: impl Fn(&str) -> String) -> Vec<u8> {
    let core = &seed().bytes;
    let p = process(core.clone());
    let module = locate::runtime_module(&p).expect("the seed has libcoreclr.so");
    let located = locate::locate(&p, module).unwrap_or_else(|_| panic!("the seed's descriptor is found"));
    let header = located.header_address;
    assert!(p.core.bytes_at(header, 40).is_err(), "the seed's descriptor header is in the dump: the mutation needs no copy");
    let mut head = vec![0u8; 40];
    p.read(header, &mut head).expect("the descriptor header (from the file)");
    let json_size = u32_at(&head, 12) as usize;
    let text = descriptor_text(module, json_size);
    let new = edit(&text);
    assert_ne!(new, text, "the edit changed nothing");
    let mut data = new.into_bytes();
    data.push(0);
    let text_len = data.len();
    data.resize(text_len.next_multiple_of(8), 0);
    let pd_at = data.len();
    for v in &located.pointer_data {
        data.extend_from_slice(&v.to_le_bytes());
    }
    let at = free_address(core, data.len() as u64);
    put_u32(&mut head, 12, text_len as u32);
    put_u64(&mut head, 16, at);
    put_u32(&mut head, 24, located.pointer_data.len() as u32);
    put_u64(&mut head, 32, at + pd_at as u64);
    let with_data = with_segment(core, at, &data);
    with_segment(&with_data, header, &head)
}

/// The descriptor's JSON text in the seed's libcoreclr.so (read-only data: the one text that
/// starts like a descriptor).
fn descriptor_text(module: &crate::process::Module, json_size: usize) -> String {
    let file = module.file.as_ref().expect("libcoreclr.so is at hand");
    let bytes = std::fs::read(file.path()).expect("read libcoreclr.so");
    let needle = b"{\"version\":0";
    let at = bytes.windows(needle.len()).position(|w| w == needle).expect("the descriptor's JSON in libcoreclr.so");
    let text = &bytes[at..at + json_size];
    let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
    String::from_utf8(text[..end].to_vec()).expect("UTF-8 JSON")
}

fn assert_hostile_reading(r: &Report, expect: &str, peak: usize) {
    let warnings: Vec<&str> = r.diagnostics.iter().filter(|d| d.severity == crate::Severity::Warning).map(|d| d.message.as_str()).collect();
    assert!(warnings.iter().any(|m| m.contains(expect)), "no warning mentions {expect:?}: {warnings:#?}");
    assert!(r.dump.partial, "a refused descriptor must make the reading partial");
    assert!(peak < 1024 * MIB, "peak heap {} MiB", peak / MIB);
}

const SYNC_TABLE_ENTRY: &str = "\"SyncTableEntry\":{\"!\":16,\"SyncBlock\":0}";

fn sync_table_entry(size: &str, offset: &str) -> Vec<u8> {
    with_descriptor(|t| {
        assert!(t.contains(SYNC_TABLE_ENTRY), "the .NET 10 descriptor describes SyncTableEntry as {SYNC_TABLE_ENTRY}");
        t.replace(SYNC_TABLE_ENTRY, &format!("\"SyncTableEntry\":{{\"!\":{size},\"SyncBlock\":{offset}}}"))
    })
}

// ---------------------------------------------------------------------------------------------
// Item 1: sizes and offsets from the descriptor.

#[test]
fn the_seed_reads_without_a_descriptor_warning() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let r = analyze(with_descriptor(|t| t.replacen("{", "{ ", 1)));
    assert!(!r.diagnostics.iter().any(|d| d.message.contains("SyncTableEntry")), "{:#?}", r.diagnostics);
    assert_eq!(r.verdict, crate::report::Verdict::Deadlock);
}

#[test]
fn a_sync_table_entry_size_of_u64_max_is_refused_with_a_diagnostic() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let bytes = sync_table_entry("18446744073709551615", "0");
    let (r, peak) = peak_above_start(|| analyze(bytes));
    assert_hostile_reading(&r, "SyncTableEntry is impossible: size 0xffffffffffffffff", peak);
}

#[test]
fn a_sync_table_entry_size_of_2_pow_40_is_refused_before_it_allocates() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let bytes = sync_table_entry("1099511627776", "0");
    let (r, peak) = peak_above_start(|| analyze(bytes));
    assert_hostile_reading(&r, "SyncTableEntry is impossible: size 0x10000000000", peak);
}

#[test]
fn a_sync_block_offset_of_u64_max_is_refused_with_a_diagnostic() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let bytes = sync_table_entry("16", "18446744073709551615");
    let (r, peak) = peak_above_start(|| analyze(bytes));
    assert_hostile_reading(&r, "field SyncBlock at offset 0xffffffffffffffff lies outside the type", peak);
}

#[test]
fn every_size_and_offset_at_u64_max_is_a_partial_reading_not_a_panic() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Every number after a `:` inside "types" (sizes and offsets alike).
    let bytes = with_descriptor(|t| {
        let (start, end) = (t.find("\"types\":").expect("types"), t.find("\"globals\":").expect("globals"));
        let mut out = String::from(&t[..start]);
        let mut chars = t[start..end].chars().peekable();
        while let Some(c) = chars.next() {
            out.push(c);
            if (c == ':' || c == '[') && chars.peek().is_some_and(|d| d.is_ascii_digit()) {
                while chars.peek().is_some_and(|d| d.is_ascii_digit()) {
                    chars.next();
                }
                out.push_str("18446744073709551615");
            }
        }
        out.push_str(&t[end..]);
        out
    });
    let (r, peak) = peak_above_start(|| analyze(bytes));
    assert_hostile_reading(&r, "is impossible", peak);
}

// ---------------------------------------------------------------------------------------------
// Item 2: one page aliased a thousand times as the sync-block table.

/// The seed with its sync-block table (`g_pSyncTable`) moved onto 1 024 PT_LOADs aliasing one
/// 64 KiB page, every 16-byte entry a copy of one of the seed's held monitors' entry: 4 M
/// entries that look in use, where the runtime handed out a few.
fn aliased_sync_table() -> Vec<u8> {
    let core = &seed().bytes;
    let p = process(core.clone());
    let ctx = Context::open(&p, &seed().locator).unwrap_or_else(|_| panic!("the seed's runtime is read"));
    let t = ctx.target();
    let variable = t.global("SyncTableEntries").expect("SyncTableEntries");
    let table = t.read_ptr(variable, "g_pSyncTable").expect("g_pSyncTable");
    // The entry of one of the seed's held monitors, copied over a whole page.
    let index = match crate::runtimes::dotnet::read_with(&p, &seed().locator) {
        crate::runtimes::dotnet::DotnetReading::Runtime(r) => r.monitors.iter().find_map(|m| m.sync_block_index.filter(|_| m.owner_thread.is_some())),
        _ => None,
    }
    .expect("the seed has a held sync block") as u64;
    let entry: Vec<u8> = (0..16).map(|i| t.read_u8(table + 16 * index + i, "entry").expect("the held monitor's entry")).collect();
    drop(ctx);
    drop(p);
    const PAGE: usize = 64 << 10;
    const ALIASES: u64 = 1024;
    let page: Vec<u8> = entry.iter().copied().cycle().take(PAGE).collect();
    let base = free_address(core, ALIASES * PAGE as u64);
    let mut out = core.to_vec();
    out.resize(out.len().next_multiple_of(4096), 0);
    let offset = out.len() as u64;
    out.extend_from_slice(&page);
    let mut extra = Vec::new();
    for i in 0..ALIASES {
        let mut ph = vec![0u8; PHDR_SIZE];
        put_u32(&mut ph, 0, PT_LOAD);
        put_u32(&mut ph, 4, 6); // PF_R | PF_W
        put_u64(&mut ph, Phdr::P_OFFSET, offset);
        put_u64(&mut ph, Phdr::P_VADDR, base + i * PAGE as u64);
        put_u64(&mut ph, Phdr::P_FILESZ, PAGE as u64);
        put_u64(&mut ph, Phdr::P_MEMSZ, PAGE as u64);
        put_u64(&mut ph, 48, 4096);
        extra.extend_from_slice(&ph);
    }
    let mut out = with_extra_phdrs(&out, &extra);
    poke_u64(&mut out, variable, base);
    out
}

#[test]
fn a_sync_block_table_over_a_thousand_aliases_of_one_page_is_cut_and_says_so() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let out = aliased_sync_table();
    let (r, peak) = peak_above_start(|| analyze(out));
    let json = crate::report::to_json(&r);
    assert!(json.len() < 16 * MIB, "the report is {} MiB", json.len() / MIB);
    // Whatever bounded the walk (the runtime's own count of entries handed out, the entries'
    // object headers, the caps on monitors and diagnostics), none of the aliased entries is read
    // as a lock, and what was not read is said.
    let monitors = r.locks.iter().filter(|l| l.managed.is_some()).count();
    assert!(monitors <= 2 + crate::runtimes::dotnet::threads::reading::MAX_MONITORS, "{monitors} monitors");
    assert!(
        r.diagnostics.iter().any(|d| d.severity == crate::Severity::Warning && (d.message.contains("cut") || d.message.contains("not read as a lock"))),
        "{:#?}",
        r.diagnostics.iter().map(|d| &d.message).collect::<Vec<_>>()
    );
    assert!(r.dump.partial);
    assert!(r.diagnostics.len() <= 8 * 500, "{} diagnostics", r.diagnostics.len());
    assert!(peak < 1536 * MIB, "peak heap {} MiB", peak / MIB);
}

/// Issue #30, item 12: every reader of the sync table stops at the runtime's count of entries
/// handed out, the GC roots' as the monitors': the aliased table costs what the seed does (it
/// cost 3 s and ~200 MiB more when the roots' reading walked all 4 M entries).
#[test]
fn the_gc_roots_read_the_aliased_sync_table_only_to_the_used_count() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (_, clean_peak) = peak_above_start(|| analyze(seed().bytes.clone()));
    let hostile = aliased_sync_table();
    let (_, peak) = peak_above_start(|| analyze(hostile));
    assert!(peak < clean_peak + 24 * MIB, "peak heap {} MiB where the seed's is {} MiB", peak / MIB, clean_peak / MIB);
}
