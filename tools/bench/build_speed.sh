#!/bin/sh
# htr build against the bare libipt block-decoder loop (bare_blk), on the
# same traces in one run: synthesized basic, mixed and nocomp traces of each
# size, and a real program recorded with htr record (qemu-user).  For each
# trace: M insns/s of the bare loop, of htr build -j1 (one thread) with each
# decoder (--decoder block, --decoder walk) and of -j2 (two threads, the
# walk), their ratios to the bare loop, how much of the bare loop's time
# libipt's packet decoder alone takes (the floor of any decoder on libipt:
# bare_blk --packets) and its query decoder alone (the walk's floor:
# bare_blk --query) and how much -j1 adds to that, -j2 against -j1
# (walk), peak RSS and bytes per block; where -j1 and -j2 spend their
# time: the commit's share of the build (htr build's summary) and the CPU
# time of -j2 against -j1's.  A walk figure marked '*' is the block
# decoder's: the walk gave up on that trace (htr build's note).  The commands of a trace run in turn, RUNS rounds
# (default 3); each figure is the median of its runs, but for 'best':
# -j2 against -j1 (walk), each its fastest run (where another user takes
# a core now and then, the medians of -j2 say more about him than about
# two free cores).  Beside the wall time: the user and system CPU
# seconds of -j1 and -j2 and -j2's CPU time over its wall time (flagged
# when below 1.5: the second core was busy elsewhere), and at the end the
# system time against the user time.
#
# usage: build_speed.sh HTR_SYNTH HTR BARE_BLK [SIZES]
#        (SIZES default "1e7 1e8"; "1e9" shows RSS at scale)
set -eu
synth=$1 htr=$2 bare=$3 sizes=${4:-1e7 1e8}
runs=${RUNS:-3}
dir=$(mktemp -d "${TMPDIR:-/tmp}/htr-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT INT TERM
timing="1 2 6 16"   # the synthesizer's CPUID 0x15, MTCFreq, nominal ratio

# same A B: whether the .htr files A and B are the same but for the time
# they were built (bytes 121-128) and the header hash (249-256).
same() {
	cmp -s "$1" "$2" ||
		cmp -l "$1" "$2" 2>/dev/null | awk '
			!(($1 >= 121 && $1 <= 128) || ($1 >= 249 && $1 <= 256)) {
				bad = 1 }
			END { exit bad }'
}

# once TAG OUT CMD...: run CMD once and append "WALL PEAK_KIB USER SYS
# COMMIT" to $dir/TAG.runs (the commit's seconds from htr build's summary,
# 0 for other commands).  OUT (the file CMD writes, or "") is removed
# before the run: replacing a file frees the old one's blocks, which costs
# the file system more than it costs the build (30 ms for 17 MB with
# online discard).
once() {
	tag=$1 out=$2
	shift 2
	[ -z "$out" ] || rm -f "$out"
	t0=$(date +%s%N)
	/usr/bin/time -f '%M %U %S' -o "$dir/time" "$@" >/dev/null \
		2>"$dir/err"
	t1=$(date +%s%N)
	read -r m u k < "$dir/time"
	c=$(sed -n 's/.* s (commit \([0-9.]*\) s).*/\1/p' "$dir/err")
	awk -v a="$t0" -v b="$t1" -v m="$m" -v u="$u" -v k="$k" \
		-v c="${c:-0}" 'BEGIN { print (b - a) / 1e9, m, u, k, c }' \
		>> "$dir/$tag.runs"
}

# median TAG: the median of each column of $dir/TAG.runs.
median() {
	awk '{ for (i = 1; i <= NF; i++) v[i, NR] = $i; nf = NF }
	     END {
		for (i = 1; i <= nf; i++) {
			for (j = 1; j <= NR; j++) a[j] = v[i, j]
			for (j = 2; j <= NR; j++)  # insertion sort
				for (l = j; l > 1 && a[l - 1] > a[l]; l--) {
					t = a[l]; a[l] = a[l - 1]; a[l - 1] = t }
			m = (a[int((NR + 1) / 2)] + a[int(NR / 2) + 1]) / 2
			printf "%s%s", m, i < nf ? " " : "\n"
		}
	     }' "$dir/$1.runs"
}

# best TAG: the shortest wall time in $dir/TAG.runs.
best() {
	awk 'NR == 1 || $1 < m { m = $1 } END { print m }' "$dir/$1.runs"
}

# measure NAME TRACE ELF...: one table row.  The five commands run in
# turn, RUNS rounds (bare, qry, blk, walk, j2, bare, ...), so that a machine
# whose speed drifts (other users, frequency) slows each of them alike;
# each figure is the median of its runs.
measure() {
	name=$1 trace=$2
	shift 2
	specs="$*"
	elfs=""
	for e in "$@"; do elfs="$elfs --elf $e"; done
	# Warm the page cache: every run reads the trace from memory.
	cat "$trace" >/dev/null
	# shellcheck disable=SC2086
	insns=$("$bare" --timing $timing "$trace" $specs | awk '{ print $2 }')
	# shellcheck disable=SC2086
	set -- $timing
	opts="--cpuid-0x15-eax $1 --cpuid-0x15-ebx $2 --mtc-freq $3 --nom-freq $4"
	rm -f "$dir"/*.runs
	i=0
	while [ $i -lt "$runs" ]; do
		# shellcheck disable=SC2086
		once bare "" "$bare" --timing $timing "$trace" $specs
		# shellcheck disable=SC2086
		once qry "" "$bare" --query --timing $timing "$trace"
		once pkt "" "$bare" --packets "$trace"
		# shellcheck disable=SC2086
		once blk "$dir/blk.htr" "$htr" build -q -j1 --decoder block \
			$opts $elfs -o "$dir/blk.htr" "$trace"
		# shellcheck disable=SC2086
		once walk "$dir/walk.htr" "$htr" build -j1 --decoder walk \
			$opts $elfs -o "$dir/walk.htr" "$trace"
		# shellcheck disable=SC2086
		once j2 "$dir/j2.htr" "$htr" build -j2 --decoder walk $opts \
			$elfs -o "$dir/j2.htr" "$trace"
		i=$((i + 1))
	done
	b=$(median bare) blk=$(median blk) walk=$(median walk) j2=$(median j2)
	q=$(median qry) pk=$(median pkt)
	bw=$(best walk) b2=$(best j2)
	# Once more without -q: whether the walk gave up (its note).
	# shellcheck disable=SC2086
	"$htr" build -j1 --decoder walk $opts $elfs -o "$dir/walk.htr" \
		"$trace" 2>"$dir/walk.err"
	fell=$(grep -c 'note: the walk' "$dir/walk.err" || :)
	blocks=$("$htr" info "$dir/blk.htr" | awk '/^blocks:/ { print $2 }')
	size=$(wc -c < "$dir/blk.htr")
	for f in walk j2; do
		if ! same "$dir/blk.htr" "$dir/$f.htr"; then
			echo "build-speed: $name: $f wrote another file than" \
				"the block decoder" >&2
			exit 1
		fi
	done
	load=$(cut -d' ' -f1 /proc/loadavg)
	# par: -j2's CPU over its wall time.  On two free cores -j2 keeps
	# both busy (near 2); below 1.5 its second thread mostly waited for
	# a core, and its figure says little about what -j2 can do.
	awk -v name="$name" -v n="$insns" -v b="$b" -v k="$blk" -v w="$walk" \
	    -v j2="$j2" -v fell="$fell" -v blocks="$blocks" -v size="$size" \
	    -v load="$load" -v bw="$bw" -v b2="$b2" -v q="$q" -v pk="$pk" \
	    'BEGIN {
		split(b, B, " "); split(k, K, " "); split(w, W, " ")
		split(j2, J2, " "); split(q, Q, " "); split(pk, P, " ")
		rb = n / B[1] / 1e6; rk = n / K[1] / 1e6; rw = n / W[1] / 1e6
		r2 = n / J2[1] / 1e6
		par = (J2[3] + J2[4]) / J2[1]
		printf "%-12s %5.0fM %6.1f %6.1f %6.1f%s %6.1f %6.2f %6.2f %5.2f %5.2f %5.2f %6.2f %6.2f%s %5.2f %5.2f/%-5.2f %5.2f/%-5.2f %5.1f %5.1f %5.1f %5.1f %4.0f%% %4.0f%% %5.2f %4s\n",
			name, n / 1e6, rb, rk, rw, fell ? "*" : " ", r2,
			rk / rb, rw / rb, P[1] / B[1], Q[1] / B[1],
			(W[1] - Q[1]) / B[1],
			r2 / rb, r2 / rw, par < 1.5 ? "!" : " ",
			bw / b2,
			W[3], W[4], J2[3], J2[4], par,
			K[2] / 1024, W[2] / 1024, J2[2] / 1024,
			100 * W[5] / W[1], 100 * J2[5] / J2[1],
			blocks ? size / blocks : 0, load
	}'
	awk -v w="$walk" -v j2="$j2" -v b="$b" 'BEGIN {
		split(w, W, " "); split(j2, J, " "); split(b, B, " ")
		print W[3], W[4], J[3], J[4], B[3], B[4] }' >> "$dir/cpu.sum"
}

echo "build-speed: median of $runs runs, alternating (bare, qry, pkt," \
	"blk, walk, j2, bare, ...); M insns/s over wall time; walk '*': the" \
	"walk gave up, the block decoder decoded; pkt/b: libipt's packet" \
	"decoder alone (bare_blk --packets: every packet decoded, nothing" \
	"made of it), the floor of any decoder built on libipt, over the" \
	"bare loop's time; qry/b: libipt's query decoder" \
	"alone (bare_blk --query: every branch's answer asked for, no code" \
	"followed), the floor of the walk, over the bare loop's time;" \
	"own/b: the rest of -j1 (walk), libhtr's own, over the bare loop's" \
	"time (-j1 at 1.5x the bare loop's rate leaves it 0.67 - qry/b);" \
	"usr/sys: CPU seconds of -j1 (walk)" \
	"and -j2; cpu/wall: -j2's CPU over its wall time, '!' (j2/walk)" \
	"when below 1.5: the second core was not really available; best:" \
	"-j2 against -j1 (walk), each its fastest run (on a machine busy" \
	"now and then, nearer what two free cores give than the median);" \
	"RSS in" \
	"MiB; cmt: the commit's share of the build; load: 1-minute load" \
	"average after the row" >&2
printf "%-12s %6s %6s %6s %7s %6s %6s %6s %5s %5s %5s %6s %7s %5s %11s %11s %5s %5s %5s %5s %5s %5s %5s %4s\n" \
	trace insns bare blk walk j2 blk/b walk/b pkt/b qry/b own/b j2/b \
	j2/walk best \
	"usr/sys-j1" "usr/sys-j2" cpu/w rss-b rss-w rss-2 cmt-w cmt-2 B/blk load
rm -f "$dir/cpu.sum"
for n in $sizes; do
	for sc in basic mixed nocomp; do
		"$synth" -q --no-truth --no-bundle -S "$sc" -n "$n" "$dir/t"
		measure "$sc-$n" "$dir/t.pt" "$dir/t.elf"
		rm -f "$dir"/t.* "$dir"/*.htr
	done
done

# A real program: a loop over a small function with a libc call now and
# then, run under qemu-user by htr record (user-only, return compression).
if command -v qemu-x86_64 >/dev/null 2>&1 && command -v cc >/dev/null; then
	cc -O1 -o "$dir/spin" "$(dirname "$0")/spin.c"
	# about 10 instructions an iteration
	"$htr" record -q --raw "$dir/rec" -- "$dir/spin" 2000000 >/dev/null
	pt=$(ls "$dir"/rec/t*.pt | head -1)
	# build.args: --elf FILE@BASE per module, then the timing options.
	elfs=$(tr ' ' '\n' < "$dir/rec/build.args" |
		awk '/^--elf$/ { getline; print }')
	timing=$(tr ' ' '\n' < "$dir/rec/build.args" | awk '
		/^--cpuid-0x15-eax$/ { getline; a = $0 }
		/^--cpuid-0x15-ebx$/ { getline; b = $0 }
		/^--mtc-freq$/ { getline; m = $0 }
		/^--nom-freq$/ { getline; n = $0 }
		END { print a + 0, b + 0, m + 0, n + 0 }')
	# shellcheck disable=SC2086
	measure "spin(qemu)" "$pt" $elfs
else
	echo "build-speed: no qemu-x86_64 or cc: the recorded program is" \
		"skipped" >&2
fi

# Kernel against user time over every timed htr build (-j1 and -j2, walk)
# and the bare loop's.
awk '{ u += $1 + $3; k += $2 + $4; bu += $5; bk += $6 }
     END { printf "build-speed: htr build (walk, medians summed): user %.2f s, sys %.2f s (sys/user %.2f); bare loop: user %.2f s, sys %.2f s\n", u, k, u ? k / u : 0, bu, bk }' "$dir/cpu.sum" >&2
