//! `knot watch DIR --once`, end to end: each dump analyzed once, beside itself or in --out,
//! atomically; broken dumps get an error file and are not retried; restarts redo nothing.

mod common;

use knot_samples::{DumpKind, SampleDump};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::SystemTime;

fn abba() -> SampleDump {
    common::committed("abba", DumpKind::Kernel)
}

fn watch(dump: &SampleDump, dir: &Path, extra: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_knot"));
    cmd.arg("watch").arg(dir).args(["--once", "--settle-secs", "0"]).arg("--exe").arg(&dump.binary);
    if let Some(s) = &dump.sysroot {
        cmd.arg("--sysroot").arg(s);
    }
    if let Some(d) = &dump.debug_dir {
        cmd.arg("--debug-dir").arg(d);
    }
    if let Some(p) = dump.binary.parent() {
        cmd.arg("--search-dir").arg(p);
    }
    let out = cmd.args(extra).output().expect("run knot watch");
    eprintln!("knot watch {}: {:?}\n{}", dir.display(), out.status, String::from_utf8_lossy(&out.stderr));
    out
}

fn mtime(p: &Path) -> SystemTime {
    fs::metadata(p).and_then(|m| m.modified()).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn with_suffix(p: &Path, suffix: &str) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

fn report(p: &Path) -> serde_json::Value {
    serde_json::from_str(&fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).expect("a whole JSON report")
}

#[test]
fn a_new_dump_gets_its_report_once_and_again_only_when_it_changes() {
    let d = abba();
    let dir = tempfile::tempdir().unwrap();
    let core = dir.path().join("core.11396");
    fs::copy(&d.core, &core).unwrap();
    fs::write(dir.path().join("notes.txt"), "not a dump").unwrap();

    let out = watch(&d, dir.path(), &[]);
    assert_eq!(out.status.code(), Some(0));
    let json = with_suffix(&core, ".knot.json");
    let v = report(&json);
    assert_eq!(v["verdict"], "deadlock");
    assert_eq!(v["deadlocks"].as_array().map(Vec::len), Some(1));
    // The log line carries the verdict's signature as one token a log query can count.
    let signature = v["verdict_signature"].as_str().expect("a verdict signature");
    assert!(signature.starts_with("deadlock:"), "{signature}");
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("core.11396: DEADLOCK (2 threads in 1 cycle); signature={signature}; ")), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(with_suffix(&core, ".knot.done").exists(), "the marker");
    assert!(!dir.path().join("notes.txt.knot.json").exists() && !dir.path().join("notes.txt.knot.error.txt").exists());

    // A restart redoes nothing.
    let first = mtime(&json);
    let out = watch(&d, dir.path(), &[]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(mtime(&json), first, "the report was written again");
    assert!(String::from_utf8_lossy(&out.stderr).contains("0 analyzed"));

    // Nor without the marker, while the report is newer than the dump.
    fs::remove_file(with_suffix(&core, ".knot.done")).unwrap();
    watch(&d, dir.path(), &[]);
    assert_eq!(mtime(&json), first, "the report was written again without its marker");

    // A dump replaced under the same name is analyzed again.
    std::thread::sleep(std::time::Duration::from_millis(20));
    fs::copy(&d.core, &core).unwrap();
    let out = watch(&d, dir.path(), &[]);
    assert_eq!(out.status.code(), Some(0));
    assert_ne!(mtime(&json), first, "a new dump under the old name was not analyzed");
    assert_eq!(report(&json)["verdict"], "deadlock");
}

#[test]
fn a_broken_dump_gets_an_error_file_and_is_not_retried() {
    let d = abba();
    let dir = tempfile::tempdir().unwrap();
    // A gzip header and garbage; an ELF core header whose program headers run past the end.
    let gz = dir.path().join("core.1.gz");
    fs::write(&gz, b"\x1f\x8b\x08\x00garbage, garbage, garbage").unwrap();
    let mut elf = b"\x7fELF\x02\x01\x01".to_vec();
    elf.resize(16, 0);
    for (v, n) in [(4u64, 2), (62, 2), (1, 4), (0, 8), (64, 8), (0, 8), (0, 4), (64, 2), (56, 2), (200, 2), (64, 2), (0, 2), (0, 2)] {
        elf.extend_from_slice(&v.to_le_bytes()[..n]);
    }
    elf.resize(300, 0);
    let truncated = dir.path().join("core.2");
    fs::write(&truncated, &elf).unwrap();

    let out = watch(&d, dir.path(), &[]);
    assert_eq!(out.status.code(), Some(1), "some dump could not be analyzed");
    for dump in [&gz, &truncated] {
        let err = with_suffix(dump, ".knot.error.txt");
        let text = fs::read_to_string(&err).unwrap_or_else(|e| panic!("{}: {e}", err.display()));
        assert!(text.contains("could not analyze"), "{text}");
        assert!(!with_suffix(dump, ".knot.json").exists());
    }
    assert!(fs::read_to_string(with_suffix(&truncated, ".knot.error.txt")).unwrap().contains("truncated"));

    let before = mtime(&with_suffix(&gz, ".knot.error.txt"));
    let out = watch(&d, dir.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "nothing new, nothing failed");
    assert_eq!(mtime(&with_suffix(&gz, ".knot.error.txt")), before, "a broken dump was retried");
}

#[test]
fn a_partial_temporary_file_from_a_killed_run_is_ignored() {
    let d = abba();
    let dir = tempfile::tempdir().unwrap();
    let core = dir.path().join("core.11396");
    fs::copy(&d.core, &core).unwrap();
    // What a run killed while writing leaves: half a report under its temporary name.
    let tmp = dir.path().join(".core.11396.knot.json.knot-tmp-4242-0");
    fs::write(&tmp, b"{\"schema_version\": 1, \"verdict\": \"dead").unwrap();

    let out = watch(&d, dir.path(), &[]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(report(&with_suffix(&core, ".knot.json"))["verdict"], "deadlock");
    let names: Vec<String> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    // The temporary file is not a dump, and not a result: no error file, nothing renamed from it.
    assert!(!names.iter().any(|n| n.ends_with(".knot.error.txt")), "{names:?}");
    assert_eq!(fs::read(&tmp).unwrap(), b"{\"schema_version\": 1, \"verdict\": \"dead", "the partial file was touched");
    // This run left no temporary file of its own.
    assert_eq!(names.iter().filter(|n| n.contains("knot-tmp")).count(), 1, "{names:?}");
}

#[test]
fn out_leaves_the_dump_directory_untouched_and_fail_on_deadlock_exits_3() {
    let d = abba();
    let dumps = tempfile::tempdir().unwrap();
    let reports = tempfile::tempdir().unwrap();
    fs::copy(&d.core, dumps.path().join("core.11396")).unwrap();
    let out = watch(&d, dumps.path(), &["--out", reports.path().to_str().unwrap(), "--fail-on-deadlock"]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(report(&reports.path().join("core.11396.knot.json"))["verdict"], "deadlock");
    assert!(reports.path().join("core.11396.knot.done").exists());
    assert_eq!(fs::read_dir(dumps.path()).unwrap().count(), 1, "only the dump is in the dump directory");
}

#[test]
fn once_waits_for_a_dump_to_settle() {
    let d = abba();
    let dir = tempfile::tempdir().unwrap();
    fs::copy(&d.core, dir.path().join("core.11396")).unwrap();
    let started = std::time::Instant::now();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_knot"));
    let out = cmd.arg("watch").arg(dir.path()).args(["--once", "--settle-secs", "1", "--exe"]).arg(&d.binary).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(started.elapsed() >= std::time::Duration::from_secs(1), "analyzed before it had settled");
    assert!(dir.path().join("core.11396.knot.json").exists());
}

#[test]
fn a_missing_directory_exits_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_knot")).args(["watch", "/nonexistent/knot-dumps", "--once"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/knot-dumps"));
}

/// Issue 13, item 7: a knot killed while it analyzes one dump (as the OOM killer or an abort
/// would) leaves a `.knot.running` marker; the next knot gives that dump an error file saying
/// so, instead of dying on it again, and analyzes the others.
#[test]
fn a_dump_that_killed_knot_gets_an_error_file_on_restart_and_the_others_are_analyzed() {
    let d = abba();
    let dir = tempfile::tempdir().unwrap();
    let killer = dir.path().join("core.1-killer");
    let other = dir.path().join("core.2-other");
    fs::copy(&d.core, &killer).unwrap();
    fs::copy(&d.core, &other).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_knot"));
    cmd.arg("watch").arg(dir.path()).args(["--once", "--settle-secs", "0"]).arg("--exe").arg(&d.binary);
    if let Some(s) = &d.sysroot {
        cmd.arg("--sysroot").arg(s);
    }
    // Held mid-dump by the test hook (a FIFO it reads once it holds the dump's claim, before it
    // reads the dump): the kill lands there, not after the analysis of a quick dump.
    let hold_dir = tempfile::tempdir().unwrap();
    let hold = hold_dir.path().join("hold.fifo");
    let c = std::ffi::CString::new(hold.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo: {}", std::io::Error::last_os_error());
    cmd.env("KNOT_WATCH_TEST_HOLD", &hold);
    let mut child = cmd.stderr(std::process::Stdio::null()).spawn().expect("run knot watch");
    // Opening the FIFO for writing returns when knot has opened it: mid-dump, on the first dump.
    let (tx, rx) = std::sync::mpsc::channel();
    let fifo = hold.clone();
    std::thread::spawn(move || {
        let _ = tx.send(fs::OpenOptions::new().write(true).open(fifo));
    });
    let _writer = rx.recv_timeout(std::time::Duration::from_secs(120)).expect("knot never started on the first dump").expect("open the FIFO");
    let running = with_suffix(&killer, ".knot.running");
    assert!(running.exists(), "knot holds the first dump without its marker");
    // Kill it (SIGKILL: nothing runs after).
    child.kill().expect("kill knot watch");
    let _ = child.wait();
    assert!(!with_suffix(&killer, ".knot.json").exists(), "knot was killed before it wrote the report");

    let out = watch(&d, dir.path(), &[]);
    assert_eq!(out.status.code(), Some(1), "one dump could not be analyzed");
    let error = fs::read_to_string(with_suffix(&killer, ".knot.error.txt")).expect("the killer has an error file");
    assert!(error.contains("died while analyzing this dump"), "{error}");
    assert!(!running.exists(), "the running marker is gone");
    assert_eq!(report(&with_suffix(&other, ".knot.json"))["verdict"], "deadlock");
    // And a third run has nothing to do.
    let again = watch(&d, dir.path(), &[]);
    assert_eq!(again.status.code(), Some(0), "{}", String::from_utf8_lossy(&again.stderr));
}

/// Issue 13, item 11: a missing directory is said once, not once per scan.
#[test]
fn a_missing_directory_is_said_once() {
    let out = Command::new(env!("CARGO_BIN_EXE_knot")).args(["watch", "/nonexistent-knot-dir"]).output().expect("run knot watch");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.matches("/nonexistent-knot-dir").count(), 1, "{err}");
    // Issue 30, item 14: the cause once, not once in the message and again as its source.
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
}
