#!/usr/bin/env python3
"""Independent-decoder check of htr-synth's ground truth, using LLDB.

Synthesizes a sample with htr-synth, decodes its LLDB trace bundle
(PREFIX.json) with lldb-22's intel-pt plugin (which is built on libipt) and
compares what LLDB sees with PREFIX.truth.  Python 3 standard library only.

usage: lldb_check.py [-S SCENARIO] [-s SEED] [-n INSNS] [--synth PATH]
                     [--lldb PATH] [--keep DIR] [-v]

Exit status: 0 all checks passed, 1 a check failed (or a tool failed),
77 skipped because lldb-22 is not installed, 2 usage error.

What LLDB produces
------------------
lldb-22 runs in batch mode:

    trace load DIR/t.json
    thread trace dump instructions -f -e -j -a -r -F DIR/items.json
    thread trace dump function-calls -j -F DIR/calls.json

items.json is a flat list of *trace items*, in execution order, with
consecutive "id"s starting at 0.  An item is one of
    {"id":2,"loadAddress":"0x401000"}                    an instruction
    {"id":0,"event":"HW clock tick","hwClock":1048576}   an event
    {"id":1,"event":"trace synchronization point",...}   (a PSB)
    {"id":5002,"event":"software disabled tracing"}      (TIP.PGD, FUP)
    {"id":20081,"error":"reached end of trace stream: 0x..."}
LLDB's item ids therefore are NOT instruction ids: every event and error
takes an id too (a trace normally starts with two events, so the truth's
instruction 0 is LLDB item 2).

calls.json is a list of root calls (trees), in execution order.  A call is
    {"untracedPrefixSegment": {"nestedCall": CALL},      optional
     "tracedSegments": [
        {"firstInstructionId": "2", "lastInstructionId": "8",
         "nestedCall": CALL},                            nestedCall optional
        ...]}
The ids are item ids, as strings.  A traced segment is a run of the call's
own items; when it ends with a call, "nestedCall" is the callee, and the
caller's next segment starts after the callee returned.  A call with an
"untracedPrefixSegment" is one whose start LLDB did not see: LLDB creates
it when a return leaves the outermost call it knows (the frame that was
running when tracing started), and the prefix's "nestedCall" is that
inner call.  Calls carry no function name or address.  LLDB builds the
tree from symbols, not from a call stack: an instruction in the same
function as the previous one continues the current call; otherwise a
call instruction opens a nested call, a return goes to the nearest
enclosing call in the returned-to function (or to a new prefix root), and
anything else (a jump into another function) opens a nested call.

The mapping
-----------
 * item ids -> instruction ids: the i-th instruction item (counting from 0)
   is truth instruction i.  A segment's first/last item is mapped to the
   first instruction item at/after it and the last at/before it; segments
   and calls holding no instruction item at all (LLDB makes such a root
   call for an error item) are dropped and counted as "empty".
 * a call's function is the truth "func" whose [entry, entry+size) holds the
   address of the call's first own instruction.
 * a call's first/last instruction is the first/last instruction of its
   whole subtree, which is what the truth's FIRST/LAST are (FIRST of an L
   block is the first traced instruction under it, LAST of a T block is the
   last traced instruction of the trace).
 * nesting: LLDB's "nestedCall" (in a segment or in the untraced prefix) is
   the truth's PARENT relation; siblings are ordered by first instruction.
 * own segments of a truth block are [FIRST, LAST] minus its children's
   ranges, also cut before every `gap ID` (a gap starts at instruction ID).
 * call and return instructions are recognised from the ELF's bytes (e8,
   ff /2, ff /3 after REX; c3, c2, cb, ca), not from LLDB.

Known, explained differences, normalized before comparing (counted in the
"info: ... normalized:" line; none of them loses or invents instructions):
 (A) Tail calls.  The synthesizer's functions may end in a jmp to another
     function's entry.  The truth keeps the jumped-to code in the jumping
     frame's block; LLDB makes it a nested call.  A nested call not
     preceded by a call instruction is spliced into its parent.
 (B) Direct recursion.  When f returns into f, LLDB sees "same function"
     and keeps the caller's following instructions (and calls) in the
     callee.  A call is cut after any return instruction that is not its
     last instruction, and the rest goes back to its parent (or to a new
     untraced-prefix parent at the root).
 (C) PSB block boundaries.  LLDB decodes each PSB block with its own
     libipt decoder; when the block ends while an instruction still needs
     a packet, it records "reached end of trace stream: IP", starts a new
     call forest, and resumes at the next PSB at that same IP.  When the
     IP equals the next instruction's address ("benign"), the new tree's
     chain of untraced-prefix calls is grafted onto the calls open before
     the error.  Plain libipt reports no error there.
 (D) Abrupt end.  With no TIP.PGD at the end (truth root flagged T), LLDB
     drops the instruction libipt returns together with pts_eos and the
     ones after it that need no trace (libipt itself, and the truth, do
     count them).  The insns check then accepts LLDB's smaller count, says
     so, and the truth is clipped to LLDB's instructions.
 * The outermost frame.  The truth marks main (and, in late_start, every
   frame on the stack when tracing starts) L.  LLDB only knows a frame it
   saw being entered or left: main starting at the first traced
   instruction is an ordinary root call, without prefix, in LLDB.  An L
   block with no own traced instruction (all of its traced instructions
   are in a child that never returned while traced) is invisible to any
   decoder; it is removed from the truth tree and its children promoted.
   The first call of the trace, or after an error, need not start at its
   function's entry.
 * LLDB's instruction "mnemonic" is sometimes "" ("<unknown>" or a bare
   "rex64" in the text dump) and its "controlFlowKind" wrong (e.g. an
   "ff d0" call reported as "other") for well-formed instructions; we run
   with -r and never use either.
 * Timing: LLDB's bundle schema has only cpuInfo, so it cannot carry
   nom_freq, cpuid 0x15 or mtc_freq; timing is not compared.
 * Scenarios gap, overflow and mixed are not supported yet: LLDB does not
   split calls at disabled/overflow gaps, and around an overflow LLDB
   decodes instructions plain libipt and the truth do not have.

Checks, one output line each:
  insns      LLDB's instruction count == the truth's `insns` (or D)
  calls      normalized LLDB call count == visible truth blocks
  functions  (on LLDB's raw tree) every instruction of a segment lies in
             the call's function; calls start at their function's entry
  tree       both call trees agree: function, first, last and nesting
  segments   the own segments of every matched call agree
  prefix     every LLDB call with an untraced prefix is an L block

Anything else is reported as a failure with the truth's instruction ids,
so that the reader can tell a synthesizer bug from an LLDB quirk.
"""

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

MAX_REPORT = 8


class Fail(Exception):
    pass


# ---------------------------------------------------------------- truth

class TBlock:
    def __init__(self, pre, parent, func, first, last, flags):
        self.pre, self.parent, self.func = pre, parent, func
        self.first, self.last, self.flags = first, last, flags
        self.children = []


def parse_truth(path):
    t = {"funcs": [], "blocks": {}, "gaps": [], "insns": None}
    with open(path) as fp:
        for line in fp:
            w = line.split()
            if not w:
                continue
            if w[0] == "func":
                t["funcs"].append((int(w[2], 16), int(w[3]), w[4]))
            elif w[0] == "block":
                flags = "" if w[8] == "-" else w[8]
                b = TBlock(int(w[1]), int(w[2]), int(w[3]), int(w[4]),
                           int(w[5]), flags)
                t["blocks"][b.pre] = b
            elif w[0] == "gap":
                t["gaps"].append((int(w[1]), w[2]))
            elif w[0] in ("insns", "blocks", "gaps"):
                t[w[0] + "_n"] = int(w[1])
            elif w[0] == "base":
                t["base"] = int(w[1], 16)
            elif w[0] == "scenario":
                t["scenario"] = w[1]
    if t.get("insns_n") is None or t.get("blocks_n") != len(t["blocks"]):
        raise Fail("%s: truncated or inconsistent truth" % path)
    t["insns"] = t["insns_n"]
    roots = []
    for b in sorted(t["blocks"].values(), key=lambda b: b.pre):
        if b.parent < 0:
            roots.append(b)
        else:
            t["blocks"][b.parent].children.append(b)
    t["roots"] = roots
    return t


def own_ranges(first, last, children, cuts):
    """[first, last] minus the children's ranges, also cut before each
    id in cuts; children sorted by first."""
    out, cur = [], first
    for c in children:
        if c["first"] > cur:
            out.append([cur, c["first"] - 1])
        cur = max(cur, c["last"] + 1)
    if cur <= last:
        out.append([cur, last])
    res = []
    for lo, hi in out:
        for g in cuts:
            if lo < g <= hi:
                res.append((lo, g - 1))
                lo = g
        res.append((lo, hi))
    return res


def visible_truth(t):
    """Truth tree as nodes like LLDB's, with invisible L frames removed."""
    removed = [0]
    cuts = sorted(g for g, _ in t["gaps"])

    def conv(b):
        kids = []
        for c in sorted(b.children, key=lambda c: (c.first, c.pre)):
            kids.extend(conv(c))
        kids.sort(key=lambda n: n["first"])
        own = own_ranges(b.first, b.last, kids, cuts)
        if not own and "L" in b.flags:
            removed[0] += 1
            return kids
        return [{"func": b.func, "first": b.first, "last": b.last,
                 "segs": own, "kids": kids, "flags": b.flags,
                 "prefix": None, "pre": b.pre}]

    roots = []
    for r in t["roots"]:
        roots.extend(conv(r))
    roots.sort(key=lambda n: n["first"])
    return roots, removed[0]


# ----------------------------------------------------------------- lldb

def run_lldb(lldb, bundle, outdir):
    items_p = os.path.join(outdir, "items.json")
    calls_p = os.path.join(outdir, "calls.json")
    cmd = [lldb, "--batch", "-x",
           "-o", "trace load %s" % bundle,
           "-o", "thread trace dump instructions -f -e -j -a -r -F %s"
           % items_p,
           "-o", "thread trace dump function-calls -j -F %s" % calls_p]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True)
    if p.returncode != 0 or "error:" in p.stdout:
        raise Fail("lldb failed (exit %d):\n%s" % (p.returncode,
                                                    p.stdout.strip()))
    try:
        with open(items_p) as fp:
            items = json.load(fp)
        with open(calls_p) as fp:
            calls = json.load(fp)
    except (OSError, ValueError) as e:
        raise Fail("cannot read lldb output: %s" % e)
    return items, calls


class Image:
    """The PT_LOAD segments of the synthesized ELF, relocated to base."""

    def __init__(self, path, base):
        with open(path, "rb") as fp:
            data = fp.read()
        if data[:4] != b"\x7fELF" or data[4] != 2:
            raise Fail("%s: not an ELF64 file" % path)
        phoff, = struct.unpack_from("<Q", data, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
        loads = []
        for i in range(phnum):
            typ, _, off, vaddr, _, filesz = struct.unpack_from(
                "<IIQQQQ", data, phoff + i * phentsize)
            if typ == 1:
                loads.append((vaddr, data[off:off + filesz]))
        if not loads:
            raise Fail("%s: no PT_LOAD" % path)
        low = min(v for v, _ in loads)
        self.segs = [(base + v - low, b) for v, b in loads]

    def read(self, addr, n):
        for start, b in self.segs:
            if start <= addr < start + len(b):
                return b[addr - start:addr - start + n]
        return b""

    def kind(self, addr):
        b = self.read(addr, 3)
        while b and 0x40 <= b[0] <= 0x4f:      # REX
            b = b[1:] + self.read(addr + 3, 1)
        if not b:
            return "?"
        if b[0] == 0xe8 or (b[0] == 0xff and len(b) > 1 and
                            (b[1] >> 3) & 7 in (2, 3)):
            return "call"
        if b[0] in (0xc3, 0xc2, 0xcb, 0xca):
            return "ret"
        return "other"


class Items:
    """LLDB trace items and the item id -> instruction id mapping."""

    def __init__(self, items):
        n = len(items)
        self.addr, self.kind = [], []  # by instruction id
        self.at_or_after = [0] * (n + 1)
        self.at_or_before = [0] * n    # -1: none
        self.errors, self.events = [], []
        for i, it in enumerate(items):
            if it.get("id") != i:
                raise Fail("lldb item %d has id %r" % (i, it.get("id")))
            self.at_or_after[i] = len(self.addr)
            if "loadAddress" in it:
                self.addr.append(int(it["loadAddress"], 16))
            elif "error" in it:
                self.errors.append((i, len(self.addr), it["error"]))
            else:
                self.events.append((i, len(self.addr), it.get("event")))
            self.at_or_before[i] = len(self.addr) - 1
        self.at_or_after[n] = len(self.addr)

    def span(self, first_item, last_item):
        lo = self.at_or_after[first_item]
        hi = self.at_or_before[last_item]
        return (lo, hi) if lo <= hi else None

    def set_kinds(self, image):
        """Classify each instruction from the ELF's bytes, as LLDB's own
        "controlFlowKind" is unreliable (see the header)."""
        self.kind = [image.kind(a) for a in self.addr]

    def is_call(self, k):
        return self.kind[k] == "call"

    def is_ret(self, k):
        return self.kind[k] == "ret"

    def benign_error(self, err):
        """(C): an error item at a PSB block boundary after which decoding
        resumes at the very address it stopped at, so nothing is lost."""
        _, k, msg = err
        if "end of trace stream" not in msg or k >= len(self.addr):
            return False
        try:
            ip = int(msg.rsplit(":", 1)[1].strip(), 16)
        except (IndexError, ValueError):
            return False
        return ip == self.addr[k]


# LLDB call trees are built as nodes {"prefix": bool, "content": [...]},
# content being ("s", lo, hi) own instruction runs and ("c", node) nested
# calls in execution order; finish() then adds segs, kids, first, last, func.

def lldb_forest(calls, items, stats):
    def conv(c):
        node = {"prefix": False, "content": []}
        if "untracedPrefixSegment" in c:
            node["prefix"] = True
            inner = c["untracedPrefixSegment"].get("nestedCall")
            if inner is not None:
                node["content"].extend(conv(inner))
        for s in c.get("tracedSegments", []):
            sp = items.span(int(s["firstInstructionId"]),
                            int(s["lastInstructionId"]))
            if sp is None:
                stats["empty segments"] += 1
            else:
                node["content"].append(("s",) + sp)
            if "nestedCall" in s:
                node["content"].extend(conv(s["nestedCall"]))
        if not node["content"]:
            stats["empty calls"] += 1
            return []
        return [("c", node)]

    return [it[1] for c in calls for it in conv(c)]


def merge_runs(content):
    out = []
    for it in content:
        if it[0] == "s" and out and out[-1][0] == "s" and \
                out[-1][2] + 1 == it[1]:
            out[-1] = ("s", out[-1][1], it[2])
        else:
            out.append(it)
    return out


def item_first(it):
    return it[1] if it[0] == "s" else item_first(it[1]["content"][0])


def unjump(node, items, stats):
    """(A): LLDB makes a nested call of a jump into another function (a
    tail call); the truth keeps it in the jumping frame.  Splice every
    nested call not preceded by a call instruction into its parent."""
    out, prev_last = [], None
    for it in node["content"]:
        if it[0] == "c":
            unjump(it[1], items, stats)
            if prev_last is not None and not items.is_call(prev_last):
                stats["tail jumps merged (A)"] += 1
                out.extend(it[1]["content"])
                prev_last = last_of(it[1])
                continue
            out.append(it)
            prev_last = last_of(it[1])
        else:
            out.append(it)
            prev_last = it[2]
    node["content"] = merge_runs(out)


def last_of(node):
    it = node["content"][-1]
    return it[2] if it[0] == "s" else last_of(it[1])


def unrecurse(node, items, stats):
    """(B): LLDB takes a return into the same function (direct recursion)
    for a jump inside the callee and keeps the caller's instructions in
    the callee.  Cut each call after its first return instruction that is
    not its last one; what follows is returned, to go to the parent."""
    queue, out = list(node["content"]), []
    while queue:
        it = queue.pop(0)
        if it[0] == "c":
            out.append(it)
            queue = unrecurse(it[1], items, stats) + queue
            continue
        lo, hi = it[1], it[2]
        cut = next((k for k in range(lo, hi + 1) if items.is_ret(k) and
                    (k < hi or queue)), None)
        if cut is None:
            out.append(it)
            continue
        stats["recursive returns fixed (B)"] += 1
        out.append(("s", lo, cut))
        rest = ([("s", cut + 1, hi)] if cut < hi else []) + queue
        node["content"] = merge_runs(out)
        return rest
    node["content"] = merge_runs(out)
    return []


def unrecurse_roots(roots, items, stats):
    out = []
    for r in roots:
        rest = unrecurse(r, items, stats)
        while rest:
            r = {"prefix": True, "content": [("c", r)]}
            r["content"].extend(rest)
            rest = unrecurse(r, items, stats)
        out.append(r)
    return out


def stitch(roots, items, funcof, stats, notes):
    """(C): LLDB starts a new call forest after every error item.  Where
    the error is benign (nothing lost), graft the new tree's chain of
    untraced-prefix calls onto the calls open at the error, innermost to
    innermost; chain calls above the old root become its ancestors.  An
    open call must be in (after a tail jump: have reached) the function
    its partner in the chain starts in."""

    def now_in(o):
        hi = [it[2] for it in o["content"] if it[0] == "s"][-1]
        return funcof(items.addr[hi])

    starts = {e[1] for e in items.errors if items.benign_error(e)}
    out = []
    for r in roots:
        k = item_first(("c", r))
        if not out or k not in starts:
            out.append(r)
            continue
        open_ = [out[-1]]
        while open_[-1]["content"][-1][0] == "c":
            open_.append(open_[-1]["content"][-1][1])
        if items.is_ret(open_[-1]["content"][-1][2]):
            open_.pop()                 # it returned before the error
        chain = [r]
        while chain[-1]["prefix"] and chain[-1]["content"][0][0] == "c":
            chain.append(chain[-1]["content"][0][1])
        d = max(0, len(chain) - len(open_))
        pairs = list(zip(open_[max(0, len(open_) - len(chain)):], chain[d:]))
        if not pairs or any(now_in(o) != c["func"] for o, c in pairs):
            notes.append("cannot stitch lldb's trees at the error before "
                         "insn %d: open calls %s, new chain %s" %
                         (k, [now_in(o) for o in open_],
                          [c["func"] for c in chain]))
            out.append(r)
            continue
        for o, c in pairs:
            rest = c["content"][1:] if c is not chain[-1] else c["content"]
            o["content"] = merge_runs(o["content"] + rest)
        if d:
            chain[d - 1]["content"][0] = ("c", out[-1])
            out[-1] = chain[0]
        stats["error splits stitched (C)"] += 1
    return out


def finish(node, items, funcof):
    node["segs"] = [(it[1], it[2]) for it in node["content"] if it[0] == "s"]
    node["kids"] = [it[1] for it in node["content"] if it[0] == "c"]
    for k in node["kids"]:
        finish(k, items, funcof)
    node["first"] = item_first(("c", node))
    node["last"] = last_of(node)
    node["func"] = (funcof(items.addr[node["segs"][0][0]])
                    if node["segs"] else None)
    return node


def clip_truth(nodes, n):
    """(D): keep what the truth has in instructions 0..n-1."""
    out = []
    for t in nodes:
        if t["first"] >= n:
            continue
        t["last"] = min(t["last"], n - 1)
        t["segs"] = [(lo, min(hi, n - 1)) for lo, hi in t["segs"] if lo < n]
        t["kids"] = clip_truth(t["kids"], n)
        out.append(t)
    return out


# ------------------------------------------------------------- compare

def count(nodes):
    return sum(1 + count(n["kids"]) for n in nodes)


def walk(nodes):
    for n in nodes:
        yield n
        yield from walk(n["kids"])


def fname(t, f):
    return "?" if f is None else "%d:%s" % (f, t["funcs"][f][2])


def desc(t, n, who):
    s = "%s call %s [%d..%d]" % (who, fname(t, n["func"]), n["first"],
                                n["last"])
    if n.get("pre") is not None:
        s += " (block %d%s)" % (n["pre"],
                                " " + n["flags"] if n["flags"] else "")
    return s


def compare(t, lroots, troots, bad):
    """Match both forests; returns the number of matched calls."""
    matched = [0]

    def path_s(path):
        return " > ".join(path) if path else "(root)"

    def cmp_lists(ls, ts, path):
        i = j = 0
        while i < len(ls) or j < len(ts):
            l = ls[i] if i < len(ls) else None
            tr = ts[j] if j < len(ts) else None
            if l is not None and (tr is None or l["first"] < tr["first"]):
                bad["tree"].append("under %s: extra %s" %
                                   (path_s(path), desc(t, l, "lldb")))
                i += 1
            elif tr is not None and (l is None or tr["first"] < l["first"]):
                bad["tree"].append("under %s: missing %s" %
                                   (path_s(path), desc(t, tr, "truth")))
                j += 1
            else:
                cmp_node(l, tr, path)
                i += 1
                j += 1

    def cmp_node(l, tr, path):
        matched[0] += 1
        what = []
        if l["func"] is not None and l["func"] != tr["func"]:
            what.append("function %s vs %s" % (fname(t, l["func"]),
                                               fname(t, tr["func"])))
        if l["last"] != tr["last"]:
            what.append("last %d vs %d" % (l["last"], tr["last"]))
        if what:
            bad["tree"].append("under %s: lldb/truth differ in %s: %s" %
                               (path_s(path), desc(t, tr, "truth"),
                                ", ".join(what)))
        if [tuple(s) for s in l["segs"]] != [tuple(s) for s in tr["segs"]]:
            bad["segments"].append(
                "%s: lldb segments %s, truth %s" %
                (desc(t, tr, "truth"), fmt_segs(l["segs"]),
                 fmt_segs(tr["segs"])))
        if l["prefix"] and "L" not in tr["flags"]:
            bad["prefix"].append("lldb has an untraced prefix for %s" %
                                 desc(t, tr, "truth"))
        cmp_lists(l["kids"], tr["kids"],
                  path + ["%s@%d" % (fname(t, tr["func"]), tr["first"])])

    cmp_lists(lroots, troots, [])
    return matched[0]


def fmt_segs(segs):
    s = " ".join("%d-%d" % tuple(x) for x in segs[:6])
    return "[" + s + (" ..." if len(segs) > 6 else "") + "]"


def check_functions(t, items, roots, funcof, bad):
    """On LLDB's own tree: every instruction of a segment is in the
    function of the segment's call, and a call is entered at the entry of
    its function, unless it has an untraced prefix or is the first call
    after the start of the trace or an error."""
    starts = {0} | {e[1] for e in items.errors}
    for n in walk(roots):
        if n["func"] is None:
            continue
        entry = t["funcs"][n["func"]][0]
        if not n["prefix"] and n["first"] not in starts and \
                items.addr[n["first"]] != entry:
            bad["functions"].append(
                "call starting at insn %d (0x%x) is not at the entry of %s"
                % (n["first"], items.addr[n["first"]], fname(t, n["func"])))
        for lo, hi in n["segs"]:
            for k in range(lo, hi + 1):
                if funcof(items.addr[k]) != n["func"]:
                    bad["functions"].append(
                        "insn %d (0x%x) is in %s's segment %d-%d but "
                        "belongs to %s" % (k, items.addr[k],
                                           fname(t, n["func"]), lo, hi,
                                           fname(t, funcof(items.addr[k]))))
                    break


# ---------------------------------------------------------------- main

def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser(description="Check htr-synth's ground "
                                 "truth against LLDB's intel-pt decoder.")
    ap.add_argument("-S", "--scenario", default="basic")
    ap.add_argument("-s", "--seed", default="1")
    ap.add_argument("-n", "--insns", default="20000")
    ap.add_argument("--synth", default=os.environ.get(
        "HTR_SYNTH", os.path.join(root, "build", "tools", "synth",
                                  "htr-synth")))
    ap.add_argument("--lldb", default=os.environ.get("LLDB", "lldb-22"))
    ap.add_argument("--keep", metavar="DIR",
                    help="work in DIR and keep the files")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="report every difference, not the first %d"
                    % MAX_REPORT)
    a = ap.parse_args()

    lldb = shutil.which(a.lldb)
    if lldb is None:
        print("skipped: lldb-22 not installed")
        return 77
    if not os.access(a.synth, os.X_OK):
        print("lldb oracle: FAIL: no htr-synth at %s (build it first)"
              % a.synth)
        return 1

    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
        work, tmp = a.keep, None
    else:
        tmp = tempfile.TemporaryDirectory(prefix="lldb_check.")
        work = tmp.name
    try:
        return check(a, lldb, work)
    except Fail as e:
        print("lldb oracle: FAIL: %s" % e)
        return 1
    finally:
        if tmp is not None:
            tmp.cleanup()


def check(a, lldb, work):
    prefix = os.path.join(work, "t")
    p = subprocess.run([a.synth, "-q", "-S", a.scenario, "-n", a.insns,
                        "-s", a.seed, prefix], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True)
    if p.returncode != 0:
        raise Fail("htr-synth failed (exit %d): %s" % (p.returncode,
                                                       p.stdout.strip()))
    t = parse_truth(prefix + ".truth")
    raw_items, calls = run_lldb(lldb, prefix + ".json", work)
    items = Items(raw_items)
    items.set_kinds(Image(prefix + ".elf", t["base"]))
    funcs = sorted((e, s, i) for i, (e, s, _) in enumerate(t["funcs"]))

    def funcof(addr):
        for e, s, i in funcs:
            if e <= addr < e + s:
                return i
        return None

    print("sample: scenario %s seed %s insns %s" %
          (a.scenario, a.seed, a.insns))
    ok = True
    n = len(items.addr)
    for e in items.errors:
        i, k, msg = e
        where = ("after insn %d (0x%x)" % (k - 1, items.addr[k - 1])
                 if k else "before the first insn")
        print("info: lldb error item %d %s: %s%s" % (
            i, where, msg, " (benign, C)" if items.benign_error(e) else ""))
    gaps = ", ".join("%s before insn %d" % (kind, g) for g, kind in t["gaps"])
    lev = [e for e in items.events if e[2] not in
           ("HW clock tick", "trace synchronization point")]
    if gaps or lev:
        print("info: truth gaps: %s; lldb events: %s" % (
            gaps or "none", ", ".join("%s before insn %d" % (e[2], e[1])
                                      for e in lev) or "none"))

    # (a) instruction count; (D) LLDB's loss at an abrupt end of trace
    clip = None
    troot_flags = "".join(b.flags for b in t["roots"])
    ends_abruptly = ("T" in troot_flags and
                     not any(e[1] == n for e in items.errors) and
                     not any(e[1] == n and "disabled" in (e[2] or "")
                             for e in items.events))
    if n == t["insns"]:
        print("check insns: ok: lldb decoded %d instructions, truth has %d"
              % (n, t["insns"]))
    elif 0 < n < t["insns"] and ends_abruptly:
        clip = n
        print("check insns: ok: lldb decoded %d instructions, truth has %d:"
              " known difference (D), the trace ends abruptly and lldb drops"
              " the instruction libipt returns with pts_eos and the %d after"
              " it; comparing insns 0..%d only" %
              (n, t["insns"], t["insns"] - n - 1, n - 1))
    else:
        ok = False
        print("check insns: FAIL: lldb decoded %d instructions, truth has %d"
              " (first missing or extra: insn %d)" %
              (n, t["insns"], min(n, t["insns"])))

    # (b) the call trees
    stats = {k: 0 for k in ("empty calls", "empty segments",
                            "tail jumps merged (A)",
                            "recursive returns fixed (B)",
                            "error splits stitched (C)")}
    raw = lldb_forest(calls, items, stats)
    nraw = count([finish(r, items, funcof) for r in raw])
    bad = {"functions": [], "tree": [], "segments": [], "prefix": []}
    check_functions(t, items, raw, funcof, bad)
    for r in raw:
        unjump(r, items, stats)
    roots = unrecurse_roots(raw, items, stats)
    roots = [finish(r, items, funcof) for r in roots]
    notes = []
    roots = stitch(roots, items, funcof, stats, notes)
    roots = [finish(r, items, funcof) for r in roots]
    roots.sort(key=lambda r: r["first"])
    troots, removed = visible_truth(t)
    if clip is not None:
        troots = clip_truth(troots, clip)
    matched = compare(t, roots, troots, bad)

    print("info: lldb reported %d calls; normalized: %s" %
          (nraw, ", ".join("%s %d" % kv for kv in stats.items())))
    for m in notes:
        print("info: " + m)
    nl, nt = count(roots), count(troots)
    good = nl == nt
    ok &= good
    print("check calls: %s: lldb has %d calls after normalization, truth %d"
          " blocks (%d invisible L frames removed)" %
          ("ok" if good else "FAIL", nl, nt, removed))
    limit = None if a.verbose else MAX_REPORT
    for key, what in (("functions", "every lldb segment lies in its call's"
                       " function, calls start at entries"),
                      ("tree", "%d matched calls agree in function, first,"
                       " last and nesting" % matched),
                      ("segments", "own segments of every matched call"
                       " agree"),
                      ("prefix", "untraced prefixes only on L blocks")):
        lst = bad[key]
        ok &= not lst
        print("check %s: %s: %s%s" % (key, "ok" if not lst else "FAIL",
                                      what, "" if not lst else
                                      " (%d differences)" % len(lst)))
        for m in lst[:limit]:
            print("  " + m)
        if limit is not None and len(lst) > limit:
            print("  ... %d more (use -v)" % (len(lst) - limit))
    if ok:
        print("lldb oracle: OK (%d calls compared)" % matched)
        return 0
    print("lldb oracle: FAIL (scenario %s seed %s, %d calls compared; "
          "rerun with --keep DIR -v for the files and every difference)" %
          (a.scenario, a.seed, matched))
    return 1


if __name__ == "__main__":
    sys.exit(main())
