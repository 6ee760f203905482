//! The words of one thread's stack, from its stack pointer up: read once from the dump (one
//! slice of the mapping, no copy) and bounded by the stack's mapping and a caller's limit. The
//! scans that look for pointers on stacks (inferred lock owners, thin-locked objects, tasks
//! waited for) all walk it.

use super::Process;
use std::ops::Range;

/// `(address, value)` of each 8-byte word from `sp & !7` up.
pub(crate) struct StackWords<'a> {
    bytes: &'a [u8],
    base: u64,
    at: usize,
    stack: Range<u64>,
}

impl<'a> StackWords<'a> {
    /// The words at `sp` and above, at most up to `sp + max_bytes` and the end of the mapping
    /// `sp` is in; `None` when no mapping of the dump holds `sp`. A mapping the dump saved only
    /// in part gives the words it has.
    pub(crate) fn new(process: &'a Process, sp: u64, max_bytes: u64) -> Option<StackWords<'a>> {
        let seg = process.core.segments.find(sp)?;
        let start = sp & !7;
        let end = seg.end().min(sp.saturating_add(max_bytes));
        let bytes = match process.core.bytes_at(start, end.saturating_sub(start) as usize) {
            Ok(b) => &b[..b.len() & !7],
            Err(_) => &[],
        };
        Some(StackWords { bytes, base: start, at: 0, stack: seg.vaddr..seg.end() })
    }

    /// The whole mapping the stack is in: a word pointing here is a frame pointer or a local's
    /// address, not an object.
    pub(crate) fn stack(&self) -> &Range<u64> {
        &self.stack
    }

    /// Words the dump holds for the scan.
    pub(crate) fn len(&self) -> u64 {
        (self.bytes.len() / 8) as u64
    }
}

impl Iterator for StackWords<'_> {
    type Item = (u64, u64);

    fn next(&mut self) -> Option<(u64, u64)> {
        let w = self.bytes.get(self.at..self.at + 8)?;
        let v = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        let addr = self.base + self.at as u64;
        self.at += 8;
        Some((addr, v))
    }
}
