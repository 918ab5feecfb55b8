#!/bin/sh
# Install what is missing (Debian 12 packages only), configure and build.
# Sourced by demo.sh and test.sh; safe to run again.
set -eu
cd "$(dirname "$0")/../.."

pkgs="gcc time pkg-config meson ninja-build libipt-dev liblmdb-dev libelf-dev libiberty-dev libcriterion-dev"
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
		missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "setup: installing$missing" >&2
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
		--no-install-recommends $missing >/dev/null
fi

builddir=${HTR_BUILDDIR:-build}
[ -f "$builddir/build.ninja" ] || meson setup "$builddir" >/dev/null
ninja -C "$builddir" >/dev/null
