//! Reading a lock's owner out of dump memory, one reader per kind, using the layouts from
//! `analyzers/`. Unreadable memory gives `Owner::Unknown`, never a guess.

use super::catalog::{Family, Kind, Layout};
use super::evidence::{Evidence, FieldError, UnknownOwner};
use super::lock::{MutexConsistency, MutexFacts, MutexType, NativeLockType, Owner};
use super::thread_ids::{Resolved, ThreadIds};
use crate::process::Memory;

const FUTEX_TID_MASK: u32 = 0x3fff_ffff;
const FUTEX_OWNER_DIED: u32 = 0x4000_0000;
const PTHREAD_MUTEX_INCONSISTENT: i32 = 0x7fff_ffff;
const PTHREAD_MUTEX_NOTRECOVERABLE: i32 = 0x7fff_fffe;
const MUTEX_ROBUST: i32 = 16;
const MUTEX_PRIO_INHERIT: i32 = 32;
const MUTEX_PRIO_PROTECT: i32 = 64;
/// glibc's `PTHREAD_MUTEX_PSHARED_BIT`.
const MUTEX_PSHARED: i32 = 128;
/// Every bit of `__kind` glibc sets: the type (3), robust, PI, PP, pshared, and the elision
/// flags (256, 512).
const MUTEX_KIND_BITS: i32 = 0x3ff;
const RWLOCK_WRLOCKED: u32 = 2;
const RWLOCK_READER_SHIFT: u32 = 3;
const COND_WREFS_SHIFT: u32 = 3;

/// What a reader found.
pub(crate) struct Reading {
    pub(crate) owner: Owner,
    /// What the lock is, when the reader could tell.
    pub(crate) what: Option<NativeLockType>,
    pub(crate) recursion: Option<u32>,
    pub(crate) readers: Option<u32>,
    pub(crate) evidence: Evidence,
}

fn field_u32(memory: &dyn Memory, base: u64, layout: &Layout, field: &'static str) -> Result<u32, FieldError> {
    let off = layout.offset(field).ok_or_else(|| FieldError::NoField { layout: layout.name.clone(), field })?;
    memory.read_u32(base.wrapping_add(off)).map_err(|error| FieldError::Unreadable { layout: layout.name.clone(), error })
}

/// The owner a lock records as `tid`: a thread of the dump, or, when none is, a thread of another
/// process (a process-shared lock) or one that exited.
fn owner_of(tid: u32, threads: &ThreadIds, process_shared: bool) -> Owner {
    match threads.resolve(tid) {
        Resolved::Thread(tid) => Owner::Known { tid },
        Resolved::Outside if process_shared => Owner::OtherProcess { tid },
        Resolved::Outside => Owner::Exited { tid },
    }
}

/// Whether `addr` holds a pthread mutex's words: a `__kind` glibc can have written (its type
/// and flags only). A word that is no mutex (a thread parked on a word of its own stack) is not
/// read as one.
pub(crate) fn is_mutex(family: &Family, memory: &dyn Memory, addr: u64) -> bool {
    family.kind == Kind::Mutex && field_u32(memory, addr, &family.layout, "kind").is_ok_and(|k| (k as i32) & !MUTEX_KIND_BITS == 0)
}

/// A priority-inheritance mutex at `addr` whose futex word names an owner: that tid.
pub(crate) fn pi_mutex_owner(family: &Family, memory: &dyn Memory, addr: u64) -> Option<u32> {
    let l = &family.layout;
    let kind = field_u32(memory, addr, l, "kind").ok()? as i32;
    let lock = field_u32(memory, addr, l, "lock").ok()?;
    (family.kind == Kind::Mutex && kind & !MUTEX_KIND_BITS == 0 && kind & MUTEX_PRIO_INHERIT != 0 && lock & FUTEX_TID_MASK != 0).then_some(lock & FUTEX_TID_MASK)
}

/// Whether `addr` can be a lock of this family with a thread waiting on it: its fields hold
/// values such a lock can have, and it is held (someone waits).
pub(crate) fn plausible(family: &Family, memory: &dyn Memory, addr: u64) -> bool {
    let l = &family.layout;
    let f = |name: &'static str| field_u32(memory, addr, l, name);
    match family.kind {
        Kind::Rwlock => match (f("readers"), f("shared"), f("flags")) {
            (Ok(r), Ok(shared), Ok(flags)) => shared <= 1 && flags <= 2 && (r >> RWLOCK_READER_SHIFT > 0 || r & RWLOCK_WRLOCKED != 0),
            _ => false,
        },
        Kind::Cond => f("wrefs").is_ok_and(|w| w >> COND_WREFS_SHIFT >= 1),
        _ => true,
    }
}

pub(crate) fn read(family: &Family, memory: &dyn Memory, addr: u64, join_target: Option<u32>, threads: &ThreadIds) -> Reading {
    let unknown = |why: UnknownOwner| Reading { owner: Owner::Unknown { why: why.clone() }, what: None, recursion: None, readers: None, evidence: Evidence::Unread(why) };
    let l = &family.layout;
    match family.kind {
        Kind::Mutex => {
            let (lock, owner, count, kind) = match (
                field_u32(memory, addr, l, "lock"),
                field_u32(memory, addr, l, "owner"),
                field_u32(memory, addr, l, "count"),
                field_u32(memory, addr, l, "kind"),
            ) {
                (Ok(a), Ok(b), Ok(c), Ok(d)) => (a, b as i32, c, d as i32),
                (Err(e), ..) | (_, Err(e), ..) | (_, _, Err(e), _) | (.., Err(e)) => return unknown(UnknownOwner::Unreadable(e)),
            };
            let base = match kind & 3 {
                0 => MutexType::Normal,
                1 => MutexType::Recursive,
                2 => MutexType::ErrorCheck,
                _ => MutexType::Adaptive,
            };
            let evidence = Evidence::Mutex { address: addr, lock, owner, count, kind };
            // Robust and PI mutexes keep the owner's tid in the futex word itself.
            let in_word = kind & (MUTEX_ROBUST | MUTEX_PRIO_INHERIT) != 0;
            let tid = if in_word { lock & FUTEX_TID_MASK } else { owner.max(0) as u32 };
            let process_shared = kind & MUTEX_PSHARED != 0;
            let mut owner_fact = match tid {
                0 => Owner::Unknown { why: UnknownOwner::MutexBetweenOwners { lock, owner } },
                t => owner_of(t, threads, process_shared),
            };
            let owner_died = in_word && lock & FUTEX_OWNER_DIED != 0;
            if owner_died && tid == 0 {
                owner_fact = Owner::Unknown { why: UnknownOwner::RobustOwnerDied };
            }
            let consistency = match owner {
                PTHREAD_MUTEX_INCONSISTENT => MutexConsistency::Inconsistent,
                PTHREAD_MUTEX_NOTRECOVERABLE => MutexConsistency::NotRecoverable,
                _ => MutexConsistency::Consistent,
            };
            let what = NativeLockType::PthreadMutex(MutexFacts {
                base,
                robust: kind & MUTEX_ROBUST != 0,
                priority_inheritance: kind & MUTEX_PRIO_INHERIT != 0,
                priority_protect: kind & MUTEX_PRIO_PROTECT != 0,
                owner_died,
                process_shared,
                consistency,
            });
            let recursion = (kind & 3 == 1 && tid != 0).then_some(count);
            Reading { owner: owner_fact, what: Some(what), recursion, readers: None, evidence }
        }
        Kind::Rwlock => {
            let (readers, writer) = match (field_u32(memory, addr, l, "readers"), field_u32(memory, addr, l, "cur_writer")) {
                (Ok(r), Ok(w)) => (r, w as i32),
                (Err(e), _) | (_, Err(e)) => return unknown(UnknownOwner::Unreadable(e)),
            };
            let process_shared = field_u32(memory, addr, l, "shared").is_ok_and(|s| s != 0);
            let count = readers >> RWLOCK_READER_SHIFT;
            let evidence = Evidence::Rwlock { address: addr, readers_word: readers, readers: count, writer };
            let owner = if readers & RWLOCK_WRLOCKED != 0 && writer > 0 {
                owner_of(writer as u32, threads, process_shared)
            } else if count > 0 {
                Owner::Readers { count, reader_tids: Vec::new(), reader_evidence: Vec::new() }
            } else {
                Owner::Unknown { why: UnknownOwner::RwlockBetweenOwners }
            };
            Reading { owner, what: Some(NativeLockType::PthreadRwlock), recursion: None, readers: Some(count), evidence }
        }
        Kind::Cond => {
            let wrefs = field_u32(memory, addr, l, "wrefs").unwrap_or(0);
            Reading {
                owner: Owner::None,
                what: Some(NativeLockType::PthreadCond),
                recursion: None,
                readers: None,
                evidence: Evidence::Cond { address: addr, wrefs, waiters: wrefs >> COND_WREFS_SHIFT },
            }
        }
        // A CPython lock is read by `waits::python_lock`; its word alone is a semaphore's.
        Kind::Sem | Kind::PythonLock => {
            let value = field_u32(memory, addr, l, "value");
            let waiters = field_u32(memory, addr, l, "nwaiters");
            Reading {
                owner: Owner::None,
                what: Some(NativeLockType::PosixSemaphore),
                recursion: None,
                readers: None,
                evidence: Evidence::Sem { address: addr, value, waiters },
            }
        }
        Kind::Barrier => {
            let (arrived, count) = match (field_u32(memory, addr, l, "in"), field_u32(memory, addr, l, "current_round"), field_u32(memory, addr, l, "count")) {
                (Ok(i), Ok(round), Ok(count)) => (i.wrapping_sub(round), count),
                (Err(e), ..) | (_, Err(e), _) | (.., Err(e)) => return unknown(UnknownOwner::Unreadable(e)),
            };
            Reading {
                owner: Owner::None,
                what: Some(NativeLockType::PthreadBarrier { arrived, count }),
                recursion: None,
                readers: None,
                evidence: Evidence::Barrier { address: addr, arrived, count },
            }
        }
        Kind::Join => match join_target {
            Some(tid) => Reading {
                owner: owner_of(tid, threads, false),
                what: Some(NativeLockType::PthreadJoin),
                recursion: None,
                readers: None,
                evidence: Evidence::Join { address: addr, tid },
            },
            None => unknown(UnknownOwner::JoinWordUnreadable),
        },
        Kind::FutexWord | Kind::Park => {
            let evidence = Evidence::FutexWord { address: addr, value: memory.read_u32(addr) };
            Reading { owner: Owner::Unknown { why: UnknownOwner::NotRecorded }, what: None, recursion: None, readers: None, evidence }
        }
    }
}
