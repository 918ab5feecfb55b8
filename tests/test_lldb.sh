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
	# top: calls, ticks and slowest block equal, in the same order
	# (an explicit order: the CLI's default is not the plugin's concern).
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

# --block N and --insn ID (the CLI's one vocabulary of places; --from ID
# is --insn's older name): a block the CLI's find lists, by its index and
# by its first instruction (the deepest block containing it is the block
# itself), gives the same subtree, the CLI's htr dump --from lines plus
# names; goto --block/--insn print the same instructions as goto BLOCK.
P=$T/mixed
set -- $("$htr" find --sort cost '*' "$T/cli-mixed.htr" |
	awk 'NR == 3 { split($3, r, /\.\./); print $1, r[1] }')
pb=$1 pi=$2
"$htr" dump --from "$pi" "$T/cli-mixed.htr" | grep -v '^#' >"$T/cli.sub"
if [ -z "$pb" ] || [ -z "$pi" ] || [ "$(wc -l <"$T/cli.sub")" -lt 2 ]; then
	fail "places: no block from htr find"
elif ! lldb "$T/pl" -o "trace load $P.json" -o "htr build -o $T/out-mixed" \
    -o "htr dump --block $pb" -o "htr dump --insn $pi" \
    -o "htr dump --from $pi" -o "htr dump -b $pb --tsc" \
    -o "htr dump --tsc" -o "htr goto --count 9 $pb" \
    -o "htr goto --count 9 --block $pb" -o "htr goto --count 9 --insn $pi" \
    -o "htr goto --count 9 --from $pi"; then
	fail "places: session"; cat "$T/pl"
else
	section "$T/pl" "htr dump --block $pb" >"$T/pl.b"
	section "$T/pl" "htr dump --insn $pi" >"$T/pl.i"
	section "$T/pl" "htr dump --from $pi" >"$T/pl.f"
	section "$T/pl" "htr goto --count 9 $pb" | grep '^[0-9]' >"$T/pl.g"
	section "$T/pl" "htr goto --count 9 --block $pb" | grep '^[0-9]' >"$T/pl.gb"
	section "$T/pl" "htr goto --count 9 --insn $pi" | grep '^[0-9]' >"$T/pl.gi"
	section "$T/pl" "htr goto --count 9 --from $pi" | grep '^[0-9]' >"$T/pl.gf"
	# --tsc of the subtree: its lines are the whole tree's --tsc lines
	# from the block on (the PCT column relative to the block).
	section "$T/pl" "htr dump -b $pb --tsc" | awk '{ $NF = ""; print }' >"$T/pl.bt"
	section "$T/pl" "htr dump --tsc" | awk '{ $NF = ""; print }' >"$T/pl.t"
	n=$(wc -l <"$T/pl.bt")
	if [ "$(wc -l <"$T/pl.b")" != "$(wc -l <"$T/cli.sub")" ] ||
	   ! awk 'NR == FNR { cli[FNR] = $0; next }
		index($0, cli[FNR] "  ") != 1 { bad = 1 } END { exit bad }' \
		"$T/cli.sub" "$T/pl.b" ||
	   ! cmp -s "$T/pl.b" "$T/pl.i" || ! cmp -s "$T/pl.b" "$T/pl.f"; then
		fail "places: dump --block $pb / --insn $pi / --from $pi differ from the CLI's dump --from $pi"
		diff "$T/cli.sub" "$T/pl.b" | head -4
	elif [ "$n" != "$(($(wc -l <"$T/pl.b") + 1))" ] ||
	     ! grep -qxF -f "$T/pl.bt" "$T/pl.t"; then
		fail "places: dump --block $pb --tsc is not a part of dump --tsc"
	elif [ "$(wc -l <"$T/pl.g")" != 9 ] || ! cmp -s "$T/pl.g" "$T/pl.gb" ||
	     ! cmp -s "$T/pl.g" "$T/pl.gi" || ! cmp -s "$T/pl.g" "$T/pl.gf"; then
		fail "places: goto $pb, --block $pb, --insn $pi, --from $pi differ"
		diff "$T/pl.g" "$T/pl.gi" | head -4
	else
		echo "ok: places: dump and goto by --block $pb, --insn $pi, --from $pi agree with the CLI"
	fi
fi

# htr record --lldb DIR: the bundle of a recording, loaded by lldb-22
# itself.  A two-thread program (tests/record/threads.c) recorded with
# --raw R --lldb B: LLDB's own decode of each thread of B (thread trace
# dump info: trace items less events and errors) has exactly the
# instructions of the recorder's truth for that thread; the plugin's
# .htr of each thread equals the truth (record-cmp: every block, the
# gaps, the TSC) and the CLI's htr build of the raw recording (htr dump);
# bad directories are one-line errors that leave nothing behind.
srcdir=$(cd "$(dirname "$0")" && pwd)
R=$T/rl
cmp_tool=$build/tests/record-cmp
mkdir -p "$R"
if ! command -v qemu-x86_64 >/dev/null 2>&1 || ! command -v cc >/dev/null 2>&1; then
	echo "skipped: htr record --lldb: no qemu-x86_64 or cc"
elif ! [ -x "$cmp_tool" ]; then
	# Built with htr record (Zydis), as the recorder is.
	echo "skipped: htr record --lldb: no $cmp_tool (htr built without htr record)"
# A directory name JSON must escape: a quote, a backslash, a space.
elif ! mkdir -p "$R/we\"ird \\dir" ||
     ! cc -O2 -g -pthread -o "$R/we\"ird \\dir/threads" "$srcdir/record/threads.c"; then
	fail "record --lldb: cannot compile threads.c"
elif ! "$htr" record --raw "$R/raw" --lldb "$R/b" -- \
	"$R/we\"ird \\dir/threads" >"$R/rec.out" 2>"$R/rec.err"; then
	if grep -q "built without" "$R/rec.err"; then
		echo "skipped: htr record --lldb: $(cat "$R/rec.err")"
	else
		fail "record --lldb: htr record"; cat "$R/rec.err"
	fi
else
	grep -q "^htr: record: .* -> $R/raw and $R/b/trace.json: " "$R/rec.err" ||
		{ fail "record --lldb: summary"; cat "$R/rec.err"; }
	nt=$(ls "$R/raw"/t*.truth | wc -l)
	args=""
	i=1
	while [ "$i" -le "$nt" ]; do
		args="$args $i"
		i=$((i + 1))
	done
	lldb "$R/s" -o "trace load $R/b/trace.json" \
		-o "thread trace dump info$args" -o "htr build -o $R/out" ||
		{ fail "record --lldb: session"; cat "$R/s"; }
	good=0
	for tr in "$R/raw"/t*.truth; do
		t=$(basename "$tr" .truth)
		set -- $(awk '$1 == "tid" { print $3 } $1 == "insns" { print $2 }' "$tr")
		tid=$1 want=$2
		# LLDB's decode of the thread: items, events, errors.
		set -- $(awk -v tid="$tid" '
			/^thread #[0-9]*: tid = / { on = $NF == tid }
			on && /Total number of trace items:/ { print $NF }
			on && /Number of individual (events|errors):/ { print $NF }' "$R/s")
		# Exactly, but where a PSB comes right after tracing resumed
		# past a syscall, LLDB ends the segment before it in an error
		# ("reached end of trace stream") and lists the syscall once
		# more: at most one instruction more per error.
		if [ $# -ne 3 ] || [ $(($1 - $2 - $3)) -lt "$want" ] ||
		   [ $(($1 - $2 - $3)) -gt $((want + $3)) ]; then
			fail "record --lldb: $t (tid $tid): LLDB decodes '$*' (items events errors), the truth $want instructions"
			continue
		fi
		grep -q "^thread $tid: built $R/out/thread-$tid.htr" "$R/s" ||
			{ fail "record --lldb: $t: the plugin built no thread-$tid.htr"; continue; }
		v=$("$cmp_tool" --tsc "$tr" "$R/out/thread-$tid.htr" 2>&1) ||
			{ fail "record --lldb: $t: the plugin's tree is not the truth: $v"; continue; }
		# build.args: one option and its value a line (a value
		# may hold spaces: the program's path does).
		set --
		while IFS= read -r l; do
			set -- "$@" "${l%% *}" "${l#* }"
		done <"$R/raw/build.args"
		"$htr" build -q "$R/raw/$t.pt" "$@" \
			-o "$R/cli-$t.htr" 2>"$R/cli.err" &&
		"$htr" dump "$R/cli-$t.htr" | tail -n +2 >"$R/cli.dump" &&
		"$htr" dump "$R/out/thread-$tid.htr" | tail -n +2 >"$R/p.dump" ||
			{ fail "record --lldb: $t: htr build/dump"; cat "$R/cli.err"; continue; }
		[ "$(wc -l <"$R/cli.dump")" -gt 3 ] && cmp -s "$R/cli.dump" "$R/p.dump" ||
			{ fail "record --lldb: $t: the plugin's tree differs from htr build's"; diff "$R/cli.dump" "$R/p.dump" | head -4; continue; }
		good=$((good + 1))
	done
	[ "$nt" -ge 2 ] && [ "$good" = "$nt" ] &&
		echo "ok: record --lldb: $nt threads: LLDB decodes the truth's instructions; the plugin's trees equal the truth and htr build's"

	# Bad directories: one line naming DIR, status 1 or 2, nothing written.
	# rec_bad NAME STATUS MESSAGE ARGS...
	rec_bad() {
		name=$1 want_rc=$2 want=$3
		shift 3
		rm -f "$R/bad.data"*
		"$htr" record -q -o "$R/bad.data" "$@" -- "$R/we\"ird \\dir/threads" \
			>/dev/null 2>"$R/bad.err"
		rc=$?
		if [ "$rc" != "$want_rc" ] || [ "$(wc -l <"$R/bad.err")" != 1 ] ||
		   ! grep -qF -- "$want" "$R/bad.err"; then
			fail "record --lldb: $name: status $rc: $(cat "$R/bad.err") (want $want_rc, '$want')"
		elif ls "$R/bad.data"* >/dev/null 2>&1 ||
		     ls -d "$R"/*.rec-* >/dev/null 2>&1; then
			fail "record --lldb: $name: left files behind"
		fi
	}
	mkdir -p "$R/full" && : >"$R/full/x"
	: >"$R/file"
	rec_bad "non-empty DIR" 1 "htr: record: $R/full: exists and is not empty" --lldb "$R/full"
	rec_bad "DIR a file" 1 "htr: record: $R/file: exists and is not a directory" --lldb "$R/file"
	rec_bad "DIR not creatable" 1 "htr: record: $R/no/such/b: cannot write here: No such file or directory" --lldb "$R/no/such/b"
	rec_bad "with --cpus" 2 "htr: record: --lldb writes a per-thread bundle: not with --cpus" --cpus 2 --lldb "$R/b2"
	rec_bad "DIR the --raw DIR" 1 "htr: record: --lldb $R/r2/: the --raw directory; give another" --raw "$R/r2" --lldb "$R/r2/"
	rec_bad "empty DIR name" 2 "htr: record: --lldb: an empty directory name" --lldb ""
	[ ! -e "$R/b2" ] && [ ! -e "$R/r2" ] ||
		fail "record --lldb: a failed record left its directories"
	# An empty DIR is fine, and a perf.data beside it.
	mkdir -p "$R/empty"
	if "$htr" record -q -o "$R/e.data" --lldb "$R/empty" -- \
	    "$R/we\"ird \\dir/threads" >/dev/null 2>"$R/e.err" &&
	   [ -s "$R/e.data" ] && [ -s "$R/empty/trace.json" ] &&
	   [ -s "$R/empty/t0.pt" ]; then
		lldb "$R/s2" -o "trace load $R/empty/trace.json" \
			-o "htr build -o $R/out2" ||
			{ fail "record --lldb: empty DIR: session"; cat "$R/s2"; }
	else
		fail "record --lldb: empty DIR"; cat "$R/e.err"
	fi
fi

# --lines on a real program with DWARF but no symbol table
# (tests/lldb/lines.c -g -O2, recorded under qemu by htr record --raw
# --lldb): LLDB names scramble from the DWARF, and every location the
# plugin prints (each block entry in the program, each instruction goto
# prints) is addr2line's, inlined frames included.
. "$(dirname "$0")/awk_hex.sh"
# The plugin's location field of each line: ADDR LOCATION ("" if none).
# $1: dump (the address is field 2) or goto (field 3).
locs() {
	awk -v f="$1" '{
		a = f == "goto" ? $3 : $2
		sub(/!$/, "", a)
		if (a !~ /^0x/) next
		loc = ""
		if (match($0, /  (at |\[inlined: ).*$/))
			loc = substr($0, RSTART + 2)
		print a "\t" loc
	}'
}
missing=""
for tool in qemu-x86_64 cc objcopy addr2line nm readelf; do
	command -v $tool >/dev/null 2>&1 || missing="$missing $tool"
done
D=$T/dwarf
mkdir -p "$D"
src=$(cd "$(dirname "$0")" && pwd)/lldb/lines.c
if [ -n "$missing" ]; then
	echo "skipped: --lines on DWARF: missing$missing"
elif ! cc -g -O2 -o "$D/lines.full" "$src" ||
     ! objcopy --strip-all --keep-section='.debug_*' "$D/lines.full" "$D/lines"; then
	fail "dwarf: cannot build $src without its symbol table"
elif ! nm "$D/lines.full" | grep -q ' t scramble$' ||
     nm "$D/lines" 2>/dev/null | grep -q scramble ||
     ! readelf -S "$D/lines" | grep -q '\.debug_info'; then
	fail "dwarf: scramble not local in lines.full, or not gone from lines, or no DWARF left"
elif ! "$htr" record -q --raw "$D/rec" --lldb "$D/b" -- "$D/lines" >"$D/rec.out" 2>&1; then
	if grep -q "built without" "$D/rec.out"; then
		echo "skipped: --lines on DWARF: $(cat "$D/rec.out")"
	else
		fail "dwarf: htr record"; cat "$D/rec.out"
	fi
else
	lldb "$D/s" -o "trace load $D/b/trace.json" -o "htr build -o $D/out" \
		-o "htr dump" -o "htr dump --lines" -o "htr dump --tsc" \
		-o "htr dump --tsc --lines" -o "htr find --lines *scramble" \
		-o "htr top --limit 0" -o "htr top --limit 0 --lines" ||
		{ fail "dwarf: session"; cat "$D/s"; }
	section "$D/s" "htr dump" >"$D/dump"
	section "$D/s" "htr dump --lines" >"$D/dump.l"
	section "$D/s" "htr dump --tsc" >"$D/tsc"
	section "$D/s" "htr dump --tsc --lines" >"$D/tsc.l"
	section "$D/s" "htr find --lines *scramble" >"$D/find.l"
	section "$D/s" "htr top --limit 0" >"$D/top"
	section "$D/s" "htr top --limit 0 --lines" >"$D/top.l"
	# --lines only appends: the CLI-equal columns stay as they were.
	for k in dump tsc top; do
		n1=$(wc -l <"$D/$k")
		[ "$n1" -gt 10 ] && awk 'NR == FNR { a[FNR] = $0; next }
			index($0, a[FNR]) != 1 { bad = 1 } END { exit bad }' \
			"$D/$k" "$D/$k.l" && [ "$n1" = "$(wc -l <"$D/$k.l")" ] ||
			fail "dwarf: $k --lines is not $k plus a field"
	done
	# scramble by name (LLDB's, from the DWARF: libhtr says lines!scramble).
	ns=$(awk '$4 == "scramble"' "$D/dump.l" | wc -l)
	[ "$ns" = 3 ] || fail "dwarf: $ns blocks named scramble, want 3"
	blk=$(awk '$2 == "scramble" { print $1; exit }' "$D/find.l")
	[ -n "$blk" ] && [ "$(wc -l <"$D/find.l")" = 3 ] ||
		{ fail "dwarf: find --lines *scramble"; cat "$D/find.l"; }
	# top --lines places scramble at its slowest invocation's entry:
	# what find --lines says of that block.
	set -- $(awk '$5 == "scramble" { print $4; exit }' "$D/top.l")
	t_at=$(awk '$5 == "scramble" { sub(/.*  at /, "at "); print; exit }' "$D/top.l")
	f_at=$(awk -v b="${1:-x}" '$1 == b { sub(/.*  at /, "at "); print }' "$D/find.l")
	[ -n "$t_at" ] && [ "$t_at" = "$f_at" ] ||
		fail "dwarf: top --lines places scramble at '$t_at', find at '$f_at'"
	lldb "$D/g" -o "trace load $D/b/trace.json" -o "htr build -o $D/out" \
		-o "htr goto --lines --count 60 $blk" ||
		{ fail "dwarf: goto session"; cat "$D/g"; }
	section "$D/g" "htr goto --lines --count 60 $blk" >"$D/goto.l"
	# The program's addresses (PIE: file address = address - base).
	set -- $(awk -v p="$D/lines" '$1 == "module" && $2 == p {
		split($6, r, "-"); print $4, r[1], r[2] }' "$D/rec/record.txt")
	base=$1 lo=$2 hi=$3
	{ locs dump <"$D/dump.l"; locs goto <"$D/goto.l"; } |
		awk -F '\t' -v base="$base" -v lo="$lo" -v hi="$hi" "$hex"'
		h($1) >= h(lo) && h($1) < h(hi) && !seen[$1]++ {
			printf "%s\t0x%x\t%s\n", $1, h($1) - h(base), $2
		}' >"$D/plugin.locs"
	cut -f2 "$D/plugin.locs" | "$(dirname "$0")/addr2line_locs.sh" \
		"$D/lines.full" >"$D/oracle.locs"
	cut -f2,3 "$D/plugin.locs" >"$D/plugin.cmp"
	nloc=$(wc -l <"$D/plugin.cmp")
	nin=$(grep -c '\[inlined: mix <- scramble at lines\.c:[0-9]*\]$' "$D/plugin.cmp")
	nentry=$(locs dump <"$D/dump.l" | awk '$2 == "at" && $4 == "[inlined:" && $5 == "mix"' | wc -l)
	if [ "$nloc" -lt 20 ] || [ "$nin" -lt 2 ] || [ "$nentry" -lt 3 ] ||
	   ! cmp -s "$D/oracle.locs" "$D/plugin.cmp"; then
		fail "dwarf: locations differ from addr2line's ($nloc addresses, $nin inlined, $nentry inlined entries)"
		diff "$D/oracle.locs" "$D/plugin.cmp" | head -10
	else
		echo "ok: dwarf: scramble named from DWARF; $nloc locations equal addr2line -i's ($nin in inlined mix, $nentry block entries)"
	fi
fi

# Per-CPU bundles ("cpus": LLDB's process trace start --per-cpu-tracing):
# a two-thread program recorded CPU-wide by htr record --cpus 2, its
# AUXTRACE data and SWITCH_CPU_WIDE records split per CPU into a bundle
# (tests/lldb_cpus.py).  The CLI's htr build of the same perf.data is the
# reference: the plugin's tree of each thread (its .htr through the CLI's
# htr dump and htr dump --tsc) equals the CLI's, the thread records name
# the same thread and process; htr goto refuses (no sync points); a
# corrupt context-switch trace is a clean error.
C=$T/cpus
mkdir -p "$C"
srcdir=$(cd "$(dirname "$0")" && pwd)
if ! command -v qemu-x86_64 >/dev/null 2>&1 || ! command -v cc >/dev/null 2>&1; then
	echo "skipped: per-CPU bundles: no qemu-x86_64 or cc"
elif ! cc -O2 -g -pthread -o "$C/threads" "$srcdir/record/threads.c"; then
	fail "cpus: cannot compile threads.c"
elif ! "$htr" record -q --cpus 2 -o "$C/x.data" -- "$C/threads" >"$C/rec.out" 2>&1; then
	if grep -q "built without" "$C/rec.out"; then
		echo "skipped: per-CPU bundles: $(cat "$C/rec.out")"
	else
		fail "cpus: htr record"; cat "$C/rec.out"
	fi
elif ! set -- $(python3 "$srcdir/lldb_cpus.py" "$C/x.data" "$C/b") ||
     [ $# -ne 3 ]; then
	fail "cpus: lldb_cpus.py made no bundle of a process and two threads"
else
	pid=$1
	shift
	tids="$*"
	"$htr" build -q "$C/x.data" -o "$C/cli" 2>"$C/cli.err" ||
		{ fail "cpus: htr build x.data"; cat "$C/cli.err"; }
	lldb "$C/s" -o "trace load $C/b/trace.json" -o "htr build -o $C/out" \
		-o "htr dump --depth 2" ||
		{ fail "cpus: session"; cat "$C/s"; }
	for tid in $tids; do
		grep -q "^thread $tid: built $C/out/thread-$tid.htr (.*; per-CPU)$" "$C/s" ||
			{ fail "cpus: thread $tid not built"; cat "$C/s"; continue; }
		for k in "" "--tsc"; do
			"$htr" dump $k "$C/cli.$tid.htr" >"$C/cli.dump" &&
			"$htr" dump $k "$C/out/thread-$tid.htr" >"$C/plugin.dump" ||
				{ fail "cpus: tid $tid: htr dump $k"; continue; }
			# Line 1 names the thread: LLDB knows no comm.
			head -1 "$C/plugin.dump" | grep -q "^# thread $tid (pid $pid, ?)" ||
				fail "cpus: tid $tid: $(head -1 "$C/plugin.dump")"
			tail -n +2 "$C/cli.dump" >"$C/cli.body"
			tail -n +2 "$C/plugin.dump" >"$C/plugin.body"
			if [ "$(wc -l <"$C/cli.body")" -lt 3 ] ||
			   ! cmp -s "$C/cli.body" "$C/plugin.body"; then
				fail "cpus: tid $tid: htr dump $k differs from the CLI's"
				diff "$C/cli.dump" "$C/plugin.dump" | head -5
			fi
		done
		"$htr" info "$C/out/thread-$tid.htr" >"$C/info" &&
		grep -q "^thread: *$tid (pid $pid, ?)" "$C/info" &&
		grep -q "^sync points: *0$" "$C/info" ||
			{ fail "cpus: tid $tid: htr info"; cat "$C/info"; }
	done
	# A second session reuses the build; goto refuses on either thread.
	set -- $tids
	lldb "$C/s2" -o "trace load $C/b/trace.json" -o "htr build -o $C/out" \
		-o "htr goto --thread $2 0"
	if ! grep -q "^thread $1: reused $C/out/thread-$1.htr" "$C/s2" ||
	   ! grep -q "^thread $2: reused" "$C/s2"; then
		fail "cpus: the second build did not reuse"; cat "$C/s2"
	elif ! grep -q "^error: htr goto: thread $2: its .htr was built from per-CPU traces" "$C/s2"; then
		fail "cpus: htr goto did not refuse"; cat "$C/s2"
	else
		echo "ok: cpus: $# threads of a per-CPU bundle equal htr build x.data's; reused; goto refuses"
	fi
	python3 "$srcdir/lldb_cpus.py" "$C/x.data" "$C/bad" corrupt >/dev/null ||
		fail "cpus: lldb_cpus.py corrupt"
	lldb "$C/s3" -o "trace load $C/bad/trace.json" -o "htr build -o $C/out-bad"
	rc=$?
	if [ "$rc" -ge 128 ] || grep -qi "stack dump\|PLEASE submit" "$C/s3"; then
		fail "cpus: corrupt switch trace: crashed (status $rc)"; cat "$C/s3"
	elif ! grep -q "^error: htr build: cpu 0: corrupt context-switch trace: a context-switch record of 24 bytes" "$C/s3"; then
		fail "cpus: corrupt switch trace: no clean error"; cat "$C/s3"
	fi
fi

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
check "no such block" "htr dump: block 99999999: no such block (the file has [0-9]*, 0 to [0-9]*)" \
	-o "trace load $P.json" -o "htr build -o $T/out-basic" -o "htr dump --block 99999999"
check "two places" "htr dump: --insn: a place was given already (one of --block or --insn)" \
	-o "trace load $P.json" -o "htr build -o $T/out-basic" -o "htr dump --block 1 --insn 5"
check "goto bad block" "htr goto: --block: bad value 'x' (a block index, as htr find and htr top print it)" \
	-o "trace load $P.json" -o "htr build -o $T/out-basic" -o "htr goto --block x"
check "goto no such block" "htr goto: block 99999999: no such block" \
	-o "trace load $P.json" -o "htr build -o $T/out-basic" -o "htr goto 99999999"
check "goto no place" "htr goto: expected a BLOCK, --block N or --insn ID" \
	-o "trace load $P.json" -o "htr build -o $T/out-basic" -o "htr goto --count 3"

# htr build --perf FILE.data: a perf.data built inside lldb-22 through the
# plugin (libhtr's htr/perf.h), no trace loaded; each thread's tree is the
# CLI's `htr build FILE.data` tree, line for line.
PD=$T/perfdata
mkdir -p "$PD/cli" "$PD/lldb"
if ! command -v qemu-x86_64 >/dev/null 2>&1 || ! command -v cc >/dev/null 2>&1; then
	echo "skipped: htr build --perf: no qemu-x86_64 or cc"
elif ! cc -O0 -g -pthread -o "$PD/threads" "$srcdir/record/threads.c" ||
     ! "$htr" record -q -o "$PD/rec.data" -- "$PD/threads" >/dev/null 2>"$PD/rec.err"; then
	echo "skipped: htr build --perf: cannot record: $(head -1 "$PD/rec.err" 2>/dev/null)"
else
	"$htr" build -q "$PD/rec.data" -o "$PD/cli/" 2>"$PD/cli.err" ||
		fail "perf: the CLI's build failed: $(cat "$PD/cli.err")"
	lldb "$PD/out" -o "htr build --perf $PD/rec.data -o $PD/lldb/" ||
		fail "perf: htr build --perf failed: $(cat "$PD/out")"
	n=0
	for c in "$PD"/cli/*.htr; do
		[ -f "$c" ] || continue
		l=$PD/lldb/$(basename "$c")
		tid=$(basename "$c" .htr)
		tid=${tid##*.}
		if ! grep -q "^thread $tid: built $l (" "$PD/out"; then
			fail "perf: no 'thread $tid: built $l' line"
		elif ! "$htr" dump "$c" >"$PD/c.dump" ||
		     ! "$htr" dump "$l" >"$PD/l.dump" ||
		     ! cmp -s "$PD/c.dump" "$PD/l.dump"; then
			fail "perf: thread $tid: the plugin's tree is not the CLI's"
		else
			n=$((n + 1))
		fi
	done
	if [ "$n" -lt 2 ]; then
		fail "perf: $n thread(s) compared (want every thread of threads.c)"
	else
		echo "ok: htr build --perf: $n threads, each the CLI's tree"
	fi
	lldb "$PD/bad" -o "htr build --perf $PD/none.data"
	grep -q "^error: htr build: .*none.data" "$PD/bad" ||
		fail "perf: a missing perf.data: $(cat "$PD/bad")"
	lldb "$PD/bad" -o "htr build --perf $PD/rec.data --thread 1 -o $PD/lldb/"
	grep -q "^error: htr build: .*no Intel PT trace of thread 1" "$PD/bad" ||
		fail "perf: --thread of no thread: $(cat "$PD/bad")"
fi

# Help.
lldb "$T/help" -o "help htr" -o "help htr build" -o "help htr dump" \
	-o "help htr top" -o "help htr find" -o "help htr goto" ||
	fail "help failed"
for w in "build --" "dump  --" "top   --" "find  --" "goto  --" \
	 "Syntax: htr build" "Syntax: htr dump" "Syntax: htr top" \
	 "Syntax: htr find" "Syntax: htr goto" "reuses the file" \
	 "Per-CPU traces (process trace start --per-cpu-tracing" \
	 "htr build --perf FILE.data \\[--thread TID\\] \\[-o OUT\\]" \
	 "-l, --lines       append the source position" \
	 "-b, --block N     print the subtree of block N" \
	 "-i, --insn ID     print the subtree of the deepest block containing" \
	 "-b, --block N     block N's instructions" \
	 "-i, --insn ID     start at instruction ID" \
	 "^htr goto \\[--count N\\] \\[--lines\\] \\[--thread TID\\] --insn ID" \
	 "at FILE:LINE \\[inlined: INNER <- ... <- FUNCTION at FILE:LINE\\]"; do
	grep -q -- "$w" "$T/help" || fail "help lacks '$w'"
done

if [ "$fails" -ne 0 ]; then
	echo "$fails failure(s)"
	exit 1
fi
echo "all lldb plugin checks passed"
