//! The wait-for graph: threads and locks as nodes, *waits-for* (thread → lock) and *held-by*
//! (lock → thread) edges. Every strongly connected component is a deadlock; it is reported as the
//! ordered chain a person reads: T1 waits for L1 — held by T2, which waits for L0 — held by T1
//! (the words are the report's).
//!
//! A runtime's worker pool is a node too (sync over async): a task whose completion waits in the
//! pool's queue (its continuation, or the timer that completes what it awaits) has an edge to the
//! pool, and the pool, when every worker is blocked and it cannot grow (at its maximum), has an
//! edge to each worker. A cycle through the pool is a deadlock like any other.

pub(crate) mod blocking_site;
pub(crate) mod dominators;
pub(crate) mod groups;
pub(crate) mod limits;
pub(crate) mod signature;
pub(crate) mod verdict;

use crate::waits::{LockFact, LockKind, Owner, WorkerPool};
use petgraph::algo::tarjan_scc;
use petgraph::graphmap::DiGraphMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Node {
    Thread(u32),
    Lock(usize),
    Pool,
}

/// One wait-for cycle, as data: the report words it (`report::words::deadlock`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cycle {
    /// The threads in cycle order: each waits for a lock held by the next; the last waits for
    /// one held by the first. Starts with the lowest tid.
    pub(crate) tids: Vec<u32>,
    /// `locks[i]` is the lock `tids[i]` waits for (held by `tids[i+1]`).
    pub(crate) locks: Vec<String>,
    /// True when an edge rests on an inferred owner rather than one the lock records.
    pub(crate) inferred: bool,
    /// A cycle through the worker pool: the last lock is completed by work queued to the pool,
    /// whose workers (the first thread among them) are all blocked and which cannot grow.
    pub(crate) pool: Option<PoolInCycle>,
}

/// The worker pool as a node of a cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PoolInCycle {
    /// Every worker (all blocked): the pool's edges.
    pub(crate) workers: Vec<u32>,
    /// The most workers the pool may have (it has that many).
    pub(crate) max: Option<u32>,
    /// Work items waiting in its queues.
    pub(crate) queued: Option<u32>,
}

/// Whether `l` is completed only by work waiting in the worker pool's queues: a task whose async
/// stack's next step (its continuation, or the timer that completes what it awaits) is queued,
/// or a wait no thread holds whose release the runtime found queued (`released_by_queued`).
pub(crate) fn needs_pool(l: &LockFact) -> bool {
    let Some(m) = l.managed.as_ref().filter(|_| l.owner.tid().is_none()) else { return false };
    // Or what else would end it waits there: a socket event, a Parallel replica (inferred).
    (l.kind == LockKind::Task && m.task.as_ref().is_some_and(|t| t.queued == Some(true))) || m.released_by_queued.is_some()
}

/// Who waits for what: the graph built from lock facts and each thread's `blocked_on`.
pub(crate) struct WaitForGraph<'a> {
    graph: DiGraphMap<Node, ()>,
    locks: &'a [LockFact],
    blocked_on: Vec<(u32, Option<usize>)>,
    /// The graph with the worker pool's edges, when it has any, and the pool.
    with_pool: Option<(DiGraphMap<Node, ()>, &'a WorkerPool)>,
}

impl<'a> WaitForGraph<'a> {
    /// `threads`: each thread's tid and the id of the lock it is blocked on.
    pub(crate) fn new(threads: &[(u32, Option<&str>)], locks: &'a [LockFact]) -> WaitForGraph<'a> {
        let mut graph = DiGraphMap::new();
        let index = |id: &str| locks.iter().position(|l| l.id == id);
        let mut blocked_on = Vec::with_capacity(threads.len());
        for &(tid, lock) in threads {
            graph.add_node(Node::Thread(tid));
            let li = lock.and_then(index);
            if let Some(li) = li {
                graph.add_edge(Node::Thread(tid), Node::Lock(li), ());
            }
            blocked_on.push((tid, li));
        }
        for (li, l) in locks.iter().enumerate() {
            if let Some(owner) = l.owner.tid() {
                if graph.contains_node(Node::Thread(owner)) {
                    graph.add_edge(Node::Lock(li), Node::Thread(owner), ());
                }
            }
        }
        WaitForGraph { graph, locks, blocked_on, with_pool: None }
    }

    /// Adds the worker pool: an edge from each lock that [`needs_pool`] to the pool, and from
    /// the pool to each worker when every worker is blocked and the pool is at its maximum.
    pub(crate) fn with_pool(mut self, pool: Option<&'a WorkerPool>) -> WaitForGraph<'a> {
        let Some(pool) = pool.filter(|p| p.exhausted() && p.at_max()) else { return self };
        let mut g = self.graph.clone();
        for (li, l) in self.locks.iter().enumerate() {
            if needs_pool(l) {
                g.add_edge(Node::Lock(li), Node::Pool, ());
            }
        }
        for &w in &pool.workers {
            if g.contains_node(Node::Thread(w)) {
                g.add_edge(Node::Pool, Node::Thread(w), ());
            }
        }
        self.with_pool = Some((g, pool));
        self
    }

    fn waits_for(&self, tid: u32) -> Option<usize> {
        self.blocked_on.iter().find(|(t, _)| *t == tid).and_then(|(_, l)| *l)
    }

    /// Every cycle, ordered by their lowest tid.
    pub(crate) fn cycles(&self) -> Vec<Cycle> {
        let mut out = Vec::new();
        for scc in tarjan_scc(&self.graph) {
            let mut tids: Vec<u32> = scc.iter().filter_map(|n| if let Node::Thread(t) = n { Some(*t) } else { None }).collect();
            if scc.len() < 2 || tids.is_empty() {
                continue;
            }
            tids.sort_unstable();
            if let Some(d) = self.chain_from(tids[0], scc.len()) {
                out.push(d);
            }
        }
        if let Some((g, pool)) = &self.with_pool {
            for scc in tarjan_scc(g).into_iter().filter(|scc| scc.contains(&Node::Pool)) {
                if let Some(d) = self.chain_through_pool(pool, scc.len()) {
                    out.push(d);
                }
            }
        }
        out.sort_by_key(|d| d.tids.first().copied());
        out
    }

    /// The longest chain from a worker, along waits-for and held-by edges, to a lock the pool
    /// completes (ties: the lowest tid first): the workers behind a lock come before its owner.
    fn chain_through_pool(&self, pool: &WorkerPool, limit: usize) -> Option<Cycle> {
        let mut workers = pool.workers.clone();
        workers.sort_unstable();
        let mut best: Option<Cycle> = None;
        for &w in &workers {
            let (mut tids, mut locks, mut inferred) = (Vec::new(), Vec::new(), false);
            let mut t = w;
            for _ in 0..limit {
                let Some(li) = self.waits_for(t) else { break };
                let lock = &self.locks[li];
                tids.push(t);
                locks.push(lock.id.clone());
                if needs_pool(lock) {
                    // A release found queued by inference makes the cycle inferred.
                    inferred |= lock.managed.as_ref().is_some_and(|m| m.released_by_queued.is_some());
                    if best.as_ref().is_none_or(|b| b.tids.len() < tids.len()) {
                        let pool = Some(PoolInCycle { workers: workers.clone(), max: pool.max, queued: pool.queued });
                        best = Some(Cycle { tids: std::mem::take(&mut tids), locks: std::mem::take(&mut locks), inferred, pool });
                    }
                    break;
                }
                inferred |= matches!(lock.owner, Owner::Inferred { .. });
                match lock.owner.tid() {
                    Some(next) if !tids.contains(&next) => t = next,
                    _ => break,
                }
            }
        }
        best
    }

    /// Follows waits-for and held-by edges from `start` until the chain closes.
    fn chain_from(&self, start: u32, limit: usize) -> Option<Cycle> {
        let (mut tids, mut locks, mut inferred) = (Vec::new(), Vec::new(), false);
        let mut t = start;
        for _ in 0..limit {
            let li = self.waits_for(t)?;
            let lock = &self.locks[li];
            let next = lock.owner.tid()?;
            inferred |= matches!(lock.owner, Owner::Inferred { .. });
            tids.push(t);
            locks.push(lock.id.clone());
            if next == start {
                return Some(Cycle { tids, locks, inferred, pool: None });
            }
            t = next;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(id: &str, name: &str, owner: Option<u32>, waiters: &[u32]) -> LockFact {
        LockFact::test_mutex(id, name, owner, waiters)
    }

    #[test]
    fn a_three_thread_cycle_reads_as_one_chain() {
        let locks = vec![lock("m1", "ledger", Some(8609), &[8611]), lock("m2", "audit", Some(8610), &[8609]), lock("m3", "index_lock", Some(8611), &[8610])];
        let threads = [(8609, Some("m2")), (8610, Some("m3")), (8611, Some("m1")), (9000, None)];
        let d = WaitForGraph::new(&threads, &locks).cycles();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].tids, vec![8609, 8610, 8611]);
        assert_eq!(d[0].locks, vec!["m2", "m3", "m1"]);
        // Its words: report::words's tests.
    }

    #[test]
    fn relocking_an_owned_mutex_is_a_cycle_of_one() {
        let locks = vec![lock("m", "self_lock", Some(5), &[5])];
        let d = WaitForGraph::new(&[(5, Some("m"))], &locks).cycles();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].tids, vec![5]);
        assert_eq!(d[0].locks, vec!["m"]);
    }

    #[test]
    fn a_convoy_is_not_a_deadlock() {
        let locks = vec![lock("m", "convoy_lock", Some(1), &[2, 3, 4])];
        let threads = [(1, None), (2, Some("m")), (3, Some("m")), (4, Some("m"))];
        assert!(WaitForGraph::new(&threads, &locks).cycles().is_empty());
    }

    #[test]
    fn an_unknown_owner_breaks_no_chain_into_a_false_cycle() {
        let locks = vec![lock("a", "a", None, &[1]), lock("b", "b", Some(1), &[2])];
        let threads = [(1, Some("a")), (2, Some("b"))];
        assert!(WaitForGraph::new(&threads, &locks).cycles().is_empty());
    }
}
