//! What a thread was doing at the moment of the dump, from its registers alone: inside a syscall
//! (`orig_rax` holds its number and `rip` follows a `syscall` instruction), and which one.

use crate::arch::x86_64::Registers;
use crate::process::Memory;
use crate::hex::Hex;
use schemars::JsonSchema;
use serde::Serialize;

pub(crate) const SYS_FUTEX: u64 = 202;
/// The kernel's restart of an interrupted call with a timeout (a timed futex wait, a
/// nanosleep) after a stop or an ignored signal: the thread re-entered it as `restart_syscall`,
/// with the original call's argument registers.
pub(crate) const SYS_RESTART_SYSCALL: u64 = 219;
/// How many innermost frames may name the futex wait a `restart_syscall` resumed.
const RESTART_FRAMES: usize = 6;
pub(crate) const SYS_FUTEX_WAITV: u64 = 449;

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

fn name(nr: u64) -> String {
    crate::arch::syscalls::name(nr).map_or_else(|| format!("syscall {nr}"), str::to_string)
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
    matches!(sig, 19 | 20 | 21 | 22)
}

/// Whether the two bytes before `rip` are `syscall` (0f 05): the kernel reports `rip` just past it.
fn after_syscall_instruction(memory: &dyn Memory, rip: u64) -> bool {
    let mut b = [0u8; 2];
    rip.checked_sub(2).is_some_and(|at| memory.read(at, &mut b).is_ok()) && b == [0x0f, 0x05]
}

pub(crate) fn classify(regs: &Registers, cursig: u16, memory: &dyn Memory) -> ThreadState {
    if is_stop_signal(cursig) {
        return ThreadState::Stopped { signal: cursig };
    }
    let Some(nr) = regs.syscall_number() else { return ThreadState::Running };
    // orig_rax alone can be stale after a signal restarts a call; the instruction confirms it.
    // When the code is not readable, trust orig_rax: it is what the kernel recorded.
    let mut b = [0u8; 2];
    let readable = regs.rip.checked_sub(2).is_some_and(|at| memory.read(at, &mut b).is_ok());
    if readable && !after_syscall_instruction(memory, regs.rip) {
        return ThreadState::Running;
    }
    let syscall = name(nr);
    match nr {
        SYS_FUTEX => ThreadState::Futex {
            address: Hex(regs.rdi),
            expected: regs.rdx as u32,
            op: futex_op(regs.rsi).to_string(),
            private: regs.rsi & FUTEX_PRIVATE_FLAG != 0,
        },
        SYS_FUTEX_WAITV => ThreadState::FutexWaitv,
        7 | 23 | 232 | 270 | 271 | 281 | 441 => ThreadState::Polling { syscall },
        34 | 35 | 128 | 130 | 230 => ThreadState::Sleeping { syscall },
        0 | 1 | 17 | 18 | 19 | 20 | 42 | 43 | 44 | 45 | 46 | 47 | 288 => ThreadState::Io { syscall, fd: regs.rdi as i64 },
        61 | 247 => ThreadState::WaitingForChild { syscall },
        _ => ThreadState::Syscall { number: nr, name: syscall },
    }
}

/// A thread in `restart_syscall` (219) resumes a call the kernel interrupted: when its innermost
/// frames are a futex wait (glibc's `__futex_abstimed_wait_common`, `__lll_clocklock_wait`, …:
/// `pthread_mutex_timedlock`, `pthread_cond_timedwait`, `sem_timedwait`) and its registers still
/// hold a futex wait's arguments, it is that futex wait. Else the state is left as it is.
pub(crate) fn resolve_restart(state: ThreadState, regs: &Registers, functions: &[&str]) -> ThreadState {
    if !matches!(state, ThreadState::Syscall { number: SYS_RESTART_SYSCALL, .. }) {
        return state;
    }
    let in_futex_wait = functions.iter().take(RESTART_FRAMES).any(|f| f.contains("futex") || f.contains("lll_lock_wait") || f.contains("lll_clocklock_wait"));
    let op = regs.rsi & FUTEX_CMD_MASK;
    let wait_op = matches!(op, 0 | 6 | 9 | 11 | 13);
    if !in_futex_wait || !wait_op || regs.rdi == 0 {
        return state;
    }
    ThreadState::Futex { address: Hex(regs.rdi), expected: regs.rdx as u32, op: futex_op(regs.rsi).to_string(), private: regs.rsi & FUTEX_PRIVATE_FLAG != 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::RangeMemory;

    fn regs(orig_rax: u64, rip: u64) -> Registers {
        Registers { orig_rax, rip, rdi: 0x5000, rsi: 128, rdx: 2, ..Default::default() }
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
        let r = Registers { orig_rax: 219, rip: 0x1002, rdi: 0x5000, rsi: 128 | 9, rdx: 2, ..Default::default() };
        let s = classify(&r, 0, &m);
        assert!(matches!(s, ThreadState::Syscall { number: 219, .. }));
        let waiting = resolve_restart(s.clone(), &r, &["__futex_abstimed_wait_common", "__pthread_mutex_clocklock_common"]);
        assert_eq!(waiting, ThreadState::Futex { address: Hex(0x5000), expected: 2, op: "FUTEX_WAIT_BITSET".into(), private: true });
        assert_eq!(resolve_restart(s.clone(), &r, &["__GI___clock_nanosleep", "sleep"]), s, "a restarted nanosleep is not a futex wait");
    }

    #[test]
    fn sleeps_and_io_are_told_apart() {
        let m = code_with_syscall_at(0x1002);
        assert!(matches!(classify(&regs(230, 0x1002), 0, &m), ThreadState::Sleeping { .. }));
        assert!(matches!(classify(&regs(0, 0x1002), 0, &m), ThreadState::Io { fd: 0x5000, .. }));
        assert!(matches!(classify(&regs(61, 0x1002), 0, &m), ThreadState::WaitingForChild { .. }));
        assert!(matches!(classify(&regs(u64::MAX, 0x1002), 19, &m), ThreadState::Stopped { signal: 19 }));
    }
}
