#!/bin/sh
# LLDB's own call listing against the plugin, on one bundle of >= 10^7
# instructions: wall time of `thread trace dump function-calls` (LLDB
# builds its call forest in memory, every session), of the plugin's first
# session (`htr build` decodes and writes the .htr, `htr dump --tsc`
# computes the sidecar) and of a second session (the .htr and sidecar are
# reused), each from a fresh lldb-22 that loads the bundle; then the
# ratios.  All output goes to /dev/null: the figures are the work, not the
# terminal.
# usage: lldb_dump.sh HTR_SYNTH PLUGIN [INSNS]  (default 10M)
set -eu
synth=$1 plugin=$2 n=${3:-10M}
if ! command -v lldb-22 >/dev/null 2>&1 || [ ! -f "$plugin" ]; then
	echo "lldb-dump: skipped (no lldb-22 or no plugin)"
	exit 0
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/htr-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
export HOME="$dir" XDG_CACHE_HOME="$dir/cache"
echo "lldb-dump: synthesizing $n instructions in $dir" >&2
"$synth" -q --no-truth -n "$n" --base 0x555555554000 "$dir/P"

now() { date +%s.%N; }
# secs CMD...: run CMD with its output to /dev/null, print the seconds.
secs() {
	t0=$(now)
	"$@" >/dev/null 2>&1 || echo "lldb-dump: failed: $*" >&2
	t1=$(now)
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }'
}
lldb() { lldb-22 -b -o "plugin load $plugin" -o "trace load $dir/P.json" "$@"; }

base=$(secs lldb)
calls=$(secs lldb -o "thread trace dump function-calls")
first=$(secs lldb -o "htr build" -o "htr dump --tsc")
second=$(secs lldb -o "htr build" -o "htr dump --tsc")
top=$(secs lldb -o "htr build" -o "htr top")
insns=$(lldb -o "htr build" | sed -n 's/.*(\([0-9]*\) instructions.*/\1/p')
awk -v b="$base" -v c="$calls" -v f="$first" -v s="$second" -v t="$top" \
    -v n="$insns" 'BEGIN {
	printf "lldb-dump: %s instructions; wall seconds, each a new lldb-22 session\n", n
	printf "  trace load only                          %8.2f\n", b
	printf "  thread trace dump function-calls         %8.2f\n", c
	printf "  htr build + htr dump --tsc, first        %8.2f  (%.1fx LLDB)\n", f, c / f
	printf "  htr build + htr dump --tsc, again        %8.2f  (%.1fx LLDB)\n", s, c / s
	printf "  htr build + htr top, again               %8.2f  (%.1fx LLDB)\n", t, c / t
}'
