//! The runtime's lock on a class's initialiser. .NET 10 runs a class's static constructor
//! under a `ListLockEntry` (listlock.h): managed `InitHelpers.InitClassSlow` calls into the
//! runtime, which takes the entry's `Crst` — a recursive pthread mutex — for as long as the
//! initialiser runs. A thread that needs the class meanwhile blocks on that mutex with
//! `InitClassSlow` as its innermost managed frame; the mutex's `__owner` is the thread running
//! the initialiser.
//!
//! The entry's layout is per build (`analyzers/dotnet/`: where the Crst, the holding `Thread*`
//! and the class's MethodTable are in it): the native lock is named "initialising Registry"
//! only when the entry reads true — its vtable in libcoreclr, its holding thread the mutex's
//! owner, its MethodTable a type the runtime names.

use super::object_waits::ObjectWaits;
use crate::waits::{Evidence, LockKind, LockStorage, ManagedLock, NativeLockType, WaitFacts};

const INIT_FRAME: &str = "System.Runtime.CompilerServices.InitHelpers.InitClassSlow";

pub(crate) fn merge(w: &ObjectWaits<'_, '_, '_>, facts: &mut WaitFacts) {
    let l = w.layout;
    let (Some(crst), Some(holding), Some(data)) = (l.list_lock_entry_crst, l.list_lock_entry_holding_thread, l.list_lock_entry_data) else { return };
    let t = w.statics.target();
    let runtime = w.c.module;
    for lock in facts.locks.iter_mut() {
        if lock.kind != LockKind::Mutex || !matches!(lock.native.as_ref().map(|n| &n.what), Some(NativeLockType::PthreadMutex(_))) {
            continue;
        }
        let in_init = |tid: &u32| w.frames.iter().find(|f| f.tid == *tid).and_then(|f| f.innermost_managed()) == Some(INIT_FRAME);
        let (Some(mutex), Some(owner)) = (lock.address, lock.owner_tid) else { continue };
        if lock.waiter_tids.is_empty() || !lock.waiter_tids.iter().all(in_init) {
            continue;
        }
        let entry = mutex.0.wrapping_sub(crst);
        let vtable = t.read_ptr(entry, "ListLockEntry vtable").unwrap_or(0);
        let holder = t.read_ptr(entry.wrapping_add(holding), "ListLockEntry holding thread").unwrap_or(0);
        let mt = t.read_ptr(entry.wrapping_add(data), "ListLockEntry data").unwrap_or(0);
        let owner_thread = w.r.threads.iter().find(|th| th.os_tid == owner).map(|th| th.address);
        let class = w.statics.namer().heap_type_name(mt).ok();
        let (true, Some(true), Some(class)) = (runtime.contains(vtable), owner_thread.map(|a| a == holder && a != 0), class) else {
            facts.diagnostics.push(crate::diagnostics::Diagnostic::info(
                crate::runtimes::dotnet::STAGE,
                format!("the mutex at {mutex} that threads in {INIT_FRAME} wait for does not read as a class-init lock entry at {entry:#x} (vtable {vtable:#x}, holding thread {holder:#x}, MethodTable {mt:#x}): left as a mutex"),
            ));
            continue;
        };
        let cctor_name = format!("{class}..cctor");
        let cctor = w.frames.iter().find(|f| f.tid == owner).and_then(|f| f.frames.iter().find_map(|fr| fr.function.filter(|n| *n == cctor_name)));
        lock.kind = LockKind::ClassInit;
        lock.evidence.push(Evidence::ClassInitEntry { entry, holding_thread: holder, method_table: mt, class: class.clone(), cctor: cctor.map(str::to_string) });
        lock.managed = Some(ManagedLock {
            type_name: Some(class),
            owner_os_tid: Some(owner),
            owner_thread: Some(holder),
            owner_name: w.names.names.get(&owner).cloned(),
            ..ManagedLock::new(LockStorage::ClassInit, mt)
        });
    }
}
