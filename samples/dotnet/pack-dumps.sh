#!/usr/bin/env bash
# pack-dumps.sh — copy the committed subset of make-dumps.sh's output into
# samples/dotnet/dumps/: gzip -9 cores (zstd -19 --long=27 for ZSTD_JOBS, the newer ones), their oracle text, the sample's own
# assemblies, and the runtime files needed to read the dumps without .NET.
#
# Usage: samples/dotnet/pack-dumps.sh [SRC] [DEST]
#   SRC   make-dumps.sh output (default <repo>/target/samples/dotnet)
#   DEST  default <repo>/samples/dotnet/dumps  (replaced wholesale)
#   ONLY="sample/kind ..."  pack only these jobs, replacing just their directories
#                           (and their samples' app/), and leave the rest of DEST alone
#                           (ONLY="" packs nothing into DEST: only DEPLOY's dumps)
#   DEPLOY="sample/kind ..." the deployment-shape dumps packed into deploy-dumps/ (default: all
#                           of them; DEPLOY="" none); the .NET 8 ones as core.zst (zstd -19 --long=27)
set -Eeuo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
SRC="${1:-$REPO/target/samples/dotnet}"
DEST="${2:-$HERE/dumps}"
ARTIFACTS="$SRC/artifacts/bin"

# The committed dumps (sample/kind).
COMMITTED=(
  monitor_abba/heap
  autofac_container/heap
  lock_abba/heap
  pinvoke_mutex/heap
  sync_over_async/heap
  failfast/heap
  monitor_abba/triage
  unhandled_exception/heap
  failfast_exception/heap
  stack_overflow/heap
  heap_population/heap
  heap_population/server
  gc_oom/heap
  unhandled_oom/heap
  idle_runtime/heap
  heap_graph/heap
  pool_queue/heap
  timed_waits/heap
  async_tcs/heap
  semaphore_async/heap
  cache_leak/heap
  mres_continuation/heap
  gc_stall/workstation
  gc_stall/server
  gc_stall/routine
  task_cycle/heap
  parallel_barrier/heap
  rwlock_writer/heap
  class_init/heap
  npgsql_pool/heap
  redis_pool/heap
)
# Packed with zstd -19 --long=27 as core.zst (a fifth smaller than gzip -9; knot reads it as it is).
# npgsql_pool and redis_pool come trimmed by make-dumps.sh (trim-core.py: without the pages the
# committed runtime and app files hold), so they fit the 3 MB a committed dump may have.
ZSTD_JOBS=" gc_stall/workstation gc_stall/server gc_stall/routine task_cycle/heap parallel_barrier/heap rwlock_writer/heap class_init/heap npgsql_pool/heap redis_pool/heap "
# Made and read by SOS but not committed (over the 3 MB a committed dump may have): their oracle
# files only, into <sample>/sos/.
ORACLE_ONLY=" "
if [[ -n "${ONLY:-}" ]]; then
  read -r -a COMMITTED <<<"$ONLY"
fi
# ONLY="" (set, empty): nothing into DEST.
if [[ -z "${ONLY-x}" ]]; then COMMITTED=(); fi
RUNTIME_FILES=(libcoreclr.so libclrjit.so System.Private.CoreLib.dll libmscordaccore.so libSystem.Native.so)

build_id() { readelf -n "$1" 2>/dev/null | awk '/Build ID/{print $3; exit}'; }

if ((${#COMMITTED[@]})); then
runtime_dir="$(awk -F' *= *' '$1=="runtime_dir"{print $2}' "$SRC/${COMMITTED[0]}/info.txt")"
runtime_version="$(awk -F' *= *' '$1=="runtime_version"{print $2}' "$SRC/${COMMITTED[0]}/info.txt")"
[[ -d "$runtime_dir" ]] || { echo "runtime dir $runtime_dir missing" >&2; exit 1; }

if [[ -n "${ONLY:-}" ]]; then
  for job in "${COMMITTED[@]}"; do rm -rf "${DEST:?}/$job" "${DEST:?}/${job%%/*}/app"; done
else
  rm -rf "$DEST"
fi
mkdir -p "$DEST/runtime/$runtime_version"
{
  echo "# Runtime files of Microsoft.NETCore.App $runtime_version (linux-x64), gzip -9."
  echo "# file  bytes  sha256(uncompressed)  gnu-build-id  original-path"
  for f in "${RUNTIME_FILES[@]}"; do
    gzip -9 -n -c "$runtime_dir/$f" >"$DEST/runtime/$runtime_version/$f.gz"
    printf '%s  %s  %s  %s  %s\n' "$f" "$(stat -c %s "$runtime_dir/$f")" \
      "$(sha256sum "$runtime_dir/$f" | cut -d' ' -f1)" "$(build_id "$runtime_dir/$f" || true)" "$runtime_dir/$f"
  done
} >"$DEST/runtime/$runtime_version/FILES.txt"

for job in "${COMMITTED[@]}"; do
  [[ "$ORACLE_ONLY" == *" $job "* ]] && continue
  sample="${job%%/*}"; src="$SRC/$job"; dst="$DEST/$job"
  [[ -f "$src/core" ]] || { echo "missing $src/core (run make-dumps.sh first)" >&2; exit 1; }
  mkdir -p "$dst"
  echo "packing $job"
  if [[ "$ZSTD_JOBS" == *" $job "* ]]; then
    zstd -19 --long=27 -q -f "$src/core" -o "$dst/core.zst"
    packed="$dst/core.zst"; packed_key=core_zst_bytes
  else
    gzip -9 -n -c "$src/core" >"$dst/core.gz"
    packed="$dst/core.gz"; packed_key=core_gz_bytes
  fi
  cp "$src/info.txt" "$src/threads.txt" "$src/stdout.txt" "$src/stderr.txt" "$dst/"
  [[ -f "$src/trim.txt" ]] && cp "$src/trim.txt" "$dst/"
  [[ -f "$src/core.crashreport.json" ]] && cp "$src/core.crashreport.json" "$dst/"
  cp -r "$src/sos" "$dst/"
  [[ -d "$src/gdb" ]] && cp -r "$src/gdb" "$dst/"
  printf '%-17s = %s\ncore_sha256       = %s\n' "$packed_key" "$(stat -c %s "$packed")" \
    "$(sha256sum "$src/core" | cut -d' ' -f1)" >>"$dst/info.txt"
  # The sample's own files, once per sample.
  if [[ ! -d "$DEST/$sample/app" ]]; then
    mkdir -p "$DEST/$sample/app"
    for f in "$ARTIFACTS/$sample/debug/"*.dll "$ARTIFACTS/$sample/debug/"*.pdb "$ARTIFACTS/$sample/debug/"*.so; do
      [[ -e "$f" ]] && cp "$f" "$DEST/$sample/app/"
    done
    (cd "$DEST/$sample/app" && sha256sum * >SHA256SUMS)
  fi
done
for job in $ORACLE_ONLY; do
  src="$SRC/$job"
  [[ -n "${ONLY:-}" && "$ONLY" != *"$job"* ]] && continue
  [[ -f "$src/info.txt" ]] || { echo "missing $src (run make-dumps.sh $job first)" >&2; exit 1; }
  dst="$HERE/${job%%/*}/sos"
  echo "packing $job's oracle -> ${job%%/*}/sos/ (no dump)"
  rm -rf "$dst"; mkdir -p "$dst"
  cp "$src/sos/"*.txt "$src/info.txt" "$src/threads.txt" "$src/stderr.txt" "$dst/"
done
du -sb "$DEST" | awk '{printf "total %d bytes (%.1f MiB)\n", $1, $1/1048576}'
fi

# The deployment shapes (self-contained, single-file, .NET 9): into deploy-dumps/, with their
# oracles but no runtime or app files — tests/dotnet_catalog.rs reads them with nothing at hand.
# DEPLOY="" skips them; DEPLOY="sample/kind ..." packs only those.
DEPLOY_DEST="$HERE/deploy-dumps"
for job in ${DEPLOY-self_contained/heap single_file/heap net9_abba/heap net9_heap/heap runtime_10_0_15/heap net8_abba/heap net8_heap/heap net8_sync_over_async/heap net8_gc_oom/heap}; do
  src="$SRC/$job"; dst="$DEPLOY_DEST/$job"
  [[ -f "$src/core" ]] || { echo "missing $src/core (run make-dumps.sh $job first)" >&2; exit 1; }
  rm -rf "$dst"; mkdir -p "$dst"
  echo "packing $job -> deploy-dumps/"
  case "$job" in
    net8_*) zstd -19 --long=27 -q -f "$src/core" -o "$dst/core.zst"; packed=core.zst ;;
    *) gzip -9 -n -c "$src/core" >"$dst/core.gz"; packed=core.gz ;;
  esac
  cp "$src/info.txt" "$src/threads.txt" "$src/stdout.txt" "$src/stderr.txt" "$dst/"
  [[ -f "$src/core.crashreport.json" ]] && cp "$src/core.crashreport.json" "$dst/"
  cp -r "$src/sos" "$dst/"
  printf '%s_bytes     = %s\ncore_sha256       = %s\n' "${packed/./_}" "$(stat -c %s "$dst/$packed")" \
    "$(sha256sum "$src/core" | cut -d' ' -f1)" >>"$dst/info.txt"
done
[[ -d "$DEPLOY_DEST" ]] && du -sb "$DEPLOY_DEST" | awk '{printf "deploy-dumps: %d bytes (%.1f MiB)\n", $1, $1/1048576}'
