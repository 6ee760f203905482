//! Async stacks against SOS: on every .NET dump with SOS's `dumpasync` beside it
//! (`sos/dumpasync.txt`, recorded by `samples/dotnet/make-dumps.sh`), knot's `dotnet.async` lists
//! the same stacks in the same order, each with the same awaited type and address and the same
//! frames (address, MethodTable, state, type, indentation), and groups the identical ones. Then
//! damaged continuations (a cycle, a pointer to nothing, a huge continuation list) in a copy of
//! the async_tcs dump: bounded, said, no panic. A dump that is absent is skipped with a message.

mod dumpedit;

mod common;

use common::DotnetDump as Dump;
use knot::Options;
use knot::process::Locator;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn dumps() -> Vec<Dump> {
    common::dotnet_dumps_with_net8("sos/dumpasync.txt")
}

fn report(core: &Path, locator: &Locator) -> Value {
    let r = knot::analyze(core, &Options { locator: locator.clone(), ..Options::default() }).unwrap_or_else(|e| panic!("{}: {e}", core.display()));
    serde_json::to_value(&r).expect("report serialises")
}

/// One stack as SOS prints it: the awaited (type, address) and frames (address, MT, state,
/// type, depth).
#[derive(Debug, PartialEq)]
struct Stack {
    awaiting: Option<(String, u64)>,
    frames: Vec<(u64, u64, String, String, u32)>,
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap_or_else(|_| panic!("not hex: {s:?}"))
}

/// `dumpasync`'s `STACK n` blocks. An awaiting line indents the frames one level.
fn parse_sos(text: &str) -> Vec<Stack> {
    let mut out: Vec<Stack> = Vec::new();
    for line in text.lines() {
        if line.starts_with("STACK ") {
            out.push(Stack { awaiting: None, frames: Vec::new() });
            continue;
        }
        let Some(s) = out.last_mut() else { continue };
        if let Some(rest) = line.strip_prefix("<< Awaiting: ") {
            let rest = rest.trim_end_matches(" >>");
            let addr = &rest[..16];
            // The MethodTable is 16 hex digits; the type follows it, after a space or not.
            let ty = rest[17 + 16..].trim();
            s.awaiting = Some((ty.to_string(), hex(addr)));
            continue;
        }
        let trimmed = line.trim_start();
        if trimmed.is_empty() {
            continue;
        }
        let indent = (line.len() - trimmed.len()) as u32 / 2;
        let depth = indent - u32::from(s.awaiting.is_some());
        let (addr, rest) = trimmed.split_once(' ').expect("frame address");
        let (mt, rest) = rest.split_once(' ').expect("frame MethodTable");
        let open = rest.find('(').expect("state");
        let close = open + rest[open..].find(')').expect("state end");
        let state = rest[open + 1..close].to_string();
        let ty = rest[close + 1..].trim().to_string();
        s.frames.push((hex(addr), hex(mt), state, ty, depth));
    }
    out
}

fn knot_stacks(r: &Value) -> Vec<Stack> {
    r["dotnet"]["async"]
        .as_array()
        .expect("dotnet.async")
        .iter()
        .map(|s| Stack {
            awaiting: s["awaiting"].as_object().map(|a| (a["type"].as_str().expect("type").to_string(), hex(a["address"].as_str().expect("address")))),
            frames: s["frames"]
                .as_array()
                .expect("frames")
                .iter()
                .map(|f| {
                    (
                        hex(f["address"].as_str().expect("address")),
                        hex(f["method_table"].as_str().expect("mt")),
                        f["state"].as_str().expect("state").to_string(),
                        f["type"].as_str().expect("type").to_string(),
                        f["depth"].as_u64().expect("depth") as u32,
                    )
                })
                .collect(),
        })
        .collect()
}

#[test]
fn async_stacks_equal_sos_dumpasync() {
    let mut compared = 0;
    for d in dumps() {
        let sos = parse_sos(&std::fs::read_to_string(d.dir.join("sos/dumpasync.txt")).expect("dumpasync.txt"));
        let r = report(&d.core, &d.locator);
        let knot = knot_stacks(&r);
        assert_eq!(knot.len(), sos.len(), "{}: number of async stacks", d.name);
        for (i, (k, s)) in knot.iter().zip(&sos).enumerate() {
            assert_eq!(k, s, "{}: STACK {}", d.name, i + 1);
        }
        // Groups: every stack in exactly one, members identical but for addresses.
        let groups = r["dotnet"]["async_groups"].as_array().expect("async_groups");
        let mut members: Vec<u64> = groups.iter().flat_map(|g| g["stacks"].as_array().expect("stacks").iter().map(|i| i.as_u64().expect("index"))).collect();
        members.sort_unstable();
        assert_eq!(members, (0..knot.len() as u64).collect::<Vec<_>>(), "{}: groups cover every stack once", d.name);
        for g in groups {
            let idx: Vec<usize> = g["stacks"].as_array().expect("stacks").iter().map(|i| i.as_u64().expect("index") as usize).collect();
            let shape = |s: &Stack| (s.awaiting.as_ref().map(|a| a.0.clone()), s.frames.iter().map(|f| (f.2.clone(), f.3.clone(), f.4)).collect::<Vec<_>>());
            for &i in &idx[1..] {
                assert_eq!(shape(&knot[i]), shape(&knot[idx[0]]), "{}: group members read the same", d.name);
            }
        }
        assert!(r["dotnet"]["async_tasks"]["cut"].as_array().is_some_and(|c| c.is_empty()), "{}: nothing cut", d.name);
        compared += 1;
    }
    eprintln!("{compared} dumps compared with SOS dumpasync");
}

/// The committed async_tcs dump, by its SOS reading: the shapes the sample was made to have.
#[test]
fn async_tcs_reads_as_made() {
    let Some(d) = dumps().into_iter().find(|d| d.name == "async_tcs/heap") else {
        knot_samples::skipped("skipping: no committed async_tcs dump");
        return;
    };
    let r = report(&d.core, &d.locator);
    let stacks = knot_stacks(&r);
    // Four orders with their own reply, one shared reply with two continuations.
    assert_eq!(stacks.len(), 5);
    let fan_out = &stacks[4];
    assert_eq!(fan_out.frames.iter().filter(|f| f.4 == 1).count(), 2, "the shared reply has two continuations");
    let groups = r["dotnet"]["async_groups"].as_array().expect("groups");
    assert_eq!(groups[0]["stacks"].as_array().map(Vec::len), Some(3), "three identical stacks group");
    // The text report shows the groups.
    let text = knot::report::text::render(&knot::analyze(&d.core, &Options { locator: d.locator.clone(), ..Options::default() }).expect("report"), &Default::default());
    assert!(text.contains("Async stacks"), "{text}");
    assert!(text.contains("3 × "), "{text}");
}

fn scratch_core(d: &Dump, name: &str) -> PathBuf {
    let dir = knot_samples::out_dir().join("async-edits");
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let to = dir.join(name);
    let mut raw = Vec::new();
    let mut z = flate2::read::GzDecoder::new(std::fs::File::open(&d.core).expect("core.gz"));
    std::io::Read::read_to_end(&mut z, &mut raw).expect("gunzip");
    std::fs::write(&to, &raw).expect("write scratch core");
    to
}

/// Damaged continuations: a cycle, a pointer to nothing, a continuation list that claims two
/// billion items. Each stack stays bounded and says why it was cut.
#[test]
fn damaged_continuations_are_bounded_and_said() {
    let Some(d) = dumps().into_iter().find(|d| d.name == "async_tcs/heap") else {
        knot_samples::skipped("skipping: no committed async_tcs dump");
        return;
    };
    let clean = knot_stacks(&report(&d.core, &d.locator));
    let path = scratch_core(&d, "async_tcs-damaged");
    let mut core = std::fs::read(&path).expect("read scratch core");
    const CONTINUATION: u64 = 0x20; // Task.m_continuationObject (.NET 10)
    // Stack 2: HandleOrderAsync's box continues to FetchFromBackendAsync's: a cycle.
    let s2 = &clean[1].frames;
    dumpedit::poke_u64(&mut core, s2[3].0 + CONTINUATION, s2[1].0);
    // Stack 3: the reply task's continuation points at unmapped memory.
    let s3 = &clean[2].frames;
    dumpedit::poke_u64(&mut core, s3[0].0 + CONTINUATION, 0x0000_dead_0000_0000);
    // Stack 5: the shared reply's List<object> of continuations: its array claims 2^31 - 1 items.
    let s5 = &clean[4].frames;
    let list = dumpedit::peek_u64(&core, s5[0].0 + CONTINUATION);
    let items = dumpedit::peek_u64(&core, list + 8); // List<T>._items
    dumpedit::poke(&mut core, items + 8, &0x7fff_ffffu32.to_le_bytes());
    std::fs::write(&path, &core).expect("write damaged core");
    drop(core);
    let r = report(&path, &d.locator);
    let _ = std::fs::remove_file(&path);
    let knot = knot_stacks(&r);
    let stacks = r["dotnet"]["async"].as_array().expect("async");
    let cut: Vec<&str> = stacks.iter().filter_map(|s| s["cut"].as_str()).collect();
    assert!(cut.iter().any(|c| c.contains("cycle")), "the cycle is said: {cut:?}");
    let second = knot.iter().find(|s| s.frames[0].0 == s2[0].0).expect("stack 2 still listed");
    assert_eq!(second.frames.len(), 4, "the cycle ends the stack at the repeated frame");
    // Stack 3's reply has no continuation left: it has no async method, so SOS would not list
    // it either; its async methods are now top-level stacks of their own.
    assert!(!knot.iter().any(|s| s.frames[0].0 == s3[0].0), "a task with no async method is no stack");
    assert!(knot.iter().any(|s| s.frames[0].0 == s3[1].0), "the chain above the broken pointer is a stack of its own");
    let said = r["dotnet"]["async_tasks"]["cut"].as_array().expect("cut");
    assert!(said.iter().any(|c| c.as_str().is_some_and(|c| c.contains("2147483647 slots"))), "the huge list is said: {said:?}");
}

/// `sos/thread-names.txt`: managed thread name → OS tid.
fn thread_tid(dir: &Path, name: &str) -> u32 {
    let text = std::fs::read_to_string(dir.join("sos/thread-names.txt")).expect("thread-names.txt");
    text.lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            (cols.len() >= 6 && cols[cols.len() - 1] == name).then(|| cols[3].parse().ok()).flatten()
        })
        .next()
        .unwrap_or_else(|| panic!("no thread {name} in {}", dir.display()))
}

/// `sos/semaphores.txt`: the fields of the one SemaphoreSlim.
fn sos_semaphore(dir: &Path) -> std::collections::BTreeMap<String, u64> {
    let text = std::fs::read_to_string(dir.join("sos/semaphores.txt")).expect("semaphores.txt");
    let line = text.lines().find(|l| l.starts_with("object ")).expect("an object line");
    let mut out = std::collections::BTreeMap::new();
    let mut words = line.split_whitespace();
    out.insert("object".to_string(), hex(words.nth(1).expect("address")));
    for w in words {
        if let Some((k, v)) = w.split_once('=') {
            out.insert(k.to_string(), hex(v));
        }
    }
    out
}

/// The SemaphoreSlim held by an async flow: a lock of kind `semaphore_slim` with SOS's count,
/// the two threads in `Wait()` as waiters, the three `WaitAsync` flows (the TaskNodes SOS's
/// dumpasync shows under RefreshCacheAsync) as async waiters; the first screen says it.
#[test]
fn semaphore_slim_has_its_sync_and_async_waiters() {
    let Some(d) = dumps().into_iter().find(|d| d.name == "semaphore_async/heap") else {
        knot_samples::skipped("skipping: no committed semaphore_async dump");
        return;
    };
    let sos = sos_semaphore(&d.dir);
    let r = report(&d.core, &d.locator);
    let locks: Vec<&Value> = r["locks"].as_array().expect("locks").iter().filter(|l| l["kind"] == "semaphore_slim").collect();
    assert_eq!(locks.len(), 1, "one SemaphoreSlim is waited for");
    let l = locks[0];
    assert_eq!(hex(l["address"].as_str().expect("address")), sos["object"]);
    assert_eq!(l["managed"]["current_count"].as_u64(), Some(sos["m_currentCount"]));
    assert_eq!(l["managed"]["max_count"].as_u64(), Some(sos["m_maxCount"]));
    let mut want = vec![thread_tid(&d.dir, "SyncWaiter-1"), thread_tid(&d.dir, "SyncWaiter-2")];
    want.sort_unstable();
    let tids: Vec<u32> = l["waiter_tids"].as_array().expect("waiters").iter().map(|t| t.as_u64().expect("tid") as u32).collect();
    assert_eq!(tids, want, "the threads in Wait() wait for the semaphore");
    for t in &want {
        let th = r["threads"].as_array().expect("threads").iter().find(|x| x["tid"].as_u64() == Some(*t as u64)).expect("thread");
        assert_eq!(th["blocked_on"], l["id"], "thread {t} is blocked on the semaphore, not on its TaskNode");
    }
    // SOS dumpasync: the stacks whose innermost frame is a TaskNode, awaited by RefreshCacheAsync.
    let sos_stacks = parse_sos(&std::fs::read_to_string(d.dir.join("sos/dumpasync.txt")).expect("dumpasync"));
    let nodes: Vec<u64> = sos_stacks.iter().filter(|s| s.frames[0].3 == "System.Threading.SemaphoreSlim+TaskNode").map(|s| s.frames[0].0).collect();
    assert_eq!(nodes.len(), 3);
    assert_eq!(nodes[0], sos["m_asyncHead"], "the first async waiter is the list's head");
    let waiters = l["managed"]["async_waiters"].as_array().expect("async_waiters");
    let got: Vec<u64> = waiters.iter().map(|w| hex(w["task"].as_str().expect("task"))).collect();
    assert_eq!(got, nodes, "the WaitAsync flows, in line order");
    for w in waiters {
        assert_eq!(w["method"].as_str(), Some("Knot.Samples.SemaphoreAsync.Program+<RefreshCacheAsync>d__9"));
        let i = w["async_stack"].as_u64().expect("stack") as usize;
        assert_eq!(hex(r["dotnet"]["async"][i]["frames"][0]["address"].as_str().expect("frame")), hex(w["task"].as_str().expect("task")));
    }
    assert!(!r["locks"].as_array().expect("locks").iter().any(|x| x["kind"] == "task"), "no task lock is left for the semaphore's TaskNodes");
    assert_eq!(r["verdict"], "contention");
    let text = knot::report::text::render(&knot::analyze(&d.core, &Options { locator: d.locator.clone(), ..Options::default() }).expect("report"), &Default::default());
    assert!(text.contains("2 waiters on SemaphoreSlim at"), "{text}");
    assert!(text.contains("count 0 of 1, 3 async waiters in WaitAsync"), "{text}");
}

/// Sync over async: each thread blocked in Task.Wait/Result is tied to the async stack its task
/// is a frame of (SOS dumpasync's stack holding that very box), and on sync_over_async that
/// stack's work is queued to the starved pool: the first screen says the work queued behind the
/// workers, with the queue's length, and that their tasks' work is among it.
#[test]
fn task_waits_link_to_the_async_stack_that_would_complete_them() {
    let mut seen = 0;
    for d in dumps().into_iter().filter(|d| d.name == "sync_over_async/heap" || d.name == "async_tcs/heap") {
        let sos = parse_sos(&std::fs::read_to_string(d.dir.join("sos/dumpasync.txt")).expect("dumpasync"));
        let r = report(&d.core, &d.locator);
        let tasks: Vec<&Value> = r["locks"].as_array().expect("locks").iter().filter(|l| l["kind"] == "task").collect();
        assert!(!tasks.is_empty(), "{}: task waits", d.name);
        for l in &tasks {
            let object = hex(l["managed"]["object"].as_str().expect("object"));
            let t = &l["managed"]["task"];
            let i = t["async_stack"].as_u64().unwrap_or_else(|| panic!("{}: task {object:#x} is in no async stack", d.name)) as usize;
            assert!(sos[i].frames.iter().any(|f| f.0 == object), "{}: SOS's STACK {} holds the task {object:#x}", d.name, i + 1);
            assert!(t["async_method"].as_str().is_some_and(|m| m.contains("Async>d__")), "{}: {t}", d.name);
            if d.name == "sync_over_async/heap" {
                assert_eq!(t["queued"], true, "{}: the awaited box is queued to the pool", d.name);
            }
        }
        if d.name == "sync_over_async/heap" {
            let queued = r["dotnet"]["thread_pool"]["queued_work_items"].as_u64().expect("queue read");
            let text = knot::report::text::render(&knot::analyze(&d.core, &Options { locator: d.locator.clone(), ..Options::default() }).expect("report"), &Default::default());
            let line = text.lines().find(|l| l.starts_with("Verdict:")).expect("verdict line");
            // At the pool's maximum the workers' tasks, whose continuations are queued behind
            // them, make a cycle through the pool (issue 34).
            assert!(line.starts_with("Verdict: DEADLOCK through the thread pool: all 8 workers (max 8) are blocked"), "{line}");
            assert!(line.contains("which wait for a worker to run their continuations") && line.contains(&format!("; {queued} work items wait")), "{line}");
        }
        seen += 1;
    }
    assert!(seen == 2 || knot_samples::dotnet::dumps("sos/dumpasync.txt", false).is_empty(), "both committed samples read");
}
