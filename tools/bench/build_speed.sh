#!/bin/sh
# htr build against the bare libipt block-decoder loop (bare_blk), on the
# same traces in one run: synthesized basic, mixed and nocomp traces of each
# size, and a real program recorded with htr record (qemu-user).  For each
# trace: M insns/s of the bare loop and of htr build -j1 and -j2, their
# ratios to the bare loop, -j2 against -j1, peak RSS and bytes per block.
# Each figure is the best of RUNS runs (default 3), taken alternately.
#
# usage: build_speed.sh HTR_SYNTH HTR BARE_BLK [SIZES]
#        (SIZES default "1e7 1e8"; "1e9" shows RSS at scale)
set -eu
synth=$1 htr=$2 bare=$3 sizes=${4:-1e7 1e8}
runs=${RUNS:-3}
dir=$(mktemp -d "${TMPDIR:-/tmp}/htr-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT INT TERM
timing="1 2 6 16"   # the synthesizer's CPUID 0x15, MTCFreq, nominal ratio

# best_of CMD...: run CMD $runs times; "SECONDS PEAK_KIB" of the fastest.
best_of() {
	best=""
	i=0
	while [ $i -lt "$runs" ]; do
		t0=$(date +%s%N)
		/usr/bin/time -f '%M' -o "$dir/time" "$@" >/dev/null
		t1=$(date +%s%N)
		read -r m < "$dir/time"
		s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print (b - a) / 1e9 }')
		if [ -z "$best" ] || awk -v a="$s" -v b="${best% *}" \
			'BEGIN { exit !(a < b) }'; then
			best="$s $m"
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
	b=$(best_of "$bare" --timing $timing "$trace" $specs)
	# shellcheck disable=SC2086
	j1=$(best_of "$htr" build -q -j1 $opts $elfs -o "$dir/j1.htr" "$trace")
	# shellcheck disable=SC2086
	j2=$(best_of "$htr" build -q -j2 $opts $elfs -o "$dir/j2.htr" "$trace")
	blocks=$("$htr" info "$dir/j1.htr" | awk '/^blocks:/ { print $2 }')
	size=$(wc -c < "$dir/j1.htr")
	cmp -s "$dir/j1.htr" "$dir/j2.htr" ||
		cmp -l "$dir/j1.htr" "$dir/j2.htr" | awk '
			# build_time (bytes 121-128) and header_hash (249-256)
			!(($1 >= 121 && $1 <= 128) || ($1 >= 249 && $1 <= 256)) {
				bad = 1 }
			END { if (bad) { print "build-speed: -j2 wrote another" \
				" file than -j1"; exit 1 } }'
	awk -v name="$name" -v n="$insns" -v b="$b" -v j1="$j1" -v j2="$j2" \
	    -v blocks="$blocks" -v size="$size" 'BEGIN {
		split(b, B, " "); split(j1, J1, " "); split(j2, J2, " ")
		rb = n / B[1] / 1e6; r1 = n / J1[1] / 1e6; r2 = n / J2[1] / 1e6
		printf "%-14s %6.0fM %7.1f %7.1f %7.1f %6.2f %6.2f %6.2f %7.1f %7.1f %6.1f\n",
			name, n / 1e6, rb, r1, r2, r1 / rb, r2 / rb, r2 / r1,
			J1[2] / 1024, J2[2] / 1024, blocks ? size / blocks : 0
	}'
}

echo "build-speed: best of $runs runs; M insns/s over wall time;" \
	"RSS in MiB" >&2
printf "%-14s %7s %7s %7s %7s %6s %6s %6s %7s %7s %6s\n" trace insns bare \
	j1 j2 j1/bare j2/bare j2/j1 rss-j1 rss-j2 B/blk
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
