//! The threads as knot established them: each one's frames ([`frame`]), how its walk ended, its
//! state and the lock it waits on — built from the unwound stacks by [`build`]. The report shows
//! them; the verdict, its limits and the crash reading read them.

pub(crate) mod build;
pub(crate) mod frame;

pub(crate) use frame::FrameReport;

use crate::hex::Hex;
use crate::waits::ThreadState;
use schemars::JsonSchema;
use serde::Serialize;

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ThreadReport {
    pub tid: u32,
    /// The thread's name where the dump records one (kernel and gcore cores only the main thread's; `knot pid` every thread's).
    pub name: Option<String>,
    /// This thread took the signal that caused the dump.
    pub signalled: bool,
    /// Innermost first. Inlined calls are frames of their own (`inlined: true`), at the same `ip`
    /// as the real frame that follows them.
    pub frames: Vec<FrameReport>,
    /// Why the walk stopped; `complete` is true only when it reached the thread's first frame.
    pub stack_end: StackEndReport,
    /// What the thread was doing, from its registers.
    pub state: ThreadState,
    /// The id of the lock (in `locks`) the thread is blocked on.
    pub blocked_on: Option<String>,
    /// The managed thread id (`Thread.ManagedThreadId`), for a .NET thread.
    pub managed_thread_id: Option<u32>,
    /// The thread's id as the process itself numbers it (its `struct pthread`), when that
    /// differs from the dump's: a process in a PID namespace of its own dumped from the host
    /// (locks and joins record these numbers). Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_tid: Option<u32>,
    /// What the thread is for, in its framework's words (`analyzers/roles.toml`): `{ framework,
    /// role, name }`, e.g. `orleans`, `grain_activation`, `grain activation`; null when no rule
    /// knows its frames.
    pub role: Option<crate::roles::ThreadRole>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StackEndReport {
    /// The walk reached the thread's first frame (or the program's entry point) and found no
    /// frame by scanning.
    pub complete: bool,
    /// outermost, zero_return_address, entry_point, no_progress, unreadable, no_caller,
    /// not_code, depth_limit.
    pub reason: String,
    /// The address involved, when there is one.
    pub address: Option<Hex>,
    pub detail: String,
    /// Frames found by scanning the stack for return addresses (`trust` `scan`); present only
    /// when there are some.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub scanned_frames: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}
