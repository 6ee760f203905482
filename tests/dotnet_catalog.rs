//! A dump is enough: every .NET sample dump read with no files at all (`--sysroot /nonexistent`,
//! no search directories: neither the runtime's `libcoreclr.so` nor the app's assemblies) gives
//! the same verdict, cycles, locks and owners, managed frame names (those not found by stack
//! scan), .NET section (threads, thread pool, heap statistics, GC state, exceptions) and crash
//! as the reading with the files, through
//! the runtime catalogue (`analyzers/dotnet/runtime-catalog.toml`). A build the catalogue lacks
//! says which file to pass and how, in the verdict's limits; the catalogue is what
//! `cargo xtask dotnet-catalog` makes from the runtime files (checked on the committed 10.0.12
//! libcoreclr.so, and on every runtime pack cached in `target/dotnet-packs/`).

mod dumpedit;

use knot::Options;
use knot::process::{ElfFile, Locator};
use knot::dotnet_catalog::{self as catalog, Build};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn no_files() -> Locator {
    Locator { sysroot: Some(PathBuf::from("/nonexistent")), ..Locator::default() }
}

fn with_files(d: &knot_samples::dotnet::DotnetDump) -> Locator {
    Locator { sysroot: d.sysroot.clone(), search_dirs: d.search_dirs.clone(), ..Locator::default() }
}

fn report(core: &Path, locator: Locator) -> Value {
    let opts = Options { locator, ..Options::default() };
    let r = knot::analyze(core, &opts).unwrap_or_else(|e| panic!("{}: {e}", core.display()));
    serde_json::to_value(&r).expect("report serialises")
}

/// What must not depend on having the files: everything a person reads about the wedge.
fn reading(r: &Value) -> Value {
    let mut dotnet = r["dotnet"].clone();
    // The summary names where the descriptor came from; everything else in it must agree.
    if let Some(s) = dotnet.get("summary").and_then(Value::as_str) {
        let cut = s.split(" (descriptor from").next().unwrap_or(s).to_string();
        dotnet["summary"] = Value::String(cut);
    }
    let threads: Vec<Value> = r["threads"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            // Managed frames the unwinder vouches for. Without libcoreclr's file its native
            // frames are walked by frame pointers and stack scan, and a scan may add a stale
            // managed frame below the real ones; knot marks such a frame "found by stack scan".
            let managed: Vec<Value> = t["frames"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|f| f["managed"] == Value::Bool(true) && f["trust"] != "scan")
                .map(|f| f["function"].clone())
                .collect();
            serde_json::json!({ "tid": t["tid"], "name": t["name"], "managed_thread_id": t["managed_thread_id"], "blocked_on": t["blocked_on"], "managed_frames": managed })
        })
        .collect();
    serde_json::json!({
        "verdict": r["verdict"],
        "verdict_limits": r["verdict_limits"],
        "deadlocks": r["deadlocks"],
        "locks": r["locks"],
        "crash": r["crash"],
        "dotnet": dotnet,
        "threads": threads,
    })
}

fn first_difference(a: &Value, b: &Value, path: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                if let Some(d) = first_difference(v, y.get(k).unwrap_or(&Value::Null), &format!("{path}.{k}")) {
                    return Some(d);
                }
            }
            y.keys().find(|k| !x.contains_key(*k)).map(|k| format!("{path}.{k}: only without files"))
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x.iter().zip(y).enumerate().find_map(|(i, (v, w))| first_difference(v, w, &format!("{path}[{i}]"))),
        _ if a == b => None,
        _ => Some(format!("{path}: with files {a}, without {b}")),
    }
}

#[test]
fn every_dotnet_dump_reads_the_same_with_no_files_at_hand() {
    let dumps = knot_samples::dotnet::dumps("sos/clrthreads.txt", true);
    assert!(!dumps.is_empty(), "no .NET dumps: the committed ones are missing");
    let mut checked = Vec::new();
    for d in &dumps {
        // A dump committed trimmed (samples/dotnet/README.md, "Trimmed dumps") left out the
        // pages the committed runtime and app files hold: it is read with them, and without them
        // the report must say the reading is partial and which bytes were not saved.
        if d.dir.join("trim.txt").is_file() {
            let without = report(&d.core, no_files());
            assert_eq!(without["dump"]["partial"], Value::Bool(true), "{}: a trimmed dump read with no files is partial", d.name());
            let diags = without["diagnostics"].to_string();
            assert!(diags.contains("were not saved in the dump, and no module file supplies them"), "{}: the pages left out are not said: {diags}", d.name());
            checked.push(format!("{} (trimmed: partial without files)", d.name()));
            continue;
        }
        let with = report(&d.core, with_files(d));
        // An arm64 dump has no .NET file at hand either way; its "files" are the guest's libc
        // and dynamic linker, which the native waits' reading needs, not the runtime's.
        let without = report(&d.core, if d.aarch64 { with_files(d) } else { no_files() });
        // The runtime really was not at hand, and the catalogue (or the dump) stood in for it.
        let diags = without["diagnostics"].to_string();
        assert!(diags.contains("libcoreclr.so: file not found"), "{}: libcoreclr.so was found somewhere: {diags}", d.name());
        let summary = without["dotnet"]["summary"].as_str().unwrap_or_default();
        assert!(summary.contains("descriptor from catalog") || summary.contains("descriptor from dump"), "{}: {summary}", d.name());
        assert_ne!(with["verdict"], Value::Null);
        let (a, b) = (reading(&with), reading(&without));
        if let Some(diff) = first_difference(&a, &b, "") {
            panic!("{}: the reading without files differs: {diff}", d.name());
        }
        let frames = b["threads"].as_array().map_or(0, |t| t.iter().map(|t| t["managed_frames"].as_array().map_or(0, Vec::len)).sum::<usize>());
        assert!(frames > 0, "{}: no managed frames at all", d.name());
        checked.push(format!("{} ({}, {frames} managed frames)", d.name(), b["verdict"]));
    }
    eprintln!("same reading with no files: {}", checked.join(", "));
}

/// A committed heap dump whose runtime build-id note is changed to one no catalogue holds.
fn uncatalogued_dump() -> (PathBuf, String) {
    let d = knot_samples::dotnet::dumps("sos/clrthreads.txt", false).into_iter().find(|d| d.sample == "monitor_abba" && d.kind == "heap").expect("the committed monitor_abba heap dump");
    let mut core = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(std::fs::File::open(&d.core).expect("open core.gz")), &mut core).expect("gunzip");
    let id: Vec<u8> = (0..20).map(|i| u8::from_str_radix(&"79945f51fb2612f13b7667a10a8fd29122664791"[2 * i..2 * i + 2], 16).unwrap()).collect();
    let fake: Vec<u8> = id.iter().map(|b| b ^ 0x5a).collect();
    let mut n = 0;
    for at in memchr::memmem::find_iter(&core.clone(), &id).collect::<Vec<_>>() {
        core[at..at + 20].copy_from_slice(&fake);
        n += 1;
    }
    assert!(n > 0, "the dump holds libcoreclr's build-id note");
    let out = knot_samples::out_dir().join("dotnet-catalog-test");
    std::fs::create_dir_all(&out).expect("mkdir");
    let path = out.join("uncatalogued.core");
    std::fs::write(&path, &core).expect("write core");
    (path, fake.iter().map(|b| format!("{b:02x}")).collect())
}

#[test]
fn an_uncatalogued_build_with_no_file_says_exactly_what_to_pass() {
    let (core, build_id) = uncatalogued_dump();
    let r = report(&core, no_files());
    let opts = Options { locator: no_files(), ..Options::default() };
    let text = knot::report::text::render(&knot::analyze(&core, &opts).expect("reads"), &Default::default());
    // `knot heap stat` names the runtime it found and why it is not read, as the verdict's limit.
    let heap = knot::heap::stat(&core, &knot::heap::HeapOptions { locator: no_files(), max_decompressed: None, max_memory: None, scratch_dir: None });
    let why = heap.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(why.contains("libcoreclr.so") && why.contains(&build_id) && why.contains("runtime catalogue has no build"), "heap stat says: {why}");
    assert!(!why.contains("no managed runtime"), "heap stat says: {why}");
    std::fs::remove_file(&core).ok();
    let limits = r["verdict_limits"].as_array().expect("verdict_limits");
    let dotnet: Vec<&Value> = limits.iter().filter(|l| l["short"] == "the .NET runtime's data").collect();
    assert_eq!(dotnet.len(), 1, "{limits:?}");
    let limit = dotnet[0].to_string();
    for needle in ["libcoreclr.so", &build_id, "runtime catalogue has no build", "not found", "--search-dir", "--sysroot", "/usr/share/dotnet/shared/Microsoft.NETCore.App/10.0.12/libcoreclr.so"] {
        assert!(limit.contains(needle), "the limit does not say {needle:?}: {limit}");
    }
    // Where a person looks first: on and right under the verdict line.
    let first_screen: String = text.lines().take(12).collect::<Vec<_>>().join("\n");
    assert!(first_screen.contains("limited by") && first_screen.contains(&build_id) && first_screen.contains("--search-dir"), "first screen:\n{first_screen}");
    assert_eq!(r["dotnet"]["managed_threads"], 0);
}

fn committed_libcoreclr() -> PathBuf {
    let dirs = knot_samples::dotnet::runtime_dirs();
    dirs.iter().map(|d| d.join("libcoreclr.so")).find(|p| p.is_file()).expect("the committed 10.0.12 libcoreclr.so")
}

#[test]
fn the_catalogue_entry_is_what_the_runtime_file_gives() {
    let file = ElfFile::open(committed_libcoreclr()).expect("libcoreclr.so parses");
    let committed = catalog::lookup("79945f51fb2612f13b7667a10a8fd29122664791").expect("10.0.12 is catalogued");
    let made = Build::from_file(&file, &committed.runtime_version, &committed.rid, &committed.file, &committed.package).expect("reads");
    assert_eq!(&made, committed);
    assert_eq!(made.file_version.as_deref(), Some("10.0.1226.42308"));
    assert_eq!(made.descriptor_rva, Some(0x6a6f70));
    assert_eq!(made.dac_table_rva, Some(0x6cc780));
    // Rendering is deterministic: the same builds give the same text, which parses back.
    let text = catalog::render(std::slice::from_ref(&made));
    assert_eq!(text, catalog::render(std::slice::from_ref(&made)));
    assert_eq!(catalog::parse("t", &text).expect("parses back"), vec![made]);
}

#[test]
fn every_cached_runtime_pack_regenerates_its_catalogue_entries() {
    let mut checked = 0;
    let all = catalog::builtin().expect("the catalogue parses");
    for b in all {
        let (id, entry) = match b.file.as_str() {
            "libcoreclr.so" => (format!("Microsoft.NETCore.App.Runtime.{}", b.rid), format!("runtimes/{}/native/libcoreclr.so", b.rid)),
            _ => (format!("Microsoft.NETCore.App.Host.{}", b.rid), format!("runtimes/{}/native/singlefilehost", b.rid)),
        };
        assert_eq!(b.package, id);
        let pack = knot_samples::nupkg::cached(&id, &b.runtime_version);
        if !pack.is_file() {
            continue;
        }
        let bytes = knot_samples::nupkg::extract(&pack, &entry).unwrap_or_else(|e| panic!("{}: {e}", pack.display()));
        let file = ElfFile::from_bytes(entry.clone(), bytes).expect("parses");
        let made = Build::from_file(&file, &b.runtime_version, &b.rid, &b.file, &b.package).expect("reads");
        assert_eq!(&made, b, "{id} {} {entry}", b.runtime_version);
        checked += 1;
    }
    if checked == 0 {
        eprintln!("skipping: no runtime packs in target/dotnet-packs/ (`cargo xtask dotnet-catalog` fetches them)");
    } else {
        eprintln!("{checked} of {} catalogue entries regenerated from the cached packs", all.len());
    }
}

#[test]
fn damaged_runtime_memory_in_a_dump_read_with_the_catalogue_does_not_panic() {
    // The catalogue says where g_dacTable is; the dump's bytes there (all of libcoreclr's
    // writable data the dump holds: the DAC table, the GC's globals, the thread store pointer)
    // are garbage: knot reports, never panics or hangs.
    let d = knot_samples::dotnet::dumps("sos/clrthreads.txt", false).into_iter().find(|d| d.sample == "monitor_abba" && d.kind == "heap").expect("committed dump");
    let mut core = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(std::fs::File::open(&d.core).expect("open")), &mut core).expect("gunzip");
    let base = 0x7f90e8200000u64;
    let build = catalog::lookup("79945f51fb2612f13b7667a10a8fd29122664791").expect("catalogued");
    let dac = base + build.dac_table_rva.expect("g_dacTable");
    let mut rng = dumpedit::Rng(0x9e37_79b9_7f4a_7c15);
    let mut damaged = 0;
    for l in dumpedit::loads(&core) {
        if l.vaddr >= base + 0x6a0000 && l.vaddr < base + 0x720000 && l.filesz > 0 {
            let at = l.file_offset(l.vaddr);
            rng.fill(&mut core[at..at + l.filesz as usize]);
            damaged += 1;
        }
    }
    assert!(damaged > 0 && dumpedit::load_holding(&core, dac).filesz > 0, "the dump holds libcoreclr's data");
    let out = knot_samples::out_dir().join("dotnet-catalog-test");
    std::fs::create_dir_all(&out).expect("mkdir");
    let path = out.join("damaged.core");
    std::fs::write(&path, &core).expect("write");
    let r = report(&path, no_files());
    std::fs::remove_file(&path).ok();
    assert_ne!(r["verdict"], Value::Null);
}

// ---------------------------------------------------------------- deployment shapes

fn deploy_dir(sample: &str) -> PathBuf {
    knot_samples::workspace_root().join("samples/dotnet/deploy-dumps").join(sample).join("heap")
}

fn sos(sample: &str, file: &str) -> String {
    std::fs::read_to_string(deploy_dir(sample).join("sos").join(file)).unwrap_or_else(|e| panic!("{sample}: sos/{file}: {e}"))
}

/// `syncblk` rows: (owner OS tid, object address, MonitorHeld).
fn syncblk(sample: &str) -> Vec<(u64, u64, u64)> {
    let mut rows: Vec<(u64, u64, u64)> = sos(sample, "syncblk.txt")
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 8 && f[0].parse::<u32>().is_ok()).then(|| {
                let hex = |s: &str| u64::from_str_radix(s, 16).expect("hex");
                (hex(f[5]), hex(f[7]), f[2].parse().expect("MonitorHeld"))
            })
        })
        .collect();
    rows.sort();
    rows
}

fn clrthreads_count(sample: &str) -> u64 {
    let text = sos(sample, "clrthreads.txt");
    let line = text.lines().find(|l| l.starts_with("ThreadCount:")).expect("ThreadCount");
    line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("count")
}

/// knot's held monitors: (owner tid, object address, SOS's MonitorHeld).
fn monitors(r: &Value) -> Vec<(u64, u64, u64)> {
    let mut v: Vec<(u64, u64, u64)> = r["locks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|l| l["kind"] == "monitor")
        .map(|l| {
            let addr = u64::from_str_radix(l["address"].as_str().expect("address").trim_start_matches("0x"), 16).expect("hex");
            let held = 1 + 2 * l["waiter_tids"].as_array().map_or(0, Vec::len) as u64;
            (l["owner_tid"].as_u64().expect("owner"), addr, held)
        })
        .collect();
    v.sort();
    v
}

#[test]
fn a_self_contained_app_reads_as_sos_reads_it_with_no_files() {
    let core = deploy_dir("self_contained").join("core.gz");
    let r = report(&core, no_files());
    assert_eq!(r["verdict"], "deadlock");
    assert_eq!(r["verdict_limits"], serde_json::json!([]), "nothing hidden with no files at hand");
    // libcoreclr.so sits in the app's directory: the version comes from the catalogue.
    assert_eq!(r["dotnet"]["runtime_version"], "10.0.12");
    assert!(r["dotnet"]["summary"].as_str().unwrap_or_default().contains("descriptor from catalog"));
    assert_eq!(monitors(&r), syncblk("self_contained"));
    assert_eq!(r["dotnet"]["managed_threads"].as_u64(), Some(clrthreads_count("self_contained")));
    let stat = sos("self_contained", "dumpheap-stat.txt");
    let total = stat.lines().find_map(|l| l.strip_prefix("Total ")).expect("Total line").replace(",", "").replace(" objects ", " objects, ");
    assert_eq!(total, format!("{} objects, {} bytes", r["dotnet"]["heap"]["total_objects"], r["dotnet"]["heap"]["total_bytes"]));
    let frames = r["threads"].to_string();
    for f in ["Knot.Samples.SelfContained.Program.WaitForAuditLock", "Knot.Samples.SelfContained.Program.WaitForLedgerLock", "System.Threading.Monitor.Enter"] {
        assert!(frames.contains(f), "no managed frame {f}");
    }
    // With the runtime's files (the same 10.0.12 libcoreclr.so) the reading is the same.
    let with = report(&core, Locator { sysroot: Some(knot_samples::dotnet::empty_sysroot()), search_dirs: knot_samples::dotnet::runtime_dirs(), ..Locator::default() });
    if let Some(diff) = first_difference(&reading(&with), &reading(&r), "") {
        panic!("self_contained: the reading without files differs: {diff}");
    }
}

#[test]
fn a_single_file_app_is_its_own_runtime_and_its_monitors_read_as_sos_reads_them() {
    let r = report(&deploy_dir("single_file").join("core.gz"), no_files());
    // No libcoreclr.so: the executable (singlefilehost 10.0.12, catalogued) is the runtime.
    assert_eq!(r["dotnet"]["runtime_version"], "10.0.12");
    assert!(r["dotnet"]["summary"].as_str().unwrap_or_default().contains("descriptor from catalog"), "{}", r["dotnet"]["summary"]);
    assert_eq!(r["dotnet"]["managed_threads"].as_u64(), Some(clrthreads_count("single_file")));
    assert_eq!(r["verdict"], "deadlock");
    // SOS (with the runtime pack's DAC) names no types in a single-file dump; owners and objects it does.
    assert_eq!(monitors(&r), syncblk("single_file"));
    // The sync table is read to the runtime's own used length (SyncBlockCache through g_dacTable),
    // as syncblk counts it.
    let table = &r["dotnet"]["sync_table"];
    assert_eq!((table["total"].as_u64(), table["free"].as_u64()), (Some(2), Some(0)), "syncblk's Total and Free");
    assert!(!runtime_warnings(&r).iter().any(|w| w.contains("sync table")), "{:#?}", runtime_warnings(&r));
}

#[test]
fn a_single_file_heap_dump_without_its_executable_says_what_would_name_its_types() {
    // The committed dump is createdump --withheap's: the bundle's pages (the app's and CoreLib's
    // metadata) are not in it, and with no files the executable is not at hand either.
    let core = deploy_dir("single_file").join("core.gz");
    let r = report(&core, no_files());
    assert_eq!(r["verdict"], "deadlock", "the wedge is read without names");
    let limits = r["verdict_limits"].as_array().expect("verdict_limits");
    assert_eq!(limits.len(), 1, "{limits:#?}");
    let l = &limits[0];
    assert_eq!(l["short"], "the single-file app's metadata");
    let build_id = "c36ad71424f1fa2ffd952574ab64dd0d952b101a"; // info.txt's runtime_buildid
    let fix = l["fix"].as_str().unwrap_or_default();
    for needle in ["--search-dir", "single_file", build_id, "createdump --full", "DOTNET_DbgMiniDumpType=4"] {
        assert!(fix.contains(needle), "the fix does not say {needle:?}: {fix}");
    }
    assert!(l["hides"].as_str().unwrap_or_default().contains("names of types and managed frames"), "{}", l["hides"]);
    // Where a person looks first: the verdict line and the line under it.
    let opts = Options { locator: no_files(), ..Options::default() };
    let text = knot::report::text::render(&knot::analyze(&core, &opts).expect("reads"), &Default::default());
    let verdict = text.lines().find(|l| l.starts_with("Verdict:")).unwrap_or_default();
    assert!(verdict.contains("(limited by the single-file app's metadata missing)"), "{verdict}");
    assert!(text.lines().any(|l| l.trim_start().starts_with("limited by the managed metadata of the single-file app") && l.contains("createdump --full")), "{text}");
    // `knot heap stat` (no verdict) says it among its warnings, once.
    let heap = knot::heap::stat(&core, &knot::heap::HeapOptions { locator: no_files(), max_decompressed: None, max_memory: None, scratch_dir: None }).expect("heap read");
    let said: Vec<String> = heap.diagnostics.iter().map(|d| d.message.clone()).filter(|m| m.starts_with("types unnamed:")).collect();
    assert_eq!(said.len(), 1, "{:#?}", heap.diagnostics);
    for needle in ["single-file app", "--search-dir", build_id, "createdump --full"] {
        assert!(said[0].contains(needle), "the warning does not say {needle:?}: {}", said[0]);
    }
    // The code lookups that failed for want of the images (met by the unwinders in parallel)
    // are said in one order, so two readings of the dump are the same report.
    let lookups: Vec<String> = r["diagnostics"].as_array().into_iter().flatten().filter_map(|d| d["message"].as_str()).filter(|m| m.starts_with("code at ")).map(str::to_string).collect();
    assert!(lookups.len() > 1, "{lookups:?}");
    assert!(lookups.windows(2).all(|w| w[0] <= w[1]), "{lookups:#?}");
    // A self-contained app (libcoreclr.so beside it; its assemblies are files, mapped, their
    // metadata pages in the dump) has neither.
    let fd = report(&deploy_dir("self_contained").join("core.gz"), no_files());
    assert!(!fd["diagnostics"].to_string().contains("types unnamed:"), "{}", fd["diagnostics"]);
}

/// `dumpheap -stat` rows of `peer/` (the same program run framework-dependent).
fn peer_rows(sample: &str) -> Vec<(u64, u64, String)> {
    let text = std::fs::read_to_string(deploy_dir(sample).join("peer/dumpheap-stat.txt")).expect("peer/dumpheap-stat.txt");
    let num = |s: &str| s.replace(',', "").parse::<u64>().unwrap_or_else(|_| panic!("not a number: {s:?}"));
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let (mt, count, bytes) = (it.next()?, it.next()?, it.next()?);
            (mt.len() >= 8 && u64::from_str_radix(mt, 16).is_ok()).then(|| (num(count), num(bytes), it.collect::<Vec<_>>().join(" ")))
        })
        .collect()
}

#[test]
fn a_single_file_apps_heap_and_gc_read_with_no_files_as_its_framework_dependent_peer() {
    // The GC's max_gen and generation_field_offsets live in the executable's .data, which the
    // dump lacks: they come from the catalogue (singlefilehost 10.0.12's entry).
    let sample = "single_file";
    let r = report(&deploy_dir(sample).join("core.gz"), no_files());
    let heap = &r["dotnet"]["heap"];
    assert!(heap["types"].is_array(), "no heap read: {:#?}", runtime_warnings(&r));
    assert!(!runtime_warnings(&r).iter().any(|w| w.contains("GC heap not read")), "{:#?}", runtime_warnings(&r));
    let knot: Vec<(u64, u64)> = heap["types"].as_array().expect("types").iter().map(|t| (t["count"].as_u64().expect("count"), t["bytes"].as_u64().expect("bytes"))).collect();
    // SOS's dumpheap crashes on this dump and its metadata is not in it (the assemblies are in the
    // executable), so the truth is the peer: the same program on the same runtime build run
    // framework-dependent and dumped at the same point (make-dump.sh). Its heap holds the same
    // objects of the app's own types — the population and the wedge's locks, with the garbage
    // the List/Dictionary growth left (no GC ran in either) — while the runtime's own objects
    // differ (host start-up, assembly loading), so whole-heap totals do not compare. Without
    // names, each app type's row is found by its (count, bytes); a pair the peer's heap has
    // once must be there once.
    let peer = peer_rows(sample);
    let app: Vec<&(u64, u64, String)> = peer.iter().filter(|(_, _, n)| n.contains("Knot.Samples.SingleFile.")).collect();
    assert!(app.len() >= 10, "peer's app rows: {app:?}");
    let (mut objects, mut bytes) = (0, 0);
    for (count, size, name) in &app {
        let here = knot.iter().filter(|k| **k == (*count, *size)).count();
        let in_peer = peer.iter().filter(|(c, b, _)| (c, b) == (count, size)).count();
        assert!(here >= 1, "{name}: no row of {count} objects, {size} bytes");
        if in_peer == 1 {
            assert_eq!(here, 1, "{name}: {count} objects, {size} bytes");
        }
        objects += count;
        bytes += size;
    }
    // The population: 1009 Order, 503 Customer, 40 Slot[] (37 + LOH + POH + Array.Empty) among them.
    for (name, count) in [("Knot.Samples.SingleFile.Order", 1009), ("Knot.Samples.SingleFile.Customer", 503), ("Knot.Samples.SingleFile.Slot[]", 40)] {
        assert!(app.iter().any(|(c, _, n)| n == name && *c == count), "peer: {name} × {count}");
    }
    eprintln!("single_file: {} app types, {objects} objects, {bytes} bytes as the peer's", app.len());
    // The GC's state, against SOS on the same dump (eeversion: workstation) and the peer's
    // gcheapstat: the same allocations on the same build commit the same per generation.
    let gc = &r["dotnet"]["gc"];
    assert!(sos(sample, "eeversion.txt").contains("Workstation mode"));
    assert_eq!((gc["layout"].as_str(), gc["server"].as_bool(), gc["heaps"].as_u64()), (Some("regions"), Some(false), Some(1)));
    assert_eq!((gc["gc_in_progress"].as_bool(), &gc["last_oom"]), (Some(false), &Value::Null), "a wedge on locks, no GC, no OOM");
    let stat = std::fs::read_to_string(deploy_dir(sample).join("peer/gcheapstat.txt")).expect("peer/gcheapstat.txt");
    let totals: Vec<Vec<u64>> = stat.lines().filter(|l| l.starts_with("Total ")).map(|l| l.split_whitespace().skip(1).filter_map(|n| n.parse().ok()).collect()).collect();
    let c = &gc["committed"];
    let committed: Vec<u64> = ["gen0", "gen1", "gen2", "loh", "poh"].iter().map(|g| c[*g].as_u64().expect("committed")).collect();
    assert_eq!(committed, totals[2], "the peer's gcheapstat committed space per generation");
}

/// The `dotnet.heap` and `dotnet.gc` of `r` against SOS's `dumpheap -stat` (every type row and the
/// totals) and `gcheapstat` (free space, committed bytes per generation) on `sample`.
fn heap_equals_sos(r: &Value, sample: &str) {
    let (sos_rows, (objects, bytes)) = dumpheap_stat(sample);
    let heap = &r["dotnet"]["heap"];
    let knot_rows: std::collections::BTreeMap<u64, (u64, u64, String)> = heap["types"]
        .as_array()
        .expect("dotnet.heap.types")
        .iter()
        .map(|t| {
            let mt = u64::from_str_radix(t["method_table"].as_str().expect("method_table").trim_start_matches("0x"), 16).expect("hex");
            (mt, (t["count"].as_u64().expect("count"), t["bytes"].as_u64().expect("bytes"), t["name"].as_str().expect("name").to_string()))
        })
        .collect();
    assert!(sos_rows.len() > 100, "{sample}: {} SOS rows", sos_rows.len());
    assert_eq!(knot_rows, sos_rows, "{sample}: dumpheap -stat rows");
    assert_eq!((heap["total_objects"].as_u64(), heap["total_bytes"].as_u64()), (Some(objects), Some(bytes)), "{sample}: dumpheap -stat's Total");
    let stat = sos(sample, "gcheapstat.txt");
    let totals: Vec<Vec<u64>> = stat.lines().filter(|l| l.starts_with("Total ")).map(|l| l.split_whitespace().skip(1).filter_map(|n| n.parse().ok()).collect()).collect();
    assert_eq!(heap["free_bytes"].as_u64(), Some(totals[1].iter().sum()), "{sample}: gcheapstat's free space");
    let c = &r["dotnet"]["gc"]["committed"];
    let knot_committed: Vec<u64> = ["gen0", "gen1", "gen2", "loh", "poh"].iter().map(|g| c[*g].as_u64().expect("committed")).collect();
    assert_eq!(knot_committed, totals[2], "{sample}: gcheapstat's committed space per generation");
}

/// The runtime reading's warnings (the files a dump names but `--sysroot /nonexistent` hides
/// excepted): none is expected on a catalogued build.
fn runtime_warnings(r: &Value) -> Vec<String> {
    r["diagnostics"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["severity"] == "warning")
        .map(|d| d["message"].as_str().unwrap_or_default().to_string())
        .filter(|m| !m.contains("file not found") && !m.contains("ELF headers are not in the dump"))
        .collect()
}

#[test]
fn a_dotnet_9_process_reads_its_deadlock_monitors_and_heap_as_sos_with_no_files() {
    // 9.0.23 (self-contained): the descriptor comes from the catalogue, what it lacks from
    // analyzers/dotnet/descriptor-9.0.toml, the sync blocks and GC places from coreclr-9.0.toml.
    let sample = "net9_abba";
    let r = report(&deploy_dir(sample).join("core.gz"), no_files());
    assert_eq!(r["dotnet"]["runtime_version"], "9.0.23");
    assert_eq!(r["dotnet"]["managed_threads"].as_u64(), Some(clrthreads_count(sample)));
    assert_eq!(r["verdict"], "deadlock");
    assert_eq!(r["verdict_limits"], serde_json::json!([]), "nothing hidden on a catalogued 9.0 build");
    assert_eq!(monitors(&r), syncblk(sample));
    // The lock objects' types, as syncblk's "SyncBlock Owner" column names them.
    let locks = r["locks"].to_string();
    for ty in ["Knot.Samples.Net9Abba.AuditLock", "Knot.Samples.Net9Abba.LedgerLock"] {
        assert!(locks.contains(ty), "no monitor on {ty}: {locks}");
    }
    let table = &r["dotnet"]["sync_table"];
    assert_eq!((table["total"].as_u64(), table["free"].as_u64()), (Some(2), Some(0)), "syncblk's Total and Free");
    heap_equals_sos(&r, sample);
    let warnings = runtime_warnings(&r);
    assert!(warnings.is_empty(), "the runtime reading warned: {warnings:#?}");
}

#[test]
fn a_dotnet_9_heap_population_reads_as_sos_with_no_files() {
    // heap_population's Program.cs on 9.0.23 under DOTNET_GCHeapHardLimit=0x10000000: a larger
    // population (LOH, POH, generics, arrays), monitors on plain objects held by named fields.
    heap_population_reads_as_sos("net9_heap", "core.gz", "9.0.23");
}

#[test]
fn a_dotnet_8_heap_population_reads_as_sos_with_no_files() {
    // The same program on 8.0.34: the holders' fields through 8.0's EEClass counts (its
    // packable fields), the types' names through GenericsDictInfo and ArrayClass.Rank.
    heap_population_reads_as_sos("net8_heap", "core.zst", "8.0.34");
}

fn heap_population_reads_as_sos(sample: &str, core: &str, version: &str) {
    let r = report(&deploy_dir(sample).join(core), no_files());
    assert_eq!(r["dotnet"]["runtime_version"], version);
    assert_eq!(r["verdict"], "deadlock");
    assert_eq!(r["verdict_limits"], serde_json::json!([]));
    assert_eq!(monitors(&r), syncblk(sample));
    assert_eq!(r["dotnet"]["managed_threads"].as_u64(), Some(clrthreads_count(sample)));
    heap_equals_sos(&r, sample);
    assert_eq!(r["dotnet"]["gc"]["hard_limit_bytes"].as_u64(), Some(0x1000_0000), "the run's DOTNET_GCHeapHardLimit (info.txt)");
    assert_eq!(r["dotnet"]["gc"]["hard_limit_source"], "setting");
    // Each monitor is named by the object holding it, as SOS dumpobjgcrefs lists that
    // object's references: (holder type, holder address, field) → the lock's object.
    for (file, ty) in [("inventory-refs.txt", "Knot.Samples.HeapPopulation.Inventory"), ("ledger-refs.txt", "Knot.Samples.HeapPopulation.Ledger")] {
        let text = sos(sample, file);
        let holder = text.lines().find_map(|l| l.strip_prefix("object ").and_then(|l| l.strip_suffix(" GC Refs:"))).expect("dumpobjgcrefs' object");
        let gate = text.lines().find_map(|l| l.strip_prefix("_gate ")).and_then(|l| l.split_whitespace().nth(1)).expect("_gate's object");
        let lock = r["locks"].as_array().expect("locks").iter().find(|l| l["address"].as_str() == Some(&format!("0x{gate}"))).unwrap_or_else(|| panic!("no lock on {gate}"));
        let referrers = &lock["managed"]["referrers"];
        assert_eq!(referrers[0]["type"], ty, "{referrers}");
        assert_eq!(referrers[0]["field"], "_gate", "{referrers}");
        assert_eq!(referrers[0]["address"].as_str(), Some(format!("0x{holder}").as_str()), "{referrers}");
    }
    let frames = r["threads"].to_string();
    for f in ["Knot.Samples.HeapPopulation.Program.WaitForLedger", "Knot.Samples.HeapPopulation.Program.WaitForInventory"] {
        assert!(frames.contains(f), "no managed frame {f}");
    }
    let warnings = runtime_warnings(&r);
    assert!(warnings.is_empty(), "the runtime reading warned: {warnings:#?}");
}

#[test]
fn a_dotnet_9_heaps_static_roots_are_named_by_their_fields_as_sos_dumpclass_lists_them() {
    // 9.0's descriptor has no statics; descriptor-9.0.toml adds MethodTable.AuxiliaryData and
    // DynamicStaticsInfo.
    static_roots_are_named_as_sos_dumpclass_lists_them("net9_heap", "core.gz");
}

#[test]
fn a_dotnet_8_heaps_static_roots_are_named_by_their_fields_as_sos_dumpclass_lists_them() {
    // 8.0 keeps a class's statics in its module's DomainLocalModule (descriptor-8.0.toml:
    // Module.DomainLocalModule, DomainLocalModule.GCStatics), and its EEClass's counts are
    // "packable" fields after the class's fixed ones (EEClassPackedFields).
    static_roots_are_named_as_sos_dumpclass_lists_them("net8_heap", "core.zst");
}

/// SOS dumpclass (the pack's DAC) lists heap_population's Program's 8 statics and their objects
/// (`sos/program-statics.txt`); each of those objects that knot shows as a top holder is rooted
/// by that field, and the largest ones (the LOH array `Big`, the collections `Orders`,
/// `Customers`, `Buckets`) are top holders.
fn static_roots_are_named_as_sos_dumpclass_lists_them(sample: &str, core: &str) {
    let r = report(&deploy_dir(sample).join(core), no_files());
    let statics: Vec<(String, String)> = sos(sample, "program-statics.txt")
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() >= 3 && w[w.len() - 3] == "static").then(|| (format!("{:#x}", u64::from_str_radix(w[w.len() - 2], 16).expect("hex")), w[w.len() - 1].to_string()))
        })
        .collect();
    assert_eq!(statics.len(), 8, "{sample}: dumpclass lists Program's 8 statics");
    let holders = r["dotnet"]["heap"]["dominators"].as_array().expect("the heap's top holders");
    let mut named = Vec::new();
    for (address, field) in &statics {
        if let Some(h) = holders.iter().find(|h| h["address"].as_str() == Some(address.as_str())) {
            assert_eq!(h["root"]["name"], format!("the static field Program.{field}"), "{sample}: {address}: {h}");
            named.push(field.as_str());
        }
    }
    for field in ["Big", "Orders", "Customers", "Buckets"] {
        assert!(named.contains(&field), "{sample}: Program.{field} is no top holder: {named:?}");
    }
}

/// `threadpool`'s counters (`Workers Total:    8`, `CPU utilization:  0%`) by name.
fn sos_pool_counters(sample: &str) -> std::collections::BTreeMap<String, u64> {
    sos(sample, "threadpool.txt")
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter_map(|(k, v)| v.trim().trim_end_matches('%').parse().ok().map(|n| (k.trim().to_string(), n)))
        .collect()
}

/// `threadpool -stat`'s rows: (MethodTable, count, name).
fn sos_pool_item_types(sample: &str) -> Vec<(u64, u64, String)> {
    let text = sos(sample, "threadpool-stat.txt");
    let rows = text.lines().skip_while(|l| !l.trim_start().starts_with("MT ")).skip(1).take_while(|l| !l.starts_with("Total "));
    let mut out: Vec<(u64, u64, String)> = rows
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() >= 4).then(|| (u64::from_str_radix(w[0], 16).expect("MT"), w[1].replace(',', "").parse().expect("count"), w[3..].join(" ")))
        })
        .collect();
    out.sort();
    out
}

#[test]
fn a_dotnet_8_thread_pool_reads_its_counters_and_queue_as_sos_threadpool() {
    // 8.0.34: PortableThreadPool.ThreadPoolInstance and ThreadPool.s_workQueue are CoreLib statics
    // in its DomainLocalModule; WorkStealingQueueList's field is `_queues` (9.0: s_queues).
    let sample = "net8_sync_over_async";
    let r = report(&deploy_dir(sample).join("core.zst"), no_files());
    assert_eq!(r["dotnet"]["runtime_version"], "8.0.34");
    let tp = &r["dotnet"]["thread_pool"];
    let sos = sos_pool_counters(sample);
    for (field, name) in [("workers_total", "Workers Total"), ("workers_running", "Workers Running"), ("workers_idle", "Workers Idle"), ("min_workers", "Worker Min Limit"), ("max_workers", "Worker Max Limit"), ("cpu_utilization", "CPU utilization")] {
        assert_eq!(tp[field].as_u64(), Some(sos[name]), "{name}: knot's {tp}");
    }
    let want = sos_pool_item_types(sample);
    assert_eq!(want.iter().map(|w| w.1).sum::<u64>(), 16, "threadpool -stat's Total");
    let mut got: Vec<(u64, u64, String)> = tp["work_item_types"]
        .as_array()
        .expect("work_item_types")
        .iter()
        .map(|t| (u64::from_str_radix(t["method_table"].as_str().expect("mt").trim_start_matches("0x"), 16).expect("hex"), t["count"].as_u64().expect("count"), t["name"].as_str().expect("name").to_string()))
        .collect();
    got.sort();
    assert_eq!(got, want, "queued work items by type");
    assert_eq!(tp["queued_work_items"].as_u64(), Some(16));
    assert_eq!(tp["unavailable"], serde_json::json!([]), "nothing left unread");
    // All 8 workers wait for tasks only a worker could run: the pool itself is the deadlock.
    assert_eq!(r["verdict"], "deadlock");
}

/// The pool's per-thread state SOS shows on the heap (`sos/threadlocals.txt`: each
/// ThreadPoolWorkQueueThreadLocals' workStealingQueue and currentThread) with the OS thread of
/// that Thread object (`sos/thread-names.txt`): local queue → its worker's OS thread id.
fn sos_local_queue_owners(sample: &str) -> std::collections::BTreeMap<u64, u64> {
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap_or_else(|_| panic!("not hex: {s}"));
    let os_tid: std::collections::BTreeMap<u64, u64> = sos(sample, "thread-names.txt")
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4).then(|| (hex(f[0]), f[3].parse().expect("os_tid")))
        })
        .collect();
    let mut out = std::collections::BTreeMap::new();
    for block in sos(sample, "threadlocals.txt").split("### dumpobj ").skip(1) {
        let value = |field: &str| block.lines().find(|l| l.split_whitespace().last() == Some(field)).map(|l| hex(l.split_whitespace().rev().nth(1).expect("value")));
        let (Some(queue), Some(thread)) = (value("workStealingQueue"), value("currentThread")) else { panic!("{sample}: a ThreadPoolWorkQueueThreadLocals without its fields: {block}") };
        out.insert(queue, *os_tid.get(&thread).unwrap_or_else(|| panic!("{sample}: Thread object {thread:#x} not in thread-names.txt")));
    }
    out
}

#[test]
fn a_dotnet_8_pools_local_queues_are_owned_by_the_workers_whose_thread_statics_hold_them() {
    // 8.0.34's thread statics are per module in each thread's ThreadLocalBlock: a worker's
    // ThreadPoolWorkQueueThreadLocals.threadLocals names its local queue. SOS lists no thread
    // static value on this dump; the heap's ThreadPoolWorkQueueThreadLocals objects say whose
    // each queue is (their currentThread).
    let sample = "net8_sync_over_async";
    let r = report(&deploy_dir(sample).join("core.zst"), no_files());
    let want = sos_local_queue_owners(sample);
    assert_eq!(want.len(), 8, "SOS's ThreadPoolWorkQueueThreadLocals");
    let got: std::collections::BTreeMap<u64, u64> = r["dotnet"]["thread_pool"]["local_queues"]
        .as_array()
        .expect("local_queues")
        .iter()
        .map(|q| {
            let address = u64::from_str_radix(q["address"].as_str().expect("address").trim_start_matches("0x"), 16).expect("hex");
            (address, q["worker_tid"].as_u64().unwrap_or_else(|| panic!("local queue {address:#x} has no owner")))
        })
        .collect();
    assert_eq!(got, want, "each local queue's worker");
}

#[test]
fn a_dotnet_8_process_reads_its_deadlock_monitors_and_frames_as_sos_with_no_files() {
    // 8.0.34 (self-contained) exports no contract descriptor: the catalogue names the build, the
    // whole descriptor comes from analyzers/dotnet/descriptor-8.0.toml, the sync blocks from
    // coreclr-8.0.toml, and each waiter's monitor from its HelperMethodFrame_1OBJ.
    let sample = "net8_abba";
    let r = report(&deploy_dir(sample).join("core.zst"), no_files());
    assert_eq!(r["dotnet"]["runtime_version"], "8.0.34");
    assert!(r["dotnet"]["summary"].as_str().unwrap_or_default().contains("descriptor from knot's data"), "{}", r["dotnet"]["summary"]);
    assert_eq!(r["dotnet"]["managed_threads"].as_u64(), Some(clrthreads_count(sample)));
    assert_eq!(r["verdict"], "deadlock");
    assert_eq!(monitors(&r), syncblk(sample), "owners, objects and waiters as syncblk's MonitorHeld");
    let locks = r["locks"].to_string();
    for ty in ["Knot.Samples.MonitorAbba.AuditLock", "Knot.Samples.MonitorAbba.LedgerLock"] {
        assert!(locks.contains(ty), "no monitor on {ty}: {locks}");
    }
    let table = &r["dotnet"]["sync_table"];
    assert_eq!((table["total"].as_u64(), table["free"].as_u64()), (Some(2), Some(0)), "syncblk's Total and Free");
    // Every managed frame clrstack -all shows (JIT'd, and ReadyToRun: Thread.Join()).
    let sos = clrstack_methods(sample);
    let knot = knot_methods(&r);
    assert_eq!(sos.values().map(Vec::len).sum::<usize>(), 7, "SOS's managed frames");
    for (tid, methods) in &sos {
        assert_eq!(knot.get(tid), Some(methods), "thread {tid:#x}: knot's managed frames differ from clrstack -all");
    }
}

#[test]
fn a_dotnet_8_process_names_generic_and_dynamic_methods_and_pointer_types_as_sos_with_no_files() {
    // 8.0 keeps a generic method's type arguments in its InstantiatedMethodDesc, a dynamic
    // method's name and signature in its DynamicMethodDesc, and a pointer type in a
    // ParamTypeDesc: their layouts are descriptor-8.0.toml's, checked here against SOS.
    let sample = "net8_generics";
    let r = report(&deploy_dir(sample).join("core.zst"), no_files());
    assert_eq!(r["dotnet"]["runtime_version"], "8.0.34");
    let sos = clrstack_methods(sample);
    let knot = knot_methods(&r);
    assert_eq!(sos.values().map(Vec::len).sum::<usize>(), 26, "SOS's managed frames");
    for (tid, methods) in &sos {
        assert_eq!(knot.get(tid), Some(methods), "thread {tid:#x}: knot's managed frames differ from clrstack -all");
    }
    // The frames the sample is made of are among those compared.
    let sos_frames: Vec<&String> = sos.values().flatten().collect();
    for frame in [
        "Knot.Samples.Net8Generics.Runner.Drive[[Knot.Samples.Net8Generics.Outer+Pair`1[[Knot.Samples.Net8Generics.Outer+Step, net8_generics]], net8_generics]](Pair`1<Step> ByRef, System.Collections.Generic.List`1<Pair`1<Step>>, System.Action)",
        "Knot.Samples.Net8Generics.Runner.Drive[[System.__Canon, System.Private.CoreLib]](System.__Canon ByRef, System.Collections.Generic.List`1<System.__Canon>, System.Action)",
        "DynamicClass.WaitThroughEmitted(System.Threading.WaitHandle, Int32*)",
        "DynamicClass.lambda_method1(System.Runtime.CompilerServices.Closure)",
        "Knot.Samples.Net8Generics.Program.RunAsync[[System.Int32, System.Private.CoreLib]](Int32)",
        "System.Runtime.CompilerServices.AsyncTaskMethodBuilder`1[[System.Int32, System.Private.CoreLib]].Start[[System.__Canon, System.Private.CoreLib]](System.__Canon ByRef)",
    ] {
        assert!(sos_frames.iter().any(|f| *f == frame), "SOS has no frame {frame}");
    }
    // The heap, its Int32*[] (an array of a ParamTypeDesc) among the types, as dumpheap -stat.
    heap_equals_sos(&r, sample);
    assert!(r["dotnet"]["heap"]["types"].to_string().contains("\"System.Int32*[]\""), "no Int32*[] row");
}

/// `clrstack -all`'s managed frames per OS thread: `Name(Signature)`, the source position cut
/// (transition Frames, `[Kind: address]`, are not methods).
fn clrstack_methods(sample: &str) -> std::collections::BTreeMap<u64, Vec<String>> {
    let mut out: std::collections::BTreeMap<u64, Vec<String>> = std::collections::BTreeMap::new();
    let mut tid = None;
    // SOS puts a warning where a dynamic method's name goes, and the name on the next line.
    let mut name_follows = false;
    for line in sos(sample, "clrstack-all.txt").lines() {
        if std::mem::take(&mut name_follows)
            && let Some(t) = tid
        {
            out.get_mut(&t).expect("thread").push(line.trim().to_string());
            continue;
        }
        if let Some(t) = line.trim().strip_prefix("OS Thread Id: 0x") {
            let t = u64::from_str_radix(t.trim(), 16).expect("thread id");
            out.insert(t, Vec::new());
            tid = Some(t);
            continue;
        }
        let f: Vec<&str> = line.trim_start().splitn(3, ' ').collect();
        let is_hex = |s: &str| s.len() == 16 && s.chars().all(|c| c.is_ascii_hexdigit());
        let (Some(t), [sp, ip, site]) = (tid, f.as_slice()) else { continue };
        if !is_hex(sp) || !is_hex(ip) || site.trim().starts_with('[') {
            continue;
        }
        let site = site.trim();
        if site.starts_with("SOS Warning:") {
            name_follows = true;
            continue;
        }
        let method = site.rsplit_once(") [").map_or(site.to_string(), |(m, _)| format!("{m})"));
        out.get_mut(&t).expect("thread").push(method);
    }
    out
}

/// knot's managed frames per thread, as `Name(Signature)` (frames a stack scan found excepted).
fn knot_methods(r: &Value) -> std::collections::BTreeMap<u64, Vec<String>> {
    r["threads"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let frames = t["frames"].as_array().into_iter().flatten().filter(|f| f["managed"] == true && f["trust"] != "scan");
            let names = frames.map(|f| format!("{}{}", f["function"].as_str().unwrap_or("??"), f["signature"].as_str().unwrap_or(""))).collect();
            (t["tid"].as_u64().expect("tid"), names)
        })
        .collect()
}

#[test]
fn a_dotnet_9_process_names_every_managed_frame_as_sos_does_with_no_files() {
    // The 9.0 descriptor has no ExecutionManager contract: the code map reads 9.0's structures
    // through analyzers/dotnet/descriptor-9.0.toml (JIT'd code and ReadyToRun CoreLib alike).
    for (sample, frames) in [("net9_abba", 7), ("net9_heap", 6)] {
        let r = report(&deploy_dir(sample).join("core.gz"), no_files());
        assert_eq!(r["dotnet"]["runtime_version"], "9.0.23");
        let sos = clrstack_methods(sample);
        let knot = knot_methods(&r);
        assert_eq!(sos.values().map(Vec::len).sum::<usize>(), frames, "{sample}: SOS's managed frames");
        for (tid, methods) in &sos {
            assert_eq!(knot.get(tid), Some(methods), "{sample} thread {tid:#x}: knot's managed frames differ from clrstack -all");
        }
        for (tid, methods) in &knot {
            assert!(sos.contains_key(tid) || methods.is_empty(), "{sample} thread {tid:#x}: managed frames SOS does not show: {methods:?}");
        }
        let warnings = r["diagnostics"].to_string();
        assert!(!warnings.contains("managed code not mapped"), "{warnings}");
    }
}

type StatRows = std::collections::BTreeMap<u64, (u64, u64, String)>;

/// `dumpheap -stat` rows: MethodTable → (count, bytes, name), and the totals.
fn dumpheap_stat(sample: &str) -> (StatRows, (u64, u64)) {
    let text = sos(sample, "dumpheap-stat.txt");
    let num = |s: &str| s.replace(',', "").parse::<u64>().unwrap_or_else(|_| panic!("not a number: {s:?}"));
    let mut rows = std::collections::BTreeMap::new();
    let mut totals = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Total ") {
            let (objects, bytes) = rest.split_once(" objects, ").expect("Total line");
            totals = Some((num(objects), num(bytes.trim_end_matches(" bytes"))));
            break;
        }
        let line = line.trim_start();
        let mut it = line.split_whitespace();
        let (Some(mt_text), Some(count), Some(bytes)) = (it.next(), it.next(), it.next()) else { continue };
        let Ok(mt) = u64::from_str_radix(mt_text, 16) else { continue };
        if mt < 0x1000 {
            continue;
        }
        // The name follows the third column (a MethodTable's hex may contain the byte count's digits).
        let rest = [mt_text, count, bytes].iter().fold(line, |l, field| l.trim_start().strip_prefix(field).expect("column"));
        let name = rest.trim().to_string();
        rows.insert(mt, (num(count), num(bytes), name));
    }
    (rows, totals.expect("a Total line"))
}

#[test]
fn another_net_10_build_reads_monitors_heap_and_hard_limit_as_sos_with_no_files() {
    // monitor_abba's wedge run on the 10.0.15 runtime pack (self-contained), not the machine's
    // 10.0.12: its per-build facts (sync blocks, the GC's hard limit) come from the catalogue
    // and analyzers/dotnet/coreclr-10.0.toml's 10.0.15 entry.
    let sample = "runtime_10_0_15";
    let r = report(&deploy_dir(sample).join("core.gz"), no_files());
    assert_eq!(r["dotnet"]["runtime_version"], "10.0.15");
    assert!(r["dotnet"]["summary"].as_str().unwrap_or_default().contains("descriptor from catalog"), "{}", r["dotnet"]["summary"]);
    assert_eq!(r["verdict"], "deadlock");
    assert_eq!(r["verdict_limits"], serde_json::json!([]), "nothing hidden on a catalogued 10.0 build");
    assert_eq!(monitors(&r), syncblk(sample));
    assert_eq!(r["dotnet"]["managed_threads"].as_u64(), Some(clrthreads_count(sample)));
    // Every type row of SOS's dumpheap -stat, its totals, and gcheapstat's free and committed bytes.
    heap_equals_sos(&r, sample);
    // The process ran with DOTNET_GCHeapHardLimit (info.txt): the limit is read from the place
    // the catalogue found in 10.0.15's code, and said to be the setting.
    let info = std::fs::read_to_string(deploy_dir(sample).join("info.txt")).expect("info.txt");
    let limit = info.split_whitespace().find_map(|w| w.strip_prefix("DOTNET_GCHeapHardLimit=")).expect("the run's setting");
    let limit = u64::from_str_radix(limit.trim_start_matches("0x").trim_end_matches(')'), 16).expect("hex");
    assert_eq!(r["dotnet"]["gc"]["hard_limit_bytes"].as_u64(), Some(limit));
    assert_eq!(r["dotnet"]["gc"]["hard_limit_source"], "setting");
    let frames = r["threads"].to_string();
    for f in ["Knot.Samples.MonitorAbba.Program.WaitForAuditLock", "Knot.Samples.MonitorAbba.Program.WaitForLedgerLock", "System.Threading.Monitor.Enter"] {
        assert!(frames.contains(f), "no managed frame {f}");
    }
}

#[test]
fn a_net9_dump_whose_dac_table_fails_the_thread_store_check_says_so_instead_of_reading_garbage() {
    // What knot adds to 9.0's descriptor (the code map's structures, the GC's and sync table's
    // g_dacTable slots) is trusted only when slot 16 holds the descriptor's ThreadStore. Here
    // that slot is made to hold slot 17's variable (a real address in libcoreclr, the wrong one),
    // as a table of another order would: knot must say the table is not this build's and read
    // nothing through it — no heap, no managed frame names from the code map.
    let sample = "net9_abba";
    let core_gz = deploy_dir(sample).join("core.gz");
    let mut core = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(std::fs::File::open(&core_gz).expect("open")), &mut core).expect("gunzip");
    let process = knot::Process::open(&core_gz, &no_files()).expect("open");
    let module = process.modules.iter().find(|m| m.name() == "libcoreclr.so").expect("libcoreclr.so in the dump");
    let build = catalog::builtin().expect("catalogue").iter().find(|b| b.file == "libcoreclr.so" && b.runtime_version == "9.0.23" && b.rid == "linux-x64").expect("9.0.23");
    let table = module.bias + build.dac_table_rva.expect("g_dacTable");
    let (slot16, slot17) = (dumpedit::peek_u64(&core, table + 16 * 8), dumpedit::peek_u64(&core, table + 17 * 8));
    assert_ne!(slot16, slot17);
    dumpedit::poke_u64(&mut core, table + 16 * 8, slot17);
    let out = knot_samples::out_dir().join("dotnet-catalog-test");
    std::fs::create_dir_all(&out).expect("mkdir");
    let path = out.join("net9-slot16.core");
    std::fs::write(&path, &core).expect("write");
    drop(core);
    let r = report(&path, no_files());
    std::fs::remove_file(&path).ok();
    let warnings = runtime_warnings(&r);
    let says = |what: &str| warnings.iter().any(|w| w.contains(what) && w.contains("slot 16 holds") && w.contains("the table's order is not this build's"));
    assert!(says("that data was not applied"), "the supplement's refusal: {warnings:#?}");
    assert!(says("GC heap not read"), "the heap's refusal: {warnings:#?}");
    assert_eq!(r["dotnet"]["heap"], Value::Null, "no heap read through the wrong table");
    let frames = r["threads"].to_string();
    for f in ["Knot.Samples.Net9Abba.Program.WaitForAuditLock", "Knot.Samples.Net9Abba.Program.WaitForLedgerLock"] {
        assert!(!frames.contains(f), "{f} named without the code map's structures");
    }
    // The same dump undamaged reads them (a_dotnet_9_process_names_every_managed_frame_as_sos_does_with_no_files).
    assert!(report(&core_gz, no_files())["threads"].to_string().contains("Knot.Samples.Net9Abba.Program.WaitForAuditLock"));
}
