//! CPython's `threading.Lock` and `RLock` (`analyzers/cpython.toml`): a thread waiting for one
//! sleeps in the semaphore the lock object points to. The object itself is found in the
//! waiter's frames (the acquire call keeps it as `self`), known for one by its type's name and
//! its pointer to that very semaphore; an RLock's owner is the thread whose `pthread_self()` it
//! records. A Lock records none: that is said, not guessed.

use super::ThreadInput;
use super::catalog::{Catalog, Layout};
use super::evidence::{FrameHold, PointerPlace};
use super::frame_slots;
use super::thread_ids::ThreadIds;
use crate::process::{Memory, Process, StackWords};

/// Physical frames of a waiter searched for its lock object (the acquire call is a few frames
/// out of the semaphore's wait).
const SEARCH_FRAMES: usize = 12;
/// Stack words searched in one frame at most.
const MAX_FRAME_WORDS: u64 = 512;
/// The longest type name read.
const MAX_TYPE_NAME: usize = 32;

/// Which of CPython's lock types an object is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PythonLockType {
    /// `threading.Lock` (`_thread.lock`): records no owner.
    Lock,
    /// `threading.RLock` (`_thread.RLock`): records its owner and recursion.
    RLock,
}

impl PythonLockType {
    fn of_type_name(name: &str) -> Option<PythonLockType> {
        match name {
            "_thread.lock" => Some(PythonLockType::Lock),
            "_thread.RLock" => Some(PythonLockType::RLock),
            _ => None,
        }
    }

    pub fn type_name(self) -> &'static str {
        match self {
            PythonLockType::Lock => "_thread.lock",
            PythonLockType::RLock => "_thread.RLock",
        }
    }
}

/// The lock object a semaphore belongs to, and where a waiter keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PythonLockObject {
    pub(crate) object: u64,
    pub(crate) lock_type: PythonLockType,
    /// The waiter's frame that keeps the object.
    pub(crate) kept_by: FrameHold,
    /// What the object records: an RLock's owner ident and count, a Lock's `locked` flag.
    pub(crate) state: PythonLockState,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PythonLockState {
    /// `rlock_owner` (the owner's `pthread_self()`, 0 when free), `rlock_count`.
    RLock { owner_ident: u64, count: u64 },
    /// `locked`, as read.
    Lock { locked: Option<u8> },
}

struct Layouts<'c> {
    object: &'c Layout,
    lock: &'c Layout,
    rlock: &'c Layout,
}

impl<'c> Layouts<'c> {
    fn of(catalog: &'c Catalog) -> Option<Layouts<'c>> {
        Some(Layouts { object: catalog.layout("cpython_object")?, lock: catalog.layout("cpython_lock")?, rlock: catalog.layout("cpython_rlock")? })
    }

    /// Whether `object` is a Python Lock or RLock whose semaphore is `sem`: its type's name says
    /// which, and its semaphore pointer is `sem`.
    fn lock_type(&self, memory: &dyn Memory, object: u64, sem: u64) -> Option<PythonLockType> {
        // Both types keep their semaphore at the same offset: checked first, it turns away
        // almost every word cheaply.
        let sem_at = self.lock.offset("lock_lock")?;
        if memory.read_u64(object.checked_add(sem_at)?).ok()? != sem {
            return None;
        }
        let ty = memory.read_u64(object.checked_add(self.object.offset("ob_type")?)?).ok()?;
        let name_ptr = memory.read_u64(ty.checked_add(self.object.offset("tp_name")?)?).ok()?;
        let t = PythonLockType::of_type_name(&memory.read_c_string(name_ptr, MAX_TYPE_NAME).ok()?)?;
        let own_sem = match t {
            PythonLockType::Lock => sem_at,
            PythonLockType::RLock => self.rlock.offset("rlock_lock")?,
        };
        (own_sem == sem_at).then_some(t)
    }

    fn state(&self, memory: &dyn Memory, object: u64, t: PythonLockType) -> Option<PythonLockState> {
        Some(match t {
            PythonLockType::RLock => PythonLockState::RLock {
                owner_ident: memory.read_u64(object.checked_add(self.rlock.offset("rlock_owner")?)?).ok()?,
                count: memory.read_u64(object.checked_add(self.rlock.offset("rlock_count")?)?).ok()?,
            },
            PythonLockType::Lock => {
                let mut b = [0u8; 1];
                let locked = object.checked_add(self.lock.offset("locked")?).and_then(|at| memory.read(at, &mut b).ok()).map(|()| b[0]);
                PythonLockState::Lock { locked }
            }
        })
    }
}

/// The Python lock object whose semaphore `sem` its waiters sleep on, from the innermost frames
/// of the first waiter that keeps it (a register known in a frame, or a stack slot it owns).
pub(crate) fn find(process: &Process, catalog: &Catalog, waiters: &[&ThreadInput<'_>], sem: u64) -> Option<PythonLockObject> {
    let layouts = Layouts::of(catalog)?;
    let memory: &dyn Memory = process;
    for t in waiters {
        for f in frame_slots::frames(t).iter().take(SEARCH_FRAMES) {
            let function = || t.functions.get(f.index).copied().filter(|n| !n.is_empty()).map(str::to_string);
            let mut places: Vec<(PointerPlace, u64)> = f.registers().into_iter().map(|(r, v)| (PointerPlace::Register(r), v)).collect();
            if let (lo, Some(hi)) = f.slots
                && let Some(words) = StackWords::new(process, lo, hi.saturating_sub(lo).min(MAX_FRAME_WORDS * 8))
            {
                places.extend(words.map(|(at, v)| (PointerPlace::Stack(at), v)));
            }
            for (place, v) in places {
                if let Some(lock_type) = layouts.lock_type(memory, v, sem) {
                    let state = layouts.state(memory, v, lock_type)?;
                    let kept_by = FrameHold { tid: t.tid, frame: f.index, function: function(), place, value: v };
                    return Some(PythonLockObject { object: v, lock_type, kept_by, state });
                }
            }
        }
    }
    None
}

/// Who an RLock's recorded owner ident is: the dump's thread whose `pthread_self()` it is.
pub(crate) fn rlock_owner(ids: &ThreadIds, owner_ident: u64) -> Option<u32> {
    ids.by_pthread(owner_ident)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::RangeMemory;

    fn words(w: &[u64]) -> Vec<u8> {
        w.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// An object at 0x1000 (refcount, type 0x2000, semaphore 0x5000, then `rest`) whose type's
    /// name is `type_name`.
    fn object(type_name: &str, rest: &[u64]) -> RangeMemory {
        let mut m = RangeMemory::new();
        m.add(0x1000, words(&[&[1, 0x2000, 0x5000][..], rest].concat()));
        m.add(0x2000, words(&[1, 0, 0, 0x3000]));
        m.add(0x3000, format!("{type_name}\0").into_bytes());
        m
    }

    #[test]
    fn an_object_is_a_python_lock_only_by_its_type_name_and_its_semaphore() {
        let l = Layouts::of(Catalog::builtin().unwrap()).unwrap();
        let m = object("_thread.RLock", &[0x7f00_dead_b000, 2, 0]);
        assert_eq!(l.lock_type(&m, 0x1000, 0x5000), Some(PythonLockType::RLock));
        assert_eq!(l.state(&m, 0x1000, PythonLockType::RLock), Some(PythonLockState::RLock { owner_ident: 0x7f00_dead_b000, count: 2 }));
        assert_eq!(l.lock_type(&m, 0x1000, 0x5008), None, "another semaphore's object");
        assert_eq!(l.lock_type(&m, 0x2000, 0x5000), None, "no object there");
        let m = object("_thread.lock", &[0, 1]);
        assert_eq!(l.lock_type(&m, 0x1000, 0x5000), Some(PythonLockType::Lock));
        assert_eq!(l.state(&m, 0x1000, PythonLockType::Lock), Some(PythonLockState::Lock { locked: Some(1) }));
        let m = object("_thread.lockish", &[0, 1]);
        assert_eq!(l.lock_type(&m, 0x1000, 0x5000), None, "a type of another name");
    }
}
