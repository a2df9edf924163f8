#!/bin/sh
# tests/test_cli.sh LOWP: the `lowp convert` / `table` / `diff` contract, byte for byte,
# and the bad-input rules (one line on stderr, exit 2, no output file left behind).
# Expected bytes are written out here from the format definitions and ref/profiles.md.
. "$(dirname "$0")/lib/cli_test.sh"
cli_test_start cli "$1"
cli_no_output=o.bin # what a refused command must not leave (expect_error)

# hex string -> file of bytes
bytes() { perl -e "print pack(\"H*\", join(\"\", @ARGV))" "$@"; }

expect_bytes() { # name expected-hex command...
  name=$1 want=$2; shift 2
  if "$@" > "$tmp/out" 2> "$tmp/err"; then
    got=$(hexof "$tmp/out")
    [ "$got" = "$want" ] && ok || bad "$name: got $got expected $want"
  else
    bad "$name: exit $? ($(cat "$tmp/err"))"
  fi
}

# Inputs as little-endian binary32: 464, nextafter(464), 448, -0, +Inf, -NaN, 2^-10, 1.5*2^-9
bytes 0000e843 0100e843 0000e043 00000080 0000807f 0000c0ff 0000803a 0000403b > "$tmp/in.bin"
expect_bytes "e4m3 cuda default"   7e7e7e807e7f0002 "$lowp" convert --to e4m3 --in "$tmp/in.bin"
expect_bytes "e4m3 cuda nosat"     7e7f7e807f7f0002 "$lowp" convert --to e4m3 --no-saturate --in "$tmp/in.bin"
expect_bytes "e4m3 torch"          7e7f7e807fff0002 "$lowp" convert --to e4m3 --compat torch --in "$tmp/in.bin"
expect_bytes "e4m3 ml_dtypes stdin" 7e7f7e807fff0002 sh -c "\"$lowp\" convert --to e4m3 --compat ml_dtypes < \"$tmp/in.bin\""
expect_bytes "e5m2 cuda"           5f5f5f807b7f141a "$lowp" convert --to e5m2 --in "$tmp/in.bin"
expect_bytes "e2m1 cuda"           0707070807070000 "$lowp" convert --to e2m1 --in "$tmp/in.bin"
expect_bytes "e2m1 ml_dtypes"      0707070807000000 "$lowp" convert --to e2m1 --compat ml_dtypes --in "$tmp/in.bin"
expect_bytes "e8m0 cuda rz"        87878700feff7576 "$lowp" convert --to e8m0 --round rz --in "$tmp/in.bin"
expect_bytes "bf16 cuda le"        e843e843e0430080807fff7f803a403b "$lowp" convert --to bf16 --in "$tmp/in.bin"
expect_bytes "f16 ocp"             405f405f005f0080007c00fe0014001a "$lowp" convert --to f16 --compat ocp --in "$tmp/in.bin"
expect_bytes "empty input"         "" "$lowp" convert --to e4m3 --in /dev/null

# --out writes the same bytes atomically
"$lowp" convert --to e4m3 --in "$tmp/in.bin" --out "$tmp/o.bin" && [ "$(hexof "$tmp/o.bin")" = 7e7e7e807e7f0002 ] && ok || bad "--out"
rm -f "$tmp/o.bin"

# --text
printf '464\n0x1.d2p+8\n-nan\n' > "$tmp/in.txt"
"$lowp" convert --to e4m3 --text --in "$tmp/in.txt" > "$tmp/t.out" 2>&1
printf '464 -> 0x7e (448)\n0x1.d2p+8 -> 0x7e (448)\n-nan -> 0x7f (nan)\n' > "$tmp/t.want"
cmp -s "$tmp/t.out" "$tmp/t.want" && ok || bad "--text: $(cat "$tmp/t.out")"

# Unsupported combinations and bad input
expect_error "torch e2m1"       "$lowp" convert --to e2m1 --compat torch --in "$tmp/in.bin" --out "$tmp/o.bin"
expect_error "cuda e8m0 rn"     "$lowp" convert --to e8m0 --in "$tmp/in.bin" --out "$tmp/o.bin"
expect_error "cuda e4m3 rz"     "$lowp" convert --to e4m3 --round rz --in "$tmp/in.bin" --out "$tmp/o.bin"
expect_error "e2m1 nosat"       "$lowp" convert --to e2m1 --no-saturate --in "$tmp/in.bin" --out "$tmp/o.bin"
expect_error "ml_dtypes sat"    "$lowp" convert --to e4m3 --compat ml_dtypes --saturate --in "$tmp/in.bin" --out "$tmp/o.bin"
expect_error "unknown format"   "$lowp" convert --to e3m4 --in "$tmp/in.bin" --out "$tmp/o.bin"
expect_error "unknown profile"  "$lowp" convert --to e4m3 --compat jax --in "$tmp/in.bin" --out "$tmp/o.bin"
expect_error "unknown mode"     "$lowp" convert --to e4m3 --round up --in "$tmp/in.bin" --out "$tmp/o.bin"
expect_error "missing --to"     "$lowp" convert --in "$tmp/in.bin" --out "$tmp/o.bin"
expect_error "unknown option"   "$lowp" convert --to e4m3 --fast --in "$tmp/in.bin" --out "$tmp/o.bin"
expect_error "missing value"    "$lowp" convert --to
expect_error "unreadable input" "$lowp" convert --to e4m3 --in "$tmp/does-not-exist" --out "$tmp/o.bin"
bytes 0000e84300 > "$tmp/odd.bin"
expect_error "length not x4"    "$lowp" convert --to e4m3 --in "$tmp/odd.bin" --out "$tmp/o.bin"
expect_error "unwritable out"   "$lowp" convert --to e4m3 --in "$tmp/in.bin" --out "$tmp/no/such/dir/o.bin"
printf '1.5\nabc\n' > "$tmp/bad.txt"
expect_error "text not number"  "$lowp" convert --to e4m3 --text --in "$tmp/bad.txt" --out "$tmp/o.bin"
grep -q 'line 2' "$tmp/err" && ok || bad "text error names line 2: $(cat "$tmp/err")"
printf '1.5\n\n' > "$tmp/bad2.txt"
expect_error "text empty line"  "$lowp" convert --to e4m3 --text --in "$tmp/bad2.txt" --out "$tmp/o.bin"
expect_error "unknown command"  "$lowp" frobnicate
expect_error "table bad format" "$lowp" table e9m9
# lowp gpu bench refuses a bad option before it looks for a GPU (or says lowp has no CUDA)
expect_error "gpu bench bad layout" "$lowp" gpu bench --layout diagonal
expect_error "gpu bench bad option" "$lowp" gpu bench --frobnicate
expect_error "gpu bench bad split" "$lowp" gpu bench --chunk 17
expect_error "gpu bench negative settle" "$lowp" gpu bench --settle-ms-per-gb -1
# the decode ring's bounds: refused as out of range (not as unknown options)
expect_error "gpu bench stages past 8" "$lowp" gpu bench --stages 9
grep -q -e 'in \[2, 8\]' -e 'without CUDA' "$tmp/err" && ok || bad "--stages 9: $(cat "$tmp/err")"
expect_error "gpu bench one stage" "$lowp" gpu bench --stages 1
expect_error "gpu bench no warps" "$lowp" gpu bench --warps 0
grep -q -e 'in \[1, 4\]' -e 'without CUDA' "$tmp/err" && ok || bad "--warps 0: $(cat "$tmp/err")"
expect_error "gpu bench warps past 4" "$lowp" gpu bench --warps 5

# lowp table: every code once, values exact
[ "$("$lowp" table e4m3 | grep -c '^0x')" = 256 ] && ok || bad "table e4m3 has 256 codes"
"$lowp" table e4m3 | grep -q '^0x7e 0 15 6 448 0x1.cp+8 max$' && ok || bad "table e4m3 0x7e row"
"$lowp" table e2m1 | grep -q '^0x1 0 0 1 0.5 0x1p-1 subnormal$' && ok || bad "table e2m1 0x1 row"
[ "$("$lowp" table bf16 | grep -c '^0x')" = 65536 ] && ok || bad "table bf16 has 65536 codes"

# lowp diff: the documented E4M3 NaN-sign disagreement appears with an example
"$lowp" diff e4m3 > "$tmp/diff.txt" && grep -q '^| -nan | .* | 0x7f | 0x7f | 0xff | 0xff |' "$tmp/diff.txt" && ok || bad "diff e4m3 -nan row"

cli_test_end
