//! "Read N bytes at address A": the one question every later stage asks. The answer comes from
//! the dump, else from the module file that was mapped there (kernel cores leave out file-backed
//! text), else it is unavailable — never invented.

use crate::core::Absence;

/// Why bytes at an address could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MemoryError {
    #[error("address {0:#x} is not mapped in the dump")]
    NotMapped(u64),
    #[error("address {0:#x} is mapped but its bytes were not saved in the dump, and no module file supplies them")]
    NotSaved(u64),
    #[error("address {0:#x} lies in a part of the dump cut off by truncation")]
    Truncated(u64),
}

impl MemoryError {
    pub(crate) fn address(&self) -> u64 {
        match *self {
            MemoryError::NotMapped(a) | MemoryError::NotSaved(a) | MemoryError::Truncated(a) => a,
        }
    }

    pub(crate) fn from_absence(absence: Absence, addr: u64) -> MemoryError {
        match absence {
            Absence::NotMapped => MemoryError::NotMapped(addr),
            Absence::NotSaved => MemoryError::NotSaved(addr),
            Absence::Truncated => MemoryError::Truncated(addr),
        }
    }
}

/// Read-only process memory. Implemented by [`crate::process::Process`] over a dump, and by test
/// fixtures; the unwinder and analyzers see only this.
pub trait Memory: Sync {
    /// The longest run of bytes starting at `addr`, up to `len`, that one source holds
    /// contiguously. Never empty on success.
    fn chunk(&self, addr: u64, len: usize) -> Result<&[u8], MemoryError>;

    /// Fills `buf` from `addr`, crossing source boundaries as needed.
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), MemoryError> {
        let mut done = 0;
        while done < buf.len() {
            let at = addr.checked_add(done as u64).ok_or(MemoryError::NotMapped(addr))?;
            let chunk = self.chunk(at, buf.len() - done)?;
            buf[done..done + chunk.len()].copy_from_slice(chunk);
            done += chunk.len();
        }
        Ok(())
    }

    fn read_u64(&self, addr: u64) -> Result<u64, MemoryError> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn read_u32(&self, addr: u64) -> Result<u32, MemoryError> {
        let mut b = [0u8; 4];
        self.read(addr, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// A NUL-terminated string of at most `max` bytes.
    fn read_c_string(&self, addr: u64, max: usize) -> Result<String, MemoryError> {
        let mut out = Vec::new();
        let mut at = addr;
        while out.len() < max {
            let chunk = self.chunk(at, (max - out.len()).min(256))?;
            if let Some(n) = memchr::memchr(0, chunk) {
                // Most strings end in their first chunk: then the String is the only copy.
                if out.is_empty() {
                    return Ok(String::from_utf8_lossy(&chunk[..n]).into_owned());
                }
                out.extend_from_slice(&chunk[..n]);
                return Ok(String::from_utf8_lossy(&out).into_owned());
            }
            out.extend_from_slice(chunk);
            at = at.checked_add(chunk.len() as u64).ok_or(MemoryError::NotMapped(at))?;
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }
}

/// Memory made of explicit byte ranges: for tests and for images built by hand.
#[derive(Debug, Default, Clone)]
pub struct RangeMemory {
    ranges: Vec<(u64, Vec<u8>)>,
}

impl RangeMemory {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add(&mut self, addr: u64, bytes: Vec<u8>) -> &mut Self {
        self.ranges.push((addr, bytes));
        self.ranges.sort_by_key(|r| r.0);
        self
    }
}

impl Memory for RangeMemory {
    fn chunk(&self, addr: u64, len: usize) -> Result<&[u8], MemoryError> {
        for (start, bytes) in &self.ranges {
            if addr >= *start && addr - start < bytes.len() as u64 {
                let off = (addr - start) as usize;
                let n = len.min(bytes.len() - off);
                return Ok(&bytes[off..off + n]);
            }
        }
        Err(MemoryError::NotMapped(addr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cross_range_boundaries_and_stop_at_holes() {
        let mut m = RangeMemory::new();
        m.add(0x1000, vec![1, 2, 3, 4]).add(0x1004, vec![5, 6, 7, 8]);
        assert_eq!(m.read_u64(0x1000), Ok(u64::from_le_bytes([1, 2, 3, 4, 5, 6, 7, 8])));
        assert_eq!(m.read_u64(0x1004), Err(MemoryError::NotMapped(0x1008)));
        m.add(0x2000, b"lock\0x".to_vec());
        assert_eq!(m.read_c_string(0x2000, 64).as_deref(), Ok("lock"));
    }
}
