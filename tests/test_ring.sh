#!/bin/sh
# htr record --ring (bounded recording), its snapshots and heartbeat, and
# htr build of snapshot-mode perf.data (perf record -S's layout, written by
# htr record --perf-snapshot) against perf script's decode of the same
# files.  tests/record/hang.c does some work and then hangs in
# spin_forever(), reached by work() -> wait_ready().
#
#  1. a spinning hang, ring 1M: the ring's files, sampled every 0.1 s,
#     never hold more than 1 MiB, nor more than 8 truth segments (one per
#     trace segment); SIGTERM stops it and writes the window, whose tree
#     is the recorder's truth of that window (OUT.t0.truth, record-cmp);
#  2. a hang that waits (sleeps in its loop), ring 512K, heartbeat every
#     second: SIGUSR1 writes OUT.snapshot.1.data while it runs, whose tree
#     ends inside spin_forever() under wait_ready() (the same blocks end
#     at the trace's last instruction) and is the truth of its window, as
#     the last window's is; the heartbeat lines come a second apart and
#     stop with the recorder; disk never above the ring plus the
#     snapshot;
#  2b. finite runs whose ring wraps (40K, PSB every 512 bytes): hang.c's
#     window starts inside round_of_work(), so work(), main() and libc's
#     caller are late blocks adopted by returns (the truth says so, the
#     tree agrees); tests/record/threads.c: every thread's window tree is
#     its truth; a snapshot every 100000 instructions of hang.c: each
#     snapshot's tree is the truth of its window;
#  2c. --no-truth: a spinning hang, ring 1M, a snapshot, SIGTERM: no
#     file named truth beside OUT or in the temporary directory in any
#     sample (1. finds its segments there with the truth), the trace
#     bounded as with it, each window's tree as many instructions as
#     perf script decodes; 2b's run with snapshots again: each snapshot
#     so, and the last window (deterministic, unlike the snapshots'
#     timing) the same perf.data size and tree as with the truth; plain
#     and --raw runs the same (--raw: the same tN.pt bytes, tN.truth
#     missing), --cpus with no truth;
#  3. snapshot-mode files with 1, 3 (apart: trace lost between them) and
#     10 (overlapping) snapshots: htr build warns of nothing, perf script
#     reads them, and each tree has as many instructions as perf decodes
#     in its time span (a tree per run of snapshots that continue each
#     other: 3 trees for the 3 apart, 1 for the 10 overlapping), the
#     whole as many as perf.
#
# usage: test_ring.sh HTR RECORD-CMP
# exit: 0 ok, 1 a failure, 77 skipped (qemu-user or cc missing)
set -u
htr=$1
cmp=$2
here=$(cd "$(dirname "$0")" && pwd)

. "$here/recorded.sh"
recorded qemu-x86_64 cc
work=$T
pids=""
# recorded's trap, and the recordings this script leaves running
trap 'for p in $pids; do kill -9 "$p" 2>/dev/null; done; rm -rf "$T"' \
	EXIT INT TERM
oks=0
ok() {
	echo "ok      $*"
	oks=$((oks + 1))
}

cc -O1 -g -o "$work/hang" "$here/record/hang.c" || exit 1
cc -O1 -g -pthread -o "$work/threads" "$here/record/threads.c" || exit 1

# $1: a perf.data htr record --ring wrote (OUT or OUT.snapshot.N.data),
# $2: a name.  Every thread's tree against the truth of the window
# beside it (FILE.tN.truth).  Prints the last comparison on success.
against_truth() {
	f=$1 name=$2
	"$htr" build -q "$f" 2>"$work/$name.build" ||
		{ fail "$name: build: $(cat "$work/$name.build")"; return 1; }
	n=0
	for truth in "$f".t*.truth; do
		if [ ! -f "$truth" ]; then
			fail "$name: no truth beside $(basename "$f")"
			return 1
		fi
		tid=$(awk '$1 == "tid" { print $3; exit }' "$truth")
		if ! res=$("$cmp" --tsc "$truth" "${f%.data}.$tid.htr" 2>&1)
		then
			fail "$name: $(basename "$truth") (tid $tid): $res"
			return 1
		fi
		n=$((n + 1))
	done
	ok "$name: $n thread(s), each tree the truth of its window ($res)"
}

# ---------------------------------------------------------------- usage
for bad in "--ring 1M --raw $work/r" "--ring 1M --cpus 2" "--ring 0" \
	"--ring 12Q" "--snapshot-on USR1" "--perf-snapshot" \
	"--ring 1M --snapshot-on KILL"; do
	# shellcheck disable=SC2086
	"$htr" record $bad -- "$work/hang" 1 done >/dev/null 2>"$work/err"
	if [ $? -ne 2 ] || [ "$(wc -l <"$work/err")" -ne 1 ]; then
		fail "record $bad: want a usage error, got: $(cat "$work/err")"
	fi
done
"$htr" record --ring 20K -o "$work/small.data" -- "$work/hang" 1 done \
	2>"$work/err"
grep -q "too small for --psb-period" "$work/err" ||
	fail "--ring 20K: $(cat "$work/err")"
"$htr" record --help | grep -q -- "--ring SIZE" &&
	"$htr" record --help | grep -q -- "--snapshot-on SIGNAL" &&
	"$htr" record --help | grep -q -- "--no-truth  " ||
	fail "record --help does not document --ring, --snapshot-on and --no-truth"

# Bytes in the ring's files (the temporary directory beside OUT), and
# those plus the snapshots written beside OUT.
ring_bytes() {
	cat "$1".rec-*/t*.pt.* 2>/dev/null | wc -c
}

# $1: OUT, $2: pid of htr record, $3: file to append samples to: trace
# bytes in the ring, bytes of the snapshots, truth segments (files) and
# their bytes.  Samples until the recorder exits.
sample() {
	while kill -0 "$2" 2>/dev/null; do
		r=$(ring_bytes "$1")
		s=$(cat "$1".snapshot.*.data 2>/dev/null | wc -c)
		tn=$(ls "$1".rec-*/ 2>/dev/null | grep -c '^t0\.truth\.[0-9]*$')
		tb=$(cat "$1".rec-*/t*.truth.[0-9]* 2>/dev/null | wc -c)
		echo "$r $s $tn $tb" >>"$3"
		sleep 0.1
	done
}

# ---------------------------------------------------------------- 1. spin
out=$work/spin.data
"$htr" record --ring 1M --heartbeat 0 -o "$out" -- "$work/hang" 50 \
	>/dev/null 2>"$work/spin.err" &
rp=$!
pids="$pids $rp"
(sleep 4; kill -TERM "$rp" 2>/dev/null) &
sample "$out" "$rp" "$work/spin.samples"
wait "$rp"
rc=$?
max=$(awk 'BEGIN { m = 0 } $1 > m { m = $1 } END { print m }' \
	"$work/spin.samples")
n=$(wc -l <"$work/spin.samples")
if [ "$rc" -ne 0 ] || ! grep -q "stopped by signal 15" "$work/spin.err"; then
	fail "spin: record --ring: exit $rc, $(cat "$work/spin.err")"
elif [ "$max" -gt 1048576 ] || [ "$max" -lt 500000 ] || [ "$n" -lt 10 ]; then
	fail "spin: ring files held up to $max bytes ($n samples; want <= 1048576, and the ring filled)"
else
	ok "spin: $n samples of the ring's files, at most $max bytes (ring 1048576)"
fi
tmax=$(awk 'BEGIN { m = 0 } $3 > m { m = $3 } END { print m }' \
	"$work/spin.samples")
tbytes=$(awk 'BEGIN { m = 0 } $4 > m { m = $4 } END { print m }' \
	"$work/spin.samples")
if [ "$tmax" -gt 8 ] || [ "$tmax" -lt 1 ]; then
	fail "spin: $tmax truth segments at once (want 1 to 8, as the trace's)"
else
	ok "spin: at most $tmax truth segments, $tbytes bytes"
fi
if "$htr" build -q "$out" -o "$work/spin.htr" 2>"$work/spin.build" &&
   "$htr" find spin_forever "$work/spin.htr" | grep -q 'spin_forever'; then
	ok "spin: the last window's tree is inside spin_forever"
else
	fail "spin: build or find: $(cat "$work/spin.build")"
fi
against_truth "$out" "spin (SIGTERM)"
ls "$work" | grep -q 'rec-' && fail "spin: a temporary directory was left"

# ---------------------------------------------------------------- 2. wait
out=$work/wait.data
ring=524288
"$htr" record --ring 512K --heartbeat 1 -o "$out" -- "$work/hang" 150 sleep \
	>/dev/null 2>"$work/wait.err" &
rp=$!
pids="$pids $rp"
(
	sleep 3.5
	kill -USR1 "$rp"
	i=0
	while [ ! -f "$out.snapshot.1.data" ] && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	sleep 1.2
	kill -TERM "$rp"
) &
sample "$out" "$rp" "$work/wait.samples"
wait "$rp"
rc=$?
snap=$out.snapshot.1.data
ssize=$(wc -c <"$snap" 2>/dev/null || echo 0)
max=$(awk 'BEGIN { m = 0 } $1 + $2 > m { m = $1 + $2 } END { print m }' \
	"$work/wait.samples")
if [ "$rc" -ne 0 ] || [ ! -s "$snap" ] || [ ! -s "$out" ]; then
	fail "wait: exit $rc, snapshot $ssize bytes: $(cat "$work/wait.err")"
elif [ "$max" -gt $((ring + ssize)) ]; then
	fail "wait: the ring and snapshot held $max bytes (ring $ring + snapshot $ssize)"
else
	ok "wait: at most $max bytes on disk (ring $ring + snapshot $ssize)"
fi
# The snapshot's tree ends in the hang: spin_forever's and wait_ready's
# blocks end at the trace's last instruction, spin_forever inside.
if "$htr" build -q "$snap" -o "$work/snap.htr" 2>"$work/snap.build"; then
	last=$("$htr" info "$work/snap.htr" |
		awk '$1 == "instructions:" { print $2 - 1 }')
	"$htr" find spin_forever "$work/snap.htr" | grep -v '^#' >"$work/sf"
	"$htr" find wait_ready "$work/snap.htr" | grep -v '^#' >"$work/wr"
	sf=$(awk -v l="$last" '{ split($3, r, /\.\./) } r[2] == l { print r[1] }' \
		"$work/sf")
	wr=$(awk -v l="$last" '{ split($3, r, /\.\./) } r[2] == l { print r[1] }' \
		"$work/wr")
	if [ -n "$sf" ] && [ -n "$wr" ] && [ "$wr" -lt "$sf" ] &&
	   "$htr" top --limit 1000 "$work/snap.htr" | grep -q "hang!spin_forever" &&
	   "$htr" dump --tsc "$work/snap.htr" | grep -q 'hang!wait_ready'; then
		ok "wait: the snapshot's tree ends in spin_forever (from $sf) under wait_ready (from $wr), instruction $last"
	else
		fail "wait: the snapshot's tree does not end in spin_forever under wait_ready: last $last, $(cat "$work/sf" "$work/wr")"
	fi
else
	fail "wait: build of the snapshot: $(cat "$work/snap.build")"
fi
against_truth "$snap" "wait: snapshot 1"
against_truth "$out" "wait (SIGTERM)"
# Heartbeat: one line a second while it ran, none after the summary.
awk '/heartbeat:/ { t = $4; if (n++) d[n] = t - p; p = t }
	END {
		bad = 0
		for (i = 2; i <= n; i++) if (d[i] < 0.5 || d[i] > 2.5) bad++
		print n, bad
	}' "$work/wait.err" >"$work/hb"
read -r nhb badhb <"$work/hb"
after=$(awk '/^htr: record: .* -> .*: [0-9]+ insns run/ { s = 1; next }
	s && /heartbeat/' "$work/wait.err" |
	wc -l)
if [ "$nhb" -lt 3 ] || [ "$badhb" -ne 0 ] || [ "$after" -ne 0 ] ||
   ! grep -q "snapshot 1 -> $snap" "$work/wait.err"; then
	fail "wait: heartbeat: $nhb lines, $badhb off pace, $after after the end: $(cat "$work/wait.err")"
else
	ok "wait: $nhb heartbeat lines a second apart, none after the end"
fi

# ---------------------------------------------------------------- 2b. wrap
out=$work/wrap.data
"$htr" record -q --ring 40K --psb-period 512 -o "$out" -- "$work/hang" 60 \
	done >/dev/null 2>"$work/wrap.err" ||
	fail "wrap: record: $(cat "$work/wrap.err")"
against_truth "$out" "wrap: hang.c"
# The window starts in round_of_work(): work, main and the libc function
# that called main were entered before it, and are blocks (late) once
# the frame above returns into them; main's caller is still open at the
# end (its exit call).
hfun() {
	nm "$work/hang" | awk -v f="$1" '$3 == f { print $1 }' |
		sed 's/^0*//'
}
late=$(awk -v w="$(hfun work)" -v m="$(hfun main)" '
	$1 == "func" { split($5, a, /[+]0x/); e[$2] = a[1] "/" a[2] }
	$1 == "block" && $5 == 0 && $9 ~ /L/ { n++
		if (e[$4] == "hang/" w) wk = 1
		if (e[$4] == "hang/" m) mn = 1 }
	END { print n + 0, wk + 0, mn + 0 }' "$out.t0.truth")
set -- $late
if [ "$1" -lt 4 ] || [ "$2" != 1 ] || [ "$3" != 1 ]; then
	fail "wrap: the window's truth lacks the late frames (late blocks $1, work $2, main $3)"
else
	ok "wrap: $1 late blocks in the window's truth, work and main among them"
fi
out=$work/thr.data
"$htr" record -q --ring 40K --psb-period 512 -o "$out" -- "$work/threads" \
	>/dev/null 2>"$work/thr.err" ||
	fail "threads: record: $(cat "$work/thr.err")"
against_truth "$out" "wrap: threads.c"
out=$work/every.data
"$htr" record -q --ring 40K --psb-period 512 --snapshot-every 100000 \
	-o "$out" -- "$work/hang" 30 done >/dev/null 2>"$work/every.err" ||
	fail "every: record: $(cat "$work/every.err")"
k=0
for f in "$out".snapshot.*.data; do
	[ -f "$f" ] || continue
	against_truth "$f" "every: $(basename "$f")" >"$work/every.res" ||
		{ cat "$work/every.res"; break; }
	k=$((k + 1))
done
[ "$k" -ge 5 ] && ok "every: $k snapshots, each tree the truth of its window" ||
	fail "every: $k snapshots checked"

# ---------------------------------------------------------------- 2c. no truth
# $1: a perf.data, $2: a name.  Prints "INSNS PERF" (the tree's
# instructions, perf script's; PERF "-" without perf) or fails.
tree_vs_perf() {
	rm -rf "$work/ntb" && mkdir "$work/ntb" || return 1
	"$htr" build -q "$1" -o "$work/ntb/t.htr" 2>"$work/nt.build" ||
		{ fail "$2: build: $(cat "$work/nt.build")"; return 1; }
	# a tree per thread (t.TID.htr) when there are several
	h=$(for t in "$work"/ntb/*.htr; do "$htr" info "$t"; done |
		awk '$1 == "instructions:" { s += $2 } END { print s + 0 }')
	p=-
	if command -v perf >/dev/null 2>&1; then
		p=$(HOME=$work perf script -f -i "$1" --itrace=i0ns -F tid \
			2>/dev/null | wc -l)
	fi
	if [ "$h" -eq 0 ] || { [ "$p" != - ] && [ "$h" != "$p" ]; }; then
		fail "$2: the tree has $h instructions, perf script $p"
		return 1
	fi
	echo "$h $p"
}
# $1, $2: perf.data files of the same deterministic run, $3: a name.  The
# same size, and their trees the same trace, counts and dump (but for the
# thread line: another pid).
same_tree() {
	for f in "$1" "$2"; do
		"$htr" build -q "$f" -o "$f.htr" 2>"$work/same.build" ||
			{ fail "$3: build $f: $(cat "$work/same.build")"; return 1; }
		"$htr" info "$f.htr" |
			grep -E '^(trace|instructions|blocks|functions|gaps):' \
			>"$f.info"
		"$htr" dump --tsc "$f.htr" | tail -n +2 >"$f.dump"
	done
	if [ "$(wc -c <"$1")" != "$(wc -c <"$2")" ] ||
	   ! cmp -s "$1.info" "$2.info" || ! cmp -s "$1.dump" "$2.dump"; then
		fail "$3: not the same: $(wc -c <"$1") and $(wc -c <"$2") bytes, $(diff "$1.info" "$2.info" | tr '\n' ' ')"
		return 1
	fi
	ok "$3: the same $(wc -c <"$1") bytes of perf.data and tree ($(awk '$1 == "instructions:" { print $2 }' "$1.info") instructions, $(wc -l <"$1.dump") lines of dump) with and without --no-truth"
}
# Files with "truth" in their name beside $1 or in its temporary directory.
truths() {
	ls -d "$1"* "$1".rec-*/* 2>/dev/null | grep -c truth
}

out=$work/nt.data
"$htr" record --no-truth --ring 1M --heartbeat 0 -o "$out" -- "$work/hang" 50 \
	>/dev/null 2>"$work/nt.err" &
rp=$!
pids="$pids $rp"
(sleep 1.2; kill -USR1 "$rp"; sleep 1.2; kill -TERM "$rp" 2>/dev/null) &
while kill -0 "$rp" 2>/dev/null; do
	echo "$(ring_bytes "$out") $(truths "$out")" >>"$work/nt.samples"
	sleep 0.1
done
wait "$rp"
rc=$?
# shellcheck disable=SC2046
set -- $(awk 'BEGIN { m = 0; t = 0 } $1 > m { m = $1 } $2 > t { t = $2 }
	END { print NR, m, t }' "$work/nt.samples")
if [ "$rc" -ne 0 ] || ! grep -q "stopped by signal 15" "$work/nt.err" ||
   [ ! -s "$out.snapshot.1.data" ]; then
	fail "no truth: record --ring --no-truth: exit $rc, $(cat "$work/nt.err")"
elif [ "$3" -ne 0 ] || [ "$(truths "$out")" -ne 0 ]; then
	fail "no truth: truth files with --no-truth ($3 at most in a sample): $(ls -d "$out"* | grep truth)"
elif [ "$1" -lt 10 ] || [ "$2" -gt 1048576 ] || [ "$2" -lt 500000 ]; then
	fail "no truth: ring files held up to $2 bytes ($1 samples)"
else
	ok "no truth: $1 samples, no truth file beside OUT or in the ring's directory, at most $2 bytes of trace (ring 1048576)"
fi
if a=$(tree_vs_perf "$out.snapshot.1.data" "no truth: snapshot 1") &&
   b=$(tree_vs_perf "$out" "no truth: SIGTERM"); then
	ok "no truth: the snapshot's and the last window's trees as perf script decodes them (instructions, perf's: $a; $b)"
fi
out=$work/ntevery.data
"$htr" record -q --no-truth --ring 40K --psb-period 512 \
	--snapshot-every 100000 -o "$out" -- "$work/hang" 30 done \
	>/dev/null 2>"$work/ntevery.err" ||
	fail "no truth: every: record: $(cat "$work/ntevery.err")"
k=0
for f in "$out".snapshot.*.data; do
	[ -f "$f" ] || continue
	tree_vs_perf "$f" "no truth: every: $(basename "$f")" >/dev/null ||
		break
	k=$((k + 1))
done
[ "$(truths "$out")" -eq 0 ] ||
	fail "no truth: every: $(ls -d "$out"* | grep truth)"
[ "$k" -ge 5 ] &&
	ok "no truth: every: $k snapshots, each tree as perf script decodes it" ||
	fail "no truth: every: $k snapshots checked"
same_tree "$work/every.data" "$out" "no truth: every: the last window"
# plain, --raw, --cpus
"$htr" record -q -o "$work/pl.data" -- "$work/hang" 10 done >/dev/null \
	2>"$work/plnt.err" &&
	"$htr" record -q --no-truth -o "$work/plnt.data" -- "$work/hang" 10 \
	done >/dev/null 2>"$work/plnt.err" ||
	fail "no truth: plain: record: $(cat "$work/plnt.err")"
if [ ! -f "$work/pl.data.t0.truth" ] ||
   [ "$(truths "$work/plnt.data")" -ne 0 ]; then
	fail "no truth: plain: $(ls "$work"/pl*)"
else
	same_tree "$work/pl.data" "$work/plnt.data" "no truth: plain"
fi
"$htr" record -q --raw "$work/rw" -- "$work/hang" 10 done >/dev/null \
	2>"$work/rwnt.err" &&
	"$htr" record -q --no-truth --raw "$work/rwnt" -- "$work/hang" 10 done \
	>/dev/null 2>"$work/rwnt.err" ||
	fail "no truth: raw: record: $(cat "$work/rwnt.err")"
if [ ! -f "$work/rw/t0.truth" ] ||
   [ "$(ls "$work/rw" | grep -v '^t0\.truth$')" != "$(ls "$work/rwnt")" ] ||
   ! cmp -s "$work/rw/t0.pt" "$work/rwnt/t0.pt"; then
	fail "no truth: raw: $(ls "$work/rw" "$work/rwnt" | tr '\n' ' ')"
else
	ok "no truth: raw: the same files but t0.truth, the same t0.pt"
fi
"$htr" record -q --no-truth --cpus 2 -o "$work/cpnt.data" -- \
	"$work/threads" >/dev/null 2>"$work/cpnt.err" ||
	fail "no truth: cpus: record: $(cat "$work/cpnt.err")"
if [ "$(truths "$work/cpnt.data")" -ne 0 ]; then
	fail "no truth: cpus: $(ls "$work"/cpnt*)"
elif c=$(tree_vs_perf "$work/cpnt.data" "no truth: cpus"); then
	ok "no truth: cpus: no truth, the trees as perf script decodes them ($c)"
fi

# ---------------------------------------------------------------- 3. -S
if ! command -v perf >/dev/null 2>&1; then
	echo "perf is not installed: snapshot-mode files not checked against perf script"
else
	# name snapshots trees args...: record, check the snapshot count
	# perf sees, build, compare each tree with perf's instructions in
	# its time span.
	snapfile() {
		name=$1 nsnap=$2 ntrees=$3
		shift 3
		f=$work/$name.data
		"$htr" record -q "$@" --perf-snapshot -o "$f" -- \
			"$work/hang" "$nrounds" done >/dev/null 2>"$work/$name.rec" ||
			{ fail "$name: record: $(cat "$work/$name.rec")"; return; }
		HOME=$work perf script -f -i "$f" -D 2>/dev/null |
			grep -c 'PERF_RECORD_AUXTRACE ' >"$work/$name.n"
		if [ "$(cat "$work/$name.n")" != "$nsnap" ]; then
			fail "$name: perf sees $(cat "$work/$name.n") snapshots, want $nsnap"
			return
		fi
		if ! HOME=$work perf script -f -i "$f" --itrace=i0ns -F time --ns \
			>"$work/$name.perf" 2>"$work/$name.perr"; then
			fail "$name: perf script: $(head -3 "$work/$name.perr")"
			return
		fi
		"$htr" build "$f" -o "$work/$name.htr" 2>"$work/$name.build" ||
			{ fail "$name: build: $(cat "$work/$name.build")"; return; }
		if grep -v '^htr: build: .* -> ' "$work/$name.build" | grep -q .; then
			fail "$name: build said more than its summaries: $(cat "$work/$name.build")"
			return
		fi
		trees=$(ls "$work/$name".*htr | grep -c 'htr$')
		[ "$trees" = "$ntrees" ] ||
			{ fail "$name: $trees trees, want $ntrees"; return; }
		total=0 ptotal=0 k=0 ends=""
		for t in "$work/$name".*htr; do
			case $t in *.htr) ;; *) continue ;; esac
			"$htr" info "$t" >"$work/info"
			n=$(awk '$1 == "instructions:" { print $2 }' "$work/info")
			span=$(awk '$1 == "clock:" { print $4 }' "$work/info")
			p=$(awk -v s="$span" 'BEGIN { split(s, r, /\.\./) }
				{ sub(/:$/, "", $1); t = $1 + 0 }
				t >= r[1] + 0 && t <= r[2] + 0 { n++ }
				END { print n + 0 }' "$work/$name.perf")
			# A run that the next snapshot does not continue:
			# perf drops what it decoded after the buffer's last
			# packet, libipt walks on to the next branch that
			# needs one (instructions that did run): a few more.
			k=$((k + 1))
			if [ "$n" != "$p" ] && { [ "$k" = "$ntrees" ] ||
			   [ "$n" -lt "$p" ] || [ $((n - p)) -gt 32 ]; }; then
				fail "$name: $(basename "$t"): $n instructions, perf decodes $p in its span $span"
				return
			fi
			[ "$n" != "$p" ] && ends="$ends $((n - p))"
			total=$((total + n))
			ptotal=$((ptotal + p))
		done
		pall=$(wc -l <"$work/$name.perf")
		if [ "$ptotal" != "$pall" ]; then
			fail "$name: perf decodes $pall instructions, $ptotal in the trees' spans"
			return
		fi
		ok "$name: $nsnap snapshots, $ntrees trees, $total instructions, each tree as perf script${ends:+ (but for the last instructions at the ends of runs: +$ends)}"
	}
	nrounds=30
	snapfile snap1 1 1 --ring 128K
	# about 16000 instructions a round: snapshots at 250000 and 500000
	# and the end (646000), 29 KB of trace apart, AUX area 12 KB
	nrounds=40
	snapfile snap3 3 3 --psb-period 512 --ring 24K --snapshot-every 250000
	# nine at 150000 ... 1350000 and the end (1420000), 17 KB apart,
	# AUX area 48 KB: each overlaps the one before
	nrounds=88
	snapfile snap10 10 1 --ring 96K --snapshot-every 150000
fi

echo "ring: $oks ok, $fails failures"
[ "$fails" -eq 0 ]
