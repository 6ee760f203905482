//! Stopping every thread of a live process with ptrace, and letting it go again.
//!
//! `PTRACE_SEIZE` + `PTRACE_INTERRUPT` rather than `PTRACE_ATTACH`: no SIGSTOP is sent, so
//! nothing is left pending or queued for the process to see, and should knot die while
//! attached the kernel detaches and the threads simply run on. [`Attached`] detaches in `Drop`,
//! so every way out of a snapshot (success, error, cancellation) lets the process go.

use super::LiveError;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often the task list is read again for threads created while the others were stopped.
const MAX_ROUNDS: usize = 64;
/// How long one thread may take to reach its stop (a thread in uninterruptible sleep stops only
/// when it leaves the kernel).
const STOP_TIMEOUT: Duration = Duration::from_secs(2);

/// One stopped thread.
#[derive(Debug)]
pub(crate) struct Tracee {
    pub(crate) tid: i32,
    /// It reached its ptrace stop (only stopped threads can be read and detached).
    stopped: bool,
    /// A signal that arrived as the thread stopped: handed back to it on detach.
    pending_signal: i32,
    /// A zombie (a main thread that exited while others run): it never stops, has no
    /// registers to read, and is left out of the snapshot.
    zombie: bool,
}

/// Every thread of `pid`, seized and stopped. Dropping it detaches them all.
#[derive(Debug)]
pub(crate) struct Attached {
    pub(crate) tracees: Vec<Tracee>,
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The thread ids in `/proc/PID/task`, the main thread first.
pub(crate) fn list_tasks(pid: i32) -> std::io::Result<Vec<i32>> {
    let mut tids: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_by_key(|&t| (t != pid, t));
    Ok(tids)
}

impl Attached {
    /// Seizes and interrupts every thread, reading the task list again until no new thread
    /// appeared while the others were being stopped.
    pub(crate) fn seize_all(pid: i32, cancel: &AtomicBool) -> Result<Attached, LiveError> {
        let mut attached = Attached { tracees: Vec::new() };
        let mut seen: HashSet<i32> = HashSet::new();
        for _ in 0..MAX_ROUNDS {
            let tids = list_tasks(pid).map_err(|_| LiveError::NoSuchProcess { pid })?;
            let new: Vec<i32> = tids.into_iter().filter(|t| seen.insert(*t)).collect();
            if new.is_empty() {
                if attached.tracees.is_empty() {
                    return Err(LiveError::NoSuchProcess { pid });
                }
                return Ok(attached);
            }
            let first = attached.tracees.len();
            for tid in new {
                // SAFETY: ptrace requests on a thread id; no memory is passed.
                if unsafe { libc::ptrace(libc::PTRACE_SEIZE, tid, 0usize, 0usize) } != 0 {
                    match errno() {
                        // It exited between the listing and now.
                        libc::ESRCH => continue,
                        // An exited thread not yet reaped (a main thread that called
                        // pthread_exit) cannot be traced: it is not part of the snapshot.
                        libc::EPERM if is_zombie(tid) => continue,
                        e => return Err(LiveError::refused(pid, e)),
                    }
                }
                attached.tracees.push(Tracee { tid, stopped: false, pending_signal: 0, zombie: false });
                // SAFETY: as above.
                if unsafe { libc::ptrace(libc::PTRACE_INTERRUPT, tid, 0usize, 0usize) } != 0 && errno() != libc::ESRCH {
                    return Err(LiveError::Ptrace { pid, tid, what: "PTRACE_INTERRUPT", source: std::io::Error::last_os_error() });
                }
            }
            for i in first..attached.tracees.len() {
                if cancel.load(Ordering::SeqCst) {
                    return Err(LiveError::Interrupted { pid });
                }
                wait_stop(&mut attached.tracees[i], STOP_TIMEOUT)?;
            }
            // Threads that exited while being stopped are not part of the snapshot.
            attached.tracees.retain(|t| t.tid != -1);
        }
        Err(LiveError::Unsettled { pid, rounds: MAX_ROUNDS })
    }

    /// The stopped threads' ids, the main thread first.
    pub(crate) fn tids(&self) -> impl Iterator<Item = i32> + '_ {
        self.tracees.iter().filter(|t| t.stopped).map(|t| t.tid)
    }

    /// Detaches every thread now (also done on drop).
    pub(crate) fn detach(mut self) {
        self.detach_all();
    }

    fn detach_all(&mut self) {
        for t in self.tracees.drain(..) {
            detach(t);
        }
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        self.detach_all();
    }
}

fn detach(mut t: Tracee) {
    if !t.stopped && !t.zombie {
        // A ptrace stop can only be left by a request to a stopped tracee: give a late stop a
        // moment to arrive. (If it never does, knot's exit detaches it in the kernel.)
        let _ = wait_stop(&mut t, Duration::from_millis(200));
    }
    // SAFETY: detaching a thread this process seized; `data` is the signal to deliver.
    unsafe { libc::ptrace(libc::PTRACE_DETACH, t.tid, 0usize, t.pending_signal as usize) };
}

/// Waits (polling, so a stuck thread cannot hang knot) until `t` is in its ptrace stop, or has
/// exited (then `stopped` stays false and its tid becomes -1).
fn wait_stop(t: &mut Tracee, timeout: Duration) -> Result<(), LiveError> {
    let deadline = Instant::now() + timeout;
    let mut spins = 0u32;
    loop {
        let mut status = 0i32;
        // SAFETY: waitpid on one thread id with a valid status pointer.
        let r = unsafe { libc::waitpid(t.tid, &mut status, libc::__WALL | libc::WNOHANG) };
        if r == t.tid {
            if libc::WIFSTOPPED(status) {
                t.stopped = true;
                let sig = libc::WSTOPSIG(status);
                let event = (status >> 16) & 0xff;
                // Not our interrupt's stop but a signal arriving: it is handed back on detach.
                if event == 0 && sig != libc::SIGTRAP {
                    t.pending_signal = sig;
                }
                return Ok(());
            }
            if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
                t.tid = -1;
                return Ok(());
            }
            continue;
        }
        if r < 0 {
            match errno() {
                libc::EINTR => continue,
                // Gone (or never ours): nothing to wait for.
                _ => {
                    t.tid = -1;
                    return Ok(());
                }
            }
        }
        if Instant::now() >= deadline {
            return Err(LiveError::DidNotStop { tid: t.tid, waited: timeout });
        }
        if spins % 256 == 64 && is_zombie(t.tid) {
            t.zombie = true;
            return Ok(());
        }
        spins += 1;
        if spins < 64 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
}

/// Whether the task has exited and waits to be reaped (state Z or X in its stat).
fn is_zombie(tid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{tid}/stat")) else { return true };
    matches!(stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next()), Some('Z' | 'X'))
}

/// The general registers (`user_regs_struct`, as NT_PRSTATUS holds them) of a stopped thread.
pub(crate) fn registers(tid: i32) -> std::io::Result<[u8; 27 * 8]> {
    // SAFETY: user_regs_struct is plain data; PTRACE_GETREGS fills it for a stopped tracee.
    let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
    if unsafe { libc::ptrace(libc::PTRACE_GETREGS, tid, 0usize, &mut regs as *mut _ as usize) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let words: [u64; 27] = [
        regs.r15, regs.r14, regs.r13, regs.r12, regs.rbp, regs.rbx, regs.r11, regs.r10, regs.r9, regs.r8, regs.rax, regs.rcx, regs.rdx, regs.rsi,
        regs.rdi, regs.orig_rax, regs.rip, regs.cs, regs.eflags, regs.rsp, regs.ss, regs.fs_base, regs.gs_base, regs.ds, regs.es, regs.fs, regs.gs,
    ];
    let mut out = [0u8; 27 * 8];
    for (i, w) in words.iter().enumerate() {
        out[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
    }
    Ok(out)
}

/// The FPU/SSE state (`user_fpregs_struct`, 512 bytes, as NT_FPREGSET holds it).
pub(crate) fn fp_registers(tid: i32) -> std::io::Result<Vec<u8>> {
    // SAFETY: user_fpregs_struct is plain data of 512 bytes; PTRACE_GETFPREGS fills it.
    let mut fp: libc::user_fpregs_struct = unsafe { std::mem::zeroed() };
    if unsafe { libc::ptrace(libc::PTRACE_GETFPREGS, tid, 0usize, &mut fp as *mut _ as usize) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let size = std::mem::size_of::<libc::user_fpregs_struct>();
    // SAFETY: reading the struct's own bytes.
    let bytes = unsafe { std::slice::from_raw_parts(&fp as *const _ as *const u8, size) };
    Ok(bytes.to_vec())
}
