//! Lock facts: what knot established about one lock, and how sure it is of the owner.

use crate::report::Hex;
use schemars::JsonSchema;
use serde::Serialize;

/// Who holds a lock, and how that is known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(tag = "certainty", rename_all = "snake_case")]
pub enum Owner {
    /// The lock records its owner (a pthread mutex's `__owner`, a PI futex word's tid, the
    /// thread a join waits for).
    Known { tid: u32 },
    /// The lock records no owner; this thread is the only plausible one, for the reason given.
    Inferred { tid: u32, evidence: String },
    /// The lock names an owner that is not among the dump's threads: it exited holding it.
    Exited { tid: u32 },
    /// Held for reading by this many threads; readers are not recorded.
    Readers { count: u32 },
    /// A lock with no owner by nature (condition variable, semaphore).
    None,
    /// Not knowable from the dump, for the reason given.
    Unknown { why: String },
}

impl Owner {
    /// The owner thread when known or inferred.
    pub fn tid(&self) -> Option<u32> {
        match *self {
            Owner::Known { tid } | Owner::Inferred { tid, .. } => Some(tid),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LockFact {
    /// Stable within a report: `mutex@0x…`, `rwlock@0x…`, `join@<tid>`.
    pub id: String,
    /// mutex, rwlock, cond, sem, join or futex.
    pub kind: String,
    /// What the lock is, for people: `pthread mutex (recursive)`, `Rust std::sync::Mutex`.
    pub label: String,
    pub address: Option<Hex>,
    /// The data symbol at the lock's address (`lock_a`), when the lock is a named global.
    pub name: Option<String>,
    pub owner: Owner,
    /// The owner's tid when known or inferred (null otherwise); see `owner.certainty`.
    pub owner_tid: Option<u32>,
    /// Threads blocked acquiring (or waiting on) it, ascending.
    pub waiter_tids: Vec<u32>,
    /// The memory and frames the facts come from.
    pub evidence: Vec<String>,
    /// How many times the owner holds it (recursive mutexes).
    pub recursion: Option<u32>,
    /// Readers holding it (rwlocks).
    pub readers: Option<u32>,
    /// For a .NET lock (kind monitor, lock, monitor_wait or task): the object, its type and SOS's
    /// syncblk columns.
    pub managed: Option<super::dotnet::ManagedLock>,
}

impl LockFact {
    /// `lock_a` (mutex@0x…) for people.
    pub fn display_name(&self) -> String {
        if let Some(m) = &self.managed {
            let ty = m.type_name.as_deref().unwrap_or("an object");
            let name = match self.kind.as_str() {
                "lock" => format!("Lock {ty} at {}", m.object),
                "monitor_wait" => format!("Monitor.Wait on {ty} at {}", m.object),
                "task" => match &m.task {
                    Some(task) => format!("task {ty} at {} (status: {})", m.object, task.status),
                    None => format!("task {ty} at {}", m.object),
                },
                _ => format!("monitor on {ty} at {}", m.object),
            };
            // Named by the object that holds it in a field: `(LifetimeScope._synchRoot, Tag
            // "root")`. An array slot (a static field's storage, a collection) names nothing.
            return match m.referrers.first().filter(|r| matches!(self.kind.as_str(), "monitor" | "lock" | "monitor_wait") && !r.field.starts_with('[')) {
                Some(r) => format!("{name} ({})", r.label()),
                None => name,
            };
        }
        match (&self.name, self.address) {
            (_, _) if self.kind == "join" => format!("the exit of thread {}", self.owner_tid.map_or("?".to_string(), |t| t.to_string())),
            (Some(n), _) => n.clone(),
            (None, Some(a)) => format!("{} at {a}", self.kind),
            (None, None) => self.id.clone(),
        }
    }
}
