#!/bin/sh
# htr dump/find --lines against addr2line: tests/lldb/lines.c built with
# -g -O2 (scramble, kept out of line, begins with the always-inlined mix,
# so its entry lies in an inlined frame), recorded under qemu by htr
# record --raw, its tree built; the field every block of the program's own
# module gets must be what addr2line -i -f -s says for its entry (relative
# to the base htr record loaded it at, DIR/build.args), inlined frames
# included.  dump --tsc --lines and find --lines must give the same fields.
# Copies with damaged DWARF must not crash.
#
# usage: test_lines.sh HTR
# exit: 0 ok, 1 a failure, 77 skipped (a tool is missing, no libdw)
set -u
htr=$1
here=$(cd "$(dirname "$0")" && pwd)

. "$here/recorded.sh"
recorded qemu-x86_64 cc addr2line objcopy

cc -g -O2 -o "$T/lines" "$here/lldb/lines.c" || { echo "FAIL: cc"; exit 1; }
if ! "$htr" record -q --raw "$T/rec" -- "$T/lines" >"$T/rec.out" 2>&1; then
	if grep -q "built without" "$T/rec.out"; then
		echo "SKIP: $(cat "$T/rec.out")"
		exit 77
	fi
	echo "FAIL: htr record"; cat "$T/rec.out"
	exit 1
fi
# shellcheck disable=SC2046  # the arguments, one per word
"$htr" build -q "$T/rec/t0.pt" $(cat "$T/rec/build.args") -o "$T/t.htr" ||
	{ echo "FAIL: htr build"; exit 1; }

"$htr" dump --lines "$T/t.htr" >"$T/dump.l" 2>"$T/dump.err"
rc=$?
if [ $rc = 1 ] && grep -q "without libdw" "$T/dump.err" &&
   [ "$(wc -l <"$T/dump.err")" = 1 ]; then
	echo "SKIP: $(cat "$T/dump.err")"
	exit 77
fi
[ $rc = 0 ] || { echo "FAIL: dump --lines: exit $rc"; cat "$T/dump.err"; exit 1; }
"$htr" dump "$T/t.htr" >"$T/dump" || fail "dump"
"$htr" dump --tsc "$T/t.htr" >"$T/tsc" || fail "dump --tsc"
"$htr" dump --tsc --lines "$T/t.htr" >"$T/tsc.l" || fail "dump --tsc --lines"
"$htr" find --lines '*scramble' "$T/t.htr" >"$T/find.l" || fail "find --lines"

. "$here/awk_hex.sh"
# The field of each line ("" if none).
field() {
	awk '/^#/ { next } { loc = ""
		if (match($0, /  (at |\[inlined: ).*$/)) loc = substr($0, RSTART + 2)
		print loc }'
}

# --lines only appends: every other column stays as it was.
for k in dump tsc; do
	awk 'NR == FNR { a[FNR] = $0; next }
		index($0, a[FNR]) != 1 { bad = 1 } END { exit bad }' \
		"$T/$k" "$T/$k.l" && [ "$(wc -l <"$T/$k")" = "$(wc -l <"$T/$k.l")" ] ||
		fail "$k --lines is not $k plus a field"
done
# --tsc prints the same blocks in the same order: the same fields.
field <"$T/dump.l" >"$T/dump.f"
field <"$T/tsc.l" >"$T/tsc.f"
cmp -s "$T/dump.f" "$T/tsc.f" || { fail "dump --tsc --lines fields differ"
	diff "$T/dump.f" "$T/tsc.f" | head -5; }

# The program's module: its base (build.args) and text (record.txt).
base=$(sed -n "s|^--elf $T/lines@||p" "$T/rec/build.args")
# shellcheck disable=SC2046  # two words
set -- $(awk -v p="$T/lines" '$1 == "module" && $2 == p {
	split($6, r, "-"); print r[1], r[2] }' "$T/rec/record.txt")
lo=${1:-} hi=${2:-}
[ -n "$base" ] && [ -n "$lo" ] || { echo "FAIL: no module $T/lines"; exit 1; }
# ENTRY (file address) and field of each block in the program.
awk -v base="$base" -v lo="$lo" -v hi="$hi" "$hex"'
	$2 ~ /^0x/ && h($2) >= h(lo) && h($2) < h(hi) {
		loc = ""
		if (match($0, /  (at |\[inlined: ).*$/)) loc = substr($0, RSTART + 2)
		printf "0x%x\t%s\n", h($2) - h(base), loc
	}' "$T/dump.l" >"$T/htr.locs"
cut -f1 "$T/htr.locs" | "$here/addr2line_locs.sh" "$T/lines" >"$T/oracle.locs"
nloc=$(wc -l <"$T/htr.locs")
nat=$(grep -c '	at lines\.c:[0-9]' "$T/htr.locs")
nin=$(grep -c '	at lines\.c:[0-9]* \[inlined: mix <- scramble at lines\.c:[0-9]*\]$' "$T/htr.locs")
if [ "$nloc" -lt 5 ] || [ "$nat" -lt 4 ] || [ "$nin" -lt 3 ] ||
   ! cmp -s "$T/oracle.locs" "$T/htr.locs"; then
	fail "dump --lines differs from addr2line ($nloc blocks, $nat placed, $nin in inlined mix)"
	diff "$T/oracle.locs" "$T/htr.locs" | head -10
else
	echo "ok: dump --lines: $nloc blocks equal addr2line -i's ($nat placed, $nin in inlined mix)"
fi

# find: scramble's three calls, each with its block's field in the dump.
awk 'NR == FNR { loc = ""
		if (match($0, /  (at |\[inlined: ).*$/)) loc = substr($0, RSTART + 2)
		sub(/^ */, ""); split($0, a, " "); d[a[1]] = loc; next }
	{ loc = ""
		if (match($0, /  (at |\[inlined: ).*$/)) loc = substr($0, RSTART + 2)
		if (!($3 in d) || d[$3] != loc || loc !~ /inlined: mix/) bad = 1
		n++ }
	END { exit bad || n != 3 }' "$T/dump.l" "$T/find.l" ||
	{ fail "find --lines *scramble"; cat "$T/find.l"; }

# Damaged DWARF: each of .debug_info, .debug_line and .debug_abbrev
# replaced by junk (libdw gives up at the header), then with random bytes
# written over its middle (headers intact: libdw reads on into them).
# No crash, exit 0; which fields remain is not checked.
bad_run() {   # $1: what was damaged
	# shellcheck disable=SC2046  # the arguments, one per word
	"$htr" build -q "$T/rec/t0.pt" $(sed "s|^--elf $T/lines@|--elf $T/bad@|" \
		"$T/rec/build.args") -o "$T/bad.htr" ||
		{ fail "$1: htr build"; return; }
	"$htr" dump --lines "$T/bad.htr" >/dev/null 2>"$T/bad.err" ||
		{ fail "dump --lines with $1: exit $?"; cat "$T/bad.err"; }
	"$htr" find --lines '*' "$T/bad.htr" >/dev/null 2>"$T/bad.err" ||
		{ fail "find --lines with $1: exit $?"; cat "$T/bad.err"; }
}
head -c 4096 /dev/urandom >"$T/junk"
for sec in .debug_info .debug_line .debug_abbrev; do
	objcopy --update-section "$sec=$T/junk" "$T/lines" "$T/bad" ||
		{ fail "objcopy $sec"; continue; }
	bad_run "junk $sec"
	objcopy --dump-section "$sec=$T/sec" "$T/lines" "$T/bad" ||
		{ fail "objcopy --dump-section $sec"; continue; }
	size=$(wc -c <"$T/sec")
	for seed in 1 2 3 4; do
		cp "$T/sec" "$T/sec.bad"
		dd if=/dev/urandom of="$T/sec.bad" bs=1 count=$((size / 8)) \
			seek=$((size * seed / 6)) conv=notrunc 2>/dev/null
		objcopy --update-section "$sec=$T/sec.bad" "$T/lines" "$T/bad" ||
			{ fail "objcopy $sec"; continue; }
		bad_run "damaged $sec ($seed)"
	done
done

# Usage: --lines is text only.
"$htr" dump --lines --json "$T/t.htr" >/dev/null 2>&1
[ $? = 2 ] || fail "dump --lines --json is not a usage error"

[ $fails = 0 ] || exit 1
echo "ok: dump, dump --tsc, find --lines"
