//! A thread's frames for the report, from its unwound stack: the symbolizer's names, lines and
//! inlined frames, gdb's tail-call frames, the runtime's managed names and transition records
//! in place; and how the walk ended.

use crate::hex::Hex;
use super::{FrameReport, StackEndReport};
use crate::process::Process;
use crate::symbols::Symbolizer;
use crate::unwind::{Stack, StackEnd, Trust};

pub(crate) fn frames(process: &Process, symbolizer: &Symbolizer<'_>, stack: &Stack) -> Vec<FrameReport> {
    let module_name = |addr: u64| process.module_at(addr).map(|(_, m)| m.name().to_string());
    let without_symbols = |addr: u64| process.module_at(addr).is_some_and(|(_, m)| m.symbol_files().next().is_none());
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
                    no_symbols: false,
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
                no_symbols: data.is_none() && without_symbols(f.lookup_address()),
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
                no_symbols: false,
            });
        }
    }
    // Records above where the walk ended, or in no frame's range.
    for (_, t) in transitions {
        out.push(FrameReport::transition(out.len(), t));
    }
    // Every thread's frames live until the report is written: no spare room kept (the room
    // reserved for inlined frames is most of it).
    out.shrink_to_fit();
    out
}

pub(crate) fn stack_end(stack: &crate::unwind::Stack) -> StackEndReport {
    let end = &stack.end;
    let (reason, address, detail) = match *end {
        StackEnd::Outermost => ("outermost", None, "reached the thread's first frame".to_string()),
        StackEnd::ZeroReturnAddress => ("zero_return_address", None, "return address 0 ends the chain".to_string()),
        StackEnd::NoProgress { ip, sp } => ("no_progress", Some(ip), format!("caller {ip:#x} has stack pointer {sp:#x}, not above the callee's")),
        StackEnd::Unreadable { address } => ("unreadable", Some(address), format!("stack memory at {address:#x} is not in the dump")),
        StackEnd::NoCaller { ip } => ("no_caller", Some(ip), format!("no unwind information, frame pointer or return address found above {ip:#x}")),
        StackEnd::NotCode { ip, .. } => ("not_code", Some(ip), format!("return address {ip:#x} is not in executable memory")),
        StackEnd::SmashedReturn { ip, slot } => (
            "smashed_return",
            Some(ip),
            format!("the thread returned to {ip:#x}, which is no code, and the stack slot it returned from ({slot:#x}) holds it: a return address overwritten (a smashed stack); its callers are not known"),
        ),
        StackEnd::DepthLimit { frames } => ("depth_limit", None, format!("stopped at the {frames}-frame limit")),
        StackEnd::EntryPoint => ("entry_point", None, "reached the program's entry point (_start)".to_string()),
    };
    let detail = match stack.scanned {
        0 => detail,
        n => format!("{n} frame{} found by scanning the stack, which may be stale; {detail}", if n == 1 { "" } else { "s" }),
    };
    StackEndReport { complete: stack.is_complete(), reason: reason.into(), address: address.map(Hex), detail, scanned_frames: stack.scanned }
}

