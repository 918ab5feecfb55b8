#!/bin/sh
# The main job on the sample that ships in tests/data: build its call tree
# with htr, show the file's header, the top of the tree, where the time
# went (TSC ticks per function and per call), and check the trace itself
# against its ground truth with plain libipt.
set -eu
cd "$(dirname "$0")/../.."
. tools/ci/setup.sh

out=${HTR_DEMO_DIR:-build/demo}
mkdir -p "$out"
htr=build/tools/htr/htr
set -x
"$htr" build tests/data/sample.pt --elf tests/data/sample.elf \
	--cpuid-0x15-eax 1 --cpuid-0x15-ebx 2 --mtc-freq 6 --nom-freq 16 \
	-o "$out/sample.htr"
"$htr" info "$out/sample.htr"
"$htr" dump --depth 3 "$out/sample.htr" | head -n 25
rm -rf "$out/sample.htr.lmdb"
"$htr" top --limit 5 "$out/sample.htr"
"$htr" dump --tsc --depth 3 "$out/sample.htr"
build/tools/synth/htr-synth --verify tests/data/sample
