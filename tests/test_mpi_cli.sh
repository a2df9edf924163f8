#!/bin/sh
# tests/test_mpi_cli.sh LOWP: one shard per rank, rank 0 merges (tools/lowp_mpi.sh), and
# the GPU a rank takes (tools/gpu_rank.h), on the CPU.
#
# The device choice through `lowp rank --devices D` (no CUDA): local rank mod D from the
# first local-rank variable set, LOWP_GPU_DEVICE over it, nothing chosen without either
# or without a device; the shard --shard auto takes, from an MPI rank, a Slurm job array's
# task, or both (K = task * ranks + rank). The expected values are worked out by hand
# from those rules. Then tools/lowp_mpi.sh on `lowp conform --only decode` (and `lowp gpu
# conform --emulator-only` where built): as one process (shard 0/1), and as 2 ranks of a
# real `mpirun -n 2` when mpirun is on PATH: rank 0's merged result and report must be
# byte for byte those of one unsharded run. The wrapper's failures: a rank's shard that
# cannot run stops rank 0 with its status, a missing shard (a partial "*.tmp.*" beside it)
# ends rank 0's bounded wait with exit 2. Without mpirun the rest still runs, and the test
# exits 77 (skipped) if it all passed: the 2-rank launch, its point, was not made.
. "$(dirname "$0")/lib/cli_test.sh"
cli_test_start test_mpi_cli "$1"
wrap=$(cd "$(dirname "$0")/../tools" && pwd)/lowp_mpi.sh
# the launcher variables of the machine running the test must not leak into the cases
for v in OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_RANK PMI_RANK PMI_SIZE MPI_LOCALRANKID \
  SLURM_PROCID SLURM_NTASKS SLURM_LOCALID SLURM_ARRAY_TASK_ID SLURM_ARRAY_TASK_COUNT SLURM_ARRAY_TASK_MIN \
  SLURM_ARRAY_TASK_MAX LOWP_GPU_DEVICE; do
  unset "$v"
done

# rank_is NAME WANT ENV... -- ARGS: `env ENV lowp rank ARGS` prints WANT (exit 0)
rank_is() {
  name=$1 want=$2; shift 2
  envs=''
  while [ "$1" != "--" ]; do envs="$envs $1"; shift; done
  shift
  # shellcheck disable=SC2086 # the assignments are words
  got=$(env $envs "$lowp" rank "$@" 2> "$tmp/rank.err")
  rc=$?
  if [ $rc -eq 0 ] && [ "$got" = "$want" ]; then ok; else bad "$name: exit $rc, '$got', expected '$want' ($(cat "$tmp/rank.err"))"; fi
}
rank_is "no launcher" "shard=0/1" --
rank_is "no launcher, 2 GPUs: none chosen" "shard=0/1 device=-" -- --devices 2
rank_is "Open MPI local rank 3 of 2 GPUs" "shard=3/4 device=1" \
  OMPI_COMM_WORLD_RANK=3 OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_LOCAL_RANK=3 -- --devices 2
grep -q '^rank 3/4: GPU 1 of 2, from local rank 3 (OMPI_COMM_WORLD_LOCAL_RANK) mod 2$' "$tmp/rank.err" && ok ||
  bad "the choice line: '$(cat "$tmp/rank.err")'"
rank_is "2 ranks on 1 GPU share it" "shard=1/2 device=0" \
  OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=1 -- --devices 1
rank_is "the local rank, not the global one" "shard=5/8 device=1" \
  OMPI_COMM_WORLD_RANK=5 OMPI_COMM_WORLD_SIZE=8 OMPI_COMM_WORLD_LOCAL_RANK=1 -- --devices 4
rank_is "MPICH's MPI_LOCALRANKID" "shard=5/6 device=1" PMI_RANK=5 PMI_SIZE=6 MPI_LOCALRANKID=5 -- --devices 4
rank_is "srun's SLURM_LOCALID" "shard=2/3 device=0" SLURM_PROCID=2 SLURM_NTASKS=3 SLURM_LOCALID=2 -- --devices 2
rank_is "Open MPI's local rank before Slurm's" "shard=0/1 device=3" \
  OMPI_COMM_WORLD_LOCAL_RANK=3 SLURM_LOCALID=0 -- --devices 8
rank_is "LOWP_GPU_DEVICE over the local rank" "shard=1/2 device=1" \
  OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=0 LOWP_GPU_DEVICE=1 -- --devices 2
grep -q 'GPU 1 of 2, from LOWP_GPU_DEVICE$' "$tmp/rank.err" && ok || bad "the override's line: '$(cat "$tmp/rank.err")'"
rank_is "LOWP_GPU_DEVICE without a launcher" "shard=0/1 device=2" LOWP_GPU_DEVICE=2 -- --devices 3
rank_is "no device: nothing chosen" "shard=1/2 device=-" \
  OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=1 -- --devices 0
# a Slurm job array: task ID - MIN of COUNT, composed with the ranks of each task
rank_is "array task 5 of 4..7" "shard=1/4" SLURM_ARRAY_TASK_ID=5 SLURM_ARRAY_TASK_MIN=4 SLURM_ARRAY_TASK_MAX=7 \
  SLURM_ARRAY_TASK_COUNT=4 --
rank_is "array task 1 of 0..3, srun rank 1 of 2" "shard=3/8" SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_MIN=0 \
  SLURM_ARRAY_TASK_MAX=3 SLURM_ARRAY_TASK_COUNT=4 SLURM_PROCID=1 SLURM_NTASKS=2 --
rank_is "array task 2 of 0..2, mpirun rank 0 of 2" "shard=4/6" SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_MIN=0 \
  SLURM_ARRAY_TASK_MAX=2 SLURM_ARRAY_TASK_COUNT=3 OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 --

# refused: exit 2, one line
expect_error_naming "LOWP_GPU_DEVICE beyond the devices" 'LOWP_GPU_DEVICE=2' env LOWP_GPU_DEVICE=2 "$lowp" rank \
  --devices 2
expect_error_naming "LOWP_GPU_DEVICE not a number" 'LOWP_GPU_DEVICE' env LOWP_GPU_DEVICE=one "$lowp" rank --devices 2
expect_error_naming "a local rank not a number" 'SLURM_LOCALID' env SLURM_LOCALID=-1 "$lowp" rank --devices 2
expect_error_naming "an array with a step" 'give --shard K/N' env SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_MIN=0 \
  SLURM_ARRAY_TASK_MAX=4 SLURM_ARRAY_TASK_COUNT=3 "$lowp" rank
expect_error_naming "an array task without its count" 'SLURM_ARRAY_TASK_COUNT' env SLURM_ARRAY_TASK_ID=2 "$lowp" rank
expect_error_naming "an array task beyond its array" 'SLURM_ARRAY_TASK_ID' env SLURM_ARRAY_TASK_ID=9 \
  SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=3 SLURM_ARRAY_TASK_COUNT=4 "$lowp" rank
# the device is looked for before any output opens: without a GPU (exit 77) gpu conform and
# gpu bench leave no file, not even a temporary one (where built with CUDA on a machine
# without a GPU; elsewhere they exit 0 or 2 and this says nothing)
"$lowp" gpu conform --cases 1 --report "$tmp/nogpu.md" > /dev/null 2>&1
[ $? -eq 77 ] && { ls "$tmp"/nogpu.md* > /dev/null 2>&1 && bad "gpu conform without a GPU left $(ls "$tmp"/nogpu.md*)" || ok; }
"$lowp" gpu bench --csv "$tmp/nogpu.csv" > /dev/null 2>&1
[ $? -eq 77 ] && { ls "$tmp"/nogpu.csv* > /dev/null 2>&1 && bad "gpu bench without a GPU left $(ls "$tmp"/nogpu.csv*)" || ok; }
# --shard auto reads the array too: the same file as --shard 1/4
# decode and (where built) CUDA's host functions: 31 case sets, a second or two
C="conform --only decode,cuda-host"
"$lowp" $C --shard 1/4 --result "$tmp/c14.json" > /dev/null 2>&1
SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=3 SLURM_ARRAY_TASK_COUNT=4 \
  "$lowp" $C --shard auto --result "$tmp/cauto.json" > /dev/null 2>&1
if cmp -s "$tmp/c14.json" "$tmp/cauto.json"; then ok; else bad "--shard auto in array task 1 of 4 is not --shard 1/4"; fi

# ---- tools/lowp_mpi.sh -------------------------------------------------------------------
# the reference: one unsharded run's result, and the report its merge writes (the run's own
# report has its seconds; --merge's has none, from shards or from one run)
"$lowp" $C --no-report --result "$tmp/one.json" > "$tmp/one.out" 2>&1
want=$?
"$lowp" conform --merge "$tmp/one.json" --report "$tmp/one.md" > /dev/null 2>&1
# check_merged NAME DIR: DIR/m.json and DIR/m.md are the reference's
check_merged() {
  if cmp -s "$tmp/one.json" "$2/m.json"; then ok; else bad "$1: merged result differs from one run's"; fi
  if cmp -s "$tmp/one.md" "$2/m.md"; then ok; else bad "$1: merged report differs from one run's"; fi
}
"$wrap" "$tmp/w1" "$lowp" $C -- --result "$tmp/w1/m.json" --report "$tmp/w1/m.md" > "$tmp/w1.out" 2>&1
rc=$?
[ $rc -eq $want ] && [ -f "$tmp/w1/shard-0-of-1.json" ] && ok || bad "lowp_mpi.sh alone: exit $rc, expected $want"
check_merged "lowp_mpi.sh alone (shard 0/1)" "$tmp/w1"

if command -v mpirun > /dev/null 2>&1; then
  # Open MPI: root in a container is refused without these, and --oversubscribe lets 2
  # ranks run on fewer cores; another MPI (MPICH's Hydra) takes neither
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
  over=''
  mpirun --version 2>&1 | grep -q 'Open MPI\|OpenRTE' && over=--oversubscribe
  mpirun $over -n 2 "$wrap" "$tmp/w2" "$lowp" $C -- --result "$tmp/w2/m.json" --report "$tmp/w2/m.md" \
    > "$tmp/w2.out" 2>&1
  rc=$?
  [ $rc -eq $want ] && [ -f "$tmp/w2/shard-1-of-2.json" ] && ok ||
    bad "mpirun -n 2 lowp_mpi.sh: exit $rc, expected $want ($(tail -n 3 "$tmp/w2.out" | tr '\n' ' '))"
  check_merged "mpirun -n 2 lowp_mpi.sh conform" "$tmp/w2"
  # rank 1 did run units (case set 1 is its) where there are two or more
  if grep -q '"unit": 1,' "$tmp/one.json"; then
    grep -q '"unit": 1,' "$tmp/w2/shard-1-of-2.json" && ok || bad "mpirun -n 2: rank 1's result lacks unit 1"
  fi
  G="gpu conform --emulator-only --cases 40 --broad 12 --long 1 --max-ctx 300 --formats bf16,nvfp4"
  if "$lowp" $G --result "$tmp/g.json" > /dev/null 2>&1; then
    "$lowp" gpu conform --merge "$tmp/g.json" --report "$tmp/g.md" > /dev/null 2>&1
    mpirun $over -n 2 "$wrap" "$tmp/g2" "$lowp" $G -- --result "$tmp/g2/m.json" --report "$tmp/g2/m.md" \
      > "$tmp/g2.out" 2>&1 && ok || bad "mpirun -n 2 lowp_mpi.sh gpu conform: $(tail -n 3 "$tmp/g2.out" | tr '\n' ' ')"
    cmp -s "$tmp/g.json" "$tmp/g2/m.json" && ok || bad "mpirun -n 2 gpu conform: merged result differs from one run's"
    cmp -s "$tmp/g.md" "$tmp/g2/m.md" && ok || bad "mpirun -n 2 gpu conform: merged report differs from one run's"
  else
    echo "test_mpi_cli: gpu conform not built (no CUDA): not run under mpirun"
  fi
else
  no_mpirun=1
fi

# the wrapper's failures, with the ranks started by hand (the environment an MPI launcher gives)
OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 "$wrap" "$tmp/f" "$lowp" conform --no-such-option \
  > "$tmp/f1.out" 2>&1
rc=$?
[ $rc -eq 2 ] && [ "$(cat "$tmp/f/shard-1-of-2.failed" 2>/dev/null)" = 2 ] && ok ||
  bad "a rank whose shard cannot run: exit $rc, .failed '$(cat "$tmp/f/shard-1-of-2.failed" 2>/dev/null)'"
OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 "$wrap" --timeout 60 "$tmp/f" "$lowp" $C -- --result "$tmp/f/m.json" \
  > "$tmp/f0.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q 'shard 1/2 failed (exit 2)' "$tmp/f0.out" && [ ! -e "$tmp/f/m.json" ] && ok ||
  bad "rank 0 beside a failed shard: exit $rc ($(tail -n 2 "$tmp/f0.out" | tr '\n' ' '))"
# a partial result (lowp's temporary name) is never taken for the shard: the wait ends
mkdir "$tmp/t"
echo '{' > "$tmp/t/shard-1-of-2.json.tmp.4242"
OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 "$wrap" --timeout 1 "$tmp/t" "$lowp" $C -- --result "$tmp/t/m.json" \
  > "$tmp/t0.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "waited 1 s for '.*shard-1-of-2.json'" "$tmp/t0.out" && [ ! -e "$tmp/t/m.json" ] && ok ||
  bad "rank 0 without shard 1: exit $rc ($(tail -n 2 "$tmp/t0.out" | tr '\n' ' '))"
"$wrap" "$tmp/u" "$lowp" $C --shard 0/2 > "$tmp/u.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q -- "--shard is the script's" "$tmp/u.out" && ok || bad "a --shard of one's own: exit $rc"
if [ -n "${no_mpirun-}" ] && [ "$fail" -eq 0 ]; then
  # the rest passed, but the point of the test, a real 2-rank launch, was not run: a skip
  echo "test_mpi_cli: $pass passed, 0 failed; mpirun not found: the 2-rank runs are skipped (exit 77)"
  exit 77
fi
cli_test_end
