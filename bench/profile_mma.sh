#!/usr/bin/env bash
# Session 12 (issue 19): where the TMA-fed mma.sync GEMM loses to its no_tma probe, in one
# GPU call — the safe sweep (bench/sweep_mma.py: ceilings near-1 and random operands, SM
# clock and power over every timing, the variants, no_tma probes), then Nsight Compute
# on one launch each of bench/prof_mma.py's kernels (sections, then a few metrics), the
# reports printed to text. Run from the staged folder (.h/NAME) with PYTHONPATH set.
#   bash bench/profile_mma.sh OUT_DIR "variant,variant" SWEEP_BUDGET_S NCU_TIMEOUT_S
set -uo pipefail
out="$1"; variants="$2"; budget="${3:-95}"; ncu_s="${4:-55}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu \
  --format=csv | tee "$out/smi.txt"
python3 bench/sweep_mma.py --out "$out" --jobs 16 --timeout 30 --budget "$budget" \
  --variants "$variants" 2>&1 | tee "$out/sweep.log"
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv | tee -a "$out/smi.txt"
rep="$out/prof"
timeout "$ncu_s" ncu --clock-control none --kernel-name regex:'gemm_mma_tma|mma_peak' \
  --launch-count 7 --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
  --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
  --section ComputeWorkloadAnalysis --section SourceCounters --section LaunchStats \
  -f -o "$rep" python3 bench/prof_mma.py > "$out/ncu.log" 2>&1
echo "ncu rc=$?"; tail -5 "$out/ncu.log"
if [[ -f "$rep.ncu-rep" ]]; then
  ncu -i "$rep.ncu-rep" --page details > "$out/details.txt" 2>&1
  ncu -i "$rep.ncu-rep" --page raw --csv > "$out/raw.csv" 2>&1
  ncu -i "$rep.ncu-rep" --page source --csv --print-source sass > "$out/source.csv" 2>&1
  grep -E "^  [a-z_]+.*\(|Duration|SM Frequency|Throughput|Hit Rate|Bank|Stall|Issued|Eligible|No Eligible|Active Warps|Warp Cycles" \
    "$out/details.txt" | head -150
fi
timeout 25 ncu --clock-control none --kernel-name regex:gemm_mma_tma --launch-count 3 \
  --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,lts__t_sector_hit_rate.pct,sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active \
  python3 bench/prof_mma.py > "$out/metrics.txt" 2>&1
echo "metrics rc=$?"; grep -E "gemm_mma_tma|__" "$out/metrics.txt" | head -40
cd "$out" && tar czf prof.tgz prof.ncu-rep details.txt raw.csv source.csv ncu.log metrics.txt 2>/dev/null
rm -f prof.ncu-rep raw.csv source.csv
ls -la
