//! Why it died (issue 18): knot's `crash` against gdb's reading of the same kernel core
//! (`gdb-crash.txt`: `$_siginfo`, `x/i $pc`, `__abort_msg->msg`, `bt`) and the program's own
//! last words on stderr; the signature's stability across two dumps of one crash.

mod common;

use knot::report::{self, Report, Verdict};
use knot_samples::{DumpKind, SampleDump};
use serde_json::Value;

/// What each crash sample must read as, beside what gdb recorded.
struct Want {
    kind: &'static str,
    code_name: &'static str,
    address_kind: Option<&'static str>,
    access: Option<&'static str>,
    /// The origin frame's function.
    origin: Option<&'static str>,
    /// The recursion's cycle.
    cycle: Option<&'static str>,
    /// The C++ exception's type.
    exception: Option<&'static str>,
}

fn want(name: &str) -> Want {
    let w = |kind, code_name, address_kind, access, origin| Want { kind, code_name, address_kind, access, origin, cycle: None, exception: None };
    match name {
        "crash_null" => w("fault", "SEGV_MAPERR", Some("null_page"), Some("read"), Some("parse_qty")),
        "crash_readonly" => w("fault", "SEGV_ACCERR", Some("read_only"), Some("write"), Some("shout")),
        "crash_badfn" => w("fault", "SEGV_ACCERR", Some("not_executable"), Some("execute"), Some("dispatch")),
        "crash_overflow" => Want { cycle: Some("descend"), ..w("stack_overflow", "SEGV_ACCERR", Some("stack_guard"), Some("write"), Some("descend")) },
        "crash_divzero" => w("fault", "FPE_INTDIV", None, Some("read"), Some("per_item")),
        "crash_assert" => w("abort", "SI_TKILL", None, None, Some("settle")),
        "crash_double_free" => w("abort", "SI_TKILL", None, None, Some("release")),
        "crash_sigbus" => w("fault", "BUS_ADRERR", Some("past_end_of_file"), Some("read"), Some("read_entry")),
        "crash_cxx" => Want { exception: Some("LedgerError"), ..w("abort", "SI_TKILL", None, None, Some("load_ledger")) },
        "crash_rust_panic" => w("abort", "SI_TKILL", None, None, Some("crash_rust_panic::settle")),
        "idle_join" => w("killed", "SI_USER", None, None, None),
        // Issue 30, item 1: the crash is in the library whose two PT_LOADs map file offset 0.
        "old_layout" => w("fault", "SEGV_MAPERR", Some("null_page"), Some("read"), Some("libfunc")),
        // Issue 42, item 6: a return to an overwritten return address; no frame of the program
        // is where it happened (see `a_smashed_stack_is_said_as_one`).
        "smashed_stack" => w("fault", "SEGV_MAPERR", Some("unmapped"), None, None),
        other => panic!("no expectation for {other}"),
    }
}

/// `mov eax,DWORD PTR [rax+0x2c]` (gdb) and `mov eax, dword [rax + 0x2c]` (yaxpeax) alike.
fn instruction_key(text: &str) -> String {
    text.to_lowercase().replace("ptr", "").chars().filter(|c| !c.is_whitespace()).collect()
}

fn s(v: &Value) -> Option<&str> {
    v.as_str()
}

fn hex(v: &Value) -> Option<u64> {
    v.as_str().and_then(|h| u64::from_str_radix(h.trim_start_matches("0x"), 16).ok())
}

/// Every difference between knot's crash and gdb's reading (and the expectation).
fn differences(dump: &SampleDump, report: &Report) -> Vec<String> {
    let name = dump.name.as_str();
    let want = want(name);
    let g = dump.gdb_crash().unwrap_or_else(|e| panic!("{name}: {e:#}"));
    let mut diffs = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            diffs.push(what);
        }
    };
    let Some(crash) = report.crash.as_ref() else { return vec![format!("{name}: no crash read")] };
    let c = serde_json::to_value(crash).expect("crash serializes");
    check(s(&c["kind"]) == Some(want.kind), format!("kind {} (want {})", c["kind"], want.kind));
    check(c["signal"]["number"].as_i64() == g.signo.map(i64::from), format!("signal {} vs gdb si_signo {:?}", c["signal"]["number"], g.signo));
    check(c["signal"]["code"].as_i64() == g.code.map(i64::from), format!("si_code {} vs gdb {:?}", c["signal"]["code"], g.code));
    check(s(&c["signal"]["code_name"]) == Some(want.code_name), format!("code_name {} (want {})", c["signal"]["code_name"], want.code_name));
    if matches!(g.signo, Some(7 | 8 | 11)) {
        check(hex(&c["address"]) == g.addr, format!("address {} vs gdb si_addr {:?}", c["address"], g.addr.map(|a| format!("{a:#x}"))));
        let i = &c["instruction"];
        // Where the pc holds no code (a smashed return), the pc is the overwritten return address.
        let pc = hex(&i["address"]).or_else(|| hex(&c["overwritten_return"]["value"]));
        check(pc == g.pc, format!("instruction at {} vs gdb $pc {:?}", i["address"], g.pc));
        check(
            s(&i["text"]).map(instruction_key) == g.instruction.as_deref().map(instruction_key),
            format!("instruction {} vs gdb {:?}", i["text"], g.instruction),
        );
    }
    if want.kind == "killed" {
        check(c["signal"]["sender_pid"].as_u64() == g.pid.map(u64::from), format!("sender {} vs gdb si_pid {:?}", c["signal"]["sender_pid"], g.pid));
        check(report.verdict != Verdict::Crash, "a kill from outside is no crash verdict".into());
    } else {
        check(report.verdict == Verdict::Crash, format!("verdict {:?}", report.verdict));
    }
    check(s(&c["address_kind"]) == want.address_kind, format!("address_kind {} (want {:?})", c["address_kind"], want.address_kind));
    check(s(&c["instruction"]["access"]) == want.access, format!("access {} (want {:?})", c["instruction"]["access"], want.access));
    // glibc's message, exactly as gdb prints __abort_msg->msg.
    match g.abort_msg.as_deref().filter(|_| want.kind == "abort") {
        Some(msg) => check(s(&c["message"]["text"]) == Some(msg.trim_end()), format!("message {} vs gdb __abort_msg {msg:?}", c["message"])),
        None => check(s(&c["message"]["source"]) != Some("glibc_abort_msg"), format!("message {} where gdb read no __abort_msg", c["message"])),
    }
    // The origin is the frame gdb shows at the same position.
    let origin = &c["origin"];
    check(s(&origin["function"]) == want.origin, format!("origin {} (want {:?})", origin["function"], want.origin));
    if let (Some(i), Some(f)) = (origin["index"].as_u64(), s(&origin["function"])) {
        let at = g.bt.get(i as usize).map(String::as_str);
        check(at == Some(f), format!("origin #{i} {f} is {at:?} in gdb's bt"));
    }
    if let Some(cycle) = want.cycle {
        let r = &c["recursion"];
        check(r["cycle"] == serde_json::json!([cycle]), format!("recursion cycle {}", r["cycle"]));
        let gdb_frames = g.bt.iter().filter(|f| f.as_str() == cycle).count() as u64;
        check(r["frames"].as_u64() == Some(gdb_frames), format!("recursion frames {} vs {gdb_frames} {cycle} frames in gdb's bt", r["frames"]));
    }
    if let Some(ty) = want.exception {
        check(s(&c["exception"]["type"]) == Some(ty), format!("exception {}", c["exception"]));
        // libstdc++'s terminate handler printed the same type and what().
        if let Some(err) = dump.program_stderr() {
            check(err.contains(&format!("throwing an instance of '{ty}'")), format!("stderr names another type: {err}"));
            let what = s(&c["exception"]["message"]).unwrap_or("<none>");
            check(err.contains(&format!("what():  {what}")), format!("what() {what:?} is not in stderr: {err}"));
        }
    }
    diffs
}

fn assert_reads_like_gdb(dump: &SampleDump) {
    let report = common::analyze(dump);
    let diffs = differences(dump, &report);
    assert!(diffs.is_empty(), "{} ({}): knot's crash differs:\n  {}", dump.name, dump.core.display(), diffs.join("\n  "));
    // Said first: the line after the header, and the crashed thread's stack before any other.
    let text = report::text::render(&report, &Default::default());
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[2].starts_with("Crash: "), "{}: {text}", dump.name);
    if let Some(tid) = report.crash.as_ref().filter(|c| c.kind != knot::report::CrashKind::Killed).and_then(|c| c.thread) {
        let first_stack = lines.iter().position(|l| l.starts_with("Thread ") || l.starts_with("Owner: ") || l.trim_start().starts_with("1 thread"));
        assert!(first_stack.is_some_and(|i| lines[i].starts_with(&format!("Thread {tid}"))), "{}: the crashed thread's stack is not first:\n{text}", dump.name);
    }
}

macro_rules! made_crash_reads_like_gdb {
    ($($name:ident),* $(,)?) => {$(
        #[test]
        fn $name() {
            if let Some(dump) = common::made(stringify!($name), DumpKind::Kernel) {
                assert_reads_like_gdb(&dump);
            }
        }
    )*};
}

crash_samples!(made_crash_reads_like_gdb);

#[test]
fn committed_crash_dumps_read_like_gdb() {
    for &(name, kind) in knot_samples::COMMITTED_SET {
        if knot_samples::crash_samples().iter().any(|s| s.name == name) {
            assert_reads_like_gdb(&common::committed(name, kind));
        }
    }
}

/// Issue 33: the null dereference made on arm64 — signal, code, fault address, the faulting
/// `ldr` decoded as gdb prints it, its access and origin.
#[test]
fn the_committed_aarch64_crash_reads_like_gdb() {
    assert_reads_like_gdb(&common::committed_aarch64("crash_null", DumpKind::Kernel));
}

/// Issue 42, item 6: copy_label's strcpy ran over its own return address with 'A's (-O2, no
/// stack protector); its `ret` jumped to 0x414141414141. The crash names the overwritten return
/// address and the slot that holds it; the stack ends there, incomplete — no frame is made up
/// by scanning (gdb: `#0 0x0000414141414141 in ?? ()`, then a bogus `0x0`).
#[test]
fn a_smashed_stack_is_said_as_one() {
    let dump = common::committed("smashed_stack", DumpKind::Kernel);
    let report = common::analyze(&dump);
    let g = dump.gdb_crash().expect("gdb's reading");
    let c = report.crash.as_ref().expect("a crash");
    let r = c.overwritten_return.expect("the overwritten return address");
    assert_eq!((r.value.0, g.pc), (0x4141_4141_4141, Some(0x4141_4141_4141)));
    assert_eq!(c.address.map(|a| a.0), g.addr);
    assert!(c.origin.is_none(), "no frame of the program is where it happened: {:?}", c.origin);
    assert_eq!(c.signature, "fault:SIGSEGV | overwritten_return");
    let t = report.threads.iter().find(|t| Some(t.tid) == c.thread).expect("the crashed thread");
    assert_eq!(t.frames.len(), 1, "{:#?}", t.frames);
    assert!(!t.stack_end.complete);
    assert_eq!(t.stack_end.reason, "smashed_return");
    assert_eq!(t.stack_end.scanned_frames, 0);
    let text = report::text::render(&report, &Default::default());
    assert!(text.contains(&format!("execution at 0x414141414141 unmapped — a return to an overwritten return address: the stack slot it returned from, {}, holds 0x414141414141", r.slot)), "{text}");
}

#[test]
fn a_stack_overflow_prints_its_cycle_once() {
    let dump = common::committed("crash_overflow", DumpKind::Kernel);
    let report = common::analyze(&dump);
    let text = report::text::render(&report, &Default::default());
    let descend = text.lines().filter(|l| l.contains(" descend (")).count();
    assert!(descend <= 2, "descend printed {descend} times:\n{text}");
    assert!(text.contains("repeats 3221 more times") || text.contains("more times ("), "{text}");
    assert!(text.lines().count() < 80, "{} lines", text.lines().count());
}

#[test]
fn a_gcore_of_a_live_process_records_no_crash_and_a_join_on_a_sleeper_is_idle() {
    let Some(dump) = common::made("idle_join", DumpKind::Gcore) else { return };
    let report = common::analyze(&dump);
    assert!(report.crash.is_none(), "{:?}", report.crash);
    assert_eq!(report.verdict, Verdict::Idle);
    let json: Value = serde_json::from_str(&report::to_json(&report)).expect("json");
    assert!(json["crash"].is_null());
}

#[test]
fn the_sigquit_from_outside_reads_killed_and_idle() {
    let dump = common::committed("idle_join", DumpKind::Kernel);
    let report = common::analyze(&dump);
    assert_eq!(report.verdict, Verdict::Idle);
    assert_eq!(report.crash.as_ref().map(|c| c.kind), Some(knot::report::CrashKind::Killed));
}

fn signature(name: &str, args: &[&str]) -> Option<String> {
    let dump = match knot_samples::ensure_with_args(name, DumpKind::Kernel, args) {
        knot_samples::Availability::Ready(d) => d,
        knot_samples::Availability::Skipped(why) => {
            knot_samples::skipped(&format!("skipping {name}: {why}"));
            return None;
        }
    };
    common::analyze(&dump).crash.map(|c| c.signature)
}

#[test]
fn the_signature_is_the_same_for_the_same_crash_and_differs_for_another() {
    for name in ["crash_null", "crash_overflow", "crash_assert"] {
        let (Some(a), Some(b)) = (signature(name, &[]), signature(name, &["again"])) else { return };
        assert_eq!(a, b, "{name}: two dumps of one crash");
        // No addresses, tids or line numbers in it.
        assert!(!a.contains("0x") && !a.chars().any(|c| c.is_ascii_digit()), "{name}: {a}");
    }
    let null = signature("crash_null", &[]);
    let readonly = signature("crash_readonly", &[]);
    assert_ne!(null, readonly);
    // The committed dump of the same crash, made on another day, agrees too.
    let committed = common::analyze(&common::committed("crash_null", DumpKind::Kernel)).crash.map(|c| c.signature);
    assert_eq!(committed, null);
}

#[test]
fn the_html_page_shows_the_crash_and_its_stack_at_the_top() {
    let dump = common::committed("crash_null", DumpKind::Kernel);
    let page = report::html::render(&common::analyze(&dump));
    let crash = page.find("id=\"crash\"").expect("a crash section");
    let verdict = page.find("Verdict:</span>").expect("the verdict");
    assert!(crash < verdict, "the crash comes before the verdict");
    let parse_qty = page.find(">parse_qty<").expect("the crashed thread's frame");
    assert!(parse_qty < verdict, "the crashed thread's stack is at the top");
    assert!(page[crash..verdict].contains("rax = 0, offset 0x2c"));
}
