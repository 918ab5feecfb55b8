#!/bin/sh
# The fuzz targets run for longer (default 600 s each), with their figures:
# executions, executions per second, crashes.  Not run by meson test.
# usage: tools/bench/fuzz.sh [SECONDS_PER_TARGET [TARGET...]]
set -eu
cd "$(dirname "$0")/../.."
secs=${1:-600}
[ $# -gt 0 ] && shift
exec tools/ci/fuzz.sh "$secs" "$@"
