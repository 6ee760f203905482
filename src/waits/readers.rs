//! Reading a lock's owner out of dump memory, one reader per kind, using the layouts from
//! `analyzers/`. Unreadable memory gives `Owner::Unknown`, never a guess.

use super::catalog::{Family, Kind, Layout};
use super::lock::Owner;
use crate::process::Memory;

const FUTEX_TID_MASK: u32 = 0x3fff_ffff;
const FUTEX_OWNER_DIED: u32 = 0x4000_0000;
const PTHREAD_MUTEX_INCONSISTENT: i32 = 0x7fff_ffff;
const PTHREAD_MUTEX_NOTRECOVERABLE: i32 = 0x7fff_fffe;
const MUTEX_ROBUST: i32 = 16;
const MUTEX_PRIO_INHERIT: i32 = 32;
const MUTEX_PRIO_PROTECT: i32 = 64;
const RWLOCK_WRLOCKED: u32 = 2;
const RWLOCK_READER_SHIFT: u32 = 3;
const COND_WREFS_SHIFT: u32 = 3;

/// What a reader found.
pub(crate) struct Reading {
    pub(crate) owner: Owner,
    pub(crate) label: Option<String>,
    pub(crate) recursion: Option<u32>,
    pub(crate) readers: Option<u32>,
    pub(crate) evidence: String,
}

fn field_u32(memory: &dyn Memory, base: u64, layout: &Layout, field: &str) -> Result<u32, String> {
    let off = layout.offset(field).ok_or_else(|| format!("layout {} has no field {field}", layout.name))?;
    memory.read_u32(base.wrapping_add(off)).map_err(|e| format!("{} not readable: {e}", layout.name))
}

fn owner_of(tid: u32, threads: &[u32]) -> Owner {
    if threads.contains(&tid) { Owner::Known { tid } } else { Owner::Exited { tid } }
}

/// Whether `addr` can be a lock of this family with a thread waiting on it: its fields hold
/// values such a lock can have, and it is held (someone waits).
pub(crate) fn plausible(family: &Family, memory: &dyn Memory, addr: u64) -> bool {
    let l = &family.layout;
    let f = |name: &str| field_u32(memory, addr, l, name);
    match family.kind {
        Kind::Rwlock => match (f("readers"), f("shared"), f("flags")) {
            (Ok(r), Ok(shared), Ok(flags)) => shared <= 1 && flags <= 2 && (r >> RWLOCK_READER_SHIFT > 0 || r & RWLOCK_WRLOCKED != 0),
            _ => false,
        },
        Kind::Cond => f("wrefs").is_ok_and(|w| w >> COND_WREFS_SHIFT >= 1),
        _ => true,
    }
}

pub(crate) fn read(family: &Family, memory: &dyn Memory, addr: u64, join_target: Option<u32>, threads: &[u32]) -> Reading {
    let unknown = |why: String| Reading { owner: Owner::Unknown { why: why.clone() }, label: None, recursion: None, readers: None, evidence: why };
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
                (Err(e), ..) | (_, Err(e), ..) | (_, _, Err(e), _) | (.., Err(e)) => return unknown(e),
            };
            let base = match kind & 3 {
                0 => "normal",
                1 => "recursive",
                2 => "errorcheck",
                _ => "adaptive",
            };
            let mut label = format!("pthread mutex ({base}");
            if kind & MUTEX_ROBUST != 0 {
                label.push_str(", robust");
            }
            if kind & MUTEX_PRIO_INHERIT != 0 {
                label.push_str(", priority-inheritance");
            }
            if kind & MUTEX_PRIO_PROTECT != 0 {
                label.push_str(", priority-protect");
            }
            label.push(')');
            let evidence = format!("pthread_mutex_t at {addr:#x}: __lock={lock:#x} __owner={owner} __count={count} __kind={kind:#x}");
            // Robust and PI mutexes keep the owner's tid in the futex word itself.
            let in_word = kind & (MUTEX_ROBUST | MUTEX_PRIO_INHERIT) != 0;
            let tid = if in_word { lock & FUTEX_TID_MASK } else { owner.max(0) as u32 };
            let mut owner_fact = match tid {
                0 => Owner::Unknown { why: format!("the mutex holds no owner (__lock={lock:#x}, __owner={owner}): it is being released or acquired") },
                t => owner_of(t, threads),
            };
            if in_word && lock & FUTEX_OWNER_DIED != 0 {
                label.push_str(", owner died");
                if tid == 0 {
                    owner_fact = Owner::Unknown { why: "the robust mutex's owner died; the next locker will get EOWNERDEAD".into() };
                }
            }
            if owner == PTHREAD_MUTEX_INCONSISTENT {
                label.push_str(", inconsistent: a previous owner died and the holder has not called pthread_mutex_consistent");
            } else if owner == PTHREAD_MUTEX_NOTRECOVERABLE {
                label.push_str(", not recoverable");
            }
            let recursion = (kind & 3 == 1 && tid != 0).then_some(count);
            Reading { owner: owner_fact, label: Some(label), recursion, readers: None, evidence }
        }
        Kind::Rwlock => {
            let (readers, writer) = match (field_u32(memory, addr, l, "readers"), field_u32(memory, addr, l, "cur_writer")) {
                (Ok(r), Ok(w)) => (r, w as i32),
                (Err(e), _) | (_, Err(e)) => return unknown(e),
            };
            let count = readers >> RWLOCK_READER_SHIFT;
            let evidence = format!("pthread_rwlock_t at {addr:#x}: __readers={readers:#x} ({count} readers) __cur_writer={writer}");
            let owner = if readers & RWLOCK_WRLOCKED != 0 && writer > 0 {
                owner_of(writer as u32, threads)
            } else if count > 0 {
                Owner::Readers { count, reader_tids: Vec::new(), reader_evidence: Vec::new() }
            } else {
                Owner::Unknown { why: "the rwlock is neither write-locked nor read-locked: it is changing hands".into() }
            };
            Reading { owner, label: Some("pthread rwlock".into()), recursion: None, readers: Some(count), evidence }
        }
        Kind::Cond => {
            let wrefs = field_u32(memory, addr, l, "wrefs").unwrap_or(0);
            Reading {
                owner: Owner::None,
                label: Some("pthread condition variable".into()),
                recursion: None,
                readers: None,
                evidence: format!("pthread_cond_t at {addr:#x}: __wrefs={wrefs:#x} ({} waiters registered)", wrefs >> COND_WREFS_SHIFT),
            }
        }
        Kind::Sem => {
            let value = field_u32(memory, addr, l, "value").map(|v| v.to_string()).unwrap_or_else(|e| e);
            let waiters = field_u32(memory, addr, l, "nwaiters").map(|v| v.to_string()).unwrap_or_else(|e| e);
            Reading {
                owner: Owner::None,
                label: Some("POSIX semaphore".into()),
                recursion: None,
                readers: None,
                evidence: format!("sem_t at {addr:#x}: value={value} nwaiters={waiters}"),
            }
        }
        Kind::Join => match join_target {
            Some(tid) => Reading {
                owner: owner_of(tid, threads),
                label: Some("pthread_join".into()),
                recursion: None,
                readers: None,
                evidence: format!("pthread_join sleeps on the joined thread's tid word at {addr:#x}, which holds {tid}"),
            },
            None => unknown("the joined thread's tid word is not readable".into()),
        },
        Kind::FutexWord => {
            let word = memory.read_u32(addr);
            let evidence = match word {
                Ok(w) => format!("futex word at {addr:#x} = {w:#x}; this lock type records no owner"),
                Err(e) => format!("futex word at {addr:#x} not readable: {e}"),
            };
            Reading { owner: Owner::Unknown { why: "this lock type records no owner".into() }, label: None, recursion: None, readers: None, evidence }
        }
    }
}
