#!/usr/bin/env python3
"""One thread of a perf.data build against perf script.

usage: perf_ns.py INSNS DUMP TID INFO TREE GAPS [insns]

INSNS: `perf script --itrace=i1i --ns -F comm,pid,tid,time,tod,flags` of
the recording in UTC (one line per instruction: the Nth line of a tid is
its instruction ID N).  DUMP: `htr dump --tsc --json` of the thread's
.htr, INFO: its `htr info`, TREE: its `htr dump --json`, GAPS: its `htr
gaps --json`.  Checks that the calls and returns perf lists are the
blocks' (a block entered by a traced call - entry known, not late, not
right after a gap - starts after an instruction perf flags "call", and
those are all of perf's but calls right before a gap; a block that ended at a return - not truncated,
unwound or implicitly returned - ends at one perf flags "return" or "tr
end return", and so do all of perf's), that htr names the thread as perf
does
(comm, pid, tid), says it started when perf's wall clock (tod) says its
first instruction ran (to the microsecond; or between its first switch
in and that, when perf lists switches), has as many instructions as perf decoded for it, and
gives every block that ended at a return (not late, truncated, unwound
or implicitly returned: where tracing resumed perf estimates the time)
perf's time at its last instruction, in ns (end_ns), and every block
entered by a traced call whose first instruction perf dates later than
the call that time (start_ns: a PLT stub's jmp ran at the time of its
TIP; a thread switched out after the call ran the callee when it came
back); with "insns", the
times are not compared (--filter recordings: perf dates a return out of
the filter where it next sees a timing packet, see test_perf.sh).
Prints one line; exit 1 on a difference.
"""
import datetime
import json
import sys

insns, dump, tid, info = sys.argv[1:5]
times, who, tod, first_in = [], None, None, None
perf_calls, perf_rets = set(), set()
for line in open(insns):
    f = line.split()        # COMM PID/TID DATE HH:MM:SS.NS SEC.NS: FLAGS
    if len(f) >= 7 and f[5].startswith('PERF_RECORD_SWITCH'):
        # Sideband: the thread's first switch in, before any
        # instruction of it.
        if (f[1].split('/')[-1] == tid and f[6] == 'IN' and
                first_in is None and not times):
            first_in = '%s %s UTC' % (f[2], f[3][:15])
        continue
    if len(f) >= 5 and f[1].split('/')[-1] == tid:
        sec, ns = f[4].rstrip(':').split('.')
        flags = ' '.join(f[5:])
        if flags == 'call':
            perf_calls.add(len(times))
        elif flags in ('return', 'tr end return'):
            perf_rets.add(len(times))
        times.append(int(sec) * 10**9 + int(ns))
        who = '%s (pid %s, %s)' % (tid, f[1].split('/')[0], f[0])
        if tod is None:         # to the microsecond, as htr info says it
            tod = '%s %s UTC' % (f[2], f[3][:15])
facts = dict(l.split(':', 1) for l in open(info) if ':' in l)
said = facts.get('thread', '').strip()
if said != who:
    print('htr info says thread %r, perf %r' % (said, who))
    sys.exit(1)
# htr dates the thread's first time point (its first PSB+ or enable,
# README "What the ticks mean"), perf its first instruction: the same
# unless the thread was switched in and out before it ran one (a CPU-wide
# recording under load), when htr's start lies between its first switch
# in and perf's first instruction.  To the microsecond htr info prints.
started = facts.get('wall clock', '').strip()
fmt = 'started %Y-%m-%d %H:%M:%S.%f UTC'
us = datetime.timedelta(microseconds=1)
try:
    at = datetime.datetime.strptime(started, fmt)
    last = datetime.datetime.strptime('started ' + tod, fmt)
    first = datetime.datetime.strptime('started ' + (first_in or tod), fmt)
    ok = min(first, last) - us <= at <= last + us
except ValueError:
    ok = False
if not ok:
    print('htr info says wall clock %r, perf\'s first instruction %r%s'
          % (started, tod, ', its first switch in %r' % first_in
             if first_in else ''))
    sys.exit(1)
ninsns = int(facts['instructions'])
if ninsns != len(times):
    print('htr has %d instructions, perf decoded %d' % (ninsns, len(times)))
    sys.exit(1)
gap_ids = {g['id'] for g in json.load(open(sys.argv[6]))}
htr_calls, htr_rets = set(), set()
for b in json.load(open(sys.argv[5])):
    fl = set(b['flags'].split(','))
    if b['entry'] is not None and 'late' not in fl and b['first'] > 0 \
       and b['first'] not in gap_ids:
        htr_calls.add(b['first'] - 1)
    if not fl & {'truncated', 'unwound', 'implicit-return'}:
        htr_rets.add(b['last'])
# A call interrupted before its callee's first instruction: the block
# starts right after a gap, which the rule above leaves out.
perf_calls -= {g - 1 for g in gap_ids}
for what, h, p in (('calls', htr_calls, perf_calls),
                   ('returns', htr_rets, perf_rets)):
    if h != p:
        print('%s: htr only %s, perf only %s' % (what, sorted(h - p)[:5],
              sorted(p - h)[:5]))
        sys.exit(1)
if sys.argv[7:] == ['insns']:
    print('%d insns, %d calls, %d returns as perf'
          % (ninsns, len(htr_calls), len(htr_rets)))
    sys.exit(0)


def differs(b, at, key):
    if times[b[at]] == b[key]:
        return 0
    if bad <= 3:
        print('block %d: %s htr %d ns, perf %d' % (b['block'], at, b[key],
              times[b[at]]))
    return 1


n = ns = bad = 0
for b in json.load(open(dump)):
    if b['first'] - 1 in htr_calls and b['start_ns'] is not None and \
       times[b['first']] != times[b['first'] - 1]:
        ns += 1
        bad += differs(b, 'first', 'start_ns')
    if b['end_ns'] is None or set(b['flags'].split(',')) & \
       {'late', 'truncated', 'unwound', 'implicit-return'}:
        continue
    n += 1
    bad += differs(b, 'last', 'end_ns')
if bad:
    print('%d of %d start and end times differ from perf\'s' % (bad, ns + n))
else:
    print('started %s as perf says, %d insns, %d calls, %d returns as perf; '
          'start times of %d, end times of %d blocks in ns as perf\'s'
          % (tod, ninsns, len(htr_calls), len(htr_rets), ns, n))
sys.exit(1 if bad or not n else 0)
