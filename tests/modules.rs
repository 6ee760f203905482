//! Finding the modules and their files: by NT_FILE, by the dynamic linker's list when the core
//! has no NT_FILE, and refusing a file that is not the build that ran.

mod common;

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
