#!/bin/sh
# htr build at scale: peak RSS and instruction rate of `htr build` on a
# synthesized trace, against a bare libipt block-decoder loop over the same
# trace in the same script (ratio goal >= 0.9, RSS goal <= 64 MiB).
# usage: build_speed.sh HTR_SYNTH HTR BARE_BLK [INSNS]  (default 10^9)
set -eu
synth=$1 htr=$2 bare=$3 n=${4:-1G}
dir=$(mktemp -d "${TMPDIR:-/tmp}/htr-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
echo "build-speed: synthesizing $n instructions in $dir" >&2
"$synth" -q --no-truth --no-bundle -n "$n" "$dir/t"
ls -l "$dir/t.pt" >&2
timing="--cpuid-0x15-eax 1 --cpuid-0x15-ebx 2 --mtc-freq 6 --nom-freq 16"
# Warm the page cache so both runs read the trace from memory.
cat "$dir/t.pt" >/dev/null
bare_out=$("$bare" "$dir/t.pt" "$dir/t.elf" 0x400000 1 2 6 16)
echo "$bare_out"
/usr/bin/time -f '%M %e' -o "$dir/time" "$htr" build -q $timing \
	--elf "$dir/t.elf" -o "$dir/t.htr" "$dir/t.pt"
read -r rss secs < "$dir/time"
"$htr" info "$dir/t.htr" | sed 's/^/  /'
insns=$(echo "$bare_out" | awk '{print $2}')
bare_rate=$(echo "$bare_out" | awk '{print $(NF-2)}')
awk -v n="$insns" -v t="$secs" -v br="$bare_rate" -v rss="$rss" 'BEGIN {
	r = n / t / 1e6
	printf "htr build: %d insns, %.2f s, %.1f M insns/s, peak RSS %.1f MiB\n",
		n, t, r, rss / 1024
	printf "ratio htr build / bare libipt: %.2f (goal >= 0.9); RSS goal <= 64 MiB: %s\n",
		r / br, rss <= 65536 ? "met" : "NOT met"
}'
