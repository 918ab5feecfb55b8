#!/bin/sh
# The fuzz targets run for longer (default 600 s each), with their figures:
# executions, executions per second, crashes.  Not run by meson test.
# usage: tools/bench/fuzz.sh [SECONDS_PER_TARGET]
set -eu
cd "$(dirname "$0")/../.."
exec tools/ci/fuzz.sh "${1:-600}"
