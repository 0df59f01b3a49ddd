#!/usr/bin/env bash
# The GPU subset under compute-sanitizer: memcheck, racecheck, synccheck (docs/debug-mode.md).
#   usage: bash bench/gpu_sanitizer.sh [memcheck] [racecheck] [synccheck]   (default: all)
# Runs the test files in SUBSET below (GPU parameters only),
# each tool under its own timeout (THORK_SANITIZER_TIMEOUT, default 170 s) so that the three
# fit one 10-minute command. Wheels: as bench/gpu_run.sh installs them (into /tmp/site);
# when /tmp/site is absent they are installed from .wheels/ here. Writes sanitizer.txt
# (one summary line per tool) and sanitizer-<tool>.log into $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1
dest="${OUT:-/tmp/thork-gpu-run}"; mkdir -p "$dest"
tools=("$@"); [[ ${#tools[@]} -eq 0 ]] && tools=(memcheck racecheck synccheck)
if [[ ! -d /tmp/site ]]; then
  python3 -m pip install -q --no-deps --no-index --target /tmp/site .wheels/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site PATH="/tmp/site/bin:$PATH"
export THORK_CACHE_DIR=/tmp/thork-cache-sanitizer THORK_TEST_TARGETS=gpu
# compute-sanitizer ships with the CUDA toolkit (13.x: <cuda>/bin, next to nvcc).
cs="$(command -v compute-sanitizer || true)"
for c in /usr/local/cuda/bin /usr/local/cuda-*/bin /opt/nvidia/*/bin; do
  [[ -z "$cs" && -x "$c/compute-sanitizer" ]] && cs="$c/compute-sanitizer"
done
if [[ -z "$cs" ]]; then
  echo "sanitizer: compute-sanitizer not found (PATH, /usr/local/cuda*/bin)" | tee "$dest/sanitizer.txt"
  exit 2
fi
"$cs" --version | tail -1 | tee "$dest/sanitizer.txt"
# Kernels with shared memory and barriers (racecheck, synccheck), atomics, warp primitives,
# debug mode's error record, fkl pipes; GPU parameters only (-k gpu).
SUBSET=(
  tests/lang/test_debug_mode.py
  tests/lang/test_debug_mma.py
  tests/core/test_shift_counts.py
  tests/lang/test_lang_classic.py
  tests/lang/test_lang_memory.py
  tests/lang/test_lang_print_atomics.py
  tests/compose/test_fkl_debug.py
  tests/compose/test_fkl_filters.py
)
# memcheck counts a cp.async with src-size < 16 as a 16-byte read (session 8, H200,
# compute-sanitizer 2025.3.1: "Invalid __global__ read of size 16" 12 bytes before the end
# of a 524-byte source whose last 12 bytes were read). PTX defines the copy as reading
# src-size bytes and zero-filling the rest, so these two cases are left to the normal
# suite; a memcheck error also ends the context, failing every test after it.
MEMCHECK_SKIP=(
  "--deselect=tests/lang/test_debug_mma.py::test_debug_cp_async_in_range_matches_numpy[gpu-4-12]"
  "--deselect=tests/lang/test_debug_mma.py::test_debug_cp_async_in_range_matches_numpy[gpu-8-4]"
)
for tool in "${tools[@]}"; do
  log="$dest/sanitizer-$tool.log"
  extra=(); [[ "$tool" == memcheck ]] && extra=("${MEMCHECK_SKIP[@]}")
  timeout "${THORK_SANITIZER_TIMEOUT:-170}" "$cs" --tool "$tool" --error-exitcode 99 \
    --print-limit 50 --target-processes all \
    python3 -m pytest "${SUBSET[@]}" "${extra[@]}" -k gpu -q \
      -p no:cacheprovider -o addopts="" > "$log" 2>&1
  rc=$?
  errors="$(grep -E '^========= (ERROR|RACECHECK) SUMMARY' "$log" | tail -1)"
  tests="$(grep -E '(passed|failed|error)' "$log" | tail -1)"
  case $rc in
    0) verdict=clean ;; 99) verdict=ERRORS ;; 124) verdict="TIMEOUT (partial)" ;;
    *) verdict="exit $rc" ;;
  esac
  echo "sanitizer $tool: $verdict; ${errors:-no summary}; pytest: ${tests:-none}" \
    | tee -a "$dest/sanitizer.txt"
  grep -m3 -E 'Device not supported|not supported' "$log" >> "$dest/sanitizer.txt"
done
