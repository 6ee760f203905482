#!/bin/sh
# Runs inside the emulated arm64 system (xtask/arm64/image.sh's knot-init), from /knot: knot's
# .NET samples (published self-contained for linux-arm64 on the host by dotnet-inputs.sh) run
# until wedged, dumped by their runtime's createdump --withheap, and read by SOS (dotnet-dump,
# run on the arm64 runtime through /knot/dotnet), as samples/dotnet/make-dumps.sh does on
# x86-64. Writes a tar of /tmp/out to /dev/vdc.
set -u
K=/knot
OUT=/tmp/out
mkdir -p "$OUT"
stamp() { echo "$(date -u +%s) $*" >> "$OUT/timings.txt"; echo "guest: $(date -u +%T) $*"; }
stamp start
uname -a > "$OUT/uname.txt"
export DOTNET_ROOT=$K/dotnet DOTNET_SYSTEM_GLOBALIZATION_INVARIANT=1 DOTNET_CLI_TELEMETRY_OPTOUT=1
DD=$K/dotnet-dump/dotnet-dump
"$DD" --version > "$OUT/dotnet-dump-version.txt" 2>&1
cp "$K/dotnet-dump-version.txt" "$OUT/dotnet-dump-package.txt" 2>/dev/null

# (sh has no local variables: each function's are named for it.)
wait_ready() { # LOG PID
    wr_i=0
    while ! grep -q ready "$1" 2>/dev/null; do
        wr_i=$((wr_i + 1)); [ $wr_i -gt 1500 ] && { echo "no ready from $2"; return 1; }
        sleep 0.2
    done
    # Every thread asleep (state S) three times in a row: each is in its final blocking call.
    wr_ok=0; wr_i=0
    while [ $wr_ok -lt 3 ] && [ $wr_i -lt 300 ]; do
        wr_all=1
        for wr_f in /proc/$2/task/*/stat; do
            wr_st=$(sed 's/.*) //' "$wr_f" 2>/dev/null | cut -d' ' -f1)
            [ "$wr_st" = S ] || wr_all=0
        done
        if [ $wr_all = 1 ]; then wr_ok=$((wr_ok + 1)); else wr_ok=0; fi
        wr_i=$((wr_i + 1)); sleep 1
    done
}

threads_of() { # PID: tid, state, wchan, comm (as make-dumps.sh's threads.txt)
    echo "# tid	state	wchan	comm  (from /proc/$1/task at dump time)"
    for to_t in /proc/$1/task/*; do
        printf '%s\t%s\t%s\t%s\n' "$(basename "$to_t")" "$(sed 's/.*) //' "$to_t/stat" | cut -d' ' -f1)" "$(cat "$to_t/wchan" 2>/dev/null)" "$(cat "$to_t/comm")"
    done
}

sos() { # CORE OUTFILE CMD...   (one dotnet-dump invocation, as make-dumps.sh's)
    sos_core=$1 sos_out=$2; shift 2
    sos_args=""
    for sos_c in "$@"; do sos_args="$sos_args -c \"$sos_c\""; done
    eval timeout 900 "$DD" analyze "$sos_core" $sos_args -c exit > "$sos_out" 2>&1
    sos_rc=$?
    [ $sos_rc = 0 ] || printf '\n# dotnet-dump exited with status %d\n' "$sos_rc" >> "$sos_out"
}

# SAMPLE [ENV...]: run, wedge, createdump --withheap, SOS.
dump() {
    s=$1; shift
    d=$OUT/$s/heap; mkdir -p "$d/sos"; cd "$d"
    env "$@" "$K/apps/$s/$s" > stdout.txt 2> stderr.txt & pid=$!
    wait_ready stdout.txt $pid
    threads_of $pid > threads.txt
    t0=$(date +%s)
    "$K/apps/$s/createdump" -f "$d/core" --withheap $pid > createdump.log 2>&1
    t1=$(date +%s)
    {
        echo "sample            = $s"
        echo "kind              = heap"
        echo "dump              = core"
        echo "dump_bytes        = $(stat -c %s core 2>/dev/null)"
        echo "how               = $K/apps/$s/createdump -f core --withheap PID${*:+ (process run with $*)}"
        echo "command           = $K/apps/$s/$s (published self-contained, linux-arm64, runtime pack 10.0.12)"
        echo "pid               = $pid"
        echo "runtime_version   = 10.0.12"
        echo "libcoreclr_buildid = $(readelf -n "$K/apps/$s/libcoreclr.so" 2>/dev/null | sed -n 's/.*Build ID: //p')"
        echo "dotnet_dump       = $(cat "$OUT/dotnet-dump-version.txt")"
        echo "kernel            = $(uname -r)"
        echo "dump_seconds      = $((t1 - t0))"
        echo "made_at           = $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    } > info.txt
    kill -9 $pid; wait $pid 2>/dev/null
    stamp "$s dumped ($(stat -c %s core 2>/dev/null) bytes)"
    sos core sos/eeversion.txt "eeversion"
    sos core sos/clrthreads.txt "clrthreads"
    sos core sos/syncblk.txt "syncblk"
    sos core sos/clrstack-all.txt "clrstack -all"
    stamp "$s sos stacks"
    sos core sos/dumpheap-stat.txt "dumpheap -stat"
    sos core sos/setthread-info.txt "threads"
    sos core sos/threadpool.txt "threadpool"
    sos core sos/eeheap-gc.txt "eeheap -gc"
    case $s in
        sync_over_async)
            sos core sos/dumpasync.txt "dumpasync"
            sos core sos/threadpoolqueue.txt "threadpoolqueue" ;;
    esac
    stamp "$s sos"
}

# The wedges, in the order of what the issue asks first: a monitor deadlock, a known heap
# population (under a heap hard limit from a setting, as on x86-64), sync over async.
dump monitor_abba
dump heap_population DOTNET_GCHeapHardLimitPercent=0x32
dump sync_over_async

cd "$OUT"
ls -laR "$OUT" | head -60
tar cf /dev/vdc -C "$OUT" .
sync
stamp done
