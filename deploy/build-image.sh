#!/usr/bin/env bash
# build-image.sh: knot's images built where no registry is reachable, with podman.
#
#   deploy/build-image.sh [--knot BINARY] [--tag NAME] [--cache DIR]
#
# deploy/Dockerfile takes its bases from registries (rust, debian, distroless). Here the bases
# are made locally instead, and passed to the same Dockerfile as build arguments:
#   - a Debian 12 base made by `debootstrap --variant=minbase bookworm` (Debian's package mirror
#     must be reachable, or DEBIAN_MIRROR set to one that is), imported with `podman import`: the
#     base of the `live` image (knot + bash for deploy/knot-live-watch.sh);
#   - from it, the runtime base: glibc (libc6) and libgcc (libgcc-s1) only, as their packages list
#     them, no shell; /etc/passwd with nonroot (uid 65532), /tmp. The final image adds the binary.
# knot itself is built on this host (it must be Debian 12 bookworm, like the bases: the binary
# links against the host's glibc), by cargo with the crates as configured (vendored, as CI does):
# `cargo build --release --locked -p knot --bin knot`, or the binary given by --knot. It is
# stripped and copied into a build context of its own with KNOT_BUILD=prebuilt, so the Dockerfile's
# builder stage is not used (it needs the rust image).
#
# Everything is cached under --cache (default target/image): the debootstrap tree as a tar, and
# images tagged by content, localhost/knot:<key> and localhost/knot:<key>-live, where <key> hashes
# the stripped binary, the base's tar, the Dockerfile and the live script; an image that exists is
# not built again (the base's key also covers this script). --tag NAME also tags them NAME and NAME-live. The last two lines of standard
# output are `IMAGE=<final image>` and `LIVE_IMAGE=<live image>`, after `BASE_IMAGE=<the Debian
# base>` (a stand-in application image in tests: it has sh and tar).
#
# Needs root (debootstrap, rootful podman), podman with a runtime (runc), debootstrap, tar,
# sha256sum, strip. On a machine with podman but no containers.conf, see docs/cluster.md.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
knot=""
tag=""
cache="$root/target/image"
while [ $# -gt 0 ]; do
  case "$1" in
    --knot) knot="$2"; shift 2 ;;
    --tag) tag="$2"; shift 2 ;;
    --cache) cache="$2"; shift 2 ;;
    -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-image.sh: unknown argument $1 (see --help)" >&2; exit 64 ;;
  esac
done
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# An imported tree has no image configuration: give it Debian's PATH (a pod's `command: [sh, …]`).
path_env="ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
log() { echo "build-image: $*" >&2; }

for tool in podman debootstrap tar sha256sum strip; do
  command -v "$tool" >/dev/null || { log "$tool is missing (apt-get install podman runc debootstrap binutils)"; exit 2; }
done
if ! grep -q '^VERSION_CODENAME=bookworm' /etc/os-release 2>/dev/null; then
  log "this host is not Debian 12 bookworm: a binary built here may need another glibc than the image's; build with deploy/Dockerfile's builder stage instead"
  exit 2
fi

mkdir -p "$cache"
# One build at a time on this machine (tests of several binaries may ask at once).
exec 9>"$cache/.lock"
flock 9

# 1. The Debian base: debootstrap once, kept as a tar.
base_tar="$cache/bookworm-minbase.tar"
if [ ! -s "$base_tar" ]; then
  tree="$cache/bookworm-minbase"
  rm -rf "$tree"
  log "debootstrap --variant=minbase bookworm from $mirror (once; cached in $base_tar)"
  debootstrap --variant=minbase bookworm "$tree" "$mirror" >"$cache/debootstrap.log" 2>&1 \
    || { log "debootstrap failed: see $cache/debootstrap.log"; tail -5 "$cache/debootstrap.log" >&2; exit 2; }
  # Package caches and lists are not needed in an image.
  rm -rf "$tree"/var/cache/apt/archives/*.deb "$tree"/var/lib/apt/lists/*
  tar --numeric-owner -C "$tree" -cf "$base_tar.tmp" .
  mv "$base_tar.tmp" "$base_tar"
  rm -rf "$tree"
fi
# The bases' key: the debootstrap tree and this script (which makes the runtime base from it).
base_sum="$( (sha256sum "$base_tar" "$0" | cut -d' ' -f1) | sha256sum | cut -c1-16)"
live_base="localhost/knot-base:bookworm-$base_sum"
runtime_base="localhost/knot-base:runtime-$base_sum"

if ! podman image exists "$live_base"; then
  log "importing $live_base"
  podman import --quiet --change "$path_env" "$base_tar" "$live_base" >/dev/null
fi
if ! podman image exists "$runtime_base"; then
  # glibc and libgcc only: the files of libc6 and libgcc-s1 (their libraries, the loader, gconv
  # modules and copyright notices; not their programs, locales or manuals).
  tree="$cache/runtime-root"
  rm -rf "$tree" && mkdir -p "$tree/unpacked"
  tar -C "$tree/unpacked" -xf "$base_tar"
  mkdir -p "$tree/root"
  (
    cd "$tree/unpacked"
    cat var/lib/dpkg/info/libc6:amd64.list var/lib/dpkg/info/libgcc-s1:amd64.list \
      | sed -e 's#^/lib/#/usr/lib/#' -e 's#^/lib64/#/usr/lib64/#' \
      | grep -E '^/usr/(lib|lib64)/|^/usr/share/doc/(libc6|libgcc-s1)/copyright$' \
      | sort -u | while read -r p; do [ -d ".$p" ] || [ ! -e ".$p" ] || echo ".$p"; done \
      | tar --numeric-owner --no-recursion -cf - -T - | tar -C "$tree/root" -xf -
  )
  cd "$tree/root"
  # Debian 12's merged /usr: /lib and /lib64 are links, so /lib64/ld-linux-x86-64.so.2 (the
  # binary's interpreter) resolves.
  ln -s usr/lib lib && ln -s usr/lib64 lib64
  mkdir -p etc tmp home/nonroot
  chmod 1777 tmp
  chown 65532:65532 home/nonroot && chmod 700 home/nonroot
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >etc/passwd
  printf 'root:x:0:\nnonroot:x:65532:\n' >etc/group
  cd "$root"
  log "importing $runtime_base ($(du -sh "$tree/root" | cut -f1): glibc and libgcc)"
  tar --numeric-owner -C "$tree/root" -cf - . | podman import --quiet --change "$path_env" - "$runtime_base" >/dev/null
  rm -rf "$tree"
fi

# 2. The binary.
if [ -z "$knot" ]; then
  log "cargo build --release --locked -p knot --bin knot"
  (cd "$root" && cargo build --release --locked -p knot --bin knot >&2)
  knot="$root/target/release/knot"
fi
[ -x "$knot" ] || { log "$knot is not an executable"; exit 2; }
context="$cache/context.$$"
rm -rf "$context" && mkdir -p "$context/deploy"
trap 'rm -rf "$context"' EXIT
strip -o "$context/knot" "$knot"
cp "$root/deploy/knot-live-watch.sh" "$context/deploy/knot-live-watch.sh"

# 3. The images, by content.
key="$( (sha256sum "$context/knot" "$root/deploy/Dockerfile" "$root/deploy/knot-live-watch.sh" | cut -d' ' -f1; echo "$base_sum") | sha256sum | cut -c1-16)"
image="localhost/knot:$key"
live="localhost/knot:$key-live"
args=(--pull=never --build-arg KNOT_BUILD=prebuilt --build-arg "LIVE_BASE=$live_base" --build-arg "RUNTIME_BASE=$runtime_base" -f "$root/deploy/Dockerfile")
if ! podman image exists "$image"; then
  log "building $image"
  podman build --quiet "${args[@]}" -t "$image" "$context" >/dev/null
fi
if ! podman image exists "$live"; then
  log "building $live"
  podman build --quiet "${args[@]}" --target live -t "$live" "$context" >/dev/null
fi
if [ -n "$tag" ]; then
  podman tag "$image" "$tag"
  podman tag "$live" "$tag-live"
fi
log "$image: $(podman run --rm "$image" --version), $(podman image inspect --format '{{.Size}}' "$image") bytes"
echo "BASE_IMAGE=$live_base"
echo "IMAGE=$image"
echo "LIVE_IMAGE=$live"
