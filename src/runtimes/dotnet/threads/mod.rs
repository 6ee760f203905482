//! The Thread contract (version 1): the `ThreadStore` and its list of runtime `Thread`s.
//!
//! Globals: `ThreadStore` (address of the `ThreadStore*` variable), `FinalizerThread`,
//! `GCThread`, `ThinlockThreadIdDispenser`. Types: `ThreadStore` (`FirstThreadLink`,
//! `ThreadCount`, `UnstartedCount`, `BackgroundCount`, `PendingCount`, `DeadCount`), `Thread`
//! (`Id`, `OSId`, `State`, `PreemptiveGCDisabled`, `Frame`, `LinkNext`, `GCHandle` — the
//! exposed `System.Threading.Thread` object's handle, `LastThrownObject`, `RuntimeThreadLocals`,
//! `ThreadLocalDataPtr`), `RuntimeThreadLocals.AllocContext`, `EEAllocContext.GCAllocationContext`,
//! `GCAllocContext` (`Pointer`, `Limit`), `IdDispenser` (`HighestId`, `IdToThread`).
//!
//! The list is singly linked through `Thread::m_Link` (an `SLink` at `LinkNext`); the store's
//! `FirstThreadLink` and every `LinkNext` point at the next thread's link, so a thread is its
//! link's address minus the `LinkNext` offset. The walk stops at a null link, at a repeat, or at
//! `MAX_THREADS`.

pub(crate) mod barriers;
pub(crate) mod blocking;
pub(crate) mod class_init;
pub(crate) mod idle;
pub(crate) mod locks;
pub(crate) mod names;
pub(crate) mod object_waits;
pub(crate) mod pool_waits;
pub(crate) mod reading;
pub(crate) mod rwlock_slim;
pub(crate) mod stack_objects;
pub(crate) mod static_holders;
pub(crate) mod syncblock;
pub(crate) mod waiter_stacks;

use crate::runtimes::dotnet::error::DotnetError;
use crate::runtimes::dotnet::contract::target::{Result, Target};
use serde::Serialize;
use std::collections::HashSet;

/// More managed threads than any process has; a longer list is corrupt.
pub(crate) const MAX_THREADS: usize = 65_536;
/// `Frame` value of a thread with no explicit frames (`FRAME_TOP`).
pub(crate) const FRAME_TOP: u64 = u64::MAX;

/// `Thread::m_State` bits the Thread contract names.
pub(crate) const THREAD_STATE_FLAGS: &[(u32, &str)] = &[
    (0x0000_0002, "SuspensionTrapped"),
    (0x0000_0004, "GCSuspendRedirected"),
    (0x0000_0008, "DebugSuspendPending"),
    (0x0000_0080, "Hijacked"),
    (0x0000_0200, "Background"),
    (0x0000_0400, "Unstarted"),
    (0x0000_2000, "CoInitialized"),
    (0x0000_4000, "InSTA"),
    (0x0000_8000, "InMTA"),
    (0x0001_0000, "Stopped"),
    (0x0008_0000, "DebugSyncSuspended"),
    (0x0010_0000, "DebugWillSync"),
    (0x0100_0000, "ThreadPoolWorker"),
    (0x0200_0000, "WaitSleepJoin"),
    (0x8000_0000, "Detached"),
];
pub(crate) const TS_DEAD: u32 = 0x0001_0000;
pub(crate) const TS_THREADPOOL_WORKER: u32 = 0x0100_0000;

/// The `ThreadStore`'s counters, as `clrthreads` prints them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub(crate) struct ThreadCounts {
    pub thread_count: i32,
    pub unstarted: i32,
    pub background: i32,
    pub pending: i32,
    pub dead: i32,
}

/// What the runtime knows about one of its threads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ManagedThread {
    /// The runtime `Thread` (clrthreads' ThreadOBJ).
    pub address: u64,
    /// OS thread id (0 for a thread that has not started or has ended).
    pub os_tid: u32,
    /// Managed thread id (`Thread.ManagedThreadId`; the thin-lock id).
    pub managed_id: u32,
    /// `Thread::m_State`, raw.
    pub state: u32,
    /// The named bits of `state`.
    pub(crate) state_flags: Vec<&'static str>,
    /// Cooperative mode (running managed code, or must be suspended for a GC).
    pub cooperative: bool,
    /// The `System.Threading.Thread` object (0 when the handle is unset).
    pub(crate) thread_object: u64,
    /// The innermost explicit `Frame`, or `None` when the thread has none (`FRAME_TOP`).
    pub last_frame: Option<u64>,
    /// The GC allocation context (pointer, limit).
    pub alloc_context: (u64, u64),
    /// The last exception object thrown on the thread (0 when none).
    pub last_thrown_object: u64,
    /// `Thread::m_ThreadLocalDataPtr`: the thread's managed thread-static storage.
    pub(crate) thread_local_data: u64,
    pub is_finalizer: bool,
    pub(crate) is_gc_thread: bool,
    /// Index of the dump's thread with this OS tid (its NT_PRSTATUS order), when there is one.
    pub dump_thread_index: Option<usize>,
}

impl ManagedThread {
    pub(crate) fn is_threadpool_worker(&self) -> bool {
        self.state & TS_THREADPOOL_WORKER != 0
    }
    pub(crate) fn is_dead(&self) -> bool {
        self.state & TS_DEAD != 0
    }
}

fn state_flags(state: u32) -> Vec<&'static str> {
    THREAD_STATE_FLAGS.iter().filter(|(bit, _)| state & bit != 0).map(|(_, n)| *n).collect()
}

/// The `ThreadStore` address.
pub(crate) fn thread_store(t: &Target) -> Result<u64> {
    let ts = t.global_deref("ThreadStore")?;
    if ts == 0 {
        return Err(DotnetError::Invalid { what: "ThreadStore", at: t.global("ThreadStore")?, why: "null: the runtime had not started".into() });
    }
    Ok(ts)
}

pub(crate) fn counts(t: &Target, ts: u64) -> Result<ThreadCounts> {
    let f = |name| t.field_u32(ts, "ThreadStore", name).map(|v| v as i32);
    Ok(ThreadCounts { thread_count: f("ThreadCount")?, unstarted: f("UnstartedCount")?, background: f("BackgroundCount")?, pending: f("PendingCount")?, dead: f("DeadCount")? })
}

/// Every `Thread` in the store's list, in list order.
pub(crate) fn thread_addresses(t: &Target, ts: u64) -> Result<Vec<u64>> {
    let link_offset = t.offset("Thread", "LinkNext")?;
    let mut link = t.field_ptr(ts, "ThreadStore", "FirstThreadLink")?;
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    while link != 0 {
        let thread = link.wrapping_sub(link_offset);
        if !seen.insert(thread) {
            return Err(DotnetError::Cycle { what: "ThreadStore thread list", at: thread });
        }
        if out.len() >= MAX_THREADS {
            return Err(DotnetError::TooMany { what: "ThreadStore thread list", at: ts, limit: MAX_THREADS as u64 });
        }
        out.push(thread);
        link = t.read_ptr(thread.wrapping_add(link_offset), &format!("Thread.LinkNext of {thread:#x}"))?;
    }
    Ok(out)
}

/// One thread's data. `finalizer`/`gc` are the runtime's finalizer and GC threads (0 if none).
pub(crate) fn read_thread(t: &Target, thread: u64, finalizer: u64, gc: u64) -> Result<ManagedThread> {
    let managed_id = t.field_u32(thread, "Thread", "Id")?;
    let os_tid = t.field_ptr(thread, "Thread", "OSId")?;
    let state = t.field_u32(thread, "Thread", "State")?;
    let cooperative = t.field_u32(thread, "Thread", "PreemptiveGCDisabled")? & 1 != 0;
    let frame = t.field_ptr(thread, "Thread", "Frame")?;
    // The handle field is `GCHandle` in the .NET 10 descriptor, `ExposedObject` in later ones.
    let handle_field = if t.has_field("Thread", "ExposedObject") { "ExposedObject" } else { "GCHandle" };
    let handle = t.field_ptr(thread, "Thread", handle_field)?;
    let thread_object = deref_handle(t, handle)?;
    let last_thrown_object = match t.field_ptr(thread, "Thread", "LastThrownObject") {
        Ok(h) => deref_handle(t, h).unwrap_or(0),
        Err(_) => 0,
    };
    let alloc_context = alloc_context(t, thread).unwrap_or((0, 0));
    let thread_local_data = t.field_ptr(thread, "Thread", "ThreadLocalDataPtr").unwrap_or(0);
    Ok(ManagedThread {
        address: thread,
        os_tid: os_tid as u32,
        managed_id,
        state,
        state_flags: state_flags(state),
        cooperative,
        thread_object,
        last_frame: (frame != FRAME_TOP && frame != 0).then_some(frame),
        alloc_context,
        last_thrown_object,
        thread_local_data,
        is_finalizer: thread == finalizer,
        is_gc_thread: thread == gc,
        dump_thread_index: None,
    })
}

/// The object an `OBJECTHANDLE` refers to (a handle is a pointer to the object reference).
pub(crate) fn deref_handle(t: &Target, handle: u64) -> Result<u64> {
    if handle == 0 {
        return Ok(0);
    }
    t.read_ptr(handle, &format!("object handle {handle:#x}"))
}

fn alloc_context(t: &Target, thread: u64) -> Result<(u64, u64)> {
    // .NET 8 keeps it in the Thread itself.
    if t.has_field("Thread", "AllocContext") {
        let ctx = thread.wrapping_add(t.offset("Thread", "AllocContext")?);
        return Ok((t.field_ptr(ctx, "GCAllocContext", "Pointer")?, t.field_ptr(ctx, "GCAllocContext", "Limit")?));
    }
    let locals = t.field_ptr(thread, "Thread", "RuntimeThreadLocals")?;
    if locals == 0 {
        return Ok((0, 0));
    }
    let mut ctx = locals.wrapping_add(t.offset("RuntimeThreadLocals", "AllocContext")?);
    if t.descriptor.types.contains_key("EEAllocContext") {
        ctx = ctx.wrapping_add(t.offset("EEAllocContext", "GCAllocationContext")?);
    }
    Ok((t.field_ptr(ctx, "GCAllocContext", "Pointer")?, t.field_ptr(ctx, "GCAllocContext", "Limit")?))
}

/// The thin-lock id → `Thread` table (`IdDispenser`): what the runtime itself uses to turn a
/// thin lock's or an `AwareLock`'s owner id into a thread.
pub(crate) fn id_to_thread(t: &Target, id: u32) -> Result<Option<u64>> {
    let dispenser = t.global_deref("ThinlockThreadIdDispenser")?;
    if dispenser == 0 {
        return Ok(None);
    }
    let highest = t.field_u32(dispenser, "IdDispenser", "HighestId")?;
    if id == 0 || id > highest {
        return Ok(None);
    }
    let table = t.field_ptr(dispenser, "IdDispenser", "IdToThread")?;
    if table == 0 {
        return Ok(None);
    }
    let thread = t.read_ptr(table.wrapping_add(8 * id as u64), &format!("IdDispenser.IdToThread[{id}]"))?;
    Ok((thread != 0).then_some(thread))
}
