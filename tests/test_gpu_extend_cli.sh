#!/bin/sh
# tests/test_gpu_extend_cli.sh LOWP: `lowp gpu attn --path extend|prefill --emulate` (the
# extend kernel's CPU emulator, any machine) against `lowp attn --path extend|prefill` (exact
# attention on the same path values) within the kernel's derived bound (--check-against),
# deterministic output (two runs, identical bytes), the check failing when it must (the
# extend output against the prefill reference), and the bad-input rules (exit 2, one line,
# no output file).
. "$(dirname "$0")/lib/cli_test.sh"
cli_test_start test_gpu_extend_cli "$1"

gen() { perl -I"$cli_test_lib" "$cli_test_lib/gen_npy.pl" "$@"; }

# 37 queries (GQA 6: 12 query / 2 KV heads) over 150 tokens: a prefix of 113, key blocks
# of 64 crossed; qk_dim 128 != vo_dim 64
gen "$tmp/q.npy" 37,12,128 1 1
gen "$tmp/k.npy" 150,2,128 2 1
gen "$tmp/v.npy" 150,2,64 3 1
IN="--q $tmp/q.npy --k $tmp/k.npy --v $tmp/v.npy --kv-format nvfp4"

for p in extend prefill; do
  if "$lowp" attn $IN --path $p --out "$tmp/a-$p.npy" > "$tmp/a-$p.txt" 2>&1; then ok
  else bad "lowp attn --path $p failed: $(tail -2 "$tmp/a-$p.txt")"; fi
  if "$lowp" gpu attn --path $p $IN --emulate --out "$tmp/e-$p.npy" \
       --check-against "$tmp/a-$p.npy" > "$tmp/e-$p.txt" 2>&1; then ok
  else bad "lowp gpu attn --path $p --emulate outside the bound: $(tail -3 "$tmp/e-$p.txt")"; fi
  grep -q " 0 outside the bound" "$tmp/e-$p.txt" && ok || bad "$p: no '0 outside' line"
  "$lowp" gpu attn --path $p $IN --emulate --out "$tmp/e2-$p.npy" > /dev/null 2>&1
  [ "$(hexof "$tmp/e-$p.npy")" = "$(hexof "$tmp/e2-$p.npy")" ] && ok || bad "$p: --emulate not deterministic"
done
# the two paths differ (the extend prefix went through NVFP4), and the check sees it
if "$lowp" gpu attn --path extend $IN --emulate --out "$tmp/x.npy" \
     --check-against "$tmp/a-prefill.npy" > "$tmp/x.txt" 2>&1; then
  bad "the extend output passed against the prefill reference: the check cannot fail"
else ok; fi

cli_no_output=o
expect_error_naming mxfp4-extend "NVFP4" "$lowp" gpu attn --path extend --q "$tmp/q.npy" \
  --k "$tmp/k.npy" --v "$tmp/v.npy" --kv-format mxfp4 --emulate --out "$tmp/o.npy"
expect_error_naming bad-path "path" "$lowp" gpu attn --path fp8kv $IN --emulate --out "$tmp/o.npy"
expect_error_naming chunk-start "chunk-start" "$lowp" gpu attn --path extend $IN --emulate \
  --chunk-start 5 --out "$tmp/o.npy"
expect_error_naming decode-opts "decode" "$lowp" gpu attn --path extend $IN --emulate \
  --page-size 1 --out "$tmp/o.npy"
gen "$tmp/q96.npy" 37,12,96 4 1
gen "$tmp/k96.npy" 150,2,96 5 1
expect_error_naming dim96 "qk_dim" "$lowp" gpu attn --path prefill --q "$tmp/q96.npy" \
  --k "$tmp/k96.npy" --v "$tmp/v.npy" --kv-format nvfp4 --emulate --out "$tmp/o.npy"
gen "$tmp/qlong.npy" 151,12,128 6 1
expect_error_naming too-many-queries "context" "$lowp" gpu attn --path prefill --q "$tmp/qlong.npy" \
  --k "$tmp/k.npy" --v "$tmp/v.npy" --kv-format nvfp4 --emulate --out "$tmp/o.npy"
expect_error_naming check-shape "check-against" "$lowp" gpu attn --path extend $IN --emulate \
  --check-against "$tmp/q.npy" --out "$tmp/o.npy"
cli_test_end
