//! Finding the modules and their files: by NT_FILE, by the dynamic linker's list when the core
//! has no NT_FILE, and refusing a file that is not the build that ran.

mod common;
mod dumpedit;

use knot::report_for;
use knot::core::Notes;
use knot::core::Core;
use knot::process::{FileStatus, Process};
use knot_samples::DumpKind;

const NT_FILE: u32 = 0x4649_4c45;

/// The core's bytes with its NT_FILE note renamed to a type nobody reads.
fn without_nt_file(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let u = |at: usize, n: usize| bytes[at..at + n].iter().rev().fold(0u64, |v, b| v << 8 | *b as u64);
    let (phoff, phnum) = (u(32, 8) as usize, u(56, 2) as usize);
    for i in 0..phnum {
        let ph = phoff + i * 56;
        if u(ph, 4) == 4 {
            let (off, size) = (u(ph + 8, 8) as usize, u(ph + 32, 8) as usize);
            for note in Notes::new(&bytes[off..off + size], off as u64) {
                if note.kind == NT_FILE {
                    let at = note.offset as usize + 8;
                    out[at..at + 4].copy_from_slice(&0x0bad_f11e_u32.to_le_bytes());
                }
            }
        }
    }
    out
}

#[test]
fn without_nt_file_the_modules_come_from_the_link_map() {
    let dump = common::committed("abba", DumpKind::Gcore);
    let opts = common::options_for(&dump);
    let bytes = std::fs::read(&dump.core).unwrap();
    let core = Core::from_bytes("abba-without-nt-file", without_nt_file(&bytes)).unwrap();
    assert!(core.files.is_none(), "the edit removed NT_FILE");
    let process = Process::from_core(core, &opts.locator);
    let names: Vec<&str> = process.modules.iter().map(|m| m.name()).collect();
    for want in ["abba", "libc.so.6", "ld-linux-x86-64.so.2"] {
        assert!(names.contains(&want), "{want} should be found through link_map; found {names:?}");
    }
    // The same stacks as with NT_FILE.
    let via_link_map = report_for(&process, &opts);
    let normal = common::analyze(&dump);
    let funcs = |r: &knot::report::Report| r.threads.iter().map(|t| t.frames.iter().map(|f| f.function.clone()).collect::<Vec<_>>()).collect::<Vec<_>>();
    assert_eq!(funcs(&via_link_map), funcs(&normal));
    assert_eq!(via_link_map.deadlocks.len(), 1);
}

#[test]
fn a_file_of_another_build_is_refused_and_said_so() {
    let dump = common::committed("abba", DumpKind::Gcore);
    let mut opts = common::options_for(&dump);
    // A sysroot whose libc.so.6 is another ELF file (the dynamic linker): same name, other build-id.
    let sysroot = tempfile::tempdir().unwrap();
    let real = dump.sysroot.clone().unwrap();
    for dir in ["lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib64"] {
        std::fs::create_dir_all(sysroot.path().join(dir)).unwrap();
    }
    let ld = real.join("lib64/ld-linux-x86-64.so.2");
    for p in ["lib/x86_64-linux-gnu/libc.so.6", "usr/lib/x86_64-linux-gnu/libc.so.6"] {
        std::fs::copy(&ld, sysroot.path().join(p)).unwrap();
    }
    opts.locator.sysroot = Some(sysroot.path().to_path_buf());
    let report = knot::analyze(&dump.core, &opts).unwrap();
    let libc = report.modules.iter().find(|m| m.path.ends_with("libc.so.6")).unwrap();
    assert_eq!(libc.file_status, "refused");
    assert!(libc.file_detail.as_deref().unwrap_or("").contains("build-id mismatch"), "{:?}", libc.file_detail);
    assert!(report.diagnostics.iter().any(|d| d.message.contains("build-id mismatch")));
    assert!(report.dump.partial, "a refused module makes the reading partial");
    let _ = FileStatus::InMemory;
}

/// Issue 12, item 7: mappings that are not ELF images — an io_uring (`anon_inode:[io_uring]`),
/// a memfd and a `/dev/shm` file, all in the kernel core's NT_FILE — are not modules: no
/// warning, and the dump is not partial.
#[test]
fn mappings_that_are_not_images_are_not_modules() {
    let dump = common::committed("odd_mappings", DumpKind::Kernel);
    let opts = common::options_for(&dump);
    let process = Process::open(&dump.core, &opts.locator).expect("core");
    let files: Vec<&str> = process.core.files.iter().flatten().map(|f| f.path.as_str()).collect();
    for want in ["anon_inode:[io_uring]", "/memfd:knot-odd", "/dev/shm/knot-odd-"] {
        assert!(files.iter().any(|f| f.starts_with(want)), "the sample's core maps {want}: {files:?}");
    }
    let report = report_for(&process, &opts);
    let warnings: Vec<_> = report.diagnostics.iter().filter(|d| d.severity == knot::Severity::Warning).collect();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(!report.dump.partial);
    assert!(report.modules.iter().all(|m| !m.path.contains("io_uring") && !m.path.contains("memfd") && !m.path.contains("/dev/shm")), "{:?}", report.modules);
}

/// The plugin and the report of `relative_dlopen` read from `bytes` (the committed core, edited),
/// with only the sample's directory to search.
fn plugin_reading(name: &str, bytes: Vec<u8>) -> (Option<String>, knot::report::Report) {
    let dump = common::committed("relative_dlopen", DumpKind::Kernel);
    let mut opts = common::options_for(&dump);
    // Where the system's libraries are, for names that no longer say (relative NT_FILE paths).
    let sysroot = dump.sysroot.clone().expect("committed dumps have a sysroot");
    opts.locator.search_dirs.extend([sysroot.join("lib/x86_64-linux-gnu"), sysroot.join("lib64")]);
    let core = Core::from_bytes(name, bytes).expect("still a core");
    let process = Process::from_core(core, &opts.locator);
    let report = report_for(&process, &opts);
    let plugin = report.modules.iter().find(|m| m.path.ends_with("librelative_plugin.so")).map(|m| format!("{} {} {:?}", m.path, m.file_status, m.file_detail));
    (plugin, report)
}

fn plugin_frames_named(report: &knot::report::Report) -> bool {
    let funcs: Vec<&str> = report.threads.iter().flat_map(|t| t.frames.iter()).filter_map(|f| f.function.as_deref()).collect();
    funcs.contains(&"plugin_hold") && funcs.contains(&"plugin_wait") && report.locks.iter().any(|l| l.name.as_deref() == Some("plugin_lock"))
}

/// Issue 30, item 2: without NT_FILE the plugin is named as `dlopen` was given it,
/// `./librelative_plugin.so` (relative); it is looked for by its file name in `--search-dir`,
/// as gdb's `solib-search-path` does, and its frames and lock are named.
#[test]
fn a_relative_link_map_name_is_searched_by_file_name() {
    let dump = common::committed("relative_dlopen", DumpKind::Kernel);
    let (plugin, report) = plugin_reading("relative-without-nt-file", without_nt_file(&std::fs::read(&dump.core).unwrap()));
    let plugin = plugin.expect("the plugin is a module");
    assert!(plugin.starts_with("./librelative_plugin.so loaded"), "{plugin}");
    assert!(plugin_frames_named(&report), "{:#?}", report.threads);
}

/// Issue 30, item 2: NT_FILE paths made relative, as elfutils' `linkmap-cut.core` has them
/// (`.////////librelative_plugin.so`): each is still looked for by its file name in
/// `--search-dir`.
#[test]
fn relative_nt_file_paths_are_searched_by_file_name() {
    use dumpedit::*;
    let dump = common::committed("relative_dlopen", DumpKind::Kernel);
    let bytes = std::fs::read(&dump.core).unwrap();
    let files = Core::from_bytes("seed", bytes.clone()).unwrap().files.expect("NT_FILE");
    let relative: Vec<String> = files.iter().map(|f| format!(".////////{}", f.path.rsplit('/').next().unwrap_or_default())).collect();
    let entries: Vec<(u64, u64, u64, &str)> = files.iter().zip(&relative).map(|(f, p)| (f.start, f.end, f.file_offset / 4096, p.as_str())).collect();
    let notes: Vec<_> = note_list(&bytes).into_iter().map(|(n, k, d)| if k == NT_FILE { (n, k, encode_nt_file(&entries)) } else { (n, k, d) }).collect();
    let (plugin, report) = plugin_reading("relative-nt-file", with_notes(&bytes, &notes));
    let plugin = plugin.expect("the plugin is a module");
    assert!(plugin.starts_with(".////////librelative_plugin.so loaded"), "{plugin}");
    assert!(plugin_frames_named(&report), "{:#?}", report.threads);
}

/// elfutils' own `tests/linkmap-cut.core` (NT_FILE names relativized to `.///…///name`, the
/// link map cut after the program), read with its files in one directory, when they are at
/// hand: `KNOT_ELFUTILS_TESTS=DIR` holding `linkmap-cut`, `linkmap-cut-lib.so` and
/// `linkmap-cut.core` unpacked (GPL test data, not committed). elfutils' `stack` reads
/// `#0 libfunc` in the library and `#1 main` in the program.
#[test]
fn elfutils_linkmap_cut_core_finds_its_library_by_name() {
    let Some(dir) = std::env::var_os("KNOT_ELFUTILS_TESTS").map(std::path::PathBuf::from).filter(|d| d.join("linkmap-cut.core").is_file()) else {
        knot_samples::skipped("skipped: KNOT_ELFUTILS_TESTS names no directory holding elfutils' linkmap-cut.core");
        return;
    };
    let opts = knot::Options {
        locator: knot::process::Locator { search_dirs: vec![dir.clone()], executable: Some(dir.join("linkmap-cut")), no_default_debug_dir: true, ..Default::default() },
        ..Default::default()
    };
    let report = knot::analyze(dir.join("linkmap-cut.core"), &opts).expect("reads");
    let lib = report.modules.iter().find(|m| m.path.ends_with("linkmap-cut-lib.so")).expect("the library is a module");
    assert_eq!(lib.file_status, "loaded", "{lib:?}");
    let crashed = report.threads.iter().find(|t| t.frames.first().and_then(|f| f.function.as_deref()) == Some("libfunc"));
    assert!(crashed.is_some_and(|t| t.frames.get(1).and_then(|f| f.function.as_deref()) == Some("main")), "{:#?}", report.threads);
}

/// Issue 30, item 1, on elfutils' own `tests/test-core.core` (when `KNOT_ELFUTILS_TESTS=DIR`
/// holds it unpacked, with `test-core.exec` and `test-core-lib.so`): its library's two PT_LOADs
/// both map file offset 0 and the dump holds the first page only at the data's, 2 MiB above the
/// base; the base is kept, and the crash is in `libfunc` (elfutils' `addr2line` names it).
#[test]
fn elfutils_test_core_keeps_the_library_at_its_base() {
    let Some(dir) = std::env::var_os("KNOT_ELFUTILS_TESTS").map(std::path::PathBuf::from).filter(|d| d.join("test-core.core").is_file()) else {
        knot_samples::skipped("skipped: KNOT_ELFUTILS_TESTS names no directory holding elfutils' test-core.core");
        return;
    };
    let opts = knot::Options {
        locator: knot::process::Locator { search_dirs: vec![dir.clone()], executable: Some(dir.join("test-core.exec")), no_default_debug_dir: true, ..Default::default() },
        ..Default::default()
    };
    let report = knot::analyze(dir.join("test-core.core"), &opts).expect("reads");
    assert!(!report.diagnostics.iter().any(|d| d.message.contains("contradicts")), "{:#?}", report.diagnostics);
    let lib = report.modules.iter().find(|m| m.path.ends_with("test-core-lib.so")).expect("the library is a module");
    assert_eq!((lib.file_status.as_str(), lib.start.0), ("loaded", 0x7f67_f2aa_f000), "{lib:?}");
    let crash = report.crash.as_ref().expect("a crash");
    let c = serde_json::to_value(crash).expect("crash serializes");
    assert_eq!(c["origin"]["function"].as_str(), Some("libfunc"), "{c:#}");
}
