#!/bin/sh
# tests/test_memory_cli.sh LOWP SANITIZE: the long tensor commands stay within a memory
# budget derived from their input, so that a change that holds the input again in binary64
# (or twice) fails here instead of on a user's 1 GiB cache.
#
# Each run is bounded by `ulimit -v` (address space, which also counts what is reserved
# and never touched) at
#     budget = FACTOR x input bytes + ALLOW
# with FACTOR 3 and ALLOW 128 MiB. Where the numbers come from (measured with the smallest
# ulimit -v under which each run exits 0, OMP_NUM_THREADS=2):
#   - ALLOW: a run on a tiny input needs 47 MiB (the CPU-only build) or 71 MiB (the build
#     with the CUDA host oracle): libraries, two OpenMP thread stacks, malloc's arenas.
#   - attn holds the float K and V (1 x input), the quantized cache (<= 0.5 x: BF16 codes;
#     NVFP4 0.14 x), and for one KV head at a time its effective and unquantized K/V in
#     binary64 (4 arrays of 2 / H x input with H KV heads: 0.5 x at H = 8); loading holds
#     K while V's file bytes are read and parsed (1.5 x). K and V [32768, 8, 64] F32 (two
#     files, 128 MiB read): 235 MiB, about 1.5 x + ALLOW; before the per-head rework it
#     held every binary64 copy of K and V at once and needed 694 MiB (5 x).
#   - calibrate holds the input, its codes and block scales (<= 0.5 x), the per-block
#     statistics (about 0.5 x for 16-element blocks) and one head slice; loading 2 x for
#     a moment. [32768, 8, 64] (64 MiB): 151 MiB (1.6 x + fixed); before, 471 MiB (6.6 x:
#     padded copies, head slices and two binary64 reconstructions).
#   - stats holds the input, one format's codes (<= 0.5 x) and the per-block statistics
#     (about 0.5 x): 151 MiB on the same 64 MiB (1.6 x + fixed); before, 279 MiB (3.6 x:
#     a binary64 reconstruction per row). Its FACTOR is 2, which that fails.
# So FACTOR 3 (2 for stats) leaves each run at least 0.4 x its input of room and fails
# the old layouts.
#
# Inputs are written here (a repeated row of 16 floats; the values do not change what is
# held, only the inputs' sizes do), so no Python is needed. Skipped (77) under ASan, whose
# shadow memory reserves terabytes of address space, and where ulimit -v is not available.
set -u
lowp=$1
sanitize=${2:-OFF}
case "$sanitize" in
ON | on | 1 | TRUE | true | YES | yes)
  echo "test_memory_cli: skipped: a sanitized build reserves terabytes of address space (ASan's shadow), so ulimit -v cannot bound it"
  exit 77
  ;;
esac
if ! (ulimit -v 1048576) 2>/dev/null; then
  echo "test_memory_cli: skipped: this shell cannot set ulimit -v"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
FACTOR=3
ALLOW_MIB=128

# npy FILE T H D: a float32 .npy [T, H, D] (T H and D powers of two, D >= 4) whose rows
# all hold 1, 0.5, -0.75, 1.5 repeated; the header as np.save writes it (64-byte aligned).
npy() {
  f=$1 T=$2 H=$3 D=$4
  dict="{'descr': '<f4', 'fortran_order': False, 'shape': ($T, $H, $D), }"
  len=$((${#dict} + 1))
  pad=$(((64 - (10 + len) % 64) % 64))
  hl=$((len + pad))
  {
    printf '\223NUMPY\001\000'
    printf "\\$(printf %o $((hl % 256)))\\$(printf %o $((hl / 256)))"
    printf '%s' "$dict"
    printf "%${pad}s" ''
    printf '\n'
  } >"$f.hdr"
  printf '\000\000\200\077\000\000\000\077\000\000\100\277\000\000\300\077' >"$f.row"
  n=4
  while [ $n -lt "$D" ]; do cat "$f.row" "$f.row" >"$f.r2" && mv "$f.r2" "$f.row"; n=$((n * 2)); done
  n=1
  while [ $n -lt $((T * H)) ]; do cat "$f.row" "$f.row" >"$f.r2" && mv "$f.r2" "$f.row"; n=$((n * 2)); done
  cat "$f.hdr" "$f.row" >"$f"
  rm -f "$f.hdr" "$f.row"
}

# bounded NAME INPUT_BYTES ARGS...: lowp ARGS must exit 0 under the budget (FACTOR as set)
bounded() {
  name=$1 bytes=$2
  shift 2
  kib=$((FACTOR * bytes / 1024 + ALLOW_MIB * 1024))
  (
    ulimit -v "$kib"
    OMP_NUM_THREADS=2 exec "$lowp" "$@"
  ) >"$tmp/$name.out" 2>"$tmp/$name.err"
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "FAIL $name: exit $rc under ulimit -v $((kib / 1024)) MiB ($FACTOR x $((bytes >> 20)) MiB input + $ALLOW_MIB MiB): $(head -c 300 "$tmp/$name.err")"
    fails=$((fails + 1))
    return 1
  fi
  echo "ok $name: within $((kib / 1024)) MiB ($FACTOR x $((bytes >> 20)) MiB input + $ALLOW_MIB MiB)"
  return 0
}

npy "$tmp/k.npy" 32768 8 64
npy "$tmp/q.npy" 1 32 64
kbytes=$(wc -c <"$tmp/k.npy")
qbytes=$(wc -c <"$tmp/q.npy")

cp "$tmp/k.npy" "$tmp/v.npy" # another file: attn loads it apart from K (one file for both is read once)

# attn: K and V are each read
if bounded attn $((2 * kbytes + qbytes)) attn --q "$tmp/q.npy" --k "$tmp/k.npy" --v "$tmp/v.npy" \
  --kv-format nvfp4 --out "$tmp/o.npy"; then
  grep -q '^# output: binary32, correctly rounded' "$tmp/attn.out" && [ -s "$tmp/o.npy" ] ||
    { echo "FAIL attn: no output line or no output file"; fails=$((fails + 1)); }
fi
# calibrate, one spec (the memory does not grow with the specs: they run one after another)
if bounded calibrate "$kbytes" calibrate --in "$tmp/k.npy" --format fp8_e5m2; then
  grep -q '^fp8_e5m2 ' "$tmp/calibrate.out" || { echo "FAIL calibrate: no fp8_e5m2 row"; fails=$((fails + 1)); }
fi
# stats, every (format, recipe) row
FACTOR=2
if bounded stats "$kbytes" stats --in "$tmp/k.npy"; then
  grep -q '^nvfp4 ' "$tmp/stats.out" || { echo "FAIL stats: no nvfp4 row"; fails=$((fails + 1)); }
fi

if [ $fails -ne 0 ]; then
  echo "test_memory_cli: $fails failed"
  exit 1
fi
echo "test_memory_cli: all passed"
