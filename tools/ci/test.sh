#!/bin/sh
# Set up as demo.sh does, then run the whole test suite.
set -eu
cd "$(dirname "$0")/../.."
. tools/ci/setup.sh
meson test -C "${HTR_BUILDDIR:-build}" --print-errorlogs
