#!/bin/sh
# tests/test_certify_vectors.sh LOWP VECTORS: the golden vectors of `lowp certify` (decode,
# extend --qo-indptr, quantize-on-write --kv-write; vectors/certify/*/: the tensors, `args`,
# and `expect`: the exit status, then lines the report must contain), and its bad-input
# contract (exit 2, one line, nothing on stdout).
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
[ "$n" -ge 16 ] && ok || bad "only $n vector cases in $vec"

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
# extend: the query layout's bad input (indptr arrays written here from the valid case's)
x=$vec/vllm-fp8-extend.valid
xa="--layout vllm-fp8 --k-scale 0.03 --v-scale 0.02 --k-cache $x/k.npy --v-cache $x/v.npy --block-table \
$x/block_table.npy --seq-lens $x/seq_lens.npy --q $x/q.npy --out $x/out.npy"
# FILE VALUES...: an int32 .npy (tests/lib/npy.pl: no numpy needed)
mk_i32() { perl -I"$cli_test_lib" -e 'require "npy.pl"; my ($f, @v) = @ARGV; npy_write($f, "<i4", "l<", [scalar @v], @v)' "$@"; }
mk_i32 "$tmp/qo_dec.npy" 0 16 15 20
mk_i32 "$tmp/qo_long.npy" 0 17 19 20
mk_i32 "$tmp/qo_total.npy" 0 16 19 21
mk_i32 "$tmp/qo_short.npy" 0 16 20
mk_i32 "$tmp/slots_past.npy" 0 1 2 64
perl -I"$cli_test_lib" "$cli_test_lib/gen_npy.pl" "$tmp/k4.npy" 4,2,64 1 1.0
# shellcheck disable=SC2086
{
  expect_error_naming "qo decreasing" "qo_indptr decreases at 2" "$lowp" certify $xa --qo-indptr "$tmp/qo_dec.npy"
  expect_error_naming "chunk > sequence" "sequence 0 has 17 queries but holds 16 tokens" "$lowp" certify $xa \
    --qo-indptr "$tmp/qo_long.npy"
  expect_error_naming "total_q mismatch" "expected .total_q 21, num_q_heads" "$lowp" certify $xa --qo-indptr "$tmp/qo_total.npy"
  expect_error_naming "qo length" "--qo-indptr: 3 entries, expected batch + 1 = 4" "$lowp" certify $xa \
    --qo-indptr "$tmp/qo_short.npy"
}
# quantize-on-write: its bad input
w=$vec/vllm-fp8-kv-write.valid
wa="--kv-write --layout vllm-fp8 --k-scale 0.03 --v-scale 0.02 --k-cache $w/k.npy --v-cache $w/v.npy"
# shellcheck disable=SC2086
{
  expect_error_naming "kv-write inputs" "--slot-mapping, --k-in and --v-in are required" "$lowp" certify $wa
  expect_error_naming "kv-write + q" "belong to the attention check" "$lowp" certify $wa --slot-mapping \
    "$w/slot_mapping.npy" --k-in "$w/k_in.npy" --v-in "$w/v_in.npy" --q "$w/k_in.npy"
  expect_error_naming "slot dtype" "--slot-mapping $w/k_in.npy: expected int64 or int32" "$lowp" certify $wa \
    --slot-mapping "$w/k_in.npy" --k-in "$w/k_in.npy" --v-in "$w/v_in.npy"
  expect_error_naming "k-in shape" "--k-in: shape" "$lowp" certify $wa --slot-mapping "$w/slot_mapping.npy" \
    --k-in "$tmp/k4.npy" --v-in "$w/v_in.npy"
  expect_error_naming "slot past pool" "past the pool" "$lowp" certify $wa --slot-mapping "$tmp/slots_past.npy" \
    --k-in "$tmp/k4.npy" --v-in "$tmp/k4.npy"
  expect_error_naming "bad recipe" "--recipe: unknown recipe 'vllm'" "$lowp" certify $wa --slot-mapping \
    "$w/slot_mapping.npy" --k-in "$w/k_in.npy" --v-in "$w/v_in.npy" --recipe vllm
  expect_error_naming "kv-write + arith" "and the declared arithmetic" "$lowp" certify $wa --slot-mapping \
    "$w/slot_mapping.npy" --k-in "$w/k_in.npy" --v-in "$w/v_in.npy" --p-dtype f32
  expect_error_naming "recipe w/o kv-write" "belong to --kv-write" "$lowp" certify --recipe exact
}
# --seq reproduces one sequence
# shellcheck disable=SC2086
"$lowp" certify --layout vllm-fp8 --k-scale 0.03 --v-scale 0.02 $base --p-dtype f32 --out-dtype f32 --seq 1 >"$tmp/out"
if [ $? = 0 ] && grep -q "sequence 1 only" "$tmp/out" && grep -q "verdicts of 256 outputs" "$tmp/out"; then ok
else bad "--seq 1: $(cat "$tmp/out")"; fi
cli_test_end
