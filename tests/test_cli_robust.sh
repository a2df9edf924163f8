#!/bin/sh
# tests/test_cli_robust.sh LOWP: the CLI's shared rules, as a hostile user would test them.
#   - numbers: one parser (full string, explicit ranges, decimal or 0x hex, "010" is ten,
#     no clamping at 2^64, no floats where integers are expected), LOWP_SEED included;
#   - outputs: a device or FIFO at the path is written in place, a symlink keeps being a
#     symlink, a directory is refused, a write error (ENOSPC) is one line and exit 2;
#   - an output that is one of the inputs is refused and the input stays as it was;
#   - attn --out writes the format its extension names;
#   - repeated and conflicting options are refused naming both; --text refuses a NUL;
#   - stats --json is JSON (checked by python3 -m json.tool) even for inputs with Inf;
#   - bench attn --format nope is refused.
# Bad input means exit 2 and one "lowp: " line on stderr (the README "Bad input" rule).
. "$(dirname "$0")/lib/cli_test.sh"
cli_test_start cli_robust "$1"

# float32 .npy writer: gen.pl FILE D0,D1,D2 SEED [inf]: uniform values in [-2, 2)
# (xorshift32, deterministic); "inf" makes element 0 +Inf.
cat > "$tmp/gen.pl" <<'EOF'
require "npy.pl";
my ($file, $shape, $seed, $special) = @ARGV;
my @d = split /,/, $shape; my $n = 1; $n *= $_ for @d;
my $x = ($seed * 2654435761 + 12345) & 0xffffffff; $x = 1 if $x == 0;
my @v;
for (my $i = 0; $i < $n; $i++) {
  $x ^= ($x << 13) & 0xffffffff; $x ^= $x >> 17; $x ^= ($x << 5) & 0xffffffff;
  push @v, ($x / 4294967296.0 - 0.5) * 4;
}
$v[0] = 9**9**9 if defined $special && $special eq "inf";
npy_write($file, "<f4", "f<", \@d, @v);
EOF
gen() { perl -I"$cli_test_lib" "$tmp/gen.pl" "$@"; }
# 464.0 and 0.25 as little-endian binary32: e4m3 codes 7e and 28
printf '\000\000\350\103\000\000\200\076' > "$tmp/in.bin"

# ---- (4) numbers ------------------------------------------------------------------------
# A binary that took these counts would allocate until the machine runs out (the issue's
# OOM at 24 GB): run them under a 4 GB address-space limit where that works (not under
# ASan, whose shadow memory needs more).
can_cap=0
sh -c 'ulimit -v 4000000 && exec "$0" --help' "$lowp" > /dev/null 2>&1 && can_cap=1
capped() { if [ "$can_cap" = 1 ]; then sh -c 'ulimit -v 4000000 && exec "$@"' sh "$@"; else "$@"; fi; }
expect_error "random too many" capped "$lowp" diff e4m3 --random 99999999999999 && expect_reason "random too many" "range"
expect_error "random negative" capped "$lowp" diff e4m3 --random -1 && expect_reason "random negative" "negative"
expect_error "random float"    "$lowp" diff e4m3 --random 1e400
expect_error "random word"     "$lowp" diff e4m3 --random abc
expect_error "random suffix"   "$lowp" diff e4m3 --random 5x
expect_error "random empty"    "$lowp" diff e4m3 --random ''
expect_error "random missing"  "$lowp" diff e4m3 --random
expect_error "seed 2^64"       "$lowp" diff e4m3 --seed 18446744073709551616 && expect_reason "seed 2^64" "2^64"
expect_error "seed 0x 17 digits" "$lowp" diff e4m3 --seed 0x10000000000000000
expect_error "seed bare 0x"    "$lowp" diff e4m3 --seed 0x
expect_error "seed sign"       "$lowp" diff e4m3 --seed +5
expect_error "seed space"      "$lowp" diff e4m3 --seed ' 5'
# 2^64 - 1 is a seed; "010" is ten (decimal), not eight (octal); 0x hex is taken
"$lowp" diff e4m3 --random 0 --seed 18446744073709551615 > /dev/null 2>&1 && ok || bad "seed 2^64-1 refused"
"$lowp" diff e4m3 --random 010 > "$tmp/d010" 2>&1
"$lowp" diff e4m3 --random 10 > "$tmp/d10" 2>&1
"$lowp" diff e4m3 --random 8 > "$tmp/d8" 2>&1
cmp -s "$tmp/d010" "$tmp/d10" && ! cmp -s "$tmp/d010" "$tmp/d8" && ok || bad "diff --random 010 is not ten"
"$lowp" diff e4m3 --random 4 --seed 0x10 > "$tmp/dx" 2>&1 && "$lowp" diff e4m3 --random 4 --seed 16 > "$tmp/dd" 2>&1 &&
  cmp -s "$tmp/dx" "$tmp/dd" && ok || bad "diff --seed 0x10 differs from --seed 16"
"$lowp" stats --shape 4,1,16 --seed 010 > "$tmp/s010" 2>&1
"$lowp" stats --shape 4,1,16 --seed 10 > "$tmp/s10" 2>&1
"$lowp" stats --shape 4,1,16 --seed 8 > "$tmp/s8" 2>&1
# the first line names the seed in hex: compare the tables
tail -n +2 "$tmp/s010" > "$tmp/t010"; tail -n +2 "$tmp/s10" > "$tmp/t10"; tail -n +2 "$tmp/s8" > "$tmp/t8"
cmp -s "$tmp/t010" "$tmp/t10" && ! cmp -s "$tmp/t010" "$tmp/t8" && ok || bad "stats --seed 010 is not ten"
expect_error "shape 16x"       "$lowp" stats --shape 16x,1,16
expect_error "shape empty dim" "$lowp" stats --shape 16,,16
expect_error "shape two dims"  "$lowp" stats --shape 16,16
expect_error "shape four dims" "$lowp" stats --shape 1,1,1,16
expect_error "shape trailing comma" "$lowp" stats --shape 1,1,16,
expect_error "shape zero"      "$lowp" stats --shape 0,1,16
expect_error "shape float"     "$lowp" calibrate --shape 1e3,1,16
expect_error "shape too big"   "$lowp" calibrate --shape 4294967296,1,16
expect_error "stats seed word" "$lowp" stats --shape 4,1,16 --seed abc
expect_error "calibrate search-max" "$lowp" calibrate --shape 4,1,16 --search-max 5x
expect_error "bench ctx float" "$lowp" bench attn --ctx 1e3
expect_error "attn-sweep seed" "$lowp" attn-sweep --seed 1.5
# lowp vectors reads its numbers with the same parser: "010" is ten there too (it was octal)
expect_error "vectors gen seed sign"   "$lowp" vectors gen --dir "$tmp/vg" --seed -1
expect_error "vectors verify errors"   "$lowp" vectors verify --dir "$tmp" --errors 1e3
expect_error "vectors check-block errors" "$lowp" vectors check-block f --results r --errors 5x
"$lowp" vectors gen-block --dir "$tmp/vb" --seed 010 --commit x > "$tmp/vb.out" 2>&1 &&
  grep -q '(seed 0xa, commit x)' "$tmp/vb.out" && ok || bad "vectors gen-block --seed 010 is not ten: $(cat "$tmp/vb.out")"
# quantize --axis: signed, the same syntax (-0x1 is -1), nothing else
gen "$tmp/ax.npy" 2,32 4
"$lowp" quantize --format nvfp4 --in "$tmp/ax.npy" --out "$tmp/ax1.safetensors" --axis -1 > /dev/null 2>&1
"$lowp" quantize --format nvfp4 --in "$tmp/ax.npy" --out "$tmp/ax2.safetensors" --axis -0x1 > /dev/null 2> "$tmp/err" &&
  cmp -s "$tmp/ax1.safetensors" "$tmp/ax2.safetensors" && ok || bad "--axis -0x1 is not -1: $(cat "$tmp/err")"
expect_error "axis double sign" "$lowp" quantize --format nvfp4 --in "$tmp/ax.npy" --out "$tmp/ax3.safetensors" --axis --1
expect_error "axis float" "$lowp" quantize --format nvfp4 --in "$tmp/ax.npy" --out "$tmp/ax3.safetensors" --axis 1e0
expect_error "axis range" "$lowp" quantize --format nvfp4 --in "$tmp/ax.npy" --out "$tmp/ax3.safetensors" --axis -3
# LOWP_SEED takes the same numbers: a bad one fails before any work (timeout: the old
# parser read 'abc' as 0 and ran the whole conformance check); a hex one is taken, so the
# run reaches the argument error
expect_error "LOWP_SEED word" env LOWP_SEED=abc timeout 120 "$lowp" conform --no-report --frobnicate &&
  expect_reason "LOWP_SEED word" "LOWP_SEED"
expect_error "LOWP_SEED hex" env LOWP_SEED=0x10 "$lowp" conform --no-report --frobnicate &&
  expect_reason "LOWP_SEED hex" "frobnicate"

# ---- (3) outputs that are not regular files -------------------------------------------------
# As root a copy of /dev/null and /dev/full (mknod) is used, so that the test never risks
# the real ones; otherwise the real ones (which an unprivileged run cannot replace).
if mknod "$tmp/null" c 1 3 2> /dev/null && mknod "$tmp/full" c 1 7 2> /dev/null; then
  null=$tmp/null full=$tmp/full
else
  null=/dev/null full=/dev/full
fi
"$lowp" convert --to e4m3 --in "$tmp/in.bin" --out "$null" 2> "$tmp/err" && [ -c "$null" ] && ok ||
  bad "convert --out a null device: exit or type changed ($(cat "$tmp/err"))"
"$lowp" stats --shape 4,1,16 --csv "$null" --json "$null" > /dev/null 2> "$tmp/err" && [ -c "$null" ] && ok ||
  bad "stats --csv/--json a null device ($(cat "$tmp/err"))"
expect_error "out full device" "$lowp" convert --to e4m3 --in "$tmp/in.bin" --out "$full" &&
  expect_reason "out full device" "space"
[ -c "$full" ] && ok || bad "the full device was replaced"
expect_error "stats json full device" "$lowp" stats --shape 4,1,16 --json "$full"
[ -c "$full" ] && ok || bad "the full device was replaced by stats"
# a FIFO with a reader: the bytes go through it and it stays a FIFO
mkfifo "$tmp/fifo"
# (the timeout ends the reader if the FIFO is replaced instead of opened)
timeout 20 sh -c 'od -An -v -tx1 < "$1"' sh "$tmp/fifo" | tr -d ' \n' > "$tmp/fifo.got" &
reader=$!
"$lowp" convert --to e4m3 --in "$tmp/in.bin" --out "$tmp/fifo" 2> "$tmp/err" || bad "convert --out FIFO: $(cat "$tmp/err")"
wait $reader
[ "$(cat "$tmp/fifo.got")" = 7e28 ] && [ -p "$tmp/fifo" ] && ok ||
  bad "FIFO got '$(cat "$tmp/fifo.got")', is a FIFO: $([ -p "$tmp/fifo" ] && echo yes || echo no)"
# a symlink stays a symlink; its target gets the bytes
printf 'old' > "$tmp/target"
ln -s target "$tmp/link"
"$lowp" convert --to e4m3 --in "$tmp/in.bin" --out "$tmp/link" 2> "$tmp/err" &&
  [ -L "$tmp/link" ] && [ "$(hexof "$tmp/target")" = 7e28 ] && ok || bad "--out symlink: $(ls -l "$tmp/link") $(cat "$tmp/err")"
ln -s nowhere "$tmp/dangling"
expect_error "out dangling symlink" "$lowp" convert --to e4m3 --in "$tmp/in.bin" --out "$tmp/dangling"
[ -L "$tmp/dangling" ] && ok || bad "dangling symlink replaced"
mkdir "$tmp/dir"
expect_error "out directory" "$lowp" convert --to e4m3 --in "$tmp/in.bin" --out "$tmp/dir" && expect_reason "out directory" "directory"
expect_error "stats csv directory" "$lowp" stats --shape 4,1,16 --csv "$tmp/dir"
[ -d "$tmp/dir" ] && [ -z "$(ls "$tmp/dir")" ] && ok || bad "directory changed"
[ -z "$(ls "$tmp" | grep '\.tmp\.')" ] && ok || bad "temporary files left: $(ls "$tmp")"

# ---- (9) an output that is an input -------------------------------------------------------
cp "$tmp/in.bin" "$tmp/keep.bin"
expect_error "convert out = in" "$lowp" convert --to e4m3 --in "$tmp/keep.bin" --out "$tmp/keep.bin" && expect_reason "convert out = in" "same file"
ln "$tmp/keep.bin" "$tmp/hard.bin"
expect_error "convert out = in (hard link)" "$lowp" convert --to e4m3 --in "$tmp/keep.bin" --out "$tmp/hard.bin"
cmp -s "$tmp/keep.bin" "$tmp/in.bin" && ok || bad "convert overwrote its input"
gen "$tmp/x.npy" 4,1,16 5
cp "$tmp/x.npy" "$tmp/x.orig"
expect_error "stats json = in" "$lowp" stats --in "$tmp/x.npy" --json "$tmp/x.npy"
expect_error "stats csv = in"  "$lowp" stats --in "$tmp/x.npy" --csv "$tmp/./x.npy"
expect_error "calibrate json = in" "$lowp" calibrate --in "$tmp/x.npy" --json "$tmp/x.npy"
cmp -s "$tmp/x.npy" "$tmp/x.orig" && ok || bad "stats/calibrate overwrote the input"
expect_error "stats csv = json" "$lowp" stats --shape 4,1,16 --csv "$tmp/same.out" --json "$tmp/same.out"
[ ! -e "$tmp/same.out" ] && ok || bad "stats wrote same.out"
gen "$tmp/q.npy" 1,2,64 1
gen "$tmp/k.npy" 16,1,64 2
gen "$tmp/v.npy" 16,1,64 3
cp "$tmp/k.npy" "$tmp/k.orig"
expect_error "attn out = k" "$lowp" attn --q "$tmp/q.npy" --k "$tmp/k.npy" --v "$tmp/v.npy" --kv-format bf16 --out "$tmp/k.npy"
expect_error "attn baseline = v" "$lowp" attn --q "$tmp/q.npy" --k "$tmp/k.npy" --v "$tmp/v.npy" --kv-format bf16 \
  --out "$tmp/o.npy" --baseline "$tmp/v.npy"
cmp -s "$tmp/k.npy" "$tmp/k.orig" && ok || bad "attn overwrote --k"
expect_error "quantize out = in" "$lowp" quantize --format nvfp4 --in "$tmp/x.npy" --out "$tmp/x.npy"

# ---- (10) attn --out: the extension's format ---------------------------------------------
cp "$tmp/k.orig" "$tmp/k.npy" # (a binary that failed above overwrote it)
"$lowp" attn --q "$tmp/q.npy" --k "$tmp/k.npy" --v "$tmp/v.npy" --kv-format bf16 --out "$tmp/o.safetensors" > /dev/null 2>&1
"$lowp" attn --q "$tmp/q.npy" --k "$tmp/k.npy" --v "$tmp/v.npy" --kv-format bf16 --out "$tmp/o.npy" > /dev/null 2>&1
# lowp stats reads a .safetensors file by its header: only real safetensors bytes load,
# and they hold the same [1, 2, 64] values as the .npy
"$lowp" stats --in "$tmp/o.safetensors" --csv "$tmp/st.csv" > /dev/null 2> "$tmp/err" &&
  "$lowp" stats --in "$tmp/o.npy" --csv "$tmp/np.csv" > /dev/null 2>&1 && cmp -s "$tmp/st.csv" "$tmp/np.csv" && ok ||
  bad "attn --out o.safetensors is not a safetensors file of the output: $(cat "$tmp/err")"
[ "$(head -c 6 "$tmp/o.safetensors" | od -An -c | tr -d ' ')" != '223NUMPY' ] && ok || bad "o.safetensors holds .npy bytes"
expect_error "attn out unknown extension" "$lowp" attn --q "$tmp/q.npy" --k "$tmp/k.npy" --v "$tmp/v.npy" --kv-format bf16 --out "$tmp/o.bin"
[ ! -e "$tmp/o.bin" ] && ok || bad "attn wrote o.bin"

# ---- (11) repeated and conflicting options; NUL in --text -------------------------------------
expect_error "to twice"  "$lowp" convert --to e4m3 --to e5m2 --in "$tmp/in.bin" && expect_reason "to twice" "twice"
expect_error "saturate conflict" "$lowp" convert --to e4m3 --saturate --no-saturate --in "$tmp/in.bin" &&
  grep -q -- '--no-saturate.*--saturate' "$tmp/err" && ok || bad "conflict line does not name both: $(cat "$tmp/err")"
expect_error "saturate twice" "$lowp" convert --to e4m3 --saturate --saturate --in "$tmp/in.bin"
expect_error "out twice" "$lowp" convert --to e4m3 --in "$tmp/in.bin" --out "$tmp/a.bin" --out "$tmp/b.bin"
expect_error "stats shape twice" "$lowp" stats --shape 4,1,16 --shape 8,1,16
expect_error "attn q twice" "$lowp" attn --q "$tmp/q.npy" --q "$tmp/q.npy" --k "$tmp/k.npy" --v "$tmp/v.npy" --kv-format bf16 --out "$tmp/o2.npy"
expect_error "conform report conflict" "$lowp" conform --report "$tmp/r.md" --no-report
printf '1.5\n2\0003\n' > "$tmp/nul.txt"
expect_error "text NUL" "$lowp" convert --to e4m3 --text --in "$tmp/nul.txt" && expect_reason "text NUL" "line 2"

# ---- (5) stats --json is JSON for an input with Inf ---------------------------------------
gen "$tmp/inf.npy" 4,1,16 7 inf
if "$lowp" stats --in "$tmp/inf.npy" --json "$tmp/inf.json" > /dev/null 2> "$tmp/err"; then
  python3 -m json.tool "$tmp/inf.json" > /dev/null 2> "$tmp/err" && ok || bad "stats --json with Inf is not JSON: $(cat "$tmp/err")"
  "$lowp" calibrate --in "$tmp/inf.npy" --json "$tmp/cinf.json" > /dev/null 2>&1
  python3 -m json.tool "$tmp/cinf.json" > /dev/null 2> "$tmp/err" && ok || bad "calibrate --json with Inf is not JSON: $(cat "$tmp/err")"
else
  bad "stats on an input with Inf: $(cat "$tmp/err")"
fi

# ---- (6) bench attn --format ------------------------------------------------------------
expect_error "bench attn format" "$lowp" bench attn --format nope && expect_reason "bench attn format" "nope"

# ---- (15) convert streams its input --------------------------------------------------------
# 192 MiB of binary32 zeros through stdin with 50 MB of address space above what `lowp
# --help` needs (its own mappings: the program, its libraries and, in a CUDA build, the
# kernels' fatbin, tens of MB; found here in 10 MB steps): a convert that held the whole
# input could not run; the streamed one gives 48 Mi zero codes. (Skipped where the limit
# cannot be set, as under ASan.)
if [ "$can_cap" = 1 ]; then
  base=10000
  while [ "$base" -lt 1000000 ] && ! sh -c 'ulimit -v "$1" && exec "$0" --help' "$lowp" "$base" > /dev/null 2>&1; do
    base=$((base + 10000))
  done
  cap=$((base + 50000))
  got=$(sh -c 'ulimit -v "$1" && head -c 201326592 /dev/zero | "$0" convert --to e4m3 | tr -d "\000" | wc -c; exit $?' "$lowp" "$cap" 2> "$tmp/err")
  n=$(sh -c 'ulimit -v "$1" && head -c 201326592 /dev/zero | "$0" convert --to e4m3 | wc -c' "$lowp" "$cap" 2>> "$tmp/err")
  [ "$got" -eq 0 ] && [ "$n" -eq 50331648 ] && ok || bad "convert of 192 MiB in $cap kB ($base kB for --help): $n codes, $got nonzero ($(cat "$tmp/err"))"
fi

cli_test_end
