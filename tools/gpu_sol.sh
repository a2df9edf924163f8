#!/usr/bin/env bash
# tools/gpu_sol.sh: what bounds the NVFP4 decode kernel on the GPU, measured by timing
# variants of it with parts of its work removed ("speed of light" variants).
#
#   tools/gpu_sol.sh LOWP_BINARY OUTDIR
#
# LOWP_BINARY is a lowp built from this tree (tools/gpu_run.sh builds build-device/tools/lowp).
# The script copies the tree to a scratch folder (the tree itself is never edited), derives
# three variants of gpu/kernels/decode.cu there and builds each with tools/gpu_run.sh:
#   noexp  the softmax's probabilities p = x instead of exp2_sw(x) (alpha keeps exp2_sw)
#   nodec  the E2M1 bit placement (gpu/kernels/decode_e2m1.h: 13 instructions per 8 codes) replaced
#          by 3 shifts; the loads, the block-scale multiply and everything else stay
#   both   the two together
# Their outputs are wrong by construction: only their times and counters mean anything.
# Then, at the issue's shape (batch 32, context 32K, 32 query heads, 8 KV heads, head dim
# 128), it writes to OUTDIR
#   sol-bench.txt         lowp gpu bench, NVFP4, the four binaries, NHD pages of 16 and HND
#                         pages of 64, two rounds, one process a binary and layout
#   sol-l2-*.csv          Nsight Compute (clocks unlocked): duration, DRAM bytes, L2 requests
#                         and sectors, and the breakdown of lts__throughput (the L2's busiest
#                         unit), for each binary and layout and for the bench's streaming read
#   sol-pipes-F.csv       the unmodified kernel, each format: instructions per pipe
#                         (sm__inst_executed_pipe_*), pipe busy fractions, issue activity
#   sol-stall-*.csv       warp states (stall reasons per issue) of the kernel and of `both`
# Needs nvcc, ncu and a CUDA GPU; exits 77 without ncu or a GPU.
set -u
cd "$(dirname "$0")/.." || exit 3
ROOT=$PWD
LOWP=${1:?usage: tools/gpu_sol.sh LOWP_BINARY OUTDIR}
OUTDIR=${2:?usage: tools/gpu_sol.sh LOWP_BINARY OUTDIR}
[ -x "$LOWP" ] || { echo "gpu_sol: $LOWP is not an executable lowp" >&2; exit 2; }
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "gpu_sol: ncu not found" >&2; exit 77; }
nvidia-smi >/dev/null 2>&1 || { echo "gpu_sol: no GPU" >&2; exit 77; }
mkdir -p "$OUTDIR" || exit 3
LOWP=$(cd "$(dirname "$LOWP")" && pwd)/$(basename "$LOWP")
W=$(mktemp -d) || exit 3
trap 'rm -rf "$W"' EXIT
tar -C "$ROOT" --exclude='./build*' --exclude=./.venv --exclude=./.git -cf - . | tar -C "$W" -xf - ||
  exit 3

# Each edit must match exactly once, so that a changed kernel stops the script instead of
# timing something else.
edit() { # file, literal old text, new text
  python3 - "$@" <<'EOF'
import sys
path, old, new = sys.argv[1:4]
s = open(path).read()
if s.count(old) != 1:
    sys.exit("gpu_sol: %r occurs %d times in %s" % (old, s.count(old), path))
open(path, "w").write(s.replace(old, new))
EOF
}
SRC=$W/gpu/kernels/decode.cu
cp "$SRC" "$W/decode.orig.cu"
variant() {
  cp "$W/decode.orig.cu" "$SRC"
  case $1 in noexp|both)
    edit "$SRC" "pA[0] = lowp_exp2_sw(own ? xA[0] : y0);" "pA[0] = (own ? xA[0] : y0);" &&
    edit "$SRC" "pA[1] = lowp_exp2_sw(own ? xA[1] : y1);" "pA[1] = (own ? xA[1] : y1);" &&
    edit "$SRC" "pA[i] = lowp_exp2_sw(xA[i]);" "pA[i] = xA[i];" || return 1 ;;
  esac
  case $1 in nodec|both)
    edit "$SRC" "    lowp_dec_e2m1x8_sub(w, o);" \
      "    o[0] = w; o[1] = w >> 8; o[2] = w >> 16; o[3] = w >> 24;" || return 1 ;;
  esac
}
for v in noexp nodec both; do
  variant $v || { echo "gpu_sol: variant $v: the kernel source changed; update this script" >&2; exit 1; }
  touch "$SRC"
  # the build folder is reused (incremental); a failed build must not leave the previous
  # variant's binary to be timed under this one's name
  rm -f "$W/build-device/tools/lowp"
  (cd "$W" && LOWP_GPU_RUN_STEPS=none LOWP_GPU_RUN_EXTRA=true LOWP_GPU_RUN_ARCHS=90 \
     OUT="$W/out-$v" bash tools/gpu_run.sh >"$W/build-$v.log" 2>&1)
  [ -x "$W/build-device/tools/lowp" ] || { tail -20 "$W/build-$v.log" >&2; exit 1; }
  cp "$W/build-device/tools/lowp" "$W/lowp-$v"
  echo "gpu_sol: built $v"
done

SHAPE=(--formats nvfp4 --batch 32 --ctx 32768)
LAYOUTS=("--layout nhd --page-size 16" "--layout hnd --page-size 64")
BINS=("$LOWP" "$W/lowp-noexp" "$W/lowp-nodec" "$W/lowp-both")
name() { case $1 in "$LOWP") echo kernel ;; *) basename "$1" | sed 's/^lowp-//' ;; esac; }
{
  for round in 1 2; do
    for lay in "${LAYOUTS[@]}"; do
      for x in "${BINS[@]}"; do
        printf '%-7s %-28s round %d: ' "$(name "$x")" "$lay" "$round"
        # shellcheck disable=SC2086
        "$x" gpu bench "${SHAPE[@]}" --reps 20 $lay | grep '^nvfp4' || echo "(failed)"
      done
    done
  done
} >"$OUTDIR/sol-bench.txt" 2>&1
echo "gpu_sol: bench -> $OUTDIR/sol-bench.txt"

L2=breakdown:lts__throughput.avg.pct_of_peak_sustained_elapsed
L2=$L2,lts__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum
L2=$L2,dram__bytes_read.sum,lts__t_requests_srcunit_tex_op_read.sum
L2=$L2,lts__t_sectors_srcunit_tex_op_read.sum,smsp__inst_executed.sum
for x in "${BINS[@]}"; do
  for lay in "${LAYOUTS[@]}"; do
    tag=$(name "$x")-$(echo "$lay" | awk '{print $2 $4}')
    # shellcheck disable=SC2086
    "$NCU" --clock-control none --kernel-name regex:decode_split --launch-skip 3 \
      --launch-count 1 --metrics "$L2" --csv --page raw "$x" gpu bench "${SHAPE[@]}" --reps 3 \
      $lay >"$OUTDIR/sol-l2-$tag.csv" 2>&1 || echo "gpu_sol: ncu failed for $tag" >&2
  done
done
"$NCU" --clock-control none --kernel-name regex:stream_read --launch-skip 1 --launch-count 1 \
  --metrics "$L2" --csv --page raw "$LOWP" gpu bench "${SHAPE[@]}" --reps 3 \
  >"$OUTDIR/sol-l2-stream.csv" 2>&1 || echo "gpu_sol: ncu failed for the streaming read" >&2

# The metric names that this chip knows (an unknown name fails the whole ncu run).
"$NCU" --query-metrics --chip gh100 >"$W/metrics.txt" 2>&1
P=smsp__inst_executed.sum,sm__cycles_elapsed.avg,gpu__time_duration.sum
P=$P,smsp__issue_active.avg.pct_of_peak_sustained_active
for m in $(awk '{print $1}' "$W/metrics.txt" | grep -E '^sm__inst_executed_pipe_[a-z0-9_]+$' | sort -u); do
  P=$P,$m.sum
done
for m in $(awk '{print $1}' "$W/metrics.txt" | grep -E '^sm__pipe_[a-z0-9_]+_cycles_active$' | sort -u); do
  P=$P,$m.avg.pct_of_peak_sustained_active
done
for f in bf16 fp8_e4m3 nvfp4 mxfp4; do
  "$NCU" --clock-control none --kernel-name regex:decode_split --launch-skip 3 --launch-count 1 \
    --metrics "$P" --csv --page raw "$LOWP" gpu bench --formats $f --batch 32 --ctx 32768 \
    --reps 3 >"$OUTDIR/sol-pipes-$f.csv" 2>&1 || echo "gpu_sol: ncu failed for pipes $f" >&2
done
for x in "$LOWP" "$W/lowp-both"; do
  "$NCU" --clock-control none --kernel-name regex:decode_split --launch-skip 3 --launch-count 1 \
    --section WarpStateStats --section SchedulerStats --csv --page raw "$x" gpu bench \
    "${SHAPE[@]}" --reps 3 >"$OUTDIR/sol-stall-$(name "$x").csv" 2>&1 ||
    echo "gpu_sol: ncu failed for stalls of $(name "$x")" >&2
done
echo "gpu_sol: counters -> $OUTDIR/sol-*.csv"
cat "$OUTDIR/sol-bench.txt"
