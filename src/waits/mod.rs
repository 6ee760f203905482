//! Waits: from thread states and memory to lock facts — who waits on which lock, who holds it,
//! and how that is known. The knowledge of each lock family is data (`analyzers/`); this module
//! is the engine that applies it.

pub(crate) mod catalog;
pub(crate) mod evidence;
mod frame_slots;
mod guards;
pub(crate) mod lock;
mod pi_refusal;
pub(crate) mod python_locks;
mod readers;
pub(crate) mod runtime;
pub(crate) mod state;
pub(crate) mod thread_ids;

pub(crate) use evidence::{Evidence, FieldError, FrameHold, Inference, ManagedWaitKind, NamedThread, PointerPlace, SemaphoreWait, UnknownOwner, WaitRecord};
pub(crate) use lock::{AsyncWaiter, BarrierFacts, LockFact, LockKind, LockStorage, ManagedLock, ManagedTask, Owner, QueuedRelease, Release};
pub(crate) use lock::{MutexConsistency, MutexType, NativeLock, NativeLockType};
pub(crate) use lock::{Holder, PoolItem, PoolState, RwLockSlimNode, RwLockSlimState};
pub(crate) use runtime::{ManagedThreads, RuntimeLocks, RuntimeWaits, WorkerPool};
pub(crate) use state::{IdleRole, Pool, ThreadState};

use crate::arch::Registers;
use crate::diagnostics::Diagnostic;
use crate::process::Process;
use crate::hex::Hex;
use crate::symbols::Symbolizer;
use catalog::{Catalog, Family, Kind};
use thread_ids::ThreadIds;
use std::collections::BTreeMap;

/// How many innermost frames are searched for a lock family's entry function.
const RECOGNITION_DEPTH: usize = 16;

/// One thread, as the wait analysis needs it.
pub(crate) struct ThreadInput<'a> {
    pub(crate) tid: u32,
    pub(crate) registers: &'a Registers,
    pub(crate) cursig: u16,
    /// Function names, innermost first, inlined frames included ("" when unknown).
    pub(crate) functions: Vec<&'a str>,
    /// The frames those names come from (transition records left out), for a runtime that
    /// tells its own threads by module and managed method.
    pub(crate) frames: Vec<&'a crate::threads::FrameReport>,
    /// The unwound stack (each frame's stack pointer), for a runtime that reads what its
    /// frames keep on the stack.
    pub(crate) stack: &'a crate::unwind::Stack,
}

/// What the analysis found for one thread.
#[derive(Debug, Clone)]
pub(crate) struct ThreadWait {
    pub(crate) state: ThreadState,
    /// The lock it is blocked on (an id in `WaitFacts::locks`).
    pub(crate) blocked_on: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct WaitFacts {
    /// In the order of the input threads.
    pub(crate) threads: Vec<ThreadWait>,
    /// Sorted by id.
    pub(crate) locks: Vec<LockFact>,
    pub(crate) diagnostics: Vec<Diagnostic>,
    /// The threads the process numbers otherwise than the dump (a PID namespace of its own,
    /// dumped from the host): (the dump's tid, the process's).
    pub(crate) own_tids: Vec<(u32, u32)>,
}

/// A lock being assembled from its waiters.
struct Pending<'c> {
    family: Option<&'c Family>,
    address: Option<u64>,
    join_target: Option<u32>,
    waiters: Vec<u32>,
    evidence: Vec<Evidence>,
}

pub(crate) fn analyze(process: &Process, symbolizer: &Symbolizer<'_>, threads: &[ThreadInput<'_>]) -> WaitFacts {
    let mut facts = WaitFacts::default();
    let catalog = match Catalog::builtin() {
        Ok(c) => c,
        Err(e) => {
            facts.diagnostics.push(Diagnostic::warning("waits", format!("lock analyzers unavailable: {e}")));
            &EMPTY
        }
    };
    let tls = |tid: u32| process.core.threads.iter().find(|t| t.tid == tid).and_then(|t| t.tls);
    let ids = ThreadIds::read(process, catalog, threads.iter().map(|t| (t.tid, t.registers, tls(t.tid))));
    facts.own_tids = ids.renumbering();
    let mut pending: BTreeMap<String, Pending<'_>> = BTreeMap::new();

    let classified: Vec<_> = threads
        .iter()
        .map(|t| {
            let state = state::resolve_restart(state::classify(t.registers, t.cursig, process), t.registers, &t.functions);
            (state, catalog.recognise(t.functions.iter().copied(), RECOGNITION_DEPTH))
        })
        .collect();
    // Every futex word waited on inside each family's functions: the words of one lock's
    // waiters (a rwlock's writers on one word, its blocked readers on another) locate it together.
    let mut family_words: BTreeMap<*const Family, Vec<u64>> = BTreeMap::new();
    for (state, recognised) in &classified {
        if let (ThreadState::Futex { address, .. }, Some((family, _))) = (state, recognised) {
            family_words.entry(std::ptr::from_ref(*family)).or_default().push(address.0);
        }
    }
    for words in family_words.values_mut() {
        words.sort_unstable();
        words.dedup();
    }

    for (t, (state, recognised)) in threads.iter().zip(classified) {
        let restarted = crate::arch::recorded_syscall(t.registers, process) == Some(t.registers.arch().restart_syscall());
        // A parked thread waits to be unparked: a wait, on no lock.
        if let (ThreadState::Futex { .. }, Some((family, frame))) = (&state, recognised)
            && family.kind == Kind::Park
        {
            let function = t.functions.get(frame).map_or_else(|| family.label.clone(), |f| f.to_string());
            facts.threads.push(ThreadWait { state: ThreadState::Parked { function }, blocked_on: None });
            continue;
        }
        // A thread the kernel refused a priority-inheritance mutex (EDEADLK) sleeps for good on
        // a word of its own stack: it waits for the mutex it was refused, found in its frames.
        let refused = match (&state, recognised) {
            (ThreadState::Futex { address, expected, op, .. }, Some((family, frame)))
                if family.kind == Kind::Mutex && (!readers::is_mutex(family, process, address.0) || pi_refusal::parked(process, t, address.0, *expected, op)) =>
            {
                Some(pi_refusal::find(process, family, t, ids.own(t.tid), frame, address.0))
            }
            _ => None,
        };
        let blocked_on = match (&state, recognised, refused) {
            (ThreadState::Futex { .. }, Some(_), Some(Err(why))) => {
                facts.diagnostics.push(Diagnostic::info("waits", format!("thread {}: {why}", t.tid)));
                None
            }
            (ThreadState::Futex { address, expected, .. }, Some((family, frame)), refused) => {
                let futex = address.0;
                let peers = family_words.get(&std::ptr::from_ref(family)).map_or(&[][..], Vec::as_slice);
                let refusal = refused.and_then(Result::ok);
                let lock_addr = match &refusal {
                    Some(r) => r.mutex,
                    None => locate(family, process, symbolizer, futex, peers),
                };
                let join_target = (family.kind == Kind::Join).then_some(*expected);
                let id = match join_target {
                    Some(tid) => format!("join@{}", match ids.resolve(tid) {
                        thread_ids::Resolved::Thread(t) => t,
                        thread_ids::Resolved::Outside => tid,
                    }),
                    None => format!("{}@{lock_addr:#x}", family.kind.as_str()),
                };
                let entry = pending.entry(id.clone()).or_insert_with(|| Pending {
                    family: Some(family),
                    address: Some(lock_addr),
                    join_target,
                    waiters: Vec::new(),
                    evidence: Vec::new(),
                });
                entry.waiters.push(t.tid);
                entry.evidence.push(Evidence::FutexWait {
                    tid: t.tid,
                    futex,
                    expected: *expected,
                    restarted,
                    function: t.functions.get(frame).map(|f| f.to_string()),
                    frame,
                });
                if let Some(r) = refusal {
                    entry.evidence.push(Evidence::RefusedPiMutex { tid: t.tid, parked_on: futex, mutex: r.mutex, frame: r.frame, place: r.place, value: r.value });
                }
                Some(id)
            }
            (ThreadState::Futex { address, expected, .. }, None, _) => {
                // A futex no analyzer knows: still a wait, on an unnamed word.
                let id = format!("futex@{:#x}", address.0);
                let entry = pending.entry(id.clone()).or_insert_with(|| Pending {
                    family: None,
                    address: Some(address.0),
                    join_target: None,
                    waiters: Vec::new(),
                    evidence: Vec::new(),
                });
                entry.waiters.push(t.tid);
                entry.evidence.push(Evidence::UnrecognisedFutexWait { tid: t.tid, futex: address.0, expected: *expected });
                Some(id)
            }
            (_, Some((family, frame)), _) => {
                facts.diagnostics.push(Diagnostic::info(
                    "waits",
                    format!(
                        "thread {} is inside {} (frame #{frame}) but not waiting on a futex ({}): spinning or about to block",
                        t.tid,
                        family.label,
                        state
                    ),
                ));
                None
            }
            _ => None,
        };
        facts.threads.push(ThreadWait { state, blocked_on });
    }

    let mut budget = guards::TOTAL_BUDGET_WORDS;
    let holds = Holds { catalog, threads };
    for (id, p) in pending {
        facts.locks.push(finish(process, symbolizer, &ids, &holds, &mut budget, id, p));
    }
    facts
}

/// Each thread's state, without lock analysis.
pub(crate) fn states_only(process: &Process, threads: &[ThreadInput<'_>]) -> WaitFacts {
    let threads = threads
        .iter()
        .map(|t| ThreadWait { state: state::resolve_restart(state::classify(t.registers, t.cursig, process), t.registers, &t.functions), blocked_on: None })
        .collect();
    WaitFacts { threads, ..WaitFacts::default() }
}

static EMPTY: Catalog = Catalog { families: Vec::new(), layouts: BTreeMap::new() };

/// The lock's address from the futex word a waiter sleeps on. Of the family's candidate offsets,
/// one that also explains another waited-on word of the family (`peers`: a rwlock's queued
/// writer sleeps 8 bytes in, its blocked readers on the first word) is that one lock, when it
/// can be one (named or plausible); else a candidate that starts a data symbol (a named global
/// lock) wins; else the first the layout finds plausible; else the first.
fn locate(family: &Family, process: &Process, symbolizer: &Symbolizer<'_>, futex: u64, peers: &[u64]) -> u64 {
    let candidates: Vec<u64> = family.futex_offsets.iter().filter_map(|&off| futex.checked_sub(off)).collect();
    if candidates.len() == 1 {
        return candidates[0];
    }
    let is_named = |a: u64| symbolizer.data_symbol(a).is_some_and(|(_, off)| off == 0);
    // How many other waited-on words fall at one of the family's futex offsets from `a`.
    let explains = |a: u64| peers.iter().filter(|&&w| w != futex && w.checked_sub(a).is_some_and(|off| family.futex_offsets.contains(&off))).count();
    let shared = candidates
        .iter()
        .copied()
        .map(|a| (explains(a), a))
        .filter(|&(n, a)| n > 0 && (is_named(a) || readers::plausible(family, process, a)))
        // The most explained; of equals, the earliest candidate (catalogue order).
        .fold(None, |best: Option<(usize, u64)>, (n, a)| match best {
            Some((m, _)) if m >= n => best,
            _ => Some((n, a)),
        })
        .map(|(_, a)| a);
    let named = candidates.iter().copied().find(|&a| is_named(a));
    shared
        .or(named)
        .or_else(|| candidates.iter().copied().find(|&a| readers::plausible(family, process, a)))
        .or_else(|| candidates.first().copied())
        .unwrap_or(futex)
}

/// What the search for a lock's unrecorded holders reads: every thread's frames, and the lock
/// families whose own frames hold the lock they take (not one they hold).
struct Holds<'a, 'c> {
    catalog: &'c Catalog,
    threads: &'a [ThreadInput<'a>],
}

fn finish(
    process: &Process,
    symbolizer: &Symbolizer<'_>,
    ids: &ThreadIds,
    holds: &Holds<'_, '_>,
    budget: &mut u64,
    id: String,
    mut p: Pending<'_>,
) -> LockFact {
    p.waiters.sort_unstable();
    p.waiters.dedup();
    let addr = p.address.unwrap_or(0);
    let name = p.address.filter(|_| p.join_target.is_none()).and_then(|a| symbolizer.data_symbol(a)).map(|(n, off)| if off == 0 { n } else { format!("{n}+{off:#x}") });
    let (kind, what, owner, recursion, readers) = match p.family {
        Some(family) if family.kind == Kind::PythonLock => {
            let (what, owner, recursion) = python_lock(process, holds, ids, addr, &p.waiters, &mut p.evidence);
            (family.kind.lock_kind(), what.unwrap_or_else(|| NativeLockType::Family(family.label.clone())), owner, recursion, None)
        }
        Some(family) => {
            let r = readers::read(family, process, addr, p.join_target, ids);
            p.evidence.push(r.evidence);
            let mut owner = r.owner;
            let object = guards::LockObject::of(symbolizer, addr, family.layout.size());
            if family.infer_owner && matches!(owner, Owner::Unknown { .. }) {
                owner = infer_owner(process, holds, &object, &p.waiters, budget, &mut p.evidence);
            }
            if let Owner::Readers { count, .. } = owner {
                owner = infer_readers(process, holds, &object, count, &p.waiters, budget);
            }
            (family.kind.lock_kind(), r.what.unwrap_or_else(|| NativeLockType::Family(family.label.clone())), owner, r.recursion, r.readers)
        }
        None => (
            LockKind::Futex,
            NativeLockType::UnrecognisedFutex,
            Owner::Unknown { why: UnknownOwner::NoLayout },
            None,
            None,
        ),
    };
    let exited_owner = match owner {
        Owner::Exited { tid } => Some(tid),
        _ => None,
    };
    LockFact {
        id,
        kind,
        label: String::new(),
        address: p.address.map(Hex),
        name,
        owner_tid: owner.tid(),
        holders: vec![],
        release: None,
        owner,
        waiter_tids: p.waiters,
        evidence: p.evidence,
        recursion,
        readers,
        native: Some(NativeLock { what, exited_owner }),
        managed: None,
        signature: None,
    }
}

/// A CPython lock over the semaphore at `sem`: its object, found in its waiters' frames, and the
/// owner it records (an RLock's), or why none is said.
fn python_lock(process: &Process, holds: &Holds<'_, '_>, ids: &ThreadIds, sem: u64, waiters: &[u32], evidence: &mut Vec<Evidence>) -> (Option<NativeLockType>, Owner, Option<u32>) {
    use python_locks::{PythonLockState, PythonLockType};
    let waiting: Vec<&ThreadInput<'_>> = holds.threads.iter().filter(|t| waiters.contains(&t.tid)).collect();
    let Some(found) = python_locks::find(process, holds.catalog, &waiting, sem) else {
        return (None, Owner::Unknown { why: UnknownOwner::PythonObjectNotFound { semaphore: sem } }, None);
    };
    let (owner_ident, count, locked) = match found.state {
        PythonLockState::RLock { owner_ident, count } => (Some(owner_ident), Some(count), None),
        PythonLockState::Lock { locked } => (None, None, locked),
    };
    evidence.push(Evidence::PythonLock { object: found.object, lock_type: found.lock_type, semaphore: sem, kept_by: found.kept_by.clone(), owner_ident, count, locked });
    let (owner, recursion) = match (found.lock_type, owner_ident) {
        (PythonLockType::Lock, _) => (Owner::Unknown { why: UnknownOwner::PythonLockNoOwner }, None),
        (PythonLockType::RLock, Some(0) | None) => (Owner::Unknown { why: UnknownOwner::PythonRLockFree }, None),
        (PythonLockType::RLock, Some(ident)) => match python_locks::rlock_owner(ids, ident) {
            Some(tid) => (Owner::Known { tid }, count.map(|c| u32::try_from(c).unwrap_or(u32::MAX))),
            None => (Owner::Unknown { why: UnknownOwner::PythonOwnerNotAThread { ident } }, None),
        },
    };
    (Some(NativeLockType::PythonLock { lock_type: found.lock_type, object: found.object }), owner, recursion)
}

/// A read-held lock's candidate readers: threads not waiting for it one of whose frames keeps a
/// pointer into the lock's own object (a reader keeps the lock, or the structure it is part of,
/// at hand while it reads). Inferred, each with its frame and slot; the count stays the lock's own.
fn infer_readers(process: &Process, holds: &Holds<'_, '_>, object: &guards::LockObject, count: u32, waiters: &[u32], budget: &mut u64) -> Owner {
    let found = guards::frames_pointing_into(process, holds.catalog, holds.threads, object, waiters, budget).unwrap_or_default();
    Owner::Readers { count, reader_tids: found.iter().map(|f| f.tid).collect(), reader_evidence: found }
}

/// A lock that records no owner (Rust std's): the only thread, besides its waiters, one of whose
/// frames keeps a pointer into the lock's own object — where its guard is — is its inferred owner.
fn infer_owner(process: &Process, holds: &Holds<'_, '_>, object: &guards::LockObject, waiters: &[u32], budget: &mut u64, evidence: &mut Vec<Evidence>) -> Owner {
    let Some(found) = guards::frames_pointing_into(process, holds.catalog, holds.threads, object, waiters, budget) else {
        return Owner::Unknown { why: UnknownOwner::SearchBudgetSpent };
    };
    evidence.extend(found.iter().cloned().map(Evidence::PointerInFrame));
    match <[FrameHold; 1]>::try_from(found) {
        Ok([one]) => Owner::Inferred { tid: one.tid, evidence: Inference::OnlyFrameHolding(one) },
        Err(found) if found.is_empty() => Owner::Unknown { why: UnknownOwner::NoStackPointsIn },
        Err(found) => Owner::Unknown { why: UnknownOwner::SeveralStacksPointIn { tids: found.iter().map(|h| h.tid).collect() } },
    }
}
