//! A dump's memory with some bytes replaced (or added where the dump has none): a hostile edit of
//! a real dump's runtime data without copying the core.

use crate::process::{Memory, MemoryError};

pub(crate) struct Patched<'a> {
    pub(crate) inner: &'a dyn Memory,
    pub(crate) patches: Vec<(u64, Vec<u8>)>,
}

impl Memory for Patched<'_> {
    fn chunk(&self, addr: u64, len: usize) -> Result<&[u8], MemoryError> {
        for (at, bytes) in &self.patches {
            if addr >= *at && addr < at + bytes.len() as u64 {
                let o = (addr - at) as usize;
                return Ok(&bytes[o..(o + len).min(bytes.len())]);
            }
        }
        let c = self.inner.chunk(addr, len)?;
        // Stop short of the next patch, so a read that runs into it sees the patch on its next chunk.
        let next = self.patches.iter().map(|(a, _)| *a).filter(|&a| a > addr).min();
        Ok(&c[..next.map_or(c.len(), |n| c.len().min((n - addr) as usize))])
    }
}
