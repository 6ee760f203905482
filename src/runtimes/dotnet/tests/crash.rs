//! Why a .NET process died (issue 18), against SOS and the runtime's own crash report, on every
//! .NET dump that has SOS's `pe` beside it (`samples/dotnet/dumps/*/*/sos/pe.txt`, and those
//! `samples/dotnet/make-dumps.sh` made here):
//! - every thread clrthreads shows with an exception has it in knot (same object), and its
//!   chain — type, message, HResult, each InnerException — and saved stack trace (SP, IP and the
//!   Function column: `module!Type.Method(args)+0xoffset`) equal `pe`'s (where the runtime stored
//!   ip - 1, `pe` prints some exceptions' frames plus one: either is taken); no other thread has one;
//! - the crash: its kind and thread are `expected.toml`'s `[sample.crash]`, the thread is the one
//!   `core.crashreport.json` marks crashed and names the same exception type, and the FailFast
//!   message is the program's own (which only its stderr shows: no SOS command prints it);
//! - createdump's `DIAGINFOHEADER` is found in every .NET dump (all are createdump's), and a
//!   dump taken from outside the process (no signal) reads no crash;
//! - the stack overflow's crashing stack is walked whole: past the thread's first managed
//!   frame, every SOS frame, the runtime's transition records never ahead of frame #0.

use crate::process::{Locator, Process};
use crate::runtimes::dotnet::crash::{self, CrashReading, DotnetCrashKind};
use crate::runtimes::dotnet::crash::exception::{ExceptionFrame, ManagedException, STEF_IP_ADJUSTED};
use std::collections::BTreeMap;
use std::path::Path;

fn locator(d: &knot_samples::dotnet::DotnetDump) -> Locator {
    Locator { sysroot: d.sysroot.clone(), search_dirs: d.search_dirs.clone(), ..Locator::default() }
}

fn read(d: &knot_samples::dotnet::DotnetDump) -> (Process, CrashReading) {
    let l = locator(d);
    let p = Process::open(&d.core, &l).unwrap_or_else(|e| panic!("{}: {e}", d.name()));
    let r = crash::read_alone(&p, &l).unwrap_or_else(|| panic!("{}: the runtime is not read", d.name()));
    (p, r)
}

fn text(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One `pe` block.
#[derive(Debug, Clone, PartialEq)]
struct Pe {
    type_name: String,
    message: Option<String>,
    hresult: u32,
    inner: Option<u64>,
    /// (SP, IP, Function).
    frames: Vec<(u64, u64, String)>,
}

fn parse_pe(text: &str) -> BTreeMap<u64, Pe> {
    let mut out = BTreeMap::new();
    for block in text.split("Exception object: ").skip(1) {
        let mut lines = block.lines();
        let addr = u64::from_str_radix(lines.next().unwrap_or("").trim(), 16).expect("exception address");
        let mut pe = Pe { type_name: String::new(), message: None, hresult: 0, inner: None, frames: Vec::new() };
        for line in lines {
            let field = |name: &str| line.strip_prefix(name).map(str::trim);
            if let Some(v) = field("Exception type:") {
                pe.type_name = v.to_string();
            } else if let Some(v) = field("Message:") {
                pe.message = (v != "<none>").then(|| v.to_string());
            } else if let Some(v) = field("HResult:") {
                pe.hresult = u32::from_str_radix(v, 16).expect("HResult");
            } else if let Some(v) = field("InnerException:") {
                pe.inner = v.split("Use printexception ").nth(1).and_then(|r| r.split_whitespace().next()).map(|a| u64::from_str_radix(a, 16).expect("inner address"));
            } else {
                let f: Vec<&str> = line.trim().splitn(3, ' ').collect();
                let hex = |s: &str| (s.len() == 16).then(|| u64::from_str_radix(s, 16).ok()).flatten();
                if let [sp, ip, function] = f[..]
                    && let (Some(sp), Some(ip)) = (hex(sp), hex(ip))
                {
                    pe.frames.push((sp, ip, function.to_string()));
                }
            }
        }
        out.insert(addr, pe);
    }
    out
}

/// clrthreads: OS tid → the Exception column's object, for threads that have one.
fn clrthreads_exceptions(text: &str) -> BTreeMap<u32, u64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() >= 12
            && let (Ok(tid), Ok(obj)) = (u32::from_str_radix(f[2], 16), u64::from_str_radix(f[11], 16))
            && f[11].len() == 16
        {
            out.insert(tid, obj);
        }
    }
    out
}

/// Managed thread names → OS tids (sos/thread-names.txt).
fn thread_names(text: &str) -> BTreeMap<String, u32> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let p: Vec<&str> = l.split_whitespace().collect();
            (p.len() >= 6).then(|| (p[5..].join(" "), p[3].parse().ok())).and_then(|(n, t)| Some((n, t?)))
        })
        .collect()
}

fn expected_crash(sample: &str) -> Option<toml::Value> {
    let text = text(&knot_samples::workspace_root().join("samples/dotnet/expected.toml"));
    let v: toml::Value = toml::from_str(&text).expect("expected.toml");
    v.get("sample")?.as_array()?.iter().find(|s| s.get("name").and_then(|n| n.as_str()) == Some(sample))?.get("crash").cloned()
}

fn compare_chain(name: &str, knot: &ManagedException, pe: &BTreeMap<u64, Pe>, failures: &mut Vec<String>) {
    let mut at = Some(knot.object);
    let mut k = Some(knot);
    while let Some(addr) = at {
        let Some(want) = pe.get(&addr) else {
            failures.push(format!("{name}: SOS printed no pe for {addr:#x}"));
            return;
        };
        let Some(got) = k else {
            failures.push(format!("{name}: knot's chain ends before {addr:#x} ({})", want.type_name));
            return;
        };
        if got.object != addr {
            failures.push(format!("{name}: knot's exception is {:#x}, SOS's {addr:#x}", got.object));
        }
        // Where the runtime stored ip - 1 (STEF_IP_ADJUSTED), SOS prints it as stored for some
        // exceptions and plus one for others: knot's frame is taken as SOS's when it is either.
        let got_frames: Vec<(u64, u64, String)> = got
            .stack
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let sos_ip = want.frames.get(i).map(|w| w.1);
                if f.flags & STEF_IP_ADJUSTED != 0 && sos_ip == Some(f.ip + 1) {
                    let shifted = ExceptionFrame { ip: f.ip + 1, offset: f.offset.map(|o| o + 1), ..f.clone() };
                    (f.sp, shifted.ip, shifted.pe_text())
                } else {
                    (f.sp, f.ip, f.pe_text())
                }
            })
            .collect();
        let got_pe = Pe { type_name: got.type_name.clone().unwrap_or_default(), message: got.message.clone(), hresult: got.hresult, inner: got.inner.as_ref().map(|i| i.object), frames: got_frames };
        if got_pe != *want {
            failures.push(format!("{name}: exception {addr:#x}\n    SOS:  {want:?}\n    knot: {got_pe:?} {:?} flags {:?}", got.problems, got.stack.iter().map(|f| f.flags).collect::<Vec<_>>()));
        }
        at = want.inner;
        k = got.inner.as_deref();
    }
    if k.is_some() {
        failures.push(format!("{name}: knot's chain is longer than SOS's"));
    }
}

#[test]
fn exceptions_equal_sos_pe_and_the_crash_is_the_runtimes() {
    let dumps = knot_samples::dotnet::dumps("sos/pe.txt", true);
    assert!(dumps.iter().any(|d| d.committed && d.sample == "failfast_exception"), "the committed crash dumps are missing");
    let mut failures = Vec::new();
    let mut compared = 0;
    for d in &dumps {
        let name = d.name();
        let (_, r) = read(d);
        let pe = parse_pe(&text(&d.dir.join("sos/pe.txt")));
        let sos = clrthreads_exceptions(&text(&d.dir.join("sos/clrthreads.txt")));
        let knot: BTreeMap<u32, &ManagedException> = r.thread_exceptions.iter().map(|t| (t.os_tid, &t.exception)).collect();
        if knot.keys().collect::<Vec<_>>() != sos.keys().collect::<Vec<_>>() {
            failures.push(format!("{name}: threads with an exception: SOS {:?}, knot {:?}", sos.keys(), knot.keys()));
        }
        for (tid, obj) in &sos {
            if let Some(e) = knot.get(tid) {
                if e.object != *obj {
                    failures.push(format!("{name}: thread {tid}: SOS's exception {obj:#x}, knot's {:#x}", e.object));
                }
                compare_chain(&format!("{name} thread {tid}"), e, &pe, &mut failures);
                compared += 1;
            }
        }
        assert!(r.diaginfo.is_some(), "{name}: createdump wrote this dump, but knot finds no DIAGINFOHEADER");

        // The crash.
        let Some(want) = expected_crash(&d.sample) else { continue };
        let names = thread_names(&text(&d.dir.join("sos/thread-names.txt")));
        let thread = want["thread"].as_str().expect("crash.thread");
        let tid = names[thread];
        let Some(c) = &r.crash else {
            failures.push(format!("{name}: knot reads no crash"));
            continue;
        };
        let kind = match c.kind {
            DotnetCrashKind::Failfast => "failfast",
            DotnetCrashKind::UnhandledException => "unhandled_exception",
            DotnetCrashKind::StackOverflow => "stack_overflow",
        };
        if kind != want["kind"].as_str().expect("crash.kind") || c.os_tid != tid {
            failures.push(format!("{name}: crash {kind} on {}, expected {} on {thread} ({tid})", c.os_tid, want["kind"]));
        }
        assert!(c.runtime_abort, "{name}: the runtime's own SIGABRT");
        // The runtime's crash report: the crashed thread and its exception's type.
        let report: serde_json::Value = serde_json::from_str(&text(&d.dir.join("core.crashreport.json"))).expect("crash report");
        let crashed = report["payload"]["threads"].as_array().expect("threads").iter().find(|t| t["crashed"] == "true").expect("a crashed thread");
        let report_tid = u32::from_str_radix(crashed["native_thread_id"].as_str().expect("tid").trim_start_matches("0x"), 16).expect("hex tid");
        let report_type = crashed["managed_exception_type"].as_str();
        if report_tid != c.os_tid || report_type != c.exception.as_ref().and_then(|e| e.type_name.as_deref()) {
            failures.push(format!("{name}: crash report says {report_type:?} on {report_tid}, knot {:?} on {}", c.exception.as_ref().map(|e| &e.type_name), c.os_tid));
        }
        let want_message = want.get("failfast_message").and_then(|m| m.as_str());
        if c.failfast_message.as_ref().map(|m| m.text.as_str()) != want_message {
            failures.push(format!("{name}: FailFast message {:?}, the program's is {want_message:?}", c.failfast_message));
        }
    }
    eprintln!("compared the exceptions of {compared} threads in {} dumps with SOS pe", dumps.len());
    assert!(compared >= 3, "too few exceptions compared");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_older_failfast_dump_reads_its_message_and_dumps_taken_from_outside_read_no_crash() {
    for d in knot_samples::dotnet::dumps("sos/clrthreads.txt", false) {
        let (p, r) = read(&d);
        assert!(r.diaginfo.is_some(), "{}: no DIAGINFOHEADER", d.name());
        match d.sample.as_str() {
            "failfast" => {
                let c = r.crash.as_ref().unwrap_or_else(|| panic!("{}: no crash", d.name()));
                assert_eq!(c.kind, DotnetCrashKind::Failfast, "{}", d.name());
                let m = c.failfast_message.as_ref().unwrap_or_else(|| panic!("{}: no FailFast message", d.name()));
                assert_eq!(m.text, "wedged: LedgerWorker and AuditWorker are deadlocked", "{}", d.name());
                assert!(c.exception.is_none(), "{}: FailFast(message) passes no exception", d.name());
            }
            _ if p.core.signal.is_none() => assert!(r.crash.is_none(), "{}: a dump taken from outside reads no crash", d.name()),
            _ => {}
        }
    }
}

#[test]
fn a_stack_overflow_is_walked_whole() {
    let dumps = knot_samples::dotnet::dumps("sos/clrstack-all.txt", true);
    let mut seen = 0;
    for d in dumps.iter().filter(|d| d.sample == "stack_overflow") {
        let l = locator(d);
        let p = Process::open(&d.core, &l).expect("core");
        let r = crate::report_for(&p, &crate::Options { locator: l, stacks_only: true, ..Default::default() });
        let crashed = p.core.threads.iter().find(|t| t.signalled).expect("the signalled thread");
        let t = r.threads.iter().find(|t| t.tid == crashed.tid).expect("its report");
        // With the machine's libc the walk ends at clone3's outermost CFI; the committed dump is
        // read without libc's file, so there it ends at clone3 for want of unwind data.
        assert!(t.stack_end.complete || d.committed && t.stack_end.reason == "no_caller", "{}: the walk stops: {:?}", d.name(), t.stack_end);
        assert_eq!(t.frames.iter().rev().find(|f| f.managed).and_then(|f| f.function.as_deref()), Some("System.Threading.Thread.StartCallback"), "{}", d.name());
        assert!(t.frames[0].transition.is_none(), "{}: frame #0 is a transition record: {:?}", d.name(), t.frames[0]);
        let managed = t.frames.iter().filter(|f| f.managed).count();
        let sos = text(&d.dir.join("sos/clrstack-all.txt"));
        let sos_frames = sos.split("OS Thread Id: ").find(|b| b.starts_with(&format!("{:#x}", crashed.tid))).expect("SOS's thread").lines().filter(|l| l.contains(" Knot.Samples.") || l.contains(" System.")).count();
        assert_eq!(managed, sos_frames, "{}: managed frames", d.name());
        assert!(managed > 8000, "{}: {managed} frames", d.name());
        seen += 1;
    }
    assert!(seen >= 1, "no stack overflow dump");
}

/// The whole report on each crash sample: `crash` is the runtime's reading (kind, thread, the
/// FailFast message marked as read from its frame, the exception with its recorded frames, the
/// recursion of a stack overflow), the verdict says crash (deadlock where the FailFast followed
/// one), and the text's first line after the header is the `Crash:` line naming the thread.
#[test]
fn the_report_says_the_runtimes_crash_first() {
    let mut seen = 0;
    for d in knot_samples::dotnet::dumps("sos/pe.txt", false) {
        let Some(want) = expected_crash(&d.sample) else { continue };
        let name = d.name();
        let l = locator(&d);
        let p = Process::open(&d.core, &l).expect("core");
        let r = crate::report_for(&p, &crate::Options { locator: l, ..Default::default() });
        let names = thread_names(&text(&d.dir.join("sos/thread-names.txt")));
        let thread = want["thread"].as_str().expect("thread");
        let c = r.crash.as_ref().unwrap_or_else(|| panic!("{name}: no crash"));
        let kind = serde_json::to_value(c.kind).expect("kind");
        assert_eq!(kind.as_str(), want["kind"].as_str(), "{name}: kind");
        assert_eq!(c.thread, Some(names[thread]), "{name}: thread");
        // A deadlock, or a stalled GC, stays the verdict over the crash it led to.
        let stalled = r.dotnet.as_ref().and_then(|d| d.gc.as_ref()).is_some_and(|g| g.stalled);
        let verdict = if !r.deadlocks.is_empty() { "deadlock" } else if stalled { "gc_stall" } else { "crash" };
        assert_eq!(serde_json::to_value(r.verdict).expect("verdict"), verdict, "{name}: verdict");
        match want.get("failfast_message").and_then(|m| m.as_str()) {
            Some(m) => {
                let got = c.message.as_ref().unwrap_or_else(|| panic!("{name}: no message"));
                assert_eq!((got.text.as_str(), got.source.as_str()), (m, crash::FAILFAST_MESSAGE_SOURCE), "{name}: message");
            }
            None => assert!(c.message.is_none(), "{name}: a message: {:?}", c.message),
        }
        // The exception: for FailFast the one passed to it (or the last thrown, which the
        // preallocated ExecutionEngineException wraps), as the runtime's crash report names it.
        let all: Vec<&toml::Value> = std::iter::once(&want["exception"]).chain(want["inner"].as_array().expect("inner")).collect();
        let top = if want["kind"].as_str() == Some("failfast") { all.get(1).copied() } else { Some(all[0]) };
        assert_eq!(c.exception.as_ref().map(|e| e.type_name.as_str()), top.and_then(|t| t["type"].as_str()), "{name}: exception type");
        if let (Some(e), Some(t)) = (&c.exception, top) {
            assert_eq!(e.hresult.map(|h| h.0), t["hresult"].as_integer().map(|h| h as u64), "{name}: hresult");
            assert!(e.stack.iter().all(|f| f.trust == crate::report::Trust::Recorded && f.managed), "{name}: recorded frames");
        }
        if want["kind"].as_str() == Some("stack_overflow") {
            let rec = c.recursion.as_ref().unwrap_or_else(|| panic!("{name}: no recursion"));
            let cycle: Vec<&str> = want["cycle"].as_array().expect("cycle").iter().filter_map(|v| v.as_str()).collect();
            let mut got = rec.cycle.clone();
            got.sort();
            let mut cyc: Vec<String> = cycle.iter().map(|s| s.to_string()).collect();
            cyc.sort();
            assert_eq!(got, cyc, "{name}: the cycle's frames");
            assert!(rec.repeats >= 2600, "{name}: {} repeats", rec.repeats);
        }
        // dotnet.exceptions: clrthreads' Exception column; dotnet.createdump: who wrote the dump.
        let dn = r.dotnet.as_ref().unwrap_or_else(|| panic!("{name}: no dotnet"));
        let sos = clrthreads_exceptions(&text(&d.dir.join("sos/clrthreads.txt")));
        let got: BTreeMap<u32, u64> = dn.exceptions.iter().map(|t| (t.tid, t.exception.address.map_or(0, |a| a.0))).collect();
        assert_eq!(got, sos, "{name}: dotnet.exceptions");
        assert!(dn.createdump.is_some_and(|h| h.version == 2), "{name}: dotnet.createdump {:?}", dn.createdump);
        let origin = c.origin.as_ref().and_then(|o| o.function.as_deref()).unwrap_or_else(|| panic!("{name}: no origin"));
        assert!(origin.starts_with("Knot.Samples."), "{name}: origin {origin}");
        let out = crate::report::text::render(&r, &Default::default());
        let first = out.lines().skip_while(|l| !l.is_empty()).find(|l| !l.is_empty()).unwrap_or("");
        assert!(first.starts_with("Crash:") && first.contains(&format!("\"{thread}\"")), "{name}: first line {first:?}");
        if let Some(m) = want.get("failfast_message").and_then(|m| m.as_str()) {
            assert!(first.contains(&format!("— \"{m}\" —")), "{name}: the FailFast message in {first:?}");
        }
        seen += 1;
    }
    assert!(seen >= 4, "{seen} crash samples");
}
