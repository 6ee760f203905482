//! The wait-for graph: threads and locks as nodes, *waits-for* (thread → lock) and *held-by*
//! (lock → thread) edges. A lock's out-edges are everyone who must act for a wait on it to end
//! (`LockFact::edges`): its owner, or its several holders — an rwlock's readers, a semaphore's or
//! a pool's holders, the collector's threads — with a rule for when a wait ends: when any one of
//! them acts (a semaphore, a pool) or only when all have (a writer behind readers).
//!
//! The threads that can never proceed are found as a fixpoint: a thread is stuck while the lock
//! it waits for is; a lock is stuck while every holder that could release it is stuck (any) or
//! while one holder it needs is (all), or when nobody left can release it (its owner exited).
//! Every strongly connected part of the stuck threads and locks is a deadlock; it is reported as
//! one ordered chain a person reads: T1 waits for L1 — held by T2, which waits for L0 — held by T1
//! (the words are the report's), with every other thread of that part beside it. With one owner
//! per lock this is exactly the cycles of the graph.
//!
//! A runtime's worker pool is a node too (sync over async): a task whose completion waits in the
//! pool's queue (its continuation, or the timer that completes what it awaits) has an edge to the
//! pool, and the pool, when every worker is blocked and it cannot grow (at its maximum), has an
//! edge to each worker (any one worker set free would run the queued work). A cycle through the
//! pool is a deadlock like any other.

pub(crate) mod blocking_site;
pub(crate) mod dominators;
pub(crate) mod groups;
pub(crate) mod limits;
pub(crate) mod signature;
pub(crate) mod verdict;

use crate::waits::{LockFact, LockKind, Release, WorkerPool};
use petgraph::algo::tarjan_scc;
use petgraph::graphmap::DiGraphMap;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Node {
    Thread(u32),
    Lock(usize),
    Pool,
}

/// One deadlock, as data: the report words it (`report::words::deadlock`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cycle {
    /// The threads in cycle order: each waits for a lock held by the next; the last waits for
    /// one held by the first. Starts with the lowest tid.
    pub(crate) tids: Vec<u32>,
    /// `locks[i]` is the lock `tids[i]` waits for (held by `tids[i+1]`).
    pub(crate) locks: Vec<String>,
    /// True when an edge rests on an inferred owner or holder rather than one the lock records.
    pub(crate) inferred: bool,
    /// A cycle through the worker pool: the last lock is completed by work queued to the pool,
    /// whose workers (the first thread among them) are all blocked and which cannot grow.
    pub(crate) pool: Option<PoolInCycle>,
    /// The deadlock's other threads, beyond the chain (ascending): the other holders of a lock
    /// on it that any holder could release — all of them stuck in the same deadlock.
    pub(crate) also: Vec<u32>,
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

/// A node's out-edges and when a wait on it ends.
struct Out {
    to: Vec<(Node, bool)>,
    release: Release,
    /// Nobody left can release it (a lock whose owner exited).
    dead: bool,
}

/// Who waits for what: the graph built from lock facts and each thread's `blocked_on`.
pub(crate) struct WaitForGraph<'a> {
    locks: &'a [LockFact],
    blocked_on: BTreeMap<u32, usize>,
    /// Each lock's (and the pool's) out-edges, to threads of the dump (and the pool).
    out: BTreeMap<Node, Out>,
    /// The worker pool, when it is a node (every worker blocked, at its maximum).
    pool: Option<&'a WorkerPool>,
}

impl<'a> WaitForGraph<'a> {
    /// `threads`: each thread's tid and the id of the lock it is blocked on.
    pub(crate) fn new(threads: &[(u32, Option<&str>)], locks: &'a [LockFact]) -> WaitForGraph<'a> {
        let index: BTreeMap<&str, usize> = locks.iter().enumerate().map(|(i, l)| (l.id.as_str(), i)).collect();
        let present: BTreeSet<u32> = threads.iter().map(|&(t, _)| t).collect();
        let blocked_on = threads.iter().filter_map(|&(t, lock)| Some((t, *index.get(lock?)?))).collect();
        let mut out = BTreeMap::new();
        for (li, l) in locks.iter().enumerate() {
            let (edges, release) = l.edges();
            let to = edges.into_iter().filter(|e| present.contains(&e.tid)).map(|e| (Node::Thread(e.tid), e.inferred)).collect();
            out.insert(Node::Lock(li), Out { to, release, dead: l.released_by_nobody() });
        }
        WaitForGraph { locks, blocked_on, out, pool: None }
    }

    /// Adds the worker pool: an edge from each lock that [`needs_pool`] to the pool, and from
    /// the pool to each worker when every worker is blocked and the pool is at its maximum.
    pub(crate) fn with_pool(mut self, pool: Option<&'a WorkerPool>) -> WaitForGraph<'a> {
        let Some(pool) = pool.filter(|p| p.exhausted() && p.at_max()) else { return self };
        for (li, l) in self.locks.iter().enumerate() {
            if needs_pool(l)
                && let Some(o) = self.out.get_mut(&Node::Lock(li)) {
                    o.to.push((Node::Pool, false));
                }
        }
        let workers = pool.workers.iter().filter(|w| self.blocked_on.contains_key(w)).map(|&w| (Node::Thread(w), false)).collect();
        self.out.insert(Node::Pool, Out { to: workers, release: Release::Any, dead: false });
        self.pool = Some(pool);
        self
    }

    fn waits_for(&self, tid: u32) -> Option<usize> {
        self.blocked_on.get(&tid).copied()
    }

    fn successors(&self, n: Node) -> Vec<(Node, bool)> {
        match n {
            Node::Thread(t) => self.waits_for(t).map(|li| vec![(Node::Lock(li), false)]).unwrap_or_default(),
            _ => self.out.get(&n).map(|o| o.to.clone()).unwrap_or_default(),
        }
    }

    /// The nodes that can never move (threads, locks, the pool): the greatest set in which
    /// every thread waits for a member, and every lock is released by nobody, or needs a member
    /// (all) or has only members to release it (any).
    fn stuck_nodes(&self) -> BTreeSet<Node> {
        let mut stuck: BTreeSet<Node> = self.blocked_on.keys().map(|&t| Node::Thread(t)).collect();
        stuck.extend(self.out.iter().filter(|(_, o)| o.dead || !o.to.is_empty()).map(|(&n, _)| n));
        loop {
            let before = stuck.len();
            let keep: Vec<Node> = stuck
                .iter()
                .copied()
                .filter(|&n| match n {
                    Node::Thread(t) => self.waits_for(t).is_some_and(|li| stuck.contains(&Node::Lock(li))),
                    _ => self.out.get(&n).is_some_and(|o| {
                        o.dead
                            || match o.release {
                                Release::Any => o.to.iter().all(|(m, _)| stuck.contains(m)),
                                Release::All => o.to.iter().any(|(m, _)| stuck.contains(m)),
                            }
                    }),
                })
                .collect();
            stuck = keep.into_iter().collect();
            if stuck.len() == before {
                return stuck;
            }
        }
    }

    /// The threads that can never proceed: in a deadlock, behind one, or waiting for a lock
    /// nobody left can release (ascending): the verdict's `abandoned` when there is no cycle.
    pub(crate) fn stuck(&self) -> Vec<u32> {
        self.stuck_nodes().into_iter().filter_map(|n| if let Node::Thread(t) = n { Some(t) } else { None }).collect()
    }

    /// Every deadlock, ordered by their lowest tid.
    pub(crate) fn cycles(&self) -> Vec<Cycle> {
        let stuck = self.stuck_nodes();
        // The stuck part of the graph: a lock's edges to the stuck holders it waits on.
        let mut g: DiGraphMap<Node, ()> = DiGraphMap::new();
        for &n in &stuck {
            g.add_node(n);
            for (m, _) in self.successors(n) {
                if stuck.contains(&m) {
                    g.add_edge(n, m, ());
                }
            }
        }
        let mut out = Vec::new();
        for scc in tarjan_scc(&g) {
            let mut tids: Vec<u32> = scc.iter().filter_map(|n| if let Node::Thread(t) = n { Some(*t) } else { None }).collect();
            if tids.is_empty() || (scc.len() < 2 && !g.contains_edge(scc[0], scc[0])) {
                continue;
            }
            tids.sort_unstable();
            let members: BTreeSet<Node> = scc.iter().copied().collect();
            let cycle = match self.pool {
                Some(pool) if members.contains(&Node::Pool) => self.chain_through_pool(pool, scc.len()),
                _ => self.chain_from(tids[0], &g, &members),
            };
            if let Some(mut c) = cycle {
                c.also = tids.iter().copied().filter(|t| !c.tids.contains(t) && !c.pool.as_ref().is_some_and(|p| p.workers.contains(t))).collect();
                out.push(c);
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
                        best = Some(Cycle { tids: std::mem::take(&mut tids), locks: std::mem::take(&mut locks), inferred, pool, also: vec![] });
                    }
                    break;
                }
                let (edges, _) = lock.edges();
                inferred |= edges.first().is_some_and(|e| e.inferred);
                match edges.first().map(|e| e.tid) {
                    Some(next) if !tids.contains(&next) => t = next,
                    _ => break,
                }
            }
        }
        best
    }

    /// The shortest chain from `start` back to itself inside one deadlock (`members`, in the
    /// stuck graph `g`), holders taken lowest tid first: with one owner per lock, the cycle.
    fn chain_from(&self, start: u32, g: &DiGraphMap<Node, ()>, members: &BTreeSet<Node>) -> Option<Cycle> {
        let from = Node::Thread(start);
        let mut prev: BTreeMap<Node, Node> = BTreeMap::new();
        let mut queue = VecDeque::from([from]);
        let mut closing = None;
        'search: while let Some(n) = queue.pop_front() {
            let mut next: Vec<Node> = g.neighbors(n).filter(|m| members.contains(m)).collect();
            next.sort_unstable();
            for m in next {
                if m == from {
                    closing = Some(n);
                    break 'search;
                }
                if let std::collections::btree_map::Entry::Vacant(e) = prev.entry(m) {
                    e.insert(n);
                    queue.push_back(m);
                }
            }
        }
        // Walk back from the node that closes the chain.
        let mut path = vec![closing?];
        while let Some(&p) = path.last().and_then(|n| prev.get(n)) {
            path.push(p);
        }
        if path.last() != Some(&from) {
            path.push(from);
        }
        path.reverse();
        let (mut tids, mut locks, mut inferred) = (Vec::new(), Vec::new(), false);
        for (i, n) in path.iter().enumerate() {
            match *n {
                Node::Thread(t) => tids.push(t),
                Node::Lock(li) => {
                    locks.push(self.locks[li].id.clone());
                    let next = path.get(i + 1).copied().unwrap_or(from);
                    let o = self.out.get(n)?;
                    // Inferred when the edge taken is, or (any) when a holder it rests on is.
                    inferred |= o.to.iter().any(|&(m, inf)| inf && (m == next || (o.release == Release::Any && members.contains(&m))));
                }
                Node::Pool => return None,
            }
        }
        Some(Cycle { tids, locks, inferred, pool: None, also: vec![] })
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

    /// A pool-like lock: any of `holders` releasing it lets a waiter on.
    fn pool(id: &str, holders: &[u32], waiters: &[u32]) -> LockFact {
        let mut l = LockFact::test_mutex(id, id, None, waiters);
        l.owner = crate::waits::Owner::None;
        l.holders = holders.iter().map(|&t| crate::waits::lock::Holder::known(t)).collect();
        l.release = Some(Release::Any);
        l
    }

    #[test]
    fn a_pool_whose_holders_all_wait_for_its_waiter_is_one_deadlock() {
        // Four requests hold the pool's four connections and wait for `gate`, held by a fifth
        // that waits for a connection.
        let locks = vec![pool("pool", &[1, 2, 3, 4], &[5]), lock("gate", "gate", Some(5), &[1, 2, 3, 4])];
        let threads = [(1, Some("gate")), (2, Some("gate")), (3, Some("gate")), (4, Some("gate")), (5, Some("pool")), (6, None)];
        let g = WaitForGraph::new(&threads, &locks);
        let d = g.cycles();
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].tids, vec![1, 5]);
        assert_eq!(d[0].locks, vec!["gate", "pool"]);
        assert_eq!(d[0].also, vec![2, 3, 4]);
        assert!(!d[0].inferred);
        assert_eq!(g.stuck(), vec![1, 2, 3, 4, 5]);
    }

    #[test]
    fn a_pool_with_one_holder_free_is_no_deadlock() {
        // Holder 4 is running: it can give its connection back.
        let locks = vec![pool("pool", &[1, 2, 3, 4], &[5]), lock("gate", "gate", Some(5), &[1, 2, 3])];
        let threads = [(1, Some("gate")), (2, Some("gate")), (3, Some("gate")), (4, None), (5, Some("pool"))];
        let g = WaitForGraph::new(&threads, &locks);
        assert!(g.cycles().is_empty());
        assert!(g.stuck().is_empty());
    }

    #[test]
    fn a_writer_needs_every_reader_so_one_stuck_reader_is_enough() {
        // Readers 1 and 2 hold `table`; 2 runs on, 1 waits for `journal`, held by writer 3, who
        // waits for `table`: 3 can never write.
        let mut table = lock("table", "table", None, &[3]);
        table.kind = LockKind::Rwlock;
        table.owner = crate::waits::Owner::Readers { count: 2, reader_tids: vec![1, 2], reader_evidence: vec![] };
        let locks = vec![table, lock("journal", "journal", Some(3), &[1])];
        let threads = [(1, Some("journal")), (2, None), (3, Some("table"))];
        let d = WaitForGraph::new(&threads, &locks).cycles();
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].tids, vec![1, 3]);
        assert!(d[0].inferred, "the readers are inferred");
        assert!(d[0].also.is_empty(), "reader 2 is not stuck");
    }

    #[test]
    fn readers_not_all_accounted_for_give_no_edge() {
        let mut table = lock("table", "table", None, &[3]);
        table.kind = LockKind::Rwlock;
        table.owner = crate::waits::Owner::Readers { count: 3, reader_tids: vec![1, 2], reader_evidence: vec![] };
        let locks = vec![table, lock("journal", "journal", Some(3), &[1])];
        let threads = [(1, Some("journal")), (2, Some("journal")), (3, Some("table"))];
        assert!(WaitForGraph::new(&threads, &locks).cycles().is_empty());
    }

    #[test]
    fn a_lock_whose_owner_exited_holds_its_waiters_for_good_without_a_cycle() {
        let mut gone = lock("gone", "gone", None, &[2]);
        gone.owner = crate::waits::Owner::Exited { tid: 99 };
        let locks = vec![gone, lock("m", "m", Some(2), &[3])];
        let threads = [(1, None), (2, Some("gone")), (3, Some("m"))];
        let g = WaitForGraph::new(&threads, &locks);
        assert!(g.cycles().is_empty());
        assert_eq!(g.stuck(), vec![2, 3]);
    }

    #[test]
    fn an_inferred_holder_marks_the_deadlock_inferred() {
        let mut sem = pool("sem", &[], &[2]);
        sem.holders = vec![crate::waits::lock::Holder::inferred(1, crate::waits::evidence::Inference::OnlyFrameHolding(crate::waits::FrameHold { tid: 1, frame: 2, function: None, place: crate::waits::PointerPlace::Stack(0x10), value: 0x20 }))];
        let locks = vec![sem, lock("m", "m", Some(2), &[1])];
        let d = WaitForGraph::new(&[(1, Some("m")), (2, Some("sem"))], &locks).cycles();
        assert_eq!(d.len(), 1);
        assert!(d[0].inferred);
    }

    #[test]
    fn an_unknown_owner_breaks_no_chain_into_a_false_cycle() {
        let locks = vec![lock("a", "a", None, &[1]), lock("b", "b", Some(1), &[2])];
        let threads = [(1, Some("a")), (2, Some("b"))];
        assert!(WaitForGraph::new(&threads, &locks).cycles().is_empty());
    }
}
