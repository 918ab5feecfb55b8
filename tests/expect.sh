# Sourced by the command-line tests: expect STATUS PATTERN CMD... runs
# CMD with stdout in $dir/out and stderr in $dir/err, and counts a
# failure in $fails unless it exits with STATUS, its stderr matches
# PATTERN (grep; "" matches all) and, when STATUS is not 0, is one line.
expect() {
	want=$1 pat=$2
	shift 2
	"$@" >"$dir/out" 2>"$dir/err"
	got=$?
	lines=$(wc -l <"$dir/err")
	if [ "$got" != "$want" ] || { [ -n "$pat" ] && ! grep -q -- "$pat" "$dir/err"; } ||
	   { [ "$want" != 0 ] && [ "$lines" != 1 ]; }; then
		echo "FAIL: $* -> exit $got (want $want), stderr:"
		sed 's/^/    /' "$dir/err"
		fails=$((fails + 1))
	else
		echo "ok: $* -> $got: $(head -1 "$dir/err")"
	fi
}
