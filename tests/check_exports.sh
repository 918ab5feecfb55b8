#!/bin/sh
# Only htr_* symbols may leave libhtr.so.
set -eu
bad=$(nm -D --defined-only "$1" | awk '{print $3}' | grep -v '^htr_' || true)
if [ -n "$bad" ]; then
	echo "non-htr symbols exported: $bad"
	exit 1
fi
echo "exports: only htr_* symbols"
