//! The heap as a graph (issue 19, parts 1–3) against SOS and against the construction of the
//! `heap_graph` sample (samples/dotnet/heap_graph: each object's only holder is known).
//!
//! - `knot heap root` of every `Knot.Samples.HeapGraph` object equals SOS `gcroot`
//!   (`sos/gcroot.txt`): the root's kind and place (handle address; thread, frame SP, IP and
//!   method; finalization queue slot) and every object of the path, address and type. Where SOS
//!   finds several roots, knot's shortest path is one of SOS's paths.
//! - The construction: each holder kind holds its own type (strong handle, pinned handle, the
//!   Parker thread's frame `Program.Park`, the finalization queue, statics through the
//!   statics' `System.Object[]`, an event, a tree). The statics' array element is named by its
//!   class and field (`Registry.s_held`); SOS names another class's field there
//!   (`(static variable: System.Object.Never)`), so the names are checked against the
//!   construction only.
//! - The one object SOS `gcroot` finds no root for, the value of a `ConditionalWeakTable` entry,
//!   is held through a dependent handle: knot's path ends `CwtKey → (dependent handle) →
//!   CwtValue`, and SOS `objsize` of the key counts the value.
//! - References: what knot's graph reaches from each object equals SOS `objsize`'s list.
//! - Bad input: a GC description with an absurd series count or a series past its object, and
//!   a handle block of an unknown type, give diagnostics and a partial answer, never a panic.

use crate::tests::dumpedit;

use crate::Options;
use crate::heap::RootSearch;
use crate::process::{Locator, Process};
use crate::report::heap_root::HeapRootReport;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

struct Sample {
    core: PathBuf,
    dir: PathBuf,
    locator: Locator,
}

fn sample() -> Option<&'static Sample> {
    static S: OnceLock<Option<Sample>> = OnceLock::new();
    S.get_or_init(|| {
        let d = knot_samples::dotnet::dumps("sos/gcroot.txt", true).into_iter().find(|d| d.sample == "heap_graph")?;
        let locator = Locator { sysroot: d.sysroot.clone(), search_dirs: d.search_dirs.clone(), ..Locator::default() };
        Some(Sample { core: d.core, dir: d.dir, locator })
    })
    .as_ref()
    .or_else(|| {
        knot_samples::skipped("skipping: no heap_graph dump with sos/gcroot.txt");
        None
    })
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim().trim_start_matches("0x"), 16).unwrap_or_else(|_| panic!("not hex: {s:?}"))
}

/// What SOS says of one object.
#[derive(Debug, Default)]
struct SosObject {
    address: u64,
    type_name: String,
    roots: Vec<SosRoot>,
    found: usize,
    /// `objsize`'s objects.
    reaches: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum SosHolder {
    Handle { handle: u64, kind: String },
    /// A stack slot of a frame (`rbp-8: 00007ffd…`: the slot's address).
    Frame { tid: u32, sp: u64, ip: u64, method: String, slot: u64 },
    Finalizer { slot: u64 },
}

#[derive(Debug, Clone)]
struct SosRoot {
    holder: SosHolder,
    path: Vec<(u64, String)>,
}

/// `sos/gcroot.txt`: `### ADDRESS TYPE` blocks, each `gcroot` then `objsize`.
fn parse_gcroot(text: &str) -> Vec<SosObject> {
    let mut out: Vec<SosObject> = Vec::new();
    let mut block = String::new();
    let mut thread: Option<u32> = None;
    let mut frame: Option<(u32, u64, u64, String)> = None;
    let mut in_objsize = false;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("### ") {
            let (a, t) = rest.split_once(' ').unwrap_or((rest, ""));
            out.push(SosObject { address: hex(a), type_name: t.to_string(), ..SosObject::default() });
            in_objsize = false;
            continue;
        }
        let Some(o) = out.last_mut() else { continue };
        let l = line.trim();
        if l.starts_with("Objects which") {
            in_objsize = true;
            continue;
        }
        if in_objsize {
            let tok: Vec<&str> = l.split_whitespace().collect();
            if tok.len() == 3 && tok[0].len() >= 8 && tok[0].chars().all(|c| c.is_ascii_hexdigit()) && tok[1].len() >= 8 {
                o.reaches.push(hex(tok[0]));
            }
            continue;
        }
        if l == "HandleTable:" || l == "Finalizer Queue:" {
            block = l.to_string();
            continue;
        }
        if let Some(t) = l.strip_prefix("Thread ").and_then(|t| t.strip_suffix(':')) {
            block = "Thread".into();
            thread = Some(u32::from_str_radix(t, 16).expect("thread id"));
            continue;
        }
        if let Some(n) = l.strip_prefix("Found ").and_then(|r| r.strip_suffix(" unique roots.")) {
            o.found = n.parse().expect("root count");
            continue;
        }
        if let Some(rest) = l.strip_prefix("-> ") {
            let rest = rest.trim();
            let (a, t) = rest.split_once(' ').expect("-> ADDRESS Type");
            // SOS's static field names are wrong: the type alone is compared.
            let t = t.trim().split(" (static variable:").next().unwrap_or("").trim().to_string();
            if let Some(r) = o.roots.last_mut() {
                r.path.push((hex(a), t));
            }
            continue;
        }
        let tok: Vec<&str> = l.split_whitespace().collect();
        match block.as_str() {
            "HandleTable:" if tok.len() >= 3 && l.ends_with(" handle)") => {
                let kind = l[tok[0].len()..].trim().trim_start_matches('(').trim_end_matches(')').to_string();
                o.roots.push(SosRoot { holder: SosHolder::Handle { handle: hex(tok[0]), kind }, path: Vec::new() });
            }
            "Finalizer Queue:" if l.ends_with("(finalizer root)") => {
                o.roots.push(SosRoot { holder: SosHolder::Finalizer { slot: hex(tok[0]) }, path: Vec::new() });
            }
            "Thread" if tok.len() >= 3 && tok[0].chars().all(|c| c.is_ascii_hexdigit()) && tok[0].len() >= 8 => {
                let method = tok[2].split('(').next().unwrap_or("").to_string();
                frame = Some((thread.expect("thread"), hex(tok[0]), hex(tok[1]), method));
            }
            "Thread" if tok.len() == 2 && tok[0].ends_with(':') => {
                let (tid, sp, ip, method) = frame.clone().expect("a frame line before its slots");
                o.roots.push(SosRoot { holder: SosHolder::Frame { tid, sp, ip, method, slot: hex(tok[1]) }, path: Vec::new() });
            }
            _ => {}
        }
    }
    out
}

struct Read {
    sos: Vec<SosObject>,
    /// `knot heap root --all` (every root, the whole graph).
    knot: Vec<HeapRootReport>,
    /// `knot heap root` (the search that stops at the first path).
    first: Vec<HeapRootReport>,
}

fn read() -> Option<&'static Read> {
    static R: OnceLock<Option<Read>> = OnceLock::new();
    R.get_or_init(|| {
        let s = sample()?;
        let sos = parse_gcroot(&std::fs::read_to_string(s.dir.join("sos/gcroot.txt")).expect("sos/gcroot.txt"));
        assert!(sos.len() > 60, "sos/gcroot.txt has {} objects", sos.len());
        let addrs: Vec<u64> = sos.iter().map(|o| o.address).collect();
        let opts = Options { locator: s.locator.clone(), ..Options::default() };
        let knot = crate::heap::heap_roots(&s.core, &opts, &addrs, RootSearch::AllRoots).unwrap_or_else(|e| panic!("knot heap root --all: {e}"));
        let first = crate::heap::heap_roots(&s.core, &opts, &addrs, RootSearch::FirstPath).unwrap_or_else(|e| panic!("knot heap root: {e}"));
        Some(Read { sos, knot, first })
    })
    .as_ref()
}

fn knot_holder(root: &crate::report::heap_root::HeapRootHolder) -> SosHolder {
    if let Some(t) = &root.thread {
        let slot = t.slot.map(|s| s.0).unwrap_or(0);
        return SosHolder::Frame { tid: t.os_tid, sp: t.frame_sp.0, ip: t.frame_ip.0, method: t.method.clone().unwrap_or_default(), slot };
    }
    if let Some(s) = root.finalizer_slot {
        return SosHolder::Finalizer { slot: s.0 };
    }
    let kind = match root.kind.as_str() {
        "strong_handle" => "strong handle",
        "pinned_handle" => "pinned handle",
        other => other,
    };
    SosHolder::Handle { handle: root.handle.expect("handle").0, kind: kind.to_string() }
}

#[test]
fn every_root_path_equals_sos_gcroot() {
    let Some(r) = read() else { return };
    let mut compared = 0;
    for (sos, knot) in r.sos.iter().zip(&r.knot) {
        assert_eq!(knot.object.0, sos.address);
        assert_eq!(knot.type_name.as_deref(), Some(sos.type_name.as_str()), "{:#x}: type", sos.address);
        if sos.found == 0 {
            continue;
        }
        assert!(knot.reachable, "{:#x} {}: SOS finds {} roots, knot none", sos.address, sos.type_name, sos.found);
        assert_eq!(sos.roots.len(), sos.found, "{:#x}: the parse of SOS's roots", sos.address);
        // Every root and its path, as SOS lists them (SOS's order aside).
        let mut knot_roots: Vec<(SosHolder, Vec<(u64, String)>)> = std::iter::once((knot.root.as_ref().unwrap(), &knot.path))
            .chain(knot.other_roots.iter().map(|o| (&o.root, &o.path)))
            .map(|(h, p)| (knot_holder(h), p.iter().map(|s| (s.address.0, s.type_name.clone())).collect()))
            .collect();
        let mut sos_roots: Vec<(SosHolder, Vec<(u64, String)>)> = sos.roots.iter().map(|r| (r.holder.clone(), r.path.clone())).collect();
        let key = |r: &(SosHolder, Vec<(u64, String)>)| format!("{r:?}");
        knot_roots.sort_by_key(key);
        sos_roots.sort_by_key(key);
        assert_eq!(knot_roots, sos_roots, "{:#x} {}: roots and paths", sos.address, sos.type_name);
        assert_eq!(knot.other_roots_not_listed, 0);
        // knot's first is the shortest.
        let shortest = sos.roots.iter().map(|r| r.path.len()).min().unwrap_or(0);
        assert_eq!(knot.path.len(), shortest, "{:#x}: knot's first path is not the shortest", sos.address);
        compared += 1;
    }
    assert!(compared >= 60, "only {compared} objects compared");
    eprintln!("{compared} root paths equal SOS gcroot");
}

/// `knot heap root` (the search that stops at the first path, the heap read only as far as it
/// goes) gives the whole graph's first root and path, step by step, and of the other roots
/// those that hold the object itself, in the same order.
#[test]
fn the_first_path_search_equals_the_whole_graphs_first_path() {
    let Some(r) = read() else { return };
    let step = |s: &crate::report::heap_root::HeapPathStep| (s.address.0, s.type_name.clone(), s.size, s.via.clone(), s.static_field.as_ref().map(|f| (f.class.clone(), f.field.clone())));
    let holder = |h: &crate::report::heap_root::HeapRootHolder| (h.kind.clone(), h.conservative, h.description.clone(), knot_holder_or_sync(h));
    let mut compared = 0;
    for (all, first) in r.knot.iter().zip(&r.first) {
        assert_eq!((first.object.0, &first.type_name, first.size, first.reachable), (all.object.0, &all.type_name, all.size, all.reachable));
        assert!(all.all_roots && !first.all_roots);
        assert_eq!(first.root.as_ref().map(holder), all.root.as_ref().map(holder), "{:#x}: root", all.object.0);
        assert_eq!(first.path.iter().map(step).collect::<Vec<_>>(), all.path.iter().map(step).collect::<Vec<_>>(), "{:#x}: path", all.object.0);
        let direct: Vec<_> = all.other_roots.iter().filter(|o| o.path.len() == 1).map(|o| (holder(&o.root), o.path.iter().map(step).collect::<Vec<_>>())).collect();
        let got: Vec<_> = first.other_roots.iter().map(|o| (holder(&o.root), o.path.iter().map(step).collect::<Vec<_>>())).collect();
        assert_eq!(got, direct, "{:#x}: the other roots holding it", all.object.0);
        assert_eq!(first.roots.iter().map(|c| (&c.kind, c.conservative, c.count)).collect::<Vec<_>>(), all.roots.iter().map(|c| (&c.kind, c.conservative, c.count)).collect::<Vec<_>>());
        assert_eq!(first.handles_read, all.handles_read);
        // It stops early: never more objects than the graph has.
        assert!(first.objects <= all.objects);
        compared += 1;
    }
    assert!(compared > 60);
    // Two roots hold the finalizer's Blocker itself (SOS too): both listed.
    assert!(r.first.iter().any(|f| f.other_roots.len() == 1 && f.path.len() == 1));
}

fn knot_holder_or_sync(h: &crate::report::heap_root::HeapRootHolder) -> String {
    match h.sync_block {
        Some(i) => format!("sync block {i}"),
        None => format!("{:?}", knot_holder(h)),
    }
}

fn knot_of(name: &str) -> Vec<&'static HeapRootReport> {
    let r = read().expect("read");
    r.knot.iter().filter(|k| k.type_name.as_deref() == Some(name)).collect()
}

#[test]
fn each_holder_holds_what_the_sample_made_it_hold() {
    if read().is_none() {
        return;
    }
    let p = |n: &str| format!("Knot.Samples.HeapGraph.{n}");
    let one = |n: &str| {
        let v = knot_of(&p(n));
        assert_eq!(v.len(), 1, "{n}: one object");
        v[0]
    };
    let strong = one("StrongHeld");
    assert_eq!((strong.root.as_ref().unwrap().kind.as_str(), strong.path.len()), ("strong_handle", 1));
    let pinned = one("PinnedCell[]");
    assert_eq!((pinned.root.as_ref().unwrap().kind.as_str(), pinned.path.len()), ("pinned_handle", 1));
    let local = one("ThreadLocalHeld");
    let root = local.root.as_ref().unwrap();
    assert_eq!((root.kind.as_str(), root.conservative, local.path.len()), ("stack", true, 1));
    let t = root.thread.as_ref().unwrap();
    assert_eq!(t.method.as_deref(), Some("Knot.Samples.HeapGraph.Program.Park"));
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/dotnet/expected.toml");
    let expected: toml::Value = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let parker = expected["dump"].as_array().unwrap().iter().find(|d| d["sample"].as_str() == Some("heap_graph")).map(|d| d["threads"]["Parker"][0].as_integer().unwrap());
    assert_eq!(Some(t.os_tid as i64), parker, "the Parker thread");
    let freachable = knot_of(&p("FReachable"));
    assert_eq!(freachable.len(), 3);
    for f in freachable {
        assert_eq!((f.root.as_ref().unwrap().kind.as_str(), f.path.len()), ("finalizer_queue", 1));
    }
    // Statics: a strong handle to the statics' System.Object[], then the static's object.
    // The element is named by its real class and field (SOS names another class's field).
    for (n, field) in [("StaticHeld", "s_held"), ("Publisher", "s_publisher"), ("CwtKey", "s_key")] {
        let o = one(n);
        assert_eq!(o.root.as_ref().unwrap().kind, "strong_handle", "{n}");
        assert_eq!(o.path.len(), 2, "{n}");
        assert_eq!(o.path[0].type_name, "System.Object[]", "{n}");
        assert!(o.path[0].via.as_deref().is_some_and(|v| v.starts_with('[')), "{n}");
        let s = o.path[0].static_field.as_ref().unwrap_or_else(|| panic!("{n}: static not named"));
        assert_eq!((s.class.as_str(), s.field.as_str()), ("Knot.Samples.HeapGraph.Registry", field), "{n}");
    }
    let sos = &read().unwrap().sos;
    let sos_held = sos.iter().find(|o| o.type_name == p("StaticHeld")).unwrap();
    let text = std::fs::read_to_string(sample().unwrap().dir.join("sos/gcroot.txt")).unwrap();
    let line = text.lines().find(|l| l.contains(&format!("{:x}", sos_held.address)) && l.contains("static variable")).unwrap();
    assert!(!line.contains("Registry.s_held"), "SOS now names the static right: {line}");
    // Five subscribers alive only through the publisher's event.
    let subs = knot_of(&p("Subscriber"));
    assert_eq!(subs.len(), 5);
    for s in subs {
        let types: Vec<&str> = s.path.iter().map(|x| x.type_name.as_str()).collect();
        let via: Vec<Option<&str>> = s.path.iter().map(|x| x.via.as_deref()).collect();
        assert_eq!(types[1..], ["Knot.Samples.HeapGraph.Publisher", "System.EventHandler", "System.Object[]", "System.EventHandler", "Knot.Samples.HeapGraph.Subscriber"]);
        assert_eq!(via[1..3], [Some("Changed"), Some("_invocationList")]);
        assert_eq!(via[4], Some("_target"));
    }
    for sub in knot_of(&p("Subscriber")) {
        assert_eq!(sub.path[0].static_field.as_ref().map(|s| s.field.as_str()), Some("s_publisher"));
    }
    // The tree: 40 nodes, the root a static, each other node one Children[i] deeper.
    let nodes = knot_of(&p("TreeNode"));
    assert_eq!(nodes.len(), 40);
    let mut depths: BTreeMap<usize, usize> = BTreeMap::new();
    for n in &nodes {
        *depths.entry(n.path.len()).or_default() += 1;
        for w in n.path[1..].windows(2) {
            if w[0].type_name == p("TreeNode") {
                assert_eq!(w[0].via.as_deref(), Some("Children"));
            } else {
                assert!(w[0].via.as_deref().is_some_and(|v| v.starts_with('[')));
            }
        }
    }
    // Path lengths: Object[] + node (2), then 2 more per level.
    assert_eq!(depths, BTreeMap::from([(2, 1), (4, 3), (6, 9), (8, 27)]));
}

#[test]
fn a_conditional_weak_table_value_is_held_through_its_dependent_handle() {
    let Some(r) = read() else { return };
    let value = r.sos.iter().position(|o| o.type_name == "Knot.Samples.HeapGraph.CwtValue").expect("CwtValue");
    let key = r.sos.iter().find(|o| o.type_name == "Knot.Samples.HeapGraph.CwtKey").expect("CwtKey");
    // SOS gcroot does not follow dependent handles; its objsize does.
    assert_eq!(r.sos[value].found, 0);
    assert!(key.reaches.contains(&r.sos[value].address));
    let k = &r.knot[value];
    assert!(k.reachable);
    let n = k.path.len();
    assert_eq!(k.path[n - 2].address.0, key.address);
    assert_eq!(k.path[n - 2].via.as_deref(), Some("(dependent handle)"));
}

#[test]
fn what_each_object_reaches_equals_sos_objsize() {
    let (Some(s), Some(r)) = (sample(), read()) else { return };
    let process = Process::open(&s.core, &s.locator).expect("open");
    let addrs: Vec<u64> = r.sos.iter().map(|o| o.address).collect();
    let knot = crate::runtimes::dotnet::gc::reachable(&process, &s.locator, &addrs).expect("graph");
    for (o, k) in r.sos.iter().zip(knot) {
        let k = k.unwrap_or_else(|| panic!("{:#x} is no object for knot", o.address));
        let mut want = o.reaches.clone();
        want.sort_unstable();
        let mut got = k.clone();
        got.sort_unstable();
        assert_eq!(got, want, "{:#x} {}: reachable objects", o.address, o.type_name);
    }
}

// ---------------------------------------------------------------------------------------------
// Bad input: the committed dump with its GC description or handle table damaged.

fn damaged(edit: impl FnOnce(&mut Vec<u8>, &[SosObject])) -> Option<(tempfile_path::TempCore, Vec<SosObject>)> {
    let s = sample()?;
    let sos = parse_gcroot(&std::fs::read_to_string(s.dir.join("sos/gcroot.txt")).ok()?);
    let mut bytes = Vec::new();
    let f = std::fs::File::open(&s.core).ok()?;
    if s.core.extension().is_some_and(|e| e == "gz") {
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(f), &mut bytes).ok()?;
    } else {
        std::io::Read::read_to_end(&mut { f }, &mut bytes).ok()?;
    }
    edit(&mut bytes, &sos);
    Some((tempfile_path::TempCore::new(&bytes), sos))
}

mod tempfile_path {
    /// A core written under target/ for one test, removed when dropped.
    pub(super) struct TempCore(pub std::path::PathBuf);
    impl TempCore {
        pub(super) fn new(bytes: &[u8]) -> TempCore {
            static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let dir = &crate::tests::scratch_root();
            let p = dir.join(format!("heap-graph-{}-{}.core", std::process::id(), N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
            std::fs::write(&p, bytes).expect("write core");
            TempCore(p)
        }
    }
    impl Drop for TempCore {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

/// The MethodTable of `type_name` in `objsize`'s statistics.
fn method_table(sos_text: &str, type_name: &str) -> u64 {
    sos_text
        .lines()
        .find_map(|l| {
            let tok: Vec<&str> = l.split_whitespace().collect();
            (tok.len() == 4 && tok[3] == type_name).then(|| hex(tok[0]))
        })
        .unwrap_or_else(|| panic!("no MethodTable for {type_name}"))
}

/// The answers of both searches (every root, then the first path).
fn answers(core: &std::path::Path, addrs: &[u64]) -> [Vec<HeapRootReport>; 2] {
    let s = sample().unwrap();
    let opts = Options { locator: s.locator.clone(), ..Options::default() };
    [RootSearch::AllRoots, RootSearch::FirstPath].map(|search| crate::heap::heap_roots(core, &opts, addrs, search).expect("the heap is still read"))
}

#[test]
fn an_absurd_gc_description_is_a_diagnostic_and_its_objects_have_no_references() {
    let Some(s) = sample() else { return };
    let text = std::fs::read_to_string(s.dir.join("sos/gcroot.txt")).unwrap();
    let mt = method_table(&text, "Knot.Samples.HeapGraph.TreeNode");
    for (count, series_size) in [(1u64 << 40, None), (1, Some(1u64 << 20))] {
        let Some((core, sos)) = damaged(|b, _| {
            dumpedit::poke_u64(b, mt - 8, count);
            if let Some(size) = series_size {
                dumpedit::poke_u64(b, mt - 24, size);
            }
        }) else {
            return;
        };
        let leaf = sos.iter().rfind(|o| o.type_name == "Knot.Samples.HeapGraph.TreeNode").unwrap().address;
        let strong = sos.iter().find(|o| o.type_name == "Knot.Samples.HeapGraph.StrongHeld").unwrap().address;
        for r in answers(&core.0, &[leaf, strong]) {
            let said = r[0].diagnostics.iter().any(|d| d.message.contains(&format!("{mt:#x}")));
            assert!(said, "{count:#x}/{series_size:?}: {:#?}", r[0].diagnostics);
            // The tree's nodes no longer lead on: a leaf (3 levels below the root) is unreachable.
            assert!(!r[0].reachable, "{count:#x}/{series_size:?}");
            // The rest of the heap is read as before.
            assert!(r[1].reachable);
        }
    }
}

#[test]
fn a_damaged_handle_table_is_a_diagnostic_not_a_panic() {
    let Some(_) = sample() else { return };
    let r = read().unwrap();
    let strong = r.knot.iter().find(|k| k.type_name.as_deref() == Some("Knot.Samples.HeapGraph.StrongHeld")).unwrap();
    let handle = strong.root.as_ref().unwrap().handle.unwrap().0;
    let segment = handle & !0xffff;
    let block = (handle - segment - 0x1000) / 8 / 64;
    // rgBlockType: after rgGeneration (480), rgAllocation (120) and rgFreeMask (960 bytes).
    let Some((core, _)) = damaged(|b, _| dumpedit::poke(b, segment + 1560 + block, &[0x42])) else { return };
    for got in answers(&core.0, &[strong.object.0]) {
        assert!(got[0].diagnostics.iter().any(|d| d.message.contains("handle block") && d.message.contains("66")), "{:#?}", got[0].diagnostics);
        assert!(!got[0].reachable, "its only root was in the damaged block");
    }
    // The table's segment list pointing at unmapped memory: every handle of the table is gone.
    let Some((core, _)) = damaged(|b, _| {
        // The segment names its table (`pHandleTable`, after `pNextSegment`); the table names
        // the segment (`pSegmentList`, after 12 or 13 u32 type flags): whichever layout fits.
        for n in [12u64, 13] {
            let table = dumpedit::peek_u64(b, segment + 1920 + 6 * n + 8);
            for off in [48u64, 56] {
                if table != 0 && std::panic::catch_unwind(|| dumpedit::peek_u64(b, table + off)).ok() == Some(segment) {
                    dumpedit::poke_u64(b, table + off, 0x10_0000);
                }
            }
        }
    }) else {
        return;
    };
    for got in answers(&core.0, &[strong.object.0]) {
        assert!(got[0].diagnostics.iter().any(|d| d.message.contains("handle table")), "{:#?}", got[0].diagnostics);
        assert!(!got[0].reachable);
    }
}

#[test]
fn the_json_follows_its_schema() {
    let Some(r) = read() else { return };
    let schema: serde_json::Value = serde_json::from_str(&crate::report::heap_root::json_schema()).unwrap();
    let v = jsonschema::validator_for(&schema).unwrap();
    for k in &r.knot {
        let json: serde_json::Value = serde_json::from_str(&crate::report::heap_root::to_json(k)).unwrap();
        let errors: Vec<String> = v.iter_errors(&json).map(|e| format!("{e} at {}", e.instance_path())).take(5).collect();
        assert!(errors.is_empty(), "{:#x}: {errors:#?}", k.object.0);
        assert_eq!(json["object"], serde_json::json!(format!("{:#x}", k.object.0)));
    }
}

/// `knot heap root --all` reads the whole heap as a graph: under a memory limit too small for
/// it (`--max-memory`), it is refused, saying the limit and the flags that lift it, never read
/// past the limit; under a limit it fits, or with its arrays in scratch files, the answer is
/// the unbounded one.
#[test]
fn heap_root_all_keeps_to_the_memory_limit_and_says_when_it_does_not_fit() {
    let Some(r) = read() else { return };
    let s = sample().unwrap();
    let addrs: Vec<u64> = r.sos.iter().take(3).map(|o| o.address).collect();
    let at = |max_memory: Option<u64>, scratch_dir: Option<PathBuf>| {
        let opts = Options { locator: s.locator.clone(), max_memory, scratch_dir, ..Options::default() };
        crate::heap::heap_roots(&s.core, &opts, &addrs, RootSearch::AllRoots)
    };
    let why = match at(Some(1 << 20), None) {
        Err(crate::heap::HeapRootError::Heap(why)) => why,
        other => panic!("read under a 1 MiB limit: {:?}", other.map(|r| r.len())),
    };
    assert!(why.contains("memory limit of 1048576 bytes") && why.contains("--max-memory") && why.contains("--scratch-dir"), "{why}");
    let roomy = at(Some(64 << 30), None).expect("fits");
    let json = |all: &[HeapRootReport]| all.iter().map(crate::report::heap_root::to_json).collect::<Vec<_>>();
    assert_eq!(json(&roomy), json(&r.knot[..3]), "a limit it fits changes nothing");
}
