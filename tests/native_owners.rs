//! Issue 42: native lock owners where knot did not look — a thread the kernel refused a
//! priority-inheritance mutex, owners in another process, a process in a PID namespace of its
//! own, a barrier short of its parties — read from committed dumps of programs that really wedge
//! (samples/native), with the truth of their construction and gdb's reading beside them.

mod common;

use knot::report::{CrashKind, Evidence, LockKind, Owner, Report, ThreadState, Verdict};
use knot_samples::DumpKind;

fn thread_with<'r>(r: &'r Report, function: &str) -> &'r knot::report::ThreadReport {
    r.threads.iter().find(|t| t.frames.iter().any(|f| f.function.as_deref() == Some(function))).unwrap_or_else(|| panic!("a thread in {function}"))
}

fn lock<'r>(r: &'r Report, name: &str) -> &'r knot::report::LockFact {
    r.locks.iter().find(|l| l.name.as_deref() == Some(name)).unwrap_or_else(|| panic!("lock {name} in {:#?}", r.locks))
}

/// ABBA over two PI mutexes: restock_thread sleeps in FUTEX_LOCK_PI on ledger_lock; the kernel
/// refused audit_thread stock_lock (EDEADLK) and glibc parked it on a zero word of its own stack.
/// It waits for stock_lock, whose futex word names restock_thread: a deadlock, and no lock is
/// made of the word it sleeps on.
#[test]
fn a_thread_refused_a_pi_mutex_waits_for_that_mutex() {
    let dump = common::committed("pi_abba", DumpKind::Kernel);
    let r = common::analyze(&dump);
    let (restock, audit) = (thread_with(&r, "restock_thread"), thread_with(&r, "audit_thread"));
    let (stock, ledger) = (lock(&r, "stock_lock"), lock(&r, "ledger_lock"));
    assert_eq!(r.verdict, Verdict::Deadlock);
    assert_eq!(r.deadlocks.len(), 1);
    let mut cycle = r.deadlocks[0].tids.clone();
    cycle.sort_unstable();
    let mut want = vec![restock.tid, audit.tid];
    want.sort_unstable();
    assert_eq!(cycle, want);
    assert!(!r.deadlocks[0].inferred, "both owners are in the futex words");
    assert_eq!(stock.owner, Owner::Known { tid: restock.tid });
    assert_eq!(ledger.owner, Owner::Known { tid: audit.tid });
    assert_eq!(audit.blocked_on.as_deref(), Some(stock.id.as_str()));
    assert!(matches!(&restock.state, ThreadState::Futex { op, .. } if op == "FUTEX_LOCK_PI"), "{:?}", restock.state);
    assert!(stock.label.contains("priority-inheritance") && ledger.label.contains("priority-inheritance"));
    let refusal = stock.evidence.iter().find_map(|e| match e {
        Evidence::RefusedPiMutex { tid, parked_on, mutex, .. } => Some((*tid, *parked_on, *mutex)),
        _ => None,
    });
    let (tid, parked_on, mutex) = refusal.expect("the refusal is said");
    assert_eq!((tid, Some(mutex)), (audit.tid, stock.address.map(|a| a.0)));
    // Only the analyzers' locks: none at the word audit_thread sleeps on.
    assert!(r.locks.iter().all(|l| l.address.map(|a| a.0) != Some(parked_on)), "{:#?}", r.locks);
    assert_eq!(r.locks.len(), 3, "stock_lock, ledger_lock and the join: {:#?}", r.locks);
}

/// A process-shared mutex and rwlock held by a forked child: the owner is another process —
/// alive, just not in this dump — never a thread that "has exited".
#[test]
fn a_process_shared_lock_held_by_a_child_is_held_by_another_process() {
    let dump = common::committed("pshared_child", DumpKind::Gcore);
    let r = common::analyze(&dump);
    let tids: Vec<u32> = r.threads.iter().map(|t| t.tid).collect();
    let shared: Vec<&knot::report::LockFact> = r.locks.iter().filter(|l| matches!(l.kind, LockKind::Mutex | LockKind::Rwlock)).collect();
    assert_eq!(shared.len(), 2, "{:#?}", r.locks);
    let owners: Vec<u32> = shared
        .iter()
        .map(|l| match l.owner {
            Owner::OtherProcess { tid } => tid,
            ref other => panic!("{}: the owner is the child, knot says {other:?}", l.id),
        })
        .collect();
    assert_eq!(owners[0], owners[1], "one child holds both");
    assert!(!tids.contains(&owners[0]));
    let mutex = shared.iter().find(|l| l.kind == LockKind::Mutex).unwrap();
    assert!(mutex.label.contains("process-shared"), "{}", mutex.label);
    let text = knot::report::text::render(&r, &Default::default());
    assert!(text.contains(&format!("held by another process (tid {})", owners[0])), "{text}");
    assert!(!text.contains("has exited"), "{text}");
    assert_eq!(r.verdict, Verdict::Contention);
}

/// The same ABBA deadlock in a process in its own PID namespace. gcore, run from the host, records
/// the host's tids; the mutexes and each thread's struct pthread say the namespace's (2, 3, 4):
/// knot reads the process in its own numbering and finds the deadlock. The kernel's core records
/// the namespace's tids, and its SIGABRT came from the host: a kill from outside the namespace,
/// no abort().
#[test]
fn a_process_in_its_own_pid_namespace_is_read_in_its_numbering() {
    let gcore = common::analyze(&common::committed("pidns_abba", DumpKind::Gcore));
    let mut own: Vec<u32> = gcore.threads.iter().map(|t| t.own_tid.expect("each thread's own tid")).collect();
    own.sort_unstable();
    assert_eq!(own, [2, 3, 4]);
    assert!(gcore.threads.iter().all(|t| t.tid > 4), "the host's tids");
    assert_eq!(gcore.verdict, Verdict::Deadlock);
    let (packer, shipper) = (thread_with(&gcore, "packer_thread"), thread_with(&gcore, "shipper_thread"));
    assert_eq!(lock(&gcore, "crate_lock").owner, Owner::Known { tid: packer.tid });
    assert_eq!(lock(&gcore, "label_lock").owner, Owner::Known { tid: shipper.tid });
    let main = thread_with(&gcore, "main");
    let join = gcore.locks.iter().find(|l| l.kind == LockKind::Join).unwrap();
    assert_eq!((join.owner.clone(), main.blocked_on.as_deref()), (Owner::Known { tid: packer.tid }, Some(join.id.as_str())));
    let text = knot::report::text::render(&gcore, &Default::default());
    assert!(text.contains(&format!("Thread {} ({} in its PID namespace)", packer.tid, packer.own_tid.unwrap())), "{text}");
    assert!(!text.contains("which has exited") && !text.contains("never reaped"), "{text}");

    let kernel = common::analyze(&common::committed("pidns_abba", DumpKind::Kernel));
    assert_eq!(kernel.verdict, Verdict::Deadlock);
    assert!(kernel.threads.iter().all(|t| t.own_tid.is_none()), "the kernel numbers them as the process does");
    let crash = kernel.crash.as_ref().expect("the SIGABRT");
    assert_eq!(crash.kind, CrashKind::Killed, "{crash:?}");
    assert_eq!(crash.signal.as_ref().and_then(|s| s.sender_pid), Some(0));
    let text = knot::report::text::render(&kernel, &Default::default());
    assert!(text.contains("sent from outside the process's PID namespace"), "{text}");
}

/// A barrier for 4 that 3 reached: its waiters wait for one more party, said as such (gdb:
/// `in = 3, count = 4`), not as a futex word no analyzer knows.
#[test]
fn a_barrier_says_how_many_arrived() {
    let r = common::analyze(&common::committed("barrier_short", DumpKind::Kernel));
    let b = lock(&r, "stage_barrier");
    assert_eq!(b.kind, LockKind::Barrier);
    assert_eq!(b.waiter_tids.len(), 3);
    assert_eq!(b.owner, Owner::None);
    assert_eq!(b.label, "pthread barrier, 3 of 4 arrived");
    let text = knot::report::text::render(&r, &Default::default());
    assert!(text.contains("3 waiters on stage_barrier — 3 of 4 arrived: waiting for 1 more thread to arrive"), "{text}");
    assert_eq!(r.verdict, Verdict::Idle, "nobody holds a lock anybody waits for");
}

/// planner_thread read-holds routes (plan() keeps the table's pointer in its frame) and waits for
/// dispatch_lock; dispatcher_thread holds dispatch_lock and waits to write-lock routes. The
/// rwlock records only its one reader's count: the reader is inferred from the frame that keeps
/// a pointer into routes — with that frame and slot — and the cycle through it is a deadlock,
/// marked inferred.
#[test]
fn a_cycle_through_a_read_held_rwlock_is_a_deadlock_through_an_inferred_reader() {
    let r = common::analyze(&common::committed("rwlock_cycle", DumpKind::Kernel));
    let (planner, dispatcher) = (thread_with(&r, "planner_thread"), thread_with(&r, "dispatcher_thread"));
    let routes = lock(&r, "routes");
    let Owner::Readers { count, reader_tids, reader_evidence } = &routes.owner else { panic!("{:?}", routes.owner) };
    assert_eq!((*count, reader_tids.as_slice()), (1, &[planner.tid][..]));
    let hold = &reader_evidence[0];
    assert_eq!(hold.function.as_deref(), Some("plan"), "the frame that holds it: {hold:?}");
    assert_eq!(planner.frames[hold.frame].function.as_deref(), Some("plan"));
    assert!(matches!(hold.place, knot::report::PointerPlace::Stack(_)), "{hold:?}");
    let object = routes.address.unwrap().0;
    assert!(hold.value >= object && hold.value < object + 64 + 56, "a pointer into routes: {:#x}", hold.value);
    assert_eq!(r.verdict, Verdict::Deadlock);
    let d = &r.deadlocks[0];
    assert!(d.inferred, "through an inferred reader");
    let mut tids = d.tids.clone();
    tids.sort_unstable();
    let mut want = vec![planner.tid, dispatcher.tid];
    want.sort_unstable();
    assert_eq!(tids, want);
    let text = knot::report::text::render(&r, &Default::default());
    assert!(text.contains("cycle (through an inferred owner)"), "{text}");
}

/// A std::sync::Mutex ABBA in a release build: the locks record no owner; each owner is the one
/// thread besides the waiters with a frame that keeps a pointer into the lock's own static —
/// restock's and reprice's own frames (gdb: `stock`, `prices`, their MutexGuards, at `fbreg +24`)
/// — never clerk, which keeps pointers into the neighbouring statics (RESTOCK_COUNT, 8 bytes
/// before PRICES; SHELF_LABELS) and an Arc. courier's std::thread::park is a park, not a lock.
#[test]
fn rust_mutex_owners_are_inferred_from_the_frame_that_holds_the_guard() {
    let r = common::analyze(&common::committed("rust_release_abba", DumpKind::Kernel));
    let (restock, reprice) = (thread_with(&r, "rust_release_abba::restock"), thread_with(&r, "rust_release_abba::reprice"));
    let clerk = thread_with(&r, "rust_release_abba::clerk");
    let courier = thread_with(&r, "rust_release_abba::main::{closure#3}");
    for (name, owner, function) in [("rust_release_abba::INVENTORY", restock, "rust_release_abba::restock"), ("rust_release_abba::PRICES", reprice, "rust_release_abba::reprice")] {
        let l = r.locks.iter().find(|l| l.name.as_deref().is_some_and(|n| n.starts_with(name))).unwrap_or_else(|| panic!("{name}"));
        let Owner::Inferred { tid, evidence } = &l.owner else { panic!("{name}: {:?}", l.owner) };
        assert_eq!(*tid, owner.tid, "{name}");
        let knot::report::Inference::OnlyFrameHolding(h) = evidence else { panic!("{name}: {evidence:?}") };
        assert_eq!(h.function.as_deref(), Some(function), "{name}: {h:?}");
        assert_eq!(h.value, l.address.unwrap().0, "{name}: the guard points at the lock");
        assert!(!l.evidence.iter().any(|e| matches!(e, Evidence::PointerInFrame(h) if h.tid == clerk.tid)), "{name}: clerk's pointers are into neighbours: {:#?}", l.evidence);
    }
    // gdb's reading (`bt full`) shows each guard among that frame's locals.
    let dump = common::committed("rust_release_abba", DumpKind::Kernel);
    let gdb = std::fs::read_to_string(&dump.gdb_bt).expect("gdb's reading");
    for (owner, lock) in [(restock, "INVENTORY"), (reprice, "PRICES")] {
        let frame = gdb_guard_frame(&gdb, owner.tid, lock).unwrap_or_else(|| panic!("gdb shows {lock}'s guard in thread {}", owner.tid));
        let l = r.locks.iter().find(|l| l.name.as_deref().is_some_and(|n| n.contains(lock))).unwrap();
        let Owner::Inferred { evidence: knot::report::Inference::OnlyFrameHolding(h), .. } = &l.owner else { unreachable!() };
        assert_eq!(h.frame, frame, "{lock}: knot's frame #{} is gdb's #{frame}", h.frame);
    }
    assert_eq!(r.verdict, Verdict::Deadlock);
    assert!(r.deadlocks[0].inferred);
    assert!(matches!(&courier.state, ThreadState::Parked { .. }), "{:?}", courier.state);
    assert_eq!(courier.blocked_on, None);
    assert_eq!(r.locks.len(), 3, "INVENTORY, PRICES and the join: {:#?}", r.locks);
}

/// Two threads wait for orphan_lock, whose owner returned without unlocking it: nobody left can
/// release it, so they wait for good, and the verdict says so (no cycle: not `deadlock`, and not
/// `contention` either).
#[test]
fn waits_behind_an_exited_owner_are_permanent() {
    let r = common::analyze(&common::committed("owner_exited", DumpKind::Kernel));
    let l = lock(&r, "orphan_lock");
    let Owner::Exited { tid } = l.owner else { panic!("{:?}", l.owner) };
    assert!(!r.threads.iter().any(|t| t.tid == tid));
    assert_eq!(l.waiter_tids.len(), 2);
    assert_eq!(r.verdict, Verdict::Abandoned);
    assert!(r.deadlocks.is_empty());
    let text = knot::report::text::render(&r, &Default::default());
    assert!(text.contains(&format!("Verdict: ABANDONED — 2 threads wait for good behind orphan_lock, whose owner, thread {tid}, exited holding it")), "{text}");
}

/// The frame of thread `lwp` whose locals (gdb's `bt full`) hold a `MutexGuard` of `lock`.
fn gdb_guard_frame(gdb: &str, lwp: u32, lock: &str) -> Option<usize> {
    let mut in_thread = false;
    let mut frame = None;
    for line in gdb.lines() {
        if line.starts_with("Thread ") {
            in_thread = line.contains(&format!("(LWP {lwp})"));
        } else if in_thread && line.starts_with('#') {
            frame = line[1..].split_whitespace().next().and_then(|n| n.parse().ok());
        } else if in_thread && line.contains("MutexGuard<") && line.contains(&format!("::{lock}::h")) {
            return frame;
        }
    }
    None
}

/// One thread of gdb's Python reading (`gdb-py-bt.txt`): its tid and `pthread_self()`, the
/// Python function of the sample it is in, and the lock object its `__enter__` waits on.
#[derive(Debug)]
struct PyThread {
    lwp: u32,
    pthread: u64,
    function: String,
    waits_on: Option<(String, u64)>,
}

/// gdb's reading with python3.11-dbg: its threads, each RLock printed (its address,
/// `rlock_owner`, `rlock_count`) and each held Lock's address.
struct GdbPythonReading {
    threads: Vec<PyThread>,
    rlocks: Vec<(u64, u64, u64)>,
    locks: Vec<u64>,
}

/// `thread apply all py-bt`, then each lock object printed after `==rlock ADDR` / `==lock ADDR`
/// (`rlock_owner = N, rlock_count = N`, `locked = 1`).
fn gdb_python_reading(text: &str) -> GdbPythonReading {
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    let field = |line: &str, name: &str| -> u64 { line.split(&format!("{name} = ")).nth(1).unwrap().split([',', '}']).next().unwrap().trim().parse().unwrap() };
    let (mut threads, mut rlocks, mut locks) = (Vec::<PyThread>::new(), Vec::new(), Vec::new());
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if let Some(rest) = line.strip_prefix("Thread ").filter(|l| l.ends_with("):") && l.contains("(LWP ")) {
            let pthread = hex(rest.split("(Thread ").nth(1).unwrap().split(' ').next().unwrap());
            let lwp = rest.split("(LWP ").nth(1).unwrap().split(')').next().unwrap().parse().unwrap();
            threads.push(PyThread { lwp, pthread, function: String::new(), waits_on: None });
        } else if let Some(rest) = line.trim().strip_prefix("<built-in method __enter__ of ") {
            let (ty, addr) = rest.trim_end_matches('>').split_once(" object at remote ").unwrap();
            threads.last_mut().unwrap().waits_on = Some((ty.to_string(), hex(addr)));
        } else if line.contains("py_lock_abba.py\", line ") && let Some(t) = threads.last_mut().filter(|t| t.function.is_empty()) {
            t.function = line.rsplit(" in ").next().unwrap().to_string();
        } else if let Some(addr) = line.strip_prefix("==rlock ") {
            let value = lines.next().unwrap();
            rlocks.push((hex(addr), field(value, "rlock_owner"), field(value, "rlock_count")));
        } else if let Some(addr) = line.strip_prefix("==lock ") {
            assert!(lines.next().unwrap().contains("locked = 1"), "gdb: Lock {addr} is held");
            locks.push(hex(addr));
        }
    }
    GdbPythonReading { threads, rlocks, locks }
}

/// CPython's threading locks (Debian's python3.11): restock and reprice each hold an RLock and
/// wait for the other's; post_ledger and audit do so over two plain Locks; main joins restock
/// (a wait on restock's `_tstate_lock`, a Lock). gdb with python3-dbg (`py-bt`, the lock objects
/// printed) is the truth. Each waiter waits on the lock object gdb names; an RLock's owner is the
/// thread whose `pthread_self()` its `rlock_owner` is, with its count: the RLocks' cycle is a
/// deadlock. A Lock records no owner: knot says so and offers none (post_ledger/audit wedge as
/// surely, but nothing in the dump says who holds which Lock).
#[test]
fn python_lock_waits_are_on_their_lock_objects_and_rlocks_name_their_owners() {
    let dump = common::committed("py_lock_abba", DumpKind::Gcore);
    let r = common::analyze(&dump);
    let gdb = std::fs::read_to_string(dump.gdb_bt.with_file_name("gdb-py-bt.txt")).expect("gdb's Python reading");
    let GdbPythonReading { threads, rlocks, locks } = gdb_python_reading(&gdb);
    assert_eq!(threads.len(), 5, "{threads:?}");
    assert_eq!((rlocks.len(), locks.len()), (2, 3));
    let by_function = |f: &str| threads.iter().find(|t| t.function == f).unwrap_or_else(|| panic!("gdb: a thread in {f}: {threads:?}"));
    let lock_of = |tid: u32| {
        let id = r.threads.iter().find(|t| t.tid == tid).and_then(|t| t.blocked_on.clone()).unwrap_or_else(|| panic!("thread {tid} blocked"));
        r.locks.iter().find(|l| l.id == id).unwrap()
    };
    for f in ["restock", "reprice", "post_ledger", "audit"] {
        let t = by_function(f);
        let (ty, object) = t.waits_on.as_ref().unwrap();
        let l = lock_of(t.lwp);
        assert_eq!(l.kind, LockKind::Mutex, "{f}");
        assert!(l.label.contains(&format!("{ty} object at {object:#x}")), "{f}: waits on gdb's {ty} {object:#x}; knot: {}", l.label);
        assert!(l.evidence.iter().any(|e| matches!(e, Evidence::PythonLock { object: o, .. } if o == object)), "{f}: {:#?}", l.evidence);
        match ty.as_str() {
            "_thread.RLock" => {
                let &(_, owner_ident, count) = rlocks.iter().find(|(a, ..)| a == object).unwrap();
                let owner = threads.iter().find(|t| t.pthread == owner_ident).unwrap();
                assert_eq!(l.owner, Owner::Known { tid: owner.lwp }, "{f}: gdb's rlock_owner {owner_ident:#x} is thread {} ({})", owner.lwp, owner.function);
                assert_eq!(l.recursion, Some(count as u32), "{f}");
            }
            _ => {
                assert!(locks.contains(object));
                assert!(matches!(&l.owner, Owner::Unknown { why: knot::report::UnknownOwner::PythonLockNoOwner }), "{f}: a Lock records no owner: {:?}", l.owner);
            }
        }
    }
    // main's join waits on restock's _tstate_lock: a Lock as well, with no owner offered.
    let main = threads.iter().find(|t| t.function == "main" || t.function == "<module>").unwrap();
    assert!(matches!(lock_of(main.lwp).owner, Owner::Unknown { .. }), "{:?}", lock_of(main.lwp).owner);
    assert_eq!(r.verdict, Verdict::Deadlock);
    assert_eq!(r.deadlocks.len(), 1, "{:#?}", r.deadlocks);
    let mut cycle = r.deadlocks[0].tids.clone();
    cycle.sort();
    let mut want = vec![by_function("restock").lwp, by_function("reprice").lwp];
    want.sort();
    assert_eq!(cycle, want, "the RLocks' cycle");
    assert!(!r.deadlocks[0].inferred, "both owners are recorded");
}
