#!/bin/sh
# Prepares, on the x86-64 host, what the arm64 guest needs for knot's .NET samples (issue #33,
# item 5), so the guest needs no SDK: the samples published self-contained for linux-arm64 from
# the 10.0.12 runtime pack (createdump is in it), and dotnet-dump (a framework-dependent tool)
# made runnable on the arm64 runtime: a DOTNET_ROOT laid out from the same runtime pack
# (host/fxr/<v>/libhostfxr.so, shared/Microsoft.NETCore.App/<v>/) and the pack's arm64 apphost,
# bound to dotnet-dump.dll the way the SDK binds an apphost to its app (the placeholder, the
# SHA-256 of "foobar" in hex, overwritten with the dll's name).
#   dotnet-inputs.sh REPO OUT SAMPLE...
set -eu
REPO=$1 OUT=$2; shift 2
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
V=10.0.12
PACKS=${NUGET_PACKAGES:-$HOME/.nuget/packages}
log() { echo "arm64-dotnet: $(date -u +%H:%M:%S) $*" >&2; }
mkdir -p "$OUT/apps"
for s in "$@"; do
    log "dotnet publish $s -r linux-arm64 --self-contained"
    rm -rf "$OUT/apps/$s"
    nice -n 10 dotnet publish "$REPO/samples/dotnet/$s" -c Debug -r linux-arm64 --self-contained \
        -p:RuntimeFrameworkVersion=$V -o "$OUT/apps/$s" > "$OUT/publish-$s.log" 2>&1 \
        || { tail -20 "$OUT/publish-$s.log"; exit 1; }
done

RT=$PACKS/microsoft.netcore.app.runtime.linux-arm64/$V/runtimes/linux-arm64
HOSTPACK=$PACKS/microsoft.netcore.app.host.linux-arm64/$V/runtimes/linux-arm64/native
[ -d "$RT" ] && [ -d "$HOSTPACK" ] || { log "no $V linux-arm64 runtime/host pack in $PACKS (the publish restores them)"; exit 1; }
log "DOTNET_ROOT for dotnet-dump from the runtime pack"
D=$OUT/dotnet
rm -rf "$D"
mkdir -p "$D/host/fxr/$V" "$D/shared/Microsoft.NETCore.App/$V"
cp "$RT/native/libhostfxr.so" "$D/host/fxr/$V/"
cp "$RT"/lib/net10.0/*.dll "$RT"/native/* "$D/shared/Microsoft.NETCore.App/$V/"
rm -f "$D/shared/Microsoft.NETCore.App/$V/libhostfxr.so"
# The pack has no shared-framework deps.json; the installed x86-64 one lists the same files.
X64=/usr/share/dotnet/shared/Microsoft.NETCore.App/$V
sed 's/linux-x64/linux-arm64/g' "$X64/Microsoft.NETCore.App.deps.json" > "$D/shared/Microsoft.NETCore.App/$V/Microsoft.NETCore.App.deps.json"
cp "$X64/Microsoft.NETCore.App.runtimeconfig.json" "$D/shared/Microsoft.NETCore.App/$V/" 2>/dev/null || true

TOOL=$(ls -d "$HOME"/.dotnet/tools/.store/dotnet-dump/*/dotnet-dump/*/tools/*/any | tail -1)
[ -d "$TOOL" ] || { log "no dotnet-dump tool (dotnet tool install -g dotnet-dump)"; exit 1; }
log "dotnet-dump from $TOOL"
T=$OUT/dotnet-dump
rm -rf "$T"
mkdir -p "$T"
# The managed tool and SOS for linux-arm64 only (the other platforms' native SOS are not needed).
( cd "$TOOL" && find . -maxdepth 1 -type f -exec cp {} "$T/" \; && cp -r linux-arm64 "$T/" )
python3 - "$HOSTPACK/apphost" "$T/dotnet-dump" <<'PY'
import hashlib, sys
src, dst = sys.argv[1], sys.argv[2]
data = bytearray(open(src, 'rb').read())
placeholder = hashlib.sha256(b'foobar').hexdigest().encode()
at = data.find(placeholder)
assert at >= 0 and data.find(placeholder, at + 1) < 0, 'apphost placeholder not found exactly once'
name = b'dotnet-dump.dll'
data[at:at + len(placeholder)] = name + b'\0' * (len(placeholder) - len(name))
open(dst, 'wb').write(data)
PY
chmod +x "$T/dotnet-dump"
echo "dotnet-dump $(basename "$(dirname "$(dirname "$(dirname "$TOOL")")")")" > "$OUT/dotnet-dump-version.txt"
# The three apps and the DOTNET_ROOT carry the same runtime files: hard links, which tar
# stores once (the guest unpacks its inputs at emulated speed).
python3 - "$OUT" <<'PY'
import hashlib, os, sys
seen = {}
for top in ('dotnet', 'apps'):
    for root, _, files in sorted(os.walk(os.path.join(sys.argv[1], top))):
        for f in sorted(files):
            p = os.path.join(root, f)
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            key = hashlib.sha256(open(p, 'rb').read()).hexdigest()
            if key in seen and not os.path.samefile(seen[key], p):
                mode = os.stat(p).st_mode
                os.unlink(p)
                os.link(seen[key], p)
                os.chmod(p, mode | os.stat(seen[key]).st_mode)
            else:
                seen.setdefault(key, p)
PY
log "ready: $(du -sh "$OUT" | cut -f1) in $OUT"
