#!/usr/bin/env python3
"""htr export against the synthesizer's ground truth.

usage: test_export.py HTR HTR_SYNTH

The chrome events must be the truth's blocks with their exact times (the
truth's TSC at each block's first and last instruction), nest like the
tree, and the folded stacks must add up to the roots' totals, also when
cut by --depth and --min-duration.
"""
import json
import os
import subprocess
import sys
import tempfile

htr, synth = sys.argv[1], sys.argv[2]
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

    # chrome: one event per block, exact times, nesting.
    ev = json.loads(run(htr, "export", "--format", "chrome", "--gaps",
                        htrf).stdout)["traceEvents"]
    calls = [e for e in ev if e["ph"] == "X"]
    check(len(calls) == len(t), "chrome: one event per block (%d)" % len(t))
    bad = [e for e in calls
           if e["dur"] != t[e["args"]["block"]][3] - t[e["args"]["block"]][2]
           or e["ts"] != (0 if "L" in t[e["args"]["block"]][4]
                          else t[e["args"]["block"]][2] - t0)]
    check(not bad, "chrome: every ts and dur is the truth's (%d differ%s)" %
          (len(bad), ": %s" % bad[0] if bad else ""))
    byblock = {e["args"]["block"]: e for e in calls}
    nest = [e for e in calls if e["args"]["parent"] is not None and not (
        byblock[e["args"]["parent"]]["ts"] <= e["ts"] and
        e["ts"] + e["dur"] <= byblock[e["args"]["parent"]]["ts"] +
        byblock[e["args"]["parent"]]["dur"])]
    check(not nest, "chrome: events nest like the tree")
    roots = sum(e["dur"] for e in calls if e["args"]["parent"] is None)
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
    cut = json.loads(run(htr, "export", "--format", "chrome",
                         "--min-duration", "500", htrf).stdout)
    check(all(e["dur"] >= 500 for e in cut["traceEvents"]),
          "chrome --min-duration: no shorter event")

    # -o: all or nothing; errors.
    out = os.path.join(d, "x.json")
    run(htr, "export", "--format", "chrome", "-o", out, htrf)
    check(len(json.load(open(out))["traceEvents"]) == len(calls),
          "export -o writes the file")
    p = run(htr, "export", "--format", "svg", htrf, ok=(2,))
    check(len(p.stderr.splitlines()) == 1, "a bad --format is one line")
    run(htr, "export", "--format", "chrome", "-o",
        os.path.join(d, "no/dir/x.json"), htrf, ok=(1,))
    check(not os.path.exists(os.path.join(d, "no")),
          "a failed export leaves nothing")

print("export: %s" % ("all checks passed" if not fails else
                      "%d failed" % fails))
sys.exit(1 if fails else 0)
