//! The .NET heap's readings the runtime handle gives: the object graph's retention attached to
//! the report's section (its stack roots from the stacks the pipeline walked), and for the
//! `knot heap` commands the heap read alone, its retention summarized for a diff, and why
//! objects are alive.

use crate::runtimes::dotnet::contract::context::Context;
use crate::runtimes::dotnet::gc::roots::{StackFrame, ThreadStack};
use crate::runtimes::dotnet::gc::{self, holders::Holding};
use crate::runtimes::dotnet::runtime::DotnetRuntime;
use crate::diagnostics::Diagnostic;
use crate::process::Process;
use crate::runtimes::{HeapReading, HeapRetention, ObjectRoots, Runtime as _};
use crate::threads::FrameReport;
use crate::unwind::{Stack, StackEnd};

/// The threads' stacks as the heap graph's stack roots read them: each frame's stack pointer,
/// code address, registers (managed frames only) and whether it is managed (from `frames`, the
/// report's frames of the same stacks).
pub(crate) fn thread_stacks(process: &Process, context: &Context<'_>, stacks: &[Stack], frames: &[Vec<FrameReport>]) -> Vec<ThreadStack> {
    let arch = process.core.arch;
    let t = context.target();
    let mut managed_ids = std::collections::HashMap::new();
    if let Ok(ts) = crate::runtimes::dotnet::threads::thread_store(&t)
        && let Ok(list) = crate::runtimes::dotnet::threads::thread_addresses(&t, ts)
    {
        for a in list {
            if let Ok(th) = crate::runtimes::dotnet::threads::read_thread(&t, a, 0, 0) {
                managed_ids.insert(th.os_tid, th.managed_id);
            }
        }
    }
    process
        .core
        .threads
        .iter()
        .zip(stacks)
        .zip(frames)
        .map(|((th, stack), reports)| {
            let frames = stack
                .frames
                .iter()
                .map(|f| {
                    let managed = reports.iter().any(|r| r.ip.0 == f.ip && !r.inlined && r.transition.is_none() && r.managed);
                    let registers = if managed { (0..arch.tracked() as u16).filter(|&r| r != arch.sp_reg() && r != arch.pc_reg()).filter_map(|r| f.regs.get(r).map(|v| (r, v))).collect() } else { Vec::new() };
                    StackFrame { sp: f.sp, ip: f.ip, managed, registers }
                })
                .collect();
            let mut stack_end = process.core.segments.find(th.registers.sp()).map(|s| s.end()).unwrap_or(0);
            // A walk stopped at a return address outside known code still knew that caller's
            // stack pointer: the last frame ends there. Scanning on to the stack's end would take
            // the callers' slots (the runtime's native frames) as the last managed frame's roots,
            // and make the roots depend on whether the runtime's file was at hand.
            if let StackEnd::NotCode { sp, .. } = stack.end
                && sp > 0
            {
                stack_end = stack_end.min(sp);
            }
            ThreadStack { os_tid: th.tid, managed_id: managed_ids.get(&th.tid).copied().unwrap_or(0), frames, stack_end }
        })
        .collect()
}

/// The stacks of every thread walked and symbolized with the runtime's code map (for a heap
/// reading made without the pipeline's).
fn walk_stacks(runtime: &DotnetRuntime<'_>, process: &Process) -> (Vec<Stack>, Vec<Vec<FrameReport>>) {
    let mut unwinder = crate::unwind::Unwinder::new(process);
    let mut symbolizer = crate::symbols::Symbolizer::new(process);
    if let Some(l) = runtime.code_lookup() {
        unwinder = unwinder.with_code_lookup(l);
        symbolizer = symbolizer.with_code_lookup(l);
    }
    let stacks = unwinder.walk_all();
    let frames: Vec<Vec<FrameReport>> = stacks.iter().map(|s| crate::threads::build::frames(process, &symbolizer, s)).collect();
    (stacks, frames)
}

/// The heap's retention through the runtime handle: its stacks walked for their roots (unless
/// given), the object graph (the one made ahead, when it was), the dominator tree.
pub(crate) fn holding(runtime: &DotnetRuntime<'_>, stacks_and_frames: Option<(&[Stack], &[Vec<FrameReport>])>) -> Result<Holding, String> {
    let context = runtime.context()?;
    let process = context.process;
    let threads = match stacks_and_frames {
        Some((stacks, frames)) => thread_stacks(process, context, stacks, frames),
        None => {
            let (stacks, frames) = walk_stacks(runtime, process);
            thread_stacks(process, context, &stacks, &frames)
        }
    };
    // Made while the stacks were walked (the report's section), but for their roots; else under
    // the memory limit planned (`knot heap diff`), or unbounded.
    match runtime.take_graph().or_else(|| runtime.graph_within_limit()) {
        Some(graph) => gc::holders::of_graph(context, graph?.finish(context, &threads)),
        None => gc::holders::read(context, &threads, None),
    }
}

/// Fills the retained fields of the report's .NET heap (`dotnet.heap.retained`, `dominators`,
/// `unreachable`, `suspects`); what could not be read goes to `diagnostics`.
pub(crate) fn attach(runtime: &DotnetRuntime<'_>, stacks: &[Stack], frames: &[Vec<FrameReport>], heap: &mut gc::report::HeapReport, diagnostics: &mut Vec<Diagnostic>) {
    // A scratch file that could not grow (the disk filled after the plan looked) leaves the
    // retained sizes out, said, never the report.
    let held = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| holding(runtime, Some((stacks, frames))))).unwrap_or_else(|panic| match panic.downcast_ref::<crate::scratch::ScratchFull>() {
        Some(full) => Err(full.to_string()),
        None => std::panic::resume_unwind(panic),
    });
    match held {
        Err(why) => diagnostics.push(Diagnostic::warning(gc::STAGE, format!("retained sizes not read: {why}"))),
        Ok(h) => {
            if let Ok(context) = runtime.context() {
                h.attach(context, heap);
            }
            diagnostics.extend(h.diagnostics);
        }
    }
}

/// The heap read alone (`knot heap stat`, the types of `knot heap diff`); `None` when the
/// runtime could not be located.
pub(crate) fn reading(runtime: &DotnetRuntime<'_>) -> Option<Result<HeapReading, String>> {
    // A runtime recognised but not read says which and why (its version, the build knot has no
    // data for), never that there is none.
    Some(runtime.context().and_then(|context| gc::read_in(context, &[], false)).map(HeapReading::Dotnet))
}

/// Retained bytes by type and the top holders by root path (`knot heap diff`), or why not.
pub(crate) fn retention(runtime: &DotnetRuntime<'_>) -> Result<HeapRetention, Diagnostic> {
    let h = holding(runtime, None).map_err(|why| Diagnostic::warning(gc::STAGE, format!("retained sizes not read: {why}")))?;
    let holders = runtime.context().map(|c| h.holders_by_path(c)).unwrap_or_default();
    Ok(HeapRetention { by_type: h.retained_by_type(), holders, diagnostics: h.diagnostics })
}

/// Why each of `addresses` is alive: from every root (`all_roots`: the whole heap as a graph) or
/// the first path the search from the roots meets.
pub(crate) fn object_roots(runtime: &DotnetRuntime<'_>, stacks: &[Stack], frames: &[Vec<FrameReport>], addresses: &[u64], all_roots: bool) -> Result<Vec<ObjectRoots>, String> {
    let context = runtime.context()?;
    let threads = thread_stacks(context.process, context, stacks, frames);
    let all = if all_roots {
        // The whole heap as a graph: planned under the memory limit like the report's (in
        // memory, in scratch files, or refused saying the limit and the flags that lift it).
        let reading = match runtime.graph_within_limit() {
            Some(graph) => graph?.finish(context, &threads),
            None => gc::read_graph(context, &threads, None)?,
        };
        gc::why_alive::why_alive(context, reading, addresses)
    } else {
        gc::why_alive::first_paths(context, &threads, addresses)
    }?;
    Ok(all.into_iter().map(ObjectRoots::Dotnet).collect())
}
