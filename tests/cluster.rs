//! Issue 31: deploy/ run for real. The image is built by deploy/build-image.sh (debootstrap bases,
//! this test's knot binary, deploy/Dockerfile), and each manifest of deploy/k8s is played by podman
//! (`podman kube play`: the pod specs a cluster takes) with the security settings it states — a
//! read-only root file system, the capabilities it adds and no other, its uid.
//!
//! What a test changes in a manifest, and why (the rest is played as written):
//! - a Job or Deployment is played as its `spec.template`, a Pod (podman 4.3 has no Job kind);
//! - images: `registry.example.com/knot:0.1.0[-live]` → the image built here, the application's
//!   `my-app` → the Debian base the image was built on (it has `sh` and `tar`, and the same glibc
//!   as the committed dumps) or a stand-in application;
//! - the dump claim → a host directory (a `hostPath`); `subPath` → a `hostPath` of that
//!   sub-directory, which is what the kubelet mounts (podman 4.3 ignores `subPath`);
//! - `emptyDir` volumes get the pod's name as a prefix (podman makes them named volumes: two pods
//!   would share one) and are removed with the pod;
//! - a Deployment's pod gets `restartPolicy: Never` (podman 4.3 would restart its init container
//!   for ever);
//! - settle times and scan intervals are shortened (`--settle-secs=30` → 2, `--interval-secs=10`
//!   → 2, the live probe's `INTERVAL` 10 → 1), so a test takes seconds.
//!
//! Without podman (or root, for rootful podman) each test says why it skips; `.ci/run` installs
//! podman, runc and debootstrap, so CI runs them.

mod common;

use knot_samples::DumpKind;
use serde_yaml_ng::{Mapping, Value as Yaml};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

/// The images deploy/build-image.sh made for this test's knot binary.
struct Engine {
    /// The final image: knot, glibc and libgcc; uid 65532.
    image: String,
    /// The `live` image: knot and bash, for deploy/knot-live-watch.sh.
    live: String,
    /// The Debian base both were built from (debootstrap --variant=minbase bookworm).
    base: String,
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail and touches no memory.
    unsafe { libc::geteuid() == 0 }
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

/// Builds the images once per test binary (deploy/build-image.sh caches them by content, so a
/// binary that did not change costs a `podman image exists`), or says why it cannot.
fn engine() -> Option<&'static Engine> {
    static ENGINE: OnceLock<Result<Engine, String>> = OnceLock::new();
    match ENGINE.get_or_init(build_images) {
        Ok(e) => Some(e),
        Err(why) => {
            knot_samples::skipped(&format!("skipping: {why}"));
            None
        }
    }
}

fn build_images() -> Result<Engine, String> {
    if !on_path("podman") {
        return Err("podman is not installed (`.ci/run` installs podman, runc and debootstrap)".into());
    }
    if !is_root() {
        return Err("the deployment tests run rootful podman, and this is not root".into());
    }
    let started = Instant::now();
    let script = knot_samples::workspace_root().join("deploy/build-image.sh");
    let out = Command::new("bash").arg(&script).args(["--knot", env!("CARGO_BIN_EXE_knot")]).output().map_err(|e| format!("{}: {e}", script.display()))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}build-image.sh took {:.1}s", started.elapsed().as_secs_f64());
    if !out.status.success() {
        // No package mirror (debootstrap) is the machine's, not knot's: say so and skip.
        if stderr.contains("debootstrap failed") || stderr.contains("is missing") {
            return Err(format!("deploy/build-image.sh could not make the base: {}", stderr.trim()));
        }
        panic!("deploy/build-image.sh failed ({}): {stderr}", out.status);
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let get = |key: &str| stdout.lines().find_map(|l| l.strip_prefix(key)).map(str::to_string).unwrap_or_else(|| panic!("no {key} in {stdout}"));
    Ok(Engine { image: get("IMAGE="), live: get("LIVE_IMAGE="), base: get("BASE_IMAGE=") })
}

fn podman(args: &[&str]) -> Output {
    Command::new("podman").args(args).output().expect("run podman")
}

fn podman_ok(args: &[&str]) -> String {
    let out = podman(args);
    assert!(out.status.success(), "podman {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A directory the pod's uids can reach (a tempdir is 0700).
fn host_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn chown(path: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap_or_else(|e| panic!("chown {}: {e}", path.display()));
}

fn manifest(name: &str) -> Yaml {
    let path = knot_samples::workspace_root().join("deploy/k8s").join(name);
    serde_yaml_ng::from_str(&fs::read_to_string(&path).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn key(k: &str) -> Yaml {
    Yaml::String(k.to_string())
}

/// Every container of a pod spec (init containers too).
fn containers(spec: &mut Yaml) -> impl Iterator<Item = &mut Yaml> {
    let mut all = Vec::new();
    if let Yaml::Mapping(m) = spec {
        for (k, v) in m.iter_mut() {
            if (k == &key("containers") || k == &key("initContainers"))
                && let Yaml::Sequence(s) = v
            {
                all.extend(s.iter_mut());
            }
        }
    }
    all.into_iter()
}

fn container<'a>(pod: &'a mut Yaml, name: &str) -> &'a mut Yaml {
    containers(&mut pod["spec"]).find(|c| c["name"].as_str() == Some(name)).unwrap_or_else(|| panic!("no container {name}"))
}

/// A Job's or Deployment's pod template as a Pod for `podman kube play`, made local (see the
/// file's comment): `host` maps volume names to host directories.
fn pod_of(workload: &Yaml, name: &str, engine: &Engine, host: &[(&str, &Path)]) -> Yaml {
    let template = &workload["spec"]["template"];
    let mut metadata = template["metadata"].clone();
    metadata["name"] = Yaml::String(name.into());
    let mut pod = Yaml::Mapping(Mapping::new());
    pod["apiVersion"] = "v1".into();
    pod["kind"] = "Pod".into();
    pod["metadata"] = metadata;
    pod["spec"] = template["spec"].clone();
    let spec = &mut pod["spec"];
    // A Deployment's pods restart their containers (`Always`); podman 4.3 applies that to init
    // containers too and restarts them for ever (podman issue 16343, fixed in 4.4).
    if workload["kind"] == key("Deployment") {
        spec["restartPolicy"] = "Never".into();
    }

    for c in containers(spec) {
        let image = c["image"].as_str().unwrap_or_default().to_string();
        c["image"] = Yaml::String(match image.rsplit('/').next().unwrap_or_default() {
            "knot:0.1.0" => engine.image.clone(),
            "knot:0.1.0-live" => engine.live.clone(),
            i if i.starts_with("my-app:") => engine.base.clone(),
            other => panic!("an image this test does not know: {other}"),
        });
        if let Some(Yaml::Sequence(args)) = c.get_mut("args") {
            for a in args.iter_mut() {
                if a.as_str() == Some("--settle-secs=30") || a.as_str() == Some("--settle-secs=10") {
                    *a = "--settle-secs=2".into();
                }
                if a.as_str() == Some("--interval-secs=10") {
                    *a = "--interval-secs=2".into();
                }
            }
        }
    }

    // Volumes: claims → host directories, emptyDirs named for this pod, subPaths → their own hostPath.
    let mut volumes: Vec<Yaml> = spec["volumes"].as_sequence().cloned().unwrap_or_default();
    let mut host_paths: Vec<(String, PathBuf)> = Vec::new();
    for v in volumes.iter_mut() {
        let vname = v["name"].as_str().unwrap().to_string();
        if let Some((_, dir)) = host.iter().find(|(n, _)| *n == vname) {
            let mut hp = Yaml::Mapping(Mapping::new());
            hp["path"] = Yaml::String(dir.display().to_string());
            hp["type"] = "Directory".into();
            let mut nv = Yaml::Mapping(Mapping::new());
            nv["name"] = Yaml::String(vname.clone());
            nv["hostPath"] = hp;
            *v = nv;
            host_paths.push((vname, dir.to_path_buf()));
        } else if v.get("emptyDir").is_some() {
            v["name"] = Yaml::String(format!("{name}-{vname}"));
        } else {
            panic!("a volume this test does not know: {v:?}");
        }
    }
    for c in containers(spec) {
        let Some(Yaml::Sequence(mounts)) = c.get_mut("volumeMounts") else { continue };
        for m in mounts.iter_mut() {
            let vname = m["name"].as_str().unwrap().to_string();
            if let Some(sub) = m.get("subPath").and_then(Yaml::as_str).map(str::to_string) {
                let (_, dir) = host_paths.iter().find(|(n, _)| *n == vname).unwrap_or_else(|| panic!("subPath {sub} on {vname}, not a host directory"));
                let sub_name = format!("{vname}-{sub}");
                if !volumes.iter().any(|v| v["name"].as_str() == Some(&sub_name)) {
                    let mut hp = Yaml::Mapping(Mapping::new());
                    hp["path"] = Yaml::String(dir.join(&sub).display().to_string());
                    hp["type"] = "Directory".into();
                    let mut nv = Yaml::Mapping(Mapping::new());
                    nv["name"] = Yaml::String(sub_name.clone());
                    nv["hostPath"] = hp;
                    volumes.push(nv);
                }
                m["name"] = Yaml::String(sub_name);
                if let Yaml::Mapping(mm) = m {
                    mm.remove("subPath");
                }
            } else if !host_paths.iter().any(|(n, _)| *n == vname) {
                m["name"] = Yaml::String(format!("{name}-{vname}"));
            }
        }
    }
    spec["volumes"] = Yaml::Sequence(volumes);
    pod
}

/// A pod played by podman; removed (with its volumes) when dropped.
struct Played {
    name: String,
    volumes: Vec<String>,
    _yaml: tempfile::NamedTempFile,
}

impl Drop for Played {
    fn drop(&mut self) {
        let _ = podman(&["pod", "rm", "-f", "-t", "0", &self.name]);
        for v in &self.volumes {
            let _ = podman(&["volume", "rm", "-f", v]);
        }
    }
}

impl Played {
    fn container(&self, c: &str) -> String {
        format!("{}-{c}", self.name)
    }

    /// Waits for container `c` to exit (at most `limit`), and gives its exit status.
    fn wait(&self, c: &str, limit: Duration) -> i32 {
        let started = Instant::now();
        loop {
            let state = podman_ok(&["inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", &self.container(c)]);
            let mut words = state.split_whitespace();
            if words.next() == Some("exited") {
                return words.next().and_then(|s| s.parse().ok()).unwrap_or(-1);
            }
            assert!(started.elapsed() < limit, "{} still {state} after {limit:?}; its log: {}", self.container(c), self.logs(c));
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// `podman logs`: the container's standard output and error, as `kubectl logs` shows them.
    fn logs(&self, c: &str) -> String {
        let out = podman(&["logs", &self.container(c)]);
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    }

    /// Standard output alone (`--log-format json`'s lines).
    fn stdout(&self, c: &str) -> String {
        String::from_utf8_lossy(&podman(&["logs", &self.container(c)]).stdout).into_owned()
    }

    /// The container's process as the host sees it: `/proc/PID/status`.
    fn status(&self, c: &str) -> String {
        let pid = podman_ok(&["inspect", "--format", "{{.State.Pid}}", &self.container(c)]);
        fs::read_to_string(format!("/proc/{}/status", pid.trim())).unwrap_or_default()
    }
}

fn play(pod: &Yaml) -> Played {
    let name = pod["metadata"]["name"].as_str().unwrap().to_string();
    let volumes = pod["spec"]["volumes"].as_sequence().into_iter().flatten().filter(|v| v.get("emptyDir").is_some()).filter_map(|v| v["name"].as_str().map(str::to_string)).collect();
    let mut yaml = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut yaml, serde_yaml_ng::to_string(pod).unwrap().as_bytes()).unwrap();
    let _ = podman(&["pod", "rm", "-f", "-t", "0", &name]);
    let played = Played { name, volumes, _yaml: yaml };
    let mut out = podman(&["kube", "play", played._yaml.path().to_str().unwrap()]);
    // podman 4.3 races removing a finished init container (podman issue 18477, fixed in 4.6): play again.
    for _ in 0..3 {
        if out.status.success() || !String::from_utf8_lossy(&out.stderr).contains("failed to remove once init container") {
            break;
        }
        eprintln!("podman kube play: {}; again", String::from_utf8_lossy(&out.stderr).trim());
        let _ = podman(&["pod", "rm", "-f", "-t", "0", &played.name]);
        out = podman(&["kube", "play", played._yaml.path().to_str().unwrap()]);
    }
    assert!(out.status.success(), "podman kube play: {}\n{}", String::from_utf8_lossy(&out.stderr), serde_yaml_ng::to_string(pod).unwrap());
    played
}

/// A name no other test (or test run) uses at the same time.
fn pod_name(what: &str) -> String {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    format!("knot-test-{what}-{}-{}", std::process::id(), N.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
}

/// The manifest's memory limit in bytes (`2Gi`).
fn bytes(q: &str) -> u64 {
    let (n, unit) = q.split_at(q.find(|c: char| !c.is_ascii_digit()).unwrap_or(q.len()));
    n.parse::<u64>().unwrap() * match unit {
        "Gi" => 1 << 30,
        "Mi" => 1 << 20,
        "" => 1,
        u => panic!("unit {u}"),
    }
}

/// The effective capabilities of a process as names, from its `/proc/PID/status` (`CapEff`).
fn capabilities(status: &str) -> Vec<&'static str> {
    const NAMES: [(u32, &str); 3] = [(19, "SYS_PTRACE"), (21, "SYS_ADMIN"), (1, "DAC_OVERRIDE")];
    let bits = status.lines().find_map(|l| l.strip_prefix("CapEff:")).map(|h| u64::from_str_radix(h.trim(), 16).unwrap()).expect("CapEff");
    let mut names: Vec<&str> = NAMES.iter().filter(|(b, _)| bits & (1 << b) != 0).map(|(_, n)| *n).collect();
    if bits & !NAMES.iter().fold(0u64, |m, (b, _)| m | 1 << b) != 0 {
        names.push("others");
    }
    names
}

/// The uid a process runs as (`Uid:` real, effective, …).
fn uid(status: &str) -> u32 {
    status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|l| l.split_whitespace().nth(1)).and_then(|u| u.parse().ok()).expect("Uid")
}

/// Settings a cluster applies, as podman applied them to a container: the root file system,
/// the memory limit, the user.
fn inspect(played: &Played, c: &str) -> (bool, u64, String) {
    let s = podman_ok(&["inspect", "--format", "{{.HostConfig.ReadonlyRootfs}} {{.HostConfig.Memory}} {{.Config.User}}", &played.container(c)]);
    let w: Vec<&str> = s.split_whitespace().collect();
    (w[0] == "true", w[1].parse().unwrap(), w.get(2).unwrap_or(&"").to_string())
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn mtime(p: &Path) -> SystemTime {
    fs::metadata(p).and_then(|m| m.modified()).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// `knot analyze` in the image, on a committed dump mounted read-only at the path it has here,
/// gives the JSON the host's knot gives.
#[test]
fn analyze_in_the_image_equals_the_host() {
    let Some(engine) = engine() else { return };
    let root = knot_samples::workspace_root();
    let dumps = root.join("samples/dumps");
    let core = dumps.join("abba/kernel/core.gz");
    let args = [
        "analyze".to_string(),
        core.display().to_string(),
        "--sysroot".into(),
        dumps.join("sysroot").display().to_string(),
        "--debug-dir".into(),
        dumps.join("debug").display().to_string(),
        "--search-dir".into(),
        dumps.join("abba/kernel").display().to_string(),
        "--format".into(),
        "json".into(),
    ];
    let host = Command::new(env!("CARGO_BIN_EXE_knot")).args(&args).output().unwrap();
    assert!(host.status.success(), "{}", String::from_utf8_lossy(&host.stderr));
    let mount = format!("{0}:{0}:ro", dumps.display());
    let mut run = vec!["run", "--rm", "--read-only", "--network=none", "--cap-drop=ALL", "-v", &mount, &engine.image];
    run.extend(args.iter().map(String::as_str));
    let image = podman(&run);
    assert!(image.status.success(), "{}", String::from_utf8_lossy(&image.stderr));
    let (h, i): (serde_json::Value, serde_json::Value) = (serde_json::from_slice(&host.stdout).unwrap(), serde_json::from_slice(&image.stdout).unwrap());
    assert_eq!(i["verdict"], "deadlock");
    assert_eq!(h, i, "the image's report differs from the host's");
    assert_eq!(String::from_utf8_lossy(&image.stdout), String::from_utf8_lossy(&host.stdout));

    // The image holds the binary, glibc and libgcc: no shell; it runs as uid 65532.
    let version = podman_ok(&["run", "--rm", &engine.image, "--version"]);
    assert_eq!(version.trim(), format!("knot {}", env!("CARGO_PKG_VERSION")));
    assert!(!podman(&["run", "--rm", "--entrypoint", "/bin/sh", &engine.image, "-c", "true"]).status.success(), "the image has a shell");
    assert_eq!(podman_ok(&["image", "inspect", "--format", "{{.Config.User}}", &engine.image]).trim(), "65532:65532");
}

/// The Job of deploy/k8s/knot-job.yaml, its pod template played as a Pod over a host directory of
/// committed dumps: it exits 0 with a report for each dump equal to `knot analyze`'s; a broken
/// dump and another uid's mode-0600 kernel core get error files (the latter saying what to set)
/// and the status of a failure, at once; a run with nothing new redoes nothing.
#[test]
fn the_job_analyzes_a_dump_volume() {
    let Some(engine) = engine() else { return };
    let job = manifest("knot-job.yaml");
    let volume = host_dir();
    let dumps = volume.path();
    let reports = dumps.join("knot");
    fs::create_dir(&reports).unwrap();
    // What the kubelet's fsGroup does for a volume it manages; a hostPath (or NFS) needs it done.
    chown(&reports, 65532, 65532);
    let abba = common::committed("abba", DumpKind::Kernel);
    fs::copy(&abba.core, dumps.join("core.abba")).unwrap();
    let crash_gz = knot_samples::workspace_root().join("samples/dumps/crash_null/kernel/core.gz");
    fs::copy(&crash_gz, dumps.join("core.crash_null.gz")).unwrap();
    fs::write(dumps.join("notes.txt"), "not a dump").unwrap();

    let run = |what: &str| {
        let played = play(&pod_of(&job, &pod_name(what), engine, &[("dumps", dumps)]));
        let status = played.wait("knot", Duration::from_secs(120));
        let log = played.logs("knot");
        eprintln!("job pod ({what}): exit {status}\n{log}");
        (played, status, log)
    };

    let (played, status, log) = run("job");
    assert_eq!(status, 0, "{log}");
    assert!(log.contains("2 analyzed (1 with a deadlock), 0 could not be analyzed"), "{log}");
    assert!(log.contains("notes.txt: skipped"), "{log}");
    let lines: Vec<serde_json::Value> = played.stdout("knot").lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.iter().filter(|l| l["result"] == "analyzed").count(), 2, "one JSON line per dump: {log}");
    // As a cluster runs it: the manifest's uid, a read-only root, no capabilities, its memory limit.
    let (read_only, memory, user) = inspect(&played, "knot");
    let spec = &job["spec"]["template"]["spec"];
    let knot_container = &spec["containers"][0];
    assert!(read_only && knot_container["securityContext"]["readOnlyRootFilesystem"] == Yaml::Bool(true));
    assert_eq!(memory, bytes(knot_container["resources"]["limits"]["memory"].as_str().unwrap()));
    assert_eq!(user.split(':').next(), Some(spec["securityContext"]["runAsUser"].as_u64().unwrap().to_string().as_str()));
    assert_eq!(podman_ok(&["inspect", "--format", "{{.EffectiveCaps}}", &played.container("knot")]).trim(), "[]", "capabilities: drop ALL");
    drop(played);

    // Each report equals `knot analyze`'s on the same dump with the same files: the image, the
    // dump directory read-only at /dumps and the application image's files at /sysroot.
    let mount = format!("{}:/dumps:ro", dumps.display());
    let sysroot = format!("type=image,source={},target=/sysroot", engine.base);
    for d in ["core.abba", "core.crash_null.gz"] {
        let report = json(&reports.join(format!("{d}.knot.json")));
        let dump = format!("/dumps/{d}");
        let expected = podman_ok(&["run", "--rm", "--read-only", "--network=none", "-v", &mount, "--mount", &sysroot, &engine.image, "analyze", &dump, "--sysroot=/sysroot", "--format", "json"]);
        assert_eq!(report, serde_json::from_str::<serde_json::Value>(&expected).unwrap(), "{d}: the Job's report differs from knot analyze's");
        let marker = json(&reports.join(format!("{d}.knot.done")));
        assert_eq!(marker["result"], "ok", "{marker}");
        assert_eq!(marker["size"].as_u64(), Some(fs::metadata(dumps.join(d)).unwrap().len()));
        assert!(!reports.join(format!("{d}.knot.running")).exists());
    }
    assert_eq!(json(&reports.join("core.abba.knot.json"))["verdict"], "deadlock");
    assert_eq!(json(&reports.join("core.crash_null.gz.knot.json"))["verdict"], "crash");
    assert_eq!(fs::read_dir(dumps).unwrap().count(), 4, "only the dumps, notes.txt and knot/ are in the dump directory");
    let first = mtime(&reports.join("core.abba.knot.json"));

    // A broken dump, and a kernel core of another uid (mode 0600) that uid 65532 may not read.
    fs::write(dumps.join("core.broken.gz"), b"\x1f\x8b\x08\x00garbage, garbage, garbage").unwrap();
    let foreign = dumps.join("core.other-uid");
    fs::copy(&abba.core, &foreign).unwrap();
    chown(&foreign, 4242, 4242);
    fs::set_permissions(&foreign, fs::Permissions::from_mode(0o600)).unwrap();
    let started = Instant::now();
    let (_played, status, log) = run("job-errors");
    assert_eq!(status, 1, "some dump could not be analyzed: {log}");
    assert!(started.elapsed() < Duration::from_secs(60), "the pod took {:?}: a permission error is final", started.elapsed());
    assert!(log.contains("0 analyzed (0 with a deadlock), 2 could not be analyzed"), "{log}");
    assert!(!log.contains("trying again"), "{log}");
    let broken = fs::read_to_string(reports.join("core.broken.gz.knot.error.txt")).unwrap();
    assert!(broken.contains("could not analyze this dump"), "{broken}");
    let denied = fs::read_to_string(reports.join("core.other-uid.knot.error.txt")).unwrap();
    for words in ["Permission denied", "owned by uid 4242", "mode 0600", "runs as uid 65532", "runAsUser: 4242", "fsGroup"] {
        assert!(denied.contains(words), "{words:?} not in {denied}");
    }
    assert_eq!(json(&reports.join("core.other-uid.knot.done"))["result"], "error");
    assert_eq!(mtime(&reports.join("core.abba.knot.json")), first, "a report was written again");

    // Nothing new: nothing is redone, and nothing failed.
    let (_played, status, log) = run("job-again");
    assert_eq!(status, 0, "{log}");
    assert!(log.contains("0 analyzed (0 with a deadlock), 0 could not be analyzed"), "{log}");
    assert_eq!(mtime(&reports.join("core.abba.knot.json")), first, "a report was written again");
}

/// The same permission error without a container engine: `knot watch --once` run as uid 65532
/// (as root can start it) beside a mode-0600 core of uid 4242 writes the error file at once.
#[test]
fn a_core_of_another_uid_gets_an_error_file_saying_what_to_set() {
    if !is_root() {
        knot_samples::skipped("skipping: running knot as another uid needs root");
        return;
    }
    let abba = common::committed("abba", DumpKind::Kernel);
    let dir = host_dir();
    chown(dir.path(), 65532, 65532);
    let core = dir.path().join("core.4242");
    fs::copy(&abba.core, &core).unwrap();
    chown(&core, 4242, 4242);
    fs::set_permissions(&core, fs::Permissions::from_mode(0o600)).unwrap();
    let knot = PathBuf::from(env!("CARGO_BIN_EXE_knot"));
    // The binary must be reachable by uid 65532 (it is, under a world-readable checkout).
    if fs::metadata(&knot).map(|m| m.mode() & 0o001 == 0).unwrap_or(true) {
        knot_samples::skipped("skipping: the knot binary is not executable by other uids here");
        return;
    }
    let started = Instant::now();
    let mut child = Command::new(&knot)
        .args(["watch", "--once", "--settle-secs", "0"])
        .arg(dir.path())
        .uid(65532)
        .gid(65532)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Before issue 31 it retried for minutes: stop it after 30 s, and fail.
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("knot watch --once still running after 30 s: {}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert!(log.contains("0 analyzed (0 with a deadlock), 1 could not be analyzed"), "{log}");
    let error = fs::read_to_string(dir.path().join("core.4242.knot.error.txt")).unwrap();
    assert!(error.contains("runAsUser: 4242") && error.contains("fsGroup") && error.contains("Permission denied"), "{error}");
}

/// The host directory behind a pod's `emptyDir` (podman makes it a named volume).
fn volume_dir(played: &Played, volume: &str) -> PathBuf {
    PathBuf::from(podman_ok(&["volume", "inspect", "--format", "{{.Mountpoint}}", &format!("{}-{volume}", played.name)]).trim())
}

/// Adds a read-only `hostPath` volume at `at` in container `c`: what a stand-in application
/// brings with it (its program, the dump it drops).
fn add_host_volume(pod: &mut Yaml, c: &str, name: &str, dir: &Path, at: &str) {
    let mut hp = Yaml::Mapping(Mapping::new());
    hp["path"] = Yaml::String(dir.display().to_string());
    hp["type"] = "Directory".into();
    let mut v = Yaml::Mapping(Mapping::new());
    v["name"] = Yaml::String(name.into());
    v["hostPath"] = hp;
    pod["spec"]["volumes"].as_sequence_mut().unwrap().push(v);
    let mut m = Yaml::Mapping(Mapping::new());
    m["name"] = Yaml::String(name.into());
    m["mountPath"] = Yaml::String(at.into());
    m["readOnly"] = Yaml::Bool(true);
    let c = container(pod, c);
    if c.get("volumeMounts").is_none() {
        c["volumeMounts"] = Yaml::Sequence(Vec::new());
    }
    c["volumeMounts"].as_sequence_mut().unwrap().push(m);
}

fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    started.elapsed()
}

/// deploy/k8s/knot-watch-sidecar.yaml beside a stand-in application that drops a kernel core
/// (mode 0600, its own uid) into the shared volume while the pod runs: the report appears within
/// the settle time and a scan, and `podman logs` (`kubectl logs`) has one line for the dump.
#[test]
fn the_watch_sidecar_analyzes_a_dump_the_application_drops() {
    let Some(engine) = engine() else { return };
    let deployment = manifest("knot-watch-sidecar.yaml");
    let name = pod_name("watch");
    let mut pod = pod_of(&deployment, &name, engine, &[]);
    let samples = knot_samples::workspace_root().join("samples/dumps/crash_null/kernel");
    add_host_volume(&mut pod, "app", "samples", &samples, "/samples");
    // The application runs a while, then "crashes": its core appears in /dumps as the kernel
    // writes one (in one go, mode 0600, owned by the application's uid).
    container(&mut pod, "app")["command"] = serde_yaml_ng::from_str(
        r#"["sh", "-c", "ulimit -c unlimited && sleep 3 && zcat /samples/core.gz > /dumps/.partial && chmod 600 /dumps/.partial && mv /dumps/.partial /dumps/core.my-app.25601 && exec sleep 600"]"#,
    )
    .unwrap();
    let args = container(&mut pod, "knot")["args"].as_sequence_mut().unwrap();
    let interval = args.iter().find_map(|a| a.as_str()?.strip_prefix("--interval-secs=")?.parse::<u64>().ok()).expect("--interval-secs");
    let settle = args.iter().find_map(|a| a.as_str()?.strip_prefix("--settle-secs=")?.parse::<u64>().ok()).expect("--settle-secs");
    let played = play(&pod);
    let dumps = volume_dir(&played, "dumps");
    let dump = dumps.join("core.my-app.25601");
    wait_for("the application's dump", Duration::from_secs(60), || dump.exists());
    let report = dumps.join("core.my-app.25601.knot.json");
    // Found at the next scan, complete after the settle time, then analyzed.
    let took = wait_for("the report", Duration::from_secs(interval + settle + 60), || report.exists());
    eprintln!("report {took:?} after the dump appeared (settle {settle}s, scan every {interval}s)");
    let meta = fs::metadata(&dump).unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o777), (10001, 0o600), "a kernel core's owner and mode");
    let v = json(&report);
    assert_eq!(v["verdict"], "crash");
    assert_eq!(v["crash"]["kind"], "fault");
    assert!(dumps.join("core.my-app.25601.knot.done").exists());

    // As a cluster runs it: the pod's uid, no capabilities, a read-only root.
    let status = played.status("knot");
    assert_eq!(uid(&status), 10001, "{status}");
    assert!(capabilities(&status).is_empty(), "{status}");
    assert!(inspect(&played, "knot").0, "a read-only root file system");

    let log = played.logs("knot");
    eprintln!("{log}");
    assert_eq!(log.lines().filter(|l| l.contains("core.my-app.25601")).count(), 1, "one line for the dump: {log}");
    // The manifest asks for JSON lines: the one for the dump carries the report's keys.
    let lines: Vec<serde_json::Value> = played.stdout("knot").lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect();
    assert_eq!(lines.len(), 1, "{log}");
    assert_eq!(lines[0]["dump"], "core.my-app.25601");
    assert_eq!(lines[0]["verdict_signature"], v["verdict_signature"]);
    assert_eq!(lines[0]["crash"]["signature"], v["crash"]["signature"]);
    assert_eq!(lines[0]["output"], "/dumps/core.my-app.25601.knot.json");

    // Stopped as the kubelet stops it (SIGTERM): knot exits 0.
    podman_ok(&["stop", "-t", "10", &played.container("knot")]);
    assert_eq!(played.wait("knot", Duration::from_secs(20)), 0);
}

/// deploy/k8s/knot-live-sidecar.yaml beside a stand-in application that wedges (the committed
/// ABBA sample, as the manifest's `/app/my-app`, uid 10001): its health probe fails, and the
/// sidecar — root with SYS_PTRACE and no other capability, sharing the pod's process namespace —
/// reads it across containers with `knot pid` and reports the deadlock.
#[test]
fn the_live_sidecar_reads_the_wedged_application_across_containers() {
    let Some(engine) = engine() else { return };
    let deployment = manifest("knot-live-sidecar.yaml");
    let name = pod_name("live");
    let mut pod = pod_of(&deployment, &name, engine, &[]);
    assert_eq!(pod["spec"]["shareProcessNamespace"], Yaml::Bool(true));
    let app_dir = host_dir();
    fs::copy(knot_samples::workspace_root().join("samples/dumps/abba/kernel/abba"), app_dir.path().join("my-app")).unwrap();
    add_host_volume(&mut pod, "app", "app", app_dir.path(), "/app");
    container(&mut pod, "app")["command"] = serde_yaml_ng::from_str(r#"["/app/my-app"]"#).unwrap();
    // Probe every second instead of every ten: the same loop, sooner.
    let env = container(&mut pod, "knot")["env"].as_sequence_mut().unwrap();
    let failures = env.iter().find(|e| e["name"] == key("FAILURES")).and_then(|e| e["value"].as_str()?.parse::<usize>().ok()).expect("FAILURES");
    for e in env.iter_mut() {
        if e["name"] == key("INTERVAL") {
            e["value"] = "1".into();
        }
    }
    let played = play(&pod);
    let reports = volume_dir(&played, "reports");
    let report = || fs::read_dir(&reports).ok()?.flatten().map(|e| e.path()).find(|p| p.to_string_lossy().ends_with(".knot.json"));
    wait_for("the live report", Duration::from_secs(90), || report().is_some());
    // The report is renamed into place whole; the log line follows it.
    wait_for("the log line", Duration::from_secs(10), || played.logs("knot").contains("read live:"));
    let log = played.logs("knot");
    eprintln!("{log}");
    // (A probe loop that started before the application found no process after its failures, and
    // began again: so a multiple.)
    assert!(log.contains(&format!("health probe failed ({failures} of {failures})\nknot-live: pid")), "{log}");
    assert_eq!(log.matches("health probe failed").count() % failures, 0, "{log}");
    let v = json(&report().unwrap());
    assert_eq!(v["verdict"], "deadlock", "{log}");
    let pid = v["live"]["pid"].as_u64().unwrap();
    assert!(log.contains(&format!("pid {pid} read live: deadlock")), "{log}");
    assert_eq!(v["deadlocks"][0]["tids"].as_array().map(Vec::len), Some(2));
    // The names come from the application's own files, through /proc/PID/root.
    assert!(v["locks"].as_array().unwrap().iter().any(|l| l["name"] == "lock_a"), "{}", v["locks"]);

    // As a cluster runs it: root with SYS_PTRACE alone, a read-only root; the application as
    // uid 10001, still running and no longer traced.
    let status = played.status("knot");
    assert_eq!((uid(&status), capabilities(&status)), (0, vec!["SYS_PTRACE"]), "{status}");
    assert!(inspect(&played, "knot").0, "a read-only root file system");
    let app = played.status("app");
    assert_eq!(uid(&app), 10001, "{app}");
    assert!(app.lines().any(|l| l.starts_with("TracerPid:") && l.ends_with("\t0")), "{app}");
}

/// deploy/knot-live-watch.sh logs on after a healthy probe: the application answers twice, then
/// stops listening, and each failure is in the log (before, the first probe that connected sent
/// the loop's stderr — its log — to /dev/null for good).
#[test]
fn the_live_loop_logs_failures_after_healthy_probes() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        for stream in listener.incoming().take(2) {
            let mut s = stream.unwrap();
            let mut buf = [0u8; 512];
            let _ = std::io::Read::read(&mut s, &mut buf);
            let _ = std::io::Write::write_all(&mut s, b"HTTP/1.0 200 OK\r\n\r\nok");
        }
        // Dropped: the port refuses connections from now on.
    });
    let out = Command::new("bash")
        .arg(knot_samples::workspace_root().join("deploy/knot-live-watch.sh"))
        .env("HEALTH_PORT", port.to_string())
        .env("INTERVAL", "0")
        .env("FAILURES", "3")
        .env("PROCESS", "no-such-application-knot-test")
        .env("ONCE", "1")
        .output()
        .unwrap();
    // The server is not joined: a loop that died early would leave it waiting.
    drop(server);
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{log}");
    for n in 1..=3 {
        assert!(log.contains(&format!("health probe failed ({n} of 3)")), "{log}");
    }
    assert!(log.contains("no process matches PROCESS=no-such-application-knot-test"), "{log}");
}

/// `knot watch --log-format json`: one JSON object per dump on stdout, valid against the committed
/// schema (`knot schema --watch-line`), carrying the report's verdict, keys and thread count, or
/// the error file's text; the per-dump text lines are not written besides.
#[test]
fn watch_json_lines_match_their_schema_and_the_reports() {
    let root = knot_samples::workspace_root();
    let schema_path = root.join("docs/schema/watch-line-v2.schema.json");
    let committed = fs::read_to_string(&schema_path).unwrap();
    let printed = Command::new(env!("CARGO_BIN_EXE_knot")).args(["schema", "--watch-line"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&printed.stdout), committed, "{} is not what `knot schema --watch-line` prints: a changed shape is a new version", schema_path.display());
    let validator = jsonschema::validator_for(&serde_json::from_str(&committed).unwrap()).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let abba = common::committed("abba", DumpKind::Kernel);
    fs::copy(&abba.core, dir.path().join("core.abba")).unwrap();
    fs::copy(root.join("samples/dumps/crash_null/kernel/core.gz"), dir.path().join("core.crash.gz")).unwrap();
    fs::write(dir.path().join("core.broken.gz"), b"\x1f\x8b\x08\x00garbage, garbage, garbage").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_knot"))
        .args(["watch", "--once", "--settle-secs", "0", "--log-format", "json", "--sysroot"])
        .arg(root.join("samples/dumps/sysroot"))
        .arg(dir.path())
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("core.abba") && !stderr.contains("→"), "per-dump text lines besides the JSON: {stderr}");
    assert!(stderr.contains("2 analyzed (1 with a deadlock), 1 could not be analyzed"), "{stderr}");
    let lines: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    for line in &lines {
        let errors: Vec<String> = validator.iter_errors(line).map(|e| format!("{e} at {}", e.instance_path())).collect();
        assert!(errors.is_empty(), "{line}: {errors:?}");
        assert_eq!(line["schema_version"], 2);
        assert_eq!(line["knot_version"], env!("CARGO_PKG_VERSION"));
        assert!(line["time"].as_str().is_some_and(|t| t.len() == 20 && t.ends_with('Z')), "{line}");
        let dump = line["dump"].as_str().unwrap();
        assert_eq!(line["dump_path"], dir.path().join(dump).display().to_string());
        if line["result"] == "analyzed" {
            let report = json(Path::new(line["output"].as_str().unwrap()));
            assert_eq!(line["output"], dir.path().join(format!("{dump}.knot.json")).display().to_string());
            for k in ["verdict", "verdict_signature"] {
                assert_eq!(line[k], report[k], "{k} of {dump}");
            }
            assert_eq!(line["threads"].as_u64(), report["threads"].as_array().map(|t| t.len() as u64));
            assert_eq!(line["deadlocks"].as_u64(), report["deadlocks"].as_array().map(|t| t.len() as u64));
            assert_eq!(line["crash"]["kind"], report["crash"]["kind"]);
            assert_eq!(line["crash"]["signature"], report["crash"]["signature"]);
            assert_eq!(line["report_schema_version"], report["schema_version"]);
        } else {
            assert_eq!(line["result"], "error");
            let error = fs::read_to_string(line["output"].as_str().unwrap()).unwrap();
            assert_eq!(line["error"].as_str().map(str::trim), Some(error.trim()));
            assert!(line["verdict"].is_null() && line["verdict_signature"].is_null(), "{line}");
        }
    }
    let by_dump = |d: &str| lines.iter().find(|l| l["dump"] == d).unwrap_or_else(|| panic!("no line for {d}: {stdout}"));
    assert_eq!(by_dump("core.abba")["verdict"], "deadlock");
    assert!(by_dump("core.abba")["crash"].is_object(), "the kernel core records SIGABRT");
    assert_eq!(by_dump("core.crash.gz")["crash"]["kind"], "fault");
    assert_eq!(by_dump("core.broken.gz")["result"], "error");
}
