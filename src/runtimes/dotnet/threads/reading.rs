//! The reading of a .NET process's threads, monitors and waits: what the reader made of the
//! process ([`DotnetReading`]), read once through the runtime's [`Context`] — the `ThreadStore`'s
//! threads, the sync block table's held monitors, thin locks in the headers of the objects knot
//! can reach, `System.Threading.Lock`s threads are blocked on, and which thread waits to enter (or
//! is in Monitor.Wait on) which monitor.

use crate::diagnostics::Diagnostic;
use crate::runtimes::dotnet::{Source, STAGE, BlockingKind, Context, DescriptorSource, DotnetError, ManagedThread, NoContext, RuntimeVersion, ThreadCounts};
use crate::hex::Hex;
#[cfg(test)]
use crate::process::Locator;
use crate::process::{Process, StackWords};
use crate::runtimes::dotnet::contract::facts::{BuildFacts, Layout};
use crate::runtimes::dotnet::types::objects::{Header, TypeNamer};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};
use crate::runtimes::dotnet::contract::target::Target;

/// How far above a thread's stack pointer the thin-lock scan looks.
const STACK_SCAN_BYTES: u64 = 512 * 1024;
/// The contract versions this reader implements.
const THREAD_CONTRACT: u64 = 1;

/// What the reader made of the process.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub(crate) enum DotnetReading {
    /// No `libcoreclr.so` in the process.
    NotDotnet,
    /// A CoreCLR knot cannot read: no descriptor (before .NET 9), or a layout it does not know.
    Unsupported { version: String, why: String },
    Runtime(Box<RuntimeReading>),
}

impl DotnetReading {
    /// One line for a report.
    pub(crate) fn summary(&self) -> String {
        match self {
            DotnetReading::NotDotnet => "not a .NET process".into(),
            DotnetReading::Unsupported { version, why } => format!("runtime reader unsupported: {version}: {why}"),
            DotnetReading::Runtime(r) => format!(
                ".NET {}: {} managed threads, {} monitors, {} waits (descriptor from {})",
                r.version,
                r.threads.len(),
                r.monitors.len(),
                r.waits.len(),
                r.descriptor_source.summary()
            ),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct RuntimeReading {
    pub version: RuntimeVersion,
    pub descriptor_source: DescriptorSource,
    /// The contracts the runtime says it satisfies, with their versions.
    pub(crate) contracts: BTreeMap<String, u64>,
    /// The ThreadStore's counters (clrthreads' header lines).
    pub counts: Option<ThreadCounts>,
    /// In ThreadStore list order.
    pub threads: Vec<ManagedThread>,
    /// Held or contended monitors, sync blocks first (in table order).
    pub monitors: Vec<ManagedLock>,
    pub waits: Vec<MonitorWait>,
    /// Monitor.Waits that are waits on a task (`Task.Wait`, `Result`), with the task.
    pub(crate) task_waits: Vec<crate::runtimes::dotnet::tasks::TaskWait>,
    /// Monitor.Waits that are waits in `Barrier.SignalAndWait`, with the Barrier.
    pub(crate) barrier_waits: Vec<super::barriers::BarrierWait>,
    /// The sync block table's size, when it was read.
    pub sync_table: Option<SyncTableSummary>,
    /// Whether monitors could be read for this build, and from which facts.
    pub monitor_support: Support,
    pub diagnostics: Vec<Diagnostic>,
}

impl RuntimeReading {
    #[cfg(test)]
    pub(crate) fn thread_by_os_tid(&self, tid: u32) -> Option<&ManagedThread> {
        self.threads.iter().find(|t| t.os_tid == tid && tid != 0)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub(crate) enum Support {
    /// Read with the per-build facts from `file`.
    Supported { file: String, layout: String },
    /// Not read, and why ("unsupported runtime build `<version> <build-id>`").
    Unsupported { why: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct SyncTableSummary {
    pub(crate) address: u64,
    /// SOS's "Total": entries ever used.
    pub total: u32,
    /// SOS's "Free".
    pub free: u32,
}

/// A lock on one object, as read, is the report's own representation (`LockFact::managed`).
pub(crate) use crate::waits::{LockStorage, ManagedLock};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum WaitSource {
    /// The thread's `ThreadBlockingInfo` record.
    BlockingRecord,
    /// The sync block's Monitor.Wait list (`WaitEventLink`).
    WaitList,
}

/// One thread blocked on one lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct MonitorWait {
    pub os_tid: u32,
    pub(crate) managed_id: u32,
    pub(crate) thread: u64,
    pub kind: BlockingKind,
    pub object: Option<u64>,
    pub(crate) sync_block: Option<u64>,
    /// The lock's owner at the time of the dump.
    pub owner_os_tid: Option<u32>,
    /// -1 for infinite, when the record says.
    pub(crate) timeout_ms: Option<i32>,
    pub source: WaitSource,
}

#[cfg(test)]
/// Reads the .NET runtime in `process`, finding managed images' files where the dump names them.
pub(crate) fn read(process: &Process) -> DotnetReading {
    read_with(process, &Locator::default())
}

#[cfg(test)]
/// As [`read`], with `locator` naming where else managed images (for type names) may be on disk.
pub(crate) fn read_with(process: &Process, locator: &Locator) -> DotnetReading {
    match crate::runtimes::dotnet::contract::facts::builtin() {
        Ok(all) => read_with_facts(process, locator, Ok(all)),
        Err(e) => read_with_facts(process, locator, Err(e.clone())),
    }
}

#[cfg(test)]
/// As [`read_with`], with the per-build facts given (the built-in ones, or others for tests).
pub(crate) fn read_with_facts(process: &Process, locator: &Locator, all_facts: Result<&[BuildFacts], crate::runtimes::dotnet::contract::facts::FactsError>) -> DotnetReading {
    let runtime = match Context::open(process, locator) {
        Ok(c) => c,
        Err(e) => return unreadable(&e),
    };
    let mut reading = read_runtime(&runtime, all_facts);
    if let DotnetReading::Runtime(r) = &mut reading {
        r.diagnostics.extend(crate::runtimes::dotnet::types::metadata::image_notes(&runtime.image));
    }
    reading
}

/// The reading of a runtime knot could not locate.
pub(crate) fn unreadable(e: &NoContext) -> DotnetReading {
    match e.why() {
        None => DotnetReading::NotDotnet,
        Some((version, why)) => DotnetReading::Unsupported { version, why },
    }
}

/// Threads, monitors and waits of a located runtime. What happened with managed images'
/// files is the context's to report (once), not part of this reading's diagnostics.
pub(crate) fn read_runtime(runtime: &Context<'_>, all_facts: Result<&[BuildFacts], crate::runtimes::dotnet::contract::facts::FactsError>) -> DotnetReading {
    let process = runtime.process;
    let module = runtime.module;
    let version = runtime.version.clone();
    let contracts = runtime.descriptor.contracts.clone();
    match contracts.get("Thread") {
        Some(&THREAD_CONTRACT) => {}
        other => {
            return DotnetReading::Unsupported {
                version: version.product.clone(),
                why: format!("runtime reader unsupported: {version}: Thread contract version {other:?} (knot reads version {THREAD_CONTRACT})"),
            }
        }
    }
    let source = runtime.source;
    let t = runtime.target();
    let mut reader = Reader { process, t: &t, diagnostics: Vec::new(), cut: 0 };
    if source.pointer_data == Source::File {
        reader.diagnostics.push(Diagnostic::info(
            STAGE,
            format!(
                "the contract descriptor's pointer data was not in the dump; read from {} (relocated by knot)",
                module.file.as_ref().map_or(module.path.clone(), |f| f.path().display().to_string())
            ),
        ));
    }
    if source.header == Source::Catalog || source.pointer_data == Source::Catalog {
        reader.diagnostics.push(Diagnostic::info(
            STAGE,
            format!(
                "{} was not at hand: the contract descriptor came from knot's runtime catalogue ({}, build-id {})",
                module.name(),
                crate::runtimes::dotnet::contract::catalog::FILE,
                version.build_id.as_deref().unwrap_or("?")
            ),
        ));
    }

    let build = match &all_facts {
        Ok(all) => crate::runtimes::dotnet::contract::facts::lookup(all, version.build_id.as_deref(), &version.product, version.file_version.as_deref()),
        Err(_) => None,
    };
    let monitor_support = match (build, &all_facts) {
        (Some(b), _) => Support::Supported { file: b.file.to_string(), layout: b.build.layout.clone() },
        (None, Err(e)) => Support::Unsupported { why: e.to_string() },
        (None, Ok(_)) => Support::Unsupported { why: format!("unsupported runtime build {} {}", version.product, version.build_id.as_deref().unwrap_or("(no build-id)")) },
    };

    let (counts, threads) = reader.threads();
    let namer = TypeNamer::of(&t, runtime);
    let (monitors, waits, sync_table) = match build {
        Some(b) => {
            let cache = match crate::runtimes::dotnet::threads::syncblock::read_cache(&t, module, &b.layout) {
                Ok(c) => Some(c),
                Err(e) => {
                    reader.warn("sync table's used length not read (entries are read up to the first empty one, and may include stale ones)", &e);
                    None
                }
            };
            reader.monitors(b, &threads, &namer, cache)
        }
        None => {
            if let Support::Unsupported { why } = &monitor_support {
                reader.diagnostics.push(Diagnostic::warning(STAGE, format!("monitors not read: {why}")));
            }
            (Vec::new(), Vec::new(), None)
        }
    };
    let (task_waits, barrier_waits) = match build {
        Some(b) => (
            crate::runtimes::dotnet::tasks::task_waits(process, &t, &b.layout, &namer, &threads, &waits),
            super::barriers::barrier_waits(process, &t, &b.layout, &namer, &threads, &waits),
        ),
        None => (Vec::new(), Vec::new()),
    };
    let diagnostics = reader.into_diagnostics();
    DotnetReading::Runtime(Box::new(RuntimeReading {
        version,
        descriptor_source: source,
        contracts,
        counts,
        threads,
        monitors,
        waits,
        task_waits,
        barrier_waits,
        sync_table,
        monitor_support,
        diagnostics,
    }))
}

struct Reader<'a> {
    process: &'a Process,
    t: &'a Target<'a>,
    diagnostics: Vec<Diagnostic>,
    /// Diagnostics past [`MAX_READER_DIAGNOSTICS`], counted, not kept.
    cut: u64,
}

/// More than a real dump ever gives; a hostile table can give one per entry.
const MAX_READER_DIAGNOSTICS: usize = 256;
/// Monitors read from the sync-block table; more are counted and named as cut.
pub(crate) const MAX_MONITORS: usize = 4096;

impl Reader<'_> {
    fn push(&mut self, d: Diagnostic) {
        if self.diagnostics.len() < MAX_READER_DIAGNOSTICS {
            self.diagnostics.push(d);
        } else {
            self.cut += 1;
        }
    }

    fn warn(&mut self, what: &str, e: &DotnetError) {
        let mut d = Diagnostic::warning(STAGE, format!("{what}: {e}"));
        if let Some(a) = e.address() {
            d = d.at_address(a);
        }
        self.push(d);
    }

    /// The diagnostics, with one more naming how many were cut.
    fn into_diagnostics(mut self) -> Vec<Diagnostic> {
        if self.cut > 0 {
            self.diagnostics.push(Diagnostic::warning(STAGE, format!("{} more diagnostics of the .NET reader cut (at most {MAX_READER_DIAGNOSTICS} are kept)", self.cut)));
        }
        self.diagnostics
    }

    fn threads(&mut self) -> (Option<ThreadCounts>, Vec<ManagedThread>) {
        let t = self.t;
        let ts = match crate::runtimes::dotnet::threads::thread_store(t) {
            Ok(ts) => ts,
            Err(e) => {
                self.warn("threads not read", &e);
                return (None, Vec::new());
            }
        };
        let counts = crate::runtimes::dotnet::threads::counts(t, ts).map_err(|e| self.warn("thread counts not read", &e)).ok();
        let addresses = match crate::runtimes::dotnet::threads::thread_addresses(t, ts) {
            Ok(a) => a,
            Err(e) => {
                self.warn("thread list not read", &e);
                return (counts, Vec::new());
            }
        };
        let finalizer = t.global_deref("FinalizerThread").unwrap_or(0);
        let gc = t.global_deref("GCThread").unwrap_or(0);
        let by_tid: HashMap<u32, usize> = self.process.core.threads.iter().enumerate().map(|(i, th)| (th.tid, i)).collect();
        let mut out = Vec::new();
        for a in addresses {
            match crate::runtimes::dotnet::threads::read_thread(t, a, finalizer, gc) {
                Ok(mut th) => {
                    th.dump_thread_index = by_tid.get(&th.os_tid).copied();
                    if th.dump_thread_index.is_none() && th.os_tid != 0 && !th.is_dead() {
                        self.push(Diagnostic::info(STAGE, format!("managed thread {} (OS tid {}) is not among the dump's threads", th.managed_id, th.os_tid)).at_address(a));
                    }
                    out.push(th);
                }
                Err(e) => self.warn(&format!("thread {a:#x} not read"), &e),
            }
        }
        if let Some(c) = counts
            && c.thread_count >= 0
            && c.thread_count as usize != out.len()
        {
            self.push(Diagnostic::warning(STAGE, format!("the ThreadStore counts {} threads but its list has {}", c.thread_count, out.len())));
        }
        (counts, out)
    }

    fn monitors(&mut self, b: &BuildFacts, threads: &[ManagedThread], namer: &TypeNamer, cache: Option<crate::runtimes::dotnet::threads::syncblock::CacheCounts>) -> (Vec<ManagedLock>, Vec<MonitorWait>, Option<SyncTableSummary>) {
        let t = self.t;
        let l = &b.layout;
        let by_thread: HashMap<u64, &ManagedThread> = threads.iter().map(|th| (th.address, th)).collect();
        let by_id: HashMap<u32, &ManagedThread> = threads.iter().map(|th| (th.managed_id, th)).collect();
        let mut monitors: Vec<ManagedLock> = Vec::new();
        let mut waits: Vec<MonitorWait> = Vec::new();

        // Sync blocks.
        let table = match crate::runtimes::dotnet::threads::syncblock::read_table(t, l, cache) {
            Ok(mut table) => {
                if let Some(e) = table.stopped.take() {
                    self.warn(&format!("sync block table read to entry {} only", table.total), &e);
                }
                for (index, what) in &table.unsound {
                    self.push(Diagnostic::info(STAGE, format!("sync table entry {index} is in the used range but holds no sync block of a live object ({what}): not read as a lock")));
                }
                if table.unsound_cut > 0 {
                    self.diagnostics.push(Diagnostic::warning(STAGE, format!("{} more sync table entries hold no sync block of a live object (not listed)", table.unsound_cut)));
                }
                Some(table)
            }
            Err(e) => {
                self.warn("sync block table not read", &e);
                None
            }
        };
        let mut by_sync_block: HashMap<u64, usize> = HashMap::new();
        let mut sync_objects: HashMap<u64, usize> = HashMap::new();
        // Every in-use entry, by its AwareLock's address (what blocking records point at).
        let entries: HashMap<u64, crate::runtimes::dotnet::threads::syncblock::Entry> =
            table.iter().flat_map(|t| t.entries.iter()).filter(|e| e.sync_block != 0).map(|e| (e.sync_block.wrapping_add(l.sync_block_monitor), *e)).collect();
        let in_use = table.as_ref().map_or(0, |t| t.entries.len());
        for (read, entry) in table.iter().flat_map(|t| t.entries.iter()).enumerate() {
            if entry.sync_block == 0 {
                continue;
            }
            if monitors.len() >= MAX_MONITORS {
                // Past the cap of diagnostics too: what was cut is always said.
                self.diagnostics.push(Diagnostic::warning(
                    STAGE,
                    format!("sync block table: {MAX_MONITORS} monitors read from the first {read} of {in_use} entries in use; the rest cut"),
                ));
                break;
            }
            let lock = match crate::runtimes::dotnet::threads::syncblock::read_aware_lock(t, l, entry.sync_block) {
                Ok(lock) => lock,
                Err(e) => {
                    self.warn(&format!("sync block {} not read", entry.index), &e);
                    continue;
                }
            };
            let wait_list = match crate::runtimes::dotnet::threads::syncblock::wait_list(t, l, entry.sync_block) {
                Ok(w) => w,
                Err(e) => {
                    self.warn(&format!("Monitor.Wait list of sync block {}", entry.index), &e);
                    Vec::new()
                }
            };
            if !lock.locked && lock.waiter_count == 0 && wait_list.is_empty() && lock.holding_thread_id == 0 {
                continue;
            }
            // The object header must name this entry: else the entry is stale or damaged, and
            // what it says is no lock.
            match crate::runtimes::dotnet::types::objects::header_value(t, entry.object).map(|v| crate::runtimes::dotnet::types::objects::decode_header(v, l)) {
                Ok(Header::SyncBlock(i)) if i == entry.index => {}
                Ok(h) => {
                    self.push(
                        Diagnostic::warning(STAGE, format!("object {:#x} of sync block {} has header {h:?}, not that index: the entry is not read as a lock", entry.object, entry.index)).at_address(entry.object),
                    );
                    continue;
                }
                Err(e) => {
                    self.warn(&format!("header of object {:#x} (sync block {} not read as a lock)", entry.object, entry.index), &e);
                    continue;
                }
            }
            let (owner_thread, owner_os_tid, owner_managed_id) = if lock.holding_thread_id != 0 {
                let thread = match (lock.holding_thread != 0).then_some(lock.holding_thread).map_or_else(|| crate::runtimes::dotnet::threads::id_to_thread(t, lock.holding_thread_id), |th| Ok(Some(th))) {
                    Ok(Some(th)) => Some(th),
                    Ok(None) => by_id.get(&lock.holding_thread_id).map(|th| th.address),
                    Err(e) => {
                        self.warn("thin-lock id dispenser", &e);
                        by_id.get(&lock.holding_thread_id).map(|th| th.address)
                    }
                };
                let os = (lock.holding_os_thread_id != 0).then_some(lock.holding_os_thread_id as u32);
                if let (Some(th), Some(os)) = (thread.and_then(|a| by_thread.get(&a)), os)
                    && th.os_tid != os
                {
                    self.push(Diagnostic::warning(
                        STAGE,
                        format!("sync block {}: owner id {} is OS tid {}, but the lock records OS tid {os}", entry.index, lock.holding_thread_id, th.os_tid),
                    ));
                }
                (thread, os.or_else(|| thread.and_then(|a| by_thread.get(&a)).map(|th| th.os_tid)), Some(lock.holding_thread_id))
            } else {
                (None, None, None)
            };
            let wait_tids: Vec<u32> = wait_list.iter().filter_map(|(th, _)| by_thread.get(th).map(|m| m.os_tid)).collect();
            for (th, _) in &wait_list {
                if let Some(m) = by_thread.get(th) {
                    waits.push(MonitorWait {
                        os_tid: m.os_tid,
                        managed_id: m.managed_id,
                        thread: m.address,
                        kind: BlockingKind::MonitorWait,
                        object: Some(entry.object),
                        sync_block: Some(entry.sync_block),
                        owner_os_tid,
                        timeout_ms: None,
                        source: WaitSource::WaitList,
                    });
                }
            }
            by_sync_block.insert(entry.sync_block.wrapping_add(l.sync_block_monitor), monitors.len());
            sync_objects.insert(entry.object, monitors.len());
            monitors.push(ManagedLock {
                sync_block: Some(Hex(entry.sync_block)),
                sync_block_index: Some(entry.index),
                owner_thread,
                owner_os_tid,
                owner_managed_id,
                recursion: if lock.locked { lock.recursion } else { 0 },
                monitor_held: Some(lock.monitor_held()),
                waiter_count: Some(lock.waiter_count),
                pulse_waiters: wait_tids,
                ..ManagedLock::new(LockStorage::SyncBlock, entry.object)
            });
        }
        // Blocking records (.NET 8: from the waiters' HelperMethodFrames).
        let mut lock_objects: HashMap<u64, usize> = HashMap::new();
        let method_name = |md: u64| {
            let md = crate::runtimes::dotnet::types::methoddesc::read(t, md).ok()?;
            crate::runtimes::dotnet::types::methodname::name(t, namer, &md).ok().map(|n| n.qualified)
        };
        for th in threads {
            let read = if th.thread_local_data == 0 && t.global("HelperMethodFrame_1OBJIdentifier").is_ok() {
                crate::runtimes::dotnet::threads::blocking::frame_records(t, l, th.last_frame.unwrap_or(0), &method_name)
            } else {
                crate::runtimes::dotnet::threads::blocking::records(t, l, th.address, th.thread_local_data)
            };
            let records = match read {
                Ok(r) => r,
                Err(e) => {
                    self.warn(&format!("blocking records of thread {}", th.managed_id), &e);
                    continue;
                }
            };
            for r in records {
                let wait = |object, sync_block, owner| MonitorWait {
                    os_tid: th.os_tid,
                    managed_id: th.managed_id,
                    thread: th.address,
                    kind: r.kind,
                    object,
                    sync_block,
                    owner_os_tid: owner,
                    timeout_ms: Some(r.timeout_ms),
                    source: WaitSource::BlockingRecord,
                };
                match r.kind {
                    BlockingKind::MonitorEnter | BlockingKind::MonitorWait => {
                        let idx = by_sync_block.get(&r.object_ptr).copied();
                        let m = idx.map(|i| &monitors[i]);
                        let entry = entries.get(&r.object_ptr);
                        let object = m.map(|m| m.object.0).or(entry.map(|e| e.object));
                        let w = wait(object, Some(r.object_ptr.wrapping_sub(l.sync_block_monitor)), m.and_then(|m| m.owner_os_tid));
                        if r.kind == BlockingKind::MonitorWait
                            && waits.iter().any(|x| x.source == WaitSource::WaitList && x.thread == th.address && x.sync_block == w.sync_block)
                        {
                            continue;
                        }
                        if let (Some(i), BlockingKind::MonitorEnter) = (idx, r.kind) {
                            monitors[i].waiters.push(th.os_tid);
                        }
                        if entry.is_none() && table.is_some() {
                            self.push(Diagnostic::warning(
                                STAGE,
                                format!("thread {} waits on AwareLock {:#x}, which is in no in-use sync block", th.managed_id, r.object_ptr),
                            ));
                        }
                        waits.push(w);
                    }
                    BlockingKind::Lock | BlockingKind::Condition => {
                        let object = match t.read_ptr(r.object_ptr, "blocking record's object slot") {
                            Ok(o) => o,
                            Err(e) => {
                                self.warn(&format!("object of thread {}'s blocking record", th.managed_id), &e);
                                continue;
                            }
                        };
                        let idx = match lock_objects.get(&object) {
                            Some(&i) => Some(i),
                            None if r.kind == BlockingKind::Lock => match self.managed_lock(l, object, threads) {
                                Ok(m) => {
                                    lock_objects.insert(object, monitors.len());
                                    monitors.push(m);
                                    Some(monitors.len() - 1)
                                }
                                Err(e) => {
                                    self.warn(&format!("Lock {object:#x}"), &e);
                                    None
                                }
                            },
                            None => None,
                        };
                        let owner = idx.and_then(|i| monitors[i].owner_os_tid);
                        if let Some(i) = idx {
                            monitors[i].waiters.push(th.os_tid);
                        }
                        waits.push(wait(Some(object), None, owner));
                    }
                }
            }
        }
        // Thin locks: in the headers of objects knot can reach.
        let mut candidates: Vec<(u64, Option<u32>)> = threads.iter().filter(|th| th.thread_object != 0).map(|th| (th.thread_object, None)).collect();
        candidates.extend(lock_objects.keys().map(|&o| (o, None)));
        candidates.extend(self.stack_objects(l, threads));
        let mut seen: HashSet<u64> = sync_objects.keys().copied().collect();
        let header_offset = crate::runtimes::dotnet::types::objects::header_offset(t).ok();
        for (object, only_owner) in candidates {
            if !seen.insert(object) {
                continue;
            }
            let Some(v) = header_offset.and_then(|off| crate::runtimes::dotnet::types::objects::header_value_at(t, off, object)) else { continue };
            if let Header::ThinLock { owner_id, recursion_level } = crate::runtimes::dotnet::types::objects::decode_header(v, l) {
                if only_owner.is_some_and(|id| id != owner_id) {
                    continue;
                }
                let owner = by_id.get(&owner_id);
                monitors.push(ManagedLock {
                    owner_thread: owner.map(|th| th.address),
                    owner_os_tid: owner.map(|th| th.os_tid),
                    owner_managed_id: Some(owner_id),
                    recursion: recursion_level + 1,
                    ..ManagedLock::new(LockStorage::ThinLock, object)
                });
            }
        }
        // Type names.
        for m in &mut monitors {
            match namer.object_type_name(m.object.0) {
                Ok(n) => m.type_name = Some(n),
                Err(e) => {
                    let mut d = Diagnostic::warning(STAGE, format!("type of object {}: {e}", m.object));
                    d = d.at_address(m.object.0);
                    self.push(d);
                }
            }
        }
        let summary = table.map(|t| SyncTableSummary { address: t.address, total: t.total, free: t.free });
        (monitors, waits, summary)
    }

    /// A `System.Threading.Lock` object's owner and recursion.
    fn managed_lock(&self, l: &Layout, object: u64, threads: &[ManagedThread]) -> Result<ManagedLock, DotnetError> {
        let t = self.t;
        let (Some(owner_at), Some(state_at), Some(recursion_at), Some(locked_mask)) = (l.managed_lock_owning_thread_id, l.managed_lock_state, l.managed_lock_recursion_count, l.managed_lock_locked_mask) else {
            return Err(DotnetError::Unsupported("System.Threading.Lock's layout (this runtime build has none)".into()));
        };
        let owner_os = t.read_u32(object.wrapping_add(owner_at), "Lock._owningThreadId")?;
        let state = t.read_u32(object.wrapping_add(state_at), "Lock._state")?;
        let recursion = t.read_u32(object.wrapping_add(recursion_at), "Lock._recursionCount")?;
        let locked = state & locked_mask != 0;
        let owner = threads.iter().find(|th| owner_os != 0 && th.os_tid == owner_os);
        Ok(ManagedLock {
            owner_thread: owner.map(|th| th.address),
            owner_os_tid: (locked && owner_os != 0).then_some(owner_os),
            owner_managed_id: owner.filter(|_| locked).map(|th| th.managed_id),
            recursion: if locked { recursion + 1 } else { 0 },
            ..ManagedLock::new(LockStorage::LockObject, object)
        })
    }

    /// Words on each managed thread's stack that are references to objects thin-locked by that
    /// same thread: the header must name the scanning thread as owner and the word must point at
    /// a MethodTable whose EEClass points back, which keeps stray stack words from being taken
    /// for objects. A thin lock whose object only another thread (or a register) refers to is
    /// not found; a contended one is a sync block, which the table gives.
    fn stack_objects(&self, l: &Layout, threads: &[ManagedThread]) -> Vec<(u64, Option<u32>)> {
        let t = self.t;
        let mut out = Vec::new();
        let Ok(header_offset) = crate::runtimes::dotnet::types::objects::header_offset(t) else { return out };
        for th in threads {
            let Some(i) = th.dump_thread_index else { continue };
            let Some(ct) = self.process.core.threads.get(i) else { continue };
            let Some(words) = StackWords::new(self.process, ct.registers.sp() & !7, STACK_SCAN_BYTES) else { continue };
            let stack = words.stack().clone();
            for (_, v) in words {
                // Objects live on the GC heap: a word pointing into this stack is a frame
                // pointer or a local's address, not a locked object.
                if v < 0x10000 || v & 7 != 0 || stack.contains(&v) {
                    continue;
                }
                let Some(h) = crate::runtimes::dotnet::types::objects::header_value_at(t, header_offset, v) else { continue };
                match crate::runtimes::dotnet::types::objects::decode_header(h, l) {
                    Header::ThinLock { owner_id, .. } if owner_id == th.managed_id => {}
                    _ => continue,
                }
                if crate::runtimes::dotnet::types::objects::method_table(t, v).is_ok_and(|mt| crate::runtimes::dotnet::types::objects::is_plausible_method_table(t, mt)) {
                    out.push((v, Some(th.managed_id)));
                }
            }
        }
        out
    }
}

