#!/usr/bin/env python3
"""Print the [[dump]] part of expected.toml from the committed dumps' files.

Usage: samples/dotnet/dump-facts.py [DUMPS_DIR]   (default samples/dotnet/dumps)
expected.toml = its hand-written [[sample]] part (everything above the
'# Committed dumps' line) + this script's output. Reads each dump's info.txt,
threads.txt, stderr.txt, sos/*.txt and gdb/*.txt; knows nothing SOS did not print.
"""
import os
import re
import sys


def extras(sample, d):
    o=[]
    rows=re.findall(r'^\s+\d+\s+[0-9A-F]{16}\s+(\d+)\s+(\d+)\s+[0-9A-F]{16}\s+([0-9a-f]+)\s+\d+\s+([0-9a-f]{16})\s+(\S+)', open(f'{d}/sos/syncblk.txt').read(), re.M)
    if rows:
        o.append('monitors = [')
        for held,rec,tid,obj,typ in rows:
            o.append(f'  {{ object = "0x{int(obj,16):x}", type = "{typ}", owner_tid = {int(tid,16)}, monitor_held = {held}, recursion = {rec} }},')
        o.append(']')
    if sample=='autofac_container':
        for l in open(f'{d}/sos/lifetimescopes.txt'):
            m=re.match(r"object (\S+)\s+_synchRoot=0x(\S+)\s+<Tag>k__BackingField=0x\S+ \('(root|tenant)'\)",l)
            if m: o.append(f'{m.group(3)}_scope = {{ scope = "0x{m.group(1)}", synch_root = "0x{int(m.group(2),16):x}" }}')
    if sample=='lock_abba':
        gates=dict(re.findall(r'object (\S+) GC Refs:\nField.*\nGate\s+0x00\s+(\S+)', open(f'{d}/sos/lock-holders.txt').read()))
        types=dict(re.findall(r'^\s+(\S+)\s+(\S+)\s+24', open(f'{d}/sos/lock-holders.txt').read(), re.M))
        mts=dict((mt,name) for mt,name in re.findall(r'^(\S+)\s+1\s+24 (\S+)$', open(f'{d}/sos/lock-holders.txt').read(), re.M))
        o.append('locks = [')
        for l in open(f'{d}/sos/locks.txt'):
            m=re.match(r'object (\S+)\s+_owningThreadId=0x(\S+)\s+_state=0x(\S+)\s+_recursionCount=0x(\S+)',l)
            if m:
                holder=[g for g,lk in gates.items() if lk==m.group(1)]
                ht=mts.get(types.get(holder[0],''),'?') if holder else '?'
                o.append(f'  {{ object = "0x{m.group(1)}", holder = "0x{holder[0] if holder else "?"}", holder_type = "{ht}", owning_thread_id = {int(m.group(2),16)}, state = 0x{int(m.group(3),16):x}, recursion = {int(m.group(4),16)} }},')
        o.append(']')
    if sample=='pinvoke_mutex':
        addr=re.search(r'knot_mutex=(0x[0-9a-f]+)', open(f'{d}/stderr.txt').read()).group(1)
        g=open(f'{d}/gdb/native-mutex.txt').read()
        m=re.search(r'__lock = (\d+), __count = \d+, __owner = (\d+)', g)
        o.append(f'knot_mutex = {{ address = "{addr}", owner_tid = {m.group(2)}, lock_word = {m.group(1)} }}')
    return o

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), 'dumps')
out=[]
for sample in sorted(os.listdir(root)):
    if sample=='runtime': continue
    for kind in sorted(os.listdir(f'{root}/{sample}')):
        if kind=='app': continue
        d=f'{root}/{sample}/{kind}'
        info=dict(l.split('=',1) for l in open(f'{d}/info.txt').read().splitlines() if '=' in l)
        info={k.strip():v.strip() for k,v in info.items()}
        names={}
        for l in open(f'{d}/sos/thread-names.txt'):
            if l.startswith('#'): continue
            p=l.split(None,5)
            if len(p)==6 and p[3]!='-': names.setdefault(p[5].strip(),[]).append((int(p[3]),int(p[1])))
        comm={}
        for l in open(f'{d}/threads.txt'):
            if l.startswith('#'): continue
            p=l.rstrip('\n').split('\t'); comm[int(p[0])]=p[3]
        packed='core.zst' if os.path.exists(f'{d}/core.zst') else 'core.gz'
        key='core_zst_bytes' if packed=='core.zst' else 'core_gz_bytes'
        out.append(f'[[dump]]\nsample = "{sample}"\nkind = "{kind}"\npath = "dumps/{sample}/{kind}/{packed}"')
        out.append(f'dump_bytes = {info["dump_bytes"]}\n{key} = {info[key]}\ncore_sha256 = "{info["core_sha256"]}"')
        out.append(f'how = "{info["how"].replace(chr(34),"")}"')
        if names:
            out.append('# managed thread name -> [OS tid, managed thread id] in this dump (from sos/thread-names.txt)')
            items=[]
            for n,v in names.items():
                if n in ('<null>','.NET TP Worker','.NET TP Gate'): continue
                items.append(f'"{n}" = [{v[0][0]}, {v[0][1]}]')
            out.append('threads = { '+', '.join(items)+' }')
            tp=[t for n,v in names.items() if n=='.NET TP Worker' for t,_ in v]
            if tp: out.append(f'threadpool_worker_tids = {sorted(tp)}')
        else:
            out.append('# no managed heap in this dump: thread names only via threads.txt (OS comm)')
            out.append('os_threads = { '+', '.join(f'"{c}" = {t}' for t,c in sorted(comm.items()) if not c.startswith('.NET') and c!='dotnet')+' }')
        out.extend(extras(sample,d))
        out.append('')
print('\n'.join(out))
