//! The README's commands, run as written (issue 13, item 8): each `cargo run --release -- …`
//! line is run with this build's `knot` in its place (same arguments, from the repository's
//! root), the shell lines that prepare for them are run by bash, and each must succeed without a
//! warning that a committed file does not match its dump.

use std::path::Path;
use std::process::Command;

const CARGO_RUN: &str = "cargo run --release -- ";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The README's indented command lines, in order.
fn commands() -> Vec<String> {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    readme.lines().filter_map(|l| l.strip_prefix("    ")).map(|l| l.trim().to_string()).filter(|l| !l.is_empty()).collect()
}

#[test]
fn the_readme_says_how_to_put_knot_on_the_path() {
    assert!(commands().iter().any(|c| c == "cargo install --locked --path ."), "no install command");
}

#[test]
fn every_cargo_run_command_in_the_readme_runs_as_written() {
    let mut ran = 0;
    for c in commands() {
        if c.starts_with("mkdir -p /tmp/knot-rt") {
            let out = Command::new("bash").arg("-c").arg(&c).current_dir(repo()).output().expect("bash");
            assert!(out.status.success(), "{c}: {}", String::from_utf8_lossy(&out.stderr));
            continue;
        }
        let Some(args) = c.strip_prefix(CARGO_RUN) else { continue };
        let out = Command::new(env!("CARGO_BIN_EXE_knot")).args(args.split_whitespace()).current_dir(repo()).output().expect("run knot");
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(0), "{c}\n{stderr}");
        // `knot heap stat`, `heap root` and `heap diff` write their own documents; every other command
        // the analysis report.
        let heading = if args.starts_with("heap stat ") {
            "Statistics:"
        } else if args.starts_with("heap root ") {
            "Why alive: "
        } else if args.starts_with("heap diff ") {
            "Heap diff: "
        } else {
            "Verdict: "
        };
        assert!(stdout.contains(heading), "{c}\n{stdout}");
        for bad in ["differs from the image", "refused"] {
            assert!(!stdout.contains(bad), "{c}: the report says {bad:?}:\n{stdout}");
        }
        ran += 1;
    }
    assert!(ran >= 4, "only {ran} cargo run commands found in README.md");
}
