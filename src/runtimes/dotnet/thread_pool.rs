//! The thread pool as SOS `threadpool` reads it, from CoreLib's own objects reached through
//! their statics ([`super::statics`]):
//! - the counters: `PortableThreadPool.ThreadPoolInstance`'s `_separated.counts._data` (a
//!   `ThreadCounts`: bits 0-15 the workers processing work, 16-31 the workers that exist),
//!   `_minThreads`, `_maxThreads`, `_cpuUtilization` — SOS's Running is the first count, Idle
//!   the second less the first, Total their sum;
//! - the queued work items (SOS `threadpool -wi`): `ThreadPool.s_workQueue`'s global queues
//!   (`workItems`, `highPriorityWorkItems`, and `lowPriorityWorkItems`/`_assignableWorkItemQueues`
//!   where this CoreLib has them: `ConcurrentQueue<object>`s, each a chain of segments whose
//!   `_slots` hold the items), and each worker's local queue
//!   (`ThreadPoolWorkQueue+WorkStealingQueueList.s_queues`, each queue's `m_array`). A slot is
//!   cleared when its item is taken, so the non-null ones are what waits.
//!
//! Every chain is cycle-checked and every count bounded; what cannot be read is said, never guessed.

use super::context::Context;
use super::error::DotnetError;
use super::facts;
use super::gc::names::sos_heap_name;
use super::objects::{self, TypeNamer};
use super::statics::Statics;
use super::target::Result;
use std::collections::{BTreeMap, HashSet};

const PORTABLE_THREAD_POOL: &str = "System.Threading.PortableThreadPool";
const THREAD_POOL: &str = "System.Threading.ThreadPool";
const WORK_STEALING_QUEUE_LIST: &str = "System.Threading.ThreadPoolWorkQueue+WorkStealingQueueList";
/// Segments followed per queue at most.
const MAX_SEGMENTS: usize = 1 << 12;
/// Elements read per array at most (a segment's slots, a local queue's array).
const MAX_ARRAY: u64 = 1 << 20;
/// Work items kept in all at most.
const MAX_ITEMS: usize = 1 << 20;
/// Local queues read at most.
const MAX_LOCAL_QUEUES: u64 = 1 << 12;
/// Global queues of `_assignableWorkItemQueues` read at most.
const MAX_ASSIGNABLE: u64 = 1 << 12;

/// The pool's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PoolCounters {
    /// Workers processing work (SOS's Running).
    pub(crate) processing: u32,
    /// Workers that exist (SOS's Total).
    pub(crate) existing: u32,
    pub(crate) min: u32,
    pub(crate) max: u32,
    pub(crate) cpu_utilization: u32,
}

impl PoolCounters {
    /// The `ThreadCounts` word and the limits, as CoreLib keeps them.
    pub(crate) fn from_words(counts: u64, min: u64, max: u64, cpu: u64) -> PoolCounters {
        PoolCounters { processing: (counts & 0xffff) as u32, existing: ((counts >> 16) & 0xffff) as u32, min: min as u16 as u32, max: max as u16 as u32, cpu_utilization: cpu as u32 }
    }

    pub(crate) fn idle(&self) -> u32 {
        self.existing.saturating_sub(self.processing)
    }
}

/// Which queue a work item waits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Queue {
    /// The global queue (`workItems`, and the low-priority and assignable ones).
    Global,
    HighPriority,
    /// A worker's local queue (its `WorkStealingQueue`, at this address).
    Local(u64),
}

/// One queued work item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WorkItem {
    pub(crate) queue: Queue,
    pub(crate) object: u64,
    pub(crate) method_table: u64,
}

/// The queued work items, as far as they were read.
#[derive(Debug, Clone, Default)]
pub(crate) struct WorkQueues {
    pub(crate) items: Vec<WorkItem>,
    /// Every local queue, in `s_queues` order (empty ones too).
    pub(crate) local_queues: Vec<u64>,
    /// What could not be read (a queue left out, a list cut).
    pub(crate) problems: Vec<String>,
}

impl WorkQueues {
    pub(crate) fn count(&self, queue: impl Fn(&Queue) -> bool) -> usize {
        self.items.iter().filter(|i| queue(&i.queue)).count()
    }
}

/// Work items of one type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WorkItemType {
    /// As SOS's heap commands print it (`threadpool -stat`).
    pub(crate) name: String,
    pub(crate) method_table: u64,
    pub(crate) count: usize,
}

/// What knot read of the pool.
#[derive(Debug, Clone)]
pub(crate) struct PoolReading {
    pub(crate) counters: std::result::Result<PoolCounters, String>,
    pub(crate) queues: std::result::Result<WorkQueues, String>,
    /// The queued items by type, most first.
    pub(crate) types: Vec<WorkItemType>,
}

/// Reads the pool of the runtime in `c`.
pub(crate) fn read(c: &Context<'_>) -> PoolReading {
    let v = &c.version;
    let none = |why: String| PoolReading { counters: Err(why.clone()), queues: Err(why), types: Vec::new() };
    let all = match facts::builtin() {
        Ok(all) => all,
        Err(e) => return none(e.to_string()),
    };
    let Some(build) = facts::lookup(all, v.build_id.as_deref(), &v.product, v.file_version.as_deref()) else {
        return none(format!("no per-build facts (the FieldDesc layout) for runtime build {} {}", v.product, v.build_id.as_deref().unwrap_or("(no build-id)")));
    };
    let t = c.target();
    let namer = TypeNamer::new(&t, &c.image);
    let s = Statics::new(&t, &namer, &build.layout);
    read_with(&s)
}

/// As [`read`], with a statics reader.
pub(crate) fn read_with(s: &Statics) -> PoolReading {
    let counters = counters(s).map_err(|e| e.to_string());
    let queues = queues(s).map_err(|e| e.to_string());
    let types = queues.as_ref().map(|q| types(s, q)).unwrap_or_default();
    PoolReading { counters, queues, types }
}

/// The counters of `PortableThreadPool.ThreadPoolInstance`.
pub(crate) fn counters(s: &Statics) -> Result<PoolCounters> {
    let core = s.core_lib()?;
    let class = s.class(core, PORTABLE_THREAD_POOL)?;
    let pool = s.static_object(class, "ThreadPoolInstance")?;
    if pool == 0 {
        return Err(DotnetError::Invalid { what: "PortableThreadPool.ThreadPoolInstance", at: class, why: "null: the thread pool was never started".into() });
    }
    let counts = s.object_primitive(pool, "_separated.counts._data")?;
    let min = s.object_primitive(pool, "_minThreads")?;
    let max = s.object_primitive(pool, "_maxThreads")?;
    let cpu = s.object_primitive(pool, "_cpuUtilization")?;
    Ok(PoolCounters::from_words(counts, min, max, cpu))
}

/// The queued work items: the global queues of `ThreadPool.s_workQueue` and every local queue.
pub(crate) fn queues(s: &Statics) -> Result<WorkQueues> {
    let core = s.core_lib()?;
    let pool = s.class(core, THREAD_POOL)?;
    let work_queue = s.static_object(pool, "s_workQueue")?;
    if work_queue == 0 {
        return Err(DotnetError::Invalid { what: "ThreadPool.s_workQueue", at: pool, why: "null".into() });
    }
    let mut out = WorkQueues::default();
    let wq_mt = objects::method_table(s.target(), work_queue)?;
    for (field, queue) in [("highPriorityWorkItems", Queue::HighPriority), ("workItems", Queue::Global), ("lowPriorityWorkItems", Queue::Global)] {
        if s.instance_field(wq_mt, field).is_err() {
            // Not in this CoreLib (the low-priority queue is an experiment's).
            continue;
        }
        match s.object_field(work_queue, field).and_then(|q| concurrent_queue(s, q, queue, &mut out.items)) {
            Ok(()) => {}
            Err(e) => out.problems.push(format!("ThreadPoolWorkQueue.{field}: {e}")),
        }
    }
    if s.instance_field(wq_mt, "_assignableWorkItemQueues").is_ok() {
        match s.object_field(work_queue, "_assignableWorkItemQueues").and_then(|a| reference_array(s, a, MAX_ASSIGNABLE)) {
            Ok(queues) => {
                for q in queues.into_iter().filter(|&q| q != 0) {
                    if let Err(e) = concurrent_queue(s, q, Queue::Global, &mut out.items) {
                        out.problems.push(format!("ThreadPoolWorkQueue._assignableWorkItemQueues: {e}"));
                    }
                }
            }
            Err(e) => out.problems.push(format!("ThreadPoolWorkQueue._assignableWorkItemQueues: {e}")),
        }
    }
    match local_queues(s, core) {
        Ok(queues) => {
            for q in queues.into_iter().filter(|&q| q != 0) {
                out.local_queues.push(q);
                match s.object_field(q, "m_array").and_then(|a| reference_array(s, a, MAX_ARRAY)) {
                    Ok(items) => push_items(s, Queue::Local(q), items.into_iter().filter(|&i| i != 0), &mut out.items)?,
                    Err(e) => out.problems.push(format!("WorkStealingQueue at {q:#x}: {e}")),
                }
            }
        }
        Err(e) => out.problems.push(format!("the workers' local queues (WorkStealingQueueList.s_queues): {e}")),
    }
    Ok(out)
}

fn local_queues(s: &Statics, core: u64) -> Result<Vec<u64>> {
    let list = s.class(core, WORK_STEALING_QUEUE_LIST)?;
    let queues = s.static_object(list, "s_queues")?;
    if queues == 0 {
        return Ok(Vec::new());
    }
    reference_array(s, queues, MAX_LOCAL_QUEUES)
}

fn push_items(s: &Statics, queue: Queue, objects: impl Iterator<Item = u64>, out: &mut Vec<WorkItem>) -> Result<()> {
    for object in objects {
        if out.len() >= MAX_ITEMS {
            return Err(DotnetError::TooMany { what: "queued work items", at: object, limit: MAX_ITEMS as u64 });
        }
        let method_table = objects::method_table(s.target(), object)?;
        out.push(WorkItem { queue, object, method_table });
    }
    Ok(())
}

/// The items of a `ConcurrentQueue<object>`: every segment from `_head` along `_nextSegment`,
/// each non-null `Item` of its `_slots`.
fn concurrent_queue(s: &Statics, queue: u64, kind: Queue, out: &mut Vec<WorkItem>) -> Result<()> {
    if queue == 0 {
        return Ok(());
    }
    let t = s.target();
    let mut segment = s.object_field(queue, "_head")?;
    let mut seen = HashSet::new();
    while segment != 0 {
        if !seen.insert(segment) {
            return Err(DotnetError::Cycle { what: "ConcurrentQueue segments", at: segment });
        }
        if seen.len() > MAX_SEGMENTS {
            return Err(DotnetError::TooMany { what: "ConcurrentQueue segments", at: queue, limit: MAX_SEGMENTS as u64 });
        }
        let slots = s.object_field(segment, "_slots")?;
        if slots != 0 {
            let array = ArrayView::read(s, slots)?;
            // A slot is a struct: its `Item` field's offset inside it, from its own FieldDescs.
            let item = s.instance_field(array.element_type, "Item")?;
            if array.component_size < 8 || item.offset > array.component_size - 8 {
                return Err(DotnetError::Invalid { what: "ConcurrentQueue slots", at: slots, why: format!("Item at {:#x} outside a {}-byte slot", item.offset, array.component_size) });
            }
            let bytes = t.read_bytes(array.data, (array.length * array.component_size) as usize, "ConcurrentQueue slots")?;
            let items = bytes.chunks_exact(array.component_size as usize).map(|slot| {
                let o = item.offset as usize;
                u64::from_le_bytes(slot[o..o + 8].try_into().unwrap_or([0; 8]))
            });
            push_items(s, kind, items.filter(|&i| i != 0), out)?;
        }
        segment = s.object_field(segment, "_nextSegment")?;
    }
    Ok(())
}

/// An array object: its length, element size and type, and where its elements start.
struct ArrayView {
    length: u64,
    component_size: u64,
    element_type: u64,
    data: u64,
}

impl ArrayView {
    fn read(s: &Statics, array: u64) -> Result<ArrayView> {
        let t = s.target();
        let mt = objects::method_table(t, array)?;
        let flags = t.field_u32(mt, "MethodTable", "MTFlags")?;
        // A single-dimension array: category array and "if array then SZ array", with a component size.
        if flags & 0x000C_0000 != 0x0008_0000 || flags & 0x0002_0000 == 0 || flags & 0x8000_0000 == 0 {
            return Err(DotnetError::Invalid { what: "array", at: array, why: format!("MethodTable {mt:#x} is not a one-dimension array's") });
        }
        let length = t.field_u32(array, "Array", "m_NumComponents")? as u64;
        if length > MAX_ARRAY {
            return Err(DotnetError::TooMany { what: "array elements", at: array, limit: MAX_ARRAY });
        }
        let component_size = (flags & 0xffff) as u64;
        let element_type = t.field_ptr(mt, "MethodTable", "PerInstInfo")?;
        Ok(ArrayView { length, component_size, element_type, data: array.wrapping_add(t.size("Array")?) })
    }
}

/// The references an object array holds, in order (nulls included).
fn reference_array(s: &Statics, array: u64, limit: u64) -> Result<Vec<u64>> {
    if array == 0 {
        return Ok(Vec::new());
    }
    let a = ArrayView::read(s, array)?;
    if a.component_size != 8 {
        return Err(DotnetError::Invalid { what: "array", at: array, why: format!("elements of {} bytes, not references", a.component_size) });
    }
    if a.length > limit {
        return Err(DotnetError::TooMany { what: "array elements", at: array, limit });
    }
    let bytes = s.target().read_bytes(a.data, (a.length * 8) as usize, "array elements")?;
    Ok(bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect())
}

/// The queued items by type (SOS `threadpool -stat`'s rows), most first, then by name.
fn types(s: &Statics, q: &WorkQueues) -> Vec<WorkItemType> {
    let mut by_mt: BTreeMap<u64, usize> = BTreeMap::new();
    for i in &q.items {
        *by_mt.entry(i.method_table).or_default() += 1;
    }
    let mut out: Vec<WorkItemType> = by_mt
        .into_iter()
        .map(|(mt, count)| {
            let name = s.namer().type_name(mt).map(|n| sos_heap_name(&n)).unwrap_or_else(|e| format!("<unnamed type at {mt:#x}: {e}>"));
            WorkItemType { name, method_table: mt, count }
        })
        .collect();
    out.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.name.cmp(&b.name)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_counts_split_as_corelib_packs_them() {
        // 8 existing, 8 processing, goal 8 (bits 32-47, not read).
        let c = PoolCounters::from_words(0x0000_0008_0008_0008, 8, 8, 0);
        assert_eq!((c.processing, c.existing, c.idle(), c.min, c.max), (8, 8, 0, 8, 8));
        let c = PoolCounters::from_words(0x0002_0000, 2, 0x7fff, 3);
        assert_eq!((c.processing, c.existing, c.idle(), c.max, c.cpu_utilization), (0, 2, 2, 32767, 3));
        // More processing than existing (a torn or corrupt word) never underflows.
        assert_eq!(PoolCounters::from_words(0x0001_0005, 0, 0, 0).idle(), 0);
    }
}
