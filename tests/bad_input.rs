//! Bad input through the command line: `knot analyze` on a directory, an empty file, cores cut
//! short or overwritten answers with exit status 2 and one line on stderr, or 0 and a report
//! marked partial — never a panic. (The library-level cases are `src/tests/bad_input.rs`.)

mod common;
mod dumpedit;

use dumpedit::*;
use knot_samples::{DumpKind, SampleDump};
use std::path::PathBuf;

fn kernel() -> &'static SampleDump {
    common::abba(DumpKind::Kernel)
}

/// The gcore seed: its notes are at the end of the file, after every segment.
fn seed() -> &'static [u8] {
    common::abba_bytes(DumpKind::Gcore)
}

/// The kernel seed: its notes come first, right after the program headers.
fn kernel_seed() -> &'static [u8] {
    common::abba_bytes(DumpKind::Kernel)
}

/// A scratch directory for files this test writes.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bad_input").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

// ---------------------------------------------------------------------------------------------
// Through the command line: exit status 2 and one line on stderr, or 0 and a partial report.

fn knot() -> assert_cmd::Command {
    assert_cmd::Command::new(env!("CARGO_BIN_EXE_knot"))
}

/// `knot analyze PATH` must fail with status 2 and a one-line error containing `expect`.
fn assert_unreadable(path: &std::path::Path, expect: &str) {
    use predicates::prelude::*;
    let out = knot()
        .arg("analyze")
        .arg(path)
        .assert()
        .code(2)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains(expect))
        .stderr(predicate::str::contains("panicked").not());
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line, not {stderr:?}");
    assert!(stderr.starts_with("knot: "), "{stderr}");
}

#[test]
fn the_cli_refuses_a_directory_an_empty_file_and_a_truncated_core_in_one_line() {
    let dir = scratch("cli_refuses");
    let empty = dir.join("empty.core");
    std::fs::write(&empty, b"").expect("write");
    let in_phdrs = dir.join("cut-in-phdrs.core");
    std::fs::write(&in_phdrs, &seed()[..EHDR_SIZE + 3 * PHDR_SIZE]).expect("write");
    let in_memory = dir.join("cut-in-memory.core");
    std::fs::write(&in_memory, &seed()[..seed().len() / 2]).expect("write");
    let garbage = dir.join("garbage-notes.core");
    let mut bytes = seed().to_vec();
    let seg = note_segment(seed());
    Rng(5).fill(&mut bytes[seg.offset as usize..seg.end_offset()]);
    std::fs::write(&garbage, &bytes).expect("write");

    assert_unreadable(&dir, "is a directory");
    assert_unreadable(&empty, "is empty");
    assert_unreadable(&in_phdrs, "program headers at offset 0x40");
    assert_unreadable(&in_memory, "the core is truncated");
    assert_unreadable(&garbage, "no thread found");
    assert_unreadable(&dir.join("missing.core"), "cannot open");
}

#[test]
fn the_cli_reports_a_core_cut_in_a_stack_as_partial() {
    use predicates::prelude::*;
    let dir = scratch("cli_partial");
    let k = kernel_seed();
    let rsp = register(k, 2, REG_RSP);
    let len = load_holding(k, rsp).file_offset(rsp) + 0x28;
    let core = dir.join("cut-in-stack.core");
    std::fs::write(&core, &k[..len]).expect("write");
    let sample = kernel();
    let mut cmd = knot();
    cmd.arg("analyze").arg(&core).arg("--exe").arg(&sample.binary);
    if let Some(root) = &sample.sysroot {
        cmd.arg("--sysroot").arg(root);
    }
    if let Some(debug) = &sample.debug_dir {
        cmd.arg("--debug-dir").arg(debug);
    }
    cmd.assert()
        .code(0)
        .stdout(predicate::str::contains("(partial: see warnings)"))
        .stdout(predicate::str::contains("the core is truncated"))
        .stderr(predicate::str::contains("panicked").not());
    let json = cmd.arg("--format").arg("json").assert().code(0);
    let v: serde_json::Value = serde_json::from_slice(&json.get_output().stdout).expect("JSON report");
    assert_eq!(v["dump"]["partial"], serde_json::Value::Bool(true));
    assert_eq!(v["threads"][2]["stack_end"]["reason"], "unreadable");
}
