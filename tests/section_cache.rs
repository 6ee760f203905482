//! `--cache-dir`: a module's compressed debug sections read through the cache are the bytes
//! inflating them gives, on the run that fills the cache and on the runs that map it; an entry
//! is found by the debug file's identity (device, inode, size, times), so a file rewritten in
//! place, touched, or copied elsewhere is inflated again, never served another file's entry.

mod common;

use knot::process::{ElfFile, SectionCache};
use knot_samples::DumpKind;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

const NAMES: [&str; 5] = [".debug_info", ".debug_abbrev", ".debug_line", ".debug_str", ".debug_aranges"];

/// Longer than knot waits before it trusts a file's identity (a file written less than 2 s
/// before it is opened may be written again within the same timestamp tick).
const SETTLE: Duration = Duration::from_millis(2100);

/// The sections of `path` as read through `cache`.
fn sections(path: &Path, cache: &Arc<SectionCache>) -> Vec<Vec<u8>> {
    let mut file = ElfFile::open(path).expect("the compressed binary");
    file.set_section_cache(Some(cache.clone()));
    NAMES.iter().map(|name| file.section(name).expect(name).to_vec()).collect()
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    found.sort();
    found
}

/// Flips the last byte of every entry not marked before (the last byte of its section): a hit
/// then serves bytes no inflation gives (entries are not hashed again on read), so a hit tells
/// from a miss.
fn mark_entries(dir: &Path, marked: &mut Vec<PathBuf>) {
    for path in entries(dir) {
        if marked.contains(&path) {
            continue;
        }
        marked.push(path.clone());
        let mut bytes = std::fs::read(&path).expect("an entry");
        *bytes.last_mut().expect("not empty") ^= 0xff;
        std::fs::write(&path, bytes).expect("an entry");
    }
}

#[test]
fn sections_through_the_cache_are_the_inflated_ones_of_that_very_file() {
    let d = common::committed("abba", DumpKind::Gcore);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("section_cache");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    // The sample's binary with its DWARF compressed, as Debian ships debug files.
    let rewritten = dir.join("rewritten");
    let made = Command::new("objcopy").arg("--compress-debug-sections=zlib").arg(&d.binary).arg(&rewritten).status();
    if !made.is_ok_and(|s| s.success()) {
        knot_samples::skipped("objcopy (binutils) is needed to compress the sample's debug sections");
        return;
    }
    let (touched, copy, kept) = (dir.join("touched"), dir.join("elsewhere/copy"), dir.join("kept"));
    std::fs::create_dir_all(dir.join("elsewhere")).expect("scratch dir");
    for to in [&touched, &copy, &kept] {
        std::fs::copy(&rewritten, to).expect("a copy");
    }
    let plain = ElfFile::open(&d.binary).expect("the binary");
    let plain: Vec<Vec<u8>> = NAMES.iter().map(|name| plain.section(name).filter(|s| !s.is_empty()).expect(name).to_vec()).collect();
    let cache_dir = dir.join("cache");
    let cache = Arc::new(SectionCache::new(&cache_dir, 1 << 30));

    // A file written just now is not looked up in the cache nor stored: it may be written
    // again within the same timestamp tick, keeping its identity.
    assert!(sections(&rewritten, &cache) == plain);
    assert!(entries(&cache_dir).is_empty(), "a file written just now has no entries");
    std::thread::sleep(SETTLE);

    // The first run fills the cache, the second maps it. Only compressed sections go through
    // the cache (objcopy leaves a section plain when zlib would not shrink it): entries prove
    // objcopy compressed them.
    let mut filled = Vec::new();
    for run in 0..2 {
        assert!(sections(&rewritten, &cache) == plain, "run {run}");
        filled = entries(&cache_dir);
        assert!(filled.len() >= 3, "run {run}: the cache holds the inflated sections ({filled:?})");
    }
    let stored = filled.len();
    for path in [&touched, &kept] {
        assert!(sections(path, &cache) == plain);
    }
    assert_eq!(entries(&cache_dir).len(), 3 * stored, "one entry per section of each file");
    let mut marked = Vec::new();
    mark_entries(&cache_dir, &mut marked);
    assert!(sections(&rewritten, &cache) != plain, "a hit serves the entry as it is on disk");
    assert!(sections(&kept, &cache) != plain);
    // The same bytes at another inode: another file, found by nothing the first one stored.
    assert!(sections(&copy, &cache) == plain, "a copy elsewhere is a miss");
    mark_entries(&cache_dir, &mut marked);

    // Written again in place with the very same bytes (same size, same inode), and touched.
    let bytes = std::fs::read(&rewritten).expect("the file");
    let mut file = std::fs::OpenOptions::new().write(true).open(&rewritten).expect("open in place");
    std::io::Write::write_all(&mut file, &bytes).expect("rewrite in place");
    drop(file);
    let old = SystemTime::now() - Duration::from_secs(86_400);
    std::fs::File::options().write(true).open(&touched).and_then(|f| f.set_modified(old)).expect("touch");
    std::thread::sleep(SETTLE);
    assert!(sections(&kept, &cache) != plain, "a file left alone still hits");
    assert!(sections(&rewritten, &cache) == plain, "a file rewritten in place is a miss");
    assert!(sections(&touched, &cache) == plain, "a touched file is a miss");
    assert!(sections(&copy, &cache) != plain, "the copy's own entries hit");
}
