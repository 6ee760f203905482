//! Large arrays of plain numbers (the heap graph's nodes and edges, the dominator tree's
//! working arrays, the retained sizes) held either in anonymous memory or in scratch files, as
//! Eclipse MAT keeps its index files beside a dump: a file mapped shared under `--scratch-dir`,
//! unlinked from the moment it exists (`O_TMPFILE`, or created and removed at once), so it
//! vanishes when knot exits or is killed. Its pages are the page cache's: under a memory limit
//! the kernel writes them back and drops them instead of killing the process, which it cannot do
//! with anonymous memory (no swap in a pod).
//!
//! A full disk must not kill knot either: a write to a mapped page the file system has no block
//! for raises SIGBUS. Every byte a file is grown to is allocated first (`posix_fallocate`), so a
//! page of the mapping always has its block; a failed allocation unwinds with a [`ScratchFull`]
//! (`resume_unwind`: no panic message on stderr), which the heap reading catches and says (the
//! plan checks the free space before choosing scratch, so that is a race with another writer of
//! the disk, not the normal case).
//!
//! Dirty pages of a shared mapping are written back by the kernel's flusher only past the
//! machine's dirty thresholds, which a cgroup v1 memory limit does not lower: a file filled in
//! order is handed to writeback as it grows ([`ScratchVec::push`] every [`WRITEBACK_STEP`]
//! bytes), and [`ScratchVec::write_back`] starts it for the whole file after a phase that
//! wrote at random.

use std::fs::File;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where large arrays live.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum Place {
    /// Anonymous memory (a `Vec`).
    #[default]
    Memory,
    /// Unlinked files mapped under this directory.
    Files(Arc<ScratchDir>),
}

/// A scratch directory, and the anonymous memory the arrays read at random (the dominator
/// tree's) may still take beside the files: an array asked for with [`ScratchVec::hot`] lives
/// in memory while this budget lasts (and gives it back when dropped), in a file after.
#[derive(Debug)]
pub(crate) struct ScratchDir {
    pub(crate) dir: PathBuf,
    memory: std::sync::atomic::AtomicU64,
}

impl ScratchDir {
    pub(crate) fn new(dir: PathBuf, memory: u64) -> Arc<ScratchDir> {
        Arc::new(ScratchDir { dir, memory: std::sync::atomic::AtomicU64::new(memory) })
    }

    /// Takes `bytes` of the memory budget, if that much is left.
    pub(crate) fn take(&self, bytes: u64) -> bool {
        use std::sync::atomic::Ordering;
        self.memory.fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| left.checked_sub(bytes)).is_ok()
    }

    fn give_back(&self, bytes: u64) {
        self.memory.fetch_add(bytes, std::sync::atomic::Ordering::AcqRel);
    }
}

impl PartialEq for ScratchDir {
    fn eq(&self, other: &Self) -> bool {
        self.dir == other.dir
    }
}

impl Eq for ScratchDir {}

/// A scratch file could not grow: the disk (or its quota) is full.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the scratch space in {dir} ran out: {bytes} bytes could not be allocated ({why}); give --scratch-dir a directory with more free space")]
pub(crate) struct ScratchFull {
    pub(crate) dir: String,
    pub(crate) bytes: u64,
    pub(crate) why: String,
}

/// Numbers any bit pattern is a value of (so a file's bytes are always valid ones), zero being
/// 0.
///
/// # Safety
/// Implemented only for primitive integers.
pub(crate) unsafe trait Plain: Copy + Send + Sync + 'static {}
// SAFETY: primitive integers: every bit pattern is a value.
unsafe impl Plain for u32 {}
// SAFETY: as above.
unsafe impl Plain for u64 {}
// SAFETY: as above.
unsafe impl Plain for u8 {}

/// Bytes a file-backed array grows by at least (and the first size of one).
const MIN_FILE_BYTES: usize = 1 << 20;
/// A file filled in order is handed to writeback every this many bytes.
pub(crate) const WRITEBACK_STEP: usize = 64 << 20;

/// A growable array in memory or in a scratch file (see the module doc).
pub(crate) struct ScratchVec<T: Plain> {
    inner: Inner<T>,
    /// The scratch directory whose memory budget this array took (`budget` bytes), given back
    /// when it is dropped.
    lent: Option<(Arc<ScratchDir>, u64)>,
}

impl<T: Plain> Drop for ScratchVec<T> {
    fn drop(&mut self) {
        if let Some((dir, bytes)) = self.lent.take() {
            dir.give_back(bytes);
        }
    }
}

enum Inner<T: Plain> {
    Memory(Vec<T>),
    File(FileVec<T>),
}

struct FileVec<T: Plain> {
    dir: Arc<ScratchDir>,
    file: File,
    map: Option<memmap2::MmapMut>,
    /// Elements the mapping holds.
    cap: usize,
    len: usize,
    /// Bytes handed to writeback so far (from the start).
    written_back: usize,
    _t: PhantomData<T>,
}

impl<T: Plain> Default for ScratchVec<T> {
    fn default() -> Self {
        ScratchVec { inner: Inner::Memory(Vec::new()), lent: None }
    }
}

impl<T: Plain> From<Vec<T>> for ScratchVec<T> {
    fn from(v: Vec<T>) -> Self {
        ScratchVec { inner: Inner::Memory(v), lent: None }
    }
}

impl<T: Plain + std::fmt::Debug> std::fmt::Debug for ScratchVec<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: Plain> Clone for ScratchVec<T> {
    /// A copy in anonymous memory (for tests and small arrays).
    fn clone(&self) -> Self {
        ScratchVec::from(self.to_vec())
    }
}

impl<T: Plain + PartialEq> PartialEq for ScratchVec<T> {
    fn eq(&self, other: &Self) -> bool {
        self[..] == other[..]
    }
}

impl<T: Plain + Eq> Eq for ScratchVec<T> {}

impl<T: Plain + PartialEq> PartialEq<Vec<T>> for ScratchVec<T> {
    fn eq(&self, other: &Vec<T>) -> bool {
        self[..] == other[..]
    }
}

impl<T: Plain + PartialEq, const N: usize> PartialEq<[T; N]> for ScratchVec<T> {
    fn eq(&self, other: &[T; N]) -> bool {
        self[..] == other[..]
    }
}

impl<T: Plain> ScratchVec<T> {
    /// An empty array at `place`.
    pub(crate) fn new(place: &Place) -> Self {
        Self::with_capacity(place, 0)
    }

    /// An empty array at `place` with room for `n` (a file's room allocated on its disk).
    pub(crate) fn with_capacity(place: &Place, n: usize) -> Self {
        match place {
            Place::Memory => ScratchVec { inner: Inner::Memory(Vec::with_capacity(n)), lent: None },
            Place::Files(dir) => {
                let file = match tempfile::tempfile_in(&dir.dir) {
                    Ok(f) => f,
                    Err(e) => std::panic::resume_unwind(Box::new(ScratchFull { dir: dir.dir.display().to_string(), bytes: 0, why: e.to_string() })),
                };
                let mut v = FileVec { dir: dir.clone(), file, map: None, cap: 0, len: 0, written_back: 0, _t: PhantomData };
                if n > 0 {
                    v.grow_to(n);
                }
                ScratchVec { inner: Inner::File(v), lent: None }
            }
        }
    }

    /// As [`ScratchVec::with_capacity`] for an array read and written at random: with scratch
    /// files, in memory while the directory's memory budget has room for `n` (its pages never
    /// wait for a disk), else in a file.
    pub(crate) fn hot(place: &Place, n: usize) -> Self {
        if let Place::Files(dir) = place {
            let bytes = (n * std::mem::size_of::<T>()) as u64;
            if dir.take(bytes) {
                return ScratchVec { inner: Inner::Memory(Vec::with_capacity(n)), lent: Some((dir.clone(), bytes)) };
            }
        }
        Self::with_capacity(place, n)
    }

    /// `n` copies of `value` at `place`.
    #[cfg(test)]
    pub(crate) fn filled(place: &Place, n: usize, value: T) -> Self {
        let mut v = Self::with_capacity(place, n);
        v.resize(n, value);
        v
    }

    /// Whether the array lives in a scratch file.
    #[cfg(test)]
    pub(crate) fn in_file(&self) -> bool {
        matches!(self.inner, Inner::File(_))
    }

    pub(crate) fn push(&mut self, value: T) {
        match &mut self.inner {
            Inner::Memory(v) => v.push(value),
            Inner::File(f) => {
                if f.len == f.cap {
                    f.grow_to(f.len + 1);
                }
                // SAFETY: `len < cap`, the mapping holds `cap` elements.
                unsafe { f.base().add(f.len).write(value) };
                f.len += 1;
                f.after_append();
            }
        }
    }

    pub(crate) fn extend_from_slice(&mut self, values: &[T]) {
        match &mut self.inner {
            Inner::Memory(v) => v.extend_from_slice(values),
            Inner::File(f) => {
                if f.len + values.len() > f.cap {
                    f.grow_to(f.len + values.len());
                }
                // SAFETY: room for `values` checked above; a file's mapping never overlaps them.
                unsafe { std::ptr::copy_nonoverlapping(values.as_ptr(), f.base().add(f.len), values.len()) };
                f.len += values.len();
                f.after_append();
            }
        }
    }

    /// Sets the length to `n`, new elements `value`.
    pub(crate) fn resize(&mut self, n: usize, value: T) {
        match &mut self.inner {
            Inner::Memory(v) => v.resize(n, value),
            Inner::File(f) => {
                if n > f.cap {
                    f.grow_to(n);
                }
                for i in f.len..n {
                    // SAFETY: `i < n <= cap`.
                    unsafe { f.base().add(i).write(value) };
                }
                f.len = n;
                f.after_append();
            }
        }
    }

    pub(crate) fn clear(&mut self) {
        match &mut self.inner {
            Inner::Memory(v) => v.clear(),
            Inner::File(f) => f.len = 0,
        }
    }

    /// Frees memory the array does not use (a file keeps its size).
    pub(crate) fn shrink_to_fit(&mut self) {
        if let Inner::Memory(v) = &mut self.inner {
            v.shrink_to_fit();
        }
    }

    /// Hands every page written so far to the kernel's writeback (a file's; nothing in memory).
    pub(crate) fn write_back(&mut self) {
        if let Inner::File(f) = &mut self.inner {
            f.start_writeback(0, f.len * std::mem::size_of::<T>());
        }
    }
}

impl<T: Plain> FileVec<T> {
    fn base(&mut self) -> *mut T {
        self.map.as_mut().map_or(std::ptr::NonNull::dangling().as_ptr(), |m| m.as_mut_ptr() as *mut T)
    }

    /// Grows the file and its mapping to hold at least `need` elements (doubling), its blocks
    /// allocated first; a disk that has none is [`ScratchFull`].
    fn grow_to(&mut self, need: usize) {
        let size = std::mem::size_of::<T>();
        let bytes = need.max(self.cap.saturating_mul(2)).saturating_mul(size).max(MIN_FILE_BYTES);
        let dir = self.dir.dir.display().to_string();
        let full = |bytes: usize, why: String| -> ! { std::panic::resume_unwind(Box::new(ScratchFull { dir: dir.clone(), bytes: bytes as u64, why })) };
        let Some(bytes) = bytes.div_ceil(MIN_FILE_BYTES).checked_mul(MIN_FILE_BYTES) else { full(bytes, "too large".into()) };
        let full = |why: String| -> ! { full(bytes, why) };
        use std::os::fd::AsRawFd;
        let Ok(len) = libc::off_t::try_from(bytes) else { full("too large".into()) };
        // SAFETY: a plain system call on the file's own descriptor.
        let r = unsafe { libc::posix_fallocate(self.file.as_raw_fd(), 0, len) };
        if r != 0 {
            full(std::io::Error::from_raw_os_error(r).to_string());
        }
        // SAFETY: the file is this array's own (unlinked: no other process maps or truncates it),
        // allocated to `bytes` above.
        let map = match unsafe { memmap2::MmapOptions::new().len(bytes).map_mut(&self.file) } {
            Ok(m) => m,
            Err(e) => full(e.to_string()),
        };
        self.map = Some(map);
        self.cap = bytes / size;
    }

    /// After an append: the bytes past the last writeback point, once they are a step, go to
    /// writeback.
    fn after_append(&mut self) {
        let end = self.len * std::mem::size_of::<T>();
        if end >= self.written_back + WRITEBACK_STEP {
            let from = self.written_back;
            self.start_writeback(from, end - from);
            self.written_back = end;
        }
    }

    fn start_writeback(&self, from: usize, len: usize) {
        use std::os::fd::AsRawFd;
        // SAFETY: a plain system call on the file's own descriptor; it only starts writeback.
        unsafe {
            libc::sync_file_range(self.file.as_raw_fd(), from as libc::off64_t, len as libc::off64_t, libc::SYNC_FILE_RANGE_WRITE);
        }
    }
}

impl<T: Plain> Deref for ScratchVec<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match &self.inner {
            Inner::Memory(v) => v,
            Inner::File(f) => match &f.map {
                // SAFETY: the mapping holds `cap >= len` elements, page aligned, of a type every
                // bit pattern is a value of.
                Some(m) => unsafe { std::slice::from_raw_parts(m.as_ptr() as *const T, f.len) },
                None => &[],
            },
        }
    }
}

impl<T: Plain> DerefMut for ScratchVec<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match &mut self.inner {
            Inner::Memory(v) => v,
            Inner::File(f) => {
                let len = f.len;
                match &mut f.map {
                    // SAFETY: as in `deref`; `&mut self` makes it the only reference.
                    Some(m) => unsafe { std::slice::from_raw_parts_mut(m.as_mut_ptr() as *mut T, len) },
                    None => &mut [],
                }
            }
        }
    }
}

/// What a scratch directory offers: its free bytes, or why it cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ScratchSpace {
    Free(u64),
    /// A memory-backed file system (tmpfs, ramfs): its pages are memory the limit counts and
    /// the kernel cannot write back, so scratch there helps nothing.
    InMemory,
    /// Not a directory knot can create files in.
    Unusable(String),
}

/// The free space of `dir` for scratch files (see [`ScratchSpace`]).
pub(crate) fn space_of(dir: &Path) -> ScratchSpace {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else { return ScratchSpace::Unusable("a path with a NUL byte".into()) };
    // SAFETY: `statfs` fills the zeroed struct; `c` is a valid C string.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut s) } != 0 {
        return ScratchSpace::Unusable(std::io::Error::last_os_error().to_string());
    }
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    #[allow(clippy::unnecessary_cast, reason = "f_type's width differs between libcs")]
    let kind = s.f_type as i64;
    if kind == TMPFS_MAGIC || kind == RAMFS_MAGIC {
        return ScratchSpace::InMemory;
    }
    // Can a file be made there at all (permissions, a read-only file system)?
    if let Err(e) = tempfile::tempfile_in(dir) {
        return ScratchSpace::Unusable(e.to_string());
    }
    #[allow(clippy::unnecessary_cast, reason = "the fields' widths differ between libcs")]
    ScratchSpace::Free((s.f_bavail as u64).saturating_mul(s.f_bsize as u64))
}

/// `--scratch-dir`, else `$TMPDIR`, else `/tmp`.
pub(crate) fn default_dir(given: Option<&Path>) -> PathBuf {
    given.map(Path::to_path_buf).unwrap_or_else(std::env::temp_dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> (tempfile::TempDir, Place) {
        let d = tempfile::tempdir().expect("temp dir");
        let p = Place::Files(ScratchDir::new(d.path().to_path_buf(), 0));
        (d, p)
    }

    #[test]
    fn a_file_backed_array_holds_what_a_vec_does_and_leaves_no_file() {
        let (d, place) = files();
        for p in [Place::Memory, place] {
            let mut v: ScratchVec<u64> = ScratchVec::new(&p);
            let mut w: Vec<u64> = Vec::new();
            for i in 0..300_000u64 {
                v.push(i * 3);
                w.push(i * 3);
            }
            v.extend_from_slice(&[7, 8, 9]);
            w.extend_from_slice(&[7, 8, 9]);
            v[5] = 1;
            w[5] = 1;
            assert_eq!(v[..], w[..]);
            v.resize(10, 0);
            v.resize(20, 4);
            w.resize(10, 0);
            w.resize(20, 4);
            assert_eq!(v[..], w[..]);
            v.write_back();
            assert_eq!(v.in_file(), p != Place::Memory);
            let f: ScratchVec<u32> = ScratchVec::filled(&p, 5, 9);
            assert_eq!(f, vec![9u32; 5]);
        }
        assert_eq!(std::fs::read_dir(d.path()).expect("dir").count(), 0, "scratch files are unlinked");
    }

    #[test]
    fn scratch_that_cannot_be_had_unwinds_with_its_reason_for_the_heap_reading_to_say() {
        let (_d, place) = files();
        let gone = Place::Files(ScratchDir::new("/nonexistent/knot-scratch".into(), 0));
        // `resume_unwind`, not a panic: no hook runs, so nothing is printed on stderr.
        for (place, n) in [(gone, 1), (place, usize::MAX / 8)] {
            let unwound = std::panic::catch_unwind(|| ScratchVec::<u64>::with_capacity(&place, n)).expect_err("no scratch to be had");
            let full = unwound.downcast_ref::<ScratchFull>().expect("a ScratchFull");
            assert!(full.to_string().contains("--scratch-dir"), "{full}");
        }
    }

    #[test]
    fn hot_arrays_live_in_memory_while_the_budget_lasts_and_give_it_back() {
        let d = tempfile::tempdir().expect("temp dir");
        let dir = ScratchDir::new(d.path().to_path_buf(), 1000);
        let place = Place::Files(dir.clone());
        let a: ScratchVec<u64> = ScratchVec::hot(&place, 100);
        let b: ScratchVec<u64> = ScratchVec::hot(&place, 100);
        assert!(!a.in_file() && b.in_file(), "800 bytes of 1000 taken, the next 800 do not fit");
        drop(a);
        let c: ScratchVec<u32> = ScratchVec::hot(&place, 250);
        assert!(!c.in_file(), "given back when dropped");
        let f: ScratchVec<u32> = ScratchVec::with_capacity(&place, 1);
        assert!(f.in_file(), "only hot arrays take the budget");
    }

    #[test]
    fn space_of_says_a_memory_file_system_and_a_missing_directory() {
        if Path::new("/dev/shm").is_dir() {
            assert_eq!(space_of(Path::new("/dev/shm")), ScratchSpace::InMemory);
        }
        assert!(matches!(space_of(Path::new("/nonexistent/knot-scratch")), ScratchSpace::Unusable(_)));
        let d = tempfile::tempdir().expect("temp dir");
        assert!(matches!(space_of(d.path()), ScratchSpace::Free(_) | ScratchSpace::InMemory));
    }
}
