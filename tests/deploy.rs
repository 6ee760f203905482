//! The Kubernetes Job in deploy/k8s runs knot with the arguments it lists: those arguments must
//! work with this knot, on a dump volume laid out as the Job mounts it.

mod common;

use knot_samples::DumpKind;
use std::process::Command;

/// The container's `args:` list, as written in the manifest.
fn job_args(manifest: &str) -> Vec<String> {
    let mut lines = manifest.lines().skip_while(|l| l.trim() != "args:").skip(1);
    let mut out = Vec::new();
    while let Some(l) = lines.next() {
        match l.trim().strip_prefix("- ") {
            Some(a) => out.push(a.split(" #").next().unwrap_or(a).trim().trim_matches('"').to_string()),
            None => break,
        }
    }
    out
}

#[test]
fn the_jobs_command_analyzes_a_dump_volume() {
    let manifest = std::fs::read_to_string(knot_samples::workspace_root().join("deploy/k8s/knot-job.yaml")).unwrap();
    let args = job_args(&manifest);
    assert_eq!(args.first().map(String::as_str), Some("watch"), "{args:?}");
    assert!(manifest.contains("readOnly: true"), "the dump volume is mounted read-only");

    // The volumes, as the Job mounts them, in a temporary directory.
    let dump = common::committed("abba", DumpKind::Kernel);
    let root = tempfile::tempdir().unwrap();
    let (dumps, reports) = (root.path().join("dumps"), root.path().join("reports"));
    std::fs::create_dir_all(&dumps).unwrap();
    std::fs::create_dir_all(&reports).unwrap();
    std::fs::copy(&dump.core, dumps.join("core.1234")).unwrap();
    let sysroot = dump.sysroot.clone().unwrap();
    let local: Vec<String> = args
        .iter()
        .map(|a| {
            a.replace("/dumps", &dumps.display().to_string())
                .replace("/reports", &reports.display().to_string())
                .replace("/sysroot", &sysroot.display().to_string())
                .replace("--settle-secs=30", "--settle-secs=0")
        })
        .collect();
    let out = Command::new(env!("CARGO_BIN_EXE_knot"))
        .args(&local)
        .args(["--search-dir", &dump.binary.parent().unwrap().display().to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "knot {local:?}: {}", String::from_utf8_lossy(&out.stderr));
    let written: Vec<_> = std::fs::read_dir(&reports).unwrap().filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    let json = written.iter().find(|n| n.ends_with(".knot.json")).unwrap_or_else(|| panic!("no report in {written:?}"));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(reports.join(json)).unwrap()).unwrap();
    assert_eq!(v["verdict"], "deadlock");
}
