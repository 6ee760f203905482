//! Reading a live process (`knot pid`): every thread is stopped with ptrace just long enough to
//! copy its registers and the memory the analysis reads, then let go. What was read becomes an
//! ELF core in memory ([`Snapshot::core_bytes`]), which [`crate::core::Core::from_bytes`] reads
//! like any dump: every later stage is the one dumps use.
//!
//! Linux on x86_64 only, like the dump reader.

mod attach;
pub(crate) mod corebuilder;
pub(crate) mod maps;
mod memory;
mod snapshot;

pub use snapshot::{take, Snapshot};

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// How a live reading is made.
#[derive(Debug, Clone)]
pub struct LiveOptions {
    /// Memory copied at most, besides stacks and module headers (which are always copied).
    pub max_copy_bytes: u64,
    /// Per thread, the stack copied from its stack pointer up.
    pub max_stack_bytes: u64,
    /// Set (e.g. by a signal handler) to stop reading and let the process go at once.
    pub cancel: Arc<AtomicBool>,
    /// True while the process is stopped: a signal handler waits for it to go false.
    pub attached: Arc<AtomicBool>,
    /// Tests only: stay attached this long before reading (to interrupt knot there).
    pub test_pause_after_attach: Option<Duration>,
    /// Tests only: fail right after attaching (to prove a failure lets the process go).
    pub test_fail_after_attach: bool,
}

impl Default for LiveOptions {
    fn default() -> Self {
        LiveOptions {
            max_copy_bytes: 512 << 20,
            max_stack_bytes: 16 << 20,
            cancel: Arc::default(),
            attached: Arc::default(),
            test_pause_after_attach: None,
            test_fail_after_attach: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("no process {pid}")]
    NoSuchProcess { pid: i32 },
    #[error("knot cannot read itself (pid {pid})")]
    SelfTrace { pid: i32 },
    #[error("process {pid} is already being traced by {tracer} ({tracer_name}); only one tracer can attach at a time: detach it (quit the debugger) first")]
    AlreadyTraced { pid: i32, tracer: u32, tracer_name: String },
    #[error("not permitted to trace process {pid}: {why}")]
    NotPermitted { pid: i32, why: String },
    #[error("process {pid}, thread {tid}: {what} failed: {source}")]
    Ptrace { pid: i32, tid: i32, what: &'static str, source: std::io::Error },
    #[error("thread {tid} did not stop within {waited:?} (in uninterruptible sleep?); the process was let go")]
    DidNotStop { tid: i32, waited: Duration },
    #[error("process {pid} kept creating threads through {rounds} rounds of stopping them; the process was let go")]
    Unsettled { pid: i32, rounds: usize },
    #[error("interrupted; process {pid} was let go")]
    Interrupted { pid: i32 },
    #[error("failing after attaching, as KNOT_TEST_FAIL_AFTER_ATTACH asked; process {pid} was let go")]
    TestFailure { pid: i32 },
    #[error("cannot read /proc/{pid}/{file}: {source}")]
    Proc { pid: i32, file: &'static str, source: std::io::Error },
}

impl LiveError {
    /// knot was not allowed to read the process, or there is none: nothing was attached.
    pub fn is_refusal(&self) -> bool {
        matches!(self, LiveError::NoSuchProcess { .. } | LiveError::SelfTrace { .. } | LiveError::AlreadyTraced { .. } | LiveError::NotPermitted { .. })
    }

    pub fn is_interruption(&self) -> bool {
        matches!(self, LiveError::Interrupted { .. })
    }

    /// The error for a refused `PTRACE_SEIZE` (`errno` `e`), with what to do about it.
    fn refused(pid: i32, e: i32) -> LiveError {
        match e {
            libc::ESRCH => LiveError::NoSuchProcess { pid },
            libc::EPERM => match tracer_of(pid) {
                Some((tracer, tracer_name)) => LiveError::AlreadyTraced { pid, tracer, tracer_name },
                None => LiveError::NotPermitted { pid, why: why_not_permitted(pid) },
            },
            _ => LiveError::Ptrace { pid, tid: pid, what: "PTRACE_SEIZE", source: std::io::Error::from_raw_os_error(e) },
        }
    }
}

fn status_field(pid: i32, key: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix(key)).map(|v| v.trim().to_string())
}

/// The process tracing `pid`, if any (TracerPid in /proc/PID/status).
fn tracer_of(pid: i32) -> Option<(u32, String)> {
    let tracer: u32 = status_field(pid, "TracerPid:")?.parse().ok().filter(|&t| t != 0)?;
    let name = std::fs::read_to_string(format!("/proc/{tracer}/comm")).map(|s| s.trim().to_string()).unwrap_or_else(|_| "?".into());
    Some((tracer, name))
}

/// Why the kernel said EPERM, as far as /proc tells, and how to allow it.
fn why_not_permitted(pid: i32) -> String {
    let mut why = Vec::new();
    const CAP_SYS_PTRACE: u32 = 19;
    let has_cap = status_field(std::process::id() as i32, "CapEff:").and_then(|h| u64::from_str_radix(&h, 16).ok()).is_some_and(|c| c & (1 << CAP_SYS_PTRACE) != 0);
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").ok().and_then(|s| s.trim().parse::<u32>().ok());
    match scope {
        Some(3) => why.push("kernel.yama.ptrace_scope is 3: no process may attach with ptrace until the next reboot".to_string()),
        Some(2) if !has_cap => why.push("kernel.yama.ptrace_scope is 2: only a process with CAP_SYS_PTRACE may attach (run knot with that capability, e.g. as root or with `securityContext.capabilities.add: [SYS_PTRACE]`)".to_string()),
        Some(1) if !has_cap => why.push(
            "kernel.yama.ptrace_scope is 1: only a parent may attach to its descendants; run knot with CAP_SYS_PTRACE (e.g. `sudo knot pid PID`), or allow it system-wide with `sysctl kernel.yama.ptrace_scope=0`".to_string(),
        ),
        _ => {}
    }
    let target_uid = status_field(pid, "Uid:").and_then(|u| u.split_whitespace().next()?.parse::<u32>().ok());
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    if let Some(t) = target_uid.filter(|&t| t != uid)
        && !has_cap
    {
        why.push(format!("the process runs as uid {t} and knot as uid {uid}: run knot as uid {t}, or with CAP_SYS_PTRACE"));
    }
    if !has_cap {
        why.push("knot lacks CAP_SYS_PTRACE (in a container: add the SYS_PTRACE capability; a process that made itself non-dumpable or runs setuid also needs it)".to_string());
    } else {
        why.push("knot has CAP_SYS_PTRACE, so a security module (SELinux, AppArmor, seccomp) or a user namespace boundary refused it".to_string());
    }
    why.join("; ")
}

/// The process to read: `pid` itself, or the process a thread id belongs to; refused before
/// anything is attached when it is knot, gone or traced already.
fn check_target(pid: i32) -> Result<i32, LiveError> {
    if pid <= 0 {
        return Err(LiveError::NoSuchProcess { pid });
    }
    let tgid: i32 = status_field(pid, "Tgid:").and_then(|t| t.parse().ok()).ok_or(LiveError::NoSuchProcess { pid })?;
    if tgid == std::process::id() as i32 {
        return Err(LiveError::SelfTrace { pid });
    }
    if let Some((tracer, tracer_name)) = tracer_of(tgid) {
        return Err(LiveError::AlreadyTraced { pid: tgid, tracer, tracer_name });
    }
    Ok(tgid)
}
