#!/bin/sh
# tests/test_attn_cli.sh LOWP: the `lowp attn` contract, adversarial cases from real bugs
# (ref/notes/kernels.md section 6), the bad-input rules, and a quick `lowp attn-sweep`.
#
# Inputs are written here by a small deterministic perl generator (xorshift32 + Box-Muller,
# so no numpy is needed); every expectation is a property that must hold exactly:
#   - the correctly rounded output does not depend on how the cache is paged (page size
#     1 / 16 / 64, shuffled page indices, a pool with unused pages, NHD vs HND with
#     num_heads == page_size, interleaved V scales): byte-identical .npy files;
#   - poisoned (NaN) slots that are never written never reach the output;
#   - the reference-plus-bound fast path equals the MPFR oracle on every row (--mpfr-all);
#   - a global scale left at 1.0 where a calibrated one was expected costs accuracy
#     (subnormal E4M3 block scales, FP8 subnormals), and V above 448 at scale 1.0
#     saturates on the FP8 write but becomes NaN in the extend path's torch cast;
#   - bad input: exit 2, one "lowp: " line naming the offending argument, no output file.
. "$(dirname "$0")/lib/cli_test.sh"
cli_test_start test_attn_cli "$1"

# ---- input generators ---------------------------------------------------------------
cat > "$tmp/ints.pl" <<'EOF'
# ints.pl FILE DESCR V...: a 1-D .npy of the values ('<i4', '<i8' or '<f4')
require "npy.pl";
my ($file, $descr, @v) = @ARGV;
my %pk = ("<i4" => "l<", "<i8" => "q<", "<f4" => "f<");
npy_write($file, $descr, $pk{$descr}, [scalar(@v)], @v);
EOF
gen() { perl -I"$cli_test_lib" "$cli_test_lib/gen_npy.pl" "$@"; }
ints() { perl -I"$cli_test_lib" "$tmp/ints.pl" "$@"; }

# A decode-and-verify case: 2 query tokens, GQA 8 query / 2 KV heads, dim 64, 100 tokens
# (page 16 leaves the last page 4/16 full, page 64 leaves 28 poisoned slots).
gen "$tmp/q.npy" 2,8,64 1 1
gen "$tmp/k.npy" 100,2,64 2 1
gen "$tmp/v.npy" 100,2,64 3 1
Q="--q $tmp/q.npy --k $tmp/k.npy --v $tmp/v.npy"

# run NAME ARGS...: lowp attn must succeed; stdout in $tmp/NAME.txt
run() {
  name=$1; shift
  if "$lowp" attn "$@" > "$tmp/$name.txt" 2> "$tmp/$name.err"; then ok; return 0; fi
  bad "$name: exit $? ($(head -c 300 "$tmp/$name.err"))"; return 1
}
same() { # NAME FILE_A FILE_B: byte-identical
  if cmp -s "$2" "$3"; then ok; else bad "$1: $2 and $3 differ"; fi
}
field() { # FILE: the 'all' row's column N (2 rel_L2, 3 max_abs, 4 cosine, 5 TV_mean)
  awk -v c="$2" '$1 == "all" { print $c }' "$1"
}
count() { # FILE PREFIX KEY: the number after KEY on the line starting with PREFIX
  awk -v p="$2" -v k="$3" 'index($0, p) == 1 { for (i = 1; i < NF; i++) if ($i == k) { v = $(i + 1); gsub(/[;,]/, "", v); print v; exit } }' "$1"
}
gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }

# ---- the contract ---------------------------------------------------------------------
run base $Q --kv-format nvfp4 --out "$tmp/o.npy" --baseline "$tmp/b.npy"
head -c 128 "$tmp/o.npy" | grep -q "'shape': (2, 8, 64)" && ok || bad "output shape header: $(head -c 100 "$tmp/o.npy" | tr -d '\0')"
[ "$(wc -c < "$tmp/o.npy")" -eq $((128 + 2 * 8 * 64 * 4)) ] && ok || bad "output size"
grep -q "^all " "$tmp/base.txt" && ok || bad "no 'all' statistics row"
[ "$(grep -c '^[0-7] ' "$tmp/base.txt")" -eq 8 ] && ok || bad "expected 8 per-head rows"
[ "$(count "$tmp/base.txt" '# output' nan)" = 0 ] && ok || bad "NaN in a clean nvfp4 output"
r=$(field "$tmp/base.txt" 2)
gt "$r" 0.01 && gt 0.5 "$r" && ok || bad "nvfp4 rel_L2 $r outside (0.01, 0.5)"
# the fast path (binary64 reference + bound) equals the MPFR oracle on every row
run mpfr $Q --kv-format nvfp4 --out "$tmp/o_mpfr.npy" --baseline "$tmp/b_mpfr.npy" --mpfr-all
same "fast path = oracle" "$tmp/o.npy" "$tmp/o_mpfr.npy"
same "baseline fast path = oracle" "$tmp/b.npy" "$tmp/b_mpfr.npy"
# a longer context, where the bound leaves some query groups to the oracle: still the same bytes
gen "$tmp/qm.npy" 4,8,64 11 1
gen "$tmp/km.npy" 3000,2,64 12 1
gen "$tmp/vm.npy" 3000,2,64 13 1
QM="--q $tmp/qm.npy --k $tmp/km.npy --v $tmp/vm.npy"
run mixed $QM --kv-format mxfp8 --out "$tmp/o_m.npy"
run mixed_mpfr $QM --kv-format mxfp8 --out "$tmp/o_m2.npy" --mpfr-all
same "3000 tokens: fast path + oracle groups = oracle everywhere" "$tmp/o_m.npy" "$tmp/o_m2.npy"
# the baseline does not depend on the format; bf16 costs far less than nvfp4
run bf16 $Q --kv-format bf16 --out "$tmp/o_bf16.npy" --baseline "$tmp/b_bf16.npy"
same "baseline independent of format" "$tmp/b.npy" "$tmp/b_bf16.npy"
gt "$(field "$tmp/base.txt" 2)" "$(field "$tmp/bf16.txt" 2)" && ok || bad "bf16 not better than nvfp4"
for f in fp8_e4m3 fp8_e5m2 mxfp4 mxfp8; do
  run "fmt_$f" $Q --kv-format "$f" --out "$tmp/o_$f.npy" && [ "$(count "$tmp/fmt_$f.txt" '# output' nan)" = 0 ] && ok || bad "$f output has NaN"
done
# q-offset: decode at position 50 sees 51 keys; sm-scale changes the result
run qoff $Q --kv-format bf16 --q-offset 50 --out "$tmp/o_qoff.npy"
cmp -s "$tmp/o_qoff.npy" "$tmp/o_bf16.npy" && bad "--q-offset had no effect" || ok
run smsc $Q --kv-format bf16 --sm-scale 0.25 --out "$tmp/o_smsc.npy"
cmp -s "$tmp/o_smsc.npy" "$tmp/o_bf16.npy" && bad "--sm-scale had no effect" || ok
# production paths run and stay finite on ordinary data
for p in decode extend prefill; do
  run "path_$p" $Q --kv-format nvfp4 --path "$p" --out "$tmp/o_$p.npy" && [ "$(count "$tmp/path_$p.txt" '# output' nan)" = 0 ] && ok || bad "path $p: NaN"
done
run path_fp8kv $Q --kv-format fp8_e4m3 --path fp8kv --out "$tmp/o_fp8kv.npy"
# fp8kv reads the same values as the exact path (Q in BF16 aside: compare with --q-type f32)
run path_fp8kv_f32 $Q --kv-format fp8_e4m3 --path fp8kv --q-type f32 --out "$tmp/o_fp8kv32.npy"
same "fp8kv (Q f32) = exact" "$tmp/o_fp8kv32.npy" "$tmp/o_fp8_e4m3.npy"
# decode on NVFP4 is exact in the cache values: with Q in f32 it equals the exact path
run decode_f32 $Q --kv-format nvfp4 --path decode --q-type f32 --out "$tmp/o_dec32.npy"
same "nvfp4 decode (Q f32) = exact" "$tmp/o_dec32.npy" "$tmp/o.npy"

# ---- adversarial: paging (vLLM #53681, ROCm #6054, FlashInfer 0x7F poison) -------------
for ps in 1 16 64; do
  run "page$ps" $Q --kv-format nvfp4 --page-size "$ps" --out "$tmp/o_p$ps.npy"
  same "page size $ps" "$tmp/o_p$ps.npy" "$tmp/o.npy"
done
# shuffled, non-monotonic page indices in a pool with unused (poisoned) pages
ints "$tmp/pt.npy" '<i4' 11 3 7 0 9 2 5
run shuffled $Q --kv-format nvfp4 --page-table "$tmp/pt.npy" --num-pages 12 --out "$tmp/o_shuf.npy"
same "shuffled pages, 5 unused poisoned pages" "$tmp/o_shuf.npy" "$tmp/o.npy"
[ "$(count "$tmp/shuffled.txt" '# output' nan)" = 0 ] && ok || bad "poisoned slots leaked NaN"
ints "$tmp/pt64.npy" '<i8' 1 0
run shuffled64 $Q --kv-format nvfp4 --page-size 64 --page-table "$tmp/pt64.npy" --out "$tmp/o_shuf64.npy"
same "int64 page table, page 64" "$tmp/o_shuf64.npy" "$tmp/o.npy"
# interleaved V scales (TRT-LLM order) read back through the same view
run inter $Q --kv-format nvfp4 --v-sf-order interleave4 --k-sf-order interleave4 --out "$tmp/o_inter.npy"
same "interleaved scales" "$tmp/o_inter.npy" "$tmp/o.npy"
# num_heads == page_size, NHD vs HND (the shape vLLM #53681 confused)
gen "$tmp/q16.npy" 1,16,64 4 1
gen "$tmp/k16.npy" 40,16,64 5 1
gen "$tmp/v16.npy" 40,16,64 6 1
Q16="--q $tmp/q16.npy --k $tmp/k16.npy --v $tmp/v16.npy"
run h16_nhd $Q16 --kv-format nvfp4 --page-size 16 --layout nhd --out "$tmp/o16_nhd.npy"
run h16_hnd $Q16 --kv-format nvfp4 --page-size 16 --layout hnd --out "$tmp/o16_hnd.npy"
run h16_p1 $Q16 --kv-format nvfp4 --page-size 1 --layout hnd --out "$tmp/o16_p1.npy"
same "num_heads = page_size, NHD vs HND" "$tmp/o16_nhd.npy" "$tmp/o16_hnd.npy"
same "num_heads = page_size, page 16 vs 1" "$tmp/o16_nhd.npy" "$tmp/o16_p1.npy"
# GQA ratio 6 and unequal QK / VO dims (FlashInfer #4976: 192 / 128)
gen "$tmp/q12.npy" 3,12,192 7 1
gen "$tmp/k12.npy" 70,2,192 8 1
gen "$tmp/v12.npy" 70,2,128 9 1
run gqa6 --q "$tmp/q12.npy" --k "$tmp/k12.npy" --v "$tmp/v12.npy" --kv-format nvfp4 --out "$tmp/o12.npy" --mpfr-all
head -c 128 "$tmp/o12.npy" | grep -q "'shape': (3, 12, 128)" && ok || bad "GQA 6, 192/128 output shape"

# ---- adversarial: scales (b12x #86, sglang #20705, vLLM #54705) ------------------------
# a low-magnitude layer: a global scale left at 1.0 where a calibrated one was expected
gen "$tmp/ks.npy" 100,2,64 2 0.004
gen "$tmp/vs.npy" 100,2,64 3 0.004
QS="--q $tmp/q.npy --k $tmp/ks.npy --v $tmp/vs.npy"
run small_cal $QS --kv-format nvfp4 --out "$tmp/o_sc.npy"
run small_one $QS --kv-format nvfp4 --k-scale 1 --v-scale 1 --out "$tmp/o_s1.npy"
gt "$(count "$tmp/small_one.txt" '# quantizer' subnormal-scales)" 0 && ok || bad "nvfp4 at g=1: no subnormal block scales on a 0.004-magnitude K"
[ "$(count "$tmp/small_cal.txt" '# quantizer' subnormal-scales)" = 0 ] && ok || bad "calibrated nvfp4 has subnormal block scales"
gt "$(field "$tmp/small_one.txt" 2)" "$(awk -v x="$(field "$tmp/small_cal.txt" 2)" 'BEGIN { print 1.5 * x }')" && ok ||
  bad "nvfp4 g=1 rel_L2 $(field "$tmp/small_one.txt" 2) not clearly worse than calibrated $(field "$tmp/small_cal.txt" 2)"
run small_fp8_cal $QS --kv-format fp8_e4m3 --out "$tmp/o_f8c.npy"
run small_fp8_one $QS --kv-format fp8_e4m3 --k-scale 1 --v-scale 1 --out "$tmp/o_f81.npy"
gt "$(field "$tmp/small_fp8_one.txt" 2)" "$(awk -v x="$(field "$tmp/small_fp8_cal.txt" 2)" 'BEGIN { print 2 * x }')" && ok ||
  bad "fp8 g=1 on small K/V not clearly worse than calibrated"
# V outliers above 448 at scale 1.0: the FP8 write saturates (finite, counted) ...
gen "$tmp/vo.npy" 100,2,64 3 1 600:97
QO="--q $tmp/q.npy --k $tmp/k.npy --v $tmp/vo.npy"
run vout_fp8 $QO --kv-format fp8_e4m3 --k-scale 1 --v-scale 1 --out "$tmp/o_vo8.npy"
vside() { # FILE PREFIX: the number two fields after "V" on the line starting with PREFIX
  awk -v p="$2" 'index($0, p) == 1 { for (i = 1; i < NF; i++) if ($i == "V") { v = $(i + 2); gsub(/[;,]/, "", v); print v; exit } }' "$1"
}
gt "$(vside "$tmp/vout_fp8.txt" '# quantizer')" 0 && ok ||
  bad "fp8 at scale 1.0: V above 448 not counted as saturated"
[ "$(count "$tmp/vout_fp8.txt" '# output' nan)" = 0 ] && ok || bad "fp8 saturating write produced NaN"
# ... while the extend path's FP8 workspace (torch's non-saturating cast) turns them into NaN
run vout_ext $QO --kv-format nvfp4 --v-scale 1 --path extend --out "$tmp/o_voe.npy"
gt "$(vside "$tmp/vout_ext.txt" '# effective values')" 0 && ok ||
  bad "extend: |V| >= 480 did not become NaN in the FP8 workspace"
gt "$(count "$tmp/vout_ext.txt" '# output' nan)" 0 && ok || bad "extend: the NaN profile did not reach the output"
run vout_exact $QO --kv-format nvfp4 --v-scale 1 --out "$tmp/o_vox.npy"
[ "$(count "$tmp/vout_exact.txt" '# output' nan)" = 0 ] && ok || bad "exact nvfp4 path with V = 600 produced NaN"

# ---- bad input ---------------------------------------------------------------------------
# expect_error_naming (tests/lib/cli_test.sh): exit 2, one "lowp: " line naming the
# pattern, no e.npy (nor its temporary) left
cli_no_output=e.npy
E="--out $tmp/e.npy"
gen "$tmp/v90.npy" 90,2,64 3 1
gen "$tmp/v3h.npy" 100,3,64 3 1
gen "$tmp/q48.npy" 2,8,48 1 1
gen "$tmp/q6.npy" 2,6,64 1 1
gen "$tmp/k4.npy" 100,4,64 2 1
gen "$tmp/v4.npy" 100,4,64 3 1
gen "$tmp/qlong.npy" 101,2,64 1 1
gen "$tmp/k24.npy" 100,2,24 2 1
gen "$tmp/q24.npy" 2,8,24 1 1
gen "$tmp/k2d.npy" 100,128 2 1
gen "$tmp/knan.npy" 100,2,64 2 1
# poison one element of K with a NaN (bytes 0x7fc00000 at element 5)
perl -e 'open(F, "+<", $ARGV[0]) or die; binmode F; seek(F, 128 + 20, 0); print F pack("V", 0x7fc00000); close F' "$tmp/knan.npy"
A="$lowp attn"
expect_error_naming "V tokens != K tokens"   "--v"          $A --q "$tmp/q.npy" --k "$tmp/k.npy" --v "$tmp/v90.npy" --kv-format nvfp4 $E
expect_error_naming "V heads != K heads"     "--v"          $A --q "$tmp/q.npy" --k "$tmp/k.npy" --v "$tmp/v3h.npy" --kv-format nvfp4 $E
expect_error_naming "Q dim != K dim"         "--q"          $A --q "$tmp/q48.npy" --k "$tmp/k.npy" --v "$tmp/v.npy" --kv-format nvfp4 $E
expect_error_naming "heads not divisible"    "--q"          $A --q "$tmp/q6.npy" --k "$tmp/k4.npy" --v "$tmp/v4.npy" --kv-format nvfp4 $E
expect_error_naming "q_len > ctx"            "--q"          $A --q "$tmp/qlong.npy" --k "$tmp/k.npy" --v "$tmp/v.npy" --kv-format nvfp4 $E
expect_error_naming "q-offset past ctx"      "--q-offset"   $A $Q --kv-format nvfp4 --q-offset 99 $E
expect_error_naming "rank-2 K"               "--k"          $A --q "$tmp/q.npy" --k "$tmp/k2d.npy" --v "$tmp/v.npy" --kv-format nvfp4 $E
expect_error_naming "NaN in K"               "--k"          $A --q "$tmp/q.npy" --k "$tmp/knan.npy" --v "$tmp/v.npy" --kv-format nvfp4 $E
expect_error_naming "dim not a block multiple" "--kv-format" $A --q "$tmp/q24.npy" --k "$tmp/k24.npy" --v "$tmp/k24.npy" --kv-format nvfp4 $E
ints "$tmp/pt_short.npy" '<i4' 0 1 2
ints "$tmp/pt_oor.npy" '<i4' 0 1 2 3 4 5 9
ints "$tmp/pt_neg.npy" '<i4' 0 1 2 -1 4 5 6
ints "$tmp/pt_dup.npy" '<i4' 0 1 2 3 4 5 5
ints "$tmp/pt_f.npy" '<f4' 0 1 2 3 4 5 6
expect_error_naming "page table too short"   "--page-table" $A $Q --kv-format nvfp4 --page-table "$tmp/pt_short.npy" $E
expect_error_naming "page index out of range" "--page-table" $A $Q --kv-format nvfp4 --page-table "$tmp/pt_oor.npy" --num-pages 8 $E
expect_error_naming "negative page index"    "--page-table" $A $Q --kv-format nvfp4 --page-table "$tmp/pt_neg.npy" $E
expect_error_naming "repeated page"          "--page-table" $A $Q --kv-format nvfp4 --page-table "$tmp/pt_dup.npy" $E
expect_error_naming "float page table"       "--page-table" $A $Q --kv-format nvfp4 --page-table "$tmp/pt_f.npy" $E
expect_error_naming "unknown format"         "--kv-format"  $A $Q --kv-format fp6 $E
expect_error_naming "unknown recipe"         "--recipe"     $A $Q --kv-format nvfp4 --recipe fast $E
expect_error_naming "recipe not for format"  "--recipe"     $A $Q --kv-format nvfp4 --recipe ocp $E
expect_error_naming "unknown path"           "--path"       $A $Q --kv-format nvfp4 --path verify $E
expect_error_naming "unknown layout"         "--layout"     $A $Q --kv-format nvfp4 --layout nchw $E
expect_error_naming "unknown scale order"    "--v-sf-order" $A $Q --kv-format nvfp4 --v-sf-order swizzle $E
expect_error_naming "interleave on fp8"      "interleave"   $A $Q --kv-format fp8_e4m3 --v-sf-order interleave4 $E
expect_error_naming "interleave page 6"      "page"         $A $Q --kv-format nvfp4 --v-sf-order interleave4 --page-size 6 $E
expect_error_naming "global scale on mxfp4"  "--k-scale"    $A $Q --kv-format mxfp4 --k-scale 2 $E
expect_error_naming "zero scale"             "--v-scale"    $A $Q --kv-format nvfp4 --v-scale 0 $E
expect_error_naming "extend on fp8"          "--path"       $A $Q --kv-format fp8_e4m3 --path extend $E
expect_error_naming "fp8kv on nvfp4"         "--path"       $A $Q --kv-format nvfp4 --path fp8kv $E
expect_error_naming "chunk-start off extend" "--chunk-start" $A $Q --kv-format nvfp4 --chunk-start 3 $E
expect_error_naming "missing --out"          "--out"        $A $Q --kv-format nvfp4
expect_error_naming "missing --kv-format"    "--kv-format"  $A $Q $E
expect_error_naming "unknown option"         "--fast"       $A $Q --kv-format nvfp4 --fast $E
expect_error_naming "missing value"          "--page-size"  $A $Q --kv-format nvfp4 $E --page-size
expect_error_naming "page size 0"            "--page-size"  $A $Q --kv-format nvfp4 --page-size 0 $E
expect_error_naming "missing input"          "--q"          $A --q "$tmp/none.npy" --k "$tmp/k.npy" --v "$tmp/v.npy" --kv-format nvfp4 $E
expect_error_naming "unwritable --baseline"  "--baseline"   $A $Q --kv-format nvfp4 $E --baseline "$tmp/no/such/dir/b.npy"
expect_error_naming "unwritable --out"       "--out"        $A $Q --kv-format nvfp4 --out "$tmp/no/such/dir/e.npy"

# ---- lowp gpu attn --emulate (the CPU emulators of the GPU kernels; any machine) ------------
# poke FILE INDEX BITS: set float32 element INDEX of an .npy to the bit pattern BITS (hex)
poke() {
  perl -e 'open(F, "+<", $ARGV[0]) or die; binmode F; read(F, my $h, 10); my $hl = unpack("v", substr($h, 8, 2));
           seek(F, 10 + $hl + 4 * $ARGV[1], 0); print F pack("V", hex($ARGV[2])); close F' "$@"
}
G="$lowp gpu attn --emulate"
gen "$tmp/gq.npy" 1,8,64 21 1
GQ="--q $tmp/gq.npy --k $tmp/k.npy --v $tmp/v.npy"
gpu_run() { # NAME ARGS...: lowp gpu attn --emulate must succeed
  name=$1; shift
  if $G "$@" > "$tmp/$name.txt" 2> "$tmp/$name.err"; then ok; return 0; fi
  bad "gpu attn $name: exit $? ($(head -c 300 "$tmp/$name.err"))"; return 1
}
gpu_run g_base $GQ --kv-format nvfp4 --out "$tmp/g1.npy"
gpu_run g_again $GQ --kv-format nvfp4 --out "$tmp/g2.npy"
same "gpu attn --emulate is deterministic" "$tmp/g1.npy" "$tmp/g2.npy"
head -c 128 "$tmp/g1.npy" | grep -q "'shape': (1, 8, 64)" && ok || bad "gpu attn output shape"
# the shapes the BF16 check over-read on (head dim 256 with 50 tokens; 8 query heads on 1)
gen "$tmp/gq256.npy" 1,2,256 22 1
gen "$tmp/gk256.npy" 50,2,256 23 1
gen "$tmp/gv256.npy" 50,2,256 24 1
gpu_run g_256 --q "$tmp/gq256.npy" --k "$tmp/gk256.npy" --v "$tmp/gv256.npy" --kv-format bf16 --out "$tmp/g256.npy"
gen "$tmp/gq128.npy" 1,8,128 25 1
gen "$tmp/gk128.npy" 100,1,128 26 1
gen "$tmp/gv128.npy" 100,1,128 27 1
gpu_run g_128 --q "$tmp/gq128.npy" --k "$tmp/gk128.npy" --v "$tmp/gv128.npy" --kv-format fp8_e4m3 --out "$tmp/g128.npy"
# Q, K and V are each checked, before rounding: NaN / Inf named as such; a finite binary32
# value that rounds to Inf in BF16 (0x7f7f8000 = 0x1.ffp127, the midpoint to 2^128, ties to
# even: up) refused as an overflow; the largest value below it (rounds to 0x1.fep127) taken.
for c in qnan:gq:0:7fc00000:--q:0,0,0:NaN qinf:gq:7:ff800000:--q:0,0,7:infinite qovf:gq:3:7f7fffff:--q:0,0,3:overflows \
         vovf:v:12799:7f7f8000:--v:99,1,63:overflows vnan:v:0:7fc00000:--v:0,0,0:NaN \
         kovf:k:0:ff7fffff:--k:0,0,0:overflows kinf:k:12799:7f800000:--k:99,1,63:infinite; do
  IFS=: read -r name file idx bits opt at what <<EOT
$c
EOT
  cp "$tmp/$file.npy" "$tmp/p_$name.npy"
  poke "$tmp/p_$name.npy" "$idx" "$bits"
  case $file in gq) args="--q $tmp/p_$name.npy --k $tmp/k.npy --v $tmp/v.npy" ;;
                k) args="--q $tmp/gq.npy --k $tmp/p_$name.npy --v $tmp/v.npy" ;;
                v) args="--q $tmp/gq.npy --k $tmp/k.npy --v $tmp/p_$name.npy" ;; esac
  expect_error_naming "gpu attn $name" "^lowp: $opt.*element \\[$(echo "$at" | sed 's/,/, /g')\\] .*$what" $G $args --kv-format bf16 $E
done
cp "$tmp/v.npy" "$tmp/p_vmax.npy"
poke "$tmp/p_vmax.npy" 12799 7f7f7fff
gpu_run g_vmax --q "$tmp/gq.npy" --k "$tmp/k.npy" --v "$tmp/p_vmax.npy" --kv-format bf16 --v-scale 1 --out "$tmp/gmax.npy"
gen "$tmp/gq96.npy" 1,4,96 28 1
gen "$tmp/gk96.npy" 20,2,96 29 1
expect_error_naming "gpu attn head dim 96"   "96"           $G --q "$tmp/gq96.npy" --k "$tmp/gk96.npy" --v "$tmp/gk96.npy" --kv-format bf16 $E

# ---- built with CUDA: gpu conform's case plan, gpu attn without a GPU ------------------------
# (a CPU-only build says "built without CUDA" for both, exit 2: checked, the rest skipped)
if "$lowp" gpu conform --emulator-only --cases 1 --long 0 --broad 0 --formats bf16 > "$tmp/gc.txt" 2> "$tmp/gc.err"; then
  ok
  # --cases N is exactly N cases per format (the --long ones included), the same cases on
  # 1 and 2 threads: the per-format lines agree but for the seconds
  for spec in 1:0:0 7:0:3 50:1:20; do
    IFS=: read -r n long broad <<EOT
$spec
EOT
    for t in 1 2; do
      OMP_NUM_THREADS=$t "$lowp" gpu conform --emulator-only --cases "$n" --long "$long" --broad "$broad" \
        --max-ctx 300 --formats bf16,nvfp4 > "$tmp/gc_$t.txt" 2> "$tmp/gc_$t.err" || bad "gpu conform --cases $n, $t threads: exit $?"
      sed -n 's/^\(gpu conform .*\), [0-9.]* s$/\1/p' "$tmp/gc_$t.txt" > "$tmp/gc_$t.cut"
    done
    [ "$(grep -c " $n cases " "$tmp/gc_1.cut")" -eq 2 ] && ok || bad "gpu conform --cases $n: $(cat "$tmp/gc_1.cut")"
    grep -q "^lowp gpu conform: $((2 * n)) cases" "$tmp/gc_1.txt" && ok || bad "gpu conform --cases $n total: $(tail -n 1 "$tmp/gc_1.txt")"
    same "gpu conform --cases $n, 1 vs 2 threads" "$tmp/gc_1.cut" "$tmp/gc_2.cut"
  done
  expect_error_naming "gpu conform --formats ''" "--formats" "$lowp" gpu conform --emulator-only --formats ''
  expect_error_naming "gpu conform --formats ,"  "--formats" "$lowp" gpu conform --emulator-only --formats ,
  # without a GPU, gpu attn finds that out first (no input read, nothing held: exit 77
  # also under LeakSanitizer, whose leak exit would be 23)
  if ! command -v nvidia-smi > /dev/null 2>&1 || ! nvidia-smi > /dev/null 2>&1; then
    "$lowp" gpu attn --q "$tmp/none.npy" --k "$tmp/k.npy" --v "$tmp/v.npy" --kv-format nvfp4 $E > /dev/null 2> "$tmp/g77.err"
    rc=$?
    [ "$rc" -eq 77 ] && [ "$(wc -l < "$tmp/g77.err")" -eq 1 ] && ok || bad "gpu attn without a GPU: exit $rc ($(head -c 300 "$tmp/g77.err"))"
    $G $GQ --kv-format nvfp4 $E > /dev/null 2>&1 && ok || bad "gpu attn --emulate without a GPU"
  fi
else
  grep -q "built without CUDA" "$tmp/gc.err" && ok || bad "gpu conform --emulator-only: $(head -c 300 "$tmp/gc.err")"
fi

# ---- lowp attn-sweep (quick) -------------------------------------------------------------
sweep=attn-sweep
if "$lowp" $sweep --quick --workloads gaussian,small --csv "$tmp/s.csv" --md "$tmp/s.md" > "$tmp/s.txt" 2> "$tmp/s.err"; then
  ok
  # header + 2 contexts x 2 workloads x 8 configs x (8 heads + all)
  [ "$(wc -l < "$tmp/s.csv")" -eq $((1 + 2 * 2 * 8 * 9)) ] && ok || bad "sweep CSV has $(wc -l < "$tmp/s.csv") lines"
  grep -q '^Generated by `lowp attn-sweep --quick' "$tmp/s.md" && ok || bad "sweep Markdown lacks the command line"
  # the oracle ran at these contexts, and the bound held everywhere it was compared
  awk -F, 'NR > 1 && $12 == "all" && ($33 == 0 || $38 != 1) { bad = 1 } END { exit bad }' "$tmp/s.csv" && ok ||
    bad "sweep: an oracle comparison is missing or the bound failed"
  # the unquantized config costs nothing; nvfp4 g=1 on the small workload costs more than calibrated
  awk -F, 'NR > 1 && $8 == "f32" && $15 != 0 { bad = 1 } END { exit bad }' "$tmp/s.csv" && ok || bad "sweep: f32 row with nonzero error"
  a=$(awk -F, '$1 == "small" && $2 == 1024 && $8 == "nvfp4 g=1" && $12 == "all" { print $15 }' "$tmp/s.csv")
  b=$(awk -F, '$1 == "small" && $2 == 1024 && $8 == "nvfp4 g=amax/2688" && $12 == "all" { print $15 }' "$tmp/s.csv")
  gt "$a" "$b" && ok || bad "sweep: small workload nvfp4 g=1 ($a) not worse than calibrated ($b)"
else
  bad "attn-sweep --quick: exit $? ($(head -c 300 "$tmp/s.err"))"
fi
# thread-count independence: workloads, quantizers, statistics (the seconds column aside)
for t in 1 2; do
  OMP_NUM_THREADS=$t "$lowp" $sweep --quick --workloads rope,needle --oracle-ctx 0 --csv "$tmp/t$t.csv" --md "$tmp/t$t.md" > /dev/null 2>&1 || bad "sweep with $t threads"
  awk -F, '{ NF = NF - 1; print }' OFS=, "$tmp/t$t.csv" > "$tmp/t$t.cut"
done
same "sweep CSV, 1 vs 2 threads" "$tmp/t1.cut" "$tmp/t2.cut"
OMP_NUM_THREADS=1 "$lowp" attn $QM --kv-format nvfp4 --out "$tmp/o_t1.npy" > /dev/null 2>&1 || bad "attn with 1 thread"
OMP_NUM_THREADS=2 "$lowp" attn $QM --kv-format nvfp4 --out "$tmp/o_t2.npy" > /dev/null 2>&1 || bad "attn with 2 threads"
same "attn output, 1 vs 2 threads" "$tmp/o_t1.npy" "$tmp/o_t2.npy"
rm -f "$tmp"/e.npy*
expect_error_naming "sweep unknown workload" "--workloads" "$lowp" $sweep --quick --workloads haystack --csv "$tmp/e.npy" --md "$tmp/e.md"
expect_error_naming "sweep bad size"         "--size"      "$lowp" $sweep --size 1024:4:6:4 --csv "$tmp/e.npy" --md "$tmp/e.md"
expect_error_naming "sweep unwritable md"    "--md"        "$lowp" $sweep --quick --csv "$tmp/e.npy" --md "$tmp/no/dir/e.md"

cli_test_end
