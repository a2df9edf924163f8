#!/usr/bin/env bash
# tools/gpu_prof.sh: where the decode kernel's time and instructions go, from Nsight Compute.
#
#   tools/gpu_prof.sh LOWP_BINARY OUTDIR [extra lowp gpu bench arguments...]
#
# For each format in PROF_FORMATS (default "nvfp4 bf16") it profiles one launch of the
# split kernel (decode_split) inside `lowp gpu bench` (default shape: batch 32, context 32K,
# the issue's 32 query heads, 8 KV heads, head dim 128) and writes
#   OUTDIR/prof-F-details.csv   the sections (speed of light, occupancy, warp states,
#                               executed instruction mix)
#   OUTDIR/prof-F-sass.csv.gz   every SASS instruction with its executed count and stall
#                               samples (ncu --page source --print-source sass)
# Profiling replays the kernel, so its times are not the bench's; use `lowp gpu bench`
# for times. Needs ncu (Nsight Compute) and a CUDA GPU; exits 77 without either.
#
# Any other kernel: PROF_KERNEL (an ncu --kernel-name regex), PROF_SKIP (launches of it to
# skip, default 3) and the command after OUTDIR (run as given, LOWP_BINARY unused but
# checked); PROF_NAME names the files (prof-NAME-*); PROF_NAME_BASE=demangled matches template
# arguments (ncu --kernel-name-base; ncu demangles them as "<(int)0, ...>"), e.g. the QSA
# scoring kernel at 128K:
#   PROF_NAME_BASE=demangled PROF_KERNEL='regex:qsa_score_kernel<.int.0,' PROF_SKIP=20 PROF_NAME=qsa-bf16 \
#     tools/gpu_prof.sh LOWP OUT build/gpu/lowp_gpu_select_check OUT/x.md --bench-only
set -u
cd "$(dirname "$0")/.." || exit 3
LOWP=${1:?usage: tools/gpu_prof.sh LOWP_BINARY OUTDIR [bench arguments]}
OUTDIR=${2:?usage: tools/gpu_prof.sh LOWP_BINARY OUTDIR [bench arguments]}
shift 2
ARGS=("$@")
if [ -n "${PROF_KERNEL:-}" ]; then
  [ ${#ARGS[@]} -gt 0 ] || { echo "gpu_prof: PROF_KERNEL needs the command to run" >&2; exit 2; }
else
  [ ${#ARGS[@]} -eq 0 ] && ARGS=(--batch 32 --ctx 32768 --reps 3)
fi
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "gpu_prof: ncu not found" >&2; exit 77; }
[ -x "$LOWP" ] || { echo "gpu_prof: $LOWP is not an executable lowp" >&2; exit 2; }
mkdir -p "$OUTDIR" || exit 3
rc=0
FORMATS=${PROF_FORMATS:-nvfp4 bf16}
[ -n "${PROF_KERNEL:-}" ] && FORMATS=${PROF_NAME:-kernel}
for f in $FORMATS; do
  rep=$OUTDIR/prof-$f
  if [ -n "${PROF_KERNEL:-}" ]; then CMD=("${ARGS[@]}"); KN=$PROF_KERNEL
  else CMD=("$LOWP" gpu bench --formats "$f" "${ARGS[@]}"); KN=regex:decode_split; fi
  # launch-skip (default 3: past the bench's warm-up calls): one timed call's kernel
  "$NCU" --kernel-name-base "${PROF_NAME_BASE:-function}" --kernel-name "$KN" --launch-skip "${PROF_SKIP:-3}" --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section InstructionStats --section SourceCounters --section MemoryWorkloadAnalysis \
    --import-source no -f -o "$rep" "${CMD[@]}" >"$rep.log" 2>&1
  r=$?
  if [ $r != 0 ] || [ ! -f "$rep.ncu-rep" ]; then
    echo "gpu_prof: ncu failed for $f (rc $r):" >&2
    tail -5 "$rep.log" >&2
    rc=1
    continue
  fi
  "$NCU" -i "$rep.ncu-rep" --page details --csv >"$rep-details.csv" 2>>"$rep.log" || rc=1
  "$NCU" -i "$rep.ncu-rep" --page source --print-source sass --csv 2>>"$rep.log" |
    gzip -9 >"$rep-sass.csv.gz" || rc=1
  rm -f "$rep.ncu-rep" "$rep.log"
  echo "gpu_prof: $f -> $rep-details.csv, $rep-sass.csv.gz"
done
exit $rc
