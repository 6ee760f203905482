//! The Kubernetes Job in deploy/k8s runs knot with the arguments it lists: those arguments must
//! work with this knot, on a dump volume laid out as the Job mounts it.

mod common;

use knot_samples::DumpKind;
use std::process::Command;

/// The container's `args:` list, as written in the manifest.
fn job_args(manifest: &str) -> Vec<String> {
    let lines = manifest.lines().skip_while(|l| l.trim() != "args:").skip(1);
    let mut out = Vec::new();
    for l in lines {
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

/// The `env:` list of the container whose `command:` runs `command`, as (name, value) pairs.
fn container_env(manifest: &str, command: &str) -> Vec<(String, String)> {
    let mut lines = manifest.lines().skip_while(|l| !(l.trim().starts_with("command:") && l.contains(command))).skip(1);
    assert!(lines.next().is_some_and(|l| l.trim() == "env:"), "the env list follows the command");
    let mut out = Vec::new();
    let mut name = None;
    for l in lines {
        let t = l.split(" #").next().unwrap_or(l).trim();
        if let Some(n) = t.strip_prefix("- name: ") {
            name = Some(n.trim().to_string());
        } else if let Some(v) = t.strip_prefix("value: ") {
            out.push((name.take().unwrap(), v.trim().trim_matches('"').to_string()));
        } else {
            break;
        }
    }
    out
}

/// The live variant: a sidecar sharing the pod's process namespace runs deploy/knot-live-watch.sh,
/// which reads the application with `knot pid` once its health probe keeps failing. Run here with
/// the manifest's own settings against a wedged sample whose "health endpoint" refuses connections.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[test]
fn the_live_sidecar_reads_the_application_when_its_health_check_fails() {
    let root = knot_samples::workspace_root();
    let manifest = std::fs::read_to_string(root.join("deploy/k8s/knot-live-sidecar.yaml")).unwrap();
    assert!(manifest.contains("shareProcessNamespace: true"), "knot must see the application's processes");
    assert!(manifest.contains(r#"add: ["SYS_PTRACE"]"#) && manifest.contains(r#"drop: ["ALL"]"#), "ptrace and nothing else");
    let dockerfile = std::fs::read_to_string(root.join("deploy/Dockerfile")).unwrap();
    assert!(dockerfile.contains("AS live") && dockerfile.contains("COPY deploy/knot-live-watch.sh /usr/local/bin/knot-live-watch"), "the image the manifest names has the script");
    let env = container_env(&manifest, "/usr/local/bin/knot-live-watch");
    let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).unwrap_or_else(|| panic!("no {k} in {env:?}"));
    assert_eq!(get("OUT"), "/reports");

    let Some(app) = knot_samples::start_live("abba", &[]).unwrap() else { return };
    let reports = tempfile::tempdir().unwrap();
    // A port nothing listens on: every probe fails.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let out = Command::new("bash")
        .arg(root.join("deploy/knot-live-watch.sh"))
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("PROCESS", app.built.binary.to_str().unwrap())
        .env("HEALTH_PORT", port.to_string())
        .env("INTERVAL", "0")
        .env("OUT", reports.path())
        .env("KNOT", env!("CARGO_BIN_EXE_knot"))
        .env("ONCE", "1")
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(4) && log.contains("not permitted") {
        knot_samples::skipped(&format!("skipping: ptrace is not permitted here: {log}"));
        return;
    }
    assert!(out.status.success(), "{}: {log}", out.status);
    assert_eq!(log.matches("health probe failed").count(), get("FAILURES").parse::<usize>().unwrap(), "{log}");
    assert!(log.contains(&format!("pid {} read live: deadlock", app.pid())), "{log}");
    let written: Vec<String> = std::fs::read_dir(reports.path()).unwrap().filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    let json = written.iter().find(|n| n.ends_with(".knot.json")).unwrap_or_else(|| panic!("no report in {written:?}"));
    assert!(written.iter().any(|n| n.ends_with(".core")), "{written:?}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(reports.path().join(json)).unwrap()).unwrap();
    assert_eq!(v["verdict"], "deadlock");
    assert_eq!(v["live"]["pid"], app.pid());
    let status = std::fs::read_to_string(format!("/proc/{}/status", app.pid())).unwrap();
    assert!(status.lines().any(|l| l.starts_with("TracerPid:") && l.ends_with("\t0")), "{status}");
}
