//! NT_SIGINFO: the `siginfo_t` of the signal that caused the dump (kernel cores since 3.7, gcore).
//! Older kernels and some dumpers write none: then the signal is only the dumping thread's
//! NT_PRSTATUS `pr_cursig`, without `si_code` or address (`SignalInfo::from_cursig`).

use crate::bytes::{i32_at, u64_at};
use serde::Serialize;

/// Where the dump recorded the signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SignalSource {
    /// NT_SIGINFO: the whole `siginfo_t`.
    Siginfo,
    /// Only NT_PRSTATUS `pr_cursig`: the number; code, address and sender are unknown.
    Prstatus,
}

#[derive(Debug, Clone, Serialize)]
pub struct SignalInfo {
    pub(crate) signo: i32,
    /// `si_code`; `None` when the dump has no NT_SIGINFO.
    pub(crate) code: Option<i32>,
    pub(crate) source: SignalSource,
    pub(crate) errno: i32,
    /// The faulting address for SIGSEGV/SIGBUS/SIGILL/SIGFPE; the sender's pid for kill().
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) fault_address: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) sender_pid: Option<u32>,
}

const SIGILL: i32 = 4;
const SIGBUS: i32 = 7;
const SIGFPE: i32 = 8;
const SIGSEGV: i32 = 11;
/// si_code <= 0 means the signal came from a process (kill, tgkill, sigqueue).
const SI_USER_MAX: i32 = 0;

pub(crate) fn parse(desc: &[u8]) -> Option<SignalInfo> {
    let signo = i32_at(desc, 0)?;
    let errno = i32_at(desc, 4)?;
    let code = i32_at(desc, 8)?;
    let fault = matches!(signo, SIGILL | SIGBUS | SIGFPE | SIGSEGV) && code > SI_USER_MAX;
    Some(SignalInfo {
        signo,
        code: Some(code),
        source: SignalSource::Siginfo,
        errno,
        fault_address: if fault { u64_at(desc, 16) } else { None },
        sender_pid: if code <= SI_USER_MAX { i32_at(desc, 16).map(|p| p as u32) } else { None },
    })
}

impl SignalInfo {
    /// The signal of a core without NT_SIGINFO, from the dumping thread's `pr_cursig`.
    pub(crate) fn from_cursig(cursig: u16) -> SignalInfo {
        SignalInfo { signo: i32::from(cursig), code: None, source: SignalSource::Prstatus, errno: 0, fault_address: None, sender_pid: None }
    }
}

/// The conventional name of a Linux signal number.
pub(crate) fn signal_name(signo: i32) -> &'static str {
    const NAMES: [&str; 32] = [
        "0", "SIGHUP", "SIGINT", "SIGQUIT", "SIGILL", "SIGTRAP", "SIGABRT", "SIGBUS", "SIGFPE",
        "SIGKILL", "SIGUSR1", "SIGSEGV", "SIGUSR2", "SIGPIPE", "SIGALRM", "SIGTERM", "SIGSTKFLT",
        "SIGCHLD", "SIGCONT", "SIGSTOP", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGURG", "SIGXCPU",
        "SIGXFSZ", "SIGVTALRM", "SIGPROF", "SIGWINCH", "SIGIO", "SIGPWR", "SIGSYS",
    ];
    usize::try_from(signo).ok().and_then(|i| NAMES.get(i)).copied().unwrap_or("SIGRT")
}
