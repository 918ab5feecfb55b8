#!/bin/sh
# Independent-decoder check of htr-synth against LLDB's intel-pt plugin;
# see lldb_check.py.  Usage: lldb_check.sh [-S SCENARIO] [-s SEED] [...]
# Exit 0 ok, 1 failure, 77 skipped (lldb-22 not installed).
# HTR_SYNTH may name the htr-synth binary (default: build/tools/synth).
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v "${LLDB:-lldb-22}" >/dev/null 2>&1; then
	echo "skipped: lldb-22 not installed"
	exit 77
fi
exec python3 "$here/lldb_check.py" "$@"
