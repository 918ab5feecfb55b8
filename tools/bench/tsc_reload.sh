#!/bin/sh
# Analyzer reload: `htr dump --tsc` on a synthesized trace of >= 10^7
# blocks, twice (the first computes the sidecar, the second reloads it),
# with both times and their ratio (goal >= 50).  Printing 10^7 lines costs
# the same in both runs, so the script also times commands that only load
# (`htr top`, `htr dump --tsc --depth 3`) and reports the sidecar's bytes
# per block.
# usage: tsc_reload.sh HTR_SYNTH HTR [INSNS]  (default 300M: ~1.2e7 blocks)
set -eu
synth=$1 htr=$2 n=${3:-300M}
dir=$(mktemp -d "${TMPDIR:-/tmp}/htr-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
echo "tsc-reload: synthesizing $n instructions in $dir" >&2
"$synth" -q --no-truth --no-bundle -n "$n" "$dir/P"
"$htr" build -q --cpuid-0x15-eax 1 --cpuid-0x15-ebx 2 --mtc-freq 6 \
	--nom-freq 16 --elf "$dir/P.elf" -o "$dir/P.htr" "$dir/P.pt"
blocks=$("$htr" info "$dir/P.htr" | awk '/^blocks:/ {print $2}')
cat "$dir/P.htr" >/dev/null   # page cache: both runs read from memory

now() { date +%s.%N; }
# secs CMD...: run CMD with stdout to /dev/null, print the seconds taken.
secs() {
	t0=$(now)
	"$@" >/dev/null
	t1=$(now)
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }'
}
report() {  # report WHAT COMPUTE RELOAD
	awk -v w="$1" -v c="$2" -v r="$3" 'BEGIN {
		ratio = 0
		if (r > 0)
			ratio = c / r
		note = ""
		if (ratio < 50)
			note = "  (goal >= 50x NOT met)"
		printf "%-24s compute %8.3f s  reload %8.3f s  ratio %7.1fx%s\n", w, c, r, ratio, note
	}'
}

side="$dir/P.htr.lmdb"
rm -rf "$side"
c=$(secs "$htr" dump --tsc "$dir/P.htr")
r=$(secs "$htr" dump --tsc "$dir/P.htr")
report "dump --tsc (all lines)" "$c" "$r"
bytes=$(du -sb "$side" | awk '{print $1}')

rm -rf "$side"
c=$(secs "$htr" dump --tsc --depth 3 "$dir/P.htr")
r=$(secs "$htr" dump --tsc --depth 3 "$dir/P.htr")
report "dump --tsc --depth 3" "$c" "$r"

rm -rf "$side"
c=$(secs "$htr" top "$dir/P.htr")
r=$(secs "$htr" top "$dir/P.htr")
report "top" "$c" "$r"

awk -v b="$bytes" -v n="$blocks" 'BEGIN {
	printf "blocks %d, sidecar %d bytes, %.2f bytes per block\n", n, b, b / n
}'
