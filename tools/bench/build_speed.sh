#!/bin/sh
# htr build against the bare libipt block-decoder loop (bare_blk), on the
# same traces in one run: synthesized basic, mixed and nocomp traces of each
# size, and a real program recorded with htr record (qemu-user).  For each
# trace: M insns/s of the bare loop, of htr build -j1 (one thread) with each
# decoder (--decoder block, --decoder walk) and of -j2 (two threads, the
# walk), their ratios to the bare loop, -j2 against -j1 (walk), peak RSS
# and bytes per block; where -j1 and -j2 spend their time: the commit's
# share of the build (htr build's summary) and the CPU time of -j2 against
# -j1's (user + system: above 1, the work threads add).  A walk figure
# marked '*' is the block decoder's: the walk gave up on that trace (htr
# build's note).  Each figure is the best of RUNS runs (default 3).
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

# best_of OUT CMD...: run CMD $runs times; "SECONDS PEAK_KIB CPU_SECONDS
# COMMIT_SECONDS" of the fastest (the commit's from htr build's summary,
# 0 for other commands).  OUT (the file CMD writes, or "") is removed
# before each run: replacing a file frees the old one's blocks, which costs
# the file system more than it costs the build (30 ms for 17 MB with
# online discard).
best_of() {
	best="" out=$1
	shift
	i=0
	while [ $i -lt "$runs" ]; do
		[ -z "$out" ] || rm -f "$out"
		t0=$(date +%s%N)
		/usr/bin/time -f '%M %U %S' -o "$dir/time" "$@" >/dev/null \
			2>"$dir/err"
		t1=$(date +%s%N)
		read -r m u k < "$dir/time"
		c=$(sed -n 's/.* s (commit \([0-9.]*\) s).*/\1/p' "$dir/err")
		s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print (b - a) / 1e9 }')
		if [ -z "$best" ] || awk -v a="$s" -v b="${best%% *}" \
			'BEGIN { exit !(a < b) }'; then
			best="$s $m $(awk -v u="$u" -v k="$k" \
				'BEGIN { print u + k }') ${c:-0}"
		fi
		i=$((i + 1))
	done
	echo "$best"
}

# measure NAME TRACE ELF...: one table row.
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
	# shellcheck disable=SC2086
	b=$(best_of "" "$bare" --timing $timing "$trace" $specs)
	# shellcheck disable=SC2086
	blk=$(best_of "$dir/blk.htr" "$htr" build -q -j1 --decoder block $opts \
		$elfs -o "$dir/blk.htr" "$trace")
	# shellcheck disable=SC2086
	walk=$(best_of "$dir/walk.htr" "$htr" build -j1 --decoder walk $opts \
		$elfs -o "$dir/walk.htr" "$trace")
	# shellcheck disable=SC2086
	j2=$(best_of "$dir/j2.htr" "$htr" build -j2 --decoder walk $opts \
		$elfs -o "$dir/j2.htr" "$trace")
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
	awk -v name="$name" -v n="$insns" -v b="$b" -v k="$blk" -v w="$walk" \
	    -v j2="$j2" -v fell="$fell" -v blocks="$blocks" -v size="$size" \
	    'BEGIN {
		split(b, B, " "); split(k, K, " "); split(w, W, " ")
		split(j2, J2, " ")
		rb = n / B[1] / 1e6; rk = n / K[1] / 1e6; rw = n / W[1] / 1e6
		r2 = n / J2[1] / 1e6
		printf "%-14s %6.0fM %7.1f %7.1f %6.1f%s %7.1f %8.2f %9.2f %7.2f %7.2f %7.1f %8.1f %7.1f %6.1f %7.0f%% %7.0f%% %7.2f\n",
			name, n / 1e6, rb, rk, rw, fell ? "*" : " ", r2,
			rk / rb, rw / rb, r2 / rb, r2 / rw, K[2] / 1024,
			W[2] / 1024, J2[2] / 1024, blocks ? size / blocks : 0,
			100 * W[4] / W[1], 100 * J2[4] / J2[1],
			(W[3] > 0 ? J2[3] / W[3] : 0)
	}'
}

echo "build-speed: best of $runs runs; M insns/s over wall time;" \
	"RSS in MiB; walk '*': the walk gave up, the block decoder decoded;" \
	"cmt: the commit's share of the build; cpu-j2/1: -j2's CPU time" \
	"over -j1's (walk)" >&2
printf "%-14s %7s %7s %7s %7s %7s %8s %9s %7s %7s %7s %8s %7s %6s %8s %8s %7s\n" \
	trace insns bare blk walk j2 blk/bare walk/bare j2/bare j2/walk \
	rss-blk rss-walk rss-j2 B/blk cmt-walk cmt-j2 cpu-j2/1
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
