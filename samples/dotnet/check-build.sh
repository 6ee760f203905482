#!/usr/bin/env bash
# check-build.sh V [sf] — is runtime build V read as SOS reads it? Publishes monitor_abba's wedge
# (samples/dotnet/runtime_10_0_15's project; net9_abba's for a 9.0 build, net8_abba's for an 8.0 one) self-contained against the V runtime pack (single-file
# with "sf"), runs it under DOTNET_GCHeapHardLimit=0x10000000, dumps it (createdump --withheap),
# and prints whether knot's held monitors equal SOS syncblk, its heap totals dumpheap -stat's, and
# the hard limit it reads. Nothing is kept in the repo: output under target/check-build/V[sf]/.
# Needs dotnet, dotnet-dump, a debug build of knot; for "sf", the V runtime pack's DAC unpacked
# into target/check-build/rt-V (SOS has no DAC in a single-file app).
set -u
V=$1; SF=${2:-}
W="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"; D=$W/target/check-build/$V$SF
# RECHECK=1: only knot again, on the dump and SOS reading made before (after adding the build's facts).
if [[ -z "${RECHECK:-}" ]]; then
rm -rf $D; mkdir -p $D
# OVERLAY_FROM=W: publish against pack W, then put pack V's runtime files over it (8.0.0: NuGet
# serves its runtime pack but no Microsoft.NETCore.App.Host 8.0.0, which publishing needs).
props="-p:RuntimeFrameworkVersion=${OVERLAY_FROM:-$V}"
[[ -n "$SF" ]] && props="$props -p:PublishSingleFile=true"
# A 9.0 build runs the same wedge from net9_abba's project (net9.0), an 8.0 build from net8_abba's (net8.0).
P=runtime_10_0_15; [[ "$V" == 9.* ]] && P=net9_abba; [[ "$V" == 8.* ]] && P=net8_abba
timeout 600 dotnet publish $W/samples/dotnet/$P/$P.csproj -c Debug -nologo -v q $props -o $D/pub -p:BaseIntermediateOutputPath=$D/obj/ > $D/publish.log 2>&1 || { echo "publish failed"; exit 1; }
if [[ -n "${OVERLAY_FROM:-}" ]]; then
  R="${NUGET_PACKAGES:-$HOME/.nuget/packages}/microsoft.netcore.app.runtime.linux-x64/$V/runtimes/linux-x64"
  [[ -d $R ]] || { echo "runtime pack $V not in the NuGet cache"; exit 1; }
  cp -f $R/lib/net*/*.dll $R/native/* $D/pub/
fi
( cd $D; ulimit -c 0; exec env DOTNET_GCHeapHardLimit=0x10000000 $D/pub/$P > $D/stdout.txt 2> $D/stderr.txt ) &
pid=$!
for i in $(seq 1 300); do grep -qx ready $D/stdout.txt 2>/dev/null && break; sleep 0.2; done
sleep 2
CD=$D/pub/createdump; [[ -x $CD ]] || CD=$W/target/check-build/rt-$V/createdump; chmod +x $CD
timeout 300 $CD -f $D/core --withheap $pid > $D/createdump.log 2>&1
kill -9 $pid; wait $pid 2>/dev/null
extra=()
[[ -n "$SF" ]] && extra=(-c "setclrpath $W/target/check-build/rt-$V")
# An 8.0 app: SOS takes the pack's DAC from the publish directory.
[[ -z "$SF" && "$V" == 8.* ]] && extra=(-c "setclrpath $D/pub")
timeout 300 "${DOTNET_DUMP:-$HOME/.dotnet/tools/dotnet-dump}" analyze $D/core "${extra[@]}" -c eeversion -c syncblk -c "dumpheap -stat" -c exit > $D/sos.txt 2>&1
fi
$W/target/debug/knot analyze $D/core --sysroot /nonexistent --format json -o $D/knot.json 2> $D/knot.err
python3 - $D <<'PY'
import json,re,sys
d=sys.argv[1]; r=json.load(open(d+'/knot.json')); sos=open(d+'/sos.txt').read()
rows=sorted((int(t,16),int(o,16),int(h)) for h,t,o in re.findall(r"^\s+\d+\s+[0-9A-F]{16}\s+(\d+)\s+\d+\s+[0-9A-F]{16}\s+([0-9a-f]+)\s+\d+\s+([0-9a-f]{16})",sos,re.M))
mons=sorted((l['owner_tid'],int(l['address'],16),1+2*len(l['waiter_tids'])) for l in r['locks'] if l['kind']=='monitor')
tot=re.search(r"^Total ([\d,]+) objects, ([\d,]+) bytes",sos,re.M)
h=r['dotnet'].get('heap') or {}
g=r['dotnet'].get('gc') or {}
print(d, r['dotnet'].get('runtime_version'), 'verdict', r['verdict'], 'limits', r['verdict_limits'])
print('  monitors equal syncblk:', mons==rows, mons, rows)
print('  heap totals equal:', tot and (int(tot.group(1).replace(',','')),int(tot.group(2).replace(',','')))==(h.get('total_objects'),h.get('total_bytes')), tot and tot.groups(), h.get('total_objects'), h.get('total_bytes'))
print('  hard limit', g.get('hard_limit_bytes'), g.get('hard_limit_source'))
PY
