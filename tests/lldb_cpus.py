#!/usr/bin/env python3
"""A per-CPU LLDB trace bundle from a CPU-wide perf.data.

usage: lldb_cpus.py FILE.data DIR [corrupt]

Writes what LLDB's `trace save` writes for `process trace start
--per-cpu-tracing` (the bundle schema of LLDB's `trace schema intel-pt`):
DIR/cpu-N.ipt (the AUXTRACE payloads of CPU N, in file order),
DIR/cpu-N.switch (its PERF_RECORD_SWITCH_CPU_WIDE records, verbatim:
LLDB reads pid, tid and time at fixed offsets 16, 20 and 24, the
sample_id trailer of sample_type TID|TIME, which is how htr record writes
them), and DIR/trace.json: the CPU (the file's cpuid feature), the
process's threads and modules (MMAP2 of the first process named; each
module's load address: where its lowest PT_LOAD lands), the CPUs, and
tscPerfZeroConversion from the TIME_CONV record.

With "corrupt", cpu-0.switch ends in a SWITCH_CPU_WIDE record of 24
bytes (too short for its time, yet naming the process in its pid field,
so LLDB's `trace save`, which keeps the process's records by that field,
passes it on) and an 8-byte LOST record.

Parsed from perf's documentation (perf.data-file-format.txt) and
<linux/perf_event.h>'s layouts; only what htr record writes is handled.
"""
import json
import os
import re
import struct
import sys

MMAP2, SWITCH_CPU_WIDE, AUXTRACE, TIME_CONV = 10, 15, 71, 79


def lowest_load(path):
    """(vaddr, offset) of every PT_LOAD of the ELF64 at path."""
    with open(path, 'rb') as f:
        eh = f.read(64)
        phoff, = struct.unpack_from('<Q', eh, 32)
        phentsize, phnum = struct.unpack_from('<HH', eh, 54)
        f.seek(phoff)
        ph = f.read(phentsize * phnum)
    loads = []
    for i in range(phnum):
        p_type, _, p_offset, p_vaddr = struct.unpack_from(
            '<IIQQ', ph, i * phentsize)
        if p_type == 1:
            loads.append((p_vaddr, p_offset))
    return loads


def main():
    data_path, out = sys.argv[1:3]
    b = open(data_path, 'rb').read()
    if b[:8] != b'PERFILE2':
        sys.exit('not a perf.data file: ' + data_path)
    doff, dsize = struct.unpack_from('<QQ', b, 40)
    ipt, sw, conv = {}, {}, None
    maps, pid, tids = {}, None, []
    at = doff
    while at < doff + dsize:
        typ, misc, size = struct.unpack_from('<IHH', b, at)
        if size < 8:
            sys.exit('bad record at %d' % at)
        if typ == AUXTRACE:
            n, _, _, _, tid, cpu = struct.unpack_from('<QQQIII', b, at + 8)
            ipt.setdefault(cpu, []).append(b[at + size:at + size + n])
            at += size + n
            continue
        if typ == SWITCH_CPU_WIDE:
            # next_prev pid/tid, then the trailer: pid, tid, time, cpu.
            p, t, _, cpu = struct.unpack_from('<IIQI', b, at + 16)
            sw.setdefault(cpu, []).append(b[at:at + size])
            if p and pid is None:
                pid = p
            if p == pid and t and t not in tids:
                tids.append(t)
        elif typ == TIME_CONV:
            conv = struct.unpack_from('<QQQ', b, at + 8)
        elif typ == MMAP2:
            p, _, addr, _, pgoff = struct.unpack_from('<IIQQQ', b, at + 8)
            name = b[at + 72:at + size].split(b'\0')[0].decode()
            if name.startswith('/') and os.path.exists(name):
                maps.setdefault((p, name), []).append((addr, pgoff))
        at += size
    if pid is None or conv is None or not ipt:
        sys.exit('no per-CPU trace, switch or TIME_CONV in ' + data_path)
    modules = []
    for (p, name), segs in maps.items():
        if p != pid:
            continue
        loads = lowest_load(name)
        addr, pgoff = min(segs, key=lambda s: s[1])
        # The PT_LOAD holding pgoff gives the slide; the module's load
        # address is its lowest PT_LOAD's vaddr plus that slide.
        held = [l for l in loads if l[1] <= pgoff] or loads
        vaddr, off = max(held, key=lambda l: l[1])
        slide = addr - (vaddr + pgoff - off)
        low = min(l[0] for l in loads) & ~0xfff
        modules.append({'systemPath': name, 'file': name,
                        'loadAddress': hex(low + slide)})
    m = re.search(rb'GenuineIntel,(\d+),(\d+),(\d+)', b)
    fam, model, step = (int(x) for x in m.groups()) if m else (6, 85, 4)
    os.makedirs(out, exist_ok=True)
    cpus = []
    if len(sys.argv) > 3 and sys.argv[3] == 'corrupt':
        # LLDB reads a time past the short record: the header of an
        # 8-byte LOST record, a time after every real one.
        sw[0] += [struct.pack('<IHHIIII', SWITCH_CPU_WIDE, 0, 24, 0, 0, pid,
                              pid), struct.pack('<IHH', 2, 0, 8)]
    for cpu in sorted(ipt):
        with open(os.path.join(out, 'cpu-%d.ipt' % cpu), 'wb') as f:
            f.write(b''.join(ipt[cpu]))
        with open(os.path.join(out, 'cpu-%d.switch' % cpu), 'wb') as f:
            f.write(b''.join(sw.get(cpu, [])))
        cpus.append({'id': cpu, 'iptTrace': 'cpu-%d.ipt' % cpu,
                     'contextSwitchTrace': 'cpu-%d.switch' % cpu})
    bundle = {
        'type': 'intel-pt',
        'cpuInfo': {'vendor': 'GenuineIntel', 'family': fam,
                    'model': model, 'stepping': step},
        'processes': [{'pid': pid, 'triple': 'x86_64-unknown-linux-gnu',
                       'threads': [{'tid': t} for t in tids],
                       'modules': modules}],
        'cpus': cpus,
        'tscPerfZeroConversion': {'timeShift': conv[0], 'timeMult': conv[1],
                                  'timeZero': conv[2]},
    }
    with open(os.path.join(out, 'trace.json'), 'w') as f:
        json.dump(bundle, f, indent=1)
    print(pid, ' '.join(str(t) for t in tids))


main()
