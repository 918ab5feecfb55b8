#!/bin/sh
# htr record on real programs: each program of tests/record/ is compiled at
# -O0 and -O2, recorded user-only and with --filter on its executable, and
# every thread's trace is built with htr build and compared with the
# recorder's ground truth (record-cmp: instruction count, every block,
# gaps).  Differences the tree rules cannot avoid, or that a builder fix in
# progress will remove, are listed in tests/record/known.txt with the
# reason: they print as KNOWN, never as a pass.  reuse.c creates threads
# after others exited (qemu gives them the exited ones' CPU indexes): each
# must be recorded apart, with its real tid.  restart.c (a syscall the
# kernel restarts after a handler ran) forks: not with the log engine,
# which would read the child's log lines as the parent's.  Also: htr
# record's errors.
#
# usage: test_record.sh HTR RECORD-CMP [ENGINE]
# ENGINE: htr record's --engine (tcg or log; default: htr's default).
# exit: 0 all as expected, 1 a failure, 77 skipped (a tool is missing)
set -u
htr=$1
cmp=$2
eng=${3:+--engine $3}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/same_htr.sh"
src=$here/record
known=$src/known.txt

if ! command -v qemu-x86_64 >/dev/null 2>&1; then
	echo "SKIP: qemu-x86_64 is not installed (Debian package qemu-user)"
	exit 77
fi
if ! command -v cc >/dev/null 2>&1 || ! command -v c++ >/dev/null 2>&1; then
	echo "SKIP: no system C and C++ compiler (cc, c++)"
	exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM

fails=0
knowns=0
oks=0
fixed=0

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

# ---------------------------------------------------------------- errors

# $1: expected exit status; $2: text the one-line message must contain;
# the rest: the command.
expect_error() {
	want=$1 text=$2
	shift 2
	"$@" >"$work/err.out" 2>"$work/err.txt"
	got=$?
	lines=$(wc -l <"$work/err.txt")
	if [ "$got" -ne "$want" ] || ! grep -q -- "$text" "$work/err.txt" ||
	   [ "$lines" -ne 1 ]; then
		fail "'$*': exit $got (want $want), stderr: $(cat "$work/err.txt")"
	fi
}

mkdir "$work/bin"
printf '#!/bin/sh\necho hi\n' >"$work/bin/script.sh"
chmod +x "$work/bin/script.sh"
printf 'int main(void){return 3;}\n' >"$work/bin/three.c"
cc -o "$work/bin/three" "$work/bin/three.c"
printf '#include <signal.h>\nint main(void){raise(SIGKILL);return 0;}\n' \
	>"$work/bin/killed.c"
cc -o "$work/bin/killed" "$work/bin/killed.c"

expect_error 1 "no-such-prog: No such file" \
	"$htr" record $eng --raw "$work/e1" -- no-such-prog
expect_error 1 "not an x86-64 ELF executable (a script" \
	"$htr" record $eng --raw "$work/e2" -- "$work/bin/script.sh"
expect_error 1 "not found (install Debian's qemu-user)" \
	"$htr" record $eng --qemu "$work/no-qemu" --raw "$work/e3" -- "$work/bin/three"
expect_error 1 "cannot write here" \
	"$htr" record $eng --raw "$work/no/such/dir" -- "$work/bin/three"
expect_error 1 "killed by signal 9" \
	"$htr" record $eng --raw "$work/e4" -- "$work/bin/killed"
expect_error 2 "no program to record" "$htr" record $eng --raw "$work/e5"
expect_error 2 "psb-period" "$htr" record $eng --psb-period 3 -- "$work/bin/three"
for d in e1 e2 e3 e4 e5; do
	[ -e "$work/$d" ] && fail "a failed record left $work/$d"
done
ls "$work" | grep -q 'rec-' && fail "a failed record left a temporary directory"
"$htr" record $eng --raw "$work/e6" -- "$work/bin/three" 2>"$work/err.txt"
if [ $? -ne 0 ] || ! grep -q "exited with status 3 (the trace is complete)" \
	"$work/err.txt" || [ ! -f "$work/e6/t0.pt" ]; then
	fail "a program exiting 3 must give a trace and say so: $(cat "$work/err.txt")"
fi
"$htr" record $eng --help | grep -q "usage: htr record" || fail "record --help"
# A program that replaces itself with execve (qemu-user runs the new one
# natively): recorded up to the execve.
if [ -x /bin/sh ] && [ -x /bin/true ]; then
	"$htr" record $eng -q --raw "$work/e7" -- /bin/sh -c 'exec /bin/true' \
		2>"$work/err.txt"
	if [ $? -ne 0 ] || [ ! -f "$work/e7/t0.pt" ]; then
		fail "record -- sh -c 'exec true': $(cat "$work/err.txt")"
	fi
fi

# The default output, a perf.data: all or nothing as well.
expect_error 1 "cannot write here" \
	"$htr" record $eng -o "$work/no/such/dir/x.data" -- "$work/bin/three"
expect_error 1 "killed by signal 9" \
	"$htr" record $eng -o "$work/k.data" -- "$work/bin/killed"
[ -e "$work/k.data" ] || [ -e "$work/k.data.t0.truth" ] &&
	fail "a killed record left k.data or its truth"
"$htr" record $eng -q -o "$work/p.data" -- "$work/bin/three" 2>"$work/err.txt"
if [ "$(head -c 8 "$work/p.data" 2>/dev/null)" != PERFILE2 ] ||
   [ ! -f "$work/p.data.t0.truth" ]; then
	fail "record -o: no perf.data or truth: $(cat "$work/err.txt")"
fi
ls "$work" | grep -q 'rec-' && fail "record -o left a temporary directory"

# argv[0] as the user gave it (a multi-call program picks its behaviour
# from it: xzcat -> xz, busybox), while the recording names the real file,
# as the kernel would: the module is multi, the process (COMM) other.
# $1: how to call it (the symlink's path, relative or bare: PATH).
cat >"$work/bin/multi.c" <<'EOF'
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv)
{
	const char *b = strrchr(argv[0], '/');

	(void) argc;
	printf("%s\n", argv[0]);
	return strcmp(b ? b + 1 : argv[0], "other") ? 4 : 5;
}
EOF
cc -g -o "$work/bin/multi" "$work/bin/multi.c"
ln -s multi "$work/bin/other"
argv0() {
	(cd "$work/bin" && PATH="$work/bin:$PATH" "$1") >"$work/a0.want"
	want=$?
	rm -f "$work/a0.data"* "$work/a0."*.htr
	(cd "$work/bin" && PATH="$work/bin:$PATH" "$htr" record $eng \
		-o "$work/a0.data" -- "$1") >"$work/a0.out" 2>"$work/a0.err"
	if [ "$want" -ne 5 ] || ! cmp -s "$work/a0.want" "$work/a0.out" ||
	   ! grep -q "exited with status $want " "$work/a0.err"; then
		fail "record -- $1: argv[0] not as given: exit $want," \
			"$(cat "$work/a0.out") $(cat "$work/a0.err")"
		return
	fi
	"$htr" build -q "$work/a0.data" -o "$work/a0" 2>"$work/a0.err"
	if ! "$htr" find main "$work"/a0.*.htr 2>&1 | grep -q ' multi!main ' ||
	   ! "$htr" find main "$work"/a0.*.htr | grep -q "^# thread .*, other)"
	then
		fail "record -- $1: build: not module multi, comm other:" \
			"$("$htr" find main "$work"/a0.*.htr 2>&1) $(cat "$work/a0.err")"
		return
	fi
	oks=$((oks + 1))
}
argv0 "$work/bin/other"
argv0 ./other
argv0 other
if command -v xz >/dev/null 2>&1 && [ -x /usr/bin/xzcat ]; then
	echo hello | xz >"$work/t.xz"
	"$htr" record $eng -q -o "$work/xz.data" -- /usr/bin/xzcat "$work/t.xz" \
		>"$work/xz.out" 2>"$work/xz.err"
	if [ "$(cat "$work/xz.out")" = hello ]; then
		oks=$((oks + 1))
	else
		fail "record -- /usr/bin/xzcat: $(cat "$work/xz.out" "$work/xz.err")"
	fi
fi

# ---------------------------------------------------------------- suite

printf 'banana\napple\ncherry\napple\n' >"$work/sort.in"

# name source flags: compiled at -O0 and -O2.
build() {
	name=$1 file=$2 opt=$3
	shift 3
	case $file in
	*.cc) comp=c++ ;;
	*) comp=cc ;;
	esac
	$comp "-$opt" -g -o "$work/$name-$opt" "$src/$file" "$@" ||
		fail "cannot compile $file"
}

for opt in O0 O2; do
	build calls calls.c "$opt"
	build virt virt.cc "$opt"
	build longjmp longjmp.c "$opt"
	build deep deep.c "$opt"
	build except except.cc "$opt"
	build signal signal.c "$opt"
	build restart restart.c "$opt"
	build skip skip.c "$opt"
	build threads threads.c "$opt" -pthread
	build preempt preempt.c "$opt" -pthread
	build reuse reuse.c "$opt" -pthread
	build lazy lazy.c "$opt" -Wl,-z,lazy
	build dlopen dlopen.c "$opt" -ldl
	cc "-$opt" -g -shared -fPIC -o "$work/libdl-$opt.so" "$src/dllib.c"
	build static calls.c "$opt" -static
done

# $1 key (name opt mode), $2 output of record-cmp
judge() {
	key=$1 res=$2
	reason=$(awk -v k="$key" -F'\t' '$1 == k { print $2 }' "$known")
	case $res in
	ok*)
		if [ -n "$reason" ]; then
			echo "FIXED   $key: $res (listed as known: remove it)"
			fixed=$((fixed + 1))
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

# name opt mode exe args...
run() {
	name=$1 opt=$2 mode=$3 exe=$4
	shift 4
	out=$work/$name-$opt-$mode
	filt=""
	[ "$mode" = filter ] && filt="--filter $exe"
	if ! "$htr" record $eng -q --raw "$out" $filt -- "$exe" "$@" \
		>"$out.stdout" 2>"$out.stderr" </dev/null; then
		fail "$name $opt $mode: record: $(tail -1 "$out.stderr")"
		return
	fi
	for pt in "$out"/t*.pt; do
		t=$(basename "$pt" .pt)
		if ! "$htr" build -j1 "$pt" $(cat "$out/build.args") \
			-o "$out/$t.htr" 2>"$out/$t.build"; then
			fail "$name $opt $mode $t: build: $(tail -1 "$out/$t.build")"
			continue
		fi
		judge "$name $opt $mode $t" \
			"$("$cmp" --tsc "$out/$t.truth" "$out/$t.htr" 2>&1)"
		# Three threads, a chunk boundary at every PSB, either
		# decoder, and a processor with erratum SKL014 (6/142), with
		# the filtered module's range when there is one: the same
		# file.  (Every syscall gives a TIP.PGD without an IP, bound
		# at the syscall: the recorder leaves the range by direct
		# branches with the target, as a CPU without the erratum.)
		ranges=$(awk '$1 == "module" && $7 == "filtered" {
			printf " --filter %s", $6 }' "$out/record.txt")
		for j in "-j3 --chunk-size 1" "-j1 --decoder block" \
			"-j3 --chunk-size 1 --decoder block" \
			"-j1 --decoder walk" "-j1 --cpu 6/142$ranges" \
			"-j1 --cpu 6/142 --decoder block$ranges"; do
			# shellcheck disable=SC2086
			if "$htr" build -q $j "$pt" $(cat "$out/build.args") \
				-o "$out/$t.jn.htr" 2>/dev/null &&
			   same_htr "$out/$t.htr" "$out/$t.jn.htr"; then
				oks=$((oks + 1))
			else
				fail "$name $opt $mode $t: $j built another file than -j1"
			fi
		done
	done
}

# A program that says "threads N" created N threads: the recording has
# N + 1 (the main thread too), each with a tid of its own (qemu reuses an
# exited thread's CPU index for a later thread: the recorder must not
# merge them).  $1: the recording's directory (name-opt-mode).
threads_apart() {
	out=$1
	want=$(awk '$1 == "threads" { print $2 + 1 }' "$out.stdout")
	got=$(ls "$out"/t*.pt 2>/dev/null | wc -l)
	tids=$(awk '$1 == "thread" { print $4 }' "$out/record.txt" | sort -u |
		wc -l)
	synth=$(grep -c '^thread .* synthetic' "$out/record.txt")
	if [ -z "$want" ] || [ "$got" != "$want" ] || [ "$tids" != "$want" ] ||
	   [ "$synth" != 0 ]; then
		fail "$(basename "$out"): $got threads recorded, $tids tids ($synth synthetic), program created ${want:-?} with main"
	else
		echo "ok      $(basename "$out"): $got threads, $tids real tids"
		oks=$((oks + 1))
	fi
}

for opt in O0 O2; do
	for mode in user filter; do
		for p in calls virt longjmp deep except signal skip threads \
			preempt reuse lazy static; do
			run "$p" "$opt" "$mode" "$work/$p-$opt"
		done
		# It forks: qemu's log would mix the child's lines in.
		[ "${3:-}" = log ] ||
			run restart "$opt" "$mode" "$work/restart-$opt"
		threads_apart "$work/reuse-$opt-$mode"
		run dlopen "$opt" "$mode" "$work/dlopen-$opt" "$work/libdl-$opt.so"
	done
done
for mode in user filter; do
	run sort system "$mode" "$(command -v sort)" "$work/sort.in"
done

echo "record${3:+ ($3)}: $oks ok, $knowns known differences, $fixed fixed, $fails failures"
[ "$fails" -eq 0 ]
