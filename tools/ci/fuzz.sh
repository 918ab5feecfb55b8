#!/bin/sh
# Build the libFuzzer targets (clang, ASan + UBSan) and run each one for a
# fixed time over a seed corpus made from the shipped sample.  A crash,
# leak or timeout fails the run and leaves its reproducer in
# build-fuzz/crashes/.  usage: tools/ci/fuzz.sh [SECONDS_PER_TARGET
# [TARGET...]] (default 20 s, every target).  tools/bench/fuzz.sh runs the
# same for longer and prints the figures.
set -eu
cd "$(dirname "$0")/../.."
secs=${1:-20}
[ $# -gt 0 ] && shift
all="htr trace elf sidecar perfdata cpuwide parallel walk"
targets=${*:-$all}
for t in $targets; do
	case " $all " in
	*" $t "*) ;;
	*) echo "fuzz: no target '$t' (the targets: $all)" >&2; exit 2 ;;
	esac
done
bdir=${HTR_FUZZ_BUILDDIR:-build-fuzz}

. tools/ci/setup.sh
command -v clang >/dev/null || {
	echo "fuzz: installing clang" >&2
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	quietly $sudo apt-get install -y -qq --no-install-recommends clang
}
if [ ! -f "$bdir/build.ninja" ]; then
	CC=clang quietly meson setup "$bdir" -Dfuzz=true -Dtests=false \
		-Db_sanitize=address,undefined -Db_lundef=false
fi
quietly ninja -C "$bdir"

# Seeds: the sample's .htr, trace and ELF, and small synthesized ones.
seeds="$bdir/seeds"
if [ ! -d "$seeds" ]; then
	mkdir -p "$seeds/htr" "$seeds/trace" "$seeds/elf" "$seeds/sidecar" \
		"$seeds/perfdata" "$seeds/cpuwide"
	# Small files the mutator can reach every part of (max_len below):
	# a few thousand instructions of two scenarios.
	for sc in mixed real; do
		build/tools/synth/htr-synth -q -S $sc -s 3 -n 3000 --no-bundle \
			"$seeds/$sc"
		build/tools/htr/htr build -q "$seeds/$sc.pt" \
			--elf "$seeds/$sc.elf" --cpuid-0x15-eax 1 \
			--cpuid-0x15-ebx 2 --mtc-freq 6 --nom-freq 16 \
			-o "$seeds/htr/$sc.htr"
		rm -f "$seeds/$sc".*
	done
	# The trace target decodes against the sample's ELF; so do the
	# parallel and walk ones.
	cp tests/data/sample.pt "$seeds/trace/"
	head -c 4096 tests/data/sample.pt >"$seeds/trace/head.pt"
	mkdir -p "$seeds/parallel" "$seeds/walk"
	cp "$seeds/trace/"* "$seeds/parallel/"
	cp "$seeds/trace/"* "$seeds/walk/"
	cp tests/data/sample.elf "$seeds/elf/"
	# CPU-wide: thread 1 on CPU 0 and thread 2 on CPU 1 from time 0,
	# the sample's first 8 KiB on CPU 0 and the rest on CPU 1
	# (fuzz_cpuwide.c has the layout).
	{
		printf '\002\000\000\001\000\000\000\000\000\000\000\000\000'
		printf '\001\000\002\000\000\000\000\000\000\000\000\000'
		printf '\000\040'
		cat tests/data/sample.pt
	} >"$seeds/cpuwide/two.bin"
	# A valid sidecar of the sample, made by the analyzers themselves.
	cp tests/data/sample.htr "$seeds/s.htr"
	build/tools/htr/htr top "$seeds/s.htr" >/dev/null 2>&1 || true
	[ -f "$seeds/s.htr.lmdb/data.mdb" ] &&
		cp "$seeds/s.htr.lmdb/data.mdb" "$seeds/sidecar/"
	rm -rf "$seeds/s.htr" "$seeds/s.htr.lmdb"
	# A small perf.data (htr record of /bin/true: every record kind the
	# reader knows, 19 KiB), when qemu-user is there to make one.
	if command -v qemu-x86_64 >/dev/null 2>&1; then
		build/tools/htr/htr record -q -o "$seeds/true.data" -- \
			/bin/true >/dev/null 2>&1 &&
			mv "$seeds/true.data" "$seeds/perfdata/" || true
		# ... one with an address filter string (its own text)
		build/tools/htr/htr record -q --filter 0x0-0x7fffffffffff \
			-o "$seeds/filt.data" -- /bin/true >/dev/null 2>&1 &&
			mv "$seeds/filt.data" "$seeds/perfdata/" || true
		# ... and a CPU-wide one (per-CPU buffers, switches).
		build/tools/htr/htr record -q --cpus 2 -o "$seeds/cw.data" \
			-- /bin/true >/dev/null 2>&1 &&
			mv "$seeds/cw.data" "$seeds/perfdata/" || true
		# ... and that one in perf record -z's layout (zstd), when
		# the tests' build has tests/zperf.
		[ -x build/tests/zperf ] && [ -f "$seeds/perfdata/cw.data" ] &&
			build/tests/zperf "$seeds/perfdata/cw.data" \
				"$seeds/perfdata/cw-z.data" 100 || true
		rm -f "$seeds"/true.data* "$seeds"/cw.data* "$seeds"/filt.data*
	fi
fi

mkdir -p "$bdir/crashes"
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=detect_leaks=1
status=0
for t in $targets; do
	mkdir -p "$bdir/corpus/$t" "$seeds/$t"
	log="$bdir/fuzz_$t.log"
	if "$bdir/tests/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=10 \
		-rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
		-artifact_prefix="$bdir/crashes/$t-" \
		"$bdir/corpus/$t" "$seeds/$t" >"$log" 2>&1; then
		runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
		rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
		echo "fuzz: $t: ${runs:-?} executions, ${rate:-?}/s, no crash"
	else
		echo "fuzz: $t: FAILED (log: $log)" >&2
		grep -E 'ERROR|SUMMARY|runtime error' "$log" | head -5 >&2
		status=1
	fi
done
exit $status
