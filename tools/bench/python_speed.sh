#!/bin/sh
# The Python module on a large synthesized build (issue 39's figures):
#  - f.blocks, the numpy array over the mapped block records: time and
#    RSS (no copy: the RSS must not grow by the records' size);
#  - local time summed per function with numpy (np.bincount over
#    f.names() and f.tsc()) against the C analyzers (htr top on a fresh
#    sidecar, which computes them; and htr top reloading them).
# usage: python_speed.sh PYTHON MODULE_DIR HTR HTR_SYNTH [INSNS]
#        (INSNS default 1e8; the synthesized trace is kept in
#        $HTR_BENCH_DIR when set, else in a temporary directory)
set -eu
py=$1 moddir=$2 htr=$3 synth=$4
n=${5:-1e8}
if [ -n "${HTR_BENCH_DIR:-}" ]; then
	dir=$HTR_BENCH_DIR
	mkdir -p "$dir"
else
	dir=$(mktemp -d)
	trap 'rm -rf "$dir"' EXIT
fi
timing="--cpuid-0x15-eax 1 --cpuid-0x15-ebx 2 --mtc-freq 6 --nom-freq 16"
if [ ! -f "$dir/b$n.htr" ]; then
	"$synth" -q --no-truth --no-bundle -n "$n" -f 200 -d 30 "$dir/b$n"
	# shellcheck disable=SC2086
	"$htr" build -q -j2 $timing --elf "$dir/b$n.elf" -o "$dir/b$n.htr" \
		"$dir/b$n.pt"
fi
f=$dir/b$n.htr
now() { date +%s.%N; }
# The C analyzers: htr top computes both (times, then names and the
# per-function table) into a fresh sidecar; then reloads them.
rm -rf "$f.lmdb"
t0=$(now)
"$htr" top -n 5 "$f" >/dev/null
t1=$(now)
"$htr" top -n 5 "$f" >/dev/null
t2=$(now)
cold=$(echo "$t1 - $t0" | bc -l)
warm=$(echo "$t2 - $t1" | bc -l)

PYTHONPATH=$moddir "$py" - "$f" "$cold" "$warm" <<'EOF'
import resource, sys, time
import numpy as np
import htr

path, cold, warm = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])

def rss_kib():
    with open("/proc/self/statm") as s:
        return int(s.read().split()[1]) * resource.getpagesize() // 1024

f = htr.open(path)
r0 = rss_kib()
t = time.perf_counter()
b = f.blocks
t_blocks = time.perf_counter() - t
r1 = rss_kib()
nb = len(b)
print("python-speed: %d blocks, %d insns, records %.1f MiB" % (
    nb, f.ninsns, nb * 32 / 2**20))
print("python-speed: f.blocks (numpy over the mapping): %.3f ms, RSS %+d KiB"
      " (a copy would be %d KiB); owndata=%s writeable=%s" % (
          t_blocks * 1e3, r1 - r0, nb * 32 // 1024, b.flags.owndata,
          b.flags.writeable))

# Pure numpy over the mapped records: instructions per function index.
t = time.perf_counter()
func = b["func_flags"] & np.uint32(0xffffff)
last = b["last_lo"].astype(np.uint64) | (b["last_hi"].astype(np.uint64) << np.uint64(16))
first = b["first_lo"].astype(np.uint64) | (b["first_hi"].astype(np.uint64) << np.uint64(32))
span = np.bincount(func, weights=(last - first + np.uint64(1)))
t_span = time.perf_counter() - t
print("python-speed: spans summed per function index from the records "
      "alone: %.1f ms" % (t_span * 1e3))

t = time.perf_counter()
codes, names = f.names()
t_names = time.perf_counter() - t
t = time.perf_counter()
local = f.tsc()["local"]
t_tsc = time.perf_counter() - t
t = time.perf_counter()
sums = np.bincount(codes, weights=local, minlength=len(names))
t_sum = time.perf_counter() - t
top = f.top(0)
ok = all(int(sums[names.index(r["name"])]) == r["local"] for r in top)
t_np = t_names + t_tsc + t_sum
print("python-speed: per-function local time with numpy: names() %.0f ms + "
      "tsc() %.0f ms + bincount %.1f ms = %.0f ms (%d functions, %s "
      "htr top's figures)" % (t_names * 1e3, t_tsc * 1e3, t_sum * 1e3,
                              t_np * 1e3, len(names),
                              "equal to" if ok else "NOT EQUAL TO"))
print("python-speed: C analyzers (htr top, fresh sidecar): %.0f ms; "
      "htr top reloading: %.0f ms" % (cold * 1e3, warm * 1e3))
print("python-speed: ratios: numpy all-in / C analyzers %.2f; numpy "
      "bincount alone / C analyzers %.3f; numpy all-in / htr top "
      "reloading %.1f" % (t_np / cold, t_sum / cold, t_np / warm))
if not ok:
    sys.exit(1)
EOF
