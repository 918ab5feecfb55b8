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
	"$htr" record --help | grep -q -- "--snapshot-on SIGNAL" ||
	fail "record --help does not document --ring and --snapshot-on"

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
