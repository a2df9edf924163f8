#!/bin/sh
# tests/test_gpu_extend_cli.sh LOWP: `lowp gpu attn --path extend|prefill --emulate` (the
# extend kernel's CPU emulator, any machine) against `lowp attn --path extend|prefill` (exact
# attention on the same path values) within the kernel's derived bound (--check-against),
# deterministic output (two runs, identical bytes), the check failing when it must (the
# extend output against the prefill reference), and the bad-input rules (exit 2, one line,
# no output file). Built with CUDA also `lowp gpu conform --kernel extend|prefill
# --emulator-only` (the extend check's cases: a kernel run alone runs the same cases as both
# together, the exit status follows the counts) and its refusals, and without a GPU the
# conform and `lowp gpu bench --kernel extend|kv-write` exit 77 (the kv-write bench's
# refusals too).
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

# ---- built with CUDA: gpu conform --kernel extend|prefill, gpu bench --kernel extend -------
# (a CPU-only build says "built without CUDA", exit 2: checked, the rest skipped)
EC="--emulator-only --cases 12 --long 0 --ws 3 --ws-long 0"
if "$lowp" gpu conform --kernel extend,prefill $EC --report "$tmp/ec.md" > "$tmp/ec.txt" 2> "$tmp/ec.err"; then
  ok
  grep -q "^lowp gpu conform --kernel extend,prefill: 24 cases, 0 not bit-exact, 0 of [0-9]* cases outside" \
    "$tmp/ec.txt" && ok || bad "conform --kernel extend,prefill: $(tail -n 1 "$tmp/ec.txt")"
  grep -q "^| prefill | 12 |" "$tmp/ec.md" && grep -q "^| extend | 12 |" "$tmp/ec.md" && ok \
    || bad "conform report: $(cat "$tmp/ec.md")"
  # one kernel alone: its cases are the same ones (the per-kernel line agrees, seconds aside)
  for k in prefill extend; do
    "$lowp" gpu conform --kernel $k $EC --threads 1 > "$tmp/ec-$k.txt" 2>&1 || bad "conform --kernel $k: exit $?"
    grep "^gpu extend conform ($k)" "$tmp/ec.txt" > "$tmp/ec-both-$k.cut"
    grep "^gpu extend conform" "$tmp/ec-$k.txt" > "$tmp/ec-$k.cut"
    cmp -s "$tmp/ec-both-$k.cut" "$tmp/ec-$k.cut" && [ -s "$tmp/ec-$k.cut" ] && ok \
      || bad "conform --kernel $k alone differs: $(cat "$tmp/ec-$k.cut") vs $(cat "$tmp/ec-both-$k.cut")"
  done
  grep -q "workspace path" "$tmp/ec-prefill.txt" && bad "prefill ran the extend's workspace cases" || ok
  # --only I runs short case I alone (odd: an extend)
  "$lowp" gpu conform --kernel extend $EC --only 5 > "$tmp/ec-only.txt" 2>&1 || bad "--only 5: exit $?"
  grep -q "^gpu extend conform (extend): 1 cases" "$tmp/ec-only.txt" && ok || bad "--only 5: $(cat "$tmp/ec-only.txt")"
  # --from I: a run split in two covers the whole run's cases (per kernel: counts add, the
  # worst ratio is the larger part's)
  SP="--emulator-only --long 0 --ws 0 --ws-long 0"
  "$lowp" gpu conform --kernel extend,prefill $SP --cases 8 > "$tmp/sp-all.txt" 2>&1 || bad "split: whole run exit $?"
  "$lowp" gpu conform --kernel extend,prefill $SP --cases 8 --from 5 > "$tmp/sp-b.txt" 2>&1 || bad "split: --from 5 exit $?"
  "$lowp" gpu conform --kernel extend,prefill $SP --cases 5 > "$tmp/sp-a.txt" 2>&1 || bad "split: --cases 5 exit $?"
  for k in prefill extend; do
    # cases, cases against binary64, worst ratio
    cut3() { sed -n "s|^gpu extend conform ($k): \([0-9]*\) cases, .* [0-9]*/\([0-9]*\) outside bound, worst ratio \([0-9.]*\),.*|\1 \2 \3|p" "$1"; }
    set -- $(cut3 "$tmp/sp-all.txt") $(cut3 "$tmp/sp-a.txt") $(cut3 "$tmp/sp-b.txt")
    if [ $# -eq 9 ] && [ "$1" -eq 8 ] && [ $(($4 + $7)) -eq "$1" ] && [ $(($5 + $8)) -eq "$2" ] &&
       { [ "$3" = "$6" ] || [ "$3" = "$9" ]; }; then ok
    else bad "split --from ($k): whole '$1 $2 $3', parts '$4 $5 $6' + '$7 $8 $9'"; fi
  done
  cli_no_output=r.md
  expect_error_naming "conform --from past the run" "from" "$lowp" gpu conform --kernel extend \
    --emulator-only --cases 4 --from 4 --report "$tmp/r.md"
  for o in "--formats nvfp4" "--shard 0/2" "--broad 3" "--max-ctx 64"; do
    expect_error_naming "conform --kernel extend $o" "${o%% *}" "$lowp" gpu conform --kernel extend \
      --emulator-only $o --report "$tmp/r.md"
  done
  expect_error_naming "conform --kernel bogus" "bogus" "$lowp" gpu conform --kernel bogus --emulator-only
  expect_error_naming "conform --kernel twice" "twice" "$lowp" gpu conform --kernel extend --kernel prefill
  expect_error_naming "conform --kernel all --report" "report" "$lowp" gpu conform --kernel all \
    --emulator-only --report "$tmp/r.md"
  expect_error_naming "conform --only past the run" "only" "$lowp" gpu conform --kernel extend \
    --emulator-only --cases 2 --only 4
  # the workspace fill's kernel choice: a value it does not know is refused, nothing written
  expect_error_naming "LOWP_GPU_WS_FILL=bogus" "LOWP_GPU_WS_FILL" env LOWP_GPU_WS_FILL=bogus "$lowp" gpu \
    conform --kernel extend --emulator-only --cases 1 --long 0 --ws 1 --ws-long 0 --report "$tmp/r.md"
  expect_error_naming "bench decode,extend" "separate" "$lowp" gpu bench --kernel decode,extend
  expect_error_naming "bench --kernel extend --prefixes 0" "prefill" "$lowp" gpu bench --kernel extend --prefixes 0,4096
  expect_error_naming "bench --kernel prefill --formats" "formats" "$lowp" gpu bench --kernel prefill --formats nvfp4
  # the quantize-on-write bench: its own options, refused before any GPU is looked for
  expect_error_naming "bench kv-write,extend" "separate" "$lowp" gpu bench --kernel kv-write,extend
  expect_error_naming "bench kv-write --formats bogus" "bogus" "$lowp" gpu bench --kernel kv-write --formats bogus
  expect_error_naming "bench kv-write --dims 40 nvfp4" "40" "$lowp" gpu bench --kernel kv-write --formats nvfp4 --dims 40
  expect_error_naming "bench kv-write --tokens 0" "tokens" "$lowp" gpu bench --kernel kv-write --tokens 0
  expect_error_naming "bench kv-write --chunks" "chunks" "$lowp" gpu bench --kernel kv-write --chunks 512
  expect_error_naming "conform --kernel kv-write" "lowp_gpu_kv_write_check" "$lowp" gpu conform --kernel kv-write
  if ! command -v nvidia-smi > /dev/null 2>&1 || ! nvidia-smi > /dev/null 2>&1; then
    "$lowp" gpu conform --kernel extend --cases 1 --report "$tmp/n77.md" > /dev/null 2>&1
    rc=$?; [ $rc -eq 77 ] && ok || bad "conform --kernel extend without a GPU: exit $rc, not 77"
    "$lowp" gpu bench --kernel extend --chunks 512 --prefixes 4096 --csv "$tmp/n77.csv" > /dev/null 2>&1
    rc=$?; [ $rc -eq 77 ] && ok || bad "bench --kernel extend without a GPU: exit $rc, not 77"
    "$lowp" gpu bench --kernel kv-write --tokens 8 --csv "$tmp/n77k.csv" > /dev/null 2>&1
    rc=$?; [ $rc -eq 77 ] && ok || bad "bench --kernel kv-write without a GPU: exit $rc, not 77"
    ls "$tmp" | grep -q '^n77' && bad "exit 77 left a file: $(ls "$tmp" | grep '^n77')" || ok
  fi
else
  grep -q "without CUDA" "$tmp/ec.err" && ok || bad "conform --kernel extend,prefill: $(cat "$tmp/ec.err")"
fi
cli_test_end
