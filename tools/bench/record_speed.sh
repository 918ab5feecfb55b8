#!/bin/sh
# htr record's speed and memory on a run of >= 10^8 instructions: a small C
# program (calls, loops, a library call now and then) recorded user-only
# with --raw.  Prints the recorder's summary (instructions per second and
# its peak RSS) and qemu's own speed without the recorder for comparison;
# then tests/record/deep.c, a recursion 10^5 deep: the time must grow
# with the instructions, not the depth (3*10^4 deep took 104 s, 2.2 s
# now, when the recorder looked at every open frame at every
# instruction).
# Not part of `meson test`; takes a few minutes.
#
# usage: record_speed.sh HTR [INSNS_MILLIONS]   (default 100)
set -eu
htr=$1
mill=${2:-100}
command -v qemu-x86_64 >/dev/null || { echo "SKIP: no qemu-x86_64"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
cc -O1 -o "$work/spin" "$(dirname "$0")/spin.c"
# about 10 instructions per iteration at -O1
iters=$((mill * 100000))
echo "record_speed: qemu-x86_64 -singlestep -d exec,nochain alone:"
/usr/bin/time -f "  %e s, peak RSS %M KiB (qemu)" qemu-x86_64 -singlestep \
	-d exec,nochain -D /dev/null "$work/spin" "$iters" >/dev/null
echo "record_speed: htr record --raw:"
"$htr" record --raw "$work/out" -- "$work/spin" "$iters" >/dev/null
du -sh "$work/out" | sed 's/^/  output /'
cc -O1 -o "$work/deep" "$(dirname "$0")/../../tests/record/deep.c"
echo "record_speed: htr record --raw, a recursion 10^5 deep:"
"$htr" record --raw "$work/deep.out" -- "$work/deep" 100000 >/dev/null
