#!/bin/sh
# tests/test_shard_cli.sh LOWP: sharded runs and their merge (tools/shard.h), on the CPU
# parts of `lowp conform`, `lowp attn-sweep` and `lowp gpu conform` (its emulator, where
# lowp was built with the GPU code).
#
# For each command: one unsharded run with --result, the same run as 2 and 3 shards
# (--shard K/N, and --shard auto from an MPI rank in the environment), merged in a
# shuffled order: the merged result must equal the unsharded one byte for byte (cmp), and
# the report / CSV / Markdown that --merge writes from the shards must equal what it writes
# from the unsharded result. conform runs with stand-ins for its helpers (a failing
# ml_dtypes comparison, a GPU check that writes a report), so that failure lines and the
# GPU check's report travel through the merge too. Bad input: a missing, repeated or
# foreign shard, K >= N, N = 0, auto without a rank: exit 2, one line, no output file.
. "$(dirname "$0")/lib/cli_test.sh"
cli_test_start test_shard_cli "$1"

mkdir "$tmp/bin"
cat > "$tmp/bin/py" <<'EOF'
#!/bin/sh
echo "e4m3 ml_dtypes rn: input 0x7fc00000 (nan) got 0xff expected 0x7f"
echo "interop_mldtypes: 30 passed, 1 failed"
exit 1
EOF
cat > "$tmp/bin/cvt" <<'EOF'
#!/bin/sh
printf '# stand-in GPU cvt report\n\nno GPU here\n' > "$1"
echo "lowp_gpu_cvt_check: skipped (exit 77): no GPU"
exit 77
EOF
chmod +x "$tmp/bin/py" "$tmp/bin/cvt"
LOWP_PYTHON="$tmp/bin/py"
LOWP_GPU_CVT_CHECK="$tmp/bin/cvt"
export LOWP_PYTHON LOWP_GPU_CVT_CHECK

# run_rc NAME WANT_RC CMD...: stdout and stderr in $tmp/NAME.out
run_rc() {
  name=$1 want=$2; shift 2
  "$@" > "$tmp/$name.out" 2>&1
  rc=$?
  if [ "$rc" -eq "$want" ]; then ok; else bad "$name: exit $rc, expected $want ($(tail -n 3 "$tmp/$name.out" | tr '\n' ' '))"; fi
}
# run_01 NAME CMD...: the command must run (exit 0: all passed, or 1: a mismatch); $rc kept
run_01() {
  name=$1; shift
  "$@" > "$tmp/$name.out" 2>&1
  rc=$?
  if [ "$rc" -le 1 ]; then ok; else bad "$name: exit $rc ($(tail -n 3 "$tmp/$name.out" | tr '\n' ' '))"; fi
}
same() { if cmp -s "$2" "$3"; then ok; else bad "$1: $(cmp "$2" "$3" 2>&1)"; fi; }

# ---- conform: decode, cuda-host (one skip, or its ~30 case sets where built), ml_dtypes
# (a stand-in mismatch where the helper and liblowp.so are built, else a skip), gpu -------
C="conform --only decode,cuda-host,ml_dtypes,gpu"
run_01 c_one "$lowp" $C --result "$tmp/c.json" --report "$tmp/c_run.md"
want=$rc # the merges exit as the run does
for n in 2 3; do
  k=0
  while [ $k -lt $n ]; do
    run_01 "c_${k}_$n" "$lowp" $C --shard "$k/$n" --result "$tmp/c$k-$n.json"
    k=$((k + 1))
  done
done
# the MPI way: the rank from the launcher's environment
OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 run_01 c_auto "$lowp" $C --shard auto --result "$tmp/cauto.json"
same "conform: --shard auto (rank 1 of 2) is --shard 1/2" "$tmp/cauto.json" "$tmp/c1-2.json"
run_rc c_m2 $want "$lowp" conform --merge "$tmp/c1-2.json" "$tmp/c0-2.json" --result "$tmp/cm2.json" \
  --report "$tmp/cm2.md"
run_rc c_m3 $want "$lowp" conform --merge "$tmp/c2-3.json" "$tmp/c0-3.json" "$tmp/c1-3.json" --result "$tmp/cm3.json" \
  --report "$tmp/cm3.md"
run_rc c_m1 $want "$lowp" conform --merge "$tmp/c.json" --result "$tmp/cm1.json" --report "$tmp/cm1.md"
same "conform: 2 shards merged = one run's result" "$tmp/c.json" "$tmp/cm2.json"
same "conform: 3 shards merged = one run's result" "$tmp/c.json" "$tmp/cm3.json"
same "conform: a merge of one run's result is that result" "$tmp/c.json" "$tmp/cm1.json"
same "conform: the merged report of 2 shards = that of one run" "$tmp/cm1.md" "$tmp/cm2.md"
same "conform: the merged report of 3 shards = that of one run" "$tmp/cm1.md" "$tmp/cm3.md"
if grep -q 'got 0xff expected 0x7f' "$tmp/c_run.md"; then
  grep -q 'got 0xff expected 0x7f' "$tmp/cm2.md" && ok || bad "conform: the failure line did not survive the merge"
fi
grep -q '^# stand-in GPU cvt report' "$tmp/cm2.md" && ok || bad "conform: the GPU check's report did not survive"
# the run's own report has the same table rows as the merged one but for the seconds
sed -n 's/^| \([^|]*\) | \([^|]*\) | \([^|]*\) | \([^|]*\) | \([^|]*\) | [^|]* |/\1 \2 \3 \4 \5/p' "$tmp/c_run.md" > "$tmp/rows_run"
sed -n 's/^| \([^|]*\) | \([^|]*\) | \([^|]*\) | \([^|]*\) | \([^|]*\) | [^|]* |/\1 \2 \3 \4 \5/p' "$tmp/cm1.md" > "$tmp/rows_merged"
[ "$(wc -l < "$tmp/rows_run")" -ge 5 ] && same "conform: run and merged report rows" "$tmp/rows_run" "$tmp/rows_merged" ||
  bad "conform: no table rows in the report"

# ---- attn-sweep: 2 sizes x 3 workloads --------------------------------------------------
S="attn-sweep --size 64:2:4:2 --size 96:1:4:1 --workloads gaussian,needle,small --dim 32 --oracle-ctx 64"
run_rc s_one 0 "$lowp" $S --result "$tmp/s.json" --csv "$tmp/s_run.csv" --md "$tmp/s_run.md"
for k in 0 1; do
  run_rc "s_$k" 0 "$lowp" $S --shard "$k/2" --result "$tmp/s$k.json"
done
run_rc s_m2 0 "$lowp" attn-sweep --merge "$tmp/s1.json" "$tmp/s0.json" --result "$tmp/sm2.json" --csv "$tmp/sm2.csv" \
  --md "$tmp/sm2.md"
run_rc s_m1 0 "$lowp" attn-sweep --merge "$tmp/s.json" --csv "$tmp/sm1.csv" --md "$tmp/sm1.md"
same "attn-sweep: 2 shards merged = one run's result" "$tmp/s.json" "$tmp/sm2.json"
same "attn-sweep: merged CSV of shards = of one run" "$tmp/sm1.csv" "$tmp/sm2.csv"
same "attn-sweep: merged Markdown of shards = of one run" "$tmp/sm1.md" "$tmp/sm2.md"
# every column of the run's own CSV but the last (seconds) survives the merge
sed 's/,[^,]*$//' "$tmp/s_run.csv" > "$tmp/s_run.cut"
sed 's/,[^,]*$//' "$tmp/sm1.csv" > "$tmp/sm1.cut"
same "attn-sweep: the run's CSV but its times = the merged CSV" "$tmp/s_run.cut" "$tmp/sm1.cut"

# ---- gpu conform (its CPU emulator; only where lowp was built with the GPU code) ----------
G="gpu conform --emulator-only --cases 40 --broad 12 --long 1 --max-ctx 300 --formats bf16,nvfp4"
"$lowp" $G --cases 1 --result "$tmp/g_probe.json" > "$tmp/g_probe.out" 2>&1
if [ $? -eq 2 ] && grep -q 'built without CUDA' "$tmp/g_probe.out"; then
  echo "test_shard_cli: gpu conform not built (no CUDA): its shards are not checked here"
else
  run_rc g_one 0 "$lowp" $G --result "$tmp/g.json" --report "$tmp/g_run.md"
  for k in 0 1 2; do
    run_rc "g_$k" 0 "$lowp" $G --shard "$k/3" --result "$tmp/g$k.json"
  done
  run_rc g_m3 0 "$lowp" gpu conform --merge "$tmp/g2.json" "$tmp/g0.json" "$tmp/g1.json" --result "$tmp/gm3.json" \
    --report "$tmp/gm3.md"
  run_rc g_m1 0 "$lowp" gpu conform --merge "$tmp/g.json" --report "$tmp/gm1.md"
  same "gpu conform: 3 shards merged = one run's result" "$tmp/g.json" "$tmp/gm3.json"
  same "gpu conform: the merged report of 3 shards = that of one run" "$tmp/gm1.md" "$tmp/gm3.md"
  grep -q '^| nvfp4 | 40 |' "$tmp/gm3.md" && ok || bad "gpu conform: merged report lacks the nvfp4 row of 40 cases"
fi

# ---- bad input ----------------------------------------------------------------------------
cli_no_output=bad_out
expect_error "merge with a shard missing" "$lowp" conform --merge "$tmp/c0-3.json" "$tmp/c1-3.json" --no-report \
  --result "$tmp/bad_out.json"
expect_error "merge with a shard twice" "$lowp" conform --merge "$tmp/c0-2.json" "$tmp/c0-2.json" --no-report \
  --result "$tmp/bad_out.json"
expect_error "merge of shards of different N" "$lowp" conform --merge "$tmp/c0-2.json" "$tmp/c1-3.json" --no-report \
  --result "$tmp/bad_out.json"
expect_error "merge of another command's result" "$lowp" conform --merge "$tmp/s.json" --no-report \
  --result "$tmp/bad_out.json"
"$lowp" attn-sweep --size 64:2:4:2 --workloads gaussian --dim 32 --oracle-ctx 0 --shard 1/2 --result "$tmp/other1.json" \
  > /dev/null 2>&1
expect_error "merge of shards of two runs" "$lowp" attn-sweep --merge "$tmp/s0.json" "$tmp/other1.json" \
  --result "$tmp/bad_out.json" --csv "$tmp/bad_out.csv" --md "$tmp/bad_out.md"
expect_error "merge of a file that is not JSON" "$lowp" conform --merge "$tmp/c_run.md" --no-report
expect_error "merge with case options" "$lowp" conform --merge "$tmp/c.json" --seed 3 --no-report
expect_error_naming "--shard K >= N" '--shard' "$lowp" $C --shard 2/2 --result "$tmp/bad_out.json"
expect_error_naming "--shard N = 0" '--shard' "$lowp" $C --shard 0/0 --result "$tmp/bad_out.json"
expect_error_naming "--shard not K/N" '--shard' "$lowp" $C --shard 1 --result "$tmp/bad_out.json"
expect_error_naming "--shard negative" '--shard' "$lowp" $C --shard -1/2 --result "$tmp/bad_out.json"
expect_error "a shard without --result" "$lowp" $C --shard 0/2
expect_error "a shard with a report" "$lowp" $C --shard 0/2 --result "$tmp/bad_out.json" --report "$tmp/bad_out.md"
env -u OMPI_COMM_WORLD_RANK -u PMI_RANK -u SLURM_PROCID "$lowp" $C --shard auto --result "$tmp/bad_out.json" \
  > "$tmp/stdout" 2> "$tmp/err"
[ $? -eq 2 ] && grep -q 'no MPI rank' "$tmp/err" && [ ! -e "$tmp/bad_out.json" ] && ok ||
  bad "--shard auto without a rank: $(cat "$tmp/err")"
cli_test_end
