#!/bin/sh
# Install what is missing (Debian 12 packages only), configure and build.
# Sourced by demo.sh and test.sh; safe to run again.
set -eu
cd "$(dirname "$0")/../.."

# Quiet when it works; the failing step's whole output when it does not.
quietly() {
	log=$(mktemp)
	if ! "$@" >"$log" 2>&1; then
		cat "$log" >&2
		rm -f "$log"
		echo "setup: failed: $*" >&2
		exit 1
	fi
	rm -f "$log"
}

pkgs="gcc g++ time pkg-config meson ninja-build libipt-dev liblmdb-dev libelf-dev libdw-dev libiberty-dev libcriterion-dev qemu-user libzydis-dev libzstd-dev linux-perf libprotobuf-c-dev protobuf-c-compiler protobuf-compiler python3-dev python3-numpy python3-pandas"
# The LLDB plugin and its test (bookworm-security), the debug files of
# libc and the loader (the names test), lld (a perfdata case), node and
# npm (the viewers test runs speedscope's importer); without them those
# are skipped, so they may fail to install without failing the set-up.
# matplotlib: the histogram of examples/hot_functions.py.
optional="lldb-22 liblldb-22-dev libc6-dbg lld nodejs npm python3-matplotlib"
missing="" missing_opt=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
		missing="$missing $p"
done
for p in $optional; do
	# node and npm may come from elsewhere than Debian (NodeSource's
	# nodejs carries npm and conflicts with Debian's npm package).
	case $p in
	nodejs) command -v node >/dev/null && continue ;;
	npm) command -v npm >/dev/null && continue ;;
	esac
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
		missing_opt="$missing_opt $p"
done
if [ -n "$missing$missing_opt" ]; then
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	$sudo apt-get update -qq
	export DEBIAN_FRONTEND=noninteractive
fi
if [ -n "$missing" ]; then
	echo "setup: installing$missing" >&2
	quietly $sudo apt-get install -y -qq --no-install-recommends $missing
fi
for p in $missing_opt; do
	echo "setup: installing $p (optional)" >&2
	$sudo apt-get install -y -qq --no-install-recommends "$p" \
		>/dev/null 2>&1 ||
		echo "setup: could not install $p: what needs it (the LLDB" \
			"plugin and its test, the names test's debug files," \
			"the lld case of perfdata, the viewers test) is skipped" >&2
done

builddir=${HTR_BUILDDIR:-build}
# HTR_MESON_ARGS: extra setup options (e.g. -Db_sanitize=address,undefined).
# shellcheck disable=SC2086
[ -f "$builddir/build.ninja" ] || quietly meson setup "$builddir" ${HTR_MESON_ARGS:-}
quietly ninja -C "$builddir"
# speedscope from npm for the viewers test and tools/view (the test
# installs it itself when this could not).
if command -v npm >/dev/null &&
	[ ! -f "$builddir/speedscope/node_modules/speedscope/package.json" ]; then
	mkdir -p "$builddir/speedscope"
	(cd "$builddir/speedscope" &&
		npm install --no-audit --no-fund --silent speedscope >/dev/null 2>&1) ||
		echo "setup: npm install speedscope failed: the viewers test" \
			"tries again" >&2
fi
