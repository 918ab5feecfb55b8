#!/bin/sh
# htr record --ring on a long run: tools/bench/spin.c for 10^8 iterations
# (about 10^9 instructions) with --ring 8M.  Samples the ring's files (the
# temporary directory beside OUT) every 0.5 s while it runs and prints the
# largest size seen (must stay <= 8 MiB), then builds the last window and
# compares its instruction count with perf script's decode of the same
# file (the recorder writes no truth with --ring).
# usage: ring_check.sh HTR [ITERATIONS] [RING]
set -u
htr=$1
iters=${2:-100000000}
ring=${3:-8M}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
cc -O1 -o "$work/spin" "$here/spin.c" || exit 1
out=$work/spin.data
"$htr" record --ring "$ring" --heartbeat 5 -o "$out" -- "$work/spin" "$iters" \
	>/dev/null 2>"$work/rec.err" &
rp=$!
max=0 n=0
while kill -0 "$rp" 2>/dev/null; do
	b=$(cat "$out".rec-*/t*.pt.* 2>/dev/null | wc -c)
	[ "$b" -gt "$max" ] && max=$b
	n=$((n + 1))
	sleep 0.5
done
wait "$rp" || { cat "$work/rec.err"; exit 1; }
cat "$work/rec.err"
case $ring in
*K) limit=$((${ring%K} * 1024)) ;;
*M) limit=$((${ring%M} * 1048576)) ;;
*G) limit=$((${ring%G} * 1073741824)) ;;
*) limit=$ring ;;
esac
echo "ring_check: $n samples of the ring's files, largest $max bytes (ring $limit)"
[ "$max" -le "$limit" ] || { echo "ring_check: FAIL: above the ring"; exit 1; }
"$htr" build -q "$out" -o "$work/spin.htr" || exit 1
h=$("$htr" info "$work/spin.htr" | awk '$1 == "instructions:" { print $2 }')
if command -v perf >/dev/null 2>&1; then
	p=$(HOME=$work perf script -f -i "$out" --itrace=i0ns -F tid 2>/dev/null |
		wc -l)
	echo "ring_check: last window: htr $h instructions, perf script $p"
	[ "$h" = "$p" ] || { echo "ring_check: FAIL: htr and perf differ"; exit 1; }
else
	echo "ring_check: last window: htr $h instructions (no perf to compare)"
fi
