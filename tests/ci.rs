//! What CI runs and what it shows (issue 13, item 10): `.ci/run` runs exactly the README's test
//! command, then checks that neither the build nor `cargo doc` warns (issue 11) and that clippy is clean (issue 43), and then prints every reason a test gave for not checking something, which
//! `cargo test` hides for a passing test.

use std::path::Path;
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn ci_runs_exactly_the_readme_test_command() {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let ci = std::fs::read_to_string(repo().join(".ci/run")).expect(".ci/run");
    assert!(readme.contains("\n    cargo test --workspace\n"), "the README gives the test command");
    let commands: Vec<&str> = ci.lines().map(str::trim).filter(|l| !l.starts_with('#') && l.contains("cargo ")).collect();
    assert_eq!(
        commands,
        [
            "cargo test --workspace",
            "if cargo build --workspace --all-targets 2>&1 | grep -E '^warning'; then",
            "RUSTDOCFLAGS=\"-D warnings\" cargo doc --no-deps",
            "cargo clippy --workspace --all-targets -- -D warnings"
        ],
        "{ci}"
    );
}

#[test]
fn a_skip_is_in_the_ledger_and_ci_prints_it() {
    let dir = tempfile::tempdir().expect("scratch");
    let ledger = dir.path().join("skips.log");
    // SAFETY: this test binary's only test that reads or writes the environment.
    unsafe { std::env::set_var("KNOT_SKIP_LEDGER", &ledger) };
    knot_samples::skipped("skipping gdb on ledger-test: no gdb here");
    knot_samples::skipped("skipping gdb on ledger-test: no gdb here");
    let text = std::fs::read_to_string(&ledger).expect("the ledger was written");
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(text.lines().all(|l| l == "ci: skipping gdb on ledger-test: no gdb here"), "{text}");
    // .ci/run's summary, on that ledger.
    let script = format!(
        "set -euo pipefail; eval \"$(sed -n '/^summary() {{/,/^}}/p' {})\"; ledger={}; summary",
        repo().join(".ci/run").display(),
        ledger.display()
    );
    let out = Command::new("bash").arg("-c").arg(&script).output().expect("bash");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{shown}{}", String::from_utf8_lossy(&out.stderr));
    assert!(shown.contains("2 skips"), "{shown}");
    assert!(shown.contains("2 ci: skipping gdb on ledger-test: no gdb here"), "{shown}");
}
