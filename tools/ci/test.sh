#!/bin/sh
# Set up as demo.sh does, then run the whole test suite.
set -eu
cd "$(dirname "$0")/../.."
. tools/ci/setup.sh
rc=0
# Under -Db_sanitize=...,undefined a diagnostic must fail its test, not
# scroll by (UBSan goes on after one by default); other builds ignore it.
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
meson test -C "${HTR_BUILDDIR:-build}" --print-errorlogs || rc=$?
# What the suites skipped and why (their own one-line tallies).
grep -h ': skipped [0-9]* cases' "${HTR_BUILDDIR:-build}/meson-logs/testlog.txt" || true
exit $rc
