#!/usr/bin/env python3
"""Rewrite a perf.data of `htr record` as perf writes one on hardware.

usage: hwperf.py IN OUT [--kernel] [--cycles] [--old] [--per-task]
       hwperf.py --kcore-dir DIR

IN is a file-format perf.data of a user-only recording (`htr record`,
per-thread or --cpus N).  OUT gets the same recording as perf would have
written it with:

  --kernel  intel_pt// (no u: user and kernel traced): every stretch where
            tracing was off (a syscall's TIP.PGD ... TIP.PGE, an
            interrupt's FUP + TIP.PGD ...; a CPU's switch between
            threads) is the kernel running instead: a TIP into a kernel
            stub (KSTUB: `test %rax,%rax; je +0; sysretq`), a TNT for its
            je, PSB+ there with a FUP at the stub's sysretq, and a TIP back
            to where user code goes on.  Tracing starts in user space, as
            htr record's does (perf loses the user code up to the first
            kernel stretch if it starts in the kernel).  The
            intel_pt attr loses exclude_kernel.
  --cycles  `-e cycles -e intel_pt//`: a cycles event first in the attrs
            (another sample_type; every event has IDENTIFIER), with a
            SAMPLE record of the idle task (pid 0) after each sideband
            record that has a time.
  --per-task  (CPU-wide IN) `perf record -- prog` without -a: per-task
            events on every CPU (inherit), so SWITCH records of the
            workload's own threads (switch-out naming no next task), none
            of the idle task; have_sched_switch 2.
  --old     perf 4.x's layout: attrs of 112 bytes (PERF_ATTR_SIZE_VER5),
            AUXTRACE_INFO with the 10 private words perf 4.1 wrote (no MTC,
            CYC, CTC, filter words), TIME_CONV without the 5.10 fields, no
            clock_data feature.

--kcore-dir DIR writes DIR/kcore_dir/kcore, the kernel stub's code as perf
record --kcore would copy it (an ELF core file, one PT_LOAD at KSTUB), and
DIR/vmlinux, the same as an executable (ET_EXEC).

Feature sections that would no longer be right are left out: the auxtrace
index (record offsets move) and event_desc (its attrs).  Written from
perf's Documentation/perf.data-file-format.txt and intel-pt.txt, and the
Intel SDM's packet layouts.
"""
import struct
import sys

KSTUB = 0xffffffff81a00000
KSTUB_CODE = bytes([0x48, 0x85, 0xc0, 0x74, 0x00, 0x48, 0x0f, 0x07])
KSTUB_RET = KSTUB + 5
PT_TYPE = 8
REC_SAMPLE, REC_AUXTRACE_INFO, REC_AUXTRACE, REC_TIME_CONV = 9, 70, 71, 79
REC_SWITCH, REC_SWITCH_CPU_WIDE = 14, 15
FEAT_EVENT_DESC, FEAT_AUXTRACE, FEAT_CLOCK_DATA = 12, 18, 29
SAMPLE_IP, SAMPLE_TID, SAMPLE_TIME, SAMPLE_CPU = 1, 2, 4, 128
SAMPLE_PERIOD, SAMPLE_IDENTIFIER = 256, 1 << 16

PSB = bytes([0x02, 0x82] * 8)
IPBYTES = {0: 0, 1: 2, 2: 4, 3: 6, 4: 6, 6: 8}
EXT_LEN = {0x03: 4, 0x23: 2, 0x43: 8, 0x73: 7, 0x82: 16, 0x83: 2, 0xa3: 8,
           0xc8: 7, 0xf3: 2, 0x22: 4, 0xa2: 7, 0x62: 2, 0xe2: 2, 0xc2: 10}


def pkt_len(t, i):
    b = t[i]
    if b == 0:
        return 1
    if b == 2:
        e = t[i + 1]
        if e == 0xc3:
            return 11
        if e & 0x1f == 0x12:
            return 6 if (e >> 5) & 3 == 0 else 10
        return EXT_LEN[e]
    if not b & 1:
        return 1
    if b & 3 == 3:
        n = 1
        if b & 4:
            while True:
                n += 1
                if not t[i + n - 1] & 1:
                    break
        return n
    if b & 0x1f in (0x0d, 0x11, 0x01, 0x1d):
        return 1 + IPBYTES[b >> 5]
    return {0x19: 8, 0x59: 2, 0x99: 2}[b]


def ip_of(t, i, last):
    b = t[i]
    ipc = b >> 5
    n = IPBYTES[ipc]
    v = int.from_bytes(t[i + 1:i + 1 + n], 'little')
    if ipc == 0:
        return None
    if ipc == 1:
        return (last & ~0xffff) | v
    if ipc == 2:
        return (last & ~0xffffffff) | v
    if ipc == 3:
        return v | 0xffff000000000000 if v >> 47 else v
    if ipc == 4:
        return (last & ~0xffffffffffff) | v
    return v


def ip_pkt(hdr, ip):
    return bytes([hdr | 3 << 5]) + (ip & 0xffffffffffff).to_bytes(6, 'little')


def to_kernel(t):
    """The user-only trace @t as a user+kernel one (see --kernel)."""
    out = bytearray()
    i, last, state, in_psb = 0, 0, 'off', False
    first = t.find(PSB)
    if first < 0:
        return bytes(t)
    out += t[:first]
    i = first
    while i < len(t):
        n = pkt_len(t, i)
        b = t[i]
        p = t[i:i + n]
        if b == 2 and t[i + 1] == 0x82:
            in_psb, last = True, 0
            out += p
        elif b == 2 and t[i + 1] == 0x23:
            if state == 'kernel':
                out += ip_pkt(0x1d, KSTUB_RET)
            in_psb = False
            out += p
        elif b != 0 and b != 2 and b & 1 and b & 0x1f in (0x0d, 0x11, 0x01, 0x1d):
            ip = ip_of(t, i, last)
            if ip is not None:
                last = ip
            h = b & 0x1f
            if h == 0x1d:
                out += ip_pkt(0x1d, ip)
            elif h == 0x01:                         # TIP.PGD -> the kernel
                out += ip_pkt(0x0d, KSTUB) + bytes([0x06])
                state = 'kernel'
            elif h == 0x11:                         # TIP.PGE -> back
                out += ip_pkt(0x0d if state == 'kernel' else 0x11, ip)
                state = 'user'
            else:
                out += ip_pkt(0x0d, ip)
        elif b == 0x99 and state == 'kernel' and not in_psb:
            pass            # MODE.Exec before a PGE: no mode change here
        else:
            out += p
        i += n
    return bytes(out)


def write_kcore(d):
    """D/kcore_dir/kcore: an ELF core file (as perf record --kcore copies
    /proc/kcore) whose one PT_LOAD is the kernel stub at KSTUB."""
    import os
    os.makedirs(d + '/kcore_dir', exist_ok=True)
    eh = bytearray(64)
    eh[0:16] = b'\x7fELF\x02\x01\x01' + bytes(9)
    # e_type ET_CORE, e_machine x86-64, e_version, e_entry, e_phoff,
    # e_shoff, e_flags, e_ehsize, e_phentsize, e_phnum, e_shentsize,
    # e_shnum, e_shstrndx
    struct.pack_into('<HHIQQQIHHHHHH', eh, 16, 4, 62, 1, 0, 64, 0, 0, 64,
                     56, 1, 64, 0, 0)
    # PT_LOAD, R+X, offset 4096, vaddr, paddr, filesz, memsz, align
    ph = struct.pack('<IIQQQQQQ', 1, 5, 4096, KSTUB, 0, len(KSTUB_CODE),
                     len(KSTUB_CODE), 4096)
    img = bytes(eh) + ph
    img += bytes(4096 - len(img)) + KSTUB_CODE
    open(d + '/kcore_dir/kcore', 'wb').write(img)
    # The same code as a kernel image (ET_EXEC) for --vmlinux.
    img = bytearray(img)
    struct.pack_into('<H', img, 16, 2)
    open(d + '/vmlinux', 'wb').write(img)


def main():
    if sys.argv[1] == '--kcore-dir':
        write_kcore(sys.argv[2])
        return
    src, dst = sys.argv[1], sys.argv[2]
    opts = set(sys.argv[3:])
    d = open(src, 'rb').read()
    assert d[:8] == b'PERFILE2'
    (hsize, asz, aoff, alen, doff, dlen, eoff, elen) = struct.unpack_from(
        '<8Q', d, 8)
    feats = struct.unpack_from('<4Q', d, 72)
    ent = asz
    attrs = []
    for k in range(alen // ent):
        a = bytearray(d[aoff + k * ent:aoff + k * ent + ent - 16])
        ioff, ilen = struct.unpack_from('<QQ', d, aoff + k * ent + ent - 16)
        attrs.append([a, d[ioff:ioff + ilen]])
    maxid = 0
    for a, ids in attrs:
        for j in range(0, len(ids), 8):
            maxid = max(maxid, struct.unpack_from('<Q', ids, j)[0])
        if '--kernel' in opts and struct.unpack_from('<I', a, 0)[0] == PT_TYPE:
            fl = struct.unpack_from('<Q', a, 40)[0] & ~(1 << 5)
            struct.pack_into('<Q', a, 40, fl)
    cyc_id = maxid + 1000
    if '--cycles' in opts:
        c = bytearray(len(attrs[0][0]))
        st = (SAMPLE_IDENTIFIER | SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME |
              SAMPLE_CPU | SAMPLE_PERIOD)
        # type 0 (hardware) config 0 (cycles), freq 4000, sample_id_all,
        # disabled, inherit, enable_on_exec, freq.
        struct.pack_into('<IIQQQQ', c, 0, 0, len(c), 0, 4000, st, 0)
        fl = 1 | 2 | (1 << 10) | (1 << 12) | (1 << 18)
        struct.pack_into('<Q', c, 40, fl)
        attrs.insert(0, [c, struct.pack('<Q', cyc_id)])
    if '--old' in opts:
        for a in attrs:
            del a[0][112:]
            struct.pack_into('<I', a[0], 4, 112)
    # The records.
    recs = bytearray()
    o, end = doff, doff + dlen
    while o < end:
        typ, misc, size = struct.unpack_from('<IHH', d, o)
        body = bytearray(d[o + 8:o + size])
        pay = b''
        if typ == REC_AUXTRACE:
            psize = struct.unpack_from('<Q', body, 0)[0]
            pay = d[o + size:o + size + psize]
            o += psize
            if '--kernel' in opts:
                pay = to_kernel(pay)
                pay += bytes((8 - len(pay) % 8) % 8)
                struct.pack_into('<Q', body, 0, len(pay))
        elif typ == REC_AUXTRACE_INFO and '--old' in opts:
            body = body[:8 + 10 * 8]
        elif typ == REC_TIME_CONV and '--old' in opts:
            body = body[:24]
        elif typ == REC_SWITCH_CPU_WIDE and '--per-task' in opts:
            # The task's own SWITCH: no next/prev task; none of the idle
            # task (the sample_id's pid/tid: TID first of the trailer).
            pid, tid = struct.unpack_from('<II', body, len(body) - 32)
            if tid == 0:
                o += size
                continue
            typ, body = REC_SWITCH, body[8:]
        elif typ == REC_AUXTRACE_INFO and '--per-task' in opts:
            struct.pack_into('<Q', body, 8 + 8 * 7, 2)   # have_sched_switch
        o += size
        recs += struct.pack('<IHH', typ, misc, 8 + len(body)) + body + pay
        # A cycles sample of the idle task after sideband with a time
        # (the sample_id trailer: TID, TIME, CPU, IDENTIFIER).
        if ('--cycles' in opts and typ < 64 and typ != REC_SAMPLE and
                len(body) >= 32):
            tm, cpu = struct.unpack_from('<QI', body, len(body) - 24)
            s = struct.pack('<QQIIQIIQ', cyc_id, 0xffffffff81000010, 0, 0,
                            tm, cpu, 0, 100000)
            recs += struct.pack('<IHH', REC_SAMPLE, 1, 8 + len(s)) + s
    # The features: their sections in bit order after the data.
    table = doff + dlen
    secs = []
    bits = []
    for k in range(256):
        if not feats[k // 64] >> (k % 64) & 1:
            continue
        foff, flen = struct.unpack_from('<QQ', d, table)
        table += 16
        if k == FEAT_AUXTRACE or k == FEAT_EVENT_DESC:
            continue
        if k == FEAT_CLOCK_DATA and '--old' in opts:
            continue
        bits.append(k)
        secs.append(d[foff:foff + flen])
    # Layout: header, ids, attrs, data, feature table, sections.
    out = bytearray(104)
    idoffs = []
    for a, ids in attrs:
        idoffs.append((len(out), len(ids)))
        out += ids
    asz = len(attrs[0][0]) + 16
    aoff = len(out)
    for (a, ids), (io, il) in zip(attrs, idoffs):
        out += a + struct.pack('<QQ', io, il)
    doff = len(out)
    out += recs
    dlen = len(recs)
    toff = len(out)
    out += bytes(16 * len(bits))
    fw = [0, 0, 0, 0]
    for j, (k, s) in enumerate(zip(bits, secs)):
        struct.pack_into('<QQ', out, toff + 16 * j, len(out), len(s))
        out += s
        fw[k // 64] |= 1 << (k % 64)
    out[0:8] = b'PERFILE2'
    struct.pack_into('<8Q', out, 8, 104, asz, aoff, len(attrs) * asz, doff,
                     dlen, 0, 0)
    struct.pack_into('<4Q', out, 72, *fw)
    open(dst, 'wb').write(out)


if __name__ == '__main__':
    main()
