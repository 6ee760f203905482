#!/bin/sh
# Runs inside the emulated arm64 system (xtask/arm64/image.sh's knot-init), from /knot: builds
# the native samples, dumps them with the kernel and gcore, records gdb's readings against only
# the files that will be committed, and writes a tar of /tmp/out to /dev/vdc.
set -u
K=/knot
OUT=/tmp/out
mkdir -p "$OUT"
stamp() { echo "$(date -u +%s) $*" >> "$OUT/timings.txt"; echo "guest: $(date -u +%T) $*"; }
stamp start
ulimit -c unlimited
echo core > /proc/sys/kernel/core_pattern
echo 0 > /proc/sys/kernel/core_uses_pid
uname -a > "$OUT/uname.txt"
cat /proc/cpuinfo > "$OUT/cpuinfo.txt"
gcc --version | head -1 > "$OUT/versions.txt"
gdb --version | head -1 >> "$OUT/versions.txt"
ldd --version | head -1 >> "$OUT/versions.txt"

cd "$K"
mkdir -p "$OUT/bin"
for name in abba crash_null signal_handler; do
    # As the x86-64 samples: from the root, the root mapped to ".", so DWARF names samples/native/x.c.
    gcc -g -O0 -pthread -Wall -I samples/native -fdebug-prefix-map=$K=. -o "$OUT/bin/$name" "samples/native/$name.c" || echo "gcc $name failed"
done
stamp built

wait_ready() { # LOG PID
    i=0
    while ! grep -q ready "$1" 2>/dev/null; do
        i=$((i + 1)); [ $i -gt 600 ] && { echo "no ready from $2"; return 1; }
        sleep 0.2
    done
    # Every thread asleep (state S) twice in a row: each is in its final blocking call.
    ok=0; i=0
    while [ $ok -lt 2 ] && [ $i -lt 300 ]; do
        all=1
        for s in /proc/$2/task/*/stat; do
            st=$(sed 's/.*) //' "$s" | cut -d' ' -f1)
            [ "$st" = S ] || all=0
        done
        if [ $all = 1 ]; then ok=$((ok + 1)); else ok=0; fi
        i=$((i + 1)); sleep 0.5
    done
}

# abba: the kernel's core (SIGABRT from outside) and gcore's.
d="$OUT/abba/kernel"; mkdir -p "$d"; cp "$OUT/bin/abba" "$d/"; cd "$d"
./abba > log 2>&1 & pid=$!
wait_ready log $pid; kill -ABRT $pid; wait $pid; echo "abba kernel: exit $? $(ls -la core 2>&1)"
stamp abba-kernel

d="$OUT/abba/gcore"; mkdir -p "$d"; cp "$OUT/bin/abba" "$d/"; cd "$d"
./abba > log 2>&1 & pid=$!
wait_ready log $pid; gcore -o core $pid > gcore.log 2>&1; mv core.$pid core; kill -9 $pid; wait $pid
echo "abba gcore: $(ls -la core 2>&1)"
stamp abba-gcore

# signal_handler: the handler blocks on a mutex main holds; the kernel's signal frame
# (__kernel_rt_sigreturn in the vdso) sits between it and the interrupted loop.
d="$OUT/signal_handler/kernel"; mkdir -p "$d"; cp "$OUT/bin/signal_handler" "$d/"; cd "$d"
./signal_handler > log 2>&1 & pid=$!
wait_ready log $pid; kill -ABRT $pid; wait $pid; echo "signal_handler kernel: exit $? $(ls -la core 2>&1)"
stamp signal_handler-kernel

# crash_null: the worker reads through NULL once told "go" on stdin.
d="$OUT/crash_null/kernel"; mkdir -p "$d"; cp "$OUT/bin/crash_null" "$d/"; cd "$d"
mkfifo go
./crash_null < go > log 2>&1 & pid=$!
exec 3> go
wait_ready log $pid; echo go >&3; wait $pid; echo "crash_null kernel: exit $? $(ls -la core 2>&1)"
exec 3>&-
rm -f go
stamp crash_null-kernel

# The libraries the cores map, under the names the dynamic linker used and their resolved
# paths (NT_FILE's), and their debug files from libc6-dbg, by build-id.
cd "$OUT"
mkdir -p sysroot/lib/aarch64-linux-gnu sysroot/usr/lib/aarch64-linux-gnu debug
cp -L /lib/aarch64-linux-gnu/libc.so.6 sysroot/lib/aarch64-linux-gnu/
cp -L /lib/ld-linux-aarch64.so.1 sysroot/lib/
ln -sf ../../../lib/aarch64-linux-gnu/libc.so.6 sysroot/usr/lib/aarch64-linux-gnu/libc.so.6
ln -sf ../../../lib/ld-linux-aarch64.so.1 sysroot/usr/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1
for lib in sysroot/lib/aarch64-linux-gnu/libc.so.6 sysroot/lib/ld-linux-aarch64.so.1; do
    id=$(readelf -n "$lib" | sed -n 's/.*Build ID: //p')
    f=/usr/lib/debug/.build-id/$(echo "$id" | cut -c1-2)/$(echo "$id" | cut -c3-).debug
    if [ -e "$f" ]; then
        mkdir -p "debug/.build-id/$(echo "$id" | cut -c1-2)"
        cp -L "$f" "debug/.build-id/$(echo "$id" | cut -c1-2)/"
    else
        echo "no debug file for $lib ($id)"
    fi
    echo "$lib $id" >> "$OUT/build-ids.txt"
done
stamp collected

gdb_read() { # DIR BINARY SYSROOT DEBUGDIR OUTFILE COMMANDS...
    dir=$1 bin=$2 sysroot=$3 dbg=$4 out=$5; shift 5
    set -- "$@"
    ( cd "$dir" && gdb -nx -batch -iex "set debuginfod enabled off" -iex "set sysroot $sysroot" \
        -iex "set debug-file-directory $dbg" -ex "set pagination off" -ex "set width 0" \
        "$@" "./$bin" core ) > "$out" 2> "${out%.txt}.stderr.txt"
}
for d in abba/kernel:abba abba/gcore:abba crash_null/kernel:crash_null signal_handler/kernel:signal_handler; do
    dir=${d%%:*} bin=${d##*:}
    # The oracle: gdb with only the committed files (sysroot/ and debug/ beside the dumps).
    gdb_read "$dir" "$bin" ../../sysroot ../../debug "$OUT/$dir/gdb-bt.txt" -ex "thread apply all bt"
    # The registers of every thread, for the reader's tests.
    gdb_read "$dir" "$bin" ../../sysroot ../../debug "$OUT/$dir/gdb-regs.txt" -ex "thread apply all info registers"
    # What the whole system (libc6-dbg installed) gives, beside it.
    gdb_read "$dir" "$bin" / /usr/lib/debug "$OUT/$dir/gdb-bt.system.txt" -ex "thread apply all bt"
done
# glibc's lock layouts on aarch64 as the program's own DWARF has them, and the two locks' state.
gdb_read abba/kernel abba ../../sysroot ../../debug "$OUT/abba/kernel/gdb-locks.txt" \
    -ex 'ptype/o pthread_mutex_t' -ex 'ptype/o pthread_rwlock_t' -ex 'ptype/o pthread_cond_t' -ex 'p sizeof(sem_t)' \
    -ex 'p lock_a' -ex 'p lock_b'
# The crash's reading, stderr in the same file and in order (gdb says there that glibc recorded
# no abort message), as for x86-64.
( cd crash_null/kernel && gdb -nx -batch -iex "set debuginfod enabled off" -iex "set sysroot ../../sysroot" \
    -iex "set debug-file-directory ../../debug" -ex "set pagination off" -ex "set width 0" \
    -ex "echo ==siginfo\\n" -ex 'p $_siginfo' -ex "echo ==pc\\n" -ex 'x/i $pc' \
    -ex "echo ==abort_msg\\n" -ex 'p __abort_msg->msg' -ex "echo ==bt\\n" -ex bt -ex "echo ==end\\n" \
    ./crash_null core ) > "$OUT/crash_null/kernel/gdb-crash.txt" 2>&1
stamp gdb
ls -laR "$OUT" | head -80
tar cf /dev/vdc -C "$OUT" .
sync
stamp done
