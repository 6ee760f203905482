//! Verdicts never change silently (issue 12, item 8): a verdict reached without the facts it
//! needs says so — `verdict_limits[]` in JSON, "limited by" on the text's verdict line, one line
//! on stderr — and `--stacks-only` gives no verdict at all. Read on the committed ABBA deadlock
//! (dumped by the kernel) with a wrong `--sysroot`, and on a committed .NET dump without its
//! `libcoreclr.so`.

mod common;

use knot::Options;
use knot::process::Locator;
use knot::report::Verdict;
use knot_samples::{DumpKind, SampleDump};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn empty_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("verdict-limits-empty-sysroot");
    std::fs::create_dir_all(&d).expect("empty dir");
    d
}

/// The abba dump read as gdb reads it, but with a sysroot that holds none of its libraries.
fn wrong_sysroot(d: &SampleDump) -> Options {
    let mut o = common::options_for(d);
    o.locator.sysroot = Some(empty_dir());
    o
}

fn knot(dump: &SampleDump, sysroot: &Path, extra: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_knot"));
    cmd.arg("analyze").arg(&dump.core).arg("--exe").arg(&dump.binary).arg("--sysroot").arg(sysroot);
    if let Some(d) = &dump.debug_dir {
        cmd.arg("--debug-dir").arg(d);
    }
    cmd.args(extra).output().expect("run knot")
}

#[test]
fn the_abba_deadlock_with_its_sysroot_has_no_limits() {
    let abba = common::committed("abba", DumpKind::Kernel);
    let r = common::analyze(&abba);
    assert_eq!(r.verdict, Verdict::Deadlock);
    assert!(r.verdict_limits.is_empty(), "{:?}", r.verdict_limits);
}

#[test]
fn a_wrong_sysroot_limits_the_verdict_and_names_the_fix() {
    let abba = common::committed("abba", DumpKind::Kernel);
    let r = knot::analyze(&abba.core, &wrong_sysroot(&abba)).expect("read");
    // Without libc's CFI the frames that name the mutexes are lost: no cycle can be seen, and
    // the verdict must say that it is limited, not read as a confident CONTENTION.
    assert_ne!(r.verdict, Verdict::Deadlock);
    let libc = r.verdict_limits.iter().find(|l| l.missing.starts_with("libc.so.6")).unwrap_or_else(|| panic!("no libc limit: {:?}", r.verdict_limits));
    assert!(libc.fix.contains("--sysroot") && libc.fix.contains("--search-dir"), "{}", libc.fix);
    assert!(libc.hides.contains("owner"), "{}", libc.hides);

    let out = knot(&abba, &empty_dir(), &[]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    let verdict_line = text.lines().find(|l| l.starts_with("Verdict:")).expect("a verdict line");
    assert!(verdict_line.contains("limited by libc.so.6"), "{verdict_line}");
    let first_screen: Vec<&str> = text.lines().take(24).collect();
    assert!(first_screen.iter().any(|l| l.trim_start().starts_with("limited by libc.so.6") && l.contains("fix: --sysroot")), "{text}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said: Vec<&str> = stderr.lines().filter(|l| l.contains("limited")).collect();
    assert_eq!(said.len(), 1, "one line on stderr: {stderr}");
    assert!(said[0].contains("libc.so.6") && said[0].contains("--sysroot"), "{stderr}");

    let json = knot(&abba, &empty_dir(), &["--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    let limits = v["verdict_limits"].as_array().expect("verdict_limits[]");
    assert!(limits.iter().any(|l| l["missing"].as_str().is_some_and(|m| m.starts_with("libc.so.6")) && l["hides"].is_string() && l["fix"].is_string()), "{limits:?}");
}

#[test]
fn stacks_only_gives_no_verdict_and_refuses_fail_on_deadlock() {
    let abba = common::committed("abba", DumpKind::Kernel);
    let r = knot::analyze(&abba.core, &Options { stacks_only: true, ..common::options_for(&abba) }).expect("read");
    assert_eq!(r.verdict, Verdict::NotAnalyzed);
    let sysroot = abba.sysroot.clone().expect("committed sysroot");
    let out = knot(&abba, &sysroot, &["--stacks-only"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("Verdict:"), "{text}");
    assert!(!text.contains("IDLE"), "{text}");
    let refused = knot(&abba, &sysroot, &["--stacks-only", "--fail-on-deadlock"]);
    assert_eq!(refused.status.code(), Some(64), "{}", String::from_utf8_lossy(&refused.stderr));
}

fn gunzip(from: &Path, to: &Path) {
    if to.exists() {
        return;
    }
    let part = to.with_extension("part");
    let mut d = flate2::read::GzDecoder::new(std::fs::File::open(from).expect("open gz"));
    let mut o = std::fs::File::create(&part).expect("create");
    std::io::copy(&mut d, &mut o).expect("gunzip");
    std::fs::rename(&part, to).expect("rename");
}

#[test]
fn a_dotnet_dump_without_libcoreclr_says_the_runtime_was_not_read() {
    let root = knot_samples::dotnet::committed_root();
    let core = Path::new(env!("CARGO_TARGET_TMPDIR")).join("verdict-limits-monitor_abba-heap.core");
    gunzip(&root.join("monitor_abba/heap/core.gz"), &core);
    let app = root.join("monitor_abba/app");
    // A catalogued build (10.0.12) needs no file: knot's runtime catalogue stands in for it.
    let without = Locator { sysroot: Some(empty_dir()), search_dirs: vec![app.clone()], ..Locator::default() };
    let r = knot::analyze(&core, &Options { locator: without.clone(), ..Options::default() }).expect("read");
    assert_eq!(r.verdict, Verdict::Deadlock);
    assert!(r.verdict_limits.is_empty(), "{:?}", r.verdict_limits);
    // The same dump claiming a build no catalogue holds (its build-id note changed): not read,
    // and the verdict says so.
    let uncatalogued = Path::new(env!("CARGO_TARGET_TMPDIR")).join("verdict-limits-uncatalogued.core");
    let mut bytes = std::fs::read(&core).expect("read core");
    let id: Vec<u8> = (0..20).map(|i| u8::from_str_radix(&"79945f51fb2612f13b7667a10a8fd29122664791"[2 * i..2 * i + 2], 16).unwrap()).collect();
    let at: Vec<usize> = bytes.windows(20).enumerate().filter(|(_, w)| *w == id.as_slice()).map(|(i, _)| i).collect();
    assert!(!at.is_empty(), "the dump holds libcoreclr's build-id note");
    for i in at {
        for b in &mut bytes[i..i + 20] {
            *b ^= 0x5a;
        }
    }
    std::fs::write(&uncatalogued, &bytes).expect("write core");
    let r = knot::analyze(&uncatalogued, &Options { locator: without, ..Options::default() }).expect("read");
    std::fs::remove_file(&uncatalogued).ok();
    assert_ne!(r.verdict, Verdict::Deadlock);
    let l = r.verdict_limits.iter().find(|l| l.missing.contains(".NET runtime")).unwrap_or_else(|| panic!("no runtime limit: {:?}", r.verdict_limits));
    assert!(l.fix.contains("--search-dir") && l.fix.contains("libcoreclr.so"), "{}", l.fix);
    assert!(l.hides.contains("Monitors"), "{}", l.hides);

    let mut dirs = knot_samples::dotnet::runtime_dirs();
    dirs.push(app);
    let with = Locator { sysroot: Some(empty_dir()), search_dirs: dirs, ..Locator::default() };
    let r = knot::analyze(&core, &Options { locator: with, ..Options::default() }).expect("read");
    assert_eq!(r.verdict, Verdict::Deadlock);
    assert!(r.verdict_limits.is_empty(), "{:?}", r.verdict_limits);
}
