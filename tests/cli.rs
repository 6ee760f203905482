//! The `knot` command as scripts use it: its exit statuses and its two formats.

mod common;

use knot_samples::{DumpKind, SampleDump};
use std::process::{Command, Output};

fn knot(dump: &SampleDump, extra: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_knot"));
    cmd.arg("analyze").arg(&dump.core).arg("--exe").arg(&dump.binary);
    if let Some(s) = &dump.sysroot {
        cmd.arg("--sysroot").arg(s);
    }
    if let Some(d) = &dump.debug_dir {
        cmd.arg("--debug-dir").arg(d);
    }
    cmd.args(extra).output().expect("run knot")
}

#[test]
fn a_deadlock_exits_3_only_when_asked() {
    let abba = common::committed("abba", DumpKind::Kernel);
    assert_eq!(knot(&abba, &[]).status.code(), Some(0));
    assert_eq!(knot(&abba, &["--fail-on-deadlock"]).status.code(), Some(3));
}

#[test]
fn no_cycle_exits_0_even_when_asked() {
    let Some(convoy) = common::made("convoy", DumpKind::Gcore) else { return };
    assert_eq!(knot(&convoy, &["--fail-on-deadlock"]).status.code(), Some(0));
}

#[test]
fn json_output_is_one_document_with_the_threads() {
    let abba = common::committed("abba", DumpKind::Gcore);
    let out = knot(&abba, &["--format", "json"]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    assert_eq!(v["threads"].as_array().map(Vec::len), Some(3));
    assert_eq!(v["deadlocks"].as_array().map(Vec::len), Some(1));
    assert_eq!(v["verdict"], "deadlock");
}

#[test]
fn unreadable_dumps_exit_2_and_usage_errors_64() {
    let dir = std::env::temp_dir();
    let out = Command::new(env!("CARGO_BIN_EXE_knot")).arg("analyze").arg(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is a directory"));
    let out = Command::new(env!("CARGO_BIN_EXE_knot")).args(["analyze", "--no-such-flag"]).output().unwrap();
    assert_eq!(out.status.code(), Some(64));
}

// Issue 13, item 11: gdb habits.

fn json_of(out: &Output) -> serde_json::Value {
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

#[test]
fn gdb_order_program_then_core_is_the_same_as_exe() {
    let abba = common::committed("abba", DumpKind::Kernel);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_knot"));
    cmd.arg("analyze").arg(&abba.binary).arg(&abba.core).args(["--format", "json"]);
    if let Some(s) = &abba.sysroot {
        cmd.arg("--sysroot").arg(s);
    }
    if let Some(d) = &abba.debug_dir {
        cmd.arg("--debug-dir").arg(d);
    }
    let gdb_order = json_of(&cmd.output().expect("run knot"));
    let with_exe = json_of(&knot(&abba, &["--format", "json"]));
    assert_eq!(gdb_order["verdict"], with_exe["verdict"]);
    assert_eq!(gdb_order["modules"], with_exe["modules"], "the program was used as with --exe");
    // Both ways at once is a usage error, said as such.
    let both = Command::new(env!("CARGO_BIN_EXE_knot")).arg("analyze").arg(&abba.binary).arg(&abba.core).arg("--exe").arg(&abba.binary).output().unwrap();
    assert_eq!(both.status.code(), Some(64), "{}", String::from_utf8_lossy(&both.stderr));
}

#[test]
fn an_exe_of_another_build_is_a_warning_not_silence() {
    let abba = common::committed("abba", DumpKind::Kernel);
    let other = common::committed("crash_null", DumpKind::Kernel);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_knot"));
    // The right program is found in the search directory; the wrong one was named with --exe.
    cmd.arg("analyze").arg(&abba.core).arg("--exe").arg(&other.binary).arg("--search-dir").arg(abba.binary.parent().expect("dir")).args(["--format", "json"]);
    if let Some(s) = &abba.sysroot {
        cmd.arg("--sysroot").arg(s);
    }
    let v = json_of(&cmd.output().expect("run knot"));
    let warned = v["diagnostics"]
        .as_array()
        .expect("diagnostics")
        .iter()
        .any(|d| d["severity"] == "warning" && d["message"].as_str().is_some_and(|m| m.contains("--exe") && m.contains("another build")));
    assert!(warned, "{:#}", v["diagnostics"]);
    assert_eq!(v["dump"]["partial"], true);
}
