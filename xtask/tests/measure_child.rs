//! The bench's peak RSS is the tool's own: `xtask measure-child` reaps the tool from a small
//! process, so a big process starting it (the bench, after making a 2,000-thread core) does not
//! show through `ru_maxrss`, as it did when the bench forked the tools itself.

use std::process::Command;

/// Peak RSS (KiB) `xtask measure-child` reports for `argv`, started from this process.
fn measured_rss(argv: &[&str]) -> i64 {
    let err = std::env::temp_dir().join(format!("measure-child-{}.err", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_xtask")).arg("measure-child").arg("--stderr").arg(&err).arg("--").args(argv).output().expect("xtask runs");
    let _ = std::fs::remove_file(&err);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let line = String::from_utf8_lossy(&out.stdout);
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(fields.len(), 9, "{line:?}");
    assert_eq!(fields[7], "0", "exit code of {argv:?}");
    fields[1].parse().expect("KiB")
}

/// Child's `ru_maxrss` straight from wait4 of a process started by this one.
fn direct_rss(argv: &[&str]) -> i64 {
    let mut child = Command::new(argv[0]).args(&argv[1..]).spawn().expect("starts");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: a zeroed rusage is valid; pid is our unreaped child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; pointers to live locals.
    assert_eq!(unsafe { libc::wait4(pid, &mut status, 0, &mut ru) }, pid);
    drop(child.try_wait());
    ru.ru_maxrss
}

#[test]
fn a_big_parent_does_not_count_in_the_tool_peak() {
    // 256 MiB of this process resident, as the bench is after making a big core.
    let big: Vec<u8> = vec![1; 256 << 20];
    std::hint::black_box(&big);
    let direct = direct_rss(&["/bin/true"]);
    let measured = measured_rss(&["/bin/true"]);
    // The failure this guards against: forked straight from here, `true` "peaks" at 256 MiB.
    assert!(direct > 200 << 10, "the effect measured is real here: {direct} KiB");
    assert!(measured < 32 << 10, "/bin/true measured at {measured} KiB");
    // A tool that really uses memory still shows it.
    let used = measured_rss(&["/usr/bin/perl", "-e", "my $x = 'a' x (64 << 20); print length($x) > 0 ? '' : 'x'"]);
    assert!(used > 60 << 10, "64 MiB string: {used} KiB");
}
