#!/bin/sh
# The documentation's examples as a user runs them, and its links.
#
# Examples: in README.md and docs/*.md, every ```sh block that the line
# "<!-- checked by tests/test_readme.sh -->" precedes is run, one
# "$ COMMAND" at a time, in a scratch directory (a fresh one per file)
# that sees the source tree's tests/ (the shipped sample), with the built
# htr first on PATH; what each command prints (stdout and stderr) must be
# the lines after it, up to the next "$ " or the block's end.  A shown
# line may elide what differs from run to run or from one checkout to
# another (a time, a date, a hash over the image's absolute paths) with
# "[...]", any number of times: the printed line must then hold the
# pieces between them in order, the first at its start, the last at its
# end.
#
# Links: every relative link of those files, [text](PATH) or
# ![text](PATH), must name a file or directory that exists (PATH taken
# relative to the file, without its #anchor).  README.md stays at most
# 250 lines.
#
# usage: test_readme.sh HTR SOURCE_ROOT
# exit: 0 all as shown, 1 a difference
set -u
htr=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
mkdir "$work/bin"
ln -s "$(cd "$(dirname "$htr")" && pwd)/$(basename "$htr")" "$work/bin/htr"

fails=0
cmds=0
blocks=0
docs=$(cd "$src" && echo README.md docs/*.md)

# Does $work/got show as $work/want, "[...]" eliding?
same() {
	awk '
	FILENAME == ARGV[1] { w[++nw] = $0; next }
	{ g[++ng] = $0 }
	END {
		if (nw != ng) exit 1
		for (i = 1; i <= nw; i++) {
			x = w[i]; y = g[i]
			if (index(x, "[...]") == 0) { if (x != y) exit 1; continue }
			n = split(x, part, /\[\.\.\.\]/)
			# first part a prefix, last a suffix, the others in order
			if (substr(y, 1, length(part[1])) != part[1]) exit 1
			y = substr(y, length(part[1]) + 1)
			for (k = 2; k < n; k++) {
				p = index(y, part[k])
				if (p == 0) exit 1
				y = substr(y, p + length(part[k]))
			}
			if (length(y) < length(part[n])) exit 1
			if (substr(y, length(y) - length(part[n]) + 1) != part[n]) exit 1
		}
	}' "$work/want" "$work/got"
}

# Run the command in $cmd in $run; compare with the collected expectation.
flush() {
	[ -n "${cmd:-}" ] || return 0
	(cd "$run" && PATH="$work/bin:$PATH" sh -c "$cmd") \
		>"$work/got" 2>&1 </dev/null
	cmds=$((cmds + 1))
	if ! same; then
		echo "FAIL: $doc: \$ $cmd"
		diff "$work/want" "$work/got" | sed 's/^/    /' | head -20
		fails=$((fails + 1))
	fi
	cmd=
}

for doc in $docs; do
	[ -f "$src/$doc" ] || continue
	# The checked blocks as a script of records: "C command" or "O line".
	awk '
		/^<!-- checked by tests\/test_readme.sh -->$/ { armed = 1; next }
		armed && /^```sh$/ { on = 1; armed = 0; n++; print "B " n; next }
		on && /^```$/ { on = 0; next }
		on && /^\$ / { print "C " substr($0, 3); next }
		on { print "O " $0 }
	' "$src/$doc" >"$work/script"
	n=$(grep -c '^B ' "$work/script")
	blocks=$((blocks + n))
	[ "$n" -gt 0 ] || continue
	run=$work/run.$(echo "$doc" | tr / _)
	mkdir "$run"
	ln -s "$src/tests" "$run/tests"
	cmd=
	while IFS= read -r line; do
		case $line in
		"B "*) flush ;;
		"C "*) flush; cmd=${line#C }; : >"$work/want" ;;
		"O "*) printf '%s\n' "${line#O }" >>"$work/want" ;;
		esac
	done <"$work/script"
	flush
done
grep -q '^<!-- checked by tests/test_readme.sh -->$' "$src/README.md" || {
	echo "FAIL: README.md has no checked block"
	fails=$((fails + 1))
}

# Relative links (outside code blocks) must name something that exists.
links=0
for doc in $docs; do
	[ -f "$src/$doc" ] || continue
	dir=$(dirname "$src/$doc")
	awk '
		/^ *```/ { code = !code; next }
		code { next }
		{
			s = $0
			while (match(s, /\]\([^) ]+\)/)) {
				print substr(s, RSTART + 2, RLENGTH - 3)
				s = substr(s, RSTART + RLENGTH)
			}
		}
	' "$src/$doc" >"$work/links"
	while IFS= read -r l; do
		case $l in
		http:* | https:* | mailto:* | "#"*) continue ;;
		esac
		links=$((links + 1))
		p=${l%%#*}
		if [ ! -e "$dir/$p" ]; then
			echo "FAIL: $doc: link to $l: no such file"
			fails=$((fails + 1))
		fi
	done <"$work/links"
done

lines=$(wc -l <"$src/README.md")
if [ "$lines" -gt 250 ]; then
	echo "FAIL: README.md has $lines lines (at most 250)"
	fails=$((fails + 1))
fi

echo "readme: $blocks blocks, $cmds commands, $links links, $fails differ"
[ "$fails" = 0 ]
