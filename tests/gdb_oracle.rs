//! knot's stacks against gdb's `thread apply all bt` on the same dump: for every thread, the
//! same functions in the same order, inlined frames included.

mod common;

use knot::report::Report;
use knot_samples::{gdb_oracle, DumpKind, SampleDump};

/// A function name as both tools are compared: generic arguments (`Mutex<i32>::lock<i32>`) are
/// spelled differently by gdb and the demanglers, and do not change which function a frame is.
fn normalize(name: &str) -> String {
    // gdb keeps the empty parameter list of a function whose template argument list is empty
    // (`wait_quietly<>()`, where c++filt's `void wait_quietly<>()` is `wait_quietly<>` without its
    // return type and parameters).
    let name = name.strip_suffix("()").filter(|n| n.ends_with("<>")).unwrap_or(name);
    let mut out = String::with_capacity(name.len());
    let mut depth = 0usize;
    for c in name.chars() {
        let after_ident = out.chars().last().is_some_and(|p| p.is_alphanumeric() || p == '_' || p == '}');
        match c {
            '<' if depth > 0 || after_ident => depth += 1,
            '>' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// knot's frames as gdb prints them: `??` for unknown, `<signal handler called>` for a signal
/// trampoline, and nothing past the program's main where gdb stops there (its default
/// `backtrace past-main off`; for Rust, gdb's main is the user's `crate::main`).
fn knot_functions(report: &Report, tid: u32, gdb_last: Option<&str>) -> Option<Vec<String>> {
    let t = report.threads.iter().find(|t| t.tid == tid)?;
    let mut out = Vec::new();
    for f in &t.frames {
        let name = if f.signal_frame { "<signal handler called>".to_string() } else { f.function.clone().unwrap_or_else(|| "??".into()) };
        // gdb stops at the main it knows (a Rust release build's it does not: it goes on to
        // `_start`, and so does knot).
        let is_main = (name == "main" || name.ends_with("::main")) && gdb_last == Some(name.as_str());
        out.push(name);
        if is_main {
            break;
        }
    }
    Some(out)
}

/// Samples whose stacks run through code gdb cannot unwind (generated code without CFI; a return
/// to an overwritten return address, where gdb's bogus `0x0` caller is no frame).
const BEYOND_GDB: &[&str] = &["generated_code", "smashed_stack"];

/// Frames gdb shows that knot does not yet, each with why: (sample, function). Only these are
/// left out of gdb's reading, and only where knot lacks them; every other frame is compared.
/// - `py_lock_abba`, `__new_sem_wait`: with python3.11-dbg installed, gdb puts back a tail-call
///   frame between PyThread_acquire_lock_timed and __new_sem_wait_slow64 from Python's DWARF call
///   site, whose target is a declaration of `sem_wait` in another module (libc); knot's
///   tail-call search does not find that chain yet (without python3-dbg neither has the frame).
const KNOWN_GAPS: &[(&str, &str)] = &[("py_lock_abba", "__new_sem_wait")];

/// Every difference between knot's reading and gdb's, as readable lines.
fn differences(dump: &SampleDump) -> Vec<String> {
    let report = common::analyze(dump);
    let gdb = dump.gdb_threads().unwrap_or_else(|e| panic!("oracle for {}: {e:#}", dump.name));
    assert!(!gdb.is_empty(), "gdb oracle {} lists no threads", dump.gdb_bt.display());
    let mut diffs = Vec::new();
    // Of a process in a PID namespace of its own dumped from the host, gdb's libthread_db lists
    // the threads again in the process's own numbering, without registers: those are the
    // numbers knot reads the threads by (`own_tid`), not threads of their own.
    let (phantoms, gdb): (Vec<_>, Vec<_>) = gdb.into_iter().partition(|g| g.unavailable && !report.threads.iter().any(|t| t.tid == g.lwp));
    for p in &phantoms {
        if !report.threads.iter().any(|t| t.own_tid == Some(p.lwp)) {
            diffs.push(format!("gdb lists LWP {} without registers; knot has no thread numbered so by its process", p.lwp));
        }
    }
    if gdb.len() != report.threads.len() {
        diffs.push(format!("gdb sees {} threads, knot {}", gdb.len(), report.threads.len()));
    }
    for g in &gdb {
        let Some(k) = knot_functions(&report, g.lwp, g.functions.last().map(String::as_str)) else {
            diffs.push(format!("thread {}: in gdb's reading, missing from knot's", g.lwp));
            continue;
        };
        let mut have: Vec<String> = k.iter().map(|f| normalize(f)).collect();
        let gap = |f: &String| KNOWN_GAPS.iter().any(|&(sample, function)| sample == dump.name && function == f) && !have.contains(f);
        let want: Vec<String> = g.functions.iter().map(|f| normalize(f)).filter(|f| !gap(f)).collect();
        // Where gdb gives up on code nobody describes (generated code: `?? ()`, then a bogus
        // `0x0`), knot is compared up to that frame: it goes on by scanning, checked elsewhere
        // against the program's own structure (`generated_code_is_unwound_past_its_stale_return_addresses`).
        if BEYOND_GDB.contains(&dump.name.as_str())
            && let Some(at) = want.iter().position(|f| f == "??")
            && want[at..].iter().all(|f| f == "??")
        {
            have.truncate(at + 1);
            let want = &want[..=at];
            if want != have.as_slice() {
                diffs.push(format!("thread {}:\n      gdb:  {}\n      knot: {}", g.lwp, want.join(" ← "), have.join(" ← ")));
            }
            continue;
        }
        if want != have {
            diffs.push(format!("thread {}:\n      gdb:  {}\n      knot: {}", g.lwp, want.join(" ← "), have.join(" ← ")));
        }
    }
    diffs
}

fn assert_matches_gdb(dump: &SampleDump) {
    let diffs = differences(dump);
    assert!(
        diffs.is_empty(),
        "{} ({}, {}): knot's stacks differ from gdb's:\n  {}",
        dump.name,
        dump.kind,
        dump.core.display(),
        diffs.join("\n  ")
    );
}

/// Issue 33: every frame of every thread of the dumps made on arm64, as gdb reads them there.
#[test]
fn committed_aarch64_dumps_match_gdb() {
    for &(name, kind) in knot_samples::COMMITTED_AARCH64_SET {
        assert_matches_gdb(&common::committed_aarch64(name, kind));
    }
}

/// Issue 30, item 3: the thread stopped in generated code (no CFI, no frame pointer) whose frame
/// holds a stale return address into `stamp_helper` (from a call it made earlier) is unwound past
/// it to its true caller, `run_generated`, and on to the thread's start — never through the
/// stale `stamp_helper` and the generated code again; the stack stays marked incomplete.
/// (gdb stops at the generated code: `?? ()`, then `0x0`.)
#[test]
fn generated_code_is_unwound_past_its_stale_return_addresses() {
    let dump = common::committed("generated_code", DumpKind::Kernel);
    let report = common::analyze(&dump);
    let t = report
        .threads
        .iter()
        .find(|t| t.frames.iter().any(|f| f.function.as_deref() == Some("block_forever")))
        .expect("the thread in the generated code");
    let names: Vec<&str> = t.frames.iter().map(|f| f.function.as_deref().unwrap_or("??")).collect();
    assert_eq!(
        names,
        ["__libc_pause", "sleep_forever", "block_forever", "??", "run_generated", "generated_thread", "start_thread", "clone3"],
        "{:#?}",
        t.frames
    );
    assert!(!t.stack_end.complete && t.stack_end.scanned_frames > 0, "the scan is said: {:?}", t.stack_end);
}

#[test]
fn committed_dumps_match_gdb() {
    for &(name, kind) in knot_samples::COMMITTED_SET {
        assert_matches_gdb(&common::committed(name, kind));
    }
}

macro_rules! made_sample_matches_gdb {
    ($($name:ident),* $(,)?) => {$(
        #[test]
        fn $name() {
            for kind in DumpKind::ALL {
                if let Some(dump) = common::made(stringify!($name), kind) {
                    assert_matches_gdb(&dump);
                }
            }
        }
    )*};
}

native_samples!(made_sample_matches_gdb);
crash_samples!(made_sample_matches_gdb);

native_samples!(sample_names);

#[test]
fn every_sample_in_the_catalogue_has_an_oracle_test() {
    for spec in knot_samples::native_samples() {
        assert!(NATIVE_SAMPLE_NAMES.contains(&spec.name), "sample {} has no gdb-oracle test", spec.name);
    }
}

#[test]
fn normalization_only_touches_spelling() {
    assert_eq!(normalize("std::sync::poison::mutex::Mutex<i32>::lock<i32>"), "std::sync::poison::mutex::Mutex::lock");
    assert_eq!(normalize("std::thread::spawn_unchecked::{closure#1}"), "std::thread::spawn_unchecked::{closure#1}");
    assert_eq!(normalize("<T as core::ops::FnOnce>::call_once"), "<T as core::ops::FnOnce>::call_once");
    assert_ne!(normalize("worker_ab"), normalize("worker_ba"));
    assert_eq!(normalize("wait_quietly<>()"), normalize("wait_quietly<>"));
    let _ = gdb_oracle::parse("");
}

/// Issue 42, item 7: C++ template names as gdb (and c++filt) print them — integer arguments as
/// literals with their type's suffix (`std::ratio<3600l, 1l>`, `_M_invoke<0ul>`,
/// `take_all<0ul, 1ul>`), an empty pack leaving no stray `, >` (`std::__invoke_impl<void, void
/// (*)()>`): every frame's full name, generics included, equal to gdb's. gdb alone keeps the
/// empty parameter list of `wait_quietly<>()` in the function's name.
#[test]
fn cpp_template_names_read_as_gdb_prints_them() {
    let dump = common::committed("cxx_templates", DumpKind::Kernel);
    let report = common::analyze(&dump);
    let gdb = dump.gdb_threads().expect("gdb's reading");
    let mut templates = 0;
    for g in &gdb {
        let k = knot_functions(&report, g.lwp, g.functions.last().map(String::as_str)).expect("the thread");
        assert_eq!(k.len(), g.functions.len(), "thread {}: {k:?} vs {:?}", g.lwp, g.functions);
        for (have, want) in k.iter().zip(&g.functions) {
            let want = if have.ends_with("<>") { want.strip_suffix("()").unwrap_or(want) } else { want.as_str() };
            assert_eq!(have, want, "thread {}", g.lwp);
            templates += usize::from(want.contains('<'));
        }
    }
    assert!(templates >= 20, "the sample's frames are templates: {templates}");
    let all: Vec<&str> = report.threads.iter().flat_map(|t| t.frames.iter()).filter_map(|f| f.function.as_deref()).collect();
    for name in ["hold_for<long, std::ratio<3600l, 1l> >", "take_all<0ul, 1ul>", "wait_quietly<>", "std::__invoke_impl<void, void (*)()>"] {
        assert!(all.contains(&name), "{name} in {all:?}");
    }
    assert!(!all.iter().any(|n| n.contains(", >") || n.contains("(long)") || n.contains("(unsigned long)")), "{all:?}");
}
