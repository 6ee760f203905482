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
