//! `knot watch DIR`: analyze each new core dump in a directory once, for a sidecar or a Job.
//!
//! A dump is a regular file whose first bytes are an ELF core header, or a gzip, zstd or xz
//! stream whose start decompresses to one (a compressed stream too broken to say is treated
//! as a dump, so that it gets an error file saying why). Names starting with `.` and knot's own
//! outputs are never dumps. A dump is complete when its size and modification time have not
//! changed for `settle` (by this process's clock, so a skewed file-server clock does not matter).
//!
//! For each dump `D` knot writes, in the output directory (DIR unless told otherwise):
//! - `D.knot.json`, the report (`knot analyze --format json`), or `D.knot.error.txt` when the dump
//!   cannot be analyzed (it is not retried until the dump changes);
//! - `D.knot.done`, the marker: the dump's size and modification time and the outcome;
//! - `D.knot.running`, while `D` is analyzed: a knot that dies on a dump (an abort, the OOM
//!   killer) leaves it, and the next knot (a restarted sidecar) writes `D.knot.error.txt` saying
//!   so instead of dying on it again; the other dumps are analyzed as usual. The watcher holds a
//!   lock on it while it reads `D` (a claim, `watch/claim.rs`): several watchers over one volume skip
//!   the dumps another one holds, and only a marker nobody holds means a knot died.
//!
//! Each file is written to a temporary name (`.D….knot-tmp-…`) and renamed into place, so a
//! reader never sees half a report and a restart never takes a partial file for a result. A dump
//! is done when its marker records its current size and modification time, or (without a marker)
//! when its `.knot.json` or `.knot.error.txt` is at least as new as the dump. A dump that is
//! replaced (same name, new size or time) is analyzed again.

use crate::analysis::{self, Options};
use crate::core::compressed::Compression;
use crate::report::watch_line::WatchLine;
use crate::report::{self, Report};
use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

mod claim;

pub(crate) const REPORT_SUFFIX: &str = ".knot.json";
pub(crate) const ERROR_SUFFIX: &str = ".knot.error.txt";
pub(crate) const MARKER_SUFFIX: &str = ".knot.done";
/// Written before a dump is analyzed and removed once its output is: found at a later scan, it
/// says that a knot died while analyzing that dump (killed for memory, a crash the process could
/// not catch), so the dump is given an error file instead of killing the next knot too.
pub(crate) const RUNNING_SUFFIX: &str = ".knot.running";
const TMP_INFIX: &str = ".knot-tmp-";
/// Temporary files of a killed run older than this are removed.
const STALE_TMP: Duration = Duration::from_secs(15 * 60);

#[derive(Debug, Clone)]
pub struct WatchOptions {
    /// The directory dumps appear in (not searched recursively).
    pub dir: PathBuf,
    /// Where reports, error files and markers go; `None` means beside the dumps.
    pub out: Option<PathBuf>,
    /// How long a dump's size and time must hold still before it counts as complete.
    pub settle: Duration,
    /// Time between scans of `dir`.
    pub interval: Duration,
    /// Process what is there (waiting for it to settle), then return.
    pub once: bool,
    /// How each dump is analyzed (module and debug-file locations, …).
    pub analysis: Options,
}

/// What one run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Dumps analyzed, each now with its `.knot.json`.
    pub analyzed: usize,
    /// Dumps that could not be analyzed, each now with its `.knot.error.txt`.
    pub failed: usize,
    /// Of the analyzed dumps, those with at least one deadlock.
    pub deadlocked: usize,
    /// Times an output could not be written (the dump is tried again at the next scan).
    pub write_errors: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("cannot watch {path}: {source}")]
    Dir { path: String, source: io::Error },
    #[error("{path} is not a directory")]
    NotADir { path: String },
}

/// What the first bytes of a file say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Sniff {
    /// An ELF core, plain or compressed (or a compressed stream too broken to tell).
    Dump,
    /// Anything else, and why it is not a dump.
    NotADump(String),
}

/// Looks at the first bytes of `path` (decompressing the start of a compressed file).
pub(crate) fn sniff(path: &Path) -> io::Result<Sniff> {
    let mut head = Vec::with_capacity(64);
    fs::File::open(path)?.take(64).read_to_end(&mut head)?;
    if head.starts_with(b"\x7fELF") {
        return Ok(elf_kind(&head));
    }
    let Some(kind) = Compression::detect(&head) else {
        return Ok(Sniff::NotADump("not an ELF core (nor gzip, zstd or xz)".into()));
    };
    let file = io::BufReader::new(fs::File::open(path)?);
    let mut inner = Vec::with_capacity(64);
    let read = match kind {
        Compression::Gzip => flate2::read::MultiGzDecoder::new(file).take(64).read_to_end(&mut inner).map(|_| ()),
        Compression::Zstd => match ruzstd::decoding::StreamingDecoder::new(file) {
            Ok(d) => d.take(64).read_to_end(&mut inner).map(|_| ()),
            Err(e) => Err(io::Error::new(io::ErrorKind::InvalidData, e.to_string())),
        },
        // knot cannot read xz; the analysis says so in the error file.
        Compression::Xz => return Ok(Sniff::Dump),
    };
    match read {
        // Too broken to tell: let the analysis say what is wrong.
        Err(_) if inner.len() < 18 => Ok(Sniff::Dump),
        _ if inner.starts_with(b"\x7fELF") => Ok(match elf_kind(&inner) {
            Sniff::Dump => Sniff::Dump,
            Sniff::NotADump(why) => Sniff::NotADump(format!("{} data: {why}", kind.name())),
        }),
        _ => Ok(Sniff::NotADump(format!("{} data, but not an ELF core", kind.name()))),
    }
}

fn elf_kind(head: &[u8]) -> Sniff {
    const ET_CORE: u16 = 4;
    if head.len() < 18 {
        return Sniff::Dump; // a truncated header: the analysis will say so
    }
    let e_type = match head[5] {
        2 => u16::from_be_bytes([head[16], head[17]]),
        _ => u16::from_le_bytes([head[16], head[17]]),
    };
    if e_type == ET_CORE { Sniff::Dump } else { Sniff::NotADump(format!("an ELF file, but not a core (e_type {e_type})")) }
}

/// Names that are never dumps: hidden files (partial uploads, our temporaries) and our outputs.
fn ignored_name(name: &str) -> bool {
    name.starts_with('.')
        || name.ends_with(REPORT_SUFFIX)
        || name.ends_with(ERROR_SUFFIX)
        || name.ends_with(MARKER_SUFFIX)
        || name.ends_with(RUNNING_SUFFIX)
        || name.contains(TMP_INFIX)
}

/// The files knot writes for the dump named `name`.
pub(crate) struct Outputs {
    pub(crate) report: PathBuf,
    pub(crate) error: PathBuf,
    pub(crate) marker: PathBuf,
    pub(crate) running: PathBuf,
}

pub(crate) fn outputs(out_dir: &Path, name: &str) -> Outputs {
    Outputs {
        report: out_dir.join(format!("{name}{REPORT_SUFFIX}")),
        error: out_dir.join(format!("{name}{ERROR_SUFFIX}")),
        marker: out_dir.join(format!("{name}{MARKER_SUFFIX}")),
        running: out_dir.join(format!("{name}{RUNNING_SUFFIX}")),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    size: u64,
    mtime_ns: u128,
}

fn stamp(meta: &fs::Metadata) -> Stamp {
    let mtime_ns = meta.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos());
    Stamp { size: meta.len(), mtime_ns }
}

fn mtime(path: &Path) -> Option<SystemTime> {
    fs::metadata(path).and_then(|m| m.modified()).ok()
}

fn is_done(o: &Outputs, dump: &fs::Metadata) -> bool {
    let now = stamp(dump);
    if let Ok(text) = fs::read_to_string(&o.marker)
        && let Ok(v) = serde_json::from_str::<serde_json::Value>(&text)
        && v["size"].as_u64() == Some(now.size)
        && v["mtime_ns"].as_str() == Some(now.mtime_ns.to_string().as_str())
    {
        return true;
    }
    let Ok(dump_time) = dump.modified() else { return false };
    [&o.report, &o.error].iter().any(|p| mtime(p).is_some_and(|t| t >= dump_time))
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to `dest` through a temporary file in the same directory and a rename.
pub(crate) fn write_atomic(dest: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = dest.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}{TMP_INFIX}{}-{}", std::process::id(), TMP_COUNTER.fetch_add(1, Ordering::Relaxed)));
    let result = (|| {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, dest)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Removes temporary files that a killed run left (older than a quarter of an hour).
fn remove_stale_temporaries(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') && name.contains(TMP_INFIX) {
            let old = e.metadata().ok().and_then(|m| m.modified().ok()).and_then(|t| t.elapsed().ok()).is_some_and(|age| age > STALE_TMP);
            if old {
                let _ = fs::remove_file(e.path());
            }
        }
    }
}

struct Seen {
    stamp: Stamp,
    since: Instant,
}

/// Whether the watched directory and the output directory are directories knot can read: the
/// one error a watch can end with at its start, said before anything else is.
pub fn check_dirs(opts: &WatchOptions) -> Result<(), WatchError> {
    let out_dir = opts.out.clone().unwrap_or_else(|| opts.dir.clone());
    for d in [&opts.dir, &out_dir] {
        match fs::metadata(d) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(WatchError::NotADir { path: d.display().to_string() }),
            Err(source) => return Err(WatchError::Dir { path: d.display().to_string(), source }),
        }
    }
    Ok(())
}

/// Watches `opts.dir`; with `once`, returns when every dump there has been handled. `log`
/// receives one line per event.
pub fn run(opts: &WatchOptions, log: &mut dyn FnMut(&str)) -> Result<Summary, WatchError> {
    run_with(opts, log, None)
}

/// [`run`], with each dump handled given to `on_dump` as a [`WatchLine`] (`--log-format json`)
/// instead of as a line to `log`; every other event still goes to `log`.
pub fn run_with(opts: &WatchOptions, log: &mut dyn FnMut(&str), mut on_dump: Option<&mut dyn FnMut(&WatchLine)>) -> Result<Summary, WatchError> {
    check_dirs(opts)?;
    let dir = &opts.dir;
    let out_dir = opts.out.clone().unwrap_or_else(|| dir.clone());
    remove_stale_temporaries(&out_dir);
    // Claims work across the containers of one node; say so where they may not reach further.
    if let Some(why) = claim::locks_may_stay_local(&out_dir) {
        log(&why);
    }
    let mut claims = Claims::default();
    let mut summary = Summary::default();
    let mut seen: HashMap<PathBuf, Seen> = HashMap::new();
    let mut not_dumps: HashMap<PathBuf, Stamp> = HashMap::new();
    let mut dir_error_logged = false;
    loop {
        let mut pending = 0usize;
        let mut present: HashSet<PathBuf> = HashSet::new();
        match fs::read_dir(dir) {
            Err(e) => {
                if opts.once {
                    return Err(WatchError::Dir { path: dir.display().to_string(), source: e });
                }
                if !dir_error_logged {
                    log(&format!("cannot read {}: {e}; trying again every {}s", dir.display(), opts.interval.as_secs()));
                    dir_error_logged = true;
                }
            }
            Ok(entries) => {
                dir_error_logged = false;
                let mut entries: Vec<_> = entries.flatten().collect();
                entries.sort_by_key(|e| e.file_name());
                for entry in entries {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if ignored_name(&name) {
                        continue;
                    }
                    let path = entry.path();
                    let Ok(meta) = fs::metadata(&path) else { continue };
                    if !meta.is_file() {
                        continue;
                    }
                    present.insert(path.clone());
                    let now = stamp(&meta);
                    if not_dumps.get(&path) == Some(&now) {
                        continue;
                    }
                    let outs = outputs(&out_dir, &name);
                    if is_done(&outs, &meta) {
                        seen.remove(&path);
                        claims.busy_logged.remove(&path);
                        continue;
                    }
                    let settled = match seen.get(&path) {
                        Some(s) if s.stamp == now => s.since.elapsed() >= opts.settle,
                        _ => {
                            seen.insert(path.clone(), Seen { stamp: now, since: Instant::now() });
                            opts.settle.is_zero()
                        }
                    };
                    if !settled {
                        pending += 1;
                        continue;
                    }
                    let handled = match sniff(&path) {
                        Ok(Sniff::Dump) => process(Found { path: &path, name: &name, meta: &meta, outs: &outs }, &opts.analysis, &mut claims, log, on_dump.as_deref_mut()),
                        Ok(Sniff::NotADump(why)) => {
                            log(&format!("{name}: skipped: {why}"));
                            not_dumps.insert(path.clone(), now);
                            seen.remove(&path);
                            continue;
                        }
                        // Final: a kernel core is mode 0600 and stays so; waiting changes nothing.
                        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => not_permitted(Found { path: &path, name: &name, meta: &meta, outs: &outs }, &e, log, on_dump.as_deref_mut()),
                        Err(e) => {
                            log(&format!("{name}: cannot read it ({e}); trying again"));
                            pending += 1;
                            continue;
                        }
                    };
                    match handled {
                        Handled::Busy => {
                            // Another watcher reads it: look again at the next scan (with
                            // --once, wait for it), in case it stops without a result.
                            pending += 1;
                        }
                        Handled::DoneElsewhere => {
                            seen.remove(&path);
                        }
                        Handled::Analyzed { deadlock } => {
                            summary.analyzed += 1;
                            summary.deadlocked += deadlock as usize;
                            seen.remove(&path);
                        }
                        Handled::Failed => {
                            summary.failed += 1;
                            seen.remove(&path);
                        }
                        Handled::Changed => {
                            seen.remove(&path);
                            pending += 1;
                        }
                        Handled::WriteError => {
                            summary.write_errors += 1;
                            if opts.once {
                                seen.remove(&path);
                            } else {
                                pending += 1;
                            }
                        }
                    }
                }
            }
        }
        seen.retain(|p, _| present.contains(p));
        not_dumps.retain(|p, _| present.contains(p));
        claims.busy_logged.retain(|p| present.contains(p));
        if opts.once && pending == 0 {
            return Ok(summary);
        }
        // With --once, look again soon: only the dumps still settling are left.
        let pause = if opts.once { opts.interval.min(Duration::from_millis(500)).max(Duration::from_millis(50)) } else { opts.interval };
        std::thread::sleep(pause);
    }
}

enum Handled {
    /// Another live watcher holds the dump's claim: not this one's to analyze, for now.
    Busy,
    /// Another watcher finished it between this one's scan and its claim.
    DoneElsewhere,
    Analyzed { deadlock: bool },
    Failed,
    /// The dump changed while it was read: not complete after all.
    Changed,
    WriteError,
}

/// What this run remembers about claims: that the file system refused locks (said once), and
/// which dumps it has said another watcher holds (said once each, not at every scan).
#[derive(Default)]
struct Claims {
    refusal_logged: bool,
    busy_logged: HashSet<PathBuf>,
}

/// Whether the marker `v` (a running or done marker) records the dump's current size and time.
fn same_stamp(v: &serde_json::Value, dump: &fs::Metadata) -> bool {
    let now = stamp(dump);
    v["size"].as_u64() == Some(now.size) && v["mtime_ns"].as_str() == Some(now.mtime_ns.to_string().as_str())
}

/// This process's name for the log of another watcher: the host is the pod's name in a cluster.
fn hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default()
}

fn marker_json(name: &str, s: Stamp) -> serde_json::Value {
    serde_json::json!({
        "dump": name,
        "size": s.size,
        "mtime_ns": s.mtime_ns.to_string(),
        "knot_version": env!("CARGO_PKG_VERSION"),
    })
}

/// A dump found in the watched directory: where it is, its name, its metadata when it was
/// found settled, and where its outputs go.
#[derive(Clone, Copy)]
struct Found<'a> {
    path: &'a Path,
    name: &'a str,
    meta: &'a fs::Metadata,
    outs: &'a Outputs,
}

fn process(found: Found<'_>, opts: &Options, claims: &mut Claims, log: &mut dyn FnMut(&str), on_dump: Option<&mut (dyn FnMut(&WatchLine) + '_)>) -> Handled {
    let Found { path, name, meta: before, outs } = found;
    let started = Instant::now();
    let mut running = marker_json(name, stamp(before));
    running["pid"] = std::process::id().into();
    running["host"] = hostname().into();
    // The done check under the claim: the dump's current metadata, as the scan's check reads it.
    let done = || fs::metadata(path).is_ok_and(|m| is_done(outs, &m));
    // Held until this function returns: its drop removes the marker, then releases the claim.
    let _claim = match claim::take(&outs.running, &done, &|v| same_stamp(v, before), &running) {
        Err(e) => {
            log(&format!("{name}: cannot write its output in {}: {e}", outs.running.parent().unwrap_or(Path::new(".")).display()));
            return Handled::WriteError;
        }
        Ok(claim::Taken::Done) => return Handled::DoneElsewhere,
        Ok(claim::Taken::Busy { holder }) => {
            if claims.busy_logged.insert(path.to_path_buf()) {
                let who = holder.map(|h| format!(" (process {} on {})", h["pid"].as_u64().map_or("?".into(), |p| p.to_string()), h["host"].as_str().unwrap_or("?"))).unwrap_or_default();
                log(&format!("{name}: being analyzed by another knot{who}; taken up again if it stops without a report"));
            }
            return Handled::Busy;
        }
        Ok(claim::Taken::Held { claim, died, unlocked }) => {
            if let Some(e) = unlocked
                && !std::mem::replace(&mut claims.refusal_logged, true)
            {
                log(&claim::refused(outs.running.parent().unwrap_or(Path::new(".")), &e));
            }
            if let Some(earlier) = died {
                // Its claim was released (the process ended) and it left no result.
                let msg = format!(
                    "knot {} died while analyzing this dump (process {}{} was killed or aborted before writing a report); not analyzed again until the dump changes",
                    env!("CARGO_PKG_VERSION"),
                    earlier["pid"].as_u64().map_or("?".to_string(), |p| p.to_string()),
                    earlier["host"].as_str().filter(|h| !h.is_empty()).map(|h| format!(" on {h}")).unwrap_or_default()
                );
                return finish(found, Err(msg), started, log, on_dump);
            }
            claim.hold_for_test();
            claim
        }
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| analysis::analyze(path, opts)));
    let after = fs::metadata(path).ok();
    if after.as_ref().map(stamp) != Some(stamp(before)) {
        log(&format!("{name}: changed while it was read; waiting for it to settle again"));
        return Handled::Changed;
    }
    let outcome: Result<Report, String> = match result {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(e)) => Err(format!("knot {} could not analyze this dump: {e}", env!("CARGO_PKG_VERSION"))),
        Err(panic) => {
            let msg = panic.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| panic.downcast_ref::<String>().cloned()).unwrap_or_else(|| "unknown panic".into());
            Err(format!("knot {} failed while analyzing {} (a bug in knot: please report it): {msg}", env!("CARGO_PKG_VERSION"), path.display()))
        }
    };
    finish(found, outcome, started, log, on_dump)
}

/// A dump this process may not read (another uid's mode-0600 kernel core): its error file says
/// whose it is and what to set, and it is counted as not analyzed.
fn not_permitted(found: Found<'_>, e: &io::Error, log: &mut dyn FnMut(&str), on_dump: Option<&mut (dyn FnMut(&WatchLine) + '_)>) -> Handled {
    let meta = found.meta;
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid and getegid cannot fail and touch no memory.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let owner = report::words::FileOwner { uid: meta.uid(), gid: meta.gid(), mode: meta.mode() & 0o7777 };
    let msg = report::words::dump_not_permitted(env!("CARGO_PKG_VERSION"), e, owner, uid, gid);
    finish(found, Err(msg), Instant::now(), log, on_dump)
}

/// Writes the report or the error file, then the done marker, and logs the outcome: as a
/// [`WatchLine`] to `on_dump` when given, else as a line to `log`.
fn finish(found: Found<'_>, outcome: Result<Report, String>, started: Instant, log: &mut dyn FnMut(&str), on_dump: Option<&mut (dyn FnMut(&WatchLine) + '_)>) -> Handled {
    let Found { path, name, meta: before, outs } = found;
    let secs = started.elapsed().as_secs_f64();
    let (written, result_word) = match &outcome {
        Ok(r) => (write_atomic(&outs.report, (report::to_json(r) + "\n").as_bytes()).map(|_| &outs.report), "ok"),
        Err(msg) => (write_atomic(&outs.error, format!("{msg}\n").as_bytes()).map(|_| &outs.error), "error"),
    };
    let written = match written {
        Ok(p) => p,
        Err(e) => {
            log(&format!("{name}: cannot write its output in {}: {e}", outs.report.parent().unwrap_or(Path::new(".")).display()));
            return Handled::WriteError;
        }
    };
    // A report replaces an earlier error, and the other way round.
    let _ = fs::remove_file(if outcome.is_ok() { &outs.error } else { &outs.report });
    let mut marker = marker_json(name, stamp(before));
    marker["result"] = result_word.into();
    marker["output"] = written.file_name().map(|n| n.to_string_lossy().into_owned()).into();
    if let Err(e) = write_atomic(&outs.marker, format!("{marker}\n").as_bytes()) {
        // The output is there and newer than the dump, which also counts as done.
        log(&format!("{name}: cannot write its marker: {e}"));
    }
    if let Some(on_dump) = on_dump {
        let (dump_path, output) = (path.display().to_string(), written.display().to_string());
        let line = match &outcome {
            Ok(r) => WatchLine::analyzed(name, &dump_path, r, &output, secs),
            Err(msg) => WatchLine::failed(name, &dump_path, msg, &output, secs),
        };
        on_dump(&line);
        return match outcome {
            Ok(r) => Handled::Analyzed { deadlock: !r.deadlocks.is_empty() },
            Err(_) => Handled::Failed,
        };
    }
    match outcome {
        Ok(r) => {
            let deadlock = !r.deadlocks.is_empty();
            let mut words = report::words::verdict(r.verdict).to_uppercase();
            if deadlock {
                let n: usize = r.deadlocks.iter().map(|d| d.tids.len()).sum();
                words.push_str(&format!(" ({n} threads in {} cycle{})", r.deadlocks.len(), if r.deadlocks.len() == 1 { "" } else { "s" }));
            }
            // `signature=…` is one token a log query can count (the same wedge, the same key).
            let signature = r.verdict_signature.as_deref().map(|s| format!("; signature={s}")).unwrap_or_default();
            log(&format!("{name}: {words}{signature}; {} threads; {secs:.1}s → {}", r.threads.len(), written.display()));
            Handled::Analyzed { deadlock }
        }
        Err(msg) => {
            log(&format!("{name}: {msg} → {}", written.display()));
            Handled::Failed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_and_temporaries_are_never_dumps() {
        for n in ["core.1.knot.json", "core.1.knot.error.txt", "core.1.knot.done", ".core.1.knot.json.knot-tmp-1-0", ".partial-upload"] {
            assert!(ignored_name(n), "{n}");
        }
        assert!(!ignored_name("core.1234"));
        assert!(!ignored_name("core.1234.gz"));
    }

    #[test]
    fn sniffing_tells_cores_from_other_files() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, bytes: &[u8]| {
            let p = dir.path().join(name);
            fs::write(&p, bytes).unwrap();
            p
        };
        let mut core = b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0".to_vec();
        core.extend_from_slice(&4u16.to_le_bytes());
        core.resize(64, 0);
        let mut exe = core.clone();
        exe[16] = 3;
        assert_eq!(sniff(&write("core", &core)).unwrap(), Sniff::Dump);
        assert!(matches!(sniff(&write("exe", &exe)).unwrap(), Sniff::NotADump(_)));
        assert!(matches!(sniff(&write("notes.txt", b"hello")).unwrap(), Sniff::NotADump(_)));
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&core).unwrap();
        assert_eq!(sniff(&write("core.gz", &gz.finish().unwrap())).unwrap(), Sniff::Dump);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(b"just a log file, compressed, long enough to tell what it is").unwrap();
        assert!(matches!(sniff(&write("log.gz", &gz.finish().unwrap())).unwrap(), Sniff::NotADump(_)));
        assert_eq!(sniff(&write("broken.gz", b"\x1f\x8b\x08\0garbage")).unwrap(), Sniff::Dump);
    }
}
