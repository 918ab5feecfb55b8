#!/bin/sh
# LLDB's own call listing against the plugin: wall time and peak RSS of
# `thread trace dump function-calls` (LLDB builds its call forest in
# memory, every session), of the plugin's first session (`htr build`
# decodes and writes the .htr, `htr dump --tsc` computes the sidecar) and
# of a second one (the .htr and sidecar are reused), each a fresh lldb-22
# that loads the bundle; then the ratios.
#
# Two traces: SMALL instructions (default 1M), where every command runs,
# and BIG (default 10M), where only the plugin runs unless LLDB_BIG=1:
# LLDB's forest takes about 5 GB per million instructions, so 10M needs
# about twice this machine's memory.  LLDB runs under a 16 GiB
# address-space limit either way, so a too-big trace fails instead of
# taking the machine down.  Output goes to /dev/null: the figures are the
# work, not the terminal.
# usage: lldb_dump.sh HTR_SYNTH PLUGIN [BIG [SMALL]]
set -eu
synth=$1 plugin=$2 big=${3:-10M} small=${4:-1M}
if ! command -v lldb-22 >/dev/null 2>&1 || [ ! -f "$plugin" ]; then
	echo "lldb-dump: skipped (no lldb-22 or no plugin)"
	exit 0
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/htr-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
export HOME="$dir" XDG_CACHE_HOME="$dir/cache"

# run TRACE CMD...: a new lldb-22 session on TRACE that runs the lldb
# commands CMD; prints "SECONDS PEAK_MIB", or "- -" when it failed.
run() {
	t=$1
	shift
	set -- -o "plugin load $plugin" -o "trace load $dir/$t.json" "$@"
	if (ulimit -v 16777216 && /usr/bin/time -f '%e %M' -o "$dir/time" \
		lldb-22 --no-lldbinit -b "$@") >/dev/null 2>&1; then
		awk '{ printf "%.2f %.0f", $1, $2 / 1024 }' "$dir/time"
	else
		echo "- -"
	fi
}

# row LABEL "SECONDS MIB" [BASE_SECONDS]: one line of the table.
row() {
	set -- "$1" $2 "${3:-}"
	awk -v l="$1" -v s="$2" -v m="$3" -v b="$4" 'BEGIN {
		if (s == "-") { printf "  %-40s  did not finish\n", l; exit }
		printf "  %-40s %8.2f s %7d MiB", l, s, m
		if (b != "" && b != "-" && s > 0) printf "  (%.1fx faster)", b / s
		printf "\n"
	}'
}

bench() {
	t=$1 n=$2 lldb=$3
	echo "lldb-dump: synthesizing $n instructions" >&2
	"$synth" -q --no-truth -n "$n" --base 0x555555554000 "$dir/$t"
	insns=$(lldb-22 --no-lldbinit -b -o "plugin load $plugin" \
		-o "trace load $dir/$t.json" -o "htr build" -o "htr dump --tsc" \
		2>/dev/null | sed -n 's/.*(\([0-9]*\) instructions.*/\1/p')
	rm -rf "$XDG_CACHE_HOME"
	echo "lldb-dump: $insns instructions (wall seconds and peak RSS of each lldb-22 session)"
	row "trace load only" "$(run "$t")"
	calls=-
	if [ "$lldb" = 1 ]; then
		r=$(run "$t" -o "thread trace dump function-calls")
		calls=${r%% *}
		row "thread trace dump function-calls" "$r"
	else
		echo "  thread trace dump function-calls          not run (LLDB_BIG=1 runs it)"
	fi
	row "htr build + htr dump --tsc, first" \
		"$(run "$t" -o "htr build" -o "htr dump --tsc")" "$calls"
	row "htr build + htr dump --tsc, again" \
		"$(run "$t" -o "htr build" -o "htr dump --tsc")" "$calls"
	row "htr build + htr top, again" \
		"$(run "$t" -o "htr build" -o "htr top")" "$calls"
	rm -rf "$XDG_CACHE_HOME" "$dir/$t".*
}

bench S "$small" 1
bench B "$big" "${LLDB_BIG:-0}"
