#!/bin/sh
# The LLDB plugin (plugins/lldb/libhtr-lldb.so) in lldb-22's batch mode, on
# synthesizer trace bundles: its tree and top equal the CLI's on the same
# trace, a second session reuses the .htr, bad use fails cleanly.
# Exit 0 ok, 1 failure, 77 skipped (lldb-22 or the plugin absent).
# Env: HTR_BUILD_ROOT (meson sets it), LLDB (default lldb-22).
build=${HTR_BUILD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)/build}
LLDB=${LLDB:-lldb-22}
plugin=$build/plugins/lldb/libhtr-lldb.so
htr=$build/tools/htr/htr
synth=$build/tools/synth/htr-synth

if ! command -v "$LLDB" >/dev/null 2>&1; then
	echo "skipped: $LLDB not installed"
	exit 77
fi
if [ ! -f "$plugin" ]; then
	echo "skipped: $plugin not built (meson found no liblldb)"
	exit 77
fi

# lldb-22 itself is not instrumented, so an ASan plugin cannot load into it
# (the sanitizer runtime must come first in the process).
if nm -D "$plugin" 2>/dev/null | grep -q '__asan_init'; then
	echo "skipped: $plugin built with AddressSanitizer; lldb-22 cannot load it"
	exit 77
fi

T=$(mktemp -d /tmp/htr-test-lldb.XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT
# The default output directory lives in the cache: keep it in $T.
XDG_CACHE_HOME=$T/cache
export XDG_CACHE_HOME
fails=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

# lldb OUT CMD...: one batch session, the plugin loaded; stdout and stderr
# to OUT; returns lldb's status.
lldb() {
	out=$1
	shift
	set -- -o "plugin load $plugin" "$@"
	"$LLDB" --no-lldbinit -b "$@" >"$out" 2>&1
}

# section OUT CMD: the output of the command CMD in session output OUT
# (the lines after "(lldb) CMD" up to the next prompt).
section() {
	awk -v c="(lldb) $2" '
		$0 == c { on = 1; next }
		/^\(lldb\) / { on = 0 }
		on' "$1"
}

base=0x555555554000
for sc in basic mixed callback interrupt; do
	P=$T/$sc
	if ! "$synth" --quiet --seed 7 --scenario "$sc" --insns 200k \
	    --base "$base" "$P" >"$T/synth.log" 2>&1; then
		fail "$sc: htr-synth"; cat "$T/synth.log"; continue
	fi
	cpu=$(sed -n 's/.*"family": *\([0-9]*\), *"model": *\([0-9]*\), *"stepping": *\([0-9]*\).*/\1\/\2\/\3/p' "$P.json")
	# The CLI's view of the same trace: same ELF at the same base, CPU.
	"$htr" build "$P.pt" --elf "$P.elf@$base" --cpu "$cpu" -q 2>/dev/null \
		-o "$T/cli-$sc.htr" || { fail "$sc: htr build"; continue; }
	"$htr" dump "$T/cli-$sc.htr" >"$T/cli.dump" &&
	"$htr" dump --tsc "$T/cli-$sc.htr" >"$T/cli.tsc" &&
	"$htr" top --limit 0 "$T/cli-$sc.htr" >"$T/cli.top" &&
	"$htr" find --sort cost '*' "$T/cli-$sc.htr" >"$T/cli.find" ||
		{ fail "$sc: htr dump/top/find"; continue; }

	O=$T/out-$sc
	if ! lldb "$T/s1" -o "trace load $P.json" -o "htr build -o $O" \
	    -o "htr dump" -o "htr dump --tsc" -o "htr top --limit 0" \
	    -o "htr find --sort cost *"; then
		fail "$sc: first session"; cat "$T/s1"; continue
	fi
	section "$T/s1" "htr build -o $O" >"$T/build1"
	grep -q "^thread 1: built $O/thread-1.htr" "$T/build1" ||
		{ fail "$sc: build did not say built"; cat "$T/build1"; }
	section "$T/s1" "htr dump" >"$T/p.dump"
	section "$T/s1" "htr dump --tsc" >"$T/p.tsc"
	section "$T/s1" "htr top --limit 0" >"$T/p.top"
	section "$T/s1" "htr find --sort cost *" >"$T/p.find"

	# Tree: each plugin line is the CLI's line plus "  NAME".
	n1=$(wc -l <"$T/cli.dump"); n2=$(wc -l <"$T/p.dump")
	[ "$n1" -gt 10 ] && [ "$n1" = "$n2" ] ||
		fail "$sc: dump has $n2 lines, the CLI's $n1"
	if ! awk 'NR == FNR { cli[FNR] = $0; next }
		index($0, cli[FNR] "  ") != 1 { print "line " FNR ": " $0 " / " cli[FNR]; bad = 1; exit 1 }
		END { exit bad }' "$T/cli.dump" "$T/p.dump"; then
		fail "$sc: dump differs from the CLI's"
	fi
	# --tsc: indentation, LOCAL, TOTAL, PCT equal; names equal too here
	# (the synthesizer's symbols; LLDB demangles as libhtr does).
	strip='{ match($0, /^ */); ind = RLENGTH; print ind, $(NF-2), $(NF-1), $NF }'
	awk "$strip" "$T/cli.tsc" >"$T/cli.tsc.n"
	awk "$strip" "$T/p.tsc" >"$T/p.tsc.n"
	[ -s "$T/p.tsc.n" ] && cmp -s "$T/cli.tsc.n" "$T/p.tsc.n" ||
		fail "$sc: dump --tsc figures differ from the CLI's"
	names=$(paste -d '\n' "$T/cli.tsc" "$T/p.tsc" | awk '
		NR % 2 { c = $0; next } $0 != c { n++ } END { print n + 0 }')
	[ "$names" = 0 ] || {
		fail "$sc: $names dump --tsc names differ from libhtr's"
		diff "$T/cli.tsc" "$T/p.tsc" | head -6
	}
	# top: calls, ticks and slowest block equal, in the same order.
	awk '{ print $1, $2, $3, $4 }' "$T/cli.top" >"$T/cli.top.n"
	awk '{ print $1, $2, $3, $4 }' "$T/p.top" >"$T/p.top.n"
	[ -s "$T/p.top.n" ] && cmp -s "$T/cli.top.n" "$T/p.top.n" ||
		{ fail "$sc: top differs from the CLI's"; diff "$T/cli.top" "$T/p.top" | head; }

	# find: every invocation, the CLI's lines (names equal here too).
	[ -s "$T/p.find" ] && cmp -s "$T/cli.find" "$T/p.find" ||
		{ fail "$sc: find differs from the CLI's"; diff "$T/cli.find" "$T/p.find" | head; }

	# A second session reuses the .htr (identity key matches).
	before=$(stat -c %Y.%i "$O/thread-1.htr")
	if ! lldb "$T/s2" -o "trace load $P.json" -o "htr build -o $O" \
	    -o "htr top --limit 0"; then
		fail "$sc: second session"; cat "$T/s2"; continue
	fi
	grep -q "^thread 1: reused $O/thread-1.htr (identity matches" "$T/s2" ||
		{ fail "$sc: second build did not reuse"; cat "$T/s2"; }
	[ "$(stat -c %Y.%i "$O/thread-1.htr")" = "$before" ] ||
		fail "$sc: second build rewrote the .htr"
	section "$T/s2" "htr top --limit 0" | cmp -s - "$T/p.top" ||
		fail "$sc: top of the reused .htr differs"
	echo "ok: $sc ($n1 blocks)"
done

# goto: a block's instructions are the CLI cursor's (htr insns), and the
# LLDB item it names for each is that instruction in LLDB's own trace.
P=$T/mixed
blk=$("$htr" find --sort cost '*' "$T/cli-mixed.htr" | awk 'NR == 7 { print $1 }')
"$htr" insns --trace "$P.pt" --block "$blk" --count 12 "$T/cli-mixed.htr" |
	awk '$1 ~ /^[0-9]+$/ { print $1, $2 }' >"$T/cli.insns"
if lldb "$T/g1" -o "trace load $P.json" -o "htr build -o $T/out-mixed" \
    -o "htr goto --count 12 $blk"; then
	section "$T/g1" "htr goto --count 12 $blk" |
		awk '$1 ~ /^[0-9]+$/ { print $1, $3 }' >"$T/p.insns"
	item=$(section "$T/g1" "htr goto --count 12 $blk" |
		awk '$1 ~ /^[0-9]+$/ { print $2; exit }')
	first=$(head -1 "$T/p.insns" | cut -d' ' -f2)
	lldb "$T/g2" -o "trace load $P.json" \
		-o "thread trace dump instructions --forwards --id $item -c 1"
	if [ -s "$T/p.insns" ] && cmp -s "$T/cli.insns" "$T/p.insns" &&
	   ! section "$T/g1" "htr goto --count 12 $blk" | grep -q '!' &&
	   grep -q "^ *$item: $(printf '0x%016x' "$first")" "$T/g2"; then
		echo "ok: goto $blk: the CLI cursor's instructions, LLDB item $item is the first"
	else
		fail "goto $blk: differs"; diff "$T/cli.insns" "$T/p.insns" | head -4
		head -5 "$T/g2"
	fi
else
	fail "goto session"; cat "$T/g1"
fi

# The default directory (the cache) is reused the same way.
P=$T/basic
lldb "$T/d1" -o "trace load $P.json" -o "htr build" ||
	{ fail "default dir: first build"; cat "$T/d1"; }
lldb "$T/d2" -o "trace load $P.json" -o "htr build" ||
	{ fail "default dir: second build"; cat "$T/d2"; }
grep -q "^thread 1: built $XDG_CACHE_HOME/htr-lldb/[0-9a-f]*/thread-1.htr" "$T/d1" &&
grep -q "^thread 1: reused $XDG_CACHE_HOME/htr-lldb/[0-9a-f]*/thread-1.htr" "$T/d2" ||
	{ fail "default dir: not built, then reused"; cat "$T/d1" "$T/d2"; }
# A changed trace is not mistaken for the old one.
cp "$P.json" "$T/changed.json"
cp "$P.elf" "$T/changed.elf"
"$synth" --quiet --no-truth --no-bundle --seed 8 --scenario basic \
	--insns 200k --base "$base" "$T/other" >/dev/null 2>&1 &&
	cp "$T/other.pt" "$T/changed.pt" &&
	sed -i "s/basic\./changed./g" "$T/changed.json" ||
	fail "changed trace: setup"
lldb "$T/d3" -o "trace load $T/changed.json" -o "htr build -o $T/out-basic"
grep -q "^thread 1: built $T/out-basic/thread-1.htr" "$T/d3" ||
	{ fail "changed trace: the old .htr was reused"; cat "$T/d3"; }

# Bad use: clean errors, no crash.
# check NAME EXPECTED-ERROR CMD...
check() {
	name=$1 want=$2
	shift 2
	lldb "$T/bad" "$@"
	rc=$?
	if [ "$rc" -ge 128 ] || grep -qi "stack dump\|PLEASE submit" "$T/bad"; then
		fail "$name: crashed (status $rc)"; cat "$T/bad"
	elif [ "$rc" = 0 ]; then
		fail "$name: no failure"; cat "$T/bad"
	elif ! grep -q "^error: $want" "$T/bad"; then
		fail "$name: expected 'error: $want'"; cat "$T/bad"
	fi
}
check "no target" "no target" -o "htr build"
check "no trace" "no process" -o "file $P.elf" -o "htr build"
check "dump without target" "no target" -o "htr dump --tsc"
check "dump before build" "htr dump: no .htr for this trace yet" \
	-o "trace load $P.json" -o "htr dump"
check "top before build" "htr top: no .htr for this trace yet" \
	-o "trace load $P.json" -o "htr top"
check "bad option" "htr dump: unexpected argument '--bogus'" \
	-o "trace load $P.json" -o "htr build -o $T/out-basic" -o "htr dump --bogus"
check "bad depth" "htr dump: --depth: bad value '0'" \
	-o "trace load $P.json" -o "htr build -o $T/out-basic" -o "htr dump --depth 0"
check "unknown thread" "htr top: no .htr for thread 99" \
	-o "trace load $P.json" -o "htr build -o $T/out-basic" -o "htr top --thread 99"

# Help.
lldb "$T/help" -o "help htr" -o "help htr build" -o "help htr dump" \
	-o "help htr top" -o "help htr find" -o "help htr goto" ||
	fail "help failed"
for w in "build --" "dump  --" "top   --" "find  --" "goto  --" \
	 "Syntax: htr build" "Syntax: htr dump" "Syntax: htr top" \
	 "Syntax: htr find" "Syntax: htr goto" "reuses the file"; do
	grep -q -- "$w" "$T/help" || fail "help lacks '$w'"
done

if [ "$fails" -ne 0 ]; then
	echo "$fails failure(s)"
	exit 1
fi
echo "all lldb plugin checks passed"
