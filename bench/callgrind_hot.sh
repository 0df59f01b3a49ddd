#!/bin/bash
# Instructions per call of the hot rows of issue 11 under callgrind, no GPU (session 12).
#   bash bench/callgrind_hot.sh [VARIANT...]      (default: every variant)
# PY (default python3) runs it; the worktree's packages are put on PYTHONPATH; the native
# module is built into a scratch cache. Needs valgrind and its callgrind.h (valgrind-dev);
# prints "variant instructions-per-call" (the loop's own ~250 included, main thread only).
# The variants: bench/callgrind_hot.py.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
# The interpreter itself, not a launcher script (pyenv's shim): callgrind would trace bash.
PY=$("${PY:-python3}" -c 'import sys; print(sys.executable)')
WORK=$(mktemp -d /tmp/cg-hot.XXXXXX)
cc -O2 -shared -fPIC "$HERE/callgrind_marks.c" -o "$WORK/marks.so"
export PYTHONPATH=$(ls -d "$ROOT"/packages/*/src | paste -sd:)
export THORK_CACHE_DIR=$WORK/cache CG_MARKS=$WORK/marks.so
if [ $# -eq 0 ]; then set -- $("$PY" "$HERE/callgrind_hot.py" --list); fi
valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$WORK/cg" \
    "$PY" "$HERE/callgrind_hot.py" --callgrind "$@" >/dev/null 2>"$WORK/err" ||
    { cat "$WORK/err" >&2; exit 1; }
i=0
for v in "$@"; do
    i=$((i + 1))
    f=$WORK/cg.$i-01
    echo "$v $(grep -m1 '^summary' "$f" | awk '{printf "%.0f", $2 / 20000}')"
done
echo "profiles: $WORK/cg.N-01 (callgrind_annotate; CC='cc -g' for line numbers)" >&2
