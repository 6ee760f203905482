//! `knot heap diff` on one process dumped twice an allocation burst apart
//! (`samples/dotnet/dumps/heap_growth/{before,after}`): every type's growth in count and bytes
//! equals the difference of SOS's two `dumpheap -stat` readings, and the burst's own objects
//! grew as the program built them (4000 more `Session`s, each with its own `byte[1000]`).

use knot::heap::HeapOptions;
use knot::process::Locator;
use std::collections::BTreeMap;

/// Sessions added by the burst, and the sizes SOS gives a Session and its payload.
const BURST: i64 = 4000;
const SESSION_BYTES: i64 = 48;
const PAYLOAD_BYTES: i64 = 24 + 1000;

fn num(s: &str) -> u64 {
    s.replace(',', "").parse().unwrap_or_else(|_| panic!("not a number: {s:?}"))
}

/// `dumpheap -stat` by type name: (count, bytes), names with spaces kept whole.
fn dumpheap_stat(text: &str) -> BTreeMap<String, (u64, u64)> {
    let mut out: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut in_rows = false;
    for line in text.lines() {
        if line.trim_start().starts_with("MT ") {
            in_rows = true;
            continue;
        }
        if line.starts_with("Total ") {
            break;
        }
        if !in_rows {
            continue;
        }
        let mut rest = line.trim_start();
        let mut cols = Vec::new();
        for _ in 0..3 {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            cols.push(&rest[..end]);
            rest = rest[end..].trim_start();
        }
        let e = out.entry(rest.to_string()).or_default();
        e.0 += num(cols[1]);
        e.1 += num(cols[2]);
    }
    out
}

fn growth_dumps() -> Option<(knot_samples::dotnet::DotnetDump, knot_samples::dotnet::DotnetDump)> {
    let all: Vec<_> = knot_samples::dotnet::dumps("sos/dumpheap-stat.txt", false).into_iter().filter(|d| d.sample == "heap_growth").collect();
    let before = all.iter().find(|d| d.kind == "before").cloned();
    let after = all.iter().find(|d| d.kind == "after").cloned();
    match (before, after) {
        (Some(b), Some(a)) => Some((b, a)),
        _ => {
            knot_samples::skipped("skipping: samples/dotnet/dumps/heap_growth/{before,after} not found");
            None
        }
    }
}

#[test]
fn growth_equals_sos_and_the_construction() {
    let Some((before, after)) = growth_dumps() else { return };
    let locator = Locator { sysroot: before.sysroot.clone(), search_dirs: before.search_dirs.clone(), ..Locator::default() };
    let d = knot::heap::diff(&before.core, &after.core, &HeapOptions { locator, max_decompressed: None, max_memory: None, scratch_dir: None }).expect("both heaps read");
    assert!(d.diagnostics.is_empty(), "diagnostics: {:?}", d.diagnostics);

    let read = |dump: &knot_samples::dotnet::DotnetDump| dumpheap_stat(&std::fs::read_to_string(dump.dir.join("sos/dumpheap-stat.txt")).expect("sos/dumpheap-stat.txt"));
    let (old, new) = (read(&before), read(&after));
    let mut names: Vec<&String> = old.keys().chain(new.keys()).collect();
    names.sort();
    names.dedup();
    assert_eq!(d.types.len(), names.len(), "one row per type of either dump");
    for t in &d.types {
        let (oc, ob) = old.get(&t.type_name).copied().unwrap_or_default();
        let (nc, nb) = new.get(&t.type_name).copied().unwrap_or_default();
        assert_eq!((t.old_count, t.new_count, t.old_bytes, t.new_bytes), (oc, nc, ob, nb), "{}: counts and bytes as SOS's two readings", t.type_name);
        assert_eq!(t.count_growth, nc as i64 - oc as i64, "{}", t.type_name);
        assert_eq!(t.bytes_growth, nb as i64 - ob as i64, "{}", t.type_name);
    }

    let row = |name: &str| d.types.iter().find(|t| t.type_name == name).unwrap_or_else(|| panic!("no row {name}"));
    let session = row("Knot.Samples.HeapGrowth.Session");
    assert_eq!((session.count_growth, session.bytes_growth), (BURST, BURST * SESSION_BYTES));
    let payload = row("System.Byte[]");
    assert_eq!((payload.count_growth, payload.bytes_growth), (BURST, BURST * PAYLOAD_BYTES));
    // Retained growth orders when both graphs were read (the dictionary holds the burst), shallow
    // growth otherwise (the payloads).
    let first = if d.types[0].retained_growth.is_some() { "System.Collections.Generic.Dictionary<System.Guid, Knot.Samples.HeapGrowth.Session>" } else { "System.Byte[]" };
    assert_eq!(d.types[0].type_name, first);
    // The tree was built before the first dump: it did not grow.
    assert_eq!(row("Knot.Samples.HeapGrowth.TreeNode").count_growth, 0);
    // Sorted by growth.
    let key = |t: &knot::report::heap_diff::TypeGrowthReport| t.retained_growth.unwrap_or(t.bytes_growth);
    assert!(d.types.windows(2).all(|w| key(&w[0]) >= key(&w[1])), "not sorted by growth");

    let text = d.to_text(10);
    assert!(text.lines().any(|l| l.contains("+4,000") && l.ends_with("Knot.Samples.HeapGrowth.Session")), "{text}");
    let json: serde_json::Value = serde_json::from_str(&d.to_json()).expect("JSON");
    assert_eq!(json["types"][0]["type"], first);
    let bytes_row = json["types"].as_array().and_then(|t| t.iter().find(|t| t["type"] == "System.Byte[]")).cloned().unwrap_or_default();
    assert_eq!(bytes_row["count_growth"], BURST);

    // The holders, matched by root path: the cache's dictionary grew by what SOS `objsize` of
    // it says in each dump (it alone holds its sessions), and is the holder that grew most.
    let objsize = |dump: &knot_samples::dotnet::DotnetDump| {
        let text = std::fs::read_to_string(dump.dir.join("sos/objsize-cache.txt")).expect("sos/objsize-cache.txt");
        let total = text.lines().find_map(|l| l.strip_prefix("Total ")).expect("objsize's Total line");
        num(total.split(" objects, ").nth(1).expect("bytes").trim_end_matches(" bytes"))
    };
    let (ob, nb) = (objsize(&before), objsize(&after));
    let cache = &d.holders[0];
    assert_eq!(cache.type_name, "System.Collections.Generic.Dictionary<System.Guid, Knot.Samples.HeapGrowth.Session>", "{:#?}", d.holders);
    assert_eq!(cache.root, "static Knot.Samples.HeapGrowth.SessionCache.s_all");
    assert_eq!((cache.old_retained_bytes, cache.new_retained_bytes, cache.retained_growth), (Some(ob), Some(nb), nb as i64 - ob as i64));
    assert_eq!((cache.old_holders, cache.new_holders), (1, 1));
    assert_eq!(cache.path, ["System.Collections.Generic.Dictionary<System.Guid, Knot.Samples.HeapGrowth.Session>"]);
    // The tree did not grow: its root holds the same in both.
    let tree = d.holders.iter().find(|h| h.type_name == "Knot.Samples.HeapGrowth.TreeNode").expect("the tree among the holders");
    assert_eq!(tree.retained_growth, 0);
    assert!(d.holders.windows(2).all(|w| w[0].retained_growth >= w[1].retained_growth), "not sorted by growth");
    assert!(text.contains("Holders that grew most (matched by root path):") && text.contains("← static Knot.Samples.HeapGrowth.SessionCache.s_all"), "{text}");
    assert_eq!(json["holders"][0]["root"], "static Knot.Samples.HeapGrowth.SessionCache.s_all");
}
