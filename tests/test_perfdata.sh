#!/bin/sh
# htr build FILE.data: programs of tests/record/ are recorded twice, as a
# perf.data (htr record -o) and as raw traces (htr record --raw), and
# built both ways.  Each thread's tree from the perf.data must equal the
# recorder's ground truth of that thread (record-cmp; the truth names the
# tid), and the trees must be the same both ways (htr dump --json of each
# thread's .htr, matched as a set since tids differ between the runs) for
# one-thread programs; with threads the two runs may be scheduled
# differently, so a difference there is printed, not failed.  perf
# inject's rewrites (its own writer, file and pipe format) must give the
# same trees as the recording they come from; perf script must agree on
# each thread's instructions and times in ns.  CPU-wide recordings
# (htr record --cpus N) must give each thread its truth's tree, and perf
# script's instructions and times.  Then damaged perf.data files: the
# reader on
# every truncation point and 20000 random byte flips in process
# (test_perfdata_check), htr build on a sample of truncations, a wrong
# AUXTRACE size, a missing module, a module under --symfs: one-line errors
# or warnings, the right exit codes, no crash.
#
# usage: test_perfdata.sh HTR CHECK RECORD-CMP [ZPERF]
# exit: 0 all as expected, 1 a failure, 77 skipped (a tool is missing)
set -u
htr=$1
check=$2
cmp=$3
zperf=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/same_htr.sh"
src=$here/record

if ! command -v qemu-x86_64 >/dev/null 2>&1; then
	echo "SKIP: qemu-x86_64 is not installed (Debian package qemu-user)"
	exit 77
fi
if ! command -v cc >/dev/null 2>&1; then
	echo "SKIP: no system C compiler (cc)"
	exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
# htr build looks in ~/.debug (perf's build-id cache), perf reads
# ~/.perfconfig: an empty home keeps the user's out.
mkdir "$work/home"
export HOME="$work/home"
fails=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

cc -O0 -g -o "$work/calls-O0" "$src/calls.c" || fail "cannot compile calls.c"
cc -O2 -g -pthread -o "$work/threads-O2" "$src/threads.c" ||
	fail "cannot compile threads.c"
cc -O0 -g -o "$work/dlopen-O0" "$src/dlopen.c" -ldl ||
	fail "cannot compile dlopen.c"
cc -O0 -g -shared -fPIC -o "$work/libdl-O0.so" "$src/dllib.c" ||
	fail "cannot compile dllib.c"
[ $fails -eq 0 ] || exit 1

# The sorted hashes of the trees of the .htr files given.
trees() {
	for f in "$@"; do
		"$htr" dump --json "$f" | cksum
	done | sort
}

# $1 name, then htr record's options and the program: record both ways,
# build both ways, compare.
same() {
	name=$1
	shift
	d=$work/c.$name
	mkdir "$d"
	if ! "$htr" record -q -o "$d/rec.data" "$@" >/dev/null 2>"$d/err" ||
	   ! "$htr" record -q --raw "$d/raw" "$@" >/dev/null 2>>"$d/err"; then
		fail "$name: record: $(head -1 "$d/err")"
		return
	fi
	if ! "$htr" build -q "$d/rec.data" 2>"$d/build.err"; then
		fail "$name: htr build rec.data: $(head -1 "$d/build.err")"
		return
	fi
	if [ -s "$d/build.err" ]; then
		fail "$name: htr build rec.data warns: $(head -1 "$d/build.err")"
	fi
	for pt in "$d"/raw/t*.pt; do
		t=$(basename "$pt" .pt)
		# shellcheck disable=SC2046
		"$htr" build -q "$pt" $(cat "$d/raw/build.args") \
			-o "$d/raw.$t.htr" 2>>"$d/build.err" ||
			fail "$name: htr build $t.pt: $(tail -1 "$d/build.err")"
	done
	for truth in "$d"/rec.data.t*.truth; do
		tid=$(awk '$1 == "tid" { print $3; exit }' "$truth")
		if [ ! -f "$d/rec.$tid.htr" ]; then
			fail "$name: no rec.$tid.htr for $(basename "$truth")"
		elif ! res=$("$cmp" --tsc "$truth" "$d/rec.$tid.htr" 2>&1); then
			fail "$name: tid $tid against its truth: $res"
		fi
	done
	np=$(ls "$d"/rec.*.htr 2>/dev/null | wc -l)
	nr=$(ls "$d"/raw.t*.htr 2>/dev/null | wc -l)
	if [ "$np" -ne "$nr" ]; then
		fail "$name: $np threads from perf.data, $nr raw"
		return
	fi
	if [ "$(trees "$d"/rec.*.htr)" = "$(trees "$d"/raw.t*.htr)" ]; then
		echo "ok      $name: $np thread(s), each its truth, the same trees both ways"
	elif [ "$np" -gt 1 ]; then
		echo "ok      $name: $np threads, each its truth (the raw run was scheduled differently)"
	else
		fail "$name: the trees differ from the raw recording's"
	fi
}

same calls-O0 -- "$work/calls-O0"
same threads-O2 -- "$work/threads-O2"
same dlopen-O0 -- "$work/dlopen-O0" "$work/libdl-O0.so"
same filter-O0 --filter "$work/calls-O0" -- "$work/calls-O0"
# Linked by lld: the executable segment starts in the page where the
# read-only one ends, one page higher in memory, so two segments hold the
# mapping's first page (Rust programs are linked so); and a library so
# linked, loaded by dlopen (all its segments in the file's first page).
if cc -O0 -g -fuse-ld=lld -o "$work/calls-lld" "$src/calls.c" 2>/dev/null &&
   cc -O0 -g -fuse-ld=lld -o "$work/dlopen-lld" "$src/dlopen.c" -ldl &&
   cc -O0 -g -shared -fPIC -fuse-ld=lld -o "$work/libdl-lld.so" \
	"$src/dllib.c"
then
	same calls-lld -- "$work/calls-lld"
	same dlopen-lld -- "$work/dlopen-lld" "$work/libdl-lld.so"
else
	echo "SKIP    a program linked by lld (no ld.lld: Debian package lld)"
fi

# Against perf script (tests/perf_ns.py): each .htr PREFIX.TID.htr built
# from $1/$2 has the calls and returns perf lists, names its thread as
# perf does, starts when perf's wall clock
# says (htr record writes perf's clock_data), has as many instructions as
# perf decodes for that tid, and gives each block that ended at a return
# perf's time (--ns) at its last instruction.  $3 the .htr prefix, $4 what,
# $5 "insns" to leave times out (--filter).
perf_agree() {
	TZ=UTC perf script -f -i "$1/$2" --itrace=i1i --ns \
		--show-switch-events \
		-F comm,pid,tid,time,tod,flags >"$1/insns.txt" 2>"$work/err" ||
		{ fail "$4: perf script: $(head -1 "$work/err")"; return; }
	for h in "$1/$3".*.htr; do
		tid=$(basename "$h" .htr | sed 's/.*\.//')
		"$htr" dump --tsc --json "$h" >"$1/ns.$tid.json" 2>/dev/null
		"$htr" info "$h" >"$1/info.$tid" 2>&1
		"$htr" dump --json "$h" >"$1/tree.$tid.json" 2>/dev/null
		"$htr" gaps --json "$h" >"$1/gaps.$tid.json" 2>/dev/null
		if res=$(python3 "$here/perf_ns.py" "$1/insns.txt" \
			 "$1/ns.$tid.json" "$tid" "$1/info.$tid" \
			 "$1/tree.$tid.json" "$1/gaps.$tid.json" ${5:-}); then
			echo "ok      $4 tid $tid: perf's thread, $res"
		else
			fail "$4 tid $tid: against perf script: $(echo "$res" | tr '\n' ' ')"
		fi
	done
}

# Erratum SKL014 (htr record --skl014; the perf.data names a Kaby Lake):
# a direct call or jump out of the filtered code disables tracing without
# saying where, and only the filter ranges tell which branch it was: the
# perf.data's filter string, the raw build's --filter (build.args).  Each
# tree must be its truth both ways and perf script (its own workaround)
# must agree; built as for a CPU without the erratum (--cpu 6/60) the
# disables bind late and the tree is not the truth, or this proves nothing.
# With --decoder block, the same file.
if cc -O0 -g -no-pie -o "$work/skl014" "$src/skl014.c"; then
	range=$(nm -S "$work/skl014" | awk '$4 == "work" { a = $1 }
		$4 == "tailer" { t = $1; s = $2 } END { print a, t, s }' |
		{ read -r a t s; printf '0x%x-0x%x' $((0x$a)) $((0x$t + 0x$s)); })
	same skl014 --skl014 --filter "$range" -- "$work/skl014" 12
	d=$work/c.skl014
	# libipt's block decoder follows the code past each exit; what it
	# decodes there is dropped (decode.c): the walk's file.
	"$htr" build -q --decoder block -o "$d/blk" "$d/rec.data" 2>/dev/null
	for f in "$d"/rec.*.htr; do
		same_htr "$f" "$d/blk.${f##*/rec.}" ||
			fail "skl014: --decoder block built another file"
	done
	"$htr" build -q --cpu 6/60 -o "$d/hsw" "$d/rec.data" 2>/dev/null
	if res=$("$cmp" "$d"/rec.data.t0.truth "$d"/hsw.*.htr 2>&1); then
		fail "skl014: the build without the workaround is the truth too"
	else
		echo "ok      skl014: without the workaround: ${res%%|*}"
	fi
	command -v perf >/dev/null 2>&1 &&
		perf_agree "$d" rec.data rec "skl014" insns
	# Filter strings as perf record may store them, placed in the
	# recording's mappings (test_perfdata_check --filters): a file offset
	# at the address nm gives, perf's "tracestop" and commas, another
	# name of the file, a relative one from another directory (perf
	# keeps the name given), a range from before the mapping, an address, a
	# file never mapped; what is not the kernel's syntax, 5 ranges.
	lo=${range%-*} hi=${range#*-}
	set -- $(readelf -lW "$work/skl014" |
		awk '$1 == "LOAD" && / E / { print $2, $3; exit }')
	off=$(printf '0x%x' $((lo - $2 + $1)))
	size=$(printf '0x%x' $((hi - lo)))
	seg=$(printf '0x%x' $(($2)))
	x=$work/skl014
	filt() {
		got=$("$check" --filters "$d/rec.data" "$1" | tr '\n' ' ')
		if [ "$got" = "$2" ]; then
			echo "ok      filter '$1': $got"
		else
			fail "filter '$1': '$got', wanted '$2'"
		fi
	}
	filt "filter $off/$size@$x" "1 $lo $hi unplaced 0 "
	filt "tracestop $off/0x10@$x,filter $off/$size@$work/../${work##*/}/skl014" \
		"2 $lo $(printf '0x%x' $((lo + 16))) 1 $lo $hi unplaced 0 "
	filt "filter $off/$size@./skl014" "1 $lo $hi unplaced 0 "
	filt "filter 0/$off@$x" "1 $seg $lo unplaced 0 "
	filt "filter $lo/$size" "1 $lo $hi unplaced 0 "
	filt "filter $off/$size@/nonexistent" "unplaced 1 "
	filt "filter work @ $x" "error $d/rec.data: cannot read the address filter 'filter work @ $x' "
	# htr build on a filter string it cannot read: one warning naming
	# the file, the build goes on (without the ranges).
	"$check" --rename "$d/rec.data" "$d/bad.data" "filter $off/$size@$x" \
		"filter work @ x" &&
		"$htr" build -o "$d/bad" "$d/bad.data" >/dev/null 2>"$d/bad.err"
	st=$?
	if [ $st -eq 0 ] && [ "$(grep -c warning "$d/bad.err")" -eq 1 ] &&
	   grep -q "warning: $d/bad.data: cannot read the address filter 'filter work @ x'" "$d/bad.err"; then
		echo "ok      skl014: a filter string it cannot read: $(grep warning "$d/bad.err" | cut -c1-100)..."
	else
		fail "skl014: bad filter string: exit $st, '$(head -1 "$d/bad.err")'"
	fi
	filt "filter 1/1 filter 2/1 filter 3/1 filter 4/1 stop 5/1" \
		"error $d/rec.data: more than 4 address filter ranges in 'filter 1/1 filter 2/1 filter 3/1 filter 4/1 stop 5/1' "
else
	fail "cannot compile skl014.c"
fi

# CPU-wide recordings (htr record --cpus N: per-CPU buffers and
# context-switch records, threads migrating): each thread's tree equals
# its truth (record-cmp: instructions, blocks, gaps; the truth's times are
# the thread's own clock model, not the CPU stream's, so record-cmp only
# counts where they differ) and perf script agrees on the instructions
# and times of every thread.
cpuwide() {
	name=$1 ncpu=$2
	shift 2
	d=$work/w.$name.$ncpu
	mkdir "$d"
	if ! "$htr" record -q --cpus "$ncpu" -o "$d/cw.data" "$@" \
		>/dev/null 2>"$d/err"; then
		fail "$name --cpus $ncpu: record: $(head -1 "$d/err")"
		return
	fi
	if ! "$htr" build -q "$d/cw.data" 2>"$d/build.err" ||
	   [ -s "$d/build.err" ]; then
		fail "$name --cpus $ncpu: htr build: $(head -1 "$d/build.err")"
		return
	fi
	n=0
	for truth in "$d"/cw.data.t*.truth; do
		tid=$(awk '$1 == "tid" { print $3; exit }' "$truth")
		n=$((n + 1))
		if ! res=$("$cmp" "$truth" "$d/cw.$tid.htr" 2>&1); then
			fail "$name --cpus $ncpu: tid $tid against its truth: $res"
			return
		fi
	done
	echo "ok      $name --cpus $ncpu: $n thread(s), each its truth"
	# The walk, the default, against libipt's block decoder.
	mkdir "$d/blk"
	if ! "$htr" build -q --decoder block -o "$d/blk/cw" "$d/cw.data" \
		2>"$d/build.err"; then
		fail "$name --cpus $ncpu: --decoder block: $(head -1 "$d/build.err")"
		return
	fi
	for f in "$d"/cw.*.htr; do
		same_htr "$f" "$d/blk/${f##*/}" ||
			fail "$name --cpus $ncpu: ${f##*/}: --decoder block built another file"
	done
	if command -v perf >/dev/null 2>&1; then
		case "$*" in
		*--filter*) perf_agree "$d" cw.data cw "$name --cpus $ncpu" insns ;;
		*) perf_agree "$d" cw.data cw "$name --cpus $ncpu" ;;
		esac
	fi
}

cc -O2 -g -pthread -o "$work/workers-O2" "$src/workers.c" ||
	fail "cannot compile workers.c"
cpuwide threads-O2 1 -- "$work/threads-O2"
cpuwide threads-O2 2 -- "$work/threads-O2"
cpuwide workers-O2 2 -- "$work/workers-O2"
cpuwide workers-O2 3 -- "$work/workers-O2"
cpuwide filter-O0 2 --filter "$work/calls-O0" -- "$work/calls-O0"

# htr insns --trace on a perf.data it cannot re-decode: one line naming
# the file and why, exit 1.  A CPU-wide recording (a thread's trace is
# pieces of per-CPU streams), and another recording's perf.data.
refused() {
	want=$1
	shift
	"$htr" insns "$@" >/dev/null 2>"$work/err"
	st=$?
	if [ $st -eq 1 ] && [ "$(wc -l <"$work/err")" -eq 1 ] &&
	   grep -q "$want" "$work/err"; then
		echo "ok      htr insns refuses: $(cat "$work/err")"
	else
		fail "htr insns $*: exit $st, '$(head -2 "$work/err")'" \
			"(wanted '$want')"
	fi
}
h=$(ls "$work"/w.threads-O2.2/cw.*.htr | head -1)
refused "cw.data: a CPU-wide perf.data" \
	--trace "$work/w.threads-O2.2/cw.data" "$h"
h=$(ls "$work"/c.calls-O0/rec.*.htr | head -1)
refused "rec.data: no trace of thread" \
	--trace "$work/c.threads-O2/rec.data" "$h"

# htr insns --trace FILE.data (the cursor over a per-thread perf.data):
# each thread's instructions, re-decoded from its trace inside the
# perf.data, are the ones perf script decodes for that tid (its Nth
# instruction sample is ID N), all of them from the start and 100 after a
# seek into the middle.  $1/rec.data, $1/rec.*.htr; $2 what.
insns_agree() {
	perf script -f -i "$1/rec.data" --itrace=i1i -F tid,ip \
		>"$1/ips.txt" 2>"$work/err" ||
		{ fail "$2: perf script: $(head -1 "$work/err")"; return; }
	for h in "$1"/rec.*.htr; do
		tid=$(basename "$h" .htr | sed 's/^rec\.//')
		awk -v t="$tid" '$1 == t { print n++, $2 }' "$1/ips.txt" \
			>"$1/ips.$tid"
		n=$(wc -l <"$1/ips.$tid")
		mid=$((n / 2))
		sed -n "$((mid + 1)),$((mid + 100))p" "$1/ips.$tid" \
			>"$1/want.$tid"
		if ! "$htr" insns --trace "$1/rec.data" -n 0 "$h" \
			>"$1/insns.$tid" 2>"$work/err" ||
		   ! "$htr" insns --trace "$1/rec.data" --from "$mid" -n 100 \
			"$h" >"$1/seek.$tid" 2>>"$work/err"; then
			fail "$2 tid $tid: htr insns: $(head -1 "$work/err")"
			continue
		fi
		# ID and address of each instruction (not the gap lines)
		for f in insns seek; do
			awk '!/^(--|#)/ { sub(/^0x/, "", $2); print $1, $2 }' \
				"$1/$f.$tid" >"$1/$f.$tid.ids"
		done
		if cmp -s "$1/insns.$tid.ids" "$1/ips.$tid" &&
		   cmp -s "$1/seek.$tid.ids" "$1/want.$tid"; then
			echo "ok      $2 tid $tid: htr insns --trace FILE.data:" \
				"perf's $n instructions, and 100 from ID $mid"
		else
			fail "$2 tid $tid: htr insns --trace FILE.data differs" \
				"from perf script's instructions"
		fi
	done
}

if command -v perf >/dev/null 2>&1; then
	for c in calls-O0 threads-O2; do
		perf_agree "$work/c.$c" rec.data rec "$c"
	done
	# skl014: the cursor decodes with libipt's block decoder, which
	# follows the SKL014 exits out of the filter; it must drop that code
	# where the build (the walk) saw tracing stop.
	for c in calls-O0 threads-O2 skl014; do
		[ -d "$work/c.$c" ] && insns_agree "$work/c.$c" "$c"
	done
	# The chrome export of a perf.data build: on the thread's track,
	# named as perf names it, each block starting no earlier than its
	# start_ns (from the first time point, in microseconds; times between
	# time points are interpolated by instruction ID) and strictly inside
	# its parent.
	d=$work/c.calls-O0
	h=$(ls "$d"/rec.*.htr | head -1)
	tid=$(basename "$h" .htr | sed 's/^rec\.//')
	if "$htr" export --format chrome --args -o "$d/chrome.json" "$h" 2>"$work/err" &&
	   res=$(python3 - "$d/chrome.json" "$d/ns.$tid.json" "$d/insns.txt" \
		 "$tid" <<'PY'
import json, sys
from decimal import Decimal
chrome, dump, insns, tid = sys.argv[1:5]
comm = pid = None
for line in open(insns):
    f = line.split()
    if len(f) >= 3 and f[1].split('/')[-1] == tid:
        comm, pid = f[0], int(f[1].split('/')[0])
        break
ev = json.load(open(chrome), parse_float=Decimal)['traceEvents']
meta = [e for e in ev if e['ph'] == 'M']
assert meta and meta[0]['args']['name'] == comm, meta
xs, open_ = {}, []
for e in ev:
    if e['ph'] == 'B':
        open_.append(e)
    elif e['ph'] == 'E':
        b = open_.pop()
        assert b['name'] == e['name'], (b, e)
        xs[e['args']['block']] = dict(b, dur=e['ts'] - b['ts'], args=e['args'])
blocks = {b['block']: b for b in json.load(open(dump))}
assert all(e['pid'] == pid and e['tid'] == int(tid) for e in xs.values())
t0 = min(b['start_ns'] for b in blocks.values() if b['start_ns'] is not None)
ns = lambda v: int(Decimal(v) * 1000)
for k, e in xs.items():
    b = blocks[k]
    if 'late' not in b['flags'] and b['start_ns'] is not None:
        assert ns(e['ts']) >= b['start_ns'] - t0, (k, e['ts'], b)
    p = xs.get(e['args']['parent'])
    if p:
        assert ns(p['ts']) < ns(e['ts']) and \
            ns(e['ts']) + ns(e['dur']) < ns(p['ts']) + ns(p['dur']), (k, e, p)
print('%d events' % len(xs))
PY
	   ); then
		echo "ok      chrome export of tid $tid: perf's thread, start times in ns, nested: $res"
	else
		fail "chrome export of tid $tid: $(head -1 "$work/err") $res"
	fi
else
	echo "SKIP    times in ns against perf script (perf is not installed)"
fi

# perf's own writer: `perf inject` rewrites a recording in the file format
# and in the pipe format (skipped without perf).
if command -v perf >/dev/null 2>&1; then
	# DIR PREFIX: DIR/PREFIX.data and its trees DIR/PREFIX.*.htr (the
	# last a CPU-wide recording).
	for spec in "c.calls-O0 rec" "c.threads-O2 rec" "w.workers-O2.2 cw"; do
		c=${spec% *} p=${spec#* }
		d=$work/$c
		[ -f "$d/$p.data" ] || continue
		for kind in file pipe; do
			if [ $kind = file ]; then
				perf inject -f -i "$d/$p.data" \
					-o "$d/$kind.data" 2>"$work/err"
			else
				perf inject -f -i "$d/$p.data" \
					-o - >"$d/$kind.data" 2>"$work/err"
			fi || { fail "$c: perf inject ($kind): $(head -1 "$work/err")"; continue; }
			if ! "$htr" build -q "$d/$kind.data" 2>"$work/err"; then
				fail "$c: htr build of perf's $kind format: $(head -1 "$work/err")"
			elif [ "$(trees "$d"/$kind.*.htr)" = "$(trees "$d"/$p.*.htr)" ]; then
				echo "ok      $c: perf inject's $kind format, the same trees"
			else
				fail "$c: perf inject's $kind format: the trees differ"
			fi
		done
	done
else
	echo "SKIP    perf inject (perf is not installed)"
fi

# perf record -z's layout (tests/zperf.c: the kernel's records in zstd
# frames of 100 and 4096 bytes, cut anywhere, so records straddle
# COMPRESSED records; AUXTRACE plain, as perf writes them): perf script
# must read it as it reads the plain file (the same instructions, times
# and side band, as sets: where perf flushes its queue of ordered events
# depends on the records it decompressed, and lines of one time may come
# in another order), and htr build must give the same trees.
if [ -z "$zperf" ]; then
	echo "SKIP    compressed perf.data (htr was built without libzstd)"
elif command -v perf >/dev/null 2>&1; then
	for spec in "c.calls-O0 rec" "c.threads-O2 rec" "w.workers-O2.2 cw"; do
		c=${spec% *} p=${spec#* }
		d=$work/$c
		for piece in 100 4096; do
			z=$d/z$piece
			if ! "$zperf" "$d/$p.data" "$z.data" $piece \
				2>"$work/err"; then
				fail "$c: zperf: $(head -1 "$work/err")"
				continue
			fi
			for f in "$d/$p" "$z"; do
				{ perf script -f -i "$f.data" --itrace=i1i \
					-F tid,ip,time --ns &&
				  perf script -f -i "$f.data" --no-itrace \
					--show-mmap-events --show-task-events \
					--show-switch-events; } 2>&1 | sort | cksum
			done >"$z.perf"
			what="$c: -z layout, ${piece}-byte frames"
			if [ "$(sort -u "$z.perf" | wc -l)" -ne 1 ]; then
				fail "$what: perf script reads it otherwise"
			elif ! "$htr" build -q "$z.data" 2>"$work/err"; then
				fail "$what: htr build: $(head -1 "$work/err")"
			elif [ "$(trees "$z".*.htr)" = "$(trees "$d/$p".*.htr)" ]
			then
				echo "ok      $what: perf script reads it alike," \
					"the same trees"
			else
				fail "$what: the trees differ"
			fi
		done
	done
fi

# A thread's trace in several AUXTRACE buffers (perf writes one per
# buffer-full): the first buffer split in two gives the same tree.
d=$work/c.calls-O0
if "$check" --split "$d/rec.data" "$d/split.data" &&
   "$htr" build -q "$d/split.data" 2>"$work/err" &&
   [ "$(trees "$d"/split.*.htr)" = "$(trees "$d"/rec.*.htr)" ]; then
	echo "ok      a trace split over two AUXTRACE records: the same tree"
else
	fail "split AUXTRACE: $(head -2 "$work/err")"
fi

# Names carry their module when several ran (MODULE!fib): a pattern
# without one finds them by the function's name, as many as the tree has
# (htr dump --tsc names every block); one with another module finds none.
f=$(ls "$work"/c.calls-O0/rec.*.htr 2>/dev/null | head -1)
if [ -n "$f" ]; then
	full=$("$htr" find fib "$f" | awk '!/^#/ { print $2; exit }')
	want=$("$htr" dump --tsc "$f" | awk -v n="$full" '$1 == n' | wc -l)
	got=$("$htr" find fib "$f" | grep -vc '^#')
	exact=$("$htr" find "$full" "$f" | grep -vc '^#')
	glob=$("$htr" find 'f?b' "$f" | grep -vc '^#')
	none=$("$htr" find 'x!fib' "$f" 2>/dev/null | grep -vc '^#')
	case $full in
	*!fib) ok=1 ;;
	*) ok=0 ;;
	esac
	if [ "$ok" = 1 ] && [ "$want" -gt 0 ] && [ "$got" = "$want" ] &&
	   [ "$exact" = "$want" ] && [ "$glob" = "$want" ] && [ "$none" = 0 ]; then
		echo "ok      find fib, f?b and $full: the tree's $want $full blocks; x!fib none"
	else
		fail "find by bare name: $full: tree $want, fib $got, exact $exact, f?b $glob, x!fib $none"
	fi
fi

# A CPU-wide recording: --tid builds one thread; without switch records
# the threads cannot be told apart: one line, exit 1, no file.
d=$work/w.workers-O2.2
if [ -f "$d/cw.data" ]; then
	tid=$(ls "$d"/cw.*.htr | tail -1 | sed 's/.*cw\.\([0-9]*\)\.htr/\1/')
	mkdir "$work/cwtid"
	if "$htr" build -q --tid "$tid" -o "$work/cwtid/x" "$d/cw.data" &&
	   [ "$(ls "$work/cwtid")" = "x.$tid.htr" ] &&
	   [ "$("$htr" dump --json "$work/cwtid/x.$tid.htr" | cksum)" = \
	     "$("$htr" dump --json "$d/cw.$tid.htr" | cksum)" ]; then
		echo "ok      CPU-wide --tid $tid: one file, the same tree"
	else
		fail "CPU-wide --tid $tid: $(ls "$work/cwtid" | tr '\n' ' ')"
	fi
	# A CPU's trace in two AUXTRACE buffers (joined in a mapped
	# temporary file, as a long recording's thousands are).
	mkdir "$work/cwsplit"
	if "$check" --split "$d/cw.data" "$work/cwsplit.data" &&
	   "$htr" build -q -o "$work/cwsplit/s" "$work/cwsplit.data" \
		2>"$work/err" &&
	   [ "$(trees "$work/cwsplit"/s.*.htr)" = "$(trees "$d"/cw.*.htr)" ]; then
		echo "ok      CPU-wide, a CPU's trace split over two AUXTRACE records: the same trees"
	else
		fail "CPU-wide split AUXTRACE: $(head -2 "$work/err")"
	fi
	"$check" --no-switches "$d/cw.data" "$work/nosw.data" &&
	"$htr" build -q -o "$work/cwtid/n" "$work/nosw.data" 2>"$work/err"
	rc=$?
	if [ $rc -eq 1 ] && [ "$(wc -l <"$work/err")" -eq 1 ] &&
	   grep -q 'context-switch' "$work/err" &&
	   [ -z "$(ls "$work/cwtid" | grep '^n')" ]; then
		echo "ok      CPU-wide without switch records: $(cat "$work/err")"
	else
		fail "CPU-wide without switch records: exit $rc: $(head -2 "$work/err")"
	fi
fi

# --tid: only that thread.
d=$work/c.threads-O2
tid=$(ls "$d"/rec.*.htr | head -1 | sed 's/.*rec\.\([0-9]*\)\.htr/\1/')
mkdir "$work/tid"
if "$htr" build -q --tid "$tid" -o "$work/tid/x" "$d/rec.data" &&
   [ "$(ls "$work/tid")" = "x.$tid.htr" ]; then
	echo "ok      --tid $tid: one file"
else
	fail "--tid $tid: $(ls "$work/tid" | tr '\n' ' ')"
fi
"$htr" build -q --tid 1 -o "$work/tid/y" "$d/rec.data" 2>"$work/err"
rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <"$work/err")" -eq 1 ] &&
	echo "ok      --tid of no thread: $(cat "$work/err")" ||
	fail "--tid 1: exit $rc, $(cat "$work/err")"

# -o on a perf.data (issue 36): each case in a fresh directory (holding
# an empty dir/), run there; exactly the files expected, no others.
# $1 what, $2 the exit status, $3 the files (sorted, space-separated; "-"
# none), then htr build's arguments.
on=0
oname() {
	what=$1 code=$2 want=$3
	shift 3
	on=$((on + 1))
	od=$work/o$on
	mkdir -p "$od/dir"
	(cd "$od" && "$htr" build -q "$@" >/dev/null 2>"$work/o$on.err")
	rc=$?
	got=$(cd "$od" && find . -type f | sed 's|^\./||' | sort | tr '\n' ' ')
	got=${got% }
	[ -n "$got" ] || got=-
	if [ $rc -ne "$code" ]; then
		fail "-o $what: exit $rc, not $code: $(head -2 "$work/o$on.err")"
	elif [ "$got" != "$want" ]; then
		fail "-o $what: wrote '$got', not '$want'"
	elif [ "$code" -ne 0 ] && [ "$(wc -l <"$work/o$on.err")" -ne 1 ]; then
		fail "-o $what: not one line: $(cat "$work/o$on.err")"
	else
		echo "ok      -o $what: ${got}$([ "$code" -eq 0 ] ||
			echo "; $(cat "$work/o$on.err")")"
	fi
}
# "$1TID$2" for each thread of threads-O2, sorted as oname() lists.
each() {
	for t in $otids; do
		echo "$1$t$2"
	done | sort | tr '\n' ' ' | sed 's/ $//'
}
d=$work/c.threads-O2
otids=$(ls "$d"/rec.*.htr | sed 's/.*rec\.\([0-9]*\)\.htr/\1/')
otid=$(echo "$otids" | head -1)
opid=$("$htr" info "$d/rec.$otid.htr" | sed -n 's/^thread:.*(pid \([0-9]*\).*/\1/p')
one=$work/c.calls-O0/rec.data
if [ "$(echo "$otids" | wc -l)" -lt 2 ] || [ -z "$opid" ]; then
	fail "-o: threads-O2 built $(echo "$otids" | wc -l) thread(s), pid '$opid'"
else
	oname "foo.htr, one thread" 0 foo.htr "$one" -o foo.htr
	oname "foo.htr, --tid" 0 foo.htr "$d/rec.data" --tid "$otid" -o foo.htr
	oname "foo.htr, several threads" 0 "$(each foo. .htr)" "$d/rec.data" -o foo.htr
	oname "dir/" 0 "$(each dir/rec. .htr)" "$d/rec.data" -o dir/
	oname "dir (a directory)" 0 "$(each dir/rec. .htr)" "$d/rec.data" -o dir
	oname "dir/, one thread" 0 "$(ls "$work/c.calls-O0"/rec.*.htr |
		sed 's|.*/|dir/|')" "$one" -o dir/
	oname "dir/%p-%t-100%%.htr" 0 "$(each "dir/$opid-" -100%.htr)" \
		"$d/rec.data" -o 'dir/%p-%t-100%%.htr'
	oname "%p.htr, one thread" 0 "$opid.htr" "$d/rec.data" --tid "$otid" \
		-o '%p.htr'
	oname "prefix" 0 "$(each pre. .htr)" "$d/rec.data" -o pre
	oname "%p.htr, several threads" 2 - "$d/rec.data" -o '%p.htr'
	oname "%x.htr" 2 - "$d/rec.data" -o '%x.htr'
	oname "nodir/" 1 - "$d/rec.data" -o nodir/
	# CPU-wide: the threads the file names, with their pattern.
	cw=$work/w.threads-O2.2
	oname "cpu-wide dir/%t.htr" 0 "$(ls "$cw"/cw.*.htr |
		sed 's|.*/cw\.|dir/|' | sort | tr '\n' ' ' | sed 's/ $//')" \
		"$cw/cw.data" -o 'dir/%t.htr'
fi

# The reader in process: every truncation point, random flips (of the
# pipe format too, when perf made one).
data=$work/c.calls-O0/rec.data
# ... and of a small CPU-wide recording (/bin/true on 2 CPUs: every
# truncation of a big one takes minutes under ASan).
"$htr" record -q --cpus 2 -o "$work/true-cw.data" -- /bin/true >/dev/null 2>&1 ||
	fail "htr record --cpus 2 /bin/true"
# ... and of its -z layout (zstd frames cut anywhere).
[ -n "$zperf" ] &&
	"$zperf" "$work/true-cw.data" "$work/true-cw-z.data" 100
for f in "$data" "$work/c.calls-O0/pipe.data" "$work/true-cw.data" \
	"$work/true-cw-z.data"; do
	[ -f "$f" ] || continue
	if "$check" "$f" >"$work/check.out"; then
		echo "ok      reader, $(basename "$f"): $(tr '\n' ' ' <"$work/check.out")"
	else
		fail "reader, $(basename "$f"): $(grep FAIL "$work/check.out" | head -3)"
	fi
done

# $1 what, $2 expected exit status (a case pattern: 0|1 takes either),
# $3 file, then options: the build must exit so, every stderr line one message of htr build, no output on
# failure.
damaged() {
	what=$1 want=$2 f=$3
	shift 3
	rm -rf "$work/out"
	mkdir "$work/out"
	"$htr" build -q -o "$work/out/o" "$@" "$f" >/dev/null 2>"$work/err"
	rc=$?
	case "|$want|" in
	*"|$rc|"*) ;;
	*)	fail "$what: exit $rc (want $want): $(head -2 "$work/err")"
		return 1 ;;
	esac
	if grep -qv '^htr: build: ' "$work/err"; then
		fail "$what: stray output: $(grep -v '^htr: build: ' "$work/err" | head -2)"
		return 1
	fi
	if [ $rc -ne 0 ] && [ "$(wc -l <"$work/err")" -ne 1 ]; then
		fail "$what: $(wc -l <"$work/err") error lines"
		return 1
	fi
	if [ $rc -ne 0 ] && [ -n "$(ls "$work/out")" ]; then
		fail "$what: output left: $(ls "$work/out")"
		return 1
	fi
	return 0
}

# htr build on truncations: a sample through the header, the attrs, the
# sideband, the trace and the features (under 8 bytes there is no magic:
# the file is taken for a raw trace), of a per-thread and of a CPU-wide
# recording.
for f in "$data" "$work/w.threads-O2.2/cw.data"; do
	[ -f "$f" ] || continue
	size=$(stat -c %s "$f")
	n=0 bad=0
	for cut in 8 15 16 103 104 $(seq 105 37 "$size"); do
		[ "$cut" -lt "$size" ] || continue
		head -c "$cut" "$f" >"$work/cut.data"
		# a cut in a feature the reader skips still reads: 0 or 1
		"$htr" build -q -o "$work/cutout" "$work/cut.data" >/dev/null \
			2>"$work/err"
		rc=$?
		n=$((n + 1))
		if [ $rc -gt 1 ] || grep -qv '^htr: build: ' "$work/err" ||
		   { [ $rc -eq 1 ] && [ "$(wc -l <"$work/err")" -ne 1 ]; }; then
			bad=$((bad + 1))
			[ $bad -le 3 ] && fail "$(basename "$f") cut at $cut: exit $rc: $(head -2 "$work/err")"
		fi
		rm -f "$work"/cutout*
	done
	[ $bad -eq 0 ] && echo "ok      htr build on $n truncated copies of $(basename "$f")"
done

# A wrong AUXTRACE size: past the end (an error), and 8 bytes too many (the
# next record is misread: an error or a build with gaps, never a crash).
"$check" --bad-auxtrace "$data" "$work/huge.data" 0x100000000 &&
	damaged "AUXTRACE size past the end" 1 "$work/huge.data" &&
	echo "ok      AUXTRACE size past the end: $(cat "$work/err")"
"$check" --bad-auxtrace "$data" "$work/plus8.data" 8 &&
	damaged "AUXTRACE size + 8" "0|1" "$work/plus8.data" &&
	echo "ok      AUXTRACE size + 8: exit $rc $(head -1 "$work/err")"
"$check" --bad-auxtrace "$data" "$work/minus8.data" -8 &&
	damaged "AUXTRACE size - 8" "0|1" "$work/minus8.data" &&
	echo "ok      AUXTRACE size - 8: exit $rc $(head -1 "$work/err")"
printf 'PERFILE2 and then nothing of the kind, not even a header' \
	>"$work/junk.data"
damaged "garbage after the magic" 1 "$work/junk.data" &&
	echo "ok      garbage after the magic: $(cat "$work/err")"

# A missing module: the dlopen'ed library is gone; a warning naming it,
# the build goes on (its code is a gap).
mkdir "$work/miss"
cp "$work/libdl-O0.so" "$work/miss/libgone.so"
if "$htr" record -q -o "$work/miss/m.data" -- "$work/dlopen-O0" \
	"$work/miss/libgone.so" >/dev/null 2>"$work/err"; then
	rm "$work/miss/libgone.so"
	if damaged "missing module" 0 "$work/miss/m.data" &&
	   grep -q "warning: .*libgone.so not found" "$work/err" &&
	   [ "$(grep -c libgone.so "$work/err")" -eq 1 ]; then
		echo "ok      missing module: $(grep libgone "$work/err")"
	else
		fail "missing module: $(cat "$work/err")"
	fi
	# --symfs: the modules under a directory (a copy of the tree).
	mkdir -p "$work/symfs$work/miss"
	cp "$work/libdl-O0.so" "$work/symfs$work/miss/libgone.so"
	for f in "$work/dlopen-O0" $(sed -n 's/^module \([^ ]*\) .*/\1/p' \
		"$work/c.dlopen-O0/raw/record.txt"); do
		mkdir -p "$work/symfs$(dirname "$f")"
		cp "$f" "$work/symfs$f" 2>/dev/null
	done
	if damaged "--symfs" 0 "$work/miss/m.data" --symfs "$work/symfs" &&
	   [ ! -s "$work/err" ]; then
		echo "ok      --symfs: every module found"
	else
		fail "--symfs: $(head -2 "$work/err")"
	fi
else
	fail "record for the missing module: $(head -1 "$work/err")"
fi

# A build-id mismatch: the library is rebuilt after the recording (another
# build-id); a warning naming it, its code is a gap.  Then perf's build-id
# cache (--buildid-dir, the ~/.debug layout) holds the recorded one: no
# warning, and the tree is the truth's again.
mkdir "$work/bid"
cp "$work/libdl-O0.so" "$work/bid/libbid.so"
if "$htr" record -q -o "$work/bid/b.data" -- "$work/dlopen-O0" \
	"$work/bid/libbid.so" >/dev/null 2>"$work/err"; then
	id=$(readelf -n "$work/bid/libbid.so" 2>/dev/null |
		sed -n 's/.*Build ID: *//p')
	mv "$work/bid/libbid.so" "$work/bid/orig.so"
	cc -O2 -g -shared -fPIC -o "$work/bid/libbid.so" "$src/dllib.c"
	if damaged "build-id mismatch" 0 "$work/bid/b.data" &&
	   grep -q "warning: .*libbid.so: its build-id is not the recorded $id" \
		"$work/err" && [ "$(wc -l <"$work/err")" -ge 1 ]; then
		echo "ok      build-id mismatch: $(grep libbid "$work/err")"
	else
		fail "build-id mismatch: $(cat "$work/err")"
	fi
	if [ -n "$id" ]; then
		c=$work/cache/.build-id/$(echo "$id" | cut -c1-2)/$(echo "$id" | cut -c3-)
		mkdir -p "$c"
		cp "$work/bid/orig.so" "$c/elf"
		tid=$(awk '$1 == "tid" { print $3; exit }' "$work/bid/b.data.t0.truth")
		if damaged "--buildid-dir" 0 "$work/bid/b.data" \
			--buildid-dir "$work/cache" && [ ! -s "$work/err" ] &&
		   res=$("$cmp" --tsc "$work/bid/b.data.t0.truth" "$work/out/o.$tid.htr" 2>&1); then
			echo "ok      --buildid-dir: the cached module, the truth's tree"
		else
			fail "--buildid-dir: $(head -2 "$work/err") $res"
		fi
		# The vDSO has no file: perf record copies it to the cache as
		# .build-id/XX/REST/vdso.  The library plays it here, its
		# path made [vdso] in the recording.
		mv "$c/elf" "$c/vdso"
		if "$check" --rename "$work/bid/b.data" "$work/bid/v.data" \
			"$work/bid/libbid.so" "[vdso]" &&
		   damaged "[vdso]" 0 "$work/bid/v.data" \
			--buildid-dir "$work/cache" && [ ! -s "$work/err" ] &&
		   res=$("$cmp" --tsc "$work/bid/b.data.t0.truth" "$work/out/o.$tid.htr" 2>&1); then
			echo "ok      [vdso]: its code from the cache, the truth's tree"
		else
			fail "[vdso]: $(head -2 "$work/err") $res"
		fi
		rm -rf "$work/cache"
		if damaged "[vdso] not cached" 0 "$work/bid/v.data" \
			--buildid-dir "$work/cache" &&
		   grep -q "warning: .*\[vdso\]: no file to read its code from (not in the build-id cache)" "$work/err"; then
			echo "ok      [vdso] not cached: $(cat "$work/err")"
		else
			fail "[vdso] not cached: $(cat "$work/err")"
		fi
	fi
else
	fail "record for the build-id mismatch: $(head -1 "$work/err")"
fi

# A [vdso] not in the build-id cache: htr build takes its own vDSO when
# the build-id is the recorded one.  The recording here runs a copy of
# this machine's vDSO, mapped from a file and called (its getcpu), its
# path then made [vdso] in the perf.data: built with an empty cache, the
# tree is the truth's; with one byte of the copy's build-id changed, the
# vDSO is another one and its code becomes decode gaps, with a warning.
mkdir "$work/vd"
if ! python3 -c '
import re, sys
m = re.search(r"^([0-9a-f]+)-([0-9a-f]+) .*\[vdso\]$",
              open("/proc/self/maps").read(), re.M)
a, b = int(m.group(1), 16), int(m.group(2), 16)
with open("/proc/self/mem", "rb") as f:
    f.seek(a)
    sys.stdout.buffer.write(f.read(b - a))' >"$work/vd/vdso.so" 2>"$work/err" ||
   ! off=$(nm -D "$work/vd/vdso.so" | awk '$3 ~ /^__vdso_getcpu@/ { print "0x" $1 }') ||
   [ -z "$off" ]; then
	echo "SKIP: own vDSO: no vDSO with a getcpu to copy here"
elif ! cc -O0 -o "$work/vd/vdsocall" "$src/vdsocall.c" ||
   ! "$htr" record -q -o "$work/vd/v.data" -- "$work/vd/vdsocall" \
	"$work/vd/vdso.so" "$off" >/dev/null 2>"$work/err"; then
	# (a vDSO patched for an instruction qemu lacks, say)
	echo "SKIP: own vDSO: the copy does not run under qemu: $(head -1 "$work/err")"
elif ! "$check" --rename "$work/vd/v.data" "$work/vd/w.data" \
	"$work/vd/vdso.so" "[vdso]"; then
	fail "own vDSO: cannot rename the copy [vdso]"
else
	tid=$(awk '$1 == "tid" { print $3; exit }' "$work/vd/v.data.t0.truth")
	if damaged "own vDSO" 0 "$work/vd/w.data" --buildid-dir "$work/vd" &&
	   [ ! -s "$work/err" ] &&
	   res=$("$cmp" --tsc "$work/vd/v.data.t0.truth" "$work/out/o.$tid.htr" 2>&1) &&
	   "$htr" top --limit 1000 "$work/out/o.$tid.htr" |
		grep -q "\[vdso\]+$(printf '0x%x' "$off")\$"; then
		echo "ok      own vDSO: the running kernel's, the truth's tree"
	else
		fail "own vDSO: $(head -2 "$work/err") $res"
	fi
	id=$(readelf -n "$work/vd/vdso.so" | sed -n 's/.*Build ID: *//p')
	python3 -c '
import sys
d = bytearray(open(sys.argv[1], "rb").read())
at = d.find(bytes.fromhex(sys.argv[2]))
d[at] ^= 1
open(sys.argv[3], "wb").write(d)' "$work/vd/vdso.so" "$id" "$work/vd/vdso2.so"
	if "$htr" record -q -o "$work/vd/v2.data" -- "$work/vd/vdsocall" \
		"$work/vd/vdso2.so" "$off" >/dev/null 2>"$work/err" &&
	   "$check" --rename "$work/vd/v2.data" "$work/vd/w2.data" \
		"$work/vd/vdso2.so" "[vdso]" &&
	   damaged "another vDSO" 0 "$work/vd/w2.data" --buildid-dir "$work/vd" &&
	   grep -q "warning: .*\[vdso\]: no file to read its code from (not in the build-id cache)" "$work/err"; then
		echo "ok      another vDSO: $(cat "$work/err")"
	else
		fail "another vDSO: $(cat "$work/err")"
	fi
fi

if [ $fails -ne 0 ]; then
	echo "$fails failure(s)"
	exit 1
fi
echo "all ok"
