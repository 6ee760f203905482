//! What a .NET thread that waits for nobody is doing: sleeping (`Thread.Sleep`, a condition
//! variable wait inside the runtime's PAL), polling (a periodic loop's timed `WaitHandle` wait),
//! a thread-pool worker waiting for work, or one of the
//! runtime's own idle service threads (the finalizer, tiered compilation, the timer and pool
//! gate, and the native SynchManager, signal handler, debugger and EventPipe threads). Such a
//! thread is not blocked: it leaves the locks' waiters, the headline counts and the verdict.
//!
//! Told from the thread's frames: its innermost managed method, or — for a thread that never
//! ran managed code — that every frame outside libc is in the runtime's own modules.

use crate::threads::FrameReport;
use crate::waits::{IdleRole, LockFact, LockKind, Owner, Pool, ThreadState, ThreadWait};

const SLEEP: &[&str] = &["System.Threading.Thread.Sleep", "System.Threading.Thread.SleepInternal"];
/// Where a pool worker waits for work, innermost frames first.
const WORKER_WAIT: &str = "System.Threading.LowLevelLifoSemaphore.";
const WORKER_START: &str = "System.Threading.PortableThreadPool+WorkerThread.WorkerThreadStart";
/// Managed service loops, and the waits they idle in.
const SERVICE_LOOPS: &[(&str, IdleRole)] =
    &[("System.Threading.PortableThreadPool+GateThread.GateThreadStart", IdleRole::ThreadPoolGate), ("System.Threading.TimerQueue.TimerThread", IdleRole::Timer)];
const SERVICE_WAITS: &[&str] = &["System.Threading.WaitHandle.", "System.Threading.AutoResetEvent.", "System.Threading.EventWaitHandle."];
/// Libraries' worker loops that wait for work in `Monitor.Wait` on their own queue: the method
/// right above the wait, and the pool it is.
const LIBRARY_LOOPS: &[(&str, Pool)] = &[("Pipelines.Sockets.Unofficial.DedicatedThreadPoolPipeScheduler.RunWorkLoop", Pool::SocketScheduler)];
const MONITOR_WAIT: &str = "System.Threading.Monitor.Wait";
/// The runtime's native modules; a thread whose frames outside libc are all here never ran
/// managed code: the runtime made it for itself.
const RUNTIME_MODULES: &[&str] = &["libcoreclr.so", "libSystem.Native.so", "libclrjit.so", "libclrgc.so"];
const SYSTEM_MODULES: &[&str] = &["libc.so.6", "libpthread.so.0", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "linux-vdso.so.1"];

/// Where a dedicated thread's body starts: the runtime calls it from here.
const THREAD_START: &str = "System.Threading.Thread.StartCallback";
/// How a periodic loop's timed wait is said (`ThreadState::Sleeping`'s call).
pub(crate) const PERIODIC_WAIT: &str = "WaitHandle.WaitOne(timeout)";

/// What the classification needs to know of a thread besides its frames.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct IdleInputs {
    /// The runtime's finalizer thread.
    pub(crate) is_finalizer: bool,
    /// Its futex wait has a timeout (the syscall's fourth argument is not null).
    pub(crate) timed: bool,
    /// It owns a lock another thread waits for.
    pub(crate) holds_awaited_lock: bool,
}

/// What an idle thread does, from its frames; `None` when it may be waiting for something.
///
/// A poller is idle too: a dedicated thread whose body (the one method between the wait and
/// the thread's start) waits on a `WaitHandle` with a timeout — the loop's period, as
/// `CounterGroup.PollForValues` and Orleans' `Watchdog.RunPlatformWatchdog` do — on an event
/// nobody holds, while holding no lock anybody waits for. A wait with no timeout waits for
/// something; a timed wait deeper in a call (a request waiting for its reply) or inside a
/// lock others queue behind is part of what they wait for: those stay blocked.
pub(crate) fn classify(frames: &[&FrameReport], inputs: IdleInputs) -> Option<ThreadState> {
    let managed: Vec<&str> = frames.iter().filter(|f| f.managed).filter_map(|f| f.function.as_deref()).collect();
    match managed.first() {
        Some(first) if SLEEP.contains(first) => Some(ThreadState::Sleeping { syscall: "Thread.Sleep".into() }),
        Some(first) if first.starts_with(EVENT_WAIT) && inputs.timed && !inputs.holds_awaited_lock && is_loop_body(&managed) => {
            Some(ThreadState::Sleeping { syscall: PERIODIC_WAIT.into() })
        }
        Some(first) if first.starts_with(WORKER_WAIT) => {
            let after = managed.iter().find(|m| !m.starts_with(WORKER_WAIT))?;
            (*after == WORKER_START).then_some(ThreadState::WaitingForWork { pool: Pool::ThreadPool })
        }
        Some(first) if first.starts_with(MONITOR_WAIT) => {
            let after = managed.iter().find(|m| !m.starts_with(MONITOR_WAIT))?;
            LIBRARY_LOOPS.iter().find(|(m, _)| after == m).map(|&(_, pool)| ThreadState::WaitingForWork { pool })
        }
        Some(first) if SERVICE_WAITS.iter().any(|w| first.starts_with(w)) => {
            let after = managed.iter().find(|m| !SERVICE_WAITS.iter().any(|w| m.starts_with(w)))?;
            SERVICE_LOOPS.iter().find(|(m, _)| after == m).map(|&(_, role)| ThreadState::IdleRuntimeThread { role })
        }
        Some(_) => None,
        None => {
            let modules: Vec<&str> = frames.iter().filter_map(|f| f.module.as_deref()).collect();
            let runtime_only = modules.iter().any(|m| RUNTIME_MODULES.contains(m)) && modules.iter().all(|m| RUNTIME_MODULES.contains(m) || SYSTEM_MODULES.contains(m));
            runtime_only.then_some(ThreadState::IdleRuntimeThread { role: if inputs.is_finalizer { IdleRole::Finalizer } else { IdleRole::RuntimeService } })
        }
    }
}

/// A `WaitHandle` wait (`WaitOne`, inlined into `WaitOneNoCheck`).
const EVENT_WAIT: &str = "System.Threading.WaitHandle.";

/// The wait is made by the thread's body itself: after the wait's own frames, one method and
/// then the thread's start. CoreLib's own loops (`System.Threading.*`: the timer, the pool's
/// gate) are the runtime's service threads, said by `SERVICE_LOOPS`.
fn is_loop_body(managed: &[&str]) -> bool {
    let rest: Vec<&&str> = managed.iter().skip_while(|m| m.starts_with(EVENT_WAIT)).collect();
    matches!(rest.as_slice(), [body, start] if **start == THREAD_START && !body.starts_with("System.Threading."))
}

/// Whether the wait `w` may be set aside as idle: the thread is inside a syscall and waits on no
/// lock that has an owner (a condition variable, a semaphore, an unnamed futex word, a
/// Monitor.Wait: a library's worker loop waits for work there).
pub(crate) fn may_be_idle(w: &ThreadWait, locks: &[LockFact]) -> bool {
    if matches!(w.state, ThreadState::Running | ThreadState::Stopped { .. }) {
        return false;
    }
    match w.blocked_on.as_deref().and_then(|id| locks.iter().find(|l| l.id == id)) {
        Some(l) => (l.managed.is_none() || l.kind == LockKind::MonitorWait) && matches!(l.owner, Owner::None | Owner::Unknown { .. }),
        None => true,
    }
}

/// Marks `tid` idle: its state, no lock, and off the waiters of the native lock it was counted
/// on (dropped when nobody else waits there).
pub(crate) fn set_idle(tid: u32, state: ThreadState, wait: &mut ThreadWait, locks: &mut Vec<LockFact>) {
    if let Some(id) = wait.blocked_on.take() {
        if let Some(l) = locks.iter_mut().find(|l| l.id == id) {
            l.waiter_tids.retain(|t| *t != tid);
        }
        // A held Monitor stays without waiters; a Monitor.Wait is only its waiters.
        locks.retain(|l| l.id != id || !l.waiter_tids.is_empty() || (l.managed.is_some() && l.kind != LockKind::MonitorWait));
    }
    wait.state = state;
}
