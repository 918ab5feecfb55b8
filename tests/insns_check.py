#!/usr/bin/env python3
"""Check an `htr insns -n 0` listing against independent truths.

  --truth T     the synthesizer's or recorder's truth: the first
                instruction of each block that was entered in the trace
                (not late) is its function's entry; with --t0 (ticks)
                the times at each block's first and last instruction are
                the truth's TSC minus t0
  --perf P      `perf script --itrace=i1i -F ip,time --ns` (its Nth line
                is instruction ID N): TIME at each block's last
                instruction (a return: a time point of the build) is
                perf's time there minus perf's at ID 0
  --objdump O   `objdump -d -C [-M intel]` of the module: at each address
                it lists, the same mnemonic (synonyms and AT&T size
                suffixes aside) and the same branch target and <name>
  --nm N        `nm -C -S` of the module: WHERE is the symbol covering
                the address, +0xOFF inside it
  --bias B      runtime address - the module's own address
  --module M    the module's name as htr prefixes it (MODULE!name)

Prints one summary line; exit 1 with the first mismatches on failure.
"""
import argparse
import re
import sys

PREFIXES = {'rep', 'repz', 'repe', 'repnz', 'repne', 'lock', 'bnd',
            'notrack', 'data16', 'data32', 'addr32', 'cs', 'ds', 'es',
            'ss', 'fs', 'gs', 'rex', 'rex.w', 'xacquire', 'xrelease'}
# Condition-code synonyms (Zydis says jz, objdump je): one name each.
CC = {'z': 'e', 'nz': 'ne', 'c': 'b', 'nae': 'b', 'nc': 'ae', 'nb': 'ae',
      'na': 'be', 'nbe': 'a', 'pe': 'p', 'po': 'np', 'nge': 'l',
      'nl': 'ge', 'ng': 'le', 'nle': 'g'}
# Other spellings of one instruction, AT&T and Intel (objdump's first).
SAME = {'cltq': 'cdqe', 'cwtl': 'cwde', 'cqto': 'cqo', 'cltd': 'cdq',
        'movabs': 'mov', 'movslq': 'movsxd', 'movsxd': 'movsxd',
        'xchg': 'xchg', 'ud2a': 'ud2', 'jmpq': 'jmp', 'callq': 'call',
        'retq': 'ret', 'pushq': 'push', 'popq': 'pop'}


def canon(text):
    """The mnemonic of an instruction's text, prefixes and synonyms off."""
    words = text.replace(',', ' ').split()
    while words and words[0].lower() in PREFIXES:
        words.pop(0)
    if not words:
        return ''
    m = words[0].lower()
    m = SAME.get(m, m)
    for p in ('cmov', 'set', 'j'):
        if m.startswith(p) and m[len(p):] in CC:
            return p + CC[m[len(p):]]
    return m


def same_mnemonic(obj, zy):
    a, b = canon(obj), canon(zy)
    if a == b:
        return True
    # AT&T: objdump adds the operand size (movl, addq) where Zydis does
    # not, and writes movz/movs with both sizes (movzbl = movzx).
    for x, y in ((a, b), (b, a)):
        if x[:-1] == y and x[-1] in 'bwlq':
            return True
        if re.fullmatch(r'movz[bw][wlq]', x) and y in ('movzx', 'movz'):
            return True
        if re.fullmatch(r'movs[bwl][wlq]', x) and y in ('movsx', 'movsxd'):
            return True
    return False


def parse_listing(path, unit):
    rows = {}
    header = None
    for line in open(path):
        line = line.rstrip('\n')
        if line.startswith('# ID'):
            header = line
            continue
        if line.startswith('#') or line.startswith('--'):
            continue
        f = line.split('  ', 4)
        if len(f) != 5:
            sys.exit('bad line: %r' % line)
        rows[int(f[0])] = (int(f[1], 16), f[2], f[3], f[4])
    if not header or 'TIME in %s ' % unit not in header:
        sys.exit('header %r does not name TIME in %s' % (header, unit))
    return rows


def parse_truth(path):
    entry, blocks = {}, []
    for line in open(path):
        w = line.split()
        if w and w[0] == 'func':
            entry[int(w[1])] = int(w[2], 16)
        elif w and w[0] == 'block':
            blocks.append((int(w[3]), int(w[4]), int(w[5]), int(w[6]),
                           int(w[7]), w[8]))
    return entry, blocks


def parse_objdump(path):
    out = {}
    for line in open(path):
        m = re.match(r'\s*([0-9a-f]+):\t(.*)$', line)
        if m and m.group(2).strip():
            out[int(m.group(1), 16)] = m.group(2).strip()
    return out


def parse_nm(path):
    syms = []
    for line in open(path):
        w = line.split(None, 3)
        if len(w) == 4 and w[2] in 'tTwWiu' and int(w[1], 16):
            syms.append((int(w[0], 16), int(w[1], 16), w[3].strip()))
    return syms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--what', required=True)
    ap.add_argument('--listing', required=True)
    ap.add_argument('--unit', required=True)
    ap.add_argument('--truth', required=True)
    ap.add_argument('--t0', type=int)
    ap.add_argument('--perf')
    ap.add_argument('--objdump', required=True)
    ap.add_argument('--syntax', required=True)
    ap.add_argument('--nm', required=True)
    ap.add_argument('--module', required=True)
    ap.add_argument('--bias', type=int, required=True)
    a = ap.parse_args()
    rows = parse_listing(a.listing, a.unit)
    bad = []
    seen = {'entries': 0, 'times': 0, 'mnemonics': 0, 'targets': 0,
            'names': 0}

    def strip_mod(name):
        p = a.module + '!'
        return name[len(p):] if name.startswith(p) else name

    # Truth: entries and times.
    entry, blocks = parse_truth(a.truth)
    perf = None
    if a.perf:
        perf = []
        for line in open(a.perf):
            w = line.split()
            t = w[0].rstrip(':').replace('.', '')
            perf.append(int(t))
    for func, first, last, tf, tl, flags in blocks:
        if first not in rows or last not in rows:
            bad.append('truth block %d-%d: not listed' % (first, last))
            continue
        if 'L' not in flags and entry.get(func):
            seen['entries'] += 1
            if rows[first][0] != entry[func]:
                bad.append('ID %d: address %#x, truth entry %#x' %
                           (first, rows[first][0], entry[func]))
        if a.t0 is not None:
            for i, t in ((first, tf), (last, tl)):
                seen['times'] += 1
                if rows[i][2] == '-' or int(rows[i][2]) + a.t0 != t:
                    bad.append('ID %d: time %s, truth %d - t0 %d' %
                               (i, rows[i][2], t, a.t0))
        if perf is not None:
            seen['times'] += 1
            want = perf[last] - perf[0]
            if rows[last][2] == '-' or int(rows[last][2]) != want:
                bad.append('ID %d: time %s ns, perf script %d' %
                           (last, rows[last][2], want))
    if perf is not None and len(perf) != len(rows):
        bad.append('%d instructions, perf script %d' % (len(rows),
                                                         len(perf)))
    # objdump: mnemonics, branch targets and RIP-relative addresses.
    obj = parse_objdump(a.objdump)
    for i, (ip, where, t, text) in sorted(rows.items()):
        o = obj.get(ip - a.bias)
        if o is None:
            continue
        seen['mnemonics'] += 1
        if not same_mnemonic(o, text):
            bad.append('ID %d %#x: %r, objdump %r' % (i, ip, text, o))
            continue
        m = re.search(r'\s([0-9a-f]+) <([^>]*)>$', o)
        if m and '#' not in o:
            seen['targets'] += 1
            z = re.search(r'\s0x([0-9a-f]+) <([^>]*)>$', text)
            to = int(m.group(1), 16) + a.bias
            # A PLT stub: objdump says FUNC@plt, htr names it after the
            # function it leads to (MODULE!FUNC, as htr find does).
            want = m.group(2)
            got = z.group(2) if z else ''
            if want.endswith('@plt'):
                want, got = want[:-4], got.rsplit('!', 1)[-1]
            if (not z or int(z.group(1), 16) != to or
                    strip_mod(got) != want):
                bad.append('ID %d %#x: %r, objdump %r' % (i, ip, text, o))
        m = re.search(r'# ([0-9a-f]+)', o)
        if m:
            seen['targets'] += 1
            z = re.search(r'# 0x([0-9a-f]+)', text)
            if not z or int(z.group(1), 16) != int(m.group(1), 16) + a.bias:
                bad.append('ID %d %#x: %r, objdump %r' % (i, ip, text, o))
    # nm: the symbol covering each address.
    syms = parse_nm(a.nm)
    for i, (ip, where, t, text) in sorted(rows.items()):
        addr = ip - a.bias
        names = ['%s+%#x' % (n, addr - v) if addr != v else n
                 for v, s, n in syms if v <= addr < v + s]
        if not names:
            continue
        seen['names'] += 1
        if strip_mod(where) not in names:
            bad.append('ID %d %#x: WHERE %r, nm %r' % (i, ip, where, names))
    fig = ', '.join('%d %s' % (v, k) for k, v in seen.items())
    if bad or not seen['mnemonics'] or not seen['names'] or \
            not seen['times'] or not seen['entries']:
        print('%s: %d mismatches (%s): %s' % (a.what, len(bad), fig,
                                              '; '.join(bad[:6])))
        sys.exit(1)
    print('%s: %d instructions agree (%s)' % (a.what, len(rows), fig))


main()
