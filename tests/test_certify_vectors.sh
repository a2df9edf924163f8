#!/bin/sh
# tests/test_certify_vectors.sh LOWP VECTORS: the golden decode vectors of `lowp certify`
# (vectors/certify/*/: the tensors, `args`, and `expect`: the exit status, then lines the
# report must contain), and its bad-input contract (exit 2, one line, nothing on stdout).
. "$(dirname "$0")/lib/cli_test.sh"
cli_test_start certify_vectors "$1"
vec=$(cd "$2" && pwd)
n=0
for d in "$vec"/*/; do
  case_name=$(basename "$d")
  [ -f "$d/args" ] || continue
  n=$((n + 1))
  want=$(head -n 1 "$d/expect")
  # shellcheck disable=SC2046 # args holds one argument per line, none with spaces
  (cd "$d" && "$lowp" certify $(cat args) >"$tmp/out" 2>"$tmp/err")
  got=$?
  if [ "$got" = "$want" ]; then ok; else bad "$case_name: exit $got, expected $want: $(cat "$tmp/err")"; fi
  tail -n +2 "$d/expect" | while IFS= read -r line; do
    grep -qF -e "$line" "$tmp/out" || echo "$line" >>"$tmp/missing"
  done
  if [ -s "$tmp/missing" ]; then bad "$case_name: report lacks: $(cat "$tmp/missing")"; rm -f "$tmp/missing"; else ok; fi
done
[ "$n" -ge 8 ] && ok || bad "only $n vector cases in $vec"

v=$vec/vllm-fp8.valid
cd "$v" || exit 1
base="--k-cache k.npy --v-cache v.npy --q q.npy --out out.npy --block-table block_table.npy --seq-lens seq_lens.npy"
# shellcheck disable=SC2086
{
  expect_error_naming "no scales" "k-scale and --v-scale are required" "$lowp" certify --layout vllm-fp8 $base
  expect_error_naming "bad layout" "unknown layout 'vllm'" "$lowp" certify --layout vllm --k-scale 1 --v-scale 1 $base
  expect_error_naming "zero scale" "k-scale" "$lowp" certify --layout vllm-fp8 --k-scale 0 --v-scale 1 $base
  expect_error_naming "two tables" "one page table" "$lowp" certify --layout vllm-fp8 --k-scale 1 --v-scale 1 $base \
    --indptr block_table.npy
  expect_error_naming "wrong q" "--q seq_lens.npy" "$lowp" certify --layout vllm-fp8 --k-scale 1 --v-scale 1 \
    --k-cache k.npy --v-cache v.npy --q seq_lens.npy --out out.npy --block-table block_table.npy --seq-lens seq_lens.npy
  expect_error_naming "sf on fp8" "has no block scales" "$lowp" certify --layout vllm-fp8 --k-scale 1 --v-scale 1 $base \
    --k-sf k.npy --v-sf v.npy
  expect_error_naming "bad dtype" "--p-dtype: unknown dtype" "$lowp" certify --layout vllm-fp8 --k-scale 1 --v-scale 1 \
    $base --p-dtype fp8
  expect_error_naming "seq past batch" "only_seq 5" "$lowp" certify --layout vllm-fp8 --k-scale 0.03 --v-scale 0.02 \
    $base --seq 5
}
# --seq reproduces one sequence
# shellcheck disable=SC2086
"$lowp" certify --layout vllm-fp8 --k-scale 0.03 --v-scale 0.02 $base --p-dtype f32 --out-dtype f32 --seq 1 >"$tmp/out"
if [ $? = 0 ] && grep -q "sequence 1 only" "$tmp/out" && grep -q "verdicts of 256 outputs" "$tmp/out"; then ok
else bad "--seq 1: $(cat "$tmp/out")"; fi
cli_test_end
