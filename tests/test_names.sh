#!/bin/sh
# Names against objdump, readelf, addr2line and the distribution's debug
# files.
# PLT stubs: a program calling libc through its PLT, linked four ways
# (lazy .plt; -z now; IBT's .plt.sec; -fno-plt, which leaves only
# .plt.got), recorded by htr record --raw and built.  Every block whose
# entry is a stub objdump labels NAME@plt, in the program or in a library
# (at the base htr record loaded it, DIR/build.args), is named after the
# function it leads to: MODULE!NAME with MODULE the first module that
# defines NAME (readelf --dyn-syms), searched as the dynamic loader does
# (the program, the libraries, the loader last); libc's IRELATIVE stubs
# (objdump: *ABS*+0xADDR@plt) after an IFUNC symbol at ADDR (readelf).
# The functions main calls must be among them.
# htr find qsort lists the blocks entered at qsort@plt (objdump) or at
# libc's qsort (readelf): five, the calls the program makes.  libc's
# qsort is "jmp qsort_r" (objdump), so find qsort_r and __qsort_r list
# them too.
# Offsets: the program stripped (PIE and -no-pie), so that its functions
# are named MODULE+0xOFFSET: every such block's OFFSET is the address
# where objdump -d of the unstripped program labels a function, and
# addr2line names that function there.
# Stripped libraries: the dynamic loader ships without .symtab; with
# libc6-dbg installed, every block whose entry is a function of its debug
# file (/usr/lib/debug/.build-id/, readelf -s) is named after it, and the
# first block after the label at the loader's entry point (_start).
# A sidecar made before the debug files were installed is recomputed.
# Versioned names (libc's debug file): htr find takes them without the
# version.
#
# usage: test_names.sh HTR
# exit: 0 ok, 1 a failure, 77 skipped (a tool is missing)
set -u
htr=$1
here=$(cd "$(dirname "$0")" && pwd)

. "$here/recorded.sh"
recorded qemu-x86_64 cc objdump readelf addr2line strip
. "$here/awk_hex.sh"

cat >"$T/p.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int __attribute__((noinline)) cmp(const void *a, const void *b)
{
	int x = *(const int *) a, y = *(const int *) b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	char buf[32];
	int v[16], i, k;
	size_t n = 0;

	(void) argv;
	for (i = 0; i < 5; i++) {
		for (k = 0; k < 16; k++)
			v[k] = (k * 7 + i * argc) % 13;
		qsort(v, 16, sizeof(v[0]), cmp);
		snprintf(buf, sizeof(buf), "%d", v[i] + argc);
		n += strlen(buf);
		if (i < 3)
			puts(buf);
	}
	return (int) n & 1;
}
EOF

# record WHAT CFLAGS...: compile $T/p (kept unstripped as $T/p.full;
# stripped with strip=1), record it, build $T/p.htr and dump it: $T/dump,
# $T/tsc, and line by line $T/entries and $T/names.
record() {
	what=$1
	shift
	cc -O1 -g "$@" -o "$T/p" "$T/p.c" || { fail "$what: cc $*"; return 1; }
	cp "$T/p" "$T/p.full"
	[ "${strip:-0}" = 0 ] || strip "$T/p"
	rm -rf "$T/rec" "$T/p.htr" "$T/p.htr.lmdb"
	if ! "$htr" record -q --raw "$T/rec" -- "$T/p" >"$T/rec.out" 2>&1; then
		fail "$what: htr record"; cat "$T/rec.out"; return 1
	fi
	# shellcheck disable=SC2046  # the arguments, one per word
	"$htr" build -q "$T/rec/t0.pt" $(cat "$T/rec/build.args") \
		-o "$T/p.htr" && "$htr" dump "$T/p.htr" >"$T/dump" &&
		"$htr" dump --tsc "$T/p.htr" >"$T/tsc" ||
		{ fail "$what: htr build or dump"; return 1; }
	awk '{ print $2 }' "$T/dump" >"$T/entries"
	awk '!/^#/ { print $1 }' "$T/tsc" >"$T/names"
}

# $T/mods: the recording's modules as "PATH BASE", in the order the
# dynamic loader binds symbols in: the program, the libraries, the loader.
modules() {
	sed -n 's|^--elf \(.*\)@\(0x[0-9a-f]*\)$|\1 \2|p' "$T/rec/build.args" |
		awk -v p="$T/p" '$1 == p { print; next }
			$1 ~ /\/ld-linux/ { ld = $0; next }
			{ rest = rest $0 "\n" }
			END { printf "%s", rest; if (ld != "") print ld }' >"$T/mods"
}

# $T/want: per PLT stub of every module "ADDRESS MODULE LABEL NAME...":
# where it was loaded (decimal: mawk's %x stops at 32 bits), objdump's
# label and the names it may have (readelf's definitions).
stub_names() {
	modules
	: >"$T/defs"
	while read -r path base; do
		# NAME MODULE for every function the module lets others bind to
		readelf --dyn-syms -W "$path" | awk -v m="${path##*/}" '
			($4 == "FUNC" || $4 == "IFUNC") && $7 != "UND" &&
			($5 == "GLOBAL" || $5 == "WEAK") &&
			($6 == "DEFAULT" || $6 == "PROTECTED") {
				n = $8; sub(/@.*/, "", n); print n, m }' >>"$T/defs"
	done <"$T/mods"
	: >"$T/want"
	while read -r path base; do
		m=${path##*/}
		readelf --dyn-syms -W "$path" | awk '$4 == "IFUNC" && $7 != "UND" {
			n = $8; sub(/@.*/, "", n); print $2, n }' >"$T/ifuncs"
		objdump -d "$path" | awk '/^[0-9a-f]+ <.*@plt>:$/ {
			n = $2; gsub(/[<>:]/, "", n); print $1, n }' >"$T/stubs"
		awk -v m="$m" -v base="$base" "$hex"'
			FILENAME == ARGV[1] { if (!($1 in def)) def[$1] = $2; next }
			FILENAME == ARGV[2] { ifn[h($1)] = ifn[h($1)] " " m "!" $2; next }
			{
				a = sprintf("%.0f", h($1) + h(base)); n = $2
				sub(/@plt$/, "", n)
				if (n ~ /^\*ABS\*\+0x/) {
					r = n; sub(/^\*ABS\*\+/, "", r)
					w = (h(r) in ifn) ? ifn[h(r)] : " " m "!" $2
				} else
					w = " " ((n in def) ? def[n] "!" n : m "!" $2)
				print a, m, $2 w
			}' "$T/defs" "$T/ifuncs" "$T/stubs" >>"$T/want"
	done <"$T/mods"
}

for v in lazy now ibt noplt; do
	case $v in
	lazy) flags="-Wl,-z,lazy" ;;
	now) flags="-Wl,-z,now" ;;
	ibt) flags="-fcf-protection -Wl,-z,ibtplt" ;;
	noplt) flags="-fno-plt" ;;
	esac
	# shellcheck disable=SC2086  # the flags, one per word
	record $v $flags || continue
	stub_names
	[ -s "$T/want" ] || { fail "$v: no stubs"; continue; }
	# The same block on the same line of both dumps: its entry, its name.
	paste -d ' ' "$T/entries" "$T/names" | awk "$hex"'
		NR == FNR { w = $0; sub(/^[^ ]+ [^ ]+ [^ ]+ /, "", w)
			want[$1] = " " w " "; mod[$1] = $2; next }
		$1 !~ /^0x/ { next }
		{ e = sprintf("%.0f", h($1)) }
		(e in want) {
			if (!index(want[e], " " $2 " ")) {
				print "    block at " $1 ": " $2 ", want:" want[e]
				bad++
			}
			if (mod[e] == "p") seen[$2] = 1
			n++
			next
		}
		$2 ~ /^p!.*@plt$/ { print "    not a stub: " $0; bad++ }
		END {
			for (k in seen) printf "%s ", k >"/dev/stderr"
			printf "(%d stub blocks) ", n >"/dev/stderr"
			exit bad > 0
		}' "$T/want" - 2>"$T/seen" && ok=1 || ok=0
	need="__cxa_finalize"
	[ $v = noplt ] || need="$need puts qsort snprintf strlen"
	for f in $need; do
		grep -q "libc.so.6!$f " "$T/seen" || ok=0
	done
	if [ $ok = 1 ]; then
		echo "ok: $v: $(cat "$T/seen")named after the functions they lead to"
	else
		fail "$v: PLT names differ from objdump's and readelf's (named: $(cat "$T/seen"))"
	fi
done

# htr find qsort, in the last recording (-fno-plt: the program calls
# libc's qsort through its GOT) and in a lazy one (through qsort@plt).
for v in noplt lazy; do
	[ $v = noplt ] || { record $v -Wl,-z,lazy && stub_names; } || continue
	libc=$(awk '$1 ~ /\/libc\.so\.6$/ { print $1; exit }' "$T/mods")
	lbase=$(awk '$1 ~ /\/libc\.so\.6$/ { print $2; exit }' "$T/mods")
	qs=$(readelf --dyn-syms -W "$libc" | awk '$8 ~ /^qsort@/ { print $2; exit }')
	# The blocks by span (FIRST..LAST), as dump and find print them.
	paste -d ' ' "$T/dump" "$T/names" | awk '{ print $2, $1 }' |
	awk -v lb="$lbase" -v qs="$qs" "$hex"'
		NR == FNR { if ($2 == "p" && $3 == "qsort@plt") e[$1] = 1
			next }
		$1 ~ /^0x/ && (sprintf("%.0f", h($1)) in e ||
			       h($1) == h(lb) + h(qs)) { print $2 }' \
		"$T/want" - | sort >"$T/want.q"
	for q in qsort qsort_r __qsort_r; do
		"$htr" find "$q" "$T/p.htr" 2>/dev/null |
			awk '$1 ~ /^[0-9]+$/ { print $3 }' | sort >"$T/got.q"
		if [ "$q" != qsort ] && ! objdump -d --start-address="0x$qs" \
		     --stop-address="$(printf '0x%x' $((0x$qs + 16)))" "$libc" |
		     grep -q 'jmp .*<[^>]*qsort_r'; then
			echo "SKIP: $v: find $q: libc's qsort does not jump to qsort_r"
		elif [ "$(wc -l <"$T/want.q")" = 5 ] &&
		     cmp -s "$T/want.q" "$T/got.q"; then
			echo "ok: $v: find $q: the 5 blocks entered at qsort@plt or qsort"
		else
			fail "$v: find $q: blocks $(tr '\n' ' ' <"$T/got.q"); want $(tr '\n' ' ' <"$T/want.q")"
		fi
	done
done

# Offsets in the file's own addresses: the program stripped, PIE and not.
for v in pie nopie; do
	case $v in
	pie) flags="-fPIE -pie" ;;
	nopie) flags="-fno-pie -no-pie" ;;
	esac
	# shellcheck disable=SC2086  # the flags, one per word
	strip=1 record "stripped $v" $flags || continue
	objdump -d "$T/p.full" | awk '/^[0-9a-f]+ <[^>]*>:$/ {
		n = $2; gsub(/[<>:]/, "", n); print $1, n }' >"$T/labels"
	awk '$1 ~ /^p\+0x/ { sub(/^p\+/, "", $1); print $1 }' "$T/names" |
		sort -u >"$T/offs"
	# shellcheck disable=SC2046  # the offsets, one per word
	addr2line -f -e "$T/p.full" $(cat "$T/offs") 2>/dev/null |
		awk 'NR % 2' >"$T/a2l"
	paste -d ' ' "$T/offs" "$T/a2l" | awk "$hex"'
		NR == FNR { l[h($1)] = $2; next }
		{ n++ }
		!(h($1) in l) || l[h($1)] != $2 {
			print "    p+" $1 ": objdump: " l[h($1)] ", addr2line: " $2
			bad++
		}
		END { printf "%d", n >"/dev/stderr"; exit bad > 0 || n < 2 }' \
		"$T/labels" - 2>"$T/n" && ok=1 || ok=0
	if [ $ok = 1 ]; then
		echo "ok: stripped $v: $(cat "$T/n") p+0xOFFSET names, each a function at OFFSET (objdump, addr2line)"
	else
		fail "stripped $v: p+0xOFFSET names point elsewhere ($(cat "$T/n") names)"
	fi
done
strip=0 record "lazy again" -Wl,-z,lazy || true

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
	first=$(awk '!/^#/ { print $1; exit }' "$T/tsc")
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
		before=$(awk '!/^#/ { print $1; exit }' "$T/hidden")
		after=$("$htr" dump --tsc "$T/p.htr" | awk '!/^#/ { print $1; exit }')
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
# does; find takes the name without it.  Expected: the blocks of the dump
# whose name, module and version set aside, is the one asked for (find
# also lists blocks of other names that lead there: the qsort checks
# above; only those named so are compared here).
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
	# The program's stub, named after the function it leads to.
	grep -q ' libc.so.6!__cxa_finalize$' "$T/spans" ||
		fail "no block of the stub __cxa_finalize@plt named libc.so.6!__cxa_finalize"
	for q in "$base" "libc.so.6!$base" "$vname" "*${base#??}" __cxa_finalize; do
		# NAME SPAN: whether NAME, module and version aside, is q
		named='function is(name,  n, v) {
			n = name; sub(/^~?[^!:( ]*!/, "", n)
			v = n; sub(/@.*/, "", v)
			return name == q || n == q || v == q ||
			    (q == "libc.so.6!" v && name ~ /^libc\.so\.6!/) ||
			    (q ~ /^\*/ && substr(v, length(v) - length(q) + 2) == substr(q, 2))
		}'
		awk -v q="$q" "$named"'is($2) { print $1 }' "$T/spans" |
			sort >"$T/want"
		"$htr" find "$q" "$T/p.htr" 2>/dev/null |
			awk -v q="$q" "$named"'is($2) { print $3 }' | sort >"$T/got"
		if [ -s "$T/want" ] &&
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
