#!/usr/bin/env bash
# make-dump.sh [OUT] — the committed single-file dump (samples/dotnet/deploy-dumps/single_file/heap)
# and its peer: this project published single-file (singlefilehost, the runtime linked into the
# executable) and framework-dependent (`dotnet single_file.dll` on the machine's runtime of the
# same build), each run to the wedge and dumped with createdump --withheap at the same point
# ("ready": the population made, both locks held). SOS reads the single-file dump's threads and
# sync blocks (with the runtime pack's DAC: the app carries none) but crashes on its heap, so the
# heap's truth is the peer's `dumpheap -stat` (peer/), which names the app's types.
# Without OUT it writes into samples/dotnet/deploy-dumps/single_file/heap (core.gz, gzip -9;
# sos/, peer/, info.txt); scratch (both cores, ~170 MB) under target/single_file_dump, removed.
set -Eeuo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
OUT="${1:-$REPO/samples/dotnet/deploy-dumps/single_file/heap}"
W="$REPO/target/single_file_dump"
V="$(sed -n 's/.*<RuntimeFrameworkVersion>\(.*\)<.*/\1/p' "$HERE/single_file.csproj")"
CREATEDUMP="/usr/share/dotnet/shared/Microsoft.NETCore.App/$V/createdump"
DAC="${NUGET_PACKAGES:-$HOME/.nuget/packages}/microsoft.netcore.app.runtime.linux-x64/$V/runtimes/linux-x64/native"
DOTNET_DUMP="${DOTNET_DUMP:-$HOME/.dotnet/tools/dotnet-dump}"
[[ -x "$CREATEDUMP" ]] || { echo "no runtime $V at $CREATEDUMP"; exit 1; }
rm -rf "$W"; mkdir -p "$W"

publish() {  # publish KIND PROPS...
  local kind="$1"; shift
  timeout 600 dotnet publish "$HERE/single_file.csproj" -c Debug -nologo -v q -o "$W/$kind/pub" \
    -p:BaseIntermediateOutputPath="$W/$kind/obj/" "$@" >"$W/$kind.publish.log" 2>&1 || { cat "$W/$kind.publish.log"; exit 1; }
}
dump() {  # dump KIND CMD... : run to "ready", createdump --withheap, kill
  local kind="$1"; shift
  local d="$W/$kind"
  ( cd "$d"; ulimit -c 0; exec "$@" >"$d/stdout.txt" 2>"$d/stderr.txt" ) &
  local pid=$!
  for _ in $(seq 1 300); do grep -qx ready "$d/stdout.txt" 2>/dev/null && break; sleep 0.2; done
  grep -qx ready "$d/stdout.txt" || { echo "$kind: no ready"; kill -9 $pid; exit 1; }
  sleep 2
  timeout 300 "$CREATEDUMP" -f "$d/core" --withheap $pid >"$d/createdump.log" 2>&1
  echo "$pid" >"$d/pid"
  kill -9 $pid; wait $pid 2>/dev/null || true
}
sos() {  # sos CORE OUTFILE CMD...
  local core="$1" out="$2"; shift 2
  local args=() c rc=0
  for c in "$@"; do args+=(-c "$c"); done
  timeout 300 "$DOTNET_DUMP" analyze "$core" "${args[@]}" -c exit >"$out" 2>&1 || rc=$?
  ((rc == 0)) || printf '\n# dotnet-dump exited with status %d\n' "$rc" >>"$out"
}

publish sf
publish fd -p:PublishSingleFile=false -p:SelfContained=false
dump sf "$W/sf/pub/single_file"
dump fd dotnet "$W/fd/pub/single_file.dll"

rm -rf "$OUT"; mkdir -p "$OUT/sos" "$OUT/peer"
for c in eeversion clrthreads syncblk "clrstack -all" "dumpheap -stat" gcheapstat "eeheap -gc"; do
  f="$(echo "$c" | sed 's/ -/-/; s/ /-/g')"
  sos "$W/sf/core" "$OUT/sos/$f.txt" "setclrpath $DAC" "$c"
  sos "$W/fd/core" "$OUT/peer/$f.txt" "$c"
done
gzip -9 -c "$W/sf/core" >"$OUT/core.gz"
cp "$W/sf/stdout.txt" "$W/sf/stderr.txt" "$OUT/"
{
  echo "sample            = single_file"
  echo "kind              = heap"
  echo "dump_bytes        = $(stat -c %s "$W/sf/core")"
  echo "how               = $CREATEDUMP -f core --withheap PID (samples/dotnet/single_file/make-dump.sh)"
  echo "command           = single_file (dotnet publish -p:PublishSingleFile=true, self-contained)"
  echo "runtime_version   = $V"
  echo "runtime_buildid   = $(readelf -n "$W/sf/pub/single_file" | awk '/Build ID/{print $3; exit}') (the executable: singlefilehost's)"
  echo "singlefilehost    = $(readelf -n "/usr/share/dotnet/packs/Microsoft.NETCore.App.Host.linux-x64/$V/runtimes/linux-x64/native/singlefilehost" 2>/dev/null | awk '/Build ID/{print $3; exit}')"
  echo "peer              = dotnet single_file.dll (framework-dependent, libcoreclr.so $(readelf -n /usr/share/dotnet/shared/Microsoft.NETCore.App/$V/libcoreclr.so | awk '/Build ID/{print $3; exit}')), dumped the same way: peer/ holds SOS's reading of it (its core is not kept)"
  echo "dotnet_dump       = $("$DOTNET_DUMP" --version 2>/dev/null | head -1)"
  echo "made_at           = $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "core_gz_bytes     = $(stat -c %s "$OUT/core.gz")"
} >"$OUT/info.txt"
rm -rf "$W"
ls -la "$OUT"
