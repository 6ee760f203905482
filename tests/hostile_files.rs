//! Files a hostile dump names (issue 13, items 3 and 4), made here from the committed kernel
//! dump of `abba`: an NT_FILE entry naming a FIFO, a device, a path climbing out of `--sysroot`
//! with `..` or through a symlink, and an entry that places libc where the dump has no memory.
//! knot opens only regular files, never blocks, never leaves the sysroot, and refuses an entry
//! that contradicts the dump's own memory, with a warning and a partial reading.

mod common;
mod dumpedit;

use dumpedit::*;
use knot::Options;
use knot::core::Core;
use knot::process::{Locator, Process};
use knot::report::{Report, Verdict};
use knot_samples::{DumpKind, SampleDump};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

fn sample() -> SampleDump {
    common::committed("abba", DumpKind::Kernel)
}

fn seed() -> Vec<u8> {
    std::fs::read(&sample().core).expect("read the abba kernel core")
}

/// The seed's NT_FILE entries as (start, end, offset in pages, path).
fn nt_file_entries(core: &[u8]) -> Vec<(u64, u64, u64, String)> {
    let files = Core::from_bytes("seed.core", core.to_vec()).expect("the seed reads").files.expect("the seed's NT_FILE parses");
    files.into_iter().map(|m| (m.start, m.end, m.file_offset / 4096, m.path)).collect()
}

/// The seed with `extra` NT_FILE entries after its own.
fn with_extra_files(extra: &[(u64, u64, u64, &str)]) -> Vec<u8> {
    let core = seed();
    let entries = nt_file_entries(&core);
    let mut all: Vec<(u64, u64, u64, &str)> = entries.iter().map(|(s, e, o, p)| (*s, *e, *o, p.as_str())).collect();
    all.extend_from_slice(extra);
    let notes: Vec<_> = note_list(&core).into_iter().map(|(n, k, d)| if k == NT_FILE { (n, k, encode_nt_file(&all)) } else { (n, k, d) }).collect();
    with_notes(&core, &notes)
}

/// A segment of the seed that holds memory but no file (the heap or a stack): an NT_FILE entry
/// placed there agrees with the dump's segments, so only the file itself decides.
fn anonymous_segment(core: &[u8]) -> (u64, u64) {
    let files = nt_file_entries(core);
    let p = loads(core)
        .into_iter()
        .find(|p| p.filesz >= 4096 && p.vaddr < 0x8000_0000_0000 && !files.iter().any(|(s, e, ..)| p.vaddr < *e && *s < p.vaddr + p.memsz))
        .expect("an anonymous segment");
    (p.vaddr, p.vaddr + 4096)
}

/// The report, or a failure when the analysis does not end within a minute (a blocked open).
fn analyze_within_a_minute(bytes: Vec<u8>, locator: Locator) -> Report {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let process = Process::from_core(Core::from_bytes("hostile-core", bytes).expect("still a core"), &locator);
        let _ = tx.send(knot::report_for(&process, &Options { locator: locator.clone(), ..Options::default() }));
    });
    rx.recv_timeout(Duration::from_secs(60)).expect("knot did not finish within a minute: an open blocked")
}

fn warnings(r: &Report) -> Vec<String> {
    r.diagnostics.iter().filter(|d| d.severity == knot::Severity::Warning).map(|d| d.message.clone()).collect()
}

fn loaded_paths(r: &Report) -> Vec<String> {
    r.modules.iter().filter(|m| m.file_status == "loaded").filter_map(|m| m.file_detail.clone()).collect()
}

/// A scratch directory with `sysroot/` and, beside it, `outside/` holding an ELF file (a copy of
/// the abba program) that a path escaping the sysroot would reach.
fn scratch(name: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::Builder::new().prefix(&format!("knot-hostile-{name}-")).tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch dir");
    let sysroot = dir.path().join("sysroot");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(sysroot.join("lib")).expect("sysroot");
    std::fs::create_dir_all(&outside).expect("outside");
    std::fs::copy(&sample().binary, outside.join("secret.so")).expect("the outside ELF file");
    (dir, sysroot, outside)
}

fn locator_in(sysroot: &Path) -> Locator {
    Locator { sysroot: Some(sysroot.to_path_buf()), no_default_debug_dir: true, ..Locator::default() }
}

#[test]
fn an_nt_file_path_naming_a_fifo_is_refused_without_blocking() {
    let (_dir, sysroot, _) = scratch("fifo");
    let fifo = sysroot.join("lib/evil.so");
    let c = std::ffi::CString::new(fifo.to_str().expect("utf-8 path")).expect("path");
    // SAFETY: mkfifo on a NUL-terminated path we own.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    let (start, end) = anonymous_segment(&seed());
    let r = analyze_within_a_minute(with_extra_files(&[(start, end, 0, "/lib/evil.so")]), locator_in(&sysroot));
    let w = warnings(&r);
    assert!(w.iter().any(|m| m.contains("/lib/evil.so") && m.contains("a FIFO")), "{w:#?}");
    assert!(r.dump.partial);
}

/// Issue 30, item 13: the FIFO is not even opened. A writer blocked in `open(O_WRONLY)` on it
/// returns only when a reader opens it: knot must never be that reader.
#[test]
fn an_nt_file_path_naming_a_fifo_is_never_opened() {
    let (_dir, sysroot, _) = scratch("fifo-writer");
    let fifo = sysroot.join("lib/evil.so");
    let c = std::ffi::CString::new(fifo.to_str().expect("utf-8 path")).expect("path");
    // SAFETY: mkfifo on a NUL-terminated path we own.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    let (tx, rx) = mpsc::channel();
    let writer_path = fifo.clone();
    let writer = std::thread::spawn(move || {
        let _ = tx.send(std::fs::OpenOptions::new().write(true).open(&writer_path).is_ok());
    });
    std::thread::sleep(Duration::from_millis(100));
    let (start, end) = anonymous_segment(&seed());
    let r = analyze_within_a_minute(with_extra_files(&[(start, end, 0, "/lib/evil.so")]), locator_in(&sysroot));
    let unblocked = rx.recv_timeout(Duration::from_millis(300)).is_ok();
    // Let the writer go whatever happened.
    let _reader = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&fifo).expect("open the FIFO to release its writer");
    writer.join().expect("writer thread");
    assert!(!unblocked, "knot opened the FIFO the dump names (its blocked writer was let go)");
    assert!(warnings(&r).iter().any(|m| m.contains("/lib/evil.so") && m.contains("a FIFO")));
}

/// A character device outside `/dev` (a copy of `/dev/null`'s numbers, under the sysroot) is
/// refused by its type, learnt without opening it. Skipped where mknod is not permitted.
#[test]
fn an_nt_file_path_naming_a_device_outside_dev_is_refused() {
    let (_dir, sysroot, _) = scratch("mknod");
    let dev = sysroot.join("lib/null.so");
    let c = std::ffi::CString::new(dev.to_str().expect("utf-8 path")).expect("path");
    // SAFETY: mknod on a NUL-terminated path we own; (1, 3) is /dev/null's device number.
    if unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 3)) } != 0 {
        knot_samples::skipped(&format!("skipped: mknod of a device under the sysroot is not permitted here: {}", std::io::Error::last_os_error()));
        return;
    }
    let (start, end) = anonymous_segment(&seed());
    let r = analyze_within_a_minute(with_extra_files(&[(start, end, 0, "/lib/null.so")]), locator_in(&sysroot));
    let w = warnings(&r);
    assert!(w.iter().any(|m| m.contains("/lib/null.so") && m.contains("character device")), "{w:#?}");
}

#[test]
fn an_nt_file_path_naming_a_device_is_never_opened() {
    let (start, end) = anonymous_segment(&seed());
    // No sysroot: the path is the machine's own /dev/zero.
    let r = analyze_within_a_minute(with_extra_files(&[(start, end, 0, "/dev/zero")]), Locator { no_default_debug_dir: true, ..Locator::default() });
    let w = warnings(&r);
    assert!(w.iter().any(|m| m.contains("/dev/zero") && m.contains("device")), "{w:#?}");
    assert!(!loaded_paths(&r).iter().any(|p| p.starts_with("/dev")));
}

#[test]
fn dot_dot_in_an_nt_file_path_stays_under_the_sysroot() {
    let (dir, sysroot, outside) = scratch("dotdot");
    let (start, end) = anonymous_segment(&seed());
    let climb = format!("/../../{}/secret.so", outside.file_name().and_then(|n| n.to_str()).expect("name"));
    let r = analyze_within_a_minute(with_extra_files(&[(start, end, 0, &climb)]), locator_in(&sysroot));
    let loaded = loaded_paths(&r);
    assert!(!loaded.iter().any(|p| p.contains("secret.so")), "a file outside the sysroot was read: {loaded:#?}");
    // Looked for as a chroot would: `/outside/secret.so` under the sysroot, where there is none.
    let inside = sysroot.join(outside.file_name().expect("name")).join("secret.so");
    let w = warnings(&r);
    assert!(w.iter().any(|m| m.contains(&climb) && m.contains(&inside.display().to_string())), "{w:#?}");
    drop(dir);
}

#[test]
fn a_symlink_out_of_the_sysroot_is_refused() {
    let (_dir, sysroot, outside) = scratch("symlink");
    std::os::unix::fs::symlink(outside.join("secret.so"), sysroot.join("lib/link.so")).expect("symlink");
    let (start, end) = anonymous_segment(&seed());
    let r = analyze_within_a_minute(with_extra_files(&[(start, end, 0, "/lib/link.so")]), locator_in(&sysroot));
    let w = warnings(&r);
    assert!(w.iter().any(|m| m.contains("/lib/link.so") && m.contains("leads outside the sysroot")), "{w:#?}");
    assert!(!loaded_paths(&r).iter().any(|p| p.contains("secret.so")));
}

#[test]
fn an_nt_file_entry_placing_libc_where_the_dump_has_no_memory_is_refused() {
    let core = seed();
    let libc = nt_file_entries(&core).into_iter().find(|(.., p)| p.contains("libc.so")).expect("libc in NT_FILE").3;
    let options = common::options_for(&sample());
    let before = knot::analyze(&sample().core, &options).expect("the seed reads");
    assert_eq!(before.verdict, Verdict::Deadlock);
    let unmapped = 0x1000_0000u64;
    assert!(loads(&core).iter().all(|p| !p.contains(unmapped)), "the address is unmapped in the seed");
    let bytes = with_extra_files(&[(unmapped, unmapped + 0x28000, 0, &libc)]);
    let r = analyze_within_a_minute(bytes, options.locator.clone());
    let w = warnings(&r);
    assert!(w.iter().any(|m| m.contains("contradicts the dump's memory") && m.contains(&libc)), "{w:#?}");
    assert_eq!(r.verdict, Verdict::Deadlock, "the refused entry must not move libc");
    let m = r.modules.iter().find(|m| m.path == libc).expect("libc");
    assert_ne!(m.start.0, unmapped);
    assert!(r.dump.partial);
}

// Issue 13, item 5: the core shrinks while knot reads it (its producer rewrites it, a watcher's
// dump is truncated): reads past the new end would raise SIGBUS; knot ends with a clean error.

/// The abba kernel core copied into a scratch file, with the options to read it.
fn scratch_core(name: &str) -> (tempfile::TempDir, PathBuf, Options) {
    let dir = tempfile::Builder::new().prefix(&format!("knot-hostile-{name}-")).tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch dir");
    let core = dir.path().join("core");
    std::fs::write(&core, seed()).expect("copy the core");
    (dir, core, common::options_for(&sample()))
}

#[test]
fn a_core_truncated_after_it_was_opened_reads_as_changed_not_a_crash() {
    let (_dir, core, options) = scratch_core("truncated");
    let process = Process::open(&core, &options.locator).expect("the core opens");
    // Keep the headers and notes (read at open); cut every stack page away.
    std::fs::OpenOptions::new().write(true).open(&core).expect("open for truncation").set_len(8192).expect("truncate");
    let report = knot::report_for(&process, &options);
    assert!(process.core.changed_while_read(), "knot did not notice the file shrank");
    assert_eq!(report.threads.len(), 3, "the threads from the notes are still there");
}

#[test]
fn a_core_truncated_while_knot_reads_it_is_a_clean_error() {
    let (_dir, core, mut options) = scratch_core("truncating");
    let path = core.clone();
    // Truncated as the stack walk starts: after the open, before the stacks are read.
    options.progress = Some(knot::Progress(std::sync::Arc::new(move |phase| {
        if phase == knot::Phase::Stacks {
            let _ = std::fs::OpenOptions::new().write(true).open(&path).and_then(|f| f.set_len(4096));
        }
    })));
    match knot::analyze(&core, &options) {
        Err(e) => assert!(e.to_string().contains("shrank while knot read it"), "{e}"),
        Ok(r) => panic!("a report from a truncated core: {:?}", r.verdict),
    }
}
