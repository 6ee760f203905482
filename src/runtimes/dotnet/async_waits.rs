//! Async waits in the wait-for graph, once the heap walk has given the async stacks and the
//! SemaphoreSlims:
//! - a thread blocked in `Task.Wait`/`.Result` on a task (a lock of kind `task`) is tied to the
//!   async stack that task is a frame of — the chain of async work that would complete it — and
//!   to whether that chain's work is queued to the thread pool (sync over async: the worker
//!   waits for work queued behind it);
//! - a SemaphoreSlim that anyone waits for becomes a lock of kind `semaphore_slim`: its count,
//!   the threads in `Wait()` (in line with a TaskNode of their own, or in `Monitor.Wait` on its
//!   lock object) as waiters, and the async flows in `WaitAsync` as `async_waiters`. The
//!   thread's `task` or `monitor_wait` lock on the semaphore's own parts gives way to it.

use super::report::AsyncStackReport;
use super::semaphores::Semaphore;
use crate::hex::Hex;
use crate::waits::{AsyncWaiter, LockFact, LockKind, LockStorage, ManagedLock, Owner, WaitFacts};
use std::collections::{HashMap, HashSet};

/// Ties task waits to async stacks and makes the SemaphoreSlims with waiters locks.
/// `queued`: the objects queued to the thread pool, when its queues were read.
pub(crate) fn link(stacks: &[AsyncStackReport], semaphores: &[Semaphore], queued: Option<&HashSet<u64>>, facts: &mut WaitFacts) {
    // Every frame's stack, and the first async method after it (what a TaskNode's waiter is).
    let mut stack_of: HashMap<u64, usize> = HashMap::new();
    for (i, s) in stacks.iter().enumerate() {
        for f in &s.frames {
            stack_of.entry(f.address.0).or_insert(i);
        }
    }
    let stack_queued = |i: usize| queued.map(|q| stacks[i].frames.iter().any(|f| q.contains(&f.address.0)));
    for l in facts.locks.iter_mut().filter(|l| l.kind == LockKind::Task) {
        let Some(m) = l.managed.as_mut() else { continue };
        let Some(task) = m.task.as_mut() else { continue };
        let Some(&i) = stack_of.get(&m.object.0) else { continue };
        task.async_stack = Some(i);
        task.async_method = stacks[i].frames.iter().find(|f| f.address == m.object && !f.state.is_empty() && f.state.trim().parse::<i32>().is_ok()).map(|f| f.type_name.clone());
        task.queued = stack_queued(i);
        let first = &stacks[i].frames[0];
        let awaiting = stacks[i].awaiting.as_ref().map(|a| format!(", awaiting {} at {}", a.type_name, a.address)).unwrap_or_default();
        l.evidence.push(format!("the task is a frame of async stack {} (dotnet.async[{i}]), innermost {} at {}{awaiting}", i + 1, first.type_name, first.address));
        match task.queued {
            Some(true) => l.evidence.push("a frame of that async stack is a work item queued to the thread pool: it runs only when a worker is free".into()),
            Some(false) => {}
            None => l.evidence.push("the thread pool's queues were not read: whether that work is queued is not known".into()),
        }
    }
    for s in semaphores {
        semaphore(s, stacks, &stack_of, facts);
    }
    facts.locks.sort_by(|a, b| a.id.cmp(&b.id));
}

/// The SemaphoreSlim `s` as a lock, when anyone waits for it.
fn semaphore(s: &Semaphore, stacks: &[AsyncStackReport], stack_of: &HashMap<u64, usize>, facts: &mut WaitFacts) {
    let nodes: HashSet<u64> = s.nodes.iter().copied().collect();
    // The threads' own waits that are waits on this semaphore: a task lock on one of its
    // TaskNodes, a Monitor.Wait on its lock object.
    let absorbed: Vec<String> = facts
        .locks
        .iter()
        .filter(|l| match l.kind {
            LockKind::Task => l.managed.as_ref().is_some_and(|m| nodes.contains(&m.object.0)),
            LockKind::MonitorWait => s.lock_object != 0 && l.managed.as_ref().is_some_and(|m| m.object.0 == s.lock_object),
            _ => false,
        })
        .map(|l| l.id.clone())
        .collect();
    let sync_nodes: HashSet<u64> = facts.locks.iter().filter(|l| absorbed.contains(&l.id) && l.kind == LockKind::Task).filter_map(|l| l.managed.as_ref()).map(|m| m.object.0).collect();
    let async_waiters: Vec<AsyncWaiter> = s
        .nodes
        .iter()
        .filter(|n| !sync_nodes.contains(n))
        .map(|&n| {
            let stack = stack_of.get(&n).copied();
            let method = stack.and_then(|i| stacks[i].frames.iter().skip_while(|f| f.address.0 != n).skip(1).find(|f| f.state.trim().parse::<i32>().is_ok()).map(|f| f.type_name.clone()));
            AsyncWaiter { task: Hex(n), async_stack: stack, method }
        })
        .collect();
    if absorbed.is_empty() && async_waiters.is_empty() && s.wait_count <= 0 {
        return;
    }
    let id = format!("semaphore_slim@{:#x}", s.address);
    let mut waiter_tids = Vec::new();
    let mut evidence = vec![format!(
        "SemaphoreSlim {:#x}: m_currentCount {}, m_maxCount {}, m_waitCount {}, {} TaskNode{} in line (m_asyncHead…m_asyncTail)",
        s.address,
        s.current_count,
        s.max_count,
        s.wait_count,
        s.nodes.len(),
        if s.nodes.len() == 1 { "" } else { "s" }
    )];
    for l in facts.locks.iter().filter(|l| absorbed.contains(&l.id)) {
        waiter_tids.extend(l.waiter_tids.iter().copied());
        let how = match l.kind {
            LockKind::Task => format!("wait{} in SemaphoreSlim.Wait for TaskNode {} (in line behind the async waiters)", if l.waiter_tids.len() == 1 { "s" } else { "" }, l.address.map_or(String::new(), |a| a.to_string())),
            _ => format!("wait{} in SemaphoreSlim.Wait: Monitor.Wait on its lock object {:#x}", if l.waiter_tids.len() == 1 { "s" } else { "" }, s.lock_object),
        };
        let tids: Vec<String> = l.waiter_tids.iter().map(u32::to_string).collect();
        evidence.push(format!("thread{} {} {how}", if tids.len() == 1 { "" } else { "s" }, tids.join(", ")));
    }
    for w in &async_waiters {
        evidence.push(format!(
            "async waiter: TaskNode {}{}",
            w.task,
            match (&w.method, w.async_stack) {
                (Some(m), Some(i)) => format!(", awaited by {m} (async stack {})", i + 1),
                (None, Some(i)) => format!(" (async stack {})", i + 1),
                _ => String::new(),
            }
        ));
    }
    if let Some(c) = &s.cut {
        evidence.push(format!("TaskNode list cut: {c}"));
    }
    waiter_tids.sort_unstable();
    waiter_tids.dedup();
    for t in facts.threads.iter_mut() {
        if t.blocked_on.as_ref().is_some_and(|b| absorbed.contains(b)) {
            t.blocked_on = Some(id.clone());
        }
    }
    facts.locks.retain(|l| !absorbed.contains(&l.id));
    let why = if s.current_count > 0 {
        format!("its count is {} of {}: free (the waiters are being woken)", s.current_count, s.max_count)
    } else {
        format!("a SemaphoreSlim records no holder; its count is 0 of {}: taken and not released (by an async flow or a thread)", s.max_count)
    };
    facts.locks.push(LockFact {
        id,
        kind: LockKind::SemaphoreSlim,
        label: String::new(),
        address: Some(Hex(s.address)),
        name: None,
        owner: Owner::Unknown { why },
        owner_tid: None,
        waiter_tids,
        evidence,
        recursion: None,
        readers: None,
        signature: None,
        managed: Some(ManagedLock {
            type_name: Some("System.Threading.SemaphoreSlim".into()),
            current_count: Some(s.current_count),
            max_count: Some(s.max_count),
            async_waiters,
            ..ManagedLock::new(LockStorage::SemaphoreSlim, s.address)
        }),
    });
}
