//! Pools of resources (`analyzers/pools.toml`, read by [`crate::pools`]) over the .NET runtime:
//! a pool is an object of its rule's type that a waiting thread's frames keep; its fields and
//! its items are read through the classes' own field lists; who has an item is the thread
//! whose frames keep the item's lease (inferred: the frame is the evidence).
//!
//! A pool at its maximum, nothing idle, and every item's holder accounted for, is a lock whose
//! holders are its items' holders (any one returning an item releases a waiter); its waiters are
//! the threads blocked in the rule's frames. Below its maximum, or with an item nobody is seen
//! to hold, it has no holders: nothing says its waiters wait for good.

use super::object_waits::ObjectWaits;
use crate::hex::Hex;
use crate::pools::{ItemHolder, Keeping, PoolReading, PoolSource, Pools};
use crate::runtimes::dotnet::types::objects;
use crate::runtimes::dotnet::types::statics::element;
use crate::waits::{Evidence, Holder, Inference, LockFact, LockKind, LockStorage, ManagedLock, Owner, PoolItem, PoolState, UnknownOwner, WaitFacts};
use std::cell::RefCell;
use std::collections::HashMap;

/// Array elements read per pool at most.
const MAX_ELEMENTS: u64 = 1 << 16;

pub(crate) fn merge(w: &ObjectWaits<'_, '_, '_>, facts: &mut WaitFacts) {
    let Ok(rules) = Pools::builtin() else { return };
    // Only a blocked thread waits for a pool.
    let waiting: Vec<(u32, Vec<&str>)> =
        w.frames.iter().enumerate().filter(|(i, _)| w.blocked(facts, *i)).map(|(_, f)| (f.tid, f.frames.iter().filter(|fr| fr.managed).filter_map(|fr| fr.function).collect())).collect();
    if !rules.pool.iter().any(|rule| waiting.iter().any(|(_, f)| rule.is_waiter(f))) {
        return;
    }
    let source = Source { w, classes: RefCell::new(HashMap::new()) };
    for reading in crate::pools::read(rules, &source, &waiting) {
        if reading.waiters.is_empty() {
            continue;
        }
        let Some(rule) = rules.pool.iter().find(|r| r.key == reading.key) else { continue };
        pool_lock(w, facts, rule, &reading, &source);
    }
}

fn pool_lock(w: &ObjectWaits<'_, '_, '_>, facts: &mut WaitFacts, rule: &crate::pools::PoolRule, p: &PoolReading, source: &Source<'_, '_, '_, '_>) {
    let t = w.statics.target();
    let lease_type = |lease: u64| w.statics.namer().heap_type_name(objects::method_table(t, lease).unwrap_or(0)).unwrap_or_else(|_| "(type unread)".into());
    let accounted = p.exhausted_and_accounted();
    let mut holders: Vec<Holder> = Vec::new();
    let mut items = Vec::new();
    for i in &p.items {
        let (lease, holder) = match &i.holder {
            ItemHolder::Idle => (None, None),
            ItemHolder::Inferred(k) => (source.lease_of(rule, i.item), Some(k)),
            ItemHolder::Unknown { lease, .. } => (Some(*lease).filter(|&l| l != 0), None),
        };
        if let (true, Some(k), Some(l)) = (accounted, holder, lease)
            && !holders.iter().any(|h| h.tid == k.tid)
            && !p.waiters.contains(&k.tid)
        {
            holders.push(Holder::inferred(k.tid, Inference::PoolLease { item: i.item, lease: l, lease_type: lease_type(l), slot: k.at, frame: k.frame.clone() }));
        }
        items.push(PoolItem { item: Hex(i.item), lease: lease.map(Hex), holder: holder.map(|k| k.tid) });
    }
    holders.sort_by_key(|h| h.tid);
    let state = PoolState { framework: rule.framework.clone(), key: rule.key.clone(), name: rule.name.clone(), item: rule.item.clone(), items_word: rule.items.clone(), item_type: rule.item_type.clone(), max: p.max, count: p.count, idle: p.idle, items };
    let mut evidence = vec![Evidence::PoolFields { object: p.object, type_name: rule.type_name.clone(), max: p.max, count: p.count, idle: p.idle, items: p.items.len() }];
    for &tid in &p.waiters {
        if let Some(f) = w.frames.iter().find(|f| f.tid == tid)
            && let Some(k) = f.keeping(t, p.object).first()
        {
            evidence.push(Evidence::EnteringFrame { thread: w.who(tid), frame: k.frame.clone().unwrap_or_default(), slot: k.slot });
        }
    }
    let id = format!("pool@{:#x}", p.object);
    let owner = if holders.is_empty() { Owner::Unknown { why: UnknownOwner::NotRecorded } } else { Owner::None };
    let mut l = LockFact {
        id: id.clone(),
        kind: LockKind::Pool,
        label: String::new(),
        address: Some(Hex(p.object)),
        name: None,
        owner_tid: None,
        owner,
        release: (!holders.is_empty()).then_some(p.release),
        holders,
        waiter_tids: p.waiters.clone(),
        evidence,
        recursion: None,
        readers: None,
        native: None,
        managed: Some(ManagedLock {
            type_name: Some(rule.type_name.clone()),
            referrers: w.static_holder(p.object).into_iter().collect(),
            pool: Some(state),
            ..ManagedLock::new(LockStorage::Pool, p.object)
        }),
        signature: None,
    };
    w.supersede(facts, &p.waiters, &id, &mut l);
    facts.locks.push(l);
}

/// The pool engine's view of the runtime: objects its threads' frames keep, and their fields.
struct Source<'w, 'a, 't, 'm> {
    w: &'w ObjectWaits<'a, 't, 'm>,
    /// Types by name (`Npgsql.PoolingDataSource`): the MethodTable found in a loaded module.
    classes: RefCell<HashMap<String, Option<u64>>>,
}

impl Source<'_, '_, '_, '_> {
    fn class(&self, name: &str) -> Option<u64> {
        if let Some(c) = self.classes.borrow().get(name) {
            return *c;
        }
        let s = self.w.statics;
        let modules = crate::runtimes::dotnet::types::modules::loaded_modules(s.target()).unwrap_or_default();
        let found = modules.iter().find_map(|&m| s.class(m, name).ok());
        self.classes.borrow_mut().insert(name.to_string(), found);
        found
    }

    fn lease_of(&self, rule: &crate::pools::PoolRule, item: u64) -> Option<u64> {
        self.ref_field(item, &rule.lease).filter(|&l| l != 0)
    }
}

impl PoolSource for Source<'_, '_, '_, '_> {
    fn objects_of(&self, type_name: &str) -> Vec<u64> {
        let Some(mt) = self.class(type_name) else { return Vec::new() };
        let t = self.w.statics.target();
        let mut out: Vec<u64> = self.w.frames.iter().flat_map(|f| f.objects_of(t, mt)).map(|k| k.object).collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    fn int_field(&self, object: u64, field: &str) -> Option<i64> {
        let s = self.w.statics;
        let mt = objects::method_table(s.target(), object).ok()?;
        let (offset, f) = s.instance_path(mt, field).ok()?;
        let size = element::primitive_size(f.element_type)?;
        let bytes = s.target().read_bytes(object.wrapping_add(offset), size, field).ok()?;
        Some(match size {
            1 => i64::from(bytes[0] as i8),
            2 => i64::from(i16::from_le_bytes([bytes[0], bytes[1]])),
            4 => i64::from(i32::from_le_bytes(bytes[..4].try_into().ok()?)),
            _ => i64::from_le_bytes(bytes.get(..8)?.try_into().ok()?),
        })
    }

    fn is_a(&self, object: u64, type_name: &str) -> bool {
        self.class(type_name).is_some_and(|mt| objects::method_table(self.w.statics.target(), object).is_ok_and(|m| m == mt))
    }

    fn ref_field(&self, object: u64, field: &str) -> Option<u64> {
        self.w.statics.object_field(object, field).ok()
    }

    fn array_elements(&self, array: u64, limit: usize) -> Option<Vec<u64>> {
        let t = self.w.statics.target();
        let len = u64::from(t.read_u32(array.wrapping_add(8), "array length").ok()?);
        let n = len.min(limit as u64).min(MAX_ELEMENTS);
        let bytes = t.read_bytes(array.wrapping_add(16), (n * 8) as usize, "array elements").ok()?;
        Some(bytes.chunks_exact(8).map(|w| u64::from_le_bytes(w.try_into().unwrap_or([0; 8]))).collect())
    }

    fn kept_by(&self, object: u64) -> Vec<Keeping> {
        let t = self.w.statics.target();
        self.w.frames.iter().flat_map(|f| f.keeping(t, object)).map(|k| Keeping { tid: k.tid, at: k.slot, frame: k.frame }).collect()
    }
}
