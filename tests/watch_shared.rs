//! Issue 35: several `knot watch` over one volume. Each dump is analyzed by exactly one of them
//! (the one that holds its claim, a lock on `D.knot.running`); the others skip it while it is
//! held, without counting it as failed; a watcher killed mid-dump still gets its "knot died" error
//! file from the next one. Mid-dump is made deterministic with the test hook
//! `KNOT_WATCH_TEST_HOLD` (a FIFO the holder reads before it reads the dump), not a sleep.

mod common;

use knot_samples::{DumpKind, SampleDump};
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(180);

fn abba() -> SampleDump {
    common::committed("abba", DumpKind::Kernel)
}

/// `n` dumps in a new directory: the committed ABBA core, hard-linked under `core.00`, `core.01`, …
/// (each name is a dump of its own to knot; one copy on disk).
fn dumps(d: &SampleDump, n: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("core.00");
    fs::copy(&d.core, &first).unwrap();
    for i in 1..n {
        fs::hard_link(&first, dir.path().join(format!("core.{i:02}"))).unwrap();
    }
    dir
}

/// `knot watch DIR --once`, its files given, with a section cache warmed once by the test (so
/// each analysis is a few milliseconds of work, not an inflation of libc's debug sections).
fn watch_cmd(d: &SampleDump, dir: &Path, cache: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_knot"));
    cmd.arg("watch").arg(dir).args(["--once", "--settle-secs", "0", "--interval-secs", "1"]);
    lookup_args(&mut cmd, d, cache);
    cmd
}

fn lookup_args(cmd: &mut Command, d: &SampleDump, cache: &Path) {
    cmd.arg("--exe").arg(&d.binary).arg("--cache-dir").arg(cache);
    if let Some(s) = &d.sysroot {
        cmd.arg("--sysroot").arg(s);
    }
    if let Some(p) = d.binary.parent() {
        cmd.arg("--search-dir").arg(p);
    }
}

fn warm_cache(d: &SampleDump, cache: &Path) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_knot"));
    cmd.arg("analyze").arg(&d.core).args(["--format", "json"]);
    lookup_args(&mut cmd, d, cache);
    let out = cmd.output().expect("run knot analyze");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A running watcher whose log lines arrive on a channel as they are written.
struct Watcher {
    child: Child,
    lines: mpsc::Receiver<String>,
    log: Vec<String>,
}

impl Watcher {
    fn start(mut cmd: Command) -> Watcher {
        let mut child = cmd.stderr(Stdio::piped()).stdout(Stdio::null()).spawn().expect("start knot watch");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Watcher { child, lines, log: Vec::new() }
    }

    /// Waits for a log line containing `what` (and keeps every line read on the way).
    fn wait_for_line(&mut self, what: &str) -> String {
        let started = Instant::now();
        loop {
            let left = DEADLINE.checked_sub(started.elapsed()).unwrap_or_default();
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.log.push(line.clone());
                    if line.contains(what) {
                        return line;
                    }
                }
                Err(_) => panic!("no line with {what:?} from knot watch; its log:\n{}", self.log.join("\n")),
            }
        }
    }

    /// Waits for it to end: its exit status and whole log.
    fn finish(mut self) -> (Option<i32>, String) {
        let started = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("wait for knot watch") {
                break s;
            }
            if started.elapsed() > DEADLINE {
                let _ = self.child.kill();
                panic!("knot watch did not end; its log so far:\n{}", self.log.join("\n"));
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        // The reader thread ends at the pipe's end.
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(10)) {
            self.log.push(line);
        }
        (status.code(), self.log.join("\n"))
    }
}

/// The counts of a `--once` run's last line: analyzed, could not be analyzed, not written.
fn counts(log: &str) -> (usize, usize, usize) {
    let line = log.lines().rev().find(|l| l.contains(" analyzed (")).unwrap_or_else(|| panic!("no summary line in:\n{log}"));
    let numbers: Vec<usize> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect();
    // "N analyzed (D with a deadlock), F could not be analyzed, W not written"
    assert_eq!(numbers.len(), 4, "{line}");
    (numbers[0], numbers[2], numbers[3])
}

fn with_suffix(p: &Path, suffix: &str) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

fn names_ending(dir: &Path, suffix: &str) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).filter(|n| n.ends_with(suffix)).collect();
    v.sort();
    v
}

fn n_watchers_over_40_dumps(n: usize) {
    const DUMPS: usize = 40;
    let d = abba();
    let dir = dumps(&d, DUMPS);
    let cache = tempfile::tempdir().unwrap();
    warm_cache(&d, cache.path());
    // Started together, they list the same dumps in the same order: every dump is contended.
    let watchers: Vec<Watcher> = (0..n).map(|_| Watcher::start(watch_cmd(&d, dir.path(), cache.path()))).collect();
    let results: Vec<(Option<i32>, String)> = watchers.into_iter().map(Watcher::finish).collect();
    let all_logs = results.iter().enumerate().map(|(i, (s, log))| format!("watcher {i} ({s:?}):\n{log}")).collect::<Vec<_>>().join("\n");

    for (status, _) in &results {
        assert_eq!(*status, Some(0), "a watcher failed\n{all_logs}");
    }
    assert!(!all_logs.contains("died while"), "a live watcher was taken for dead\n{all_logs}");
    let (mut analyzed, mut failed, mut unwritten) = (0, 0, 0);
    for (_, log) in &results {
        let (a, f, w) = counts(log);
        analyzed += a;
        failed += f;
        unwritten += w;
    }
    assert_eq!((analyzed, failed, unwritten), (DUMPS, 0, 0), "the watchers' counts do not add up to one analysis per dump\n{all_logs}");
    for i in 0..DUMPS {
        let name = format!("core.{i:02}");
        let core = dir.path().join(&name);
        assert!(with_suffix(&core, ".knot.json").is_file() && with_suffix(&core, ".knot.done").is_file(), "{name}: no report or no marker\n{all_logs}");
        // Exactly one watcher wrote its report.
        let writers = results.iter().filter(|(_, log)| log.lines().any(|l| l.contains(&format!("{name}: DEADLOCK")))).count();
        assert_eq!(writers, 1, "{name} was analyzed by {writers} watchers\n{all_logs}");
    }
    assert!(names_ending(dir.path(), ".knot.error.txt").is_empty(), "error files: {:?}\n{all_logs}", names_ending(dir.path(), ".knot.error.txt"));
    assert!(names_ending(dir.path(), ".knot.running").is_empty(), "claims left behind: {:?}", names_ending(dir.path(), ".knot.running"));
}

#[test]
fn two_watchers_over_40_dumps_analyze_each_once() {
    n_watchers_over_40_dumps(2);
}

#[test]
fn four_watchers_over_40_dumps_analyze_each_once() {
    n_watchers_over_40_dumps(4);
}

#[test]
fn eight_watchers_over_40_dumps_analyze_each_once() {
    n_watchers_over_40_dumps(8);
}

/// A FIFO for [`KNOT_WATCH_TEST_HOLD`]: `hold` returns once a watcher is mid-dump, holding its
/// claim; dropping what it returns lets the watcher go on.
struct Hold {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Hold {
    fn new() -> Hold {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hold.fifo");
        let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo: {}", std::io::Error::last_os_error());
        Hold { path, _dir: dir }
    }

    /// Blocks until a watcher opens the FIFO, i.e. holds a claim and has not read its dump yet.
    /// The FIFO is then removed, so that the watcher's later dumps are not held.
    fn wait_for_holder(&self) -> fs::File {
        let (tx, rx) = mpsc::channel();
        let path = self.path.clone();
        std::thread::spawn(move || {
            let _ = tx.send(fs::OpenOptions::new().write(true).open(path));
        });
        let writer = rx.recv_timeout(DEADLINE).expect("no watcher reached its first dump").expect("open the FIFO");
        fs::remove_file(&self.path).unwrap();
        writer
    }
}

/// Two dumps; watcher A held mid-dump on the first (its claim held), then watcher B started.
fn a_holds_the_first_dump_and_b_waits(d: &SampleDump, dir: &Path, cache: &Path) -> (Watcher, fs::File, Watcher) {
    let hold = Hold::new();
    let mut a = watch_cmd(d, dir, cache);
    a.env("KNOT_WATCH_TEST_HOLD", &hold.path);
    let a = Watcher::start(a);
    let writer = hold.wait_for_holder();
    let mut b = Watcher::start(watch_cmd(d, dir, cache));
    b.wait_for_line("core.00: being analyzed by another knot");
    b.wait_for_line("core.01: DEADLOCK");
    (a, writer, b)
}

#[test]
fn a_dump_held_by_a_live_watcher_is_left_to_it() {
    let d = abba();
    let dir = dumps(&d, 2);
    let cache = tempfile::tempdir().unwrap();
    warm_cache(&d, cache.path());
    let (a, writer, b) = a_holds_the_first_dump_and_b_waits(&d, dir.path(), cache.path());
    let first = dir.path().join("core.00");
    // B has done the other dump and waits on this one, writing nothing for it.
    std::thread::sleep(Duration::from_millis(600));
    assert!(!with_suffix(&first, ".knot.json").exists() && !with_suffix(&first, ".knot.error.txt").exists());

    drop(writer);
    let (a_status, a_log) = a.finish();
    let (b_status, b_log) = b.finish();
    assert_eq!((a_status, b_status), (Some(0), Some(0)), "A:\n{a_log}\nB:\n{b_log}");
    assert_eq!(counts(&a_log), (1, 0, 0), "{a_log}");
    assert_eq!(counts(&b_log), (1, 0, 0), "{b_log}");
    assert!(a_log.contains("core.00: DEADLOCK"), "{a_log}");
    assert!(!with_suffix(&first, ".knot.error.txt").exists());
}

/// Issue 13's "knot died" error file, with a second watcher waiting: a watcher SIGKILLed while it
/// holds a dump (its claim released by the kernel, no report) gets the error file from the
/// watcher that was waiting on that dump, which does not read it.
#[test]
fn a_watcher_killed_mid_dump_gets_its_died_error_from_the_waiting_one() {
    let d = abba();
    let dir = dumps(&d, 2);
    let cache = tempfile::tempdir().unwrap();
    warm_cache(&d, cache.path());
    let (mut a, _writer, b) = a_holds_the_first_dump_and_b_waits(&d, dir.path(), cache.path());
    let a_pid = a.child.id();
    a.child.kill().expect("SIGKILL watcher A");
    let (a_status, _) = a.finish();
    assert_eq!(a_status, None, "A was not killed by a signal");

    let (b_status, b_log) = b.finish();
    assert_eq!(b_status, Some(1), "one dump could not be analyzed\n{b_log}");
    assert_eq!(counts(&b_log), (1, 1, 0), "{b_log}");
    let first = dir.path().join("core.00");
    let error = fs::read_to_string(with_suffix(&first, ".knot.error.txt")).expect("the dump A died on has an error file");
    assert!(error.contains("died while analyzing this dump") && error.contains(&format!("process {a_pid} ")), "{error}");
    assert!(!with_suffix(&first, ".knot.json").exists(), "B read the dump A died on");
    assert!(names_ending(dir.path(), ".knot.running").is_empty());
}

/// The image deploy/build-image.sh makes for this test's knot binary (issue 31's script; cached
/// by content, so a second test binary asking for it costs a `podman image exists`), or why not.
fn image() -> Result<String, String> {
    let on_path = |tool: &str| std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()));
    if !on_path("podman") {
        return Err("podman is not installed (`.ci/run` installs podman, runc and debootstrap)".into());
    }
    // SAFETY: geteuid cannot fail and touches no memory.
    if unsafe { libc::geteuid() } != 0 {
        return Err("the container test runs rootful podman, and this is not root".into());
    }
    let script = knot_samples::workspace_root().join("deploy/build-image.sh");
    let out = Command::new("bash").arg(&script).args(["--knot", env!("CARGO_BIN_EXE_knot")]).output().map_err(|e| format!("{}: {e}", script.display()))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        // No package mirror (debootstrap) is the machine's doing, not knot's: say so and skip.
        if stderr.contains("debootstrap failed") || stderr.contains("is missing") {
            return Err(format!("deploy/build-image.sh could not make the base: {}", stderr.trim()));
        }
        panic!("deploy/build-image.sh failed ({}): {stderr}", out.status);
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout.lines().find_map(|l| l.strip_prefix("IMAGE=")).map(str::to_string).ok_or_else(|| panic!("no IMAGE= in {stdout}"))
}

/// Two watchers in two containers (each its own PID namespace, as two pods on one node) over one
/// host directory, as the Job's pod runs them (the dumps read-only, reports in a writable
/// directory, uid 65532, a read-only root, no capabilities): each dump analyzed once, by one of
/// them; both exit 0; no "knot died".
#[test]
fn two_watchers_in_two_containers_over_one_host_directory_analyze_each_dump_once() {
    const DUMPS: usize = 16;
    let image = match image() {
        Ok(i) => i,
        Err(why) => return knot_samples::skipped(&format!("skipping: {why}")),
    };
    let d = abba();
    let dir = dumps(&d, DUMPS);
    let reports = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    // The pod's uid reaches the dumps and writes the reports.
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(dir.path().join("core.00"), fs::Permissions::from_mode(0o644)).unwrap();
    std::os::unix::fs::chown(reports.path(), Some(65532), Some(65532)).unwrap();
    // The sample's files at the paths the host uses, read-only (as an image volume would be).
    let files = knot_samples::workspace_root().join("samples/dumps");
    let files_mount = format!("{0}:{0}:ro", files.display());
    let dumps_mount = format!("{}:/dumps:ro", dir.path().display());
    let reports_mount = format!("{}:/reports", reports.path().display());
    let watcher = |i: usize| {
        let mut cmd = Command::new("podman");
        cmd.args(["run", "--rm", "--name", &format!("knot-watchers-{}-{i}", std::process::id())])
            .args(["--read-only", "--network=none", "--cap-drop=ALL", "--user", "65532:65532"])
            .args(["-v", &dumps_mount, "-v", &reports_mount, "-v", &files_mount, &image])
            .args(["watch", "/dumps", "--out", "/reports", "--once", "--settle-secs", "0", "--interval-secs", "1", "--exe"])
            .arg(&d.binary);
        if let Some(s) = &d.sysroot {
            cmd.arg("--sysroot").arg(s);
        }
        if let Some(dd) = &d.debug_dir {
            cmd.arg("--debug-dir").arg(dd);
        }
        cmd
    };
    let watchers: Vec<Watcher> = (0..2).map(|i| Watcher::start(watcher(i))).collect();
    let results: Vec<(Option<i32>, String)> = watchers.into_iter().map(Watcher::finish).collect();
    let all_logs = results.iter().enumerate().map(|(i, (s, log))| format!("container {i} ({s:?}):\n{log}")).collect::<Vec<_>>().join("\n");
    for (status, _) in &results {
        assert_eq!(*status, Some(0), "a watcher failed\n{all_logs}");
    }
    assert!(!all_logs.contains("died while"), "a live watcher was taken for dead\n{all_logs}");
    let analyzed: usize = results.iter().map(|(_, log)| counts(log).0).sum();
    let failed: usize = results.iter().map(|(_, log)| counts(log).1).sum();
    assert_eq!((analyzed, failed), (DUMPS, 0), "the containers' counts do not add up to one analysis per dump\n{all_logs}");
    for i in 0..DUMPS {
        let name = format!("core.{i:02}");
        let report = reports.path().join(format!("{name}.knot.json"));
        let v: serde_json::Value = serde_json::from_str(&fs::read_to_string(&report).unwrap_or_else(|e| panic!("{}: {e}\n{all_logs}", report.display()))).unwrap();
        assert_eq!(v["verdict"], "deadlock", "{name}");
        let writers = results.iter().filter(|(_, log)| log.lines().any(|l| l.contains(&format!("{name}: DEADLOCK")))).count();
        assert_eq!(writers, 1, "{name} was analyzed by {writers} containers\n{all_logs}");
    }
    assert!(names_ending(reports.path(), ".knot.error.txt").is_empty() && names_ending(reports.path(), ".knot.running").is_empty(), "{all_logs}");
}
