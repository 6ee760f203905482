//! `KNOT_TRACE`: where one analysis spends its time, measured on a real dump.
//!
//! With `KNOT_TRACE` set in the environment, [`step`] says on stderr when a step ended: the wall
//! time since the first step (`analyze` makes one as it starts), the CPU time of all the
//! process's threads since it started (wall far above CPU is waiting: files, page faults, locks),
//! its anonymous memory (RssAnon) and the file pages it has touched (RssFile: the dump's, mostly). Unset, a step costs one atomic load after the first
//! environment lookup. Nothing in a report depends on it.

use std::sync::OnceLock;
use std::time::Duration;

/// `None` when tracing is off; else the first step's time on `CLOCK_MONOTONIC`.
static ON: OnceLock<Option<Duration>> = OnceLock::new();

/// Says that `what` ended (when `KNOT_TRACE` is set).
pub(crate) fn step(what: &str) {
    let Some(started) = ON.get_or_init(|| std::env::var_os("KNOT_TRACE").map(|_| clock(libc::CLOCK_MONOTONIC))) else { return };
    let wall = clock(libc::CLOCK_MONOTONIC).saturating_sub(*started);
    let cpu = clock(libc::CLOCK_PROCESS_CPUTIME_ID);
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim().to_string());
    // RssFile: the dump's and the files' pages read through their mappings.
    let (anon, file) = (field("RssAnon:"), field("RssFile:"));
    eprintln!("knot trace: {:7.1} ms wall {:7.1} ms cpu  {what:<36} RssAnon {}  RssFile {}", ms(wall), ms(cpu), anon.as_deref().unwrap_or("?"), file.as_deref().unwrap_or("?"));
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn clock(id: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; both clocks exist on every Linux knot runs on.
    if unsafe { libc::clock_gettime(id, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(u64::try_from(ts.tv_sec).unwrap_or(0), u32::try_from(ts.tv_nsec).unwrap_or(0))
}
