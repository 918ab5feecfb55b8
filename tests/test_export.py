#!/usr/bin/env python3
"""htr export against the synthesizer's ground truth.

usage: test_export.py HTR HTR_SYNTH [PERFETTO_PROTO]

The chrome events (begin/end pairs, read with --args) must be the truth's
blocks at times interpolated between the truth's time points (never
before the truth's TSC at a block's first and last instruction, never
after the next time the truth shows, but for the unit each event may be
pushed on to have a time of its own), nest like the tree strictly, and
the folded stacks must add up to the roots' totals, also when cut by
--depth and --min-duration.  tests/test_viewers.py reads the same
exports with the viewers' own importers.

The perfetto export (skipped when htr was built without it) is read by a
protobuf wire decoder of this file's own and, where protoc is installed,
by protoc --decode against PERFETTO_PROTO (tools/htr's minimal schema):
its slices must be the chrome events (same blocks, names, begin and end
times, args), nest like the tree with every BEGIN closed by its END in
order, on one track, under every cut chrome is checked under.
"""
import json
import os
from decimal import Decimal
import re
import shutil
import subprocess
import sys
import tempfile

htr, synth = sys.argv[1], sys.argv[2]
proto = sys.argv[3] if len(sys.argv) > 3 else None
fails = 0


def check(ok, what):
    global fails
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        fails += 1


def run(*args, ok=(0,)):
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode not in ok:
        print("FAIL: %s -> %d: %s" % (" ".join(args), p.returncode, p.stderr))
        sys.exit(1)
    return p


def varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7f) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def fields(b):
    """[(number, value)] of one message: ints for varints, bytes for
    length-delimited fields; fixed-width ones are not in the schema."""
    out, i = [], 0
    while i < len(b):
        key, i = varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 2:
            n, i = varint(b, i)
            v = b[i:i + n]
            if len(v) != n:
                raise ValueError("field %d runs past the end" % num)
            i += n
        else:
            raise ValueError("field %d: wire type %d" % (num, wt))
        out.append((num, v))
    return out


def one(fs, num, default=None):
    v = [x for n, x in fs if n == num]
    return v[-1] if v else default


def perfetto_read(data):
    """Replay a Trace the way a viewer does: interned names, tracks, and
    slices from BEGIN/END pairs.  Returns (tracks, slices, instants,
    problems); a slice is a dict with name, begin, end, args, parent (the
    enclosing slice's index or None) and depth."""
    tracks, slices, instants, problems = {}, [], [], []
    names, arg_names, stack, last_ts, seqs = {}, {}, [], 0, set()
    for num, pkt in fields(data):
        if num != 1:
            problems.append("Trace field %d" % num)
            continue
        p = fields(pkt)
        seqs.add(one(p, 10))
        flags = one(p, 13, 0)
        if not slices and not instants and not tracks and not flags & 1:
            problems.append("the first packet does not clear the state")
        interned = one(p, 12)
        if interned is not None:
            for n, e in fields(interned):
                ef = fields(e)
                if n == 2:
                    names[one(ef, 1)] = one(ef, 2).decode()
                elif n == 3:
                    arg_names[one(ef, 1)] = one(ef, 2).decode()
        td = one(p, 60)
        if td is not None:
            tf = fields(td)
            t = {"name": (one(tf, 2) or b"").decode(), "parent": one(tf, 5)}
            if one(tf, 3) is not None:
                t["pid"] = one(fields(one(tf, 3)), 1)
            if one(tf, 4) is not None:
                th = fields(one(tf, 4))
                t.update(pid=one(th, 1), tid=one(th, 2),
                         thread_name=(one(th, 5) or b"").decode())
            tracks[one(tf, 1)] = t
        te = one(p, 11)
        if te is None:
            continue
        if not flags & 2:
            problems.append("an event does not ask for the interned state")
        ef = fields(te)
        ts, typ, track = one(p, 8), one(ef, 9), one(ef, 11)
        if track not in tracks:
            problems.append("an event on an undeclared track %s" % track)
        name = names.get(one(ef, 10)) if one(ef, 10) is not None else \
            (one(ef, 23) or b"").decode() or None
        args = {}
        for n, a in ef:
            if n == 4:
                af = fields(a)
                k = arg_names.get(one(af, 1))
                args[k] = one(af, 3) if one(af, 3) is not None else \
                    one(af, 6).decode()
        if typ == 1:
            if ts < last_ts:
                problems.append("a BEGIN goes back in time")
            slices.append({"name": name, "begin": ts, "end": None,
                           "args": args, "depth": len(stack),
                           "parent": stack[-1] if stack else None})
            stack.append(len(slices) - 1)
            last_ts = ts
        elif typ == 2:
            if not stack:
                problems.append("an END without a BEGIN")
                continue
            if ts < last_ts:
                problems.append("an END goes back in time")
            slices[stack.pop()]["end"] = ts
            last_ts = ts
        elif typ == 3:
            instants.append({"name": name, "ts": ts, "args": args})
        else:
            problems.append("event type %s" % typ)
    if stack:
        problems.append("%d slices never end" % len(stack))
    if len(seqs) != 1 or None in seqs or 0 in seqs:
        problems.append("packet sequence ids %s" % seqs)
    return tracks, slices, instants, problems


def as_complete(events):
    """Chrome's begin/end pairs (file order, a stack) as complete events
    with ts, dur and the end's args; other events as they are."""
    out, stack = [], []
    for e in events:
        if e["ph"] == "B":
            stack.append(len(out))
            out.append(dict(e, ph="X"))
        elif e["ph"] == "E":
            b = out[stack.pop()]
            b["dur"] = e["ts"] - b["ts"]
            b["args"] = e.get("args", {})
            b["end_name"] = e.get("name")
        else:
            out.append(e)
    return out


def chrome(*args, parse_float=float):
    return as_complete(json.loads(run(htr, "export", "--format", "chrome",
                                      "--args", *args).stdout,
                                  parse_float=parse_float)["traceEvents"])


def truth_blocks(path):
    """Post-order blocks: (first, last, tsc_first, tsc_last, flags)."""
    out = []
    with open(path) as f:
        for line in f:
            w = line.split()
            if w and w[0] == "block":
                out.append((int(w[4]), int(w[5]), int(w[6]), int(w[7]), w[8]))
    return out


with tempfile.TemporaryDirectory() as d:
    pre = os.path.join(d, "t")
    run(synth, "-q", "-S", "real", "-s", "11", "-n", "20000", pre)
    t = truth_blocks(pre + ".truth")
    htrf = pre + ".htr"
    run(htr, "build", "-q", pre + ".pt", "--elf", pre + ".elf",
        "--cpuid-0x15-eax", "1", "--cpuid-0x15-ebx", "2",
        "--mtc-freq", "6", "--nom-freq", "16", "-o", htrf)
    t0 = min(b[2] for b in t if "L" in b[4]) if any("L" in b[4] for b in t) \
        else min(b[2] for b in t)

    # chrome: one event per block, interpolated times, strict nesting.
    ev = chrome("--gaps", htrf)
    calls = [e for e in ev if e["ph"] == "X"]
    check(len(calls) == len(t), "chrome: one event per block (%d)" % len(t))
    check(all(e["end_name"] == e["name"] for e in calls) and
          all("args" not in e for e in json.loads(run(
              htr, "export", "--format", "chrome", htrf).stdout)[
                  "traceEvents"]),
          "chrome: an end names its begin's function; args only with "
          "--args")
    # The truth's TSC steps at time points: a block's interpolated begin
    # lies between the step at its first instruction and the next higher
    # step the truth shows (plus one tick per earlier event at most);
    # its end is not before the step at its last instruction.
    steps = sorted((b[0], b[2]) for b in t if "L" not in b[4])
    slack = 2 * len(t)

    def next_step(first, tsc):
        return min((s for f, s in steps if f > first and s > tsc),
                   default=None)

    bad = []
    for e in calls:
        b = t[e["args"]["block"]]
        lo = 0 if "L" in b[4] else b[2] - t0
        hi = next_step(b[0], b[2]) if "L" not in b[4] else None
        if e["ts"] < lo or e["ts"] + e["dur"] < b[3] - t0 or \
           (hi is not None and e["ts"] > hi - t0 + slack):
            bad.append((e, b, hi))
    check(not bad, "chrome: every begin between the truth's time points "
          "around it, no end before the truth's (%d differ%s)" %
          (len(bad), ": %s" % (bad[0],) if bad else ""))
    byblock = {e["args"]["block"]: e for e in calls}
    nest = [e for e in calls if e["args"]["parent"] is not None and not (
        byblock[e["args"]["parent"]]["ts"] < e["ts"] and
        e["ts"] + e["dur"] < byblock[e["args"]["parent"]]["ts"] +
        byblock[e["args"]["parent"]]["dur"])]
    check(not nest, "chrome: events nest strictly like the tree")
    check(all(e["dur"] > 0 for e in calls), "chrome: no block of length 0")
    roots = sum(e["args"]["total"] for e in calls
                if e["args"]["parent"] is None)
    locs = sum(e["args"]["local"] for e in calls)
    check(roots == locs, "chrome: local ticks add up to the roots' totals")
    check(any(e["ph"] == "i" for e in ev) or
          run(htr, "gaps", htrf).stdout.startswith("0 gaps"),
          "chrome: --gaps marks the gaps")

    # folded: all time, whatever the cut.
    def folded(*opts):
        lines = run(htr, "export", "--format", "folded", *opts,
                    htrf).stdout.splitlines()
        return [(l.rsplit(" ", 1)[0], int(l.rsplit(" ", 1)[1]))
                for l in lines]

    for opts in ((), ("--depth", "2"), ("--min-duration", "500")):
        f = folded(*opts)
        check(sum(v for _, v in f) == roots,
              "folded %s: the stacks add up to the roots' totals" %
              " ".join(opts))
        check(len({s for s, _ in f}) == len(f),
              "folded %s: one line per stack" % " ".join(opts))
    check(all(s.count(";") < 2 for s, _ in folded("--depth", "2")),
          "folded --depth 2: no stack deeper than 2")
    cut = chrome("--min-duration", "500", htrf)
    check(all(e["args"]["total"] >= 500 for e in cut),
          "chrome --min-duration: no shorter event")

    # perfetto: the chrome events as slices, read two ways.
    def perfetto(*opts):
        path = os.path.join(d, "p.pftrace")
        p = subprocess.run((htr, "export", "--format", "perfetto", "-o",
                            path) + opts + (htrf,),
                           capture_output=True, text=True)
        return p, path

    def against_chrome(what, sl, events, unit=1):
        """Slices sl are the chrome events, block by block, nested as
        the events' parents say; chrome's times times unit are ns."""
        xs = {}
        for e in events:
            if e["ph"] == "X":
                e = dict(e, ts=int(Decimal(e["ts"]) * unit),
                         dur=int(Decimal(e["dur"]) * unit))
                xs[e["args"]["block"]] = e
        byblock = {s["args"]["block"]: s for s in sl}
        check(len(sl) == len(xs) and set(byblock) == set(xs),
              "perfetto %s: one slice per chrome event (%d, %d)" %
              (what, len(sl), len(xs)))
        bad = [(k, s) for k, s in byblock.items() if k in xs and (
            s["name"] != xs[k]["name"] or s["begin"] != xs[k]["ts"] or
            s["end"] != xs[k]["ts"] + xs[k]["dur"] or
            any(s["args"].get(a) != xs[k]["args"][a]
                for a in ("first", "last", "flags", "local", "total")))]
        check(not bad, "perfetto %s: names, begin and end times and args "
              "are chrome's (%d differ%s)" % (what, len(bad), ": %s %s" % (
                  bad[0][1], xs[bad[0][0]]) if bad else ""))
        # The enclosing slice must be the block's parent; a block whose
        # parent is not exported (--from) is a root.
        nest = []
        for s in sl:
            want = s["args"].get("parent")
            if want not in xs:
                want = None
            got = sl[s["parent"]]["args"]["block"] \
                if s["parent"] is not None else None
            if got != want:
                nest.append(s)
        check(not nest, "perfetto %s: slices nest like the tree (%d "
              "misplaced)" % (what, len(nest)))

    p, pf = perfetto("--gaps")
    if p.returncode != 0 and "without Perfetto support" in p.stderr:
        check(len(p.stderr.splitlines()) == 1 and p.returncode == 1,
              "perfetto: a build without it says so in one line")
        print("SKIP: perfetto export: %s" % p.stderr.strip())
    else:
        check(p.returncode == 0, "perfetto --gaps: exit 0 (%s)" %
              p.stderr.strip())
        data = open(pf, "rb").read()
        tracks, sl, inst, problems = perfetto_read(data)
        check(not problems, "perfetto: well-formed (%s)" %
              "; ".join(problems[:3]))
        against_chrome("--gaps", sl, ev)
        check(len(inst) == sum(e["ph"] == "i" for e in ev) and
              all(i["name"].startswith("gap: ") for i in inst),
              "perfetto --gaps: an instant per chrome gap event")
        gts = sorted((e["ts"], e["args"]["id"]) for e in ev
                     if e["ph"] == "i")
        check(sorted((i["ts"], i["args"]["id"]) for i in inst) == gts,
              "perfetto --gaps: the gaps' times and IDs are chrome's")
        # A raw build knows no thread: one plain track, saying its unit.
        check(len(tracks) == 1 and
              "tid" not in list(tracks.values())[0] and
              "TSC ticks" in list(tracks.values())[0]["name"],
              "perfetto: one track, no made-up thread, ticks in its name")
        check(len(data) < len(run(htr, "export", "--format", "chrome",
                                  "--args", htrf).stdout),
              "perfetto: smaller than the JSON")
        for opts in (("--depth", "2"), ("--min-duration", "500"),
                     ("--from", str(t[len(t) // 2][0]))):
            cut = chrome(*opts, htrf)
            p, pf = perfetto(*opts)
            _, csl, _, problems = perfetto_read(open(pf, "rb").read())
            check(p.returncode == 0 and not problems,
                  "perfetto %s: well-formed" % " ".join(opts))
            against_chrome(" ".join(opts), csl, cut)
        check(all(s["depth"] < 2 for s in perfetto_read(open(
            perfetto("--depth", "2")[1], "rb").read())[1]),
              "perfetto --depth 2: no slice deeper than 2")

        # A perf.data build: the recorded thread's track under its
        # process's, times in ns equal to chrome's microseconds.
        if not shutil.which("qemu-x86_64"):
            print("SKIP: perfetto of a perf.data build (qemu-x86_64 is not "
                  "installed)")
        else:
            data = os.path.join(d, "true.data")
            r = run(htr, "record", "-o", data, "--", "/bin/true",
                    ok=(0, 1, 2))
            if r.returncode:
                print("SKIP: perfetto of a perf.data build: %s" %
                      r.stderr.strip())
            else:
                run(htr, "build", "-q", data, "-o", os.path.join(d, "tr"))
                ph = [os.path.join(d, f) for f in os.listdir(d)
                      if f.startswith("tr.") and f.endswith(".htr")][0]
                cev = chrome(ph, parse_float=Decimal)
                meta = [e for e in cev if e["ph"] == "M"]
                xev = [e for e in cev if e["ph"] == "X"]
                p = subprocess.run((htr, "export", "--format", "perfetto",
                                    ph), capture_output=True)
                tracks, psl, _, problems = perfetto_read(p.stdout)
                check(p.returncode == 0 and not problems,
                      "perfetto perf.data: well-formed, to stdout (%s)" %
                      "; ".join(problems[:3]))
                against_chrome("perf.data", psl, cev, unit=1000)
                thr = [t for t in tracks.values() if "tid" in t]
                proc = [u for u, t in tracks.items()
                        if "pid" in t and "tid" not in t]
                check(len(tracks) == 2 and len(thr) == 1 and
                      len(proc) == 1 and thr[0]["parent"] == proc[0] and
                      thr[0]["pid"] == tracks[proc[0]]["pid"] ==
                      xev[0]["pid"] and thr[0]["tid"] == xev[0]["tid"] and
                      meta and
                      thr[0]["thread_name"] == meta[0]["args"]["name"] and
                      not thr[0]["name"],
                      "perfetto perf.data: the thread's track (pid %s, tid "
                      "%s, %r) under its process's, as chrome's events" %
                      (thr[0].get("pid") if thr else None,
                       thr[0].get("tid") if thr else None,
                       thr[0].get("thread_name") if thr else None))
                p = subprocess.run((htr, "export", "--format", "perfetto",
                                    "--ticks", ph), capture_output=True)
                tracks, psl, _, problems = perfetto_read(p.stdout)
                tev = chrome("--ticks", ph)
                check(not problems and any("TSC ticks" in t["name"]
                                           for t in tracks.values()),
                      "perfetto perf.data --ticks: the track says ticks")
                against_chrome("perf.data --ticks", psl, tev)
                for t, ns in (("1us", "1000"), ("2ms", "2000000"),
                              ("300ns", "300")):
                    a = run(htr, "export", "--format", "folded",
                            "--min-duration", t, ph).stdout
                    b = run(htr, "export", "--format", "folded",
                            "--min-duration", ns, ph).stdout
                    check(a == b, "folded perf.data --min-duration %s: as "
                          "%s (the file's unit, ns)" % (t, ns))

        # protoc, an independent reader of the same bytes.
        protoc = shutil.which("protoc")
        if not protoc or not proto:
            print("SKIP: protoc --decode (protoc is not installed)")
        else:
            p, pf = perfetto("--gaps")
            dec = subprocess.run(
                [protoc, "--proto_path=" + os.path.dirname(proto),
                 "--decode=perfetto.protos.Trace", proto],
                stdin=open(pf, "rb"), capture_output=True, text=True)
            check(dec.returncode == 0 and not dec.stderr.strip(),
                  "protoc decodes the perfetto export (%s)" %
                  dec.stderr.strip()[:200])
            pkts = dec.stdout.split("\npacket {")
            seq = []
            for pk in pkts:
                ty = re.search(r"\n    type: (TYPE_\w+)", pk)
                ts = re.search(r"\n  timestamp: (\d+)", pk)
                if ty:
                    seq.append((ty.group(1), int(ts.group(1))))
            _, sl2, inst2, _ = perfetto_read(open(pf, "rb").read())
            check(sum(1 for y, _ in seq if y == "TYPE_SLICE_BEGIN") ==
                  len(sl2) and
                  sum(1 for y, _ in seq if y == "TYPE_SLICE_END") ==
                  len(sl2) and
                  sum(1 for y, _ in seq if y == "TYPE_INSTANT") ==
                  len(inst2),
                  "protoc: as many BEGIN, END and INSTANT events")
            begins = [ts for y, ts in seq if y == "TYPE_SLICE_BEGIN"]
            check(begins == [s["begin"] for s in sl2],
                  "protoc: the BEGIN times, in order, are the decoder's")
            inames = dict(re.findall(
                r'event_names \{\n\s+iid: (\d+)\n\s+name: "((?:[^"\\]|'
                r'\\.)*)"', dec.stdout))
            check(set(inames.values()) ==
                  {s["name"] for s in sl2} | {i["name"] for i in inst2},
                  "protoc: the interned names are the events' names")
            check("TSC ticks" in dec.stdout and
                  re.search(r"\n  sequence_flags: 1\n", pkts[0]),
                  "protoc: the track names its unit; the first packet "
                  "resets the state")

    # folded on a recursion 2000 deep, recorded: 2000 stacks of up to 2000
    # long names (130 MB as strings) add up to the roots' totals, and
    # folded keeps each as a frame under its caller's stack: its memory
    # does not grow with their names.
    cc = shutil.which("cc")
    if not shutil.which("qemu-x86_64") or not cc:
        print("SKIP: folded on a deep recursion (needs qemu-x86_64 and cc)")
    else:
        fn = "recursion_with_a_name_long_enough_to_make_deep_stacks_big"
        src = os.path.join(d, "deep.c")
        with open(src, "w") as f:
            f.write("static volatile unsigned sink;\n"
                    "__attribute__((noinline)) static unsigned %s(unsigned n)\n"
                    "{\n\tunsigned i, x = n;\n"
                    "\tfor (i = 0; i < 8; i++)\n\t\tsink += x * i;\n"
                    "\tif (n)\n\t\tx = %s(n - 1) + 1;\n"
                    "\tfor (i = 0; i < 8; i++)\n\t\tsink += x * i;\n"
                    "\treturn x;\n}\n"
                    "int main(void) { return (int) %s(2000) & 1; }\n" %
                    (fn, fn, fn))
        exe, data = os.path.join(d, "deep"), os.path.join(d, "deep.data")
        run(cc, "-O1", "-o", exe, src)
        run(htr, "record", "-q", "-o", data, "--", exe, ok=(0, 1))
        run(htr, "build", "-q", data, "-o", os.path.join(d, "deep"))
        dh = [os.path.join(d, f) for f in os.listdir(d)
              if f.startswith("deep.") and f.endswith(".htr")][0]
        # (chrome first: it computes the sidecar, which has its own bound)
        cev = chrome("--ticks", dh)
        # GNU time's child is forked from it, not from this process, so
        # its peak RSS is the export's own.
        out, rss = os.path.join(d, "deep.folded"), os.path.join(d, "rss")
        timed = os.access("/usr/bin/time", os.X_OK)

        def folded_rss(*opts):
            with open(out, "w") as f:
                st = subprocess.run(
                    (("/usr/bin/time", "-f", "%M", "-o", rss) if timed
                     else ()) + (htr, "export", "--format", "folded",
                                 "--ticks") + opts + (dh,),
                    stdout=f).returncode
            return st, int(open(rss).read().split()[-1]) if timed else 0

        _, base = folded_rss("--depth", "100")
        status, kib = folded_rss()
        stacks = [l.rsplit(" ", 1) for l in open(out)]
        check(status == 0 and
              sum(int(v) for _, v in stacks) ==
              sum(e["args"]["local"] for e in cev if e["ph"] == "X"),
              "folded, recursion 2000 deep: the stacks add up to the "
              "roots' totals")
        check(max(k.count(fn) for k, _ in stacks) >= 2000,
              "folded, recursion 2000 deep: the deepest stack has every "
              "frame")
        if not timed:
            print("SKIP: folded's memory (no /usr/bin/time)")
        else:
            # Over a --depth 100 export of the same file: what the names
            # take (sanitizer builds add their own share).
            check(kib - base < 16 << 10,
                  "folded, recursion 2000 deep: %d MiB more memory than "
                  "with --depth 100 (2000 stacks)" %
                  ((kib - base) >> 10))

    # -o: all or nothing; errors.
    out = os.path.join(d, "x.json")
    run(htr, "export", "--format", "chrome", "-o", out, htrf)
    check(sum(e["ph"] == "B" for e in json.load(open(out))["traceEvents"])
          == len(calls), "export -o writes the file")
    p = run(htr, "export", "--format", "svg", htrf, ok=(2,))
    check(len(p.stderr.splitlines()) == 1, "a bad --format is one line")
    run(htr, "export", "--format", "chrome", "-o",
        os.path.join(d, "no/dir/x.json"), htrf, ok=(1,))
    check(not os.path.exists(os.path.join(d, "no")),
          "a failed export leaves nothing")

print("export: %s" % ("all checks passed" if not fails else
                      "%d failed" % fails))
sys.exit(1 if fails else 0)
