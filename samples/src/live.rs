//! A native sample run to its wedged state and left running, for reading it live (`knot pid`)
//! and then dumping the very same process with gcore.

use crate::maker::{ChildGuard, find_tool, wait_all_blocked};
use crate::{Availability, DumpKind, SampleDump};
use anyhow::{Context, Result, anyhow, bail};
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A wedged sample process; killed when dropped.
pub struct LiveSample {
    pub name: String,
    /// The built sample (and its debug directory): the same files its dumps are read with.
    pub built: SampleDump,
    pub dir: PathBuf,
    child: ChildGuard,
}

impl LiveSample {
    pub fn pid(&self) -> u32 {
        self.child.pid() as u32
    }

    /// A gcore dump of this process in its directory (gdb attaches, writes, detaches).
    pub fn gcore(&self) -> Result<PathBuf> {
        let gcore = find_tool("gcore").ok_or_else(|| anyhow!("gcore not found on PATH"))?;
        let out = Command::new(gcore)
            .current_dir(&self.dir)
            .env_remove("DEBUGINFOD_URLS")
            .env("LC_ALL", "C")
            .args(["-o", "gcore"])
            .arg(self.pid().to_string())
            .stdin(Stdio::null())
            .output()
            .context("running gcore")?;
        let core = self.dir.join(format!("gcore.{}", self.pid()));
        if !out.status.success() || !core.is_file() {
            bail!("gcore failed ({}): {}{}", out.status, String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        }
        Ok(core)
    }

    /// The syscall each thread sleeps in (`/proc/PID/task/*/syscall`'s first field, the number),
    /// to tell that a reading disturbed nothing: see [`still_in_the_same_calls`].
    pub fn syscalls(&self) -> Result<Vec<(u32, String)>> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(format!("/proc/{}/task", self.pid()))? {
            let e = e?;
            let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
            let sc = std::fs::read_to_string(e.path().join("syscall")).unwrap_or_default();
            out.push((tid, sc.split_whitespace().next().unwrap_or("").to_string()));
        }
        out.sort();
        Ok(out)
    }
}

/// x86-64's `restart_syscall`, and the calls with a timeout the kernel resumes through it:
/// `poll`, `nanosleep`, `futex` (a timed wait), `clock_nanosleep`.
const RESTART_SYSCALL: &str = "219";
const RESUMED_BY_RESTART_SYSCALL: &[&str] = &["7", "35", "202", "230"];

/// Whether every thread of `before` still sleeps in the call it slept in (`after`, both from
/// [`LiveSample::syscalls`]). Any ptrace stop (knot's, gdb's) interrupts a call with a timeout
/// and the kernel resumes it, with the time it had left, as `restart_syscall`: that is the same
/// call going on, not a disturbance.
pub fn still_in_the_same_calls(before: &[(u32, String)], after: &[(u32, String)]) -> bool {
    before.len() == after.len()
        && before.iter().zip(after).all(|((t0, s0), (t1, s1))| {
            t0 == t1 && (s0 == s1 || (s1 == RESTART_SYSCALL && (s0 == RESTART_SYSCALL || RESUMED_BY_RESTART_SYSCALL.contains(&s0.as_str()))))
        })
}

/// Builds sample `name` (through [`crate::ensure`]'s cache), starts it with `args` in a fresh
/// directory under `target/samples/live/`, and returns once it printed `ready` and every thread
/// sleeps in a syscall. `Ok(None)` when this machine cannot build it (the reason is printed).
pub fn start_live(name: &str, args: &[&str]) -> Result<Option<LiveSample>> {
    let built = match crate::try_ensure_with_args(name, DumpKind::Gcore, args)? {
        Availability::Ready(d) => d,
        Availability::Skipped(why) => {
            crate::skipped(&format!("skipping live {name}: {why}"));
            return Ok(None);
        }
    };
    let dir = crate::out_dir().join("live").join(format!("{name}-{}-{}", std::process::id(), unique()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut cmd = Command::new(&built.binary);
    let spec = crate::catalogue::find(name).ok_or_else(|| anyhow!("no sample named {name:?}"))?;
    cmd.args(crate::maker::script_args(spec, built.binary.parent().unwrap_or(std::path::Path::new("."))));
    cmd.args(args).current_dir(&dir).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null());
    // SAFETY: prctl is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            // Die with the test: no stray wedged programs.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = cmd.spawn().with_context(|| format!("starting {}", built.binary.display()))?;
    let stdout = child.stdout.take();
    let child = ChildGuard(Some(child));
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    if let Some(out) = stdout {
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(|l| l.ok()) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) if line.trim() == "ready" => break,
            Ok(_) => continue,
            Err(_) => bail!("{name}: no \"ready\" within 30 s"),
        }
    }
    wait_all_blocked(child.pid(), Duration::from_secs(20))?;
    Ok(Some(LiveSample { name: name.to_string(), built, dir, child }))
}

fn unique() -> u64 {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Drop for LiveSample {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The directory a live sample's files are in, for messages.
pub fn live_dir() -> PathBuf {
    crate::out_dir().join("live")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls(c: &[(u32, &str)]) -> Vec<(u32, String)> {
        c.iter().map(|&(t, s)| (t, s.to_string())).collect()
    }

    #[test]
    fn a_sleep_resumed_by_restart_syscall_is_the_same_call_and_nothing_else_is() {
        let before = calls(&[(10, "202"), (11, "230")]);
        assert!(still_in_the_same_calls(&before, &calls(&[(10, "202"), (11, "219")])), "clock_nanosleep resumed");
        assert!(still_in_the_same_calls(&before, &calls(&[(10, "219"), (11, "219")])), "a timed futex wait resumed");
        assert!(!still_in_the_same_calls(&before, &calls(&[(10, "202"), (11, "0")])), "a sleep that became a read");
        assert!(!still_in_the_same_calls(&calls(&[(10, "0")]), &calls(&[(10, "219")])), "a read is never resumed so");
        assert!(!still_in_the_same_calls(&before, &calls(&[(10, "202")])), "a thread gone");
    }
}
