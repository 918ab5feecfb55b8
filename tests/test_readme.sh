#!/bin/sh
# The README's examples as a user runs them: every ```sh block that the
# line "<!-- checked by tests/test_readme.sh -->" precedes is run, one
# "$ COMMAND" at a time, in a scratch directory that sees the source
# tree's tests/ (the shipped sample), with the built htr first on PATH;
# what each command prints (stdout and stderr) must be the lines after it
# in the README, up to the next "$ " or the block's end.
#
# usage: test_readme.sh HTR SOURCE_ROOT
# exit: 0 all as shown, 1 a difference
set -u
htr=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
mkdir "$work/bin" "$work/run"
ln -s "$(cd "$(dirname "$htr")" && pwd)/$(basename "$htr")" "$work/bin/htr"
ln -s "$src/tests" "$work/run/tests"

# The checked blocks as a script of records: "C command" or "O line".
awk '
	/^<!-- checked by tests\/test_readme.sh -->$/ { armed = 1; next }
	armed && /^```sh$/ { on = 1; armed = 0; n++; print "B " n; next }
	on && /^```$/ { on = 0; next }
	on && /^\$ / { print "C " substr($0, 3); next }
	on { print "O " $0 }
' "$src/README.md" >"$work/script"
blocks=$(grep -c '^B ' "$work/script")
[ "$blocks" -gt 0 ] || { echo "FAIL: README.md has no checked block"; exit 1; }

fails=0
cmds=0
# Run the command in $cmd; compare with the collected expectation.
flush() {
	[ -n "${cmd:-}" ] || return 0
	(cd "$work/run" && PATH="$work/bin:$PATH" sh -c "$cmd") \
		>"$work/got" 2>&1 </dev/null
	cmds=$((cmds + 1))
	if ! cmp -s "$work/want" "$work/got"; then
		echo "FAIL: README: \$ $cmd"
		diff "$work/want" "$work/got" | sed 's/^/    /' | head -20
		fails=$((fails + 1))
	fi
	cmd=
}
cmd=
while IFS= read -r line; do
	case $line in
	"B "*) flush ;;
	"C "*) flush; cmd=${line#C }; : >"$work/want" ;;
	"O "*) printf '%s\n' "${line#O }" >>"$work/want" ;;
	esac
done <"$work/script"
flush
echo "readme: $blocks blocks, $cmds commands, $fails differ"
[ "$fails" = 0 ]
