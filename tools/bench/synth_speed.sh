#!/bin/sh
# Instructions per second and peak RSS of htr-synth, and the RSS ratio of a
# long run to a tiny one (streaming: it should stay near 1).
# usage: synth_speed.sh HTR_SYNTH [INSNS]   (default 10^8)
set -eu
synth=$1
n=${2:-100M}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
run() {
	/usr/bin/time -f '%M' -o "$dir/rss" "$synth" -q --no-truth --no-bundle \
		-n "$1" "$dir/t" 2>&1
	cat "$dir/rss"
}
rss_small=$(run 1000)
start=$(date +%s.%N)
rss_big=$(run "$n")
end=$(date +%s.%N)

awk -v s="$start" -v e="$end" -v n="$n" -v rb="$rss_big" -v rs="$rss_small" '
function num(x) { m = 1; if (x ~ /k$/) m = 1e3; if (x ~ /M$/) m = 1e6;
	if (x ~ /G$/) m = 1e9; sub(/[kMG]$/, "", x); return x * m }
BEGIN { t = e - s; printf "synth-speed: %d insns in %.2f s = %.1f M insns/s; " \
	"peak RSS %d KiB (1000 insns: %d KiB, ratio %.2f)\n",
	num(n), t, num(n) / t / 1e6, rb, rs, rb / rs }'
