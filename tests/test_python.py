#!/usr/bin/env python3
"""The Python module htr (python/htrmodule.c) against the htr CLI.

usage: test_python.py HTR HTR_SYNTH
Environment: HTR_PY_DIR, the directory holding the built module;
HTR_PY_SKIP, a reason to skip (the module could not be built): exit 77.

Every figure the module gives is checked against what the CLI prints for
the same file: the block arrays against htr dump --json, top() against
htr top --json, find() against htr find --json, the cursor against
htr insns --bytes, build_perf() against htr build FILE.data, export()
against htr export (byte for byte).  Then the
lifetimes (arrays of a closed file), builds cancelled from their
callback, errors, four threads on one file, and the module without
numpy.
"""
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest

HTR, SYNTH = sys.argv[1], sys.argv[2]
del sys.argv[1:3]
if os.environ.get("HTR_PY_SKIP"):
    print("python: skipped: " + os.environ["HTR_PY_SKIP"])
    sys.exit(77)
sys.path.insert(0, os.environ.get("HTR_PY_DIR", "."))
import htr  # noqa: E402

try:
    import numpy as np
except ImportError:
    np = None
try:
    import pandas as pd
except ImportError:
    pd = None

TIMING = ["--cpuid-0x15-eax", "1", "--cpuid-0x15-ebx", "2",
          "--mtc-freq", "6", "--nom-freq", "16"]
TIMING_KW = dict(cpuid_0x15_eax=1, cpuid_0x15_ebx=2, mtc_freq=6, nom_freq=16)
FLAGS = [(htr.BLOCK_LATE, "late"), (htr.BLOCK_TRUNCATED, "truncated"),
         (htr.BLOCK_GAP, "gap"), (htr.BLOCK_IMPLICIT, "implicit-return"),
         (htr.BLOCK_UNWOUND, "unwound")]


def cli(*args):
    return subprocess.run([HTR] + [str(a) for a in args], check=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True).stdout


def flag_str(v):
    s = ",".join(n for bit, n in FLAGS if v & bit)
    return s or "-"


class Fixture:
    """One synthesized program and trace (the 'real' scenario: late
    start, gaps, untraced library calls, names from the ELF), built by
    the CLI."""
    dir = None

    @classmethod
    def get(cls):
        if cls.dir is None:
            cls.dir = tempfile.mkdtemp(prefix="htr-py.")
            p = os.path.join(cls.dir, "t")
            subprocess.run([SYNTH, "-q", "--no-truth", "--no-bundle",
                            "-S", "real", "-n", "200k", "-f", "40", p],
                           check=True)
            subprocess.run([HTR, "build", p + ".pt", "--elf", p + ".elf",
                            "-o", p + ".htr"] + TIMING, check=True,
                           stderr=subprocess.DEVNULL)
        return cls.dir


def setUpModule():
    Fixture.get()


def tearDownModule():
    if Fixture.dir:
        shutil.rmtree(Fixture.dir, ignore_errors=True)


def path(name):
    return os.path.join(Fixture.dir, name)


class TestTree(unittest.TestCase):
    def setUp(self):
        self.f = htr.open(path("t.htr"))

    def tearDown(self):
        self.f.close()

    def test_columns_equal_dump_json(self):
        dump = json.loads(cli("dump", "--json", path("t.htr")))
        c = self.f.columns()
        self.assertEqual(len(dump), len(self.f))
        seen = set()
        for d in dump:
            i = d["block"]
            seen.add(i)
            self.assertEqual(c["first"][i], d["first"])
            self.assertEqual(c["last"][i], d["last"])
            self.assertEqual(c["level"][i], d["level"])
            self.assertEqual(c["nchildren"][i], d["children"])
            par = c["parent"][i]
            self.assertEqual(None if par == htr.NONE else par, d["parent"])
            ent = None if c["func"][i] == htr.NONE else hex(c["entry"][i])
            self.assertEqual(ent, d["entry"])
            self.assertEqual(flag_str(c["flags"][i]), d["flags"])
        self.assertEqual(len(seen), len(self.f))

    def test_blocks_equal_block_objects(self):
        c = self.f.columns()
        for i in range(0, len(self.f), 97):
            b = self.f.block(i)
            self.assertEqual((b.first, b.last), (c["first"][i], c["last"][i]))
            self.assertEqual(b.nchildren, len(b.children))
            for ch in b.children:
                self.assertEqual(ch.parent, b)
            anc = b.ancestors
            self.assertEqual(len(anc) + 1, b.depth)
            self.assertEqual(c["level"][i], len(anc))
            if anc:
                self.assertEqual(anc[0], b.parent)
                self.assertIsNone(anc[-1].parent)
        roots = self.f.roots()
        self.assertEqual(len(roots), self.f.info["nroots"])
        mid = (c["first"][0] + c["last"][0]) // 2
        b = self.f.block_for_insn(int(mid))
        self.assertTrue(b.first <= mid <= b.last)

    @unittest.skipIf(np is None, "numpy is not installed")
    def test_zero_copy_records(self):
        b = self.f.blocks
        c = self.f.columns()
        self.assertEqual(b.dtype.itemsize, 32)
        self.assertFalse(b.flags.writeable)
        self.assertFalse(b.flags.owndata)
        first = b["first_lo"].astype(np.uint64) | \
            (b["first_hi"].astype(np.uint64) << np.uint64(32))
        last = b["last_lo"].astype(np.uint64) | \
            (b["last_hi"].astype(np.uint64) << np.uint64(16))
        self.assertTrue((first == c["first"]).all())
        self.assertTrue((last == c["last"]).all())
        self.assertTrue((b["parent"] == c["parent"]).all())
        self.assertTrue((b["nchildren"] == c["nchildren"]).all())
        self.assertTrue(((b["func_flags"] >> 24) == c["flags"]).all())
        # Two arrays of the same file share the mapping.
        self.assertTrue(np.shares_memory(b, self.f.blocks))
        self.assertEqual(len(self.f.funcs), self.f.info["nfuncs"])
        tp = self.f.tsc_points
        self.assertEqual(len(tp), self.f.info["ntsc"])
        self.assertEqual(self.f.tsc_at(int(tp["id"][-1])), tp["tsc"][-1])

    def test_top_equals_cli(self):
        for sort in ("local", "inclusive", "calls"):
            want = json.loads(cli("top", "--json", "-n", "0", "--sort",
                                  sort, path("t.htr")))
            self.assertEqual(self.f.top(0, sort=sort), want)
        want = json.loads(cli("top", "--json", "-n", "5", path("t.htr")))
        self.assertEqual(self.f.top(5), want)

    def test_find_equals_cli(self):
        names = [r["name"] for r in self.f.top(0)]
        for pat in [names[0], names[-1], "*token*", "*_1?", "nosuchfunc"]:
            for sort in ("time", "cost"):
                want = json.loads(cli("find", "--json", "--sort", sort, pat,
                                      path("t.htr")))
                self.assertEqual(self.f.find(pat, sort=sort), want,
                                 (pat, sort))
        want = json.loads(cli("find", "--json", "-n", "3", "*", path("t.htr")))
        self.assertEqual(self.f.find("*", limit=3), want)

    def test_names_and_times(self):
        codes, names = self.f.names()
        t = self.f.tsc()
        top = {r["name"]: r for r in self.f.top(0)}
        self.assertEqual(set(names), set(top))
        local, calls = {}, {}
        for i in range(len(self.f)):
            n = names[codes[i]]
            local[n] = local.get(n, 0) + int(t["local"][i])
            calls[n] = calls.get(n, 0) + 1
            self.assertEqual(t["total"][i], t["children"][i] + t["local"][i])
        for n, r in top.items():
            self.assertEqual(local[n], r["local"], n)
            self.assertEqual(calls[n], r["calls"], n)
        b = self.f.block(int(len(self.f) // 2))
        self.assertEqual(b.name, names[codes[b.index]])
        self.assertEqual(b.times["local"], t["local"][b.index])
        self.assertTrue(any(t["total"]), "no times: timing options lost?")

    @unittest.skipIf(np is None, "numpy is not installed")
    def test_numpy_sum_per_function(self):
        codes, names = self.f.names()
        local = self.f.tsc()["local"]
        sums = np.zeros(len(names), dtype=np.uint64)
        np.add.at(sums, codes, local)
        top = {r["name"]: r["local"] for r in self.f.top(0)}
        self.assertEqual({n: int(s) for n, s in zip(names, sums)}, top)

    @unittest.skipIf(pd is None, "pandas is not installed")
    def test_to_pandas(self):
        df = self.f.to_pandas()
        self.assertEqual(len(df), len(self.f))
        g = df.groupby("name", observed=True)["local"].sum()
        top = {r["name"]: r["local"] for r in self.f.top(0)}
        self.assertEqual({k: int(v) for k, v in g.items()}, top)

    def test_cursor_equals_insns(self):
        f = self.f
        t0 = int(f.tsc_points[0][1])
        out = cli("insns", "--bytes", "-n", "0", "--trace", path("t.pt"),
                  path("t.htr")).splitlines()
        want, gaps = [], set()
        for line in out:
            if line.startswith("#"):
                continue
            if line.startswith("-- gap"):
                gaps.add(len(want))
                continue
            w = line.split("  ")
            want.append((int(w[0]), int(w[1], 16), w[3], w[4]))
        got, ggaps = [], set()
        for k, ins in enumerate(f.insns(path("t.pt"))):
            if ins.gap and k:
                ggaps.add(k)
            time = "-" if ins.tsc is None or ins.tsc < t0 else \
                str(ins.tsc - t0)
            got.append((ins.id, ins.ip, time, ins.bytes.hex()))
        self.assertEqual(len(got), f.ninsns)
        self.assertEqual(len(got), len(want))
        for g, w in zip(got, want):     # no 200k-line diff on failure
            self.assertEqual(g, w)
        self.assertEqual(ggaps, gaps)
        # One block's span, and read() in batches.
        b = f.roots()[-1].children[0] if f.roots()[-1].children else \
            f.block(0)
        lines = [ln.split("  ") for ln in
                 cli("insns", "-n", "0", "--block", b.index, "--trace",
                     path("t.pt"), path("t.htr")).splitlines()
                 if not ln.startswith(("#", "--"))]
        ids = [ins.id for ins in f.insns(path("t.pt"), block=b.index)]
        self.assertEqual(ids, [int(w[0]) for w in lines])
        cur = f.insns(path("t.pt"), start=10)
        r = cur.read(1000)
        self.assertEqual(list(r["id"]), list(range(10, 1010)))
        self.assertEqual([int(x) for x in r["ip"]],
                         [w[1] for w in want[10:1010]])

    def test_cursor_errors(self):
        with self.assertRaises(htr.Error) as e:
            self.f.insns(path("t.elf"))
        self.assertEqual(e.exception.code, htr.ERR_FORMAT)
        with self.assertRaises(htr.Error) as e:
            self.f.insns(path("t.pt"), start=self.f.ninsns)
        self.assertEqual(e.exception.code, htr.ERR_RANGE)


class TestLifetimes(unittest.TestCase):
    def test_closed_file_arrays_stay_valid(self):
        f = htr.open(path("t.htr"))
        blocks = f.blocks
        cols = f.columns()
        t = f.tsc()
        b = f.block(3)
        cur = f.insns(path("t.pt"))
        copy = {k: list(v) for k, v in cols.items()}
        if np is not None:
            raw = bytes(blocks.tobytes())
        f.close()
        self.assertTrue(f.closed)
        del f
        gc.collect()
        # The arrays hold the mapping; the File's calls raise.
        if np is not None:
            self.assertEqual(blocks.tobytes(), raw)
            self.assertEqual(int(blocks["parent"][0]), copy["parent"][0])
        self.assertEqual({k: list(v) for k, v in cols.items()}, copy)
        self.assertEqual(len(t["local"]), len(copy["first"]))
        with self.assertRaises(ValueError):
            b.first
        # A cursor taken before keeps decoding.
        self.assertEqual(next(cur).id, 0)
        g = htr.open(path("t.htr"))
        g.close()
        for call in (g.top, g.columns, g.tsc, lambda: g.block(0),
                     lambda: g.blocks, lambda: len(g)):
            with self.assertRaises(ValueError):
                call()

    def test_open_errors(self):
        with self.assertRaises(htr.Error) as e:
            htr.open(path("missing.htr"))
        self.assertEqual(e.exception.code, htr.ERR_IO)
        self.assertIn("missing.htr", str(e.exception))
        with self.assertRaises(htr.Error) as e:
            htr.open(path("t.elf"))
        self.assertEqual(e.exception.code, htr.ERR_FORMAT)
        self.assertEqual(e.exception.errstr, htr.errstr(htr.ERR_FORMAT))
        with self.assertRaises(htr.Error) as e:
            htr.open(b"HTRTREE\0" + bytes(100))
        self.assertIn(e.exception.code, (htr.ERR_CORRUPT, htr.ERR_FORMAT))
        f = htr.open(path("t.htr"))
        with self.assertRaises(IndexError):
            f.block(len(f))
        with self.assertRaises(htr.Error) as e:
            f.block_for_insn(f.ninsns)
        self.assertEqual(e.exception.code, htr.ERR_RANGE)

    def test_open_bytes(self):
        with open(path("t.htr"), "rb") as fp:
            data = fp.read()
        f, g = htr.open(data), htr.open(bytearray(data))
        h = htr.open(path("t.htr"))
        self.assertIsNone(f.path)
        self.assertEqual(f.top(0), h.top(0))
        self.assertEqual(g.find("*token*"), h.find("*token*"))
        self.assertEqual(list(f.columns()["last"]),
                         list(h.columns()["last"]))

    def test_two_opens_share_one_sidecar(self):
        f, g = htr.open(path("t.htr")), htr.open(path("t.htr"))
        self.assertEqual(f.top(3), g.top(3))
        self.assertEqual(f.analysis_info()["sidecar"],
                         g.analysis_info()["sidecar"])
        f.close()
        self.assertEqual(len(g.find("*")), len(g))


class TestBuild(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # Long enough for several progress calls (about every 2^20
        # instructions).
        cls.big = path("big")
        if not os.path.exists(cls.big + ".pt"):
            subprocess.run([SYNTH, "-q", "--no-truth", "--no-bundle",
                            "-n", "3M", cls.big], check=True)

    def leftovers(self, d):
        return [n for n in os.listdir(d) if n.startswith("out.htr")]

    def test_build_equals_cli(self):
        d = tempfile.mkdtemp(dir=Fixture.dir)
        seen = []
        st = htr.build(path("t.pt"), os.path.join(d, "out.htr"),
                       elf=path("t.elf"), progress=seen.append, **TIMING_KW)
        f = htr.open(os.path.join(d, "out.htr"))
        self.assertEqual(st["blocks"], len(f))
        self.assertEqual(cli("dump", "--json", os.path.join(d, "out.htr")),
                         cli("dump", "--json", path("t.htr")))
        self.assertEqual(f.top(0), htr.open(path("t.htr")).top(0))
        # From bytes, the image as (bytes, vaddr) is not the ELF: only
        # that it builds.
        with open(path("t.pt"), "rb") as fp:
            trace = fp.read()
        st2 = htr.build(trace,
                        os.path.join(d, "mem.htr"), elf=[path("t.elf")],
                        threads=2)
        self.assertEqual(st2["insns"], st["insns"])

    def test_cancel_by_exception(self):
        d = tempfile.mkdtemp(dir=Fixture.dir)
        out = os.path.join(d, "out.htr")
        calls = []

        def stop(p):
            calls.append(p)
            if len(calls) == 2:
                raise KeyboardInterrupt

        with self.assertRaises(KeyboardInterrupt):
            htr.build(self.big + ".pt", out, elf=self.big + ".elf",
                      progress=stop)
        self.assertEqual(len(calls), 2)
        self.assertGreater(calls[1].insns, 0)
        self.assertEqual(self.leftovers(d), [])

    def test_cancel_by_false(self):
        d = tempfile.mkdtemp(dir=Fixture.dir)
        out = os.path.join(d, "out.htr")
        with self.assertRaises(htr.Canceled) as e:
            htr.build(self.big + ".pt", out, elf=self.big + ".elf",
                      progress=lambda p: False, threads=2)
        self.assertEqual(e.exception.code, htr.ERR_CANCELED)
        self.assertIsInstance(e.exception, htr.Error)
        self.assertEqual(self.leftovers(d), [])

    def test_build_errors(self):
        d = tempfile.mkdtemp(dir=Fixture.dir)
        with self.assertRaises(htr.Error) as e:
            htr.build(path("missing.pt"), os.path.join(d, "out.htr"),
                      elf=path("t.elf"))
        self.assertEqual(e.exception.code, htr.ERR_IO)
        with self.assertRaises(htr.Error) as e:
            htr.build(path("t.pt"), os.path.join(d, "out.htr"),
                      elf=path("missing.elf"))
        self.assertIn("missing.elf", e.exception.message)
        with self.assertRaises(TypeError):
            htr.build(path("t.pt"), os.path.join(d, "out.htr"), progress=1)
        self.assertEqual(self.leftovers(d), [])


def cli_bytes(*args):
    return subprocess.run([HTR] + [str(a) for a in args], check=True,
                          stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE).stdout


EXPORTS = [({}, []),
           (dict(args=True, gaps=True), ["--args", "--gaps"]),
           (dict(depth=3, min_duration=50), ["--depth", "3",
                                             "--min-duration", "50"]),
           (dict(block=1, ticks=True), ["--block", "1", "--ticks"])]


def export_cases(f, fn, formats=("chrome", "folded", "perfetto")):
    """(what, module's bytes, CLI's bytes) for every format and option
    set, through a path and as bytes."""
    d = tempfile.mkdtemp(dir=os.path.dirname(fn))
    for fmt in formats:
        if fmt == "perfetto" and not htr.has_perfetto:
            continue
        for kw, args in EXPORTS:
            want = cli_bytes("export", "--format", fmt, *args, fn)
            out = os.path.join(d, fmt + ".out")
            f.export(fmt, out, **kw)
            with open(out, "rb") as fp:
                yield (fmt, kw, "path"), fp.read(), want
            yield (fmt, kw, "bytes"), f.export(fmt, **kw), want
    shutil.rmtree(d)


class TestExport(unittest.TestCase):
    def test_equals_cli(self):
        f = htr.open(path("t.htr"))
        n = 0
        for what, got, want in export_cases(f, path("t.htr")):
            self.assertEqual(got, want, what)
            n += 1
        self.assertGreaterEqual(n, 16)

    def test_errors(self):
        f = htr.open(path("t.htr"))
        d = tempfile.mkdtemp(dir=Fixture.dir)
        with self.assertRaises(ValueError):
            f.export("svg")
        with self.assertRaises(ValueError):
            f.export("folded", depth=0)
        with self.assertRaises(IndexError):
            f.export("folded", block=len(f))
        with self.assertRaises(OSError):
            f.export("folded", os.path.join(d, "no", "such"))
        self.assertEqual(os.listdir(d), [])
        f.close()
        with self.assertRaises(ValueError):
            f.export("folded")


MT_C = r"""
#include <pthread.h>
static volatile long sink;
__attribute__((noinline)) static void step(long i) { sink += i; }
static void *work(void *a)
{
	long i;

	for (i = 0; i < 300000; i++)
		step(i);
	return a;
}
int main(void)
{
	pthread_t t;

	pthread_create(&t, 0, work, 0);
	work(0);
	pthread_join(t, 0);
	return 0;
}
"""


class TestBuildPerf(unittest.TestCase):
    """htr.build_perf() against htr build FILE.data: a program of two
    threads (about 2.8M instructions each) recorded by htr record under
    qemu."""
    @classmethod
    def setUpClass(cls):
        missing = [t for t in ("qemu-x86_64", "cc")
                   if shutil.which(t) is None]
        if missing:
            raise unittest.SkipTest("needs " + " and ".join(missing) +
                                    " (Debian: qemu-user, gcc)")
        if "record" not in subprocess.run([HTR, "--help"],
                                          stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT,
                                          text=True).stdout:
            raise unittest.SkipTest("this htr was built without record")
        cls.d = tempfile.mkdtemp(prefix="htr-pyperf.")
        cls.env = dict(os.environ, HOME=cls.d)
        cls.bid = os.path.join(cls.d, ".debug")
        with open(os.path.join(cls.d, "mt.c"), "w") as fp:
            fp.write(MT_C)
        subprocess.run(["cc", "-O1", "-pthread", "-o", "mt", "mt.c"],
                       cwd=cls.d, check=True)
        r = subprocess.run([HTR, "record", "-q", "-o", "mt.data", "--",
                            "./mt"], cwd=cls.d, env=cls.env,
                           stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise unittest.SkipTest("htr record failed: " + r.stderr)
        cls.data = os.path.join(cls.d, "mt.data")
        cls.cli = os.path.join(cls.d, "cli")
        os.mkdir(cls.cli)
        subprocess.run([HTR, "build", cls.data, "-o", cls.cli + "/"],
                       env=cls.env, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.d, ignore_errors=True)

    def test_equals_cli(self):
        out = tempfile.mkdtemp(dir=self.d)
        seen, warned = [], []
        built = htr.build_perf(self.data, output=out + "/",
                               progress=seen.append,
                               warning=lambda k, t: warned.append((k, t)),
                               buildid_dir=self.bid)
        cli_files = sorted(os.listdir(self.cli))
        self.assertEqual(len(built), 2)
        self.assertEqual(sorted(os.path.basename(p) for _, p in built),
                         cli_files)
        self.assertGreater(len(seen), 0)
        for tid, p in built:
            self.assertTrue(p.endswith(".%d.htr" % tid))
            self.assertEqual(htr.open(p).thread["tid"], tid)
            self.assertEqual(
                cli("dump", "--json", p),
                cli("dump", "--json",
                    os.path.join(self.cli, os.path.basename(p))))
        # Exports of a file in ns (perf's clock) equal the CLI's too.
        tf = htr.open(built[0][1])
        for what, got, want in export_cases(tf, built[0][1],
                                            ("chrome", "folded")):
            self.assertEqual(got, want, what)
        # One thread, to a name of its own.
        tid = built[1][0]
        one = os.path.join(out, "one.htr")
        self.assertEqual(htr.build_perf(self.data, output=one, tid=tid,
                                        buildid_dir=self.bid),
                         [(tid, one)])

    def leftovers(self, d):
        return os.listdir(d)

    def test_cancel_leaves_nothing(self):
        # Raised in the second thread's build: the first thread's file,
        # written already, is removed too.
        out = tempfile.mkdtemp(dir=self.d)
        calls = []

        def stop(p):
            calls.append(p)
            if len(calls) > 1 and p.insns < calls[-2].insns:
                raise KeyboardInterrupt

        with self.assertRaises(KeyboardInterrupt):
            htr.build_perf(self.data, output=out + "/", progress=stop,
                           buildid_dir=self.bid)
        self.assertEqual(self.leftovers(out), [])
        with self.assertRaises(htr.Canceled):
            htr.build_perf(self.data, output=out + "/",
                           progress=lambda p: False, buildid_dir=self.bid)
        self.assertEqual(self.leftovers(out), [])

    def test_errors(self):
        out = tempfile.mkdtemp(dir=self.d)
        with self.assertRaises(htr.Error) as e:
            htr.build_perf(os.path.join(self.d, "missing.data"))
        self.assertEqual(e.exception.code, htr.ERR_IO)
        with self.assertRaises(htr.Error) as e:
            htr.build_perf(self.data, output=out + "/", tid=1)
        self.assertEqual(e.exception.code, htr.ERR_NOTFOUND)
        with self.assertRaises(htr.Error) as e:
            htr.build_perf(self.data, output=os.path.join(out, "x%q"))
        self.assertEqual(e.exception.code, htr.ERR_INVALID)
        with self.assertRaises(TypeError):
            htr.build_perf(self.data, progress=1)
        self.assertEqual(self.leftovers(out), [])


class TestThreads(unittest.TestCase):
    def test_four_threads_one_file(self):
        f = htr.open(path("t.htr"))
        want = (f.top(0), f.find("*token*"), list(f.tsc()["local"]),
                list(f.columns()["level"]), f.names()[1],
                [i.ip for i, _ in zip(f.insns(path("t.pt"), start=500),
                                      range(3000))])
        errors, results = [], []
        start = threading.Barrier(4)

        def work():
            try:
                start.wait()
                for _ in range(3):
                    results.append((
                        f.top(0), f.find("*token*"),
                        list(f.tsc()["local"]),
                        list(f.columns()["level"]), f.names()[1],
                        [i.ip for i, _ in zip(f.insns(path("t.pt"),
                                                      start=500),
                                              range(3000))]))
                    b = f.block(len(f) - 1)
                    assert [x.index for x in b.children] and b.name
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        ts = [threading.Thread(target=work) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(len(results), 12)
        for r in results:
            self.assertEqual(r, want)

    def test_cursor_one_thread_at_a_time(self):
        f = htr.open(path("t.htr"))
        cur = f.insns(path("t.pt"))
        errs = []

        def drain():
            try:
                for _ in cur:
                    pass
            except RuntimeError as e:
                errs.append(e)

        ts = [threading.Thread(target=drain) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        # Either a thread found it busy or they took turns: never a crash,
        # and nothing is left.
        self.assertRaises(StopIteration, next, cur)


@unittest.skipIf(np is None, "numpy is not installed")
class TestExample(unittest.TestCase):
    def test_hot_functions(self):
        ex = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                          "..", "examples", "hot_functions.py")
        png = path("calls.png")
        env = dict(os.environ, PYTHONPATH=os.environ.get("HTR_PY_DIR", "."))
        r = subprocess.run([sys.executable, ex, path("t.htr"), "--top", "3",
                            "--png", png], env=env, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.assertEqual(r.returncode, 0, r.stderr)
        top = htr.open(path("t.htr")).top(3)
        for row in top:
            self.assertIn(row["name"][:44], r.stdout)
        self.assertIn("calls, median", r.stdout)
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            return
        with open(png, "rb") as fp:
            self.assertEqual(fp.read(8), b"\x89PNG\r\n\x1a\n")


# An analyzer written in Python: block span lengths (last - first + 1),
# from the zero-copy records.  VERSION multiplies the result so that a
# version bump is visible; COUNTER (a file) gets one byte per compute.
SPAN_SRC = """
import numpy as np
def span_from_blocks(f, version, counter):
    if counter:
        with open(counter, 'a') as fp:
            fp.write('x')
    b = f.blocks
    first = b['first_lo'].astype(np.uint64) | \\
        (b['first_hi'].astype(np.uint64) << np.uint64(32))
    last = b['last_lo'].astype(np.uint64) | \\
        (b['last_hi'].astype(np.uint64) << np.uint64(16))
    return (last - first + np.uint64(1)) * np.uint64(version)
"""
SPAN_SUB = SPAN_SRC + """
import sys
sys.path.insert(0, %r)
import htr
path, version, counter = sys.argv[1], int(sys.argv[2]), sys.argv[3]
htr.register_analyzer('span', version,
                      lambda f: span_from_blocks(f, version, counter))
a = htr.open(path).analysis('span')
print(a.dtype, int(a.sum()), len(a))
"""


@unittest.skipIf(np is None, "numpy is not installed")
class TestAnalyzers(unittest.TestCase):
    """htr.register_analyzer() and f.analysis(): computed once, stored in
    the sidecar, reloaded by another process, recomputed on a version
    bump; a failing compute is an htr.Error and leaves the sidecar
    usable."""
    ns = {}

    @classmethod
    def setUpClass(cls):
        exec(SPAN_SRC, cls.ns)
        cls.dir = tempfile.mkdtemp(prefix="htr-pyan.", dir=Fixture.get())
        cls.htr = os.path.join(cls.dir, "a.htr")
        shutil.copy(path("t.htr"), cls.htr)
        cls.counter = os.path.join(cls.dir, "count")
        span = cls.ns["span_from_blocks"]
        htr.register_analyzer("span", 1,
                              lambda f: span(f, 1, cls.counter))

    def computes(self):
        try:
            with open(self.counter) as fp:
                return len(fp.read())
        except FileNotFoundError:
            return 0

    def expected(self, f):
        c = f.columns()
        return (c["last"] - c["first"] + 1).astype(np.uint64)

    def sub(self, version):
        r = subprocess.run([sys.executable, "-c",
                            SPAN_SUB % os.environ.get("HTR_PY_DIR", "."),
                            self.htr, str(version), self.counter],
                           text=True, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.split()

    def test_1_computed_stored_reloaded_bumped(self):
        f = htr.open(self.htr)
        want = self.expected(f)
        a = f.analysis("span")
        self.assertEqual(a.dtype, np.uint64)
        self.assertTrue(np.array_equal(a, want))
        self.assertEqual(self.computes(), 1)
        self.assertTrue(np.array_equal(f.analysis("span"), want))
        self.assertTrue(np.array_equal(
            htr.open(self.htr).analysis("span"), want))
        self.assertEqual(self.computes(), 1)
        # A fresh process reloads it from the sidecar.
        self.assertEqual(self.sub(1), ["uint64", str(int(want.sum())),
                                       str(len(f))])
        self.assertEqual(self.computes(), 1)
        # A version bump recomputes, once.
        self.assertEqual(self.sub(2), ["uint64", str(2 * int(want.sum())),
                                       str(len(f))])
        self.assertEqual(self.computes(), 2)
        self.assertEqual(self.sub(2)[1], str(2 * int(want.sum())))
        self.assertEqual(self.computes(), 2)
        # This process keeps version 1: one descriptor per name.
        with self.assertRaises(htr.Error) as cm:
            htr.register_analyzer("span", 2, lambda f: None)
        self.assertEqual(cm.exception.code, htr.ERR_INVALID)
        f.close()

    def test_2_float_and_deps(self):
        def half(f):
            s = f.analysis("span")      # a declared dependency
            return s.astype(np.float64) / 2
        htr.register_analyzer("halfspan", 1, half, deps=("span",))
        f = htr.open(self.htr)
        a = f.analysis("halfspan")
        self.assertEqual(a.dtype, np.float64)
        self.assertTrue(np.array_equal(a, self.expected(f) / 2))
        self.assertIn("halfspan", htr.analyzers())
        # In memory (no sidecar) too.
        g = htr.open(self.htr, no_sidecar=True)
        self.assertTrue(np.array_equal(g.analysis("halfspan"), a))

    def test_3_builtins_and_unknown(self):
        f = htr.open(self.htr)
        t, u = f.analysis("tsc"), f.tsc()
        self.assertEqual(sorted(t), ["children", "local", "total"])
        for k in t:
            self.assertTrue(np.array_equal(t[k], u[k]))
        with self.assertRaises(htr.Error) as cm:
            f.analysis("sym")
        self.assertIn("names()", str(cm.exception))
        with self.assertRaises(htr.Error) as cm:
            f.analysis("nosuch")
        self.assertEqual(cm.exception.code, htr.ERR_NOTFOUND)
        self.assertRaises(ValueError, htr.register_analyzer, "tsc", 1, len)
        self.assertRaises(ValueError, htr.register_analyzer, "Bad!", 1,
                          len)
        self.assertRaises(TypeError, htr.register_analyzer, "x", 1, 3)

    def test_4_failures_leave_the_sidecar_usable(self):
        def boom(f):
            raise ValueError("no luck")
        htr.register_analyzer("boom", 1, boom)
        f = htr.open(self.htr)
        with self.assertRaises(htr.Error) as cm:
            f.analysis("boom")
        self.assertEqual(cm.exception.code, htr.ERR_CALLBACK)
        self.assertIn("ValueError: no luck", str(cm.exception))
        self.assertIsInstance(cm.exception.__cause__, ValueError)
        # Wrong results: length, type; reading other analyses.
        for bad in (lambda f: np.zeros(3, np.uint64),
                    lambda f: np.zeros(len(f), np.int32),
                    lambda f: "nope",
                    lambda f: f.tsc()["local"]):
            htr.register_analyzer("boom", 1, bad)
            self.assertRaises(htr.Error, f.analysis, "boom")
        # The store, the sidecar and the other analyses still work.
        before = self.computes()
        self.assertTrue(np.array_equal(f.analysis("span"),
                                       self.expected(f)))
        self.assertEqual(self.computes(), before)
        self.assertEqual(len(f.tsc()["local"]), len(f))
        htr.register_analyzer("boom", 1,
                              lambda f: np.arange(len(f), dtype=np.uint64))
        self.assertTrue(np.array_equal(f.analysis("boom"),
                                       np.arange(len(f))))
        self.assertEqual(cli("top", "--json", "-n", "3", self.htr),
                         cli("top", "--json", "-n", "3", self.htr))
        self.assertEqual(self.sub(2)[0], "uint64")

    def test_5_four_threads_compute_once(self):
        calls = []

        def slow(f):
            calls.append(1)
            return np.full(len(f), 7.0)
        htr.register_analyzer("seven", 1, slow)
        f = htr.open(self.htr)
        out, errs = [], []

        def run():
            try:
                for _ in range(5):
                    out.append(f.analysis("seven"))
                    f.tsc()
            except Exception as e:  # noqa: BLE001
                errs.append(e)
        ts = [threading.Thread(target=run) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(errs, [])
        self.assertEqual(len(calls), 1)
        self.assertEqual(len(out), 20)
        for a in out:
            self.assertTrue(np.array_equal(a, np.full(len(f), 7.0)))


class TestWithoutNumpy(unittest.TestCase):
    def test_sequence_of_blocks(self):
        code = (
            "import sys; sys.modules['numpy'] = None\n"
            "sys.path.insert(0, %r)\n"
            "import htr, json\n"
            "f = htr.open(%r)\n"
            "b = f.blocks\n"
            "assert type(b).__name__ == 'BlockSeq', type(b)\n"
            "c = f.columns()\n"
            "assert isinstance(c['first'], memoryview)\n"
            "assert len(b) == len(f) == len(c['first'])\n"
            "assert [x.first for x in b] == c['first'].tolist()\n"
            "assert b[5].parent == f.block(5).parent\n"
            "print(json.dumps(f.tsc()['local'].tolist()[:50]))\n"
            % (os.environ.get("HTR_PY_DIR", "."), path("t.htr")))
        r = subprocess.run([sys.executable, "-c", code], text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.assertEqual(r.returncode, 0, r.stderr)
        f = htr.open(path("t.htr"))
        self.assertEqual(json.loads(r.stdout),
                         [int(x) for x in f.tsc()["local"][:50]])


if __name__ == "__main__":
    unittest.main(verbosity=2)
