//! `knot pid`: a live wedged process read without a dump gives the same owners, waiters, cycles
//! and stacks as a gcore dump of that very process; the process runs on unharmed and untraced,
//! also when knot fails or is interrupted while it holds it; and knot refuses, with status 4,
//! what it cannot read.
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use knot_samples::LiveSample;
use serde_json::{json, Value};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const EXIT_REFUSED: i32 = 4;
const EXIT_INTERRUPTED: i32 = 130;

/// Whether this machine lets knot trace a process it did not start (ptrace_scope, capabilities,
/// seccomp): asked once, of a child of this test.
fn can_trace() -> bool {
    static ANSWER: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ANSWER.get_or_init(|| {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let out = knot().args(["pid", &child.id().to_string(), "--stacks-only"]).output().unwrap();
        let _ = child.kill();
        let _ = child.wait();
        let refused = out.status.code() == Some(EXIT_REFUSED) && String::from_utf8_lossy(&out.stderr).contains("not permitted");
        if refused {
            knot_samples::skipped(&format!("skipping: ptrace is not permitted here: {}", String::from_utf8_lossy(&out.stderr)));
        }
        !refused
    })
}

fn knot() -> Command {
    Command::new(env!("CARGO_BIN_EXE_knot"))
}

/// The arguments that give knot the files gdb was given for this sample.
fn file_args(s: &LiveSample) -> Vec<String> {
    let mut a = Vec::new();
    if let Some(d) = &s.built.debug_dir {
        a.push(format!("--debug-dir={}", d.display()));
    }
    a
}

fn json_of(out: &Output, what: &str) -> Value {
    assert!(out.status.success(), "{what}: {}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{what}: not JSON ({e})"))
}

fn knot_pid_json(s: &LiveSample, extra: &[&str]) -> Value {
    let out = knot().arg("pid").arg(s.pid().to_string()).args(["--format", "json"]).args(file_args(s)).args(extra).output().unwrap();
    json_of(&out, &format!("knot pid {} ({})", s.pid(), s.name))
}

fn knot_analyze_json(s: &LiveSample, core: &std::path::Path) -> Value {
    let out = knot().arg("analyze").arg(core).args(["--format", "json"]).args(file_args(s)).output().unwrap();
    json_of(&out, &format!("knot analyze {}", core.display()))
}

/// Each object of the array `a` without its `key`.
fn without(a: &Value, key: &str) -> Vec<Value> {
    a.as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let mut o = o.clone();
            o.as_object_mut().unwrap().remove(key);
            o
        })
        .collect()
}

/// What must agree between two readings of one process: the verdict, every cycle (its threads,
/// locks, certainty and signature), every lock (all but the evidence text, which names where
/// bytes were read), each thread's state, lock and stack, and the groups. Not the names (a dump
/// records only the main thread's, so a cycle's description differs where threads are named)
/// nor modules.
fn facts(r: &Value) -> Value {
    let locks = without(&r["locks"], "evidence");
    let mut threads: Vec<Value> = r["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let frames: Vec<Value> = t["frames"].as_array().unwrap().iter().map(|f| json!([f["ip"], f["function"], f["file"], f["line"], f["inlined"], f["trust"]])).collect();
            json!({"tid": t["tid"], "state": t["state"], "blocked_on": t["blocked_on"], "stack_end": t["stack_end"]["reason"], "frames": frames})
        })
        .collect();
    threads.sort_by_key(|t| t["tid"].as_u64());
    let mut groups: Vec<Vec<u64>> = r["groups"].as_array().unwrap().iter().map(|g| g["tids"].as_array().unwrap().iter().filter_map(Value::as_u64).collect()).collect();
    groups.sort();
    // A cycle's description names its threads, which only the live reading knows.
    let deadlocks = without(&r["deadlocks"], "description");
    json!({"verdict": r["verdict"], "deadlocks": deadlocks, "locks": locks, "threads": threads, "groups": groups})
}

/// The live report validates against the committed schema (its `live` part is additive).
fn assert_matches_schema(report: &Value) {
    let path = knot_samples::workspace_root().join(format!("docs/schema/report-v{}.schema.json", knot::report::SCHEMA_VERSION));
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let v = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = v.iter_errors(report).map(|e| format!("{e} at {}", e.instance_path())).take(5).collect();
    assert!(errors.is_empty(), "the live JSON report does not match its schema: {errors:#?}");
    assert!(schema["$defs"]["LiveReport"].is_object(), "the schema describes the live part");
}

/// `State:` and `TracerPid:` of a process.
fn status(pid: u32) -> (String, u32) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |k: &str| s.lines().find_map(|l| l.strip_prefix(k)).unwrap_or("").trim().to_string();
    (field("State:"), field("TracerPid:").parse().unwrap_or(u32::MAX))
}

fn assert_running_untraced(pid: u32, what: &str) {
    // The kernel may need a moment to put woken threads back to sleep.
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let (state, tracer) = status(pid);
        let stopped = state.starts_with('t') || state.starts_with('T');
        if !stopped && tracer == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: process {pid} is left {state:?} with TracerPid {tracer}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn same_as_its_gcore(name: &str) {
    if !can_trace() {
        return;
    }
    if name == "relative_dlopen" {
        // It dlopen()s ./librelative_plugin.so relative to the directory its maker runs it in.
        knot_samples::skipped("skipping relative_dlopen live: it dlopen()s its plugin by a path relative to the maker's directory");
        return;
    }
    let Some(sample) = knot_samples::start_live(name, knot_samples::find_sample(name).unwrap().args).unwrap() else { return };
    let before = sample.syscalls().unwrap();
    let live = knot_pid_json(&sample, &[]);
    assert_running_untraced(sample.pid(), name);
    let after = sample.syscalls().unwrap();
    assert!(knot_samples::still_in_the_same_calls(&before, &after), "{name}: every thread sleeps in the call it slept in before: {before:?}, then {after:?}");
    assert_eq!(live["live"]["pid"], sample.pid());
    assert_eq!(live["live"]["threads"].as_u64(), Some(before.len() as u64), "{name}: every thread was read");
    assert!(live["live"]["pause_ms"].as_f64().is_some_and(|p| p > 0.0), "{name}: the pause is measured");

    let core = sample.gcore().unwrap();
    let dump = knot_analyze_json(&sample, &core);
    assert_eq!(facts(&live), facts(&dump), "{name}: the live reading and the gcore dump of the same process differ");
    assert!(dump.get("live").is_none(), "a dump's report has no live part");
    assert_running_untraced(sample.pid(), name);
}

macro_rules! live_equals_gcore {
    ($($name:ident),* $(,)?) => {$(
        #[test]
        fn $name() {
            same_as_its_gcore(stringify!($name));
        }
    )*};
}

native_samples!(live_equals_gcore);

#[test]
fn the_core_it_writes_reads_back_to_the_same_report() {
    if !can_trace() {
        return;
    }
    let Some(sample) = knot_samples::start_live("abba", &[]).unwrap() else { return };
    let dir = tempfile::tempdir().unwrap();
    let core = dir.path().join("abba.core");
    let live = knot_pid_json(&sample, &["--core", core.to_str().unwrap()]);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&core).unwrap().permissions().mode() & 0o777, 0o600, "the core is private to its owner");
    let again = knot_analyze_json(&sample, &core);
    assert_eq!(facts(&again), facts(&live));
    assert_eq!(again["live"], live["live"], "the capture (pause, threads, bytes) is in the core");
    let names = |r: &Value| r["threads"].as_array().unwrap().iter().map(|t| t["name"].clone()).collect::<Vec<_>>();
    assert_eq!(names(&again), names(&live), "thread names come from the core's KNOT note");
    assert!(names(&live).iter().all(|n| n.is_string()), "every thread has its name: {:?}", names(&live));
    assert_eq!(again["verdict"], "deadlock");
    assert_matches_schema(&live);

    // An existing file is never overwritten.
    let out = knot().args(["pid", &sample.pid().to_string(), "--core"]).arg(&core).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot create"), "{}", String::from_utf8_lossy(&out.stderr));
    assert_running_untraced(sample.pid(), "abba");
}

#[test]
fn thread_names_appear_in_the_text_report_with_the_pause() {
    if !can_trace() {
        return;
    }
    let Some(sample) = knot_samples::start_live("cycle3", &[]).unwrap() else { return };
    let out = knot().args(["pid", &sample.pid().to_string(), "--color=never"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let first: Vec<&str> = text.lines().take(2).collect();
    assert!(first[0].starts_with(&format!("/proc/{}: pid {}", sample.pid(), sample.pid())), "{text}");
    assert!(first[1].starts_with(&format!("Live: process {} was stopped for ", sample.pid())) && first[1].contains(" ms "), "{text}");
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", sample.pid())).unwrap();
    assert!(text.contains(&format!("\"{}\"", comm.trim())), "the main thread's name: {text}");
}

/// A process that prints a growing count every 10 ms: proof that it runs on.
fn ticker() -> Child {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "i=0; while :; do i=$((i+1)); echo $i; sleep 0.01; done"]).stdout(Stdio::piped()).stderr(Stdio::null());
    // SAFETY: prctl is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd.spawn().unwrap()
}

/// Reads the ticker's output for a while: its last count.
fn ticks_after(child: &mut Child, wait: Duration) -> u64 {
    use std::io::Read;
    let out = child.stdout.as_mut().unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(out);
    // SAFETY: making our end of the pipe non-blocking.
    unsafe { libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK) };
    std::thread::sleep(wait);
    let mut text = String::new();
    let mut buf = [0u8; 65536];
    while let Ok(n) = out.read(&mut buf) {
        if n == 0 {
            break;
        }
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    text.lines().filter_map(|l| l.trim().parse().ok()).next_back().unwrap_or(0)
}

/// knot held `pid` (every thread traced by knot and stopped) within the time given.
fn wait_until_held(pid: u32, knot_pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (state, tracer) = status(pid);
        if tracer == knot_pid && state.starts_with('t') {
            return;
        }
        assert!(Instant::now() < deadline, "knot never held {pid}: {state:?}, TracerPid {tracer}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn interrupted_by(signal: i32) {
    let mut target = ticker();
    let pid = target.id();
    let first = ticks_after(&mut target, Duration::from_millis(100));
    let mut k = knot().args(["pid", &pid.to_string()]).env("KNOT_TEST_PAUSE_AFTER_ATTACH_MS", "20000").stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    wait_until_held(pid, k.id());
    // SAFETY: signalling our own child.
    unsafe { libc::kill(k.id() as i32, signal) };
    let started = Instant::now();
    let status = k.wait().unwrap();
    assert!(started.elapsed() < Duration::from_secs(5), "knot let go promptly");
    assert_eq!(status.code(), Some(EXIT_INTERRUPTED), "{status}");
    let mut err = String::new();
    std::io::Read::read_to_string(k.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(err.contains("interrupted") && err.contains("let go"), "{err}");
    assert_running_untraced(pid, "the interrupted reading");
    let later = ticks_after(&mut target, Duration::from_millis(300));
    assert!(later > first + 3, "the process runs on after knot let it go ({first} → {later})");
    let _ = target.kill();
    let _ = target.wait();
}

#[test]
fn sigterm_while_attached_lets_the_process_go() {
    if !can_trace() {
        return;
    }
    interrupted_by(libc::SIGTERM);
}

#[test]
fn sigint_while_attached_lets_the_process_go() {
    if !can_trace() {
        return;
    }
    interrupted_by(libc::SIGINT);
}

#[test]
fn a_failure_while_attached_lets_the_process_go() {
    if !can_trace() {
        return;
    }
    let mut target = ticker();
    let pid = target.id();
    let first = ticks_after(&mut target, Duration::from_millis(100));
    let out = knot().args(["pid", &pid.to_string()]).env("KNOT_TEST_FAIL_AFTER_ATTACH", "1").output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("was let go"));
    assert_running_untraced(pid, "the failed reading");
    let later = ticks_after(&mut target, Duration::from_millis(300));
    assert!(later > first + 3, "the process runs on ({first} → {later})");
    // And a reading after that works.
    let out = knot().args(["pid", &pid.to_string(), "--format=json"]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["live"]["threads"], 1);
    let _ = target.kill();
    let _ = target.wait();
}

#[test]
fn no_such_process_is_refused_with_status_4() {
    // A pid above the kernel's pid_max cannot exist.
    let max: u64 = std::fs::read_to_string("/proc/sys/kernel/pid_max").unwrap().trim().parse().unwrap();
    let out = knot().args(["pid", &(max + 1).to_string()]).output().unwrap();
    assert_eq!(out.status.code(), Some(EXIT_REFUSED));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no process"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_process_traced_by_another_is_refused_with_status_4() {
    if !can_trace() {
        return;
    }
    // A child that asked to be traced by this test: it stops at its exec, traced by us.
    let mut cmd = Command::new("sleep");
    cmd.arg("60");
    // SAFETY: ptrace(PTRACE_TRACEME) and prctl are async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            libc::ptrace(libc::PTRACE_TRACEME, 0, 0usize, 0usize);
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(5);
    // TracerPid names the tracing thread: the one that spawned the child.
    // SAFETY: gettid cannot fail.
    let tracer = unsafe { libc::gettid() } as u32;
    while status(pid).1 != tracer {
        assert!(Instant::now() < deadline, "the child is not traced: {:?}", status(pid));
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = knot().args(["pid", &pid.to_string()]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(EXIT_REFUSED), "{err}");
    assert!(err.contains(&format!("already being traced by {tracer} ")), "{err}");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn without_permission_it_is_refused_with_status_4_and_says_how_to_allow_it() {
    if !can_trace() {
        return;
    }
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        knot_samples::skipped("skipping: needs root to run knot as another user");
        return;
    }
    let mut target = ticker();
    let mut cmd = knot();
    cmd.args(["pid", &target.id().to_string()]).uid(65534).gid(65534);
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(EXIT_REFUSED), "{err}");
    assert!(err.contains("not permitted") && err.contains("CAP_SYS_PTRACE") && err.contains("uid"), "{err}");
    assert_running_untraced(target.id(), "a refused reading");
    let _ = target.kill();
    let _ = target.wait();
}

/// The pause for ~600 blocked threads, over several readings (KNOT_LIVE_PAUSE_RUNS, default 5):
/// printed, and well under the 100 ms budget at the median on a quiet machine. The bound here is
/// looser, for busy CI machines.
#[test]
fn the_pause_for_600_threads_is_short() {
    if !can_trace() {
        return;
    }
    let Some(sample) = knot_samples::start_live("many_threads", &["600"]).unwrap() else { return };
    let runs: usize = std::env::var("KNOT_LIVE_PAUSE_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    let mut pauses: Vec<f64> = Vec::new();
    let mut threads = 0;
    for _ in 0..runs {
        let v = knot_pid_json(&sample, &["--stacks-only"]);
        threads = v["live"]["threads"].as_u64().unwrap();
        pauses.push(v["live"]["pause_ms"].as_f64().unwrap());
    }
    assert_eq!(threads, 601, "600 threads and main");
    pauses.sort_by(f64::total_cmp);
    let median = pauses[pauses.len() / 2];
    eprintln!("knot pid on {threads} threads, {runs} runs: pause min {:.1} ms, median {median:.1} ms, max {:.1} ms", pauses[0], pauses[pauses.len() - 1]);
    assert!(median < 250.0, "median pause {median:.1} ms for {threads} threads: {pauses:?}");
    assert_running_untraced(sample.pid(), "many_threads");
}

/// The .NET runtime reader on a live process: `monitor_abba` (its committed build, run with
/// `dotnet`) read live shows the two monitors, their owners and waiters, as expected.toml says
/// SOS reads them in the committed dumps.
#[test]
fn a_dotnet_sample_read_live_shows_its_monitor_cycle() {
    if !can_trace() {
        return;
    }
    use knot::process::{Locator, Process};
    use knot::report::LockStorage;
    let Some((mut child, _dir)) = start_monitor_abba(&[]) else { return };
    let pid = child.id();
    let snapshot = knot::live::take(pid as i32, &knot::live::LiveOptions::default()).unwrap();
    assert_running_untraced(pid, "monitor_abba");
    eprintln!("monitor_abba live: {} threads, stopped {:?}, {} bytes copied", snapshot.parts.threads.len(), snapshot.pause, snapshot.parts.capture.bytes_copied);
    let core = knot::core::Core::from_bytes(format!("/proc/{pid}"), snapshot.core_bytes()).unwrap();
    let names = core.thread_names.clone();
    let locator = Locator::default();
    let process = Process::from_core(core, &locator);
    let report = knot::report_for(&process, &knot::Options { locator, ..knot::Options::default() });
    let Some(dotnet) = &report.dotnet else { panic!("no runtime found live: {:#?}", report.diagnostics) };
    assert_eq!(dotnet.runtime_version.as_deref(), Some("10.0.12"), "{}", dotnet.summary);
    let name = |tid: Option<u32>| tid.and_then(|t| names.get(&t)).cloned().unwrap_or_default();
    // (type, owner's name, recursion, MonitorHeld, waiters' names), as SOS's syncblk lists them.
    type MonitorRow = (String, String, u32, Option<u32>, Vec<String>);
    let mut monitors: Vec<MonitorRow> = report
        .locks
        .iter()
        .filter_map(|l| l.managed.as_ref())
        .filter(|m| m.storage == LockStorage::SyncBlock)
        .map(|m| (m.type_name.clone().unwrap_or_default(), name(m.owner_os_tid), m.recursion, m.monitor_held, m.waiters.iter().map(|t| name(Some(*t))).collect()))
        .collect();
    monitors.sort();
    assert_eq!(
        monitors,
        vec![
            ("Knot.Samples.MonitorAbba.AuditLock".to_string(), "AuditWorker".to_string(), 1, Some(3), vec!["LedgerWorker".to_string()]),
            ("Knot.Samples.MonitorAbba.LedgerLock".to_string(), "LedgerWorker".to_string(), 1, Some(3), vec!["AuditWorker".to_string()]),
        ],
        "{}",
        dotnet.summary
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// The runtime's own threads carry their roles: `monitor_abba` run live with server GC (two
/// heaps), read by `knot pid`, which has every thread's OS name. Each thread the kernel names
/// `.NET …` (read here from /proc, not through knot) has a .NET role, the one its name gives;
/// the finalizer is the runtime's `g_pFinalizerThread` too, and server GC's threads are GC threads.
#[test]
fn a_dotnet_process_read_live_gives_the_runtime_threads_their_roles() {
    if !can_trace() {
        return;
    }
    let Some((mut child, _dir)) = start_monitor_abba(&[("DOTNET_gcServer", "1"), ("DOTNET_GCHeapCount", "2")]) else { return };
    let pid = child.id();
    // The kernel's names, read before knot stops the process.
    let mut comm: Vec<(u32, String)> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let tid = e.file_name().to_str()?.parse().ok()?;
            Some((tid, std::fs::read_to_string(e.path().join("comm")).ok()?.trim_end().to_string()))
        })
        .collect();
    comm.sort();
    let out = knot().args(["pid", &pid.to_string(), "--format", "json"]).output().unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let r = json_of(&out, "knot pid monitor_abba");
    let role_of = |tid: u32| -> Option<(String, String)> {
        let t = r["threads"].as_array()?.iter().find(|t| t["tid"] == tid)?;
        Some((t["role"]["framework"].as_str()?.to_string(), t["role"]["role"].as_str()?.to_string()))
    };
    let want: &[(&str, &str)] = &[
        (".NET Finalizer", "finalizer"),
        (".NET Server GC", "gc_worker"),
        (".NET SigHandler", "signal_handler"),
        (".NET EventPipe", "eventpipe"),
        (".NET Debugger", "debugger"),
        (".NET DebugPipe", "debugger"),
        (".NET SynchManag", "synch_manager"),
        (".NET Tiered Com", "tiered_compilation"),
        (".NET TP Worker", "thread_pool_worker"),
        (".NET TP Gate", "thread_pool_gate"),
        (".NET Timer", "timer"),
    ];
    let mut seen = std::collections::BTreeSet::new();
    for (tid, name) in comm.iter().filter(|(_, n)| n.starts_with(".NET ")) {
        let role = role_of(*tid);
        assert!(role.as_ref().is_some_and(|(f, _)| f == "dotnet"), "thread {tid} {name:?}: role {role:?}");
        if let Some((_, w)) = want.iter().find(|(n, _)| n == name) {
            assert_eq!(role.as_ref().map(|(_, r)| r.as_str()), Some(*w), "thread {tid} {name:?}");
        }
        seen.insert(name.as_str());
    }
    // The runtime makes these at start-up (server GC: one thread per heap).
    for n in [".NET Finalizer", ".NET Server GC", ".NET SigHandler", ".NET EventPipe"] {
        assert!(seen.contains(n), "no thread named {n:?} in {comm:?}");
    }
    assert_eq!(comm.iter().filter(|(_, n)| n == ".NET Server GC").count(), 2, "{comm:?}");
    // The application's own threads have no framework role.
    for (tid, name) in comm.iter().filter(|(_, n)| n == "LedgerWorker" || n == "AuditWorker") {
        assert_eq!(role_of(*tid), None, "thread {tid} {name:?}");
    }
}

/// The committed `monitor_abba` build run by the machine's `dotnet` under 10.0.12 with `env`, once
/// it says `ready` and its workers have had time to block on their second lock; with the
/// temporary directory holding its runtimeconfig. `None` (the reason in the skip ledger) when
/// this machine cannot run it.
fn start_monitor_abba(env: &[(&str, &str)]) -> Option<(Child, tempfile::TempDir)> {
    use std::io::BufRead;
    let dll = knot_samples::workspace_root().join("samples/dotnet/dumps/monitor_abba/app/monitor_abba.dll");
    let Ok(dotnet_host) = which("dotnet") else {
        knot_samples::skipped("skipping: dotnet not on PATH");
        return None;
    };
    let runtimes = Command::new(&dotnet_host).arg("--list-runtimes").output().map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
    if !runtimes.contains("Microsoft.NETCore.App 10.0.12 ") {
        knot_samples::skipped(&format!("skipping: the committed build needs Microsoft.NETCore.App 10.0.12; this machine has:\n{runtimes}"));
        return None;
    }
    // The committed build has no runtimeconfig.json beside it: name the framework it was built for.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("monitor_abba.runtimeconfig.json");
    std::fs::write(&config, r#"{"runtimeOptions":{"tfm":"net10.0","framework":{"name":"Microsoft.NETCore.App","version":"10.0.12"}}}"#).unwrap();
    let mut cmd = Command::new(dotnet_host);
    cmd.arg("exec").arg("--runtimeconfig").arg(&config).arg(&dll).stdout(Stdio::piped()).stderr(Stdio::null()).env("DOTNET_CLI_TELEMETRY_OPTOUT", "1");
    cmd.envs(env.iter().copied());
    // SAFETY: prctl is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    assert!(lines.map_while(Result::ok).any(|l| l.trim() == "ready"), "monitor_abba never said ready");
    // The workers take their second lock right after `ready`: give them time to block on it.
    std::thread::sleep(Duration::from_millis(1500));
    Some((child, dir))
}

fn which(tool: &str) -> Result<std::path::PathBuf, ()> {
    let path = std::env::var_os("PATH").ok_or(())?;
    std::env::split_paths(&path).map(|d| d.join(tool)).find(|p| p.is_file()).ok_or(())
}

/// A process whose main thread has exited (`pthread_exit` in main) while another runs on: the
/// zombie main thread cannot stop and has no registers; the others are read, nothing is held.
#[test]
fn a_process_whose_main_thread_exited_is_read_without_it() {
    if !can_trace() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("main_exits.c");
    std::fs::write(
        &src,
        "#include <pthread.h>\n#include <stdio.h>\n#include <unistd.h>\n\
         static void *worker(void *a) { (void)a; for (;;) pause(); return 0; }\n\
         int main(void) { pthread_t t; pthread_create(&t, 0, worker, 0); printf(\"ready\\n\"); fflush(stdout); pthread_exit(0); }\n",
    )
    .unwrap();
    let bin = dir.path().join("main_exits");
    match Command::new("gcc").args(["-g", "-pthread", "-o"]).arg(&bin).arg(&src).status() {
        Ok(s) if s.success() => {}
        _ => {
            knot_samples::skipped("skipping: gcc not available");
            return;
        }
    }
    let mut child = Command::new(&bin).stdout(Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !status(pid).0.starts_with('Z') {
        assert!(Instant::now() < deadline, "the main thread did not exit: {:?}", status(pid));
        std::thread::sleep(Duration::from_millis(5));
    }
    let started = Instant::now();
    let out = knot().args(["pid", &pid.to_string(), "--format=json"]).output().unwrap();
    let v = json_of(&out, "knot pid on a process without its main thread");
    // A wait for the zombie's stop would end in DidNotStop and fail the run (json_of above); this
    // bound only catches a hang, far from any load-dependent timing.
    assert!(started.elapsed() < Duration::from_secs(60), "no waiting for a stop that never comes");
    assert_eq!(v["live"]["threads"], 1, "the worker alone");
    let frames: Vec<&str> = v["threads"][0]["frames"].as_array().unwrap().iter().filter_map(|f| f["function"].as_str()).collect();
    assert!(frames.contains(&"worker"), "{frames:?}");
    let worker = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()).find(|&t| t != pid).unwrap();
    assert_running_untraced(worker, "the worker thread");
    assert_running_untraced(pid, "the exited main thread");
    let _ = child.kill();
    let _ = child.wait();
}
