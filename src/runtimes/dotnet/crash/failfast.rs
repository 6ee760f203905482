//! The message a thread passed to `Environment.FailFast`. No runtime global holds it (since
//! .NET 9 FailFast pins the managed string and hands the runtime its characters): it is a
//! `System.String` referenced only from the FailFast thread's own stack, in the frame of the
//! QCall wrapper `Environment.FailFast(StackCrawlMarkHandle, String, ObjectHandleOnStack,
//! String)` and its caller. This module finds that frame in the unwound stack and reads the
//! first `System.String` those frames refer to — by reference, or by a pointer to its first
//! character (the pinned form the QCall receives). SOS shows no message for these dumps.

use crate::runtimes::dotnet::crash::exception::{is_string, string};
use crate::runtimes::dotnet::contract::target::Target;
use crate::unwind::managed::CodeLookup;
use crate::unwind::Stack;
use serde::Serialize;

/// The method whose frame holds the message.
pub(crate) const FAILFAST_METHOD: &str = "System.Environment.FailFast";
/// Its QCall wrapper's first parameter, which only that overload has.
const QCALL_SIGNATURE_START: &str = "(System.Runtime.CompilerServices.StackCrawlMarkHandle";
/// The two frames' stack is read at most this far.
const MAX_SCAN_BYTES: u64 = 64 * 1024;

/// A FailFast message, read from the stack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct FailFastMessage {
    pub text: String,
    /// The `System.String` object.
    pub(crate) string: u64,
    /// Where on the stack it was referred to.
    pub(crate) slot: u64,
    /// The index in the stack's frames of the `FailFast(StackCrawlMarkHandle, …)` frame.
    pub(crate) frame: usize,
}

/// Index of the first `System.Environment.FailFast` frame (any overload) on the stack.
pub(crate) fn failfast_frame(stack: &Stack, code: &dyn CodeLookup) -> Option<usize> {
    stack.frames.iter().position(|f| method_name(f.lookup_address(), code).is_some_and(|(q, _)| q == FAILFAST_METHOD))
}

/// The message, when `stack` is in `Environment.FailFast` and its frames refer to a string.
pub(crate) fn message(t: &Target, stack: &Stack, code: &dyn CodeLookup) -> Option<FailFastMessage> {
    let frame = stack.frames.iter().position(|f| {
        method_name(f.lookup_address(), code).is_some_and(|(q, sig)| q == FAILFAST_METHOD && sig.is_some_and(|s| s.starts_with(QCALL_SIGNATURE_START)))
    })?;
    // The wrapper's frame and its caller's: from its sp up to the caller's caller's.
    let low = stack.frames[frame].sp;
    let high = stack.frames.get(frame + 2).or(stack.frames.get(frame + 1)).map(|f| f.sp)?;
    if high <= low {
        return None;
    }
    let high = high.min(low.saturating_add(MAX_SCAN_BYTES));
    let bytes = t.read_bytes(low, (high - low) as usize, "FailFast frames").ok()?;
    let first_char = t.offset("String", "m_FirstChar").ok()?;
    for (i, w) in bytes.chunks_exact(8).enumerate() {
        let v = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
        if v < 0x10000 {
            continue;
        }
        let slot = low + 8 * i as u64;
        for candidate in [v, v.wrapping_sub(first_char)] {
            if candidate & 7 == 0 && is_string(t, candidate)
                && let Ok(text) = string(t, candidate)
            {
                return Some(FailFastMessage { text, string: candidate, slot, frame });
            }
        }
    }
    None
}

fn method_name(addr: u64, code: &dyn CodeLookup) -> Option<(String, Option<String>)> {
    let md = code.lookup(addr)?.method?;
    let n = code.name(md)?;
    Some((n.qualified, n.signature))
}
