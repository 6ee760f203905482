//! Shared by the integration tests: how to read a sample dump with knot the way gdb read it.
#![allow(dead_code)]

use knot::Options;
use knot::process::Locator;
use knot::report::Report;
use knot_samples::{Availability, DumpKind, SampleDump};

/// Every native sample, named once: `native_samples!(m)` expands to `m!(abba, cycle3, …)`, so the
/// per-sample test families (gdb oracle, lock facts) and the catalogue check share one list.
#[macro_export]
macro_rules! native_samples {
    ($m:ident) => {
        $m!(
            abba,
            timed_abba,
            odd_mappings,
            rwlock_readers,
            rwlock_queued_reader,
            relative_dlopen,
            generated_code,
            cycle3,
            self_relock,
            convoy,
            rwlock_writer,
            recursive,
            join_cycle,
            owner_exited,
            robust_dead_owner,
            mutex_kinds,
            condvar_sem,
            deep_recursion,
            many_threads,
            signal_handler,
            omitfp,
            stripped,
            rust_mutex,
            pi_abba,
            pshared_child,
            pidns_abba,
            barrier_short,
            cxx_templates,
            rwlock_cycle,
            rust_release_abba,
            py_lock_abba,
        );
    };
}

/// The names in [`native_samples!`], as strings.
#[macro_export]
macro_rules! sample_names {
    ($($name:ident),* $(,)?) => {
        const NATIVE_SAMPLE_NAMES: &[&str] = &[$(stringify!($name)),*];
    };
}

/// knot's options for a sample: the same files gdb was given (the binary, the sysroot, and a
/// debug directory that replaces the default one, as gdb's `set debug-file-directory` does).
pub fn options_for(d: &SampleDump) -> Options {
    let locator = Locator {
        sysroot: d.sysroot.clone(),
        debug_dirs: d.debug_dir.iter().cloned().collect(),
        no_default_debug_dir: d.debug_dir.is_some(),
        search_dirs: d.binary.parent().map(|p| vec![p.to_path_buf()]).unwrap_or_default(),
        executable: Some(d.binary.clone()),
        section_cache: None,
    };
    Options { locator, ..Options::default() }
}

pub fn analyze(d: &SampleDump) -> Report {
    match knot::analyze(&d.core, &options_for(d)) {
        Ok(r) => r,
        Err(e) => panic!("knot could not read {} ({}): {e}", d.name, d.core.display()),
    }
}

/// A dump made on this machine, or `None` after printing why it cannot be made here.
pub fn made(name: &str, kind: DumpKind) -> Option<SampleDump> {
    match knot_samples::ensure(name, kind) {
        Availability::Ready(d) => Some(d),
        Availability::Skipped(why) => {
            knot_samples::skipped(&format!("skipping {name} ({kind}): {why}"));
            None
        }
    }
}

/// The committed arm64 dump (samples/dumps-aarch64), which every machine has.
pub fn committed_aarch64(name: &str, kind: DumpKind) -> SampleDump {
    match knot_samples::committed_aarch64(name, kind) {
        Some(d) => d,
        None => panic!("committed arm64 sample {name} ({kind}) is missing from samples/dumps-aarch64"),
    }
}

/// The committed abba dump of `kind`, located once per test binary: the seed the bad-input tests
/// cut short and overwrite.
pub fn abba(kind: DumpKind) -> &'static SampleDump {
    static D: [std::sync::OnceLock<SampleDump>; 2] = [std::sync::OnceLock::new(), std::sync::OnceLock::new()];
    D[kind as usize].get_or_init(|| committed("abba", kind))
}

/// [`abba`]'s bytes, read once. gcore writes its notes at the end of the file, after every
/// segment; the kernel right after the program headers.
pub fn abba_bytes(kind: DumpKind) -> &'static [u8] {
    static B: [std::sync::OnceLock<Vec<u8>>; 2] = [std::sync::OnceLock::new(), std::sync::OnceLock::new()];
    B[kind as usize].get_or_init(|| std::fs::read(&abba(kind).core).expect("read the abba seed"))
}

/// The committed dump, which every machine has.
pub fn committed(name: &str, kind: DumpKind) -> SampleDump {
    match knot_samples::committed(name, kind) {
        Some(d) => d,
        None => panic!("committed sample {name} ({kind}) is missing from samples/dumps"),
    }
}

/// Every crash sample (issue 18), named once, as [`native_samples!`].
#[macro_export]
macro_rules! crash_samples {
    ($m:ident) => {
        $m!(
            crash_null,
            crash_readonly,
            crash_badfn,
            crash_overflow,
            crash_divzero,
            crash_assert,
            crash_double_free,
            crash_sigbus,
            crash_cxx,
            crash_rust_panic,
            idle_join,
            old_layout,
            smashed_stack,
        );
    };
}

/// A .NET sample dump (`knot_samples::dotnet::dumps`), with the Locator that reads it as SOS
/// read it: the committed runtime and app files for committed dumps, the machine's otherwise.
pub struct DotnetDump {
    /// `sample/kind`, marked when made here.
    pub name: String,
    pub core: std::path::PathBuf,
    /// Where `sos/` (SOS's readings of the dump) is.
    pub dir: std::path::PathBuf,
    pub locator: Locator,
}

/// Every .NET dump with SOS's reading `oracle` (e.g. `sos/threadpool.txt`) beside it, committed
/// and made here; none (with a message saying so) when there is no such dump.
pub fn dotnet_dumps(oracle: &str) -> Vec<DotnetDump> {
    dumps_of(knot_samples::dotnet::dumps(oracle, true), oracle)
}

/// As [`dotnet_dumps`], then the committed .NET 8 dumps with `oracle` beside them, read from the
/// dump alone (`knot_samples::dotnet::net8_dumps`).
pub fn dotnet_dumps_with_net8(oracle: &str) -> Vec<DotnetDump> {
    let mut all = knot_samples::dotnet::dumps(oracle, true);
    all.extend(knot_samples::dotnet::net8_dumps(oracle));
    dumps_of(all, oracle)
}

fn dumps_of(all: Vec<knot_samples::dotnet::DotnetDump>, oracle: &str) -> Vec<DotnetDump> {
    let out: Vec<DotnetDump> = all
        .into_iter()
        .map(|d| DotnetDump {
            name: d.name(),
            locator: Locator { sysroot: d.sysroot.clone(), search_dirs: d.search_dirs.clone(), ..Locator::default() },
            core: d.core,
            dir: d.dir,
        })
        .collect();
    if out.is_empty() {
        knot_samples::skipped(&format!("skipping: no .NET dumps with {oracle} (commit samples/dotnet/dumps, or run samples/dotnet/make-dumps.sh)"));
    }
    out
}
