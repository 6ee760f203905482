//! The wedges of issue 40's reader-writer lock and class initialiser (samples/dotnet/
//! rwlock_writer, class_init; their truth in samples/dotnet/expected.toml and README.md), read
//! from their committed dumps against SOS's and gdb's readings recorded beside them.

use knot::Options;
use knot::process::Locator;
use knot::report::Report;

fn dump(sample: &str) -> Option<knot_samples::dotnet::DotnetDump> {
    let d = knot_samples::dotnet::dumps("sos/syncblk.txt", false).into_iter().find(|d| d.sample == sample);
    if d.is_none() {
        knot_samples::skipped(&format!("skipping: samples/dotnet/dumps/{sample}/heap not found"));
    }
    d
}

fn analyze(d: &knot_samples::dotnet::DotnetDump) -> Report {
    let locator = Locator { sysroot: d.sysroot.clone(), search_dirs: d.search_dirs.clone(), ..Locator::default() };
    knot::analyze(&d.core, &Options { locator, ..Options::default() }).expect("the dump reads")
}

/// The OS tid of a thread SOS named in `sos/thread-names.txt`.
fn tid(d: &knot_samples::dotnet::DotnetDump, name: &str) -> u32 {
    let text = std::fs::read_to_string(d.dir.join("sos/thread-names.txt")).expect("thread-names.txt");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 6 && f[5] == name).then(|| f[3].parse().expect("a tid"))
        })
        .unwrap_or_else(|| panic!("no thread {name} in thread-names.txt"))
}

/// gdb's reading of the class-init lock: the mutex's address and `__owner`.
fn class_init_mutex(d: &knot_samples::dotnet::DotnetDump) -> (u64, u32) {
    let text = std::fs::read_to_string(d.dir.join("gdb/class-init-lock.txt")).expect("gdb/class-init-lock.txt");
    let addr = text.split("the mutex 0x").nth(1).and_then(|s| s.split_whitespace().next()).expect("the mutex address");
    let owner = text.split("__owner = ").nth(1).and_then(|s| s.split(',').next()).expect("__owner");
    (u64::from_str_radix(addr, 16).expect("hex"), owner.parse().expect("a tid"))
}

#[test]
fn a_static_constructor_waiting_for_a_monitor_its_reader_holds_is_a_cycle() {
    let Some(d) = dump("class_init") else { return };
    let report = analyze(&d);
    let (loader, reader) = (tid(&d, "RegistryLoader"), tid(&d, "ConfigReader"));
    let (mutex, owner) = class_init_mutex(&d);
    assert_eq!(owner, loader, "gdb: the initialiser's thread holds the class-init lock");
    assert_eq!(report.verdict, knot::report::Verdict::Deadlock);
    assert_eq!(report.deadlocks.len(), 1, "{:?}", report.deadlocks);
    let mut tids = report.deadlocks[0].tids.clone();
    tids.sort_unstable();
    let mut want = vec![loader, reader];
    want.sort_unstable();
    assert_eq!(tids, want);
    // The reader waits for the class-init lock (the mutex gdb names), held by the initialiser.
    let init = report.locks.iter().find(|l| l.address.is_some_and(|a| a.0 == mutex)).expect("the class-init lock");
    assert_eq!((init.owner_tid, init.waiter_tids.as_slice()), (Some(loader), &[reader][..]));
    // The initialiser waits for Settings.Gate's Monitor, held by the reader (syncblk).
    let gate = report.locks.iter().find(|l| l.kind == "monitor").expect("the Gate's monitor");
    assert_eq!((gate.owner_tid, gate.waiter_tids.as_slice()), (Some(reader), &[loader][..]));
}

#[test]
fn the_writer_waits_and_the_readers_wait_for_its_monitor() {
    let Some(d) = dump("rwlock_writer") else { return };
    let report = analyze(&d);
    let journal = report.locks.iter().find(|l| l.kind == "monitor").expect("the Journal's monitor");
    assert_eq!(journal.owner_tid, Some(tid(&d, "Repricer")));
    let mut readers = vec![tid(&d, "Quote-1"), tid(&d, "Quote-2"), tid(&d, "Auditor")];
    readers.sort_unstable();
    assert_eq!(journal.waiter_tids, readers, "the three holders of the read lock wait for the Journal");
    assert!(journal.label.contains("PriceBook.Journal"), "named by its static field: {}", journal.label);
    // The writer and the late reader are blocked (in the lock's WaitOnEvent).
    for name in ["Repricer", "Quote-late"] {
        let t = report.threads.iter().find(|t| t.tid == tid(&d, name)).expect("the thread");
        assert!(t.state.is_blocked(), "{name}: {:?}", t.state);
    }
}
