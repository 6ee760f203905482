//! Pollers are not blocked (issue #30 item 7). The committed `timed_waits` sample (SOS's reading
//! beside it) has a dedicated thread whose body is a periodic loop around `WaitOne(1000)` on an
//! event nobody sets (`Poller`): idle, in a state of its own, not counted blocked. The boundary:
//! the same timed wait made while holding a monitor two threads wait for (`GateHolder`), a loop
//! waiting with no timeout (`Watcher`) and a timed wait deep inside a request (`Requester`)
//! each wait for something, and stay blocked. The truth: 5 of its threads blocked.
//!
//! On the Orleans silo when its dump is made here (`samples/dotnet/make-dumps.sh orleans_silo`),
//! the event counter poller and the silo watchdog are idle the same way.

use knot::Options;
use knot::process::Locator;
use knot::report::{Report, ThreadState};
use knot::report::text::{self, TextOptions};

fn analyze(d: &knot_samples::dotnet::DotnetDump) -> Report {
    let locator = Locator { sysroot: d.sysroot.clone(), search_dirs: d.search_dirs.clone(), ..Locator::default() };
    knot::analyze(&d.core, &Options { locator, ..Options::default() }).unwrap_or_else(|e| panic!("{}: {e}", d.name()))
}

fn periodic() -> ThreadState {
    ThreadState::Sleeping { syscall: "WaitHandle.WaitOne(timeout)".into() }
}

#[test]
fn a_poller_is_idle_and_timed_waits_that_wait_for_something_stay_blocked() {
    let dumps: Vec<_> = knot_samples::dotnet::dumps("sos/clrstack-all.txt", false).into_iter().filter(|d| d.sample == "timed_waits").collect();
    assert_eq!(dumps.len(), 1, "the committed timed_waits dump");
    let r = analyze(&dumps[0]);
    let thread = |name: &str| r.threads.iter().find(|t| t.name.as_deref() == Some(name)).unwrap_or_else(|| panic!("no thread {name}"));
    let poller = thread("Poller");
    assert_eq!(poller.state, periodic());
    assert_eq!(poller.blocked_on, None);
    for name in ["GateHolder", "Watcher", "Requester", "GateWaiter1", "GateWaiter2"] {
        let t = thread(name);
        assert!(t.blocked_on.is_some() && matches!(t.state, ThreadState::Futex { .. }), "{name} waits for something: {:?} on {:?}", t.state, t.blocked_on);
    }
    let blocked: Vec<&str> = r.threads.iter().filter(|t| t.blocked_on.is_some()).filter_map(|t| t.name.as_deref()).collect();
    assert_eq!(blocked.len(), 5, "blocked: {blocked:?}");
    let text = text::render(&r, &TextOptions::default());
    let headline = text.lines().find(|l| l.starts_with("Verdict:")).expect("verdict line");
    assert!(headline.contains(&format!("; 5 of {} threads blocked", r.threads.len())), "{headline}");
}

#[test]
fn the_orleans_silos_counter_poller_and_watchdog_are_idle() {
    let dumps: Vec<_> = knot_samples::dotnet::dumps("sos/clrstack-all.txt", true).into_iter().filter(|d| d.sample == "orleans_silo").collect();
    if dumps.is_empty() {
        knot_samples::skipped("skipping the Orleans silo: its dump is not here (samples/dotnet/make-dumps.sh orleans_silo makes it)");
        return;
    }
    for d in &dumps {
        let r = analyze(d);
        let mut pollers = 0;
        for t in &r.threads {
            let managed: Vec<&str> = t.frames.iter().filter(|f| f.managed).filter_map(|f| f.function.as_deref()).collect();
            if managed.iter().any(|m| *m == "System.Diagnostics.Tracing.CounterGroup.PollForValues" || *m == "Orleans.Runtime.Watchdog.RunPlatformWatchdog") {
                assert_eq!((&t.state, &t.blocked_on), (&periodic(), &None), "{}: thread {} ({managed:?})", d.name(), t.tid);
                pollers += 1;
            }
        }
        assert!(pollers >= 1, "{}: no poller found", d.name());
    }
}
