//! The bytes knot reads: [`Bytes`], a file's read-only mapping or a buffer (a core built in
//! memory, an image read out of dump memory such as the vDSO, fuzz and test inputs), which
//! readers see only as `&[u8]`; and bounds-checked little-endian field reads from them — a short
//! buffer or an offset past its end gives `None`, never a panic.

use memmap2::Mmap;

pub(crate) enum Bytes {
    /// A file's mapping, guarded against the file shrinking while it is read (see
    /// [`crate::sigbus`]); the guard is dropped first, before the mapping goes.
    Mapped { guard: crate::sigbus::Guard, map: Mmap },
    Owned(Box<[u8]>),
}

impl Bytes {
    /// A file's mapping, registered with the SIGBUS guard.
    pub(crate) fn mapped(map: Mmap) -> Bytes {
        Bytes::Mapped { guard: crate::sigbus::guard(&map), map }
    }

    /// Whether the file shrank under a read: bytes read past its new end are zeros, not the
    /// file's, and the reading must not be trusted.
    pub(crate) fn changed_while_read(&self) -> bool {
        matches!(self, Bytes::Mapped { guard, .. } if guard.faulted())
    }
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped { map, .. } => map,
            Bytes::Owned(b) => b,
        }
    }
}

pub(crate) fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    b.get(off..off.checked_add(2)?).map(|s| u16::from_le_bytes([s[0], s[1]]))
}

pub(crate) fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    b.get(off..off.checked_add(4)?).map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

pub(crate) fn i32_at(b: &[u8], off: usize) -> Option<i32> {
    u32_at(b, off).map(|v| v as i32)
}

pub(crate) fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    let s = b.get(off..off.checked_add(8)?)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Some(u64::from_le_bytes(a))
}

/// A NUL-terminated string in a fixed-size field, lossily decoded.
pub(crate) fn c_string(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}
