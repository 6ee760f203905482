//! `cargo xtask bench [--threads N] [--frames N] [--runs N] [--kind gcore|kernel|all] [--remake]
//! [--no-programs] [--no-dotnet] [--no-callgrind] [--criterion]`: knot against gdb and
//! `eu-stack -i` on real Debian programs, a 2,000-thread dump and the committed arm64 cores
//! (gdb-multiarch), and against dotnet-dump on a .NET heap dump, in one run (see [`crate::peers`]).
//! `cargo xtask bench --scale [--threads N] [--gib G] [--runs N] [--gcore] [--keep]` (see
//! [`crate::scale`]: a core of G GiB with N threads against the small ones).
//! `cargo xtask bench dotnet`, `dotnet-heap` and `dotnet-async`: the .NET suites alone.
//!
//! This module holds what they share: running a tool and reaping it with `wait4` for its own
//! rusage (wall, user and sys CPU, peak RSS, page faults, bytes read), and the machine's facts.

use anyhow::{Context, Result, bail};
use knot_samples::{DumpKind, SampleDump};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::fs::{self, File};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

#[derive(clap::Args)]
pub struct Args {
    /// `dotnet`: knot against dotnet-dump (clrthreads, syncblk, threadpool, dumpasync, clrstack
    /// -all) on a committed .NET heap
    /// dump instead (see [`crate::bench_dotnet`]; takes --runs and --sample). `dotnet-heap`: `knot
    /// heap stat` and `knot analyze` against `dumpheap -stat` on a multi-GB heap dump made here ([`crate::bench_dotnet_heap`];
    /// --heap-mib, --runs, --remake). `dotnet-async`: knot's async stacks against `dumpasync` on a
    /// dump with ~100k tasks made here ([`crate::bench_dotnet_async`]; --runs, --remake).
    #[arg(value_enum)]
    suite: Option<Suite>,
    /// With `dotnet-heap`: the heap to fill, in MiB.
    #[arg(long, default_value_t = 2048)]
    heap_mib: u64,
    /// With `dotnet-heap`: also run `knot analyze` inside a memory cgroup of this size (4G, 512M,
    /// bytes; needs root: cgroup v1's memory controller or v2's memory.max) and print its wall
    /// time, peak anonymous memory and RSS, bytes per object, scratch bytes, and whether the
    /// report came whole and equal to the unconstrained run's. Several sizes: `4G,1G`.
    #[arg(long, value_name = "SIZE[,SIZE…]")]
    memory_limit: Option<String>,
    /// Make the dumps again even when they are there (`dotnet-heap`, `dotnet-async`, the Debian programs).
    #[arg(long)]
    remake: bool,
    /// With `dotnet`: the committed sample whose heap dump is measured.
    #[arg(long, default_value = "autofac_container")]
    sample: String,
    /// Blocked threads in the many_threads sample (the core has one more: main).
    /// Default 2000; with --scale, 1000.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    threads: Option<u32>,
    /// Timed runs per tool, after one warm-up run. Default 5; with --scale, 3.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    runs: Option<u32>,
    /// Which dumps to measure.
    #[arg(long, value_enum, default_value_t = KindArg::All, conflicts_with = "scale")]
    kind: KindArg,
    /// Afterwards, run the criterion micro-benchmarks (`cargo bench -p knot --bench analyze`).
    #[arg(long, conflicts_with = "scale")]
    criterion: bool,
    /// Frames below each many_threads thread's lock call: its stack is N+6 to N+26 frames deep.
    #[arg(long, default_value_t = 36, conflicts_with = "scale")]
    frames: u32,
    /// Leave out the Debian programs (redis, memcached, mariadb).
    #[arg(long, conflicts_with = "scale")]
    no_programs: bool,
    /// Leave out knot against dotnet-dump.
    #[arg(long, conflicts_with = "scale")]
    no_dotnet: bool,
    /// Leave out counting knot's instructions under callgrind.
    #[arg(long, conflicts_with = "scale")]
    no_callgrind: bool,
    /// Scale case: a kernel core of --gib GiB with --threads threads, measured beside the
    /// small many_threads cores (wall, CPU, peak RSS, page faults); `target/bench/scale.json`.
    #[arg(long)]
    scale: bool,
    /// With --scale: GiB of anonymous memory the big core's process maps (touched once per
    /// 64 MiB, so the kernel's core is sparse).
    #[arg(long, default_value_t = 8, requires = "scale", value_parser = clap::value_parser!(u32).range(1..=1024))]
    gib: u32,
    /// With --scale: also dump the big process with gcore (gdb 13 writes every zero page:
    /// G GiB of disk written for real), and measure that core too.
    #[arg(long, requires = "scale")]
    gcore: bool,
    /// With --scale: keep the big core(s) afterwards (and reuse them next time).
    #[arg(long, requires = "scale")]
    keep: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum KindArg {
    Gcore,
    Kernel,
    All,
}

impl KindArg {
    fn kinds(self) -> &'static [DumpKind] {
        match self {
            KindArg::Gcore => &[DumpKind::Gcore],
            KindArg::Kernel => &[DumpKind::Kernel],
            KindArg::All => &DumpKind::ALL,
        }
    }
}

/// One tool's command line on one dump.
pub(crate) struct Tool {
    pub(crate) name: &'static str,
    pub(crate) argv: Vec<OsString>,
}

/// One run of a tool.
#[derive(Clone, Copy)]
pub(crate) struct Sample {
    pub(crate) wall: Duration,
    /// Peak resident set, KiB (Linux's unit for `ru_maxrss`).
    pub(crate) max_rss_kib: i64,
    pub(crate) user: Duration,
    pub(crate) sys: Duration,
    /// Page faults (`ru_minflt`, `ru_majflt`): pages the child mapped in, its heap and stacks
    /// as well as the files it mmapped (a file read with read/pread shows in `rchar` instead).
    pub(crate) minflt: i64,
    pub(crate) majflt: i64,
    /// Bytes the child read with read-like syscalls (`rchar` of /proc/PID/io, read from the
    /// zombie before it is reaped), every file included; `None` if unreadable.
    pub(crate) rchar: Option<u64>,
    /// Exit code, or `None` when killed by a signal.
    pub(crate) code: Option<i32>,
    /// Killed by the bench for running past its time limit ([`run_limited`]).
    pub(crate) stopped: bool,
}

impl Sample {
    pub(crate) fn cpu(&self) -> Duration {
        self.user + self.sys
    }
    pub(crate) fn faults(&self) -> u64 {
        (self.minflt.max(0) + self.majflt.max(0)) as u64
    }
}

pub(crate) fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Suite {
    Dotnet,
    /// knot against SOS `dumpheap -stat` on a dump with a multi-GB heap made here.
    DotnetHeap,
    /// knot's async stacks against SOS `dumpasync` on a dump with ~100k tasks made here.
    DotnetAsync,
}

pub fn run(a: Args) -> Result<()> {
    if a.suite == Some(Suite::DotnetHeap) {
        let limits = a.memory_limit.as_deref().map(|l| l.split(',').map(|s| knot::parse_size(s).map_err(anyhow::Error::msg)).collect::<Result<Vec<u64>>>()).transpose()?.unwrap_or_default();
        return crate::bench_dotnet_heap::run(a.runs.unwrap_or(3), a.heap_mib, a.remake, &limits);
    }
    if a.suite == Some(Suite::DotnetAsync) {
        return crate::bench_dotnet_async::run(a.runs.unwrap_or(3), a.remake);
    }
    if a.suite == Some(Suite::Dotnet) {
        return crate::bench_dotnet::run(a.runs.unwrap_or(5), &a.sample);
    }
    if a.scale {
        return crate::scale::run(crate::scale::Opts {
            threads: a.threads.unwrap_or(1000),
            gib: a.gib,
            runs: a.runs.unwrap_or(3),
            gcore: a.gcore,
            keep: a.keep,
        });
    }
    crate::peers::run(crate::peers::Opts {
        threads: a.threads.unwrap_or(2000),
        frames: a.frames,
        runs: a.runs.unwrap_or(5),
        kinds: a.kind.kinds(),
        remake: a.remake,
        programs: !a.no_programs,
        dotnet: !a.no_dotnet,
        callgrind: !a.no_callgrind,
    })?;
    if a.criterion {
        let root = knot_samples::workspace_root();
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        eprintln!("bench   cargo bench -p knot --bench analyze");
        let status = Command::new(&cargo)
            .current_dir(&root)
            .args(["bench", "-p", "knot", "--bench", "analyze"])
            .status()
            .context("running cargo bench -p knot")?;
        if !status.success() {
            bail!("cargo bench -p knot --bench analyze failed ({status})");
        }
    }
    Ok(())
}

/// The workspace's target directory (`$CARGO_TARGET_DIR`, relative to the root, or `target`).
pub(crate) fn target_dir(root: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(t) => root.join(t),
        None => root.join("target"),
    }
}

/// `cargo build --release -p knot`; the binary, and whether it has `analyze --stacks-only`.
pub(crate) fn build_knot(root: &Path, target: &Path) -> Result<(PathBuf, bool)> {
    // A binary built elsewhere (another commit's release build, to compare two builds with the
    // same bench and peers): `KNOT_BENCH_BIN=path/to/knot`.
    let knot = match std::env::var_os("KNOT_BENCH_BIN") {
        Some(bin) => {
            eprintln!("knot    {} (KNOT_BENCH_BIN; not built)", Path::new(&bin).display());
            PathBuf::from(bin)
        }
        None => {
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            eprintln!("build   cargo build --release -p knot");
            let status = Command::new(&cargo)
                .current_dir(root)
                .args(["build", "--release", "-p", "knot"])
                .status()
                .context("running cargo build --release -p knot")?;
            if !status.success() {
                bail!("cargo build --release -p knot failed ({status})");
            }
            target.join("release").join("knot")
        }
    };
    let help = Command::new(&knot)
        .args(["analyze", "--help"])
        .output()
        .with_context(|| format!("running {} analyze --help", knot.display()))?;
    Ok((knot, String::from_utf8_lossy(&help.stdout).contains("--stacks-only")))
}

pub(crate) fn sample_json(s: &Sample) -> Value {
    json!({
        "wall_s": s.wall.as_secs_f64(),
        "user_s": s.user.as_secs_f64(),
        "sys_s": s.sys.as_secs_f64(),
        "max_rss_kib": s.max_rss_kib,
        "minor_faults": s.minflt,
        "major_faults": s.majflt,
        "rchar_bytes": s.rchar,
        "exit_code": s.code,
        "stopped_at_limit": s.stopped,
    })
}

pub(crate) fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

pub(crate) fn knot_argv(knot: &Path, d: &SampleDump, stacks_only: bool) -> Vec<OsString> {
    let mut v: Vec<OsString> = vec![knot.into(), "analyze".into(), d.core.clone().into()];
    v.extend(["--format", "json", "-o", "/dev/null"].map(OsString::from));
    if stacks_only {
        v.push("--stacks-only".into());
    }
    // The same files gdb is given: the binary (the path the dump records is the maker's
    // temporary directory), and the sample's sysroot and debug directory if it has them.
    v.push("--exe".into());
    v.push(d.binary.clone().into());
    if let Some(s) = &d.sysroot {
        v.push("--sysroot".into());
        v.push(s.clone().into());
    }
    if let Some(dd) = &d.debug_dir {
        v.push("--debug-dir".into());
        v.push(dd.clone().into());
    }
    v
}

pub(crate) fn gdb_argv(gdb: &Path, d: &SampleDump) -> Vec<OsString> {
    let mut v: Vec<OsString> = vec![gdb.into()];
    v.extend(["-nx", "-batch", "-iex", "set debuginfod enabled off"].map(OsString::from));
    if let Some(s) = &d.sysroot {
        v.push("-iex".into());
        v.push(format!("set sysroot {}", s.display()).into());
    }
    if let Some(dd) = &d.debug_dir {
        v.push("-iex".into());
        v.push(format!("set debug-file-directory {}", dd.display()).into());
    }
    v.extend(["-ex", "thread apply all bt"].map(OsString::from));
    v.push(d.binary.clone().into());
    v.push(d.core.clone().into());
    v
}

pub(crate) fn eu_stack_argv(eu: &Path, d: &SampleDump) -> Vec<OsString> {
    let mut v: Vec<OsString> = vec![eu.into(), "--core".into(), d.core.clone().into()];
    v.push("--executable".into());
    v.push(d.binary.clone().into());
    if let Some(s) = &d.sysroot {
        v.push("--sysroot".into());
        v.push(s.clone().into());
    }
    if let Some(dd) = &d.debug_dir {
        v.push(format!("--debuginfo-path={}", dd.display()).into());
    }
    v
}

/// Runs `argv` to its end (stdout to /dev/null, stderr to `stderr`) and reaps it with `wait4`,
/// for its own rusage.
pub(crate) fn run_once(argv: &[OsString], stderr: &Path) -> Result<Sample> {
    run_limited(argv, stderr, None)
}

/// [`run_once`], killing the child (SIGKILL) once it has run for `limit`; such a run is
/// `stopped`, and its wall time is the limit's, not a measurement.
///
/// The tool is started and reaped by a small process of its own (this binary again, `xtask
/// measure-child`), which reports the rusage on its stdout: a child's `ru_maxrss` starts from the
/// resident set of the process it was forked from (Linux records the old address space's peak
/// at `exec`, and a vfork child's old address space is its parent's), so a tool started straight
/// from this process, which may hold hundreds of MiB by then, would show that as its own peak.
pub(crate) fn run_limited(argv: &[OsString], stderr: &Path, limit: Option<Duration>) -> Result<Sample> {
    let exe = std::env::current_exe().context("this program's path")?;
    let mut cmd = Command::new(exe);
    cmd.arg("measure-child").arg("--stderr").arg(stderr);
    if let Some(limit) = limit {
        cmd.arg("--limit-ms").arg(limit.as_millis().to_string());
    }
    let out = cmd.arg("--").args(argv).stdin(Stdio::null()).stderr(Stdio::inherit()).output().context("starting the measuring child")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("measuring {} failed ({})", argv[0].to_string_lossy(), out.status);
    }
    Sample::from_line(text.trim()).with_context(|| format!("the measuring child's answer {text:?}"))
}

/// `xtask measure-child --stderr FILE [--limit-ms N] -- PROGRAM ARGS…`: runs one tool as
/// [`run_limited`] describes, from a process that is itself small, and prints its [`Sample`].
#[derive(clap::Args)]
pub struct MeasureArgs {
    #[arg(long)]
    stderr: PathBuf,
    #[arg(long)]
    limit_ms: Option<u64>,
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    argv: Vec<OsString>,
}

pub fn measure_child(args: MeasureArgs) -> Result<()> {
    let s = run_here(&args.argv, &args.stderr, args.limit_ms.map(Duration::from_millis))?;
    println!("{}", s.to_line());
    Ok(())
}

impl Sample {
    /// One line of numbers, for [`Sample::from_line`]: nanoseconds, KiB and counts.
    fn to_line(self) -> String {
        let opt = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
        format!(
            "{} {} {} {} {} {} {} {} {}",
            self.wall.as_nanos(),
            self.max_rss_kib,
            self.user.as_nanos(),
            self.sys.as_nanos(),
            self.minflt,
            self.majflt,
            opt(self.rchar.map(|r| r as i64)),
            opt(self.code.map(i64::from)),
            u8::from(self.stopped)
        )
    }

    fn from_line(line: &str) -> Result<Sample> {
        let f: Vec<&str> = line.split(' ').collect();
        let [wall, rss, user, sys, minflt, majflt, rchar, code, stopped] = f.as_slice() else { bail!("9 fields expected") };
        let nanos = |v: &str| -> Result<Duration> { Ok(Duration::from_nanos(v.parse()?)) };
        Ok(Sample {
            wall: nanos(wall)?,
            max_rss_kib: rss.parse()?,
            user: nanos(user)?,
            sys: nanos(sys)?,
            minflt: minflt.parse()?,
            majflt: majflt.parse()?,
            rchar: if *rchar == "-" { None } else { Some(rchar.parse()?) },
            code: if *code == "-" { None } else { Some(code.parse()?) },
            stopped: *stopped == "1",
        })
    }
}

/// Starts `argv` from this process and reaps it with `wait4` (see [`run_limited`]).
fn run_here(argv: &[OsString], stderr: &Path, limit: Option<Duration>) -> Result<Sample> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(File::create(stderr).with_context(|| format!("creating {}", stderr.display()))?)
        // No network look-ups of debug files (gdb's and elfutils' debuginfod), C messages.
        .env_remove("DEBUGINFOD_URLS")
        .env("LC_ALL", "C");
    let started = Instant::now();
    let child = cmd.spawn().with_context(|| format!("starting {}", argv[0].to_string_lossy()))?;
    let pid = child.id() as libc::pid_t;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // The child is not reaped before `done` is set (below), so its pid cannot be reused while
    // the watchdog may kill it.
    let watchdog = limit.map(|limit| {
        let done = done.clone();
        std::thread::spawn(move || {
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                if started.elapsed() >= limit {
                    // SAFETY: plain syscall on our own unreaped child.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                    return true;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            false
        })
    });
    // First wait without reaping (WNOWAIT): the zombie's /proc/PID/io still holds its totals.
    loop {
        // SAFETY: a zeroed siginfo_t is a valid value; waitid fills it in.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: pid is our child, not yet reaped; WNOWAIT leaves it so.
        let r = unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if r == 0 {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            bail!("waitid on {}: {err}", argv[0].to_string_lossy());
        }
    }
    let wall = started.elapsed();
    done.store(true, std::sync::atomic::Ordering::Release);
    let stopped = watchdog.is_some_and(|w| w.join().unwrap_or(false));
    let rchar = fs::read_to_string(format!("/proc/{pid}/io")).ok().and_then(|io| {
        io.lines().find_map(|l| l.strip_prefix("rchar:")).and_then(|v| v.trim().parse::<u64>().ok())
    });
    let mut status: libc::c_int = 0;
    // SAFETY: a zeroed rusage is a valid value; wait4 fills it in.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: pid is our child, not yet reaped (std's Child is never waited on here);
        // the pointers are to live locals.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == pid {
            break;
        }
        let err = std::io::Error::last_os_error();
        if r == -1 && err.kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        bail!("wait4 on {}: {err}", argv[0].to_string_lossy());
    }
    drop(child);
    let code = if libc::WIFEXITED(status) { Some(libc::WEXITSTATUS(status)) } else { None };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    Ok(Sample {
        wall,
        max_rss_kib: ru.ru_maxrss,
        user: tv(ru.ru_utime),
        sys: tv(ru.ru_stime),
        minflt: ru.ru_minflt,
        majflt: ru.ru_majflt,
        rchar,
        code,
        stopped,
    })
}

pub(crate) fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| {
        fs::metadata(p).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0)
    })
}

pub(crate) fn first_line(program: &Path, arg: &str) -> Option<String> {
    let out = Command::new(program).arg(arg).env("LC_ALL", "C").output().ok()?;
    String::from_utf8_lossy(&out.stdout).lines().next().map(str::to_string)
}

pub(crate) fn knot_version(knot: &Path) -> Option<String> {
    first_line(knot, "--version")
}

pub(crate) fn git(root: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").current_dir(root).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

pub(crate) fn machine_info() -> Value {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, v)| v.trim().to_string()));
    let mem_kib = fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        m.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    });
    json!({
        "cores": std::thread::available_parallelism().map(|n| n.get()).ok(),
        "cpu": cpu,
        "mem_total_bytes": mem_kib.map(|k| k * 1024),
        "kernel": fs::read_to_string("/proc/sys/kernel/osrelease").ok().map(|s| s.trim().to_string()),
    })
}

/// The 1-minute load average (other work competing for the cores).
pub(crate) fn loadavg() -> Option<f64> {
    fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

/// Now as `YYYY-MM-DDTHH:MM:SSZ`.
pub(crate) fn utc_now() -> String {
    knot::report::watch_line::rfc3339(SystemTime::now())
}
