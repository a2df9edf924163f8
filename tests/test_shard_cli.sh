#!/bin/sh
# tests/test_shard_cli.sh LOWP: sharded runs and their merge (tools/shard.h), on the CPU
# parts of `lowp conform`, `lowp attn-sweep` and `lowp gpu conform` (its emulator, where
# lowp was built with the GPU code), on `lowp select-sweep` and on `lowp certify` (the
# golden vectors of vectors/certify, and a batch of two equal sequences whose worst
# elements tie across shards).
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

# ---- select-sweep: qsa and dsa (16 heads) on the needle at 1024 tokens (dense: skipped)
# and 2560 (4 cases); its table has no times, so a merge prints what the run printed
W="select-sweep --quick --contexts 1024,2560 --selectors qsa,dsa --workloads needle --q-len 1"
run_rc w_one 0 "$lowp" $W --result "$tmp/w.json" --csv "$tmp/w_run.csv"
for n in 2 3; do
  k=0
  while [ $k -lt $n ]; do
    run_rc "w_${k}_$n" 0 "$lowp" $W --shard "$k/$n" --result "$tmp/w$k-$n.json"
    k=$((k + 1))
  done
done
SLURM_PROCID=1 SLURM_NTASKS=2 run_rc w_auto 0 env -u OMPI_COMM_WORLD_RANK -u PMI_RANK "$lowp" $W --shard auto \
  --result "$tmp/wauto.json"
same "select-sweep: --shard auto (Slurm task 1 of 2) is --shard 1/2" "$tmp/wauto.json" "$tmp/w1-2.json"
run_rc w_m2 0 "$lowp" select-sweep --merge "$tmp/w1-2.json" "$tmp/w0-2.json" --result "$tmp/wm2.json" --csv "$tmp/wm2.csv"
run_rc w_m3 0 "$lowp" select-sweep --merge "$tmp/w2-3.json" "$tmp/w0-3.json" "$tmp/w1-3.json" --result "$tmp/wm3.json" \
  --csv "$tmp/wm3.csv"
run_rc w_m1 0 "$lowp" select-sweep --merge "$tmp/w.json" --csv "$tmp/wm1.csv"
same "select-sweep: 2 shards merged = one run's result" "$tmp/w.json" "$tmp/wm2.json"
same "select-sweep: 3 shards merged = one run's result" "$tmp/w.json" "$tmp/wm3.json"
same "select-sweep: merged CSV of 2 shards = of one run" "$tmp/wm1.csv" "$tmp/wm2.csv"
same "select-sweep: merged CSV of 3 shards = of one run" "$tmp/wm1.csv" "$tmp/wm3.csv"
same "select-sweep: the table merged from 2 shards = the run's" "$tmp/w_one.out" "$tmp/w_m2.out"
same "select-sweep: the table merged from 3 shards = the run's" "$tmp/w_one.out" "$tmp/w_m3.out"
# every CSV column of the run but the seconds (the 17th) survives the merge
cut -d, -f1-16,18- "$tmp/w_run.csv" > "$tmp/w_run.cut"
cut -d, -f1-16,18- "$tmp/wm1.csv" > "$tmp/wm1.cut"
same "select-sweep: the run's CSV but its times = the merged CSV" "$tmp/w_run.cut" "$tmp/wm1.cut"
[ "$(wc -l < "$tmp/wm3.csv")" -eq 8 ] && grep -q '^# dsa at 1024 tokens: .*(dense); skipped' "$tmp/w_m3.out" && ok ||
  bad "select-sweep: the merge lacks rows or the dense line: $(wc -l < "$tmp/wm3.csv") CSV lines"

# ---- certify: per vector, one run; its sequences as 2 and 3 shards (3 > the batch of 2:
# one shard holds none); the merges must print the run's certificate and exit as it does -------
vec=$(cd "$(dirname "$0")/../vectors/certify" && pwd)
# npy_twin IN OUT: IN's array of leading dimension 2 with its second half a copy of the first
npy_twin() {
  h=$(od -An -tu1 -j8 -N2 "$1" | awk '{print 10 + $1 + 256 * $2}')
  half=$((($(wc -c < "$1") - h) / 2))
  { head -c "$h" "$1"; tail -c +"$((h + 1))" "$1" | head -c "$half"; tail -c +"$((h + 1))" "$1" | head -c "$half"; } > "$2"
}
# twin: vllm-fp8.ignored-v-scale with sequence 1 = sequence 0 (pages, length, queries,
# output): every worst element ties with its twin, which one run lists after it
mkdir "$tmp/twin"
for f in k v; do cp "$vec/vllm-fp8.ignored-v-scale/$f.npy" "$tmp/twin/"; done
for f in q out block_table seq_lens; do npy_twin "$vec/vllm-fp8.ignored-v-scale/$f.npy" "$tmp/twin/$f.npy"; done
{ cat "$vec/vllm-fp8.ignored-v-scale/args"; printf -- '--worst\n5\n'; } > "$tmp/twin/args"
# sglang-nvfp4-extend.causal-off-by-one: an extend batch (--qo-indptr; a unit is a sequence
# with its query rows), its worst elements' q_pos / q_row and the causal diagnosis
for v in vllm-fp8.ignored-v-scale trtllm.nan-output sglang-nvfp4.v-scales-linear flashinfer-fp8-hnd.valid \
  sglang-nvfp4-extend.causal-off-by-one twin; do
  d=$vec/$v
  [ "$v" = twin ] && d=$tmp/twin
  # shellcheck disable=SC2046 # args holds one argument per line, none with spaces
  (cd "$d" && "$lowp" certify $(cat args) > "$tmp/$v.one" 2>&1)
  want=$?
  [ "$want" -le 1 ] && ok || bad "certify $v: exit $want ($(tail -n 2 "$tmp/$v.one"))"
  for n in 2 3; do
    k=0
    while [ $k -lt $n ]; do
      # shellcheck disable=SC2046
      (cd "$d" && "$lowp" certify $(cat args) --shard "$k/$n" --result "$tmp/$v.$k-$n.json" > /dev/null 2>&1)
      [ $? -le 1 ] && [ -s "$tmp/$v.$k-$n.json" ] && ok || bad "certify $v: shard $k/$n did not run"
      k=$((k + 1))
    done
  done
  run_rc "$v.m2" "$want" "$lowp" certify --merge "$tmp/$v.1-2.json" "$tmp/$v.0-2.json" --result "$tmp/$v.m2.json"
  run_rc "$v.m3" "$want" "$lowp" certify --merge "$tmp/$v.2-3.json" "$tmp/$v.1-3.json" "$tmp/$v.0-3.json" \
    --result "$tmp/$v.m3.json"
  same "certify $v: the certificate merged from 2 shards = the run's" "$tmp/$v.one" "$tmp/$v.m2.out"
  same "certify $v: the certificate merged from 3 shards = the run's" "$tmp/$v.one" "$tmp/$v.m3.out"
  same "certify $v: 2 and 3 shards merge to one result" "$tmp/$v.m2.json" "$tmp/$v.m3.json"
done
# shellcheck disable=SC2046
(cd "$tmp/twin" && PMI_RANK=1 PMI_SIZE=2 env -u OMPI_COMM_WORLD_RANK "$lowp" certify $(cat args) --shard auto \
  --result "$tmp/twin.auto.json" > /dev/null 2>&1)
same "certify: --shard auto (PMI rank 1 of 2) is --shard 1/2" "$tmp/twin.auto.json" "$tmp/twin.1-2.json"
# shellcheck disable=SC2046
(cd "$tmp/twin" && "$lowp" certify $(cat args) --result "$tmp/twin.r1.json" > "$tmp/twin.r1.out" 2>&1)
same "certify: a run with --result prints the run's certificate" "$tmp/twin.one" "$tmp/twin.r1.out"
same "certify: one run's result = the merged one" "$tmp/twin.r1.json" "$tmp/twin.m2.json"
# the ties: sequence 0's element, then its twin in sequence 1, each in its own shard of 2
sed -n 's/^\([01]\) .* outside$/\1/p' "$tmp/twin.m2.out" | tr -d '\n' > "$tmp/twin.order"
[ "$(cat "$tmp/twin.order")" = 01010 ] && ok || bad "certify: tied worst elements in the order '$(cat "$tmp/twin.order")'"
grep -q '^# diagnosis: the kernel looks to ignore v_scale' "$tmp/twin.m3.out" && ok ||
  bad "certify: the diagnosis did not survive the merge"
x=sglang-nvfp4-extend.causal-off-by-one
grep -q '^batch .* q_pos  q_row ' "$tmp/$x.m2.out" && grep -q '^# diagnosis: causal mask off by one' "$tmp/$x.m2.out" &&
  [ "$(grep -c ' outside$' "$tmp/$x.m2.out")" -eq 8 ] && ok ||
  bad "certify $x: the merge lacks the extend columns, the worst elements or the causal diagnosis"

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
"$lowp" $W --seed 7 --shard 1/2 --result "$tmp/wother1.json" > /dev/null 2>&1
expect_error "select-sweep: merge of shards of two runs" "$lowp" select-sweep --merge "$tmp/w0-2.json" \
  "$tmp/wother1.json" --csv "$tmp/bad_out.csv" --result "$tmp/bad_out.json"
expect_error "select-sweep: merge with a shard missing" "$lowp" select-sweep --merge "$tmp/w0-3.json" "$tmp/w2-3.json" \
  --csv "$tmp/bad_out.csv"
expect_error "select-sweep: merge with a shard twice" "$lowp" select-sweep --merge "$tmp/w1-2.json" "$tmp/w1-2.json" \
  --csv "$tmp/bad_out.csv"
expect_error "select-sweep: merge of certify's result" "$lowp" select-sweep --merge "$tmp/twin.m2.json" \
  --csv "$tmp/bad_out.csv"
expect_error "select-sweep: merge with case options" "$lowp" select-sweep --merge "$tmp/w.json" --q-len 2
expect_error "select-sweep: a shard without --result" "$lowp" $W --shard 0/2
expect_error "select-sweep: a shard with a CSV" "$lowp" $W --shard 0/2 --result "$tmp/bad_out.json" \
  --csv "$tmp/bad_out.csv"
expect_error "certify: merge with a shard missing" "$lowp" certify --merge "$tmp/twin.0-3.json" "$tmp/twin.1-3.json" \
  --result "$tmp/bad_out.json"
expect_error "certify: merge of shards of two runs" "$lowp" certify --merge "$tmp/twin.0-2.json" \
  "$tmp/vllm-fp8.ignored-v-scale.1-2.json" --result "$tmp/bad_out.json"
expect_error "certify: merge of select-sweep's result" "$lowp" certify --merge "$tmp/w.json"
expect_error "certify: merge with case options" "$lowp" certify --merge "$tmp/twin.m2.json" --worst 3
# shellcheck disable=SC2046
{
  expect_error "certify: a shard without --result" sh -c 'cd "$1" && shift && exec "$@"' - "$tmp/twin" "$lowp" certify \
    $(cat "$tmp/twin/args") --shard 0/2
  expect_error "certify: --result naming an input" sh -c 'cd "$1" && shift && exec "$@"' - "$tmp/twin" "$lowp" certify \
    $(cat "$tmp/twin/args") --shard 0/2 --result "$tmp/twin/out.npy"
  expect_error "certify: --seq with --shard" sh -c 'cd "$1" && shift && exec "$@"' - "$tmp/twin" "$lowp" certify \
    $(cat "$tmp/twin/args") --seq 1 --shard 0/2 --result "$tmp/bad_out.json"
  expect_error_naming "certify: --kv-write with --shard" 'kv-write: one run' sh -c 'cd "$1" && shift && exec "$@"' - \
    "$vec/vllm-fp8-kv-write.valid" "$lowp" certify $(cat "$vec/vllm-fp8-kv-write.valid/args") --shard 0/2 \
    --result "$tmp/bad_out.json"
}
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
