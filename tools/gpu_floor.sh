#!/usr/bin/env bash
# tools/gpu_floor.sh: what does the work of an exact NVFP4 decode cost on this GPU? Runs
# lowp_gpu_floor (gpu/experiments/floor.cu: kernels that stream the NVFP4 cache and do part of the
# decode's work) beside lowp's own kernel and PyTorch's SDPA, one program after another on
# the same GPU in one run, at the issue's shape (batch 32, context 32K, 32 query heads, 8
# KV heads, head dim 128).
#
#   tools/gpu_floor.sh OUTDIR
#
# Needs build-device/ configured by tools/gpu_run.sh (it builds lowp and, here, the target
# lowp_gpu_floor in it), nvcc, a CUDA GPU; ncu and torch when present. Writes to OUTDIR
#   floor.txt        lowp_gpu_floor, two rounds
#   bench.txt        lowp gpu bench, NVFP4 and FP8 (HND pages of 64, NHD pages of 16) and
#                    BF16, two rounds
#   sdpa.csv         tools/sdpa_bench.py at batch 32, context 32K (cuDNN and flash)
#   floor-ncu.csv    Nsight Compute: instructions and time of every floor kernel (one launch
#                    each), from which instructions a tile = inst_executed / (B H L / 16)
# Exits 77 without a GPU.
set -u
cd "$(dirname "$0")/.." || exit 3
OUTDIR=${1:?usage: tools/gpu_floor.sh OUTDIR}
nvidia-smi >/dev/null 2>&1 || { echo "gpu_floor: no GPU" >&2; exit 77; }
mkdir -p "$OUTDIR" || exit 3
B=build-device
[ -f "$B/CMakeCache.txt" ] || { echo "gpu_floor: $B is not configured (run tools/gpu_run.sh first)" >&2; exit 2; }
# the floor kernels are an experiment: built only with LOWP_GPU_EXPERIMENTS=ON
cmake "$B" -DLOWP_GPU_EXPERIMENTS=ON >"$OUTDIR/floor-build.log" 2>&1 ||
  { tail -20 "$OUTDIR/floor-build.log" >&2; exit 1; }
cmake --build "$B" -j "$(nproc)" --target lowp_gpu_floor >>"$OUTDIR/floor-build.log" 2>&1 ||
  { tail -20 "$OUTDIR/floor-build.log" >&2; exit 1; }
FLOOR=$B/gpu/lowp_gpu_floor
LOWP=$B/tools/lowp
[ -x "$LOWP" ] || { echo "gpu_floor: $LOWP missing (run tools/gpu_run.sh first)" >&2; exit 2; }

{
  for round in 1 2; do
    echo "== round $round"
    "$FLOOR" --reps 20
  done
} >"$OUTDIR/floor.txt" 2>&1
{
  for round in 1 2; do
    echo "== round $round"
    "$LOWP" gpu bench --formats nvfp4,fp8_e4m3 --batch 32 --ctx 32768 --reps 20 \
      --layout hnd --page-size 64 | grep -E '^(nvfp4|fp8|stream|read)' || echo "(failed)"
    "$LOWP" gpu bench --formats nvfp4,fp8_e4m3,bf16 --batch 32 --ctx 32768 --reps 20 \
      --layout nhd --page-size 16 | grep -E '^(nvfp4|fp8|bf16|stream|read)' || echo "(failed)"
  done
} >"$OUTDIR/bench.txt" 2>&1
if python3 -c 'import torch' 2>/dev/null; then
  python3 tools/sdpa_bench.py --out "$OUTDIR/sdpa.csv" --batch 32 --ctx 32768 \
    --backends cudnn,flash --budget-s 60 >"$OUTDIR/sdpa.log" 2>&1 || echo "gpu_floor: sdpa_bench failed" >&2
fi
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
  # the per-pipe metric names this chip knows (an unknown name fails the whole ncu run)
  "$NCU" --query-metrics --chip gh100 >"$OUTDIR/metrics.txt" 2>&1
  M=smsp__inst_executed.sum,gpu__time_duration.sum,launch__registers_per_thread
  M=$M,sm__warps_active.avg.pct_of_peak_sustained_active
  M=$M,smsp__issue_active.avg.pct_of_peak_sustained_active
  for m in $(awk '{print $1}' "$OUTDIR/metrics.txt" |
             grep -E '^sm__pipe_(alu|fma|fmaheavy|fp16|tensor_op_hmma|shared|lsu)_cycles_active$' | sort -u); do
    M=$M,$m.avg.pct_of_peak_sustained_active
  done
  for m in $(awk '{print $1}' "$OUTDIR/metrics.txt" |
             grep -E '^sm__inst_executed_pipe_(alu|fma|fp16|lsu|tensor)$' | sort -u); do
    M=$M,$m.sum
  done
  rm -f "$OUTDIR/metrics.txt"
  "$NCU" --clock-control none --kernel-name regex:floor_kernel --metrics "$M" \
    --csv --page raw "$FLOOR" --reps 1 >"$OUTDIR/floor-ncu.csv" 2>&1 || echo "gpu_floor: ncu failed" >&2
fi
cat "$OUTDIR/floor.txt" "$OUTDIR/bench.txt"
[ -f "$OUTDIR/sdpa.csv" ] && cat "$OUTDIR/sdpa.csv"
exit 0
