//! The threads' ids as the process numbers them. A lock records its owner, and a joiner the
//! thread it joins, by the tid the process itself sees; a process in a PID namespace of its own
//! (a container's) sees other numbers than a dump taken from the host records (gcore's
//! `NT_PRSTATUS`). Each thread's own `struct pthread` holds its tid in the process's numbering:
//! read once here, a recorded tid is matched against those first.

use super::catalog::Catalog;
use crate::arch::Registers;
use crate::process::{Memory, Process};

/// Linux's `PID_MAX_LIMIT`: no tid is above it.
const PID_MAX_LIMIT: u32 = 1 << 22;
/// Threads whose own tid is read before the rest are taken as the dump numbers them.
const SAMPLE: usize = 3;

/// The dump's threads, each with its tid as the process numbers it when that was read.
#[derive(Debug, Clone, Default)]
pub(crate) struct ThreadIds {
    /// (the dump's tid, the thread's own), in the dump's order.
    threads: Vec<(u32, Option<u32>)>,
    /// Whether the process numbers its threads otherwise than the dump does: every thread's
    /// own tid read, distinct, and some unlike the dump's.
    renumbered: bool,
    /// (the dump's tid, the address of its `struct pthread`: its `pthread_self()`), where the
    /// thread's registers give it (its thread pointer; no memory read).
    pthreads: Vec<(u32, u64)>,
}

/// Who a recorded tid is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resolved {
    /// A thread of the dump (its tid in the dump).
    Thread(u32),
    /// No thread of the dump: exited, or of another process.
    Outside,
}

impl ThreadIds {
    /// Tids taken as they are (no `struct pthread` read).
    #[cfg(test)]
    pub(crate) fn plain(tids: &[u32]) -> ThreadIds {
        ThreadIds { threads: tids.iter().map(|&t| (t, None)).collect(), renumbered: false, pthreads: Vec::new() }
    }

    /// Each thread's own tid from its `struct pthread` (glibc's layout in `analyzers/glibc.toml`).
    pub(crate) fn read<'r>(process: &Process, catalog: &Catalog, threads: impl Iterator<Item = (u32, &'r Registers, Option<u64>)>) -> ThreadIds {
        let threads: Vec<(u32, &Registers, Option<u64>)> = threads.collect();
        let dump: Vec<u32> = threads.iter().map(|t| t.0).collect();
        let mut ids = ThreadIds::sampled(&dump, |i| {
            let &(_, regs, tls) = threads.get(i)?;
            pthread_of(process, catalog, regs, tls).and_then(|(pthread, layout)| own_tid(process, pthread, layout))
        });
        ids.pthreads = threads.iter().filter_map(|&(tid, regs, tls)| Some((tid, thread_pointer(catalog, regs, tls)?))).collect();
        ids
    }

    /// The threads' own tids, `own(i)` giving the dump's `i`th thread's. A PID namespace gives
    /// every thread of a process another number, so when the first [`SAMPLE`] threads' agree with
    /// the dump's the rest are not read: each read touches a page near the top of that thread's
    /// stack, and the kernel maps the dump's pages around it (2,000 threads: 128 MiB of RSS).
    fn sampled(dump: &[u32], mut own: impl FnMut(usize) -> Option<u32>) -> ThreadIds {
        let mut threads: Vec<(u32, Option<u32>)> = Vec::with_capacity(dump.len());
        for (i, &tid) in dump.iter().enumerate() {
            if i == SAMPLE && threads.iter().all(|&(d, o)| o == Some(d)) {
                threads.extend(dump[i..].iter().map(|&d| (d, None)));
                return ThreadIds { threads, renumbered: false, pthreads: Vec::new() };
            }
            threads.push((tid, own(i)));
        }
        let all_read = !threads.is_empty() && threads.iter().all(|(_, own)| own.is_some());
        let mut own: Vec<u32> = threads.iter().filter_map(|(_, o)| *o).collect();
        own.sort_unstable();
        own.dedup();
        let renumbered = all_read && own.len() == threads.len() && threads.iter().any(|(dump, o)| *o != Some(*dump));
        ThreadIds { threads, renumbered, pthreads: Vec::new() }
    }

    /// The dump's thread whose `pthread_self()` is `ident` (what CPython records as a thread's
    /// ident): the one whose thread pointer it is.
    pub(crate) fn by_pthread(&self, ident: u64) -> Option<u32> {
        self.pthreads.iter().find(|&&(_, p)| p == ident && ident != 0).map(|&(tid, _)| tid)
    }

    /// The tid the process itself gives the dump's thread `dump_tid`.
    pub(crate) fn own(&self, dump_tid: u32) -> u32 {
        if !self.renumbered {
            return dump_tid;
        }
        self.threads.iter().find(|(d, _)| *d == dump_tid).and_then(|(_, o)| *o).unwrap_or(dump_tid)
    }

    /// Which thread of the dump a tid the process recorded (a lock's owner, a joined thread) is.
    pub(crate) fn resolve(&self, recorded: u32) -> Resolved {
        if self.renumbered {
            return match self.threads.iter().find(|(_, own)| *own == Some(recorded)) {
                Some((dump, _)) => Resolved::Thread(*dump),
                None => Resolved::Outside,
            };
        }
        if self.threads.iter().any(|(dump, _)| *dump == recorded) { Resolved::Thread(recorded) } else { Resolved::Outside }
    }

    /// The threads whose own tid differs from the dump's, when the process numbers them
    /// otherwise (a PID namespace): (the dump's tid, the process's).
    pub(crate) fn renumbering(&self) -> Vec<(u32, u32)> {
        if !self.renumbered {
            return Vec::new();
        }
        self.threads.iter().filter_map(|&(dump, own)| own.filter(|&o| o != dump).map(|o| (dump, o))).collect()
    }
}

/// The thread's `struct pthread` (its `pthread_self()`), found from its thread pointer, with its
/// layout; `None` when the layout is unknown, the memory unread, or the struct does not check out.
fn pthread_of<'c>(process: &Process, catalog: &'c Catalog, regs: &Registers, tls: Option<u64>) -> Option<(u64, &'c super::catalog::Layout)> {
    match regs {
        Registers::X86_64(r) => {
            let layout = catalog.layout("struct_pthread_x86_64")?;
            // The TCB's `self` points to the struct itself: the thread pointer is glibc's.
            let self_ptr = process.read_u64(r.fs_base.checked_add(layout.offset("self")?)?).ok()?;
            (self_ptr == r.fs_base && r.fs_base != 0).then_some(r.fs_base)?;
            Some((r.fs_base, layout))
        }
        Registers::Aarch64(_) => {
            let layout = catalog.layout("struct_pthread_aarch64")?;
            Some((tls?.checked_sub(layout.size())?, layout))
        }
    }
}

/// Where the thread's `struct pthread` is by its registers alone (x86_64: the thread pointer,
/// which is `pthread_self()`; aarch64: below the TLS block), unchecked: an `ident` equal to it
/// is that thread's.
fn thread_pointer(catalog: &Catalog, regs: &Registers, tls: Option<u64>) -> Option<u64> {
    match regs {
        Registers::X86_64(r) => (r.fs_base != 0).then_some(r.fs_base),
        Registers::Aarch64(_) => tls?.checked_sub(catalog.layout("struct_pthread_aarch64")?.size()),
    }
}

/// The tid in a thread's `struct pthread`.
fn own_tid(process: &Process, pthread: u64, layout: &super::catalog::Layout) -> Option<u32> {
    let tid = process.read_u32(pthread.checked_add(layout.offset("tid")?)?).ok()?;
    (tid > 0 && tid < PID_MAX_LIMIT).then_some(tid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(threads: &[(u32, Option<u32>)]) -> ThreadIds {
        let own: Vec<u32> = threads.iter().filter_map(|t| t.1).collect();
        let renumbered = own.len() == threads.len() && threads.iter().any(|(d, o)| *o != Some(*d));
        ThreadIds { threads: threads.to_vec(), renumbered, pthreads: Vec::new() }
    }

    #[test]
    fn a_process_numbered_as_the_dump_is_read_from_its_first_threads_only() {
        let dump: Vec<u32> = (100..2100).collect();
        let mut reads = 0;
        let t = ThreadIds::sampled(&dump, |i| {
            reads += 1;
            Some(dump[i])
        });
        assert_eq!(reads, SAMPLE);
        assert_eq!(t.resolve(2099), Resolved::Thread(2099));
        assert_eq!(t.resolve(5), Resolved::Outside);
        assert_eq!(t.own(1500), 1500);
        assert!(t.renumbering().is_empty());
    }

    #[test]
    fn a_renumbered_process_has_every_thread_read() {
        // A container's process dumped from the host: the first thread already disagrees.
        let dump: Vec<u32> = (18919..18929).collect();
        let mut reads = 0;
        let t = ThreadIds::sampled(&dump, |i| {
            reads += 1;
            Some(i as u32 + 2)
        });
        assert_eq!(reads, dump.len());
        assert_eq!(t.resolve(11), Resolved::Thread(18928));
        assert_eq!(t.own(18919), 2);
        // A first thread whose struct is unread does not end the reading early either.
        let mut reads = 0;
        let t = ThreadIds::sampled(&dump, |i| {
            reads += 1;
            (i > 0).then_some(i as u32 + 2)
        });
        assert_eq!(reads, dump.len());
        assert!(t.renumbering().is_empty(), "one thread unread: the dump's numbers stay in force");
    }

    #[test]
    fn a_process_in_its_own_pid_namespace_is_read_in_its_numbering() {
        // gcore from the host: 18920.. in the dump, 2.. inside.
        let t = ids(&[(18919, Some(2)), (18920, Some(3)), (18921, Some(4))]);
        assert_eq!(t.resolve(3), Resolved::Thread(18920));
        assert_eq!(t.resolve(18920), Resolved::Outside, "a host tid is not what the process records");
        assert_eq!(t.resolve(7), Resolved::Outside);
        assert_eq!(t.renumbering(), vec![(18919, 2), (18920, 3), (18921, 4)]);
    }

    #[test]
    fn a_plain_process_resolves_to_itself() {
        let t = ids(&[(100, Some(100)), (101, Some(101))]);
        assert_eq!(t.resolve(101), Resolved::Thread(101));
        assert_eq!(t.resolve(102), Resolved::Outside);
        assert!(t.renumbering().is_empty());
        // A thread whose struct was unread leaves the dump's numbers in force.
        let t = ids(&[(100, Some(3)), (101, None)]);
        assert_eq!(t.resolve(100), Resolved::Thread(100));
        assert_eq!(ThreadIds::plain(&[5, 6]).resolve(6), Resolved::Thread(6));
    }
}
