//! The bytes of a file knot reads: a read-only mapping of it, or a buffer (a core built in
//! memory, an image read out of dump memory such as the vDSO, fuzz and test inputs). Readers hold
//! one of these and see only `&[u8]`.

use memmap2::Mmap;

pub enum Bytes {
    Mapped(Mmap),
    Owned(Box<[u8]>),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(b) => b,
        }
    }
}
