//! Lock facts: what knot established about one lock, and how sure it is of the owner.

use super::evidence::{Evidence, FrameHold, Inference, UnknownOwner};
use crate::hex::Hex;
use schemars::JsonSchema;
use serde::Serialize;

/// What kind of lock a [`LockFact`] is about (in JSON, its snake_case name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LockKind {
    Mutex,
    Rwlock,
    Cond,
    Sem,
    /// A thread waiting for another to exit (`pthread_join`).
    Join,
    /// A `pthread_barrier_t`: its waiters wait for the rest of its parties to arrive.
    Barrier,
    /// A futex word: a lock with no owner field, or one no analyzer knows.
    Futex,
    /// A .NET Monitor (a sync block or a thin lock).
    Monitor,
    /// A .NET `System.Threading.Lock`.
    Lock,
    /// A .NET Monitor.Wait: waiting to be pulsed.
    MonitorWait,
    /// A .NET task waited for (`Task.Wait`, `.Result`).
    Task,
    /// A .NET `System.Threading.SemaphoreSlim`: threads in `Wait()` and async flows in
    /// `WaitAsync` wait for its count; it records no holder.
    SemaphoreSlim,
    /// A .NET `System.Threading.ReaderWriterLockSlim`: a writer waits for every holder (its
    /// readers, the upgradeable holder), a reader for the writer.
    RwLockSlim,
    /// The .NET runtime's lock on a class's initialiser (its static constructor): held by the
    /// thread running it, waited for by every other thread that needs the class.
    ClassInit,
    /// A pool of resources (connections, objects) at its maximum: its waiters wait for any
    /// holder of an item to give it back.
    Pool,
}

impl LockKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LockKind::Mutex => "mutex",
            LockKind::Rwlock => "rwlock",
            LockKind::Cond => "cond",
            LockKind::Sem => "sem",
            LockKind::Join => "join",
            LockKind::Barrier => "barrier",
            LockKind::Futex => "futex",
            LockKind::Monitor => "monitor",
            LockKind::Lock => "lock",
            LockKind::MonitorWait => "monitor_wait",
            LockKind::Task => "task",
            LockKind::SemaphoreSlim => "semaphore_slim",
            LockKind::RwLockSlim => "rwlock_slim",
            LockKind::ClassInit => "class_init",
            LockKind::Pool => "pool",
        }
    }

    /// A lock one thread holds at a time (or, for a join, a thread one waits out): waiting for
    /// it is contention.
    pub fn is_exclusive(self) -> bool {
        // A SemaphoreSlim is waited for only when its count is 0: its waiters contend for it.
        matches!(
            self,
            LockKind::Mutex | LockKind::Rwlock | LockKind::Futex | LockKind::Join | LockKind::Monitor | LockKind::Lock | LockKind::SemaphoreSlim | LockKind::RwLockSlim | LockKind::ClassInit | LockKind::Pool
        )
    }

    /// A lock on a managed object (a Monitor, a Lock, a Monitor.Wait's object).
    pub fn is_on_managed_object(self) -> bool {
        matches!(self, LockKind::Monitor | LockKind::Lock | LockKind::MonitorWait)
    }
}

impl std::fmt::Display for LockKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for LockKind {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for LockKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for LockKind {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

/// Who holds a lock, and how that is known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(tag = "certainty", rename_all = "snake_case")]
pub enum Owner {
    /// The lock records its owner (a pthread mutex's `__owner`, a PI futex word's tid, the
    /// thread a join waits for).
    Known { tid: u32 },
    /// The lock records no owner; this thread is the only plausible one, for the reason given.
    Inferred {
        tid: u32,
        #[schemars(with = "String")]
        evidence: Inference,
    },
    /// The lock names an owner that is not among the dump's threads: it exited holding it.
    Exited { tid: u32 },
    /// A process-shared lock whose owner is not a thread of this process: a thread of another
    /// process (its tid, in the numbering the lock records).
    OtherProcess { tid: u32 },
    /// Held for reading by this many threads. Readers are not recorded: `reader_tids` are the
    /// threads inferred to read it (their stack or saved registers point into the lock while
    /// they are not waiting for it), each with its `reader_evidence`; candidates, never facts.
    Readers {
        count: u32,
        #[serde(default)]
        reader_tids: Vec<u32>,
        #[serde(default)]
        #[schemars(with = "Vec<String>")]
        reader_evidence: Vec<FrameHold>,
    },
    /// A lock with no owner by nature (condition variable, semaphore).
    None,
    /// Not knowable from the dump, for the reason given.
    Unknown {
        #[schemars(with = "String")]
        why: UnknownOwner,
    },
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

/// One who must act for a wait on a lock to end beside (or instead of) its `owner`: a holder of a
/// lock that records several (an rwlock's readers, a semaphore's or a pool's holders, the
/// collector's threads). An out-edge of the lock's node in the wait-for graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Holder {
    pub tid: u32,
    /// `known` (the lock or the runtime records it) or `inferred` (from `evidence`).
    #[serde(flatten)]
    pub certainty: Certainty,
}

/// How a holder or an edge is known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(tag = "certainty", rename_all = "snake_case")]
pub enum Certainty {
    /// Recorded by the lock or the runtime.
    Known,
    /// Not recorded; inferred from the evidence given.
    Inferred {
        #[schemars(with = "String")]
        evidence: Inference,
    },
}

impl Holder {
    pub fn known(tid: u32) -> Holder {
        Holder { tid, certainty: Certainty::Known }
    }

    pub fn inferred(tid: u32, evidence: Inference) -> Holder {
        Holder { tid, certainty: Certainty::Inferred { evidence } }
    }

    pub fn is_inferred(&self) -> bool {
        matches!(self.certainty, Certainty::Inferred { .. })
    }
}

/// When a wait on a lock with several holders ends (in JSON, and in `analyzers/pools.toml`, its
/// snake_case name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Release {
    /// When any one holder acts: a semaphore's or a pool's holder gives back what it holds, an
    /// event is set by any thread that may set it.
    Any,
    /// Only when every holder has acted: a writer waits for all of an rwlock's readers, a
    /// collection ends when all the collector's threads are done.
    All,
}

/// One out-edge of a lock's node in the wait-for graph: a thread that must act, and whether
/// that is inferred rather than recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Edge {
    pub(crate) tid: u32,
    pub(crate) inferred: bool,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LockFact {
    /// Stable within a report: `mutex@0x…`, `rwlock@0x…`, `join@<tid>`.
    pub id: String,
    /// mutex, rwlock, cond, sem, join or futex.
    #[schemars(with = "String")]
    pub kind: LockKind,
    // A lock's label is the report's words for its facts (`report::words::label_locks`: from
    // `native` or `managed`).
    /// What the lock is, for people: `pthread mutex (recursive)`, `Rust std::sync::Mutex`; a .NET
    /// lock's names the object that holds it in a field, as the text does: `Monitor on
    /// System.Object (LifetimeScope._synchRoot, Tag "root"; sync block 3, MonitorHeld 47, recursion 1)`.
    pub label: String,
    pub address: Option<Hex>,
    /// The data symbol at the lock's address (`lock_a`), when the lock is a named global.
    pub name: Option<String>,
    pub owner: Owner,
    /// The owner's tid when known or inferred (null otherwise); see `owner.certainty`.
    pub owner_tid: Option<u32>,
    /// Every other thread that must act for a wait on it to end (absent when `owner` says it
    /// all): a semaphore's, a pool's or the collector's holders, each known or inferred.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holders: Vec<Holder>,
    /// With `holders`: whether a wait ends when any one of the holders acts or only when all
    /// have (absent: any; an rwlock's readers: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<Release>,
    /// Threads blocked acquiring (or waiting on) it, ascending.
    pub waiter_tids: Vec<u32>,
    /// The memory and frames the facts come from.
    #[schemars(with = "Vec<String>")]
    pub evidence: Vec<Evidence>,
    /// How many times the owner holds it (recursive mutexes).
    pub recursion: Option<u32>,
    /// Readers holding it (rwlocks).
    pub readers: Option<u32>,
    /// For a .NET lock (kind monitor, lock, monitor_wait or task): the object, its type and SOS's
    /// syncblk columns.
    pub managed: Option<ManagedLock>,
    /// For a native lock: what its reader found it to be, as data (`label` says it).
    #[serde(skip)]
    #[schemars(skip)]
    pub(crate) native: Option<NativeLock>,
    /// The convoy's stable key when some thread waits on the lock (`convoy:<16 hex digits>`):
    /// the same wedge gives the same key in every dump; see docs/report-fields.md.
    pub signature: Option<String>,
}

impl LockFact {
    /// The lock's out-edges in the wait-for graph — who must act for a wait on it to end — and
    /// whether any one of them suffices or all must: its owner when known or inferred, an
    /// rwlock's inferred readers when every reader is accounted for (all must leave), and its
    /// `holders`. No edge for a lock whose owner is unknown, gone or outside the process.
    pub(crate) fn edges(&self) -> (Vec<Edge>, Release) {
        let mut edges = Vec::with_capacity(1 + self.holders.len());
        let mut release = self.release.unwrap_or(Release::Any);
        match &self.owner {
            Owner::Known { tid } => edges.push(Edge { tid: *tid, inferred: false }),
            Owner::Inferred { tid, .. } => edges.push(Edge { tid: *tid, inferred: true }),
            // Candidates only: an edge to each when they are as many as the readers, never
            // when some reader is not among them (it may be the one that leaves).
            Owner::Readers { count, reader_tids, .. } if *count > 0 && reader_tids.len() == *count as usize => {
                edges.extend(reader_tids.iter().map(|&tid| Edge { tid, inferred: true }));
                release = self.release.unwrap_or(Release::All);
            }
            _ => {}
        }
        for h in &self.holders {
            if !edges.iter().any(|e| e.tid == h.tid) {
                edges.push(Edge { tid: h.tid, inferred: h.is_inferred() });
            }
        }
        (edges, release)
    }

    /// A lock nobody left can release: its owner exited holding it. Its waiters wait for good.
    pub(crate) fn released_by_nobody(&self) -> bool {
        matches!(self.owner, Owner::Exited { .. })
    }
}

#[cfg(test)]
impl LockFact {
    /// A test's pthread mutex `id`, named `name`, held by `owner` (unknown when `None`) with
    /// `waiters` blocked on it.
    pub(crate) fn test_mutex(id: &str, name: &str, owner: Option<u32>, waiters: &[u32]) -> LockFact {
        LockFact {
            id: id.into(),
            kind: LockKind::Mutex,
            label: "pthread mutex (normal)".into(),
            address: None,
            name: Some(name.into()),
            owner: owner.map_or(Owner::Unknown { why: UnknownOwner::NoLayout }, |tid| Owner::Known { tid }),
            owner_tid: owner,
            holders: vec![],
            release: None,
            waiter_tids: waiters.to_vec(),
            evidence: vec![],
            recursion: None,
            readers: None,
            native: None,
            managed: None,
            signature: None,
        }
    }
}

/// Where a .NET lock's state lives (in JSON, its snake_case name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LockStorage {
    /// An inflated Monitor: an `AwareLock` in a sync block.
    SyncBlock,
    /// A Monitor in the object header.
    ThinLock,
    /// A `System.Threading.Lock` object (found through a blocked thread's blocking record).
    LockObject,
    /// A task waited for (`ManagedLock::task`).
    Task,
    /// A `System.Threading.SemaphoreSlim` (`ManagedLock::current_count`, `async_waiters`).
    SemaphoreSlim,
    /// A `System.Threading.ReaderWriterLockSlim` (`ManagedLock::rwlock`).
    RwLockSlim,
    /// A class's initialiser lock (`object` is the class's MethodTable, `type_name` the class).
    ClassInit,
    /// A pool of resources (`ManagedLock::pool`).
    Pool,
}

impl LockStorage {
    pub fn as_str(self) -> &'static str {
        match self {
            LockStorage::SyncBlock => "sync_block",
            LockStorage::ThinLock => "thin_lock",
            LockStorage::LockObject => "lock_object",
            LockStorage::Task => "task",
            LockStorage::SemaphoreSlim => "semaphore_slim",
            LockStorage::RwLockSlim => "rwlock_slim",
            LockStorage::ClassInit => "class_init",
            LockStorage::Pool => "pool",
        }
    }
}

impl PartialEq<&str> for LockStorage {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

// One representation from the runtime's reading (`RuntimeReading::monitors`) to the report
// (`LockFact::managed`): the reader fills what the runtime records, the merge adds the owner's
// name, the heap walk the referrers. (The doc comment below is the schema's description.)
/// What a .NET lock is, beside the generic lock fact: SOS's `syncblk` columns for a Monitor,
/// `System.Threading.Lock`'s fields for a Lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ManagedLock {
    /// sync_block (an inflated Monitor), thin_lock (a Monitor in the object header) or
    /// lock_object (a `System.Threading.Lock`).
    #[schemars(with = "String")]
    pub storage: LockStorage,
    /// The locked object (for a Lock, the Lock object itself).
    pub object: Hex,
    /// The object's type as SOS prints it (`System.Object`, `System.Threading.Lock`).
    pub type_name: Option<String>,
    /// The sync block's index in the sync block table (syncblk's Index column).
    pub sync_block_index: Option<u32>,
    pub sync_block: Option<Hex>,
    /// The owner's runtime `Thread` (clrthreads' ThreadOBJ).
    #[serde(skip)]
    pub owner_thread: Option<u64>,
    /// The owner's OS tid, as the runtime records it.
    #[serde(skip)]
    pub owner_os_tid: Option<u32>,
    /// The owner's managed thread id.
    pub owner_managed_id: Option<u32>,
    /// The owner's managed thread name (`Thread.Name`).
    pub owner_name: Option<String>,
    /// Times the owner holds it (syncblk's Recursion column; 0 = not held).
    pub recursion: u32,
    /// syncblk's MonitorHeld: 1 when held, plus 2 per waiting thread.
    pub monitor_held: Option<u32>,
    /// Threads waiting to enter, by the lock's own count.
    pub waiter_count: Option<u32>,
    /// OS tids of the threads whose blocking records say they wait to enter it.
    #[serde(skip)]
    pub waiters: Vec<u32>,
    /// Threads in Monitor.Wait on the object (they released it and wait to be pulsed).
    pub pulse_waiters: Vec<u32>,
    /// For a lock of kind `task` (storage `task`): the task waited for (`object` and
    /// `type_name` are the task's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<ManagedTask>,
    /// The heap objects whose fields refer to the locked object, the one that names the lock
    /// best first (the application's types before the framework's, objects before arrays).
    pub referrers: Vec<crate::runtimes::dotnet::gc::report::ReferrerReport>,
    /// For a SemaphoreSlim: `m_currentCount` (0: taken; its waiters wait for a `Release`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_count: Option<i32>,
    /// For a SemaphoreSlim: `m_maxCount`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_count: Option<i32>,
    /// For a SemaphoreSlim: the async flows in `WaitAsync`, in line order (each a TaskNode and
    /// the async stack that awaits it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub async_waiters: Vec<AsyncWaiter>,
    /// For a Monitor.Wait inside `Barrier.SignalAndWait`: the Barrier its waiters signalled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub barrier: Option<BarrierFacts>,
    /// Work queued to the thread pool that would end this wait, inferred: no thread holds it,
    /// and what would release it waits in the pool's queue (a socket event, a Parallel replica).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub released_by_queued: Option<QueuedRelease>,
    /// For a ReaderWriterLockSlim: its holders and waiters by kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rwlock: Option<RwLockSlimState>,
    /// For a pool: its maximum, its counts and who has each item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<PoolState>,
}

/// A `System.Threading.Barrier` as read: `_currentTotalCount` is the participants that arrived
/// in the current phase (bits 16–30) and the participants in all (bits 0–14).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct BarrierFacts {
    pub address: Hex,
    pub arrived: u32,
    pub participants: u32,
    pub phase: i64,
    /// The static field that holds the Barrier, when one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_by: Option<crate::runtimes::dotnet::gc::report::ReferrerReport>,
}

impl BarrierFacts {
    /// The participants the phase still waits for.
    pub fn remaining(&self) -> u32 {
        self.participants.saturating_sub(self.arrived)
    }
}

/// What queued work would end a wait no thread can end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QueuedRelease {
    /// The socket engine's work item (`System.Net.Sockets.SocketAsyncEngine`): the reply a
    /// network client waits for is read only when a worker runs it.
    SocketEvent,
    /// A `Parallel` loop's replica task: the bodies the barrier still waits for.
    ParallelReplica,
}

/// A `ReaderWriterLockSlim` as read: its own fields (`_owners`, `_writeLockOwnerId`,
/// `_upgradeLockOwnerId`, the waiter counts) and each thread's `ReaderWriterCount` records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct RwLockSlimState {
    /// Which of the lock's two nodes in the wait-for graph this is: `holders` (a writer or an
    /// upgrader waits for every holder to leave) or `new_readers` (a reader waits for the writer
    /// that holds the lock or waits for it).
    #[schemars(with = "String")]
    pub node: RwLockSlimNode,
    /// `_owners`: the count of holders (readers and the upgradeable holder) in its low 28 bits,
    /// and the flags writer held (0x80000000), writers waiting (0x40000000), an upgrader waiting
    /// to write (0x20000000).
    pub owners: Hex,
    /// Holders by that count.
    pub holder_count: u32,
    /// The threads whose `ReaderWriterCount` record for this lock has a read count, ascending.
    pub readers: Vec<u32>,
    /// The thread holding it in upgradeable mode (`_upgradeLockOwnerId`), if any.
    pub upgradeable: Option<u32>,
    /// The thread holding it for writing (`_writeLockOwnerId`), if any.
    pub writer: Option<u32>,
    /// Threads blocked entering it, by what they asked for (from their frames), ascending.
    pub read_waiters: Vec<u32>,
    pub write_waiters: Vec<u32>,
    pub upgradeable_waiters: Vec<u32>,
    /// The lock's own waiter counts: `_numReadWaiters`, `_numWriteWaiters`,
    /// `_numUpgradeWaiters`, `_numWriteUpgradeWaiters`.
    pub counts: [u32; 4],
}

/// A ReaderWriterLockSlim's node in the wait-for graph (in JSON, its snake_case name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RwLockSlimNode {
    Holders,
    NewReaders,
}

/// A pool of resources as read by its rule (`analyzers/pools.toml`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct PoolState {
    /// The framework (`npgsql`) and the rule's key (`npgsql_connection_pool`).
    pub framework: String,
    pub key: String,
    /// The pool for people (`Npgsql connection pool`), an item (`connection`), several.
    pub name: String,
    pub item: String,
    pub items_word: String,
    /// An item's type (`Npgsql.Internal.NpgsqlConnector`).
    pub item_type: String,
    /// The most items it may have, how many it has, how many are idle (its own fields).
    pub max: Option<i64>,
    pub count: Option<i64>,
    pub idle: Option<i64>,
    /// Each item, and who has it.
    pub items: Vec<PoolItem>,
}

/// One item of a pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct PoolItem {
    pub item: Hex,
    /// The object its user has (null: idle in the pool).
    pub lease: Option<Hex>,
    /// The thread whose frames keep the lease (inferred), if exactly one does.
    pub holder: Option<u32>,
}

/// An async flow waiting for a SemaphoreSlim (`WaitAsync`): no thread waits, an async stack does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct AsyncWaiter {
    /// The semaphore's TaskNode for this waiter.
    pub task: Hex,
    /// The async stack that awaits it: an index into `dotnet.async`, or null.
    pub async_stack: Option<usize>,
    /// The async method that awaits it (its state machine type, as SOS prints it), or null.
    pub method: Option<String>,
}

impl ManagedLock {
    /// A lock on `object` as the reader first finds it: nothing known but where it lives.
    pub fn new(storage: LockStorage, object: u64) -> ManagedLock {
        ManagedLock {
            storage,
            object: Hex(object),
            type_name: None,
            sync_block_index: None,
            sync_block: None,
            owner_thread: None,
            owner_os_tid: None,
            owner_managed_id: None,
            owner_name: None,
            recursion: 0,
            monitor_held: None,
            waiter_count: None,
            waiters: Vec::new(),
            pulse_waiters: Vec::new(),
            task: None,
            referrers: Vec::new(),
            current_count: None,
            max_count: None,
            async_waiters: Vec::new(),
            barrier: None,
            released_by_queued: None,
            rwlock: None,
            pool: None,
        }
    }

    pub fn is_held(&self) -> bool {
        self.recursion > 0 || self.owner_managed_id.is_some() || self.owner_os_tid.is_some()
    }
}

/// A task threads wait for in `Task.Wait` / `Task<T>.Result` / `GetAwaiter().GetResult()`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ManagedTask {
    /// `Task.Status` as the runtime derives it from `m_stateFlags` (WaitingForActivation,
    /// WaitingToRun, Running, WaitingForChildrenToComplete, RanToCompletion, Canceled, Faulted,
    /// Created).
    pub status: String,
    pub state_flags: Hex,
    /// The ManualResetEventSlim registered as the task's continuation, which the waiter waits on.
    pub event: Hex,
    pub event_type: Option<String>,
    /// The event's `m_lock`: the object of the waiter's Monitor.Wait.
    pub event_lock: Hex,
    /// The async stack the task is a frame of (an index into `dotnet.async`): the chain of
    /// async work that would complete it; null when it is in none.
    #[serde(default)]
    pub async_stack: Option<usize>,
    /// The async method the task is (its state machine type, as SOS prints it), or null.
    #[serde(default)]
    pub async_method: Option<String>,
    /// Whether a frame of that async stack is a work item queued to the thread pool (its
    /// continuation waits for a worker); null when the pool's queues were not read.
    #[serde(default)]
    pub queued: Option<bool>,
    /// Whether that async stack awaits a timer (`Task.Delay`'s promise) whose `TimerQueue` is
    /// queued to the thread pool: the timer fires only when a worker runs it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timer_queued: bool,
}

/// What a native lock is, as its reader found it; the report says it as the lock's `label`
/// (`report::words::native_lock_label`: `pthread mutex (recursive, robust), owner died`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NativeLock {
    pub(crate) what: NativeLockType,
    /// The owner's tid when that thread had exited.
    pub(crate) exited_owner: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NativeLockType {
    /// A glibc `pthread_mutex_t`, with what its `__kind`, `__lock` and `__owner` words say.
    PthreadMutex(MutexFacts),
    PthreadRwlock,
    PthreadCond,
    /// One of the .NET GC's events (a condition variable the GC's state leads to): its waiters
    /// wait for the collection; `heap` is the server GC heap whose done event it is, `collectors`
    /// the threads that run the collection (a server GC's: every one must finish).
    GcEvent { heap: Option<usize>, collectors: Vec<u32> },
    PosixSemaphore,
    PthreadJoin,
    /// A `pthread_barrier_t`: `arrived` of its `count` parties are in this round.
    PthreadBarrier { arrived: u32, count: u32 },
    /// A lock whose reader read nothing about it: the analyzers' name for its family (`label`
    /// in `analyzers/*.toml`, e.g. `Rust std::sync::Mutex`; `pthread <kind>` without one).
    Family(String),
    /// A futex word whose waiters' frames no analyzer recognises.
    UnrecognisedFutex,
    /// A CPython `threading.Lock` or `RLock` object (`object`) over the semaphore its waiters
    /// sleep on.
    PythonLock { lock_type: super::python_locks::PythonLockType, object: u64 },
}

/// A pthread mutex's type and state, from its words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MutexFacts {
    pub(crate) base: MutexType,
    pub(crate) robust: bool,
    pub(crate) priority_inheritance: bool,
    pub(crate) priority_protect: bool,
    /// A robust or PI mutex whose futex word has `FUTEX_OWNER_DIED`.
    pub(crate) owner_died: bool,
    /// Shared between processes (`PTHREAD_PROCESS_SHARED`: its `__kind`'s pshared bit).
    pub(crate) process_shared: bool,
    pub(crate) consistency: MutexConsistency,
}

/// `__kind & 3`: `PTHREAD_MUTEX_NORMAL`, `_RECURSIVE`, `_ERRORCHECK`, `_ADAPTIVE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MutexType {
    Normal,
    Recursive,
    ErrorCheck,
    Adaptive,
}

/// A robust mutex's `__owner` after an owner died: glibc's `PTHREAD_MUTEX_INCONSISTENT` (the new
/// holder has not called `pthread_mutex_consistent`) or `PTHREAD_MUTEX_NOTRECOVERABLE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MutexConsistency {
    Consistent,
    Inconsistent,
    NotRecoverable,
}
