#!/bin/sh
# Render an export of FILE.htr in a real browser, offline: speedscope (from
# npm, self-contained) served on the loopback, screenshotted by Debian's
# chromium-headless-shell.  Not run by meson test.
# usage: tools/view/speedscope.sh FILE.htr OUT.png [chrome|folded] [EXPORT-OPTION...]
# chrome shows speedscope's time order (each call where it ran, nested as
# the tree), folded its left-heavy flame graph.  Options after the format
# go to htr export (e.g. --block N to show one subtree).
# needs: npm (speedscope is installed into BUILD/speedscope, BUILD being
# $HTR_BUILDDIR or build), python3, chromium-headless-shell (apt-get install
# chromium-headless-shell).
set -eu
[ $# -ge 2 ] || { echo "usage: $0 FILE.htr OUT.png [chrome|folded] [EXPORT-OPTION...]" >&2; exit 2; }
htrfile=$1 png=$2 fmt=${3:-chrome}
shift 2
[ $# -gt 0 ] && shift
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${HTR_BUILDDIR:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
htr=${HTR:-$build/tools/htr/htr}
ss=$build/speedscope
command -v chromium-headless-shell >/dev/null ||
	{ echo "$0: chromium-headless-shell is not installed" >&2; exit 1; }
if [ ! -f "$ss/node_modules/speedscope/dist/release/index.html" ]; then
	mkdir -p "$ss"
	(cd "$ss" && npm install --no-audit --no-fund --silent speedscope) ||
		{ echo "$0: npm install speedscope failed" >&2; exit 1; }
fi
work=$(mktemp -d)
server=
trap 'rm -rf "$work"; [ -n "$server" ] && kill "$server" 2>/dev/null; true' EXIT INT TERM
cp -r "$ss/node_modules/speedscope/dist/release/." "$work/"
"$htr" export --format "$fmt" "$@" -o "$work/profile.txt" "$htrfile"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$work" >/dev/null 2>&1 &
server=$!
sleep 1
url="http://127.0.0.1:$port/index.html#profileURL=http://127.0.0.1:$port/profile.txt&title=$(basename "$htrfile")"
chromium-headless-shell --no-sandbox --disable-gpu --hide-scrollbars \
	--window-size=1400,800 --virtual-time-budget=8000 \
	--screenshot="$png" "$url" >/dev/null 2>&1
[ -s "$png" ] || { echo "$0: no screenshot was written" >&2; exit 1; }
echo "$png"
