//! The GC heap against SOS on every .NET dump with SOS's heap readings beside it
//! (`sos/dumpheap-stat.txt`, `sos/eeheap-gc.txt`, `sos/gcheapstat.txt`, `sos/analyzeoom.txt`,
//! recorded by `samples/dotnet/make-dumps.sh`): every type row (MethodTable, count, bytes, name),
//! the totals and free bytes of `dumpheap -stat`; every segment and region of `eeheap -gc`;
//! committed bytes per generation of `gcheapstat`; the OOM of `analyzeoom`. A dump that is
//! absent is skipped with a message.

use crate::tests::common::{self, DotnetDump as Dump};
use crate::process::Process;
use crate::runtimes::dotnet::gc::gcvars::SegmentKind;
use crate::runtimes::dotnet::gc::state::HardLimitSource;
use crate::runtimes::dotnet::gc::{self, GcReading};
use std::collections::BTreeMap;

fn dumps() -> Vec<Dump> {
    common::dotnet_dumps_with_net8("sos/dumpheap-stat.txt")
}

fn loaded() -> &'static [(Dump, GcReading)] {
    static ALL: std::sync::OnceLock<Vec<(Dump, GcReading)>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        dumps()
            .into_iter()
            .map(|d| {
                let process = Process::open(&d.core, &d.locator).unwrap_or_else(|e| panic!("{}: {e}", d.name));
                let r = match gc::read(&process, &d.locator, &[]) {
                    Some(Ok(r)) => r,
                    Some(Err(e)) => panic!("{}: GC heap not read: {e}", d.name),
                    None => panic!("{}: no .NET runtime", d.name),
                };
                (d, r)
            })
            .collect()
    })
}

/// SOS's `dumpheap -stat`; for a heap caught mid-collection, which SOS refuses to walk ("not in
/// a valid state for traversal"), its `dumpheap -stat -ignoreGCState`, as knot walks it.
fn sos_dumpheap_stat(d: &Dump) -> String {
    let plain = oracle(d, "dumpheap-stat.txt");
    if plain.contains("not in a valid state for traversal") { oracle(d, "dumpheap-stat-ignoregcstate.txt") } else { plain }
}

fn oracle(d: &Dump, file: &str) -> String {
    std::fs::read_to_string(d.dir.join("sos").join(file)).unwrap_or_else(|e| panic!("{}: sos/{file}: {e}", d.name))
}

fn num(s: &str) -> u64 {
    s.replace(',', "").parse().unwrap_or_else(|_| panic!("not a number: {s:?}"))
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap_or_else(|_| panic!("not hex: {s:?}"))
}

/// One `dumpheap -stat` row: MT, count, bytes, name.
type StatRow = (u64, u64, u64, String);

/// `dumpheap -stat`: rows and the totals.
fn parse_dumpheap_stat(text: &str) -> (Vec<StatRow>, u64, u64) {
    let mut rows = Vec::new();
    let mut totals = None;
    let mut in_rows = false;
    for line in text.lines() {
        if line.trim_start().starts_with("MT ") {
            in_rows = true;
            continue;
        }
        if let Some(rest) = line.strip_prefix("Total ") {
            let (objects, rest) = rest.split_once(" objects, ").expect("Total line");
            totals = Some((num(objects), num(rest.trim_end_matches(" bytes"))));
            break;
        }
        if !in_rows {
            continue;
        }
        let mut tok = line.split_whitespace();
        let (Some(mt), Some(count), Some(bytes)) = (tok.next(), tok.next(), tok.next()) else { continue };
        let name = line.splitn(4, char::is_whitespace).filter(|s| !s.is_empty()).count();
        let _ = name;
        // The name is everything after the third column (it may hold spaces: `Dictionary<A, B>`).
        let after = line.trim_start();
        let after = after[mt.len()..].trim_start();
        let after = after[count.len()..].trim_start();
        let name = after[bytes.len()..].trim_start().to_string();
        rows.push((hex(mt), num(count), num(bytes), name));
    }
    let (objects, bytes) = totals.expect("dumpheap -stat has a Total line");
    (rows, objects, bytes)
}

#[test]
fn heap_statistics_equal_sos_dumpheap_stat() {
    for (d, r) in loaded() {
        let (rows, objects, bytes) = parse_dumpheap_stat(&sos_dumpheap_stat(d));
        assert!(!rows.is_empty(), "{}: no rows in sos/dumpheap-stat.txt", d.name);
        let sos: BTreeMap<u64, (u64, u64, String)> = rows.iter().map(|(mt, c, b, n)| (*mt, (*c, *b, n.clone()))).collect();
        let knot: BTreeMap<u64, (u64, u64, String)> = r.stats.types.iter().map(|t| (t.method_table, (t.count, t.bytes, t.name.clone()))).collect();
        for (mt, s) in &sos {
            assert_eq!(knot.get(mt), Some(s), "{}: type row of MethodTable {mt:#x}", d.name);
        }
        for (mt, k) in &knot {
            assert!(sos.contains_key(mt), "{}: knot has a row SOS does not: {mt:#x} {k:?}", d.name);
        }
        assert_eq!((r.stats.total_objects, r.stats.total_bytes), (objects, bytes), "{}: totals", d.name);
        let sos_free: u64 = rows.iter().filter(|r| r.3 == "Free").map(|r| r.2).sum();
        assert_eq!(r.stats.free_bytes, sos_free, "{}: free bytes", d.name);
        assert!(r.broken.is_empty(), "{}: walks stopped early: {:?}", d.name, r.broken);
        // Largest first.
        assert!(r.stats.types.windows(2).all(|w| w[0].bytes >= w[1].bytes), "{}: not sorted by bytes", d.name);
        eprintln!("{}: {} types, {} objects, {} bytes equal SOS", d.name, rows.len(), objects, bytes);
    }
}

/// `eeheap -gc`: (segment, begin, allocated, committed) per section.
fn parse_eeheap(text: &str) -> Vec<(String, u64, u64, u64, u64)> {
    let mut out = Vec::new();
    let mut section = String::new();
    for line in text.lines() {
        let l = line.trim();
        if ["Small object heap", "NonGC heap", "Large object heap", "Pinned object heap"].contains(&l) {
            section = l.to_string();
            continue;
        }
        if l.starts_with("generation ") {
            section = l.trim_end_matches(':').to_string();
            continue;
        }
        let tok: Vec<&str> = l.split_whitespace().collect();
        if tok.len() >= 4 && tok[..4].iter().all(|t| t.len() >= 8 && t.chars().all(|c| c.is_ascii_hexdigit())) {
            out.push((section.clone(), hex(tok[0]), hex(tok[1]), hex(tok[2]), hex(tok[3])));
        }
    }
    out
}

fn section_of(kind: SegmentKind) -> &'static str {
    match kind {
        SegmentKind::Gen0 => "generation 0",
        SegmentKind::Gen1 => "generation 1",
        SegmentKind::Gen2 | SegmentKind::Ephemeral => "generation 2",
        SegmentKind::Frozen => "NonGC heap",
        SegmentKind::Large => "Large object heap",
        SegmentKind::Pinned => "Pinned object heap",
    }
}

#[test]
fn segments_and_regions_equal_sos_eeheap() {
    for (d, r) in loaded() {
        let mut sos = parse_eeheap(&oracle(d, "eeheap-gc.txt"));
        assert!(!sos.is_empty(), "{}: no segments in sos/eeheap-gc.txt", d.name);
        let mut knot: Vec<(String, u64, u64, u64, u64)> =
            r.segments.iter().map(|s| (section_of(s.kind).to_string(), s.address, s.start, s.allocated, s.committed)).collect();
        sos.sort();
        knot.sort();
        assert_eq!(knot, sos, "{}: segments", d.name);
        assert_eq!(r.layout, gc::HeapLayout::Regions, "{}", d.name);
        // Server GC has a heap per core (heap_population/server: 2), each with its own regions:
        // the walk covers every heap SOS lists.
        let text = oracle(d, "eeheap-gc.txt");
        let heaps = text.lines().find_map(|l| l.strip_prefix("Number of GC Heaps: ")).map_or(1, |n| num(n.trim()));
        assert_eq!(r.heap_count as u64, heaps, "{}: GC heaps", d.name);
        assert_eq!(r.server, oracle(d, "eeversion.txt").contains("Server mode"), "{}: server GC", d.name);
    }
}

/// The hard limit the process ran with, from the command recorded beside its dump (`info.txt`):
/// `DOTNET_GCHeapHardLimit=0x…` exactly, `…Percent` some limit; under a memory cgroup limit and no
/// setting (`fake-cgroup-limit.sh BYTES`: monitor_abba/container) the GC's container default,
/// max(20 MiB, 75 % of the limit); none otherwise.
#[test]
fn hard_limit_is_the_setting_the_process_ran_with() {
    let mut limited = 0;
    for (d, r) in loaded() {
        let info = std::fs::read_to_string(d.dir.join("info.txt")).unwrap_or_default();
        let how = info.lines().find(|l| l.starts_with("how ")).unwrap_or_default();
        let setting = how.split_whitespace().find_map(|w| w.strip_prefix("DOTNET_GCHeapHardLimit=")).map(|v| hex(v.trim_end_matches(|c: char| !c.is_ascii_hexdigit())));
        let s = &r.state;
        match setting {
            Some(bytes) => {
                assert_eq!(s.hard_limit_bytes, Some(bytes), "{}: {how}", d.name);
                assert_eq!(s.hard_limit_source, Some(HardLimitSource::Setting), "{}", d.name);
                limited += 1;
            }
            None if how.contains("fake-cgroup-limit.sh ") => {
                let cgroup: u64 = how.split("fake-cgroup-limit.sh ").nth(1).and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next()).map(num).expect("the limit");
                assert_eq!(s.hard_limit_bytes, Some((cgroup * 75 / 100).max(20 << 20)), "{}: {how}", d.name);
                assert_eq!(s.hard_limit_source, Some(HardLimitSource::ContainerDefault), "{}", d.name);
                limited += 1;
            }
            None if how.contains("DOTNET_GCHeapHardLimitPercent=") => {
                assert!(s.hard_limit_bytes.is_some_and(|b| b > 0), "{}: {how}", d.name);
                assert_eq!(s.hard_limit_source, Some(HardLimitSource::Setting), "{}", d.name);
            }
            // No setting and no cgroup limit where these were made: no limit.
            None => assert_eq!(s.hard_limit_bytes, None, "{}: {how}", d.name),
        }
        eprintln!("{}: {} GC, hard limit {:?}", d.name, if r.server { "server" } else { "workstation" }, s.hard_limit_bytes);
    }
    if !loaded().is_empty() {
        assert!(limited > 0, "no dump ran with DOTNET_GCHeapHardLimit");
    }
}

/// `gcheapstat`'s "Committed space:" Total row: gen0 gen1 gen2 LOH POH.
fn parse_gcheapstat_committed(text: &str) -> Vec<u64> {
    let mut in_committed = false;
    for line in text.lines() {
        if line.starts_with("Committed space:") {
            in_committed = true;
            continue;
        }
        if in_committed && line.starts_with("Total") {
            return line.split_whitespace().skip(1).map(num).collect();
        }
    }
    panic!("no Committed space Total row")
}

#[test]
fn committed_bytes_equal_sos_gcheapstat() {
    for (d, r) in loaded() {
        let sos = parse_gcheapstat_committed(&oracle(d, "gcheapstat.txt"));
        let c = &r.state.committed;
        assert_eq!(vec![c.gen0, c.gen1, c.gen2, c.loh, c.poh], sos[..5].to_vec(), "{}: committed gen0 gen1 gen2 LOH POH", d.name);
    }
}

#[test]
fn last_oom_equals_sos_analyzeoom() {
    for (d, r) in loaded() {
        let text = oracle(d, "analyzeoom.txt");
        match &r.state.last_oom {
            None => assert!(text.contains("There was no managed OOM due to allocations on the GC heap"), "{}: SOS reports an OOM:\n{text}", d.name),
            Some(o) => {
                assert!(text.contains(o.reason_text), "{}: reason {:?} not in SOS's\n{text}", d.name, o.reason_text);
                if let Some(detail) = &o.detail {
                    assert!(text.contains(&format!("Details: {detail}")), "{}: detail {detail:?} not in SOS's\n{text}", d.name);
                }
            }
        }
    }
}

/// A damaged heap: an object's MethodTable overwritten (with garbage, with the object's own
/// address, with zero) and a region's object sizes inflated. The walk of that region stops at the
/// broken object with a diagnostic, the other regions are walked whole, nothing loops or panics.
#[test]
fn a_damaged_object_is_passed_counted_as_sos_counts_it() {
    let Some((d, clean)) = loaded().iter().find(|(d, _)| d.name == "monitor_abba/heap") else {
        knot_samples::skipped("skipping: no monitor_abba/heap dump");
        return;
    };
    let gen0 = clean.segments.iter().find(|s| s.kind == SegmentKind::Gen0 && s.allocated > s.start).expect("a gen0 region with objects");
    let mut raw = Vec::new();
    let mut gz = flate2::read::GzDecoder::new(std::fs::File::open(&d.core).expect("core"));
    if d.core.extension().is_some_and(|e| e == "gz") {
        std::io::Read::read_to_end(&mut gz, &mut raw).expect("gunzip");
    } else {
        raw = std::fs::read(&d.core).expect("core");
    }
    let process = Process::open(&d.core, &d.locator).expect("open");
    // The 10th object of the region.
    let mut at = gen0.start;
    for _ in 0..10 {
        let mt = u64::from_le_bytes(process.core.bytes_at(at, 8).expect("object")[..8].try_into().expect("8")) & !7;
        let flags = u32::from_le_bytes(process.core.bytes_at(mt, 4).expect("mt")[..4].try_into().expect("4"));
        let base = u32::from_le_bytes(process.core.bytes_at(mt + 4, 4).expect("mt")[..4].try_into().expect("4")) as u64;
        let comp = if flags & 0x8000_0000 != 0 { (flags & 0xffff) as u64 } else { 0 };
        let count = if comp != 0 { u32::from_le_bytes(process.core.bytes_at(at + 8, 4).expect("count")[..4].try_into().expect("4")) as u64 } else { 0 };
        at += (base + count * comp).max(24).div_ceil(8) * 8;
    }
    let (offset, _) = process.core.segments.locate(at).expect("in the dump");
    drop(process);
    let dir = tempfile::tempdir().expect("tmp");
    for (what, value) in [("garbage", 0x4141_4141_4141_4140u64), ("itself", at), ("zero", 0)] {
        let mut bad = raw.clone();
        bad[offset as usize..offset as usize + 8].copy_from_slice(&value.to_le_bytes());
        let path = dir.path().join(format!("core-{what}"));
        std::fs::write(&path, &bad).expect("write");
        let p = Process::open(&path, &d.locator).expect("open damaged");
        let r = match gc::read(&p, &d.locator, &[]) {
            Some(Ok(r)) => r,
            other => panic!("{what}: {:?}", other.map(|r| r.map(|_| ()))),
        };
        // As SOS's dumpheap: the bad object counted as one of no size, the walk going on at the
        // next word that is a MethodTable, the region never cut short. SOS looks from 32 bytes
        // past a bad object on, so the object right after a 24-byte one is passed with it.
        assert!(r.broken.is_empty(), "{what}: {:?}", r.broken);
        assert_eq!(r.stats.skipped_objects, 1, "{what}: one bad object passed");
        let (got, all) = (r.stats.total_objects, clean.stats.total_objects);
        assert!(got == all || got + 1 == all, "{what}: {got} objects counted of {all}, the bad one among them");
        let unknown = r.stats.types.iter().find(|t| t.name.starts_with("<unknown_type_")).unwrap_or_else(|| panic!("{what}: no unknown type row"));
        assert_eq!((unknown.count, unknown.bytes), (1, 0), "{what}: {unknown:?}");
    }
}

/// The report's walk runs before the stacks say which locks there are, so it looks for the
/// referrers of every object a lock may be on: the referrers of those wanted are the ones a walk
/// for exactly them finds, and it says so when it cannot tell (a target it did not look for, or
/// a segment whose hits were cut).
#[test]
fn a_walk_for_more_targets_names_the_referrers_of_those_wanted_as_a_walk_for_them() {
    use crate::runtimes::dotnet::contract::context::Context;
    let (mut named, mut cut) = (0, 0);
    for d in dumps() {
        let process = Process::open(&d.core, &d.locator).unwrap_or_else(|e| panic!("{}: {e}", d.name));
        let Ok(c) = Context::open(&process, &d.locator) else { panic!("{}: no runtime", d.name) };
        let walked = gc::walk_in(&c, &[], None, &crate::scratch::Place::Memory).unwrap_or_else(|e| panic!("{}: {e}", d.name)).reading.walked.expect("kept");
        let objects: Vec<u64> = walked.nodes.iter().flat_map(|n| n.addresses()).collect();
        // A few objects wanted, a few more looked for as well.
        let wanted: Vec<u64> = objects.iter().copied().step_by(objects.len() / 5 + 1).collect();
        let more: Vec<u64> = wanted.iter().copied().chain(objects.iter().copied().skip(1).step_by(objects.len() / 5 + 1)).collect();
        let exact = gc::read_in(&c, &wanted, false).unwrap_or_else(|e| panic!("{}: {e}", d.name));
        let ahead = gc::walk_in(&c, &more, None, &crate::scratch::Place::Memory).unwrap_or_else(|e| panic!("{}: {e}", d.name)).resolve(&c, &wanted).expect("no segment cut");
        assert_eq!(ahead.referrers, exact.referrers, "{}", d.name);
        assert_eq!(ahead.stats, exact.stats, "{}", d.name);
        named += exact.referrers.values().map(Vec::len).sum::<usize>();
        // Not looked for: no answer.
        let stranger = objects.iter().copied().find(|o| !more.contains(o)).expect("an object not looked for");
        assert!(gc::walk_in(&c, &more, None, &crate::scratch::Place::Memory).expect("walk").resolve(&c, &[stranger]).is_none(), "{}", d.name);
        // Every object of the heap looked for: where a segment's hits were cut, fewer cannot
        // be told; else the answer is the exact walk's.
        match gc::walk_in(&c, &objects, None, &crate::scratch::Place::Memory).expect("walk").resolve(&c, &wanted) {
            Some(r) => assert_eq!(r.referrers, exact.referrers, "{}: every object looked for", d.name),
            None => cut += 1,
        }
    }
    assert!(named > 0, "some wanted object has referrers");
    assert!(cut > 0, "some heap has a segment whose hits were cut");
}

/// The heap graph, its dominator tree, retained sizes, holders and root paths are the same
/// whether their arrays live in memory or in scratch files (`--scratch-dir`), on every
/// committed dump; the scratch files are gone once read.
#[test]
fn the_graphs_answers_are_the_same_in_memory_and_in_scratch_files() {
    use crate::runtimes::dotnet::contract::context::Context;
    use crate::scratch::Place;
    let dir = tempfile::tempdir().expect("a scratch dir");
    let files = Place::Files(crate::scratch::ScratchDir::new(dir.path().to_path_buf(), 0));
    let mut read = 0;
    // The dumps with holders, suspects and many roots (the others' heaps add time, not cases).
    for d in dumps().into_iter().filter(|d| ["heap_graph", "heap_growth", "cache_leak"].iter().any(|s| d.name.contains(s))) {
        let process = Process::open(&d.core, &d.locator).unwrap_or_else(|e| panic!("{}: {e}", d.name));
        let Ok(c) = Context::open(&process, &d.locator) else { panic!("{}: no runtime", d.name) };
        let Ok(memory) = gc::holders::read_at(&c, &[], &Place::Memory) else { continue };
        let scratch = gc::holders::read_at(&c, &[], &files).unwrap_or_else(|e| panic!("{}: in memory but not in scratch: {e}", d.name));
        let (a, b) = (&memory.graph, &scratch.graph);
        assert!(!a.types.is_empty() && b.edges.in_file() && !a.edges.in_file(), "{}: where the arrays are", d.name);
        for (what, x, y) in [("types", &a.types, &b.types), ("edge_start", &a.edge_start, &b.edge_start), ("edges", &a.edges, &b.edges)] {
            assert!(x[..] == y[..], "{}: {what}", d.name);
        }
        assert_eq!(format!("{:?}", memory.retention), format!("{:?}", scratch.retention), "{}: dominators, retained sizes, holders, suspects", d.name);
        assert_eq!(format!("{:?}", memory.holders_by_path(&c)), format!("{:?}", scratch.holders_by_path(&c)), "{}: root paths", d.name);
        read += 1;
    }
    assert!(read > 0 || dumps().is_empty(), "no dump's graph read");
    println!("{read} dumps read in memory and in scratch");
    assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0, "no scratch file left");
}

/// The graph's edges are what reading every object of the dump by its type's GC description
/// gives (the second pass the edges made before the walk kept the references): each node's
/// references in field order, null, outside and mid-object ones dropped, then its dependent
/// handles' secondaries; on the committed dumps with the most references (arrays of references,
/// of structs with references; server and arm64 heaps) and those with a dependent handle.
#[test]
fn the_edges_from_the_walks_references_are_those_read_again_from_the_dump() {
    use crate::runtimes::dotnet::contract::context::Context;
    use crate::runtimes::dotnet::gc::gcdesc::GcDesc;
    let mut checked = 0;
    for d in dumps().into_iter().filter(|d| ["heap_graph", "cache_leak", "heap_population", "failfast_exception", "autofac"].iter().any(|s| d.name.contains(s))) {
        let process = Process::open(&d.core, &d.locator).unwrap_or_else(|e| panic!("{}: {e}", d.name));
        let Ok(c) = Context::open(&process, &d.locator) else { panic!("{}: no runtime", d.name) };
        let g = gc::read_graph(&c, &[], None).unwrap_or_else(|e| panic!("{}: {e}", d.name)).graph;
        let t = c.target();
        let build = gc::build_facts(&c).expect("build facts");
        let p = gc::prepare(c.module, &t, build).expect("prepared");
        let sync = crate::runtimes::dotnet::threads::syncblock::read_cache(&t, c.module, &build.layout).ok();
        let dependent = gc::roots::read_ahead(&t, &build.layout, &p.vars, sync, &g).dependent(&g);
        let descs: Vec<Option<GcDesc>> = g.type_table.iter().map(|&mt| GcDesc::read(&t, mt).ok()).collect();
        let (lo, hi) = g.index.bounds();
        let mut edges = 0;
        for i in 0..g.len() as u32 {
            let at = g.address(i).expect("an address");
            let size = u64::from(g.sizes[i as usize]);
            let mut want = Vec::new();
            if let Some(desc) = &descs[g.types[i as usize] as usize]
                && let Ok(bytes) = t.mem.chunk(at, size as usize)
            {
                let r = desc.offsets(size, |off| {
                    let v = u64::from_le_bytes(bytes[off as usize..off as usize + 8].try_into().expect("8 bytes"));
                    if let Some(j) = g.node_of(v).filter(|_| v >= lo && v <= hi) {
                        want.push(j);
                    }
                });
                if r.is_err() {
                    want.clear();
                }
            }
            let from = dependent.partition_point(|e| e.0 < i);
            want.extend(dependent[from..].iter().take_while(|e| e.0 == i).map(|e| e.1));
            assert_eq!(g.edges_of(i), &want[..], "{}: node {i} at {at:#x}", d.name);
            edges += want.len();
        }
        assert_eq!(edges, g.edges.len(), "{}", d.name);
        checked += 1;
    }
    assert!(checked > 0 || dumps().is_empty(), "no dump's graph read");
    println!("{checked} dumps' edges checked against the dump");
}
