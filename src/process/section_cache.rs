//! A directory of inflated debug sections (`--cache-dir`; by default the user's own, see
//! [`SectionCache::for_user`]), so that a module's
//! compressed DWARF (a Debian `-dbg` or `-dbgsym` file's `.debug_info`, `.debug_line`, ...) is
//! inflated once and then only mapped, by repeated runs and by `knot watch`: inflating libc's
//! debug sections is most of a small dump's cost.
//!
//! One file per section, named by the debug file's build-id, the section's name and a hash of
//! the rest of its key: where the section lies in the file (offset, size, the inflated size its
//! compression header declares) and the file's identity as `fstat` gives it (device, inode,
//! size, modification and change times in nanoseconds), as git's index recognises an unchanged
//! work-tree file. The build-id alone would not do: a `dwz`ed `-dbgsym` file and a local build's
//! debug file share a build-id, not their sections. A cache file must have knot's magic and every
//! field of that key in its header, and be exactly as long as its header says; anything else is
//! ignored (and inflated again).
//!
//! Finding an entry thus reads nothing of the debug file. Keying by the compressed bytes'
//! checksum (the format before this one) read and hashed all of them on every run — libc's
//! sections on each small dump, pages faulted in from the debug file for a few dozen units
//! touched. What the identity trusts instead: that a file is only changed through the kernel,
//! which sets its change time (`ctime`) on every write and `touch`, and which no user can set
//! back; so a file written again in place with the same size, touched, or replaced by a copy
//! (another inode) has another key. Not caught: a file changed below the kernel (a disk image
//! edited offline, a network file system whose server keeps no change times), or the system
//! clock set back so that a later change is stamped with an earlier one's times. Such a file is
//! then read as the file it was, as a damaged debug file would be: the readers bound every
//! section like hostile input.
//!
//! A file changed less than [`SETTLE`] before knot opened it could change again within the same
//! tick of its file system's clock (git's "racily clean" entries) without its identity
//! changing: its sections are neither looked up nor stored (see [`FileIdentity::settled`]). A
//! freshly built debug file is cached by the first run that opens it 2 s after it was written.
//!
//! The inflated bytes are not hashed on each read either: an entry is whole by construction. A
//! writer writes a temporary file, flushes it to disk (`fsync`) and only then renames it into
//! place, so concurrent runs and a crash leave a whole entry or none. The header still carries
//! XXH3-64 checksums of the compressed and the inflated bytes as written (`twox-hash`, already
//! built for `ruzstd`), for a person checking an entry by hand; they cost the run that inflates.
//!
//! Beside the sections, the directory keeps what knot builds from them and would otherwise build
//! again on every run ("derived" entries: a module's DWARF unit index, `symbols/units.rs`, and a
//! file's symbol tables, sorted, `symbols/symtab.rs`), keyed
//! by the same file identity, a hash of the section headers it was built from and a format
//! version. They are small and read whole, so their checksum is checked on read.
//!
//! After a write the directory is kept under its size bound by removing the least recently used
//! entries (a hit touches its file's time), which also retires the entries of files since
//! changed or removed.

use crate::bytes::Bytes;
use memmap2::Mmap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// `KNOTSEC1` (CRC32) and `KNOTSEC2` (keyed by the compressed bytes' checksum) entries are
/// ignored: their names no longer match, and neither would their headers.
const MAGIC: &[u8; 8] = b"KNOTSEC3";
/// Magic, then each a little-endian u64: inflated size, section offset, section size, the debug
/// file's device, inode, size, mtime and ctime (ns), then the checksums of the compressed and
/// inflated bytes (as written; not checked on read, see the module docs).
const HEADER: usize = 88;
/// Where each key field lies in the header, in the order [`Key::fields`] gives them.
const KEY_AT: usize = 8;
const KEY_FIELDS: usize = 8;
const SUFFIX: &str = ".knot-section";
/// What knot builds from a debug file's sections and keeps beside them (the DWARF unit index):
/// magic, then each a little-endian u64: the format version of what is kept, a hash of the
/// section headers it was built from, the debug file's device, inode, size, mtime and ctime
/// (ns), the length of the bytes that follow and their XXH3-64 (checked on read: they are small,
/// and a damaged index would send lookups to the wrong units rather than fail).
const DERIVED_MAGIC: &[u8; 8] = b"KNOTDRV1";
const DERIVED_HEADER: usize = 80;
const DERIVED_SUFFIX: &str = ".knot-derived";
/// Temporary files older than this are left-overs of a killed writer.
const STALE_TMP: Duration = Duration::from_secs(3600);
/// How long after its last change a file is trusted to keep its identity while it does not
/// change: the coarsest timestamp Linux file systems keep (FAT's 2 s; ext4, xfs, btrfs and tmpfs
/// step by a clock tick, a few ms).
pub(crate) const SETTLE: Duration = Duration::from_secs(2);
/// The default size bound of the directory.
pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;

/// Why the user's own cache directory is not used.
#[derive(Debug, thiserror::Error)]
pub enum UserCacheError {
    #[error("neither XDG_CACHE_HOME nor HOME names an absolute directory")]
    NoHome,
    #[error("cannot create {}: {source}", dir.display())]
    Create { dir: PathBuf, source: std::io::Error },
    #[error("{} is not a directory of its own (a symbolic link or another file)", dir.display())]
    NotADirectory { dir: PathBuf },
    /// Its entries are trusted to be what this user's runs wrote: one another user owns or may
    /// write is not read.
    #[error("{} is not private to this user (owner uid {uid}, mode {mode:o}; knot wants uid {euid}, no access for group or others)", dir.display())]
    NotPrivate { dir: PathBuf, uid: u32, mode: u32, euid: u32 },
}

/// Where a user's cache lives when no directory is given: `$XDG_CACHE_HOME/knot`, else
/// `$HOME/.cache/knot` (relative values are ignored, as the XDG base directory rules say).
pub fn user_cache_dir() -> Option<PathBuf> {
    let absolute = |name: &str| std::env::var_os(name).map(PathBuf::from).filter(|p| p.is_absolute());
    absolute("XDG_CACHE_HOME").or_else(|| absolute("HOME").map(|h| h.join(".cache"))).map(|base| base.join("knot"))
}

/// A cache directory and its size bound.
#[derive(Debug, Clone)]
pub struct SectionCache {
    dir: PathBuf,
    max_bytes: u64,
}

/// A section's inflated bytes: inflated in this run, or mapped from a cache file (after its
/// header).
pub(crate) struct SectionBytes {
    bytes: Bytes,
    start: usize,
}

impl SectionBytes {
    pub(crate) fn inflated(data: Box<[u8]>) -> SectionBytes {
        SectionBytes { bytes: Bytes::Owned(data), start: 0 }
    }
}

impl std::ops::Deref for SectionBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.bytes.get(self.start..).unwrap_or_default()
    }
}

/// Which file on disk a debug file is, and which version of it: what `fstat` says of it (see
/// the module docs for what this trusts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileIdentity {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) size: u64,
    pub(crate) mtime_ns: i64,
    pub(crate) ctime_ns: i64,
}

impl FileIdentity {
    /// The identity of an open file from its metadata, taken at `now`; `None` when the file
    /// changed less than [`SETTLE`] before (or, by a clock set back, after) `now`, as it could
    /// change again without a new change time.
    pub(crate) fn settled(meta: &fs::Metadata, now: SystemTime) -> Option<FileIdentity> {
        let ns = |secs: i64, nsec: i64| secs.checked_mul(1_000_000_000)?.checked_add(nsec);
        let id = FileIdentity {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec())?,
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec())?,
        };
        let now_ns = i64::try_from(now.duration_since(SystemTime::UNIX_EPOCH).ok()?.as_nanos()).ok()?;
        // Every change sets ctime (mtime only follows it, or is set by hand): ctime alone tells
        // how long the file has been still.
        let settle = SETTLE.as_nanos() as i64;
        (now_ns.checked_sub(id.ctime_ns)? >= settle).then_some(id)
    }
}

/// What one cached section stands for.
pub(crate) struct Key<'a> {
    pub(crate) build_id: &'a [u8],
    pub(crate) section: &'a str,
    /// The debug file the section is in.
    pub(crate) file: FileIdentity,
    /// Where the section's bytes (its compression header and zlib stream) lie in the file.
    pub(crate) offset: u64,
    pub(crate) compressed_size: u64,
    /// The size its compression header declares.
    pub(crate) size: u64,
}

impl Key<'_> {
    /// The fields an entry's header must repeat, in header order.
    fn fields(&self) -> [u64; KEY_FIELDS] {
        let f = &self.file;
        [self.size, self.offset, self.compressed_size, f.dev, f.ino, f.size, f.mtime_ns as u64, f.ctime_ns as u64]
    }

    fn file_name(&self) -> Option<String> {
        if self.build_id.is_empty() {
            return None;
        }
        let section: String = self.section.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').take(64).collect();
        let mut key = Vec::with_capacity(8 * KEY_FIELDS + self.section.len());
        for field in self.fields() {
            key.extend(field.to_le_bytes());
        }
        // The full name too: two names can keep the same characters.
        key.extend(self.section.as_bytes());
        let hash = checksum(&key);
        Some(format!("{}-{section}-{hash:016x}{SUFFIX}", super::elf_file::hex(self.build_id)))
    }
}

/// What one derived entry stands for: `what` built by format `version` from the sections of one
/// version of one debug file.
pub(crate) struct DerivedKey<'a> {
    pub(crate) build_id: &'a [u8],
    pub(crate) what: &'a str,
    pub(crate) version: u64,
    /// A hash of the headers (name, offset, size, flags) of the sections it is built from.
    pub(crate) sections: u64,
    pub(crate) file: FileIdentity,
}

impl DerivedKey<'_> {
    /// The fields an entry's header must repeat, in header order.
    fn fields(&self) -> [u64; 7] {
        let f = &self.file;
        [self.version, self.sections, f.dev, f.ino, f.size, f.mtime_ns as u64, f.ctime_ns as u64]
    }

    fn file_name(&self) -> Option<String> {
        if self.build_id.is_empty() {
            return None;
        }
        let what: String = self.what.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').take(64).collect();
        let mut key: Vec<u8> = self.fields().iter().flat_map(|f| f.to_le_bytes()).collect();
        key.extend(self.what.as_bytes());
        Some(format!("{}-{what}-{:016x}{DERIVED_SUFFIX}", super::elf_file::hex(self.build_id), checksum(&key)))
    }
}

/// The little-endian word at `at` of an entry's header.
fn header_field(head: &[u8], at: usize) -> Option<u64> {
    crate::bytes::u64_at(head, at)
}

/// `entry`, its file's time touched first: least recently used goes first when the directory
/// is over its bound.
fn touched(file: fs::File, entry: SectionBytes) -> SectionBytes {
    let _ = file.set_modified(SystemTime::now());
    entry
}

/// XXH3-64 (see the module docs).
fn checksum(bytes: &[u8]) -> u64 {
    twox_hash::XxHash3_64::oneshot(bytes)
}

impl SectionCache {
    /// A cache in `dir` (created on the first write), holding at most `max_bytes`.
    pub fn new(dir: impl Into<PathBuf>, max_bytes: u64) -> SectionCache {
        SectionCache { dir: dir.into(), max_bytes }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The user's own cache ([`user_cache_dir`]), created private (mode 0700) when missing. It is
    /// never shared between users: a directory that is a symbolic link, that another user owns or
    /// that its group or others may use is refused, since an entry found there is served as the
    /// inflated section it claims to be (a planted entry could not crash knot, whose readers bound
    /// every section, but would make its report lie).
    pub fn for_user(max_bytes: u64) -> Result<SectionCache, UserCacheError> {
        let dir = user_cache_dir().ok_or(UserCacheError::NoHome)?;
        Self::private(dir, max_bytes)
    }

    fn private(dir: PathBuf, max_bytes: u64) -> Result<SectionCache, UserCacheError> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        if let Some(parent) = dir.parent()
            && let Err(source) = fs::create_dir_all(parent) {
                return Err(UserCacheError::Create { dir, source });
            }
        match fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(source) => return Err(UserCacheError::Create { dir, source }),
        }
        let meta = match fs::symlink_metadata(&dir) {
            Ok(m) => m,
            Err(source) => return Err(UserCacheError::Create { dir, source }),
        };
        if !meta.file_type().is_dir() {
            return Err(UserCacheError::NotADirectory { dir });
        }
        // SAFETY: geteuid has no preconditions and cannot fail.
        let euid = unsafe { libc::geteuid() };
        let mode = meta.permissions().mode() & 0o7777;
        if meta.uid() != euid || mode & 0o077 != 0 {
            return Err(UserCacheError::NotPrivate { dir, uid: meta.uid(), mode, euid });
        }
        Ok(SectionCache::new(dir, max_bytes))
    }

    /// The inflated section for `key`, mapped from the cache, if a valid entry is there.
    pub(crate) fn get(&self, key: &Key<'_>) -> Option<SectionBytes> {
        let want = (HEADER as u64).checked_add(key.size)?;
        let (file, bytes) = self.mapped(&key.file_name()?, HEADER, |len| len == want, MAGIC, &key.fields(), KEY_AT)?;
        let data = bytes.get(HEADER..)?;
        if data.len() as u64 != key.size || bytes.changed_while_read() {
            return None;
        }
        Some(touched(file, SectionBytes { bytes, start: HEADER }))
    }

    /// Stores the inflated `data` for `key`, inflated from `compressed` (best effort: a cache
    /// that cannot be written is no cache, and the run goes on).
    pub(crate) fn put(&self, key: &Key<'_>, compressed: &[u8], data: &[u8]) {
        if data.len() as u64 != key.size || key.size > self.max_bytes {
            return;
        }
        let Some(name) = key.file_name() else { return };
        let mut head = [0u8; HEADER];
        head[..8].copy_from_slice(MAGIC);
        let sums = [checksum(compressed), checksum(data)];
        for (i, field) in key.fields().into_iter().chain(sums).enumerate() {
            head[KEY_AT + 8 * i..KEY_AT + 8 * i + 8].copy_from_slice(&field.to_le_bytes());
        }
        self.write(&name, &head, data);
    }

    /// What was built as `key` says, if a whole entry of it is there (at most `max_len` bytes).
    pub(crate) fn get_derived(&self, key: &DerivedKey<'_>, max_len: u64) -> Option<SectionBytes> {
        let fits = |len: u64| len >= DERIVED_HEADER as u64 && len - DERIVED_HEADER as u64 <= max_len;
        let (file, bytes) = self.mapped(&key.file_name()?, DERIVED_HEADER, fits, DERIVED_MAGIC, &key.fields(), 8)?;
        let (head, data) = bytes.split_at_checked(DERIVED_HEADER)?;
        let valid = header_field(head, 64) == Some(data.len() as u64) && header_field(head, 72) == Some(checksum(data)) && !bytes.changed_while_read();
        valid.then(|| touched(file, SectionBytes { bytes, start: DERIVED_HEADER }))
    }

    /// Entry `name` mapped, when its length passes `len_ok` and its header of `header` bytes
    /// starts with `magic` and repeats `fields` from byte `fields_at`: the file (to touch on a
    /// hit) and its bytes. What else the entry must hold is its reader's to check.
    fn mapped(&self, name: &str, header: usize, len_ok: impl FnOnce(u64) -> bool, magic: &[u8; 8], fields: &[u64], fields_at: usize) -> Option<(fs::File, Bytes)> {
        let file = crate::open::open_regular(&self.dir.join(name)).ok()?;
        if !len_ok(file.metadata().ok()?.len()) {
            return None;
        }
        // SAFETY: a read-only private mapping; entries are replaced by rename, never rewritten
        // in place, and a file shrunk by someone else is caught by the SIGBUS guard.
        let map = unsafe { Mmap::map(&file) }.ok()?;
        let bytes = Bytes::mapped(map);
        let head = bytes.get(..header)?;
        let valid = head.get(..8) == Some(&magic[..]) && fields.iter().enumerate().all(|(i, &want)| header_field(head, fields_at + 8 * i) == Some(want));
        valid.then_some((file, bytes))
    }

    /// Stores `data` built as `key` says (best effort, as [`SectionCache::put`]).
    pub(crate) fn put_derived(&self, key: &DerivedKey<'_>, data: &[u8]) {
        if data.len() as u64 > self.max_bytes {
            return;
        }
        let Some(name) = key.file_name() else { return };
        let mut head = [0u8; DERIVED_HEADER];
        head[..8].copy_from_slice(DERIVED_MAGIC);
        for (i, field) in key.fields().into_iter().chain([data.len() as u64, checksum(data)]).enumerate() {
            head[8 + 8 * i..16 + 8 * i].copy_from_slice(&field.to_le_bytes());
        }
        self.write(&name, &head, data);
    }

    /// Writes entry `name` whole or not at all, then keeps the directory under its bound.
    fn write(&self, name: &str, head: &[u8], data: &[u8]) {
        if fs::create_dir_all(&self.dir).is_err() {
            return;
        }
        let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let tmp = self.dir.join(format!(".{name}.tmp.{}.{nanos}", std::process::id()));
        let written = fs::OpenOptions::new().write(true).create_new(true).open(&tmp).and_then(|mut f| {
            f.write_all(head)?;
            f.write_all(data)?;
            // On disk before it has its name: a crash cannot leave a named entry with pages
            // never written (readers of sections do not hash their bytes again).
            f.sync_all()
        });
        if written.is_err() || fs::rename(&tmp, self.dir.join(name)).is_err() {
            let _ = fs::remove_file(&tmp);
            return;
        }
        self.evict();
    }

    /// Removes the least recently used entries until the directory holds at most `max_bytes`,
    /// and temporary files a killed writer left.
    fn evict(&self) {
        let Ok(entries) = fs::read_dir(&self.dir) else { return };
        let now = SystemTime::now();
        let mut kept: Vec<(SystemTime, u64, PathBuf)> = Vec::new();
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            let Ok(meta) = e.metadata() else { continue };
            if !meta.is_file() {
                continue;
            }
            let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            if name.starts_with('.') && name.contains(".tmp.") {
                if now.duration_since(modified).is_ok_and(|age| age > STALE_TMP) {
                    let _ = fs::remove_file(e.path());
                }
            } else if name.ends_with(SUFFIX) || name.ends_with(DERIVED_SUFFIX) {
                kept.push((modified, meta.len(), e.path()));
            }
        }
        let mut total: u64 = kept.iter().map(|k| k.1).sum();
        kept.sort();
        for (_, len, path) in kept {
            if total <= self.max_bytes {
                break;
            }
            if fs::remove_file(&path).is_ok() {
                total = total.saturating_sub(len);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: FileIdentity = FileIdentity { dev: 0x803, ino: 1_234_567, size: 9_000_000, mtime_ns: 1_700_000_000_123_456_789, ctime_ns: 1_700_000_001_000_000_001 };

    fn key(file: FileIdentity, size: u64) -> Key<'static> {
        Key { build_id: &[0xab, 0xcd, 0x01], section: ".debug_info", file, offset: 0x4000, compressed_size: 777, size }
    }

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("knot-section-cache-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    fn entry(dir: &Path) -> PathBuf {
        fs::read_dir(dir).unwrap().flatten().find(|e| e.file_name().to_string_lossy().ends_with(SUFFIX)).unwrap().path()
    }

    #[test]
    fn the_users_cache_is_made_private_and_one_others_may_use_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("nested").join("knot");
        let cache = SectionCache::private(dir.clone(), 1 << 20).expect("a new directory is made private");
        assert_eq!(cache.dir(), dir);
        assert_eq!(fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        // Made again: the same directory, still accepted.
        assert!(SectionCache::private(dir.clone(), 1 << 20).is_ok());

        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        let refused = SectionCache::private(dir.clone(), 1 << 20).unwrap_err();
        assert!(matches!(refused, UserCacheError::NotPrivate { mode: 0o777, .. }), "{refused}");

        let elsewhere = base.path().join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        let link = base.path().join("link");
        std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
        let refused = SectionCache::private(link, 1 << 20).unwrap_err();
        assert!(matches!(refused, UserCacheError::NotADirectory { .. }), "{refused}");
    }

    #[test]
    fn a_stored_section_comes_back_and_only_for_its_key() {
        let dir = scratch("roundtrip");
        let cache = SectionCache::new(&dir, 1 << 20);
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        let k = key(FILE, data.len() as u64);
        assert!(cache.get(&k).is_none());
        cache.put(&k, b"zlib", &data);
        assert!(cache.get(&k).as_deref() == Some(&data[..]));
        // Any other field: another file, another version of it, or another section of it.
        let others: [(&str, Key<'_>); 10] = [
            ("build-id", Key { build_id: &[0xab, 0xcd, 0x02], ..key(FILE, k.size) }),
            ("section", Key { section: ".debug_line", ..key(FILE, k.size) }),
            ("offset", Key { offset: k.offset + 1, ..key(FILE, k.size) }),
            ("compressed size", Key { compressed_size: k.compressed_size - 1, ..key(FILE, k.size) }),
            ("declared size", key(FILE, k.size + 1)),
            ("device", key(FileIdentity { dev: FILE.dev + 1, ..FILE }, k.size)),
            ("inode (a copy)", key(FileIdentity { ino: FILE.ino + 1, ..FILE }, k.size)),
            ("file size", key(FileIdentity { size: FILE.size + 1, ..FILE }, k.size)),
            ("mtime (touched)", key(FileIdentity { mtime_ns: FILE.mtime_ns + 1, ..FILE }, k.size)),
            ("ctime (rewritten in place)", key(FileIdentity { ctime_ns: FILE.ctime_ns + 1, ..FILE }, k.size)),
        ];
        for (what, other) in others {
            assert!(cache.get(&other).is_none(), "another {what} is a miss");
        }
        let _ = fs::remove_dir_all(&dir);
    }

    /// A cut or foreign file is a miss. A flipped bit inside a whole entry is not looked for on
    /// each read (module docs): the entry is served as written, as a damaged debug file would be.
    #[test]
    fn a_damaged_entry_is_ignored() {
        let dir = scratch("damaged");
        let cache = SectionCache::new(&dir, 1 << 20);
        let data = vec![0x5au8; 4096];
        let k = key(FILE, data.len() as u64);
        cache.put(&k, b"stream", &data);
        let path = entry(&dir);
        let mut bytes = fs::read(&path).unwrap();
        bytes[HEADER + 100] ^= 1;
        fs::write(&path, &bytes).unwrap();
        assert!(cache.get(&k).is_some_and(|b| b.len() == data.len() && b[100] == 0x5b), "a whole entry is served as it is on disk");
        bytes.truncate(HEADER + 10);
        fs::write(&path, &bytes).unwrap();
        assert!(cache.get(&k).is_none(), "a short file is not the section");
        fs::write(&path, b"not a cache file").unwrap();
        assert!(cache.get(&k).is_none());
        // Written again, it is good again.
        cache.put(&k, b"stream", &data);
        assert!(cache.get(&k).as_deref() == Some(&data[..]));
        let _ = fs::remove_dir_all(&dir);
    }

    /// Each key field of the header is checked (the name is only a hash of them): an entry whose
    /// inflated bytes are whole but whose header stands for another key, or is of the format
    /// before (keyed by the compressed bytes' checksum), is a miss. The checksums are not read.
    #[test]
    fn an_entry_for_another_key_or_of_the_old_format_is_ignored() {
        let dir = scratch("header");
        let cache = SectionCache::new(&dir, 1 << 20);
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let k = key(FILE, data.len() as u64);
        cache.put(&k, b"stream", &data);
        let path = entry(&dir);
        let good = fs::read(&path).unwrap();
        assert!(cache.get(&k).as_deref() == Some(&data[..]));
        let names = ["inflated size", "offset", "section size", "device", "inode", "file size", "mtime", "ctime"];
        for (at, what) in [(0, "magic")].into_iter().chain(names.into_iter().enumerate().map(|(i, n)| (KEY_AT + 8 * i, n))) {
            let mut bytes = good.clone();
            bytes[at + 1] ^= 0x10;
            fs::write(&path, &bytes).unwrap();
            assert!(cache.get(&k).is_none(), "a wrong {what} in the header");
        }
        let mut bytes = good.clone();
        bytes[KEY_AT + 8 * KEY_FIELDS..HEADER].fill(0xee);
        fs::write(&path, &bytes).unwrap();
        assert!(cache.get(&k).as_deref() == Some(&data[..]), "the checksums are for people");
        // The format before: sizes and the compressed bytes' checksum, 40 bytes, then the data.
        let mut old = b"KNOTSEC2".to_vec();
        old.extend(k.size.to_le_bytes());
        old.extend(k.compressed_size.to_le_bytes());
        old.extend(checksum(b"stream").to_le_bytes());
        old.extend(checksum(&data).to_le_bytes());
        old.extend(&data);
        old.resize(HEADER + data.len(), 0);
        fs::write(&path, &old).unwrap();
        assert!(cache.get(&k).is_none(), "an entry of the KNOTSEC2 format");
        fs::write(&path, &good).unwrap();
        assert!(cache.get(&k).as_deref() == Some(&data[..]), "the entry as written is good again");
        let _ = fs::remove_dir_all(&dir);
    }

    /// A derived entry (the DWARF unit index) comes back for its key only, and, unlike a
    /// section, whole or not at all: its bytes are checked against their checksum.
    #[test]
    fn a_derived_entry_comes_back_whole_and_only_for_its_key() {
        let dir = scratch("derived");
        let cache = SectionCache::new(&dir, 1 << 20);
        let key = |version: u64, file: FileIdentity| DerivedKey { build_id: &[0xab, 0xcd], what: "unit_index", version, sections: 42, file };
        let data: Vec<u8> = (0..3000u32).map(|i| (i * 13) as u8).collect();
        let k = key(1, FILE);
        assert!(cache.get_derived(&k, 1 << 20).is_none());
        cache.put_derived(&k, &data);
        assert!(cache.get_derived(&k, 1 << 20).as_deref() == Some(&data[..]));
        assert!(cache.get_derived(&k, data.len() as u64 - 1).is_none(), "longer than the reader's bound");
        for (what, other) in [
            ("version", key(2, FILE)),
            ("section headers", DerivedKey { sections: 43, ..key(1, FILE) }),
            ("ctime", key(1, FileIdentity { ctime_ns: FILE.ctime_ns + 1, ..FILE })),
            ("inode", key(1, FileIdentity { ino: FILE.ino + 1, ..FILE })),
        ] {
            assert!(cache.get_derived(&other, 1 << 20).is_none(), "another {what} is a miss");
        }
        let path = fs::read_dir(&dir).unwrap().flatten().find(|e| e.file_name().to_string_lossy().ends_with(DERIVED_SUFFIX)).unwrap().path();
        let good = fs::read(&path).unwrap();
        for at in [0, 8, 16, 24, 32, 40, 48, 56, 64, 72, DERIVED_HEADER, good.len() - 1] {
            let mut bytes = good.clone();
            bytes[at] ^= 0x20;
            fs::write(&path, &bytes).unwrap();
            assert!(cache.get_derived(&k, 1 << 20).is_none(), "a byte changed at {at}");
        }
        fs::write(&path, &good[..good.len() - 1]).unwrap();
        assert!(cache.get_derived(&k, 1 << 20).is_none(), "cut");
        fs::write(&path, &good).unwrap();
        assert!(cache.get_derived(&k, 1 << 20).as_deref() == Some(&data[..]), "as written, good again");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_directory_stays_under_its_bound() {
        let dir = scratch("bound");
        let cache = SectionCache::new(&dir, 3 * 4096);
        let data = vec![1u8; 4096];
        for i in 0..6u64 {
            cache.put(&Key { offset: i, ..key(FILE, data.len() as u64) }, b"zlib", &data);
        }
        let total: u64 = fs::read_dir(&dir).unwrap().flatten().map(|e| e.metadata().unwrap().len()).sum();
        assert!(total <= 3 * 4096, "{total}");
        // The newest is kept.
        assert!(cache.get(&Key { offset: 5, ..key(FILE, data.len() as u64) }).is_some());
        let _ = fs::remove_dir_all(&dir);
    }

    /// A file just written could be written again within the same tick of its file system's
    /// clock, keeping its identity: it has none until it has been still for [`SETTLE`].
    #[test]
    fn a_file_has_an_identity_once_it_has_settled() {
        let dir = scratch("settled");
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("debug");
        fs::write(&path, b"debug file").unwrap();
        let meta = fs::metadata(&path).unwrap();
        let changed = SystemTime::UNIX_EPOCH + Duration::new(meta.ctime() as u64, meta.ctime_nsec() as u32);
        assert_eq!(FileIdentity::settled(&meta, SystemTime::now()), None, "just written");
        assert_eq!(FileIdentity::settled(&meta, changed + SETTLE - Duration::from_nanos(1)), None);
        assert_eq!(FileIdentity::settled(&meta, changed - Duration::from_secs(60)), None, "changed after now: the clock was set back");
        let id = FileIdentity::settled(&meta, changed + SETTLE).expect("settled");
        assert_eq!((id.ino, id.size, id.ctime_ns), (meta.ino(), 10, meta.ctime() * 1_000_000_000 + meta.ctime_nsec()));
        let _ = fs::remove_dir_all(&dir);
    }
}
