#!/bin/sh
# libhtr.so exports exactly the functions the public headers declare with
# HTR_API, each under the version node HTR_0, and no internal htr_*__*.
# usage: check_exports.sh LIBHTR.so INCLUDE_DIR
set -eu
lib=$1 inc=$2
got=$(nm -D --defined-only "$lib" | awk '$2 == "T" || $2 == "D" || $2 == "B" {print $3}' | sort)
bad=$(printf '%s\n' "$got" | grep -v '^htr_[A-Za-z0-9_]*@@HTR_0$' | grep -v '^HTR_0$' || true)
if [ -n "$bad" ]; then
	echo "exports: unexpected symbols: $bad"
	exit 1
fi
internal=$(printf '%s\n' "$got" | grep '__' || true)
if [ -n "$internal" ]; then
	echo "exports: internal symbols leak: $internal"
	exit 1
fi
want=$(python3 - "$inc"/htr/*.h <<'PY'
import re, sys
names = set()
for p in sys.argv[1:]:
    t = re.sub(r"/\*.*?\*/", " ", open(p).read(), flags=re.S)
    names.update(re.findall(r"HTR_API[^;{]*?(htr_\w+)\s*\(", t, flags=re.S))
print("\n".join(sorted(names)))
PY
)
want=$(printf '%s\n' "$want" | sort -u)
have=$(printf '%s\n' "$got" | sed -n 's/@@HTR_0$//p' | sort -u)
if [ "$want" != "$have" ]; then
	echo "exports: the headers and the library disagree:"
	printf '%s\n' "$want" >/tmp/exports.want.$$
	printf '%s\n' "$have" >/tmp/exports.have.$$
	diff /tmp/exports.want.$$ /tmp/exports.have.$$ || true
	rm -f /tmp/exports.want.$$ /tmp/exports.have.$$
	exit 1
fi
echo "exports: $(printf '%s\n' "$have" | wc -l) functions, all versioned HTR_0, none internal"
