//! Stable keys a fleet can count: each wait-for cycle, each lock threads wait on (a convoy) and
//! the verdict get a `signature` that is the same for the same wedge in every dump — across
//! pods, restarts, ASLR, dump kinds (kernel, gcore, createdump) and .NET deployments — and
//! differs for another wedge. It hashes what the wedge *is*: the locks' identities (a global's
//! symbol, a managed type and the field that refers to it) and the program's frames of the
//! threads that hold and wait; never addresses, tids, counts or anything ASLR moves.
//! docs/report-fields.md says what goes in and what does not.

use super::Cycle;
use crate::crash::machinery::{normalize, Machinery};
use crate::crash::signature::frame_key;
use crate::crash::CrashReport;
use crate::process::Process;
use super::verdict::Verdict;
use crate::threads::{FrameReport, ThreadReport};
use crate::unwind::Trust;
use crate::waits::{LockFact, LockKind, ThreadState};
use std::collections::BTreeSet;

/// A thread contributes at most this many of its program's frames, from the innermost: enough
/// to say which call waits, few enough that how deep the caller was does not matter.
const THREAD_FRAMES: usize = 5;

/// FNV-1a, 64 bits: fixed by its definition, so a signature never changes with knot's build.
fn fnv1a(parts: &[String]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, part) in parts.iter().enumerate() {
        let sep: &[u8] = if i == 0 { b"" } else { b"\n" };
        for &b in sep.iter().chain(part.as_bytes()) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// `cycle:3f0c…`: what the signature is of, then the hash of its parts.
fn seal(what: &str, parts: &[String]) -> String {
    format!("{what}:{:016x}", fnv1a(parts))
}

/// Where `name`'s last `.` outside brackets is (`Type.Method`, not the `.` in `<.ctor>b__1`).
fn last_dot(name: &str) -> Option<usize> {
    let mut depth = 0i32;
    let mut last = None;
    for (i, c) in name.char_indices() {
        match c {
            '<' | '[' | '(' => depth += 1,
            '>' | ']' | ')' => depth -= 1,
            '.' if depth == 0 => last = Some(i),
            _ => {}
        }
    }
    last
}

/// A .NET type without its namespace (`Knot.Samples.MonitorAbba.AuditLock` → `AuditLock`,
/// nested types kept: `Program+<>c`): the same code deployed under another assembly or
/// namespace keeps its signature.
fn managed_type(name: &str) -> &str {
    last_dot(name).map_or(name, |i| &name[i + 1..])
}

/// A .NET method as `Type.Method`, without the namespace (`…PriceGrain..ctor` → `PriceGrain..ctor`).
fn managed_method(name: &str) -> String {
    let name = normalize(name);
    // A constructor's `.ctor`/`.cctor` follows the type's own dot.
    let (owner, method) = match [".ctor", ".cctor"].iter().find_map(|c| name.strip_suffix(c).and_then(|o| o.strip_suffix('.')).map(|o| (o, &name[name.len() - c.len()..]))) {
        Some((owner, ctor)) => (owner, ctor.to_string()),
        None => match last_dot(&name) {
            Some(i) => (&name[..i], name[i + 1..].to_string()),
            None => return name,
        },
    };
    format!("{}.{method}", managed_type(owner))
}

/// A frame's part of a wait signature: a .NET method without its namespace, else as a crash
/// signature keys it.
fn frame_part(process: &Process, f: &FrameReport) -> String {
    match f.function.as_deref().filter(|_| f.managed) {
        Some(name) => managed_method(name),
        None => frame_key(process, f),
    }
}

/// The parts a thread gives: its program's frames, innermost first — the frames past the
/// library modules of `analyzers/crash.toml` it waits in (libc, the .NET runtime, CoreLib),
/// whose names change with the library's version while the program's do not — up to the next
/// library frame (what started the thread or called `Main`) or thread entry. A thread with
/// managed frames gives only those; no thread gives a frame found by scanning its stack. A thread with no frame of the program's own gives its named frames instead.
pub(crate) fn thread_frames(process: &Process, m: &Machinery, frames: &[FrameReport]) -> Vec<String> {
    // A .NET thread by its managed frames alone: they are named from the dump itself, while its
    // native frames' names depend on the files at hand. Never a frame found by stack scanning.
    let managed = frames.iter().any(|f| f.managed);
    let calls = || frames.iter().filter(move |f| f.transition.is_none() && !f.signal_frame && f.trust != Trust::Scan && (f.managed || !managed));
    let library = |f: &&FrameReport| f.module.as_deref().is_some_and(|name| m.is_library(name));
    // The library frames that wait, then the program's, up to the library that called it (the
    // runtime that started the thread, the host that ran `Main`).
    let own: Vec<String> = calls()
        .skip_while(library)
        .take_while(|f| !library(f))
        .map(|f| frame_part(process, f))
        .take_while(|k| !m.is_stop(k))
        .take(THREAD_FRAMES)
        .collect();
    if !own.is_empty() {
        return own;
    }
    calls().filter(|f| f.function.is_some()).map(|f| frame_part(process, f)).take_while(|k| !m.is_stop(k)).take(THREAD_FRAMES).collect()
}

/// A lock's identity: its kind and what names it stably. A global by its data symbol (or, with
/// none, its module and offset in it); a .NET lock by its object's type and the field of the
/// object that refers to it (`LifetimeScope._synchRoot`), without namespaces — an array slot
/// (a static's storage, a collection) names nothing; a lock on the heap or a stack by its kind
/// alone (the frames say whose it is).
pub(crate) fn lock_identity(process: &Process, l: &LockFact) -> String {
    let kind = l.kind.as_str();
    if let Some(m) = &l.managed {
        let ty = m.type_name.as_deref().map_or("?", managed_type);
        // The best-naming field by a key of names only (the report's own order breaks ties by
        // address, which moves).
        let field = m
            .referrers
            .iter()
            // A static holder is left out: the key stays the one it was before statics were named.
            .filter(|r| !r.field.starts_with('[') && !r.is_static)
            .min_by(|a, b| (a.type_name.starts_with("System."), &a.type_name, &a.field).cmp(&(b.type_name.starts_with("System."), &b.type_name, &b.field)));
        return match field {
            Some(r) => format!("{kind} {ty} in {}.{}", managed_type(&r.type_name), r.field),
            None => format!("{kind} {ty}"),
        };
    }
    if l.kind == LockKind::Join {
        return kind.to_string();
    }
    if let Some(name) = &l.name {
        return format!("{kind} {name}");
    }
    match l.address.and_then(|a| process.module_at(a.0).map(|(_, m)| (m, a.0))) {
        Some((module, a)) => format!("{kind} {}+{:#x}", module.name(), a.wrapping_sub(module.start)),
        None => kind.to_string(),
    }
}

/// The rotation of a cycle's edges that sorts first: the same cycle read from any thread.
fn least_rotation(edges: &[String]) -> Vec<String> {
    let turn = |a: usize| edges[a..].iter().chain(&edges[..a]);
    let start = (0..edges.len()).min_by(|&a, &b| turn(a).cmp(turn(b))).unwrap_or(0);
    turn(start).cloned().collect()
}

/// Everything the signatures are made from, read once.
pub(crate) struct SignatureInputs<'a> {
    pub(crate) process: &'a Process,
    pub(crate) locks: &'a [LockFact],
    pub(crate) threads: &'a [ThreadReport],
    machinery: Option<&'static Machinery>,
    /// The worker pool's blocked workers, when the runtime has a pool.
    pool_blocked: Vec<u32>,
}

impl<'a> SignatureInputs<'a> {
    pub(crate) fn new(process: &'a Process, locks: &'a [LockFact], threads: &'a [ThreadReport]) -> SignatureInputs<'a> {
        SignatureInputs { process, locks, threads, machinery: Machinery::builtin().ok(), pool_blocked: Vec::new() }
    }

    /// With the runtime's worker pool (its blocked workers make a starved pool's signature).
    pub(crate) fn with_pool(mut self, pool: Option<&crate::waits::WorkerPool>) -> SignatureInputs<'a> {
        self.pool_blocked = pool.map(|p| p.blocked.clone()).unwrap_or_default();
        self
    }

    fn thread(&self, tid: u32) -> String {
        let frames = self.threads.iter().find(|t| t.tid == tid).map(|t| t.frames.as_slice()).unwrap_or(&[]);
        match self.machinery {
            Some(m) => thread_frames(self.process, m, frames).join(" < "),
            None => frames.iter().filter_map(|f| f.function.as_deref()).map(normalize).take(THREAD_FRAMES).collect::<Vec<_>>().join(" < "),
        }
    }

    fn lock(&self, id: &str) -> String {
        self.locks.iter().find(|l| l.id == id).map_or_else(|| "?".to_string(), |l| lock_identity(self.process, l))
    }

    /// A cycle's parts: each edge — a lock and the frames of the thread that waits for it —
    /// from the edge that sorts first, so where the cycle starts (the lowest tid) does not count.
    pub(crate) fn cycle_parts(&self, c: &Cycle) -> Vec<String> {
        if let Some(p) = &c.pool {
            return self.pool_parts("cycle", &p.workers);
        }
        let edges: Vec<String> = c.tids.iter().zip(&c.locks).map(|(&t, id)| format!("{} <- {}", self.lock(id), self.thread(t))).collect();
        let mut parts = vec!["cycle".to_string()];
        parts.extend(least_rotation(&edges));
        parts
    }

    pub(crate) fn cycle(&self, c: &Cycle) -> String {
        seal("cycle", &self.cycle_parts(c))
    }

    /// The thread pool's shape (sync over async), from what its blocked workers wait for: each
    /// distinct blocking call site with the async method it awaits, and each other lock they
    /// queue behind, with its owner's site — sorted, so neither which worker the chain starts at
    /// nor how many workers wait counts. `kind` tells a deadlock through the pool from starvation.
    pub(crate) fn pool_parts(&self, kind: &str, workers: &[u32]) -> Vec<String> {
        let lock_of = |t: u32| self.threads.iter().find(|x| x.tid == t).and_then(|x| x.blocked_on.as_deref()).and_then(|id| self.locks.iter().find(|l| l.id == id));
        let site = |t: u32, l: &LockFact| -> String {
            let frames = self.threads.iter().find(|x| x.tid == t).map(|x| x.frames.as_slice()).unwrap_or(&[]);
            let b = super::blocking_site::blocking_site(frames);
            let call = b.as_ref().map(|b| format!("{:?} at {} via {}", b.api, b.call_site.as_deref().map(normalize).unwrap_or_default(), b.library.as_deref().map(normalize).unwrap_or_default()));
            let awaited = l.managed.as_ref().and_then(|m| m.task.as_ref()).and_then(|t| t.async_method.clone()).unwrap_or_default();
            format!("{} on {awaited}", call.unwrap_or_default())
        };
        let mut shape = BTreeSet::new();
        for &w in workers {
            let Some(l) = lock_of(w) else { continue };
            match (l.kind, l.owner.tid()) {
                (LockKind::Task, _) => shape.insert(format!("blocks {}", site(w, l))),
                (_, Some(owner)) => {
                    let held = lock_of(owner).filter(|ol| ol.kind == LockKind::Task).map(|ol| site(owner, ol)).unwrap_or_default();
                    shape.insert(format!("behind {} held by one that blocks {held}", lock_identity(self.process, l)))
                }
                (_, None) => shape.insert(format!("waits {} in {}", site(w, l), lock_identity(self.process, l))),
            };
        }
        let mut parts = vec![kind.to_string(), "thread_pool".to_string()];
        parts.extend(shape);
        parts
    }

    /// A convoy's parts: the lock, its owner's frames, and each distinct waiting stack (sorted:
    /// how many threads wait, and in which order they came, do not count).
    pub(crate) fn convoy_parts(&self, l: &LockFact) -> Vec<String> {
        let mut parts = vec!["convoy".to_string(), lock_identity(self.process, l)];
        if let Some(owner) = l.owner.tid() {
            parts.push(format!("owner {}", self.thread(owner)));
        }
        let waiters: BTreeSet<String> = l.waiter_tids.iter().map(|&t| format!("waiter {}", self.thread(t))).collect();
        parts.extend(waiters);
        parts
    }

    /// `convoy:…` for a lock some thread waits on; none for a lock nobody waits on.
    pub(crate) fn convoy(&self, l: &LockFact) -> Option<String> {
        (!l.waiter_tids.is_empty()).then(|| seal("convoy", &self.convoy_parts(l)))
    }

    /// The verdict's parts: its name and what decided it — every cycle (deadlock); the convoy
    /// most waited for (contention: one wedge's head, not whoever else contended at that
    /// instant); the convoys on tasks (thread pool starvation); the crash's own signature
    /// (crash, GC stall); the distinct stacks in I/O (blocked on I/O) or waiting (idle); nothing
    /// more for nothing blocked. None without a verdict.
    pub(crate) fn verdict_parts(&self, v: Verdict, cycles: &[Cycle], crash: Option<&CrashReport>) -> Option<Vec<String>> {
        let name = match v {
            Verdict::Deadlock => "deadlock",
            Verdict::Crash => "crash",
            Verdict::Abandoned => "abandoned",
            Verdict::GcStall => "gc_stall",
            Verdict::Contention => "contention",
            Verdict::ThreadPoolStarved => "thread_pool_starved",
            Verdict::BlockedOnIo => "blocked_on_io",
            Verdict::Idle => "idle",
            Verdict::NothingBlocked => "nothing_blocked",
            Verdict::NotAnalyzed => return None,
        };
        let mut parts = vec![name.to_string()];
        match v {
            Verdict::Deadlock => parts.extend(cycles.iter().map(|c| self.cycle(c)).collect::<BTreeSet<_>>()),
            Verdict::Crash | Verdict::GcStall => parts.extend(crash.map(|c| c.signature.clone())),
            // The convoys behind the locks nobody can release.
            Verdict::Abandoned => parts.extend(self.locks.iter().filter(|l| l.released_by_nobody() && !l.waiter_tids.is_empty()).filter_map(|l| self.convoy(l)).collect::<BTreeSet<_>>()),
            Verdict::Contention => {
                let head = self
                    .locks
                    .iter()
                    .filter(|l| l.kind.is_exclusive() && !l.waiter_tids.is_empty())
                    .filter_map(|l| self.convoy(l).map(|s| (std::cmp::Reverse(l.waiter_tids.len()), s)))
                    .min();
                parts.extend(head.map(|(_, s)| s));
            }
            Verdict::ThreadPoolStarved => {
                let parts_of_pool = self.pool_parts("starved", &self.pool_blocked);
                parts.extend(parts_of_pool);
            }
            Verdict::BlockedOnIo => {
                parts.extend(self.threads.iter().filter(|t| matches!(t.state, ThreadState::Io { .. })).map(|t| self.thread(t.tid)).collect::<BTreeSet<_>>())
            }
            Verdict::Idle => parts.extend(self.threads.iter().filter(|t| t.state.is_blocked()).map(|t| self.thread(t.tid)).collect::<BTreeSet<_>>()),
            Verdict::NothingBlocked | Verdict::NotAnalyzed => {}
        }
        Some(parts)
    }

    /// `deadlock:…`, `contention:…`, …: the verdict's signature, named by the verdict.
    pub(crate) fn verdict(&self, v: Verdict, cycles: &[Cycle], crash: Option<&CrashReport>) -> Option<String> {
        let parts = self.verdict_parts(v, cycles, crash)?;
        Some(seal(&parts[0], &parts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_fnv1a_and_parts_are_separated() {
        // FNV-1a's published test vectors: "" and "a".
        assert_eq!(fnv1a(&[String::new()]), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(&["a".to_string()]), 0xaf63_dc4c_8601_ec8c);
        // ["ab"] and ["a", "b"] are different inputs.
        assert_ne!(fnv1a(&["ab".to_string()]), fnv1a(&["a".to_string(), "b".to_string()]));
        assert_eq!(seal("cycle", &["x".to_string()]).len(), "cycle:".len() + 16);
    }

    #[test]
    fn dotnet_names_lose_their_namespace_only() {
        assert_eq!(managed_method("Knot.Samples.MonitorAbba.Program.WaitForAuditLock"), "Program.WaitForAuditLock");
        assert_eq!(managed_method("Knot.Samples.OrleansSilo.PriceGrain..ctor"), "PriceGrain..ctor");
        assert_eq!(
            managed_method("Orleans.Runtime.ActivationDataActivatorProvider+ActivationDataActivator+<>c__DisplayClass6_0.<.ctor>b__1"),
            "ActivationDataActivatorProvider+ActivationDataActivator+<>c__DisplayClass6_0.<.ctor>b__1"
        );
        assert_eq!(managed_method("Orleans.Runtime.ActivationData+<RunMessageLoop>d__149.MoveNext"), "ActivationData+<RunMessageLoop>d__149.MoveNext");
        assert_eq!(managed_method("Main"), "Main");
        assert_eq!(managed_type("Knot.Samples.MonitorAbba.AuditLock"), "AuditLock");
        assert_eq!(managed_type("System.Collections.Generic.List<System.Object>"), "List<System.Object>");
    }

    #[test]
    fn a_cycle_read_from_any_thread_is_one_rotation() {
        let e = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let a = least_rotation(&e(&["mutex lock_b <- worker_ab", "mutex lock_a <- worker_ba"]));
        let b = least_rotation(&e(&["mutex lock_a <- worker_ba", "mutex lock_b <- worker_ab"]));
        assert_eq!(a, b);
        assert_eq!(a[0], "mutex lock_a <- worker_ba");
        // The opposite direction is another cycle.
        assert_ne!(least_rotation(&e(&["x", "y", "z"])), least_rotation(&e(&["x", "z", "y"])));
        assert!(least_rotation(&[]).is_empty());
    }
}
