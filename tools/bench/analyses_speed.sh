#!/bin/sh
# What the analyses cost against the build that made the file: on a mixed
# synthesized trace of each size, htr build -j1, then the first htr top
# (computes the sidecar: the "tsc" and "sym" analyzers), the second htr top
# (reloads it), htr dump --tsc > /dev/null and htr find NAME.  Per command:
# wall seconds, its ratio to the build's, and peak RSS in MiB: the
# kernel's peak (/usr/bin/time), and anonymous and file-mapped apart (the
# largest RssAnon and RssFile of /proc/PID/status, sampled every 10 ms, so
# only approximate for runs of a few samples: the
# mapped .htr and sidecar are file pages the kernel may drop, anonymous
# memory is what the analyses hold).  Runs alternate between the
# commands; each figure is the median of RUNS runs (default 3); the first
# top is timed with the sidecar removed before each run.
#
# usage: analyses_speed.sh HTR_SYNTH HTR [SIZES]
#        (SIZES default "1e7 1e8"; "1e9" needs about 3 GB in TMPDIR)
set -eu
synth=$1 htr=$2 sizes=${3:-1e7 1e8}
runs=${RUNS:-3}
dir=$(mktemp -d "${TMPDIR:-/tmp}/htr-anbench.XXXXXX")
trap 'rm -rf "$dir"' EXIT INT TERM
# the synthesizer's CPUID 0x15, MTCFreq, nominal ratio
opts="--cpuid-0x15-eax 1 --cpuid-0x15-ebx 2 --mtc-freq 6 --nom-freq 16"

# run NAME CMD...: run CMD once (output to /dev/null), append "NAME
# SECONDS HWM_KIB ANON_KIB FILE_KIB" to $dir/runs.
run() {
	name=$1
	shift
	t0=$(date +%s%N)
	/usr/bin/time -f %M -o "$dir/time" "$@" >/dev/null 2>"$dir/err" &
	tpid=$!
	pid="" anon=0 file=0
	while kill -0 "$tpid" 2>/dev/null; do
		[ -n "$pid" ] || pid=$(cat "/proc/$tpid/task/$tpid/children" \
			2>/dev/null | awk '{ print $1 }')
		if [ -n "$pid" ]; then
			# shellcheck disable=SC2046
			set -- $(awk '/^RssAnon:/ { a = $2 } /^RssFile:/ { f = $2 }
				END { print a + 0, f + 0 }' \
				"/proc/$pid/status" 2>/dev/null || echo 0 0)
			[ "$1" -gt "$anon" ] && anon=$1
			[ "$2" -gt "$file" ] && file=$2
		fi
		sleep 0.01
	done
	if ! wait "$tpid"; then
		echo "analyses-speed: $name failed:" >&2
		cat "$dir/err" >&2
		exit 1
	fi
	t1=$(date +%s%N)
	echo "$name $(awk -v a="$t0" -v b="$t1" 'BEGIN { print (b - a) / 1e9 }')" \
		"$(tail -1 "$dir/time") $anon $file" >> "$dir/runs"
}

echo "analyses-speed: median of $runs alternating runs; s: wall seconds;" \
	"/build: over htr build -j1's; RSS in MiB: peak, anonymous, file" \
	"(sampled); load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
printf "%-10s %-14s %8s %7s %8s %8s %8s\n" trace command s /build \
	rss anon file
for n in $sizes; do
	"$synth" -q --no-truth --no-bundle -S mixed -n "$n" "$dir/t"
	cat "$dir/t.pt" >/dev/null
	: > "$dir/runs"
	i=0
	while [ $i -lt "$runs" ]; do
		rm -f "$dir/t.htr"
		# shellcheck disable=SC2086
		run build "$htr" build -q -j1 $opts --elf "$dir/t.elf" \
			-o "$dir/t.htr" "$dir/t.pt"
		rm -rf "$dir/t.htr.lmdb"
		run top1 "$htr" top "$dir/t.htr"
		run top2 "$htr" top "$dir/t.htr"
		run dump-tsc "$htr" dump --tsc "$dir/t.htr"
		# the function with the most calls: the longest list
		fn=$("$htr" top --sort calls -n 1 --json "$dir/t.htr" |
			sed -n 's/.*"name": *"\([^"]*\)".*/\1/p' | head -1)
		run find "$htr" find -n 0 "$fn" "$dir/t.htr"
		i=$((i + 1))
	done
	awk -v n="$n" '
		{ k = $1; c[k]++; t[k, c[k]] = $2; h[k, c[k]] = $3
		  a[k, c[k]] = $4; f[k, c[k]] = $5
		  if (!(k in seen)) { seen[k] = 1; order[++m] = k } }
		function med(arr, k, cnt,   i, j, v, tmp) {
			for (i = 1; i <= cnt; i++) v[i] = arr[k, i]
			for (i = 1; i <= cnt; i++)
				for (j = i + 1; j <= cnt; j++)
					if (v[j] < v[i]) { tmp = v[i]; v[i] = v[j]; v[j] = tmp }
			return cnt % 2 ? v[(cnt + 1) / 2] : (v[cnt / 2] + v[cnt / 2 + 1]) / 2
		}
		END {
			b = med(t, "build", c["build"])
			for (i = 1; i <= m; i++) {
				k = order[i]
				printf "%-10s %-14s %8.3f %7.2f %8.1f %8.1f %8.1f\n",
					"mixed-" n, k, med(t, k, c[k]),
					med(t, k, c[k]) / b,
					med(h, k, c[k]) / 1024, med(a, k, c[k]) / 1024,
					med(f, k, c[k]) / 1024
			}
		}' "$dir/runs"
	rm -rf "$dir"/t.*
done
