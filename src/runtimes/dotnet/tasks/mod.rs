//! Task waits: a thread in `Task.Wait` / `Task<T>.Result` / `GetAwaiter().GetResult()` blocks in
//! `Task.SpinThenBlockingWait`, which registers a `Task+SetOnInvokeMres` (a
//! `ManualResetEventSlim`) as the task's continuation and waits on it: a `Monitor.Wait` on the
//! event's `m_lock`. The runtime records only that Monitor.Wait; this module finds the task it is
//! for. A task is taken only when it is referenced from the waiting thread's own stack, its type
//! derives from `System.Threading.Tasks.Task`, and its `m_continuationObject` is a
//! `ManualResetEventSlim` whose `m_lock` is the very object the thread is in Monitor.Wait on —
//! or holds one (a continuation that sets the program's own event, `OnCompleted(() =>
//! done.Set())` or `ContinueWith`, which the thread waits on in `ManualResetEventSlim.Wait`).

pub(crate) mod async_stacks;
pub(crate) mod async_waits;
pub(crate) mod semaphores;
pub(crate) mod task_runners;
pub(crate) mod thread_pool;

use crate::runtimes::dotnet::contract::facts::Layout;
use crate::runtimes::dotnet::types::objects::{self, TypeNamer};
use crate::runtimes::dotnet::contract::target::{Result, Target};
use crate::runtimes::dotnet::{ManagedThread, MonitorWait};
use crate::process::Process;
use serde::Serialize;
use std::collections::HashMap;

/// How far above a waiting thread's stack pointer the task is looked for: the task is a
/// local of `Task.InternalWaitCore`/`SpinThenBlockingWait`, a few frames above `Monitor.Wait`.
const TASK_SCAN_BYTES: u64 = 16 * 1024;
/// Base types followed at most when asking whether a type derives from another.
const MAX_BASE_DEPTH: usize = 32;
const TASK_TYPE: &str = "System.Threading.Tasks.Task";
const EVENT_TYPE: &str = "System.Threading.ManualResetEventSlim";

/// `Task.Status`, as the runtime derives it from `m_stateFlags`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) enum TaskStatus {
    Created,
    WaitingForActivation,
    WaitingToRun,
    Running,
    WaitingForChildrenToComplete,
    RanToCompletion,
    Canceled,
    Faulted,
}

// Task.TaskStateFlags (CoreLib).
const STARTED: u32 = 0x1_0000;
const DELEGATE_INVOKED: u32 = 0x2_0000;
const FAULTED: u32 = 0x20_0000;
const CANCELED: u32 = 0x40_0000;
const WAITING_ON_CHILDREN: u32 = 0x80_0000;
const RAN_TO_COMPLETION: u32 = 0x100_0000;
const WAITING_FOR_ACTIVATION: u32 = 0x200_0000;

impl TaskStatus {
    /// In `Task.Status`'s order: a final state first, then the furthest the task got.
    pub(crate) fn from_state_flags(f: u32) -> TaskStatus {
        if f & FAULTED != 0 {
            TaskStatus::Faulted
        } else if f & CANCELED != 0 {
            TaskStatus::Canceled
        } else if f & RAN_TO_COMPLETION != 0 {
            TaskStatus::RanToCompletion
        } else if f & WAITING_ON_CHILDREN != 0 {
            TaskStatus::WaitingForChildrenToComplete
        } else if f & DELEGATE_INVOKED != 0 {
            TaskStatus::Running
        } else if f & STARTED != 0 {
            TaskStatus::WaitingToRun
        } else if f & WAITING_FOR_ACTIVATION != 0 {
            TaskStatus::WaitingForActivation
        } else {
            TaskStatus::Created
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            TaskStatus::Created => "Created",
            TaskStatus::WaitingForActivation => "WaitingForActivation",
            TaskStatus::WaitingToRun => "WaitingToRun",
            TaskStatus::Running => "Running",
            TaskStatus::WaitingForChildrenToComplete => "WaitingForChildrenToComplete",
            TaskStatus::RanToCompletion => "RanToCompletion",
            TaskStatus::Canceled => "Canceled",
            TaskStatus::Faulted => "Faulted",
        }
    }
}

/// A thread's Monitor.Wait tied to the task it waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct TaskWait {
    pub(crate) os_tid: u32,
    pub(crate) task: u64,
    pub(crate) type_name: Option<String>,
    pub(crate) state_flags: u32,
    pub(crate) status: TaskStatus,
    /// The ManualResetEventSlim the thread waits on: the task's continuation, or one its
    /// continuation sets.
    pub(crate) event: u64,
    pub(crate) event_type: Option<String>,
    /// The event's `m_lock`: the object of the thread's Monitor.Wait.
    pub(crate) lock_object: u64,
    /// Where on the thread's stack the reference to the task was.
    pub(crate) stack_slot: u64,
    /// The event is not the task's continuation but one its continuation sets: the thread
    /// waits in the program's own `ManualResetEventSlim.Wait`, not in `Task.Wait`.
    pub(crate) set_by_continuation: bool,
}

/// Caches whether a MethodTable derives from a named type.
#[derive(Default)]
struct Derives {
    seen: HashMap<(u64, &'static str), bool>,
}

impl Derives {
    fn check(&mut self, t: &Target, namer: &TypeNamer, mt: u64, base: &'static str) -> bool {
        if let Some(&b) = self.seen.get(&(mt, base)) {
            return b;
        }
        let mut cur = mt;
        let mut found = false;
        for _ in 0..MAX_BASE_DEPTH {
            if cur == 0 {
                break;
            }
            if namer.type_name(cur).is_ok_and(|n| n == base) {
                found = true;
                break;
            }
            match t.field_ptr(cur, "MethodTable", "ParentMethodTable") {
                Ok(p) if p != cur => cur = p,
                _ => break,
            }
        }
        self.seen.insert((mt, base), found);
        found
    }
}

/// The tasks the threads in Monitor.Wait wait for, where the link can be proven (see the
/// module comment); a thread whose Monitor.Wait is not a task's event gets none.
pub(crate) fn task_waits(process: &Process, t: &Target, l: &Layout, namer: &TypeNamer, threads: &[ManagedThread], waits: &[MonitorWait]) -> Vec<TaskWait> {
    let mut derives = Derives::default();
    crate::runtimes::dotnet::threads::waiter_stacks::first_tie(process, threads, waits, TASK_SCAN_BYTES, |w, object, slot, v| {
        let tw = link(t, l, namer, &mut derives, v, object).ok()??;
        Some(TaskWait { os_tid: w.os_tid, stack_slot: slot, ..tw })
    })
}

/// The task at `v`, when it is one whose continuation event's lock is `object`.
fn link(t: &Target, l: &Layout, namer: &TypeNamer, derives: &mut Derives, v: u64, object: u64) -> Result<Option<TaskWait>> {
    let mt = objects::method_table(t, v)?;
    if !objects::is_plausible_method_table(t, mt) || !derives.check(t, namer, mt, TASK_TYPE) {
        return Ok(None);
    }
    let continuation = t.read_ptr(v.wrapping_add(l.task_continuation_object), "Task.m_continuationObject")?;
    let Some((event, event_mt)) = event_of(t, l, namer, derives, continuation, object) else { return Ok(None) };
    let lock_object = object;
    let state_flags = t.read_u32(v.wrapping_add(l.task_state_flags), "Task.m_stateFlags")?;
    Ok(Some(TaskWait {
        os_tid: 0,
        task: v,
        type_name: namer.type_name(mt).ok(),
        state_flags,
        status: TaskStatus::from_state_flags(state_flags),
        event,
        event_type: namer.type_name(event_mt).ok(),
        lock_object,
        stack_slot: 0,
        set_by_continuation: event != continuation,
    }))
}

/// Objects looked at, at most, below one task's continuation.
const MAX_CONTINUATION_OBJECTS: usize = 512;
const DELEGATE_TYPE: &str = "System.Delegate";
/// References followed, at most, from the continuation to the event: `OnCompleted(() =>
/// done.Set())` is AwaitTaskContinuation → Action → closure → event; `ContinueWith(_ =>
/// done.Set())` is ContinueWithTaskContinuation → the continuation task → Action → closure →
/// event (seen in the mres_continuation sample).
const MAX_CONTINUATION_DEPTH: usize = 4;
/// Bytes of one object read for references.
const MAX_OBJECT_BYTES: u64 = 256;

/// The ManualResetEventSlim, with its MethodTable, whose `m_lock` is `object`: the task's
/// continuation itself (`Task.Wait`'s `SetOnInvokeMres`), or one it holds — a continuation
/// that sets a program's own event (`GetAwaiter().OnCompleted(() => done.Set())`,
/// `ContinueWith(_ => done.Set())`), found by following the references of the continuation's
/// objects, a few steps and objects at most.
fn event_of(t: &Target, l: &Layout, namer: &TypeNamer, derives: &mut Derives, continuation: u64, object: u64) -> Option<(u64, u64)> {
    let mut frontier = vec![continuation];
    let mut seen: Vec<u64> = Vec::new();
    for depth in 0..=MAX_CONTINUATION_DEPTH {
        let mut next = Vec::new();
        for o in frontier {
            if o < 0x10000 || o & 7 != 0 || seen.contains(&o) || seen.len() >= MAX_CONTINUATION_OBJECTS {
                continue;
            }
            seen.push(o);
            let Ok(mt) = objects::method_table(t, o) else { continue };
            if !objects::is_plausible_method_table(t, mt) {
                continue;
            }
            if derives.check(t, namer, mt, EVENT_TYPE) {
                if t.read_ptr(o.wrapping_add(l.manual_reset_event_slim_lock), "ManualResetEventSlim.m_lock").ok() == Some(object) {
                    return Some((o, mt));
                }
                continue;
            }
            if depth == MAX_CONTINUATION_DEPTH {
                continue;
            }
            // A delegate leads on through its target alone (the closure that holds the event).
            if derives.check(t, namer, mt, DELEGATE_TYPE) {
                if let Ok(target) = t.read_ptr(o.wrapping_add(8), "Delegate._target") {
                    next.push(target);
                }
                continue;
            }
            let size = t.field_u32(mt, "MethodTable", "BaseSize").map_or(0, u64::from).min(MAX_OBJECT_BYTES);
            // The words after the MethodTable pointer: the object's fields (references among them).
            let mut at = 8;
            while at + 8 <= size {
                if let Ok(w) = t.read_ptr(o.wrapping_add(at), "a continuation's field") {
                    next.push(w);
                }
                at += 8;
            }
        }
        frontier = next;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_follows_task_status_order() {
        // The flags SOS shows on sync_over_async's FetchQuoteAsync boxes (task-fields.txt).
        assert_eq!(TaskStatus::from_state_flags(0x0200_0c00), TaskStatus::WaitingForActivation);
        assert_eq!(TaskStatus::from_state_flags(STARTED | DELEGATE_INVOKED), TaskStatus::Running);
        assert_eq!(TaskStatus::from_state_flags(STARTED), TaskStatus::WaitingToRun);
        assert_eq!(TaskStatus::from_state_flags(RAN_TO_COMPLETION | STARTED | DELEGATE_INVOKED), TaskStatus::RanToCompletion);
        assert_eq!(TaskStatus::from_state_flags(FAULTED | RAN_TO_COMPLETION), TaskStatus::Faulted);
        assert_eq!(TaskStatus::from_state_flags(CANCELED | WAITING_FOR_ACTIVATION), TaskStatus::Canceled);
        assert_eq!(TaskStatus::from_state_flags(WAITING_ON_CHILDREN | DELEGATE_INVOKED), TaskStatus::WaitingForChildrenToComplete);
        assert_eq!(TaskStatus::from_state_flags(0), TaskStatus::Created);
    }
}
