//! Threads' roles in the service's own words (issue 15 part 4), against a real Orleans 10 silo.
//! The roles' frame names (`analyzers/roles.toml`) meet SOS's `clrstack -all` of the wedged
//! `orleans_silo` sample, committed in `samples/dotnet/orleans_silo/sos/`; and when the dump
//! itself is here (~330 MB, made by `samples/dotnet/make-dumps.sh orleans_silo`, never
//! committed), knot's first screen names the stuck Orleans roles and the lock's owner as SOS's
//! `syncblk` does, and every thread's role is the one its SOS stack gives.

use crate::Options;
use crate::process::Locator;
use crate::report::text::{self, TextOptions};
use crate::roles::{RoleInputs, RuntimeMark};
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

fn role_counts(roles: impl Iterator<Item = Option<crate::roles::ThreadRole>>) -> BTreeMap<String, usize> {
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
    let roles: BTreeMap<u32, Option<crate::roles::ThreadRole>> = stacks.iter().map(|(&t, f)| (t, crate::roles::role_of(f.iter().map(String::as_str)))).collect();
    let counts = role_counts(roles.values().cloned());
    // Nine activations (eight from inside the silo, one from the client) and QuoteGrain's turn
    // wait for the cache's lock; the silo's watchdogs, the pool's gate and idle workers wait too.
    assert_eq!(counts.get("orleans/grain_activation"), Some(&9), "{counts:?}");
    assert_eq!(counts.get("orleans/grain_call"), Some(&1), "{counts:?}");
    assert_eq!(counts.get("orleans/watchdog"), Some(&2), "{counts:?}");
    assert_eq!(counts.get("dotnet/thread_pool_gate"), Some(&1), "{counts:?}");
    assert_eq!(counts.get("dotnet/timer"), Some(&1), "{counts:?}");
    assert!(counts.get("dotnet/thread_pool_worker").is_some_and(|&n| n >= 1), "{counts:?}");
    // GrainCaller, a plain thread, calls a PriceGrain whose activation is stuck in its
    // constructor: SOS shows the call delivered on the caller's thread, inside the activation's
    // lock (issue #30 item 8) — a role of its own.
    assert_eq!(counts.get("orleans/grain_call_from_outside"), Some(&1), "{counts:?}");
    let (caller, frames) = stacks
        .iter()
        .find(|(_, f)| f.iter().any(|n| n == "Knot.Samples.OrleansSilo.Program.CallStuckGrain"))
        .expect("GrainCaller's stack in the recording");
    for shown in [
        "System.Threading.Lock.EnterScope",
        "Orleans.Runtime.ActivationData.ReceiveRequest",
        "Orleans.Runtime.ActivationData.ReceiveMessage",
        "Orleans.Runtime.Messaging.MessageCenter.ReceiveMessage",
        "Orleans.Runtime.Messaging.MessageCenter.SendMessage",
        "Orleans.Runtime.GrainReference.InvokeAsync[[System.Int32, System.Private.CoreLib]]",
    ] {
        assert!(frames.iter().any(|n| n == shown), "GrainCaller {caller:#x} runs {shown}: {frames:?}");
    }
    assert_eq!(roles[caller].as_ref().map(|r| r.role.as_str()), Some("grain_call_from_outside"), "GrainCaller {caller:#x}");
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
    let report = crate::analyze(&core, &Options { locator, ..Options::default() }).unwrap_or_else(|e| panic!("{}: {e}", core.display()));
    // The dump's own SOS reading, beside it.
    let stacks = sos_stacks(&read(&made.join("sos/clrstack-all.txt")));
    let owners = syncblk(&read(&made.join("sos/syncblk.txt")));
    assert_eq!(owners.len(), 1, "{owners:?}");
    let (refresher, object, _) = owners[0];
    // Every managed thread's role is the one its SOS stack, its Thread.Name (sos/thread-names.txt)
    // and clrthreads' marks give.
    let names = sos_thread_names(&read(&made.join("sos/thread-names.txt")));
    let marks = clrthreads_roles(&read(&made.join("sos/clrthreads.txt")));
    for t in &report.threads {
        if let Some(frames) = stacks.get(&t.tid) {
            let functions: Vec<&str> = frames.iter().map(String::as_str).collect();
            let mark: Vec<RuntimeMark> = match marks.get(&t.tid).map(String::as_str) {
                Some("Finalizer") => vec![RuntimeMark::Finalizer],
                Some("Threadpool Worker") => vec![RuntimeMark::ThreadPoolWorker],
                _ => Vec::new(),
            };
            let want = crate::roles::role_of_thread(RoleInputs { functions: &functions, name: names.get(&t.tid).map(String::as_str), marks: &mark });
            assert_eq!(t.role, want, "thread {}", t.tid);
        }
    }
    let text = text::render(&report, &TextOptions::default());
    let first_screen: String = text.lines().take(16).collect::<Vec<_>>().join("\n");
    let want = format!("  Orleans: 9 grain activations and 1 grain call wait behind monitor on System.Object at {object:#x} (PriceCache._sync) — held by thread {refresher} (CacheRefresher)");
    assert!(first_screen.lines().any(|l| l == want), "want {want}\n{first_screen}");
}

/// SOS `clrthreads`: each OS tid with the thread's special role in parentheses (`Finalizer`,
/// `Threadpool Worker`), when it has one.
fn clrthreads_roles(text: &str) -> BTreeMap<u32, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let c: Vec<&str> = line.split_whitespace().collect();
        // DBG ID OSID ThreadOBJ State GCMode AllocContext Domain LockCount Apt [Exception]
        if c.len() < 10 || c[0].parse::<u32>().is_err() || c[3].len() != 16 {
            continue;
        }
        let Ok(tid) = u32::from_str_radix(c[2], 16) else { continue };
        if let (Some(open), Some(close)) = (line.rfind('('), line.rfind(')'))
            && open < close {
                out.insert(tid, line[open + 1..close].to_string());
            }
    }
    out
}

/// sos/thread-names.txt: OS tid → the managed `Thread.Name` (rows without one say `<null>`).
fn sos_thread_names(text: &str) -> BTreeMap<u32, String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let c: Vec<&str> = l.split_whitespace().collect();
            let name = c.get(5..)?.join(" ");
            (!name.is_empty() && name != "<null>").then_some((c.get(3)?.parse().ok()?, name))
        })
        .collect()
}

/// threads.txt, read from /proc at dump time: tid → the kernel's name for the thread.
fn proc_names(text: &str) -> BTreeMap<u32, String> {
    text.lines().filter(|l| !l.starts_with('#')).filter_map(|l| {
        let c: Vec<&str> = l.split('\t').collect();
        Some((c.first()?.parse().ok()?, c.get(3)?.to_string()))
    }).collect()
}

/// Every `.NET …` name the committed samples' threads carried at dump time (their threads.txt,
/// from /proc) is one analyzers/roles.toml gives a .NET role.
#[test]
fn every_runtime_thread_name_the_samples_carried_has_a_role() {
    let mut names = std::collections::BTreeSet::new();
    for d in knot_samples::dotnet::dumps("threads.txt", false) {
        for n in proc_names(&read(&d.dir.join("threads.txt"))).into_values().filter(|n| n.starts_with(".NET ")) {
            names.insert(n);
        }
    }
    assert!(names.len() >= 8, "{names:?}");
    for n in &names {
        let r = crate::roles::role_of_thread(crate::roles::RoleInputs { functions: &[], name: Some(n), marks: &[] });
        assert_eq!(r.map(|r| r.framework), Some("dotnet".to_string()), "{n}");
    }
}

/// On real dumps (no thread names but the managed ones in them), the finalizer is found through
/// the runtime's own structures: the thread SOS clrthreads marks "(Finalizer)", the one the
/// kernel named `.NET Finalizer` at dump time; the pool's workers ("(Threadpool Worker)") have a
/// role; text and HTML show the roles in the thread list.
#[test]
fn the_finalizer_and_pool_workers_have_the_roles_clrthreads_gives() {
    let mut compared = 0;
    for d in knot_samples::dotnet::dumps("sos/clrthreads.txt", false) {
        if !["monitor_abba/heap", "pool_queue/heap", "sync_over_async/heap"].contains(&d.name().as_str()) {
            continue;
        }
        let sos = clrthreads_roles(&read(&d.dir.join("sos/clrthreads.txt")));
        let proc = d.dir.join("threads.txt").is_file().then(|| proc_names(&read(&d.dir.join("threads.txt"))));
        let locator = Locator { sysroot: d.sysroot.clone(), search_dirs: d.search_dirs.clone(), ..Locator::default() };
        let report = crate::analyze(&d.core, &Options { locator, ..Options::default() }).unwrap_or_else(|e| panic!("{}: {e}", d.name()));
        let role = |tid: u32| report.threads.iter().find(|t| t.tid == tid).and_then(|t| t.role.clone());
        let finalizers: Vec<u32> = sos.iter().filter(|(_, r)| *r == "Finalizer").map(|(t, _)| *t).collect();
        assert_eq!(finalizers.len(), 1, "{}: {sos:?}", d.name());
        let fin = finalizers[0];
        assert_eq!(role(fin).map(|r| (r.framework, r.role)), Some(("dotnet".into(), "finalizer".into())), "{}: thread {fin}", d.name());
        if let Some(names) = &proc {
            assert_eq!(names.get(&fin).map(String::as_str), Some(".NET Finalizer"), "{}: /proc's name of {fin}", d.name());
        }
        let others: Vec<u32> = report.threads.iter().filter(|t| t.role.as_ref().is_some_and(|r| r.role == "finalizer")).map(|t| t.tid).collect();
        assert_eq!(others, vec![fin], "{}: one finalizer", d.name());
        for (tid, _) in sos.iter().filter(|(_, r)| *r == "Threadpool Worker") {
            assert!(role(*tid).is_some(), "{}: worker {tid} has no role", d.name());
        }
        let text = text::render(&report, &TextOptions::default());
        assert!(text.lines().any(|l| l.contains(&format!("{fin}")) && l.contains("[.NET finalizer thread]")), "{}: the finalizer's role in the text\n{text}", d.name());
        let html = crate::report::html::render(&report);
        assert!(html.contains("<span class=\"role\">[.NET finalizer thread]</span>"), "{}: the finalizer's role in the HTML", d.name());
        compared += 1;
    }
    assert!(compared == 3 || knot_samples::dotnet::dumps("sos/clrthreads.txt", false).is_empty(), "{compared} dumps compared");
}
