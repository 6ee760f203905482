//! Lock owners, waiters, cycles and groups, for every native sample, against what the program
//! really does (samples/native/expected.toml): exactly those locks, owners, waiters and cycles —
//! no more, no fewer — from gcore and kernel dumps alike.

mod common;

use knot::report::{Report, Verdict};
use knot::report::{LockFact, Owner};
use knot_samples::expected::{self, Expected, ExpectedLock};
use knot_samples::{DumpKind, SampleDump};
use std::collections::BTreeMap;

/// `rust_mutex::LEDGER::h0123456789abcdef` → `rust_mutex::LEDGER`.
fn without_hash(name: &str) -> &str {
    match name.rsplit_once("::h") {
        Some((head, hash)) if hash.len() == 16 && hash.chars().all(|c| c.is_ascii_hexdigit()) => head,
        _ => name,
    }
}

fn strip_generics(name: &str) -> String {
    let mut out = String::new();
    let mut depth = 0usize;
    for c in name.chars() {
        match c {
            '<' => depth += 1,
            '>' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// Each thread's role: the one expected role whose function is on its stack.
fn roles(report: &Report, exp: &Expected) -> BTreeMap<u32, String> {
    let mut out = BTreeMap::new();
    for t in &report.threads {
        let names: Vec<String> = t.frames.iter().filter_map(|f| f.function.as_deref()).map(strip_generics).collect();
        let found: Vec<&String> = exp.threads.keys().filter(|role| names.iter().any(|n| n == *role)).collect();
        assert_eq!(found.len(), 1, "thread {} should have exactly one role of {:?}, has {found:?}; stack: {names:?}", t.tid, exp.threads.keys());
        out.insert(t.tid, found[0].clone());
    }
    out
}

fn role_counts(tids: &[u32], roles: &BTreeMap<u32, String>) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for t in tids {
        *m.entry(roles.get(t).cloned().unwrap_or_else(|| format!("<unknown thread {t}>"))).or_insert(0) += 1;
    }
    m
}

fn knot_kind(expected_kind: &str) -> &str {
    if expected_kind == "rust-mutex" { "futex" } else { expected_kind }
}

fn find_lock<'r>(report: &'r Report, e: &ExpectedLock, roles: &BTreeMap<u32, String>) -> &'r LockFact {
    let matches: Vec<&LockFact> = report
        .locks
        .iter()
        .filter(|l| l.kind == knot_kind(&e.kind))
        .filter(|l| match &e.symbol {
            Some(sym) => l.name.as_deref().map(without_hash) == Some(sym.as_str()) || l.name.as_deref().map(without_hash).is_some_and(|n| n.ends_with(&format!("::{sym}"))),
            // A join is named by the thread it waits for; another lock no symbol names is the
            // only one of its kind.
            None if e.kind == "join" => l.owner_tid.and_then(|t| roles.get(&t)) == e.owner.as_ref(),
            None => l.name.is_none(),
        })
        .collect();
    assert_eq!(matches.len(), 1, "expected one {} lock {:?} (owner {:?}); knot has {:#?}", e.kind, e.symbol, e.owner, report.locks);
    matches[0]
}

fn check_lock(report: &Report, e: &ExpectedLock, roles: &BTreeMap<u32, String>) {
    let l = find_lock(report, e, roles);
    let what = format!("lock {} ({})", knot::report::words::lock_name(l), l.id);
    assert_eq!(role_counts(&l.waiter_tids, roles), e.waiters, "{what}: waiters");
    for t in &l.waiter_tids {
        let thread = report.threads.iter().find(|x| x.tid == *t).unwrap();
        assert_eq!(thread.blocked_on.as_deref(), Some(l.id.as_str()), "{what}: waiter {t} should be blocked on it");
    }
    if e.owner_gone {
        assert!(matches!(l.owner, Owner::Exited { .. }), "{what}: owner should have exited, knot says {:?}", l.owner);
        assert_eq!(l.owner_tid, None);
    } else if e.owner_process {
        let Owner::OtherProcess { tid } = l.owner else { panic!("{what}: the owner is another process, knot says {:?}", l.owner) };
        assert!(!roles.contains_key(&tid), "{what}: {tid} is a thread of the dump");
        assert_eq!(l.owner_tid, None);
    } else if !e.shared_owners.is_empty() {
        let readers: usize = e.shared_owners.values().sum();
        let Owner::Readers { count, reader_tids, reader_evidence } = &l.owner else { panic!("{what}: read holders, knot says {:?}", l.owner) };
        assert_eq!(*count as usize, readers, "{what}: read holders");
        // Readers are inferred, never recorded: each one offered must be a reader, with evidence.
        assert_eq!(reader_tids.len(), reader_evidence.len(), "{what}: evidence for each inferred reader");
        for t in reader_tids {
            assert!(roles.get(t).is_some_and(|r| e.shared_owners.contains_key(r)), "{what}: inferred reader {t} ({:?}) is not one", roles.get(t));
        }
    } else if let Some(owner) = &e.owner {
        if e.owner_is_recorded() {
            assert!(matches!(l.owner, Owner::Known { .. }), "{what}: the lock records its owner, knot says {:?}", l.owner);
            assert_eq!(l.owner_tid.and_then(|t| roles.get(&t)), Some(owner), "{what}: owner");
        } else {
            // Not recorded: an owner may only be offered as inferred, and then it must be right.
            match &l.owner {
                Owner::Inferred { tid, .. } => assert_eq!(roles.get(tid), Some(owner), "{what}: inferred owner"),
                Owner::Unknown { .. } => {}
                other => panic!("{what}: an unrecorded owner cannot be {other:?}"),
            }
        }
    } else {
        assert!(matches!(l.owner, Owner::None | Owner::Unknown { .. }), "{what}: nobody owns it, knot says {:?}", l.owner);
    }
    if let Some(n) = e.recursion {
        assert_eq!(l.recursion, Some(n), "{what}: recursion count");
    }
    if let Some(t) = &e.mutex_type {
        let word = match t.as_str() {
            "pi" => "priority-inheritance",
            other => other,
        };
        assert!(l.label.contains(word), "{what}: label {:?} should say {word}", l.label);
    }
    if let (Some(arrived), Some(parties)) = (e.arrived, e.parties) {
        let words = format!("{arrived} of {parties} arrived");
        assert!(l.label.contains(&words), "{what}: label {:?} should say {words}", l.label);
    }
    if e.inconsistent {
        assert!(l.label.contains("inconsistent"), "{what}: label {:?} should say inconsistent", l.label);
    }
}

/// A cycle as roles, rotated to start at its smallest role (a cycle has no first element).
fn canonical(mut cycle: Vec<String>) -> Vec<String> {
    if let Some(min) = cycle.iter().enumerate().min_by(|a, b| a.1.cmp(b.1)).map(|(i, _)| i) {
        cycle.rotate_left(min);
    }
    cycle
}

fn check(dump: &SampleDump) {
    if NOT_BY_ROLES.contains(&dump.name.as_str()) {
        return;
    }
    let report = common::analyze(dump);
    let exp = expected::for_sample(&dump.name).unwrap();
    let roles = roles(&report, &exp);
    assert_eq!(role_counts(&report.threads.iter().map(|t| t.tid).collect::<Vec<_>>(), &roles), exp.threads, "threads by role");

    // Exactly the locks somebody waits on.
    let expected_waited: Vec<&ExpectedLock> = exp.locks.iter().filter(|l| !l.waiters.is_empty()).collect();
    let knot_waited = report.locks.iter().filter(|l| !l.waiter_tids.is_empty()).count();
    assert_eq!(knot_waited, expected_waited.len(), "number of waited-on locks; knot has {:#?}", report.locks);
    for e in expected_waited {
        check_lock(&report, e, &roles);
    }

    let mut want: Vec<Vec<String>> = exp.cycles.iter().cloned().map(canonical).collect();
    let mut have: Vec<Vec<String>> = report.deadlocks.iter().map(|d| canonical(d.tids.iter().map(|t| roles[t].clone()).collect())).collect();
    want.sort();
    have.sort();
    assert_eq!(have, want, "cycles (as roles); knot: {:#?}", report.deadlocks);
    assert_eq!(report.verdict == Verdict::Deadlock, !want.is_empty(), "verdict {:?}", report.verdict);
    if let Some(v) = &exp.verdict {
        assert_eq!(serde_json::to_value(report.verdict).unwrap(), serde_json::json!(v), "verdict");
    }

    // Threads of one role run the same code to the same place: one group each.
    for (role, &count) in &exp.threads {
        let tids: Vec<u32> = roles.iter().filter(|(_, r)| *r == role).map(|(t, _)| *t).collect();
        let group = report.groups.iter().find(|g| g.tids.contains(&tids[0])).unwrap();
        if count > 1 {
            assert_eq!(group.tids.len(), count, "role {role}: its {count} threads should form one group, got {:?}", group.tids);
        }
        assert!(group.tids.iter().all(|t| roles[t] == *role), "role {role}: group {:?} mixes roles", group.tids);
    }
}

macro_rules! lock_facts_match {
    ($($name:ident),* $(,)?) => {$(
        #[test]
        fn $name() {
            for kind in DumpKind::ALL {
                if let Some(dump) = common::made(stringify!($name), kind) {
                    check(&dump);
                }
            }
        }
    )*};
}

native_samples!(lock_facts_match);

/// Dumps whose threads no function tells apart, read by other tests: a smashed stack's crashed
/// thread has no frame but the address it returned to (tests/crash.rs reads it); a Python
/// program's threads all run the interpreter's C code (tests/native_owners.rs reads it against
/// gdb's `py-bt`).
const NOT_BY_ROLES: &[&str] = &["smashed_stack", "py_lock_abba"];

#[test]
fn committed_dumps_give_the_same_facts() {
    for &(name, kind) in knot_samples::COMMITTED_SET {
        check(&common::committed(name, kind));
    }
}

/// Issue 33: the same facts on the dumps made on arm64 (the generic syscall table, `svc #0`
/// rewound for the restart, glibc's aarch64 lock layouts): abba is a DEADLOCK with its owners.
#[test]
fn committed_aarch64_dumps_give_the_same_facts() {
    for &(name, kind) in knot_samples::COMMITTED_AARCH64_SET {
        check(&common::committed_aarch64(name, kind));
    }
}

/// Issue 12, item 4: in the kernel's core of a timed-lock ABBA deadlock
/// (`pthread_mutex_timedlock`, stopped and continued once), both workers are in
/// `restart_syscall` (219), not `futex`: knot reads each as the futex wait it resumes, from its
/// frames and registers, and says DEADLOCK.
#[test]
fn timed_lock_waits_resumed_by_restart_syscall_are_a_deadlock() {
    let dump = common::committed("timed_abba", DumpKind::Kernel);
    let process = knot::process::Process::open(&dump.core, &common::options_for(&dump).locator).expect("core");
    let restarted = process.core.threads.iter().filter(|t| t.registers.syscall_number() == Some(219)).count();
    assert_eq!(restarted, 2, "the sample's two workers sleep in restart_syscall");
    let report = common::analyze(&dump);
    assert_eq!(report.verdict, knot::report::Verdict::Deadlock);
    assert_eq!(report.deadlocks.len(), 1);
    assert_eq!(report.deadlocks[0].tids.len(), 2);
    let evidence: Vec<String> = report.locks.iter().flat_map(|l| l.evidence.iter()).map(|e| e.to_string()).filter(|e| e.contains("restart_syscall")).collect();
    assert_eq!(evidence.len(), 2, "each restarted wait says so: {:?}", report.locks);
}

/// Issue 12, item 5: the read-held rwlock's readers are named — inferred from the pointer each
/// keeps into the lock while it reads (here, blocked on another mutex), never as known.
#[test]
fn a_read_held_rwlock_names_its_readers_by_inference() {
    let dump = common::committed("rwlock_readers", DumpKind::Kernel);
    let report = common::analyze(&dump);
    let exp = expected::for_sample("rwlock_readers").expect("rwlock_readers in expected.toml");
    let roles = roles(&report, &exp);
    let l = report.locks.iter().find(|l| l.name.as_deref() == Some("inventory")).expect("the inventory rwlock");
    let Owner::Readers { count, reader_tids, reader_evidence } = &l.owner else { panic!("{:?}", l.owner) };
    assert_eq!(*count, 2);
    let mut named: Vec<&str> = reader_tids.iter().filter_map(|t| roles.get(t).map(String::as_str)).collect();
    named.sort();
    assert_eq!(named, ["reader_thread", "reader_thread"], "{reader_tids:?}: {reader_evidence:?}");
    assert_eq!(l.owner_tid, None, "readers are candidates, not an owner");
    let text = knot::report::text::render(&report, &Default::default());
    assert!(text.contains("probably threads"), "{text}");
}
