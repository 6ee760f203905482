//! The collection in progress, as a node of the wait-for graph: who runs it, who waits for it.
//!
//! A thread that needs the GC while it collects (to allocate, or to come back to managed code
//! while the runtime is suspended) blocks on one of the GC's own events (`GCEvent`: a pthread
//! condition variable in a small object the GC allocates). Those threads wait for whoever runs
//! the collection:
//! - workstation GC: the thread that triggered it, which suspended the runtime and collects on
//!   its own stack — the runtime records it (`g_pSuspensionThread`, SOS `clrthreads`' `(GC)`);
//! - server GC: the GC's own threads, one per heap, none of them a managed thread; the wait ends
//!   when all of them are done.
//!
//! A condition variable is the GC's when the GC's state leads to it: a word of the GC's statics
//! (within [`GC_STATICS`] of `current_c_gc_state`, where the workstation GC keeps its heap) holds
//! its address, or the address of an object whose first word does; or the first word of a
//! server GC's `gc_heap` (its done event) does. A server GC thread is told by its stack: the
//! runtime's thread (no managed `Thread`) whose stack holds its heap's `gc_heap` address, as
//! the GC's thread function keeps it (inferred, and said so).

use crate::runtimes::dotnet::contract::target::Target;
use crate::runtimes::dotnet::gc::gcvars::GcVars;

/// How far from `current_c_gc_state` the GC's statics are looked at (they are one block in the
/// runtime's data; 64 KiB each side, 16 Ki words).
pub(crate) const GC_STATICS: u64 = 64 << 10;
/// How much of a runtime thread's stack is searched for its heap's address (the GC thread
/// function's frame is at the bottom of a shallow stack).
const GC_THREAD_STACK: u64 = 64 << 10;

/// Where the GC's state leads to one of its events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventPlace {
    /// A word of the GC's statics at `at` (or the object it points to) leads to it.
    Statics { at: u64 },
    /// The server GC heap `index`'s done event (the first field of its `gc_heap` at `heap`).
    Heap { index: usize, heap: u64 },
}

/// A condition variable that is one of the GC's events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GcEvent {
    pub(crate) cond: u64,
    pub(crate) place: EventPlace,
}

/// Which of `conds` (condition variables threads wait on) are the GC's events.
pub(crate) fn events(t: &Target, vars: &GcVars, conds: &[u64]) -> Vec<GcEvent> {
    let mut out = Vec::new();
    if conds.is_empty() {
        return out;
    }
    for h in vars.heaps.iter().filter(|h| h.address != 0) {
        if let Ok(first) = t.read_ptr(h.address, "gc_heap.gc_done_event")
            && conds.contains(&first) {
                out.push(GcEvent { cond: first, place: EventPlace::Heap { index: h.index, heap: h.address } });
            }
    }
    let Some(anchor) = vars.gc_state_var else { return out };
    let from = anchor.saturating_sub(GC_STATICS) & !7;
    let to = anchor.saturating_add(GC_STATICS);
    let mut at = from;
    while at < to {
        // The statics are read a page at a time: a page the dump lacks is passed.
        let page_end = ((at | 0xfff) + 1).min(to);
        if let Ok(bytes) = t.read_bytes(at, (page_end - at) as usize, "the GC's statics") {
            for (i, w) in bytes.chunks_exact(8).enumerate() {
                let v = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
                if v < 0x10000 || v % 8 != 0 {
                    continue;
                }
                let word_at = at + 8 * i as u64;
                let cond = if conds.contains(&v) { Some(v) } else { t.mem.read_u64(v).ok().filter(|c| conds.contains(c)) };
                if let Some(cond) = cond
                    && !out.iter().any(|e| e.cond == cond)
                {
                    out.push(GcEvent { cond, place: EventPlace::Statics { at: word_at } });
                }
            }
        }
        at = page_end;
    }
    out
}

/// Why a thread is said to run the collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CollectorWhy {
    /// The runtime records it as the thread that suspended it for this GC (known).
    SuspendedRuntime,
    /// A server GC thread: its stack holds heap `index`'s `gc_heap` (inferred).
    ServerGcThread { index: usize, heap: u64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Collector {
    pub(crate) tid: u32,
    pub(crate) why: CollectorWhy,
}

/// A runtime thread's stack, for telling the server GC's threads.
pub(crate) struct StackTop {
    pub(crate) tid: u32,
    pub(crate) sp: u64,
}

/// The server GC's threads: of `unmanaged` (the runtime's threads that are no managed thread),
/// each one whose stack (from its stack pointer up, [`GC_THREAD_STACK`] at most) holds a heap's
/// `gc_heap` address. A thread holding several is the first heap's.
pub(crate) fn server_gc_threads(t: &Target, vars: &GcVars, unmanaged: &[StackTop]) -> Vec<Collector> {
    let heaps: Vec<(usize, u64)> = vars.heaps.iter().filter(|h| h.address != 0).map(|h| (h.index, h.address)).collect();
    if heaps.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for s in unmanaged {
        let found = (|| {
            let mut at = s.sp & !7;
            let end = s.sp.saturating_add(GC_THREAD_STACK);
            while at < end {
                let page_end = ((at | 0xfff) + 1).min(end);
                let bytes = t.read_bytes(at, (page_end - at) as usize, "a GC thread's stack").ok()?;
                for w in bytes.chunks_exact(8) {
                    let v = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
                    if let Some(&(index, heap)) = heaps.iter().find(|(_, a)| *a == v) {
                        return Some((index, heap));
                    }
                }
                at = page_end;
            }
            None
        })();
        if let Some((index, heap)) = found {
            out.push(Collector { tid: s.tid, why: CollectorWhy::ServerGcThread { index, heap } });
        }
    }
    out.sort_by_key(|c| (match c.why {
        CollectorWhy::ServerGcThread { index, .. } => index,
        CollectorWhy::SuspendedRuntime => 0,
    }, c.tid));
    out
}

/// What the GC was doing, as the graph and the verdict read it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Collection {
    pub(crate) server: bool,
    /// The runtime was suspended for a GC, a background GC was running, the GC's structures
    /// were being rewritten, or threads waited on the GC's events.
    pub(crate) in_progress: bool,
    /// Who runs it (workstation: one thread; server: every GC thread, all of which must finish).
    pub(crate) collectors: Vec<Collector>,
    /// Threads blocked on the GC's events, ascending.
    pub(crate) waiters: Vec<u32>,
    pub(crate) events: Vec<GcEvent>,
    /// The GC was planning or moving objects (`gc_structures_invalid_cnt`): the heap as the dump
    /// holds it is not the heap before or after the collection.
    pub(crate) mid_collection: bool,
}
