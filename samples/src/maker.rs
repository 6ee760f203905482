//! Build a sample, run it to its wedged state, dump it, record gdb's reading.

use crate::catalogue::{self, Death, Lang, Launch, SampleSpec};
use crate::{Availability, DumpKind, SampleDump, elf, gdb_oracle, native_dir, out_dir};
use anyhow::{Context, Result, anyhow, bail};
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{BufRead, BufReader};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

/// Bump when the making procedure changes, to invalidate cached dumps.
const MAKER_VERSION: u32 = 2;
const POLL: Duration = Duration::from_millis(50);

/// How long each phase of a run may take.
#[derive(Debug, Clone, Copy)]
struct Timeouts {
    /// Until the program prints `ready`.
    ready: Duration,
    /// Until every task sleeps in a syscall.
    blocked: Duration,
    /// Until the program dies of SIGABRT (the kernel writes the core first).
    exit: Duration,
}

const TIMEOUTS: Timeouts = Timeouts {
    ready: Duration::from_secs(20),
    blocked: Duration::from_secs(10),
    exit: Duration::from_secs(120),
};
const TOOL_TIMEOUT: Duration = Duration::from_secs(600);

const CORE: &str = "core";
const GDB_BT: &str = "gdb-bt.txt";
/// gdb's reading of a crash sample's crash (`$_siginfo`, `x/i $pc`, `__abort_msg`, `bt`).
pub const GDB_CRASH: &str = "gdb-crash.txt";
const STAMP: &str = "stamp.txt";

/// [`crate::ensure_with_args`] returning errors instead of panicking.
pub fn try_ensure_with_args(name: &str, kind: DumpKind, args: &[&str]) -> Result<Availability> {
    let spec = catalogue::find(name).ok_or_else(|| anyhow!("no sample named {name:?}"))?;
    let mut dir_name = spec.name.to_string();
    for a in args {
        dir_name.push('-');
        dir_name.extend(a.chars().map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        }));
    }
    let parent = out_dir().join(dir_name);
    let dir = parent.join(kind.as_str());
    let stamp = stamp_text(spec, kind, args);
    if is_valid(spec, &dir, &stamp) {
        return Ok(Availability::Ready(dump_at(spec, kind, &dir)));
    }

    if kind == DumpKind::Gcore && matches!(spec.death, Death::Crash(_)) {
        return Ok(Availability::Skipped(format!("{name} dies by itself: the kernel dumps it, gcore has nothing to take")));
    }
    for tool in [spec.compiler(), "gdb"] {
        if find_tool(tool).is_none() {
            return Ok(Availability::Skipped(format!("{tool} not found on PATH")));
        }
    }
    if kind == DumpKind::Gcore && find_tool("gcore").is_none() {
        return Ok(Availability::Skipped("gcore not found on PATH".into()));
    }
    if spec.split_debug && find_tool("objcopy").is_none() {
        return Ok(Availability::Skipped("objcopy not found on PATH".into()));
    }
    if kind == DumpKind::Kernel {
        let pattern = core_pattern();
        if pattern.starts_with('|') || pattern.contains('/') {
            return Ok(Availability::Skipped(format!(
                "kernel cores are not written to the process's directory: core_pattern is {pattern:?}"
            )));
        }
    }

    fs::create_dir_all(&parent).with_context(|| format!("creating {}", parent.display()))?;
    // Serialise makers of the same dump (threads and processes alike); the
    // rename below still keeps lock-free readers from seeing a partial dir.
    let _lock = FileLock::acquire(&parent.join(format!(".lock-{kind}")))?;
    if is_valid(spec, &dir, &stamp) {
        return Ok(Availability::Ready(dump_at(spec, kind, &dir)));
    }

    let tmp = unique_path(&parent, &format!(".tmp-{kind}"));
    fs::create_dir(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    match make_in(spec, kind, args, &tmp) {
        Ok(None) => {}
        Ok(Some(skip)) => {
            let _ = fs::remove_dir_all(&tmp);
            return Ok(Availability::Skipped(skip));
        }
        Err(e) => {
            let failed = parent.join(format!("{kind}.failed"));
            let _ = fs::remove_dir_all(&failed);
            let kept = if fs::rename(&tmp, &failed).is_ok() {
                failed
            } else {
                tmp
            };
            return Err(e.context(format!("files kept in {}", kept.display())));
        }
    }
    fs::write(tmp.join(STAMP), &stamp).context("writing stamp")?;
    publish(&tmp, &dir)?;
    Ok(Availability::Ready(dump_at(spec, kind, &dir)))
}

fn stamp_text(spec: &SampleSpec, kind: DumpKind, args: &[&str]) -> String {
    let mut stamp = format!(
        "knot-samples maker v{MAKER_VERSION}\nsample={}\nkind={kind}\ncompiler={}\nflags={:?}\nsplit_debug={}\nargs={args:?}\n",
        spec.name,
        spec.compiler(),
        spec.flags,
        spec.split_debug
    );
    if spec.death != Death::Wedge {
        stamp.push_str(&format!("death={:?}\nenv=no RUST_BACKTRACE\n", spec.death));
    }
    if !spec.libs.is_empty() {
        stamp.push_str(&format!("libs={:?}\n", spec.libs));
    }
    if spec.launch != Launch::Direct {
        stamp.push_str(&format!("launch={:?}\n", spec.launch));
    }
    stamp
}

fn mtime(p: &Path) -> Option<SystemTime> {
    fs::metadata(p).and_then(|m| m.modified()).ok()
}

fn is_valid(spec: &SampleSpec, dir: &Path, stamp: &str) -> bool {
    if fs::read_to_string(dir.join(STAMP)).ok().as_deref() != Some(stamp) {
        return false;
    }
    if !dir.join(GDB_BT).is_file() || !dir.join(spec.name).is_file() {
        return false;
    }
    let Some(core_time) = mtime(&dir.join(CORE)) else {
        return false;
    };
    let native = native_dir();
    spec.sources
        .iter()
        .chain(spec.libs.iter().flat_map(|l| l.sources))
        .all(|s| mtime(&native.join(s)).is_some_and(|t| t <= core_time))
}

fn dump_at(spec: &SampleSpec, kind: DumpKind, dir: &Path) -> SampleDump {
    SampleDump {
        name: spec.name.to_string(),
        kind,
        core: dir.join(CORE),
        binary: dir.join(spec.name),
        sysroot: None,
        debug_dir: spec.split_debug.then(|| dir.join("debug")),
        gdb_bt: dir.join(GDB_BT),
    }
}

/// Moves the finished `tmp` to `dir`. Another maker may have won (only
/// possible without the lock, e.g. a different checkout of this crate's
/// code): then keep theirs.
fn publish(tmp: &Path, dir: &Path) -> Result<()> {
    if fs::rename(tmp, dir).is_ok() {
        return Ok(());
    }
    if dir.exists() {
        // A stale or foreign dump: move it aside, then retry once.
        let aside = unique_path(dir.parent().unwrap_or(dir), ".stale");
        if fs::rename(dir, &aside).is_ok() {
            let _ = fs::remove_dir_all(&aside);
        }
    }
    match fs::rename(tmp, dir) {
        Ok(()) => Ok(()),
        Err(e) if dir.join(STAMP).is_file() => {
            let _ = e;
            let _ = fs::remove_dir_all(tmp);
            Ok(())
        }
        Err(e) => {
            Err(anyhow!(e).context(format!("renaming {} to {}", tmp.display(), dir.display())))
        }
    }
}

fn unique_path(parent: &Path, prefix: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    parent.join(format!(
        "{prefix}-{}-{}-{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Held while the descriptor is open; closing it releases the lock.
struct FileLock {
    _file: File,
}

impl FileLock {
    fn acquire(path: &Path) -> Result<FileLock> {
        use std::os::fd::AsRawFd;
        let f = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .with_context(|| format!("opening lock file {}", path.display()))?;
        loop {
            // SAFETY: flock on a descriptor we own.
            if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } == 0 {
                return Ok(FileLock { _file: f });
            }
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::Interrupted {
                return Err(anyhow!(err).context(format!("locking {}", path.display())));
            }
        }
    }
}

/// Looks `name` up on PATH (for `rustc`, `$RUSTC` wins).
pub(crate) fn find_tool(name: &str) -> Option<PathBuf> {
    if name == "rustc"
        && let Some(r) = std::env::var_os("RUSTC")
    {
        let p = PathBuf::from(r);
        if p.is_absolute() && p.is_file() {
            return Some(p);
        }
    }
    // An absolute name is that program (Debian's python, not the first on PATH).
    if Path::new(name).is_absolute() {
        return Path::new(name).is_file().then(|| PathBuf::from(name));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| {
            use std::os::unix::fs::PermissionsExt;
            fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

fn tool(name: &str) -> Result<PathBuf> {
    find_tool(name).ok_or_else(|| anyhow!("{name} not found on PATH"))
}

fn core_pattern() -> String {
    fs::read_to_string("/proc/sys/kernel/core_pattern")
        .map_or_else(|_| "<unreadable>".into(), |s| s.trim().to_string())
}

/// Makes everything in `dir`. `Ok(Some(reason))` = this machine cannot.
fn make_in(spec: &SampleSpec, kind: DumpKind, args: &[&str], dir: &Path) -> Result<Option<String>> {
    build(spec, dir)?;
    if let Some(skip) = run_and_dump(spec, kind, args, dir, TIMEOUTS)? {
        return Ok(Some(skip));
    }
    if spec.split_debug {
        link_system_debug_files(dir)?;
    }
    let dump = dump_at(spec, kind, dir);
    record_oracle(
        &dump,
        dir,
        Path::new(&format!("./{}", spec.name)),
        Path::new(CORE),
        dir.join(GDB_BT),
    )?;
    if kind == DumpKind::Kernel && spec.death != Death::Wedge {
        record_crash_oracle(&dump, dir, Path::new(&format!("./{}", spec.name)), Path::new(CORE), dir.join(GDB_CRASH))?;
    }
    Ok(None)
}

/// gdb's reading of the crash, each part after an `==name` line: `siginfo` (`p $_siginfo`),
/// `pc` (`x/i $pc`, Intel syntax), `abort_msg` (`p __abort_msg->msg`; an error when glibc
/// recorded none), `bt` (the crashing thread's backtrace).
pub(crate) fn record_crash_oracle(dump: &SampleDump, cwd: &Path, binary: &Path, core: &Path, out: PathBuf) -> Result<()> {
    let mut cmd = gdb_command(
        cwd,
        binary,
        core,
        dump.sysroot.as_deref(),
        dump.debug_dir.as_deref(),
        solib_dir(dump, binary),
        &[
            "set disassembly-flavor intel",
            "echo ==siginfo\\n",
            "p $_siginfo",
            "echo ==pc\\n",
            "x/i $pc",
            "echo ==abort_msg\\n",
            "p __abort_msg->msg",
            "echo ==bt\\n",
            "bt",
            "echo ==end\\n",
        ],
    )?;
    let stdout = File::create(&out).with_context(|| format!("creating {}", out.display()))?;
    // gdb reports a missing `__abort_msg` on stderr; keep it in the same file, in order.
    let stderr = stdout.try_clone().context("dup gdb-crash.txt")?;
    cmd.stdin(Stdio::null()).stdout(stdout).stderr(stderr);
    let status = run_with_timeout(&mut cmd, TOOL_TIMEOUT).context("running gdb")?;
    let text = fs::read_to_string(&out).with_context(|| format!("reading {}", out.display()))?;
    if !status.success() || !text.contains("==end") {
        bail!("gdb did not read the crash of {} ({status}):\n{}", core.display(), tail(&text, 4000));
    }
    Ok(())
}

/// Runs `cmd` to completion with output to `log`; errors carry the log.
fn run_logged(mut cmd: Command, log: &Path, what: &str) -> Result<()> {
    let out = File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let err = out.try_clone().context("dup log file")?;
    cmd.stdin(Stdio::null()).stdout(out).stderr(err);
    let status =
        run_with_timeout(&mut cmd, TOOL_TIMEOUT).with_context(|| format!("running {what}"))?;
    if !status.success() {
        let text = fs::read_to_string(log).unwrap_or_default();
        bail!("{what} failed ({status}):\n{}", tail(&text, 4000));
    }
    Ok(())
}

fn tail(s: &str, n: usize) -> &str {
    let mut at = s.len().saturating_sub(n);
    while !s.is_char_boundary(at) {
        at += 1;
    }
    &s[at..]
}

fn run_with_timeout(cmd: &mut Command, timeout: Duration) -> Result<ExitStatus> {
    let child = cmd.spawn().context("spawn")?;
    let mut guard = ChildGuard(Some(child));
    guard
        .wait_timeout(timeout)?
        .ok_or_else(|| anyhow!("timed out after {timeout:?}"))
}

fn build(spec: &SampleSpec, dir: &Path) -> Result<()> {
    // Compiled from the workspace root with relative source paths and the
    // root mapped to ".", so DWARF names `samples/native/x.c` wherever the
    // checkout lives (committed binaries stay reproducible).
    let root = crate::workspace_root();
    let compiler = tool(spec.compiler())?;
    if spec.lang == Lang::Python {
        // The interpreter under the sample's name (the dump's executable, gdb's program) and the
        // script beside it, which `run_and_dump` runs.
        for s in spec.sources {
            fs::copy(root.join("samples/native").join(s), dir.join(s)).with_context(|| format!("copying {s}"))?;
        }
        std::os::unix::fs::symlink(&compiler, dir.join(spec.name)).with_context(|| format!("linking {}", compiler.display()))?;
        return Ok(());
    }
    let mut cmd = Command::new(&compiler);
    cmd.current_dir(&root).args(spec.flags);
    match spec.lang {
        Lang::C | Lang::Cxx => {
            cmd.args(["-I", "samples/native"])
                .arg(format!("-fdebug-prefix-map={}=.", root.display()));
        }
        Lang::Rust => {
            cmd.arg("--remap-path-prefix")
                .arg(format!("{}=.", root.display()));
        }
        Lang::Python => {}
    }
    cmd.arg("-o").arg(dir.join(spec.name));
    for s in spec
        .sources
        .iter()
        .filter(|s| s.ends_with(".c") || s.ends_with(".cpp") || s.ends_with(".rs"))
    {
        cmd.arg(Path::new("samples/native").join(s));
    }
    run_logged(
        cmd,
        &dir.join("build.log"),
        &format!("{} for {}", spec.compiler(), spec.name),
    )?;
    for lib in spec.libs {
        let mut cmd = Command::new(&compiler);
        cmd.current_dir(&root)
            .args(spec.flags)
            .args(["-shared", "-fPIC", "-Wl,--build-id"])
            .args(lib.flags)
            .args(["-I", "samples/native"])
            .arg(format!("-fdebug-prefix-map={}=.", root.display()))
            .arg("-o")
            .arg(dir.join(lib.name));
        for s in lib.sources {
            cmd.arg(Path::new("samples/native").join(s));
        }
        run_logged(cmd, &dir.join(format!("build-{}.log", lib.name)), &format!("{} for {}", spec.compiler(), lib.name))?;
    }
    if spec.split_debug {
        split_debug(spec.name, dir)?;
    }
    Ok(())
}

/// What a Python sample's interpreter is given before the sample's arguments: isolated mode (no
/// user site or environment that would change what it loads) and the script built beside it in
/// `dir`. Nothing for a compiled sample.
pub(crate) fn script_args(spec: &SampleSpec, dir: &Path) -> Vec<PathBuf> {
    if spec.lang != Lang::Python {
        return Vec::new();
    }
    std::iter::once(PathBuf::from("-I")).chain(spec.sources.iter().filter(|s| s.ends_with(".py")).map(|s| dir.join(s))).collect()
}

/// `objcopy --only-keep-debug`, strip with a debuglink, and a copy of the
/// debug file in the `.build-id` layout under `dir/debug`.
fn split_debug(name: &str, dir: &Path) -> Result<()> {
    let objcopy = tool("objcopy")?;
    let debug = format!("{name}.debug");
    let mut keep = Command::new(&objcopy);
    keep.current_dir(dir)
        .args(["--only-keep-debug", name, &debug]);
    run_logged(keep, &dir.join("objcopy.log"), "objcopy --only-keep-debug")?;
    let mut strip = Command::new(&objcopy);
    strip
        .current_dir(dir)
        .args(["--strip-all", &format!("--add-gnu-debuglink={debug}"), name]);
    run_logged(strip, &dir.join("objcopy-strip.log"), "objcopy --strip-all")?;
    let id = elf::build_id(&dir.join(&debug))?
        .ok_or_else(|| anyhow!("{debug} has no build-id (was it linked with --build-id?)"))?;
    let dest = elf::build_id_path(&dir.join("debug"), &id);
    fs::create_dir_all(dest.parent().unwrap_or(dir))?;
    fs::copy(dir.join(&debug), &dest)
        .with_context(|| format!("copying debug file to {}", dest.display()))?;
    Ok(())
}

/// For the stripped sample, `dir/debug` must also serve the libraries' own
/// debug files: link the system's ones for each library the process mapped.
fn link_system_debug_files(dir: &Path) -> Result<()> {
    let system = Path::new("/usr/lib/debug");
    for lib in mapped_files(dir)? {
        let Ok(Some(id)) = elf::build_id(&lib) else {
            continue;
        };
        let target = elf::build_id_path(system, &id);
        let link = elf::build_id_path(&dir.join("debug"), &id);
        if target.is_file() && !link.exists() {
            fs::create_dir_all(link.parent().unwrap_or(dir))?;
            std::os::unix::fs::symlink(&target, &link)
                .with_context(|| format!("linking {}", link.display()))?;
        }
    }
    Ok(())
}

/// Distinct file paths in the `maps.txt` recorded while the sample ran.
pub(crate) fn mapped_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let maps = fs::read_to_string(dir.join("maps.txt")).context("reading maps.txt")?;
    let mut out: Vec<PathBuf> = Vec::new();
    for line in maps.lines() {
        if let Some(p) = line
            .split_whitespace()
            .nth(5)
            .filter(|p| p.starts_with('/'))
        {
            let p = PathBuf::from(p);
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    Ok(out)
}

/// Kills (SIGKILL) and reaps the child unless it was reaped already.
pub(crate) struct ChildGuard(pub(crate) Option<Child>);

impl ChildGuard {
    pub(crate) fn pid(&self) -> i32 {
        self.0.as_ref().map_or(0, |c| c.id() as i32)
    }

    /// `Ok(None)` on timeout (child left running for the guard to kill).
    fn wait_timeout(&mut self, timeout: Duration) -> Result<Option<ExitStatus>> {
        let deadline = Instant::now() + timeout;
        let Some(child) = self.0.as_mut() else {
            bail!("child already reaped")
        };
        loop {
            if let Some(status) = child.try_wait().context("waiting for child")? {
                self.0 = None;
                return Ok(Some(status));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn kill_and_reap(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.kill_and_reap();
    }
}

fn run_and_dump(
    spec: &SampleSpec,
    kind: DumpKind,
    args: &[&str],
    dir: &Path,
    t: Timeouts,
) -> Result<Option<String>> {
    let stderr_path = dir.join("program-stderr.txt");
    let stderr = File::create(&stderr_path).context("creating program-stderr.txt")?;
    let mut cmd = match spec.launch {
        Launch::Direct => Command::new(dir.join(spec.name)),
        Launch::PidNamespace => {
            let Some(unshare) = find_tool("unshare") else {
                return Ok(Some("unshare not found on PATH (a PID namespace is needed)".into()));
            };
            // A shell is the namespace's init (pid 1): a signal from the host reaches its other
            // processes as it would reach any. `--kill-child` ends the namespace with unshare.
            let mut c = Command::new(unshare);
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } != 0 {
                c.arg("--map-root-user");
            }
            c.args(["--pid", "--fork", "--kill-child", "sh", "-c", "\"$0\" \"$@\" & wait $!"]).arg(dir.join(spec.name));
            c
        }
    };
    // A crash sample's worker waits in read(0) for the maker's "go".
    let stdin = if matches!(spec.death, Death::Crash(_)) { Stdio::piped() } else { Stdio::null() };
    // A Rust panic prints a backtrace when RUST_BACKTRACE is set, mapping debug files into the
    // process as it does: the dump would depend on the caller's environment.
    cmd.env_remove("RUST_BACKTRACE").env_remove("RUST_LIB_BACKTRACE");
    cmd.args(script_args(spec, dir));
    cmd.args(args)
        .current_dir(dir)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(stderr);
    // SAFETY: only async-signal-safe calls (setrlimit, getrlimit, prctl, sigprocmask, signal) run
    // between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let unlimited = libc::rlimit {
                rlim_cur: libc::RLIM_INFINITY,
                rlim_max: libc::RLIM_INFINITY,
            };
            if libc::setrlimit(libc::RLIMIT_CORE, &unlimited) != 0 {
                let mut cur = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                libc::getrlimit(libc::RLIMIT_CORE, &mut cur);
                cur.rlim_cur = cur.rlim_max;
                libc::setrlimit(libc::RLIMIT_CORE, &cur);
            }
            // Die with the spawning thread: no stray wedged programs.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            // A shell starting the suite in the background ignores SIGINT and SIGQUIT for it,
            // and ignored signals survive exec: the sample would shrug off the maker's SIGQUIT.
            // Every sample starts with the default dispositions and nothing blocked.
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            for sig in [libc::SIGINT, libc::SIGQUIT, libc::SIGABRT, libc::SIGTERM] {
                libc::signal(sig, libc::SIG_DFL);
            }
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", spec.name))?;
    let stdout = child.stdout.take();
    let mut go = child.stdin.take();
    let mut guard = ChildGuard(Some(child));
    let pid = guard.pid();

    let program_failed = |guard: &mut ChildGuard, what: String| -> anyhow::Error {
        let status = match guard.wait_timeout(Duration::from_millis(200)) {
            Ok(Some(s)) => format!("exited: {s}"),
            _ => "still running".to_string(),
        };
        let err = fs::read_to_string(&stderr_path).unwrap_or_default();
        anyhow!(
            "{}: {what} ({status}); stderr:\n{}",
            spec.name,
            tail(&err, 4000)
        )
    };

    // stdout is read on a thread so the timeout cannot be blocked by read().
    let (tx, rx) = mpsc::channel::<String>();
    if let Some(out) = stdout {
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
    }
    let deadline = Instant::now() + t.ready;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.trim() == "ready" => break,
            Ok(_) => continue,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                return Err(program_failed(
                    &mut guard,
                    format!("no \"ready\" within {:?}", t.ready),
                ));
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(program_failed(
                    &mut guard,
                    "stdout closed before \"ready\"".into(),
                ));
            }
        }
    }
    // In a PID namespace, the program is the shell's child: it is found, dumped and signalled
    // by its host pid.
    let pid = match spec.launch {
        Launch::Direct => pid,
        Launch::PidNamespace => match program_in_namespace(pid, &dir.join(spec.name)) {
            Some(p) => p,
            None => return Err(program_failed(&mut guard, "no program found under unshare's shell".into())),
        },
    };
    if let Ok(maps) = fs::read_to_string(format!("/proc/{pid}/maps")) {
        fs::write(dir.join("maps.txt"), maps).context("writing maps.txt")?;
    }
    if let Err(e) = wait_all_blocked(pid, t.blocked) {
        return Err(program_failed(&mut guard, format!("{e:#}")));
    }

    match kind {
        DumpKind::Gcore => {
            let mut cmd = Command::new(tool("gcore")?);
            cmd.current_dir(dir)
                .arg("-o")
                .arg("gcore")
                .arg(pid.to_string());
            quiet_gdb_env(&mut cmd);
            let res = run_logged(cmd, &dir.join("gcore.log"), "gcore");
            guard.kill_and_reap();
            if let Err(e) = res {
                let log = fs::read_to_string(dir.join("gcore.log")).unwrap_or_default();
                if log.contains("ptrace: Operation not permitted") {
                    return Ok(Some(format!(
                        "gcore cannot attach (ptrace not permitted): {}",
                        log.trim()
                    )));
                }
                return Err(e);
            }
            let written = dir.join(format!("gcore.{pid}"));
            fs::rename(&written, dir.join(CORE))
                .with_context(|| format!("gcore wrote no {}", written.display()))?;
        }
        DumpKind::Kernel => {
            let signal = match spec.death {
                Death::Crash(signal) => {
                    use std::io::Write;
                    let mut pipe = go.take().ok_or_else(|| anyhow!("{}: no stdin pipe", spec.name))?;
                    pipe.write_all(b"go\n").context("writing go")?;
                    drop(pipe);
                    signal
                }
                Death::Sent(signal) if spec.launch == Launch::PidNamespace => signal,
                Death::Wedge if spec.launch == Launch::PidNamespace => libc::SIGABRT,
                Death::Sent(signal) => {
                    // SAFETY: signalling our own child, which is not yet reaped.
                    if unsafe { libc::kill(pid, signal) } != 0 {
                        bail!("kill -{signal} {pid}: {}", std::io::Error::last_os_error());
                    }
                    signal
                }
                Death::Wedge => {
                    // SAFETY: signalling our own child, which is not yet reaped.
                    if unsafe { libc::kill(pid, libc::SIGABRT) } != 0 {
                        bail!("kill -ABRT {pid}: {}", std::io::Error::last_os_error());
                    }
                    libc::SIGABRT
                }
            };
            if spec.launch == Launch::PidNamespace && !matches!(spec.death, Death::Crash(_)) {
                // The signal goes to the program itself, from outside its namespace.
                // SAFETY: signalling the program our child started, which is not yet reaped.
                if unsafe { libc::kill(pid, signal) } != 0 {
                    bail!("kill -{signal} {pid}: {}", std::io::Error::last_os_error());
                }
            }
            let status = guard.wait_timeout(t.exit)?.ok_or_else(|| {
                anyhow!("{} did not die within {:?} of signal {signal}", spec.name, t.exit)
            })?;
            // Under unshare, the shell reports the program's death as its exit status.
            let died_of_it = match spec.launch {
                Launch::Direct => status.signal() == Some(signal),
                Launch::PidNamespace => status.code() == Some(128 + signal) || status.signal() == Some(signal),
            };
            if !died_of_it {
                bail!("{} ended with {status} instead of signal {signal}", spec.name);
            }
            let pattern = core_pattern();
            if spec.launch == Launch::Direct && !status.core_dumped() {
                return Ok(Some(format!(
                    "the kernel wrote no core (core_pattern {pattern:?}; is RLIMIT_CORE capped by the hard limit?)"
                )));
            }
            let found = fs::read_dir(dir)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .find(|p| p.is_file() && elf::is_core_file(p));
            match found {
                Some(p) if p.file_name() != Some(CORE.as_ref()) => fs::rename(&p, dir.join(CORE))?,
                Some(_) => {}
                None => {
                    return Ok(Some(format!(
                        "the kernel dumped core but not into the sample's directory (core_pattern {pattern:?})"
                    )));
                }
            }
        }
    }
    Ok(None)
}

/// The host pid of the process running `binary` below `root` (unshare → the namespace's shell →
/// the program), waiting briefly for it to appear.
fn program_in_namespace(root: i32, binary: &Path) -> Option<i32> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut todo = vec![root];
        while let Some(p) = todo.pop() {
            if p != root && fs::read_link(format!("/proc/{p}/exe")).is_ok_and(|e| e == binary) {
                return Some(p);
            }
            for task in fs::read_dir(format!("/proc/{p}/task")).into_iter().flatten().flatten() {
                let children = fs::read_to_string(task.path().join("children")).unwrap_or_default();
                todo.extend(children.split_whitespace().filter_map(|c| c.parse::<i32>().ok()));
            }
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(POLL);
    }
}

/// One task's view: (state letter, first field of /proc/.../syscall).
type Snapshot = BTreeMap<u32, (char, String)>;

fn snapshot(pid: i32) -> Result<Snapshot> {
    let mut snap = Snapshot::new();
    let tasks = format!("/proc/{pid}/task");
    for entry in fs::read_dir(&tasks).with_context(|| format!("listing {tasks}"))? {
        let entry = entry?;
        let Some(tid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let stat = fs::read_to_string(entry.path().join("stat"));
        let syscall = fs::read_to_string(entry.path().join("syscall"));
        let (Ok(stat), Ok(syscall)) = (stat, syscall) else {
            snap.insert(tid, ('?', String::new())); // vanished mid-read
            continue;
        };
        // The state follows the parenthesised comm, which may hold spaces.
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.trim_start().chars().next())
            .unwrap_or('?');
        let first = syscall.split_whitespace().next().unwrap_or("").to_string();
        snap.insert(tid, (state, first));
    }
    Ok(snap)
}

fn all_in_syscalls(snap: &Snapshot) -> bool {
    !snap.is_empty()
        && snap
            .values()
            .all(|(st, sc)| *st == 'S' && sc.parse::<i64>().is_ok_and(|n| n >= 0))
}

/// Waits until every task sleeps in a syscall, unchanged over two polls.
pub(crate) fn wait_all_blocked(pid: i32, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let mut prev: Option<Snapshot> = None;
    loop {
        let snap = snapshot(pid)?;
        if all_in_syscalls(&snap) && prev.as_ref() == Some(&snap) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            let busy: Vec<String> = snap
                .iter()
                .filter(|(_, (st, sc))| !(*st == 'S' && sc.parse::<i64>().is_ok()))
                .map(|(tid, (st, sc))| format!("{tid}:{st}:{sc}"))
                .collect();
            bail!(
                "threads not all blocked in syscalls after {timeout:?} (tid:state:syscall {busy:?})"
            );
        }
        prev = Some(snap);
        std::thread::sleep(POLL);
    }
}

fn quiet_gdb_env(cmd: &mut Command) {
    cmd.env_remove("DEBUGINFOD_URLS").env("LC_ALL", "C");
}

/// The gdb command line of the oracle (`thread apply all bt`), run in `cwd`.
pub fn gdb_command(
    cwd: &Path,
    binary: &Path,
    core: &Path,
    sysroot: Option<&Path>,
    debug_dir: Option<&Path>,
    solib_dir: Option<&Path>,
    commands: &[&str],
) -> Result<Command> {
    let mut cmd = Command::new(tool("gdb")?);
    cmd.current_dir(cwd)
        .args(["-nx", "-batch", "-iex", "set debuginfod enabled off"]);
    if let Some(s) = sysroot {
        cmd.arg("-iex").arg(format!("set sysroot {}", s.display()));
    }
    if let Some(d) = debug_dir {
        cmd.arg("-iex")
            .arg(format!("set debug-file-directory {}", d.display()));
    }
    if let Some(d) = solib_dir {
        cmd.arg("-iex").arg(format!("set solib-search-path {}", d.display()));
    }
    cmd.args(["-ex", "set pagination off", "-ex", "set width 0"]);
    for c in commands {
        cmd.arg("-ex").arg(c);
    }
    cmd.arg(binary).arg(core);
    quiet_gdb_env(&mut cmd);
    Ok(cmd)
}

/// Where gdb looks for a sample's own libraries by name (`solib-search-path`, as knot's
/// `--search-dir`): beside its program, wherever the dump recorded them. `None` for a sample
/// without libraries.
fn solib_dir<'a>(dump: &SampleDump, binary: &'a Path) -> Option<&'a Path> {
    catalogue::find(&dump.name)
        .is_some_and(|s| !s.libs.is_empty())
        .then(|| binary.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")))
}

/// Samples whose gdb reading lists each frame's locals too (`bt full`): a release build's lock
/// owners are seen only there (the guard a frame holds: `stock = MutexGuard {lock: <INVENTORY>}`).
const FULL_BT: &[&str] = &["rust_release_abba"];

/// Runs the oracle: stdout to `out`, stderr beside it. The dump's sysroot
/// and debug dir are used as given (relative to `cwd` if relative).
pub(crate) fn record_oracle(
    dump: &SampleDump,
    cwd: &Path,
    binary: &Path,
    core: &Path,
    out: PathBuf,
) -> Result<()> {
    let mut cmd = gdb_command(
        cwd,
        binary,
        core,
        dump.sysroot.as_deref(),
        dump.debug_dir.as_deref(),
        solib_dir(dump, binary),
        &[if FULL_BT.contains(&dump.name.as_str()) { "thread apply all bt full" } else { "thread apply all bt" }],
    )?;
    let stdout = File::create(&out).with_context(|| format!("creating {}", out.display()))?;
    let err_path = out.with_extension("stderr.txt");
    let stderr =
        File::create(&err_path).with_context(|| format!("creating {}", err_path.display()))?;
    cmd.stdin(Stdio::null()).stdout(stdout).stderr(stderr);
    let status = run_with_timeout(&mut cmd, TOOL_TIMEOUT).context("running gdb")?;
    let text = fs::read_to_string(&out).with_context(|| format!("reading {}", out.display()))?;
    let threads = gdb_oracle::parse(&text);
    if !status.success() || threads.is_empty() {
        let err = fs::read_to_string(&err_path).unwrap_or_default();
        bail!(
            "gdb read no threads from {} ({status}); stderr:\n{}",
            core.display(),
            tail(&err, 4000)
        );
    }
    Ok(())
}

/// gdb's `info sharedlibrary` for a dump: the paths the dynamic linker
/// used (what a sysroot must provide).
pub(crate) fn shared_libraries(dump: &SampleDump) -> Result<Vec<PathBuf>> {
    let cwd = dump.core.parent().unwrap_or(Path::new("."));
    let mut cmd = gdb_command(
        cwd,
        &dump.binary,
        &dump.core,
        None,
        None,
        None,
        &["info sharedlibrary"],
    )?;
    cmd.stdin(Stdio::null()).stderr(Stdio::null());
    let out = cmd.output().context("running gdb info sharedlibrary")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut libs = Vec::new();
    for line in text.lines().filter(|l| l.trim_start().starts_with("0x")) {
        if let Some(p) = line
            .split_whitespace()
            .last()
            .filter(|p| p.starts_with('/'))
        {
            libs.push(PathBuf::from(p));
        }
    }
    if libs.is_empty() {
        bail!(
            "gdb listed no shared libraries for {}:\n{text}",
            dump.core.display()
        );
    }
    Ok(libs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const SHORT: Timeouts = Timeouts {
        ready: Duration::from_millis(500),
        blocked: Duration::from_millis(500),
        exit: Duration::from_secs(5),
    };

    /// A fake sample: a shell script standing in for the binary.
    fn fake(name: &'static str, script: &str) -> (SampleSpec, PathBuf) {
        let dir = unique_path(&std::env::temp_dir(), &format!("knot-samples-test-{name}"));
        fs::create_dir_all(&dir).unwrap();
        let bin = dir.join(name);
        fs::write(&bin, format!("#!/bin/sh\necho $$ > pid\n{script}\n")).unwrap();
        fs::set_permissions(&bin, fs::Permissions::from_mode(0o755)).unwrap();
        let spec = SampleSpec {
            name,
            lang: Lang::C,
            sources: &[],
            flags: &[],
            args: &[],
            split_debug: false,
            death: Death::Wedge,
            description: "test",
            libs: &[],
            launch: Launch::Direct,
        };
        (spec, dir)
    }

    fn gone(dir: &Path) -> bool {
        let pid = fs::read_to_string(dir.join("pid")).unwrap();
        !Path::new(&format!("/proc/{}", pid.trim())).exists()
    }

    #[test]
    fn exit_before_ready_reports_stderr() {
        let (spec, dir) = fake("dies", "echo boom >&2; exit 4");
        let err = run_and_dump(&spec, DumpKind::Gcore, &[], &dir, SHORT).unwrap_err();
        let msg = format!("{err:#}");
        assert!(
            msg.contains("before \"ready\"") && msg.contains("boom"),
            "{msg}"
        );
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn no_ready_times_out_and_kills() {
        let (spec, dir) = fake("silent", "exec sleep 60");
        let err = run_and_dump(&spec, DumpKind::Gcore, &[], &dir, SHORT).unwrap_err();
        assert!(format!("{err:#}").contains("no \"ready\""), "{err:#}");
        assert!(gone(&dir), "the program was left running");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn busy_after_ready_times_out_and_kills() {
        let (spec, dir) = fake("busy", "echo ready; while :; do :; done");
        let err = run_and_dump(&spec, DumpKind::Kernel, &[], &dir, SHORT).unwrap_err();
        assert!(format!("{err:#}").contains("not all blocked"), "{err:#}");
        assert!(gone(&dir), "the program was left running");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn blocked_script_gets_a_kernel_core() {
        if !core_pattern().eq("core") {
            return; // depends on this machine's core_pattern
        }
        let (spec, dir) = fake("sleeper", "echo ready; exec sleep 60");
        let skip = run_and_dump(&spec, DumpKind::Kernel, &[], &dir, SHORT).unwrap();
        assert!(skip.is_none(), "{skip:?}");
        assert!(elf::is_core_file(&dir.join(CORE)));
        assert!(gone(&dir));
        let _ = fs::remove_dir_all(&dir);
    }
}
