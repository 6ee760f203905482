//! Retained sizes, top holders, garbage and the leak suspect against the construction and SOS
//! on `samples/dotnet/dumps/heap_growth/{before,after}` (a static `Dictionary<Guid, Session>`
//! of 2 000, then 6 000 Sessions, each owning its `byte[1000]`; a static 1 023-node tree, each
//! node owning an `int[16]`; 100 `Junk` in a dropped `List` as garbage):
//! - the dictionary retains exactly what SOS `objsize` says it reaches (nothing else refers to
//!   its sessions), and the tree's root what `objsize` says the root reaches (a tree);
//! - the objects no root reaches are SOS `dumpheap -stat -dead`'s, free space aside;
//! - the dictionary is the leak suspect, said on the text report's first line after the dump's,
//!   its accumulation point the entries array with one child per Session;
//! - `knot heap diff` gives the retained growth of the burst (4 000 Sessions of 48 + 1 024 bytes).

use knot::Options;
use knot::heap::HeapOptions;
use knot::process::Locator;

const DICTIONARY: &str = "System.Collections.Generic.Dictionary<System.Guid, Knot.Samples.HeapGrowth.Session>";
const SESSION: &str = "Knot.Samples.HeapGrowth.Session";
const TREE: &str = "Knot.Samples.HeapGrowth.TreeNode";
/// A Session (48 bytes) and its own payload (24 + 1000).
const SESSION_RETAINS: u64 = 48 + 1024;

fn num(s: &str) -> u64 {
    s.trim().replace(',', "").parse().unwrap_or_else(|_| panic!("not a number: {s:?}"))
}

/// `Total N objects, B bytes` of an SOS output.
fn total(text: &str) -> (u64, u64) {
    let line = text.lines().find(|l| l.starts_with("Total ")).expect("a Total line");
    let (objects, bytes) = line["Total ".len()..].split_once(" objects, ").expect("Total N objects, B bytes");
    (num(objects), num(bytes.trim_end_matches(" bytes")))
}

/// The `Free` row of `dumpheap -stat -dead` (count, bytes).
fn free_row(text: &str) -> (u64, u64) {
    let row = text.lines().find(|l| l.trim_end().ends_with(" Free")).map(|l| l.split_whitespace().collect::<Vec<_>>());
    row.map(|c| (num(c[1]), num(c[2]))).unwrap_or((0, 0))
}

fn dumps() -> Vec<knot_samples::dotnet::DotnetDump> {
    let all: Vec<_> = knot_samples::dotnet::dumps("sos/objsize-cache.txt", false).into_iter().filter(|d| d.sample == "heap_growth").collect();
    if all.len() < 2 {
        knot_samples::skipped("skipping: samples/dotnet/dumps/heap_growth/{before,after} not found");
    }
    all
}

fn locator(d: &knot_samples::dotnet::DotnetDump) -> Locator {
    Locator { sysroot: d.sysroot.clone(), search_dirs: d.search_dirs.clone(), ..Locator::default() }
}

fn sos(d: &knot_samples::dotnet::DotnetDump, file: &str) -> String {
    std::fs::read_to_string(d.dir.join("sos").join(file)).unwrap_or_else(|e| panic!("{}: sos/{file}: {e}", d.kind))
}

#[test]
fn retained_sizes_garbage_and_the_suspect_equal_sos_and_the_construction() {
    for d in dumps() {
        let report = knot::analyze(&d.core, &Options { locator: locator(&d), ..Options::default() }).expect("the dump reads");
        let json: serde_json::Value = serde_json::from_str(&knot::report::to_json(&report)).expect("JSON");
        let heap = &json["dotnet"]["heap"];
        let sessions: u64 = if d.kind == "before" { 2000 } else { 6000 };

        // The top holders: the dictionary, then the tree.
        let doms = heap["dominators"].as_array().expect("dominators read");
        assert_eq!(doms[0]["type"], DICTIONARY, "{}", d.kind);
        assert_eq!(doms[0]["retained_bytes"].as_u64(), Some(total(&sos(&d, "objsize-cache.txt")).1), "{}: the cache retains what objsize reaches", d.kind);
        assert_eq!(doms[0]["root"]["kind"], "static");
        let tree = doms.iter().find(|h| h["type"] == TREE).expect("the tree is a top holder");
        assert_eq!(tree["retained_bytes"].as_u64(), Some(total(&sos(&d, "objsize-tree.txt")).1), "{}: the tree's root retains what objsize reaches", d.kind);
        assert_eq!(tree["retained_bytes"].as_u64(), Some(1023 * (40 + 24 + 64)), "{}: 1 023 nodes and their int[16]", d.kind);
        assert!(doms.len() <= 20);
        assert!(doms.windows(2).all(|w| w[0]["retained_bytes"].as_u64() >= w[1]["retained_bytes"].as_u64()), "largest first");

        // By type: each Session retains itself and its payload.
        let by_type = heap["retained"].as_array().expect("retained read");
        let session = by_type.iter().find(|t| t["type"] == SESSION).expect("Session row");
        assert_eq!((session["count"].as_u64(), session["retained_bytes"].as_u64()), (Some(sessions), Some(sessions * SESSION_RETAINS)), "{}", d.kind);
        let node = by_type.iter().find(|t| t["type"] == TREE).expect("TreeNode row");
        assert_eq!(node["count"].as_u64(), Some(1), "{}: nodes under a node of their type count once", d.kind);

        // Garbage: SOS's dead objects, free space aside.
        let dead = sos(&d, "dumpheap-dead.txt");
        let (objects, bytes) = total(&dead);
        let (fc, fb) = free_row(&dead);
        assert_eq!((heap["unreachable"]["objects"].as_u64(), heap["unreachable"]["bytes"].as_u64()), (Some(objects - fc), Some(bytes - fb)), "{}: unreachable", d.kind);

        // The suspect.
        let s = &heap["suspects"][0];
        assert_eq!(s["type"], DICTIONARY);
        assert!(s["heap_percent"].as_f64().unwrap_or(0.0) >= 80.0, "{}: {s}", d.kind);
        let acc = &s["accumulation"];
        assert!(acc["type"].as_str().unwrap_or("").ends_with("+Entry[]"), "{}: {acc}", d.kind);
        assert_eq!((acc["child_type"].as_str(), acc["child_count"].as_u64()), (Some(SESSION), Some(sessions)), "{}", d.kind);
        assert_eq!(acc["child_retained_bytes"].as_u64(), Some(sessions * SESSION_RETAINS));
        assert_eq!(heap["suspects"].as_array().map(Vec::len), Some(1), "{}: one holder of 10 % or more", d.kind);
        // Its root is the static the sample keeps it in (SOS gcroot: the statics array's slot).
        assert_eq!(s["root"]["kind"], "static", "{}: {s}", d.kind);
        assert_eq!(s["root"]["name"], "the static field SessionCache.s_all", "{}: {s}", d.kind);

        let text = knot::report::text::render(&report, &Default::default());
        let first = text.lines().skip(1).find(|l| !l.is_empty()).unwrap_or("");
        assert!(first.starts_with("Leak suspect: ") && first.contains(DICTIONARY) && first.contains("reached from the static field SessionCache.s_all") && first.contains(&format!("{} {SESSION} objects", if sessions == 2000 { "2,000" } else { "6,000" })), "{}: first line {first:?}", d.kind);
    }
}

#[test]
fn the_burst_grew_the_retained_sizes_by_its_sessions() {
    let all = dumps();
    let (Some(before), Some(after)) = (all.iter().find(|d| d.kind == "before"), all.iter().find(|d| d.kind == "after")) else { return };
    let d = knot::heap::diff(&before.core, &after.core, &HeapOptions { locator: locator(before), max_decompressed: None, max_memory: None, scratch_dir: None }).expect("both read");
    let row = |name: &str| d.types.iter().find(|t| t.type_name == name).unwrap_or_else(|| panic!("no row {name}"));
    assert_eq!(row(SESSION).retained_growth, Some(4000 * SESSION_RETAINS as i64));
    assert_eq!(row(TREE).retained_growth, Some(0));
    // The dictionary grew most in retained bytes: the first row.
    assert_eq!(d.types[0].type_name, DICTIONARY);
}

/// An address of `sos/addresses.txt` (`name = hex   # what`).
fn address(d: &knot_samples::dotnet::DotnetDump, name: &str) -> u64 {
    let text = sos(d, "addresses.txt");
    let line = text.lines().find(|l| l.split('=').next().map(str::trim) == Some(name)).unwrap_or_else(|| panic!("no {name} in addresses.txt"));
    let hex = line.split('=').nth(1).and_then(|v| v.split_whitespace().next()).expect("an address");
    u64::from_str_radix(hex, 16).expect("hex")
}

/// One box of the HTML icicle: left edge and width (percent), row, and its title.
#[derive(Debug)]
struct IceBox {
    left: f64,
    width: f64,
    row: u32,
    title: String,
}

fn ice_boxes(page: &str) -> Vec<IceBox> {
    let mut out = Vec::new();
    for piece in page.split("<div class=\"ice\" style=\"").skip(1) {
        let style = piece.split('"').next().unwrap_or("");
        let field = |k: &str| style.split(';').find_map(|p| p.strip_prefix(k)).map(|v| v.trim_end_matches(['%', 'p', 'x']).parse::<f64>().expect("a number"));
        let title = piece.split("title=\"").nth(1).and_then(|t| t.split('"').next()).unwrap_or("").replace("&lt;", "<").replace("&gt;", ">");
        let (left, width, top) = (field("left:").expect("left"), field("width:").expect("width"), field("top:").expect("top"));
        out.push(IceBox { left, width, row: (top / 22.0).round() as u32, title });
    }
    out
}

/// The HTML page's heap section: the suspect with its path from the static root to the
/// dictionary SOS names, and the icicle's boxes placed and sized by the retained sizes SOS
/// `objsize` gives (the dictionary; the tree, whose every node retains what it reaches).
#[test]
fn the_html_icicle_and_suspect_path_show_the_retained_sizes() {
    for d in dumps() {
        let report = knot::analyze(&d.core, &Options { locator: locator(&d), ..Options::default() }).expect("the dump reads");
        let page = knot::report::html::render(&report);
        let start = page.find("<section id=\"retained\">").unwrap_or_else(|| panic!("{}: no retained section", d.kind));
        let section = &page[start..start + page[start..].find("</section>").expect("section end")];
        let (dictionary, tree_root) = (address(&d, "dictionary"), address(&d, "tree_root"));
        let escaped = DICTIONARY.replace('<', "&lt;").replace('>', "&gt;");

        // The suspect, then its path: the static root, then the dictionary SOS's gcroot names.
        let suspect = section.find("<b>Leak suspect:</b>").unwrap_or_else(|| panic!("{}: no suspect", d.kind));
        let path = &section[suspect..];
        let path = &path[path.find("<ol class=\"path mono\">").expect("the suspect's path")..];
        let items: Vec<&str> = path[..path.find("</ol>").expect("path end")].split("<li>").skip(1).map(|i| i.trim_end_matches("</li>")).collect();
        assert!(items.len() >= 2 && items[0].contains("static field"), "{}: {items:?}", d.kind);
        assert_eq!(items.last().copied(), Some(format!("{escaped} {dictionary:#x}").as_str()), "{}", d.kind);

        // The icicle: widths are shares of the reachable heap (SOS's live objects: dumpheap
        // -stat's total less -dead's).
        let (_, live) = total(&sos(&d, "dumpheap-stat.txt"));
        let (_, dead) = total(&sos(&d, "dumpheap-dead.txt"));
        let total = live - dead;
        let share = |bytes: u64| bytes as f64 * 100.0 / total as f64;
        let boxes = ice_boxes(section);
        let top: Vec<&IceBox> = boxes.iter().filter(|b| b.row == 0).collect();
        assert!(top.windows(2).all(|w| w[0].width >= w[1].width && (w[0].left + w[0].width - w[1].left).abs() < 0.01), "{}: top row largest first, side by side: {top:?}", d.kind);
        let cache = top[0];
        assert!(cache.title.starts_with(&format!("{DICTIONARY} at {dictionary:#x}: retains ")), "{}: {cache:?}", d.kind);
        assert!((cache.width - share(total_of(&sos(&d, "objsize-cache.txt")))).abs() < 0.001, "{}: the cache's width is its objsize share {}: {cache:?}", d.kind, share(total_of(&sos(&d, "objsize-cache.txt"))));
        // Under it, its entries array, from its left edge.
        let entries = boxes.iter().find(|b| b.row == 1 && b.title.starts_with(&format!("{DICTIONARY}+Entry[] at "))).expect("the entries array under the dictionary");
        assert!((entries.left - cache.left).abs() < 0.001 && entries.width <= cache.width, "{}: {entries:?}", d.kind);
        // The tree: 1 023 nodes of 128 bytes; its root's two children hold 511 each, side by side.
        let tree = top.iter().find(|b| b.title.starts_with(&format!("{TREE} at {tree_root:#x}: "))).expect("the tree's root on the top row");
        assert!((tree.width - share(total_of(&sos(&d, "objsize-tree.txt")))).abs() < 0.001, "{}: {tree:?}", d.kind);
        let kids: Vec<&IceBox> = boxes.iter().filter(|b| b.row == 1 && b.title.starts_with(TREE) && b.left >= tree.left - 0.001 && b.left < tree.left + tree.width).collect();
        assert_eq!(kids.len(), 2, "{}: {kids:?}", d.kind);
        for (i, k) in kids.iter().enumerate() {
            assert!((k.width - share(511 * 128)).abs() < 0.001, "{}: {k:?}", d.kind);
            assert!((k.left - (tree.left + i as f64 * kids[0].width)).abs() < 0.002, "{}: {k:?}", d.kind);
        }
    }
}

fn total_of(text: &str) -> u64 {
    total(text).1
}

/// `samples/dotnet/dumps/cache_leak/heap`: Main waits in `Console.ReadLine` (the verdict is
/// BLOCKED ON I/O) while a static dictionary keeps nearly all of a 32 MiB heap (issue #30,
/// item 9). The holder is said in the text and the HTML whatever the verdict: before it here,
/// where nothing else is the story; after the verdict's lines when a deadlock is.
#[test]
fn a_leak_beside_a_wait_for_input_is_said_whatever_the_verdict() {
    const CACHE: &str = "System.Collections.Generic.Dictionary<System.String, Knot.Samples.CacheLeak.CachedReport>";
    let Some(d) = knot_samples::dotnet::dumps("sos/objsize-cache.txt", false).into_iter().find(|d| d.sample == "cache_leak") else {
        return knot_samples::skipped("skipping: samples/dotnet/dumps/cache_leak/heap not found");
    };
    let mut report = knot::analyze(&d.core, &Options { locator: locator(&d), ..Options::default() }).expect("the dump reads");
    assert_eq!(report.verdict, knot::report::Verdict::BlockedOnIo);
    let json: serde_json::Value = serde_json::from_str(&knot::report::to_json(&report)).expect("JSON");
    let s = &json["dotnet"]["heap"]["suspects"][0];
    // What it retains is what SOS `objsize` says the dictionary keeps alive but its two string
    // comparers (24 bytes each), CoreLib's shared singletons, which statics hold too; its root
    // the static.
    assert_eq!(s["type"], CACHE, "{s}");
    assert_eq!(s["retained_bytes"].as_u64(), Some(total_of(&sos(&d, "objsize-cache.txt")) - 2 * 24), "{s}");
    assert_eq!(s["root"]["name"], "the static field ReportCache.s_reports", "{s}");

    let text = knot::report::text::render(&report, &Default::default());
    let (leak, verdict) = (text.find("Leak suspect: ").expect("the leak is said in the text"), text.find("Verdict: BLOCKED ON I/O").expect("verdict"));
    assert!(leak < verdict, "said first when nothing else is the story:\n{text}");
    assert!(text[leak..].lines().next().is_some_and(|l| l.contains(CACHE) && l.contains("reached from the static field ReportCache.s_reports") && l.contains("4,000 Knot.Samples.CacheLeak.CachedReport objects")), "{text}");
    let page = knot::report::html::render(&report);
    let header = &page[page.find("<header class=\"verdict").expect("header")..page.find("</header>").expect("header end")];
    assert!(header.contains("<b>Leak suspect:</b>") && header.contains(&CACHE.replace('<', "&lt;").replace('>', "&gt;")), "the HTML's verdict header says it: {header}");

    // The same heap beside a deadlock: the deadlock's lines first, then the holder.
    report.verdict = knot::report::Verdict::Deadlock;
    let text = knot::report::text::render(&report, &Default::default());
    let (leak, verdict) = (text.find("Leak suspect: ").expect("the leak is said beside a deadlock"), text.find("Verdict: DEADLOCK").expect("verdict"));
    assert!(verdict < leak && leak < text.find("== ").expect("the threads"), "after the verdict's lines, on the first screen:\n{text}");
    let page = knot::report::html::render(&report);
    let header = &page[page.find("<header class=\"verdict").expect("header")..page.find("</header>").expect("header end")];
    assert!(header.find("<b>Leak suspect:</b>").is_some_and(|l| l > header.find("<h1>").unwrap_or(usize::MAX)), "{header}");
}

/// Under a memory limit too small for the object graph (`--max-memory`, the library's
/// `max_memory`), the report still comes: the heap by type, the GC's state, stacks and locks as
/// without a limit, the retained sizes left out, and the limit said first (`verdict_limits`, the
/// verdict line) with the flag that lifts it. Under a limit that fits, the report is the one
/// without a limit, byte for byte.
#[test]
fn a_memory_limit_too_small_for_the_heap_graph_leaves_out_the_retained_sizes_and_says_so() {
    let Some(d) = dumps().into_iter().next() else { return };
    let at = |max_memory| {
        let report = knot::analyze(&d.core, &Options { locator: locator(&d), max_memory, ..Options::default() }).expect("the dump reads");
        let json: serde_json::Value = serde_json::from_str(&knot::report::to_json(&report)).expect("JSON");
        (report, json)
    };
    let (_, free) = at(None);
    let (_, roomy) = at(Some(64 << 30));
    assert_eq!(roomy, free, "a limit the graph fits changes nothing");

    let (small, json) = at(Some(1 << 20));
    let (heap, whole) = (&json["dotnet"]["heap"], &free["dotnet"]["heap"]);
    for absent in ["retained", "dominators", "unreachable"] {
        assert!(heap[absent].is_null(), "{absent}: {}", heap[absent]);
    }
    assert_eq!(heap["suspects"].as_array().map(Vec::len), Some(0));
    for same in ["types", "total_objects", "total_bytes"] {
        assert_eq!(heap[same], whole[same], "{same}: the heap by type is whole");
    }
    for same in ["gc", "managed_threads", "thread_pool"] {
        assert_eq!(json["dotnet"][same], free["dotnet"][same], "{same}");
    }
    for same in ["threads", "locks", "deadlocks"] {
        assert_eq!(json[same], free[same], "{same}");
    }
    let limits = json["verdict_limits"].as_array().expect("verdict_limits");
    let limit = limits.iter().find(|l| l["short"] == "the heap's retained sizes").unwrap_or_else(|| panic!("the limit is said: {limits:?}"));
    let missing = limit["missing"].as_str().unwrap_or("");
    assert!(missing.contains("1.0 MiB") && missing.contains("--max-memory"), "names the limit and where it came from: {missing}");
    assert!(limit["fix"].as_str().unwrap_or("").starts_with("--max-memory SIZE"), "{limit}");
    let text = knot::report::text::render(&small, &Default::default());
    let verdict = text.lines().find(|l| l.starts_with("Verdict: ")).unwrap_or("");
    assert!(verdict.contains("limited by the heap's retained sizes missing"), "{verdict}");
    assert!(text.lines().any(|l| l.starts_with("  limited by the heap's retained sizes (")), "{text}");
}

/// `knot heap diff` under a memory limit too small for the object graphs compares the heaps by
/// type all the same, without retained sizes, and says why; under one they fit, as without one.
#[test]
fn heap_diff_under_a_memory_limit_too_small_for_the_graphs_compares_without_retained_sizes() {
    let all = dumps();
    let (Some(before), Some(after)) = (all.iter().find(|d| d.kind == "before"), all.iter().find(|d| d.kind == "after")) else { return };
    let diff = |max_memory| knot::heap::diff(&before.core, &after.core, &HeapOptions { locator: locator(before), max_decompressed: None, max_memory, scratch_dir: None }).expect("both read");
    let (free, roomy, small) = (diff(None), diff(Some(64 << 30)), diff(Some(1 << 20)));
    assert_eq!(roomy.to_json(), free.to_json(), "a limit the graphs fit changes nothing");
    let session = |d: &knot::report::heap_diff::HeapDiffReport| d.types.iter().find(|t| t.type_name == SESSION).map(|t| (t.count_growth, t.bytes_growth, t.retained_growth));
    assert_eq!(session(&small).map(|s| (s.0, s.1)), session(&free).map(|s| (s.0, s.1)), "counts and bytes by type as without a limit");
    assert_eq!(session(&small).map(|s| s.2), Some(None), "no retained growth");
    assert!(small.holders.is_empty());
    let said: Vec<&str> = small.diagnostics.iter().map(|d| d.message.as_str()).filter(|m| m.contains("retained sizes not read") && m.contains("memory limit")).collect();
    assert_eq!(said.len(), 2, "each dump says why: {:?}", small.diagnostics);
}

/// A small share of a small heap is no leak: the Autofac sample's largest holder (the runtime's
/// `AppContext.s_dataStore`, tens of KiB in a heap of a few hundred) is listed in the JSON's
/// suspects, but neither the first screen nor the HTML page — header or "What keeps the heap
/// alive" — calls it a leak suspect (the floor, `SUSPECT_FIRST_MIN_BYTES`, is the same in both).
#[test]
fn a_small_holder_of_a_small_heap_is_called_a_leak_suspect_nowhere() {
    let Some(d) = knot_samples::dotnet::dumps("sos/syncblk.txt", false).into_iter().find(|d| d.sample == "autofac_container") else {
        return knot_samples::skipped("skipping: samples/dotnet/dumps/autofac_container/heap not found");
    };
    let report = knot::analyze(&d.core, &Options { locator: locator(&d), ..Options::default() }).expect("the dump reads");
    let json: serde_json::Value = serde_json::from_str(&knot::report::to_json(&report)).expect("JSON");
    let suspects = json["dotnet"]["heap"]["suspects"].as_array().expect("suspects");
    assert!(!suspects.is_empty() && suspects.iter().all(|s| s["retained_bytes"].as_u64().is_some_and(|b| b < 1 << 20)), "the holders are small: {suspects:?}");
    let text = knot::report::text::render(&report, &Default::default());
    assert!(!text.contains("Leak suspect"), "{text}");
    let page = knot::report::html::render(&report);
    assert!(page.contains("<section id=\"retained\">"), "the retained sizes are shown");
    assert!(!page.contains("Leak suspect"), "the page calls nothing a leak suspect");
}
