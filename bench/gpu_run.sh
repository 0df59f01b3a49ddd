#!/usr/bin/env bash
# One full run on a lent GPU machine (no package index there): install the wheels built
# here (carried in .wheels/), then the GPU test suite and the benchmarks, logs in $OUT.
#   usage: bash bench/gpu_run.sh [tests] [tests:COMPILER] [examples] [bench_core] [bench_lang]
#          [bench_fkl] [bench_video] [bench_compilers] [bench_interop] [bench_mma]
#          [cvcuda] [sanitizer] [bench_debug]
#   (no argument: all of them)
#   cvcuda: a wheel too big to carry in one call travels in parts, one per call, in the
#   ignored folder .cv/ (part00, part01, ...); each call stashes its part in /tmp/cv (which
#   survives while the machine stays warm); the step reassembles and installs it.
set -uo pipefail
export PYTHONUNBUFFERED=1
steps=("$@")
[[ ${#steps[@]} -eq 0 ]] && steps=(tests bench_core bench_lang bench_fkl bench_video bench_compilers bench_interop bench_mma)
dest="${OUT:-/tmp/thork-gpu-run}"
out=/tmp/thork-gpu-logs          # everything lands here; $OUT gets one archive + summary
rm -rf "$out"; mkdir -p "$out" "$dest"
# The device tool returns at most 8 files from $OUT (session 12 lost logs to that limit):
# two files leave here, the archive of every log and the summary lines.
trap 'tar czf "$dest/logs.tgz" -C "$out" . ; cp "$out"/summary.txt "$dest"/ 2>/dev/null' EXIT
rm -rf /tmp/site
python3 -m pip install -q --no-deps --no-index --target /tmp/site .wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site
export PATH="/tmp/site/bin:$PATH"
export THORK_CACHE_DIR=/tmp/thork-cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
python3 -m thork_core._cli info | tee "$out/info.txt"
mkdir -p /tmp/cv && cp .cv/part* /tmp/cv/ 2>/dev/null
for step in "${steps[@]}"; do
  if [[ "$step" == sanitizer ]]; then
    # The GPU subset under compute-sanitizer (memcheck, racecheck, synccheck): its own
    # summary lines go to $OUT/sanitizer.txt (bench/gpu_sanitizer.sh).
    OUT="$out" bash bench/gpu_sanitizer.sh; cat "$out/sanitizer.txt" >> "$out/summary.txt"
  elif [[ "$step" == cvcuda ]]; then
    cat /tmp/cv/part* > /tmp/cv/cvcuda_cu13-0.19.0-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl
    python3 -m pip install -q --no-deps --no-index --target /tmp/site \
      /tmp/cv/cvcuda_cu13-*.whl && python3 -c "import cvcuda; print('cvcuda', cvcuda.__version__)" \
      | tee -a "$out/summary.txt"
  elif [[ "$step" == examples ]]; then
    # Every example as a user runs it (each checks its results against NumPy).
    for ex in examples/*.py; do
      if timeout 120 python3 "$ex" > "$out/example-$(basename "$ex" .py).log" 2>&1; then
        r=ok; else r="FAILED ($?)"; fi
      echo "example $ex: $r" | tee -a "$out/summary.txt"
    done
  elif [[ "$step" == tests* ]]; then
    # tests:nvcc runs the suite with THORK_COMPILER=nvcc (GPU kernels built by nvcc).
    compiler="${step#tests}"; compiler="${compiler#:}"
    log="$out/pytest${compiler:+-$compiler}.log"
    python3 examples/matrix_add.py
    # THORK_TEST_WORKERS=N spreads a compiler's suite over N pytest-xdist workers (when
    # its wheel was carried too): nvcc's ~0.3 s per kernel makes a serial run slow. Each
    # worker then gets its own private cache (conftest), so compile counters stay exact.
    par=(); envs=()
    if [[ -n "$compiler" && -n "${THORK_TEST_WORKERS:-}" ]] && python3 -c "import xdist" 2>/dev/null; then
      par=(-n "$THORK_TEST_WORKERS"); envs=(-u THORK_CACHE_DIR)
    fi
    # A test that hangs (a spinning kernel, a stuck compile) must not hold the whole run
    # hostage: with pytest-timeout (its wheel carried in .wheels/) each test gets
    # THORK_TEST_PER_TEST_TIMEOUT seconds, then its stacks are dumped and its worker
    # replaced, so the run ends with that test named as failed. xdist's worksteal hands a
    # stuck worker's queued tests to the others.
    per=()
    if python3 -c "import pytest_timeout" 2>/dev/null; then
      per=(--timeout "${THORK_TEST_PER_TEST_TIMEOUT:-150}" --timeout-method thread)
      [[ ${#par[@]} -gt 0 ]] && per+=(--dist worksteal)
    fi
    env "${envs[@]}" THORK_COMPILER="${compiler}" timeout "${THORK_TEST_TIMEOUT:-300}" \
      python3 -m pytest tests "${par[@]}" "${per[@]}" -q -p no:cacheprovider -o addopts="" \
      -rfEs --durations=15 2>&1 | tee "$log" | tail -60
    echo "suite (compiler ${compiler:-default}): $(grep -E '(passed|failed).* in [0-9.]+s' "$log" \
      | tail -1 || echo "no summary line: cut off by THORK_TEST_TIMEOUT")" >> "$out/summary.txt"
    grep -E "^(FAILED|ERROR) |Timeout" "$log" | head -20 >> "$out/summary.txt"
  else
    echo "=== $step"
    # THORK_ARGS_<step> adds arguments, e.g. THORK_ARGS_bench_fkl="--only filters".
    extra_var="THORK_ARGS_${step}"; read -r -a extra <<< "${!extra_var:-}"
    timeout "${THORK_BENCH_TIMEOUT:-240}" python3 "bench/$step.py" --out "$out" "${extra[@]}" \
      > "$out/$step.log" 2>&1
    echo "exit $?"; tail -25 "$out/$step.log"
  fi
done
