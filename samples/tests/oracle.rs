//! Makes every sample and checks gdb's reading against expected.toml: the
//! samples really block where they claim to. Skips (with a note) where gcc,
//! gdb or kernel cores are unavailable.

use knot_samples::gdb_oracle::{self, Thread};
use knot_samples::{Availability, DumpKind, SampleDump, expected};

/// Samples whose threads run code gdb cannot unwind (it stops at `??`), or that returned to an
/// overwritten return address (gdb: `??`, then `0x0`).
const BEYOND_GDB: &[&str] = &["generated_code", "smashed_stack"];

/// Samples whose program is a stripped interpreter (Debian's python3.11): gdb names its static
/// functions only with the -dbg package's symbols, too big to commit, so it prints `??` for them.
/// Their roles and locks are still checked here, and tests/native_owners.rs reads them against
/// gdb's `py-bt` (made with python3-dbg).
const UNNAMED_BY_GDB: &[&str] = &["py_lock_abba"];

fn check_dump(dump: &SampleDump) {
    let name = &dump.name;
    let text = std::fs::read_to_string(&dump.gdb_bt).unwrap();
    // A process in a PID namespace of its own dumped from the host: libthread_db lists its threads
    // again in its own numbering, without registers — no threads of their own.
    let threads: Vec<Thread> = gdb_oracle::parse(&text).into_iter().filter(|t| !t.unavailable).collect();
    let e = expected::for_sample(name).unwrap();
    assert_eq!(
        threads.len(),
        e.total_threads,
        "{name} ({}): thread count",
        dump.kind
    );
    // gdb gives up in code nobody describes (generated code: `?? ()`, then a bogus `0x0`), so it
    // cannot witness those threads' frames; knot's reading of them is checked against gdb up to
    // that frame and against the program's own structure in tests/gdb_oracle.rs.
    if BEYOND_GDB.contains(&name.as_str()) {
        return;
    }
    let with = |role: &str| {
        threads
            .iter()
            .filter(|t| t.has_function(role))
            .collect::<Vec<&Thread>>()
    };
    for (role, &count) in &e.threads {
        assert_eq!(
            with(role).len(),
            count,
            "{name} ({}): threads with {role}",
            dump.kind
        );
    }
    for t in &threads {
        let roles = e.threads.keys().filter(|r| t.has_function(r)).count();
        assert_eq!(
            roles, 1,
            "{name}: thread {} has {roles} roles: {:?}",
            t.lwp, t.functions
        );
        assert!(
            t.stopped_reason.is_none(),
            "{name}: gdb could not finish LWP {}: {t:?}",
            t.lwp
        );
        assert!(
            UNNAMED_BY_GDB.contains(&name.as_str()) || !t.functions.iter().any(|f| f == "??"),
            "{name}: unknown frame in {t:?}"
        );
    }
    for l in &e.locks {
        if let Some(sym) = &l.symbol {
            // gdb names the lock global in the waiters' lock-call arguments.
            assert!(
                text.contains(&format!("<{sym}>")) || text.contains(&format!("<{sym}::h")),
                "{name}: gdb never shows <{sym}>"
            );
        }
        for role in l.waiters.keys() {
            for t in with(role) {
                assert!(
                    t.functions
                        .iter()
                        .any(|f| f.contains("lock") || f.contains("wait") || f.contains("join")),
                    "{name}: waiter {role} is not in a lock/wait call: {:?}",
                    t.functions
                );
                if l.in_signal_handler {
                    assert!(
                        t.has_function("<signal handler called>"),
                        "{name}: {:?}",
                        t.functions
                    );
                }
            }
        }
    }
    if let Some(depth) = e.recursion_depth {
        let t = with("deep_thread")[0];
        let levels = t.functions.iter().filter(|f| *f == "recurse").count();
        assert_eq!(levels as u32, depth + 1, "{name}: recurse frames");
    }
}

fn each(kind: DumpKind) {
    let mut made = 0;
    for spec in knot_samples::native_samples() {
        match knot_samples::ensure(spec.name, kind) {
            Availability::Ready(d) => {
                assert!(d.core.is_file() && d.binary.is_file());
                check_dump(&d);
                made += 1;
            }
            Availability::Skipped(why) => eprintln!("skipping {} ({kind}): {why}", spec.name),
        }
    }
    eprintln!("{made} {kind} dumps checked");
}

#[test]
fn kernel_dumps_match_expected() {
    each(DumpKind::Kernel);
}

#[test]
fn gcore_dumps_match_expected() {
    each(DumpKind::Gcore);
}

#[test]
fn committed_dumps_match_expected() {
    for &(name, kind) in knot_samples::COMMITTED_SET {
        let d = knot_samples::committed(name, kind)
            .unwrap_or_else(|| panic!("{name} ({kind}) not committed"));
        assert!(
            d.sysroot
                .as_ref()
                .unwrap()
                .join("lib/x86_64-linux-gnu/libc.so.6")
                .is_file()
        );
        assert!(d.binary.is_file(), "{}", d.binary.display());
        check_dump(&d);
        // Unpacking again is a cache hit.
        assert_eq!(knot_samples::committed(name, kind), Some(d));
    }
}

#[test]
fn concurrent_makers_agree() {
    let dir = knot_samples::out_dir().join("many_threads-3");
    let _ = std::fs::remove_dir_all(&dir);
    let handles: Vec<_> = (0..3)
        .map(|_| {
            std::thread::spawn(|| {
                knot_samples::ensure_with_args("many_threads", DumpKind::Gcore, &["3"])
            })
        })
        .collect();
    let results: Vec<Availability> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let dumps: Vec<SampleDump> = results
        .into_iter()
        .filter_map(Availability::ready)
        .collect();
    if dumps.is_empty() {
        return; // skipped on this machine
    }
    assert_eq!(dumps.len(), 3);
    assert!(dumps.windows(2).all(|w| w[0] == w[1]));
    let threads = gdb_oracle::parse(&std::fs::read_to_string(&dumps[0].gdb_bt).unwrap());
    assert_eq!(
        threads
            .iter()
            .filter(|t| t.has_function("gated_thread"))
            .count(),
        3
    );
    // No temp dirs left behind.
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn unknown_sample_is_an_error() {
    assert!(knot_samples::try_ensure_with_args("no_such_sample", DumpKind::Gcore, &[]).is_err());
}
