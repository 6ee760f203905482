//! Cores from elsewhere (issue 20): what cores written by other kernels and dumpers, or read
//! without all their files, look like — made here from the committed samples by dropping or
//! rewriting notes, hiding a library's file and header, or taking the program's unwind tables
//! away — and what knot must read from them.

mod common;
mod dumpedit;

use dumpedit::*;
use knot::{report_for, Options};
use knot::core::Core;
use knot::process::{Locator, Process};
use knot::report::text::{render, TextOptions};
use knot::report::Report;
use knot_samples::{DumpKind, SampleDump};
use std::path::{Path, PathBuf};

const NT_SIGINFO: u32 = 0x5349_4749;
const AT_EXECFN: u64 = 31;

fn sample(name: &str) -> SampleDump {
    common::committed(name, DumpKind::Kernel)
}

fn bytes(d: &SampleDump) -> Vec<u8> {
    std::fs::read(&d.core).expect("read the committed core")
}

/// A scratch directory for files this test writes.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("elsewhere").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

fn report_with(core: Vec<u8>, locator: Locator) -> Report {
    let core = Core::from_bytes("made.core", core).expect("the made core reads");
    let options = Options { locator, ..Options::default() };
    let process = Process::from_core(core, &options.locator);
    report_for(&process, &options)
}

fn report(core: Vec<u8>, d: &SampleDump) -> Report {
    report_with(core, common::options_for(d).locator)
}

fn text(r: &Report) -> String {
    render(r, &TextOptions::default())
}

fn without_notes(core: &[u8], kinds: &[u32]) -> Vec<u8> {
    let list: Vec<_> = note_list(core).into_iter().filter(|(_, kind, _)| !kinds.contains(kind)).collect();
    with_notes(core, &list)
}

/// NT_FILE's entries: (start, end, file offset in bytes, path).
fn nt_file_entries(core: &[u8]) -> Vec<(u64, u64, u64, String)> {
    let desc = notes_of_kind(core, NT_FILE).remove(0).desc;
    let count = u64_at(&desc, 0) as usize;
    let page = u64_at(&desc, 8);
    let mut names = desc[16 + count * 24..].split(|&b| b == 0).map(|s| String::from_utf8_lossy(s).into_owned());
    (0..count)
        .map(|i| {
            let at = 16 + i * 24;
            (u64_at(&desc, at), u64_at(&desc, at + 8), u64_at(&desc, at + 16) * page, names.next().unwrap_or_default())
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// 1. The signal of a core without NT_SIGINFO.

#[test]
fn without_nt_siginfo_the_signal_and_the_crashed_thread_come_from_pr_cursig() {
    let d = sample("crash_null");
    let original = report(bytes(&d), &d);
    let with_siginfo = original.crash.as_ref().expect("the committed dump reads as a crash");
    let made = without_notes(&bytes(&d), &[NT_SIGINFO]);
    assert!(notes_of_kind(&made, NT_SIGINFO).is_empty());
    let r = report(made, &d);

    let sig = r.dump.signal.as_ref().expect("the signal is read from pr_cursig");
    assert_eq!((sig.number, sig.name.as_str(), sig.code), (11, "SIGSEGV", None));
    assert_eq!(sig.source, knot::core::SignalSource::Prstatus);
    let crash = r.crash.as_ref().expect("the crash is read from pr_cursig");
    assert_eq!(crash.kind, knot::report::CrashKind::Fault);
    assert_eq!(crash.thread, with_siginfo.thread, "the crashed thread is the one NT_SIGINFO named");
    assert_eq!(crash.signal.as_ref().map(|s| (s.code, s.code_name.clone())), Some((None, None)), "the code is unknown, not made up");
    // The address the instruction read, from its operand, as for a fault the kernel gives no address for.
    assert_eq!(crash.address.map(|a| a.0), Some(0x2c));
    assert_eq!(crash.instruction.as_ref().map(|i| i.address), with_siginfo.instruction.as_ref().map(|i| i.address));
    let t = text(&r);
    let first = t.lines().next().unwrap_or_default();
    assert!(first.contains(", SIGSEGV (from pr_cursig: code and address unknown)"), "{first}");
    assert!(t.contains("Crash: fault — SIGSEGV (no NT_SIGINFO: code and address unknown) on thread"), "{t}");
    assert!(r.diagnostics.iter().any(|d| d.message.contains("no NT_SIGINFO")), "{:#?}", r.diagnostics);
}

// ---------------------------------------------------------------------------------------------
// The header's plurals.

#[test]
fn the_header_says_1_thread_and_1_module() {
    let d = sample("abba");
    let core = bytes(&d);
    // One thread: the other two NT_PRSTATUS notes (and the notes that follow them) go.
    let mut list = note_list(&core);
    let second = list.iter().enumerate().filter(|(_, (_, kind, _))| *kind == NT_PRSTATUS).nth(1).map(|(i, _)| i).expect("3 threads");
    list.truncate(second);
    let one = with_notes(&core, &list);
    let r = report(one, &d);
    assert_eq!(r.threads.len(), 1);
    let first = text(&r).lines().next().unwrap_or_default().to_string();
    assert!(first.contains("; 1 thread, ") && !first.contains("1 threads"), "{first}");
    assert!(first.contains(&format!("{} modules", r.modules.len())), "{first}");
    let html = knot::report::html::render(&r);
    assert!(html.contains("; 1 thread, "), "the HTML header too");
}

// ---------------------------------------------------------------------------------------------
// 2. A library whose file is absent and whose ELF header is not in the dump.

#[test]
fn a_library_without_file_or_header_stays_a_module_and_its_frames_have_no_symbols() {
    let d = sample("abba");
    let core = bytes(&d);
    let libc = nt_file_entries(&core).into_iter().filter(|e| e.3.ends_with("libc.so.6")).collect::<Vec<_>>();
    let base = libc.iter().find(|e| e.2 == 0).expect("libc's first mapping").0;
    let libc_end = libc.iter().map(|e| e.1).max().unwrap_or(0);
    // The dynamic linker's map is all that names it: no NT_FILE; and the page holding its ELF
    // header is left out of the dump, as a dumper that saves no file-backed page would.
    let mut made = without_notes(&core, &[NT_FILE]);
    let header = loads(&made).into_iter().find(|p| p.vaddr == base).expect("a segment starts at libc's header");
    put_u64(&mut made, header.at + Phdr::P_FILESZ, 0);
    let sysroot = scratch("no-libc");
    let locator = Locator { sysroot: Some(sysroot), no_default_debug_dir: true, executable: Some(d.binary.clone()), ..Locator::default() };
    let r = report_with(made, locator);

    let m = r.modules.iter().find(|m| m.path.ends_with("libc.so.6")).unwrap_or_else(|| panic!("libc stays a module: {:#?}", r.modules));
    assert_eq!(m.start.0, base);
    assert!(m.end.0 >= libc_end.min(m.end.0) && m.end.0 > base + 0x1000, "its range runs over its mappings: {m:#?}");
    assert!(libc.iter().all(|e| e.1 <= m.end.0), "every libc mapping of NT_FILE lies in the module's range {m:#?}");
    assert_eq!(m.file_status, "missing");
    assert_eq!(m.build_id, None);
    let worker = r.threads.iter().find(|t| t.tid != r.threads[0].tid).expect("a worker thread");
    let f0 = &worker.frames[0];
    assert_eq!(f0.module.as_deref(), Some("libc.so.6"), "frame #0 has its module: {f0:#?}");
    assert!(f0.no_symbols && f0.function.is_none(), "{f0:#?}");
    assert!(text(&r).contains("[libc.so.6] (no symbols)"));
}

// ---------------------------------------------------------------------------------------------
// 3. The program without NT_FILE, and NT_FILE naming it `[executable]`.

fn exe_module(r: &Report) -> &knot::report::ModuleReport {
    r.modules.iter().find(|m| m.path_source.is_some()).unwrap_or_else(|| panic!("the program's module says where its name came from: {:#?}", r.modules))
}

#[test]
fn without_nt_file_the_program_is_named_from_exe_else_auxv_else_prpsinfo() {
    let d = sample("abba");
    let made = without_notes(&bytes(&d), &[NT_FILE]);

    // --exe given: its path, and its symbols.
    let r = report(made.clone(), &d);
    let m = exe_module(&r);
    assert_eq!((m.path.as_str(), m.path_source.as_deref(), m.file_status.as_str()), (d.binary.to_str().unwrap(), Some("exe_option"), "loaded"));
    let main = &r.threads[0];
    assert!(main.frames.iter().any(|f| f.function.as_deref() == Some("main") && f.module.as_deref() == Some("abba")), "{:#?}", main.frames);

    // No --exe: AT_EXECFN, the path the kernel was given.
    let mut locator = common::options_for(&d).locator;
    locator.executable = None;
    let r = report_with(made.clone(), locator.clone());
    let m = exe_module(&r);
    assert_eq!(m.path_source.as_deref(), Some("auxv_execfn"));
    assert!(m.path.ends_with("/abba"), "{m:#?}");

    // AT_EXECFN's string blank: NT_PRPSINFO's command line.
    let (_, execfn) = auxv_entry(&made, AT_EXECFN).expect("AT_EXECFN");
    let mut blank = made.clone();
    poke(&mut blank, execfn, &[0]);
    let r = report_with(blank, locator);
    let m = exe_module(&r);
    assert_eq!(m.path_source.as_deref(), Some("prpsinfo"));
    assert!(m.path.ends_with("abba") && !m.path.is_empty(), "{m:#?}");
    assert!(!text(&r).contains(" []"), "no module without a name");
}

#[test]
fn nt_file_naming_the_program_executable_is_not_opened() {
    let d = sample("abba");
    let core = bytes(&d);
    let exe_path = nt_file_entries(&core).into_iter().find(|e| e.3.ends_with("/abba")).expect("the program in NT_FILE").3;
    let entries: Vec<(u64, u64, u64, String)> =
        nt_file_entries(&core).into_iter().map(|(s, e, off, p)| (s, e, off / 4096, if p == exe_path { "[executable]".to_string() } else { p })).collect();
    let borrowed: Vec<(u64, u64, u64, &str)> = entries.iter().map(|(s, e, o, p)| (*s, *e, *o, p.as_str())).collect();
    let list: Vec<_> = note_list(&core).into_iter().map(|(n, k, desc)| if k == NT_FILE { (n, k, encode_nt_file(&borrowed)) } else { (n, k, desc) }).collect();
    let made = with_notes(&core, &list);

    // A file of that name under the sysroot would be opened if the name were taken for a path.
    let sysroot = scratch("executable");
    copy_dir(d.sysroot.as_deref().expect("the committed sysroot"), &sysroot);
    std::fs::copy(&d.binary, sysroot.join("[executable]")).expect("copy");
    let mut locator = common::options_for(&d).locator;
    locator.sysroot = Some(sysroot.clone());
    locator.executable = None;
    locator.search_dirs.clear();
    let r = report_with(made.clone(), locator.clone());
    let m = exe_module(&r);
    assert_eq!(m.path_source.as_deref(), Some("auxv_execfn"), "{m:#?}");
    assert!(m.path.ends_with("/abba"));
    assert!(!m.file_detail.as_deref().unwrap_or("").contains("[executable]"), "{m:#?}");
    assert!(r.modules.iter().all(|m| m.path != "[executable]"));

    // With --exe, the program is that file.
    locator.executable = Some(d.binary.clone());
    let r = report_with(made, locator);
    let m = exe_module(&r);
    assert_eq!((m.path_source.as_deref(), m.file_status.as_str()), (Some("exe_option"), "loaded"));
}

fn copy_dir(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).expect("read dir").flatten() {
        let target = to.join(e.file_name());
        let meta = std::fs::metadata(e.path()).expect("stat");
        if meta.is_dir() {
            std::fs::create_dir_all(&target).expect("mkdir");
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).expect("copy");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 4–6 and issue 12 item 6: stacks without unwind tables.

/// The sample's program with its unwind tables taken away (`.eh_frame` and `.eh_frame_hdr`
/// renamed: a build without CFI), build-id unchanged, in a scratch directory.
fn without_cfi(d: &SampleDump) -> PathBuf {
    let dir = scratch(&format!("nocfi-{}", d.name));
    let bytes = std::fs::read(&d.binary).expect("read the binary");
    let name = b".eh_frame";
    let mut out = bytes.clone();
    let mut renamed = 0;
    for at in 0..bytes.len().saturating_sub(name.len()) {
        if &bytes[at..at + name.len()] == name {
            out[at + 1..at + 3].copy_from_slice(b"no");
            renamed += 1;
        }
    }
    assert!(renamed >= 2, "the binary has .eh_frame and .eh_frame_hdr");
    let path = dir.join(d.binary.file_name().expect("a file name"));
    std::fs::write(&path, out).expect("write");
    path
}

/// The sample read with its libraries' files absent (an empty sysroot, no debug directory).
fn without_libraries(d: &SampleDump, name: &str) -> Locator {
    Locator { sysroot: Some(scratch(name)), no_default_debug_dir: true, executable: Some(d.binary.clone()), ..Locator::default() }
}

fn names(t: &knot::report::ThreadReport) -> Vec<&str> {
    t.frames.iter().map(|f| f.function.as_deref().unwrap_or("??")).collect()
}

#[test]
fn a_stack_reaching_the_entry_point_is_complete() {
    let d = sample("abba");
    let mut locator = common::options_for(&d).locator;
    locator.executable = Some(without_cfi(&d));
    locator.search_dirs.clear();
    let r = report_with(bytes(&d), locator);
    let main = r.threads.iter().find(|t| names(t).contains(&"main")).expect("the main thread");
    assert_eq!(names(main).last().copied(), Some("_start"), "{:?}", names(main));
    assert_eq!(main.stack_end.reason, "entry_point", "{:#?}", main.stack_end);
    assert!(main.stack_end.complete, "{:#?}", main.stack_end);
    assert!(!text(&r).contains("stack incomplete"), "{}", text(&r));
}

#[test]
fn frames_a_frame_pointer_step_skips_are_kept_as_scanned() {
    let d = sample("abba");
    let r = report_with(bytes(&d), without_libraries(&d, "fp-skip"));
    for (worker, tid) in [("worker_ab", 11398), ("worker_ba", 11399)] {
        let t = r.threads.iter().find(|t| t.tid == tid).expect("the worker");
        // libc has no file and no CFI: the %rbp chain leads from frame #0 in libc straight to
        // start_thread, over the worker's own frame, whose return address is on the stack.
        let f = t.frames.iter().find(|f| f.function.as_deref() == Some(worker)).unwrap_or_else(|| panic!("{worker} is kept: {:?}", names(t)));
        assert_eq!(f.trust, knot::report::Trust::Scan);
        assert!(!t.stack_end.complete && t.stack_end.scanned_frames >= 1, "{:#?}", t.stack_end);
    }
}

#[test]
fn a_stack_that_needed_scanning_is_never_complete_and_says_how_many_frames_were_scanned() {
    let d = sample("abba");
    let r = report_with(bytes(&d), without_libraries(&d, "scanned"));
    let main = r.threads.iter().find(|t| t.tid == 11396).expect("the main thread");
    assert!(names(main).contains(&"main"), "{:?}", names(main));
    let scanned = main.frames.iter().filter(|f| f.trust == knot::report::Trust::Scan).count();
    assert!(scanned >= 1);
    assert!(!main.stack_end.complete, "{:#?}", main.stack_end);
    assert_eq!(main.stack_end.scanned_frames, scanned);
    let mut shown = String::new();
    knot::report::text::thread(&mut shown, main, &r.locks, None);
    assert!(shown.contains(&format!("(stack incomplete: {scanned} frame{} found by scanning the stack", if scanned == 1 { "" } else { "s" })), "{shown}");
}

#[test]
fn a_scan_never_takes_an_address_in_a_thread_stack_even_an_executable_one() {
    let d = sample("abba");
    let mut core = bytes(&d);
    let rsp = register(&core, 0, REG_RSP);
    assert_eq!(prstatus(&core, 0).desc.get(32..36).map(|b| u32::from_le_bytes(b.try_into().unwrap())), Some(11396));
    let stack = load_holding(&core, rsp);
    // The stack mapped read-write-execute, and at [rsp] a word pointing into it, just after
    // bytes that look like a call: what a scan could take for a return address.
    put_u32(&mut core, stack.at + 4, stack.flags | PF_X);
    let fake = (rsp - 0x200) & !0xf;
    poke(&mut core, fake - 5, &[0xe8, 0, 0, 0, 0]);
    poke_u64(&mut core, rsp, fake);
    let r = report_with(core, without_libraries(&d, "rwx"));
    let main = r.threads.iter().find(|t| t.tid == 11396).expect("the main thread");
    for f in &main.frames {
        assert!(!stack.contains(f.ip.0) || f.index == 0, "frame #{} at {:#x} is in the thread's stack: {:?}", f.index, f.ip.0, names(main));
    }
    assert!(names(main).contains(&"main"), "{:?}", names(main));
}

#[test]
fn a_scanned_return_address_whose_cfi_disagrees_is_stale() {
    let d = sample("abba");
    let mut core = bytes(&d);
    let original = report(core.clone(), &d);
    let main = original.threads.iter().find(|t| t.tid == 11396).expect("the main thread");
    // A real return address into libc (after a call, with CFI whose CFA is %rsp-based): put
    // at the wrong place it unwinds to a caller that is no code.
    let clockjoin = main.frames.iter().find(|f| f.function.as_deref() == Some("__libc_start_call_main")).expect("__libc_start_call_main's frame").ip.0;
    let main_fn = main.frames.iter().find(|f| f.function.as_deref() == Some("main")).expect("main").ip.0;
    // Frame #0 in the program's code, which has no CFI here, and no frame pointer.
    set_register(&mut core, 0, REG_RIP, main_fn);
    set_register(&mut core, 0, REG_RBP, 0);
    let rsp = register(&core, 0, REG_RSP);
    poke_u64(&mut core, rsp, clockjoin);
    let mut locator = common::options_for(&d).locator;
    locator.executable = Some(without_cfi(&d));
    locator.search_dirs.clear();
    let r = report_with(core, locator);
    let main = r.threads.iter().find(|t| t.tid == 11396).expect("the main thread");
    assert_ne!(main.frames.get(1).map(|f| f.ip.0), Some(clockjoin), "the stale word is no frame: {:?}", names(main));
    assert!(names(main).contains(&"__pthread_clockjoin_ex"), "the scan goes on to the real return address: {:?}", names(main));
}
