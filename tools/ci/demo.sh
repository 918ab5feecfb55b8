#!/bin/sh
# The main job on the sample that ships in tests/data: build its call tree
# with htr, show the file's header, the top of the tree, where the time
# went (TSC ticks per function and per call), and check the trace itself
# against its ground truth with plain libipt.  Then the same on a real
# program: compile tests/record/calls.c, record it under qemu-user with
# htr record into a perf.data as perf would write it, build its tree from
# that and show where its time went, in nanoseconds.
set -eu
cd "$(dirname "$0")/../.."
. tools/ci/setup.sh

out=${HTR_DEMO_DIR:-build/demo}
mkdir -p "$out"
htr=${HTR_BUILDDIR:-build}/tools/htr/htr
set -x
"$htr" build tests/data/sample.pt --elf tests/data/sample.elf \
	--cpuid-0x15-eax 1 --cpuid-0x15-ebx 2 --mtc-freq 6 --nom-freq 16 \
	-o "$out/sample.htr"
"$htr" info "$out/sample.htr"
"$htr" dump --depth 3 "$out/sample.htr" | head -n 25
rm -rf "$out/sample.htr.lmdb"
"$htr" top --limit 5 "$out/sample.htr"
"$htr" dump --tsc --depth 3 "$out/sample.htr"
"${HTR_BUILDDIR:-build}"/tools/synth/htr-synth --verify tests/data/sample

# A real program, recorded without Intel PT hardware (about 3 s).
set +x
if [ ! -x "$htr" ] || ! command -v qemu-x86_64 >/dev/null 2>&1; then
	echo "demo: no qemu-x86_64: skipping the htr record part" >&2
	exit 0
fi
rm -rf "$out/calls-run" "$out"/calls.*
set -x
cc -O2 -g -o "$out/calls" tests/record/calls.c
# As 'perf record -e intel_pt//u --filter "filter * @ ./calls" -- ./calls'
# records it on a machine with Intel PT: a perf.data with one trace buffer
# per CPU (here 2 modelled CPUs) that htr build splits into threads by its
# context switches; only the program's own code is traced (the loader and
# libc run untraced).
"$htr" record -o "$out/calls.data" --cpus 2 --filter "$out/calls" -- \
	"$out/calls" >"$out/calls.stdout"
set +x
echo "demo: what the recorded program printed (its stdout):"
sed 's/^/  calls| /' "$out/calls.stdout"
set -x
"$htr" build "$out/calls.data"
"$htr" info "$out"/calls.*.htr
"$htr" top --limit 8 "$out"/calls.*.htr
"$htr" dump --tsc --depth 4 "$out"/calls.*.htr | head -n 20
