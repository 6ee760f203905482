//! `System.Threading.SemaphoreSlim`s (collected by the heap walk) and who waits for them. A
//! SemaphoreSlim records its count (`m_currentCount`, `m_maxCount`) but not who took it. Its
//! waiters are of two shapes (CoreLib 10): an async waiter (`WaitAsync`) is a `TaskNode` (a
//! `Task<bool>`) in the list `m_asyncHead`…`m_asyncTail`, whose continuation is the awaiting
//! async method; a thread in `Wait()` either blocks in `Monitor.Wait` on `m_lockObjAndDisposed`
//! (counted in `m_waitCount`) or, when async waiters are queued, gets in line behind them with a
//! TaskNode of its own and waits for that task (`Task.Wait` on the node).

use crate::runtimes::dotnet::contract::facts::Layout;
use crate::runtimes::dotnet::gc::referrers::{instance_fields, Field};
use crate::runtimes::dotnet::types::objects::TypeNamer;
use crate::runtimes::dotnet::contract::target::Target;
use std::collections::HashSet;

/// TaskNodes followed per semaphore at most.
pub(crate) const MAX_NODES: usize = 4096;

/// One SemaphoreSlim as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Semaphore {
    pub(crate) address: u64,
    pub(crate) current_count: i32,
    pub(crate) max_count: i32,
    /// Threads in `Monitor.Wait` on the lock object (`m_waitCount`).
    pub(crate) wait_count: i32,
    /// `m_lockObjAndDisposed`: the object those threads wait on.
    pub(crate) lock_object: u64,
    /// The TaskNodes in line, head first.
    pub(crate) nodes: Vec<u64>,
    /// Why the node list was cut (too long, a cycle, unreadable), or none.
    pub(crate) cut: Option<String>,
}

fn field<'f>(fields: &'f [Field], name: &str) -> Option<&'f Field> {
    fields.iter().find(|f| f.name == name)
}

/// Every SemaphoreSlim at the given (address, MethodTable) pairs whose fields read.
pub(crate) fn read(t: &Target, namer: &TypeNamer, l: &Layout, semaphores: &[(u64, u64)]) -> Vec<Semaphore> {
    let mut out = Vec::new();
    let mut fields_of: Option<(u64, Vec<Field>)> = None;
    let mut node_next: Option<(u64, Option<u64>)> = None;
    for &(address, mt) in semaphores {
        if fields_of.as_ref().is_none_or(|(m, _)| *m != mt) {
            fields_of = Some((mt, instance_fields(t, namer, l, mt)));
        }
        let Some((_, fields)) = fields_of.as_ref() else { continue };
        let int = |name: &str| field(fields, name).and_then(|f| t.read_u32(address.wrapping_add(f.offset), "SemaphoreSlim field").ok()).map(|v| v as i32);
        let ptr = |name: &str| field(fields, name).and_then(|f| t.read_ptr(address.wrapping_add(f.offset), "SemaphoreSlim field").ok());
        let (Some(current_count), Some(max_count)) = (int("m_currentCount"), int("m_maxCount")) else { continue };
        let mut s = Semaphore {
            address,
            current_count,
            max_count,
            wait_count: int("m_waitCount").unwrap_or(0),
            lock_object: ptr("m_lockObjAndDisposed").unwrap_or(0),
            nodes: Vec::new(),
            cut: None,
        };
        // TaskNode.Next, read once per TaskNode MethodTable.
        let mut at = ptr("m_asyncHead").unwrap_or(0);
        let mut seen = HashSet::new();
        while at != 0 {
            if !seen.insert(at) {
                s.cut = Some(format!("the TaskNode list comes back to {at:#x} (a cycle)"));
                break;
            }
            if s.nodes.len() >= MAX_NODES {
                s.cut = Some(format!("more than {MAX_NODES} TaskNodes in line"));
                break;
            }
            let Ok(node_mt) = crate::runtimes::dotnet::types::objects::method_table(t, at) else {
                s.cut = Some(format!("TaskNode {at:#x} is not in the dump"));
                break;
            };
            if node_next.is_none_or(|(m, _)| m != node_mt) {
                node_next = Some((node_mt, field(&instance_fields(t, namer, l, node_mt), "Next").map(|f| f.offset)));
            }
            s.nodes.push(at);
            let Some(next) = node_next.and_then(|(_, o)| o) else { break };
            at = match t.read_ptr(at.wrapping_add(next), "TaskNode.Next") {
                Ok(n) => n,
                Err(e) => {
                    s.cut = Some(format!("TaskNode.Next of {at:#x}: {e}"));
                    break;
                }
            };
        }
        out.push(s);
    }
    out
}
