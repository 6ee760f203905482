//! Waits with no owner field in the wait-for graph (issue 40, items 1, 2, 5 and 9), against the
//! samples made for them and SOS's readings beside each dump:
//! - task_cycle: a thread holds a SemaphoreSlim (`Wait()`) and `Task.Wait()`s a task whose
//!   `MoveNext` runs on a pool worker blocked on a Monitor held by a thread in the semaphore's
//!   `Wait()` — a three-party deadlock, its two ownerless edges inferred (the task's runner from
//!   the worker's frames and stack, the semaphore's holder from the one stack that holds it);
//! - parallel_barrier: `Parallel.For` bodies in `Barrier.SignalAndWait` on a pool at its
//!   maximum, the replica that would bring the missing participants queued behind them — a
//!   deadlock through the pool, the Barrier named with its participants;
//! - redis_pool (committed trimmed: samples/dotnet/README.md, "Trimmed dumps"): StackExchange.Redis
//!   requests block every worker while the socket engine's work item waits in the queue — a
//!   deadlock through the pool; the synchronous getters are said to be in `Monitor.Wait`; the
//!   library's IO threads are idle; no Monitor only waited on is "being handed over".

use knot::Options;
use knot::process::Locator;
use knot::report::text::{self, TextOptions};
use knot::report::{LockFact, Owner, Report, ThreadState, Verdict};
use knot_samples::dotnet::DotnetDump;
use std::collections::BTreeSet;

fn dump(sample: &str) -> Option<DotnetDump> {
    knot_samples::dotnet::dumps("sos/clrstack-all.txt", true).into_iter().find(|d| d.sample == sample && d.kind == "heap")
}

fn analyze(d: &DotnetDump) -> Report {
    let locator = Locator { sysroot: d.sysroot.clone(), search_dirs: d.search_dirs.clone(), ..Locator::default() };
    knot::analyze(&d.core, &Options { locator, ..Options::default() }).unwrap_or_else(|e| panic!("{}: {e}", d.name()))
}

fn sos(d: &DotnetDump, file: &str) -> String {
    std::fs::read_to_string(d.dir.join("sos").join(file)).unwrap_or_else(|e| panic!("{}: sos/{file}: {e}", d.name()))
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap_or_else(|_| panic!("hex {s}"))
}

/// OS tid of each managed thread named `name` (sos/thread-names.txt).
fn tids_named(d: &DotnetDump, name: &str) -> Vec<u32> {
    sos(d, "thread-names.txt")
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let p: Vec<&str> = l.split_whitespace().collect();
            (p.len() >= 6 && p[5..].join(" ") == name).then(|| p[3].parse().ok()).flatten()
        })
        .collect()
}

fn tid_named(d: &DotnetDump, name: &str) -> u32 {
    let t = tids_named(d, name);
    assert_eq!(t.len(), 1, "{}: one thread {name}", d.name());
    t[0]
}

/// The OS tids whose SOS stack (clrstack -all) has a frame containing `frame`.
fn sos_threads_with_frame(d: &DotnetDump, frame: &str) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    let mut cur = None;
    for l in sos(d, "clrstack-all.txt").lines() {
        if let Some(t) = l.strip_prefix("OS Thread Id: 0x") {
            cur = u32::from_str_radix(t.split_whitespace().next().unwrap_or(""), 16).ok();
        } else if l.contains(frame) {
            out.extend(cur);
        }
    }
    out
}

fn lock_of(r: &Report, tid: u32) -> &LockFact {
    let t = r.threads.iter().find(|t| t.tid == tid).unwrap_or_else(|| panic!("no thread {tid}"));
    let id = t.blocked_on.as_deref().unwrap_or_else(|| panic!("thread {tid} is blocked on nothing: {:?}", t.state));
    r.locks.iter().find(|l| l.id == id).expect("its lock")
}

fn evidence(l: &LockFact) -> Vec<String> {
    serde_json::to_value(l).expect("json")["evidence"].as_array().expect("evidence").iter().filter_map(|e| e.as_str().map(String::from)).collect()
}

/// The words of an inferred owner's evidence (`owner.evidence` in JSON).
fn owner_evidence(l: &LockFact) -> String {
    serde_json::to_value(&l.owner).expect("json")["evidence"].as_str().unwrap_or_default().to_string()
}

fn verdict_line(r: &Report) -> String {
    text::render(r, &TextOptions::default()).lines().find(|l| l.starts_with("Verdict:")).expect("verdict").to_string()
}

#[test]
fn a_semaphore_a_task_run_by_a_worker_and_a_monitor_close_a_cycle() {
    let d = dump("task_cycle").expect("the committed task_cycle dump");
    let r = analyze(&d);
    let gate_holder = tid_named(&d, "GateHolder");
    let ledger_holder = tid_named(&d, "LedgerHolder");
    let runners = sos_threads_with_frame(&d, "<RefreshLedgerAsync>d__9.MoveNext()");
    assert_eq!(runners.len(), 1, "SOS: one worker runs RefreshLedgerAsync's MoveNext");
    let worker = *runners.first().expect("worker");

    // GateHolder waits for the task SOS dumpasync lists, which the worker runs (inferred).
    let boxes: Vec<u64> = sos(&d, "dumpasync-tasks.txt").lines().filter(|l| l.ends_with("Program+<RefreshLedgerAsync>d__9")).filter_map(|l| l.split_whitespace().next().map(hex)).collect();
    assert_eq!(boxes.len(), 1);
    let task = lock_of(&r, gate_holder);
    assert_eq!(task.kind, "task");
    assert_eq!(task.managed.as_ref().map(|m| m.object.0), Some(boxes[0]));
    assert!(matches!(task.owner, Owner::Inferred { tid, .. } if tid == worker), "the task's runner: {:?}", task.owner);
    let why = owner_evidence(task);
    assert!(why.contains("RefreshLedgerAsync") && why.contains("MoveNext"), "{why}");

    // The worker waits for Ledger.Sync, which LedgerHolder holds (syncblk).
    let monitor = lock_of(&r, worker);
    assert_eq!(monitor.kind, "monitor");
    assert_eq!(monitor.owner_tid, Some(ledger_holder));

    // LedgerHolder waits for the SemaphoreSlim SOS read (count 0 of 1), whose holder is inferred
    // from the one stack that holds it: GateHolder's, where SOS's dso finds it too.
    let semaphores = sos(&d, "semaphores.txt");
    let sem: u64 = semaphores.lines().find_map(|l| l.strip_prefix("object ")).and_then(|l| l.split_whitespace().next()).map(hex).expect("sos semaphore");
    let gate = lock_of(&r, ledger_holder);
    assert_eq!(gate.kind, "semaphore_slim");
    assert_eq!(gate.managed.as_ref().map(|m| (m.object.0, m.current_count, m.max_count)), Some((sem, Some(0), Some(1))));
    assert!(matches!(gate.owner, Owner::Inferred { tid, .. } if tid == gate_holder), "the semaphore's holder: {:?}", gate.owner);
    let dso = sos(&d, "dso.txt");
    let gate_block = dso.split("### OSID ").find(|b| b.starts_with(&format!("{gate_holder:x}\n"))).expect("GateHolder's dso");
    let slots: Vec<u64> = gate_block.lines().filter(|l| l.ends_with("System.Threading.SemaphoreSlim")).filter_map(|l| l.split_whitespace().next().map(hex)).collect();
    let why = owner_evidence(gate);
    assert!(slots.iter().any(|s| why.contains(&format!("{s:#x}"))), "the stack slot is one SOS's dso lists ({slots:x?}): {why}");

    // One cycle through the three, inferred, said with each lock.
    assert_eq!(r.verdict, Verdict::Deadlock);
    assert_eq!(r.deadlocks.len(), 1, "{:?}", r.deadlocks);
    let c = &r.deadlocks[0];
    assert!(c.thread_pool.is_none());
    assert_eq!(c.tids.iter().copied().collect::<BTreeSet<u32>>(), BTreeSet::from([gate_holder, worker, ledger_holder]));
    assert!(c.inferred);
    let line = verdict_line(&r);
    assert!(line.starts_with("Verdict: DEADLOCK"), "{line}");
}

#[test]
fn parallel_for_in_a_barrier_on_a_full_pool_is_a_deadlock_through_the_pool() {
    let d = dump("parallel_barrier").expect("the committed parallel_barrier dump");
    let r = analyze(&d);
    let workers: BTreeSet<u32> = tids_named(&d, ".NET TP Worker").into_iter().collect();
    assert_eq!(workers.len(), 3);
    let main = tid_named(&d, "Main");
    // SOS: _currentTotalCount 0x00040006 on the Barrier.
    let barriers = sos(&d, "barriers.txt");
    let row = barriers.lines().find(|l| l.starts_with("object ")).expect("sos barrier");
    let address = hex(row.split_whitespace().nth(1).expect("address"));
    let count = hex(row.split("_currentTotalCount=").nth(1).and_then(|v| v.split_whitespace().next()).expect("count"));
    let (arrived, participants) = ((count >> 16) & 0x7fff, count & 0x7fff);
    for &t in workers.iter().chain([&main]) {
        let l = lock_of(&r, t);
        let b = l.managed.as_ref().and_then(|m| m.barrier.as_ref()).unwrap_or_else(|| panic!("thread {t}: no Barrier on {}", l.id));
        assert_eq!((b.address.0, b.arrived as u64, b.participants as u64), (address, arrived, participants));
    }
    assert_eq!(r.verdict, Verdict::Deadlock);
    let pool = r.deadlocks.iter().find_map(|c| c.thread_pool.as_ref()).expect("a deadlock through the pool");
    assert_eq!(pool.workers.iter().copied().collect::<BTreeSet<u32>>(), workers);
    let line = verdict_line(&r);
    assert!(line.contains("Barrier.SignalAndWait (4 of 6 participants arrived)"), "{line}");
    assert!(line.contains("Parallel replica"), "{line}");
    assert!(!line.contains("ManualResetEventSlim"), "{line}");
}

#[test]
fn redis_requests_behind_the_socket_engine_s_work_item_deadlock_the_pool() {
    let d = dump("redis_pool").expect("samples/dotnet/dumps/redis_pool/heap is committed");
    assert!(d.committed, "{}", d.name());
    let r = analyze(&d);
    let workers: BTreeSet<u32> = tids_named(&d, ".NET TP Worker").into_iter().collect();
    assert_eq!(r.verdict, Verdict::Deadlock);
    let pool = r.deadlocks.iter().find_map(|c| c.thread_pool.as_ref()).expect("a deadlock through the pool");
    assert_eq!(pool.workers.iter().copied().collect::<BTreeSet<u32>>(), workers);
    for &w in &workers {
        let l = lock_of(&r, w);
        assert!(evidence(l).iter().any(|e| e.contains("System.Net.Sockets.SocketAsyncEngine is queued")), "worker {w}: {:?}", evidence(l));
    }
    let line = verdict_line(&r);
    assert!(line.contains("at Program.BlockOnSyncGet in Monitor.Wait"), "{line}");
    assert!(!line.contains("BlockOnSyncGet in ManualResetEventSlim.Wait"), "{line}");
    // The library's IO threads wait for work: idle.
    for name in (0..10).map(|i| format!("DefaultSocketManager:IO:{i}")) {
        let t = r.threads.iter().find(|t| t.name.as_deref() == Some(name.as_str())).unwrap_or_else(|| panic!("no thread {name}"));
        assert!(matches!(t.state, ThreadState::WaitingForWork { .. }), "{name}: {:?}", t.state);
        assert_eq!(t.blocked_on, None);
    }
    let json = serde_json::to_string(&r).expect("json");
    assert!(!json.contains("being handed over"), "a Monitor only waited on is not being handed over");
}
