#!/bin/sh
# perf.data as perf writes it on Intel PT hardware, made from htr record's
# recordings by tests/hwperf.py: user and kernel traced (intel_pt// without
# u; a kernel stub at every syscall and switch, its code not at hand), a
# cycles event before intel_pt's (two attrs of other sample_types, SAMPLE
# records), perf 4.x's layout (shorter attrs, AUXTRACE_INFO of 10 words,
# no clock_data), per-thread and CPU-wide (--cpus 2, SWITCH_CPU_WIDE; and
# per-task SWITCH records, as perf record -- prog writes them), the
# file and, through perf inject, the pipe format.  Every variant must
# build one tree per thread, each the recorder's truth of that thread
# (record-cmp: the kernel stretches are where user code stopped), its
# gaps named [kernel] by htr gaps, the same with -j1 and -j2, and say in
# one warning line what it could not decode; with the stub's code
# (--kcore DIR, --vmlinux FILE) the kernel's instructions are decoded too.  Recorded without return
# compression, perf script must agree on each thread's instructions,
# calls, returns and times (tests/perf_ns.py): with compressed returns
# perf itself loses the user code after each kernel error until the next
# TIP.  A library withheld at build time: still one tree, the one line
# names it.
#
# The reader on every truncation and 20000 byte flips of the two-event,
# perf 4.x and pipe layouts, and the user-only rewrite on every
# truncation and 2000 flipped copies of each trace, which it must leave
# as it is the second time (test_perfdata_check).
#
# usage: test_hwperf.sh HTR RECORD-CMP CHECK
# exit: 0 all as expected, 1 a failure, 77 skipped (a tool is missing)
set -u
htr=$1
cmp=$2
check=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/same_htr.sh"
src=$here/record

for tool in qemu-x86_64 cc python3; do
	if ! command -v $tool >/dev/null 2>&1; then
		echo "SKIP: $tool is not installed"
		exit 77
	fi
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
mkdir "$work/home"
export HOME="$work/home"
fails=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

cc -O0 -g -o "$work/calls-O0" "$src/calls.c" || fail "cannot compile calls.c"
cc -O2 -g -pthread -o "$work/threads-O2" "$src/threads.c" ||
	fail "cannot compile threads.c"
cc -O0 -g -o "$work/dlopen-O0" "$src/dlopen.c" -ldl ||
	fail "cannot compile dlopen.c"
cc -O0 -g -shared -fPIC -o "$work/libhw.so" "$src/dllib.c" ||
	fail "cannot compile dllib.c"
[ $fails -eq 0 ] || exit 1
have_perf=0
command -v perf >/dev/null 2>&1 && have_perf=1

# $1 the recording's directory, $2 the perf.data there, $3 the .htr
# prefix, $4 what: each thread perf script decodes is the .htr's.
perf_agree() {
	TZ=UTC perf script -f -i "$1/$2" --itrace=i1i --ns \
		--show-switch-events \
		-F comm,pid,tid,time,tod,flags >"$1/insns.txt" 2>"$work/err" ||
		{ fail "$4: perf script: $(head -1 "$work/err")"; return; }
	for h in "$1/$3".*.htr; do
		tid=$(basename "$h" .htr | sed 's/.*\.//')
		"$htr" dump --tsc --json "$h" >"$1/ns.json" 2>/dev/null
		"$htr" info "$h" >"$1/info" 2>&1
		"$htr" dump --json "$h" >"$1/tree.json" 2>/dev/null
		"$htr" gaps --json "$h" >"$1/gaps.json" 2>/dev/null
		if res=$(python3 "$here/perf_ns.py" "$1/insns.txt" \
			 "$1/ns.json" "$tid" "$1/info" "$1/tree.json" \
			 "$1/gaps.json" ${5:-}); then
			echo "ok      $4 tid $tid: perf's thread, $res"
		else
			fail "$4 tid $tid: against perf script: $(echo "$res" | tr '\n' ' ')"
		fi
	done
}

# Instructions per tid that perf script decodes of $1 (tid 0, the cycles
# samples of the idle task, left out).
perf_counts() {
	perf script -f -i "$1" --itrace=i1i -F tid 2>/dev/null |
		awk '$1 != 0 { n[$1]++ } END { for (t in n) print t, n[t] }' |
		sort -n
}

# $1 the recording's directory, $2 the variant's perf.data there, $3 what:
# htr build, one tree per thread with trace, each its truth, one warning
# line that counts the kernel stretches.
check() {
	d=$1 f=$2 what=$3
	p=${f%.data}
	rm -f "$d/$p".*.htr
	if ! "$htr" build -q "$d/$f" 2>"$d/err"; then
		fail "$what: htr build: $(head -1 "$d/err")"
		return 1
	fi
	if [ "$(wc -l <"$d/err")" -ne 1 ] ||
	   ! grep -q "warning: .*: not all decoded: [0-9]* stretches in the kernel" "$d/err"; then
		fail "$what: not the one warning line: $(head -3 "$d/err")"
	fi
	n=0
	for truth in "$d"/rec.data.t*.truth; do
		tid=$(awk '$1 == "tid" { print $3; exit }' "$truth")
		n=$((n + 1))
		if [ ! -f "$d/$p.$tid.htr" ]; then
			fail "$what: no $p.$tid.htr"
		elif ! res=$("$cmp" --tsc "$truth" "$d/$p.$tid.htr" 2>&1); then
			fail "$what: tid $tid against its truth: $res"
		fi
	done
	got=$(ls "$d/$p".*.htr 2>/dev/null | wc -l)
	[ "$got" -eq "$n" ] || fail "$what: $got trees, $n threads recorded"
	# Every gap is where the kernel ran, named so; the same files
	# from one decoding thread and from two on small chunks.
	for h in "$d/$p".*.htr; do
		"$htr" gaps "$h" >"$d/gaps"
		all=$(grep -c '^[0-9]*  ' "$d/gaps")
		k=$(grep -c '^[0-9]*  disabled  0x[0-9a-f]*  .*  \[kernel\]' "$d/gaps")
		[ "$all" -eq "$k" ] && [ "$k" -gt 0 ] ||
			fail "$what: $h: $k of $all gaps named [kernel]"
	done
	"$htr" build -q -j1 -o "$d/j1" "$d/$f" 2>/dev/null
	"$htr" build -q -j2 --chunk-size 1K -o "$d/j2" "$d/$f" 2>/dev/null
	for h in "$d"/j1.*.htr; do
		same_htr "$h" "$d/j2.${h##*/j1.}" ||
			fail "$what: -j1 and -j2 built other files"
	done
	rm -f "$d"/j1.* "$d"/j2.*
	echo "ok      $what: $got tree(s), each its thread's truth; $(sed 's/.*not all decoded: //' "$d/err" | cut -c1-40)..."
}

# $1 the recording's directory, $2 what: k.data with the kernel stub's
# code (--kcore DIR: perf record --kcore's layout; --vmlinux FILE; the
# perf.data directory perf record --kcore writes, as it is): no
# gap, no warning, and every stretch's 3 instructions decoded (2 of the
# last one, the exit's, which never returns).
kernel_code() {
	d=$1 what=$2
	python3 "$here/hwperf.py" --kcore-dir "$d/kc" ||
		{ fail "$what: hwperf.py --kcore-dir"; return; }
	"$htr" build -q -o "$d/nok" "$d/k.data" 2>"$d/err"
	s=$(sed -n 's/.* \([0-9]*\) stretches in the kernel.*/\1/p' "$d/err")
	base=$("$htr" info "$d"/nok.*.htr | awk '$1 == "instructions:" { print $2 }')
	# perf record --kcore's own layout: a directory, DIR/data and
	# DIR/kcore_dir, built as it is.
	mkdir "$d/dir.data" && cp "$d/k.data" "$d/dir.data/data" &&
		cp -r "$d/kc/kcore_dir" "$d/dir.data/"
	for how in "--kcore $d/kc" "--vmlinux $d/kc/vmlinux" "--dir"; do
		rm -f "$d"/kk.*
		if [ "$how" = --dir ]; then
			"$htr" build -q "$d/dir.data" 2>"$d/err" &&
				mv "$d"/dir.*.htr "$d/kk.dir.htr"
		else
			# shellcheck disable=SC2086
			"$htr" build -q $how -o "$d/kk" "$d/k.data" 2>"$d/err"
		fi
		if [ $? -ne 0 ]; then
			fail "$what ${how%% *}: $(head -1 "$d/err")"
			continue
		fi
		n=$("$htr" info "$d"/kk.*.htr | awk '$1 == "instructions:" { print $2 }')
		g=$("$htr" gaps "$d"/kk.*.htr | tail -1)
		if [ -s "$d/err" ] || [ -z "$s" ] ||
		   [ "$n" -ne $((base + 3 * s - 1)) ] ||
		   [ "${g%% *}" != 0 ]; then
			fail "$what ${how%% *}: $n instructions ($base + 3 x $s - 1 wanted), $g, $(head -1 "$d/err")"
		else
			echo "ok      $what ${how%% *}: the kernel's $((3 * s - 1)) instructions decoded too, no gap"
		fi
	done
}

# $1 name, $2 htr record's extra option or "", then the program.
variants() {
	name=$1 opt=$2
	shift 2
	d=$work/$name
	mkdir "$d"
	# shellcheck disable=SC2086
	if ! "$htr" record -q $opt -o "$d/rec.data" -- "$@" >/dev/null \
		2>"$d/err"; then
		fail "$name: record: $(head -1 "$d/err")"
		return
	fi
	python3 "$here/hwperf.py" "$d/rec.data" "$d/k.data" --kernel &&
	python3 "$here/hwperf.py" "$d/rec.data" "$d/kc.data" --kernel \
		--cycles &&
	python3 "$here/hwperf.py" "$d/rec.data" "$d/old.data" --kernel \
		--cycles --old ||
		{ fail "$name: hwperf.py"; return; }
	check "$d" k.data "$name user+kernel"
	if res=$("$check" --user-only "$d/k.data" 2>&1); then
		echo "ok      $name user+kernel: $(echo "$res" | tail -1)"
	else
		fail "$name user+kernel: $(echo "$res" | grep FAIL | head -3)"
	fi
	check "$d" kc.data "$name user+kernel, cycles + intel_pt"
	check "$d" old.data "$name user+kernel, cycles, perf 4.x layout"
	if [ $have_perf -eq 1 ]; then
		if perf inject -i "$d/kc.data" -o - >"$d/pipe.data" \
			2>"$d/err"; then
			check "$d" pipe.data "$name user+kernel, cycles, pipe format"
			for f in kc old pipe; do
				"$check" "$d/$f.data" >"$d/check.out" 2>&1 ||
					fail "$name: the reader on $f.data: $(grep FAIL "$d/check.out" | head -2)"
			done
		else
			fail "$name: perf inject: $(head -1 "$d/err")"
		fi
	fi
	case $opt in
	*--cpus*)
		# perf record -- prog without -a: per-task events on every
		# CPU, the workload's own SWITCH records.
		python3 "$here/hwperf.py" "$d/rec.data" "$d/task.data" \
			--kernel --cycles --per-task ||
			fail "$name: hwperf.py --per-task"
		check "$d" task.data "$name user+kernel, cycles, per-task switches" ;;
	*) kernel_code "$d" "$name" ;;
	esac
	case $opt in *--no-ret-compression*) ;; *) return ;; esac
	[ $have_perf -eq 1 ] || return
	perf_agree "$d" kc.data kc "$name user+kernel, cycles"
	[ -f "$d/task.data" ] &&
		perf_agree "$d" task.data task "$name user+kernel, per-task switches"
	# htr insns --trace re-decodes the user+kernel perf.data as the
	# build did: perf's instructions, one by one.
	case $opt in *--cpus*) ;; *)
		h=$(ls "$d"/kc.*.htr)
		n=$("$htr" info "$h" | awk '$1 == "instructions:" { print $2 }')
		"$htr" insns --trace "$d/kc.data" --count "$n" "$h" |
			awk '$1 ~ /^[0-9]+$/ { sub(/^0x/, "", $2); print $2 }' \
			>"$d/htr.ips"
		perf script -f -i "$d/kc.data" --itrace=i1i -F tid,ip \
			2>/dev/null | awk '$1 != 0 { print $2 }' >"$d/perf.ips"
		if [ -s "$d/htr.ips" ] && cmp -s "$d/htr.ips" "$d/perf.ips"; then
			echo "ok      $name: htr insns --trace gives perf's $n instructions"
		else
			fail "$name: htr insns --trace: $(wc -l <"$d/htr.ips") instructions, not perf's $(wc -l <"$d/perf.ips")"
		fi ;;
	esac
	# No clock_data: perf has no wall clock; the counts alone.
	want=$(perf_counts "$d/old.data")
	got=$(for h in "$d"/old.*.htr; do
		tid=$(basename "$h" .htr | sed 's/.*\.//')
		echo "$tid $("$htr" info "$h" |
			awk '$1 == "instructions:" { print $2 }')"
	done | sort -n)
	if [ "$want" = "$got" ]; then
		echo "ok      $name perf 4.x layout: perf script's instructions per thread ($(echo $got))"
	else
		fail "$name perf 4.x layout: perf: $(echo $want), htr: $(echo $got)"
	fi
}

variants calls "" "$work/calls-O0"
variants calls-noret --no-ret-compression "$work/calls-O0"
variants cpus "--cpus 2" "$work/threads-O2"
variants cpus-noret "--cpus 2 --no-ret-compression" "$work/threads-O2"

# A library withheld at build time: its code is decode errors; still one
# tree, and the one line names the library and counts the errors.
d=$work/miss
mkdir "$d"
cp "$work/libhw.so" "$d/libgone.so"
if "$htr" record -q -o "$d/rec.data" -- "$work/dlopen-O0" "$d/libgone.so" \
	>/dev/null 2>"$d/err" &&
   python3 "$here/hwperf.py" "$d/rec.data" "$d/k.data" --kernel --cycles
then
	rm "$d/libgone.so"
	if "$htr" build -q "$d/k.data" 2>"$d/err" &&
	   [ "$(ls "$d"/k.*.htr | wc -l)" -eq 1 ] &&
	   [ "$(wc -l <"$d/err")" -eq 1 ] &&
	   grep -q "not all decoded: module .*libgone.so not found.*decode error.*stretches in the kernel" "$d/err"
	then
		echo "ok      a library withheld: one tree; $(cut -c1-160 "$d/err")..."
	else
		fail "a library withheld: $(head -3 "$d/err")"
	fi
else
	fail "a library withheld: record: $(head -1 "$d/err")"
fi

if [ $fails -ne 0 ]; then
	echo "$fails failure(s)"
	exit 1
fi
echo "all hardware-layout perf.data checks passed"
