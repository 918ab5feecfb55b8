#!/bin/sh
# The messages of issue 36, point 7, each against what is true of its
# input: a file that is no trace says what it is; an unknown option
# inside one word ("-x y.htr") is named as typed; a sidecar on a full
# file system (a small tmpfs, as root) says "No space left on device",
# a build there names its output and leaves nothing behind; text from a
# perf.data (comm, module paths) reaches stderr with its control
# characters escaped.
# usage: test_messages.sh HTR HTR_SYNTH
set -u
htr=$1 synth=$2
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
mnt=
cleanup() {
	[ -n "$mnt" ] && umount "$mnt" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT INT TERM
fails=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

. "$(dirname "$0")/expect.sh"

"$synth" -q -S mixed -s 5 -n 2e4 "$dir/t" || exit 1
T="$dir/t.pt" E="$dir/t.elf"

# a. Inputs that are no trace: what they are, not "no image".
printf 'int main(void) { return 0; }\n' >"$dir/prog.c"
: >"$dir/empty.data"
printf 'PERF' >"$dir/cut.data"
expect 1 "prog.c: not an Intel PT trace or perf.data (a text file); record one with 'htr record'" \
	"$htr" build "$dir/prog.c"
expect 1 "prog.c: not an Intel PT trace or perf.data (a text file)" \
	"$htr" build "$dir/prog.c" --elf "$E"
expect 1 "empty.data: empty file" "$htr" build "$dir/empty.data"
expect 1 "cut.data: a perf.data cut short (4 bytes" "$htr" build "$dir/cut.data"
expect 1 "t.elf: an ELF file, not a trace: give it with --elf" "$htr" build "$E"
head -c 4096 /dev/urandom | tr -d '\002' >"$dir/noise.bin"
expect 1 "noise.bin: not an Intel PT trace or perf.data (no PSB packet" \
	"$htr" build "$dir/noise.bin"
expect 1 "missing.pt: No such file" "$htr" build "$dir/missing.pt"
# a trace (it holds a PSB) still wants its image
expect 2 "no image: give --elf or --raw" "$htr" build "$T"

# b. An ELF that is not the traced code: every instruction is a decode
# error.  The synthesizer's ELF at another base (--raw FILE@BASE) is the
# same code where the trace never went.
printf 'not this one' >"$dir/old.htr"
for img in "--elf /bin/true" "--raw $E@0x7f0000000000"; do
	# shellcheck disable=SC2086
	expect 1 "t.pt: nothing decoded: 0 instructions, [0-9]* decode error.*(${img%% *} ${img#* })" \
		"$htr" build "$T" $img -o "$dir/none.htr"
	if [ -e "$dir/none.htr" ] || ls "$dir" | grep -q '^none.htr'; then
		fail "$img: left $(ls "$dir" | grep '^none.htr')"
	fi
done
# the right image still builds
expect 0 '' "$htr" build -q "$T" --elf "$E" -o "$dir/t.htr"

# c. An unknown option inside one word names the option, not the
# command; a file whose name starts with '-' opens after --.
cp "$dir/t.htr" "$dir/-x y.htr"
expect 2 "info: unknown option '-x'" "$htr" info "-x y.htr"
expect 2 "build: unknown option '-z'" "$htr" build "-z $T"
expect 2 "build: -o needs a value" "$htr" build "$T" --elf "$E" -o
(cd "$dir" && "$htr" info -- "-x y.htr" >/dev/null 2>&1) &&
	echo "ok: info -- '-x y.htr' opens it" ||
	fail "info -- '-x y.htr' does not open it"

# small_fs SIZE DIR: a tmpfs of SIZE mounted on DIR (made here), $mnt
# set to it for cleanup; fails, $mnt empty, without root or mount.
small_fs() {
	mnt=$2
	mkdir "$mnt"
	if [ "$(id -u)" != 0 ] || ! mount -t tmpfs -o size="$1" tmpfs "$mnt" \
		2>/dev/null; then
		mnt=
		return 1
	fi
}

# d. A sidecar on a full file system: a tmpfs of 1 MiB holding the .htr
# and a file that leaves N KiB free, for N from nothing (LMDB's lock file
# cannot get its blocks) through a partly written data file to a commit
# that runs out of room.  Each must say ENOSPC, name the sidecar, and
# still print the results (computed in memory).
if ! small_fs 1m "$dir/mnt"; then
	echo "skip: a full file system needs root and mount -t tmpfs"
else
	"$synth" -q -S mixed -s 5 -n 2e5 "$dir/big" || exit 1
	"$htr" build -q "$dir/big.pt" --elf "$dir/big.elf" -o "$mnt/big.htr" ||
		fail "cannot build on the tmpfs"
	"$htr" top --limit 3 "$dir/big.htr" 2>/dev/null >/dev/null
	"$htr" build -q "$dir/big.pt" --elf "$dir/big.elf" -o "$dir/big.htr" &&
		"$htr" top --json "$dir/big.htr" >"$dir/top.want" 2>/dev/null
	size=$(stat -c %s "$mnt/big.htr")
	for kib in 0 4 8 16 32 64; do
		rm -rf "$mnt/big.htr.lmdb" "$mnt/fill"
		# up to the tmpfs's 1 MiB less what the .htr took (a tmpfs
		# counts pages)
		head -c $((1048576 - (size + 4095) / 4096 * 4096 - kib * 1024)) \
			/dev/zero >"$mnt/fill" 2>/dev/null
		"$htr" top --json "$mnt/big.htr" >"$dir/top.got" 2>"$dir/err"
		rc=$?
		if [ $rc != 0 ] ||
		   ! grep -q "big.htr.lmdb: cannot write: No space left on device" "$dir/err" ||
		   [ "$(wc -l <"$dir/err")" != 1 ] || ! cmp -s "$dir/top.want" "$dir/top.got"; then
			fail "sidecar with $kib KiB free: exit $rc: $(head -2 "$dir/err")"
		else
			echo "ok: sidecar with $kib KiB free: $(cat "$dir/err")"
		fi
	done
	# once there is room the sidecar is written (nothing left that
	# reads as damage)
	rm -f "$mnt/fill"
	expect 0 '' "$htr" top --limit 3 "$mnt/big.htr"
	[ -s "$mnt/big.htr.lmdb/data.mdb" ] || fail "no sidecar once there is room"
	umount "$mnt" && mnt=
fi

# d2. A build on a full file system: a 12 MiB tmpfs holding a file that
# leaves N KiB, for N from too little for the first blocks through the
# spools and the commit's mapped link pass (a 6 MB .htr) to enough.  Each
# failure is one line naming the output and ENOSPC, exit 1, and leaves
# nothing behind (no OUT, no OUT.tmpPID); with room it builds.
if ! small_fs 12m "$dir/mnt2"; then
	echo "skip: a full file system needs root and mount -t tmpfs"
else
	"$synth" -q --no-truth --no-bundle -S mixed -s 5 -n 3e6 "$dir/b3" ||
		exit 1
	timing="--cpuid-0x15-eax 1 --cpuid-0x15-ebx 2 --mtc-freq 6 --nom-freq 16"
	for left in 100 1000 3000 4000 4500 5500 6000 7000 9000; do
		for j in 1 2; do
			rm -f "$mnt"/*
			head -c $((12 * 1048576 - left * 1024)) /dev/zero \
				>"$mnt/fill" 2>/dev/null
			# shellcheck disable=SC2086
			"$htr" build -q -j$j $timing "$dir/b3.pt" --elf "$dir/b3.elf" \
				-o "$mnt/b.htr" 2>"$dir/err"
			rc=$?
			rest=$(ls "$mnt" | grep -v '^fill$')
			if [ $rc = 0 ] && [ "$left" -ge 9000 ] && [ "$rest" = b.htr ]; then
				echo "ok: build with $left KiB free (-j$j)"
			elif [ $rc = 1 ] && [ -z "$rest" ] &&
			     [ "$(wc -l <"$dir/err")" = 1 ] &&
			     grep -q "^htr: build: $mnt/b.htr: .*: No space left on device$" "$dir/err"; then
				echo "ok: build with $left KiB free (-j$j): $(cat "$dir/err")"
			else
				fail "build with $left KiB free (-j$j): exit $rc, left '$rest': $(head -2 "$dir/err")"
			fi
		done
	done
	umount "$mnt" && mnt=
fi

# e. Control characters from a perf.data: a program recorded through a
# symlink whose name holds a newline (the COMM record), its file under a
# directory whose name holds ESC [31m (the MMAP record), then moved away
# (the build warns of the missing module by that path).
if command -v qemu-x86_64 >/dev/null 2>&1 && command -v cc >/dev/null 2>&1; then
	esc=$(printf 'red\033[31mx')
	nl=$(printf 'ev\nil')
	mkdir "$dir/d$esc"
	cc -O0 -o "$dir/d$esc/prog" "$here/record/calls.c" ||
		fail "cannot compile calls.c"
	ln -s "d$esc/prog" "$dir/$nl"
	if (cd "$dir" && HOME="$dir" "$htr" record -q -o "$dir/e.data" -- "./$nl") \
		>/dev/null 2>"$dir/err"; then
		mv "$dir/d$esc" "$dir/gone"
		mkdir "$dir/eout"
		HOME="$dir" "$htr" build -o "$dir/eout/" "$dir/e.data" \
			>/dev/null 2>"$dir/err"
		# od: no ESC byte (033) nor a line that is not htr's
		if grep -q "$(printf '\033')" "$dir/err" ||
		   grep -qv '^htr: build: ' "$dir/err"; then
			fail "control characters reached stderr:"
			od -c "$dir/err" | head -8
		elif ! grep -q 'ev\\nil' "$dir/err" ||
		     ! grep -q 'dred\\x1b\[31mx/prog not found' "$dir/err"; then
			fail "comm or module path not escaped: $(cat "$dir/err")"
		else
			echo "ok: comm and module path escaped:"
			sed 's/^/    /' "$dir/err"
		fi
	else
		fail "htr record through '$nl': $(head -1 "$dir/err")"
	fi
else
	echo "skip: the perf.data case needs qemu-x86_64 and cc"
fi

[ "$fails" = 0 ] && echo "messages: all checks passed" || echo "messages: $fails failed"
[ "$fails" = 0 ]
