//! Waits the runtime keeps no record of, read from what the waiting threads' frames keep:
//! a `ReaderWriterLockSlim` ([`super::rwlock_slim`]), a pool of resources
//! ([`super::pool_waits`], by the rules of `analyzers/pools.toml`), a class's initialiser
//! ([`super::class_init`]). Each becomes a lock of its own kind whose waiters are the threads
//! blocked in its entry frames; the native or Monitor wait each of those threads sleeps in is
//! how the runtime implements that wait, and gives way to it.

use super::stack_objects::ThreadFrames;
use crate::diagnostics::Diagnostic;
use crate::runtimes::dotnet::contract::context::Context;
use crate::runtimes::dotnet::contract::facts::Layout;
use crate::runtimes::dotnet::gc::report::ReferrerReport;
use crate::runtimes::dotnet::gc::static_names::StaticName;
use crate::runtimes::dotnet::types::objects::TypeNamer;
use crate::runtimes::dotnet::types::statics::Statics;
use crate::runtimes::dotnet::{RuntimeReading, STAGE};
use crate::waits::{Evidence, LockFact, ManagedThreads, NamedThread, ThreadInput, WaitFacts};
use std::cell::OnceCell;
use std::collections::{BTreeMap, HashMap};

/// What the readers of these waits share: the runtime, its threads' frames and names, and
/// the statics that name the objects (read once, when some lock needs a name).
pub(crate) struct ObjectWaits<'a, 't, 'm> {
    pub(crate) c: &'a Context<'a>,
    pub(crate) r: &'a RuntimeReading,
    pub(crate) statics: &'a Statics<'a, 't, 'm>,
    pub(crate) layout: &'a Layout,
    pub(crate) names: &'a ManagedThreads,
    /// Each thread's frames, in the order of the dump's threads (and of `facts.threads`).
    pub(crate) frames: Vec<ThreadFrames<'a>>,
    held_by_static: OnceCell<HashMap<u64, Vec<(u64, StaticName)>>>,
}

/// Finds the waits on objects the threads' frames keep and merges them into `facts`.
pub(crate) fn merge(c: &Context<'_>, r: &RuntimeReading, names: &ManagedThreads, threads: &[ThreadInput<'_>], facts: &mut WaitFacts) {
    let Ok(build) = crate::runtimes::dotnet::gc::build_facts(c) else { return };
    let t = c.target();
    let namer = TypeNamer::of(&t, c);
    let statics = Statics::new(&t, &namer, &build.layout);
    let segments = &c.process.core.segments;
    let frames = threads.iter().map(|i| ThreadFrames::of(i, segments.find(i.registers.sp()).map_or(0, |s| s.end()))).collect();
    let w = ObjectWaits { c, r, statics: &statics, layout: &build.layout, names, frames, held_by_static: OnceCell::new() };
    super::class_init::merge(&w, facts);
    super::rwlock_slim::merge(&w, facts);
    super::pool_waits::merge(&w, facts);
    facts.locks.sort_by(|a, b| a.id.cmp(&b.id));
}

impl ObjectWaits<'_, '_, '_> {
    pub(crate) fn who(&self, tid: u32) -> NamedThread {
        NamedThread { tid, name: self.names.names.get(&tid).cloned() }
    }

    /// The OS tid of the managed thread `managed_id`, when it is one of the dump's threads.
    pub(crate) fn tid_of_managed(&self, managed_id: u32) -> Option<u32> {
        self.r.threads.iter().find(|th| th.managed_id == managed_id && th.os_tid != 0).map(|th| th.os_tid).filter(|t| self.frames.iter().any(|f| f.tid == *t))
    }

    /// Whether the dump's thread at `index` is blocked (natively or in a managed wait).
    pub(crate) fn blocked(&self, facts: &WaitFacts, index: usize) -> bool {
        facts.threads.get(index).is_some_and(|w| w.blocked_on.is_some())
    }

    /// The static field that holds `object`, as a referrer that names it (`PriceBook.Lock`):
    /// only when exactly one static does.
    pub(crate) fn static_holder(&self, object: u64) -> Option<ReferrerReport> {
        let by_value = self.held_by_static.get_or_init(|| {
            let t = self.statics.target();
            let slots = crate::runtimes::dotnet::gc::static_names::static_slots_of(t, self.statics.namer(), self.layout, &[]);
            let mut out: HashMap<u64, Vec<(u64, StaticName)>> = HashMap::new();
            for (slot, name) in slots {
                if let Ok(v) = t.read_ptr(slot, "static slot")
                    && v != 0
                {
                    out.entry(v).or_default().push((slot, name));
                }
            }
            out
        });
        let [(slot, s)] = by_value.get(&object)?.as_slice() else { return None };
        Some(ReferrerReport { type_name: s.class.clone(), field: s.field.clone(), address: crate::hex::Hex(*slot), identity: None, is_static: true })
    }

    /// Makes each of `waiters` (OS tids) wait for the lock `id` (pushed into `facts` by the
    /// caller): the wait its thread was found in gives way to it, and a lock left with no
    /// waiter by that goes. `new_lock` gets, as evidence, the native wait each superseded.
    pub(crate) fn supersede(&self, facts: &mut WaitFacts, waiters: &[u32], id: &str, new_lock: &mut LockFact) {
        let mut emptied = Vec::new();
        for &tid in waiters {
            let Some(i) = self.frames.iter().position(|f| f.tid == tid) else { continue };
            let Some(old) = facts.threads.get_mut(i).and_then(|w| w.blocked_on.replace(id.to_string())) else { continue };
            if old == id {
                continue;
            }
            if let Some(l) = facts.locks.iter_mut().find(|l| l.id == old) {
                l.waiter_tids.retain(|t| *t != tid);
                new_lock.evidence.push(Evidence::NativeWait { tid, kind: l.kind, address: l.address, id: l.id.clone() });
                if l.waiter_tids.is_empty() {
                    emptied.push(old);
                }
            }
        }
        // A lock that only these waits made (a condition variable, a Monitor.Wait on the
        // event's lock) goes with them; one someone holds stays.
        facts.locks.retain(|l| !emptied.contains(&l.id) || l.owner.tid().is_some() || !l.holders.is_empty());
    }

    pub(crate) fn note(&self, facts: &mut WaitFacts, message: String) {
        facts.diagnostics.push(Diagnostic::info(STAGE, message));
    }
}

/// Distinct objects, in first-seen order, each with where it was first seen.
pub(crate) fn distinct<T: Clone>(found: &[T], key: impl Fn(&T) -> u64) -> Vec<T> {
    let mut seen = BTreeMap::new();
    let mut out = Vec::new();
    for f in found {
        if seen.insert(key(f), ()).is_none() {
            out.push(f.clone());
        }
    }
    out
}
