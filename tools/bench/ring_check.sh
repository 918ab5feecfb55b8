#!/bin/sh
# htr record --ring on a long run: tools/bench/spin.c for 10^8 iterations
# (about 10^9 instructions) with --ring 8M.  Samples the ring's files (the
# temporary directory beside OUT) every 0.5 s while it runs and prints the
# largest size seen of the trace's (must stay <= 8 MiB) and of the truth's
# segments (at most 8 files, as the trace's), then builds the last window
# and compares its tree with the recorder's truth of that window
# (OUT.t0.truth, record-cmp: every block, the gaps, the times) and its
# instruction count with perf script's decode of the same file.
# usage: ring_check.sh HTR RECORD-CMP [ITERATIONS] [RING]
set -u
htr=$1
cmp=$2
iters=${3:-100000000}
ring=${4:-8M}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
cc -O1 -o "$work/spin" "$here/spin.c" || exit 1
out=$work/spin.data
"$htr" record --ring "$ring" --heartbeat 5 -o "$out" -- \
	"$work/spin" "$iters" >/dev/null 2>"$work/rec.err" &
rp=$!
max=0 n=0 tmax=0 tsegs=0
while kill -0 "$rp" 2>/dev/null; do
	b=$(cat "$out".rec-*/t*.pt.* 2>/dev/null | wc -c)
	[ "$b" -gt "$max" ] && max=$b
	t=$(cat "$out".rec-*/t*.truth.[0-9]* 2>/dev/null | wc -c)
	[ "$t" -gt "$tmax" ] && tmax=$t
	s=$(ls "$out".rec-*/ 2>/dev/null | grep -c '^t0\.truth\.[0-9]*$')
	[ "$s" -gt "$tsegs" ] && tsegs=$s
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
echo "ring_check: $n samples of the ring's files, largest $max bytes of trace (ring $limit), $tmax bytes of truth in at most $tsegs segments"
[ "$max" -le "$limit" ] || { echo "ring_check: FAIL: above the ring"; exit 1; }
[ "$tsegs" -le 8 ] || { echo "ring_check: FAIL: more truth segments than trace segments"; exit 1; }
"$htr" build -q "$out" -o "$work/spin.htr" || exit 1
h=$("$htr" info "$work/spin.htr" | awk '$1 == "instructions:" { print $2 }')
echo "ring_check: last window's truth: $(wc -c <"$out.t0.truth") bytes, $(awk '$1 == "blocks" { print $2 }' "$out.t0.truth") blocks"
res=$("$cmp" --tsc "$out.t0.truth" "$work/spin.htr" 2>&1)
echo "ring_check: last window against the truth: $res"
case $res in
ok*) ;;
*) echo "ring_check: FAIL: the last window's tree is not its truth"; exit 1 ;;
esac
if command -v perf >/dev/null 2>&1; then
	p=$(HOME=$work perf script -f -i "$out" --itrace=i0ns -F tid 2>/dev/null |
		wc -l)
	echo "ring_check: last window: htr $h instructions, perf script $p"
	[ "$h" = "$p" ] || { echo "ring_check: FAIL: htr and perf differ"; exit 1; }
else
	echo "ring_check: last window: htr $h instructions (no perf to compare)"
fi
