#!/bin/sh
# htr insns against independent ground truth: the synthesizer's and the
# recorder's truth (the address of each block's first instruction is its
# function's entry; the times at its first and last instruction), objdump
# -d of the same addresses (mnemonics in AT&T and Intel syntax, branch
# targets with their <FUNC+0xOFF>), nm's symbols (WHERE as FUNC+0xOFF),
# perf script's times in ns at each block's last instruction (a return,
# where the build keeps the decoder's time).  The trace found without
# --trace: next to the .htr for a raw-trace build and a perf.data build,
# after both files moved to another directory, under another name by its
# size and hash; nothing found, or a wrong --trace: one line, exit 1.
#
# usage: test_insns.sh HTR HTR_SYNTH
# exit: 0 all as expected, 1 a failure, 77 skipped (a tool is missing)
set -u
htr=$1 synth=$2
here=$(cd "$(dirname "$0")" && pwd)
for t in objdump nm python3; do
	command -v $t >/dev/null 2>&1 ||
		{ echo "SKIP: $t is not installed"; exit 77; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
mkdir "$work/home"
export HOME="$work/home"
fails=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
ok() {
	echo "ok      $*"
}

# check ARGS: compare a listing with the truths (tests/insns_check.py).
check() {
	if res=$(python3 "$here/insns_check.py" "$@" 2>&1); then
		ok "$res"
	else
		fail "$res"
	fi
}

# expect STATUS PATTERN CMD...: exit status, one stderr line matching.
expect() {
	want=$1 pat=$2
	shift 2
	"$@" >"$work/out" 2>"$work/err"
	got=$?
	if [ "$got" != "$want" ] || ! grep -q -- "$pat" "$work/err" ||
	   [ "$(wc -l <"$work/err")" != 1 ]; then
		fail "$* -> exit $got (want $want, '$pat'): $(head -2 "$work/err")"
	else
		ok "$* -> $got: $(cat "$work/err")"
	fi
}

# --- a synthesized trace, built from the raw .pt ---
timing="--cpuid-0x15-eax 1 --cpuid-0x15-ebx 2 --mtc-freq 6 --nom-freq 16"
"$synth" -q -S mixed -s 5 -n 2e4 "$work/t" || exit 1
# shellcheck disable=SC2086
"$htr" build -q $timing "$work/t.pt" --elf "$work/t.elf" \
	-o "$work/t.htr" || exit 1
t0=$("$htr" info "$work/t.htr" |
	awk '$1 == "time:" { split($3, a, "[.][.]"); print a[1] }')
objdump -d -C --no-show-raw-insn "$work/t.elf" >"$work/t.att"
objdump -d -C -M intel --no-show-raw-insn "$work/t.elf" >"$work/t.intel"
nm -C -S "$work/t.elf" >"$work/t.nm"
for s in att intel; do
	if ! "$htr" insns --syntax $s -n 0 "$work/t.htr" >"$work/t.$s.out" \
		2>"$work/err" || [ -s "$work/err" ]; then
		fail "synth: insns --syntax $s without --trace: $(head -1 "$work/err")"
		continue
	fi
	check --what "synth $s" --listing "$work/t.$s.out" --unit ticks \
		--truth "$work/t.truth" --t0 "$t0" --objdump "$work/t.$s" \
		--syntax $s --nm "$work/t.nm" --module t.elf --bias 0
done

# The trace moves with the .htr; under another name it is found by its
# size and hash; the listing stays the same.
mkdir "$work/moved" "$work/other" "$work/lone" "$work/wrong"
cp "$work/t.htr" "$work/t.pt" "$work/moved/"
cp "$work/t.htr" "$work/other/renamed.htr"
cp "$work/t.pt" "$work/other/capture.bin"
for h in moved/t.htr other/renamed.htr; do
	if "$htr" insns -n 0 "$work/$h" >"$work/found.out" 2>"$work/err" &&
	   cmp -s "$work/found.out" "$work/t.att.out"; then
		ok "synth: $h finds its trace without --trace"
	else
		fail "synth: $h: $(head -1 "$work/err")"
	fi
done
# Nothing there; a file of the trace's name that is another trace; a
# wrong --trace, also of the right size.
cp "$work/t.htr" "$work/lone/"
expect 1 "lone/t.htr: its trace (.* bytes, hash [0-9a-f]*) is not at .*lone/t.pt.*give --trace" \
	"$htr" insns "$work/lone/t.htr"
"$synth" -q -S mixed -s 6 -n 2e4 "$work/s6" || exit 1
cp "$work/t.htr" "$work/wrong/"
cp "$work/s6.pt" "$work/wrong/t.pt"
expect 1 "wrong/t.pt: not the trace" "$htr" insns "$work/wrong/t.htr"
expect 1 "t.elf: not the trace .*--trace for" \
	"$htr" insns --trace "$work/t.elf" "$work/t.htr"
size=$(wc -c <"$work/t.pt")
head -c "$size" /dev/zero >"$work/zeros.pt"
expect 1 "zeros.pt: not the trace" \
	"$htr" insns --trace "$work/zeros.pt" "$work/t.htr"
expect 2 "--syntax: bad value 'gas'" "$htr" insns --syntax gas "$work/t.htr"

# --- a recorded program, built from its perf.data ---
if ! command -v qemu-x86_64 >/dev/null 2>&1 || ! command -v cc >/dev/null 2>&1
then
	echo "SKIP    a recorded program (needs qemu-user and cc)"
	[ $fails -eq 0 ] || exit 1
	exit 0
fi
cc -O0 -g -o "$work/calls" "$here/record/calls.c" || exit 1
mkdir "$work/rec"
"$htr" record -q -o "$work/rec/rec.data" -- "$work/calls" >/dev/null ||
	exit 1
"$htr" build -q "$work/rec/rec.data" || exit 1
h=$(ls "$work"/rec/rec.*.htr)
objdump -d -C --no-show-raw-insn "$work/calls" >"$work/calls.att"
objdump -d -C -M intel --no-show-raw-insn "$work/calls" >"$work/calls.intel"
nm -C -S "$work/calls" >"$work/calls.nm"
# The program's load bias, from the truth's module-relative entries.
bias=$(awk '$1 == "func" && $5 ~ /^calls\+0x/ {
	sub(/^calls\+/, "", $5); print $3 " " $5; exit }' \
	"$work"/rec/rec.data.t0.truth | python3 -c 'import sys
a, o = sys.stdin.read().split(); print(int(a, 16) - int(o, 16))')
perf_args=""
if command -v perf >/dev/null 2>&1; then
	perf script -f -i "$work/rec/rec.data" --itrace=i1i -F ip,time --ns \
		>"$work/perf.txt" 2>/dev/null && perf_args="--perf $work/perf.txt"
else
	echo "SKIP    times against perf script (no perf: Debian package linux-perf)"
fi
for s in att intel; do
	if ! "$htr" insns --syntax $s -n 0 "$h" >"$work/rec.$s.out" \
		2>"$work/err" || [ -s "$work/err" ]; then
		fail "recorded: insns --syntax $s without --trace: $(head -1 "$work/err")"
		continue
	fi
	# shellcheck disable=SC2086
	check --what "recorded $s" --listing "$work/rec.$s.out" --unit ns \
		--truth "$work"/rec/rec.data.t0.truth --objdump "$work/calls.$s" \
		--syntax $s --nm "$work/calls.nm" --module calls \
		--bias "$bias" $perf_args
done
# Both files moved; the .htr renamed (one thread: -o NAME.htr), found as
# the perf.data beside it that holds its thread's trace.
mkdir "$work/recmoved" "$work/recother"
mv "$work/rec/rec.data" "$h" "$work/recmoved/"
cp "$work/recmoved/rec.data" "$work/recother/session.data"
cp "$work/recmoved/$(basename "$h")" "$work/recother/calls.htr"
for f in "recmoved/$(basename "$h")" recother/calls.htr; do
	if "$htr" insns -n 0 "$work/$f" >"$work/found.out" 2>"$work/err" &&
	   cmp -s "$work/found.out" "$work/rec.att.out"; then
		ok "recorded: $f finds its perf.data without --trace"
	else
		fail "recorded: $f: $(head -1 "$work/err")"
	fi
done
# Another recording of the same program: another thread, another trace.
mkdir "$work/rec2"
"$htr" record -q -o "$work/rec2/rec.data" -- "$work/calls" >/dev/null ||
	exit 1
expect 1 "rec2/rec.data: no trace of thread" \
	"$htr" insns --trace "$work/rec2/rec.data" "$work/recother/calls.htr"
rm "$work/recother/session.data"
cp "$work/rec2/rec.data" "$work/recother/calls.data"
expect 1 "calls.data: no trace of thread" \
	"$htr" insns "$work/recother/calls.htr"
rm "$work/recother/calls.data"
expect 1 "its trace .* is not at .*calls.data.*nor in any perf.data" \
	"$htr" insns "$work/recother/calls.htr"

[ $fails -eq 0 ] || exit 1
exit 0
