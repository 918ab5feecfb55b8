#!/bin/sh
# Names against objdump and the distribution's debug files.
# PLT stubs: a program calling libc through its PLT, linked four ways
# (lazy .plt; -z now; IBT's .plt.sec; -fno-plt, which leaves only
# .plt.got), recorded by htr record --raw and built.  Every block whose
# entry is a stub objdump labels NAME@plt (at the base htr record loaded
# the program at, DIR/build.args) must be named MODULE!NAME@plt, no other
# block of the program may be named so, and the functions main calls
# must be among them.
# Stripped libraries: the dynamic loader ships without .symtab; with
# libc6-dbg installed, every block whose entry is a function of its debug
# file (/usr/lib/debug/.build-id/, readelf -s) is named after it, and the
# first block after the label at the loader's entry point (_start).
# A sidecar made before the debug files were installed is recomputed.
# Versioned names (libc's debug file): htr find takes them without the
# version, and a PLT stub's @plt is not one.
#
# usage: test_names.sh HTR
# exit: 0 ok, 1 a failure, 77 skipped (a tool is missing)
set -u
htr=$1
here=$(cd "$(dirname "$0")" && pwd)

. "$here/recorded.sh"
recorded qemu-x86_64 cc objdump
. "$here/awk_hex.sh"

cat >"$T/p.c" <<'EOF'
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	char buf[32];
	size_t n = 0;
	int i;

	(void) argv;
	for (i = 0; i < 3; i++) {
		snprintf(buf, sizeof(buf), "%d", i + argc);
		n += strlen(buf);
		puts(buf);
	}
	return (int) n & 1;
}
EOF

for v in lazy now ibt noplt; do
	case $v in
	lazy) flags="-Wl,-z,lazy" ;;
	now) flags="-Wl,-z,now" ;;
	ibt) flags="-fcf-protection -Wl,-z,ibtplt" ;;
	noplt) flags="-fno-plt" ;;
	esac
	# shellcheck disable=SC2086  # the flags, one per word
	cc -O1 $flags -o "$T/p" "$T/p.c" || { fail "$v: cc $flags"; continue; }
	rm -rf "$T/rec"
	if ! "$htr" record -q --raw "$T/rec" -- "$T/p" >"$T/rec.out" 2>&1; then
		fail "$v: htr record"; cat "$T/rec.out"; continue
	fi
	# shellcheck disable=SC2046  # the arguments, one per word
	"$htr" build -q "$T/rec/t0.pt" $(cat "$T/rec/build.args") \
		-o "$T/p.htr" && "$htr" dump "$T/p.htr" >"$T/dump" &&
		"$htr" dump --tsc "$T/p.htr" >"$T/tsc" ||
		{ fail "$v: htr build or dump"; continue; }
	base=$(sed -n "s|^--elf $T/p@||p" "$T/rec/build.args")
	# objdump's stubs: file address and name.
	objdump -d "$T/p" | awk '/^[0-9a-f]+ <.*@plt>:$/ {
		n = $2; gsub(/[<>:]/, "", n); print $1, n }' >"$T/stubs"
	[ -n "$base" ] && [ -s "$T/stubs" ] ||
		{ fail "$v: no base or no stubs"; continue; }
	# The same block on the same line of both dumps: its entry, its name.
	awk '{ print $2 }' "$T/dump" >"$T/entries"
	awk '{ print $1 }' "$T/tsc" >"$T/names"
	paste -d ' ' "$T/entries" "$T/names" | awk -v base="$base" "$hex"'
		NR == FNR { stub[h($1)] = $2; next }
		$1 !~ /^0x/ { next }
		{ e = h($1) - h(base) }
		(e in stub) {
			if ($2 != "p!" stub[e]) {
				print "    block at " $1 ": " $2 ", objdump: " stub[e]
				bad++
			}
			seen[$2] = 1
			next
		}
		$2 ~ /^p!.*@plt$/ { print "    not a stub: " $0; bad++ }
		END {
			for (k in seen) printf "%s ", k >"/dev/stderr"
			exit bad > 0
		}' "$T/stubs" - 2>"$T/seen" && ok=1 || ok=0
	need="__cxa_finalize"
	[ $v = noplt ] || need="$need puts snprintf strlen"
	for f in $need; do
		grep -q "p!$f@plt " "$T/seen" || ok=0
	done
	if [ $ok = 1 ]; then
		echo "ok: $v: $(cat "$T/seen")named as objdump names them"
	else
		fail "$v: PLT names differ from objdump's (named: $(cat "$T/seen"))"
	fi
done

# The loader's blocks in the last recording, named from its debug file.
ld=$(sed -n 's|^--elf \(.*/ld-linux[^@]*\)@.*|\1|p' "$T/rec/build.args")
ldbase=$(sed -n 's|^--elf .*/ld-linux[^@]*@||p' "$T/rec/build.args")
id=$(readelf -n "$ld" 2>/dev/null | awk '/Build ID:/ { print $3 }')
dbg=/usr/lib/debug/.build-id/$(echo "$id" | cut -c1-2)/$(echo "$id" | cut -c3-).debug
mod=$(basename "$ld")
if [ -z "$id" ] || [ ! -f "$dbg" ]; then
	echo "SKIP: no debug file for $ld (Debian package libc6-dbg)"
else
	readelf -sW "$dbg" | awk '$4 == "FUNC" && $7 != "UND" { print $2, $8 }' \
		>"$T/dbgsyms"
	paste -d ' ' "$T/entries" "$T/names" | awk -v base="$ldbase" \
		-v mod="$mod" "$hex"'
		NR == FNR { f[h($1)] = f[h($1)] " " mod "!" $2 " "; next }
		$1 !~ /^0x/ || index($2, mod) != 1 { next }
		{ e = h($1) - h(base) }
		(e in f) {
			if (index(f[e], " " $2 " ")) n++
			else { print "    block at " $1 ": " $2 ", debug file:" f[e]; bad++ }
		}
		END { print n + 0 >"/dev/stderr"; exit bad || n < 10 }' \
		"$T/dbgsyms" - 2>"$T/nld" && \
		echo "ok: $(cat "$T/nld") blocks of $mod named from its debug file" ||
		fail "$mod: names differ from its debug file's ($(cat "$T/nld") right)"
	# The trace begins at the loader's entry point, an untyped label
	# (_start, in no function): the first, late, block is named after it.
	entry=$(readelf -h "$ld" | awk '/Entry point address:/ { print $4 }')
	label=$(readelf -sW "$dbg" | awk -v e="$entry" "$hex"'
		$4 == "NOTYPE" && $7 != "UND" && h($2) == h(e) { print $8; exit }')
	first=$(awk 'NR == 1 { print $1 }' "$T/tsc")
	if [ -n "$label" ] && [ "$first" = "~$mod!$label" ]; then
		echo "ok: the first block is $first, the label at the loader's entry"
	else
		fail "the first block is $first, the label at $entry is '$label'"
	fi
	# Names computed while the debug files were not installed (an empty
	# directory mounted over them, in a mount namespace of its own) are
	# recomputed once they are there.
	if unshare -m true 2>/dev/null; then ns="unshare -m"
	elif unshare -rm true 2>/dev/null; then ns="unshare -rm"
	else ns=""; fi
	rm -rf "$T/p.htr.lmdb"
	mkdir -p "$T/empty"
	st=77
	# shellcheck disable=SC2016  # expanded by the inner shell
	[ -z "$ns" ] || { $ns sh -c 'mount --bind "$1" /usr/lib/debug/.build-id ||
		exit 77; "$2" dump --tsc "$3" >"$4"' sh "$T/empty" "$htr" \
		"$T/p.htr" "$T/hidden"; st=$?; }
	if [ $st = 77 ]; then
		echo "SKIP: no mount namespace to hide the debug files in"
	else
		before=$(awk 'NR == 1 { print $1 }' "$T/hidden")
		after=$("$htr" dump --tsc "$T/p.htr" | awk 'NR == 1 { print $1 }')
		if [ $st = 0 ] && [ -n "$before" ] && [ "$before" != "$first" ] &&
		   [ "$after" = "$first" ]; then
			echo "ok: without the debug files $before, with them $after"
		else
			fail "debug files installed later: '$before', then '$after' (want $first)"
		fi
	fi
fi

# Versioned names: a debug file's .symtab names a symbol with its version
# (readelf -s: __libc_start_main@@GLIBC_2.34), which htr keeps as perf
# does; find takes the name without it, and a PLT stub is not a version
# (find __cxa_finalize does not list the program's stub, the only block
# of that name: the stub jumps into libc, no call makes a block there).
# Expected: the blocks of the dump whose name, module and version set
# aside, is the one asked for.
paste -d ' ' "$T/dump" "$T/names" | awk '{ print $1, $NF }' >"$T/spans"
vname=$(awk '$2 ~ /^libc\.so\.6!.*@/ && $2 !~ /@plt$/ { print $2; exit }' \
	"$T/spans")
if [ -z "$vname" ]; then
	echo "SKIP: no versioned libc name in the recording (libc6-dbg)"
else
	sym=${vname#libc.so.6!}
	base=${sym%%@*}
	libc=$(sed -n 's|^--elf \(.*/libc\.so\.6\)@.*|\1|p' "$T/rec/build.args")
	id=$(readelf -n "$libc" 2>/dev/null | awk '/Build ID:/ { print $3 }')
	dbg=/usr/lib/debug/.build-id/$(echo "$id" | cut -c1-2)/$(echo "$id" | cut -c3-).debug
	readelf -sW "$dbg" 2>/dev/null | awk -v s="$sym" '$8 == s { f = 1 }
		END { exit !f }' || fail "$sym: not in readelf -s of $dbg"
	grep -q ' p!__cxa_finalize@plt$' "$T/spans" ||
		fail "no block of the stub p!__cxa_finalize@plt"
	for q in "$base" "libc.so.6!$base" "$vname" "*${base#??}" __cxa_finalize; do
		awk -v q="$q" '{
			n = $2; sub(/^~?[^!:( ]*!/, "", n)
			v = n; if (v !~ /@plt$/) sub(/@.*/, "", v)
			if ($2 == q || n == q || v == q ||
			    (q == "libc.so.6!" v && $2 ~ /^libc\.so\.6!/) ||
			    (q ~ /^\*/ && substr(v, length(v) - length(q) + 2) == substr(q, 2)))
				print $1
		}' "$T/spans" | sort >"$T/want"
		"$htr" find "$q" "$T/p.htr" 2>/dev/null | awk '{ print $3 }' |
			sort >"$T/got"
		if { [ -s "$T/want" ] || [ "$q" = __cxa_finalize ]; } &&
		   cmp -s "$T/want" "$T/got"; then
			echo "ok: find '$q': $(wc -l <"$T/got") blocks, as the dump names them"
		else
			fail "find '$q': blocks differ from the dump's"
			diff "$T/want" "$T/got" | head -5
		fi
	done
fi

[ $fails = 0 ] && echo "names: all checks passed" || echo "names: $fails failed"
[ $fails = 0 ]
