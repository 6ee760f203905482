//! `--cache-dir`: a module's compressed debug sections read through the cache are the bytes
//! inflating them gives, on the run that fills the cache and on the runs that map it.

mod common;

use knot::process::{ElfFile, SectionCache};
use knot_samples::DumpKind;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

#[test]
fn sections_through_the_cache_are_the_inflated_ones() {
    let d = common::committed("abba", DumpKind::Gcore);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("section_cache");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    // The sample's binary with its DWARF compressed, as Debian ships debug files.
    let compressed = dir.join("abba-zlib");
    let made = Command::new("objcopy").arg("--compress-debug-sections=zlib").arg(&d.binary).arg(&compressed).status();
    if !made.is_ok_and(|s| s.success()) {
        knot_samples::skipped("objcopy (binutils) is needed to compress the sample's debug sections");
        return;
    }
    let plain = ElfFile::open(&d.binary).expect("the binary");
    let names = [".debug_info", ".debug_abbrev", ".debug_line", ".debug_str", ".debug_aranges"];
    for name in names {
        assert!(plain.section(name).is_some_and(|s| !s.is_empty()), "the sample has {name}");
    }
    let cache = Arc::new(SectionCache::new(dir.join("cache"), 1 << 30));
    // The first run fills the cache, the second maps it.
    for run in 0..2 {
        let mut file = ElfFile::open(&compressed).expect("the compressed binary");
        file.set_section_cache(Some(cache.clone()));
        for name in names {
            assert!(file.section(name) == plain.section(name), "{name} differs on run {run}");
        }
        // Only compressed sections go through the cache: entries prove objcopy compressed them.
        let cached = std::fs::read_dir(dir.join("cache")).map(|d| d.count()).unwrap_or(0);
        assert!(cached >= 3, "run {run}: the cache holds the inflated sections ({cached})");
    }
}
