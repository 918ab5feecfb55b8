#!/usr/bin/env python3
"""The hottest functions of a recorded program, and how long the calls
of one of them took: a notebook-style walk through the htr module.

usage: hot_functions.py FILE.htr [--top N] [--function NAME] [--png OUT]

  htr record -o prog.data -- ./prog     # or perf record -e intel_pt//u
  htr build prog.data                   # -> prog.TID.htr
  hot_functions.py prog.TID.htr --png calls.png

Prints the N functions with the most local time (htr top's figures, then
the same sums done with numpy over every block), then the distribution
of the call durations of --function (default: the hottest function with
at least 10 calls) as a text histogram, and as a PNG with matplotlib
where it is installed.  Times are ns when the file knows perf's clock,
else TSC ticks.
"""
import argparse
import sys

import htr

try:
    import numpy as np
except ImportError:
    sys.exit("hot_functions.py: needs numpy (Debian: python3-numpy)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--function")
    ap.add_argument("--png")
    a = ap.parse_args()

    f = htr.open(a.file)
    ns = f.ticks_to_ns(0) is not None
    unit = "ns" if ns and f.thread else "ticks"
    conv = (lambda t: f.ticks_to_ns(int(t))) if unit == "ns" else int

    # 1. htr top's table: the per-function figures of the sidecar.
    top = f.top(a.top)
    print("%-44s %12s %12s %7s" % ("function", "local " + unit,
                                   "inclusive", "calls"))
    for r in top:
        print("%-44s %12d %12d %7d" % (r["name"][:44], conv(r["local"]),
                                       conv(r["inclusive"]), r["calls"]))

    # 2. The same from the blocks: every block's name and local time as
    #    arrays, summed per function with numpy.
    codes, names = f.names()
    t = f.tsc()
    local = np.bincount(codes, weights=t["local"], minlength=len(names))
    order = np.argsort(-local, kind="stable")[:3]
    print("\nnumpy over %d blocks: %s" % (len(f), ", ".join(
        "%s %d" % (names[i], conv(local[i])) for i in order)))

    # 3. One function's calls: their totals (inclusive of callees).
    if a.function:
        name = a.function
    else:
        many = [r for r in f.top(0) if r["calls"] >= 10]
        if not many:
            sys.exit("hot_functions.py: no function with 10 calls")
        name = many[0]["name"]
    calls = f.find(name)
    if not calls:
        sys.exit("hot_functions.py: no function %s" % name)
    dur = np.array([conv(c["total"]) for c in calls], dtype=np.float64)
    print("\n%s: %d calls, median %d %s, max %d %s (block %d)" % (
        name, len(dur), np.median(dur), unit, dur.max(), unit,
        max(calls, key=lambda c: c["total"])["block"]))
    hist, edges = np.histogram(dur, bins=8)
    for n, lo, hi in zip(hist, edges, edges[1:]):
        print("  %9d..%-9d %s" % (lo, hi, "#" * int(40 * n / hist.max())))
    if a.png:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("(no matplotlib: no %s)" % a.png)
            return
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.hist(dur, bins=30)
        ax.set_xlabel("call duration (%s)" % unit)
        ax.set_ylabel("calls")
        ax.set_title("%s: %d calls" % (name, len(dur)))
        fig.tight_layout()
        fig.savefig(a.png, dpi=100)
        print("wrote %s" % a.png)


if __name__ == "__main__":
    main()
