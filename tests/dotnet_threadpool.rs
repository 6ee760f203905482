//! The thread pool against SOS on every .NET dump with SOS's `threadpool` beside it: the counters
//! (`sos/threadpool.txt`: Workers Total, Running, Idle, Min and Max Limit, CPU utilization) equal
//! `dotnet.thread_pool`'s, and where SOS could not read the pool ("Failed to obtain ThreadPool
//! data": it was never started) knot's counters are null with the reason said; the queued work
//! items (`sos/threadpool-wi.txt`: every item, `sos/threadpool-stat.txt`: per type MethodTable,
//! count and name) equal knot's total and `work_item_types`. The first screen says them. Hostile
//! statics and queues (garbage, a cyclic or huge segment chain) give a bounded reading and a
//! reason, never a panic. Knot reads all of it through CoreLib's statics (`runtimes::dotnet::statics`).

mod dumpedit;

mod common;

use common::DotnetDump as Dump;
use knot::Options;
use knot::process::Process;
use knot::report::Report;
use knot::report::text::{self, TextOptions};
use serde_json::Value;
use std::collections::BTreeMap;

fn dumps() -> Vec<Dump> {
    common::dotnet_dumps_with_net8("sos/threadpool.txt")
}

fn analyze(d: &Dump) -> Report {
    let process = Process::open(&d.core, &d.locator).unwrap_or_else(|e| panic!("{}: knot cannot open the core: {e}", d.name));
    knot::report_for(&process, &Options { locator: d.locator.clone(), ..Options::default() })
}

fn loaded() -> &'static [(Dump, Report)] {
    static ALL: std::sync::OnceLock<Vec<(Dump, Report)>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| dumps().into_iter().map(|d| {
        let r = analyze(&d);
        (d, r)
    }).collect())
}

fn pool_json(r: &Report) -> Value {
    serde_json::to_value(r).expect("report serializes")["dotnet"]["thread_pool"].clone()
}

fn oracle(d: &Dump, file: &str) -> Option<String> {
    std::fs::read_to_string(d.dir.join("sos").join(file)).ok()
}

/// `threadpool`'s table: `Workers Total:    8` → ("Workers Total", 8); `CPU utilization:  0%`.
fn parse_threadpool(text: &str) -> Option<BTreeMap<String, u64>> {
    if text.contains("Failed to obtain ThreadPool data") {
        return None;
    }
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else { continue };
        if let Ok(n) = v.trim().trim_end_matches('%').parse::<u64>() {
            out.insert(k.trim().to_string(), n);
        }
    }
    Some(out)
}

/// `threadpool -stat`'s rows: (MethodTable, count, name), and `Total N objects`.
fn parse_stat(text: &str) -> (Vec<(u64, u64, String)>, u64) {
    let mut rows = Vec::new();
    let mut total = 0;
    let mut in_rows = false;
    for line in text.lines() {
        if line.trim_start().starts_with("MT ") {
            in_rows = true;
            continue;
        }
        if let Some(rest) = line.strip_prefix("Total ") {
            total = rest.split_whitespace().next().and_then(|n| n.replace(',', "").parse().ok()).expect("Total N objects");
            break;
        }
        if line.contains("No queued work items") {
            break;
        }
        if in_rows {
            let mut f = line.split_whitespace();
            let (Some(mt), Some(count), Some(_size)) = (f.next(), f.next(), f.next()) else { continue };
            let name = f.collect::<Vec<_>>().join(" ");
            rows.push((u64::from_str_radix(mt, 16).expect("MT"), count.replace(',', "").parse().expect("count"), name));
        }
    }
    (rows, total)
}

fn n(v: &Value) -> Option<u64> {
    v.as_u64()
}

#[test]
fn counters_equal_sos_threadpool() {
    let mut compared = 0;
    for (d, r) in loaded() {
        let Some(text) = oracle(d, "threadpool.txt") else { continue };
        let tp = pool_json(r);
        match parse_threadpool(&text) {
            None => {
                // SOS could not read the pool: knot has no counters either, and says why.
                if !tp.is_null() {
                    assert!(tp["workers_running"].is_null(), "{}: SOS has no pool, knot reads {tp}", d.name);
                    let why = tp["unavailable"].to_string();
                    assert!(why.contains("never started") || why.contains("never loaded") || why.contains("never initialized"), "{}: {why}", d.name);
                }
            }
            Some(sos) => {
                let want = |k: &str| *sos.get(k).unwrap_or_else(|| panic!("{}: SOS threadpool has no {k}", d.name));
                assert_eq!(n(&tp["workers_running"]), Some(want("Workers Running")), "{}: Running", d.name);
                assert_eq!(n(&tp["workers_idle"]), Some(want("Workers Idle")), "{}: Idle", d.name);
                assert_eq!(n(&tp["workers_running"]).zip(n(&tp["workers_idle"])).map(|(a, b)| a + b), Some(want("Workers Total")), "{}: Total", d.name);
                assert_eq!(n(&tp["workers_total"]), Some(want("Workers Total")), "{}: workers by name", d.name);
                assert_eq!(n(&tp["min_workers"]), Some(want("Worker Min Limit")), "{}: Min", d.name);
                assert_eq!(n(&tp["max_workers"]), Some(want("Worker Max Limit")), "{}: Max", d.name);
                assert_eq!(n(&tp["cpu_utilization"]), Some(want("CPU utilization")), "{}: CPU", d.name);
                compared += 1;
            }
        }
    }
    if loaded().iter().any(|(d, _)| d.name.starts_with("sync_over_async/heap")) {
        assert!(compared >= 2, "the starved and the idle pool are compared");
    }
}

#[test]
fn queued_work_items_equal_sos_threadpool_wi_and_stat() {
    for (d, r) in loaded() {
        let (Some(wi), Some(stat)) = (oracle(d, "threadpool-wi.txt"), oracle(d, "threadpool-stat.txt")) else { continue };
        let tp = pool_json(r);
        if wi.contains("Failed to obtain ThreadPool data") {
            // The program never started the pool (heap_population/server): SOS has none to list,
            // and knot reads no queue either.
            assert!(tp.is_null() || tp["queued_work_items"].is_null(), "{}: SOS has no pool, knot reads {tp}", d.name);
            continue;
        }
        let items = wi.lines().filter(|l| l.starts_with("[Global")).count() as u64;
        let (rows, total) = parse_stat(&stat);
        assert_eq!(total, rows.iter().map(|r| r.1).sum::<u64>(), "{}: SOS's own total", d.name);
        assert_eq!(items, total, "{}: threadpool -wi and -stat agree", d.name);
        assert_eq!(n(&tp["queued_work_items"]), Some(items), "{}: queued work items; knot: {tp}", d.name);
        let high = wi.lines().filter(|l| l.starts_with("[Global high-pri]")).count() as u64;
        assert_eq!(n(&tp["high_priority_queue"]), Some(high), "{}: high-priority", d.name);
        let local: u64 = tp["local_queues"].as_array().expect("local_queues").iter().map(|q| q["work_items"].as_u64().expect("count")).sum();
        assert_eq!(n(&tp["global_queue"]).map(|g| g + high + local), Some(items), "{}: global + high + local", d.name);
        let mut want: Vec<(u64, u64, String)> = rows;
        want.sort();
        let mut got: Vec<(u64, u64, String)> = tp["work_item_types"]
            .as_array()
            .expect("work_item_types")
            .iter()
            .map(|t| (u64::from_str_radix(t["method_table"].as_str().expect("mt").trim_start_matches("0x"), 16).expect("hex"), t["count"].as_u64().expect("count"), t["name"].as_str().expect("name").to_string()))
            .collect();
        got.sort();
        assert_eq!(got, want, "{}: work item types", d.name);
    }
}

#[test]
fn the_first_screen_says_the_pool() {
    for (d, r) in loaded() {
        let Some(sos) = oracle(d, "threadpool.txt").as_deref().and_then(parse_threadpool) else { continue };
        let out = text::render(r, &TextOptions::default());
        let line = out.lines().find(|l| l.trim_start().starts_with("thread pool:")).unwrap_or_else(|| panic!("{}: no thread-pool line in\n{out}", d.name));
        assert!(line.contains(&format!("{} running, {} idle", sos["Workers Running"], sos["Workers Idle"])), "{}: {line}", d.name);
        assert!(!line.contains("not read"), "{}: {line}", d.name);
        if let Some(stat) = oracle(d, "threadpool-stat.txt") {
            let (_, total) = parse_stat(&stat);
            assert!(line.contains(&format!("{total} queued work item")), "{}: {line}", d.name);
        }
    }
}

/// `threadpoolqueue`: the items under "global work item queue" and under "local per thread work
/// items" (SOS's `threadpool -wi` does not tell them apart).
fn parse_threadpoolqueue(text: &str) -> (u64, u64) {
    let (mut global, mut local, mut section) = (0, 0, 0);
    for line in text.lines() {
        if line.starts_with("global work item queue") {
            section = 1;
        } else if line.starts_with("local per thread work items") {
            section = 2;
        } else if line.starts_with("0x") {
            match section {
                1 => global += 1,
                2 => local += 1,
                _ => {}
            }
        }
    }
    (global, local)
}

#[test]
fn global_and_local_queues_equal_sos_threadpoolqueue() {
    let mut compared = 0;
    for (d, r) in loaded() {
        let Some(text) = oracle(d, "threadpoolqueue.txt") else { continue };
        let (global, local) = parse_threadpoolqueue(&text);
        let tp = pool_json(r);
        let knot_local: u64 = tp["local_queues"].as_array().expect("local_queues").iter().map(|q| q["work_items"].as_u64().expect("count")).sum();
        // threadpoolqueue reads `workItems` alone, not the high-priority queue (aspnet_pool's
        // TimerQueue is there; tests/dotnet_aspnet.rs compares it with `threadpool -wi`).
        assert_eq!((n(&tp["global_queue"]), knot_local), (Some(global), local), "{}: global and local", d.name);
        compared += 1;
    }
    if loaded().iter().any(|(d, _)| d.name.starts_with("pool_queue/heap")) {
        assert!(compared >= 2, "sync_over_async and pool_queue are compared");
    }
}

/// Every worker blocked inside a work item with work queued behind them is starvation, said with
/// the queue's length: pool_queue (workers at a gate, no task waits) and sync_over_async.
#[test]
fn starvation_says_the_work_queued_behind_the_workers() {
    for (d, r) in loaded() {
        let Some(stat) = oracle(d, "threadpool-stat.txt") else { continue };
        let (_, total) = parse_stat(&stat);
        let out = text::render(r, &TextOptions::default());
        let verdict = out.lines().find(|l| l.starts_with("Verdict:")).expect("verdict line");
        let tp = pool_json(r);
        let (blocked, workers) = (tp["workers_blocked"].as_array().map_or(0, Vec::len), tp["worker_tids"].as_array().map_or(0, Vec::len));
        // Every worker blocked, or — while the pool injects workers — most, with none idle.
        let all_blocked = workers > 0 && (blocked == workers || (n(&tp["workers_idle"]) == Some(0) && blocked * 2 > workers));
        // At its maximum, with the workers waiting for work queued behind them, it is a cycle
        // through the pool (sync_over_async); else starvation (pool_queue: a gate, no task).
        let through_pool = r.deadlocks.iter().any(|c| c.thread_pool.is_some());
        if all_blocked && total > 0 && through_pool {
            assert_eq!(tp["max_workers"], tp["workers_total"], "{}", d.name);
            assert!(verdict.contains(&format!("DEADLOCK through the thread pool: all {} workers (max {}) are blocked", tp["workers_total"], tp["max_workers"])), "{}: {verdict}", d.name);
            assert!(verdict.contains(&if total == 1 { "1 work item waits".to_string() } else { format!("{total} work items wait") }), "{}: {verdict}", d.name);
        } else if all_blocked && total > 0 {
            assert_eq!(serde_json::to_value(r).expect("json")["verdict"], "thread_pool_starved", "{}: {verdict}", d.name);
            assert!(verdict.contains(&format!("{total} work items queued behind them")), "{}: {verdict}", d.name);
        } else {
            assert!(!verdict.contains("THREAD POOL STARVED"), "{}: {verdict}", d.name);
        }
    }
}

/// pool_queue: worker 0 (`OccupyWorker(id = 0)` in SOS `clrstack -all -p`) queued the 5
/// LedgerFlush items on its own local queue; knot names that worker as the queue's owner (through
/// its thread static), and every local queue belongs to a worker.
#[test]
fn local_queues_belong_to_the_workers_that_queued_into_them() {
    for (d, r) in loaded() {
        // Other samples record `clrstack -all -p` too (redis_pool): this is pool_queue's shape.
        let Some(text) = oracle(d, "clrstack-all-params.txt").filter(|_| d.name.starts_with("pool_queue/")) else { continue };
        let mut tid = None;
        let mut in_occupy = false;
        let mut worker0 = None;
        for line in text.lines() {
            if let Some(h) = line.strip_prefix("OS Thread Id: 0x") {
                tid = u64::from_str_radix(h.split_whitespace().next().unwrap_or(""), 16).ok();
                in_occupy = false;
            } else if line.contains("Program.OccupyWorker(") {
                in_occupy = true;
            } else if in_occupy && line.trim_start().starts_with("id (") {
                if line.trim_end().ends_with("= 0x0000000000000000") {
                    worker0 = tid;
                }
                in_occupy = false;
            }
        }
        let worker0 = worker0.unwrap_or_else(|| panic!("{}: no OccupyWorker(id = 0) in clrstack -all -p", d.name));
        let tp = pool_json(r);
        let workers: Vec<u64> = tp["worker_tids"].as_array().expect("worker_tids").iter().filter_map(Value::as_u64).collect();
        let queues = tp["local_queues"].as_array().expect("local_queues");
        assert!(!queues.is_empty(), "{}", d.name);
        for q in queues {
            let owner = q["worker_tid"].as_u64().unwrap_or_else(|| panic!("{}: local queue {} has no owner", d.name, q["address"]));
            assert!(workers.contains(&owner), "{}: {owner} is no worker", d.name);
            let items = q["work_items"].as_u64().expect("count");
            assert_eq!(items > 0, owner == worker0, "{}: queue of {owner} holds {items} (worker 0 is {worker0})", d.name);
        }
        let out = text::render(r, &TextOptions::default());
        assert!(out.contains(&format!("5 on thread {worker0})")), "{}: {out}", d.name);
    }
}

/// The HTML page's header says what the text's first lines say, first: a deadlock through the
/// pool (sync_over_async) or a starved pool with its cause (pool_queue) in the pool's words,
/// under the verdict's word, before the count of blocked threads.
#[test]
fn the_html_header_says_the_pool_as_the_text_does() {
    let unescape = |s: &str| s.replace("&quot;", "\"").replace("&#39;", "'").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&");
    let mut compared = 0;
    for (d, r) in loaded() {
        let out = text::render(r, &TextOptions::default());
        let verdict = out.lines().find(|l| l.starts_with("Verdict:")).expect("verdict line");
        let words = if let Some(rest) = verdict.strip_prefix("Verdict: DEADLOCK through the thread pool") {
            format!("through the thread pool{rest}")
        } else if let Some(rest) = verdict.strip_prefix("Verdict: THREAD POOL STARVED — ") {
            rest.to_string()
        } else {
            continue;
        };
        let page = knot::report::html::render(r);
        let start = page.find("<p class=\"summary\">").unwrap_or_else(|| panic!("{}: no summary in the header", d.name)) + "<p class=\"summary\">".len();
        let summary = unescape(&page[start..start + page[start..].find("</p>").expect("summary's end")]);
        // The text's verdict line, past its word, is the summary's first line.
        assert_eq!(summary.split("<br>").next(), Some(words.as_str()), "{}", d.name);
        if let Some(cause) = out.lines().find_map(|l| l.strip_prefix("  cause: ")) {
            assert!(summary.contains(&format!("<br>cause: {cause}")), "{}: {summary}", d.name);
        }
        compared += 1;
    }
    if loaded().iter().any(|(d, _)| d.name.starts_with("pool_queue/heap")) {
        assert!(compared >= 2, "sync_over_async and pool_queue are compared");
    }
}
