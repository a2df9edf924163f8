#!/usr/bin/env bash
# tools/gpu_tune.sh: how the decode kernel's shared-memory ring size changes its speed.
#
# Stages per warp (`lowp gpu bench --stages`) and warps per CTA (`--warps`; the decode
# library's lowp_gpu_decode_desc.ring_stages and cta_warps) change how K/V bytes travel to
# the SM, never the arithmetic (gpu/kernels/decode.cu), so every setting gives the same
# output bits. Both are upper bounds: the library lowers them when the ring does not fit
# in shared memory. This runs `lowp gpu bench` once per setting and layout and prints one
# line per (setting, format): median time and fraction of the streaming read.
#
#   tools/gpu_tune.sh [LOWP_BINARY] [extra lowp gpu bench arguments...]
#
# Environment: TUNE_STAGES (default "2 3 4"), TUNE_WARPS (default "4 2"), TUNE_LAYOUTS
# (default "nhd hnd"). Defaults for the bench arguments: --batch 32 --ctx 32768 --reps 10.
# Needs a CUDA GPU; exits 77 without one (like the bench).
set -u
cd "$(dirname "$0")/.." || exit 3
LOWP=${1:-build/tools/lowp}
[ $# -gt 0 ] && shift
ARGS=("$@")
[ ${#ARGS[@]} -eq 0 ] && ARGS=(--batch 32 --ctx 32768 --reps 10)
[ -x "$LOWP" ] || { echo "gpu_tune: $LOWP is not an executable lowp" >&2; exit 2; }
printf '%-6s %-6s %-6s %-9s %12s %9s\n' layout stages warps format "median_us" "of_read"
for lay in ${TUNE_LAYOUTS:-nhd hnd}; do
  for s in ${TUNE_STAGES:-2 3 4}; do
    for w in ${TUNE_WARPS:-4 2}; do
      out=$("$LOWP" gpu bench --layout "$lay" --stages "$s" --warps "$w" "${ARGS[@]}" 2>&1)
      rc=$?
      [ $rc = 77 ] && { echo "gpu_tune: no CUDA device" >&2; exit 77; }
      [ $rc != 0 ] && { echo "gpu_tune: lowp gpu bench failed: $out" >&2; exit 1; }
      # table lines: "<format> batch B ctx C:  T us  G GB/s  read R GB/s  F%  (...)"
      echo "$out" | awk -v l="$lay" -v s="$s" -v w="$w" \
        '$2 == "batch" { printf "%-6s %-6s %-6s %-9s %12s %9s\n", l, s, w, $1, $6, $13 }'
    done
  done
done
