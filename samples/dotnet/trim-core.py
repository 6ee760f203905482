#!/usr/bin/env python3
"""trim-core.py CORE OUT DIR...: a copy of an ELF core without the pages a reader can take from
files committed beside it instead: the runtime's (samples/dotnet/dumps/runtime/<version>/*.gz, a
directory with a FILES.txt) and the sample's own assemblies (the files the dump's app/ directory
will hold: a directory without FILES.txt, every file in it as it is).

A page is left out only when all of this holds: the core's NT_FILE note maps a file there whose
name is one of the committed files (and whose bytes are that file's: the sha256 in FILES.txt),
the page's bytes in the core equal the file's bytes at the mapped offset, and it is not the first
page of its mapping (readers check the file against the dump's copy of that page). A page the
process wrote (relocations, a copy-on-write data page) differs from the file and stays. A left-out
range stays in the program headers as a PT_LOAD with p_filesz 0 and p_memsz its length: mapped,
not saved — knot then reads it from the module file (process::Memory for ELF modules, the
managed images' ImageMemory for CoreLib), as it does for a kernel core's file-backed text.

Everything else — notes, anonymous memory, the GC heap, pages a process wrote, files not
committed — is copied as it is. Prints what was left out, per file.
"""
import gzip
import hashlib
import os
import struct
import sys

PAGE = 4096
PT_LOAD, PT_NOTE = 1, 4
NT_FILE = 0x46494C45


def committed_files(dirs):
    """name -> bytes: every committed runtime file whose sha256 is FILES.txt's, every file of an
    app directory. A name two directories hold is refused: which one a page came from must be
    certain."""
    out = {}
    for d in dirs:
        if not os.path.exists(os.path.join(d, "FILES.txt")):
            for name in sorted(os.listdir(d)):
                path = os.path.join(d, name)
                if not os.path.isfile(path) or not name.endswith(".dll"):
                    continue
                if name in out:
                    sys.exit(f"{name} is in two of the directories given")
                with open(path, "rb") as f:
                    out[name] = f.read()
            continue
        listed = {}
        with open(os.path.join(d, "FILES.txt")) as f:
            for line in f:
                if line.startswith("#") or not line.strip():
                    continue
                cols = line.split()
                listed[cols[0]] = cols[2]
        for name, sha in listed.items():
            with gzip.open(os.path.join(d, name + ".gz"), "rb") as f:
                data = f.read()
            if hashlib.sha256(data).hexdigest() != sha:
                sys.exit(f"{d}/{name}.gz: sha256 differs from FILES.txt")
            if name in out:
                sys.exit(f"{name} is in two of the directories given")
            out[name] = data
    return out


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    core_path, out_path, dirs = sys.argv[1], sys.argv[2], sys.argv[3:]
    files = committed_files(dirs)
    data = open(core_path, "rb").read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        sys.exit(f"{core_path}: not a 64-bit little-endian ELF file")
    e_phoff = struct.unpack_from("<Q", data, 0x20)[0]
    e_phentsize, e_phnum = struct.unpack_from("<HH", data, 0x36)
    phdrs = [struct.unpack_from("<IIQQQQQQ", data, e_phoff + i * e_phentsize) for i in range(e_phnum)]

    mappings = []  # (start, end, file offset, name)
    for p_type, _, p_offset, _, _, p_filesz, _, _ in phdrs:
        if p_type != PT_NOTE:
            continue
        pos, end = p_offset, p_offset + p_filesz
        while pos + 12 <= end:
            namesz, descsz, typ = struct.unpack_from("<III", data, pos)
            pos += 12 + ((namesz + 3) & ~3)
            desc = data[pos : pos + descsz]
            pos += (descsz + 3) & ~3
            if typ != NT_FILE:
                continue
            count, pagesz = struct.unpack_from("<QQ", desc, 0)
            names = desc[16 + 24 * count :].split(b"\0")
            for k in range(count):
                s, e, o = struct.unpack_from("<QQQ", desc, 16 + 24 * k)
                mappings.append((s, e, o * pagesz, os.path.basename(names[k].decode())))

    def droppable(addr, page):
        for s, e, off, name in mappings:
            if s <= addr < e:
                f = files.get(name)
                if f is None or addr == s:
                    return None
                at = off + (addr - s)
                return name if f[at : at + len(page)] == page else None
        return None

    # The new program headers: each PT_LOAD cut into runs of kept and left-out pages.
    new = []  # (p_type, p_flags, p_vaddr, p_filesz, p_memsz, p_align, bytes)
    dropped = {}
    for p_type, p_flags, p_offset, p_vaddr, _, p_filesz, p_memsz, p_align in phdrs:
        if p_type != PT_LOAD or p_filesz == 0 or p_vaddr % PAGE or p_filesz != p_memsz:
            new.append((p_type, p_flags, p_vaddr, p_filesz, p_memsz, p_align, data[p_offset : p_offset + p_filesz]))
            continue
        runs = []  # [keep, start, length]
        for at in range(0, p_filesz, PAGE):
            page = data[p_offset + at : p_offset + min(at + PAGE, p_filesz)]
            name = droppable(p_vaddr + at, page) if len(page) == PAGE else None
            if name:
                dropped[name] = dropped.get(name, 0) + len(page)
            keep = name is None
            if runs and runs[-1][0] == keep:
                runs[-1][2] += len(page)
            else:
                runs.append([keep, at, len(page)])
        for keep, at, n in runs:
            payload = data[p_offset + at : p_offset + at + n] if keep else b""
            new.append((PT_LOAD, p_flags, p_vaddr + at, n if keep else 0, n, p_align, payload))
    if len(new) >= 0xFFFF:
        sys.exit(f"{len(new)} program headers: more than an ELF header counts without PN_XNUM")

    # Layout: the ELF header (no section headers), the program headers, then each one's bytes
    # in their order, loads page-aligned as the kernel and createdump write them.
    out = bytearray(data[:64])
    struct.pack_into("<QQ", out, 0x20, 64, 0)  # e_phoff, e_shoff
    struct.pack_into("<HHHHH", out, 0x36, e_phentsize, len(new), 0, 0, 0)  # e_phentsize, e_phnum, e_sh*
    at = 64 + len(new) * e_phentsize
    table, body = bytearray(), bytearray()
    for p_type, p_flags, p_vaddr, p_filesz, p_memsz, p_align, payload in new:
        if p_type == PT_LOAD and p_filesz and (at + len(body)) % PAGE:
            body += bytes(PAGE - (at + len(body)) % PAGE)
        offset = at + len(body) if p_filesz else 0
        body += payload
        table += struct.pack("<IIQQQQQQ", p_type, p_flags, offset, p_vaddr, 0, p_filesz, p_memsz, p_align)
        table += bytes(e_phentsize - 56)
    out += table + body
    with open(out_path, "wb") as f:
        f.write(out)
    for name, n in sorted(dropped.items()):
        print(f"left out {n:>10} bytes of {name}")
    print(f"{core_path}: {len(data)} bytes, {out_path}: {len(out)} bytes")


if __name__ == "__main__":
    main()
