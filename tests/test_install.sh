#!/bin/sh
# The examples against an installed libhtr: `meson install --destdir` into
# a temporary directory, compile examples/*.c with nothing but
# `pkg-config --cflags --libs htr` pointed there, run them on the shipped
# sample: build from memory, then the heaviest function, which must be
# the first line of `htr top --sort local`.
# Usage: test_install.sh BUILDDIR SOURCEROOT HTR
set -eu
build=$1 src=$2 htr=$3
tmp=$(mktemp -d /tmp/htr-test-install-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "not ok: $*"; exit 1; }

meson install -C "$build" --no-rebuild --quiet --destdir "$tmp/root" \
	>"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "meson install"; }
for page in man1/htr.1 man1/htr-build.1 man3/libhtr.3; do
	find "$tmp/root" -path "*/share/man/$page" | grep -q . ||
		fail "$page not installed"
done
echo "ok: the man pages are installed"
! find "$tmp/root" -name htr-synth | grep -q . ||
	fail "htr-synth (a test tool) installed without -Dinstall_synth=true"
pc=$(find "$tmp/root" -name htr.pc | head -n 1)
[ -n "$pc" ] || fail "no htr.pc installed"
export PKG_CONFIG_PATH="$(dirname "$pc")" PKG_CONFIG_SYSROOT_DIR="$tmp/root"
flags=$(pkg-config --cflags --libs htr) || fail "pkg-config --cflags --libs htr"
case "$flags" in *"$tmp/root"*) ;; *) fail "flags do not point at the install: $flags";; esac
echo "ok: pkg-config --cflags --libs htr: $flags"
libdir=$(pkg-config --variable=libdir htr)
# A sanitizer build's library needs its runtime first in the program.
san=
nm -D "$libdir/libhtr.so" 2>/dev/null | grep -q __asan_init &&
	san=-fsanitize=address,undefined
for ex in heaviest stream; do
	# shellcheck disable=SC2086
	cc -std=c11 -Wall -Wextra -pedantic -Werror $san "$src/examples/$ex.c" \
		$flags -o "$tmp/$ex" || fail "cc $ex.c against the install"
done
echo "ok: both examples compile against the installed headers and library"
export LD_LIBRARY_PATH="$libdir"  # pkg-config adds the sysroot
ldd "$tmp/heaviest" | grep -q "$tmp/root" || fail "not linked to the installed libhtr"

"$tmp/stream" "$src/tests/data/sample.pt" "$src/tests/data/sample.elf" \
	"$tmp/s.htr" >"$tmp/stream.out" 2>"$tmp/stream.err" || {
	cat "$tmp/stream.err"; fail "stream"; }
grep -q "^50003 insns, 1771 blocks, 4 gaps$" "$tmp/stream.out" ||
	fail "stream: $(cat "$tmp/stream.out")"
echo "ok: stream built the sample from memory: $(cat "$tmp/stream.out")"
"$tmp/heaviest" "$tmp/s.htr" >"$tmp/heaviest.out" || fail "heaviest"
name=$(sed -n 's/.*heaviest function: \(.*\) (.*/\1/p' "$tmp/heaviest.out")
top=$("$htr" top --sort local --limit 1 "$tmp/s.htr" | awk 'NR == 2 { print $NF }')
[ -n "$name" ] && [ "$name" = "$top" ] ||
	fail "heaviest says '$name', htr top --sort local '$top'"
echo "ok: heaviest: $(cat "$tmp/heaviest.out")"
[ -d "$tmp/s.htr.lmdb" ] || fail "heaviest kept no sidecar"
echo "install: all checks passed"
