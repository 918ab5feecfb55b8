#!/bin/sh
# The main job on the sample: synthesize a program and its Intel PT trace
# (late start, gaps, overflows, abrupt end), then decode the trace with
# libipt and check it against the ground truth.
set -eu
cd "$(dirname "$0")/../.."
. tools/ci/setup.sh

out=${HTR_DEMO_DIR:-build/demo}
mkdir -p "$out"
build/tools/synth/htr-synth -S mixed -s 42 -n 200k "$out/sample"
build/tools/synth/htr-synth --verify "$out/sample"
echo "demo: files in $out: $(cd "$out" && ls sample.*)"
