//! The roots of the object graph, each with its kind and place: the handle table's strong,
//! pinned and other rooting handles ([`crate::runtimes::dotnet::gc::handles`]; dependent handles become edges
//! primary → secondary), the finalization queue's f-reachable part, thread stacks and
//! registers, and the sync blocks of held monitors.
//!
//! The finalization queue (`CFinalize`, gcpriv.h; `dac_finalize_queue` in gcinterface.dac.h)
//! is one array cut into segments by `m_FillPointers`: one per generation, then the critical
//! finalizer list and the finalizer list (objects found dead and waiting for the finalizer
//! thread: f-reachable), then the free list. The f-reachable objects are those from the end
//! of the last generation's segment to the end of the finalizer list.
//!
//! Stack roots are conservative: the GC information of a managed frame (which slots hold live
//! references at its safe point) is not decoded, so every word of each managed frame's part of
//! the stack, and each register the unwinder recovered for it, that holds an object's address
//! is a root marked `conservative` (it may be a dead local's stale value).

use crate::runtimes::dotnet::contract::facts::Layout;
use crate::runtimes::dotnet::threads::syncblock;
use crate::runtimes::dotnet::contract::target::Target;
use crate::runtimes::dotnet::gc::gcvars::GcVars;
use crate::runtimes::dotnet::gc::graph::{GraphErrors, ObjectGraph, Root, RootKind, RootSource};
use crate::runtimes::dotnet::gc::handles::{self, HandleType};

const PTR: u64 = 8;
/// f-reachable entries read per heap at most.
const MAX_FREACHABLE: u64 = 1 << 24;
/// Bytes of one frame's stack scanned at most.
const MAX_FRAME_BYTES: u64 = 1 << 20;

/// One frame of a thread's stack, as the unwinder found it.
#[derive(Debug, Clone)]
pub(crate) struct StackFrame {
    pub(crate) sp: u64,
    pub(crate) ip: u64,
    /// A managed method's frame (JIT or ReadyToRun code).
    pub(crate) managed: bool,
    /// The registers recovered in this frame: (DWARF number, value).
    pub(crate) registers: Vec<(u16, u64)>,
}

/// One thread's stack, innermost frame first.
#[derive(Debug, Clone)]
pub(crate) struct ThreadStack {
    pub(crate) os_tid: u32,
    pub(crate) managed_id: u32,
    pub(crate) frames: Vec<StackFrame>,
    /// The end (highest address) of the stack's mapping.
    pub(crate) stack_end: u64,
}

/// The roots read, and what could not be read.
#[derive(Debug, Clone, Default)]
pub(crate) struct RootReading {
    pub(crate) roots: Vec<Root>,
    pub(crate) handles_read: usize,
    pub(crate) errors: GraphErrors,
}

/// A root by the address of the object it holds (for a search that has no graph).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RootAt {
    pub(crate) kind: RootKind,
    pub(crate) object: u64,
    pub(crate) source: RootSource,
}

/// The roots read by object address, and what could not be read.
#[derive(Debug, Clone, Default)]
pub(crate) struct RootsAt {
    pub(crate) roots: Vec<RootAt>,
    /// Dependent handles as edges (primary, secondary object), sorted.
    pub(crate) dependent: Vec<(u64, u64)>,
    pub(crate) handles_read: usize,
    pub(crate) errors: GraphErrors,
}

/// Which addresses are objects of the heap: `bounds` (lowest, highest object address) is a
/// cheap first test, `is_object` the answer.
pub(crate) struct Objects<'f> {
    pub(crate) bounds: (u64, u64),
    pub(crate) is_object: &'f mut dyn FnMut(u64) -> bool,
}

impl Objects<'_> {
    fn has(&mut self, a: u64) -> bool {
        a >= self.bounds.0 && a <= self.bounds.1 && (self.is_object)(a)
    }
}

/// The roots of a graph that the stacks have no part in, read before the stacks are walked:
/// the handles and the finalization queue (which come before the stack roots), the sync blocks
/// (which come after).
#[derive(Debug, Clone, Default)]
pub(crate) struct RootsAhead {
    before: RootsAt,
    after: RootsAt,
}

/// Reads the roots of `g`'s objects that are not on the stacks ([`RootsAhead::finish`] adds
/// those).
/// `sync`: the runtime's count of sync table entries handed out, which bounds the table's
/// reading as it bounds the monitors' (`syncblock::read_cache`).
pub(crate) fn read_ahead(t: &Target, l: &Layout, vars: &GcVars, sync: Option<syncblock::CacheCounts>, g: &ObjectGraph) -> RootsAhead {
    let bounds = g.index.bounds();
    let mut is_object = |a: u64| g.node_of(a).is_some();
    let mut objects = Objects { bounds, is_object: &mut is_object };
    let mut ahead = RootsAhead::default();
    read_handles(t, vars, &mut objects, &mut ahead.before);
    read_finalizer_queue(t, vars, &mut objects, &mut ahead.before);
    read_sync_blocks(t, l, sync, &mut objects, &mut ahead.after);
    ahead
}

impl RootsAhead {
    /// The dependent handles read (primary, secondary object), sorted: edges of the graph.
    pub(crate) fn dependent(&self, g: &ObjectGraph) -> Vec<(u32, u32)> {
        self.before.dependent.iter().map(|&(p, s)| (g.node_of(p).unwrap_or(0), g.node_of(s).unwrap_or(0))).collect()
    }

    /// Every root of `g` (the stacks' of `threads` added), as [`read_at`] orders them.
    pub(crate) fn finish(self, t: &Target, g: &ObjectGraph, threads: &[ThreadStack]) -> RootReading {
        let bounds = g.index.bounds();
        let mut is_object = |a: u64| g.node_of(a).is_some();
        let RootsAhead { mut before, after } = self;
        read_stacks(t, &mut Objects { bounds, is_object: &mut is_object }, threads, &mut before);
        before.roots.extend(after.roots);
        before.errors.extend(after.errors);
        roots_of(g, before)
    }
}

fn roots_of(g: &ObjectGraph, at: RootsAt) -> RootReading {
    let node = |a: u64| g.node_of(a).unwrap_or(0);
    RootReading {
        roots: at.roots.into_iter().map(|r| Root { kind: r.kind, node: node(r.object), source: r.source }).collect(),
        handles_read: at.handles_read,
        errors: at.errors,
    }
}

/// Reads every root that holds one of `objects`, in the order the graph's roots are in:
/// handles, the finalization queue, stacks, sync blocks.
pub(crate) fn read_at(t: &Target, l: &Layout, vars: &GcVars, sync: Option<syncblock::CacheCounts>, objects: &mut Objects, threads: &[ThreadStack]) -> RootsAt {
    let mut r = RootsAt::default();
    read_handles(t, vars, objects, &mut r);
    read_finalizer_queue(t, vars, objects, &mut r);
    read_stacks(t, objects, threads, &mut r);
    read_sync_blocks(t, l, sync, objects, &mut r);
    r
}

fn read_handles(t: &Target, vars: &GcVars, objects: &mut Objects, r: &mut RootsAt) {
    let table = handles::read(t, vars.handle_table_map, vars.heaps.len() as u64);
    for (at, why) in table.errors {
        r.errors.push(at, format!("handle table: {why}"));
    }
    r.handles_read = table.handles.len();
    for h in &table.handles {
        if h.kind == HandleType::Dependent {
            if objects.has(h.object) && objects.has(h.extra) {
                r.dependent.push((h.object, h.extra));
            }
            continue;
        }
        // Whether it roots first: a weak handle's object is not looked up.
        if !h.is_root() || !objects.has(h.object) {
            continue;
        }
        let kind = match h.kind {
            HandleType::Strong => RootKind::StrongHandle,
            HandleType::Pinned => RootKind::PinnedHandle,
            HandleType::AsyncPinned => RootKind::AsyncPinnedHandle,
            HandleType::RefCounted => RootKind::RefCountedHandle,
            HandleType::SizedRef => RootKind::SizedRefHandle,
            _ => RootKind::VariableHandle,
        };
        r.roots.push(RootAt { kind, object: h.object, source: RootSource::Handle { handle: h.address } });
    }
    r.dependent.sort_unstable();
    r.dependent.dedup();
}

fn read_finalizer_queue(t: &Target, vars: &GcVars, objects: &mut Objects, r: &mut RootsAt) {
    let gens = vars.generation_count;
    for heap in &vars.heaps {
        if heap.finalize_queue_var == 0 {
            r.errors.push(0, format!("finalization queue of heap {}: not located", heap.index));
            continue;
        }
        let fq = match t.read_ptr(heap.finalize_queue_var, "finalize_queue") {
            Ok(0) => continue,
            Ok(p) => p,
            Err(e) => {
                r.errors.push(heap.finalize_queue_var, format!("finalization queue of heap {}: {e}", heap.index));
                continue;
            }
        };
        let fill = |i: u64| t.read_ptr(fq + PTR * i, "CFinalize.m_FillPointers");
        let (Ok(from), Ok(to)) = (fill(gens - 1), fill(gens + 1)) else {
            r.errors.push(fq, format!("finalization queue of heap {}: fill pointers not in the dump", heap.index));
            continue;
        };
        if to < from || (to - from) % PTR != 0 || (to - from) / PTR > MAX_FREACHABLE {
            r.errors.push(fq, format!("finalization queue of heap {}: f-reachable part [{from:#x}, {to:#x}) is not a run of at most {MAX_FREACHABLE} slots", heap.index));
            continue;
        }
        let bytes = match t.read_bytes(from, (to - from) as usize, "f-reachable queue") {
            Ok(b) => b,
            Err(e) => {
                r.errors.push(from, format!("finalization queue of heap {}: {e}", heap.index));
                continue;
            }
        };
        for (i, w) in bytes.chunks_exact(8).enumerate() {
            let v = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
            if objects.has(v) {
                r.roots.push(RootAt { kind: RootKind::FinalizerQueue, object: v, source: RootSource::FinalizerQueue { slot: from + PTR * i as u64 } });
            }
        }
    }
}

fn read_stacks(t: &Target, objects: &mut Objects, threads: &[ThreadStack], r: &mut RootsAt) {
    for th in threads {
        for (i, f) in th.frames.iter().enumerate() {
            if !f.managed {
                continue;
            }
            let source = |slot: u64, register: Option<u16>| RootSource::Stack { os_tid: th.os_tid, managed_id: th.managed_id, frame_sp: f.sp, frame_ip: f.ip, slot, register };
            for &(reg, v) in &f.registers {
                if objects.has(v) {
                    r.roots.push(RootAt { kind: RootKind::Stack { conservative: true }, object: v, source: source(0, Some(reg)) });
                }
            }
            let end = th.frames.get(i + 1).map(|n| n.sp).unwrap_or(th.stack_end).min(th.stack_end);
            let start = f.sp & !7;
            if end <= start {
                continue;
            }
            let len = (end - start).min(MAX_FRAME_BYTES);
            let Ok(bytes) = t.mem.chunk(start, len as usize) else {
                r.errors.push(start, format!("thread {:#x}: the stack of the frame at sp {start:#x} is not in the dump", th.os_tid));
                continue;
            };
            for (k, w) in bytes.chunks_exact(8).enumerate() {
                let v = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
                if objects.has(v) {
                    r.roots.push(RootAt { kind: RootKind::Stack { conservative: true }, object: v, source: source(start + 8 * k as u64, None) });
                }
            }
        }
    }
}

fn read_sync_blocks(t: &Target, l: &Layout, sync: Option<syncblock::CacheCounts>, objects: &mut Objects, r: &mut RootsAt) {
    let table = match syncblock::read_table(t, l, sync) {
        Ok(table) => table,
        Err(e) => {
            r.errors.push(0, format!("sync block table: {e}"));
            return;
        }
    };
    for e in &table.entries {
        let held = syncblock::read_aware_lock(t, l, e.sync_block).map(|a| a.locked).unwrap_or(false);
        if held && objects.has(e.object) {
            r.roots.push(RootAt { kind: RootKind::SyncBlock, object: e.object, source: RootSource::SyncBlock { index: e.index } });
        }
    }
}
