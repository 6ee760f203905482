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
    // .NET 8 has no records (no ThreadLocalData, no facts for them): see `frame_records`.
    let (Some(owner_at), Some(first_at), Some(object_at), Some(kind_at), Some(timeout_at), Some(next_at)) =
        (l.thread_local_data_thread, l.thread_local_data_blocking_info_first, l.blocking_info_object, l.blocking_info_kind, l.blocking_info_timeout, l.blocking_info_next)
    else {
        return Ok(Vec::new());
    };
    if thread_local_data == 0 {
        return Ok(Vec::new());
    }
    let owner = t.read_ptr(thread_local_data.wrapping_add(owner_at), "ThreadLocalData.pThread")?;
    if owner != thread {
        return Err(DotnetError::Invalid {
            what: "ThreadLocalData",
            at: thread_local_data,
            why: format!("belongs to thread {owner:#x}, not {thread:#x}: the layout is not this build's"),
        });
    }
    let mut at = t.read_ptr(thread_local_data.wrapping_add(first_at), "ThreadLocalData.ThreadBlockingInfo_First")?;
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    while at != 0 {
        if !seen.insert(at) {
            return Err(DotnetError::Cycle { what: "ThreadBlockingInfo list", at });
        }
        if out.len() >= MAX_RECORDS {
            return Err(DotnetError::TooMany { what: "ThreadBlockingInfo list", at: thread_local_data, limit: MAX_RECORDS as u64 });
        }
        let object_ptr = t.read_ptr(at.wrapping_add(object_at), "ThreadBlockingInfo._objectPtr")?;
        let kind_raw = t.read_u32(at.wrapping_add(kind_at), "ThreadBlockingInfo._objectKind")?;
        let timeout_ms = t.read_u32(at.wrapping_add(timeout_at), "ThreadBlockingInfo._timeoutMs")? as i32;
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
        at = t.read_ptr(at.wrapping_add(next_at), "ThreadBlockingInfo._next")?;
    }
    Ok(out)
}

/// Frames walked at most on one thread's chain.
const MAX_FRAMES: usize = 1024;
/// The end of a Frame chain (`FRAME_TOP`).
const FRAME_TOP: u64 = u64::MAX;

/// .NET 8's records, which it does not keep: a thread entering or waiting on a Monitor is in the
/// runtime's FCALL (`Monitor.ReliableEnter`, `Monitor.ObjWait`) under a `HelperMethodFrame_1OBJ`
/// that protects the object (`GCPtr`: the slot holding it), and the Frame's `FCallEntry` names
/// the method through `gFCallMethods` (`fcall_method`). The object's sync block gives the
/// AwareLock, as a record's `_objectPtr` would. `method_name` names a MethodDesc. Only for a
/// descriptor with the `HelperMethodFrame_1OBJIdentifier` global (empty otherwise).
pub(crate) fn frame_records(t: &Target, l: &Layout, first_frame: u64, method_name: &dyn Fn(u64) -> Option<String>) -> Result<Vec<Record>> {
    let Ok(one_obj) = t.global("HelperMethodFrame_1OBJIdentifier") else { return Ok(Vec::new()) };
    let next_at = t.offset("Frame", "Next")?;
    let entry_at = t.offset("HelperMethodFrame", "FCallEntry")?;
    let slot_at = t.offset("HelperMethodFrame_1OBJ", "GCPtr")?;
    let mut out = Vec::new();
    let mut frame = first_frame;
    let mut seen = HashSet::new();
    while frame != 0 && frame != FRAME_TOP {
        if !seen.insert(frame) {
            return Err(DotnetError::Cycle { what: "Frame chain", at: frame });
        }
        if seen.len() > MAX_FRAMES {
            return Err(DotnetError::TooMany { what: "Frame chain", at: first_frame, limit: MAX_FRAMES as u64 });
        }
        if t.read_ptr(frame, "Frame's vtable")? == one_obj {
            let md = fcall_method(t, t.read_ptr(frame.wrapping_add(entry_at), "HelperMethodFrame.m_FCallEntry")?)?;
            let kind = match md.and_then(method_name).as_deref() {
                Some("System.Threading.Monitor.ReliableEnter" | "System.Threading.Monitor.ReliableEnterTimeout") => Some(BlockingKind::MonitorEnter),
                Some("System.Threading.Monitor.ObjWait") => Some(BlockingKind::MonitorWait),
                _ => None,
            };
            if let Some(kind) = kind {
                let slot = t.read_ptr(frame.wrapping_add(slot_at), "HelperMethodFrame_1OBJ.gcPtrs[0]")?;
                let object = t.read_ptr(slot, "the object a HelperMethodFrame_1OBJ protects")?;
                if let Some(aware_lock) = aware_lock_of(t, l, object)? {
                    out.push(Record { address: frame, kind, object_ptr: aware_lock, timeout_ms: -1 });
                }
            }
        }
        frame = t.read_ptr(frame.wrapping_add(next_at), "Frame.m_Next")?;
    }
    Ok(out)
}

/// The MethodDesc of the FCALL whose native entry is `entry`: `gFCallMethods` is a hash of
/// `FCallHashSize` buckets by `entry % FCallHashSize`, each a chain of `ECHash` records.
fn fcall_method(t: &Target, entry: u64) -> Result<Option<u64>> {
    let size = t.global("FCallHashSize")?;
    if entry == 0 || size == 0 {
        return Ok(None);
    }
    let table = t.global("FCallMethods")?;
    let (next_at, entry_at, md_at) = (t.offset("ECHash", "Next")?, t.offset("ECHash", "Implementation")?, t.offset("ECHash", "MethodDesc")?);
    let mut at = t.read_ptr(table.wrapping_add(8 * (entry % size)), "gFCallMethods bucket")?;
    for _ in 0..MAX_FRAMES {
        if at == 0 {
            return Ok(None);
        }
        if t.read_ptr(at.wrapping_add(entry_at), "ECHash.m_pImplementation")? == entry {
            return Ok(Some(t.read_ptr(at.wrapping_add(md_at), "ECHash.m_pMD")?).filter(|&m| m != 0));
        }
        at = t.read_ptr(at.wrapping_add(next_at), "ECHash.m_pNext")?;
    }
    Err(DotnetError::TooMany { what: "gFCallMethods chain", at: table, limit: MAX_FRAMES as u64 })
}

/// The AwareLock of `object`'s sync block, when its header holds a sync block index.
fn aware_lock_of(t: &Target, l: &Layout, object: u64) -> Result<Option<u64>> {
    if object == 0 {
        return Ok(None);
    }
    let header = t.read_u32(object.wrapping_sub(4), "object header")?;
    if header & l.header_is_hash_or_sync_block_index == 0 || header & l.header_is_hash_code != 0 {
        return Ok(None);
    }
    let index = u64::from(header & l.header_sync_block_index_mask);
    let table = t.global_deref("SyncTableEntries")?;
    let size = t.size("SyncTableEntry")?;
    let sync_block = t.field_ptr(table.wrapping_add(index.wrapping_mul(size)), "SyncTableEntry", "SyncBlock")?;
    Ok((sync_block != 0).then(|| sync_block.wrapping_add(l.sync_block_monitor)))
}
