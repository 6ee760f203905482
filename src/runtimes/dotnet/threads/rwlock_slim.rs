//! `System.Threading.ReaderWriterLockSlim`, read like a pthread rwlock: who holds it and who
//! waits for it, by kind.
//!
//! The lock (CoreLib 10, ReaderWriterLockSlim.cs) counts its holders in `_owners`' low 28 bits
//! (readers and the upgradeable holder) with the flags writer held (0x80000000), writers waiting
//! (0x40000000) and an upgrader waiting to write (0x20000000); it names its writer and its
//! upgradeable holder by managed thread id (`_writeLockOwnerId`, `_upgradeLockOwnerId`, -1 for
//! none). Its readers are not in the lock but in a per-thread chain of `ReaderWriterCount`
//! records (the thread static `t_rwc`): a reader is a thread whose record for this lock's
//! `_lockID` has a read count — known, from the thread's own record.
//!
//! A thread blocked in `TryEnterReadLockCore`, `TryEnterWriteLockCore` or
//! `TryEnterUpgradeableReadLockCore` waits for the lock its frames keep (one object of the
//! lock's type on its stack up to that frame). The lock is two nodes of the wait-for graph:
//! - its holders (`rwlock_slim@…`): a writer, or an upgrader asking to write, waits until every
//!   holder has left — release all;
//! - its door for new readers (`rwlock_slim_readers@…`): a reader (or an upgradeable reader)
//!   is let in only while no writer holds the lock and none waits (either flag bars it), so it
//!   waits for the writer — the one holding it (known), else the ones waiting (inferred from
//!   their frames) — and for the upgradeable holder when it asks to be one.

use super::object_waits::{distinct, ObjectWaits};
use super::stack_objects::Kept;
use crate::hex::Hex;
use crate::waits::{Evidence, Holder, Inference, LockFact, LockKind, LockStorage, ManagedLock, Owner, Release, RwLockSlimNode, RwLockSlimState, UnknownOwner, WaitFacts};

const TYPE: &str = "System.Threading.ReaderWriterLockSlim";
/// `_owners`' flags and count (ReaderWriterLockSlim.cs).
const WRITER_HELD: u32 = 0x8000_0000;
const READER_MASK: u32 = 0x0FFF_FFFF;
/// `ReaderWriterCount` records followed per thread at most (one per lock the thread used).
const MAX_RECORDS: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Enter {
    Read,
    Write,
    Upgradeable,
}

/// The frames a blocked entry waits in, and what each asks for.
const ENTRY_FRAMES: [(&str, Enter); 3] = [
    ("System.Threading.ReaderWriterLockSlim.TryEnterReadLockCore", Enter::Read),
    ("System.Threading.ReaderWriterLockSlim.TryEnterWriteLockCore", Enter::Write),
    ("System.Threading.ReaderWriterLockSlim.TryEnterUpgradeableReadLockCore", Enter::Upgradeable),
];

#[derive(Debug, Clone)]
struct Waiter {
    kind: Enter,
    kept: Kept,
}

pub(crate) fn merge(w: &ObjectWaits<'_, '_, '_>, facts: &mut WaitFacts) {
    let t = w.statics.target();
    let mut waiters: Vec<Waiter> = Vec::new();
    let mut mt = None;
    for (i, f) in w.frames.iter().enumerate() {
        let Some((pos, kind)) = f.frames.iter().enumerate().find_map(|(p, fr)| ENTRY_FRAMES.iter().find(|(n, _)| fr.function == Some(n)).map(|(_, k)| (p, *k))) else { continue };
        if !w.blocked(facts, i) {
            continue;
        }
        let Some(lock_mt) = *mt.get_or_insert_with(|| w.statics.core_lib().and_then(|core| w.statics.class(core, TYPE)).ok()) else { return };
        let found = distinct(&f.objects_up_to(t, pos, lock_mt), |k| k.object);
        match found.as_slice() {
            [one] => waiters.push(Waiter { kind, kept: Kept { frame: f.frames[pos].function.map(str::to_string), ..one.clone() } }),
            [] => w.note(facts, format!("thread {} is blocked entering a ReaderWriterLockSlim, and its frames keep none: the lock is not known", f.tid)),
            several => w.note(facts, format!("thread {} is blocked entering a ReaderWriterLockSlim, and its frames keep {} of them: which one is not known", f.tid, several.len())),
        }
    }
    let Some(Some(lock_mt)) = mt else { return };
    let mut objects: Vec<u64> = waiters.iter().map(|x| x.kept.object).collect();
    objects.sort_unstable();
    objects.dedup();
    for object in objects {
        let mine: Vec<&Waiter> = waiters.iter().filter(|x| x.kept.object == object).collect();
        lock(w, facts, lock_mt, object, &mine);
    }
}

/// The two nodes of the lock at `object`, for its `waiters`.
fn lock(w: &ObjectWaits<'_, '_, '_>, facts: &mut WaitFacts, lock_mt: u64, object: u64, waiters: &[&Waiter]) {
    let s = w.statics;
    let field = |name: &str| s.object_primitive(object, name);
    let (Ok(lock_id), Ok(owners)) = (field("_lockID"), field("_owners")) else {
        w.note(facts, format!("ReaderWriterLockSlim {object:#x}: its fields could not be read"));
        return;
    };
    let owners = owners as u32;
    let id_field = |name: &str| field(name).map(|v| v as u32 as i32).unwrap_or(-1);
    let (write_owner_id, upgrade_owner_id) = (id_field("_writeLockOwnerId"), id_field("_upgradeLockOwnerId"));
    let count = |name: &str| field(name).map(|v| v as u32).unwrap_or(0);
    let counts = [count("_numReadWaiters"), count("_numWriteWaiters"), count("_numUpgradeWaiters"), count("_numWriteUpgradeWaiters")];
    let by_id = |id: i32| u32::try_from(id).ok().and_then(|m| w.tid_of_managed(m));
    let writer = (owners & WRITER_HELD != 0).then(|| by_id(write_owner_id)).flatten();
    let upgradeable = by_id(upgrade_owner_id);
    let (readers, records) = readers(w, lock_mt, lock_id);
    let of = |k: Enter| -> Vec<u32> {
        let mut v: Vec<u32> = waiters.iter().filter(|x| x.kind == k).map(|x| x.kept.tid).collect();
        v.sort_unstable();
        v
    };
    let state = RwLockSlimState {
        node: RwLockSlimNode::Holders,
        owners: Hex(u64::from(owners)),
        holder_count: owners & READER_MASK,
        readers: readers.clone(),
        upgradeable,
        writer,
        read_waiters: of(Enter::Read),
        write_waiters: of(Enter::Write),
        upgradeable_waiters: of(Enter::Upgradeable),
        counts,
    };
    let mut evidence = vec![Evidence::RwLockSlim { address: object, lock_id, owners, write_owner_id, upgrade_owner_id, counts }];
    evidence.extend(records.iter().map(|&(tid, record, n)| Evidence::ReaderCount { thread: w.who(tid), record, read_count: n }));
    let referrers: Vec<_> = w.static_holder(object).into_iter().collect();
    let managed = |node: RwLockSlimNode| ManagedLock {
        type_name: Some(TYPE.into()),
        referrers: referrers.clone(),
        rwlock: Some(RwLockSlimState { node, ..state.clone() }),
        ..ManagedLock::new(LockStorage::RwLockSlim, object)
    };
    let entering = |tids: &[u32]| -> Vec<Evidence> {
        waiters.iter().filter(|x| tids.contains(&x.kept.tid)).map(|x| Evidence::EnteringFrame { thread: w.who(x.kept.tid), frame: x.kept.frame.clone().unwrap_or_default(), slot: x.kept.slot }).collect()
    };

    // A writer (or an upgrader asking to write) waits for every holder to leave.
    let writers = state.write_waiters.clone();
    if !writers.is_empty() {
        let id = format!("rwlock_slim@{object:#x}");
        let mut holders: Vec<Holder> = readers.iter().copied().chain(upgradeable).filter(|h| !writers.contains(h)).map(Holder::known).collect();
        holders.dedup_by_key(|h| h.tid);
        let owner = match (writer, state.holder_count) {
            (Some(tid), _) => Owner::Known { tid },
            (None, 0) => Owner::Unknown { why: UnknownOwner::RwlockBetweenOwners },
            (None, n) => Owner::Readers { count: n, reader_tids: Vec::new(), reader_evidence: Vec::new() },
        };
        let mut l = fact(&id, owner, holders, Release::All, writers.clone(), [evidence.clone(), entering(&writers)].concat(), managed(RwLockSlimNode::Holders));
        l.readers = Some(state.holder_count);
        w.supersede(facts, &writers, &id, &mut l);
        facts.locks.push(l);
    }

    // A reader waits for the writer that holds the lock, else for those waiting for it (they
    // bar new readers); an upgradeable reader for the upgradeable holder too.
    let entrants: Vec<u32> = [state.read_waiters.clone(), state.upgradeable_waiters.clone()].concat();
    if !entrants.is_empty() {
        let id = format!("rwlock_slim_readers@{object:#x}");
        let mut holders: Vec<Holder> = Vec::new();
        if writer.is_none() {
            holders.extend(waiters.iter().filter(|x| x.kind == Enter::Write).map(|x| Holder::inferred(x.kept.tid, Inference::WaitingWriter { frame: x.kept.frame.clone().unwrap_or_default() })));
        }
        if !state.upgradeable_waiters.is_empty()
            && let Some(u) = upgradeable
        {
            holders.push(Holder::known(u));
        }
        let owner = match writer {
            Some(tid) => Owner::Known { tid },
            None if holders.is_empty() => Owner::Unknown { why: UnknownOwner::NotRecorded },
            None => Owner::None,
        };
        let mut sorted = entrants.clone();
        sorted.sort_unstable();
        let mut l = fact(&id, owner, holders, Release::All, sorted.clone(), [evidence, entering(&sorted)].concat(), managed(RwLockSlimNode::NewReaders));
        l.readers = Some(state.holder_count);
        w.supersede(facts, &sorted, &id, &mut l);
        facts.locks.push(l);
    }
}

fn fact(id: &str, owner: Owner, holders: Vec<Holder>, release: Release, waiter_tids: Vec<u32>, evidence: Vec<Evidence>, managed: ManagedLock) -> LockFact {
    LockFact {
        id: id.to_string(),
        kind: LockKind::RwLockSlim,
        label: String::new(),
        address: Some(managed.object),
        name: None,
        owner_tid: owner.tid(),
        owner,
        release: (!holders.is_empty()).then_some(release),
        holders,
        waiter_tids,
        evidence,
        recursion: None,
        readers: None,
        native: None,
        managed: Some(managed),
        signature: None,
    }
}

/// The threads holding the lock `lock_id` for reading (ascending), and each one's record:
/// (tid, record, read count).
fn readers(w: &ObjectWaits<'_, '_, '_>, lock_mt: u64, lock_id: u64) -> (Vec<u32>, Vec<(u32, u64, u32)>) {
    let s = w.statics;
    let t = s.target();
    let mut records = Vec::new();
    for th in w.r.threads.iter().filter(|th| th.os_tid != 0 && th.address != 0 && !th.is_dead()) {
        if !w.frames.iter().any(|f| f.tid == th.os_tid) {
            continue;
        }
        let Ok(slot) = s.thread_static_field(lock_mt, "t_rwc", th.address) else { continue };
        let mut at = t.read_ptr(slot.address, "t_rwc").unwrap_or(0);
        for _ in 0..MAX_RECORDS {
            if at == 0 {
                break;
            }
            if s.object_primitive(at, "lockID").ok() == Some(lock_id) {
                let n = s.object_primitive(at, "readercount").map(|v| v as u32).unwrap_or(0);
                if n as i32 > 0 {
                    records.push((th.os_tid, at, n));
                }
                break;
            }
            at = s.object_field(at, "next").unwrap_or(0);
        }
    }
    records.sort_unstable();
    (records.iter().map(|r| r.0).collect(), records)
}
