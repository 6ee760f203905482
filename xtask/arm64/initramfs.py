#!/usr/bin/env python3
"""Builds the arm64 guest's initramfs on the host, natively (xtask/arm64/image.sh): a static
busybox, the root disk's drivers in dependency order (read from each module's .modinfo) and an
/init that loads them, mounts /dev/vda and hands over to its /knot-init. Debian's own
update-initramfs, run under qemu-user at nice 19 on a busy machine, takes tens of minutes.

usage: initramfs.py MODULES_DIR BUSYBOX OUT.img"""
import gzip, os, re, stat, sys

modules_dir, busybox, out_path = sys.argv[1:4]
WANT = ["virtio_mmio", "virtio_pci", "virtio_blk", "crc32c_generic", "ext4"]
INIT = b"""#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules/order.txt); do insmod /modules/$m.ko || echo "insmod $m failed"; done
i=0
while ! [ -b /dev/vda ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
mkdir -p /newroot
mount -t ext4 -o rw /dev/vda /newroot || { echo "cannot mount /dev/vda"; exec sh; }
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot /knot-init
"""

paths = {}
for d, _, files in os.walk(modules_dir):
    for f in files:
        if f.endswith(".ko"):
            paths[f[:-3].replace("-", "_")] = os.path.join(d, f)

def depends(m):
    found = re.search(rb"depends=([^\x00]*)", open(paths[m], "rb").read())
    return [x.replace("-", "_") for x in found.group(1).decode().split(",") if x] if found else []

order = []
def visit(m):
    if m in order:
        return
    if m not in paths:
        sys.exit(f"initramfs.py: no module {m} under {modules_dir}")
    for d in depends(m):
        visit(d)
    order.append(m)
for m in WANT:
    visit(m)

entries = [(d, stat.S_IFDIR | 0o755, b"") for d in ["bin", "dev", "proc", "sys", "modules", "newroot"]]
entries.append(("bin/busybox", stat.S_IFREG | 0o755, open(busybox, "rb").read()))
entries.append(("init", stat.S_IFREG | 0o755, INIT))
entries.append(("modules/order.txt", stat.S_IFREG | 0o644, ("\n".join(order) + "\n").encode()))
entries += [(f"modules/{m}.ko", stat.S_IFREG | 0o644, open(paths[m], "rb").read()) for m in order]

# cpio "newc": a 110-byte ASCII header, the NUL-terminated name, the data, each padded to 4.
out = bytearray()
def pad():
    out.extend(b"\0" * (-len(out) % 4))
for ino, (name, mode, data) in enumerate(entries + [("TRAILER!!!", 0, b"")], start=1):
    nb = name.encode() + b"\0"
    fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(nb), 0]
    out += ("070701" + "".join("%08x" % v for v in fields)).encode() + nb
    pad()
    out += data
    pad()
open(out_path, "wb").write(gzip.compress(bytes(out), 6))
print(" ".join(order))
