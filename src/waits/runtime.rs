//! What the wait engine asks of a managed runtime: its own locks and waits (which the native
//! reading cannot see: a managed thread blocked on a Monitor sleeps natively on the runtime's
//! private event), merged into the same facts so one wait-for graph holds both. A runtime
//! reader implements [`RuntimeLocks`]; the engine knows no runtime.

use super::{ThreadInput, WaitFacts};
use std::collections::BTreeMap;

pub(crate) trait RuntimeLocks {
    /// Reads the runtime's locks and waits and merges them into `facts`, whose threads are
    /// `threads`, in order. A managed wait supersedes the native wait that implements it.
    fn merge_locks(&self, threads: &[ThreadInput<'_>], facts: &mut WaitFacts) -> RuntimeWaits;
}

/// What the runtime adds about threads, beside the locks it merged.
#[derive(Debug, Clone, Default)]
pub(crate) struct RuntimeWaits {
    pub(crate) threads: ManagedThreads,
    /// The runtime's pool of worker threads, when it has one.
    pub(crate) worker_pool: Option<WorkerPool>,
}

/// Per managed thread, what the report shows beside the native thread.
#[derive(Debug, Clone, Default)]
pub(crate) struct ManagedThreads {
    /// OS tid → managed thread name.
    pub(crate) names: BTreeMap<u32, String>,
    /// OS tid → managed thread id.
    pub(crate) ids: BTreeMap<u32, u32>,
    /// OS tid → what the runtime marks the thread as (its finalizer, a pool worker).
    pub(crate) marks: BTreeMap<u32, Vec<crate::roles::RuntimeMark>>,
}

/// A pool of worker threads that run queued work items (the .NET thread pool).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct WorkerPool {
    /// Every live worker's OS tid.
    pub(crate) workers: Vec<u32>,
    /// Workers blocked inside a work item on a managed wait.
    pub(crate) blocked: Vec<u32>,
    /// Work items waiting in the pool's queues, when the runtime could read them.
    pub(crate) queued: Option<u32>,
    /// The workers that exist and the most the pool may have, when the runtime could read its
    /// counters (.NET: SOS `threadpool`'s Total and Max Limit).
    pub(crate) existing: Option<u32>,
    pub(crate) max: Option<u32>,
    /// Workers waiting for work (SOS `threadpool`'s Idle), when the counters were read.
    pub(crate) idle: Option<u32>,
}

impl WorkerPool {
    /// Every worker is blocked inside a work item: no worker is left to run queued work.
    pub(crate) fn exhausted(&self) -> bool {
        !self.workers.is_empty() && self.workers.iter().all(|t| self.blocked.contains(t))
    }

    /// Work items wait in the queues behind workers blocked inside work items: every worker,
    /// or — while the pool injects workers, each soon blocked too — most of them with none idle
    /// (the others run a work item, or spin before they block).
    pub(crate) fn starved_of_workers(&self) -> bool {
        let most = self.idle == Some(0) && self.blocked.len() * 2 > self.workers.len();
        self.queued.is_some_and(|q| q > 0) && (self.exhausted() || most)
    }

    /// The pool cannot grow: as many workers exist as it may have. Unknown counters are not
    /// at the maximum (a cycle through the pool is then starvation, not a deadlock).
    pub(crate) fn at_max(&self) -> bool {
        matches!((self.existing, self.max), (Some(e), Some(m)) if m > 0 && e >= m)
    }
}

#[cfg(test)]
mod tests {
    use super::WorkerPool;

    fn pool(workers: u32, blocked: u32, idle: Option<u32>, queued: u32, max: u32) -> WorkerPool {
        WorkerPool { workers: (1..=workers).collect(), blocked: (1..=blocked).collect(), queued: Some(queued), existing: Some(workers), max: Some(max), idle }
    }

    #[test]
    fn starvation_while_the_pool_injects_workers() {
        // 11 of 13 blocked, the 2 others spinning before they block, 76 items queued (aspnet_pool/nolock).
        assert!(pool(13, 11, Some(0), 76, 32767).starved_of_workers());
        // Every worker blocked, work queued: starved, and at its maximum too.
        assert!(pool(8, 8, Some(0), 16, 8).starved_of_workers() && pool(8, 8, Some(0), 16, 8).at_max());
        // An idle worker would take the queued work; a minority blocked is no starvation; nothing queued neither.
        assert!(!pool(13, 11, Some(1), 76, 32767).starved_of_workers());
        assert!(!pool(13, 6, Some(0), 76, 32767).starved_of_workers());
        assert!(!pool(13, 11, Some(0), 0, 32767).starved_of_workers());
        assert!(!pool(13, 11, Some(0), 76, 32767).at_max());
    }
}
