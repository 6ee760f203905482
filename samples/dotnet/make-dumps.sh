#!/usr/bin/env bash
# make-dumps.sh — build knot's .NET ground-truth samples, wedge each one, dump
# it with createdump (or let the runtime dump itself on Environment.FailFast),
# and record SOS's reading of every dump beside it.
#
# Usage:
#   samples/dotnet/make-dumps.sh [-o OUTDIR] [SAMPLE[/KIND] ...]
#
#   OUTDIR   default: <repo>/target/samples/dotnet ; each dump goes to
#            OUTDIR/<sample>/<kind>/{core,info.txt,threads.txt,stdout.txt,stderr.txt,sos/*.txt}
#   SAMPLE   one of the names below; KIND one of its kinds (default: all).
#
#   sample             kinds                      how the dump is made
#   monitor_abba       heap full mini triage      createdump --withheap|--full|--normal|--triage PID
#                      container                  createdump --withheap PID, the process run as if in a
#                                                 container with a 2 GiB memory limit and no GCHeapHardLimit
#                                                 (fake-cgroup-limit.sh 2147483648): the GC's container default
#   autofac_container  heap                       createdump --withheap PID
#   sync_over_async    heap                       createdump --withheap PID
#   lock_abba          heap                       createdump --withheap PID
#   pinvoke_mutex      heap full                  createdump --withheap|--full PID (+ gdb oracle of the
#                                                 native mutex, which is malloc'd so heap dumps hold it)
#   failfast           heap full mini triage      Environment.FailFast with DOTNET_DbgEnableMiniDump=1,
#                                                 DOTNET_DbgMiniDumpType=2|4|1|3
#   unhandled_exception, failfast_exception, stack_overflow
#                      heap                       the program dies (unhandled exception / FailFast with
#                                                 an exception / stack overflow); the runtime's own
#                                                 createdump writes the dump (DOTNET_DbgMiniDumpType=2)
#   heap_population    heap                       createdump --withheap PID, under
#                                                 DOTNET_GCHeapHardLimitPercent=0x32 (a known object
#                                                 population; an ABBA deadlock on two classes' _gate fields)
#                      server                     the same under server GC, one heap per core (DOTNET_gcServer=1,
#                                                 DOTNET_GCDynamicAdaptationMode=0: no DATAS, which starts with
#                                                 one heap) and DOTNET_GCHeapHardLimit=0x20000000
#   gc_oom             heap                       under DOTNET_GCHeapHardLimit=0x4000000 the program fills
#                                                 the heap, catches OutOfMemoryException and FailFasts;
#                                                 the runtime writes the dump (DOTNET_DbgMiniDumpType=2)
#   heap_graph         heap                       createdump --withheap PID (objects held only by a strong
#                                                 handle, a pinned handle, a parked thread's local, the
#                                                 f-reachable queue, statics, an event, a tree, a
#                                                 ConditionalWeakTable entry; SOS gcroot/objsize of each)
#   idle_runtime       heap                       createdump --withheap PID (2 threads wait for a Monitor held by
#                                                 a sleeping thread; the rest sleep, wait for work or are idle
#                                                 runtime threads; the sync table grown over junk, 200 of 300
#                                                 sync blocks freed)
#   timed_waits        heap                       createdump --withheap PID (waits under InlinedCallFrames: Sleep,
#                                                 WaitOne, Monitor.Enter_Slowpath; a generic method over nested
#                                                 structs on three stacks; a poller in WaitOne(1000), and timed
#                                                 and untimed waits that do wait for something)
#   heap_growth        twice                      one process dumped twice (createdump --withheap PID): `before`
#                                                 (2000 cached Sessions, a 1023-node tree), then, after the
#                                                 trigger file, `after` (6000 Sessions): retention and growth
#                                                 known by construction (SOS objsize, dumpheap -stat, -dead)
#   unhandled_oom      heap                       under DOTNET_GCHeapHardLimit=0x2000000 the worker "CacheLoader"
#                                                 fills the heap; nothing catches the OutOfMemoryException: the
#                                                 runtime writes the dump (DOTNET_DbgMiniDumpType=2) and aborts
#   gc_stall           workstation server routine  six "Churn-N" threads allocate and replace 8 KiB arrays for ever;
#                                                 createdump --withheap PID again and again (at most 60 tries) until
#                                                 SOS shows the dump caught a collection: `workstation` (48 MiB hard
#                                                 limit, 16 MiB live, non-concurrent workstation GC) until clrthreads
#                                                 marks a thread (GC) with the heap at 92 % of its limit or more;
#                                                 `server` (server GC, 2 heaps, 48 MiB limit, 24 MiB live) until
#                                                 eeheap says 85 % or more; `routine` (no hard limit, 2 MiB live)
#                                                 until dumpheap says the heap is not in a valid state (mid-collection)
#   pool_queue         heap                       createdump --withheap PID (a pool of 4 workers, min = max, all
#                                                 blocked in their work items; 5 LedgerFlush items on worker 0's
#                                                 local queue, 6 QueueUserWorkItem callbacks and 3 Task.Run
#                                                 items in the global queue)
#   mres_continuation  heap                       createdump --withheap PID (a pool of 4 workers, min = max, each blocked in
#                                                 ManualResetEventSlim.Wait on an event that a continuation of its
#                                                 own FetchQuoteAsync task sets — OnCompleted or ContinueWith —
#                                                 while that task's continuation waits in the pool's queue)
#   async_tcs          heap                       createdump --withheap PID (async stacks awaiting TaskCompletionSources
#                                                 that never complete; Main blocks in GetResult on one of them)
#   semaphore_async    heap                       createdump --withheap PID (a SemaphoreSlim held by an async flow;
#                                                 3 WaitAsync flows and 2 threads in Wait() wait for it)
#   task_cycle         heap                       createdump --withheap PID (a three-party deadlock: a thread holds a
#                                                 SemaphoreSlim and Task.Wait()s a task whose MoveNext runs on a pool
#                                                 worker blocked on a Monitor held by a thread in the semaphore's Wait())
#   parallel_barrier   heap                       createdump --withheap PID (Parallel.For(0, 6) on a pool of max 3, each
#                                                 body in Barrier(6).SignalAndWait(): the replicas that would arrive
#                                                 are queued behind the blocked workers)
#   redis_pool         heap                       createdump --withheap PID (StackExchange.Redis 2.8.16 against a
#                                                 redis-server this script starts on a free 127.0.0.1 port; a pool of
#                                                 max 4, 12 work items block on StringGetAsync().Result or StringGet;
#                                                 the socket engine's work item is queued behind them)
#   aspnet_pool        deadlock starved nolock    an ASP.NET Core minimal API under an in-process load (one thread,
#                      healthy                    raw sockets to its own 127.0.0.1 port), createdump --withheap PID:
#                                                 the pool at max 12 with every worker blocked (a lock + .Result on
#                                                 Task.Delay: deadlock), the default pool mid-starvation (the same),
#                                                 .Result and Kestrel's synchronous body read without a lock, and a
#                                                 healthy busy service; ~6.5 MB gzip'd each: made here, not committed
#   self_contained     heap                       monitor_abba's wedge, `dotnet publish` self-contained (10.0.12
#                                                 runtime pack: libcoreclr.so in the app's directory); createdump --withheap
#   single_file        heap                       the same, PublishSingleFile: the runtime linked into the executable
#                                                 (singlefilehost 10.0.12), no libcoreclr.so; createdump --withheap
#                                                 (the committed one, with its population and framework-dependent
#                                                 peer's SOS reading, is made by single_file/make-dump.sh)
#   net9_abba          heap                       the same on .NET 9 (net9.0, self-contained from the 9.0.23 runtime
#                                                 pack); the publish directory's own createdump --withheap
#   net9_heap          heap                       heap_population's population and ABBA (its Program.cs) on .NET 9
#                                                 (net9.0, self-contained from the 9.0.23 runtime pack), under
#                                                 DOTNET_GCHeapHardLimit=0x10000000; the publish directory's
#                                                 own createdump --withheap
#   runtime_10_0_15    heap                       monitor_abba's wedge (its Program.cs) published self-contained
#                                                 from the 10.0.15 runtime pack (a catalogued build other than
#                                                 the machine's 10.0.12), under DOTNET_GCHeapHardLimit=0x10000000;
#                                                 the publish directory's own createdump --withheap
#   net8_abba          heap                       monitor_abba's wedge (its Program.cs) on .NET 8 (net8.0, self-contained
#                                                 from the 8.0.34 runtime pack: g_dacTable, no contract descriptor),
#                                                 under DOTNET_GCHeapHardLimit=0x10000000; the pack's createdump --withheap
#   net8_heap          heap                       heap_population's population and ABBA (its Program.cs) on .NET 8,
#                                                 under DOTNET_GCHeapHardLimit=0x10000000; the pack's createdump --withheap
#   net8_sync_over_async heap                     sync_over_async's starved pool (its Program.cs) on .NET 8; the
#                                                 pack's createdump --withheap
#   net8_gc_oom        heap                       gc_oom (its Program.cs) on .NET 8: under DOTNET_GCHeapHardLimit=0x4000000
#                                                 the heap fills, OutOfMemoryException caught, Environment.FailFast;
#                                                 the runtime writes the dump (DOTNET_DbgMiniDumpType=2)
#                      (SOS reads the net8_* dumps with `setclrpath` to the publish directory: the pack's DAC)
#   cache_leak         heap                       createdump --withheap PID (Main waits in Console.ReadLine on a
#                                                 FIFO opened read-write as stdin, so it never returns; a static
#                                                 Dictionary holds ~32 MiB, ~97 % of the heap; SOS gcroot and
#                                                 objsize of the dictionary)
#   npgsql_pool        heap                       createdump --withheap PID (Npgsql 10.0.3 against the local PostgreSQL 15,
#                                                 which the script starts and gives a role and a database: 4 requests each
#                                                 hold one of the pool's 4 connections and wait for a Monitor whose holder
#                                                 waits in sync Open() for a connection; SOS gcroot of each connection)
#   rwlock_writer      heap                       createdump --withheap PID (3 readers of a ReaderWriterLockSlim, one of them
#                                                 upgradeable, wait for a Monitor held by a writer blocked in EnterWriteLock;
#                                                 a late reader queued behind the writer; the lock's fields and every
#                                                 ReaderWriterCount record read by SOS)
#   class_init         heap                       createdump --withheap PID (Registry's static constructor waits for a Monitor
#                                                 held by a thread that reads Registry.Entries: it waits for the class's
#                                                 initialisation; gdb's reading of the class-init lock's pthread mutex)
#   orleans_silo       heap                       a real Orleans 10.4.2 silo (Microsoft.Orleans.Server): 9 grain
#                                                 activations and 1 grain call wait behind a cache's lock whose
#                                                 holder waits for that grain call; createdump --withheap PID
#                                                 (~330 MB: never committed, only its SOS readings are)
#                      again                      the same wedge in a second run of the silo (another process,
#                                                 other tids and addresses): createdump --withheap PID; tests
#                                                 compare the two dumps' signatures
#
# Environment:
#   DOTNET        dotnet host (default: `dotnet` on PATH)
#   DOTNET_DUMP   dotnet-dump (default: on PATH or ~/.dotnet/tools/dotnet-dump); without it
#                 the dumps are still made and the SOS oracle is skipped with a message.
#   CREATEDUMP    createdump (default: next to the Microsoft.NETCore.App runtime in use)
#   SKIP_BUILD=1  reuse the existing build
#
# Exit status: 0 when every requested dump was made and verify-expected.py finds
# SOS's readings as expected.toml says (a crashing SOS command is recorded in its
# oracle file, not fatal); 1 on a failed step or a wrong wedge shape; 0 with a
# message when dotnet is missing.
set -Eeuo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
OUTDIR="$REPO/target/samples/dotnet"
ARTIFACTS="$REPO/target/samples/dotnet/artifacts"   # must match Directory.Build.props

while getopts "o:h" opt; do
  case "$opt" in
    o) OUTDIR="$OPTARG" ;;
    h) sed -n '2,/^set -Eeuo/p' "$0" | sed '$d'; exit 0 ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
mkdir -p "$OUTDIR"
OUTDIR="$(cd "$OUTDIR" && pwd)"

log() { printf '[make-dumps] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

ALL_JOBS=(
  monitor_abba/heap monitor_abba/full monitor_abba/mini monitor_abba/triage monitor_abba/container
  autofac_container/heap
  sync_over_async/heap
  lock_abba/heap
  pinvoke_mutex/heap pinvoke_mutex/full
  failfast/heap failfast/full failfast/mini failfast/triage
  unhandled_exception/heap failfast_exception/heap stack_overflow/heap
  heap_population/heap heap_population/server gc_oom/heap unhandled_oom/heap
  idle_runtime/heap heap_growth/twice
  heap_graph/heap
  pool_queue/heap timed_waits/heap
  gc_stall/workstation gc_stall/server gc_stall/routine
  async_tcs/heap semaphore_async/heap
  cache_leak/heap mres_continuation/heap
  task_cycle/heap parallel_barrier/heap redis_pool/heap
  npgsql_pool/heap rwlock_writer/heap class_init/heap
  self_contained/heap single_file/heap net9_abba/heap net9_heap/heap runtime_10_0_15/heap
  net8_abba/heap net8_heap/heap net8_sync_over_async/heap net8_gc_oom/heap
  orleans_silo/heap orleans_silo/again
  aspnet_pool/deadlock aspnet_pool/starved aspnet_pool/nolock aspnet_pool/healthy aspnet_pool/deadlock2
)
# Samples run from their `dotnet publish` output (their own runtime), not with the machine's.
PUBLISHED=" self_contained single_file net9_abba net9_heap runtime_10_0_15 net8_abba net8_heap net8_sync_over_async net8_gc_oom "
is_published() { [[ "$PUBLISHED" == *" $1 "* ]]; }
publish_dir() { echo "$ARTIFACTS/publish/$1/debug_linux-x64"; }
# Samples that die by themselves (no wedge, no 'ready'): the runtime dumps them.
CRASH_SAMPLES=" unhandled_exception failfast_exception stack_overflow gc_oom unhandled_oom net8_gc_oom "
is_crash() { [[ "$CRASH_SAMPLES" == *" $1 "* ]]; }

# ---------------------------------------------------------------- tools
DOTNET="${DOTNET:-$(command -v dotnet || true)}"
if [[ -z "$DOTNET" || ! -x "$DOTNET" ]]; then
  log "skipped: dotnet is not installed (need the .NET 10 SDK)"
  exit 0
fi
if [[ -z "${DOTNET_DUMP:-}" ]]; then
  DOTNET_DUMP="$(command -v dotnet-dump || true)"
  [[ -z "$DOTNET_DUMP" && -x "$HOME/.dotnet/tools/dotnet-dump" ]] && DOTNET_DUMP="$HOME/.dotnet/tools/dotnet-dump"
fi
if [[ -z "$DOTNET_DUMP" ]]; then
  log "note: dotnet-dump not found (dotnet tool install -g dotnet-dump); SOS oracle will be skipped"
fi
RUNTIME_VERSION="$("$DOTNET" --list-runtimes | awk '$1=="Microsoft.NETCore.App"{v=$2} END{print v}')"
RUNTIME_DIR="$("$DOTNET" --list-runtimes | awk '$1=="Microsoft.NETCore.App"{d=$3"/"$2} END{print d}' | tr -d '[]')"
[[ -n "$RUNTIME_VERSION" && -d "$RUNTIME_DIR" ]] || die "no Microsoft.NETCore.App runtime found"
CREATEDUMP="${CREATEDUMP:-$RUNTIME_DIR/createdump}"
[[ -x "$CREATEDUMP" ]] || die "createdump not found at $CREATEDUMP"
log "runtime $RUNTIME_VERSION at $RUNTIME_DIR; createdump $CREATEDUMP; dotnet-dump ${DOTNET_DUMP:-none}"

# ---------------------------------------------------------------- cleanup
PIDS=()
PG_STARTED=""
cleanup() {
  local p
  for p in "${PIDS[@]}"; do
    kill -9 "$p" 2>/dev/null || true
  done
  # A PostgreSQL cluster this script started is stopped again.
  [[ -n "$PG_STARTED" ]] && pg_ctlcluster "$PG_STARTED" stop 2>/dev/null || true
}
trap cleanup EXIT
trap 'log "failed (status $?) at line $LINENO: $BASH_COMMAND"' ERR
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- helpers
# Poll until `cond` succeeds or timeout (seconds) passes.
wait_for() {
  local timeout="$1"; shift
  local deadline=$((SECONDS + timeout))
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}

has_ready() { grep -qx 'ready' "$1" 2>/dev/null; }

# One line per task: "tid state", state from /proc/PID/task/TID/stat (the
# field after the ')' that closes comm, which may contain spaces).
task_states() {
  local pid="$1" t s
  for t in /proc/"$pid"/task/*; do
    # `read` builtin, no fork: forks are slow here (~70 ms each).
    read -r s 2>/dev/null <"$t/stat" || continue
    s="${s##*) }"
    printf '%s %s\n' "${t##*/}" "${s%% *}"
  done
}

# Every task sleeping (S or D) and the same set of states for 3 polls
# 150 ms apart (>= 300 ms stable).
wait_blocked() {
  local pid="$1" timeout="$2" prev="" cur stable=0
  local deadline=$((SECONDS + timeout))
  while ((SECONDS < deadline)); do
    kill -0 "$pid" 2>/dev/null || return 1
    cur="$(task_states "$pid")"
    if ! grep -qv ' [SD]$' <<<"$cur" && [[ "$cur" == "$prev" ]]; then
      stable=$((stable + 1))
      ((stable >= 2)) && return 0
    else
      stable=0
    fi
    prev="$cur"
    sleep 0.15
  done
  return 1
}

# tid, comm (OS thread name, which the runtime sets from Thread.Name, cut to
# 15 bytes), state, wchan — the only place the dump's tids meet thread names
# outside the managed heap.
record_threads() {
  local pid="$1" out="$2" t s comm wchan
  {
    printf '# tid\tstate\twchan\tcomm  (from /proc/%s/task at dump time)\n' "$pid"
    for t in /proc/"$pid"/task/*; do
      read -r s 2>/dev/null <"$t/stat" || continue
      read -r comm 2>/dev/null <"$t/comm" || comm=""
      wchan="-"; read -r wchan 2>/dev/null <"$t/wchan" || true   # no trailing newline: read "fails" but sets it
      s="${s##*) }"
      printf '%s\t%s\t%s\t%s\n' "${t##*/}" "${s%% *}" "${wchan:--}" "$comm"
    done
  } >"$out"
}

build_id() { readelf -n "$1" 2>/dev/null | awk '/Build ID/{print $3; exit}'; }

# ---------------------------------------------------------------- PostgreSQL
# npgsql_pool's database: the machine's PostgreSQL cluster (started when it is down, and stopped
# again on exit), a login role named for this user (peer authentication over the Unix socket: no
# password, no TLS) and a database `knot` it owns. Idempotent.
pg_ready() {
  local cluster
  command -v pg_lsclusters >/dev/null || die "npgsql_pool needs PostgreSQL (pg_lsclusters not found)"
  cluster="$(pg_lsclusters -h | awk 'NR == 1 {print $1 " " $2}')"
  [[ -n "$cluster" ]] || die "npgsql_pool: no PostgreSQL cluster"
  if ! pg_lsclusters -h | awk 'NR == 1 {exit $4 != "online"}'; then
    pg_ctlcluster $cluster start || die "npgsql_pool: cannot start PostgreSQL $cluster"
    PG_STARTED="$cluster"
  fi
  local me; me="$(id -un)"
  runuser -u postgres -- psql -qtAc "SELECT 1 FROM pg_roles WHERE rolname = '$me'" | grep -q 1 \
    || runuser -u postgres -- psql -qc "CREATE ROLE \"$me\" LOGIN" >/dev/null
  runuser -u postgres -- psql -qtAc "SELECT 1 FROM pg_database WHERE datname = 'knot'" | grep -q 1 \
    || runuser -u postgres -- psql -qc "CREATE DATABASE knot OWNER \"$me\"" >/dev/null
  log "  PostgreSQL $cluster ready (database knot, role $me)"
}

# ---------------------------------------------------------------- trimmed dumps
# Dumps committed without the pages the committed files hold (trim-core.py): the runtime's
# (dumps/runtime/<version>/) and the sample's own assemblies (its build output, what
# pack-dumps.sh copies into dumps/<sample>/app/). The pages stay mapped in the program headers,
# not saved: knot reads them from those files, SOS from the same files on this machine. SOS's
# oracle reads the trimmed dump, the one committed. KEEP_FULL_CORE=1 keeps the whole one
# beside it as core.full.
TRIMMED=" npgsql_pool/heap redis_pool/heap "
trim_core() {  # trim_core SAMPLE DIR RUNTIME_VERSION
  local sample="$1" dir="$2" runtime="$HERE/dumps/runtime/$3" full_size
  [[ -f "$runtime/FILES.txt" ]] || die "$sample: no committed runtime files in $runtime to trim the dump against"
  full_size="$(stat -c %s "$dir/core")"
  mv "$dir/core" "$dir/core.full"
  python3 "$HERE/trim-core.py" "$dir/core.full" "$dir/core" "$runtime" "$ARTIFACTS/bin/$sample/debug" >"$dir/trim.txt" \
    || { cat "$dir/trim.txt" >&2; die "$sample: trim-core.py failed"; }
  {
    echo "trimmed           = trim-core.py: the pages the committed runtime and app files hold left out (trim.txt)"
    echo "untrimmed_bytes   = $full_size"
    echo "untrimmed_sha256  = $(sha256sum "$dir/core.full" | cut -d' ' -f1)"
    echo "dump_bytes_trimmed = $(stat -c %s "$dir/core")"
  } >>"$dir/info.txt"
  [[ "${KEEP_FULL_CORE:-}" == 1 ]] || rm -f "$dir/core.full"
  log "  trimmed: $dir/core ($(stat -c %s "$dir/core") bytes; trim.txt)"
}

# ---------------------------------------------------------------- SOS oracle
sos() {  # sos CORE OUTFILE CMD...   (one dotnet-dump invocation)
  local core="$1" out="$2"; shift 2
  local args=() c rc=0
  # A single-file app carries no libmscordaccore.so: SOS is pointed at the runtime pack's.
  [[ -n "${SOS_CLRPATH:-}" ]] && args+=(-c "setclrpath $SOS_CLRPATH")
  for c in "$@"; do args+=(-c "$c"); done
  args+=(-c exit)
  timeout 300 "$DOTNET_DUMP" analyze "$core" "${args[@]}" >"$out" 2>&1 || rc=$?
  if ((rc != 0)); then
    printf '\n# dotnet-dump exited with status %d\n' "$rc" >>"$out"
  fi
  return 0
}

# The EEClass of MethodTable MT (dumpmt's), for dumpclass: .NET 10's DAC takes the MethodTable
# itself, 8.0's says "Invalid EEClass address". eeclass_of CORE MT TMPDIR
eeclass_of() {
  local ee
  sos "$1" "$3/dumpmt" "dumpmt $2"
  ee="$(awk '$1=="EEClass:"{print $2; exit}' "$3/dumpmt")"
  echo "${ee:-$2}"
}

# Thread objects -> name, managed id, native Thread* (ThreadOBJ in clrthreads)
# and OS tid.  `dumpobj` crashes dotnet-dump 10.0.750501 on this runtime, so
# the fields are read with dumpclass offsets + dq/dd/du.
sos_thread_names() {
  local core="$1" out="$2" tmp mt noff ioff moff objs o cmds=() n=0
  tmp="$(mktemp -d)"
  sos "$core" "$tmp/n2e" "name2ee System.Private.CoreLib.dll System.Threading.Thread"
  mt="$(awk '/^MethodTable:/{m=$2} /^Name: +System\.Threading\.Thread$/{print m; exit}' "$tmp/n2e")"
  if [[ -z "$mt" ]]; then
    { echo "# could not find System.Threading.Thread's MethodTable"; cat "$tmp/n2e"; } >"$out"
    rm -rf "$tmp"; return 0
  fi
  sos "$core" "$tmp/cls" "dumpclass $(eeclass_of "$core" "$mt" "$tmp")" "dumpheap -mt $mt -short" "clrthreads"
  noff="$(awk '$NF=="_name"{print $3; exit}' "$tmp/cls")"
  ioff="$(awk '$NF=="_DONT_USE_InternalThread"{print $3; exit}' "$tmp/cls")"
  moff="$(awk '$NF=="_managedThreadId"{print $3; exit}' "$tmp/cls")"
  objs="$(grep -E '^ *[0-9a-f]{8,16} *$' "$tmp/cls" | tr -d ' ' || true)"
  for o in $objs; do
    cmds+=("dq -c 1 $(printf %x $((0x$o + 0x$noff)))" "dq -c 1 $(printf %x $((0x$o + 0x$ioff)))"
           "dd -c 1 $(printf %x $((0x$o + 0x$moff)))")
  done
  : >"$tmp/vals"
  ((${#cmds[@]})) && sos "$core" "$tmp/vals" "${cmds[@]}"
  # Values in order: name ptr, internal thread, managed id — per object.
  mapfile -t vals < <(awk -F': *' '/^[0-9a-f]+: [0-9a-f]+/{split($2,a," "); print a[1]}' "$tmp/vals")
  cmds=()
  for o in $objs; do
    local np="${vals[$((n * 3))]:-0}"
    if [[ "$np" =~ ^0+$ ]]; then :; else cmds+=("du $(printf %x $((0x$np + 0xc)))"); fi
    n=$((n + 1))
  done
  : >"$tmp/names"
  ((${#cmds[@]})) && sos "$core" "$tmp/names" "${cmds[@]}"
  mapfile -t names < <(sed -n "s/^Text: '\(.*\)'$/\1/p" "$tmp/names")
  {
    echo "# Managed System.Threading.Thread objects (read with dumpclass offsets + dq/dd/du;"
    echo "# dumpobj crashes this dotnet-dump). threadobj = clrthreads ThreadOBJ column."
    printf '# %-16s %-6s %-18s %-8s %-8s %s\n' object mgd_id threadobj os_tid dbg name
    n=0; local k=0
    for o in $objs; do
      local np="${vals[$((n * 3))]:-0}" it="${vals[$((n * 3 + 1))]:-0}" id="${vals[$((n * 3 + 2))]:-0}" nm="<null>"
      if ! [[ "$np" =~ ^0+$ ]]; then nm="${names[$k]:-?}"; k=$((k + 1)); fi
      # clrthreads row: DBG ID OSID ThreadOBJ ...
      local row tid="-" dbg="-"
      row="$(awk -v t="$(printf %016x $((0x$it)))" 'tolower($4)==t{print $3, $1; exit}' "$tmp/cls")"
      [[ -n "$row" ]] && { tid="$(printf %d $((0x${row% *})))"; dbg="${row#* }"; }
      printf '  %-16s %-6d %-18s %-8s %-8s %s\n' "$o" "$((0x$id))" "$it" "$tid" "$dbg" "$nm"
      n=$((n + 1))
    done
  } >"$out"
  rm -rf "$tmp"
}

# Fields of every instance of TYPE (exact name), via dumpclass offsets.
# sos_fields CORE OUT MODULE TYPE FIELD[:str]...   (":str" also prints the
# string the reference points at)
sos_fields() {
  local core="$1" out="$2" mod="$3" type="$4"; shift 4
  local tmp mt o f fn off w cmds=() objs i specs=()
  tmp="$(mktemp -d)"
  sos "$core" "$tmp/n2e" "name2ee $mod $type"
  mt="$(awk -v t="$type" '/^MethodTable:/{m=$2} $1=="Name:" && $2==t {print m; exit}' "$tmp/n2e")"
  if [[ -z "$mt" ]]; then
    { echo "# $type not found"; cat "$tmp/n2e"; } >"$out"; rm -rf "$tmp"; return 0
  fi
  sos "$core" "$tmp/cls" "dumpclass $(eeclass_of "$core" "$mt" "$tmp")"
  sos "$core" "$tmp/objs" "dumpheap -mt $mt -short"
  objs="$(grep -E '^ *[0-9a-f]{8,16} *$' "$tmp/objs" | tr -d ' ' || true)"
  for f in "$@"; do
    fn="${f%:str}"
    awk -v f="$fn" '$NF==f && $6=="instance"{found=1} END{exit !found}' "$tmp/cls" && specs+=("$f")
  done
  for o in $objs; do
    for f in "${specs[@]}"; do
      fn="${f%:str}"
      off="$(awk -v f="$fn" '$NF==f && $6=="instance"{print $3; exit}' "$tmp/cls")"
      w="dd"
      awk -v f="$fn" '$NF==f && ($4 ~ /Int64|IntPtr|UInt64/ || $5=="No"){x=1} END{exit !x}' "$tmp/cls" && w="dq"
      cmds+=("$w -c 1 $(printf %x $((0x$o + 0x$off)))")
    done
  done
  : >"$tmp/vals"
  ((${#cmds[@]})) && sos "$core" "$tmp/vals" "${cmds[@]}"
  mapfile -t vals < <(awk -F': *' '/^[0-9a-f]+: [0-9a-f]+/{split($2,a," "); print a[1]}' "$tmp/vals")
  # Strings for the :str fields.
  cmds=(); i=0
  for o in $objs; do
    for f in "${specs[@]}"; do
      if [[ "$f" == *:str && ! "${vals[$i]:-0}" =~ ^0+$ ]]; then
        cmds+=("du $(printf %x $((0x${vals[$i]} + 0xc)))")
      fi
      i=$((i + 1))
    done
  done
  : >"$tmp/strs"
  ((${#cmds[@]})) && sos "$core" "$tmp/strs" "${cmds[@]}"
  mapfile -t strs < <(sed -n "s/^Text: '\(.*\)'$/\1/p" "$tmp/strs")
  {
    echo "# $type (MethodTable $mt): instance fields ${specs[*]} (dd = 4 bytes, dq = 8 bytes)"
    echo "# read with dumpclass offsets + dd/dq/du (dumpobj crashes this dotnet-dump)"
    grep -vE '^(Loading core dump|Ready to process)' "$tmp/cls" || true
    echo
    local k=0; i=0
    for o in $objs; do
      printf 'object %s' "$o"
      for f in "${specs[@]}"; do
        printf '  %s=0x%s' "${f%:str}" "${vals[$i]:-?}"
        if [[ "$f" == *:str && ! "${vals[$i]:-0}" =~ ^0+$ ]]; then
          printf " ('%s')" "${strs[$k]:-?}"; k=$((k + 1))
        fi
        i=$((i + 1))
      done
      echo
    done
  } >"$out"
  rm -rf "$tmp"
}

# name2ee and dumpclass (its static fields' values) of each TYPE of MODULE.
# sos_statics CORE OUT MODULE TYPE...
sos_statics() {
  local core="$1" out="$2" mod="$3" t tmp mt cmds=()
  shift 3
  tmp="$(mktemp -d)"
  for t in "$@"; do cmds+=("name2ee $mod $t"); done
  sos "$core" "$tmp/n2e" "${cmds[@]}"
  cmds=()
  for mt in $(awk '/^MethodTable:/{print $2}' "$tmp/n2e"); do cmds+=("dumpclass $mt"); done
  { grep -vE '^(Loading core dump|Ready to process)' "$tmp/n2e"; } >"$out"
  if ((${#cmds[@]})); then
    sos "$core" "$tmp/cls" "${cmds[@]}"
    grep -vE '^(Loading core dump|Ready to process)' "$tmp/cls" >>"$out" || true
  fi
  rm -rf "$tmp"
}

# dumpobjgcrefs (reference fields) of every object whose type name starts
# with PREFIX.   sos_gcrefs CORE OUT PREFIX
sos_gcrefs() {
  local core="$1" out="$2" prefix="$3" tmp objs cmds=() o
  tmp="$(mktemp -d)"
  sos "$core" "$tmp/heap" "dumpheap -type $prefix"
  objs="$(awk '$1 ~ /^[0-9a-f]+$/ && length($1) >= 8 && $2 ~ /^[0-9a-f]+$/ && length($2) >= 8 {print $1}' "$tmp/heap")"
  for o in $objs; do cmds+=("dumpobjgcrefs $o"); done
  {
    grep -vE '^(Loading core dump|Ready to process)' "$tmp/heap" || true
    if ((${#cmds[@]})); then
      sos "$core" "$tmp/refs" "${cmds[@]}"
      # Label each block with its object.
      awk -v objs="$objs" 'BEGIN{n=split(objs,a," "); k=0}
        /^GC Refs:/{k++; print "\nobject " a[k] " GC Refs:"; next}
        /^(Loading core dump|Ready to process)/{next} {print}' "$tmp/refs"
    fi
  } >"$out"
  rm -rf "$tmp"
}

# The exception of every thread clrthreads lists with one, as `pe` prints it, and each
# InnerException after it (by address: `pe -nested ADDR` does not follow them, and the current
# thread of dotnet-dump need not be the crashing one); plus `pe -nested` on the default thread
# and crashinfo.
sos_exceptions() {  # sos_exceptions CORE SOSDIR
  local core="$1" d="$2" addrs a depth=0 tmp
  tmp="$(mktemp -d)"
  sos "$core" "$d/pe-current.txt" "pe -nested"
  sos "$core" "$d/crashinfo.txt" "crashinfo"
  # clrthreads rows end in "... Apt Exception-type address [(nested exceptions)]" where a
  # thread has one: the first 16-hex-digit word after the Apt column (field 11).
  addrs="$(awk 'NF >= 12 { for (i = 12; i <= NF; i++) if (length($i) == 16 && $i ~ /^[0-9a-f]+$/) { print $i; break } }' "$d/clrthreads.txt" | sort -u)"
  : >"$d/pe.txt"
  while [[ -n "$addrs" ]] && ((depth < 8)); do
    local cmds=()
    for a in $addrs; do cmds+=("pe $a"); done
    sos "$core" "$tmp/pe" "${cmds[@]}"
    grep -v '^Loading core dump' "$tmp/pe" >>"$d/pe.txt" || true
    addrs="$(sed -n 's/^InnerException: .*Use printexception \([0-9A-Fa-f]*\) to see more\.$/\1/p' "$tmp/pe" | tr 'A-F' 'a-f' | sort -u)"
    depth=$((depth + 1))
  done
  rm -rf "$tmp"
  return 0
}

# The class-init lock is a runtime Crst, a recursive pthread mutex inside the class's ListLockEntry
# (listlock.h): gdb reads the mutex the waiting thread passed to pthread_mutex_lock, its owner, and
# the entry's words before it (vtable, holding Thread*, list, the class's MethodTable*).
gdb_class_init() {  # gdb_class_init CORE DIR
  local core="$1" dir="$2" m
  mkdir -p "$dir/gdb"
  timeout 300 gdb -batch -nx -ex "set pagination off" -ex "info threads" \
    -ex "thread apply all bt 12" "$DOTNET" "$core" 2>&1 | grep -v '^\[New LWP' >"$dir/gdb/threads.txt" || true
  m="$(sed -n 's/.*pthread_mutex_lock (mutex=\(0x[0-9a-f]*\)).*/\1/p' "$dir/gdb/threads.txt" | head -1)"
  [[ -n "$m" ]] || return 0
  timeout 300 gdb -batch -nx -ex "set pagination off" -ex "p *(pthread_mutex_t *)$m" \
    -ex "x/6gx $m - 0x20" "$DOTNET" "$core" 2>&1 | grep -E '^(\$1|0x)' >"$dir/gdb/class-init-lock.txt" || true
  sed -i "1i # the mutex $m a thread waits for in pthread_mutex_lock; then the 4 words before it and its first 2" "$dir/gdb/class-init-lock.txt"
}

# dumpstackobjects of every managed thread, each block headed `### OSID <hex> <name-less>`:
# the objects each frame's stack slots refer to (what a semaphore's holder keeps on its stack).
sos_dso() {  # sos_dso CORE OUT
  local core="$1" out="$2" tmp ids cmds=() i
  tmp="$(mktemp -d)"
  sos "$core" "$tmp/threads" "clrthreads"
  # clrthreads rows: DBG ID OSID ThreadOBJ ...; DBG is a decimal or XXXX (dead).
  ids="$(awk '$1 ~ /^[0-9]+$/ && $3 ~ /^[0-9a-f]+$/ && length($4) >= 12 {print $3}' "$tmp/threads")"
  : >"$out"
  for i in $ids; do
    sos "$core" "$tmp/dso" "setthread -t $((0x$i))" "dso"
    { echo "### OSID $i"; grep -vE '^(Loading core dump|Ready to process)' "$tmp/dso"; } >>"$out"
  done
  rm -rf "$tmp"
}

oracle() {  # oracle SAMPLE DIR
  local sample="$1" dir="$2" core="$2/core"
  if [[ -z "$DOTNET_DUMP" ]]; then
    log "  SOS oracle skipped (no dotnet-dump)"; return 0
  fi
  mkdir -p "$dir/sos"
  SOS_CLRPATH=""
  if [[ "$sample" == single_file ]]; then
    local v; v="$(sed -n 's/.*<RuntimeFrameworkVersion>\(.*\)<.*/\1/p' "$HERE/$sample/$sample.csproj")"
    SOS_CLRPATH="${NUGET_PACKAGES:-$HOME/.nuget/packages}/microsoft.netcore.app.runtime.linux-x64/$v/runtimes/linux-x64/native"
  fi
  # An 8.0 app's DAC is the pack's, in its publish directory.
  if [[ "$sample" == net8_* ]]; then SOS_CLRPATH="$(publish_dir "$sample")"; fi

  log "  SOS oracle -> $dir/sos/"
  sos "$core" "$dir/sos/eeversion.txt" "eeversion"
  sos "$core" "$dir/sos/clrthreads.txt" "clrthreads"
  sos "$core" "$dir/sos/syncblk.txt" "syncblk"
  sos "$core" "$dir/sos/clrstack-all.txt" "clrstack -all"
  sos "$core" "$dir/sos/threadpool.txt" "threadpool"
  sos "$core" "$dir/sos/threadpool-wi.txt" "threadpool -wi"
  sos "$core" "$dir/sos/threadpool-stat.txt" "threadpool -stat"
  sos "$core" "$dir/sos/dumpasync.txt" "dumpasync"
  sos "$core" "$dir/sos/parallelstacks.txt" "parallelstacks"
  sos "$core" "$dir/sos/setthread-info.txt" "threads"
  sos "$core" "$dir/sos/eeheap-gc.txt" "eeheap -gc"
  sos "$core" "$dir/sos/dumpheap-stat.txt" "dumpheap -stat"
  sos "$core" "$dir/sos/gcheapstat.txt" "gcheapstat"
  sos "$core" "$dir/sos/analyzeoom.txt" "analyzeoom"
  sos "$core" "$dir/sos/thinlocks.txt" "dumpheap -thinlock"
  echo "# (no lines after 'Loading core dump' = SOS reported no thin locks)" >>"$dir/sos/thinlocks.txt"
  sos_thread_names "$core" "$dir/sos/thread-names.txt"
  case "$sample" in
    autofac_container)
      sos_fields "$core" "$dir/sos/lifetimescopes.txt" Autofac.dll Autofac.Core.Lifetime.LifetimeScope \
        _synchRoot "<Tag>k__BackingField:str" _parentScope ;;
    lock_abba)
      sos_fields "$core" "$dir/sos/locks.txt" System.Private.CoreLib.dll System.Threading.Lock \
        _owningThreadId _state _recursionCount
      sos_gcrefs "$core" "$dir/sos/lock-holders.txt" Knot.Samples.LockAbba. ;;
    sync_over_async|net8_sync_over_async)
      sos "$core" "$dir/sos/threadpoolqueue.txt" "threadpoolqueue"
      sos "$core" "$dir/sos/dumpasync-tasks.txt" "dumpasync --tasks" ;;
    aspnet_pool)
      sos "$core" "$dir/sos/threadpoolqueue.txt" "threadpoolqueue" ;;
    mres_continuation)
      sos "$core" "$dir/sos/threadpoolqueue.txt" "threadpoolqueue"
      sos "$core" "$dir/sos/dumpasync-tasks.txt" "dumpasync --tasks" ;;
    pool_queue)
      sos "$core" "$dir/sos/threadpoolqueue.txt" "threadpoolqueue"
      # OccupyWorker's id argument names worker 0, whose local queue holds the LedgerFlush items.
      sos "$core" "$dir/sos/clrstack-all-params.txt" "clrstack -all -p" ;;
    async_tcs)
      sos "$core" "$dir/sos/dumpasync-tasks.txt" "dumpasync --tasks"
      sos "$core" "$dir/sos/dumpasync-coalesce.txt" "dumpasync --coalesce" ;;
    semaphore_async)
      sos "$core" "$dir/sos/dumpasync-tasks.txt" "dumpasync --tasks"
      sos_fields "$core" "$dir/sos/semaphores.txt" System.Private.CoreLib.dll System.Threading.SemaphoreSlim \
        m_currentCount m_maxCount m_waitCount m_countOfWaitersPulsedToWake m_lockObjAndDisposed m_asyncHead m_asyncTail ;;
    task_cycle)
      sos "$core" "$dir/sos/dumpasync-tasks.txt" "dumpasync --tasks"
      sos_fields "$core" "$dir/sos/semaphores.txt" System.Private.CoreLib.dll System.Threading.SemaphoreSlim \
        m_currentCount m_maxCount m_waitCount m_countOfWaitersPulsedToWake m_lockObjAndDisposed m_asyncHead m_asyncTail
      sos_dso "$core" "$dir/sos/dso.txt" ;;
    parallel_barrier)
      sos "$core" "$dir/sos/threadpoolqueue.txt" "threadpoolqueue"
      sos "$core" "$dir/sos/dumpasync-tasks.txt" "dumpasync --tasks"
      sos_fields "$core" "$dir/sos/barriers.txt" System.Threading.dll System.Threading.Barrier \
        _currentTotalCount _currentPhase _actionCallerID _disposed _oddEvent _evenEvent
      sos_dso "$core" "$dir/sos/dso.txt" ;;
    redis_pool)
      sos "$core" "$dir/sos/threadpoolqueue.txt" "threadpoolqueue"
      sos "$core" "$dir/sos/dumpasync-tasks.txt" "dumpasync --tasks"
      sos "$core" "$dir/sos/clrstack-all-params.txt" "clrstack -all -p" ;;
    failfast)
      sos "$core" "$dir/sos/crashinfo.txt" "crashinfo" ;;
    class_init)
      sos_statics "$core" "$dir/sos/statics.txt" class_init.dll Knot.Samples.ClassInit.Registry Knot.Samples.ClassInit.Settings
      # Every loaded module: the statics of modules with no object on the heap are read too.
      sos "$core" "$dir/sos/dumpdomain.txt" "dumpdomain" ;;
    npgsql_pool)
      sos_statics "$core" "$dir/sos/statics.txt" npgsql_pool.dll Knot.Samples.NpgsqlPool.Database Knot.Samples.NpgsqlPool.Ledger
      sos_fields "$core" "$dir/sos/pool.txt" Npgsql.dll Npgsql.PoolingDataSource \
        "<MaxConnections>k__BackingField" "<MinConnections>k__BackingField" _numConnectors _idleCount Connectors
      sos_gcrefs "$core" "$dir/sos/connectors.txt" Npgsql.Internal.NpgsqlConnector
      sos_gcroots "$core" "$dir/sos/connections.txt" Npgsql.NpgsqlConnection ;;
    rwlock_writer)
      sos_statics "$core" "$dir/sos/statics.txt" rwlock_writer.dll Knot.Samples.RwlockWriter.PriceBook
      sos_fields "$core" "$dir/sos/rwlock.txt" System.Private.CoreLib.dll System.Threading.ReaderWriterLockSlim \
        _lockID _owners _writeLockOwnerId _upgradeLockOwnerId _numWriteWaiters _numReadWaiters \
        _numWriteUpgradeWaiters _numUpgradeWaiters _fIsReentrant
      sos_fields "$core" "$dir/sos/rwcounts.txt" System.Private.CoreLib.dll System.Threading.ReaderWriterCount \
        lockID readercount writercount upgradecount next
      sos_gcroots "$core" "$dir/sos/rwcount-roots.txt" System.Threading.ReaderWriterCount ;;
    gc_stall)
      # Mid-collection SOS refuses the walk unless told to go on; both readings are kept.
      sos "$core" "$dir/sos/dumpheap-stat-ignoregcstate.txt" "dumpheap -stat -ignoreGCState"
      sos "$core" "$dir/sos/verifyheap.txt" "verifyheap"
      sos "$core" "$dir/sos/verifyheap-ignoregcstate.txt" "verifyheap -ignoreGCState" ;;
  esac
  if is_crash "$sample" || [[ "$sample" == failfast ]]; then
    sos_exceptions "$core" "$dir/sos"
  fi
  if [[ "$sample" == class_init ]] && command -v gdb >/dev/null; then
    gdb_class_init "$core" "$dir"
  fi
  if [[ "$sample" == pinvoke_mutex ]]; then
    if command -v gdb >/dev/null; then
      mkdir -p "$dir/gdb"
      log "  gdb oracle -> $dir/gdb/native-mutex.txt"
      # Symbols come from the libraries on this machine (same files the process
      # mapped); the mutex address is what the sample printed on stderr.
      local maddr
      maddr="$(sed -n 's/^knot_mutex=\(0x[0-9a-f]*\)$/\1/p' "$dir/stderr.txt" | head -1)"
      timeout 300 gdb -batch -nx -ex "set pagination off" -ex "info threads" \
        -ex "p *(pthread_mutex_t *)${maddr:-0}" -ex "p ((pthread_mutex_t *)${maddr:-0})->__data.__owner" \
        -ex "thread apply all bt 8" "$DOTNET" "$core" 2>&1 | grep -v '^\[New LWP' >"$dir/gdb/native-mutex.txt" || true
    else
      log "  gdb not found: native mutex oracle skipped"
    fi
  fi
  case "$sample" in
    heap_population|net9_heap|net8_heap)
      sos_gcrefs "$core" "$dir/sos/inventory-refs.txt" "Knot.Samples.HeapPopulation.Inventory"
      sos_gcrefs "$core" "$dir/sos/ledger-refs.txt" "Knot.Samples.HeapPopulation.Ledger" ;;
    monitor_abba|failfast|pinvoke_mutex|self_contained|single_file|net9_abba|runtime_10_0_15|net8_abba)
      sos_gcrefs "$core" "$dir/sos/lock-objects.txt" "Knot.Samples." ;;
    heap_graph)
      sos_gcroots "$core" "$dir/sos/gcroot.txt" "Knot.Samples.HeapGraph." ;;
    cache_leak)
      sos_cache "$core" "$dir/sos" ;;
  esac
}

# SOS gcroot and objsize of every object whose type starts with PREFIX, one block per object
# headed `### ADDRESS TYPE` (one dotnet-dump run per object: its outputs have no separator).
sos_gcroots() {  # sos_gcroots CORE OUT PREFIX
  local core="$1" out="$2" prefix="$3" tmp line a mt name
  tmp="$(mktemp -d)"
  sos "$core" "$tmp/heap" "dumpheap -type $prefix"
  # Statistics rows: MT Count TotalSize Class Name; object rows: Address MT Size.
  declare -A names=()
  while read -r mt _ _ name; do names[$mt]="$name"; done < <(awk '/^Statistics:/{s=1; next} s && $1 ~ /^[0-9a-f]+$/ && NF >= 4 {print}' "$tmp/heap")
  : >"$out"
  while read -r a mt; do
    { echo "### $a ${names[$mt]:-?}"; } >>"$out"
    sos "$core" "$tmp/one" "gcroot $a" "objsize $a"
    grep -vE '^(Loading core dump|Ready to process)' "$tmp/one" >>"$out" || true
  done < <(awk '/^Statistics:/{exit} $1 ~ /^[0-9a-f]+$/ && length($1) >= 8 && $2 ~ /^[0-9a-f]+$/ && length($2) >= 8 {print $1, $2}' "$tmp/heap")
  sos "$core" "$tmp/stat" "dumpheap -stat"
  rm -rf "$tmp"
}

# SOS's reading of cache_leak's retention: gcroot and objsize of the static cache's dictionary
# (objsize's statistics only: its address list served to find the objects).
sos_cache() {  # sos_cache CORE SOSDIR
  local core="$1" d="$2" mt dict
  mt="$(awk '/Dictionary<System.String, Knot.Samples.CacheLeak.CachedReport>$/ {print $1; exit}' "$d/dumpheap-stat.txt")"
  sos "$core" "$d/dictionaries.txt" "dumpheap -mt $mt -short"
  dict="$(awk '/^ *[0-9a-f]+ *$/ && length($1) >= 12 {print $1; exit}' "$d/dictionaries.txt")"
  echo "dictionary = $dict   # ReportCache.s_reports" >"$d/addresses.txt"
  sos "$core" "$d/gcroot-cache.txt" "gcroot $dict"
  sos "$core" "$d/objsize-cache.txt" "objsize $dict"
  awk 'NR <= 2 || /^Statistics:/ {keep = keep || /^Statistics:/; print; next} keep {print}' "$d/objsize-cache.txt" >"$d/objsize-cache.txt.tmp" \
    && mv "$d/objsize-cache.txt.tmp" "$d/objsize-cache.txt"
  rm -f "$d/dictionaries.txt"
}

# ---------------------------------------------------------------- build
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  log "building samples (dotnet build -c Debug)"
  for p in monitor_abba autofac_container sync_over_async lock_abba pinvoke_mutex failfast \
           unhandled_exception failfast_exception stack_overflow heap_population gc_oom unhandled_oom idle_runtime heap_growth heap_graph \
           pool_queue orleans_silo timed_waits aspnet_pool \
           async_tcs semaphore_async cache_leak mres_continuation gc_stall task_cycle parallel_barrier redis_pool \
           npgsql_pool rwlock_writer class_init; do
    timeout 600 "$DOTNET" build "$HERE/$p/$p.csproj" -c Debug -nologo -v q >"$OUTDIR/build-$p.log" 2>&1 \
      || { cat "$OUTDIR/build-$p.log" >&2; die "build of $p failed"; }
  done
  for p in $PUBLISHED; do
    timeout 600 "$DOTNET" publish "$HERE/$p/$p.csproj" -c Debug -nologo -v q >"$OUTDIR/build-$p.log" 2>&1 \
      || { cat "$OUTDIR/build-$p.log" >&2; die "publish of $p failed"; }
  done
fi

# ---------------------------------------------------------------- heap_growth
# SOS's reading of heap_growth's retention: objsize of the cache's dictionary and of the tree's
# root (the tree's objsize is what it retains), the unreachable objects (dumpheap -dead), and
# gcroot of one Session.
sos_growth() {  # sos_growth CORE SOSDIR
  local core="$1" d="$2" mt dict node root sess
  first() { awk '/^ *[0-9a-f]+ *$/ && length($1) >= 12 {print $1; exit}' "$1"; }
  sos "$core" "$d/dumpheap-dead.txt" "dumpheap -stat -dead"
  mt="$(awk '/Dictionary<System.Guid, Knot.Samples.HeapGrowth.Session>$/ {print $1; exit}' "$d/dumpheap-stat.txt")"
  sos "$core" "$d/dictionaries.txt" "dumpheap -mt $mt -short"
  dict="$(first "$d/dictionaries.txt")"
  mt="$(awk '$NF == "Knot.Samples.HeapGrowth.Session" {print $1; exit}' "$d/dumpheap-stat.txt")"
  sos "$core" "$d/sessions.txt" "dumpheap -mt $mt -short"
  sess="$(first "$d/sessions.txt")"
  mt="$(awk '$NF == "Knot.Samples.HeapGrowth.TreeNode" {print $1; exit}' "$d/dumpheap-stat.txt")"
  sos "$core" "$d/treenodes.txt" "dumpheap -mt $mt -short"
  node="$(first "$d/treenodes.txt")"
  sos "$core" "$d/gcroot-treenode.txt" "gcroot $node"
  # The tree's root is the first TreeNode on the path from the static.
  root="$(awk '/->/ && /Knot.Samples.HeapGrowth.TreeNode/ {for (i = 1; i <= NF; i++) if ($i ~ /^[0-9a-f]{12,16}$/) {print $i; exit}}' "$d/gcroot-treenode.txt")"
  {
    echo "dictionary = $dict   # SessionCache.s_all"
    echo "session = $sess   # the first Session dumpheap lists"
    echo "tree_root = $root   # Forest.s_root"
  } >"$d/addresses.txt"
  sos "$core" "$d/objsize-cache.txt" "objsize $dict"
  sos "$core" "$d/objsize-tree.txt" "objsize $root"
  sos "$core" "$d/gcroot-session.txt" "gcroot $sess"
  # objsize lists every object it reaches: only its header line and statistics are kept, and
  # the address lists only served to find the objects.
  local f
  for f in "$d/objsize-cache.txt" "$d/objsize-tree.txt"; do
    awk 'NR <= 2 || /^Statistics:/ {keep = keep || /^Statistics:/; print; next} keep {print}' "$f" >"$f.tmp" && mv "$f.tmp" "$f"
  done
  rm -f "$d/dictionaries.txt" "$d/sessions.txt" "$d/treenodes.txt"
}

run_growth() {  # run_growth   (heap_growth/twice: kinds before and after, one process)
  local sample=heap_growth base="$OUTDIR/heap_growth" dll="$ARTIFACTS/bin/heap_growth/debug/heap_growth.dll"
  [[ -f "$dll" ]] || die "$dll not built"
  rm -rf "$base"; mkdir -p "$base/before" "$base/after"
  local trigger="$base/go"
  log "heap_growth/twice: starting"
  ( cd "$base"; ulimit -c 0; exec "$DOTNET" "$dll" "$trigger" >"$base/stdout.txt" 2>"$base/stderr.txt" ) &
  local pid=$!
  PIDS+=("$pid")
  wait_for 60 has_ready "$base/stdout.txt" || { cat "$base/stderr.txt" >&2; die "heap_growth: no 'ready' within 60 s"; }
  local kind
  for kind in before after; do
    local dir="$base/$kind"
    if [[ "$kind" == after ]]; then
      touch "$trigger"
      wait_for 60 grep -qx ready2 "$base/stdout.txt" || die "heap_growth: no 'ready2' within 60 s"
    fi
    wait_blocked "$pid" 30 || die "heap_growth: threads not all blocked within 30 s"
    record_threads "$pid" "$dir/threads.txt"
    local t0=$SECONDS
    timeout 300 "$CREATEDUMP" -f "$dir/core" --withheap "$pid" >"$dir/createdump.log" 2>&1 \
      || { cat "$dir/createdump.log" >&2; die "heap_growth: createdump failed"; }
    cp "$base/stdout.txt" "$dir/stdout.txt"; cp "$base/stderr.txt" "$dir/stderr.txt"
    {
      echo "sample            = $sample"
      echo "kind              = $kind"
      echo "dump              = core"
      echo "dump_bytes        = $(stat -c %s "$dir/core")"
      echo "how               = $CREATEDUMP -f $dir/core --withheap PID ($kind the burst; one process for both kinds)"
      echo "command           = $DOTNET $dll TRIGGER"
      echo "pid               = $pid"
      echo "runtime_version   = $RUNTIME_VERSION"
      echo "runtime_dir       = $RUNTIME_DIR"
      echo "sdk_version       = $("$DOTNET" --version)"
      echo "libcoreclr_buildid = $(build_id "$RUNTIME_DIR/libcoreclr.so")"
      echo "dotnet_dump       = $([[ -n "$DOTNET_DUMP" ]] && "$DOTNET_DUMP" --version 2>/dev/null | head -1 || echo none)"
      echo "kernel            = $(uname -r)"
      echo "dump_seconds      = $((SECONDS - t0))"
      echo "made_at           = $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    } >"$dir/info.txt"
    log "  $kind: $dir/core"
  done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  for kind in before after; do
    oracle "$sample" "$base/$kind"
    [[ -n "$DOTNET_DUMP" ]] && sos_growth "$base/$kind/core" "$base/$kind/sos"
  done
  return 0
}

# ---------------------------------------------------------------- gc_stall
# The process never settles (its threads allocate for ever), so it is dumped again and again
# until the dump caught what the kind is about, as SOS reads it (gc_caught).
gc_caught() {  # gc_caught KIND CORE
  local kind="$1" core="$2" out
  [[ -n "$DOTNET_DUMP" ]] || return 0
  out="$(mktemp)"
  local rc=0
  timeout 300 "$DOTNET_DUMP" analyze "$core" -c clrthreads -c "dumpheap -stat" -c "eeheap -gc" -c exit >"$out" 2>&1 || true
  case "$kind" in
    # A server GC's threads are no managed threads: clrthreads marks none (GC); near the limit
    # its allocating threads wait for them (their native stacks say it, not SOS).
    server) ;;
    # A routine collection caught while it moves objects: mid-collection.
    routine) grep -q "not in a valid state" "$out" || rc=1 ;;
    *) grep -q "(GC)" "$out" || rc=1 ;;
  esac
  # The stalls: the heap at 92 % (server: 85 %) or more of its 48 MiB hard limit (committed, as
  # eeheap says).
  if [[ "$kind" != routine ]]; then
    local committed near=92
    [[ "$kind" == server ]] && near=85
    committed="$(sed -n 's/^GC Committed Heap Size: *Size: 0x[0-9a-f]* (\([0-9]*\)) bytes\./\1/p' "$out" | head -1)"
    (( ${committed:-0} * 100 >= 0x3000000 * near )) || rc=1
  fi
  rm -f "$out"
  return $rc
}

run_gc_stall() {  # run_gc_stall KIND
  local sample=gc_stall kind="$1" dir="$OUTDIR/gc_stall/$1"
  local dll="$ARTIFACTS/bin/gc_stall/debug/gc_stall.dll" env=() args=()
  [[ -f "$dll" ]] || die "$dll not built"
  case "$kind" in
    workstation) env=(DOTNET_GCHeapHardLimit=0x3000000 DOTNET_gcServer=0 DOTNET_gcConcurrent=0); args=(16 6) ;;
    server) env=(DOTNET_GCHeapHardLimit=0x3000000 DOTNET_gcServer=1 DOTNET_GCDynamicAdaptationMode=0 DOTNET_gcConcurrent=0); args=(24 6) ;;
    routine) env=(DOTNET_gcServer=0 DOTNET_gcConcurrent=0); args=(2 6) ;;
    *) die "unknown kind $kind" ;;
  esac
  rm -rf "$dir"; mkdir -p "$dir"
  log "gc_stall/$kind: starting"
  local pid=0 starts=0 try t0=$SECONDS
  for try in $(seq 1 60); do
    # So close to its limit the runtime sometimes dies (SIGSEGV, or an OOM): a new process then.
    if ((pid == 0)) || ! kill -0 "$pid" 2>/dev/null; then
      starts=$((starts + 1))
      ((starts <= 5)) || die "gc_stall/$kind: the process died 5 times"
      ((pid == 0)) || log "  the process died ($(tail -1 "$dir/stderr.txt" 2>/dev/null)); a new one"
      ( cd "$dir"; ulimit -c 0; exec env "${env[@]}" "$DOTNET" "$dll" "${args[@]}" </dev/null >"$dir/stdout.txt" 2>"$dir/stderr.txt" ) &
      pid=$!
      PIDS+=("$pid")
      wait_for 60 has_ready "$dir/stdout.txt" || { cat "$dir/stderr.txt" >&2; die "gc_stall/$kind: no 'ready' within 60 s"; }
      sleep 1
    fi
    record_threads "$pid" "$dir/threads.txt"
    rm -f "$dir/core"
    if ! timeout 300 "$CREATEDUMP" -f "$dir/core" --withheap "$pid" >"$dir/createdump.log" 2>&1; then
      kill -0 "$pid" 2>/dev/null && { cat "$dir/createdump.log" >&2; die "gc_stall/$kind: createdump failed"; }
      log "  try $try: the process died under createdump"; continue
    fi
    if gc_caught "$kind" "$dir/core"; then break; fi
    ((try < 60)) || die "gc_stall/$kind: 60 dumps, none caught the collection"
    log "  try $try: no collection caught; again"
  done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  {
    echo "sample            = $sample"
    echo "kind              = $kind"
    echo "dump              = core"
    echo "dump_bytes        = $(stat -c %s "$dir/core")"
    echo "how               = $CREATEDUMP -f $dir/core --withheap PID (process run with ${env[*]}; dumped $try time(s) until SOS showed the collection)"
    echo "command           = $DOTNET $dll ${args[*]}"
    echo "pid               = $pid"
    echo "tries             = $try (processes started: $starts)"
    echo "runtime_version   = $RUNTIME_VERSION"
    echo "runtime_dir       = $RUNTIME_DIR"
    echo "sdk_version       = $("$DOTNET" --version)"
    echo "libcoreclr_buildid = $(build_id "$RUNTIME_DIR/libcoreclr.so")"
    echo "dotnet_dump       = $([[ -n "$DOTNET_DUMP" ]] && "$DOTNET_DUMP" --version 2>/dev/null | head -1 || echo none)"
    echo "kernel            = $(uname -r)"
    echo "dump_seconds      = $((SECONDS - t0))"
    echo "made_at           = $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  } >"$dir/info.txt"
  log "  dump: $dir/core (try $try)"
  oracle "$sample" "$dir"
}

# ---------------------------------------------------------------- run one
run_job() {  # run_job SAMPLE KIND
  local sample="$1" kind="$2" dir="$OUTDIR/$1/$2"
  local dll="$ARTIFACTS/bin/$sample/debug/$sample.dll" host="$DOTNET" createdump="$CREATEDUMP"
  local rt_version="$RUNTIME_VERSION" rt_dir="$RUNTIME_DIR" coreclr="$RUNTIME_DIR/libcoreclr.so"
  if is_published "$sample"; then
    # The published executable is the host; the runtime is its own (the pack's version).
    rt_dir="$(publish_dir "$sample")"; host="$rt_dir/$sample"; dll=""
    rt_version="$(sed -n 's/.*<RuntimeFrameworkVersion>\(.*\)<.*/\1/p' "$HERE/$sample/$sample.csproj")"
    coreclr="$rt_dir/libcoreclr.so"; [[ -f "$coreclr" ]] || coreclr="$host"
    [[ -x "$rt_dir/createdump" ]] && createdump="$rt_dir/createdump"
    [[ -x "$host" ]] || die "$host not published"
  else
    [[ -f "$dll" ]] || die "$dll not built"
  fi
  rm -rf "$dir"; mkdir -p "$dir"
  local flags="" how="" env=() args=() wrap=()
  case "$sample/$kind" in
    failfast/*)
      local t
      case "$kind" in mini) t=1 ;; heap) t=2 ;; triage) t=3 ;; full) t=4 ;; *) die "bad kind $kind" ;; esac
      env=(DOTNET_DbgEnableMiniDump=1 DOTNET_DbgMiniDumpType=$t "DOTNET_DbgMiniDumpName=$dir/core"
           DOTNET_EnableCrashReport=1)
      args=(8000)   # watchdog delay (ms) before Environment.FailFast: time to check and record the wedge
      how="Environment.FailFast via ${env[*]}" ;;
    gc_oom/heap|net8_gc_oom/heap)
      env=(DOTNET_GCHeapHardLimit=0x4000000 DOTNET_DbgEnableMiniDump=1 DOTNET_DbgMiniDumpType=2
           "DOTNET_DbgMiniDumpName=$dir/core" DOTNET_EnableCrashReport=1)
      how="OutOfMemoryException caught, then Environment.FailFast; the runtime's createdump via ${env[*]}" ;;
    unhandled_oom/heap)
      env=(DOTNET_GCHeapHardLimit=0x2000000 DOTNET_DbgEnableMiniDump=1 DOTNET_DbgMiniDumpType=2
           "DOTNET_DbgMiniDumpName=$dir/core" DOTNET_EnableCrashReport=1)
      how="OutOfMemoryException unhandled on CacheLoader; the runtime's createdump via ${env[*]}" ;;
    heap_population/heap)
      env=(DOTNET_GCHeapHardLimitPercent=0x32)
      flags="--withheap"
      how="$CREATEDUMP -f $dir/core --withheap PID (process run with ${env[*]})" ;;
    monitor_abba/container)
      wrap=("$HERE/fake-cgroup-limit.sh" 2147483648)
      flags="--withheap"
      how="$CREATEDUMP -f $dir/core --withheap PID (process run by fake-cgroup-limit.sh 2147483648: a 2 GiB memory cgroup limit as the runtime reads it, no GCHeapHardLimit)" ;;
    heap_population/server)
      env=(DOTNET_gcServer=1 DOTNET_GCDynamicAdaptationMode=0 DOTNET_GCHeapHardLimit=0x20000000)
      flags="--withheap"
      how="$CREATEDUMP -f $dir/core --withheap PID (process run with ${env[*]})" ;;
    runtime_10_0_15/heap|net9_heap/heap|net8_abba/heap|net8_heap/heap)
      env=(DOTNET_GCHeapHardLimit=0x10000000)
      flags="--withheap"
      how="$createdump -f $dir/core --withheap PID (process run with ${env[*]})" ;;
    unhandled_exception/heap|failfast_exception/heap|stack_overflow/heap)
      env=(DOTNET_DbgEnableMiniDump=1 DOTNET_DbgMiniDumpType=2 "DOTNET_DbgMiniDumpName=$dir/core"
           DOTNET_EnableCrashReport=1)
      how="the runtime's createdump on the crash via ${env[*]}" ;;
    aspnet_pool/*)
      # The mode is the kind; a small hard limit keeps the heap (and the dump) small.
      env=(DOTNET_GCHeapHardLimit=0x4000000 DOTNET_gcServer=0 DOTNET_gcConcurrent=0)
      args=("${kind%2}")   # deadlock2: the deadlock again, another process (its signature)
      flags="--withheap"
      how="$CREATEDUMP -f $dir/core --withheap PID (process run with ${env[*]}, mode $kind)" ;;
    npgsql_pool/heap)
      # Npgsql's startup JITs and loads much: the JIT host's cache of 64 KiB arena slabs (2.6 MB)
      # is freed (JitHostMaxSlabCache=0), glibc fills freed memory with one byte, and call
      # counting is off (no tier-1 rejits): 4.2 MB of zstd less 0.6 MB (see README).
      env=(MALLOC_PERTURB_=165 DOTNET_JitHostMaxSlabCache=0 DOTNET_TC_CallCounting=0)
      flags="--withheap"
      how="$CREATEDUMP -f $dir/core --withheap PID (process run with ${env[*]})" ;;
    */heap|orleans_silo/again) flags="--withheap" ;;
    */full) flags="--full" ;;
    */mini) flags="--normal" ;;
    */triage) flags="--triage" ;;
    *) die "unknown kind $kind" ;;
  esac
  if [[ "$sample" == redis_pool ]]; then
    # A redis-server of our own on a free port, killed with the sample (PIDS).
    local port
    port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no >"$dir/redis-server.log" 2>&1 &
    PIDS+=("$!")
    wait_for 30 redis-cli -p "$port" ping >/dev/null 2>&1 || die "redis-server did not start on port $port"
    args=("$port")
    how="$CREATEDUMP -f $dir/core --withheap PID (a redis-server on 127.0.0.1:$port)"
  fi
  [[ -z "$how" ]] && how="$createdump -f $dir/core $flags PID"
  log "$sample/$kind: starting"
  [[ "$sample" == npgsql_pool ]] && pg_ready
  # Own cwd, no kernel core (FailFast aborts the process after createdump).
  # cache_leak reads commands from stdin: a FIFO opened read-write (so the process holds its
  # writer too) keeps Console.ReadLine waiting with no other process; /dev/null would end it.
  local stdin=/dev/null
  if [[ "$sample" == cache_leak ]]; then stdin="$dir/stdin.fifo"; mkfifo "$stdin"; fi
  (
    cd "$dir"; ulimit -c 0
    exec env "${env[@]}" "${wrap[@]}" "$host" $dll "${args[@]}" <>"$stdin" >"$dir/stdout.txt" 2>"$dir/stderr.txt"
  ) &
  local pid=$!
  PIDS+=("$pid")
  local t0=$SECONDS
  if is_crash "$sample"; then
    log "  waiting for the crash and the runtime's createdump"
    wait_for 120 bash -c "! kill -0 $pid 2>/dev/null" || die "$sample: process did not die within 120 s"
    wait "$pid" 2>/dev/null || true
    [[ -s "$dir/core" ]] || { cat "$dir/stderr.txt" >&2; die "$sample: runtime wrote no dump"; }
    echo "# tid	state	wchan	comm  (none: the process had died by itself; see sos/thread-names.txt)" >"$dir/threads.txt"
  else
  # An Orleans silo starts in seconds, more on a loaded machine.
  # An ASP.NET Core pool reaches its shape as fast as the pool injects workers: slowly on a busy machine.
  local ready_secs=60; [[ "$sample" == orleans_silo || "$sample" == aspnet_pool ]] && ready_secs=240
  wait_for "$ready_secs" has_ready "$dir/stdout.txt" || { cat "$dir/stderr.txt" >&2; die "$sample: no 'ready' within $ready_secs s"; }
  if [[ "$sample" == aspnet_pool ]]; then
    # Dumped while requests keep coming (starved, nolock) or being served (healthy); the
    # deadlocked pool's gate thread wakes every half second: the threads need not settle.
    wait_blocked "$pid" 5 || log "  $sample/$kind: threads still changing; dumped as they are"
  else
    wait_blocked "$pid" 30 || die "$sample: threads not all blocked (state S) within 30 s"
  fi
  record_threads "$pid" "$dir/threads.txt"
  t0=$SECONDS
  if [[ "$sample" == failfast ]]; then
    log "  waiting for the watchdog's FailFast and the runtime's createdump"
    wait_for 120 bash -c "! kill -0 $pid 2>/dev/null" || die "$sample: process did not exit after FailFast"
    wait "$pid" 2>/dev/null || true
    [[ -s "$dir/core" ]] || { cat "$dir/stderr.txt" >&2; die "$sample: runtime wrote no dump"; }
  else
    timeout 300 "$createdump" -f "$dir/core" $flags "$pid" >"$dir/createdump.log" 2>&1 \
      || { cat "$dir/createdump.log" >&2; die "$sample: createdump failed"; }
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  fi
  [[ "$stdin" == /dev/null ]] || rm -f "$stdin"
  local size; size="$(stat -c %s "$dir/core")"
  {
    echo "sample            = $sample"
    echo "kind              = $kind"
    echo "dump              = core"
    echo "dump_bytes        = $size"
    echo "how               = $how"
    echo "command           = $host $dll ${args[*]}"
    echo "pid               = $pid"
    echo "runtime_version   = $rt_version"
    echo "runtime_dir       = $rt_dir"
    echo "sdk_version       = $("$DOTNET" --version)"
    echo "libcoreclr_buildid = $(build_id "$coreclr")"
    [[ -f "$rt_dir/libclrjit.so" ]] && echo "libclrjit_buildid  = $(build_id "$rt_dir/libclrjit.so")"
    [[ -f "$ARTIFACTS/bin/$sample/debug/libknotmutex.so" ]] && \
      echo "libknotmutex_buildid = $(build_id "$ARTIFACTS/bin/$sample/debug/libknotmutex.so")"
    echo "dotnet_dump       = $([[ -n "$DOTNET_DUMP" ]] && "$DOTNET_DUMP" --version 2>/dev/null | head -1 || echo none)"
    echo "kernel            = $(uname -r)"
    echo "dump_seconds      = $((SECONDS - t0))"
    echo "made_at           = $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  } >"$dir/info.txt"
  log "  dump: $dir/core ($size bytes)"
  if [[ "$TRIMMED" == *" $sample/$kind "* ]]; then trim_core "$sample" "$dir" "$rt_version"; fi
  oracle "$sample" "$dir"
}

# ---------------------------------------------------------------- main
JOBS=()
if (($# == 0)); then
  JOBS=("${ALL_JOBS[@]}")
else
  for a in "$@"; do
    matched=0
    for j in "${ALL_JOBS[@]}"; do
      if [[ "$j" == "$a" || "${j%%/*}" == "$a" ]]; then JOBS+=("$j"); matched=1; fi
    done
    ((matched)) || die "unknown sample or kind: $a (known: ${ALL_JOBS[*]})"
  done
fi
for j in "${JOBS[@]}"; do
  if [[ "$j" == heap_growth/twice ]]; then run_growth
  elif [[ "$j" == gc_stall/* ]]; then run_gc_stall "${j##*/}"
  else run_job "${j%%/*}" "${j##*/}"; fi
done
log "done: ${#JOBS[@]} dump(s) under $OUTDIR"
# Check the SOS readings against expected.toml (the intended wedge shapes).
if [[ -n "$DOTNET_DUMP" ]] && command -v python3 >/dev/null; then
  log "checking oracles against expected.toml"
  python3 "$HERE/verify-expected.py" "$OUTDIR" >"$OUTDIR/verify.txt" 2>&1 || {
    grep -v '^ok' "$OUTDIR/verify.txt" >&2; die "oracles differ from expected.toml (see $OUTDIR/verify.txt)"; }
  tail -1 "$OUTDIR/verify.txt" >&2
fi
