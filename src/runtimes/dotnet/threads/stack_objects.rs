//! What threads keep on their stacks: the objects a frame's part of the stack holds (a
//! `ReaderWriterLockSlim` its `this`, a connection its user's local). The frames' GC
//! information is not decoded, so a word is taken for a reference when it is the address of an
//! object of the type asked for (its MethodTable's): conservative, as the heap's stack roots
//! are; what this finds is evidence, said as such, never a recorded fact.

use crate::runtimes::dotnet::contract::target::Target;
use crate::runtimes::dotnet::types::objects;
use crate::waits::ThreadInput;

/// Bytes of one thread's stack scanned at most (its frames of interest, not its whole stack).
const MAX_SCAN_BYTES: u64 = 1 << 20;

/// One unwound frame: where its part of the stack starts and ends, its function when known.
#[derive(Debug, Clone)]
pub(crate) struct StackFrame<'a> {
    pub(crate) sp: u64,
    /// Where the caller's part begins (the stack's end for the outermost frame).
    pub(crate) end: u64,
    /// The function's name without its argument list (`System.Threading.ReaderWriterLockSlim.TryEnterWriteLockCore`).
    pub(crate) function: Option<&'a str>,
    pub(crate) managed: bool,
}

/// One thread's unwound frames, innermost first.
#[derive(Debug, Clone)]
pub(crate) struct ThreadFrames<'a> {
    pub(crate) tid: u32,
    pub(crate) frames: Vec<StackFrame<'a>>,
}

/// A word on a thread's stack that holds an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Kept {
    pub(crate) tid: u32,
    pub(crate) object: u64,
    /// Where on the stack.
    pub(crate) slot: u64,
    /// The frame whose part of the stack holds the slot (its function), when named.
    pub(crate) frame: Option<String>,
}

/// `f` without its argument list.
pub(crate) fn bare(f: &str) -> &str {
    f.split('(').next().unwrap_or(f)
}

impl<'a> ThreadFrames<'a> {
    /// The frames of `input` (its unwound stack, named by its report's frames), each with its
    /// range; `stack_end`: the end of the thread's stack mapping.
    pub(crate) fn of(input: &ThreadInput<'a>, stack_end: u64) -> ThreadFrames<'a> {
        let unwound = &input.stack.frames;
        let frames = unwound
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let report = input.frames.iter().find(|r| r.ip.0 == f.ip && !r.inlined);
                let end = unwound.get(i + 1).map_or(stack_end, |n| n.sp).min(stack_end);
                StackFrame { sp: f.sp, end, function: report.and_then(|r| r.function.as_deref()).map(bare), managed: report.is_some_and(|r| r.managed) }
            })
            .collect();
        ThreadFrames { tid: input.tid, frames }
    }

    /// The innermost managed frame's function.
    pub(crate) fn innermost_managed(&self) -> Option<&'a str> {
        self.frames.iter().find(|f| f.managed).and_then(|f| f.function)
    }

    /// Every word of the stack from the innermost frame to the end of frame `last` that holds
    /// an object whose MethodTable is `mt`.
    pub(crate) fn objects_up_to(&self, t: &Target, last: usize, mt: u64) -> Vec<Kept> {
        let mut out = Vec::new();
        for f in self.frames.iter().take(last.saturating_add(1)) {
            self.scan(t, f, &mut out, |v| objects::method_table(t, v).is_ok_and(|m| m == mt));
        }
        out
    }

    /// Every word of the thread's managed frames that holds `object`.
    pub(crate) fn keeping(&self, t: &Target, object: u64) -> Vec<Kept> {
        let mut out = Vec::new();
        for f in self.frames.iter().filter(|f| f.managed) {
            self.scan(t, f, &mut out, |v| v == object);
        }
        out
    }

    /// Every managed frame's word that holds an object whose MethodTable is `mt`.
    pub(crate) fn objects_of(&self, t: &Target, mt: u64) -> Vec<Kept> {
        let mut out = Vec::new();
        for f in self.frames.iter().filter(|f| f.managed) {
            self.scan(t, f, &mut out, |v| objects::method_table(t, v).is_ok_and(|m| m == mt));
        }
        out
    }

    fn scan(&self, t: &Target, f: &StackFrame<'_>, out: &mut Vec<Kept>, is: impl Fn(u64) -> bool) {
        let start = f.sp & !7;
        if f.end <= start {
            return;
        }
        let len = (f.end - start).min(MAX_SCAN_BYTES);
        let Ok(bytes) = t.mem.chunk(start, len as usize) else { return };
        for (k, w) in bytes.chunks_exact(8).enumerate() {
            let v = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
            // Object addresses are 8-aligned and never small.
            if v & 7 == 0 && v > 0x10000 && is(v) {
                out.push(Kept { tid: self.tid, object: v, slot: start + 8 * k as u64, frame: f.function.map(str::to_string) });
            }
        }
    }
}
