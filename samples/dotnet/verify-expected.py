#!/usr/bin/env python3
"""Check SOS/gdb oracle files against expected.toml.

Usage: samples/dotnet/verify-expected.py [DIR]
  DIR: a make-dumps.sh output directory (default: samples/dotnet/dumps, the
  committed set).  Every DIR/<sample>/<kind>/sos/ found is checked against the
  [[sample]] of that name: owned monitors (syncblk), System.Threading.Lock
  owners, the native mutex owner (gdb), and each named thread's managed
  frames (clrstack -all).  Prints one line per check and 'N passed, N failed'.
"""
import os
import re
import sys
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
results = []


def check(ok, what):
    results.append(ok)
    print(("ok   " if ok else "FAIL ") + what)


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def thread_map(d):
    """name -> [os_tid...] from sos/thread-names.txt, else threads.txt (comm)."""
    names = {}
    for line in read(f"{d}/sos/thread-names.txt").splitlines():
        if line.startswith("#"):
            continue
        p = line.split(None, 5)
        if len(p) == 6 and p[3].isdigit():
            names.setdefault(p[5].strip(), []).append(int(p[3]))
    if not names:
        for line in read(f"{d}/threads.txt").splitlines():
            if line.startswith("#"):
                continue
            p = line.split("\t")
            if len(p) == 4:
                names.setdefault(p[3], []).append(int(p[0]))
    return names


def stacks(d):
    """os_tid -> [normalised managed frame names], innermost first."""
    out, cur = {}, None
    for line in read(f"{d}/sos/clrstack-all.txt").splitlines():
        m = re.match(r"OS Thread Id: 0x([0-9a-f]+)", line)
        if m:
            cur = out.setdefault(int(m.group(1), 16), [])
            continue
        m = re.match(r"\s*[0-9A-Fa-f]{16} [0-9A-Fa-f]{16} (.*)$", line)
        if cur is None or not m:
            continue
        site = re.sub(r"^\[[^\]]*\]\s*", "", m.group(1)).strip()
        if not site:
            continue
        site = re.split(r"\[\[|\(", site, 1)[0]
        cur.append(site)
    return out


def subsequence(want, have):
    it = iter(have)
    return all(any(h == w for h in it) for w in want)


def verify(sample, kind, d):
    tag = f"{sample}/{kind}"
    names = thread_map(d)
    tid_name = {t: n for n, ts in names.items() for t in ts}
    st = stacks(d)

    # Threads and frames.
    for t in sample_cfg["thread"]:
        frames = t.get("frames", [])
        if "name" in t:
            tids = names.get(t["name"], [])
            if t["name"] == "Main" and not tids:
                continue  # triage: the main thread's comm is "dotnet"
            check(len(tids) == 1, f"{tag}: thread {t['name']} present once")
            for tid in tids:
                check(subsequence(frames, st.get(tid, [])), f"{tag}: {t['name']} frames {frames[:1]}..{frames[-1:]}")
        else:
            rx = re.compile(t["name_pattern"])
            tids = [tid for n, ts in names.items() if rx.search(n) for tid in ts]
            check(len(tids) == t["count"], f"{tag}: {t['count']} threads /{t['name_pattern']}/ (found {len(tids)})")
            bad = [tid for tid in tids if not subsequence(frames, st.get(tid, []))]
            check(not bad, f"{tag}: /{t['name_pattern']}/ frames {frames[:1]}..{frames[-1:]} (bad tids {bad})")

    # Monitors.
    mons = [l for l in sample_cfg.get("lock", []) if l["kind"] == "monitor"]
    if mons and kind in sample_cfg["syncblk_readable"]:
        rows = re.findall(r"^\s+\d+\s+[0-9A-F]{16}\s+(\d+)\s+(\d+)\s+[0-9A-F]{16}\s+([0-9a-f]+)\s+\d+\s+[0-9a-f]{16}\s+(\S+)",
                          read(f"{d}/sos/syncblk.txt"), re.M)
        rows = [(int(h), int(r), tid_name.get(int(t, 16), f"tid {int(t, 16)}"), ty) for h, r, t, ty in rows]
        check(len(rows) == len(mons), f"{tag}: {len(mons)} owned monitors in syncblk (found {len(rows)})")
        for l in mons:
            row = [r for r in rows if r[3] == l["object_type"] and r[2] == l["owner"]]
            check(len(row) == 1, f"{tag}: monitor {l['id']} ({l['object_type']}) owned by {l['owner']}")
            if row:
                h, r, _, _ = row[0]
                check(h == l["monitor_held"] and r == l["recursion"],
                      f"{tag}: monitor {l['id']} MonitorHeld={h} (want {l['monitor_held']}) Recursion={r} (want {l['recursion']})")
                check((h - 1) // 2 == len(l["waiters"]), f"{tag}: monitor {l['id']} waiter count {(h - 1) // 2} = {len(l['waiters'])}")
    elif mons:
        check("Error requesting SyncBlk data" in read(f"{d}/sos/syncblk.txt"),
              f"{tag}: syncblk unreadable in a {kind} dump, as recorded")

    # System.Threading.Lock.
    for l in (l for l in sample_cfg.get("lock", []) if l["kind"] == "lock"):
        holders = dict(re.findall(r"object (\S+) GC Refs:\nField.*\nGate\s+0x00\s+(\S+)", read(f"{d}/sos/lock-holders.txt")))
        heap = read(f"{d}/sos/lock-holders.txt")
        mt_name = dict(re.findall(r"^(\S+)\s+\d+\s+\d+ (\S+)$", heap, re.M))
        obj_mt = dict(re.findall(r"^\s+([0-9a-f]+)\s+([0-9a-f]+)\s+\d+\s*$", heap, re.M))
        holder_type = l["reached_by"].split(".Gate")[0]
        found = None
        for m in re.finditer(r"object (\S+)\s+_owningThreadId=0x(\S+)\s+_state=0x(\S+)\s+_recursionCount=0x(\S+)",
                             read(f"{d}/sos/locks.txt")):
            h = [o for o, lk in holders.items() if lk == m.group(1)]
            if h and mt_name.get(obj_mt.get(h[0], ""), "") == holder_type:
                found = m
        check(found is not None, f"{tag}: Lock {l['id']} found via {holder_type}.Gate")
        if found:
            owner = tid_name.get(int(found.group(2), 16))
            check(owner == l["owner"], f"{tag}: Lock {l['id']} _owningThreadId -> {owner} (want {l['owner']})")
            check(int(found.group(3), 16) == l["lock_state"] and int(found.group(4), 16) == l["recursion"],
                  f"{tag}: Lock {l['id']} _state/_recursionCount")

    # Native mutex (gdb).
    for l in (l for l in sample_cfg.get("lock", []) if l["kind"] == "pthread_mutex"):
        m = re.search(r"__lock = (\d+), __count = \d+, __owner = (\d+), __nusers = \d+, __kind = (\d+)", read(f"{d}/gdb/native-mutex.txt"))
        check(m is not None, f"{tag}: gdb read the pthread mutex")
        if m:
            check(tid_name.get(int(m.group(2))) == l["owner"], f"{tag}: mutex owner tid {m.group(2)} is {l['owner']}")
            check(int(m.group(1)) == l["mutex_lock_word"] and int(m.group(3)) == l["mutex_kind"], f"{tag}: mutex lock word/kind")

    # The GC heap: the sample's own objects in dumpheap -stat, the OOM in analyzeoom.
    heap_cfg = sample_cfg.get("heap")
    if heap_cfg:
        stat = read(f"{d}/sos/dumpheap-stat.txt")
        counts = {}
        for m in re.finditer(r"^[0-9a-f]+\s+([\d,]+)\s+[\d,]+ (.+)$", stat, re.M):
            counts[m.group(2)] = counts.get(m.group(2), 0) + int(m.group(1).replace(",", ""))
        types = heap_cfg.get("types") or heap_cfg.get("types_by_kind", {}).get(kind, {})
        for ty, n in types.items():
            check(counts.get(ty) == n, f"{tag}: dumpheap -stat counts {n} {ty} (found {counts.get(ty)})")
        oom = read(f"{d}/sos/analyzeoom.txt")
        want = heap_cfg.get("oom_reason", "There was no managed OOM due to allocations on the GC heap")
        check(want in oom, f"{tag}: analyzeoom says {want!r}")

    # The thread pool: threadpool's counters, threadpool -stat's queued items by type.
    pool = sample_cfg.get("thread_pool")
    if pool:
        tp = dict((k.strip(), int(v)) for k, v in re.findall(r"^([A-Za-z ]+):\s+(\d+)\s*$", read(f"{d}/sos/threadpool.txt"), re.M))
        for key, label in (("running", "Workers Running"), ("idle", "Workers Idle"), ("min", "Worker Min Limit"), ("max", "Worker Max Limit")):
            check(tp.get(label) == pool[key], f"{tag}: threadpool {label} {pool[key]} (found {tp.get(label)})")
        stat = read(f"{d}/sos/threadpool-stat.txt")
        counts = {}
        for m in re.finditer(r"^[0-9a-f]+\s+([\d,]+)\s+[\d,]+ (.+)$", stat, re.M):
            counts[m.group(2)] = counts.get(m.group(2), 0) + int(m.group(1).replace(",", ""))
        check(counts == pool["types"], f"{tag}: threadpool -stat types {pool['types']} (found {counts})")
        total = re.search(r"^Total ([\d,]+) objects", stat, re.M)
        check(total is not None and int(total.group(1).replace(",", "")) == pool["queued"], f"{tag}: {pool['queued']} queued work items")

    # The async stacks: dumpasync's STACK blocks, the state machines in them, what each awaits.
    acfg = sample_cfg.get("async")
    if acfg:
        text = read(f"{d}/sos/dumpasync.txt")
        blocks = re.split(r"^STACK \d+\s*$", text, flags=re.M)[1:]
        check(len(blocks) == acfg["stacks"], f"{tag}: dumpasync lists {acfg['stacks']} stacks (found {len(blocks)})")
        machines, awaited = {}, {}
        for st in blocks:
            first = True
            for m in re.finditer(r"^\s*[0-9a-f]{16} [0-9a-f]{16} \((\d*| )\) (.+?)\s*$", st, re.M):
                if first and m.group(1) == " ":
                    awaited[m.group(2)] = awaited.get(m.group(2), 0) + 1
                elif m.group(1).isdigit():
                    machines[m.group(2)] = machines.get(m.group(2), 0) + 1
                first = False
        check(machines == acfg["state_machines"], f"{tag}: dumpasync state machines {acfg['state_machines']} (found {machines})")
        check(awaited == acfg["awaited"], f"{tag}: dumpasync awaited tasks {acfg['awaited']} (found {awaited})")

    # The crash (samples that die by themselves).
    crash = sample_cfg.get("crash")
    if crash:
        verify_crash(tag, d, crash, names, tid_name, st)

    # Cycles are consistent with the threads' holds / waits_for.
    by_name = {t.get("name"): t for t in sample_cfg["thread"]}
    for c in sample_cfg.get("cycle", []):
        ok = True
        for i, (t, lk) in enumerate(zip(c["threads"], c["locks"])):
            nxt = c["threads"][(i + 1) % len(c["threads"])]
            ok &= by_name[t].get("waits_for") == lk and lk in by_name[nxt].get("holds", [])
        check(ok, f"{tag}: cycle {' -> '.join(c['threads'])} consistent")


def pe_blocks(d):
    """address -> {type, message, hresult, inner, frames} from sos/pe.txt."""
    out = {}
    for block in re.split(r"^(?=Exception object: )", read(f"{d}/sos/pe.txt"), flags=re.M):
        m = re.match(r"Exception object: ([0-9a-f]+)", block)
        if not m:
            continue
        f = dict(re.findall(r"^(Exception type|Message|InnerException|HResult):\s+(.*)$", block, re.M))
        inner = re.search(r"Use printexception ([0-9A-Fa-f]+)", f.get("InnerException", ""))
        frames = [re.sub(r"[\[(].*$", "", fn) for fn in re.findall(r"^\s+[0-9A-F]{16} [0-9A-F]{16} (\S+)", block, re.M)]
        out[int(m.group(1), 16)] = {
            "type": f.get("Exception type", "").strip(),
            "message": "" if f.get("Message", "").strip() == "<none>" else f.get("Message", "").strip(),
            "hresult": int(f.get("HResult", "0"), 16),
            "inner": int(inner.group(1), 16) if inner else None,
            "frames": frames,
        }
    return out


def verify_crash(tag, d, crash, names, tid_name, st):
    tids = names.get(crash["thread"], [])
    check(len(tids) == 1, f"{tag}: crashing thread {crash['thread']} present once")
    tid = tids[0] if tids else None
    # clrthreads: the crashing thread's Exception column.
    row = None
    for line in read(f"{d}/sos/clrthreads.txt").splitlines():
        p = line.split()
        if len(p) >= 12 and re.fullmatch(r"[0-9a-f]+", p[2]) and tid is not None and int(p[2], 16) == tid:
            row = p
    check(row is not None and row[10] == crash["exception"]["type"],
          f"{tag}: clrthreads shows {crash['exception']['type']} on {crash['thread']} (found {row[10] if row else None})")
    pes = pe_blocks(d)
    top = pes.get(int(row[11], 16)) if row else None
    chain = []
    while top is not None and len(chain) < 8:
        chain.append(top)
        top = pes.get(top["inner"]) if top["inner"] else None
    want = [crash["exception"]] + crash["inner"]
    got = [{"type": e["type"], "hresult": e["hresult"], "message": e["message"]} for e in chain]
    check(got == want, f"{tag}: pe chain {[w['type'] for w in want]} (found {[g['type'] for g in got]})")
    with_stack = next((e for e in chain if e["frames"]), None)
    check((with_stack["frames"] if with_stack else []) == crash["frames"], f"{tag}: pe frames {crash['frames'][:1]}..")
    if "failfast_message" in crash:
        check(crash["failfast_message"] in read(f"{d}/stderr.txt"), f"{tag}: the FailFast message is on stderr")
    report = read(f"{d}/core.crashreport.json")
    # .NET 8's createdump writes `"key" : "value"`, .NET 10's `"key": "value"`.
    m = re.search(r'"crashed"\s*:\s*"true",\s*"managed_exception_object"\s*:\s*"[^"]*",\s*"managed_exception_type"\s*:\s*"([^"]*)"', report)
    check(m is not None and m.group(1) == crash["crashreport_exception_type"],
          f"{tag}: crashreport names {crash['crashreport_exception_type']} (found {m.group(1) if m else None})")
    if "cycle" in crash and tid is not None:
        frames = st.get(tid, [])
        c = crash["cycle"]
        n = len(c)
        repeats = sum(1 for i in range(0, len(frames) - n + 1) if frames[i:i + n] == c)
        check(repeats > 1000, f"{tag}: the cycle {c[0]}.. repeats {repeats} times in clrstack")


root = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(HERE, "dumps")
with open(os.path.join(HERE, "expected.toml"), "rb") as f:
    expected = tomllib.load(f)
for sample_cfg in expected["sample"]:
    sdir = os.path.join(root, sample_cfg["name"])
    if not os.path.isdir(sdir):
        continue
    for kind in sorted(os.listdir(sdir)):
        d = os.path.join(sdir, kind)
        if os.path.isdir(os.path.join(d, "sos")):
            verify(sample_cfg["name"], kind, d)
passed = sum(results)
print(f"{passed} passed, {len(results) - passed} failed")
sys.exit(0 if results and passed == len(results) else 1)
