#!/usr/bin/env bash
# The extend workspace fill's kernels side by side on the GPU: lowp gpu bench --kernel extend
# with LOWP_GPU_WS_FILL=rows, =staged and the default (auto), over prefixes around the
# default's switch, each a CSV under OUT (ws_us, ws_eff = the fill's bytes over a copy's
# time of as many bytes, measured in the same run). Usage: tools/ws_fill_sweep.sh LOWP OUT
# [extra lowp gpu bench arguments]. Env: WS_SWEEP_PREFIXES, WS_SWEEP_CHUNKS (comma lists).
set -u
LOWP=$1 OUT=$2; shift 2
PRE=${WS_SWEEP_PREFIXES:-4096,6144,8192,12288,16384,131072}
CH=${WS_SWEEP_CHUNKS:-512,2048,8192}
rc=0
for fill in rows staged auto; do
  LOWP_GPU_WS_FILL=$fill "$LOWP" gpu bench --kernel extend --prefixes "$PRE" --chunks "$CH" \
    --csv "$OUT/ws-sweep-$fill.csv" "$@" > "$OUT/ws-sweep-$fill.txt" 2>&1 || rc=1
  echo "== $fill"; cat "$OUT/ws-sweep-$fill.txt"
done
exit $rc
