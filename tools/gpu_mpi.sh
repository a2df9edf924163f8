#!/usr/bin/env bash
# tools/gpu_mpi.sh LOWP OUT [GPU CONFORM OPTIONS]: step `mpi` of tools/gpu_run.sh (issue #23).
#
# `lowp gpu conform OPTIONS` (default --cases 20000) once unsharded, then as 2 MPI ranks on
# this machine's GPUs (tools/lowp_mpi.sh: one shard a rank, GPU local rank mod count, rank
# 0 merges); the merged result and report must equal the unsharded run's byte for byte
# (cmp, nothing masked: results and --merge reports hold no times; the unsharded run's
# report comes from --merge of its own result, as the shards' does). Both are timed (wall).
# Writes OUT/mpi-h200.md (the verdict, times, each rank's GPU line), mpi-one.json/.md,
# mpi-two.json/.md and the two runs' output (mpi-one.txt, mpi-two.txt).
#
# mpirun: Debian's Open MPI 4.1 from the .deb files in LOWP_MPI_DEB_DIR (default
# .deb/mpi, carried: the GPU machine has no MPI and no network), unpacked with dpkg -x
# into $TMPDIR/lowp-mpi and run relocated (OPAL_PREFIX, PMIX_INSTALL_PREFIX, PMIx's plugin
# folder, LD_LIBRARY_PATH); else an mpirun on PATH; else exit 77. The relocation was proven
# on a machine with the system's Open MPI, PMIx and hwloc hidden (a private mount
# namespace): the launcher mapped only the unpacked tree's libraries and plugins, besides
# libc, libm and zlib. Prepare .deb/mpi with
#   (mkdir -p .deb/mpi && cd .deb/mpi && apt-get download openmpi-bin libopenmpi3 openmpi-common \
#      libevent-core-2.1-7 libevent-pthreads-2.1-7 libhwloc15 libpmix2 libmunge2 libudev1 libnl-3-200)
# (3.9 MB). --bind-to none with OMP_NUM_THREADS = cores / 2 a rank: Open MPI binds a rank to
# one core by default, which would run each rank's CPU emulator on one thread.
# Exit: 0 identical and both runs passed, 1 a difference or a failed case, 77 no GPU or no
# mpirun, 2 a run that did not complete.
set -u
[ $# -ge 2 ] || { echo "usage: tools/gpu_mpi.sh LOWP OUT [GPU CONFORM OPTIONS]" >&2; exit 2; }
LOWP=$1 OUT=$2
shift 2
[ $# -gt 0 ] || set -- --cases 20000
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MD=${LOWP_MPI_DEB_DIR:-$ROOT/.deb/mpi}
T=${TMPDIR:-/tmp}
rep=$OUT/mpi-h200.md
note() { echo "$*" | tee -a "$rep"; }
: > "$rep"

if ls "$MD"/*.deb > /dev/null 2>&1; then
  MP=$T/lowp-mpi
  rm -rf "$MP" && mkdir -p "$MP"
  for d in "$MD"/*.deb; do dpkg -x "$d" "$MP" || { echo "dpkg -x $d failed" >&2; exit 2; }; done
  ML=$(ls -d "$MP"/usr/lib/*-linux-gnu | head -1)
  MPIRUN=(env OPAL_PREFIX="$MP/usr" PMIX_INSTALL_PREFIX="$ML/pmix2" PMIX_MCA_mca_base_component_path="$ML/pmix2/lib/pmix"
    LD_LIBRARY_PATH="$ML:$MP/lib/$(basename "$ML"):$ML/pmix2/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    PATH="$MP/usr/bin:$PATH" "$MP/usr/bin/orterun")
  how="Debian's Open MPI from $(ls "$MD"/*.deb | wc -l) carried .deb files ($(du -sh "$MD" | cut -f1)), unpacked into \$TMPDIR/lowp-mpi"
elif command -v mpirun > /dev/null 2>&1; then
  MPIRUN=(mpirun)
  how="the system's $(command -v mpirun)"
else
  note "gpu_mpi.sh: no mpirun (no .deb files in $MD, none on PATH): skipped"
  exit 77
fi
MPIRUN+=(--allow-run-as-root --oversubscribe --bind-to none)
note "# lowp gpu conform, 1 process vs 2 MPI ranks (tools/gpu_mpi.sh)"
note ""
note "mpirun: $how; $("${MPIRUN[@]}" --version 2>&1 | head -1)"
# where the launcher's libraries came from (the carried tree, or the system's)
maps=$("${MPIRUN[@]}" -n 1 sh -c 'awk "{print \$6}" /proc/$PPID/maps | grep "^/" | sort -u' 2>&1)
note "launcher libraries: $(echo "$maps" | grep -c "^${MP:-/nonexistent}") from the unpacked tree; others: $(echo "$maps" |
  grep -v "^${MP:-/nonexistent}" | grep '\.so' | xargs -n1 basename 2>/dev/null | tr '\n' ' ')"

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
t0=$(now)
"$LOWP" gpu conform "$@" --result "$OUT/mpi-one.json" > "$OUT/mpi-one.txt" 2>&1
rc1=$?
t1=$(now)
if [ $rc1 = 77 ]; then note "no GPU (the unsharded run exited 77)"; exit 77; fi
"$LOWP" gpu conform --merge "$OUT/mpi-one.json" --report "$OUT/mpi-one.md" > /dev/null 2>&1
RUN=$T/lowp-mpi-run
rm -rf "$RUN"
t2=$(now)
OMP_NUM_THREADS=$(( $(nproc) / 2 > 0 ? $(nproc) / 2 : 1 )) "${MPIRUN[@]}" -x OMP_NUM_THREADS -n 2 \
  "$ROOT/tools/lowp_mpi.sh" "$RUN" "$LOWP" gpu conform "$@" -- --result "$OUT/mpi-two.json" \
  --report "$OUT/mpi-two.md" > "$OUT/mpi-two.txt" 2>&1
rc2=$?
t3=$(now)
same_json=no same_md=no
cmp -s "$OUT/mpi-one.json" "$OUT/mpi-two.json" && same_json=yes
cmp -s "$OUT/mpi-one.md" "$OUT/mpi-two.md" && same_md=yes
note ""
note "options: gpu conform $*"
note ""
note "| run | exit | wall s | summary |"
note "| --- | ---: | ---: | --- |"
note "| 1 process | $rc1 | $(secs "$t0" "$t1") | $(grep '^lowp gpu conform:' "$OUT/mpi-one.txt" | tail -1) |"
note "| mpirun -n 2 (lowp_mpi.sh, with the merge) | $rc2 | $(secs "$t2" "$t3") | $(grep '^lowp gpu conform --merge:' "$OUT/mpi-two.txt" | tail -1) |"
note ""
note "each rank's GPU: $(grep '^rank [0-9]*/[0-9]*: GPU' "$OUT/mpi-two.txt" | sort | tr '\n' ';')"
note "merged result = one run's (cmp): $same_json; merged report = one run's (cmp): $same_md"
[ $rc1 -le 1 ] && [ $rc2 -le 1 ] || exit 2
[ $same_json = yes ] && [ $same_md = yes ] && [ $rc1 = 0 ] && [ $rc2 = 0 ] && exit 0
exit 1
