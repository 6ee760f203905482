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

/// A value SOS's `sos_fields` line gives for `field` (`object 7f… _owners=0x40000003 …`).
fn sos_field(line: &str, field: &str) -> u64 {
    let v = line.split_whitespace().find_map(|w| w.strip_prefix(&format!("{field}="))).unwrap_or_else(|| panic!("no {field} in {line}"));
    u64::from_str_radix(v.trim_start_matches("0x"), 16).expect("hex")
}

/// The managed thread id → OS tid of `sos/thread-names.txt`.
fn tid_of_managed(d: &knot_samples::dotnet::DotnetDump, managed: u64) -> u32 {
    let text = std::fs::read_to_string(d.dir.join("sos/thread-names.txt")).expect("thread-names.txt");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 6 && f[1].parse() == Ok(managed)).then(|| f[3].parse().expect("a tid"))
        })
        .unwrap_or_else(|| panic!("no managed thread {managed} in thread-names.txt"))
}

/// SOS's reading of the ReaderWriterLockSlim: its address, `_owners`, `_upgradeLockOwnerId`, and
/// the threads whose `t_rwc` record for it has a read count (`dumpclass`' thread static values,
/// by hex OS tid, and each record's fields).
fn sos_rwlock(d: &knot_samples::dotnet::DotnetDump) -> (u64, u64, u64, Vec<u32>) {
    let lock = std::fs::read_to_string(d.dir.join("sos/rwlock.txt")).expect("rwlock.txt");
    let line = lock.lines().find(|l| l.starts_with("object ")).expect("the lock's fields");
    let address = u64::from_str_radix(line.split_whitespace().nth(1).expect("address"), 16).expect("hex");
    let lock_id = sos_field(line, "_lockID");
    let records = std::fs::read_to_string(d.dir.join("sos/rwcounts.txt")).expect("rwcounts.txt");
    let reading: Vec<String> = records
        .lines()
        .filter(|l| l.starts_with("object ") && sos_field(l, "lockID") == lock_id && sos_field(l, "readercount") > 0)
        .map(|l| l.split_whitespace().nth(1).expect("address").to_string())
        .collect();
    // `        414f:00007f093180a458`: the thread static's value per thread.
    let mut readers: Vec<u32> = lock
        .lines()
        .filter_map(|l| {
            let (tid, value) = l.trim().split_once(':')?;
            let tid = u32::from_str_radix(tid, 16).ok()?;
            reading.iter().any(|r| value.trim_start_matches('0') == r.as_str()).then_some(tid)
        })
        .collect();
    readers.sort_unstable();
    (address, sos_field(line, "_owners"), sos_field(line, "_upgradeLockOwnerId"), readers)
}

#[test]
fn a_writer_behind_readers_waits_for_every_holder_of_the_reader_writer_lock() {
    let Some(d) = dump("rwlock_writer") else { return };
    let report = analyze(&d);
    let (address, owners, upgrade_id, sos_readers) = sos_rwlock(&d);
    assert_eq!(sos_readers, vec![tid(&d, "Quote-1"), tid(&d, "Quote-2")], "SOS: the two readers' t_rwc records");
    let (writer, auditor, late) = (tid(&d, "Repricer"), tid_of_managed(&d, upgrade_id), tid(&d, "Quote-late"));
    assert_eq!(auditor, tid(&d, "Auditor"), "SOS: _upgradeLockOwnerId is the Auditor's");
    let nodes: Vec<_> = report.locks.iter().filter(|l| l.kind == "rwlock_slim").collect();
    assert_eq!(nodes.len(), 2, "its holders and its door for new readers: {:?}", nodes.iter().map(|l| &l.id).collect::<Vec<_>>());
    assert!(nodes.iter().all(|l| l.address.is_some_and(|a| a.0 == address)));

    // The writer waits for the readers SOS found and the upgradeable holder: all must leave.
    let holders = nodes.iter().find(|l| l.waiter_tids == [writer]).expect("the writer's wait");
    let mut want = [sos_readers.clone(), vec![auditor]].concat();
    want.sort_unstable();
    assert_eq!(holders.holders.iter().map(|h| h.tid).collect::<Vec<_>>(), want);
    assert!(holders.holders.iter().all(|h| !h.is_inferred()), "each from its own record or the lock's field");
    assert_eq!(format!("{:?}", holders.release), "Some(All)");
    assert_eq!(holders.readers, Some((owners & 0x0FFF_FFFF) as u32), "_owners' count of holders");
    assert!(holders.label.contains("3 holders (2 readers, upgradeable"), "{}", holders.label);

    // The late reader waits for the waiting writer, which bars new readers (WAITING_WRITERS).
    assert_ne!(owners & 0x4000_0000, 0, "SOS: a writer waits");
    let door = nodes.iter().find(|l| l.waiter_tids == [late]).expect("the late reader's wait");
    assert_eq!(door.holders.iter().map(|h| (h.tid, h.is_inferred())).collect::<Vec<_>>(), vec![(writer, true)]);

    // The deadlock: the readers wait for the Journal's Monitor, which the writer holds.
    assert_eq!(report.verdict, knot::report::Verdict::Deadlock);
    assert_eq!(report.deadlocks.len(), 1, "{:?}", report.deadlocks);
    let c = &report.deadlocks[0];
    let mut stuck = [c.tids.clone(), c.also.clone()].concat();
    stuck.sort_unstable();
    let mut want = [want, vec![writer]].concat();
    want.sort_unstable();
    assert_eq!(stuck, want, "{}", c.description);
    assert!(c.description.contains("PriceBook.Lock") && c.description.contains("PriceBook.Journal") && c.description.contains("Repricer ("), "{}", c.description);
}

#[test]
fn the_class_init_lock_is_named_for_its_class_and_the_cycle_for_its_threads() {
    let Some(d) = dump("class_init") else { return };
    let report = analyze(&d);
    let (mutex, loader) = class_init_mutex(&d);
    let init = report.locks.iter().find(|l| l.address.is_some_and(|a| a.0 == mutex)).expect("the class-init lock");
    assert_eq!(init.kind, "class_init");
    assert!(init.label.starts_with("initialising Registry"), "{}", init.label);
    assert_eq!(init.owner_tid, Some(loader));
    let c = &report.deadlocks[0];
    assert!(c.description.starts_with("RegistryLoader (") && c.description.contains("is initialising Registry"), "{}", c.description);
    assert!(c.description.contains("ConfigReader (") && c.description.contains("Registry's class initialiser"), "{}", c.description);
}

/// SOS's `dumpclass` of `class`: the value of its static `field`.
fn sos_static(d: &knot_samples::dotnet::DotnetDump, class: &str, field: &str) -> u64 {
    let text = std::fs::read_to_string(d.dir.join("sos/statics.txt")).expect("statics.txt");
    let part = text.split("Class Name:").find(|p| p.trim_start().starts_with(class)).unwrap_or_else(|| panic!("no {class} in statics.txt"));
    let line = part.lines().find(|l| l.split_whitespace().last() == Some(field) && l.contains(" static ")).unwrap_or_else(|| panic!("no {field}"));
    u64::from_str_radix(line.split_whitespace().rev().nth(1).expect("value"), 16).expect("hex")
}

#[test]
fn a_static_of_a_module_with_no_object_on_the_heap_names_its_lock() {
    let Some(d) = dump("class_init") else { return };
    let report = analyze(&d);
    // Settings is a static class: its module's types have no instance on the heap.
    let gate = sos_static(&d, "Knot.Samples.ClassInit.Settings", "Gate");
    let l = report.locks.iter().find(|l| l.kind == "monitor").expect("the Gate's monitor");
    assert_eq!(l.managed.as_ref().map(|m| m.object.0), Some(gate));
    assert!(report.deadlocks[0].description.contains("(Settings.Gate)"), "{}", report.deadlocks[0].description);
}

/// npgsql_pool's committed dump (trimmed: samples/dotnet/README.md, "Trimmed dumps"), read with
/// the committed runtime and app files only.
#[test]
fn a_pool_whose_every_connection_is_held_by_a_thread_waiting_for_its_waiter_is_a_deadlock() {
    let d = knot_samples::dotnet::dumps("sos/pool.txt", false).into_iter().find(|d| d.sample == "npgsql_pool").expect("samples/dotnet/dumps/npgsql_pool/heap is committed");
    let pool_txt = std::fs::read_to_string(d.dir.join("sos/pool.txt")).expect("pool.txt");
    let line = pool_txt.lines().find(|l| l.starts_with("object ")).expect("the pool's fields");
    let pool = u64::from_str_radix(line.split_whitespace().nth(1).expect("address"), 16).expect("hex");
    assert_eq!((sos_field(line, "_numConnectors"), sos_field(line, "_idleCount")), (4, 0), "SOS: 4 connectors, none idle");
    let report = analyze(&d);
    let requests: Vec<u32> = (1..=4).map(|i| tid(&d, &format!("Request-{i}"))).collect();
    let reconciler = tid(&d, "Reconciler");
    let l = report.locks.iter().find(|l| l.kind == "pool").expect("the pool's wait");
    assert_eq!(l.address.map(|a| a.0), Some(pool));
    assert_eq!(l.waiter_tids, vec![reconciler]);
    // Each connection's holder: the thread whose frames keep its NpgsqlConnection (inferred).
    assert_eq!(l.holders.iter().map(|h| (h.tid, h.is_inferred())).collect::<Vec<_>>(), requests.iter().map(|&t| (t, true)).collect::<Vec<_>>());
    assert_eq!(format!("{:?}", l.release), "Some(Any)");
    assert_eq!(report.deadlocks.len(), 1, "{:?}", report.deadlocks);
    let c = &report.deadlocks[0];
    let mut stuck = [c.tids.clone(), c.also.clone()].concat();
    stuck.sort_unstable();
    assert_eq!(stuck, [requests, vec![reconciler]].concat(), "{}", c.description);
    assert!(c.description.contains("a connection of the Npgsql connection pool") && c.description.contains("all 4 of its maximum 4 in use"), "{}", c.description);
    assert!(c.description.contains("Reconciler (") && c.description.contains("Ledger.Gate"), "{}", c.description);
}
