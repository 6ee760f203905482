//! The words on the stacks of threads in `Monitor.Wait`: where the object a wait is for (a
//! Barrier, a Task) is found when the runtime records only the Monitor. Each waiting thread's
//! stack is scanned up from its stack pointer, its object-like words offered in turn, and the
//! first that ties to the waited-on object is kept.

use crate::runtimes::dotnet::{BlockingKind, ManagedThread, MonitorWait};
use crate::process::{Process, StackWords};

/// For each thread in `Monitor.Wait` on an object, the first word within `scan_bytes` above its
/// stack pointer that `tie(wait, object, slot, word)` turns into a link. Only words that could
/// be an object's address are offered: 8-aligned, not small, not into the stack itself.
pub(crate) fn first_tie<T>(process: &Process, threads: &[ManagedThread], waits: &[MonitorWait], scan_bytes: u64, mut tie: impl FnMut(&MonitorWait, u64, u64, u64) -> Option<T>) -> Vec<T> {
    let mut out = Vec::new();
    for w in waits.iter().filter(|w| w.kind == BlockingKind::MonitorWait) {
        let Some(object) = w.object else { continue };
        let Some(th) = threads.iter().find(|th| th.os_tid == w.os_tid && th.os_tid != 0) else { continue };
        let Some(ct) = th.dump_thread_index.and_then(|i| process.core.threads.get(i)) else { continue };
        let Some(words) = StackWords::new(process, ct.registers.sp() & !7, scan_bytes) else { continue };
        let stack = words.stack().clone();
        for (slot, v) in words {
            if v < 0x10000 || v & 7 != 0 || stack.contains(&v) {
                continue;
            }
            if let Some(found) = tie(w, object, slot, v) {
                out.push(found);
                break;
            }
        }
    }
    out
}
