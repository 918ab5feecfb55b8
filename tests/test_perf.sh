#!/bin/sh
# htr record's perf.data against perf's own Intel PT decoder: programs of
# tests/record/ are recorded to perf.data (the default output) and
# `perf script` (Debian's linux-perf) decodes them.  Per thread, perf must
# agree with the recorder's ground truth (OUT.tN.truth) on:
#
#  insns    the instruction count (--itrace=i1i: one sample per
#           instruction, counted per tid; the truth's `tid` line names
#           the thread);
#  calls    the IDs of the call instructions whose callee ran traced: perf's
#           instruction samples flagged "call" (not "tr end call": the
#           callee is untraced; not syscall) against FIRST - 1 of every
#           truth block that a traced call opened (no L or E flag, FIRST
#           not right after a gap: those were entered untraced);
#  returns  the IDs of the return instructions: perf's samples flagged
#           "return" (also "tr end return", a return out of the filter)
#           against LAST of every block that ended at a return (no T, R
#           or U flag: blocks a return left by longjmp/exceptions share
#           their LAST with the block it closed; those a jump left end at
#           the jump);
#  listing  --itrace=cr lists as many calls and returns as the
#           instruction samples carry;
#  times    user-only recordings: perf's time (--ns) at LAST of every
#           block equals the truth's TSC_LAST converted to perf time with
#           the file's time_shift, time_mult and time_zero (perf's formula,
#           in exact 64-bit integers: ns = zero + (tsc >> shift) * mult +
#           ((tsc & (2^shift - 1)) * mult >> shift)), which must look like a
#           kernel's (shift <= 31, mult of 32 bits, zero not 0).
#
# Where perf differs, by design (printed as figures, not checked): the
# time at FIRST, and with --filter also at LAST.  The truth gives the time
# with libipt's semantics (TRUTH.md: the last TSC before the last TNT/TIP
# packet consumed); perf's decoder applies a TSC packet as soon as it
# fetches it, which is before the instructions that lead to the branch
# that needs the next TNT/TIP (so some blocks start up to --tsc-gran ticks
# later in perf), and where tracing resumes (TIP.PGE, no timing packet)
# it estimates the time from the instructions decoded since the last TSC.
#
# CPU-wide recordings (mode -cpusN: htr record --cpus N, perf record -a's
# layout) are checked the same way per tid: perf must attribute every
# CPU's trace to the right threads by the context-switch records.  Also:
# with one CPU nothing runs elsewhere; with two the main thread migrates
# (it makes syscalls, which free its CPU).  The figures say on which CPUs
# each thread ran and how many switch-outs preempted a thread.
# reuse.c creates threads after others exited (qemu hands them the exited
# threads' CPU indexes): every thread it created is recorded apart, with
# its real tid, and perf decodes each as a thread of its own.
#
# A difference perf cannot avoid would be listed in
# tests/record/perf-known.txt (KEY<TAB>reason) and print as KNOWN; none is
# listed: on every program of the suite perf agrees on everything checked.
#
# usage: test_perf.sh HTR
# exit: 0 all as expected, 1 a failure, 77 skipped (a tool is missing)
set -u
htr=$1
here=$(cd "$(dirname "$0")" && pwd)
src=$here/record
known=$src/perf-known.txt

if ! command -v perf >/dev/null 2>&1; then
	echo "SKIP: perf is not installed (Debian package linux-perf)"
	exit 77
fi
if ! command -v qemu-x86_64 >/dev/null 2>&1; then
	echo "SKIP: qemu-x86_64 is not installed (Debian package qemu-user)"
	exit 77
fi
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: no python3 (the time conversion needs 64-bit integers)"
	exit 77
fi
if ! command -v cc >/dev/null 2>&1 || ! command -v c++ >/dev/null 2>&1; then
	echo "SKIP: no system C and C++ compiler (cc, c++)"
	exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
# perf reads ~/.perfconfig and looks in ~/.debug (the build-id cache):
# an empty home keeps the user's settings out; -f accepts files that
# another user owns.
mkdir "$work/home"
export HOME="$work/home"
perf_script() {
	perf script -f "$@" 2>>"$work/perf.stderr"
}

fails=0
knowns=0
oks=0

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

cc -O0 -g -o "$work/calls-O0" "$src/calls.c" || fail "cannot compile calls.c"
cc -O2 -g -o "$work/calls-O2" "$src/calls.c" || fail "cannot compile calls.c"
cc -O2 -g -pthread -o "$work/threads-O2" "$src/threads.c" ||
	fail "cannot compile threads.c"
cc -O2 -g -pthread -o "$work/workers-O2" "$src/workers.c" ||
	fail "cannot compile workers.c"
cc -O2 -g -pthread -o "$work/reuse-O2" "$src/reuse.c" ||
	fail "cannot compile reuse.c"
cc -O0 -g -o "$work/dlopen-O0" "$src/dlopen.c" -ldl ||
	fail "cannot compile dlopen.c"
cc -O0 -g -shared -fPIC -o "$work/libdl-O0.so" "$src/dllib.c" ||
	fail "cannot compile dllib.c"
cc -O2 -g -o "$work/signal-O2" "$src/signal.c" || fail "cannot compile signal.c"
cc -O2 -g -pthread -o "$work/preempt-O2" "$src/preempt.c" ||
	fail "cannot compile preempt.c"
cc -O2 -g -o "$work/longjmp-O2" "$src/longjmp.c" || fail "cannot compile longjmp.c"
c++ -O2 -g -o "$work/except-O2" "$src/except.cc" || fail "cannot compile except.cc"
# HTR_PERF_ALL=1: also the rest of the suite, both levels, both modes, and
# CPU-wide on one and three CPUs.
if [ -n "${HTR_PERF_ALL:-}" ]; then
	for o in O0 O2; do
		cc -$o -g -o "$work/longjmp-$o" "$src/longjmp.c"
		cc -$o -g -o "$work/lazy-$o" "$src/lazy.c" -Wl,-z,lazy
		cc -$o -g -static -o "$work/static-$o" "$src/calls.c"
		c++ -$o -g -o "$work/except-$o" "$src/except.cc"
		c++ -$o -g -o "$work/virt-$o" "$src/virt.cc"
	done
fi

# perf must decode Intel PT at all (some builds lack AUX area support).
if ! "$htr" record -q -o "$work/probe.data" -- "$work/calls-O0" \
	>/dev/null 2>"$work/probe.err"; then
	fail "record: $(cat "$work/probe.err")"
	exit 1
fi
if [ "$(perf_script -i "$work/probe.data" --itrace=i1i -F tid | head -1)" = "" ]; then
	echo "SKIP: this perf decodes no Intel PT: $(tail -1 "$work/perf.stderr")"
	exit 77
fi

# The TSC conversion perf.data $1 declares (AUXTRACE_INFO): "SHIFT MULT
# ZERO".
tconv() {
	perf_script -i "$1" -D | awk '
	/^ *Time Shift/ { s = $3 }
	/^ *Time Mul/ { m = $3 }
	/^ *Time Zero/ { z = $3 }
	/^ *Cap Time Zero/ { print s, m, z; exit }'
}

# The truth $1 with its TSCs (block TSC_FIRST, TSC_LAST) in perf time, with
# the conversion $2 ("SHIFT MULT ZERO").
truth_ns() {
	python3 -c '
import sys
s, m, z = (int(v) for v in sys.argv[2].split())
def ns(t):
    t = int(t)
    return z + (t >> s) * m + (((t & ((1 << s) - 1)) * m) >> s)
for line in open(sys.argv[1]):
    f = line.split()
    if f and f[0] == "block":
        f[6] = str(ns(f[6]))
        f[7] = str(ns(f[7]))
        line = " ".join(f) + "\n"
    sys.stdout.write(line)
' "$1" "$2"
}

tc=$(tconv "$work/probe.data")
if ! echo "$tc" | awk '$0 !~ /^[0-9]+ [0-9]+ [0-9]+$/ ||
	$1 > 31 || $2 == 0 || $2 >= 4294967296 || $3 == 0 { exit 1 }'; then
	fail "the TSC conversion is not a kernel's: '$tc'"
	exit 1
fi

# $1 key, $2 result line (ok ... or what differs)
judge() {
	key=$1 res=$2
	reason=""
	[ -f "$known" ] &&
		reason=$(awk -v k="$key" -F'\t' '$1 == k { print $2 }' "$known")
	case $res in
	ok*)
		res=${res#ok }
		if [ -n "$reason" ]; then
			echo "FIXED   $key: $res (listed as known: remove it)"
		else
			echo "ok      $key: $res"
		fi
		oks=$((oks + 1)) ;;
	*)
		if [ -n "$reason" ]; then
			echo "KNOWN   $key: $res"
			echo "        why: $reason"
			knowns=$((knowns + 1))
		else
			fail "$key: $res"
		fi ;;
	esac
}

# One thread: perf's samples ($1, for tid $2) against the truth ($3).
# Prints "c ID"/"r ID" per side ("perf"/"truth" in column 1), then
# "n COUNT", "tmis COUNT FIRST-MISMATCH", "ic"/"ir" (calls and returns
# among perf's instruction samples, untraced callees included).
compare() {
	# The truth is read twice: its gaps first, as a call interrupted
	# before its callee's first instruction is no block's call (the
	# truth's handler block starts there).
	awk -v tid="$2" '
	FNR == 1 { pass++ }
	pass == 1 {
		if ($1 == "gap")
			gap[$2] = 1
		next
	}
	pass == 2 {
		if ($1 != tid)
			next
		t = $2; sub(/:$/, "", t); split(t, st, ".")
		n += 0
		time[n] = st[1] * 1000000000 + st[2]
		f = $0; sub(/^ *[0-9]+ +[0-9.]+: */, "", f)
		if (f ~ /call/ && f !~ /syscall/) {
			ic++
			if (f !~ /tr end/ && !((n + 1) in gap))
				print "perf c " n
		}
		if (f ~ /return/) {
			ir++
			print "perf r " n
		}
		n++
		next
	}
	$1 == "block" {
		first = $5; last = $6; fl = $9
		if (fl !~ /[LE]/ && !(first in gap) && first > 0)
			print "truth c " first - 1
		if (fl !~ /[TRU]/)
			print "truth r " last
		# the time a decoder reports at both ends
		if (time[first] != $7)
			fmis++
		if (time[last] != $8) {
			if (!tmis)
				tfirst = "block " $2 " at " first ".." last \
					": truth " $7 ".." $8 ", perf " \
					time[first] ".." time[last]
			tmis++
		}
	}
	END {
		print "n " n + 0
		print "tmis " tmis + 0 " " tfirst
		print "fmis " fmis + 0
		print "ic " ic + 0
		print "ir " ir + 0
	}' "$3" "$1" "$3"
}

# name mode exe args...; mode: user or filter, then -cpusN for a CPU-wide
# recording on N modelled CPUs (htr record --cpus N)
run() {
	name=$1 mode=$2 exe=$3
	shift 3
	out=$work/$name-$mode
	base=${mode%%-cpus*}
	opts=""
	[ "$base" = filter ] && opts="--filter $exe"
	case $mode in
	*-cpus*) opts="$opts --cpus ${mode##*-cpus}" ;;
	esac
	if ! "$htr" record -q -o "$out.data" $opts -- "$exe" "$@" \
		>"$out.stdout" 2>"$out.stderr" </dev/null; then
		fail "$name $mode: record: $(tail -1 "$out.stderr")"
		return
	fi
	# One decode for everything: tid, time and branch flags of every
	# instruction; then the branch listing.
	perf_script -i "$out.data" --itrace=i1i -F tid,time,flags --ns \
		>"$out.insns"
	perf_script -i "$out.data" --itrace=cr -F tid,flags >"$out.branches"
	# CPU-wide: where each thread ran, and how often one was preempted
	ncpus=""
	case $mode in
	*-cpus*)
		ncpus=${mode##*-cpus}
		perf_script -i "$out.data" --itrace=i1i -F tid,cpu |
			tr -d '[]' | sort -u >"$out.cpus"
		npre=$(perf_script -i "$out.data" --no-itrace \
			--show-switch-events | grep -c 'OUT preempt')
		;;
	esac
	for truth in "$out.data".t*.truth; do
		t=${truth##*.data.}
		t=${t%.truth}
		tid=$(awk '$1 == "tid" { print $3 }' "$truth")
		want=$(awk '$1 == "insns" { print $2 }' "$truth")
		if [ -z "$tid" ] || [ -z "$want" ]; then
			fail "$name $mode $t: truth without tid or insns"
			continue
		fi
		truth_ns "$truth" "$(tconv "$out.data")" >"$out.$t.ns"
		compare "$out.insns" "$tid" "$out.$t.ns" >"$out.$t.cmp"
		got=$(awk '$1 == "n" { print $2 }' "$out.$t.cmp")
		ic=$(awk '$1 == "ic" { print $2 }' "$out.$t.cmp")
		ir=$(awk '$1 == "ir" { print $2 }' "$out.$t.cmp")
		tmis=$(awk '$1 == "tmis" { print $2 }' "$out.$t.cmp")
		tfirst=$(awk '$1 == "tmis" { $1 = $2 = ""; print }' "$out.$t.cmp")
		fmis=$(awk '$1 == "fmis" { print $2 }' "$out.$t.cmp")
		awk '$1 == "perf" { print $2, $3 }' "$out.$t.cmp" | sort -u \
			>"$out.$t.pids"
		awk '$1 == "truth" { print $2, $3 }' "$out.$t.cmp" | sort -u \
			>"$out.$t.tids"
		pc=$(grep -c '^c' "$out.$t.pids")
		pr=$(grep -c '^r' "$out.$t.pids")
		tc=$(grep -c '^c' "$out.$t.tids")
		tr=$(grep -c '^r' "$out.$t.tids")
		# the listing: calls (also into untraced code) and returns
		lc=$(awk -v tid="$tid" '$1 == tid && /call/ && !/syscall/' \
			"$out.branches" | wc -l)
		lr=$(awk -v tid="$tid" '$1 == tid && /return/' \
			"$out.branches" | wc -l)
		nb=$(grep -c '^block' "$truth")
		fig="insns $got/$want, calls $pc/$tc, returns $pr/$tr, listed $lc/$ic calls $lr/$ir returns, time at LAST $((nb - tmis))/$nb, at FIRST $((nb - fmis))/$nb blocks"
		oncpus=""
		if [ -n "$ncpus" ]; then
			oncpus=$(awk -v tid="$tid" '$1 == tid { print $2 + 0 }' \
				"$out.cpus" | paste -sd, -)
			fig="$fig, on CPUs $oncpus ($npre preemptions in all)"
		fi
		if [ "$got" != "$want" ]; then
			res="insns differ: $fig"
		elif ! cmp -s "$out.$t.pids" "$out.$t.tids"; then
			d=$(diff "$out.$t.tids" "$out.$t.pids" | grep '^[<>]' |
				head -3 | tr '\n' ' ')
			res="call/return IDs differ (< truth, > perf): $d; $fig"
		elif [ "$lc" != "$ic" ] || [ "$lr" != "$ir" ]; then
			res="--itrace=cr lists other counts: $fig"
		elif [ "$ncpus" = 1 ] && [ "$oncpus" != 0 ]; then
			res="ran on other CPUs than the only one: $fig"
		elif [ "$ncpus" = 2 ] && [ "$t" = t0 ] &&
			[ "$oncpus" != 0,1 ]; then
			# the main thread makes syscalls: it must migrate
			res="the main thread did not migrate: $fig"
		elif [ "$base" = user ] && [ "$tmis" != 0 ]; then
			res="times at LAST differ, first:$tfirst; $fig"
		else
			res="ok $fig"
		fi
		judge "$name $mode $t" "$res"
	done
}

run calls-O0 user "$work/calls-O0"
run calls-O2 filter "$work/calls-O2"
run threads-O2 user "$work/threads-O2"
run threads-O2 filter "$work/threads-O2"
run dlopen-O0 user "$work/dlopen-O0" "$work/libdl-O0.so"
run dlopen-O0 filter "$work/dlopen-O0" "$work/libdl-O0.so"
run signal-O2 user "$work/signal-O2"
run longjmp-O2 filter "$work/longjmp-O2"
run except-O2 user "$work/except-O2"
# CPU-wide (perf record -a's layout): perf attributes each CPU's trace to
# threads by the context-switch records; one CPU (every change of thread in
# the log preempts), two (threads migrate at every syscall)
run threads-O2 user-cpus1 "$work/threads-O2"
run threads-O2 user-cpus2 "$work/threads-O2"
run threads-O2 filter-cpus2 "$work/threads-O2"
run calls-O0 user-cpus2 "$work/calls-O0"
run signal-O2 user-cpus1 "$work/signal-O2"
# signals to running threads, handlers that move the resume point
run preempt-O2 user "$work/preempt-O2"
run preempt-O2 user-cpus2 "$work/preempt-O2"
# five threads on fewer CPUs: preemption and migration together
run workers-O2 user "$work/workers-O2"
run workers-O2 user-cpus2 "$work/workers-O2"
run workers-O2 user-cpus3 "$work/workers-O2"
run workers-O2 filter-cpus2 "$work/workers-O2"
run dlopen-O0 filter-cpus2 "$work/dlopen-O0" "$work/libdl-O0.so"
# threads created after others exited, on CPU indexes qemu reused: as many
# threads as the program created (it prints "threads N"; plus main), each
# with its own real tid, and perf agrees with each thread's truth (above)
threads_apart() {
	out=$work/$1
	want=$(awk '$1 == "threads" { print $2 + 1 }' "$out.stdout")
	got=$(ls "$out.data".t*.truth 2>/dev/null | wc -l)
	tids=$(awk '$1 == "tid" && $4 == "real" { print $3 }' \
		"$out.data".t*.truth | sort -u | wc -l)
	ptids=$(perf_script -i "$out.data" --itrace=i1i -F tid | sort -u |
		wc -l)
	if [ -z "$want" ] || [ "$got" != "$want" ] || [ "$tids" != "$want" ] ||
	   [ "$ptids" != "$want" ]; then
		fail "$1: $got threads recorded, $tids real tids, perf decodes $ptids, program created ${want:-?} with main"
	else
		echo "ok      $1: $got threads, each its own tid in perf too"
		oks=$((oks + 1))
	fi
}
run reuse-O2 user "$work/reuse-O2"
threads_apart reuse-O2-user
run reuse-O2 user-cpus2 "$work/reuse-O2"
threads_apart reuse-O2-user-cpus2
if [ -n "${HTR_PERF_ALL:-}" ]; then
	for o in O0 O2; do
		for p in longjmp lazy static except virt; do
			run $p-$o user "$work/$p-$o"
			run $p-$o filter "$work/$p-$o"
			run $p-$o user-cpus1 "$work/$p-$o"
			run $p-$o filter-cpus3 "$work/$p-$o"
		done
	done
fi

if [ "$fails" -ne 0 ] && [ -s "$work/perf.stderr" ]; then
	echo "perf said: $(sort -u "$work/perf.stderr" | head -5)"
fi
echo "perf: $oks ok, $knowns known differences, $fails failures"
[ "$fails" -eq 0 ]
