# Sourced by the shell suites that record programs under qemu:
# "recorded TOOL..." skips the suite (exit 77) naming the tools it lacks,
# then gives it a scratch directory $T, removed on exit, and fail MSG,
# which prints MSG and counts it in $fails.
recorded() {
	missing=""
	for tool in "$@"; do
		command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
	done
	if [ -n "$missing" ]; then
		echo "SKIP: missing$missing (qemu-x86_64: Debian package qemu-user)"
		exit 77
	fi
	T=$(mktemp -d)
	trap 'rm -rf "$T"' EXIT INT TERM
	fails=0
}

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}
