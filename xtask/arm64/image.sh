#!/bin/sh
# Builds the emulated arm64 Debian system knot's arm64 samples are made in (issue #33), once:
# a debootstrap'd bookworm root with gcc, libc6-dev, gdb and libc6-dbg, a kernel with a small
# initramfs, and an ext4 disk image of the root. Everything lives in $1 (target/arm64-vm), never
# committed. Each step is skipped when its result is there. Slow work runs under `nice -n 19`.
set -eu
VM=$1
ROOT=$VM/root
MIRROR=http://deb.debian.org/debian
mkdir -p "$VM"
log() { echo "arm64-vm: $(date -u +%H:%M:%S) $*" >&2; }

# qemu-user runs the chroot's arm64 programs (debootstrap's second stage, apt, update-initramfs).
if ! [ -e /proc/sys/fs/binfmt_misc/register ]; then
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
fi
if ! [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    update-binfmts --enable qemu-aarch64
fi

if ! [ -e "$VM/.debootstrap-done" ]; then
    log "debootstrap --arch arm64 (tens of minutes under qemu-user)"
    rm -rf "$ROOT"
    # Its resolver misses one of gdb's dependencies (libboost-regex1.74.0-icu72, for
    # libsource-highlight4v5): the second stage fails to configure gdb, and apt-get -f install
    # finishes it below. Any other failure leaves no apt-get behind.
    nice -n 19 debootstrap --arch arm64 --variant=minbase --include=gcc,libc6-dev,gdb,libc6-dbg bookworm "$ROOT" "$MIRROR" > "$VM/debootstrap.log" 2>&1 \
        || log "debootstrap failed (see $VM/debootstrap.log); finishing with apt-get -f install"
    [ -x "$ROOT/usr/bin/apt-get" ] || { log "no apt-get in $ROOT: debootstrap did not get far enough"; exit 1; }
    touch "$VM/.debootstrap-done"
fi

in_root() { nice -n 19 chroot "$ROOT" env DEBIAN_FRONTEND=noninteractive LC_ALL=C PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }

if ! [ -e "$VM/.kernel-done" ]; then
    log "apt-get -f install; the kernel and busybox-static downloaded"
    echo "deb $MIRROR bookworm main" > "$ROOT/etc/apt/sources.list"
    # dpkg's fsync of every file makes unpacking slow under qemu-user.
    echo force-unsafe-io > "$ROOT/etc/dpkg/dpkg.cfg.d/knot-unsafe-io"
    cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
    mountpoint -q "$ROOT/proc" || mount -t proc proc "$ROOT/proc"
    trap 'umount "$ROOT/proc" 2>/dev/null || true' EXIT
    in_root apt-get update -q
    # debootstrap's resolver misses one of gdb's dependencies.
    in_root apt-get -f install -y -q
    # Only downloaded in the chroot: installing the kernel there (unpacking ~5000 modules, depmod,
    # update-initramfs, all under qemu-user) takes far longer than the host's native tools.
    in_root apt-get install -y -q --download-only --no-install-recommends linux-image-arm64 busybox-static
    umount "$ROOT/proc"
    trap - EXIT
    rm -rf "$VM/kernel" && mkdir -p "$VM/kernel"
    for deb in "$ROOT"/var/cache/apt/archives/linux-image-[0-9]*_arm64.deb "$ROOT"/var/cache/apt/archives/busybox-static_*_arm64.deb; do
        dpkg-deb -x "$deb" "$VM/kernel"
    done
    cp "$VM"/kernel/boot/vmlinuz-* "$VM/vmlinuz"
    nice -n 19 python3 "$(dirname "$0")/initramfs.py" "$VM"/kernel/lib/modules/*/kernel "$VM/kernel/bin/busybox" "$VM/initrd.img"
    touch "$VM/.kernel-done"
fi

# The guest's init: unpack the run's inputs from /dev/vdb (a tar), run its script, which writes
# its results to /dev/vdc, and power off.
cat > "$VM/knot-init.new" <<'INIT'
#!/bin/sh
export PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C HOME=/root
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mount -t tmpfs tmp /tmp
rm -rf /knot && mkdir -p /knot && tar xf /dev/vdb -C /knot && sh /knot/run.sh > /dev/console 2>&1
echo "knot-init: run.sh exited $?" > /dev/console
sync
echo o > /proc/sysrq-trigger
sleep 60
INIT
# Written only when it changed: a newer knot-init means a new disk image.
if ! cmp -s "$VM/knot-init.new" "$ROOT/knot-init"; then
    mv "$VM/knot-init.new" "$ROOT/knot-init"
    chmod +x "$ROOT/knot-init"
fi

if ! [ -e "$VM/.disk-done" ] || [ "$ROOT/knot-init" -nt "$VM/disk.img" ]; then
    log "disk image (ext4 of the root)"
    rm -f "$VM/disk.img"
    truncate -s 3G "$VM/disk.img"
    nice -n 19 mkfs.ext4 -q -F -d "$ROOT" "$VM/disk.img"
    touch "$VM/.disk-done"
fi
log "ready: $VM/disk.img"
