#!/bin/sh
# Trees that stay right where the trace has holes (issue 35, parts 1-2).
#
# longjmp and C++ exceptions: tests/record/jmploop.c longjmps out of five
# frames, tests/record/throwloop.cc throws through four (g++ -O2: the
# thrower's throw in g4.cold, the handler in main.cold; Debian 12's
# libgcc_s reaches the landing pad with an indirect jmp, longjmp too), N
# times, at -O0 and -O2, recorded with htr record at N = 1, 20 and 600.
# The recorder's truth closes the frames a jump leaves where it lands
# (tools/record/README.md, "The truth"); with N = 1 only one set of them is
# ever open, and its depth is the deepest the stack really was (the first
# longjmp and throw bind their PLT slots lazily: later iterations go no
# deeper).  Checked:
#  - htr's depth at N = 20 and N = 600 equals the truth's at the same N,
#    and both equal the truth's at N = 1 (flat);
#  - the blocks flagged unwound are the truth's U blocks (entry and first
#    instruction), at N = 20 and 600;
#  - no call of f1/g1 (the frame the loop calls) lasts longer than the
#    truth's time from its start to the next one's (or main's end);
#  - main runs as many instructions of its own as the truth's main (its loop,
#    its handler), not none with its callees holding them all.
# Withheld libraries: tests/record/libnest.c calls libc at every level of
# its nesting and gets a qsort callback, recorded with a PSB every 1024
# bytes and built with the executable only (build.args without the
# libraries' --elf): every call into libc is a decode error, decoding
# resumes at a later PSB anywhere in the program.  Checked: at least 100
# errors; instructions and errors as libipt's instruction decoder gives
# them with the same image (record-iptcount); the depth at most the
# program's own nesting (the most frames of the executable on one path of
# the truth's tree) + 2.
#
# usage: test_unwind.sh HTR RECORD-IPTCOUNT
# exit: 0 ok, 1 a failure, 77 skipped (a tool is missing)
set -u
htr=$1
iptcount=$2
here=$(cd "$(dirname "$0")" && pwd)
src=$here/record

. "$here/recorded.sh"
recorded qemu-x86_64 cc c++ nm objdump
oks=0

ok() {
	echo "ok      $*"
	oks=$((oks + 1))
}

# The depth of a truth's tree (roots at 1).  $1: the truth.
truth_depth() {
	awk '$1 == "block" { par[$2] = $3 }
	END {
		max = 0
		for (p in par) {
			d = 0
			for (q = p; q != -1; q = par[q])
				d++
			if (d > max)
				max = d
		}
		print max
	}' "$1"
}

# The most frames of module $2 on one root path of truth $1's tree.
truth_nest() {
	awk -v mod="$2" '$1 == "func" { inmod[$2] = index($5, mod "+") == 1 }
	$1 == "block" { par[$2] = $3; fn[$2] = $4 }
	END {
		max = 0
		for (p in par) {
			d = 0
			for (q = p; q != -1; q = par[q])
				d += inmod[fn[q]]
			if (d > max)
				max = d
		}
		print max
	}' "$1"
}

# "ENTRY FIRST" of the truth's U blocks, sorted.  $1: the truth.
truth_unwound() {
	awk '$1 == "func" { e[$2] = tolower($3) }
	$1 == "block" && $9 ~ /U/ { print e[$4], $5 }' "$1" | sort
}

# "ENTRY FIRST" of the blocks htr flags unwound, sorted.  $1: FILE.htr.
htr_unwound() {
	"$htr" dump --json "$1" | awk '/"flags": "[^"]*unwound/ {
		match($0, /"entry": "[^"]*"/)
		e = tolower(substr($0, RSTART + 10, RLENGTH - 11))
		match($0, /"first": [0-9]+/)
		print e, substr($0, RSTART + 9, RLENGTH - 9)
	}' | sort
}

htr_depth() {
	"$htr" info "$1" | sed -n 's/^blocks:.*depth \([0-9]*\)).*/\1/p'
}

# The address where --raw recording $1 loaded executable $2's symbol
# matching the awk regex $3 (the first), in hex (mawk's printf cannot
# print 64-bit values: the shell adds).
sym_addr() {
	base=$(awk -v exe="--elf $2@" 'index($0, exe) == 1 {
		sub(/.*@/, ""); print }' "$1/build.args")
	val=$(nm "$2" | awk -v re="$3" '$3 ~ re { print $1; exit }')
	[ -n "$base" ] && [ -n "$val" ] && printf '0x%x\n' $((base + 0x$val))
}

# Record $1 (an executable) with argument $2 into $T/NAME-$2 (--raw).
rec() {
	out=$T/$(basename "$1")-$2
	if ! "$htr" record -q --raw "$out" -- "$1" "$2" >"$out.out" 2>&1 \
		</dev/null; then
		fail "$(basename "$1") $2: htr record: $(tail -1 "$out.out")"
		return 1
	fi
	"$htr" build -q -j1 "$out/t0.pt" $(cat "$out/build.args") \
		-o "$out.htr" 2>"$out.build" ||
		fail "$(basename "$1") $2: htr build: $(tail -1 "$out.build")"
}

# ------------------------------------------------ longjmp and exceptions

# $1 name (jmploop-O2), $2 the regex of the looped-on function's symbol
loop_checks() {
	name=$1 callee=$2
	exe=$T/$name
	for n in 1 20 600; do
		rec "$exe" "$n" || return
	done
	want=$(truth_depth "$T/$name-1/t0.truth")
	d20=$(htr_depth "$T/$name-20.htr")
	d600=$(htr_depth "$T/$name-600.htr")
	t20=$(truth_depth "$T/$name-20/t0.truth")
	t600=$(truth_depth "$T/$name-600/t0.truth")
	if [ "$d20" = "$want" ] && [ "$d600" = "$want" ] &&
	   [ "$t20" = "$want" ] && [ "$t600" = "$want" ]; then
		ok "$name: depth $d20 at 20 and $d600 at 600, as the truth's $want"
	else
		fail "$name: depth $d20 at 20 and $d600 at 600 iterations, the truth's $t20 and $t600, want $want (the stack's deepest: the truth at 1 iteration)"
	fi

	for n in 20 600; do
		truth_unwound "$T/$name-$n/t0.truth" >"$T/u.truth"
		htr_unwound "$T/$name-$n.htr" >"$T/u.htr"
		tu=$(wc -l <"$T/u.truth")
		hu=$(wc -l <"$T/u.htr")
		miss=$(comm -23 "$T/u.truth" "$T/u.htr" | wc -l)
		extra=$(comm -13 "$T/u.truth" "$T/u.htr" | wc -l)
		if [ "$tu" -ge $((5 * n)) ] && [ "$miss" -eq 0 ] &&
		   [ "$extra" -eq 0 ]; then
			ok "$name $n: $hu unwound blocks, the truth's U blocks"
		else
			fail "$name $n: $hu blocks unwound, the truth has $tu U blocks: $miss not unwound (first: $(comm -23 "$T/u.truth" "$T/u.htr" | head -1)), $extra unwound that are not U (first: $(comm -13 "$T/u.truth" "$T/u.htr" | head -1))"
		fi
	done

	# Each call of the looped-on function ends before the next one
	# starts: its total time at most the truth's time between their
	# starts (the TSC at an instruction never decreases).
	n=600
	out=$T/$name-$n
	f=$(sym_addr "$out" "$exe" "$callee")
	m=$(sym_addr "$out" "$exe" '^main$')
	# The starts of f's calls, then main's end, in time order.
	bound=$(awk -v f="$f" -v m="$m" '
		$1 == "func" { e[$2] = tolower($3) }
		$1 == "block" && e[$4] == f { print $7 }
		$1 == "block" && e[$4] == m { print $8 }' "$out/t0.truth" |
		sort -n | awk 'NR > 1 && $1 - prev > max { max = $1 - prev }
			{ prev = $1 } END { print NR - 1, max + 0 }')
	"$htr" dump --json "$out.htr" | awk -v f="$f" '
		index($0, "\"entry\": \"" f "\"") {
			match($0, /"block": [0-9]+/)
			print substr($0, RSTART + 9, RLENGTH - 9)
		}' | sort >"$T/fblocks"
	got=$("$htr" dump --tsc --json "$out.htr" | awk '
		NR == FNR { want[$1] = 1; next }
		{
			match($0, /"block": [0-9]+/)
			b = substr($0, RSTART + 9, RLENGTH - 9)
			if (!(b in want))
				next
			match($0, /"total": [0-9]+/)
			t = substr($0, RSTART + 9, RLENGTH - 9) + 0
			k++
			if (t > max)
				max = t
		}
		END { print k + 0, max + 0 }' "$T/fblocks" -)
	set -- $bound
	tk=$1 tmax=$2
	set -- $got
	hk=$1 hmax=$2
	if [ "$hk" = "$n" ] && [ "$tk" = "$n" ] && [ -n "$hmax" ] &&
	   [ "$hmax" -le "$tmax" ]; then
		ok "$name $n: the longest of $hk calls at $f takes $hmax ticks, the truth's longest iteration $tmax"
	else
		fail "$name $n: the longest of $hk calls at $f takes $hmax ticks, more than the truth's longest iteration, $tmax ticks ($tk calls)"
	fi

	# main runs instructions of its own between the calls the jumps
	# abandon: as many as the truth's main (its span less its callees'),
	# where, before rule 3a, its callees' frames never closed and held
	# them all.  (Its ticks of its own depend on where the PSBs fall.)
	own=$("$htr" dump --json "$out.htr" | python3 -c '
import json, sys
bs = json.load(sys.stdin)
main = {b["block"] for b in bs if b["entry"] == sys.argv[1]}
print(sum((b["last"] - b["first"] + 1) * (1 if b["block"] in main else -1)
          for b in bs if b["block"] in main or b["parent"] in main))' "$m")
	town=$(awk -v m="$m" '
		$1 == "func" { e[$2] = tolower($3) }
		$1 == "block" { span[$2] = $6 - $5 + 1; par[$2] = $3
			if (e[$4] == m) main[$2] = 1 }
		END { for (b in span) if (b in main) n += span[b]
			else if (par[b] in main) n -= span[b]
			print n + 0 }' "$out/t0.truth")
	if [ -n "$own" ] && [ "$own" -gt 0 ] && [ "$own" = "$town" ]; then
		ok "$name $n: main runs $own instructions of its own, as in the truth"
	else
		fail "$name $n: main runs ${own:-no} instructions of its own, the truth's main $town: its callees hold its time"
	fi
}

for opt in O0 O2; do
	cc "-$opt" -g -o "$T/jmploop-$opt" "$src/jmploop.c" ||
		fail "cannot compile jmploop.c"
	c++ "-$opt" -g -o "$T/throwloop-$opt" "$src/throwloop.cc" ||
		fail "cannot compile throwloop.cc"
done

# What the -O2 program is meant to be: the handler (its
# __cxa_begin_catch) in main.cold, the throw in g4's cold part.
objdump -d --no-show-raw-insn "$T/throwloop-O2" >"$T/throwloop-O2.dis"
if awk '/^[0-9a-f]+ <main.cold>:/ { c = 1; next } /^[0-9a-f]+ </ { c = 0 }
	c && /call.*<__cxa_begin_catch@plt>/ { f = 1 } END { exit !f }' \
	"$T/throwloop-O2.dis" &&
   grep -q '^[0-9a-f]* <_ZL2g4i.cold>:' "$T/throwloop-O2.dis"; then
	ok "throwloop-O2: g++ put the handler in main.cold and the throw in g4.cold"
else
	fail "throwloop-O2: no handler in main.cold or no g4.cold (objdump -d): the test no longer covers .cold code"
fi

for opt in O0 O2; do
	loop_checks "jmploop-$opt" '^f1(\.|$)'
	loop_checks "throwloop-$opt" '^_ZL2g1i(\.|$)'
done

# ------------------------------------------------ withheld libraries

for opt in O0 O2; do
	name=libnest-$opt
	exe=$T/$name
	out=$T/$name-300
	cc "-$opt" -g -o "$exe" "$src/libnest.c" || {
		fail "cannot compile libnest.c"; continue; }
	# The environment moves the program's stack and libc's paths
	# (meson's random MALLOC_PERTURB_, LD_LIBRARY_PATH), and with them
	# where the PSBs fall, which decides how much rule 4 can tell (README,
	# "Where these rules are wrong"): one recording for every run.
	if ! env -i PATH=/usr/bin:/bin "$htr" record -q --psb-period 1024 \
		--raw "$out" -- "$exe" 300 >"$out.out" 2>&1 </dev/null; then
		fail "$name: htr record: $(tail -1 "$out.out")"
		continue
	fi
	# The executable's --elf and the decoder options, no library.
	args=$(grep -v -e '^--elf' "$out/build.args")
	args="$args $(grep -e "^--elf $exe@" "$out/build.args")"
	# shellcheck disable=SC2086  # one option or value a word
	"$htr" build -q -j1 "$out/t0.pt" $args -o "$out.htr" \
		2>"$out.build" ||
		{ fail "$name: htr build: $(tail -1 "$out.build")"; continue; }
	# shellcheck disable=SC2086
	ref=$("$iptcount" "$out/t0.pt" $args) ||
		{ fail "$name: record-iptcount failed"; continue; }
	set -- $ref
	rinsns=$2 rerrs=$4 rdepth=$6
	insns=$("$htr" info "$out.htr" | awk '$1 == "instructions:" { print $2 }')
	errs=$("$htr" gaps --json "$out.htr" | grep -c '"kind": "error"')
	depth=$(htr_depth "$out.htr")
	nest=$(truth_nest "$out/t0.truth" "$name")
	if [ "$errs" -ge 100 ] && [ "$errs" = "$rerrs" ] &&
	   [ "$insns" = "$rinsns" ]; then
		ok "$name: $errs decode errors and $insns instructions, as libipt's decoder"
	else
		fail "$name: $errs decode errors and $insns instructions; libipt's decoder: $rerrs and $rinsns (at least 100 errors wanted)"
	fi
	if [ -n "$depth" ] && [ "$depth" -le $((nest + 2)) ]; then
		ok "$name: depth $depth with $errs errors, the program nests $nest deep (the reference builder: $rdepth)"
	else
		fail "$name: depth $depth with $errs errors, more than the program's nesting $nest + 2 (the truth's frames of $name on one path; the reference builder: $rdepth)"
	fi
done

echo "unwind: $oks ok, $fails failures"
[ "$fails" -eq 0 ]
