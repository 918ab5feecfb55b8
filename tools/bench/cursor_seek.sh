#!/bin/sh
# Cursor seeks: 10^4 random instruction IDs in a 10^8-instruction trace,
# at two PSB periods.  A seek decodes from one sync point before the ID,
# so its cost follows the PSB period, not the trace's size.
# usage: cursor_seek.sh HTR_SYNTH HTR CURSOR_SEEK [INSNS]
set -eu
synth=$1 htr=$2 seek=$3 n=${4:-100M}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
timing="--cpuid-0x15-eax 1 --cpuid-0x15-ebx 2 --mtc-freq 6 --nom-freq 16"
for period in 4096 16384; do
	"$synth" -q --no-truth --no-bundle -n "$n" --psb-period "$period" "$dir/t"
	# shellcheck disable=SC2086
	"$htr" build -q $timing "$dir/t.pt" --elf "$dir/t.elf" -o "$dir/t.htr"
	echo "PSB every $period bytes:"
	"$seek" "$dir/t.htr" "$dir/t.pt" 10000
	rm -f "$dir"/t.*
done
