//! The runtime's per-thread blocking records (.NET 9+): `System.Threading.ThreadBlockingInfo`,
//! a stack-allocated list headed by the `[ThreadStatic] t_first`. CoreCLR keeps that thread
//! static at a fixed place in the thread's `ThreadLocalData` (`ThreadBlockingInfo_First`, the
//! start of the DirectOnThreadLocalData region), which the descriptor's
//! `Thread.ThreadLocalDataPtr` reaches; the offset inside `ThreadLocalData` and the record's
//! layout are build facts. The native Monitor code pushes the same records (kinds MonitorLock
//! and MonitorWait, pointing at the sync block's AwareLock); `System.Threading.Lock` pushes kind
//! Lock, pointing at a stack slot that holds the Lock object.

use crate::runtimes::dotnet::error::DotnetError;
use crate::runtimes::dotnet::contract::facts::Layout;
use crate::runtimes::dotnet::contract::target::{Result, Target};
use serde::Serialize;
use std::collections::HashSet;

/// Records nest only for reentrant waits; more than this is corrupt.
pub(crate) const MAX_RECORDS: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum BlockingKind {
    /// Entering a Monitor (`lock`, Monitor.Enter): `_objectPtr` is the AwareLock.
    MonitorEnter,
    /// In Monitor.Wait: `_objectPtr` is the AwareLock.
    MonitorWait,
    /// Entering a `System.Threading.Lock`: `_objectPtr` is a stack slot holding the Lock.
    Lock,
    /// NativeAOT's Condition (not used by CoreCLR).
    Condition,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Record {
    /// Where the record lives (on the blocked thread's stack).
    pub(crate) address: u64,
    pub(crate) kind: BlockingKind,
    /// The AwareLock (Monitor kinds) or the slot holding the object (Lock, Condition).
    pub(crate) object_ptr: u64,
    pub(crate) timeout_ms: i32,
}

/// The records of `thread` (whose `ThreadLocalData` is at `thread_local_data`), innermost (most
/// recent) first.
pub(crate) fn records(t: &Target, l: &Layout, thread: u64, thread_local_data: u64) -> Result<Vec<Record>> {
    if thread_local_data == 0 {
        return Ok(Vec::new());
    }
    let owner = t.read_ptr(thread_local_data.wrapping_add(l.thread_local_data_thread), "ThreadLocalData.pThread")?;
    if owner != thread {
        return Err(DotnetError::Invalid {
            what: "ThreadLocalData",
            at: thread_local_data,
            why: format!("belongs to thread {owner:#x}, not {thread:#x}: the layout is not this build's"),
        });
    }
    let mut at = t.read_ptr(thread_local_data.wrapping_add(l.thread_local_data_blocking_info_first), "ThreadLocalData.ThreadBlockingInfo_First")?;
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    while at != 0 {
        if !seen.insert(at) {
            return Err(DotnetError::Cycle { what: "ThreadBlockingInfo list", at });
        }
        if out.len() >= MAX_RECORDS {
            return Err(DotnetError::TooMany { what: "ThreadBlockingInfo list", at: thread_local_data, limit: MAX_RECORDS as u64 });
        }
        let object_ptr = t.read_ptr(at.wrapping_add(l.blocking_info_object), "ThreadBlockingInfo._objectPtr")?;
        let kind_raw = t.read_u32(at.wrapping_add(l.blocking_info_kind), "ThreadBlockingInfo._objectKind")?;
        let timeout_ms = t.read_u32(at.wrapping_add(l.blocking_info_timeout), "ThreadBlockingInfo._timeoutMs")? as i32;
        let kind = match kind_raw {
            0 => BlockingKind::MonitorEnter,
            1 => BlockingKind::MonitorWait,
            2 => BlockingKind::Lock,
            3 => BlockingKind::Condition,
            k => return Err(DotnetError::Invalid { what: "ThreadBlockingInfo", at, why: format!("object kind {k}") }),
        };
        // A popped record has a null object pointer; it is no longer linked, but be safe.
        if object_ptr != 0 {
            out.push(Record { address: at, kind, object_ptr, timeout_ms });
        }
        at = t.read_ptr(at.wrapping_add(l.blocking_info_next), "ThreadBlockingInfo._next")?;
    }
    Ok(out)
}
