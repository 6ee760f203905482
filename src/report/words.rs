//! The words for people: how a lock, its owner, a thread's wait, a cycle and a referrer are
//! named. The analyzers and the graph give data; the text report, the HTML page, its SVG and
//! flame graph, and the JSON's `description` and `label` fields all say it with these words.

use super::model::{Deadlock, DeadlockPool, ThreadReport, VerdictLimit};
use crate::graph::limits::{Limit, MissingFile};
use crate::graph::verdict::Verdict;
use crate::graph::Cycle;
use crate::runtimes::dotnet::gc::report::{ReferrerReport, RootName, RootPlace};
use crate::waits::python_locks::PythonLockType;
use crate::waits::{
    Evidence, FieldError, IdleRole, Inference, LockFact, LockKind, LockStorage, ManagedLock, ManagedWaitKind, MutexConsistency, MutexType, NamedThread, NativeLock, NativeLockType, Owner, PointerPlace, Pool, PoolState, FrameHold,
    RwLockSlimNode, RwLockSlimState, SemaphoreWait, ThreadState, UnknownOwner, WaitRecord,
};

pub(crate) fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// `a` or `an` before `next`, by how it is said: `an ASP.NET Core request` (an acronym by its
/// first letter's name: `an HTTP call`, `a GC thread`), `an Orleans grain call`, `a Kestrel
/// request loop`, `a .NET thread`, `an 8.0 MiB hard limit`, `an 11 …`, `a user`, `an hour`.
pub(crate) fn a_or_an(next: &str) -> &'static str {
    let word = next.split(|c: char| c.is_whitespace()).next().unwrap_or_default();
    let mut chars = word.chars();
    let Some(first) = chars.next() else { return "a" };
    if first.is_ascii_digit() {
        // Eight…, eleven, eighteen (and their thousands and decimals).
        let int: String = word.chars().take_while(|c| c.is_ascii_digit() || *c == ',').collect();
        let groups: Vec<&str> = int.split(',').collect();
        let lead = groups.first().copied().unwrap_or_default();
        return if first == '8' || (matches!(lead, "11" | "18") && groups[1..].iter().all(|g| g.len() == 3)) { "an" } else { "a" };
    }
    if !first.is_ascii_alphabetic() {
        return "a";
    }
    // An acronym is said letter by letter: A, E, F, H, I, L, M, N, O, R, S, X begin with a vowel.
    if first.is_ascii_uppercase() && chars.next().is_some_and(|c| c.is_ascii_uppercase()) {
        return if "AEFHILMNORSX".contains(first) { "an" } else { "a" };
    }
    let lower = word.to_ascii_lowercase();
    const SAID_WITH_A: [&str; 6] = ["uni", "use", "usu", "uti", "eu", "one"];
    const SAID_WITH_AN: [&str; 3] = ["hour", "honest", "honou"];
    if SAID_WITH_A.iter().any(|p| lower.starts_with(p)) {
        return "a";
    }
    if SAID_WITH_AN.iter().any(|p| lower.starts_with(p)) || "aeiou".contains(lower.chars().next().unwrap_or('x')) {
        return "an";
    }
    "a"
}

/// `lock_a`, `mutex at 0x…`, `monitor on System.Object at 0x… (LifetimeScope._synchRoot, Tag
/// "root")`: a lock for people.
pub fn lock_name(l: &LockFact) -> String {
    if let Some(m) = &l.managed {
        let ty = m.type_name.as_deref().unwrap_or("an object");
        let name = match l.kind {
            LockKind::Lock => format!("Lock {ty} at {}", m.object),
            LockKind::MonitorWait if let Some(b) = &m.barrier => match &b.held_by {
                Some(r) => format!("Barrier.SignalAndWait on Barrier {} at {} ({})", referrer(r), b.address, barrier_words(b)),
                None => format!("Barrier.SignalAndWait on Barrier at {} ({})", b.address, barrier_words(b)),
            },
            LockKind::MonitorWait => format!("Monitor.Wait on {ty} at {}", m.object),
            LockKind::SemaphoreSlim => format!("SemaphoreSlim at {} ({})", m.object, semaphore_words(m)),
            LockKind::Task => match &m.task {
                Some(task) => format!("task {ty} at {} (status: {})", m.object, task.status),
                None => format!("task {ty} at {}", m.object),
            },
            LockKind::RwLockSlim => match &m.rwlock {
                Some(rw) if rw.node == RwLockSlimNode::NewReaders => format!("ReaderWriterLockSlim at {} for reading", m.object),
                _ => format!("ReaderWriterLockSlim at {}", m.object),
            },
            // The class is its name: the initialiser is not an object.
            LockKind::ClassInit => return format!("{}'s class initialiser", short_type(ty)),
            LockKind::Pool => match &m.pool {
                Some(p) => format!("{} {} of the {} at {}", a_or_an(&p.item), p.item, p.name, m.object),
                None => format!("pool {ty} at {}", m.object),
            },
            _ => format!("monitor on {ty} at {}", m.object),
        };
        let named = match holder(l.kind, m) {
            Some(r) => format!("{name} ({})", referrer(r)),
            None => name,
        };
        return match &m.pool {
            Some(p) if l.kind == LockKind::Pool => format!("{named}: {}", pool_fill(p)),
            _ => named,
        };
    }
    match (&l.name, l.address) {
        (_, _) if l.kind == LockKind::Join => format!("the exit of thread {}", l.owner_tid.map_or("?".to_string(), |t| t.to_string())),
        (Some(n), _) => n.clone(),
        (None, Some(a)) => format!("{} at {a}", l.kind),
        (None, None) => l.id.clone(),
    }
}

/// The object that holds a .NET lock's object in a field, which names the lock for people
/// (`LifetimeScope._synchRoot, Tag "root"`). An array slot (a static field's storage, a
/// collection) names nothing.
fn holder(kind: LockKind, m: &ManagedLock) -> Option<&ReferrerReport> {
    // A Barrier's wait is on its phase event's lock: the event's field names no Barrier.
    let named = kind.is_on_managed_object() || matches!(kind, LockKind::SemaphoreSlim | LockKind::RwLockSlim | LockKind::Pool);
    m.referrers.first().filter(|r| named && !r.field.starts_with('[') && m.barrier.is_none())
}

/// A .NET lock's label for programs (JSON `locks[].label`, which dashboards show): its facts
/// with the holder the text names it by, `Monitor on System.Object (LifetimeScope._synchRoot,
/// Tag "root"; sync block 3, MonitorHeld 47, recursion 1)`; [`managed_lock_label`] without one.
pub(crate) fn managed_lock_json_label(kind: LockKind, m: &ManagedLock) -> String {
    let facts = managed_lock_label(kind, m);
    let Some(r) = holder(kind, m) else { return facts };
    let by = referrer(r);
    // `Monitor on T (details)` → `Monitor on T (holder; details)`.
    match facts.strip_suffix(')').and_then(|f| f.split_once(" (")) {
        Some((head, details)) => format!("{head} ({by}; {details})"),
        None => format!("{facts} ({by})"),
    }
}

/// What a lock is beside its name in the text, the HTML and the graph: its facts (a .NET
/// lock's name already says its holder, so its label's copy of it is left out).
pub fn lock_detail(l: &LockFact) -> String {
    match &l.managed {
        Some(m) => managed_lock_label(l.kind, m),
        None => l.label.clone(),
    }
}

/// What a .NET lock is, from its facts alone: `Monitor on System.Object (sync block 3,
/// MonitorHeld 1, recursion 1)`, `task … (status: WaitingForActivation)`.
pub(crate) fn managed_lock_label(kind: LockKind, m: &ManagedLock) -> String {
    let ty = m.type_name.as_deref().unwrap_or("(type unread)");
    match kind {
        LockKind::Task => format!("task {ty} (status: {})", m.task.as_ref().map_or("", |t| t.status.as_str())),
        LockKind::MonitorWait if let Some(b) = &m.barrier => format!("Barrier.SignalAndWait: Monitor.Wait on {ty}, the phase event's lock ({})", barrier_words(b)),
        LockKind::MonitorWait => format!("Monitor.Wait on {ty} (waiting to be pulsed)"),
        LockKind::SemaphoreSlim => format!("{ty} ({})", semaphore_words(m)),
        LockKind::RwLockSlim => match &m.rwlock {
            Some(rw) => format!("{ty} ({})", rwlock_slim_words(rw)),
            None => ty.to_string(),
        },
        LockKind::ClassInit => format!("initialising {} ({ty}: the runtime's class-init lock, a pthread mutex)", short_type(ty)),
        LockKind::Pool => match &m.pool {
            Some(p) => format!("{} ({ty}: {})", p.name, pool_words(p)),
            None => ty.to_string(),
        },
        _ => {
            let what = if kind == LockKind::Lock { "System.Threading.Lock" } else { "Monitor" };
            match (m.storage, m.sync_block_index) {
                (LockStorage::SyncBlock, Some(i)) => format!("{what} on {ty} (sync block {i}, MonitorHeld {}, recursion {})", m.monitor_held.unwrap_or(0), m.recursion),
                (LockStorage::ThinLock, _) => format!("{what} on {ty} (thin lock, recursion {})", m.recursion),
                _ => format!("{what} {ty} (recursion {})", m.recursion),
            }
        }
    }
}

/// `4 of 6 participants arrived, 2 remaining`: a Barrier's phase.
fn barrier_words(b: &crate::waits::BarrierFacts) -> String {
    format!("{} of {} participants arrived, {} remaining, phase {}", b.arrived, b.participants, b.remaining(), b.phase)
}

/// `3 holders (2 readers, upgradeable 16721), a writer waiting; waiting: 1 writer, 1 reader`: a
/// ReaderWriterLockSlim's state; the node for new readers says what bars them.
fn rwlock_slim_words(rw: &RwLockSlimState) -> String {
    let mut held = Vec::new();
    if let Some(w) = rw.writer {
        held.push(format!("held for writing by {w}"));
    }
    if rw.holder_count > 0 {
        let mut who = vec![format!("{} reader{}", rw.readers.len(), plural(rw.readers.len()))];
        if let Some(u) = rw.upgradeable {
            who.push(format!("upgradeable {u}"));
        }
        let unaccounted = rw.holder_count as usize - rw.readers.len().min(rw.holder_count as usize) - usize::from(rw.upgradeable.is_some());
        if unaccounted > 0 {
            who.push(format!("{unaccounted} with no record"));
        }
        held.push(format!("{} holder{} ({})", rw.holder_count, plural(rw.holder_count as usize), who.join(", ")));
    }
    if held.is_empty() {
        held.push("not held".into());
    }
    let n = |v: &[u32], what: &str| (!v.is_empty()).then(|| format!("{} {what}{}", v.len(), plural(v.len())));
    let waiting: Vec<String> = [n(&rw.write_waiters, "writer"), n(&rw.upgradeable_waiters, "upgradeable reader"), n(&rw.read_waiters, "reader")].into_iter().flatten().collect();
    let mut out = held.join(", ");
    if !waiting.is_empty() {
        out.push_str(&format!("; waiting: {}", waiting.join(", ")));
    }
    if rw.node == RwLockSlimNode::NewReaders {
        out.push_str(if rw.writer.is_some() { "; new readers wait for the writer" } else { "; new readers wait for the waiting writer" });
    }
    out
}

/// `all 4 of its maximum 4 in use`, `3 of 6 in use (maximum 8), 3 idle`: how full a pool is.
fn pool_fill(p: &PoolState) -> String {
    let n = |v: Option<i64>| v.map_or_else(|| "?".to_string(), |v| v.to_string());
    let held = p.items.iter().filter(|i| i.lease.is_some()).count();
    match (p.max, p.count, p.idle) {
        (Some(max), Some(count), Some(0)) if count == max && held as i64 == max => format!("all {held} of its maximum {max} in use"),
        (max, count, idle) => format!("{held} of {} in use (maximum {}), {} idle", n(count), n(max), n(idle)),
    }
}

/// `all 4 of its maximum 4 in use: NpgsqlConnector 0x… by thread 11, …`: a pool's state, and who
/// holds each of its items.
fn pool_words(p: &PoolState) -> String {
    let items: Vec<String> = p
        .items
        .iter()
        .map(|i| match (i.lease, i.holder) {
            (None, _) => format!("{} idle", i.item),
            (Some(_), Some(t)) => format!("{} by thread {t}", i.item),
            (Some(_), None) => format!("{} by a thread not found", i.item),
        })
        .collect();
    let items = if items.is_empty() { String::new() } else { format!("; {} {}", short_type(&p.item_type), items.join(", ")) };
    format!("{}{items}", pool_fill(p))
}

/// `count 0 of 1, 3 async waiters`: a SemaphoreSlim's state.
fn semaphore_words(m: &ManagedLock) -> String {
    let mut s = format!("count {} of {}", m.current_count.unwrap_or(0), m.max_count.unwrap_or(0));
    if !m.async_waiters.is_empty() {
        s.push_str(&format!(", {} async waiter{} in WaitAsync", m.async_waiters.len(), plural(m.async_waiters.len())));
    }
    s
}

/// What a task's async stack says of it: `it completes when async stack 2 completes (awaiting
/// …); its work is queued to the thread pool`.
fn task_async_words(m: &ManagedLock) -> Option<String> {
    let t = m.task.as_ref()?;
    let i = t.async_stack?;
    let method = t.async_method.as_deref().map(|n| format!("{} ", short_type(n))).unwrap_or_default();
    let queued = match t.queued {
        Some(true) if t.timer_queued => "; it awaits a timer whose TimerQueue is queued to the thread pool, behind the workers that wait for it",
        Some(true) => "; its work is queued to the thread pool, behind the workers that wait for it",
        Some(false) => "",
        None => "; the pool's queue was not read",
    };
    Some(format!("no owning thread: it is {method}in async stack {}, and completes when that stack does{queued}", i + 1))
}

/// `16 work items queued behind them, 8 workers waiting for tasks whose work is among them`:
/// the starvation, from the pool's queue and the workers' task waits tied to async stacks whose
/// work is in that queue (sync over async).
pub(crate) fn starvation_words(locks: &[LockFact], tp: &crate::runtimes::dotnet::report::ThreadPoolReport) -> String {
    let on_task = |queued: Option<bool>| -> usize {
        locks
            .iter()
            .filter(|l| l.kind == LockKind::Task && l.managed.as_ref().and_then(|m| m.task.as_ref()).is_some_and(|t| t.queued == queued))
            .flat_map(|l| l.waiter_tids.iter())
            .filter(|t| tp.worker_tids.contains(t))
            .count()
    };
    let all: usize = locks.iter().filter(|l| l.kind == LockKind::Task).flat_map(|l| l.waiter_tids.iter()).filter(|t| tp.worker_tids.contains(t)).count();
    let behind = on_task(Some(true));
    let waiting = |n: usize| format!("{n} worker{} waiting for tasks", plural(n));
    let mut parts = Vec::new();
    match tp.queued_work_items {
        Some(q) if q > 0 => parts.push(format!("{q} work item{} queued behind them", plural(q as usize))),
        Some(_) => {}
        None => parts.push("the pool's queued work items were not read".to_string()),
    }
    if behind > 0 {
        parts.push(format!("{} whose work is among them", waiting(behind)));
        if all > behind {
            parts.push(format!("{} more waiting for other tasks", all - behind));
        }
    } else if all > 0 {
        parts.push(waiting(all));
    }
    parts.join(", ")
}

/// `3 in its PID namespace`: the thread's id as the process numbers it, when the dump's differs
/// (locks and joins name it by that one).
pub(crate) fn own_tid_words(t: &ThreadReport) -> Option<String> {
    t.own_tid.map(|own| format!("{own} in its PID namespace"))
}

/// A thread's role for people, with its framework: `Orleans grain activation`, `.NET finalizer thread`.
pub(crate) fn role_words(t: &ThreadReport) -> Option<String> {
    let r = t.role.as_ref()?;
    let framework = crate::roles::Roles::builtin().ok().and_then(|roles| roles.framework_name(&r.framework)).unwrap_or(&r.framework);
    Some(format!("{framework} {}", r.name))
}

/// The distinct roles of a group of threads, in the threads' order: `Orleans grain activation`.
pub(crate) fn group_role_words<'a>(threads: impl Iterator<Item = &'a ThreadReport>) -> Option<String> {
    let mut seen: Vec<String> = Vec::new();
    for w in threads.filter_map(role_words) {
        if !seen.contains(&w) {
            seen.push(w);
        }
    }
    (!seen.is_empty()).then(|| seen.join(", "))
}

/// Gives every lock its label, from its facts (the readers leave it to the report).
pub(crate) fn label_locks(locks: &mut [LockFact]) {
    for l in locks.iter_mut() {
        if let Some(m) = &l.managed {
            l.label = managed_lock_json_label(l.kind, m);
        } else if let Some(n) = &l.native {
            l.label = native_lock_label(n);
        }
    }
}

/// What a native lock is (`LockFact::label`): `pthread mutex (recursive, robust), owner died`,
/// `Rust std::sync::Mutex`, `pthread rwlock, owner thread 12 has exited`.
pub(crate) fn native_lock_label(n: &NativeLock) -> String {
    let mut label = match &n.what {
        NativeLockType::PthreadMutex(m) => {
            let base = match m.base {
                MutexType::Normal => "normal",
                MutexType::Recursive => "recursive",
                MutexType::ErrorCheck => "errorcheck",
                MutexType::Adaptive => "adaptive",
            };
            let mut label = format!("pthread mutex ({base}");
            for (on, words) in [(m.robust, ", robust"), (m.priority_inheritance, ", priority-inheritance"), (m.priority_protect, ", priority-protect")] {
                if on {
                    label.push_str(words);
                }
            }
            label.push(')');
            if m.process_shared {
                label.push_str(", process-shared");
            }
            if m.owner_died {
                label.push_str(", owner died");
            }
            match m.consistency {
                MutexConsistency::Consistent => {}
                MutexConsistency::Inconsistent => label.push_str(", inconsistent: a previous owner died and the holder has not called pthread_mutex_consistent"),
                MutexConsistency::NotRecoverable => label.push_str(", not recoverable"),
            }
            label
        }
        NativeLockType::PthreadRwlock => "pthread rwlock".into(),
        NativeLockType::PthreadCond => "pthread condition variable".into(),
        NativeLockType::GcEvent { heap: Some(h), .. } => format!("the .NET GC's done event of heap {h} (a collection in progress)"),
        NativeLockType::GcEvent { heap: None, .. } => "a .NET GC event (a collection in progress)".into(),
        NativeLockType::PosixSemaphore => "POSIX semaphore".into(),
        NativeLockType::PthreadJoin => "pthread_join".into(),
        NativeLockType::PthreadBarrier { arrived, count } => format!("pthread barrier, {arrived} of {count} arrived"),
        NativeLockType::Family(name) => name.clone(),
        NativeLockType::UnrecognisedFutex => "futex word (no analyzer recognises the waiters' frames)".into(),
        NativeLockType::PythonLock { lock_type, object } => {
            let public = match lock_type {
                PythonLockType::Lock => "threading.Lock",
                PythonLockType::RLock => "threading.RLock",
            };
            format!("Python {public} ({} object at {object:#x})", lock_type.type_name())
        }
    };
    if let Some(tid) = n.exited_owner {
        label.push_str(&format!(", owner thread {tid} has exited"));
    }
    label
}

/// `held by thread 11399`, `probably held by thread 12 (inferred)`, …: the owner in words; a lock
/// whose several holders are its out-edges names them (`held by 3 readers: threads 5, 6, 7`).
pub(crate) fn owner_words(l: &LockFact) -> String {
    if !l.holders.is_empty() && l.owner.tid().is_none() && matches!(l.kind, LockKind::RwLockSlim | LockKind::Pool) {
        return holder_words(l);
    }
    match &l.owner {
        Owner::Known { tid } if l.kind == LockKind::Join => format!("thread {tid} has not exited"),
        Owner::Exited { tid } if l.kind == LockKind::Join => format!("thread {tid} is gone but was never reaped"),
        Owner::Known { tid } => match l.managed.as_ref().and_then(|m| m.owner_name.as_deref()) {
            Some(name) => format!("held by thread {tid} ({name})"),
            None => format!("held by thread {tid}"),
        },
        Owner::Inferred { tid, .. } => format!("probably held by thread {tid} (inferred)"),
        Owner::Exited { tid } => format!("held by thread {tid}, which has exited"),
        Owner::OtherProcess { tid } => format!("held by another process (tid {tid}): a process-shared lock whose owner is no thread of this one"),
        Owner::None if l.kind == LockKind::Barrier => match &l.native.as_ref().map(|n| &n.what) {
            Some(NativeLockType::PthreadBarrier { arrived, count }) => {
                let missing = count.saturating_sub(*arrived);
                format!("{arrived} of {count} arrived: waiting for {missing} more thread{} to arrive", plural(missing as usize))
            }
            _ => "waiting for the rest of its threads to arrive".to_string(),
        },
        Owner::Readers { count, reader_tids, .. } if reader_tids.is_empty() => format!("held by {count} reader{}", plural(*count as usize)),
        Owner::Readers { count, reader_tids, .. } => {
            let tids: Vec<String> = reader_tids.iter().map(u32::to_string).collect();
            format!("held by {count} reader{}, probably thread{} {} (inferred)", plural(*count as usize), plural(reader_tids.len()), tids.join(", "))
        }
        Owner::None if l.kind == LockKind::Task => {
            l.managed.as_ref().and_then(task_async_words).unwrap_or_else(|| "no owning thread: it completes when its work runs".to_string())
        }
        Owner::None => match l.native.as_ref().map(|n| &n.what) {
            // A server GC's collection: its threads, all of which must finish.
            Some(NativeLockType::GcEvent { collectors, .. }) if !collectors.is_empty() => {
                let tids: Vec<String> = collectors.iter().map(u32::to_string).collect();
                format!("run by the GC's threads {} (inferred; the wait ends when all finish)", tids.join(", "))
            }
            Some(NativeLockType::GcEvent { .. }) => "run by the GC's threads (not identified)".to_string(),
            _ => "no owner (waiting to be signalled)".to_string(),
        },
        Owner::Unknown { why } => format!("owner unknown: {why}"),
    }
}

/// `held by 3 readers: threads 5, 6, 7`, `held by threads 1, 2, 3, 4 (inferred; any one can
/// release a waiter)`, `barred by writer thread 9, waiting (inferred)`: a lock's holders.
fn holder_words(l: &LockFact) -> String {
    let n = l.holders.len();
    let tids: Vec<String> = l.holders.iter().map(|h| h.tid.to_string()).collect();
    let who = format!("thread{} {}", plural(n), tids.join(", "));
    let inferred = l.holders.iter().any(|h| h.is_inferred());
    let rule = match l.release {
        Some(crate::waits::Release::All) if n > 1 => Some("all must leave"),
        Some(crate::waits::Release::Any) if n > 1 => Some("any one can release a waiter"),
        _ => None,
    };
    let notes: Vec<&str> = [inferred.then_some("inferred"), rule].into_iter().flatten().collect();
    let notes = if notes.is_empty() { String::new() } else { format!(" ({})", notes.join("; ")) };
    let rw = l.managed.as_ref().and_then(|m| m.rwlock.as_ref());
    let barred = rw.is_some_and(|rw| rw.node == RwLockSlimNode::NewReaders);
    match &l.owner {
        _ if barred => format!("barred by writer {who}, waiting{notes}"),
        // A ReaderWriterLockSlim's holders are its readers and its upgradeable holder.
        Owner::Readers { count, .. } if let Some(rw) = rw => {
            let mut parts = Vec::new();
            if !rw.readers.is_empty() {
                let r: Vec<String> = rw.readers.iter().map(u32::to_string).collect();
                parts.push(format!("reading: thread{} {}", plural(r.len()), r.join(", ")));
            }
            if let Some(u) = rw.upgradeable {
                parts.push(format!("upgradeable: thread {u}"));
            }
            format!("held by {count} holder{} ({}){notes}", plural(*count as usize), parts.join("; "))
        }
        Owner::Readers { count, .. } => format!("held by {count} reader{}: {who}{notes}", plural(*count as usize)),
        _ => format!("held by {who}{notes}"),
    }
}

/// An edge to or from the thread pool: a task `needs a worker of` the pool, the pool `has every
/// worker blocked, as` each of its workers.
pub(crate) fn pool_edge_words(from_pool: bool) -> &'static str {
    if from_pool { "every worker blocked, as" } else { "needs a worker of" }
}

/// The thread pool as a node: `thread pool`, `12 workers, max 12, all blocked`.
pub(crate) fn pool_node_words(p: &DeadlockPool) -> (String, String) {
    let max = p.max_workers.map(|m| format!(", max {m}")).unwrap_or_default();
    ("thread pool".to_string(), format!("{} workers{max}, all blocked", p.workers.len()))
}

/// An edge of the wait-for graph: a thread `waits for` a lock, a lock is `held by` a thread.
pub(crate) fn edge_words(held: bool, inferred: bool) -> &'static str {
    match (held, inferred) {
        (true, true) => "probably held by",
        (true, false) => "held by",
        (false, _) => "waits for",
    }
}

/// `blocked on lock_a (futex wait on 0x…)`, or the bare state.
pub(crate) fn state_words(t: &ThreadReport, locks: &[LockFact]) -> String {
    match t.blocked_on.as_deref().and_then(|id| locks.iter().find(|l| l.id == id)) {
        // A managed wait is what the thread waits for; its futex is only how the runtime waits.
        Some(l) if l.kind == LockKind::MonitorWait => format!("in {}, waiting to be pulsed", lock_name(l)),
        Some(l) if l.kind == LockKind::Task => format!("waiting for {}", lock_name(l)),
        Some(l) if l.managed.is_some() => format!("waiting for {} {}", lock_name(l), owner_words(l)),
        Some(l) => format!("blocked on {} ({})", lock_name(l), t.state),
        None => t.state.to_string(),
    }
}

/// The cycle as the report gives it: its facts and the chain in words, `thread 8609 holds
/// ledger, waits for audit — held by 8610, which waits for ledger — held by 8609`; a thread with
/// a name (`names`, by tid) is called by it, `RegistryLoader (18713)`, and each lock by its name
/// ([`lock_name`]).
pub(crate) fn deadlock(c: &Cycle, locks: &[LockFact], names: &std::collections::BTreeMap<u32, String>, signature: String) -> Deadlock {
    let by_id = |id: &str| locks.iter().find(|l| l.id == id);
    let who = |t: u32| names.get(&t).map_or_else(|| t.to_string(), |n| format!("{n} ({t})"));
    // The other holders of a lock on the chain that are stuck in this deadlock too: "held by 3
    // (and 4, 5: each stuck here)" — any of them could have released it.
    let others = |id: &str, t: u32| -> String {
        let Some(l) = by_id(id) else { return String::new() };
        let also: Vec<String> = l.edges().0.iter().map(|e| e.tid).filter(|&h| h != t && c.also.contains(&h)).map(who).collect();
        if also.is_empty() { String::new() } else { format!(" (and {}: each stuck here)", also.join(", ")) }
    };
    let mut words = Vec::with_capacity(c.tids.len() + 1);
    for (i, (&t, id)) in c.tids.iter().zip(&c.locks).enumerate() {
        let name = by_id(id).map_or_else(|| id.clone(), lock_name);
        if i == 0 {
            // A thread "holds" a join only in the graph's sense; say what it holds that others
            // want. A class's initialiser is not held but run.
            let holds_it = |l: &LockFact| l.owner.tid() == Some(t) || l.holders.iter().any(|h| h.tid == t);
            let mine: Vec<&LockFact> = locks.iter().filter(|l| holds_it(l) && l.id != *id && l.kind != LockKind::Join).collect();
            let mut what: Vec<String> = mine
                .iter()
                .filter(|l| l.kind == LockKind::ClassInit)
                .map(|l| format!("is initialising {}", l.managed.as_ref().and_then(|m| m.type_name.as_deref()).map_or("a class", short_type)))
                .collect();
            let held: Vec<String> = mine.iter().filter(|l| l.kind != LockKind::ClassInit).map(|l| lock_name(l)).collect();
            if !held.is_empty() {
                what.push(format!("holds {}", held.join(" and ")));
            }
            what.push(format!("waits for {name}"));
            let first = names.get(&t).map_or_else(|| format!("thread {t}"), |_| who(t));
            words.push(format!("{first} {}", what.join(", ")));
        } else {
            words.push(format!("held by {}{}, which waits for {name}", who(t), others(&c.locks[i - 1], t)));
        }
    }
    if let (Some(&start), Some(pool)) = (c.tids.first(), &c.pool) {
        let max = pool.max.map(|m| format!(" (max {m})")).unwrap_or_default();
        words.push(format!("which only a thread-pool worker can complete: all {} workers{max} are blocked, {} among them", pool.workers.len(), who(start)));
    } else if let (Some(&start), Some(last)) = (c.tids.first(), c.locks.last()) {
        let also = others(last, start);
        words.push(if c.tids.len() == 1 { format!("held by {} itself{also}", who(start)) } else { format!("held by {}{also}", who(start)) });
    }
    let thread_pool = c.pool.as_ref().map(|p| DeadlockPool { workers: p.workers.clone(), max_workers: p.max, queued_work_items: p.queued });
    Deadlock { tids: c.tids.clone(), locks: c.locks.clone(), inferred: c.inferred, description: words.join(" — "), signature, thread_pool, also: c.also.clone() }
}

/// `Ledger.Post`: a managed method's class and name, without namespace or arguments.
fn short_method(function: &str) -> String {
    let head = function.split('(').next().unwrap_or(function);
    // Generic arguments (`Task`1[[System.Int32, …]]`) hold dots of their own.
    let plain: String = {
        let mut depth = 0usize;
        head.chars()
            .filter(|&ch| {
                match ch {
                    '[' => depth += 1,
                    ']' => depth = depth.saturating_sub(1),
                    _ => return depth == 0,
                }
                false
            })
            .collect()
    };
    let parts: Vec<&str> = plain.rsplitn(3, '.').collect();
    match parts.as_slice() {
        [name, class, ..] => format!("{}.{name}", class.rsplit('+').next().unwrap_or(class)),
        _ => plain,
    }
}

/// `Rates.FetchRatesAsync`: an async method from its state machine's type
/// (`Knot.Samples.X.Rates+<FetchRatesAsync>d__0`).
fn async_method_name(state_machine: &str) -> String {
    let Some((outer, rest)) = state_machine.split_once("+<") else { return short_type(state_machine).to_string() };
    let name = rest.split('>').next().unwrap_or(rest);
    let class = outer.rsplit('.').next().unwrap_or(outer);
    format!("{}.{name}", class.rsplit('+').next().unwrap_or(class))
}

/// A task's type as SOS `dumpasync` names it, without namespaces: the runtime's
/// `System.Threading.Tasks.ValueTask`1+ValueTaskSourceAsTask[[System.Int32, System.Private.CoreLib]]`
/// is `ValueTask<Int32>+ValueTaskSourceAsTask` (its generic arguments hold dots of their own, so
/// the name is not cut at its last dot).
fn awaited_type_name(dac: &str) -> String {
    let sos = crate::runtimes::dotnet::gc::names::sos_heap_name(dac);
    let mut out = String::with_capacity(sos.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        out.push_str(word.rsplit('.').next().unwrap_or(word));
        word.clear();
    };
    for c in sos.chars() {
        if matches!(c, '<' | '>' | ',' | ' ' | '+' | '[' | ']') {
            flush(&mut word, &mut out);
            out.push(c);
        } else {
            word.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// `Task.Result`: the blocking call a person wrote.
fn blocking_api_words(api: crate::graph::blocking_site::BlockingApi) -> &'static str {
    use crate::graph::blocking_site::BlockingApi;
    match api {
        BlockingApi::TaskResult => "Task.Result",
        BlockingApi::TaskWait => "Task.Wait",
        BlockingApi::TaskWaitAll => "Task.WaitAll",
        BlockingApi::GetResult => "GetAwaiter().GetResult()",
        BlockingApi::EventWait => "ManualResetEventSlim.Wait",
        BlockingApi::MonitorWait => "Monitor.Wait",
        BlockingApi::BarrierWait => "Barrier.SignalAndWait",
        BlockingApi::SemaphoreWait => "SemaphoreSlim.Wait",
    }
}

/// `11 Kestrel request loops` / `1 worker`: threads counted in their role's words when they
/// share one, else as workers.
fn workers_words(tids: &[u32], threads: &[ThreadReport]) -> String {
    let n = tids.len();
    let roles = crate::roles::Roles::builtin().ok();
    let role = |t: &u32| threads.iter().find(|x| x.tid == *t).and_then(|x| x.role.as_ref()).filter(|r| roles.is_some_and(|rs| rs.is_service(r)));
    let first = tids.first().and_then(role);
    match (first, roles) {
        (Some(r), Some(rs)) if tids.iter().all(|t| role(t).is_some_and(|x| x.role == r.role && x.framework == r.framework)) => {
            if n == 1 {
                format!("1 {}", r.name)
            } else {
                format!("{n} {}", rs.plural(r).unwrap_or(&r.name))
            }
        }
        _ => format!("{n} worker{}", plural(n)),
    }
}

/// `blocks at Ledger.Post on Rates.FetchRatesAsync (sync over async: Task.Result), which waits
/// for a worker to fire its timer`: what a thread blocked on task `l` does, in the program's words.
fn task_block_words(t: &ThreadReport, l: &LockFact, many: bool) -> String {
    let site = crate::graph::blocking_site::blocking_site(&t.frames);
    let task = l.managed.as_ref().and_then(|m| m.task.as_ref());
    let awaited = task.and_then(|t| t.async_method.as_deref()).map(async_method_name).or_else(|| l.managed.as_ref().and_then(|m| m.type_name.as_deref()).map(awaited_type_name));
    let s = if many { "" } else { "s" };
    let mut w = format!("block{s}");
    if let Some(site) = &site {
        if let Some(lib) = &site.library {
            w.push_str(&format!(" in {}", short_method(lib)));
            if let Some(c) = &site.call_site {
                w.push_str(&format!(" (called at {})", short_method(c)));
            }
        } else if let Some(c) = &site.call_site {
            w.push_str(&format!(" at {}", short_method(c)));
        }
    }
    if let Some(a) = awaited {
        w.push_str(&format!(" on {a}"));
    }
    if let Some(site) = &site {
        w.push_str(&format!(" (sync over async: {})", blocking_api_words(site.api)));
    }
    if let Some(q) = l.managed.as_ref().and_then(|m| m.released_by_queued) {
        w.push_str(&format!(", which wait{s} for a worker to {}", queued_release_words(q)));
    } else if crate::graph::needs_pool(l) {
        let its = if many { "their" } else { "its" };
        let what = if task.is_some_and(|t| t.timer_queued) { "timer" } else { "continuation" };
        let verb = if what == "timer" { "fire" } else { "run" };
        w.push_str(&format!(", which wait{s} for a worker to {verb} {its} {what}{}", if many { "s" } else { "" }));
    }
    w
}

/// `run the socket engine's work item`: what a worker would run to end a wait.
fn queued_release_words(q: crate::waits::QueuedRelease) -> &'static str {
    match q {
        crate::waits::QueuedRelease::SocketEvent => "run the socket engine's work item (System.Net.Sockets.SocketAsyncEngine) that reads the replies",
        crate::waits::QueuedRelease::ParallelReplica => "run the queued Parallel replica",
    }
}

/// The verdict line's words when the thread pool is the story (a deadlock through it, or its
/// starvation), said alike by the text and the HTML report, first.
pub(crate) struct PoolVerdict {
    /// What follows the verdict's word: ` through the thread pool: all 12 workers (max 12) are
    /// blocked — …; 30 work items wait`, or ` — 9 of 9 workers blocked; …`.
    pub(crate) line: String,
    /// A starved pool's cause (`8 ASP.NET Core requests behind Ledger._sync, held by …`).
    pub(crate) cause: Option<String>,
}

/// The pool's words for `r`'s verdict, when it is a deadlock through the pool or a starved pool.
pub(crate) fn pool_verdict(r: &super::model::Report) -> Option<PoolVerdict> {
    match r.verdict {
        Verdict::Deadlock => {
            let p = r.deadlocks.iter().find_map(|d| d.thread_pool.as_ref())?;
            let max = p.max_workers.map(|m| format!(" (max {m})")).unwrap_or_default();
            let mut line = format!(" through the thread pool: all {} workers{max} are blocked — {}", p.workers.len(), pool_story(&p.workers, &r.locks, &r.threads));
            if let Some(q) = p.queued_work_items.filter(|&q| q > 0) {
                line.push_str(&format!("; {q} work item{} wait{}", plural(q as usize), if q == 1 { "s" } else { "" }));
            }
            Some(PoolVerdict { line, cause: None })
        }
        Verdict::ThreadPoolStarved => {
            let tp = r.dotnet.as_ref().and_then(|d| d.thread_pool.as_ref())?;
            let line = format!(" — {} of {} workers blocked; {}", tp.workers_blocked.len(), tp.workers_total, starvation_words(&r.locks, tp));
            let story = pool_story(&tp.workers_blocked, &r.locks, &r.threads);
            Some(PoolVerdict { line, cause: (!story.is_empty()).then_some(story) })
        }
        _ => None,
    }
}

/// A lock in few words: the field that holds its object (`Ledger._sync`), else its name.
fn lock_short(l: &LockFact) -> String {
    match l.managed.as_ref().and_then(|m| holder(l.kind, m)) {
        Some(r) => referrer(r),
        None => lock_name(l),
    }
}

/// What a pool's blocked workers wait for, in the service's words, the most workers first:
/// `11 Kestrel request loops behind Ledger._sync, held by a Kestrel request loop that blocks at
/// Ledger.Post on Rates.FetchRatesAsync (sync over async: Task.Result), which waits for a worker
/// to fire its timer`.
pub(crate) fn pool_story(workers: &[u32], locks: &[LockFact], threads: &[ThreadReport]) -> String {
    let lock_of = |t: u32| threads.iter().find(|x| x.tid == t).and_then(|x| x.blocked_on.as_deref()).and_then(|id| locks.iter().find(|l| l.id == id));
    // lock id → the workers blocked on it, in first-seen order.
    let mut by_lock: Vec<(&LockFact, Vec<u32>)> = Vec::new();
    for &w in workers {
        let Some(l) = lock_of(w) else { continue };
        match by_lock.iter_mut().find(|(g, _)| g.id == l.id) {
            Some((_, ts)) => ts.push(w),
            None => by_lock.push((l, vec![w])),
        }
    }
    // A lock's owner told inline is not told again on its own.
    let told_inline: Vec<u32> = by_lock.iter().filter(|(l, _)| l.kind != LockKind::Task).filter_map(|(l, _)| l.owner.tid()).collect();
    // What each group does, for one thread and for many; groups that do the same are one.
    let mut parts: Vec<(Vec<u32>, String, String)> = Vec::new();
    for (l, tids) in &by_lock {
        if tids.len() == 1 && told_inline.contains(&tids[0]) && l.kind == LockKind::Task {
            continue;
        }
        let first = threads.iter().find(|t| t.tid == tids[0]);
        let tail = |many: bool| -> String {
            let s = if many { "" } else { "s" };
            match (l.kind, l.owner.tid()) {
                (LockKind::Task, _) => match first {
                    Some(t) => task_block_words(t, l, many),
                    None => format!("wait{s} for {}", lock_short(l)),
                },
                (_, Some(owner)) => {
                    let o = threads.iter().find(|t| t.tid == owner);
                    let role = o.and_then(|o| o.role.as_ref()).map_or("thread".to_string(), |r| r.name.clone());
                    let what = match (o, lock_of(owner)) {
                        (Some(o), Some(ol)) if ol.kind == LockKind::Task => format!(" that {}", task_block_words(o, ol, false)),
                        (_, Some(ol)) => format!(" that waits for {}", lock_short(ol)),
                        (Some(o), None) => format!(" that is {}", o.state),
                        (None, None) => String::new(),
                    };
                    format!("behind {}, held by {} {role} ({owner}){what}", lock_short(l), a_or_an(&role))
                }
                (_, None) => {
                    let site = first.and_then(|t| crate::graph::blocking_site::blocking_site(&t.frames));
                    let at = site.as_ref().and_then(|s| s.call_site.as_deref()).map(|c| format!(" at {}", short_method(c))).unwrap_or_default();
                    let api = site.map_or_else(|| lock_short(l), |s| blocking_api_words(s.api).to_string());
                    let barrier = l.managed.as_ref().and_then(|m| m.barrier.as_ref()).map(|b| format!(" ({} of {} participants arrived)", b.arrived, b.participants)).unwrap_or_default();
                    let release = l.managed.as_ref().and_then(|m| m.released_by_queued).map(|q| format!(", which wait{s} for a worker to {}", queued_release_words(q))).unwrap_or_default();
                    format!("wait{s}{at} in {api}{barrier}{release}")
                }
            }
        };
        let (one, many) = (tail(false), tail(true));
        match parts.iter_mut().find(|(_, o, _)| *o == one) {
            Some((ts, _, _)) => ts.extend(tids.iter().copied()),
            None => parts.push((tids.clone(), one, many)),
        }
    }
    parts.sort_by_key(|p| std::cmp::Reverse(p.0.len()));
    parts.iter().map(|(tids, one, many)| format!("{} {}", workers_words(tids, threads), if tids.len() == 1 { one } else { many })).collect::<Vec<_>>().join("; ")
}

/// What stopped working behind a lock, in the service's words: `Orleans: 8 grain activations
/// and 1 grain call wait behind monitor on System.Object at 0x… (PriceCache._sync) — held by
/// thread 3042 (CacheRefresher)`. One line per framework whose threads wait on `l`; none when
/// only the runtime's own threads (or threads with no role) wait, or when `l` is only waited on
/// to be signalled (a condition variable, a semaphore: an idle wait, not a stop).
pub(crate) fn role_lines(l: &LockFact, threads: &[ThreadReport]) -> Vec<String> {
    let Ok(roles) = crate::roles::Roles::builtin() else { return Vec::new() };
    if !l.kind.is_exclusive() && l.kind != LockKind::Task {
        return Vec::new();
    }
    // framework → (role, count), in the order the roles first appear among the waiters.
    let mut by_framework: Vec<(&str, Vec<(&crate::roles::ThreadRole, usize)>)> = Vec::new();
    for role in l.waiter_tids.iter().filter_map(|&tid| threads.iter().find(|t| t.tid == tid)).filter_map(|t| t.role.as_ref()).filter(|r| roles.is_service(r)) {
        let at = match by_framework.iter().position(|(f, _)| *f == role.framework) {
            Some(i) => i,
            None => {
                by_framework.push((role.framework.as_str(), Vec::new()));
                by_framework.len() - 1
            }
        };
        let counts = &mut by_framework[at].1;
        match counts.iter_mut().find(|(r, _)| r.role == role.role) {
            Some((_, n)) => *n += 1,
            None => counts.push((role, 1)),
        }
    }
    by_framework
        .into_iter()
        .map(|(framework, mut counts)| {
            // The most threads first: what stopped working most.
            counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.role.cmp(&b.0.role)));
            let n: usize = counts.iter().map(|(_, n)| n).sum();
            let parts: Vec<String> = counts.iter().map(|(r, n)| if *n == 1 { format!("1 {}", r.name) } else { format!("{n} {}", roles.plural(r).unwrap_or(&r.name)) }).collect();
            let list = match parts.split_last() {
                Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
                _ => parts.join(""),
            };
            let owner_role = l.owner.tid().and_then(|t| threads.iter().find(|x| x.tid == t)).and_then(|t| t.role.as_ref()).filter(|r| roles.is_service(r));
            let owner = match owner_role {
                Some(r) => format!("{}, {} {}", owner_words(l), a_or_an(&r.name), r.name),
                None => owner_words(l),
            };
            let behind = if l.kind == LockKind::Task { "for" } else { "behind" };
            format!("{}: {list} wait{} {behind} {} — {owner}", roles.framework_name(framework).unwrap_or(framework), if n == 1 { "s" } else { "" }, lock_name(l))
        })
        .collect()
}

/// `10 frames in libcoreclr.so, no symbols`: a folded run of a stack (`report::fold`).
pub(crate) fn folded_frames(n: usize, module: &str) -> String {
    format!("{n} frame{} in {module}, no symbols", plural(n))
}

/// `LifetimeScope._synchRoot, Tag "root"`: the referrer in a lock's name.
pub(crate) fn referrer(r: &ReferrerReport) -> String {
    let ty = short_type(&r.type_name);
    match (&r.identity, r.field.starts_with('[')) {
        (Some(id), _) => format!("{ty}.{}, {id}", r.field),
        (None, true) => format!("{ty}{}", r.field),
        (None, false) => format!("{ty}.{}", r.field),
    }
}

/// The type's name without its namespace (`Autofac.Core.Lifetime.LifetimeScope` → `LifetimeScope`).
pub fn short_type(name: &str) -> &str {
    let head = name.find('<').map_or(name, |i| &name[..i]);
    match head.rfind('.') {
        Some(i) => &name[i + 1..],
        None => name,
    }
}

/// `a return to an overwritten return address: the stack slot at 0x… holds it (a smashed stack)`.
pub(crate) fn overwritten_return(r: &crate::crash::OverwrittenReturn) -> String {
    format!("a return to an overwritten return address: the stack slot it returned from, {}, holds {} (a smashed stack)", r.slot, r.value)
}

/// The abandoned locks in words: `2 threads wait for good behind orphan_lock, whose owner, thread
/// 7711, exited holding it`.
pub(crate) fn abandoned(locks: &[LockFact]) -> String {
    let parts: Vec<String> = locks
        .iter()
        .filter(|l| l.released_by_nobody() && !l.waiter_tids.is_empty())
        .map(|l| {
            let n = l.waiter_tids.len();
            let owner = match l.owner {
                Owner::Exited { tid } => format!("whose owner, thread {tid}, exited holding it"),
                _ => "which nobody left can release".to_string(),
            };
            format!("{n} thread{} wait{} for good behind {}, {owner}", plural(n), if n == 1 { "s" } else { "" }, lock_name(l))
        })
        .collect();
    parts.join("; ")
}

/// Who sent a kill: `sent by process 11037`; pid 0 is a sender the process cannot see (a
/// process outside its PID namespace: a container's process killed from the host).
pub(crate) fn signal_sender(pid: u32) -> String {
    match pid {
        0 => "sent from outside the process's PID namespace (the sender's pid reads 0 in it)".to_string(),
        pid => format!("sent by process {pid}"),
    }
}

/// The verdict in a few words (`DEADLOCK` on the verdict line, upper-cased).
pub fn verdict(v: Verdict) -> &'static str {
    match v {
        Verdict::Deadlock => "deadlock",
        Verdict::Crash => "crash",
        Verdict::Abandoned => "abandoned",
        Verdict::GcStall => "gc stall",
        Verdict::Contention => "contention",
        Verdict::ThreadPoolStarved => "thread pool starved",
        Verdict::BlockedOnIo => "blocked on I/O",
        Verdict::Idle => "idle",
        Verdict::NothingBlocked => "nothing blocked",
        Verdict::NotAnalyzed => "not analyzed",
    }
}

/// A thread's state in a few words, for summaries and the text report (`futex wait on 0x…`,
/// `sleeping (nanosleep)`); the diagnostics say it so too.
impl std::fmt::Display for ThreadState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ThreadState::Running => f.write_str("running"),
            ThreadState::Futex { address, .. } => write!(f, "futex wait on {address}"),
            ThreadState::FutexWaitv => f.write_str("futex_waitv"),
            ThreadState::Polling { syscall } => write!(f, "polling ({syscall})"),
            ThreadState::Sleeping { syscall } => write!(f, "sleeping ({syscall})"),
            ThreadState::IdleRuntimeThread { role } => write!(f, "idle runtime thread ({role})"),
            ThreadState::WaitingForWork { pool } => write!(f, "waiting for work ({pool})"),
            ThreadState::Parked { function } => write!(f, "parked ({function}): waiting to be unparked"),
            ThreadState::Io { syscall, fd } => write!(f, "in I/O ({syscall} on fd {fd})"),
            ThreadState::WaitingForChild { syscall } => write!(f, "waiting for a child ({syscall})"),
            ThreadState::Stopped { signal } => write!(f, "stopped (signal {signal})"),
            ThreadState::Syscall { name, .. } => write!(f, "in syscall {name}"),
        }
    }
}

/// What a verdict was reached without, in words: what is missing, what it hides, the option
/// that supplies it, and a few words for the verdict line.
pub(crate) fn verdict_limit(l: &Limit) -> VerdictLimit {
    match l {
        Limit::ModuleFile { name, path, build_id, file, threads: n, ownerless_locks: unknown } => {
            let detail = match file {
                MissingFile::NotFound { tried } => format!("not found at {tried}"),
                MissingFile::Refused { path, reason } => format!("{path} refused: {reason}"),
            };
            let (n, unknown) = (*n, *unknown);
            let build = build_id.as_ref().map(|b| format!(" (build-id {b})")).unwrap_or_default();
            let fix = match file {
                MissingFile::Refused { .. } => format!("--search-dir DIR holding the {name} that ran{build}"),
                MissingFile::NotFound { .. } => format!("--sysroot DIR (the root the dump's paths are under: DIR{path}) or --search-dir DIR holding {name}{build}"),
            };
            VerdictLimit {
                missing: format!("{name}'s file ({detail})"),
                hides: format!(
                    "{n} waiting thread{}' stacks through it were not unwound by its CFI, so the calls that name their locks are lost; {unknown} lock{} they wait for {} no known owner: a lock's owner, and a deadlock through it, cannot be seen",
                    if n == 1 { "" } else { "s" },
                    if unknown == 1 { "" } else { "s" },
                    if unknown == 1 { "has" } else { "have" },
                ),
                fix,
                short: format!("{name}'s file"),
            }
        }
        Limit::HeapGraphMemory { objects, needed, available, limit, scratch } => {
            use crate::memory_budget::ScratchVerdict;
            let source = match &limit.source {
                crate::memory_budget::LimitSource::Flag => "--max-memory".to_string(),
                crate::memory_budget::LimitSource::Cgroup(path) => path.display().to_string(),
            };
            let bytes = super::gc_text::bytes;
            let why_not_scratch = match scratch {
                ScratchVerdict::WalkTooLarge => "even with its arrays in scratch files, the walk's lists of the objects do not fit".to_string(),
                ScratchVerdict::TooSmall { dir, free, needed } => format!("its scratch files would need about {} in {}, which has {} free (--scratch-dir)", bytes(*needed), dir.display(), bytes(*free)),
                ScratchVerdict::InMemory { dir } => format!("scratch files in {} would be memory too: it is a memory-backed file system (--scratch-dir)", dir.display()),
                ScratchVerdict::Unusable { dir, why } => format!("scratch files cannot be made in {} ({why}; --scratch-dir)", dir.display()),
            };
            let fix = match scratch {
                ScratchVerdict::WalkTooLarge => format!("--max-memory SIZE above the limit knot reads (about {} for this heap, its arrays in scratch files), or a higher memory limit", bytes(objects.saturating_mul(crate::memory_budget::WALK_BYTES_PER_OBJECT).saturating_mul(4) / 3 + (256 << 20))),
                _ => format!("--scratch-dir DIR on a disk with room for the scratch files (about {}; not a memory-backed emptyDir), or --max-memory SIZE above the limit knot reads (about {} for this heap in memory)", bytes(objects.saturating_mul(crate::memory_budget::SCRATCH_BYTES_PER_OBJECT)), bytes(needed.saturating_mul(4) / 3 + (256 << 20))),
            };
            VerdictLimit {
                missing: format!(
                    "the heap's retained sizes (its object graph of {} objects needs about {}, over the {} the memory limit of {} ({source}) leaves it beside the dump's pages; {why_not_scratch})",
                    crate::runtimes::dotnet::gc::state::thousands(*objects),
                    bytes(*needed),
                    bytes(*available),
                    bytes(limit.bytes),
                ),
                hides: "what holds the heap: retained sizes by type, the top holders and a leak suspect (stacks, locks, the heap by type and the GC's state are whole)".into(),
                fix,
                short: "the heap's retained sizes".into(),
            }
        }
        Limit::DotnetMonitors { version, why } => VerdictLimit {
            missing: format!("the .NET monitors' layout ({why}: knot has no per-build facts for it in analyzers/dotnet/)"),
            hides: "Monitors and Locks with their owners and the waits on them: a managed deadlock or contention cannot be seen".into(),
            fix: format!("a runtime build knot has facts for (analyzers/dotnet/coreclr-*.toml lists them); {version} has none"),
            short: "the .NET monitors".into(),
        },
        Limit::DotnetRuntime { version, why, path, build_id, file_would_help } => {
            let path = path.as_deref().unwrap_or("libcoreclr.so");
            let build = build_id.as_deref().map(|b| format!(" (build-id {b})")).unwrap_or_default();
            VerdictLimit {
                missing: format!("the .NET runtime's data (CoreCLR {version}: {})", why.strip_prefix(&format!("runtime reader unsupported: {version}: ")).unwrap_or(why)),
                hides: "managed frames, Monitors and Locks with their owners, managed waits and the thread pool: a managed deadlock, contention or starvation cannot be seen".into(),
                fix: if *file_would_help {
                    format!("--search-dir DIR holding this dump's libcoreclr.so{build}, or --sysroot DIR (DIR{path})")
                } else {
                    format!("none that a file gives: knot has no layouts for CoreCLR {version} (it reads .NET 9 and later through the descriptor the runtime carries, and the .NET 8 builds analyzers/dotnet/descriptor-8.0.toml lists)")
                },
                short: "the .NET runtime's data".into(),
            }
        }
        Limit::SingleFileMetadata { executable, build_id } => {
            let name = executable.rsplit('/').next().unwrap_or(executable);
            let build = build_id.as_deref().map(|b| format!(" (build-id {b})")).unwrap_or_default();
            VerdictLimit {
                missing: format!(
                    "the managed metadata of the single-file app {executable} (its assemblies, CoreLib's too, are bundled in the executable, whose pages this dump does not hold)"
                ),
                hides: "the names of types and managed frames (the heap's types, the objects the monitors are on, the managed frames), not the threads, monitors, owners or cycles".into(),
                fix: format!(
                    "--search-dir DIR holding {name}{build}, the executable that ran; or a full dump of the process (createdump --full PID, or DOTNET_DbgMiniDumpType=4 for the runtime's own dump on a crash), which holds the bundle's pages"
                ),
                short: "the single-file app's metadata".into(),
            }
        }
    }
}

// What a lock's facts rest on, in words: the JSON's `evidence`, `owner.why`, `owner.evidence`
// and `owner.reader_evidence` are these sentences, as are the text and HTML pages.

/// Says a fact in JSON as its words.
macro_rules! serialize_as_words {
    ($($t:ty),*) => {$(
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
    )*};
}
serialize_as_words!(Evidence, UnknownOwner, Inference, FrameHold, IdleRole, Pool, RootName);

/// `ReaderWriterLockSlim._owners`' count of holders (readers and the upgradeable holder).
const RWLS_READER_MASK: u32 = 0x0FFF_FFFF;

/// `, writer held, writers waiting`: the flags of `ReaderWriterLockSlim._owners`.
fn rwls_flag_words(owners: u32) -> String {
    [(0x8000_0000u32, "writer held"), (0x4000_0000, "writers waiting"), (0x2000_0000, "an upgrader waiting to write")]
        .iter()
        .filter(|(bit, _)| owners & bit != 0)
        .map(|(_, w)| format!(", {w}"))
        .collect()
}

/// `(type unread)` where the runtime's type name was not read.
fn type_or_unread(t: &Option<String>) -> &str {
    t.as_deref().unwrap_or("(type unread)")
}

impl std::fmt::Display for Evidence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Evidence::FutexWait { tid, futex, expected, restarted, function, frame } => {
                let restarted = if *restarted { " (a timed wait the kernel restarted: restart_syscall)" } else { "" };
                let function = function.as_deref().unwrap_or("?");
                write!(f, "thread {tid} is in futex wait on {futex:#x} (expecting {expected:#x}){restarted} under {function} (frame #{frame})")
            }
            Evidence::UnrecognisedFutexWait { tid, futex, expected } => {
                write!(f, "thread {tid} is in futex wait on {futex:#x} (expecting {expected:#x}); no analyzer recognises its frames")
            }
            Evidence::PointerInFrame(h) => write!(f, "thread {}: {}", h.tid, frame_hold_words(h)),
            Evidence::Mutex { address, lock, owner, count, kind } => {
                write!(f, "pthread_mutex_t at {address:#x}: __lock={lock:#x} __owner={owner} __count={count} __kind={kind:#x}")
            }
            Evidence::Rwlock { address, readers_word, readers, writer } => {
                write!(f, "pthread_rwlock_t at {address:#x}: __readers={readers_word:#x} ({readers} readers) __cur_writer={writer}")
            }
            Evidence::Cond { address, wrefs, waiters } => write!(f, "pthread_cond_t at {address:#x}: __wrefs={wrefs:#x} ({waiters} waiters registered)"),
            Evidence::Sem { address, value, waiters } => {
                let read = |v: &Result<u32, FieldError>| v.as_ref().map_or_else(ToString::to_string, u32::to_string);
                write!(f, "sem_t at {address:#x}: value={} nwaiters={}", read(value), read(waiters))
            }
            Evidence::Join { address, tid } => write!(f, "pthread_join sleeps on the joined thread's tid word at {address:#x}, which holds {tid}"),
            Evidence::Barrier { address, arrived, count } => write!(f, "pthread_barrier_t at {address:#x}: {arrived} of {count} threads arrived (in - current_round; count {count})"),
            Evidence::RefusedPiMutex { tid, parked_on, mutex, frame, place, value } => {
                let at = match place {
                    PointerPlace::Register(r) => format!("register {r}"),
                    PointerPlace::Stack(a) => format!("its stack slot at {a:#x}"),
                };
                write!(
                    f,
                    "thread {tid} was refused the priority-inheritance mutex at {mutex:#x} (EDEADLK: the kernel saw the cycle) and sleeps for good on {parked_on:#x}, a zero word of its own stack; frame #{frame} keeps {value:#x}, a pointer into that mutex, in {at}"
                )
            }
            Evidence::FutexWord { address, value: Ok(w) } => write!(f, "futex word at {address:#x} = {w:#x}; this lock type records no owner"),
            Evidence::FutexWord { address, value: Err(e) } => write!(f, "futex word at {address:#x} not readable: {e}"),
            Evidence::Unread(why) => write!(f, "{why}"),
            Evidence::PythonLock { object, lock_type, semaphore, kept_by, owner_ident, count, locked } => {
                let kept = match kept_by.place {
                    PointerPlace::Register(r) => format!("register {r}"),
                    PointerPlace::Stack(at) => format!("its stack slot {at:#x}"),
                };
                let function = kept_by.function.as_deref().map(|n| format!(" {n}")).unwrap_or_default();
                write!(f, "{} object at {object:#x} (its semaphore {semaphore:#x}), kept by thread {}'s frame #{}{function} in {kept}", lock_type.type_name(), kept_by.tid, kept_by.frame)?;
                match (owner_ident, count, locked) {
                    (Some(ident), Some(count), _) => write!(f, ": rlock_owner {ident:#x}, rlock_count {count}"),
                    (_, _, Some(locked)) => write!(f, ": locked {locked}"),
                    _ => Ok(()),
                }
            }
            Evidence::SyncBlock { index, address, object, monitor_held, recursion, owner_managed_id } => {
                let holder = owner_managed_id.map_or("none".into(), |i| i.to_string());
                write!(f, "sync block {index} at {address:#x}: object {object:#x}, MonitorHeld {monitor_held}, recursion {recursion}, holding thread id {holder}")
            }
            Evidence::ThinLock { object, owner_managed_id, recursion } => {
                write!(f, "object header of {object:#x}: thin lock of managed thread {owner_managed_id}, recursion {recursion}")
            }
            Evidence::LockObject { object, owner_os_tid, recursion } => {
                write!(f, "System.Threading.Lock {object:#x}: _owningThreadId {}, recursion {recursion}", owner_os_tid.unwrap_or(0))
            }
            Evidence::Task { task, type_name, state_flags, status, event, event_type, event_lock } => write!(
                f,
                "task {task:#x} ({}): m_stateFlags {state_flags:#x} = {status}; its continuation {event:#x} ({}) has m_lock {event_lock:#x}",
                type_or_unread(type_name),
                type_or_unread(event_type)
            ),
            Evidence::TaskSetsEvent { task, type_name, state_flags, status, event, event_lock } => write!(
                f,
                "task {task:#x} ({}): m_stateFlags {state_flags:#x} = {status}; a continuation of it (its m_continuationObject) sets ManualResetEventSlim {event:#x}, whose m_lock is {event_lock:#x}",
                type_or_unread(type_name)
            ),
            Evidence::EventWaiter { thread, event, object, stack_slot } => {
                write!(f, "{thread} is in ManualResetEventSlim.Wait on {event:#x} (Monitor.Wait on {object:#x}), which the task's continuation sets; the task is referenced from its stack at {stack_slot:#x}")
            }
            Evidence::TaskWaiter { thread, object, stack_slot } => {
                write!(f, "{thread} is in Monitor.Wait on {object:#x} under a task wait frame; the task is referenced from its stack at {stack_slot:#x}")
            }
            Evidence::ManagedWait { thread, wait, source } => {
                let how = match wait {
                    ManagedWaitKind::EnterMonitor => "waits to enter the monitor",
                    ManagedWaitKind::EnterLock => "waits to enter the Lock",
                    ManagedWaitKind::TaskEvent => "is in Monitor.Wait on the task's event",
                    ManagedWaitKind::MonitorWait => "is in Monitor.Wait",
                };
                let source = match source {
                    WaitRecord::BlockingRecord => "its ThreadBlockingInfo record",
                    WaitRecord::WaitList => "the sync block's Monitor.Wait list",
                };
                write!(f, "{thread} {how} (by {source})")
            }
            Evidence::NativeWait { tid, kind, address, id } => {
                let at = address.map_or_else(|| id.clone(), |a| a.to_string());
                write!(f, "thread {tid}'s native wait ({kind} {at}) is the runtime's implementation of this wait")
            }
            Evidence::AsyncStack { index, innermost_type, innermost, awaiting } => {
                let awaiting = awaiting.as_ref().map(|(t, a)| format!(", awaiting {t} at {a}")).unwrap_or_default();
                write!(f, "the task is a frame of async stack {} (dotnet.async[{index}]), innermost {innermost_type} at {innermost}{awaiting}", index + 1)
            }
            Evidence::QueuedToPool => f.write_str("a frame of that async stack is a work item queued to the thread pool: it runs only when a worker is free"),
            Evidence::PoolQueuesUnread => f.write_str("the thread pool's queues were not read: whether that work is queued is not known"),
            Evidence::TimerQueued { queue } => write!(f, "that async stack awaits a timer (Task.Delay), and the TimerQueue that fires due timers is queued to the thread pool's {queue}: it fires only when a worker is free"),
            Evidence::SemaphoreSlim { address, current_count, max_count, wait_count, nodes } => write!(
                f,
                "SemaphoreSlim {address:#x}: m_currentCount {current_count}, m_maxCount {max_count}, m_waitCount {wait_count}, {nodes} TaskNode{} in line (m_asyncHead…m_asyncTail)",
                plural(*nodes)
            ),
            Evidence::SemaphoreWaiters { tids, how } => {
                // `thread 5 waits`, `threads 5, 6 wait`.
                let waits = if tids.len() == 1 { "waits" } else { "wait" };
                let how = match how {
                    SemaphoreWait::TaskNode { node } => {
                        format!("{waits} in SemaphoreSlim.Wait for TaskNode {} (in line behind the async waiters)", node.map_or(String::new(), |a| a.to_string()))
                    }
                    SemaphoreWait::MonitorWait { lock_object } => format!("{waits} in SemaphoreSlim.Wait: Monitor.Wait on its lock object {lock_object:#x}"),
                };
                let tids: Vec<String> = tids.iter().map(u32::to_string).collect();
                write!(f, "thread{} {} {how}", plural(tids.len()), tids.join(", "))
            }
            Evidence::AsyncWaiter { task, method, async_stack } => {
                let by = match (method, async_stack) {
                    (Some(m), Some(i)) => format!(", awaited by {m} (async stack {})", i + 1),
                    (None, Some(i)) => format!(" (async stack {})", i + 1),
                    _ => String::new(),
                };
                write!(f, "async waiter: TaskNode {task}{by}")
            }
            Evidence::TaskNodeListCut { why } => write!(f, "TaskNode list cut: {why}"),
            Evidence::ReleasedByQueued { what, item_type, inside } => {
                let waits = match what {
                    crate::waits::QueuedRelease::SocketEvent => "the reply it waits for is read only when a worker runs the socket engine's work item",
                    crate::waits::QueuedRelease::ParallelReplica => "the participants it waits for would come from a Parallel replica task",
                };
                write!(f, "{waits}: a {item_type} is queued to the thread pool (inferred)")?;
                match inside {
                    Some(frame) => write!(f, "; the waiter is inside {}", short_method(frame)),
                    None => Ok(()),
                }
            }
            Evidence::RwLockSlim { address, lock_id, owners, write_owner_id, upgrade_owner_id, counts } => write!(
                f,
                "ReaderWriterLockSlim {address:#x}: _lockID {lock_id}, _owners {owners:#x} ({} holder{}{}), _writeLockOwnerId {write_owner_id}, _upgradeLockOwnerId {upgrade_owner_id}, _numReadWaiters {}, _numWriteWaiters {}, _numUpgradeWaiters {}, _numWriteUpgradeWaiters {}",
                owners & RWLS_READER_MASK,
                plural((owners & RWLS_READER_MASK) as usize),
                rwls_flag_words(*owners),
                counts[0],
                counts[1],
                counts[2],
                counts[3]
            ),
            Evidence::ReaderCount { thread, record, read_count } => write!(f, "{thread}'s ReaderWriterCount {record:#x} for this lock (its t_rwc thread static): readercount {read_count}"),
            Evidence::EnteringFrame { thread, frame, slot } => write!(f, "{thread} is blocked in {frame}, whose stack keeps the object at {slot:#x}"),
            Evidence::ClassInitEntry { entry, holding_thread, method_table, class, cctor } => {
                let cctor = cctor.as_ref().map(|c| format!("; the holder runs {c}")).unwrap_or_default();
                write!(f, "the mutex is the Crst of the runtime's class-init lock entry (ListLockEntry) {entry:#x} for {class} (MethodTable {method_table:#x}), held by Thread {holding_thread:#x}{cctor}")
            }
            Evidence::PoolFields { object, type_name, max, count, idle, items } => {
                let n = |v: &Option<i64>| v.map_or_else(|| "unread".to_string(), |v| v.to_string());
                write!(f, "{type_name} {object:#x}: maximum {}, {} item{} of which {} idle; {items} in its slots", n(max), n(count), plural(count.unwrap_or(0) as usize), n(idle))
            }
        }
    }
}

/// `thread 12 "worker"`, or `thread 12`.
impl std::fmt::Display for NamedThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.name {
            Some(n) => write!(f, "thread {} \"{n}\"", self.tid),
            None => write!(f, "thread {}", self.tid),
        }
    }
}

impl std::fmt::Display for UnknownOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UnknownOwner::NoLayout => f.write_str("no analyzer knows this lock's layout"),
            UnknownOwner::NotRecorded => f.write_str("this lock type records no owner"),
            UnknownOwner::SearchBudgetSpent => f.write_str("the lock records no owner, and the stack-search budget for inferring one ran out"),
            UnknownOwner::NoStackPointsIn => f.write_str("the lock records no owner, and no other thread's stack points into it"),
            UnknownOwner::SeveralStacksPointIn { tids } => write!(f, "the lock records no owner; {} threads' stacks point into it: {tids:?}", tids.len()),
            UnknownOwner::MutexBetweenOwners { lock, owner } => {
                write!(f, "the mutex holds no owner (__lock={lock:#x}, __owner={owner}): it is being released or acquired")
            }
            UnknownOwner::RobustOwnerDied => f.write_str("the robust mutex's owner died; the next locker will get EOWNERDEAD"),
            UnknownOwner::RwlockBetweenOwners => f.write_str("the rwlock is neither write-locked nor read-locked: it is changing hands"),
            UnknownOwner::Unreadable(e) => write!(f, "{e}"),
            UnknownOwner::JoinWordUnreadable => f.write_str("the joined thread's tid word is not readable"),
            UnknownOwner::UnmappedManagedThread { managed_id } => write!(f, "held by managed thread {managed_id} which knot cannot map to an OS thread"),
            UnknownOwner::HandedOver => f.write_str("not held at the time of the dump (being handed over)"),
            UnknownOwner::SemaphoreFree { current_count, max_count } => write!(f, "its count is {current_count} of {max_count}: free (the waiters are being woken)"),
            UnknownOwner::PythonLockNoOwner => f.write_str("a Python threading.Lock records no owner, only that it is locked"),
            UnknownOwner::PythonObjectNotFound { semaphore } => {
                write!(f, "no waiter's frames keep the Python lock object of semaphore {semaphore:#x}: whether it is a Lock or an RLock, and an RLock's owner, are unread")
            }
            UnknownOwner::PythonRLockFree => f.write_str("the Python RLock records no owner (rlock_owner 0): it is being released or acquired"),
            UnknownOwner::PythonOwnerNotAThread { ident } => {
                write!(f, "the Python RLock's owner is thread ident {ident:#x}, the pthread_self() of no thread in the dump (exited, or its struct pthread unread)")
            }
            UnknownOwner::SemaphoreTaken { max_count } => {
                write!(f, "a SemaphoreSlim records no holder; its count is 0 of {max_count}: taken and not released (by an async flow or a thread)")
            }
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FieldError::NoField { layout, field } => write!(f, "layout {layout} has no field {field}"),
            FieldError::Unreadable { layout, error } => write!(f, "{layout} not readable: {error}"),
        }
    }
}

impl std::fmt::Display for Inference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Inference::OnlyFrameHolding(h) => write!(f, "the only thread, besides its waiters, with a frame that keeps a pointer into the lock's own object, as a guard does: {}", frame_hold_words(h)),
            Inference::RunsTask { method, frame, stack_slot } => {
                write!(f, "the only thread running the task: its frame #{frame} is {} and its stack holds the task (at {stack_slot:#x})", short_method(method))
            }
            Inference::HoldsSemaphore { stack_slot } => {
                write!(f, "the only thread, not waiting for it, whose stack holds the SemaphoreSlim (at {stack_slot:#x}): past Wait(), inside the code it guards")
            }
            Inference::ServerGcThread { index, heap } => {
                write!(f, "a server GC thread: a runtime thread whose stack holds heap {index}'s gc_heap ({heap:#x}), as the GC's thread function keeps it")
            }
            Inference::PoolLease { item, lease, lease_type, slot, frame } => {
                let frame = frame.as_ref().map(|fr| format!(" in {fr}")).unwrap_or_default();
                write!(f, "the only thread whose frames keep item {item:#x}'s lease ({lease_type} {lease:#x}): its stack at {slot:#x}{frame}")
            }
            Inference::WaitingWriter { frame } => write!(f, "a writer blocked in {frame}: while it waits, the lock admits no new reader"),
        }
    }
}

/// `frame #4 plan keeps 0x… in its stack slot 0x…`: where a thread keeps a pointer into a lock.
fn frame_hold_words(h: &FrameHold) -> String {
    let function = h.function.as_deref().map(|n| format!(" {n}")).unwrap_or_default();
    let place = match h.place {
        PointerPlace::Register(name) => format!("in register {name}"),
        PointerPlace::Stack(at) => format!("in its stack slot {at:#x}"),
    };
    format!("frame #{}{function} keeps {:#x}, a pointer into the lock's own object, {place}", h.frame, h.value)
}

/// A reader offered for a read-held lock: `thread 5: frame #4 plan keeps 0x… in its stack slot
/// 0x…, while it does not wait for it`.
impl std::fmt::Display for FrameHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "thread {}: {}, while it does not wait for it", self.tid, frame_hold_words(self))
    }
}

/// `finalizer`, `thread pool gate`: an idle service thread's role (`idle runtime thread (timer)`).
impl std::fmt::Display for IdleRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IdleRole::Finalizer => "finalizer",
            IdleRole::RuntimeService => "runtime service",
            IdleRole::ThreadPoolGate => "thread pool gate",
            IdleRole::Timer => "timer",
        })
    }
}

impl std::fmt::Display for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Pool::ThreadPool => "thread pool",
            Pool::SocketScheduler => "a socket library's scheduler: Pipelines.Sockets.Unofficial, StackExchange.Redis' IO threads",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::WaitForGraph;
    use crate::hex::Hex;

    fn lock(id: &str, name: &str, owner: Option<u32>, waiters: &[u32]) -> LockFact {
        LockFact::test_mutex(id, name, owner, waiters)
    }

    #[test]
    fn a_or_an_goes_by_how_the_next_word_is_said() {
        for (next, a) in [
            ("ASP.NET Core request", "an"),
            ("Orleans grain call", "an"),
            ("Kestrel request loop", "a"),
            ("HTTP call", "an"),
            ("GC thread", "a"),
            (".NET thread", "a"),
            ("8.0 MiB hard limit", "an"),
            ("11 workers", "an"),
            ("18,000 items", "an"),
            ("110 workers", "a"),
            ("64.0 MiB hard limit", "a"),
            ("user", "a"),
            ("hour", "an"),
            ("idle thread", "an"),
            ("thread", "a"),
            ("", "a"),
        ] {
            assert_eq!(a_or_an(next), a, "{next}");
        }
    }

    #[test]
    fn an_awaited_task_without_an_async_method_is_named_as_dumpasync_names_its_type() {
        // The nolock sample's HttpRequestStream.Read blocks on this wrapper (it read "CoreLib]]").
        assert_eq!(awaited_type_name("System.Threading.Tasks.ValueTask`1+ValueTaskSourceAsTask[[System.Int32, System.Private.CoreLib]]"), "ValueTask<Int32>+ValueTaskSourceAsTask");
        assert_eq!(awaited_type_name("System.Threading.Tasks.Task`1[[System.Collections.Generic.List`1[[System.String, System.Private.CoreLib]], System.Private.CoreLib]]"), "Task<List<String>>");
        assert_eq!(awaited_type_name("System.Threading.Tasks.Task"), "Task");
        let mut l = lock("task@0x10", "t", None, &[7]);
        l.kind = LockKind::Task;
        l.managed = Some(ManagedLock {
            type_name: Some("System.Threading.Tasks.ValueTask`1+ValueTaskSourceAsTask[[System.Int32, System.Private.CoreLib]]".into()),
            ..ManagedLock::new(LockStorage::Task, 0x10)
        });
        assert_eq!(task_block_words(&thread(7, None), &l, false), "blocks on ValueTask<Int32>+ValueTaskSourceAsTask");
    }

    fn thread(tid: u32, role: Option<(&str, &str, &str)>) -> ThreadReport {
        ThreadReport {
            tid,
            name: None,
            signalled: false,
            frames: vec![],
            stack_end: crate::threads::StackEndReport { complete: true, reason: "outermost".into(), address: None, detail: String::new(), scanned_frames: 0 },
            state: ThreadState::Running,
            blocked_on: None,
            managed_thread_id: None,
            own_tid: None,
            role: role.map(|(framework, role, name)| crate::roles::ThreadRole { framework: framework.into(), role: role.into(), name: name.into() }),
        }
    }

    #[test]
    fn a_lock_owner_s_role_takes_its_article() {
        // The owner is an ASP.NET Core request: "an", not "a".
        let l = lock("m", "ledger", Some(1), &[2, 3]);
        let request = Some(("aspnetcore", "request", "ASP.NET Core request"));
        let threads = [thread(1, request), thread(2, request), thread(3, request)];
        let lines = role_lines(&l, &threads);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].ends_with(", an ASP.NET Core request"), "{}", lines[0]);
        let loops = Some(("aspnetcore", "request_loop", "Kestrel request loop"));
        let threads = [thread(1, loops), thread(2, request), thread(3, request)];
        assert!(role_lines(&l, &threads)[0].ends_with(", a Kestrel request loop"), "{:?}", role_lines(&l, &threads));
    }

    #[test]
    fn a_three_thread_cycle_reads_as_one_chain() {
        let locks = vec![lock("m1", "ledger", Some(8609), &[8611]), lock("m2", "audit", Some(8610), &[8609]), lock("m3", "index_lock", Some(8611), &[8610])];
        let threads = [(8609, Some("m2")), (8610, Some("m3")), (8611, Some("m1")), (9000, None)];
        let c = WaitForGraph::new(&threads, &locks).cycles();
        assert_eq!(c.len(), 1);
        assert_eq!(
            deadlock(&c[0], &locks, &Default::default(), String::new()).description,
            "thread 8609 holds ledger, waits for audit — held by 8610, which waits for index_lock — held by 8611, which waits for ledger — held by 8609"
        );
    }

    #[test]
    fn a_deadlock_through_a_pool_names_every_stuck_holder() {
        // Four holders of the pool wait for `gate`, held by 5, which waits for the pool.
        let mut pool = lock("pool", "pool", None, &[5]);
        pool.owner = Owner::None;
        pool.holders = (1..=4).map(crate::waits::lock::Holder::known).collect();
        pool.release = Some(crate::waits::Release::Any);
        let locks = vec![pool, lock("gate", "gate", Some(5), &[1, 2, 3, 4])];
        let threads = [(1, Some("gate")), (2, Some("gate")), (3, Some("gate")), (4, Some("gate")), (5, Some("pool"))];
        let c = WaitForGraph::new(&threads, &locks).cycles();
        assert_eq!(c.len(), 1);
        let d = deadlock(&c[0], &locks, &Default::default(), String::new());
        assert_eq!(d.description, "thread 1 holds pool, waits for gate — held by 5, which waits for pool — held by 1 (and 2, 3, 4: each stuck here)");
        assert_eq!(d.also, vec![2, 3, 4]);
    }

    #[test]
    fn relocking_an_owned_mutex_is_a_cycle_of_one() {
        let locks = vec![lock("m", "self_lock", Some(5), &[5])];
        let c = WaitForGraph::new(&[(5, Some("m"))], &locks).cycles();
        assert_eq!(c.len(), 1);
        let d = deadlock(&c[0], &locks, &Default::default(), String::new());
        assert!(d.description.ends_with("held by 5 itself"), "{}", d.description);
    }

    #[test]
    fn referrers_name_by_short_type_and_field() {
        assert_eq!(short_type("Autofac.Core.Lifetime.LifetimeScope"), "LifetimeScope");
        assert_eq!(short_type("System.Collections.Generic.List<System.Object>"), "List<System.Object>");
        let r = ReferrerReport { type_name: "Autofac.Core.Lifetime.LifetimeScope".into(), field: "_synchRoot".into(), address: Hex(1), identity: Some("Tag \"root\"".into()), is_static: false };
        assert_eq!(referrer(&r), "LifetimeScope._synchRoot, Tag \"root\"");
        let a = ReferrerReport { type_name: "System.Object[]".into(), field: "[3]".into(), address: Hex(0), identity: None, is_static: false };
        assert_eq!(referrer(&a), "Object[][3]");
    }

    #[test]
    fn lock_facts_are_said_in_json_as_their_words() {
        // The JSON carries the same sentence the HTML lists: a typed fact, said once.
        let mut l = lock("mutex@0x10", "m", None, &[7]);
        l.owner = Owner::Unknown { why: UnknownOwner::SeveralStacksPointIn { tids: vec![3, 4] } };
        l.evidence = vec![
            Evidence::FutexWait { tid: 7, futex: 0x10, expected: 2, restarted: true, function: None, frame: 1 },
            Evidence::Sem { address: 0x20, value: Ok(0), waiters: Err(FieldError::NoField { layout: "sem_t".into(), field: "nwaiters" }) },
            Evidence::ManagedWait { thread: NamedThread { tid: 9, name: Some("worker".into()) }, wait: ManagedWaitKind::EnterLock, source: WaitRecord::BlockingRecord },
        ];
        let json = serde_json::to_value(&l).unwrap();
        assert_eq!(json["owner"]["why"], "the lock records no owner; 2 threads' stacks point into it: [3, 4]");
        assert_eq!(
            json["evidence"],
            serde_json::json!([
                "thread 7 is in futex wait on 0x10 (expecting 0x2) (a timed wait the kernel restarted: restart_syscall) under ? (frame #1)",
                "sem_t at 0x20: value=0 nwaiters=layout sem_t has no field nwaiters",
                "thread 9 \"worker\" waits to enter the Lock (by its ThreadBlockingInfo record)",
            ])
        );
        let readers = Owner::Readers { count: 1, reader_tids: vec![5], reader_evidence: vec![FrameHold { tid: 5, frame: 3, function: Some("reader".into()), place: PointerPlace::Register("rbx"), value: 0x18 }] };
        assert_eq!(
            serde_json::to_value(&readers).unwrap()["reader_evidence"][0],
            "thread 5: frame #3 reader keeps 0x18, a pointer into the lock's own object, in register rbx, while it does not wait for it"
        );
        let idle = ThreadState::IdleRuntimeThread { role: IdleRole::ThreadPoolGate };
        assert_eq!(serde_json::to_value(&idle).unwrap(), serde_json::json!({"kind": "idle_runtime_thread", "role": "thread pool gate"}));
        assert_eq!(idle.to_string(), "idle runtime thread (thread pool gate)");
    }
}

/// A leak suspect in one line: `85 % of the heap (2.2 MiB) is held by one
/// System.Collections.Generic.Dictionary<…> reached from static field SessionCache.s_all:
/// 2,000 Knot.Samples.HeapGrowth.Session objects (2.1 MiB) in its …+Entry[]`.
pub(crate) fn suspect(s: &crate::runtimes::dotnet::gc::report::SuspectReport) -> String {
    use super::gc_text::bytes;
    use crate::runtimes::dotnet::gc::state::thousands;
    let mut line = format!("{:.0} % of the heap ({}) is held by one {}", s.heap_percent, bytes(s.retained_bytes), s.type_name);
    match &s.root {
        Some(r) => line.push_str(&format!(" reached from {}", r.name)),
        None => line.push_str(" (its root not found)"),
    }
    let a = &s.accumulation;
    if a.child_count > 0 {
        line.push_str(&format!(": {} {} object{} ({})", thousands(a.child_count), a.child_type, plural(a.child_count as usize), bytes(a.child_retained_bytes)));
        if a.address != s.address {
            line.push_str(&format!(" in its {} at {}", a.type_name, a.address));
        }
    }
    line
}

/// A root kind for people, as SOS `gcroot` says it where it has a word (`strong handle`,
/// `pinned handle`, `finalizer root`).
pub(crate) fn heap_root_kind(kind: &str, conservative: bool) -> &'static str {
    match (kind, conservative) {
        ("strong_handle", _) => "strong handle",
        ("pinned_handle", _) => "pinned handle",
        ("async_pinned_handle", _) => "async pinned handle",
        ("ref_counted_handle", _) => "ref-counted handle",
        ("sized_ref_handle", _) => "sized-ref handle",
        ("variable_handle", _) => "variable handle",
        ("dependent_handle", _) => "dependent handle",
        ("finalizer_queue", _) => "finalizer root",
        ("stack", true) => "stack root (conservative)",
        ("stack", false) => "stack root",
        ("sync_block", _) => "held monitor's sync block",
        ("static", _) => "static field",
        _ => "root",
    }
}

/// `3 strong handles`.
pub(crate) fn heap_root_kind_plural(kind: &str, conservative: bool, n: usize) -> String {
    let w = heap_root_kind(kind, conservative);
    if n == 1 {
        return w.to_string();
    }
    match w.split_once(' ') {
        // `stack root (conservative)` → `stack roots (conservative)`.
        Some((a, rest)) if rest.starts_with("root (") => format!("{a} roots{}", &rest[4..]),
        _ => format!("{w}s"),
    }
}

/// The header of a root's block, as SOS `gcroot` prints it: `HandleTable:`, `Thread 1a2b:`,
/// `Finalizer Queue:`.
pub(crate) fn heap_root_block(r: &crate::report::heap_root::HeapRootHolder) -> String {
    match (&r.thread, r.kind.as_str()) {
        (Some(t), _) => format!("Thread {:x}:", t.os_tid),
        (None, "finalizer_queue") => "Finalizer Queue:".into(),
        (None, "sync_block") => "SyncBlock table:".into(),
        _ => "HandleTable:".into(),
    }
}

/// The root's line under its block: `00007F… (strong handle)`, `7ffd… 7f… Program.Park
/// slot 7ffd… (conservative)`.
pub(crate) fn heap_root_line(r: &crate::report::heap_root::HeapRootHolder) -> String {
    if let Some(t) = &r.thread {
        let place = match (&t.register, t.slot) {
            (Some(reg), _) => format!("register {reg}"),
            (None, Some(s)) => format!("slot {:016x}", s.0),
            (None, None) => "?".into(),
        };
        let method = t.method.as_deref().unwrap_or("<unnamed managed frame>");
        return format!("{:016x} {:016x} {method}\n        {place}{}:", t.frame_sp.0, t.frame_ip.0, if r.conservative { " (conservative)" } else { "" });
    }
    let at = r.handle.or(r.finalizer_slot).map(|h| format!("{:016x} ", h.0)).unwrap_or_default();
    let at = match r.sync_block {
        Some(i) => format!("{at}index {i} "),
        None => at,
    };
    format!("{at}({})", heap_root_kind(&r.kind, r.conservative))
}

/// The root for people, in one line.
pub(crate) fn heap_root_description(r: &crate::report::heap_root::HeapRootHolder) -> String {
    let kind = heap_root_kind(&r.kind, r.conservative);
    if let Some(t) = &r.thread {
        let place = match (&t.register, t.slot) {
            (Some(reg), _) => format!("register {reg}"),
            (None, Some(s)) => format!("stack slot {s}"),
            _ => "a stack slot".into(),
        };
        return format!("{kind}: thread {:#x} (managed {}), frame {}, {place}", t.os_tid, t.managed_id, t.method.as_deref().unwrap_or("<unnamed>"));
    }
    match (r.handle, r.finalizer_slot, r.sync_block) {
        (Some(h), _, _) => format!("{kind} {h}"),
        (_, Some(s), _) => format!("{kind} (queue slot {s})"),
        (_, _, Some(i)) => format!("{kind} {i}"),
        _ => kind.to_string(),
    }
}

/// How one path object leads to the next: `.field`, `[3]`, `(dependent handle)`, `[47] = static
/// Registry.s_held` (an element of the statics' array).
pub(crate) fn heap_path_via(via: &str, static_field: Option<&crate::report::heap_root::HeapStaticField>) -> String {
    let v = if via.starts_with('[') || via.starts_with('(') { via.to_string() } else { format!(".{via}") };
    match static_field {
        Some(s) => format!("{v} = static {}.{}", s.class, s.field),
        None => v,
    }
}

/// A holder's root for people: `strong handle 0x7f…`, `stack root (conservative): thread
/// 0x1a2b, slot 0x7ffd…`, `the static field SessionCache.s_all`; a static field known only by
/// its slot in the runtime's statics array (its class and name could not be read): `a static
/// field (element [12] of the statics array 0x7f…)`.
impl std::fmt::Display for RootName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (kind, conservative, place) = match self {
            RootName::StaticSlot { array, index } => return write!(f, "a static field (element [{index}] of the statics array {array:#x})"),
            RootName::StaticField { class, field } => return write!(f, "the static field {}.{field}", short_type(class)),
            RootName::Root { kind, conservative, place } => (kind, *conservative, place),
        };
        let k = heap_root_kind(kind, conservative);
        match *place {
            RootPlace::Handle(h) => write!(f, "{k} {h:#x}"),
            RootPlace::Thread { os_tid, register: Some(r), .. } => {
                write!(f, "{k}: thread {os_tid:#x}, register {}", crate::arch::x86_64::dwarf::name(r).map(str::to_string).unwrap_or_else(|| format!("dwarf {r}")))
            }
            RootPlace::Thread { os_tid, slot, .. } => write!(f, "{k}: thread {os_tid:#x}, stack slot {slot:#x}"),
            RootPlace::Queue(s) => write!(f, "{k} (queue slot {s:#x})"),
            RootPlace::SyncBlock(i) => write!(f, "{k} {i}"),
        }
    }
}

/// Who owns a file and its permission bits, for [`dump_not_permitted`].
#[derive(Debug, Clone, Copy)]
pub struct FileOwner {
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
}

/// `knot watch`'s error file for a dump it may not read: whose it is, who knot is, and what to
/// set in the pod so that knot can read such dumps.
pub fn dump_not_permitted(version: &str, err: &std::io::Error, owner: FileOwner, uid: u32, gid: u32) -> String {
    let group_readable = owner.mode & 0o040 != 0;
    let fs_group = if group_readable {
        format!("or add knot to the dump's group: fsGroup (or supplementalGroups) {}", owner.gid)
    } else {
        format!(
            "fsGroup alone does not help while the dump is mode {:04o} (no group read: kernel cores are created so); to share dumps by group, make them group-readable and set fsGroup (or supplementalGroups) to their group",
            owner.mode
        )
    };
    format!(
        "knot {version} cannot read this dump: {err}. It is owned by uid {} (gid {}), mode {:04o}; knot runs as uid {uid} (gid {gid}). Kernel core files are created mode 0600, owned by the uid of the process that crashed: run knot as that uid (securityContext.runAsUser: {}), {fs_group}; or run knot as root with the dump volume mounted read-only. Not tried again until the dump changes.",
        owner.uid, owner.gid, owner.mode, owner.uid
    )
}

#[cfg(test)]
mod runtime_limit_tests {
    use super::*;

    /// A runtime knot recognises but cannot read is named with its version and what is not
    /// read; the runtime's file is the fix only where it would help.
    #[test]
    fn an_unread_runtime_says_its_version_and_offers_its_file_only_where_it_helps() {
        let said = |file_would_help| {
            verdict_limit(&Limit::DotnetRuntime {
                version: "8.0.5".into(),
                why: "runtime reader unsupported: 8.0.5: libcoreclr.so exports no DotNetRuntimeContractDescriptor (runtimes before .NET 9 have no data contract descriptor)".into(),
                path: Some("/usr/share/dotnet/shared/Microsoft.NETCore.App/8.0.5/libcoreclr.so".into()),
                build_id: Some("00bbee38".into()),
                file_would_help,
            })
        };
        let no_help = said(false);
        assert!(no_help.missing.contains("CoreCLR 8.0.5") && no_help.missing.contains("exports no DotNetRuntimeContractDescriptor"), "{}", no_help.missing);
        assert!(no_help.hides.contains("managed frames") && no_help.hides.contains("thread pool"), "{}", no_help.hides);
        assert!(!no_help.fix.contains("--search-dir") && !no_help.fix.contains("--sysroot"), "{}", no_help.fix);
        assert!(no_help.fix.contains("CoreCLR 8.0.5") && no_help.fix.contains("descriptor-8.0.toml"), "{}", no_help.fix);
        let help = said(true);
        assert!(help.fix.starts_with("--search-dir DIR holding this dump's libcoreclr.so (build-id 00bbee38)"), "{}", help.fix);
    }
}

#[cfg(test)]
mod heap_graph_limit_tests {
    use super::*;
    use crate::memory_budget::{LimitSource, MemoryLimit, ScratchVerdict};
    use std::path::PathBuf;

    /// The heap graph left out says why scratch files did not help, and names the flag that
    /// does: `--scratch-dir` when the disk was the reason, `--max-memory` always.
    #[test]
    fn a_heap_graph_left_out_names_the_scratch_dir_and_the_memory_flag() {
        let limit = MemoryLimit { bytes: 1 << 30, source: LimitSource::Cgroup(PathBuf::from("/sys/fs/cgroup/memory.max")) };
        let said = |scratch: ScratchVerdict| verdict_limit(&Limit::HeapGraphMemory { objects: 169_000_000, needed: 6_760_000_000, available: 700 << 20, limit: limit.clone(), scratch });
        let dir = PathBuf::from("/scratch");
        let tmpfs = said(ScratchVerdict::InMemory { dir: dir.clone() });
        assert!(tmpfs.missing.contains("/scratch") && tmpfs.missing.contains("memory-backed") && tmpfs.missing.contains("--scratch-dir"), "{}", tmpfs.missing);
        assert!(tmpfs.fix.starts_with("--scratch-dir DIR") && tmpfs.fix.contains("--max-memory"), "{}", tmpfs.fix);
        let small = said(ScratchVerdict::TooSmall { dir: dir.clone(), free: 1 << 30, needed: 9 << 30 });
        assert!(small.missing.contains("9.0 GiB") && small.missing.contains("1.0 GiB free"), "{}", small.missing);
        let gone = said(ScratchVerdict::Unusable { dir, why: "No such file or directory".into() });
        assert!(gone.missing.contains("cannot be made in /scratch (No such file"), "{}", gone.missing);
        let walk = said(ScratchVerdict::WalkTooLarge);
        assert!(walk.missing.contains("the walk's lists") && walk.fix.starts_with("--max-memory SIZE"), "{} / {}", walk.missing, walk.fix);
        assert_eq!(walk.short, "the heap's retained sizes");
    }
}
