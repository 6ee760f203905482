//! Threads' roles in the service's own words (issue 15 part 4), against a real Orleans 10 silo.
//! The roles' frame names (`analyzers/roles.toml`) meet SOS's `clrstack -all` of the wedged
//! `orleans_silo` sample, committed in `samples/dotnet/orleans_silo/sos/`; and when the dump
//! itself is here (~330 MB, made by `samples/dotnet/make-dumps.sh orleans_silo`, never
//! committed), knot's first screen names the stuck Orleans roles and the lock's owner as SOS's
//! `syncblk` does, and every thread's role is the one its SOS stack gives.

use knot::analysis::{self, Options};
use knot::process::Locator;
use knot::report::text::{self, TextOptions};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn recorded() -> PathBuf {
    knot_samples::workspace_root().join("samples/dotnet/orleans_silo/sos")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// SOS `clrstack -all`: each OS thread's managed frames (names without arguments or source),
/// innermost first.
fn sos_stacks(text: &str) -> BTreeMap<u32, Vec<String>> {
    let mut out: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    let mut current = None;
    for line in text.lines() {
        if let Some(hex) = line.trim().strip_prefix("OS Thread Id: 0x") {
            let tid = u32::from_str_radix(hex.split_whitespace().next().unwrap_or(""), 16).expect("OS thread id");
            out.entry(tid).or_default();
            current = Some(tid);
            continue;
        }
        let Some(tid) = current else { continue };
        // `<Child SP> <IP> <Call Site>`; the call site of a transition frame is `[Kind: addr]`.
        let mut cols = line.trim_start().splitn(3, ' ');
        let (Some(sp), Some(ip)) = (cols.next(), cols.next()) else { continue };
        if !(sp.len() == 16 && sp.chars().all(|c| c.is_ascii_hexdigit()) && ip.chars().all(|c| c.is_ascii_hexdigit())) {
            continue;
        }
        let site = cols.next().unwrap_or("").trim();
        if site.is_empty() || site.starts_with('[') {
            continue;
        }
        // `Namespace.Type.Method(Args) [/path @ line]`: the name, as knot's frames carry it.
        let site = site.rsplit_once(" [").map_or(site, |(s, _)| s);
        let name = match site.find('(') {
            Some(i) => &site[..i],
            None => site,
        };
        out.entry(tid).or_default().push(name.to_string());
    }
    out
}

/// SOS `syncblk`: (owner OS tid, object address, MonitorHeld) of each owned monitor.
fn syncblk(text: &str) -> Vec<(u32, u64, u32)> {
    text.lines()
        .filter_map(|l| {
            let c: Vec<&str> = l.split_whitespace().collect();
            // Index SyncBlock MonitorHeld Recursion ThreadOBJ OSID ManagedId Object Type
            if c.len() < 9 || c[0].parse::<u32>().is_err() || c[1].len() != 16 {
                return None;
            }
            Some((u32::from_str_radix(c[5], 16).ok()?, u64::from_str_radix(c[7], 16).ok()?, c[2].parse().ok()?))
        })
        .collect()
}

fn role_counts(roles: impl Iterator<Item = Option<knot::roles::ThreadRole>>) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for r in roles.flatten() {
        *out.entry(format!("{}/{}", r.framework, r.role)).or_default() += 1;
    }
    out
}

#[test]
fn the_recorded_orleans_silo_threads_have_their_roles() {
    let stacks = sos_stacks(&read(&recorded().join("clrstack-all.txt")));
    let owners = syncblk(&read(&recorded().join("syncblk.txt")));
    assert_eq!(owners.len(), 1, "{owners:?}");
    let (refresher, _, held) = owners[0];
    assert_eq!(held, 21, "1 owner + 2 x 10 waiters");
    let roles: BTreeMap<u32, Option<knot::roles::ThreadRole>> = stacks.iter().map(|(&t, f)| (t, knot::roles::role_of(f.iter().map(String::as_str)))).collect();
    let counts = role_counts(roles.values().cloned());
    // Nine activations (eight from inside the silo, one from the client) and QuoteGrain's turn
    // wait for the cache's lock; the silo's watchdogs, the pool's gate and idle workers wait too.
    assert_eq!(counts.get("orleans/grain_activation"), Some(&9), "{counts:?}");
    assert_eq!(counts.get("orleans/grain_call"), Some(&1), "{counts:?}");
    assert_eq!(counts.get("orleans/watchdog"), Some(&2), "{counts:?}");
    assert_eq!(counts.get("dotnet/thread_pool_gate"), Some(&1), "{counts:?}");
    assert_eq!(counts.get("dotnet/timer"), Some(&1), "{counts:?}");
    assert!(counts.get("dotnet/thread_pool_worker").is_some_and(|&n| n >= 1), "{counts:?}");
    // The lock's owner is the application's own thread: no framework role.
    assert_eq!(roles.get(&refresher), Some(&None), "CacheRefresher {refresher:#x}");
}

#[test]
fn the_orleans_first_screen_names_the_stuck_roles() {
    let made = knot_samples::workspace_root().join("target/samples/dotnet/orleans_silo/heap");
    let core = made.join("core");
    if !core.is_file() {
        knot_samples::skipped(&format!("skipping the Orleans dump ({} is made by samples/dotnet/make-dumps.sh orleans_silo)", core.display()));
        return;
    }
    let mut search_dirs = knot_samples::dotnet::runtime_dirs();
    search_dirs.push(knot_samples::workspace_root().join("target/samples/dotnet/artifacts/bin/orleans_silo/debug"));
    let locator = Locator { search_dirs, ..Locator::default() };
    let report = analysis::analyze(&core, &Options { locator, ..Options::default() }).unwrap_or_else(|e| panic!("{}: {e}", core.display()));
    // The dump's own SOS reading, beside it.
    let stacks = sos_stacks(&read(&made.join("sos/clrstack-all.txt")));
    let owners = syncblk(&read(&made.join("sos/syncblk.txt")));
    assert_eq!(owners.len(), 1, "{owners:?}");
    let (refresher, object, _) = owners[0];
    // Every managed thread's role is the one its SOS stack gives.
    for t in &report.threads {
        if let Some(frames) = stacks.get(&t.tid) {
            assert_eq!(t.role, knot::roles::role_of(frames.iter().map(String::as_str)), "thread {}", t.tid);
        }
    }
    let text = text::render(&report, &TextOptions::default());
    let first_screen: String = text.lines().take(16).collect::<Vec<_>>().join("\n");
    let want = format!("  Orleans: 9 grain activations and 1 grain call wait behind monitor on System.Object at {object:#x} (PriceCache._sync) — held by thread {refresher} (CacheRefresher)");
    assert!(first_screen.lines().any(|l| l == want), "want {want}\n{first_screen}");
}
