//! The signal that killed the process: `si_code` named as the kernel names it, and what kind of
//! death the signal and its sender make.

use super::model::CrashKind;

pub(crate) const SIGQUIT: i32 = 3;
pub(crate) const SIGILL: i32 = 4;
pub(crate) const SIGTRAP: i32 = 5;
pub(crate) const SIGABRT: i32 = 6;
pub(crate) const SIGBUS: i32 = 7;
pub(crate) const SIGFPE: i32 = 8;
pub(crate) const SIGSEGV: i32 = 11;
pub(crate) const SIGXCPU: i32 = 24;
pub(crate) const SIGXFSZ: i32 = 25;
pub(crate) const SIGSYS: i32 = 31;

/// `si_code` of a signal `kill` sent.
pub(crate) const SI_USER: i32 = 0;
/// `si_code` of a fault the kernel raised without an address (a general-protection fault).
pub(crate) const SI_KERNEL: i32 = 0x80;
pub(crate) const BUS_ADRERR: i32 = 2;

/// The signals whose default action is to dump core (signal(7)).
pub(crate) fn dumps_core(signo: i32) -> bool {
    matches!(signo, SIGQUIT | SIGILL | SIGTRAP | SIGABRT | SIGBUS | SIGFPE | SIGSEGV | SIGXCPU | SIGXFSZ | SIGSYS)
}

/// Signals the CPU raises for the faulting instruction (with `si_code > 0`).
pub(crate) fn is_fault_signal(signo: i32) -> bool {
    matches!(signo, SIGILL | SIGTRAP | SIGBUS | SIGFPE | SIGSEGV | SIGSYS)
}

/// `si_code`'s name (include/uapi/asm-generic/siginfo.h): the per-signal codes when positive,
/// the generic SI_* codes otherwise.
pub(crate) fn code_name(signo: i32, code: i32) -> Option<&'static str> {
    let generic = match code {
        0 => Some("SI_USER"),
        0x80 => Some("SI_KERNEL"),
        -1 => Some("SI_QUEUE"),
        -2 => Some("SI_TIMER"),
        -3 => Some("SI_MESGQ"),
        -4 => Some("SI_ASYNCIO"),
        -5 => Some("SI_SIGIO"),
        -6 => Some("SI_TKILL"),
        -7 => Some("SI_DETHREAD"),
        -60 => Some("SI_ASYNCNL"),
        _ => None,
    };
    if code <= 0 || code == SI_KERNEL {
        return generic;
    }
    let names: &[&str] = match signo {
        SIGILL => &["ILL_ILLOPC", "ILL_ILLOPN", "ILL_ILLADR", "ILL_ILLTRP", "ILL_PRVOPC", "ILL_PRVREG", "ILL_COPROC", "ILL_BADSTK", "ILL_BADIADDR"],
        SIGFPE => &[
            "FPE_INTDIV", "FPE_INTOVF", "FPE_FLTDIV", "FPE_FLTOVF", "FPE_FLTUND", "FPE_FLTRES", "FPE_FLTINV", "FPE_FLTSUB", "", "", "", "", "", "FPE_FLTUNK",
            "FPE_CONDTRAP",
        ],
        SIGSEGV => &[
            "SEGV_MAPERR", "SEGV_ACCERR", "SEGV_BNDERR", "SEGV_PKUERR", "SEGV_ACCADI", "SEGV_ADIDERR", "SEGV_ADIPERR", "SEGV_MTEAERR", "SEGV_MTESERR",
            "SEGV_CPERR",
        ],
        SIGBUS => &["BUS_ADRALN", "BUS_ADRERR", "BUS_OBJERR", "BUS_MCEERR_AR", "BUS_MCEERR_AO"],
        SIGTRAP => &["TRAP_BRKPT", "TRAP_TRACE", "TRAP_BRANCH", "TRAP_HWBKPT", "TRAP_UNK", "TRAP_PERF"],
        17 => &["CLD_EXITED", "CLD_KILLED", "CLD_DUMPED", "CLD_TRAPPED", "CLD_STOPPED", "CLD_CONTINUED"],
        29 => &["POLL_IN", "POLL_OUT", "POLL_MSG", "POLL_ERR", "POLL_PRI", "POLL_HUP"],
        SIGSYS => &["SYS_SECCOMP", "SYS_USER_DISPATCH"],
        _ => &[],
    };
    usize::try_from(code - 1).ok().and_then(|i| names.get(i)).copied().filter(|n| !n.is_empty())
}

/// The kind of death a core-dumping signal makes; `None` for a signal that dumps no core (gcore
/// records the SIGSTOP it stopped the process with): no crash.
///
/// A signal the process sent itself (raise/abort: `tgkill` from its own pid), or one with
/// sender pid 0 while the thread is raising it (the .NET runtime's own dump writer records
/// SIGABRT, SI_USER, pid 0), is an abort; one another process sent is `killed`. A kill
/// (`SI_USER`) whose sender is pid 0 and which the thread did not raise itself comes from a
/// process outside the dumped process's PID namespace (the kernel gives 0 for a sender the
/// receiver cannot see: a container's process killed from the host): `killed`.
///
/// Without `si_code` (a core without NT_SIGINFO) the likeliest reading: a fault signal is a
/// fault, SIGABRT an abort, any other a kill.
pub(crate) fn kind(signo: i32, code: Option<i32>, sender_pid: Option<u32>, own_pid: Option<u32>, raised_itself: bool) -> Option<CrashKind> {
    if !dumps_core(signo) {
        return None;
    }
    let Some(code) = code else {
        return Some(match signo {
            _ if is_fault_signal(signo) && signo != SIGTRAP && signo != SIGSYS => CrashKind::Fault,
            SIGABRT => CrashKind::Abort,
            _ => CrashKind::Killed,
        });
    };
    if code > 0 {
        return Some(if is_fault_signal(signo) { CrashKind::Fault } else { CrashKind::Killed });
    }
    match sender_pid {
        Some(0) if code == SI_USER && !raised_itself => Some(CrashKind::Killed),
        Some(0) | None => Some(CrashKind::Abort),
        Some(p) if Some(p) == own_pid => Some(CrashKind::Abort),
        Some(_) => Some(CrashKind::Killed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_named_per_signal() {
        assert_eq!(code_name(SIGSEGV, 1), Some("SEGV_MAPERR"));
        assert_eq!(code_name(SIGSEGV, 2), Some("SEGV_ACCERR"));
        assert_eq!(code_name(SIGBUS, 2), Some("BUS_ADRERR"));
        assert_eq!(code_name(SIGFPE, 1), Some("FPE_INTDIV"));
        assert_eq!(code_name(SIGFPE, 14), Some("FPE_FLTUNK"));
        assert_eq!(code_name(SIGILL, 2), Some("ILL_ILLOPN"));
        assert_eq!(code_name(SIGABRT, -6), Some("SI_TKILL"));
        assert_eq!(code_name(SIGQUIT, 0), Some("SI_USER"));
        assert_eq!(code_name(SIGSEGV, 0x80), Some("SI_KERNEL"));
        assert_eq!(code_name(SIGSEGV, 99), None);
        assert_eq!(code_name(SIGFPE, 9), None);
    }

    #[test]
    fn who_sent_it_decides_abort_or_killed() {
        assert_eq!(kind(SIGABRT, Some(-6), Some(100), Some(100), true), Some(CrashKind::Abort));
        assert_eq!(kind(SIGABRT, Some(0), Some(0), Some(100), true), Some(CrashKind::Abort), "the .NET runtime's own dump: not killed");
        assert_eq!(kind(SIGABRT, Some(0), Some(0), Some(2), false), Some(CrashKind::Killed), "a kill from outside the PID namespace: no abort");
        assert_eq!(kind(SIGQUIT, Some(0), Some(7), Some(100), false), Some(CrashKind::Killed));
        assert_eq!(kind(SIGSEGV, Some(1), None, Some(100), false), Some(CrashKind::Fault));
        assert_eq!(kind(19, Some(0x80), None, Some(100), false), None, "gcore's SIGSTOP is no crash");
        // pr_cursig only (no NT_SIGINFO).
        assert_eq!(kind(SIGSEGV, None, None, Some(100), false), Some(CrashKind::Fault));
        assert_eq!(kind(SIGABRT, None, None, Some(100), false), Some(CrashKind::Abort));
        assert_eq!(kind(SIGQUIT, None, None, Some(100), false), Some(CrashKind::Killed));
    }
}
