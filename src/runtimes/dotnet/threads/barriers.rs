//! Barrier waits: a thread in `Barrier.SignalAndWait` waits in `Monitor.Wait` on the `m_lock`
//! of one of the Barrier's two phase events (`_oddEvent`, `_evenEvent`: ManualResetEventSlims).
//! The runtime records only that Monitor.Wait; this module finds the Barrier (the `this` of
//! SignalAndWait, on the waiting thread's stack) and reads how many participants arrived and
//! how many there are, so the wait is named by its primitive and says who is still missing.
//! A Barrier is taken only when its type is `System.Threading.Barrier` and one of its events'
//! `m_lock` is the very object the thread waits on.

use crate::runtimes::dotnet::contract::facts::Layout;
use crate::runtimes::dotnet::contract::target::Target;
use crate::runtimes::dotnet::gc::referrers::{instance_fields, Field};
use crate::runtimes::dotnet::types::objects::{self, TypeNamer};
use crate::runtimes::dotnet::{ManagedThread, MonitorWait};
use crate::process::Process;
use serde::Serialize;
use std::collections::HashMap;

/// How far above a waiting thread's stack pointer the Barrier is looked for: it is the `this`
/// of `SignalAndWait`, a few frames above `Monitor.Wait`.
const BARRIER_SCAN_BYTES: u64 = 16 * 1024;
const BARRIER_TYPE: &str = "System.Threading.Barrier";
/// `_currentTotalCount`: participants in bits 0–14, arrived in bits 16–30 (CoreLib's masks).
const TOTAL_MASK: u32 = 0x7fff;
const CURRENT_SHIFT: u32 = 16;

/// A thread's Monitor.Wait tied to the Barrier it signalled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct BarrierWait {
    pub(crate) os_tid: u32,
    pub(crate) barrier: u64,
    pub(crate) arrived: u32,
    pub(crate) participants: u32,
    pub(crate) phase: i64,
    /// The event's `m_lock`: the object of the thread's Monitor.Wait.
    pub(crate) lock_object: u64,
}

fn field<'f>(fields: &'f [Field], name: &str) -> Option<&'f Field> {
    fields.iter().find(|f| f.name == name)
}

/// The Barriers the threads in Monitor.Wait signalled, where the link can be proven.
pub(crate) fn barrier_waits(process: &Process, t: &Target, l: &Layout, namer: &TypeNamer, threads: &[ManagedThread], waits: &[MonitorWait]) -> Vec<BarrierWait> {
    let mut fields_of: HashMap<u64, Vec<Field>> = HashMap::new();
    super::waiter_stacks::first_tie(process, threads, waits, BARRIER_SCAN_BYTES, |w, object, _, v| {
        let mt = objects::method_table(t, v).ok()?;
        if !objects::is_plausible_method_table(t, mt) || namer.type_name(mt).ok().as_deref() != Some(BARRIER_TYPE) {
            return None;
        }
        let fields = fields_of.entry(mt).or_insert_with(|| instance_fields(t, namer, l, mt));
        read(t, l, fields, v, object).map(|b| BarrierWait { os_tid: w.os_tid, ..b })
    })
}

/// The Barrier at `v`, when one of its events' `m_lock` is `object`.
fn read(t: &Target, l: &Layout, fields: &[Field], v: u64, object: u64) -> Option<BarrierWait> {
    let ptr = |name: &str| field(fields, name).and_then(|f| t.read_ptr(v.wrapping_add(f.offset), "Barrier field").ok());
    let ties = ["_oddEvent", "_evenEvent"]
        .iter()
        .filter_map(|e| ptr(e))
        .filter(|&e| e != 0)
        .any(|e| t.read_ptr(e.wrapping_add(l.manual_reset_event_slim_lock), "ManualResetEventSlim.m_lock").ok() == Some(object));
    if !ties {
        return None;
    }
    let count = t.read_u32(v.wrapping_add(field(fields, "_currentTotalCount")?.offset), "Barrier._currentTotalCount").ok()?;
    let phase = field(fields, "_currentPhase").and_then(|f| t.read_ptr(v.wrapping_add(f.offset), "Barrier._currentPhase").ok()).unwrap_or(0) as i64;
    Some(BarrierWait { os_tid: 0, barrier: v, arrived: (count >> CURRENT_SHIFT) & TOTAL_MASK, participants: count & TOTAL_MASK, phase, lock_object: object })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_word_splits_as_corelib_packs_it() {
        // parallel_barrier's Barrier (sos/barriers.txt): _currentTotalCount 0x00040006.
        let count = 0x0004_0006u32;
        assert_eq!(((count >> CURRENT_SHIFT) & TOTAL_MASK, count & TOTAL_MASK), (4, 6));
    }
}
