#!/bin/sh
# htr record's speed against plain qemu-x86_64 running the same program:
# `python3 -c pass` (Debian's /usr/bin/python3, about 3e7 instructions) and
# a C program (spin.c, about 10 instructions an iteration, ITERS iterations,
# default 3e6: about 3e7 instructions).  Per program and command: the
# median over RUNS runs (default 5) of wall seconds and of CPU seconds
# (user + system of the command and its children: qemu's included),
# instructions per second end to end (the recorder's count over the wall
# time, perf.data written: the default output), the recorder's peak RSS
# (its own; qemu's is apart), and the ratio of the wall time to plain
# qemu's (the cost of recording).  The commands run in turn (qemu, tcg,
# log, qemu, tcg, ...), so a machine that changes speed during the run
# moves all of them alike.  The exec-log engine (--engine log, 0.1-0.5 M
# instructions/s) runs LOG_RUNS times (default 1; 0 leaves it out).
# Then a recursion 10^5 deep (tests/record/deep.c): the time must grow with
# the instructions, not the depth.
# Not part of `meson test`: meson test -C build --benchmark record-speed -v
#
# usage: record_speed.sh HTR [RUNS]
#        env: ITERS (spin.c's iterations), LOG_RUNS
set -eu
htr=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
runs=${2:-5}
iters=${ITERS:-3000000}
log_runs=${LOG_RUNS:-1}
here=$(cd "$(dirname "$0")" && pwd)
command -v qemu-x86_64 >/dev/null || { echo "SKIP: no qemu-x86_64"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
cc -O1 -o "$work/spin" "$here/spin.c"
cc -O1 -o "$work/deep" "$here/../../tests/record/deep.c"
# python3 -c pass lists its working directory: an empty one, always.
mkdir "$work/cwd"

# once CMD...: one run in $work/cwd; appends "WALL CPU" to $work/t and
# keeps stderr in $work/err.
once() {
	t0=$(date +%s%N)
	if ! (cd "$work/cwd" && /usr/bin/time -f '%U %S' -o "$work/time" \
		"$@" >/dev/null 2>"$work/err"); then
		echo "record_speed: $* failed: $(tail -2 "$work/err")" >&2
		exit 1
	fi
	t1=$(date +%s%N)
	read -r u k <"$work/time"
	awk -v a="$t0" -v b="$t1" -v u="$u" -v k="$k" \
		'BEGIN { printf "%.3f %.3f\n", (b - a) / 1e9, u + k }'
}

# median FILE COLUMN
median() {
	sort -g -k"$2,$2" "$1" | awk -v c="$2" '{ v[NR] = $c }
		END { if (NR % 2) print v[(NR + 1) / 2];
		      else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# bench NAME PROG ARGS...
bench() {
	name=$1
	shift
	rm -f "$work"/*.t "$work"/*.n
	i=0
	while [ $i -lt "$runs" ]; do
		once qemu-x86_64 "$@" >>"$work/q.t"
		rm -f "$work/o.data"*
		once "$htr" record --engine tcg -o "$work/o.data" -- "$@" \
			>>"$work/tcg.t"
		sed -n 's/.*: \([0-9]*\) insns run.*peak RSS \([0-9.]*\) MiB.*/\1 \2/p' \
			"$work/err" >>"$work/tcg.n"
		if [ $i -lt "$log_runs" ]; then
			rm -f "$work/o.data"*
			once "$htr" record --engine log -o "$work/o.data" -- \
				"$@" >>"$work/log.t"
			sed -n 's/.*: \([0-9]*\) insns run.*peak RSS \([0-9.]*\) MiB.*/\1 \2/p' \
				"$work/err" >>"$work/log.n"
		fi
		i=$((i + 1))
	done
	qw=$(median "$work/q.t" 1)
	qc=$(median "$work/q.t" 2)
	insns=$(median "$work/tcg.n" 1)
	printf '%s: %s instructions (htr record'"'"'s count), median of %s runs\n' \
		"$name" "$insns" "$runs"
	printf '  %-22s %8s %8s %10s %9s %8s\n' command "wall s" "cpu s" \
		"M insns/s" "peak MiB" "x qemu"
	printf '  %-22s %8s %8s %10.1f %9s %8s\n' qemu-x86_64 "$qw" "$qc" \
		"$(awk -v n="$insns" -v w="$qw" 'BEGIN { print n / w / 1e6 }')" \
		- 1.00
	for e in tcg log; do
		[ -s "$work/$e.t" ] || continue
		w=$(median "$work/$e.t" 1)
		c=$(median "$work/$e.t" 2)
		n=$(median "$work/$e.n" 1)
		m=$(median "$work/$e.n" 2)
		printf '  %-22s %8s %8s %10.2f %9s %8.2f\n' \
			"htr record --engine $e" "$w" "$c" \
			"$(awk -v n="$n" -v w="$w" 'BEGIN { print n / w / 1e6 }')" \
			"$m" "$(awk -v a="$w" -v b="$qw" 'BEGIN { print a / b }')"
	done
	rm -f "$work"/*.t "$work"/*.n
}

py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
bench "python3 -c pass" "$py" -c pass
bench "spin $iters" "$work/spin" "$iters"
echo "a recursion 10^5 deep (tests/record/deep.c), --engine tcg:"
"$htr" record --engine tcg -o "$work/deep.data" -- "$work/deep" 100000 \
	2>&1 >/dev/null | sed 's/^/  /'
