//! What a lock's facts rest on, as data: the memory read, the frames and stacks seen, why an
//! owner cannot be known. The report says them (`report::words`: the JSON's `evidence`,
//! `owner.why`, `owner.evidence`, `owner.reader_evidence`, the text and HTML pages).

use super::LockKind;
use crate::hex::Hex;
use crate::process::MemoryError;

/// One fact a lock's reading rests on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Evidence {
    /// A thread sleeps on the lock's futex word inside a lock family's entry function.
    FutexWait {
        tid: u32,
        futex: u64,
        /// The value the thread expects the word to hold while it sleeps.
        expected: u32,
        /// A timed wait the kernel restarted (`restart_syscall`).
        restarted: bool,
        /// The family's entry function and its frame number (`None`: the frame has no name).
        function: Option<String>,
        frame: usize,
    },
    /// A thread sleeps on a futex word no lock family's frames explain.
    UnrecognisedFutexWait { tid: u32, futex: u64, expected: u32 },
    /// Another thread's frame keeps a pointer into the lock's own object (an owner is inferred
    /// from these).
    PointerInFrame(FrameHold),
    /// A `pthread_mutex_t`'s words.
    Mutex { address: u64, lock: u32, owner: i32, count: u32, kind: i32 },
    /// A `pthread_rwlock_t`'s words: `readers_word` holds the reader count and flags.
    Rwlock { address: u64, readers_word: u32, readers: u32, writer: i32 },
    /// A `pthread_cond_t`'s waiter references.
    Cond { address: u64, wrefs: u32, waiters: u32 },
    /// A `sem_t`'s value and waiter count, each as read or why not.
    Sem { address: u64, value: Result<u32, FieldError>, waiters: Result<u32, FieldError> },
    /// `pthread_join` sleeps on the joined thread's tid word.
    Join { address: u64, tid: u32 },
    /// A `pthread_barrier_t`'s words: `arrived` of its `count` parties in this round.
    Barrier { address: u64, arrived: u32, count: u32 },
    /// A thread the kernel refused a priority-inheritance mutex (EDEADLK) sleeps for good on a
    /// zero word of its own stack (`parked_on`); its frame `frame` points into the mutex.
    RefusedPiMutex { tid: u32, parked_on: u64, mutex: u64, frame: usize, place: PointerPlace, value: u64 },
    /// A bare futex word of a lock type that records no owner.
    FutexWord { address: u64, value: Result<u32, MemoryError> },
    /// The lock's words could not be read: the owner is unknown for this reason.
    Unread(UnknownOwner),
    /// A CPython `threading.Lock`/`RLock` object over the semaphore its waiters sleep on, the
    /// waiter's frame that keeps it, and what it records: an RLock's owner ident
    /// (`pthread_self()`) and count, a Lock's `locked` flag.
    PythonLock { object: u64, lock_type: super::python_locks::PythonLockType, semaphore: u64, kept_by: FrameHold, owner_ident: Option<u64>, count: Option<u64>, locked: Option<u8> },
    /// A .NET Monitor's sync block (SOS syncblk's columns).
    SyncBlock { index: u32, address: u64, object: Hex, monitor_held: u32, recursion: u32, owner_managed_id: Option<u32> },
    /// A .NET Monitor kept in the object header.
    ThinLock { object: Hex, owner_managed_id: u32, recursion: u32 },
    /// A `System.Threading.Lock`'s fields.
    LockObject { object: Hex, owner_os_tid: Option<u32>, recursion: u32 },
    /// A .NET task waited for, and the event its waiter sleeps on.
    Task { task: u64, type_name: Option<String>, state_flags: u32, status: String, event: u64, event_type: Option<String>, event_lock: u64 },
    /// A thread in Monitor.Wait on a task's event under a task wait frame; the task is
    /// referenced from its stack at `stack_slot`.
    TaskWaiter { thread: NamedThread, object: u64, stack_slot: u64 },
    /// A .NET task one of whose continuations sets a `ManualResetEventSlim` (`OnCompleted(() =>
    /// done.Set())`, `ContinueWith`): the event is reached from the task's
    /// `m_continuationObject`.
    TaskSetsEvent { task: u64, type_name: Option<String>, state_flags: u32, status: String, event: u64, event_lock: u64 },
    /// A thread in the program's own `ManualResetEventSlim.Wait` on that event (Monitor.Wait on
    /// its `m_lock`, `object`); the task is referenced from its stack at `stack_slot`.
    EventWaiter { thread: NamedThread, event: u64, object: u64, stack_slot: u64 },
    /// A thread in a managed wait, and the runtime record that says so.
    ManagedWait { thread: NamedThread, wait: ManagedWaitKind, source: WaitRecord },
    /// The native wait that a managed wait supersedes (how the runtime implements it).
    NativeWait { tid: u32, kind: LockKind, address: Option<Hex>, id: String },
    /// The task waited for is a frame of async stack `index` (`dotnet.async[index]`).
    AsyncStack { index: usize, innermost_type: String, innermost: Hex, awaiting: Option<(String, Hex)> },
    /// A frame of that async stack is a work item queued to the thread pool.
    QueuedToPool,
    /// The thread pool's queues were not read.
    PoolQueuesUnread,
    /// That async stack awaits a timer, and a `TimerQueue` (which fires the due timers) is queued
    /// to the thread pool, in this queue.
    TimerQueued { queue: String },
    /// A .NET `SemaphoreSlim`'s fields, and how many TaskNodes are in line.
    SemaphoreSlim { address: u64, current_count: i32, max_count: i32, wait_count: i32, nodes: usize },
    /// Threads in `SemaphoreSlim.Wait`.
    SemaphoreWaiters { tids: Vec<u32>, how: SemaphoreWait },
    /// An async flow in `WaitAsync`: its TaskNode, the async method and stack that await it.
    AsyncWaiter { task: Hex, method: Option<String>, async_stack: Option<usize> },
    /// The TaskNode list was not read to its end, for this reason.
    TaskNodeListCut { why: String },
    /// What would end the wait is queued to the thread pool (inferred): a work item of
    /// `item_type`; `inside` is the network client frame the waiter is in, when it is in one.
    ReleasedByQueued { what: super::QueuedRelease, item_type: String, inside: Option<String> },
    /// A .NET `ReaderWriterLockSlim`'s fields.
    RwLockSlim { address: u64, lock_id: u64, owners: u32, write_owner_id: i32, upgrade_owner_id: i32, counts: [u32; 4] },
    /// A thread's `ReaderWriterCount` record for that lock (its `t_rwc` thread static's chain).
    ReaderCount { thread: NamedThread, record: u64, read_count: u32 },
    /// A thread blocked entering a lock or pool in this frame, which keeps the object at `slot`.
    EnteringFrame { thread: NamedThread, frame: String, slot: u64 },
    /// The runtime's class-init lock (a `ListLockEntry`, whose Crst is the mutex): the entry,
    /// its holding `Thread*` and the class's MethodTable; the holder's static-constructor frame.
    ClassInitEntry { entry: u64, holding_thread: u64, method_table: u64, class: String, cctor: Option<String> },
    /// A pool's own fields (its rule's names).
    PoolFields { object: u64, type_name: String, max: Option<i64>, count: Option<i64>, idle: Option<i64>, items: usize },
}

/// How threads wait in `SemaphoreSlim.Wait`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SemaphoreWait {
    /// For their own TaskNode, in line behind the async waiters.
    TaskNode { node: Option<Hex> },
    /// In Monitor.Wait on the semaphore's lock object.
    MonitorWait { lock_object: u64 },
}

/// A thread, with its managed name when it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedThread {
    pub tid: u32,
    pub name: Option<String>,
}

/// What a thread waits for in a managed wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManagedWaitKind {
    EnterMonitor,
    EnterLock,
    /// Monitor.Wait on a task's event.
    TaskEvent,
    MonitorWait,
}

/// The runtime's record of a managed wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitRecord {
    /// The thread's `ThreadBlockingInfo` record.
    BlockingRecord,
    /// The sync block's Monitor.Wait list.
    WaitList,
}

/// Why an owner is inferred (`Owner::Inferred`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inference {
    /// The only thread, besides the lock's waiters, one of whose frames keeps a pointer into the
    /// lock's own object (its data symbol, or the lock itself): as a guard keeps it.
    OnlyFrameHolding(FrameHold),
    /// The only thread running the task: its frame `frame` is the task's work (`method`: the
    /// state machine's `MoveNext`, or `Task.ExecuteWithThreadLocal`) and its stack holds the
    /// task at `stack_slot`.
    RunsTask { method: String, frame: usize, stack_slot: u64 },
    /// The only thread, not waiting for the SemaphoreSlim, whose stack holds it (at
    /// `stack_slot`): past `Wait()`, inside the code it guards.
    HoldsSemaphore { stack_slot: u64 },
    /// A server GC thread: a runtime thread (no managed `Thread`) whose stack holds server heap
    /// `index`'s `gc_heap` (at `heap`), as the GC's thread function keeps it.
    ServerGcThread { index: usize, heap: u64 },
    /// The only thread whose frames keep the lease of a pool's item (the object its user has):
    /// the lease at `slot`, in `frame`.
    PoolLease { item: u64, lease: u64, lease_type: String, slot: u64, frame: Option<String> },
    /// A writer blocked entering a ReaderWriterLockSlim in `frame`: while it waits, the lock
    /// admits no new reader.
    WaitingWriter { frame: String },
}

/// A frame of a thread that keeps a pointer into a lock's own object: which frame, and the stack
/// slot or register the pointer is in. A reader of a read-held lock (`Owner::Readers`) is offered
/// on one of these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameHold {
    pub tid: u32,
    /// The frame's index in the thread's frames, and its function.
    pub frame: usize,
    pub function: Option<String>,
    pub place: PointerPlace,
    /// The pointer.
    pub value: u64,
}

/// Where a thread keeps a pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PointerPlace {
    Register(&'static str),
    Stack(u64),
}

/// Why a lock's owner is not known (`Owner::Unknown`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnknownOwner {
    /// No analyzer knows the lock's layout.
    NoLayout,
    /// The lock type records no owner.
    NotRecorded,
    /// A lock that records no owner, and the stack search for one ran out of budget.
    SearchBudgetSpent,
    /// A lock that records no owner, and no other thread's stack points into it.
    NoStackPointsIn,
    /// A lock that records no owner, and several threads' stacks point into it.
    SeveralStacksPointIn { tids: Vec<u32> },
    /// A mutex with no owner in its words: being released or acquired.
    MutexBetweenOwners { lock: u32, owner: i32 },
    /// A robust mutex whose owner died.
    RobustOwnerDied,
    /// An rwlock neither write- nor read-locked: changing hands.
    RwlockBetweenOwners,
    /// A lock word could not be read.
    Unreadable(FieldError),
    /// The joined thread's tid word could not be read.
    JoinWordUnreadable,
    /// A .NET lock held by a managed thread with no OS thread knot can map it to.
    UnmappedManagedThread { managed_id: u32 },
    /// A .NET lock not held at the time of the dump (being handed over).
    HandedOver,
    /// A SemaphoreSlim (it records no holder) with a count left: its waiters are being woken.
    SemaphoreFree { current_count: i32, max_count: i32 },
    /// A SemaphoreSlim with a count of 0: taken and not released.
    SemaphoreTaken { max_count: i32 },
    /// A CPython `threading.Lock`: it records only that it is locked, not by whom.
    PythonLockNoOwner,
    /// A CPython lock whose object no waiter's frames keep: which type it is, and its owner, unread.
    PythonObjectNotFound { semaphore: u64 },
    /// A CPython RLock whose `rlock_owner` is 0: being released or acquired.
    PythonRLockFree,
    /// A CPython RLock whose owner ident is no thread of the dump's `pthread_self()`.
    PythonOwnerNotAThread { ident: u64 },
}

/// Why a field of a lock's layout could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldError {
    /// The layout (from `analyzers/`) has no such field.
    NoField { layout: String, field: &'static str },
    Unreadable { layout: String, error: MemoryError },
}
