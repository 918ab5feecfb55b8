#!/usr/bin/env python3
"""htr export as the viewers read it, against htr dump --json.

usage: test_viewers.py HTR SOURCE_ROOT BUILD_ROOT [PERFETTO_PROTO]

The chrome export is imported by speedscope's own importer (the npm
package's release bundle, run in node by tests/viewers/speedscope_tree.js)
and the perfetto export decoded by protoc against the schema; the call tree
each viewer shows must be the tree htr dump --json prints, block by block:
the same names (the function alone), the same parent, the same order.  The
perfetto slices are placed the way a viewer that nests by time does (sorted
by start, longer first, a strict stack), and so are chrome's begin/end
pairs: nothing may depend on how a viewer orders equal times.  Inputs: the
shipped sample, a recorded C program with a qsort callback
(tests/record/qsortcb.c) and a recorded C++ program that throws
(tests/record/except.cc).

speedscope is installed with npm into BUILD_ROOT/speedscope when missing
(tools/ci/setup.sh does it ahead); exit 77 only when node or npm is not
there at all.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

htr, src, build = sys.argv[1], sys.argv[2], sys.argv[3]
proto = sys.argv[4] if len(sys.argv) > 4 else None
fails = 0


def check(ok, what):
    global fails
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        fails += 1


def run(*args, ok=(0,), **kw):
    p = subprocess.run(args, capture_output=True, **kw)
    if p.returncode not in ok:
        err = p.stderr if isinstance(p.stderr, str) else \
            p.stderr.decode(errors="replace")
        print("FAIL: %s -> %d: %s" % (" ".join(args), p.returncode, err))
        sys.exit(1)
    return p


node, npm = shutil.which("node"), shutil.which("npm")
if not node or not npm:
    print("SKIP: node or npm is not installed (tools/ci/setup.sh installs "
          "nodejs and npm)")
    sys.exit(77)
ss = os.path.join(build, "speedscope")
if not os.path.exists(os.path.join(ss, "node_modules", "speedscope",
                                   "package.json")):
    os.makedirs(ss, exist_ok=True)
    p = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--silent",
                        "speedscope"], cwd=ss, capture_output=True,
                       text=True)
    if p.returncode:
        print("FAIL: npm install speedscope: %s" % p.stderr.strip()[-500:])
        sys.exit(1)
sstree = os.path.join(src, "tests", "viewers", "speedscope_tree.js")


def tree_of(h):
    """The tree as htr dump --json prints it: preorder [(name, parent's
    position in the list or None)]."""
    plain = json.loads(run(htr, "dump", "--json", h, text=True).stdout)
    names = {b["block"]: b["name"] for b in json.loads(
        run(htr, "dump", "--json", "--tsc", h, text=True).stdout)}
    at, out = {}, []
    for b in plain:
        at[b["block"]] = len(out)
        out.append((names[b["block"]], at.get(b["parent"])))
    return out


def nest_by_time(slices):
    """[(begin, end, name)] placed the way a viewer that nests by time
    does: sorted by begin, longer first; a slice is inside the one on top
    of the stack if it begins after it and ends before it, strictly.
    Returns preorder [(name, parent's position)]."""
    order = sorted(range(len(slices)),
                   key=lambda i: (slices[i][0], -(slices[i][1] -
                                                  slices[i][0])))
    out, stack = [], []
    for i in order:
        b, e, name = slices[i]
        while stack and not (b > stack[-1][0] and e < stack[-1][1]):
            stack.pop()
        out.append((name, stack[-1][2] if stack else None))
        stack.append((b, e, len(out) - 1))
    return out


def compare(what, want, got):
    """Block by block: name and parent.  Returns the number misplaced."""
    bad = [i for i in range(min(len(want), len(got))) if want[i] != got[i]]
    n = len(bad) + abs(len(want) - len(got))
    check(n == 0, "%s: %d calls, the tree's %d; %d named or placed "
          "otherwise%s" % (what, len(got), len(want), n,
                           " (first at %d: %s, the tree's %s)" %
                           (bad[0], got[bad[0]], want[bad[0]])
                           if bad else ""))
    return n


def pair(events):
    """Begin/end events in file order, paired by a stack (as the formats
    define them): [(begin, end, name)], and the problems seen."""
    out, stack, problems = [], [], []
    for ph, ts, name in events:
        if ph == "B":
            stack.append(len(out))
            out.append([ts, None, name])
        elif ph == "E":
            if not stack:
                problems.append("an end without a begin")
                continue
            s = out[stack.pop()]
            if name is not None and name != s[2]:
                problems.append("%s ends %s" % (name, s[2]))
            s[1] = ts
    if stack:
        problems.append("%d never end" % len(stack))
    return [tuple(s) for s in out], problems


def distinct(what, slices):
    ts = [t for b, e, _ in slices for t in (b, e)]
    check(len(set(ts)) == len(ts) and all(b < e for b, e, _ in slices),
          "%s: every begin and end at a time of its own, no block of "
          "length 0 (%d times, %d distinct)" % (what, len(ts), len(set(ts))))


def protoc_text(text):
    """protoc --decode's text format as nested lists of (key, value)."""
    root, stack = [], []
    cur = root
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.endswith("{"):
            new = []
            cur.append((line[:-1].strip(), new))
            stack.append(cur)
            cur = new
        elif line == "}":
            cur = stack.pop()
        else:
            k, v = line.split(":", 1)
            v = v.strip()
            if v.startswith('"'):
                v = json.loads(v)   # protoc's escapes are JSON's for names
            cur.append((k.strip(), v))
    return root


def get(msg, key, default=None):
    v = [x for k, x in msg if k == key]
    return v[-1] if v else default


def perfetto_slices(path):
    dec = run("protoc", "--proto_path=" + os.path.dirname(proto),
              "--decode=perfetto.protos.Trace", proto,
              stdin=open(path, "rb")).stdout.decode()
    names, events = {}, []
    for k, pkt in protoc_text(dec):
        if k != "packet":
            continue
        for en in [x for kk, x in get(pkt, "interned_data", [])
                   if kk == "event_names"]:
            names[int(get(en, "iid"))] = get(en, "name")
        te = get(pkt, "track_event")
        if te is None:
            continue
        typ = get(te, "type")
        ts = int(get(pkt, "timestamp"))
        if typ == "TYPE_SLICE_BEGIN":
            events.append(("B", ts, names[int(get(te, "name_iid"))]))
        elif typ == "TYPE_SLICE_END":
            events.append(("E", ts, None))
    return pair(events)


def chrome_events(path):
    ev = json.load(open(path))["traceEvents"]
    return pair([(e["ph"], e["ts"], e.get("name")) for e in ev
                 if e["ph"] in ("B", "E")])


def speedscope(path):
    p = run(node, sstree, ss, path, text=True)
    out = []
    at = []
    for line in p.stdout.splitlines():
        depth, _, _, name = line.split(" ", 3)
        depth = int(depth)
        del at[depth:]
        out.append((name, at[-1] if at else None))
        at.append(len(out) - 1)
    warns = re.search(r"(\d+) warnings", p.stderr)
    return out, int(warns.group(1)) if warns else -1


def viewers(what, h, d):
    want = tree_of(h)
    cj = os.path.join(d, "c.json")
    run(htr, "export", "--format", "chrome", "-o", cj, h)
    got, warns = speedscope(cj)
    compare("%s: chrome in speedscope" % what, want, got)
    check(warns == 0, "%s: speedscope imports chrome without a warning "
          "(%d)" % (what, warns))
    sl, problems = chrome_events(cj)
    check(not problems, "%s: chrome's begins and ends pair (%s)" %
          (what, "; ".join(problems[:3])))
    distinct("%s: chrome" % what, sl)
    compare("%s: chrome nested by time" % what, want, nest_by_time(sl))
    # --args puts the details on the ends: speedscope still groups.
    run(htr, "export", "--format", "chrome", "--args", "-o", cj, h)
    got, _ = speedscope(cj)
    compare("%s: chrome --args in speedscope" % what, want, got)
    if proto is None or not shutil.which("protoc"):
        print("SKIP: %s: perfetto (no protoc)" % what)
        return
    pf = os.path.join(d, "p.pftrace")
    p = subprocess.run([htr, "export", "--format", "perfetto", "-o", pf, h],
                       capture_output=True, text=True)
    if p.returncode and "without Perfetto support" in p.stderr:
        print("SKIP: %s: perfetto: %s" % (what, p.stderr.strip()))
        return
    check(p.returncode == 0, "%s: perfetto export (%s)" %
          (what, p.stderr.strip()))
    sl, problems = perfetto_slices(pf)
    check(not problems, "%s: perfetto's begins and ends pair (%s)" %
          (what, "; ".join(problems[:3])))
    distinct("%s: perfetto" % what, sl)
    compare("%s: perfetto nested by time" % what, want, nest_by_time(sl))


with tempfile.TemporaryDirectory() as d:
    sample = os.path.join(d, "sample.htr")
    run(htr, "build", "-q", os.path.join(src, "tests/data/sample.pt"),
        "--elf", os.path.join(src, "tests/data/sample.elf"),
        "--cpuid-0x15-eax", "1", "--cpuid-0x15-ebx", "2", "--mtc-freq", "6",
        "--nom-freq", "16", "-o", sample)
    viewers("sample", sample, d)
    progs = (("qsortcb", "cc", "qsortcb.c"), ("except", "c++", "except.cc"))
    if not shutil.which("qemu-x86_64"):
        print("SKIP: recorded programs (qemu-x86_64 is not installed)")
        progs = ()
    for name, cc, file in progs:
        if not shutil.which(cc):
            print("SKIP: %s (no %s)" % (name, cc))
            continue
        exe = os.path.join(d, name)
        run(cc, "-O1", "-o", exe, os.path.join(src, "tests/record", file))
        data = os.path.join(d, name + ".data")
        run(htr, "record", "-q", "-o", data, "--", exe, ok=(0, 1))
        run(htr, "build", "-q", data, "-o", os.path.join(d, name))
        hs = [os.path.join(d, f) for f in os.listdir(d)
              if f.startswith(name + ".") and f.endswith(".htr")]
        check(len(hs) == 1, "%s: one thread recorded" % name)
        viewers(name, hs[0], d)

print("viewers: %s" % ("all checks passed" if not fails else
                       "%d failed" % fails))
sys.exit(1 if fails else 0)
