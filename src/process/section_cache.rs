//! An opt-in directory of inflated debug sections (`--cache-dir`), so that a module's
//! compressed DWARF (a Debian `-dbg` or `-dbgsym` file's `.debug_info`, `.debug_line`, ...) is
//! inflated once and then only mapped, by repeated runs and by `knot watch`: inflating libc's
//! debug sections is most of a small dump's cost.
//!
//! One file per section, named by the file's build-id, the section's name and a checksum of its
//! compressed bytes: an entry stands for those exact bytes, not for the build-id alone (a `dwz`ed
//! `-dbgsym` file and a local build's debug file share a build-id, not their sections). A cache
//! file must have knot's magic and the sizes and checksum of the compressed section it stands for,
//! and be exactly as long as its header says; anything else is ignored (and inflated again).
//!
//! The inflated bytes are not hashed again on each read: that read all of libc's 8.6 MB of
//! sections into the page tables on every run (most of a cached small dump's cost, for a few
//! dozen units touched). An entry is instead whole by construction: a writer writes a temporary
//! file, flushes it to disk (`fsync`) and only then renames it into place, so concurrent runs
//! and a crash leave a whole entry or none. An entry is then trusted as the debug file it was
//! inflated from is, which is not checksummed either; a damaged one is damaged DWARF, which the
//! readers bound like any hostile input. The header still carries the inflated bytes' XXH3-64 as
//! written, for a person checking an entry by hand.
//!
//! The checksum is XXH3-64 (`twox-hash`, already built for `ruzstd`): with AVX2 it reads in half
//! the instructions `crc32fast` takes, and it is 64 bits wide. After a write the directory is
//! kept under its size bound by removing the least recently used entries (a hit touches its
//! file's time).

use crate::bytes::Bytes;
use memmap2::Mmap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// `KNOTSEC1` entries (CRC32) are ignored: their names no longer match, and neither would this.
const MAGIC: &[u8; 8] = b"KNOTSEC2";
/// Magic, inflated size, compressed size, checksum of the compressed bytes, of the inflated ones
/// (as written; not checked on read, see the module docs).
const HEADER: usize = 40;
const SUFFIX: &str = ".knot-section";
/// Temporary files older than this are left-overs of a killed writer.
const STALE_TMP: Duration = Duration::from_secs(3600);
/// The default size bound of the directory.
pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;

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

/// What one cached section stands for.
pub(crate) struct Key<'a> {
    pub(crate) build_id: &'a [u8],
    pub(crate) section: &'a str,
    /// The section's bytes in the file: its compression header and zlib stream.
    pub(crate) compressed: &'a [u8],
    /// The size its compression header declares.
    pub(crate) size: u64,
}

impl Key<'_> {
    fn file_name(&self, compressed_sum: u64) -> Option<String> {
        if self.build_id.is_empty() {
            return None;
        }
        let section: String = self.section.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').take(64).collect();
        Some(format!("{}-{section}-{compressed_sum:016x}{SUFFIX}", super::elf_file::hex(self.build_id)))
    }
}

/// The checksum of an entry's bytes (see the module docs).
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

    /// The inflated section for `key`, mapped from the cache, if a valid entry is there.
    pub(crate) fn get(&self, key: &Key<'_>) -> Option<SectionBytes> {
        let sum = checksum(key.compressed);
        let path = self.dir.join(key.file_name(sum)?);
        let file = crate::open::open_regular(&path).ok()?;
        let len = file.metadata().ok()?.len();
        if len != (HEADER as u64).checked_add(key.size)? {
            return None;
        }
        // SAFETY: a read-only private mapping; entries are replaced by rename, never rewritten
        // in place, and a file shrunk by someone else is caught by the SIGBUS guard.
        let map = unsafe { Mmap::map(&file) }.ok()?;
        let bytes = Bytes::mapped(map);
        let (head, data) = bytes.split_at_checked(HEADER)?;
        let field = |at: usize| head.get(at..at + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
        let valid = &head[..8] == MAGIC
            && field(8) == Some(key.size)
            && field(16) == Some(key.compressed.len() as u64)
            && field(24) == Some(sum)
            && data.len() as u64 == key.size
            && !bytes.changed_while_read();
        if !valid {
            return None;
        }
        // Least recently used goes first when the directory is over its bound.
        let _ = file.set_modified(SystemTime::now());
        Some(SectionBytes { bytes, start: HEADER })
    }

    /// Stores the inflated `data` for `key` (best effort: a cache that cannot be written is no
    /// cache, and the run goes on).
    pub(crate) fn put(&self, key: &Key<'_>, data: &[u8]) {
        if data.len() as u64 != key.size || key.size > self.max_bytes {
            return;
        }
        let sum = checksum(key.compressed);
        let Some(name) = key.file_name(sum) else { return };
        if fs::create_dir_all(&self.dir).is_err() {
            return;
        }
        let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let tmp = self.dir.join(format!(".{name}.tmp.{}.{nanos}", std::process::id()));
        let mut head = [0u8; HEADER];
        head[..8].copy_from_slice(MAGIC);
        head[8..16].copy_from_slice(&key.size.to_le_bytes());
        head[16..24].copy_from_slice(&(key.compressed.len() as u64).to_le_bytes());
        head[24..32].copy_from_slice(&sum.to_le_bytes());
        head[32..40].copy_from_slice(&checksum(data).to_le_bytes());
        let written = fs::OpenOptions::new().write(true).create_new(true).open(&tmp).and_then(|mut f| {
            f.write_all(&head)?;
            f.write_all(data)?;
            // On disk before it has its name: a crash cannot leave a named entry with pages
            // never written (readers do not hash the bytes again).
            f.sync_all()
        });
        if written.is_err() || fs::rename(&tmp, self.dir.join(&name)).is_err() {
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
            } else if name.ends_with(SUFFIX) {
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

    fn key<'a>(compressed: &'a [u8], size: u64) -> Key<'a> {
        Key { build_id: &[0xab, 0xcd, 0x01], section: ".debug_info", compressed, size }
    }

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("knot-section-cache-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_stored_section_comes_back_and_only_for_its_key() {
        let dir = scratch("roundtrip");
        let cache = SectionCache::new(&dir, 1 << 20);
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        assert!(cache.get(&key(b"zlib", data.len() as u64)).is_none());
        cache.put(&key(b"zlib", data.len() as u64), &data);
        assert!(cache.get(&key(b"zlib", data.len() as u64)).as_deref() == Some(&data[..]));
        // Other compressed bytes (another file with the same build-id) or another size: a miss.
        assert!(cache.get(&key(b"zlib2", data.len() as u64)).is_none());
        assert!(cache.get(&key(b"zlib", data.len() as u64 + 1)).is_none());
        let _ = fs::remove_dir_all(&dir);
    }

    /// A cut or foreign file is a miss. A flipped bit inside a whole entry is not looked for on
    /// each read (module docs): the entry is served as written, as a damaged debug file would be.
    #[test]
    fn a_damaged_entry_is_ignored() {
        let dir = scratch("damaged");
        let cache = SectionCache::new(&dir, 1 << 20);
        let data = vec![0x5au8; 4096];
        let k = key(b"stream", data.len() as u64);
        cache.put(&k, &data);
        let path = fs::read_dir(&dir).unwrap().flatten().find(|e| e.file_name().to_string_lossy().ends_with(SUFFIX)).unwrap().path();
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
        cache.put(&k, &data);
        assert!(cache.get(&k).as_deref() == Some(&data[..]));
        let _ = fs::remove_dir_all(&dir);
    }

    /// Each header field read is checked: an entry whose inflated bytes are whole but whose
    /// header stands for other compressed bytes, or is of the CRC32 format before it, is a miss.
    #[test]
    fn an_entry_for_other_bytes_or_of_the_old_format_is_ignored() {
        let dir = scratch("header");
        let cache = SectionCache::new(&dir, 1 << 20);
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let k = key(b"stream", data.len() as u64);
        cache.put(&k, &data);
        let path = fs::read_dir(&dir).unwrap().flatten().find(|e| e.file_name().to_string_lossy().ends_with(SUFFIX)).unwrap().path();
        let good = fs::read(&path).unwrap();
        assert!(cache.get(&k).as_deref() == Some(&data[..]));
        for (at, what) in [(0, "magic"), (8, "inflated size"), (16, "compressed size"), (24, "compressed checksum")] {
            let mut bytes = good.clone();
            bytes[at + 1] ^= 0x10;
            fs::write(&path, &bytes).unwrap();
            assert!(cache.get(&k).is_none(), "a wrong {what} in the header");
        }
        // The first format: a CRC32 pair where the compressed checksum now is, and no more.
        let mut old = good[..24].to_vec();
        old[..8].copy_from_slice(b"KNOTSEC1");
        old.extend((u64::from(crc32fast::hash(b"stream")) | u64::from(crc32fast::hash(&data)) << 32).to_le_bytes());
        old.extend(&data);
        fs::write(&path, &old).unwrap();
        assert!(cache.get(&k).is_none(), "an entry of the CRC32 format");
        fs::write(&path, &good).unwrap();
        assert!(cache.get(&k).as_deref() == Some(&data[..]), "the entry as written is good again");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_directory_stays_under_its_bound() {
        let dir = scratch("bound");
        let cache = SectionCache::new(&dir, 3 * 4096);
        let data = vec![1u8; 4096];
        for i in 0..6u8 {
            let compressed = [i; 4];
            cache.put(&key(&compressed, data.len() as u64), &data);
        }
        let total: u64 = fs::read_dir(&dir).unwrap().flatten().map(|e| e.metadata().unwrap().len()).sum();
        assert!(total <= 3 * 4096, "{total}");
        // The newest is kept.
        assert!(cache.get(&key(&[5u8; 4], data.len() as u64)).is_some());
        let _ = fs::remove_dir_all(&dir);
    }
}
