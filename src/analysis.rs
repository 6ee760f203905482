//! The pipeline from a core file to a [`Report`]: open → modules → stacks (parallel) → symbols.

use crate::core::{siginfo, CoreError};
use crate::process::{module::FileStatus, Locator, Process};
use crate::graph::{groups, WaitForGraph};
use crate::report::{DumpInfo, FrameReport, Group, Hex, ModuleReport, Report, SignalReport, StackEndReport, ThreadReport, Verdict, SCHEMA_VERSION};
use crate::waits::{self, LockFact, ThreadState};
use crate::symbols::Symbolizer;
use crate::runtimes::dotnet::{frames::WithFrames, CodeMap};
use crate::unwind::managed::CodeLookup;
use crate::unwind::{Stack, StackEnd, Trust, Unwinder};
use rayon::prelude::*;
use std::path::Path;
use std::sync::Arc;

#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Where module files and debug files are looked for.
    pub locator: Locator,
    /// Frames per stack at most (the walk's bound, not a display limit).
    pub max_walk_frames: Option<usize>,
    /// Only stacks: no lock analysis, no wait-for graph (for measuring, and for dumps where
    /// only the stacks matter).
    pub stacks_only: bool,
    /// Told as each phase of the pipeline starts (for a progress bar). It changes no fact.
    pub progress: Option<Progress>,
}

/// The phases of [`analyze`], in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Mapping the core, reading its notes, finding module and debug files.
    Open,
    /// Walking every thread's stack.
    Stacks,
    /// Symbols, lines and inlined frames.
    Symbols,
    /// Thread states, lock owners and waiters, the wait-for graph.
    Locks,
    /// Walking the .NET GC heap.
    Heap,
}

impl Phase {
    pub const ALL: [Phase; 5] = [Phase::Open, Phase::Stacks, Phase::Symbols, Phase::Locks, Phase::Heap];

    pub fn label(self) -> &'static str {
        match self {
            Phase::Open => "opening the dump",
            Phase::Stacks => "walking stacks",
            Phase::Symbols => "reading symbols",
            Phase::Locks => "reading locks",
            Phase::Heap => "walking the GC heap",
        }
    }
}

/// A progress hook: called with each [`Phase`] as it starts.
#[derive(Clone)]
pub struct Progress(pub Arc<dyn Fn(Phase) + Send + Sync>);

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Progress(..)")
    }
}

fn tell(opts: &Options, phase: Phase) {
    if let Some(p) = &opts.progress {
        (p.0)(phase);
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    #[error(transparent)]
    Core(#[from] CoreError),
}

/// Reads the core at `path` and builds the report.
pub fn analyze(path: impl AsRef<Path>, opts: &Options) -> Result<Report, AnalyzeError> {
    tell(opts, Phase::Open);
    let process = Process::open(path.as_ref(), &opts.locator)?;
    Ok(report_for(&process, opts))
}

/// Builds the report for an opened process.
pub fn report_for(process: &Process, opts: &Options) -> Report {
    let code_lookup = code_lookup(process, &opts.locator);
    let mut unwinder = Unwinder::new(process);
    let mut symbolizer = Symbolizer::new(process);
    if let Some(l) = code_lookup.as_ref().map(|l| l as &dyn CodeLookup) {
        unwinder = unwinder.with_code_lookup(l);
        symbolizer = symbolizer.with_code_lookup(l);
    }
    if let Some(n) = opts.max_walk_frames {
        unwinder.max_frames = n;
    }
    tell(opts, Phase::Stacks);
    let stacks = unwinder.walk_all();
    tell(opts, Phase::Symbols);
    let core = &process.core;
    let pid = core.process.as_ref().map(|p| p.pid);
    let frames: Vec<Vec<FrameReport>> = stacks.par_iter().map(|stack| frames(process, &symbolizer, stack)).collect();

    let inputs: Vec<waits::ThreadInput<'_>> = core
        .threads
        .iter()
        .zip(&frames)
        .map(|(t, f)| waits::ThreadInput {
            tid: t.tid,
            registers: &t.registers,
            cursig: t.cursig,
            functions: f.iter().filter(|f| f.transition.is_none()).map(|f| f.function.as_deref().unwrap_or("")).collect(),
        })
        .collect();
    tell(opts, Phase::Locks);
    let mut facts = if opts.stacks_only { waits::states_only(process, &inputs) } else { waits::analyze(process, &symbolizer, &inputs) };
    let tids: Vec<u32> = core.threads.iter().map(|t| t.tid).collect();
    let functions: Vec<&[&str]> = inputs.iter().map(|i| i.functions.as_slice()).collect();
    let mut dotnet = if opts.stacks_only { waits::dotnet::DotnetFacts::default() } else { waits::dotnet::merge(process, &opts.locator, &tids, &functions, &mut facts) };
    if let Some(report) = dotnet.report.as_mut().filter(|r| r.runtime_version.is_some() && r.managed_threads > 0) {
        tell(opts, Phase::Heap);
        crate::runtimes::dotnet::gc::report::attach(process, &opts.locator, report, &mut facts.locks, &mut facts.diagnostics);
    }
    let blocked: Vec<(u32, Option<&str>)> = core.threads.iter().zip(&facts.threads).map(|(t, w)| (t.tid, w.blocked_on.as_deref())).collect();
    let deadlocks = WaitForGraph::new(&blocked, &facts.locks).deadlocks();
    let locks = order_locks(facts.locks.clone(), &deadlocks);

    let keys: Vec<Vec<u64>> = stacks.iter().map(|s| s.frames.iter().map(|f| f.ip).collect()).collect();
    let groups = groups::group_by_stack(&keys)
        .into_iter()
        .map(|idx| Group { tids: idx.iter().map(|&i| core.threads[i].tid).collect(), frames: frames[idx[0]].clone() })
        .collect();

    let threads: Vec<ThreadReport> = core
        .threads
        .iter()
        .zip(stacks.iter())
        .zip(frames)
        .zip(facts.threads.iter().cloned())
        .map(|(((t, stack), frames), wait)| ThreadReport {
            tid: t.tid,
            name: dotnet
                .threads
                .names
                .get(&t.tid)
                .or_else(|| core.thread_names.get(&t.tid))
                .cloned()
                .or_else(|| (Some(t.tid) == pid).then(|| core.process.as_ref().map(|p| p.name.clone())).flatten())
                .filter(|n| !n.is_empty()),
            signalled: t.signalled,
            frames,
            stack_end: stack_end(&stack.end),
            state: wait.state,
            blocked_on: wait.blocked_on,
            managed_thread_id: dotnet.threads.ids.get(&t.tid).copied(),
        })
        .collect();
    // The .NET runtime's reading of its own crash (FailFast, unhandled exception, stack
    // overflow) wins over the native one.
    let dotnet_crash = code_lookup.as_ref().and_then(|l| crate::runtimes::dotnet::crash::read(process, &opts.locator, &stacks, l));
    let crash = crate::crash::read(process, &symbolizer, &threads, dotnet_crash.as_ref().and_then(|c| c.runtime_facts()).as_ref());
    if let (Some(report), Some(c)) = (dotnet.report.as_mut(), dotnet_crash.as_ref()) {
        report.exceptions = c
            .thread_exceptions
            .iter()
            .map(|t| waits::dotnet::ThreadExceptionReport { tid: t.os_tid, exception: crate::runtimes::dotnet::crash::exception_report(&t.exception) })
            .collect();
        report.createdump = c.diaginfo;
    }
    let verdict = verdict(&deadlocks, &locks, &threads, &facts.threads, crash.as_ref(), dotnet.report.as_ref());
    let mut diagnostics: Vec<_> = process.all_diagnostics().cloned().collect();
    diagnostics.extend(facts.diagnostics);
    diagnostics.extend(dotnet_crash.into_iter().flat_map(|c| c.diagnostics));
    diagnostics.extend(code_lookup.iter().flat_map(|l| l.code.diagnostics()));
    Report {
        schema_version: SCHEMA_VERSION,
        knot_version: env!("CARGO_PKG_VERSION").to_string(),
        dump: dump_info(process),
        verdict,
        crash,
        deadlocks,
        locks,
        groups,
        threads,
        modules: process.modules.iter().map(module_report).collect(),
        diagnostics,
        dotnet: dotnet.report,
        live: core.capture.as_ref().map(crate::report::LiveReport::from),
    }
}

/// Every thread-pool worker blocked inside a work item, and one of them waiting for a task: the
/// classic sync-over-async starvation (SOS users read it from `threadpool` + `clrstack`).
fn thread_pool_starved(locks: &[LockFact], dotnet: Option<&waits::dotnet::DotnetReport>) -> bool {
    let Some(tp) = dotnet.and_then(|d| d.thread_pool.as_ref()) else { return false };
    let all_blocked = tp.workers_total > 0 && tp.worker_tids.iter().all(|t| tp.workers_blocked.contains(t));
    all_blocked && locks.iter().any(|l| l.kind == "task" && l.waiter_tids.iter().any(|t| tp.worker_tids.contains(t)))
}

/// Locks in deadlocks first (in cycle order), then the most waited-for.
fn order_locks(mut locks: Vec<LockFact>, deadlocks: &[crate::graph::Deadlock]) -> Vec<LockFact> {
    let rank = |l: &LockFact| deadlocks.iter().flat_map(|d| d.locks.iter()).position(|id| *id == l.id).unwrap_or(usize::MAX);
    locks.sort_by(|a, b| rank(a).cmp(&rank(b)).then(b.waiter_tids.len().cmp(&a.waiter_tids.len())).then(a.id.cmp(&b.id)));
    locks
}

fn verdict(
    deadlocks: &[crate::graph::Deadlock],
    locks: &[LockFact],
    reports: &[ThreadReport],
    threads: &[waits::ThreadWait],
    crash: Option<&crate::crash::CrashReport>,
    dotnet: Option<&waits::dotnet::DotnetReport>,
) -> Verdict {
    let exclusive = |l: &&LockFact| matches!(l.kind.as_str(), "mutex" | "rwlock" | "futex" | "join" | "monitor" | "lock");
    let crashed = crash.filter(|c| c.kind != crate::crash::CrashKind::Killed);
    if !deadlocks.is_empty() {
        Verdict::Deadlock
    } else if dotnet.and_then(|d| d.gc.as_ref()).is_some_and(|g| g.stalled) {
        // A wedge the crash followed from (an OOM FailFast in a stalled GC) stays the verdict.
        Verdict::GcStall
    } else if crashed.is_some() {
        Verdict::Crash
    } else if locks.iter().filter(exclusive).filter(|l| contends(l, locks, reports, crashed)).any(|l| !l.waiter_tids.is_empty()) {
        Verdict::Contention
    } else if thread_pool_starved(locks, dotnet) {
        Verdict::ThreadPoolStarved
    } else if threads.iter().any(|t| matches!(t.state, ThreadState::Io { .. })) {
        Verdict::BlockedOnIo
    } else if threads.iter().any(|t| t.state.is_blocked()) {
        Verdict::Idle
    } else {
        Verdict::NothingBlocked
    }
}

/// Whether waiting for `l` is contention. Joining a thread is only when that thread is itself
/// busy or waits for an exclusive lock: a join on the crashed thread, or on a thread that sleeps
/// or waits to be signalled, is waiting for nobody's lock.
fn contends(l: &LockFact, locks: &[LockFact], reports: &[ThreadReport], crash: Option<&crate::crash::CrashReport>) -> bool {
    if l.kind != "join" {
        return true;
    }
    let Some(joined) = l.owner.tid() else { return true };
    if crash.is_some_and(|c| c.thread == Some(joined)) {
        return false;
    }
    match reports.iter().find(|t| t.tid == joined) {
        Some(t) if t.state.is_blocked() => t
            .blocked_on
            .as_deref()
            .and_then(|id| locks.iter().find(|x| x.id == id))
            .is_some_and(|x| x.kind != "join" && matches!(x.kind.as_str(), "mutex" | "rwlock" | "futex" | "monitor" | "lock")),
        _ => true,
    }
}

/// The runtime's map of the code it made (.NET JIT and ReadyToRun code), with its threads'
/// transition records; `None` for a process without a readable .NET runtime.
fn code_lookup<'p>(process: &'p Process, locator: &Locator) -> Option<WithFrames<CodeMap<'p>>> {
    let code = crate::runtimes::dotnet::code_map(process, locator).ok()?;
    Some(WithFrames { code, frames: crate::runtimes::dotnet::frames::read(process) })
}

fn frames(process: &Process, symbolizer: &Symbolizer<'_>, stack: &Stack) -> Vec<FrameReport> {
    let module_name = |addr: u64| process.module_at(addr).map(|(_, m)| m.name().to_string());
    let mut out = Vec::with_capacity(stack.frames.len() * 2);
    // A transition record is shown before the frame whose stack range holds it.
    let mut transitions = stack.transition_slots().into_iter().peekable();
    for (i, f) in stack.frames.iter().enumerate() {
        while let Some((_, t)) = transitions.next_if(|(slot, _)| *slot <= i) {
            out.push(FrameReport::transition(out.len(), t));
        }
        if let Some(m) = symbolizer.managed(f.ip, !f.ip_is_exact) {
            out.push(FrameReport::managed(out.len(), f, m, module_name(f.lookup_address())));
            continue;
        }
        // gdb looks for tail-call frames where its DWARF unwinder stepped from a callee to
        // this caller.
        if f.trust == Trust::Cfi
            && let Some(callee) = i.checked_sub(1).and_then(|c| stack.frames.get(c))
        {
            for t in symbolizer.tail_calls(callee.ip, callee.ip_is_exact, f.ip) {
                out.push(FrameReport {
                    index: out.len(),
                    ip: Hex(t.pc),
                    function: t.frame.function,
                    function_offset: t.frame.function_offset.map(Hex),
                    module: module_name(t.pc.wrapping_sub(1)),
                    file: t.frame.file,
                    line: t.frame.line,
                    inlined: false,
                    tail_call: true,
                    signal_frame: false,
                    trust: f.trust,
                    managed: false,
                    signature: None,
                    transition: None,
                });
            }
        }
        let module = module_name(f.lookup_address());
        let sym = symbolizer.symbolize(f.ip, !f.ip_is_exact);
        if sym.frames.is_empty() {
            // The innermost frame of a call through a wild pointer sits in data: name it as gdb
            // does, by the data symbol there.
            let data = (f.trust == Trust::Context).then(|| symbolizer.data_symbol(f.ip)).flatten().map(|(name, _)| name);
            out.push(FrameReport {
                index: out.len(),
                ip: Hex(f.ip),
                function: data,
                function_offset: None,
                module,
                file: None,
                line: None,
                inlined: false,
                tail_call: false,
                signal_frame: f.is_signal_frame,
                trust: f.trust,
                managed: false,
                signature: None,
                transition: None,
            });
            continue;
        }
        for s in sym.frames {
            out.push(FrameReport {
                index: out.len(),
                ip: Hex(f.ip),
                function: s.function,
                function_offset: s.function_offset.map(Hex),
                module: module.clone(),
                file: s.file,
                line: s.line,
                inlined: s.inlined,
                tail_call: false,
                signal_frame: f.is_signal_frame && !s.inlined,
                trust: f.trust,
                managed: false,
                signature: None,
                transition: None,
            });
        }
    }
    // Records above where the walk ended, or in no frame's range.
    for (_, t) in transitions {
        out.push(FrameReport::transition(out.len(), t));
    }
    out
}

fn stack_end(end: &StackEnd) -> StackEndReport {
    let (reason, address, detail) = match *end {
        StackEnd::Outermost => ("outermost", None, "reached the thread's first frame".to_string()),
        StackEnd::ZeroReturnAddress => ("zero_return_address", None, "return address 0 ends the chain".to_string()),
        StackEnd::NoProgress { ip, sp } => ("no_progress", Some(ip), format!("caller {ip:#x} has stack pointer {sp:#x}, not above the callee's")),
        StackEnd::Unreadable { address } => ("unreadable", Some(address), format!("stack memory at {address:#x} is not in the dump")),
        StackEnd::NoCaller { ip } => ("no_caller", Some(ip), format!("no unwind information, frame pointer or return address found above {ip:#x}")),
        StackEnd::NotCode { ip } => ("not_code", Some(ip), format!("return address {ip:#x} is not in executable memory")),
        StackEnd::DepthLimit { frames } => ("depth_limit", None, format!("stopped at the {frames}-frame limit")),
    };
    StackEndReport { complete: end.is_complete(), reason: reason.into(), address: address.map(Hex), detail }
}

fn dump_info(process: &Process) -> DumpInfo {
    let core = &process.core;
    DumpInfo {
        path: core.path().display().to_string(),
        size_bytes: core.file_bytes().len() as u64,
        pid: core.process.as_ref().map(|p| p.pid),
        process_name: core.process.as_ref().map(|p| p.name.clone()),
        command_line: core.process.as_ref().map(|p| p.args.clone()),
        signal: core.signal.as_ref().map(|s| SignalReport {
            number: s.signo,
            name: siginfo::signal_name(s.signo).to_string(),
            code: s.code,
            fault_address: s.fault_address.map(Hex),
            sender_pid: s.sender_pid,
        }),
        partial: process.all_diagnostics().any(|d| d.severity == crate::Severity::Warning),
    }
}

fn module_report(m: &crate::process::Module) -> ModuleReport {
    let (status, detail) = match &m.file_status {
        FileStatus::Loaded { path } => ("loaded", Some(path.clone())),
        FileStatus::InMemory => ("in_memory", None),
        FileStatus::Missing { tried } => ("missing", Some(format!("not found at {tried}"))),
        FileStatus::Refused { path, reason } => ("refused", Some(format!("{path}: {reason}"))),
    };
    ModuleReport {
        path: m.path.clone(),
        start: Hex(m.start),
        end: Hex(m.end),
        load_bias: Hex(m.bias),
        build_id: m.build_id_hex(),
        build_id_source: m.build_id_source.map(|s| match s {
            crate::process::module::BuildIdSource::Dump => "dump".to_string(),
            crate::process::module::BuildIdSource::File => "file".to_string(),
        }),
        file_status: status.into(),
        file_detail: detail,
        debug_info: m.debug_status.clone(),
    }
}

