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

use crate::runtimes::dotnet::report::AsyncStackReport;
use crate::runtimes::dotnet::tasks::semaphores::Semaphore;
use crate::hex::Hex;
use crate::waits::{AsyncWaiter, Evidence, LockFact, LockKind, LockStorage, ManagedLock, Owner, SemaphoreWait, UnknownOwner, WaitFacts};
use std::collections::{HashMap, HashSet};

/// Ties task waits to async stacks and makes the SemaphoreSlims with waiters locks.
/// `queued`: the objects queued to the thread pool, when its queues were read; `timer_queue`:
/// the queue a `TimerQueue` waits in (`high-priority queue`), when one is queued.
pub(crate) fn link(stacks: &[AsyncStackReport], semaphores: &[Semaphore], queued: Option<&HashSet<u64>>, timer_queue: Option<&str>, facts: &mut WaitFacts) {
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
        // Task.Delay's promise completes when its timer fires: on a worker, from the TimerQueue
        // the timer thread queued to the pool.
        let awaits_timer = stacks[i].awaiting.as_ref().is_some_and(|a| a.type_name.contains("DelayPromise")) || stacks[i].frames.first().is_some_and(|f| f.type_name.contains("DelayPromise"));
        task.timer_queued = awaits_timer && timer_queue.is_some() && task.queued == Some(false);
        if task.timer_queued {
            task.queued = Some(true);
        }
        let first = &stacks[i].frames[0];
        l.evidence.push(Evidence::AsyncStack {
            index: i,
            innermost_type: first.type_name.clone(),
            innermost: first.address,
            awaiting: stacks[i].awaiting.as_ref().map(|a| (a.type_name.clone(), a.address)),
        });
        match task.queued {
            Some(true) if task.timer_queued => l.evidence.push(Evidence::TimerQueued { queue: timer_queue.unwrap_or_default().to_string() }),
            Some(true) => l.evidence.push(Evidence::QueuedToPool),
            Some(false) => {}
            None => l.evidence.push(Evidence::PoolQueuesUnread),
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
    let mut evidence = vec![Evidence::SemaphoreSlim { address: s.address, current_count: s.current_count, max_count: s.max_count, wait_count: s.wait_count, nodes: s.nodes.len() }];
    for l in facts.locks.iter().filter(|l| absorbed.contains(&l.id)) {
        waiter_tids.extend(l.waiter_tids.iter().copied());
        let how = match l.kind {
            LockKind::Task => SemaphoreWait::TaskNode { node: l.address },
            _ => SemaphoreWait::MonitorWait { lock_object: s.lock_object },
        };
        evidence.push(Evidence::SemaphoreWaiters { tids: l.waiter_tids.clone(), how });
    }
    for w in &async_waiters {
        evidence.push(Evidence::AsyncWaiter { task: w.task, method: w.method.clone(), async_stack: w.async_stack });
    }
    if let Some(c) = &s.cut {
        evidence.push(Evidence::TaskNodeListCut { why: c.clone() });
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
        UnknownOwner::SemaphoreFree { current_count: s.current_count, max_count: s.max_count }
    } else {
        UnknownOwner::SemaphoreTaken { max_count: s.max_count }
    };
    facts.locks.push(LockFact {
        id,
        kind: LockKind::SemaphoreSlim,
        label: String::new(),
        address: Some(Hex(s.address)),
        name: None,
        owner: Owner::Unknown { why },
        owner_tid: None,
        holders: vec![],
        release: None,
        waiter_tids,
        evidence,
        recursion: None,
        readers: None,
        signature: None,
        native: None,
        managed: Some(ManagedLock {
            type_name: Some("System.Threading.SemaphoreSlim".into()),
            current_count: Some(s.current_count),
            max_count: Some(s.max_count),
            async_waiters,
            ..ManagedLock::new(LockStorage::SemaphoreSlim, s.address)
        }),
    });
}
