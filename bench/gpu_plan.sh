#!/usr/bin/env bash
# The pending GPU work of bench/GPU_PENDING.md ("To run next") as three device calls, each
# leaving at most three files in $OUT (the device tool returns at most 8): plan-<part>.txt
# (the result lines), plan-<part>.tgz (every log) and nothing else.
#   bash bench/gpu_plan.sh suite   # ~6 min: the GPU suite under nvrtc, nvcc and clang,
#                                  #   then compute-sanitizer's memcheck/racecheck/synccheck
#   bash bench/gpu_plan.sh bench   # ~6 min: bench_core (cold compile, round trips, hot
#                                  #   launches), bench_fkl, first call, import, the pinned
#                                  #   trace, bench_mma
#   bash bench/gpu_plan.sh lang    # ~6 min: diag_rows (every pick, its fast twin and the
#                                  #   session-13 variants), bench_lang in full
#   bash bench/gpu_plan.sh hot     # ~3 min: bench_fkl's hot rows twice (the DLPack-only
#                                  #   row's spread), bench_core's hot rows, and
#                                  #   diag_dlpack_pipe.py (times; driver calls)
#   bash bench/gpu_plan.sh floor   # ~1 min: diag_hot_floor.py (the hot call's time over
#                                  #   the C floor, session 17), bench_core's hot rows
#   bash bench/gpu_plan.sh verdict # ~4 min: hot_verdict.py (the hot rows of bench_core
#                                  #   in 7 fresh processes, judged by the median)
#   bash bench/gpu_plan.sh bound   # ~6 min: diag_hot_floor.py with the ideal launcher's
#                                  #   rows, then hot_verdict.py over 7 processes (the CuPy
#                                  #   row, Thork and the ideal launcher, session 18)
#   bash bench/gpu_plan.sh ab      # ~8 min: hot_verdict.py, base (.wheels-base) against
#                                  #   new (.wheels) alternating, 6 processes each
#                                  #   (session 20; PROCESSES= to change)
#   bash bench/gpu_plan.sh reader  # ~4 min: the GPU suite under nvrtc, then the files of
#                                  #   the native readers (core's foreign and C readers,
#                                  #   torch's reader, the hot GPU calls) under nvcc and
#                                  #   clang (session 19: what a launch-path change needs
#                                  #   when the whole three-compiler suite does not fit)
#   bash bench/gpu_plan.sh recheck # ~2 min: bench_lang's row table again, and
#                                  #   diag_dlpack_pipe.py over 21 rounds
# Carry the wheels built here (.wheels: `for p in packages/*/; do python3 -m pip wheel
# --no-deps --no-build-isolation -w .wheels "$p"; done; git log -1 --format='code %h %s'
# > .wheels/COMMIT`). Each part installs them into
# /tmp/site; the parts are independent and may run in any order.
set -uo pipefail
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
part=${1:?usage: bash bench/gpu_plan.sh suite|bench|lang|hot|floor|verdict|bound|ab|reader|recheck}
dest=${OUT:-/tmp/thork-plan}
L=/tmp/thork-plan-$part
rm -rf "$L"; mkdir -p "$L" "$dest"
trap 'tar czf "$dest/plan-$part.tgz" -C "$L" . ; cp "$L/plan.txt" "$dest/plan-$part.txt"' EXIT
say() { echo "$*" | tee -a "$L/plan.txt"; }
# run NAME SECONDS CMD...: a step with its own log and time limit; its exit status and
# the log's last lines go to plan.txt, so a missing result names its step.
run() {
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" > "$L/$name.log" 2>&1
  local rc=$?
  say "== $name: exit $rc in $((SECONDS - t0)) s"
  tail -"${TAIL:-6}" "$L/$name.log" | tee -a "$L/plan.txt"
}
rm -rf /tmp/site
python3 -m pip install -q --no-deps --no-index --target /tmp/site .wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site PATH="/tmp/site/bin:$PATH" THORK_CACHE_DIR=/tmp/thork-cache
say "$(nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv,noheader)"
# The device's copy of the tree may carry an older git HEAD than the wheels were built
# from (session 14): the build writes .wheels/COMMIT, which names the code that runs.
say "$(cat .wheels/COMMIT 2>/dev/null || git log -1 --format='code %h %s (git HEAD here)' 2>/dev/null || echo 'code: unknown')"

case "$part" in
suite)
  THORK_TEST_TARGETS=gpu THORK_TEST_WORKERS=16 THORK_TEST_TIMEOUT=170 OUT="$L/run" \
    timeout 560 bash bench/gpu_run.sh tests:nvrtc tests:nvcc tests:clang sanitizer \
    > "$L/gpu_run.log" 2>&1
  say "== gpu_run.sh exit $?"
  cat "$L/run/summary.txt" >> "$L/plan.txt"
  ;;
bench)
  TAIL=40 run bench_core 200 python3 bench/bench_core.py --out "$L/core"
  TAIL=40 run bench_fkl 200 python3 bench/bench_fkl.py --out "$L/fkl"
  run first_call 60 python3 bench/first_call.py --target gpu --runs 10
  run import_time 40 python3 bench/import_time.py --runs 20
  run pinned_trace 40 python3 bench/diag_pinned_trace.py --reps 50
  run pinned_trace_untouched 40 python3 bench/diag_pinned_trace.py --reps 50 --untouched
  TAIL=30 run bench_mma 90 python3 bench/bench_mma.py --out "$L/mma"
  ;;
lang)
  TAIL=60 run diag_rows 330 python3 bench/diag_rows.py --jobs 16 --rep 50 --out "$L/rows"
  TAIL=40 run bench_lang 230 python3 bench/bench_lang.py --no-torch --out "$L/lang"
  ;;
hot)
  TAIL=30 run bench_fkl_hot 120 python3 bench/bench_fkl.py --only hot --out "$L/fkl"
  TAIL=30 run bench_fkl_hot2 120 python3 bench/bench_fkl.py --only hot --out "$L/fkl2"
  TAIL=30 run bench_core_hot 150 python3 bench/bench_core.py --only hot --out "$L/core"
  TAIL=12 run diag_dlpack 60 python3 bench/diag_dlpack_pipe.py
  run diag_dlpack_trace 60 python3 bench/diag_dlpack_pipe.py --trace
  ;;
verdict)
  TAIL=20 run hot_verdict 330 python3 bench/hot_verdict.py --processes 7 --out "$L/verdict"
  ;;
ab)
  # (session 20) the hot rows of two builds, alternating process by process: .wheels-base
  # (the wheels of the build before the change, carried too) against .wheels
  rm -rf /tmp/site-base
  python3 -m pip install -q --no-deps --no-index --target /tmp/site-base .wheels-base/*.whl \
    || exit 1
  say "base: $(cat .wheels-base/COMMIT 2>/dev/null || echo unknown)"
  TAIL=40 run hot_verdict 560 python3 bench/hot_verdict.py --processes "${PROCESSES:-6}" \
    --variant base=/tmp/site-base --variant new=/tmp/site --out "$L/verdict"
  ;;
bound)
  TAIL=30 run diag_hot_floor 120 python3 bench/diag_hot_floor.py
  TAIL=30 run hot_verdict 420 python3 bench/hot_verdict.py --processes 7 --out "$L/verdict"
  ;;
floor)
  TAIL=40 run diag_hot_floor 120 python3 bench/diag_hot_floor.py --counters
  TAIL=30 run bench_core_hot 150 python3 bench/bench_core.py --only hot --out "$L/core"
  ;;
reader)
  THORK_TEST_TARGETS=gpu THORK_TEST_WORKERS=16 THORK_TEST_TIMEOUT=200 OUT="$L/run" \
    timeout 260 bash bench/gpu_run.sh tests:nvrtc > "$L/gpu_run.log" 2>&1
  say "== gpu_run.sh tests:nvrtc exit $?"
  cat "$L/run/summary.txt" >> "$L/plan.txt"
  for c in nvcc clang; do
    TAIL=3 run "readers-$c" 150 env THORK_TEST_TARGETS=gpu THORK_COMPILER=$c python3 -m pytest \
      -n 16 -q -p no:cacheprovider -o addopts="" -rfEs tests/core/test_array_reader.py \
      tests/core/test_foreign_readers.py tests/core/test_native_launch.py \
      tests/core/test_native_launch_call.py tests/interop/test_foreign_hot.py \
      tests/interop/test_torch_reader.py tests/interop/test_torch_stream_follow.py \
      tests/interop/test_streams_gpu.py
  done
  ;;
recheck)
  TAIL=24 run bench_lang_rows 150 python3 bench/bench_lang.py --rows-only --no-torch --out "$L/lang"
  TAIL=12 run diag_dlpack 120 python3 bench/diag_dlpack_pipe.py --rounds 21
  ;;
*)
  say "unknown part $part (suite, bench, lang, hot, floor, verdict, bound, reader or recheck)"; exit 2
  ;;
esac
