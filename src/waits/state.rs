//! What a thread was doing at the moment of the dump, from its registers alone: inside a syscall
//! (as [`crate::arch::syscall`] tells it for the core's architecture), and which one, by name.

use crate::arch::{Arch, Registers};
use crate::process::Memory;
use crate::hex::Hex;
use schemars::JsonSchema;
use serde::Serialize;

/// How many innermost frames may name the futex wait a `restart_syscall` resumed.
const RESTART_FRAMES: usize = 6;

const FUTEX_CMD_MASK: u64 = 0x7f;
const FUTEX_PRIVATE_FLAG: u64 = 128;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ThreadState {
    /// Not inside a syscall: on a CPU or runnable when the dump was taken.
    Running,
    /// Waiting on a futex word.
    Futex {
        address: Hex,
        /// The value the thread expects the word to hold while it sleeps (FUTEX_WAIT's `val`).
        expected: u32,
        /// The futex operation (`FUTEX_WAIT`, `FUTEX_WAIT_BITSET`, `FUTEX_LOCK_PI`, …).
        op: String,
        private: bool,
    },
    /// Waiting on several futexes at once (futex_waitv).
    FutexWaitv,
    /// Waiting for file descriptors to become ready (poll, select, epoll).
    Polling { syscall: String },
    /// Sleeping for a time (nanosleep, clock_nanosleep) or until a signal (pause, sigsuspend);
    /// `syscall` is the call it sleeps in: a syscall, or a runtime's sleep (`Thread.Sleep`,
    /// which sleeps on a condition variable).
    Sleeping { syscall: String },
    /// One of a runtime's own service threads, idle: waiting for nothing held or awaited (the
    /// .NET finalizer, tiered compilation, timer, thread-pool gate, SynchManager, signal
    /// handler, debugger, EventPipe threads). `role` names it where the runtime says which.
    IdleRuntimeThread {
        #[schemars(with = "String")]
        role: IdleRole,
    },
    /// A thread-pool worker between work items, waiting for work.
    WaitingForWork {
        #[schemars(with = "String")]
        pool: Pool,
    },
    /// Parked until another thread unparks it (`std::thread::park`): a wait on no lock.
    Parked { function: String },
    /// Blocked reading, writing, accepting or connecting on a file descriptor.
    Io { syscall: String, fd: i64 },
    /// Waiting for a child process (wait4, waitid).
    WaitingForChild { syscall: String },
    /// Stopped by a job-control signal.
    Stopped { signal: u16 },
    /// Inside another syscall.
    Syscall { number: u64, name: String },
}

/// Which of a runtime's service threads an idle one is (in JSON, the report's words for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdleRole {
    Finalizer,
    /// A thread the runtime made for itself that never ran managed code.
    RuntimeService,
    ThreadPoolGate,
    Timer,
}

/// The pool a worker waits for work in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pool {
    ThreadPool,
    /// A library's own worker threads (its scheduler's loop): `Pipelines.Sockets.Unofficial`'s
    /// dedicated scheduler, StackExchange.Redis' IO threads.
    SocketScheduler,
}

impl ThreadState {
    /// Inside a wait of some kind (a sleep counts: the verdict's `idle`). An idle runtime
    /// thread and a worker waiting for work are not: they wait for nothing anybody holds.
    pub fn is_blocked(&self) -> bool {
        !matches!(self, ThreadState::Running | ThreadState::IdleRuntimeThread { .. } | ThreadState::WaitingForWork { .. })
    }

    /// An idle thread: a runtime's service thread or a pool worker with no work.
    pub fn is_idle(&self) -> bool {
        matches!(self, ThreadState::IdleRuntimeThread { .. } | ThreadState::WaitingForWork { .. })
    }
}

fn name(arch: Arch, nr: u64) -> String {
    arch.syscall_name(nr).map_or_else(|| format!("syscall {nr}"), str::to_string)
}

fn futex_op(op: u64) -> &'static str {
    match op & FUTEX_CMD_MASK {
        0 => "FUTEX_WAIT",
        6 => "FUTEX_LOCK_PI",
        9 => "FUTEX_WAIT_BITSET",
        11 => "FUTEX_WAIT_REQUEUE_PI",
        13 => "FUTEX_LOCK_PI2",
        _ => "FUTEX_OTHER",
    }
}

/// Job-control stops.
fn is_stop_signal(sig: u16) -> bool {
    matches!(sig, 19..=22)
}

pub(crate) fn classify(regs: &Registers, cursig: u16, memory: &dyn Memory) -> ThreadState {
    if is_stop_signal(cursig) {
        return ThreadState::Stopped { signal: cursig };
    }
    let Some(call) = crate::arch::syscall(regs, memory) else { return ThreadState::Running };
    let (arch, nr, args) = (regs.arch(), call.number, call.args);
    let syscall = name(arch, nr);
    // By name: the numbers differ between the x86-64 table and the generic one (aarch64).
    match arch.syscall_name(nr).unwrap_or("") {
        "futex" => ThreadState::Futex {
            address: Hex(args[0]),
            expected: args[2] as u32,
            op: futex_op(args[1]).to_string(),
            private: args[1] & FUTEX_PRIVATE_FLAG != 0,
        },
        "futex_waitv" => ThreadState::FutexWaitv,
        // No descriptors to wait for: a sleep. aarch64 has no `pause`; glibc's is
        // `ppoll(NULL, 0, NULL, NULL)`.
        "ppoll" | "poll" if args[1] == 0 && regs.arch() == Arch::Aarch64 => ThreadState::Sleeping { syscall },
        "poll" | "select" | "epoll_wait" | "pselect6" | "ppoll" | "epoll_pwait" | "epoll_pwait2" => ThreadState::Polling { syscall },
        "pause" | "nanosleep" | "rt_sigtimedwait" | "rt_sigsuspend" | "clock_nanosleep" => ThreadState::Sleeping { syscall },
        "read" | "write" | "pread64" | "pwrite64" | "readv" | "writev" | "connect" | "accept" | "sendto" | "recvfrom" | "sendmsg" | "recvmsg" | "accept4" => {
            ThreadState::Io { syscall, fd: args[0] as i64 }
        }
        "wait4" | "waitid" => ThreadState::WaitingForChild { syscall },
        _ => ThreadState::Syscall { number: nr, name: syscall },
    }
}

/// A thread in `restart_syscall` (219 on x86-64, 128 on aarch64) resumes a call the kernel
/// interrupted (a signal, or a debugger's attach: gdb and gcore leave a sleeping thread so).
/// The kernel restarts this way only calls with a timeout: a timed futex wait, a sleep
/// (`nanosleep`, `clock_nanosleep`) and `poll`. Which one, the thread's innermost frames say,
/// as they say it to gdb: a futex wait (glibc's `__futex_abstimed_wait_common`,
/// `__lll_clocklock_wait`, …: `pthread_mutex_timedlock`, `pthread_cond_timedwait`,
/// `sem_timedwait`) whose registers still hold its arguments is that futex wait; a sleep is the
/// sleep; a poll the poll. Else the state is left as it is.
pub(crate) fn resolve_restart(state: ThreadState, regs: &Registers, functions: &[&str]) -> ThreadState {
    if !matches!(state, ThreadState::Syscall { number, .. } if number == regs.arch().restart_syscall()) {
        return state;
    }
    let innermost = || functions.iter().take(RESTART_FRAMES);
    if let Some(syscall) = innermost().find_map(|f| restarted_sleep_or_poll(f)) {
        return if syscall == "poll" { ThreadState::Polling { syscall: syscall.to_string() } } else { ThreadState::Sleeping { syscall: syscall.to_string() } };
    }
    let in_futex_wait = innermost().any(|f| f.contains("futex") || f.contains("lll_lock_wait") || f.contains("lll_clocklock_wait"));
    let [address, op, expected, ..] = regs.syscall_args();
    let wait_op = matches!(op & FUTEX_CMD_MASK, 0 | 6 | 9 | 11 | 13);
    if !in_futex_wait || !wait_op || address == 0 {
        return state;
    }
    ThreadState::Futex { address: Hex(address), expected: expected as u32, op: futex_op(op).to_string(), private: op & FUTEX_PRIVATE_FLAG != 0 }
}

/// The restartable call a frame's function makes, when it is a sleep or a poll: glibc's
/// `__GI___clock_nanosleep` (what `nanosleep`, `sleep` and `usleep` call), `__GI___poll`.
fn restarted_sleep_or_poll(function: &str) -> Option<&'static str> {
    let base = function.trim_start_matches('_').trim_start_matches("GI_").trim_start_matches('_').trim_start_matches("libc_");
    match base {
        "clock_nanosleep" | "clock_nanosleep64" | "clock_nanosleep_time64" => Some("clock_nanosleep"),
        "nanosleep" | "nanosleep64" => Some("nanosleep"),
        "poll" | "poll_chk" => Some("poll"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::x86_64::Registers as X86;
    use crate::process::RangeMemory;

    fn regs(orig_rax: u64, rip: u64) -> Registers {
        Registers::X86_64(X86 { orig_rax, rip, rdi: 0x5000, rsi: 128, rdx: 2, ..Default::default() })
    }

    fn code_with_syscall_at(rip: u64) -> RangeMemory {
        let mut m = RangeMemory::new();
        m.add(rip - 2, vec![0x0f, 0x05, 0x90]);
        m
    }

    #[test]
    fn a_futex_wait_names_its_word_and_expected_value() {
        let s = classify(&regs(202, 0x1002), 0, &code_with_syscall_at(0x1002));
        assert_eq!(s, ThreadState::Futex { address: Hex(0x5000), expected: 2, op: "FUTEX_WAIT".into(), private: true });
    }

    #[test]
    fn outside_a_syscall_is_running() {
        assert_eq!(classify(&regs(u64::MAX, 0x1002), 0, &code_with_syscall_at(0x1002)), ThreadState::Running);
        let mut m = RangeMemory::new();
        m.add(0x1000, vec![0x90, 0x90, 0x90]);
        assert_eq!(classify(&regs(202, 0x1002), 0, &m), ThreadState::Running, "orig_rax without a syscall instruction");
    }

    #[test]
    fn a_restarted_timed_futex_wait_is_that_wait_only_under_a_futex_frame() {
        let m = code_with_syscall_at(0x1002);
        let r = Registers::X86_64(X86 { orig_rax: 219, rip: 0x1002, rdi: 0x5000, rsi: 128 | 9, rdx: 2, ..Default::default() });
        let s = classify(&r, 0, &m);
        assert!(matches!(s, ThreadState::Syscall { number: 219, .. }));
        let waiting = resolve_restart(s.clone(), &r, &["__futex_abstimed_wait_common", "__pthread_mutex_clocklock_common"]);
        assert_eq!(waiting, ThreadState::Futex { address: Hex(0x5000), expected: 2, op: "FUTEX_WAIT_BITSET".into(), private: true });
        assert_eq!(resolve_restart(s.clone(), &r, &["__GI___clock_nanosleep", "sleep"]), ThreadState::Sleeping { syscall: "clock_nanosleep".into() }, "a restarted nanosleep is not a futex wait");
    }

    #[test]
    fn a_sleep_an_attach_restarted_is_the_sleep_it_was() {
        // gcore (or knot) attached to a thread in clock_nanosleep: the kernel resumed it as
        // restart_syscall, under the same frames gdb shows.
        let m = code_with_syscall_at(0x1002);
        let r = Registers::X86_64(X86 { orig_rax: 219, rip: 0x1002, ..Default::default() });
        let s = classify(&r, 0, &m);
        for (frames, want) in [
            (&["__GI___clock_nanosleep", "__GI___nanosleep", "std::sys::pal::unix::thread::Thread::sleep"][..], "clock_nanosleep"),
            (&["__GI___nanosleep", "hold_for<long, std::ratio<3600l, 1l> >"][..], "nanosleep"),
        ] {
            assert_eq!(resolve_restart(s.clone(), &r, frames), ThreadState::Sleeping { syscall: want.into() }, "{frames:?}");
        }
        assert_eq!(resolve_restart(s.clone(), &r, &["__GI___poll", "wait_for_input"]), ThreadState::Polling { syscall: "poll".into() });
        assert_eq!(resolve_restart(s.clone(), &r, &["read_config", "main"]), s, "frames that name no restartable call leave restart_syscall as it is");
        assert_eq!(restarted_sleep_or_poll("__clock_nanosleep_time64"), Some("clock_nanosleep"));
        assert_eq!(restarted_sleep_or_poll("nanosleep_stats"), None, "a program's own function is no sleep");
        assert_eq!(restarted_sleep_or_poll("polling_loop"), None);
    }

    #[test]
    fn sleeps_and_io_are_told_apart() {
        let m = code_with_syscall_at(0x1002);
        assert!(matches!(classify(&regs(230, 0x1002), 0, &m), ThreadState::Sleeping { .. }));
        assert!(matches!(classify(&regs(0, 0x1002), 0, &m), ThreadState::Io { fd: 0x5000, .. }));
        assert!(matches!(classify(&regs(61, 0x1002), 0, &m), ThreadState::WaitingForChild { .. }));
        assert!(matches!(classify(&regs(u64::MAX, 0x1002), 19, &m), ThreadState::Stopped { signal: 19 }));
    }

    #[test]
    fn an_aarch64_futex_wait_rewound_onto_its_svc_is_read_from_x8_and_x0_to_x2() {
        let mut m = RangeMemory::new();
        m.add(0x1000, vec![0x01, 0x00, 0x00, 0xd4]);
        let mut r = crate::arch::aarch64::Registers { pc: 0x1000, ..Default::default() };
        r.x[..3].copy_from_slice(&[0x5000, 128, 2]);
        r.x[8] = 98;
        let s = classify(&Registers::Aarch64(r), 0, &m);
        assert_eq!(s, ThreadState::Futex { address: Hex(0x5000), expected: 2, op: "FUTEX_WAIT".into(), private: true });
        r.x[8] = 202; // x86-64's futex is accept in the generic table
        assert!(matches!(classify(&Registers::Aarch64(r), 0, &m), ThreadState::Io { fd: 0x5000, .. }));
        r.x[8] = 128;
        r.x[1] = 128 | 9;
        let s = classify(&Registers::Aarch64(r), 0, &m);
        assert!(matches!(s, ThreadState::Syscall { number: 128, .. }));
        let waiting = resolve_restart(s, &Registers::Aarch64(r), &["__futex_abstimed_wait_common"]);
        assert_eq!(waiting, ThreadState::Futex { address: Hex(0x5000), expected: 2, op: "FUTEX_WAIT_BITSET".into(), private: true });
    }
}
