//! The thread pool as SOS `threadpool` reads it, from CoreLib's own objects reached through
//! their statics ([`crate::runtimes::dotnet::types::statics`]):
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

use crate::runtimes::dotnet::contract::context::Context;
use crate::runtimes::dotnet::error::DotnetError;
use crate::runtimes::dotnet::contract::facts;
use crate::runtimes::dotnet::gc::names::sos_heap_name;
use crate::runtimes::dotnet::types::objects::{self, TypeNamer};
use crate::runtimes::dotnet::types::statics::Statics;
use crate::runtimes::dotnet::contract::target::Result;
use crate::runtimes::dotnet::threads;
use std::collections::{BTreeMap, HashSet};

const PORTABLE_THREAD_POOL: &str = "System.Threading.PortableThreadPool";
const THREAD_POOL: &str = "System.Threading.ThreadPool";
const WORK_STEALING_QUEUE_LIST: &str = "System.Threading.ThreadPoolWorkQueue+WorkStealingQueueList";
const THREAD_LOCALS: &str = "System.Threading.ThreadPoolWorkQueueThreadLocals";
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
    /// The OS tid of the thread each local queue belongs to, where its thread static says so.
    pub(crate) owners: BTreeMap<u64, u32>,
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

impl PoolReading {
    /// Work items waiting, when every queue was read.
    pub(crate) fn queued(&self) -> Option<u32> {
        self.queues.as_ref().ok().filter(|q| q.problems.is_empty()).map(|q| q.items.len() as u32)
    }

    /// The queue a `System.Threading.TimerQueue` waits in, when one is queued (the timer thread
    /// queues it, to the high-priority queue, when timers are due; a worker fires them).
    pub(crate) fn timer_queue(&self) -> Option<&'static str> {
        let mt = self.types.iter().find(|t| t.name == "System.Threading.TimerQueue")?.method_table;
        let item = self.queues.as_ref().ok()?.items.iter().find(|i| i.method_table == mt)?;
        Some(match item.queue {
            Queue::Global => "global queue",
            Queue::HighPriority => "high-priority queue",
            Queue::Local(_) => "local queue of a worker",
        })
    }
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
    let namer = TypeNamer::of(&t, c);
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
    let work_queue = match s.static_object(pool, "s_workQueue") {
        // ThreadPool's static constructor makes s_workQueue, and queueing anything reads it:
        // statics never initialized mean nothing was ever queued.
        Err(DotnetError::StaticsNotInitialized { .. }) => return Ok(WorkQueues::default()),
        other => other?,
    };
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
                let read = s
                    .object_field(q, "m_array")
                    .and_then(|a| reference_array(s, a, MAX_ARRAY))
                    .and_then(|items| push_items(s, Queue::Local(q), items.into_iter().filter(|&i| i != 0), &mut out.items));
                if let Err(e) = read {
                    out.problems.push(format!("WorkStealingQueue at {q:#x}: {e}"));
                }
            }
        }
        Err(e) => out.problems.push(format!("the workers' local queues (WorkStealingQueueList.s_queues): {e}")),
    }
    if !out.local_queues.is_empty() {
        out.owners = owners(s, core);
    }
    Ok(out)
}

/// Each thread's local queue: its `ThreadPoolWorkQueueThreadLocals.threadLocals` thread static's
/// `workStealingQueue`. A thread whose static cannot be read owns none that knot can tell.
fn owners(s: &Statics, core: u64) -> BTreeMap<u64, u32> {
    let t = s.target();
    let mut out = BTreeMap::new();
    let Ok(class) = s.class(core, THREAD_LOCALS) else { return out };
    let Ok(threads) = threads::thread_store(t).and_then(|ts| threads::thread_addresses(t, ts)) else { return out };
    for thread in threads {
        let Ok(th) = threads::read_thread(t, thread, 0, 0) else { continue };
        let queue = s
            .thread_static_field(class, "threadLocals", thread)
            .and_then(|f| t.read_ptr(f.address, "ThreadPoolWorkQueueThreadLocals.threadLocals"))
            .and_then(|locals| if locals == 0 { Ok(0) } else { s.object_field(locals, "workStealingQueue") });
        if let Ok(q) = queue
            && q != 0
            && th.os_tid != 0
        {
            out.insert(q, th.os_tid);
        }
    }
    out
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
    use crate::process::{Locator, Process};
    use crate::tests::patched::Patched;
    use crate::runtimes::dotnet::contract::target::Target;

    /// The committed pool_queue dump (4 blocked workers; 9 global items, 5 on worker 0's local queue).
    fn with_pool_queue(f: impl FnOnce(&Context<'_>)) {
        let Some(d) = knot_samples::dotnet::dumps("sos/threadpool-stat.txt", false).into_iter().find(|d| d.sample == "pool_queue") else {
            panic!("the committed pool_queue dump is missing");
        };
        let locator = Locator { sysroot: d.sysroot.clone(), search_dirs: d.search_dirs.clone(), ..Locator::default() };
        let process = Process::open(&d.core, &locator).expect("open the pool_queue core");
        let c = Context::open(&process, &locator).unwrap_or_else(|_| panic!("no runtime in pool_queue"));
        f(&c);
    }

    /// Reads the pool with `patch(statics over the real memory)` applied to the memory.
    fn read_patched(c: &Context<'_>, patch: impl FnOnce(&Statics) -> Vec<(u64, Vec<u8>)>) -> PoolReading {
        let v = &c.version;
        let build = facts::lookup(facts::builtin().expect("facts"), v.build_id.as_deref(), &v.product, v.file_version.as_deref()).expect("10.0.12 facts");
        let t = c.target();
        let namer = TypeNamer::of(&t, c);
        let patches = patch(&Statics::new(&t, &namer, &build.layout));
        let mem = Patched { inner: &c.memory, patches };
        let pt = Target::borrowed(&mem, &c.descriptor, &c.pointer_data);
        let pnamer = TypeNamer::new(&pt, &c.image);
        read_with(&Statics::new(&pt, &pnamer, &build.layout))
    }

    fn word(v: u64) -> Vec<u8> {
        v.to_le_bytes().to_vec()
    }

    /// The head segment of `ThreadPool.s_workQueue.workItems`, and where its `_nextSegment` is.
    fn head_segment(s: &Statics) -> (u64, u64) {
        let core = s.core_lib().expect("CoreLib");
        let wq = s.static_object(s.class(core, THREAD_POOL).expect("ThreadPool"), "s_workQueue").expect("s_workQueue");
        let head = s.object_field(s.object_field(wq, "workItems").expect("workItems"), "_head").expect("_head");
        let (next, _) = s.instance_path(objects::method_table(s.target(), head).expect("MT"), "_nextSegment").expect("_nextSegment");
        (head, head + next)
    }

    #[test]
    fn the_unpatched_dump_reads_as_sos() {
        with_pool_queue(|c| {
            let r = read_patched(c, |_| Vec::new());
            let k = r.counters.expect("counters");
            assert_eq!((k.processing, k.idle(), k.min, k.max), (4, 0, 4, 4));
            let q = r.queues.expect("queues");
            assert!(q.problems.is_empty(), "{:?}", q.problems);
            assert_eq!((q.count(|k| *k == Queue::Global), q.count(|k| matches!(k, Queue::Local(_)))), (9, 5));
            assert_eq!(r.types.iter().map(|t| (t.name.as_str(), t.count)).collect::<Vec<_>>(), [("System.Threading.QueueUserWorkItemCallbackDefaultContext", 6), ("Knot.Samples.PoolQueue.LedgerFlush", 5), ("System.Threading.Tasks.Task", 3)]);
        });
    }

    #[test]
    fn a_cyclic_segment_chain_is_cut_and_said() {
        with_pool_queue(|c| {
            let r = read_patched(c, |s| {
                let (head, next) = head_segment(s);
                vec![(next, word(head))]
            });
            let q = r.queues.as_ref().expect("the other queues are read");
            assert!(q.problems.iter().any(|p| p.contains("workItems") && p.contains("cycle")), "{:?}", q.problems);
            assert_eq!(r.queued(), None, "a total with a queue left out is not given");
            assert_eq!(q.count(|k| matches!(k, Queue::Local(_))), 5, "the local queue is still read");
        });
    }

    #[test]
    fn a_huge_local_queue_array_is_refused_before_it_is_read() {
        with_pool_queue(|c| {
            let r = read_patched(c, |s| {
                let core = s.core_lib().expect("CoreLib");
                let queues = s.static_object(s.class(core, WORK_STEALING_QUEUE_LIST).expect("list"), "s_queues").expect("s_queues");
                let first = reference_array(s, queues, 16).expect("queues")[0];
                let array = s.object_field(first, "m_array").expect("m_array");
                vec![(array + s.target().offset("Array", "m_NumComponents").expect("offset"), 0xffff_fff0u32.to_le_bytes().to_vec())]
            });
            let q = r.queues.expect("queues");
            assert!(q.problems.iter().any(|p| p.contains("WorkStealingQueue") && p.contains("more than")), "{:?}", q.problems);
            assert_eq!(q.count(|k| *k == Queue::Global), 9);
        });
    }

    #[test]
    fn statics_pointing_at_garbage_leave_the_counters_unread_with_the_reason() {
        with_pool_queue(|c| {
            let r = read_patched(c, |s| {
                let t = s.target();
                let core = s.core_lib().expect("CoreLib");
                let mt = s.class(core, PORTABLE_THREAD_POOL).expect("PortableThreadPool");
                let aux = t.field_ptr(mt, "MethodTable", "AuxiliaryData").expect("aux");
                let info = aux - t.size("DynamicStaticsInfo").expect("size");
                vec![(info + t.offset("DynamicStaticsInfo", "GCStatics").expect("offset"), word(0x4141_4141_4141_4140))]
            });
            let e = r.counters.expect_err("garbage statics give no counters");
            assert!(e.contains("0x4141414141414"), "{e}");
            assert!(r.queues.is_ok(), "the queues hang off other statics");
        });
    }

    #[test]
    fn a_work_item_that_is_no_object_is_a_problem_not_a_panic() {
        with_pool_queue(|c| {
            let r = read_patched(c, |s| {
                let core = s.core_lib().expect("CoreLib");
                let queues = s.static_object(s.class(core, WORK_STEALING_QUEUE_LIST).expect("list"), "s_queues").expect("s_queues");
                let first = reference_array(s, queues, 16).expect("queues")[0];
                let array = s.object_field(first, "m_array").expect("m_array");
                let data = array + s.target().size("Array").expect("size");
                vec![(data, word(0x10))]
            });
            let q = r.queues.expect("queues");
            assert!(q.problems.iter().any(|p| p.contains("WorkStealingQueue")), "{:?}", q.problems);
        });
    }

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
