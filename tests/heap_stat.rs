//! `knot heap stat CORE` prints SOS `dumpheap -stat`'s table: on every committed .NET dump with
//! SOS's reading recorded beside it, each row (MethodTable, count, bytes, name, column widths),
//! the header and the `Total` line are SOS's own lines, and the rows run from the fewest bytes to
//! the most as SOS lists them. The JSON holds the same numbers.

mod common;

use common::DotnetDump;
use knot::heap::HeapOptions;
use std::process::Command;

fn heap_dumps() -> Vec<DotnetDump> {
    common::dotnet_dumps("sos/dumpheap-stat.txt")
}

fn options(d: &DotnetDump) -> HeapOptions {
    HeapOptions { locator: d.locator.clone(), max_decompressed: None, max_memory: None, scratch_dir: None }
}

/// From `Statistics:` through the `Total` line.
fn table(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.lines().skip_while(|l| *l != "Statistics:").collect();
    if let Some(end) = lines.iter().position(|l| l.starts_with("Total ")) {
        lines.truncate(end + 1);
    }
    lines
}

fn sorted<'a>(lines: &[&'a str]) -> Vec<&'a str> {
    let mut v = lines.to_vec();
    v.sort_unstable();
    v
}

/// A row's TotalSize column.
fn row_bytes(line: &str) -> u64 {
    let cols: Vec<&str> = line.split_whitespace().collect();
    cols[2].replace(',', "").parse().unwrap_or_else(|_| panic!("no TotalSize in {line:?}"))
}

#[test]
fn every_line_of_the_table_is_sos_dumpheap_stat_s() {
    for d in heap_dumps() {
        let name = &d.name;
        let mut sos_text = std::fs::read_to_string(d.dir.join("sos/dumpheap-stat.txt")).expect("sos/dumpheap-stat.txt");
        if sos_text.contains("not in a valid state") {
            // A heap caught mid-collection: SOS walks it only when told to (`-ignoreGCState`).
            sos_text = std::fs::read_to_string(d.dir.join("sos/dumpheap-stat-ignoregcstate.txt")).expect("sos/dumpheap-stat-ignoregcstate.txt");
        }
        let sos = table(&sos_text);
        let r = knot::heap::stat(&d.core, &options(&d)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let text = r.to_text();
        let knot = table(&text);
        assert!(sos.len() > 3, "{name}: SOS's table is empty");
        assert_eq!(knot.len(), sos.len(), "{name}: rows\n{text}");
        // Header and Total line as SOS prints them (the column widths follow the widest cell).
        assert_eq!(knot[..2], sos[..2], "{name}: header");
        assert_eq!(knot.last(), sos.last(), "{name}: Total line");
        // Rows of equal size SOS lists in its own order: the same lines, byte for byte.
        assert_eq!(sorted(&knot), sorted(&sos), "{name}: rows differ from SOS's");
        let sizes: Vec<u64> = knot[2..knot.len() - 1].iter().map(|l| row_bytes(l)).collect();
        assert!(sizes.windows(2).all(|w| w[0] <= w[1]), "{name}: rows not from the fewest bytes to the most: {sizes:?}");
        assert!(r.diagnostics.is_empty(), "{name}: {:?}", r.diagnostics);
    }
}

#[test]
fn the_command_writes_the_same_numbers_as_json() {
    let Some(d) = heap_dumps().into_iter().find(|d| d.name.starts_with("gc_oom/")) else {
        knot_samples::skipped("skipping: samples/dotnet/dumps/gc_oom not found");
        return;
    };
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_knot"));
    cmd.args(["heap", "stat"]).arg(&d.core).args(["--format", "json"]);
    if let Some(s) = &d.locator.sysroot {
        cmd.arg("--sysroot").arg(s);
    }
    for dir in &d.locator.search_dirs {
        cmd.arg("--search-dir").arg(dir);
    }
    let out = cmd.output().expect("run knot heap stat");
    assert!(out.status.success(), "knot heap stat: {}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let schema: serde_json::Value = serde_json::from_str(&knot::report::heap_stat::json_schema()).expect("schema");
    let errors: Vec<String> = jsonschema::validator_for(&schema).expect("validator").iter_errors(&json).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "the JSON does not match its schema: {errors:#?}");
    let text = knot::heap::stat(&d.core, &options(&d)).expect("heap read").to_text();
    let total = table(&text).last().copied().unwrap_or_default().to_string();
    // "Total 4,216 objects, 62,558,572 bytes" → (4216, 62558572).
    let totals = |line: &str| -> (u64, u64) {
        let num = |s: &str| s.replace(',', "").parse::<u64>().unwrap_or_else(|_| panic!("not a number in {line:?}"));
        let (objects, bytes) = line.trim_start_matches("Total ").trim_end_matches(" bytes").split_once(" objects, ").unwrap_or_else(|| panic!("not a Total line: {line:?}"));
        (num(objects), num(bytes))
    };
    let sos_text = std::fs::read_to_string(d.dir.join("sos/dumpheap-stat.txt")).expect("sos/dumpheap-stat.txt");
    let sos_total = totals(sos_text.lines().find(|l| l.starts_with("Total ")).expect("SOS's Total line"));
    assert_eq!((json["total_objects"].as_u64(), json["total_bytes"].as_u64()), (Some(sos_total.0), Some(sos_total.1)), "JSON totals are SOS's");
    assert_eq!(totals(&total), sos_total, "text totals are SOS's");
    let rows: u64 = json["types"].as_array().expect("types").iter().map(|t| t["count"].as_u64().unwrap_or(0)).sum();
    assert_eq!(rows, json["total_objects"].as_u64().unwrap_or(0), "every object in a type row");
    // gc_oom ran under a 64 MiB hard limit and caught its OutOfMemoryException: the GC state says so.
    assert_eq!(json["gc"]["hard_limit_bytes"].as_u64(), Some(64 << 20));
    assert!(json["gc"]["last_oom"].is_object(), "{}", json["gc"]);
}

#[test]
fn a_dump_without_net_is_a_clear_error() {
    let abba = common::committed("abba", knot_samples::DumpKind::Gcore);
    let out = Command::new(env!("CARGO_BIN_EXE_knot")).args(["heap", "stat"]).arg(&abba.core).output().expect("run knot heap stat");
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stdout));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no managed runtime knot reads in the dump"), "{err}");
}
