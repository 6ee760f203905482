//! The .NET runtime's section of the report: what knot read of the runtime, its thread pool.

use crate::waits::WorkerPool;
use schemars::JsonSchema;
use serde::Serialize;

/// What knot read of the .NET runtime, for the report.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DotnetReport {
    /// `.NET 10.0.12: 25 managed threads, …`, or why the runtime could not be read.
    pub summary: String,
    pub runtime_version: Option<String>,
    pub managed_threads: usize,
    pub thread_pool: Option<ThreadPoolReport>,
    /// The GC heap by type (SOS `dumpheap -stat`); null when it was not read (see diagnostics).
    pub heap: Option<super::gc::report::HeapReport>,
    /// The GC's own state; null when it was not read.
    pub gc: Option<super::gc::report::GcReport>,
    /// Every thread's last thrown exception (clrthreads' Exception column), as SOS `pe` prints it.
    pub exceptions: Vec<ThreadExceptionReport>,
    /// createdump's header (`DIAGINFOHEADER`), present when createdump wrote the dump.
    pub createdump: Option<super::diaginfo::DiagInfo>,
    /// The sync block table as SOS's `syncblk` counts it; null when it was not read.
    pub sync_table: Option<SyncTableReport>,
}

/// SOS `syncblk`'s `Total` and `Free`.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
pub struct SyncTableReport {
    /// Where the table is (`g_pSyncTable`).
    pub address: crate::hex::Hex,
    /// Entries the runtime handed out (`SyncBlockCache::m_FreeSyncTableIndex` - 1).
    pub total: u32,
    /// Of those, entries on the free list (their objects died).
    pub free: u32,
}

/// One thread's last thrown exception.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ThreadExceptionReport {
    pub tid: u32,
    pub exception: crate::crash::ExceptionReport,
}

/// The thread pool as SOS's `threadpool` shows it, as far as knot can read it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ThreadPoolReport {
    /// Worker threads (named `.NET TP Worker`).
    pub workers_total: u32,
    pub worker_tids: Vec<u32>,
    /// Workers blocked inside a work item on a managed wait (they count as running for SOS:
    /// they hold their worker and process no other work).
    pub workers_blocked: Vec<u32>,
    /// Running and idle workers, and queued work items: null when knot cannot read them
    /// (see `unavailable`).
    pub workers_running: Option<u32>,
    pub workers_idle: Option<u32>,
    pub queued_work_items: Option<u32>,
    /// What is not read, and why.
    pub unavailable: Vec<String>,
}

impl ThreadPoolReport {
    /// The pool as far as knot reads it; what it does not read yet is said in `unavailable`.
    pub fn from_pool(pool: &WorkerPool) -> ThreadPoolReport {
        ThreadPoolReport {
            workers_total: pool.workers.len() as u32,
            worker_tids: pool.workers.clone(),
            workers_blocked: pool.blocked.clone(),
            workers_running: None,
            workers_idle: None,
            queued_work_items: None,
            unavailable: vec![
                "running and idle workers: the pool's counters (PortableThreadPool's ThreadCounts) are CoreLib statics knot does not read yet".into(),
                "queued work items: ThreadPoolWorkQueue is reached through CoreLib statics knot does not read yet".into(),
            ],
        }
    }
}
