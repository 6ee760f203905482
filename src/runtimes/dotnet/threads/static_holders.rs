//! A lock object held by a static field, named by it (`Ledger._sync`). .NET 10 keeps a class's
//! reference statics in the slots of a `System.Object[]` behind a strong handle, so the heap
//! walk finds that array as the lock object's referrer (`Object[][47]`), which names nothing;
//! the slot is the static field [`crate::runtimes::dotnet::gc::static_names`] maps it to. Only when exactly one
//! static holds the object: two statics naming one lock would each be half the story.

use crate::runtimes::dotnet::contract::context::Context;
use crate::runtimes::dotnet::gc::report::ReferrerReport;
use crate::runtimes::dotnet::gc::static_names::{static_slots_of, StaticName};
use crate::runtimes::dotnet::gc::GcReading;
use crate::waits::{LockFact, LockKind};
use std::cell::OnceCell;
use std::collections::HashMap;

/// The array type whose elements are the statics' slots.
const STATICS_ARRAY: &str = "System.Object[]";

/// The statics' slots (every loaded module's: [`static_slots_of`]), read at most once for both
/// namings below, and only when one of them has an object to name: reading them walks every
/// module's classes.
pub(crate) struct StaticSlots<'a, 'p> {
    c: &'a Context<'p>,
    gc: &'a GcReading,
    slots: OnceCell<Option<HashMap<u64, StaticName>>>,
}

impl<'a, 'p> StaticSlots<'a, 'p> {
    pub(crate) fn new(c: &'a Context<'p>, gc: &'a GcReading) -> Self {
        StaticSlots { c, gc, slots: OnceCell::new() }
    }

    fn get(&self) -> Option<&HashMap<u64, StaticName>> {
        self.slots
            .get_or_init(|| {
                let build = crate::runtimes::dotnet::gc::build_facts(self.c).ok()?;
                let t = self.c.target();
                let namer = crate::runtimes::dotnet::types::objects::TypeNamer::of(&t, self.c);
                let method_tables: Vec<u64> = self.gc.stats.types.iter().map(|s| s.method_table).collect();
                Some(static_slots_of(&t, &namer, &build.layout, &method_tables))
            })
            .as_ref()
    }
}

/// The referrer that names a static field: the class, the field and its slot.
fn static_referrer(slot: u64, s: &StaticName) -> ReferrerReport {
    ReferrerReport { type_name: s.class.clone(), field: s.field.clone(), address: crate::hex::Hex(slot), identity: None, is_static: true }
}

/// Names the objects of `locks` held by exactly one static field by that field: its referrer
/// `Object[][i]` becomes the static's class and field (`is_static`), ordered among the others
/// as the heap's referrers are. The statics are looked up only when some lock object is an
/// element of an `Object[]`.
pub(crate) fn name(statics: &StaticSlots<'_, '_>, locks: &mut [LockFact]) {
    let slot_of = |r: &ReferrerReport| -> Option<u64> {
        let i: u64 = r.field.strip_prefix('[')?.strip_suffix(']')?.parse().ok()?;
        (r.type_name == STATICS_ARRAY && !r.is_static).then(|| r.address.0.wrapping_add(16).wrapping_add(i.wrapping_mul(8)))
    };
    let wanted = locks.iter().filter(|l| l.kind.is_on_managed_object()).filter_map(|l| l.managed.as_ref()).any(|m| m.referrers.iter().any(|r| slot_of(r).is_some()));
    if !wanted {
        return;
    }
    let Some(statics) = statics.get() else { return };
    for l in locks.iter_mut().filter(|l| l.kind.is_on_managed_object()) {
        let Some(m) = l.managed.as_mut() else { continue };
        let held: Vec<(usize, u64)> = m.referrers.iter().enumerate().filter_map(|(i, r)| slot_of(r).filter(|s| statics.contains_key(s)).map(|s| (i, s))).collect();
        let [(i, slot)] = held.as_slice() else { continue };
        let Some(s) = statics.get(slot) else { continue };
        m.referrers[*i] = static_referrer(*slot, s);
        // As the heap's referrers are ordered: the application's own before the framework's,
        // fields before array elements (crate::runtimes::dotnet::gc::referrers::best), then by address.
        m.referrers.sort_by_key(|r| (r.type_name.starts_with("System."), r.field.starts_with('['), r.address.0));
    }
}

/// Names a SemaphoreSlim or a Barrier — objects the locks' referrer walk did not look for (they
/// are found after it) — by the one static field that holds it (`Program.Gate`): the statics'
/// slots whose value is the object. An object no static holds, or two do, keeps no name.
pub(crate) fn name_statics_of_waits(statics: &StaticSlots<'_, '_>, locks: &mut [LockFact]) {
    let object_of = |l: &LockFact| -> Option<u64> {
        let m = l.managed.as_ref()?;
        match l.kind {
            LockKind::SemaphoreSlim => Some(m.object.0),
            LockKind::MonitorWait => m.barrier.as_ref().map(|b| b.address.0),
            _ => None,
        }
    };
    if !locks.iter().any(|l| object_of(l).is_some()) {
        return;
    }
    let Some(all) = statics.get() else { return };
    let t = statics.c.target();
    let mut slots: Vec<(&u64, &StaticName)> = all.iter().collect();
    slots.sort_by_key(|(slot, _)| **slot);
    for l in locks.iter_mut() {
        let Some(object) = object_of(l) else { continue };
        let held: Vec<_> = slots.iter().filter(|(slot, _)| t.read_ptr(**slot, "a static's slot").ok() == Some(object)).collect();
        let [(slot, s)] = held.as_slice() else { continue };
        let named = static_referrer(**slot, s);
        let Some(m) = l.managed.as_mut() else { continue };
        match m.barrier.as_mut() {
            Some(b) => b.held_by = Some(named),
            None => m.referrers.insert(0, named),
        }
    }
}
